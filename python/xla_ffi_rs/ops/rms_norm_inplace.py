"""``rms_norm_inplace``: RMS normalization whose result is written into ``x``.

The forward target aliased with its first operand (``input_output_aliases={0: 0}``),
so the Rust kernel runs its in-place path. With ``x`` donated to the jitted
function, ``y`` reuses ``x``'s buffer: no allocation of a second array of that
size, and no first-touch page faults on it.

Example:
    >>> import jax, jax.numpy as jnp
    >>> import xla_ffi_rs as xr
    >>> f = jax.jit(lambda x, w: xr.rms_norm_inplace(x, w, eps=0.0), donate_argnums=0)
    >>> f(jnp.ones((2, 3)), jnp.full(3, 2.0)).tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from xla_ffi_rs import binding
from xla_ffi_rs._compat import standard_numpy
from xla_ffi_rs._validation import (
    array_like,
    check_eps_fits,
    check_kernel_float,
    check_nonnegative_float,
    promote_weak,
    weak_if_all_weak,
)
from xla_ffi_rs.binding import BatchDim, batch_size, move_batch_axis_to_front
from xla_ffi_rs.dtypes import result_dtype
from xla_ffi_rs.ops.rms_norm import kernel_or_formula, rms_norm_fwd_jnp, rms_norm_fwd_op, tensor_parallel_or_none

__all__ = ["rms_norm_inplace", "rms_norm_inplace_op"]

#: The forward target's op (its declaration), with y written into x's buffer.
assert rms_norm_fwd_op.declaration is not None
rms_norm_inplace_op = binding.op(
    rms_norm_fwd_op.declaration,
    name="rms_norm_fwd_inplace",
    jnp_impl=rms_norm_fwd_jnp,
    input_output_aliases={0: 0},
)
# As rms_norm: the kernel where the rows are known whole, the jnp formula on auto
# mesh axes (where XLA then splits the rows' sums instead of gathering x).
kernel_or_formula(rms_norm_inplace_op, 0)


@rms_norm_inplace_op.def_jvp
@standard_numpy()
def _jvp(primals: tuple[jax.Array, ...], tangents: tuple[jax.Array, ...], *, eps: float) -> Any:
    """Differentiation sees the functional op: the same rules as ``rms_norm``."""
    return jax.jvp(lambda x, w: rms_norm_fwd_op(x, w, eps=eps), primals, tangents)


@rms_norm_inplace_op.def_batching
@standard_numpy()
def _batching(operands: Any, dims: tuple[BatchDim, ...], *, eps: float) -> Any:
    """One in-place call when only ``x`` is batched; else the out-of-place op's rule."""
    (x, weight), (x_dim, w_dim) = operands, dims
    if w_dim is not None:
        return jax.vmap(lambda x, w: rms_norm_fwd_op(x, w, eps=eps), in_axes=dims)(x, weight), (0, 0)
    x = move_batch_axis_to_front(x, x_dim, batch_size(operands, dims))
    return rms_norm_inplace_op(x, weight, eps=eps), (0, 0)


@standard_numpy()
def rms_norm_inplace(
    x: ArrayLike, weight: ArrayLike, eps: float | np.floating[Any] | np.ndarray[Any, Any] | jax.Array = 1e-5
) -> jax.Array:
    """:func:`xla_ffi_rs.rms_norm`, with the result written into ``x``'s buffer.

    Use it when ``x`` is not needed afterwards and is donated, as in
    ``jax.jit(f, donate_argnums=...)`` or an activation inside a jitted model that
    XLA may overwrite: ``y`` then reuses ``x``'s memory, which saves an array's
    allocation and its first-touch page faults (see the README's performance
    section). Without donation XLA copies ``x`` first, so the result is always
    the same as ``rms_norm``'s, and every transformation works (``grad`` and
    ``jvp`` use ``rms_norm``'s rules).

    Sharded, it runs as ``rms_norm`` does: when ``x``'s rows (the normalized axes)
    are split over a mesh, the tensor-parallel path (explicit mesh axes) or the jnp
    formula (auto axes) with one all-reduce per row, never a gather of ``x``; the
    in-place kernel runs where the rows are known whole (one device, or explicit
    axes that split only the batch).

    Args:
      x: float16, bfloat16, float32 or float64 array.
      weight: float array whose shape equals the trailing axes of ``x``, such that
        ``jnp.result_type(x, weight) == x.dtype`` (``y`` must fit in ``x``).
      eps: a finite Python float >= 0, known when tracing: under ``jax.jit``
        make it static, ``jax.jit(xr.rms_norm_inplace, static_argnames='eps')``. A NumPy
        scalar or a concrete 0-d array is read as its value; a flax or equinox
        layer holds it as a Python float, which they leave untraced.

    Raises:
      TypeError: for arguments that are not float arrays, a weight that would
        promote ``y`` past ``x``'s dtype, a non-numeric ``eps`` or a traced ``eps``.
      ValueError: if ``weight.shape`` is not a suffix of ``x.shape``, or ``eps`` is
        negative, not finite, or beyond the largest value of the type the rows
        accumulate in (float32, float64 for float64 rows).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import xla_ffi_rs as xr
        >>> f = jax.jit(lambda x, w: xr.rms_norm_inplace(x, w, eps=0.0), donate_argnums=0)
        >>> f(jnp.full((2, 2), 3.0), jnp.full(2, 2.0)).tolist()
        [[2.0, 2.0], [2.0, 2.0]]
    """
    x = jnp.asarray(array_like("rms_norm_inplace", "x", x, "a float array"))
    weight = jnp.asarray(array_like("rms_norm_inplace", "weight", weight, "a float array"))
    check_kernel_float("rms_norm_inplace", "x", x.dtype)
    check_kernel_float("rms_norm_inplace", "weight", weight.dtype)
    given = (x, weight)
    x, weight = promote_weak(x, weight)  # a Python float weight takes x's dtype, as in jnp
    floats = all(jnp.issubdtype(a.dtype, jnp.floating) for a in (x, weight))  # others: the op's dtype checks
    if floats and (y_dtype := result_dtype(x.dtype, weight.dtype)) != x.dtype:
        raise TypeError(
            f"rms_norm_inplace: weight: a {weight.dtype} weight makes y {y_dtype}, which cannot be written into "
            f"x of {x.dtype}; pass weight.astype(x.dtype), or use rms_norm"
        )
    eps = check_nonnegative_float("rms_norm_inplace", "eps", eps, position=2)
    check_eps_fits("rms_norm_inplace", eps, x.dtype, weight.dtype)
    if (y_tp := tensor_parallel_or_none(x, weight, eps)) is not None:
        return y_tp  # x's rows split in its type: as rms_norm
    y, _ = rms_norm_inplace_op(x, weight, eps=eps)  # dtypes, shapes and the alias: the op's checks
    (y,) = weak_if_all_weak(given, (y,))  # Python scalars x and weight: weak, as rms_norm's
    return y
