"""python_op: Python functions as JAX ops through the Rust target xla_ffi_rs.python_call.

Values are compared with NumPy/SciPy run directly (float64), derivatives with
``jax.test_util.check_grads``, and errors by exception type and key words.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from jax.test_util import check_grads

import xla_ffi_rs
from helpers import load_example, run_threads
from xla_ffi_rs import python_op
from xla_ffi_rs.binding import is_linear_input
from xla_ffi_rs.python_ops import registered_functions


def like(x):
    return x


class Counter:
    """A function that counts its calls and the shapes it saw."""

    def __init__(self, fn):
        self.fn, self.shapes = fn, []

    def __call__(self, *args, **kwargs):
        self.shapes.append(tuple(a.shape for a in args))
        return self.fn(*args, **kwargs)


# -- values -----------------------------------------------------------------

erfcx = python_op(scipy.special.erfcx, abstract_eval=like)


@pytest.mark.parametrize("shape", [(), (1,), (7,), (3, 4), (2, 0, 3)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scipy_function_eager_and_jit(shape, dtype) -> None:
    x = np.random.default_rng(0).uniform(-2, 5, shape).astype(dtype)
    want = scipy.special.erfcx(x)
    for f in (erfcx, jax.jit(erfcx)):
        got = f(jnp.asarray(x))
        assert got.dtype == dtype and got.shape == shape
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6 if dtype == np.float32 else 1e-15)


def test_several_operands_results_dtypes_and_params() -> None:
    def stats(x, w, *, power):
        return (x**power * w).sum(axis=-1), np.argmax(x, axis=-1).astype(np.int32)

    op = python_op(
        stats,
        abstract_eval=lambda x, w, *, power: (
            jax.ShapeDtypeStruct(x.shape[:-1], x.dtype),
            jax.ShapeDtypeStruct(x.shape[:-1], np.int32),
        ),
    )
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=(5, 6)), rng.normal(size=6)
    for power in (1, 3):
        s, i = jax.jit(lambda x, w, p=power: op(x, w, power=p))(x, w)
        np.testing.assert_allclose(np.asarray(s), (x**power * w).sum(-1), rtol=1e-13)
        np.testing.assert_array_equal(np.asarray(i), np.argmax(x, -1))
        assert i.dtype == np.int32


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "float16", "bfloat16", "complex64", "complex128"])
def test_every_dtype_round_trips(dtype) -> None:
    op = python_op(lambda x: x.copy(), abstract_eval=like, name=f"copy_{dtype}")
    x = jnp.asarray(np.arange(6) % 3, dtype=jnp.dtype(dtype)).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(jax.jit(op)(x)), np.asarray(x))


def test_takes_outputs_writes_in_place_and_inputs_are_read_only() -> None:
    seen = {}

    def sin_into(x, out):
        seen["writeable"] = (x.flags.writeable, out.flags.writeable)
        np.sin(x, out=out)

    op = python_op(sin_into, abstract_eval=like, takes_outputs=True)
    x = np.linspace(0, 3, 11)
    np.testing.assert_allclose(np.asarray(jax.jit(op)(x)), np.sin(x), rtol=1e-15)
    assert seen["writeable"] == (False, True)
    # np.sin(x, out=o) returns o: accepted too.
    op2 = python_op(lambda x, o: np.sin(x, out=o), abstract_eval=like, takes_outputs=True)
    np.testing.assert_allclose(np.asarray(op2(x)), np.sin(x), rtol=1e-15)


def test_ufuncs_give_what_they_give_in_numpy() -> None:
    """A ufunc as the function: the same values and dtypes as calling it in NumPy."""
    big = np.linspace(-2, 2, 5000)
    sin = jax.jit(python_op(np.sin, abstract_eval=like))
    for x in (np.linspace(-2, 2, 7), big):
        np.testing.assert_array_equal(np.asarray(sin(x)), np.sin(x))
    i = np.arange(-3, 4, dtype=np.int32)
    np.testing.assert_array_equal(np.asarray(python_op(np.negative, abstract_eval=like)(i)), -i)
    to_f64 = python_op(np.sin, abstract_eval=lambda x: jax.ShapeDtypeStruct(x.shape, np.float64), name="sin_int")
    np.testing.assert_array_equal(np.asarray(to_f64(i)), np.sin(i))
    add = python_op(np.add, abstract_eval=lambda a, b: b)
    a, b = np.arange(3.0), np.ones((2, 3))
    np.testing.assert_array_equal(np.asarray(add(a, b)), a + b)
    both = python_op(np.divmod, abstract_eval=lambda a, b: (a, a))
    q, r = both(np.arange(7.0), np.full(7, 3.0))
    np.testing.assert_array_equal(np.asarray(q), np.arange(7.0) // 3)
    np.testing.assert_array_equal(np.asarray(r), np.arange(7.0) % 3)
    with pytest.raises(jax.errors.JaxRuntimeError, match="result 0: expected float32\\[2\\], got float64\\[2\\]"):
        python_op(np.sin, abstract_eval=lambda x: jax.ShapeDtypeStruct(x.shape, np.float32), name="narrow")(
            np.ones(2)
        ).block_until_ready()


def test_operands_are_copies_that_python_owns() -> None:
    """The function never sees XLA's memory: its operands are read-only copies."""
    seen: list[np.ndarray] = []

    def record(x):
        seen.append(x)
        return x.copy()

    op = python_op(record, abstract_eval=like, name="addr")
    x = jnp.arange(1024.0)
    jax.jit(op)(x).block_until_ready()
    assert seen[-1].ctypes.data != x.unsafe_buffer_pointer()
    assert not seen[-1].flags.writeable
    np.testing.assert_array_equal(seen[-1], np.arange(1024.0))


