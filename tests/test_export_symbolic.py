"""``jax.export`` with symbolic dimensions (shape polymorphism): one artifact called
at several concrete shapes (values against float64 NumPy), under ``jax.vmap``,
differentiated through a serialized ``vjp_order=1`` artifact in a fresh process;
a mismatch names the symbolic dimensions (never a stand-in size); the CUDA
backward's workspace rows computed symbolically as the Rust rule computes them;
a ``python_op`` refused by jax.export's own check."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr
from helpers import kepler_solve_np, rms_norm_bwd_np, rms_norm_np
from xla_ffi_rs import binding, examples
from xla_ffi_rs.ops.rms_norm import bwd_workspace_aval, bwd_workspace_rows

F32 = jnp.float32
EPS = 1e-5
ROOT = Path(__file__).resolve().parent.parent


def _specs(*shapes: str, constraints: tuple[str, ...] = ()) -> list[jax.ShapeDtypeStruct]:
    """float32 specs of ``shapes`` ("b, n"), their symbols in one scope."""
    scope = jax.export.SymbolicScope(constraints)
    return [jax.ShapeDtypeStruct(jax.export.symbolic_shape(s, scope=scope), F32) for s in shapes]


def _export(fn: Any, *specs: Any, **kw: Any) -> Any:
    return jax.export.export(jax.jit(fn), disabled_checks=xr.export_checks(), **kw)(*specs)


def _rms(x: Any, w: Any) -> Any:
    return rms_norm_np(x, w, EPS)[0]


def _kepler(m: Any, e: Any) -> Any:
    big_e = kepler_solve_np(m, e)
    return np.sin(big_e), np.cos(big_e)


def _scale_op() -> Any:
    examples.register()
    return binding.op(xr.declarations()["xla_ffi_rs.examples.scale"])


def _cases() -> list[Any]:
    scale = _scale_op()
    rms = lambda x, w: xr.rms_norm(x, w, eps=EPS)  # noqa: E731
    return [
        pytest.param(rms, ("b, n", "n"), (), [(1, 3), (5, 7), (16, 4)], _rms, id="rms_norm-b-n"),
        pytest.param(rms, ("b, 4*k", "4*k"), (), [(2, 4), (3, 12)], _rms, id="rms_norm-b-4k"),
        pytest.param(rms, ("b, n", "n"), ("n >= 2", "b <= 64"), [(1, 2), (64, 5)], _rms, id="rms_norm-constraints"),
        pytest.param(rms, ("b, 2, n", "2, n"), (), [(3, 2, 5), (1, 2, 1)], _rms, id="rms_norm-2d-weight"),
        pytest.param(
            lambda x, w: xr.rms_norm_inplace(x, w, eps=EPS), ("b, n", "n"), (), [(4, 6), (9, 2)], _rms, id="inplace"
        ),
        pytest.param(xr.kepler, ("b", "b"), (), [(1,), (7,), (33,)], _kepler, id="kepler"),
        pytest.param(
            lambda x: scale(x, factor=2.5)[0], ("b, 4",), (), [(1, 4), (6, 4)], lambda x: 2.5 * x, id="binding"
        ),
    ]


def _inputs(rng: np.random.Generator, n_args: int, shape: tuple[int, ...], ref: Any) -> list[np.ndarray]:
    if ref is _kepler:
        return [rng.uniform(-7, 7, shape).astype(np.float32), rng.uniform(0, 0.9, shape).astype(np.float32)]
    x = rng.standard_normal(shape).astype(np.float32)
    return [x] if n_args == 1 else [x, rng.uniform(0.5, 1.5, shape[1:]).astype(np.float32)]


@pytest.mark.parametrize(("fn", "shapes", "constraints", "calls", "ref"), _cases())
def test_one_symbolic_export_serves_every_shape(fn: Any, shapes: Any, constraints: Any, calls: Any, ref: Any) -> None:
    exported = _export(fn, *_specs(*shapes, constraints=constraints))
    assert not all(isinstance(d, int) for d in exported.out_avals[0].shape)
    rng = np.random.default_rng(3)
    for shape in calls:
        args = _inputs(rng, len(shapes), shape, ref)
        got = exported.call(*args)
        want = ref(*args)
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            assert g.shape == w.shape
            np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=2e-5, atol=2e-5)


def _vmap_cases() -> list[Any]:
    rms = lambda x, w: xr.rms_norm(x, w, eps=EPS)  # noqa: E731
    scale = _scale_op()
    m_e = lambda r, s: [r.uniform(-7, 7, s).astype(np.float32), r.uniform(0, 0.9, s).astype(np.float32)]  # noqa: E731
    x_w = lambda r, s, w: [r.standard_normal(s).astype(np.float32), r.uniform(0.5, 1.5, w).astype(np.float32)]  # noqa: E731
    return [
        pytest.param(
            jax.vmap(xr.kepler),
            ("b, 3", "b, 3"),
            [lambda r: m_e(r, (2, 3)), lambda r: m_e(r, (5, 3))],
            _kepler,
            id="kepler",
        ),
        pytest.param(
            jax.vmap(lambda m: xr.kepler(m, 0.25), in_axes=1),
            ("3, b",),
            [lambda r: m_e(r, (3, 4))[:1]],
            lambda m: tuple(a.T for a in _kepler(m, 0.25)),
            id="kepler-axis1-const-e",
        ),
        pytest.param(
            jax.vmap(rms, in_axes=(0, None)),
            ("b, 2, n", "n"),
            [lambda r: x_w(r, (3, 2, 5), (5,)), lambda r: x_w(r, (1, 2, 2), (2,))],
            _rms,
            id="rms_norm",
        ),
        pytest.param(
            jax.vmap(rms),
            ("b, 2, n", "b, n"),
            [lambda r: x_w(r, (3, 2, 5), (3, 5))],
            lambda x, w: np.stack([_rms(xi, wi) for xi, wi in zip(x, w, strict=True)]),
            id="rms_norm-batched-weight",
        ),
        pytest.param(
            jax.vmap(lambda x: scale(x, factor=2.0)[0]),
            ("b, 4",),
            [lambda r: x_w(r, (3, 4), ())[:1]],
            lambda x: 2 * x.astype(np.float64),
            id="binding",
        ),
    ]


@pytest.mark.parametrize(("fn", "shapes", "calls", "ref"), _vmap_cases())
def test_vmap_over_a_symbolic_batch_exports_and_runs(fn: Any, shapes: Any, calls: Any, ref: Any) -> None:
    exported = _export(fn, *_specs(*shapes))
    rng = np.random.default_rng(5)
    for make in calls:
        args = make(rng)
        got, want = exported.call(*args), ref(*args)
        for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
            assert g.shape == np.shape(w)
            np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize(
    ("shapes", "words"),
    [
        (("b, n", (8,)), ("operand 1 (weight)", "expected shape [n]", "got [8]", "`n` is a symbolic dimension")),
        (("b, n, m", "n"), ("operand 1 (weight)", "expected shape [m]", "got [n]", "`m`, `n` are symbolic")),
        (("b, 4*k", "k"), ("expected shape [4*k]", "got [k]", "`4*k`, `k` are symbolic")),
        (
            ("b, n", "b, n, n"),
            ("operand 0 (x): expected rank at least 3", "(shape [b, n])", "symbolic dimensions of jax.export)"),
        ),
    ],
)
def test_a_mismatch_names_the_symbolic_dimensions(shapes: Any, words: Any) -> None:
    scope = jax.export.SymbolicScope()
    specs = [
        jax.ShapeDtypeStruct(jax.export.symbolic_shape(s, scope=scope) if isinstance(s, str) else s, F32)
        for s in shapes
    ]
    with pytest.raises(ValueError) as info:
        _export(xr.rms_norm, *specs)
    message = str(info.value)
    assert message.startswith("xla_ffi_rs.rms_norm_fwd: "), message
    for w in words:
        assert w in message, message
    assert not re.search(r"\d{6,}", message), message  # no stand-in size


def test_the_cuda_workspace_rows_follow_the_rust_rule_symbolically() -> None:
    """bwd_workspace_aval of a symbolic batch, evaluated by jax at concrete sizes,
    equals the Rust ``bwd_workspace_rows`` (div_ceil(16), clamped to [1, 1024])."""
    b, n = jax.export.symbolic_shape("b, n")
    rows = bwd_workspace_aval(jax.core.ShapedArray((b, n), F32), jax.core.ShapedArray((n,), F32)).shape[0]
    assert not isinstance(rows, int)

    def workspace(x: jax.Array) -> jax.Array:
        aval = bwd_workspace_aval(jax.typeof(x), jax.core.ShapedArray(x.shape[1:], x.dtype))
        return jnp.zeros(aval.shape[:1], jnp.int8)

    exported = jax.export.export(jax.jit(workspace))(*_specs("b, 1"))
    for size in (1, 15, 16, 17, 100, 16 * 1024, 16 * 1024 + 1, 40000):
        got = exported.call(np.zeros((size, 1), np.float32)).shape[0]
        assert got == bwd_workspace_rows(size), size


def test_a_cuda_lowering_of_the_gradient_carries_the_symbolic_workspace() -> None:
    grad = jax.grad(lambda x, w: xr.rms_norm(x, w).sum(), argnums=(0, 1))
    exported = _export(grad, *_specs("b, n", "n"), platforms=("cpu", "cuda"))
    text = exported.mlir_module()
    assert text.count("stablehlo.custom_call @xla_ffi_rs.rms_norm_bwd") == 2  # the CPU and CUDA branches
    assert "indices_of_shape_operands" in text


LOADER = """
import sys
import jax
import numpy as np
import xla_ffi_rs
folder = sys.argv[1]
exported = jax.export.deserialize(open(folder + "/model.jaxexport", "rb").read())
for k, shape in enumerate([(2, 3), (7, 5)]):
    rng = np.random.default_rng(k)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.uniform(0.5, 1.5, shape[1:]).astype(np.float32)
    dx, dw = jax.grad(exported.call, argnums=(0, 1))(x, w)
    np.savez(f"{folder}/out{k}.npz", x=x, w=w, y=np.asarray(exported.call(x, w)), dx=np.asarray(dx), dw=np.asarray(dw))
