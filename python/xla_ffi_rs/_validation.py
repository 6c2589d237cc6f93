"""Argument checks that run while tracing, before anything is lowered.

What the public functions check of a Python argument before it is an array
(an op's dtypes and shapes are its handler's checks, run by the op itself).
Each message names the function, the argument, what was expected and what was
got, and a value that must be static but is traced says how to make it static.

Example:
    >>> check_nonnegative_float("rms_norm", "eps", -1.0, position=2)
    Traceback (most recent call last):
    ...
    ValueError: rms_norm: eps: expected a finite float >= 0, got -1.0
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from xla_ffi_rs import _native
from xla_ffi_rs._compat import Tracer, strongly_typed, weakly_typed

#: The floating dtypes a normalization (and its kernels) computes in: the float
#: ops' own list (``xla_ffi::DataType::FLOATS``, what their buffers accept).
KERNEL_FLOATS: tuple[str, ...] = tuple(_native.kernel_floats())

#: The floats the functions compute with (float16 and bfloat16 in float32), the
#: kernels' list; float8_e5m2, the one float8 of NumPy kind "f", is refused like the others.
_FLOATS_TAKEN = tuple(jnp.dtype(t) for t in KERNEL_FLOATS)
_FLOATS_LISTED = ", ".join(KERNEL_FLOATS[:-1]) + " or " + KERNEL_FLOATS[-1]


def check_real_or_integer(fn: str, arg: str, dtype: Any) -> None:
    """Raise TypeError for dtypes that are neither real floats nor integers (bool included),
    and for the ml_dtypes the functions have no kernel for (float8, int4: JAX does not
    promote them with the others); the message lists the dtypes taken."""
    dtype = jnp.dtype(dtype)
    if dtype.kind not in "iu" and dtype not in _FLOATS_TAKEN:
        raise TypeError(
            f"{fn}: {arg}: expected a real (integer or floating) dtype: integers (int8 to int64, uint8 to "
            f"uint64) or {_FLOATS_LISTED}, got {dtype.name}"
        )


def _element_types(array: np.ndarray) -> str:
    names = sorted({type(v).__name__ for v in array.ravel()[:1000]}) if array.dtype.kind == "O" else []
    if names:
        return "objects (" + " or ".join(names) + ")"
    return dtype_word(array.dtype)


def counted(n: int, noun: str) -> str:
    """``"1 operand"``, ``"2 operands"``: a count with its noun, singular for one."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def dtype_word(dtype: np.dtype) -> str:
    """``dtype``'s name as an error message says it: NumPy's, except for strings,
    whose names count bits of the longest one (``str1024``, ``bytes40``) and read as
    if they were types of their own."""
    return {"U": "str", "S": "bytes"}.get(dtype.kind, dtype.name)


def _not_a_jax_dtype(dtype: np.dtype) -> bool:
    """NumPy's extended precision (``longdouble``, ``clongdouble`` where they are wider
    than float64 and complex128): numeric, but JAX has no such dtype."""
    return dtype.kind in "fc" and dtype.itemsize > (8 if dtype.kind == "f" else 16)


