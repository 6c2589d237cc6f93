"""``jax_use_shardy_partitioner`` off: GSPMD where jax still has it, Shardy where the
flag no longer has an effect (jax 0.12.1 on). Either way a batch-partitioned call on
a mesh with auto axes (``Mesh(devices, names)``) runs on each device's block, keeps
its operands' layout and moves no data."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from sharding_checks import assert_local_and_still, close

import xla_ffi_rs as xr
from helpers import KEPLER, kepler_solve_np
from xla_ffi_rs.sharding import gspmd_available, shardy_partitions

#: name -> (mesh shape, axis names, spec of (8, 4) operands)
LAYOUTS = {
    "1d": ((8,), ("d",), P("d")),
    "1d_second_axis": ((4,), ("d",), P(None, "d")),
    "2d": ((2, 4), ("a", "b"), P("a", "b")),
    "2d_first_axis": ((2, 4), ("a", "b"), P("a")),
    "2d_both_on_one": ((2, 4), ("a", "b"), P(("a", "b"))),
}


def test_the_flag_has_the_effect_the_lowering_shows(use_partitioner: Callable[[str], None]) -> None:
    """With the flag off, jax lowers for Shardy (``sdy.sharding``) exactly where
    ``gspmd_available()`` says GSPMD is gone."""
    use_partitioner("gspmd")
    m = Mesh(np.array(jax.devices()), ("d",))
    x = jax.device_put(np.ones(16, np.float32), NamedSharding(m, P("d")))
    text = jax.jit(jnp.sin).lower(x).as_text()
    assert ("sdy.sharding" in text) == (not gspmd_available()), text[:400]
    assert shardy_partitions() == (not gspmd_available())
    use_partitioner("shardy")
    assert shardy_partitions()


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_kepler_on_auto_axes_stays_local(layout: str, partitioner: str, use_partitioner: Callable[[str], None]) -> None:
    use_partitioner(partitioner)
    shape, names, spec = LAYOUTS[layout]
    devices = np.array(jax.devices()[: int(np.prod(shape))]).reshape(shape)
    sh = NamedSharding(Mesh(devices, names), spec)
    rng = np.random.default_rng(len(layout))
    m, e, dm = rng.uniform(-7, 7, (8, 4)), rng.uniform(0, 0.9, (8, 4)), rng.uniform(-1, 1, (8, 4))
    args = [jax.device_put(a, sh) for a in (m, e, dm)]
    local = int(np.prod(sh.shard_shape((8, 4))))
    big_e = kepler_solve_np(m, e)
    s, c = np.sin(big_e), np.cos(big_e)
    d_big_e = 1 / (1 - e * c)
    programs = {
        "forward": (lambda m, e, dm: xr.kepler(m, e), [s, c], KEPLER),
        "jvp": (
            lambda m, e, dm: jax.jvp(xr.kepler, (m, e), (dm, 0.5 * dm))[1],
            [c * (dm + s * 0.5 * dm) * d_big_e, -s * (dm + s * 0.5 * dm) * d_big_e],
            "xla_ffi_rs.kepler_jvp",
        ),
        "grad": (
            lambda m, e, dm: jax.grad(lambda m, e: jnp.sum(dm * xr.kepler(m, e)[0]), (0, 1))(m, e),
            [dm * c * d_big_e, dm * c * d_big_e * s],
            "xla_ffi_rs.kepler_cotangent",
        ),
    }
    for name, (f, wants, target) in programs.items():
        fn = jax.jit(f)
        got = fn(*args)
        for i, (g, want) in enumerate(zip(got, wants, strict=True)):
            close(g, want, f"{name} result {i}")
            assert g.sharding.is_equivalent_to(sh, 2), f"{name} result {i}: laid out {g.sharding}, operands {sh}"
        assert_local_and_still(str(fn.lower(*args).compile().as_text()), target, local, None)
