"""Define a JAX operation backed by XLA FFI targets in a few lines.

An :class:`Op` is a JAX primitive (``jax.extend.core.Primitive``) plus its
rules, each in a short function of its own:

* abstract evaluation: shapes and dtypes of the results (:class:`Op` argument);
* lowering: a typed-FFI custom call to the target registered for the platform
  being compiled for (``jax.ffi.ffi_lowering``); on a platform without a
  target, an optional jnp implementation is lowered instead;
* eager evaluation: the op is jit-compiled once per set of parameters;
* JVP (:meth:`Op.def_jvp`): any function of primals and tangents, so the
  tangent can come from another target or from jnp code;
* transpose (:meth:`Op.def_transpose`): for a linear op, typically a call of a
  backward target;
* batching (:meth:`Op.def_batching`): a rule that makes ONE vectorized call,
  e.g. :func:`elementwise_batching`.

Why a primitive rather than ``jax.custom_jvp``/``jax.custom_vjp`` around
``jax.ffi.ffi_call``: ``custom_vjp`` gives reverse mode only and
``custom_jvp`` cannot use a dedicated backward kernel. A primitive whose JVP
emits a *linear* primitive, whose transpose in turn calls the backward target,
gives forward mode, reverse mode with the backward kernel, and (with a JVP rule
on the backward op) higher orders, and it keeps full control of batching, so
``vmap`` never falls back to a loop (``ffi_call``'s ``vmap_method``, not
deprecated, makes one call for ``"expand_dims"`` or ``"broadcast_all"``, which
give every unbatched operand a batch axis, and loops for ``"sequential"``).

Sharding: an op may declare ``num_batch_dims``, the number of leading axes of
its operands over which it is independent (and, with ``batched``, which
operands and results carry those axes; ``reductions`` names the results that
are sums over them). Its targets are then registered as batch-partitionable,
and under ``jit`` over several devices the custom call is emitted so that XLA
(GSPMD or Shardy) runs it shard by shard with no all-gather, while unbatched
operands such as a weight stay whole (:mod:`xla_ffi_rs.sharding`).

Example: an elementwise "square" op with a jnp lowering only (an FFI target
name per platform would go in ``targets``):

    >>> import jax, jax.numpy as jnp
    >>> from xla_ffi_rs.binding import Op, elementwise_batching, same_as_operands
    >>> square = Op("demo_square", abstract_eval=same_as_operands(1),
    ...             jnp_impl=lambda x: (x * x,))
    >>> @square.def_jvp
    ... def _square_jvp(primals, tangents):
    ...     (x,), (dx,) = primals, tangents
    ...     return square(x), (2 * x * dx,)
    >>> _ = square.def_batching(elementwise_batching(square))
    >>> float(jax.grad(lambda x: square(x)[0])(3.0))
    6.0
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.typing import ArrayLike

from xla_ffi_rs import _declared_rules, _registration
from xla_ffi_rs import sharding as _sharding
from xla_ffi_rs._compat import FFI_SIDE_EFFECT, NOT_MAPPED, Primitive, ShapedArray, ad, batching, mlir
from xla_ffi_rs._declaration import Declaration

__all__ = [
    "NOT_MAPPED",
    "Declaration",
    "Op",
    "TargetNames",
    "elementwise_batching",
    "infer",
    "is_linear_input",
    "move_batch_axis_to_front",
    "op",
    "ops",
    "same_as_operands",
    "vmap_batching",
]

#: Platform (as JAX names it: "cpu", "cuda", "rocm", ...) -> FFI target name.
TargetNames = Mapping[str, str]
#: A batch dimension as JAX passes it to a batching rule: an axis or ``None``.
BatchDim = int | None
Params = dict[str, Any]


# The rule types are plain callables, so that rules with keyword-only params
# (``def rule(x, *, eps: float)``) type-check.

#: ``(*operand_avals, **params) -> result avals``.
AbstractEval = Callable[..., Sequence[ShapedArray]]
#: ``(primals, tangents, **params) -> (primal_outs, tangent_outs)``; tangents
#: arrive instantiated (symbolic zeros become arrays of zeros).
JvpRule = Callable[..., tuple[Sequence[Any], Sequence[Any]]]
#: ``(cotangents, *operands, **params) -> one cotangent (or None) per operand``;
#: cotangents arrive instantiated, linear operands are ``ad.UndefinedPrimal``
#: (test with :func:`is_linear_input`).
TransposeRule = Callable[..., Sequence[Any]]
#: ``(operands, batch_dims, **params) -> (results, result_batch_dims)``.
BatchRule = Callable[..., tuple[Sequence[Any], Sequence[BatchDim]]]


def is_linear_input(x: Any) -> bool:
    """True for an operand a transpose rule must produce a cotangent for."""
    return bool(ad.is_undefined_primal(x))


def same_as_operands(num_results: int) -> AbstractEval:
    """Abstract eval for an op whose results all look like its first operand.

    >>> import numpy as np
    >>> from jax.core import ShapedArray
    >>> same_as_operands(2)(ShapedArray((3,), np.float32))[1]
    ShapedArray(float32[3])
    """

    def abstract_eval(*avals: ShapedArray, **params: Any) -> list[ShapedArray]:
        del params
        return [ShapedArray(avals[0].shape, avals[0].dtype)] * num_results

    return abstract_eval


class Op:
    """A JAX operation lowered to XLA FFI targets (see the module docstring).

    Args:
      name: primitive name, as it appears in jaxprs.
      abstract_eval: computes result avals from operand avals and params.
      targets: FFI target name per platform. Platforms missing here lower
        ``jnp_impl`` instead (when given).
      jnp_impl: ``(*operands, **params) -> tuple of results`` in jnp; the
        lowering on platforms without a target, and the whole lowering of an
        op with no targets (e.g. a linear helper op with a custom transpose).
      attributes: maps the op's params to FFI attributes (keyword arguments of
        ``jax.ffi.ffi_lowering``'s rule); by default every param is passed.
      num_batch_dims: ``(*avals, **params) -> int``, the number of leading axes
        of the first operand that the op treats independently. With it, the
        op's targets are batch-partitionable (see the module docstring).
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
        it even when its results are unused.
    """

    #: Whether JAX's rule tables hold the op weakly (see ``__init__``).
    _held_weakly = False

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
    ) -> None:
        self.name = name
        self.input_output_aliases: dict[int, int] = dict(input_output_aliases or {})
        self.has_side_effect = bool(has_side_effect)
        self.targets: dict[str, str] = dict(targets or {})
        self.jnp_impl = jnp_impl
        self._attributes = attributes or dict
        self._num_batch_dims = num_batch_dims
        self._batched = batched
        self.reductions: dict[int, Callable[..., Any]] = dict(reductions or {})
        self._extra_results: dict[str, Callable[..., Sequence[ShapedArray]]] = dict(extra_results or {})
        #: Eager evaluation: one jitted bind per set of params, the newest few.
        self._eager: dict[tuple[tuple[str, Hashable], ...], Callable[..., Any]] = {}
        #: The declaration the op was built from (:func:`op`), or None.
        self.declaration: Declaration | None = None
        # JAX keeps a primitive's rules in global tables for the rest of the process.
        # They reach the op through `_ref`: a strong reference by default, a weak one
        # for subclasses with `_held_weakly` (which keep themselves alive while traced
        # code uses them), so that such an op nothing else refers to is freed.
        self._ref: Callable[[], Op | None] = weakref.ref(self) if self._held_weakly else _Strong(self)
        self.primitive = Primitive(name)
        self.primitive.multiple_results = True
        self.primitive.def_impl(_weak_method(self._ref, name, "_eager_impl"))
        typed = self._typed_abstract_eval(abstract_eval)
        if self.has_side_effect:
            self.primitive.def_effectful_abstract_eval(lambda *a, **p: (typed(*a, **p), {FFI_SIDE_EFFECT}))
        else:
            self.primitive.def_abstract_eval(typed)
        self._register_lowerings()

    def __call__(self, *operands: ArrayLike, **params: Any) -> tuple[jax.Array, ...]:
        """Bind the op; params must be hashable. Returns one array per result.

        A declared op (:func:`op`) checks its params against the declared
        attributes first (TypeError/ValueError naming the target and attribute)."""
        if self.declaration is not None:
            params = self.declaration.params(params)
        return tuple(self.primitive.bind(*_match_varying(operands), **params))

    def __repr__(self) -> str:
        return f"Op({self.name!r}, targets={self.targets!r})"

    # -- evaluation and lowering -------------------------------------------

    def _eager_impl(self, *operands: Any, **params: Any) -> Sequence[Any]:
        key = _freeze(params)
        jitted = self._eager.get(key)
        if jitted is None:
            while len(self._eager) >= _EAGER_CACHE_SIZE:
                self._eager.pop(next(iter(self._eager)), None)
            jitted = self._eager[key] = jax.jit(_binder(self.primitive, params))
        outs: Sequence[Any] = jitted(*operands)
        return outs

    def _register_lowerings(self) -> None:
        if self.jnp_impl is not None:
            mlir.register_lowering(self.primitive, mlir.lower_fun(self.jnp_impl, multiple_results=True))
        for platform, target in self.targets.items():
            if self._num_batch_dims is not None:
                _sharding.register_batch_partitionable(target)
            mlir.register_lowering(self.primitive, self._ffi_lowering(target, platform), platform=platform)

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
            op = _live(ref, name)
            attributes = op._attributes(params)
            lowering_args = op._lowering_args(ctx)
            extra_avals: Callable[..., Sequence[ShapedArray]] = op._extra_results.get(platform, _no_results)
            extra = extra_avals(*ctx.avals_in, **params)
            call_ctx = ctx.replace(avals_out=[*ctx.avals_out, *extra])
            n_out = len(ctx.avals_out)
            if op._num_batch_dims is None or not _sharding.in_spmd(ctx):
                return list(jax.ffi.ffi_lowering(target, **lowering_args)(call_ctx, *operands, **attributes))[:n_out]
            batched_in, batched_out = op.batched(len(ctx.avals_in), n_out)
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

    def batched(self, n_in: int, n_out: int) -> tuple[list[bool], list[bool]]:
        """Which operands and results carry the batch axes (see ``batched``)."""
        batched_in, batched_out = self._batched or ([True] * n_in, [True] * n_out)
        return list(batched_in), [b and i not in self.reductions for i, b in enumerate(batched_out)]

    def def_lowering(self, platform: str, rule: Callable[..., Any]) -> Callable[..., Any]:
        """Replace the lowering for one platform (e.g. a target with an extra result)."""
        mlir.register_lowering(self.primitive, rule, platform=platform)
        return rule

    # -- transformation rules ---------------------------------------------

    def def_jvp(self, rule: JvpRule) -> JvpRule:
        """Register the JVP rule (usable as a decorator)."""

        def jvp(primals: Sequence[Any], tangents: Sequence[Any], **params: Any) -> tuple[Any, Any]:
            dense = tuple(ad.instantiate_zeros(t) for t in tangents)
            outs, t_outs = rule(tuple(primals), dense, **params)
            return list(outs), list(t_outs)

        ad.primitive_jvps[self.primitive] = jvp
        return rule

    def def_transpose(self, rule: TransposeRule) -> TransposeRule:
        """Register the transpose rule of an op linear in some operands."""

        def transpose(cts: Sequence[Any], *operands: Any, **params: Any) -> list[Any]:
            dense = tuple(ad.instantiate_zeros(c) for c in cts)
            return list(rule(dense, *operands, **params))

        ad.primitive_transposes[self.primitive] = transpose
        return rule

    def def_batching(self, rule: BatchRule) -> BatchRule:
        """Register the batching (vmap) rule."""

        def batch(operands: Sequence[Any], dims: Sequence[BatchDim], **params: Any) -> tuple[Any, Any]:
            outs, out_dims = rule(operands, dims, **params)
            return list(outs), list(out_dims)

        batching.primitive_batchers[self.primitive] = batch
        return rule

    def _typed_abstract_eval(self, abstract_eval: AbstractEval) -> Callable[..., list[ShapedArray]]:
        """Abstract eval whose results carry the sharding and varying axes in their types."""

        ref, name = self._ref, self.name

        def wrapped(*avals: ShapedArray, **params: Any) -> list[ShapedArray]:
            outs = list(abstract_eval(*avals, **params))
            if any(_varying(a) for a in avals):
                return [_with_vma(out, avals) for out in outs]
            return _live(ref, name)._with_explicit_sharding(outs, avals, params)

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
        specs = [_explicit_spec(a) for a in avals]
        typed_in = [(a, s) for a, s in zip(avals, specs, strict=True) if s is not None]
        if not typed_in:
            return outs
        mesh = typed_in[0][0].sharding.mesh
        batched_in, batched_out = self.batched(len(avals), len(outs))
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


def _no_results(*avals: ShapedArray, **params: Any) -> list[ShapedArray]:
    return []


def _lower_jnp(ctx: Any, formula: Callable[..., Any], index: int, operands: Sequence[Any], params: Params) -> Any:
    """Lower ``formula(*operands, **params)`` as the op's result ``index``."""
    lower = mlir.lower_fun(lambda *ops: (formula(*ops, **params),), multiple_results=True)
    return lower(ctx.replace(primitive=None, avals_out=[ctx.avals_out[index]]), *operands)[0]


