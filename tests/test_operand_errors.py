"""An operand JAX cannot read as an array (None, a string, an object array, a list,
a Python int beyond the default integer type), passed to a user's own op, raises
before anything is traced or lowered, naming the op, the operand, what was expected
and what was got: for a declared op (`binding.op`), an `Op` built by hand and a
`python_op`. (Without the check JAX's own words named neither: ``Dtype object is not
a valid JAX array type``, an ``OverflowError``.)"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs
from xla_ffi_rs import binding, examples, python_op
from xla_ffi_rs.binding import Op, same_as_operands

BAD: list[tuple[str, Any, str]] = [
    ("object array", np.array([1.0, None]), "an array of objects (NoneType or float)"),
    ("numeric object array", np.array([1.0, 2.0], dtype=object), "an array of objects (float)"),
    ("string array", np.array(["a", "b"]), "an array of str"),
    ("string", "abc", "got str"),
    ("list", [1.0, 2.0], "a list (pass np.asarray"),
    ("dict", {"a": 1.0}, "got dict"),
    # Was "an array of float32, which JAX has no dtype for": float32 is JAX's, its byte order is not.
    ("big-endian array", np.arange(3.0, dtype=">f4"), "an array of float32 in non-native byte order (>f4)"),
    # Was JAX's "Argument 'operands[0]' ... is not a valid JAX type", naming no op.
    ("ShapeDtypeStruct", jax.ShapeDtypeStruct((2, 3), jnp.float32), "got a jax.ShapeDtypeStruct float32[2,3], a shape"),
]


@pytest.fixture(scope="module")
def scale_op() -> Op:
    examples.register()
    return binding.op(xla_ffi_rs.declarations()["xla_ffi_rs.examples.scale"])


def _square() -> Op:
    square = Op("demo_square_operands", abstract_eval=same_as_operands(1), jnp_impl=lambda x: (x * x,))
    return square


def mul(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return x * y


def _pop() -> Any:
    return python_op(mul, abstract_eval=lambda x, y: x)


@pytest.mark.parametrize(("case", "value", "got"), BAD, ids=[b[0] for b in BAD])
def test_declared_op_names_target_and_operand(scale_op: Op, case: str, value: Any, got: str) -> None:
    with pytest.raises(TypeError) as info:
        scale_op(value, factor=2.0)
    msg = str(info.value)
    assert msg.startswith("xla_ffi_rs.examples.scale: operand 0 (x): expected a numeric array"), msg
    assert got in msg, msg


@pytest.mark.parametrize(("case", "value", "got"), BAD, ids=[b[0] for b in BAD])
def test_python_op_names_op_and_operand(case: str, value: Any, got: str) -> None:
    op = _pop()
    with pytest.raises(TypeError) as info:
        op(jnp.ones(2), value)
    msg = str(info.value)
    assert msg.startswith("python_op[mul]: operand 1 (y): expected a numeric array"), msg
    assert got in msg, msg
    with pytest.raises(TypeError, match=r"python_op\[mul\]: operand 1 \(y\)"):
        jax.jit(lambda x: op(x, value))(jnp.ones(2))


def test_op_by_hand_names_op_and_operand() -> None:
    with pytest.raises(TypeError, match=r"demo_square_operands: operand 0: expected a numeric array.*objects"):
        _square()(np.array([None]))


def test_int_beyond_the_default_integer_type_is_a_value_error(scale_op: Op) -> None:
    with pytest.raises(
        ValueError, match=r"xla_ffi_rs\.examples\.scale: operand 0 \(x\):.*Python int 2361183241434822606848"
    ):
        scale_op(2**71, factor=2.0)
    with pytest.raises(ValueError, match=r"python_op\[mul\]: operand 0 \(x\):.*Python int"):
        _pop()(2**71, jnp.ones(()))


def test_readable_operands_still_run(scale_op: Op) -> None:
    """NumPy arrays, NumPy scalars, Python numbers, bfloat16 and float8 arrays pass the
    check (their dtypes are the ops' own checks)."""
    np.testing.assert_allclose(scale_op(np.arange(3.0, dtype=np.float32), factor=2.0)[0], [0.0, 2.0, 4.0])
    with jax.enable_x64(False):
        np.testing.assert_allclose(scale_op(1.5, factor=2.0)[0], 3.0)
    np.testing.assert_allclose(scale_op(np.float32(1.5), factor=2.0)[0], 3.0)
    op = _pop()
    np.testing.assert_allclose(op(np.arange(3.0), 2), [0.0, 2.0, 4.0])
    y = op(jnp.ones(2, jnp.bfloat16), jnp.ones(2, jnp.bfloat16))
    assert y.dtype == jnp.bfloat16
    with pytest.raises(TypeError, match=r"operand 0 \(x\): expected dtype float32, got int32"):
        scale_op(np.arange(3, dtype=np.int32), factor=2.0)


def test_the_byte_order_hint_gives_an_operand_that_runs() -> None:
    x = np.arange(4.0, dtype=">f4")
    native = x.astype(x.dtype.newbyteorder("="))
    np.testing.assert_array_equal(np.asarray(_pop()(native, native)), np.arange(4.0) ** 2)
