"""Do two independent async FFI calls in one jitted program overlap?

Each call is ``xla_ffi_rs.demo.async_sleep_scale`` (``#[handler(async)]``): it
sleeps ``delay_ms`` on a thread of its own, then writes ``2 * x``. A program with
two independent such calls takes about as long as one call if XLA:CPU runs them
concurrently, twice as long if it runs them one after the other. Two programs:

* small: ``(f(x), f(x + 1))``, a handful of thunks;
* large: the same two calls plus 7 independent zero-delay calls (more than 8
  thunks).

XLA:CPU's thunk executor (``xla/backends/cpu/runtime/thunk_executor.cc``) runs a
program's thunks one after the other, each waiting for the previous one's
completion (an async call's future), when the program has at most 8 thunks, or
when every buffer is at most 512 bytes, or when the thunks form a chain; otherwise
it runs independent thunks as soon as their inputs are ready. The same programs
with the synchronous twin (``xla_ffi_rs.demo.sleep_scale``, which sleeps on XLA's
thread) are measured beside them.

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
    from xla_ffi_rs import examples

    examples.register_async()


def call(target: str, x: Any, delay_ms: int = DELAY_MS) -> Any:
    out = jax.ShapeDtypeStruct(x.shape, jnp.float32)
    return jax.ffi.ffi_call(target, out)(x, delay_ms=np.int64(delay_ms))


def program(target: str, calls: int, pad: int) -> Any:
    """`calls` independent calls of DELAY_MS, plus `pad` independent zero-delay calls."""

    def f(x: Any) -> list[Any]:
        outs = [call(target, x + float(k)) for k in range(calls)]
        return outs + [call(target, x + 10.0 + k, 0) for k in range(pad)]

    return jax.jit(f)


def main() -> None:
    register()
    x = jnp.arange(1024, dtype=jnp.float32)  # 4 KiB buffers: above the 512-byte threshold
    rows = []
    factors: dict[tuple[str, str], float] = {}
    for size, pad in (("small", 0), ("large", 7)):
        for kind, t in (("async", ASYNC), ("sync", SYNC)):
            one, two = program(t, 1, pad), program(t, 2, pad)
            a, b = two(x)[:2]
            assert np.array_equal(np.asarray(a), 2 * np.asarray(x))
            assert np.array_equal(np.asarray(b), 2 * (np.asarray(x) + 1))
            res = measure_pairs({"two calls": two, "one call": one}, x, budget=0.0, min_repeat=7, max_repeat=7)
            t_one, t_two = res["one call"]["median"], res["two calls"]["median"]
            factors[size, kind] = 2 * t_one / t_two
            rows.append(
                {
                    "program": f"{size} (+{pad} zero-delay calls)",
                    "calls": kind,
                    "delay ms": DELAY_MS,
                    "one call ms": t_one * 1e3,
                    "two calls ms": t_two * 1e3,
                    "two / one (median of pairs)": res["one call"]["ratio_median"],
                    "overlap factor": factors[size, kind],
                    "overlap": "yes" if factors[size, kind] >= 1.5 else "no",
                }
            )
            print(f"  {size} {kind}: one {t_one * 1e3:.1f} ms, two {t_two * 1e3:.1f} ms", flush=True)
    report(
        "async",
        {"two independent calls in one program vs one call (median)": rows},
        [
            target(
                f"large program: two independent async calls of {DELAY_MS} ms overlap (2 = fully)",
                factors["large", "async"],
                ">=",
                1.5,
            )
        ],
        notes=[
            "overlap factor = 2 * t(one call) / t(two calls): 2 = the calls ran concurrently, 1 = in sequence",
            "async: #[handler(async)], the call sleeps on a thread of its own; sync: it sleeps on XLA's thread",
            "small programs (<= 8 thunks, or all buffers <= 512 bytes) run thunk after thunk in XLA:CPU: no overlap",
            f"jax {jax.__version__}, {jax.device_count()} CPU device(s)",
        ],
    )


if __name__ == "__main__":
    main()
