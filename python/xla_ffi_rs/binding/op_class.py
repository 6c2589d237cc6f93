"""The class :class:`xla_ffi_rs.binding.Op` (a JAX primitive and its rules) and the
types of its rules; the public names are those of :mod:`xla_ffi_rs.binding`, which
documents them and builds ops from declarations on top of this module.

Example:
    >>> from xla_ffi_rs.binding.op_class import Op
    >>> Op.__name__
    'Op'
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, TypeVar

import jax
import numpy as np
from jax.typing import ArrayLike

from xla_ffi_rs import sharding as _sharding
from xla_ffi_rs._compat import (
    FFI_SIDE_EFFECT,
    NOT_MAPPED,
    Primitive,
    ShapedArray,
    Tracer,
    abstract_token,
    ad,
    batching,
    constrain_to_type,
    eval_context,
    forget_primitive,
    mark_primitive_callable,
    mlir,
    ordered_effect,
    ordered_effect_sharding,
    set_sharding,
)
from xla_ffi_rs._validation import counted, traced_attribute
from xla_ffi_rs.binding.batch_split import split_batch_alike
from xla_ffi_rs.binding.declaration import Declaration, check_utf8
from xla_ffi_rs.binding.op_arguments import check_op_arguments, flags
from xla_ffi_rs.binding.operands import check_operands
from xla_ffi_rs.binding.rule_params import check_rule_takes_attributes
from xla_ffi_rs.binding.rule_results import checked_avals, checked_batch, checked_cotangents, checked_jvp
from xla_ffi_rs.binding.symbolic_dims import is_concrete

__all__ = [
    "AbstractEval",
    "BatchDim",
    "BatchRule",
    "JvpRule",
    "Op",
    "Params",
    "TargetNames",
    "TransposeRule",
    "explicit_spec",
    "freeze",
    "weak_method",
]

#: Platform (as JAX names it: "cpu", "cuda", "rocm", ...) -> FFI target name.
TargetNames = Mapping[str, str]
#: A batch dimension as JAX passes it to a batching rule: an axis or ``None``.
BatchDim = int | None
Params = dict[str, Any]


# The rule types are plain callables, so that rules with keyword-only params
# (``def rule(x, *, eps: float)``) type-check.

#: ``(*operand_avals, **params) -> result avals`` (ShapedArrays or
#: ``jax.ShapeDtypeStruct`` objects; one result may be returned bare).
AbstractEval = Callable[..., Sequence[ShapedArray | jax.ShapeDtypeStruct] | ShapedArray | jax.ShapeDtypeStruct]
#: ``(primals, tangents, **params) -> (primal_outs, tangent_outs)``; tangents
#: arrive instantiated (symbolic zeros become arrays of zeros).
JvpRule = Callable[..., tuple[Sequence[Any], Sequence[Any]]]
#: ``(cotangents, *operands, **params) -> one cotangent (or None) per operand``;
#: cotangents arrive instantiated, linear operands are ``ad.UndefinedPrimal``
#: (test with :func:`is_linear_input`).
TransposeRule = Callable[..., Sequence[Any]]
#: ``(operands, batch_dims, **params) -> (results, result_batch_dims)``.
BatchRule = Callable[..., tuple[Sequence[Any], Sequence[BatchDim]]]

# A rule given to def_jvp, def_transpose or def_batching is returned as it is, with
# its own type, so that a decorated function keeps its signature for type checkers.
_JvpRuleT = TypeVar("_JvpRuleT", bound=JvpRule)
_TransposeRuleT = TypeVar("_TransposeRuleT", bound=TransposeRule)
_BatchRuleT = TypeVar("_BatchRuleT", bound=BatchRule)


class Op:
    """A JAX operation lowered to XLA FFI targets (see :mod:`xla_ffi_rs.binding`).

    Args:
      name: primitive name, as it appears in jaxprs.
      abstract_eval: computes result avals from operand avals and params
        (ShapedArrays or ``jax.ShapeDtypeStruct`` objects, a sequence or one bare);
        anything else is a TypeError naming the op when it is traced.
      targets: FFI target name per platform. Platforms missing here lower
        ``jnp_impl`` instead (when given).
      jnp_impl: ``(*operands, **params) -> tuple of results`` in jnp; the
        lowering on platforms without a target, and the whole lowering of an
        op with no targets (e.g. a linear helper op with a custom transpose).
        Results other than ``abstract_eval``'s (count, shape, dtype) raise
        ValueError / TypeError naming the op and the result when it is lowered.
      attributes: maps the op's params to FFI attributes (keyword arguments of
        ``jax.ffi.ffi_lowering``'s rule); by default every param is passed.
      num_batch_dims: ``(*avals, **params) -> int``, the number of leading axes
        of the first operand that the op treats independently. With it, the
        op's targets are batch-partitionable (see :mod:`xla_ffi_rs.binding`).
      batched: ``(operands, results)``, which operands and results carry the
        leading batch axes; by default all of them (results in ``reductions``
        never do). A weight shared by every row, say, is not batched.
      reductions: result index -> ``(*operands, **params) -> array``, a jnp
        formula for a result that sums over the batch axes (the gradient of a
        shared weight). When the call is partitioned, the kernel's value of
        such a result is one shard's partial; the formula is lowered in its
        place, and XLA completes it with an all-reduce.
      extra_results: platform -> ``(*operand_avals, **params) -> avals`` of
        results the target of that platform has beyond the op's own (a
        scratch workspace, say). The lowering appends them to the custom call
        and drops them; under partitioning they stay whole on every device.
      input_output_aliases: ``{operand index: result index}``: the result is
        written into the operand's buffer (``jax.ffi.ffi_call``'s argument of
        the same name). Each pair must have the same shape and dtype. Without
        donation (``jax.jit(..., donate_argnums=...)``) XLA copies the operand
        first, so the op stays functional either way; the handler must accept
        an output that aliases an input (``xla_ffi``'s in-place buffers).
      has_side_effect: the call has effects beyond its results, so XLA keeps
        it even when its results are unused, and does not merge two identical
        calls. In a program partitioned over several devices (outside
        ``shard_map``, without ``num_batch_dims``) the call runs once, on one
        device, under GSPMD; Shardy drops that sharding, so there it raises
        ValueError naming the op and the target while lowering.
      tokens: ``(operand index, result index)`` of the target's token operand
        and token result (``Token``/``ResultToken`` in Rust), which the op's
        callers do not see: the op has JAX's ordered effect (that of
        ``io_callback(..., ordered=True)``), and the lowering passes the effect's
        token in and takes the new one out, so such calls (and ordered
        callbacks) run in program order.

    An argument of the wrong type (a ``name`` that is not a non-empty str, a rule
    that is not callable, a ``targets`` that is not a dict of str, a platform JAX
    does not know, ``has_side_effect`` that is not a bool, ...) raises TypeError
    (ValueError for a value of the right type that cannot be right) naming the op
    and the argument, when the op is made.
    """

    #: Whether JAX's rule tables hold the op weakly (see ``__init__``).
    _held_weakly = False
    #: The operands' names, for error messages (a declared op reads its declaration's).
    _operand_names: Sequence[str] = ()

    def __init__(
        self,
        name: str,
        *,
        abstract_eval: AbstractEval,
        targets: TargetNames | None = None,
        jnp_impl: Callable[..., Sequence[Any]] | None = None,
        attributes: Callable[[Params], Mapping[str, Any]] | None = None,
        num_batch_dims: Callable[..., int] | None = None,
        batched: tuple[Sequence[bool], Sequence[bool]] | None = None,
        reductions: Mapping[int, Callable[..., Any]] | None = None,
        extra_results: Mapping[str, Callable[..., Sequence[ShapedArray]]] | None = None,
        input_output_aliases: Mapping[int, int] | None = None,
        has_side_effect: bool = False,
        tokens: tuple[int, int] | None = None,
    ) -> None:
        check_op_arguments(
            name,
            abstract_eval=abstract_eval,
            targets=targets,
            jnp_impl=jnp_impl,
            attributes=attributes,
            num_batch_dims=num_batch_dims,
            batched=batched,
            reductions=reductions,
            extra_results=extra_results,
            input_output_aliases=input_output_aliases,
            has_side_effect=has_side_effect,
            tokens=tokens,
        )
        self.name = name
        self.tokens = tokens
        self.input_output_aliases: dict[int, int] = dict(input_output_aliases or {})
        self.has_side_effect = bool(has_side_effect)
        self.targets: dict[str, str] = dict(targets or {})
        self.jnp_impl = jnp_impl
        self._attributes = attributes or dict
        self._num_batch_dims = num_batch_dims
        self._batched = None if batched is None else flags(f"binding.Op {name!r}", batched)
        self.reductions: dict[int, Callable[..., Any]] = dict(reductions or {})
        self._extra_results: dict[str, Callable[..., Sequence[ShapedArray]]] = dict(extra_results or {})
        #: Eager evaluation: one jitted bind per set of params, the most recently used few.
        self._eager: dict[tuple[tuple[tuple[str, Hashable], ...], int], Callable[..., Any]] = {}
        #: Eager calls under ``vmap`` that loop over the batch: one jitted loop per
        #: set of params and mapped operands (:mod:`xla_ffi_rs.binding.sequential`).
        self._eager_maps: dict[Any, Callable[..., Any]] = {}
        #: Per set of params, the depths whose jitted bind a call is running now.
        self._eager_running: dict[tuple[tuple[str, Hashable], ...], set[int]] = {}
        self._eager_lock = threading.RLock()  # RLock: a finalizer run by gc under it may call the op
        #: The declaration the op was built from (:func:`op`), or None.
        self.declaration: Declaration | None = None
        #: Set for an op that :func:`op` (or :func:`~xla_ffi_rs.python_op`) memoizes:
        #: takes the op out of that memo when a rule is (re)defined on it.
        self._forget_memo: Callable[[Op], None] | None = None
        self._declared_abstract_eval = abstract_eval
        # JAX keeps a primitive's rules in global tables for the rest of the process.
        # They reach the op through `_ref`: a strong reference by default, a weak one
        # for subclasses with `_held_weakly` (which keep themselves alive while traced
        # code uses them), so that such an op nothing else refers to is freed.
        self._ref: Callable[[], Op | None] = weakref.ref(self) if self._held_weakly else _Strong(self)
        self.primitive = Primitive(name)
        self.primitive.multiple_results = True
        if self._held_weakly:  # the tables would keep the rules (and primitive) forever
            weakref.finalize(self, forget_primitive, self.primitive).atexit = False  # nothing to free at exit
        self.primitive.def_impl(weak_method(self._ref, name, "_eager_impl"))
        typed = self._typed_abstract_eval(abstract_eval)
        if tokens is not None:
            effect = ordered_effect()
            self.primitive.def_effectful_abstract_eval(lambda *a, **p: (typed(*a, **p), {effect}))
        elif self.has_side_effect:
            self.primitive.def_effectful_abstract_eval(lambda *a, **p: (typed(*a, **p), {FFI_SIDE_EFFECT}))
        else:
            self.primitive.def_abstract_eval(typed)
        self._register_lowerings()

    def __call__(self, *operands: ArrayLike, **params: Any) -> tuple[jax.Array, ...]:
        """Bind the op; params must be hashable. Returns one array per result.

        A declared op (:func:`op`) checks its params against the declared
        attributes first (TypeError/ValueError naming the target and attribute),
        and leaves out trailing optional operands passed as None (or not passed)."""
        if self.declaration is not None:
            params = self.declaration.params(params)
            operands = self.declaration.present(operands)
        else:
            self._check_params(params)
        self._check_operands(operands)
        args = self._split_batch_alike(operands, params) if self.declaration is not None else operands
        return tuple(self.primitive.bind(*_match_varying(args), **params))

    def _split_batch_alike(self, operands: Sequence[Any], params: Mapping[str, Any]) -> Sequence[Any]:
        """On a mesh with explicit axes, the batched operands' batch axes split alike
        (:mod:`xla_ffi_rs.binding.batch_split`); unchanged elsewhere, and where the
        operands do not fit the shape rule (the bind then says how)."""
        assert self.declaration is not None
        try:
            avals = [jax.typeof(x) for x in operands]
            specs = [explicit_spec(a) for a in avals]
            if all(s is None for s in specs):
                return operands
            n_batch = self.batch_dims(*avals, **params)
        except Exception:  # the bind's checks name what is wrong
            return operands
        return split_batch_alike(operands, avals, specs, self.declaration.batched_in, n_batch)

    def _check_params(self, params: Mapping[str, Any]) -> None:
        """TypeError naming the op (its targets) and the param for a value JAX cannot
        keep as an equation's parameter: a traced one, or one that is not hashable
        (a list, a dict, a NumPy array), where JAX's words name neither."""
        where = ", ".join(sorted(set(self.targets.values()))) or self.name
        for name, value in params.items():
            if isinstance(value, Tracer):
                raise traced_attribute(f"{where}: attribute {name!r}", type(value).__name__)
            try:
                hash(value)
            except TypeError:
                hint = "; pass a tuple" if isinstance(value, (list, np.ndarray)) else ""
                raise TypeError(
                    f"{where}: attribute {name!r}: expected a hashable value (a number, bool, str or a tuple of "
                    f"them), got {type(value).__name__}{hint}"
                ) from None

    def _check_operands(self, operands: Sequence[Any]) -> None:
        """TypeError (or ValueError) naming the op and the operand for an operand JAX
        cannot read as an array (None, a string, an object array, a list, ...)."""
        if self.declaration is not None:
            names = [o["name"] for o in self.declaration.operands]
            check_operands(self.declaration.target, names, operands)
        else:
            check_operands(self.name, self._operand_names, operands)

    def __repr__(self) -> str:
        return f"Op({self.name!r}, targets={self.targets!r})"

    # -- identity: an op is one registration, not a value ---------------------

    def __copy__(self) -> Op:
        """The op itself: it is one JAX primitive with its rules and (for a python
        op) its registered functions, so a copy would share them and break once the
        original is freed."""
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> Op:
        """The op itself, as :meth:`__copy__` (an object holding an op deep-copies
        to one holding the same op, as it does for a function)."""
        return self

    def __reduce__(self) -> Any:
        raise TypeError(
            f"{self.name}: an op cannot be pickled: it is a JAX primitive with rules registered in this "
            "process; pickle what it is made from (the function and arguments given to python_op, or "
            "binding.op) and make the op again in the other process"
        )

    # -- evaluation and lowering -------------------------------------------

    def _eager_impl(self, *operands: Any, **params: Any) -> Sequence[Any]:
        # One jitted bind per set of params and per "depth": each call runs the bind
        # of the lowest depth no other running call uses. An op whose Python function
        # calls the same op (recursion) makes its inner call while the outer jitted
        # call runs, which JAX refuses ("Recursively calling jit"), and a call on
        # another thread would wait for a running first call of a bind (its
        # compilation) that may be waiting for it (a function calling the op on a
        # shard, on XLA's threads): so no two running calls share a bind. Counting
        # the running calls instead picked, on a thread, the bind of its own outer
        # call once a call on another thread had returned.
        frozen = freeze(params)
        with self._eager_lock:
            busy = self._eager_running.setdefault(frozen, set())
            depth = next(d for d in range(len(busy) + 1) if d not in busy)
            busy.add(depth)
            key = (frozen, depth)
            jitted = self._eager.pop(key, None)  # put back last: the least recently used goes first
            if jitted is None:
                while len(self._eager) >= _EAGER_CACHE_SIZE:
                    self._eager.pop(next(iter(self._eager)))
                jitted = jax.jit(_binder(self.primitive, params))
            self._eager[key] = jitted
        try:
            if jax.config.jax_disable_jit:
                # Under `jax.disable_jit()` the jitted bind would call the bind again,
                # which calls this impl: run it jitted, as JAX's own eager primitives
                # are (`dispatch.apply_primitive` turns jit back on around the call).
                with jax.disable_jit(False):
                    outs: Sequence[Any] = jitted(*operands)
            else:
                outs = jitted(*operands)
        finally:
            with self._eager_lock:
                busy.discard(depth)
                if not busy:
                    self._eager_running.pop(frozen, None)
        return outs

    def _register_lowerings(self) -> None:
        if self.jnp_impl is not None:
            mlir.register_lowering(self.primitive, _jnp_lowering(self.name, self.jnp_impl))
        elif self.targets:
            mlir.register_lowering(self.primitive, _no_target_lowering(self.name, self.targets))
        for platform, target in self.targets.items():
            try:
                mlir.register_lowering(self.primitive, self._ffi_lowering(target, platform), platform=platform)
            except NotImplementedError as e:  # JAX knows no such platform
                raise ValueError(f"binding.Op {self.name!r}: targets: platform {platform!r}: {e}") from None
            if self._num_batch_dims is not None:
                _sharding.register_batch_partitionable(target)

    def _lowering_keepalive(self, params: dict[str, Any]) -> Any:
        """What a lowered program must keep alive until it is compiled and while it
        runs (None: nothing): see :class:`xla_ffi_rs.python_ops.PythonOp`."""
        return None

    def _lowering_args(self, ctx: Any) -> dict[str, Any]:
        """``mlir.custom_call`` arguments: aliases (checked) and side effects."""
        args: dict[str, Any] = {"has_side_effect": True} if self.has_side_effect else {}
        for i, o in self.input_output_aliases.items():
            if not (0 <= i < len(ctx.avals_in) and 0 <= o < len(ctx.avals_out)):
                raise ValueError(
                    f"{self.name}: input_output_aliases {{{i}: {o}}} out of range for "
                    f"{len(ctx.avals_in)} operands and {len(ctx.avals_out)} results"
                )
            a, r = ctx.avals_in[i], ctx.avals_out[o]
            if (a.shape, a.dtype) != (r.shape, r.dtype):
                raise ValueError(
                    f"{self.name}: input_output_aliases {{{i}: {o}}} needs operand {i} and result {o} of "
                    f"the same shape and dtype, got {a.str_short()} and {r.str_short()}"
                )
        if self.input_output_aliases:
            args["operand_output_aliases"] = dict(self.input_output_aliases)
        return args

    def _ffi_lowering(self, target: str, platform: str) -> Callable[..., Any]:
        ref, name = self._ref, self.name

        def lowering(ctx: Any, *operands: Any, **params: Any) -> list[Any]:
            results = call(ctx, *operands, **params)
            # Each result held to the sharding its type names, as jax's own
            # primitives are (on a mesh mixing explicit and auto axes nothing else
            # holds it there).
            return [constrain_to_type(ctx, r, a) for r, a in zip(results, ctx.avals_out, strict=True)]

        def call(ctx: Any, *operands: Any, **params: Any) -> list[Any]:
            op = _live(ref, name)
            attributes = _checked_attributes(target, _wide_u64(op._attributes(params)))
            keep = op._lowering_keepalive(params)
            # Held by the Lowered and Compiled objects; not for jax.export, which
            # refuses any keepalive (before its own, clearer check of the target).
            if keep is not None and not ctx.module_context.lowering_parameters.for_export:
                ctx.module_context.add_keepalive(keep)
            lowering_args = op._lowering_args(ctx)
            extra_avals: Callable[..., Sequence[ShapedArray]] = op._extra_results.get(platform, _no_results)
            extra = extra_avals(*ctx.avals_in, **params)
            call_ctx = ctx.replace(avals_out=[*ctx.avals_out, *extra])
            n_out = len(ctx.avals_out)
            if op.tokens is not None:
                return _token_call(call_ctx, ctx, target, op.tokens, operands, attributes, lowering_args)[:n_out]
            if op._num_batch_dims is None or not _sharding.in_spmd(ctx):
                if op.has_side_effect:
                    _refuse_side_effect_partitioned(ctx, op, target)
                return list(jax.ffi.ffi_lowering(target, **lowering_args)(call_ctx, *operands, **attributes))[:n_out]
            _refuse_symbolic_partitioned(target, op, ctx.avals_in)
            batched_in, batched_out = op.batched(len(ctx.avals_in), n_out, **params)
            results = _sharding.batch_partitioned_call(
                call_ctx,
                target,
                operands,
                attributes,
                op.batch_dims(*ctx.avals_in, **params),
                batched_in,
                [*batched_out, *[False] * len(extra)],
                lowering_args=lowering_args,
            )[:n_out]
            for index, formula in op.reductions.items():
                results[index] = _lower_jnp(ctx, formula, index, operands, params)
            return results

        return lowering

    def batched(self, n_in: int, n_out: int, **params: Any) -> tuple[list[bool], list[bool]]:
        """Which operands and results carry the batch axes (see ``batched``), for a
        call with static parameters ``params``."""
        batched_in, batched_out = self._batched or ([True] * n_in, [True] * n_out)
        # A call without its optional operands binds fewer than the declaration has.
        return list(batched_in)[:n_in], [b and i not in self.reductions for i, b in enumerate(batched_out)]

    def def_lowering(self, platform: str, rule: Callable[..., Any]) -> Callable[..., Any]:
        """Replace the lowering for one platform (e.g. a target with an extra result)."""
        mlir.register_lowering(self.primitive, rule, platform=platform)
        self._rule_defined()
        return rule

    # -- transformation rules ---------------------------------------------

    def def_jvp(self, rule: _JvpRuleT) -> _JvpRuleT:
        """Register the JVP rule (usable as a decorator). It is called as
        ``rule(primals, tangents, **params)``, with the call's attributes."""
        self._check_rule(rule, "JVP")

        def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
            dense = tuple(ad.instantiate_zeros(t) for t in tangents)
            return checked_jvp(self.name, rule(tuple(primals), dense, **params))

        ad.primitive_jvps[self.primitive] = jvp
        self._rule_defined()
        return rule

    def def_transpose(self, rule: _TransposeRuleT) -> _TransposeRuleT:
        """Register the transpose rule of an op linear in some operands. It is called
        as ``rule(cotangents, *operands, **params)``, with the call's attributes."""
        self._check_rule(rule, "transpose")

        def transpose(cts: Sequence[Any], *operands: Any, **params: Any) -> list[Any]:
            dense = tuple(ad.instantiate_zeros(c) for c in cts)
            return checked_cotangents(self.name, rule(dense, *operands, **params), len(operands))

        ad.primitive_transposes[self.primitive] = transpose
        self._rule_defined()
        return rule

    def _check_rule(self, rule: Callable[..., Any], kind: str) -> None:
        """A declared op's rule must take its attributes (TypeError naming them)."""
        if self.declaration is not None:
            names = [a["name"] for a in self.declaration.attributes]
            check_rule_takes_attributes(self.declaration.target, kind, rule, names)

    def _rule_defined(self) -> None:
        """Called when a rule is (re)defined on the op: an op made by :func:`op` or
        ``python_op`` then leaves its memo (another call with the same arguments makes
        a new op, without this rule)."""
        forget, self._forget_memo = self._forget_memo, None
        if forget is not None:
            forget(self)

    def def_batching(self, rule: _BatchRuleT) -> _BatchRuleT:
        """Register the batching (vmap) rule."""

        ref, name = self._ref, self.name
        self._rule_defined()

        def batch(operands: Sequence[Any], dims: Sequence[BatchDim], **params: Any) -> tuple[Any, Any]:
            op = _live(ref, name)
            if op.declaration is not None:  # each example must pass the checks the call without vmap does
                with eval_context():
                    op._declared_abstract_eval(
                        *(_example_aval(x, d) for x, d in zip(operands, dims, strict=True)), **params
                    )
            return checked_batch(name, rule(operands, dims, **params))

        batching.primitive_batchers[self.primitive] = batch
        return rule

    def _typed_abstract_eval(self, abstract_eval: AbstractEval) -> Callable[..., list[ShapedArray]]:
        """Abstract eval whose results carry the sharding and varying axes in their types."""

        ref, name = self._ref, self.name

        def wrapped(*avals: ShapedArray, **params: Any) -> list[ShapedArray]:
            with eval_context():  # jnp code in abstract_eval computes, under every JAX version
                outs = checked_avals(name, abstract_eval(*avals, **params))
            typed = _live(ref, name)._with_explicit_sharding(outs, avals, params)
            if any(_varying(a) for a in avals):
                return [_with_vma(out, avals) for out in typed]
            return typed

        return wrapped

    def _with_explicit_sharding(
        self, outs: list[ShapedArray], avals: Sequence[ShapedArray], params: Params
    ) -> list[ShapedArray]:
        """Type the results' shardings on a mesh with explicit axes (without this, jax
        would take them to be replicated and gather them for the next op): a result
        shaped like an operand of its kind (batched or not) is split like the first
        such operand that is split at all (y like x, dweight like the weight; a
        tangent like the point, when the tangent is a replicated constant such as
        ``ones_like(x)``); another batched result is split like the first
        batched operand along the batch axes and whole along the others; another
        unbatched result is whole. The partitioner reshards where the call needs it."""
        specs = [explicit_spec(a) for a in avals]
        typed_in = [(a, s) for a, s in zip(avals, specs, strict=True) if s is not None]
        if not typed_in:
            # No operand is split, but they are typed on a mesh with explicit axes (a
            # row inside vmap of a split batch): the results are whole on that mesh,
            # as jnp's would be. Left on no mesh, vmap put the batch axis's mesh axis
            # into a sharding without that mesh ("Resource axis: data ... is not found
            # in mesh: ()") at the next jnp call.
            mesh = next((m for m in map(_explicit_mesh, avals) if m is not None), None)
            if mesh is None:
                return outs
            return [
                out
                if _explicit_mesh(out) is not None
                else out.update(
                    sharding=jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*[None] * out.ndim))
                )
                for out in outs
            ]
        mesh = typed_in[0][0].sharding.mesh
        batched_in, batched_out = self.batched(len(avals), len(outs), **params)
        n_batch = self.batch_dims(*avals, **params)
        lead = next((s[:n_batch] for s, b in zip(specs, batched_in, strict=True) if b and s), ())
        typed = []
        for out, batched in zip(outs, batched_out, strict=True):
            like = [
                s
                for a, s, b in zip(avals, specs, batched_in, strict=True)
                if s is not None and b == batched and a.shape == out.shape
            ]
            entries = like[0] if like else lead if batched else ()
            out_spec = jax.sharding.PartitionSpec(*entries, *[None] * (out.ndim - len(entries)))
            typed.append(out.update(sharding=jax.sharding.NamedSharding(mesh, out_spec)))
        return typed

    def batch_dims(self, *avals: ShapedArray, **params: Any) -> int:
        """Number of leading axes the op treats independently (0 if undeclared)."""
        return 0 if self._num_batch_dims is None else self._num_batch_dims(*avals, **params)


