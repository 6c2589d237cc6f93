"""python_op under hostile use: nested and recursive ops, arrays kept past the call,
results counted per set of parameters, export, freeing ops, and errors whose cause
is hard to print.

Cases that crashed the process before run in a subprocess, so that a crash fails
the test instead of killing pytest.
"""

from __future__ import annotations

import gc
import os
import re
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.export import DisabledSafetyCheck

import xla_ffi_rs as xr
from xla_ffi_rs import python_op
from xla_ffi_rs.python_ops import registered_functions

TARGET = "xla_ffi_rs.python_call"

PRELUDE = """
import gc, os, sys
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from xla_ffi_rs import python_op
from xla_ffi_rs.python_ops import registered_functions
"""


def run_python(code: str, *, devices: int | None = None, env: dict[str, str] | None = None) -> str:
    """Run ``code`` (after PRELUDE) in a fresh interpreter; its stdout. Fails the test
    with the output if it exits non-zero (a segfault, an abort, an exception)."""
    full_env = dict(os.environ, **(env or {}))
    if devices:
        full_env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=full_env,
        cwd=Path(__file__).parent,
    )
    assert proc.returncode == 0, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-6000:]}"
    return proc.stdout


def like(x):
    return x


# -- ops inside ops (crashed the process) -------------------------------------


@pytest.mark.parametrize("how", ["eager", "jit", "jit_inside"])
def test_an_op_called_inside_another_ops_function(how: str) -> None:
    out = run_python(f"""
        inner = python_op(np.sin, abstract_eval=lambda x: x, name="inner")
        call_inner = jax.jit(inner) if "{how}" == "jit_inside" else inner
        outer = python_op(lambda x: np.asarray(call_inner(x)) + 1, abstract_eval=lambda x: x, name="outer")
        f = outer if "{how}" == "eager" else jax.jit(outer)
        x = np.linspace(0, 1, 5)
        for _ in range(3):
            np.testing.assert_allclose(np.asarray(f(x)), np.sin(x) + 1, rtol=1e-15)
        print("ok")
    """)
    assert out.strip() == "ok"


def test_an_op_that_calls_itself() -> None:
    out = run_python("""
        def rec(x, *, n):
            return np.asarray(op(x, n=n - 1)) * 2 if n else x + 0.0
        op = python_op(rec, abstract_eval=lambda x, *, n: x, name="rec")
        x = np.arange(3.0)
        np.testing.assert_array_equal(np.asarray(op(x, n=3)), x * 8)
        np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: op(x, n=4))(x)), x * 16)
        print("ok")
    """)
    assert out.strip() == "ok"


def test_recursion_with_the_same_signature_eager_and_under_jit() -> None:
    """A function that calls its own op with the same parameters, dtype and shape
    (JAX refuses to re-enter a jitted call that is still running, which the eager
    path is: the inner call gets a jitted bind of its own), at the first call, not
    only once a call of that signature has finished."""
    out = run_python("""
        def step(x):
            return x if x[0] >= 4 else np.asarray(op(x + 1))
        op = python_op(step, abstract_eval=lambda x: x, name="step")
        np.testing.assert_array_equal(np.asarray(op(np.zeros(2, np.float32))), [4, 4])
        np.testing.assert_array_equal(np.asarray(jax.jit(op)(np.zeros(3, np.float32))), [4, 4, 4])
        np.testing.assert_array_equal(np.asarray(op(np.zeros(2, np.float32))), [4, 4])
        print("ok")
    """)
    assert out.strip().splitlines()[-1] == "ok", out


def test_static_parameters_of_other_types_are_other_parameters() -> None:
    """`1`, `1.0` and `True` are three static parameters (as for `jax.jit`'s static
    arguments): each call's function gets the value passed, not the first equal one
    seen; and a NaN parameter makes one registered function, not one per call."""
    seen: list[Any] = []

    def f(x: np.ndarray, *, p: Any) -> np.ndarray:
        seen.append(p)
        return x + np.float32(1.0 if isinstance(p, float) else 2.0 if isinstance(p, bool) else 3.0)

    op = python_op(f, abstract_eval=lambda x, *, p: x, name="typed_params")
    x = np.zeros(2, np.float32)
    for p, want in [(1, 3.0), (1.0, 1.0), (True, 2.0), (1, 3.0)]:
        seen.clear()
        np.testing.assert_array_equal(np.asarray(op(x, p=p)), [want, want])
        np.testing.assert_array_equal(np.asarray(jax.jit(lambda x, p=p: op(x, p=p))(x)), [want, want])
        assert seen and all(type(v) is type(p) and v == p for v in seen), (p, seen)
    before = registered_functions()
    for _ in range(20):
        op(x, p=float("nan"))
    assert registered_functions() - before <= 1


