"""``binding.Op``'s ``input_output_aliases`` and ``has_side_effect``, and the donated
``rms_norm_inplace`` built on them."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import xla_ffi_rs as xr
from helpers import RMS_FWD, count_calls, rms_norm_bwd_np, rms_norm_np
from xla_ffi_rs import binding


def rng_x(shape: tuple[int, ...], dtype: Any = np.float64) -> jax.Array:
    return jnp.asarray(np.random.default_rng(sum(shape)).standard_normal(shape).astype(dtype))


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (64, 256), (2, 3, 40)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, jnp.bfloat16, np.float16])
def test_inplace_equals_rms_norm(shape: tuple[int, ...], dtype: Any) -> None:
    x, w = rng_x(shape, dtype), rng_x(shape[-1:], dtype)
    want = xr.rms_norm(x, w, eps=1e-5)
    got = jax.jit(lambda x, w: xr.rms_norm_inplace(x, w, eps=1e-5))(x, w)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(np.asarray(got, np.float64), np.asarray(want, np.float64))
    y_ref, _ = rms_norm_np(x, w, 1e-5)
    tol = 1e-12 if dtype == np.float64 else 1e-2
    np.testing.assert_allclose(np.asarray(got, np.float64), y_ref, rtol=tol, atol=tol)


def test_donated_x_is_overwritten_by_y() -> None:
    f = jax.jit(lambda x, w: xr.rms_norm_inplace(x, w, eps=1e-5), donate_argnums=0)
    x, w = rng_x((128, 512)), rng_x((512,))
    want = np.asarray(xr.rms_norm(x, w, eps=1e-5))
    pointer = x.unsafe_buffer_pointer()
    y = f(x, w)
    assert x.is_deleted() and y.unsafe_buffer_pointer() == pointer
    np.testing.assert_array_equal(np.asarray(y), want)


def test_lowering_aliases_operand_zero_to_result_zero() -> None:
    x, w = rng_x((4, 8)), rng_x((8,))
    text = jax.jit(lambda x, w: xr.rms_norm_inplace(x, w)).lower(x, w).as_text()
    assert count_calls(text, RMS_FWD) == 1
    assert "output_operand_alias<output_tuple_indices = [0], operand_index = 0" in text


def test_inplace_transformations() -> None:
    x, w = rng_x((3, 6)), rng_x((6,))
    check_grads(lambda x, w: xr.rms_norm_inplace(x, w, eps=1e-3), (x, w), order=2, modes=("fwd", "rev"))
    dy = jnp.ones_like(x)
    gx, gw = jax.grad(lambda x, w: jnp.sum(xr.rms_norm_inplace(x, w, eps=1e-3)), argnums=(0, 1))(x, w)
    want_dx, want_dw = rms_norm_bwd_np(dy, x, w, 1e-3)
    np.testing.assert_allclose(gx, want_dx, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(gw, want_dw, rtol=1e-10, atol=1e-12)
    xb, wb = rng_x((5, 3, 6)), rng_x((5, 6))
    for in_axes, ws in (((0, None), w), ((1, None), w), ((0, 0), wb)):
        xs = jnp.moveaxis(xb, 0, in_axes[0])
        got = jax.vmap(lambda x, w: xr.rms_norm_inplace(x, w), in_axes=in_axes)(xs, ws)
        want = jax.vmap(lambda x, w: xr.rms_norm(x, w), in_axes=in_axes)(xs, ws)
        np.testing.assert_allclose(got, want, rtol=1e-14)


def test_inplace_rejects_a_promoting_weight_and_bad_input() -> None:
    with pytest.raises(
        TypeError,
        match=r"^rms_norm_inplace: weight: a float32 weight makes y float32, which cannot be written into x of "
        r"bfloat16; pass weight\.astype\(x\.dtype\), or use rms_norm",
    ):
        xr.rms_norm_inplace(jnp.ones((2, 4), jnp.bfloat16), jnp.ones(4, jnp.float32))
    with pytest.raises(ValueError, match=r"xla_ffi_rs\.rms_norm_fwd: operand \d \((x|weight)\): expected"):
        xr.rms_norm_inplace(jnp.ones((2, 4)), jnp.ones(3))
    with pytest.raises(TypeError, match=r"xla_ffi_rs\.rms_norm_fwd: operand 0 \(x\): .*got int32"):
        xr.rms_norm_inplace(jnp.ones((2, 4), jnp.int32), jnp.ones(4))


def _copy_op(name: str, **kw: Any) -> binding.Op:
    """An op on the real forward target (aliases and effects apply to FFI calls)."""
    return binding.Op(
        name,
        abstract_eval=lambda x, w, *, eps: [
            jax.core.ShapedArray(x.shape, x.dtype),
            jax.core.ShapedArray(x.shape[:-1], x.dtype),
        ],
        targets=xr.target_names(RMS_FWD),
        attributes=lambda p: {"eps": float(p["eps"])},
        **kw,
    )


def test_op_has_side_effect_keeps_an_unused_call() -> None:
    x, w = rng_x((2, 4)), rng_x((4,))
    plain, effect = _copy_op("fwd_plain"), _copy_op("fwd_effect", has_side_effect=True)
    text = jax.jit(lambda x, w: (effect(x, w, eps=1e-5), x)[1]).lower(x, w).as_text()
    assert "has_side_effect = true" in text and count_calls(text, RMS_FWD) == 1
    text = jax.jit(lambda x, w: (plain(x, w, eps=1e-5), x)[1]).lower(x, w).as_text()
    assert count_calls(text, RMS_FWD) == 0  # without the effect, XLA may drop it


def test_op_checks_its_aliases() -> None:
    x, w = rng_x((2, 4)), rng_x((4,))
    bad = _copy_op("fwd_bad_alias", input_output_aliases={1: 0})  # weight (4,) vs y (2, 4)
    with pytest.raises(ValueError, match=r"fwd_bad_alias: input_output_aliases \{1: 0\} needs operand 1 and result 0"):
        jax.jit(lambda x, w: bad(x, w, eps=1e-5)).lower(x, w)
    out_of_range = _copy_op("fwd_alias_range", input_output_aliases={0: 5})
    with pytest.raises(ValueError, match="out of range for 2 operands and 2 results"):
        jax.jit(lambda x, w: out_of_range(x, w, eps=1e-5)).lower(x, w)
