"""Define a JAX operation backed by XLA FFI targets in a few lines.

From a declaration: :func:`op` (one target) and :func:`ops` (several, with the
transposes between them linked) build the op from what the Rust
``#[handler(...)]`` declares (operands, dtypes, shape rule, attributes,
linearity, transpose target); see ``docs/binding.md``.

By hand, an :class:`Op` is a JAX primitive (``jax.extend.core.Primitive``) plus its
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

from xla_ffi_rs._compat import NOT_MAPPED
from xla_ffi_rs.binding.declaration import Declaration
from xla_ffi_rs.binding.declared_ops import infer, op, ops
from xla_ffi_rs.binding.op_class import AbstractEval, BatchDim, BatchRule, JvpRule, Op, TargetNames, TransposeRule
from xla_ffi_rs.binding.rules import (
    batch_size,
    elementwise_batching,
    is_linear_input,
    move_batch_axis_to_front,
    same_as_operands,
    vmap_batching,
)

__all__ = [
    "NOT_MAPPED",
    "AbstractEval",
    "BatchDim",
    "BatchRule",
    "Declaration",
    "JvpRule",
    "Op",
    "TargetNames",
    "TransposeRule",
    "batch_size",
    "elementwise_batching",
    "infer",
    "is_linear_input",
    "move_batch_axis_to_front",
    "op",
    "ops",
    "same_as_operands",
    "vmap_batching",
]
