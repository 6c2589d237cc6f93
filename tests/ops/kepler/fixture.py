"""Kepler's test fixture (see tests/op_fixtures.py): inputs, float64 references,
the shapes and partitions it is sharded over, its GPU tolerances."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax.sharding import PartitionSpec as P

import xla_ffi_rs as xr
from helpers import kepler_solve_np
from op_fixtures import Arrays, Family, Gpu, OpFixture, Shapes, Sharding


def inputs(rng: np.random.Generator, shapes: Shapes) -> Arrays:
    """M in [-7, 7], e in [0, 0.9] (where dE/dM <= 10)."""
    return rng.uniform(-7, 7, shapes[0]), rng.uniform(0, 0.9, shapes[1])


def variant(m: np.ndarray, e: np.ndarray) -> Arrays:
    return -m, e


def solution(m: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """sin E, cos E and 1 / (1 - e cos E) = dE/dM, float64."""
    big_e = kepler_solve_np(m, e)
    s, c = np.sin(big_e), np.cos(big_e)
    return s, c, 1 / (1 - np.asarray(e, np.float64) * c)


def reference(m: np.ndarray, e: np.ndarray) -> Arrays:
    s, c, _ = solution(m, e)
    return s, c


def jvp(primals: Arrays, tangents: Arrays) -> Arrays:
    """dE = (dM + sin E de) / (1 - e cos E); d sin E = cos E dE, d cos E = -sin E dE."""
    s, c, slope = solution(*primals)
    t = (tangents[0] + s * tangents[1]) * slope
    return c * t, -s * t


def vjp(primals: Arrays, cotangents: Arrays) -> Arrays:
    """The transpose of jvp: u = (cos E ct_sin - sin E ct_cos) / (1 - e cos E); (u, sin E u)."""
    s, c, slope = solution(*primals)
    u = (c * cotangents[0] - s * cotangents[1]) * slope
    return u, s * u


def _family(name: str, shape: tuple[int, ...], *specs: tuple[P, str]) -> Family:
    return Family(name, (shape, shape), full=True, specs=specs)


FIXTURE = OpFixture(
    name="kepler",
    function=xr.kepler,
    inputs=inputs,
    variant=variant,
    reference=reference,
    vjp=vjp,
    jvp=jvp,
    sharding=Sharding(
        # Ranks 0 to 3, size-0 axes, any axes split (every axis is a batch axis).
        families=(
            _family("rank0", (), (P(), "1d")),
            _family("vector", (16,), (P("a"), "1d")),
            _family("empty", (0,), (P("a"), "1d")),
            _family(
                "matrix",
                (8, 8),
                (P("a", "b"), "2d"),
                (P(None, "b"), "2d"),
                (P(None, ("a", "b")), "2d"),
                (P("b", "a"), "2d"),
            ),
            _family("empty_rows", (0, 8), (P("a", "b"), "2d")),
            _family("empty_columns", (8, 0), (P(None, "a"), "1d")),
            _family("rank3", (2, 3, 16), (P(None, None, ("a", "b")), "2d")),
            _family("rank3_mixed", (4, 3, 2), (P("a", None, "b"), "2d")),
        ),
        targets={
            "fwd": "xla_ffi_rs.kepler",
            "grad": "xla_ffi_rs.kepler_cotangent",
            "jvp": "xla_ffi_rs.kepler_jvp",
            "vmap": "xla_ffi_rs.kepler",
            "shard_map": "xla_ffi_rs.kepler_cotangent",
        },
    ),
    # e <= 0.9 (where dE/dM <= 10): float64 within 1e-10 of the CPU, float32 1e-4 (absolute).
    gpu=Gpu(
        shapes=((1 << 14,), (1 << 14,)),
        dtypes=((jnp.float64, jnp.float64), (jnp.float32, jnp.float32)),
        tol={"float64": (0.0, 1e-10), "float32": (0.0, 1e-4)},
        derivative_dtypes=(jnp.float64, jnp.float32),
        floor={"float64": 1e-12, "float32": 2e-6},
    ),
)
