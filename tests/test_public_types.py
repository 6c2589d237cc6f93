"""The public API's static types, checked by mypy and run by pytest.

``.ci/lint_python.sh`` type-checks this file with ``mypy --strict``: each
``assert_type`` states the type mypy must infer for a result, and each
``# type: ignore[arg-type]`` marks a call mypy must reject (with
``--warn-unused-ignores``, part of ``--strict`` and of the project's settings, an
ignore that nothing needs fails the check, so a parameter typed ``Any`` again
would). pytest runs the same lines: the results have those types at runtime too,
and the calls mypy rejects raise TypeError before anything is lowered.

Each op's own lines are in ``tests/ops/<op>/test_<op>_types.py`` (type-checked the
same way); what every op's public function must do is checked here for each op
with a fixture (tests/op_fixtures.py): its array parameters are typed
``jax.typing.ArrayLike`` and its result ``jax.Array`` (a tuple of them for several
results), every kind of array-like gives jax.Arrays with the reference's values, and
a str or None in place of an array raises TypeError naming the function and the
parameter.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from typing import Any, assert_type

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.export import DisabledSafetyCheck

import xla_ffi_rs as xr
from op_fixtures import OpFixture, fixtures
from xla_ffi_rs.binding import BatchRule, Op, elementwise_batching, move_batch_axis_to_front, same_as_operands
from xla_ffi_rs.python_ops import PythonOp


def test_package_helpers_types() -> None:
    checks = assert_type(xr.export_checks(), list[DisabledSafetyCheck])
    assert checks and all(isinstance(c, DisabledSafetyCheck) for c in checks)
    names = assert_type(xr.target_names("xla_ffi_rs.kepler"), dict[str, str])
    assert names["cpu"] == "xla_ffi_rs.kepler"
    assert isinstance(assert_type(xr.__version__, str), str)
    with pytest.raises(TypeError, match=r"^target_names: name: expected a target name \(str\), got NoneType$"):
        xr.target_names(None)  # type: ignore[arg-type]


def _cube(x: np.ndarray) -> np.ndarray:
    cube: np.ndarray = x**3
    return cube


def test_python_op_types() -> None:
    # As a function and as a decorator, python_op gives a PythonOp.
    op = assert_type(xr.python_op(_cube, abstract_eval=lambda x: x), PythonOp)
    assert isinstance(op, PythonOp)
    decorator = assert_type(xr.python_op(abstract_eval=lambda x: x), Callable[[Callable[..., Any]], PythonOp])

    @xr.python_op(abstract_eval=lambda x: x, vectorized=True)
    def square(x: np.ndarray) -> np.ndarray:
        y: np.ndarray = x * x
        return y

    assert_type(square, PythonOp)
    assert isinstance(square, PythonOp) and isinstance(decorator(_cube), PythonOp)
    np.testing.assert_array_equal(np.asarray(jax.jit(square)(jnp.arange(3.0))), [0.0, 1.0, 4.0])
    # A rule keeps its type through the decorators that register it.
    rule = square.def_jvp_rule(_square_jvp)
    assert rule is _square_jvp
    assert_type(rule((jnp.ones(2),), (jnp.ones(2),)), tuple[jax.Array, jax.Array])
    assert float(jax.grad(square)(3.0)) == 6.0
    with pytest.raises(TypeError, match=r"^python_op: fn must be callable, got int$"):
        xr.python_op(3, abstract_eval=lambda x: x)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"abstract_eval"):
        xr.python_op(_cube)  # type: ignore[call-overload]


def _scale(a: np.ndarray, x: np.ndarray) -> np.ndarray:
    y: np.ndarray = a * x
    return y


@pytest.mark.parametrize("fixed", [(0,), [0], (np.int64(0),), np.arange(1)], ids=["tuple", "list", "np.int64", "array"])
def test_fixed_takes_ints_and_numpy_integers(fixed: tuple[int] | list[int] | tuple[np.int64] | np.ndarray) -> None:
    # Each form the function accepts type-checks, in python_op and its siblings.
    op = assert_type(xr.python_op(_scale, abstract_eval=lambda a, x: x, fixed=fixed), PythonOp)
    lin = assert_type(
        xr.linear_op(_scale, _scale, abstract_eval=lambda a, x: x, abstract_eval_T=lambda a, x: x, fixed=fixed),
        PythonOp,
    )
    a, x = jnp.full(2, 3.0), jnp.ones(2)
    assert op.fixed == (0,)
    np.testing.assert_allclose(np.asarray(jax.jit(op)(a, x)), [3.0, 3.0])
    np.testing.assert_allclose(np.asarray(jax.grad(lambda x: lin(a, x).sum())(x)), [3.0, 3.0])


def test_fixed_refuses_an_int_or_a_name() -> None:
    with pytest.raises(TypeError, match=r"^python_op: fixed must be a sequence of operand indices, got 0$"):
        xr.python_op(_scale, abstract_eval=lambda a, x: x, fixed=0)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=r"^python_op: fixed must hold operand indices \(ints, not names\), got 'a'$"):
        xr.python_op(_scale, abstract_eval=lambda a, x: x, fixed="a")  # type: ignore[arg-type]


def _square_jvp(primals: tuple[jax.Array], tangents: tuple[jax.Array]) -> tuple[jax.Array, jax.Array]:
    (x,), (t,) = primals, tangents
    return x * x, 2 * x * t


def test_binding_op_types() -> None:
    square = Op("types_square", abstract_eval=same_as_operands(1), jnp_impl=lambda x: (x * x,))
    outs = assert_type(square(jnp.arange(3.0)), tuple[jax.Array, ...])
    assert len(outs) == 1 and isinstance(outs[0], jax.Array)
    assert_type(elementwise_batching(square), BatchRule)
    moved = assert_type(move_batch_axis_to_front(jnp.ones((2, 3)), 1, 3), jax.Array)
    assert moved.shape == (3, 2)


def test_binding_op_rules_keep_their_types() -> None:
    """def_jvp, def_transpose and def_batching return the rule as it is, so a
    decorated rule keeps its own signature (not the rule alias, which is all Any)."""
    double = Op("types_double", abstract_eval=same_as_operands(1), jnp_impl=lambda x: (2 * x,))

    @double.def_jvp
    def double_jvp(
        primals: tuple[jax.Array, ...], tangents: tuple[jax.Array, ...]
    ) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]]:
        return double(*primals), double(*tangents)

    @double.def_transpose
    def double_transpose(cts: tuple[jax.Array, ...], x: object) -> tuple[jax.Array]:
        return (2 * cts[0],)

    @double.def_batching
    def double_batching(
        operands: tuple[jax.Array, ...], dims: tuple[int | None, ...]
    ) -> tuple[tuple[jax.Array, ...], tuple[int | None]]:
        return double(*operands), (dims[0],)

    one = jnp.ones(2)
    assert_type(double_jvp((one,), (one,)), tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]])
    assert_type(double_transpose((one,), None), tuple[jax.Array])
    assert_type(double_batching((one,), (0,)), tuple[tuple[jax.Array, ...], tuple[int | None]])
    np.testing.assert_array_equal(np.asarray(jax.grad(lambda x: double(x)[0].sum())(one)), [2.0, 2.0])
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda x: double(x)[0])(jnp.ones((3, 2)))), np.full((3, 2), 2.0))


def test_modules_are_attributes_of_the_package() -> None:
    """After ``import xla_ffi_rs`` alone, its public modules are attributes, for type
    checkers as at runtime (mypy: 'Module has no attribute' otherwise)."""
    s, c = assert_type(xr.ops.kepler.kepler_jnp(jnp.zeros(2), jnp.zeros(2)), tuple[jax.Array, jax.Array])
    np.testing.assert_allclose(np.asarray(s), [0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(np.asarray(c), [1.0, 1.0])
    assert_type(xr.ops.rms_norm.bwd_workspace_rows(4), int)
    assert_type(xr.ops.rms_norm_inplace.rms_norm_inplace(np.ones(2), np.ones(2)), jax.Array)
    assert isinstance(assert_type(xr.sharding.shardy_partitions(), bool), bool)
    assert assert_type(xr.dtypes.result_dtype(np.float16, np.float32), np.dtype) == np.float32
    assert assert_type(xr.python_ops.core_axes(3, (0,)), list[int]) == [1, 2]


def test_package_level_names_types() -> None:
    """The names the package gives for what only its private native module had."""
    from xla_ffi_rs import dtypes, examples, python_ops

    assert isinstance(assert_type(xr.has_cuda, bool), bool)
    version = assert_type(xr.min_api_version(), tuple[int, int])
    assert all(isinstance(v, int) for v in version)
    assert isinstance(assert_type(xr.handlers("cpu"), dict[str, object]), dict)
    assert isinstance(assert_type(examples.handlers("cpu"), dict[str, object]), dict)
    assert isinstance(assert_type(python_ops.registered_functions(), int), int)
    assert isinstance(assert_type(python_ops.pooled_bytes(), int), int)
    assert isinstance(assert_type(dtypes.result_dtype(np.float16, np.float32), np.dtype), np.dtype)
    with pytest.raises(TypeError, match=r"^handlers: platform: expected a platform name \(str\), got int$"):
        xr.handlers(0)  # type: ignore[arg-type]


@pytest.mark.parametrize("op", fixtures(), ids=lambda o: o.name)
def test_each_op_function_is_typed_array_like_to_arrays(op: OpFixture) -> None:
    hints = typing.get_type_hints(op.function)
    for name in op.parameters:
        assert hints[name] == jax.typing.ArrayLike, (op.name, name, hints[name])
    n = len(op.reference(*op.inputs(np.random.default_rng(0), op.sharding.families[0].shapes)))
    want = jax.Array if n == 1 else tuple[(jax.Array,) * n]  # type: ignore[misc]
    assert hints["return"] == want, (op.name, hints["return"], want)


@pytest.mark.parametrize("kind", ["arrays", "numpy_scalars", "python_numbers"])
@pytest.mark.parametrize("op", fixtures(), ids=lambda o: o.name)
def test_each_op_function_takes_every_kind_of_array_like(op: OpFixture, kind: str) -> None:
    rng = np.random.default_rng(1)
    if kind == "arrays":
        args: tuple[Any, ...] = op.inputs(rng, op.sharding.families[0].shapes)
    else:
        scalars = op.inputs(rng, tuple(() for _ in op.parameters))
        args = tuple(np.float64(a) if kind == "numpy_scalars" else float(a) for a in scalars)
    got = op(*args)
    wants = op.reference(*(np.asarray(a, np.float64) for a in args))
    assert len(got) == len(wants)
    for g, w in zip(got, wants, strict=True):
        assert isinstance(g, jax.Array), (op.name, kind, type(g))
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=1e-6, atol=1e-6, err_msg=f"{op.name} ({kind})")


@pytest.mark.parametrize("bad", ["abc", None])
@pytest.mark.parametrize("op", fixtures(), ids=lambda o: o.name)
def test_each_op_function_rejects_what_is_not_an_array(op: OpFixture, bad: object) -> None:
    valid = op.inputs(np.random.default_rng(2), op.sharding.families[0].shapes)
    fn = op.function.__name__
    for i, name in enumerate(op.parameters):
        args = [*valid[:i], bad, *valid[i + 1 :]]
        with pytest.raises(TypeError, match=rf"^{fn}: {name}: expected .*, got {type(bad).__name__}$"):
            op(*args)
