"""RMS normalization on the ``rms_norm_fwd``/``rms_norm_bwd`` targets.

Three ops (see :mod:`xla_ffi_rs.binding`):

* ``rms_norm_fwd_op(x, weight; eps) -> (y, inv_rms)``: the forward target.
* ``rms_norm_tangent_op(dx, dweight, x, weight, inv_rms) -> (dy,)``: the
  forward-mode tangent, linear in ``(dx, dweight)``, computed by jnp code (a
  dedicated forward path, no transposition). Its transpose is the backward
  target, so ``grad`` runs the ``rms_norm_bwd`` kernel.
* ``rms_norm_bwd_op(dy, x, weight, inv_rms) -> (dx, dweight)``: the backward
  target, with a JVP rule of its own so second-order derivatives work.

The two target ops are built from their handlers' declarations
(``binding.ops``: operands, dtypes, shapes, attributes, sharding); their
derivatives, and vmap over a batched weight in one call, are written here.

Example:
    >>> import jax, jax.numpy as jnp
    >>> from xla_ffi_rs import rms_norm
    >>> x, w = jnp.ones((2, 3)), jnp.full((3,), 2.0)
    >>> rms_norm(x, w, eps=0.0)
    Array([[2., 2., 2.],
           [2., 2., 2.]], dtype=float32)
    >>> dx, dw = jax.grad(lambda x, w: rms_norm(x, w).sum(), argnums=(0, 1))(x, w)
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from xla_ffi_rs import _fallback, _native, binding
from xla_ffi_rs._compat import ShapedArray
from xla_ffi_rs._validation import array_like, check_nonnegative_float
from xla_ffi_rs.binding import BatchDim, Op, batch_size, is_linear_input, move_batch_axis_to_front, vmap_batching

__all__ = ["rms_norm", "rms_norm_bwd_op", "rms_norm_fwd_op", "rms_norm_tangent_op"]


# -- ops ----------------------------------------------------------------------


def _workspace_aval(dy: ShapedArray, x: ShapedArray, weight: ShapedArray, inv_rms: ShapedArray) -> list[ShapedArray]:
    """The CUDA backward's extra result: per-block dweight partials, summed on the
    GPU in a fixed order (no atomics), so dweight is the same on every run. Its row
    count is the Rust ``bwd_workspace_rows``, the one source of that rule."""
    rows = math.prod(inv_rms.shape)  # the batch axes, checked by the abstract eval
    acc = _fallback.accumulation_dtype(x.dtype, weight.dtype)
    return [ShapedArray((_native.bwd_workspace_rows(rows), math.prod(weight.shape)), acc)]


# Operands, dtypes, shapes, attributes, vmap and sharding: from the handlers'
# declarations (crates/ops/src/rms_norm). dweight sums over the batch axes: its
# formula completes it when the call is split, and gives it per example under vmap.
_OPS = binding.ops(
    _native.declarations(),
    rms_norm_fwd={"jnp_impl": _fallback.rms_norm_fwd},
    rms_norm_bwd={
        "jnp_impl": _fallback.rms_norm_bwd,
        "reductions": {1: _fallback.rms_norm_dweight},
        "extra_results": {"cuda": _workspace_aval},
    },
)
rms_norm_fwd_op, rms_norm_bwd_op = _OPS["rms_norm_fwd"], _OPS["rms_norm_bwd"]
_FWD = rms_norm_fwd_op.declaration
assert _FWD is not None


def _tangent_abstract_eval(
    dx: ShapedArray, dweight: ShapedArray, x: ShapedArray, weight: ShapedArray, inv_rms: ShapedArray
) -> list[ShapedArray]:
    """dy is shaped like y: the forward handler's rule."""
    return _FWD.infer(x, weight)[0][:1]  # type: ignore[union-attr]


