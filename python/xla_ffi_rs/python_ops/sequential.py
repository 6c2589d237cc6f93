"""``vmap`` of a python op that is not ``vectorized``: one call per batch element,
in a loop (``lax.map``) in the program.

Under an outer ``jit`` the loop is traced once with the program. In an eager
``vmap`` it used to be traced, lowered and compiled again at every call (``lax.map``
of a fresh function is a new program); here the loop of an eager call is a jitted
function kept per set of static parameters and mapped operands, so calls after the
first reuse its compiled program.

Example:
    >>> _CACHE_SIZE
    32
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax

from xla_ffi_rs import _native
from xla_ffi_rs._compat import Primitive, Tracer
from xla_ffi_rs.binding.op_class import freeze

__all__ = ["sequential_map"]

#: How many eager loops an op keeps (the newest).
_CACHE_SIZE = 32


def _loop(primitive: Primitive, params: dict[str, Any], mapped: tuple[int, ...], n: int) -> Callable[..., Any]:
    """``(unmapped operands, mapped operands with the batch axis first) -> results``."""

    def loop(rest: Sequence[Any], xs: Sequence[Any]) -> Any:
        def one(elements: Sequence[Any]) -> Sequence[Any]:
            args: list[Any] = []
            it_rest, it_xs = iter(rest), iter(elements)
            for i in range(n):
                args.append(next(it_xs) if i in mapped else next(it_rest))
            outs: Sequence[Any] = primitive.bind(*args, **params)
            return outs

        return jax.lax.map(one, list(xs))

    return loop


def sequential_map(
    primitive: Primitive,
    params: dict[str, Any],
    operands: Sequence[Any],
    mapped: Sequence[int],
    xs: Sequence[Any],
    cache: dict[Any, Callable[..., Any]],
    eager_handle: Any,
    handle_name: str,
) -> Sequence[Any]:
    """The results of ``primitive`` bound once per element of the mapped operands'
    leading axis (``xs``: the operands ``mapped``, batch axis first). An eager call
    (no operand traced, not inside a running python op call, where a jitted loop
    could be running already) runs a jitted loop kept in ``cache`` with the op's
    weak ``eager_handle`` as its ``handle_name`` parameter, as an eager call of the
    op does; a traced one traces the loop into its program."""
    index = tuple(mapped)
    rest = [x for i, x in enumerate(operands) if i not in index]
    eager = not any(isinstance(x, Tracer) for x in (*operands, *xs)) and not _native.active_calls()[1]
    if not eager:
        out: Sequence[Any] = _loop(primitive, params, index, len(operands))(rest, xs)
        return out
    bound = {**params, handle_name: eager_handle}
    key = (freeze(bound), index, len(operands))
    jitted = cache.get(key)
    if jitted is None:
        while len(cache) >= _CACHE_SIZE:
            cache.pop(next(iter(cache)))
        jitted = cache[key] = jax.jit(_loop(primitive, bound, index, len(operands)))
    out = jitted(rest, list(xs))
    return out
