"""Arguments of the wrong kind to the public callables that took them silently or
refused them in words naming neither the callable nor the argument: binding.Op's
constructor, python_op's options, NumPy masked arrays, binding.ops, handlers and
the dtypes helpers. Each error is a TypeError or ValueError raised before anything
is lowered, naming the callable (or op), the argument, what was expected and what
was got.
"""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr
from xla_ffi_rs import binding, dtypes, examples, python_op

ONE_RESULT = binding.same_as_operands(1)


def sin_impl(x: Any) -> tuple[jax.Array]:
    return (jnp.sin(x),)


# -- binding.Op's constructor ------------------------------------------------------


@pytest.mark.parametrize(
    ("arg", "value", "words"),
    [
        ("abstract_eval", "x", "abstract_eval: expected a callable, got str"),
        ("targets", "xla_ffi_rs.kepler", "targets: expected a dict of platform -> FFI target name, got str"),
        ("targets", {"cpu": 5}, "targets: expected a dict of platform -> FFI target name, got int for 'cpu'"),
        ("jnp_impl", 3, "jnp_impl: expected a callable or None, got int"),
        ("attributes", {"k": 1}, "attributes: expected a callable or None, got dict"),
        ("num_batch_dims", 1, "num_batch_dims: expected a callable or None, got int"),
        ("batched", 5, "batched must be (operand flags, result flags), got 5"),
        ("batched", ([1], [True]), "batched must be (operand flags, result flags) of bools"),
        ("reductions", {"0": sin_impl}, "reductions: expected a dict of result index -> jnp formula, got the key '0'"),
        ("reductions", {0: None}, "reductions: expected a dict of result index -> jnp formula, got NoneType for 0"),
        ("extra_results", {"cuda": 5}, "extra_results: expected a dict of platform -> avals rule, got int for 'cuda'"),
        ("input_output_aliases", {0: 1.0}, "input_output_aliases: expected a dict of operand index -> result index"),
        ("input_output_aliases", [(0, 0)], "input_output_aliases: expected a dict of operand index -> result index"),
        ("has_side_effect", "no", "has_side_effect: expected a bool, got str"),
        ("tokens", "ab", "tokens: expected (operand index, result index), two ints, got 'ab'"),
    ],
    ids=lambda v: v if isinstance(v, str) and " " not in v else None,
)
def test_binding_op_arguments_of_the_wrong_type_name_the_op_and_argument(arg: str, value: Any, words: str) -> None:
    kwargs: dict[str, Any] = {"abstract_eval": ONE_RESULT, "jnp_impl": sin_impl, arg: value}
    with pytest.raises(TypeError) as info:
        binding.Op("hostile_arg", **kwargs)
    assert f"binding.Op 'hostile_arg': {words}" in str(info.value)


def test_binding_op_values_that_cannot_be_right_are_value_errors() -> None:
    with pytest.raises(ValueError, match=r"binding.Op 'tok': tokens: expected non-negative indices, got \(-1, 0\)"):
        binding.Op("tok", abstract_eval=ONE_RESULT, jnp_impl=sin_impl, tokens=(-1, 0))
    with pytest.raises(ValueError, match=r"binding\.Op 'plat': targets: platform 'gpu9': .*unknown platform gpu9"):
        binding.Op("plat", abstract_eval=ONE_RESULT, targets={"gpu9": "xla_ffi_rs.kepler"})


@pytest.mark.parametrize(
    ("name", "error", "words"),
    [
        (b"op", TypeError, "binding.Op: name: expected a str, got bytes"),
        (None, TypeError, "binding.Op: name: expected a str, got NoneType"),
        ("", ValueError, "binding.Op: name: expected a non-empty str, got ''"),
        ("op\ud800", ValueError, "binding.Op: name: expected a str UTF-8 can encode"),
    ],
    ids=["bytes", "None", "empty", "surrogate"],
)
def test_binding_op_name_must_be_a_str_mlir_can_hold(name: Any, error: type[Exception], words: str) -> None:
    with pytest.raises(error) as info:
        binding.Op(name, abstract_eval=ONE_RESULT, jnp_impl=sin_impl)
    assert words in str(info.value)


