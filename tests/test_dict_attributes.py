"""Dictionary attributes (declared ``dict``: a Rust ``Attr<Dict>`` or an
``xla_ffi::attributes!`` struct) through ``binding.op``: lowered as an FFI
dictionary with each value's type kept, under ``jit`` and ``vmap``; a value no FFI
dictionary holds is refused before lowering, naming the target, the attribute and
the key. The handler checks the keys (``crates/xla-ffi/tests/attributes.rs``)."""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest

from test_attribute_values import lowered_op, lowered_text

DICT = lowered_op("dict")


def attribute_text(line: str) -> str:
    found = re.search(r"mhlo.backend_config = \{a = (\{.*\})\}, operand_layouts", line)
    assert found, line
    return found.group(1)


def test_a_dict_is_lowered_with_each_value_typed_as_the_handler_reads_it() -> None:
    value = {
        "gain": 2.0,
        "n": 3,
        "on": True,
        "name": "x",
        "ids": [1, 2],
        "w": np.array([1.5], np.float32),
        "half": np.float32(0.5),
        "inner": {"k": 1.5},
    }
    text = attribute_text(lowered_text(DICT, value))
    assert "gain = 2.000000e+00 : f64" in text
    assert "n = 3 : i64" in text
    assert "on = true" in text
    assert 'name = "x"' in text
    assert "ids = dense<[1, 2]> : tensor<2xi64>" in text
    assert "w = dense<1.500000e+00> : tensor<1xf32>" in text
    assert "half = 5.000000e-01 : f32" in text
    assert "inner = {k = 1.500000e+00 : f64}" in text


def test_a_dict_passes_through_vmap_and_an_empty_one_is_kept() -> None:
    text = jax.jit(jax.vmap(lambda x: DICT(x, a={"g": 1.0})[0])).lower(np.ones((3, 2), np.float32)).as_text()
    assert "a = {g = 1.000000e+00 : f64}" in text
    assert "a = {}" in lowered_text(DICT, {})


@pytest.mark.parametrize(
    ("value", "error", "words"),
    [
        (1.0, TypeError, "attribute 'a': expected a dict, got float"),
        ([("g", 1.0)], TypeError, "attribute 'a': expected a dict, got list"),
        ({1: 2.0}, TypeError, "attribute 'a': expected str keys, got the key 1 (int)"),
        (
            {"g": None},
            TypeError,
            "attribute 'a'['g']: expected a bool, int, float, str, 1-D sequence of numbers or dict, got NoneType",
        ),
        (
            {"g": object()},
            TypeError,
            "attribute 'a'['g']: expected a bool, int, float, str, 1-D sequence of numbers or dict, got object",
        ),
        ({"g": ["a", "b"]}, TypeError, "attribute 'a'['g']: expected a 1-D sequence of numbers, got list of <U1"),
        (
            {"g": np.ones((2, 2))},
            TypeError,
            "attribute 'a'['g']: expected a 1-D sequence of numbers, got ndarray of float64",
        ),
        (
            {"g": {"h": 2**64}},
            ValueError,
            "attribute 'a'['g']['h']: expected an int that fits in int64, got 18446744073709551616",
        ),
    ],
    ids=["scalar", "pairs", "int_key", "none", "object", "strings", "2d", "nested_int_beyond_int64"],
)
def test_a_value_no_ffi_dictionary_holds_is_refused_before_lowering(value, error, words) -> None:
    with pytest.raises(error, match=re.escape(f"test.attribute_values: {words}")):
        lowered_text(DICT, value)


def test_a_traced_value_in_a_dict_is_refused() -> None:
    advice = r"a static argument under jax\.jit; under jax\.pmap, pass it positionally with static_broadcasted_argnums"
    with pytest.raises(TypeError, match=rf"attribute 'a'\['g'\] is traced .*\({advice}\), or close over it"):
        jax.jit(lambda x, g: DICT(x, a={"g": g})[0]).lower(np.ones(2, np.float32), 1.0)
