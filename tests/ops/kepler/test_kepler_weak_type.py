"""xr.kepler's results are weakly typed exactly when both inputs are (Python numbers,
or arrays made from them), as jnp's elementwise functions type theirs: a solution
from Python scalars then keeps the dtype of the arrays it meets (``s * x_f16`` is
float16), where a strongly typed float32 result promoted it."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr

F32 = jnp.float32
#: (mean anomaly, eccentricity): weak pairs, then pairs with one strongly typed input
CASES: dict[str, tuple[Any, Any]] = {
    "floats": (1.0, 0.3),
    "int_and_float": (1, 0.3),
    "ints": (2, 0),
    "weak_array": (jnp.asarray(1.0), 0.3),
    "array_from_list": (jnp.asarray([0.5, 1.0, 2.0]), 0.3),
    "numpy_scalar": (np.float32(1.0), 0.3),
    "strong_array_e": (1.0, jnp.full(3, 0.3, F32)),
    "bfloat16_e": (1.0, jnp.full(3, 0.3, jnp.bfloat16)),
}


def kepler_np(m: Any, e: Any) -> tuple[np.ndarray, np.ndarray]:
    """sin E, cos E in float64 by Newton's method (an independent reference)."""
    m, e = np.broadcast_arrays(np.asarray(m, np.float64), np.asarray(e, np.float64))
    big_e = m + e * np.sin(m)
    for _ in range(50):
        big_e = big_e - (big_e - e * np.sin(big_e) - m) / (1 - e * np.cos(big_e))
    return np.sin(big_e), np.cos(big_e)


def like_jnp(m: Any, e: Any) -> jax.Array:
    """An elementwise jnp result of the same inputs: the type kepler's should have."""
    return jnp.sin(jnp.add(m, jnp.multiply(e, 0)))


@pytest.mark.parametrize("name", CASES)
@pytest.mark.parametrize("jit", [False, True], ids=["eager", "jit"])
def test_results_are_typed_as_jnp_types_an_elementwise_function(name: str, jit: bool) -> None:
    m, e = CASES[name]
    f = jax.jit(xr.kepler) if jit else xr.kepler
    want = jax.typeof((jax.jit(like_jnp) if jit else like_jnp)(m, e))
    s, c = f(m, e)
    for got in (s, c):
        assert (got.dtype, got.shape, jax.typeof(got).weak_type) == (want.dtype, want.shape, want.weak_type), name
    ref_s, ref_c = kepler_np(m, e)
    tol = 1e-2 if want.dtype == jnp.bfloat16 else 1e-6
    np.testing.assert_allclose(np.asarray(s, np.float64), ref_s, atol=tol)
    np.testing.assert_allclose(np.asarray(c, np.float64), ref_c, atol=tol)


def test_a_solution_from_python_numbers_keeps_the_dtype_of_the_array_it_scales() -> None:
    x = jnp.linspace(0.0, 1.0, 4, dtype=jnp.float16)
    s, c = xr.kepler(1.0, 0.3)
    assert (s * x).dtype == jnp.float16 and (c + x).dtype == jnp.float16
    ref_s, _ = kepler_np(1.0, 0.3)
    np.testing.assert_allclose(np.asarray(s * x, np.float64), ref_s * np.asarray(x, np.float64), rtol=2e-3)


def test_derivatives_at_python_numbers_are_typed_as_jnp_types_them() -> None:
    grad = jax.grad(lambda m: xr.kepler(m, 0.3)[0])(1.0)
    want = jax.typeof(jax.grad(lambda m: jnp.sin(m * 1.0))(1.0))
    assert (grad.dtype, jax.typeof(grad).weak_type) == (want.dtype, want.weak_type)
    _, tangent = jax.jvp(lambda m: xr.kepler(m, 0.3)[1], (1.0,), (1.0,))
    assert (tangent.dtype, jax.typeof(tangent).weak_type) == (want.dtype, want.weak_type)
    # dE/dM = 1 / (1 - e cos E), so d(sin E)/dM = cos E / (1 - e cos E), d(cos E)/dM = -sin E / (...).
    s, c = kepler_np(1.0, 0.3)
    np.testing.assert_allclose(float(grad), c / (1 - 0.3 * c), rtol=1e-5)
    np.testing.assert_allclose(float(tangent), -s / (1 - 0.3 * c), rtol=1e-5)
