"""Python functions as JAX operations: :func:`python_op` (``xla_ffi_rs.python_op``)
and the class :class:`PythonOp`.

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
every op (on other platforms, GPUs, the op is lowered to ``jax.pure_callback``
around the same call instead, with its host transfers). The op's lowering puts an
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
buffers with no copy (``xla_ffi::python::call_ufunc``; docs/python_op.md says how
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
``UNAVAILABLE`` without calling Python.

Export: a python op cannot be serialized: ``jax.export`` refuses
``xla_ffi_rs.python_call`` (:func:`xla_ffi_rs.export_checks` leaves it out), and
an artifact made with the check forced off fails with ``NOT_FOUND`` in any other
process (every key carries a number drawn once per process), instead of running
another function.
"""

from __future__ import annotations

import atexit
import functools
import math
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar, cast, overload

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from xla_ffi_rs import _native
from xla_ffi_rs._compat import ShapedArray, Tracer, ad
from xla_ffi_rs.binding import (
    BatchDim,
    BatchRule,
    Op,
    batch_size,
    is_linear_input,
    move_batch_axis_to_front,
)
from xla_ffi_rs.binding.op_class import explicit_spec, freeze, weak_method
from xla_ffi_rs.python_ops import rules
from xla_ffi_rs.python_ops.call import (
    _INVALID_ARGUMENT,
    _UFUNC_INTO_MIN_SIZE,
    _UNKNOWN,
    _are,
    _checked,
    _exception_message,
    _is_ufunc,
    _logical,
    _not_none,
    _outputs_settler,
    _plain,
    _settler,
    _ufunc_into,
)

__all__ = ["TARGET", "PythonOp", "python_op", "registered_functions"]

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


def _result_shape(name: str, i: int, aval: Any) -> tuple[Any, ...]:
    """The shape of ``abstract_eval``'s result ``i``, checked: a negative, float, bool
    or None dimension would otherwise fail later in MLIR or XLA, naming neither the op
    nor the result. Dimensions that are not ints (symbolic ones) are left to JAX."""
    shape = aval.shape
    dims: tuple[Any, ...] | None
    try:
        dims = tuple(shape)
    except TypeError:
        dims = None
    bad = dims is None or any(d is None or isinstance(d, (bool, np.bool_, float, np.floating, str)) for d in dims)
    if bad or any(isinstance(d, (int, np.integer)) and d < 0 for d in dims or ()):
        raise (TypeError if bad else ValueError)(
            f"{name}: abstract_eval result {i}: expected a shape of non-negative ints, got {shape!r}"
        )
    return dims or ()


#: The most bytes one XLA array may hold (its sizes are signed 64-bit).
_MAX_BYTES = 2**63 - 1


def _check_result_size(name: str, i: int, dims: tuple[Any, ...], dtype: np.dtype[Any]) -> None:
    """ValueError naming the op and result ``i`` if its ``dims`` hold more bytes than
    an XLA array can (jaxlib 0.10 aborts the process on such a shape)."""
    if not all(isinstance(d, (int, np.integer)) for d in dims):
        return
    elems = math.prod(int(d) for d in dims)
    if elems * dtype.itemsize > _MAX_BYTES:
        raise ValueError(
            f"{name}: abstract_eval result {i}: a shape of {elems} {dtype.name} elements ({tuple(dims)}) holds more "
            f"than the {_MAX_BYTES} bytes an XLA array can"
        )


def _sub_byte(dtype: Any) -> bool:
    """Whether ``dtype`` packs its elements below one byte in XLA (``int4``,
    ``uint2``, ``float4_e2m1fn``, ...): NumPy has no array of them, so the handler
    cannot pass or take one."""
    return int(jax.dtypes.itemsize_bits(dtype)) < 8


