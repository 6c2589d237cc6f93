"""The template's ops as ordinary JAX functions.

The Rust handlers (``src/``) declare each op; this module registers them with JAX
and builds the ops from those declarations (``xla_ffi_rs.binding.ops``), adding
only what a declaration cannot say: softplus's derivative (``def_jvp``). Every
function works under ``jit``, ``vmap``, ``grad`` and sharding, and raises
``TypeError`` or ``ValueError`` for bad input before anything is lowered.

Example:
    >>> import jax, jax.numpy as jnp
    >>> import plugin_example
    >>> plugin_example.softplus(jnp.zeros(2)).tolist()  # log(2)
    [0.6931471824645996, 0.6931471824645996]
    >>> jax.grad(lambda x: plugin_example.softplus(x).sum())(jnp.zeros(2)).tolist()
    [0.5, 0.5]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

import xla_ffi_rs
from xla_ffi_rs import binding

from . import plugin_native

__all__ = ["axpy", "moments", "scale", "softplus"]

# The CPU targets, registered with JAX once, on import.
xla_ffi_rs.register_targets(plugin_native.targets())
#: op name (the target's last dotted part) -> binding.Op, built from the declarations.
OPS: dict[str, binding.Op] = binding.ops(plugin_native.declarations())
_softplus, _softplus_jvp = OPS["softplus"], OPS["softplus_jvp"]


# softplus is linear in nothing, so its JVP is a rule of ours: the tangent target
# at the same x. Reverse mode transposes that target by its declaration (it is its
# own transpose), so `grad` runs Rust twice and no jnp code.
@_softplus.def_jvp
def _softplus_jvp_rule(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    (x,), (x_dot,) = primals, tangents
    return _softplus(x), _softplus_jvp(x, x_dot)


# The tangent target is linear in dx, not in x: for second order (grad of grad) its
# JVP with respect to x too, d/dx [sigmoid(x) dx] = sigmoid(x) (1 - sigmoid(x)) dx.
@_softplus_jvp.def_jvp
def _softplus_jvp_jvp_rule(primals: Sequence[Any], tangents: Sequence[Any]) -> tuple[Any, Any]:
    (x, dx), (x_dot, dx_dot) = primals, tangents
    s = jax.nn.sigmoid(x) * jax.nn.sigmoid(-x)  # sigmoid'(x) = s (1 - s), without cancellation
    (dy_dot,) = _softplus_jvp(x, dx_dot)
    return _softplus_jvp(x, dx), (dy_dot + s * dx * x_dot,)


def _float(x: ArrayLike) -> jax.Array:
    """x as an array; integers and bools become the default float dtype (as jnp does)."""
    x = jnp.asarray(x)
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(jnp.result_type(float))


def softplus(x: ArrayLike) -> jax.Array:
    """``log(1 + exp(x))``, elementwise, for float16, bfloat16, float32 and float64.

    Raises:
        TypeError: for a complex ``x``.
    """
    return _softplus(_float(x))[0]


def scale(x: ArrayLike, factor: float) -> jax.Array:
    """``factor * x``, elementwise (any float dtype).

    Raises:
        ValueError: for a ``factor`` that is not finite.
    """
    if not math.isfinite(factor):
        raise ValueError(f"scale: factor must be finite, got {factor}")
    return OPS["scale"](_float(x), factor=factor)[0]


def axpy(alpha: float, x: ArrayLike, y: ArrayLike) -> jax.Array:
    """``alpha * x + y`` for ``x`` and ``y`` of one shape and float dtype.

    Raises:
        TypeError: for ``x`` and ``y`` of different dtypes.
        ValueError: for ``x`` and ``y`` of different shapes.
    """
    return OPS["axpy"](_float(x), _float(y), alpha=alpha)[0]


def moments(x: ArrayLike, *, ddof: int = 0, clip: float | None = None) -> tuple[jax.Array, jax.Array]:
    """The mean and variance of each row (the last axis) of a float64 array.

    ``ddof`` as in ``numpy.var``; ``clip`` (> 0) clips the values to
    ``[-clip, clip]`` first. Needs ``jax_enable_x64``.

    Raises:
        TypeError: for an ``x`` that is not float64.
        ValueError: for an ``x`` of rank 0.
    """
    mean, var = OPS["moments"](jnp.asarray(x), ddof=ddof, clip=clip)
    return mean, var
