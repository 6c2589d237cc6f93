"""The example plugin from Python: registered through ctypes and through its PyO3
module, bound as JAX ops from its handlers' declarations (`binding.ops`), run under
jit, vmap, grad and sharding, and fed bad input.

Run by `.ci/plugin.sh`, which builds the two libraries and sets
PLUGIN_CTYPES_LIB (the plain cdylib) and PLUGIN_PYO3_LIB (built with `--features python`).
"""

import ctypes
import importlib.util
import os
import re
import shutil

# The sharding tests need 8 devices (set before jax starts its CPU backend).
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

import xla_ffi_rs
from xla_ffi_rs import binding

jax.config.update("jax_enable_x64", True)

# target -> exported C symbol (`xla_ffi_handler__` + the handler function's name).
TARGETS = (
    "plugin.scale",
    "plugin.moments",
    "plugin.axpy",
    "plugin.axpy_transpose",
    "plugin.softplus",
    "plugin.softplus_jvp",
)
SYMBOLS = {t: "xla_ffi_handler__" + t.replace(".", "_") for t in TARGETS}
#: route -> op name -> binding.Op (filled by the `routes` fixture).
OPS: dict[str, dict[str, binding.Op]] = {}
#: the PyO3 module (filled by the `routes` fixture).
NATIVE: list = []


def _load_pyo3_module(tmp_dir):
    """Imports the PyO3 build as `plugin_native` (a cdylib is `lib<name>.so`)."""
    src = os.environ["PLUGIN_PYO3_LIB"]
    dst = os.path.join(tmp_dir, "plugin_native.abi3.so")
    shutil.copy(src, dst)
    spec = importlib.util.spec_from_file_location("plugin_native", dst)
    assert spec is not None and spec.loader is not None, f"cannot import {dst}"
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def raw(route, target):
    """The name `target` is registered under for `route`."""
    return target if route == "pyo3" else f"ctypes:{target}"


@pytest.fixture(scope="session")
def routes(tmp_path_factory):
    """Registers every target twice: as itself from the PyO3 module's `targets()`
    (`xla_ffi_rs.register_targets`), and as `ctypes:<target>` from the plain cdylib;
    binds both from the PyO3 module's `declarations()`."""
    lib = ctypes.CDLL(os.environ["PLUGIN_CTYPES_LIB"])
    for t, symbol in SYMBOLS.items():
        jax.ffi.register_ffi_target(raw("ctypes", t), jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
    assert not hasattr(lib, "plugin_moments") and not hasattr(lib, "plugin_scale")  # no raw names
    native = _load_pyo3_module(str(tmp_path_factory.mktemp("pyo3")))
    assert sorted(native.targets()) == sorted(TARGETS) == sorted(native.declarations())
    xla_ffi_rs.register_targets(native.targets())
    NATIVE.append(native)
    OPS["pyo3"] = binding.ops(native.declarations())  # targets: where register_targets put them
    OPS["ctypes"] = binding.ops(native.declarations(), targets=lambda t: {"cpu": raw("ctypes", t)})
    return ("ctypes", "pyo3")


def test_targets_take_the_platform_as_docs_gpu_md_calls_them(routes):
    """docs/gpu.md registers a plugin's CUDA twins with
    `xla_ffi_rs.register_targets(plugin_native.targets("cuda"), "cuda")`: the
    template's `targets` takes the platform (the CPU handlers by default), and
    gives no CPU handler for "cuda" (the template has no CUDA twin)."""
    (native,) = NATIVE
    assert sorted(native.targets("cpu")) == sorted(native.targets()) == sorted(TARGETS)
    assert native.targets("cuda") == {}
    xla_ffi_rs.register_targets(native.targets("cuda"), "cuda")  # nothing to register, no error
    with pytest.raises(TypeError, match="platform"):
        native.targets(1)


@pytest.fixture(params=["ctypes", "pyo3"])
def route(request, routes):
    return request.param


# ---- the Python side of each op: nothing but the call ---------------------------


def scale(x, factor, *, route):
    return OPS[route]["scale"](x, factor=factor)[0]


def moments(x, ddof=0, clip=None, *, route):
    return OPS[route]["moments"](x, ddof=ddof, clip=clip)


def axpy(alpha, x, y, *, route):
    return OPS[route]["axpy"](x, y, alpha=alpha)[0]


def make_differentiable_moments(route, ddof):
    """moments with a custom VJP: d mean/dx = 1/n, d var/dx = 2 (x - mean) / (n - ddof)."""

    @jax.custom_vjp
    def f(x):
        return moments(x, ddof, route=route)

    def fwd(x):
        m, v = moments(x, ddof, route=route)
        return (m, v), (x, m)

    def bwd(res, g):
        x, m = res
        gm, gv = g
        n = x.shape[-1]
        dx = gm[..., None] / n + gv[..., None] * 2.0 * (x - m[..., None]) / (n - ddof)
        return (dx,)

    f.defvjp(fwd, bwd)
    return f


# ---- plugin.scale ----------------------------------------------------------------

FLOATS = [np.float16, ml_dtypes.bfloat16, np.float32, np.float64]
SHAPES = [(), (0,), (7,), (3, 5), (1 << 17,)]  # the last one runs on XLA's thread pool


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_scale_matches_numpy_for_every_float_type(route, dtype, shape):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)
    got = np.asarray(jax.jit(lambda x: scale(x, -2.5, route=route))(x))
    assert got.dtype == np.dtype(dtype) and got.shape == shape
    want = (x.astype(np.float64) * -2.5).astype(dtype)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("past_tie", [2.0**-40, -(2.0**-40), 2.0**-30, 0.0])
