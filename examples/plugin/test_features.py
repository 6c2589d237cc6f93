"""The newer `ffi.h` features on the real XLA runtime, through the example plugin's
`features.*` targets (src/features.rs): complex elements (with aliasing), an
optional operand, an enum attribute, tokens ordering side effects, and a runtime
error's code and message.

Run by `.ci/plugin.sh` on both jax versions (PLUGIN_PYO3_LIB: the plugin built
with `--features python`).
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import io_callback

import xla_ffi_rs
from xla_ffi_rs import binding
from xla_ffi_rs.sharding import gspmd_available

jax.config.update("jax_enable_x64", True)
JAX = tuple(int(p) for p in jax.__version__.split(".")[:2])

#: None where an operand goes (an optional one left out); typed Any for mypy,
#: as binding.Op's operands are typed as arrays.
NONE: Any = None

FEATURES = ("features.conj_scale", "features.add_bias", "features.reduce", "features.log_append", "features.user_data")


@pytest.fixture(scope="module")
def native(tmp_path_factory):
    """The plugin's PyO3 module, its feature targets registered."""
    src = os.environ["PLUGIN_PYO3_LIB"]
    dst = os.path.join(str(tmp_path_factory.mktemp("features")), "plugin_native.abi3.so")
    shutil.copy(src, dst)
    spec = importlib.util.spec_from_file_location("plugin_native", dst)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert sorted(mod.feature_targets()) == sorted(FEATURES) == sorted(mod.feature_declarations())
    for name, registration in mod.feature_types().items():
        jax.ffi.register_ffi_type(name, registration, platform="cpu")
    xla_ffi_rs.register_targets(mod.feature_targets())
    return mod


@pytest.fixture(scope="module")
def decls(native):
    return native.feature_declarations()


def _call_line(f, x, target):
    """The custom call of `target` in the lowered text of `jax.jit(f)(x)`."""
    return next(line.strip() for line in jax.jit(f).lower(x).as_text().splitlines() if f"@{target}(" in line)


# ---- complex elements --------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=lambda d: np.dtype(d).name)
def test_conj_scale_matches_numpy_and_aliases(decls, dtype):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 5)) + 1j * rng.standard_normal((3, 5))).astype(dtype)
    want = (np.conj(x.astype(np.complex128)) * -1.5).astype(dtype)
    op = binding.op(decls["features.conj_scale"])
    got = np.asarray(jax.jit(lambda x: op(x, k=-1.5)[0])(x))
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, want)
    # In place: the result written into the operand's (donated) buffer.
    inplace = binding.op(decls["features.conj_scale"], name="conj_scale_inplace", input_output_aliases={0: 0})
    f = jax.jit(lambda x: inplace(x, k=-1.5)[0], donate_argnums=0)
    assert "output_operand_alias" in f.lower(jnp.asarray(x)).as_text()
    np.testing.assert_array_equal(np.asarray(f(jnp.asarray(x))), want)
    # vmap: one call over the batch ellipsis.
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda r: op(r, k=-1.5)[0])(x)), want)


def test_conj_scale_refuses_a_float_before_lowering(decls):
    op = binding.op(decls["features.conj_scale"])
    with pytest.raises(
        TypeError, match=r"features.conj_scale: operand 0 \(x\): expected dtype complex64 or complex128, got float32"
    ):
        jax.jit(lambda x: op(x, k=1.0))(np.ones(3, np.float32))


# ---- optional operand --------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=lambda d: np.dtype(d).name)
def test_add_bias_with_and_without_the_optional_bias(decls, dtype):
    op = binding.op(decls["features.add_bias"])
    x = np.arange(12, dtype=dtype).reshape(3, 4)
    bias = np.array([10, 20, 30, 40], dtype=dtype)
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda x, b: op(x, b)[0])(x, bias)), x + bias)
    # Left out, or passed as None: the custom call has one operand.
    for f in (lambda x: op(x)[0], lambda x: op(x, NONE)[0]):
        np.testing.assert_array_equal(np.asarray(jax.jit(f)(x)), x)
        assert re.search(r": \(tensor<3x4x(f32|f64)>\) -> tensor<3x4x\1>$", _call_line(f, x, "features.add_bias"))
    assert re.search(
        r": \(tensor<3x4x(f..)>, tensor<4x\1>\) -> ", _call_line(lambda x: op(x, bias), x, "features.add_bias")
    )
    # vmap with and without the bias (the bias shared by every row).
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda r: op(r, bias)[0])(x)), x + bias)
    np.testing.assert_array_equal(np.asarray(jax.vmap(lambda r: op(r)[0])(x)), x)


