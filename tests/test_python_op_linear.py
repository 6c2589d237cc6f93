"""linear_op and multilinear_op: every transformation from a function and its
transpose(s), fixed operands and symbolic zeros.

Values are compared with NumPy run directly (float64); derivatives with
``jax.test_util.check_grads`` and with the closed forms of the linear maps.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from helpers import Calls
from xla_ffi_rs import linear_op, multilinear_op, nonlinear_op

RNG = np.random.default_rng(3)
A = RNG.standard_normal((3, 4))


def shaped(shape, like):
    return jax.ShapeDtypeStruct(shape, like.dtype)


def matvec_op():
    return linear_op(
        lambda x: A @ x,
        lambda c: A.T @ c,
        abstract_eval=lambda x: shaped((3,), x),
        abstract_eval_T=lambda c: shaped((4,), c),
    )


def test_linear_op_every_transformation_against_the_matrix() -> None:
    op = matvec_op()
    x, c = jnp.asarray(RNG.standard_normal(4)), jnp.asarray(RNG.standard_normal(3))
    np.testing.assert_allclose(np.asarray(op(x)), A @ np.asarray(x), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jax.jit(op)(x)), A @ np.asarray(x), rtol=1e-14)
    _, t = jax.jvp(op, (x,), (2 * x,))
    np.testing.assert_allclose(np.asarray(t), 2 * A @ np.asarray(x), rtol=1e-14)
    _, vjp = jax.vjp(op, x)
    np.testing.assert_allclose(np.asarray(vjp(c)[0]), A.T @ np.asarray(c), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jax.grad(lambda v: op(v) @ c)(x)), A.T @ np.asarray(c), rtol=1e-14)
    (lt,) = jax.jit(jax.linear_transpose(op, x))(c)
    np.testing.assert_allclose(np.asarray(lt), A.T @ np.asarray(c), rtol=1e-14)
    xs = jnp.asarray(RNG.standard_normal((5, 4)))
    np.testing.assert_allclose(np.asarray(jax.vmap(op)(xs)), np.asarray(xs) @ A.T, rtol=1e-14)
    check_grads(op, (x,), order=2, modes=("fwd", "rev"))
    # The transpose is a linear op too: reverse of reverse is the op again.
    (back,) = jax.linear_transpose(lambda c: jax.linear_transpose(op, x)(c)[0], c)(x)
    np.testing.assert_allclose(np.asarray(back), A @ np.asarray(x), rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jax.hessian(lambda v: op(v) @ c)(x)), np.zeros((4, 4)))


def test_linear_op_fixed_operand_and_the_error_naming_it() -> None:
    def matvec(a, x, *, scale):
        return scale * (a @ x)

    def matvec_t(a, c, *, scale):
        return scale * (a.T @ c)

    op = linear_op(
        matvec,
        matvec_t,
        abstract_eval=lambda a, x, **_: shaped(a.shape[:1], x),
        abstract_eval_T=lambda a, c, **_: shaped(a.shape[1:], c),
        fixed=(0,),
    )
    a, x = jnp.asarray(A), jnp.asarray(RNG.standard_normal(4))
    c = jnp.asarray(RNG.standard_normal(3))
    np.testing.assert_allclose(np.asarray(op(a, x, scale=2.0)), 2 * A @ np.asarray(x), rtol=1e-14)
    g = jax.grad(lambda v: op(a, v, scale=2.0) @ c)(x)
    np.testing.assert_allclose(np.asarray(g), 2 * A.T @ np.asarray(c), rtol=1e-14)
    check_grads(lambda v: op(a, v, scale=0.5), (x,), order=2)
    for differentiate in (jax.grad, jax.jacfwd):
        with pytest.raises(ValueError, match=r"linear_op\[.*matvec\].*operand 0 \(a\).*fixed"):
            differentiate(lambda m: op(m, x, scale=1.0).sum())(a)
    # A constant passed through stop_gradient is fine.
    jax.grad(lambda m, v: op(jax.lax.stop_gradient(m), v, scale=1.0).sum(), argnums=1)(a, x)


def test_linear_op_passes_none_for_a_symbolic_zero_tangent() -> None:
    """An op linear in (x, y) jointly: differentiating with respect to x alone calls
    f with None for y's tangent, and f_T with None for a zero cotangent."""

    def f(x, y):
        return (x if y is None else x + 2 * y) if x is not None else 2 * y, 3 * x

    def f_t(c, d):
        cx = (0 if c is None else c) + (0 if d is None else 3 * d)
        cy = 0 * cx if c is None else 2 * c
        return cx, cy

    fc, tc = Calls(f), Calls(f_t)
    op = linear_op(fc, tc, abstract_eval=lambda x, y: (x, x), abstract_eval_T=lambda c, d: (c, c))
    x, y = jnp.arange(3.0), jnp.ones(3)
    _, (t0, t1) = jax.jvp(lambda v: op(v, y), (x,), (jnp.ones(3),))
    np.testing.assert_allclose(np.asarray(t0), np.ones(3))
    np.testing.assert_allclose(np.asarray(t1), 3 * np.ones(3))
    assert fc.args[-1][1] is None and fc.args[-1][0] is not None
    g = jax.grad(lambda v: op(v, y)[1].sum())(x)  # the first result's cotangent is zero
    np.testing.assert_allclose(np.asarray(g), 3 * np.ones(3))
    assert tc.args[-1][0] is None and tc.args[-1][1] is not None
    # No tangent at all: no call of f for it.
    n = len(fc.args)
    _, (z0, _) = jax.jvp(lambda v: op(x, y), (x,), (jnp.ones(3),))
    assert len(fc.args) == n + 1 and not np.any(np.asarray(z0))


