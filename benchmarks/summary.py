"""Prints one combined table of every suite's targets and writes summary.json.

python summary.py [DIR]          one jax version's results (default
                                 $XFR_BENCH_RESULTS or results/)
python summary.py DIR DIR ...    one row per target, a value and a PASS/FAIL
                                 column per directory (run.sh passes one
                                 directory per jax version)
python summary.py DIR ... --write FILE ...
                                 also replaces, in each FILE, the text between
                                 `<!-- bench-table:start -->` (or
                                 `<!-- bench-table:start short -->`) and
                                 `<!-- bench-table:end -->` with the table made
                                 from DIR's results: the full table (every suite's
                                 targets, a value and a result column per jax
                                 version), or the short one (target, goal, the
                                 figure per jax version, PASS/FAIL), headed by the
                                 machine, the versions and the date of the run.
                                 run.sh does this for docs/performance.md
                                 after a full run (never after
                                 --quick, whose numbers mean nothing: results of a
                                 --quick run are refused).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
ORDER = ["kepler", "accuracy", "overhead", "rms_norm", "rms_norm_tp", "threads", "alloc", "python_call", "async"]


def load(results: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in results.glob("*.json") if p.stem != "summary"}


def compare(dirs: list[Path], markdown: bool = False) -> None:
    """One table, a value and a result column per directory (jax version); with
    `markdown`, also as a Markdown table (for the README)."""
    from reporting import fmt, table

    rows: dict[tuple[str, str], dict] = {}
    columns = ["suite", "target", "want"]
    for d in dirs:
        suites = load(d)
        if not suites:
            continue
        m = next(iter(suites.values()))["machine"]
        tag = f"jax {m['jax']}"
        columns += [tag, f"{tag} result"]
        for s in [s for s in ORDER if s in suites] + sorted(set(suites) - set(ORDER)):
            for t in suites[s].get("targets", []):
                row = rows.setdefault((s, t["target"]), {"suite": s, "target": t["target"], "want": t["want"]})
                row[tag], row[f"{tag} result"] = t["value"], t["result"]
    print("\n" + "=" * 100)
    print(table("all targets, every jax version (medians of interleaved pairs)", list(rows.values()), columns))
    if markdown:
        print("\n| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))
        for r in rows.values():
            print("| " + " | ".join(fmt(r.get(c)) for c in columns) + " |")


MARK_START = "<!-- bench-table:start"
MARK_END = "<!-- bench-table:end -->"


def _cell(v: object) -> str:
    """A figure for a Markdown table: 3 significant digits, `-` when absent."""
    if v is None:
        return "-"
    if isinstance(v, float):
        a = abs(v)
        if v != v or a == float("inf"):
            return str(v)
        if v == 0 or 1e-3 <= a < 1e4:
            return f"{v:.3g}"
        return f"{v:.2e}"
    return str(v)


def cpu_line(m: dict) -> str:
    """The CPU as the tables name it: its name, then vendor, family, model and
    stepping (results written before those were recorded have the name only)."""
    cpu = m.get("cpu", "unknown CPU")
    return f"{cpu} ({m['cpu_id']})" if m.get("cpu_id") else cpu


def _version_key(jax_version: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in jax_version.split("."))


def collect(dirs: list[Path]) -> tuple[list[dict], list[dict]]:
    """The runs (one per directory, oldest jax first: its machine, jax version, date)
    and the rows (one per target: suite, target, goal, and per jax version its value
    and result). Refuses results of a --quick run."""
    runs: list[dict] = []
    rows: dict[tuple[str, str], dict] = {}
    for d in dirs:
        suites = load(d)
        if not suites:
            raise SystemExit(f"summary.py: no results in {d}")
        quick = sorted(s for s, v in suites.items() if v.get("quick"))
        if quick:
            raise SystemExit(
                f"summary.py: {d} holds --quick results ({', '.join(quick)}); "
                "their numbers mean nothing, so no table is written from them"
            )
        names = [s for s in ORDER if s in suites] + sorted(set(suites) - set(ORDER))
        m = suites[names[0]]["machine"]
        dates = [v["machine"].get("date", "") for v in suites.values()]
        runs.append({"machine": m, "jax": m["jax"], "date": max(dates)})
        for s in names:
            for t in suites[s].get("targets", []):
                row = rows.setdefault((s, t["target"]), {"suite": s, "target": t["target"], "want": t["want"]})
                row[m["jax"]] = (t["value"], t["result"])
    runs.sort(key=lambda r: _version_key(r["jax"]))
    return runs, list(rows.values())


def markdown(runs: list[dict], rows: list[dict], short: bool) -> str:
    """The table between the markers: a heading line (machine, versions, date), then
    the short or the full table."""
    m = runs[0]["machine"]
    versions = [r["jax"] for r in runs]
    date = max(r["date"] for r in runs)[:10]
    pythons = ", ".join(f"jax {r['jax']} (Python {r['machine'].get('python', '?')})" for r in runs)
    generated = (
        "<!-- Generated by `python benchmarks/summary.py --write` from `just bench` results: "
        "edit benchmarks/summary.py, not this table. -->"
    )
    heading = (
        f"`just bench` on {date}: {cpu_line(m)}, {m.get('cores_usable', '?')} cores usable "
        f"(ISA {', '.join(m.get('isa', [])) or '?'}); {pythons}. "
        "Figures are medians of interleaved pairs; PASS/FAIL is decided on them."
    )
    lines = [generated, "", heading, ""]
    if short:
        lines.append("| target | goal | " + " | ".join(f"jax {v}" for v in versions) + " | result |")
        lines.append("|---|---|" + "---|" * (len(versions) + 1))
        for r in rows:
            results = [r.get(v, (None, "n/a"))[1] for v in versions]
            failed = [v for v, res in zip(versions, results, strict=True) if res == "FAIL"]
            if failed:
                verdict = "FAIL" + ("" if len(failed) == len(versions) else f" (jax {', '.join(failed)})")
            elif all(res == "PASS" for res in results):
                verdict = "PASS"
            else:
                verdict = "n/a"
            values = [_cell(r.get(v, (None, ""))[0]) for v in versions]
            lines.append(f"| {r['target']} | {r['want']} | " + " | ".join(values) + f" | {verdict} |")
    else:
        header = ["suite", "target", "goal"] + [c for v in versions for c in (f"jax {v}", "result")]
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for r in rows:
            cells = [r["suite"], r["target"], r["want"]]
            for v in versions:
                value, result = r.get(v, (None, "-"))
                cells += [_cell(value), result]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
        for r in runs:
            mm = r["machine"]
            lines.append(
                f"- jax {r['jax']}: Python {mm.get('python', '?')}, jaxlib {mm.get('jaxlib', '?')}, "
                f"numpy {mm.get('numpy', '?')}, {mm.get('rustc', '?')}, {mm.get('g++', '?')}; "
                f"C++ twin flags `{mm.get('cpp_flags')}`; THP {mm.get('transparent_hugepage', '?')}; "
                f"{mm.get('cores_usable', '?')} of {mm.get('cores_online', '?')} cores; run {r['date']}"
            )
    return "\n".join(lines)


def replace_tables(text: str, runs: list[dict], rows: list[dict], where: str = "the file") -> str:
    """`text` with every marked section replaced by its table; an error naming
    `where` if it has no markers or an unterminated one."""
    out, pos, found = [], 0, 0
    while (start := text.find(MARK_START, pos)) != -1:
        head_end = text.find("-->", start)
        end = text.find(MARK_END, head_end if head_end != -1 else start)
        if head_end == -1 or end == -1:
            raise SystemExit(f"summary.py: {where}: {MARK_START} ... --> without a following {MARK_END}")
        style = text[start + len(MARK_START) : head_end].strip()
        if style not in ("", "short", "full"):
            raise SystemExit(f"summary.py: {where}: unknown table style {style!r} (short or full)")
        head_end += len("-->")
        out += [text[pos:head_end], "\n", markdown(runs, rows, short=style == "short"), "\n"]
        pos, found = end, found + 1
    if not found:
        raise SystemExit(f"summary.py: {where} has no {MARK_START} --> ... {MARK_END} section")
    out.append(text[pos:])
    return "".join(out)


def write_tables(dirs: list[Path], files: list[Path]) -> None:
    if not files:
        return
    runs, rows = collect(dirs)
    for f in files:
        f.write_text(replace_tables(f.read_text(encoding="utf-8"), runs, rows, str(f)), encoding="utf-8")
        print(f"wrote the benchmark table into {f}")


def main() -> None:
    import os

    args = sys.argv[1:]
    files: list[Path] = []
    if "--write" in args:
        i = args.index("--write")
        files = [Path(a) for a in args[i + 1 :]]
        args = args[:i]
        if not files:
            raise SystemExit("summary.py: --write needs at least one file")
    dirs = [a for a in args if a != "--markdown"]
    if files:
        # Checked before anything is printed: a --quick or missing result stops here.
        collect([Path(a) for a in dirs] or [Path(os.environ.get("XFR_BENCH_RESULTS", HERE / "results"))])

    from reporting import table  # jax import is fine here: the suites are done

    if len(dirs) > 1:
        compare([Path(a) for a in dirs], markdown="--markdown" in args)
        write_tables([Path(a) for a in dirs], files)
        return
    default = os.environ.get("XFR_BENCH_RESULTS", HERE / "results")
    results = Path(dirs[0] if dirs else default)
    suites = load(results)
    names = [s for s in ORDER if s in suites] + sorted(set(suites) - set(ORDER) - {"summary"})
    if not names:
        raise SystemExit("no results")
    m = suites[names[0]]["machine"]
    print("\n" + "=" * 100)
    print(
        f"machine: {cpu_line(m)}, {m['cores_usable']} cores usable, ISA {','.join(m['isa'])}, THP {m['transparent_hugepage']}"
    )
    print(f"python {m['python']}, jax {m['jax']}, jaxlib {m['jaxlib']}, numpy {m['numpy']}, {m['rustc']}, {m['g++']}")
    print(
        f"xla_ffi_rs {m['xla_ffi_rs']} from {m['xla_ffi_rs_path']} ({suites[names[0]]['contenders']['ours']}); "
        f"C++ twin flags: {m['cpp_flags']}"
    )
    rows = []
    for s in names:
        for t in suites[s].get("targets", []):
            rows.append({"suite": s, **t})
    print(table("all targets", rows, ["suite", "target", "value", "want", "result"]))
    quick = any(suites[s].get("quick") for s in names)
    counts = {k: sum(r["result"] == k for r in rows) for k in ("PASS", "FAIL", "n/a")}
    print(
        f"\n{counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['n/a']} n/a"
        + ("  (--quick: tiny sizes, 1 repeat; the numbers mean nothing)" if quick else "")
    )
    (results / "summary.json").write_text(
        json.dumps({"machine": m, "quick": quick, "targets": rows}, indent=2), encoding="utf-8"
    )
    write_tables([results], files)


if __name__ == "__main__":
    main()
