"""One process of the two-process ops test: `python ops_worker.py PROCESS_ID 2 PORT OUT_DIR`.

Under `jax.distributed` (2 processes on localhost, 2 CPU devices each, gloo), on a
mesh of auto axes built as most training code builds it
(`Mesh(np.array(jax.devices()).reshape(2, 2), ("data", "model"))`) and on one of
`jax.make_mesh` (explicit axes), runs: `kepler`, `rms_norm` (forward, `grad`,
`vmap`), `rms_norm_inplace` (donated), a `binding` op (`scale`) and a `python_op`
under `jit` with `NamedSharding`, and under `shard_map`; then a program exported in
process 0 and deserialized and called in both. Each result is gathered with
`process_allgather` and compared in this process with float64 NumPy; the compiled
programs are checked for gathers. "data" spans the two processes, so every split of
it moves data between them. Failures are printed and make the exit status 1; the
gathered results, the python_op's registry key and the blocks its function saw go to
OUT_DIR/procN.npz for the parent to compare across processes.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

jax.config.update("jax_enable_x64", True)
PID, N, PORT, OUT = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
jax.distributed.initialize(
    coordinator_address=f"127.0.0.1:{PORT}",
    num_processes=N,
    process_id=PID,
    initialization_timeout=60,
    shutdown_timeout_seconds=20,
)

import xla_ffi_rs as xr  # noqa: E402  (after initialize, as a user's script may import it before: both work)
from xla_ffi_rs import binding, examples, python_op  # noqa: E402

examples.register()
SCALE = binding.ops(xr.declarations(), scale={})["scale"]

if PID == 1:
    # Another op registered first in this process only: the registry keys (and so the
    # lowered programs) differ between the processes in more than the process tag.
    _other = python_op(np.cos, abstract_eval=lambda x: x, num_batch_dims=1)
    _other(np.ones(2))

SEEN: list[tuple[int, ...]] = []


def sine(x: np.ndarray) -> np.ndarray:
    SEEN.append(x.shape)
    return np.sin(x)


SINE = python_op(sine, abstract_eval=lambda x: x, num_batch_dims=1)
EPS = 1e-5
GATHER = re.compile(r"=\s*(\S+)\s+all-gather(?:-start)?\(")
FAILURES: list[str] = []
RESULTS: dict[str, np.ndarray] = {}


def rms_norm_np(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return x / np.sqrt((x**2).mean(-1, keepdims=True) + EPS) * w


def rms_norm_grad_np(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The gradient of sum(sin(rms_norm(x, w))) wrt x and w."""
    r = 1 / np.sqrt((x**2).mean(-1, keepdims=True) + EPS)
    g = np.cos(x * r * w)
    gw = (g * x * r).sum(tuple(range(x.ndim - 1)))
    gx = r * w * g - x * r**3 * (g * w * x).sum(-1, keepdims=True) / x.shape[-1]
    return gx, gw


def kepler_np(m: np.ndarray, e: np.ndarray | float) -> tuple[np.ndarray, np.ndarray]:
    big_e = m.copy()
    for _ in range(60):
        big_e -= (big_e - e * np.sin(big_e) - m) / (1 - e * np.cos(big_e))
    return np.sin(big_e), np.cos(big_e)


def loss(x: jax.Array, w: jax.Array) -> jax.Array:
    return jnp.sum(jnp.sin(xr.rms_norm(x, w, eps=EPS)))


