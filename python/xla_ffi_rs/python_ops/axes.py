"""Batch axes as :func:`~xla_ffi_rs.linear_op` and its siblings pass them.

``batch_axes`` is a tuple with one entry per operand; each entry is a tuple with
one element per enclosing ``vmap`` level, innermost first: the axis of that
operand the level maps over (in the operand's own axes, as the function sees
it), or ``None`` where the level does not map that operand. Outside ``vmap`` it
is ``((),) * number_of_operands``.

    >>> append_level(unbatched(2), [1, None])
    ((1,), (None,))
    >>> append_level(((1,), (None,)), [0, 0])
    ((2, 0), (None, 0))
    >>> core_axes(3, (2, 0))
    [1]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["BatchAxes", "append_level", "core_axes", "out_axes_of", "unbatched"]

#: Per operand, per vmap level (innermost first): the mapped axis, or None.
BatchAxes = tuple[tuple[int | None, ...], ...]


def unbatched(n: int) -> BatchAxes:
    """The batch axes of ``n`` operands outside ``vmap``."""
    return ((),) * n


def append_level(axes: BatchAxes, dims: Sequence[int | None]) -> BatchAxes:
    """``axes`` after one more ``vmap`` level that inserted axis ``dims[i]`` into
    operand ``i`` (``None``: not mapped); earlier axes at or after it move up one."""
    out = []
    for entry, d in zip(axes, dims, strict=True):
        if d is None:
            out.append((*entry, None))
        else:
            out.append((*(a if a is None or a < d else a + 1 for a in entry), int(d)))
    return tuple(out)


def core_axes(ndim: int, axes: Sequence[int | None]) -> list[int]:
    """The axes of an operand of rank ``ndim`` that are not batch axes (the axes an
    FFT, say, works over)."""
    return [a for a in range(ndim) if a not in axes]


def _is_pair(x: Any) -> bool:
    return isinstance(x, tuple) and len(x) == 2 and hasattr(x[0], "shape") and not hasattr(x[1], "shape")


def out_axes_of(name: str, out: Any, axes: BatchAxes) -> tuple[list[Any], list[tuple[int | None, ...]], bool]:
    """Split what an ``abstract_eval`` returned (an aval, an ``(aval, axes)`` pair, or
    a sequence of them) into (avals, each result's batch axes, whether it is one
    result). ``axes`` has one entry per level: an axis of the result, or None where
    the level does not map it. A result given without axes has those of the first
    operand mapped at every level."""
    single = hasattr(out, "shape") or _is_pair(out)
    items = [out] if single else list(out)
    levels = max((len(e) for e in axes), default=0)
    default: tuple[int | None, ...] | None = () if levels == 0 else None
    for entry in axes:
        if len(entry) == levels and all(a is not None for a in entry):
            default = tuple(entry)
            break
    avals, result_axes = [], []
    for i, item in enumerate(items):
        if _is_pair(item):
            aval, given = item
            given = (given,) if given is None or isinstance(given, int) else tuple(given)
            if len(given) != levels or not all(
                a is None or (isinstance(a, int) and 0 <= a < len(aval.shape)) for a in given
            ):
                raise ValueError(
                    f"{name}: abstract_eval gives result {i} the batch axes {given!r}; expected {levels} "
                    f"axes of its {len(aval.shape)} (or None: not mapped), one per vmap level"
                )
        elif hasattr(item, "shape") and hasattr(item, "dtype"):
            aval, given = item, default
            if given is None:
                raise ValueError(
                    f"{name}: no operand is mapped at every vmap level, so abstract_eval must give each "
                    f"result as (aval, batch axes); result {i} is a plain aval"
                )
        else:
            raise TypeError(
                f"{name}: abstract_eval must return avals (objects with .shape and .dtype) or (aval, batch axes) "
                f"pairs; result {i} is {type(item).__name__}"
            )
        avals.append(aval)
        result_axes.append(given)
    return avals, result_axes, single
