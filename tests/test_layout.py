"""The package layout: public names only outside the package, no module hidden
behind a function, JAX internals in one module, no import cycle.

* Nothing outside ``python/xla_ffi_rs`` (tests, benchmarks, examples, scripts,
  docs) imports a private module or name of the package: what they need is public.
* ``import xla_ffi_rs.ops.kepler as m`` gives the module, and every module of the
  package is the attribute of its parent package of that name, while
  ``xla_ffi_rs.kepler``, ``.rms_norm``, ``.rms_norm_inplace`` and ``.python_op``
  stay the functions.
* Only ``_compat.py`` mentions JAX's private package (``jax`` + ``._src``).
* The package's modules import each other without a cycle, and each imports on
  its own in a fresh interpreter.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "python" / "xla_ffi_rs"
PACKAGE = "xla_ffi_rs"
#: The functions that share a name with what used to be a module.
FUNCTIONS = ("kepler", "rms_norm", "rms_norm_inplace", "python_op")
#: Spelled in two parts so that this file does not match its own check.
JAX_PRIVATE = "jax." + "_src"

# A dotted reference to a private module or name of the package anywhere in a
# file (an import, an attribute, a path in text): `xla_ffi_rs._x`, `xla_ffi_rs.ops._x`.
_DOTTED = re.compile(r"\bxla_ffi_rs(?:\.[A-Za-z]\w*)*\._[A-Za-z]\w*")
# `from xla_ffi_rs[.sub] import a, _x` on one line (multi-line imports of .py
# files are read with ast below).
_FROM = re.compile(r"\bfrom\s+(xla_ffi_rs(?:\.\w+)*)\s+import\s+([^\n]*)")


def tracked_files(*suffixes: str) -> list[Path]:
    """The repository's tracked (and new, not ignored) files with these suffixes,
    outside the package and this file; a walk of the tree where git is not available."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.splitlines()
        paths = [ROOT / p for p in listed]
    except (OSError, subprocess.CalledProcessError):
        skipped = {"target", "dist", "node_modules"}
        paths = [
            p
            for p in ROOT.rglob("*")
            if not any(part.startswith(".") or part in skipped for part in p.relative_to(ROOT).parts[:-1])
        ]
    here = Path(__file__).resolve()
    return sorted(
        p for p in paths if p.suffix in suffixes and p.is_file() and not p.is_relative_to(SOURCE) and p != here
    )


