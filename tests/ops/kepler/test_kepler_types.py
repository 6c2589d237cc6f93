"""xr.kepler's public types, checked by mypy --strict and run by pytest (see
tests/test_public_types.py: each ``assert_type`` states the type mypy must infer,
each ``# type: ignore[arg-type]`` a call mypy must reject, which raises TypeError)."""

from __future__ import annotations

from typing import assert_type

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr
from xla_ffi_rs.ops import kepler as kepler_module


def test_kepler_types() -> None:
    sin_e, cos_e = assert_type(xr.kepler(jnp.zeros(3), 0.3), tuple[jax.Array, jax.Array])
    assert isinstance(sin_e, jax.Array) and isinstance(cos_e, jax.Array)
    # Every kind of jax.typing.ArrayLike: NumPy arrays and scalars, Python numbers.
    for s, c in (xr.kepler(np.zeros(3), np.float32(0.3)), xr.kepler(1, 0.5), xr.kepler(0.5, np.zeros(2))):
        assert isinstance(s, jax.Array) and isinstance(c, jax.Array)


def test_kepler_rejects_what_is_not_an_array() -> None:
    # mypy accepted this call while the parameters were typed Any.
    with pytest.raises(
        TypeError, match=r"^kepler: mean_anomaly: expected a real array \(floats or integers\), got str$"
    ):
        xr.kepler("abc", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^kepler: mean_anomaly: .*, got str$"):
        xr.kepler("abc", 0.3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^kepler: eccentricity: .*, got NoneType$"):
        xr.kepler(0.5, None)  # type: ignore[arg-type]


def test_kepler_module_types() -> None:
    s, c = assert_type(kepler_module.kepler_jnp(jnp.zeros(2), jnp.zeros(2)), tuple[jax.Array, jax.Array])
    assert isinstance(s, jax.Array) and isinstance(c, jax.Array)
