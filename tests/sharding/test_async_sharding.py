"""The async demo target (``#[handler(async)]``) over 8 host devices: inside
``shard_map`` every device runs its own call, so 8 asynchronous parts are in flight
at once; under ``jit`` with a sharded input the partitioner decides. Both must give
the right result."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from xla_ffi_rs import examples

ASYNC = "xla_ffi_rs.demo.async_sleep_scale"

examples.register_async()


def shard_map() -> Any:
    return getattr(jax, "shard_map", None) or __import__("jax.experimental.shard_map", fromlist=["x"]).shard_map


def scale(x: Any) -> Any:
    out = jax.ShapeDtypeStruct(x.shape, jnp.float32)
    return jax.ffi.ffi_call(ASYNC, out, vmap_method="broadcast_all")(x, delay_ms=np.int64(10))


X = np.arange(64, dtype=np.float32).reshape(16, 4) / 3.0


def mesh() -> jax.sharding.Mesh:
    return jax.make_mesh((8,), ("d",), axis_types=(jax.sharding.AxisType.Auto,))


def test_async_call_in_shard_map_over_8_devices() -> None:
    f = jax.jit(shard_map()(scale, mesh=mesh(), in_specs=P("d"), out_specs=P("d")))
    y = f(X)
    np.testing.assert_array_equal(np.asarray(y), 2 * X)
    assert len(y.sharding.device_set) == 8


def test_async_call_under_jit_with_a_sharded_input() -> None:
    x = jax.device_put(X, NamedSharding(mesh(), P("d")))
    np.testing.assert_array_equal(np.asarray(jax.jit(scale)(x)), 2 * X)
