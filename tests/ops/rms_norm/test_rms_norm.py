"""xla_ffi_rs.rms_norm: accuracy, validation and every transformation."""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from helpers import RMS_BWD, RMS_FWD, count_calls, lowered, rms_norm_bwd_np, rms_norm_np
from xla_ffi_rs import rms_norm, rms_norm_inplace

TOL: dict[Any, float] = {jnp.float16: 2e-3, jnp.bfloat16: 1.6e-2, jnp.float32: 2e-6, jnp.float64: 1e-13}


def data(x_shape: tuple[int, ...], w_shape: tuple[int, ...], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=x_shape), rng.uniform(0.5, 1.5, w_shape)


def loss(x: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.sum(jnp.sin(rms_norm(x, w, eps=1e-3)))


@pytest.mark.parametrize("x_dtype", [jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64])
@pytest.mark.parametrize("w_dtype", [jnp.float16, jnp.float32, jnp.float64])
def test_forward_accuracy_and_dtype(x_dtype: type, w_dtype: type) -> None:
    x, w = data((4, 3, 8), (8,))
    xc, wc = jnp.asarray(x, x_dtype), jnp.asarray(w, w_dtype)
    y = rms_norm(xc, wc, eps=1e-5)
    out = jnp.result_type(x_dtype, w_dtype)
    assert y.dtype == out and y.shape == x.shape
    ref, _ = rms_norm_np(np.asarray(xc, np.float64), np.asarray(wc, np.float64), 1e-5)
    tol = TOL[out.type]
    np.testing.assert_allclose(np.asarray(y, np.float64), ref, rtol=tol, atol=tol)


_WEAK_CODE = r"""
import jax, jax.numpy as jnp, numpy as np
import xla_ffi_rs as xr
x = np.random.default_rng(3).normal(size=(3, 4))
def want(xd, w):  # float64; normalized over the weight's trailing axes (none for a 0-d weight)
    x64, w64 = np.asarray(xd, np.float64), np.asarray(w, np.float64)
    axes = tuple(range(x64.ndim - w64.ndim, x64.ndim))
    return x64 / np.sqrt(np.mean(x64 * x64, axis=axes, keepdims=True) + 1e-5) * w64
for dtype in (jnp.float16, jnp.bfloat16, jnp.float32):
    xd = jnp.asarray(x, dtype)
    tol = 1e-2 if jnp.finfo(dtype).bits == 16 else 1e-6
    for w in (2.0, 2, jnp.asarray(2.0), jnp.full((4,), 2.0)):  # all weakly typed
        for f in (xr.rms_norm, xr.rms_norm_inplace, jax.jit(xr.rms_norm)):
            y = f(xd, w)
            assert y.dtype == jnp.result_type(xd, w) == dtype, (dtype, w, y.dtype)
            np.testing.assert_allclose(np.asarray(y, np.float64), want(xd, w), rtol=tol, atol=tol)
    y = xr.rms_norm(1.5, jnp.asarray(2.0, dtype))  # a weak 0-d x takes the weight's dtype
    assert y.dtype == dtype, y.dtype
g = jax.grad(lambda w: xr.rms_norm(jnp.asarray(x, jnp.float16), w).astype(jnp.float32).sum())(2.0)
assert np.isfinite(float(g))
print("OK")
"""


@pytest.mark.parametrize("x64", ["0", "1"])
def test_a_python_scalar_weight_takes_xs_dtype(x64: str) -> None:
    """``y``'s dtype is ``jnp.result_type(x, weight)``, as documented, also for a
    weakly typed weight (a Python float): float16 ``x`` with weight ``2.0`` gave
    float32 with x64 off and float64 with it on (and ``rms_norm_inplace`` refused it:
    the result could not be written into ``x``)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("JAX_", "XLA_"))} | {"JAX_ENABLE_X64": x64}
    done = subprocess.run(
        [sys.executable, "-c", _WEAK_CODE], check=False, capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("OK"), done.stderr[-3000:]


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "every_form"),
    [
        ((5,), (5,), False),
        ((2, 3, 4), (3, 4), False),
        ((6, 7), (7,), False),
        ((0, 4), (4,), False),
        ((2, 4097), (4097,), True),
        ((1,) * 9, (1, 1), True),
        ((2, 1, 0, 1, 3), (1, 3), True),
        ((2, 3, 0), (3, 0), True),
    ],
    ids=lambda s: "x".join(map(str, s)) if isinstance(s, tuple) else ("every_form" if s else "forward"),
)
def test_weight_rank_and_shapes(x_shape: tuple[int, ...], w_shape: tuple[int, ...], every_form: bool) -> None:
    """The forward against float64 NumPy; for rows of 4097 elements, rank 9 and dims
    of 0 anywhere, also its in-place form and the gradient."""
    x, w = data(x_shape, w_shape)
    y = rms_norm(x, w, eps=0.1)
    want = rms_norm_np(x, w, 0.1)[0] if w.size else x  # y of a row of no elements is empty
    np.testing.assert_allclose(y, want, rtol=1e-13, atol=1e-13)
    if not every_form:
        return
    np.testing.assert_array_equal(rms_norm_inplace(x, w, eps=0.1), y)
    if x.size:
        dy = data(x_shape, w_shape, seed=1)[0]
        got = jax.vjp(lambda x, w: rms_norm(x, w, eps=0.1), x, w)[1](dy)
        for g, r in zip(got, rms_norm_bwd_np(dy, x, w, 0.1), strict=True):
            np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-12)


def test_eps_matters_and_default() -> None:
    x, w = np.full((2, 4), 1e-3), np.ones(4)
    np.testing.assert_allclose(rms_norm(x, w, eps=1.0), rms_norm_np(x, w, 1.0)[0], rtol=1e-13)
    np.testing.assert_allclose(rms_norm(x, w), rms_norm_np(x, w, 1e-5)[0], rtol=1e-13)
    np.testing.assert_allclose(rms_norm(x, w, eps=0), np.ones((2, 4)), rtol=1e-13)


# -- validation ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("x", "w", "arg", "got"),
    [
        (np.ones((2, 3), np.int32), np.ones(3), "x", "int32"),
        (np.ones((2, 3)), np.ones(3, np.int8), "weight", "int8"),
        (np.ones((2, 3), np.complex64), np.ones(3), "x", "complex64"),
        (np.ones((2, 3), bool), np.ones(3), "x", "bool"),
    ],
)
def test_non_float_dtype_is_type_error(x: np.ndarray, w: np.ndarray, arg: str, got: str) -> None:
    """The handler's dtype check, before lowering (its declaration's accepted dtypes)."""
    for fn in (rms_norm, jax.jit(rms_norm)):
        with pytest.raises(TypeError, match=rf"^xla_ffi_rs\.rms_norm_fwd: operand \d \({arg}\): ") as info:
            fn(x, w)
        for word in ("float16", "bfloat16", "float32", "float64", f"got {got}"):
            assert word in str(info.value), (word, str(info.value))


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "got"),
    [
        ((2, 3), (4,), "[4]"),
        ((2, 3), (2, 3, 1), "[2, 3, 1]"),
        ((3, 4), (3,), "[3]"),
        ((2, 3, 4), (2, 4), "[2, 4]"),
    ],
)
def test_bad_weight_shape_is_value_error(x_shape: tuple, w_shape: tuple, got: str) -> None:
    """The handler's shape rule (weight = the trailing axes of x), before lowering."""
    x, w = np.ones(x_shape), np.ones(w_shape)
    for fn in (rms_norm, jax.jit(rms_norm)):
        with pytest.raises(ValueError, match=r"^xla_ffi_rs\.rms_norm_fwd: operand \d \((x|weight)\): ") as info:
            fn(x, w)
        for word in ("expected", "got"):
            assert word in str(info.value), (word, str(info.value))


