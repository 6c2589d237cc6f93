"""Every code block of README.md, docs/*.md and the crate and plugin READMEs runs as written,
and every relative link between them resolves (the file, and the heading after `#`).

Each ```python block runs in a fresh Python process from the repository root, with
no set-up of its own: what a reader pastes into a file is what runs (a block that
needs several devices sets XLA_FLAGS itself, a block that needs float64 enables it).
```rust blocks run as doc tests of the xla-ffi crate (crates/xla-ffi/src/lib.rs
includes the files), or of xla-ffi-pjrt for the page that uses it; this test
checks that each file with Rust blocks is included by one of them.
Blocks that are not code to run use another language: bash (commands), text
(output), toml (manifests).

A block preceded by ``<!-- docs-test: plugin -->`` needs the example plugin built
(examples/plugin): .ci/plugin.sh builds it and runs these blocks with
XFR_DOCS_PLUGIN=1 and PLUGIN_PYO3_LIB set; elsewhere they are skipped unless the
built libraries are there.

A block preceded by ``<!-- docs-test: package -->`` imports the template's package
``plugin_example`` (``pip install examples/plugin``): .ci/plugin.sh installs it
into a fresh venv and runs these blocks there with XFR_DOCS_PACKAGE=1; elsewhere
they are skipped unless the package is installed.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from process_group import NO_CPU_COLLECTIVES

ROOT = Path(__file__).resolve().parent.parent
DOC_FILES = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "crates" / "xla-ffi" / "README.md",
    ROOT / "examples" / "plugin" / "README.md",
    ROOT / "CONTRIBUTING.md",
]
# Fence languages: what each one means here.
RUN = {"python"}
# Run by rustdoc, through the includes of crates/xla-ffi/src/lib.rs (no_run: compiled
# and linked, not run; for a CUDA handler, which needs a GPU).
DOCTEST = {"rust", "rust,no_run"}
#: The crates whose lib.rs includes doc files as doc tests.
DOCTEST_CRATES = ("xla-ffi", "xla-ffi-pjrt")
NOT_RUN = {"bash", "text", "toml"}
#: A CUDA kernel, preceded by `<!-- docs-test: file PATH -->`: the file must hold it.
CUDA = {"cuda"}
FILE_MARK = "<!-- docs-test: file "
PLUGIN_MARK = "<!-- docs-test: plugin -->"
PACKAGE_MARK = "<!-- docs-test: package -->"
PLUGIN_LIB = ROOT / "examples" / "plugin" / "target" / "release" / "libxla_ffi_plugin_example.so"
FENCE = re.compile(r"^```(\S*)\s*$")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    plugin: bool
    package: bool

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a markdown file (fences at the start of a line)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j == len(lines):
            raise AssertionError(f"{path.relative_to(ROOT)}:{start + 1}: unclosed code block")
        prev = next((lines[k].strip() for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        code = "\n".join(lines[start + 1 : j]) + "\n"
        found.append(Block(path, start + 1, m.group(1), code, prev == PLUGIN_MARK, prev == PACKAGE_MARK))
        i = j + 1
    return found


ALL = [b for f in DOC_FILES for b in blocks(f)]
PYTHON = [b for b in ALL if b.lang in RUN]


def run_block(code: str, extra_path: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Runs code in a fresh interpreter from the repository root, in a clean
    environment: no XLA_FLAGS or x64 setting leaks in from the test run."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "JAX_"))}
    env.pop("PYTHONPATH", None)
    if extra_path is not None:
        env["PYTHONPATH"] = str(extra_path)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )


def test_the_doc_files_have_python_blocks() -> None:
    assert len(PYTHON) >= 12, [b.name for b in PYTHON]
    assert any(b.path.name == "README.md" and b.path.parent == ROOT for b in PYTHON)


def test_a_page_that_serializes_an_export_says_to_install_flatbuffers() -> None:
    """`Exported.serialize()` imports `flatbuffers`, which neither jax nor this
    package installs: a reader who follows a page in a fresh venv gets an
    ImportError unless the page says to install it (the test venvs have it)."""
    silent = [
        str(f.relative_to(ROOT))
        for f in DOC_FILES
        if any(".serialize()" in b.code for b in blocks(f) if b.lang in RUN)
        and "flatbuffers" not in f.read_text(encoding="utf-8")
    ]
    assert not silent, f"pages that serialize an export without naming the flatbuffers package: {silent}"


def test_every_block_names_a_known_language() -> None:
    unknown = [f"{b.name}: ```{b.lang}" for b in ALL if b.lang not in RUN | DOCTEST | NOT_RUN | CUDA]
    assert not unknown, (
        f"blocks with no or an unknown language (python, rust, rust,no_run, bash, text, toml, cuda): {unknown}"
    )


def test_every_file_with_rust_blocks_is_a_doc_test() -> None:
    included = set()
    for crate in DOCTEST_CRATES:
        src = ROOT / "crates" / crate / "src"
        lib = (src / "lib.rs").read_text(encoding="utf-8")
        included |= {(src / p).resolve() for p in re.findall(r'include_str!\("([^"]+\.md)"\)', lib)}
    with_rust = {b.path.resolve() for b in ALL if b.lang in DOCTEST}
    missing = sorted(str(p.relative_to(ROOT)) for p in with_rust - included)
    assert not missing, (
        f"Rust blocks not run by `cargo test --doc` of {DOCTEST_CRATES}: include {missing} in one's lib.rs"
    )


def test_every_cuda_block_is_in_the_file_it_names() -> None:
    """A kernel shown in the docs is one that compiles: the text of the file named
    by the mark before the block (e.g. crates/xla-ffi/cuda/scale.cu, a doc test's)."""
    cuda = [b for b in ALL if b.lang in CUDA]
    assert cuda, "docs/gpu.md shows the kernel of its CUDA handler"
    for b in cuda:
        lines = b.path.read_text(encoding="utf-8").splitlines()[: b.line - 1]
        mark = next((x.strip() for x in reversed(lines) if x.strip()), "")
        assert mark.startswith(FILE_MARK) and mark.endswith("-->"), f"{b.name}: no `{FILE_MARK}PATH -->` before it"
        path = ROOT / mark[len(FILE_MARK) : -3].strip()
        assert path.is_file(), f"{b.name}: {path} does not exist"
        assert b.code.strip() in path.read_text(encoding="utf-8"), f"{b.name}: not the text of {path.relative_to(ROOT)}"


def test_a_failing_block_fails() -> None:
    """The runner reports a block that raises (so a broken doc block fails the suite)."""
    bad = run_block("import jax\nraise ValueError('broken block')\n", timeout=120)
    assert bad.returncode != 0 and "ValueError: broken block" in bad.stderr
    assert run_block("import os\nassert 'XLA_FLAGS' not in os.environ\n", timeout=120).returncode == 0


@pytest.fixture(scope="module")
def plugin_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the example plugin's PyO3 module as `plugin_native`."""
    required = os.environ.get("XFR_DOCS_PLUGIN") == "1"
    pyo3_lib = os.environ.get("PLUGIN_PYO3_LIB")
    if not (PLUGIN_LIB.exists() and pyo3_lib and Path(pyo3_lib).exists()):
        if required:
            pytest.fail(f"XFR_DOCS_PLUGIN=1 but the plugin is not built ({PLUGIN_LIB}, PLUGIN_PYO3_LIB={pyo3_lib})")
        pytest.skip("needs examples/plugin built and PLUGIN_PYO3_LIB set (.ci/plugin.sh runs these blocks)")
    folder = tmp_path_factory.mktemp("plugin_native")
    shutil.copy(pyo3_lib, folder / "plugin_native.abi3.so")
    return folder


def need_package() -> None:
    """Skips a package block where `plugin_example` is not installed (fails under
    XFR_DOCS_PACKAGE=1)."""
    if importlib.util.find_spec("plugin_example") is None:
        if os.environ.get("XFR_DOCS_PACKAGE") == "1":
            pytest.fail(
                "XFR_DOCS_PACKAGE=1 but the package plugin_example is not installed (pip install examples/plugin)"
            )
        pytest.skip(
            "needs the template package installed (pip install examples/plugin; .ci/plugin.sh runs these blocks)"
        )


def block_id(b: Block) -> str:
    return b.name + (":plugin" if b.plugin else ":package" if b.package else "")


@pytest.mark.parametrize("block", PYTHON, ids=[block_id(b) for b in PYTHON])
def test_python_block_runs(block: Block, request: pytest.FixtureRequest) -> None:
    if block.package:
        need_package()
    if NO_CPU_COLLECTIVES is not None and "jax.distributed.initialize" in block.code:
        pytest.skip(NO_CPU_COLLECTIVES)  # a block that starts a job of several processes
    extra = request.getfixturevalue("plugin_path") if block.plugin else None
    done = run_block(block.code, extra)
    assert done.returncode == 0, (
        f"{block.name}: the block failed (exit {done.returncode})\n--- code\n{block.code}"
        f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-6000:]}"
    )