def _operand_dtype(name: str, i: int, aval: Any) -> None:
    """Raise TypeError naming the op and operand ``i`` if its dtype cannot reach the
    function as a NumPy array: a sub-byte dtype (the handler would refuse it when
    the op runs) or an extended one, such as a PRNG key (the function would get its
    raw ``uint32`` words, with a shape ``abstract_eval`` did not see)."""
    dtype = aval.dtype
    if jnp.issubdtype(dtype, jax.dtypes.extended):
        raise TypeError(
            f"{name}: operand {i}: expected a bool or numeric dtype, got {dtype} "
            "(pass a PRNG key's words: jax.random.key_data(key))"
        )
    if _sub_byte(dtype):
        raise TypeError(
            f"{name}: operand {i}: python_op does not support {np.dtype(dtype).name}, whose elements are packed "
            "below one byte (no NumPy array holds them); cast it to a dtype of one byte or more"
        )


def _result_dtype(name: str, i: int, aval: Any) -> np.dtype[Any]:
    """The dtype of ``abstract_eval``'s result ``i``, checked: bool or numeric (the
    ``ml_dtypes`` ones too) of at least one byte per element, and not 64-bit while
    ``jax_enable_x64`` is off (no JAX array is then; ``jax.pure_callback``, the
    lowering off CPU, refuses it too)."""
    dtype: np.dtype[Any] | None
    try:
        dtype = np.dtype(aval.dtype)
    except TypeError:
        dtype = None
    if dtype is None or not (jnp.issubdtype(dtype, np.number) or jnp.issubdtype(dtype, np.bool_)):
        got = repr(aval.dtype) if dtype is None else str(dtype)
        raise TypeError(f"{name}: abstract_eval result {i}: expected a bool or numeric dtype, got {got}")
    if _sub_byte(dtype):
        raise TypeError(
            f"{name}: abstract_eval result {i}: python_op does not support {dtype.name}, whose elements are "
            "packed below one byte (no NumPy array holds them); return a dtype of one byte or more"
        )
    if jax.dtypes.canonicalize_dtype(dtype) != dtype:
        raise ValueError(
            f"{name}: abstract_eval result {i}: expected a dtype without 64 bits while jax_enable_x64 is off, got "
            f"{dtype.name} (return {jax.dtypes.canonicalize_dtype(dtype).name}, or turn 64-bit types on: "
            "jax.config.update('jax_enable_x64', True))"
        )
    return dtype


