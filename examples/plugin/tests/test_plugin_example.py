"""The installed package `plugin_example` from a user's side: its functions under
jit, vmap, grad (to second order) and sharding, against NumPy float64 and plain jnp,
and fed bad input. Run after `pip install .` (`python -m pytest tests`)."""

from __future__ import annotations

import os
from typing import Any

# The sharding test needs 4 devices (set before jax starts its CPU backend).
os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4"

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import plugin_example
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
from jax.test_util import check_grads

jax.config.update("jax_enable_x64", True)

X = np.array([-800.0, -30.0, -2.5, -0.1, 0.0, 0.3, 1.0, 7.0, 30.0, 800.0])


def softplus_ref(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, np.asarray(x, np.float64))


def test_import_registers_each_platforms_targets_before_the_ops_are_built() -> None:
    """Every handler of `targets("cpu")` and `targets("cuda")` is registered for its
    platform, and each op lowers to its target there (a CUDA twin added to HANDLERS
    is then lowered for the GPU with no change to __init__.py)."""
    from plugin_example import OPS, plugin_native

    import xla_ffi_rs

    for platform in ("cpu", "cuda"):
        for target in plugin_native.targets(platform):
            assert platform in xla_ffi_rs.target_names(target), (target, platform)
            op = OPS[target.rsplit(".", 1)[-1]]
            assert op.targets.get(platform) == target, (target, platform, op.targets)
    assert plugin_native.targets("cpu"), "the template's CPU handlers"


@pytest.mark.parametrize(
    ("dtype", "rtol"),
    [(np.float64, 1e-15), (np.float32, 1e-7), (np.float16, 1e-3), (ml_dtypes.bfloat16, 8e-3)],
)
def test_softplus_matches_numpy_in_every_float_dtype(dtype: type, rtol: float) -> None:
    x: np.ndarray = X.astype(dtype)
    y = jax.jit(plugin_example.softplus)(x)
    assert y.dtype == np.dtype(dtype) and y.shape == x.shape
    # Computed in float64 and rounded once: the float64 value rounded to the dtype
    # (float16 underflows to 0 at x = -30 as the rounded reference does).
    want = softplus_ref(x.astype(np.float64)).astype(dtype).astype(np.float64)
    np.testing.assert_allclose(np.asarray(y, np.float64), want, rtol=rtol, atol=0)


def test_softplus_of_integers_is_float() -> None:
    y = plugin_example.softplus(np.array([0, 1, 2], np.int32))
    assert jnp.issubdtype(y.dtype, jnp.floating)
    np.testing.assert_allclose(np.asarray(y, np.float64), softplus_ref(np.array([0.0, 1.0, 2.0])), rtol=1e-6)


