"""One process of a jax.distributed job fails on our op: that process says why in our
words (or JAX's, naming our target, where it never imported xla_ffi_rs), and the job
ends instead of hanging, once `shutdown_timeout_seconds` has passed (3 s here; JAX's
default is 300 s: docs/sharding.md, "Several processes")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from process_group import describe, run_workers

WORKER = Path(__file__).parent / "multiprocess" / "failing_worker.py"
TIMEOUT_S = 120

CASES = {
    "wrong_weight": (
        "ValueError",
        "rms_norm_fwd: operand 1 (weight): expected shape [16]",
        "got [15]",
    ),
    "raising_python_op": (
        "xla_ffi_rs.python_call: op 'python_op[fails_in_process_1]' raised ValueError",
        "no data for this block",
    ),
    "not_imported": ("NOT_FOUND: No FFI handler registered for xla_ffi_rs.",),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_one_failing_process_ends_the_job(case: str, tmp_path: Path) -> None:
    done = run_workers(WORKER, 2, case, str(tmp_path), timeout_s=TIMEOUT_S, local_devices=2)
    assert all(f.returncode is not None for f in done), f"the job hung:\n{describe(done)}"
    assert all(f.returncode != 0 for f in done), describe(done)
    assert all("started" in f.log for f in done), describe(done)
    # No process got a result (a traceback quotes the line that prints it, indented).
    assert not any(re.search(r"^RESULT=", f.log, re.MULTILINE) for f in done), describe(done)
    for words in CASES[case]:
        assert words in done[1].log, describe(done)
