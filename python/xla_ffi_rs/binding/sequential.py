"""``vmap`` as a loop: one call of an op per batch element (``lax.map``), for a
python op that is not ``vectorized`` and a declared op whose batched operand cannot
enter its batch ellipsis (a weight per example).

Under an outer ``jit`` the loop is traced once with the program. In an eager
``vmap`` it was traced, lowered and compiled again at every call (``lax.map`` of a
fresh function is a new program); here the loop of an eager call is a jitted
function the op keeps per set of static parameters and mapped operands (the 32
most recently used), so calls after the first reuse its compiled program.

Example:
    >>> CACHE_SIZE
    32
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import jax

from xla_ffi_rs import _native
from xla_ffi_rs._compat import Tracer

__all__ = ["CACHE_SIZE", "sequential_map"]

#: How many eager loops an op keeps (the most recently used).
CACHE_SIZE = 32


def _loop(call: Callable[..., Sequence[Any]], mapped: tuple[int, ...], n: int) -> Callable[..., Any]:
    """``(unmapped operands, mapped operands with the batch axis first) -> results``."""

    def loop(rest: Sequence[Any], xs: Sequence[Any]) -> list[Any]:
        def one(elements: Sequence[Any]) -> tuple[Any, ...]:
            it_rest, it_xs = iter(rest), iter(elements)
            return tuple(call(*[next(it_xs) if i in mapped else next(it_rest) for i in range(n)]))

        return list(jax.lax.map(one, list(xs)))

    return loop


def sequential_map(
    make_call: Callable[[bool], Callable[..., Sequence[Any]]],
    key: Hashable,
    operands: Sequence[Any],
    mapped: Sequence[int],
    xs: Sequence[Any],
    cache: dict[Any, Callable[..., Any]],
) -> list[Any]:
    """The results of ``make_call(eager)(*args)`` for each element of the mapped
    operands' leading axis (``xs``: the operands ``mapped``, batch axis first; the
    others as they are). An eager call (no operand traced, and not inside a running
    python op call, whose own loop could be running) runs the jitted loop kept in
    ``cache`` under ``key`` (the static parameters); a traced one traces the loop
    into its program."""
    index = tuple(mapped)
    rest = [x for i, x in enumerate(operands) if i not in index]
    eager = not any(isinstance(x, Tracer) for x in (*operands, *xs)) and not _native.active_calls()[1]
    if not eager:
        traced: list[Any] = _loop(make_call(False), index, len(operands))(rest, xs)
        return traced
    full_key = (key, index, len(operands))
    jitted = cache.pop(full_key, None)  # put back last: the least recently used goes first
    if jitted is None:
        while len(cache) >= CACHE_SIZE:
            cache.pop(next(iter(cache)))
        jitted = jax.jit(_loop(make_call(True), index, len(operands)))
    cache[full_key] = jitted
    out: list[Any] = jitted(rest, list(xs))
    return out
