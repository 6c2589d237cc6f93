"""The memo of :func:`xla_ffi_rs.binding.op`: the same declaration and options give
the same :class:`~xla_ffi_rs.binding.Op`.

An op is a JAX primitive whose rules JAX keeps in global tables for the rest of the
process, with the programs its eager calls compiled: an op built again per call (in a
training step, say) was a new primitive each time, so each call traced and compiled
again, and every op built stayed in memory. :func:`key` describes what an op is built
from (by value for the declaration, by identity for functions and ops); an op whose
rules are changed afterwards (:meth:`~xla_ffi_rs.binding.Op.def_jvp` and the other
``def_`` methods) leaves the memo, so a later call builds a new one.

Example:
    >>> key({"target": "t", "operands": [{"name": "x"}]}, None) is not None
    True
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xla_ffi_rs.binding.op_class import Op

__all__ = ["key", "lookup", "remember"]

#: What an op was built from -> the op, while it lives.
_ops: weakref.WeakValueDictionary[Any, Op] = weakref.WeakValueDictionary()


def _frozen(value: Any) -> Any:
    """``value`` as a hashable key: mappings and sequences by their items, scalars with
    their type (so ``1``, ``1.0`` and ``True`` differ), anything else (a function, an
    op) as itself; TypeError for something unhashable."""
    if isinstance(value, Mapping):
        items = sorted(((_frozen(k), _frozen(v)) for k, v in value.items()), key=lambda kv: repr(kv[0]))
        return (Mapping, tuple(items))
    if isinstance(value, (list, tuple)):
        return (tuple, tuple(_frozen(v) for v in value))
    hash(value)
    return (type(value), value)


def key(*parts: Any) -> Any:
    """The memo key of an op built from ``parts``, or None where one is unhashable
    (no memo then)."""
    try:
        return _frozen(parts)
    except TypeError:
        return None


def lookup(k: Any) -> Op | None:
    """The op built from ``k`` if it is still in the memo."""
    return None if k is None else _ops.get(k)


def remember(k: Any, op: Op) -> None:
    """Put ``op`` in the memo under ``k`` (nothing for a None key); it leaves when a
    rule is defined on it."""
    if k is None:
        return
    _ops[k] = op
    op._forget_memo = functools.partial(_forget, k)


def _forget(k: Any, op: Op) -> None:
    if _ops.get(k) is op:
        del _ops[k]
