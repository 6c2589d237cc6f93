"""What an op is as a Python object: copying gives the op itself (a copy that shared
its primitive and registered functions broke once the original was freed), pickling
is refused naming the op, and a call's static parameters are told apart as a
function would tell them apart (``0.0`` and ``-0.0``)."""

from __future__ import annotations

import copy
import gc
import pickle
import struct
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xla_ffi_rs import python_op
from xla_ffi_rs.binding import Op, same_as_operands
from xla_ffi_rs.python_ops import registered_functions


def _plus_one(x: np.ndarray) -> np.ndarray:
    return x + np.float32(1.0)


def test_a_copy_of_a_python_op_keeps_working_after_the_original_is_dropped() -> None:
    op = python_op(_plus_one, abstract_eval=lambda x: x, name="copied")
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(np.asarray(op(x)), x + 1)
    shallow, deep = copy.copy(op), copy.deepcopy(op)
    holder = copy.deepcopy({"op": op})  # an object holding an op deep-copies to one holding the same op
    assert shallow is op and deep is op and holder["op"] is op
    del op, deep, holder
    jax.clear_caches()
    gc.collect()
    np.testing.assert_array_equal(np.asarray(shallow(x)), x + 1)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: shallow(x))(x)), x + 1)


def test_a_binding_op_copies_to_itself() -> None:
    op = Op("identity_test_twice", abstract_eval=same_as_operands(1), jnp_impl=lambda x: (2 * x,))
    assert copy.copy(op) is op and copy.deepcopy(op) is op


@pytest.mark.parametrize("kind", ["python_op", "binding"])
def test_pickling_an_op_is_a_type_error_naming_it(kind: str) -> None:
    if kind == "python_op":
        op: Any = python_op(_plus_one, abstract_eval=lambda x: x, name="pickled")
    else:
        op = Op("identity_test_pickled", abstract_eval=same_as_operands(1), jnp_impl=lambda x: (2 * x,))
    with pytest.raises(TypeError, match=r"cannot be pickled") as e:
        pickle.dumps(op)
    assert op.name in str(e.value) and "make the op again" in str(e.value)


def test_static_parameters_zero_and_negative_zero_are_two_parameters() -> None:
    """``0.0 == -0.0`` with equal hashes, but a function tells them apart: each call's
    function gets the zero passed, not the first equal one seen (eagerly, under jit,
    and as a NumPy scalar or inside a tuple)."""
    seen: list[str] = []

    def f(x: np.ndarray, *, p: Any) -> np.ndarray:
        seen.append(repr(p))
        return x + np.float32(1.0)

    op = python_op(f, abstract_eval=lambda x, *, p: x, name="signed_zero")
    x = np.zeros(2, np.float32)
    for values in [
        (0.0, -0.0, 0.0),
        (np.float32(-0.0), np.float32(0.0)),
        ((-0.0,), (0.0,)),
        ((1.0, -0.0), (1.0, 0.0), (1, 0), (True, False)),
        (complex(0, -0.0), 0j),
    ]:
        for p in values:
            for call in (lambda p=p: op(x, p=p), lambda p=p: jax.jit(lambda x: op(x, p=p))(x)):
                seen.clear()
                call()
                assert seen and all(s == repr(p) for s in seen), (p, seen)


def test_binding_op_eager_calls_tell_signed_zeros_apart() -> None:
    op = Op(
        "identity_test_copysign",
        abstract_eval=same_as_operands(1),
        jnp_impl=lambda x, *, s: (x * np.float32(np.copysign(1.0, s)),),
    )
    x = np.ones(2, np.float32)
    for s, want in [(0.0, 1.0), (-0.0, -1.0), (0.0, 1.0)]:
        np.testing.assert_array_equal(np.asarray(op(x, s=s)[0]), [want, want])


def test_a_numpy_nan_parameter_makes_one_registered_function() -> None:
    op = python_op(lambda x, *, p: x + np.float32(1.0), abstract_eval=lambda x, *, p: x, name="nan_param")
    x = np.zeros(2, np.float32)
    op(x, p=np.float32("nan"))
    before = registered_functions()
    # A NaN of another payload (tuples of floats are keyed as whole arrays).
    other_nan = struct.unpack("d", struct.pack("Q", 0x7FF8_0000_0000_0001))[0]
    for _ in range(10):
        op(x, p=np.float32("nan"))
        op(x, p=(complex(np.nan, 1.0),))
        op(x, p=(float("nan"), 1.0))
        op(x, p=(other_nan, 1.0))
    assert registered_functions() - before <= 2


def _sin(x: np.ndarray) -> np.ndarray:
    return np.sin(x)


def test_ops_made_in_a_loop_each_keep_the_rule_defined_on_them() -> None:
    """``python_op`` with the same arguments returns the same op, but one given a rule
    of its own (``def_jvp_rule``, ``def_jvp``, ...) is no longer what those arguments
    describe: each loop iteration used to get the one op, and the last rule defined
    served every iteration's op (gradients 3, 3, 3 instead of 1, 2, 3)."""
    ae = lambda x: x  # noqa: E731
    ops = []
    for k in (1.0, 2.0, 3.0):
        op = python_op(_sin, abstract_eval=ae, name="looped")

        @op.def_jvp_rule
        def _(primals: Any, tangents: Any, op: Any = op, k: float = k) -> Any:
            return op(primals[0]), k * jnp.cos(primals[0]) * tangents[0]

        ops.append(op)
    assert len({id(o) for o in ops}) == 3
    assert [float(jax.grad(o)(0.0)) for o in ops] == [1.0, 2.0, 3.0]
    # Given as arguments, the rule is part of what python_op memoizes.
    rule = lambda p, t: (_sin(p[0]), t[0])  # noqa: E731
    assert python_op(_sin, abstract_eval=ae, jvp=rule) is python_op(_sin, abstract_eval=ae, jvp=rule)
    plain = python_op(_sin, abstract_eval=ae, name="plain")
    assert python_op(_sin, abstract_eval=ae, name="plain") is plain
    plain.def_batching(lambda args, dims: ((plain(*args),), dims))
    assert python_op(_sin, abstract_eval=ae, name="plain") is not plain


def test_a_python_op_is_pure_a_call_whose_results_are_unused_does_not_run() -> None:
    """As the docs say ("A pure function"): XLA drops an unused call under jit."""
    calls: list[int] = []

    def logged(x: np.ndarray) -> np.ndarray:
        calls.append(1)
        return x

    op = python_op(logged, abstract_eval=lambda x: x, name="logged")
    x = np.ones(2, np.float32)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: (op(x), x + 1)[1])(x)), x + 1)
    assert calls == []
    jax.block_until_ready(jax.jit(lambda x: jax.lax.fori_loop(0, 3, lambda i, c: op(c), x))(x))
    assert calls == [1, 1, 1]


def test_the_repr_names_the_options_not_at_their_default() -> None:
    plain = python_op(np.sin, abstract_eval=lambda x: x)
    assert repr(plain) == "PythonOp('python_op[sin]', fn=<ufunc 'sin'>, vectorized=False)"
    logged = python_op(
        np.cos,
        abstract_eval=lambda x: x,
        vectorized=True,
        takes_outputs=True,
        num_batch_dims=1,
        has_side_effect=True,
        name="logged",
    )
    assert repr(logged) == (
        "PythonOp('logged', fn=<ufunc 'cos'>, vectorized=True, takes_outputs=True, num_batch_dims=1, "
        "has_side_effect=True)"
    )
