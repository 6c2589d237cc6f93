"""The JVP and transpose rules of :class:`~xla_ffi_rs.python_ops.PythonOp`: symbolic zeros
and fixed operands.

A rule given to :meth:`PythonOp.def_jvp_rule` or :meth:`PythonOp.def_transpose_rule`
sees ``None`` for each tangent or cotangent that JAX knows to be zero (an operand
that is not differentiated, a result whose cotangent does not matter), so it can
skip the work, and may return ``None`` for a zero tangent or cotangent itself. The
rules are registered in JAX's tables directly (not through
:meth:`xla_ffi_rs.binding.Op.def_jvp`, which instantiates zeros).

Operands declared ``fixed=`` are not differentiable: a non-zero tangent for one, or
transposing with respect to one, raises a ``ValueError`` naming the op and the
operand, before anything is lowered.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Any, SupportsIndex, TypeAlias

import jax
import jax.numpy as jnp
import numpy as np

from xla_ffi_rs._compat import ShapedArray, ad, eval_context
from xla_ffi_rs._validation import counted
from xla_ffi_rs.binding import is_linear_input
from xla_ffi_rs.binding.rule_results import check_tangent as check_output_tangent
from xla_ffi_rs.binding.rule_results import checked_cotangents as checked_cotangent_list


def is_zero(t: Any) -> bool:
    """Whether ``t`` is JAX's symbolic zero."""
    return type(t) is ad.Zero


def zero_like(x: Any) -> Any:
    """The symbolic zero tangent of a value like ``x``."""
    return ad.Zero(jax.typeof(x).to_tangent_aval())


def names_of(fn: Callable[..., Any]) -> list[str]:
    """The names of ``fn``'s positional parameters (for error messages)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return []
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return [p.name for p in params if p.kind in kinds]


def call_abstract(name: str, fn: Callable[..., Any], avals: Sequence[Any], params: dict[str, Any]) -> Any:
    """``fn(*avals, **params)``; a call ``fn``'s signature cannot take (too many or too
    few operands, a parameter it has no keyword for) raises TypeError naming the op and
    the call first. Errors raised inside ``fn`` are its own. ``fn`` runs on JAX's
    evaluation trace, so jnp code in it computes (on concrete values) under every
    JAX version and transformation."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        signature = None
    if signature is not None:
        try:
            signature.bind(*avals, **params)
        except TypeError as e:
            call = counted(len(avals), "operand") + (f", parameters {sorted(params)}" if params else "")
            raise TypeError(f"{name}: abstract_eval cannot take this call ({call}): {e}") from None
    with eval_context():
        return fn(*avals, **params)


def describe_operand(names: Sequence[str], i: int) -> str:
    return f"operand {i} ({names[i]})" if i < len(names) else f"operand {i}"


#: The type of ``fixed=``: operand indices as ints or NumPy integers, in a tuple, a
#: list or a NumPy array (``np.arange(2)``); the type checker refuses a bare int or
#: a name, as the function does at runtime.
FixedIndices: TypeAlias = Iterable[SupportsIndex]


def fixed_indices(what: str, fixed: Any) -> tuple[int, ...]:
    """``fixed=`` as sorted distinct non-negative operand indices: TypeError naming
    ``what`` for something that is not a sequence of ints (a name, a bool),
    ValueError for a negative or repeated index."""
    try:
        indices = tuple(fixed)
    except TypeError:
        raise TypeError(f"{what}: fixed must be a sequence of operand indices, got {fixed!r}") from None
    try:
        if isinstance(fixed, (str, bytes)) or any(isinstance(i, (bool, np.bool_)) for i in indices):
            raise TypeError
        indices = tuple(operator.index(i) for i in indices)  # ints, NumPy integers
    except TypeError:
        raise TypeError(f"{what}: fixed must hold operand indices (ints, not names), got {fixed!r}") from None
    if not all(i >= 0 for i in indices) or len(set(indices)) != len(indices):
        raise ValueError(f"{what}: fixed must hold distinct non-negative operand indices, got {fixed!r}")
    return tuple(sorted(indices))


def check_fixed(
    name: str, names: Sequence[str], fixed: Sequence[int], n: int, varying: Sequence[int], what: str
) -> None:
    """Raises ``ValueError`` if a fixed operand index is out of range for ``n``
    operands, or if one of the ``varying`` operands (a non-zero tangent, a linear
    input) is fixed; ``what`` is "differentiate" or "transpose"."""
    if fixed and max(fixed) >= n:
        raise ValueError(
            f"{name}: fixed={tuple(fixed)!r} names operand {max(fixed)}, but the op has {counted(n, 'operand')}"
        )
    for i in varying:
        if i in fixed:
            raise ValueError(
                f"{name}: cannot {what} with respect to {describe_operand(names, i)}: it is declared fixed "
                f"(fixed={tuple(fixed)!r}): not differentiable; pass it as a constant (functools.partial, "
                "jax.lax.stop_gradient) or differentiate with respect to the other operands"
            )


