"""RMS normalization on the ``rms_norm_fwd``/``rms_norm_bwd`` targets.

Three ops (see :mod:`xla_ffi_rs.binding`):

* ``rms_norm_fwd_op(x, weight; eps) -> (y, inv_rms)``: the forward target.
* ``rms_norm_tangent_op(dx, dweight, x, weight, inv_rms; eps) -> (dy,)``: the
  forward-mode tangent, linear in ``(dx, dweight)``, computed by jnp code (a
  dedicated forward path, no transposition) from the forward kernel's
  ``inv_rms``. Its transpose is the backward target, so ``grad`` runs the
  ``rms_norm_bwd`` kernel.
* ``rms_norm_bwd_op(dy, x, weight; eps) -> (dx, dweight)``: the backward
  target, which recomputes ``inv_rms`` from ``x`` while it reads each row
  (it needs nothing from the forward), with a JVP rule of its own so
  second-order derivatives work.

What the targets compute: ``rms_norm_fwd``: ``y = x * inv_rms * weight``
(dtype ``result_type(x, weight)``) and ``inv_rms = 1 / sqrt(mean(x**2) + eps)`` over
the trailing ``weight.ndim`` axes (float32, float64 if ``x`` or ``weight`` is), with
``weight.shape == x.shape[-weight.ndim:]`` and ``eps`` a float >= 0 (at most float32's
largest unless ``x`` or ``weight`` is float64); ``rms_norm_bwd``: ``dx`` (like ``x``) and
``dweight`` (like ``weight``, summed over the leading axes) from ``dy``, ``x`` and
``weight``, with ``inv_rms`` recomputed from ``x``, bit for bit the forward's.

The two target ops are built from their handlers' declarations
(``binding.ops``: operands, dtypes, shapes, attributes, sharding); their
derivatives, and vmap over a batched weight in one call, are written here.
Platforms without the targets lower the jnp reference formulas, public here:
:func:`rms_norm_fwd_jnp`, :func:`rms_norm_bwd_jnp`, :func:`rms_norm_dweight_jnp`,
:func:`rms_norm_tangent_jnp`, :func:`rms_norm_inv_rms_jnp`. They compute what the
Rust kernels compute, in the same accumulation precision.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from xla_ffi_rs import rms_norm
    >>> x, w = jnp.ones((2, 3)), jnp.full((3,), 2.0)
    >>> rms_norm(x, w, eps=0.0).tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
    >>> dx, dw = jax.grad(lambda x, w: rms_norm(x, w).sum(), argnums=(0, 1))(x, w)
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from xla_ffi_rs import _native, binding
from xla_ffi_rs import sharding as _sharding
from xla_ffi_rs._compat import ShapedArray, constrain_to_type, min_dim, mlir, standard_numpy
from xla_ffi_rs._validation import (
    array_like,
    check_eps_fits,
    check_kernel_float,
    check_nonnegative_float,
    promote_weak,
    weak_if_all_weak,
)
from xla_ffi_rs.binding import (
    BatchDim,
    Op,
    batch_size,
    is_linear_input,
    move_batch_axis_to_front,
    vmap_batching,
)
from xla_ffi_rs.dtypes import accumulation_dtype, result_dtype
from xla_ffi_rs.ops.rms_norm_tp import like_normalized_axes, rms_norm_tensor_parallel, tensor_parallel_axes

__all__ = [
    "bwd_workspace_aval",
    "bwd_workspace_rows",
    "rms_norm",
    "rms_norm_bwd_jnp",
    "rms_norm_bwd_op",
    "rms_norm_dweight_jnp",
    "rms_norm_fwd_jnp",
    "rms_norm_fwd_op",
    "rms_norm_inv_rms_jnp",
    "rms_norm_tangent_jnp",
    "rms_norm_tangent_op",
]


# -- jnp reference formulas (lowered where no target is registered) -------------


def _norm_axes(x: jax.Array, weight_ndim: int) -> tuple[int, ...]:
    return tuple(range(x.ndim - weight_ndim, x.ndim))


def _expand(r: jax.Array, weight_ndim: int) -> jax.Array:
    return r.reshape(r.shape + (1,) * weight_ndim)


@standard_numpy()
def rms_norm_inv_rms_jnp(x: jax.Array, weight: jax.Array, *, eps: float) -> jax.Array:
    """inv_rms = 1 / sqrt(mean(x**2) + eps) over the trailing ``weight.ndim`` axes,
    in the accumulation dtype (one fused reduction). Rows of no elements
    (``weight.size == 0``) have mean 0, as in the kernels: ``1 / sqrt(eps)``."""
    acc = accumulation_dtype(x.dtype, weight.dtype)
    xa = x.astype(acc)
    axes = _norm_axes(x, weight.ndim)
    mean = jnp.mean(xa * xa, axis=axes) if weight.size else jnp.sum(xa, axis=axes)
    return jax.lax.rsqrt(mean + jnp.asarray(eps, acc))


@standard_numpy()
def rms_norm_fwd_jnp(x: jax.Array, weight: jax.Array, *, eps: float) -> tuple[jax.Array, jax.Array]:
    """The jnp reference of the ``rms_norm_fwd`` target: ``(y, inv_rms)`` in the
    kernels' accumulation dtype (platforms without the target lower this).

    >>> import jax.numpy as jnp
    >>> y, inv = rms_norm_fwd_jnp(jnp.ones((2, 4), jnp.float16), jnp.ones(4, jnp.bfloat16), eps=1e-5)
    >>> str(y.dtype), str(inv.dtype)
    ('float32', 'float32')
    """
    acc = accumulation_dtype(x.dtype, weight.dtype)
    inv = rms_norm_inv_rms_jnp(x, weight, eps=eps)
    y = x.astype(acc) * _expand(inv, weight.ndim) * weight.astype(acc)
    return y.astype(result_dtype(x.dtype, weight.dtype)), inv


@standard_numpy()
def rms_norm_bwd_jnp(dy: jax.Array, x: jax.Array, weight: jax.Array, *, eps: float) -> tuple[jax.Array, jax.Array]:
    """The jnp reference of the ``rms_norm_bwd`` target: ``(dx, dweight)``, with
    ``inv_rms`` recomputed from ``x`` as the target does."""
    inv_rms = rms_norm_inv_rms_jnp(x, weight, eps=eps)
    acc = inv_rms.dtype
    n = weight.ndim
    r = _expand(inv_rms, n)
    g, xa = dy.astype(acc) * weight.astype(acc), x.astype(acc)
    proj = jnp.mean(g * xa, axis=_norm_axes(x, n), keepdims=True)
    # r^3 applied one factor at a time: r**3 overflows for a row of small norm with
    # eps 0 (float32: rms below 1.4e-13) where dx is finite (the kernel does the same).
    dx = r * g - xa * (r * (r * (r * proj)))
    return dx.astype(x.dtype), _dweight(dy, x, weight, inv_rms)


@standard_numpy()
def rms_norm_dweight_jnp(dy: jax.Array, x: jax.Array, weight: jax.Array, *, eps: float) -> jax.Array:
    """dweight = sum over the leading axes of dy * x * inv_rms (one fused reduction,
    ``inv_rms`` recomputed from ``x``).

    The one formula for the weight's gradient: the fallback's, the op's under
    partitioning (where XLA completes the sum with an all-reduce) and, vmapped,
    the per-example one of the batching rule.
    """
    return _dweight(dy, x, weight, rms_norm_inv_rms_jnp(x, weight, eps=eps))


def _dweight(dy: jax.Array, x: jax.Array, weight: jax.Array, inv_rms: jax.Array) -> jax.Array:
    acc = inv_rms.dtype
    r = _expand(inv_rms, weight.ndim)
    dw = jnp.sum(dy.astype(acc) * x.astype(acc) * r, axis=tuple(range(x.ndim - weight.ndim)))
    return dw.astype(weight.dtype)


@standard_numpy()
def rms_norm_tangent_jnp(
    dx: jax.Array, dweight: jax.Array, x: jax.Array, weight: jax.Array, inv_rms: jax.Array, *, eps: float = 0.0
) -> tuple[jax.Array]:
    """The forward-mode tangent of ``y`` (the ``rms_norm_tangent`` op), linear in ``(dx, dweight)``.

    ``eps`` is the op's parameter, for its transpose (the backward target); the
    formula takes it from ``inv_rms``."""
    acc = inv_rms.dtype
    n = weight.ndim
    r = _expand(inv_rms, n)
    weight, dweight = like_normalized_axes(x, weight), like_normalized_axes(x, dweight)
    xa, dxa, wa = x.astype(acc), dx.astype(acc), weight.astype(acc)
    dr = -(r * (r * (r * jnp.mean(xa * dxa, axis=_norm_axes(x, n), keepdims=True))))  # no r**3 overflow
    dy = (dxa * r + xa * dr) * wa + xa * r * dweight.astype(acc)
    return (dy.astype(result_dtype(x.dtype, weight.dtype)),)


# -- ops ----------------------------------------------------------------------


def bwd_workspace_rows(rows: int) -> int:
    """The row count of the CUDA backward's workspace for ``rows`` normalized rows:
    one per block of the kernel (at most 1024), read from the Rust
    ``bwd_workspace_rows``, the one source of that rule.

    >>> bwd_workspace_rows(17)
    2
    """
    return _native.bwd_workspace_rows(rows)


def bwd_workspace_aval(x: ShapedArray, weight: ShapedArray) -> ShapedArray:
    """The CUDA backward's extra result: per-block dweight partials, summed on the
    GPU in a fixed order (no atomics), so dweight is the same on every run; shape
    ``(bwd_workspace_rows(rows), weight.size)`` in the accumulation dtype."""
    rows = math.prod(x.shape[: x.ndim - weight.ndim])
    if isinstance(rows, (int, np.integer)):
        blocks = bwd_workspace_rows(int(rows))
    else:
        # A symbolic row count (jax.export): the Rust rule, rows.div_ceil(16).clamp(1, 1024),
        # as jax.export's dimension arithmetic; tests/test_export_symbolic.py checks the two agree.
        blocks = min_dim((rows + 15) // 16, 1024)  # at least 1: a symbolic dimension is >= 1
    return ShapedArray((blocks, math.prod(weight.shape)), accumulation_dtype(x.dtype, weight.dtype))


# Operands, dtypes, shapes, attributes, vmap and sharding: from the handlers'
# declarations (crates/ops/src/rms_norm). dweight sums over the batch axes: its
# formula completes it when the call is split, and gives it per example under vmap.
_OPS = binding.ops(
    _native.declarations(),
    rms_norm_fwd={"jnp_impl": rms_norm_fwd_jnp},
    rms_norm_bwd={
        "jnp_impl": rms_norm_bwd_jnp,
        "reductions": {1: rms_norm_dweight_jnp},
        "extra_results": {"cuda": lambda dy, x, weight, **_: [bwd_workspace_aval(x, weight)]},
    },
)
rms_norm_fwd_op, rms_norm_bwd_op = _OPS["rms_norm_fwd"], _OPS["rms_norm_bwd"]
_FWD = rms_norm_fwd_op.declaration
assert _FWD is not None


def kernel_or_formula(op: Op, x_index: int) -> None:
    """Lower ``op`` to its target when the partitioner is sure to see whole rows of
    operand ``x_index`` (one device; a mesh whose explicit axes split only the
    batch), and to its jnp formula otherwise (auto mesh axes, on which the split of
    the normalized axes is decided after lowering).

    The target is partitioned by batch axes only, so XLA would gather a split
    normalized axis before the call. XLA partitions the formula's per-row sums as
    it does any reduction: partial sums per shard and one all-reduce of one value
    per row when the normalized axes are split, nothing when they are whole.
    """
    assert op.jnp_impl is not None
    formula = mlir.lower_fun(op.jnp_impl, multiple_results=True)
    for platform, target in op.targets.items():
        kernel = op._ffi_lowering(target, platform)

        def lowering(ctx: Any, *operands: Any, _kernel: Any = kernel, **params: Any) -> Any:
            x, weight = ctx.avals_in[x_index], ctx.avals_in[x_index + 1]
            if _sharding.known_unsplit(ctx, x, range(x.ndim - weight.ndim, x.ndim)):
                return _kernel(ctx, *operands, **params)
            # The formula's results typed as the op's are (its own types follow jnp's
            # rules: dx would take a split weight's split, unlike x).
            outs = formula(ctx, *operands, **params)
            return [constrain_to_type(ctx, o, a) for o, a in zip(outs, ctx.avals_out, strict=True)]

        op.def_lowering(platform, lowering)


kernel_or_formula(rms_norm_fwd_op, 0)
kernel_or_formula(rms_norm_bwd_op, 1)


def _tangent_abstract_eval(
    dx: ShapedArray,
    dweight: ShapedArray,
    x: ShapedArray,
    weight: ShapedArray,
    inv_rms: ShapedArray,
    *,
    eps: float = 0.0,
) -> list[ShapedArray]:
    """dy is shaped like y: the forward handler's rule. The tangents are typed like
    their primals and ``inv_rms`` like the forward's, or a TypeError names the operand."""
    y, inv = _FWD.infer(x, weight)[0]  # type: ignore[union-attr]
    checks = (
        (0, "dx", dx, x, "x"),
        (1, "dweight", dweight, weight, "weight"),
        (4, "inv_rms", inv_rms, inv, "the forward's inv_rms"),
    )
    for i, name, got, want, like in checks:
        if (tuple(got.shape), got.dtype) != (tuple(want.shape), want.dtype):
            raise TypeError(
                f"rms_norm_tangent: operand {i} ({name}): expected {want.str_short()} (as {like} is), "
                f"got {got.str_short()}"
            )
    return [y]


