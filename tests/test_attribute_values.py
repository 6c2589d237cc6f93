"""Attribute values at the edge of their declared types (``binding.op``), and
values no FFI attribute holds (``binding.Op``): refused
before lowering with the target, the attribute, what was expected and what was
got, or passed on exactly; never rounded, wrapped or read as another type."""

from __future__ import annotations

import copy
import re
import sys
from typing import Any

import jax
import numpy as np
import pytest

import xla_ffi_rs
from xla_ffi_rs import binding, examples
from xla_ffi_rs.binding.declaration import Declaration

examples.register()
DECLS = xla_ffi_rs.declarations()
SCALE = binding.op(DECLS["xla_ffi_rs.examples.scale"])  # factor: f32
FWD = binding.op(DECLS["xla_ffi_rs.rms_norm_fwd"])  # eps: f64


def lowered_op(kind: str) -> binding.Op:
    """The scale example's declaration with one attribute ``a`` of type ``kind``,
    for a target name that is only lowered (never compiled)."""
    d = copy.deepcopy(DECLS["xla_ffi_rs.examples.scale"])
    d.update(target="test.attribute_values", linear=[], transpose=None)
    d["attributes"] = [{"name": "a", "type": kind, "optional": False, "enum": None}]
    return binding.op(d, targets={"cpu": "test.attribute_values"})


def lowered_text(op: binding.Op, value: object) -> str:
    text = jax.jit(lambda x: op(x, a=value)[0]).lower(np.ones(2, np.float32)).as_text()
    (line,) = [line for line in text.splitlines() if "test.attribute_values" in line]
    return line


@pytest.mark.parametrize(
    ("call", "value", "width"),
    [
        (lambda v: SCALE(np.ones(2, np.float32), factor=v), 2**24 + 1, "float32"),
        (lambda v: SCALE(np.ones(2, np.float32), factor=v), np.int64(-(2**24) - 1), "float32"),
        (lambda v: FWD(np.ones((2, 3)), np.ones(3), eps=v), 2**53 + 1, "float64"),
        (lambda v: FWD(np.ones((2, 3)), np.ones(3), eps=v), np.uint64(2**64 - 1), "float64"),
    ],
    ids=["f32_int", "f32_numpy_int", "f64_int", "f64_uint64"],
)
def test_an_integer_the_float_type_cannot_hold_is_refused_not_rounded(call, value, width) -> None:
    with pytest.raises(ValueError, match=rf"attribute '(factor|eps)': expected a float .* got integer {int(value)}, "):
        call(value)
    with pytest.raises(ValueError, match=rf"not exactly a {width}"):
        call(value)


def test_integers_the_float_type_holds_are_passed_exactly() -> None:
    x = np.ones(2, np.float32)
    np.testing.assert_array_equal(SCALE(x, factor=2**24)[0], np.full(2, 2.0**24, np.float32))
    np.testing.assert_array_equal(SCALE(x, factor=np.int8(-3))[0], np.full(2, -3.0, np.float32))
    bits = f"0x{np.float64(2**53).view(np.uint64):X}"
    assert re.findall(r"eps = [^,}]*", lowered_text_fwd(2**53)) == [f"eps = {bits} : f64"]


def lowered_text_fwd(eps: object) -> str:
    return jax.jit(lambda x, w: FWD(x, w, eps=eps)[0]).lower(np.ones((2, 3)), np.ones(3)).as_text()


@pytest.mark.parametrize("value", [10**400, -(10**400)], ids=["positive", "negative"])
def test_an_integer_beyond_float64_is_a_value_error_not_an_overflow_error(value) -> None:
    with pytest.raises(
        ValueError, match=r"rms_norm_fwd: attribute 'eps': expected a float \(f64\), got an integer beyond"
    ):
        lowered_text_fwd(value)


@pytest.mark.parametrize(
    ("kind", "value"),
    [("array<i32>", [1, True]), ("array<f32>", (np.bool_(False), 2.0)), ("array<f64>", [0.5, np.True_])],
)
def test_a_bool_among_numbers_is_refused_not_read_as_0_or_1(kind, value) -> None:
    op = lowered_op(kind)
    with pytest.raises(
        TypeError, match=rf"test\.attribute_values: attribute 'a': expected a 1-D sequence of {kind[6:-1]}, got a bool"
    ):
        lowered_text(op, value)
    assert "a = dense<[1, 2]> : tensor<2xi32>" in lowered_text(lowered_op("array<i32>"), [1, 2])