def _token_call(
    call_ctx: Any,
    ctx: Any,
    target: str,
    tokens: tuple[int, int],
    operands: Sequence[Any],
    attributes: Mapping[str, Any],
    lowering_args: dict[str, Any],
) -> list[Any]:
    """The custom call of a token target: the ordered effect's token inserted as
    operand ``tokens[0]``, its result ``tokens[1]`` handed on as the new token.
    In a program partitioned over several devices (outside ``shard_map``) XLA's
    partitioner requires a sharding of the side effect: under GSPMD the call runs
    once, on one device, on the whole operands (as an ordered ``io_callback``
    does); Shardy drops that sharding on this call, so there it is refused."""
    at_in, at_out = tokens
    effect = ordered_effect()
    avals_in, avals_out, args = [*call_ctx.avals_in], [*call_ctx.avals_out], [*operands]
    avals_in.insert(at_in, abstract_token())
    avals_out.insert(at_out, abstract_token())
    axis_context = ctx.module_context.axis_context
    spmd = isinstance(axis_context, mlir.ShardingContext) and axis_context.num_devices > 1
    if spmd and _sharding.shardy_partitions():
        ways = [
            "outside the sharded jit on a value on one device (jax.device_put(x, jax.devices()[0]))",
            "inside a shard_map over every mesh axis (one call per device)",
        ]
        if _sharding.gspmd_available():
            ways.append("with jax_use_shardy_partitioner off (one call, on one device, as an ordered io_callback)")
        raise ValueError(
            f"{target}: an op with an ordered effect (a Token operand and ResultToken result) is not supported in "
            f"a program partitioned over several devices ({axis_context.num_devices}) under the Shardy "
            "partitioner, which drops the one-device sharding XLA requires of the call: call it "
            + ", ".join(ways[:-1])
            + f", or {ways[-1]}"
        )
    sharding = ordered_effect_sharding(axis_context, len(avals_out)) if spmd else None
    args.insert(at_in, ctx.tokens_in.get(effect))
    aliases = lowering_args.pop("operand_output_aliases", {})
    if aliases:  # the indices of the call, which has the token besides
        lowering_args["operand_output_aliases"] = {i + (i >= at_in): o + (o >= at_out) for i, o in aliases.items()}
    lowering_args["has_side_effect"] = True
    sub = call_ctx.replace(avals_in=avals_in, avals_out=avals_out)
    outs: list[Any] = list(jax.ffi.ffi_lowering(target, **lowering_args)(sub, *args, **attributes))
    if sharding is not None:  # every result is one of the call's
        set_sharding(ctx.module_context, outs[0].owner, sharding)
    token: Any = outs.pop(at_out)
    ctx.set_tokens_out(ctx.tokens_in.update_tokens(mlir.TokenSet({effect: token})))
    return outs