#: The forward-mode tangent: jnp code, no target; its operands carry the batch
#: axes where the forward's do (dx, dweight like x, weight; inv_rms like its result).
rms_norm_tangent_op = Op(
    "rms_norm_tangent",
    abstract_eval=_tangent_abstract_eval,
    jnp_impl=_fallback.rms_norm_tangent,
    # No target to partition: this only types dy's sharding like dx's.
    num_batch_dims=lambda dx, dweight, x, weight, inv_rms: _FWD.infer(x, weight)[1],  # type: ignore[union-attr]
    batched=([*_FWD.batched_in, *_FWD.batched_in, _FWD.batched_out[1]], _FWD.batched_out[:1]),
)


# -- differentiation ----------------------------------------------------------

Arrays = tuple[jax.Array, ...]


@rms_norm_fwd_op.def_jvp
def _fwd_jvp(primals: Arrays, tangents: Arrays, *, eps: float) -> tuple[Arrays, Arrays]:
    """Forward mode: y' from the linear tangent op, inv_rms' in jnp.

    The residual inv_rms comes from a fused jnp reduction over x, not from the
    forward target: then the forward call serves y alone, and where y is unused
    (``grad`` of a loss linear in y, e.g. ``sum(y * g)``) XLA drops the call, so
    the gradient program reads x twice (the reduction, the backward kernel)
    instead of also writing a y nobody reads. Where y is used, the cost is one
    extra read of x.
    """
    (x, weight), (dx, dweight) = primals, tangents
    y, _ = rms_norm_fwd_op(x, weight, eps=eps)
    inv_rms = _fallback.rms_norm_inv_rms(x, weight, eps=eps)
    (dy,) = rms_norm_tangent_op(dx, dweight, x, weight, inv_rms)
    axes = tuple(range(x.ndim - weight.ndim, x.ndim))
    xa, dxa = x.astype(inv_rms.dtype), dx.astype(inv_rms.dtype)
    d_inv_rms = -(inv_rms**3) * jnp.mean(xa * dxa, axis=axes)
    return (y, inv_rms), (dy, d_inv_rms)


@rms_norm_tangent_op.def_transpose
def _tangent_transpose(
    cts: Arrays, dx: Any, dweight: Any, x: jax.Array, weight: jax.Array, inv_rms: jax.Array
) -> list[jax.Array | None]:
    """Reverse mode: the backward target computes both cotangents at once."""
    (ct_y,) = cts
    ct_x, ct_weight = rms_norm_bwd_op(ct_y, x, weight, inv_rms)
    return [
        ct_x if is_linear_input(dx) else None,
        ct_weight if is_linear_input(dweight) else None,
        None,
        None,
        None,
    ]


@rms_norm_tangent_op.def_jvp
def _tangent_jvp(primals: Arrays, tangents: Arrays) -> tuple[Arrays, Arrays]:
    """Second order through forward mode: differentiate the jnp formula."""
    outs = rms_norm_tangent_op(*primals)
    _, t_outs = jax.jvp(_fallback.rms_norm_tangent, primals, tangents)
    return outs, t_outs


@rms_norm_bwd_op.def_jvp
def _bwd_jvp(primals: Arrays, tangents: Arrays) -> tuple[Arrays, Arrays]:
    """Second order through reverse mode: kernel for values, jnp for tangents."""
    outs = rms_norm_bwd_op(*primals)
    _, t_outs = jax.jvp(_fallback.rms_norm_bwd, primals, tangents)
    return outs, t_outs


# -- batching -----------------------------------------------------------------


def _broadcast_core(w: jax.Array, ndim: int) -> jax.Array:
    """(B, *core) -> (B, 1, ..., 1, *core) with ``ndim`` axes in all."""
    return w.reshape((w.shape[0],) + (1,) * (ndim - w.ndim) + w.shape[1:])


