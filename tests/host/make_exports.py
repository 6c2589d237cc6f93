"""Exports the programs that tests/host/test_runner.py runs with xla-ffi-run, and
JAX's results for them.

Usage: ``python tests/host/make_exports.py OUT_DIR`` (jax 0.12 with this
branch's wheel installed); ``python tests/host/make_exports.py --golden
tests/host/golden`` rewrites the committed program (see its README). Writes ``OUT_DIR/<name>/model.jaxexport``, the inputs
``in0.npy, in1.npy, ...``, the expected results ``expected0.npy, ...`` and
``OUT_DIR/manifest.json``: for each program, its handler libraries and how its
results compare (``exact`` where the program is only this project's targets,
``ulp2`` where XLA's own fused code takes part).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import xla_ffi_rs as xr  # noqa: E402
from xla_ffi_rs import examples  # noqa: E402

EPS = 1e-5


def kepler_fwd(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    return xr.kepler(m, e)


def kepler_grad(m: jax.Array, e: jax.Array) -> tuple[jax.Array, jax.Array]:
    def loss(m: jax.Array, e: jax.Array) -> jax.Array:
        sin_e, cos_e = xr.kepler(m, e)
        return jnp.sum(sin_e * cos_e)

    return jax.grad(loss, argnums=(0, 1))(m, e)


def rms_norm_fwd(x: jax.Array, w: jax.Array) -> jax.Array:
    return xr.rms_norm(x, w, eps=EPS)


def rms_norm_grad(x: jax.Array, w: jax.Array) -> tuple[jax.Array, jax.Array]:
    return jax.grad(lambda x, w: jnp.sum(xr.rms_norm(x, w, eps=EPS) * x), argnums=(0, 1))(x, w)


def stateful_scale(x: jax.Array) -> jax.Array:
    """The example bundle (instantiate + execute, with state)."""
    call = jax.ffi.ffi_call("xla_ffi_rs.examples.scale", jax.ShapeDtypeStruct(x.shape, x.dtype))
    return call(x, factor=np.float32(2.5))


def plugin_scale(x: jax.Array) -> jax.Array:
    """examples/plugin's `plugin.scale` (not registered with JAX here: exported by
    name only, its expected result comes from NumPy)."""
    return jax.ffi.ffi_call("plugin.scale", jax.ShapeDtypeStruct(x.shape, x.dtype))(x, factor=np.float64(-1.5))


def plugin_scale_inf(x: jax.Array) -> jax.Array:
    """`plugin.scale` with an attribute its handler refuses (an error at run time)."""
    return jax.ffi.ffi_call("plugin.scale", jax.ShapeDtypeStruct(x.shape, x.dtype))(x, factor=np.float64(np.inf))


def unused_input(m: jax.Array, unused: jax.Array, e: jax.Array) -> jax.Array:
    """An input the module drops (module_kept_var_idx) must still be given and checked."""
    del unused
    return xr.kepler(m, e)[0]


def mixed(m: jax.Array, e: jax.Array, x: jax.Array, w: jax.Array, n: jax.Array, z: jax.Array) -> tuple[jax.Array, ...]:
    """Two targets in one program; float64 scalars (rank 0), bfloat16, int32 and a
    zero-sized float32 input; several outputs."""
    sin_e, cos_e = xr.kepler(m, e)
    return sin_e, cos_e, xr.rms_norm(x, w, eps=EPS), n * 2, xr.kepler(z, z)[0]


def vmapped_rms_norm(x: jax.Array, w: jax.Array) -> jax.Array:
    return jax.vmap(lambda x: xr.rms_norm(x, w, eps=EPS))(x)


def pytree(d: dict[str, jax.Array], t: tuple[jax.Array, tuple[jax.Array]]) -> tuple[dict[str, Any], jax.Array]:
    """Dict and nested-tuple inputs and outputs: the runner takes and writes them
    flattened in `jax.tree.leaves` order (a dict's by sorted key: "e" before "m",
    not the order they were written in)."""
    sin_e, cos_e = xr.kepler(d["m"], d["e"])
    return {"sin": sin_e, "pair": (cos_e, t[1][0] * 2)}, t[0]


def side_effect(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The Kepler target called with has_side_effect=True (not dropped by XLA)."""
    out = (jax.ShapeDtypeStruct(x.shape, x.dtype),) * 2
    sin_e, cos_e = jax.ffi.ffi_call("xla_ffi_rs.kepler", out, has_side_effect=True)(x, x * 0 + 0.5)
    return sin_e, cos_e