# -- errors -------------------------------------------------------------------


def helper_that_fails(x):
    raise ValueError(f"cannot handle {x.shape}")


def failing(x):
    return helper_that_fails(x)


def test_exception_becomes_an_error_with_type_message_and_frames() -> None:
    op = python_op(failing, abstract_eval=like)
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.jit(op)(jnp.ones(3)).block_until_ready()
    text = str(info.value)
    assert text.startswith(
        "UNKNOWN: xla_ffi_rs.python_call: op 'python_op[failing]' raised ValueError: cannot handle (3,)"
    )
    assert "in failing" in text and "in helper_that_fails" in text and "test_python_op.py" in text
    # The process keeps working, and so does the same op on good input afterwards.
    np.testing.assert_allclose(np.asarray(erfcx(jnp.ones(2))), scipy.special.erfcx(np.ones(2)))


def test_writing_an_operand_is_an_error() -> None:
    def scribble(x):
        x[0] = 1.0
        return x

    with pytest.raises(jax.errors.JaxRuntimeError, match="raised ValueError: assignment destination is read-only"):
        python_op(scribble, abstract_eval=like)(jnp.zeros(2)).block_until_ready()


class Unreadable:
    """A result whose ``__array__`` raises."""

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise RuntimeError("no array here")


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        (lambda x: x.astype(np.float32), "result 0: expected float64[3], got float32[3]"),
        (lambda x: x[:2], "result 0: expected float64[3], got float64[2]"),
        (lambda x: x.reshape(3, 1), "result 0: expected float64[3], got float64[3,1]"),
        (lambda x: 1.0, "result 0: expected float64[3], got float64[]"),
        (lambda x: None, "result 0: expected float64[3], got None (did the function forget to return its result?)"),
        (lambda x: (x, x), "result 0: expected float64[3], got a tuple of 2 values, as an array float64[2,3]"),
        (lambda x: {"y": x}, "result 0: expected float64[3], got a dict, as an array object[]"),
        (lambda x: "text", "result 0: expected float64[3], got a str, as an array str[]"),
        # What NumPy cannot read as one array is the result's fault, not an exception of the function's.
        (
            lambda x: (x, 1.0),
            (
                "result 0: expected float64[3], got a tuple of 2 values, which NumPy cannot read as one array "
                "(ValueError: setting an array element with a sequence."
            ),
        ),
        (
            lambda x: Unreadable(),
            (
                "result 0: expected float64[3], got a Unreadable, which NumPy cannot read as one array "
                "(RuntimeError: no array here)"
            ),
        ),
    ],
    ids=["dtype", "shape", "rank", "scalar", "none", "tuple", "dict", "str", "ragged_tuple", "array_raises"],
)
def test_wrong_result_names_op_result_expected_and_got(fn, expected) -> None:
    op = python_op(fn, abstract_eval=like, name="badresult")
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.jit(op)(jnp.ones(3)).block_until_ready()
    assert str(info.value).startswith(f"INVALID_ARGUMENT: xla_ffi_rs.python_call: op 'badresult': {expected}")
    assert "Traceback" not in str(info.value)


