"""Kepler's derivatives near the singular corner e -> 1, E -> 0, where
1 - e cos E = (1 - e) + 2 e sin^2(E/2) is small: against a float64 reference that
forms it without cancellation, at the exact solution for the given (M, e).

Formed as ``1 - e * cos E`` from the solver's ``cos E``, the denominator carried
``cos E``'s rounding error (half an ulp of 1) relative to ``1 - e``: the gradient
was off by 2e-4 relative in float32 at e = 0.9999 (inside the solver's documented
range) and by 5e-5 in float64 at e = 1 - 1e-12, where the solution is accurate."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xla_ffi_rs import kepler
from xla_ffi_rs.ops.kepler import kepler_cotangent_jnp, kepler_tangent_jnp


def e_minus_sin(x: np.ndarray) -> np.ndarray:
    """E - sin E in float64 without cancellation (series below |E| = 0.5)."""
    z = x * x
    series = x * z / 6 * (1 - z / 20 * (1 - z / 42 * (1 - z / 72 * (1 - z / 110 * (1 - z / 156 * (1 - z / 210))))))
    return np.where(np.abs(x) < 0.5, series, x - np.sin(x))


def corner_reference(m: np.ndarray, e: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(E, 1 - e cos E) in float64 for M = E - e sin E, by Newton from ``start`` on
    (1 - e) E + e (E - sin E) - M, whose terms do not cancel near the corner."""
    big_e = start.copy()
    for _ in range(8):
        den = (1 - e) + 2 * e * np.sin(big_e / 2) ** 2
        big_e = big_e - ((1 - e) * big_e + e * e_minus_sin(big_e) - m) / den
    return big_e, (1 - e) + 2 * e * np.sin(big_e / 2) ** 2


def corner_grid(dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    """(M, e) of the given dtype with E from 1e-8 (1e-4 in float32) to 1."""
    if dtype == np.float64:
        es, big_e = [0.9999, 1 - 1e-8, 1 - 1e-12], np.logspace(-8, 0, 33)
    else:
        es, big_e = [0.999, 0.9999, 0.99999], np.logspace(-4, 0, 17)
    e, big_e = (a.ravel() for a in np.meshgrid(np.array(es, dtype).astype(np.float64), big_e))
    m = (1 - e) * big_e + e * e_minus_sin(big_e)
    return m.astype(dtype), e.astype(dtype)


@pytest.mark.parametrize(("dtype", "rtol"), [(np.float64, 1e-12), (np.float32, 2e-5)])
def test_derivatives_near_the_corner_keep_their_relative_accuracy(dtype: Any, rtol: float) -> None:
    m, e = corner_grid(dtype)
    m64, e64 = m.astype(np.float64), e.astype(np.float64)
    big_e, den = corner_reference(m64, e64, np.cbrt(6 * m64))
    s, c = np.sin(big_e), np.cos(big_e)
    want_m, want_e = c / den, c * s / den  # d(sin E)/dM, d(sin E)/de

    def close(got: Any, want: np.ndarray, what: str) -> None:
        rel = np.abs(np.asarray(got, np.float64) - want) / np.abs(want)
        i = int(np.argmax(rel))
        assert rel[i] <= rtol, f"{what}: relative error {rel[i]:.3g} at M={m[i]!r}, e={e[i]!r}"

    # Reverse mode: the solver and the kepler_cotangent kernel.
    g_m, g_e = jax.jit(jax.grad(lambda m, e: jnp.sum(kepler(m, e)[0]), argnums=(0, 1)))(m, e)
    close(g_m, want_m, "grad wrt M")
    close(g_e, want_e, "grad wrt e")
    # Forward mode: the fused kepler_jvp kernel.
    ones = np.ones_like(m)
    _, (ds_m, _) = jax.jit(lambda m, e, v: jax.jvp(kepler, (m, e), (v, jnp.zeros_like(v))))(m, e, ones)
    close(ds_m, want_m, "jvp wrt M")
    # The jnp formulas that platforms without the targets lower, at the kernel's point.
    sk, ck = kepler(m, e)
    one, zero, ej = jnp.asarray(ones), jnp.zeros_like(jnp.asarray(m)), jnp.asarray(e)
    close(kepler_tangent_jnp(one, zero, ej, sk, ck)[0], want_m, "kepler_tangent_jnp")
    close(kepler_cotangent_jnp(one, zero, ej, sk, ck)[0], want_m, "kepler_cotangent_jnp")