def test_linear_op_transpose_with_the_wrong_shape_is_an_error_naming_it() -> None:
    op = linear_op(
        lambda x: A @ x,
        lambda c: A.T @ c,
        abstract_eval=lambda x: shaped((3,), x),
        abstract_eval_T=lambda c: shaped((5,), c),
        name="matvec",
    )
    with pytest.raises(ValueError, match=r"matvec\.T.*operand 0 \(x\).*float64\[4\].*float64\[5\]"):
        jax.grad(lambda v: op(v).sum())(jnp.ones(4))


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"f": 1}, TypeError, "f must be callable, got int"),
        ({"fixed": (-1,)}, ValueError, "fixed must hold distinct non-negative"),
        ({"fixed": 2}, TypeError, "fixed must be a sequence"),
        ({"batch_axes": 1}, TypeError, "batch_axes must be a bool"),
        ({"name": 3}, TypeError, "name must be a str"),
    ],
)
def test_linear_op_bad_arguments(kwargs, error, words) -> None:
    args = {"f": np.negative, "f_T": np.negative, "abstract_eval": lambda x: x, "abstract_eval_T": lambda x: x}
    args.update(kwargs)
    f, f_t = args.pop("f"), args.pop("f_T")
    with pytest.raises(error, match=f"linear_op: {words}"):
        linear_op(f, f_t, **args)  # type: ignore[arg-type]


# -- multilinear --------------------------------------------------------------


def zero_if_none(a):
    return 0.0 if a is None else a


def product_op():
    """(x, y) -> (x * y, x * y), linear in x and in y: JAXbind's multilinear demo."""
    return multilinear_op(
        lambda x, y: (x * y, x * y),
        [
            lambda y, a, b: y * zero_if_none(a) + y * zero_if_none(b),
            lambda x, a, b: x * zero_if_none(a) + x * zero_if_none(b),
        ],
        abstract_eval=lambda x, y: (x, x),
        abstract_eval_T=[lambda y, a, b: y, lambda x, a, b: x],
    )


