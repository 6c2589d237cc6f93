"""Per-call cost: N = 1 through Python dispatch, ours against jit(sin, cos), and
1000 calls inside one jitted fori_loop (in-graph cost per call)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

import xla_ffi_rs as xr
from common import best_time, quick, report


def main() -> None:
    repeat = 5 if quick() else 200
    m, e = jnp.ones(1, jnp.float32), jnp.full(1, 0.5, jnp.float32)
    ours = best_time(jax.jit(xr.kepler), m, e, repeat=repeat)
    floor = best_time(jax.jit(lambda m, e: (jnp.sin(m), jnp.cos(m))), m, e, repeat=repeat)
    calls = 10 if quick() else 1000

    def loop(f):
        return jax.jit(lambda m, e: jax.lax.fori_loop(0, calls, lambda i, m: f(m, e)[0] + m, m))

    in_graph = best_time(loop(xr.kepler), m, e, repeat=max(1, repeat // 20))
    in_graph_sin = best_time(loop(lambda m, e: (jnp.sin(m), jnp.cos(m))), m, e, repeat=max(1, repeat // 20))
    report("overhead", [{
        "python dispatch ours us": f"{ours * 1e6:.1f}", "python dispatch jit(sin,cos) us": f"{floor * 1e6:.1f}",
        "difference us": f"{(ours - floor) * 1e6:.1f}",
        "in-graph ours us/call": f"{in_graph / calls * 1e6:.2f}",
        "in-graph sin,cos us/call": f"{in_graph_sin / calls * 1e6:.2f}",
    }], ["python dispatch ours us", "python dispatch jit(sin,cos) us", "difference us", "in-graph ours us/call",
         "in-graph sin,cos us/call"])


if __name__ == "__main__":
    main()
