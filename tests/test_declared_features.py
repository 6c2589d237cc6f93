"""binding.op with the declaration forms of optional operands (`?` specs) and enum
attributes, on hand-written declaration dicts lowered with jnp (the real targets:
examples/plugin/test_features.py): Python's checks before lowering, and the
native checker (`binding.infer`) with and without the optional operand."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xla_ffi_rs import binding


def _buf(name, dims, optional=False):
    return {"name": name, "optional": optional, "dtypes": ["float32", "float64"], "dims": dims, "dtype": "T"}


BIAS = {
    "target": "demo.add_bias",
    "operands": [_buf("x", ["...b", "n"]), _buf("bias", ["n"], optional=True)],
    "results": [_buf("y", ["...b", "n"])],
    "attributes": [],
    "shapes": "...b n, n? -> ...b n",
    "dtypes": "T, T? -> T",
    "batch": "b",
    "linear": [],
    "transpose": None,
}

REDUCE = {
    "target": "demo.reduce",
    "operands": [_buf("x", ["...b", "n"])],
    "results": [_buf("y", ["...b"])],
    "attributes": [
        {
            "name": "mode",
            "type": "i64",
            "optional": False,
            "enum": {"name": "Mode", "values": [("Sum", 0), ("Max", 1), ("Mean", 7)]},
        },
        {"name": "wide", "type": "i64", "optional": True, "enum": {"name": "Wide", "values": [("High", 2**64 - 1)]}},
    ],
    "shapes": "...b n -> ...b",
    "dtypes": "T -> T",
    "batch": "b",
    "linear": [],
    "transpose": None,
}

#: None where an operand goes (an optional one left out); typed Any for mypy,
#: as binding.Op's operands are typed as arrays.
NONE: Any = None

SEEN: list[tuple] = []


def _add_bias_jnp(x, bias=None):
    SEEN.append(("add_bias", 1 if bias is None else 2))
    return (x if bias is None else x + bias,)


def _reduce_jnp(x, *, mode, wide=None):
    SEEN.append(("reduce", mode, wide))
    return ({0: x.sum(-1), 1: x.max(-1), 7: x.mean(-1)}[mode],)


ADD_BIAS = binding.op(BIAS, targets={}, jnp_impl=_add_bias_jnp)
REDUCE_OP = binding.op(REDUCE, targets={}, jnp_impl=_reduce_jnp)


def test_infer_with_and_without_the_optional_operand():
    assert binding.infer(BIAS, [(2, 3), (3,)], ["float32", "float32"]) == ([((2, 3), "float32")], 1)
    assert binding.infer(BIAS, [(2, 3)], ["float32"]) == ([((2, 3), "float32")], 1)
    with pytest.raises(ValueError, match=r"demo.add_bias: operand 1 \(bias\): expected shape \[3\] .*got \[4\]"):
        binding.infer(BIAS, [(2, 3), (4,)], ["float32", "float32"])
    with pytest.raises(ValueError, match=r"expected 1 to 2 operands \(`bias` optional\) \(x, bias\), got 0 shapes"):
        binding.infer(BIAS, [], [])


def test_an_optional_operand_left_out_or_none_is_not_bound():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([10, 20, 30], np.float32)
    SEEN.clear()
    np.testing.assert_array_equal(jax.jit(lambda x, b: ADD_BIAS(x, b)[0])(x, b), x + b)
    np.testing.assert_array_equal(jax.jit(lambda x: ADD_BIAS(x)[0])(x), x)
    np.testing.assert_array_equal(jax.jit(lambda x: ADD_BIAS(x, NONE)[0])(x), x)
    assert SEEN == [("add_bias", 2), ("add_bias", 1), ("add_bias", 1)]
    # The primitive binds one operand without the bias.
    assert "add_bias" in str(jax.make_jaxpr(lambda x: ADD_BIAS(x, NONE))(x))
    assert len(jax.make_jaxpr(lambda x: ADD_BIAS(x, NONE))(x).eqns[0].invars) == 1
    # vmap, with and without the bias.
    np.testing.assert_array_equal(jax.vmap(lambda r: ADD_BIAS(r, b)[0])(x), x + b)
    np.testing.assert_array_equal(jax.vmap(lambda r: ADD_BIAS(r)[0])(x), x)


def test_none_in_place_of_a_required_operand_raises_type_error():
    with pytest.raises(TypeError, match=r"demo.add_bias: operand 0 \(x\) is None, but it is not optional"):
        ADD_BIAS(NONE, np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"demo.add_bias: expected 1 to 2 operands \(x, bias\?\), got 0"):
        ADD_BIAS()
    with pytest.raises(ValueError, match=r"demo.add_bias: operand 1 \(bias\): expected shape \[3\]"):
        ADD_BIAS(np.ones((2, 3), np.float32), np.ones(2, np.float32))


def test_enum_attribute_by_integer_or_name():
    x = np.array([[1.0, 5.0, 3.0]], np.float32)
    SEEN.clear()
    for mode, want in ((0, 9.0), ("Max", 5.0), (np.int8(7), 3.0), ("Mean", 3.0)):
        np.testing.assert_allclose(REDUCE_OP(x, mode=mode)[0], [want])
    # The name passed on as its integer: "Mean" reuses the compiled call of np.int8(7).
    assert [s[1] for s in SEEN] == [0, 1, 7]
    decl = REDUCE_OP.declaration
    assert decl is not None
    assert decl.params({"mode": "Sum", "wide": "High"}) == {"mode": 0, "wide": 2**64 - 1}
    lowered = decl.lowering_attributes({"mode": 1, "wide": 2**64 - 1})
    assert lowered["mode"].dtype == np.int64 and lowered["wide"].dtype == np.uint64


def test_enum_attribute_refuses_other_values_before_lowering():
    x = np.ones((1, 3), np.float32)
    listed = r"expected enum Mode, one of Sum = 0, Max = 1, Mean = 7 \(the integer or the name as a string\)"
    with pytest.raises(ValueError, match=rf"demo.reduce: attribute 'mode': {listed}, got 2$"):
        REDUCE_OP(x, mode=2)
    with pytest.raises(ValueError, match=rf"demo.reduce: attribute 'mode': {listed}, got 'sum'$"):
        REDUCE_OP(x, mode="sum")
    for bad, what in ((1.0, "float"), (True, "bool"), (np.bool_(True), "bool"), ((0,), "tuple")):
        with pytest.raises(TypeError, match=rf"demo.reduce: attribute 'mode': {listed}, got {what}$"):
            REDUCE_OP(x, mode=bad)
    with pytest.raises(TypeError, match=r"attribute 'mode' \(i64\) is missing"):
        REDUCE_OP(x)
    advice = r"a static argument under jax\.jit; under jax\.pmap, pass it positionally with static_broadcasted_argnums"
    with pytest.raises(TypeError, match=rf"attribute 'mode' \(enum Mode\) is traced .*\({advice}\), or close over it"):
        jax.jit(lambda x, m: REDUCE_OP(x, mode=m))(x, jnp.int32(0))
