"""Fit the radial-velocity curve of a synthetic eccentric orbit, through xr.kepler.

Run it with `bash scripts/demo.sh` (which builds and installs the package), or
`python examples/rv_fit.py` where xla_ffi_rs is installed.

The model: mean anomaly M = 2 pi (t - t_p) / P; Kepler's equation gives E; then
    v(t) = K [cos(nu + omega) + e cos(omega)] + gamma,
with the true anomaly nu from (sin E, cos E). We recover (K, e, omega, t_p, gamma)
from noisy samples by gradient descent (BFGS) on the squared residuals, all under
jax.jit, differentiating through xr.kepler (implicit differentiation).

The parameters' uncertainties are the square roots of the diagonal of the inverse
Hessian of the loss (0.5 chi^2) at the optimum, in the physical parameters; the
Hessian is computed by jax.hessian, through xr.kepler's second derivatives.

It prints the recovered parameters with their uncertainties next to the true ones,
then times the same jitted model with xr.kepler against a plain jnp Newton solver,
and writes a plot (`--plot PATH`, default rv_fit.png in the current folder; needs
matplotlib, which scripts/demo.sh installs): the data with error bars, the fitted
and the true curve, the residuals of the fit, and the data folded on the period.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.optimize import minimize

jax.config.update("jax_enable_x64", True)

import xla_ffi_rs as xr  # noqa: E402

TRUE = {"K": 55.0, "e": 0.62, "omega": 1.1, "t_p": 3.3, "gamma": -4.0}
PERIOD = 11.7  # days; known from a periodogram in practice


def true_anomaly_terms(sin_e: jax.Array, cos_e: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    """cos(nu), sin(nu) from sin E, cos E."""
    denom = 1.0 - e * cos_e
    return (cos_e - e) / denom, jnp.sqrt(1.0 - e * e) * sin_e / denom


def rv_model(params: dict[str, jax.Array], t: jax.Array, solver=xr.kepler) -> jax.Array:
    """Radial velocity at times t."""
    m = 2.0 * jnp.pi * (t - params["t_p"]) / PERIOD
    e = jnp.broadcast_to(params["e"], m.shape)
    sin_e, cos_e = solver(m, e)
    cos_nu, sin_nu = true_anomaly_terms(sin_e, cos_e, params["e"])
    w = params["omega"]
    cos_nu_w = cos_nu * jnp.cos(w) - sin_nu * jnp.sin(w)
    return params["K"] * (cos_nu_w + params["e"] * jnp.cos(w)) + params["gamma"]


def jnp_newton_kepler(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The classic jnp baseline: start at M + 0.85 e sign(sin M), 20 Newton steps."""
    m = jnp.mod(m, 2 * jnp.pi)
    big_e = m + 0.85 * e * jnp.sign(jnp.sin(m))
    for _ in range(20):
        big_e = big_e - (big_e - e * jnp.sin(big_e) - m) / (1.0 - e * jnp.cos(big_e))
    return jnp.sin(big_e), jnp.cos(big_e)


def pack(p: dict[str, float]) -> jax.Array:
    """Unconstrained vector: (log K, sqrt(e) cos w, sqrt(e) sin w, t_p, gamma)."""
    se = np.sqrt(p["e"])
    return jnp.array([np.log(p["K"]), se * np.cos(p["omega"]), se * np.sin(p["omega"]), p["t_p"], p["gamma"]])


def unpack(v: jax.Array) -> dict[str, jax.Array]:
    e = jnp.clip(v[1] ** 2 + v[2] ** 2, 0.0, 0.999)
    return {"K": jnp.exp(v[0]), "e": e, "omega": jnp.arctan2(v[2], v[1]), "t_p": v[3], "gamma": v[4]}


NAMES = tuple(TRUE)


def fit(t: jax.Array, rv: jax.Array, sigma: float, start: dict[str, float]) -> dict[str, jax.Array]:
    @jax.jit
    def solve(v0: jax.Array) -> jax.Array:
        def loss(v: jax.Array) -> jax.Array:
            r = (rv_model(unpack(v), t) - rv) / sigma
            return 0.5 * jnp.sum(r * r)

        return minimize(loss, v0, method="BFGS", options={"maxiter": 400}).x

    return unpack(solve(pack(start)))


