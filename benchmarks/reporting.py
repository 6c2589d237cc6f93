"""Reporting for the benchmark suites: `report` prints the tables and targets and
writes results/<suite>.json with the machine, versions, rows and PASS/FAIL
targets; `target` makes one PASS/FAIL target."""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

from common import CPP_LIB, QUICK, RESULTS


def _cmd(args: list[str]) -> str:
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=20, check=False)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except Exception:
        return "unknown"


def cpu_id() -> tuple[str, str]:
    """The CPU's name and its identity (vendor, family, model, stepping), so that
    figures from different runs can be compared: /proc/cpuinfo on Linux, sysctl on
    macOS, `platform.processor()` elsewhere (Windows names family and model there)."""
    fields: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if not key.strip() and fields:
                break  # the first processor's block only
            fields.setdefault(key.strip(), value.strip())
    if "model name" in fields:
        ident = " ".join(
            f"{label} {fields[key]}"
            for label, key in (("family", "cpu family"), ("model", "model"), ("stepping", "stepping"))
            if key in fields
        )
        return fields["model name"], f"{fields.get('vendor_id', '?')} {ident}"
    if "CPU implementer" in fields:  # Linux on Arm
        ident = f"implementer {fields['CPU implementer']} part {fields.get('CPU part', '?')}"
        return platform.machine(), ident
    if sys.platform == "darwin":
        brand = _cmd(["sysctl", "-n", "machdep.cpu.brand_string"])
        family = _cmd(["sysctl", "-n", "machdep.cpu.family"])
        model = _cmd(["sysctl", "-n", "machdep.cpu.model"])
        return brand, f"family {family} model {model} ({platform.machine()})"
    return platform.processor() or platform.machine() or "unknown", platform.machine() or "unknown"


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu, ident = cpu_id()
    flags: set[str] = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    import jaxlib

    try:
        import xla_ffi_rs

        ours_version = getattr(xla_ffi_rs, "__version__", "?")
        ours_path = str(Path(xla_ffi_rs.__file__).parent)
    except Exception as exc:
        ours_version, ours_path = f"import failed: {exc}", ""
    thp = "unknown"
    with contextlib.suppress(OSError):
        thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
    cpp_flags = CPP_LIB.parent / "flags.txt"
    env_keys = ("XLA_FLAGS", "PJRT_NPROC", "NPROC", "GLIBC_TUNABLES", "OMP_NUM_THREADS", "PYTHONPATH")
    return {
        "cpu": cpu,
        "cpu_id": ident,
        "isa": sorted(f for f in flags if f in {"avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl"}),
        "cores_online": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)),
        "kernel": platform.release(),
        "transparent_hugepage": thp,
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "numpy": np.__version__,
        "xla_ffi_rs": ours_version,
        "xla_ffi_rs_path": ours_path,
        "rustc": _cmd(["rustc", "--version"]),
        "g++": _cmd([os.environ.get("CXX", "g++"), "--version"]),
        "cpp_flags": cpp_flags.read_text().strip() if cpp_flags.exists() else None,
        "env": {k: os.environ[k] for k in env_keys if k in os.environ}
        | {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")},
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def target(name: str, value: float | None, op: str, threshold: float, unit: str = "") -> dict[str, Any]:
    """A PASS/FAIL target: `value op threshold` with op in <=, >=."""
    if value is None or not np.isfinite(value):
        ok = None
    else:
        ok = bool(value <= threshold) if op == "<=" else bool(value >= threshold)
    return {
        "target": name,
        "value": None if value is None else float(value),
        "want": f"{op} {threshold:g}{unit}",
        "result": "n/a" if ok is None else ("PASS" if ok else "FAIL"),
    }


def fmt(v: Any, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if v == 0 or not np.isfinite(v):
            return str(v)
        a = abs(v)
        if a >= 1e4 or a < 1e-3:
            return f"{v:.2e}"
        return f"{v:.{digits}g}"
    return str(v)


def table(title: str, rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    """A plain-text table."""
    if not rows:
        return f"\n== {title} ==\n(no rows)"
    columns = columns or list(dict.fromkeys(k for r in rows for k in r))
    cells = [[fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = [f"\n== {title} ==", "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=False))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=False)) for row in cells]
    return "\n".join(lines)


def report(
    suite: str,
    tables: dict[str, list[dict[str, Any]]],
    targets: list[dict[str, Any]] | None = None,
    notes: list[str] | None = None,
    extra: dict[str, Any] | None = None,
) -> None:
    """Prints the tables and targets and writes results/<suite>.json."""
    for title, rows in tables.items():
        print(table(f"{suite}: {title}", rows))
    if targets:
        print(table(f"{suite}: targets", targets, ["target", "value", "want", "result"]))
    for n in notes or []:
        print(f"note: {n}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = {
        "suite": suite,
        "quick": QUICK,
        "machine": machine(),
        "contenders": {"ours": "xla_ffi_rs public API", "cpp": CPP_LIB.exists()},
        "argv": sys.argv,
        "tables": tables,
        "targets": targets or [],
        "notes": notes or [],
        **(extra or {}),
    }
    (RESULTS / f"{suite}.json").write_text(json.dumps(out, indent=2, default=str))
