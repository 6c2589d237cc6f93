"""The package imported again in one process (its modules taken out of
``sys.modules``, as autoreloaders do) after its ops ran: XLA keeps the first
import's registrations, and the ops of both imports keep working."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_ops_work_after_the_package_is_imported_again() -> None:
    code = textwrap.dedent(
        """
        import sys, numpy as np, jax
        import xla_ffi_rs
        first = xla_ffi_rs.python_op(lambda x: x + 1, abstract_eval=lambda x: x)
        assert np.array_equal(first(np.ones(2)), [2, 2])
        for name in [m for m in sys.modules if m.startswith("xla_ffi_rs")]:
            del sys.modules[name]
        import xla_ffi_rs as again
        assert again is not xla_ffi_rs
        second = again.python_op(lambda x: x + 3, abstract_eval=lambda x: x)
        s, c = jax.jit(again.kepler)(np.zeros(2), np.full(2, 0.5))
        print(second(np.ones(2)).tolist(), first(np.ones(2)).tolist(), s.tolist(), c.tolist())
        """
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["[4.0,", "4.0]", "[2.0,", "2.0]", "[0.0,", "0.0]", "[1.0,", "1.0]"]
