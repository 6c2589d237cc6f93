"""``jax.export`` of a model that uses both ops: export, serialize, deserialize,
call, differentiate, with the checks from ``xla_ffi_rs.export_checks()``."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr
from helpers import kepler_solve_np, rms_norm_bwd_np, rms_norm_np

EPS = 1e-5


def model(m: jax.Array, e: jax.Array, x: jax.Array, w: jax.Array) -> jax.Array:
    """A scalar that uses kepler and rms_norm: sum(sin E) + sum(rms_norm(x, w) * x)."""
    sin_e, _ = xr.kepler(m, e)
    return jnp.sum(sin_e) + jnp.sum(xr.rms_norm(x, w, eps=EPS) * x)


def inputs() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(3)
    m = rng.uniform(-7.0, 7.0, 6)
    e = rng.uniform(0.0, 0.9, 6)
    x = rng.standard_normal((3, 8))
    w = rng.uniform(0.5, 1.5, 8)
    return m, e, x, w


def reference(m: np.ndarray, e: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple[float, list[np.ndarray]]:
    """The model and its gradient in float64 numpy, independently of the package."""
    big_e = kepler_solve_np(m, e)
    y, _ = rms_norm_np(x, w, EPS)
    value = float(np.sum(np.sin(big_e)) + np.sum(y * x))
    # d sin E = cos E dE, dE/dM = 1/(1 - e cos E), dE/de = sin E/(1 - e cos E).
    denom = 1.0 - e * np.cos(big_e)
    dm, de = np.cos(big_e) / denom, np.cos(big_e) * np.sin(big_e) / denom
    dx_norm, dw = rms_norm_bwd_np(x, x, w, EPS)  # cotangent of y is x
    return value, [dm, de, dx_norm + y, dw]


def test_export_checks_cover_every_target() -> None:
    checks = xr.export_checks()
    names = {str(c) for c in checks}
    for target in ("xla_ffi_rs.kepler", "xla_ffi_rs.rms_norm_fwd", "xla_ffi_rs.rms_norm_bwd"):
        assert any(target in n for n in names), (target, names)
    assert all(isinstance(c, jax.export.DisabledSafetyCheck) for c in checks)


def test_export_refuses_the_targets_without_the_checks() -> None:
    with pytest.raises(ValueError, match="custom call"):
        jax.export.export(jax.jit(model))(*inputs())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_exported_model_round_trips_with_values_and_gradient(dtype: Any) -> None:
    args = tuple(a.astype(dtype) for a in inputs())
    exported = jax.export.export(jax.jit(model), disabled_checks=xr.export_checks())(*args)
    blob = exported.serialize(vjp_order=1)
    assert isinstance(blob, (bytes, bytearray)) and b"xla_ffi_rs.kepler" in bytes(blob)
    restored = jax.export.deserialize(blob)

    value, grads = reference(*inputs())
    rtol = 1e-10 if dtype == np.float64 else 2e-4
    np.testing.assert_allclose(float(restored.call(*args)), value, rtol=rtol)
    np.testing.assert_allclose(float(jax.jit(restored.call)(*args)), value, rtol=rtol)
    got = jax.grad(restored.call, argnums=(0, 1, 2, 3))(*args)
    for g, want in zip(got, grads, strict=False):
        assert g.dtype == dtype
        np.testing.assert_allclose(np.asarray(g, np.float64), want, rtol=rtol, atol=rtol)


def test_export_checks_cover_a_plugins_targets_registered_through_the_package() -> None:
    """A plugin registers its targets with ``register_targets``; its users export with
    ``export_checks()`` (examples/plugin/README.md), which must name those targets too,
    or ``jax.export`` refuses the program."""
    name = "test_export.plugin_kepler"
    if name not in xr._registration.registered_names():
        xr.register_targets({name: xr.handlers("cpu")["xla_ffi_rs.kepler"]})
    assert any(name in str(c) for c in xr.export_checks())
    m, e = inputs()[:2]
    shapes = (jax.ShapeDtypeStruct(m.shape, m.dtype),) * 2

    def f(m: jax.Array, e: jax.Array) -> Any:
        return jax.ffi.ffi_call(name, shapes)(m, e)[0]

    with pytest.raises(ValueError, match=name):
        jax.export.export(jax.jit(f))(m, e)
    exported = jax.export.export(jax.jit(f), disabled_checks=xr.export_checks())(m, e)
    restored = jax.export.deserialize(exported.serialize())
    np.testing.assert_allclose(restored.call(m, e), np.sin(kepler_solve_np(m, e)), rtol=1e-12)
