"""Per-call cost of a Python function as a JAX op, N = 1 and N = 1e6.

The function is ``np.sin`` on float64. Contenders, each jitted, called from
Python and blocked on, measured interleaved (one batch of each in turn, per
round; the table gives the median over rounds):

* ``python_op``: ours on ``np.sin``, an exact ``numpy.ufunc``: at N = 1 it is called
  directly from Rust on a copy of the operand and its result is copied into XLA's
  buffer; from 4096 elements (N = 1e5, 1e6) it runs on XLA's own buffers with no
  copy (the extension's ``call_ufunc``, see docs/python_op.md);
* ``python_op out``: ours with ``takes_outputs=True``, ``np.sin(x, out=out)`` (a
  lambda, so never in place), called directly from Rust: the operand is copied in,
  ``out`` is a pooled array, copied into XLA's result buffer;
* ``nonlinear_op``: ours from ``np.sin`` and NumPy JVP and VJP functions, the
  one-call constructor that matches JAXbind's ``get_nonlinear_call``; its primal is
  the ufunc itself, so it takes ``python_op``'s paths;
* ``linear_op``: ours from ``2 x`` (``np.multiply(x, 2.0)``, the ufunc call of JAXbind's
  contender, inside a Python function: copies) and its transpose (``get_linear_call``'s
  match);
* ``jaxbind``: JAXbind 1.x (``get_nonlinear_call``; writes into its outputs), and
  ``jaxbind linear`` (``get_linear_call``, ``2 x``), when it is installed
  (``pip install jaxbind``; never a dependency);
* ``pure_callback``: ``jax.pure_callback(np.sin, ...)``;
* ``jit(jnp.sin)``: no Python at all, for the cost of a jitted call itself;
* ``numpy``: ``np.sin(x)`` on a NumPy array, no JAX (the function's own time),
  and ``numpy out``: ``np.sin(x, out=o)`` into a preallocated array.

In-graph, at N = 1: the op's own per-call cost, with the dispatch of a jitted
call from Python taken out: ``CALLS`` dependent calls inside one jitted
``lax.fori_loop`` (``x = op(x)``, time / ``CALLS``), as ``bench_overhead.py``
measures ours against the C++ twin. ``np.sin`` iterated (``x = sin(x)``) and
``2 x`` halved after each call (``x = 0.5 * op(x)``, so ``x`` stays put) keep the
values bounded and the same for every contender, and so the NumPy work. Contenders:
``python_op``, ``nonlinear_op`` and ``jaxbind`` (``np.sin``), ``linear_op`` and
``jaxbind linear`` (``2 x``), ``pure_callback`` and ``jit(jnp.sin)`` (no Python).

Targets: ``python_op`` at N = 1 costs at most 20 us a call dispatched from Python
(wall time, and CPU time of the calling thread, which a loaded machine disturbs
less); in-graph at N = 1, ``python_op`` and ``nonlinear_op`` cost at most half of
``jaxbind`` per call and ``linear_op`` at most half of ``jaxbind linear`` (each
ratio is the median over rounds of the ratio within each round); and at N = 1e5
and 1e6 ``python_op``, ``python_op out`` and ``nonlinear_op`` (dispatched from
Python) are within 10 % of the function's own NumPy time. The dispatched ratios
against JAXbind at N = 1 are reported, not targets: a jitted call's dispatch from
Python is most of a JAXbind call there, and ``jit(jnp.sin) / jaxbind``, beside
them, is the floor that no handler can go below (about 0.5 on an idle machine).
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

SIZES = (1, 1000) if QUICK else (1, 100_000, 1_000_000)
#: Interleaved rounds per size (more at N = 1, where one batch is short).
ROUNDS = {1: 1 if QUICK else 41}
ROUNDS_LARGE = 1 if QUICK else 15
#: Dependent calls in one jitted fori_loop, in-graph.
CALLS = 20 if QUICK else 200


def _double(x: Any) -> Any:
    """``2 x`` by the same ufunc call as JAXbind's contender (``np.multiply(x, 2.0,
    out=...)``), so both sides run the same NumPy work."""
    return np.multiply(x, 2.0)


#: In-graph pairs: ours, theirs (each ratio is a target, <= 0.5).
IN_GRAPH_PAIRS = (("python_op", "jaxbind"), ("nonlinear_op", "jaxbind"), ("linear_op", "jaxbind linear"))


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
    lin = jax.jit(linear_op(_double, _double, abstract_eval=lambda x: x, abstract_eval_T=lambda c: c))
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


def in_graph(op: Callable[..., Any], *, first: bool = False, scale: float = 1.0) -> Callable[[], Any]:
    """``CALLS`` dependent calls ``x = scale * op(x)`` (``op(x)[0]`` with ``first``,
    for JAXbind's tuple of results) in one jitted fori_loop from ``x`` = 0.5 .. 1.5."""

    def run(x: jax.Array) -> jax.Array:
        def body(i: int, x: jax.Array) -> jax.Array:
            r = op(x)
            return (r[0] if first else r) * scale

        return jax.lax.fori_loop(0, CALLS, body, x)

    f, x = jax.jit(run), jnp.linspace(0.5, 1.5, 1)
    return lambda: f(x).block_until_ready()


def in_graph_contenders() -> dict[str, Callable[[], Any]]:
    """The in-graph loops at N = 1 (see the module's docstring)."""

    def pc(x: jax.Array) -> jax.Array:
        return jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)

    fns = {
        "python_op": in_graph(python_op(np.sin, abstract_eval=lambda x: x, name="bench_sin_loop")),
        "nonlinear_op": in_graph(
            nonlinear_op(np.sin, lambda x, dx: np.cos(x) * dx, lambda x, ct: np.cos(x) * ct, abstract_eval=lambda x: x)
        ),
        "linear_op": in_graph(
            linear_op(_double, _double, abstract_eval=lambda x: x, abstract_eval_T=lambda c: c),
            scale=0.5,
        ),
        "pure_callback": in_graph(pc),
        "jit(jnp.sin)": in_graph(jnp.sin),
    }
    jb = jaxbind_calls()
    if jb is not None:
        fns["jaxbind"] = in_graph(jb[0], first=True)
        fns["jaxbind linear"] = in_graph(jb[1], first=True, scale=0.5)
    for f in fns.values():
        f()
        f()
    return fns


