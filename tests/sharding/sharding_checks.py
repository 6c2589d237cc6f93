"""Meshes and checks of compiled sharded programs, shared by the sharding tests."""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from cases import MESHES
from jax.sharding import PartitionSpec as P

MOVES_DATA = ("all-gather", "all-to-all", "collective-permute")


@functools.cache
def mesh(name: str) -> jax.sharding.Mesh:
    shape, names, explicit = MESHES[name]
    kind = jax.sharding.AxisType.Explicit if explicit else jax.sharding.AxisType.Auto
    return jax.make_mesh(shape, names, axis_types=(kind,) * len(shape))


def shard_map() -> Callable[..., Any]:
    return getattr(jax, "shard_map", None) or __import__("jax.experimental.shard_map", fromlist=["x"]).shard_map


def call_lines(hlo: str, target: str) -> list[str]:
    return [line for line in hlo.splitlines() if f'custom_call_target="{target}"' in line]


def first_result_size(line: str) -> int:
    """Element count of the first array a custom-call line produces."""
    dims = re.search(r"=\s*\(?\w+\[([\d,]*)\]", line)
    assert dims, line
    return math.prod(int(d) for d in dims.group(1).split(",") if d)


def assert_local_and_still(
    hlo: str,
    target: str,
    local_size: int,
    allow_all_reduce_of: Sequence[tuple[int, ...]] | None,
    stacked: bool = False,
) -> None:
    """Every call to ``target`` sees ``local_size`` elements (or, with ``stacked``,
    twice as many, for a vmap over two stacked copies), and nothing moves data.

    ``allow_all_reduce_of``: the shapes of the only arrays that may be all-reduced
    (dweight), or None when no all-reduce is allowed."""
    lines = call_lines(hlo, target)
    assert lines, f"{target} is not in the compiled program"
    sizes = {first_result_size(line) for line in lines}
    allowed = {local_size, 2 * local_size} if stacked else {local_size}
    assert sizes <= allowed, f"{target} calls saw {sizes} elements, expected the local block of {local_size}"
    assert_still(hlo, allow_all_reduce_of)


def assert_still(hlo: str, allow_all_reduce_of: Sequence[tuple[int, ...]] | None) -> None:
    """Nothing moves data, and nothing but ``allow_all_reduce_of`` (dweight) is all-reduced."""
    moved = [
        line.strip() for line in hlo.splitlines() if any(f"{c}(" in line or f"{c}-start(" in line for c in MOVES_DATA)
    ]
    assert not moved, "the compiled program moves data:\n" + "\n".join(moved)
    reduced = [line.strip() for line in hlo.splitlines() if re.search(r"all-reduce(-start)?\(", line)]
    if not allow_all_reduce_of:
        assert not reduced, "unexpected all-reduce:\n" + "\n".join(reduced)
        return
    wants = ["[" + ",".join(map(str, s)) + "]" for s in allow_all_reduce_of]
    bad = [
        line for line in reduced if not any(re.search(r"=\s*\(?\w+" + re.escape(want) + r"\{", line) for want in wants)
    ]
    assert not bad, f"only {' or '.join(wants)} may be all-reduced:\n" + "\n".join(bad)


def close(got: Any, want: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    assert got.shape == want.shape and got.dtype == np.float64, (what, got.shape, got.dtype)
    scale = float(np.max(np.abs(want), initial=1.0))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13 * scale, err_msg=what)


def mesh_axes(spec: P) -> tuple[str, ...]:
    """The mesh axes a partition spec splits over."""
    return tuple(a for entry in spec if entry is not None for a in (entry if isinstance(entry, tuple) else (entry,)))
