"""Do two independent async FFI calls in one jitted program overlap?

Each call is ``xla_ffi_rs.demo.async_sleep_scale`` (``#[handler(async)]``): it
sleeps ``delay_ms`` on a thread of its own, then writes ``2 * x``. The program
``(f(x), f(x + 1))`` has two independent calls; if XLA:CPU runs them concurrently,
it takes about as long as one call, if it runs them one after the other, twice as
long. The same pair of synchronous calls (``xla_ffi_rs.demo.sleep_scale``, which
sleeps on XLA's thread) is measured beside it.

Figures are medians of interleaved pairs (``common.measure_pairs``). The overlap
factor is ``2 * t(one call) / t(two calls)``: 2 when the calls overlap fully, 1
when they run in sequence. ``--quick``: 10 ms calls, one round.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from common import QUICK, measure_pairs
from reporting import report, target

ASYNC = "xla_ffi_rs.demo.async_sleep_scale"
SYNC = "xla_ffi_rs.demo.sleep_scale"
DELAY_MS = 10 if QUICK else 100


def register() -> None:
    from xla_ffi_rs import _native

    for name, capsule in _native.async_demo_targets("cpu").items():
        jax.ffi.register_ffi_target(name, capsule, platform="cpu")


def call(target: str, x: Any) -> Any:
    out = jax.ShapeDtypeStruct(x.shape, jnp.float32)
    return jax.ffi.ffi_call(target, out)(x, delay_ms=np.int64(DELAY_MS))


def main() -> None:
    register()
    x = jnp.arange(1024, dtype=jnp.float32)
    rows = []
    factors: dict[str, float] = {}
    for kind, t in (("async", ASYNC), ("sync", SYNC)):
        one = jax.jit(lambda v, t=t: call(t, v))
        two = jax.jit(lambda v, t=t: (call(t, v), call(t, v + 1.0)))
        a, b = two(x)
        assert np.array_equal(np.asarray(a), 2 * np.asarray(x)) and np.array_equal(np.asarray(b), 2 * np.asarray(x + 1))
        res = measure_pairs({"two calls": two, "one call": one}, x, budget=0.0, min_repeat=7, max_repeat=7)
        t_one, t_two = res["one call"]["median"], res["two calls"]["median"]
        factors[kind] = 2 * t_one / t_two
        rows.append(
            {
                "calls": kind,
                "delay ms": DELAY_MS,
                "one call ms": t_one * 1e3,
                "two calls ms": t_two * 1e3,
                "two / one (median of pairs)": res["one call"]["ratio_median"],
                "overlap factor": factors[kind],
                "overlap": "yes" if factors[kind] >= 1.5 else "no",
            }
        )
        print(f"  {kind}: one {t_one * 1e3:.1f} ms, two {t_two * 1e3:.1f} ms", flush=True)
    report(
        "async",
        {"two independent calls in one program vs one call (median)": rows},
        [target(f"two independent async calls of {DELAY_MS} ms overlap (2 = fully)", factors["async"], ">=", 1.5)],
        notes=[
            "overlap factor = 2 * t(one call) / t(two calls): 2 = the calls ran concurrently, 1 = in sequence",
            "async: #[handler(async)], the call sleeps on a thread of its own; sync: it sleeps on XLA's thread",
            f"jax {jax.__version__}, {jax.device_count()} CPU device(s)",
        ],
    )


if __name__ == "__main__":
    main()