def test_scale_rounds_once_for_16_bit_floats(route, dtype, past_tie):
    """Factors a hair past (or on) a tie of the 16-bit format, times powers of two:
    the product rounded once to nearest even from float64, checked against its
    neighbours compared exactly (not a conversion through a rounded float32, which
    lands on the tie and goes to even)."""
    half_ulp = 2.0 ** -(ml_dtypes.finfo(dtype).nmant + 1)
    factor = 1.0 + half_ulp + past_tie
    x = (2.0 ** np.arange(-6, 7)).repeat(2) * np.tile([1.0, -1.0], 13)
    got = np.asarray(jax.jit(lambda x: scale(x, factor, route=route))(x.astype(dtype)))
    exact = x * factor
    # The neighbours of `factor` in the format are 1 and 1 + 2 * half_ulp; on the
    # tie itself, 1 (the even one).
    want = 1.0 + 2 * half_ulp if past_tie > 0 else 1.0
    np.testing.assert_array_equal(
        got.astype(np.float64), x * want, err_msg=f"factor 1 + 2^-{ml_dtypes.finfo(dtype).nmant + 1} + {past_tie}"
    )
    assert np.all(np.abs(got.astype(np.float64) - exact) <= half_ulp * np.abs(x))


def test_scale_under_vmap_and_grad(route):
    """vmap is one call; grad and jvp follow from `linear = "x"` and the op being its
    own transpose, to any order."""
    x = jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)
    fn = jax.vmap(lambda r: scale(r, 3.0, route=route), in_axes=1)
    np.testing.assert_allclose(fn(x), 3.0 * x.T)
    assert str(jax.make_jaxpr(fn)(x)).count("scale[") == 1
    check_grads(lambda x: scale(x, 1.5, route=route), (x,), order=2, modes=["fwd", "rev"])
    np.testing.assert_allclose(jax.grad(lambda x: scale(x, 1.5, route=route).sum())(x), np.full(x.shape, 1.5))


# ---- plugin.moments: two results, an integer and an optional attribute -----------


