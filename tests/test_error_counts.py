"""Counts in error messages take their noun in the singular for one ("1 operand",
"a tuple of 1 array"): the messages are read by users, and the common mistakes
(one operand too few or too many, one result returned as two) meet the count 1."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from xla_ffi_rs import python_op


def _like(x: jax.Array) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(x.shape, x.dtype)


def test_a_function_returning_two_values_for_a_tuple_of_one_result() -> None:
    op = python_op(lambda x: (x, x), abstract_eval=lambda x: (_like(x),), name="one_of_two")
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.block_until_ready(op(jnp.ones(3)))
    assert str(info.value).endswith(
        "op 'one_of_two': expected the function to return a tuple of 1 array, got 2 values"
    ), str(info.value)


def test_fixed_naming_an_operand_past_a_call_of_one() -> None:
    op = python_op(lambda x: x, abstract_eval=_like, fixed=(2,), name="fixed_past")
    with pytest.raises(
        ValueError, match=r"^fixed_past: fixed=\(2,\) names operand 2, but the op is called with 1 operand$"
    ):
        op(jnp.ones(3))


def test_abstract_eval_that_cannot_take_one_operand() -> None:
    op = python_op(lambda x, y: x, abstract_eval=lambda x, y: _like(x), name="two_taken")
    with pytest.raises(TypeError, match=r"^two_taken: abstract_eval cannot take this call \(1 operand\): "):
        op(jnp.ones(3))
