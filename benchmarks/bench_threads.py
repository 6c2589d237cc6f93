"""Thread scaling on XLA's intra-op pool: Kepler at N = 1e6 (and rms_norm aliased
forward at 8192x4096 f32) with XLA's pool restricted to 1 thread and with 2.

The pool size is set per child process with PJRT_NPROC (read by XLA's CPU client
when it creates its intra-op pool; it defaults to the usable cores, which also
follow `taskset`). The "pool threads" column is what an FFI handler sees
(ThreadPool::num_threads() from the C++ twin).

Both children stay alive side by side and are driven in interleaved pairs: each
round times one batch of a case in the 1-thread child, then one in the 2-thread
child (the order alternating by round), while the other child waits on its pipe.
A speed-up is the median over rounds of the two batches' ratio, so a slow spell of
the machine lands on both sides of a pair rather than on one process."""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any

from common import QUICK
from reporting import report, target

SETTINGS = {1: {"PJRT_NPROC": "1"}, 2: {"PJRT_NPROC": "2"}}
ROUNDS = 3 if QUICK else 41
BATCH_S = 0.02  # one batch of a case lasts about this long on one thread


def child() -> None:
    """Builds the cases, prints `READY {...}`, then answers `case number` lines on
    stdin with `T <seconds per call>` until `quit`."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    from bench_kepler import sin_cos
    from contenders import kepler_inputs, ours, xla_pool_threads

    o = ours()
    n = 20_000 if QUICK else 1_000_000
    calls: dict[str, Any] = {}
    for dtype in (np.float64, np.float32):
        m, e = kepler_inputs(n, dtype, 0.9)
        dn = np.dtype(dtype).name
        fns = {"ours": o.kepler, "sin+cos": sin_cos}
        for k, f in fns.items():
            jf = jax.jit(f)
            calls[f"kepler {dn} {k}"] = lambda jf=jf, m=m, e=e: jf(m, e)
    shape = (256, 4096) if QUICK else (8192, 4096)
    rng = np.random.default_rng(0)
    w = jnp.asarray(rng.uniform(0.5, 1.5, shape[-1]).astype(np.float32))
    step = jax.jit(lambda v: o.rms_fwd_alias(v, w)[0], donate_argnums=0)
    state = {"x": jnp.asarray(rng.standard_normal(shape, np.float32))}

    def rms() -> Any:
        state["x"] = step(state["x"])
        return state["x"]

    calls["rms_norm aliased f32"] = rms
    one = {}
    for k, f in calls.items():
        jax.block_until_ready(f())  # compile
        t0 = time.perf_counter()
        jax.block_until_ready(f())
        one[k] = time.perf_counter() - t0
    print("READY " + json.dumps({"pool threads": xla_pool_threads(), "one call s": one}), flush=True)
    for line in sys.stdin:
        if line.strip() == "quit":
            break
        case, number = line.rsplit(" ", 1)
        f = calls[case]
        t0 = time.perf_counter()
        for _ in range(int(number)):
            jax.block_until_ready(f())
        print(f"T {(time.perf_counter() - t0) / int(number)!r}", flush=True)


class Child:
    """One child process with its pool size, driven over pipes."""

    def __init__(self, env: dict[str, str]) -> None:
        import os

        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--child", *(["--quick"] if QUICK else [])],
            env={**os.environ, **env},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.ready = json.loads(self._line("READY "))

    def _line(self, prefix: str) -> str:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith(prefix):
                return line[len(prefix) :]
        raise SystemExit(f"thread child failed (exit {self.proc.wait()})")

    def time(self, case: str, number: int) -> float:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{case} {number}\n")
        self.proc.stdin.flush()
        return float(self._line("T "))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("quit\n")
        self.proc.stdin.close()
        self.proc.wait()


def main() -> None:
    kids = {t: Child(env) for t, env in SETTINGS.items()}
    try:
        one = kids[1].ready["one call s"]
        rows: list[dict[str, Any]] = [
            {
                "case": "pool threads seen by FFI",
                "1 thread ms": kids[1].ready["pool threads"],
                "2 threads ms": kids[2].ready["pool threads"],
                "speed-up": None,
            }
        ]
        speedup = {}
        for case, t1 in one.items():
            number = 1 if QUICK else max(1, int(BATCH_S / t1))
            times: dict[int, list[float]] = {1: [], 2: []}
            for r in range(ROUNDS):
                for t in (1, 2) if r % 2 == 0 else (2, 1):
                    times[t].append(kids[t].time(case, number))
            speedup[case] = statistics.median(a / b for a, b in zip(times[1], times[2], strict=True))
            rows.append(
                {
                    "case": case,
                    "1 thread ms": statistics.median(times[1]) * 1e3,
                    "2 threads ms": statistics.median(times[2]) * 1e3,
                    "speed-up": speedup[case],
                }
            )
            print(f"  {rows[-1]}", flush=True)
    finally:
        for k in kids.values():
            k.close()
    n = "2e4" if QUICK else "1e6"
    targets = [
        target(f"kepler N={n} {dt}: ours speed-up 1 -> 2 threads", speedup[f"kepler {dt} ours"], ">=", 1.8, "x")
        for dt in ("float64", "float32")
    ]
    report(
        "threads",
        {"1 vs 2 intra-op threads (median of interleaved pairs)": rows},
        targets,
        notes=[
            (
                "1 thread: PJRT_NPROC=1; 2 threads: PJRT_NPROC=2; one process each, alive side by side, "
                f"timed in {ROUNDS} interleaved rounds of one batch (~{BATCH_S * 1e3:.0f} ms on one thread) each"
            ),
            "kepler: e < 0.9; rms_norm: 8192x4096 f32 forward, aliased + donated",
        ],
        extra={"settings": SETTINGS, "children": {t: k.ready for t, k in kids.items()}},
    )


if __name__ == "__main__":
    if "--child" in sys.argv:
        child()
    else:
        main()
