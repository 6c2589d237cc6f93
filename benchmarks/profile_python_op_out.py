"""Where the time of ``python_op out`` goes beyond ``np.sin``'s own (a profile, not a suite).

``python_op out`` is ``bench_python_call.py``'s ``lambda x, o: np.sin(x, out=o)``
with ``takes_outputs=True``. This splits its cost at one size (default N = 1e5,
float64) into parts, each the median over interleaved rounds of this thread's CPU
time per call (``time.thread_time``, which a loaded machine disturbs less than
wall time), paired against ``np.sin(x, out=o)`` on NumPy's own arrays in the same
round:

* ``jit(x + 1)``: a jitted call with no Python in it (the dispatch floor);
* ``python_op``: ``python_op(np.sin)``, an exact ufunc, which runs on XLA's buffers
  with no copy: the dispatch and handler of a Python op without the two copies, so
  ``out`` minus this row is what the copies and the output array cost;
* ``noop out``: ``lambda x, o: None`` with ``takes_outputs=True``: the dispatch,
  the operand copied in, the pooled output copied out, and the handler's own work;
* ``copyto out``: ``np.copyto(o, x)``: the same plus one more copy in Python;
* ``np.copyto``: one copy of N float64 between NumPy arrays (hot);
* ``out``: the contender itself.

It also prints the minor page faults per call of each (``RUSAGE_THREAD``), to show
whether pooled or XLA's buffers fault, and the involuntary context switches per
call (how often other processes took the core during a call). Run from benchmarks/ with the venv's Python::

    python profile_python_op_out.py [N] [ROUNDS]
"""

from __future__ import annotations

import resource
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from xla_ffi_rs import python_op  # noqa: E402


def contenders(n: int) -> dict[str, Callable[[], Any]]:
    x = jnp.linspace(0.0, 3.0, n)
    xn = np.asarray(x).copy()
    on = np.empty_like(xn)

    def op(f: Callable[..., Any], name: str) -> Callable[[], Any]:
        j = jax.jit(python_op(f, abstract_eval=lambda x: x, takes_outputs=True, name=name))
        return lambda: j(x).block_until_ready()

    plus = jax.jit(lambda x: x + 1.0)
    ufunc = jax.jit(python_op(np.sin, abstract_eval=lambda x: x, name="profile_sin"))
    return {
        "numpy out": lambda: np.sin(xn, out=on),
        "out": op(lambda x, o: np.sin(x, out=o), "profile_sin_out"),
        "python_op": lambda: ufunc(x).block_until_ready(),
        "noop out": op(lambda x, o: None, "profile_noop_out"),
        "copyto out": op(lambda x, o: np.copyto(o, x), "profile_copyto_out"),
        "jit(x + 1)": lambda: plus(x).block_until_ready(),
        "np.copyto": lambda: np.copyto(on, xn),
    }


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 30
    fns = contenders(n)
    for f in fns.values():
        f()
        f()
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    faults: dict[str, list[float]] = {k: [] for k in fns}
    switches: dict[str, list[float]] = {k: [] for k in fns}
    calls = 20
    for _ in range(rounds):
        for k, f in fns.items():
            r0, c0 = resource.getrusage(resource.RUSAGE_THREAD), time.thread_time()
            for _ in range(calls):
                f()
            cpu[k].append((time.thread_time() - c0) / calls)
            r1 = resource.getrusage(resource.RUSAGE_THREAD)
            faults[k].append((r1.ru_minflt - r0.ru_minflt) / calls)
            switches[k].append((r1.ru_nivcsw - r0.ru_nivcsw) / calls)
    base = cpu["numpy out"]
    print(f"N = {n}, jax {jax.__version__}, {rounds} rounds of {calls} calls, thread CPU time")
    for k in fns:
        extra = statistics.median(a - b for a, b in zip(cpu[k], base, strict=True))
        ratio = statistics.median(a / b for a, b in zip(cpu[k], base, strict=True))
        print(
            f"  {k:11s} {statistics.median(cpu[k]) * 1e6:8.1f} us   - numpy out {extra * 1e6:+8.1f} us"
            f"   / numpy out {ratio:6.3f}   faults/call {statistics.median(faults[k]):6.1f}"
            f"   preempted/call {statistics.mean(switches[k]):5.2f}"
        )


if __name__ == "__main__":
    main()
