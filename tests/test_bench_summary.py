"""The performance tables of README.md and docs/performance.md are generated from
`just bench` results (benchmarks/summary.py --write), not typed by hand: fake
result JSON in, the marked sections replaced, everything else kept."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"


def _summary():
    spec = importlib.util.spec_from_file_location("bench_summary", BENCH / "summary.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


summary = _summary()


def _machine(jax: str, python: str, date: str) -> dict:
    return {
        "cpu": "Fake EPYC 9999 64-Core Processor",
        "cpu_id": "AuthenticAMD family 23 model 49 stepping 0",
        "isa": ["avx", "avx2", "fma"],
        "cores_online": 2,
        "cores_usable": 2,
        "transparent_hugepage": "always [madvise] never",
        "python": python,
        "jax": jax,
        "jaxlib": jax,
        "numpy": "2.0.0",
        "rustc": "rustc 1.90.0",
        "g++": "g++ 12.2.0",
        "cpp_flags": "-mavx2 -mfma",
        "date": date,
    }


def _write_results(
    d: Path, jax: str, python: str, figures: dict[tuple[str, str], tuple[float, str, str]], quick: bool = False
) -> Path:
    """One results directory as run.sh leaves it: a JSON file per suite."""
    d.mkdir(parents=True)
    suites: dict[str, list] = {}
    for (suite, name), (value, want, result) in figures.items():
        suites.setdefault(suite, []).append({"target": name, "value": value, "want": want, "result": result})
    for i, (suite, targets) in enumerate(suites.items()):
        date = f"2026-11-2{i}T08:00:00+00:00"
        out = {"suite": suite, "quick": quick, "machine": _machine(jax, python, date), "targets": targets}
        (d / f"{suite}.json").write_text(json.dumps(out))
    # What the single-directory summary writes beside them: never read as a suite.
    (d / "summary.json").write_text(json.dumps({"machine": {}, "targets": []}))
    return d


CALL = ("overhead", "in-graph call at N = 1, ours / C++ ffi.h twin")
PYOP = ("python_call", "nonlinear_op / jaxbind per call at N = 1")


@pytest.fixture
def results(tmp_path: Path) -> list[Path]:
    new = _write_results(
        tmp_path / "jax-0.12.0.1",
        "0.12.0.1",
        "3.12.1",
        {CALL: (0.987, "<= 1", "PASS"), PYOP: (1.24, "<= 0.5", "FAIL")},
    )
    old = _write_results(
        tmp_path / "jax-0.10.2",
        "0.10.2",
        "3.11.7",
        {CALL: (1.0432, "<= 1", "FAIL"), PYOP: (0.25, "<= 0.5", "PASS")},
    )
    # Newest first on purpose: the tables put the oldest jax first.
    return [new, old]


DOC = """# Title

Text before.

<!-- bench-table:start short -->
| old | hand-typed |
|---|---|
| 1.39 | 1.36 |
<!-- bench-table:end -->

Between.

<!-- bench-table:start -->
stale full table
<!-- bench-table:end -->