@pytest.mark.parametrize("value", [2**63, 2**64 - 1, np.uint64(2**64 - 1)], ids=["2**63", "2**64-1", "np.uint64"])
def test_a_u64_beyond_int64_reaches_the_handler_whole(value) -> None:
    # JAX's own conversion of a np.uint64 beyond int64 raised RuntimeError: std::bad_cast.
    assert f"a = {int(value)} : ui64" in lowered_text(lowered_op("u64"), value)
    # The demo handler reads its delay_ms as i64: its refusal shows the value it got.
    examples.register_async()
    d = copy.deepcopy(DECLS["xla_ffi_rs.examples.scale"])
    d.update(target="xla_ffi_rs.demo.sleep_scale", linear=[], transpose=None)
    d["attributes"] = [{"name": "delay_ms", "type": "u64", "optional": False, "enum": None}]
    sleep = binding.op(d, targets={"cpu": "xla_ffi_rs.demo.sleep_scale"})
    with pytest.raises(
        jax.errors.JaxRuntimeError, match=rf"sleep_scale: attribute `delay_ms`: {int(value)} does not fit"
    ):
        sleep(np.ones(2, np.float32), delay_ms=value)


@pytest.mark.parametrize(
    ("value", "error", "words"),
    [
        (2**63, ValueError, "expected an integer that fits in int64 (a np.uint64 for a u64), got 9223372036854775808"),
        (-(2**63) - 1, ValueError, "expected an integer that fits in int64"),
        (None, TypeError, "expected a number, bool, str, NumPy array or dict of them, got NoneType"),
        (object(), TypeError, "got object"),
    ],
    ids=["int_beyond_int64", "int_below_int64", "None", "object"],
)
def test_an_undeclared_op_names_the_target_and_attribute_jax_cannot_convert(value, error, words) -> None:
    examples.register_async()
    op = binding.Op("sleepy", abstract_eval=lambda x, **p: [x], targets={"cpu": "xla_ffi_rs.demo.sleep_scale"})
    x = np.ones(2, np.float32)
    for call in (lambda: op(x, delay_ms=value), lambda: jax.jit(lambda x: op(x, delay_ms=value))(x)):
        with pytest.raises(error) as info:
            call()
        assert "xla_ffi_rs.demo.sleep_scale: attribute 'delay_ms': " in str(info.value)
        assert words in str(info.value)
    np.testing.assert_array_equal(op(x, delay_ms=np.uint64(0))[0], 2 * x)  # a value it takes


@pytest.mark.parametrize(
    ("kind", "value", "words"),
    [
        ("array<f64>", [2**53 + 1, 0.5], "got integer 9007199254740993, not exactly a float64"),
        ("array<f64>", (0.5, np.int64(-(2**53) - 1)), "got integer -9007199254740993, not exactly a float64"),
        ("array<f32>", (2**24 + 1, 0.5), "got integer 16777217, not exactly a float32"),
    ],
    ids=["f64_list", "f64_tuple_numpy_int", "f32_tuple"],
)
def test_an_integer_in_a_float_array_is_refused_not_rounded(kind, value, words) -> None:
    # np.asarray([2**53 + 1, 0.5]) is float64 [2**53, 0.5]: the element must be
    # checked before NumPy makes one dtype of the list, as a scalar attribute is.
    index = next(i for i, v in enumerate(value) if isinstance(v, (int, np.integer)))
    with pytest.raises(ValueError, match=rf"test\.attribute_values: attribute 'a' element {index}: expected a float"):
        lowered_text(lowered_op(kind), value)
    with pytest.raises(ValueError, match=re.escape(words)):
        lowered_text(lowered_op(kind), value)