def _is_ml_dtype(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is one of JAX's numeric dtypes from ml_dtypes (bfloat16, the
    float8 and float4 families, int4, ...), NumPy kind "V": the callers' own dtype
    checks then name it as the float or integer it is."""
    try:
        return bool(jnp.issubdtype(dtype, np.number)) and jnp.dtype(dtype) == dtype
    except TypeError:
        return False


#: What a NumPy masked array is called where one is refused: JAX refuses it (under
#: ``jit`` too), and reading its data alone would drop the mask without a word.
MASKED = (
    "a NumPy masked array, which JAX does not take (its mask would be lost): pass x.filled(fill) "
    "(NaN, say) or np.asarray(x)"
)


def array_like(fn: str, arg: str, value: Any, expected: str) -> Any:
    """``value`` checked to be a numeric array-like: a JAX or NumPy array or
    scalar of a numeric dtype, a Python number, or a (nested) sequence of them;
    a sequence is returned as a NumPy array (so that ``jnp.result_type`` can
    read its dtype), anything else unchanged.

    A Python int beyond JAX's default integer type (int32, int64 with x64) is
    returned as a Python float: the callers compute in floats.

    Raises TypeError (ValueError for a Python int beyond float64) naming ``fn``
    and ``arg`` otherwise. The dtype itself (e.g. complex where reals are needed)
    is checked by the caller; this catches what ``jnp.asarray`` would reject with
    a message that names neither (``data type '.0' not understood``,
    ``OverflowError``, ...).
    """
    if isinstance(value, jax.Array) or hasattr(value, "__jax_array__"):
        dtype = getattr(value, "dtype", None)
        if dtype is not None and jnp.issubdtype(dtype, jax.dtypes.extended):
            raise TypeError(
                f"{fn}: {arg}: expected {expected}, got an array of {dtype} (a PRNG key: pass numbers, "
                "e.g. jax.random.uniform(key, shape))"
            )
        return value
    if isinstance(value, np.ma.MaskedArray):
        raise TypeError(f"{fn}: {arg}: expected {expected}, got {MASKED}")
    if isinstance(value, (np.ndarray, np.generic)):
        if not value.dtype.isnative:
            # A FITS file's arrays, say: JAX refuses them naming no function (and a
            # jitted function's fast path has read their bytes as native ones).
            raise TypeError(f"{fn}: {arg}: expected {expected}, got an array of {_non_native(value.dtype)}")
        if value.dtype.kind not in "biufc" and not _is_ml_dtype(value.dtype):
            raise TypeError(f"{fn}: {arg}: expected {expected}, got an array of {_element_types(np.asarray(value))}")
        if _not_a_jax_dtype(value.dtype):
            raise TypeError(
                f"{fn}: {arg}: expected {expected}, got an array of {value.dtype.name}, which JAX has no dtype "
                "for (convert it, to float64 say)"
            )
        return value
    if isinstance(value, (bool, float, complex)):
        return value
    if isinstance(value, int):
        try:
            float(value)
        except OverflowError:
            raise ValueError(f"{fn}: {arg}: expected {expected}, got an int beyond the float64 range") from None
        bits = 64 if jax.config.jax_enable_x64 else 32
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            # Beyond JAX's default int type (jnp.asarray raises OverflowError); every
            # caller computes in floats, and a Python float is as weakly typed.
            return float(value)
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
    if array.dtype.kind not in "biufc" or _not_a_jax_dtype(array.dtype):
        what = f"a {type(value).__name__} of {_element_types(array)}" if array.ndim else type(value).__name__
        raise TypeError(f"{fn}: {arg}: expected {expected}, got {what}")
    if not array.dtype.isnative:  # a list of such arrays: the same words as for one
        raise TypeError(f"{fn}: {arg}: expected {expected}, got a {type(value).__name__} of {_non_native(array.dtype)}")
    return array


def _non_native(dtype: np.dtype) -> str:
    return (
        f"{dtype.name} in non-native byte order ({dtype.str}), which JAX does not read "
        "(pass x.astype(x.dtype.newbyteorder('=')))"
    )


def check_kernel_float(fn: str, arg: str, dtype: Any) -> None:
    """Raise TypeError for a floating dtype the kernels have no loop for (the
    float8 and float4 families) or one packed below a byte (``int4``, ...): JAX's
    own promotion would otherwise refuse it first, naming neither ``fn`` nor
    ``arg``. Other dtypes are left to the op's handler checks."""
    d = jnp.dtype(dtype)
    if (jnp.issubdtype(d, jnp.floating) and d.name not in KERNEL_FLOATS) or jax.dtypes.itemsize_bits(d) < 8:
        raise TypeError(f"{fn}: {arg}: expected a float array of {_FLOATS_LISTED}, got {d.name}")


def check_eps_fits(fn: str, eps: float, x_dtype: Any, weight_dtype: Any) -> None:
    """Raise ValueError if the rms_norm handlers would refuse ``eps`` for ``x`` and
    ``weight`` of these dtypes: beyond the largest finite value of the type the
    rows accumulate in (float32, or float64 when either is float64), where the
    kernel would add it as infinity and give 0 where the formula gives a finite
    value. The rule and its words are the handlers' (``_native.eps_problem``)."""
    problem = _native.eps_problem(eps, jnp.dtype(x_dtype).name, jnp.dtype(weight_dtype).name)
    if problem is not None:
        raise ValueError(f"{fn}: eps: {problem}")


