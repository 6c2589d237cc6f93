"""An installed xla_ffi_rs wheel runs its ops under jit, grad and vmap.

Run from outside the checkout (so that the installed package is the one
imported): `python .ci/wheel_smoke.py`. Used by release.yml on each platform's
runner (Linux x86_64 and aarch64, macOS arm64, Windows x86_64) and by
.ci/platforms.sh on the aarch64 wheel under qemu. Every result is checked against
an independent reference: NumPy in float64 (Kepler's equation itself, the RMS
norm formula) and finite differences / plain jnp for the derivatives.
"""

from __future__ import annotations

import platform
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax.test_util import check_grads

import xla_ffi_rs as xr

jax.config.update("jax_enable_x64", True)


def kepler_checks() -> None:
    m = np.linspace(-7.0, 7.0, 101)
    e = np.linspace(0.0, 0.95, 101)
    s, c = jax.jit(xr.kepler)(jnp.asarray(m), jnp.asarray(e))
    s, c = np.asarray(s), np.asarray(c)
    ea = np.arctan2(s, c)
    # Kepler's equation, modulo 2 pi, in float64.
    resid = np.angle(np.exp(1j * (ea - e * np.sin(ea) - m)))
    assert np.max(np.abs(resid)) < 1e-12, f"kepler: |E - e sin E - M| = {np.max(np.abs(resid))}"
    np.testing.assert_allclose(s * s + c * c, 1.0, atol=1e-14)
    # vmap over a leading axis gives the same bits as the flat call.
    sv, cv = jax.vmap(xr.kepler)(jnp.asarray(m.reshape(1, -1)), jnp.asarray(e.reshape(1, -1)))
    assert np.array_equal(np.asarray(sv)[0], s) and np.array_equal(np.asarray(cv)[0], c), "kepler: vmap != flat"
    # dE/dM = 1 / (1 - e cos E): the derivative of sin E is cos E dE/dM.
    ds = jax.jit(jax.grad(lambda mm, ee: xr.kepler(mm, ee)[0]))(1.0, 0.3)
    _, c1 = (float(v) for v in xr.kepler(jnp.float64(1.0), jnp.float64(0.3)))
    np.testing.assert_allclose(float(ds), c1 / (1.0 - 0.3 * c1), rtol=1e-12)
    check_grads(lambda mm, ee: xr.kepler(mm, ee), (jnp.float64(0.7), jnp.float64(0.4)), order=2, modes=["fwd", "rev"])
    # float32 too.
    s32, _ = jax.jit(xr.kepler)(jnp.asarray(m, jnp.float32), jnp.asarray(e, jnp.float32))
    np.testing.assert_allclose(np.asarray(s32, np.float64), s, atol=2e-5)


def rms_norm_checks() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 33))
    w = rng.standard_normal(33)
    ref = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-5) * w
    for dtype, tol in [(np.float64, 1e-12), (np.float32, 1e-5)]:
        y = jax.jit(xr.rms_norm)(jnp.asarray(x, dtype), jnp.asarray(w, dtype))
        np.testing.assert_allclose(np.asarray(y, np.float64), ref, rtol=tol, atol=tol)
    yb = jax.vmap(xr.rms_norm, in_axes=(0, None))(jnp.asarray(x.reshape(2, 3, 33)), jnp.asarray(w))
    np.testing.assert_allclose(np.asarray(yb).reshape(6, 33), ref, rtol=1e-12)

    def loss(xx: jax.Array, ww: jax.Array) -> jax.Array:
        return jnp.sum(jnp.sin(xr.rms_norm(xx, ww)))

    def loss_jnp(xx: jax.Array, ww: jax.Array) -> jax.Array:
        r = jax.lax.rsqrt(jnp.mean(xx * xx, axis=-1, keepdims=True) + 1e-5)
        return jnp.sum(jnp.sin(xx * r * ww))

    gx, gw = jax.jit(jax.grad(loss, argnums=(0, 1)))(jnp.asarray(x), jnp.asarray(w))
    rx, rw = jax.grad(loss_jnp, argnums=(0, 1))(jnp.asarray(x), jnp.asarray(w))
    np.testing.assert_allclose(np.asarray(gx), np.asarray(rx), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gw), np.asarray(rw), rtol=1e-10, atol=1e-12)
    check_grads(xr.rms_norm, (jnp.asarray(x[:2, :5]), jnp.asarray(w[:5])), order=1, modes=["fwd", "rev"])


def main() -> None:
    where = Path(xr.__file__).resolve()
    # The wheel's package, not a checkout's python/ folder (run from elsewhere).
    assert not (where.parents[2] / "crates").is_dir(), f"imported {where}, not the installed wheel"
    kepler_checks()
    rms_norm_checks()
    print(
        f"xla_ffi_rs {xr.__version__} on {platform.system()} {platform.machine()}, "
        f"Python {sys.version.split()[0]}, jax {jax.__version__}: kepler and rms_norm under jit, grad, vmap: ok"
    )


if __name__ == "__main__":
    main()
