"""Four Python threads call one jitted op at the same time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from helpers import kepler_residual, rms_norm_np, run_threads
from xla_ffi_rs import kepler, rms_norm

THREADS, ROUNDS = 4, 25


def run_concurrently(work: Callable[[int], Any]) -> list[Any]:
    """Run ``work(i)`` for i in 0..3 on four threads released together."""
    return run_threads(work, THREADS)


def test_kepler_from_four_threads() -> None:
    f = jax.jit(lambda m, e: kepler(m, e))
    inputs = [(np.linspace(-5, 5, 1000) + i, np.full(1000, 0.2 * i + 0.1)) for i in range(THREADS)]
    f(*inputs[0])  # compile once, then call concurrently

    def work(i: int) -> list[tuple[np.ndarray, ...]]:
        return [tuple(np.asarray(a) for a in f(*inputs[i])) for _ in range(ROUNDS)]

    for i, outs in enumerate(run_concurrently(work)):
        m, e = inputs[i]
        for s, c in outs:
            assert np.max(kepler_residual(m, e, s, c)) <= 1e-12


def test_rms_norm_grad_from_four_threads() -> None:
    f = jax.jit(jax.value_and_grad(lambda x, w: jnp.sum(rms_norm(x, w) ** 2), argnums=1))
    rng = np.random.default_rng(0)
    inputs = [(rng.normal(size=(64, 32)), rng.uniform(0.5, 1.5, 32)) for _ in range(THREADS)]
    expected = [f(*a) for a in inputs]

    def work(i: int) -> list[Any]:
        return [f(*inputs[i]) for _ in range(ROUNDS)]

    for i, outs in enumerate(run_concurrently(work)):
        ref_value = np.sum(rms_norm_np(*inputs[i], 1e-5)[0] ** 2)
        for value, grad in outs:
            np.testing.assert_allclose(value, ref_value, rtol=1e-12)
            np.testing.assert_array_equal(grad, expected[i][1])
