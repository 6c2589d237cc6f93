"""xla_ffi_rs.kepler for large mean anomalies: M is reduced modulo the real 2 pi
exactly for every finite M, float32 and float64.

The reference is NumPy's float64 sin/cos of M (which reduce exactly): for e = 0,
sin E and cos E are sin M and cos M; for e > 0, E - e sin E is M on the circle,
compared through sin and cos so that no reduction of M is needed here. With
``XFR_BIG_TESTS=1``, also the far end of arrays past 2**31 bytes.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import big_arrays, kepler_solve_np
from xla_ffi_rs import kepler

LARGE_M = [1e15, 1e16, 1e17, 1e20, 1e300, -1e300, float(np.finfo(np.float64).max), 2.0**27, -(2.0**60) - 0.5e3]
F32_LARGE_M = [1e15, 1e16, 1e17, 1e20, -1e20, float(np.finfo(np.float32).max), -float(np.finfo(np.float32).max)]


def _binades(dtype: type) -> np.ndarray:
    """Three M of each binade from 2^20 to the largest finite, both signs."""
    top = np.finfo(dtype).maxexp
    rng = np.random.default_rng(3)
    ex = np.repeat(np.arange(20, top), 3)
    m = np.ldexp(rng.uniform(1, 2, ex.size), ex) * rng.choice([-1.0, 1.0], ex.size)
    return m.astype(dtype)


def _check(m: np.ndarray, e: float, s: jax.Array, c: jax.Array, tol: float) -> None:
    m64 = np.asarray(m, np.float64)
    s64, c64 = np.asarray(s, np.float64), np.asarray(c, np.float64)
    if e == 0.0:
        np.testing.assert_allclose(s64, np.sin(m64), rtol=0, atol=tol)
        np.testing.assert_allclose(c64, np.cos(m64), rtol=0, atol=tol)
    lhs = np.arctan2(s64, c64) - np.float64(np.asarray(e, m.dtype)) * s64  # E - e sin E
    np.testing.assert_allclose(np.sin(lhs), np.sin(m64), rtol=0, atol=tol, err_msg=f"e = {e}")
    np.testing.assert_allclose(np.cos(lhs), np.cos(m64), rtol=0, atol=tol, err_msg=f"e = {e}")


@pytest.mark.parametrize("e", [0.0, 0.5, 0.9])
def test_large_m_float64(e: float) -> None:
    m = np.concatenate([np.array(LARGE_M), _binades(np.float64)])
    s, c = kepler(m, np.float64(e))
    assert s.dtype == np.float64
    _check(m, e, s, c, 2e-15)
    # One element at a time (the solver's element-by-element path) agrees.
    for mi in LARGE_M:
        si, ci = kepler(np.float64(mi), np.float64(e))
        _check(np.array([mi]), e, si[None], ci[None], 2e-15)


def _near_odd_multiples_of_pi(dtype: type) -> np.ndarray:
    """M within four ulps of (2k + 1) pi, |M| from about 10 up to 2^27 (where the
    fast reduction ends), both signs: where M / 2pi rounds across a half."""
    k = np.unique(np.geomspace(2, 2.1e7, 400).astype(np.int64))
    m0: np.ndarray = ((k + 0.5) * (2 * np.pi)).astype(dtype)
    m = np.concatenate([_ulps(m0, j) for j in range(-4, 5)])
    m = m[np.abs(m) < 2.0**27]
    return np.concatenate([m, -m]).astype(dtype)


def _ulps(m: np.ndarray, j: int) -> np.ndarray:
    """`m` moved by `j` ulps."""
    out = m.copy()
    for _ in range(abs(j)):
        out = np.nextafter(out, np.inf if j > 0 else -np.inf)
    return out


@pytest.mark.parametrize("e", [0.0, 0.5, 0.9])
def test_m_near_odd_multiples_of_pi_float64(e: float) -> None:
    """M just below or above an odd multiple of pi is solved for its own residue,
    not snapped to E = +-pi (the values the defect was first seen at first)."""
    seen = np.array([130152423.15181877, 5928.185337323939, 98668.00047129462, 9761968.241871824])
    m = np.concatenate([seen, -seen, _near_odd_multiples_of_pi(np.float64)])
    s, c = kepler(m, np.float64(e))
    _check(m, e, s, c, 2e-15)
    for mi in seen:
        si, ci = kepler(np.float64(mi), np.float64(e))
        _check(np.array([mi]), e, si[None], ci[None], 2e-15)


@pytest.mark.parametrize("e", [0.0, 0.5, 0.9])
def test_m_near_odd_multiples_of_pi_float32(e: float) -> None:
    m = _near_odd_multiples_of_pi(np.float32)
    s, c = kepler(m, np.float32(e))
    _check(m, e, s, c, 2e-6)


@pytest.mark.parametrize("e", [0.0, 0.5, 0.9])
def test_large_m_float32(e: float) -> None:
    m = np.concatenate([np.array(F32_LARGE_M, np.float32), _binades(np.float32)])
    s, c = kepler(m, np.float32(e))
    assert s.dtype == np.float32
    _check(m, e, s, c, 2e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_m_under_jit_and_grad(dtype: type) -> None:
    m: np.ndarray = np.array([1e16, -1e17, 1e20], dtype)
    s, c = jax.jit(kepler)(m, dtype(0.0))
    _check(m, 0.0, s, c, 2e-6 if dtype == np.float32 else 2e-15)
    # d sin E / dM = cos E / (1 - e cos E): at e = 0, cos M.
    g = jax.grad(lambda x: kepler(x, dtype(0.0))[0])(m[0])
    assert abs(float(g) - np.cos(np.float64(m[0]))) <= (1e-6 if dtype == np.float32 else 1e-14)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_infinite_and_nan_m_give_nan(dtype: type) -> None:
    m: np.ndarray = np.array([np.inf, -np.inf, np.nan, 1e30], dtype)
    s, c = kepler(m, dtype(0.5))
    assert np.isnan(np.asarray(s[:3])).all() and np.isnan(np.asarray(c[:3])).all()
    assert np.isfinite(np.asarray(s[3])) and np.isfinite(np.asarray(c[3]))


def test_large_python_int_m() -> None:
    # An int beyond int64 is a valid M (it is converted to a float like any int).
    s, c = kepler(10**20, 0.0)
    assert abs(float(s) - np.sin(1e20)) <= 2e-15 and abs(float(c) - np.cos(1e20)) <= 2e-15


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_jnp_fallback_reduces_large_m_too(dtype: type) -> None:
    # What platforms without the kernels lower (the jnp reference) reduces the same way.
    from xla_ffi_rs.ops.kepler import kepler_jnp

    m = np.concatenate([np.array(F32_LARGE_M if dtype == np.float32 else LARGE_M, dtype), _binades(dtype)])
    for e in (0.0, 0.5, 0.9):
        s, c = jax.jit(kepler_jnp)(m, np.full_like(m, e))
        _check(m, e, s, c, 2e-6 if dtype == np.float32 else 2e-15)
    # The real 2 pi, not the float64 one, as the kernel: M = 2*np.pi is solved as M = -2.4e-16.
    s, _ = kepler_jnp(jnp.float64(2 * np.pi), jnp.float64(0.0))
    assert float(s) == pytest.approx(-2.4492935982947064e-16, rel=1e-12)


@big_arrays
def test_arrays_past_2_31_bytes_are_solved_at_their_far_end() -> None:
    """2**29 + 1000 float32 mean anomalies (past 2**31 bytes an array; four such
    arrays, 8 GiB), made in the program: the first and last elements against
    NumPy's float64 solution."""
    size, e = 2**29 + 1000, 0.7

    def anomalies(start: int, stop: int, xp: Any) -> Any:
        i = xp.arange(start, stop, dtype=xp.int32)
        return ((i % 4001).astype(xp.float32) - xp.float32(2000)) / xp.float32(300)

    sin_e, cos_e = jax.jit(lambda: kepler(anomalies(0, size, jnp), jnp.full(size, e, jnp.float32)))()
    ends = {
        start: (np.asarray(sin_e[start : start + 5]), np.asarray(cos_e[start : start + 5])) for start in (0, size - 5)
    }
    del sin_e, cos_e
    for start, (s, c) in ends.items():
        big_e = kepler_solve_np(anomalies(start, start + 5, np), e)
        np.testing.assert_allclose(s, np.sin(big_e), atol=2e-6, err_msg=f"elements {start}..{start + 5}")
        np.testing.assert_allclose(c, np.cos(big_e), atol=2e-6, err_msg=f"elements {start}..{start + 5}")
