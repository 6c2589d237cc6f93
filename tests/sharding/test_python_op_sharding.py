"""python_op under sharding: with num_batch_dims, each device runs the Python
function on its own shard (no all-gather), from XLA's threads, in parallel with
the caller waiting (the caller does not hold the GIL while XLA runs)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading

import jax
import numpy as np
import pytest
import scipy.special
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from helpers import run_threads
from xla_ffi_rs import python_op

TARGET = "xla_ffi_rs.python_call"


@pytest.fixture(params=["shardy", "gspmd"])
def partitioner(request: pytest.FixtureRequest, use_partitioner) -> str:
    """Run the test under each of jax's partitioners (``use_partitioner``: conftest)."""
    use_partitioner(request.param)
    return request.param


class Recorder:
    def __init__(self):
        self.lock, self.calls = threading.Lock(), []

    def __call__(self, x):
        with self.lock:
            self.calls.append((x.shape, threading.get_ident()))
        return scipy.special.erfcx(x)


def test_each_device_runs_the_function_on_its_shard(partitioner: str) -> None:
    rec = Recorder()
    op = python_op(rec, abstract_eval=lambda x: x, num_batch_dims=1, name=f"sharded_erfcx_{partitioner}")
    mesh = jax.make_mesh((8,), ("a",))
    x = np.random.default_rng(0).uniform(-1, 3, (16, 5))
    xs = jax.device_put(x, NamedSharding(mesh, P("a", None)))
    f = jax.jit(op)
    hlo = f.lower(xs).compile().as_text() or ""
    assert TARGET in hlo and "all-gather" not in hlo and "all-to-all" not in hlo
    got = f(xs)
    np.testing.assert_allclose(np.asarray(got), scipy.special.erfcx(x), rtol=1e-15)
    assert got.sharding.spec == P("a", None) or got.sharding.is_equivalent_to(xs.sharding, 2)
    shapes = [s for s, _ in rec.calls]
    assert shapes == [(2, 5)] * 8, shapes
    # XLA ran the function on its own threads while this (the calling) thread waited:
    # that works only because the caller does not hold the GIL while XLA runs.
    assert {t for _, t in rec.calls} - {threading.get_ident()}


@pytest.mark.parametrize("vectorized_vmap", [False, True])
def test_the_function_sees_its_own_ranks(partitioner: str, vectorized_vmap: bool) -> None:
    """Every axis a batch axis (rank 1, num_batch_dims=1): the partitioned call gets
    a unit axis appended, which the function must not see."""
    shapes = []

    def sin(x):
        shapes.append(x.shape)
        return np.sin(x)

    op = python_op(sin, abstract_eval=lambda x: x, num_batch_dims=1, vectorized=True, name=f"rank1_{partitioner}")
    mesh = jax.make_mesh((8,), ("a",))
    x: np.ndarray
    want_shape: tuple[int, ...]
    if vectorized_vmap:
        x = np.arange(32.0).reshape(16, 2)
        f = jax.jit(jax.vmap(op))  # the batched call has rank 2 and still 1 batch axis
        want_shape = (2, 2)
    else:
        x = np.arange(16.0)
        f = jax.jit(op)
        want_shape = (2,)
    xs = jax.device_put(x, NamedSharding(mesh, P("a")))
    np.testing.assert_array_equal(np.asarray(f(xs)), np.sin(x))
    assert set(shapes) == {want_shape}, shapes


@pytest.mark.parametrize("callers", [1, 4])
def test_sharded_calls_from_several_python_threads(callers: int) -> None:
    op = python_op(np.sin, abstract_eval=lambda x: x, num_batch_dims=1, name="sharded_sin")
    mesh = jax.make_mesh((8,), ("a",))
    x = np.linspace(0, 3, 64).reshape(8, 8)
    xs = jax.device_put(x, NamedSharding(mesh, P("a", None)))
    f = jax.jit(op)
    out = run_threads(lambda i: [np.asarray(f(xs)) for _ in range(10)], callers)
    for per in out:
        for r in per:
            np.testing.assert_array_equal(r, np.sin(x))


