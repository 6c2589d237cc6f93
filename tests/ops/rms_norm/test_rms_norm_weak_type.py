"""xr.rms_norm (and xr.rms_norm_inplace) of Python numbers (a 0-d x and weight, each element normalized by
itself) is weakly typed, as the jnp formula ``x * rsqrt(x**2 + eps) * weight`` is;
with any strongly typed input the result is strongly typed, of
``result_type(x, weight)``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr

EPS = 1e-5
CASES: dict[str, tuple[Any, Any]] = {
    "floats": (3.0, 2.0),
    "weak_array_x": (jnp.asarray(3.0), 2.0),
    "strong_x": (jnp.float32(3.0), 2.0),
    "strong_weight": (3.0, np.float32(2.0)),
    "vector_x": (jnp.asarray([3.0, -4.0]), 2.0),
    "bfloat16_x": (jnp.asarray([3.0, -4.0], jnp.bfloat16), 2.0),
}


def formula(x: Any, w: Any) -> jax.Array:
    """The jnp formula, each element its own row (a 0-d weight)."""
    return x * jax.lax.rsqrt(jnp.multiply(x, x) + EPS) * w


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
@pytest.mark.parametrize("op", [xr.rms_norm, xr.rms_norm_inplace], ids=["rms_norm", "inplace"])
def test_result_is_typed_as_the_jnp_formulas(op: Any, name: str, jit: bool) -> None:
    x, w = CASES[name]
    f = jax.jit(op, static_argnames="eps") if jit else op
    want = jax.typeof((jax.jit(formula) if jit else formula)(x, w))
    got = f(x, w, eps=EPS)
    assert (got.dtype, got.shape, jax.typeof(got).weak_type) == (want.dtype, want.shape, want.weak_type), name
    x64 = np.asarray(x, np.float64)
    ref = x64 / np.sqrt(x64 * x64 + EPS) * float(w)
    np.testing.assert_allclose(np.asarray(got, np.float64), ref, rtol=1e-2 if got.dtype == jnp.bfloat16 else 1e-6)


def test_a_result_from_python_numbers_keeps_the_dtype_of_the_array_it_scales() -> None:
    h = jnp.ones(4, jnp.float16)
    assert (xr.rms_norm(3.0, 2.0, eps=EPS) * h).dtype == jnp.float16


REVERSE: dict[str, Any] = {
    "grad": lambda f: jax.grad(f, (0, 1)),
    "grad_weight_first": lambda f: jax.grad(f, (1, 0)),
    "vjp": lambda f: lambda x, w: jax.vjp(f, x, w)[1](jnp.ones_like(f(x, w))),
    "jacrev": lambda f: jax.jacrev(f, (0, 1)),
    "jit_grad": lambda f: jax.jit(jax.grad(f, (0, 1))),
}


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("mode", REVERSE)
@pytest.mark.parametrize("op", [xr.rms_norm, xr.rms_norm_inplace], ids=["rms_norm", "inplace"])
def test_cotangents_are_typed_as_the_jnp_formulas(op: Any, mode: str, name: str) -> None:
    """The cotangent of a Python-number x or weight is weakly typed, as jnp's
    (the kernel's dx and dweight were strongly typed, so ``jax.grad`` of a
    Python float gave a strong float32, unlike ``jax.grad(jnp.sin)(1.0)``)."""
    x, w = CASES[name]
    t = REVERSE[mode]
    ours = jax.tree.leaves(t(lambda x, w: op(x, w, eps=EPS).sum())(x, w))
    want = jax.tree.leaves(t(lambda x, w: formula(x, w).sum())(x, w))
    assert [(g.dtype, g.shape, jax.typeof(g).weak_type) for g in ours] == [
        (g.dtype, g.shape, jax.typeof(g).weak_type) for g in want
    ], (name, mode)
    tol = 2e-2 if ours[0].dtype == jnp.bfloat16 else 1e-5
    for g, r in zip(ours, want, strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(r, np.float64), rtol=tol, atol=tol)
