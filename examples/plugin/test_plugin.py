"""The example plugin from Python: registered through ctypes and through its PyO3
module, run under jit, vmap and grad, and fed bad input.

Run by `.ci/plugin.sh`, which builds the two libraries and sets
PLUGIN_CTYPES_LIB (the plain cdylib) and PLUGIN_PYO3_LIB (built with `--features python`).
"""

import ctypes
import importlib.util
import os
import shutil

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.test_util import check_grads

jax.config.update("jax_enable_x64", True)

# target -> exported C symbol (`xla_ffi_handler__` + the handler function's name).
SYMBOLS = {"plugin.scale": "xla_ffi_handler__plugin_scale", "plugin.moments": "xla_ffi_handler__plugin_moments"}
TARGETS = tuple(SYMBOLS)


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


@pytest.fixture(scope="session")
def routes(tmp_path_factory):
    """Registers every target twice: `ctypes:<target>` from the plain cdylib, and
    `pyo3:<target>` from the PyO3 module's `targets()`."""
    lib = ctypes.CDLL(os.environ["PLUGIN_CTYPES_LIB"])
    for t, symbol in SYMBOLS.items():
        jax.ffi.register_ffi_target(f"ctypes:{t}", jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu")
    assert not hasattr(lib, "plugin_moments") and not hasattr(lib, "plugin_scale")  # no raw names
    native = _load_pyo3_module(str(tmp_path_factory.mktemp("pyo3")))
    capsules = native.targets()
    assert sorted(capsules) == sorted(TARGETS)
    for t, cap in capsules.items():
        jax.ffi.register_ffi_target(f"pyo3:{t}", cap, platform="cpu")
    return ("ctypes", "pyo3")


@pytest.fixture(params=["ctypes", "pyo3"])
def route(request, routes):
    return request.param


# ---- the Python side of each op ------------------------------------------------


def scale(x, factor, *, route):
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(f"scale: x must be a float array, got {x.dtype}")
    return jax.ffi.ffi_call(f"{route}:plugin.scale", jax.ShapeDtypeStruct(x.shape, x.dtype), vmap_method="expand_dims")(
        x, factor=float(factor)
    )


def moments(x, ddof=0, clip=None, *, route):
    x = jnp.asarray(x, jnp.float64)
    if x.ndim < 1:
        raise ValueError("moments: x must have rank >= 1")
    out = jax.ShapeDtypeStruct(x.shape[:-1], jnp.float64)
    attrs: dict[str, int | float] = {"ddof": int(ddof)}
    if clip is not None:
        attrs["clip"] = float(clip)
    return jax.ffi.ffi_call(f"{route}:plugin.moments", (out, out), vmap_method="broadcast_all")(x, **attrs)


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


def test_scale_under_vmap_and_grad(route):
    x = jnp.linspace(-1.0, 1.0, 12).reshape(3, 4)
    np.testing.assert_allclose(jax.vmap(lambda r: scale(r, 3.0, route=route))(x), 3.0 * x)

    @jax.custom_vjp
    def f(x):
        return scale(x, 1.5, route=route)

    f.defvjp(lambda x: (f(x), None), lambda _, g: (scale(g, 1.5, route=route),))
    check_grads(f, (x,), order=1, modes=["rev"])
    np.testing.assert_allclose(jax.grad(lambda x: f(x).sum())(x), np.full(x.shape, 1.5))


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
    m, v = jax.vmap(lambda b: moments(b, 1, route=route))(x)
    np.testing.assert_allclose(m, x.mean(-1), rtol=1e-12)
    np.testing.assert_allclose(v, x.var(-1, ddof=1), rtol=1e-12)


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
    with pytest.raises(TypeError, match="float array"):
        scale(np.arange(3, dtype=np.int32), 2.0, route=route)
    x = np.arange(3, dtype=np.int32)
    call = jax.ffi.ffi_call(f"{route}:plugin.scale", jax.ShapeDtypeStruct(x.shape, x.dtype))
    msg = _runtime_error(lambda: call(x, factor=2.0))
    assert msg.startswith("INVALID_ARGUMENT: plugin.scale: ")
    for word in ["operand 0 (x)", "float16, bfloat16, float32 or float64", "int32"]:
        assert word in msg, msg


def test_scale_attribute_errors(route):
    x = np.ones(3, np.float32)
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    call = jax.ffi.ffi_call(f"{route}:plugin.scale", out)
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
    call = jax.ffi.ffi_call(f"{route}:plugin.scale", jax.ShapeDtypeStruct((4,), np.float32))
    msg = _runtime_error(lambda: call(x, factor=1.0))
    assert "result 0 (y): expected shape [3] (...b of operand 0 (x)), got [4]" in msg, msg


def test_moments_bad_inputs(route):
    with pytest.raises(ValueError, match="rank >= 1"):
        moments(np.float64(1.0), route=route)
    x = np.ones((2, 3))
    msg = _runtime_error(lambda: moments(x, ddof=3, route=route))
    assert "plugin.moments" in msg and "`ddof` must be in [0, 3)" in msg, msg
    msg = _runtime_error(lambda: moments(x, ddof=0, clip=-1.0, route=route))
    assert "`clip` must be > 0" in msg, msg
    out = jax.ShapeDtypeStruct((2,), np.float64)
    call = jax.ffi.ffi_call(f"{route}:plugin.moments", (out, out))
    msg = _runtime_error(lambda: call(x.astype(np.float32), ddof=0))
    assert "operand 0 (x)" in msg and "float64" in msg and "float32" in msg, msg
    msg = _runtime_error(lambda: call(x, ddof=1.0))
    assert "attribute `ddof`" in msg and "integer scalar (i64)" in msg, msg
    one = jax.ffi.ffi_call(f"{route}:plugin.moments", out)
    msg = _runtime_error(lambda: one(x, ddof=0))
    assert "expected 2 results, got 1" in msg, msg
