"""Tensor-parallel rms_norm: the bytes that collectives move per call, read from
the compiled HLO's shapes, for x split along its hidden axis (8 CPU devices,
forced in this process), against the gather approach.

* tensor parallel: ``xr.rms_norm`` on x split along the hidden axis: each shard
  sums its squares, one all-reduce of one value per row, local normalization. On a
  mesh with explicit axes (``jax.make_mesh``) the split is in x's type and the call
  is a ``shard_map``; on auto axes (``Mesh(devices, names)``) the op lowers to its
  jnp formula and XLA partitions its per-row sums the same way;
* gather: the kernel path, which needs whole rows: x is laid out whole along the
  hidden axis (``reshard`` on explicit axes, a sharding constraint on auto ones)
  before the ``rms_norm_fwd`` op, so XLA gathers it.

Both programs are compiled only (from ``jax.ShapeDtypeStruct``s), never run: on
forced CPU devices sharing the machine's cores, times would say nothing about a
real interconnect. Bytes per device = the sum over the program's collectives of
the bytes of their results (an all-reduce's result is its operand's size; an
all-gather's is the gathered array). Forward: y of rms_norm; grad: d/d(x, w) of
sum(y * g) with a replicated weight.
"""

from __future__ import annotations

import os

os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()

import math
import re
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import xla_ffi_rs as xr
from common import QUICK
from reporting import report, target
from xla_ffi_rs.ops.rms_norm import rms_norm_fwd_op

EPS = 1e-5
COLLECTIVES = ("all-reduce", "all-gather", "all-to-all", "collective-permute", "reduce-scatter")
BYTES = {"f64": 8, "f32": 4, "bf16": 2, "f16": 2, "s32": 4, "u32": 4, "s64": 8, "u64": 8, "pred": 1, "s8": 1, "u8": 1}


def collective_bytes(hlo: str) -> dict[str, int]:
    """Bytes of the results of each kind of collective in compiled HLO text (per device)."""
    out = dict.fromkeys(COLLECTIVES, 0)
    for line in hlo.splitlines():
        for kind in COLLECTIVES:
            found = re.search(r"=\s*(.*?)\s" + kind + r"(-start)?\(", line)
            if found:
                for dtype, dims in re.findall(r"(\w+)\[([\d,]*)\]", found.group(1)):
                    out[kind] += BYTES[dtype] * math.prod(int(d) for d in dims.split(",") if d)
    return out


def tensor_parallel(x: jax.Array, w: jax.Array) -> jax.Array:
    return xr.rms_norm(x, w, eps=EPS)


def gather_on(mesh: jax.sharding.Mesh, x_spec: P) -> Any:
    """The gather approach: x whole along its hidden axis, then the kernel."""
    whole = NamedSharding(mesh, P(*tuple(x_spec)[:-1], None))
    explicit = jax.sharding.AxisType.Explicit in mesh.axis_types

    def lay_out(v: jax.Array, sharding: NamedSharding) -> jax.Array:
        return jax.sharding.reshard(v, sharding) if explicit else jax.lax.with_sharding_constraint(v, sharding)

    def gather(x: jax.Array, w: jax.Array) -> jax.Array:
        # y goes back to x's layout (a local slice; in the gradient, dy's gather).
        return lay_out(rms_norm_fwd_op(lay_out(x, whole), w, eps=EPS)[0], NamedSharding(mesh, x_spec))

    return gather


def grad_of(f: Any) -> Any:
    def loss(x: jax.Array, w: jax.Array, g: jax.Array) -> jax.Array:
        return jnp.sum(f(x, w) * g)

    return jax.grad(loss, argnums=(0, 1))


def compiled_bytes(fn: Any, *args: jax.ShapeDtypeStruct) -> dict[str, int]:
    return collective_bytes(str(jax.jit(fn).lower(*args).compile().as_text()))


