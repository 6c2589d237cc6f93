"""xla_ffi_rs.kepler: accuracy, dtypes, broadcasting and every transformation."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from helpers import KEPLER, count_calls, kepler_residual, kepler_solve_np, lowered
from xla_ffi_rs import kepler

ECCS = np.array([0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999])


def grid(dtype: type) -> tuple[np.ndarray, np.ndarray]:
    m = np.linspace(-12.0, 12.0, 241)
    mm, ee = np.meshgrid(m, ECCS, indexing="ij")
    return mm.astype(dtype).ravel(), ee.astype(dtype).ravel()


def test_residual_float64() -> None:
    m, e = grid(np.float64)
    s, c = kepler(m, e)
    assert s.dtype == c.dtype == jnp.float64
    assert np.max(kepler_residual(m, e, s, c)) <= 1e-12
    np.testing.assert_allclose(np.hypot(s, c), 1.0, atol=1e-14)


def test_residual_float32() -> None:
    m, e = grid(np.float32)
    s, c = kepler(m, e)
    assert s.dtype == c.dtype == jnp.float32
    assert np.max(kepler_residual(m, e, s, c)) <= 2e-5


def test_matches_bisection_reference() -> None:
    m, e = grid(np.float64)
    s, c = kepler(m, e)
    big_e = kepler_solve_np(m, e)
    np.testing.assert_allclose(s, np.sin(big_e), atol=1e-9)
    np.testing.assert_allclose(c, np.cos(big_e), atol=1e-9)


def test_tiny_mean_anomaly_near_parabolic() -> None:
    m = np.array([1e-8, 1e-5, -1e-3, 0.0])
    s, c = kepler(m, np.full(4, 0.9999))
    assert np.max(kepler_residual(m, 0.9999, s, c)) <= 1e-12


@pytest.mark.parametrize("e", [1.0, 1.5, -0.1, np.nan, np.inf])
def test_invalid_eccentricity_gives_nan(e: float) -> None:
    s, c = kepler(np.array([0.3, 1.0]), np.array([e, 0.5]))
    assert np.isnan(s[0]) and np.isnan(c[0])
    assert np.isfinite(s[1]) and np.isfinite(c[1])


def test_broadcasting_and_scalars() -> None:
    m = np.linspace(0, 6, 3)[:, None]
    e = np.array([0.0, 0.2, 0.4, 0.6])
    s, c = kepler(m, e)
    assert s.shape == c.shape == (3, 4)
    s0, _ = kepler(1.0, 0.0)
    assert s0.shape == () and np.isclose(s0, np.sin(1.0))
    se, _ = kepler(np.zeros((0, 2)), 0.5)
    assert se.shape == (0, 2)


@pytest.mark.parametrize(
    ("m", "e", "expected"),
    [
        (1, 0, jnp.result_type(float)),
        (np.int32(1), np.int16(0), jnp.result_type(float)),
        (np.float32(1), 0.5, jnp.float32),
        (np.float32(1), np.float64(0.5), jnp.float64),
        (np.float16(1), np.float16(0.5), jnp.float16),
        (jnp.bfloat16(1), 0.5, jnp.bfloat16),
    ],
)
def test_dtype_promotion(m: Any, e: Any, expected: Any) -> None:
    s, c = kepler(m, e)
    assert s.dtype == c.dtype == jnp.dtype(expected)
    big_e = kepler_solve_np(1.0, float(e))
    np.testing.assert_allclose(np.float64(s), np.sin(big_e), rtol=1e-2)


def test_complex_rejected() -> None:
    with pytest.raises(TypeError, match="mean_anomaly"):
        kepler(1j, 0.5)
    with pytest.raises(TypeError, match="eccentricity"):
        kepler(1.0, np.complex64(0.5))


def test_jit_matches_eager_and_is_one_call() -> None:
    m, e = grid(np.float64)
    np.testing.assert_array_equal(jax.jit(kepler)(m, e)[0], kepler(m, e)[0])
    assert count_calls(lowered(kepler, m, e), KEPLER) == 1


@pytest.mark.parametrize(
    ("in_axes", "m_shape", "e_shape"),
    [((0, 0), (5, 3), (5, 3)), ((0, None), (5, 3), (3,)), ((None, 0), (3,), (5, 3)), ((1, 0), (3, 5), (5, 3))],
)
def test_vmap_is_one_vectorized_call(in_axes: tuple, m_shape: tuple, e_shape: tuple) -> None:
    rng = np.random.default_rng(0)
    m = rng.uniform(-7, 7, m_shape)
    e = rng.uniform(0, 0.95, e_shape)
    batched = jax.vmap(kepler, in_axes=in_axes)
    s, c = batched(m, e)
    for i in range(5):
        mi = m if in_axes[0] is None else np.take(m, i, axis=in_axes[0])
        ei = e if in_axes[1] is None else np.take(e, i, axis=in_axes[1])
        si, ci = kepler(mi, ei)
        np.testing.assert_allclose(s[i], si, rtol=0, atol=1e-15)
        np.testing.assert_allclose(c[i], ci, rtol=0, atol=1e-15)
    text = lowered(batched, m, e)
    assert count_calls(text, KEPLER) == 1
    assert "while" not in text and "scan" not in text


def test_nested_vmap_is_one_call() -> None:
    m, e = np.ones((2, 3, 4)), np.full((3, 4), 0.3)
    f = jax.vmap(jax.vmap(kepler, in_axes=(0, 0)), in_axes=(0, None))
    assert f(m, e)[0].shape == (2, 3, 4)
    text = lowered(f, m, e)
    assert count_calls(text, KEPLER) == 1 and "while" not in text


def test_jvp_is_implicit_derivative() -> None:
    m, e = np.array([0.3, 2.0, -1.0]), np.array([0.1, 0.6, 0.95])
    dm, de = np.array([1.0, 0.5, -2.0]), np.array([0.3, -1.0, 0.2])
    (_s, _c), (ds, dc) = jax.jvp(kepler, (m, e), (dm, de))
    big_e = kepler_solve_np(m, e)
    d_big_e = (dm + np.sin(big_e) * de) / (1 - e * np.cos(big_e))
    np.testing.assert_allclose(ds, np.cos(big_e) * d_big_e, atol=1e-10)
    np.testing.assert_allclose(dc, -np.sin(big_e) * d_big_e, atol=1e-10)


def test_grad_matches_finite_differences_of_reference() -> None:
    m, e, h = 1.3, 0.7, 1e-6
    g_m, g_e = jax.grad(lambda m, e: kepler(m, e)[0], argnums=(0, 1))(m, e)
    ref = lambda m, e: np.sin(kepler_solve_np(m, e))  # noqa: E731
    np.testing.assert_allclose(g_m, (ref(m + h, e) - ref(m - h, e)) / (2 * h), rtol=1e-7)
    np.testing.assert_allclose(g_e, (ref(m, e + h) - ref(m, e - h)) / (2 * h), rtol=1e-7)


@pytest.mark.parametrize("e", [0.05, 0.3, 0.8])
def test_check_grads_second_order(e: float) -> None:
    m = np.array([0.4, 2.5, -3.0])
    ecc = np.full(3, e)
    check_grads(lambda m, e: kepler(m, e), (m, ecc), order=2, modes=("fwd", "rev"))
    check_grads(jax.jit(lambda m, e: kepler(m, e)[1]), (m, ecc), order=2, modes=("fwd", "rev"))


def test_hessian() -> None:
    def loss(p: jax.Array) -> jax.Array:
        s, c = kepler(p[0], p[1])
        return s * c + s

    p = np.array([1.1, 0.4])
    hess = jax.hessian(loss)(p)
    assert hess.shape == (2, 2)
    np.testing.assert_allclose(hess, hess.T, atol=1e-10)
    h = 1e-5
    grad = jax.grad(loss)
    fd = np.stack([(grad(p + h * u) - grad(p - h * u)) / (2 * h) for u in np.eye(2)])
    np.testing.assert_allclose(hess, fd, rtol=1e-6, atol=1e-8)
    assert np.allclose(jax.jit(jax.hessian(loss))(p), hess)


def test_grad_program_uses_only_the_forward_kernel() -> None:
    f = jax.grad(lambda m: jnp.sum(kepler(m, 0.5)[0]))
    m = np.linspace(0, 1, 4)
    text = lowered(f, m)
    assert count_calls(text, KEPLER) == 1


def test_vmap_of_grad_and_grad_of_vmap() -> None:
    m, e = np.linspace(-2, 2, 6), np.linspace(0, 0.9, 6)
    per_elem = jax.vmap(jax.grad(lambda m, e: kepler(m, e)[0], argnums=(0, 1)))(m, e)
    summed = jax.grad(lambda m, e: jnp.sum(jax.vmap(kepler)(m, e)[0]), argnums=(0, 1))(m, e)
    np.testing.assert_allclose(per_elem[0], summed[0], rtol=1e-12)
    np.testing.assert_allclose(per_elem[1], summed[1], rtol=1e-12)
    jitted = jax.jit(jax.vmap(jax.grad(lambda m, e: kepler(m, e)[0])))
    np.testing.assert_allclose(jitted(m, e), per_elem[0], rtol=1e-12)
    text = lowered(jax.vmap(jax.hessian(lambda m, e: kepler(m, e)[0])), m, e)
    assert "while" not in text


def test_vmap_of_jvp_and_jvp_of_vmap() -> None:
    m, e = np.linspace(-2, 2, 6), np.linspace(0, 0.9, 6)
    dm, de = np.linspace(1, 2, 6), np.linspace(-1, 1, 6)
    a = jax.vmap(lambda *p: jax.jvp(kepler, p[:2], p[2:])[1])(m, e, dm, de)
    b = jax.jvp(jax.vmap(kepler), (m, e), (dm, de))[1]
    c = jax.jit(jax.vmap(lambda *p: jax.jvp(kepler, p[:2], p[2:])[1]))(m, e, dm, de)
    for x, y, z in zip(a, b, c, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12)
        np.testing.assert_allclose(z, y, rtol=1e-12)
    text = lowered(jax.vmap(lambda *p: jax.jvp(kepler, p[:2], p[2:])), m, e, dm, de)
    assert count_calls(text, "xla_ffi_rs.kepler_jvp") == 1 and "while" not in text


def test_m_is_reduced_modulo_the_real_two_pi_as_documented() -> None:
    # README "Kepler: the reduction of M": 2*np.pi is 2.4e-16 below the real 2 pi.
    e = 1 - 1e-6
    s, c = (float(v) for v in kepler(np.float64(2 * np.pi), np.float64(e)))
    m_reduced = -2.4492935982947064e-16  # 2*np.pi - 2 pi, in float64
    assert s == pytest.approx(m_reduced / (1 - e), rel=1e-6)
    assert c == 1.0
    sin_f = np.sqrt(1 - e * e) * s / (1 - e * c)
    assert sin_f == pytest.approx(-3.4638e-7, rel=1e-4)
    # Reducing with fmod first gives 0, as the README says.
    s0, c0 = (float(v) for v in kepler(np.float64(np.mod(2 * np.pi, 2 * np.pi)), np.float64(e)))
    assert (s0, c0) == (0.0, 1.0)
