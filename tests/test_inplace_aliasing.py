"""``rms_norm_inplace`` where buffers are shared: donation, the same array twice, a
donated array used again in the jitted function, slices and views of it, loops, and
a binding op whose alias the handler cannot take. Each result is compared with the
NumPy float64 reference (or, for the in-place kernel, with ``rms_norm``'s bits)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr
from helpers import RMS_FWD, assert_ffi_error, rms_norm_np
from xla_ffi_rs import binding

EPS = 1e-3


def ref(x: Any, w: Any) -> np.ndarray:
    return rms_norm_np(x, w, EPS)[0]


def rng(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape)


def inplace(x: Any, w: Any) -> jax.Array:
    return xr.rms_norm_inplace(x, w, eps=EPS)


def test_eager_call_leaves_the_callers_array_unchanged() -> None:
    xn, w = rng((3, 4)), rng((4,), 1)
    for x in (jnp.asarray(xn), np.array(xn), jax.device_put(np.array(xn), may_alias=True)):
        y = inplace(x, w)
        np.testing.assert_allclose(y, ref(xn, w), rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(np.asarray(x), xn)


@pytest.mark.parametrize("donate", [(), (0,)])
def test_same_array_as_x_and_weight(donate: tuple[int, ...]) -> None:
    wn = rng((7,))
    y = jax.jit(lambda w: inplace(w, w), donate_argnums=donate)(jnp.asarray(wn))
    np.testing.assert_allclose(y, ref(wn, wn), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("donate", [(), (0,)])
def test_x_read_again_after_the_in_place_call(donate: tuple[int, ...]) -> None:
    """XLA keeps x alive (copies it) for any later use in the function."""
    xn, w = rng((3, 9)), rng((9,), 1)
    y, x = jax.jit(lambda x, w: (inplace(x, w), x), donate_argnums=donate)(jnp.asarray(xn), w)
    np.testing.assert_array_equal(np.asarray(x), xn)
    np.testing.assert_allclose(y, ref(xn, w), rtol=1e-12, atol=1e-12)
    a, b, s = jax.jit(lambda x, w: (inplace(x, w), inplace(x, 2 * w), x + inplace(x, w)), donate_argnums=donate)(
        jnp.asarray(xn), w
    )
    np.testing.assert_allclose(a, ref(xn, w), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(b, ref(xn, 2 * w), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(s, xn + ref(xn, w), rtol=1e-12, atol=1e-12)


def test_slices_and_views_of_a_donated_buffer() -> None:
    bn, w = rng((6, 8)), rng((8,), 1)
    f = jax.jit(lambda b, w: (inplace(b[1:4], w), inplace(b[:, 2:7], w[:5]), b), donate_argnums=0)
    rows, cols, b = f(jnp.asarray(bn), w)
    np.testing.assert_allclose(rows, ref(bn[1:4], w), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cols, ref(bn[:, 2:7], w[:5]), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(np.asarray(b), bn)
    row = rng((5,), 2)
    y = jax.jit(lambda r, w: inplace(jnp.broadcast_to(r, (3, 5)), w))(jnp.asarray(row), w[:5])
    np.testing.assert_allclose(y, ref(np.broadcast_to(row, (3, 5)), w[:5]), rtol=1e-12, atol=1e-12)


def test_chained_and_looped_in_place_calls_on_a_donated_carry() -> None:
    xn, w = rng((4, 3, 5)), rng((5,), 1)
    want, carry = [], np.zeros((3, 5))
    for i in range(4):
        carry = ref(carry + xn[i], w)
        want.append(carry)

    def body(c: jax.Array, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        y = inplace(c + x, w)
        return y, y

    final, ys = jax.jit(lambda c, x: jax.lax.scan(body, c, x), donate_argnums=(0, 1))(jnp.zeros((3, 5)), xn)
    np.testing.assert_allclose(ys, np.stack(want), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(final, carry, rtol=1e-10, atol=1e-12)
    f = jax.jit(lambda x: jax.lax.fori_loop(0, 3, lambda i, x: inplace(x, w), x), donate_argnums=0)
    np.testing.assert_allclose(f(jnp.asarray(xn[0])), ref(ref(ref(xn[0], w), w), w), rtol=1e-10, atol=1e-12)


PAIRS = [
    (np.float64, np.float64),
    (np.float64, np.float16),
    (np.float32, jnp.bfloat16),
    (np.float32, np.float16),
    (jnp.bfloat16, jnp.bfloat16),
    (np.float16, np.float16),
]


@pytest.mark.parametrize("x_dtype,w_dtype", PAIRS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(1, 1), (1, 17), (3, 31), (2, 65), (0, 5), (3, 0), (1000, 9)])
def test_donated_in_place_kernel_gives_rms_norms_bits(x_dtype: Any, w_dtype: Any, shape: tuple[int, ...]) -> None:
    """The in-place kernel, odd and non-SIMD-multiple n, one row and no rows."""
    x, w = jnp.asarray(rng(shape) * 3, x_dtype), jnp.asarray(rng(shape[-1:], 1), w_dtype)
    want = np.asarray(xr.rms_norm(x, w, eps=EPS))
    f = jax.jit(inplace, donate_argnums=0)
    got = np.asarray(f(jnp.array(x, copy=True), w))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    if want.size:
        np.testing.assert_allclose(got.astype(np.float64), ref(x, w), rtol=2e-2, atol=2e-2)


def test_an_alias_the_handler_cannot_take_is_an_error_naming_operand_and_result() -> None:
    """The forward pairs y with x only: weight aliased to y (1-d x) is refused at run
    time, naming the target, the operand and the result, and never read as both."""
    decl = xr.declarations()[RMS_FWD]
    assert decl is not None
    op = binding.op(decl, name="rms_norm_fwd_weight_alias", input_output_aliases={1: 0})
    x, w = jnp.asarray(rng((7,))), jnp.asarray(rng((7,), 1))
    assert_ffi_error(
        lambda: jax.jit(lambda x, w: op(x, w, eps=EPS)[0])(x, w),
        RMS_FWD,
        ("INVALID_ARGUMENT", "operand 1 (weight): shares memory with result 0"),
    )
