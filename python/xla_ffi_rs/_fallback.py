"""jnp implementations of the ops, lowered where no FFI target is registered.

They make the package usable (slower, but with every transformation) on a
platform the native module has no handler for, e.g. a GPU when it was built
without CUDA, and they let ``jax.export`` serialize for such platforms. They
compute what the Rust kernels compute, in the same accumulation precision.

Example:
    >>> import jax.numpy as jnp
    >>> s, c = kepler(jnp.float32(0.0), jnp.float32(0.5))
    >>> float(s), float(c)
    (0.0, 1.0)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from xla_ffi_rs._promotion import accumulation_dtype, result_dtype

__all__ = [
    "accumulation_dtype",
    "kepler",
    "kepler_cotangent",
    "kepler_tangent",
    "rms_norm_bwd",
    "rms_norm_dweight",
    "rms_norm_fwd",
    "rms_norm_tangent",
]

#: Halley steps after the starter; each at least triples the correct digits
#: once close, so 8 are plenty for f64 and any e < 1.
_KEPLER_STEPS = 8


def kepler(mean_anomaly: jax.Array, eccentricity: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(sin E, cos E) with E - e sin E = M; NaN where e is not in [0, 1)."""
    m, e = mean_anomaly, eccentricity
    # M modulo the real 2 pi, in [-pi, pi], as the kernels reduce it, for every
    # finite M: XLA's sin and cos reduce their argument exactly.
    m = jnp.where(jnp.abs(m) <= np.pi, m, jnp.arctan2(jnp.sin(m), jnp.cos(m)))
    big_e = m + 0.85 * e * jnp.sign(jnp.sin(m))  # Danby's starter
    for _ in range(_KEPLER_STEPS):
        s, c = e * jnp.sin(big_e), e * jnp.cos(big_e)
        f, f1 = big_e - s - m, 1 - c
        big_e = big_e - f / (f1 - 0.5 * f * s / f1)
    ok = (e >= 0) & (e < 1)
    nan = jnp.asarray(np.nan, big_e.dtype)
    return jnp.where(ok, jnp.sin(big_e), nan), jnp.where(ok, jnp.cos(big_e), nan)


def kepler_tangent(
    d_mean_anomaly: jax.Array, d_eccentricity: jax.Array, e: jax.Array, sin_e: jax.Array, cos_e: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(d sin E, d cos E) as the ``kepler_tangent`` target computes them: with
    t = (dM + sin E de) / (1 - e cos E), (cos E t, -sin E t). Linear in (dM, de)."""
    t = (d_mean_anomaly + sin_e * d_eccentricity) / (1 - e * cos_e)
    return cos_e * t, -(sin_e * t)


def kepler_cotangent(
    ct_sin_e: jax.Array, ct_cos_e: jax.Array, e: jax.Array, sin_e: jax.Array, cos_e: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """(ct_M, ct_e) as the ``kepler_cotangent`` target computes them (the transpose
    of :func:`kepler_tangent`): with t = (cos E ct_sin - sin E ct_cos) / (1 - e cos E),
    (t, sin E t)."""
    t = (cos_e * ct_sin_e - sin_e * ct_cos_e) / (1 - e * cos_e)
    return t, sin_e * t


def _norm_axes(x: jax.Array, weight_ndim: int) -> tuple[int, ...]:
    return tuple(range(x.ndim - weight_ndim, x.ndim))


def _expand(r: jax.Array, weight_ndim: int) -> jax.Array:
    return r.reshape(r.shape + (1,) * weight_ndim)


def rms_norm_inv_rms(x: jax.Array, weight: jax.Array, *, eps: float) -> jax.Array:
    """inv_rms = 1 / sqrt(mean(x**2) + eps) over the trailing ``weight.ndim`` axes,
    in the accumulation dtype (one fused reduction)."""
    acc = accumulation_dtype(x.dtype, weight.dtype)
    xa = x.astype(acc)
    return jax.lax.rsqrt(jnp.mean(xa * xa, axis=_norm_axes(x, weight.ndim)) + jnp.asarray(eps, acc))


def rms_norm_fwd(x: jax.Array, weight: jax.Array, *, eps: float) -> tuple[jax.Array, jax.Array]:
    """(y, inv_rms) as the ``rms_norm_fwd`` target computes them."""
    acc = accumulation_dtype(x.dtype, weight.dtype)
    inv = rms_norm_inv_rms(x, weight, eps=eps)
    y = x.astype(acc) * _expand(inv, weight.ndim) * weight.astype(acc)
    return y.astype(result_dtype(x.dtype, weight.dtype)), inv


def rms_norm_bwd(dy: jax.Array, x: jax.Array, weight: jax.Array, inv_rms: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(dx, dweight) as the ``rms_norm_bwd`` target computes them."""
    acc = inv_rms.dtype
    n = weight.ndim
    r = _expand(inv_rms, n)
    g, xa = dy.astype(acc) * weight.astype(acc), x.astype(acc)
    proj = jnp.mean(g * xa, axis=_norm_axes(x, n), keepdims=True)
    dx = r * g - xa * r**3 * proj
    return dx.astype(x.dtype), rms_norm_dweight(dy, x, weight, inv_rms)


def rms_norm_dweight(dy: jax.Array, x: jax.Array, weight: jax.Array, inv_rms: jax.Array) -> jax.Array:
    """dweight = sum over the leading axes of dy * x * inv_rms (one fused reduction).

    The one formula for the weight's gradient: the fallback's, the op's under
    partitioning (where XLA completes the sum with an all-reduce) and, vmapped,
    the per-example one of the batching rule.
    """
    acc = inv_rms.dtype
    r = _expand(inv_rms, weight.ndim)
    dw = jnp.sum(dy.astype(acc) * x.astype(acc) * r, axis=tuple(range(x.ndim - weight.ndim)))
    return dw.astype(weight.dtype)


def rms_norm_tangent(
    dx: jax.Array, dweight: jax.Array, x: jax.Array, weight: jax.Array, inv_rms: jax.Array
) -> tuple[jax.Array]:
    """Forward-mode tangent of y, linear in (dx, dweight)."""
    acc = inv_rms.dtype
    n = weight.ndim
    r = _expand(inv_rms, n)
    xa, dxa, wa = x.astype(acc), dx.astype(acc), weight.astype(acc)
    dr = -(r**3) * jnp.mean(xa * dxa, axis=_norm_axes(x, n), keepdims=True)
    dy = (dxa * r + xa * dr) * wa + xa * r * dweight.astype(acc)
    return (dy.astype(result_dtype(x.dtype, weight.dtype)),)
