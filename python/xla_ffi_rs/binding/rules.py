"""Helpers for writing the rules of an :class:`~xla_ffi_rs.binding.Op` by hand:
abstract evaluation (:func:`same_as_operands`), transposition
(:func:`is_linear_input`) and batching (:func:`elementwise_batching`,
:func:`vmap_batching` and their building blocks). Public through
:mod:`xla_ffi_rs.binding`.

Example:
    >>> import jax.numpy as jnp
    >>> from xla_ffi_rs.binding.rules import move_batch_axis_to_front
    >>> move_batch_axis_to_front(jnp.ones((2, 3)), 1, 3).shape
    (3, 2)
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from xla_ffi_rs._compat import NOT_MAPPED, ShapedArray, ad
from xla_ffi_rs.binding.op_class import AbstractEval, BatchDim, BatchRule, Op

__all__ = [
    "batch_size",
    "elementwise_batching",
    "is_linear_input",
    "move_batch_axis_to_front",
    "same_as_operands",
    "vmap_batching",
]


def is_linear_input(x: Any) -> bool:
    """True for an operand a transpose rule must produce a cotangent for."""
    return bool(ad.is_undefined_primal(x))


def same_as_operands(num_results: int) -> AbstractEval:
    """Abstract eval for an op whose results all look like its first operand.

    >>> import numpy as np
    >>> from jax.core import ShapedArray
    >>> same_as_operands(2)(ShapedArray((3,), np.float32))[1]
    ShapedArray(float32[3])
    """

    def abstract_eval(*avals: ShapedArray, **params: Any) -> list[ShapedArray]:
        del params
        return [ShapedArray(avals[0].shape, avals[0].dtype)] * num_results

    return abstract_eval


# -- batching helpers -----------------------------------------------------


def move_batch_axis_to_front(x: Any, dim: BatchDim, size: int) -> jax.Array:
    """Move axis ``dim`` of ``x`` to the front; broadcast an unbatched ``x``.

    >>> move_batch_axis_to_front(jnp.ones((2, 3)), 1, 3).shape
    (3, 2)
    >>> move_batch_axis_to_front(jnp.ones((2,)), None, 4).shape
    (4, 2)
    """
    if dim is NOT_MAPPED:
        x = jnp.asarray(x)
        return jnp.broadcast_to(x, (size, *x.shape))
    return jnp.moveaxis(x, dim, 0)


def batch_size(operands: Sequence[Any], dims: Sequence[BatchDim]) -> int:
    """The size of the vmapped axis, read from the first batched operand: an int, or
    under ``jax.export`` with symbolic shapes the symbolic dimension as it is (not
    forced to an int, which would raise JAX's ``InconclusiveDimensionOperation``
    before the op's own check can name the target and operand)."""
    for x, d in zip(operands, dims, strict=True):
        if d is not NOT_MAPPED:
            size: int = jnp.shape(x)[d]
            return size
    raise ValueError("batching rule called with no batched operand")


def elementwise_batching(op: Op) -> BatchRule:
    """Batching for an elementwise op over same-shape operands: one call.

    Batched operands get the batch axis in front, unbatched ones are broadcast,
    and the op is called once on the stacked arrays.
    """

    def rule(
        operands: Sequence[Any], dims: Sequence[BatchDim], **params: Any
    ) -> tuple[Sequence[Any], Sequence[BatchDim]]:
        size = batch_size(operands, dims)
        moved = [move_batch_axis_to_front(x, d, size) for x, d in zip(operands, dims, strict=True)]
        outs = op(*moved, **params)
        return outs, [0] * len(outs)

    return rule


def vmap_batching(impl: Callable[..., Sequence[Any]]) -> BatchRule:
    """Batching for a jnp-implemented op: vmap its jnp implementation.

    The result is plain jnp code (no longer the op), which is differentiable
    and transposable by JAX's own rules.
    """

    def rule(
        operands: Sequence[Any], dims: Sequence[BatchDim], **params: Any
    ) -> tuple[Sequence[Any], Sequence[BatchDim]]:
        outs = jax.vmap(functools.partial(impl, **params), in_axes=tuple(dims))(*operands)
        return outs, [0] * len(outs)

    return rule
