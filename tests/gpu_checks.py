"""Shared by the GPU tests (tests/gpu/ and each op's tests/ops/<op>/test_<op>_gpu.py):
the devices, and comparisons of GPU results with the CPU's. A GPU test module
skips itself as a whole where ``jax.devices("gpu")`` is unavailable::

    GPU, CPU = gpu_and_cpu_or_skip()
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest


def gpu_and_cpu_or_skip() -> tuple[Any, Any]:
    """(the first GPU, the CPU); skips the calling module where there is no GPU."""
    try:
        gpus = jax.devices("gpu")
    except RuntimeError:
        gpus = []
    if not gpus:
        pytest.skip(
            "no GPU: jax.devices('gpu') is unavailable (needs an NVIDIA GPU and `pip install \"jax[cuda13]\"`)",
            allow_module_level=True,
        )
    return gpus[0], jax.devices("cpu")[0]


def on(dev: Any, *arrays: Any) -> list[Any]:
    return [jax.device_put(a, dev) for a in arrays]


def f64(a: Any) -> np.ndarray:
    return np.asarray(jnp.asarray(a, jnp.float64))


def error_of(fn: Callable[..., Any], *args: Any) -> tuple[type, str] | None:
    """(type, message) of the exception ``fn(*args)`` raises, or None."""
    try:
        jax.block_until_ready(fn(*args))
    except Exception as exc:
        return type(exc), str(exc)
    return None


def rel_err(a: Any, ref: Any) -> float:
    a, ref = f64(a), np.asarray(ref, np.float64)
    return float(np.max(np.abs(a - ref)) / max(float(np.max(np.abs(ref))), 1e-300))


def gpu_vs_cpu(
    fn: Callable[..., Any], args: Sequence[Any], dtype: Any, gpu: Any, cpu: Any, floor: dict[str, float]
) -> None:
    """fn on the GPU and on the CPU in `dtype`, against fn on the CPU in float64: the
    GPU's error may be at most twice the CPU's (plus a floor by the dtype's name)."""
    ref = jax.tree.leaves(jax.jit(fn)(*on(cpu, *[jnp.asarray(a, jnp.float64) for a in args])))
    on_gpu = jax.tree.leaves(jax.jit(fn)(*on(gpu, *[jnp.asarray(a, dtype) for a in args])))
    on_cpu = jax.tree.leaves(jax.jit(fn)(*on(cpu, *[jnp.asarray(a, dtype) for a in args])))
    least = floor[jnp.dtype(dtype).name]
    for g, c, r in zip(on_gpu, on_cpu, ref, strict=True):
        assert next(iter(g.devices())).platform == "gpu"
        assert rel_err(g, r) <= max(2 * rel_err(c, r), least), (rel_err(g, r), rel_err(c, r))
