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
  target's op, called on the cotangents of the results and the non-linear
  operands, gives the cotangents of the linear operands. Which operand of the
  transpose target gets what follows from the two declarations
  (:func:`transpose_plan`), not from positions alone.

The op is passed in (any object with ``declaration``, ``reductions`` and
``__call__``), so this module needs no other module of :mod:`xla_ffi_rs.binding`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp

from xla_ffi_rs._compat import NOT_MAPPED, ad
from xla_ffi_rs.binding.batch_split import mesh_of
from xla_ffi_rs.binding.op_class import freeze
from xla_ffi_rs.binding.sequential import sequential_map

__all__ = [
    "TransposePlan",
    "batching_rule",
    "linear_jvp",
    "no_jvp",
    "transpose_plan",
    "transpose_rule",
    "untransposable",
]

BatchDim = int | None


def _size(operands: Sequence[Any], dims: Sequence[BatchDim]) -> int:
    """The vmapped size; a symbolic dimension (jax.export) is kept as it is, so that
    the op's own check refuses it naming the target and operand."""
    return next(jnp.shape(x)[d] for x, d in zip(operands, dims, strict=True) if d is not NOT_MAPPED)


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
        lead, mesh = _batch_axis_entry(operands, dims)
        for x, d, batched in zip(operands, dims, batched_in, strict=True):
            if d is not NOT_MAPPED:
                x = jnp.moveaxis(x, d, 0)
            elif batched:
                x = _split_like_batch(jnp.broadcast_to(jnp.asarray(x), (size, *jnp.shape(x))), lead, mesh)
            moved.append(x)
        outs = list(op(*moved, **params))
        for i, formula in op.reductions.items():
            if not decl.batched_out[i]:
                outs[i] = jax.vmap(functools.partial(formula, **params), in_axes=tuple(dims))(*operands)
        return outs, [0] * len(outs)

    return rule


def _batch_axis_entry(operands: Sequence[Any], dims: Sequence[BatchDim]) -> tuple[Any, Any]:
    """The mesh axes that split the vmapped axis of the first vmapped operand, read
    from its type (a mesh with explicit axes), and that type's mesh; (None, None)
    when unsplit or not typed."""
    for x, d in zip(operands, dims, strict=True):
        if d is not NOT_MAPPED:
            sharding = getattr(jax.typeof(x), "sharding", None)
            spec = tuple(getattr(sharding, "spec", None) or ())
            lead = spec[d] if d < len(spec) else None
            if lead is None:
                return None, None
            return lead, mesh_of(x, jax.typeof(x))
    return None, None


def _split_like_batch(x: jax.Array, lead: Any, mesh: Any) -> jax.Array:
    """An unbatched operand broadcast along the batch axis, split there as the
    vmapped operands are: the call's operands are then typed alike, and so are
    the results of its transpose, which JAX requires of each cotangent (an
    eccentricity shared by a vmapped, split mean anomaly). Left as it is where its
    own split already uses those mesh axes. ``mesh`` is the vmapped operand's: a
    constant (a Python float) is typed on no mesh where no ``jax.set_mesh`` is
    active, and that empty mesh names none of ``lead``'s axes."""
    if lead is None:
        return x
    aval = jax.typeof(x)
    spec = tuple(aval.sharding.spec or ()) + (None,) * (x.ndim - len(tuple(aval.sharding.spec or ())))
    names = set(lead if isinstance(lead, tuple) else (lead,))
    used = {a for entry in spec[1:] if entry is not None for a in (entry if isinstance(entry, tuple) else (entry,))}
    if names & used:
        return x
    sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(lead, *spec[1:]))
    split: jax.Array = jax.sharding.reshard(x, sharding)
    return split