def test_binding_op_takes_numpy_bools_and_runs() -> None:
    np_true: Any = np.True_  # typed bool; NumPy's bools are taken at runtime too
    np_false: Any = np.False_
    op = binding.Op(
        "np_flags", abstract_eval=ONE_RESULT, jnp_impl=sin_impl, has_side_effect=np_false, batched=([np_true], [True])
    )
    x = np.linspace(0.0, 1.0, 5)
    (y,) = jax.jit(op)(x)
    np.testing.assert_allclose(np.asarray(y), np.sin(x), rtol=1e-6)


# -- python_op's options ---------------------------------------------------------


def test_python_op_name_utf8_cannot_encode_is_refused_naming_python_op() -> None:
    # Before, jax.jit of the op failed in MLIR's words ("get(): incompatible function arguments").
    with pytest.raises(ValueError, match=r"python_op: name: expected a str UTF-8 can encode, .*'\\ud800' at index 3"):
        python_op(np.sin, abstract_eval=lambda x: x, name="bad\ud800")


@pytest.mark.parametrize(("value", "got"), [("2", "str"), (1.0, "float"), (True, "bool"), (None, None)])
def test_python_op_num_batch_dims_of_another_type_is_a_type_error(value: Any, got: str | None) -> None:
    if got is None:
        python_op(np.sin, abstract_eval=lambda x: x, num_batch_dims=value)
        return
    with pytest.raises(TypeError, match=f"python_op: num_batch_dims must be a non-negative int, got {got}"):
        python_op(np.sin, abstract_eval=lambda x: x, num_batch_dims=value)


def test_python_op_takes_numpy_ints_and_bools_for_its_options() -> None:
    calls: list[tuple[int, ...]] = []

    def f(x: np.ndarray) -> np.ndarray:
        calls.append(x.shape)
        return np.sin(x)

    # Typed int and bool; NumPy's ints and bools are taken at runtime too, as in `fixed`.
    numpy_options: dict[str, Any] = {
        "num_batch_dims": np.int64(1),
        "vectorized": np.True_,
        "takes_outputs": np.False_,
        "batched": (np.array([True]), [np.True_]),
    }
    op = python_op(f, abstract_eval=lambda x: x, name="numpy_options", **numpy_options)
    assert op.num_batch_dims == 1 and type(op.num_batch_dims) is int
    x = np.linspace(0.0, 1.0, 12).reshape(4, 3).astype(np.float32)
    y = jax.vmap(op)(x)  # vectorized: one call with the batch axis
    np.testing.assert_allclose(np.asarray(y), np.sin(x), rtol=1e-6)
    assert calls == [(4, 3)]


def test_abstract_eval_dtype_none_is_a_type_error_not_a_64_bit_one() -> None:
    class NoDtype:
        shape = (3,)
        dtype = None

    op = python_op(np.sin, abstract_eval=lambda x: NoDtype(), name="none_dtype")
    with pytest.raises(
        TypeError, match="none_dtype: abstract_eval result 0: expected a bool or numeric dtype, got None"
    ):
        op(np.ones(3, np.float32))


# -- NumPy masked arrays -----------------------------------------------------------

MASKED = np.ma.masked_array([0.1, 0.2, 0.3], mask=[False, True, False])
MASKED_WORDS = "got a NumPy masked array, which JAX does not take (its mask would be lost): pass x.filled(fill)"


@pytest.mark.parametrize(
    ("call", "where"),
    [
        (lambda: xr.kepler(MASKED, 0.3), "kepler: mean_anomaly: "),
        (lambda: xr.kepler(0.5, np.ma.masked_array(0.3, mask=True)), "kepler: eccentricity: "),
        (lambda: xr.rms_norm(MASKED, np.ones(3)), "rms_norm: x: "),
        (lambda: xr.rms_norm(np.ones((2, 3)), MASKED), "rms_norm: weight: "),
        (lambda: xr.rms_norm_inplace(MASKED, np.ones(3)), "rms_norm_inplace: x: "),
        (lambda: python_op(np.sin, abstract_eval=lambda x: x, name="masked_in")(MASKED), "masked_in: operand 0 (x): "),
        (
            lambda: binding.ops(xr.declarations(), kepler={})["kepler"](
                MASKED.astype(np.float32), np.ones(3, np.float32)
            ),
            "xla_ffi_rs.kepler: operand 0 (mean_anomaly): ",
        ),
    ],
    ids=["kepler_m", "kepler_e_0d", "rms_norm_x", "rms_norm_weight", "rms_norm_inplace", "python_op", "declared_op"],
)
def test_a_masked_array_is_refused_naming_the_function_and_argument(call: Any, where: str) -> None:
    # Before, kepler read the data and dropped the mask (the masked element was solved
    # as if valid), and the others raised JAX's ValueError, which names neither.
    with pytest.raises(TypeError) as info:
        call()
    assert where in str(info.value) and MASKED_WORDS in str(info.value)


