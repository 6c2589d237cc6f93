"""``jax.pmap`` and collectives by axis name around the ops: each device runs the
kernel on its slice (the ops lower as plain calls inside pmap's per-device
program), results match per-device float64 NumPy, and their dtypes and shardings
are those a jnp stand-in gets; collectives feed the ops and take their results, in
``pmap``, ``shard_map`` and ``vmap(axis_name=...)``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

import xla_ffi_rs as xr
from helpers import kepler_solve_np, rms_norm_np
from xla_ffi_rs import binding, examples, python_op

examples.register()
SCALE = binding.op(xr.declarations()["xla_ffi_rs.examples.scale"])
TANH = python_op(np.tanh, abstract_eval=lambda x: x, vectorized=True, num_batch_dims=1, name="pmap_tanh")
TANH.def_jvp_rule(lambda p, t: (TANH(p[0]), (1 - TANH(p[0]) ** 2) * t[0]))
RNG = np.random.default_rng(11)
X = RNG.normal(size=(8, 4, 16))
W = RNG.uniform(0.5, 1.5, 16)
M = RNG.uniform(-7.0, 7.0, (8, 5))


def rms_np(x: Any, w: Any, eps: float = 1e-5) -> np.ndarray:
    return rms_norm_np(x, w, eps)[0]


def kepler_np(m: Any, e: Any) -> tuple[np.ndarray, np.ndarray]:
    ecc = kepler_solve_np(m, e)
    return np.sin(ecc), np.cos(ecc)


def rms_jnp(x: Any, w: Any, eps: float = 1e-5) -> Any:
    return x * lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * w


# name -> (pmapped op, its jnp stand-in, arguments, float64 reference of the results, rtol)
CASES: dict[str, tuple[Callable[..., Any], Callable[..., Any], tuple[Any, ...], Any, float]] = {
    "kepler": (
        jax.pmap(xr.kepler, in_axes=(0, None)),
        jax.pmap(lambda m, e: (jnp.sin(m + e), jnp.cos(m + e)), in_axes=(0, None)),
        (M, 0.3),
        kepler_np(M, 0.3),
        1e-12,
    ),
    "rms_norm": (
        jax.pmap(xr.rms_norm, in_axes=(0, None)),
        jax.pmap(rms_jnp, in_axes=(0, None)),
        (X, W),
        rms_np(X, W),
        1e-12,
    ),
    "rms_norm_float32": (
        jax.pmap(xr.rms_norm, in_axes=(0, None)),
        jax.pmap(rms_jnp, in_axes=(0, None)),
        (X.astype(np.float32), W.astype(np.float32)),
        rms_np(X.astype(np.float32), W.astype(np.float32)),
        1e-5,
    ),
    "rms_norm_inplace": (
        jax.pmap(xr.rms_norm_inplace, in_axes=(0, None), donate_argnums=0),
        jax.pmap(rms_jnp, in_axes=(0, None), donate_argnums=0),
        (X, W),
        rms_np(X, W),
        1e-12,
    ),
    "binding_scale": (
        jax.pmap(lambda x: SCALE(x, factor=2.5)[0]),
        jax.pmap(lambda x: 2.5 * x),
        (X.astype(np.float32),),
        2.5 * X.astype(np.float32),
        1e-6,
    ),
    "python_op": (jax.pmap(TANH), jax.pmap(jnp.tanh), (X,), np.tanh(X), 1e-14),
}


@pytest.mark.parametrize("name", list(CASES))
def test_pmap_matches_float64_numpy_typed_like_jnp(name: str) -> None:
    f, stand_in, args, want, rtol = CASES[name]
    fresh = lambda: [jnp.array(a) if isinstance(a, np.ndarray) else a for a in args]  # noqa: E731  (donated)
    got, like = jax.tree.leaves(f(*fresh())), jax.tree.leaves(stand_in(*fresh()))
    for g, w, j in zip(got, jax.tree.leaves(want), like, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=rtol, atol=rtol)
        assert (g.dtype, g.shape, g.sharding) == (j.dtype, j.shape, j.sharding)


def test_the_kernels_run_in_pmap() -> None:
    """pmap's per-device program calls the kernels (a plain call, no formula)."""
    hlo = jax.pmap(xr.rms_norm, in_axes=(0, None)).lower(X, W).as_text()
    assert "xla_ffi_rs.rms_norm_fwd" in hlo and "rsqrt" not in hlo


