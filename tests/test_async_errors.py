"""Errors under asynchronous dispatch: a python op's function that raises, and a Rust
handler's error, in a program XLA:CPU runs asynchronously. The error carries the
op's words wherever it is raised (the call, ``block_until_ready``, ``np.asarray``,
a computation that reads the failed array) and later calls work."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import RMS_FWD
from xla_ffi_rs import python_op

#: Large enough that XLA:CPU runs the program asynchronously (it runs small programs
#: in the calling thread, so their errors come from the call).
N = 1_000_000
ERRORS = (jax.errors.JaxRuntimeError, ValueError)  # see "Errors" in docs/python_op.md


def fails_everywhere(f: Callable[[], Any], words: tuple[str, ...]) -> None:
    """``f()`` fails at the call or at the first wait; the failed array fails again
    when read, and so does a computation on it, each time with ``words``."""

    def check(e: BaseException) -> None:
        for word in words:
            assert word in str(e), (word, str(e))

    try:
        y = f()
    except ERRORS as e:  # a program XLA ran in the calling thread
        check(e)
        return
    with pytest.raises(ERRORS) as info:
        jax.block_until_ready(y)
    check(info.value)
    with pytest.raises(ERRORS) as info:
        np.asarray(y)
    check(info.value)
    dependent = jnp.sum(y) + 1  # dispatched on the failed array: fails when read
    with pytest.raises(ERRORS) as info:
        np.asarray(dependent)
    check(info.value)


def test_a_python_op_error_under_async_dispatch_and_later_calls() -> None:
    state = {"fail": True}

    def flaky(x: np.ndarray) -> np.ndarray:
        if state["fail"]:
            raise KeyError("no such row")
        return x * 2

    op = python_op(flaky, abstract_eval=lambda x: x, name="flaky_async")
    f = jax.jit(lambda x: op(jnp.tanh(x)) + 1)
    x = jnp.full(N, 0.5, jnp.float32)
    words = ("xla_ffi_rs.python_call: op 'flaky_async' raised KeyError: 'no such row'",)
    fails_everywhere(lambda: f(x), words)
    fails_everywhere(lambda: f(x), words)  # again, through jit's fast path
    state["fail"] = False
    np.testing.assert_allclose(np.asarray(f(x)), 2 * np.tanh(0.5) + 1, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(op(x)), 1.0)  # eager too
    state["fail"] = True
    fails_everywhere(lambda: op(x), words)
    state["fail"] = False
    np.testing.assert_allclose(np.asarray(op(x)), 1.0)


def test_a_rust_handler_error_under_async_dispatch_and_later_calls() -> None:
    def rms_norm(x: Any, w: Any) -> Any:
        out = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(x.shape[:-1], x.dtype))
        return jax.ffi.ffi_call(RMS_FWD, out)(jnp.tanh(x), w, eps=np.float32(1e-5))[0] + 1

    f = jax.jit(rms_norm)
    x = jnp.full((N // 100, 100), 0.5, jnp.float32)
    words = (RMS_FWD, "operand 1 (weight): expected shape [100]", "got [99]")
    fails_everywhere(lambda: f(x, jnp.ones(99, jnp.float32)), words)
    y = np.asarray(f(x, jnp.full(100, 2.0, jnp.float32)))
    t = np.tanh(0.5)
    np.testing.assert_allclose(y, 2.0 * t / np.sqrt(t * t + 1e-5) + 1, rtol=1e-6)  # rows of tanh(0.5), times w, + 1