def promote_weak(*arrays: jax.Array) -> tuple[jax.Array, ...]:
    """``arrays`` with the weakly typed ones (from Python scalars) converted to
    ``jnp.result_type(*arrays)``, strongly typed, when that is a float dtype, so that
    a kernel that promotes by dtype alone gives JAX's result dtype: ``x`` float16
    with a weight ``1.0`` is float16, under x64 on or off, as ``x * 1.0`` is. The
    conversion is made even where the dtype is already right: its transpose gives
    the cotangent back weakly typed, so ``jax.grad`` with respect to a Python float
    is weakly typed, as jnp's is (the kernels' results are not). Without a weakly
    typed one nothing is promoted here (the op's dtype rule decides), so a
    bfloat16 weight with a float32 ``x`` is valid under
    ``jax_numpy_dtype_promotion="strict"`` too."""
    if not any(jax.typeof(a).weak_type for a in arrays):
        return arrays
    dtype = jnp.result_type(*arrays)
    if not jnp.issubdtype(dtype, jnp.floating):
        return arrays
    return tuple(strongly_typed(a, dtype) if jax.typeof(a).weak_type else a for a in arrays)


def is_weak(value: Any) -> bool:
    """Whether ``value`` (an argument as the caller gave it) is weakly typed: a
    Python int or float, or a JAX array (or tracer) made from one."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return True
    return isinstance(value, jax.Array) and jax.typeof(value).weak_type


def weak_if_all_weak(inputs: tuple[Any, ...], results: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
    """``results`` weakly typed when every one of ``inputs`` is (Python scalars, or
    arrays made from them), as jnp's elementwise functions type theirs: then
    ``kepler(1.0, 0.3)[0] * x_f16`` stays float16, as ``jnp.sin(1.0) * x_f16`` does."""
    if all(is_weak(v) for v in inputs):
        return tuple(weakly_typed(r) for r in results)
    return results


#: How to make a traced keyword parameter static, for the TypeErrors of the ops
#: (rms_norm's eps, a binding op's attribute, a python_op's parameter): jax.pmap
#: has no static_argnames, only positional static_broadcasted_argnums.
STATIC_UNDER_PMAP = "under jax.pmap, pass it positionally with static_broadcasted_argnums"


def traced_attribute(where: str, what: str) -> TypeError:
    """The TypeError for an attribute of a ``binding`` op given a tracer (``where``
    names the target and attribute, ``what`` the tracer): how to make it static."""
    return TypeError(
        f"{where} is traced ({what}); it must be a Python value known when tracing "
        f"(a static argument under jax.jit; {STATIC_UNDER_PMAP}), or close over it"
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
            f"jax.jit(xr.{fn}, static_argnames='{arg}') (or static_argnums={position}); {STATIC_UNDER_PMAP}: "
            f"jax.pmap(xr.{fn}, static_broadcasted_argnums={position}); or close over it: "
            f"jax.jit(lambda *a: xr.{fn}(*a, {arg}={arg})); in a flax or equinox module, hold it as a Python "
            f"float (equinox's filter_jit and filter_grad trace NumPy scalars and arrays, and flax's nnx.jit "
            f"traces array attributes); derivatives with respect to {arg} are not supported"
        )


def _scalar_of_0d_array(value: Any) -> Any:
    """The Python number of a concrete 0-d real array or scalar (NumPy's or JAX's, not
    traced: a known value, as a module's attribute can be, bfloat16 included), else
    ``value`` unchanged (other shapes and dtypes are refused by the caller)."""
    if isinstance(value, (np.ndarray, np.generic, jax.Array)) and not isinstance(value, Tracer) and value.ndim == 0:
        if jnp.issubdtype(value.dtype, jnp.floating):
            return float(value)
        if jnp.issubdtype(value.dtype, jnp.integer):
            return int(value)
    return value


def check_nonnegative_float(fn: str, arg: str, value: Any, position: int) -> float:
    """Return ``value`` as a float; TypeError if traced (with how to make it
    static, see :func:`check_static`) or not a real number, ValueError unless
    finite and >= 0."""
    check_static(fn, arg, value, position)
    value = _scalar_of_0d_array(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{fn}: {arg}: expected a Python float >= 0, got {type(value).__name__}")
    try:
        out = float(value)
    except OverflowError:
        raise ValueError(f"{fn}: {arg}: expected a finite float >= 0, got an int beyond the float64 range") from None
    if not (math.isfinite(out) and out >= 0):
        raise ValueError(f"{fn}: {arg}: expected a finite float >= 0, got {out}")
    return out
