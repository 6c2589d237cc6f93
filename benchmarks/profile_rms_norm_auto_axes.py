"""What rms_norm gives up on auto mesh axes when only the rows are split (a
measurement, not a suite).

On auto axes (``Mesh(devices, names)``) the rms_norm ops lower to their jnp
formulas under ``jit`` over several devices, since the split of the hidden axis is
unknown when lowering. With only the token axis split the kernels could have run on
whole rows; this times both programs on the same sharded inputs: the formula (what
runs) and the kernels (the lowering forced to them by making
``xla_ffi_rs.sharding.known_unsplit`` answer True while compiling). Forward and
grad of ``sum(rms_norm(x, w) * x)``, f32, x split over the tokens on 8 forced CPU
devices; each round takes the best of 3 calls of each program in turn, and the
ratio printed is the median over rounds of formula / kernel.

    python benchmarks/profile_rms_norm_auto_axes.py [tokens hidden]
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()

import sys
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import xla_ffi_rs as xr
from xla_ffi_rs import sharding

ROUNDS = 60


def compiled(x: jax.Array, w: jax.Array, kernel: bool) -> tuple[Any, Any]:
    """(forward, grad), compiled with the kernels forced or with the default lowering."""
    default = sharding.known_unsplit
    if kernel:
        sharding.known_unsplit = lambda *_: True
    try:
        fwd = jax.jit(lambda x, w: xr.rms_norm(x, w)).lower(x, w).compile()
        loss = jax.grad(lambda x, w, g: jnp.sum(xr.rms_norm(x, w) * g), (0, 1))
        return fwd, jax.jit(loss).lower(x, w, x).compile()
    finally:
        sharding.known_unsplit = default


def best_of_3(fn: Any, *args: jax.Array) -> float:
    times = []
    for _ in range(3):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    tokens, hidden = (int(a) for a in sys.argv[1:3]) if len(sys.argv) > 2 else (8192, 512)
    mesh = Mesh(np.array(jax.devices()[:8]), ("d",))
    rng = np.random.default_rng(0)
    x = jax.device_put(rng.standard_normal((tokens, hidden), np.float32), NamedSharding(mesh, P("d", None)))
    w = jax.device_put(rng.standard_normal(hidden).astype(np.float32), NamedSharding(mesh, P()))
    (fk, gk), (ff, gf) = compiled(x, w, kernel=True), compiled(x, w, kernel=False)
    assert "xla_ffi_rs.rms_norm_fwd" in fk.as_text() and "xla_ffi_rs.rms_norm_fwd" not in ff.as_text()
    runs = {"forward": ((fk, ff), (x, w)), "grad": ((gk, gf), (x, w, x))}
    for (kernel, formula), args in runs.values():
        best_of_3(kernel, *args), best_of_3(formula, *args)
    ratios: dict[str, list[float]] = {what: [] for what in runs}
    times: dict[str, list[tuple[float, float]]] = {what: [] for what in runs}
    for _ in range(ROUNDS):
        for what, ((kernel, formula), args) in runs.items():
            k, f = best_of_3(kernel, *args), best_of_3(formula, *args)
            ratios[what].append(f / k)
            times[what].append((k, f))
    for what in runs:
        k, f = np.median(np.array(times[what]), axis=0) * 1e3
        print(
            f"jax {jax.__version__} ({tokens}, {hidden}) f32, tokens / 8, auto axes, {what}: "
            f"kernel {k:.3f} ms, formula {f:.3f} ms, formula / kernel {np.median(ratios[what]):.2f}"
        )


if __name__ == "__main__":
    main()
