"""rms_norm's test fixture (see tests/op_fixtures.py): inputs, float64 references,
the shape families it is sharded over, its GPU tolerances."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

import xla_ffi_rs as xr
from helpers import RMS_BWD, RMS_FWD, rms_norm_bwd_np, rms_norm_np
from op_fixtures import Arrays, Family, Gpu, OpFixture, Shapes, Sharding

EPS = 1e-5
FLOATS = (jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64)


def inputs(rng: np.random.Generator, shapes: Shapes) -> Arrays:
    """x standard normal, the weight in [0.5, 1.5]."""
    return rng.standard_normal(shapes[0]), rng.uniform(0.5, 1.5, shapes[1])


def variant(x: np.ndarray, w: np.ndarray) -> Arrays:
    return 2 * x + 1, 0.5 * w - 1


def reference(x: np.ndarray, w: np.ndarray) -> Arrays:
    return (rms_norm_np(x, w, EPS)[0],)


def jvp(primals: Arrays, tangents: Arrays) -> Arrays:
    """Tangent of y at (x, w) along (dx, dw)."""
    (x, w), (dx, dw) = primals, tangents
    axes = tuple(range(x.ndim - w.ndim, x.ndim))
    _, inv = rms_norm_np(x, w, EPS)
    r = inv.reshape(inv.shape + (1,) * w.ndim)
    dr = -(r**3) * np.mean(x * dx, axis=axes, keepdims=True)
    return ((dx * r + x * dr) * w + x * r * dw,)


def vjp(primals: Arrays, cotangents: Arrays) -> Arrays:
    x, w = primals
    return rms_norm_bwd_np(cotangents[0], x, w, EPS)


FIXTURE = OpFixture(
    name="rms_norm",
    function=xr.rms_norm,
    kwargs={"eps": EPS},
    inputs=inputs,
    variant=variant,
    reference=reference,
    vjp=vjp,
    jvp=jvp,
    sharding=Sharding(
        # (x, weight): most common first; the first two meet every partition with
        # every transformation.
        families=(
            Family("tokens_hidden", ((16, 12), (12,)), full=True),
            Family("batch_seq_hidden", ((8, 4, 6), (6,)), full=True),
            Family("batch_seq_hidden_w2d", ((8, 4, 6), (4, 6))),
            Family("rank4_w1d", ((8, 4, 2, 6), (6,))),
            Family("rank4_w3d", ((8, 4, 2, 6), (4, 2, 6))),
            Family("rank3_w3d_one_row", ((4, 2, 6), (4, 2, 6))),
            Family("one_row", ((16,), (16,))),
        ),
        targets={"fwd": RMS_FWD, "grad": RMS_BWD, "jvp": RMS_FWD, "vmap": RMS_FWD, "shard_map": RMS_BWD},
        jnp_on_auto_axes=True,
    ),
    # By the result's dtype: the CUDA kernels accumulate in f32/f64 like the CPU, but in
    # a different order, and round f32 intermediates; a 16-bit output may differ by 1-2 ulp.
    gpu=Gpu(
        shapes=((3, 37, 1000), (1000,)),
        dtypes=tuple((xd, wd) for xd in FLOATS for wd in FLOATS),
        tol={"float64": (1e-12, 1e-12), "float32": (2e-5, 2e-5), "float16": (2e-3, 2e-3), "bfloat16": (1.6e-2, 1.6e-2)},
        derivative_dtypes=(jnp.float64, jnp.float32, jnp.bfloat16),
        floor={"float64": 1e-12, "float32": 2e-6, "bfloat16": 1e-2},
    ),
)
