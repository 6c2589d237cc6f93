"""The ops on a mesh that mixes explicit and auto axes (``axis_types=(Explicit,
Auto)``), under ``jax.set_mesh``: each result is typed as jnp types the same
formula on the same operands, and the compiled program lays it out as its type
says (jax constrains its own primitives' results so; there the ``jit``'s results
carry no sharding of their own)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from sharding_checks import MOVES_DATA

import xla_ffi_rs
import xla_ffi_rs as xr
from helpers import kepler_solve_np
from xla_ffi_rs import binding, examples, python_op
from xla_ffi_rs.sharding import gspmd_available

examples.register()
SCALE = binding.ops(xla_ffi_rs.declarations(), scale={})["scale"]
SIN = python_op(np.sin, abstract_eval=lambda x: x, num_batch_dims=1, vectorized=True, name="mixed_axes_sin")
RNG = np.random.default_rng(7)
M = RNG.uniform(-4.0, 9.0, (16, 8))
E_ROW = RNG.uniform(0.0, 0.9, 8)


def mixed_mesh(explicit: str) -> jax.sharding.Mesh:
    """A 4 x 2 mesh ("data", "model") whose ``explicit`` axis is explicit, the other auto."""
    types = tuple(AxisType.Explicit if name == explicit else AxisType.Auto for name in ("data", "model"))
    return jax.make_mesh((4, 2), ("data", "model"), axis_types=types)


def spec(a: jax.Array) -> P:
    return jax.typeof(a).sharding.spec


@pytest.mark.parametrize("e", [0.3, E_ROW], ids=["scalar_e", "row_of_e"])
def test_kepler_keeps_m_split_over_the_explicit_axis(e) -> None:
    """The split of M over the explicit axis was taken from ``jax.eval_shape``, which
    drops the sharding on such a mesh: kepler gathered M and returned whole rows,
    typed unlike ``M + e``."""
    mesh = mixed_mesh("data")
    m = jax.device_put(M, NamedSharding(mesh, P("data", None)))
    with jax.set_mesh(mesh):
        ecc = jnp.asarray(e)
        f = jax.jit(xr.kepler)
        s, c = f(m, ecc)
        assert spec(s) == spec(c) == spec(m + ecc) == P("data", None)
        hlo = f.lower(m, ecc).compile().as_text() or ""
        dm, de = jax.jit(jax.grad(lambda m, e: jnp.sum(xr.kepler(m, e)[0]), (0, 1)))(m, ecc)
    assert not [op for op in MOVES_DATA if f"{op}(" in hlo or f"{op}-start(" in hlo], "kepler moved M"
    big_e = kepler_solve_np(M, np.broadcast_to(np.asarray(e), M.shape))
    np.testing.assert_allclose(np.asarray(s), np.sin(big_e), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(np.asarray(c), np.cos(big_e), rtol=1e-12, atol=1e-13)
    assert spec(dm) == P("data", None) and jax.typeof(de).shape == np.shape(e)
    np.testing.assert_allclose(np.asarray(dm), np.cos(big_e) / (1 - np.asarray(e) * np.cos(big_e)), rtol=1e-10)


#: name -> (the op, its float64 numpy reference, the jnp formula typed alike, dtype)
OPS: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any], type]] = {
    "python_op": (SIN, np.sin, jnp.sin, np.float64),
    "kepler": (lambda x: xr.kepler(x, 0.25)[0], lambda x: np.sin(kepler_solve_np(x, 0.25)), jnp.sin, np.float64),
    "binding": (lambda x: SCALE(x, factor=3.0)[0], lambda x: 3.0 * x, lambda x: 3.0 * x, np.float32),
}


@pytest.mark.parametrize("name", sorted(OPS))
@pytest.mark.parametrize("explicit", ["data", "model"])
def test_results_are_laid_out_as_their_types_say(name: str, explicit: str) -> None:
    """x split over both axes, only one of them explicit. The result's type named
    the explicit split, but the custom call's result was left unconstrained: on the
    ("data" auto, "model" explicit) mesh XLA returned it split over "data" only, and
    ``jax.typeof`` of the returned array dropped "model"."""
    op, reference, like, dtype = OPS[name]
    mesh = mixed_mesh(explicit)
    x = jax.device_put(M.astype(dtype), NamedSharding(mesh, P("data", "model")))
    with jax.set_mesh(mesh):
        y = jax.jit(op)(x)
        want = spec(jax.jit(like)(x))
    np.testing.assert_allclose(np.asarray(y), reference(M.astype(dtype)), rtol=1e-12, atol=1e-13)
    assert spec(y) == want == P(*[a if a == explicit else None for a in ("data", "model")]), (spec(y), want)
    assert (*y.sharding.spec, None, None)[1 if explicit == "model" else 0] == explicit, y.sharding


def rms_norm_jnp(x: jax.Array, w: jax.Array) -> jax.Array:
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-5) * w


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"] if gspmd_available() else ["shardy"])
@pytest.mark.parametrize("x_spec", [P(None, None), P("data", None)], ids=["x_whole", "x_rows_split"])
def test_rms_norm_gradient_is_typed_and_laid_out_like_its_operand(
    x_spec: P, partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    """On a mesh with "data" auto and "model" explicit, with the weight split over
    "model" and x not split over it, the formula the op lowers to there gave dx the
    weight's split: ``jax.typeof(dx)`` read ``float64[16,8@model]`` for an x of type
    ``float64[16,8]`` (the update ``x - lr * dx`` moved x onto another layout).
    Under GSPMD jax's own formula gets that split too (its constraints leave the
    dimensions of such a mesh open): there dx must match the formula's."""
    use_partitioner(partitioner)
    mesh = mixed_mesh("model")
    x = jax.device_put(M, NamedSharding(mesh, x_spec))
    w = jax.device_put(E_ROW + 0.5, NamedSharding(mesh, P("model")))
    with jax.set_mesh(mesh):
        loss = lambda f: lambda x, w: jnp.sum(jnp.sin(f(x, w)))  # noqa: E731
        value, (dx, dw) = jax.jit(jax.value_and_grad(loss(xr.rms_norm), (0, 1)))(x, w)
        _, (want_dx, want_dw) = jax.jit(jax.value_and_grad(loss(rms_norm_jnp), (0, 1)))(x, w)
        y = jax.jit(xr.rms_norm)(x, w)
    got = (jax.typeof(dx), jax.typeof(dw), (*dx.sharding.spec, None, None)[:2], dw.sharding.spec)
    assert got == (jax.typeof(want_dx), jax.typeof(want_dw), (*want_dx.sharding.spec, None, None)[:2], P("model"))
    if partitioner == "shardy":
        assert (jax.typeof(dx), got[2][1]) == (jax.typeof(x), None), dx.sharding
    ref = M / np.sqrt(np.mean(M**2, axis=-1, keepdims=True) + 1e-5) * (E_ROW + 0.5)
    np.testing.assert_allclose(np.asarray(y), ref, rtol=1e-12)
    np.testing.assert_allclose(float(value), np.sum(np.sin(ref)), rtol=1e-12)
    np.testing.assert_allclose(np.asarray(dx), np.asarray(want_dx), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(dw), np.asarray(want_dw), rtol=1e-10, atol=1e-12)