def measure_in_graph() -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """The in-graph per-call cost at N = 1 (wall and CPU rows) and its targets."""
    fns = in_graph_contenders()
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in fns}
    for r in range(ROUNDS[1]):  # interleaved, the order rotating each round
        names = list(fns)
        for k in names[r % len(names) :] + names[: r % len(names)]:
            wall, cpu = per_call(fns[k], 0.01)
            times[k].append((wall / CALLS, cpu / CALLS))
    row: dict[str, Any] = {"N": 1, "calls": CALLS}
    cpu_row: dict[str, Any] = {"N": 1, "calls": CALLS}
    for k, v in times.items():
        row[f"{k} us"] = statistics.median(w for w, _ in v) * 1e6
        cpu_row[f"{k} cpu us"] = statistics.median(c for _, c in v) * 1e6
    targets = []
    pairs = [p for p in IN_GRAPH_PAIRS if p[1] in fns]
    pairs += [(ours, "pure_callback") for ours in ("python_op", "nonlinear_op")]
    for ours, theirs in pairs:
        row[f"{ours} / {theirs}"] = _pair_ratio(times, ours, theirs)
        q1, q3 = _pair_quartiles(times, ours, theirs, 0)
        row[f"{ours} / {theirs} q1"], row[f"{ours} / {theirs} q3"] = q1, q3
        cpu_row[f"{ours} / {theirs} (cpu)"] = _pair_ratio(times, ours, theirs, 1)
        name = f"{ours} / {theirs} per call in-graph ({CALLS} calls in fori_loop) at N = 1"
        targets.append(target(name, row[f"{ours} / {theirs}"], "<=", 0.5))
    print(f"  {row}", flush=True)
    return row, cpu_row, targets


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
        else:
            targets.append(target(f"python_op / numpy's own time at N = {n:g}", row["python_op / numpy"], "<=", 1.10))
            targets.append(
                target(f"python_op out / numpy's own time at N = {n:g}", row["python_op out / numpy"], "<=", 1.10)
            )
            targets.append(
                target(f"nonlinear_op / numpy's own time at N = {n:g}", row["nonlinear_op / numpy"], "<=", 1.10)
            )
    graph_row, graph_cpu_row, graph_targets = measure_in_graph()
    targets = graph_targets + targets
    notes = [
        (
            f"median over {ROUNDS[1]} (N = 1) and {ROUNDS_LARGE} (larger N) interleaved rounds; "
            "function np.sin on float64; every JAX call is jitted and blocked on"
        ),
        (
            f"in-graph: {CALLS} dependent calls x = op(x) in one jitted fori_loop, time / {CALLS} "
            "(no dispatch from Python); the <= 0.5 targets against JAXbind and pure_callback are these"
        ),
        (
            "dispatched from Python at N = 1, the ratios against JAXbind are reported, not targets: "
            "jit(jnp.sin) / jaxbind (no Python at all) is their floor"
        ),
        (
            "targets use wall time; the cpu table (this thread's CPU time) is less disturbed by other load; "
            "its q1 and q3 columns are the quartiles of the per-round ratios (the noise of the median)"
        ),
        "jaxbind: pip install jaxbind (bench venv only)" if "jaxbind us" not in rows[0] else "jaxbind installed",
    ]
    tables = {
        "per-call cost in-graph (wall)": [graph_row],
        "per-call cost in-graph (cpu)": [graph_cpu_row],
        "per-call cost (wall)": rows,
        "per-call cost (cpu)": cpu_rows,
    }
    report("python_call", tables, targets, notes)


if __name__ == "__main__":
    main()