Text after.
"""


def _section(text: str, start: str) -> str:
    i = text.index(start) + len(start)
    return text[i : text.index(summary.MARK_END, i)]


def test_write_replaces_only_the_marked_sections(results: list[Path], tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    summary.write_tables(results, [doc])
    text = doc.read_text()
    # Everything outside the markers is kept, the markers too; the old figures are gone.
    for kept in ("# Title\n\nText before.\n\n", "\n\nBetween.\n\n", "\n\nText after.\n"):
        assert kept in text
    assert text.count("<!-- bench-table:start short -->") == 1
    assert text.count("<!-- bench-table:start -->") == 1
    assert text.count(summary.MARK_END) == 2
    assert "hand-typed" not in text and "stale full table" not in text

    short = _section(text, "<!-- bench-table:start short -->")
    # Machine, cores, versions (oldest first) and the date of the latest suite.
    assert "Fake EPYC 9999 64-Core Processor (AuthenticAMD family 23 model 49 stepping 0), 2 cores usable" in short
    assert "jax 0.10.2 (Python 3.11.7), jax 0.12.0.1 (Python 3.12.1)" in short
    assert "on 2026-11-21:" in short
    assert "| target | goal | jax 0.10.2 | jax 0.12.0.1 | result |" in short
    # A figure per version, and PASS only when every version passes.
    assert "| in-graph call at N = 1, ours / C++ ffi.h twin | <= 1 | 1.04 | 0.987 | FAIL (jax 0.10.2) |" in short
    assert "| nonlinear_op / jaxbind per call at N = 1 | <= 0.5 | 0.25 | 1.24 | FAIL (jax 0.12.0.1) |" in short

    full = _section(text, "<!-- bench-table:start -->")
    assert "| suite | target | goal | jax 0.10.2 | result | jax 0.12.0.1 | result |" in full
    assert "| overhead | in-graph call at N = 1, ours / C++ ffi.h twin | <= 1 | 1.04 | FAIL | 0.987 | PASS |" in full
    assert "| python_call | nonlinear_op / jaxbind per call at N = 1 | <= 0.5 | 0.25 | PASS | 1.24 | FAIL |" in full
    assert "- jax 0.10.2: Python 3.11.7, jaxlib 0.10.2" in full
    assert "C++ twin flags `-mavx2 -mfma`" in full

    # Regenerating from the same results changes nothing.
    summary.write_tables(results, [doc])
    assert doc.read_text() == text


def test_a_version_passing_everywhere_says_pass(tmp_path: Path) -> None:
    d = _write_results(tmp_path / "r", "0.12.0.1", "3.12.1", {CALL: (0.9, "<= 1", "PASS")})
    runs, rows = summary.collect([d])
    text = summary.replace_tables(DOC, runs, rows)
    assert "| in-graph call at N = 1, ours / C++ ffi.h twin | <= 1 | 0.9 | PASS |" in text


def test_quick_results_are_refused(tmp_path: Path) -> None:
    d = _write_results(tmp_path / "q", "0.12.0.1", "3.12.1", {CALL: (0.9, "<= 1", "PASS")}, quick=True)
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    with pytest.raises(SystemExit, match=r"--quick results \(overhead\)"):
        summary.write_tables([d], [doc])
    assert doc.read_text() == DOC


def test_a_file_without_markers_is_an_error(results: list[Path], tmp_path: Path) -> None:
    doc = tmp_path / "plain.md"
    doc.write_text("# no table here\n")
    with pytest.raises(SystemExit, match=r"plain\.md has no <!-- bench-table:start"):
        summary.write_tables(results, [doc])
    unterminated = tmp_path / "open.md"
    unterminated.write_text("<!-- bench-table:start -->\nno end\n")
    with pytest.raises(SystemExit, match=r"open\.md: <!-- bench-table:start \.\.\. --> without a following"):
        summary.write_tables(results, [unterminated])
    styled = tmp_path / "styled.md"
    styled.write_text("<!-- bench-table:start wide -->\n<!-- bench-table:end -->\n")
    with pytest.raises(SystemExit, match=r"unknown table style 'wide'"):
        summary.write_tables(results, [styled])


def test_the_command_line_writes_the_files(results: list[Path], tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(DOC)
    out = subprocess.run(
        [sys.executable, str(BENCH / "summary.py"), *map(str, results), "--write", str(doc)],
        capture_output=True,
        text=True,
        check=False,
        cwd=BENCH,
    )
    assert out.returncode == 0, out.stderr
    assert f"wrote the benchmark table into {doc}" in out.stdout
    assert "| in-graph call at N = 1, ours / C++ ffi.h twin | <= 1 | 1.04 | 0.987 | FAIL (jax 0.10.2) |" in (
        doc.read_text()
    )


def test_the_performance_doc_has_the_table_and_the_readme_none() -> None:
    """The full generated table lives in docs/performance.md; the README quotes
    headline figures only and points there."""
    readme = (ROOT / "README.md").read_text()
    assert summary.MARK_START not in readme and "docs/performance.md" in readme
    perf = (ROOT / "docs" / "performance.md").read_text()
    assert perf.count("<!-- bench-table:start -->") == 1
    assert perf.count(summary.MARK_END) == 1


def test_run_sh_regenerates_the_tables_after_a_full_run() -> None:
    run = (BENCH / "run.sh").read_text()
    assert 'summary.py "${dirs[@]}" --write "$root/docs/performance.md"' in run
    assert '*" --quick "*)' in run


def test_the_readme_headline_figures_are_from_the_tables_run() -> None:
    """The README's hand-quoted headline figures name the date of their run; a new
    table (benchmarks/run.sh rewrites it) fails this until the README quotes it too."""
    readme = (ROOT / "README.md").read_text()
    perf = (ROOT / "docs" / "performance.md").read_text()
    table = re.search(r"`just bench` on (\d{4}-\d{2}-\d{2}):", perf)
    headline = re.search(r"Headline figures of `just bench` \((\d{4}-\d{2}-\d{2}),", readme)
    assert table and headline, "the performance table's date or the README's headline date is missing"
    assert headline[1] == table[1], (
        f"README.md quotes the run of {headline[1]}, docs/performance.md's table is of {table[1]}: "
        "update the README's headline figures from the table"
    )
