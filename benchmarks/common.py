"""Timing and reporting shared by the benchmark suites (each runs in its own process)."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

RESULTS = Path(__file__).parent / "results"


def best_time(fn: Callable[..., Any], *args: Any, repeat: int = 20) -> float:
    """Best wall time in seconds of `fn(*args)`, after one warm-up call (compile)."""
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    rustc = subprocess.run(["rustc", "--version"], capture_output=True, text=True).stdout.strip() or "unknown"
    import jaxlib

    return {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "rustc": rustc,
    }


def report(suite: str, rows: list[dict[str, Any]], columns: list[str]) -> None:
    """Print a table and write results/<suite>.json."""
    widths = [max(len(c), *(len(str(r.get(c, ""))) for r in rows)) for c in columns]
    print(f"\n== {suite} ==")
    print("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for r in rows:
        print("  ".join(str(r.get(c, "")).ljust(w) for c, w in zip(columns, widths)))
    RESULTS.mkdir(exist_ok=True)
    out = {"suite": suite, "machine": machine(), "argv": sys.argv, "rows": rows}
    (RESULTS / f"{suite}.json").write_text(json.dumps(out, indent=2))


def quick() -> bool:
    """`--quick`: tiny sizes and one repeat, to check that the harness runs."""
    return "--quick" in sys.argv
