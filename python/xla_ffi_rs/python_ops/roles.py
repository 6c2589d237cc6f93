"""How the ops of :mod:`xla_ffi_rs.python_ops.linear` are differentiated and batched.

Each op (the function, its transpose, a nonlinear op's JVP and VJP) is a
:class:`~xla_ffi_rs.python_ops.PythonOp` with a :class:`Role`: which operands are
fixed, what it is linear in, which op is its transpose, and where its results'
batch axes are. The rules here are registered in JAX's tables directly (not through
:meth:`PythonOp.def_jvp_rule`), because they must see symbolic zeros: a zero
tangent or cotangent is not bound at all (the private parameter ``_absent`` records
its shape) and reaches the user's function as ``None``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Any

import jax

from xla_ffi_rs._compat import ShapedArray, ad
from xla_ffi_rs._validation import counted
from xla_ffi_rs.python_ops.axes import BatchAxes, append_level, out_axes_of, unbatched
from xla_ffi_rs.python_ops.op_class import PythonOp, user_params
from xla_ffi_rs.python_ops.rules import as_list, call_abstract, describe_operand, is_zero, zero_like

#: Private static parameters: ``((index, shape, dtype), ...)`` of the operands that
#: are symbolic zeros (passed to the function as None, not bound), and the number of
#: leading fixed operands of a derived op.
_ABSENT, _LEAD = "_absent", "_lead"


class Role:
    """How one python op is differentiated and batched.

    ``kind`` is ``"linear"`` (linear in its non-fixed operands jointly: JVP is the op
    on the tangents, transpose the ``partner`` op on the fixed operands and the
    cotangents), ``"multilinear"`` (linear in each non-fixed operand separately:
    ``partials[i]`` is the op seen as linear in operand ``i`` alone) or
    ``"nonlinear"`` (JVP: the linear ``partner`` op on the primals and tangents)."""

    def __init__(
        self,
        kind: str,
        name: str,
        fn: Callable[..., Any],
        abstract_eval: Callable[..., Any],
        *,
        fixed: tuple[int, ...] | None,
        batch_axes: bool,
        names: Sequence[str] = (),
        why_fixed: str = "",
    ) -> None:
        self.kind, self.name, self.batch = kind, name, batch_axes
        self.fixed_decl, self.names = fixed, list(names)
        self.why_fixed = why_fixed or (
            f"it is declared fixed (fixed={fixed!r}): not differentiable; pass it as a constant "
            "(functools.partial, jax.lax.stop_gradient) or differentiate with respect to the other operands"
        )
        self.user_abstract = abstract_eval
        self.partner: Role | None = None
        #: A multilinear op's transposes, one per non-fixed operand in order.
        self.transposes: list[Role] = []
        #: For the transpose of a multilinear op in one operand: that operand's index.
        self.partner_slot: int | None = None
        #: For a multilinear op's transpose: how many of its operands are the op's.
        self.n_others = 0
        #: How many operands the op takes, where that is known (a multilinear op).
        self.n_operands: int | None = None
        #: For a nonlinear op's VJP: the fixed operands of that op.
        self.primal_fixed: tuple[int, ...] = ()
        self.op = _DerivedOp(
            _strip(fn, batch_axes),
            abstract_eval=self._abstract_eval,
            name=name,
            vectorized=False,
            takes_outputs=False,
            num_batch_dims=None,
            batched=None,
        )
        # The op keeps its role (and, through it, the ops of its derivatives) alive;
        # the rules in JAX's tables reach it only weakly, like the op's own.
        self.op.role = self
        ref = weakref.ref(self.op)
        ad.primitive_jvps[self.op.primitive] = _rule(ref, name, "jvp")
        ad.primitive_transposes[self.op.primitive] = _rule(ref, name, "transpose")
        if batch_axes:
            self.op.def_batching(_rule(ref, name, "batch"))

    # -- operands --------------------------------------------------------

    def fixed(self, n: int, params: dict[str, Any]) -> frozenset[int]:
        if self.fixed_decl is None:
            return frozenset(range(params[_LEAD]))
        if any(i >= n for i in self.fixed_decl):
            raise ValueError(
                f"{self.name}: fixed={self.fixed_decl!r} names an operand, but the op has {counted(n, 'operand')}"
            )
        return frozenset(self.fixed_decl)

    def call(self, logical: Sequence[Any], avals: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        """Bind the op on ``logical`` operands, of which ``None`` ones are symbolic
        zeros with the given ``avals``; returns the results as a list."""
        present = [x for x in logical if x is not None]
        absent = tuple(
            (i, tuple(a.shape), str(a.dtype)) for i, (x, a) in enumerate(zip(logical, avals, strict=True)) if x is None
        )
        params = {k: v for k, v in params.items() if k != _ABSENT}
        if absent:
            params[_ABSENT] = absent
        return as_list(self.op(*present, **params))

    def abstract(
        self, avals: Sequence[Any], params: dict[str, Any]
    ) -> tuple[list[Any], list[tuple[int | None, ...]], bool]:
        """(result avals, result batch axes, whether one result) for logical avals."""
        params = dict(params)
        params.pop(_ABSENT, None)
        lead = params.pop(_LEAD, None)
        axes: BatchAxes = params.pop("batch_axes", None) or unbatched(len(avals))
        kw = {"batch_axes": axes} if self.batch else {}
        if self.kind == "jvp":  # a nonlinear op's JVP: results like the op's own
            avals, kw = avals[:lead], ({"batch_axes": axes[:lead]} if self.batch else {})
        if self.kind == "vjp":  # cotangents: like the non-fixed primals
            idx = [i for i in range(lead) if i not in self.primal_fixed]
            if len(idx) == 1:
                return [avals[idx[0]]], [axes[idx[0]]], True
            return [avals[i] for i in idx], [axes[i] for i in idx], False
        out = call_abstract(self.name, self.user_abstract, avals, {**kw, **params})
        return out_axes_of(self.name, out, axes if self.batch else unbatched(len(avals)))

    def _abstract_eval(self, *avals: ShapedArray, **params: Any) -> Any:
        logical = _merge(list(avals), params.get(_ABSENT, ()), _aval_of)
        if self.fixed_decl and max(self.fixed_decl) >= len(logical):  # at every call, as python_op's fixed=
            raise ValueError(
                f"{self.name}: fixed={self.fixed_decl!r} names operand {max(self.fixed_decl)}, "
                f"but the op is called with {counted(len(logical), 'operand')}"
            )
        if self.n_operands is not None and len(logical) != self.n_operands:
            raise ValueError(
                f"{self.name}: takes {self.n_operands} operands (one transpose per non-fixed operand and "
                f"the fixed ones), called with {len(logical)}"
            )
        outs, _, single = self.abstract(logical, params)
        return outs[0] if single else outs

    def logical(self, operands: Sequence[Any], params: dict[str, Any]) -> tuple[list[Any], list[Any]]:
        """The operands with None for the symbolic zeros, and all their avals."""
        absent = params.get(_ABSENT, ())
        values = _merge(list(operands), absent, lambda entry: None)
        avals = _merge([jax.typeof(x) if not ad.is_undefined_primal(x) else x.aval for x in operands], absent, _aval_of)
        return values, avals

    def check_fixed(self, fixed: frozenset[int], nonzero: Sequence[int], what: str) -> None:
        for i in nonzero:
            if i in fixed:
                raise ValueError(
                    f"{self.name}: cannot {what} with respect to {describe_operand(self.names, i)}: {self.why_fixed}"
                )

    # -- rules -----------------------------------------------------------

    def jvp(self, primals: Sequence[Any], tangents: Sequence[Any], params: dict[str, Any]) -> tuple[Any, Any]:
        params = user_params(params)
        values, avals = self.logical(primals, params)
        tans = _merge(list(tangents), params.get(_ABSENT, ()), lambda entry: ad.Zero(_aval_of(entry)))
        n = len(values)
        fixed = self.fixed(n, params)
        nonzero = [i for i, (v, t) in enumerate(zip(values, tans, strict=True)) if v is not None and not is_zero(t)]
        self.check_fixed(fixed, nonzero, "differentiate")
        outs = self.call(values, avals, params)
        if not nonzero:
            return outs, [zero_like(o) for o in outs]
        if self.kind in ("linear", "jvp", "vjp"):
            # Linear in the non-fixed operands jointly: the op itself, on the tangents.
            args = [
                v if i in fixed else (None if is_zero(tans[i]) or v is None else tans[i]) for i, v in enumerate(values)
            ]
            return outs, self.call(args, avals, params)
        if self.kind in ("multilinear", "multilinear_T"):
            # Linear in each non-fixed operand separately (and, for a multilinear op's
            # transpose, in its cotangent operands jointly): one call per group with
            # a non-zero tangent, the tangents in place of the group's operands.
            k = self.n_others if self.kind == "multilinear_T" else n
            groups = [[i] for i in nonzero if i < k]
            if nonzero[-1] >= k:
                groups.append(list(range(k, n)))
            total: list[Any] | None = None
            for group in groups:
                args = [(None if is_zero(tans[j]) else tans[j]) if j in group else v for j, v in enumerate(values)]
                term = self.call(args, avals, params)
                total = term if total is None else [a + b for a, b in zip(total, term, strict=True)]
            assert total is not None
            return outs, total
        # nonlinear: the JVP op on the primals (all fixed there) and the tangents
        assert self.partner is not None
        tan_args = [None if is_zero(tans[i]) else tans[i] for i in range(n) if i not in fixed]
        tan_avals = [avals[i] for i in range(n) if i not in fixed]
        jvp_params = {**params, _LEAD: n}
        if self.batch:
            axes = params.get("batch_axes") or unbatched(n)
            jvp_params["batch_axes"] = tuple(axes) + tuple(axes[i] for i in range(n) if i not in fixed)
        return outs, self.partner.call([*values, *tan_args], [*avals, *tan_avals], jvp_params)

    def transpose(self, cts: Sequence[Any], operands: Sequence[Any], params: dict[str, Any]) -> list[Any]:
        params = user_params(params)
        values, avals = self.logical(operands, params)
        n = len(values)
        fixed = self.fixed(n, params)
        undefined = [i for i, v in enumerate(values) if v is not None and ad.is_undefined_primal(v)]
        self.check_fixed(fixed, undefined, "transpose")
        lin = [i for i in range(n) if i not in fixed]
        result: list[Any] = [None] * n
        if self.kind == "nonlinear":
            raise ValueError(f"{self.name}: a nonlinear op cannot be transposed")
        if self.kind == "multilinear":
            if len(undefined) > 1:
                raise ValueError(
                    f"{self.name}: linear in each operand separately, so it cannot be transposed with "
                    f"respect to {', '.join(describe_operand(self.names, i) for i in undefined)} at once"
                )
            if not undefined or any(values[i] is None for i in lin):  # a zero operand: a zero result
                return _present(result, params)
            (i,) = undefined
            target = self.transposes[lin.index(i)]
            return _present(
                self.transpose_into(
                    target, cts, values, avals, params, [i], lambda ops, cs: [*ops[:i], *ops[i + 1 :], *cs], None
                ),
                params,
            )
        if self.kind == "multilinear_T":
            return _present(self.transpose_multilinear_t(cts, values, avals, params, undefined), params)
        constants = [i for i in lin if values[i] is not None and i not in undefined]
        if constants:
            raise ValueError(
                f"{self.name}: linear in its non-fixed operands jointly, so it cannot be transposed with respect "
                f"to some of them while {describe_operand(self.names, constants[0])} is a constant; "
                "declare that operand fixed"
            )
        assert self.partner is not None
        kept = sorted(fixed)
        layout = self.partner.fixed_decl

        def arrange(ops: list[Any], cs: list[Any]) -> list[Any]:
            return _arrange(layout, [ops[i] for i in kept], cs)

        lead = len(kept) if layout is None else None
        return _present(self.transpose_into(self.partner, cts, values, avals, params, lin, arrange, lead), params)

    def transpose_multilinear_t(
        self, cts: Sequence[Any], values: list[Any], avals: list[Any], params: dict[str, Any], undefined: list[int]
    ) -> list[Any]:
        """Transpose of a multilinear op's transpose in operand ``slot``, ``T(*others,
        *cotangents)``: linear in the cotangents jointly (transpose: the op, with the
        cotangent in place of operand ``slot``) and in each other operand ``j``
        separately (transpose: the op's transpose in ``j``, with the cotangent in
        place of operand ``slot``)."""
        assert self.partner is not None and self.partner_slot is not None
        slot, f, n = self.partner_slot, self.partner, len(values)
        k = self.n_others  # the op's other operands come first, then the cotangents
        in_cts = [i for i in undefined if i >= k]
        in_others = [i for i in undefined if i < k]
        if (in_cts and in_others) or len(in_others) > 1:
            raise ValueError(
                f"{self.name}: linear in the cotangents and in each other operand separately, so it cannot be "
                f"transposed with respect to {', '.join(describe_operand(self.names, i) for i in undefined)} at once"
            )
        if any(values[i] is None for i in range(k) if i not in self.fixed(n, params)) or not undefined:
            return [None] * n
        if in_cts:
            constants = [i for i in range(k, n) if values[i] is not None and i not in in_cts]
            if constants:
                raise ValueError(f"{self.name}: linear in its cotangent operands jointly; {constants[0]} is a constant")
            return self.transpose_into(
                f, cts, values, avals, params, list(range(k, n)), lambda ops, cs: [*ops[:slot], *cs, *ops[slot:k]], None
            )
        (j,) = in_others
        big_j = j if j < slot else j + 1  # the op's operand index
        target = f.transposes[[i for i in range(k + 1) if i not in (f.fixed_decl or ())].index(big_j)]

        def arrange(ops: list[Any], cs: list[Any]) -> list[Any]:
            full = [*ops[:slot], *cs, *ops[slot:k]]
            return [*full[:big_j], *full[big_j + 1 :], *ops[k:]]

        return self.transpose_into(target, cts, values, avals, params, [j], arrange, None)

    def transpose_into(
        self,
        target: Role,
        cts: Sequence[Any],
        values: list[Any],
        avals: list[Any],
        params: dict[str, Any],
        lin: list[int],
        arrange: Callable[[list[Any], list[Any]], list[Any]],
        lead: int | None,
    ) -> list[Any]:
        """The cotangents of operands ``lin``: the op ``target`` on
        ``arrange(operands, cotangents)`` (a symbolic zero cotangent is None)."""
        n = len(values)
        result: list[Any] = [None] * n
        if all(is_zero(c) for c in cts) or all(values[i] is None for i in lin):
            return result
        out_avals, out_axes, _ = self.abstract(avals, params)
        axes = list(params.get("batch_axes") or unbatched(n))
        cols = [
            arrange(values, [None if is_zero(c) else c for c in cts]),
            arrange(avals, list(out_avals)),
            arrange(axes, list(out_axes)),
        ]
        t_params = {k: v for k, v in params.items() if k not in (_ABSENT, _LEAD, "batch_axes")}
        if lead is not None:
            t_params[_LEAD] = lead
        if self.batch:
            t_params["batch_axes"] = tuple(cols[2])
        # Checked before the call, which may run at once (eagerly).
        t_avals, _, _ = target.abstract(cols[1], t_params)
        if len(t_avals) != len(lin):
            raise ValueError(
                f"{target.name}: the transpose must give {len(lin)} cotangent(s), one per linear operand "
                f"of {self.name}; its abstract_eval gives {len(t_avals)}"
            )
        for i, got in zip(lin, t_avals, strict=True):
            want = avals[i]
            if (tuple(want.shape), want.dtype) != (tuple(got.shape), got.dtype):
                raise ValueError(
                    f"{target.name}: the cotangent of {self.name}'s {describe_operand(self.names, i)} must look "
                    f"like the operand, {want.str_short()}, but the transpose's abstract_eval gives "
                    f"{_short(got)}"
                )
        for i, c in zip(lin, target.call(cols[0], cols[1], t_params), strict=True):
            result[i] = c
        return result

    def batch_rule(self, operands: Sequence[Any], dims: Sequence[Any], params: dict[str, Any]) -> tuple[Any, Any]:
        values, avals = self.logical(operands, params)
        n = len(values)
        it = iter(dims)
        logical_dims = [None if v is None else next(it) for v in values]
        if self.kind == "vjp":  # each cotangent needs its primal's batch axes: map them all
            size = next(int(x.shape[d]) for x, d in zip(values, logical_dims, strict=True) if d is not None)
            for i in range(params[_LEAD]):
                if logical_dims[i] is None and i not in self.primal_fixed:
                    values[i] = jax.numpy.broadcast_to(values[i], (size, *values[i].shape))
                    logical_dims[i], avals[i] = 0, jax.typeof(values[i])
            operands = [v for v in values if v is not None]
        axes = append_level(params.get("batch_axes") or unbatched(n), logical_dims)
        new = {**params, "batch_axes": axes}
        outs = self.call(values, avals, new)
        _, out_axes, _ = self.abstract(avals, new)
        return outs, [a[-1] for a in out_axes]


def _aval_of(entry: tuple[int, tuple[int, ...], str]) -> ShapedArray:
    return ShapedArray(entry[1], jax.numpy.dtype(entry[2]))


def _merge(present: list[Any], absent: Sequence[Any], fill: Callable[[Any], Any]) -> list[Any]:
    """``present`` with ``fill(entry)`` inserted at each absent entry's index."""
    out = list(present)
    for entry in absent:
        out.insert(entry[0], fill(entry))
    return out