def test_bad_eps() -> None:
    x, w = np.ones((2, 3)), np.ones(3)
    with pytest.raises(ValueError, match=r"rms_norm: eps: expected a finite float >= 0, got -0.1"):
        rms_norm(x, w, eps=-0.1)
    for bad in (float("nan"), float("inf")):
        with pytest.raises(ValueError, match="eps"):
            rms_norm(x, w, eps=bad)
    with pytest.raises(TypeError, match=r"eps.*str"):
        rms_norm(x, w, eps="1e-5")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="eps"):
        jax.jit(rms_norm)(x, w, 1e-5)  # a traced eps


def test_errors_raise_before_lowering() -> None:
    with pytest.raises(ValueError, match="weight"):
        jax.eval_shape(rms_norm, jax.ShapeDtypeStruct((2, 3), jnp.float32), jax.ShapeDtypeStruct((2,), jnp.float32))


# -- transformations ----------------------------------------------------------


def test_jit_is_one_forward_call() -> None:
    x, w = data((3, 8), (8,))
    np.testing.assert_allclose(jax.jit(rms_norm)(x, w), rms_norm(x, w), rtol=1e-15)
    text = lowered(rms_norm, x, w)
    assert count_calls(text, RMS_FWD) == 1 and count_calls(text, RMS_BWD) == 0


