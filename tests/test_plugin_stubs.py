"""The template's native module stubs (examples/plugin/python/plugin_example/
plugin_native.pyi) declare every function the PyO3 module adds, so that a package
made from the template type-checks its calls (mypy: 'Module has no attribute')."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = ROOT / "examples" / "plugin"


def test_the_native_module_stubs_declare_every_function_it_adds() -> None:
    added = {
        n for p in sorted((PLUGIN / "src").glob("*.rs")) for n in re.findall(r"wrap_pyfunction!\((\w+)", p.read_text())
    }
    assert {"targets", "declarations"} <= added, added
    stubs = (PLUGIN / "python" / "plugin_example" / "plugin_native.pyi").read_text(encoding="utf-8")
    declared = set(re.findall(r"^def (\w+)\(", stubs, re.MULTILINE))
    assert added == declared, f"plugin_native.pyi: missing {sorted(added - declared)}, extra {sorted(declared - added)}"
