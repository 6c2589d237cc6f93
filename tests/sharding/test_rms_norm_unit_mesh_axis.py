"""rms_norm on a mesh with explicit axes where the axis named for the hidden size
has size 1 (model parallelism of 1 with the model's usual partition specs, e.g.
``P("data", "model")`` on a (8, 1) mesh): the rows are whole on every device, so
the kernels run on the local rows as for a batch-only split, with no all-reduce
of per-row sums and nothing moved; results match float64 references."""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from sharding_checks import assert_local_and_still, close

import xla_ffi_rs as xr
from xla_ffi_rs.ops.rms_norm_tp import tensor_parallel_axes

FWD, BWD = "xla_ffi_rs.rms_norm_fwd", "xla_ffi_rs.rms_norm_bwd"
EPS = 1e-5


def _mesh() -> jax.sharding.Mesh:
    explicit = jax.sharding.AxisType.Explicit
    return jax.make_mesh((8, 1), ("data", "model"), axis_types=(explicit, explicit))


def _ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x**2, axis=-1, keepdims=True) + EPS) * w


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
@pytest.mark.parametrize("op", [xr.rms_norm, xr.rms_norm_inplace], ids=lambda f: f.__name__)
@pytest.mark.parametrize(
    ("shape", "spec", "local_size"),  # local_size: the elements of x each kernel call sees
    [
        ((16, 64), P("data", "model"), 2 * 64),
        ((2, 8, 64), P(None, "data", "model"), 2 * 64),
        ((16, 64), P(None, "model"), 16 * 64),
    ],
    ids=str,
)
def test_unit_model_axis_runs_the_kernels_locally(
    shape: tuple[int, ...],
    spec: P,
    local_size: int,
    op: Callable[..., jax.Array],
    partitioner: str,
    use_partitioner: Callable[[str], None],
) -> None:
    use_partitioner(partitioner)
    rng = np.random.default_rng(len(shape))
    x_np, w_np, g_np = rng.standard_normal(shape), rng.standard_normal(64), rng.standard_normal(shape)
    sh = NamedSharding(_mesh(), spec)
    x, g = jax.device_put(x_np, sh), jax.device_put(g_np, sh)
    w = jax.device_put(w_np, NamedSharding(_mesh(), P()))
    assert tensor_parallel_axes(x, 1) is None  # an axis of size 1 splits nothing

    fwd = jax.jit(lambda x, w: op(x, w, eps=EPS))
    y = fwd(x, w)
    close(y, _ref(x_np, w_np), "y")
    assert y.sharding.is_equivalent_to(sh, len(shape))
    assert_local_and_still(fwd.lower(x, w).compile().as_text(), FWD, local_size, None)

    grad = jax.jit(jax.grad(lambda x, w, g: jnp.sum(op(x, w, eps=EPS) * g), argnums=(0, 1)))
    dx, dw = grad(x, w, g)
    r = 1 / np.sqrt(np.mean(x_np**2, axis=-1, keepdims=True) + EPS)
    gw = g_np * w_np
    want_dx = r * gw - x_np * r**3 * np.mean(gw * x_np, axis=-1, keepdims=True)
    close(dx, want_dx, "dx")
    close(dw, np.sum((g_np * x_np * r).reshape(-1, 64), axis=0), "dweight")
    assert_local_and_still(grad.lower(x, w, g).compile().as_text(), BWD, local_size, [(64,)])