def test_grad_uses_bwd_kernel_and_is_correct() -> None:
    x, w = data((3, 4, 8), (4, 8))
    ct = np.random.default_rng(1).normal(size=x.shape)
    f = lambda x, w: jnp.sum(rms_norm(x, w, eps=1e-3) * ct)  # noqa: E731
    dx, dw = jax.grad(f, argnums=(0, 1))(x, w)
    rdx, rdw = rms_norm_bwd_np(ct, x, w, 1e-3)
    np.testing.assert_allclose(dx, rdx, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(dw, rdw, rtol=1e-12, atol=1e-13)
    text = lowered(jax.grad(f, argnums=(0, 1)), x, w)
    assert count_calls(text, RMS_BWD) == 1 and count_calls(text, RMS_FWD) <= 1


def compiled_calls(fn: Any, *args: Any) -> dict[str, int]:
    """Custom calls to each rms_norm target in the optimized HLO of ``jit(fn)``."""
    hlo = str(jax.jit(fn).lower(*args).compile().as_text())
    return {t: hlo.count(f'custom_call_target="{t}"') for t in (RMS_FWD, RMS_BWD)}


@pytest.mark.parametrize(("x_shape", "w_shape"), [((4, 512, 512), (512,)), ((3, 4, 8), (4, 8)), ((6,), (6,))])
@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64, jnp.bfloat16])
def test_grad_without_the_primal_output_runs_no_forward_kernel(
    x_shape: tuple[int, ...], w_shape: tuple[int, ...], dtype: type
) -> None:
    """grad of a loss linear in y needs inv_rms, not y: XLA drops the forward call."""
    x, w = data(x_shape, w_shape)
    ct = np.random.default_rng(3).normal(size=x_shape)
    xc, wc, ctc = (jnp.asarray(a, dtype) for a in (x, w, ct))
    f = lambda x, w, ct: jnp.sum(rms_norm(x, w, eps=1e-3) * ct)  # noqa: E731
    g = jax.grad(f, argnums=(0, 1))
    assert compiled_calls(g, xc, wc, ctc) == {RMS_FWD: 0, RMS_BWD: 1}
    # Also under vmap over x (the weight shared) and with the weight batched.
    gv = jax.vmap(g, in_axes=(0, None, 0))
    xs, cts = jnp.stack([xc, 2 * xc]), jnp.stack([ctc, -ctc])
    assert compiled_calls(gv, xs, wc, cts)[RMS_FWD] == 0
    assert compiled_calls(jax.vmap(g), xs, jnp.stack([wc, wc]), cts)[RMS_FWD] == 0
    dx, dw = g(xc, wc, ctc)
    f64 = lambda a: np.asarray(a, np.float64)  # noqa: E731
    rdx, rdw = rms_norm_bwd_np(f64(ctc), f64(xc), f64(wc), 1e-3)
    tol = {"float32": 2e-4, "float64": 1e-12, "bfloat16": 5e-2}[jnp.dtype(dtype).name]
    scale = np.abs(rdw).max()
    np.testing.assert_allclose(f64(dx), rdx, rtol=tol, atol=tol * np.abs(rdx).max())
    np.testing.assert_allclose(f64(dw), rdw, rtol=tol, atol=tol * scale)