def main() -> None:
    hidden = 256 if QUICK else 4096
    shapes = [(512, hidden), (2, 64, hidden)] if QUICK else [(8192, hidden), (4, 2048, hidden)]
    explicit, auto = jax.sharding.AxisType.Explicit, jax.sharding.AxisType.Auto
    layouts = {
        "hidden/8": ((8,), ("h",), lambda r: P(*[None] * (r - 1), "h")),
        "batch/2 x hidden/4": ((2, 4), ("a", "b"), lambda r: P("a", *[None] * (r - 2), "b")),
    }
    meshes = {
        (kind, layout): (jax.make_mesh(shape, names, axis_types=(axis_type,) * len(shape)), spec)
        for kind, axis_type in (("explicit", explicit), ("auto", auto))
        for layout, (shape, names, spec) in layouts.items()
    }
    rows, targets = [], []
    for partitioner in ("shardy", "gspmd"):
        jax.config.update("jax_use_shardy_partitioner", partitioner == "shardy")
        for shape in shapes:
            for (kind, layout), (mesh, spec) in meshes.items():
                xs = NamedSharding(mesh, spec(len(shape)))
                x = jax.ShapeDtypeStruct(shape, jnp.float32, sharding=xs)
                w = jax.ShapeDtypeStruct(shape[-1:], jnp.float32, sharding=NamedSharding(mesh, P()))
                gather = gather_on(mesh, xs.spec)
                for what, tp, ga, args in (
                    ("forward", tensor_parallel, gather, (x, w)),
                    ("grad", grad_of(tensor_parallel), grad_of(gather), (x, w, x)),
                ):
                    b_tp, b_ga = compiled_bytes(tp, *args), compiled_bytes(ga, *args)
                    moved_x = b_tp["all-gather"] + b_tp["all-to-all"] + b_tp["collective-permute"]
                    row: dict[str, Any] = {
                        "partitioner": partitioner,
                        "x": "x".join(map(str, shape)) + " f32",
                        "mesh axes": kind,
                        "split": layout,
                        "call": what,
                        "TP all-reduce B": b_tp["all-reduce"],
                        "TP other B": moved_x + b_tp["reduce-scatter"],
                        "gather all-gather B": b_ga["all-gather"],
                        "gather total B": sum(b_ga.values()),
                        "TP total B": sum(b_tp.values()),
                        "TP / gather": sum(b_tp.values()) / max(1, sum(b_ga.values())),
                    }
                    rows.append(row)
                    print(
                        f"  {partitioner} {kind} {row['x']} {layout} {what}: tensor parallel {row['TP total B']} B, "
                        f"gather {row['gather total B']} B per device",
                        flush=True,
                    )
                    if partitioner == "shardy" and shape == shapes[0] and layout == "hidden/8":
                        axes = "" if kind == "explicit" else " auto axes"
                        label = f"rms_norm tensor parallel {row['x']} hidden/8{axes} {what}"
                        targets.append(target(f"{label}: bytes vs the gather approach", row["TP / gather"], "<=", 0.01))
                    if what == "forward" or kind == "auto":
                        # Nothing moves but the per-row sums (and, in the explicit grad,
                        # a replicated weight's gradient): x is never gathered.
                        assert moved_x == 0, (row, b_tp)
                    assert b_ga["all-gather"] > 0, ("the gather approach gathered nothing", row, b_ga)
    report(
        "rms_norm_tp",
        {"bytes moved by collectives per call, per device (from the compiled HLO)": rows},
        targets,
        notes=[
            (
                "TP: x split along hidden, one all-reduce of one f32 per row (forward; grad adds the backward's per-row"
                " dots and, with batch split, dweight's all-reduce; a replicated weight's gradient is all-gathered,"
                " never x)"
            ),
            "gather: the kernel path, which gathers x's hidden axis before the call",
            "mesh axes: explicit (jax.make_mesh's default; a shard_map) or auto (Mesh(devices, names); the jnp formula)",
            "compiled only, not run: forced CPU devices share the cores, so no times are reported",
        ],
    )


if __name__ == "__main__":
    main()
