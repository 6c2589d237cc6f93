"""xr ops under jit with NamedSharding inputs, over a generated matrix (cases.py).

Each case compiles the sharded program under one partitioner, compares its results
with float64 numpy references computed from the unsharded inputs, and, when only
x's batch axes are sharded, asserts on the compiled HLO that nothing moves data
(no all-gather, all-to-all or collective-permute; the one all-reduce allowed is
the one that completes dweight) and that each kernel call saw its local block.
"""

from __future__ import annotations

import functools
import math
import re
import zlib
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from cases import FAMILIES, KEPLER_CASES, MESHES, Case, Family, rms_cases
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import xla_ffi_rs as xr
from helpers import KEPLER, RMS_BWD, RMS_FWD, kepler_solve_np, rms_norm_bwd_np, rms_norm_np
from xla_ffi_rs.ops.rms_norm import rms_norm_fwd_jnp

EPS = 1e-5
SCALE = 2.0
MOVES_DATA = ("all-gather", "all-to-all", "collective-permute")


@functools.cache
def mesh(name: str) -> jax.sharding.Mesh:
    shape, names, explicit = MESHES[name]
    kind = jax.sharding.AxisType.Explicit if explicit else jax.sharding.AxisType.Auto
    return jax.make_mesh(shape, names, axis_types=(kind,) * len(shape))


def shard_map() -> Callable[..., Any]:
    return getattr(jax, "shard_map", None) or __import__("jax.experimental.shard_map", fromlist=["x"]).shard_map


# -- compiled-program checks ---------------------------------------------------


def call_lines(hlo: str, target: str) -> list[str]:
    return [line for line in hlo.splitlines() if f'custom_call_target="{target}"' in line]


def first_result_size(line: str) -> int:
    """Element count of the first array a custom-call line produces."""
    dims = re.search(r"=\s*\(?\w+\[([\d,]*)\]", line)
    assert dims, line
    return math.prod(int(d) for d in dims.group(1).split(",") if d)


def assert_local_and_still(
    hlo: str, target: str, local_size: int, allow_all_reduce_of: tuple[int, ...] | None, stacked: bool = False
) -> None:
    """Every call to ``target`` sees ``local_size`` elements (or, with ``stacked``,
    twice as many, for a vmap over two stacked copies), and nothing moves data.

    ``allow_all_reduce_of``: the shape of the only array that may be all-reduced
    (dweight), or None when no all-reduce is allowed."""
    lines = call_lines(hlo, target)
    assert lines, f"{target} is not in the compiled program"
    sizes = {first_result_size(line) for line in lines}
    allowed = {local_size, 2 * local_size} if stacked else {local_size}
    assert sizes <= allowed, f"{target} calls saw {sizes} elements, expected the local block of {local_size}"
    assert_still(hlo, allow_all_reduce_of)


def assert_still(hlo: str, allow_all_reduce_of: tuple[int, ...] | None) -> None:
    """Nothing moves data, and nothing but ``allow_all_reduce_of`` (dweight) is all-reduced."""
    moved = [
        line.strip() for line in hlo.splitlines() if any(f"{c}(" in line or f"{c}-start(" in line for c in MOVES_DATA)
    ]
    assert not moved, "the compiled program moves data:\n" + "\n".join(moved)
    reduced = [line.strip() for line in hlo.splitlines() if re.search(r"all-reduce(-start)?\(", line)]
    if allow_all_reduce_of is None:
        assert not reduced, "unexpected all-reduce:\n" + "\n".join(reduced)
    else:
        want = "[" + ",".join(map(str, allow_all_reduce_of)) + "]"
        bad = [line for line in reduced if not re.search(r"=\s*\(?\w+" + re.escape(want) + r"\{", line)]
        assert not bad, f"only dweight {want} may be all-reduced:\n" + "\n".join(bad)


def close(got: Any, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == np.float64, (what, got.shape, got.dtype)
    scale = float(np.max(np.abs(want), initial=1.0))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13 * scale, err_msg=what)


# -- rms_norm ------------------------------------------------------------------


def rms_jvp_np(x: np.ndarray, w: np.ndarray, dx: np.ndarray, dw: np.ndarray) -> np.ndarray:
    """Tangent of y at (x, w) along (dx, dw), float64."""
    axes = tuple(range(x.ndim - w.ndim, x.ndim))
    _, inv = rms_norm_np(x, w, EPS)
    r = inv.reshape(inv.shape + (1,) * w.ndim)
    dr = -(r**3) * np.mean(x * dx, axis=axes, keepdims=True)
    return (dx * r + x * dr) * w + x * r * dw