def test_replicated_operand_with_batched(partitioner: str) -> None:
    """A weight shared by every row: ``batched`` marks it unbatched, so each shard
    sees its rows and the whole weight."""
    shapes = []

    def scale(x, w):
        shapes.append((x.shape, w.shape))
        return x * w

    op = python_op(
        scale,
        abstract_eval=lambda x, w: x,
        num_batch_dims=1,
        batched=([True, False], [True]),
        name=f"sharded_scale_{partitioner}",
    )
    mesh = jax.make_mesh((8,), ("a",))
    x, w = np.arange(48.0).reshape(16, 3), np.array([1.0, 2.0, 3.0])
    xs = jax.device_put(x, NamedSharding(mesh, P("a", None)))
    f = jax.jit(op)
    hlo = f.lower(xs, w).compile().as_text() or ""
    assert "all-gather" not in hlo and "all-to-all" not in hlo
    np.testing.assert_array_equal(np.asarray(f(xs, w)), x * w)
    assert set(shapes) == {((2, 3), (3,))}, shapes


@pytest.mark.parametrize(("in_axes", "spec"), [(0, P("a", "b")), (1, P("a", "b")), (1, P(None, "a"))])
def test_vmap_of_a_vectorized_op_with_an_unbatched_weight(partitioner: str, in_axes: int, spec: P) -> None:
    """vmap of a vectorized op puts the vmap axis in front of the weight too: that
    axis must be split like x's, or each shard of x met the whole broadcast weight
    (the function raised on the shapes, or returned too many rows)."""
    shapes = []

    def scale(x, w):
        shapes.append((x.shape, w.shape))
        return x * w[..., None, :]

    op = python_op(
        scale,
        abstract_eval=lambda x, w: x,
        num_batch_dims=1,
        batched=([True, False], [True]),
        vectorized=True,
        name=f"vmapped_scale_{partitioner}",
    )
    mesh = jax.make_mesh((4, 2), ("a", "b"), axis_types=(jax.sharding.AxisType.Auto,) * 2)
    x, w = np.random.default_rng(1).normal(size=(8, 4, 6)), np.arange(1.0, 7.0)
    xs = jax.device_put(x, NamedSharding(mesh, spec))
    got = jax.jit(jax.vmap(op, in_axes=(in_axes, None)))(xs, w)
    np.testing.assert_array_equal(np.asarray(got), np.moveaxis(x, in_axes, 0) * w)
    assert all(a[0] == b[0] and a[0] < x.shape[in_axes] for a, b in shapes), shapes


@pytest.mark.parametrize("use", ["vmap", "vmap_of_grad"])
def test_a_vmapped_scalar_function_runs_on_each_shard(partitioner: str, use: str) -> None:
    """A vectorized op with num_batch_dims=1 written for one element and vmapped (the
    usual JAX pattern) was refused at the call ("operand 0 has shape (), of rank below
    1"), though the call vmap makes carries the batch axis in front; it now runs,
    each device on its own shard, with no all-gather."""
    rec = Recorder()
    op = python_op(rec, abstract_eval=lambda x: x, vectorized=True, num_batch_dims=1, name=f"scalar_{partitioner}")
    op.def_jvp_rule(lambda p, t: (op(p[0]), (2 * p[0] * op(p[0]) - 2 / np.sqrt(np.pi)) * t[0]))
    mesh = jax.make_mesh((8,), ("a",))
    x = np.random.default_rng(4).uniform(-1, 3, 16)
    xs = jax.device_put(x, NamedSharding(mesh, P("a")))
    one = op if use == "vmap" else jax.grad(op)
    f = jax.jit(jax.vmap(one))
    hlo = f.lower(xs).compile().as_text() or ""
    assert TARGET in hlo and "all-gather" not in hlo and "all-to-all" not in hlo
    y = scipy.special.erfcx(x)
    want = y if use == "vmap" else 2 * x * y - 2 / np.sqrt(np.pi)
    np.testing.assert_allclose(np.asarray(f(xs)), want, rtol=1e-13)
    assert {s for s, _ in rec.calls} == {(2,)}, rec.calls


