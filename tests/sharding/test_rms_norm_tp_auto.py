"""Tensor-parallel rms_norm on meshes with auto axes (``Mesh(devices, names)``) as
well as explicit ones (``jax.make_mesh``): the hidden axis split over one or two
mesh axes, alone or with the token axis, under both partitioners, in float64,
float32 and bfloat16.

On auto axes the split is decided by the partitioner after lowering; the op then
lowers to its jnp formula, whose per-row sums XLA partitions into partial sums and
one all-reduce. Each case compares forward, grad (x and weight), jvp and vmap with a
float64 numpy reference computed from the inputs as rounded to the dtype, and
checks the compiled program: all-reduces of per-row partial sums (and, in the
gradient with the tokens split too, of the weight's local block), and no
all-gather, all-to-all or collective-permute.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

import xla_ffi_rs as xr
from helpers import RMS_BWD, RMS_FWD, collective_shapes, rms_norm_bwd_np, rms_norm_np

EPS = 1e-5
MOVES_DATA = ("all-gather", "all-to-all", "collective-permute")
#: dtype -> relative tolerance against the float64 reference
DTYPES = {"f64": (jnp.float64, 1e-12), "f32": (jnp.float32, 1e-5), "bf16": (jnp.bfloat16, 1e-2)}
#: name -> (mesh shape, axis names, x spec, weight spec): the hidden axis split
#: over one mesh axis, over both, and the hidden and token axes split.
LAYOUTS = {
    "hidden_1d": ((8,), ("h",), P(None, "h"), P("h")),
    "hidden_over_2d": ((2, 4), ("a", "b"), P(None, ("a", "b")), P(("a", "b"))),
    "tokens_and_hidden": ((2, 4), ("a", "b"), P("a", "b"), P("b")),
}
SHAPE = (8, 64)


@functools.cache
def mesh(kind: str, shape: tuple[int, ...], names: tuple[str, ...]) -> Mesh:
    if kind == "explicit":
        return jax.make_mesh(shape, names, axis_types=(jax.sharding.AxisType.Explicit,) * len(shape))
    return Mesh(np.array(jax.devices()[: math.prod(shape)]).reshape(shape), names)


def norm(x: jax.Array, w: jax.Array) -> jax.Array:
    return xr.rms_norm(x, w, eps=EPS)


def jvp_np(x: np.ndarray, w: np.ndarray, dx: np.ndarray, dw: np.ndarray) -> np.ndarray:
    _, inv = rms_norm_np(x, w, EPS)
    r = inv[..., None]
    dr = -(r**3) * np.mean(x * dx, axis=-1, keepdims=True)
    return (dx * r + x * dr) * w + x * r * dw


def program(transform: str, arrays: list[np.ndarray]) -> tuple[Callable[..., Any], list[np.ndarray]]:
    """(function to jit, float64 references) for inputs ``x, w, t, u`` (t like x, u like w)."""
    x, w, t, u = arrays
    if transform == "fwd":
        return lambda x, w, t, u: norm(x, w), [rms_norm_np(x, w, EPS)[0]]
    if transform == "grad":
        return lambda x, w, t, u: jax.vjp(norm, x, w)[1](t), list(rms_norm_bwd_np(t, x, w, EPS))
    if transform == "jvp":
        return lambda x, w, t, u: jax.jvp(norm, (x, w), (t, u))[1], [jvp_np(x, w, t, u)]
    assert transform == "vmap"
    # Two examples stacked on a new leading axis (not split): x and 2x - t, weights w and u.
    want = np.stack([rms_norm_np(x, w, EPS)[0], rms_norm_np(2 * x - t, u, EPS)[0]])
    return lambda x, w, t, u: jax.vmap(norm)(jnp.stack([x, 2 * x - t]), jnp.stack([w, u])), [want]


def split_count(m: Mesh, entry: Any) -> int:
    axes = () if entry is None else entry if isinstance(entry, tuple) else (entry,)
    return math.prod(m.shape[a] for a in axes)


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("transform", ["fwd", "grad", "jvp", "vmap"])
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_hidden_split_all_reduces_partial_sums(
    kind: str, layout: str, transform: str, dtype: str, partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    use_partitioner(partitioner)
    mesh_shape, names, x_spec, w_spec = LAYOUTS[layout]
    m = mesh(kind, mesh_shape, names)
    jdtype, rtol = DTYPES[dtype]
    rng = np.random.default_rng(len(layout) + len(transform))
    raw = [rng.standard_normal(SHAPE), rng.uniform(0.5, 1.5, SHAPE[-1:])]
    raw += [rng.standard_normal(SHAPE), rng.uniform(0.5, 1.5, SHAPE[-1:])]
    # The reference reads the inputs as the dtype holds them.
    arrays = [np.asarray(jnp.asarray(a, jdtype)).astype(np.float64) for a in raw]
    fn, wants = program(transform, arrays)
    specs = [x_spec, w_spec, x_spec, w_spec]
    args = [jax.device_put(jnp.asarray(a, jdtype), NamedSharding(m, s)) for a, s in zip(arrays, specs, strict=True)]
    jitted = jax.jit(fn)
    got = jitted(*args)
    got = got if isinstance(got, tuple | list) else (got,)
    for i, (g, want) in enumerate(zip(got, wants, strict=True)):
        assert g.dtype == jdtype, (i, g.dtype)
        scale = float(np.max(np.abs(want)))
        np.testing.assert_allclose(
            np.asarray(g.astype(jnp.float64)), want, rtol=rtol, atol=rtol * scale, err_msg=f"result {i}"
        )

    hlo = str(jitted.lower(*args).compile().as_text())
    moved = {c: collective_shapes(hlo, c) for c in MOVES_DATA}
    assert not any(moved.values()), f"the compiled program moves data: {moved}"
    rows = SHAPE[0] // split_count(m, x_spec[0]) * (2 if transform == "vmap" else 1)
    allowed = {rows}
    if transform == "grad" and x_spec[0] is not None:
        allowed.add(SHAPE[-1] // split_count(m, x_spec[1]))  # dweight, summed over the token shards
    reduced = {math.prod(s) for s in collective_shapes(hlo, "all-reduce")}
    assert rows in reduced, f"no all-reduce of the per-row sums ({rows} rows): {sorted(reduced)}"
    assert reduced <= allowed, f"all-reduces of {sorted(reduced)} values; allowed: {sorted(allowed)}"
    # The targets need whole rows: neither runs when a row is split.
    assert RMS_FWD not in hlo and RMS_BWD not in hlo


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_issue_example_on_auto_axes(partitioner: str, use_partitioner: Callable[[str], None]) -> None:
    """A jit with out_shardings on ``Mesh(devices, names)``: no gather, one all-reduce."""
    use_partitioner(partitioner)
    m = mesh("auto", (8,), ("d",))
    x = jax.device_put(np.ones((16, 64), np.float32), NamedSharding(m, P(None, "d")))
    w = jax.device_put(np.ones(64, np.float32), NamedSharding(m, P("d")))
    f = jax.jit(norm, out_shardings=NamedSharding(m, P(None, "d")))
    hlo = str(f.lower(x, w).compile().as_text())
    assert hlo.count("all-gather(") == 0 and hlo.count("all-reduce(") == 1, hlo
    np.testing.assert_allclose(np.asarray(f(x, w)), np.ones((16, 64)) / np.sqrt(1 + EPS), rtol=1e-6)


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_batch_split_on_auto_axes_keeps_whole_rows(partitioner: str, use_partitioner: Callable[[str], None]) -> None:
    """Tokens split on auto axes: correct, no collective in the forward (each shard
    normalizes its own whole rows)."""
    use_partitioner(partitioner)
    m = mesh("auto", (8,), ("d",))
    x = np.random.default_rng(3).standard_normal((16, 64))
    xd = jax.device_put(x, NamedSharding(m, P("d", None)))
    f = jax.jit(norm)
    np.testing.assert_allclose(np.asarray(f(xd, np.ones(64))), rms_norm_np(x, np.ones(64), EPS)[0], rtol=1e-12)
    hlo = str(f.lower(xd, np.ones(64)).compile().as_text())
    assert not any(collective_shapes(hlo, c) for c in ("all-reduce", *MOVES_DATA)), hlo


def test_single_device_calls_the_kernels() -> None:
    """One device: the forward and backward targets, as before."""
    x, w = jnp.ones((4, 8)), jnp.ones(8)
    grad = jax.jit(jax.grad(lambda x, w: jnp.sum(norm(x, w) ** 2), (0, 1)))
    assert RMS_FWD in str(jax.jit(norm).lower(x, w).compile().as_text())
    assert RMS_BWD in str(grad.lower(x, w).compile().as_text())


def test_export_on_auto_axes_has_no_callback(use_partitioner: Callable[[str], None]) -> None:
    """``jax.export`` of the hidden-split program: serializable, no Python callback,
    and the exported program called back compiles to the one all-reduce."""
    export = pytest.importorskip("jax.export")
    use_partitioner("shardy")
    m = mesh("auto", (8,), ("d",))
    xs, ws = NamedSharding(m, P(None, "d")), NamedSharding(m, P("d"))
    x = jax.device_put(np.random.default_rng(5).standard_normal((16, 64)), xs)
    w = jax.device_put(np.ones(64), ws)
    exported = export.export(jax.jit(norm, out_shardings=xs))(x, w)
    targets = set(re.findall(r"custom_call @([\w.]+)", exported.mlir_module()))
    assert not {t for t in targets if "callback" in t.lower() or t == "CustomSPMDPartitioning"}, targets
    again = export.deserialize(exported.serialize())
    call = jax.jit(again.call, out_shardings=xs)
    np.testing.assert_allclose(np.asarray(call(x, w)), rms_norm_np(np.asarray(x), np.ones(64), EPS)[0], rtol=1e-12)
    hlo = str(call.lower(x, w).compile().as_text())
    assert not any(collective_shapes(hlo, c) for c in MOVES_DATA) and collective_shapes(hlo, "all-reduce"), hlo


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_vmap_over_a_split_axis_on_auto_axes(partitioner: str, use_partitioner: Callable[[str], None]) -> None:
    """vmap over an axis that is itself split, the hidden axis split too: nothing is
    gathered on either jax version (the explicit-axes shard_map gathers the vmapped
    axis on jax 0.10 under Shardy)."""
    use_partitioner(partitioner)
    m = mesh("auto", (2, 4), ("a", "b"))
    xv = np.random.default_rng(8).standard_normal((2, 8, 32))
    w = np.random.default_rng(9).uniform(0.5, 1.5, 32)
    args = (jax.device_put(xv, NamedSharding(m, P("a", None, "b"))), jax.device_put(w, NamedSharding(m, P("b"))))
    f = jax.jit(jax.vmap(norm, in_axes=(0, None)))
    want = np.stack([rms_norm_np(v, w, EPS)[0] for v in xv])
    np.testing.assert_allclose(np.asarray(f(*args)), want, rtol=1e-12, atol=1e-12)
    hlo = str(f.lower(*args).compile().as_text())
    assert not any(collective_shapes(hlo, c) for c in MOVES_DATA), hlo
    assert {math.prod(s) for s in collective_shapes(hlo, "all-reduce")} == {8}, "one value per local row (1 x 8)"
