"""nonlinear_op: an op from NumPy functions for the value, the JVP and the VJP.

Derivatives are compared with the closed forms (float64) and with
``jax.test_util.check_grads``; errors by exception type and key words.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from helpers import Calls
from xla_ffi_rs import nonlinear_op


def zero_if_none(a):
    return 0.0 if a is None else a


def sin_op():
    return nonlinear_op(
        np.sin,
        lambda x, dx: np.cos(x) * dx,
        lambda x, ct: np.cos(x) * ct,
        abstract_eval=lambda x: x,
    )


def test_nonlinear_op_every_transformation() -> None:
    op = sin_op()
    x = jnp.linspace(-2.0, 2.0, 7)
    xn = np.asarray(x)
    np.testing.assert_allclose(np.asarray(jax.jit(op)(x)), np.sin(xn), rtol=1e-15)
    _, t = jax.jvp(op, (x,), (jnp.full(7, 2.0),))
    np.testing.assert_allclose(np.asarray(t), 2 * np.cos(xn), rtol=1e-15)
    np.testing.assert_allclose(np.asarray(jax.grad(lambda v: op(v).sum())(x)), np.cos(xn), rtol=1e-15)
    np.testing.assert_allclose(
        np.asarray(jax.jit(jax.vmap(jax.grad(lambda v: op(v)[0])))(x[:, None]))[:, 0], np.cos(xn)
    )
    check_grads(op, (x,), order=1, modes=("fwd", "rev"))
    # The JVP is linear in the tangent: its transpose is the VJP, and jvp of vjp works.
    _, vjp = jax.vjp(op, x)
    _, t2 = jax.jvp(vjp, (jnp.ones(7),), (jnp.full(7, 3.0),))
    np.testing.assert_allclose(np.asarray(t2[0]), 3 * np.cos(xn), rtol=1e-15)


def test_nonlinear_op_second_derivative_is_a_clear_error() -> None:
    op = sin_op()
    for second in (jax.hessian, lambda f: jax.jacfwd(jax.jacfwd(f))):
        with pytest.raises(ValueError, match=r"nonlinear_op\[sin\].*no second derivative in its operands"):
            second(lambda v: op(v).sum())(jnp.ones(3))


def demo_op(**kwargs):
    """JAXbind's nonlinear demo: (x, y) -> (x y, y^2), x fixed."""

    def f(x, y):
        return x * y, y * y

    def f_jvp(x, y, dy):
        return x * dy, 2 * y * dy

    def f_vjp(x, y, a, b):
        return x * zero_if_none(a) + 2 * y * zero_if_none(b)

    return nonlinear_op(f, Calls(f_jvp), Calls(f_vjp), abstract_eval=lambda x, y: (y, y), fixed=(0,), **kwargs)


def test_nonlinear_op_fixed_operand_and_symbolic_zero_cotangent() -> None:
    op = demo_op()
    x, y = jnp.full(3, 4.0), jnp.arange(1.0, 4.0)
    yn = np.asarray(y)
    (a, _), (ta, tb) = jax.jvp(functools.partial(op, x), (y,), (jnp.ones(3),))
    np.testing.assert_allclose(np.asarray(a), 4 * yn)
    np.testing.assert_allclose(np.asarray(ta), np.full(3, 4.0))
    np.testing.assert_allclose(np.asarray(tb), 2 * yn)
    g = jax.grad(lambda v: op(x, v)[1].sum())(y)  # the first result's cotangent is a symbolic zero
    np.testing.assert_allclose(np.asarray(g), 2 * yn)
    check_grads(functools.partial(op, x), (y,), order=1)
    with pytest.raises(ValueError, match=r"nonlinear_op\[.*f\]: cannot differentiate with respect to operand 0 \(x\)"):
        jax.grad(lambda v: op(v, y)[0].sum())(x)
    with pytest.raises(ValueError, match=r"operand 0 \(x\).*declared fixed"):
        jax.jvp(lambda v: op(v, y), (x,), (x,))


def test_nonlinear_op_functions_see_none_for_zero_cotangents() -> None:
    vjp_calls = Calls(lambda x, ct_a, ct_b: (0 if ct_a is None else ct_a) + (0 if ct_b is None else 2 * x * ct_b))
    jvp_calls = Calls(lambda x, dx: (dx, 2 * x * dx))
    op = nonlinear_op(lambda x: (x, x * x), jvp_calls, vjp_calls, abstract_eval=lambda x: (x, x))
    x = jnp.arange(1.0, 4.0)
    g = jax.grad(lambda v: op(v)[1].sum())(x)
    np.testing.assert_allclose(np.asarray(g), 2 * np.asarray(x))
    assert vjp_calls.args[-1][1] is None and vjp_calls.args[-1][2] is not None
    # No tangent at all: neither derivative function is called.
    n = len(jvp_calls.args)
    _, (t0, t1) = jax.jvp(lambda v: op(x), (x,), (x,))
    assert len(jvp_calls.args) == n and not np.any(np.asarray(t0)) and not np.any(np.asarray(t1))


def test_nonlinear_op_bad_arguments() -> None:
    with pytest.raises(TypeError, match="nonlinear_op: f_vjp must be callable, got NoneType"):
        nonlinear_op(np.sin, np.cos, None, abstract_eval=lambda x: x)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nonlinear_op: fixed must hold distinct"):
        nonlinear_op(np.sin, np.cos, np.cos, abstract_eval=lambda x: x, fixed=(0, 0))
