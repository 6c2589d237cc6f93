"""Batches that do not divide the mesh, as they reach the ops in real programs.

``jax.device_put`` and explicit mesh axes refuse a split that does not divide an
axis, but inside ``jit`` on auto mesh axes ``with_sharding_constraint`` asks for one
(6 rows over 4 devices, 5 over 2, 1 over 8, or 0) and XLA pads the last shards. The
ops must give the unsharded float64 results there: the batch-partitioned kernels
(Kepler, a python_op, a binding op) run on padded local blocks, rms_norm lowers to
its formula on auto axes. Also: shard_map with ``check_vma`` off and with mesh axes
left automatic (``axis_names``)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import xla_ffi_rs
from helpers import kepler_solve_np, rms_norm_bwd_np, rms_norm_np
from xla_ffi_rs import binding, examples, python_op

examples.register()
SCALE = binding.ops(xla_ffi_rs.declarations(), scale={})["scale"]
EPS = 1e-5

#: (devices of the mesh, rows): rows that leave the last shards short or empty.
UNEVEN = [(4, 6), (2, 5), (8, 1), (3, 7), (4, 0)]


@pytest.fixture(params=["shardy", "gspmd"])
def partitioner(request: pytest.FixtureRequest, use_partitioner) -> str:
    use_partitioner(request.param)
    return request.param


def rows(devices: int) -> NamedSharding:
    """Rows split over the first ``devices`` devices (a mesh over a subset when < 8)."""
    return NamedSharding(Mesh(np.array(jax.devices()[:devices]), ("data",)), P("data"))


@pytest.mark.parametrize(("devices", "t"), UNEVEN)
def test_rms_norm_on_uneven_rows_matches_float64(partitioner: str, devices: int, t: int) -> None:
    rng = np.random.default_rng(t)
    x, w, dy = rng.standard_normal((t, 6)), rng.standard_normal(6), rng.standard_normal((t, 6))
    split = rows(devices)

    def f(x, w):
        return xla_ffi_rs.rms_norm(jax.lax.with_sharding_constraint(x, split), w, eps=EPS)

    np.testing.assert_allclose(jax.jit(f)(x, w), rms_norm_np(x, w, EPS)[0], rtol=1e-12, atol=1e-12)
    dx, dw = jax.jit(jax.grad(lambda x, w: jnp.sum(f(x, w) * dy), (0, 1)))(x, w)
    ref_dx, ref_dw = rms_norm_bwd_np(dy, x, w, EPS)
    np.testing.assert_allclose(dx, ref_dx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dw, ref_dw, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("devices", "t"), UNEVEN)
def test_batch_partitioned_kernels_on_uneven_rows(partitioner: str, devices: int, t: int) -> None:
    """Kepler (and its gradient), a python_op and a binding op: one call per shard on
    its padded block; the padding never reaches the results."""
    rng = np.random.default_rng(t)
    m, e = rng.uniform(-3.0, 3.0, t), rng.uniform(0.0, 0.9, t)
    x = rng.standard_normal((t, 3))
    split = rows(devices)

    def con(v):
        return jax.lax.with_sharding_constraint(v, split)

    sin_e, cos_e = jax.jit(lambda m, e: xla_ffi_rs.kepler(con(m), con(e)))(m, e)
    big_e = kepler_solve_np(m, e)
    np.testing.assert_allclose(sin_e, np.sin(big_e), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(cos_e, np.cos(big_e), rtol=1e-10, atol=1e-12)
    # dE/dM = 1 / (1 - e cos E), dE/de = sin E / (1 - e cos E). (Both gradients: a
    # program whose only result is split unevenly is refused by jax itself, for the
    # jnp formula alike.)
    dm, de = jax.jit(jax.grad(lambda m, e: jnp.sum(xla_ffi_rs.kepler(con(m), e)[0]), (0, 1)))(m, e)
    slope = np.cos(big_e) / (1 - e * np.cos(big_e))
    np.testing.assert_allclose(dm, slope, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(de, slope * np.sin(big_e), rtol=1e-9, atol=1e-12)

    sin = python_op(np.sin, abstract_eval=lambda x: x, num_batch_dims=1, name=f"uneven_sin_{partitioner}")
    np.testing.assert_allclose(jax.jit(lambda x: sin(con(x)))(x), np.sin(x), rtol=1e-12)

    xf = x.astype(np.float32)
    (y,) = jax.jit(lambda x: SCALE(con(x), factor=3.0))(xf)
    np.testing.assert_array_equal(y, 3 * xf)


@pytest.mark.parametrize("check_vma", [True, False])
@pytest.mark.parametrize("manual", [("data", "model"), ("data",), ("model",)])
def test_shard_map_check_vma_and_partial_auto(check_vma: bool, manual: tuple[str, ...]) -> None:
    """rms_norm (forward and grad) and Kepler inside ``jax.shard_map`` on a 2 x 4
    auto mesh, rows split over the manual axes; the others left automatic."""
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("data", "model"))
    rng = np.random.default_rng(len(manual))
    x, w, dy = rng.standard_normal((16, 8)), rng.standard_normal(8), rng.standard_normal((16, 8))
    spec = P(manual if len(manual) > 1 else manual[0])
    kw: dict[str, Any] = {"mesh": mesh, "check_vma": check_vma, "axis_names": set(manual)}

    norm = jax.shard_map(lambda x, w: xla_ffi_rs.rms_norm(x, w, eps=EPS), in_specs=(spec, P()), out_specs=spec, **kw)
    np.testing.assert_allclose(jax.jit(norm)(x, w), rms_norm_np(x, w, EPS)[0], rtol=1e-12, atol=1e-12)
    dx, dw = jax.jit(jax.grad(lambda x, w: jnp.sum(norm(x, w) * dy), (0, 1)))(x, w)
    ref_dx, ref_dw = rms_norm_bwd_np(dy, x, w, EPS)
    np.testing.assert_allclose(dx, ref_dx, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dw, ref_dw, rtol=1e-12, atol=1e-12)

    m, e = rng.uniform(-3.0, 3.0, 16), rng.uniform(0.0, 0.9, 16)
    solve = jax.shard_map(xla_ffi_rs.kepler, in_specs=(spec, spec), out_specs=(spec, spec), **kw)
    sin_e, _ = jax.jit(solve)(m, e)
    np.testing.assert_allclose(sin_e, np.sin(kepler_solve_np(m, e)), rtol=1e-10, atol=1e-12)
