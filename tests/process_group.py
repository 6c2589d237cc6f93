"""Starting a `jax.distributed` job on localhost for a test: N copies of a worker
script, each `python WORKER PROCESS_ID NUM_PROCESSES PORT *args`, with a time limit
on the whole group (a hang is a failure of the test, never of the suite)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

#: Why a job cannot run here, or None: jaxlib builds the CPU collectives that
#: `jax.distributed` uses across processes (gloo) for Linux and macOS only; on
#: Windows creating them raises "make_gloo_tcp_collectives only implemented for
#: linux and macos".
NO_CPU_COLLECTIVES = (
    "jaxlib has no CPU collectives across processes on Windows (gloo: Linux and macOS only)"
    if sys.platform == "win32"
    else None
)


@dataclass(frozen=True)
class Finished:
    """One worker's end: its exit status (None: killed at the time limit) and output."""

    returncode: int | None
    log: str


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_workers(worker: Path, n: int, *args: str, timeout_s: float, local_devices: int) -> list[Finished]:
    """Run `n` processes of `worker` with `local_devices` CPU devices each; wait at most
    `timeout_s` for all of them, then kill those still running (returncode None).
    Skips the test where jaxlib has no CPU collectives across processes."""
    if NO_CPU_COLLECTIVES is not None:
        pytest.skip(NO_CPU_COLLECTIVES)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={local_devices}"
    env["JAX_PLATFORMS"] = "cpu"
    procs = [
        subprocess.Popen(
            [sys.executable, str(worker), str(pid), str(n), str(port), *args],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for pid in range(n)
    ]
    deadline = time.monotonic() + timeout_s
    done: list[Finished] = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            done.append(Finished(p.returncode, out))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            done.append(Finished(None, out))
    return done


def describe(done: list[Finished]) -> str:
    """Every worker's status and the end of its output, for an assertion message."""
    return "\n".join(f"--- process {i}: returncode {f.returncode}\n{f.log[-3000:]}" for i, f in enumerate(done))
