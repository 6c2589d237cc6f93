"""Ops built by binding.op/binding.ops from declarations, under jit over 8 devices:
the batch sharding follows from the shape rule (no collective in the compiled
program, each call on its local block), for both partitioners. The package's
kepler and rms_norm, built the same way, have their own matrix in test_sharding.py."""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import xla_ffi_rs
from helpers import kepler_solve_np, rms_norm_bwd_np
from xla_ffi_rs import binding, examples
from xla_ffi_rs.ops.rms_norm import rms_norm_dweight_jnp

examples.register()
OPS = binding.ops(
    xla_ffi_rs.declarations(),
    rms_norm_bwd={"reductions": {1: rms_norm_dweight_jnp}},
    kepler={},
    kepler_tangent={},
    kepler_cotangent={},
    scale={},
)
MOVES_DATA = re.compile(r"\b(all-gather|all-to-all|collective-permute|all-reduce)(-start)?\(")


def calls(hlo: str, target: str) -> list[str]:
    return [line for line in hlo.splitlines() if f'custom_call_target="{target}"' in line]


def local_sizes(lines: list[str]) -> set[int]:
    sizes = set()
    for line in lines:
        dims = re.search(r"=\s*\(?\w+\[([\d,]*)\]", line)
        assert dims, line
        sizes.add(math.prod(int(d) for d in dims.group(1).split(",") if d))
    return sizes


def mesh_2d() -> jax.sharding.Mesh:
    return jax.make_mesh((4, 2), ("a", "b"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
@pytest.mark.parametrize(("shape", "spec"), [((16,), P(("a", "b"))), ((8, 6), P("a", "b")), ((4, 2, 3), P("a", "b"))])
def test_scale_and_its_transpose_run_on_local_blocks(
    shape: tuple[int, ...], spec: P, partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    use_partitioner(partitioner)
    scale = OPS["scale"]
    x = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    xs = jax.device_put(x, NamedSharding(mesh_2d(), spec))

    def f(x: jax.Array) -> tuple[jax.Array, jax.Array]:
        y = scale(x, factor=3.0)[0]
        g = jax.grad(lambda x: (scale(x, factor=3.0)[0] * x).sum())(x)
        return y, g

    fn = jax.jit(f)
    y, g = fn(xs)
    np.testing.assert_array_equal(y, 3 * x)
    np.testing.assert_allclose(g, 6 * x, rtol=1e-6)
    hlo = str(fn.lower(xs).compile().as_text())
    assert not MOVES_DATA.search(hlo), hlo
    target = scale.targets["cpu"]
    assert local_sizes(calls(hlo, target)) == {math.prod(shape) // 8}


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_kepler_tangent_transposes_on_local_blocks(partitioner: str, use_partitioner: Callable[[str], None]) -> None:
    use_partitioner(partitioner)
    tangent = OPS["kepler_tangent"]
    rng = np.random.default_rng(0)
    m, e, dm = rng.uniform(-3, 3, (8, 4)), rng.uniform(0, 0.9, (8, 4)), rng.normal(size=(8, 4))
    sh = NamedSharding(mesh_2d(), P("a", "b"))
    args = [jax.device_put(a, sh) for a in (m, e, dm)]

    def f(m: jax.Array, e: jax.Array, dm: jax.Array) -> jax.Array:
        s, c = OPS["kepler"](m, e)
        return jax.grad(lambda dm: tangent(dm, jnp.zeros_like(dm), e, s, c)[0].sum())(dm)

    fn = jax.jit(f)
    got = fn(*args)
    big_e = kepler_solve_np(m, e)
    np.testing.assert_allclose(got, np.cos(big_e) / (1 - e * np.cos(big_e)), rtol=1e-10)
    hlo = str(fn.lower(*args).compile().as_text())
    assert not MOVES_DATA.search(hlo), hlo
    assert local_sizes(calls(hlo, OPS["kepler_cotangent"].targets["cpu"])) == {4}


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_a_result_summed_over_the_batch_is_completed_by_one_all_reduce(
    partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    use_partitioner(partitioner)
    bwd = OPS["rms_norm_bwd"]
    rng = np.random.default_rng(1)
    dy, x, w = rng.normal(size=(16, 6)), rng.normal(size=(16, 6)), rng.uniform(0.5, 1.5, 6)
    m = mesh_2d()
    args = [
        jax.device_put(dy, NamedSharding(m, P("a"))),
        jax.device_put(x, NamedSharding(m, P("a"))),
        jax.device_put(w, NamedSharding(m, P())),
    ]
    fn = jax.jit(lambda *a: bwd(*a, eps=1e-5))
    dx, dw = fn(*args)
    rdx, rdw = rms_norm_bwd_np(dy, x, w, 1e-5)
    np.testing.assert_allclose(dx, rdx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(dw, rdw, rtol=1e-10, atol=1e-12)
    hlo = str(fn.lower(*args).compile().as_text())
    moved = [line for line in hlo.splitlines() if MOVES_DATA.search(line)]
    assert all("all-reduce" in line for line in moved), moved
    assert local_sizes(calls(hlo, bwd.targets["cpu"])) <= {4 * 6}


@pytest.mark.parametrize("spmd_axis_name", [None, "a"])
def test_vmap_with_a_weight_per_example_over_an_explicitly_split_batch(spmd_axis_name: str | None) -> None:
    """A weight per example cannot enter the batch ellipsis, so vmap loops with
    ``lax.map``, which refused a batch split over explicit mesh axes with JAX's
    "0th dimension of all xs should be replicated" (naming no op). The batch is
    gathered for the loop and the results are split like it again, as jnp's are."""
    bwd = OPS["rms_norm_bwd"]
    mesh = mesh_2d()
    rng = np.random.default_rng(5)
    dy, x, w = rng.normal(size=(8, 3, 6)), rng.normal(size=(8, 3, 6)), rng.uniform(0.5, 1.5, (8, 6))
    split = [jax.device_put(a, NamedSharding(mesh, P("a"))) for a in (dy, x, w)]
    f = jax.jit(jax.vmap(lambda dy, x, w: bwd(dy, x, w, eps=1e-5), spmd_axis_name=spmd_axis_name))
    dx, dw = f(*split)
    for i in range(8):
        want_dx, want_dw = rms_norm_bwd_np(dy[i], x[i], w[i], 1e-5)
        np.testing.assert_allclose(np.asarray(dx)[i], want_dx, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(dw)[i], want_dw, rtol=1e-12)
    assert jax.typeof(dx).sharding.spec == P("a", None, None) and jax.typeof(dw).sharding.spec == P("a", None)