def _explicit_spec(aval: ShapedArray) -> tuple[Any, ...] | None:
    """The partition spec in ``aval``'s type (explicit mesh axes), padded to its rank;
    None when the type names no mesh axis."""
    sharding = getattr(aval, "sharding", None)
    spec = tuple(getattr(sharding, "spec", None) or ())
    if not any(entry is not None for entry in spec):
        return None
    padding: int = aval.ndim - len(spec)
    return spec + (None,) * padding


def _varying(x: Any) -> frozenset[Any]:
    """The manual mesh axes ``x`` varies over inside ``shard_map`` (empty outside)."""
    mat = getattr(x, "manual_axis_type", None)
    return frozenset(getattr(mat, "varying", None) or ())


def _with_vma(out: ShapedArray, avals: Sequence[ShapedArray]) -> ShapedArray:
    """Inside ``shard_map``, results vary over the same mesh axes as the operands
    (which :func:`_match_varying` made equal); outside it this is a no-op."""
    for a in avals:
        if _varying(a):
            mesh = jax.sharding.get_abstract_mesh()
            sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec(*[None] * len(out.shape)))
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


def _freeze(params: Params) -> tuple[tuple[str, Hashable], ...]:
    return tuple(sorted(params.items()))


#: How many sets of params an op keeps a jitted bind for, for eager calls.
_EAGER_CACHE_SIZE = 32


