"""Per-call cost of a Python function as a JAX op, N = 1 and N = 1e6.

The function is ``np.sin`` on float64. Contenders, each jitted, called from
Python and blocked on, measured interleaved (one batch of each in turn, per
round; the table gives the median over rounds):

* ``python_op``: ours, the function returns its result (copied into XLA's buffer);
* ``python_op out``: ours with ``takes_outputs=True``, ``np.sin(x, out=out)``
  writes into an output array, copied into XLA's result buffer;
* ``nonlinear_op``: ours from ``np.sin`` and NumPy JVP and VJP functions, the
  one-call constructor that matches JAXbind's ``get_nonlinear_call``;
* ``linear_op``: ours from ``2 x`` and its transpose (``get_linear_call``'s match);
* ``jaxbind``: JAXbind 1.x (``get_nonlinear_call``; writes into its outputs), and
  ``jaxbind linear`` (``get_linear_call``, ``2 x``), when it is installed
  (``pip install jaxbind``; never a dependency);
* ``pure_callback``: ``jax.pure_callback(np.sin, ...)``;
* ``jit(jnp.sin)``: no Python at all, for the cost of a jitted call itself;
* ``numpy``: ``np.sin(x)`` on a NumPy array, no JAX (the function's own time),
  and ``numpy out``: ``np.sin(x, out=o)`` into a preallocated array.

Targets: ``python_op`` at N = 1 costs at most 20 us a call (wall time, and CPU
time of the calling thread, which a loaded machine disturbs less); at N = 1 the
one-call constructors cost at most half of JAXbind's equivalent (the ratio is the
median over rounds of the ratio within each round); and at N = 1e6 ``python_op``,
``python_op out`` and ``nonlinear_op`` are within 10 % of the function's own NumPy
time. ``jit(jnp.sin)`` is the floor: what a jitted call costs with no Python at all.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from common import QUICK  # noqa: E402
from reporting import report, target  # noqa: E402
from xla_ffi_rs import linear_op, nonlinear_op, python_op  # noqa: E402

SIZES = (1, 1000) if QUICK else (1, 1_000_000)
#: Interleaved rounds per size (more at N = 1, where one batch is short).
ROUNDS = {1: 1 if QUICK else 41}
ROUNDS_LARGE = 1 if QUICK else 15


def contenders(n: int) -> dict[str, Callable[[], Any]]:
    x = jnp.linspace(0.0, 3.0, n)
    xn = np.asarray(x).copy()
    on = np.empty_like(xn)
    aval = jax.ShapeDtypeStruct(x.shape, x.dtype)
    ret = jax.jit(python_op(np.sin, abstract_eval=lambda x: x, name="bench_sin"))
    out = jax.jit(
        python_op(lambda x, o: np.sin(x, out=o), abstract_eval=lambda x: x, takes_outputs=True, name="bench_sin_out")
    )
    pc = jax.jit(lambda x: jax.pure_callback(np.sin, aval, x))
    nl = jax.jit(
        nonlinear_op(np.sin, lambda x, dx: np.cos(x) * dx, lambda x, ct: np.cos(x) * ct, abstract_eval=lambda x: x)
    )
    lin = jax.jit(
        linear_op(lambda x: 2.0 * x, lambda ct: 2.0 * ct, abstract_eval=lambda x: x, abstract_eval_T=lambda c: c)
    )
    fns: dict[str, Callable[[], Any]] = {
        "python_op": lambda: ret(x).block_until_ready(),
        "python_op out": lambda: out(x).block_until_ready(),
        "nonlinear_op": lambda: nl(x).block_until_ready(),
        "linear_op": lambda: lin(x).block_until_ready(),
        "pure_callback": lambda: pc(x).block_until_ready(),
        "jit(jnp.sin)": (lambda f: lambda: f(x).block_until_ready())(jax.jit(jnp.sin)),
        "numpy": lambda: np.sin(xn),
        "numpy out": lambda: np.sin(xn, out=on),
    }
    jb = jaxbind_calls()
    if jb is not None:
        jbj, jbl = jax.jit(jb[0]), jax.jit(jb[1])
        fns["jaxbind"] = lambda: jbj(x)[0].block_until_ready()
        fns["jaxbind linear"] = lambda: jbl(x)[0].block_until_ready()
    for f in fns.values():
        f()
        f()
    return fns


def jaxbind_calls() -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """JAXbind's ``np.sin`` (nonlinear) and ``2 x`` (linear), or None."""
    try:
        import jaxbind
    except ImportError:
        return None

    def f(out: Any, args: Any, kwargs_dump: Any) -> None:
        np.sin(args[0], out=out[0])

    def f_jvp(out: Any, args: Any, kwargs_dump: Any) -> None:
        x, dx = args
        np.multiply(np.cos(x), dx, out=out[0])

    def f_vjp(out: Any, args: Any, kwargs_dump: Any) -> None:
        x, ct = args
        np.multiply(np.cos(x), ct, out=out[0])

    def abstract(*args: Any, **kwargs: Any) -> Any:
        return ((args[0].shape, args[0].dtype),)

    def double(out: Any, args: Any, kwargs_dump: Any) -> None:
        np.multiply(args[0], 2.0, out=out[0])

    return (
        jaxbind.get_nonlinear_call(f, (f_jvp, f_vjp), abstract, abstract),
        jaxbind.get_linear_call(double, double, abstract, abstract),
    )


