"""Each small example runs as its docstring says, ``python examples/<name>.py`` from
the repository's root: its ``__main__`` part, which tests/test_examples.py (which
imports the examples as modules) never reaches. The demo, examples/rv_fit.py, is
scripts/demo.sh's (its parts are tested in tests/test_examples.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ["bessel_kv", "bind_scale", "fft_linear", "multilinear_product", "nonlinear_fixed"]


def test_every_small_example_is_run() -> None:
    found = {p.stem for p in (ROOT / "examples").glob("*.py")} - {"rv_fit"}
    assert found == set(SCRIPTS), f"examples not run as scripts here: {sorted(found - set(SCRIPTS))}"


@pytest.mark.parametrize("name", SCRIPTS)
def test_an_example_runs_as_a_script(name: str) -> None:
    script = ROOT / "examples" / f"{name}.py"
    assert f"python examples/{name}.py" in script.read_text(encoding="utf-8"), "its docstring says how to run it"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "JAX_"))}
    done = subprocess.run(
        [sys.executable, f"examples/{name}.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip(), "it prints its results"
