"""Importing the package next to a jax outside the range that ``pyproject.toml``
admits (``jax>=0.10,<0.13``; docs/versions.md) warns, naming the range and the jax
found; inside the range it is silent. The range in the code is the one in
``pyproject.toml``."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from xla_ffi_rs import _versions

ROOT = Path(__file__).resolve().parent.parent


def test_the_range_is_the_one_pyproject_admits() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    assert _versions.JAX_REQUIREMENT in deps, deps
    (a, b), (c, d) = _versions.JAX_OLDEST, _versions.JAX_FIRST_UNSUPPORTED
    assert f"jax>={a}.{b},<{c}.{d}" == _versions.JAX_REQUIREMENT


@pytest.mark.parametrize("version", ["0.10.0", "0.10.2", "0.11.2", "0.12.0.1", "0.12.1", "0.12.2.dev20270101"])
def test_a_supported_jax_gets_no_warning(version: str) -> None:
    assert _versions.jax_version_warning(version) is None


@pytest.mark.parametrize("version", ["0.9.2", "0.4.38", "0.13.0", "0.13.0rc1", "1.0.0"])
def test_an_unsupported_jax_is_named_with_the_range(version: str) -> None:
    message = _versions.jax_version_warning(version)
    assert message is not None
    assert f"jax {version}" in message and "jax>=0.10,<0.13" in message and "docs/versions.md" in message


def run_import(fake_version: str | None) -> subprocess.CompletedProcess[str]:
    """``import xla_ffi_rs`` in a fresh process with warnings as errors, after
    setting ``jax.__version__`` to ``fake_version`` (None: the installed jax's)."""
    fake = "" if fake_version is None else f"jax.__version__ = {fake_version!r}; "
    code = f"import warnings; warnings.simplefilter('error'); import jax; {fake}import xla_ffi_rs"
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300)


def test_import_next_to_an_unsupported_jax_warns_naming_both() -> None:
    out = run_import("0.9.2")
    assert out.returncode != 0
    assert "UserWarning" in out.stderr and "jax 0.9.2" in out.stderr and "jax>=0.10,<0.13" in out.stderr, out.stderr


def test_import_next_to_the_installed_jax_is_silent() -> None:
    out = run_import(None)
    assert out.returncode == 0, out.stderr
