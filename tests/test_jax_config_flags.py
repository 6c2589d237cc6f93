"""The ops under JAX's non-default configuration flags a user may run with:
``jax_numpy_dtype_promotion="strict"``, ``jax_numpy_rank_promotion="raise"``,
``jax_debug_nans`` / ``jax_debug_infs`` and ``jax_enable_x64`` toggled in one
process. Values are compared with the NumPy float64 formulas (``helpers``).

Those flags are for the user's own jnp code: a valid call of an op must not fail
inside the package's formulas and rules, and a NaN or inf out of an op under the
debug flags is JAX's FloatingPointError naming the op, as for JAX's primitives.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr
from helpers import kepler_residual, rms_norm_bwd_np, rms_norm_np
from xla_ffi_rs import binding

RS = np.random.RandomState(0)
X = RS.randn(2, 3, 8).astype(np.float32)
W = np.linspace(0.5, 1.5, 8).astype(np.float32)
M = np.linspace(0.1, 3.0, 6).astype(np.float32)


@contextmanager
def strict() -> Iterator[None]:
    with jax.numpy_dtype_promotion("strict"), jax.numpy_rank_promotion("raise"):
        yield


# -- strict dtype promotion, rank promotion "raise" -----------------------------


@pytest.mark.parametrize(
    "x_dtype, w_dtype",
    [(jnp.float32, jnp.bfloat16), (jnp.bfloat16, jnp.float32), (jnp.float16, jnp.float32), (jnp.float32, jnp.float64)],
)
def test_rms_norm_mixed_weight_dtype_under_strict(x_dtype: Any, w_dtype: Any) -> None:
    x, w = jnp.asarray(X, x_dtype), jnp.asarray(W, w_dtype)
    with strict():
        y = xr.rms_norm(x, w, eps=1e-6)
        y_jit = jax.jit(xr.rms_norm, static_argnames="eps")(x, w, eps=1e-6)
        dx, dw = jax.grad(lambda x, w: xr.rms_norm(x, w).astype(jnp.float32).sum(), argnums=(0, 1))(x, w)
    assert y.dtype == jnp.promote_types(x_dtype, w_dtype) == y_jit.dtype
    tol = 1e-2 if min(jnp.finfo(x_dtype).bits, jnp.finfo(w_dtype).bits) == 16 else 1e-5
    np.testing.assert_allclose(np.asarray(y, np.float64), rms_norm_np(x, w, 1e-6)[0], rtol=tol, atol=tol)
    ref_dx, ref_dw = rms_norm_bwd_np(np.ones(X.shape), x, w, 1e-5)
    np.testing.assert_allclose(np.asarray(dx, np.float64), ref_dx, rtol=5 * tol, atol=5 * tol)
    np.testing.assert_allclose(np.asarray(dw, np.float64), ref_dw, rtol=5 * tol, atol=5 * tol)


def test_rms_norm_inplace_bfloat16_weight_under_strict() -> None:
    x = jnp.asarray(X, jnp.float32)
    with strict():
        y = xr.rms_norm_inplace(jnp.array(x, copy=True), jnp.asarray(W, jnp.bfloat16), eps=1e-6)
        with pytest.raises(TypeError, match=r"rms_norm_inplace: weight: a float32 weight makes y float32.*bfloat16"):
            xr.rms_norm_inplace(jnp.asarray(X, jnp.bfloat16), jnp.asarray(W))
    assert y.dtype == jnp.float32
    w16 = np.asarray(jnp.asarray(W, jnp.bfloat16), np.float64)
    np.testing.assert_allclose(np.asarray(y, np.float64), rms_norm_np(X, w16, 1e-6)[0], rtol=1e-5, atol=1e-5)


def test_rms_norm_derivatives_under_rank_promotion_raise() -> None:
    """The forward-mode tangent's jnp formula broadcast the weight by rank: "could
    not be broadcast together ... jax_numpy_rank_promotion='raise'"."""
    x, w = jnp.asarray(X, jnp.float64), jnp.asarray(W, jnp.float64)
    tx, tw = jnp.asarray(RS.randn(*X.shape)), jnp.asarray(RS.randn(*W.shape))
    with strict():
        _, dy = jax.jvp(lambda x, w: xr.rms_norm(x, w, eps=1e-6), (x, w), (tx, tw))
        _, dy_inplace = jax.jvp(lambda x, w: xr.rms_norm_inplace(x, w, eps=1e-6), (x, w), (tx, tw))
        # jitted: the formulas are lowered after the trace, outside the call of the op
        _, dy_jit = jax.jit(lambda p, t: jax.jvp(lambda x, w: xr.rms_norm(x, w, eps=1e-6), p, t))((x, w), (tx, tw))
        hess = jax.hessian(lambda x: xr.rms_norm(x, w, eps=1e-6).sum())(x[0, 0])
        vmapped = jax.vmap(lambda w: xr.rms_norm(x, w, eps=1e-6))(jnp.stack([w, 2 * w]))
    h = 1e-6  # central difference of the float64 formula
    ref = (rms_norm_np(x + h * tx, w + h * tw, 1e-6)[0] - rms_norm_np(x - h * tx, w - h * tw, 1e-6)[0]) / (2 * h)
    np.testing.assert_allclose(dy, ref, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dy_inplace, ref, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(dy_jit, ref, rtol=1e-6, atol=1e-7)
    ref_h = jax.hessian(lambda x: (x * jax.lax.rsqrt(jnp.mean(x * x) + 1e-6) * w).sum())(x[0, 0])
    np.testing.assert_allclose(hess, ref_h, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(vmapped[1], rms_norm_np(x, 2 * w, 1e-6)[0], rtol=1e-12)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_kepler_under_strict(dtype: Any) -> None:
    m = jnp.asarray(M, dtype)
    with strict():
        s, c = xr.kepler(m, 0.3)  # a Python float eccentricity: weak, as in jnp
        dm = jax.grad(lambda m: xr.kepler(m, 0.3)[0].sum())(m)
        _, (ds, _) = jax.jvp(lambda m, e: xr.kepler(m, e), (m, jnp.full_like(m, 0.3)), (m, m))
    assert s.dtype == c.dtype == dm.dtype == dtype
    assert kepler_residual(m, 0.3, s, c).max() < (1e-5 if dtype == jnp.float32 else 1e-12)
    big_e = np.arctan2(np.asarray(s, np.float64), np.asarray(c, np.float64))
    # d sin E / dM = cos E / (1 - e cos E); d sin E = cos E (dM + sin E de) / (1 - e cos E)
    np.testing.assert_allclose(dm, np.cos(big_e) / (1 - 0.3 * np.cos(big_e)), rtol=1e-4)
    m64 = np.asarray(m, np.float64)
    ref_ds = np.cos(big_e) * (m64 + np.sin(big_e) * m64) / (1 - 0.3 * np.cos(big_e))
    np.testing.assert_allclose(ds, ref_ds, rtol=1e-4)


def test_kepler_mixed_strong_dtypes_under_strict_name_kepler() -> None:
    """kepler promotes its two arguments as jnp's binary functions do (jnp.arctan2):
    under "strict" two different strong dtypes are refused, naming kepler."""
    with (
        strict(),
        pytest.raises(jax.dtypes.TypePromotionError, match=r"^kepler: mean_anomaly and eccentricity: .*strict"),
    ):
        xr.kepler(jnp.asarray(M, jnp.float16), jnp.float32(0.3))


# -- jax_debug_nans / jax_debug_infs ------------------------------------------------

_POP = xr.python_op(lambda x: np.sin(x), abstract_eval=lambda x: x)
_RMS_BOUND = binding.op(xr.declarations()["xla_ffi_rs.rms_norm_fwd"])

#: name -> (call, what the FloatingPointError names)
_OPS: dict[str, tuple[Callable[[jax.Array], Any], str]] = {
    "rms_norm": (lambda x: xr.rms_norm(x, jnp.asarray(W)), "rms_norm_fwd"),
    "rms_norm_inplace": (lambda x: xr.rms_norm_inplace(x, jnp.asarray(W)), "rms_norm_fwd_inplace"),
    "kepler": (lambda x: xr.kepler(x, 0.3), "kepler"),
    "python_op": (_POP, "python_op[<lambda>]"),
    "binding": (lambda x: _RMS_BOUND(x, jnp.asarray(W), eps=1e-5), "rms_norm_fwd"),
}


@pytest.mark.parametrize("name", sorted(_OPS))
def test_debug_nans_names_the_op(name: str) -> None:
    """A NaN out of an eager call was a RecursionError: JAX re-ran the jitted bind
    "de-optimized", which ran the jitted bind again."""
    call, named = _OPS[name]
    spoiled_np = X[0].copy()
    spoiled_np[0, 0] = np.nan
    clean, spoiled = jnp.asarray(X[0]), jnp.asarray(spoiled_np)  # jnp.asarray checks its result too
    with jax.debug_nans(True):
        out = call(clean)
        with pytest.raises(FloatingPointError, match=rf"invalid value \(nan\) encountered in {re.escape(named)}(\n|$)"):
            call(spoiled)
        with pytest.raises(FloatingPointError, match=rf"invalid value \(nan\) encountered in {re.escape(named)}(\n|$)"):
            jax.jit(call)(spoiled)  # the de-optimized run names the op too
    outs = out if isinstance(out, tuple) else (out,)
    assert all(np.isfinite(np.asarray(o)).all() for o in outs)  # no false alarm from a clean input


def test_debug_infs_names_the_op() -> None:
    """A zero row with eps=0: inv_rms is inf (y is NaN)."""
    zeros, w = jnp.zeros((2, 4)), jnp.ones(4)
    with jax.debug_infs(True):
        y = xr.rms_norm(jnp.ones((2, 4)), w, eps=0.0)
        with pytest.raises(FloatingPointError, match=r"invalid value \(inf\) encountered in rms_norm_fwd(\n|$)"):
            xr.rms_norm(zeros, w, eps=0.0)
    np.testing.assert_array_equal(y, np.ones((2, 4)))


def test_debug_nans_clean_input_matches_reference() -> None:
    x = jnp.asarray(X, jnp.float64)
    with jax.debug_nans(True), jax.debug_infs(True):
        y = jax.jit(lambda x: xr.rms_norm(x, jnp.asarray(W), eps=1e-6))(x)
        g = jax.grad(lambda x: xr.rms_norm(x, jnp.asarray(W), eps=1e-6).sum())(x)
    np.testing.assert_allclose(y, rms_norm_np(x, W, 1e-6)[0], rtol=1e-12)
    np.testing.assert_allclose(g, rms_norm_bwd_np(np.ones(X.shape), x, W, 1e-6)[0], rtol=1e-10, atol=1e-12)


# -- jax_enable_x64 toggled between calls ----------------------------------------


@contextmanager
def x64(on: bool) -> Iterator[None]:
    before = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", on)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)


@pytest.mark.parametrize("order", [(True, False, True), (False, True, False)])
def test_x64_toggled_between_calls(order: tuple[bool, ...]) -> None:
    """NumPy float64 inputs and Python floats: float64 results with x64 on, float32
    with it off, whichever came first (nothing cached across the switch)."""
    m, x, w = M.astype(np.float64), X.astype(np.float64), W.astype(np.float64)
    for on in order:
        with x64(on):
            want = jnp.float64 if on else jnp.float32
            s, c = xr.kepler(m, 0.3)
            y = jax.jit(xr.rms_norm)(x, w)
            p = _POP(x)
            dm = jax.grad(lambda m: xr.kepler(m, 0.3)[0].sum())(m)
            assert s.dtype == y.dtype == p.dtype == dm.dtype == want
            tol = 1e-12 if on else 1e-5
            assert kepler_residual(m, 0.3, s, c).max() < tol
            np.testing.assert_allclose(y, rms_norm_np(x, w, 1e-5)[0], rtol=tol * 10, atol=tol * 10)
            np.testing.assert_allclose(p, np.sin(x), rtol=tol, atol=tol)
