"""The ops inside the compositions users write: wrapped in their own
``custom_jvp``/``custom_vjp`` functions, in ``cond``/``switch`` branches and
``while``/``fori`` loops, under ``checkpoint`` policies, ``named_call``,
``ensure_compile_time_eval`` and reused AOT executables, against plain-jnp
references (``kepler_jnp``, the RMS formula) in float64."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import xla_ffi_rs as xr
from xla_ffi_rs.ops.kepler import kepler_jnp

RNG = np.random.default_rng(7)
M = RNG.uniform(-6, 6, (3, 4))
E = RNG.uniform(0, 0.9, (3, 4))
X = RNG.normal(size=(3, 5))
W = RNG.uniform(0.5, 1.5, 5)


def rms_ref(x: Any, w: Any, eps: float = 1e-5) -> Any:
    return x / jnp.sqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * w


def close(got: Any, want: Any, tol: float = 1e-9) -> None:
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


def wrapped_kepler(which: str) -> Callable[[Any, Any], Any]:
    """A user's ``custom_jvp`` function whose rule is ``jax.jvp`` of ``kepler``:
    with both tangents, or one (the other a symbolic zero, the fused op with a
    scalar tangent)."""

    @jax.custom_jvp
    def f(m: Any, e: Any) -> Any:
        return xr.kepler(m, e)[0]

    @f.defjvp
    def _(primals: Any, tangents: Any) -> Any:
        (m, e), (dm, de) = primals, tangents
        if which == "both":
            return jax.jvp(lambda m, e: xr.kepler(m, e)[0], (m, e), (dm, de))
        if which == "m":
            return jax.jvp(lambda m: xr.kepler(m, e)[0], (m,), (dm,))
        return jax.jvp(lambda e: xr.kepler(m, e)[0], (e,), (de,))

    return f


def wrapped_ref(which: str) -> Callable[[Any, Any], Any]:
    sg = lax.stop_gradient
    if which == "both":
        return lambda m, e: kepler_jnp(m, e)[0]
    if which == "m":
        return lambda m, e: kepler_jnp(m, sg(e))[0]
    return lambda m, e: kepler_jnp(sg(m), e)[0]


REVERSE: dict[str, Callable[[Callable[..., Any]], Callable[..., Any]]] = {
    "grad": lambda f: jax.grad(lambda m, e: f(m, e).sum(), (0, 1)),
    "jit_grad": lambda f: jax.jit(jax.grad(lambda m, e: f(m, e).sum(), (0, 1))),
    "vmap_grad": lambda f: jax.vmap(jax.grad(lambda m, e: f(m, e).sum(), (0, 1))),
    "jacrev": lambda f: jax.jacrev(f, (0, 1)),
    "linear_transpose": lambda f: lambda m, e: jax.linear_transpose(jax.linearize(f, m, e)[1], m, e)(jnp.ones_like(m)),
}


@pytest.mark.parametrize("which", ["both", "m", "e"])
@pytest.mark.parametrize("transform", sorted(REVERSE))
def test_reverse_mode_of_a_custom_jvp_rule_calling_kepler_jvp(which: str, transform: str) -> None:
    """Reverse mode linearizes a custom_jvp rule by partial evaluation of its JVP
    trace: the fused op must leave the solution known (it raised "Linearization
    failed to produce known values")."""
    t = REVERSE[transform]
    close(t(wrapped_kepler(which))(M, E), t(wrapped_ref(which))(M, E))


def test_hessian_of_a_custom_jvp_rule_calling_kepler_jvp() -> None:
    f = lambda m, e: wrapped_kepler("both")(m, e).sum()  # noqa: E731
    g = lambda m, e: wrapped_ref("both")(m, e).sum()  # noqa: E731
    close(jax.hessian(f, (0, 1))(M[0], E[0]), jax.hessian(g, (0, 1))(M[0], E[0]), 1e-7)


@pytest.mark.parametrize("vectorized", [False, True])
def test_int_and_bool_results_have_zero_tangents(vectorized: bool) -> None:
    """A python op whose results are all integer or bool needs no JVP rule: their
    only tangent is zero, so a mask or an index from it differentiates through
    ``where``/gathers (it raised "Differentiation rule ... not implemented")."""
    positive = xr.python_op(
        lambda x: x > 0,
        abstract_eval=lambda x: jax.ShapeDtypeStruct(x.shape, jnp.bool_),
        vectorized=vectorized,
        name=f"positive_{vectorized}",
    )
    floor = xr.python_op(
        lambda x: np.floor(x).astype(np.int32),
        abstract_eval=lambda x: jax.ShapeDtypeStruct(x.shape, jnp.int32),
        vectorized=vectorized,
        name=f"floor_{vectorized}",
    )

    def f(x: Any) -> Any:
        return (jnp.where(positive(x), x * x, -x) * floor(x)).sum()

    def f_ref(x: Any) -> Any:
        return (jnp.where(x > 0, x * x, -x) * jnp.floor(x)).sum()

    close(jax.grad(f)(X), jax.grad(f_ref)(X))
    close(jax.jit(jax.vmap(jax.grad(f)))(X), jax.vmap(jax.grad(f_ref))(X))
    close(jax.jacfwd(f)(X[0]), jax.jacfwd(f_ref)(X[0]))
    close(jax.hessian(f)(X[0]), jax.hessian(f_ref)(X[0]))
    (y, dy) = jax.jvp(floor, (X,), (jnp.ones_like(X),))
    assert dy.dtype == jax.dtypes.float0 and dy.shape == X.shape
    np.testing.assert_array_equal(np.asarray(y), np.floor(X))


def test_a_float_result_without_jvp_rule_names_the_op() -> None:
    op = xr.python_op(lambda x: np.sin(x), abstract_eval=lambda x: x, name="sine_no_rule")
    with pytest.raises(NotImplementedError, match=r"sine_no_rule.*no JVP rule"):
        jax.grad(lambda x: op(x).sum())(X)