def test_integers_a_float_array_holds_are_passed_exactly() -> None:
    line = lowered_text(lowered_op("array<f64>"), [2**53, np.int64(-3), np.float32(0.5)])
    bits = f"0x{np.float64(2**53).view(np.uint64):X}"
    assert f"a = dense<[{bits}, -3.000000e+00, 5.000000e-01]> : tensor<3xf64>" in line


@pytest.mark.parametrize(
    ("kind", "value", "error", "words"),
    [
        ("array<i64>", [2**63, -1], ValueError, "element 0: expected an integer in [-9223372036854775808, "),
        ("array<u8>", [255, 256], ValueError, "element 1: expected an integer in [0, 255] (u8), got 256"),
        ("array<f64>", [0.5, 10**400], ValueError, "element 1: expected a float (f64), got an integer beyond"),
        ("array<f64>", [[1.0, 2.0]], TypeError, "expected a 1-D sequence of f64, got a nested list at element 0"),
        ("array<f64>", [1.5, np.ones(2)], TypeError, "got a nested ndarray at element 1"),
        ("array<f64>", [0.5, "1"], TypeError, "element 1: expected a float (f64), got str"),
        ("array<bool>", [True, 1], TypeError, "element 1: expected a bool, got int"),
        ("array<f64>", np.array([0, 2**53 + 1]), ValueError, "element 1: expected a float (f64), got integer"),
        ("array<i32>", np.array([1.0, 2.5]), TypeError, "element 0: expected an integer (i32), got float"),
    ],
    ids=[
        "i64_beyond",
        "u8_beyond",
        "f64_huge_int",
        "nested_list",
        "nested_array",
        "str",
        "int_for_bool",
        "f64_ndarray",
        "i32_float_ndarray",
    ],
)
def test_a_bad_element_of_an_array_attribute_is_named(kind, value, error, words) -> None:
    with pytest.raises(error, match=r"test\.attribute_values: attribute 'a'") as info:
        lowered_text(lowered_op(kind), value)
    assert words in str(info.value)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ([1.0, 2.0], "expected a hashable value (a number, bool, str or a tuple of them), got list; pass a tuple"),
        (np.ones(2, np.float32), "got ndarray; pass a tuple"),
        ({"a": 1}, "got dict"),
    ],
    ids=["list", "ndarray", "dict"],
)
def test_an_undeclared_op_names_the_target_and_attribute_jax_cannot_hash(value, words) -> None:
    # JAX's own words were "unhashable type: 'list'", naming neither.
    op = binding.Op("raw_scale", abstract_eval=lambda x, **p: [x], targets={"cpu": "xla_ffi_rs.examples.scale"})
    x = np.ones(2, np.float32)
    for call in (lambda: op(x, factor=value), lambda: jax.jit(lambda x: op(x, factor=value)[0])(x)):
        with pytest.raises(TypeError, match=r"^xla_ffi_rs\.examples\.scale: attribute 'factor': ") as info:
            call()
        assert words in str(info.value)


def test_an_undeclared_op_names_the_target_and_a_traced_attribute() -> None:
    # JAX's words named the primitive and the param, but not the target, nor what to do.
    op = binding.Op("raw_scale", abstract_eval=lambda x, **p: [x], targets={"cpu": "xla_ffi_rs.examples.scale"})
    x = np.ones(2, np.float32)
    with pytest.raises(
        TypeError,
        match=r"^xla_ffi_rs\.examples\.scale: attribute .factor. is traced .*a static argument under jax\.jit; "
        r"under jax\.pmap, pass it positionally with static_broadcasted_argnums\), or close over it",
    ):
        jax.jit(lambda x, f: op(x, factor=f)[0])(x, np.float32(2.0))
    with pytest.raises(TypeError, match=r"attribute .factor. is traced .*static_broadcasted_argnums"):
        jax.pmap(lambda x, f: op(x, factor=f)[0], in_axes=(0, None))(x[None], np.float32(2.0))
    pmapped = jax.pmap(lambda x, f: op(x, factor=f)[0], in_axes=(0, None), static_broadcasted_argnums=1)
    assert np.array_equal(pmapped(x[None], np.float32(2.0))[0], 2 * x)  # the spelling the message gives
    assert np.array_equal(op(x, factor=np.float32(2.0))[0], 2 * x)


