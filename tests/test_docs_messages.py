"""The error messages docs/python-api.md quotes (a ``text`` block, which no test
runs) are, word for word, what the calls give."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr

ROOT = Path(__file__).resolve().parent.parent
X = np.ones((3, 4), np.float32)
W = np.ones(4, np.float32)


def quoted_raw_target_errors() -> list[str]:
    """The lines of the text block after "A bad call raises" in python-api.md."""
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    after = text.split("A bad call raises `jax.errors.JaxRuntimeError`", 1)[1]
    block = re.search(r"^```text\n(.*?)^```$", after, flags=re.M | re.S)
    assert block is not None, "python-api.md: no text block after 'A bad call raises'"
    return block[1].splitlines()


def rms_norm_fwd(x: Any, *operands: Any, **attributes: Any) -> Any:
    x = jnp.asarray(x)
    f = jax.ffi.ffi_call(
        "xla_ffi_rs.rms_norm_fwd",
        (jax.ShapeDtypeStruct(x.shape, jnp.float32), jax.ShapeDtypeStruct(x.shape[:-1], jnp.float32)),
    )
    return jax.block_until_ready(f(x, *operands, **attributes))


# One bad call per quoted line, in the block's order.
BAD_CALLS = [
    lambda: rms_norm_fwd(X.astype(np.int32), W, eps=1e-5),
    lambda: rms_norm_fwd(X, np.ones(3, np.float32), eps=1e-5),
    lambda: rms_norm_fwd(X, W, W, eps=1e-5),
    lambda: rms_norm_fwd(X, W),
    lambda: rms_norm_fwd(X, W, eps="1e-5"),
    lambda: rms_norm_fwd(X, W, eps=1e-5, epsilon=1e-5),
]


def test_the_block_quotes_one_line_per_bad_call() -> None:
    assert len(quoted_raw_target_errors()) == len(BAD_CALLS)


@pytest.mark.parametrize("index", range(len(BAD_CALLS)))
def test_a_quoted_raw_target_error_is_the_calls_own(index: int) -> None:
    quoted = quoted_raw_target_errors()[index]
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        BAD_CALLS[index]()
    assert quoted in str(info.value), f"python-api.md quotes\n  {quoted}\nthe call gives\n  {info.value}"


def test_the_quoted_shape_error_before_lowering() -> None:
    """The ValueError the page prints from ``xr.rms_norm`` (its comment), before lowering."""
    text = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    quoted = re.search(r"print\(e\)  # (xla_ffi_rs\.rms_norm_fwd: .*)$", text, flags=re.M)
    assert quoted is not None
    with pytest.raises(ValueError) as info:
        xr.rms_norm(jnp.ones((3, 4)), jnp.ones(3))
    assert str(info.value) == quoted[1]


def test_the_quoted_version_warning() -> None:
    """docs/versions.md quotes the import warning for jax 0.9.2, with elisions
    (``...``): the import, in a fresh process after setting ``jax.__version__``."""
    text = (ROOT / "docs" / "versions.md").read_text(encoding="utf-8")
    quoted = re.search(r"`UserWarning` naming the range and the jax found \(`(.*?)`\)", text, flags=re.S)
    assert quoted is not None, "versions.md: the quoted warning is gone"
    code = "import warnings; warnings.simplefilter('error'); import jax; jax.__version__ = '0.9.2'; import xla_ffi_rs"
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=300)
    warning = done.stderr.strip().splitlines()[-1]
    assert "UserWarning" in warning, done.stderr
    at = 0
    for piece in filter(None, (p.strip() for p in " ".join(quoted[1].split()).split("..."))):
        found = warning.find(piece, at)
        assert found >= 0, f"versions.md quotes {piece!r}; the warning is {warning!r}"
        at = found + len(piece)