def test_donated_pmap_input_is_reused_by_rms_norm_inplace() -> None:
    x = jax.pmap(lambda x: x)(X)
    pointers = [s.data.unsafe_buffer_pointer() for s in x.addressable_shards]
    y = jax.pmap(xr.rms_norm_inplace, in_axes=(0, None), donate_argnums=0)(x, W)
    assert x.is_deleted() and [s.data.unsafe_buffer_pointer() for s in y.addressable_shards] == pointers
    np.testing.assert_allclose(np.asarray(y), rms_np(X, W), rtol=1e-12)


def test_data_parallel_training_step_with_pmean() -> None:
    """The usual step: per-device loss and gradient, lax.pmean over the devices,
    the same update everywhere (out_axes=None), as jnp's full-batch gradient."""

    def step(loss: Callable[..., Any]) -> Any:
        def one(w: Any, x: Any) -> Any:
            value, grad = jax.value_and_grad(loss)(w, x)
            return w - 0.1 * lax.pmean(grad, "batch"), lax.pmean(value, "batch")

        return jax.pmap(one, axis_name="batch", in_axes=(None, 0), out_axes=(None, None))

    ours = step(lambda w, x: jnp.mean((xr.rms_norm(x, w) - 1.0) ** 2))
    w1, loss = ours(W, X)
    value, grad = jax.jit(jax.value_and_grad(lambda w: jnp.mean((rms_jnp(jnp.asarray(X), w) - 1.0) ** 2)))(W)
    np.testing.assert_allclose(np.asarray(w1), W - 0.1 * np.asarray(grad), rtol=1e-12)
    np.testing.assert_allclose(float(loss), float(value), rtol=1e-12)
    w2, _ = ours(w1, X)  # its output as the next step's input
    assert w2.shape == W.shape


def test_grads_in_pmap() -> None:
    """dx and dweight per device against jnp's, and check_grads of the pmapped ops."""
    loss = lambda x, w: jnp.sum(jnp.sin(xr.rms_norm(x, w)))  # noqa: E731
    dx, dw = jax.pmap(jax.grad(loss, (0, 1)), in_axes=(0, None))(X, W)
    want = jax.jit(jax.vmap(jax.grad(lambda x, w: jnp.sum(jnp.sin(rms_jnp(x, w))), (0, 1)), in_axes=(0, None)))(X, W)
    np.testing.assert_allclose(np.asarray(dx), np.asarray(want[0]), rtol=1e-10)
    np.testing.assert_allclose(np.asarray(dw), np.asarray(want[1]), rtol=1e-10)
    check_grads(jax.pmap(xr.rms_norm, in_axes=(0, None)), (X[:, :2], W), order=1, modes=("rev",))
    check_grads(jax.pmap(xr.kepler), (M[:, :2], np.full((8, 2), 0.4)), order=1, modes=("rev",))


def test_static_eps_vmap_inside_and_fewer_devices() -> None:
    y = jax.pmap(xr.rms_norm, in_axes=(0, None), static_broadcasted_argnums=2)(X, W, 0.1)
    np.testing.assert_allclose(np.asarray(y), rms_np(X, W, 0.1), rtol=1e-12)
    nested = jax.pmap(jax.vmap(xr.rms_norm, in_axes=(0, None)), in_axes=(0, None))(X.reshape(8, 2, 2, 16), W)
    np.testing.assert_allclose(np.asarray(nested), rms_np(X, W).reshape(8, 2, 2, 16), rtol=1e-12)
    devices = jax.devices()[5:]
    s, _ = jax.pmap(xr.kepler, in_axes=(0, None), devices=devices)(M[:3], 0.3)
    np.testing.assert_allclose(np.asarray(s), kepler_np(M[:3], 0.3)[0], rtol=1e-12)
    assert s.sharding.device_set == set(devices)
    np.testing.assert_allclose(np.asarray(jax.pmap(TANH)(X[:3])), np.tanh(X[:3]), rtol=1e-14)  # 3 of 8


def test_a_leading_axis_beyond_the_devices_is_jax_own_error() -> None:
    x = RNG.normal(size=(9, 16))
    with pytest.raises(Exception) as ours:
        jax.pmap(xr.rms_norm, in_axes=(0, None))(x, W)
    with pytest.raises(Exception) as plain:
        jax.pmap(rms_jnp, in_axes=(0, None))(x, W)
    assert type(ours.value) is type(plain.value) and "9" in str(ours.value)


