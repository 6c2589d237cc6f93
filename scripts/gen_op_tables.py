"""Writes the docs' tables of the ops and their FFI targets from what the package
declares, between the markers ``<!-- op-table:NAME:start -->`` and
``<!-- op-table:NAME:end -->``:

* ``targets`` (docs/python-api.md): each op's targets, their operands, results,
  dtypes, attributes and linearity, from ``xla_ffi_rs.declarations()``;
* ``cuda`` (docs/gpu.md): the targets registered for CUDA too (``xla_ffi_rs.handlers("cuda")``);
* ``ops`` (crates/ops/README.md): each op, the first line of its Python module's
  docstring, its targets and dtypes;
* ``repository`` (README.md): where each op's files are.

The ops are the folders of ``crates/ops/src`` (each with a ``mod.rs``); an op's
targets are those of the declared ops (``binding.Op``) of ``xla_ffi_rs.ops.<op>``.
``tests/test_op_tables.py`` fails when a committed doc differs from what this writes.

    python scripts/gen_op_tables.py          # rewrite the tables in place
    python scripts/gen_op_tables.py --check  # exit 1, naming the files, when one differs
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import xla_ffi_rs as xr
from xla_ffi_rs import binding

ROOT = Path(__file__).resolve().parent.parent
RUST_OPS = ROOT / "crates" / "ops" / "src"
FIX = "python scripts/gen_op_tables.py"


def ops() -> list[str]:
    """The op folders of crates/ops/src."""
    return sorted(p.parent.name for p in RUST_OPS.glob("*/mod.rs"))


def module(op: str) -> Any:
    return importlib.import_module(f"xla_ffi_rs.ops.{op}")


def targets(op: str) -> list[str]:
    """The op's targets, in the order of ``xla_ffi_rs.declarations()``."""
    mine = {o.declaration.target for o in vars(module(op)).values() if isinstance(o, binding.Op) and o.declaration}
    return [t for t in xr.declarations() if t in mine]


def summary(op: str) -> str:
    """The first line of the op module's docstring, with its rST literals as markdown."""
    doc = inspect.getdoc(module(op)) or ""
    return doc.split("\n\n")[0].replace("\n", " ").replace("``", "`")


def _dims(dims: list[str]) -> str:
    return " ".join(dims) if dims else "()"


def _slots(slots: list[dict[str, Any]]) -> str:
    return ", ".join(f"`{s['name']}`{'?' if s.get('optional') else ''}: `{_dims(s['dims'])}`" for s in slots)


def _dtypes(decl: dict[str, Any]) -> str:
    """The dtype rule, and each group of operands with the dtypes it takes."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for o in decl["operands"]:
        groups.setdefault(tuple(o["dtypes"]), []).append(f"`{o['name']}`")
    taken = "; ".join(f"{', '.join(names)}: {', '.join(ds)}" for ds, names in groups.items())
    return f"`{decl['dtypes']}`; {taken}"


def _attributes(decl: dict[str, Any]) -> str:
    attrs = [
        f"`{a['name']}`: {a['type']}{' (optional)' if a.get('optional') else ''}" for a in decl.get("attributes") or []
    ]
    return ", ".join(attrs) or "none"


def _linearity(decl: dict[str, Any]) -> str:
    linear = decl.get("linear") or []
    if not linear:
        return "no"
    out = "in " + ", ".join(f"`{n}`" for n in linear)
    if decl.get("transpose"):
        out += f"; transpose `{decl['transpose']}`"
    return out


def targets_table() -> str:
    decls = xr.declarations()
    rows = [
        "| op | target | operands (shape) | results (shape) | dtypes | attributes | linear |",
        "|---|---|---|---|---|---|---|",
    ]
    for op in ops():
        for t in targets(op):
            d = decls[t]
            rows.append(
                f"| `{op}` | `{t}` | {_slots(d['operands'])} | {_slots(d['results'])} | {_dtypes(d)} "
                f"| {_attributes(d)} | {_linearity(d)} |"
            )
    return "\n".join(rows)


def cuda_paragraph() -> str:
    cuda = set(xr.handlers("cuda"))
    names = [t for op in ops() for t in targets(op) if t in cuda]
    listed = ", ".join(f"`{t}`" for t in names)
    return f"The {len(names)} targets of the ops, {listed}, are registered for the CUDA platform too."


def ops_list() -> str:
    decls = xr.declarations()
    lines = []
    for op in ops():
        ts = targets(op)
        dtypes = sorted({d for t in ts for o in decls[t]["operands"] for d in o["dtypes"]}, key=_dtype_order)
        lines.append(
            f"* `{op}` (`src/{op}/`): {summary(op)} Targets: {', '.join(f'`{t}`' for t in ts)}; "
            f"dtypes: {', '.join(dtypes)}."
        )
    return "\n".join(lines)


def _dtype_order(name: str) -> tuple[int, str]:
    order = ["float16", "bfloat16", "float32", "float64"]
    return (order.index(name) if name in order else len(order), name)


def repository_table() -> str:
    rows = [
        "| op | Rust: handlers, kernels (`crates/ops/src/<op>/`) | Python | tests | targets |",
        "|---|---|---|---|---|",
    ]
    for op in ops():
        files = ", ".join(f"`{p.name}`" for p in sorted((RUST_OPS / op).iterdir()) if p.is_file())
        rows.append(
            f"| `{op}` | `crates/ops/src/{op}/`: {files} | `python/xla_ffi_rs/ops/{op}.py` | `tests/ops/{op}/` "
            f"| {', '.join(f'`{t}`' for t in targets(op))} |"
        )
    return "\n".join(rows)


#: Doc file -> table name -> what writes it.
TABLES: dict[str, dict[str, Callable[[], str]]] = {
    "docs/python-api.md": {"targets": targets_table},
    "docs/gpu.md": {"cuda": cuda_paragraph},
    "crates/ops/README.md": {"ops": ops_list},
    "README.md": {"repository": repository_table},
}


def render(text: str, path: str, tables: dict[str, Callable[[], str]]) -> str:
    """``text`` with each named table rewritten between its markers (each must be there once)."""
    for name, make in tables.items():
        start, end = f"<!-- op-table:{name}:start -->", f"<!-- op-table:{name}:end -->"
        found = re.findall(re.escape(start) + r"\n.*?" + re.escape(end), text, flags=re.DOTALL)
        if len(found) != 1:
            raise SystemExit(f"{path}: expected the markers {start} ... {end} once, found {len(found)}")
        text = text.replace(found[0], f"{start}\n{make()}\n{end}")
    return text


def generated() -> dict[str, tuple[str, str]]:
    """Doc path -> (committed text, generated text)."""
    out = {}
    for path, tables in TABLES.items():
        text = (ROOT / path).read_text(encoding="utf-8")
        out[path] = (text, render(text, path, tables))
    return out


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, (old, new) in generated().items():
        if old != new:
            stale.append(path)
            if not check:
                (ROOT / path).write_text(new, encoding="utf-8")
    if check and stale:
        print(f"op tables out of date in {', '.join(stale)}: run `{FIX}`", file=sys.stderr)
        return 1
    print(("rewrote " + ", ".join(stale)) if stale and not check else "op tables up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