def test_recursion_past_the_in_flight_limit_is_an_error_not_a_hang() -> None:
    """XLA:CPU runs at most 32 computations per device at once; a 33rd eager call
    made inside 32 running python ops would wait for a slot that none of them frees
    (it hung). It raises instead, naming the op and the limit; 32 levels still run."""
    out = run_python("""
        import faulthandler
        faulthandler.dump_traceback_later(120, exit=True)   # a hang fails the test
        def rec(x):
            return x if x.shape[0] <= 1 else np.concatenate([x[:1], np.asarray(op(x[1:]))])
        op = python_op(rec, abstract_eval=lambda x: x, name="deep")
        np.testing.assert_array_equal(np.asarray(op(np.arange(32.0))), np.arange(32.0))
        try:
            op(np.arange(40.0))
        except jax.errors.JaxRuntimeError as e:
            print(str(e).splitlines()[0])
        np.testing.assert_array_equal(np.asarray(op(np.arange(5.0))), np.arange(5.0))   # still works
        print("ok")
    """)
    first, last = out.strip().splitlines()[0], out.strip().splitlines()[-1]
    assert "op 'deep' raised RuntimeError: deep: called eagerly inside 32 running python op calls" in first, out
    assert "at most 32 computations at once" in first, out
    assert last == "ok"


def test_a_call_outside_any_op_waits_for_a_slot_instead_of_failing() -> None:
    """Only a call made inside a running op is refused at the limit: with 32 ops
    running on other threads, a call from a thread outside any waits for a slot and
    runs once one of them finishes."""
    out = run_python("""
        import faulthandler, threading, time
        faulthandler.dump_traceback_later(120, exit=True)
        go, started = threading.Event(), []
        def wait(x):
            if x[0]:
                started.append(1)
                go.wait()
            return x
        busy = python_op(wait, abstract_eval=lambda x: x, name="busy")
        other = python_op(np.negative, abstract_eval=lambda x: x, name="other")
        busy(np.zeros(2)), other(np.zeros(2))  # compiled before the threads (no cache miss among them)
        threads = [threading.Thread(target=lambda: busy(np.ones(2))) for _ in range(32)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 60
        while len(started) < 32 and time.monotonic() < deadline:
            time.sleep(0.01)
        running = len(started)
        threading.Timer(1.0, go.set).start()
        np.testing.assert_array_equal(np.asarray(other(np.ones(2))), -np.ones(2))
        for t in threads:
            t.join()
        print("ok" if running == 32 else f"only {running} of 32 started")
    """)
    if out.strip().startswith("only"):
        # Seen under heavy load: XLA did not start all 32 calls within a minute, so
        # the limit was never reached (the call outside still ran, after the others).
        pytest.skip(f"the limit was not reached: {out.strip()}")
    assert out.strip() == "ok"


def test_an_op_called_inside_a_sharded_ops_shard() -> None:
    out = run_python(
        """
        from jax.sharding import NamedSharding, PartitionSpec as P
        inner = python_op(np.exp, abstract_eval=lambda x: x, name="inner")
        outer = python_op(lambda x: np.asarray(inner(x)) - 1, abstract_eval=lambda x: x,
                          num_batch_dims=1, name="outer_sharded")
        mesh = jax.make_mesh((8,), ("a",))
        x = np.linspace(-1, 1, 32).reshape(16, 2)
        xs = jax.device_put(x, NamedSharding(mesh, P("a", None)))
        for _ in range(2):
            np.testing.assert_allclose(np.asarray(jax.jit(outer)(xs)), np.expm1(x), rtol=1e-12, atol=1e-15)
        print("ok")
        """,
        devices=8,
    )
    assert out.strip() == "ok"


# -- arrays kept after the call (read freed memory before) ---------------------


