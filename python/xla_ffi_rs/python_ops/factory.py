"""The function :func:`python_op` (``xla_ffi_rs.python_op``), which makes a
:class:`~xla_ffi_rs.python_ops.PythonOp` from a function and its rules, the same op
for the same arguments while it lives, and :func:`registered_functions`.

Example:
    >>> registered_functions() >= 0
    True
"""

from __future__ import annotations

import atexit
import functools
import os
import weakref
from collections.abc import Callable, Sequence
from typing import Any, cast, overload

import jax

from xla_ffi_rs import _native
from xla_ffi_rs.binding import BatchRule, Op
from xla_ffi_rs.binding.op_arguments import check_name, flags
from xla_ffi_rs.python_ops import rules
from xla_ffi_rs.python_ops.op_class import AbstractEvalFn, PythonOp

__all__ = ["pooled_bytes", "python_op", "registered_functions"]


#: python_op's arguments -> the op made from them, while it lives.
_ops: weakref.WeakValueDictionary[tuple[Any, ...], PythonOp] = weakref.WeakValueDictionary()


def _close_at_exit() -> None:
    """At exit, before the interpreter finalizes: first wait for the programs with
    side effects still running (``has_side_effect=True`` ops, ``io_callback``), as
    JAX's own exit handler does, so that their calls run; then later calls fail
    without calling Python, and the running ones (of programs on other devices the
    caller never waited for) finish first (a thread entering Python while it
    finalized aborted the process). Closing first made a pending effectful call
    fail with ``UNAVAILABLE`` (its function never ran), reported at exit by JAX's
    handler. An effect that failed is raised here (and printed by ``atexit``), as
    JAX's handler does."""
    try:
        jax.effects_barrier()
    finally:
        _native.close()


# Registered after jax's own exit handlers, so it runs before them.
atexit.register(_close_at_exit)
# In a child made by `os.fork()` only the forking thread runs: the calls running on
# the parent's other threads are not running there, and must not be waited for at exit.
if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_native.forked)


@overload
def python_op(
    fn: Callable[..., Any],
    *,
    abstract_eval: AbstractEvalFn,
    jvp: Callable[..., Any] | None = None,
    transpose: Callable[..., Any] | None = None,
    batching: BatchRule | None = None,
    vectorized: bool = False,
    takes_outputs: bool = False,
    num_batch_dims: int | None = None,
    batched: tuple[Sequence[bool], Sequence[bool]] | None = None,
    fixed: rules.FixedIndices = (),
    name: str | None = None,
    has_side_effect: bool = False,
) -> PythonOp: ...


@overload
def python_op(
    fn: None = None,
    *,
    abstract_eval: AbstractEvalFn,
    jvp: Callable[..., Any] | None = None,
    transpose: Callable[..., Any] | None = None,
    batching: BatchRule | None = None,
    vectorized: bool = False,
    takes_outputs: bool = False,
    num_batch_dims: int | None = None,
    batched: tuple[Sequence[bool], Sequence[bool]] | None = None,
    fixed: rules.FixedIndices = (),
    name: str | None = None,
    has_side_effect: bool = False,
) -> Callable[[Callable[..., Any]], PythonOp]: ...


