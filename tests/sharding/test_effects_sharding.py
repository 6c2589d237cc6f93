"""An op with ``has_side_effect=True`` in a program partitioned over 8 devices: XLA's
partitioner refuses a side effect it would replicate, so under either partitioner
it is a ``ValueError`` naming the op and the target while lowering, not XLA's
``UNIMPLEMENTED``/``INTERNAL: RET_CHECK`` (a one-device sharding on the call is no
way out: Shardy drops it, and GSPMD's batch partitioner runs the call on every
device once any op has registered the shared target). Inside
``shard_map`` each device calls it on its block; with ``num_batch_dims`` on its
shard."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from xla_ffi_rs import python_op
from xla_ffi_rs.sharding import gspmd_available


def recording_op(tag: str, **kw: Any) -> tuple[list[tuple[int, ...]], Any]:
    calls: list[tuple[int, ...]] = []

    def record(x: np.ndarray) -> np.ndarray:
        calls.append(x.shape)
        return x * 2

    return calls, python_op(record, abstract_eval=lambda x: x, name=f"effect_{tag}", has_side_effect=True, **kw)


def sharded_x() -> jax.Array:
    mesh = jax.make_mesh((8,), ("b",))
    return jax.device_put(jnp.arange(64.0, dtype=jnp.float32).reshape(16, 4), NamedSharding(mesh, P("b")))


USED: Callable[[Any], Callable[[Any], Any]] = lambda op: lambda x: op(x)  # noqa: E731
UNUSED: Callable[[Any], Callable[[Any], Any]] = lambda op: lambda x: (op(x), x + 1)[1]  # noqa: E731


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"] if gspmd_available() else ["shardy"])
@pytest.mark.parametrize("use", [USED, UNUSED], ids=["used", "unused"])
def test_a_partitioned_program_refuses_it_naming_the_op_and_the_target(
    use: Any, partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    """Under GSPMD too, and whether or not an op with batch axes (which registers the
    shared python_call target with XLA's batch partitioner) was made first."""
    use_partitioner(partitioner)
    for first in (False, True):
        if first:
            recording_op(f"batched_first_{partitioner}", num_batch_dims=1)
        calls, op = recording_op(f"refused_{partitioner}_{first}")
        with pytest.raises(ValueError) as info:
            jax.jit(use(op)).lower(sharded_x())
        message = str(info.value)
        for words in (
            (
                f"effect_refused_{partitioner}_{first} (xla_ffi_rs.python_call): an op with has_side_effect=True is "
                "not supported in a program partitioned over several devices (8)"
            ),
            "jax.device_put(x, jax.devices()[0])",
            "inside a shard_map over every mesh axis",
            "or with num_batch_dims",
        ):
            assert words in message, message
        assert not calls


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"] if gspmd_available() else ["shardy"])
def test_inside_shard_map_and_with_batch_dims_each_device_calls_it(
    partitioner: str, use_partitioner: Callable[[str], None]
) -> None:
    use_partitioner(partitioner)
    x = sharded_x()
    calls, op = recording_op(f"map_{partitioner}")
    mesh = jax.make_mesh((8,), ("b",))
    mapped = jax.shard_map(UNUSED(op), mesh=mesh, in_specs=P("b"), out_specs=P("b"))
    np.testing.assert_array_equal(np.asarray(jax.jit(mapped)(x)), np.asarray(x) + 1)
    jax.effects_barrier()
    assert calls == [(2, 4)] * 8  # kept although unused
    calls, op = recording_op(f"batch_{partitioner}", num_batch_dims=1)
    np.testing.assert_array_equal(np.asarray(jax.jit(USED(op))(x)), 2 * np.asarray(x))
    assert calls == [(2, 4)] * 8