#: The forward-mode tangent: jnp code, no target; its operands carry the batch
#: axes where the forward's do (dx, dweight like x, weight; inv_rms like its result).
rms_norm_tangent_op = Op(
    "rms_norm_tangent",
    abstract_eval=_tangent_abstract_eval,
    jnp_impl=rms_norm_tangent_jnp,
    # No target to partition: this only types dy's sharding like dx's.
    num_batch_dims=lambda dx, dweight, x, weight, inv_rms, **_: _FWD.infer(x, weight)[1],  # type: ignore[union-attr]
    batched=([*_FWD.batched_in, *_FWD.batched_in, _FWD.batched_out[1]], _FWD.batched_out[:1]),
)


# -- differentiation ----------------------------------------------------------

Arrays = tuple[jax.Array, ...]


@rms_norm_fwd_op.def_jvp
@standard_numpy()
def _fwd_jvp(primals: Arrays, tangents: Arrays, *, eps: float) -> tuple[Arrays, Arrays]:
    """Forward mode: y' from the linear tangent op, inv_rms' in jnp, both from
    the forward kernel's inv_rms.

    ``grad`` transposes the tangent op into the backward target, which takes
    ``(dy, x, weight)`` and recomputes inv_rms itself: the forward's inv_rms is a
    residual nothing in the gradient reads. Where y is unused too (``grad`` of a
    loss linear in y, e.g. ``sum(y * g)``) XLA drops the forward call, and the
    gradient program is the backward kernel alone, one read of ``dy`` and ``x``.
    """
    (x, weight), (dx, dweight) = primals, tangents
    y, inv_rms = rms_norm_fwd_op(x, weight, eps=eps)
    (dy,) = rms_norm_tangent_op(dx, dweight, x, weight, inv_rms, eps=eps)
    axes = tuple(range(x.ndim - weight.ndim, x.ndim))
    xa, dxa = x.astype(inv_rms.dtype), dx.astype(inv_rms.dtype)
    d_inv_rms = -(inv_rms * (inv_rms * (inv_rms * jnp.mean(xa * dxa, axis=axes))))  # no inv_rms**3 overflow
    return (y, inv_rms), (dy, d_inv_rms)


