"""Kepler's derivative targets (``kepler_tangent``, ``kepler_cotangent``) and every
transformation that runs them, against float64 numpy references of the implicit
derivative: dE/dM = 1/(1 - e cos E), dE/de = sin E/(1 - e cos E),
d(sin E) = cos E dE, d(cos E) = -sin E dE."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from helpers import KEPLER, assert_ffi_error, count_calls, kepler_solve_np, lowered
from xla_ffi_rs import kepler
from xla_ffi_rs.ops.kepler import kepler_cotangent_jnp, kepler_cotangent_op, kepler_tangent_jnp, kepler_tangent_op

TANGENT = "xla_ffi_rs.kepler_tangent"
COTANGENT = "xla_ffi_rs.kepler_cotangent"
JVP = "xla_ffi_rs.kepler_jvp"


def point(n: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    m = rng.uniform(-7, 7, n)
    e = np.concatenate([rng.uniform(0, 0.95, n - 4), [0.0, 0.5, 0.99, 0.999]])
    return m, e


def partials_np(m: np.ndarray, e: np.ndarray) -> dict[str, np.ndarray]:
    """d(sin E)/dM, d(sin E)/de, d(cos E)/dM, d(cos E)/de in float64."""
    big_e = kepler_solve_np(m, e)
    s, c = np.sin(big_e), np.cos(big_e)
    de_dm, de_de = 1 / (1 - e * c), s / (1 - e * c)
    return {"s_m": c * de_dm, "s_e": c * de_de, "c_m": -s * de_dm, "c_e": -s * de_de}


def close(got: Any, want: np.ndarray, rtol: float = 1e-10) -> None:
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=rtol * float(np.max(np.abs(want), initial=1)))


# -- the raw targets -----------------------------------------------------------


def raw(target: str, *operands: np.ndarray) -> tuple[jax.Array, jax.Array]:
    out = jax.ShapeDtypeStruct(operands[0].shape, operands[0].dtype)
    a, b = jax.ffi.ffi_call(target, (out, out))(*operands)
    return a, b


@pytest.mark.parametrize(("dtype", "rtol"), [(np.float64, 1e-13), (np.float32, 1e-5)])
@pytest.mark.parametrize("shape", [(301,), (7, 43), (0,), (), (3, 100_003)])
def test_raw_targets_match_the_formulas(dtype: Any, rtol: float, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(1)
    a, b, big_e = (rng.uniform(-3, 3, shape) for _ in range(3))
    e = rng.uniform(0, 0.99, shape)
    s, c = np.sin(big_e), np.cos(big_e)
    ops = [np.asarray(v, dtype) for v in (a, b, e, s, c)]
    a, b, e, s, c = (v.astype(np.float64) for v in ops)
    t = (a + s * b) / (1 - e * c)
    u = (c * a - s * b) / (1 - e * c)
    for target, want in ((TANGENT, (c * t, -s * t)), (COTANGENT, (u, s * u))):
        got = jax.jit(lambda *o, target=target: raw(target, *o))(*ops)
        for g, w in zip(got, want, strict=True):
            assert g.dtype == dtype and g.shape == shape
            close(g, w, rtol)


ONE = np.ones(3)
BAD_CALLS: dict[str, tuple[Callable[[], Any], str, tuple[str, ...]]] = {
    "tangent int operand": (
        lambda: raw(TANGENT, *(np.ones(3, np.int32),) * 5),
        TANGENT,
        ("operand 0 (d_mean_anomaly)", "expected", "int32"),
    ),
    "tangent sin_e float32": (
        lambda: raw(TANGENT, ONE, ONE, ONE, ONE.astype(np.float32), ONE),
        TANGENT,
        ("operand 3 (sin_e)", "expected dtype", "float32"),
    ),
    "cotangent cos_e shape": (
        lambda: raw(COTANGENT, ONE, ONE, ONE, ONE, np.ones(4)),
        COTANGENT,
        ("operand 4 (cos_e)", "expected shape", "[4]", "operand 0 (ct_sin_e)"),
    ),
    "cotangent four operands": (lambda: raw(COTANGENT, ONE, ONE, ONE, ONE), COTANGENT, ("expected 5 operands", "4")),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_raw_call_names_target_and_operand(case: str) -> None:
    call, target, words = BAD_CALLS[case]
    assert_ffi_error(call, target, words)


@pytest.mark.parametrize("op", [kepler_tangent_op, kepler_cotangent_op], ids=lambda op: op.name)
def test_ops_reject_bad_operands_before_lowering(op: Any) -> None:
    ok = jnp.ones(3)
    with pytest.raises(ValueError, match=rf"^xla_ffi_rs\.{op.name}: operand 2 \(eccentricity\): expected .*got"):
        jax.eval_shape(lambda *a: op(*a), ok, ok, jnp.ones(4), ok, ok)
    with pytest.raises(TypeError, match=rf"^xla_ffi_rs\.{op.name}: operand 0 .*float32.*float64.*got int32"):
        jax.eval_shape(lambda *a: op(*a), *(jnp.ones(3, jnp.int32),) * 5)


# -- first order ---------------------------------------------------------------


def test_jvp_runs_the_fused_kernel_and_matches_the_reference() -> None:
    m, e = point()
    dm, de = np.linspace(-1, 2, m.size), np.linspace(0.5, -0.5, m.size)
    (s, _), (ds, dc) = jax.jit(lambda *p: jax.jvp(kepler, p[:2], p[2:]))(m, e, dm, de)
    p = partials_np(m, e)
    close(s, np.sin(kepler_solve_np(m, e)))
    close(ds, p["s_m"] * dm + p["s_e"] * de)
    close(dc, p["c_m"] * dm + p["c_e"] * de)
    text = lowered(lambda *p: jax.jvp(kepler, p[:2], p[2:]), m, e, dm, de)
    calls = tuple(count_calls(text, t) for t in (KEPLER, TANGENT, COTANGENT, JVP))
    assert calls == (0, 0, 0, 1), calls


@pytest.mark.parametrize("wrt", ["m", "e"])
def test_symbolic_zero_tangents(wrt: str) -> None:
    m, e = point()
    p = partials_np(m, e)
    v = np.linspace(1, 2, m.size)
    if wrt == "m":
        _, (ds, dc) = jax.jvp(lambda m: kepler(m, e), (m,), (v,))
        lin = jax.linearize(lambda m: kepler(m, e), m)[1]
    else:
        _, (ds, dc) = jax.jvp(lambda e: kepler(m, e), (e,), (v,))
        lin = jax.linearize(lambda e: kepler(m, e), e)[1]
    close(ds, p[f"s_{wrt}"] * v)
    close(dc, p[f"c_{wrt}"] * v)
    close(lin(v)[1], p[f"c_{wrt}"] * v)


def test_grad_runs_the_cotangent_kernel_and_matches_the_reference() -> None:
    m, e = point()

    def loss(m: jax.Array, e: jax.Array) -> jax.Array:
        s, c = kepler(m, e)
        return jnp.sum(2 * s + 3 * c)

    g_m, g_e = jax.jit(jax.grad(loss, argnums=(0, 1)))(m, e)
    p = partials_np(m, e)
    close(g_m, 2 * p["s_m"] + 3 * p["c_m"])
    close(g_e, 2 * p["s_e"] + 3 * p["c_e"])
    text = lowered(jax.grad(loss, argnums=(0, 1)), m, e)
    calls = tuple(count_calls(text, t) for t in (KEPLER, TANGENT, COTANGENT, JVP))
    assert calls == (1, 0, 1, 0), calls
    # Only one output used: its cotangent partner is a symbolic zero.
    close(jax.grad(lambda e: jnp.sum(kepler(m, e)[1]))(e), p["c_e"])


def test_vjp_and_linearize_match_the_reference() -> None:
    m, e = point()
    p = partials_np(m, e)
    ct_s, ct_c = np.linspace(-1, 1, m.size), np.linspace(2, 3, m.size)
    _, vjp = jax.vjp(kepler, m, e)
    g_m, g_e = vjp((ct_s, ct_c))
    close(g_m, ct_s * p["s_m"] + ct_c * p["c_m"])
    close(g_e, ct_s * p["s_e"] + ct_c * p["c_e"])
    _, lin = jax.linearize(kepler, m, e)
    ds, dc = lin(ct_s, ct_c)
    close(ds, p["s_m"] * ct_s + p["s_e"] * ct_c)
    close(dc, p["c_m"] * ct_s + p["c_e"] * ct_c)
    # The transpose of the linearized map is the vjp.
    g2 = jax.linear_transpose(lin, m, e)((ct_s, ct_c))
    close(g2[0], g_m)
    close(g2[1], g_e)


def test_vmap_of_jvp_vjp_and_linearize_is_one_call_each() -> None:
    m, e = point(12)
    m, e = m.reshape(3, 4), e.reshape(3, 4)
    v = np.ones_like(m)
    p = partials_np(m, e)

    def jvp(m: jax.Array, e: jax.Array, v: jax.Array) -> Any:
        return jax.jvp(kepler, (m, e), (v, 2 * v))[1]

    def vjp(m: jax.Array, e: jax.Array, v: jax.Array) -> Any:
        return jax.vjp(kepler, m, e)[1]((v, -v))

    def lin(m: jax.Array, e: jax.Array, v: jax.Array) -> Any:
        return jax.linearize(kepler, m, e)[1](v, v)

    for f, want, target in (
        (jvp, (p["s_m"] + 2 * p["s_e"], p["c_m"] + 2 * p["c_e"]), JVP),
        (vjp, (p["s_m"] - p["c_m"], p["s_e"] - p["c_e"]), COTANGENT),
        (lin, (p["s_m"] + p["s_e"], p["c_m"] + p["c_e"]), TANGENT),
    ):
        for in_axes in ((0, 0, 0), (1, 1, 1), (0, 0, None)):
            args = [a if ax != 1 else a.T for a, ax in zip((m, e, v), in_axes, strict=True)]
            args[2] = v[0] if in_axes[2] is None else args[2]
            got = jax.jit(jax.vmap(f, in_axes=in_axes))(*args)
            for g, w in zip(got, want, strict=True):
                close(g, w)
            text = lowered(jax.vmap(f, in_axes=in_axes), *args)
            assert count_calls(text, target) == 1 and "while" not in text, (f.__name__, in_axes)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_grad_keeps_the_dtype(dtype: Any) -> None:
    m, e = (a.astype(dtype) for a in point())
    g = jax.grad(lambda m: jnp.sum(kepler(m, e)[0]))(m)
    assert g.dtype == dtype
    close(g, partials_np(m.astype(np.float64), e.astype(np.float64))["s_m"], 1e-10 if dtype == np.float64 else 2e-3)


def test_fallback_formulas_match_the_kernels() -> None:
    """The jnp lowerings (platforms without the targets) compute what the kernels do."""
    rng = np.random.default_rng(2)
    a, b, e, big_e = rng.uniform(-2, 2, 50), rng.uniform(-2, 2, 50), rng.uniform(0, 0.9, 50), rng.uniform(-3, 3, 50)
    ops = tuple(jnp.asarray(v) for v in (a, b, e, np.sin(big_e), np.cos(big_e)))
    for op, formula in (
        (kepler_tangent_op, kepler_tangent_jnp),
        (kepler_cotangent_op, kepler_cotangent_jnp),
    ):
        for g, w in zip(op(*ops), formula(*ops), strict=True):
            close(g, np.asarray(w), 1e-14)


# -- second order --------------------------------------------------------------


@pytest.mark.parametrize("e", [0.05, 0.3, 0.9])  # e - eps stays in [0, 1)
def test_check_grads_second_order_of_each_output(e: float) -> None:
    m = np.array([0.4, 2.5, -3.0, 6.0])
    ecc = np.full(4, e)
    for k in (0, 1):
        check_grads(lambda m, e, k=k: kepler(m, e)[k], (m, ecc), order=2, modes=("fwd", "rev"))


def test_check_grads_of_the_derivative_ops() -> None:
    """The derivative ops are differentiable in every operand (the point too)."""
    rng = np.random.default_rng(3)
    big_e = rng.uniform(-3, 3, 5)
    ops = (rng.uniform(-1, 1, 5), rng.uniform(-1, 1, 5), rng.uniform(0, 0.8, 5), np.sin(big_e), np.cos(big_e))
    for op in (kepler_tangent_op, kepler_cotangent_op):
        check_grads(lambda *o, op=op: op(*o), ops, order=2, modes=("fwd", "rev"))


def test_hessian_and_jacfwd_of_jacrev_match_finite_differences_of_the_reference() -> None:
    def loss(p: jax.Array) -> jax.Array:
        s, c = kepler(p[0], p[1])
        return s * c + 2 * s - c

    def grad_np(p: np.ndarray) -> np.ndarray:
        big_e = kepler_solve_np(p[0], p[1])
        s, c = np.sin(big_e), np.cos(big_e)
        d = partials_np(p[0], p[1])
        dl_ds, dl_dc = c + 2, s - 1
        return np.array([dl_ds * d["s_m"] + dl_dc * d["c_m"], dl_ds * d["s_e"] + dl_dc * d["c_e"]])

    for p in (np.array([1.1, 0.4]), np.array([-2.5, 0.8]), np.array([0.2, 0.95])):
        h = 1e-5
        fd = np.stack([(grad_np(p + h * u) - grad_np(p - h * u)) / (2 * h) for u in np.eye(2)])
        close(jax.grad(loss)(p), grad_np(p))
        for second in (jax.hessian(loss), jax.jacfwd(jax.jacrev(loss)), jax.jacrev(jax.jacfwd(loss))):
            close(jax.jit(second)(p), fd, 1e-6)


def test_vmap_of_hessian_is_one_call_per_kernel() -> None:
    m, e = point(6)
    f = jax.vmap(jax.hessian(lambda m, e: kepler(m, e)[0], argnums=(0, 1)))
    h = f(m, e)
    d = partials_np(m, e)
    # d2 sin E / dM2 = -sin E (dE/dM)^2 + cos E d2E/dM2, d2E/dM2 = -e sin E (dE/dM)^3.
    big_e = kepler_solve_np(m, e)
    s, c = np.sin(big_e), np.cos(big_e)
    e_m = 1 / (1 - e * c)
    close(h[0][0], -s * e_m**2 + c * (-e * s * e_m**3), 1e-9)
    assert d["s_m"].shape == h[0][0].shape
    assert "while" not in lowered(f, m, e)


def test_jvp_of_the_derivative_ops_runs_their_kernel_for_the_values() -> None:
    """Second order: a derivative op's JVP computes its values with its own kernel
    (one call), its tangents with the formula's JVP; values against NumPy float64."""
    rng = np.random.default_rng(5)
    big_e = rng.uniform(-3, 3, 6)
    a, b, e = rng.uniform(-1, 1, 6), rng.uniform(-1, 1, 6), rng.uniform(0, 0.8, 6)
    s, c = np.sin(big_e), np.cos(big_e)
    ones = tuple(np.ones(6) for _ in range(5))
    t_tan = (a + s * b) / (1 - e * c)
    t_cot = (c * a - s * b) / (1 - e * c)
    for op, target, want in (
        (kepler_tangent_op, TANGENT, (c * t_tan, -s * t_tan)),
        (kepler_cotangent_op, COTANGENT, (t_cot, s * t_cot)),
    ):
        f = lambda *o, op=op: jax.jvp(op, o, ones)  # noqa: E731
        text = lowered(f, a, b, e, s, c)
        assert count_calls(text, target) == 1, target
        outs, _ = f(a, b, e, s, c)
        for got, ref in zip(outs, want, strict=True):
            np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-12, atol=1e-14)
