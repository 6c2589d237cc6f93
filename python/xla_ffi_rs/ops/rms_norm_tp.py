"""Tensor-parallel rms_norm: x split along its normalized axes, one all-reduce of
one value per row instead of a gather.

When the type of ``x`` says that a normalized (trailing, weight-shaped) axis is
split over mesh axes (a mesh with explicit axes, the default of
``jax.make_mesh``), :func:`xla_ffi_rs.rms_norm` runs this instead of the
``rms_norm_fwd`` target: a ``shard_map`` over the mesh whose per-shard function

1. sums the squares of its block of each row (local, in the accumulation dtype),
2. adds those partial sums over the mesh axes that split the normalized axes
   (``jax.lax.psum``: **one all-reduce of one value per row**),
3. normalizes its block with ``inv_rms = rsqrt(sum / size + eps)`` and its block
   of the weight (split like x's normalized axes; a replicated weight is sliced
   locally, without communication).

On auto mesh axes the type says nothing of the split; there the ``rms_norm_fwd``
and ``rms_norm_bwd`` ops lower to their jnp formulas (see
:mod:`xla_ffi_rs.ops.rms_norm`), whose per-row sums XLA partitions into the same
partial sums and all-reduce.

x is never gathered. Differentiation goes through the ``shard_map``: the reverse
pass adds the per-row partial dot products ``sum(dy * weight * x)`` with one more
all-reduce of one value per row, and the weight's gradient, when x's batch axes
are split too, with the usual all-reduce over those. ``jvp`` and ``vmap`` are
``shard_map``'s own rules over the same per-shard function.

The per-shard function is jnp, not the Rust kernels: the all-reduce sits between
the reduction and the normalization, so any implementation makes two passes over
the local block (the partial sums, then the normalization), and XLA fuses each
pass. The passes are not as fast as the kernel, though: on one device, XLA's
forward on a (8192, 512) f32 block takes about twice the kernel's time (best of
interleaved runs, 2-core AVX2). A pair of targets (partial sums of squares;
normalize with a given ``inv_rms``), and a per-row dot for the gradient, would
close that; the communication, the point of this path, would not change.

Example (on a mesh with explicit axes; see docs/sharding.md):
    >>> tensor_parallel_axes(jax.ShapeDtypeStruct((4, 8), jnp.float32), 1) is None
    True
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from xla_ffi_rs._compat import standard_numpy
from xla_ffi_rs.dtypes import accumulation_dtype, result_dtype

__all__ = ["rms_norm_tensor_parallel", "tensor_parallel_axes"]


def _spec(x: Any) -> tuple[Any, ...] | None:
    """The partition spec in ``x``'s type, padded to its rank; None when the type
    names no mesh axis (auto mesh axes, one device) or x varies over manual axes
    (inside a user's ``shard_map``)."""
    aval = jax.typeof(x) if not isinstance(x, jax.ShapeDtypeStruct) else x
    if getattr(getattr(aval, "manual_axis_type", None), "varying", None):
        return None
    sharding = getattr(aval, "sharding", None)
    spec = tuple(getattr(sharding, "spec", None) or ())
    if not any(entry is not None for entry in spec):
        return None
    return spec + (None,) * (len(aval.shape) - len(spec))


def _axes(entries: tuple[Any, ...]) -> tuple[str, ...]:
    """The mesh axes that partition-spec entries split over, in order."""
    return tuple(a for e in entries if e is not None for a in (e if isinstance(e, tuple) else (e,)))


def tensor_parallel_axes(x: Any, weight_ndim: int) -> tuple[str, ...] | None:
    """The mesh axes that split ``x``'s trailing ``weight_ndim`` (normalized) axes,
    read from its type; None when none do (then rms_norm runs its kernel, with x's
    batch axes partitioned and the normalized ones whole)."""
    spec = _spec(x)
    if spec is None or weight_ndim == 0:
        return None
    # A mesh axis of size 1 (model parallelism of 1 under the model's usual specs)
    # splits nothing: the rows are whole, and the kernel runs on them.
    aval = x if isinstance(x, jax.ShapeDtypeStruct) else jax.typeof(x)
    sizes = dict(aval.sharding.mesh.shape)
    return tuple(a for a in _axes(spec[len(spec) - weight_ndim :]) if sizes[a] > 1) or None


def _lay_out(w: jax.Array, sharding: NamedSharding) -> jax.Array:
    """``w`` laid out as ``sharding`` says. A weight whose type names no mesh (made
    outside it, a host array) is put there with ``device_put``: ``reshard``'s
    transpose reshards the cotangent back to the mesh-less layout, which jax
    cannot batch under ``vmap`` over a split axis
    (``vmap(grad(.., argnums=weight))`` raised "Resource axis ... is not found in
    mesh: ()")."""
    if jax.typeof(w).sharding.mesh.empty:
        # Its gradient comes back laid out as `sharding` (as reshard's did without
        # vmap): nothing is gathered.
        placed: jax.Array = jax.device_put(w, sharding)
        return placed
    laid_out: jax.Array = jax.sharding.reshard(w, sharding)
    return laid_out


def like_normalized_axes(x: Any, w: jax.Array) -> jax.Array:
    """``w`` (the weight, or its tangent) laid out like ``x``'s trailing
    (normalized) axes when ``x``'s type names mesh axes and ``w``'s layout is
    another: a jnp formula that multiplies them is then legal on a mesh with
    explicit axes (a weight split over an axis that splits ``x``'s rows is not)."""
    spec = _spec(x)
    if spec is None:
        return w
    w_spec = tuple(spec[len(spec) - w.ndim :]) if w.ndim else ()
    if _spec(w) == (w_spec if _axes(w_spec) else None):
        return w
    return _lay_out(w, NamedSharding(jax.typeof(x).sharding.mesh, P(*w_spec)))


@standard_numpy()
def _local_rms_norm(x: jax.Array, w: jax.Array, *, eps: float, axes: tuple[str, ...], size: int) -> jax.Array:
    """One shard: partial sums of squares, one psum per row, local normalization."""
    acc = accumulation_dtype(x.dtype, w.dtype)
    norm = tuple(range(x.ndim - w.ndim, x.ndim))
    xa = x.astype(acc)
    total = jax.lax.psum(jnp.sum(xa * xa, axis=norm), axes)
    inv = jax.lax.rsqrt(total / jnp.asarray(size, acc) + jnp.asarray(eps, acc))
    y = xa * inv.reshape(inv.shape + (1,) * w.ndim) * w.astype(acc)
    return y.astype(result_dtype(x.dtype, w.dtype))


def rms_norm_tensor_parallel(x: jax.Array, weight: jax.Array, *, eps: float) -> jax.Array:
    """rms_norm of ``x`` whose normalized axes are split (see the module docs).

    ``x`` must carry its sharding in its type, with at least one normalized axis
    split (:func:`tensor_parallel_axes`); ``weight.shape`` is x's trailing shape.
    The result is laid out like ``x``.
    """
    axes = tensor_parallel_axes(x, weight.ndim)
    spec = _spec(x)
    if axes is None or spec is None:
        raise ValueError(
            "rms_norm_tensor_parallel: x must be split along its normalized axes in its type "
            f"(a mesh with explicit axes), got {jax.typeof(x).str_short()}"
        )
    if tuple(x.shape[x.ndim - weight.ndim :]) != tuple(weight.shape):
        raise ValueError(
            f"rms_norm_tensor_parallel: weight.shape must equal the trailing axes of x.shape, "
            f"got x {tuple(x.shape)} and weight {tuple(weight.shape)}"
        )
    out: jax.Array = _tensor_parallel(x, weight, eps=eps)
    return out


@partial(jax.jit, static_argnames="eps")
def _tensor_parallel(x: jax.Array, weight: jax.Array, *, eps: float) -> jax.Array:
    """Traced under ``jit`` always, so that an eager call on a sharded ``x`` with a
    weight on one device lays the weight out on the mesh as a traced call does."""
    axes, spec = tensor_parallel_axes(x, weight.ndim), _spec(x)
    assert axes is not None and spec is not None
    mesh = jax.typeof(x).sharding.mesh
    x_spec, w_spec = P(*spec), P(*spec[x.ndim - weight.ndim :])
    if _spec(weight) != (tuple(w_spec) if _axes(tuple(w_spec)) else None):
        # Split (or replicated) otherwise: lay it out like x's normalized axes. From
        # a replicated weight this is a local slice; x never moves.
        weight = _lay_out(weight, NamedSharding(mesh, w_spec))
    body = partial(_local_rms_norm, eps=eps, axes=axes, size=math.prod(weight.shape))
    shard_map = jax.shard_map if hasattr(jax, "shard_map") else _experimental_shard_map()
    fn = shard_map(body, mesh=mesh, in_specs=(x_spec, w_spec), out_specs=x_spec)
    return fn(x, weight)


def _experimental_shard_map() -> Any:
    from jax.experimental.shard_map import shard_map

    return shard_map