def uncertainties(t: jax.Array, rv: jax.Array, sigma: float, best: dict[str, jax.Array]) -> dict[str, float]:
    """1-sigma errors of (K, e, omega, t_p, gamma): sqrt of the diagonal of the inverse
    Hessian of 0.5 chi^2 at the optimum, taken in the physical parameters by
    jax.hessian (second derivatives through xr.kepler)."""

    def loss(p: jax.Array) -> jax.Array:
        r = (rv_model(dict(zip(NAMES, p, strict=True)), t) - rv) / sigma
        return 0.5 * jnp.sum(r * r)

    p = jnp.stack([jnp.asarray(best[k], jnp.float64) for k in NAMES])
    cov = jnp.linalg.inv(jax.jit(jax.hessian(loss))(p))
    return {k: float(v) for k, v in zip(NAMES, jnp.sqrt(jnp.diag(cov)), strict=True)}


def timed(fn, *args, repeat: int = 20) -> float:
    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plot", type=Path, default=Path("rv_fit.png"), help="where to write the plot")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(7)
    t = jnp.asarray(np.sort(rng.uniform(0.0, 60.0, 80)))
    sigma = 2.0
    true = {k: jnp.asarray(v) for k, v in TRUE.items()}
    rv = rv_model(true, t) + sigma * jnp.asarray(rng.standard_normal(t.shape))

    start = {"K": 40.0, "e": 0.4, "omega": 0.6, "t_p": 2.5, "gamma": 0.0}
    print("Fitting by BFGS under jax.jit, through xr.kepler (compiling first: a few seconds) ...", flush=True)
    best = fit(t, rv, sigma, start)
    print("Uncertainties from the inverse Hessian of the loss (jax.hessian through xr.kepler) ...", flush=True)
    errors = uncertainties(t, rv, sigma, best)

    print("\nRadial-velocity fit of an eccentric orbit (80 noisy samples, sigma = 2 m/s)")
    print(f"{'parameter':>10} {'true':>10} {'start':>10} {'recovered':>22} {'(rec - true) / err':>19}")
    for k in TRUE:
        rec = f"{float(best[k]):.3f} +/- {errors[k]:.3f}"
        print(f"{k:>10} {TRUE[k]:>10.3f} {start[k]:>10.3f} {rec:>22} {(float(best[k]) - TRUE[k]) / errors[k]:>19.2f}")
    chi2 = float(jnp.sum(((rv_model(best, t) - rv) / sigma) ** 2))
    print(f"chi^2 = {chi2:.1f} for {t.size} points and {len(TRUE)} parameters")

    n = 1_000_000
    print(f"\nTiming the model at {n:,} times under jit, xr.kepler against jnp Newton (about 20 s) ...", flush=True)
    tt = jnp.linspace(0.0, 60.0, n)
    ours = jax.jit(lambda p, x: rv_model(p, x))
    base = jax.jit(lambda p, x: rv_model(p, x, solver=jnp_newton_kepler))
    t_ours, t_base = timed(ours, true, tt), timed(base, true, tt)
    diff = float(jnp.max(jnp.abs(ours(true, tt) - base(true, tt))))
    print(f"Model at {n:,} times under jit (best of 20, float64):")
    print(f"  xla_ffi_rs.kepler        {t_ours * 1e3:8.2f} ms")
    print(f"  jnp Newton (20 steps)    {t_base * 1e3:8.2f} ms")
    print(f"  speed-up {t_base / t_ours:.1f}x; max |difference| {diff:.1e} m/s")

    try:
        out = plot(t, rv, sigma, true, best, args.plot, errors)
    except ImportError:
        print("(matplotlib not installed: no plot; scripts/demo.sh installs it)")
        return 0
    print(f"plot written to {out}")
    return 0