def as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def jvp_rule(
    rule: Callable[..., Any] | None,
    name: str,
    names: Sequence[str],
    fixed: tuple[int, ...],
    vmap_levels: Callable[[dict[str, Any]], int],
    user: Callable[[dict[str, Any]], dict[str, Any]],
    bind: Callable[..., Sequence[Any]] | None = None,
) -> Callable[..., tuple[list[Any], list[Any]]]:
    """The JVP rule for JAX's table: ``rule(primals, tangents, **params)`` with None
    for symbolic zero tangents, called once per ``vmap_levels(params)`` vmapped
    (a vectorized op's batched call); None tangents out become symbolic zeros.
    ``rule=None`` gives a rule that checks the fixed operands, then, for an op
    whose results are all integer or bool (``bind(*primals, **params)`` runs it),
    gives symbolic zero tangents (their only tangent, as for ``jnp.floor`` or
    ``x > 0``), and otherwise says the op has no JVP rule."""

    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
        nonzero = [i for i, t in enumerate(tangents) if not is_zero(t)]
        check_fixed(name, names, fixed, len(primals), nonzero, "differentiate")
        if rule is None:
            if bind is not None:
                results = list(bind(*primals, **params))
                if not any(jnp.issubdtype(jax.typeof(o).dtype, jnp.inexact) for o in results):
                    return results, [zero_like(o) for o in results]
            raise NotImplementedError(f"{name}: no JVP rule (python_op's jvp=, or def_jvp_rule)")
        kw = user(params)
        ts = tuple(None if is_zero(t) else t for t in tangents)

        def one(p: tuple[Any, ...], t: tuple[Any, ...]) -> tuple[Any, Any]:
            res = rule(p, t, **kw)
            if not isinstance(res, (tuple, list)) or len(res) != 2:
                got = (
                    f"a {type(res).__name__} of length {len(res)}"
                    if isinstance(res, (tuple, list))
                    else type(res).__name__
                )
                raise TypeError(f"{name}: the jvp rule must return a pair (primal_out, tangent_out), got {got}")
            return res[0], res[1]

        f: Callable[..., Any] = one
        for _ in range(vmap_levels(params)):
            f = jax.vmap(f)
        out, t_out = f(tuple(primals), ts)
        outs = as_list(out)
        t_outs = [None] * len(outs) if t_out is None else as_list(t_out)
        if len(t_outs) != len(outs):
            raise TypeError(f"{name}: the jvp rule gave {len(outs)} results but {len(t_outs)} tangents")
        for i, (o, t) in enumerate(zip(outs, t_outs, strict=True)):
            check_tangent(name, i, o, t)
        return outs, [zero_like(o) if t is None else t for o, t in zip(outs, t_outs, strict=True)]

    return jvp


def check_tangent(name: str, i: int, out: Any, tangent: Any) -> None:
    """binding's check of a JVP rule's tangent (``rule_results.check_tangent``), where
    None also passes (a python op's rule may give None for a zero tangent)."""
    if tangent is not None:
        check_output_tangent(name, i, out, tangent)


def checked_cotangents(name: str, names: Sequence[str], out: Any, operands: Sequence[Any]) -> list[Any]:
    """A transpose rule's result as a list of one cotangent (or None) per operand,
    else TypeError naming the op: a bare array (not a tuple), the wrong count, or a
    cotangent whose shape is not its linear operand's."""
    out = checked_cotangent_list(name, out, len(operands))
    for i, (c, x) in enumerate(zip(out, operands, strict=True)):
        if c is None or is_zero(c) or not ad.is_undefined_primal(x):
            continue
        want, got = x.aval, jax.typeof(c)
        if tuple(got.shape) != tuple(want.shape):
            raise TypeError(
                f"{name}: the transpose rule's cotangent for {describe_operand(names, i)}: expected shape "
                f"{tuple(want.shape)}, got {tuple(got.shape)}"
            )
    return list(out)


def transpose_rule(
    rule: Callable[..., Any] | None,
    name: str,
    names: Sequence[str],
    fixed: tuple[int, ...],
    call: Callable[[Any, Sequence[Any], dict[str, Any]], list[Any]],
    single: Callable[[dict[str, Any]], bool],
) -> Callable[..., list[Any]]:
    """The transpose rule for JAX's table. Cotangents that are symbolic zeros reach
    the rule as None (when all are, the rule is not called: every operand's
    cotangent is zero); ``call(ct, operands, params)`` runs the rule (vmapped for a
    vectorized op's batched call). ``rule=None`` gives a rule that only checks the
    fixed operands, then says the op has no transpose rule."""

    def transpose(cts: Sequence[Any], *operands: Any, **params: Any) -> list[Any]:
        linear = [i for i, x in enumerate(operands) if ad.is_undefined_primal(x)]
        check_fixed(name, names, fixed, len(operands), linear, "transpose")
        if rule is None:
            raise NotImplementedError(f"{name}: no transpose rule (python_op's transpose=, or def_transpose_rule)")
        cs = [None if is_zero(c) else c for c in cts]
        if all(c is None for c in cs):
            return [None] * len(operands)
        ct = cs[0] if len(cs) == 1 and single(params) else tuple(cs)
        return list(call(ct, operands, params))

    return transpose


def batched_transpose(
    rule: Callable[..., Any],
    k: int,
    ct: Any,
    operands: Sequence[Any],
    params: dict[str, Any],
    checked: Callable[[Any, Sequence[Any]], list[Any]],
) -> list[Any]:
    """Transpose of a vectorized call (``k`` leading batch axes): the rule, vmapped,
    its result checked per call by ``checked``."""
    linear = [is_linear_input(x) for x in operands]
    inner = [
        ad.UndefinedPrimal(ShapedArray(x.aval.shape[k:], x.aval.dtype)) if lin else None
        for x, lin in zip(operands, linear, strict=True)
    ]

    def f(ct: Any, defined: list[Any]) -> list[Any]:
        it = iter(defined)
        args = [u if lin else next(it) for u, lin in zip(inner, linear, strict=True)]
        out = checked(rule(ct, *args, **params), args)
        return [o if lin else None for o, lin in zip(out, linear, strict=True)]

    for _ in range(k):
        f = jax.vmap(f)
    return f(ct, [x for x, lin in zip(operands, linear, strict=True) if not lin])