@pytest.mark.parametrize("ddof", [0, 1, 3])
@pytest.mark.parametrize("clip", [None, 0.5])
@pytest.mark.parametrize("shape", [(5,), (4, 6), (2, 3, 7)], ids=str)
def test_moments_match_numpy(route, shape, ddof, clip):
    x = np.random.default_rng(1).standard_normal(shape)
    m, v = jax.jit(lambda x: moments(x, ddof, clip, route=route))(x)
    ref = x if clip is None else np.clip(x, -clip, clip)
    np.testing.assert_allclose(m, ref.mean(-1), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(v, ref.var(-1, ddof=ddof), rtol=1e-12)


def test_moments_under_vmap(route):
    x = np.random.default_rng(2).standard_normal((3, 4, 5))
    for axis in (0, 1):  # the batch axes enter `...b`: one call
        fn = jax.vmap(lambda b: moments(b, 1, route=route), in_axes=axis)
        m, v = fn(x)
        xs = np.moveaxis(x, axis, 0)
        np.testing.assert_allclose(m, xs.mean(-1), rtol=1e-12)
        np.testing.assert_allclose(v, xs.var(-1, ddof=1), rtol=1e-12)
        assert str(jax.make_jaxpr(fn)(x)).count("moments[") == 1
    # over the row axis `n`, which is no batch axis: correct, one call per row
    m, _ = jax.vmap(lambda b: moments(b, 0, route=route), in_axes=2)(x)
    np.testing.assert_allclose(m, np.moveaxis(x, 2, 0).mean(-1), rtol=1e-12)


@pytest.mark.parametrize("ddof", [0, 1])
def test_moments_gradient_matches_finite_differences(route, ddof):
    f = make_differentiable_moments(route, ddof)
    x = jnp.asarray(np.random.default_rng(3).standard_normal((3, 5)))
    check_grads(f, (x,), order=1, modes=["rev"], eps=1e-4)
    # Independent reference: the same quantities written in jnp.
    ref = lambda x: x.mean(-1).sum() + x.var(-1, ddof=ddof).sum()  # noqa: E731
    got = jax.grad(lambda x: sum(o.sum() for o in f(x)))(x)
    np.testing.assert_allclose(got, jax.grad(ref)(x), rtol=1e-10)


# ---- bad input: exact error types, and messages that name target and operand --------


def _runtime_error(fn):
    with pytest.raises(jax.errors.JaxRuntimeError) as e:
        jax.block_until_ready(fn())
    return str(e.value)


def test_scale_refuses_integers_before_and_after_lowering(route):
    with pytest.raises(TypeError) as info:
        scale(np.arange(3, dtype=np.int32), 2.0, route=route)
    for word in ["plugin.scale: operand 0 (x)", "float16, bfloat16, float32 or float64", "int32"]:
        assert word in str(info.value), str(info.value)
    x = np.arange(3, dtype=np.int32)
    call = jax.ffi.ffi_call(raw(route, "plugin.scale"), jax.ShapeDtypeStruct(x.shape, x.dtype))
    msg = _runtime_error(lambda: call(x, factor=2.0))
    assert msg.startswith("INVALID_ARGUMENT: plugin.scale: ")
    for word in ["operand 0 (x)", "float16, bfloat16, float32 or float64", "int32"]:
        assert word in msg, msg


def test_attributes_are_checked_before_lowering(route):
    x = np.ones(3, np.float32)
    with pytest.raises(TypeError, match=r"plugin\.scale: attribute 'factor' \(f64\) is missing"):
        OPS[route]["scale"](x)
    with pytest.raises(TypeError, match=r"unknown attribute 'factr' \(did you mean 'factor'\?\)"):
        OPS[route]["scale"](x, factor=2.0, factr=2.0)
    with pytest.raises(TypeError, match=r"plugin\.scale: attribute 'factor': expected a float \(f64\), got str"):
        scale(x, "2", route=route)
    with pytest.raises(TypeError, match=r"plugin\.moments: attribute 'ddof': expected an integer \(i64\), got float"):
        moments(np.ones((2, 3)), ddof=1.0, route=route)
    with pytest.raises(TypeError, match=r"plugin\.moments: attribute 'clip': expected a float \(f64\), got str"):
        moments(np.ones((2, 3)), clip="1", route=route)


def test_scale_attribute_errors(route):
    x = np.ones(3, np.float32)
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    call = jax.ffi.ffi_call(raw(route, "plugin.scale"), out)
    msg = _runtime_error(lambda: call(x))
    assert "plugin.scale" in msg and "factor" in msg and "missing" in msg, msg
    msg = _runtime_error(lambda: call(x, factor=2.0, factr=2.0))
    assert "unknown attribute `factr`; this handler takes: factor (did you mean `factor`?)" in msg, msg
    np.testing.assert_array_equal(call(x, factor=2), 2 * x)  # an int converts exactly
    msg = _runtime_error(lambda: call(x, factor="2"))
    assert "attribute `factor`" in msg and "string" in msg, msg
    msg = _runtime_error(lambda: call(x, factor=float("inf")))
    assert "must be finite" in msg, msg


def test_scale_result_must_match(route):
    x = np.ones(3, np.float32)
    call = jax.ffi.ffi_call(raw(route, "plugin.scale"), jax.ShapeDtypeStruct((4,), np.float32))
    msg = _runtime_error(lambda: call(x, factor=1.0))
    assert "result 0 (y): expected shape [3] (...b of operand 0 (x)), got [4]" in msg, msg


def test_moments_bad_inputs(route):
    with pytest.raises(ValueError) as info:
        moments(np.float64(1.0), route=route)
    assert str(info.value).startswith("plugin.moments: operand 0 (x): expected"), str(info.value)
    with pytest.raises(TypeError) as type_info:
        moments(np.ones((2, 3), np.float32), route=route)
    for word in ["plugin.moments: operand 0 (x)", "float64", "float32"]:
        assert word in str(type_info.value), str(type_info.value)
    x = np.ones((2, 3))
    msg = _runtime_error(lambda: moments(x, ddof=3, route=route))
    assert "plugin.moments" in msg and "`ddof` must be in [0, 3)" in msg, msg
    msg = _runtime_error(lambda: moments(x, ddof=0, clip=-1.0, route=route))
    assert "`clip` must be > 0" in msg, msg
    out = jax.ShapeDtypeStruct((2,), np.float64)
    call = jax.ffi.ffi_call(raw(route, "plugin.moments"), (out, out))
    msg = _runtime_error(lambda: call(x.astype(np.float32), ddof=0))
    assert "operand 0 (x)" in msg and "float64" in msg and "float32" in msg, msg
    msg = _runtime_error(lambda: call(x, ddof=1.0))
    assert "attribute `ddof`" in msg and "integer scalar (i64)" in msg, msg
    one = jax.ffi.ffi_call(raw(route, "plugin.moments"), out)
    msg = _runtime_error(lambda: one(x, ddof=0))
    assert "expected 2 results, got 1" in msg, msg


# ---- plugin.axpy: the op added from its declaration alone ------------------------


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (7,), (3, 5), (2, 3, 4)], ids=str)
def test_axpy_matches_numpy(route, dtype, shape):
    rng = np.random.default_rng(4)
    x, y = (rng.standard_normal(shape).astype(dtype) for _ in range(2))
    got = jax.jit(lambda x, y: axpy(-1.5, x, y, route=route))(x, y)
    assert got.dtype == np.dtype(dtype) and got.shape == shape
    want = (-1.5 * x.astype(np.float64) + y.astype(np.float64)).astype(dtype)
    np.testing.assert_array_equal(got, want)


