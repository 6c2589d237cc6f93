"""Argument checks that run while tracing, before anything is lowered.

Each message names the function, the argument, what was expected and what was
got, e.g. ``rms_norm: weight: expected a floating dtype (float16, bfloat16,
float32 or float64), got int32``, and a value that must be static but is traced
says how to make it static.

Example:
    >>> import numpy as np
    >>> check_floating("rms_norm", "x", np.dtype("int32"), FLOAT_DTYPES)
    Traceback (most recent call last):
    ...
    TypeError: rms_norm: x: expected a floating dtype (float16, bfloat16, float32 or float64), got int32
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from xla_ffi_rs._compat import Tracer

#: Float dtypes the rms_norm kernels accept.
FLOAT_DTYPES: tuple[np.dtype, ...] = tuple(jnp.dtype(d) for d in (jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64))


def _names(dtypes: Sequence[np.dtype]) -> str:
    names = [d.name for d in dtypes]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def check_floating(fn: str, arg: str, dtype: Any, allowed: Sequence[np.dtype]) -> None:
    """Raise TypeError unless ``dtype`` is one of ``allowed``."""
    if jnp.dtype(dtype) not in allowed:
        raise TypeError(f"{fn}: {arg}: expected a floating dtype ({_names(allowed)}), got {jnp.dtype(dtype).name}")


def check_real_or_integer(fn: str, arg: str, dtype: Any) -> None:
    """Raise TypeError for dtypes that are neither real floats nor integers (bool included)."""
    kind = jnp.dtype(dtype).kind
    if kind not in "iuf" and jnp.dtype(dtype) != jnp.bfloat16:
        raise TypeError(f"{fn}: {arg}: expected a real (integer or floating) dtype, got {jnp.dtype(dtype).name}")


def _element_types(array: np.ndarray) -> str:
    names = sorted({type(v).__name__ for v in array.ravel()[:1000]}) if array.dtype.kind == "O" else []
    return " or ".join(names) if names else array.dtype.name


def array_like(fn: str, arg: str, value: Any, expected: str) -> Any:
    """``value`` checked to be a numeric array-like: a JAX or NumPy array or
    scalar of a numeric dtype, a Python number, or a (nested) sequence of them;
    a sequence is returned as a NumPy array (so that ``jnp.result_type`` can
    read its dtype), anything else unchanged.

    Raises TypeError (ValueError for a Python int beyond float64) naming ``fn``
    and ``arg`` otherwise. The dtype itself (e.g. complex where reals are needed)
    is checked by the caller; this catches what ``jnp.asarray`` would reject with
    a message that names neither (``data type '.0' not understood``,
    ``OverflowError``, ...).
    """
    if isinstance(value, jax.Array) or hasattr(value, "__jax_array__"):
        return value
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype.kind not in "biufc" and value.dtype != jnp.bfloat16:
            raise TypeError(f"{fn}: {arg}: expected {expected}, got an array of {_element_types(np.asarray(value))}")
        return value
    if isinstance(value, (bool, float, complex)):
        return value
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            raise ValueError(f"{fn}: {arg}: expected {expected}, got an int beyond the float64 range") from None
        return value
    if value is None or isinstance(value, (str, bytes, dict, set, frozenset)) or callable(value):
        raise TypeError(f"{fn}: {arg}: expected {expected}, got {type(value).__name__}")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            array = np.asarray(value)
    except (TypeError, ValueError, OverflowError) as err:
        raise TypeError(
            f"{fn}: {arg}: expected {expected}, got a {type(value).__name__} that is not an array of numbers ({err})"
        ) from None
    if array.dtype.kind not in "biufc":
        what = f"a {type(value).__name__} of {_element_types(array)}" if array.ndim else type(value).__name__
        raise TypeError(f"{fn}: {arg}: expected {expected}, got {what}")
    return array


def check_trailing_shape(fn: str, arg: str, shape: tuple[int, ...], of: str, full: tuple[int, ...]) -> None:
    """Raise ValueError unless ``shape`` is non-empty and ends ``full``."""
    if len(shape) == 0:
        raise ValueError(f"{fn}: {arg}: expected at least 1 dimension, got shape ()")
    if len(shape) > len(full) or tuple(full[len(full) - len(shape) :]) != tuple(shape):
        raise ValueError(
            f"{fn}: {arg}: expected shape equal to the trailing {len(shape)} axes of {of}, "
            f"{tuple(full[max(len(full) - len(shape), 0) :])} ({of}.shape={tuple(full)}), got {tuple(shape)}"
        )


def check_static(fn: str, arg: str, value: Any, position: int) -> None:
    """Raise TypeError if ``value`` is traced (a ``jax.jit`` argument, or under
    ``grad``/``vmap``), saying how to pass it as a static argument: ``fn`` is
    the public function's name in ``xla_ffi_rs`` and ``position`` the
    argument's index in its signature."""
    if isinstance(value, Tracer):
        raise TypeError(
            f"{fn}: {arg} is traced ({type(value).__name__}), but it must be a Python float known when the "
            f"function is traced; under jax.jit pass it as a static argument: "
            f"jax.jit(xr.{fn}, static_argnames='{arg}') (or static_argnums={position}), or close over it: "
            f"jax.jit(lambda *a: xr.{fn}(*a, {arg}={arg})); derivatives with respect to {arg} are not supported"
        )


def check_nonnegative_float(fn: str, arg: str, value: Any, position: int) -> float:
    """Return ``value`` as a float; TypeError if traced (with how to make it
    static, see :func:`check_static`) or not a real number, ValueError unless
    finite and >= 0."""
    check_static(fn, arg, value, position)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{fn}: {arg}: expected a Python float >= 0, got {type(value).__name__}")
    try:
        out = float(value)
    except OverflowError:
        raise ValueError(f"{fn}: {arg}: expected a finite float >= 0, got an int beyond the float64 range") from None
    if not (math.isfinite(out) and out >= 0):
        raise ValueError(f"{fn}: {arg}: expected a finite float >= 0, got {out}")
    return out
