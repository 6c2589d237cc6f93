"""Shared test helpers: lowering inspection and float64 numpy references."""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import numpy as np
import pytest

KEPLER = "xla_ffi_rs.kepler"
RMS_FWD = "xla_ffi_rs.rms_norm_fwd"
RMS_BWD = "xla_ffi_rs.rms_norm_bwd"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"

#: Tests of arrays past 2**31 elements or bytes: some 8.6 GiB of memory and up to a
#: minute each, so they run only with ``XFR_BIG_TESTS=1``, one process at a time.
big_arrays = pytest.mark.skipif(
    os.environ.get("XFR_BIG_TESTS") != "1", reason="arrays past 2**31 elements or bytes: set XFR_BIG_TESTS=1"
)


def lowered(fn: Callable[..., Any], *args: Any) -> str:
    """StableHLO text of ``jit(fn)`` for ``args``."""
    return jax.jit(fn).lower(*args).as_text()


def count_calls(text: str, target: str) -> int:
    """Number of custom calls to ``target`` in lowered text."""
    return text.count(f"custom_call @{target}(")


def wrap_angle(a: np.ndarray) -> np.ndarray:
    """Map angles to (-pi, pi]."""
    return np.angle(np.exp(1j * a))


def kepler_residual(m: Any, e: Any, sin_e: Any, cos_e: Any) -> np.ndarray:
    """|E - e sin E - M| (wrapped), with E = atan2(sin E, cos E), in float64."""
    m, e = np.asarray(m, np.float64), np.asarray(e, np.float64)
    s, c = np.asarray(sin_e, np.float64), np.asarray(cos_e, np.float64)
    big_e = np.arctan2(s, c)
    return np.abs(wrap_angle(big_e - e * np.sin(big_e) - m))


def kepler_solve_np(m: Any, e: Any) -> np.ndarray:
    """E by bisection on [M' - e, M' + e] (M' = M wrapped), float64, 200 steps."""
    m = wrap_angle(np.asarray(m, np.float64))
    e = np.asarray(e, np.float64)
    m, e = np.broadcast_arrays(m, e)
    lo, hi = m - e - 1e-12, m + e + 1e-12
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        below = mid - e * np.sin(mid) - m < 0
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return 0.5 * (lo + hi)


def rms_norm_np(x: Any, w: Any, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(y, inv_rms) in float64."""
    x, w = np.asarray(x, np.float64), np.asarray(w, np.float64)
    axes = tuple(range(x.ndim - w.ndim, x.ndim))
    inv = 1.0 / np.sqrt(np.mean(x * x, axis=axes) + eps)
    return x * inv.reshape(inv.shape + (1,) * w.ndim) * w, inv


def rms_norm_bwd_np(dy: Any, x: Any, w: Any, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """(dx, dw) = vjp of y wrt (x, w) at cotangent dy, in float64."""
    dy, x, w = (np.asarray(a, np.float64) for a in (dy, x, w))
    n = w.ndim
    axes = tuple(range(x.ndim - n, x.ndim))
    _, inv = rms_norm_np(x, w, eps)
    r = inv.reshape(inv.shape + (1,) * n)
    g = dy * w
    dx = r * g - x * r**3 * np.mean(g * x, axis=axes, keepdims=True)
    dw = np.sum(dy * x * r, axis=tuple(range(x.ndim - n)))
    return dx, dw


def run_threads(work: Callable[[int], Any], n: int, timeout: float = 120.0) -> list[Any]:
    """Run ``work(i)`` for ``i`` in ``range(n)`` on ``n`` threads released together by
    a barrier; return the results in order. The first exception a thread raised is
    raised again here; a thread still running after ``timeout`` seconds fails the
    test as a deadlock."""
    barrier = threading.Barrier(n)
    results: list[Any] = [None] * n
    errors: list[BaseException] = []

    def target(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=timeout)
    assert not any(t.is_alive() for t in threads), f"deadlock: a thread ran past {timeout} s"
    if errors:
        raise errors[0]
    return results


def load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` as a module (the examples are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def assert_ffi_error(call: Callable[[], Any], target: str, words: tuple[str, ...]) -> None:
    """``call()`` fails in the FFI handler: a ``JaxRuntimeError`` whose message starts
    the handler's part with ``target:`` and contains every one of ``words``."""
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.block_until_ready(call())
    message = str(info.value)
    assert target + ":" in message, message
    for word in words:
        assert word in message, (word, message)


class Calls:
    """A function that records the positional arguments of each call in ``args``."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn, self.args = fn, []  # type: ignore[var-annotated]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.args.append(args)
        return self.fn(*args, **kwargs)


def collective_shapes(hlo: str, op: str) -> list[tuple[int, ...]]:
    """The result array shapes of every ``op`` (or ``op``-start) in compiled HLO text."""
    shapes = []
    for line in hlo.splitlines():
        found = re.search(r"=\s*(.*?)\s" + re.escape(op) + r"(-start)?\(", line)
        if found:
            for dims in re.findall(r"\w+\[([\d,]*)\]", found.group(1)):
                shapes.append(tuple(int(d) for d in dims.split(",") if d))
    return shapes
