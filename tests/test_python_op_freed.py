"""What a freed python op leaves behind: nothing, in JAX (its primitive included)
or in the handler's pool of large copies."""

from __future__ import annotations

import gc
import weakref

import jax
import numpy as np

from xla_ffi_rs import nonlinear_op, python_op
from xla_ffi_rs.python_ops import pooled_bytes


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


def test_a_freed_ops_pooled_copies_are_released() -> None:
    # Copies of operands and outputs of 128 KiB or more come from a pool shared by
    # all ops (up to 256 MiB), for the next call to reuse. It was never emptied: a
    # process that ran and dropped ops on large arrays kept that memory for good.
    # An odd size no other test pools, so the pool's other arrays are left alone.
    x = np.arange((1 << 18) + 17, dtype=np.float32)
    before = pooled_bytes()
    ops = [
        python_op(lambda x: x * 2, abstract_eval=lambda x: x),  # the operand's copy
        python_op(
            lambda x, out: np.negative(x, out=out), abstract_eval=lambda x: x, takes_outputs=True
        ),  # and an output
    ]
    np.testing.assert_array_equal(ops[0](x), x * 2)
    np.testing.assert_array_equal(jax.jit(ops[1])(x), -x)
    assert pooled_bytes() >= before + 2 * x.nbytes
    refs = [weakref.ref(op) for op in ops]
    del ops
    jax.clear_caches()
    gc.collect()
    assert [r() for r in refs] == [None, None]
    assert pooled_bytes() <= before