def test_add_bias_checks_a_present_bias_before_lowering(decls):
    op = binding.op(decls["features.add_bias"])
    x = np.ones((2, 4), np.float32)
    with pytest.raises(ValueError, match=r"features.add_bias: operand 1 \(bias\): expected shape \[4\]"):
        jax.jit(lambda x, b: op(x, b))(x, np.ones(3, np.float32))
    with pytest.raises(TypeError, match=r"operand 1 \(bias\): expected dtype float32 .*got float64"):
        jax.jit(lambda x, b: op(x, b))(x, np.ones(4, np.float64))
    with pytest.raises(TypeError, match=r"features.add_bias: operand 0 \(x\) is None, but it is not optional"):
        op(NONE)


# ---- enum attribute ----------------------------------------------------------------


def test_reduce_by_enum_integer_or_name(decls):
    op = binding.op(decls["features.reduce"])
    x = np.array([[1.0, 5.0, 3.0], [-2.0, 0.5, 4.0]])
    want = {"Sum": x.sum(-1), "Max": x.max(-1), "Mean": x.mean(-1)}
    for name, value in (("Sum", 0), ("Max", 1), ("Mean", 7)):
        np.testing.assert_allclose(np.asarray(jax.jit(lambda x, v=value: op(x, mode=v)[0])(x)), want[name])
        np.testing.assert_allclose(np.asarray(jax.jit(lambda x, n=name: op(x, mode=n)[0])(x)), want[name])


def test_reduce_refuses_a_bad_mode_before_lowering(decls):
    op = binding.op(decls["features.reduce"])
    x = np.ones((2, 3))
    valid = "one of Sum = 0, Max = 1, Mean = 7"
    with pytest.raises(ValueError, match=rf"features.reduce: attribute 'mode': expected enum Mode, {valid} .*got 3"):
        op(x, mode=3)
    with pytest.raises(ValueError, match=rf"attribute 'mode': expected enum Mode, {valid} .*got 'max'"):
        op(x, mode="max")
    for bad in (1.0, True, [1]):
        with pytest.raises(TypeError, match=r"features.reduce: attribute 'mode': expected enum Mode"):
            op(x, mode=bad)
    with pytest.raises(TypeError, match=r"features.reduce: attribute 'mode' \(i64\) is missing"):
        op(x)


# ---- runtime error details ---------------------------------------------------------


def test_a_runtime_error_carries_the_runtimes_message(native):
    call = jax.ffi.ffi_call("features.user_data", (), has_side_effect=True)
    with pytest.raises(jax.errors.JaxRuntimeError) as e:
        jax.block_until_ready(jax.jit(lambda: call())())
    # XLA's own message, with its code where the runtime gives one (API 0.4+,
    # jaxlib 0.12); API 0.3's errors carry none and read as INTERNAL.
    code = "NOT_FOUND" if JAX >= (0, 12) else "INTERNAL"
    assert re.search(
        rf"{code}: features.user_data: User data with type id \d+ not found in execution context", str(e.value)
    )


# ---- tokens ------------------------------------------------------------------------


