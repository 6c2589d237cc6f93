"""Stress and soak: many Python threads calling every target at once, and memory
after many calls.

* Every target, through raw ``jax.ffi.ffi_call`` and through the jitted ops:
  8 threads x ``XFR_STRESS_CALLS`` calls each (default 2,000), each thread with
  its own inputs, every result identical to the single-threaded one.
* Soak: ``XFR_SOAK_CALLS`` calls (default 20,000), a tenth of them failing with
  an error, grow the resident memory by at most 1 MiB (a leak of 50 bytes a call).

The defaults keep the suite's run short (both Python suites of CI run them); for
a long run, raise both: ``XFR_STRESS_CALLS=10000 XFR_SOAK_CALLS=100000 pytest
tests/test_stress.py``.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import KEPLER, RMS_BWD, RMS_FWD, run_threads
from xla_ffi_rs import examples, kepler, rms_norm

THREADS = 8
CALLS = int(os.environ.get("XFR_STRESS_CALLS", "2000"))
SOAK_CALLS = int(os.environ.get("XFR_SOAK_CALLS", "20000"))
SCALE = "xla_ffi_rs.examples.scale"
examples.register()  # the stateful example target (this module may run alone)


def sds(shape: Sequence[int], dtype: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dtype))


def raw_kepler(m: jax.Array, e: jax.Array) -> Any:
    out = sds(m.shape, m.dtype)
    return jax.ffi.ffi_call(KEPLER, (out, out))(m, e)


def raw_fwd(x: jax.Array, w: jax.Array) -> Any:
    return jax.ffi.ffi_call(RMS_FWD, (sds(x.shape, x.dtype), sds(x.shape[:-1], x.dtype)))(x, w, eps=1e-5)


def raw_bwd(dy: jax.Array, x: jax.Array, w: jax.Array) -> Any:
    return jax.ffi.ffi_call(RMS_BWD, (sds(x.shape, x.dtype), sds(w.shape, w.dtype)))(dy, x, w, eps=1e-5)


def raw_scale(x: jax.Array) -> Any:
    return jax.ffi.ffi_call(SCALE, sds(x.shape, x.dtype))(x, factor=np.float32(1.5))


def op_rms_grad(x: jax.Array, w: jax.Array) -> Any:
    return jax.grad(lambda x, w: jnp.sum(rms_norm(x, w) ** 2), argnums=(0, 1))(x, w)


def inputs(case: str, i: int) -> tuple[np.ndarray, ...]:
    """Thread ``i``'s own inputs for ``case`` (small: the call overhead is the point)."""
    rng = np.random.default_rng(1000 + i)
    x, w = rng.normal(size=(4, 8)), rng.uniform(0.5, 1.5, 8)
    if case in ("raw kepler", "op kepler"):
        return rng.uniform(-7, 7, 16), rng.uniform(0, 0.99, 16)
    if case == "raw rms_norm_bwd":
        return rng.normal(size=(4, 8)), x, w
    if case == "raw scale (stateful)":
        return (rng.normal(size=16).astype(np.float32),)
    return x, w


CASES: dict[str, Callable[..., Any]] = {
    "raw kepler": raw_kepler,
    "raw rms_norm_fwd": raw_fwd,
    "raw rms_norm_bwd": raw_bwd,
    "raw scale (stateful)": raw_scale,
    "op kepler": kepler,
    "op rms_norm": rms_norm,
    "op rms_norm grad (bwd)": op_rms_grad,
}


def as_numpy(out: Any) -> list[np.ndarray]:
    return [np.asarray(a) for a in jax.tree_util.tree_leaves(out)]


@pytest.mark.parametrize("case", list(CASES))
def test_threads_give_the_single_threaded_results(case: str) -> None:
    f = jax.jit(CASES[case])
    args = [inputs(case, i) for i in range(THREADS)]
    expected = [as_numpy(f(*a)) for a in args]  # single-threaded, and compiles once

    def work(i: int) -> None:
        for k in range(CALLS):
            got = as_numpy(f(*args[i]))
            ok = all(np.array_equal(g, e) for g, e in zip(got, expected[i], strict=True))
            assert ok, f"thread {i}, call {k}: {got} != {expected[i]}"

    run_threads(work, THREADS, timeout=900)


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads /proc (Linux)")
def test_soak_memory_stays_flat() -> None:
    good = jax.jit(raw_kepler)
    bad = jax.jit(raw_kepler)
    m, e = np.linspace(-3, 3, 64), np.full(64, 0.5)
    mi = np.arange(64, dtype=np.int32)  # int32 operands: the target refuses them

    def one(k: int) -> None:
        if k % 10 == 9:
            with pytest.raises(jax.errors.JaxRuntimeError, match=KEPLER):
                bad(mi, mi)[0].block_until_ready()
        else:
            good(m, e)[0].block_until_ready()

    # Warm up: compile, fill allocator caches and JAX's own caches.
    for k in range(max(SOAK_CALLS // 10, 100)):
        one(k)
    gc.collect()
    before = rss_bytes()
    for k in range(SOAK_CALLS):
        one(k)
    gc.collect()
    growth = rss_bytes() - before
    print(f"soak: {SOAK_CALLS} calls ({SOAK_CALLS // 10} failing): RSS grew {growth / 1024:.0f} KiB")
    assert growth <= 1 << 20, f"RSS grew by {growth / 1024:.0f} KiB over {SOAK_CALLS} calls"