def many_inputs(*xs: jax.Array) -> jax.Array:
    """More inputs than a few (24)."""
    return sum((xr.kepler(x, x * 0 + 0.5)[0] for x in xs), jnp.zeros_like(xs[0]))


def exported_of(
    fn: Callable[..., Any],
    args: Sequence[Any],
    extra_checks: Sequence[str] = (),
    platforms: Sequence[str] | None = None,
) -> jax.export.Exported:
    checks = xr.export_checks() + [jax.export.DisabledSafetyCheck.custom_call(n) for n in extra_checks]
    return jax.export.export(jax.jit(fn), disabled_checks=checks, platforms=platforms)(*args)


def export(
    fn: Callable[..., Any],
    args: Sequence[Any],
    extra_checks: Sequence[str] = (),
    platforms: Sequence[str] | None = None,
) -> bytes:
    return bytes(exported_of(fn, args, extra_checks, platforms).serialize())


def golden_model(m: jax.Array, e: jax.Array, x: jax.Array, w: jax.Array) -> tuple[jax.Array, ...]:
    """The committed program (tests/host/golden): only this project's targets."""
    sin_e, cos_e = xr.kepler(m, e)
    return sin_e, cos_e, xr.rms_norm(x, w, eps=EPS)


def write_golden(folder: Path) -> None:
    """Writes tests/host/golden: run once per release that changes the export
    format or the targets' ABI, and commit; the test keeps running the old one."""
    rng = np.random.default_rng(5)
    args = [rng.uniform(-7.0, 7.0, 6), rng.uniform(0.0, 0.9, 6)]
    args += [rng.standard_normal((2, 4)).astype(np.float32), rng.uniform(0.5, 1.5, 4).astype(np.float32)]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.jaxexport").write_bytes(export(golden_model, args))
    for i, a in enumerate(args):
        np.save(folder / f"in{i}.npy", a)
    results = jax.jit(golden_model)(*args)
    for i, r in enumerate(results):
        np.save(folder / f"expected{i}.npy", np.asarray(r))
    meta = {"jax_version": jax.__version__, "xla_ffi_rs_version": xr.__version__, "outputs": len(results)}
    (folder / "manifest.json").write_text(json.dumps(meta, indent=1) + "\n")


