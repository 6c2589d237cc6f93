"""The contenders of the benchmark suites, on the same inputs.

* `ours()`: our operations, through the public `xla_ffi_rs` API (plus the raw
  forward target, for the aliasing study).
* `cpp()`: the C++ ffi.h twin (benchmarks/cpp), registered as `bench_cpp.*`,
  with the same differentiation rules as ours.
* `kepler_inputs`: the Kepler inputs every suite uses.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from common import CPP_LIB


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
        aliases = {0: 0} if alias else None
        y, inv = jax.ffi.ffi_call(target, outs, input_output_aliases=aliases)(x, w, eps=float(eps))
        return y, inv

    return call


def rms_norm_vjp(fwd_target: str, bwd_target: str, eps: float = 1e-5) -> Callable[..., Any]:
    """rms_norm with grad through the backward target (custom_vjp), as our op
    differentiates: the backward target takes (dy, x, w; eps) and recomputes each
    row's inv_rms from x, so the forward's residuals are x and w only."""
    fwd = rms_fwd_raw(fwd_target)

    @jax.custom_vjp
    def rms_norm(x: jax.Array, w: jax.Array) -> jax.Array:
        return fwd(x, w, eps)[0]

    def f(x: jax.Array, w: jax.Array) -> Any:
        return fwd(x, w, eps)[0], (x, w)

    def b(res: Any, dy: jax.Array) -> Any:
        x, w = res
        outs = (jax.ShapeDtypeStruct(x.shape, x.dtype), jax.ShapeDtypeStruct(w.shape, w.dtype))
        dx, dw = jax.ffi.ffi_call(bwd_target, outs)(dy, x, w, eps=float(eps))
        return dx, dw

    rms_norm.defvjp(f, b)
    return rms_norm


@functools.cache
def ours() -> SimpleNamespace:
    """Our operations, through the public `xla_ffi_rs` API: `.kepler(M, e)`,
    `.rms_norm(x, w)` (differentiable), and the raw forward target as
    `.rms_fwd(x, w)` / `.rms_fwd_alias(x, w)` (the C++ twin's calling convention)."""
    import xla_ffi_rs as xr

    return SimpleNamespace(
        kepler=xr.kepler,
        rms_norm=lambda x, w: xr.rms_norm(x, w, eps=1e-5),
        rms_fwd=rms_fwd_raw("xla_ffi_rs.rms_norm_fwd"),
        rms_fwd_alias=rms_fwd_raw("xla_ffi_rs.rms_norm_fwd", alias=True),
    )


_CPP: SimpleNamespace | bool | None = False


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
