"""What runs when XLA calls a Python op's function: the checks of what it returned
(one array per result, of the result's shape and dtype; Python scalars cast as JAX's
weak typing would), the error messages handed back to XLA, and the ufunc fast path
that writes straight into the output arrays.

:func:`invoker` makes the function the Rust handler calls for a registry key (the
hot path); the settlers check what a function the handler calls directly returned.
Everything here is called by :class:`~xla_ffi_rs.python_ops.PythonOp` and, through
it, by the Rust handler, never by users; it holds no state.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from xla_ffi_rs._validation import counted, dtype_word

#: XLA error codes the Python side reports (absl status codes).
UNKNOWN, INVALID_ARGUMENT = 2, 3
#: Traceback frames (of the user's code) kept in an error message.
_TRACEBACK_FRAMES = 3


def _describe(shape: Sequence[int], dtype: Any) -> str:
    return f"{dtype_word(np.dtype(dtype))}[{','.join(map(str, shape))}]"


def settler(name: str, single: bool) -> Callable[[int, Any, Any], tuple[int, Any]]:
    """What the handler calls when a directly called function (see
    :meth:`PythonOp._direct`) raised (``kind`` 1: ``value`` is the exception,
    ``extra`` is ``(specs, traceback)``) or returned something other than exactly
    the arrays XLA expects (``kind`` 0: ``value`` is what it returned, ``extra`` the
    specs): ``(0, arrays)`` or ``(error_code, message)``, as :func:`invoker`'s
    ``invoke`` returns."""

    def settle(kind: int, value: Any, extra: Any) -> tuple[int, Any]:
        try:
            if kind:
                return _raised(name, value, extra[1])
            specs = extra
            if single and len(specs) == 1:
                value = (value,)
            return checked(name, value, [s for s, _ in specs], specs)
        except BaseException as e:  # KeyboardInterrupt and SystemExit too: reported to XLA
            return UNKNOWN, exception_message(name, e)

    return settle


def _raised(name: str, exc: BaseException, tb: Any) -> tuple[int, str]:
    """A settler's answer for an exception the function raised: its message, with
    the traceback the handler caught attached where the exception has none."""
    if tb is not None and exc.__traceback__ is None:
        exc = exc.with_traceback(tb)
    return UNKNOWN, exception_message(name, exc, skip=0)


def outputs_settler(name: str) -> Callable[[int, Any, Any], tuple[int, Any]]:
    """:func:`settler` for a directly called function with ``takes_outputs=True``:
    ``extra`` is ``(specs, outs)`` (``((specs, outs), traceback)`` for an
    exception), and ``value`` what the function returned, which must be None or the
    output arrays; the outputs are then checked as :func:`invoker`'s ``invoke``
    checks them."""

    def settle(kind: int, value: Any, extra: Any) -> tuple[int, Any]:
        try:
            if kind:
                return _raised(name, value, extra[1])
            specs, outs = extra
            if value is not None and not are(value, outs):
                return INVALID_ARGUMENT, not_none(name, value)
            return checked(name, outs, [s for s, _ in specs], specs)
        except BaseException as e:  # KeyboardInterrupt and SystemExit too: reported to XLA
            return UNKNOWN, exception_message(name, e)

    return settle


def unwrapped(fn: Any) -> Any:
    """What calling ``fn`` without static parameters calls: the user's function
    inside the wrappers of :mod:`xla_ffi_rs.python_ops.roles` (``_xla_ffi_rs_plain``),
    else ``fn`` itself."""
    return getattr(fn, "_xla_ffi_rs_plain", fn)


def is_ufunc(fn: Any, params: dict[str, Any]) -> bool:
    """Whether ``fn`` is a NumPy ufunc called without parameters (run by
    :func:`ufunc_into` into output arrays when it can)."""
    return isinstance(fn, np.ufunc) and not params


#: Results smaller than this are computed by ``fn(*args)`` and copied: for them the
#: copy costs less than a ufunc call with ``out=`` and ``casting=`` keywords.
UFUNC_INTO_MIN_SIZE = 1 << 12


def ufunc_into(fn: np.ufunc, args: Sequence[np.ndarray], results: Sequence[np.ndarray]) -> bool:
    """Run an elementwise ufunc (NumPy's, SciPy's special functions) straight into the
    output arrays, with no allocation, when that gives exactly what ``fn(*args)``
    gives: every operand and result has the same shape and dtype and the ufunc has a
    loop for that dtype; and the results are large enough for it to matter.
    Returns whether it ran."""
    if results[0].size < UFUNC_INTO_MIN_SIZE or fn.nin != len(args) or fn.nout != len(results):
        return False
    shape, dtype = results[0].shape, results[0].dtype
    for a in (*args, *results):
        if a.shape != shape or (a.dtype is not dtype and a.dtype != dtype):
            return False
    try:
        fn(*args, out=tuple(results), casting="no")
    except TypeError:  # no loop for this dtype without a cast: the general path decides
        return False
    return True


def checked(
    name: str, values: Any, shapes: Sequence[tuple[int, ...]], specs: Sequence[tuple[tuple[int, ...], np.dtype]]
) -> tuple[int, Any]:
    """``(0, arrays)`` if ``values`` are one array per result of its shape and dtype,
    else ``(INVALID_ARGUMENT, message)``."""
    if not isinstance(values, (tuple, list)) or len(values) != len(specs):
        got = f"{len(values)} values" if isinstance(values, (tuple, list)) else f"a {type(values).__name__}"
        return INVALID_ARGUMENT, _text(
            f"op {name!r}: expected the function to return a tuple of {counted(len(specs), 'array')}, got {got}"
        )
    arrays = []
    for i, (value, shape, (_, dtype)) in enumerate(zip(values, shapes, specs, strict=True)):
        masked = _masked_count(value)
        if masked:
            return INVALID_ARGUMENT, _text(
                f"op {name!r}: result {i}: expected {_describe(shape, dtype)}, got a {_type_name(value)} with "
                f"{masked} masked element{'s' if masked > 1 else ''}, and an XLA array has no mask: return "
                "value.filled(fill) (NaN, say), or np.asarray(value) to keep the values under the mask"
            )
        arr = _weak_scalar(value, dtype)
        if arr is None:
            try:
                arr = np.asarray(value)
            except Exception as e:  # a ragged tuple, an __array__ that raises: what was returned is at fault
                return INVALID_ARGUMENT, _text(
                    f"op {name!r}: result {i}: expected {_describe(shape, dtype)}, got {_unreadable(value)}, which "
                    f"NumPy cannot read as one array ({_type_name(e)}: {_str(e)})"
                )
        if arr.dtype != dtype and arr.dtype.newbyteorder("=") == dtype:
            arr = arr.astype(dtype)  # the same values in the other byte order
        if arr.shape != tuple(shape) or arr.dtype != dtype:
            return INVALID_ARGUMENT, _text(
                f"op {name!r}: result {i}: expected {_describe(shape, dtype)}, got {_got(value, arr)}"
            )
        arrays.append(arr)
    return 0, arrays


def _masked_count(value: Any) -> int:
    """How many elements of a ``numpy.ma.MaskedArray`` are masked (0 for anything
    else): ``np.asarray`` would drop the mask and hand XLA the values under it."""
    if not isinstance(value, np.ma.MaskedArray):
        return 0
    try:
        return int(np.count_nonzero(np.ma.getmaskarray(value)))
    except Exception:  # a broken subclass: NumPy's reading of it decides below
        return 0


#: The NumPy dtype kinds a Python scalar of each type takes weakly (JAX's rules).
_WEAK_KINDS: dict[type, str] = {bool: "b", int: "iufc", float: "fc", complex: "c"}


def _weak_scalar(value: Any, dtype: np.dtype) -> np.ndarray | None:
    """A Python ``bool``, ``int``, ``float`` or ``complex`` as a 0-d array of the
    result's ``dtype`` where JAX's weak typing would take it there (an int into any
    numeric dtype it fits, a float into a floating or complex one, a complex into a
    complex one, a bool into bool), so that ``float(x.sum())`` answers a float32
    result with x64 off; else None (NumPy's own dtype decides, and the check reports
    a mismatch). The dtype is classified by NumPy's kind, and by JAX's hierarchy
    for ml_dtypes' (kind ``'V'``), so that bfloat16 and the float8 types are floats."""
    t = type(value)
    if t not in _WEAK_KINDS:
        return None
    kind = dtype.kind
    if kind == "V":  # ml_dtypes (bfloat16, float8): classified by JAX; NumPy's own kinds below, quicker
        kind = "f" if jnp.issubdtype(dtype, jnp.floating) else "i" if jnp.issubdtype(dtype, jnp.integer) else "V"
    fits = kind in _WEAK_KINDS[t]
    if not fits:
        return None
    try:
        with np.errstate(over="ignore"):  # a float past the dtype's range is inf, as in JAX
            return np.asarray(value, dtype=dtype)
    except OverflowError:  # an int the dtype cannot hold: reported as NumPy's dtype
        return None


