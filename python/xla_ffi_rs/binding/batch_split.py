"""A declared op's batched operands split alike on a mesh with explicit axes.

The results of a declared op are typed like its first split batched operand
(``Op._with_explicit_sharding``), and so are the results of its transpose target:
an operand whose batch axes were split otherwise, or not at all (``k(x, z)`` with
``x`` split over the batch and ``z`` replicated), got a cotangent typed unlike it,
which JAX refuses ("Expected cotangent type float64[8,4,3] but got
float64[8@data,4,3]"). So before the call every batched operand's batch axes are
laid out like the first split one's, as jax splits ``x + z``; the transpose of
that layout change brings each cotangent back to its operand's type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax

from xla_ffi_rs._compat import Tracer

__all__ = ["entry_axes", "mesh_of", "split_batch_alike"]


def entry_axes(entry: Any) -> set[Any]:
    """The mesh axis names in one entry of a partition spec (None, a name or a tuple)."""
    if entry is None:
        return set()
    return set(entry) if isinstance(entry, tuple) else {entry}


def mesh_of(x: Any, aval: Any) -> Any:
    """The mesh ``x`` (of type ``aval``) is split on: an eager (concrete) array's own
    sharding's, which has the devices (its type's mesh is abstract, and a value cannot
    be placed on that), else its type's."""
    concrete = None if isinstance(x, Tracer) else getattr(x, "sharding", None)
    if isinstance(concrete, jax.sharding.NamedSharding):
        return concrete.mesh
    return getattr(getattr(aval, "sharding", None), "mesh", None)


def split_batch_alike(
    operands: Sequence[Any],
    avals: Sequence[Any],
    specs: Sequence[tuple[Any, ...] | None],
    batched: Sequence[bool],
    n_batch: int,
) -> Sequence[Any]:
    """``operands`` (of types ``avals``, split over explicit mesh axes as ``specs``
    say, padded to their rank, or None) with each batched one (``batched[i]``, its
    first ``n_batch`` axes the batch) split along the batch axes like the first
    batched operand whose batch axes are split; its other axes keep their split
    except over those mesh axes. Unchanged where no batched operand is so split."""
    if n_batch <= 0:
        return operands
    first = next(
        (
            (spec[:n_batch], mesh_of(x, aval))
            for x, aval, spec, b in zip(operands, avals, specs, batched, strict=False)
            if b and aval is not None and spec is not None and any(e is not None for e in spec[:n_batch])
        ),
        None,
    )
    if first is None:
        return operands
    lead, mesh = first
    used = set().union(*(entry_axes(e) for e in lead))
    out = list(operands)
    for i, (x, aval, spec, b) in enumerate(zip(operands, avals, specs, batched, strict=False)):
        if not b or aval is None or aval.ndim < n_batch:
            continue
        spec = spec or (None,) * aval.ndim
        if spec[:n_batch] == lead:
            continue
        rest = [None if entry_axes(e) & used else e for e in spec[n_batch:]]
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*lead, *rest))
        if aval.sharding.mesh.empty:
            if isinstance(mesh, jax.sharding.AbstractMesh) and not isinstance(x, Tracer):
                # A concrete value beside a traced one typed on a mesh without devices
                # (an eager vmap): nowhere to place it, and no cotangent to type, as
                # nothing traces it; JAX's own ops take it as it is.
                continue
            # A value made off the mesh (a host array, a constant): placed there, as
            # reshard's transpose cannot bring a cotangent back to no mesh under vmap.
            out[i] = jax.device_put(x, sharding)
        else:
            out[i] = jax.sharding.reshard(x, sharding)
    return out