def scale_and_grad(v: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The binding op `scale` (3 v) and the gradient of sum(scale(v) * v) (6 v)."""
    return SCALE(v, factor=3.0)[0], jax.grad(lambda u: (SCALE(u, factor=3.0)[0] * u).sum())(v)


def on(mesh: Mesh, a: np.ndarray, spec: P) -> jax.Array:
    """The global array `a`, each process supplying its addressable shards."""
    return jax.make_array_from_callback(a.shape, NamedSharding(mesh, spec), lambda idx: a[idx])


def gathered(v: jax.Array) -> np.ndarray:
    return np.asarray(multihost_utils.process_allgather(v, tiled=True))


def check(name: str, fn: Callable[..., Any], args: tuple[Any, ...], want: Any, gathers: set[str], **jit: Any) -> None:
    """`jit(fn)(*args)` gathered equals `want` (float64 NumPy, rtol 1e-10), and the
    compiled program all-gathers nothing but values of the shapes in `gathers`."""
    try:
        compiled = jax.jit(fn, **jit).lower(*args).compile()
        hlo = compiled.as_text() or ""
        got = jax.tree.leaves(jax.tree.map(gathered, compiled(*args)))
        for i, (g, w) in enumerate(zip(got, jax.tree.leaves(want), strict=True)):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12, err_msg=name)
            RESULTS[f"{name}/{i}"] = g
        extra = sorted(set(GATHER.findall(hlo)) - gathers)
        assert not extra, f"{name}: the compiled program all-gathers {extra}"
    except Exception as err:  # every case runs; all failures are reported
        FAILURES.append(f"{name}: {type(err).__name__}: {str(err)[:2000]}")


def main() -> None:
    assert jax.device_count() == 4 and jax.local_device_count() == 2, jax.devices()
    auto = Mesh(np.array(jax.devices()).reshape(2, 2), ("data", "model"))
    explicit = jax.make_mesh((2, 2), ("data", "model"))
    rng = np.random.default_rng(0)  # the same data in every process
    m, e = rng.uniform(-10, 10, (8, 4)), rng.uniform(0, 0.95, (8, 4))
    x, w = rng.standard_normal((8, 16)), rng.standard_normal(16)
    xb = rng.standard_normal((2, 8, 16))
    x32 = x.astype(np.float32)
    y, (gx, gw) = rms_norm_np(x, w), rms_norm_grad_np(x, w)
    per_example = [rms_norm_grad_np(v, w) for v in xb]
    vgx, vgw = np.stack([g for g, _ in per_example]), np.stack([g for _, g in per_example])
    # The all-gathers docs/sharding.md names: of dweight (the weight's size, per
    # example under vmap) back to a replicated weight, on explicit axes.
    dweight = {"f64[16]{0}", "f64[2,16]{0,1}", "f64[2,16]{1,0}"}

    for kind, mesh in (("auto", auto), ("explicit", explicit)):
        # rows over the processes; hidden over them (tensor parallel across hosts)
        for spec in (P("data", "model"), P("model", "data")):
            tag = f"{kind} {spec}"
            xs, ws = on(mesh, x, spec), on(mesh, w, P())
            check(f"kepler {tag}", xr.kepler, (on(mesh, m, spec), on(mesh, e, spec)), kepler_np(m, e), set())
            check(f"rms_norm {tag}", lambda x, w: xr.rms_norm(x, w, eps=EPS), (xs, ws), y, set())
            check(f"grad {tag}", jax.grad(loss, (0, 1)), (xs, ws), (gx, gw), dweight)
            xbs = on(mesh, xb, P(None, *spec))
            check(f"vmap {tag}", jax.vmap(xr.rms_norm, (0, None)), (xbs, ws), rms_norm_np(xb, w), set())
            check(f"vmap grad {tag}", jax.vmap(jax.grad(loss, (0, 1)), (0, None)), (xbs, ws), (vgx, vgw), dweight)
            check(f"inplace {tag}", xr.rms_norm_inplace, (on(mesh, x, spec), ws), y, set(), donate_argnums=0)
            check(f"scale {tag}", scale_and_grad, (on(mesh, x32, spec),), (3 * x32, 6 * x32), set())
        # python_op: the batch axis over the processes, each device its block of rows.
        check(f"python_op {kind}", SINE, (on(mesh, x, P(("data", "model"))),), np.sin(x), set())

    rows = P(("data", "model"))
    local_rms = jax.shard_map(lambda x, w: xr.rms_norm(x, w, eps=EPS), mesh=auto, in_specs=(rows, P()), out_specs=rows)
    check("shard_map rms_norm", local_rms, (on(auto, x, rows), on(auto, w, P())), y, set())
    local_sine = jax.shard_map(SINE, mesh=auto, in_specs=P("data", "model"), out_specs=P("data", "model"))
    check("shard_map python_op", local_sine, (on(auto, x, P("data", "model")),), np.sin(x), set())
    local_kepler = jax.shard_map(xr.kepler, mesh=auto, in_specs=P("data"), out_specs=P("data"))
    check("shard_map kepler", local_kepler, (on(auto, m, P("data")), on(auto, e, P("data"))), kepler_np(m, e), set())

    export_in_process_0(auto, x, w, m)
    np.savez(
        os.path.join(OUT, f"proc{PID}.npz"),
        key=np.int64(SINE.key()),
        seen=np.array(SEEN, dtype=np.int64),
        **RESULTS,  # type: ignore[arg-type]
    )
    for failure in FAILURES:
        print("FAILED", failure, flush=True)
    jax.distributed.shutdown()
    sys.exit(1 if FAILURES else 0)


def export_in_process_0(mesh: Mesh, x: np.ndarray, w: np.ndarray, m: np.ndarray) -> None:
    """Process 0 exports a sharded program (vjp_order=1); both processes deserialize
    it and call and differentiate it on their global arrays."""
    path = os.path.join(OUT, "model.jaxexport")
    xsh, rep = NamedSharding(mesh, P("data", "model")), NamedSharding(mesh, P())
    xs, ws, ms = on(mesh, x, P("data", "model")), on(mesh, w, P()), on(mesh, m, P("data"))

    def model(x: jax.Array, w: jax.Array, m: jax.Array) -> tuple[jax.Array, jax.Array]:
        return loss(x, w), xr.kepler(m, 0.3)[0]

    if PID == 0:
        jitted = jax.jit(model, in_shardings=(xsh, rep, NamedSharding(mesh, P("data"))))
        exported = jax.export.export(jitted, disabled_checks=xr.export_checks())(xs, ws, ms)
        with open(path + ".tmp", "wb") as out:
            out.write(exported.serialize(vjp_order=1))
        os.replace(path + ".tmp", path)
    multihost_utils.sync_global_devices("exported")
    with open(path, "rb") as src:
        loaded = jax.export.deserialize(bytearray(src.read()))
    y = rms_norm_np(x, w)
    check("export value", loaded.call, (xs, ws, ms), (np.sin(y).sum(), kepler_np(m, 0.3)[0]), set())
    check(
        "export grad",
        jax.grad(lambda x, w, m: loaded.call(x, w, m)[0], (0, 1)),
        (xs, ws, ms),
        rms_norm_grad_np(x, w),
        {"f64[16]{0}"},
    )


if __name__ == "__main__":
    main()