# -- binding.ops, handlers, the dtypes helpers -------------------------------------


@pytest.mark.parametrize(
    ("declarations", "got"),
    [(5, "got int"), (["xla_ffi_rs.kepler"], "got list"), ({1: {}}, "got the key 1 (int)")],
    ids=["int", "list", "int_key"],
)
def test_binding_ops_wants_a_dict_of_declarations(declarations: Any, got: str) -> None:
    # Before: "'int' object has no attribute 'rsplit'" (an AttributeError), or "not iterable".
    words = f"binding.ops: declarations: expected a dict of target name -> declaration, {got}"
    with pytest.raises(TypeError, match=re.escape(words)):
        binding.ops(declarations)


def test_handlers_of_an_unknown_platform_name_the_function() -> None:
    with pytest.raises(ValueError, match=r'^handlers: platform: unknown platform "CPU"; expected "cpu" or "cuda"'):
        xr.handlers("CPU")
    with pytest.raises(ValueError, match=r'^examples\.handlers: platform: unknown platform "tpu"'):
        examples.handlers("tpu")


@pytest.mark.parametrize("fn", [dtypes.result_dtype, dtypes.accumulation_dtype], ids=lambda f: f.__name__)
def test_dtypes_helpers_name_themselves_and_refuse_none(fn: Any) -> None:
    name = fn.__name__
    # None was NumPy's default float64: result_dtype(None, float32) gave float64.
    with pytest.raises(TypeError, match=f"{name}: x: expected a float dtype .*float32.*, got None"):
        fn(None, np.float32)
    with pytest.raises(TypeError, match=f"{name}: w: expected a float dtype .*, got 'abc'"):
        fn(np.float32, "abc")
    with pytest.raises(TypeError, match=f"{name}: no float promotion for dtypes int32 and float32"):
        fn(np.int32, np.float32)
    assert fn(jnp.bfloat16, np.float16) == np.float32


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"reductions": "x"}, "reductions: expected a dict of result index -> jnp formula, got str"),
        ({"input_output_aliases": [(0, 0)]}, "input_output_aliases: expected a dict of operand index -> result index"),
    ],
    ids=["reductions", "input_output_aliases"],
)
def test_binding_op_options_of_the_wrong_type_name_the_target(kwargs: dict[str, Any], words: str) -> None:
    # Before: "dictionary update sequence element #0 has length 1; 2 is required".
    with pytest.raises(TypeError) as info:
        binding.op(xr.declarations()["xla_ffi_rs.kepler"], **kwargs)
    assert f"binding.op: xla_ffi_rs.kepler: {words}" in str(info.value)


def test_infer_refuses_a_bool_as_a_dimension() -> None:
    decl = xr.declarations()["xla_ffi_rs.kepler"]
    # Before, (True,) was read as the shape (1,).
    with pytest.raises(
        TypeError, match=r"xla_ffi_rs.kepler: operand 0 \(mean_anomaly\): expected a shape \(a tuple of ints\)"
    ):
        binding.infer(decl, [(True,), (3,)], ["float32", "float32"])
    numpy_dims: Any = [(np.int64(3),), (3,)]  # NumPy ints are dimensions, as in a NumPy shape
    assert binding.infer(decl, numpy_dims, ["float32", "float32"])[0] == [((3,), "float32")] * 2


