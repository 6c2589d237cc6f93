"""Tensor-parallel rms_norm: x split along its normalized (hidden) axis, alone or
with its batch axes, on 1-D and 2-D meshes with explicit axes, under both
partitioners.

Each case compares forward, grad (x and weight), jvp and vmap with float64 numpy
references computed from the unsharded inputs (rtol 1e-12), and checks the
compiled program: x is never gathered (no all-to-all or collective-permute at all;
the one all-gather allowed is of the weight's gradient, back to the layout of a
replicated weight), and every all-reduce carries one value per local row (or, in
the gradient when the batch axes are split too, the weight's local block: dweight
summed over the batch).
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
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import xla_ffi_rs as xr
from helpers import RMS_FWD, collective_shapes, rms_norm_bwd_np, rms_norm_np
from xla_ffi_rs.ops.rms_norm import rms_norm_fwd_jnp

EPS = 1e-5
SCALE = 2.0
MOVES_DATA = ("all-gather", "all-to-all", "collective-permute")
OLD_JAX = tuple(int(v) for v in jax.__version__.split(".")[:2]) < (0, 12)

#: name -> (mesh shape, mesh axis names)
MESHES = {"1d": ((8,), ("h",)), "2x4": ((2, 4), ("a", "b"))}

#: (family, x shape, layout name, mesh, x spec, weight spec). The weight's spec is
#: where the caller put it: replicated, or already split like x's hidden axis.
LAYOUTS = [
    ("tokens_hidden", (8, 32), "hidden", "1d", P(None, "h"), P()),
    ("tokens_hidden", (8, 32), "hidden_over_2d", "2x4", P(None, ("a", "b")), P(("a", "b"))),
    ("tokens_hidden", (8, 32), "both_2d", "2x4", P("a", "b"), P()),
    ("tokens_hidden", (8, 32), "both_2d_weight_split", "2x4", P("a", "b"), P("b")),
    ("batch_seq_hidden", (4, 6, 32), "hidden", "1d", P(None, None, "h"), P()),
    ("batch_seq_hidden", (4, 6, 32), "both_2d", "2x4", P("a", None, "b"), P()),
    ("batch_seq_hidden", (4, 6, 32), "seq_and_hidden_2d", "2x4", P(None, "a", "b"), P("b")),
]
TRANSFORMS = ("fwd", "grad", "jvp", "vmap")


@functools.cache
def mesh(name: str) -> jax.sharding.Mesh:
    shape, names = MESHES[name]
    return jax.make_mesh(shape, names, axis_types=(jax.sharding.AxisType.Explicit,) * len(shape))


def norm(x: jax.typing.ArrayLike, w: jax.typing.ArrayLike) -> jax.Array:
    """y consumed as in real code (a residual connection)."""
    return SCALE * xr.rms_norm(x, w, eps=EPS) + x


def norm_np(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return SCALE * rms_norm_np(x, w, EPS)[0] + x


def jvp_np(x: np.ndarray, w: np.ndarray, dx: np.ndarray, dw: np.ndarray) -> np.ndarray:
    _, inv = rms_norm_np(x, w, EPS)
    r = inv[..., None]
    dr = -(r**3) * np.mean(x * dx, axis=-1, keepdims=True)
    return SCALE * ((dx * r + x * dr) * w + x * r * dw) + dx


def close(got: Any, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == np.float64, (what, got.shape, got.dtype)
    scale = float(np.max(np.abs(want), initial=1.0))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13 * scale, err_msg=what)


def split_count(m: jax.sharding.Mesh, entry: Any) -> int:
    axes = () if entry is None else entry if isinstance(entry, tuple) else (entry,)
    return math.prod(m.shape[a] for a in axes)


def program(transform: str, x: np.ndarray, w: np.ndarray, xs: Any, ws: Any, m: Any) -> tuple[Any, list, list, list]:
    """(jitted function, numpy inputs, their shardings, float64 references)."""
    rng = np.random.default_rng(x.size + len(transform))
    if transform == "fwd":
        return jax.jit(norm), [x, w], [xs, ws], [norm_np(x, w)]
    if transform == "grad":
        ct = rng.standard_normal(x.shape)
        dx, dw = rms_norm_bwd_np(SCALE * ct, x, w, EPS)

        def vjp(x: jax.Array, w: jax.Array, ct: jax.Array) -> tuple[jax.Array, ...]:
            return jax.vjp(norm, x, w)[1](ct)

        return jax.jit(vjp), [x, w, ct], [xs, ws, xs], [dx + ct, dw]
    if transform == "jvp":
        dx, dw = rng.standard_normal(x.shape), rng.standard_normal(w.shape)

        def jvp(x: jax.Array, w: jax.Array, dx: jax.Array, dw: jax.Array) -> tuple[jax.Array, jax.Array]:
            return jax.jvp(norm, (x, w), (dx, dw))

        return jax.jit(jvp), [x, w, dx, dw], [xs, ws, xs, ws], [norm_np(x, w), jvp_np(x, w, dx, dw)]
    assert transform == "vmap"
    xv, wv = np.stack([x, 2 * x + 1]), np.stack([w, 0.5 * w - 1])
    xvs, wvs = NamedSharding(m, P(None, *xs.spec)), NamedSharding(m, P(None, *ws.spec))

    def vmapped(xv: jax.Array, w: jax.Array, wv: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jax.vmap(norm, in_axes=(0, None))(xv, w), jax.vmap(norm)(xv, wv)

    wants = [np.stack([norm_np(v, w) for v in xv]), np.stack([norm_np(v, u) for v, u in zip(xv, wv, strict=True)])]
    return jax.jit(vmapped), [xv, w, wv], [xvs, ws, wvs], wants


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize(
    ("family", "shape", "layout", "mesh_name", "x_spec", "w_spec"), LAYOUTS, ids=[f"{f}-{n}" for f, _, n, *_ in LAYOUTS]
)
def test_tensor_parallel_rms_norm(
    family: str,
    shape: tuple[int, ...],
    layout: str,
    mesh_name: str,
    x_spec: P,
    w_spec: P,
    transform: str,
    partitioner: str,
    use_partitioner: Callable[[str], None],
) -> None:
    use_partitioner(partitioner)
    m = mesh(mesh_name)
    rng = np.random.default_rng(len(shape) * 100 + len(layout))
    x, w = rng.standard_normal(shape), rng.uniform(0.5, 1.5, shape[-1:])
    xs, ws = NamedSharding(m, x_spec), NamedSharding(m, w_spec)
    fn, inputs, shardings, wants = program(transform, x, w, xs, ws, m)
    args = [jax.device_put(a, s) for a, s in zip(inputs, shardings, strict=True)]
    got = fn(*args)
    got = got if isinstance(got, tuple | list) else (got,)
    for i, (g, want) in enumerate(zip(got, wants, strict=True)):
        close(g, want, f"{family}-{layout}-{transform}-{partitioner}: result {i}")
    if transform in ("fwd", "grad", "jvp"):
        assert got[0].sharding.is_equivalent_to(xs, x.ndim), f"y or dx is not laid out like x: {got[0].sharding}"

    hlo = str(fn.lower(*args).compile().as_text())
    spec = tuple(x_spec) + (None,) * (x.ndim - len(x_spec))
    gathered = collective_shapes(hlo, "all-gather")
    if transform == "grad" and tuple(w_spec) != spec[-1:]:
        # The weight's gradient, computed split like x's hidden axis, is gathered
        # to the layout of the weight the caller passed (here: replicated).
        assert all(s == w.shape for s in gathered), f"all-gathers of {gathered}: only dweight {w.shape} may be"
    else:
        assert not gathered, f"all-gathers of {gathered}"
    moved = [
        line.strip() for line in hlo.splitlines() if any(re.search(rf"\s{c}(-start)?\(", line) for c in MOVES_DATA[1:])
    ]
    assert not moved, "the compiled program moves data:\n" + "\n".join(moved)
    rows = math.prod(n // split_count(m, e) for n, e in zip(shape[:-1], spec[:-1], strict=True))
    rows *= 2 if transform == "vmap" else 1
    allowed = {rows}
    batch_split = any(e is not None for e in spec[:-1])
    if transform == "grad" and batch_split:
        allowed.add(shape[-1] // split_count(m, spec[-1]))  # dweight, summed over the batch shards
    reduced = collective_shapes(hlo, "all-reduce")
    assert reduced, "no all-reduce: the partial sums of squares were not combined"
    sizes = {math.prod(s) for s in reduced}
    assert sizes <= allowed, f"all-reduces of {sorted(sizes)} values; allowed: {sorted(allowed)} (rows, dweight)"
    # One per row for the sums of squares; jvp adds the tangents' dots x . dx, grad
    # the backward's dots (dy * w) . x; vmap has two calls (XLA may merge them).
    per_row = sum(math.prod(s) == rows for s in reduced)
    most = {"fwd": 1, "grad": 2, "jvp": 2, "vmap": 2}[transform]
    assert 1 <= per_row <= most, f"{per_row} all-reduces of one value per row, expected 1 to {most}: {reduced}"
    assert f'custom_call_target="{RMS_FWD}"' not in hlo, "the gather-and-kernel path ran"


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_batch_axis_sharding_still_calls_the_kernel_without_collectives(
    partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    """x split along its token axis only: the kernel path, no collective at all."""
    use_partitioner(partitioner)
    m = mesh("2x4")
    x = jax.device_put(np.random.default_rng(1).standard_normal((8, 32)), NamedSharding(m, P(("a", "b"))))
    w = np.ones(32)
    fn = jax.jit(norm)
    close(fn(x, w), norm_np(np.asarray(x), w), "forward")
    hlo = str(fn.lower(x, w).compile().as_text())
    assert f'custom_call_target="{RMS_FWD}"' in hlo
    assert not collective_shapes(hlo, "all-reduce") and not any(collective_shapes(hlo, c) for c in MOVES_DATA)


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
@pytest.mark.parametrize("transform", ["fwd", "grad", "jvp"])
@pytest.mark.parametrize("w_spec", [P("a"), P(("a", "b")), P("b")], ids=["a", "ab", "b"])
def test_a_weight_split_over_the_axis_that_splits_the_rows(
    w_spec: P, transform: str, partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    """x split along its tokens only (the kernel path) and the weight split over a
    mesh axis: the same one (before, jvp raised JAX's ShardingTypeError from the
    tangent formula, naming neither rms_norm nor an operand) or another."""
    use_partitioner(partitioner)
    m = mesh("2x4")
    rng = np.random.default_rng(11)
    x, w = rng.standard_normal((8, 32)), rng.uniform(0.5, 1.5, 32)
    xs, ws = NamedSharding(m, P("a", None)), NamedSharding(m, w_spec)
    fn, inputs, shardings, wants = program(transform, x, w, xs, ws, m)
    got = fn(*[jax.device_put(a, s) for a, s in zip(inputs, shardings, strict=True)])
    got = got if isinstance(got, tuple | list) else (got,)
    for i, (g, want) in enumerate(zip(got, wants, strict=True)):
        close(g, want, f"{w_spec}-{transform}-{partitioner}: result {i}")


def test_bad_input_on_a_tensor_parallel_x_raises_before_lowering() -> None:
    """The handler's checks hold on the tensor-parallel path too."""
    xs = NamedSharding(mesh("1d"), P(None, "h"))
    x = jax.device_put(np.ones((8, 32)), xs)
    with pytest.raises(ValueError, match=r"rms_norm") as err:
        xr.rms_norm(x, np.ones(8))
    assert "32" in str(err.value) and "8" in str(err.value), err.value
    with pytest.raises(TypeError, match=r"rms_norm"):
        xr.rms_norm(jax.device_put(np.ones((8, 32), np.int32), xs), np.ones(32))


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_eagerly_second_order_and_vmap_over_a_split_axis(
    partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    """Without jit (a weight on one device), grad of grad under jit, and vmap over
    an axis split over the mesh: same values as the unsharded jnp formula."""
    use_partitioner(partitioner)
    m = mesh("2x4")
    rng = np.random.default_rng(9)
    x, w = rng.standard_normal((8, 32)), rng.uniform(0.5, 1.5, 32)
    xd = jax.device_put(x, NamedSharding(m, P("a", "b")))
    close(norm(xd, w), norm_np(x, w), "eager forward")

    def ref(x: jax.Array, w: jax.Array) -> jax.Array:
        return SCALE * rms_norm_fwd_jnp(x, w, eps=EPS)[0] + x

    def second(f: Callable[..., jax.Array]) -> Callable[..., Any]:
        def dw_norm(x: jax.Array, w: jax.Array) -> jax.Array:
            return jnp.sum(jax.grad(lambda x, w: jnp.sum(jnp.sin(f(x, w))), (0, 1))(x, w)[1] ** 2)

        return jax.grad(dw_norm, (0, 1))

    for g, r, what in zip(jax.jit(second(norm))(xd, w), second(ref)(x, w), ("x", "w"), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(r), rtol=1e-10, atol=1e-12, err_msg=f"second order {what}")
    xv = np.stack([x, 2 * x - 1])
    fn = jax.jit(jax.vmap(norm, in_axes=(0, None)))
    args = (jax.device_put(xv, NamedSharding(m, P("a", None, "b"))), w)
    close(fn(*args), np.stack([norm_np(v, w) for v in xv]), "vmap over an axis split over 'a'")
    hlo = str(fn.lower(*args).compile().as_text())
    if partitioner == "shardy" and OLD_JAX:
        # jax 0.10's shard_map under vmap, lowered for Shardy, gathers the vmapped
        # axis (not the hidden one) around the call; jax 0.12 keeps it split.
        assert all(s == (2, 8, 8) for c in MOVES_DATA for s in collective_shapes(hlo, c)), hlo
    else:
        assert not any(collective_shapes(hlo, c) for c in MOVES_DATA), "vmap over a split axis moved data"
    assert {math.prod(s) for s in collective_shapes(hlo, "all-reduce")} == {8}, "one value per local row (1 x 8)"