def test_axpy_under_vmap_is_one_call(route):
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal((4, 3)), rng.standard_normal((3, 4))
    fn = jax.vmap(lambda x, y: axpy(2.0, x, y, route=route), in_axes=(1, 0))  # several operands, other axes
    np.testing.assert_allclose(fn(x, y), 2.0 * x.T + y, rtol=1e-15)
    assert str(jax.make_jaxpr(fn)(x, y)).count("axpy[") == 1
    one = jax.vmap(lambda x: axpy(2.0, x, y[0], route=route))  # y broadcast into the batch
    np.testing.assert_allclose(one(x.T), 2.0 * x.T + y[0], rtol=1e-15)


def test_axpy_gradients_from_its_declaration(route):
    """jvp and grad from `linear = "x, y"` and `transpose = "plugin.axpy_transpose"`:
    reverse mode runs the transpose target."""
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((2, 5)), rng.standard_normal((2, 5))
    f = lambda x, y: axpy(0.5, x, y, route=route)  # noqa: E731
    check_grads(f, (x, y), order=2, modes=["fwd", "rev"])
    loss = lambda x, y: (f(x, y) ** 2).sum()  # noqa: E731
    gx, gy = jax.grad(loss, argnums=(0, 1))(x, y)
    np.testing.assert_allclose(gx, 0.5 * 2 * (0.5 * x + y), rtol=1e-14)
    np.testing.assert_allclose(gy, 2 * (0.5 * x + y), rtol=1e-14)
    text = jax.jit(jax.grad(loss, argnums=(0, 1))).lower(x, y).as_text()
    assert re.search(rf'custom_call @"?{re.escape(raw(route, "plugin.axpy_transpose"))}"?\(', text), text


@pytest.mark.parametrize("partitioner", ["shardy", "gspmd"])
def test_axpy_runs_on_local_blocks_when_sharded(route, partitioner):
    """Sharding from the declaration: every value carries the batch ellipsis, so each
    device runs the call on its block, forward and backward, with no collective."""
    old = jax.config.jax_use_shardy_partitioner
    jax.config.update("jax_use_shardy_partitioner", partitioner == "shardy")
    try:
        mesh = jax.make_mesh((4, 2), ("a", "b"), axis_types=(jax.sharding.AxisType.Explicit,) * 2)
        sh = NamedSharding(mesh, P("a", "b"))
        rng = np.random.default_rng(7)
        x, y = rng.standard_normal((8, 6)), rng.standard_normal((8, 6))
        args = [jax.device_put(a, sh) for a in (x, y)]

        def f(x, y):
            out = axpy(3.0, x, y, route=route)
            return out, jax.grad(lambda x: (axpy(3.0, x, y, route=route) * x).sum())(x)

        fn = jax.jit(f)
        out, g = fn(*args)
        np.testing.assert_allclose(out, 3 * x + y, rtol=1e-15)
        np.testing.assert_allclose(g, 6 * x + y, rtol=1e-14)
        hlo = str(fn.lower(*args).compile().as_text())
        for collective in ("all-gather", "all-to-all", "collective-permute", "all-reduce"):
            assert f"{collective}(" not in hlo and f"{collective}-start(" not in hlo, hlo
        for target in ("plugin.axpy", "plugin.axpy_transpose"):
            calls = [line for line in hlo.splitlines() if f'custom_call_target="{raw(route, target)}"' in line]
            assert calls and all("f64[2,3" in line.split("=", 1)[1][:30] for line in calls), calls  # 8x6 / 4x2
    finally:
        jax.config.update("jax_use_shardy_partitioner", old)