def test_kept_operands_and_outputs_stay_valid_and_writable_where_they_were() -> None:
    out = run_python(
        """
        kept = {}
        N = 8 << 20  # 64 MiB of float64

        def fill(x, out):
            out[...] = 1.5
            kept.update(operand=x, operand_slice=x[1:], operand_mv=memoryview(x),
                        out=out, out_slice=out[::2], out_mv=memoryview(out), out_t=out.reshape(-1, 4).T)

        op = python_op(fill, abstract_eval=lambda x: jax.ShapeDtypeStruct((N,), x.dtype),
                       takes_outputs=True, name="keeper")
        x = np.arange(5.0)
        got = op(x)
        assert float(got[0]) == 1.5 and float(got[-1]) == 1.5
        del got
        # Let XLA reuse the freed buffers.
        for i in range(3):
            jnp.full((N,), float(i)).block_until_ready()
            jax.jit(lambda v: v * 3)(jnp.ones((N,))).block_until_ready()
        assert kept["out"].sum() == 1.5 * N and kept["out_slice"].sum() == 1.5 * N / 2
        assert kept["out_mv"][N - 1] == 1.5 and kept["out_t"].shape == (4, N // 4)
        kept["out"][:] = 7.0
        kept["out_mv"][0] = 8.0
        assert kept["out_slice"][1] == 7.0 and kept["out"][0] == 8.0
        np.testing.assert_array_equal(kept["operand"], x)
        np.testing.assert_array_equal(kept["operand_slice"], x[1:])
        assert list(kept["operand_mv"].cast("B")) == list(x.tobytes())
        try:
            kept["operand"][0] = 1.0
        except ValueError as e:
            assert "read-only" in str(e)
        else:
            raise AssertionError("operand arrays are read-only")
        print("ok")
        """,
        env={"MALLOC_CHECK_": "3", "PYTHONMALLOC": "debug"},
    )
    assert out.strip() == "ok"


def test_kept_large_operands_are_not_reused_by_later_calls() -> None:
    """Large copies come from a pool of reused arrays: one the function kept is
    never handed out again while it is kept."""
    kept: list[np.ndarray] = []

    def keep(x):
        kept.append(x)
        return x[:1] * 1.0

    op = python_op(keep, abstract_eval=lambda x: jax.ShapeDtypeStruct((1,), x.dtype), name="keeps_large")
    n = 1 << 16  # 512 KiB of float64: pooled
    for i in range(4):
        op(jnp.full((n,), float(i))).block_until_ready()
    for i, x in enumerate(kept):
        assert x.shape == (n,) and not x.flags.writeable
        np.testing.assert_array_equal(x, np.full(n, float(i)))
    assert len({x.ctypes.data for x in kept}) == 4


_KEPT_FORMS = {
    "array": lambda x: x,
    "slice": lambda x: x[1:],
    "view": lambda x: x.view(np.int64),
    "memoryview": lambda x: memoryview(x),
    "base": lambda x: x.base,
    "memoryview of base": lambda x: memoryview(x.base),
    "frombuffer": lambda x: np.frombuffer(x, np.uint8),
    "nothing": lambda x: None,
}


@pytest.mark.parametrize("how", list(_KEPT_FORMS))
def test_kept_small_operands_keep_their_values_when_later_calls_reuse_copies(how: str) -> None:
    """Small copies are refilled by the next call when nothing refers to them: one
    the function kept, in any form, keeps its values, and each call sees its own."""
    kept: list[tuple[Any, float]] = []
    seen: list[float] = []

    def keep(x):
        assert not x.flags.writeable
        seen.append(float(x[0]))
        if len(kept) < 3:
            kept.append((_KEPT_FORMS[how](x), float(x[0])))
        return x * 2.0

    op = jax.jit(python_op(keep, abstract_eval=like, name="keeps_small"))
    for i in range(6):
        got = op(jnp.full((4,), float(i)))
        np.testing.assert_array_equal(np.asarray(got), np.full(4, 2.0 * i))
    assert seen == [float(i) for i in range(6)]
    assert len(kept) == 3
    for form, value in kept:
        if how == "nothing":
            assert form is None
            continue
        want = np.full(3 if how == "slice" else 4, value).tobytes()
        assert bytes(memoryview(form)) == want, how


def test_a_small_operand_written_by_the_function_is_refilled_by_the_next_call() -> None:
    def scribble(x):
        out = x * 2.0
        x.setflags(write=True)  # its own copy: writing it changes nothing of XLA's
        x[:] = -1.0
        return out

    op = jax.jit(python_op(scribble, abstract_eval=like, name="scribbles"))
    for i in range(4):
        x = jnp.full((3,), float(i))
        np.testing.assert_array_equal(np.asarray(op(x)), np.full(3, 2.0 * i))
        np.testing.assert_array_equal(np.asarray(x), np.full(3, float(i)))