@pytest.mark.filterwarnings("ignore:Implicit conversion of an array to a dtype:DeprecationWarning")
def test_infer_refuses_a_prng_key_as_a_dtype_naming_the_operand() -> None:
    # A key array where its dtype belongs (NumPy reads other arrays as their dtype, with a warning).
    decl = xr.declarations()["xla_ffi_rs.kepler"]
    # Before: JAX's ValueError "Could not convert Array(...) to a NumPy dtype", naming no operand.
    with pytest.raises(TypeError, match=r"xla_ffi_rs.kepler: operand 1 \(eccentricity\): expected a dtype"):
        binding.infer(decl, [(3,), (3,)], ["float32", jax.random.key(0)])


def test_a_python_op_whose_results_have_no_elements_is_not_run() -> None:
    # What docs/python_op.md says: XLA has nothing to compute, so the function is not
    # called (and the wrong shape it would return is not seen), eager or under jit.
    calls: list[tuple[int, ...]] = []

    def f(x: np.ndarray) -> np.ndarray:
        calls.append(x.shape)
        return np.zeros(3, np.float32)

    op = python_op(f, abstract_eval=lambda x: jax.ShapeDtypeStruct((0,), np.float32), name="no_elements")
    for call in (op, jax.jit(op)):
        y = call(np.ones(3, np.float32))
        assert y.shape == (0,) and y.dtype == np.float32
    assert calls == []


# -- what binding.Op's own rules return -------------------------------------------


def test_binding_op_abstract_eval_may_give_shape_dtype_structs_or_one_bare_aval() -> None:
    # A ShapeDtypeStruct (what python_op takes) failed with a bare AssertionError.
    x = np.linspace(0.0, 1.0, 3)
    for k, rule in enumerate([lambda x: [jax.ShapeDtypeStruct(x.shape, x.dtype)], lambda x: x]):
        op = binding.Op(f"avals_{k}", abstract_eval=rule, jnp_impl=sin_impl)
        (y,) = jax.jit(op)(x)
        np.testing.assert_allclose(np.asarray(y), np.sin(x), rtol=1e-6)


class BadAval:
    shape = (3,)
    dtype: Any = "float99"


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        (
            lambda x: None,
            "abstract_eval must return a sequence of avals (jax.core.ShapedArray, or jax.ShapeDtypeStruct), got NoneType",
        ),
        (
            lambda x: ["x"],
            "abstract_eval must return a sequence of avals (jax.core.ShapedArray, or jax.ShapeDtypeStruct); result 0 is str",
        ),
        (lambda x: [BadAval()], "abstract_eval result 0: expected a dtype, got 'float99'"),
    ],
    ids=["None", "str", "dtype_bad"],
)
def test_binding_op_abstract_eval_giving_no_avals_names_the_op(rule: Any, words: str) -> None:
    op = binding.Op("bad_avals", abstract_eval=rule, jnp_impl=sin_impl)
    with pytest.raises(TypeError) as info:
        jax.jit(op)(np.ones(3, np.float32))
    assert f"bad_avals: {words}" in str(info.value)


def test_binding_op_abstract_eval_shape_of_negative_dims_names_the_op() -> None:
    class Aval:
        shape = (-1,)
        dtype = np.dtype(np.float32)

    aval: Any = Aval()  # shape and dtype, as an aval has
    op = binding.Op("neg_dims", abstract_eval=lambda x: [aval], jnp_impl=sin_impl)
    with pytest.raises(
        TypeError, match=r"neg_dims: abstract_eval result 0: expected a shape of non-negative ints, got \(-1,\)"
    ):
        jax.jit(op)(np.ones(3, np.float32))


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        (lambda p, t: None, "the JVP rule must return a pair (outputs, tangents), got NoneType"),
        (
            lambda p, t: ([jnp.sin(p[0])],),
            "the JVP rule must return a pair (outputs, tangents), got a tuple of length 1",
        ),
        (lambda p, t: ([jnp.sin(p[0])], []), "the JVP rule gave 1 outputs but 0 tangents"),
        (
            lambda p, t: ([jnp.sin(p[0])], [jnp.ones(4, jnp.float32)]),
            "the JVP rule's tangent for result 0: expected float32[3] (the output's shape and dtype), got float32[4]",
        ),
        (
            lambda p, t: ([jnp.sin(p[0])], [jnp.ones(3, jnp.int32)]),
            "the JVP rule's tangent for result 0: expected float32[3] (the output's shape and dtype), got int32[3]",
        ),
    ],
    ids=["None", "one", "count", "shape", "dtype"],
)
def test_binding_op_jvp_rule_results_are_checked_naming_the_op(rule: Any, words: str) -> None:
    # A tangent of another shape or dtype was taken as it was: jax.jvp gave a
    # float32[4] tangent for a float32[3] result, with no error.
    op = binding.Op("bad_jvp", abstract_eval=ONE_RESULT, jnp_impl=sin_impl)
    op.def_jvp(rule)
    x = np.linspace(0.0, 1.0, 3).astype(np.float32)
    with pytest.raises(TypeError) as info:
        jax.jvp(lambda a: op(a)[0], (x,), (x,))
    assert f"bad_jvp: {words}" in str(info.value)