def main(out: Path) -> None:
    examples.register()
    rng = np.random.default_rng(11)
    m = rng.uniform(-7.0, 7.0, 16)
    e = rng.uniform(0.0, 0.9, 16)
    x32 = rng.standard_normal((4, 8)).astype(np.float32)
    w32 = rng.uniform(0.5, 1.5, 8).astype(np.float32)
    x64 = rng.standard_normal((3, 5))

    programs: dict[str, dict[str, Any]] = {
        "kepler_fwd": {"fn": kepler_fwd, "args": [m, e], "compare": "exact", "handlers": ["ops"]},
        "kepler_fwd_f32": {
            "fn": kepler_fwd,
            "args": [m.astype(np.float32), e.astype(np.float32)],
            "compare": "exact",
            "handlers": ["ops"],
        },
        "kepler_grad": {"fn": kepler_grad, "args": [m, e], "compare": "ulp2", "handlers": ["ops"]},
        "rms_norm_fwd": {"fn": rms_norm_fwd, "args": [x32, w32], "compare": "exact", "handlers": ["ops"]},
        "rms_norm_grad": {"fn": rms_norm_grad, "args": [x32, w32], "compare": "ulp2", "handlers": ["ops"]},
        "stateful_scale": {"fn": stateful_scale, "args": [x32], "compare": "exact", "handlers": ["ops"]},
        "unused_input": {"fn": unused_input, "args": [m, x32, e], "compare": "exact", "handlers": ["ops"]},
        "mixed": {
            "fn": mixed,
            "args": [
                np.float64(1.25),
                np.float64(0.5),
                x32.astype(jnp.bfloat16),
                w32.astype(jnp.bfloat16),
                np.arange(3, dtype=np.int32),
                np.zeros(0, np.float32),
            ],
            "compare": "exact",
            "handlers": ["ops"],
        },
        "vmapped_rms_norm": {
            "fn": vmapped_rms_norm,
            "args": [rng.standard_normal((3, 4, 8)).astype(np.float32), w32],
            "compare": "exact",
            "handlers": ["ops"],
        },
        # For CPU and CUDA: the module takes the platform's index first, an int64
        # scalar here (jax_enable_x64 is on), and the runner must pass that type.
        "multi_platform": {
            "fn": kepler_fwd,
            "args": [m, e],
            "compare": "exact",
            "handlers": ["ops"],
            "platforms": ("cpu", "cuda"),
        },
        # For CUDA only: refused on CPU, as jax.export's `call` refuses it.
        "cuda_only": {
            "fn": kepler_fwd,
            "args": [m, e],
            "compare": "error",
            "handlers": ["ops"],
            "expected": [],
            "platforms": ("cuda",),
        },
        "pytree": {
            "fn": pytree,
            "args": [{"m": m, "e": e}, (x32, (w32,))],
            "compare": "exact",
            "handlers": ["ops"],
        },
        "side_effect": {"fn": side_effect, "args": [m], "compare": "exact", "handlers": ["ops"]},
        "many_inputs": {
            "fn": many_inputs,
            "args": [rng.uniform(-3.0, 3.0, 4) for _ in range(24)],
            "compare": "ulp2",
            "handlers": ["ops"],
        },
        "plugin_scale": {
            "fn": plugin_scale,
            "args": [x64],
            "compare": "exact",
            "handlers": ["plugin"],
            "expected": [x64 * -1.5],
            "checks": ["plugin.scale"],
        },
        "plugin_scale_inf": {
            "fn": plugin_scale_inf,
            "args": [x64],
            "compare": "error",
            "handlers": ["plugin"],
            "expected": [],
            "checks": ["plugin.scale"],
        },
    }
    manifest: dict[str, Any] = {"jax_version": jax.__version__, "programs": {}}
    for name, p in programs.items():
        folder = out / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model.jaxexport").write_bytes(export(p["fn"], p["args"], p.get("checks", ()), p.get("platforms")))
        # One .npy per leaf of the arguments, in jax.tree.leaves order.
        leaves = jax.tree.leaves(p["args"])
        for i, a in enumerate(leaves):
            np.save(folder / f"in{i}.npy", a)
        expected = p.get("expected")
        if expected is None:
            expected = jax.tree.leaves(jax.jit(p["fn"])(*p["args"]))
        for i, r in enumerate(expected):
            np.save(folder / f"expected{i}.npy", np.asarray(r))
        manifest["programs"][name] = {
            "inputs": len(leaves),
            "outputs": len(expected),
            "compare": p["compare"],
            "handlers": p["handlers"],
        }
    # exported.vjp(): the backward pass of an export, itself exported; its inputs
    # are the primal inputs, then one cotangent per output.
    vjp = exported_of(kepler_fwd, [m, e]).vjp()
    vjp_args = [m, e, rng.standard_normal(16), rng.standard_normal(16)]
    folder = out / "kepler_vjp"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.jaxexport").write_bytes(bytes(vjp.serialize()))
    for i, a in enumerate(vjp_args):
        np.save(folder / f"in{i}.npy", a)
    vjp_results = jax.tree.leaves(vjp.call(*vjp_args))
    for i, r in enumerate(vjp_results):
        np.save(folder / f"expected{i}.npy", np.asarray(r))
    manifest["programs"]["kepler_vjp"] = {
        "inputs": len(vjp_args),
        "outputs": len(vjp_results),
        "compare": "ulp2",
        "handlers": ["ops"],
    }
    # The text form of one program, for the runner's StableHLO-text path.
    text = jax.jit(rms_norm_fwd).lower(x32, w32).as_text()
    (out / "rms_norm_fwd" / "model.mlir").write_text(text)
    # ... and its bytecode, as the jax.export file holds it (the runner's bytecode path).
    exported = jax.export.export(jax.jit(rms_norm_fwd), disabled_checks=xr.export_checks())(x32, w32)
    (out / "rms_norm_fwd" / "model.mlirbc").write_bytes(exported.mlir_module_serialized)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--golden"]:
        examples.register()
        write_golden(Path(sys.argv[2]))
    else:
        main(Path(sys.argv[1]))