def test_tokens_order_side_effects_in_program_order(native, decls):
    """`features.log_append` takes a Token and returns a ResultToken: binding.op
    threads JAX's ordered-effect token (io_callback's) through it, so the calls and
    an ordered callback between them run in program order, whatever their data
    dependences say."""
    op = binding.op(decls["features.log_append"])
    native.feature_log_take()
    seen = []

    def program(x):
        a = op(x * 3.0)[0]  # program order 3, 1, 2: no data dependence among them
        b = op(x)[0]
        io_callback(lambda: seen.append(native.feature_log_take()), None, ordered=True)
        c = op(x * 2.0)[0]
        return a + b + c

    f = jax.jit(program)
    line = _call_line(program, np.float32(1.0), "features.log_append")
    assert re.search(r": \(!stablehlo.token, tensor<f32>\) -> \(!stablehlo.token, tensor<f32>\)$", line), line
    for x in (1.0, 5.0):
        assert float(f(np.float32(x))) == 6.0 * x
        jax.effects_barrier()
        assert seen.pop() == [3.0 * x, x]
        assert native.feature_log_take() == [2.0 * x]
    # Under vmap (no batch ellipsis: one call per example, in order).
    out = jax.jit(jax.vmap(lambda x: op(x)[0]))(np.array([4.0, 5.0, 6.0], np.float32))
    np.testing.assert_array_equal(np.asarray(out), [4.0, 5.0, 6.0])
    jax.effects_barrier()
    assert native.feature_log_take() == [4.0, 5.0, 6.0]


#: Run in a process of its own, with 8 CPU devices (XLA_FLAGS must be set before jax
#: starts): a token op under jit on inputs sharded over a mesh, under either partitioner.
_SHARDED_TOKENS = """
import importlib.util, os, shutil, sys, tempfile
import jax, numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
import xla_ffi_rs
from xla_ffi_rs import binding
jax.config.update("jax_use_shardy_partitioner", sys.argv[1] == "shardy")
dst = os.path.join(tempfile.mkdtemp(), "plugin_native.abi3.so")
shutil.copy(os.environ["PLUGIN_PYO3_LIB"], dst)
spec = importlib.util.spec_from_file_location("plugin_native", dst)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
for name, registration in mod.feature_types().items():
    jax.ffi.register_ffi_type(name, registration, platform="cpu")
xla_ffi_rs.register_targets(mod.feature_targets())
op = binding.op(mod.feature_declarations()["features.log_append"])
mesh = Mesh(np.array(jax.devices()), ("b",))
x = jax.device_put(np.arange(8, dtype=np.float32), NamedSharding(mesh, P("b")))
mod.feature_log_take()
for f in (jax.jit(lambda x: op(x.sum())[0]), jax.jit(jax.vmap(lambda x: op(x)[0]))):
    try:
        out = f(x)
        jax.effects_barrier()
        print("ok", np.asarray(out).tolist(), mod.feature_log_take())
    except ValueError as e:
        print("ValueError", e)
"""


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_a_token_op_on_sharded_inputs_runs_once_or_is_refused_by_name(partitioner):
    """XLA's partitioner requires a sharding of a side effect (without one: `INTERNAL:
    RET_CHECK` and a C++ stack dump). Under GSPMD the call runs once, on one device,
    on the whole value, as an ordered io_callback; Shardy drops that sharding on the
    call, so there it is refused while lowering, naming the target and what to do.
    From jax 0.12.1 on the flag has no effect: Shardy, and the refusal, always."""
    env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=8"}
    run = subprocess.run(
        [sys.executable, "-c", _SHARDED_TOKENS, partitioner],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert "RET_CHECK" not in run.stderr, run.stderr
    gspmd = gspmd_available()
    if partitioner == "gspmd" and gspmd:
        assert lines == ["ok 28.0 [28.0]", f"ok {list(map(float, range(8)))} {list(map(float, range(8)))}"], lines
        return
    assert len(lines) == 2, lines
    for line in lines:
        for words in (
            "ValueError features.log_append: an op with an ordered effect",
            "not supported in a program partitioned over several devices (8) under the Shardy partitioner",
            "call it outside the sharded jit",
            "shard_map over every mesh axis",
        ):
            assert words in line, (words, line)
        # The flag is offered only where it still switches to GSPMD.
        assert ("jax_use_shardy_partitioner off" in line) == gspmd, line


def test_a_token_op_refuses_bad_input_before_lowering(decls):
    op = binding.op(decls["features.log_append"])
    # The token is not the caller's.
    assert op.declaration is not None and [o["name"] for o in op.declaration.operands] == ["x"]
    with pytest.raises(TypeError, match=r"features.log_append: operand 1 \(x\): expected dtype float32, got float64"):
        op(np.float64(1.0))
    with pytest.raises(ValueError, match=r"features.log_append: operand 1 \(x\): expected shape \[\]"):
        op(np.ones(2, np.float32))
