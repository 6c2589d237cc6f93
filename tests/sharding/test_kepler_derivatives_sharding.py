"""Kepler's derivative targets under jit with NamedSharding inputs: a sharded jvp
runs ``kepler_jvp`` and a sharded grad ``kepler_cotangent`` shard by shard,
with no collective, and match float64 numpy references."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from sharding_checks import assert_local_and_still, close, mesh, mesh_axes

import xla_ffi_rs as xr
from helpers import kepler_solve_np

JVP = "xla_ffi_rs.kepler_jvp"
COTANGENT = "xla_ffi_rs.kepler_cotangent"

CASES = (
    ((16,), P("a"), "1d"),
    ((8, 8), P("a", "b"), "2d"),
    ((8, 8), P(None, ("a", "b")), "2d"),
    ((4, 3, 2), P("a", None, "b"), "2d"),
    ((8, 4), P("a", "b"), "2d_auto"),
)


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
@pytest.mark.parametrize(("shape", "spec", "mesh_name"), CASES, ids=lambda v: str(v).replace(" ", ""))
def test_sharded_jvp_and_grad_run_locally(
    shape: tuple[int, ...],
    spec: P,
    mesh_name: str,
    partitioner: str,
    use_partitioner: Callable[[str], None],
) -> None:
    use_partitioner(partitioner)
    rng = np.random.default_rng(len(shape))
    m, e, dm = rng.uniform(-7, 7, shape), rng.uniform(0, 0.9, shape), rng.uniform(-1, 1, shape)
    sh = NamedSharding(mesh(mesh_name), spec)
    args = [jax.device_put(a, sh) for a in (m, e, dm)]

    def jvp(m: jax.Array, e: jax.Array, dm: jax.Array) -> tuple[jax.Array, ...]:
        (s, _), (ds, dc) = jax.jvp(xr.kepler, (m, e), (dm, 0.5 * dm))
        return 2 * s, ds, dc

    def loss(m: jax.Array, e: jax.Array, dm: jax.Array) -> jax.Array:
        s, c = xr.kepler(m, e)
        return jnp.sum(dm * s + c)

    def grad(m: jax.Array, e: jax.Array, dm: jax.Array) -> tuple[jax.Array, ...]:
        return jax.grad(loss, argnums=(0, 1))(m, e, dm)

    big_e = kepler_solve_np(m, e)
    s, c = np.sin(big_e), np.cos(big_e)
    d_big_e = 1 / (1 - e * c)
    local = math.prod(shape) // math.prod(mesh(mesh_name).shape[a] for a in mesh_axes(spec))

    fn = jax.jit(jvp)
    s2, ds, dc = fn(*args)
    t = (dm + s * 0.5 * dm) * d_big_e
    close(s2, 2 * s, "sin E")
    close(ds, c * t, "d sin E (jvp)")
    close(dc, -s * t, "d cos E (jvp)")
    assert ds.sharding.is_equivalent_to(sh, len(shape))
    assert_local_and_still(str(fn.lower(*args).compile().as_text()), JVP, local, None)

    fn = jax.jit(grad)
    g_m, g_e = fn(*args)
    u = (c * dm - s) * d_big_e
    close(g_m, u, "d/dM (grad)")
    close(g_e, s * u, "d/de (grad)")
    assert g_m.sharding.is_equivalent_to(sh, len(shape))
    assert_local_and_still(str(fn.lower(*args).compile().as_text()), COTANGENT, local, None)
