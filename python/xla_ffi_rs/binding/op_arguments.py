"""The checks of :class:`~xla_ffi_rs.binding.Op`'s constructor arguments.

An argument of the wrong type would otherwise be kept and fail later, when the op
is called or lowered, in words that name neither the op nor the argument (``'str'
object is not callable``, ``dictionary update sequence element #0 ...``), or never
(``has_side_effect="no"`` read as true). Each check raises TypeError (ValueError
for a value of the right type that cannot be right) naming ``binding.Op``, the op,
the argument, what was expected and what was got.

Example:
    >>> check_op_arguments("my_op", abstract_eval=print, has_side_effect="no")
    Traceback (most recent call last):
    ...
    TypeError: binding.Op 'my_op': has_side_effect: expected a bool, got str
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from xla_ffi_rs.binding.declaration import check_utf8

__all__ = ["check_name", "check_op_arguments", "flags"]


def _type(value: Any) -> str:
    return type(value).__name__


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_name(fn: str, name: Any) -> str:
    """``name`` checked to be a non-empty str that UTF-8 can encode (the primitive's
    name is an MLIR string attribute): TypeError or ValueError naming ``fn``."""
    if not isinstance(name, str):
        raise TypeError(f"{fn}: name: expected a str, got {_type(name)}")
    if not name:
        raise ValueError(f"{fn}: name: expected a non-empty str, got ''")
    check_utf8(f"{fn}: name", name)
    return name


def flags(where: str, batched: Any) -> tuple[tuple[bool, ...], tuple[bool, ...]]:
    """``batched`` as ``(operand flags, result flags)`` of Python bools (NumPy bools
    are taken); TypeError naming ``where`` for anything else."""
    try:
        operand_flags, result_flags = batched
        pair = (tuple(operand_flags), tuple(result_flags))
    except (TypeError, ValueError):
        raise TypeError(f"{where}: batched must be (operand flags, result flags), got {batched!r}") from None
    if not all(isinstance(b, (bool, np.bool_)) for side in pair for b in side):
        raise TypeError(f"{where}: batched must be (operand flags, result flags) of bools, got {batched!r}")
    return (tuple(bool(b) for b in pair[0]), tuple(bool(b) for b in pair[1]))


def _callable_or_none(where: str, arg: str, value: Any) -> None:
    if value is not None and not callable(value):
        raise TypeError(f"{where}: {arg}: expected a callable or None, got {_type(value)}")


def _mapping(where: str, arg: str, value: Any, key: str, item: str, ok_key: Any, ok_item: Any) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise TypeError(f"{where}: {arg}: expected a dict of {key} -> {item}, got {_type(value)}")
    for k, v in value.items():
        if not ok_key(k):
            raise TypeError(f"{where}: {arg}: expected a dict of {key} -> {item}, got the key {k!r} ({_type(k)})")
        if not ok_item(v):
            raise TypeError(f"{where}: {arg}: expected a dict of {key} -> {item}, got {_type(v)} for {k!r}")


def check_op_arguments(
    name: Any,
    *,
    abstract_eval: Any,
    targets: Any = None,
    jnp_impl: Any = None,
    attributes: Any = None,
    num_batch_dims: Any = None,
    batched: Any = None,
    reductions: Any = None,
    extra_results: Any = None,
    input_output_aliases: Any = None,
    has_side_effect: Any = False,
    tokens: Any = None,
) -> None:
    """Raise TypeError or ValueError, naming the op and the argument, for an
    argument of :class:`~xla_ffi_rs.binding.Op` of the wrong type (see the module)."""
    check_name("binding.Op", name)
    where = f"binding.Op {name!r}"
    if not callable(abstract_eval):
        raise TypeError(f"{where}: abstract_eval: expected a callable, got {_type(abstract_eval)}")
    for arg, value in (("jnp_impl", jnp_impl), ("attributes", attributes), ("num_batch_dims", num_batch_dims)):
        _callable_or_none(where, arg, value)
    _mapping(
        where,
        "targets",
        targets,
        "platform",
        "FFI target name",
        lambda k: isinstance(k, str),
        lambda v: isinstance(v, str),
    )
    if targets:
        for platform, target in targets.items():
            check_utf8(f"{where}: targets[{platform!r}]", target)
    _mapping(where, "reductions", reductions, "result index", "jnp formula", _is_int, callable)
    _mapping(where, "extra_results", extra_results, "platform", "avals rule", lambda k: isinstance(k, str), callable)
    _mapping(where, "input_output_aliases", input_output_aliases, "operand index", "result index", _is_int, _is_int)
    if not isinstance(has_side_effect, (bool, np.bool_)):
        raise TypeError(f"{where}: has_side_effect: expected a bool, got {_type(has_side_effect)}")
    if tokens is not None:
        if not (isinstance(tokens, Sequence) and len(tokens) == 2 and all(_is_int(t) for t in tokens)):
            raise TypeError(f"{where}: tokens: expected (operand index, result index), two ints, got {tokens!r}")
        if min(tokens) < 0:
            raise ValueError(f"{where}: tokens: expected non-negative indices, got {tuple(tokens)!r}")
