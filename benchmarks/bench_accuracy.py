"""Kepler accuracy: max |E - E_ref| against a long-double reference, e up to 0.999.

E_ref: for each (M, e) as given (f32 inputs taken exactly), M reduced to [-pi, pi]
in long double, |E| bracketed by bisection on [0, pi] (E - e sin E is increasing),
then polished by Newton steps, all in numpy longdouble (x87 80-bit on x86-64).
E of a contender: atan2(sin E, cos E) in long double from its outputs.
Inputs: M uniform in [0, 2pi), e uniform in [0, emax), plus a grid over the
singular corner (|M| in [1e-6, 1e-2] log-spaced, both signs; e in [0.99, emax))."""

from __future__ import annotations

from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import numpy as np  # noqa: E402

from bench_kepler import jnp_newton, numpy_newton  # noqa: E402
from common import QUICK  # noqa: E402
from contenders import kepler_inputs, ours  # noqa: E402
from reporting import report, target  # noqa: E402

LD = np.longdouble


def reference_e(m: np.ndarray, e: np.ndarray) -> np.ndarray:
    """E in [-pi, pi] (sign of the reduced M), in long double."""
    ml, el = m.astype(LD), e.astype(LD)
    two_pi = 2 * np.pi * LD(1) if False else LD(2) * np.arccos(LD(-1))
    pi = two_pi / 2
    mr = ml - two_pi * np.round(ml / two_pi)
    a = np.abs(mr)
    lo, hi = np.zeros_like(a), np.full_like(a, pi)
    for _ in range(45):
        mid = (lo + hi) / 2
        below = mid - el * np.sin(mid) < a
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    x = (lo + hi) / 2
    for _ in range(4):
        x = x - (x - el * np.sin(x) - a) / (1 - el * np.cos(x))
    x = np.clip(x, 0, pi)
    return np.copysign(x, mr)


def err_in_e(s: np.ndarray, c: np.ndarray, ref: np.ndarray) -> float:
    ea = np.arctan2(np.asarray(s).astype(LD), np.asarray(c).astype(LD))
    d = ea - ref
    d = d - 2 * np.pi * np.round(d / (2 * np.pi))  # wrap
    return float(np.nanmax(np.abs(d))) if np.isfinite(d).all() else float("inf")


def corner(dtype, emax: float) -> tuple[np.ndarray, np.ndarray]:
    k = 40 if QUICK else 200
    mags = np.logspace(-6, -2, k)
    ms = np.concatenate([mags, -mags, 2 * np.pi - mags])
    es = np.linspace(0.99, emax, k, endpoint=False)
    mm, ee = np.meshgrid(ms, es)
    return mm.ravel().astype(dtype), ee.ravel().astype(dtype)


def main() -> None:
    o = ours()
    n = 20_000 if QUICK else 1_000_000
    contenders = {"ours": jax.jit(o.kepler), "jnp newton": jax.jit(jnp_newton)}
    rows, targets = [], []
    for dtype in (np.float64, np.float32):
        for emax in (0.9, 0.999):
            m, e = kepler_inputs(n, dtype, emax, seed=7)
            mc, ec = corner(dtype, emax)
            m_all = np.concatenate([np.asarray(m), mc])
            e_all = np.concatenate([np.asarray(e), ec])
            ref = reference_e(m_all, e_all)
            row: dict[str, Any] = {"dtype": np.dtype(dtype).name, "emax": emax, "points": m_all.size}
            for name, f in contenders.items():
                s, co = (np.asarray(v) for v in f(m_all, e_all))
                row[f"{name} max|dE|"] = err_in_e(s, co, ref)
            s, co = numpy_newton(m_all, e_all)
            row["numpy newton max|dE|"] = err_in_e(s, co, ref)
            rows.append(row)
            print(f"  {row}", flush=True)
            if dtype == np.float64 and emax == 0.999:
                targets.append(
                    target("kepler f64 accuracy, e<0.999: max |E - E_ref| (ours)", row["ours max|dE|"], "<=", 1e-13)
                )
    report(
        "accuracy",
        {"max error in E (radians)": rows},
        targets,
        notes=[
            "reference: long-double bisection (45 halvings) + 4 Newton steps, from the inputs as given",
            "f32 rows: error of the f32 outputs against the exact solution for the f32 inputs",
        ],
    )


if __name__ == "__main__":
    main()