def _binder(primitive: Primitive, params: Params) -> Callable[..., Any]:
    """``primitive.bind`` with ``params``, as a plain function (what jit caches best)."""

    def bind(*operands: Any) -> Any:
        return primitive.bind(*operands, **params)

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


def _weak_method(ref: Callable[[], Op | None], name: str, method: str) -> Callable[..., Any]:
    """``getattr(op, method)`` of the op behind ``ref``, called without holding the op."""

    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(_live(ref, name), method)(*args, **kwargs)

    return call


# -- batching helpers -----------------------------------------------------


def move_batch_axis_to_front(x: Any, dim: BatchDim, size: int) -> jax.Array:
    """Move axis ``dim`` of ``x`` to the front; broadcast an unbatched ``x``.

    >>> move_batch_axis_to_front(jnp.ones((2, 3)), 1, 3).shape
    (3, 2)
    >>> move_batch_axis_to_front(jnp.ones((2,)), None, 4).shape
    (4, 2)
    """
    if dim is NOT_MAPPED:
        x = jnp.asarray(x)
        return jnp.broadcast_to(x, (size, *x.shape))
    return jnp.moveaxis(x, dim, 0)


def batch_size(operands: Sequence[Any], dims: Sequence[BatchDim]) -> int:
    """The size of the vmapped axis, read from the first batched operand."""
    for x, d in zip(operands, dims, strict=True):
        if d is not NOT_MAPPED:
            return int(jnp.shape(x)[d])
    raise ValueError("batching rule called with no batched operand")