def test_wrong_number_of_results() -> None:
    op = python_op(lambda x: (x, x, x), abstract_eval=lambda x: (x, x), name="two")
    with pytest.raises(
        jax.errors.JaxRuntimeError, match="op 'two': expected the function to return a tuple of 2 arrays, got 3 values"
    ):
        op(jnp.ones(3))[0].block_until_ready()


def test_takes_outputs_must_not_return_new_arrays() -> None:
    op = python_op(lambda x, o: x + 1, abstract_eval=like, takes_outputs=True, name="forgot")
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"op 'forgot': with takes_outputs=True .* returned ndarray"):
        op(jnp.ones(3)).block_until_ready()


def test_kept_arrays_stay_valid_and_the_call_succeeds() -> None:
    kept: list[np.ndarray] = []

    def keep(x):
        kept.append(x[1:])
        return x + 1

    op = python_op(keep, abstract_eval=like, name="keeper")
    np.testing.assert_array_equal(np.asarray(op(jnp.ones(3))), np.full(3, 2.0))
    np.testing.assert_array_equal(kept[-1], np.ones(2))


def test_jax_inside_the_function_on_a_copy() -> None:
    op = python_op(lambda x: np.asarray(jnp.sin(np.array(x))), abstract_eval=like, name="nested_jax")
    x = jnp.linspace(0, 1, 5)
    np.testing.assert_allclose(np.asarray(jax.jit(op)(x)), np.sin(np.asarray(x)), rtol=1e-15)


def test_decorator_form() -> None:
    @python_op(abstract_eval=like, vectorized=True)
    def cube(x):
        return x**3

    from xla_ffi_rs.python_ops import PythonOp

    assert isinstance(cube, PythonOp)
    np.testing.assert_array_equal(np.asarray(jax.jit(cube)(jnp.arange(4.0))), np.arange(4.0) ** 3)
    assert cube.name == "python_op[test_decorator_form.<locals>.cube]"


@pytest.mark.parametrize("rule", ["jvp", "transpose", "batching"])
def test_a_rule_that_is_not_callable_is_refused_when_given(rule) -> None:
    """jvp=, transpose=, batching= (and the def_* methods) refuse a non-callable at
    once, naming the op and the rule, instead of failing at the first grad or vmap
    with ``'int' object is not callable``."""
    with pytest.raises(TypeError) as info:
        python_op(np.sin, abstract_eval=like, name="norule", **{rule: 3})  # type: ignore[call-overload]
    assert str(info.value) == f"norule: the {rule} rule must be callable, got int"
    op = python_op(np.sin, abstract_eval=like, name="norule2")
    method: Any = {"jvp": op.def_jvp_rule, "transpose": op.def_transpose_rule, "batching": op.def_batching}[rule]
    with pytest.raises(TypeError, match=f"norule2: the {rule} rule must be callable, got str"):
        method("rule")


def test_bad_arguments_raise_before_lowering() -> None:
    with pytest.raises(TypeError, match="fn must be callable"):
        python_op(3, abstract_eval=like)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="num_batch_dims"):
        python_op(np.sin, abstract_eval=like, num_batch_dims=-1)
    with pytest.raises(TypeError, match="abstract_eval must return avals"):
        python_op(np.sin, abstract_eval=lambda x: 3, name="badaval")(jnp.ones(2))
    with pytest.raises(TypeError, match="reserved"):
        erfcx(jnp.ones(2), _batch_shape=(2,))


class _Aval:
    """An aval-like object with any shape and dtype (jax.ShapeDtypeStruct checks both)."""

    def __init__(self, shape, dtype) -> None:
        self.shape, self.dtype = shape, dtype


