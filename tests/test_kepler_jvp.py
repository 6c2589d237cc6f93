"""The fused forward + tangent target ``kepler_jvp`` (what ``jax.jvp`` of
``kepler`` runs), and that reverse mode still runs the solver forward and the
cotangent kernel, however it is reached (direct linearization or JVP + partial
evaluation, through ``jit``, ``scan`` and ``checkpoint``). References: float64
numpy solutions of Kepler's equation and the implicit derivative."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from helpers import KEPLER, assert_ffi_error, count_calls, kepler_solve_np, lowered
from xla_ffi_rs import kepler
from xla_ffi_rs.ops.kepler import kepler_jvp_jnp, kepler_jvp_op

JVP = "xla_ffi_rs.kepler_jvp"
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
    """Custom calls of (kepler, kepler_tangent, kepler_cotangent, kepler_jvp)."""
    return tuple(count_calls(text, t) for t in (KEPLER, TANGENT, COTANGENT, JVP))


# -- the raw target ------------------------------------------------------------


def raw(*operands: np.ndarray) -> tuple[jax.Array, ...]:
    out = jax.ShapeDtypeStruct(operands[0].shape, operands[0].dtype)
    return tuple(jax.ffi.ffi_call(JVP, (out,) * 4)(*operands))


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


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_raw_call_names_target_and_operand(case: str) -> None:
    call, words = BAD_CALLS[case]
    assert_ffi_error(call, JVP, words)


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


def jvp_of(kind: str) -> Callable[[jax.Array, jax.Array], Any]:
    """jvp of kepler with tangents built in the program: arrays of ones, symbolic
    zeros (a constant argument), and broadcast scalars."""

    def f(m: jax.Array, e: jax.Array) -> Any:
        if kind == "ones_zeros":
            return jax.jvp(kepler, (m, e), (jnp.ones_like(m), jnp.zeros_like(e)))
        if kind == "wrt_m":
            return jax.jvp(lambda m: kepler(m, e), (m,), (jnp.ones_like(m),))
        if kind == "wrt_e":
            return jax.jvp(lambda e: kepler(m, e), (e,), (jnp.full_like(e, 0.5),))
        return jax.jvp(kepler, (m, e), (jnp.full_like(m, 2.0), jnp.full_like(e, -1.0)))

    return f


@pytest.mark.parametrize(
    ("kind", "dm", "de"), [("ones_zeros", 1.0, 0.0), ("wrt_m", 1.0, 0.0), ("wrt_e", 0.0, 0.5), ("both", 2.0, -1.0)]
)
def test_jvp_with_tangents_built_in_the_program_is_one_fused_call(kind: str, dm: float, de: float) -> None:
    m, e = point()
    (s, c), (ds, dc) = jax.jit(jvp_of(kind))(m, e)
    for g, w in zip((s, c, ds, dc), reference(m, e, dm, de), strict=True):
        close(g, w)
    assert calls(lowered(jvp_of(kind), m, e)) == (0, 0, 0, 1)


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


@pytest.fixture(params=[True, False], ids=["direct_linearize", "jvp_partial_eval"])
def linearize_mode(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Both ways jax linearizes: directly, or the JVP rule then partial evaluation."""
    old = jax.config.jax_use_direct_linearize
    jax.config.update("jax_use_direct_linearize", request.param)
    yield request.param
    jax.config.update("jax_use_direct_linearize", old)


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
def test_grad_runs_the_solver_and_the_cotangent_kernel(make: Callable[[], Any], linearize_mode: bool) -> None:
    m, e = point()
    g_m, g_e = jax.jit(make())(m, e)
    _, _, ds_m, dc_m = reference(m, e, 1.0, 0.0)
    _, _, ds_e, dc_e = reference(m, e, 0.0, 1.0)
    close(g_m, 2 * ds_m + 3 * dc_m)
    close(g_e, 2 * ds_e + 3 * dc_e)
    n_kepler, n_tangent, n_cotangent, n_jvp = calls(lowered(make(), m, e))
    assert n_kepler >= 1 and n_cotangent == 1 and n_tangent == n_jvp == 0, (n_kepler, n_tangent, n_cotangent, n_jvp)


def test_linearize_runs_the_solver_once_and_the_tangent_kernel_per_call(linearize_mode: bool) -> None:
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


def test_check_grads_of_the_fused_op() -> None:
    """The fused op is differentiable in every operand, both modes, second order."""
    rng = np.random.default_rng(3)
    ops = (rng.uniform(-3, 3, 5), rng.uniform(0, 0.8, 5), rng.uniform(-1, 1, 5), rng.uniform(-1, 1, 5))
    for k in range(4):
        check_grads(lambda *o, k=k: kepler_jvp_op(*o)[k], ops, order=2, modes=("fwd", "rev"))


@pytest.mark.parametrize("e", [0.05, 0.3, 0.9])
def test_check_grads_second_order_both_linearize_modes(e: float, linearize_mode: bool) -> None:
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
