"""Shared by the benchmark suites (each suite runs in its own process).

* `measure`: warm-up (compile + one run), then repeats of `number` calls, each
  call followed by `block_until_ready`; reports best and median seconds per call.
* `ours()`: our operations, through the public `xla_ffi_rs` API when it is there,
  otherwise through raw `jax.ffi.ffi_call` on targets registered from
  `xla_ffi_rs._native` (with the same differentiation rules).
* `cpp()`: the C++ ffi.h twin (benchmarks/cpp), registered as `bench_cpp.*`.
* `report`: prints a table and writes results/<suite>.json with the machine,
  versions, rows and PASS/FAIL targets.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

HERE = Path(__file__).resolve().parent
RESULTS = Path(os.environ.get("XFR_BENCH_RESULTS", HERE / "results"))
CPP_LIB = Path(os.environ.get("XFR_BENCH_CPP_LIB", HERE / "cpp" / "build" / "libbench_ffi.so"))
QUICK = "--quick" in sys.argv


# ---------------------------------------------------------------------------
# Timing


def measure(
    fn: Callable[..., Any],
    *args: Any,
    budget: float = 0.4,
    min_repeat: int = 3,
    max_repeat: int = 200,
    batch: float = 2e-3,
) -> dict[str, float]:
    """Seconds per call of `fn(*args)` (each call blocked on): best and median.

    Calls are grouped in batches of `number` calls lasting about `batch` seconds;
    `repeat` batches fill about `budget` seconds (within [min_repeat, max_repeat]).
    `--quick`: one batch of one call.
    """
    jax.block_until_ready(fn(*args))  # compile
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    one = max(time.perf_counter() - t0, 1e-7)
    if QUICK:
        number, repeat = 1, 1
    else:
        number = max(1, int(batch / one))
        repeat = int(min(max_repeat, max(min_repeat, budget / (one * number))))
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            jax.block_until_ready(fn(*args))
        times.append((time.perf_counter() - t0) / number)
    return {"best": min(times), "median": statistics.median(times), "repeat": repeat, "number": number}


def measure_chain(step: Callable[[Any], Any], x: Any, *, repeat: int) -> tuple[dict[str, float], Any]:
    """Times `x = step(x)` (for donated inputs: each call consumes the last result)."""
    x = jax.block_until_ready(step(x))  # compile
    x = jax.block_until_ready(step(x))
    times = []
    for _ in range(1 if QUICK else repeat):
        t0 = time.perf_counter()
        x = jax.block_until_ready(step(x))
        times.append(time.perf_counter() - t0)
    return {"best": min(times), "median": statistics.median(times), "repeat": len(times), "number": 1}, x


def run_child(script: str, env: dict[str, str]) -> dict[str, Any] | None:
    """Runs `script --child` (plus --quick in quick mode) with `env` added, and returns
    the JSON of its last `RESULT {...}` line; None (after printing its output) if it
    failed."""
    proc = subprocess.run(
        [sys.executable, script, "--child", *(["--quick"] if QUICK else [])],
        env={**os.environ, **env}, capture_output=True, text=True, check=False,
    )
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not line:
        print(proc.stdout[-2000:], proc.stderr[-4000:], file=sys.stderr)
        return None
    return json.loads(line[-1][len("RESULT "):])


def minor_faults() -> int:
    """Minor page faults of this process so far."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


# ---------------------------------------------------------------------------
# Contenders


