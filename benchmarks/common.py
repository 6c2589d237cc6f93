"""Shared by the benchmark suites (each suite runs in its own process): settings
and timing. The contenders are in `contenders.py`, the tables and JSON results
in `reporting.py`.

* `measure`: warm-up (compile + one run), then repeats of `number` calls, each
  call followed by `block_until_ready`; reports best and median seconds per call.
* `measure_chain`: the same for `x = step(x)` chains (donated inputs).
* `measure_pairs`: ours and its contenders alternating batch by batch in this
  one process (interleaved pairs), so that a slow phase of the machine hits
  every contender alike; the primary figure is the median, the best beside it,
  and each ratio is the median of the per-pair ratios.
* `run_child`: a suite's per-setting child process (threads, allocator).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

HERE = Path(__file__).resolve().parent
RESULTS = Path(os.environ.get("XFR_BENCH_RESULTS", HERE / "results"))
CPP_LIB = Path(os.environ.get("XFR_BENCH_CPP_LIB", HERE / "cpp" / "build" / "libbench_ffi.so"))
QUICK = "--quick" in sys.argv


# ---------------------------------------------------------------------------
# Timing


def measure(
    fn: Callable[..., Any],
    *args: Any,
    budget: float = 0.4,
    min_repeat: int = 3,
    max_repeat: int = 200,
    batch: float = 2e-3,
) -> dict[str, float]:
    """Seconds per call of `fn(*args)` (each call blocked on): best and median.

    Calls are grouped in batches of `number` calls lasting about `batch` seconds;
    `repeat` batches fill about `budget` seconds (within [min_repeat, max_repeat]).
    `--quick`: one batch of one call.
    """
    jax.block_until_ready(fn(*args))  # compile
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    one = max(time.perf_counter() - t0, 1e-7)
    if QUICK:
        number, repeat = 1, 1
    else:
        number = max(1, int(batch / one))
        repeat = int(min(max_repeat, max(min_repeat, budget / (one * number))))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            jax.block_until_ready(fn(*args))
        times.append((time.perf_counter() - t0) / number)
    return {"best": min(times), "median": statistics.median(times), "repeat": repeat, "number": number}


def measure_pairs(
    fns: dict[str, Callable[..., Any]],
    *args: Any,
    budget: float = 0.8,
    min_repeat: int = 5,
    max_repeat: int = 200,
    batch: float = 2e-3,
) -> dict[str, dict[str, Any]]:
    """Interleaved pairs: each round times one batch of every fn in turn (the
    order rotating each round), all on the same `args`. The first fn is "ours".

    Returns, per name: `best` and `median` seconds per call over the rounds, and
    for every fn but the first, `ratio_median` (the median over rounds of
    ours / fn in the same round: the primary figure) and `ratio_best` (best /
    best). `--quick`: one round of one call each.
    """
    names = list(fns)
    one = {}
    for name in names:
        jax.block_until_ready(fns[name](*args))  # compile
        t0 = time.perf_counter()
        jax.block_until_ready(fns[name](*args))
        one[name] = max(time.perf_counter() - t0, 1e-7)
    if QUICK:
        number, repeat = dict.fromkeys(names, 1), 1
    else:
        number = {k: max(1, int(batch / v)) for k, v in one.items()}
        per_round = sum(one[k] * number[k] for k in names)
        repeat = int(min(max_repeat, max(min_repeat, budget / per_round)))
    times: dict[str, list[float]] = {k: [] for k in names}
    for r in range(repeat):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            fn, n = fns[name], number[name]
            t0 = time.perf_counter()
            for _ in range(n):
                jax.block_until_ready(fn(*args))
            times[name].append((time.perf_counter() - t0) / n)
    ours = times[names[0]]
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        t = times[name]
        out[name] = {"best": min(t), "median": statistics.median(t), "repeat": repeat, "number": number[name]}
        if name != names[0]:
            out[name]["ratio_median"] = statistics.median(a / b for a, b in zip(ours, t, strict=True))
            out[name]["ratio_best"] = min(ours) / min(t)
    return out


def measure_chain(step: Callable[[Any], Any], x: Any, *, repeat: int) -> tuple[dict[str, float], Any]:
    """Times `x = step(x)` (for donated inputs: each call consumes the last result)."""
    x = jax.block_until_ready(step(x))  # compile
    x = jax.block_until_ready(step(x))
    times = []
    for _ in range(1 if QUICK else repeat):
        t0 = time.perf_counter()
        x = jax.block_until_ready(step(x))
        times.append(time.perf_counter() - t0)
    return {"best": min(times), "median": statistics.median(times), "repeat": len(times), "number": 1}, x


def measure_chains_interleaved(
    steps: dict[str, Callable[[Any], Any]], inits: dict[str, Any], *, rounds: int
) -> dict[str, dict[str, float]]:
    """Times `x = step(x)` for each chain (donated inputs), one call of each per round
    in turn; per chain the best and median seconds, and against the first chain the
    median and best of the per-round ratios (its time / the first's)."""
    xs = {k: jax.block_until_ready(steps[k](jax.block_until_ready(steps[k](inits[k])))) for k in steps}
    times: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(1 if QUICK else rounds):
        for k, step in steps.items():
            t0 = time.perf_counter()
            xs[k] = jax.block_until_ready(step(xs[k]))
            times[k].append(time.perf_counter() - t0)
    first = next(iter(steps))
    out = {}
    for k, ts in times.items():
        ratios = [t / t0 for t, t0 in zip(ts, times[first], strict=True)]
        out[k] = {"best": min(ts), "median": statistics.median(ts), "ratio_median": statistics.median(ratios)}
        out[k]["ratio_best"] = min(ts) / min(times[first])
    return out


def run_child(script: str, env: dict[str, str]) -> dict[str, Any] | None:
    """Runs `script --child` (plus --quick in quick mode) with `env` added, and returns
    the JSON of its last `RESULT {...}` line; None (after printing its output) if it
    failed."""
    proc = subprocess.run(
        [sys.executable, script, "--child", *(["--quick"] if QUICK else [])],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not line:
        print(proc.stdout[-2000:], proc.stderr[-4000:], file=sys.stderr)
        return None
    return json.loads(line[-1][len("RESULT ") :])


def minor_faults() -> int:
    """Minor page faults of this process so far."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
