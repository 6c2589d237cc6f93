"""Every kind of op under jax.distributed: 2 processes on localhost, 2 CPU devices each.

`multiprocess/ops_worker.py` runs kepler, rms_norm (forward, grad, vmap),
rms_norm_inplace, a binding op and a python_op on auto and explicit meshes that span
both processes, under jit and shard_map, and a program exported in process 0 and
called in both; each process compares its gathered results with float64 NumPy and
checks the compiled programs for gathers. Here: both processes ended well, hold the
same results, and the python_op ran in each process on that process's blocks only,
under registry keys that differ between the processes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from process_group import describe, run_workers

WORKER = Path(__file__).parent / "multiprocess" / "ops_worker.py"
TIMEOUT_S = 180


def test_ops_under_two_processes(tmp_path: Path) -> None:
    done = run_workers(WORKER, 2, str(tmp_path), timeout_s=TIMEOUT_S, local_devices=2)
    assert [f.returncode for f in done] == [0, 0], describe(done)
    p0, p1 = (np.load(tmp_path / f"proc{pid}.npz") for pid in (0, 1))
    names = sorted(set(p0.files) - {"key", "seen"})
    assert names == sorted(set(p1.files) - {"key", "seen"}) and len(names) > 40, names
    for name in names:
        np.testing.assert_array_equal(p0[name], p1[name], err_msg=name)
    # Each process's function saw only its own devices' blocks of x (8, 16): two
    # rows per device over 4 devices under jit (auto and explicit meshes), and the
    # (4, 8) blocks of shard_map over the 2 x 2 mesh; each of its 2 devices once per call.
    for seen in (p0["seen"], p1["seen"]):
        assert sorted(map(tuple, seen.tolist())) == [(2, 16)] * 4 + [(4, 8)] * 2, seen
    assert int(p0["key"]) != int(p1["key"])
