"""Operands committed to different devices: an eager call is refused by JAX, and
its error names the op called (it named ``_binder.<locals>.bind``, the package's
internal function), so a user can tell which call it was."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr
from xla_ffi_rs import python_op


def on(device: int, x: Any) -> jax.Array:
    return jax.device_put(x, jax.devices()[device])


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: xr.kepler(on(3, jnp.linspace(0.0, 1.0, 4)), on(1, jnp.full(4, 0.3))), "kepler"),
        (lambda: xr.rms_norm(on(2, jnp.ones((2, 4))), on(5, jnp.ones(4))), "rms_norm_fwd"),
        (
            lambda: python_op(np.add, abstract_eval=lambda a, b: a, name="add_on_devices")(
                on(3, jnp.ones(4)), on(1, jnp.ones(4))
            ),
            "add_on_devices",
        ),
    ],
    ids=["kepler", "rms_norm", "python_op"],
)
def test_operands_on_different_devices_name_the_op(call: Any, name: str) -> None:
    with pytest.raises(ValueError, match="incompatible devices") as info:
        call()
    assert f"argument operands[0] of {name} with shape" in str(info.value)
    assert "_binder" not in str(info.value)


def test_operands_on_one_other_device_run_there() -> None:
    m = on(3, jnp.linspace(0.0, 1.0, 4))
    s, c = xr.kepler(m, 0.3)
    assert s.devices() == {jax.devices()[3]}
    e = np.arcsin(np.asarray(s, np.float64))
    np.testing.assert_allclose(e - 0.3 * np.sin(e), np.linspace(0.0, 1.0, 4), atol=1e-6)
    np.testing.assert_allclose(np.asarray(c), np.cos(e), atol=1e-6)