def _check_batch_axes(
    name: str,
    k: int,
    batched: tuple[Sequence[bool], Sequence[bool]] | None,
    operands: Sequence[tuple[int, ...]],
    results: Sequence[tuple[int, ...]],
) -> None:
    """With ``num_batch_dims=k``, every operand and result flagged batched (all of
    them without ``batched=``) must have the same ``k`` leading axes: under sharding
    XLA's batch partitioner splits the first ``k`` axes of each one like the batch
    axes, so a weight of shape ``(H,)`` next to ``x`` of shape ``(T, H)`` would be
    split along ``H`` (a wrong answer), and a value of rank below ``k`` fails in
    JAX's sharding rule, naming neither the op nor the value. ValueError naming the
    op and the value otherwise, on every call, sharded or not."""
    b_in, b_out = batched or ((True,) * len(operands), (True,) * len(results))
    values = [(f"operand {i}", s) for i, (s, b) in enumerate(zip(operands, b_in, strict=True)) if b]
    values += [(f"result {i}", s) for i, (s, b) in enumerate(zip(results, b_out, strict=True)) if b]
    if not values:
        return
    first, shape = values[0]
    for what, s in values:
        if len(s) < k:
            problem = f"has shape {tuple(s)}, of rank below {k}"
        elif tuple(s[:k]) != tuple(shape[:k]):
            problem = f"has shape {tuple(s)}, whose first {k} axes are not the batch axes {tuple(shape[:k])} of {first}"
        else:
            continue
        raise ValueError(
            f"{name}: num_batch_dims={k}: {what} {problem}; every operand and result the function treats per "
            "batch element needs the batch axes in front, and the others must be declared: batched=(operand "
            "flags, result flags), e.g. batched=((True, False), (True,)) for a weight beside x"
        )


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
    ) -> None:
        if not callable(fn):
            raise TypeError(f"python_op: fn must be callable, got {type(fn).__name__}")
        if not callable(abstract_eval):
            raise TypeError(f"python_op: abstract_eval must be callable, got {type(abstract_eval).__name__}")
        if num_batch_dims is not None and (
            not isinstance(num_batch_dims, int) or isinstance(num_batch_dims, bool) or num_batch_dims < 0
        ):
            raise ValueError(f"python_op: num_batch_dims must be a non-negative int, got {num_batch_dims!r}")
        for flag, value in (("vectorized", vectorized), ("takes_outputs", takes_outputs)):
            if not isinstance(value, bool):
                raise TypeError(f"python_op: {flag} must be a bool, got {type(value).__name__}")
        if batched is not None and not (
            len(batched) == 2 and all(isinstance(b, bool) for flags in batched for b in flags)
        ):
            raise TypeError(f"python_op: batched must be (operand flags, result flags) of bools, got {batched!r}")
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
        )
        super().def_batching(weak_method(ref, name, "_sequential_or_vectorized"))
        # Without a JVP rule: integer and bool results have zero tangents, a float
        # result says it has no rule, and a fixed operand is named, with rules or without.
        names = rules.names_of(fn)
        ad.primitive_jvps[self.primitive] = rules.jvp_rule(
            None, name, names, fixed, _vmap_levels, _user, self.primitive.bind
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
                    f"(static_argnames='{key}') or close over it; pass an array as an operand instead"
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
                f"but the op is called with {len(operands)} operands"
            )
        if self._batched is not None and len(self._batched[0]) != len(operands):
            raise ValueError(
                f"{self.name}: batched gives flags for {len(self._batched[0])} operands, called with {len(operands)}"
            )
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
        return f"PythonOp({self.name!r}, fn={self.fn!r}, vectorized={self.vectorized})"

    def _single_for(self, operands: Sequence[Any], params: dict[str, Any]) -> bool:
        """Whether a call with these static parameters returns one array: abstract_eval
        of the call's own operands and parameters decides, run here when it has not run
        for them yet. (The bind may never run it for them: under ``vmap`` or ``jvp`` a
        rule of the op's may bind it with other parameters, or not at all.)"""
        frozen = freeze(params)
        single = self._single.get(frozen)
        if single is None:
            self._abstract_eval(*(jax.typeof(x) for x in operands), **params)
            single = self._single[frozen]
        return single

    def _is_single(self, params: dict[str, Any]) -> bool:
        """Whether abstract_eval gave one aval (not a tuple) for these parameters."""
        return self._single.get(freeze(_user(params)), True)

    # -- abstract evaluation and lowering -----------------------------------

    def _abstract_eval(self, *avals: ShapedArray, **params: Any) -> list[ShapedArray]:
        for i, a in enumerate(avals):
            _operand_dtype(self.name, i, a)
        batch = tuple(params.get(_BATCH, ()))
        inner = [ShapedArray(a.shape[len(batch) :], a.dtype) for a in avals]
        user = _user(params)
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
        results = [(_result_shape(self.name, i, o), _result_dtype(self.name, i, o)) for i, o in enumerate(outs)]
        for i, (dims, dtype) in enumerate(results):
            _check_result_size(self.name, i, dims, dtype)
        if self._batched is not None and len(self._batched[1]) != len(results):
            raise ValueError(
                f"{self.name}: batched gives flags for {len(self._batched[1])} results, abstract_eval gave "
                f"{len(results)}"
            )
        if self.num_batch_dims:
            _check_batch_axes(
                self.name, self.num_batch_dims, self._batched, [a.shape for a in inner], [s for s, _ in results]
            )
        return [ShapedArray((*batch, *s), d) for s, d in results]

    def _callback_impl(self, *operands: Any, **params: Any) -> Sequence[Any]:
        """The lowering on platforms without the target (GPUs): ``jax.pure_callback``,
        which copies operands to the host and results back, around the same call."""
        avals = self._abstract_eval(*[jax.typeof(x) for x in operands], **params)
        specs = tuple((tuple(a.shape), np.dtype(a.dtype)) for a in avals)
        invoke = _invoker(self, _user(params), None)

        def host(*arrays: np.ndarray) -> tuple[np.ndarray, ...]:
            wants_outs = self.takes_outputs or _is_ufunc(_plain(self.fn), _user(params))
            outs = tuple(np.empty(s, d) for s, d in specs) if wants_outs else ()
            code, payload = invoke(tuple(np.asarray(a) for a in arrays), specs, outs)
            if code:
                raise RuntimeError(f"{TARGET} (pure_callback): {payload}")
            return tuple(np.asarray(v).reshape(s) for v, (s, _) in zip(payload, specs, strict=True))

        shapes = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in avals]
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
        return {"callback": self.key(_user(params), ranks, batch)}

    def batched(self, n_in: int, n_out: int, **params: Any) -> tuple[list[bool], list[bool]]:
        """Which operands and results carry the batch axes: all of them in a
        vectorized call under ``vmap`` that has unbatched ones (see :func:`_batch_layout`)."""
        if _batch_layout(self.num_batch_dims, self._batched, _vmap_levels(params))[1] is None:
            return [True] * n_in, [True] * n_out
        return super().batched(n_in, n_out, **params)

    def key(self, params: dict[str, Any] | None = None, ranks: tuple[int, ...] | None = None, levels: int = 0) -> int:
        """The registry key of this op's function with these static parameters (and
        operand ranks, which undo the partitioner's unit axes, see :func:`_logical`,
        and the vmap levels of a vectorized call, see :func:`_batch_layout`).
        The key is registered until the op is garbage collected."""
        frozen = (freeze(params or {}), ranks, levels)
        key = self._keys.get(frozen)
        if key is None:
            params = dict(sorted((params or {}).items()))
            plain = _plain(self.fn)
            outputs = self.takes_outputs or _is_ufunc(plain, params)
            # A ufunc gets output arrays only where it writes into them (`_ufunc_into`).
            min_elements = 0 if self.takes_outputs else _UFUNC_INTO_MIN_SIZE
            # An exact ufunc runs on XLA's buffers when the handler can prove that safe.
            ufunc = plain if outputs and not self.takes_outputs and type(plain) is np.ufunc else None
            direct = self._direct(params, ranks)
            key = _native.register(
                _invoker(self, params, ranks, levels),
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
            return _plain(self.fn), _outputs_settler(self.name), False
        single = self._single.get(freeze(params), True)
        return _plain(self.fn), _settler(self.name, single), single

    # -- transformation rules ---------------------------------------------

    def _callable_rule(self, what: str, rule: Any) -> None:
        """TypeError naming the op unless ``rule`` is callable (else it would fail only
        when JAX first applies the rule, as ``'int' object is not callable``)."""
        if not callable(rule):
            raise TypeError(f"{self.name}: the {what} rule must be callable, got {type(rule).__name__}")

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
            rule, self.name, rules.names_of(self.fn), self.fixed, _vmap_levels, _user
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
                return checked(rule(ct, *operands, **_user(params)), operands)
            return _batched_transpose(rule, len(batch), ct, operands, _user(params), checked)

        def single(params: dict[str, Any]) -> bool:
            op = ref()
            return op is None or op._is_single(params)

        ad.primitive_transposes[self.primitive] = rules.transpose_rule(
            rule, self.name, rules.names_of(self.fn), self.fixed, call, single
        )
        return rule

    def def_batching(self, rule: BatchRule) -> BatchRule:
        """Register a batching rule of your own: ``rule(operands, dims, **params)`` with
        the op's static parameters, returning ``(results, result_dims)``."""
        self._callable_rule("batching", rule)

        def batch(operands: Sequence[Any], dims: Sequence[BatchDim], **params: Any) -> tuple[Any, Any]:
            return rule(operands, dims, **_user(params))

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

        def one(xs: Sequence[Any]) -> Sequence[Any]:
            args = list(operands)
            for i, x in zip(mapped, xs, strict=True):
                args[i] = x
            outs: Sequence[Any] = self.primitive.bind(*args, **params)
            return outs

        outs = jax.lax.map(one, [_whole_axis_0(jnp.moveaxis(operands[i], int(dims[i] or 0), 0)) for i in mapped])
        return outs, [0] * len(outs)


def _whole_axis_0(x: Any) -> Any:
    """``x`` with its leading axis whole, where its type splits it over explicit mesh
    axes: ``lax.map`` loops over that axis and refuses a split one ("0th dimension of
    all xs should be replicated"), so a sequential vmap over an explicitly sharded
    axis gathers it first."""
    spec = explicit_spec(jax.typeof(x))
    if spec is None or spec[0] is None:
        return x
    sharding = jax.typeof(x).sharding
    return jax.sharding.reshard(x, sharding.update(spec=jax.sharding.PartitionSpec(None, *spec[1:])))


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


def _invoker(
    op: PythonOp, params: dict[str, Any], ranks: tuple[int, ...] | None, levels: int = 0
) -> Callable[..., Any]:
    """The function the Rust handler calls, ``invoke(args, specs, outs)``: ``args``
    are read-only NumPy arrays holding copies of the operands, ``specs`` the
    results' ``(shape, dtype)``, ``outs`` (with ``takes_outputs``) arrays of those
    to fill. It runs ``fn`` and returns ``(0, arrays)``, one array of
    exactly the result's shape and dtype per result, whose bytes the handler copies
    into XLA's buffers; or ``(error_code, message)``. It is the hot path, so it is
    one closure with everything it needs bound locally; it holds no reference to
    the op (the registry holds it, and must not keep the op alive)."""
    fn, name, ndarray, takes_outputs = op.fn, op.name, np.ndarray, op.takes_outputs
    plain = _plain(fn)
    ufunc = _is_ufunc(plain, params) and not takes_outputs
    single = op._single.get(freeze(params), True)
    layout_nbd, batched = _batch_layout(op.num_batch_dims, op._batched, levels)
    nbd = layout_nbd if ranks is not None else None
    op_ranks: tuple[int, ...] = ranks or ()

    def invoke(
        args: Sequence[np.ndarray], specs: Sequence[tuple[tuple[int, ...], np.dtype]], outs: Sequence[np.ndarray]
    ) -> tuple[int, Any]:
        try:
            shapes: Sequence[tuple[int, ...]] = [s for s, _ in specs]
            if nbd is not None:
                args, shapes = _logical(args, shapes, op_ranks, nbd, batched)
            if takes_outputs:
                outs = [o.reshape(s) for o, s in zip(outs, shapes, strict=True)]
                returned = fn(*args, *outs, **params)
                if returned is not None and not _are(returned, outs):
                    return _INVALID_ARGUMENT, _not_none(name, returned)
                return _checked(name, outs, shapes, specs)
            if ufunc and outs:
                outs = [o.reshape(s) for o, s in zip(outs, shapes, strict=True)]
                if _ufunc_into(plain, args, outs):
                    return 0, outs
            returned = fn(*args, **params)
            if single and len(specs) == 1:
                d = specs[0][1]
                if type(returned) is ndarray and returned.dtype is d and returned.shape == shapes[0]:
                    return 0, (returned,)
                returned = (returned,)
            return _checked(name, returned, shapes, specs)
        except BaseException as e:  # KeyboardInterrupt and SystemExit too: reported to XLA
            return _UNKNOWN, _exception_message(name, e)

    return invoke


def _vmap_levels(params: dict[str, Any]) -> int:
    """How many vmap levels a vectorized call carries (its rules run vmapped)."""
    return len(params.get(_BATCH, ()))


def _user(params: dict[str, Any]) -> dict[str, Any]:
    """The op's static parameters without the internal ones."""
    return {k: v for k, v in params.items() if k not in _INTERNAL}


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def _batched_transpose(
    rule: Callable[..., Any],
    k: int,
    ct: Any,
    operands: Sequence[Any],
    params: dict[str, Any],
    checked: Callable[[Any, Sequence[Any]], list[Any]],
) -> list[Any]:
    """Transpose of a vectorized call (``k`` leading batch axes): the rule, vmapped,
    its result checked per call by ``checked``."""
    linear = [is_linear_input(x) for x in operands]
    inner = [
        ad.UndefinedPrimal(ShapedArray(x.aval.shape[k:], x.aval.dtype)) if lin else None
        for x, lin in zip(operands, linear, strict=True)
    ]

    def f(ct: Any, defined: list[Any]) -> list[Any]:
        it = iter(defined)
        args = [u if lin else next(it) for u, lin in zip(inner, linear, strict=True)]
        out = checked(rule(ct, *args, **params), args)
        return [o if lin else None for o, lin in zip(out, linear, strict=True)]

    for _ in range(k):
        f = jax.vmap(f)
    return f(ct, [x for x, lin in zip(operands, linear, strict=True) if not lin])


#: python_op's arguments -> the op made from them, while it lives.
_cache: weakref.WeakValueDictionary[tuple[Any, ...], PythonOp] = weakref.WeakValueDictionary()

# At exit, before the interpreter finalizes: later calls fail without calling Python,
# and the running ones (of programs on other devices the caller never waited for)
# finish first (a thread entering Python while it finalized aborted the process).
# Registered after jax's own exit handlers, so it runs before them.
atexit.register(_native.close)


@overload
def python_op(
    fn: Callable[..., Any],
    *,
    abstract_eval: AbstractEvalFn,
    jvp: Callable[..., Any] | None = None,
    transpose: Callable[..., Any] | None = None,
    batching: BatchRule | None = None,
    vectorized: bool = False,
    takes_outputs: bool = False,
    num_batch_dims: int | None = None,
    batched: tuple[Sequence[bool], Sequence[bool]] | None = None,
    fixed: Sequence[int] = (),
    name: str | None = None,
) -> PythonOp: ...


@overload
def python_op(
    fn: None = None,
    *,
    abstract_eval: AbstractEvalFn,
    jvp: Callable[..., Any] | None = None,
    transpose: Callable[..., Any] | None = None,
    batching: BatchRule | None = None,
    vectorized: bool = False,
    takes_outputs: bool = False,
    num_batch_dims: int | None = None,
    batched: tuple[Sequence[bool], Sequence[bool]] | None = None,
    fixed: Sequence[int] = (),
    name: str | None = None,
) -> Callable[[Callable[..., Any]], PythonOp]: ...


def python_op(
    fn: Callable[..., Any] | None = None,
    *,
    abstract_eval: AbstractEvalFn,
    jvp: Callable[..., Any] | None = None,
    transpose: Callable[..., Any] | None = None,
    batching: BatchRule | None = None,
    vectorized: bool = False,
    takes_outputs: bool = False,
    num_batch_dims: int | None = None,
    batched: tuple[Sequence[bool], Sequence[bool]] | None = None,
    fixed: Sequence[int] = (),
    name: str | None = None,
) -> PythonOp | Callable[[Callable[..., Any]], PythonOp]:
    """Make a JAX operation that runs the Python function ``fn`` on CPU.

    Also a decorator: ``@python_op(abstract_eval=...)`` above ``def fn(...)``.

    Args:
      fn: ``fn(*arrays, **params)`` on NumPy arrays (read-only copies of the
        operands, which it may keep), returning one array or a tuple, of exactly the shapes and
        dtypes ``abstract_eval`` gives. With ``takes_outputs=True`` it is
        ``fn(*arrays, *outputs, **params)`` instead: it fills the (uninitialised)
        writable output arrays and returns ``None`` (or the output arrays, as
        ``np.sin(x, out=out)`` does).
      abstract_eval: ``(*avals, **params) -> aval or tuple of avals``: the
        results' shapes and dtypes (anything with ``.shape`` and ``.dtype``).
      jvp: ``(primals, tangents, **params) -> (out, tangent_out)`` in jax code;
        a tangent JAX knows to be zero is ``None`` (see :meth:`PythonOp.def_jvp_rule`).
      transpose: ``(cotangents, *operands, **params) -> cotangent per operand``
        for an op linear in some operands, ``None`` for a zero cotangent (see
        :meth:`PythonOp.def_transpose_rule`).
      batching: a :class:`~xla_ffi_rs.binding.BatchRule` replacing the default.
      vectorized: ``fn`` accepts leading batch axes on every operand and returns
        them on every result, so ``vmap`` makes one call; otherwise one call per
        batch element.
      takes_outputs: pass writable output arrays to ``fn``, whose contents are
        copied into the results when it returns.
      num_batch_dims: the number of leading axes ``fn`` treats independently;
        enables per-shard execution under sharding.
      batched: ``(operands, results)`` flags: which carry those batch axes
        (default: all). Every flagged operand and result must have the same
        ``num_batch_dims`` leading axes (else ``ValueError`` at the call): a
        weight ``(H,)`` beside ``x`` ``(T, H)`` is declared unbatched.
      fixed: indices of operands that are not differentiable (a grid, a
        configuration): a non-zero tangent for one, or transposing with respect to
        one, raises ``ValueError`` naming the op and the operand (the rules never
        see a tangent for it: it is ``None``).
      name: the primitive's name (default ``python_op[<fn's qualified name>]``).

    Calling ``python_op`` again with the same arguments returns the same op (while
    it lives: see "Lifetime" in the module docstring).
    """
    if fn is None:
        decorator = functools.partial(
            python_op,
            abstract_eval=abstract_eval,
            jvp=jvp,
            transpose=transpose,
            batching=batching,
            vectorized=vectorized,
            takes_outputs=takes_outputs,
            num_batch_dims=num_batch_dims,
            batched=batched,
            fixed=fixed,
            name=name,
        )
        return cast("Callable[[Callable[..., Any]], PythonOp]", decorator)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"python_op: name must be a str, got {type(name).__name__}")
    if batched is not None:
        try:
            operand_flags, result_flags = batched
            batched = (tuple(operand_flags), tuple(result_flags))
        except (TypeError, ValueError):
            raise TypeError(f"python_op: batched must be (operand flags, result flags), got {batched!r}") from None
    name = name or f"python_op[{getattr(fn, '__qualname__', None) or getattr(fn, '__name__', type(fn).__name__)}]"
    frozen_batched = None if batched is None else (tuple(batched[0]), tuple(batched[1]))
    fixed_ = rules.fixed_indices("python_op", fixed)
    cache_key = (
        fn,
        abstract_eval,
        jvp,
        transpose,
        batching,
        vectorized,
        takes_outputs,
        num_batch_dims,
        frozen_batched,
        fixed_,
        name,
    )
    memoize = True
    try:
        hit = _cache.get(cache_key)
    except TypeError:  # an unhashable argument: no memoization
        memoize, hit = False, None
    if hit is not None:
        return hit
    op = PythonOp(
        fn,
        abstract_eval=abstract_eval,
        name=name,
        vectorized=vectorized,
        takes_outputs=takes_outputs,
        num_batch_dims=num_batch_dims,
        batched=frozen_batched,
        fixed=fixed_,
    )
    if jvp is not None:
        op.def_jvp_rule(jvp)
    if transpose is not None:
        op.def_transpose_rule(transpose)
    if batching is not None:
        op.def_batching(batching)
    if memoize:
        _cache[cache_key] = op
    return op


def registered_functions() -> int:
    """How many Python functions the ``xla_ffi_rs.python_call`` registry holds now:
    one per (op, static parameters) that has been lowered, taken out when its op is
    freed (a compiled program keeps the functions it calls until it is freed
    itself). Leak checks compare it before and after.

    >>> registered_functions() >= 0
    True
    """
    return _native.registered()
