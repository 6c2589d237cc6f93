"""rms_norm's own sharding tests, beyond the generated matrix of test_sharding.py:
grad inside a shard_map over some axes, the CUDA workspace's layout, eager calls and
second order, and an exported sharded program."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jax.typing import ArrayLike
from sharding_checks import assert_local_and_still, close, mesh, shard_map

import xla_ffi_rs as xr
from helpers import RMS_BWD, RMS_FWD, rms_norm_bwd_np, rms_norm_np
from xla_ffi_rs.ops.rms_norm import rms_norm_fwd_jnp

EPS = 1e-5
SCALE = 2.0
#: (x, weight) shapes: (tokens, hidden), and (batch, seq, hidden) with a 2-D weight.
FAMILIES = {"tokens_hidden": ((16, 12), (12,)), "batch_seq_hidden_w2d": ((8, 4, 6), (4, 6))}


def consumed_rms_norm(x: ArrayLike, w: ArrayLike) -> jax.Array:
    """2 * rms_norm(x, w) + x: y consumed as in real code (a residual connection)."""
    return SCALE * xr.rms_norm(x, w, eps=EPS) + x


def rms_np(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return SCALE * rms_norm_np(x, w, EPS)[0] + x


def rms_bwd_np(ct: np.ndarray, x: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
    dx, dw = rms_norm_bwd_np(SCALE * ct, x, w, EPS)
    return [dx + ct, dw]


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
@pytest.mark.parametrize(
    ("mesh_name", "x_spec"),
    [("2d_auto", P("a", "b")), ("2d", P("a", None, "b")), ("2d", P("a", "b", None))],
    ids=["auto_b", "explicit_b_hidden", "explicit_b_seq"],
)
def test_rms_norm_grad_inside_a_shard_map_over_some_axes(
    mesh_name: str, x_spec: P, partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    """shard_map manual over "a" only: XLA partitions the call over "b" itself.
    With "b" explicit (and splitting x), the results keep x's split over "b" in
    their types; before, they were typed whole over "b" and grad failed ("Expected
    cotangent type float32[4,16@b]{V:a} but got float32[4,16]{V:a}")."""
    use_partitioner(partitioner)
    m = mesh(mesh_name)
    rng = np.random.default_rng(5)
    x, w, ct = rng.standard_normal((8, 4, 12)), rng.standard_normal(12), rng.standard_normal((8, 4, 12))

    def local(x: jax.Array, w: jax.Array, ct: jax.Array) -> tuple[jax.Array, ...]:
        y, back = jax.vjp(consumed_rms_norm, x, w)
        return (y, *back(ct))

    smap = shard_map()(local, mesh=m, in_specs=(P("a"), P(), P("a")), out_specs=(P("a"), P("a"), P()), axis_names={"a"})
    xs = NamedSharding(m, x_spec)
    got = jax.jit(smap)(jax.device_put(x, xs), w, jax.device_put(ct, xs))
    want = [rms_np(x, w), *rms_bwd_np(ct, x, w)]
    for i, (g, r) in enumerate(zip(got, want, strict=True)):
        close(g, r, f"result {i}")


def test_cuda_workspace_stays_whole_under_partitioning() -> None:
    """Lowered for CUDA (no GPU needed): the backward's extra workspace result, like
    the weight and dweight, has a rank below num_batch_dims, so XLA keeps it whole."""
    from xla_ffi_rs.ops import rms_norm as rn

    bwd = rn.rms_norm_bwd_op
    assert bwd.declaration is not None
    op = xr.binding.op(
        bwd.declaration,
        name="sharding_test_bwd_cuda",
        targets={"cuda": "sharding_test.rms_norm_bwd"},
        reductions=bwd.reductions,
        extra_results={"cuda": lambda dy, x, w, **_: [rn.bwd_workspace_aval(x, w)]},
    )
    xs = NamedSharding(mesh("1d"), P("a"))
    x = jax.device_put(np.ones((16, 12)), xs)
    text = jax.jit(lambda *a: op(*a, eps=1e-5)).trace(x, x, np.ones(12)).lower(lowering_platforms=("cuda",)).as_text()
    call = next(line for line in text.splitlines() if "custom_call @sharding_test.rms_norm_bwd" in line)
    assert 'num_batch_dims = "3"' in call, call
    types = call.split(" -> ")[-1]
    assert types.startswith("(tensor<16x1x1x12xf64>, tensor<12xf64>, tensor<1x12xf64>)"), types


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_rms_norm_eagerly_and_second_order(
    family: str, partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    """Without jit (each primitive runs as its own partitioned program), and grad of
    grad under jit, on x split along its first batch axis."""
    use_partitioner(partitioner)
    rng = np.random.default_rng(6)
    x_shape, w_shape = FAMILIES[family]
    x, w, ct = rng.standard_normal(x_shape), rng.standard_normal(w_shape), rng.standard_normal(x_shape)
    xs = NamedSharding(mesh("1d"), P("a"))
    xd, ctd = jax.device_put(x, xs), jax.device_put(ct, xs)
    close(consumed_rms_norm(xd, w), rms_np(x, w), "eager forward")
    for g, want, what in zip(
        jax.vjp(consumed_rms_norm, xd, w)[1](ctd), rms_bwd_np(ct, x, w), ("dx", "dw"), strict=True
    ):
        close(g, want, f"eager {what}")

    def dw_norm(x: jax.Array, w: jax.Array) -> jax.Array:
        return jnp.sum(jax.vjp(consumed_rms_norm, x, w)[1](x)[1] ** 2)

    def dw_norm_ref(x: jax.Array, w: jax.Array) -> jax.Array:
        return jnp.sum(jax.vjp(lambda x, w: SCALE * rms_norm_fwd_jnp(x, w, eps=EPS)[0] + x, x, w)[1](x)[1] ** 2)

    got = jax.jit(jax.grad(dw_norm, argnums=(0, 1)))(xd, w)
    want = jax.grad(dw_norm_ref, argnums=(0, 1))(x, w)  # the jnp formula, unsharded
    for g, r, what in zip(got, want, ("x", "w"), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-10, atol=1e-10, err_msg=f"second order {what}")


def test_a_jax_exported_sharded_program_keeps_its_partitioning(use_partitioner: Callable[[str], None]) -> None:
    """The batch-partitioning attributes travel in the exported module: called back,
    the (tokens, hidden) gradient is still computed shard by shard. Shardy only: under
    GSPMD, jax 0.12 cannot call back any sharded export (a plain jnp one fails too)."""
    use_partitioner("shardy")
    rng = np.random.default_rng(7)
    x, w, ct = rng.standard_normal((16, 12)), rng.standard_normal(12), rng.standard_normal((16, 12))
    xs = NamedSharding(mesh("1d"), P("a"))
    args = (jax.device_put(x, xs), w, jax.device_put(ct, xs))
    fn = jax.jit(lambda x, w, ct: jax.vjp(consumed_rms_norm, x, w)[1](ct))
    checks = [jax.export.DisabledSafetyCheck.custom_call(t) for t in (RMS_FWD, RMS_BWD)]
    exported = jax.export.export(fn, disabled_checks=checks)(*args)
    for got, want, what in zip(exported.call(*args), rms_bwd_np(ct, x, w), ("dx", "dw"), strict=True):
        close(got, want, what)
    hlo = str(jax.jit(exported.call).lower(*args).compile().as_text())
    assert_local_and_still(hlo, RMS_BWD, 16 * 12 // 8, [(12,)])


def test_a_batch_split_on_explicit_axes_gives_the_unsharded_bits_and_dweight_within_its_bound() -> None:
    """docs/python-api.md, "Reproducibility": over several devices of an explicit
    mesh that splits the rows (2 and 8 here), y and dx are the one-device kernel's bits, and
    dweight (a jnp reduction completed by an all-reduce there) is within
    2 * 2**-24 * sum(|dy * x * inv_rms|) of it, the same bits on a second run."""
    rng = np.random.default_rng(7)
    x, dy = (rng.standard_normal((64, 96)).astype(np.float32) for _ in range(2))
    w = rng.uniform(0.5, 1.5, 96).astype(np.float32)
    f = jax.jit(lambda x, w, dy: (xr.rms_norm(x, w), *jax.vjp(xr.rms_norm, x, w)[1](dy)))
    want = [np.asarray(a) for a in f(x, w, dy)]
    x64 = x.astype(np.float64)
    terms = np.abs(dy * x64 / np.sqrt(np.mean(x64 * x64, axis=1, keepdims=True) + 1e-5))
    bound = 2 * 2.0**-24 * terms.sum(axis=0)
    for k in (2, 8):
        m = jax.make_mesh((k,), ("d",), axis_types=(jax.sharding.AxisType.Explicit,), devices=jax.devices()[:k])
        xs, dys = (jax.device_put(a, NamedSharding(m, P("d", None))) for a in (x, dy))
        with jax.set_mesh(m):
            runs = [[np.asarray(a) for a in f(xs, jax.device_put(w, NamedSharding(m, P())), dys)] for _ in range(2)]
        y, dx, dw = runs[0]
        assert np.array_equal(y, want[0]) and np.array_equal(dx, want[1]), k
        assert np.all(np.abs(dw.astype(np.float64) - want[2]) <= bound), (k, np.max(np.abs(dw - want[2]) / bound))
        assert all(np.array_equal(a, b) for a, b in zip(runs[0], runs[1], strict=True)), k