def test_a_str_utf8_cannot_encode_is_named_not_called_a_wrong_type() -> None:
    # JAX's conversion refused it as "expected a number, bool, str, ... got str".
    words = (
        r"attribute '(a|factor)': expected a str UTF-8 can encode, got one with the lone surrogate '\\udcff' at index 2"
    )
    with pytest.raises(ValueError, match=r"^test\.attribute_values: " + words):
        lowered_text(lowered_op("str"), "ab\udcff")
    op = binding.Op("raw_scale", abstract_eval=lambda x, **p: [x], targets={"cpu": "xla_ffi_rs.examples.scale"})
    with pytest.raises(ValueError, match=r"^xla_ffi_rs\.examples\.scale: " + words):
        jax.jit(lambda x: op(x, factor="ab\udcff")[0]).lower(np.ones(2, np.float32))
    # A NUL and non-ASCII text are passed whole (MLIR's escapes), not cut or refused.
    assert 'a = "a\\00b\\C3\\A9"' in lowered_text(lowered_op("str"), "a\x00bé")


@pytest.mark.parametrize(
    "value",
    [np.array(2.5), np.array(2.5, np.float32), jax.numpy.asarray(2.5), jax.numpy.asarray(2.5, "bfloat16"), np.array(3)],
    ids=["np_f64", "np_f32", "jnp_f32", "jnp_bf16", "np_int"],
)
def test_a_concrete_0d_array_attribute_is_its_value(value) -> None:
    # A layer's attribute (flax, equinox) can arrive as a 0-d array; an element of an
    # array attribute already could. Compared with NumPy: y = factor * x.
    x = np.arange(3.0, dtype=np.float32)
    want = float(value) * x
    np.testing.assert_array_equal(SCALE(x, factor=value)[0], want)
    np.testing.assert_array_equal(jax.jit(lambda x: SCALE(x, factor=value)[0])(x), want)


@pytest.mark.parametrize(
    ("value", "error", "words"),
    [
        (np.array(True), TypeError, "expected a float (f32), got bool"),
        (np.array([2.5]), TypeError, "expected a float (f32), got ndarray"),
        (np.array(2**24 + 1), ValueError, "got integer 16777217, not exactly a float32"),
        (np.array(1e39), ValueError, "expected a float in the f32 range, got 1e+39"),
    ],
    ids=["bool", "1-d", "int_not_exact", "beyond_f32"],
)
def test_a_0d_array_attribute_is_checked_as_its_value(value, error, words) -> None:
    with pytest.raises(error, match=r"^xla_ffi_rs\.examples\.scale: attribute 'factor': ") as info:
        SCALE(np.ones(2, np.float32), factor=value)
    assert words in str(info.value)


# -- long array attributes: whole-array checks, the element checks' results ------

_F32_MAX = float(np.finfo(np.float32).max)
#: Values of array attributes, each form with at most one kind of element a type refuses.
_FORMS: dict[str, Any] = {
    "floats": [0.0, -0.0, 1.5, float("nan"), float("inf"), -_F32_MAX, 1e-45],
    "floats_f32_rounds_to_0": [0.5, 1e-46],
    "floats_beyond_f32": [0.5, 3.5e38],
    "ints": [0, -1, 127, -128],
    "ints_beyond_i8": [1, -129],
    "ints_beyond_u8": [255, 256],
    "ints_f32_holds": [2**24, -(2**24), 3],
    "ints_f32_rounds": [2, 2**24 + 1],
    "ints_f64_rounds": [2, 2**53 + 1],
    "ints_i64_edges": [2**63 - 1, -(2**63)],
    "ints_beyond_i64": [2**64 - 1],
    "bools": (True, False),
    "f16": np.array([0.0, -0.0, 65504.0, np.inf], np.float16),
    "f32": np.array([1e-45, -0.0, np.nan, _F32_MAX], np.float32),
    "f64": np.array([0.5, -0.0, np.nan, -np.inf, 1e300]),
    "f64_f32_rounds_to_0": np.array([0.5, 1e-46]),
    "f64_beyond_f32": np.array([3.5e38]),
    "i8": np.array([-128, 127], np.int8),
    "i64": np.array([2**24, -(2**24), 255, -1]),
    "i64_f32_rounds": np.array([2**24 + 1]),
    "i64_f64_rounds": np.array([2**53 + 1, 0]),
    "i64_beyond_i32": np.array([2**31]),
    "u64": np.array([0, 2**64 - 1], np.uint64),
    "bool": np.array([True, False]),
}


