"""The kernels' dtype rules, read from the native module (``crates/ops/src/promote.rs``).

For two float dtypes ``(x, w)``, the table gives ``jnp.result_type(x, w)`` and the
accumulation dtype the kernels compute in (float64 if either is, else float32).
Abstract evaluation and the jnp reference formulas read it here, so Python and
Rust share one source; the tests check it against ``jnp.result_type``.

Example:
    >>> import jax.numpy as jnp
    >>> from xla_ffi_rs.dtypes import accumulation_dtype, result_dtype
    >>> str(result_dtype(jnp.float16, jnp.bfloat16)), str(accumulation_dtype(jnp.bfloat16, jnp.float32))
    ('float32', 'float32')
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from xla_ffi_rs import _native

__all__ = ["PROMOTION", "accumulation_dtype", "result_dtype"]

#: (x, w) -> (result dtype, accumulation dtype), for every pair of float dtypes.
PROMOTION: dict[tuple[np.dtype, np.dtype], tuple[np.dtype, np.dtype]] = {
    (jnp.dtype(x), jnp.dtype(w)): (jnp.dtype(y), jnp.dtype(acc)) for x, w, y, acc in _native.promotion_table()
}


def _dtype(fn: str, arg: str, value: Any) -> np.dtype:
    floats = ", ".join(sorted({str(d) for d, _ in PROMOTION}))
    # None would be NumPy's default float64, read as if it were a dtype given.
    try:
        if value is None:
            raise TypeError
        dtype: np.dtype = jnp.dtype(value)
        return dtype
    except (TypeError, ValueError):
        raise TypeError(f"{fn}: {arg}: expected a float dtype ({floats}), got {value!r:.80}") from None


def _row(fn: str, x: Any, w: Any) -> tuple[np.dtype, np.dtype]:
    key = (_dtype(fn, "x", x), _dtype(fn, "w", w))
    try:
        return PROMOTION[key]
    except KeyError:
        floats = sorted({str(d) for d, _ in PROMOTION})
        raise TypeError(
            f"{fn}: no float promotion for dtypes {key[0]} and {key[1]}; expected one of {floats}"
        ) from None


def result_dtype(x: Any, w: Any) -> np.dtype:
    """The dtype of ``y`` for float dtypes ``x`` and ``w`` (``jnp.result_type``).

    Raises:
        TypeError: if ``x`` or ``w`` is not float16, bfloat16, float32 or float64.
    """
    return _row("result_dtype", x, w)[0]


def accumulation_dtype(x: Any, w: Any) -> np.dtype:
    """The dtype the kernels accumulate in: float64 if ``x`` or ``w`` is, else float32.

    Raises:
        TypeError: if ``x`` or ``w`` is not float16, bfloat16, float32 or float64.
    """
    return _row("accumulation_dtype", x, w)[1]
