"""Importing the package next to a jax outside the range that ``pyproject.toml``
admits (``jax>=0.10,<0.13``; docs/versions.md) warns, naming the range and the jax
found; inside the range it is silent. The range the warning names is the one in
``pyproject.toml``. Each case imports the package in a fresh process with
warnings as errors, after setting ``jax.__version__``."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_import(fake_version: str | None) -> subprocess.CompletedProcess[str]:
    """``import xla_ffi_rs`` in a fresh process with warnings as errors, after
    setting ``jax.__version__`` to ``fake_version`` (None: the installed jax's)."""
    fake = "" if fake_version is None else f"jax.__version__ = {fake_version!r}; "
    code = f"import warnings; warnings.simplefilter('error'); import jax; {fake}import xla_ffi_rs"
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300)


def test_the_range_named_is_the_one_pyproject_admits() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    out = run_import("0.9.2")
    named = re.search(r"supports (jax>=[0-9.]+,<[0-9.]+)", out.stderr)
    assert named is not None, out.stderr
    assert named[1] in deps, (named[1], deps)


@pytest.mark.parametrize("version", ["0.10.0", "0.11.2", "0.12.2.dev20270101"])
def test_a_supported_jax_gets_no_warning(version: str) -> None:
    out = run_import(version)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("version", ["0.9.2", "0.13.0rc1", "1.0.0"])
def test_an_unsupported_jax_warns_naming_both(version: str) -> None:
    out = run_import(version)
    assert out.returncode != 0
    assert "UserWarning" in out.stderr and f"jax {version}" in out.stderr, out.stderr
    assert "jax>=0.10,<0.13" in out.stderr and "docs/versions.md" in out.stderr, out.stderr


def test_import_next_to_the_installed_jax_is_silent() -> None:
    out = run_import(None)
    assert out.returncode == 0, out.stderr
