"""Every op of crates/ops has a test fixture (tests/ops/<op>/fixture.py) and a Python
module, and each fixture's float64 references are right: the forward against the
op's own function, the JVP and VJP references against each other (one is the
transpose of the other) and against finite differences of the forward reference."""

from __future__ import annotations

import numpy as np
import pytest

from op_fixtures import OpFixture, fixtures, op_targets, rust_ops


def test_every_op_has_a_fixture() -> None:
    assert rust_ops(), "no op folders in crates/ops/src"
    have = sorted(f.name for f in fixtures())
    assert have == rust_ops(), f"ops without a tests/ops/<op>/fixture.py, or fixtures of no op: {have} vs {rust_ops()}"
    for op in rust_ops():
        assert op_targets(op), f"xla_ffi_rs.ops.{op} declares no target"


def points(op: OpFixture) -> list[tuple[np.ndarray, ...]]:
    rng = np.random.default_rng(3)
    return [op.inputs(rng, f.shapes) for f in op.sharding.families[:3]]


@pytest.mark.parametrize("op", fixtures(), ids=lambda o: o.name)
def test_the_forward_reference_is_the_function(op: OpFixture) -> None:
    for xs in points(op):
        for got, want in zip(op(*xs), op.reference(*xs), strict=True):
            np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=1e-10, atol=1e-12)
        for a, b in zip(op.variant(*xs), xs, strict=True):
            assert np.shape(a) == np.shape(b)
        assert all(np.all(np.isfinite(r)) for r in op.reference(*op.variant(*xs)))


@pytest.mark.parametrize("op", fixtures(), ids=lambda o: o.name)
def test_the_jvp_and_vjp_references_agree_with_finite_differences(op: OpFixture) -> None:
    rng = np.random.default_rng(4)
    for xs in points(op):
        ts = tuple(rng.standard_normal(np.shape(x)) for x in xs)
        ys = op.reference(*xs)
        cts = tuple(rng.standard_normal(np.shape(y)) for y in ys)
        jvp, vjp = op.jvp(xs, ts), op.vjp(xs, cts)
        # <ct, J t> == <J^T ct, t>
        lhs = sum(float(np.sum(c * d)) for c, d in zip(cts, jvp, strict=True))
        rhs = sum(float(np.sum(v * t)) for v, t in zip(vjp, ts, strict=True))
        assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs)), (lhs, rhs)
        h = 1e-6
        up = op.reference(*(x + h * t for x, t in zip(xs, ts, strict=True)))
        down = op.reference(*(x - h * t for x, t in zip(xs, ts, strict=True)))
        for u, d, j in zip(up, down, jvp, strict=True):
            np.testing.assert_allclose((u - d) / (2 * h), j, rtol=1e-5, atol=1e-6)