def test_kept_returned_result_stays_the_functions_own() -> None:
    kept: list[np.ndarray] = []

    def f(x):
        y = x * 2
        kept.append(y)
        return y

    op = python_op(f, abstract_eval=like, name="keeps_result")
    got = np.asarray(op(np.arange(4.0)))
    kept[-1][:] = -1  # the function's own array: writing it changes nothing of XLA's
    np.testing.assert_array_equal(got, np.arange(4.0) * 2)


def test_a_dead_reference_cycle_holding_an_operand_does_not_fail_the_call() -> None:
    def f(x):
        try:
            raise ValueError("caught")
        except ValueError as e:
            last = e  # noqa: F841 - a frame <-> traceback cycle that holds x
        return x + 1

    op = python_op(f, abstract_eval=like, name="cycle")
    gc.disable()
    try:
        np.testing.assert_array_equal(np.asarray(op(np.arange(3.0))), np.arange(3.0) + 1)
    finally:
        gc.enable()


# -- result count per set of parameters (was instance state) -------------------


def test_result_count_follows_the_parameters_in_either_order() -> None:
    def fn(x, *, both):
        return (x + 1, x + 2) if both else x + 1

    def make(name):
        return python_op(fn, abstract_eval=lambda x, *, both: (x, x) if both else x, name=name)

    x = jnp.arange(3.0)
    op = make("one_then_two")
    np.testing.assert_array_equal(np.asarray(op(x, both=False)), np.arange(3.0) + 1)
    a, b = op(x, both=True)
    np.testing.assert_array_equal(np.asarray(a), np.arange(3.0) + 1)
    np.testing.assert_array_equal(np.asarray(b), np.arange(3.0) + 2)

    op = make("two_then_one")
    two, one = jax.jit(lambda x: op(x, both=True)), jax.jit(lambda x: op(x, both=False))
    assert len(two(x)) == 2
    np.testing.assert_array_equal(np.asarray(one(x)), np.arange(3.0) + 1)
    # The program compiled first still runs right after the other was traced.
    a, b = two(x)
    np.testing.assert_array_equal(np.asarray(b), np.arange(3.0) + 2)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: op(x, both=True)[1])(x)), np.arange(3.0) + 2)


# -- export -----------------------------------------------------------------------


def test_export_of_a_python_op_is_refused() -> None:
    op = python_op(np.sin, abstract_eval=like, name="not_exportable")
    assert TARGET not in {c.is_custom_call() for c in xr.export_checks()}
    with pytest.raises(ValueError, match=r"xla_ffi_rs\.python_call"):
        jax.export.export(jax.jit(op), disabled_checks=xr.export_checks())(jnp.ones(3))


def test_a_forced_export_fails_clearly_in_another_process(tmp_path: Path) -> None:
    op = python_op(np.square, abstract_eval=like, name="square")
    exported = jax.export.export(jax.jit(op), disabled_checks=[DisabledSafetyCheck.custom_call(TARGET)])(jnp.ones(3))
    np.testing.assert_array_equal(np.asarray(exported.call(jnp.arange(3.0))), np.arange(3.0) ** 2)
    path = tmp_path / "square.bin"
    path.write_bytes(exported.serialize())
    out = run_python(f"""
        negate = python_op(np.negative, abstract_eval=lambda x: x, name="negate")
        negate(np.ones(3)).block_until_ready()  # registers a function first
        restored = jax.export.deserialize(bytearray(open({str(path)!r}, "rb").read()))
        try:
            print(restored.call(jnp.arange(3.0)))
        except jax.errors.JaxRuntimeError as e:
            print(str(e).splitlines()[0])
    """)
    assert out.startswith("NOT_FOUND: xla_ffi_rs.python_call: no Python function is registered under key"), out
    assert "lowered in another process" in out, out


# -- ops are freed (were kept for the rest of the process) ------------------------


