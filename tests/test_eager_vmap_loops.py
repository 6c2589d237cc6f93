"""An eager ``vmap`` that loops over the batch (a python op that is not
``vectorized``; a declared op with a weight per example) is compiled once per set
of parameters, not at every call (``lax.map`` of a fresh function was traced and
compiled each time), and keeps nothing alive once a python op is freed."""

from __future__ import annotations

import gc
import weakref

import jax
import jax.numpy as jnp
import numpy as np

import xla_ffi_rs
from compile_counts import counting
from helpers import rms_norm_np
from xla_ffi_rs import binding, python_op
from xla_ffi_rs.python_ops import registered_functions

X = np.linspace(-1.0, 1.0, 12, dtype=np.float32).reshape(3, 4)
W = np.arange(4, dtype=np.float32)


def scaled(x: np.ndarray, w: np.ndarray, *, k: float = 1.0) -> np.ndarray:
    return np.asarray(np.sin(x) * w * k, np.float32)


def test_an_eager_vmap_of_a_sequential_op_compiles_once() -> None:
    op = python_op(scaled, abstract_eval=lambda x, w, **_: x, name="scaled")
    f = jax.vmap(lambda x: op(x, W, k=2.0))
    f(X).block_until_ready()
    with counting() as compiles:
        for _ in range(4):
            out = f(X)
    assert compiles[0] == 0
    np.testing.assert_allclose(np.asarray(out), np.sin(X.astype(np.float64)) * W * 2.0, rtol=1e-6)
    # Another parameter, other mapped operands, the batch on another axis: each right.
    np.testing.assert_allclose(
        np.asarray(jax.vmap(lambda x: op(x, W, k=3.0))(X)), np.sin(X.astype(np.float64)) * W * 3.0, rtol=1e-6
    )
    both = jax.vmap(op, in_axes=(1, None), out_axes=1)(X, W[:3])
    np.testing.assert_allclose(np.asarray(both), np.sin(X.astype(np.float64)) * W[:3, None], rtol=1e-6)


def test_the_same_loop_under_jit_and_grad_still_runs() -> None:
    op = python_op(scaled, abstract_eval=lambda x, w, **_: x, name="scaled_jit")
    op.def_jvp_rule(lambda p, t: (op(*p), jnp.cos(p[0]) * p[1] * t[0]))
    f = jax.jit(jax.vmap(lambda x: op(x, W)))
    np.testing.assert_allclose(np.asarray(f(X)), np.sin(X.astype(np.float64)) * W, rtol=1e-6)
    g = jax.vmap(jax.grad(lambda x: op(x, W).sum()))(X)
    np.testing.assert_allclose(np.asarray(g), np.cos(X.astype(np.float64)) * W, rtol=1e-6)


def test_an_op_vmapped_eagerly_is_freed_with_its_function() -> None:
    keys = registered_functions()

    def make() -> tuple[weakref.ref[object], weakref.ref[object]]:
        def fn(x: np.ndarray) -> np.ndarray:
            return np.asarray(x * 2, np.float32)

        op = python_op(fn, abstract_eval=lambda x: x, name="vmapped_then_freed")
        np.testing.assert_array_equal(np.asarray(jax.vmap(op)(X)), X * 2)
        return weakref.ref(op), weakref.ref(fn)

    op_ref, fn_ref = make()
    for _ in range(3):
        gc.collect()
        registered_functions()  # a call into the extension drops references it deferred
    assert op_ref() is None
    assert fn_ref() is None
    assert registered_functions() <= keys


def test_an_eager_vmap_of_a_declared_op_over_its_weight_compiles_once() -> None:
    """The weight of ``rms_norm_fwd`` cannot enter the batch ellipsis: one call per example."""
    fwd = binding.op(xla_ffi_rs.declarations()["xla_ffi_rs.rms_norm_fwd"])
    x = np.linspace(-2.0, 2.0, 24, dtype=np.float32).reshape(3, 2, 4)
    w = np.linspace(0.5, 1.5, 12, dtype=np.float32).reshape(3, 4)
    f = jax.vmap(lambda x, w: fwd(x, w, eps=1e-5)[0])
    f(x, w).block_until_ready()
    with counting() as compiles:
        for _ in range(4):
            out = f(x, w)
    assert compiles[0] == 0
    want = np.stack([rms_norm_np(x[i], w[i], 1e-5)[0] for i in range(3)])
    np.testing.assert_allclose(np.asarray(out), want, rtol=1e-5)
    other = jax.vmap(lambda x, w: fwd(x, w, eps=0.5)[0])(x, w)  # another eps: its own loop
    want = np.stack([rms_norm_np(x[i], w[i], 0.5)[0] for i in range(3)])
    np.testing.assert_allclose(np.asarray(other), want, rtol=1e-5)