def not_none(name: str, returned: Any) -> str:
    return _text(
        f"op {name!r}: with takes_outputs=True the function writes its results into the "
        f"output arrays and returns None (or the output arrays), but it returned {_type_name(returned)}"
    )


def _text(message: str) -> str:
    """``message`` as valid UTF-8 text (a lone surrogate becomes ``\\udcxx``)."""
    return message.encode("utf-8", "backslashreplace").decode("utf-8")


def _got(value: Any, arr: np.ndarray) -> str:
    """What a function returned for a result, as the error names it: the array's
    dtype and shape, and, for what is not an array or a number, what it was (``None``,
    a ``tuple`` of 2 values, a ``str``), since NumPy's reading of it (``object[]``,
    ``float32[2,3]``) alone would mislead."""
    got = _describe(arr.shape, arr.dtype)
    if value is None:
        return "None (did the function forget to return its result?)"
    if isinstance(value, (np.ndarray, np.generic, bool, int, float, complex)):
        return got
    if isinstance(value, (tuple, list)):
        return f"a {_type_name(value)} of {len(value)} values, as an array {got}"
    return f"a {_type_name(value)}, as an array {got}"


def _unreadable(value: Any) -> str:
    """What a function returned for a result that NumPy could not read, as the error
    names it: a ``tuple`` of 2 values, an ``object``."""
    if isinstance(value, (tuple, list)):
        return f"a {_type_name(value)} of {len(value)} values"
    return f"a {_type_name(value)}"