@pytest.mark.parametrize("jit_form", ["function", "op"])
def test_ops_made_from_fresh_functions_are_freed(jit_form: str) -> None:
    """300 ops of fresh closures, each called once under ``jit`` (of a function
    calling the op, or of the op itself) and once eagerly: their registry entries
    are dropped and RSS grows by less than 30 MiB."""
    out = run_python(f"""
        import ctypes

        def rss():
            # Freed heap memory stays in glibc's arenas until trimmed: return it first,
            # so that what remains is what is still allocated.
            # Linux only (/proc, glibc): on macOS and Windows 0, and only the registry
            # is checked there.
            gc.collect(); jax.clear_caches(); gc.collect()
            if not os.path.exists("/proc/self/statm"):
                return 0
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

        def one(i):
            op = python_op(lambda x: x + i, abstract_eval=lambda x: x, name=f"fresh_{{i}}")
            x = jnp.ones(4)
            f = jax.jit(lambda x: op(x)) if "{jit_form}" == "function" else jax.jit(op)
            assert float(f(x)[0]) == 1 + i
            assert float(op(x)[0]) == 1 + i

        for i in range(30):
            one(i)
        before, keys = rss(), registered_functions()
        for i in range(30, 330):
            one(i)
        print((rss() - before) / 2**20, registered_functions() - keys)
    """)
    grown, keys = out.split()
    assert int(keys) <= 5, out
    if jit_form == "op" and float(grown) >= 30 and jax.__version_info__ < (0, 12):
        pytest.xfail(
            f"jax {jax.__version__}: {float(grown):.0f} MiB for 300 ops passed to jax.jit themselves (the ops "
            "and their functions are freed; jaxlib keeps native memory, not seen with jax 0.12)"
        )
    assert float(grown) < 30, out


def test_many_static_parameters_of_one_op_are_bounded_and_freed_with_it() -> None:
    out = run_python("""
        import ctypes

        def rss():
            # Freed heap memory stays in glibc's arenas until trimmed: return it first,
            # so that what remains is what is still allocated.
            # Linux only (/proc, glibc): on macOS and Windows 0, and only the registry
            # is checked there.
            gc.collect(); jax.clear_caches(); gc.collect()
            if not os.path.exists("/proc/self/statm"):
                return 0
            ctypes.CDLL("libc.so.6").malloc_trim(0)
            return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

        op = python_op(lambda x, *, k: x + k, abstract_eval=lambda x, *, k: x, name="params")
        x = jnp.ones(2)
        for k in range(50):
            op(x, k=k).block_until_ready()
        gc.collect(); jax.clear_caches(); gc.collect()
        before, keys = rss(), registered_functions()
        for k in range(50, 1050):
            assert float(op(x, k=k)[0]) == 1 + k
        gc.collect(); jax.clear_caches(); gc.collect()
        grown = (rss() - before) / 2**20
        del op
        gc.collect()
        print(grown, registered_functions() < keys)
    """)
    grown, freed = out.split()
    assert float(grown) < 30, out
    assert freed == "True", out


def test_a_compiled_program_keeps_the_function_of_a_freed_op() -> None:
    """The executable holds the function it was compiled with: running it after its
    op was garbage collected runs the function (it failed with NOT_FOUND), and the
    function is freed with the executable."""
    calls = []

    def plus_one(x):
        calls.append(x.shape)
        return x + 1

    op = python_op(plus_one, abstract_eval=like, name="freed_after_compile")
    ref, fn = weakref.ref(op), weakref.ref(plus_one)
    # A program that holds the op's key only (no reference to the op, as a program
    # still running on other devices after the caller dropped everything).
    call = jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct((3,), jnp.float64))
    key = np.int64(op.key({}, None))
    compiled = jax.jit(lambda x: call(x, callback=key)).lower(jnp.ones(3)).compile()
    del op, plus_one
    gc.collect()
    assert ref() is None  # and its finalizer took the key out of the registry
    np.testing.assert_array_equal(compiled(jnp.arange(3.0)), [1.0, 2.0, 3.0])
    assert calls == [(3,)]
    del compiled
    jax.clear_caches()
    for _ in range(3):
        gc.collect()
        registered_functions()  # a call into the extension drops references it deferred
    assert fn() is None


def test_a_key_whose_op_was_freed_fails_with_not_found() -> None:
    op = python_op(lambda x: x + 1, abstract_eval=like, name="short_lived")
    key = op.key({}, None)
    del op
    gc.collect()
    call = jax.ffi.ffi_call(TARGET, jax.ShapeDtypeStruct((3,), jnp.float64))
    # Found missing when the program is compiled (the instantiate stage), before it runs.
    lowered = jax.jit(lambda x: call(x, callback=np.int64(key))).lower(jnp.ones(3))
    with pytest.raises(
        jax.errors.JaxRuntimeError,
        match=r"NOT_FOUND: .*python_call: no Python function is registered under key .*was garbage collected",
    ):
        lowered.compile()


