"""What a freed python op leaves behind in JAX: nothing, its primitive included."""

from __future__ import annotations

import gc
import weakref

import jax
import numpy as np

from xla_ffi_rs import nonlinear_op, python_op


def make_and_call(k: float) -> tuple[weakref.ref[object], ...]:
    op = python_op(lambda x: x + k, abstract_eval=lambda x: x)
    nl = nonlinear_op(
        lambda x: np.sin(x) + k, lambda x, dx: np.cos(x) * dx, lambda x, ct: np.cos(x) * ct, abstract_eval=lambda x: x
    )
    x = np.ones(3, np.float32)
    np.testing.assert_array_equal(op(x), x + k)
    np.testing.assert_allclose(jax.jit(jax.grad(lambda x: nl(x).sum()))(x), np.cos(x), rtol=1e-6)
    return weakref.ref(op.primitive), weakref.ref(nl.primitive)


def test_a_freed_ops_primitive_leaves_jaxs_rule_tables() -> None:
    # JAX's lowering, JVP, transpose, linearization and batching tables are keyed by
    # primitive and live as long as the process: an op made per request (a service)
    # kept about 5 KB there each, freed op or not.
    refs = [r for k in range(5) for r in make_and_call(float(k))]
    jax.clear_caches()
    gc.collect()
    assert [r() for r in refs] == [None] * len(refs)
