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
M = jnp.asarray(RNG.uniform(-6, 6, (3, 4)))
E = jnp.asarray(RNG.uniform(0, 0.9, (3, 4)))
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


def test_a_float_result_beside_an_integer_one_still_needs_a_jvp_rule() -> None:
    """Only an op whose results are all integer or bool gets zero tangents without a
    rule: one float result among them still says there is no JVP rule (not a silent
    zero derivative for it)."""
    op = xr.python_op(
        lambda x: (np.sin(x), np.floor(x).astype(np.int32)),
        abstract_eval=lambda x: (x, jax.ShapeDtypeStruct(x.shape, jnp.int32)),
        name="sine_and_floor",
    )
    y, k = op(X)
    np.testing.assert_allclose(np.asarray(y), np.sin(X), rtol=1e-15)
    np.testing.assert_array_equal(np.asarray(k), np.floor(X))
    with pytest.raises(NotImplementedError, match=r"sine_and_floor.*no JVP rule"):
        jax.jvp(op, (X,), (jnp.ones_like(X),))
    with pytest.raises(NotImplementedError, match=r"sine_and_floor.*no JVP rule"):
        jax.grad(lambda x: op(x)[0].sum())(X)


def kf(m: Any, e: Any) -> Any:
    s, c = xr.kepler(m, e)
    return (s * c + s).sum()


def kf_ref(m: Any, e: Any) -> Any:
    s, c = kepler_jnp(m, e)
    return (s * c + s).sum()


def rf(x: Any, w: Any) -> Any:
    return (xr.rms_norm(x, w) ** 2 * jnp.arange(x.shape[-1])).sum()


def rf_ref(x: Any, w: Any) -> Any:
    return (rms_ref(x, w) ** 2 * jnp.arange(x.shape[-1])).sum()


def branchy(p: Any, i: Any, x: Any, w: Any, m: Any, e: Any, norm: Any, solve: Any) -> Any:
    """The ops in cond/switch branches and in while/fori loop bodies."""
    y = lax.cond(p, lambda x: norm(x, w), lambda x: 2 * x, x)
    y = lax.switch(i, [lambda y: y, lambda y: norm(y * 3, w), lambda y: -y], y)
    y = lax.fori_loop(0, 2, lambda _, y: norm(y, w) + 0.5, y)
    m2, _ = lax.while_loop(lambda c: c[1] < 2, lambda c: (solve(c[0], e)[0] + m, c[1] + 1), (m, 0))
    return y.sum() + m2.sum()


@pytest.mark.parametrize(("p", "i"), [(True, 0), (False, 1), (True, 2)])
def test_control_flow_branches_and_loops(p: bool, i: int) -> None:
    ours = lambda x, w, m: branchy(p, i, x, w, m, E, xr.rms_norm, xr.kepler)  # noqa: E731
    ref = lambda x, w, m: branchy(p, i, x, w, m, E, rms_ref, kepler_jnp)  # noqa: E731
    close(jax.jit(ours)(X, W, M), ref(X, W, M))
    close(jax.jit(jax.grad(ours, (0, 1)))(X, W, M), jax.grad(ref, (0, 1))(X, W, M), 1e-8)
    close(jax.jvp(ours, (X, W, M), (X, W, M)), jax.jvp(ref, (X, W, M), (X, W, M)), 1e-8)
    # a batched predicate and index: both branches run, then select
    ps, idx = jnp.array([p, not p, p]), jnp.array([i, (i + 1) % 3, 2])
    batched = jax.vmap(lambda p, i, x: branchy(p, i, x, W, M, E, xr.rms_norm, xr.kepler))
    batched_ref = jax.vmap(lambda p, i, x: branchy(p, i, x, W, M, E, rms_ref, kepler_jnp))
    close(batched(ps, idx, X), batched_ref(ps, idx, X))


POLICIES = {
    "default": None,
    "nothing_saveable": jax.checkpoint_policies.nothing_saveable,
    "everything_saveable": jax.checkpoint_policies.everything_saveable,
    "dots_saveable": jax.checkpoint_policies.dots_saveable,
}


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_checkpoint_policies(policy: str) -> None:
    pol = POLICIES[policy]
    close(jax.jit(jax.grad(jax.checkpoint(kf, policy=pol), (0, 1)))(M, E), jax.grad(kf_ref, (0, 1))(M, E))
    close(jax.jit(jax.grad(jax.checkpoint(rf, policy=pol), (0, 1)))(X, W), jax.grad(rf_ref, (0, 1))(X, W), 1e-8)
    close(jax.hessian(jax.checkpoint(kf, policy=pol))(M[0], E[0]), jax.hessian(kf_ref)(M[0], E[0]), 1e-7)
    close(jax.hessian(jax.checkpoint(rf, policy=pol))(X[0], W), jax.hessian(rf_ref)(X[0], W), 1e-7)


def test_named_call_compile_time_eval_and_aot_reuse() -> None:
    close(jax.jit(jax.named_call(xr.kepler, name="solve"))(M, E), kepler_jnp(M, E))
    close(jax.grad(jax.named_call(rf, name="norm"))(X, W), jax.grad(rf_ref)(X, W), 1e-8)

    def constant_folded(x: Any) -> Any:
        with jax.ensure_compile_time_eval():
            y = xr.rms_norm(X, W) + xr.kepler(M[:, :1], E[:, :1])[0]
        return x + y

    close(jax.jit(constant_folded)(X), X + rms_ref(X, W) + kepler_jnp(M[:, :1], E[:, :1])[0])
    solve = jax.jit(xr.kepler).lower(M, E).compile()
    grad = jax.jit(jax.grad(rf, (0, 1))).lower(X, W).compile()
    for k in range(3):  # one executable, new inputs each time
        close(solve(M + k, E / (k + 1)), kepler_jnp(M + k, E / (k + 1)))
        close(grad(X * (k + 1), W + k), jax.grad(rf_ref, (0, 1))(X * (k + 1), W + k), 1e-8)


@pytest.mark.parametrize("in_axes", [-1, 1])
@pytest.mark.parametrize("size", [0, 1, 3])
def test_vmap_trailing_axes_and_small_sizes(in_axes: int, size: int) -> None:
    """vmap over a trailing axis (``in_axes=-1``) and over axes of size 0 and 1,
    forward and under grad, the mapped operand transposed/sliced first."""
    x = np.ascontiguousarray(np.broadcast_to(X[:, :1], (3, size)))[:, :size] + np.arange(size)
    m, e = M[:, :size], E[:, :size]
    norm = jax.vmap(lambda x: xr.rms_norm(x, W[:3]), in_axes=in_axes, out_axes=in_axes)
    close(jax.jit(norm)(x), jax.vmap(lambda x: rms_ref(x, W[:3]), in_axes=in_axes, out_axes=in_axes)(x))
    close(jax.vmap(xr.kepler, in_axes=in_axes, out_axes=in_axes)(m, e), kepler_jnp(m, e))
    g = jax.vmap(jax.grad(kf, (0, 1)), in_axes=in_axes)(m, e)
    close(g, jax.vmap(jax.grad(kf_ref, (0, 1)), in_axes=in_axes)(m, e))
    close(
        jax.vmap(jax.grad(rf), in_axes=(in_axes, None))(x.T.T, W[:3]),
        jax.vmap(jax.grad(rf_ref), in_axes=(in_axes, None))(x, W[:3]),
        1e-8,
    )
