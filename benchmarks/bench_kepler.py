"""Kepler: ours against XLA's sin+cos (the floor), a jnp Newton solver, and
jax.pure_callback around numpy; forward and forward+JVP; accuracy vs long double."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import xla_ffi_rs as xr  # noqa: E402
from common import best_time, quick, report  # noqa: E402


def jnp_newton(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The original C++ op's scheme: start at M +- 0.85 e, Newton to 1e-12, at most 20 steps."""
    m = jnp.mod(m, 2 * jnp.pi)
    e0 = m + 0.85 * e * jnp.sign(jnp.pi - m)

    def cond(state):
        k, _, delta = state
        return (k < 20) & (jnp.max(jnp.abs(delta)) > 1e-12)

    def body(state):
        k, big_e, _ = state
        delta = (big_e - e * jnp.sin(big_e) - m) / (1 - e * jnp.cos(big_e))
        return k + 1, big_e - delta, delta

    _, big_e, _ = jax.lax.while_loop(cond, body, (0, e0, jnp.ones_like(m)))
    return jnp.sin(big_e), jnp.cos(big_e)


def numpy_kepler(m: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    big_e = m + 0.85 * e * np.sign(np.pi - np.mod(m, 2 * np.pi))
    for _ in range(20):
        big_e = big_e - (big_e - e * np.sin(big_e) - m) / (1 - e * np.cos(big_e))
    return np.sin(big_e), np.cos(big_e)


def callback_kepler(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    shape = jax.ShapeDtypeStruct(m.shape, m.dtype)
    return jax.pure_callback(
        lambda m, e: tuple(v.astype(m.dtype) for v in numpy_kepler(m, e)), (shape, shape), m, e
    )


def accuracy(emax: float, n: int) -> float:
    """Max |E - E_ref| in f64, with E_ref by long-double Newton from our own E."""
    rng = np.random.default_rng(1)
    m = rng.uniform(-np.pi, np.pi, n)
    e = rng.uniform(0, emax, n)
    s, c = (np.asarray(v) for v in jax.jit(xr.kepler)(m, e))
    ours = np.arctan2(s, c)
    ml, el = m.astype(np.longdouble), e.astype(np.longdouble)
    # Newton in long double from our E converges quadratically to the true root
    # (from M it can wander for e near 1); its distance from our E is our error.
    ref = ours.astype(np.longdouble)
    for _ in range(8):
        ref = ref - (ref - el * np.sin(ref) - ml) / (1 - el * np.cos(ref))
    err = np.abs(np.angle(np.exp(1j * (ours - ref.astype(np.float64)))))
    return float(err.max())


def main() -> None:
    sizes = [1, 1000] if quick() else [1, 1000, 1_000_000]
    repeat = 1 if quick() else 20
    rng = np.random.default_rng(0)
    rows = []
    for dtype in (np.float64, np.float32):
        for emax in (0.9, 0.999):
            for n in sizes:
                m = jnp.asarray(rng.uniform(0, 2 * np.pi, n).astype(dtype))
                e = jnp.asarray(rng.uniform(0, emax, n).astype(dtype))
                t = {
                    "ours": best_time(jax.jit(xr.kepler), m, e, repeat=repeat),
                    "sin+cos": best_time(jax.jit(lambda m: (jnp.sin(m), jnp.cos(m))), m, repeat=repeat),
                    "jnp newton": best_time(jax.jit(jnp_newton), m, e, repeat=repeat),
                    "pure_callback": best_time(jax.jit(callback_kepler), m, e, repeat=min(repeat, 3)),
                }
                tangents = (jnp.ones_like(m), jnp.zeros_like(e))
                jvp = best_time(jax.jit(lambda m, e: jax.jvp(xr.kepler, (m, e), tangents)), m, e, repeat=repeat)
                rows.append({
                    "dtype": np.dtype(dtype).name, "emax": emax, "N": n,
                    **{f"{k} ns/el": f"{v * 1e9 / n:.1f}" for k, v in t.items()},
                    "ours/sin+cos": f"{t['ours'] / t['sin+cos']:.2f}",
                    "fwd+jvp/fwd": f"{jvp / t['ours']:.2f}",
                })
    cols = ["dtype", "emax", "N", "ours ns/el", "sin+cos ns/el", "jnp newton ns/el", "pure_callback ns/el",
            "ours/sin+cos", "fwd+jvp/fwd"]
    report("kepler", rows, cols)
    n_acc = 10_000 if quick() else 1_000_000
    acc = [{"emax": emax, "max |E - E_ref| (f64)": f"{accuracy(emax, n_acc):.1e}"} for emax in (0.9, 0.999)]
    report("kepler_accuracy", acc, ["emax", "max |E - E_ref| (f64)"])


if __name__ == "__main__":
    main()
