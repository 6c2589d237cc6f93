"""The small surface of JAX internals this package builds on, in one place.

Everything the package needs to define its own primitives is imported here and
nowhere else, so that a JAX release that moves a name needs a change in this
file only. Nearly all of it is public API in the JAX versions we support (0.10
and 0.12): ``jax.extend.core.Primitive``, ``jax.core.ShapedArray``,
``jax.core.Tracer`` and the ``jax.interpreters.{ad, batching, mlir}`` rule
registries. The one exception is Shardy's sharding-rule builder, which JAX keeps
private: :func:`sdy_sharding_rule` imports it when first called (it exists with
the same signature in every supported JAX), and this is the only module of the
package that imports from ``jax._src``.

Example:
    >>> from xla_ffi_rs._compat import Primitive
    >>> Primitive("demo").name
    'demo'
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from jax.core import ShapedArray, Tracer
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

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


__all__ = [
    "FFI_SIDE_EFFECT",
    "NOT_MAPPED",
    "Primitive",
    "ShapedArray",
    "Tracer",
    "abstract_token",
    "ad",
    "batching",
    "mlir",
    "ordered_effect",
    "sdy_sharding_rule",
]
