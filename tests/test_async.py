"""Async handlers (``#[handler(async)]``) in the real runtime: the demo targets of
``crates/ops/src/async_demo.rs`` finish on a thread of their own and complete XLA's
future. Results under ``jit`` and ``vmap``, a dependent call after an async one,
and errors, panics and dropped promises of the asynchronous part. (Sharding:
``tests/sharding/test_async_sharding.py``; overlap: ``benchmarks/bench_async.py``.)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import assert_ffi_error
from xla_ffi_rs import examples

ASYNC = "xla_ffi_rs.demo.async_sleep_scale"
SYNC = "xla_ffi_rs.demo.sleep_scale"
FAIL = "xla_ffi_rs.demo.async_fail"
PANIC = "xla_ffi_rs.demo.async_panic"
DROP = "xla_ffi_rs.demo.async_drop"

examples.register_async()


def scale(x: Any, delay_ms: int = 5, target: str = ASYNC, vmap_method: str = "broadcast_all") -> Any:
    out = jax.ShapeDtypeStruct(x.shape, jnp.float32)
    return jax.ffi.ffi_call(target, out, vmap_method=vmap_method)(x, delay_ms=np.int64(delay_ms))


X = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5


@pytest.mark.parametrize("target", [ASYNC, SYNC])
def test_async_result_under_jit(target: str) -> None:
    y = jax.jit(lambda x: scale(x, target=target))(X)
    np.testing.assert_array_equal(np.asarray(y), 2 * X)


def test_a_dependent_op_sees_the_completed_result() -> None:
    # The second call and the add read the first call's output: XLA must wait for
    # its future, not for the handler's return, before running them.
    f = jax.jit(lambda x: scale(scale(x, delay_ms=30), delay_ms=1) + 1.0)
    np.testing.assert_array_equal(np.asarray(f(X)), 4 * X + 1.0)


def test_two_independent_async_calls_in_one_program() -> None:
    f = jax.jit(lambda x: (scale(x, delay_ms=20), scale(x + 1.0, delay_ms=20)))
    a, b = f(X)
    np.testing.assert_array_equal(np.asarray(a), 2 * X)
    np.testing.assert_array_equal(np.asarray(b), 2 * (X + 1.0))


@pytest.mark.parametrize("method", ["broadcast_all", "sequential"])
def test_async_result_under_vmap(method: str) -> None:
    xs = np.stack([X, -X, X * 0.5])
    y = jax.jit(jax.vmap(lambda x: scale(x, delay_ms=2, vmap_method=method)))(xs)
    np.testing.assert_array_equal(np.asarray(y), 2 * xs)


def test_many_calls_in_a_loop() -> None:
    def body(_: int, x: Any) -> Any:
        return scale(x, delay_ms=0) * 0.5

    y = jax.jit(lambda x: jax.lax.fori_loop(0, 50, body, x))(X)
    np.testing.assert_array_equal(np.asarray(y), X)


CASES: list[tuple[str, tuple[str, ...]]] = [
    (FAIL, ("INVALID_ARGUMENT", "deliberate failure in the asynchronous part")),
    (PANIC, ("INTERNAL", "handler panicked: deliberate panic in the asynchronous part")),
    (DROP, ("INTERNAL", "the asynchronous part ended without completing (promise dropped)")),
]


@pytest.mark.parametrize(("target", "words"), CASES, ids=["error", "panic", "dropped"])
def test_a_failing_asynchronous_part_ends_the_call_with_its_error(target: str, words: tuple[str, ...]) -> None:
    call: Callable[[], Any] = lambda: jax.jit(  # noqa: E731
        lambda x: jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, jnp.float32))(x)
    )(X)
    assert_ffi_error(call, target, words)
    # The runtime is still usable afterwards.
    np.testing.assert_array_equal(np.asarray(jax.jit(scale)(X)), 2 * X)


def test_an_error_found_in_the_asynchronous_part_keeps_its_code() -> None:
    assert_ffi_error(
        lambda: jax.jit(lambda x: scale(x, delay_ms=-1))(X),
        ASYNC,
        ("INVALID_ARGUMENT", "attribute `delay_ms`: expected 0 to 60000, got -1"),
    )


def test_a_bad_call_is_refused_before_the_asynchronous_part() -> None:
    out = jax.ShapeDtypeStruct(X.shape, jnp.float32)
    assert_ffi_error(
        lambda: jax.jit(lambda x: jax.ffi.ffi_call(ASYNC, out)(x, delay_ms=np.int64(1)))(X.astype(np.float64)),
        ASYNC,
        ("INVALID_ARGUMENT", "operand 0 (x)", "expected dtype float32, got float64"),
    )
