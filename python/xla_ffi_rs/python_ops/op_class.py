"""The class :class:`PythonOp`: a :class:`~xla_ffi_rs.binding.Op` whose CPU
implementation is a Python function, called through the ``xla_ffi_rs.python_call``
target (lowered to ``jax.pure_callback`` elsewhere). Its abstract evaluation,
lowering, registry keys, batching and the JVP and transpose rules given to it;
:mod:`xla_ffi_rs.python_ops` describes what it does, :func:`xla_ffi_rs.python_op`
makes one.

Example:
    >>> from xla_ffi_rs.python_ops.op_class import TARGET
    >>> TARGET
    'xla_ffi_rs.python_call'
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback
from jax.typing import ArrayLike

from xla_ffi_rs import _native
from xla_ffi_rs._compat import ShapedArray, Tracer, ad
from xla_ffi_rs._validation import STATIC_UNDER_PMAP, counted
from xla_ffi_rs.binding import BatchDim, BatchRule, Op, batch_size, move_batch_axis_to_front
from xla_ffi_rs.binding.op_arguments import flags
from xla_ffi_rs.binding.op_class import freeze, weak_method
from xla_ffi_rs.binding.sequential import sequential_map
from xla_ffi_rs.python_ops import rules
from xla_ffi_rs.python_ops.avals import (
    check_batch_axes,
    check_operand_dtype,
    check_result_size,
    result_dtype,
    result_shape,
)
from xla_ffi_rs.python_ops.call import (
    UFUNC_INTO_MIN_SIZE,
    invoker,
    is_ufunc,
    outputs_settler,
    settler,
    unwrapped,
)

__all__ = ["TARGET", "AbstractEvalFn", "PythonOp", "user_params"]

#: The FFI target that runs every Python op (CPU only).
TARGET = "xla_ffi_rs.python_call"

#: The primitive parameter that holds the batch shape of a vectorized vmap.
_BATCH = "_batch_shape"
#: The primitive parameter that holds the operands' ranks at the call (so that the
#: function sees its arrays with these ranks, whatever the partitioner does).
_RANKS = "_operand_ranks"
#: The primitive parameter that holds the op itself: traced and compiled code keeps
#: the op (and so its registered functions) alive through its jaxpr.
_OP = "_python_op"
_INTERNAL = (_BATCH, _RANKS, _OP)
#: XLA:CPU's limit of computations in flight per device (jaxlib's CPU client): an
#: eager call made inside this many running python op calls would never start.
_MAX_IN_FLIGHT = 32


AbstractEvalFn = Callable[..., Any]
"""``(*operand_avals, **params) -> aval | sequence of avals`` (anything with
``.shape`` and ``.dtype``, e.g. ``jax.ShapeDtypeStruct``; the operand aval
itself for an elementwise function)."""

#: A rule given to :meth:`PythonOp.def_jvp_rule` or :meth:`PythonOp.def_transpose_rule`,
#: returned as it is (so the decorated function keeps its type).
_Rule = TypeVar("_Rule", bound=Callable[..., Any])
_BatchRuleT = TypeVar("_BatchRuleT", bound=BatchRule)


class PythonOp(Op):
    """A JAX operation whose CPU implementation is a Python function.

    Made by :func:`python_op`; a :class:`xla_ffi_rs.binding.Op`, so rules can also
    be (re)defined with :meth:`def_jvp_rule`, :meth:`def_transpose_rule` and
    :meth:`def_batching`. Calling it binds the op; keyword arguments are static
    parameters passed to the function and to every rule (they must be hashable).
    It returns one array if ``abstract_eval`` gives one aval for these parameters,
    else a tuple (so the call is typed ``Any``; annotate the result where it matters,
    e.g. ``y: jax.Array = op(x)``).
    """

    _held_weakly = True

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        abstract_eval: AbstractEvalFn,
        name: str,
        vectorized: bool,
        takes_outputs: bool,
        num_batch_dims: int | None,
        batched: tuple[Sequence[bool], Sequence[bool]] | None,
        fixed: tuple[int, ...] = (),
        has_side_effect: bool = False,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"python_op: fn must be callable, got {type(fn).__name__}")
        if not callable(abstract_eval):
            raise TypeError(f"python_op: abstract_eval must be callable, got {type(abstract_eval).__name__}")
        if num_batch_dims is not None:
            if not isinstance(num_batch_dims, (int, np.integer)) or isinstance(num_batch_dims, (bool, np.bool_)):
                raise TypeError(
                    f"python_op: num_batch_dims must be a non-negative int, got {type(num_batch_dims).__name__}"
                )
            if num_batch_dims < 0:
                raise ValueError(f"python_op: num_batch_dims must be a non-negative int, got {num_batch_dims!r}")
            num_batch_dims = int(num_batch_dims)
        for flag, value in (
            ("vectorized", vectorized),
            ("takes_outputs", takes_outputs),
            ("has_side_effect", has_side_effect),
        ):
            if not isinstance(value, (bool, np.bool_)):
                raise TypeError(f"python_op: {flag} must be a bool, got {type(value).__name__}")
        vectorized, takes_outputs = bool(vectorized), bool(takes_outputs)
        if batched is not None:
            batched = flags("python_op", batched)
        self.fn = fn
        #: Indices of the operands that are not differentiable (``fixed=``).
        self.fixed = fixed
        self.num_batch_dims = num_batch_dims
        self.vectorized = vectorized
        self.takes_outputs = takes_outputs
        self._user_abstract_eval = abstract_eval
        #: Frozen static parameters -> whether abstract_eval gives one aval (not a tuple).
        self._single: dict[tuple[tuple[str, Hashable], ...], bool] = {}
        self._keys: dict[tuple[Any, ...], int] = {}
        # The registry keys this op owns: unregistered when the op is freed.
        self._key_list: list[int] = []
        weakref.finalize(self, _native.unregister, self._key_list)
        ref = weakref.ref(self)
        super().__init__(
            name,
            abstract_eval=weak_method(ref, name, "_abstract_eval"),
            targets={"cpu": TARGET},
            jnp_impl=weak_method(ref, name, "_callback_impl"),
            attributes=weak_method(ref, name, "_callback_attributes"),
            num_batch_dims=None
            if num_batch_dims is None
            else (lambda *avals, **params: _batch_layout(num_batch_dims, batched, _vmap_levels(params))[0] or 0),
            batched=batched,
            has_side_effect=bool(has_side_effect),
        )
        super().def_batching(weak_method(ref, name, "_sequential_or_vectorized"))
        # Without a JVP rule: integer and bool results have zero tangents, a float
        # result says it has no rule, and a fixed operand is named, with rules or without.
        names = rules.names_of(fn)
        self._operand_names = names
        ad.primitive_jvps[self.primitive] = rules.jvp_rule(
            None, name, names, fixed, _vmap_levels, user_params, self.primitive.bind
        )
        if fixed:
            ad.primitive_transposes[self.primitive] = rules.transpose_rule(
                None, name, names, fixed, lambda *a: [], lambda params: True
            )
        # What eager calls put in the `_OP` parameter: their jitted programs live in
        # the op (`_eager`), so a strong reference there would make a cycle, which
        # jaxlib 0.10 frees only partly when the garbage collector breaks it.
        self._weak_handle = _WeakHandle(ref)

    def __call__(self, *operands: ArrayLike, **params: Any) -> Any:
        for name in _INTERNAL:
            if name in params:
                raise TypeError(f"{self.name}: the parameter name {name!r} is reserved")
        for key, value in params.items():
            if isinstance(value, Tracer):
                raise TypeError(
                    f"{self.name}: static parameter {key!r} is traced ({type(value).__name__}), but it must be a "
                    f"Python value known when tracing; under jax.jit pass it as a static argument "
                    f"(static_argnames='{key}'; {STATIC_UNDER_PMAP}) or close over it; pass an array as an "
                    "operand instead"
                )
            try:
                hash(value)
            except TypeError:
                raise TypeError(
                    f"{self.name}: static parameter {key!r} must be hashable, got {type(value).__name__}"
                ) from None
        if self.fixed and self.fixed[-1] >= len(operands):
            raise ValueError(
                f"{self.name}: fixed={self.fixed!r} names operand {self.fixed[-1]}, "
                f"but the op is called with {counted(len(operands), 'operand')}"
            )
        if self._batched is not None and len(self._batched[0]) != len(operands):
            raise ValueError(
                f"{self.name}: batched gives flags for {len(self._batched[0])} operands, called with {len(operands)}"
            )
        self._check_operands(operands)
        single = self._single_for(operands, params)
        params[_RANKS] = tuple(int(np.ndim(x)) for x in operands)
        params[_OP] = self
        outs = super().__call__(*operands, **params)
        return outs[0] if single else outs

    def _eager_impl(self, *operands: Any, **params: Any) -> Sequence[Any]:
        running, here = _native.active_calls()
        if here and running >= _MAX_IN_FLIGHT:
            raise RuntimeError(
                f"{self.name}: called eagerly inside {running} running python op calls: XLA:CPU runs at most "
                f"{_MAX_IN_FLIGHT} computations at once per device, each of those waits for this call, and this "
                "call would wait for one of them to finish (forever); recurse fewer levels through ops"
            )
        params[_OP] = self._weak_handle
        return super()._eager_impl(*operands, **params)

    def __repr__(self) -> str:
        """The name, function and ``vectorized``, then the options not at their
        default (``takes_outputs``, ``num_batch_dims``, ``has_side_effect``)."""
        options = [("takes_outputs", self.takes_outputs, False), ("num_batch_dims", self.num_batch_dims, None)]
        options.append(("has_side_effect", self.has_side_effect, False))
        extra = "".join(f", {name}={value!r}" for name, value, default in options if value != default)
        return f"PythonOp({self.name!r}, fn={self.fn!r}, vectorized={self.vectorized}{extra})"

    def _single_for(self, operands: Sequence[Any], params: dict[str, Any]) -> bool:
        """Whether a call with these static parameters returns one array: abstract_eval
        of the call's own operands and parameters decides, run here when it has not run
        for them yet. (The bind may never run it for them: under ``vmap`` or ``jvp`` a
        rule of the op's may bind it with other parameters, or not at all.)"""
        frozen = freeze(params)
        single = self._single.get(frozen)
        if single is None:
            # Not the batch-axes check: under vmap these are one element's avals, while
            # the call the batching rule binds carries the vmap axes (checked there).
            self._avals([jax.typeof(x) for x in operands], params, check_batch_axes_too=False)
            single = self._single[frozen]
        return single

    def _is_single(self, params: dict[str, Any]) -> bool:
        """Whether abstract_eval gave one aval (not a tuple) for these parameters."""
        return self._single.get(freeze(user_params(params)), True)

    # -- abstract evaluation and lowering -----------------------------------

    def _abstract_eval(self, *avals: ShapedArray, **params: Any) -> list[ShapedArray]:
        return self._avals(avals, params)

    def _avals(
        self, avals: Sequence[ShapedArray], params: dict[str, Any], check_batch_axes_too: bool = True
    ) -> list[ShapedArray]:
        for i, a in enumerate(avals):
            check_operand_dtype(self.name, i, a)
        batch = tuple(params.get(_BATCH, ()))
        inner = [ShapedArray(a.shape[len(batch) :], a.dtype) for a in avals]
        user = user_params(params)
        out = rules.call_abstract(self.name, self._user_abstract_eval, inner, user)
        single = not isinstance(out, (tuple, list))
        if self._single.setdefault(freeze(user), single) != single:
            raise TypeError(
                f"{self.name}: abstract_eval returned {'one aval' if single else 'a sequence of avals'} for "
                f"operands ({', '.join(a.str_short() for a in inner)}) with parameters {user}, but "
                f"{'a sequence' if single else 'one aval'} for other operands with these parameters; whether the "
                "op returns one array or a tuple may depend on its static parameters only"
            )
        outs = [out] if single else list(out)
        if not outs:
            raise ValueError(
                f"{self.name}: abstract_eval returned no results, so the function would never run (JAX drops a "
                "call whose results are not used, and one with none is never used); return at least one result, "
                "or call the function through jax.debug.callback or jax.experimental.io_callback for its effects"
            )
        for i, o in enumerate(outs):
            if not (hasattr(o, "shape") and hasattr(o, "dtype")):
                raise TypeError(
                    f"{self.name}: abstract_eval must return avals (objects with .shape and .dtype, e.g. "
                    f"jax.ShapeDtypeStruct); result {i} is {type(o).__name__}"
                )
        results = [(result_shape(self.name, i, o), result_dtype(self.name, i, o)) for i, o in enumerate(outs)]
        for i, (dims, dtype) in enumerate(results):
            check_result_size(self.name, i, dims, dtype)
        if self._batched is not None and len(self._batched[1]) != len(results):
            raise ValueError(
                f"{self.name}: batched gives flags for {len(self._batched[1])} results, abstract_eval gave "
                f"{len(results)}"
            )
        if self.num_batch_dims and check_batch_axes_too:
            # The shapes of the call as bound, vmap axes in front (vectorized under
            # vmap), with the flags the partitioner gets there (see _batch_layout): a
            # scalar function vmapped has its batch axes from vmap.
            nbd, flags = _batch_layout(self.num_batch_dims, self._batched, len(batch))
            check_batch_axes(
                self.name, nbd or 0, flags, [(*batch, *a.shape) for a in inner], [(*batch, *s) for s, _ in results]
            )
        return [ShapedArray((*batch, *s), d) for s, d in results]

    def _callback_impl(self, *operands: Any, **params: Any) -> Sequence[Any]:
        """The lowering on platforms without the target (GPUs): ``jax.pure_callback``
        (``io_callback`` for an op with ``has_side_effect``), which copies operands to
        the host and results back, around the same call."""
        avals = self._abstract_eval(*[jax.typeof(x) for x in operands], **params)
        specs = tuple((tuple(a.shape), np.dtype(a.dtype)) for a in avals)
        invoke = self._invoker(user_params(params), None)

        def host(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
            wants_outs = self.takes_outputs or is_ufunc(unwrapped(self.fn), user_params(params))
            outs = tuple(np.empty(s, d) for s, d in specs) if wants_outs else ()
            code, payload = invoke(tuple(np.asarray(a) for a in arrays), specs, outs)
            if code:
                raise RuntimeError(f"{TARGET} (pure_callback): {payload}")
            return tuple(np.asarray(v).reshape(s) for v, (s, _) in zip(payload, specs, strict=True))

        shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
        if self.has_side_effect:  # kept and not merged, as the FFI call is
            effectful: Sequence[Any] = io_callback(host, shapes, *operands)
            return effectful
        outs: Sequence[Any] = jax.pure_callback(host, shapes, *operands)
        return outs

    def _lowering_keepalive(self, params: dict[str, Any]) -> Any:
        """The op, for a traced call (its ``_OP`` parameter is the op): a lowered
        program names its functions by registry key, and ``jit(f).lower(x)`` outlives
        ``f``'s caches (which held the op), so its ``compile()`` found the key gone
        (``NOT_FOUND``). An eager call's program (``_OP`` a weak handle) lives in the
        op itself: holding the op there would be a cycle."""
        op = params.get(_OP)
        return op if isinstance(op, PythonOp) else None

    def _callback_attributes(self, params: dict[str, Any]) -> dict[str, Any]:
        batch = len(params.get(_BATCH, ()))
        ranks = params.get(_RANKS)
        ranks = None if ranks is None else tuple(r + batch for r in ranks)
        return {"callback": self.key(user_params(params), ranks, batch)}

    def batched(self, n_in: int, n_out: int, **params: Any) -> tuple[list[bool], list[bool]]:
        """Which operands and results carry the batch axes: all of them in a
        vectorized call under ``vmap`` that has unbatched ones (see :func:`_batch_layout`)."""
        if _batch_layout(self.num_batch_dims, self._batched, _vmap_levels(params))[1] is None:
            return [True] * n_in, [True] * n_out
        return super().batched(n_in, n_out, **params)

    def key(self, params: dict[str, Any] | None = None, ranks: tuple[int, ...] | None = None, levels: int = 0) -> int:
        """The registry key of this op's function with these static parameters (and
        operand ranks, which undo the partitioner's unit axes, see :func:`~xla_ffi_rs.python_ops.call.logical`,
        and the vmap levels of a vectorized call, see :func:`_batch_layout`).
        The key is registered until the op is garbage collected."""
        frozen = (freeze(params or {}), ranks, levels)
        key = self._keys.get(frozen)
        if key is None:
            params = dict(sorted((params or {}).items()))
            plain = unwrapped(self.fn)
            outputs = self.takes_outputs or is_ufunc(plain, params)
            # A ufunc gets output arrays only where it writes into them (`ufunc_into`).
            min_elements = 0 if self.takes_outputs else UFUNC_INTO_MIN_SIZE
            # An exact ufunc runs on XLA's buffers when the handler can prove that safe.
            ufunc = plain if outputs and not self.takes_outputs and type(plain) is np.ufunc else None
            direct = self._direct(params, ranks)
            key = _native.register(
                self._invoker(params, ranks, levels),
                self.name,
                outputs,
                min_elements,
                direct,
                ufunc,
                direct_outputs=direct is not None and self.takes_outputs,
            )
            self._key_list.append(key)
            self._keys[frozen] = key
        return key

    def _invoker(self, params: dict[str, Any], ranks: tuple[int, ...] | None, levels: int = 0) -> Callable[..., Any]:
        """The function the Rust handler calls for this op with these static
        parameters (see :func:`xla_ffi_rs.python_ops.call.invoker`)."""
        nbd, batched = _batch_layout(self.num_batch_dims, self._batched, levels)
        single = self._single.get(freeze(params), True)
        return invoker(self.fn, self.name, self.takes_outputs, params, single, nbd, batched, ranks)

    def _direct(
        self, params: dict[str, Any], ranks: tuple[int, ...] | None
    ) -> tuple[Callable[..., Any], Callable[..., Any], bool] | None:
        """``(fn, settle, single)`` for the handler to call ``fn(*operands)`` itself
        (``fn(*operands, *outputs)`` with ``takes_outputs``), with no Python frame
        around it, when nothing needs one: no static parameters, no sharding unit
        axes to drop (None otherwise)."""
        if params or (self.num_batch_dims is not None and ranks is not None):
            return None
        if self.takes_outputs:
            return unwrapped(self.fn), outputs_settler(self.name), False
        single = self._single.get(freeze(params), True)
        return unwrapped(self.fn), settler(self.name, single), single

    # -- transformation rules ---------------------------------------------

    def _callable_rule(self, what: str, rule: Any) -> None:
        """TypeError naming the op unless ``rule`` is callable (else it would fail only
        when JAX first applies the rule, as ``'int' object is not callable``). A rule
        defined on the op makes it another op than :func:`python_op`'s arguments
        describe: a later call with them (an op made in a loop, given a rule of its
        own each time) makes a new op instead of returning this one."""
        if not callable(rule):
            raise TypeError(f"{self.name}: the {what} rule must be callable, got {type(rule).__name__}")
        self._rule_defined()

    def def_jvp_rule(self, rule: _Rule) -> _Rule:
        """Register ``rule(primals, tangents, **params) -> (out, tangent_out)``.

        ``out`` and ``tangent_out`` are one array or a tuple, like the op's result.
        A tangent JAX knows to be zero (an operand not differentiated) arrives as
        ``None``, and the rule may return ``None`` for a zero tangent out. A
        non-zero tangent for a ``fixed`` operand raises ``ValueError`` before the
        rule runs. Usable as a decorator.
        """
        self._callable_rule("jvp", rule)
        ad.primitive_jvps[self.primitive] = rules.jvp_rule(
            rule, self.name, rules.names_of(self.fn), self.fixed, _vmap_levels, user_params
        )
        return rule

    def def_transpose_rule(self, rule: _Rule) -> _Rule:
        """Register ``rule(cotangents, *operands, **params) -> cotangent per operand``.

        For an op linear in the operands for which :func:`~xla_ffi_rs.binding.is_linear_input`
        is true; ``cotangents`` is one array or a tuple, like the op's result, with
        ``None`` for a cotangent JAX knows to be zero (when all are, the rule is not
        called), and the rule returns ``None`` for the other operands (or a zero
        cotangent). Transposing with respect to a ``fixed`` operand raises
        ``ValueError``. Usable as a decorator.
        """
        self._callable_rule("transpose", rule)
        ref = weakref.ref(self)

        name, names = self.name, rules.names_of(self.fn)

        def checked(out: Any, operands: Sequence[Any]) -> list[Any]:
            return rules.checked_cotangents(name, names, out, operands)

        def call(ct: Any, operands: Sequence[Any], params: dict[str, Any]) -> list[Any]:
            batch = params.get(_BATCH, ())
            if not batch:
                return checked(rule(ct, *operands, **user_params(params)), operands)
            return rules.batched_transpose(rule, len(batch), ct, operands, user_params(params), checked)

        def single(params: dict[str, Any]) -> bool:
            op = ref()
            return op is None or op._is_single(params)

        ad.primitive_transposes[self.primitive] = rules.transpose_rule(
            rule, self.name, rules.names_of(self.fn), self.fixed, call, single
        )
        return rule

    def def_batching(self, rule: _BatchRuleT) -> _BatchRuleT:
        """Register a batching rule of your own: ``rule(operands, dims, **params)`` with
        the op's static parameters, returning ``(results, result_dims)``."""
        self._callable_rule("batching", rule)

        def batch(operands: Sequence[Any], dims: Sequence[BatchDim], **params: Any) -> tuple[Any, Any]:
            return rule(operands, dims, **user_params(params))

        super().def_batching(batch)
        return rule

    def _sequential_or_vectorized(
        self, operands: Sequence[Any], dims: Sequence[BatchDim], **params: Any
    ) -> tuple[Sequence[Any], Sequence[BatchDim]]:
        size = batch_size(operands, dims)
        if self.vectorized:
            moved = [move_batch_axis_to_front(x, d, size) for x, d in zip(operands, dims, strict=True)]
            batch = (size, *params.pop(_BATCH, ()))
            outs = self.primitive.bind(*moved, **params, **{_BATCH: batch})
            return outs, [0] * len(outs)
        mapped = [i for i, d in enumerate(dims) if d is not None]
        xs = [jnp.moveaxis(operands[i], int(dims[i] or 0), 0) for i in mapped]
        primitive, handle = self.primitive, self._weak_handle

        def call(eager: bool) -> Callable[..., Sequence[Any]]:
            # An eager loop names the op weakly, as an eager call does (it is kept in the op).
            bound = {**params, _OP: handle} if eager else params
            return lambda *args: primitive.bind(*args, **bound)

        outs = sequential_map(call, freeze(params), operands, mapped, xs, self._eager_maps)
        return outs, [0] * len(outs)


class _WeakHandle:
    """The op, held weakly, as a static parameter (hashed and compared by identity)."""

    __slots__ = ("__weakref__", "ref")

    def __init__(self, ref: weakref.ref[PythonOp]) -> None:
        self.ref = ref

    def __repr__(self) -> str:
        op = self.ref()
        return f"<weak {op.name if op is not None else 'freed op'}>"


def _batch_layout(
    k: int | None, batched: tuple[Sequence[bool], Sequence[bool]] | None, levels: int
) -> tuple[int | None, tuple[Sequence[bool], Sequence[bool]] | None]:
    """``(num_batch_dims, batched)`` of a call with ``levels`` vmap levels. A
    vectorized call under ``vmap`` carries the vmap axes in front of every operand
    and result, the ones ``batched=`` declares unbatched (a weight) included: there
    the partitioner splits the vmap axes alone, on every value (splitting them on
    the batched values only would pair each shard with the whole weight)."""
    if k is None or not levels or batched is None or all(all(flags) for flags in batched):
        return k, batched
    return levels, None


def _vmap_levels(params: dict[str, Any]) -> int:
    """How many vmap levels a vectorized call carries (its rules run vmapped)."""
    return len(params.get(_BATCH, ()))


def user_params(params: dict[str, Any]) -> dict[str, Any]:
    """The op's static parameters without the internal ones."""
    return {k: v for k, v in params.items() if k not in _INTERNAL}