@pytest.mark.parametrize("how", ["lowered", "one_expression"])
def test_a_lowered_program_keeps_its_ops_until_compiled(how: str) -> None:
    """``jit(f).lower(x)`` outlives ``f`` (and the jaxpr caches that held its op):
    its ``compile()`` failed with NOT_FOUND, also in one expression,
    ``jit(f).lower(x).compile()`` (``f`` is freed before ``compile`` runs). The
    lowered and compiled objects hold the op, and it is freed with them."""
    refs = []

    def make():
        op = python_op(lambda x: x * 3, abstract_eval=like, name="lowered_only")
        refs.append(weakref.ref(op))
        return jax.jit(lambda x: op(x) + 1)

    if how == "lowered":
        lowered = make().lower(jnp.ones(3))
        jax.clear_caches()
        gc.collect()
        compiled = lowered.compile()
        del lowered
    else:
        compiled = make().lower(jnp.ones(3)).compile()
    np.testing.assert_array_equal(compiled(jnp.arange(3.0)), [1.0, 4.0, 7.0])
    assert refs[0]() is not None
    del compiled
    jax.clear_caches()
    for _ in range(3):
        gc.collect()
    assert refs[0]() is None


# -- errors that are hard to print -------------------------------------------------


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no str for you")


class NamelessMeta(type):
    @property
    def __name__(cls) -> str:  # type: ignore[override]
        raise RuntimeError("no name for you")


class Nameless(Exception, metaclass=NamelessMeta):
    pass


def raise_bad_str(x):
    raise BadStr()


def raise_nameless(x):
    raise Nameless("the message")


def raise_surrogate(x):
    raise ValueError("bad byte \udcff here")


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (raise_bad_str, ["op 'bad_str' raised BadStr: <exception str() failed>"]),
        (raise_nameless, ["op 'nameless' raised", "the message"]),
        (raise_surrogate, ["op 'surrogate' raised ValueError: bad byte \\udcff here"]),
    ],
    ids=["str_raises", "class_name_raises", "lone_surrogate"],
)
def test_unprintable_exceptions_still_name_the_op(fn, words) -> None:
    name = fn.__name__.removeprefix("raise_")
    op = python_op(fn, abstract_eval=like, name=name)
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        op(jnp.ones(2)).block_until_ready()
    message = str(info.value)
    assert message.startswith("UNKNOWN: xla_ffi_rs.python_call: op "), message
    for word in words:
        assert word in message, (word, message)