def _refuse_symbolic_partitioned(target: str, op: Any, avals: Sequence[ShapedArray]) -> None:
    """ValueError for a call partitioned over several devices with a symbolic
    dimension (jax.export): the partitioned call is planned on known shapes."""
    for i, a in enumerate(avals):
        dims = [d for d in a.shape if not is_concrete(d)]
        if dims:
            names = [o["name"] for o in op.declaration.operands] if op.declaration is not None else op._operand_names
            name = names[i] if i < len(names) else "?"
            raise ValueError(
                f"{target}: operand {i} ({name}): dimension `{dims[0]}` is symbolic (jax.export), and a call "
                f"partitioned over several devices needs known shapes, got {tuple(a.shape)}: export it for one "
                "device, or with concrete shapes"
            )


def _refuse_side_effect_partitioned(ctx: Any, op: Op, target: str) -> None:
    """ValueError for an op with ``has_side_effect`` (and no batch axes) in a program
    partitioned over several devices (outside ``shard_map``), naming the op, the
    target and the ways that work. XLA's partitioner refuses a side effect it would
    replicate (``UNIMPLEMENTED: Side-effect ops cannot be replicated``, or an
    ``INTERNAL: RET_CHECK`` when the result is unused). A one-device sharding on the
    call is no way out: Shardy drops it, and under GSPMD XLA's batch partitioner,
    once any op has registered the call's target (every ``python_op`` shares one),
    runs the call on every device on the whole operands."""
    axis_context = ctx.module_context.axis_context
    if not (isinstance(axis_context, mlir.ShardingContext) and axis_context.num_devices > 1):
        return
    ways = [
        "outside the sharded jit on a value on one device (jax.device_put(x, jax.devices()[0]))",
        "inside a shard_map over every mesh axis (one call per device)",
        "or with num_batch_dims (one call per device, on its shard; XLA drops it when its results are unused)",
    ]
    raise ValueError(
        f"{op.name} ({target}): an op with has_side_effect=True is not supported in a program partitioned over several "
        f"devices ({axis_context.num_devices}): XLA would run the effect on every device or refuse it: call it "
        + ", ".join(ways)
    )