@pytest.mark.parametrize(
    ("aval", "error", "words"),
    [
        (jax.ShapeDtypeStruct((-1,), np.float32), ValueError, "expected a shape of non-negative ints, got (-1,)"),
        (_Aval((2, -3), np.float32), ValueError, "expected a shape of non-negative ints, got (2, -3)"),
        (_Aval((2.0,), np.float32), TypeError, "expected a shape of non-negative ints, got (2.0,)"),
        (_Aval((None,), np.float32), TypeError, "expected a shape of non-negative ints, got (None,)"),
        (_Aval((True,), np.float32), TypeError, "expected a shape of non-negative ints, got (True,)"),
        (_Aval(3, np.float32), TypeError, "expected a shape of non-negative ints, got 3"),
        (_Aval((3,), np.dtype(object)), TypeError, "expected a bool or numeric dtype, got object"),
        (_Aval((3,), np.dtype("U3")), TypeError, "expected a bool or numeric dtype, got <U3"),
        (_Aval((3,), "nope"), TypeError, "expected a bool or numeric dtype, got 'nope'"),
    ],
)
def test_bad_avals_from_abstract_eval_raise_before_lowering(aval, error, words) -> None:
    """An aval no array can have fails at the call, naming the op and the result,
    under jit and eagerly, instead of in MLIR or XLA."""
    op = python_op(np.sin, abstract_eval=lambda x: (x, aval), name="badshape")
    for call in (op, jax.jit(op)):
        with pytest.raises(error) as info:
            call(jnp.ones(3, jnp.float32))
        assert f"badshape: abstract_eval result 1: {words}" in str(info.value)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.uint64, np.complex128])
def test_a_64_bit_result_with_x64_off_is_refused(dtype) -> None:
    """With 64-bit types off no JAX array is 64-bit: a 64-bit aval is refused, naming
    the op, the result and the flag (as pure_callback, the op's lowering off CPU, does),
    instead of making a 64-bit array in a 32-bit program."""
    op = python_op(lambda x: x.astype(dtype), abstract_eval=lambda x: jax.ShapeDtypeStruct(x.shape, dtype), name="wide")
    want = np.dtype(dtype).name
    with jax.enable_x64(False):
        for call in (op, jax.jit(op)):
            with pytest.raises(ValueError) as info:
                call(jnp.ones(3, jnp.float32))
            assert (
                f"wide: abstract_eval result 0: expected a dtype without 64 bits while jax_enable_x64 is off, got {want}"
                in str(info.value)
            )
    assert np.asarray(op(jnp.ones(3, jnp.float32))).dtype == np.dtype(dtype)  # with x64 on it works


_SUB_BYTE = [n for n in ("int4", "uint4", "int2", "uint2", "float4_e2m1fn") if hasattr(jnp, n)]


@pytest.mark.parametrize("dtype_name", _SUB_BYTE)
def test_sub_byte_operands_and_results_are_refused_before_lowering(dtype_name) -> None:
    """A dtype XLA packs below one byte per element (int4, float4_e2m1fn, ...) has no
    NumPy array: an operand or an abstract_eval result of one is a TypeError naming the
    op and the operand or result when the op is called (eagerly, under jit, in
    eval_shape), not an error from the handler when the program runs."""
    dtype = getattr(jnp, dtype_name)
    take = python_op(lambda x: x, abstract_eval=lambda x: x, name="subin")
    make = python_op(lambda x: x, abstract_eval=lambda x: jax.ShapeDtypeStruct(x.shape, dtype), name="subout")
    small, ones = jnp.zeros(3, dtype), jnp.ones(3, jnp.float32)
    cases = [(take, small, "subin: operand 0: "), (make, ones, "subout: abstract_eval result 0: ")]
    for op, x, where in cases:
        for call in (op, jax.jit(op), lambda x, op=op: jax.eval_shape(op, x)):
            with pytest.raises(TypeError) as info:
                call(x)
            assert f"{where}python_op does not support {dtype_name}, whose elements are packed below one byte" in str(
                info.value
            )


