"""The rules of an op built from its declaration (:func:`xla_ffi_rs.binding.op`):
batching, JVP and transpose, each following from the declaration alone.

* batching: ONE call, the vmapped axis entering the batch ellipsis (operands that
  start with it get it in front, broadcast if they are not vmapped); a result
  without the batch ellipsis (a sum over the batch, e.g. dweight) is computed per
  example by its ``reductions`` formula under ``jax.vmap``. When a vmapped operand
  has no batch ellipsis (a batched weight), or the declaration has none, the op
  is called once per example under ``jax.lax.map``: correct, not vectorized
  (override with ``Op.def_batching``).
* JVP, for an op with linear operands: the op applied to their tangents (the
  other operands may have none); for an op with none, an error saying so and
  how to give one.
* transpose, for an op with ``linear`` operands and a ``transpose`` target: that
  target's op, called on the cotangents of the results followed by the non-linear
  operands, gives the cotangents of the linear operands.

The op is passed in (any object with ``declaration``, ``reductions`` and
``__call__``), so this module needs nothing of :mod:`xla_ffi_rs.binding`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from xla_ffi_rs._compat import NOT_MAPPED, ad

__all__ = ["batching_rule", "linear_jvp", "no_jvp", "transpose_rule", "untransposable"]

BatchDim = int | None


def _size(operands: Sequence[Any], dims: Sequence[BatchDim]) -> int:
    return next(int(jnp.shape(x)[d]) for x, d in zip(operands, dims, strict=True) if d is not NOT_MAPPED)


def batching_rule(op: Any) -> Callable[..., tuple[Sequence[Any], Sequence[BatchDim]]]:
    """The vmap rule of a declared op (see the module docstring)."""
    decl = op.declaration

    def rule(operands: Sequence[Any], dims: Sequence[BatchDim], **params: Any) -> tuple[list[Any], list[int]]:
        size = _size(operands, dims)
        vmapped = [d is not NOT_MAPPED for d in dims]
        batched_in = decl.batched_in[: len(operands)]  # absent optional operands are not bound
        if not decl.one_call or any(v and not b for v, b in zip(vmapped, batched_in, strict=True)):
            return _mapped(op, operands, dims, params), [0] * len(decl.results)
        moved = []
        for x, d, batched in zip(operands, dims, batched_in, strict=True):
            if d is not NOT_MAPPED:
                x = jnp.moveaxis(x, d, 0)
            elif batched:
                x = jnp.asarray(x)
                x = jnp.broadcast_to(x, (size, *x.shape))
            moved.append(x)
        outs = list(op(*moved, **params))
        for i, formula in op.reductions.items():
            if not decl.batched_out[i]:
                outs[i] = jax.vmap(functools.partial(formula, **params), in_axes=tuple(dims))(*operands)
        return outs, [0] * len(outs)

    return rule


def _mapped(op: Any, operands: Sequence[Any], dims: Sequence[BatchDim], params: dict[str, Any]) -> list[Any]:
    """One call per example, under ``lax.map`` (a loop in the compiled program)."""
    index = [i for i, d in enumerate(dims) if d is not NOT_MAPPED]
    xs = [jnp.moveaxis(operands[i], d, 0) for i, d in enumerate(dims) if d is not NOT_MAPPED]

    def one(xs: Sequence[Any]) -> tuple[Any, ...]:
        args = list(operands)
        for i, x in zip(index, xs, strict=True):
            args[i] = x
        return tuple(op(*args, **params))

    return list(jax.lax.map(one, xs))


def linear_jvp(op: Any) -> Callable[..., tuple[Sequence[Any], Sequence[Any]]]:
    """JVP of an op with linear operands: the op applied to the tangents of the
    linear operands at the same non-linear operands. Where a non-linear operand
    has a tangent too, the derivative is not the declaration's: NotImplementedError
    (give a rule with ``Op.def_jvp``)."""
    decl = op.declaration
    linear = set(decl.linear_in)

    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
        moving = [i for i, t in enumerate(tangents) if i not in linear and type(t) is not ad.Zero]
        if moving:
            names = ", ".join(f"operand {i} ({decl.operands[i]['name']})" for i in moving)
            raise NotImplementedError(
                f"{decl.target}: no derivative with respect to {names}: the declaration makes the op linear in "
                f"{', '.join(decl.linear)} only; give a JVP rule with def_jvp"
            )
        args = [
            ad.instantiate_zeros(t) if i in linear else p
            for i, (p, t) in enumerate(zip(primals, tangents, strict=True))
        ]
        return list(op(*primals, **params)), list(op(*args, **params))

    return jvp


def no_jvp(op: Any) -> Callable[..., tuple[Sequence[Any], Sequence[Any]]]:
    """JVP of an op whose declaration makes it linear in no operand, until a rule is
    given: NotImplementedError naming the target and the operands differentiated, and
    how to give a derivative (instead of JAX's "Differentiation rule not implemented")."""
    decl = op.declaration

    def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[list[Any], list[Any]]:
        moving = [i for i, t in enumerate(tangents) if type(t) is not ad.Zero]
        names = ", ".join(f"operand {i} ({decl.operands[i]['name']})" for i in moving)
        raise NotImplementedError(
            f"{decl.target}: no derivative with respect to {names}: the op has no JVP rule, and its declaration "
            "makes it linear in no operand; give a JVP rule with def_jvp, or, for an op linear in some operands, "
            "declare them in the Rust #[handler] (linear = [...], with transpose = <target> for reverse mode)"
        )

    return jvp


def transpose_rule(op: Any, transposed: Any) -> Callable[..., list[Any]]:
    """The transpose of ``op`` by its transpose target's op ``transposed``."""
    decl = op.declaration
    linear = decl.linear_in
    other = [i for i in range(len(decl.operands)) if i not in linear]
    takes = {a["name"] for a in transposed.declaration.attributes}

    def transpose(cts: Sequence[Any], *operands: Any, **params: Any) -> list[Any]:
        for i in other:
            if ad.is_undefined_primal(operands[i]):
                raise NotImplementedError(
                    f"{decl.target}: cannot transpose with respect to operand {i} ({decl.operands[i]['name']}): "
                    f"the op is linear in {', '.join(decl.linear)} only"
                )
        if not any(ad.is_undefined_primal(operands[i]) for i in linear):
            return [None] * len(operands)
        outs = transposed(*cts, *(operands[i] for i in other), **{k: v for k, v in params.items() if k in takes})
        by_operand = dict(zip(linear, outs, strict=True))
        return [
            by_operand[i] if i in by_operand and ad.is_undefined_primal(operands[i]) else None
            for i in range(len(operands))
        ]

    return transpose


def untransposable(op: Any) -> Callable[..., list[Any]]:
    """The transpose rule of an op whose transpose target was not built with it."""
    decl = op.declaration

    def transpose(cts: Sequence[Any], *operands: Any, **params: Any) -> list[Any]:
        raise NotImplementedError(
            f"{decl.target}: its transpose target {decl.transpose} has no op: build both with "
            f"binding.ops(...), or pass transpose=<that op> to binding.op"
        )

    return transpose