_FLOAT_IO = [{"name": "x", "dims": ["n"], "dtype": None, "dtypes": ["float32"], "optional": False}]


def _declared(kind: str) -> dict[str, Any]:
    """A declaration of ``x -> y`` (float32 vectors) with one attribute ``a`` of type ``kind``."""
    attributes = [{"name": "a", "type": kind, "optional": False, "enum": None}]
    return {"target": "t", "operands": _FLOAT_IO, "results": _FLOAT_IO, "attributes": attributes, "shapes": "n -> n"}


def _outcome(call: Any) -> Any:
    """``call()``'s values as (type, repr) pairs, or its error as (type, message)."""
    try:
        return [(type(v), repr(v)) for v in call()]
    except (TypeError, ValueError) as e:
        return type(e), str(e)


@pytest.mark.parametrize("inner", ["f32", "f64", "i8", "u8", "i32", "i64", "u64", "bool"])
def test_an_array_attribute_is_checked_as_its_elements_would_be_one_by_one(inner) -> None:
    """Each element of an ``array<inner>`` attribute (up to the first it refuses) is
    what it is as a scalar ``inner`` attribute: the same Python value, or the same
    error, named as that element; whether the array is checked whole or not."""
    for form, value in _FORMS.items():
        _check_as_elements(inner, form, value)


def _check_as_elements(inner: str, form: str, value: Any) -> None:
    array, scalar = Declaration(_declared(f"array<{inner}>")), Declaration(_declared(inner))
    want: list[Any] = []
    refused = None  # (index, error type, message) of the first element refused
    for i, v in enumerate(np.asarray(value).tolist() if isinstance(value, np.ndarray) else value):
        one = _outcome(lambda v=v: [scalar.params({"a": v})["a"]])
        if not isinstance(one, list):
            refused = (i, *one)
            break
        want += one
    got = _outcome(lambda: array.params({"a": value})["a"])
    if refused is None:
        assert got == want, form
        return
    assert not isinstance(got, list), (form, got, refused)
    i, error, message = refused
    # Refused whole (a bool among numbers, floats for an integer type), or at that element.
    whole = got[1].startswith("t: attribute 'a': expected a 1-D sequence of")
    at_element = got[1] == message.replace("t: attribute 'a': ", f"t: attribute 'a' element {i}: ")
    assert got[0] is error and (whole or at_element), (form, got, refused)


@pytest.mark.parametrize(
    ("kind", "values"),
    [
        ("array<f32>", lambda n: np.linspace(-1.0, 1.0, n, dtype=np.float32)),
        ("array<f64>", lambda n: [float(i) for i in range(n)]),
        ("array<i64>", lambda n: tuple(range(n))),
    ],
    ids=["f32_ndarray", "f64_list", "i64_tuple"],
)
def test_a_long_array_attribute_costs_no_python_call_per_element(kind, values) -> None:
    """A table of 20,000 values as an attribute: each call checks and keys it with
    whole-array operations (per element, some ten Python calls made a 10^5-value
    table cost seconds per eager call), so a call makes as many Python calls as with
    ten values."""
    op = binding.op(
        _declared(kind),
        jnp_impl=lambda x, *, a: (x + np.float32(len(a)),),
        targets={},
    )
    x = np.ones(2, np.float32)
    counts = []
    for n in (10, 20_000):
        a = values(n)
        np.testing.assert_array_equal(op(x, a=a)[0], x + n)  # compiles this set of params
        calls = [0]

        def count(frame: Any, event: str, arg: Any, calls: list[int] = calls) -> None:
            calls[0] += event == "call"

        sys.setprofile(count)
        try:
            op(x, a=a)
        finally:
            sys.setprofile(None)
        counts.append(calls[0])
    assert counts[1] <= counts[0] + 10, counts
