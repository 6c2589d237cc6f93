"""What building an op again costs: ``binding.op`` with the same declaration and
arguments returns the same op, so an op built inside a function called per step is
compiled once and adds nothing to memory (each was a new primitive: traced and
compiled at every call, and kept by JAX's rule tables for the rest of the process)."""

from __future__ import annotations

import gc

import jax
import numpy as np
import pytest

import xla_ffi_rs
from compile_counts import counting
from helpers import kepler_solve_np
from xla_ffi_rs import binding

DECL = xla_ffi_rs.declarations()["xla_ffi_rs.kepler"]
M = np.linspace(0.0, 3.0, 8, dtype=np.float32)
E = np.full(8, 0.25, np.float32)


def step(m: np.ndarray, e: np.ndarray) -> jax.Array:
    """A training step that builds its op where it uses it."""
    op = binding.op(DECL, name="kepler_per_step")
    return op(m, e)[0]


def test_an_op_built_per_step_is_compiled_once() -> None:
    step(M, E).block_until_ready()
    with counting() as compiles:
        for _ in range(5):
            out = step(M, E)
    assert compiles[0] == 0
    np.testing.assert_allclose(np.asarray(out), np.sin(kepler_solve_np(M, E)), rtol=1e-5, atol=1e-6)


def test_an_op_built_per_step_adds_no_objects() -> None:
    for _ in range(3):
        step(M, E).block_until_ready()
    gc.collect()
    before = len(gc.get_objects())
    for _ in range(100):
        step(M, E).block_until_ready()
    gc.collect()
    grown = len(gc.get_objects()) - before
    assert grown < 100, f"{grown} objects more after 100 steps"


def test_the_same_arguments_give_the_same_op() -> None:
    a = binding.op(DECL, name="same")
    assert binding.op(dict(DECL), name="same") is a  # an equal declaration, another dict
    assert binding.op(DECL, name="other") is not a
    assert binding.op(DECL, name="same", targets=xla_ffi_rs.target_names("xla_ffi_rs.kepler")) is a  # the default
    assert binding.op(DECL, name="same", targets={}, jnp_impl=lambda m, e: (m, e)) is not a


@pytest.mark.parametrize("rule", ["def_jvp", "def_batching", "def_lowering"])
def test_an_op_whose_rule_was_changed_is_not_returned_again(rule: str) -> None:
    a = binding.op(DECL, name=f"changed_{rule}")
    if rule == "def_lowering":
        a.def_lowering("cpu", lambda ctx, m, e: [m, e])
    elif rule == "def_jvp":
        a.def_jvp(lambda primals, tangents: (a(*primals), tangents))
    else:
        a.def_batching(lambda operands, dims: (a(*operands), dims))
    b = binding.op(DECL, name=f"changed_{rule}")
    assert b is not a
    assert binding.op(DECL, name=f"changed_{rule}") is b
    np.testing.assert_allclose(np.asarray(b(M, E)[0]), np.sin(kepler_solve_np(M, E)), rtol=1e-5, atol=1e-6)
