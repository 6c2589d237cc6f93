"""Dtypes at the native checker: it names every dtype XLA FFI has by its NumPy,
``ml_dtypes`` and ``jax.numpy`` name (float8, float4, int4, ...), and a declared op
(``binding.op``) or ``binding.infer`` given one an operand does not take raises a
TypeError before lowering in the handler's own words, naming the target, the
operand, the dtypes it takes and the one got; a dtype JAX has and XLA FFI has not
(float6) is refused naming it too."""

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


#: XLA FFI's types beyond NumPy's own (``XLA_FFI_DataType`` in ``c_api.h``, the same
#: in API 0.3 and 0.5), by their ``ml_dtypes``/``jax.numpy`` names.
ML_DTYPES_IN_XLA_FFI = [
    "bfloat16",
    "float8_e5m2",
    "float8_e4m3fn",
    "float8_e4m3b11fnuz",
    "float8_e5m2fnuz",
    "float8_e4m3fnuz",
    "float8_e4m3",
    "float8_e3m4",
    "float8_e8m0fnu",
    "float4_e2m1fn",
    "int4",
    "uint4",
    "int2",
    "uint2",
    "int1",
    "uint1",
]
NUMPY_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
NUMPY_DTYPES += ["float16", "float32", "float64", "complex64", "complex128"]
#: Those the ops here take no operand of (bfloat16 is a float they take).
NOT_TAKEN = [n for n in ML_DTYPES_IN_XLA_FFI if n != "bfloat16" and hasattr(jnp, n)]
#: JAX's dtypes that XLA FFI has no type for.
NOT_IN_XLA_FFI = [n for n in ("float6_e2m3fn", "float6_e3m2fn") if hasattr(jnp, n)]


# Was "operand 0 (x): unknown dtype 'float8_e4m3fn'": no dtype taken named.
@pytest.mark.parametrize("dtype", [getattr(jnp, n) for n in NOT_TAKEN], ids=NOT_TAKEN)
@pytest.mark.parametrize(("target", "operand", "taken", "call"), CALLS, ids=[c[0] + "-" + c[1] for c in CALLS])
def test_dtypes_of_ml_dtypes_are_refused_naming_the_dtypes_taken(
    dtype: Any, target: str, operand: str, taken: str, call: Callable[[Any], Any]
) -> None:
    got = jnp.dtype(dtype).name
    pattern = rf"^{re.escape(target)}: {re.escape(operand)}: expected dtype {re.escape(taken)}, got {got}(\n|$)"
    with pytest.raises(TypeError, match=pattern):
        jax.eval_shape(call, jax.ShapeDtypeStruct((4,), dtype))
    if got == "uint1":
        return  # JAX makes no uint1 array (StableHLO's broadcast_in_dim takes no ui1)
    value = jnp.ones(4, dtype)
    for f in (call, jax.jit(call)):
        with pytest.raises(TypeError, match=pattern):
            f(value)
    if jax.dtypes.itemsize_bits(dtype) >= 8:  # a NumPy array holds it (ml_dtypes)
        with pytest.raises(TypeError, match=pattern):
            call(np.ones(4, dtype))


@pytest.mark.parametrize("name", NOT_TAKEN)
def test_binding_infer_names_each_xla_ffi_dtype(name: str) -> None:
    # The native checker itself, with no Python check before it (was "unknown dtype").
    kepler = DECLS["xla_ffi_rs.kepler"]
    for dtype in (name, jnp.dtype(name)):
        with pytest.raises(TypeError) as e:
            binding.infer(kepler, [(3,), (3,)], [dtype, dtype])
        assert (
            str(e.value)
            == f"xla_ffi_rs.kepler: operand 0 (mean_anomaly): expected dtype float32 or float64, got {name}"
        )
    with pytest.raises(TypeError) as e:
        binding.infer(kepler, [(3,), (3,)], ["float32", name])
    assert str(e.value) == f"xla_ffi_rs.kepler: operand 1 (eccentricity): expected dtype float32 or float64, got {name}"


def _any_dtype(names: list[str]) -> dict[str, Any]:
    """A declaration whose operand takes ``names`` and whose result is of its dtype."""
    return {
        "target": "demo.any",
        "shapes": "...b -> ...b",
        "dtypes": "T -> T",
        "operands": [{"name": "x", "dtypes": names, "dims": ["...b"], "dtype": "T"}],
        "results": [{"name": "y", "dtypes": names, "dims": ["...b"], "dtype": "T"}],
        "attributes": [],
    }


def test_the_native_checker_knows_each_xla_ffi_dtype_by_its_jax_name() -> None:
    names = NUMPY_DTYPES + ML_DTYPES_IN_XLA_FFI
    for name in names:
        if hasattr(jnp, name) or name in NUMPY_DTYPES:
            assert jnp.dtype(name).name == name  # the names are NumPy's and ml_dtypes'
        results, batch = binding.infer(_any_dtype(names), [(2, 3)], [name])
        assert results == [((2, 3), name)] and batch == 2
    # A declaration naming a dtype the checker does not know is refused as such.
    with pytest.raises(
        ValueError, match=r"^demo.any: declaration: operands\[0\] accepts unknown dtype 'float6_e2m3fn'"
    ):
        binding.infer(_any_dtype(["float32", "float6_e2m3fn"]), [(2,)], ["float32"])


@pytest.mark.skipif(not NOT_IN_XLA_FFI, reason="this jax has no dtype XLA FFI lacks")
@pytest.mark.parametrize("name", NOT_IN_XLA_FFI)
def test_a_dtype_jax_has_and_xla_ffi_has_not_is_refused_naming_it(name: str) -> None:
    words = f"got {name}, which XLA FFI has no type for"
    with pytest.raises(TypeError) as e:
        binding.infer(DECLS["xla_ffi_rs.kepler"], [(3,), (3,)], ["float32", name])
    assert str(e.value) == f"xla_ffi_rs.kepler: operand 1 (eccentricity): expected dtype float32 or float64, {words}"
    # An operand that takes every dtype XLA FFI has does not take it either.
    with pytest.raises(TypeError, match=rf"^demo.any: operand 0 \(x\): expected dtype bool, int8, .*, {words}$"):
        binding.infer(_any_dtype(NUMPY_DTYPES + ML_DTYPES_IN_XLA_FFI), [(2,)], [name])
    spec = jax.ShapeDtypeStruct((4,), jnp.dtype(name))
    try:
        value = jnp.ones(4, spec.dtype)
    except jax.errors.JaxRuntimeError:  # jax 0.10's XLA has no such arrays: traced calls only
        value = None
    for target, operand, taken, call in CALLS:
        pattern = rf"^{re.escape(target)}: {re.escape(operand)}: expected dtype {re.escape(taken)}, {words}(\n|$)"
        calls = [lambda call=call: jax.eval_shape(call, spec)]
        if value is not None:
            calls += [lambda call=call: call(value), lambda call=call: jax.jit(call)(value)]
        for f in calls:
            with pytest.raises(TypeError, match=pattern):
                f()


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