def private_uses(text: str, path: Path) -> list[str]:
    """Each private reference to the package in ``text``, as ``path:line: what``:
    dotted references anywhere (code, strings, prose) and ``from`` imports of a
    private name (one-line ones anywhere, multi-line ones in Python code)."""
    found: set[tuple[int, str]] = set()

    def line_of(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    for m in _DOTTED.finditer(text):
        found.add((line_of(m.start()), m.group(0)))
    for m in _FROM.finditer(text):
        for part in m.group(2).split("#")[0].split(","):
            name = re.sub(r"^[\s(]*(\w*).*$", r"\1", part)
            if private(name):
                found.add((line_of(m.start()), f"from {m.group(1)} import {name}"))
    if path.suffix == ".py":
        try:
            tree = ast.parse(text)
        except SyntaxError:
            tree = ast.Module(body=[], type_ignores=[])
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == PACKAGE:
                found |= {(node.lineno, f"from {node.module} import {a.name}") for a in node.names if private(a.name)}
    return [f"{path.relative_to(ROOT)}:{line}: {what}" for line, what in sorted(found)]


def test_the_private_use_check_finds_each_form() -> None:
    """The check itself, on text that uses private names in each way it catches."""
    bad = textwrap.dedent(
        """\
        from xla_ffi_rs import _native
        from xla_ffi_rs import binding, _fallback as fb
        from xla_ffi_rs.ops import (
            _hidden,
        )
        import xla_ffi_rs._compat
        y = xla_ffi_rs._sharding.Layout
        ok = xla_ffi_rs.__version__, xla_ffi_rs.kepler, xla_ffi_rs.ops.kepler
        from xla_ffi_rs.ops.kepler import kepler_jnp, __doc__
        """
    )
    assert [u.split(": ", 1)[1] for u in private_uses(bad, ROOT / "x.py")] == [
        "from xla_ffi_rs import _native",
        "from xla_ffi_rs import _fallback",
        "from xla_ffi_rs.ops import _hidden",
        "xla_ffi_rs._compat",
        "xla_ffi_rs._sharding",
    ]
    # In markdown and strings the one-line forms are found too.
    assert private_uses("run: `from xla_ffi_rs import binding, _native`", ROOT / "x.md") == [
        "x.md:1: from xla_ffi_rs import _native"
    ]


def test_nothing_outside_the_package_uses_its_private_names() -> None:
    files = tracked_files(".py", ".md")
    assert any(p.name == "test_docs.py" for p in files) and any(p.name == "README.md" for p in files), files
    uses = [u for p in files for u in private_uses(p.read_text(encoding="utf-8"), p)]
    assert not uses, "private modules or names of xla_ffi_rs used outside the package:\n" + "\n".join(uses)


def package_modules() -> list[str]:
    """Every module of the package source, dotted (``xla_ffi_rs.ops.kepler``); the
    native module counts through its stub (``_native.pyi``)."""
    mods = set()
    for p in sorted([*SOURCE.rglob("*.py"), *SOURCE.rglob("*.pyi")]):
        parts = p.relative_to(SOURCE.parent).with_suffix("").parts
        mods.add(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(mods)


def test_only_compat_mentions_jax_internals() -> None:
    offenders = [
        f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
        for p in sorted(SOURCE.rglob("*.py"))
        if p.name != "_compat.py"
        for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if JAX_PRIVATE in line
    ]
    assert not offenders, f"only _compat.py may use {JAX_PRIVATE}:\n" + "\n".join(offenders)
    assert JAX_PRIVATE in (SOURCE / "_compat.py").read_text(encoding="utf-8")


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=300, check=False
    )


def test_op_modules_are_modules_and_the_functions_stay_functions() -> None:
    """In a fresh interpreter: the op modules imported by name first, then the
    package's functions of the same names checked."""
    proc = run_python(
        f"""
        import importlib, inspect, types
        import xla_ffi_rs.ops.kepler as m
        assert isinstance(m, types.ModuleType), m
        assert m.__name__ == "xla_ffi_rs.ops.kepler", m
        import xla_ffi_rs.ops.rms_norm as r, xla_ffi_rs.ops.rms_norm_inplace as ri, xla_ffi_rs.python_ops as p
        assert all(isinstance(x, types.ModuleType) for x in (r, ri, p))
        import xla_ffi_rs
        for name in {FUNCTIONS!r}:
            f = getattr(xla_ffi_rs, name)
            assert inspect.isfunction(f), (name, f)
        assert xla_ffi_rs.kepler is m.kepler and xla_ffi_rs.rms_norm is r.rms_norm
        assert xla_ffi_rs.rms_norm_inplace is ri.rms_norm_inplace and xla_ffi_rs.python_op is p.python_op
        # No module is hidden behind another object of its name in its parent.
        for name in {package_modules()!r}:
            mod = importlib.import_module(name)
            parent, _, leaf = name.rpartition(".")
            if parent:
                got = getattr(importlib.import_module(parent), leaf)
                assert got is mod, f"{{parent}}.{{leaf}} is {{got!r}}, not the module {{name}}"
        print("ok")
        """
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def local_imports(path: Path, module: str, modules: set[str]) -> set[str]:
    """The package modules ``module`` (at ``path``) imports at its top level or in
    functions: ``from xla_ffi_rs import x`` counts as an import of ``xla_ffi_rs.x``
    when that is a module, else of the package itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else [])
                )
            if base.split(".")[0] != PACKAGE:
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.add(sub if sub in modules else base)
    out.discard(module)
    return out


def test_no_import_cycle_between_the_package_modules() -> None:
    """The import graph of the modules (the package's ``__init__`` aside, which
    imports the public functions last) has no cycle, and no module but
    ``__init__`` imports names from the package's ``__init__``."""
    modules = set(package_modules())
    graph: dict[str, set[str]] = {}
    for p in sorted(SOURCE.rglob("*.py")):
        parts = p.relative_to(SOURCE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        graph[name] = local_imports(p, name, modules)
    from_root = sorted(m for m, deps in graph.items() if m != PACKAGE and PACKAGE in deps)
    assert not from_root, f"modules that import from the package's __init__ (a cycle through it): {from_root}"

    cycle = find_cycle({m: deps - {PACKAGE} for m, deps in graph.items() if m != PACKAGE})
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` (node -> the nodes it imports) as ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, set())):
            if state.get(d) == 1:
                return [*stack[stack.index(d) :], d]
            if d not in state and (found := visit(d)):
                return found
        stack.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_the_cycle_check_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"b"}}) == ["b", "b"]


# One interpreter imports jax and NumPy (which every module of the package imports
# first), then forks a child per module: each child imports that module before any
# other of the package, as a fresh interpreter would, without paying for jax's
# import 40 times. What a child prints, and its traceback, come back through a file.
IMPORT_EACH_ALONE = """
import importlib, json, os, sys, tempfile, traceback
import jax, numpy
out = {}
for name in sys.argv[1:]:
    with tempfile.TemporaryFile() as f:
        pid = os.fork()
        if pid == 0:
            os.dup2(f.fileno(), 1)
            os.dup2(f.fileno(), 2)
            code = 0
            try:
                importlib.import_module(name)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        f.seek(0)
        out[name] = [os.waitstatus_to_exitcode(status), f.read().decode(errors="replace")]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def imported_alone() -> dict[str, tuple[int, str]]:
    """For each module of the package: the exit code of an interpreter that imported
    it before any other module of the package, and what it printed."""
    modules = package_modules()
    if not hasattr(os, "fork"):  # Windows: a fresh interpreter per module
        out = {}
        for m in modules:
            proc = run_python(f"import {m}")
            out[m] = (proc.returncode, proc.stdout + proc.stderr)
        return out
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_EACH_ALONE, *modules], capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return {m: (code, text) for m, (code, text) in json.loads(proc.stdout).items()}


@pytest.mark.parametrize("module", package_modules())
def test_each_module_imports_alone(module: str, imported_alone: dict[str, tuple[int, str]]) -> None:
    code, printed = imported_alone[module]
    assert code == 0, printed
    assert printed == "", f"importing {module} printed: {printed!r}"
