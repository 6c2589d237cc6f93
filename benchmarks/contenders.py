"""The contenders of the benchmark suites, on the same inputs.

* `ours()`: our operations, through the public `xla_ffi_rs` API (plus the raw
  forward target, for the aliasing study).
* `cpp()`: the C++ ffi.h twin (benchmarks/cpp) of our trivial handler
  `xla_ffi_rs.demo.sleep_scale`, registered as `bench_cpp.*`, for the per-call
  cost comparison.
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


def scale_raw(target: str) -> Callable[[jax.Array], jax.Array]:
    """A `sleep_scale` target with delay_ms = 0: y = 2 x, float32."""

    def call(x: jax.Array) -> jax.Array:
        out: jax.Array = jax.ffi.ffi_call(target, jax.ShapeDtypeStruct(x.shape, x.dtype))(x, delay_ms=np.int64(0))
        return out

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


@functools.cache
def ours() -> SimpleNamespace:
    """Our operations, through the public `xla_ffi_rs` API: `.kepler(M, e)`,
    `.rms_norm(x, w)` (differentiable), the raw forward target as
    `.rms_fwd(x, w)` / `.rms_fwd_alias(x, w)`, and the trivial handler the C++ twin
    copies as `.scale(x)` (y = 2 x, float32)."""
    import xla_ffi_rs as xr
    from xla_ffi_rs import examples

    examples.register_async()
    return SimpleNamespace(
        scale=scale_raw("xla_ffi_rs.demo.sleep_scale"),
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
    for sym, name in [("BenchSleepScale", "bench_cpp.sleep_scale"), ("BenchNumThreads", "bench_cpp.num_threads")]:
        jax.ffi.register_ffi_target(name, jax.ffi.pycapsule(getattr(lib, sym)), platform="cpu")
    _CPP = SimpleNamespace(scale=scale_raw("bench_cpp.sleep_scale"))
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
