"""The checks of what a :class:`~xla_ffi_rs.binding.Op`'s own rules return: its
``abstract_eval`` and the JVP rule given to ``def_jvp``.

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

from xla_ffi_rs._compat import ShapedArray, ad

__all__ = ["checked_avals", "checked_jvp"]

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
        if type(tangent) is ad.Zero:
            continue
        want, got_aval = jax.typeof(out).to_tangent_aval(), jax.typeof(tangent)
        inexact = jnp.issubdtype(want.dtype, jnp.inexact)
        if tuple(got_aval.shape) != tuple(want.shape) or (inexact and got_aval.dtype != want.dtype):
            raise TypeError(
                f"{name}: the JVP rule's tangent for result {i}: expected {want.str_short()} (the output's shape "
                f"and dtype), got {got_aval.str_short()}"
            )
    return outs, tangents
