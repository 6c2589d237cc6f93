"""Python functions as JAX operations: :func:`python_op` (``xla_ffi_rs.python_op``),
and :func:`linear_op`, :func:`multilinear_op` and :func:`nonlinear_op`, which take
the derivative functions as NumPy functions too.

Any function of NumPy arrays (SciPy, NumPy, a compiled library's Python
binding) becomes a JAX operation that works under ``jit``, ``grad``, ``jvp``,
``vmap`` and sharding, with derivative and batching rules of your own:

    >>> import jax, jax.numpy as jnp, numpy as np, scipy.special
    >>> from xla_ffi_rs import python_op
    >>> i0e = python_op(scipy.special.i0e, abstract_eval=lambda x: x)
    >>> i1e = python_op(scipy.special.i1e, abstract_eval=lambda x: x)
    >>> @i0e.def_jvp_rule
    ... def _(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     y = i0e(x)
    ...     return y, (i1e(x) - jnp.sign(x) * y) * t
    >>> float(jax.jit(jax.grad(lambda x: i0e(x)))(1.0))  # doctest: +ELLIPSIS
    -0.2...

How it runs: one Rust FFI target, ``xla_ffi_rs.python_call`` (CPU), serves
every op (on other platforms, GPUs, the op is lowered to ``jax.pure_callback``,
or ``io_callback`` with ``has_side_effect=True``, around the same call instead,
with its host transfers). The op's lowering puts an
integer key into the custom call's ``callback`` attribute; the handler takes the
GIL, looks the key up in a process-wide registry and calls the function with
**read-only NumPy copies** of the operands. The function returns its results,
which are copied into XLA's result buffers after their shape and dtype are
checked; or, with ``takes_outputs=True``, it receives writable output arrays as
extra arguments and fills them (copied into XLA's buffers when it returns).
Nothing is pickled and no host transfer is involved: on CPU, XLA's buffers
already live in host memory.

Memory: no array the function sees ever points into XLA's buffers, which XLA
reuses after the call, so the function may keep any array it is given (in a
global, as a slice, as a memoryview) and read or write it later. The price is
one copy of each operand and each result per call (memcpy speed; see the
README's cost table). Copies of 128 KiB or more are made into arrays from a pool,
reused only once nothing the function kept refers to them. One exception, where no
Python code can see an array at all: from 4096 elements, a function that is exactly a
``numpy.ufunc`` (no parameters, not ``takes_outputs``), on operands and results of one
shape and one built-in numeric dtype with a loop of exactly that dtype, runs on XLA's
buffers with no copy (the extension's ``call_ufunc``; docs/python_op.md says how
that is made safe); anything else, and a call that raised, takes the copies.

Rules:

* derivatives: ``jvp=`` (forward, and reverse through JAX's transposition of
  the tangent computation), plus ``transpose=`` for an op that is *linear* in
  some operands (an FFT, say), so that reverse mode can call it. Rules are
  ordinary functions of jax arrays: jnp code, other python ops, or this op.
  A tangent or cotangent JAX knows to be zero reaches a rule as ``None`` (so it
  can skip the work), and a rule may return ``None`` for a zero one.
* fixed operands: ``fixed=(0,)`` declares operands not differentiable;
  differentiating (``jvp``, ``grad``, ``vjp``) or transposing
  (``linear_transpose``) with respect to one raises ``ValueError`` naming the op
  and the operand.
* ``vmap``: with ``vectorized=True`` the function is called once on the batched
  arrays, every operand carrying the batch axes in front (unbatched operands
  are broadcast), and must return results with the same leading axes;
  otherwise it is called once per batch element (a loop in the compiled
  program). ``batching=`` takes a rule of your own instead.
* sharding: ``num_batch_dims=k`` says the function treats the first ``k`` axes
  independently; under ``jit`` over several devices the function then runs per
  shard on local data (at the arrays' own ranks), with no all-gather.
* results: one array when ``abstract_eval`` returns one aval for the call's
  static parameters, a tuple when it returns a tuple or list (of one aval too),
  decided per set of parameters (so ``op(x, both=False)`` and
  ``a, b = op(x, both=True)`` mix) and the same under every transformation,
  whichever runs the op first.

Errors: an exception in the function, or a result of the wrong shape, dtype or
count, fails the computation with ``jax.errors.JaxRuntimeError`` naming the op
(``UNKNOWN: xla_ffi_rs.python_call: op 'i0e' raised ValueError: ...`` with
the last traceback frames; ``INVALID_ARGUMENT: ... op 'f': result 0: expected
float32[3], got float64[3]``). The process keeps working. An exception whose
``str()`` fails is reported as ``<exception str() failed>``, and text that is
not valid UTF-8 (a lone surrogate) with backslash escapes. ``KeyboardInterrupt``
and ``SystemExit`` raised inside the function cannot unwind through XLA: they
fail the computation the same way (``... raised KeyboardInterrupt``), and the
caller gets the ``JaxRuntimeError``. Operands and results of float8 types go
through ``ml_dtypes``; sub-byte types (int4, float4) and PRNG keys are refused
with a ``TypeError`` at the call naming the op and the operand or result.

Nesting: the function may itself call JAX, other python ops, or its own op
(recursion), eagerly or under ``jit``, also when it runs on a shard of a sharded
program: the handler takes the GIL for real even on a thread whose Python code
is waiting for XLA.

Threads: the handler runs on whichever thread XLA runs the computation (the
calling thread, or XLA's own pool for sharded programs); JAX releases the GIL
while it waits for a computation, so the handler can always take it. Calls of
Python functions are serialised by the GIL on regular builds. The wheel is
built for the stable ABI (abi3), which free-threaded builds (3.13t, 3.14t) do
not load; a build for one would call functions in parallel without a lock, so
the functions must then be thread-safe.

Lifetime: an op registers one function per set of static parameters it is
called with; the registry drops them when the op is garbage collected. Traced
and compiled code holds its ops (through the jaxpr's parameters, as ``jit``'s
caches hold traced functions), so an op made inside a traced function lives as
long as JAX's caches of that function; ``jax.clear_caches()`` and
``gc.collect()`` free unreachable ops. A compiled program holds the functions
it calls (looked up when XLA compiles it), so a computation still running when
its op is freed completes; a lowered program (``jit(f).lower(x)``) holds its
ops until it is compiled; compiling a program whose op was freed otherwise (one
saved as text) fails with ``NOT_FOUND``. ``python_op`` with the same arguments returns the same
op while it lives. JAX's tables of rules hold ops weakly; a function that refers
to its own op (a recursive one) keeps it, and itself, alive for the process.
At exit, the interpreter waits for the python op calls still running (of a
program the caller never waited for); calls that start after that fail with
``UNAVAILABLE`` without calling Python. A child made by ``os.fork()`` waits only
for its own calls: those running on the parent's other threads do not run in it.

Export: a python op cannot be serialized: ``jax.export`` refuses
``xla_ffi_rs.python_call`` (:func:`xla_ffi_rs.export_checks` leaves it out), and
an artifact made with the check forced off fails with ``NOT_FOUND`` in any other
process (every key carries a number drawn once per process), instead of running
another function.

Modules: :mod:`~xla_ffi_rs.python_ops.factory` (:func:`python_op`),
:mod:`~xla_ffi_rs.python_ops.op_class` (:class:`PythonOp`: abstract evaluation,
lowering, registry keys, batching), :mod:`~xla_ffi_rs.python_ops.avals` (the checks
of operands and results), :mod:`~xla_ffi_rs.python_ops.call` (what runs at each
call), :mod:`~xla_ffi_rs.python_ops.rules` (JVP and transpose rules: symbolic zeros,
fixed operands), :mod:`~xla_ffi_rs.binding.sequential` (the loop of a
``vmap`` that is not ``vectorized``), :mod:`~xla_ffi_rs.python_ops.linear` (:func:`linear_op` and its
siblings), :mod:`~xla_ffi_rs.python_ops.roles` (how those are differentiated and
batched) and :mod:`~xla_ffi_rs.python_ops.axes` (their ``batch_axes``).
"""

from __future__ import annotations

from xla_ffi_rs.python_ops.axes import core_axes
from xla_ffi_rs.python_ops.factory import pooled_bytes, python_op, registered_functions
from xla_ffi_rs.python_ops.linear import linear_op, multilinear_op, nonlinear_op
from xla_ffi_rs.python_ops.op_class import TARGET, AbstractEvalFn, PythonOp

__all__ = [
    "TARGET",
    "AbstractEvalFn",
    "PythonOp",
    "core_axes",
    "linear_op",
    "multilinear_op",
    "nonlinear_op",
    "pooled_bytes",
    "python_op",
    "registered_functions",
]
