"""``eps`` of rms_norm as a layer holds it: the forms flax and equinox modules pass
it in (a Python float, a NumPy scalar, a concrete 0-d array), compared with the
NumPy float64 formula, and the error when a module's ``eps`` arrives traced.

The module here is a plain-jax pytree: equinox's ``filter_jit``/``filter_grad``
trace the leaves that are NumPy scalars or arrays (an ``eps`` among them), and
flax's ``nnx.jit`` traces array attributes, as ``jax.jit`` traces a data field.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr

X = np.linspace(-2.0, 3.0, 12, dtype=np.float32).reshape(3, 4)
W = np.array([0.5, 1.0, 1.5, 2.0], np.float32)

RMS_FUNCTIONS: list[tuple[str, Callable[..., Any]]] = [
    ("rms_norm", xr.rms_norm),
    ("rms_norm_inplace", xr.rms_norm_inplace),
]


def reference(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    x64 = x.astype(np.float64)
    return x64 / np.sqrt(np.mean(x64 * x64, axis=-1, keepdims=True) + eps) * w


# A concrete 0-d array is a known value: a module's attribute restored from a
# checkpoint, or passed through equinox's filter_vmap, arrives as one.
CONCRETE_EPS = [
    pytest.param(np.float32(0.5), id="np.float32"),
    pytest.param(np.array(0.5), id="np 0-d float64"),
    pytest.param(np.array(0.5, np.float32), id="np 0-d float32"),
    pytest.param(jnp.asarray(0.5), id="jnp 0-d"),
    pytest.param(jnp.asarray(0.5, jnp.bfloat16), id="jnp 0-d bfloat16"),
    pytest.param(np.array(1, np.int32), id="np 0-d int32"),
]


@pytest.mark.parametrize("eps", CONCRETE_EPS)
@pytest.mark.parametrize(("name", "fn"), RMS_FUNCTIONS)
def test_concrete_0d_eps_is_its_value(eps: Any, name: str, fn: Callable[..., Any]) -> None:
    want = reference(X, W, float(eps))
    np.testing.assert_allclose(fn(X, W, eps), want, rtol=1e-6)
    np.testing.assert_allclose(fn(X, W, eps=eps), want, rtol=1e-6)
    # Closed over under jit (a layer's attribute the transformation does not trace).
    np.testing.assert_allclose(jax.jit(lambda x: fn(x, W, eps))(X), want, rtol=1e-6)
    g = jax.grad(lambda x: fn(x, W, eps).sum())(X)
    g_ref = jax.grad(lambda x: xr.rms_norm(x, W, float(eps)).sum())(X)
    np.testing.assert_array_equal(g, g_ref)


@pytest.mark.parametrize(
    ("eps", "error", "words"),
    [
        (np.array(-0.5), ValueError, "expected a finite float >= 0, got -0.5"),
        (jnp.asarray(jnp.nan), ValueError, "expected a finite float >= 0, got nan"),
        (np.array(True), TypeError, "expected a Python float >= 0, got ndarray"),
        (np.array(1e-5j), TypeError, "expected a Python float >= 0, got ndarray"),
        (np.array("1e-5"), TypeError, "expected a Python float >= 0, got ndarray"),
        (jnp.asarray([1e-5]), TypeError, "expected a Python float >= 0, got ArrayImpl"),
        (np.bool_(True), TypeError, "expected a Python float >= 0, got bool"),
    ],
    ids=["negative", "nan", "bool", "complex", "str", "1-d", "np.bool_"],
)
@pytest.mark.parametrize(("name", "fn"), RMS_FUNCTIONS)
def test_other_arrays_as_eps_are_refused(
    eps: Any, error: type[Exception], words: str, name: str, fn: Callable[..., Any]
) -> None:
    with pytest.raises(error, match=rf"^{name}: eps: {re.escape(words)}$"):
        fn(X, W, eps)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Norm:
    """An RMSNorm layer as a pytree: ``weight`` and ``eps`` are leaves, as equinox
    holds both when ``eps`` is a NumPy scalar or an array."""

    weight: Any
    eps: Any

    def __call__(self, x: Any) -> Any:
        return xr.rms_norm(x, self.weight, self.eps)


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class StaticEpsNorm:
    """The same layer with ``eps`` static (equinox: a Python float, or
    ``eqx.field(static=True)``; flax: a Python float attribute)."""

    weight: Any
    eps: float = dataclasses.field(metadata={"static": True})

    def __call__(self, x: Any) -> Any:
        return xr.rms_norm(x, self.weight, self.eps)


@pytest.mark.parametrize(
    "eps", [np.float32(0.5), np.array(0.5), jnp.asarray(0.5)], ids=["np.float32", "np 0-d", "jnp 0-d"]
)
def test_a_module_whose_eps_is_traced_says_hold_a_python_float(eps: Any) -> None:
    layer = Norm(jnp.asarray(W), eps)
    np.testing.assert_allclose(layer(X), reference(X, W, 0.5), rtol=1e-6)  # eager: the value is known
    for transform in (jax.jit(lambda m: m(X)), jax.grad(lambda m: m(X).sum())):
        with pytest.raises(TypeError) as info:
            transform(layer)
        msg = str(info.value)
        assert msg.startswith("rms_norm: eps is traced (")
        assert "in a flax or equinox module, hold it as a Python float" in msg
        assert "derivatives with respect to eps are not supported" in msg


def test_a_module_with_a_static_eps_trains() -> None:
    layer = StaticEpsNorm(jnp.asarray(W), 0.5)
    np.testing.assert_allclose(jax.jit(lambda m: m(X))(layer), reference(X, W, 0.5), rtol=1e-6)
    g = jax.jit(jax.grad(lambda m: (m(X) ** 2).sum()))(layer)
    normalized = reference(X, np.ones(4), 0.5)
    g_ref = 2 * (normalized**2).sum(axis=0) * W  # d/dw sum((normalized * w)**2)
    assert g.eps == 0.5  # the static field comes back as it went in
    np.testing.assert_allclose(g.weight, g_ref, rtol=1e-5)
    # vmap over a stack of layers (nnx.vmap / eqx.filter_vmap over layers): eps stays static.
    stacked = StaticEpsNorm(jnp.stack([jnp.asarray(W), 2 * jnp.asarray(W)]), 0.5)
    ys = jax.vmap(lambda m: m(X))(stacked)
    np.testing.assert_allclose(ys[1], reference(X, 2 * W, 0.5), rtol=1e-6)
