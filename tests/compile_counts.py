"""Counting what JAX compiles (its own ``jax.monitoring`` events), for tests of what a
repeated call costs: a count, never a time."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import jax

#: The event JAX records once per XLA compilation of a program.
BACKEND_COMPILE = "/jax/core/compile/backend_compile_duration"

_counts: dict[str, int] = {}


def _listen(event: str, duration_secs: float, **kwargs: str | int) -> None:
    _counts[event] = _counts.get(event, 0) + 1


jax.monitoring.register_event_duration_secs_listener(_listen)


@contextlib.contextmanager
def counting(event: str = BACKEND_COMPILE) -> Iterator[list[int]]:
    """``with counting() as n:``; ``n[0]`` is how many times ``event`` happened inside."""
    before = _counts.get(event, 0)
    n = [0]
    try:
        yield n
    finally:
        n[0] = _counts.get(event, 0) - before
