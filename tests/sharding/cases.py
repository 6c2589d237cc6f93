"""The generated matrix of sharding cases, for every op with a fixture
(tests/ops/<op>/fixture.py): shape families x meshes x partition specs x
transformations x partitioner, most common user shapes first.

Which operands carry the batch axes, and how many axes those are, come from the
op's forward declaration (its shape rule, through the native checker); the
families, from the op's fixture. Every family meets every partition kind that fits
it, under both partitioners; the transformations are spread over them so that each
family sees each transformation under each partitioner (a Latin square), and the
families marked ``full`` get the full product. A family may name its partitions
instead (``Family.specs``). ``python tests/sharding/cases.py`` prints the matrix.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from jax.sharding import PartitionSpec as P

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: op_fixtures, helpers
from op_fixtures import Family, OpFixture, fixtures

#: Mesh name -> (axis sizes, axis names, explicit axes). ``jax.make_mesh`` makes
#: explicit axes by default on both jax versions; ``Mesh(devices, names)`` auto ones.
MESHES: dict[str, tuple[tuple[int, ...], tuple[str, ...], bool]] = {
    "1d": ((8,), ("a",), True),
    "2d": ((4, 2), ("a", "b"), True),
    "2d_auto": ((4, 2), ("a", "b"), False),
}

#: Transformations of each op, each compared with its fixture's float64 references.
TRANSFORMS = ("fwd", "grad", "jvp", "vmap", "shard_map")

PARTITIONERS = ("shardy", "gspmd")


@dataclass(frozen=True)
class Partition:
    """How the operands are laid out on a mesh: ``x`` for those that carry the batch
    axes, ``w`` for the others; ``batch_only`` when only batch axes are split (then
    the program must have no data movement)."""

    name: str
    mesh: str
    x: P
    w: P
    batch_only: bool

    @property
    def sharded(self) -> bool:
        """Whether the batch axes are split at all."""
        return self.batch_only and any(a is not None for a in self.x)


def _spec(rank: int, at: dict[int, object]) -> P:
    return P(*[at.get(i) for i in range(rank)])


def _spec_name(spec: P) -> str:
    return "_".join("x" if a is None else "".join(a) if isinstance(a, tuple) else str(a) for a in spec) or "whole"


def partitions(op: OpFixture, f: Family) -> list[Partition]:
    """Every partition kind that fits ``f``: none, one, several batch axes on 1-D
    and 2-D meshes; an operand without the batch axes (a weight) sharded; the
    batched operands sharded along their other axes. Or the family's own specs."""
    if f.specs:
        return [Partition(_spec_name(spec), mesh, spec, P(), True) for spec, mesh in f.specs]
    batched = op.batched()
    r, b = len(f.shapes[0]), op.batch_rank(f.shapes)
    n = r - b  # x's axes that are not batch axes
    unbatched = [len(s) for s, is_b in zip(f.shapes, batched, strict=True) if not is_b]
    nw = unbatched[0] if unbatched else 0
    rep_w = P()
    out = [Partition("replicated", "2d", P(), rep_w, True)]
    if b >= 1:
        out += [
            Partition("batch0_1d", "1d", _spec(r, {0: "a"}), rep_w, True),
            Partition("batch0_auto_mesh", "2d_auto", _spec(r, {0: "a"}), rep_w, True),
            Partition("batch0_2axes", "2d", _spec(r, {0: ("a", "b")}), rep_w, True),
            Partition("batch0_partial", "2d", _spec(r, {0: "b"}), rep_w, True),
        ]
        if nw >= 1:
            out += [Partition("weight_sharded", "2d", _spec(r, {0: "a"}), _spec(nw, {nw - 1: "b"}), False)]
        if n >= 1:
            out += [Partition("tensor_parallel", "2d", _spec(r, {0: "a", r - 1: "b"}), rep_w, False)]
    if b >= 2:
        out += [
            Partition("batch01_2d", "2d", _spec(r, {0: "a", 1: "b"}), rep_w, True),
            Partition("batch01_auto_mesh", "2d_auto", _spec(r, {0: "a", 1: "b"}), rep_w, True),
            Partition("batch1_only", "2d", _spec(r, {1: "a"}), rep_w, True),
            Partition("batch10_2d", "2d", _spec(r, {0: "b", 1: "a"}), rep_w, True),
        ]
    if b >= 3:
        out += [Partition("batch2_2axes", "2d", _spec(r, {2: ("b",), 0: "a"}), rep_w, True)]
    if b == 0:
        if n >= 1:
            out += [Partition("normalized_axis", "2d", _spec(r, {0: "a"}), rep_w, False)]
        if nw >= 1:
            out += [Partition("weight_sharded", "2d", P(), _spec(nw, {nw - 1: "b"}), False)]
    if n >= 2 and nw >= 1:
        out += [Partition("normalized_lead", "2d", _spec(r, {b: "b"}), _spec(nw, {0: "b"}), False)]
    return out


@dataclass(frozen=True)
class Case:
    op: OpFixture
    family: Family
    partition: Partition
    transform: str
    partitioner: str

    @property
    def id(self) -> str:
        return f"{self.op.name}-{self.family.name}-{self.partition.name}-{self.transform}-{self.partitioner}"

    @property
    def specs(self) -> tuple[P, ...]:
        """Each operand's partition spec."""
        return tuple(self.partition.x if b else self.partition.w for b in self.op.batched())


def op_cases(op: OpFixture) -> list[Case]:
    """One op's matrix, most common shapes first."""
    cases = []
    for f in op.sharding.families:
        parts = partitions(op, f)
        for k, pt in enumerate(PARTITIONERS):
            if f.full:
                slots = [(p, t) for p in parts for t in TRANSFORMS]
            else:
                n = max(len(parts), len(TRANSFORMS))
                slots = [(parts[i % len(parts)], TRANSFORMS[(i + k) % len(TRANSFORMS)]) for i in range(n)]
            for part, t in slots:
                if t == "shard_map" and not part.batch_only:
                    t = "grad"  # a shard_map's blocks are the user's: only batch splits make sense
                cases.append(Case(op, f, part, t, pt))
    return list({c.id: c for c in cases}.values())


def all_cases() -> list[Case]:
    """Every op's matrix."""
    return [c for op in fixtures() for c in op_cases(op)]


if __name__ == "__main__":
    for c in all_cases():
        print(c.id)
    for op in fixtures():
        print(len(op_cases(op)), op.name, "cases")
