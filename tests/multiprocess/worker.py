"""One process of the two-process test: `python worker.py PROCESS_ID 2 PORT OUT_DIR`.

Runs sharded xr.kepler and xr.rms_norm (forward and grad, for x of shape
(tokens, hidden) and (batch, seq, hidden) with a 1-D weight) on a global 2x4 mesh that
spans both processes (4 CPU devices each), with jax's own multi-host runtime and
gloo CPU collectives on localhost, and saves its results for the parent to compare
with a single-process computation.
"""

from __future__ import annotations

import os
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

import xla_ffi_rs as xr


def global_array(data: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """The global array `data`, each process supplying its addressable shards."""
    return jax.make_array_from_callback(data.shape, sharding, lambda idx: data[idx])


def main() -> None:
    pid, port, out = int(sys.argv[1]), int(sys.argv[3]), sys.argv[4]
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.config.update("jax_enable_x64", True)
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=pid, initialization_timeout=60
    )
    assert jax.device_count() == 8 and jax.local_device_count() == 4, jax.devices()
    mesh = jax.make_mesh((2, 4), ("proc", "dev"))

    rng = np.random.default_rng(0)  # the same data in every process
    m = rng.uniform(-10, 10, (8, 16))
    e = rng.uniform(0, 0.95, (8, 16))
    x = rng.standard_normal((8, 4, 32))
    w = rng.standard_normal(32)
    t = rng.standard_normal((16, 32))  # (tokens, hidden), the same weight

    sh2 = NamedSharding(mesh, P("proc", "dev"))
    sh3 = NamedSharding(mesh, P("proc", "dev", None))
    rep = NamedSharding(mesh, P())
    m_g, e_g = global_array(m, sh2), global_array(e, sh2)
    x_g, w_g = global_array(x, sh3), global_array(w, rep)
    t_g = global_array(t, NamedSharding(mesh, P(("proc", "dev"), None)))
    # Tensor parallel: the hidden axis split over both processes' devices, so the
    # per-row all-reduce crosses processes.
    t_tp = global_array(t, NamedSharding(mesh, P(None, ("proc", "dev"))))

    sin_e, cos_e = jax.jit(xr.kepler)(m_g, e_g)
    y = jax.jit(lambda x, w: xr.rms_norm(x, w, eps=1e-5))(x_g, w_g)
    loss = lambda x, w: jnp.sum(jnp.sin(xr.rms_norm(x, w, eps=1e-5)))  # noqa: E731
    gx, gw = jax.jit(jax.grad(loss, argnums=(0, 1)))(x_g, w_g)
    ty = jax.jit(lambda t, w: xr.rms_norm(t, w, eps=1e-5))(t_g, w_g)
    tgx, tgw = jax.jit(jax.grad(loss, argnums=(0, 1)))(t_g, w_g)
    tp_y = jax.jit(lambda t, w: xr.rms_norm(t, w, eps=1e-5))(t_tp, w_g)
    tp_gx, tp_gw = jax.jit(jax.grad(loss, argnums=(0, 1)))(t_tp, w_g)

    outs = {"sin_e": sin_e, "cos_e": cos_e, "y": y, "gx": gx, "gw": gw, "ty": ty, "tgx": tgx, "tgw": tgw}
    outs |= {"tp_y": tp_y, "tp_gx": tp_gx, "tp_gw": tp_gw}
    results = {name: np.asarray(multihost_utils.process_allgather(v, tiled=True)) for name, v in outs.items()}
    np.savez(os.path.join(out, f"proc{pid}.npz"), **results)  # type: ignore[arg-type]
    jax.distributed.shutdown()


if __name__ == "__main__":
    main()
