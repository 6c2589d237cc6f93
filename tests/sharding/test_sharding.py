"""Every op under jit with NamedSharding inputs, over a generated matrix (cases.py,
from the ops' declarations and their fixtures in tests/ops/<op>/fixture.py).

Each case compiles the sharded program under one partitioner, compares its results
with the fixture's float64 NumPy references computed from the unsharded inputs,
and, when only batch axes are sharded, asserts on the compiled HLO that nothing
moves data (no all-gather, all-to-all or collective-permute; the one all-reduce
allowed is the one that completes the cotangent of an operand without the batch
axes, e.g. dweight) and that each kernel call saw its local block.

The op's results are consumed as in real code (``2 * y + x`` for the first, whose
shape is the first operand's; ``2 * y`` for the others), so that a result typed
with the wrong sharding would be gathered for the next op.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import pytest
from cases import MESHES, TRANSFORMS, Case, all_cases, op_cases
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from sharding_checks import assert_local_and_still, assert_still, call_lines, close, mesh, mesh_axes, shard_map

from op_fixtures import Arrays, OpFixture, fixtures

SCALE = 2.0


def consumed(op: OpFixture) -> Callable[..., tuple[jax.Array, ...]]:
    def fn(*operands: jax.Array) -> tuple[jax.Array, ...]:
        ys = op(*operands)
        return (SCALE * ys[0] + operands[0], *(SCALE * y for y in ys[1:]))

    return fn


def consumed_np(op: OpFixture, operands: Arrays) -> Arrays:
    ys = op.reference(*operands)
    return (SCALE * ys[0] + operands[0], *(SCALE * y for y in ys[1:]))


def consumed_vjp_np(op: OpFixture, operands: Arrays, cts: Arrays) -> Arrays:
    out = list(op.vjp(operands, tuple(SCALE * c for c in cts)))
    out[0] = out[0] + cts[0]
    return tuple(out)


def consumed_jvp_np(op: OpFixture, operands: Arrays, tangents: Arrays) -> Arrays:
    out = [SCALE * t for t in op.jvp(operands, tangents)]
    out[0] = out[0] + tangents[0]
    return tuple(out)


def program(case: Case) -> tuple[Callable[..., Any], tuple[np.ndarray, ...], tuple[Any, ...], list[np.ndarray]]:
    """(jitted function, its numpy inputs, their shardings, float64 references)."""
    op, f, part = case.op, case.family, case.partition
    rng = np.random.default_rng(zlib.crc32(case.id.encode()))
    xs = op.inputs(rng, f.shapes)
    m = mesh(part.mesh)
    shardings = tuple(NamedSharding(m, s) for s in case.specs)
    norm = consumed(op)
    k = len(xs)
    t = case.transform
    if t == "fwd":
        return jax.jit(norm), xs, shardings, list(consumed_np(op, xs))
    results = consumed_np(op, xs)
    if t == "grad":
        cts = tuple(rng.standard_normal(np.shape(y)) for y in results)

        def vjp(*args: jax.Array) -> tuple[jax.Array, ...]:
            return jax.vjp(norm, *args[:k])[1](args[k:])

        ct_sh = tuple(shardings[0] for _ in cts)
        return jax.jit(vjp), (*xs, *cts), (*shardings, *ct_sh), list(consumed_vjp_np(op, xs, cts))
    if t == "jvp":
        tangents = tuple(rng.standard_normal(np.shape(x)) for x in xs)

        def jvp(*args: jax.Array) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]]:
            return jax.jvp(norm, args[:k], args[k:])

        wants = [*results, *consumed_jvp_np(op, xs, tangents)]
        return jax.jit(jvp), (*xs, *tangents), (*shardings, *shardings), wants
    if t == "vmap":
        # Over the batched operands alone (the others shared), and over all together.
        batched = op.batched()
        other = op.variant(*xs)
        stacked = tuple(np.stack([a, b]) for a, b in zip(xs, other, strict=True))
        stacked_sh = tuple(NamedSharding(m, P(None, *s)) for s in case.specs)

        def vmapped(*args: jax.Array) -> tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]]:
            sv, shared = args[:k], args[k:]
            partial = [s if b else w for s, w, b in zip(sv, shared, batched, strict=True)]
            in_axes = tuple(0 if b else None for b in batched)
            return jax.vmap(norm, in_axes=in_axes)(*partial), jax.vmap(norm)(*sv)

        def ref(points: list[Arrays]) -> list[np.ndarray]:
            each = [consumed_np(op, p) for p in points]
            return [np.stack(rs) for rs in zip(*each, strict=True)]

        shared_points = [tuple(s[i] if b else x for s, x, b in zip(stacked, xs, batched, strict=True)) for i in (0, 1)]
        wants = ref(shared_points) + ref([xs, other])
        return jax.jit(vmapped), (*stacked, *xs), (*stacked_sh, *shardings), wants
    assert t == "shard_map"
    cts = tuple(rng.standard_normal(np.shape(y)) for y in results)

    def local(*args: jax.Array) -> tuple[jax.Array, ...]:
        # An operand without the batch axes is invariant across the shards and the
        # others vary: as for jax's own primitives, its cotangent comes back summed
        # over the shards.
        y, back = jax.vjp(norm, *args[:k])
        return (*y, *back(args[k:]))

    spec = part.x
    in_specs = tuple(s if b else P() for s, b in zip(case.specs, op.batched(), strict=True))
    out_specs = (*(spec for _ in results), *in_specs)
    smap = shard_map()(local, mesh=m, in_specs=(*in_specs, *(spec for _ in cts)), out_specs=out_specs)
    wants = [*results, *consumed_vjp_np(op, xs, cts)]
    return jax.jit(smap), (*xs, *cts), (*shardings, *(shardings[0] for _ in cts)), wants


def shards_of(case: Case) -> int:
    m = mesh(case.partition.mesh)
    return math.prod(m.shape[a] for a in mesh_axes(case.partition.x))


@pytest.mark.parametrize("case", all_cases(), ids=lambda c: c.id)
def test_op_sharding(case: Case, use_partitioner: Callable[[str], None]) -> None:
    use_partitioner(case.partitioner)
    op = case.op
    fn, inputs, shardings, wants = program(case)
    args = [jax.device_put(a, s) for a, s in zip(inputs, shardings, strict=True)]
    got = jax.tree.leaves(fn(*args))
    assert len(got) == len(wants), (len(got), len(wants))
    for i, (g, want) in enumerate(zip(got, wants, strict=True)):
        close(g, want, f"{case.id}: result {i}")
    x_shape = case.family.shapes[0]
    if not case.partition.batch_only or not math.prod(x_shape):  # a size-0 array's sharding is not kept
        return
    if case.transform in ("fwd", "grad", "jvp"):
        assert got[0].sharding.is_equivalent_to(shardings[0], len(x_shape)), "the first result is not laid out like x"
    hlo = str(fn.lower(*args).compile().as_text())  # type: ignore[attr-defined]
    x_size = math.prod(x_shape) * (2 if case.transform == "vmap" else 1)
    local = x_size // shards_of(case)
    target = op.sharding.targets[case.transform]
    # The cotangents of the operands without the batch axes are summed over the shards.
    unbatched = [s for s, b in zip(case.family.shapes, op.batched(), strict=True) if not b]
    summed = unbatched if case.transform in ("grad", "shard_map") and case.partition.sharded else None
    if not MESHES[case.partition.mesh][2] and case.transform != "shard_map" and op.sharding.jnp_on_auto_axes:
        # Auto axes: the split of the rows is decided after lowering, so the op
        # lowers to its jnp formula (no target); it moves no data either.
        assert not any(call_lines(hlo, t) for t in op.targets), "a target ran on auto axes"
        assert_still(hlo, summed)
        return
    assert_local_and_still(hlo, target, local, summed)
    if case.transform == "grad" and summed:
        assert re.search(r"all-reduce(-start)?\(", hlo), "the weight's cotangent must be summed across the shards"


@pytest.mark.parametrize("op", fixtures(), ids=lambda o: o.name)
def test_the_matrix_covers_every_family_partitioner_and_transform(op: OpFixture) -> None:
    cases = op_cases(op)
    for fam in op.sharding.families:
        for pt in ("shardy", "gspmd"):
            seen = {c.transform for c in cases if c.family == fam and c.partitioner == pt}
            want = set(TRANSFORMS) - {"shard_map"}
            assert want <= seen, (fam.name, pt, seen)
    assert set(op.sharding.targets) == set(TRANSFORMS), op.sharding.targets
    assert set(op.sharding.targets.values()) <= op.targets, "a transformation's target is not the op's"