def test_making_the_template_yours_names_every_ci_only_line_a_copy_deletes() -> None:
    """The template's "Making it yours" deletes its CI-only `features` module: every
    name of it that the kept files use (src/lib.rs, the native module's stubs) must
    be named in that step, or a copy does not build or keeps stubs of functions its
    module no longer has."""
    readme = (ROOT / "examples" / "plugin" / "README.md").read_text(encoding="utf-8")
    step = readme.split("## Making it yours", 1)[1].split("\n## ", 1)[0]
    kept = [ROOT / "examples" / "plugin" / "src" / "lib.rs"]
    kept += sorted((ROOT / "examples" / "plugin" / "python").rglob("*.pyi"))
    pattern = re.compile(r"\b(?:FEATURE_[A-Z_]+|feature_[a-z_]+|features\.[A-Za-z]+|features::python::add)\b")
    missing = sorted(
        f"{f.name}: {name}"
        for f in kept
        for name in set(pattern.findall(f.read_text(encoding="utf-8")))
        if name not in step or f.name not in step
    )
    assert not missing, f"examples/plugin/README.md 'Making it yours' does not name: {missing}"


def test_making_the_template_yours_renames_the_targets_prefix() -> None:
    """Two packages made from the template keep its target names unless "Making it
    yours" says to rename them, and a process holds one handler per name: the second
    package's import fails (.ci/plugin_copies.sh installs two copies side by side)."""
    readme = (ROOT / "examples" / "plugin" / "README.md").read_text(encoding="utf-8")
    step = readme.split("## Making it yours", 1)[1].split("\n## ", 1)[0]
    sources = [p for p in sorted((ROOT / "examples" / "plugin" / "src").glob("*.rs")) if p.name != "features.rs"]
    prefixes = {m for p in sources for m in re.findall(r'target = "([A-Za-z_]\w*)\.', p.read_text(encoding="utf-8"))}
    assert prefixes, "no #[handler(target = ...)] in examples/plugin/src"
    missing = sorted(p for p in prefixes if f"prefix `{p}.`" not in step)
    assert not missing, (
        f"examples/plugin/README.md 'Making it yours' does not say to rename the targets' prefix: {missing}"
    )


def heading_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a markdown file's headings (lower case, punctuation
    but `-` and `_` dropped, spaces to `-`, `-1`, `-2` for repeats), outside code blocks."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    in_code = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        heading = re.match(r"#+\s+(.*)", line)
        if in_code or heading is None:
            continue
        slug = re.sub(r"[^\w\- ]", "", heading[1].strip().lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        anchors.add(slug if n == 0 else f"{slug}-{n}")
    return anchors


def test_every_relative_link_and_anchor_resolves() -> None:
    """A link between the docs names a file that exists and, after `#`, a heading it has."""
    dead = []
    for f in DOC_FILES:
        for link in re.findall(r"\]\(([^)\s]+)\)", f.read_text(encoding="utf-8")):
            if link.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = link.partition("#")
            target = (f.parent / path) if path else f
            if not target.exists():
                dead.append(f"{f.relative_to(ROOT)}: {link} (no such file)")
            elif anchor and target.suffix == ".md" and anchor not in heading_anchors(target):
                dead.append(f"{f.relative_to(ROOT)}: {link} (no such heading)")
    assert not dead, f"dead links: {dead}"
