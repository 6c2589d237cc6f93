#!/usr/bin/env python3
"""GPU benchmark of the xla_ffi_rs CUDA handlers (not a test).

* rms_norm fwd and bwd at x (8192, 4096), weight (4096,), bf16 and f32: achieved
  GB/s (bytes that must move: fwd reads x and w, writes y and inv_rms; bwd reads dy,
  x and w, writes dx and dweight) against a device-to-device copy measured
  in the same run, and against the jnp reference under jit.
* kepler at 1e7 elements, f32 and f64: elements/s against a pure-jnp solver under jit
  (Newton iterations from E0 = M + e sin M, a fixed count).

Timing: each figure is the median over 15 rounds of a batch of 20 calls dispatched
back to back and waited for once (so the host's dispatch cost overlaps the GPU's
work), ours and the baseline in interleaved batches; "vs jnp" is the median of the
per-round ratios. A batch cannot go faster than the host dispatches calls: on the
H200 machine that floor was 55-70 us per call (Kepler at 1e6 and XLA's sin + cos
both took it), so rows near it measure dispatch, not the kernels;
``benchmarks/gpu_kernels.cu`` times the kernels alone with CUDA events.

    python benchmarks/gpu_bench.py --out gpu_bench.json   # on a machine with a GPU

* the curve: rms_norm fwd and bwd, bf16 and f32, at 2^27 elements for rows of 256
  to 65,536 columns (and 4,098 and 65,538, which 16-byte packs do not divide in
  either dtype: the unpacked kernels), each as a fraction of the copy and against jnp.

Targets: fwd and bwd >= 85% of copy bandwidth at 8192x4096, both faster than jnp;
kepler >= 3x jnp. Prints a table and writes JSON (``--out``, default gpu_bench.json).
``--device cpu --quick`` runs every line on small arrays on the CPU: a check that
the script works before it is taken to a GPU, no figure.
"""

from __future__ import annotations

import argparse
import json
import time

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


def bench_pair(fn, ref, args, rounds=15, reps=20):
    """Median seconds per call of `fn` and `ref` and the median of their per-round
    ratios, timed in interleaved batches (fn, ref, fn, ref, ...)."""
    for f in (fn, ref):
        for _ in range(3):
            jax.block_until_ready(f(*args))
    ts, trs = [], []
    for _ in range(rounds):
        ts.append(_batch(fn, args, reps))
        trs.append(_batch(ref, args, reps))
    ratio = float(np.median(np.asarray(trs) / np.asarray(ts)))
    return float(np.median(ts)), float(np.median(trs)), ratio