def _str(e: BaseException) -> str:
    try:
        return str(e)
    except BaseException:
        return "<exception str() failed>"


def _type_name(x: Any) -> str:
    try:
        return str(type(x).__name__)
    except BaseException:
        return "<unnamed type>"


#: The package's own files: their frames are not the user's.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _users(frames: list[traceback.FrameSummary]) -> list[traceback.FrameSummary]:
    """The user's ``frames``: without the package's own (the wrappers of
    :mod:`~xla_ffi_rs.python_ops.roles` around a ``linear_op``'s functions), as
    JAX's traceback filtering hides them; all of them under
    ``jax_traceback_filtering="off"``, or when none is the user's (an error of the
    package itself)."""
    if jax.config.jax_traceback_filtering == "off":
        return frames
    return [f for f in frames if not f.filename.startswith(_PACKAGE_DIR)] or frames


def exception_message(name: str, e: BaseException, skip: int = 1) -> str:
    """``op 'name' raised Kind: text`` and the last traceback frames of the user's
    code (after the ``skip`` frames of our own, without the package's), whatever the exception's
    ``__str__`` or class does."""
    text = _str(e)
    try:
        frames = _users(traceback.extract_tb(e.__traceback__)[skip:])  # drop invoke's own frame
        tail = "".join(traceback.format_list(frames[-_TRACEBACK_FRAMES:])).rstrip()
    except BaseException:
        frames, tail = [], ""
    message = f"op {name!r} raised {_type_name(e)}: {text}"
    if tail:
        message = f"{message}\nTraceback (last {min(len(frames), _TRACEBACK_FRAMES)} frames):\n{tail}"
    return _text(message)


def are(returned: Any, results: Sequence[np.ndarray]) -> bool:
    """Whether ``returned`` is the output array (``np.sin(x, out=o)`` returns ``o``) or
    the tuple of output arrays."""
    items = returned if isinstance(returned, (tuple, list)) else [returned]
    return len(items) == len(results) and all(a is b for a, b in zip(items, results, strict=True))


