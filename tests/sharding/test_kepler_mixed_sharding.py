"""Kepler with operands split differently on a mesh with explicit axes: a sharded
mean anomaly with a scalar or replicated eccentricity (an orbit's one e for many
times, the common case), or e split another way. The gradient of each operand
comes back typed like that operand, and matches float64 numpy references."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from sharding_checks import close, mesh

import xla_ffi_rs as xr
from helpers import kepler_solve_np

CASES = (  # (M's shape, M's spec, e's shape, e's spec), on the 2d mesh (a: 4, b: 2)
    ((16,), P("a"), (), P()),
    ((8, 6), P("a", "b"), (), P()),
    ((8, 6), P("a", None), (6,), P()),
    ((8, 6), P("a", "b"), (8, 1), P("a", None)),
    ((8, 6), P("a", None), (8, 6), P(None, "b")),
    ((8, 6), P("a", None), (8, 6), P()),
)


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
@pytest.mark.parametrize(("m_shape", "m_spec", "e_shape", "e_spec"), CASES, ids=lambda v: str(v).replace(" ", ""))
def test_grad_of_each_operand_is_typed_like_it(
    m_shape: tuple[int, ...],
    m_spec: P,
    e_shape: tuple[int, ...],
    e_spec: P,
    partitioner: str,
    use_partitioner: Callable[[str], None],
) -> None:
    use_partitioner(partitioner)
    rng = np.random.default_rng(len(m_shape) + len(e_shape))
    m, e = rng.uniform(-7, 7, m_shape), rng.uniform(0.05, 0.9, e_shape)
    the_mesh = mesh("2d")
    m_s, e_s = NamedSharding(the_mesh, m_spec), NamedSharding(the_mesh, e_spec)
    args = (jax.device_put(m, m_s), jax.device_put(e, e_s))

    def loss(m: jax.Array, e: jax.Array) -> jax.Array:
        s, c = xr.kepler(m, e)
        return jnp.sum(s + 0.5 * c)

    big_e = kepler_solve_np(m, e)
    s, c = np.sin(big_e), np.cos(big_e)
    u = (c - 0.5 * s) / (1 - np.broadcast_to(e, m_shape) * c)  # d loss / dM per element (dE/dM = 1 / (1 - e cos E))
    want_m, want_e = u, _sum_to(s * u, e_shape)
    # Without jit, jax needs the mesh as context on explicit axes (for jnp ops too).
    for grad, jitted in ((jax.grad(loss, argnums=(0, 1)), False), (jax.jit(jax.grad(loss, argnums=(0, 1))), True)):
        with contextlib.nullcontext() if jitted else jax.set_mesh(the_mesh):
            g_m, g_e = grad(*args)
        close(g_m, want_m, "d/dM (grad)")
        close(g_e, want_e, "d/de (grad)")
        assert (g_m.shape, g_e.shape) == (m_shape, e_shape)
        assert g_m.sharding.is_equivalent_to(m_s, len(m_shape)), g_m.sharding
    if e_shape != m_shape:  # e's cotangent is summed shard by shard, never gathered
        hlo = str(jax.jit(jax.grad(loss, argnums=(0, 1))).lower(*args).compile().as_text())
        assert "all-gather" not in hlo, [line for line in hlo.splitlines() if "all-gather" in line]
    _, de_vjp = jax.jit(lambda m, e, g: jax.vjp(xr.kepler, m, e)[1](g))(*args, (jnp.ones(m_shape), jnp.zeros(m_shape)))
    close(de_vjp, _sum_to(c * s / (1 - np.broadcast_to(e, m_shape) * c), e_shape), "d/de (vjp)")


def _sum_to(a: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The transpose of broadcasting ``shape`` to ``a.shape``: sums over the axes added or stretched."""
    a = np.sum(a, axis=tuple(range(a.ndim - len(shape))))
    return np.sum(a, axis=tuple(i for i, n in enumerate(shape) if n == 1), keepdims=True).reshape(shape)


