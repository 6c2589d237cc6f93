"""Kepler throughput: ours against the floor (XLA's sin+cos of M under jit), a jnp
Newton solver, jax.pure_callback around numpy and
the memory limit (a fused XLA copy of the same two arrays), N = 1, 1e3, 1e6 (and
1e7 in f64); f32 and f64; e < 0.9 and e < 0.999; forward, forward + JVP, and grad."""

from __future__ import annotations

import os
import resource
import sys
import time
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from common import QUICK, measure, measure_pairs  # noqa: E402
from contenders import kepler_inputs, ours  # noqa: E402
from reporting import report, target  # noqa: E402

# The threads of XLA's intra-op pool, which our handler splits a call over: the
# usable cores unless PJRT_NPROC says otherwise (see bench_threads.py).
POOL_THREADS = int(os.environ.get("PJRT_NPROC") or len(os.sched_getaffinity(0)))
NEWTON_TOL = 1e-12
NEWTON_MAX_STEPS = 20


def jnp_newton(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The classic scheme of the original C++ Kepler op, vectorized faithfully:
    start at M + 0.85 e (M < pi) or M - 0.85 e, Newton steps while any element's
    step exceeds 1e-12, at most 20 steps (a `lax.while_loop` with the tolerance).
    In f32 the tolerance is below one ulp, so it always takes the 20 steps."""
    m = jnp.mod(m, 2 * jnp.pi)
    e0 = m + 0.85 * e * jnp.where(m < jnp.pi, 1.0, -1.0).astype(m.dtype)

    def cond(state: tuple) -> jax.Array:
        k, _, delta = state
        return (k < NEWTON_MAX_STEPS) & (jnp.max(jnp.abs(delta)) > NEWTON_TOL)

    def body(state: tuple) -> tuple:
        k, big_e, _ = state
        delta = (big_e - e * jnp.sin(big_e) - m) / (1 - e * jnp.cos(big_e))
        return k + 1, big_e - delta, delta

    init = (jnp.int32(0), e0, jnp.full_like(m, jnp.inf))
    _, big_e, _ = jax.lax.while_loop(cond, body, init)
    return jnp.sin(big_e), jnp.cos(big_e)


def numpy_newton(m: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The same scheme in numpy (for jax.pure_callback)."""
    m = np.mod(m, 2 * np.pi)
    big_e = m + 0.85 * e * np.where(m < np.pi, 1.0, -1.0).astype(m.dtype)
    for _ in range(NEWTON_MAX_STEPS):
        delta = (big_e - e * np.sin(big_e) - m) / (1 - e * np.cos(big_e))
        big_e = big_e - delta
        if np.max(np.abs(delta), initial=0.0) <= NEWTON_TOL:
            break
    return np.sin(big_e).astype(m.dtype), np.cos(big_e).astype(m.dtype)


def callback_kepler(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    out = jax.ShapeDtypeStruct(m.shape, m.dtype)
    return jax.pure_callback(numpy_newton, (out, out), m, e, vmap_method="broadcast_all")


def sin_cos(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The floor: XLA's own sin and cos of the same array (e unused)."""
    del e
    return jnp.sin(m), jnp.cos(m)


def with_jvp(f):
    """Forward + JVP with tangents (dM, de) = (1, 0.5): primal and tangent outputs."""

    def g(m: jax.Array, e: jax.Array) -> tuple:
        return jax.jvp(f, (m, e), (jnp.ones_like(m), jnp.full_like(e, 0.5)))

    return g


@jax.custom_jvp
def old_rule_kepler(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Our forward with the JVP rule it had before the tangent targets: the tangent
    in jnp from the outputs (one fused XLA loop). The A/B baseline of forward + JVP."""
    from xla_ffi_rs.ops.kepler import kepler_op

    sin_e, cos_e = kepler_op(m, e)
    return sin_e, cos_e


@old_rule_kepler.defjvp
def _old_rule_jvp(primals: tuple, tangents: tuple) -> tuple:
    from xla_ffi_rs.ops.kepler import kepler_op, kepler_tangent_jnp

    (m, e), (dm, de) = primals, tangents
    s, c = kepler_op(m, e)
    return (s, c), kepler_tangent_jnp(dm, de, e, s, c)


GRAD_WEIGHTS = (0.3, 0.7)  # the loss: sum(0.3 sin E + 0.7 cos E)


def grad_programs(o: Any) -> dict[str, Any]:
    """Reverse mode against the forward, ours first: the gradient in (M, e) of
    ``sum(0.3 sin E + 0.7 cos E)`` (the forward, then the cotangent kernel as the
    transpose of the tangent), and the forward alone."""
    ws, wc = GRAD_WEIGHTS

    def loss(m: jax.Array, e: jax.Array) -> jax.Array:
        s, c = o.kepler(m, e)
        return jnp.sum(ws * s + wc * c)

    return {"ours grad": jax.grad(loss, argnums=(0, 1)), "ours fwd": o.kepler}


def jvp_programs(o: Any, arrays: bool) -> dict[str, Any]:
    """Forward + JVP programs on (M, e, dM, de), ours first, then our forward and
    the old rule. With ``arrays``, the tangents are the arrays passed in (as when
    they come from other code); else the benchmark's constant tangents, built
    inside the program as in `with_jvp` (ours passes them to `kepler_jvp_const` as
    scalars; the old rule's jnp loop fuses them)."""

    def program(f: Any) -> Any:
        if arrays:
            return lambda m, e, dm, de: jax.jvp(f, (m, e), (dm, de))
        return lambda m, e, dm, de: with_jvp(f)(m, e)

    return {
        "ours fwd+jvp": program(o.kepler),
        "ours fwd": lambda m, e, dm, de: o.kepler(m, e),
        "old rule fwd+jvp": program(old_rule_kepler),
    }


def derivative_kernels(o: Any) -> dict[str, Any]:
    """The forward-mode costs apart, all on the arguments (M, e, dM, de, sin E, cos E):
    the forward, the tangent kernel (what jvp adds to it), and the jnp formula of
    the same tangent (one fused XLA loop: what jvp added before the tangent target)."""
    from xla_ffi_rs.ops.kepler import kepler_tangent_jnp, kepler_tangent_op

    return {
        "tangent kernel": lambda m, e, dm, de, s, c: kepler_tangent_op(dm, de, e, s, c),
        "forward": lambda m, e, dm, de, s, c: o.kepler(m, e),
        "jnp tangent": lambda m, e, dm, de, s, c: kepler_tangent_jnp(dm, de, e, s, c),
    }


def tangent_apart(o: Any, m: jax.Array, e: jax.Array) -> dict[str, Any]:
    """:func:`derivative_kernels` as interleaved pairs on the same arrays, the
    tangent kernel first (so each ratio is tangent kernel / that contender)."""
    s, c = jax.jit(o.kepler)(m, e)
    parts = (m, e, jnp.ones_like(m), jnp.full_like(e, 0.5), s, c)
    return measure_pairs({k: jax.jit(f) for k, f in derivative_kernels(o).items()}, *parts)


def fused_copy(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The memory limit: one fused XLA loop that reads both arrays and writes two
    arrays of the same size (m + e, m - e: no work XLA could skip, no transcendentals)."""
    return m + e, m - e


COPY_SIZES = (1_000_000, 10_000_000)  # the memory-limit target, f64
APART_SIZE = 10_000  # the tangent kernel alone, in cache


def cpu_and_faults(fn: Any, *args: Any, calls: int = 20) -> tuple[float, float, float]:
    """CPU seconds (all threads), minor page faults and system CPU seconds per call
    of `fn(*args)`: figures that a loaded machine moves less than wall time (the
    system time is mostly the kernel serving those faults: fresh output pages)."""
    for _ in range(3):
        jax.block_until_ready(fn(*args))
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
    for _ in range(calls):
        jax.block_until_ready(fn(*args))
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
    faults, sys_s = r1.ru_minflt - r0.ru_minflt, r1.ru_stime - r0.ru_stime
    return (t1 - t0) / calls, faults / calls, sys_s / calls


def jvp_only() -> None:
    """`python bench_kepler.py --jvp`: forward + JVP at 1e6 (f64 and f32, e < 0.9 and
    e < 0.999), alone: wall medians of interleaved pairs, CPU time, page faults and
    system time per call, for the constant and the array tangents; then the tangent kernel apart
    (f64, e < 0.9)."""
    o = ours()
    for dtype, emax in ((np.float64, 0.9), (np.float64, 0.999), (np.float32, 0.9), (np.float32, 0.999)):
        m, e = kepler_inputs(1_000_000, dtype, emax)
        tangents = (jnp.ones_like(m), jnp.full_like(e, 0.5))
        for arrays in (False, True):
            progs: dict[str, Any] = {k: jax.jit(f) for k, f in jvp_programs(o, arrays).items()}
            tj = measure_pairs(progs, m, e, *tangents, budget=3.0)
            cf = {k: cpu_and_faults(f, m, e, *tangents) for k, f in progs.items()}
            kind = "array tangents" if arrays else "constant tangents"
            print(
                f"jax {jax.__version__}, {np.dtype(dtype).name} e<{emax}, {kind}: (fwd+jvp)/fwd median "
                f"{tj['ours fwd']['ratio_median']:.3f} (best {tj['ours fwd']['ratio_best']:.3f}), ours/old rule "
                f"{tj['old rule fwd+jvp']['ratio_median']:.3f}; CPU (fwd+jvp)/fwd "
                f"{cf['ours fwd+jvp'][0] / cf['ours fwd'][0]:.3f} (old rule "
                f"{cf['old rule fwd+jvp'][0] / cf['ours fwd'][0]:.3f}); faults, system ms per call "
                + ", ".join(f"{k} {v[1]:.0f}, {v[2] * 1e3:.2f}" for k, v in cf.items()),
                flush=True,
            )
    m, e = kepler_inputs(1_000_000, np.float64, 0.9)
    tk = tangent_apart(o, m, e)
    print(
        f"jax {jax.__version__}, apart: median ns/el "
        + ", ".join(f"{k} {v['median'] * 1e3:.2f}" for k, v in tk.items())
        + f"; tangent kernel / forward {tk['forward']['ratio_median']:.3f}",
        flush=True,
    )


def main() -> None:
    if "--jvp" in sys.argv:
        jvp_only()
        return
    o = ours()
    sizes = [1, 1000] if QUICK else [1, 1000, 1_000_000, 10_000_000]
    paired = {"ours": o.kepler, "sin+cos": sin_cos, "copy": fused_copy}
    alone = {"jnp newton": jnp_newton, "pure_callback": callback_kepler}
    jvp_contenders = {"jnp newton": jnp_newton, "sin+cos": sin_cos}
    rows: list[dict[str, Any]] = []
    jvp_rows: list[dict[str, Any]] = []
    raw: list[dict[str, Any]] = []
    for dtype in (np.float64, np.float32):
        for emax in (0.9, 0.999):
            for n in sizes:
                if n > 1_000_000 and (dtype != np.float64 or emax != 0.9):
                    continue  # 1e7: only for the f64 memory-limit target
                m, e = kepler_inputs(n, dtype, emax)
                big = n >= 1_000_000
                t = measure_pairs({k: jax.jit(f) for k, f in paired.items()}, m, e)
                if n <= 1_000_000:
                    for name, f in alone.items():
                        budget = 1.0 if name == "pure_callback" and big else 0.4
                        t[name] = measure(jax.jit(f), m, e, budget=budget, min_repeat=2 if big else 3)
                # (fwd+jvp)/fwd: ours' forward and forward + JVP as interleaved pairs.
                tangents = (jnp.ones_like(m), jnp.full_like(e, 0.5))
                tj = measure_pairs({k: jax.jit(f) for k, f in jvp_programs(o, False).items()}, m, e, *tangents)
                ta = measure_pairs({k: jax.jit(f) for k, f in jvp_programs(o, True).items()}, m, e, *tangents)
                tg = measure_pairs({k: jax.jit(f) for k, f in grad_programs(o).items()}, m, e)
                if n <= 1_000_000:
                    for name, f in jvp_contenders.items():
                        tj[f"{name} fwd+jvp"] = measure(jax.jit(with_jvp(f)), m, e)
                tk = tangent_apart(o, m, e) if n == 1_000_000 else {}
                key = {"dtype": np.dtype(dtype).name, "emax": emax, "N": n}
                row = dict(key)
                for name, v in t.items():
                    row[f"{name} ns/el"] = v["median"] * 1e9 / n
                for name in ("sin+cos", "copy"):
                    if name in t:
                        row[f"ours/{name}"] = t[name]["ratio_median"]
                        row[f"ours/{name} best"] = t[name]["ratio_best"]
                row["ours ns/el best"] = t["ours"]["best"] * 1e9 / n
                # ns per element per core, to read against solvers published per core
                # (from 1e6 on, where the handler splits a call over every thread)
                if big:
                    row["ours ns/el x cores"] = t["ours"]["median"] * 1e9 / n * POOL_THREADS
                rows.append(row)
                jrow = dict(key)
                jrow["ours (fwd+jvp)/fwd"] = tj["ours fwd"]["ratio_median"]
                jrow["ours (fwd+jvp)/fwd best"] = tj["ours fwd"]["ratio_best"]
                jrow["ours/old rule (fwd+jvp)"] = tj["old rule fwd+jvp"]["ratio_median"]
                jrow["array tangents: ours (fwd+jvp)/fwd"] = ta["ours fwd"]["ratio_median"]
                jrow["array tangents: ours/old rule (fwd+jvp)"] = ta["old rule fwd+jvp"]["ratio_median"]
                jrow["ours grad/fwd"] = tg["ours fwd"]["ratio_median"]
                for name, v in tj.items():
                    jrow[f"{name} ns/el"] = v["median"] * 1e9 / n
                for name, v in tk.items():
                    jrow[f"apart: {name} ns/el"] = v["median"] * 1e9 / n
                    if "ratio_median" in v:
                        jrow[f"apart: tangent kernel/{name}"] = v["ratio_median"]
                jvp_rows.append(jrow)
                raw.append({**key, "fwd": t, "fwd+jvp": tj, "fwd+jvp, array tangents": ta, "grad": tg, "apart": tk})
                print(
                    f"  {key}: ours {row['ours ns/el']:.2f} ns/el (median), ours/sin+cos {row['ours/sin+cos']:.3f},"
                    f" ours/copy {row['ours/copy']:.3f}",
                    flush=True,
                )

    # The tangent kernel alone in cache: no slower than the same formula as one
    # fused XLA loop (a kernel that does not vectorize shows here first).
    n_apart = 1000 if QUICK else APART_SIZE
    apart_rows = []
    for dtype in (np.float64, np.float32):
        m, e = kepler_inputs(n_apart, dtype, 0.9)
        tk = tangent_apart(o, m, e)
        arow: dict[str, Any] = {"dtype": np.dtype(dtype).name, "N": n_apart}
        for name, v in tk.items():
            arow[f"{name} ns/el"] = v["median"] * 1e9 / n_apart
        arow["tangent kernel/jnp tangent"] = tk["jnp tangent"]["ratio_median"]
        apart_rows.append(arow)
        raw.append({**arow, "apart": tk})

    targets = []
    for r in rows:
        label = f"kepler N={r['N']:.0e} {r['dtype']} e<{r['emax']}"
        if r["N"] == 1_000_000:
            targets.append(target(f"{label}: ours / (sin+cos), median", r["ours/sin+cos"], "<=", 0.25, "x"))
        if r["dtype"] == "float64" and r["emax"] == 0.9 and r["N"] in COPY_SIZES:
            targets.append(target(f"{label}: ours / fused copy, median", r["ours/copy"], "<=", 1.5, "x"))
    for r in jvp_rows:
        if r["N"] == 1_000_000:
            label = f"kepler N=1e+06 {r['dtype']} e<{r['emax']}"
            targets.append(target(f"{label}: ours (fwd+jvp)/fwd, median", r["ours (fwd+jvp)/fwd"], "<=", 1.2, "x"))
    for r in apart_rows:
        label = f"kepler tangent kernel N={r['N']:.0e} {r['dtype']}: ours / the jnp formula, median"
        targets.append(target(label, r["tangent kernel/jnp tangent"], "<=", 1.0, "x"))
    report(
        "kepler",
        {
            "forward (median ns per element; ratios: median of interleaved pairs)": rows,
            "forward + JVP": jvp_rows,
            "tangent kernel alone, in cache": apart_rows,
        },
        targets,
        notes=[
            "M uniform in [0, 2pi), e uniform in [0, emax); the same arrays for every contender",
            (
                "ours, sin+cos and copy run as interleaved pairs in this process (measure_pairs); "
                "ratios are medians of per-round ratios, `best` is best / best"
            ),
            "copy: jit(lambda m, e: (m + e, m - e)), one fused XLA loop: the memory limit",
            "ours ns/el x cores (N >= 1e6): the median ns per element times the threads of XLA's pool, which the handler splits the call over",
            (
                "jnp newton: lax.while_loop, start M +- 0.85e, tol 1e-12 on max |step|, <= 20 steps "
                "(faithful: in f32 the tolerance is never met, so 20 steps)"
            ),
            "old rule: our forward with the JVP rule it had before kepler_tangent (jnp from the outputs), A/B",
            "array tangents: the same, with (dM, de) passed in as arrays instead of built in the program",
            (
                "grad/fwd: jax.grad in (M, e) of sum(0.3 sin E + 0.7 cos E) against the forward alone, "
                "interleaved pairs (no target: the forward, then the cotangent kernel on the broadcast weights)"
            ),
            (
                "fwd+jvp: jax.jvp with tangents (dM, de) = (1, 0.5), under jit; ours via the public API "
                "(one fused kepler_jvp_const kernel, the constant tangents passed as scalars)"
            ),
            (
                "tangent kernel alone, in cache (N = 1e4, e < 0.9): the same three as interleaved pairs; "
                "the target: no slower than the jnp formula"
            ),
            (
                "apart (N = 1e6): the kepler_tangent kernel alone on materialized (dM, de, e, sin E, cos E) "
                "(the second pass jvp ran before kepler_jvp; linearize still runs it), the forward, and the "
                "same tangent as a jnp formula (one fused XLA loop), interleaved pairs"
            ),
        ],
        extra={"raw": raw},
    )


if __name__ == "__main__":
    main()