def elementwise_batching(op: Op) -> BatchRule:
    """Batching for an elementwise op over same-shape operands: one call.

    Batched operands get the batch axis in front, unbatched ones are broadcast,
    and the op is called once on the stacked arrays.
    """

    def rule(
        operands: Sequence[Any], dims: Sequence[BatchDim], **params: Any
    ) -> tuple[Sequence[Any], Sequence[BatchDim]]:
        size = batch_size(operands, dims)
        moved = [move_batch_axis_to_front(x, d, size) for x, d in zip(operands, dims, strict=True)]
        outs = op(*moved, **params)
        return outs, [0] * len(outs)

    return rule


def vmap_batching(impl: Callable[..., Sequence[Any]]) -> BatchRule:
    """Batching for a jnp-implemented op: vmap its jnp implementation.

    The result is plain jnp code (no longer the op), which is differentiable
    and transposable by JAX's own rules.
    """

    def rule(
        operands: Sequence[Any], dims: Sequence[BatchDim], **params: Any
    ) -> tuple[Sequence[Any], Sequence[BatchDim]]:
        outs = jax.vmap(functools.partial(impl, **params), in_axes=tuple(dims))(*operands)
        return outs, [0] * len(outs)

    return rule


# -- ops built from declarations ---------------------------------------------


