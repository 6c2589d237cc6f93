"""The small surface of JAX internals this package builds on, in one place.

Everything the package needs to define its own primitives is imported here and
nowhere else, so that a JAX release that moves a name needs a change in this
file only. Nearly all of it is public API in the JAX versions we support (0.10
and 0.12): ``jax.extend.core.Primitive``, ``jax.core.ShapedArray``,
``jax.core.Tracer`` and the ``jax.interpreters.{ad, batching, mlir,
partial_eval}`` rule registries. The exceptions, which JAX keeps private, are
imported when first used (they exist with the same signatures in every supported
JAX): Shardy's sharding-rule builder (:func:`sdy_sharding_rule`), the table of
linearization rules (:func:`linearize_with`) and the table of batching rules that
take the axis data (:func:`batching_rule`, :func:`set_batching_rule`), the
context of JAX's evaluation trace (:func:`eval_context`), the sharding of an
ordered callback (:func:`ordered_effect_sharding`, :func:`set_sharding`), the
conversion that marks an array weakly typed (:func:`weakly_typed`), and the list of
files whose frames traceback filtering hides (:func:`hide_frames`). This is
the only module of the package that imports from ``jax._src``.

Example:
    >>> from xla_ffi_rs._compat import Primitive
    >>> Primitive("demo").name
    'demo'
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from functools import partial, wraps
from typing import Any, TypeVar, cast

import jax
import jax.numpy as jnp
from jax.core import ShapedArray, Tracer
from jax.extend.core import Literal, Primitive
from jax.extend.core.primitives import closed_call_p
from jax.interpreters import ad, batching, mlir
from jax.interpreters import partial_eval as pe

#: The batch dimension JAX passes to a batching rule for an operand that is
#: not batched (JAX uses ``None``; it has no public name for it).
NOT_MAPPED: None = None


def _ffi_side_effect() -> object:
    """JAX's effect of an FFI call with side effects (what keeps it from being
    dropped when its results are unused). JAX has no public name for it, so it is
    read off a traced ``jax.ffi.ffi_call(..., has_side_effect=True)``; tracing
    looks up no target."""
    call = jax.ffi.ffi_call("xla_ffi_rs._effect_probe", jax.ShapeDtypeStruct((), jnp.float32), has_side_effect=True)
    (effect,) = jax.make_jaxpr(call)().effects
    return effect


#: The effect a ``binding.Op`` with ``has_side_effect=True`` declares.
FFI_SIDE_EFFECT: object = _ffi_side_effect()


def ordered_effect() -> Any:
    """JAX's ordered IO effect: what ``io_callback(..., ordered=True)`` declares. A
    primitive with it gets a ``!stablehlo.token`` in its lowering context
    (``ctx.tokens_in``), threaded through every op with the same effect in program
    order. Read off a traced ``io_callback``, as JAX has no public name for it;
    nothing is called."""
    global _ORDERED_EFFECT
    if _ORDERED_EFFECT is None:
        from jax.experimental import io_callback

        (_ORDERED_EFFECT,) = jax.make_jaxpr(lambda: io_callback(lambda: None, None, ordered=True))().effects
    return _ORDERED_EFFECT


_ORDERED_EFFECT: Any = None


def ordered_effect_sharding(axis_context: Any, n_results: int) -> Any:
    """The sharding JAX gives an ordered ``io_callback`` in a program partitioned over
    several devices (``axis_context`` a ``ShardingContext``): the whole call on one
    device (XLA refuses a side effect without a sharding there)."""
    from jax._src.callback import _callback_op_sharding

    return _callback_op_sharding(axis_context, None, [None] * n_results)


def set_sharding(module_context: Any, op: Any, sharding: Any) -> None:
    """Annotate the lowered ``op`` with ``sharding`` (one of
    :func:`ordered_effect_sharding`), for Shardy or GSPMD, whichever is on."""
    from jax._src.interpreters.mlir import set_sharding as set_

    set_(module_context, op, sharding)


def constrain_to_type(ctx: Any, op: Any, aval: Any) -> Any:
    """``op`` (a result lowered for ``aval``) constrained to the sharding in
    ``aval``'s type, as jax constrains the results of its own primitives: on a mesh
    that mixes explicit and auto axes, the ``jit``'s results carry no sharding of
    their own, so without this XLA was free to gather a result that its type says
    is split. A no-op for a value on no mesh or on auto or manual axes only
    (``jax._src.interpreters.mlir.lower_with_sharding_in_types``, in jax 0.10 and
    0.12)."""
    mesh = getattr(getattr(aval, "sharding", None), "mesh", None)
    if mesh is None or mesh.empty:
        return op
    from jax._src.interpreters.mlir import lower_with_sharding_in_types

    return lower_with_sharding_in_types(ctx, op, aval)


def min_dim(a: Any, b: Any) -> Any:
    """The smaller of two dimensions, either symbolic (``jax.export``'s
    ``core.min_dim``, private, read on first use): Python's ``min`` cannot compare
    a symbolic dimension with a size it may be above or below."""
    from jax._src.core import min_dim as min_

    return min_(a, b)


def abstract_token() -> Any:
    """The abstract value of a token: ``jax.ffi.abstract_token`` (jax 0.12); jax
    0.10 has it only as the deprecated ``jax.core.abstract_token``, read here from
    its home in ``jax._src.core`` (on first use) without the warning."""
    token = getattr(jax.ffi, "abstract_token", None)
    if token is None:
        from jax._src.core import abstract_token as token
    return token


def sdy_sharding_rule(text: str, replicated: Sequence[str], types_in: Sequence[Any], types_out: Sequence[Any]) -> Any:
    """The ``sdy.sharding_rule`` attribute (an MLIR attribute) of a custom call
    whose operands and results have the MLIR types ``types_in``/``types_out``, from
    an einsum-like rule ``text`` such as ``"b0 r0, r1 -> b0 r2"`` whose factors
    ``replicated`` must stay replicated.

    JAX's rule builder is private (``jax._src.custom_partitioning_sharding_rule``);
    it is imported here, on first use, so that importing the package never depends on it.
    """
    from jax._src.custom_partitioning_sharding_rule import (
        sdy_sharding_rule_to_mlir,
        str_to_sdy_sharding_rule,
    )

    rule = str_to_sdy_sharding_rule(text, need_replication_factors=tuple(replicated))
    return sdy_sharding_rule_to_mlir(rule, list(types_in), list(types_out))


def linearize_with(primitive: Primitive, jvp_rule: Callable[..., Any]) -> None:
    """Make JAX linearize ``primitive`` (``grad``, ``vjp``, ``linearize``) by
    tracing ``jvp_rule`` (``(primals, tangents, **params) -> (outs, tangent_outs)``)
    with unknown tangents and partially evaluating it, instead of its JVP rule,
    which ``jax.jvp`` keeps using. JAX's fallback linearization finds the JVP rule
    by primitive, so ``jvp_rule`` is registered under a stand-in primitive that is
    never bound. Direct linearization reads this table (jax 0.10 and 0.12 always
    linearize directly: ``jax_use_direct_linearize`` is declared but read nowhere).
    """
    from jax._src.interpreters import ad as ad_src

    key = Primitive(f"{primitive.name}_linearize")
    key.multiple_results = primitive.multiple_results
    ad_src.primitive_jvps[key] = jvp_rule
    ad_src.primitive_linearizations[primitive] = partial(ad_src.fallback_linearize_rule, key)


def forget_primitive(primitive: Primitive) -> None:
    """Take ``primitive``'s rules out of JAX's global tables (lowerings, JVP,
    transpose, linearization, batching), which would otherwise keep them, and what
    they hold, for the rest of the process: for an op that is freed."""
    from jax._src.interpreters import ad as ad_src
    from jax._src.interpreters import batching as batching_src
    from jax._src.interpreters import mlir as mlir_src

    # Each table as the module names it; one a jax version lacks is skipped (this
    # runs in a finalizer: it must not raise).
    def table(module: Any, name: str) -> dict[Any, Any]:
        found = getattr(module, name, None)
        return found if isinstance(found, dict) else {}

    table(mlir_src, "_lowerings").pop(primitive, None)
    for platform_table in table(mlir_src, "_platform_specific_lowerings").values():
        platform_table.pop(primitive, None)
    table(ad_src, "primitive_jvps").pop(primitive, None)
    table(ad_src, "primitive_transposes").pop(primitive, None)
    linearization = table(ad_src, "primitive_linearizations").pop(primitive, None)
    if isinstance(linearization, partial) and linearization.args:  # linearize_with's stand-in
        table(ad_src, "primitive_jvps").pop(linearization.args[0], None)
    table(batching_src, "fancy_primitive_batchers").pop(primitive, None)


def batching_rule(primitive: Primitive) -> Callable[..., Any]:
    """The batching rule registered for ``primitive``, as JAX calls it:
    ``(axis_data, operands, dims, **params) -> (outs, out_dims)``."""
    from jax._src.interpreters import batching as batching_src

    return batching_src.fancy_primitive_batchers[primitive]


def set_batching_rule(primitive: Primitive, rule: Callable[..., Any]) -> None:
    """Register ``rule`` (as :func:`batching_rule` returns one) for ``primitive``."""
    from jax._src.interpreters import batching as batching_src

    batching_src.fancy_primitive_batchers[primitive] = rule


def eval_context() -> AbstractContextManager[None]:
    """A context in which JAX code runs eagerly, on concrete arrays (JAX's evaluation
    trace). jax 0.12 runs a primitive's abstract evaluation, which it caches, with
    no trace at all, so a jnp call there (``jnp.asarray(1.0).dtype``) failed with
    ``AttributeError: 'NoneType' object has no attribute 'stage_value'``; jax 0.10
    ran it on the trace being built. JAX keeps the context private
    (``jax._src.core.eval_context``)."""
    from jax._src.core import eval_context as context

    return cast(AbstractContextManager[None], context())


@contextmanager
def _standard_rules() -> Iterator[None]:
    with jax.numpy_dtype_promotion("standard"), jax.numpy_rank_promotion("allow"):
        yield


_F = TypeVar("_F", bound=Callable[..., Any])


class standard_numpy:
    """JAX's default NumPy promotion rules (``jax_numpy_dtype_promotion="standard"``,
    ``jax_numpy_rank_promotion="allow"``), whatever the user set, for this
    package's own jnp code (reference formulas, rules) which mixes dtypes and ranks
    on purpose: a user's ``"strict"`` or ``"raise"`` is for the user's code, and
    made a valid call of an op fail inside it (``TypePromotionError``, "could not be
    broadcast together"). A context manager, or a decorator:
    ``@standard_numpy()``. As a decorator its wrapper is a function of this package,
    so JAX's traceback filtering hides it (``contextlib``'s would stay, a frame
    between the user's call and the error)."""

    def __call__(self, fn: _F) -> _F:
        @wraps(fn)
        def with_standard_rules(*args: Any, **kwargs: Any) -> Any:
            with _standard_rules():
                return fn(*args, **kwargs)

        return cast(_F, with_standard_rules)

    def __enter__(self) -> None:
        self._rules = _standard_rules()
        self._rules.__enter__()

    def __exit__(self, *exc: Any) -> bool | None:
        return self._rules.__exit__(*exc)


def mark_primitive_callable(fun: Callable[..., Any], name: str) -> None:
    """Mark ``fun`` (one primitive's bind, about to be jitted for an eager call) as
    JAX marks its own (``dispatch.xla_primitive_callable``): under ``jax_debug_nans``
    or ``jax_debug_infs``, a NaN or inf in its output is then a FloatingPointError
    naming the primitive ("invalid value (nan) encountered in NAME"). Unmarked, JAX
    re-ran the function "de-optimized", whose bind ran this jitted function again:
    a RecursionError. JAX has no public spelling (``fun._apply_primitive``)."""
    fun.__name__ = fun.__qualname__ = name
    fun._apply_primitive = True  # type: ignore[attr-defined]


def weakly_typed(x: jax.Array) -> jax.Array:
    """``x`` weakly typed (as a result computed from Python scalars is), same dtype
    and values. JAX has no public spelling of this conversion
    (``jax._src.lax.lax._convert_element_type(x, weak_type=True)``)."""
    from jax._src.lax.lax import _convert_element_type

    return cast(jax.Array, _convert_element_type(x, weak_type=True))


def strongly_typed(x: jax.Array, dtype: Any) -> jax.Array:
    """``x`` converted to ``dtype``, strongly typed, as jnp's own dtype promotion
    converts a weakly typed operand (``jnp.multiply`` of a Python float): the
    transpose of that conversion gives the cotangent back weakly typed.
    (``jax._src.lax.lax._convert_element_type(x, dtype, weak_type=False)``;
    ``astype`` skips the conversion when the dtype is already ``dtype``.)"""
    from jax._src.lax.lax import _convert_element_type

    return cast(jax.Array, _convert_element_type(x, dtype, weak_type=False))


def hide_frames(directory: str) -> None:
    """Treat the frames of files under ``directory`` as JAX treats its own: not the
    user's. The source location XLA records for an op (its HLO metadata, which
    profilers show, and the MLIR ``loc``) is then the user's line that called it, as
    for a ``jnp`` op, not a line inside the package
    (``jax.extend.source_info_util.register_exclusion``); and JAX's traceback
    filtering (``jax_traceback_filtering``, ``"off"`` shows them) drops them from a
    traceback as it drops its own (``jax._src.traceback_util.register_exclusion``,
    private: a JAX without it only keeps the frames)."""
    directory = os.path.abspath(directory)
    from jax.extend import source_info_util

    source_info_util.register_exclusion(directory + os.sep)
    try:
        from jax._src import traceback_util

        traceback_util.register_exclusion(directory)
    except (ImportError, AttributeError):
        pass


def literal_value(tracer: Any) -> Any:
    """The value of ``tracer`` where tracing made it a literal scalar (a constant
    written in the program), else None."""
    atom = getattr(tracer, "val", None)
    return atom.val if isinstance(atom, Literal) else None


def defining_equation(tracer: Any) -> tuple[str, list[Any]] | None:
    """``(primitive name, operand tracers)`` of the equation a jit tracer comes
    from, or None (another kind of tracer, or a jaxpr input). JAX keeps this on
    its jit tracers (``parent``) without a public name for it: a missing attribute
    means None, so a JAX without it only loses what the caller derives from it."""
    eqn = getattr(tracer, "parent", None)
    name, ins = getattr(getattr(eqn, "primitive", None), "name", None), getattr(eqn, "in_tracers", None)
    if not isinstance(name, str) or ins is None:
        return None
    return name, list(ins)


__all__ = [
    "FFI_SIDE_EFFECT",
    "NOT_MAPPED",
    "Primitive",
    "ShapedArray",
    "Tracer",
    "abstract_token",
    "ad",
    "batching",
    "batching_rule",
    "closed_call_p",
    "constrain_to_type",
    "defining_equation",
    "eval_context",
    "forget_primitive",
    "hide_frames",
    "linearize_with",
    "literal_value",
    "mark_primitive_callable",
    "mlir",
    "ordered_effect",
    "pe",
    "sdy_sharding_rule",
    "set_batching_rule",
    "standard_numpy",
]
