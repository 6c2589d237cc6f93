"""The check of an op's operands that are not JAX arrays, before they are bound.

JAX reads a NumPy array, NumPy scalar or Python number passed to an op, and refuses
anything else with words that name neither the op nor the operand (``Dtype object
is not a valid JAX array type``, ``Argument 'None' ... is not a valid JAX type``,
an ``OverflowError`` for a Python int beyond the default integer type). An
:class:`~xla_ffi_rs.binding.Op` (declared or by hand) and a python op check such
operands first, so that the error names the op, the operand, what was expected and
what was got.

Example:
    >>> import numpy as np
    >>> check_operands("my_op", ("x",), (np.array([1.0, None]),))
    Traceback (most recent call last):
    ...
    TypeError: my_op: operand 0 (x): expected a numeric array (a JAX or NumPy array, a NumPy scalar or a Python number), got an array of objects (NoneType or float)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from xla_ffi_rs._compat import Tracer
from xla_ffi_rs._validation import MASKED

__all__ = ["check_operands"]

EXPECTED = "a numeric array (a JAX or NumPy array, a NumPy scalar or a Python number)"


def _got(value: Any) -> str:
    if isinstance(value, (np.ndarray, np.generic)):
        if value.dtype.kind == "O":
            kinds = sorted({type(v).__name__ for v in np.asarray(value).ravel()[:1000]})
            return "an array of objects (" + " or ".join(kinds) + ")" if kinds else "an empty array of objects"
        if not value.dtype.isnative:
            # A FITS file's arrays, say: the dtype is JAX's, the byte order is not.
            return (
                f"an array of {value.dtype.name} in non-native byte order ({value.dtype.str}), which JAX does not "
                "read (pass x.astype(x.dtype.newbyteorder('=')))"
            )
        return f"an array of {value.dtype.name}, which JAX has no dtype for"
    if isinstance(value, (list, tuple)):
        return f"a {type(value).__name__} (pass np.asarray(...) or jnp.asarray(...) of it)"
    return type(value).__name__


def check_operands(label: str, names: Sequence[str], operands: Sequence[Any]) -> None:
    """TypeError (ValueError for a Python int beyond JAX's default integer type)
    naming ``label`` and the operand for an operand that is not a JAX array and that
    JAX cannot read as one; JAX arrays, tracers and objects with ``__jax_array__``
    pass unchecked (their dtypes are the op's own checks)."""
    for i, x in enumerate(operands):
        if isinstance(x, (jax.Array, Tracer)) or hasattr(x, "__jax_array__"):
            continue
        which = f"operand {i} ({names[i]})" if i < len(names) else f"operand {i}"
        if isinstance(x, np.ma.MaskedArray):
            # JAX refuses it with words that name no op (and a 0-d one it reads, dropping the mask).
            raise TypeError(f"{label}: {which}: expected {EXPECTED}, got {MASKED}")
        if isinstance(x, jax.ShapeDtypeStruct):
            # jax.typeof reads it, so JAX's own refusal came later, naming no op.
            shape = ",".join(str(d) for d in x.shape)
            raise TypeError(
                f"{label}: {which}: expected {EXPECTED}, got a jax.ShapeDtypeStruct {np.dtype(x.dtype).name}[{shape}], "
                "a shape and dtype without values (jax.eval_shape takes it, to compute result shapes)"
            )
        try:
            jax.typeof(x)
        except OverflowError:
            raise ValueError(
                f"{label}: {which}: expected {EXPECTED}, got the Python int {x}, beyond JAX's default integer "
                "type; pass it as a float or as a NumPy array of a dtype that holds it"
            ) from None
        except TypeError:
            raise TypeError(f"{label}: {which}: expected {EXPECTED}, got {_got(x)}") from None
