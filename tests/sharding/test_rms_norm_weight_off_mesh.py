"""Tensor-parallel rms_norm (the hidden axis split on a mesh with explicit axes)
with a weight made off the mesh (a host array, as ``jnp.ones(hidden)`` gives),
beside the same weight replicated and split on the mesh: forward, ``grad`` with
respect to the weight and both, and ``vmap`` of the weight's gradient over a split
batch (per-example gradients). Values against float64 NumPy; each result's type
(dtype, shape, sharding) the one the jnp formula's has in the same program, but
for the gradient of a weight off the mesh: it comes back split like x's hidden
axis (as the op used the weight), so that nothing is gathered.
``vmap(grad)`` of the weight raised "Resource axis: data ... is not found in mesh:
()" for a weight off the mesh before it was put on the mesh first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import xla_ffi_rs as xr

EPS = 1e-5


def _mesh() -> jax.sharding.Mesh:
    explicit = jax.sharding.AxisType.Explicit
    return jax.make_mesh((2, 4), ("data", "model"), axis_types=(explicit, explicit))


def _jnp(x: Any, w: Any) -> Any:
    return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + EPS) * w


def _np(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + EPS) * w


def _np_grad_w(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """d/dw of sum(rms_norm(x, w)**2) over all but the last axis."""
    n = x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + EPS)
    return (2 * n * n * w).reshape(-1, x.shape[-1]).sum(axis=0)


TRANSFORMS: dict[str, tuple[Callable[[Callable[..., Any]], Callable[..., Any]], Callable[..., Any] | None]] = {
    "forward": (lambda f: f, _np),
    "grad weight": (lambda f: jax.grad(lambda x, w: (f(x, w) ** 2).sum(), argnums=1), _np_grad_w),
    "grad both": (
        lambda f: jax.grad(lambda x, w: (f(x, w) ** 2).sum(), argnums=(0, 1)),
        None,  # values checked against the jnp formula's gradient
    ),
    "vmap grad weight": (
        lambda f: jax.vmap(jax.grad(lambda xb, w: (f(xb, w) ** 2).sum(), argnums=1), in_axes=(0, None)),
        lambda x, w: np.stack([_np_grad_w(xb, w) for xb in x]),
    ),
}


@pytest.mark.parametrize("placement", ["off the mesh", "replicated", "split like x"])
@pytest.mark.parametrize("transform", list(TRANSFORMS))
def test_weight_anywhere_gives_the_formula_s_values_and_types(placement: str, transform: str) -> None:
    mesh = _mesh()
    rng = np.random.default_rng(3)
    x_np, w_np = rng.standard_normal((4, 8, 16)), rng.standard_normal(16)
    x = jax.device_put(x_np, NamedSharding(mesh, P("data", None, "model")))
    w = {
        "off the mesh": jnp.asarray(w_np),
        "replicated": jax.device_put(w_np, NamedSharding(mesh, P())),
        "split like x": jax.device_put(w_np, NamedSharding(mesh, P("model"))),
    }[placement]
    wrap, ref = TRANSFORMS[transform]
    with jax.set_mesh(mesh):
        ours = jax.jit(wrap(xr.rms_norm))(x, w)
        formula = jax.jit(wrap(_jnp))(x, w)
    expected = jax.tree.leaves(formula) if ref is None else [ref(x_np, w_np)]
    for got, want, like in zip(jax.tree.leaves(ours), expected, jax.tree.leaves(formula), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-11, atol=1e-11)
        spec = jax.typeof(got).sharding.spec
        if placement == "off the mesh" and got.shape[-1:] == w.shape and got.ndim < x.ndim:
            assert spec == P(*(("data",) if got.ndim == 2 else ()), "model"), (transform, spec)
        else:
            assert spec == jax.typeof(like).sharding.spec, (transform, placement)
        assert (got.dtype, got.shape) == (like.dtype, like.shape)