def test_a_prng_key_operand_is_refused_before_lowering() -> None:
    """A typed PRNG key would reach the function as its raw uint32 words, with a shape
    abstract_eval never saw: refused at the call, naming the op and the operand and
    how to pass the words."""
    op = python_op(lambda k: np.zeros(2, np.float32), abstract_eval=lambda k: jax.ShapeDtypeStruct((2,), jnp.float32))
    for keys in (jax.random.key(0), jax.random.split(jax.random.key(0), 3)):
        for call in (op, jax.jit(op)):
            with pytest.raises(TypeError) as info:
                call(keys)
            assert "operand 0: expected a bool or numeric dtype, got key<fry>" in str(info.value)
            assert "jax.random.key_data(key)" in str(info.value)
    assert op(jax.random.key_data(jax.random.key(0))).shape == (2,)


def test_jnp_code_in_abstract_eval_computes_under_every_transformation() -> None:
    """abstract_eval may compute with jnp (here the result dtype, from a concrete
    array): jax 0.12 runs abstract evaluation with no trace, where that raised
    ``AttributeError: 'NoneType' object has no attribute 'stage_value'``."""

    def abstract_eval(x):
        return jax.ShapeDtypeStruct(x.shape, (jnp.asarray(x.dtype.type(0)) * 2).dtype)

    op = python_op(lambda x: x * 2, abstract_eval=abstract_eval, vectorized=True, name="jnp_aval")
    x = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3)
    for call in (op, jax.jit(op), jax.vmap(op), jax.vmap(jax.vmap(op))):
        np.testing.assert_array_equal(np.asarray(call(x)), np.arange(6.0).reshape(2, 3) * 2)
    assert jax.eval_shape(op, jax.ShapeDtypeStruct((4,), jnp.float16)) == jax.ShapeDtypeStruct((4,), jnp.float16)


def test_an_op_with_no_results_is_refused_instead_of_never_running() -> None:
    """abstract_eval returning no results made an op JAX always dropped: the function
    was never called, eagerly or under jit, and nothing said so."""
    calls = []

    def record(x):
        calls.append(x)
        return ()

    op = python_op(record, abstract_eval=lambda x: (), name="noresults")
    for call in (op, jax.jit(op)):
        with pytest.raises(ValueError) as info:
            call(jnp.ones(2))
        assert "noresults: abstract_eval returned no results, so the function would never run" in str(info.value)
    assert not calls


# -- derivatives ----------------------------------------------------------------


def test_example_kv_under_jit_grad_jvp_and_vmap() -> None:
    ex = load_example("bessel_kv")
    x = jnp.linspace(0.3, 5.0, 9)
    for v in (0.0, 1.5, 2.25):
        np.testing.assert_allclose(
            np.asarray(jax.jit(ex.kv, static_argnums=0)(v, x)), scipy.special.kv(v, np.asarray(x)), rtol=1e-14
        )
        grad = jax.grad(lambda x, v=v: ex.kv(v, x).sum())(x)
        np.testing.assert_allclose(np.asarray(grad), scipy.special.kvp(v, np.asarray(x)), rtol=1e-12)
        check_grads(lambda x, v=v: ex.kv(v, x), (x,), order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)
    batch = jnp.asarray(np.random.default_rng(2).uniform(0.5, 3, (4, 5)))
    want = scipy.special.kv(1.5, np.asarray(batch))
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(lambda r: ex.kv(1.5, r)))(batch)), want, rtol=1e-14)
    per_row_grad = jax.vmap(jax.grad(lambda r: ex.kv(1.5, r).sum()))(batch)
    np.testing.assert_allclose(np.asarray(per_row_grad), scipy.special.kvp(1.5, np.asarray(batch)), rtol=1e-12)
    grad_of_vmap = jax.grad(lambda b: jax.vmap(lambda r: ex.kv(1.5, r))(b).sum())(batch)
    np.testing.assert_allclose(np.asarray(grad_of_vmap), scipy.special.kvp(1.5, np.asarray(batch)), rtol=1e-12)