@rms_norm_tangent_op.def_transpose
def _tangent_transpose(
    cts: Arrays, dx: Any, dweight: Any, x: jax.Array, weight: jax.Array, inv_rms: jax.Array, *, eps: float
) -> list[jax.Array | None]:
    """Reverse mode: the backward target computes both cotangents at once
    (recomputing inv_rms from x: the residual is not read)."""
    (ct_y,) = cts
    ct_x, ct_weight = rms_norm_bwd_op(ct_y, x, weight, eps=eps)
    return [
        ct_x if is_linear_input(dx) else None,
        ct_weight if is_linear_input(dweight) else None,
        None,
        None,
        None,
    ]


@rms_norm_tangent_op.def_jvp
@standard_numpy()
def _tangent_jvp(primals: Arrays, tangents: Arrays, *, eps: float) -> tuple[Arrays, Arrays]:
    """Second order through forward mode: differentiate the jnp formula."""
    outs = rms_norm_tangent_op(*primals, eps=eps)
    _, t_outs = jax.jvp(rms_norm_tangent_jnp, primals, tangents)
    return outs, t_outs


@rms_norm_bwd_op.def_jvp
@standard_numpy()
def _bwd_jvp(primals: Arrays, tangents: Arrays, *, eps: float) -> tuple[Arrays, Arrays]:
    """Second order through reverse mode: kernel for values, jnp for tangents."""
    outs = rms_norm_bwd_op(*primals, eps=eps)
    _, t_outs = jax.jvp(lambda dy, x, w: rms_norm_bwd_jnp(dy, x, w, eps=eps), primals, tangents)
    return outs, t_outs