def logical(
    args: Sequence[np.ndarray],
    shapes: Sequence[tuple[int, ...]],
    ranks: Sequence[int],
    nbd: int,
    batched: tuple[Sequence[bool], Sequence[bool]] | None,
) -> tuple[Sequence[np.ndarray], Sequence[tuple[int, ...]]]:
    """The operands and result shapes as the function expects them under sharding.

    For XLA's batch partitioner, the lowering gives batched values extra unit axes
    right after their ``nbd`` batch axes (and a trailing one when they have no other
    axis), the same number for every batched value. An operand's rank at the call
    gives that number; the unit axes are dropped again (a free reshape)."""
    b_in, b_out = batched or ((True,) * len(args), (True,) * len(shapes))
    extra = next((a.ndim - r for a, r, b in zip(args, ranks, b_in, strict=True) if b and a.ndim != r), 0)
    if extra <= 0:
        return args, shapes

    def drop(s: tuple[int, ...]) -> tuple[int, ...]:
        return tuple(s[:nbd]) + tuple(s[nbd + extra :])

    return (
        [a.reshape(drop(a.shape)) if b else a for a, b in zip(args, b_in, strict=True)],
        [drop(s) if b else s for s, b in zip(shapes, b_out, strict=True)],
    )


def invoker(
    fn: Callable[..., Any],
    name: str,
    takes_outputs: bool,
    params: dict[str, Any],
    single: bool,
    nbd: int | None,
    batched: tuple[Sequence[bool], Sequence[bool]] | None,
    ranks: tuple[int, ...] | None,
) -> Callable[..., Any]:
    """The function the Rust handler calls, ``invoke(args, specs, outs)``: ``args``
    are read-only NumPy arrays holding copies of the operands, ``specs`` the
    results' ``(shape, dtype)``, ``outs`` (with ``takes_outputs``) arrays of those
    to fill. It runs ``fn`` and returns ``(0, arrays)``, one array of
    exactly the result's shape and dtype per result, whose bytes the handler copies
    into XLA's buffers; or ``(error_code, message)``. It is the hot path, so it is
    one closure with everything it needs bound locally; it holds no reference to
    the op (the registry holds it, and must not keep the op alive). ``single``:
    whether ``fn`` returns one array, not a tuple; ``nbd`` and ``batched``: the
    call's batch layout, whose unit axes :func:`logical` drops where ``ranks``
    (the operands' ranks at the call) is given."""
    ndarray = np.ndarray
    bare = unwrapped(fn)
    ufunc = is_ufunc(bare, params) and not takes_outputs
    if ranks is None:
        nbd = None
    op_ranks: tuple[int, ...] = ranks or ()

    def invoke(
        args: Sequence[np.ndarray], specs: Sequence[tuple[tuple[int, ...], np.dtype]], outs: Sequence[np.ndarray]
    ) -> tuple[int, Any]:
        try:
            shapes: Sequence[tuple[int, ...]] = [s for s, _ in specs]
            if nbd is not None:
                args, shapes = logical(args, shapes, op_ranks, nbd, batched)
            if takes_outputs:
                outs = [o.reshape(s) for o, s in zip(outs, shapes, strict=True)]
                returned = fn(*args, *outs, **params)
                if returned is not None and not are(returned, outs):
                    return INVALID_ARGUMENT, not_none(name, returned)
                return checked(name, outs, shapes, specs)
            if ufunc and outs:
                outs = [o.reshape(s) for o, s in zip(outs, shapes, strict=True)]
                if ufunc_into(bare, args, outs):
                    return 0, outs
            returned = fn(*args, **params)
            if single and len(specs) == 1:
                d = specs[0][1]
                if type(returned) is ndarray and returned.dtype is d and returned.shape == shapes[0]:
                    return 0, (returned,)
                returned = (returned,)
            return checked(name, returned, shapes, specs)
        except BaseException as e:  # KeyboardInterrupt and SystemExit too: reported to XLA
            return UNKNOWN, exception_message(name, e)

    return invoke