def infer(
    declaration: Mapping[str, Any], shapes: Sequence[tuple[int, ...]], dtypes: Sequence[str]
) -> tuple[list[tuple[tuple[int, ...], str]], int]:
    """The result shapes and dtype names of a declared op for operands of
    ``shapes`` and ``dtypes`` (numpy names), and its batch rank (the number of
    axes the batch ellipsis binds): the handler's own shape and dtype checks, run
    by the native checker. What a declared op's abstract eval calls.

    Raises:
      TypeError: for a dtype the handler refuses; ValueError: for a shape. The
        message is the handler's (target, operand index and name, expected, got).
        TypeError/ValueError too for arguments that are not a declaration, a list
        of shapes and a list of dtype names.

    >>> import xla_ffi_rs
    >>> fwd = xla_ffi_rs.declarations()["xla_ffi_rs.rms_norm_fwd"]
    >>> infer(fwd, [(8, 3, 4), (4,)], ["bfloat16", "float32"])
    ([((8, 3, 4), 'float32'), ((8, 3), 'float32')], 2)
    """
    from xla_ffi_rs import _native

    results, batch = _native.infer(declaration, shapes, dtypes)  # it checks its arguments
    return [(tuple(s), str(d)) for s, d in results], int(batch)


def _default_targets(target: str) -> dict[str, str]:
    try:
        return _registration.target_names(target)
    except ValueError:
        raise ValueError(
            f"binding.op: {target} is not a registered target; register it with xla_ffi_rs.register_targets, "
            f"or pass targets={{platform: name}} for a name registered with jax.ffi.register_ffi_target"
        ) from None


def op(
    declaration: Mapping[str, Any] | Declaration,
    *,
    name: str | None = None,
    targets: TargetNames | None = None,
    jnp_impl: Callable[..., Sequence[Any]] | None = None,
    reductions: Mapping[int, Callable[..., Any]] | None = None,
    extra_results: Mapping[str, Callable[..., Sequence[ShapedArray]]] | None = None,
    input_output_aliases: Mapping[int, int] | None = None,
    transpose: Op | None = None,
) -> Op:
    """An :class:`Op` built from a handler's declaration (``#[handler(shapes = ...,
    dtypes = ..., linear = ..., transpose = ...)]`` in Rust, handed to Python by
    ``xla_ffi::python::declarations``: ``_native.declarations()[target]``).

    Everything that follows from the declaration is done here:

    * abstract eval: the result shapes and dtypes, and the handler's own checks,
      run by the native checker (``_native.infer``) while tracing, so a bad
      operand raises the handler's words (TypeError for a dtype, ValueError for a
      shape) before anything is lowered;
    * params: checked against the declared attributes and converted to their
      types in the call (``f32`` -> ``np.float32``, ``i64`` -> ``np.int64``, ...); an
      optional attribute passed as None (or left out) is not in the call;
    * vmap: one call, the vmapped axis entering the batch ellipsis (the one that
      starts the first operand's spec); see :mod:`xla_ffi_rs._declared_rules`;
    * sharding: the operands and results that start with the batch ellipsis are
      split along it, the others stay whole (``num_batch_dims`` is the batch
      rank); a result without the batch ellipsis of an op that has one is a sum
      over the batch and needs a ``reductions`` formula;
    * JVP, for the ``linear`` operands (an op linear in only some operands has
      none for the others: give it with :meth:`Op.def_jvp`); transpose, from ``linear``
      and ``transpose`` (the op of the transpose target: ``transpose=``, this op
      itself when the target names itself, or :func:`ops` for a pair).

    Hand-written rules still override these (:meth:`Op.def_jvp`,
    :meth:`Op.def_transpose`, :meth:`Op.def_batching`).

    Args:
      declaration: one target's declaration dict (or another op's
        ``op.declaration``, to bind the same target differently).
      name: the primitive's name; by default the target's last dotted part.
      targets: platform -> FFI target name; by default the platforms where
        xla_ffi_rs registered the declaration's target
        (:func:`xla_ffi_rs.target_names`, which knows the targets of
        :func:`xla_ffi_rs.register_targets` too).
      jnp_impl, extra_results, input_output_aliases: as for :class:`Op`; an
        aliased result must have its operand's shape and dtype (TypeError
        while tracing otherwise).
      reductions: result index -> jnp formula of each result without the batch
        ellipsis (see :class:`Op`); also what vmap computes such a result with.
      transpose: the op of the declaration's transpose target.

    Raises:
      TypeError, ValueError: for a declaration that is not one (missing keys, no
        shape rule), a result summed over the batch without a ``reductions``
        formula, or a ``transpose`` op that does not fit.

    Example: the example ``scale`` target (``y = factor * x``, linear in x, its
    own transpose), with no rule written by hand:

    >>> import jax, jax.numpy as jnp
    >>> import xla_ffi_rs
    >>> from xla_ffi_rs import binding, examples
    >>> _ = examples.register()
    >>> scale = binding.op(xla_ffi_rs.declarations()["xla_ffi_rs.examples.scale"])
    >>> x = jnp.arange(3.0, dtype=jnp.float32)
    >>> scale(x, factor=2.0)[0].tolist()
    [0.0, 2.0, 4.0]
    >>> jax.grad(lambda x: scale(x, factor=3.0)[0].sum())(x).tolist()
    [3.0, 3.0, 3.0]
    """
    decl = declaration if isinstance(declaration, Declaration) else Declaration(declaration)
    result = _build(decl, name, targets, jnp_impl, reductions, extra_results, input_output_aliases)
    if decl.transpose is not None:
        if transpose is None and decl.transpose == decl.target:
            transpose = result
        _link_transpose(result, transpose)
    elif transpose is not None:
        raise ValueError(f"binding.op: {decl.target}: transpose= given, but the declaration names no transpose target")
    return result