# -- batching -----------------------------------------------------------------


def _broadcast_core(w: jax.Array, ndim: int) -> jax.Array:
    """(B, *core) -> (B, 1, ..., 1, *core) with ``ndim`` axes in all."""
    return w.reshape((w.shape[0],) + (1,) * (ndim - w.ndim) + w.shape[1:])


@rms_norm_fwd_op.def_batching
@standard_numpy()
def _fwd_batching(operands: Any, dims: tuple[BatchDim, ...], *, eps: float) -> tuple[Arrays, tuple[int, int]]:
    """One kernel call; a batched weight is applied after a call with unit weight.

    The unit weight is in the accumulation dtype, so that call returns ``x * inv_rms``
    unrounded, and ``y`` is rounded once, after the weight: the kernel's
    ``(x * inv_rms) * w``, bit for bit a call per example (a unit weight of a 16-bit
    dtype rounded ``y`` twice)."""
    size = batch_size(operands, dims)
    (x, weight), (x_dim, w_dim) = operands, dims
    x = move_batch_axis_to_front(x, x_dim, size)
    if w_dim is None:
        return rms_norm_fwd_op(x, weight, eps=eps), (0, 0)
    weight = move_batch_axis_to_front(weight, w_dim, size)
    acc = accumulation_dtype(x.dtype, weight.dtype)
    y, inv_rms = rms_norm_fwd_op(x, jnp.ones(weight.shape[1:], acc), eps=eps)
    y = y * _broadcast_core(weight, y.ndim).astype(acc)
    return (y.astype(result_dtype(x.dtype, weight.dtype)), inv_rms), (0, 0)