def cumsum_op(vectorized: bool):
    """A linear op (cumulative sum over the last axis) with a transpose rule."""
    op = python_op(
        lambda x: np.cumsum(x, axis=-1),
        abstract_eval=like,
        vectorized=vectorized,
        name=f"cumsum_{vectorized}",
    )
    rev = python_op(
        lambda c: np.cumsum(c[..., ::-1], axis=-1)[..., ::-1].copy(),
        abstract_eval=like,
        vectorized=vectorized,
        name=f"rcumsum_{vectorized}",
    )
    op.def_jvp_rule(lambda p, t: (op(*p), op(*t)))
    rev.def_jvp_rule(lambda p, t: (rev(*p), rev(*t)))
    op.def_transpose_rule(lambda ct, x: (rev(ct) if is_linear_input(x) else None,))
    rev.def_transpose_rule(lambda ct, x: (op(ct) if is_linear_input(x) else None,))
    return op


@pytest.mark.parametrize("vectorized", [True, False])
def test_linear_op_with_transpose_rule(vectorized) -> None:
    op = cumsum_op(vectorized)
    x = jnp.asarray(np.random.default_rng(3).normal(size=(3, 5)))
    np.testing.assert_allclose(np.asarray(op(x)), np.cumsum(np.asarray(x), -1), rtol=1e-14)
    check_grads(op, (x,), order=2, modes=("fwd", "rev"))
    w = jnp.arange(5.0)
    g = jax.grad(lambda x: (op(x) * w).sum())(x)
    np.testing.assert_allclose(np.asarray(g), np.broadcast_to(np.cumsum(np.arange(5.0)[::-1])[::-1], (3, 5)))
    # Reverse mode through a vmap (a batched call's transpose) and vmap of reverse mode.
    g1 = jax.grad(lambda x: (jax.vmap(op)(x) * w).sum())(x)
    g2 = jax.vmap(jax.grad(lambda r: (op(r) * w).sum()))(x)
    np.testing.assert_allclose(np.asarray(g1), np.asarray(g), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(g2), np.asarray(g), rtol=1e-14)


# -- batching -------------------------------------------------------------------


@pytest.mark.parametrize("in_axes", [0, 1])
def test_vmap_vectorized_makes_one_call(in_axes) -> None:
    counter = Counter(np.sin)
    op = python_op(counter, abstract_eval=like, vectorized=True, name="vsin")
    x = jnp.asarray(np.random.default_rng(4).normal(size=(4, 6)))
    got = jax.jit(jax.vmap(op, in_axes=in_axes))(x)
    np.testing.assert_allclose(np.asarray(got), np.sin(np.moveaxis(np.asarray(x), in_axes, 0)), rtol=1e-15)
    assert len(counter.shapes) == 1 and counter.shapes[0] == ((x.shape[in_axes], x.shape[1 - in_axes]),)
    text = jax.jit(jax.vmap(op)).lower(x).as_text()
    assert text.count("xla_ffi_rs.python_call") == 1 and "while" not in text


def test_vmap_not_vectorized_calls_once_per_element_with_unbatched_operands() -> None:
    counter = Counter(lambda x, w: np.asarray(x @ w))
    op = python_op(counter, abstract_eval=lambda x, w: jax.ShapeDtypeStruct((), x.dtype), name="dot")
    x, w = jnp.asarray(np.random.default_rng(5).normal(size=(5, 3))), jnp.arange(3.0)
    got = jax.jit(jax.vmap(op, in_axes=(0, None)))(x, w)
    np.testing.assert_allclose(np.asarray(got), np.asarray(x) @ np.asarray(w), rtol=1e-14)
    assert counter.shapes == [((3,), (3,))] * 5


def test_nested_vmap_vectorized() -> None:
    counter = Counter(lambda x, y: x * y)
    op = python_op(counter, abstract_eval=lambda x, y: x, vectorized=True, name="mul")
    x, y = jnp.ones((2, 3, 4)), jnp.arange(4.0)
    got = jax.vmap(jax.vmap(op, in_axes=(0, None)), in_axes=(0, None))(x, y)
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(np.arange(4.0), (2, 3, 4)))
    assert counter.shapes == [((2, 3, 4), (2, 3, 4))]


def test_custom_batching_rule() -> None:
    calls = []

    def rule(operands, dims, **params):
        calls.append(dims)
        (x,), (d,) = operands, dims
        return [jnp.sin(x)], [d]

    op = python_op(np.sin, abstract_eval=like, batching=rule, name="customvmap")
    x = jnp.ones((3, 2))
    np.testing.assert_allclose(np.asarray(jax.vmap(op)(x)), np.sin(np.ones((3, 2))))
    assert calls == [(0,)]