def per_call(fn: Callable[[], Any], seconds: float) -> tuple[float, float]:
    """(wall, CPU) seconds per call over a batch of about `seconds`. CPU time is this
    thread's (where XLA runs an unsharded call, and so the Python function), which
    a loaded machine disturbs less than wall time; jit(jnp.sin) also uses XLA's
    pool at N = 1e6, so its CPU column is not its cost."""
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    number = 1 if QUICK else max(1, int(seconds / one))
    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number, (time.thread_time() - c0) / number


def _pair_ratio(times: dict[str, list[tuple[float, float]]], a: str, b: str, column: int = 0) -> float:
    """The median over rounds of a / b within the same round (wall time, or CPU
    time with ``column=1``)."""
    return statistics.median(ta[column] / tb[column] for ta, tb in zip(times[a], times[b], strict=True))


def _pair_quartiles(times: dict[str, list[tuple[float, float]]], a: str, b: str, column: int) -> tuple[float, float]:
    """The first and third quartiles over rounds of a / b within the same round: the
    noise of the median ratio on this machine."""
    ratios = [ta[column] / tb[column] for ta, tb in zip(times[a], times[b], strict=True)]
    if len(ratios) < 2:
        return ratios[0], ratios[0]
    q = statistics.quantiles(ratios, n=4)
    return q[0], q[2]


def main() -> None:
    rows, cpu_rows, targets = [], [], []
    for n in SIZES:
        fns = contenders(n)
        times: dict[str, list[tuple[float, float]]] = {k: [] for k in fns}
        for _ in range(ROUNDS.get(n, ROUNDS_LARGE)):  # interleaved: one batch of each per round
            for k, f in fns.items():
                times[k].append(per_call(f, 0.01 if n == 1 else 0.1))
        med = {k: statistics.median(w for w, _ in v) for k, v in times.items()}

        cpu = {k: statistics.median(c for _, c in v) for k, v in times.items()}
        row: dict[str, Any] = {"N": n}
        for k, v in med.items():
            row[f"{k} us"] = v * 1e6
        cpu_row: dict[str, Any] = {"N": n, **{f"{k} cpu us": v * 1e6 for k, v in cpu.items()}}
        cpu_row["python_op / numpy (cpu)"] = cpu["python_op"] / cpu["numpy"]
        if "jaxbind" in cpu:
            for ours, theirs in (
                ("python_op", "jaxbind"),
                ("nonlinear_op", "jaxbind"),
                ("linear_op", "jaxbind linear"),
            ):
                cpu_row[f"{ours} / {theirs} (cpu)"] = _pair_ratio(times, ours, theirs, 1)
                q1, q3 = _pair_quartiles(times, ours, theirs, 1)
                cpu_row[f"{ours} / {theirs} (cpu) q1"] = q1
                cpu_row[f"{ours} / {theirs} (cpu) q3"] = q3
        cpu_rows.append(cpu_row)
        row["python_op / numpy"] = med["python_op"] / med["numpy"]
        row["python_op out / numpy"] = med["python_op out"] / med["numpy"]
        row["nonlinear_op / numpy"] = med["nonlinear_op"] / med["numpy"]
        pair_ratio = functools.partial(_pair_ratio, times)
        if "jaxbind" in med:
            row["python_op / jaxbind"] = pair_ratio("python_op", "jaxbind")
            row["nonlinear_op / jaxbind"] = pair_ratio("nonlinear_op", "jaxbind")
            row["linear_op / jaxbind linear"] = pair_ratio("linear_op", "jaxbind linear")
        row["python_op / pure_callback"] = pair_ratio("python_op", "pure_callback")
        row["nonlinear_op / pure_callback"] = pair_ratio("nonlinear_op", "pure_callback")
        row["jit(jnp.sin) / jaxbind"] = pair_ratio("jit(jnp.sin)", "jaxbind") if "jaxbind" in med else float("nan")
        rows.append(row)
        print(f"  {row}", flush=True)
        if n == 1:
            targets.append(
                target("python_op per call at N = 1 (jit, blocked on)", med["python_op"] * 1e6, "<=", 20, " us")
            )
            targets.append(
                target(
                    "python_op per call at N = 1, CPU time of the calling thread",
                    cpu["python_op"] * 1e6,
                    "<=",
                    20,
                    " us",
                )
            )
            if "jaxbind" in med:
                for ours, theirs in (("nonlinear_op", "jaxbind"), ("linear_op", "jaxbind linear")):
                    targets.append(target(f"{ours} / {theirs} per call at N = 1", row[f"{ours} / {theirs}"], "<=", 0.5))
        else:
            targets.append(target(f"python_op / numpy's own time at N = {n:g}", row["python_op / numpy"], "<=", 1.10))
            targets.append(
                target(f"python_op out / numpy's own time at N = {n:g}", row["python_op out / numpy"], "<=", 1.10)
            )
            targets.append(
                target(f"nonlinear_op / numpy's own time at N = {n:g}", row["nonlinear_op / numpy"], "<=", 1.10)
            )
    notes = [
        (
            f"median over {ROUNDS[1]} (N = 1) and {ROUNDS_LARGE} (N = {SIZES[-1]:g}) interleaved rounds; "
            "function np.sin on float64; every JAX call is jitted and blocked on"
        ),
        (
            "targets use wall time; the cpu table (this thread's CPU time) is less disturbed by other load; "
            "its q1 and q3 columns are the quartiles of the per-round ratios (the noise of the median)"
        ),
        "jaxbind: pip install jaxbind (bench venv only)" if "jaxbind us" not in rows[0] else "jaxbind installed",
    ]
    report("python_call", {"per-call cost (wall)": rows, "per-call cost (cpu)": cpu_rows}, targets, notes)


if __name__ == "__main__":
    main()