@rms_norm_bwd_op.def_batching
@standard_numpy()
def _bwd_batching(operands: Any, dims: tuple[BatchDim, ...], *, eps: float) -> tuple[Arrays, tuple[int, int]]:
    """One kernel call for dx; dweight per batch element by a jnp reduction.

    The kernel sums dweight over all leading axes, batch included, so under
    vmap the per-example dweight = sum(dy * x * inv_rms) is reduced in jnp.
    A batched weight scales ``dy`` in the accumulation dtype before a call with a
    unit weight of that dtype: the product the kernel forms, unrounded, so ``dx``
    is bit for bit a call per example's.
    """
    size = batch_size(operands, dims)
    dy, x, weight = operands
    dy_dim, x_dim, w_dim = dims
    dy, x = (move_batch_axis_to_front(a, d, size) for a, d in ((dy, dy_dim), (x, x_dim)))
    if w_dim is None:
        dx, _ = rms_norm_bwd_op(dy, x, weight, eps=eps)
        core = weight
    else:
        weight = move_batch_axis_to_front(weight, w_dim, size)
        acc = accumulation_dtype(x.dtype, weight.dtype)
        dy_scaled = dy.astype(acc) * _broadcast_core(weight, dy.ndim).astype(acc)
        dx, _ = rms_norm_bwd_op(dy_scaled, x, jnp.ones(weight.shape[1:], acc), eps=eps)
        core = jnp.ones(weight.shape[1:], weight.dtype)
    dweight = jax.vmap(lambda dy, x: rms_norm_dweight_jnp(dy, x, core, eps=eps))(dy, x)
    return (dx, dweight), (0, 0)


rms_norm_tangent_op.def_batching(vmap_batching(rms_norm_tangent_jnp))


# -- public API ---------------------------------------------------------------


def tensor_parallel_or_none(x: jax.Array, weight: jax.Array, eps: float) -> jax.Array | None:
    """``y`` by the tensor-parallel path when ``x``'s type splits its normalized axes
    (after the forward handler's dtype and shape checks), else None: the one test
    of ``rms_norm`` and ``rms_norm_inplace`` (x is never gathered; a donated x may
    be reused by XLA)."""
    if tensor_parallel_axes(x, weight.ndim) is None:
        return None
    _FWD.infer(jax.typeof(x), jax.typeof(weight))  # type: ignore[union-attr]  # the handler's dtype and shape checks
    return rms_norm_tensor_parallel(x, weight, eps=eps)