def test_float8_round_trips_and_int4_names_the_op_and_operand() -> None:
    f8 = python_op(
        lambda x: x.astype(np.float32) * 2, abstract_eval=lambda x: jax.ShapeDtypeStruct(x.shape, np.float32)
    )
    x = np.array([0.5, 1.0, -2.0], dtype=ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(np.asarray(jax.jit(f8)(x)), x.astype(np.float32) * 2)
    i4 = python_op(
        lambda x: x.astype(np.int8), abstract_eval=lambda x: jax.ShapeDtypeStruct(x.shape, np.int8), name="i4"
    )
    with pytest.raises(TypeError) as info:  # at the call, before lowering (the handler checks it too)
        jax.jit(i4)(jnp.arange(4, dtype=jnp.int4)).block_until_ready()
    message = str(info.value)
    assert message.startswith("i4: operand 0: python_op does not support int4"), message


def test_a_jvp_rule_that_returns_one_value_is_a_clear_type_error() -> None:
    op = python_op(np.sin, abstract_eval=like, name="bad_jvp", jvp=lambda primals, tangents: (jnp.sin(primals[0]),))
    with pytest.raises(
        TypeError,
        match=r"bad_jvp: the jvp rule must return a pair \(primal_out, tangent_out\), got a "
        r"tuple of length 1",
    ):
        jax.jvp(op, (jnp.ones(2),), (jnp.ones(2),))


@pytest.mark.parametrize(
    ("tangent", "got"),
    [
        (lambda p, t: jnp.ones(3, jnp.float32), "float32[3]"),  # before: accepted; jacfwd (3, 6), grad all zeros
        (lambda p, t: t[0].astype(jnp.float16), "float16[6]"),  # before: a float16 tangent of a float32 result
        (lambda p, t: jnp.ones((6, 1), jnp.float32), "float32[6,1]"),
    ],
)
def test_a_jvp_rule_whose_tangent_is_not_the_results_type_is_a_clear_type_error(tangent, got) -> None:
    op = python_op(np.cos, abstract_eval=like, name="bad_tangent")
    op.def_jvp_rule(lambda primals, tangents: (op(*primals), tangent(primals, tangents)))
    x = jnp.linspace(0.0, 1.0, 6, dtype=jnp.float32)
    words = rf"^bad_tangent: the JVP rule's tangent for result 0: expected float32\[6\] .*got {re.escape(got)}"
    with pytest.raises(TypeError, match=words):
        jax.jvp(op, (x,), (jnp.ones_like(x),))
    with pytest.raises(TypeError, match=words):
        jax.grad(lambda v: op(v).sum())(x)
    # None, a symbolic zero and the right type pass; under vmap too.
    good = python_op(np.cos, abstract_eval=like, name="good_tangent")
    good.def_jvp_rule(lambda p, t: (good(*p), -jnp.sin(p[0]) * t[0]))
    np.testing.assert_allclose(jax.vmap(jax.grad(lambda v: good(v).sum()))(x[None]), -np.sin(x[None]), rtol=1e-6)


def test_a_transpose_rule_that_does_not_return_a_tuple_per_operand_is_a_clear_type_error() -> None:
    def cumsum_op(name: str, transpose: Any) -> Any:
        cs = python_op(lambda x: np.cumsum(x, -1), abstract_eval=like, name=name)
        cs.def_jvp_rule(lambda p, t: (cs(*p), cs(t[0])))
        cs.def_transpose_rule(transpose)
        return cs

    x = jnp.ones((2, 3), jnp.float32)
    # Before: "safe_zip() argument 1 has length 2 but argument 0 has length 1", naming nothing.
    bare = cumsum_op("bare_ct", lambda ct, x: jnp.flip(jnp.cumsum(jnp.flip(ct, -1), -1), -1))
    with pytest.raises(
        TypeError,
        match=r"^bare_ct: the transpose rule must return a tuple of one cotangent .* "
        r"per operand \(1\), got ArrayImpl \(return \(ct,\) for a one-operand op\)",
    ):
        jax.grad(lambda v: bare(v).sum())(x)
    two = cumsum_op("two_cts", lambda ct, x: (ct, ct))
    with pytest.raises(TypeError, match=r"^two_cts: the transpose rule returned 2 cotangents for 1 operand(?!s)"):
        jax.grad(lambda v: two(v).sum())(x)
    wrong = cumsum_op("wrong_ct", lambda ct, x: (ct[0],))
    with pytest.raises(
        TypeError,
        match=r"^wrong_ct: the transpose rule's cotangent for operand 0 \(x\): expected "
        r"shape \(2, 3\), got \(3,\)",
    ):
        jax.grad(lambda v: wrong(v).sum())(x)
    right = cumsum_op("right_ct", lambda ct, x: (jnp.flip(jnp.cumsum(jnp.flip(ct, -1), -1), -1),))
    np.testing.assert_allclose(jax.grad(lambda v: right(v).sum())(x), [[3.0, 2.0, 1.0]] * 2)


def test_a_result_too_large_for_xla_is_a_value_error_not_an_abort() -> None:
    # Before: jaxlib 0.10 aborted the process (BadStatusOrAccess, overflow in the
    # static extent product); 0.12 raised a RuntimeError naming neither.
    out = run_python(
        """
        op = python_op(np.sin, abstract_eval=lambda x: jax.ShapeDtypeStruct((2**62,), jnp.float32), name="huge")
        try:
            op(jnp.ones(4))
        except ValueError as e:
            print("ValueError:", e)
        """
    )
    assert out.startswith("ValueError: huge: abstract_eval result 0: a shape of 4611686018427387904 float32 "), out
    assert "more than the 9223372036854775807 bytes an XLA array can" in out, out


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_keyboard_interrupt_and_system_exit_become_errors_naming_them(exc) -> None:
    """Documented: XLA runs the function, so these cannot unwind through it; they fail
    the computation like any exception, named in the message."""

    def f(x):
        raise exc()

    op = python_op(f, abstract_eval=like, name=f"raises_{exc.__name__}")
    with pytest.raises(jax.errors.JaxRuntimeError, match=f"op 'raises_{exc.__name__}' raised {exc.__name__}"):
        op(jnp.ones(2)).block_until_ready()
    np.testing.assert_array_equal(np.asarray(python_op(np.negative, abstract_eval=like)(np.ones(2))), -np.ones(2))


def test_registry_holds_no_op_alive_through_its_functions() -> None:
    jax.clear_caches()
    gc.collect()
    before = registered_functions()
    op = python_op(lambda x: x * 3, abstract_eval=like, name="temporary")
    op(jnp.ones(2)).block_until_ready()
    jax.jit(op)(jnp.ones(2)).block_until_ready()
    assert registered_functions() > before
    alive = weakref.ref(op)
    del op
    jax.clear_caches()  # JAX's caches of traced code hold the op, as they hold functions
    gc.collect()
    assert alive() is None
    assert registered_functions() == before


def test_large_copies_are_reused_when_nothing_keeps_them() -> None:
    seen: list[int] = []

    def record(x, out):
        seen.append(x.base.ctypes.data)
        out[...] = x

    op = jax.jit(python_op(record, abstract_eval=like, takes_outputs=True, name="pool_reuse"))
    x = jnp.arange(1 << 16, dtype=jnp.float64)
    for _ in range(4):
        np.testing.assert_array_equal(np.asarray(op(x)), np.asarray(x))
    assert len(set(seen[1:])) == 1, seen


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"num_batch_dims": True}, TypeError, "num_batch_dims must be a non-negative int, got bool"),
        ({"num_batch_dims": -1}, ValueError, "num_batch_dims must be a non-negative int, got -1"),
        ({"batched": (1, 2)}, TypeError, "batched must be (operand flags, result flags)"),
        ({"batched": ([1], [True])}, TypeError, "batched must be (operand flags, result flags) of bools"),
        ({"name": 3}, TypeError, "name must be a str, got int"),
        ({"takes_outputs": "no"}, TypeError, "takes_outputs must be a bool, got str"),
        ({"vectorized": None}, TypeError, "vectorized must be a bool, got NoneType"),
    ],
    ids=str,
)
def test_bad_options_raise_before_anything_runs(kwargs, error, words) -> None:
    with pytest.raises(error) as info:
        python_op(np.sin, abstract_eval=like, **kwargs)
    assert words in str(info.value)