def reductions_outside_kernels(fn: Any, *args: Any) -> list[str]:
    """The reduce instructions of the optimized HLO of ``jit(fn)`` (the kernels' own
    sums are inside the custom calls and not among them)."""
    hlo = str(jax.jit(fn).lower(*args).compile().as_text())
    return [line.strip() for line in hlo.splitlines() if re.search(r"= \S+ reduce\(", line)]


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_grad_computes_inv_rms_inside_the_backward_kernel(dtype: type) -> None:
    """The backward target takes (dy, x, weight; eps) and recomputes inv_rms while
    it reads each row: the gradient program reads x only in the kernels, with no
    jnp reduction of x for inv_rms, whether y is used (sin) or not (linear)."""
    x, w = data((4, 64, 32), (32,))
    ct = np.random.default_rng(5).normal(size=x.shape)
    xc, wc, ctc = (jnp.asarray(a, dtype) for a in (x, w, ct))
    linear = jax.grad(lambda x, w, ct: jnp.sum(rms_norm(x, w, eps=1e-3) * ct), argnums=(0, 1))
    assert compiled_calls(linear, xc, wc, ctc) == {RMS_FWD: 0, RMS_BWD: 1}
    assert reductions_outside_kernels(linear, xc, wc, ctc) == []
    used = jax.grad(lambda x, w: jnp.sum(jnp.sin(rms_norm(x, w, eps=1e-3))), argnums=(0, 1))
    assert compiled_calls(used, xc, wc) == {RMS_FWD: 1, RMS_BWD: 1}
    assert reductions_outside_kernels(used, xc, wc) == []


def test_grad_keeps_the_forward_kernel_when_y_is_used() -> None:
    """The counterpart: a loss that reads y (sin) keeps exactly one forward call."""
    x, w = data((3, 8), (8,))
    assert compiled_calls(jax.grad(loss, argnums=(0, 1)), x, w) == {RMS_FWD: 1, RMS_BWD: 1}
    y = rms_norm(x, w, eps=1e-3)
    assert compiled_calls(lambda x, w: jax.value_and_grad(loss)(x, w), x, w)[RMS_FWD] == 1
    np.testing.assert_allclose(
        jax.grad(loss)(x, w), rms_norm_bwd_np(np.cos(np.asarray(y)), x, w, 1e-3)[0], rtol=1e-12, atol=1e-13
    )


@pytest.mark.parametrize(
    ("x_dtype", "w_dtype"), [(jnp.float32, jnp.float32), (jnp.bfloat16, jnp.float32), (jnp.float16, jnp.float16)]
)
def test_grad_low_precision_dtypes(x_dtype: type, w_dtype: type) -> None:
    x, w = data((4, 16), (16,))
    xc, wc = jnp.asarray(x, x_dtype), jnp.asarray(w, w_dtype)
    dx, dw = jax.grad(lambda x, w: jnp.sum(rms_norm(x, w)), argnums=(0, 1))(xc, wc)
    assert dx.dtype == x_dtype and dw.dtype == w_dtype
    rdx, rdw = rms_norm_bwd_np(np.ones(x.shape), np.asarray(xc, np.float64), np.asarray(wc, np.float64), 1e-5)
    tol = 5e-2 if jnp.float32 not in (x_dtype, w_dtype) or x_dtype == jnp.bfloat16 else 1e-5
    np.testing.assert_allclose(np.asarray(dx, np.float64), rdx, rtol=tol, atol=tol)
    np.testing.assert_allclose(np.asarray(dw, np.float64), rdw, rtol=tol, atol=tol * 4)