def _no_results(*avals: ShapedArray, **params: Any) -> list[ShapedArray]:
    return []


def _lower_jnp(ctx: Any, formula: Callable[..., Any], index: int, operands: Sequence[Any], params: Params) -> Any:
    """Lower ``formula(*operands, **params)`` as the op's result ``index``."""
    lower = mlir.lower_fun(lambda *ops: (formula(*ops, **params),), multiple_results=True)
    return lower(ctx.replace(primitive=None, avals_out=[ctx.avals_out[index]]), *operands)[0]


def _explicit_mesh(aval: ShapedArray) -> Any:
    """The mesh in ``aval``'s type when it has an explicit axis, else None."""
    mesh = getattr(getattr(aval, "sharding", None), "mesh", None)
    types = getattr(mesh, "axis_types", None) or ()
    return mesh if any(t == jax.sharding.AxisType.Explicit for t in types) else None


def explicit_spec(aval: ShapedArray) -> tuple[Any, ...] | None:
    """The partition spec in ``aval``'s type (explicit mesh axes), padded to its rank;
    None when the type names no mesh axis."""
    sharding = getattr(aval, "sharding", None)
    spec = tuple(getattr(sharding, "spec", None) or ())
    if not any(entry is not None for entry in spec):
        return None
    padding: int = aval.ndim - len(spec)
    return spec + (None,) * padding