@standard_numpy()
def rms_norm(
    x: ArrayLike, weight: ArrayLike, eps: float | np.floating[Any] | np.ndarray[Any, Any] | jax.Array = 1e-5
) -> jax.Array:
    """Root-mean-square normalization over the trailing ``weight.ndim`` axes.

    ``y = x / sqrt(mean(x**2) + eps) * weight``

    Args:
      x: float16, bfloat16, float32 or float64 array.
      weight: float array whose shape equals the trailing axes of ``x``.
      eps: a finite Python float >= 0, known when tracing: under ``jax.jit``
        make it static, ``jax.jit(xr.rms_norm, static_argnames='eps')``. A NumPy
        scalar or a concrete 0-d array is read as its value; a flax or equinox
        layer holds it as a Python float, which they leave untraced.

    Returns:
      ``y`` with the shape of ``x`` and dtype ``jnp.result_type(x, weight)``
      (a weakly typed weight takes ``x``'s dtype, as in jnp). The axes
      normalized are those of ``weight``: a 0-d weight (a Python float, say)
      normalizes each element by itself, ``x / sqrt(x**2 + eps) * weight``; to
      scale a normalized row, pass ``weight`` with the row's shape
      (``jnp.full(x.shape[-1], w)``).

    Precision: sums are kept in float32 (float64 when the result is float64),
    so a row whose sum of squares overflows that type (in float32, values
    beyond about ``1.8e19 / sqrt(row length)``) gives 0, and, with ``eps=0``, a
    row whose sum underflows to 0 gives inf or NaN, as the jnp formula in the
    same precision does. Where the sum does not underflow, the gradients are
    finite too (``inv_rms**3`` is never formed on its own, so a row of small
    norm with ``eps=0`` does not overflow it).

    Raises:
      TypeError: for arguments that are not float arrays (strings, None, object
        arrays, non-float dtypes), a non-numeric ``eps``, or a traced ``eps`` (the
        message says how to make it static).
      ValueError: if ``weight.shape`` is not a suffix of ``x.shape``, or ``eps`` is negative, not finite,
        or beyond the largest value of the type the rows accumulate in (float32, float64 for float64 rows).

    Works under ``jit``, ``vmap``, ``jvp`` (dedicated forward path), ``grad``
    (``rms_norm_bwd`` kernel) and second order.

    Tensor parallel: when ``x``'s type splits a normalized axis over mesh axes (a
    mesh with explicit axes), each shard sums the squares of its block of each
    row, one all-reduce of one value per row adds them, and each shard normalizes
    its block; ``x`` is never gathered (:mod:`xla_ffi_rs.ops.rms_norm_tp`). On
    auto mesh axes, where the split is decided after lowering, the op lowers to
    its jnp formula under ``jit`` over several devices, which XLA partitions the
    same way (no kernel there, whether or not the rows are split).

    >>> import jax.numpy as jnp
    >>> [round(v, 3) for v in rms_norm(jnp.array([3.0, 4.0]), jnp.ones(2), eps=0.0).tolist()]
    [0.849, 1.131]
    """
    x = jnp.asarray(array_like("rms_norm", "x", x, "a float array"))
    weight = jnp.asarray(array_like("rms_norm", "weight", weight, "a float array"))
    check_kernel_float("rms_norm", "x", x.dtype)
    check_kernel_float("rms_norm", "weight", weight.dtype)
    given = (x, weight)
    x, weight = promote_weak(x, weight)  # a Python float weight takes x's dtype, as in jnp
    eps = check_nonnegative_float("rms_norm", "eps", eps, position=2)
    check_eps_fits("rms_norm", eps, x.dtype, weight.dtype)
    if (y_tp := tensor_parallel_or_none(x, weight, eps)) is not None:
        return y_tp
    y, _ = rms_norm_fwd_op(x, weight, eps=eps)  # dtypes and shapes: the handler's checks
    (y,) = weak_if_all_weak(given, (y,))  # Python scalars x and weight: weak, as x * weight is
    return y