@pytest.mark.parametrize("in_axes", [0, 1, 2])
def test_sequential_vmap_over_an_explicitly_sharded_axis(in_axes: int) -> None:
    """vmap of an op without ``vectorized`` loops with ``lax.map``, which refuses a
    mapped axis split over explicit mesh axes ("0th dimension of all xs should be
    replicated", naming no op): the axis is gathered first."""
    op = python_op(lambda x, w: x * w, abstract_eval=lambda x, w: x, name="sequential_scale")
    mesh = jax.make_mesh((4, 2), ("a", "b"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    x = np.random.default_rng(2).normal(size=(8, 4, 6))
    xs = jax.device_put(x, NamedSharding(mesh, P("a", "b")))
    w = np.arange(1.0, 7.0)[: x.shape[2]] if in_axes != 2 else np.float64(3.0)
    got = jax.jit(jax.vmap(op, in_axes=(in_axes, None)))(xs, w)
    np.testing.assert_allclose(np.asarray(got), np.moveaxis(x, in_axes, 0) * w, rtol=1e-15)
    # Typed as jnp's vmap types it: the batch axis split again (the loop's result was
    # typed whole, so the next op saw a replicated value).
    jnp_spec = jax.typeof(jax.jit(jax.vmap(lambda x, w: x * w, in_axes=(in_axes, None)))(xs, w)).sharding.spec
    assert jax.typeof(got).sharding.spec == jnp_spec
    assert (jnp_spec[0] is None) == (in_axes == 2)  # axis 2 of x is whole
    if in_axes == 0:  # and under vmap(spmd_axis_name=...)
        spmd = jax.jit(jax.vmap(op, in_axes=(0, None), spmd_axis_name="a"))(xs, w)
        np.testing.assert_allclose(np.asarray(spmd), x * w, rtol=1e-15)
        assert jax.typeof(spmd).sharding.spec == jnp_spec


@pytest.mark.parametrize("spec", [P("a"), P("a", None), P(None, "b")], ids=str)
@pytest.mark.parametrize("use", ["sum", "grad", "grad_of_sum_twice"])
def test_a_row_result_inside_vmap_over_explicit_axes_takes_further_jnp(spec: P, use: str) -> None:
    """Inside vmap over a batch split on explicit axes, each row is whole: the op's
    result was typed on no mesh, and the next jnp call on it (a sum, the sum in a
    grad) raised JAX's "Resource axis: a of P('a', None) is not found in mesh: ()",
    naming no op."""
    op = python_op(np.sin, abstract_eval=lambda x: x, name="row_sin")
    op.def_jvp_rule(lambda p, t: (op(p[0]), jax.numpy.cos(p[0]) * t[0]))
    mesh = jax.make_mesh((4, 2), ("a", "b"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
    x = np.random.default_rng(3).normal(size=(8, 6))
    xs = jax.device_put(x, NamedSharding(mesh, spec))
    if use == "sum":
        got, want = jax.jit(jax.vmap(lambda r: op(r).sum()))(xs), np.sin(x).sum(axis=1)
    elif use == "grad":
        got, want = jax.jit(jax.vmap(jax.grad(lambda r: op(r).sum())))(xs), np.cos(x)
    else:
        got = jax.jit(jax.vmap(jax.grad(lambda r: (op(r).sum() * op(r)).sum())))(xs)
        s = np.sin(x).sum(axis=1, keepdims=True)
        want = 2 * s * np.cos(x)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-13)


@pytest.mark.parametrize(
    ("w", "batched_out", "words"),
    [
        # (T, H) beside (H,): the weight's H axis would be split like the tokens.
        (np.array([1.0, 2.0, 3.0]), True, "operand 1 has shape (3,), whose first 1 axes are not the batch axes (16,)"),
        # A scalar operand: rank below num_batch_dims (JAX's sharding rule named nothing).
        (np.float64(2.0), True, "operand 1 has shape (), of rank below 1"),
        # A reduced result: each shard would return its own partial.
        (np.array([1.0] * 16), False, "result 0 has shape (), of rank below 1"),
    ],
)
def test_a_value_without_the_batch_axes_is_refused_not_split_wrongly(partitioner: str, w, batched_out, words) -> None:
    """Without ``batched=``, num_batch_dims=k makes XLA split the first k axes of every
    operand and result like the batch axes: a weight of shape (H,) beside x of shape
    (T, H) was split along H, silently (a wrong answer). Every value the op treats as
    batched must have the same k leading axes; else a ValueError naming the op and
    the value, sharded or not, before anything runs."""
    if batched_out:
        op = python_op(lambda x, w: x * w, abstract_eval=lambda x, w: x, num_batch_dims=1, name="nobatch")
    else:
        op = python_op(
            lambda x, w: np.asarray(x.sum()),
            abstract_eval=lambda x, w: jax.ShapeDtypeStruct((), x.dtype),
            num_batch_dims=1,
            name="nobatch",
        )
    mesh = jax.make_mesh((8,), ("a",))
    x = np.arange(48.0).reshape(16, 3)
    xs = jax.device_put(x, NamedSharding(mesh, P("a", None)))
    for call, args in ((jax.jit(op), (xs, w)), (op, (x, w))):
        with pytest.raises(ValueError) as info:
            call(*args)
        assert f"nobatch: num_batch_dims=1: {words}" in str(info.value)
        assert "batched=(operand flags, result flags)" in str(info.value)


def test_a_running_program_keeps_its_op_alive() -> None:
    """Each device runs its own part of the program; the caller may stop waiting for
    the others (or never wait) and drop the op. The calls still to come on the other
    devices ran a freed key and failed with NOT_FOUND; under a collective the devices
    that had not failed waited for the others until XLA aborted the process."""
    started, release = threading.Event(), threading.Event()
    seen = []

    def slow_double(x):
        seen.append(x.shape)
        started.set()
        release.wait(30)
        return x * 2

    mesh = jax.make_mesh((8,), ("a",))
    x = np.arange(48.0).reshape(3, 16)
    xs = jax.device_put(x, NamedSharding(mesh, P(None, "a")))

    def run():
        op = python_op(slow_double, abstract_eval=lambda x: x, vectorized=True, num_batch_dims=1, name="slow_double")
        return jax.jit(lambda xs: jax.lax.map(op, xs))(xs)

    y = run()  # the op, its jitted function and their cache entries are gone after this
    assert started.wait(30)
    jax.clear_caches()
    gc.collect()
    release.set()
    np.testing.assert_array_equal(np.asarray(y), x * 2)
    assert len(seen) == 3 * 8 and set(seen) == {(2,)}, seen


def test_exiting_while_a_program_runs_on_other_devices() -> None:
    """The main thread exits while each device is still inside the Python function
    (the caller never waited): the devices' threads, taking the GIL back from its
    sleeps while the interpreter finalized, were ended by Python and the unwinding
    through XLA's frames aborted the process (every run). The exit now waits for
    the running calls (jax.pure_callback's exit is clean too)."""
    code = """
        import threading, time
        import jax, numpy as np
        from jax.sharding import NamedSharding, PartitionSpec as P
        from xla_ffi_rs import python_op

        started = threading.Event()

        def slow(x):
            started.set()
            for _ in range(300):  # many short sleeps: one of them ends while the interpreter finalizes
                time.sleep(0.001)
            return x * 2

        op = python_op(slow, abstract_eval=lambda x: x, name="slow")
        mesh = jax.make_mesh((8,), ("a",))
        xs = jax.device_put(np.arange(16.0).reshape(2, 8), NamedSharding(mesh, P(None, "a")))
        y = jax.jit(lambda xs: jax.lax.map(op, xs))(xs)
        assert started.wait(30)
        print("exiting", flush=True)
    """
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8")
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert (proc.returncode, proc.stdout) == (0, "exiting\n"), proc.stderr[-4000:]
