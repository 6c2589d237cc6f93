#!/usr/bin/env python3
"""GPU benchmark of the xla_ffi_rs CUDA handlers (not a test).

* rms_norm fwd and bwd at x (8192, 4096), weight (4096,), bf16 and f32: achieved
  GB/s (bytes that must move: fwd reads x and w, writes y and inv_rms; bwd reads dy,
  x and w, writes dx and dweight) against a copy's traffic (``v + 1.0`` on f32 of
  x's size, read and written) timed the same way in the same run, and against the
  jnp reference under jit.
* kepler at 1e7 elements, f32 and f64: elements/s against a pure-jnp solver under jit
  (Newton iterations from E0 = M + e sin M, a fixed count).

Timing: each figure is the median over 15 rounds (7 for the other shapes and the
curve) of a batch of 20 calls of a program dispatched back to back and waited for
once, ours and the baseline in interleaved batches; "vs jnp" is the median of the
per-round ratios. rms_norm and the copy are timed two ways:

* in one program, the primary figures: one jitted program chains 10 calls
  (``--chain``), each call's output the next call's input (backward: dx is the next
  dy), with an optimization barrier between calls, so that XLA neither fuses jnp's
  calls together nor shares work between them, and every call's dweight returned,
  so none is dead code; its time divided by 10. A model runs rms_norm so, inside
  one big program with no dispatch per call. ``--quick`` asserts from the compiled
  HLO that the chain holds 10 times one call's custom calls, fusions and reduces.
* dispatched (``dispatched_`` in the JSON, "disp" in the table): one program per
  call. A batch cannot go faster than the host dispatches programs: on the H200
  machine 55-70 us per call (Kepler at 1e6 and XLA's sin + cos both took it), so
  the bf16 forward at 8192x4096 (the kernel alone 46 us) measured the dispatch.

Kepler is timed dispatched only. ``benchmarks/gpu_kernels.cu`` times the kernels
alone with CUDA events.

    python benchmarks/gpu_bench.py --out gpu_bench.json   # on a machine with a GPU

* the curve: rms_norm fwd and bwd, bf16 and f32, at 2^27 elements for rows of 256
  to 65,536 columns (and 4,098 and 65,538, which 16-byte packs do not divide in
  either dtype: the unpacked kernels), each as a fraction of the copy and against jnp,
  in one program and dispatched.

Targets: fwd and bwd >= 85% of copy bandwidth at 8192x4096, both faster than jnp;
kepler >= 3x jnp. Prints a table and writes JSON (``--out``, default
benchmarks/results/gpu_bench.json, beside the other suites' results; not committed).
``--device cpu --quick`` runs every line on small arrays on the CPU: a check that
the script works before it is taken to a GPU, no figure.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)
import xla_ffi_rs as xr  # noqa: E402


def _batch(fn, args, reps):
    """Seconds per call of `reps` calls dispatched back to back, waited for once: the
    GPU's time per call when it exceeds the host's dispatch cost (which a single
    timed call would add in full)."""
    jax.block_until_ready(fn(*args))
    t = time.perf_counter()
    outs = [fn(*args) for _ in range(reps)]
    jax.block_until_ready(outs)
    return (time.perf_counter() - t) / reps


def _rounds(fns: Sequence[Callable[..., Any]], args: tuple[Any, ...], rounds: int, reps: int) -> np.ndarray:
    """Seconds per call of each of `fns` in each round, after 3 warm-up calls each,
    timed in interleaved batches (fns[0], fns[1], ..., fns[0], ...): (len(fns), rounds)."""
    for f in fns:
        for _ in range(3):
            jax.block_until_ready(f(*args))
    return np.array([[_batch(f, args, reps) for f in fns] for _ in range(rounds)]).T


def bench_pair(fn, ref, args, rounds=15, reps=20):
    """Median seconds per call of `fn` and `ref` and the median of their per-round
    ratios, timed in interleaved batches (fn, ref, fn, ref, ...)."""
    t, tr = _rounds((fn, ref), args, rounds, reps)
    return float(np.median(t)), float(np.median(tr)), float(np.median(tr / t))


def chained(step: Callable[..., Any], k: int) -> Callable[..., Any]:
    """One jitted program of `k` calls of `step`: each call's first output is the next
    call's first argument, and all arguments pass an optimization barrier between
    calls, so XLA can neither fuse calls together nor share work between them; the
    other outputs of every call are returned too (live, not dead code)."""

    def run(carry: Any, *rest: Any) -> tuple[Any, list[tuple[Any, ...]]]:
        extras = []
        for i in range(k):
            if i:
                carry, *rest = jax.lax.optimization_barrier((carry, *rest))
            out = step(carry, *rest)
            carry, extra = (out[0], tuple(out[1:])) if isinstance(out, tuple) else (out, ())
            extras.append(extra)
        return carry, extras

    return jax.jit(run)


class Timing(NamedTuple):
    """Seconds per call of ours and of the reference and the median per-round ratio
    (reference / ours): in one program of chained calls (divided by their count), and
    in batches of calls dispatched one program each (`dispatched_`)."""

    s: float
    ref_s: float
    ratio: float
    dispatched_s: float
    dispatched_ref_s: float
    dispatched_ratio: float


def time_op(fn: Callable[..., Any], ref: Callable[..., Any], args: tuple[Any, ...], k: int, rounds: int = 15) -> Timing:
    """`bench_pair` of `fn` against `ref` chained `k` times in one program, then of
    single calls."""
    t, tr, r = bench_pair(chained(fn, k), chained(ref, k), args, rounds=rounds)
    return Timing(t / k, tr / k, r, *bench_pair(jax.jit(fn), jax.jit(ref), args, rounds=rounds))


def copy_step(v):
    return v + 1.0  # read + write, like a D2D copy; XLA folds `v + 0.0` away


def copy_bandwidth(nbytes: int, dev: jax.Device, k: int) -> tuple[float, float]:
    """GB/s (read + written) of an elementwise op on `nbytes` of f32: `k` chained in one
    program, and one program per call."""
    a = jax.device_put(jnp.zeros(nbytes // 4, jnp.float32), dev)
    t, td = np.median(_rounds((chained(copy_step, k), jax.jit(copy_step)), (a,), 15, 20), axis=1)
    return float(2 * nbytes / (t / k) / 1e9), float(2 * nbytes / td / 1e9)


def jnp_rms(x, w, eps=1e-5):
    acc = jnp.float64 if jnp.float64 in (x.dtype, w.dtype) else jnp.float32
    xa = x.astype(acc)
    inv = jax.lax.rsqrt(jnp.mean(xa * xa, axis=-1, keepdims=True) + eps)
    return (xa * inv * w.astype(acc)).astype(jnp.result_type(x, w))


def rms_fwd(x, w):
    return xr.rms_norm(x, w, eps=1e-5)


def rms_bwd(dy, x, w):
    return jax.vjp(rms_fwd, x, w)[1](dy)


def jnp_rms_bwd(dy, x, w):
    return jax.vjp(jnp_rms, x, w)[1](dy)


def rms_norm_times(rng, dev, rows, cols, dt, k, rounds=15):
    """Ours against jnp under jit on random (rows, cols) inputs of `dt`, forward
    then backward (the vjp in x and w; chained, dx is the next dy): `time_op` of each."""
    x = jax.device_put(jnp.asarray(rng.standard_normal((rows, cols)), dt), dev)
    w = jax.device_put(jnp.asarray(rng.uniform(0.5, 1.5, cols), dt), dev)
    dy = jax.device_put(jnp.asarray(rng.standard_normal((rows, cols)), dt), dev)
    return time_op(rms_fwd, jnp_rms, (x, w), k, rounds), time_op(rms_bwd, jnp_rms_bwd, (dy, x, w), k, rounds)


def rate_fields(tm: Timing, nbytes: int, copy_gbs: tuple[float, float]) -> dict[str, float]:
    """A row's times, GB/s, fraction of the copy and ratio to jnp: chained in one
    program, then `dispatched_` (against the copy timed the same way)."""
    out: dict[str, float] = {}
    for pre, (t, tr, r), c in [("", tm[:3], copy_gbs[0]), ("dispatched_", tm[3:], copy_gbs[1])]:
        gbs = nbytes / t / 1e9
        out |= {
            f"{pre}time_ms": t * 1e3,
            f"{pre}jnp_time_ms": tr * 1e3,
            f"{pre}GBps": gbs,
            f"{pre}frac_of_copy": gbs / c,
            f"{pre}speedup_vs_jnp": r,
        }
    return out


def check_chain(dev: jax.Device, k: int) -> str:
    """Asserts that `chained` keeps its `k` calls apart on a small bf16 case: the
    compiled program has k times one call's custom calls (ours), fusions and reduces
    (jnp's); returns the counts."""

    def counts(f: Any, args: tuple[Any, ...]) -> np.ndarray:
        text = f.lower(*args).compile().as_text()
        return np.array([len(re.findall(rf"\s{op}\(", text)) for op in ("custom-call", "fusion", "reduce")])

    x = jax.device_put(jnp.ones((64, 256), jnp.bfloat16), dev)
    w = jax.device_put(jnp.ones(256, jnp.bfloat16), dev)
    lines = []
    cases: list[tuple[str, Callable[..., Any], tuple[Any, ...]]] = [
        ("fwd", rms_fwd, (x, w)),
        ("jnp fwd", jnp_rms, (x, w)),
        ("bwd", rms_bwd, (x, x, w)),
        ("jnp bwd", jnp_rms_bwd, (x, x, w)),
        ("copy", copy_step, (x,)),
    ]
    for name, step, args in cases:
        one, many = counts(jax.jit(step), args), counts(chained(step, k), args)
        assert one.any() and (many == k * one).all(), f"{name}: {k} chained calls compile to {many}, one to {one}"
        lines.append(f"{name} {'/'.join(map(str, many))}")
    return f"chain check ({k} calls; custom calls/fusions/reduces in the program): " + ", ".join(lines)


def jnp_kepler(m, e, iters=8):
    E = m + e * jnp.sin(m)
    for _ in range(iters):
        E = E - (E - e * jnp.sin(E) - m) / (1 - e * jnp.cos(E))
    return jnp.sin(E), jnp.cos(E)


def shape_rows(rng, dev, k, quick=False):
    """Other rms_norm shapes (a row length that 16-byte packs do not divide takes the
    unpacked kernels) and Kepler against XLA's sin + cos and its JVP, one line each."""
    lines = []
    shapes = [
        (32768, 1024, jnp.bfloat16),
        (2048, 16384, jnp.bfloat16),
        (8192, 4100, jnp.bfloat16),
        (8192, 4096, jnp.float64),
    ]
    for rows, cols, dt in [(64, c, d) for _, c, d in shapes] if quick else shapes:
        nb = rows * cols * jnp.dtype(dt).itemsize
        f, b = rms_norm_times(rng, dev, rows, cols, dt, k, rounds=1 if quick else 7)
        lines.append(
            f"rms_norm {rows}x{cols} {jnp.dtype(dt).name}: "
            + "; ".join(
                f"{p} {t.s * 1e3:.3f} ms ({m * nb / t.s / 1e9:.0f} GB/s), {t.ratio:.2f}x jnp "
                f"(dispatched {t.dispatched_s * 1e3:.3f} ms, {t.dispatched_ratio:.2f}x)"
                for p, t, m in (("fwd", f, 2), ("bwd", b, 3))
            )
        )
    for n in (10**3,) if quick else (10**6, 10**7):
        for dt in (jnp.float32, jnp.float64):
            m = jax.device_put(jnp.asarray(rng.uniform(-10, 10, n), dt), dev)
            e = jax.device_put(jnp.asarray(rng.uniform(0, 0.99, n), dt), dev)
            sincos = jax.jit(lambda m, e: (jnp.sin(m), jnp.cos(e)))
            jvp = jax.jit(lambda m, e: jax.jvp(xr.kepler, (m, e), (m, e)))
            t, _, r = bench_pair(jax.jit(xr.kepler), sincos, (m, e), rounds=1 if quick else 7)
            _, _, rj = bench_pair(jvp, jax.jit(xr.kepler), (m, e), rounds=1 if quick else 7)
            lines.append(
                f"kepler n={n:.0e} {jnp.dtype(dt).name}: {t * 1e6:.1f} us ({n / t / 1e9:.1f} G/s), "
                f"/ XLA sin+cos {1 / r:.2f}, jvp / forward {1 / rj:.2f}"
            )
    return lines


# 4x the elements of (8192, 4096), so that even the bf16 forward (512 MiB moved)
# outlasts the host's dispatch of a call (55-70 us on the H200 machine).
CURVE_ELEMENTS = 1 << 27
CURVE_COLS = (256, 512, 1024, 2048, 4096, 4098, 8192, 16384, 32768, 65536, 65538)


def curve_rows(rng, dev, copy_gbs, k, elements=CURVE_ELEMENTS, cols_list=CURVE_COLS, rounds=7):
    """rms_norm fwd and bwd over row lengths at a fixed element count: one dict per
    (pass, dtype, cols) with `rate_fields`."""
    out = []
    for dt in (jnp.bfloat16, jnp.float32):
        es = jnp.dtype(dt).itemsize
        for cols in cols_list:
            rows = max(1, elements // cols)
            f, b = rms_norm_times(rng, dev, rows, cols, dt, k, rounds=rounds)
            for name, tm, nb in [
                ("fwd", f, rows * cols * es * 2 + cols * es),
                ("bwd", b, rows * cols * es * 3 + cols * es * 2),
            ]:
                out.append(
                    {
                        "pass": name,
                        "dtype": jnp.dtype(dt).name,
                        "rows": rows,
                        "cols": cols,
                        "packed": cols * es % 16 == 0,
                        **rate_fields(tm, nb, copy_gbs),
                    }
                )
    return out


def print_curve(curve, pre=""):
    """The curve's fractions of the copy and ratios to jnp: chained in one program, or
    with pre="dispatched_" one program per call."""
    n = max(r["rows"] * r["cols"] for r in curve)
    how = "one program per call" if pre else "chained in one program"
    print(f"rms_norm over row lengths (about {n:,} elements; * = unpacked rows; {how}): fraction of the copy, x jnp")
    cols = sorted({r["cols"] for r in curve})
    unpacked = {r["cols"] for r in curve if not r["packed"]}
    print(f"{'':<14}" + "".join(f"{str(c) + ('*' if c in unpacked else ''):>13}" for c in cols))
    for name in ("fwd", "bwd"):
        for dt in ("bfloat16", "float32"):
            by = {r["cols"]: r for r in curve if r["pass"] == name and r["dtype"] == dt}
            cells = "".join(
                f"{by[c][pre + 'frac_of_copy']:>7.0%} {by[c][pre + 'speedup_vs_jnp']:>4.1f}x"
                if c in by
                else f"{'':>13}"
                for c in cols
            )
            print(f"{name + ' ' + dt:<14}{cells}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results" / "gpu_bench.json")
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--kepler-n", type=int, default=10_000_000)
    ap.add_argument("--chain", type=int, default=10, help="calls chained in one program for the primary figures")
    ap.add_argument("--device", default="gpu", help="gpu (the default), or cpu for a dry run with --quick")
    ap.add_argument("--quick", action="store_true", help="small arrays, few rounds: checks the script runs")
    a = ap.parse_args()
    dev = jax.devices(a.device)[0]
    if a.quick:
        a.rows, a.cols, a.kepler_n = 64, 256, 10_000
    rows, cols = a.rows, a.cols
    k, rounds = a.chain, 1 if a.quick else 15
    results = {"device": str(dev), "device_kind": dev.device_kind, "chain": k, "rms_norm": [], "kepler": []}
    if a.quick:
        results["chain_check"] = check_chain(dev, k)
    copy_gbs = copy_bandwidth(rows * cols * 4, dev, k)
    results["copy_GBps"], results["dispatched_copy_GBps"] = copy_gbs

    rng = np.random.default_rng(0)
    for dt in (jnp.bfloat16, jnp.float32):
        es = jnp.dtype(dt).itemsize
        # the backward recomputes inv_rms from x (ours and jnp's): count its own bytes only
        fwd_bytes = rows * cols * es * 2 + cols * es + rows * 4
        bwd_bytes = rows * cols * es * 3 + cols * es * 2
        fwd, bwd = rms_norm_times(rng, dev, rows, cols, dt, k, rounds)
        for name, tm, nb, target in [("fwd", fwd, fwd_bytes, 0.85), ("bwd", bwd, bwd_bytes, 0.85)]:
            row: dict[str, Any] = {
                "pass": name,
                "dtype": jnp.dtype(dt).name,
                **rate_fields(tm, nb, copy_gbs),
                "target_frac": target,
            }
            row["ok"] = row["frac_of_copy"] >= target and tm.ratio > 1
            results["rms_norm"].append(row)

    n = a.kepler_n
    for dt in (jnp.float32, jnp.float64):
        m = jax.device_put(jnp.asarray(rng.uniform(-10, 10, n), dt), dev)
        e = jax.device_put(jnp.asarray(rng.uniform(0, 0.99, n), dt), dev)
        t, tr, ratio = bench_pair(jax.jit(xr.kepler), jax.jit(jnp_kepler), (m, e), rounds)
        results["kepler"].append(
            {
                "dtype": jnp.dtype(dt).name,
                "time_ms": t * 1e3,
                "jnp_time_ms": tr * 1e3,
                "elements_per_s": n / t,
                "jnp_elements_per_s": n / tr,
                "speedup_vs_jnp": ratio,
                "ok": ratio >= 3,
            }
        )

    results["shapes"] = shape_rows(rng, dev, k, quick=a.quick)
    if a.quick:
        results["curve"] = curve_rows(rng, dev, copy_gbs, k, elements=1 << 14, cols_list=(256, 258, 1024), rounds=1)
    else:
        results["curve"] = curve_rows(rng, dev, copy_gbs, k)

    print(f"device: {results['device_kind']}")
    if a.quick:
        print(results["chain_check"])
    print(
        f"per call, {k} chained in one program (disp: one program per call; kepler: one program per call only); "
        f"copy bandwidth {copy_gbs[0]:.0f} GB/s (disp {copy_gbs[1]:.0f} GB/s)"
    )
    print(
        f"{'op':<14}{'dtype':<10}{'ms':>9}{'jnp ms':>9}{'GB/s':>9}{'of copy':>9}{'vs jnp':>8}"
        f"{'disp ms':>9}{'of copy':>9}{'vs jnp':>8}  target"
    )
    for r in results["rms_norm"]:
        print(
            f"{'rms_norm ' + r['pass']:<14}{r['dtype']:<10}{r['time_ms']:>9.3f}{r['jnp_time_ms']:>9.3f}"
            f"{r['GBps']:>9.0f}{r['frac_of_copy']:>8.0%} {r['speedup_vs_jnp']:>7.2f}x"
            f"{r['dispatched_time_ms']:>9.3f}{r['dispatched_frac_of_copy']:>8.0%} {r['dispatched_speedup_vs_jnp']:>7.2f}x  "
            f">={r['target_frac']:.0%} & >1x: {'OK' if r['ok'] else 'MISSED'}"
        )
    for r in results["kepler"]:
        print(
            f"{'kepler':<14}{r['dtype']:<10}{r['time_ms']:>9.3f}{r['jnp_time_ms']:>9.3f}"
            f"{r['elements_per_s'] / 1e9:>6.2f}G/s{'':>9}{r['speedup_vs_jnp']:>7.2f}x{'':>26}  "
            f">=3x: {'OK' if r['ok'] else 'MISSED'}"
        )
    for line in results["shapes"]:
        print(line)
    print_curve(results["curve"])
    print_curve(results["curve"], "dispatched_")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
