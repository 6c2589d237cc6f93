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
from xla_ffi_rs.binding.batch_split import entry_axes
from xla_ffi_rs.binding.op_class import explicit_spec

__all__ = ["CACHE_SIZE", "sequential_map"]

#: How many eager loops an op keeps (the most recently used).
CACHE_SIZE = 32


def _whole_axis_0(x: Any) -> Any:
    """``x`` with its leading axis whole, where its type splits it over explicit mesh
    axes: ``lax.map`` loops over that axis and refuses a split one ("0th dimension of
    all xs should be replicated"), so a sequential vmap over an explicitly sharded
    axis gathers it first."""
    spec = explicit_spec(jax.typeof(x))
    if spec is None or spec[0] is None:
        return x
    sharding = jax.typeof(x).sharding
    return jax.sharding.reshard(x, sharding.update(spec=jax.sharding.PartitionSpec(None, *spec[1:])))


def _split_axis_0(y: Any, lead: Any) -> Any:
    """``y`` with its leading axis split over the mesh axes ``lead`` (a partition spec
    entry), as jnp's vmap types a result batched like a split operand: each device
    keeps its slice, nothing moves. Left as it is where its type already uses them."""
    aval = jax.typeof(y)
    spec = explicit_spec(aval) or (None,) * y.ndim
    used = set().union(*(entry_axes(entry) for entry in spec[1:]))
    if not y.ndim or spec[0] is not None or entry_axes(lead) & used:
        return y
    return jax.sharding.reshard(y, aval.sharding.update(spec=jax.sharding.PartitionSpec(lead, *spec[1:])))


def _loop(call: Callable[..., Sequence[Any]], mapped: tuple[int, ...], n: int) -> Callable[..., Any]:
    """``(unmapped operands, mapped operands with the batch axis first) -> results``.

    A batch axis split over explicit mesh axes is gathered for the loop, and the
    results' batch axes are split like it again (their types are then jnp's)."""

    def loop(rest: Sequence[Any], xs: Sequence[Any]) -> list[Any]:
        def one(elements: Sequence[Any]) -> tuple[Any, ...]:
            it_rest, it_xs = iter(rest), iter(elements)
            return tuple(call(*[next(it_xs) if i in mapped else next(it_rest) for i in range(n)]))

        leads = [spec[0] for spec in (explicit_spec(jax.typeof(x)) for x in xs) if spec is not None and spec[0]]
        outs = list(jax.lax.map(one, [_whole_axis_0(x) for x in xs]))
        return [_split_axis_0(y, leads[0]) for y in outs] if leads else outs

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
