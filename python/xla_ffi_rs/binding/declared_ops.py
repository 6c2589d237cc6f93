"""Ops built from what a Rust ``#[handler(...)]`` declares: :func:`op` (one
target), :func:`ops` (several, with the transposes between them linked) and
:func:`infer` (the native shape and dtype checker). Public through
:mod:`xla_ffi_rs.binding`, whose docstring and ``docs/binding.md`` describe them.

Example:
    >>> import xla_ffi_rs
    >>> op(xla_ffi_rs.declarations()["xla_ffi_rs.rms_norm_fwd"]).name
    'rms_norm_fwd'
"""

from __future__ import annotations

import difflib
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from numpy.typing import DTypeLike

from xla_ffi_rs import _registration
from xla_ffi_rs._compat import ShapedArray, ad
from xla_ffi_rs.binding import declared_rules, op_memo
from xla_ffi_rs.binding.declaration import Declaration
from xla_ffi_rs.binding.op_class import Op, TargetNames

__all__ = ["infer", "op", "ops"]


def infer(
    declaration: Mapping[str, Any], shapes: Sequence[tuple[int, ...]], dtypes: Sequence[DTypeLike]
) -> tuple[list[tuple[tuple[int, ...], str]], int]:
    """The result shapes and dtype names of a declared op for operands of
    ``shapes`` and ``dtypes`` (NumPy names, or NumPy or JAX dtypes), and its batch rank (the number of
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

    shape_args, dtype_args = _infer_args(declaration, shapes, dtypes)
    results, batch = _native.infer(declaration, shape_args, dtype_args)  # it checks its arguments
    return [(tuple(s), str(d)) for s, d in results], int(batch)


_INT64_MAX = 2**63 - 1


def _infer_args(declaration: Any, shapes: Any, dtypes: Any) -> tuple[Any, Any]:
    """``shapes`` and ``dtypes`` as the native checker reads them: each shape a tuple of
    ints, each dtype a NumPy name (a NumPy or JAX dtype, or scalar type, is named). An
    element that is neither raises naming the target, the operand and the element
    (the checker's own message named only the outer list). Anything that is not a
    list or tuple is left to the checker, which names it."""
    if not isinstance(declaration, Mapping):
        return shapes, dtypes
    target = declaration.get("target", "infer")
    operands = declaration.get("operands")

    def which(i: int) -> str:
        try:
            return f"operand {i} ({operands[i]['name']})"  # type: ignore[index]
        except (TypeError, KeyError, IndexError):
            return f"operand {i}"

    if isinstance(shapes, (list, tuple)):
        checked = []
        for i, shape in enumerate(shapes):
            try:
                if any(isinstance(d, (bool, np.bool_)) for d in shape):
                    raise TypeError  # operator.index reads True as a dimension of 1
                dims = tuple(operator.index(d) for d in shape)
            except TypeError:
                raise TypeError(f"{target}: {which(i)}: expected a shape (a tuple of ints), got {shape!r}") from None
            if any(abs(d) > _INT64_MAX for d in dims):
                raise ValueError(f"{target}: {which(i)}: shape {dims} has a dimension beyond int64")
            checked.append(dims)
        shapes = checked
    if isinstance(dtypes, (list, tuple)):
        names = []
        for i, dtype in enumerate(dtypes):
            if isinstance(dtype, str):
                names.append(dtype)
                continue
            try:
                if dtype is None:  # np.dtype(None) is float64
                    raise TypeError
                names.append(np.dtype(dtype).name)
            except (TypeError, ValueError):  # ValueError: a PRNG key array, which has no NumPy dtype
                raise TypeError(
                    f"{target}: {which(i)}: expected a dtype (a NumPy name such as 'float32', or a NumPy or JAX "
                    f"dtype), got {dtype!r:.200}"
                ) from None
        dtypes = names
    return shapes, dtypes


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
    has_side_effect: bool = False,
    transpose: Op | None = None,
) -> Op:
    """An :class:`Op` built from a handler's declaration (``#[handler(shapes = ...,
    dtypes = ..., linear = ..., transpose = ...)]`` in Rust, handed to Python by
    ``xla_ffi::python::declarations``: ``xla_ffi_rs.declarations()[target]``, or a
    plugin module's ``declarations()[target]``).

    Everything that follows from the declaration is done here:

    * abstract eval: the result shapes and dtypes, and the handler's own checks,
      run by the native checker (:func:`infer`) while tracing, so a bad
      operand raises the handler's words (TypeError for a dtype, ValueError for a
      shape) before anything is lowered;
    * params: checked against the declared attributes and converted to their
      types in the call (``f32`` -> ``np.float32``, ``i64`` -> ``np.int64``, ...); an
      optional attribute passed as None (or left out) is not in the call; an enum
      attribute (``#[derive(AttrEnum)]``) takes a variant's integer or name and
      raises ValueError naming the valid values for anything else;
    * operands: an optional operand (``Option<Buffer<..>>``, a ``?`` spec) passed
      as None (or left out) is not in the call; optional results are always
      requested;
    * tokens: a handler with one ``Token`` operand and one ``ResultToken`` result
      becomes an op without them, with JAX's ordered effect: its calls run in
      program order (see ``docs/binding.md``, "Tokens");
    * vmap: one call, the vmapped axis entering the batch ellipsis (the one that
      starts the first operand's spec); see :mod:`xla_ffi_rs.binding.declared_rules`;
    * sharding: the operands and results that start with the batch ellipsis are
      split along it, the others stay whole (``num_batch_dims`` is the batch
      rank); a result without the batch ellipsis of an op that has one is a sum
      over the batch and needs a ``reductions`` formula;
    * JVP, for the ``linear`` operands (an op linear in only some operands has
      none for the others, and one linear in none has none at all: differentiating
      it raises NotImplementedError naming the target, until a rule is given with
      :meth:`Op.def_jvp`); transpose, from ``linear``
      and ``transpose`` (the op of the transpose target: ``transpose=``, this op
      itself when the target names itself, or :func:`ops` for a pair).

    Hand-written rules still override these (:meth:`Op.def_jvp`,
    :meth:`Op.def_transpose`, :meth:`Op.def_batching`).

    Calling ``op`` again with the same declaration (equal by value) and the same
    arguments (functions and ops: the same objects) returns the same op, so an op
    built inside a function called per step is traced and compiled once; an op
    whose rules were changed since (``def_jvp`` and the others) is not returned
    again. An op lives for the rest of the process (JAX's rule tables keep it):
    an op built from a fresh ``jnp_impl`` lambda per call is a new op each time.

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
      has_side_effect: as for :class:`Op` (``jax.ffi.ffi_call``'s argument of the
        same name): the handler has effects beyond its results (it counts, logs,
        writes a file), so XLA keeps every call, also one whose results are
        unused, and does not merge two identical calls into one. Without it the
        call is pure to JAX and XLA: an unused call is dropped and
        ``op(x)[0] + op(x)[0]`` may run once. (For calls in program order, declare
        a ``Token`` operand and ``ResultToken`` result instead.)
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
    k = _memo_key(
        decl, targets, name, jnp_impl, reductions, extra_results, input_output_aliases, has_side_effect, transpose
    )
    found = op_memo.lookup(k)
    if found is not None:
        return found
    result = _build(decl, name, targets, jnp_impl, reductions, extra_results, input_output_aliases, has_side_effect)
    if decl.transpose is not None:
        if transpose is None and decl.transpose == decl.target:
            transpose = result
        _link_transpose(result, transpose)
    elif transpose is not None:
        raise ValueError(f"binding.op: {decl.target}: transpose= given, but the declaration names no transpose target")
    op_memo.remember(k, result)
    return result


def _memo_key(decl: Declaration, targets: TargetNames | None, *options: Any) -> Any:
    """What :func:`op` builds an op from (:mod:`~xla_ffi_rs.binding.op_memo`), the
    default targets as they are registered now; None (no memo) where the target is
    not registered (:func:`_build` then says so)."""
    if targets is None:
        try:
            targets = _registration.target_names(decl.target)
        except ValueError:
            return None
    return op_memo.key(decl.raw, targets, *options)


def _build(
    decl: Declaration,
    name: str | None,
    targets: TargetNames | None = None,
    jnp_impl: Callable[..., Sequence[Any]] | None = None,
    reductions: Mapping[int, Callable[..., Any]] | None = None,
    extra_results: Mapping[str, Callable[..., Sequence[ShapedArray]]] | None = None,
    input_output_aliases: Mapping[int, int] | None = None,
    has_side_effect: bool = False,
) -> Op:
    """:func:`op` but for the transpose rule."""
    for arg, value, what in (
        ("reductions", reductions, "result index -> jnp formula"),
        ("input_output_aliases", input_output_aliases, "operand index -> result index"),
    ):
        if value is not None and not isinstance(value, Mapping):
            raise TypeError(f"binding.op: {decl.target}: {arg}: expected a dict of {what}, got {type(value).__name__}")
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
        has_side_effect=has_side_effect,
        tokens=decl.tokens,
    )
    result.declaration = decl
    result.def_batching(declared_rules.batching_rule(result))
    if decl.linear_in:
        ad.primitive_jvps[result.primitive] = declared_rules.linear_jvp(result)
    else:
        ad.primitive_jvps[result.primitive] = declared_rules.no_jvp(result)
    return result


def _link_transpose(result: Op, transpose: Op | None) -> None:
    decl = result.declaration
    assert decl is not None
    if transpose is None:
        result.def_transpose(declared_rules.untransposable(result))
        return
    other = transpose.declaration
    if other is None or other.target != decl.transpose:
        got = other.target if other is not None else repr(transpose)
        raise ValueError(f"binding.op: {decl.target}: transpose: expected the op of {decl.transpose}, got {got}")
    declared_rules.transpose_plan(decl, other)  # ValueError when the two do not fit
    result.def_transpose(declared_rules.transpose_rule(result, transpose))


#: The keyword arguments of :func:`op` that :func:`ops` takes per op.
_OPS_OPTIONS = frozenset(
    {"targets", "jnp_impl", "reductions", "extra_results", "input_output_aliases", "has_side_effect"}
)


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
    if not isinstance(declarations, Mapping):
        raise TypeError(
            f"binding.ops: declarations: expected a dict of target name -> declaration, got {type(declarations).__name__}"
        )
    by_name: dict[str, str] = {}
    for target in declarations:
        if not isinstance(target, str):
            raise TypeError(
                f"binding.ops: declarations: expected a dict of target name -> declaration, got the key {target!r} "
                f"({type(target).__name__})"
            )
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
        bad = sorted(set(kwargs) - _OPS_OPTIONS)
        if bad:
            raise TypeError(f"binding.ops: {n}: unknown option(s) {bad}")
        if "targets" not in kwargs:
            kwargs["targets"] = None if targets is None else targets(decl.target)
        built[n] = _build(decl, n, **kwargs)
    by_target = {decl.target: built[n] for n, decl in decls.items()}
    for n, decl in decls.items():
        if decl.transpose is None:
            continue
        if decl.transpose not in declarations:
            # A misspelt `transpose = "..."` in the Rust #[handler]: no option can build it.
            close = difflib.get_close_matches(decl.transpose, list(declarations), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ValueError(
                f"binding.ops: {decl.target} transposes into {decl.transpose}, which none of the declarations "
                f"declares{hint}; declared: {', '.join(sorted(declarations))}"
            )
        if decl.transpose not in by_target:
            raise ValueError(
                f"binding.ops: {decl.target} transposes into {decl.transpose}, which is not built: "
                f"add {decl.transpose.rsplit('.', 1)[-1]}={{}}"
            )
        _link_transpose(built[n], by_target[decl.transpose])
    return built
