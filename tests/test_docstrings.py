"""The examples in the package's docstrings run as written (doctest), in every module."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

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