def _kepler_jvp_rule(call: Callable[..., Any]) -> Callable[..., Any]:
    """`call(m, e) -> (sinE, cosE)` with implicit differentiation of E - e sin E = M."""

    @jax.custom_jvp
    def kepler(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
        return call(m, e)

    @kepler.defjvp
    def _jvp(primals: Any, tangents: Any) -> Any:
        (m, e), (dm, de) = primals, tangents
        s, c = call(m, e)
        d_e = (dm + s * de) / (1 - e * c)
        return (s, c), (c * d_e, -s * d_e)

    return kepler


def kepler_raw(target: str) -> Callable[..., Any]:
    """The raw target: (M, e) -> (sin E, cos E)."""

    def call(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
        out = jax.ShapeDtypeStruct(m.shape, m.dtype)
        s, c = jax.ffi.ffi_call(target, (out, out), vmap_method="broadcast_all")(m, e)
        return s, c

    return call


def _inv_dtype(dtype: Any) -> Any:
    return jnp.float64 if jnp.dtype(dtype) == jnp.float64 else jnp.float32


def rms_fwd_raw(target: str, alias: bool = False) -> Callable[..., Any]:
    """The raw forward target (x, w) -> (y, inv_rms), weight over the trailing axes;
    with `alias`, y is written over x (`input_output_aliases={0: 0}`; donate x)."""

    def call(x: jax.Array, w: jax.Array, eps: float = 1e-5) -> tuple[jax.Array, jax.Array]:
        ydt = jnp.result_type(x, w)
        lead = x.shape[: x.ndim - w.ndim]
        outs = (jax.ShapeDtypeStruct(x.shape, ydt), jax.ShapeDtypeStruct(lead, _inv_dtype(ydt)))
        kw = {"input_output_aliases": {0: 0}} if alias else {}
        y, inv = jax.ffi.ffi_call(target, outs, **kw)(x, w, eps=float(eps))
        return y, inv

    return call


def rms_norm_vjp(fwd_target: str, bwd_target: str) -> Callable[..., Any]:
    """rms_norm with grad through the backward target (custom_vjp)."""
    fwd = rms_fwd_raw(fwd_target)

    @jax.custom_vjp
    def rms_norm(x: jax.Array, w: jax.Array) -> jax.Array:
        return fwd(x, w)[0]

    def f(x: jax.Array, w: jax.Array) -> Any:
        y, inv = fwd(x, w)
        return y, (x, w, inv)

    def b(res: Any, dy: jax.Array) -> Any:
        x, w, inv = res
        outs = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(w.shape, w.dtype))
        dx, dw = jax.ffi.ffi_call(bwd_target, outs)(dy, x, w, inv)
        return dx, dw

    rms_norm.defvjp(f, b)
    return rms_norm


_OURS: SimpleNamespace | None = None


def _load_native() -> Any:
    """`xla_ffi_rs._native`, even when the package's __init__ fails to import."""
    try:
        from xla_ffi_rs import _native

        return _native
    except Exception:  # noqa: BLE001
        import importlib.machinery
        import importlib.util

        for entry in sys.path:
            for so in sorted(Path(entry or ".").glob("xla_ffi_rs/_native*.so")):
                loader = importlib.machinery.ExtensionFileLoader("xla_ffi_rs._native", str(so))
                spec = importlib.util.spec_from_file_location("xla_ffi_rs._native", so, loader=loader)
                mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
                loader.exec_module(mod)
                return mod
        raise


def ours() -> SimpleNamespace:
    """Our operations: `.kepler(M, e)`, `.rms_norm(x, w)` (differentiable),
    `.rms_fwd(x, w)` / `.rms_fwd_alias(x, w)` (raw targets), and `.api` saying how."""
    global _OURS
    if _OURS is not None:
        return _OURS
    try:
        import xla_ffi_rs as xr

        api_kepler = getattr(xr, "kepler", None)
        api_rms = getattr(xr, "rms_norm", None)
    except Exception:  # noqa: BLE001 - the package may be half written
        xr, api_kepler, api_rms = None, None, None
    if api_kepler is None or api_rms is None:
        # Register the native targets ourselves (skip dict-valued bundles).
        for name, capsule in _load_native().targets("cpu").items():
            if not isinstance(capsule, dict):
                try:
                    jax.ffi.register_ffi_target(name, capsule, platform="cpu")
                except Exception as exc:  # noqa: BLE001 - already registered by the package
                    print(f"note: registering {name}: {exc}", file=sys.stderr)
    kepler = api_kepler or _kepler_jvp_rule(kepler_raw("xla_ffi_rs.kepler"))
    rms_norm = (lambda x, w: api_rms(x, w, eps=1e-5)) if api_rms else rms_norm_vjp(
        "xla_ffi_rs.rms_norm_fwd", "xla_ffi_rs.rms_norm_bwd"
    )
    _OURS = SimpleNamespace(
        kepler=kepler,
        rms_norm=rms_norm,
        rms_fwd=rms_fwd_raw("xla_ffi_rs.rms_norm_fwd"),
        rms_fwd_alias=rms_fwd_raw("xla_ffi_rs.rms_norm_fwd", alias=True),
        api=("public API" if api_kepler else "raw ffi_call") + " (kepler), "
        + ("public API" if api_rms else "raw ffi_call") + " (rms_norm)",
    )
    return _OURS


_CPP: SimpleNamespace | None | bool = False


def cpp() -> SimpleNamespace | None:
    """The C++ ffi.h twin, or None if benchmarks/cpp/build.sh has not built it."""
    global _CPP
    if _CPP is not False:
        return _CPP  # type: ignore[return-value]
    if not CPP_LIB.exists():
        print(f"note: {CPP_LIB} not built; the C++ contender is skipped", file=sys.stderr)
        _CPP = None
        return None
    lib = ctypes.cdll.LoadLibrary(str(CPP_LIB))
    for sym, name in [
        ("BenchKepler", "bench_cpp.kepler"),
        ("BenchRmsNormFwd", "bench_cpp.rms_norm_fwd"),
        ("BenchRmsNormBwd", "bench_cpp.rms_norm_bwd"),
        ("BenchNumThreads", "bench_cpp.num_threads"),
    ]:
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, sym)), platform="cpu")
    _CPP = SimpleNamespace(
        kepler=_kepler_jvp_rule(kepler_raw("bench_cpp.kepler")),
        rms_norm=rms_norm_vjp("bench_cpp.rms_norm_fwd", "bench_cpp.rms_norm_bwd"),
        rms_fwd=rms_fwd_raw("bench_cpp.rms_norm_fwd"),
        rms_fwd_alias=rms_fwd_raw("bench_cpp.rms_norm_fwd", alias=True),
    )
    return _CPP


