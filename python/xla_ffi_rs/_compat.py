"""The small surface of JAX internals this package builds on, in one place.

Everything the package needs to define its own primitives is imported here and
nowhere else, so that a JAX release that moves a name needs a change in this
file only. All of it is public API in the JAX versions we support (0.10 and
0.12): ``jax.extend.core.Primitive``, ``jax.core.ShapedArray`` and the
``jax.interpreters.{ad, batching, mlir}`` rule registries. No private
(``jax._src``) import is needed.

Example:
    >>> from xla_ffi_rs._compat import Primitive
    >>> Primitive("demo").name
    'demo'
"""

from __future__ import annotations

from jax.core import ShapedArray
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir

#: The batch dimension JAX passes to a batching rule for an operand that is
#: not batched (JAX uses ``None``; it has no public name for it).
NOT_MAPPED: None = None

__all__ = ["NOT_MAPPED", "Primitive", "ShapedArray", "ad", "batching", "mlir"]
