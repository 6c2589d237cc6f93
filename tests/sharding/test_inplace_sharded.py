"""``rms_norm_inplace`` on a sharded, donated ``x``: the result is written into each
shard's buffer, with no gather, and equals ``rms_norm``."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import xla_ffi_rs as xr


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_donated_sharded_x_is_overwritten_without_gathers(
    partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    use_partitioner(partitioner)
    mesh = jax.make_mesh((8,), ("b",))
    x0 = np.random.default_rng(0).standard_normal((16, 4, 32))
    w = jnp.asarray(np.random.default_rng(1).uniform(0.5, 1.5, 32))
    want = np.asarray(xr.rms_norm(jnp.asarray(x0), w))
    f = jax.jit(lambda x, w: xr.rms_norm_inplace(x, w), donate_argnums=0)
    x = jax.device_put(jnp.asarray(x0), NamedSharding(mesh, P("b")))
    hlo = str(f.lower(x, w).compile().as_text())
    assert "all-gather" not in hlo and "all-to-all" not in hlo
    pointers = [s.data.unsafe_buffer_pointer() for s in x.addressable_shards]
    y = f(x, w)
    assert x.is_deleted()
    assert [s.data.unsafe_buffer_pointer() for s in y.addressable_shards] == pointers
    np.testing.assert_array_equal(np.asarray(y), want)


#: name -> (mesh shape, axis names, x spec): the hidden axis split alone, over both
#: mesh axes, with the tokens, and the tokens alone.
LAYOUTS = {
    "hidden": ((8,), ("h",), P(None, "h")),
    "hidden_over_2d": ((2, 4), ("a", "b"), P(None, ("a", "b"))),
    "tokens_and_hidden": ((2, 4), ("a", "b"), P("a", "b")),
    "tokens": ((8,), ("t",), P("t", None)),
}
DTYPES = {"f64": (jnp.float64, 1e-12), "f32": (jnp.float32, 1e-5), "bf16": (jnp.bfloat16, 1e-2)}


def _mesh(kind: str, shape: tuple[int, ...], names: tuple[str, ...]) -> jax.sharding.Mesh:
    if kind == "explicit":
        return jax.make_mesh(shape, names, axis_types=(jax.sharding.AxisType.Explicit,) * len(shape))
    return jax.sharding.Mesh(np.array(jax.devices()[: int(np.prod(shape))]).reshape(shape), names)


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("kind", ["auto", "explicit"])
def test_split_rows_are_not_gathered(
    kind: str, layout: str, dtype: str, partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    """As ``rms_norm``: x split along its rows (the hidden axis) on a mesh with auto
    axes (``Mesh(devices, names)``) or explicit ones is never gathered, the result
    keeps x's layout, and forward (donated or not) and grad equal float64 numpy."""
    use_partitioner(partitioner)
    shape, names, spec = LAYOUTS[layout]
    m = _mesh(kind, shape, names)
    jdtype, rtol = DTYPES[dtype]
    rng = np.random.default_rng(len(layout))
    x64 = np.asarray(jnp.asarray(rng.standard_normal((16, 64)), jdtype)).astype(np.float64)
    w64 = np.asarray(jnp.asarray(rng.uniform(0.5, 1.5, 64), jdtype)).astype(np.float64)
    inv = 1 / np.sqrt(np.mean(x64**2, axis=-1, keepdims=True) + 1e-5)
    want = x64 * inv * w64
    g = rng.standard_normal((16, 64))
    # d/dx sum(g * y) with y = x * inv * w: (g w - x inv^2 mean(g w x)) inv, and d/dw.
    gw = g * w64
    want_dx = inv * (gw - x64 * inv**2 * np.mean(gw * x64, axis=-1, keepdims=True))
    want_dw = np.sum(g * x64 * inv, axis=0)
    xs = NamedSharding(m, spec)
    put = lambda: jax.device_put(jnp.asarray(x64, jdtype), xs)  # noqa: E731
    w = jnp.asarray(w64, jdtype)
    acc = jnp.float64 if jdtype == jnp.float64 else jnp.float32
    loss = lambda x, w: jnp.sum(jnp.asarray(g, acc) * xr.rms_norm_inplace(x, w).astype(acc))  # noqa: E731
    programs = {
        "fwd": (jax.jit(lambda x, w: xr.rms_norm_inplace(x, w)), [want]),
        "donated": (jax.jit(lambda x, w: xr.rms_norm_inplace(x, w), donate_argnums=0), [want]),
        "grad": (jax.jit(jax.grad(loss, (0, 1))), [want_dx, want_dw]),
    }
    for name, (f, wants) in programs.items():
        x = put()
        hlo = str(f.lower(x, w).compile().as_text())
        moved = [op for op in ("all-gather(", "all-to-all(", "collective-permute(") if op in hlo]
        assert not moved, f"{name}: x moved by {moved}"
        got = f(x, w)
        got = got if isinstance(got, tuple) else (got,)
        if name != "grad":
            assert got[0].sharding.is_equivalent_to(xs, 2), f"{name}: result laid out {got[0].sharding}, x {xs}"
        for i, (a, b) in enumerate(zip(got, wants, strict=True)):
            tol = rtol * (4 if name == "grad" else 1)
            np.testing.assert_allclose(
                np.asarray(a.astype(jnp.float64)),
                b,
                rtol=tol,
                atol=tol * float(np.max(np.abs(b))),
                err_msg=f"{name} {i}",
            )
