"""The ops' test fixtures: ``tests/ops/<op>/fixture.py``, one per op of ``crates/ops``,
found by a walk of ``tests/ops`` (no list to keep).

A fixture holds what the op's declarations cannot say: how to make valid inputs,
its float64 NumPy references (forward, JVP, VJP), its attributes, the shape
families and partitions to shard it over, which target each transformation runs,
and its GPU tolerances. The generic test modules build every op's matrices from the
declarations (``xla_ffi_rs.declarations()``: operands, which of them carry the batch
axes, the batch rank) and these fixtures: ``tests/sharding/test_sharding.py`` (the
sharding matrix), ``tests/gpu/test_gpu_ops.py`` (GPU against CPU),
``tests/test_public_types.py`` (the public function's types and rejected inputs) and
``tests/test_op_fixtures.py`` (every op has a fixture, every fixture is sound).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from jax.sharding import PartitionSpec as P

import xla_ffi_rs as xr
from xla_ffi_rs import binding

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "ops"
#: The ops of crates/ops: one folder each (with a mod.rs).
RUST_OPS = ROOT / "crates" / "ops" / "src"

Arrays = tuple[np.ndarray, ...]
Shapes = tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Family:
    """One shape family of the sharding matrix: each operand's shape.

    ``full``: every transformation meets every partition (else they are spread
    over the partitions, a Latin square). ``specs``: the partitions to use, as
    (partition spec of the batched operands, mesh name) pairs; empty: every
    partition kind that fits the family is generated (tests/sharding/cases.py)."""

    name: str
    shapes: Shapes
    full: bool = False
    specs: tuple[tuple[P, str], ...] = ()


@dataclass(frozen=True)
class Sharding:
    """How the op is sharded in tests/sharding/test_sharding.py.

    ``targets``: transformation (fwd, grad, jvp, vmap, shard_map) -> the target whose
    calls must each see the local block. ``jnp_on_auto_axes``: on a mesh with auto
    axes the op lowers to its jnp formula (no target call at all)."""

    families: tuple[Family, ...]
    targets: Mapping[str, str]
    jnp_on_auto_axes: bool = False


@dataclass(frozen=True)
class Gpu:
    """GPU against CPU (tests/gpu/test_gpu_ops.py): operand shapes, the operands'
    dtypes for each run and the tolerance ``(rtol, atol)`` of the GPU's results against the CPU's,
    by result dtype name; ``derivative_dtypes``: dtypes whose JVP and gradient are
    compared (the GPU's error against float64 at most twice the CPU's, above a floor
    by dtype name)."""

    shapes: Shapes
    dtypes: tuple[tuple[Any, ...], ...]
    tol: Mapping[str, tuple[float, float]]
    derivative_dtypes: tuple[Any, ...]
    floor: Mapping[str, float]


@dataclass(frozen=True)
class OpFixture:
    """What the tests need to know of one op beyond its declarations.

    ``name``: the op's folder in crates/ops/src and its module ``xla_ffi_rs.ops.<name>``.
    ``function``: its public function. ``kwargs``: attributes to call it with.
    ``inputs(rng, shapes)``: valid operands of those shapes. ``variant(*operands)``:
    another valid point (for a vmap over two stacked copies). ``reference(*operands)``:
    the function's results in float64. ``vjp(operands, cotangents)``: the operands'
    cotangents; ``jvp(operands, tangents)``: the results' tangents, float64."""

    name: str
    function: Callable[..., Any]
    inputs: Callable[[np.random.Generator, Shapes], Arrays]
    variant: Callable[..., Arrays]
    reference: Callable[..., Arrays]
    vjp: Callable[[Arrays, Arrays], Arrays]
    jvp: Callable[[Arrays, Arrays], Arrays]
    sharding: Sharding
    gpu: Gpu
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def __call__(self, *operands: Any) -> tuple[Any, ...]:
        """The public function's results, always as a tuple."""
        out = self.function(*operands, **self.kwargs)
        return tuple(out) if isinstance(out, tuple | list) else (out,)

    @property
    def parameters(self) -> list[str]:
        """The public function's array parameters (those without a default)."""
        sig = inspect.signature(self.function)
        return [p.name for p in sig.parameters.values() if p.default is inspect.Parameter.empty]

    @property
    def targets(self) -> frozenset[str]:
        """The op's FFI targets: those of the declared ops of its module."""
        return op_targets(self.name)

    @property
    def forward(self) -> dict[str, Any]:
        """The declaration of the target the public function runs."""
        return xr.declarations()[self.sharding.targets["fwd"]]

    def batched(self) -> tuple[bool, ...]:
        """Per operand: whether it carries the batch axes (its dims start with the
        declaration's batch ellipsis), from the forward target's declaration."""
        decl = self.forward
        lead = "..." + str(decl["batch"])
        return tuple(bool(o["dims"]) and o["dims"][0] == lead for o in decl["operands"])

    def batch_rank(self, shapes: Shapes) -> int:
        """How many leading axes of the batched operands are batch axes, for these
        shapes: the native shape checker's answer."""
        dtypes = [o["dtypes"][-1] for o in self.forward["operands"]]
        return binding.infer(self.forward, list(shapes), dtypes)[1]


def op_targets(name: str) -> frozenset[str]:
    """The targets of the declared ops (``binding.Op`` with a declaration) of
    ``xla_ffi_rs.ops.<name>``."""
    module = importlib.import_module(f"xla_ffi_rs.ops.{name}")
    return frozenset(
        o.declaration.target for o in vars(module).values() if isinstance(o, binding.Op) and o.declaration is not None
    )


def rust_ops() -> list[str]:
    """The op folders of crates/ops/src (each with a mod.rs)."""
    return sorted(p.parent.name for p in RUST_OPS.glob("*/mod.rs"))


def _load(path: Path) -> OpFixture:
    spec = importlib.util.spec_from_file_location(f"op_fixture_{path.parent.name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found = getattr(module, "FIXTURE", None)
    assert isinstance(found, OpFixture), f"{path}: no FIXTURE = OpFixture(...)"
    assert found.name == path.parent.name, f"{path}: FIXTURE.name is {found.name!r}, not its folder's name"
    return found


@functools.cache
def fixtures() -> tuple[OpFixture, ...]:
    """Every op's fixture, by name."""
    return tuple(_load(p) for p in sorted(FIXTURES.glob("*/fixture.py")))


def fixture(name: str) -> OpFixture:
    """The fixture of one op."""
    for f in fixtures():
        if f.name == name:
            return f
    raise KeyError(f"no tests/ops/{name}/fixture.py")


def as_tuple(out: Any) -> tuple[Any, ...]:
    return tuple(out) if isinstance(out, tuple | list) else (out,)


def per_operand(values: Sequence[Any]) -> Arrays:
    return tuple(np.asarray(v, np.float64) for v in values)
