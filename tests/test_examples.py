"""The examples do what their docs say: the 30-line op binding, the demo's fit, and JAXbind's demos ported."""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from helpers import load_example


def test_bound_scale_op_has_every_transformation() -> None:
    ex = load_example("bind_scale")
    x = jnp.arange(6.0, dtype=jnp.float32).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(jax.jit(ex.scale, static_argnums=1)(x, 3.0)), 3.0 * np.asarray(x))
    np.testing.assert_array_equal(np.asarray(jax.grad(lambda v: ex.scale(v, 2.5).sum())(x)), np.full((2, 3), 2.5))
    _, tangent = jax.jvp(lambda v: ex.scale(v, 2.0), (x,), (jnp.ones_like(x),))
    np.testing.assert_array_equal(np.asarray(tangent), np.full((2, 3), 2.0))
    batched = jax.jit(jax.vmap(lambda v: ex.scale(v, 2.0), in_axes=1))
    np.testing.assert_array_equal(np.asarray(batched(x)), 2.0 * np.asarray(x).T)
    text = batched.lower(x).as_text()
    assert text.count("xla_ffi_rs.examples.scale") == 1 and "while" not in text


@functools.cache
def _fitted_demo() -> tuple[Any, jax.Array, jax.Array, dict[str, jax.Array]]:
    """The demo module, 80 noisy velocities of its true orbit (seed 7) and the fit
    (once: two tests read it, and neither changes it)."""
    demo = load_example("rv_fit")
    rng = np.random.default_rng(7)
    t = jnp.asarray(np.sort(rng.uniform(0.0, 60.0, 80)))
    true = {k: jnp.asarray(v) for k, v in demo.TRUE.items()}
    rv = demo.rv_model(true, t) + 2.0 * jnp.asarray(rng.standard_normal(t.shape))
    best = demo.fit(t, rv, 2.0, {"K": 40.0, "e": 0.4, "omega": 0.6, "t_p": 2.5, "gamma": 0.0})
    return demo, t, rv, best


def test_demo_recovers_the_orbit() -> None:
    demo, t, rv, best = _fitted_demo()
    assert abs(float(best["e"]) - demo.TRUE["e"]) < 0.02
    assert abs(float(best["K"]) - demo.TRUE["K"]) < 2.0
    assert abs(float(best["omega"]) - demo.TRUE["omega"]) < 0.05
    chi2 = float(jnp.sum(((demo.rv_model(best, t) - rv) / 2.0) ** 2))
    assert chi2 < 1.5 * t.size, chi2
    # Our kepler and the demo's jnp Newton baseline agree.
    m, e = jnp.linspace(0.0, 6.0, 50), jnp.full(50, 0.6)
    np.testing.assert_allclose(
        np.asarray(demo.jnp_newton_kepler(m, e)[0]),
        np.asarray(jax.numpy.sin(jnp.arctan2(*demo.xr.kepler(m, e)))),
        atol=1e-9,
    )


def test_demo_uncertainties_from_the_hessian() -> None:
    """The inverse Hessian's errors: finite, positive, the true parameters within 4
    sigma of the fit, and each error the square root of the Laplace variance, checked
    against a finite-difference Hessian of the loss in float64."""
    demo, t, rv, best = _fitted_demo()
    errors = demo.uncertainties(t, rv, 2.0, best)
    assert set(errors) == set(demo.TRUE)
    for k, err in errors.items():
        assert np.isfinite(err) and err > 0.0, (k, err)
        assert abs(float(best[k]) - demo.TRUE[k]) < 4.0 * err, (k, float(best[k]), demo.TRUE[k], err)
    # An independent reference: central differences of the loss, with the model's
    # own jnp Newton solver in place of xr.kepler.
    names = list(demo.TRUE)

    @jax.jit
    def jnp_loss(p: jax.Array) -> jax.Array:
        params = dict(zip(names, p, strict=True))
        r = (demo.rv_model(params, t, solver=demo.jnp_newton_kepler) - rv) / 2.0
        return 0.5 * jnp.sum(r * r)

    def loss(p: np.ndarray) -> float:
        return float(jnp_loss(jnp.asarray(p)))

    p0 = np.array([float(best[k]) for k in names])
    h = 1e-4 * np.maximum(np.abs(p0), 1.0)
    hess = np.empty((5, 5))
    for i in range(5):
        for j in range(5):
            di, dj = np.eye(5)[i] * h[i], np.eye(5)[j] * h[j]
            hess[i, j] = (loss(p0 + di + dj) - loss(p0 + di - dj) - loss(p0 - di + dj) + loss(p0 - di - dj)) / (
                4 * h[i] * h[j]
            )
    reference = np.sqrt(np.diag(np.linalg.inv(hess)))
    np.testing.assert_allclose([errors[k] for k in names], reference, rtol=1e-3)