def python_op(
    fn: Callable[..., Any] | None = None,
    *,
    abstract_eval: AbstractEvalFn,
    jvp: Callable[..., Any] | None = None,
    transpose: Callable[..., Any] | None = None,
    batching: BatchRule | None = None,
    vectorized: bool = False,
    takes_outputs: bool = False,
    num_batch_dims: int | None = None,
    batched: tuple[Sequence[bool], Sequence[bool]] | None = None,
    fixed: rules.FixedIndices = (),
    name: str | None = None,
    has_side_effect: bool = False,
) -> PythonOp | Callable[[Callable[..., Any]], PythonOp]:
    """Make a JAX operation that runs the Python function ``fn`` on CPU.

    Also a decorator: ``@python_op(abstract_eval=...)`` above ``def fn(...)``.

    Args:
      fn: ``fn(*arrays, **params)`` on NumPy arrays (read-only copies of the
        operands, which it may keep), returning one array or a tuple, of exactly the shapes and
        dtypes ``abstract_eval`` gives. With ``takes_outputs=True`` it is
        ``fn(*arrays, *outputs, **params)`` instead: it fills the (uninitialised)
        writable output arrays and returns ``None`` (or the output arrays, as
        ``np.sin(x, out=out)`` does).
      abstract_eval: ``(*avals, **params) -> aval or tuple of avals``: the
        results' shapes and dtypes (anything with ``.shape`` and ``.dtype``).
      jvp: ``(primals, tangents, **params) -> (out, tangent_out)`` in jax code;
        a tangent JAX knows to be zero is ``None`` (see :meth:`PythonOp.def_jvp_rule`).
      transpose: ``(cotangents, *operands, **params) -> cotangent per operand``
        for an op linear in some operands, ``None`` for a zero cotangent (see
        :meth:`PythonOp.def_transpose_rule`).
      batching: a :class:`~xla_ffi_rs.binding.BatchRule` replacing the default.
      vectorized: ``fn`` accepts leading batch axes on every operand and returns
        them on every result, so ``vmap`` makes one call; otherwise one call per
        batch element.
      takes_outputs: pass writable output arrays to ``fn``, whose contents are
        copied into the results when it returns.
      num_batch_dims: the number of leading axes ``fn`` treats independently;
        enables per-shard execution under sharding.
      batched: ``(operands, results)`` flags: which carry those batch axes
        (default: all). Every flagged operand and result must have the same
        ``num_batch_dims`` leading axes (else ``ValueError`` at the call): a
        weight ``(H,)`` beside ``x`` ``(T, H)`` is declared unbatched.
      fixed: indices of operands that are not differentiable (a grid, a
        configuration): a non-zero tangent for one, or transposing with respect to
        one, raises ``ValueError`` naming the op and the operand (the rules never
        see a tangent for it: it is ``None``).
      name: the primitive's name (default ``python_op[<fn's qualified name>]``).
      has_side_effect: ``fn`` has effects beyond its results (it counts, logs,
        writes a file), as ``jax.ffi.ffi_call``'s argument of the same name and
        ``jax.experimental.io_callback`` (unordered) say: under ``jit`` every
        call runs, also one whose results are unused, and two identical calls
        are not merged into one. Without it ``fn`` is taken to be pure (see
        "A pure function" in ``docs/python_op.md``). It does not order the
        calls (use ``io_callback(..., ordered=True)`` for that).

    Calling ``python_op`` again with the same arguments returns the same op (while
    it lives: see "Lifetime" in :mod:`xla_ffi_rs.python_ops`).

    Example:
        >>> import jax
        >>> from xla_ffi_rs import python_op
        >>> @python_op(abstract_eval=lambda x: x, vectorized=True)
        ... def cube(x):
        ...     return x**3
        >>> @cube.def_jvp_rule
        ... def _(primals, tangents):
        ...     (x,), (t,) = primals, tangents
        ...     return cube(x), 3 * x**2 * t
        >>> float(jax.jit(jax.grad(cube))(2.0))
        12.0
    """
    if fn is None:
        decorator = functools.partial(
            python_op,
            abstract_eval=abstract_eval,
            jvp=jvp,
            transpose=transpose,
            batching=batching,
            vectorized=vectorized,
            takes_outputs=takes_outputs,
            num_batch_dims=num_batch_dims,
            batched=batched,
            fixed=fixed,
            name=name,
            has_side_effect=has_side_effect,
        )
        return cast("Callable[[Callable[..., Any]], PythonOp]", decorator)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"python_op: name must be a str, got {type(name).__name__}")
    if name:
        check_name("python_op", name)
    if batched is not None:
        batched = flags("python_op", batched)
    name = name or f"python_op[{getattr(fn, '__qualname__', None) or getattr(fn, '__name__', type(fn).__name__)}]"
    frozen_batched = None if batched is None else (tuple(batched[0]), tuple(batched[1]))
    fixed_ = rules.fixed_indices("python_op", fixed)
    cache_key = (
        fn,
        abstract_eval,
        jvp,
        transpose,
        batching,
        vectorized,
        takes_outputs,
        num_batch_dims,
        frozen_batched,
        fixed_,
        name,
        has_side_effect,
    )
    memoize = True
    try:
        hit = _ops.get(cache_key)
    except TypeError:  # an unhashable argument: no memoization
        memoize, hit = False, None
    if hit is not None:
        return hit
    op = PythonOp(
        fn,
        abstract_eval=abstract_eval,
        name=name,
        vectorized=vectorized,
        takes_outputs=takes_outputs,
        num_batch_dims=num_batch_dims,
        batched=frozen_batched,
        fixed=fixed_,
        has_side_effect=has_side_effect,
    )
    if jvp is not None:
        op.def_jvp_rule(jvp)
    if transpose is not None:
        op.def_transpose_rule(transpose)
    if batching is not None:
        op.def_batching(batching)
    if memoize:
        _ops[cache_key] = op
        op._forget_memo = functools.partial(_forget, cache_key)
    return op


def _forget(key: tuple[Any, ...], op: Op) -> None:
    """Take ``op`` out of the memo (a rule of the user's was defined on it)."""
    if _ops.get(key) is op:
        del _ops[key]


def registered_functions() -> int:
    """How many Python functions the ``xla_ffi_rs.python_call`` registry holds now:
    one per (op, static parameters) that has been lowered, taken out when its op is
    freed (a compiled program keeps the functions it calls until it is freed
    itself). Leak checks compare it before and after.

    >>> registered_functions() >= 0
    True
    """
    return _native.registered()


def pooled_bytes() -> int:
    """How many bytes the ``xla_ffi_rs.python_call`` handler keeps for reuse now: the
    copies of operands and outputs of 128 KiB or more that calls gave back (at most
    256 MiB in all), dropped with the op whose call made them. Leak checks compare
    it before and after.

    >>> pooled_bytes() >= 0
    True
    """
    return _native.pooled_bytes()
