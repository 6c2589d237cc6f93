"""python_op's own rules: fixed operands (``fixed=``) and symbolic zeros (``None``
tangents and cotangents in the JVP and transpose rules).

References: the products computed by NumPy directly (float64), and the closed-form
derivatives of ``a * x`` (linear in ``x``) and ``a * sin(x)``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import Calls
from xla_ffi_rs import python_op
from xla_ffi_rs.binding import is_linear_input

A = np.array([1.5, -2.0, 0.25])
X = np.array([0.3, 1.1, -0.7])


def like_second(a, x):
    return x


def scale_op(**kw):
    """``a * x``: linear in x, with a JVP and a transpose rule that record their
    tangents and cotangents."""

    def scale(a, x):
        return a * x

    op = python_op(scale, abstract_eval=like_second, **kw)

    @Calls
    def jvp(primals, tangents):
        (a, x), (da, dx) = primals, tangents
        t = None
        if da is not None:
            t = da * x
        if dx is not None:
            t = a * dx if t is None else t + a * dx
        return op(a, x), t

    @Calls
    def transpose(ct, a, x):
        assert is_linear_input(x) and not is_linear_input(a)
        return None, (None if ct is None else op(a, ct))

    op.def_jvp_rule(jvp)
    op.def_transpose_rule(transpose)
    return op, jvp, transpose


@pytest.mark.parametrize("jit", [False, True])
def test_jvp_rule_gets_none_for_an_operand_not_differentiated(jit) -> None:
    op, jvp, _ = scale_op(name="scale_zeros_jvp")
    f = jax.jit(lambda x: op(A, x)) if jit else (lambda x: op(A, x))
    y, t = jax.jvp(f, (X,), (np.ones(3),))
    np.testing.assert_allclose(y, A * X)
    np.testing.assert_allclose(t, A)
    assert jvp.args and all(call[1][0] is None and call[1][1] is not None for call in jvp.args)


def test_jvp_rule_may_return_none_for_a_zero_tangent() -> None:
    op = python_op(np.sin, abstract_eval=lambda x: x, name="zero_tangent_out", jvp=lambda p, t: (jnp.sin(p[0]), None))
    y, t = jax.jvp(op, (X,), (np.ones(3),))
    np.testing.assert_allclose(y, np.sin(X))
    np.testing.assert_array_equal(t, np.zeros(3))
    assert jax.grad(lambda x: op(x).sum())(X).tolist() == [0.0, 0.0, 0.0]


def test_transpose_rule_gets_none_for_a_zero_cotangent() -> None:
    def both(x):
        return 2.0 * x, 3.0 * x

    op = python_op(both, abstract_eval=lambda x: (x, x), name="two_results_zeros")
    seen = []

    @op.def_jvp_rule
    def _(primals, tangents):
        return op(*primals), op(*tangents)

    @op.def_transpose_rule
    def _(cts, x):
        seen.append(tuple(c is None for c in cts))
        c0, c1 = cts
        return ((0.0 if c0 is None else 2.0 * c0) + (0.0 if c1 is None else 3.0 * c1),)

    # Only the first result matters: the second cotangent is a symbolic zero.
    np.testing.assert_allclose(jax.grad(lambda x: op(x)[0].sum())(X), np.full(3, 2.0))
    np.testing.assert_allclose(jax.grad(lambda x: op(x)[1].sum())(X), np.full(3, 3.0))
    assert seen == [(False, True), (True, False)]


def test_grad_and_linear_transpose_with_respect_to_the_linear_operand() -> None:
    op, _, transpose = scale_op(name="scale_zeros_grad", fixed=(0,))
    np.testing.assert_allclose(jax.grad(lambda x: op(A, x).sum())(X), A)
    np.testing.assert_allclose(jax.jit(jax.grad(lambda x: (op(A, x) ** 2).sum()))(X), 2 * A * A * X)
    (ct,) = jax.linear_transpose(lambda x: op(A, x), X)(np.ones(3))
    np.testing.assert_allclose(ct, A)
    assert transpose.args


FIXED = "scale_fixed: cannot {what} with respect to operand 0 (a): it is declared fixed (fixed=(0,))"


@pytest.mark.parametrize(
    "how",
    [
        lambda op: jax.jvp(lambda a: op(a, X), (A,), (np.ones(3),)),
        lambda op: jax.jvp(op, (A, X), (np.ones(3), np.ones(3))),
        lambda op: jax.grad(lambda a: op(a, X).sum())(A),
        lambda op: jax.jit(jax.grad(lambda a, x: op(a, x).sum(), argnums=(0, 1)))(A, X),
        lambda op: jax.vjp(op, A, X),
    ],
    ids=["jvp", "jvp_both", "grad", "jit_grad_both", "vjp"],
)
@pytest.mark.parametrize("rules", [True, False], ids=["rules", "no_rules"])
def test_differentiating_a_fixed_operand_raises_naming_it(how, rules) -> None:
    if rules:
        op, jvp, _ = scale_op(name="scale_fixed", fixed=(0,))
    else:
        op = python_op(lambda a, x: a * x, abstract_eval=like_second, name="scale_fixed", fixed=(0,))
    with pytest.raises(
        ValueError, match=r"^" + FIXED.format(what="differentiate").replace("(", r"\(").replace(")", r"\)")
    ):
        how(op)
    if rules:
        assert not jvp.args  # the rule never ran


@pytest.mark.parametrize("rules", [True, False], ids=["rules", "no_rules"])
def test_linear_transpose_of_a_fixed_operand_raises_naming_it(rules) -> None:
    if rules:
        op, _, transpose = scale_op(name="scale_fixed", fixed=(0,))
    else:
        op = python_op(lambda a, x: a * x, abstract_eval=like_second, name="scale_fixed", fixed=(0,))
    with pytest.raises(ValueError, match=FIXED.format(what="transpose").replace("(", r"\(").replace(")", r"\)")):
        jax.linear_transpose(lambda a: op(a, X), A)(np.ones(3))
    if rules:
        assert not transpose.args


def test_fixed_without_rules_still_says_there_is_no_rule() -> None:
    op = python_op(lambda a, x: a * x, abstract_eval=like_second, name="scale_norule", fixed=(0,))
    np.testing.assert_allclose(jax.jit(op)(A, X), A * X)
    with pytest.raises(NotImplementedError, match="scale_norule: no JVP rule"):
        jax.jvp(lambda x: op(A, x), (X,), (np.ones(3),))


@pytest.mark.parametrize(
    ("fixed", "error", "words"),
    [
        ((-1,), ValueError, "fixed must hold distinct non-negative operand indices, got (-1,)"),
        ((0, 0), ValueError, "fixed must hold distinct non-negative operand indices, got (0, 0)"),
        ((True,), TypeError, "fixed must hold operand indices (ints, not names), got (True,)"),
        (("x",), TypeError, "fixed must hold operand indices (ints, not names), got ('x',)"),
        ("x", TypeError, "fixed must hold operand indices (ints, not names), got 'x'"),
        ((0.0,), TypeError, "fixed must hold operand indices (ints, not names), got (0.0,)"),
        (0, TypeError, "fixed must be a sequence of operand indices, got 0"),
    ],
)
def test_bad_fixed_is_refused_at_construction(fixed, error, words) -> None:
    with pytest.raises(error, match="^python_op: " + words.replace("(", r"\(").replace(")", r"\)")):
        python_op(np.sin, abstract_eval=lambda x: x, fixed=fixed)


def test_fixed_takes_numpy_integers() -> None:
    op = python_op(lambda a, x: a * x, abstract_eval=like_second, name="scale_np_fixed", fixed=(np.int64(0),))
    assert op.fixed == (0,)
    np.testing.assert_allclose(jax.jit(op)(A, X), A * X)


def test_fixed_index_beyond_the_operands_is_refused_at_the_call() -> None:
    op = python_op(np.sin, abstract_eval=lambda x: x, name="sin_fixed2", fixed=(2,))
    with pytest.raises(ValueError, match=r"sin_fixed2: fixed=\(2,\) names operand 2, but the op is called with 1"):
        jax.jit(op)(X)


def test_vectorized_rules_see_none_under_vmap() -> None:
    op, jvp, _ = scale_op(name="scale_vec", fixed=(0,), vectorized=True)
    xs = np.stack([X, 2 * X])
    t = jax.vmap(lambda x: jax.jvp(lambda x: op(A, x), (x,), (np.ones(3),))[1])(xs)
    np.testing.assert_allclose(t, np.stack([A, A]))
    g = jax.vmap(jax.grad(lambda x: jnp.sum(op(A, x) ** 2)))(xs)
    np.testing.assert_allclose(g, 2 * A * A * xs)
    assert all(call[1][0] is None for call in jvp.args)


def test_nonlinear_rule_with_a_fixed_operand_matches_the_closed_form() -> None:
    def f(a, x):
        return a * np.sin(x)

    op = python_op(f, abstract_eval=like_second, name="asin", fixed=(0,))

    @op.def_jvp_rule
    def _(primals, tangents):
        (a, x), (da, dx) = primals, tangents
        assert da is None
        return op(a, x), a * jnp.cos(x) * dx

    np.testing.assert_allclose(jax.jit(jax.grad(lambda x: op(A, x).sum()))(X), A * np.cos(X))
    with pytest.raises(ValueError, match=r"asin: cannot differentiate with respect to operand 0 \(a\)"):
        jax.grad(lambda a: op(a, X).sum())(A)
