"""rms_norm at the edges of the floating-point range: rows of small norm with
``eps=0`` (their gradients must not overflow where they are finite), non-finite
elements (they must not spread to other rows), and a row's result independent of
its neighbours and of the batch size, bit for bit; with ``XFR_BIG_TESTS=1``, the far
end of a batch past 2**31 elements."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import big_arrays, rms_norm_bwd_np, rms_norm_np
from xla_ffi_rs import rms_norm, rms_norm_inplace
from xla_ffi_rs.ops.rms_norm import rms_norm_bwd_jnp, rms_norm_bwd_op


def tiny_row(dtype: Any) -> tuple[np.ndarray, float]:
    """Two rows whose norm makes inv_rms**3 overflow the dtype (inv_rms itself,
    and the gradient, of order 1e13 / 1e110, are finite), and the scale used."""
    scale = 1e-13 if dtype == np.float32 else 1e-110
    u = np.array([[1.0, -0.5, 0.75, -0.25, 0.5, 1.0, -1.0, 0.3], [0.2, 0.9, -0.4, 0.6, -0.8, 0.1, 0.5, -0.7]])
    return (u * scale).astype(dtype), scale


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gradients_of_a_row_of_small_norm_with_eps_zero_are_finite(dtype: Any) -> None:
    """With eps = 0 the op is scale invariant: dx(x) = dx(x / a) / a. Forming
    inv_rms**3 first overflowed to inf (float32: rms below 1.4e-13)."""
    x, a = tiny_row(dtype)
    rng = np.random.default_rng(0)
    w, dy = rng.uniform(0.5, 1.5, 8).astype(dtype), rng.standard_normal(x.shape).astype(dtype)
    want = rms_norm_bwd_np(dy, x.astype(np.float64) / a, w, 0.0)[0] / a
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    atol = rtol * float(np.max(np.abs(want)))

    for op in (rms_norm, rms_norm_inplace):
        _, vjp = jax.vjp(lambda x, op=op: op(x, w, eps=0.0), x)
        np.testing.assert_allclose(np.asarray(vjp(dy)[0]), want, rtol, atol, err_msg=f"{op.__name__} grad")
    # The jnp formula platforms without the target lower.
    dx_jnp, _ = rms_norm_bwd_jnp(jnp.asarray(dy), jnp.asarray(x), jnp.asarray(w), eps=0.0)
    np.testing.assert_allclose(np.asarray(dx_jnp), want, rtol, atol, err_msg="rms_norm_bwd_jnp")
    # Forward mode: the tangent of y along dy is J dy; its inner product with dy
    # equals that of the reverse-mode dx with dy.
    _, tangent = jax.jvp(lambda x: rms_norm(x, w, eps=0.0), (x,), (dy,))
    got = float(np.sum(np.asarray(tangent, np.float64) * dy))
    np.testing.assert_allclose(got, float(np.sum(want * dy)), rtol=1e-4 if dtype == np.float32 else 1e-10)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, np.float32, np.float64])
def test_a_non_finite_element_stays_in_its_row(dtype: Any) -> None:
    """inf or NaN in one element makes its own row inf/NaN/0 (as the formula does)
    and changes no other row, forward and backward; dweight is a sum over rows."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 37)).astype(np.float64)
    x[1, 3], x[3, 30] = np.inf, np.nan
    xd, w = jnp.asarray(x, dtype), jnp.asarray(rng.uniform(0.5, 1.5, 37), dtype)
    dy = jnp.asarray(rng.standard_normal(x.shape), dtype)
    y = np.asarray(jax.jit(lambda x, w: rms_norm(x, w))(xd, w), np.float64)
    dx = jax.vjp(lambda x: rms_norm(x, w), xd)[1](dy)[0]
    clean = [0, 2, 4]
    ref_y = rms_norm_np(np.asarray(xd, np.float64)[clean], np.asarray(w, np.float64), 1e-5)[0]
    ref_dx = rms_norm_bwd_np(np.asarray(dy, np.float64)[clean], np.asarray(xd, np.float64)[clean], w, 1e-5)[0]
    tol = 2e-2 if jnp.finfo(dtype).bits == 16 else 1e-5
    np.testing.assert_allclose(y[clean], ref_y, rtol=tol, atol=tol)
    np.testing.assert_allclose(np.asarray(dx, np.float64)[clean], ref_dx, rtol=tol, atol=tol * 10)
    assert np.isnan(y[1, 3]) and np.all(y[1, np.arange(37) != 3] == 0), y[1]
    assert np.all(np.isnan(y[3])), y[3]


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16, np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 33, 1025])
def test_a_rows_result_is_independent_of_its_neighbours_and_the_batch(dtype: Any, n: int) -> None:
    """The same row gives the same bits alone, in a batch of 7 at any position, in a
    batch of 300 (split over threads), run twice, and under vmap; forward and dx."""
    rng = np.random.default_rng(2)
    batch = jnp.asarray(rng.standard_normal((300, n)) * rng.uniform(0.1, 10, (300, 1)), dtype)
    w, dy = jnp.asarray(rng.uniform(0.5, 1.5, n), dtype), jnp.asarray(rng.standard_normal((300, n)), dtype)
    fwd = jax.jit(lambda x: rms_norm(x, w))
    bwd = jax.jit(lambda x, g: jax.vjp(lambda x: rms_norm(x, w), x)[1](g)[0])
    y_all, dx_all = np.asarray(fwd(batch)), np.asarray(bwd(batch, dy))
    assert np.array_equal(np.asarray(fwd(batch)), y_all) and np.array_equal(np.asarray(bwd(batch, dy)), dx_all)
    for k in (0, 5, 299):
        for lo in (k, max(k - 3, 0), min(k, 293)):
            sl = slice(lo, lo + 7) if lo != k else slice(k, k + 1)
            pos = k - sl.start
            assert np.array_equal(np.asarray(fwd(batch[sl]))[pos], y_all[k]), (k, sl)
            assert np.array_equal(np.asarray(bwd(batch[sl], dy[sl]))[pos], dx_all[k]), (k, sl)
    y_vmap = np.asarray(jax.jit(jax.vmap(lambda r: rms_norm(r, w)))(batch))
    assert np.array_equal(y_vmap, y_all)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_vmap_over_a_batched_weight_gives_the_bits_of_a_loop(dtype: Any) -> None:
    """vmap over (x, weight) pairs runs one call with a unit weight and applies the
    weights after it: y and dx must still be rounded once, as a call per pair
    rounds them (16-bit results were rounded twice), for rms_norm and
    rms_norm_inplace alike (float32 and float64 round once either way)."""
    rng = np.random.default_rng(4)
    x = jnp.asarray(rng.standard_normal((3, 4, 37)), dtype)
    w, dy = jnp.asarray(rng.uniform(0.5, 1.5, (3, 37)), dtype), jnp.asarray(rng.standard_normal(x.shape), dtype)
    batched, one = jax.jit(jax.vmap(y_and_dx)), jax.jit(y_and_dx)
    got = [np.asarray(a) for a in batched(x, w, dy)]
    for i in range(3):
        want = [np.asarray(a) for a in one(x[i], w[i], dy[i])]
        for name, g, v in zip(("y", "dx", "y inplace", "dx inplace"), got, want, strict=True):
            assert np.array_equal(g[i], v), (name, i)


