"""Python ops called from several Python threads: eager calls of one op running at
once, recursion beside them, first use racing, callbacks that call JAX or raise,
and a process exiting with calls in flight."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import jax
import jax.numpy as jnp
import numpy as np

from helpers import kepler_residual, run_threads
from xla_ffi_rs import kepler, python_op

WAIT_S = 20


def test_recursion_on_one_thread_beside_a_call_that_returned_on_another() -> None:
    # Thread A's call runs; thread B's call starts, A's returns, then B's function
    # calls the op again (recursion). Counting running calls over all threads gave
    # B's inner call the jitted bind of B's own outer call: "Recursively calling jit".
    a_in, b_in, a_done = threading.Event(), threading.Event(), threading.Event()

    def fn(x: np.ndarray) -> np.ndarray:
        if x[0] == 0:  # A
            a_in.set()
            assert b_in.wait(WAIT_S)
        elif x[0] == 1:  # B
            b_in.set()
            assert a_done.wait(WAIT_S)
            return np.asarray(op(np.full_like(x, 2.0))) + 10  # the recursive call
        return x + 1

    op = python_op(fn, abstract_eval=lambda x: x)
    op(np.full(3, 5.0, np.float32))  # the first bind is compiled
    out: dict[int, object] = {}

    def call(v: int) -> None:
        try:
            out[v] = np.asarray(op(np.full(3, float(v), np.float32)))
        except Exception as exc:
            out[v] = exc

    a = threading.Thread(target=call, args=(0,))
    a.start()
    assert a_in.wait(WAIT_S)
    b = threading.Thread(target=call, args=(1,))
    b.start()
    a.join(WAIT_S)
    a_done.set()
    b.join(WAIT_S)
    assert not a.is_alive() and not b.is_alive()
    np.testing.assert_array_equal(out[0], np.full(3, 1.0))
    np.testing.assert_array_equal(out[1], np.full(3, 13.0))  # (2 + 1) + 10


def test_first_use_of_ops_races_from_eight_threads() -> None:
    # No warm-up: every thread traces, registers and compiles at once.
    def plus_square(x: np.ndarray) -> np.ndarray:
        return x * x + 1

    op = python_op(plus_square, abstract_eval=lambda x: x)

    def work(i: int) -> tuple[np.ndarray, ...]:
        x = np.linspace(0.0, 1.0, 64) + i
        return (
            x,
            np.asarray(op(x)),
            np.asarray(jax.jit(lambda x: op(x) * 2)(x)),
            *jax.jit(kepler)(x, np.full_like(x, 0.3)),
        )

    for x, eager, jitted, s, c in run_threads(work, 8):
        np.testing.assert_allclose(eager, x * x + 1, rtol=1e-6)
        np.testing.assert_allclose(jitted, 2 * (x * x + 1), rtol=1e-6)
        assert np.max(kepler_residual(x, np.full_like(x, 0.3), s, c)) <= 1e-5


def test_callbacks_that_call_jax_or_raise_from_eight_threads() -> None:
    calls = []  # list.append is atomic: a closure with state

    def sine(x: np.ndarray) -> np.ndarray:
        calls.append(x.size)
        if x[0] < 0:
            raise ValueError("negative first element")
        return np.asarray(jnp.sin(jnp.asarray(x)))  # back into JAX, eagerly

    op = python_op(sine, abstract_eval=lambda x: x)
    f = jax.jit(lambda x: op(x) * 2)

    def work(i: int) -> list[object]:
        out: list[object] = []
        for k in range(6):
            x = np.linspace(0.1, 1.0, 16, dtype=np.float32) * (i + 1)
            try:
                out.append((x, np.asarray(f(-x if k == 3 and i % 2 else x))))
            except Exception as exc:
                out.append(exc)
        return out

    results = run_threads(work, 8)
    errors = [r for rs in results for r in rs if isinstance(r, Exception)]
    assert len(errors) == 4 and all(
        "python_op[" in str(e) and "sine]" in str(e) and "negative first element" in str(e) for e in errors
    )
    for rs in results:
        for r in rs:
            if not isinstance(r, Exception):
                x, y = r
                np.testing.assert_allclose(y, 2 * np.sin(x.astype(np.float64)), rtol=1e-6)
    assert len(calls) == 48


def test_exit_with_calls_in_flight_is_clean() -> None:
    # Dispatched and never waited for: the interpreter exits while XLA still runs them.
    code = textwrap.dedent(
        """
        import time, numpy as np, jax, jax.numpy as jnp
        from xla_ffi_rs import kepler, python_op
        op = python_op(lambda x: (time.sleep(0.2), x + 1)[1], abstract_eval=lambda x: x)
        f = jax.jit(lambda x: kepler(op(x), jnp.full_like(x, 0.5))[0])
        pending = [f(np.full(8, float(i))) for i in range(4)]
        print("exiting", flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "exiting"