def copy_bandwidth(nbytes, dev):
    a = jax.device_put(jnp.zeros(nbytes // 4, jnp.float32), dev)
    f = jax.jit(lambda v: v + 0.0)  # a fused elementwise op: read + write, like a D2D copy
    t = float(np.median([_batch(f, (a,), 20) for _ in range(15)]))
    return 2 * nbytes / t / 1e9


def jnp_rms(x, w, eps=1e-5):
    acc = jnp.float64 if jnp.float64 in (x.dtype, w.dtype) else jnp.float32
    xa = x.astype(acc)
    inv = jax.lax.rsqrt(jnp.mean(xa * xa, axis=-1, keepdims=True) + eps)
    return (xa * inv * w.astype(acc)).astype(jnp.result_type(x, w))


def rms_norm_times(rng, dev, rows, cols, dt, rounds=15):
    """Ours against jnp under jit on random (rows, cols) inputs of `dt`, forward
    then backward (the vjp in x and w): `bench_pair`'s (ms, jnp ms, ratio) for each."""
    x = jax.device_put(jnp.asarray(rng.standard_normal((rows, cols)), dt), dev)
    w = jax.device_put(jnp.asarray(rng.uniform(0.5, 1.5, cols), dt), dev)
    dy = jax.device_put(jnp.asarray(rng.standard_normal((rows, cols)), dt), dev)
    fwd = jax.jit(lambda x, w: xr.rms_norm(x, w, eps=1e-5))
    bwd = jax.jit(lambda x, w, dy: jax.vjp(lambda a, b: xr.rms_norm(a, b, eps=1e-5), x, w)[1](dy))
    bwd_ref = jax.jit(lambda x, w, dy: jax.vjp(jnp_rms, x, w)[1](dy))
    return bench_pair(fwd, jax.jit(jnp_rms), (x, w), rounds=rounds), bench_pair(bwd, bwd_ref, (x, w, dy), rounds=rounds)


def jnp_kepler(m, e, iters=8):
    E = m + e * jnp.sin(m)
    for _ in range(iters):
        E = E - (E - e * jnp.sin(E) - m) / (1 - e * jnp.cos(E))
    return jnp.sin(E), jnp.cos(E)


def shape_rows(rng, dev, quick=False):
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
        (t, _, r), (tb, _, rb) = rms_norm_times(rng, dev, rows, cols, dt, rounds=7)
        lines.append(
            f"rms_norm {rows}x{cols} {jnp.dtype(dt).name}: fwd {t * 1e3:.3f} ms ({2 * nb / t / 1e9:.0f} GB/s), "
            f"{r:.2f}x jnp; bwd {tb * 1e3:.3f} ms ({3 * nb / tb / 1e9:.0f} GB/s), {rb:.2f}x jnp"
        )
    for n in (10**3,) if quick else (10**6, 10**7):
        for dt in (jnp.float32, jnp.float64):
            m = jax.device_put(jnp.asarray(rng.uniform(-10, 10, n), dt), dev)
            e = jax.device_put(jnp.asarray(rng.uniform(0, 0.99, n), dt), dev)
            sincos = jax.jit(lambda m, e: (jnp.sin(m), jnp.cos(e)))
            jvp = jax.jit(lambda m, e: jax.jvp(xr.kepler, (m, e), (m, e)))
            t, _, r = bench_pair(jax.jit(xr.kepler), sincos, (m, e), rounds=7)
            _, _, rj = bench_pair(jvp, jax.jit(xr.kepler), (m, e), rounds=7)
            lines.append(
                f"kepler n={n:.0e} {jnp.dtype(dt).name}: {t * 1e6:.1f} us ({n / t / 1e9:.1f} G/s), "
                f"/ XLA sin+cos {1 / r:.2f}, jvp / forward {1 / rj:.2f}"
            )
    return lines


# 4x the elements of (8192, 4096), so that even the bf16 forward (512 MiB moved)
# outlasts the host's dispatch of a call (55-70 us on the H200 machine).
CURVE_ELEMENTS = 1 << 27
CURVE_COLS = (256, 512, 1024, 2048, 4096, 4098, 8192, 16384, 32768, 65536, 65538)


def curve_rows(rng, dev, copy_gbs, elements=CURVE_ELEMENTS, cols_list=CURVE_COLS, rounds=7):
    """rms_norm fwd and bwd over row lengths at a fixed element count: one dict per
    (pass, dtype, cols) with GB/s, the fraction of the copy and the ratio to jnp."""
    out = []
    for dt in (jnp.bfloat16, jnp.float32):
        es = jnp.dtype(dt).itemsize
        for cols in cols_list:
            rows = max(1, elements // cols)
            (t_f, _, r_f), (t_b, _, r_b) = rms_norm_times(rng, dev, rows, cols, dt, rounds=rounds)
            for name, t, ratio, nb in [
                ("fwd", t_f, r_f, rows * cols * es * 2 + cols * es),
                ("bwd", t_b, r_b, rows * cols * es * 3 + cols * es * 2),
            ]:
                gbs = nb / t / 1e9
                out.append(
                    {
                        "pass": name,
                        "dtype": jnp.dtype(dt).name,
                        "rows": rows,
                        "cols": cols,
                        "packed": cols * es % 16 == 0,
                        "time_ms": t * 1e3,
                        "GBps": gbs,
                        "frac_of_copy": gbs / copy_gbs,
                        "speedup_vs_jnp": ratio,
                    }
                )
    return out


def print_curve(curve):
    n = max(r["rows"] * r["cols"] for r in curve)
    print(f"rms_norm over row lengths (about {n:,} elements; * = unpacked rows): fraction of the copy, x jnp")
    cols = sorted({r["cols"] for r in curve})
    unpacked = {r["cols"] for r in curve if not r["packed"]}
    print(f"{'':<14}" + "".join(f"{str(c) + ('*' if c in unpacked else ''):>13}" for c in cols))
    for name in ("fwd", "bwd"):
        for dt in ("bfloat16", "float32"):
            by = {r["cols"]: r for r in curve if r["pass"] == name and r["dtype"] == dt}
            cells = "".join(
                f"{by[c]['frac_of_copy']:>7.0%} {by[c]['speedup_vs_jnp']:>4.1f}x" if c in by else f"{'':>13}"
                for c in cols
            )
            print(f"{name + ' ' + dt:<14}{cells}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="gpu_bench.json")
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", type=int, default=4096)
    ap.add_argument("--kepler-n", type=int, default=10_000_000)
    ap.add_argument("--device", default="gpu", help="gpu (the default), or cpu for a dry run with --quick")
    ap.add_argument("--quick", action="store_true", help="small arrays, few rounds: checks the script runs")
    a = ap.parse_args()
    dev = jax.devices(a.device)[0]
    if a.quick:
        a.rows, a.cols, a.kepler_n = 64, 256, 10_000
    rows, cols = a.rows, a.cols
    results = {"device": str(dev), "device_kind": dev.device_kind, "rms_norm": [], "kepler": []}
    copy_gbs = copy_bandwidth(rows * cols * 4, dev)
    results["copy_GBps"] = copy_gbs

    rng = np.random.default_rng(0)
    for dt in (jnp.bfloat16, jnp.float32):
        es = jnp.dtype(dt).itemsize
        # the backward recomputes inv_rms from x (ours and jnp's): count its own bytes only
        fwd_bytes = rows * cols * es * 2 + cols * es + rows * 4
        bwd_bytes = rows * cols * es * 3 + cols * es * 2
        (t_f, t_fr, r_f), (t_b, t_br, r_b) = rms_norm_times(rng, dev, rows, cols, dt)
        for name, t, tr, ratio, nb, target in [
            ("fwd", t_f, t_fr, r_f, fwd_bytes, 0.85),
            ("bwd", t_b, t_br, r_b, bwd_bytes, 0.85),
        ]:
            gbs = nb / t / 1e9
            results["rms_norm"].append(
                {
                    "pass": name,
                    "dtype": jnp.dtype(dt).name,
                    "time_ms": t * 1e3,
                    "jnp_time_ms": tr * 1e3,
                    "GBps": gbs,
                    "frac_of_copy": gbs / copy_gbs,
                    "speedup_vs_jnp": ratio,
                    "target_frac": target,
                    "ok": gbs / copy_gbs >= target and ratio > 1,
                }
            )

    n = a.kepler_n
    for dt in (jnp.float32, jnp.float64):
        m = jax.device_put(jnp.asarray(rng.uniform(-10, 10, n), dt), dev)
        e = jax.device_put(jnp.asarray(rng.uniform(0, 0.99, n), dt), dev)
        t, tr, ratio = bench_pair(jax.jit(xr.kepler), jax.jit(jnp_kepler), (m, e))
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

    results["shapes"] = shape_rows(rng, dev, quick=a.quick)
    if a.quick:
        results["curve"] = curve_rows(rng, dev, copy_gbs, elements=1 << 14, cols_list=(256, 258, 1024), rounds=1)
    else:
        results["curve"] = curve_rows(rng, dev, copy_gbs)

    print(f"device: {results['device_kind']}   copy bandwidth: {copy_gbs:.0f} GB/s")
    print(f"{'op':<14}{'dtype':<10}{'ms':>9}{'jnp ms':>9}{'GB/s':>9}{'of copy':>9}{'vs jnp':>8}  target")
    for r in results["rms_norm"]:
        print(
            f"{'rms_norm ' + r['pass']:<14}{r['dtype']:<10}{r['time_ms']:>9.3f}{r['jnp_time_ms']:>9.3f}"
            f"{r['GBps']:>9.0f}{r['frac_of_copy']:>8.0%} {r['speedup_vs_jnp']:>7.2f}x  "
            f">={r['target_frac']:.0%} & >1x: {'OK' if r['ok'] else 'MISSED'}"
        )
    for r in results["kepler"]:
        print(
            f"{'kepler':<14}{r['dtype']:<10}{r['time_ms']:>9.3f}{r['jnp_time_ms']:>9.3f}"
            f"{r['elements_per_s'] / 1e9:>8.2f}G/s{'':>7} {r['speedup_vs_jnp']:>7.2f}x  >=3x: {'OK' if r['ok'] else 'MISSED'}"
        )
    for line in results["shapes"]:
        print(line)
    print_curve(results["curve"])
    with open(a.out, "w") as f:
        json.dump(results, f, indent=2)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