def test_vmap_over_split_mean_anomaly_with_one_eccentricity() -> None:
    """``vmap(kepler, in_axes=(0, None))``: the unbatched e is broadcast along the
    batch axis split like M's, so the gradient of e is typed like e."""
    rng = np.random.default_rng(5)
    m, e = rng.uniform(-7, 7, (4, 16)), rng.uniform(0.05, 0.9, (16,))
    the_mesh = mesh("2d")
    args = (jax.device_put(m, NamedSharding(the_mesh, P("a", "b"))), jax.device_put(e, NamedSharding(the_mesh, P())))

    def loss(m: jax.Array, e: jax.Array) -> jax.Array:
        s, c = jax.vmap(xr.kepler, in_axes=(0, None))(m, e)
        return jnp.sum(s + 0.5 * c)

    big_e = kepler_solve_np(m, e)
    s, c = np.sin(big_e), np.cos(big_e)
    u = (c - 0.5 * s) / (1 - e * c)
    g_m, g_e = jax.jit(jax.grad(loss, argnums=(0, 1)))(*args)
    close(g_m, u, "d/dM (grad of vmap)")
    close(g_e, _sum_to(s * u, e.shape), "d/de (grad of vmap)")
    assert g_m.sharding.is_equivalent_to(args[0].sharding, 2), g_m.sharding


@pytest.mark.parametrize("call", ["jit", "jit_spmd_axis_name", "grad", "eager"])
def test_vmap_over_split_mean_anomaly_with_an_eccentricity_off_the_mesh(call: str) -> None:
    """The same with e a constant of the function (a Python float or a host array,
    typed on no mesh) and no ``jax.set_mesh``: broadcasting e along the split batch
    axis took the mesh of e's type, the empty one, and raised JAX's "Resource axis:
    a ... is not found in mesh: ()" (naming no op) where jnp's vmap works; it takes
    M's mesh now."""
    m = np.random.default_rng(6).uniform(-7, 7, (8, 6))
    m_split = jax.device_put(m, NamedSharding(mesh("1d"), P("a")))
    big_e = kepler_solve_np(m, 0.3)
    for e in (0.3, np.full(6, 0.3)):
        f = jax.vmap(
            functools.partial(lambda e, m: xr.kepler(m, e)[0], e),
            spmd_axis_name="a" if call == "jit_spmd_axis_name" else None,
        )
        if call == "grad":
            g = jax.jit(jax.grad(lambda m, f=f: jnp.sum(f(m))))(m_split)
            close(g, np.cos(big_e) / (1 - 0.3 * np.cos(big_e)), "d sin(E) / dM (grad of vmap)")
            assert g.sharding.is_equivalent_to(m_split.sharding, 2), g.sharding
            continue
        s = f(m_split) if call == "eager" else jax.jit(f)(m_split)
        close(s, np.sin(big_e), f"sin(E) ({call})")
        assert jax.typeof(s).sharding.spec == P("a", None), jax.typeof(s).sharding.spec


@pytest.mark.parametrize("m_spec", [P("a", "b"), P(None, "b"), P(("a", "b"), None)], ids=str)
def test_an_eager_call_on_split_mean_anomaly_with_an_eccentricity_off_the_mesh(m_spec: P) -> None:
    """Eager calls, no ``jax.set_mesh``: M split on explicit mesh axes, e a Python
    float, a host array or a JAX array on one device. Placing e like M took the mesh
    of M's type, which has no devices, and every call failed in JAX ("Length of device
    assignment 1 ..." or "is_fully_addressable is not implemented for AbstractMesh")
    where jnp's ``sin(M) * e`` works; the ops, the op a ``binding`` declaration makes,
    and an eager ``vmap`` over M's split first axis are typed as jnp's result."""
    m = np.random.default_rng(7).uniform(-7, 7, (8, 6))
    m_split = jax.device_put(m, NamedSharding(mesh("2d"), m_spec))
    op = xr.binding.op(xr.declarations()["xla_ffi_rs.kepler"])
    big_e = kepler_solve_np(m, 0.3)
    for e in (0.3, np.full((8, 6), 0.3), jnp.full((8, 6), 0.3)):
        expected = jax.typeof(jnp.sin(m_split) * e).sharding.spec
        calls = {"kepler": lambda e=e: xr.kepler(m_split, e)[0]}
        if np.ndim(e):  # a declared op takes operands of the declared shapes as they are
            calls["binding op"] = lambda e=e: op(m_split, e)[0]
        for name, call in calls.items():
            s = call()
            close(s, np.sin(big_e), f"sin(E) ({name}, e a {type(e).__name__})")
            assert jax.typeof(s).sharding.spec == expected, (name, jax.typeof(s).sharding.spec, expected)
    if m_spec[0] is not None:
        s = jax.vmap(lambda m: xr.kepler(m, 0.3)[0])(m_split)
        close(s, np.sin(big_e), "sin(E) (eager vmap)")
        assert jax.typeof(s).sharding.spec == jax.typeof(jnp.sin(m_split)).sharding.spec