# -- lifetime -------------------------------------------------------------------


def test_recreating_an_op_registers_nothing_new() -> None:
    op = python_op(scipy.special.expit, abstract_eval=like)
    op(jnp.ones(2)).block_until_ready()
    before, keys = registered_functions(), list(op._key_list)
    for _ in range(50):
        again = python_op(scipy.special.expit, abstract_eval=like)
        assert again is op
        jax.jit(lambda x: python_op(scipy.special.expit, abstract_eval=like)(x))(jnp.ones(2)).block_until_ready()
    # Other tests' ops may be freed meanwhile: the count may only go down.
    assert registered_functions() <= before and op._key_list == keys
    assert op.name == "python_op[expit]"


def test_compiled_program_outlives_every_user_reference() -> None:
    def make():
        scale = float(np.pi)
        return python_op(lambda x: x * scale, abstract_eval=like, name="closure")

    f = jax.jit(make())
    x = jnp.ones(3)
    f(x).block_until_ready()
    gc.collect()
    np.testing.assert_allclose(np.asarray(f(x)), np.full(3, np.pi))


def test_non_callables_are_refused_and_keys_of_freed_ops_are_never_reused() -> None:
    with pytest.raises(TypeError, match="python_op: fn must be callable, got int"):
        python_op(3, abstract_eval=like)  # type: ignore[call-overload]
    freed: set[int] = set()
    for i in range(3):
        op = python_op(lambda x, i=i: x + i, abstract_eval=like, name=f"keys_{i}")
        op(jnp.ones(2)).block_until_ready()
        assert op._key_list and not freed & set(op._key_list)
        freed |= set(op._key_list)
        del op
        jax.clear_caches()
        gc.collect()
    again = python_op(lambda x: x + 9, abstract_eval=like, name="keys_again")
    again(jnp.ones(2)).block_until_ready()
    assert not freed & set(again._key_list)


# -- threads --------------------------------------------------------------------


def test_four_threads_call_one_jitted_op() -> None:
    def slow_erfcx(x):
        time.sleep(0.001)  # releases the GIL inside the call: calls overlap
        return scipy.special.erfcx(x)

    f = jax.jit(python_op(slow_erfcx, abstract_eval=like))
    x = jnp.linspace(-1, 3, 101)
    want = scipy.special.erfcx(np.asarray(x))
    results = run_threads(lambda i: [np.asarray(f(x)) for _ in range(20)], 4)
    for per_thread in results:
        for r in per_thread:
            np.testing.assert_array_equal(r, want)


def test_caller_keeps_running_python_while_the_op_waits_for_it() -> None:
    """The op runs only when the GIL is free: it needs the caller to let go (it does
    when it blocks on the result, and at Python's switch interval)."""
    release = threading.Event()

    def wait_for_main(x):
        assert release.wait(timeout=60), "the main thread could not run while the op was running"
        return x + 1

    op = jax.jit(python_op(wait_for_main, abstract_eval=like))
    out = run_threads(lambda i: np.asarray(op(jnp.full(2, float(i)))) if i else release.set(), n=2)
    np.testing.assert_array_equal(out[1], [2.0, 2.0])


def test_other_platforms_fall_back_to_pure_callback() -> None:
    """Off CPU (no target there) the op lowers to jax.pure_callback around the same
    call; run that lowering on CPU to check it computes the same thing and errors."""
    op = python_op(lambda x, *, k: np.asarray(x * k), abstract_eval=lambda x, *, k: x, name="fallback")
    x = jnp.arange(4.0)
    got = jax.jit(lambda x: op._callback_impl(x, k=3.0))(x)
    np.testing.assert_array_equal(np.asarray(got[0]), np.arange(4.0) * 3)
    bad = python_op(failing, abstract_eval=like, name="fallback_bad")
    with pytest.raises(Exception, match="op 'fallback_bad' raised ValueError: cannot handle"):
        jax.block_until_ready(jax.jit(lambda x: bad._callback_impl(x))(x))


