"""The checks of what a :class:`~xla_ffi_rs.binding.Op`'s own rules return: its
``abstract_eval``, and the rules given to ``def_jvp``, ``def_transpose`` and
``def_batching``.

Without them a ``jax.ShapeDtypeStruct`` from ``abstract_eval`` (what ``python_op``
takes) failed with a bare ``AssertionError`` deep in JAX, and a JVP rule whose
tangent has another shape or dtype than its result was taken as it was, giving
derivatives of the wrong shape with no error. Each error is a TypeError naming the
op, the result, what was expected and what was got.

Example:
    >>> import jax, numpy as np
    >>> checked_avals("my_op", jax.ShapeDtypeStruct((2,), np.float32))
    [ShapedArray(float32[2])]
"""

from __future__ import annotations

import operator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from xla_ffi_rs._compat import ShapedArray, ad
from xla_ffi_rs._validation import counted

__all__ = ["checked_avals", "checked_batch", "checked_cotangents", "checked_jvp"]

_EXPECTED = "a sequence of avals (jax.core.ShapedArray, or jax.ShapeDtypeStruct)"


def _aval(name: str, i: int, value: Any) -> ShapedArray:
    if isinstance(value, ShapedArray):
        return value
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is None or dtype is None:
        raise TypeError(f"{name}: abstract_eval must return {_EXPECTED}; result {i} is {type(value).__name__}")
    try:
        dims = tuple(operator.index(d) for d in shape)
        if any(isinstance(d, bool) for d in shape) or min(dims, default=0) < 0:
            raise TypeError
    except TypeError:
        raise TypeError(
            f"{name}: abstract_eval result {i}: expected a shape of non-negative ints, got {shape!r}"
        ) from None
    try:
        return ShapedArray(dims, jnp.dtype(dtype))
    except TypeError:
        raise TypeError(f"{name}: abstract_eval result {i}: expected a dtype, got {dtype!r}") from None


def checked_avals(name: str, outs: Any) -> list[ShapedArray]:
    """``abstract_eval``'s results as a list of ShapedArrays: one aval returned bare is
    one result, an object with ``.shape`` and ``.dtype`` (``jax.ShapeDtypeStruct``)
    becomes a ShapedArray; TypeError naming ``name`` for anything else."""
    if isinstance(outs, ShapedArray) or (hasattr(outs, "shape") and hasattr(outs, "dtype")):
        outs = [outs]
    try:
        listed = list(outs)
    except TypeError:
        raise TypeError(f"{name}: abstract_eval must return {_EXPECTED}, got {type(outs).__name__}") from None
    return [_aval(name, i, o) for i, o in enumerate(listed)]


def checked_jvp(name: str, result: Any) -> tuple[list[Any], list[Any]]:
    """A ``def_jvp`` rule's ``(outputs, tangents)``, checked: a pair of sequences of
    one length, each tangent (a symbolic zero passes) of its output's tangent shape,
    and its dtype where the output is inexact (as ``jax.custom_jvp`` requires)."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        got = f"a {type(result).__name__} of length {len(result)}" if isinstance(result, (tuple, list)) else None
        raise TypeError(
            f"{name}: the JVP rule must return a pair (outputs, tangents), got {got or type(result).__name__}"
        )
    outs, tangents = list(result[0]), list(result[1])
    if len(outs) != len(tangents):
        raise TypeError(f"{name}: the JVP rule gave {len(outs)} outputs but {len(tangents)} tangents")
    for i, (out, tangent) in enumerate(zip(outs, tangents, strict=True)):
        check_tangent(name, i, out, tangent)
    return outs, tangents


def check_tangent(name: str, i: int, out: Any, tangent: Any) -> None:
    """TypeError naming the op and result ``i`` unless the JVP rule's ``tangent`` (a
    symbolic zero passes) has the tangent shape of its output ``out``, and its dtype
    where the output is inexact: as ``jax.custom_jvp`` requires (a wrong one would
    otherwise flow on into wrong derivatives, or fail far from the rule)."""
    if type(tangent) is ad.Zero:
        return
    want, got = jax.typeof(out).to_tangent_aval(), jax.typeof(tangent)
    inexact = jnp.issubdtype(want.dtype, jnp.inexact)
    if tuple(got.shape) != tuple(want.shape) or (inexact and got.dtype != want.dtype):
        raise TypeError(
            f"{name}: the JVP rule's tangent for result {i}: expected {want.str_short()} (the output's shape "
            f"and dtype), got {got.str_short()}"
        )


def checked_cotangents(name: str, result: Any, n_operands: int) -> list[Any]:
    """A ``def_transpose`` rule's result as a list of one cotangent (or None) per
    operand; TypeError naming the op for anything else (a bare array, the wrong count)."""
    if hasattr(result, "__next__") and not isinstance(result, jax.Array):  # a generator of them
        result = list(result)
    if not isinstance(result, (tuple, list)):
        hint = " (return (ct,) for a one-operand op)" if n_operands == 1 else ""
        raise TypeError(
            f"{name}: the transpose rule must return a tuple of one cotangent (or None) per operand ({n_operands}), "
            f"got {type(result).__name__}{hint}"
        )
    if len(result) != n_operands:
        raise TypeError(
            f"{name}: the transpose rule returned {counted(len(result), 'cotangent')} for "
            f"{counted(n_operands, 'operand')}"
        )
    return list(result)


def checked_batch(name: str, result: Any) -> tuple[list[Any], list[Any]]:
    """A ``def_batching`` rule's ``(outputs, batch axes)``: a pair of sequences of one
    length, each axis an int or None; TypeError naming the op for anything else."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        got = f"a {type(result).__name__} of length {len(result)}" if isinstance(result, (tuple, list)) else None
        raise TypeError(
            f"{name}: the batching rule must return a pair (outputs, batch axes), got {got or type(result).__name__}"
        )
    try:
        outs, dims = list(result[0]), list(result[1])
    except TypeError:
        raise TypeError(f"{name}: the batching rule must return two sequences (outputs, batch axes)") from None
    if len(outs) != len(dims):
        raise TypeError(f"{name}: the batching rule gave {len(outs)} outputs but {len(dims)} batch axes")
    for i, (out, d) in enumerate(zip(outs, dims, strict=True)):
        if d is None:
            continue
        rank = jax.typeof(out).ndim
        if not (isinstance(d, (int, np.integer)) and not isinstance(d, (bool, np.bool_)) and 0 <= d < rank):
            raise TypeError(
                f"{name}: the batching rule's batch axis for output {i}: expected None or an axis of the "
                f"rank-{rank} output (0 to {rank - 1}), got {d!r}"
            )
    return outs, dims
