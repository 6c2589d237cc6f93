"""The public names as help(), IDEs and type checkers see them.

* ``xla_ffi_rs.__all__`` is what the ``xla_ffi_rs`` row of docs/python-api.md's
  Modules table lists, and ``dir(xla_ffi_rs)`` shows no other public name.
* Each function of the package has an example in its docstring (help() shows it).
* Each module of that table has an ``__all__``, whose functions and classes name
  a public module as their ``__module__`` (help() and Sphinx show where users find
  them) and have real signatures.
* ``__version__`` is the installed distribution's version.
* The package ships ``py.typed`` and the native module's stub, and the stub matches
  the native module (its names, ``__all__``, each function's parameters, their
  kinds and defaults), as mypy's stubtest of the native module checks.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import re
from pathlib import Path
from typing import Any

import pytest

import xla_ffi_rs

ROOT = Path(__file__).resolve().parent.parent
API_DOC = ROOT / "docs" / "python-api.md"
INSTALLED = Path(xla_ffi_rs.__file__).resolve().parent
#: The native module, whose stub (NATIVE.pyi) is checked here: the one private module
#: this file names, since its stub is what type checkers read for it.
NATIVE = "_native"


def modules_table() -> dict[str, str]:
    """docs/python-api.md's Modules table: module -> the text of its row."""
    section = API_DOC.read_text(encoding="utf-8").split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(xla_ffi_rs[\w.]*)` \| (.*) \|$", section, re.MULTILINE)
    assert rows, f"no Modules table in {API_DOC}"
    return dict(rows)


def documented_names(row: str) -> set[str]:
    """The names a row lists: each backticked identifier, alone or called (`f(x)`)."""
    return set(re.findall(r"`([A-Za-z_]\w*)(?:\(|`)", row))


def private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def test_the_package_all_is_the_documented_list() -> None:
    listed = documented_names(modules_table()["xla_ffi_rs"])
    assert set(xla_ffi_rs.__all__) == listed, (
        f"in __all__, not in docs/python-api.md: {sorted(set(xla_ffi_rs.__all__) - listed)}; "
        f"in the docs, not in __all__: {sorted(listed - set(xla_ffi_rs.__all__))}"
    )
    assert len(xla_ffi_rs.__all__) == len(set(xla_ffi_rs.__all__))


def test_dir_of_the_package_shows_no_other_public_name() -> None:
    shown = {n for n in dir(xla_ffi_rs) if not n.startswith("_")}
    # A documented module outside __all__ (``xla_ffi_rs.examples``) becomes an
    # attribute once anything imports it: that is Python's doing, and it is public.
    modules = {m.split(".")[1] for m in modules_table() if m.count(".") == 1}
    assert shown <= set(xla_ffi_rs.__all__) | modules, (
        f"public-looking names not in __all__: {sorted(shown - set(xla_ffi_rs.__all__) - modules)}"
    )


@pytest.mark.parametrize("module", sorted(modules_table()))
def test_each_documented_module_names_its_public_api(module: str) -> None:
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None)
    assert isinstance(names, list) and names, f"{module} has no __all__"
    bad = []
    for name in names:
        obj = getattr(mod, name)  # an AttributeError names a missing one
        if inspect.isfunction(obj) or inspect.isclass(obj) or hasattr(obj, "__wrapped__"):
            home = obj.__module__
            if private(home):
                bad.append(f"{module}.{name}.__module__ == {home!r}")
            if not inspect.isclass(obj):
                params = inspect.signature(obj).parameters.values()
                kinds = {p.kind for p in params}
                if kinds == {inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD}:
                    bad.append(f"{module}.{name} has the signature (*args, **kwargs)")
    assert not bad, "\n".join(bad)


def test_each_package_function_shows_an_example_in_help() -> None:
    """help(xla_ffi_rs.f) shows a docstring with an example (test_docstrings.py runs them)."""
    functions = [
        n
        for n in xla_ffi_rs.__all__
        if callable(getattr(xla_ffi_rs, n)) and not inspect.ismodule(getattr(xla_ffi_rs, n))
    ]
    assert "kepler" in functions and "python_op" in functions, functions
    missing = [n for n in functions if ">>> " not in (getattr(xla_ffi_rs, n).__doc__ or "")]
    assert not missing, f"no example in the docstring of: {missing}"


def test_version_is_the_installed_distribution_version() -> None:
    assert xla_ffi_rs.__version__ == importlib.metadata.version("xla_ffi_rs")


def test_the_package_ships_its_type_information() -> None:
    assert (INSTALLED / "py.typed").is_file(), INSTALLED
    assert (INSTALLED / f"{NATIVE}.pyi").is_file(), INSTALLED


def stub_of(path: Path) -> tuple[list[str] | None, dict[str, ast.FunctionDef], set[str]]:
    """A stub's ``__all__`` (None without one), its functions and its variables."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    listed: list[str] | None = None
    functions: dict[str, ast.FunctionDef] = {}
    variables: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            functions[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            variables.add(node.target.id)
        elif isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]:
            listed = ast.literal_eval(node.value)
    return listed, functions, variables


def stub_parameters(fn: ast.FunctionDef) -> list[tuple[str, Any, object]]:
    """(name, kind, default or inspect.Parameter.empty) per parameter of a stub function."""
    a = fn.args
    positional = [*a.posonlyargs, *a.args]
    defaults = [inspect.Parameter.empty] * (len(positional) - len(a.defaults)) + [
        ast.literal_eval(d) for d in a.defaults
    ]
    out: list[tuple[str, Any, object]] = [
        (
            p.arg,
            inspect.Parameter.POSITIONAL_ONLY if i < len(a.posonlyargs) else inspect.Parameter.POSITIONAL_OR_KEYWORD,
            d,
        )
        for i, (p, d) in enumerate(zip(positional, defaults, strict=True))
    ]
    if a.vararg:
        out.append((a.vararg.arg, inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.empty))
    for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        out.append(
            (p.arg, inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.empty if d is None else ast.literal_eval(d))
        )
    if a.kwarg:
        out.append((a.kwarg.arg, inspect.Parameter.VAR_KEYWORD, inspect.Parameter.empty))
    return out


def stub_mismatches(stub: Path, module: Any) -> list[str]:
    listed, functions, variables = stub_of(stub)
    runtime = list(module.__all__)
    problems = []
    if listed is None or sorted(listed) != sorted(runtime):
        problems.append(f"__all__: stub {sorted(listed) if listed is not None else None}, module {sorted(runtime)}")
    declared = set(functions) | variables
    if declared != set(runtime):
        problems.append(
            f"names: only in the stub {sorted(declared - set(runtime))}, only in the module {sorted(set(runtime) - declared)}"
        )
    for name, fn in sorted(functions.items()):
        if not hasattr(module, name):
            continue
        got = [(p.name, p.kind, p.default) for p in inspect.signature(getattr(module, name)).parameters.values()]
        want = stub_parameters(fn)
        if got != want:
            problems.append(f"{name}: stub {want}, module {got}")
    return problems


def test_the_native_stub_matches_the_native_module() -> None:
    module = importlib.import_module(f"{xla_ffi_rs.__name__}.{NATIVE}")
    problems = stub_mismatches(INSTALLED / f"{NATIVE}.pyi", module)
    assert not problems, f"{NATIVE}.pyi does not match the native module:\n" + "\n".join(problems)


def test_the_stub_check_finds_each_mismatch(tmp_path: Path) -> None:
    """The check itself, on a module and stubs that differ from it in each way."""
    import types

    module = types.ModuleType("fake")
    exec("def f(a, b=1, /, c=2, *, d=None): ...\nversion = '1'\n__all__ = ['f', 'version']", module.__dict__)

    def check(text: str) -> list[str]:
        (tmp_path / "s.pyi").write_text(text, encoding="utf-8")
        return stub_mismatches(tmp_path / "s.pyi", module)

    good = "__all__ = ['f', 'version']\nversion: str\ndef f(a: int, b: int = 1, /, c: int = 2, *, d: int | None = None) -> None: ...\n"
    assert check(good) == []
    assert [p.split(":")[0] for p in check(good.replace("__all__ = ['f', 'version']\n", ""))] == ["__all__"]
    assert [p.split(":")[0] for p in check(good.replace("version: str\n", ""))] == ["names"]
    mutations = [
        ("b: int = 1", "b: int = 3"),  # another default
        ("b: int = 1", "b: int"),  # no default
        ("b: int = 1", "bb: int = 1"),  # another name
        ("/, c: int = 2", "c: int = 2, /"),  # positional-only
        ("*, d", "d"),  # not keyword-only
    ]
    for old, new in mutations:
        assert old in good
        assert [p.split(":")[0] for p in check(good.replace(old, new))] == ["f"], new