def ring(n: int) -> list[tuple[int, int]]:
    return [(j, (j + 1) % n) for j in range(n)]


def collectives(norm: Callable[..., Any], axis: str) -> Callable[..., Any]:
    """The op's result into psum, all_gather and ppermute, and their results (and
    axis_index) into the ops again."""

    def f(x: Any, w: Any) -> Any:
        y = norm(x, w)
        total = lax.psum(y, axis)
        shifted = lax.ppermute(y, axis, ring(8))
        gathered = lax.all_gather(y, axis, tiled=True)
        z = norm(total + lax.axis_index(axis), w)
        s, _ = xr.kepler(shifted, 0.1) if norm is xr.rms_norm else (jnp.sin(shifted), None)
        return (
            total,
            shifted,
            gathered,
            z,
            s,
            TANH(lax.pmean(y, axis)) if norm is xr.rms_norm else jnp.tanh(lax.pmean(y, axis)),
        )

    return f


@pytest.mark.parametrize("where", ["pmap", "shard_map"])
def test_collectives_around_the_ops(where: str) -> None:
    def run(norm: Callable[..., Any]) -> list[np.ndarray]:
        f = collectives(norm, "i")
        if where == "pmap":
            return [np.asarray(r) for r in jax.pmap(f, axis_name="i", in_axes=(0, None))(X, W)]
        mesh = jax.sharding.Mesh(np.array(jax.devices()), ("i",))
        g = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=(P("i"), P()), out_specs=P("i")))
        return [np.asarray(r) for r in g(X.reshape(8 * 4, 16), W)]

    ours = run(xr.rms_norm)
    y = rms_np(X, W) if where == "pmap" else rms_np(X, W).reshape(8, 4, 16)
    total = np.broadcast_to(y.sum(0), y.shape)
    want_z = rms_np(total + np.arange(8)[:, None, None], W)
    shaped = (lambda a: a) if where == "pmap" else (lambda a: a.reshape(-1, *a.shape[2:]))
    np.testing.assert_allclose(ours[0], shaped(total), rtol=1e-10)
    np.testing.assert_allclose(ours[1], shaped(np.roll(y, 1, 0)), rtol=1e-12)
    gathered = y.reshape(32, 16)
    np.testing.assert_allclose(ours[2], np.concatenate([gathered] * 8) if where == "shard_map" else
                               np.broadcast_to(gathered, (8, 32, 16)), rtol=1e-12)  # fmt: skip
    np.testing.assert_allclose(ours[3], shaped(want_z), rtol=1e-10)
    np.testing.assert_allclose(ours[4], shaped(kepler_np(np.roll(y, 1, 0), 0.1)[0]), rtol=1e-12)
    np.testing.assert_allclose(ours[5], shaped(np.broadcast_to(np.tanh(y.mean(0)), y.shape)), rtol=1e-10)


def test_vmap_with_an_axis_name_and_spmd_axis_name() -> None:
    centred = jax.vmap(lambda x: xr.rms_norm(x - lax.pmean(x, "v"), W), axis_name="v")
    np.testing.assert_allclose(np.asarray(jax.jit(centred)(X)), rms_np(X - X.mean(0), W), rtol=1e-10)
    gathered = jax.vmap(lambda x: TANH(lax.all_gather(x, "v")).sum(0), axis_name="v")
    np.testing.assert_allclose(np.asarray(gathered(X)), np.broadcast_to(np.tanh(X).sum(0), X.shape), rtol=1e-12)
    mesh = jax.make_mesh((8,), ("d",))
    xs = jax.device_put(X, NamedSharding(mesh, P("d")))
    for f, stand_in, want in (
        (lambda x: xr.rms_norm(x, W), lambda x: rms_jnp(x, W), rms_np(X, W)),
        (lambda x: xr.kepler(x, 0.2)[0], lambda x: jnp.sin(x + 0.2), kepler_np(X, 0.2)[0]),
        (TANH, jnp.tanh, np.tanh(X)),
    ):
        got = jax.jit(jax.vmap(f, spmd_axis_name="d"))(xs)
        like = jax.jit(jax.vmap(stand_in, spmd_axis_name="d"))(xs)
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
        assert (got.dtype, jax.typeof(got).sharding.spec) == (like.dtype, jax.typeof(like).sharding.spec)
