"""Dictionary attributes (declared ``dict``: a Rust ``Attr<Dict>`` or ``Attr<S>`` of an
``xla_ffi::attributes!`` struct) as :func:`xla_ffi_rs.binding.op` checks and lowers them.

The declaration names no keys or value types of a dictionary, so Python checks its
form only: string keys, each value a bool, an int (int64), a float, a str, a 1-D
numeric sequence or a nested dictionary, which is what an FFI attribute dictionary
holds. The handler checks the keys and values when it decodes the call (its error
names the target, the attribute and the key).

Example:
    >>> v = checked("demo.op", "cfg", {"gain": 2.0, "ids": [1, 2], "inner": {"on": True}})
    >>> lowered(v)
    {'gain': np.float64(2.0), 'ids': array([1, 2]), 'inner': {'on': np.True_}}
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from xla_ffi_rs._compat import Tracer
from xla_ffi_rs._validation import traced_attribute

__all__ = ["checked", "lowered"]

_INT64 = np.iinfo(np.int64)


@dataclass(frozen=True)
class FrozenArray:
    """A 1-D numeric attribute value inside a dictionary, hashable (a jit parameter)."""

    dtype: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class FrozenDict:
    """A dictionary attribute value, hashable: its (key, value) pairs sorted by key."""

    items: tuple[tuple[str, Any], ...]


def checked(target: str, name: str, value: Any, path: str = "") -> FrozenDict:
    """``value`` as a hashable dictionary; TypeError (ValueError for an int beyond
    int64) naming the target, the attribute and the key otherwise."""
    if isinstance(value, FrozenDict):
        return value  # checked already (the parameters of a batched or transposed call)
    where = f"{target}: attribute {name!r}{path}"
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}: expected a dict, got {type(value).__name__}")
    items = []
    for key, v in value.items():
        if not isinstance(key, str):
            raise TypeError(f"{where}: expected str keys, got the key {key!r} ({type(key).__name__})")
        items.append((key, _entry(target, name, f"{path}[{key!r}]", v)))
    return FrozenDict(tuple(sorted(items)))


def _entry(target: str, name: str, path: str, v: Any) -> Any:
    where = f"{target}: attribute {name!r}{path}"
    if isinstance(v, Tracer):
        raise traced_attribute(where, type(v).__name__)
    if isinstance(v, Mapping):
        return checked(target, name, v, path)
    if isinstance(v, (bool, np.bool_, str, np.integer, np.floating)):
        return v
    if isinstance(v, int):
        if not _INT64.min <= v <= _INT64.max:
            raise ValueError(f"{where}: expected an int that fits in int64, got {v}")
        return v
    if isinstance(v, float):
        return v
    if isinstance(v, (list, tuple, np.ndarray)):
        try:
            a = np.asarray(v)
        except (TypeError, ValueError):
            a = np.asarray(None)
        if a.ndim != 1 or a.dtype.kind not in "biuf":
            raise TypeError(f"{where}: expected a 1-D sequence of numbers, got {type(v).__name__} of {a.dtype}")
        if a.dtype.kind in "iu" and a.dtype.itemsize > 8:
            raise TypeError(f"{where}: expected a 1-D sequence of numbers, got {a.dtype}")
        return FrozenArray(a.dtype.str, tuple(a.tolist()))
    raise TypeError(
        f"{where}: expected a bool, int, float, str, 1-D sequence of numbers or dict, got {type(v).__name__}"
    )


def lowered(value: FrozenDict) -> dict[str, Any]:
    """The dictionary for ``jax.ffi``: Python numbers as NumPy scalars (int64, float64,
    bool), sequences as NumPy arrays, nested dictionaries as dicts."""
    return {k: _lowered_entry(v) for k, v in value.items}


def _lowered_entry(v: Any) -> Any:
    if isinstance(v, FrozenDict):
        return lowered(v)
    if isinstance(v, FrozenArray):
        return np.asarray(v.values, dtype=np.dtype(v.dtype))
    if isinstance(v, (bool, np.bool_)):
        return np.bool_(v)
    if isinstance(v, int):
        return np.int64(v)
    if isinstance(v, float):
        return np.float64(v)
    return v