def xla_pool_threads() -> int | None:
    """Threads in XLA's intra-op pool as an FFI handler sees them (needs the C++ lib)."""
    if cpp() is None:
        return None
    call = jax.ffi.ffi_call("bench_cpp.num_threads", jax.ShapeDtypeStruct((), jnp.int32))
    return int(jax.jit(call)())


# ---------------------------------------------------------------------------
# Inputs (the same for every contender)


def kepler_inputs(n: int, dtype: Any, emax: float, seed: int = 0) -> tuple[jax.Array, jax.Array]:
    """M uniform in [0, 2 pi), e uniform in [0, emax)."""
    rng = np.random.default_rng([seed, n, int(emax * 1000), np.dtype(dtype).itemsize])
    m = rng.uniform(0.0, 2 * np.pi, n).astype(dtype)
    e = rng.uniform(0.0, emax, n).astype(dtype)
    return jnp.asarray(m), jnp.asarray(e)


# ---------------------------------------------------------------------------
# Machine info and reporting


def _cmd(args: list[str]) -> str:
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=20)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except Exception:  # noqa: BLE001
        return "unknown"


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    cpu = "unknown"
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and cpu == "unknown":
                cpu = line.split(":", 1)[1].strip()
            if line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    import jaxlib

    try:
        import xla_ffi_rs

        ours_version = getattr(xla_ffi_rs, "__version__", "?")
        ours_path = str(Path(xla_ffi_rs.__file__).parent)
    except Exception as exc:  # noqa: BLE001
        ours_version, ours_path = f"import failed: {exc}", ""
    thp = "unknown"
    try:
        thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
    except OSError:
        pass
    cpp_flags = (CPP_LIB.parent / "flags.txt")
    env_keys = ("XLA_FLAGS", "PJRT_NPROC", "NPROC", "GLIBC_TUNABLES", "OMP_NUM_THREADS", "PYTHONPATH")
    return {
        "cpu": cpu,
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
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
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
    lines = [f"\n== {title} ==", "  ".join(c.ljust(w) for c, w in zip(columns, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in cells]
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
        "contenders": {"ours": ours().api, "cpp": CPP_LIB.exists()},
        "argv": sys.argv,
        "tables": tables,
        "targets": targets or [],
        "notes": notes or [],
        **(extra or {}),
    }
    (RESULTS / f"{suite}.json").write_text(json.dumps(out, indent=2, default=str))