def test_package_exports() -> None:
    assert xla_ffi_rs.python_op is python_op
    assert "xla_ffi_rs.python_call" in xla_ffi_rs.handlers("cpu")


def test_a_call_abstract_eval_cannot_take_names_the_op_and_what_it_got() -> None:
    """Too many or too few operands, or a parameter abstract_eval has no keyword for,
    raise TypeError naming the op and the call, not only the bare lambda."""
    one = python_op(np.sin, abstract_eval=lambda x: x, name="one_operand")
    with pytest.raises(TypeError, match=r"one_operand: abstract_eval cannot take this call \(2 operands\): "):
        one(jnp.ones(2), jnp.ones(2))
    with pytest.raises(
        TypeError, match=r"one_operand: abstract_eval cannot take this call \(1 operand, parameters \['k'\]\): .*'k'"
    ):
        one(jnp.ones(2), k=3)
    mv = xla_ffi_rs.linear_op(
        lambda a, x: a @ x,
        lambda a, ct: a.T @ ct,
        abstract_eval=lambda a, x: jax.ShapeDtypeStruct(a.shape[:1], x.dtype),
        abstract_eval_T=lambda a, ct: jax.ShapeDtypeStruct(a.shape[1:], ct.dtype),
        fixed=(0,),
        name="matvec",
    )
    with pytest.raises(TypeError, match=r"matvec: abstract_eval cannot take this call \(1 operand\): "):
        jax.jit(lambda a: mv(a))(jnp.ones((2, 3)))
    errors = python_op(np.sin, abstract_eval=lambda x: x.no_such_attribute, name="inner_error")
    with pytest.raises(AttributeError, match="no_such_attribute"):  # an error inside abstract_eval is its own
        errors(jnp.ones(2))


def test_a_scalar_function_with_num_batch_dims_is_vmapped() -> None:
    """vmap of a vectorized op with num_batch_dims=1 called on one element (a
    scalar) makes one call with the batch axis in front: it was refused at the call
    (the element's rank 0 is below 1). A call that is still below the rank (outside
    vmap, or num_batch_dims above the vmap levels) is refused, naming the op."""
    kv = python_op(
        lambda x, *, v: scipy.special.kv(v, x),
        abstract_eval=lambda x, *, v: x,
        vectorized=True,
        num_batch_dims=1,
        name="scalar_kv",
    )
    kv.def_jvp_rule(lambda p, t, *, v: (kv(p[0], v=v), -0.5 * (kv(p[0], v=v - 1) + kv(p[0], v=v + 1)) * t[0]))
    x = np.linspace(0.5, 4.0, 6)
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(lambda s: kv(s, v=1.5)))(x)), scipy.special.kv(1.5, x))
    want = -0.5 * (scipy.special.kv(0.5, x) + scipy.special.kv(2.5, x))
    np.testing.assert_allclose(np.asarray(jax.vmap(jax.grad(lambda s: kv(s, v=1.5)))(x)), want, rtol=1e-6)
    np.testing.assert_allclose(
        np.asarray(jax.vmap(jax.vmap(lambda s: kv(s, v=1.5)))(x.reshape(2, 3))), scipy.special.kv(1.5, x).reshape(2, 3)
    )
    with pytest.raises(ValueError, match=r"scalar_kv: num_batch_dims=1: operand 0 has shape \(\), of rank below 1"):
        kv(np.float32(1.0), v=1.5)
    two = python_op(np.sin, abstract_eval=lambda x: x, vectorized=True, num_batch_dims=2, name="scalar_sin2")
    with pytest.raises(ValueError, match=r"scalar_sin2: num_batch_dims=2: operand 0 has shape \(6,\), of rank below 2"):
        jax.vmap(two)(x)
    np.testing.assert_allclose(np.asarray(jax.vmap(jax.vmap(two))(x.reshape(2, 3))), np.sin(x).reshape(2, 3))
    per_element = python_op(np.sin, abstract_eval=lambda x: x, num_batch_dims=1, name="scalar_sin1")
    with pytest.raises(ValueError, match=r"scalar_sin1: .* no value of the call has the batch axes: .*vectorized=True"):
        jax.vmap(per_element)(x)
