"""6 and 3 devices (not powers of two), each in its own process: rms_norm forward
and grad with the rows split, the hidden axis split (tensor parallel), both, and
over two mesh axes on one dimension, on auto and explicit 2 x 3 / 3 x 1 meshes;
and Kepler. Float64 references, and no all-gather of ``x``."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    import jax, jax.numpy as jnp, numpy as np
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
    jax.config.update("jax_enable_x64", True)
    sys.path.insert(0, sys.argv[1])
    import xla_ffi_rs
    from helpers import kepler_solve_np, rms_norm_bwd_np, rms_norm_np

    n = jax.device_count()
    assert n == int(sys.argv[2]), n
    d, k = (2, 3) if n == 6 else (3, 1)
    explicit = jax.sharding.AxisType.Explicit
    meshes = {
        "auto": Mesh(np.array(jax.devices()).reshape(d, k), ("data", "model")),
        "explicit": jax.make_mesh((d, k), ("data", "model"), axis_types=(explicit, explicit)),
    }
    rng = np.random.default_rng(n)
    x, w, dy = rng.standard_normal((12, 9)), rng.standard_normal(9), rng.standard_normal((12, 9))
    ref_y = rms_norm_np(x, w, 1e-5)[0]
    ref_dx, ref_dw = rms_norm_bwd_np(dy, x, w, 1e-5)
    f = jax.jit(lambda x, w: xla_ffi_rs.rms_norm(x, w, eps=1e-5))
    g = jax.jit(jax.grad(lambda x, w: jnp.sum(xla_ffi_rs.rms_norm(x, w, eps=1e-5) * dy), (0, 1)))
    for name, mesh in meshes.items():
        for spec in (P("data"), P(None, "model"), P("data", "model"), P(("data", "model"))):
            if 12 % (mesh.shape["data"] * mesh.shape["model"]) and spec == P(("data", "model")):
                continue
            xs = jax.device_put(x, NamedSharding(mesh, spec))
            with jax.set_mesh(mesh):
                np.testing.assert_allclose(f(xs, w), ref_y, rtol=1e-12, atol=1e-12, err_msg=f"{name} {spec}")
                dx, dw = g(xs, w)
                np.testing.assert_allclose(dx, ref_dx, rtol=1e-12, atol=1e-12, err_msg=f"{name} {spec}")
                np.testing.assert_allclose(dw, ref_dw, rtol=1e-12, atol=1e-12, err_msg=f"{name} {spec}")
                for prog in (f.lower(xs, w), g.lower(xs, w)):
                    gathered = [l for l in prog.compile().as_text().splitlines() if "all-gather(" in l]
                    assert not gathered, (name, spec, gathered)
            m = jax.device_put(rng.uniform(-3.0, 3.0, 12), NamedSharding(mesh, P("data")))
            with jax.set_mesh(mesh):
                sin_e, _ = jax.jit(xla_ffi_rs.kepler)(m, 0.5)
            np.testing.assert_allclose(sin_e, np.sin(kepler_solve_np(np.asarray(m), 0.5)), rtol=1e-10, atol=1e-12)
    print("checked", n)
    """
)


@pytest.mark.parametrize("devices", [6, 3])
def test_odd_device_counts(devices: int) -> None:
    tests = Path(__file__).resolve().parent.parent
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tests), str(devices)],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert f"checked {devices}" in run.stdout