def _mapped(op: Any, operands: Sequence[Any], dims: Sequence[BatchDim], params: dict[str, Any]) -> list[Any]:
    """One call per example, under ``lax.map`` (a loop in the compiled program)."""
    index = [i for i, d in enumerate(dims) if d is not NOT_MAPPED]
    xs = [jnp.moveaxis(operands[i], d, 0) for i, d in enumerate(dims) if d is not NOT_MAPPED]

    def call(eager: bool) -> Callable[..., Sequence[Any]]:
        return lambda *args: op(*args, **params)

    return sequential_map(call, freeze(params), operands, index, xs, op._eager_maps)


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
                f"{', '.join(decl.linear)} only; give a JVP rule with def_jvp (it replaces the declared "
                f"derivative, so it also gives the part in {', '.join(decl.linear)})"
                + (
                    f"; second order (grad of grad, jax.hessian) differentiates both {decl.target} and its "
                    f"transpose {decl.transpose}: each needs such a rule"
                    if decl.transpose and decl.transpose != decl.target
                    else ""
                )
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
            'declare them in the Rust #[handler] (linear = "x, ...", with transpose = "<target>" for reverse mode)'
        )

    return jvp


#: Prefixes and suffixes that name a derivative's role rather than its operand:
#: ``ct_x``, ``d_x``, ``x_dot`` all stand for ``x``.
_ROLE_PREFIXES = ("ct_", "d_", "dot_", "t_", "grad_", "g_", "bar_")
_ROLE_SUFFIXES = ("_ct", "_dot", "_bar", "_grad", "_t")


def _base_name(name: str) -> str:
    """``name`` without one role prefix and one role suffix (``ct_x`` -> ``x``)."""
    for p in _ROLE_PREFIXES:
        if name.startswith(p) and len(name) > len(p):
            name = name[len(p) :]
            break
    for q in _ROLE_SUFFIXES:
        if name.endswith(q) and len(name) > len(q):
            name = name[: -len(q)]
            break
    return name


def _by_base_name(ours: Sequence[str], theirs: Sequence[str]) -> list[int] | None:
    """For each of ``theirs``, the index in ``ours`` of the same name up to role
    prefixes and suffixes, when that pairs them one to one; else None."""
    a, b = [_base_name(n) for n in ours], [_base_name(n) for n in theirs]
    if len(set(a)) != len(a) or sorted(a) != sorted(b):
        return None
    return [a.index(n) for n in b]


class TransposePlan:
    """How ``op``'s transpose rule calls the op of its transpose target.

    ``sources[j]`` says what operand ``j`` of the transpose target gets:
    ``("ct", k)``, the cotangent of the op's result ``k``, or ``("operand", i)``,
    the op's (non-linear) operand ``i``. ``results[m]`` is the op's linear
    operand whose cotangent the transpose target's result ``m`` is.
    """

    def __init__(self, sources: list[tuple[str, int]], results: list[int]) -> None:
        self.sources = sources
        self.results = results

    def __repr__(self) -> str:
        return f"TransposePlan(sources={self.sources}, results={self.results})"