def test_demo_writes_the_plot(tmp_path: Path) -> None:
    if os.environ.get("CI") != "true":  # CI installs matplotlib (scripts/env.sh): never skipped there
        pytest.importorskip("matplotlib")
    demo = load_example("rv_fit")
    rng = np.random.default_rng(7)
    t = jnp.asarray(np.sort(rng.uniform(0.0, 60.0, 20)))
    true = {k: jnp.asarray(v) for k, v in demo.TRUE.items()}
    rv = demo.rv_model(true, t)
    errors = dict.fromkeys(demo.TRUE, 0.01)
    out = demo.plot(t, rv, 2.0, true, true, tmp_path / "rv.png", errors)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
    # At 150 dpi or more: the pHYs chunk holds pixels per metre (150 dpi = 5906).
    i = data.index(b"pHYs")
    assert int.from_bytes(data[i + 4 : i + 8], "big") >= 5905, "saved below 150 dpi"
    # The main panels, the residuals and the phase-folded panel.
    import matplotlib.image

    height, width = matplotlib.image.imread(out).shape[:2]
    assert width >= 1200 and height >= 600, (width, height)


# -- JAXbind's three demos, ported (examples/fft_linear.py, multilinear_product.py,
# nonlinear_fixed.py): each against NumPy and check_grads.


def test_fft_linear_example() -> None:
    ex = load_example("fft_linear")
    rng = np.random.default_rng(5)
    x = jnp.asarray(rng.standard_normal((6, 4)) + 1j * rng.standard_normal((6, 4)))
    xn = np.asarray(x)
    np.testing.assert_allclose(np.asarray(jax.jit(ex.fftn_op)(x)), np.fft.fftn(xn, norm="forward"), atol=1e-14)
    got = jax.vmap(ex.fftn_op, in_axes=1, out_axes=1)(x)
    np.testing.assert_allclose(np.asarray(got), np.fft.fft(xn, axis=0, norm="forward"), atol=1e-14)
    # The transpose against the dense DFT matrix's transpose.
    dft = np.fft.fft(np.eye(6), axis=0, norm="forward")
    c = jnp.asarray(rng.standard_normal(6) + 1j * rng.standard_normal(6))
    (lt,) = jax.linear_transpose(ex.fftn_op, x[:, 0])(c)
    np.testing.assert_allclose(np.asarray(lt), dft.T @ np.asarray(c), atol=1e-14)
    check_grads(ex.fftn_op, (x,), order=2, modes=("fwd", "rev"))


def test_multilinear_product_example() -> None:
    ex = load_example("multilinear_product")
    rng = np.random.default_rng(6)
    x, y, tx, ty = (jnp.asarray(rng.standard_normal((3, 4))) for _ in range(4))
    (p, q), (tp, _) = jax.jvp(jax.jit(ex.mlin_op), (x, y), (tx, ty))
    xn, yn = np.asarray(x), np.asarray(y)
    np.testing.assert_allclose(np.asarray(p), xn * yn, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(q), xn * yn, rtol=1e-15)
    np.testing.assert_allclose(np.asarray(tp), np.asarray(tx) * yn + xn * np.asarray(ty), rtol=1e-14)
    gx, gy = jax.grad(lambda a, b: ex.mlin_op(a, b)[0].sum() + 3 * ex.mlin_op(a, b)[1].sum(), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(np.asarray(gx), 4 * yn, rtol=1e-14)
    np.testing.assert_allclose(np.asarray(gy), 4 * xn, rtol=1e-14)
    check_grads(ex.mlin_op, (x, y), order=2, modes=("fwd", "rev"))


def test_nonlinear_fixed_example() -> None:
    ex = load_example("nonlinear_fixed")
    x, y = jnp.asarray([4.0, -1.0]), jnp.asarray([6.0, 0.5])
    _, (ta, tb) = jax.jvp(lambda v: ex.nonlin_op(x, v), (y,), (jnp.ones(2),))
    np.testing.assert_allclose(np.asarray(ta), np.asarray(x))
    np.testing.assert_allclose(np.asarray(tb), 2 * np.asarray(y))
    _, vjp = jax.vjp(lambda v: ex.nonlin_op(x, v), y)
    (g,) = jax.jit(vjp)((jnp.ones(2), jnp.full(2, 2.0)))
    np.testing.assert_allclose(np.asarray(g), np.asarray(x) + 4 * np.asarray(y))
    check_grads(lambda v: ex.nonlin_op(x, v), (y,), order=1, modes=("fwd", "rev"))
    with pytest.raises(ValueError, match=r"operand 0 \(x\).*declared fixed"):
        jax.grad(lambda u: ex.nonlin_op(u, y)[0].sum())(x)