@rms_norm_fwd_op.def_batching
def _fwd_batching(operands: Any, dims: tuple[BatchDim, ...], *, eps: float) -> tuple[Arrays, tuple[int, int]]:
    """One kernel call; a batched weight is applied after a call with unit weight."""
    size = batch_size(operands, dims)
    (x, weight), (x_dim, w_dim) = operands, dims
    x = move_batch_axis_to_front(x, x_dim, size)
    if w_dim is None:
        return rms_norm_fwd_op(x, weight, eps=eps), (0, 0)
    weight = move_batch_axis_to_front(weight, w_dim, size)
    y, inv_rms = rms_norm_fwd_op(x, jnp.ones(weight.shape[1:], weight.dtype), eps=eps)
    return ((y * _broadcast_core(weight, y.ndim)).astype(y.dtype), inv_rms), (0, 0)


@rms_norm_bwd_op.def_batching
def _bwd_batching(operands: Any, dims: tuple[BatchDim, ...]) -> tuple[Arrays, tuple[int, int]]:
    """One kernel call for dx; dweight per batch element by a jnp reduction.

    The kernel sums dweight over all leading axes, batch included, so under
    vmap the per-example dweight = sum(dy * x * inv_rms) is reduced in jnp.
    """
    size = batch_size(operands, dims)
    dy, x, weight, inv_rms = operands
    dy_dim, x_dim, w_dim, r_dim = dims
    dy, x, inv_rms = (move_batch_axis_to_front(a, d, size) for a, d in ((dy, dy_dim), (x, x_dim), (inv_rms, r_dim)))
    dy_scaled = dy
    if w_dim is None:
        core = weight
    else:
        weight = move_batch_axis_to_front(weight, w_dim, size)
        dy_scaled = (dy * _broadcast_core(weight, dy.ndim)).astype(dy.dtype)
        core = jnp.ones(weight.shape[1:], weight.dtype)
    dx, _ = rms_norm_bwd_op(dy_scaled, x, core, inv_rms)
    dweight = jax.vmap(_fallback.rms_norm_dweight, in_axes=(0, 0, None, 0))(dy, x, core, inv_rms)
    return (dx, dweight), (0, 0)


rms_norm_tangent_op.def_batching(vmap_batching(_fallback.rms_norm_tangent))


# -- public API ---------------------------------------------------------------


def rms_norm(x: ArrayLike, weight: ArrayLike, eps: float = 1e-5) -> jax.Array:
    """Root-mean-square normalization over the trailing ``weight.ndim`` axes.

    ``y = x / sqrt(mean(x**2) + eps) * weight``

    Args:
      x: float16, bfloat16, float32 or float64 array.
      weight: float array whose shape equals the trailing axes of ``x``.
      eps: a finite Python float >= 0, known when tracing: under ``jax.jit``
        make it static, ``jax.jit(xr.rms_norm, static_argnames='eps')``.

    Returns:
      ``y`` with the shape of ``x`` and dtype ``jnp.result_type(x, weight)``.

    Raises:
      TypeError: for arguments that are not float arrays (strings, None, object
        arrays, non-float dtypes), a non-numeric ``eps``, or a traced ``eps`` (the
        message says how to make it static).
      ValueError: if ``weight.shape`` is not a suffix of ``x.shape``, or ``eps`` is negative or not finite.

    Works under ``jit``, ``vmap``, ``jvp`` (dedicated forward path), ``grad``
    (``rms_norm_bwd`` kernel) and second order.

    >>> import jax.numpy as jnp
    >>> [round(v, 3) for v in rms_norm(jnp.array([3.0, 4.0]), jnp.ones(2), eps=0.0).tolist()]
    [0.849, 1.131]
    """
    x = jnp.asarray(array_like("rms_norm", "x", x, "a float array"))
    weight = jnp.asarray(array_like("rms_norm", "weight", weight, "a float array"))
    eps = check_nonnegative_float("rms_norm", "eps", eps, position=2)
    y, _ = rms_norm_fwd_op(x, weight, eps=eps)  # dtypes and shapes: the handler's checks
    return y