def _build(
    decl: Declaration,
    name: str | None,
    targets: TargetNames | None = None,
    jnp_impl: Callable[..., Sequence[Any]] | None = None,
    reductions: Mapping[int, Callable[..., Any]] | None = None,
    extra_results: Mapping[str, Callable[..., Sequence[ShapedArray]]] | None = None,
    input_output_aliases: Mapping[int, int] | None = None,
) -> Op:
    """:func:`op` but for the transpose rule."""
    aliases = dict(input_output_aliases or {})
    reductions = dict(reductions or {})
    for i in reductions:
        if not (isinstance(i, int) and 0 <= i < len(decl.results)):
            raise ValueError(f"binding.op: {decl.target}: reductions: no result {i!r} (it has {len(decl.results)})")
    if decl.batch is not None:
        for i, (spec, batched) in enumerate(zip(decl.results, decl.batched_out, strict=True)):
            if not batched and i not in reductions:
                raise ValueError(
                    f"binding.op: {decl.target}: result {i} ({spec['name']}) does not start with the batch "
                    f"ellipsis ...{decl.batch}, so it sums over the batch when the call is split: pass "
                    f"reductions={{{i}: <jnp formula of the whole result>}}"
                )

    def abstract_eval(*avals: ShapedArray, **params: Any) -> list[ShapedArray]:
        outs = decl.infer(*avals)[0]
        for i, o in aliases.items():
            a, r = avals[i], outs[o]
            if (a.shape, a.dtype) != (r.shape, r.dtype):
                raise TypeError(
                    f"{result.name}: result {o} ({decl.results[o]['name']}) is {r.str_short()}, which cannot be "
                    f"written into operand {i} ({decl.operands[i]['name']}) of {a.str_short()} "
                    f"(input_output_aliases)"
                )
        return outs

    def num_batch_dims(*avals: ShapedArray, **params: Any) -> int:
        return decl.infer(*avals)[1]

    result = Op(
        name or decl.target.rsplit(".", 1)[-1],
        abstract_eval=abstract_eval,
        targets=_default_targets(decl.target) if targets is None else targets,
        jnp_impl=jnp_impl,
        attributes=decl.lowering_attributes,
        num_batch_dims=num_batch_dims if decl.batch is not None else None,
        batched=(decl.batched_in, decl.batched_out),
        reductions=reductions,
        extra_results=extra_results,
        input_output_aliases=aliases,
    )
    result.declaration = decl
    result.def_batching(_declared_rules.batching_rule(result))
    if decl.linear_in:
        ad.primitive_jvps[result.primitive] = _declared_rules.linear_jvp(result)
    return result


