"""python_op of an exact NumPy ufunc from 4096 elements: the handler runs it on
XLA's own buffers (the extension's ``call_ufunc``), calling no Python function
of ours; everything else it cannot prove safe takes the copying path, with its
checks and messages. Which path ran is seen with ``sys.setprofile`` (the copying
path calls the Python ``invoke`` closure; the in-place one calls no Python
function); values are compared with NumPy."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import ml_dtypes
import numpy as np
import pytest

from xla_ffi_rs import nonlinear_op, python_op
from xla_ffi_rs.python_ops import TARGET

N = 5000


def like(*avals: Any, **params: Any) -> Any:
    return avals[0]


def python_frames(f: Callable[[], Any]) -> list[str]:
    """The names of the Python functions of ``xla_ffi_rs.python_ops``
    that run during ``f()`` (after a first call that compiles it)."""
    f()
    seen: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and Path(frame.f_code.co_filename).parent.name == "python_ops":
            seen.append(frame.f_code.co_name)

    sys.setprofile(profile)
    try:
        jax.block_until_ready(f())
    finally:
        sys.setprofile(None)
    return [s for s in seen if s in ("invoke", "settle")]


@pytest.mark.parametrize(
    ("ufunc", "dtype"),
    [
        (np.sin, np.float64),
        (np.sin, np.float32),
        (np.sin, np.float16),
        (np.exp, np.complex128),
        (np.negative, np.int32),
        (np.logical_not, np.bool_),
    ],
)
def test_exact_ufunc_runs_in_place_with_numpy_values(ufunc: np.ufunc, dtype: Any) -> None:
    x = (np.linspace(-3.0, 3.0, N) * (1 + 1j if dtype == np.complex128 else 1)).astype(dtype)
    op = jax.jit(python_op(ufunc, abstract_eval=like, name=f"in_place_{ufunc.__name__}_{np.dtype(dtype).name}"))
    assert python_frames(lambda: op(x)) == []
    np.testing.assert_array_equal(np.asarray(op(x)), ufunc(x))


def test_two_operands_two_results_in_place() -> None:
    x, y = np.linspace(-3.0, 3.0, N), np.full(N, 0.7)
    op = jax.jit(python_op(np.divmod, abstract_eval=lambda a, b: (a, a), name="in_place_divmod"))
    assert python_frames(lambda: op(x, y)) == []
    q, r = op(x, y)
    np.testing.assert_array_equal(np.asarray(q), np.divmod(x, y)[0])
    np.testing.assert_array_equal(np.asarray(r), np.divmod(x, y)[1])


def test_nonlinear_op_of_a_ufunc_runs_in_place() -> None:
    x = np.linspace(-3.0, 3.0, N)
    op = nonlinear_op(np.sin, lambda x, dx: np.cos(x) * dx, lambda x, ct: np.cos(x) * ct, abstract_eval=like)
    f = jax.jit(op)
    assert python_frames(lambda: f(x)) == []
    np.testing.assert_array_equal(np.asarray(f(x)), np.sin(x))
    np.testing.assert_allclose(np.asarray(jax.jit(jax.grad(lambda x: op(x).sum()))(x)), np.cos(x), rtol=1e-15)


def test_below_the_size_and_other_functions_copy() -> None:
    x = np.linspace(-3.0, 3.0, N)
    small = jax.jit(python_op(np.sin, abstract_eval=like, name="copy_small"))
    # Below 4096 elements: the direct call of the copying path (no frame of ours either).
    np.testing.assert_array_equal(np.asarray(small(x[:100])), np.sin(x[:100]))
    lam = jax.jit(python_op(lambda x: np.sin(x), abstract_eval=like, name="copy_lambda"))
    np.testing.assert_array_equal(np.asarray(lam(x)), np.sin(x))
    # takes_outputs: called directly (no frame of ours), on outputs in Python's memory.
    bases: list[Any] = []

    def sin_into(x: np.ndarray, o: np.ndarray) -> None:
        bases.append(o.base)
        np.sin(x, out=o)

    out = jax.jit(python_op(sin_into, abstract_eval=like, takes_outputs=True, name="copy_takes_outputs"))
    assert python_frames(lambda: out(x)) == []
    np.testing.assert_array_equal(np.asarray(out(x)), np.sin(x))
    assert all(type(b) is np.ndarray and b.flags.owndata and b.dtype == np.uint8 for b in bases)
    # Static parameters: the function gets them, so the copying path.
    par = jax.jit(lambda x: python_op(np.add, abstract_eval=like, name="copy_params")(x, x, casting="no"))
    assert python_frames(lambda: par(x)) == ["invoke"]
    np.testing.assert_array_equal(np.asarray(par(x)), x + x)


def test_ufunc_cannot_be_subclassed_and_a_lookalike_copies() -> None:
    with pytest.raises(TypeError):
        type("Sub", (np.ufunc,), {})

    kept: list[np.ndarray] = []

    class LooksLikeSin:
        """Has a ufunc's attributes but is Python code: gets copies, may keep them."""

        nin, nout, signature, types = 1, 1, None, ["d->d"]
        __name__ = "looks_like_sin"

        def __call__(self, x: np.ndarray, *outs: np.ndarray, **kw: Any) -> Any:
            kept.append(x)
            return np.sin(x, *outs, **kw)

    x = np.linspace(-3.0, 3.0, N)
    op = jax.jit(python_op(LooksLikeSin(), abstract_eval=like, name="lookalike"))
    for _ in range(3):
        np.testing.assert_array_equal(np.asarray(op(x)), np.sin(x))
    assert kept and all(k.flags.owndata or k.base is not None for k in kept)
    for k in kept:  # copies of the operand, unchanged after the calls
        np.testing.assert_array_equal(k, x)