def test_binding_op_jvp_rule_that_fits_runs() -> None:
    op = binding.Op("good_jvp", abstract_eval=ONE_RESULT, jnp_impl=sin_impl)
    op.def_jvp(lambda p, t: ([jnp.sin(p[0])], [jnp.cos(p[0]) * t[0]]))
    x = np.linspace(0.0, 1.0, 3)
    y, dy = jax.jvp(lambda a: op(a)[0], (x,), (np.ones(3),))
    np.testing.assert_allclose(np.asarray(dy), np.cos(x), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(y), np.sin(x), rtol=1e-6)


def twice(x: Any) -> tuple[jax.Array]:
    return (2 * x,)


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        (lambda ct, x: None, "must return a tuple of one cotangent (or None) per operand (1), got NoneType"),
        (lambda ct, x: ct[0], "must return a tuple of one cotangent (or None) per operand (1), got ArrayImpl"),
        (lambda ct, x: [], "returned 0 cotangents for 1 operand"),
    ],
    ids=["None", "bare", "none_given"],
)
def test_binding_op_transpose_rule_results_are_checked_naming_the_op(rule: Any, words: str) -> None:
    op = binding.Op("bad_transpose", abstract_eval=ONE_RESULT, jnp_impl=twice)
    op.def_jvp(lambda p, t: (op(*p), op(*t)))
    op.def_transpose(rule)
    with pytest.raises(TypeError) as info:
        jax.grad(lambda a: op(a)[0].sum())(np.ones(3, np.float32))
    assert f"bad_transpose: the transpose rule {words}" in str(info.value)


def test_binding_op_transpose_rule_may_give_a_generator() -> None:
    op = binding.Op("gen_transpose", abstract_eval=ONE_RESULT, jnp_impl=twice)
    op.def_jvp(lambda p, t: (op(*p), op(*t)))

    def rule(ct: Any, x: Any) -> Any:  # typed to return a sequence; a generator is taken too
        return (2 * c for c in ct)

    op.def_transpose(rule)
    np.testing.assert_allclose(np.asarray(jax.grad(lambda a: op(a)[0].sum())(np.ones(3))), np.full(3, 2.0))


@pytest.mark.parametrize(
    ("rule", "words"),
    [
        (lambda xs, ds: None, "the batching rule must return a pair (outputs, batch axes), got NoneType"),
        (lambda xs, ds: ((2 * xs[0],), ()), "the batching rule gave 1 outputs but 0 batch axes"),
        (
            lambda xs, ds: ((2 * xs[0],), (5,)),
            "the batching rule's batch axis for output 0: expected None or an axis of the rank-2 output (0 to 1), got 5",
        ),
    ],
    ids=["None", "count", "axis"],
)
def test_binding_op_batching_rule_results_are_checked_naming_the_op(rule: Any, words: str) -> None:
    # The axis out of range was an IndexError from inside JAX.
    op = binding.Op("bad_batching", abstract_eval=ONE_RESULT, jnp_impl=twice)
    op.def_batching(rule)
    with pytest.raises(TypeError) as info:
        jax.vmap(op)(np.ones((2, 3), np.float32))
    assert f"bad_batching: {words}" in str(info.value)