def y_and_dx(x: jax.Array, w: jax.Array, dy: jax.Array) -> list[jax.Array]:
    """y and the vjp's dx of rms_norm and of rms_norm_inplace."""
    out = []
    for op in (rms_norm, rms_norm_inplace):
        y, vjp = jax.vjp(lambda x, op=op: op(x, w), x)
        out += [y, vjp(dy)[0]]
    return out


def _pattern_rows(r0: int, r1: int, n: int, xp: Any) -> Any:
    """Rows ``r0:r1`` of a pattern exact in bfloat16 (multiples of 1/8 in [-4, 4)),
    with ``xp`` = ``jnp`` (in the program, no host copy) or ``np``."""
    i = xp.arange(r0, r1, dtype=xp.int32)[:, None]
    j = xp.arange(n, dtype=xp.int32)[None, :]
    return ((i * 7 + j * 13) % 64 - 32).astype(xp.float32) / 8


@big_arrays
@pytest.mark.parametrize("which", ["rms_norm", "rms_norm_inplace", "rms_norm_bwd"])
def test_a_batch_past_2_31_elements_is_right_at_its_far_end(which: str) -> None:
    """x of (2**21 + 1, 1024) bfloat16, 2**31 + 1024 elements (4 GiB), made in the
    program: its first and last rows against float64 NumPy, forward, in place and
    backward (which takes x as its dy too: two such arrays live, not three)."""
    rows, n = 2**21 + 1, 1024
    w = jnp.asarray(np.linspace(0.5, 1.5, n), jnp.bfloat16)

    def run(w: jax.Array) -> jax.Array:
        x = _pattern_rows(0, rows, n, jnp).astype(jnp.bfloat16)
        if which == "rms_norm_bwd":
            return rms_norm_bwd_op(x, x, w, eps=1e-5)[0]
        return (rms_norm if which == "rms_norm" else rms_norm_inplace)(x, w, eps=1e-5)

    y = jax.jit(run)(w)
    ends = {0: np.asarray(y[:3], np.float64), rows - 3: np.asarray(y[-3:], np.float64)}
    del y
    w64 = np.asarray(w, np.float64)
    for r0, got in ends.items():
        x = _pattern_rows(r0, r0 + 3, n, np).astype(np.float64)
        want = rms_norm_bwd_np(x, x, w64, 1e-5)[0] if which == "rms_norm_bwd" else rms_norm_np(x, w64, 1e-5)[0]
        np.testing.assert_allclose(got, want, rtol=1.6e-2, atol=1.6e-2, err_msg=f"rows {r0}..{r0 + 3}")