def _example_aval(x: Any, dim: BatchDim) -> ShapedArray:
    """The type of one example of ``x`` batched along ``dim`` (all of it if unbatched)."""
    aval: ShapedArray = jax.typeof(x)
    if dim is NOT_MAPPED:
        return aval
    return ShapedArray(aval.shape[:dim] + aval.shape[dim + 1 :], aval.dtype)


def _varying(x: Any) -> frozenset[Any]:
    """The manual mesh axes ``x`` varies over inside ``shard_map`` (empty outside)."""
    mat = getattr(x, "manual_axis_type", None)
    return frozenset(getattr(mat, "varying", None) or ())


def _with_vma(out: ShapedArray, avals: Sequence[ShapedArray]) -> ShapedArray:
    """Inside ``shard_map``, results vary over the same mesh axes as the operands
    (which :func:`_match_varying` made equal), and keep the split over the mesh's
    explicit axes that :meth:`Op._with_explicit_sharding` typed (a ``shard_map``
    over some of the axes); outside it this is a no-op."""
    for a in avals:
        if _varying(a):
            mesh = jax.sharding.get_abstract_mesh()
            entries = explicit_spec(out) or (None,) * len(out.shape)
            sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*entries))
            varying: ShapedArray = out.update(sharding=sharding, manual_axis_type=a.manual_axis_type)
            return varying
    return out


