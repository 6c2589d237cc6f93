"""Side effects: ``has_side_effect=True`` on ``python_op`` and ``binding.op`` (XLA
keeps an unused call and does not merge identical ones), how many times an effectful
function runs under the transformations, and pending effects at
``jax.effects_barrier()`` and at interpreter exit. (Errors under asynchronous
dispatch: ``tests/test_async_errors.py``.)"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs
from helpers import count_calls
from xla_ffi_rs import binding, examples, python_op

SCALE = "xla_ffi_rs.examples.scale"
examples.register()


def counting_ops(tag: str) -> tuple[list[np.ndarray], Any, Any]:
    """A function that records each call, as a pure op and as one with an effect,
    both with a JVP rule (``sin``)."""
    calls: list[np.ndarray] = []

    def record(x: np.ndarray) -> np.ndarray:
        calls.append(np.array(x))
        return np.sin(x)

    ops = []
    for effect in (False, True):
        op = python_op(record, abstract_eval=lambda x: x, name=f"record_{tag}_{effect}", has_side_effect=effect)

        @op.def_jvp_rule
        def _(primals: Any, tangents: Any, op: Any = op) -> Any:
            (x,), (t,) = primals, tangents
            return op(x), jnp.cos(x) * t

        ops.append(op)
    return calls, ops[0], ops[1]


def run_count(calls: list[np.ndarray], f: Callable[..., Any], *args: Any) -> int:
    calls.clear()
    jax.block_until_ready(f(*args))
    return len(calls)


X = jnp.linspace(-1.0, 1.0, 3, dtype=jnp.float32)


def test_an_unused_call_runs_only_with_has_side_effect() -> None:
    calls, pure, effect = counting_ops("unused")
    unused = lambda op: jax.jit(lambda x: (op(x), x + 1)[1])  # noqa: E731
    assert run_count(calls, unused(pure), X) == 0  # XLA drops it, as docs/python_op.md says
    assert run_count(calls, unused(effect), X) == 1
    np.testing.assert_array_equal(calls[0], np.asarray(X))
    # Eager calls run either way.
    assert run_count(calls, lambda x: (pure(x), x)[1], X) == 1


def test_identical_calls_are_merged_unless_has_side_effect() -> None:
    calls, pure, effect = counting_ops("twice")
    for op, n in ((pure, 1), (effect, 2)):
        f = jax.jit(lambda x, op=op: op(x) + op(x))
        assert run_count(calls, f, X) == n
        np.testing.assert_allclose(np.asarray(f(X)), 2 * np.sin(np.asarray(X, np.float64)), rtol=1e-6)


# (transformation, calls of the pure op, calls of the op with the effect)
TRANSFORMS: list[tuple[str, Callable[[Any], Callable[..., Any]], int, int]] = [
    ("vmap, once per element", lambda op: jax.jit(jax.vmap(op)), 4, 4),
    ("scan of length 5", lambda op: jax.jit(lambda x: jax.lax.scan(lambda c, _: (op(c), None), x, None, 5)[0]), 5, 5),
    ("cond, branch taken", lambda op: jax.jit(lambda x: jax.lax.cond(True, op, lambda y: y, x)), 1, 1),
    ("cond, branch not taken", lambda op: jax.jit(lambda x: jax.lax.cond(False, op, lambda y: y, x)), 0, 0),
    ("grad, forward result unused", lambda op: jax.jit(jax.grad(lambda x: op(x).sum())), 0, 1),
    ("value_and_grad", lambda op: jax.jit(jax.value_and_grad(lambda x: op(x).sum())), 1, 1),
    ("eager grad of checkpoint: recomputed", lambda op: jax.grad(jax.checkpoint(lambda x: jnp.sin(op(x)).sum())), 2, 1),
    ("jit grad of checkpoint", lambda op: jax.jit(jax.grad(jax.checkpoint(lambda x: jnp.sin(op(x)).sum()))), 1, 1),
]


@pytest.mark.parametrize(
    ("transform", "make", "pure_calls", "effect_calls"), TRANSFORMS, ids=[t[0] for t in TRANSFORMS]
)
def test_calls_per_transformation(transform: str, make: Any, pure_calls: int, effect_calls: int) -> None:
    """The counts docs/python_op.md ("Side effects") gives; the results match jnp."""
    calls, pure, effect = counting_ops(transform.split(",")[0].replace(" ", "_"))
    xs = jnp.stack([X, X + 1, X - 1, 2 * X]) if transform.startswith("vmap") else X
    twin = make(jnp.sin)
    for op, n in ((pure, pure_calls), (effect, effect_calls)):
        f = make(op)
        if op.has_side_effect and "checkpoint" in transform and jax.__version_info__ < (0, 12):
            # JAX's: jax 0.10 has no remat of FFI effects (jax.ffi.ffi_call's either).
            with pytest.raises(NotImplementedError, match="Effects not supported in partial-eval of `checkpoint`"):
                f(xs)
            continue
        assert run_count(calls, f, xs) == n, (transform, op.has_side_effect)
        for got, want in zip(jax.tree.leaves(f(xs)), jax.tree.leaves(twin(xs)), strict=True):
            np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-6, atol=1e-6)


def test_off_cpu_an_effect_lowers_to_io_callback() -> None:
    """Off CPU the op lowers to a callback around the same call: io_callback for an
    effect (kept when unused), pure_callback otherwise (dropped); run that lowering
    on CPU."""
    calls, pure, effect = counting_ops("fallback")
    for op, n in ((pure, 0), (effect, 1)):
        f = jax.jit(lambda x, op=op: (op._callback_impl(x), x + 1)[1])
        assert run_count(calls, f, X) == n
        assert ("io_callback" in str(jax.make_jaxpr(f)(X))) == op.has_side_effect


def test_has_side_effect_is_checked_and_makes_another_op() -> None:
    f = same = lambda x: x
    with pytest.raises(TypeError, match=r"^python_op: has_side_effect must be a bool, got str$"):
        python_op(f, abstract_eval=same, has_side_effect="yes")  # type: ignore[call-overload]
    effect = python_op(f, abstract_eval=same, has_side_effect=True)
    assert python_op(f, abstract_eval=same, has_side_effect=True) is effect
    assert python_op(f, abstract_eval=same) is not effect


# -- binding.op -------------------------------------------------------------------


def compiled_calls(f: Callable[..., Any], *args: Any) -> int:
    text = jax.jit(f).lower(*args).compile().as_text() or ""
    return text.count(f'custom_call_target="{SCALE}"')


def test_declared_op_has_side_effect_keeps_and_does_not_merge_calls() -> None:
    decl = xla_ffi_rs.declarations()[SCALE]
    pure, effect = binding.op(decl), binding.op(decl, has_side_effect=True)
    assert pure is not effect and binding.op(decl, has_side_effect=True) is effect
    x = jnp.arange(4.0, dtype=jnp.float32)
    for op, unused, twice in ((pure, 0, 1), (effect, 1, 2)):
        lowered = jax.jit(lambda x, op=op: op(x, factor=2.0)).lower(x).as_text()
        assert ("has_side_effect = true" in lowered) == op.has_side_effect
        assert count_calls(lowered, SCALE) == 1
        assert compiled_calls(lambda x, op=op: (op(x, factor=2.0), x + 1)[1], x) == unused
        both = lambda x, op=op: op(x, factor=2.0)[0] + op(x, factor=2.0)[0]  # noqa: E731
        assert compiled_calls(both, x) == twice
        np.testing.assert_array_equal(np.asarray(jax.jit(both)(x)), 4 * np.arange(4.0))
        # Its rules still apply: linear, its own transpose.
        grad = jax.grad(lambda x, op=op: (op(x, factor=3.0)[0] * x).sum())(x)
        np.testing.assert_array_equal(np.asarray(grad), 6 * np.arange(4.0))


def test_declared_ops_take_has_side_effect_and_check_it() -> None:
    decls = xla_ffi_rs.declarations()
    built = binding.ops(decls, scale={"has_side_effect": True})
    assert built["scale"].has_side_effect
    with pytest.raises(TypeError, match=r"binding.Op 'scale': has_side_effect: expected a bool, got str"):
        binding.op(decls[SCALE], has_side_effect="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"binding.ops: scale: unknown option\(s\) \['side_effect'\]"):
        binding.ops(decls, scale={"side_effect": True})


# -- waiting for effects -----------------------------------------------------------

#: A program XLA:CPU runs asynchronously (large operands; it runs small programs in
#: the calling thread): a slow pure op, then an op with an effect on its result.
PENDING = textwrap.dedent(
    """
    import time, jax, jax.numpy as jnp
    from xla_ffi_rs import python_op

    def slow(x):
        time.sleep(0.5)
        return x + 1

    def log(x):
        print("effect ran", flush=True)
        return x

    slow_op = python_op(slow, abstract_eval=lambda x: x, name="slow")
    log_op = python_op(log, abstract_eval=lambda x: x, name="log", has_side_effect=True)
    f = jax.jit(lambda x: (log_op(slow_op(x)), x + 1)[1])
    x = jnp.ones(1_000_000, jnp.float32)
    f.lower(x).compile()
    f(x)
    print("dispatched", flush=True)
    """
)


def run_script(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)


def test_effects_barrier_waits_for_a_pending_effect() -> None:
    done = run_script(PENDING + "jax.effects_barrier()\nprint('after barrier', flush=True)\n")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["dispatched", "effect", "ran", "after", "barrier"], done.stdout


def test_exit_runs_a_pending_effect() -> None:
    """At exit JAX waits for the programs with effects; the python_call target was
    closed before that wait, so the pending call failed with UNAVAILABLE instead of
    running ("Exception ignored in atexit callback" on stderr)."""
    done = run_script(PENDING)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["dispatched", "effect", "ran"], (done.stdout, done.stderr[-2000:])
    assert "Exception ignored" not in done.stderr and "UNAVAILABLE" not in done.stderr, done.stderr[-2000:]


def test_exit_reports_an_effect_that_failed_and_still_exits() -> None:
    code = PENDING.replace('print("effect ran", flush=True)', 'raise OSError("disk full")')
    done = run_script(code)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["dispatched"]
    assert "op 'log' raised OSError: disk full" in done.stderr, done.stderr[-2000:]
