"""The fused forward + tangent targets ``kepler_jvp``, ``kepler_jvp_dm`` and
``kepler_jvp_const`` (what ``jax.jvp`` of ``kepler`` runs, by the kind of tangent),
and that reverse mode still runs the solver forward and the
cotangent kernel, however it is reached (direct linearization or JVP + partial
evaluation, through ``jit``, ``scan`` and ``checkpoint``). References: float64
numpy solutions of Kepler's equation and the implicit derivative."""

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
from xla_ffi_rs.ops.kepler import kepler_jvp_const_op, kepler_jvp_dm_op, kepler_jvp_jnp, kepler_jvp_op

JVP = "xla_ffi_rs.kepler_jvp"
JVP_DM = "xla_ffi_rs.kepler_jvp_dm"
JVP_CONST = "xla_ffi_rs.kepler_jvp_const"
TANGENT = "xla_ffi_rs.kepler_tangent"
COTANGENT = "xla_ffi_rs.kepler_cotangent"


def point(n: int = 40, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.uniform(-7, 7, n), np.concatenate([rng.uniform(0, 0.95, n - 3), [0.0, 0.99, 0.999]])


def reference(m: np.ndarray, e: np.ndarray, dm: Any, de: Any) -> tuple[np.ndarray, ...]:
    """(sin E, cos E, d sin E, d cos E) in float64."""
    big_e = kepler_solve_np(m, e)
    s, c = np.sin(big_e), np.cos(big_e)
    t = (dm + s * de) / (1 - e * c)
    return s, c, c * t, -s * t


def close(got: Any, want: np.ndarray, rtol: float = 1e-10) -> None:
    np.testing.assert_allclose(np.asarray(got), want, rtol=rtol, atol=rtol * float(np.max(np.abs(want), initial=1)))


def calls(text: str) -> tuple[int, ...]:
    """Custom calls of (kepler, kepler_tangent, kepler_cotangent, kepler_jvp), the
    last counting the three fused targets."""
    fused = sum(count_calls(text, t) for t in (JVP, JVP_DM, JVP_CONST))
    return (*(count_calls(text, t) for t in (KEPLER, TANGENT, COTANGENT)), fused)


def fused_calls(text: str) -> tuple[int, ...]:
    """Custom calls of (kepler_jvp, kepler_jvp_dm, kepler_jvp_const)."""
    return tuple(count_calls(text, t) for t in (JVP, JVP_DM, JVP_CONST))


# -- the raw target ------------------------------------------------------------


def raw(*operands: np.ndarray, target: str = JVP) -> tuple[jax.Array, ...]:
    out = jax.ShapeDtypeStruct(operands[0].shape, operands[0].dtype)
    return tuple(jax.ffi.ffi_call(target, (out,) * 4)(*operands))


@pytest.mark.parametrize(("dtype", "rtol"), [(np.float64, 1e-12), (np.float32, 2e-4)])
@pytest.mark.parametrize("shape", [(301,), (7, 43), (0,), (), (3, 100_003)])
def test_raw_target_matches_the_float64_reference(dtype: Any, rtol: float, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(1)
    m, dm, de = (rng.uniform(-9, 9, shape) for _ in range(3))
    e = rng.uniform(0, 0.95, shape)
    ops = [np.asarray(v, dtype) for v in (m, e, dm, de)]
    got = jax.jit(raw)(*ops)
    want = reference(*(v.astype(np.float64) for v in ops))
    for g, w in zip(got, want, strict=True):
        assert g.dtype == dtype and g.shape == shape
        close(g, w, rtol)


@pytest.mark.parametrize(("dtype", "rtol"), [(np.float64, 1e-12), (np.float32, 2e-4)])
@pytest.mark.parametrize("shape", [(301,), (7, 43), (0,), (), (3, 100_003)])
@pytest.mark.parametrize("target", [JVP_DM, JVP_CONST])
def test_scalar_tangent_targets_match_the_float64_reference(
    target: str, dtype: Any, rtol: float, shape: tuple[int, ...]
) -> None:
    """A scalar tangent is that value for every element (``kepler_jvp_dm``: de;
    ``kepler_jvp_const``: dM and de), bit for bit what ``kepler_jvp`` gives for it
    broadcast."""
    rng = np.random.default_rng(2)
    m, dm_array = rng.uniform(-9, 9, shape), rng.uniform(-2, 2, shape)
    e = rng.uniform(0, 0.95, shape)
    dm = np.asarray(-1.25) if target == JVP_CONST else dm_array
    ops = [np.asarray(v, dtype) for v in (m, e, dm, np.asarray(0.75))]
    got = jax.jit(lambda *o: raw(*o, target=target))(*ops)
    wide = [np.broadcast_to(v, shape) for v in ops]
    want = reference(*(v.astype(np.float64) for v in wide))
    dense = jax.jit(raw)(*wide)
    for g, w, d in zip(got, want, dense, strict=True):
        assert g.dtype == dtype and g.shape == shape
        close(g, w, rtol)
        np.testing.assert_array_equal(np.asarray(g), np.asarray(d))


def test_raw_target_gives_nan_outside_the_domain() -> None:
    m, e = np.array([1.0, np.inf, 1.0, np.nan, 2.0]), np.array([1.0, 0.5, -0.1, 0.5, 0.5])
    got = [np.asarray(g) for g in raw(m, e, np.ones(5), np.ones(5))]
    assert all(np.isnan(g[:4]).all() and np.isfinite(g[4]) for g in got), got


ONE = np.ones(3)
BAD_CALLS: dict[str, tuple[Callable[[], Any], tuple[str, ...]]] = {
    "int operands": (lambda: raw(*(np.ones(3, np.int32),) * 4), ("operand 0 (mean_anomaly)", "expected", "int32")),
    "float32 tangent": (
        lambda: raw(ONE, ONE, ONE, ONE.astype(np.float32)),
        ("operand 3 (d_eccentricity)", "expected dtype", "float32"),
    ),
    "short tangent": (
        lambda: raw(ONE, ONE, np.ones(2), ONE),
        ("operand 2 (d_mean_anomaly)", "expected shape", "[2]", "operand 0 (mean_anomaly)"),
    ),
    "three operands": (lambda: raw(ONE, ONE, ONE), ("expected 4 operands", "3")),
}
SCALAR = np.asarray(1.0)
BAD_SCALAR_CALLS: dict[str, tuple[str, Callable[[], Any], tuple[str, ...]]] = {
    "dm: array de": (
        JVP_DM,
        lambda: raw(ONE, ONE, ONE, ONE, target=JVP_DM),
        ("operand 3 (d_eccentricity)", "expected shape", "[3]"),
    ),
    "dm: short dM": (
        JVP_DM,
        lambda: raw(ONE, ONE, np.ones(2), SCALAR, target=JVP_DM),
        ("operand 2 (d_mean_anomaly)", "expected shape", "[2]"),
    ),
    "const: array dM": (
        JVP_CONST,
        lambda: raw(ONE, ONE, ONE, SCALAR, target=JVP_CONST),
        ("operand 2 (d_mean_anomaly)", "expected shape", "[3]"),
    ),
    "const: float32 de": (
        JVP_CONST,
        lambda: raw(ONE, ONE, SCALAR, SCALAR.astype(np.float32), target=JVP_CONST),
        ("operand 3 (d_eccentricity)", "expected dtype", "float32"),
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_raw_call_names_target_and_operand(case: str) -> None:
    call, words = BAD_CALLS[case]
    assert_ffi_error(call, JVP, words)


@pytest.mark.parametrize("case", sorted(BAD_SCALAR_CALLS))
def test_bad_scalar_tangent_call_names_target_and_operand(case: str) -> None:
    target, call, words = BAD_SCALAR_CALLS[case]
    assert_ffi_error(call, target, words)


def test_op_rejects_bad_operands_before_lowering() -> None:
    ok = jnp.ones(3)
    with pytest.raises(ValueError, match=r"^xla_ffi_rs\.kepler_jvp: operand 3 \(d_eccentricity\): expected .*got"):
        jax.eval_shape(lambda *a: kepler_jvp_op(*a), ok, ok, ok, jnp.ones(4))
    with pytest.raises(TypeError, match=r"^xla_ffi_rs\.kepler_jvp: operand 0 .*float32.*float64.*got int32"):
        jax.eval_shape(lambda *a: kepler_jvp_op(*a), *(jnp.ones(3, jnp.int32),) * 4)


def test_fallback_formula_matches_the_kernel() -> None:
    m, e = point()
    ops = (m, e, np.linspace(-1, 1, m.size), np.linspace(2, -2, m.size))
    for g, w in zip(kepler_jvp_op(*ops), kepler_jvp_jnp(*(jnp.asarray(v) for v in ops)), strict=True):
        close(g, np.asarray(w), 1e-12)


# -- forward mode: one fused call ------------------------------------------------


def jvp_of(kind: str) -> Callable[..., Any]:
    """jvp of kepler with tangents built in the program: arrays of ones, symbolic
    zeros (a constant argument), broadcast scalars; and tangents passed in as an
    array ``v`` or a traced scalar ``s``."""

    def f(m: jax.Array, e: jax.Array, v: jax.Array, s: jax.Array) -> Any:
        if kind == "ones_zeros":
            return jax.jvp(kepler, (m, e), (jnp.ones_like(m), jnp.zeros_like(e)))
        if kind == "wrt_m":
            return jax.jvp(lambda m: kepler(m, e), (m,), (jnp.ones_like(m),))
        if kind == "wrt_e":
            return jax.jvp(lambda e: kepler(m, e), (e,), (jnp.full_like(e, 0.5),))
        if kind == "array_wrt_m":
            return jax.jvp(lambda m: kepler(m, e), (m,), (v,))
        if kind == "array_and_constant":
            return jax.jvp(kepler, (m, e), (v, jnp.full_like(e, 0.5)))
        if kind == "array_wrt_e":
            return jax.jvp(lambda e: kepler(m, e), (e,), (v,))
        if kind == "traced_scalar":
            return jax.jvp(kepler, (m, e), (jnp.full_like(m, s), jnp.full_like(e, 0.5)))
        return jax.jvp(kepler, (m, e), (jnp.full_like(m, 2.0), jnp.full_like(e, -1.0)))

    return f


V, S = np.linspace(-1, 1, 40), 1.5


@pytest.mark.parametrize(
    ("kind", "dm", "de", "fused"),
    [
        ("ones_zeros", 1.0, 0.0, (0, 0, 1)),
        ("wrt_m", 1.0, 0.0, (0, 0, 1)),
        ("wrt_e", 0.0, 0.5, (0, 0, 1)),
        ("both", 2.0, -1.0, (0, 0, 1)),
        ("array_wrt_m", V, 0.0, (0, 1, 0)),
        ("array_and_constant", V, 0.5, (0, 1, 0)),
        ("array_wrt_e", 0.0, V, (1, 0, 0)),
        ("traced_scalar", S, 0.5, (0, 1, 0)),
    ],
)
def test_jvp_with_tangents_built_in_the_program_is_one_fused_call(
    kind: str, dm: Any, de: Any, fused: tuple[int, ...]
) -> None:
    """One fused call, with the tangents that are one known value for every element
    (symbolic zeros, constants built in the program) as scalars: ``kepler_jvp_const``
    when both are, ``kepler_jvp_dm`` when de is; otherwise ``kepler_jvp``."""
    m, e = point()
    (s, c), (ds, dc) = jax.jit(jvp_of(kind))(m, e, V, S)
    for g, w in zip((s, c, ds, dc), reference(m, e, dm, de), strict=True):
        close(g, w)
    text = lowered(jvp_of(kind), m, e, V, S)
    assert calls(text) == (0, 0, 0, 1)
    assert fused_calls(text) == fused


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_constant_tangents_keep_their_value_in_the_compute_dtype(dtype: Any) -> None:
    """A constant tangent is rounded to the dtype the kernel computes in, as the
    broadcast array it replaces (integers and float16 promote as ``kepler`` does)."""
    m, e = (v.astype(dtype) for v in point())
    for tangent in (0.1, 3, np.float16(0.3)):
        f = jax.jit(lambda m, e, t=tangent: jax.jvp(kepler, (m, e), (jnp.full_like(m, t), jnp.full_like(e, t))))
        g = jax.jit(lambda m, e, v: jax.jvp(kepler, (m, e), (v, v)))
        got, want = f(m, e)[1], g(m, e, jnp.full_like(m, tangent))[1]
        for a, b in zip(got, want, strict=True):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_jvp_of_vmap_and_vmap_of_jvp_are_one_fused_call() -> None:
    m, e = point(12)
    m, e, v = m.reshape(3, 4), e.reshape(3, 4), np.linspace(-1, 1, 12).reshape(3, 4)
    want = reference(m, e, v, 2 * v)
    for f in (
        lambda m, e, v: jax.jvp(jax.vmap(kepler), (m, e), (v, 2 * v)),
        lambda m, e, v: jax.vmap(lambda m, e, v: jax.jvp(kepler, (m, e), (v, 2 * v)), in_axes=1, out_axes=1)(m, e, v),
    ):
        (s, c), (ds, dc) = jax.jit(f)(m, e, v)
        for g, w in zip((s, c, ds, dc), want, strict=True):
            close(g, w)
        assert calls(lowered(f, m, e, v)) == (0, 0, 0, 1)


# -- reverse mode: the solver forward, the cotangent kernel -----------------------


def loss(m: jax.Array, e: jax.Array) -> jax.Array:
    s, c = kepler(m, e)
    return jnp.sum(2 * s + 3 * c)


def scanned(m: jax.Array, e: jax.Array) -> jax.Array:
    def body(acc: jax.Array, row: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, None]:
        return acc + loss(*row), None

    return jax.lax.scan(body, jnp.zeros(()), (m.reshape(4, -1), e.reshape(4, -1)))[0]


@pytest.mark.parametrize(
    "make",
    [
        lambda: jax.grad(loss, argnums=(0, 1)),
        lambda: jax.grad(jax.jit(loss), argnums=(0, 1)),
        lambda: jax.grad(jax.checkpoint(loss), argnums=(0, 1)),
        lambda: jax.grad(scanned, argnums=(0, 1)),
    ],
    ids=["grad", "grad_of_jit", "grad_of_checkpoint", "grad_of_scan"],
)
def test_grad_runs_the_solver_and_the_cotangent_kernel(make: Callable[[], Any]) -> None:
    m, e = point()
    g_m, g_e = jax.jit(make())(m, e)
    _, _, ds_m, dc_m = reference(m, e, 1.0, 0.0)
    _, _, ds_e, dc_e = reference(m, e, 0.0, 1.0)
    close(g_m, 2 * ds_m + 3 * dc_m)
    close(g_e, 2 * ds_e + 3 * dc_e)
    n_kepler, n_tangent, n_cotangent, n_jvp = calls(lowered(make(), m, e))
    assert n_kepler >= 1 and n_cotangent == 1 and n_tangent == n_jvp == 0, (n_kepler, n_tangent, n_cotangent, n_jvp)


@pytest.mark.parametrize(
    "make",
    [
        lambda: jax.grad(loss),
        lambda: jax.grad(jax.jit(loss)),
        lambda: jax.grad(jax.checkpoint(loss)),
        lambda: jax.grad(scanned),
    ],
    ids=["grad", "grad_of_jit", "grad_of_checkpoint", "grad_of_scan"],
)
def test_grad_wrt_m_alone_runs_the_solver_and_the_cotangent_kernel(make: Callable[[], Any]) -> None:
    """With e's tangent a symbolic zero, the JVP is a scalar-tangent fused op; its
    partial evaluation still keeps the solver forward and transposes the tangent."""
    m, e = point()
    g_m = jax.jit(make())(m, e)
    _, _, ds_m, dc_m = reference(m, e, 1.0, 0.0)
    close(g_m, 2 * ds_m + 3 * dc_m)
    n_kepler, n_tangent, n_cotangent, n_jvp = calls(lowered(make(), m, e))
    assert n_kepler >= 1 and n_cotangent == 1 and n_tangent == n_jvp == 0, (n_kepler, n_tangent, n_cotangent, n_jvp)


def tangent_loss(kind: str) -> Callable[[jax.Array, jax.Array, jax.Array], jax.Array]:
    """A loss of the tangent ``v`` of M through ``kepler_jvp_dm`` (e's tangent a
    symbolic zero) at a fixed point, plain or under ``checkpoint``."""

    def f(v: jax.Array, m: jax.Array, e: jax.Array) -> jax.Array:
        _, (ds, dc) = jax.jvp(lambda m: kepler(m, e), (m,), (v,))
        return jnp.sum(2 * ds + 3 * dc)

    return jax.checkpoint(f) if kind == "checkpoint" else f


@pytest.mark.parametrize("kind", ["plain", "checkpoint"])
def test_grad_wrt_the_tangent_of_a_scalar_tangent_op(kind: str) -> None:
    """Reverse mode through the tangent of a scalar-tangent fused op (second order):
    the op once for the values, the tangent formula's transpose in jnp."""
    m, e = point()
    v = np.linspace(-1, 1, m.size)
    g = jax.jit(jax.grad(tangent_loss(kind)))(v, m, e)
    s, c, _, _ = reference(m, e, 0.0, 0.0)
    close(g, (2 * c - 3 * s) / (1 - e * c))
    assert calls(lowered(jax.grad(tangent_loss(kind)), v, m, e)) == (0, 0, 0, 1)


def test_linearize_runs_the_solver_once_and_the_tangent_kernel_per_call() -> None:
    m, e = point()
    v = np.linspace(-1, 1, m.size)

    def f(m: jax.Array, e: jax.Array, v: jax.Array) -> Any:
        _, lin = jax.linearize(kepler, m, e)
        return lin(v, 2 * v), lin(2 * v, v)

    (ds, dc), (ds2, dc2) = jax.jit(f)(m, e, v)
    _, _, want_s, want_c = reference(m, e, v, 2 * v)
    close(ds, want_s)
    close(dc, want_c)
    _, _, want_s2, want_c2 = reference(m, e, 2 * v, v)
    close(ds2, want_s2)
    close(dc2, want_c2)
    assert calls(lowered(f, m, e, v)) == (1, 2, 0, 0)


# -- second order ------------------------------------------------------------------


@pytest.mark.parametrize("op", [kepler_jvp_op, kepler_jvp_dm_op, kepler_jvp_const_op], ids=["jvp", "dm", "const"])
def test_check_grads_of_the_fused_ops(op: Any) -> None:
    """Each fused op is differentiable in every operand (its scalar tangents too),
    both modes, second order."""
    rng = np.random.default_rng(3)
    scalars = {kepler_jvp_op: (False, False), kepler_jvp_dm_op: (False, True), kepler_jvp_const_op: (True, True)}[op]
    dm, de = (np.asarray(0.7) if sc else rng.uniform(-1, 1, 5) for sc in scalars)
    ops = (rng.uniform(-3, 3, 5), rng.uniform(0, 0.8, 5), dm, de)
    for k in range(4):
        check_grads(lambda *o, k=k: op(*o)[k], ops, order=2, modes=("fwd", "rev"))


def test_vmap_of_jvp_with_scalar_tangents() -> None:
    """vmap over the primals keeps a scalar tangent unbatched (one call of the
    scalar-tangent op); a batched scalar tangent, or batched tangents alone, fall
    back to the array forms. Values against the float64 reference."""
    m, e = point(12)
    m, e, v = m.reshape(3, 4), e.reshape(3, 4), np.linspace(-1, 1, 12).reshape(3, 4)
    cases = {
        "primals batched, const tangents": (
            lambda m, e, v: jax.vmap(lambda m, e: jax.jvp(kepler, (m, e), (jnp.ones_like(m), jnp.zeros_like(e))))(m, e),
            (1.0, 0.0),
            (0, 0, 1),
        ),
        "primals and dM batched, de zero": (
            lambda m, e, v: jax.vmap(lambda m, v: jax.jvp(lambda m: kepler(m, e[0]), (m,), (v,)))(m, v),
            (v, 0.0),
            (0, 1, 0),
        ),
        "scalar de batched": (
            lambda m, e, v: jax.vmap(lambda s: jax.jvp(kepler_jvp_bound(m, e), (v, s), (v, s))[0], in_axes=0)(
                jnp.arange(3.0)
            ),
            None,
            None,
        ),
    }
    for name, (f, tangents, fused) in cases.items():
        out = jax.jit(f)(m, e, v)
        if tangents is not None:
            (s, c), (ds, dc) = out
            e_used = np.broadcast_to(e[0], m.shape) if "de zero" in name else e
            for g, w in zip((s, c, ds, dc), reference(m, e_used, *tangents), strict=True):
                close(g, w)
            assert fused_calls(lowered(f, m, e, v)) == fused, name
        else:
            for k in range(3):
                want = reference(m, e, v, float(k))
                for g, w in zip(out, want, strict=True):
                    close(np.asarray(g)[k], w)


def kepler_jvp_bound(m: np.ndarray, e: np.ndarray) -> Callable[..., Any]:
    """(dm, de) -> kepler_jvp_dm_op(m, e, dm, de): a scalar-tangent op to vmap over its scalar."""
    return lambda dm, de: kepler_jvp_dm_op(m, e, dm, de)


@pytest.mark.parametrize("e", [0.05, 0.3, 0.9])
def test_check_grads_second_order(e: float) -> None:
    m, ecc = np.array([0.4, 2.5, -3.0, 6.0]), np.full(4, e)
    for k in (0, 1):
        check_grads(lambda m, e, k=k: kepler(m, e)[k], (m, ecc), order=2, modes=("fwd", "rev"))


def test_jacfwd_solves_once_and_maps_every_tangent() -> None:
    """jacfwd batches the tangents alone: the solution stays unbatched (one solver
    call), the tangent op runs once over the batch."""
    m, e = point(6)
    jac = jax.jit(jax.jacfwd(lambda m: kepler(m, e)[0]))(m)
    close(np.diag(np.asarray(jac)), reference(m, e, 1.0, 0.0)[2])
    close(np.asarray(jac) - np.diag(np.diag(np.asarray(jac))), np.zeros((6, 6)))
    assert calls(lowered(jax.jacfwd(lambda m: kepler(m, e)[0]), m)) == (1, 1, 0, 0)
