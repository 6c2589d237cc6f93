"""A process forked (``os.fork()``, ``multiprocessing``'s "fork" start method) while
a python op's function runs on another thread: the child exits normally."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

CHILD_WAIT_S = 10


@pytest.mark.skipif(sys.platform == "win32", reason="os.fork is POSIX")
def test_a_child_forked_while_a_python_op_runs_on_another_thread_exits() -> None:
    # The child has only the forking thread: the parent's running call is not running
    # there. It stayed counted, and the child's exit (which waits for the running
    # calls, so that none enters Python while it finalizes) waited for it forever.
    code = textwrap.dedent(
        f"""
        import os, sys, threading, time, warnings
        import numpy as np
        import xla_ffi_rs

        started, release = threading.Event(), threading.Event()

        def slow(a):
            started.set()
            release.wait(30)
            return a + 1

        op = xla_ffi_rs.python_op(slow, abstract_eval=lambda a: a)
        out = []
        t = threading.Thread(target=lambda: out.append(op(np.ones(2, np.float32))))
        t.start()
        started.wait(30)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "os.fork() ... multithreaded ... deadlock"
            pid = os.fork()
        if pid == 0:
            print("child", flush=True)
            sys.exit(7)  # a normal exit: atexit handlers run
        release.set()
        t.join()
        assert out[0].tolist() == [2.0, 2.0], out
        for _ in range({CHILD_WAIT_S * 10}):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                print("exit", os.waitstatus_to_exitcode(status), flush=True)
                break
            time.sleep(0.1)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            print("exit hung", flush=True)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = sorted(done.stdout.split("\n"))
    assert lines == ["", "child", "exit 7"], done.stdout
