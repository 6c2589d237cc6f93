"""A declared op (``binding.op``) given an operand of a dtype the declarations'
notation has no name for (float8, float4, int4, ...): a TypeError before lowering
in the handler's own words, naming the target, the operand, the dtypes it takes
and the one got, as for any other dtype it does not take."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs
from xla_ffi_rs import binding, examples

DECLS = xla_ffi_rs.declarations()
examples.register()
OPS = binding.ops(DECLS, rms_norm_fwd={}, kepler={}, scale={})
F32 = np.ones(4, np.float32)

#: (target, operand as the message names it, dtypes taken, call with the value there)
CALLS: list[tuple[str, str, str, Callable[[Any], Any]]] = [
    (
        "xla_ffi_rs.rms_norm_fwd",
        "operand 0 (x)",
        "float16, bfloat16, float32 or float64",
        lambda v: OPS["rms_norm_fwd"](v, F32, eps=1e-5),
    ),
    (
        "xla_ffi_rs.rms_norm_fwd",
        "operand 1 (weight)",
        "float16, bfloat16, float32 or float64",
        lambda v: OPS["rms_norm_fwd"](np.ones((2, 4), np.float32), v, eps=1e-5),
    ),
    ("xla_ffi_rs.kepler", "operand 1 (eccentricity)", "float32 or float64", lambda v: OPS["kepler"](F32, v)),
    ("xla_ffi_rs.examples.scale", "operand 0 (x)", "float32", lambda v: OPS["scale"](v, factor=2.0)),
]


# Was "operand 0 (x): unknown dtype 'float8_e4m3fn'": no dtype taken named.
@pytest.mark.parametrize(
    "dtype",
    [getattr(jnp, n) for n in ("float8_e4m3fn", "float8_e5m2", "float4_e2m1fn", "int4", "uint4") if hasattr(jnp, n)],
    ids=lambda d: jnp.dtype(d).name,
)
@pytest.mark.parametrize(("target", "operand", "taken", "call"), CALLS, ids=[c[0] + "-" + c[1] for c in CALLS])
def test_dtypes_without_a_name_in_the_notation_are_refused_naming_the_dtypes_taken(
    dtype: Any, target: str, operand: str, taken: str, call: Callable[[Any], Any]
) -> None:
    got = jnp.dtype(dtype).name
    pattern = rf"^{re.escape(target)}: {re.escape(operand)}: expected dtype {re.escape(taken)}, got {got}(\n|$)"
    value = jnp.ones(4, dtype)
    for f in (call, jax.jit(call)):
        with pytest.raises(TypeError, match=pattern):
            f(value)
    if jax.dtypes.itemsize_bits(dtype) >= 8:  # a NumPy array holds it (ml_dtypes)
        with pytest.raises(TypeError, match=pattern):
            call(np.ones(4, dtype))


def test_the_same_words_as_the_native_check_for_a_dtype_with_a_name() -> None:
    for value, got in ((np.ones(4, np.int8), "int8"), (np.ones(4, np.complex64), "complex64")):
        with pytest.raises(
            TypeError,
            match=rf"^xla_ffi_rs.kepler: operand 1 \(eccentricity\): expected dtype "
            rf"float32 or float64, got {got}(\n|$)",
        ):
            OPS["kepler"](F32, value)


@pytest.mark.parametrize("x64", [False, True])
def test_a_python_number_is_an_array_of_the_default_dtype_as_in_lax(x64: bool) -> None:
    # docs/binding.md: not weakly typed, so the declared rule promotes a float16 x with it.
    x = np.random.default_rng(0).normal(size=(2, 4)).astype(np.float16)
    default = np.float64 if x64 else np.float32
    with jax.enable_x64(x64):
        y, inv = OPS["rms_norm_fwd"](x, 2.0, eps=1e-5)
        assert y.dtype == default and inv.dtype == default
        xf = x.astype(np.float64)
        ref = xf / np.sqrt(xf**2 + 1e-5) * 2.0  # a scalar weight normalizes each element by itself
        np.testing.assert_allclose(np.asarray(y, np.float64), ref, rtol=2e-3, atol=2e-3)
        m = np.ones((), np.float32)
        if not x64:  # 0.3 is float32, as m is
            assert OPS["kepler"](m, 0.3)[0].dtype == np.float32
            return
        with pytest.raises(TypeError, match=r"^xla_ffi_rs.kepler: operand 1 \(eccentricity\): .*got float64"):
            OPS["kepler"](m, 0.3)