def test_multilinear_op_every_transformation_and_second_order() -> None:
    op = product_op()
    x, y = jnp.asarray(RNG.standard_normal(4)), jnp.asarray(RNG.standard_normal(4))
    xn, yn = np.asarray(x), np.asarray(y)
    p, _ = jax.jit(op)(x, y)
    np.testing.assert_allclose(np.asarray(p), xn * yn, rtol=1e-15)
    _, (tp, _) = jax.jvp(op, (x, y), (y, x))
    np.testing.assert_allclose(np.asarray(tp), yn * yn + xn * xn, rtol=1e-14)
    gx, gy = jax.grad(lambda a, b: op(a, b)[0].sum() + 2 * op(a, b)[1].sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(np.asarray(gx), 3 * yn, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(gy), 3 * xn, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(jax.vmap(op)(jnp.stack([x, y]), jnp.stack([y, x]))[0][1]), yn * xn)
    check_grads(op, (x, y), order=2, modes=("fwd", "rev"))
    hxy = jax.hessian(lambda a, b: op(a, b)[0].sum(), argnums=(0, 1))(x, y)[0][1]
    np.testing.assert_allclose(np.asarray(hxy), np.eye(4))
    np.testing.assert_allclose(np.asarray(jax.hessian(lambda a: op(a, a)[0].sum())(x)), 2 * np.eye(4))


def test_multilinear_op_jvp_skips_operands_with_zero_tangent() -> None:
    f = Calls(lambda x, y: x * y)
    op = multilinear_op(
        f,
        [lambda y, c: y * c, lambda x, c: x * c],
        abstract_eval=lambda x, y: x,
        abstract_eval_T=[lambda y, c: y, lambda x, c: x],
    )
    x, y = jnp.arange(1.0, 4.0), jnp.arange(4.0, 7.0)
    _, t = jax.jvp(lambda v: op(v, y), (x,), (jnp.ones(3),))
    np.testing.assert_allclose(np.asarray(t), np.asarray(y))
    # One call for the value, one for x's tangent; none for y's (a symbolic zero).
    assert len(f.args) == 2 and all(a is not None for args in f.args for a in args)


def test_multilinear_op_fixed_operand() -> None:
    """(s, x, y) -> s * x * y with s fixed: transposes for x and y only."""
    op = multilinear_op(
        lambda s, x, y: s * x * y,
        [lambda s, y, c: s * y * c, lambda s, x, c: s * x * c],
        abstract_eval=lambda s, x, y: x,
        abstract_eval_T=[lambda s, y, c: y, lambda s, x, c: x],
        fixed=(0,),
    )
    s, x, y = jnp.full(3, 2.0), jnp.arange(1.0, 4.0), jnp.arange(4.0, 7.0)
    gx, gy = jax.grad(lambda a, b: op(s, a, b).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(np.asarray(gx), 2 * np.asarray(y))
    np.testing.assert_allclose(np.asarray(gy), 2 * np.asarray(x))
    check_grads(functools.partial(op, s), (x, y), order=2)
    with pytest.raises(ValueError, match=r"operand 0 \(s\).*fixed"):
        jax.grad(lambda a: op(a, x, y).sum())(s)


def test_multilinear_op_fixed_operand_after_the_linear_ones() -> None:
    """(x, y, s) -> x * y * s with s fixed: each transpose takes the other operands,
    in which s moves down one (index 1 of (y, s, ct)); second order differentiates the
    transposes in their cotangent, which is not fixed."""
    op = multilinear_op(
        lambda x, y, s: x * y * s,
        [lambda y, s, c: s * y * c, lambda x, s, c: s * x * c],
        abstract_eval=lambda x, y, s: x,
        abstract_eval_T=[lambda y, s, c: y, lambda x, s, c: x],
        fixed=(2,),
    )
    x, y, s = jnp.arange(1.0, 4.0), jnp.arange(4.0, 7.0), jnp.array([2.0, -1.0, 0.5])
    xn, yn, sn = np.asarray(x), np.asarray(y), np.asarray(s)
    gx, gy = jax.grad(lambda a, b: op(a, b, s).sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(np.asarray(gx), sn * yn, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(gy), sn * xn, rtol=1e-15)
    hxy = jax.hessian(lambda a, b: op(a, b, s).sum(), argnums=(0, 1))(x, y)[0][1]
    np.testing.assert_allclose(np.asarray(hxy), np.diag(sn), rtol=1e-15)
    check_grads(lambda a, b: op(a, b, s), (x, y), order=2, modes=("fwd", "rev"))
    with pytest.raises(ValueError, match=r"operand 2 \(s\).*fixed"):
        jax.grad(lambda v: op(x, y, v).sum())(s)


def test_multilinear_op_called_with_the_wrong_number_of_operands() -> None:
    op = product_op()
    with pytest.raises(ValueError, match=r"multilinear_op\[.*<lambda>\]: takes 2 operands .* called with 3"):
        op(jnp.ones(2), jnp.ones(2), jnp.ones(2))


def test_multilinear_op_bad_arguments() -> None:
    with pytest.raises(ValueError, match="multilinear_op: give one transpose and one abstract_eval_T per non-fixed"):
        multilinear_op(np.multiply, [np.multiply], abstract_eval=lambda x, y: x, abstract_eval_T=[])
    with pytest.raises(TypeError, match=r"multilinear_op: transposes\[1\] must be callable"):
        multilinear_op(np.multiply, [np.multiply, None], abstract_eval=lambda x, y: x, abstract_eval_T=[id, id])  # type: ignore[list-item]
    # A callable where a list of them belongs (before: "'function' object is not iterable").
    one: Any = lambda x, c: x  # noqa: E731
    with pytest.raises(TypeError, match=r"^multilinear_op: transposes must be a sequence .* got function"):
        multilinear_op(np.multiply, one, abstract_eval=lambda x, y: x, abstract_eval_T=[id, id])
    with pytest.raises(TypeError, match=r"^multilinear_op: abstract_eval_T must be a sequence .* got function"):
        multilinear_op(np.multiply, [np.multiply, np.multiply], abstract_eval=lambda x, y: x, abstract_eval_T=one)
    # A fixed index beyond the operands one transpose per non-fixed operand implies
    # (2 here: 1 fixed + 1 transpose) is refused when the op is made, not at its call.
    with pytest.raises(
        ValueError,
        match=r"^multilinear_op: give one transpose .* got 1 transposes, 1 abstract_eval_T and fixed=\(5,\)$",
    ):
        multilinear_op(np.multiply, [np.multiply], abstract_eval=lambda x, y: x, abstract_eval_T=[id], fixed=(5,))


def test_fixed_index_beyond_the_operands_is_an_error() -> None:
    op = linear_op(np.negative, np.negative, abstract_eval=lambda x: x, abstract_eval_T=lambda c: c, fixed=(1,))
    with pytest.raises(
        ValueError, match=r"fixed=\(1,\) names (an operand|operand 1), but the op (has|is called with) 1"
    ):
        jax.grad(lambda v: op(v).sum())(jnp.ones(2))


@pytest.mark.parametrize("kind", ["linear", "nonlinear"])
def test_fixed_index_beyond_the_operands_fails_every_call(kind) -> None:
    """As with python_op's fixed=, a call (eager, jit, vmap, eval_shape) with fewer
    operands than fixed= names is a ValueError naming the op, not only a derivative
    of it (the primal call ran, silently treating the operand as differentiable)."""
    if kind == "linear":
        op = linear_op(
            lambda a, x: a * x,
            lambda a, c: a * c,
            abstract_eval=lambda a, x: x,
            abstract_eval_T=lambda a, c: c,
            fixed=(5,),
            name="far",
        )
    else:
        op = nonlinear_op(
            np.multiply,
            lambda a, x, da, dx: a * dx,
            lambda a, x, ct: a * ct,
            abstract_eval=lambda a, x: x,
            fixed=(5,),
            name="far",
        )
    x = jnp.ones(2)
    for call in (op, jax.jit(op), jax.vmap(op), lambda *a: jax.eval_shape(op, *a)):
        with pytest.raises(ValueError) as info:
            call(x, x)
        assert "far: fixed=(5,) names operand 5, but the op is called with 2 operands" in str(info.value)