def test_frompyfunc_ufunc_copies_and_keeps_its_message() -> None:
    """A frompyfunc ufunc is an exact numpy.ufunc whose only loop is an object loop
    (Python code per element): declined, and its object result is refused as before."""
    seen: list[Any] = []

    def double(v: Any) -> Any:
        seen.append(v)
        return v * 2

    twice = np.frompyfunc(double, 1, 1)
    assert type(twice) is np.ufunc and twice.types == ["O->O"]
    x = np.linspace(-3.0, 3.0, N)
    op = jax.jit(python_op(twice, abstract_eval=like, name="frompyfunc_double"))
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"result 0: expected float64\[5000\], got object\[5000\]"):
        jax.block_until_ready(op(x))
    assert seen and all(type(v) is float for v in seen)


def test_no_loop_for_the_dtype_copies() -> None:
    """np.sin has no int64 loop: declined; the copying path computes the float64
    sine, as before."""
    x = np.arange(N, dtype=np.int64)
    op = jax.jit(python_op(np.sin, abstract_eval=lambda a: jax.ShapeDtypeStruct(a.shape, np.float64), name="sin_i64"))
    np.testing.assert_array_equal(np.asarray(op(x)), np.sin(x))


def test_ml_dtypes_copy() -> None:
    x = np.linspace(-3.0, 3.0, N).astype(ml_dtypes.bfloat16)
    op = jax.jit(python_op(np.negative, abstract_eval=like, name="neg_bf16"))
    assert python_frames(lambda: op(x)) == ["invoke"]
    np.testing.assert_array_equal(np.asarray(op(x)), np.negative(x))


def test_wrong_shape_or_dtype_copies_and_keeps_its_message() -> None:
    x = np.linspace(-3.0, 3.0, N)
    longer = jax.jit(
        python_op(np.sin, abstract_eval=lambda a: jax.ShapeDtypeStruct((N + 1,), a.dtype), name="sin_longer")
    )
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"result 0: expected float64\[5001\], got float64\[5000\]"):
        jax.block_until_ready(longer(x))
    narrower = jax.jit(
        python_op(np.sin, abstract_eval=lambda a: jax.ShapeDtypeStruct(a.shape, np.float32), name="sin_narrower")
    )
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"result 0: expected float32\[5000\], got float64\[5000\]"):
        jax.block_until_ready(narrower(x))
    # Broadcasting operands (different shapes): declined, NumPy's values.
    add = jax.jit(python_op(np.add, abstract_eval=lambda a, b: b, name="add_broadcast"))
    np.testing.assert_array_equal(np.asarray(add(x[:1], np.stack([x, x]))), x[:1] + np.stack([x, x]))


