"""rms_norm on the GPU, beyond the generic GPU-against-CPU checks of
tests/gpu/test_gpu_ops.py: gradients for every dtype pair, ``check_grads``,
``dweight`` bit-identical across runs, ``vmap``, the backward's global accumulator
for long rows, bad input (the same error as on the CPU), and the Hessian-vector
product. Skipped as a whole without a GPU.

Tolerances, GPU vs CPU, by output dtype: f64 rtol 1e-12, f32 rtol 2e-5, f16 rtol 2e-3,
bf16 rtol 1.6e-2 (the CUDA kernels accumulate in f32/f64 like the CPU, but in a
different order, and round f32 intermediates; a 16-bit output may differ by 1-2 ulp).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

import xla_ffi_rs as xr
from gpu_checks import error_of, f64, gpu_and_cpu_or_skip, gpu_vs_cpu, on

GPU, CPU = gpu_and_cpu_or_skip()

RTOL = {jnp.float64: 1e-12, jnp.float32: 2e-5, jnp.float16: 2e-3, jnp.bfloat16: 1.6e-2}
FLOATS = [jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64]


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])  # second order in bfloat16 has no meaningful tolerance
def test_rms_norm_hvp_matches_cpu(dtype):
    """The Hessian-vector product (jvp and grad: tests/gpu/test_gpu_ops.py)."""
    rng = np.random.default_rng(7)
    x, w, t = rng.standard_normal((3, 37, 1000)), rng.uniform(0.5, 1.5, 1000), rng.standard_normal((3, 37, 1000))

    def hvp(x, w, t):
        return jax.jvp(jax.grad(lambda x: jnp.sum(xr.rms_norm(x, w) ** 2)), (x,), (t,))

    gpu_vs_cpu(hvp, (x, w, t), dtype, GPU, CPU, {"float64": 1e-12, "float32": 2e-6})


def rms_inputs(shape, n_w, xd, wd, seed=0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.standard_normal(shape), xd)
    w = jnp.asarray(rng.uniform(0.5, 1.5, shape[-n_w:]), wd)
    return x, w


def rtol_for(dtype):
    return RTOL[jnp.dtype(dtype).type]


@pytest.mark.parametrize("xd", FLOATS)
@pytest.mark.parametrize("wd", FLOATS)
def test_rms_norm_grads_match_cpu(xd, wd):
    x, w = rms_inputs((5, 64, 96), 2, xd, wd, seed=1)
    g = jnp.asarray(np.random.default_rng(9).standard_normal(x.shape), jnp.result_type(xd, wd))

    def loss(a, b, gg):
        return jnp.sum((xr.rms_norm(a, b, eps=1e-5) * gg).astype(jnp.float64))

    grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
    dxg, dwg = grad(*on(GPU, x, w, g))
    dxc, dwc = grad(*on(CPU, x, w, g))
    assert dxg.dtype == xd and dwg.dtype == wd
    for a, b in [(dxg, dxc), (dwg, dwc)]:
        r = 50 * rtol_for(a.dtype)  # sums of 320 terms for dweight
        np.testing.assert_allclose(f64(a), f64(b), rtol=r, atol=r * np.max(np.abs(f64(b))))


def test_rms_norm_check_grads_f64():
    x, w = rms_inputs((4, 16), 1, jnp.float64, jnp.float64, seed=2)
    check_grads(lambda a, b: xr.rms_norm(a, b, eps=1e-5), on(GPU, x, w), order=2, modes=["fwd", "rev"])


@pytest.mark.parametrize("xd,wd", [(jnp.float32, jnp.float32), (jnp.bfloat16, jnp.float32), (jnp.float64, jnp.float64)])
def test_rms_norm_dweight_bit_identical(xd, wd):
    x, w = rms_inputs((4096, 1024), 1, xd, wd, seed=3)
    grad = jax.jit(jax.grad(lambda a, b: jnp.sum(xr.rms_norm(a, b, eps=1e-5).astype(jnp.float32) ** 2), argnums=1))
    x, w = on(GPU, x, w)
    runs = [np.asarray(grad(x, w)) for _ in range(3)]
    for r in runs[1:]:
        np.testing.assert_array_equal(r.view(np.uint8), runs[0].view(np.uint8))


def test_rms_norm_vmap():
    x, w = rms_inputs((3, 8, 64), 1, jnp.float32, jnp.float32, seed=4)
    x, w = on(GPU, x, w)
    yv = jax.vmap(lambda a: xr.rms_norm(a, w, eps=1e-5))(x)
    yd = xr.rms_norm(x, w, eps=1e-5)
    np.testing.assert_allclose(np.asarray(yv), np.asarray(yd), rtol=1e-6)
    ws = jnp.stack([w, 2 * w, 3 * w])
    yv2 = jax.vmap(lambda a, b: xr.rms_norm(a, b, eps=1e-5))(x, ws)
    for i in range(3):
        np.testing.assert_allclose(np.asarray(yv2[i]), np.asarray(xr.rms_norm(x[i], ws[i], eps=1e-5)), rtol=1e-6)


def test_rms_norm_large_row_global_accumulator():
    # weight.size * 4 bytes > 48 KiB: the backward kernel accumulates in the workspace.
    x, w = rms_inputs((8, 20000), 1, jnp.float32, jnp.float32, seed=5)
    grad = jax.grad(lambda a, b: jnp.sum(xr.rms_norm(a, b, eps=1e-5) ** 2), argnums=(0, 1))
    dxg, dwg = grad(*on(GPU, x, w))
    dxc, dwc = grad(*on(CPU, x, w))
    np.testing.assert_allclose(np.asarray(dxg), np.asarray(dxc), rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(np.asarray(dwg), np.asarray(dwc), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize(
    "xs,ws,eps",
    [
        ((4, 8), (7,), 1e-5),  # weight does not match the trailing axis
        ((4, 8), (4, 8, 1), 1e-5),  # weight rank too high
        ((4, 8), (8,), -1.0),  # negative eps
    ],
)
def test_rms_norm_bad_input_same_error_as_cpu(xs, ws, eps):
    x, w = jnp.ones(xs, jnp.float32), jnp.ones(ws, jnp.float32)
    gpu = error_of(lambda a, b: xr.rms_norm(a, b, eps=eps), *on(GPU, x, w))
    cpu = error_of(lambda a, b: xr.rms_norm(a, b, eps=eps), *on(CPU, x, w))
    assert cpu is not None and gpu is not None
    assert gpu[0] is cpu[0]


def test_rms_norm_int_input_rejected_like_cpu():
    x, w = jnp.ones((4, 8), jnp.int32), jnp.ones((8,), jnp.float32)
    gpu = error_of(lambda a, b: xr.rms_norm(a, b, eps=1e-5), *on(GPU, x, w))
    cpu = error_of(lambda a, b: xr.rms_norm(a, b, eps=1e-5), *on(CPU, x, w))
    assert cpu is not None and gpu is not None and gpu[0] is cpu[0]


# ------------------------------------------------------------ command buffers (CUDA graphs)
