"""Per-call cost at N = 1.

* Kepler through Python: one jitted call, dispatched from Python and blocked on,
  ours against jit(sin, cos);
* Kepler in-graph: 1000 dependent calls inside one jitted lax.fori_loop
  (m <- m + kepler(m, e)[0]); a loop whose body is only the add gives the loop's
  own cost, subtracted in the "net" column;
* the binding layer alone: our trivial handler `xla_ffi_rs.demo.sleep_scale`
  (y = 2 x, float32) against its C++ ffi.h twin (benchmarks/cpp), 1000 dependent
  calls in one fori_loop each, as interleaved pairs.
"""

from __future__ import annotations

from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402

from common import QUICK, measure_pairs  # noqa: E402
from contenders import cpp, ours  # noqa: E402
from reporting import report, target  # noqa: E402

CALLS = 10 if QUICK else 1000


def sin_cos(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    del e
    return jnp.sin(m), jnp.cos(m)


def loop(f):
    def run(m: jax.Array, e: jax.Array) -> jax.Array:
        return jax.lax.fori_loop(0, CALLS, lambda i, m: m + f(m, e)[0], m)

    return jax.jit(run)


def noop(m: jax.Array, e: jax.Array) -> tuple[jax.Array]:
    return (e,)


def scale_loop(f):
    def run(x: jax.Array) -> jax.Array:
        return jax.lax.fori_loop(0, CALLS, lambda i, x: f(x) - x, x)

    return jax.jit(run)


def binding_layer(o: Any, c: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Ours against the C++ twin on the same trivial handler: the per-call cost of
    the binding layer (in-graph, so Python's dispatch is not in it)."""
    x = jnp.ones(1, jnp.float32)
    fns = {"ours": scale_loop(o.scale), **({"cpp": scale_loop(c.scale)} if c else {})}
    fns["empty loop"] = scale_loop(lambda x: 2 * x)
    graph = measure_pairs(fns, x, budget=2.0)
    row: dict[str, Any] = {f"in-graph {k} us/call": v["median"] * 1e6 / CALLS for k, v in graph.items()}
    targets = []
    if "cpp" in graph:
        base = graph["empty loop"]["median"]
        row["ours/cpp"] = graph["cpp"]["ratio_median"]
        row["ours/cpp best"] = graph["cpp"]["ratio_best"]
        row["net ours/cpp"] = (graph["ours"]["median"] - base) / max(graph["cpp"]["median"] - base, 1e-12)
        targets.append(
            target(
                f"in-graph trivial handler: ours / C++ ffi.h ({CALLS} calls in fori_loop)",
                row["ours/cpp"],
                "<=",
                1.05,
                "x",
            )
        )
    print(f"  {row}", flush=True)
    return row, targets


def main() -> None:
    o, c = ours(), cpp()
    fns = {"ours": o.kepler, "jit(sin,cos)": sin_cos}
    rows, targets = [], []
    for dtype in (jnp.float64, jnp.float32):
        m, e = jnp.ones(1, dtype), jnp.full(1, 0.5, dtype)
        py = measure_pairs({k: jax.jit(f) for k, f in fns.items()}, m, e, budget=2.0, batch=5e-3)
        graph = measure_pairs({k: loop(f) for k, f in {"ours": o.kepler, "empty loop": noop}.items()}, m, e, budget=2.0)
        row: dict[str, Any] = {"dtype": jnp.dtype(dtype).name}
        for k, v in py.items():
            row[f"python {k} us"] = v["median"] * 1e6
        row["python ours - sin,cos us"] = (py["ours"]["median"] - py["jit(sin,cos)"]["median"]) * 1e6
        row["python ours - sin,cos us best"] = (py["ours"]["best"] - py["jit(sin,cos)"]["best"]) * 1e6
        for k, v in graph.items():
            row[f"in-graph {k} us/call"] = v["median"] * 1e6 / CALLS
        row["in-graph net ours us/call"] = (graph["ours"]["median"] - graph["empty loop"]["median"]) * 1e6 / CALLS
        rows.append(row)
        print(f"  {row}", flush=True)
        targets.append(
            target(f"python N=1 {row['dtype']}: ours - jit(sin,cos)", row["python ours - sin,cos us"], "<=", 1.0, " us")
        )
    binding, binding_targets = binding_layer(o, c)
    report(
        "overhead",
        {
            "Kepler per-call cost, N = 1 (medians of interleaved pairs)": rows,
            "trivial handler, ours against the C++ ffi.h twin (in-graph)": [binding],
        },
        binding_targets + targets,
        notes=[
            "python: each call is blocked on (dispatch + execute + sync); medians of interleaved pairs, best beside",
            f"in-graph: {CALLS} dependent calls in one fori_loop; net = minus the empty loop",
            "trivial handler: y = 2 x at N = 1 (xla_ffi_rs.demo.sleep_scale, delay_ms = 0) and its C++ twin",
        ],
    )


if __name__ == "__main__":
    main()