def plot(
    t: jax.Array,
    rv: jax.Array,
    sigma: float,
    true: dict[str, jax.Array],
    best: dict[str, jax.Array],
    out: Path,
    errors: dict[str, float] | None = None,
) -> Path:
    """The data with error bars, the fitted and the true curve, the residuals, and
    the data folded on the period (phase from the fitted time of periastron)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t_np, rv_np = np.asarray(t), np.asarray(rv)
    fine = jnp.linspace(0.0, float(t_np.max()) + 1.0, 3000)
    resid = np.asarray(rv - rv_model(best, t))
    fig = plt.figure(figsize=(11, 5.6))
    grid = fig.add_gridspec(2, 2, width_ratios=[1.7, 1], height_ratios=[3, 1], hspace=0.08, wspace=0.22)
    ax, ax_r, ax_p = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[1, 0]), fig.add_subplot(grid[:, 1])
    ax_r.sharex(ax)
    data_style: dict[str, Any] = {"fmt": "o", "color": "k", "ms": 3, "lw": 0.8, "zorder": 3}
    # The true curve wide and pale under the thin fitted one, so that both show.
    true_style: dict[str, Any] = {"color": "C1", "lw": 4.5, "alpha": 0.45, "zorder": 1, "solid_capstyle": "round"}
    fit_style: dict[str, Any] = {"color": "C0", "lw": 1.3, "zorder": 2}

    ax.errorbar(t_np, rv_np, yerr=sigma, label=f"data (sigma = {sigma:g} m/s)", **data_style)
    ax.plot(np.asarray(fine), np.asarray(rv_model(true, fine)), label="true orbit", **true_style)
    ax.plot(np.asarray(fine), np.asarray(rv_model(best, fine)), label="fit (BFGS through xr.kepler)", **fit_style)
    ax.set_ylabel("radial velocity [m/s]")
    e_text = f"e = {float(best['e']):.3f}" + (f" ± {errors['e']:.3f}" if errors else "")
    ax.set_title(f"Eccentric orbit: {e_text} (true {TRUE['e']})", fontsize=10)
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi + 0.25 * (hi - lo))  # room for the legend
    ax.legend(fontsize=8, loc="upper center", ncol=3, frameon=False)
    ax.tick_params(labelbottom=False)
    ax_r.axhline(0.0, **fit_style)
    ax_r.errorbar(t_np, resid, yerr=sigma, **data_style)
    ax_r.set_xlabel("time [days]")
    ax_r.set_ylabel("residual [m/s]")
    fig.align_ylabels((ax, ax_r))

    # Phase-folded: phase 0 at the fitted periastron, in the middle.
    phase = np.mod((t_np - float(best["t_p"])) / PERIOD + 0.5, 1.0) - 0.5
    grid_phase = np.linspace(-0.5, 0.5, 1000)
    t_phase = jnp.asarray(float(best["t_p"]) + grid_phase * PERIOD)
    ax_p.errorbar(phase, rv_np, yerr=sigma, **data_style)
    ax_p.plot(grid_phase, np.asarray(rv_model(true, t_phase)), **true_style)
    ax_p.plot(grid_phase, np.asarray(rv_model(best, t_phase)), **fit_style)
    ax_p.set_xlim(-0.5, 0.5)
    ax_p.set_xlabel(f"phase (period {PERIOD} days, 0 at periastron)")
    ax_p.set_title("folded on the period", fontsize=10)
    lo, hi = ax_p.get_ylim()
    ax_p.set_ylim(lo, hi + 0.3 * (hi - lo))  # room for the parameters
    if errors:
        units = {"K": "m/s", "e": "", "omega": "rad", "t_p": "d", "gamma": "m/s"}
        lines = [f"{k:<5} {float(best[k]):8.3f} ± {errors[k]:.3f} {units[k]:<3} (true {TRUE[k]:g})" for k in NAMES]
        ax_p.text(
            0.03, 0.97, "\n".join(lines), transform=ax_p.transAxes, family="monospace", fontsize=7.5, va="top",
            bbox={"boxstyle": "round", "fc": "white", "ec": "0.8", "alpha": 0.9},
        )  # fmt: skip
    fig.savefig(out, dpi=160, bbox_inches="tight")
    plt.close(fig)
    return out


if __name__ == "__main__":
    sys.exit(main())