def _match_varying(operands: Sequence[Any]) -> Sequence[Any]:
    """Cast invariant operands to the varying axes of the others, as jax does for its
    own primitives inside ``shard_map``. The transpose of that cast is a ``psum``: it
    is what sums a replicated weight's gradient over the shards."""
    types = [jax.typeof(x) if hasattr(x, "shape") else None for x in operands]
    axes = frozenset().union(*(_varying(t) for t in types))
    if not axes:
        return operands
    return [
        jax.lax.pcast(x, tuple(sorted(axes - _varying(t))), to="varying") if t is not None and axes - _varying(t) else x
        for x, t in zip(operands, types, strict=True)
    ]


def freeze(params: Params) -> tuple[tuple[str, Hashable], ...]:
    """A key for a call's static parameters: equal when the parameters are the same
    values of the same types (``1``, ``1.0`` and ``True`` differ, as they do for
    ``jax.jit``'s static arguments; ``0.0`` and ``-0.0`` differ, since a function
    can tell them apart (``1 / k``, ``np.copysign``); a NaN equals a NaN, of
    Python's ``float`` or a NumPy scalar type, so it does not make a new key per
    call)."""
    return tuple(sorted((k, _typed(v)) for k, v in params.items()))


def _typed(value: Hashable) -> Hashable:
    if isinstance(value, (float, np.floating)):
        return (type(value), _float_key(value))
    if isinstance(value, (complex, np.complexfloating)):
        return (type(value), _float_key(value.real), _float_key(value.imag))
    if isinstance(value, tuple):
        return _uniform_tuple_key(value) or (tuple, tuple(_typed(v) for v in value))
    return (type(value), value)


