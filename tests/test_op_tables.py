"""The docs' tables of the ops and their targets are what scripts/gen_op_tables.py
writes from the declarations: a table edited by hand, or an op added, changed or
removed without running the script, fails here with the command that fixes it."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

import xla_ffi_rs as xr

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "gen_op_tables.py"


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_op_tables", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


GEN = load()


@pytest.mark.parametrize("path", sorted(GEN.TABLES))
def test_the_committed_tables_are_the_generated_ones(path: str) -> None:
    if "cuda" in GEN.TABLES[path] and not xr.has_cuda:
        pytest.skip("the CUDA table needs the native module built with the CUDA handlers")
    committed, generated = GEN.generated()[path]
    assert committed == generated, f"{path}: the op tables are out of date: run `{GEN.FIX}`"


def test_the_tables_name_every_op_and_target() -> None:
    ops = GEN.ops()
    assert ops == sorted(p.parent.name for p in (ROOT / "crates" / "ops" / "src").glob("*/mod.rs")) and ops
    owned = [t for op in ops for t in GEN.targets(op)]
    assert len(owned) == len(set(owned)), "a target belongs to two ops"
    table = GEN.targets_table()
    assert all(f"| `{t}` |" in table for t in owned), table
    # every production target of the package but python_call belongs to an op
    production = set(xr.handlers("cpu")) - {"xla_ffi_rs.python_call"}
    assert production == set(owned), production ^ set(owned)


def test_a_stale_table_is_found_and_rewritten() -> None:
    text = "a\n<!-- op-table:ops:start -->\nold\n<!-- op-table:ops:end -->\nb\n"
    new = GEN.render(text, "x.md", {"ops": lambda: "new"})
    assert new == "a\n<!-- op-table:ops:start -->\nnew\n<!-- op-table:ops:end -->\nb\n"
    with pytest.raises(SystemExit, match="expected the markers"):
        GEN.render("no markers", "x.md", {"ops": lambda: "new"})
