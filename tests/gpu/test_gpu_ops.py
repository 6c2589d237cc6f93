"""The GPU suite's generic part: every op with a fixture (tests/op_fixtures.py) on the
GPU against the CPU, through its public function. Each op's own GPU tests are in
``tests/ops/<op>/test_<op>_gpu.py`` (accuracy, bad input, determinism, ...);
``scripts/gpu_smoke.sh`` runs both.

Skipped as a whole where ``jax.devices("gpu")`` is unavailable. Where a GPU is there:

* the forward for each dtype combination of the fixture: the GPU's results have the
  CPU's dtypes and are within the fixture's tolerance ``(rtol, atol)`` of them, by
  result dtype;
* ``jax.jvp`` and ``jax.grad`` in each derivative dtype of the fixture: the GPU's
  error against the CPU in float64 at most twice the CPU's (above a floor by dtype);
* ``jax.jit`` with and without command buffers (CUDA graphs), in subprocesses: the
  forward and the gradient of every op, bit-identical.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from gpu_checks import f64, gpu_and_cpu_or_skip, gpu_vs_cpu, on
from op_fixtures import OpFixture, fixtures

GPU, CPU = gpu_and_cpu_or_skip()
TESTS = Path(__file__).resolve().parent.parent

FORWARD = [(op, dtypes) for op in fixtures() for dtypes in op.gpu.dtypes]
DERIVATIVES = [(op, kind, dtype) for op in fixtures() for kind in ("jvp", "grad") for dtype in op.gpu.derivative_dtypes]


def _name(dtypes: tuple) -> str:
    return "-".join(jnp.dtype(d).name for d in dtypes)


@pytest.mark.parametrize(("op", "dtypes"), FORWARD, ids=[f"{o.name}-{_name(d)}" for o, d in FORWARD])
def test_forward_matches_cpu(op: OpFixture, dtypes: tuple) -> None:
    args = [jnp.asarray(a, d) for a, d in zip(op.inputs(np.random.default_rng(1), op.gpu.shapes), dtypes, strict=True)]
    on_gpu = jax.jit(lambda *a: op(*a))(*on(GPU, *args))
    on_cpu = op(*on(CPU, *args))
    for g, c in zip(on_gpu, on_cpu, strict=True):
        assert g.devices() == {GPU} and g.dtype == c.dtype, (g.devices(), g.dtype, c.dtype)
        rtol, atol = op.gpu.tol[jnp.dtype(g.dtype).name]
        np.testing.assert_allclose(f64(g), f64(c), rtol=rtol, atol=atol)


@pytest.mark.parametrize(
    ("op", "kind", "dtype"), DERIVATIVES, ids=[f"{o.name}-{k}-{jnp.dtype(d).name}" for o, k, d in DERIVATIVES]
)
def test_derivatives_match_cpu(op: OpFixture, kind: str, dtype: object) -> None:
    rng = np.random.default_rng(6)
    xs = op.inputs(rng, op.gpu.shapes)
    k = len(xs)
    if kind == "jvp":
        extra = tuple(rng.standard_normal(np.shape(x)) for x in xs)

        def fn(*a):
            return jax.jvp(lambda *p: op(*p), a[:k], a[k:])

    else:
        extra = tuple(rng.standard_normal(np.shape(y)) for y in op.reference(*xs))

        def fn(*a):
            return jax.grad(
                lambda *p: sum(jnp.sum(c * y) for c, y in zip(a[k:], op(*p), strict=True)), tuple(range(k))
            )(*a[:k])

    gpu_vs_cpu(fn, (*xs, *extra), dtype, GPU, CPU, dict(op.gpu.floor))


# ------------------------------------------------------------ command buffers (CUDA graphs)

_CB_SCRIPT = textwrap.dedent(
    """
    import sys, numpy as np, jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    sys.path.insert(0, sys.argv[2])  # tests/: op_fixtures and the fixtures
    from op_fixtures import fixtures
    out = sys.argv[1]
    rng = np.random.default_rng(0)
    args, steps = [], []
    for op in fixtures():
        xs = [jnp.asarray(a, d) for a, d in zip(op.inputs(rng, op.gpu.shapes), op.gpu.dtypes[0])]

        def step(*a, op=op):
            ys, vjp = jax.vjp(lambda *p: op(*p), *a)
            return (*ys, *vjp(ys))

        args.append(xs)
        steps.append(step)

    @jax.jit
    def all_ops(args):
        return [r for step, a in zip(steps, args) for r in step(*a)]

    res = None
    for _ in range(5):  # capture, then replay
        res = jax.block_until_ready(all_ops(args))
    np.savez(out, *[np.asarray(r.astype(jnp.float64)) for r in res])
    print("devices", res[0].devices())
    """
)


def _run_cb(tmp_path, flags):
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + flags).strip()
    out = tmp_path / f"cb{abs(hash(flags))}.npz"
    script = tmp_path / "cb.py"
    script.write_text(_CB_SCRIPT)
    r = subprocess.run(
        [sys.executable, str(script), str(out), str(TESTS)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, f"XLA_FLAGS={flags!r} failed:\n{r.stdout}\n{r.stderr}"
    assert "cuda" in r.stdout.lower() or "gpu" in r.stdout.lower(), r.stdout
    with np.load(out) as z:
        return [z[k] for k in sorted(z.files, key=lambda s: int(s.split("_")[1]))]


def test_jit_with_and_without_command_buffers(tmp_path):
    off = _run_cb(tmp_path, "--xla_gpu_enable_command_buffer=")
    on_ = _run_cb(tmp_path, "")  # XLA's default command buffer types include custom calls
    forced = _run_cb(tmp_path, "--xla_gpu_enable_command_buffer=+CUSTOM_CALL --xla_gpu_graph_min_graph_size=1")
    assert len(off) == len(on_) == len(forced) > 0
    for a, b, c in zip(off, on_, forced, strict=True):
        # same kernels, same order: bit-identical with and without graphs
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)
