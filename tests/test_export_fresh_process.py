"""A serialized export (both platforms, ``vjp_order=1``) loaded in a fresh process:
the values and the gradient against float64 NumPy when ``xla_ffi_rs`` is imported
there, and the words docs/python-api.md quotes when it is not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import xla_ffi_rs as xr
from helpers import kepler_solve_np, rms_norm_bwd_np, rms_norm_np

EPS = 1e-5
ROOT = Path(__file__).resolve().parent.parent

# Loads model.jaxexport and the inputs, calls and differentiates the export, saves
# the results; imports xla_ffi_rs only when asked to.
LOADER = """
import sys
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np
folder, with_import = sys.argv[1], sys.argv[2] == "1"
if with_import:
    import xla_ffi_rs
exported = jax.export.deserialize(open(folder + "/model.jaxexport", "rb").read())
m, e, x, w = (np.load(f"{folder}/in{i}.npy") for i in range(4))
try:
    value = exported.call(m, e, x, w)
except Exception as err:
    print(f"{type(err).__name__}: {err}")
    raise SystemExit(3)
grads = jax.grad(exported.call, argnums=(0, 1, 2, 3))(m, e, x, w)
np.save(folder + "/value.npy", np.asarray(value))
for i, g in enumerate(grads):
    np.save(f"{folder}/grad{i}.npy", np.asarray(g))
"""


def model(m: jax.Array, e: jax.Array, x: jax.Array, w: jax.Array) -> jax.Array:
    sin_e, _ = xr.kepler(m, e)
    return jnp.sum(sin_e) + jnp.sum(xr.rms_norm(x, w, eps=EPS) * x)


def _write(folder: Path) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(11)
    args = (rng.uniform(-7, 7, 5), rng.uniform(0, 0.9, 5), rng.standard_normal((4, 6)), rng.uniform(0.5, 1.5, 6))
    exported = jax.export.export(jax.jit(model), platforms=("cpu", "cuda"), disabled_checks=xr.export_checks())(*args)
    (folder / "model.jaxexport").write_bytes(bytes(exported.serialize(vjp_order=1)))
    for i, a in enumerate(args):
        np.save(folder / f"in{i}.npy", a)
    return args


def _load(folder: Path, with_import: bool) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-c", LOADER, str(folder), "1" if with_import else "0"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)


def test_a_fresh_process_calls_and_differentiates_a_two_platform_export(tmp_path: Path) -> None:
    m, e, x, w = _write(tmp_path)
    done = _load(tmp_path, with_import=True)
    assert done.returncode == 0, done.stdout + done.stderr
    big_e = kepler_solve_np(m, e)
    y, _ = rms_norm_np(x, w, EPS)
    np.testing.assert_allclose(np.load(tmp_path / "value.npy"), np.sum(np.sin(big_e)) + np.sum(y * x), rtol=1e-10)
    denom = 1.0 - e * np.cos(big_e)
    dx, dw = rms_norm_bwd_np(x, x, w, EPS)
    want = [np.cos(big_e) / denom, np.cos(big_e) * np.sin(big_e) / denom, dx + y, dw]
    for i, g in enumerate(want):
        np.testing.assert_allclose(np.load(tmp_path / f"grad{i}.npy"), g, rtol=1e-9, atol=1e-12, err_msg=f"grad {i}")
    # The same bits as this process gets from the same export (docs/python-api.md, "Reproducibility").
    exported = jax.export.deserialize(bytearray((tmp_path / "model.jaxexport").read_bytes()))
    here = [exported.call(m, e, x, w), *jax.grad(exported.call, argnums=(0, 1, 2, 3))(m, e, x, w)]
    for name, got in zip(["value", "grad0", "grad1", "grad2", "grad3"], here, strict=True):
        assert np.array_equal(np.load(tmp_path / f"{name}.npy"), np.asarray(got)), name


def test_a_process_that_never_imported_the_package_gets_the_documented_words(tmp_path: Path) -> None:
    _write(tmp_path)
    done = _load(tmp_path, with_import=False)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "NOT_FOUND: No FFI handler registered for xla_ffi_rs." in done.stdout, done.stdout
    docs = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    assert "NOT_FOUND: No FFI handler registered for\nxla_ffi_rs.kepler on a platform Host" in docs
    assert "means `import xla_ffi_rs`" in docs