def _short(aval: Any) -> str:
    return f"{jax.numpy.dtype(aval.dtype).name}[{','.join(map(str, aval.shape))}]"


def _none(entry: Any) -> None:
    return None


def _arrange(layout: Any, kept: list[Any], lin: list[Any]) -> list[Any]:
    """The operands of a transpose op: ``kept`` first (``layout`` None), or ``kept``
    at the indices ``layout`` and ``lin`` in the others."""
    if layout is None:
        return kept + lin
    n = len(kept) + len(lin)
    k, li = iter(kept), iter(lin)
    return [next(k) if i in layout else next(li) for i in range(n)]


def _present(result: list[Any], params: dict[str, Any]) -> list[Any]:
    """The cotangents of the bound operands (the logical ones minus the absent)."""
    absent = {entry[0] for entry in params.get(_ABSENT, ())}
    return [c for i, c in enumerate(result) if i not in absent]


def _strip(fn: Callable[..., Any], batch_axes: bool) -> Callable[..., Any]:
    """``fn`` called with None for the symbolic zeros and without private params."""

    def call(*arrays: Any, **params: Any) -> Any:
        if not params and not batch_axes:  # the common case, on every call: nothing to do
            return fn(*arrays)
        absent = params.pop(_ABSENT, ())
        params.pop(_LEAD, None)
        if batch_axes and "batch_axes" not in params:
            params["batch_axes"] = unbatched(len(arrays) + len(absent))
        return fn(*_merge(list(arrays), absent, _none), **params)

    call.__qualname__ = getattr(fn, "__qualname__", "fn")
    if not batch_axes:  # what the handler may call itself when there are no params
        call._xla_ffi_rs_plain = fn  # type: ignore[attr-defined]
    return call


class _DerivedOp(PythonOp):
    """A python op made by the constructors here, holding how it is differentiated."""

    role: Role


def _rule(ref: weakref.ref[_DerivedOp], name: str, which: str) -> Callable[..., Any]:
    def role() -> Role:
        op = ref()
        if op is None:
            raise RuntimeError(f"{name}: this op was garbage collected; keep a reference to it while it is used")
        return op.role

    if which == "jvp":
        return lambda primals, tangents, **params: role().jvp(primals, tangents, params)
    if which == "transpose":
        return lambda cts, *operands, **params: role().transpose(cts, operands, params)
    return lambda operands, dims, **params: role().batch_rule(operands, dims, params)
