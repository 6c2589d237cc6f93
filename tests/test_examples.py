"""The examples do what their docs say: the 30-line op binding, and the demo's fit."""

from __future__ import annotations

import os
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

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


def test_demo_recovers_the_orbit() -> None:
    demo = load_example("rv_fit")
    rng = np.random.default_rng(7)
    t = jnp.asarray(np.sort(rng.uniform(0.0, 60.0, 80)))
    true = {k: jnp.asarray(v) for k, v in demo.TRUE.items()}
    rv = demo.rv_model(true, t) + 2.0 * jnp.asarray(rng.standard_normal(t.shape))
    best = demo.fit(t, rv, 2.0, {"K": 40.0, "e": 0.4, "omega": 0.6, "t_p": 2.5, "gamma": 0.0})
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


def test_demo_writes_the_plot(tmp_path: Path) -> None:
    if os.environ.get("CI") != "true":  # CI installs matplotlib (scripts/env.sh): never skipped there
        pytest.importorskip("matplotlib")
    demo = load_example("rv_fit")
    rng = np.random.default_rng(7)
    t = jnp.asarray(np.sort(rng.uniform(0.0, 60.0, 20)))
    true = {k: jnp.asarray(v) for k, v in demo.TRUE.items()}
    rv = demo.rv_model(true, t)
    out = demo.plot(t, rv, 2.0, true, true, tmp_path / "rv.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 10_000