def nearest(v: np.ndarray, dtype: Any) -> np.ndarray:
    """`v` (float64) rounded once to the 16-bit `dtype`, to nearest, ties to even:
    the value's neighbours in `dtype` compared exactly in float64, whatever way
    NumPy or ml_dtypes would convert (some go through a rounded float32)."""
    a = np.abs(v)
    guess = a.astype(dtype).view(np.uint16).astype(np.int64)
    cands = np.stack([guess - 1, guess, guess + 1]).clip(0, 0x7BFF if dtype == np.float16 else 0x7F7F)
    vals = cands.astype(np.uint16).view(dtype).astype(np.float64)
    dist = np.abs(vals - a)
    best = dist.min(axis=0)
    # Among the nearest, the even bit pattern (a tie has one of each).
    score = np.where(dist == best, cands % 2, 2)
    bits = np.take_along_axis(cands, score.argmin(axis=0)[None], axis=0)[0]
    out = bits.astype(np.uint16).view(dtype)
    return np.where(v < 0, -out, out)


@pytest.mark.parametrize(
    ("x_dtype", "w_dtype"),
    [(jnp.bfloat16, jnp.bfloat16), (jnp.float16, jnp.float16), (jnp.bfloat16, jnp.float64), (jnp.float16, jnp.float64)],
)
def test_grad_16_bit_results_are_rounded_once(x_dtype: type, w_dtype: type) -> None:
    # The backward kernel computes in float32 (float64 when the promoted dtype is),
    # then rounds dx to x's dtype and dweight to the weight's. The same call with x
    # and the weight in that accumulator dtype returns those values unrounded;
    # rounded once to nearest even, they must be this call's bits. 2^19 elements
    # of each, so that values a hair past a tie (1 in about 10^4) occur.
    wide = jnp.float64 if jnp.float64 in (x_dtype, w_dtype) else jnp.float32
    y_dtype = jnp.promote_types(x_dtype, w_dtype)
    x, w = data((8, 1 << 16), (1 << 16,), seed=3)
    xn, wn = jnp.asarray(x, x_dtype), jnp.asarray(w, w_dtype)
    # Multiples of 1/32 below 8 in magnitude: the same cotangent in every dtype.
    g = np.round(np.random.default_rng(4).normal(size=x.shape).clip(-7.9, 7.9) * 32) / 32
    dx, dw = jax.vjp(rms_norm, xn, wn)[1](jnp.asarray(g, y_dtype))
    xw, ww = jnp.asarray(xn, wide), jnp.asarray(wn, wide)
    dxw, dww = jax.vjp(rms_norm, xw, ww)[1](jnp.asarray(g, wide))
    for got, exact, dtype in ((dx, dxw, x_dtype), (dw, dww, w_dtype)):
        assert got.dtype == dtype
        if dtype == jnp.float64:
            continue
        want = nearest(np.asarray(exact, np.float64), np.dtype(dtype))
        bad = np.flatnonzero(np.asarray(got).view(np.uint16) != want.view(np.uint16))
        assert bad.size == 0, (
            f"{bad.size} of {want.size} differ, first at {bad[:3]}: {np.asarray(got).ravel()[bad[:3]]} vs {want.ravel()[bad[:3]]}"
        )


