"""rms_norm: ours against the jnp reference under jit, forward and grad, fresh output
and output aliased to x (input_output_aliases + donation); achieved GB/s."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

import xla_ffi_rs as xr
from common import best_time, quick, report


def jnp_rms_norm(x: jax.Array, w: jax.Array, eps: float = 1e-5) -> jax.Array:
    xf = x.astype(jnp.float32)
    y = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True) + eps) * w.astype(jnp.float32)
    return y.astype(jnp.result_type(x, w))


def aliased_fwd(x: jax.Array, w: jax.Array) -> jax.Array:
    """The raw target with y written over x (needs x donated to avoid a copy)."""
    call = jax.ffi.ffi_call(
        "xla_ffi_rs.rms_norm_fwd",
        (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(x.shape[:-1], jnp.float32)),
        input_output_aliases={0: 0},
    )
    return call(x, w, eps=1e-5)[0]


def main() -> None:
    shapes = [(4, 64, 64)] if quick() else [(4, 512, 512), (8192, 4096)]
    repeat = 1 if quick() else 10
    rng = np.random.default_rng(0)
    rows = []
    for shape in shapes:
        for dtype in (jnp.float32, jnp.bfloat16):
            x = jnp.asarray(rng.standard_normal(shape), dtype)
            w = jnp.asarray(rng.standard_normal(shape[-1]), dtype)
            nbytes = x.size * x.dtype.itemsize
            ours = best_time(jax.jit(xr.rms_norm), x, w, repeat=repeat)
            ref = best_time(jax.jit(jnp_rms_norm), x, w, repeat=repeat)
            loss = lambda f: jax.jit(jax.grad(lambda x, w: f(x, w).astype(jnp.float32).sum(), (0, 1)))  # noqa: E731
            g_ours = best_time(loss(xr.rms_norm), x, w, repeat=repeat)
            g_ref = best_time(loss(jnp_rms_norm), x, w, repeat=repeat)
            donate = jax.jit(aliased_fwd, donate_argnums=0)
            xs = [jnp.array(x) for _ in range(repeat + 1)]
            jax.block_until_ready(donate(xs[0], w))
            best_alias = float("inf")
            import time

            for xi in xs[1:]:
                t0 = time.perf_counter()
                jax.block_until_ready(donate(xi, w))
                best_alias = min(best_alias, time.perf_counter() - t0)
            rows.append({
                "shape": "x".join(map(str, shape)), "dtype": jnp.dtype(dtype).name,
                "fwd ours ms": f"{ours * 1e3:.2f}", "fwd jnp ms": f"{ref * 1e3:.2f}", "fwd speed-up": f"{ref / ours:.2f}",
                "fwd GB/s": f"{2 * nbytes / ours / 1e9:.1f}",
                "aliased fwd GB/s": f"{2 * nbytes / best_alias / 1e9:.1f}",
                "grad ours ms": f"{g_ours * 1e3:.2f}", "grad jnp ms": f"{g_ref * 1e3:.2f}",
                "grad speed-up": f"{g_ref / g_ours:.2f}",
            })
    report("rms_norm", rows, list(rows[0]))


if __name__ == "__main__":
    main()
