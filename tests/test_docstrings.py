"""The examples in the package's docstrings run as written (doctest), in every module."""

from __future__ import annotations

import doctest
import importlib
import os
import pkgutil
import subprocess
import sys
import tempfile

import pytest

import xla_ffi_rs


def modules() -> list[str]:
    found = [xla_ffi_rs.__name__]
    for info in pkgutil.walk_packages(xla_ffi_rs.__path__, prefix="xla_ffi_rs."):
        found.append(info.name)
    return sorted(found)


@pytest.mark.parametrize("name", modules())
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} docstring examples failed (see above)"


def test_docstring_examples_run_as_a_reader_pastes_them() -> None:
    """The same examples in a fresh interpreter with JAX's defaults (64-bit types off,
    no XLA_FLAGS): the suite turns x64 on (conftest.py), a reader's session does not."""
    code = (
        "import doctest, importlib, sys\n"
        "bad = []\n"
        f"for name in {modules()!r}:\n"
        "    r = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)\n"
        "    if r.failed: bad.append(name)\n"
        "print('failed:', bad)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "JAX_"))}
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0 and "failed: []" in done.stdout, done.stdout[-6000:] + done.stderr[-3000:]
