"""rms_norm: ours against the jnp reference (with weight, under jit); f32 and bf16; x (4, 512, 512) and (8192, 4096), weight over the last axis.

* fwd fresh: y in a newly allocated output buffer (a plain jitted call);
* fwd aliased: y written over x (`input_output_aliases={0: 0}` and
  `jax.jit(..., donate_argnums=0)`); each call consumes the previous result, so
  no buffer is allocated; the jnp reference is donated the same way;
* grad: jax.grad of sum(y * g) with respect to (x, weight), g a fixed random array.
GB/s = (bytes of x read + bytes of y written) / best time. faults/call: minor page
faults per fresh-output call (getrusage), see bench_alloc.py for why they matter.
For the large shape, the aliased forward is also timed against the machine's
in-place stream (stream_ratio)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from common import QUICK, measure_chain, measure_chains_interleaved, measure_pairs, minor_faults
from contenders import ours
from reporting import report, target

EPS = 1e-5


def jnp_rms_norm(x: jax.Array, w: jax.Array) -> jax.Array:
    """The reference: y = x * rsqrt(mean(x^2) + eps) * w, in f32 for low precision."""
    acc = jnp.promote_types(jnp.result_type(x, w), jnp.float32)
    xf = x.astype(acc)
    r = jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + EPS)
    return (xf * r * w.astype(acc)).astype(jnp.result_type(x, w))


def grad_of(f, g: jax.Array):
    def loss(x: jax.Array, w: jax.Array) -> jax.Array:
        return jnp.sum(f(x, w).astype(jnp.float32) * g)

    return jax.jit(jax.grad(loss, argnums=(0, 1)))


def faults_per_call(fn, *args, calls: int = 5) -> float:
    jax.block_until_ready(fn(*args))
    f0 = minor_faults()
    for _ in range(calls):
        jax.block_until_ready(fn(*args))
    return (minor_faults() - f0) / calls


def stream_ratio(step: Any, x: jax.Array, w: jax.Array) -> dict[str, float]:
    """Our aliased forward's GB/s as a fraction of the machine's in-place stream:
    XLA negating a donated float32 array of x's bytes (each byte read once and
    written once, as the aliased forward does; float32 because XLA's bfloat16
    elementwise loops run well below memory speed), one call of each per round in
    turn. The median and best of the per-round ratios (stream time / ours), and the
    stream's best GB/s."""
    stream = jax.jit(lambda v: -v, donate_argnums=0)
    t = measure_chains_interleaved(
        {"ours": lambda v: step(v, w), "stream": stream},
        {"ours": jnp.array(x, copy=True), "stream": jnp.ones((x.nbytes // 4,), jnp.float32)},
        rounds=15,
    )
    return {
        "median": t["stream"]["ratio_median"],
        "best": t["stream"]["ratio_best"],
        "stream GB/s": 2 * x.nbytes / t["stream"]["best"] / 1e9,
    }


def main() -> None:
    o = ours()
    shapes = [(4, 64, 64), (256, 512)] if QUICK else [(4, 512, 512), (8192, 4096)]
    rng = np.random.default_rng(0)
    fwd_rows, grad_rows, raw, targets = [], [], [], []
    for shape in shapes:
        for dtype in (jnp.float32, jnp.bfloat16):
            x = jnp.asarray(rng.standard_normal(shape, np.float32), dtype)
            w = jnp.asarray(rng.uniform(0.5, 1.5, shape[-1]).astype(np.float32), dtype)
            g = jnp.asarray(rng.standard_normal(shape, np.float32))
            nbytes = 2 * x.size * x.dtype.itemsize
            big = x.size >= 1 << 24
            budget = 1.5 if big else 0.4
            fresh = {"ours": lambda x, w: o.rms_fwd(x, w)[0], "jnp": jnp_rms_norm}
            aliased = {"ours": lambda x, w: o.rms_fwd_alias(x, w)[0], "jnp": jnp_rms_norm}
            grads = {"ours": o.rms_norm, "jnp": jnp_rms_norm}
            # The public API for the fresh forward when it is there (same kernel).
            fresh["ours"] = jax.jit(o.rms_norm)
            tf = measure_pairs({k: jax.jit(f) for k, f in fresh.items()}, x, w, budget=2 * budget)
            flt = {k: faults_per_call(jax.jit(f), x, w, calls=2 if QUICK else 5) for k, f in fresh.items()}
            ta = {}
            for k, f in aliased.items():
                step = jax.jit(f, donate_argnums=0)

                def chain(v: jax.Array, step: Any = step, w: jax.Array = w) -> Any:
                    return step(v, w)

                ta[k], _ = measure_chain(chain, jnp.array(x, copy=True), repeat=10 if big else 30)
            last = shape == shapes[-1]
            stream = stream_ratio(jax.jit(aliased["ours"], donate_argnums=0), x, w) if last else {}
            gfs = {k: grad_of(f, g) for k, f in grads.items()}
            tg = measure_pairs(gfs, x, w, budget=2 * budget)
            key = {"shape": "x".join(map(str, shape)), "dtype": jnp.dtype(dtype).name}
            row: dict[str, Any] = dict(key)
            for k in fresh:
                row[f"{k} fresh ms"] = tf[k]["median"] * 1e3
            for k in aliased:
                row[f"{k} aliased ms"] = ta[k]["best"] * 1e3
            row["ours fresh GB/s"] = nbytes / tf["ours"]["median"] / 1e9
            row["ours aliased GB/s"] = nbytes / ta["ours"]["best"] / 1e9
            if last:
                row["stream GB/s"] = stream["stream GB/s"]
                row["aliased/stream"] = stream["median"]
            row["jnp fresh GB/s"] = nbytes / tf["jnp"]["median"] / 1e9
            row["fresh jnp/ours"] = 1 / tf["jnp"]["ratio_median"]
            row["fresh jnp/ours best"] = 1 / tf["jnp"]["ratio_best"]
            row["ours faults/call"] = flt["ours"]
            row["jnp faults/call"] = flt["jnp"]
            fwd_rows.append(row)
            grow: dict[str, Any] = dict(key)
            for k in grads:
                grow[f"{k} grad ms"] = tg[k]["median"] * 1e3
            grow["grad jnp/ours"] = 1 / tg["jnp"]["ratio_median"]
            grow["grad jnp/ours best"] = 1 / tg["jnp"]["ratio_best"]
            grad_rows.append(grow)
            raw.append({**key, "fresh": tf, "aliased": ta, "grad": tg, "faults": flt})
            if last:
                raw[-1]["stream"] = stream
            print(
                f"  {key}: fresh jnp/ours {row['fresh jnp/ours']:.2f}, aliased {row['ours aliased GB/s']:.1f} GB/s,"
                f" grad jnp/ours {grow['grad jnp/ours']:.2f}",
                flush=True,
            )
            label = f"rms_norm {key['shape']} {key['dtype']}"
            if shape == shapes[0] and dtype == jnp.float32:
                targets.append(target(f"{label}: forward speed-up vs jnp", row["fresh jnp/ours"], ">=", 1.1, "x"))
                targets.append(target(f"{label}: grad speed-up vs jnp", grow["grad jnp/ours"], ">=", 2.5, "x"))
            if shape == shapes[-1]:
                targets.append(target(f"{label}: aliased forward GB/s", row["ours aliased GB/s"], ">=", 40, " GB/s"))
                targets.append(
                    target(f"{label}: aliased forward / in-place stream, median", stream["median"], ">=", 0.9, "x")
                )
                targets.append(target(f"{label}: fresh forward speed-up vs jnp", row["fresh jnp/ours"], ">=", 1.0, "x"))
    report(
        "rms_norm",
        {"forward (median; aliased: best of a chain)": fwd_rows, "grad (median)": grad_rows},
        targets,
        notes=[
            (
                "fresh: ordinary jitted call (new output buffer each call); aliased: input_output_aliases={0: 0} + "
                "donate_argnums=0, each call consuming the last result (jnp: donated the same way)"
            ),
            (
                "GB/s counts x read + y written; grad: d/d(x, w) of sum(y * g) (y unused: no forward kernel runs); "
                "both backward kernels recompute inv_rms from x"
            ),
            "fresh and grad: interleaved pairs in this process (measure_pairs); ratios are medians of per-round ratios",
            (
                "aliased/stream (largest shape): ours aliased against XLA negating a donated float32 array of x's "
                "bytes in place, one call each per round, median of per-round ratios: the machine's in-place stream"
            ),
        ],
        extra={"raw": raw},
    )


if __name__ == "__main__":
    main()
