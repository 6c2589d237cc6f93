"""The handler's direct path: an op with no static parameters, output arrays or
sharding is called as ``fn(*operands)`` from Rust, its results checked and copied
there when they are exact arrays of the expected dtype and shape, and everything
else settled by the Python checks. Each case is compared with NumPy run directly.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xla_ffi_rs import python_op
from xla_ffi_rs.pyop import PythonOp

#: Small (tobytes copy) and large (flat memoryview copy, >= 128 KiB) results.
SIZES = [(2, 3), (300, 200)]


def like(x):
    return x


def transposed(x):
    return jax.ShapeDtypeStruct(x.shape[::-1], x.dtype)


@pytest.mark.parametrize("shape", SIZES)
def test_non_contiguous_results_are_copied_in_c_order(shape) -> None:
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    op = python_op(lambda x: x.T, abstract_eval=transposed, name="direct_T")
    np.testing.assert_array_equal(jax.jit(op)(x), x.T)
    strided = python_op(lambda x: (x * 2)[::-1], abstract_eval=like, name="direct_strided")
    np.testing.assert_array_equal(jax.jit(strided)(x), (x * 2)[::-1])


@pytest.mark.parametrize("shape", SIZES)
def test_several_results_as_tuple_or_list(shape) -> None:
    x = np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape)
    pair = python_op(lambda x: (np.sin(x), np.cos(x)), abstract_eval=lambda x: (x, x), name="direct_pair")
    as_list = python_op(lambda x: [np.sin(x), np.cos(x)], abstract_eval=lambda x: (x, x), name="direct_list")
    for op in (pair, as_list):
        s, c = jax.jit(op)(x)
        np.testing.assert_array_equal(s, np.sin(x))
        np.testing.assert_array_equal(c, np.cos(x))


def test_scalars_subclasses_and_python_values_are_settled_by_the_checks() -> None:
    x = np.array([1.0, 2.0, 3.0])
    total = python_op(
        lambda x: float(x.sum()), abstract_eval=lambda x: jax.ShapeDtypeStruct((), x.dtype), name="py_float"
    )
    assert float(jax.jit(total)(x)) == 6.0
    np_scalar = python_op(
        lambda x: x.sum(), abstract_eval=lambda x: jax.ShapeDtypeStruct((), x.dtype), name="np_scalar"
    )
    assert float(jax.jit(np_scalar)(x)) == 6.0
    masked = python_op(lambda x: np.ma.masked_array(x * 3.0), abstract_eval=like, name="masked")
    np.testing.assert_array_equal(jax.jit(masked)(x), x * 3.0)
    as_int = python_op(lambda x: np.asarray(x > 1.5), abstract_eval=lambda x: jax.ShapeDtypeStruct(x.shape, bool))
    np.testing.assert_array_equal(jax.jit(as_int)(x), x > 1.5)


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (lambda x: x.astype(np.float32), "op 'direct_bad': result 0: expected float64[3], got float32[3]"),
        (lambda x: x[:2], "op 'direct_bad': result 0: expected float64[3], got float64[2]"),
        (lambda x: (x, x), "op 'direct_bad': result 0: expected float64[3], got float64[2,3]"),
        (lambda x: None, "op 'direct_bad': result 0: expected float64[3], got object[]"),
    ],
    ids=["dtype", "shape", "tuple_for_one", "none"],
)
def test_wrong_results_fail_naming_the_op(fn, words) -> None:
    op = python_op(fn, abstract_eval=like, name="direct_bad")
    with pytest.raises(
        jax.errors.JaxRuntimeError, match="INVALID_ARGUMENT: .*" + words.replace("[", r"\[").replace("]", r"\]")
    ):
        jax.jit(op)(np.ones(3)).block_until_ready()


def test_wrong_count_of_results_fails_naming_the_op() -> None:
    op = python_op(lambda x: (x,), abstract_eval=lambda x: (x, x), name="direct_count")
    with pytest.raises(
        jax.errors.JaxRuntimeError,
        match="op 'direct_count': expected the function to return a tuple of 2 arrays, got 1 values",
    ):
        jax.jit(op)(np.ones(3)).block_until_ready()


def test_exceptions_keep_the_functions_own_frames() -> None:
    def inner(x):
        raise ValueError("no good")

    def outer(x):
        return inner(x)

    op = python_op(outer, abstract_eval=like, name="direct_raises")
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.jit(op)(np.ones(3)).block_until_ready()
    text = str(info.value)
    assert "op 'direct_raises' raised ValueError: no good" in text
    assert "Traceback (last 2 frames)" in text and "in outer" in text and "in inner" in text
    # The process keeps working: the same op runs again.
    ok = python_op(np.cos, abstract_eval=like, name="direct_after")
    np.testing.assert_array_equal(jax.jit(ok)(np.zeros(3)), np.ones(3))


def test_the_direct_path_is_used_only_without_params_outputs_or_sharding() -> None:
    def f(x, **params):
        return x

    assert python_op(f, abstract_eval=like)._direct({}, (1,)) is not None
    assert python_op(f, abstract_eval=like)._direct({"k": 1}, (1,)) is None
    assert python_op(lambda x, o: None, abstract_eval=like, takes_outputs=True)._direct({}, (1,)) is None
    op: PythonOp = python_op(f, abstract_eval=like, num_batch_dims=1)
    assert op._direct({}, (1,)) is None
    with_params = python_op(f, abstract_eval=lambda x, **params: x)
    assert jnp.array_equal(jax.jit(lambda x: with_params(x, k=2))(jnp.ones(2)), jnp.ones(2))


@pytest.mark.parametrize("shape", SIZES)
def test_a_result_in_the_other_byte_order_is_converted(shape) -> None:
    x = np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape)
    swapped = python_op(lambda x: np.sin(x).astype(">f8"), abstract_eval=like, name="big_endian")
    np.testing.assert_array_equal(jax.jit(swapped)(x), np.sin(x))
    # A different dtype stays an error that names both, even in the other byte order.
    wrong = python_op(lambda x: x.astype(">f4"), abstract_eval=like, name="big_endian_f32")
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"result 0: expected float64\[.*got float32"):
        jax.jit(wrong)(x).block_until_ready()