def test_jvp_is_forward_mode_without_bwd_kernel() -> None:
    x, w = data((3, 8), (8,))
    dx, dw = data((3, 8), (8,), seed=2)
    f = lambda x, w: rms_norm(x, w, eps=1e-2)  # noqa: E731
    _y, dy = jax.jvp(f, (x, w), (dx, dw))
    h = 1e-6
    fd = (rms_norm_np(x + h * dx, w + h * dw, 1e-2)[0] - rms_norm_np(x - h * dx, w - h * dw, 1e-2)[0]) / (2 * h)
    np.testing.assert_allclose(dy, fd, rtol=1e-7, atol=1e-8)
    text = lowered(lambda x, w, dx, dw: jax.jvp(f, (x, w), (dx, dw)), x, w, dx, dw)
    assert count_calls(text, RMS_FWD) == 1 and count_calls(text, RMS_BWD) == 0


def test_check_grads_first_and_second_order() -> None:
    x, w = data((2, 5), (5,))
    check_grads(loss, (x, w), order=2, modes=("fwd", "rev"))
    check_grads(jax.jit(lambda x, w: rms_norm(x, w, eps=1e-3)), (x, w), order=2, modes=("fwd", "rev"))


def test_hessian_vector_product() -> None:
    x, w = data((3, 4), (4,))
    vx, vw = data((3, 4), (4,), seed=3)

    def hvp(x: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
        return jax.jvp(jax.grad(loss, argnums=(0, 1)), (x, w), (vx, vw))[1]

    check_grads(hvp, (x, w), order=1, modes=("fwd", "rev"))
    g = jax.grad(loss, argnums=(0, 1))
    h = 1e-5
    plus, minus = g(x + h * vx, w + h * vw), g(x - h * vx, w - h * vw)
    hx, hw = jax.jit(hvp)(x, w)
    np.testing.assert_allclose(hx, (plus[0] - minus[0]) / (2 * h), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(hw, (plus[1] - minus[1]) / (2 * h), rtol=1e-6, atol=1e-8)
    # The gradient value comes from the bwd kernel (the HVP alone is jnp code).
    grad_and_hvp = lambda x, w: jax.jvp(jax.grad(loss, argnums=(0, 1)), (x, w), (vx, vw))  # noqa: E731
    assert count_calls(lowered(grad_and_hvp, x, w), RMS_BWD) == 1


@pytest.mark.parametrize(
    ("in_axes", "x_shape", "w_shape"),
    [
        ((0, None), (5, 3, 4), (4,)),
        ((1, None), (3, 5, 4), (4,)),
        ((None, 0), (3, 4), (5, 4)),
        ((0, 0), (5, 3, 4), (5, 4)),
        ((2, 1), (3, 4, 5), (4, 5)),
    ],
)
def test_vmap_forward_one_call(in_axes: tuple, x_shape: tuple, w_shape: tuple) -> None:
    x, w = data(x_shape, w_shape)
    f = jax.vmap(lambda x, w: rms_norm(x, w, eps=1e-4), in_axes=in_axes)
    y = f(x, w)
    for i in range(5):
        xi = x if in_axes[0] is None else np.take(x, i, axis=in_axes[0])
        wi = w if in_axes[1] is None else np.take(w, i, axis=in_axes[1])
        np.testing.assert_allclose(y[i], rms_norm_np(xi, wi, 1e-4)[0], rtol=1e-12, atol=1e-13)
    text = lowered(f, x, w)
    assert count_calls(text, RMS_FWD) == 1 and "while" not in text


@pytest.mark.parametrize("w_batched", [False, True])
def test_vmap_of_grad_per_example(w_batched: bool) -> None:
    x, w = data((5, 3, 4), (5, 4) if w_batched else (4,))
    g = jax.grad(loss, argnums=(0, 1))
    in_axes = (0, 0 if w_batched else None)
    dx, dw = jax.vmap(g, in_axes=in_axes)(x, w)
    assert dw.shape == (5, 4)
    for i in range(5):
        rdx, rdw = g(x[i], w[i] if w_batched else w)
        np.testing.assert_allclose(dx[i], rdx, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(dw[i], rdw, rtol=1e-12, atol=1e-13)
    text = lowered(jax.vmap(g, in_axes=in_axes), x, w)
    assert count_calls(text, RMS_BWD) == 1 and count_calls(text, RMS_FWD) == 1 and "while" not in text
    jitted = jax.jit(jax.vmap(g, in_axes=in_axes))(x, w)
    np.testing.assert_allclose(jitted[1], dw, rtol=1e-12)


def test_grad_of_vmap_and_jit_of_all() -> None:
    x, w = data((5, 3, 4), (4,))
    f = lambda x, w: jnp.sum(jnp.sin(jax.vmap(rms_norm, in_axes=(0, None))(x, w)))  # noqa: E731
    dx, dw = jax.grad(f, argnums=(0, 1))(x, w)
    rdx, rdw = jax.grad(loss_eps(1e-5), argnums=(0, 1))(x, w)
    np.testing.assert_allclose(dx, rdx, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(dw, rdw, rtol=1e-12, atol=1e-13)
    _jdx, jdw = jax.jit(jax.grad(f, argnums=(0, 1)))(x, w)
    np.testing.assert_allclose(jdw, dw, rtol=1e-12)
    assert count_calls(lowered(jax.grad(f, argnums=(0, 1)), x, w), RMS_BWD) == 1


def loss_eps(eps: float):
    return lambda x, w: jnp.sum(jnp.sin(rms_norm(x, w, eps=eps)))


def test_vmap_of_jvp_and_jvp_of_vmap() -> None:
    x, w = data((5, 3, 4), (4,))
    tx, tw = data((5, 3, 4), (4,), seed=4)
    f = lambda x, w: rms_norm(x, w, eps=1e-3)  # noqa: E731
    a = jax.vmap(lambda x, t: jax.jvp(f, (x, w), (t, tw))[1])(x, tx)
    b = jax.jvp(jax.vmap(f, in_axes=(0, None)), (x, w), (tx, tw))[1]
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    c = jax.jit(jax.vmap(lambda x, t, w, tw: jax.jvp(f, (x, w), (t, tw))[1], in_axes=(0, 0, None, None)))(x, tx, w, tw)
    np.testing.assert_allclose(c, b, rtol=1e-12, atol=1e-13)


def test_vmap_of_hessian_vector_product() -> None:
    x, w = data((3, 2, 4), (4,))
    v = data((3, 2, 4), (4,), seed=5)[0]

    def hvp_x(x: jax.Array, v: jax.Array) -> jax.Array:
        return jax.jvp(jax.grad(loss), (x, w), (v, jnp.zeros_like(w)))[1]

    batched = jax.jit(jax.vmap(hvp_x))(x, v)
    for i in range(3):
        np.testing.assert_allclose(batched[i], hvp_x(x[i], v[i]), rtol=1e-11, atol=1e-12)


def test_jvp_of_the_forward_op_gives_both_tangents() -> None:
    """The forward op's JVP rule gives y's tangent and inv_rms's, each against float64
    finite differences of the NumPy reference (rms_norm itself returns only y, so a
    wrong inv_rms tangent, its sign say, shows only here)."""
    from xla_ffi_rs.ops.rms_norm import rms_norm_fwd_op

    x, w = data((3, 8), (8,))
    dx, dw = data((3, 8), (8,), seed=2)
    eps = 1e-2
    (y, inv), (dy, dinv) = jax.jvp(lambda x, w: rms_norm_fwd_op(x, w, eps=eps), (x, w), (dx, dw))
    want_y, want_inv = rms_norm_np(x, w, eps)
    np.testing.assert_allclose(y, want_y, rtol=1e-13)
    np.testing.assert_allclose(inv, want_inv, rtol=1e-13)
    h = 1e-6
    plus, minus = rms_norm_np(x + h * dx, w + h * dw, eps), rms_norm_np(x - h * dx, w - h * dw, eps)
    np.testing.assert_allclose(dy, (plus[0] - minus[0]) / (2 * h), rtol=1e-7, atol=1e-8)
    np.testing.assert_allclose(dinv, (plus[1] - minus[1]) / (2 * h), rtol=1e-7, atol=1e-8)
