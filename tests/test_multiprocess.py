"""xr ops under jax.distributed: 2 processes on localhost, 4 CPU devices each.

The same sharded computation as a single process would run, on JAX's own multi-host
runtime with its gloo CPU collectives. Bounded in time, loopback only.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from process_group import describe, run_workers

WORKER = Path(__file__).parent / "multiprocess" / "worker.py"
TIMEOUT_S = 240


def reference() -> dict[str, np.ndarray]:
    """The single-process answers, from independent numpy float64 formulas."""
    rng = np.random.default_rng(0)
    m = rng.uniform(-10, 10, (8, 16))
    e = rng.uniform(0, 0.95, (8, 16))
    x = rng.standard_normal((8, 4, 32))
    w = rng.standard_normal(32)
    t = rng.standard_normal((16, 32))
    big_e = m.copy()
    for _ in range(60):  # plain Newton, to convergence
        big_e -= (big_e - e * np.sin(big_e) - m) / (1 - e * np.cos(big_e))
    y, gx, gw = rms_norm_and_grad(x, w)
    ty, tgx, tgw = rms_norm_and_grad(t, w)
    return {
        "sin_e": np.sin(big_e),
        "cos_e": np.cos(big_e),
        "y": y,
        "gx": gx,
        "gw": gw,
        "ty": ty,
        "tgx": tgx,
        "tgw": tgw,
        "tp_y": ty,  # tensor parallel: the same values
        "tp_gx": tgx,
        "tp_gw": tgw,
    }


def rms_norm_and_grad(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """y = rms_norm(x, w) and the gradient of sum(sin(y)) wrt x and w, float64."""
    r = 1 / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-5)
    y = x * r * w
    g = np.cos(y)  # d sum(sin(y)) / dy
    gw = (g * x * r).sum(tuple(range(x.ndim - 1)))
    gx = r * w * g - x * r**3 * (g * w * x).sum(-1, keepdims=True) / x.shape[-1]
    return y, gx, gw


def test_two_processes_match_single_process(tmp_path: Path) -> None:
    done = run_workers(WORKER, 2, str(tmp_path), timeout_s=TIMEOUT_S, local_devices=4)
    assert [f.returncode for f in done] == [0, 0], describe(done)
    ref = reference()
    for pid in (0, 1):
        got = np.load(tmp_path / f"proc{pid}.npz")
        for name, want in ref.items():
            np.testing.assert_allclose(got[name], want, rtol=1e-9, atol=1e-9, err_msg=f"process {pid}: {name}")
