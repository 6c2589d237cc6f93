"""The programs exported with one jax and loaded with another
(tests/exports/make_exports.py writes them, tests/test_export_versions.py loads
them), their inputs and their float64 NumPy references."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import xla_ffi_rs as xr
from helpers import kepler_solve_np, rms_norm_bwd_np, rms_norm_np

EPS = 1e-3


def scalar_model(m: jax.Array, e: jax.Array, x: jax.Array, w: jax.Array) -> jax.Array:
    """sum(sin E) + sum(rms_norm(x, w) * x): both ops, differentiated by the loader."""
    sin_e, _ = xr.kepler(m, e)
    return jnp.sum(sin_e) + jnp.sum(xr.rms_norm(x, w, eps=EPS) * x)


def vmapped(m: jax.Array, e: jax.Array, x: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Both ops under vmap (one batched call each), with a per-row weight."""
    sin_e, cos_e = jax.vmap(xr.kepler, in_axes=(0, None))(m, e[0])
    y = jax.vmap(lambda x, w: xr.rms_norm(x, w, eps=EPS))(x, w)
    return sin_e, cos_e, y


def exported_grad(m: jax.Array, e: jax.Array, x: jax.Array, w: jax.Array) -> tuple[jax.Array, ...]:
    """The gradient itself exported (the backward kernels in the artifact)."""
    grads: tuple[jax.Array, ...] = jax.grad(scalar_model, argnums=(0, 1, 2, 3))(m, e, x, w)
    return grads


def scalar_inputs() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(5)
    return rng.uniform(-7.0, 7.0, 6), rng.uniform(0.0, 0.9, 6), rng.standard_normal((3, 8)), rng.uniform(0.5, 1.5, 8)


def vmapped_inputs() -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(6)
    return (
        rng.uniform(-7.0, 7.0, (2, 5)),
        rng.uniform(0.0, 0.9, (2, 5)),
        rng.standard_normal((2, 3, 4)),
        rng.uniform(0.5, 1.5, (2, 4)),
    )


def scalar_reference(m: np.ndarray, e: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple[float, list[np.ndarray]]:
    big_e = kepler_solve_np(m, e)
    y, _ = rms_norm_np(x, w, EPS)
    denom = 1.0 - e * np.cos(big_e)
    dm, de = np.cos(big_e) / denom, np.cos(big_e) * np.sin(big_e) / denom
    dx, dw = rms_norm_bwd_np(x, x, w, EPS)  # the cotangent of y is x
    return float(np.sum(np.sin(big_e)) + np.sum(y * x)), [dm, de, dx + y, dw]


def vmapped_reference(m: np.ndarray, e: np.ndarray, x: np.ndarray, w: np.ndarray) -> list[np.ndarray]:
    big_e = kepler_solve_np(m, np.broadcast_to(e[0], m.shape))
    y = np.stack([rms_norm_np(x[i], w[i], EPS)[0] for i in range(x.shape[0])])
    return [np.sin(big_e), np.cos(big_e), y]


PROGRAMS: dict[str, tuple[Callable[..., Any], Callable[[], tuple[np.ndarray, ...]]]] = {
    "scalar_model": (scalar_model, scalar_inputs),
    "vmapped": (vmapped, vmapped_inputs),
    "exported_grad": (exported_grad, scalar_inputs),
}

#: The jax versions whose exports tests/exports holds (each tested development jax).
EXPORT_VERSIONS = ("0.10.2", "0.12.0.1")