def test_bad_calls_name_the_op_and_parameter() -> None:
    op = python_op(lambda x, *, k: x, abstract_eval=lambda x, *, k: x, name="unhashable")
    with pytest.raises(TypeError, match="unhashable: static parameter 'k' must be hashable, got list"):
        op(jnp.ones(2), k=[1])
    ones = jnp.ones(2)
    traced: list[Any] = [
        lambda: jax.jit(lambda x, k: op(x, k=k))(ones, ones),
        lambda: jax.vmap(lambda x, k: op(x, k=k))(ones, ones),
        lambda: jax.grad(lambda k: op(1.0, k=k))(1.0),
        lambda: jax.pmap(lambda x, k: op(x, k=k), in_axes=(0, None))(ones[None], ones),
    ]
    for call in traced:
        with pytest.raises(TypeError) as info:  # not "must be hashable", which a traced value did read
            call()
        assert "unhashable: static parameter 'k' is traced (" in str(info.value)
        assert "but it must be a Python value known when tracing" in str(info.value)
        assert "static_argnames='k'" in str(info.value)
        assert "under jax.pmap, pass it positionally with static_broadcasted_argnums" in str(info.value)
    two = python_op(np.add, abstract_eval=lambda a, b: a, batched=([True, False], [True]), name="flags")
    with pytest.raises(ValueError, match="flags: batched gives flags for 2 operands, called with 1"):
        two(jnp.ones(2))
    for nbd in (None, 1):  # with num_batch_dims=1 this was "zip() argument 2 is longer than argument 1"
        three = python_op(
            lambda x: x, abstract_eval=lambda x: x, num_batch_dims=nbd, batched=([True], [True, False]), name="rflags"
        )
        for call in (three, jax.jit(three)):
            with pytest.raises(ValueError, match="rflags: batched gives flags for 2 results, abstract_eval gave 1"):
                call(jnp.ones((4, 2)))
