"""xr.rms_norm and xr.rms_norm_inplace's public types, checked by mypy --strict and run by pytest (see
tests/test_public_types.py: each ``assert_type`` states the type mypy must infer,
each ``# type: ignore[arg-type]`` a call mypy must reject, which raises TypeError)."""

from __future__ import annotations

from typing import assert_type

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr
from xla_ffi_rs.ops import rms_norm as rms_norm_module

X = jnp.ones((2, 3))
W = jnp.full((3,), 2.0)


def test_rms_norm_types() -> None:
    y = assert_type(xr.rms_norm(X, W), jax.Array)
    assert isinstance(y, jax.Array)
    y = assert_type(xr.rms_norm(np.ones((2, 3)), np.ones(3), eps=0.0), jax.Array)
    assert isinstance(y, jax.Array)
    y = assert_type(xr.rms_norm_inplace(X, W, 1e-6), jax.Array)
    assert isinstance(y, jax.Array)


def test_eps_may_be_a_numpy_scalar_or_a_concrete_0d_array() -> None:
    # As the docstring says: typed so that mypy accepts them, read as their value.
    reference = np.asarray(xr.rms_norm(X, W, eps=0.5))
    for eps in (np.float32(0.5), np.float64(0.5), np.asarray(0.5), jnp.asarray(0.5)):
        y = assert_type(xr.rms_norm(X, W, eps=eps), jax.Array)
        np.testing.assert_array_equal(np.asarray(y), reference)
        y = assert_type(xr.rms_norm_inplace(X, W, eps=eps), jax.Array)
        np.testing.assert_array_equal(np.asarray(y), reference)


def test_rms_norm_rejects_what_is_not_an_array_or_a_float() -> None:
    with pytest.raises(TypeError, match=r"^rms_norm: x: expected a float array, got NoneType$"):
        xr.rms_norm(None, W)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^rms_norm: eps: expected a Python float >= 0, got str$"):
        xr.rms_norm(X, W, eps="1e-5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^rms_norm_inplace: weight: expected a float array, got str$"):
        xr.rms_norm_inplace(X, "w")  # type: ignore[arg-type]


def test_rms_norm_module_types() -> None:
    assert isinstance(assert_type(rms_norm_module.bwd_workspace_rows(17), int), int)
