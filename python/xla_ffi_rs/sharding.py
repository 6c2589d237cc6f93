"""Sharding without all-gathers: FFI custom calls that XLA partitions by batch axes.

Each target is registered with ``jax.ffi.register_ffi_target_as_batch_partitionable``
and, under ``jit`` over several devices, its custom call carries the frontend
attribute ``num_batch_dims`` (plus, under Shardy, an ``sdy.sharding_rule``). XLA's
batch partitioner (``xla/python/custom_call_batch_partitioner.cc``, used under GSPMD
and Shardy alike) then runs one call per shard on the local block of the leading
``num_batch_dims`` axes, with no collective.

What that partitioner does, read from its source and checked by experiment, and
what this module does about it:

* It takes the batch sharding from the operands (the first operand's, merged with
  the others' where compatible) and reshards **every** operand to it: the first
  ``num_batch_dims`` axes of each operand are split like the batch axes, and the
  rest replicated. It has no notion of an operand without batch axes: only an
  operand (or result) of rank **below** ``num_batch_dims`` is left whole
  (replicated). A weight of shape ``(H,)`` next to ``x`` of shape ``(T, H)`` would be
  split along ``H`` like the tokens.
* An operand whose every axis is a batch axis (rank == ``num_batch_dims``) gives no
  batch sharding of its own, so an op whose operands are all like that would be
  run replicated.

So the call is emitted on reshaped values (reshapes of unit axes, free): every
*batched* operand and result gets ``unit_axes`` axes of size 1 inserted after its
batch axes, which raises ``num_batch_dims`` above the rank of every unbatched value
(weight, dweight, workspace), so that these stay whole; and, when no batched
operand has a non-batch axis (the elementwise Kepler solver), every batched value
gets a trailing unit axis. Axes that are not batch axes (the normalized axes of
rms_norm) are replicated before the call, because a kernel sees whole rows only.

A result reduced over the batch axes (``dweight``) comes out of a partitioned call
as the partial of one shard; :class:`xla_ffi_rs.binding.Op` replaces it with a jnp
reduction, which XLA completes with an all-reduce (``reductions``).

The lowering does all this only under ``jit`` over several devices
(:func:`in_spmd`); inside a user's ``shard_map`` over every mesh axis the call is
local and plain.

This module is public for binding authors and tests: :class:`Layout` and
:func:`sdy_rule_string` say what a call looks like to the partitioner;
:class:`xla_ffi_rs.binding.Op` calls :func:`batch_partitioned_call` for you.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import jax

from xla_ffi_rs._compat import ShapedArray, mlir, sdy_sharding_rule

__all__ = [
    "Layout",
    "batch_partitioned_call",
    "gspmd_available",
    "in_spmd",
    "known_unsplit",
    "register_batch_partitionable",
    "sdy_rule_string",
    "shardy_partitions",
]

#: From this jax release on, XLA always partitions with Shardy: the flag
#: ``jax_use_shardy_partitioner`` is deprecated there and has no effect.
_SHARDY_ALWAYS_SINCE = (0, 12, 1)


def gspmd_available() -> bool:
    """Whether this jax can partition with GSPMD (``jax_use_shardy_partitioner`` off):
    up to jax 0.12.0; from 0.12.1 on Shardy is always on.

    >>> gspmd_available() in (True, False)
    True
    """
    return tuple(jax.__version_info__[:3]) < _SHARDY_ALWAYS_SINCE


def shardy_partitions() -> bool:
    """Whether XLA partitions programs with Shardy (else GSPMD).

    ``jax.config.jax_use_shardy_partitioner`` decides up to jax 0.12.0; from
    0.12.1 on Shardy is always on, whatever the flag says, and a call lowered for
    GSPMD would lose its sharding rule (XLA would then gather its operands and
    results).

    >>> shardy_partitions() in (True, False)
    True
    """
    return not gspmd_available() or bool(jax.config.jax_use_shardy_partitioner)


def register_batch_partitionable(target: str) -> None:
    """Tell XLA (every platform, now and when plugins load) to batch-partition ``target``."""
    jax.ffi.register_ffi_target_as_batch_partitionable(target)


def in_spmd(ctx: Any) -> bool:
    """Whether this lowering is for a program partitioned over several devices."""
    axis_context = ctx.module_context.axis_context
    if isinstance(axis_context, mlir.ShardingContext):
        return axis_context.num_devices > 1
    mesh = getattr(axis_context, "mesh", None)
    manual = getattr(axis_context, "manual_axes", None)
    if mesh is None or manual is None:
        return False
    # Inside a shard_map that leaves some mesh axes automatic, XLA still partitions
    # the call over those.
    devices: int = math.prod(n for a, n in mesh.shape.items() if a not in manual)
    return devices > 1


def known_unsplit(ctx: Any, aval: ShapedArray, axes: Sequence[int]) -> bool:
    """Whether the partitioner is sure to find ``axes`` of ``aval`` (an operand of the
    call being lowered) whole on every device: always outside SPMD; inside, only when
    every mesh axis still to be partitioned (not manual, of size > 1) is explicit, so
    that ``aval``'s type is its sharding, and the type splits none of ``axes`` (over
    mesh axes of size 1 only, it splits nothing).

    On auto mesh axes the partitioner picks the shardings after lowering, so nothing
    is known and this is False.
    """
    if not in_spmd(ctx):
        return True
    sharding = getattr(aval, "sharding", None)
    mesh = getattr(sharding, "mesh", None)
    if mesh is None:
        return False
    names, types = tuple(getattr(mesh, "axis_names", ())), tuple(getattr(mesh, "axis_types", ()))
    if not names or len(names) != len(types):
        return False
    sizes = dict(mesh.shape)
    for name, kind in zip(names, types, strict=True):
        if sizes[name] > 1 and kind != jax.sharding.AxisType.Explicit and kind != jax.sharding.AxisType.Manual:
            return False
    spec = tuple(getattr(sharding, "spec", None) or ())

    def unsplit(entry: Any) -> bool:  # no mesh axis, or only axes of size 1
        return entry is None or all(sizes[a] == 1 for a in (entry if isinstance(entry, tuple) else (entry,)))

    return all(i >= len(spec) or unsplit(spec[i]) for i in axes)


@dataclass(frozen=True)
class Layout:
    """How the values of a call are reshaped for XLA's batch partitioner.

    ``batch``: the op's own batch axes; ``unit_axes``: unit axes inserted after them
    in batched values; ``trailing``: whether batched values get a trailing unit axis.

    >>> import numpy as np
    >>> f, w = ShapedArray((8, 4), np.float32), ShapedArray((4,), np.float32)
    >>> lay = Layout.plan(1, [f, w], [True, False], [f], [True])
    >>> lay, lay.num_batch_dims, lay.shape(f.shape, True)
    (Layout(batch=1, unit_axes=1, trailing=False), 2, (8, 1, 4))
    """

    batch: int
    unit_axes: int
    trailing: bool

    @property
    def num_batch_dims(self) -> int:
        """The ``num_batch_dims`` XLA sees."""
        return self.batch + self.unit_axes

    @classmethod
    def plan(
        cls,
        batch: int,
        avals_in: Sequence[ShapedArray],
        batched_in: Sequence[bool],
        avals_out: Sequence[ShapedArray],
        batched_out: Sequence[bool],
    ) -> Layout:
        values = [*zip(avals_in, batched_in, strict=True), *zip(avals_out, batched_out, strict=True)]
        unbatched_rank = max((a.ndim for a, b in values if not b), default=-1)
        unit_axes = max(0, unbatched_rank + 1 - batch)
        trailing = not any(a.ndim > batch for a, b in zip(avals_in, batched_in, strict=True) if b)
        return cls(batch, unit_axes, trailing)

    def shape(self, shape: tuple[int, ...], batched: bool) -> tuple[int, ...]:
        """The shape a value of ``shape`` has in the emitted call."""
        if not batched:
            return shape
        lead, rest = shape[: self.batch], shape[self.batch :]
        return (*lead, *(1,) * self.unit_axes, *rest, *(1,) * self.trailing)

    def aval(self, aval: ShapedArray, batched: bool) -> ShapedArray:
        return ShapedArray(self.shape(aval.shape, batched), aval.dtype)


def sdy_rule_string(
    num_batch_dims: int,
    ranks_in: Sequence[int],
    batched_in: Sequence[bool],
    ranks_out: Sequence[int],
    batched_out: Sequence[bool],
) -> tuple[str, tuple[str, ...]]:
    """The Shardy rule of a batch-partitioned call and its factors that need replication.

    Batched values share the factors ``b0 b1 ...`` of the leading axes; every other
    axis gets a factor of its own that must be replicated. A rank-0 value is ``""``.

    >>> sdy_rule_string(1, [2, 1], [True, False], [2, 1], [True, True])
    ('b0 r0, r1 -> b0 r2, b0', ('r0', 'r1', 'r2'))
    """
    replicated: list[str] = []

    def spec(rank: int, batched: bool) -> str:
        lead = [f"b{i}" for i in range(num_batch_dims)] if batched else []
        rest = [f"r{len(replicated) + i}" for i in range(rank - len(lead))]
        replicated.extend(rest)
        return " ".join(lead + rest)

    lhs = ", ".join(spec(r, b) for r, b in zip(ranks_in, batched_in, strict=True))
    rhs = ", ".join(spec(r, b) for r, b in zip(ranks_out, batched_out, strict=True))
    return f"{lhs} -> {rhs}", tuple(replicated)


def _sdy_rule(
    ctx: Any,
    num_batch_dims: int,
    avals_in: Sequence[ShapedArray],
    batched_in: Sequence[bool],
    avals_out: Sequence[ShapedArray],
    batched_out: Sequence[bool],
) -> Any:
    text, replicated = sdy_rule_string(
        num_batch_dims, [a.ndim for a in avals_in], batched_in, [a.ndim for a in avals_out], batched_out
    )
    types_in = [t for a in avals_in for t in mlir.aval_to_ir_types(ctx.module_context, a)]
    types_out = [t for a in avals_out for t in mlir.aval_to_ir_types(ctx.module_context, a)]
    return sdy_sharding_rule(text, replicated, types_in, types_out)


def _reshape(ctx: Any, value: Any, aval_in: ShapedArray, aval_out: ShapedArray) -> Any:
    if aval_in.shape == aval_out.shape:
        return value
    lower = mlir.lower_fun(lambda v: (v.reshape(aval_out.shape),), multiple_results=True)
    return lower(ctx.replace(primitive=None, avals_in=[aval_in], avals_out=[aval_out]), value)[0]


def batch_partitioned_call(
    ctx: Any,
    target: str,
    operands: Sequence[Any],
    attributes: Mapping[str, Any],
    num_batch_dims: int,
    batched_in: Sequence[bool],
    batched_out: Sequence[bool],
    lowering_args: Mapping[str, Any] | None = None,
) -> list[Any]:
    """Emit the custom call of ``target`` so that XLA partitions it by batch axes.

    ``batched_in``/``batched_out`` say which operands and results carry the leading
    ``num_batch_dims`` batch axes; the others (a weight, a reduced result, a
    workspace) stay whole on every device. Returns one value per ``ctx.avals_out``.
    ``lowering_args`` go to ``jax.ffi.ffi_lowering`` (aliases, side effects).
    """
    avals_in, avals_out = list(ctx.avals_in), list(ctx.avals_out)
    layout = Layout.plan(num_batch_dims, avals_in, batched_in, avals_out, batched_out)
    call_in = [layout.aval(a, b) for a, b in zip(avals_in, batched_in, strict=True)]
    call_out = [layout.aval(a, b) for a, b in zip(avals_out, batched_out, strict=True)]
    operands = [_reshape(ctx, v, a, c) for v, a, c in zip(operands, avals_in, call_in, strict=True)]
    extra = {"mhlo.frontend_attributes": mlir.ir_attribute({"num_batch_dims": str(layout.num_batch_dims)})}
    if shardy_partitions():
        extra["sdy.sharding_rule"] = _sdy_rule(ctx, layout.num_batch_dims, call_in, batched_in, call_out, batched_out)
    call_ctx = ctx.replace(avals_in=call_in, avals_out=call_out)
    rule = jax.ffi.ffi_lowering(target, extra_attributes=extra, **(lowering_args or {}))
    results = rule(call_ctx, *operands, **attributes)
    return [_reshape(ctx, v, c, a) for v, c, a in zip(results, call_out, avals_out, strict=True)]