def transpose_plan(decl: Any, other: Any) -> TransposePlan:
    """Pair the operands and results of ``other`` (the declaration of ``decl``'s
    transpose target) with what ``decl``'s transpose rule has: the cotangents of
    its results, its non-linear operands, the cotangents of its linear operands.

    Roles come first: the transpose target's ``linear`` operands are the
    cotangents (when it declares none, its operands not named like one of
    ``decl``'s non-linear operands are); its other operands are ``decl``'s
    non-linear operands, paired by name (by role alone when there is one of
    each). Cotangents pair with results, and the transpose target's results with
    ``decl``'s linear operands, by name up to role prefixes and suffixes
    (``ct_x``, ``d_x``, ``x_dot``) when the names pair one to one, else in order.

    Raises:
      ValueError: naming both targets and the operand or result that has no
        partner, when the declarations do not fit together.
    """
    where = f"binding.op: {decl.target} and its transpose {other.target}"
    linear = list(decl.linear_in)
    nonlinear = [i for i in range(len(decl.operands)) if i not in linear]
    nl_names = [decl.operands[i]["name"] for i in nonlinear]
    t_names = [o["name"] for o in other.operands]
    if other.linear_in:
        ct_slots = list(other.linear_in)
    else:
        ct_slots = [j for j, n in enumerate(t_names) if n not in nl_names]
    nl_slots = [j for j in range(len(t_names)) if j not in ct_slots]
    expected = (
        f"the cotangents of its {len(decl.results)} result(s) "
        f"({', '.join(r['name'] for r in decl.results)}) and its {len(nonlinear)} non-linear operand(s) "
        f"({', '.join(nl_names) or 'none'})"
    )
    if len(ct_slots) != len(decl.results) or len(nl_slots) != len(nonlinear):
        got = (
            f"{len(ct_slots)} cotangent operand(s) ({', '.join(t_names[j] for j in ct_slots) or 'none'}) and "
            f"{len(nl_slots)} other(s) ({', '.join(t_names[j] for j in nl_slots) or 'none'})"
        )
        raise ValueError(f"{where}: the transpose must take {expected}; it takes {got}")
    if len(other.results) != len(linear):
        raise ValueError(
            f"{where}: the transpose must give {len(linear)} result(s), the cotangents of "
            f"{', '.join(decl.linear)}; it gives {len(other.results)}"
        )
    sources: list[tuple[str, int]] = [("", -1)] * len(t_names)
    # non-linear operands: by name, or by role when there is one of each
    if sorted(t_names[j] for j in nl_slots) == sorted(nl_names):
        for j in nl_slots:
            sources[j] = ("operand", nonlinear[nl_names.index(t_names[j])])
    elif len(nl_slots) == 1:
        sources[nl_slots[0]] = ("operand", nonlinear[0])
    else:
        j = next(j for j in nl_slots if t_names[j] not in nl_names)
        raise ValueError(
            f"{where}: the transpose's operand {j} ({t_names[j]}) is not a cotangent (it is not in its "
            f"`linear`) and names no non-linear operand of {decl.target} ({', '.join(nl_names)}): name them "
            f"alike, or list it in the transpose's `linear`"
        )
    # cotangents of the results, and the transpose's results
    order = _by_base_name([r["name"] for r in decl.results], [t_names[j] for j in ct_slots])
    for k, j in enumerate(ct_slots):
        sources[j] = ("ct", order[k] if order is not None else k)
    lin_names = [decl.operands[i]["name"] for i in linear]
    res_order = _by_base_name(lin_names, [r["name"] for r in other.results])
    results = [linear[res_order[m] if res_order is not None else m] for m in range(len(linear))]
    return TransposePlan(sources, results)


def transpose_rule(op: Any, transposed: Any) -> Callable[..., list[Any]]:
    """The transpose of ``op`` by its transpose target's op ``transposed``
    (operands and results paired by :func:`transpose_plan`)."""
    decl = op.declaration
    linear = decl.linear_in
    other = [i for i in range(len(decl.operands)) if i not in linear]
    takes = {a["name"] for a in transposed.declaration.attributes}
    plan = transpose_plan(decl, transposed.declaration)

    def transpose(cts: Sequence[Any], *operands: Any, **params: Any) -> list[Any]:
        for i in other:
            if ad.is_undefined_primal(operands[i]):
                raise NotImplementedError(
                    f"{decl.target}: cannot transpose with respect to operand {i} ({decl.operands[i]['name']}): "
                    f"the op is linear in {', '.join(decl.linear)} only"
                )
        if not any(ad.is_undefined_primal(operands[i]) for i in linear):
            return [None] * len(operands)
        args = [cts[k] if kind == "ct" else operands[k] for kind, k in plan.sources]
        outs = transposed(*args, **{k: v for k, v in params.items() if k in takes})
        by_operand = dict(zip(plan.results, outs, strict=True))
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