def _uniform_tuple_key(value: tuple[Any, ...]) -> Hashable | None:
    """:func:`_typed`'s key of a tuple whose elements are all of one of Python's
    ``float``, ``int``, ``bool`` or ``str`` (a long array attribute: 10^5 values), made
    with whole-array operations, not element by element: the values' bits with every
    NaN made one, or the values themselves. None for any other tuple. No key of
    :func:`_typed` has this key's form, ``(tuple, type, values)``."""
    kinds = set(map(type, value))
    if len(kinds) != 1:
        return None
    (kind,) = kinds
    if kind is float:
        bits = np.array(value, np.float64)
        bits[np.isnan(bits)] = np.nan
        return (tuple, float, bits.tobytes())
    if kind in (int, bool, str):
        return (tuple, kind, value)
    return None


def _float_key(value: Any) -> Hashable:
    """A float as a key that tells ``-0.0`` from ``0.0`` and equals itself when NaN."""
    if value != value:
        return "nan"
    return (value, bool(np.signbit(value)))


#: How many sets of params an op keeps a jitted bind for, for eager calls.
_EAGER_CACHE_SIZE = 32


def _no_target_lowering(name: str, targets: dict[str, str]) -> Callable[..., Any]:
    """The lowering on a platform the op has no target for (and no ``jnp_impl``):
    JAX's own error named only the primitive ("MLIR translation rule for primitive
    ... not found"), not the target, the platforms it has, or that the targets are
    taken when the op is built."""

    def lowering(ctx: Any, *args: Any, **params: Any) -> Any:
        missing = [p for p in ctx.module_context.platforms if p not in targets]
        target = next(iter(targets.values()))
        raise NotImplementedError(
            f"{name}: no FFI target for platform {', '.join(map(repr, missing))} (the op lowers to {target} on "
            f"{', '.join(map(repr, targets))} only). The op takes its targets when it is built: register the "
            f"handlers for that platform first (xla_ffi_rs.register_targets(native.targets({missing[0]!r}), "
            f"{missing[0]!r}), for a plugin's PyO3 module `native`), then build the op (binding.op / binding.ops)"
        )

    return lowering


