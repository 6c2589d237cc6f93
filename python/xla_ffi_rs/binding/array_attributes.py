"""The whole-array check of an ``array<T>`` attribute (``binding.op``).

An array attribute is checked as its elements would be one by one as scalar
attributes (``declaration._convert``), which costs some ten microseconds an element:
seconds, on every call, for a table of 10^5 values. :func:`passed` gives the same
tuple for the common values (a NumPy array of numbers, a list of one Python number
type) with whole-array operations, when every element passes; for anything else (a
bad element, mixed types) it returns None and the element-by-element check runs,
which names the element.

Example:
    >>> passed("f32", np.arange(3, dtype=np.float32))
    (0.0, 1.0, 2.0)
    >>> passed("u8", [1, 300]) is None  # 300 is beyond u8: the element check names it
    True
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["passed"]

_F32_MAX = float(np.finfo(np.float32).max)
#: The largest magnitude up to which every integer is exact in the float type.
_EXACT = {"f32": 2**24, "f64": 2**53}
_INTS = {f"{k}{b}": np.iinfo(f"{'i' if k == 'i' else 'u'}{b // 8}") for k in ("i", "u") for b in (8, 16, 32, 64)}


def passed(inner: str, value: Any) -> tuple[Any, ...] | None:
    """The checked values of ``value`` (a list, tuple or 1-D NumPy array) for an
    ``array<inner>`` attribute, exactly as the element-by-element check gives them
    (Python floats, ints or bools), or None where that check must run."""
    if isinstance(value, np.ndarray):
        return _array(inner, value)
    kinds = set(map(type, value))
    if not value or len(kinds) != 1:
        return None
    (kind,) = kinds
    if kind is bool:
        return tuple(value) if inner == "bool" else None
    if kind is int and inner in _INTS:
        info = _INTS[inner]
        return tuple(value) if info.min <= min(value) and max(value) <= info.max else None
    if kind is int and inner in _EXACT:
        return tuple(map(float, value)) if max(map(abs, value)) <= _EXACT[inner] else None
    if kind is float and inner in _EXACT:
        return tuple(value) if _floats_fit(inner, np.array(value, np.float64)) else None
    return None


def _array(inner: str, items: np.ndarray) -> tuple[Any, ...] | None:
    if items.ndim != 1 or items.size == 0 or items.dtype.itemsize > 8:
        return None
    kind = items.dtype.kind
    if kind == "b":
        return tuple(items.tolist()) if inner == "bool" else None
    if kind in "iu" and inner in _INTS:
        info = _INTS[inner]
        return tuple(items.tolist()) if info.min <= int(items.min()) and int(items.max()) <= info.max else None
    if kind in "iu" and inner in _EXACT:
        top = max(-int(items.min()), int(items.max()))
        return tuple(items.astype(np.float64).tolist()) if top <= _EXACT[inner] else None
    if kind == "f" and inner in _EXACT:
        wide = items.astype(np.float64)
        return tuple(wide.tolist()) if _floats_fit(inner, wide) else None
    return None


def _floats_fit(inner: str, a: np.ndarray) -> bool:
    """Whether every float of ``a`` passes the scalar check of ``inner``: any float64
    for f64; for f32, a finite value within float32's range that float32 does not
    round to 0 (infinities and NaN pass)."""
    if inner == "f64":
        return True
    with np.errstate(over="ignore"):
        narrow = a.astype(np.float32)
    too_big = np.isfinite(a) & (np.abs(a) > _F32_MAX)
    to_zero = (a != 0) & (narrow == 0)
    return not bool(np.any(too_big | to_zero))
