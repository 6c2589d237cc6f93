"""Prints one combined table of every suite's targets and writes summary.json.

python summary.py [DIR]          one jax version's results (default
                                 $XFR_BENCH_RESULTS or results/)
python summary.py DIR DIR ...    one row per target, a value and a PASS/FAIL
                                 column per directory (run.sh passes one
                                 directory per jax version)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
ORDER = ["kepler", "accuracy", "overhead", "rms_norm", "rms_norm_tp", "threads", "alloc", "python_call", "async"]


def load(results: Path) -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text()) for p in results.glob("*.json") if p.stem != "summary"}


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


def main() -> None:
    import os

    from reporting import table  # jax import is fine here: the suites are done

    dirs = [a for a in sys.argv[1:] if a != "--markdown"]
    if len(dirs) > 1:
        compare([Path(a) for a in dirs], markdown="--markdown" in sys.argv)
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
        f"machine: {m['cpu']}, {m['cores_usable']} cores usable, ISA {','.join(m['isa'])}, THP {m['transparent_hugepage']}"
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
    (results / "summary.json").write_text(json.dumps({"machine": m, "quick": quick, "targets": rows}, indent=2))


if __name__ == "__main__":
    main()
