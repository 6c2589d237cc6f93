"""``jax.export`` with symbolic dimensions and inputs split over several devices:
a call XLA partitions by batch axes is planned on known shapes, so it is refused
naming the target, the operand and the symbolic dimension (under both
partitioners); rms_norm on an auto mesh lowers to its jnp formula, which JAX
partitions as any jnp code, and runs."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import xla_ffi_rs as xr
from helpers import rms_norm_np

EPS = 1e-5


def _spec(text: str, scope: jax.export.SymbolicScope) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(jax.export.symbolic_shape(text, scope=scope), jnp.float32)


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_a_partitioned_call_with_a_symbolic_dimension_is_refused_naming_it(
    partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    use_partitioner(partitioner)
    split = NamedSharding(jax.make_mesh((8,), ("d",)), P("d"))
    scope = jax.export.SymbolicScope()
    fn = jax.jit(xr.kepler, in_shardings=(split, split))
    with pytest.raises(ValueError) as info:
        jax.export.export(fn, disabled_checks=xr.export_checks())(_spec("8*b", scope), _spec("8*b", scope))
    message = str(info.value)
    for words in ("xla_ffi_rs.kepler: operand 0 (mean_anomaly)", "dimension `8*b` is symbolic", "several devices"):
        assert words in message, message


def test_rms_norm_split_over_an_auto_mesh_exports_and_runs() -> None:
    mesh = jax.make_mesh((8,), ("d",))
    rows, whole = NamedSharding(mesh, P("d", None)), NamedSharding(mesh, P())
    scope = jax.export.SymbolicScope()
    fn = jax.jit(lambda x, w: xr.rms_norm(x, w, eps=EPS), in_shardings=(rows, whole))
    exported = jax.export.export(fn, disabled_checks=xr.export_checks())(_spec("8*b, n", scope), _spec("n", scope))
    rng = np.random.default_rng(2)
    for shape in ((8, 3), (16, 5)):
        x, w = rng.standard_normal(shape), rng.uniform(0.5, 1.5, shape[1:])
        y = exported.call(jax.device_put(x.astype(np.float32), rows), jax.device_put(w.astype(np.float32), whole))
        np.testing.assert_allclose(np.asarray(y, np.float64), rms_norm_np(x, w, EPS)[0], rtol=2e-5, atol=2e-5)
