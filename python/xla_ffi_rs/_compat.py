"""The small surface of JAX internals this package builds on, in one place.

Everything the package needs to define its own primitives is imported here and
nowhere else, so that a JAX release that moves a name needs a change in this
file only. All of it is public API in the JAX versions we support (0.10 and
0.12): ``jax.extend.core.Primitive``, ``jax.core.ShapedArray``, ``jax.core.Tracer`` and the
``jax.interpreters.{ad, batching, mlir}`` rule registries. No private
(``jax._src``) import is needed.

Example:
    >>> from xla_ffi_rs._compat import Primitive
    >>> Primitive("demo").name
    'demo'
"""

from __future__ import annotations

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

__all__ = ["FFI_SIDE_EFFECT", "NOT_MAPPED", "Primitive", "ShapedArray", "Tracer", "ad", "batching", "mlir"]
