"""Kepler's own sharding tests, beyond the generated matrix of test_sharding.py:
inside a user's shard_map, whole and over some axes."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from sharding_checks import assert_local_and_still, close, mesh, shard_map

import xla_ffi_rs as xr
from helpers import KEPLER, kepler_solve_np


def test_kepler_inside_a_users_shard_map(use_partitioner: Callable[[str], None]) -> None:
    for pt in ("shardy", "gspmd"):
        use_partitioner(pt)
        m_ = mesh("2d")
        rng = np.random.default_rng(4)
        m, e = rng.uniform(-5, 5, (8, 8)), rng.uniform(0, 0.9, (8, 8))
        spec = P("a", "b")
        fn = jax.jit(shard_map()(xr.kepler, mesh=m_, in_specs=(spec, spec), out_specs=(spec, spec)))
        args = [jax.device_put(a, NamedSharding(m_, spec)) for a in (m, e)]
        sin_e, _ = fn(*args)
        close(sin_e, np.sin(kepler_solve_np(m, e)), f"sin E ({pt})")
        assert_local_and_still(str(fn.lower(*args).compile().as_text()), KEPLER, 8, None)


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_kepler_grad_inside_a_shard_map_over_some_explicit_axes(
    partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    """As above for kepler: the results keep the operands' split over "b"."""
    use_partitioner(partitioner)
    m = mesh("2d")
    rng = np.random.default_rng(6)
    mm, e = rng.uniform(-5, 5, (8, 6)), rng.uniform(0, 0.9, (8, 6))
    ks = NamedSharding(m, P("a", "b"))
    kfn = shard_map()(
        lambda m, e: xr.kepler(m, e)[0], mesh=m, in_specs=(P("a"), P("a")), out_specs=P("a"), axis_names={"a"}
    )
    grad = jax.jit(jax.grad(lambda m, e: jnp.sum(kfn(m, e)), (0, 1)))(jax.device_put(mm, ks), jax.device_put(e, ks))
    big_e = kepler_solve_np(mm, e)
    slope = np.cos(big_e) / (1 - e * np.cos(big_e))  # d sin(E) / dM
    close(grad[0], slope, "kepler d sin E / dM")
    close(grad[1], slope * np.sin(big_e), "kepler d sin E / de")