def test_grad_and_grad_of_grad_match_jnp() -> None:
    x = jnp.asarray(X[1:-1])
    g = jax.vmap(jax.grad(plugin_example.softplus))(x)
    gg = jax.vmap(jax.grad(jax.grad(plugin_example.softplus)))(x)
    np.testing.assert_allclose(g, jax.vmap(jax.grad(jax.nn.softplus))(x), rtol=1e-14, atol=1e-300)
    # softplus'' = sigmoid(x) sigmoid(-x) = e / (1 + e)^2 with e = exp(-|x|), in NumPy float64.
    e = np.exp(-np.abs(np.asarray(x)))
    np.testing.assert_allclose(gg, e / (1 + e) ** 2, rtol=1e-13, atol=0)
    # jnp's own second derivative loses digits to cancellation at x = 30 (1 - s), ours not.
    np.testing.assert_allclose(gg, jax.vmap(jax.grad(jax.grad(jax.nn.softplus)))(x), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("x", [np.linspace(-4.0, 4.0, 9), np.array([[0.5, -1.5], [3.0, 0.0]])])
def test_check_grads_to_second_order(x: np.ndarray) -> None:
    check_grads(plugin_example.softplus, (x,), order=2, modes=("fwd", "rev"))


def test_grad_runs_the_tangent_target_not_jnp() -> None:
    f = jax.value_and_grad(lambda x: plugin_example.softplus(x).sum())
    hlo = jax.jit(f).lower(jnp.ones(3)).as_text()
    assert hlo.count("@plugin.softplus(") == 1, hlo
    assert hlo.count("@plugin.softplus_jvp(") == 1, hlo
    assert "logistic" not in hlo and "exponential" not in hlo


def test_vmap_is_one_call() -> None:
    x = jnp.asarray(np.linspace(-3, 3, 12).reshape(4, 3))
    f = jax.jit(jax.vmap(plugin_example.softplus))
    assert f.lower(x).as_text().count("plugin.softplus") == 1
    np.testing.assert_allclose(f(x), softplus_ref(np.asarray(x)), rtol=1e-15)


def test_softplus_sharded_stays_local() -> None:
    mesh = jax.make_mesh((4,), ("d",))
    x = jax.device_put(jnp.asarray(np.linspace(-2, 2, 16).reshape(4, 4)), NamedSharding(mesh, P("d")))
    f = jax.jit(plugin_example.softplus)
    y = f(x)
    assert y.sharding.is_equivalent_to(x.sharding, 2)
    np.testing.assert_allclose(y, softplus_ref(np.asarray(x)), rtol=1e-15)
    hlo = f.lower(x).compile().as_text() or ""
    assert "all-gather" not in hlo and "all-reduce" not in hlo


def test_axpy_grad_with_a_replicated_operand_on_explicit_axes() -> None:
    # x split over the batch, y replicated: each gradient comes back typed like its
    # operand (a cotangent typed like x for y was refused by JAX before).
    mesh = jax.make_mesh((4,), ("d",), axis_types=(jax.sharding.AxisType.Explicit,))
    xv, yv = np.linspace(-2, 2, 16).reshape(4, 4), np.arange(16.0).reshape(4, 4)
    x = jax.device_put(jnp.asarray(xv), NamedSharding(mesh, P("d")))
    y = jax.device_put(jnp.asarray(yv), NamedSharding(mesh, P()))
    out = jax.jit(lambda x, y: plugin_example.axpy(-1.5, x, y))(x, y)
    np.testing.assert_array_equal(out, -1.5 * xv + yv)
    dx, dy = jax.jit(jax.grad(lambda x, y: (plugin_example.axpy(-1.5, x, y) ** 2).sum(), (0, 1)))(x, y)
    np.testing.assert_allclose(dx, -3.0 * (-1.5 * xv + yv), rtol=1e-15)
    np.testing.assert_allclose(dy, 2.0 * (-1.5 * xv + yv), rtol=1e-15)
    assert jax.typeof(dx).sharding.spec == jax.typeof(x).sharding.spec
    assert jax.typeof(dy).sharding.spec == jax.typeof(y).sharding.spec


def test_scale_axpy_and_moments() -> None:
    x = np.array([[1.0, -2.0, 3.5], [0.0, 4.0, -8.0]])
    np.testing.assert_array_equal(plugin_example.scale(x, 2.0), 2.0 * x)
    np.testing.assert_array_equal(plugin_example.axpy(-0.5, x, np.ones_like(x)), -0.5 * x + 1.0)
    mean, var = plugin_example.moments(x, ddof=1)
    np.testing.assert_allclose(mean, x.mean(axis=-1), rtol=1e-15)
    np.testing.assert_allclose(var, x.var(axis=-1, ddof=1), rtol=1e-15)
    dx, dy = jax.grad(lambda x, y: plugin_example.axpy(3.0, x, y).sum(), argnums=(0, 1))(x, x)
    np.testing.assert_array_equal(dx, np.full_like(x, 3.0))
    np.testing.assert_array_equal(dy, np.ones_like(x))


def test_bad_input_raises_before_lowering() -> None:
    with pytest.raises(TypeError, match=r"plugin\.softplus.*operand 0 \(x\).*dtype.*complex"):
        plugin_example.softplus(jnp.ones(3, jnp.complex64))
    with pytest.raises(ValueError, match=r"plugin\.axpy: operand 1 \(y\): expected shape \[3\].*got \[4\]"):
        plugin_example.axpy(1.0, jnp.ones(3), jnp.ones(4))
    with pytest.raises(TypeError, match=r"plugin\.axpy: operand 1 \(y\): expected dtype float64.*got float32"):
        plugin_example.axpy(1.0, jnp.ones(3, jnp.float64), jnp.ones(3, jnp.float32))
    with pytest.raises(ValueError, match=r"scale: factor must be finite, got inf"):
        plugin_example.scale(jnp.ones(3), float("inf"))
    with pytest.raises(ValueError, match=r"scale: factor: int value too large for float64"):
        plugin_example.scale(jnp.ones(3), 10**400)
    with pytest.raises(TypeError, match=r"plugin\.moments: operand 0 \(x\).*float64.*got float32"):
        plugin_example.moments(jnp.ones((2, 3), jnp.float32))


@pytest.mark.parametrize(
    ("value", "got"),
    [(None, "NoneType"), ("1.0", "str"), (np.array([1.0, None]), "an array of object"), ([1.0, "a"], "list")],
)
@pytest.mark.parametrize("fn", ["softplus", "scale", "axpy"])
def test_what_is_not_an_array_is_named(value: Any, got: str, fn: str) -> None:
    """None, a string or an object array: a TypeError naming the function and the
    argument (before: jnp's 'None is not a valid value for jnp.array', a ValueError)."""
    calls = {
        "softplus": lambda: plugin_example.softplus(value),
        "scale": lambda: plugin_example.scale(value, 2.0),
        "axpy": lambda: plugin_example.axpy(2.0, value, np.ones(2)),
    }
    with pytest.raises(TypeError, match=rf"^{fn}: x: expected an array of numbers, got {got}"):
        calls[fn]()


def test_static_floats_are_checked_before_lowering() -> None:
    """A traced or non-number factor/alpha, and a ddof or clip outside what the handler
    takes, raise before lowering (before: a ConcretizationTypeError, a bare 'must be
    real number, not str', and JaxRuntimeErrors from the handler)."""
    x = np.ones((2, 3))
    with pytest.raises(TypeError, match=r"^scale: factor is traced.*static_argnames='factor'"):
        jax.jit(plugin_example.scale)(x, 2.0)
    with pytest.raises(TypeError, match=r"^scale: factor: expected a float, got str"):
        plugin_example.scale(x, "2")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^axpy: alpha is traced"):
        jax.jit(plugin_example.axpy)(2.0, x, x)
    with pytest.raises(
        ValueError, match=r"^moments: ddof: expected an integer in \[0, 3\) for rows of length 3, got 3"
    ):
        plugin_example.moments(x, ddof=3)
    with pytest.raises(ValueError, match=r"^moments: ddof: .*\[0, 0\).*got 0"):
        plugin_example.moments(np.ones((2, 0)))
    with pytest.raises(ValueError, match=r"^moments: ddof: .*got -1"):
        jax.jit(lambda x: plugin_example.moments(x, ddof=np.int64(-1)))(x)  # type: ignore[arg-type]
    for clip in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match=r"^moments: clip must be > 0"):
            plugin_example.moments(x, clip=clip)
    mean, var = jax.jit(lambda x: plugin_example.moments(x, ddof=2, clip=0.5))(x)
    np.testing.assert_allclose(mean, np.full(2, 0.5))
    np.testing.assert_allclose(var, np.zeros(2))
    alpha: Any = np.float32(2.0)  # a NumPy float is a float attribute too
    np.testing.assert_allclose(plugin_example.axpy(alpha, x, x), np.full((2, 3), 3.0))