"""


def test_a_fresh_process_calls_and_differentiates_a_symbolic_export(tmp_path: Path) -> None:
    def model(x: jax.Array, w: jax.Array) -> jax.Array:
        return jnp.sum(xr.rms_norm(x, w, eps=EPS) * x)

    exported = _export(model, *_specs("b, n", "n"))
    (tmp_path / "model.jaxexport").write_bytes(bytes(exported.serialize(vjp_order=1)))
    done = subprocess.run(
        [sys.executable, "-c", LOADER, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for k in range(2):
        out = np.load(tmp_path / f"out{k}.npz")
        x, w = out["x"], out["w"]
        y = _rms(x, w)
        # d/dx sum(y * x) = y + vjp_x(y, dy = x); d/dw = vjp_w(dy = x)
        dx_part, dw = rms_norm_bwd_np(x, x, w, EPS)
        np.testing.assert_allclose(out["y"], np.sum(y * x), rtol=2e-5)
        np.testing.assert_allclose(out["dx"], y + dx_part, rtol=2e-4, atol=2e-4)
        np.testing.assert_allclose(out["dw"], dw, rtol=2e-4, atol=2e-4)


def test_a_python_op_is_refused_by_jax_export() -> None:
    """A python_op runs a Python callback: jax.export's own check refuses it (not in
    ``xr.export_checks()``), with symbolic dimensions as with concrete ones."""
    op = xr.python_op(np.sin, abstract_eval=lambda x: x)
    with pytest.raises(ValueError) as info:
        _export(op, *_specs("b"))
    assert "no compatibility guarantees" in str(info.value) and "xla_ffi_rs.python_call" in str(info.value)
