"""What a python op's operands and results may be, checked when the op is traced:
shapes of non-negative ints that fit an XLA array, bool or numeric dtypes of at
least one byte (no PRNG keys), no 64-bit results while ``jax_enable_x64`` is off,
and the batch axes ``num_batch_dims=`` promises. Each error names the op and the
operand or result; without these checks it would come later, from MLIR or XLA,
naming neither.

Example:
    >>> import numpy as np, jax
    >>> result_dtype("f", 0, jax.ShapeDtypeStruct((2,), np.float32))
    dtype('float32')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["check_batch_axes", "check_operand_dtype", "check_result_size", "result_dtype", "result_shape", "sub_byte"]


def result_shape(name: str, i: int, aval: Any) -> tuple[Any, ...]:
    """The shape of ``abstract_eval``'s result ``i``, checked: a negative, float, bool
    or None dimension would otherwise fail later in MLIR or XLA, naming neither the op
    nor the result. Dimensions that are not ints (symbolic ones) are left to JAX."""
    shape = aval.shape
    dims: tuple[Any, ...] | None
    try:
        dims = tuple(shape)
    except TypeError:
        dims = None
    bad = dims is None or any(d is None or isinstance(d, (bool, np.bool_, float, np.floating, str)) for d in dims)
    if bad or any(isinstance(d, (int, np.integer)) and d < 0 for d in dims or ()):
        raise (TypeError if bad else ValueError)(
            f"{name}: abstract_eval result {i}: expected a shape of non-negative ints, got {shape!r}"
        )
    return dims or ()


#: The most bytes one XLA array may hold (its sizes are signed 64-bit).
_MAX_BYTES = 2**63 - 1


def check_result_size(name: str, i: int, dims: tuple[Any, ...], dtype: np.dtype[Any]) -> None:
    """ValueError naming the op and result ``i`` if its ``dims`` hold more bytes than
    an XLA array can (jaxlib 0.10 aborts the process on such a shape)."""
    if not all(isinstance(d, (int, np.integer)) for d in dims):
        return
    elems = math.prod(int(d) for d in dims)
    if elems * dtype.itemsize > _MAX_BYTES:
        raise ValueError(
            f"{name}: abstract_eval result {i}: a shape of {elems} {dtype.name} elements ({tuple(dims)}) holds more "
            f"than the {_MAX_BYTES} bytes an XLA array can"
        )


def sub_byte(dtype: Any) -> bool:
    """Whether ``dtype`` packs its elements below one byte in XLA (``int4``,
    ``uint2``, ``float4_e2m1fn``, ...): NumPy has no array of them, so the handler
    cannot pass or take one."""
    return int(jax.dtypes.itemsize_bits(dtype)) < 8


def check_operand_dtype(name: str, i: int, aval: Any) -> None:
    """Raise TypeError naming the op and operand ``i`` if its dtype cannot reach the
    function as a NumPy array: a sub-byte dtype (the handler would refuse it when
    the op runs) or an extended one, such as a PRNG key (the function would get its
    raw ``uint32`` words, with a shape ``abstract_eval`` did not see)."""
    dtype = aval.dtype
    if jnp.issubdtype(dtype, jax.dtypes.extended):
        raise TypeError(
            f"{name}: operand {i}: expected a bool or numeric dtype, got {dtype} "
            "(pass a PRNG key's words: jax.random.key_data(key))"
        )
    if sub_byte(dtype):
        raise TypeError(
            f"{name}: operand {i}: python_op does not support {np.dtype(dtype).name}, whose elements are packed "
            "below one byte (no NumPy array holds them); cast it to a dtype of one byte or more"
        )


def result_dtype(name: str, i: int, aval: Any) -> np.dtype[Any]:
    """The dtype of ``abstract_eval``'s result ``i``, checked: bool or numeric (the
    ``ml_dtypes`` ones too) of at least one byte per element, and not 64-bit while
    ``jax_enable_x64`` is off (no JAX array is then; ``jax.pure_callback``, the
    lowering off CPU, refuses it too)."""
    dtype: np.dtype[Any] | None
    try:
        dtype = np.dtype(aval.dtype)
    except TypeError:
        dtype = None
    if aval.dtype is None:  # NumPy's default float64, which was then refused as a 64-bit dtype
        dtype = None
    if dtype is None or not (jnp.issubdtype(dtype, np.number) or jnp.issubdtype(dtype, np.bool_)):
        got = repr(aval.dtype) if dtype is None else str(dtype)
        raise TypeError(f"{name}: abstract_eval result {i}: expected a bool or numeric dtype, got {got}")
    if sub_byte(dtype):
        raise TypeError(
            f"{name}: abstract_eval result {i}: python_op does not support {dtype.name}, whose elements are "
            "packed below one byte (no NumPy array holds them); return a dtype of one byte or more"
        )
    if jax.dtypes.canonicalize_dtype(dtype) != dtype:
        raise ValueError(
            f"{name}: abstract_eval result {i}: expected a dtype without 64 bits while jax_enable_x64 is off, got "
            f"{dtype.name} (return {jax.dtypes.canonicalize_dtype(dtype).name}, or turn 64-bit types on: "
            "jax.config.update('jax_enable_x64', True))"
        )
    return dtype


def check_batch_axes(
    name: str,
    k: int,
    batched: tuple[Sequence[bool], Sequence[bool]] | None,
    operands: Sequence[tuple[int, ...]],
    results: Sequence[tuple[int, ...]],
) -> None:
    """With ``num_batch_dims=k``, every operand and result flagged batched (all of
    them without ``batched=``) must have the same ``k`` leading axes: under sharding
    XLA's batch partitioner splits the first ``k`` axes of each one like the batch
    axes, so a weight of shape ``(H,)`` next to ``x`` of shape ``(T, H)`` would be
    split along ``H`` (a wrong answer), and a value of rank below ``k`` fails in
    JAX's sharding rule, naming neither the op nor the value. ValueError naming the
    op and the value otherwise, on every call, sharded or not."""
    b_in, b_out = batched or ((True,) * len(operands), (True,) * len(results))
    values = [(f"operand {i}", s) for i, (s, b) in enumerate(zip(operands, b_in, strict=True)) if b]
    values += [(f"result {i}", s) for i, (s, b) in enumerate(zip(results, b_out, strict=True)) if b]
    if not values:
        return
    first, shape = values[0]
    if all(len(s) < k for _, s in values):
        # Nothing has batch axes: the batched= hint below would not help.
        raise ValueError(
            f"{name}: num_batch_dims={k}: {first} has shape {tuple(shape)}, of rank below {k}, and no value of the "
            "call has the batch axes: call the op on arrays with the batch axes in front (under vmap, "
            "vectorized=True makes one call with the vmap axes in front; without it the function is called per "
            "element)"
        )
    for what, s in values:
        if len(s) < k:
            problem = f"has shape {tuple(s)}, of rank below {k}"
        elif tuple(s[:k]) != tuple(shape[:k]):
            problem = f"has shape {tuple(s)}, whose first {k} axes are not the batch axes {tuple(shape[:k])} of {first}"
        else:
            continue
        raise ValueError(
            f"{name}: num_batch_dims={k}: {what} {problem}; every operand and result the function treats per "
            "batch element needs the batch axes in front, and the others must be declared: batched=(operand "
            "flags, result flags), e.g. batched=((True, False), (True,)) for a weight beside x"
        )
