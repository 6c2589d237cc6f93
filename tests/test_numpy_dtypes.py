"""NumPy arrays of the dtypes JAX reads specially: those of ml_dtypes (float8, float4,
int4, NumPy kind "V") and those in non-native byte order. Each public function refuses
them with a TypeError naming the function, the argument, the dtypes taken and the one
got, as it does for the same dtype in a JAX array, eager and under jit."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr

W = np.ones(4, np.float32)
KERNEL = "float16, bfloat16, float32 or float64"
REAL = "integers (int8 to int64, uint8 to uint64) or float16, bfloat16, float32 or float64"
NO_KERNEL = [  # those this jax has
    getattr(jnp, n)
    for n in ("float8_e4m3fn", "float8_e4m3b11fnuz", "float8_e5m2fnuz", "float4_e2m1fn", "int4", "uint4")
    if hasattr(jnp, n)
]

#: (name, argument, call of the function with the value as that argument)
CALLS: list[tuple[str, str, Callable[[Any], Any]]] = [
    ("kepler", "mean_anomaly", lambda v: xr.kepler(v, 0.5)),
    ("kepler", "eccentricity", lambda v: xr.kepler(1.0, v)),
    ("rms_norm", "x", lambda v: xr.rms_norm(v, W)),
    ("rms_norm", "weight", lambda v: xr.rms_norm(np.ones((2, 4), np.float32), v[0])),
    ("rms_norm_inplace", "x", lambda v: xr.rms_norm_inplace(v, W)),
    ("rms_norm_inplace", "weight", lambda v: xr.rms_norm_inplace(np.ones((2, 4), np.float32), v[0])),
]
IDS = [f"{name}-{arg}" for name, arg, _ in CALLS]


# A NumPy float8 array was "expected a float array, got an array of float8_e4m3fn"
# (kepler: "expected a real array (floats or integers)"): a float refused as if it were
# none, without the dtypes taken, where a JAX array of it listed them.
@pytest.mark.parametrize("dtype", NO_KERNEL, ids=lambda d: jnp.dtype(d).name)
@pytest.mark.parametrize(("name", "arg", "call"), CALLS, ids=IDS)
def test_numpy_arrays_of_ml_dtypes_list_the_dtypes_taken(
    dtype: Any, name: str, arg: str, call: Callable[[Any], Any]
) -> None:
    taken = REAL if name == "kepler" else KERNEL
    got = jnp.dtype(dtype).name
    pattern = rf"^{name}: {arg}: expected .*{re.escape(taken)}, got {got}(\n|$)"
    value = np.ones((2, 4), dtype)
    for f in (call, jax.jit(call)):
        with pytest.raises(TypeError, match=pattern):
            f(value)
    with pytest.raises(TypeError, match=pattern):  # the same words for a JAX array of it
        call(jnp.asarray(value))


# Was JAX's "Error interpreting argument to stage as a JAX value", naming neither.
@pytest.mark.parametrize("dtype", [">f4", ">f8", ">i4"])
@pytest.mark.parametrize(("name", "arg", "call"), CALLS, ids=IDS)
def test_numpy_arrays_in_non_native_byte_order(dtype: str, name: str, arg: str, call: Callable[[Any], Any]) -> None:
    got = np.dtype(dtype).newbyteorder("=").name
    with pytest.raises(
        TypeError,
        match=rf"^{name}: {arg}: expected .*, got an array of {got} in non-native byte order \({re.escape(dtype)}\)"
        r".*newbyteorder\('='\)",
    ):
        call(np.ones((2, 4), dtype))


LIST_CALLS: list[tuple[str, str, Callable[[Any], Any]]] = [
    ("kepler", "mean_anomaly", lambda v: xr.kepler(v, 0.5)),
    ("kepler", "eccentricity", lambda v: xr.kepler(1.0, v)),
    ("rms_norm", "x", lambda v: xr.rms_norm(v, W)),
    ("rms_norm", "weight", lambda v: xr.rms_norm(np.ones((1, 4), np.float32), v)),
    ("rms_norm_inplace", "x", lambda v: xr.rms_norm_inplace(v, W)),
    ("rms_norm_inplace", "weight", lambda v: xr.rms_norm_inplace(np.ones((1, 4), np.float32), v)),
]


# np.asarray keeps the byte order of a list of one array (of two it converts).
@pytest.mark.parametrize(("name", "arg", "call"), LIST_CALLS, ids=IDS)
def test_a_list_of_an_array_in_non_native_byte_order(name: str, arg: str, call: Callable[[Any], Any]) -> None:
    pattern = rf"^{name}: {arg}: expected .*, got a list of float32 in non-native byte order \(>f4\)"
    with pytest.raises(TypeError, match=pattern):
        call([np.ones(4, ">f4")])


def test_the_suggested_conversion_gives_the_native_result() -> None:
    x = np.random.default_rng(0).normal(size=(3, 4))
    swapped = x.astype(">f8")
    native = swapped.astype(swapped.dtype.newbyteorder("="))
    ref = x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(xr.rms_norm(native, np.ones(4)), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(xr.kepler(native, 0.0)[0], np.sin(x.astype(np.float32)), rtol=1e-5, atol=1e-6)
