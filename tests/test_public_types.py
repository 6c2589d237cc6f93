"""The public API's static types, checked by mypy and run by pytest.

``.ci/lint_python.sh`` type-checks this file with ``mypy --strict``: each
``assert_type`` states the type mypy must infer for a result, and each
``# type: ignore[arg-type]`` marks a call mypy must reject (with
``--warn-unused-ignores``, part of ``--strict`` and of the project's settings, an
ignore that nothing needs fails the check, so a parameter typed ``Any`` again
would). pytest runs the same lines: the results have those types at runtime too,
and the calls mypy rejects raise TypeError before anything is lowered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, assert_type

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.export import DisabledSafetyCheck

import xla_ffi_rs as xr
from xla_ffi_rs.binding import BatchRule, Op, elementwise_batching, move_batch_axis_to_front, same_as_operands
from xla_ffi_rs.python_ops import PythonOp

X = jnp.ones((2, 3))
W = jnp.full((3,), 2.0)


def test_kepler_types() -> None:
    sin_e, cos_e = assert_type(xr.kepler(jnp.zeros(3), 0.3), tuple[jax.Array, jax.Array])
    assert isinstance(sin_e, jax.Array) and isinstance(cos_e, jax.Array)
    # Every kind of jax.typing.ArrayLike: NumPy arrays and scalars, Python numbers.
    for s, c in (xr.kepler(np.zeros(3), np.float32(0.3)), xr.kepler(1, 0.5), xr.kepler(0.5, np.zeros(2))):
        assert isinstance(s, jax.Array) and isinstance(c, jax.Array)


def test_kepler_rejects_what_is_not_an_array() -> None:
    # mypy accepted this call while the parameters were typed Any.
    with pytest.raises(
        TypeError, match=r"^kepler: mean_anomaly: expected a real array \(floats or integers\), got str$"
    ):
        xr.kepler("abc", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^kepler: mean_anomaly: .*, got str$"):
        xr.kepler("abc", 0.3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^kepler: eccentricity: .*, got NoneType$"):
        xr.kepler(0.5, None)  # type: ignore[arg-type]


def test_rms_norm_types() -> None:
    y = assert_type(xr.rms_norm(X, W), jax.Array)
    assert isinstance(y, jax.Array)
    y = assert_type(xr.rms_norm(np.ones((2, 3)), np.ones(3), eps=0.0), jax.Array)
    assert isinstance(y, jax.Array)
    y = assert_type(xr.rms_norm_inplace(X, W, 1e-6), jax.Array)
    assert isinstance(y, jax.Array)


def test_rms_norm_rejects_what_is_not_an_array_or_a_float() -> None:
    with pytest.raises(TypeError, match=r"^rms_norm: x: expected a float array, got NoneType$"):
        xr.rms_norm(None, W)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^rms_norm: eps: expected a Python float >= 0, got str$"):
        xr.rms_norm(X, W, eps="1e-5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^rms_norm_inplace: weight: expected a float array, got str$"):
        xr.rms_norm_inplace(X, "w")  # type: ignore[arg-type]


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


def test_package_level_names_types() -> None:
    """The names the package gives for what only its private native module had."""
    from xla_ffi_rs import dtypes, examples, python_ops
    from xla_ffi_rs.ops import kepler as kepler_module
    from xla_ffi_rs.ops import rms_norm as rms_norm_module

    assert isinstance(assert_type(xr.has_cuda, bool), bool)
    version = assert_type(xr.min_api_version(), tuple[int, int])
    assert all(isinstance(v, int) for v in version)
    assert isinstance(assert_type(xr.handlers("cpu"), dict[str, object]), dict)
    assert isinstance(assert_type(examples.handlers("cpu"), dict[str, object]), dict)
    assert isinstance(assert_type(python_ops.registered_functions(), int), int)
    assert isinstance(assert_type(rms_norm_module.bwd_workspace_rows(17), int), int)
    assert isinstance(assert_type(dtypes.result_dtype(np.float16, np.float32), np.dtype), np.dtype)
    s, c = assert_type(kepler_module.kepler_jnp(jnp.zeros(2), jnp.zeros(2)), tuple[jax.Array, jax.Array])
    assert isinstance(s, jax.Array) and isinstance(c, jax.Array)
    with pytest.raises(TypeError, match=r"^handlers: platform: expected a platform name \(str\), got int$"):
        xr.handlers(0)  # type: ignore[arg-type]
