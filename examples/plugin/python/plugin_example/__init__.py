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
import numbers
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

import xla_ffi_rs
from xla_ffi_rs import binding

from . import plugin_native

__all__ = ["axpy", "moments", "scale", "softplus"]

# The targets, registered with JAX once, on import, before the ops are built (an op
# takes the targets registered when it is built). "cuda" holds the `platform = device`
# handlers of HANDLERS (none here; docs/gpu.md adds one); registering them needs no GPU.
xla_ffi_rs.register_targets(plugin_native.targets("cpu"), "cpu")
xla_ffi_rs.register_targets(plugin_native.targets("cuda"), "cuda")
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


def _array(fn: str, arg: str, x: ArrayLike) -> jax.Array:
    """x as an array; TypeError naming the function and the argument for what is not
    an array of numbers (None, a string, an object array: jnp's own words name neither),
    ValueError for a Python int beyond JAX's integer types."""
    try:
        return jnp.asarray(x)
    except OverflowError:
        raise ValueError(f"{fn}: {arg}: expected an array of numbers, got the Python int {x}, out of range") from None
    except (TypeError, ValueError):
        what = f"an array of {x.dtype}" if isinstance(x, np.ndarray) else type(x).__name__
        raise TypeError(f"{fn}: {arg}: expected an array of numbers, got {what}") from None


def _float(fn: str, arg: str, x: ArrayLike) -> jax.Array:
    """x as an array; integers and bools become the default float dtype (as jnp does)."""
    x = _array(fn, arg, x)
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(jnp.result_type(float))


def _static_float(fn: str, arg: str, value: Any) -> float:
    """A float attribute is static: a traced value (``jax.jit(fn)(x, 2.0)``) and a value
    that is not a real number are TypeErrors saying what to pass; a number too large
    for a float64 (``10**400``) is a ValueError. Returns the value as a float."""
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"{fn}: {arg} is traced, but it must be a Python number known when tracing: under jax.jit pass it "
            f"as a static argument (static_argnames='{arg}') or close over it"
        )
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{fn}: {arg}: expected a float, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"{fn}: {arg}: {type(value).__name__} value too large for float64") from None


def softplus(x: ArrayLike) -> jax.Array:
    """``log(1 + exp(x))``, elementwise, for float16, bfloat16, float32 and float64.

    Raises:
        TypeError: for a complex ``x``, or one that is not an array of numbers.
    """
    return _softplus(_float("softplus", "x", x))[0]


def scale(x: ArrayLike, factor: float) -> jax.Array:
    """``factor * x``, elementwise (any float dtype).

    Raises:
        TypeError: for a ``factor`` that is not a Python number (a traced one: pass it
            as a static argument).
        ValueError: for a ``factor`` that is not finite or too large for a float64.
    """
    factor = _static_float("scale", "factor", factor)
    if not math.isfinite(factor):
        raise ValueError(f"scale: factor must be finite, got {factor}")
    return OPS["scale"](_float("scale", "x", x), factor=factor)[0]


def axpy(alpha: float, x: ArrayLike, y: ArrayLike) -> jax.Array:
    """``alpha * x + y`` for ``x`` and ``y`` of one shape and float dtype.

    Raises:
        TypeError: for ``x`` and ``y`` of different dtypes.
        ValueError: for ``x`` and ``y`` of different shapes.
    """
    alpha = _static_float("axpy", "alpha", alpha)
    return OPS["axpy"](_float("axpy", "x", x), _float("axpy", "y", y), alpha=alpha)[0]


def moments(x: ArrayLike, *, ddof: int = 0, clip: float | None = None) -> tuple[jax.Array, jax.Array]:
    """The mean and variance of each row (the last axis) of a float64 array.

    ``ddof`` as in ``numpy.var``; ``clip`` (> 0) clips the values to
    ``[-clip, clip]`` first. Needs ``jax_enable_x64``.

    Raises:
        TypeError: for an ``x`` that is not float64.
        ValueError: for an ``x`` of rank 0, a ``ddof`` outside ``[0, row length)``
            or a ``clip`` that is not > 0.
    """
    x = _array("moments", "x", x)
    if clip is not None:
        _static_float("moments", "clip", clip)
        if not clip > 0:  # the handler's range, checked before lowering
            raise ValueError(f"moments: clip must be > 0, got {clip}")
    n = x.shape[-1] if x.ndim else None  # rank 0: the op's shape check names it
    if n is not None and isinstance(ddof, numbers.Integral) and not isinstance(ddof, bool) and not 0 <= ddof < n:
        raise ValueError(f"moments: ddof: expected an integer in [0, {n}) for rows of length {n}, got {ddof}")
    mean, var = OPS["moments"](x, ddof=ddof, clip=clip)
    return mean, var
