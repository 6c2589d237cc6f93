"""Kepler on the GPU, beyond the generic GPU-against-CPU checks of
tests/gpu/test_gpu_ops.py: Kepler's backward error |E - e sin E - M| <= 1e-12 (f64) /
2e-5 (f32) for e <= 0.9999, NaN for an invalid eccentricity, empty and scalar
inputs, gradients (``check_grads``), ``vmap``, bad input (the same error as on the
CPU), promoted dtypes, and the derivative targets the generic checks do not reach
(the scalar-tangent fused targets and second order). Skipped as a whole without a GPU.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import xla_ffi_rs as xr
from gpu_checks import error_of, f64, gpu_and_cpu_or_skip, gpu_vs_cpu, on

GPU, CPU = gpu_and_cpu_or_skip()


def kepler_inputs(n, dtype, e_max=0.9999, seed=0):
    rng = np.random.default_rng(seed)
    m = rng.uniform(-50, 50, n)
    e = rng.uniform(0, e_max, n)
    # the hard corner: e close to 1, M close to 0
    k = n // 4
    e[:k] = rng.uniform(min(0.99, 0.9 * e_max), e_max, k)
    m[:k] = rng.uniform(-0.1, 0.1, k)
    return jnp.asarray(m, dtype), jnp.asarray(e, dtype)


# ----------------------------------------------------------------------------- kepler


@pytest.mark.parametrize("dtype,tol", [(jnp.float64, 1e-12), (jnp.float32, 2e-5)])
def test_kepler_backward_error(dtype, tol):
    m, e = on(GPU, *kepler_inputs(1 << 16, dtype))
    s, c = jax.jit(xr.kepler)(m, e)
    assert s.devices() == {GPU} and s.dtype == dtype and c.dtype == dtype
    E = np.arctan2(f64(s), f64(c))
    mm, ee = f64(m), f64(e)
    resid = np.remainder(E - ee * np.sin(E) - mm + np.pi, 2 * np.pi) - np.pi
    assert np.max(np.abs(resid)) <= tol
    assert np.allclose(f64(s) ** 2 + f64(c) ** 2, 1, atol=10 * np.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_kepler_invalid_eccentricity_is_nan(dtype):
    e = jnp.asarray([-0.1, 1.0, 1.5, np.nan, 0.5, 0.5], dtype)
    m = jnp.asarray([1.0, 1.0, 1.0, 1.0, np.nan, 1.0], dtype)
    s, c = xr.kepler(*on(GPU, m, e))
    assert np.all(np.isnan(f64(s)[:5])) and np.all(np.isnan(f64(c)[:5]))
    assert np.isfinite(f64(s)[5])


def test_kepler_empty_and_scalar():
    s, c = xr.kepler(*on(GPU, jnp.zeros((0,)), jnp.zeros((0,))))
    assert s.shape == (0,)
    s, c = xr.kepler(*on(GPU, jnp.asarray(0.0), jnp.asarray(0.5)))
    assert float(s) == 0.0 and float(c) == 1.0


def test_kepler_grads():
    m, e = kepler_inputs(64, jnp.float64, e_max=0.8, seed=2)
    m, e = on(GPU, m, jnp.clip(e, 0.05, 0.8))
    check_grads(xr.kepler, (m, e), order=1, modes=["fwd", "rev"], atol=1e-6, rtol=1e-6)


def test_kepler_vmap():
    m, e = kepler_inputs(4 * 33, jnp.float32, seed=3)
    m, e = on(GPU, m.reshape(4, 33), e.reshape(4, 33))
    sv, cv = jax.vmap(xr.kepler)(m, e)
    sd, cd = xr.kepler(m, e)
    np.testing.assert_array_equal(np.asarray(sv), np.asarray(sd))
    np.testing.assert_array_equal(np.asarray(cv), np.asarray(cd))


@pytest.mark.parametrize(
    "m,e",
    [
        (np.zeros(4, np.complex64), np.zeros(4, np.complex64)),  # not a real dtype
        (np.zeros((2, 3), np.float32), np.zeros((3, 2), np.float32)),  # shapes do not broadcast
        (np.zeros(4, np.float32), np.zeros(5, np.float32)),  # shapes differ
    ],
)
def test_kepler_bad_input_same_error_as_cpu(m, e):
    gpu = error_of(xr.kepler, *on(GPU, jnp.asarray(m), jnp.asarray(e)))
    cpu = error_of(xr.kepler, *on(CPU, jnp.asarray(m), jnp.asarray(e)))
    assert cpu is not None and gpu is not None
    assert gpu[0] is cpu[0]
    if gpu[0] is not TypeError and gpu[0] is not ValueError:
        # from the handlers: the CUDA and CPU handlers share their checks and messages
        assert gpu[1] == cpu[1]


@pytest.mark.parametrize(
    "dm,de", [(np.float16, np.float16), (np.float32, np.float64), (np.int32, np.int32), (np.float32, np.int32)]
)
def test_kepler_promoted_dtypes_match_cpu(dm, de):
    rng = np.random.default_rng(4)
    m = rng.uniform(-5, 5, 257).astype(dm) if np.issubdtype(dm, np.floating) else rng.integers(-5, 5, 257).astype(dm)
    e = rng.uniform(0, 0.9, 257).astype(de) if np.issubdtype(de, np.floating) else np.zeros(257, de)
    gpu = xr.kepler(*on(GPU, jnp.asarray(m), jnp.asarray(e)))
    cpu = xr.kepler(*on(CPU, jnp.asarray(m), jnp.asarray(e)))
    for g, c in zip(gpu, cpu, strict=True):
        assert g.dtype == c.dtype and next(iter(g.devices())).platform == "gpu"
        tol = 1e-10 if g.dtype == jnp.float64 else 2e-3
        np.testing.assert_allclose(f64(g), f64(c), rtol=0, atol=tol)


# ------------------------------------------------------- derivatives: every target's CUDA twin


KEPLER_DERIVATIVES = {
    # each lowers to a different target: kepler_jvp_dm, kepler_jvp_const, and the
    # tangent/cotangent targets again at second order (kepler_jvp and kepler_cotangent
    # under jvp and grad: tests/gpu/test_gpu_ops.py)
    "jvp_dm": lambda m, e, tm, te: jax.jvp(lambda m: xr.kepler(m, e), (m,), (tm,)),
    "jvp_const": lambda m, e, tm, te: jax.jvp(xr.kepler, (m, e), (jnp.ones_like(m), jnp.zeros_like(e))),
    "second_order": lambda m, e, tm, te: jax.grad(
        lambda m: jnp.sum(tm * jax.grad(lambda m: jnp.sum(xr.kepler(m, e)[0]))(m))
    )(m),
}


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
@pytest.mark.parametrize("kind", sorted(KEPLER_DERIVATIVES))
def test_kepler_derivatives_match_cpu(kind, dtype):
    rng = np.random.default_rng(6)
    m, e = rng.uniform(-10, 10, 4096), rng.uniform(0.0, 0.9, 4096)
    tm, te = rng.standard_normal(4096), rng.standard_normal(4096)
    floor = {"float64": 1e-12, "float32": 2e-6}
    gpu_vs_cpu(KEPLER_DERIVATIVES[kind], (m, e, tm, te), dtype, GPU, CPU, floor)