def _link_transpose(result: Op, transpose: Op | None) -> None:
    decl = result.declaration
    assert decl is not None
    if transpose is None:
        result.def_transpose(_declared_rules.untransposable(result))
        return
    other = transpose.declaration
    if other is None or other.target != decl.transpose:
        got = other.target if other is not None else repr(transpose)
        raise ValueError(f"binding.op: {decl.target}: transpose: expected the op of {decl.transpose}, got {got}")
    n_in = len(decl.results) + len(decl.operands) - len(decl.linear_in)
    if (len(other.operands), len(other.results)) != (n_in, len(decl.linear_in)):
        raise ValueError(
            f"binding.op: {decl.target}: its transpose {other.target} must take {n_in} operands (the results' "
            f"cotangents, then the non-linear operands) and give {len(decl.linear_in)} results (the cotangents of "
            f"{', '.join(decl.linear)}); it takes {len(other.operands)} and gives {len(other.results)}"
        )
    result.def_transpose(_declared_rules.transpose_rule(result, transpose))


def ops(
    declarations: Mapping[str, Mapping[str, Any]],
    *,
    targets: Callable[[str], TargetNames] | None = None,
    **options: Mapping[str, Any],
) -> dict[str, Op]:
    """Build several declared ops at once (:func:`op`), linking each ``transpose``
    to the op of the target it names. Returns op name -> :class:`Op`, an op's
    name being its target's last dotted part (``"xla_ffi_rs.kepler"`` ->
    ``"kepler"``).

    Args:
      declarations: target -> declaration (``_native.declarations()``, or a
        plugin module's ``declarations()``).
      targets: target -> ``{platform: FFI target name}``; by default where
        xla_ffi_rs registered the target (:func:`xla_ffi_rs.target_names`).
      **options: op name -> keyword arguments of :func:`op` for that op
        (``jnp_impl``, ``reductions``, ...). With any given, only the ops named
        are built; with none, every declaration is.

    Raises:
      ValueError: for an op name that no declaration has, two targets with the
        same op name, or a transpose target that is not built too.

    >>> import xla_ffi_rs
    >>> from xla_ffi_rs import binding
    >>> built = binding.ops(xla_ffi_rs.declarations(), kepler_tangent={}, kepler_cotangent={})
    >>> sorted(built)
    ['kepler_cotangent', 'kepler_tangent']
    """
    by_name: dict[str, str] = {}
    for target in declarations:
        short = target.rsplit(".", 1)[-1]
        if short in by_name and (not options or short in options):
            raise ValueError(f"binding.ops: {by_name[short]} and {target} have the same op name {short!r}")
        by_name[short] = target
    unknown = sorted(set(options) - set(by_name))
    if unknown:
        raise ValueError(f"binding.ops: no declaration for {unknown}; declared: {sorted(by_name)}")
    names = list(options) if options else list(by_name)
    decls = {n: Declaration(declarations[by_name[n]]) for n in names}
    built: dict[str, Op] = {}
    for n, decl in decls.items():
        kwargs = dict(options.get(n) or {})
        bad = sorted(set(kwargs) - {"targets", "jnp_impl", "reductions", "extra_results", "input_output_aliases"})
        if bad:
            raise TypeError(f"binding.ops: {n}: unknown option(s) {bad}")
        if "targets" not in kwargs:
            kwargs["targets"] = None if targets is None else targets(decl.target)
        built[n] = _build(decl, n, **kwargs)
    by_target = {decl.target: built[n] for n, decl in decls.items()}
    for n, decl in decls.items():
        if decl.transpose is None:
            continue
        if decl.transpose not in by_target:
            raise ValueError(
                f"binding.ops: {decl.target} transposes into {decl.transpose}, which is not built: "
                f"add {decl.transpose.rsplit('.', 1)[-1]}={{}}"
            )
        _link_transpose(built[n], by_target[decl.transpose])
    return built