def consumed_rms_norm(x: jax.Array, w: jax.Array) -> jax.Array:
    """2 * rms_norm(x, w) + x: y consumed as in real code (a residual connection), so
    that a result typed with the wrong sharding would be gathered for the next op."""
    return SCALE * xr.rms_norm(x, w, eps=EPS) + x


def rms_np(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return SCALE * rms_norm_np(x, w, EPS)[0] + x


def rms_bwd_np(ct: np.ndarray, x: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
    dx, dw = rms_norm_bwd_np(SCALE * ct, x, w, EPS)
    return [dx + ct, dw]


def program(case: Case) -> tuple[Callable[..., Any], tuple[np.ndarray, ...], tuple[Any, ...], list[np.ndarray]]:
    """(jitted function, its numpy inputs, their shardings, float64 references)."""
    f, part = case.family, case.partition
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    x, w = rng.standard_normal(f.x), rng.standard_normal(f.w)
    m = mesh(part.mesh)
    xs, ws = NamedSharding(m, part.x), NamedSharding(m, part.w)
    norm = consumed_rms_norm
    t = case.transform
    if t == "fwd":
        return jax.jit(norm), (x, w), (xs, ws), [rms_np(x, w)]
    if t == "grad":
        ct = rng.standard_normal(f.x)

        def vjp(x: jax.Array, w: jax.Array, ct: jax.Array) -> tuple[jax.Array, jax.Array]:
            return jax.vjp(norm, x, w)[1](ct)

        return jax.jit(vjp), (x, w, ct), (xs, ws, xs), rms_bwd_np(ct, x, w)
    if t == "jvp":
        dx, dw = rng.standard_normal(f.x), rng.standard_normal(f.w)

        def jvp(x: jax.Array, w: jax.Array, dx: jax.Array, dw: jax.Array) -> tuple[jax.Array, jax.Array]:
            return jax.jvp(norm, (x, w), (dx, dw))

        return jax.jit(jvp), (x, w, dx, dw), (xs, ws, xs, ws), [rms_np(x, w), SCALE * rms_jvp_np(x, w, dx, dw) + dx]
    if t == "vmap":
        # Over x alone (the weight shared), and over x and the weight together.
        xv, wv = np.stack([x, 2 * x + 1]), np.stack([w, 0.5 * w - 1])
        xvs, wvs = NamedSharding(m, P(None, *part.x)), NamedSharding(m, P(None, *part.w))

        def vmapped(xv: jax.Array, w: jax.Array, wv: jax.Array) -> tuple[jax.Array, jax.Array]:
            return jax.vmap(norm, in_axes=(0, None))(xv, w), jax.vmap(norm)(xv, wv)

        wants = [np.stack([rms_np(v, w) for v in xv]), np.stack([rms_np(*vw) for vw in zip(xv, wv, strict=True)])]
        return jax.jit(vmapped), (xv, w, wv), (xvs, ws, wvs), wants
    assert t == "shard_map"
    ct = rng.standard_normal(f.x)

    def local(x: jax.Array, w: jax.Array, ct: jax.Array) -> tuple[jax.Array, ...]:
        # The weight is invariant across the shards and x varies: as for jax's own
        # primitives, the weight's cotangent comes back summed over the shards.
        y, back = jax.vjp(norm, x, w)
        return (y, *back(ct))

    spec = part.x
    smap = shard_map()(local, mesh=m, in_specs=(spec, P(), spec), out_specs=(spec, spec, P()))
    return jax.jit(smap), (x, w, ct), (xs, ws, xs), [rms_np(x, w), *rms_bwd_np(ct, x, w)]


def mesh_axes(spec: P) -> tuple[str, ...]:
    """The mesh axes a partition spec splits over."""
    return tuple(a for entry in spec if entry is not None for a in (entry if isinstance(entry, tuple) else (entry,)))


def shards_of(case: Case) -> int:
    m = mesh(case.partition.mesh)
    return math.prod(m.shape[a] for a in mesh_axes(case.partition.x))


@pytest.mark.parametrize("case", rms_cases(), ids=lambda c: c.id)
def test_rms_norm(case: Case, use_partitioner: Callable[[str], None]) -> None:
    use_partitioner(case.partitioner)
    fn, inputs, shardings, wants = program(case)
    args = [jax.device_put(a, s) for a, s in zip(inputs, shardings, strict=True)]
    got = fn(*args)
    got = got if isinstance(got, tuple | list) else (got,)
    for i, (g, want) in enumerate(zip(got, wants, strict=True)):
        close(g, want, f"{case.id}: result {i}")
    if not case.partition.batch_only:
        return
    if case.transform in ("fwd", "grad", "jvp"):
        assert got[0].sharding.is_equivalent_to(shardings[0], len(case.family.x)), "y or dx is not laid out like x"
    hlo = str(fn.lower(*args).compile().as_text())  # type: ignore[attr-defined]
    x_size = math.prod(case.family.x) * (2 if case.transform == "vmap" else 1)
    local = x_size // shards_of(case)
    target = RMS_BWD if case.transform in ("grad", "shard_map") else RMS_FWD
    dweight = case.family.w if case.transform == "grad" and case.partition.sharded else None
    if case.transform == "shard_map" and case.partition.sharded:
        dweight = case.family.w  # the psum of the weight's cotangent
    if not MESHES[case.partition.mesh][2] and case.transform != "shard_map":
        # Auto axes: the split of the rows is decided after lowering, so the op
        # lowers to its jnp formula (no target); it moves no data either.
        assert not call_lines(hlo, RMS_FWD) and not call_lines(hlo, RMS_BWD), "a target ran on auto axes"
        assert_still(hlo, dweight)
        return
    assert_local_and_still(hlo, target, local, dweight)
    if case.transform == "grad" and case.partition.sharded:
        assert re.search(r"all-reduce(-start)?\(", hlo), "dweight must be summed across the shards"


def test_the_matrix_covers_every_family_partitioner_and_transform() -> None:
    cases = rms_cases()
    for fam in {c.family for c in cases}:
        for pt in ("shardy", "gspmd"):
            seen = {c.transform for c in cases if c.family == fam and c.partitioner == pt}
            want = {"fwd", "grad", "jvp", "vmap"}
            assert want <= seen, (fam.name, pt, seen)
    assert cases[0].family.x == (16, 12) and cases[0].family.w == (12,), "the most common shape comes first"


# -- kepler ----------------------------------------------------------------------


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
@pytest.mark.parametrize(("shape", "spec", "mesh_name"), KEPLER_CASES, ids=lambda v: str(v).replace(" ", ""))
def test_kepler(
    shape: tuple[int, ...], spec: P, mesh_name: str, partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    use_partitioner(partitioner)
    rng = np.random.default_rng(len(shape))
    m, e = rng.uniform(-7, 7, shape), rng.uniform(0, 0.9, shape)
    sh = NamedSharding(mesh(mesh_name), spec)
    args = (jax.device_put(m, sh), jax.device_put(e, sh))

    def solve_and_transform(m: jax.Array, e: jax.Array) -> tuple[jax.Array, ...]:
        sin_e, cos_e = xr.kepler(m, e)
        dsin_dm = jax.grad(lambda m, e: jnp.sum(xr.kepler(m, e)[0]))(m, e)
        _, (dsin_de, _) = jax.jvp(xr.kepler, (m, e), (jnp.zeros_like(m), jnp.ones_like(e)))
        sin_neg, _ = jax.vmap(xr.kepler)(jnp.stack([m, -m]), jnp.stack([e, e]))
        return SCALE * sin_e, cos_e, dsin_dm, dsin_de, sin_neg  # SCALE *: a consumer, as in real code

    fn = jax.jit(solve_and_transform)
    sin_e, cos_e, dsin_dm, dsin_de, sin_neg = fn(*args)
    big_e = kepler_solve_np(m, e)
    s, c = np.sin(big_e), np.cos(big_e)
    close(sin_e, SCALE * s, "sin E")
    close(cos_e, c, "cos E")
    close(dsin_dm, c / (1 - e * c), "d sin E / dM")
    close(dsin_de, c * s / (1 - e * c), "d sin E / de (jvp)")
    close(sin_neg, np.stack([s, -s]), "vmap over M and -M")
    if math.prod(shape):  # a size-0 array's sharding is not kept
        assert sin_e.sharding.is_equivalent_to(sh, len(shape))
    hlo = str(fn.lower(*args).compile().as_text())
    local = math.prod(shape) // math.prod(mesh(mesh_name).shape[a] for a in mesh_axes(spec))
    if math.prod(shape):
        assert_local_and_still(hlo, KEPLER, local, None, stacked=True)


# -- inside a user's shard_map, kepler too ------------------------------------------


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
@pytest.mark.parametrize("family", [FAMILIES[0], FAMILIES[2]], ids=lambda f: f.name)
def test_rms_norm_eagerly_and_second_order(
    family: Family, partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    """Without jit (each primitive runs as its own partitioned program), and grad of
    grad under jit, on x split along its first batch axis."""
    use_partitioner(partitioner)
    rng = np.random.default_rng(6)
    x, w, ct = rng.standard_normal(family.x), rng.standard_normal(family.w), rng.standard_normal(family.x)
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
    assert_local_and_still(hlo, RMS_BWD, 16 * 12 // 8, (12,))