def _jnp_lowering(name: str, jnp_impl: Callable[..., Sequence[Any]]) -> Callable[..., Any]:
    """``jnp_impl`` lowered as jnp code, checking as it is traced that it gives the
    results ``abstract_eval`` promised: a mismatch was an MLIR verifier error (or a
    ``safe_zip`` one) naming neither the op nor the result."""

    def lowering(ctx: Any, *args: Any, **params: Any) -> Any:
        avals_out = ctx.avals_out

        def checked(*operands: Any, **p: Any) -> Any:
            results = jnp_impl(*operands, **p)
            if hasattr(results, "shape") and len(avals_out) == 1:
                results = [results]  # one result given bare (jax 0.10 would iterate it)
            _check_jnp_results(name, results, avals_out)
            return results

        outs = mlir.lower_fun(checked, multiple_results=True)(ctx, *args, **params)
        return [constrain_to_type(ctx, o, a) for o, a in zip(outs, avals_out, strict=True)]

    return lowering


def _check_jnp_results(name: str, results: Any, avals_out: Sequence[Any]) -> None:
    """ValueError (count, shape) or TypeError (dtype) naming the op and the result
    where ``jnp_impl``'s ``results`` are not ``avals_out``; nothing where they
    cannot be compared (tokens, what is not a sequence of arrays: the lowering then
    reports what it reports)."""
    if not isinstance(results, (tuple, list)):
        return
    if len(results) != len(avals_out):
        raise ValueError(
            f"{name}: jnp_impl returned {counted(len(results), 'result')}, abstract_eval gives {len(avals_out)}"
        )
    for i, (r, a) in enumerate(zip(results, avals_out, strict=True)):
        if not all(hasattr(v, "shape") and hasattr(v, "dtype") for v in (r, a)):
            continue
        if tuple(np.shape(r)) != tuple(a.shape):
            raise ValueError(
                f"{name}: jnp_impl result {i}: expected {_describe(a)} (abstract_eval), got {_describe(r)}"
            )
        if np.dtype(r.dtype) != np.dtype(a.dtype):
            raise TypeError(f"{name}: jnp_impl result {i}: expected {_describe(a)} (abstract_eval), got {_describe(r)}")


def _describe(aval: Any) -> str:
    return f"{np.dtype(aval.dtype).name}[{','.join(map(str, aval.shape))}]"


def _binder(primitive: Primitive, params: Params) -> Callable[..., Any]:
    """``primitive.bind`` with ``params``, as a plain function (what jit caches best)."""

    def bind(*operands: Any) -> Any:
        return primitive.bind(*operands, **params)

    # JAX's errors about the call's arguments (operands committed to different
    # devices, say) name the function jitted: the op, not `_binder.<locals>.bind`;
    # and a NaN under jax_debug_nans is an error naming it, as for JAX's primitives.
    mark_primitive_callable(bind, primitive.name)
    return bind


class _Strong:
    """A strong reference with ``weakref.ref``'s call syntax."""

    __slots__ = ("obj",)

    def __init__(self, obj: Op) -> None:
        self.obj = obj

    def __call__(self) -> Op:
        return self.obj


def _live(ref: Callable[[], Op | None], name: str) -> Op:
    """The op behind ``ref``; a clear error if it was garbage collected."""
    op = ref()
    if op is None:
        raise RuntimeError(f"{name}: this op was garbage collected; keep a reference to it while it is used")
    return op


def weak_method(ref: Callable[[], Op | None], name: str, method: str) -> Callable[..., Any]:
    """``getattr(op, method)`` of the op behind ``ref``, called without holding the op."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(_live(ref, name), method)(*args, **kwargs)

    return call


def _wide_u64(attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    """``attributes`` with each ``np.uint64`` beyond int64 as a ui64 MLIR attribute
    (in the lowering's MLIR context): JAX converts a ``np.uint64`` through int64
    and fails there (``RuntimeError: std::bad_cast``, naming nothing). MLIR takes
    the same 64 bits as an int64."""
    if not any(isinstance(v, np.uint64) and v > np.iinfo(np.int64).max for v in attributes.values()):
        return attributes
    u64 = mlir.ir.IntegerType.get_unsigned(64)
    return {
        k: mlir.ir.IntegerAttr.get(u64, int(v) - 2**64)
        if isinstance(v, np.uint64) and v > np.iinfo(np.int64).max
        else v
        for k, v in attributes.items()
    }


def _checked_attributes(target: str, attributes: Mapping[str, Any]) -> Mapping[str, Any]:
    """``attributes``, each one checked to convert to an MLIR attribute: a
    TypeError (ValueError for an int out of range) naming the target and the
    attribute, where JAX's own words name neither (``Python int too large to
    convert to C long``, ``No attribute handler defined for type``)."""
    for name, value in attributes.items():
        if isinstance(value, str):
            check_utf8(f"{target}: attribute {name!r}", value)
        try:
            mlir.ir_attribute(value)
        except OverflowError:
            raise ValueError(
                f"{target}: attribute {name!r}: expected an integer that fits in int64 (a np.uint64 for a u64), "
                f"got {value}"
            ) from None
        except (TypeError, ValueError, RuntimeError) as e:
            raise TypeError(
                f"{target}: attribute {name!r}: expected a number, bool, str, NumPy array or dict of them, "
                f"got {type(value).__name__} ({e})"
            ) from None
    return attributes
