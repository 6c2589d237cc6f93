"""Every op under ``jax.disable_jit()``: an op called eagerly runs a jitted bind of
its primitive, and with jit disabled that jit called the bind again, which called
the eager impl again (``RecursionError`` from every op: kepler, rms_norm,
rms_norm_inplace, a python_op, a ``binding.op``). JAX's own primitives turn jit
back on around their eager call; the ops do the same. Values against the jnp
formulas in float64, and the same result dtypes as with jit enabled."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr
from xla_ffi_rs import binding, examples
from xla_ffi_rs.ops.kepler import kepler_jnp

RNG = np.random.default_rng(11)
X = RNG.normal(size=(3, 4))
W = RNG.uniform(0.5, 1.5, 4)
M = RNG.uniform(-3, 3, (3, 4))
E = RNG.uniform(0.0, 0.8, (3, 4))

sin_op = xr.python_op(np.sin, abstract_eval=lambda x: x, vectorized=True, name="disable_jit_sin")


@sin_op.def_jvp_rule
def _sin_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (dx,) = primals, tangents
    return sin_op(x), jnp.cos(x) * dx


def _scale() -> Callable[[Any, Any], Any]:
    examples.register()
    op = binding.op(xr.declarations()["xla_ffi_rs.examples.scale"])
    return lambda x, w: op(x * w, factor=2.5)[0]


def rms_ref(x: Any, w: Any) -> Any:
    return x / jnp.sqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-5) * w


OPS: dict[str, tuple[Callable[[], Callable[[Any, Any], Any]], Callable[[Any, Any], Any], tuple[Any, Any]]] = {
    "kepler": (
        lambda: lambda m, e: xr.kepler(m, e)[0] * 2 + xr.kepler(m, e)[1],
        lambda m, e: kepler_jnp(m, e)[0] * 2 + kepler_jnp(m, e)[1],
        (M, E),
    ),
    "rms_norm": (lambda: xr.rms_norm, rms_ref, (X, W)),
    "rms_norm_inplace": (lambda: xr.rms_norm_inplace, rms_ref, (X, W)),
    "python_op": (lambda: lambda x, w: sin_op(x) * w, lambda x, w: jnp.sin(x) * w, (X, W)),
    "binding_op": (_scale, lambda x, w: 2.5 * (x * w), (X.astype(np.float32), W.astype(np.float32))),
}

TRANSFORMS: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "eager": lambda f: f,
    "jit": jax.jit,
    "grad": lambda f: jax.grad(lambda a, b: (f(a, b) ** 2).sum(), (0, 1)),
    "jit_vmap_grad": lambda f: jax.jit(jax.vmap(jax.grad(lambda a, b: (f(a, b) ** 2).sum(), (0, 1)), (0, None))),
    "jvp": lambda f: lambda a, b: jax.jvp(f, (a, b), (jnp.ones_like(a), 0.5 * jnp.ones_like(b))),
    "hessian": lambda f: lambda a, b: jax.hessian(lambda a: f(a, b.reshape(-1)[:2]).sum())(a[0, :2]),
}


@pytest.mark.parametrize("transform", TRANSFORMS)
@pytest.mark.parametrize("name", OPS)
def test_ops_under_disable_jit(name: str, transform: str) -> None:
    make, ref, args = OPS[name]
    op, t = make(), TRANSFORMS[transform]
    expected = t(ref)(*args)
    with_jit = t(op)(*args)
    with jax.disable_jit():
        got = t(op)(*args)
    tol = 1e-5 if name == "binding_op" else 1e-9
    tol = tol if jax.config.jax_enable_x64 else 1e-4
    for g, j, r in zip(jax.tree.leaves(got), jax.tree.leaves(with_jit), jax.tree.leaves(expected), strict=True):
        assert (g.shape, g.dtype) == (j.shape, j.dtype)
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(r, np.float64), rtol=tol, atol=tol)