def test_floating_point_error_is_reported_as_before() -> None:
    x = np.zeros(N)
    op = jax.jit(python_op(np.log, abstract_eval=like, name="log_zero"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        np.testing.assert_array_equal(np.asarray(op(x)), np.full(N, -np.inf))
    # (JAX raises a plain ValueError here, whichever path runs.)
    match = r"op 'log_zero' raised FloatingPointError: divide by zero"
    with np.errstate(divide="raise"), pytest.raises(ValueError, match=match):
        jax.block_until_ready(op(x))
    # The process goes on; the next call is right.
    np.testing.assert_array_equal(np.asarray(op(x + 1.0)), np.zeros(N))


@pytest.mark.parametrize(("ufunc", "operands"), [(np.sin, 1), (np.add, 2)])
def test_operands_aliasing_the_result_keep_the_copying_error(ufunc: np.ufunc, operands: int) -> None:
    """The target called with ``input_output_aliases`` (python_op never asks for
    it): declined, so the copying path refuses the shared buffer, as before."""
    x = np.linspace(-3.0, 3.0, N)
    op = python_op(ufunc, abstract_eval=like, name=f"alias_{ufunc.__name__}")
    key = op.key()

    def call(x: jax.Array) -> jax.Array:
        y = x * 1.0  # a temporary that XLA may overwrite
        return jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct(y.shape, y.dtype), input_output_aliases={0: 0})(
            *(y,) * operands, callback=np.int64(key)
        )

    with pytest.raises(jax.errors.JaxRuntimeError, match=r"operand 0 .*shares memory with result 0"):
        jax.block_until_ready(jax.jit(call)(x))


def test_a_warnings_hook_hunting_arrays_finds_none() -> None:
    """A warnings hook scanning the garbage collector's objects for arrays: in place,
    floating-point errors raise from C (no hook runs) and the call is run again on
    copies, where the warning and its hook come; no array it finds is over XLA's
    memory (those are built on memoryviews), and the process goes on."""
    code = textwrap.dedent(
        """
        import gc, warnings, jax, numpy as np
        jax.config.update("jax_enable_x64", True)
        from xla_ffi_rs import python_op
        found, calls = [], []
        def hook(*a, **k):
            calls.append(str(a[0]))
            for o in gc.get_objects():
                if o is found:
                    continue
                items = o if isinstance(o, (tuple, list)) else o.values() if isinstance(o, dict) else ()
                found.extend(i for i in items if isinstance(i, np.ndarray) and i.nbytes == 40000)
        warnings.showwarning = hook
        op = jax.jit(python_op(np.log, abstract_eval=lambda a: a, name="log_hunted"))
        x = np.zeros(5000)
        for _ in range(3):
            y = np.asarray(op(x))
            assert (y == -np.inf).all()
        print("calls", len(calls), calls[0])
        # Ours would be over a memoryview of raw memory (no `obj`); NumPy views of
        # JAX's results are over memoryviews of JAX arrays.
        print("over raw memory", sum(isinstance(a.base, memoryview) and a.base.obj is None for a in found))
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    assert "divide by zero encountered in log" in done.stdout, done.stdout
    assert "over raw memory 0" in done.stdout, done.stdout


def test_the_callers_error_state_and_collector_are_kept() -> None:
    """The in-place call sets NumPy's error state to ``all="raise"`` and pauses the
    garbage collector only while it runs: the caller's state (inside an errstate,
    with the collector off or on) is what it was after each call."""
    import gc

    x = np.linspace(-3.0, 3.0, N)
    op = jax.jit(python_op(np.sin, abstract_eval=like, name="in_place_state"))
    assert python_frames(lambda: op(x)) == []
    default = np.geterr()
    with np.errstate(divide="ignore", over="warn", invalid="call"):
        inside = np.geterr()
        np.testing.assert_array_equal(np.asarray(op(x)), np.sin(x))
        assert np.geterr() == inside
    assert np.geterr() == default
    assert gc.isenabled()
    gc.disable()
    try:
        np.testing.assert_array_equal(np.asarray(op(x + 1.0)), np.sin(x + 1.0))
        assert not gc.isenabled()
    finally:
        gc.enable()
    np.testing.assert_array_equal(np.asarray(op(x + 2.0)), np.sin(x + 2.0))
    assert gc.isenabled()


def test_a_loop_found_for_one_dtype_is_not_assumed_for_another() -> None:
    """np.sin runs in place on float64 (its loop is remembered), then on int64
    operands and results, for which it has no loop: declined, the copying path
    reports NumPy's float64 result as before."""
    x = np.linspace(-3.0, 3.0, N)
    op = jax.jit(python_op(np.sin, abstract_eval=like, name="sin_loops"))
    assert python_frames(lambda: op(x)) == []
    np.testing.assert_array_equal(np.asarray(op(x)), np.sin(x))
    i = np.arange(N, dtype=np.int64)
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"result 0: expected int64\[5000\], got float64\[5000\]"):
        jax.block_until_ready(op(i))
    np.testing.assert_array_equal(np.asarray(op(x + 1.0)), np.sin(x + 1.0))
