"""One process of a two-process job in which process 1 alone fails:
`python failing_worker.py PROCESS_ID 2 PORT CASE OUT_DIR`.

After a first collective (as any real job has made one), both processes run the
same program, except that process 1

* `wrong_weight`: passes rms_norm a weight of 15 elements for rows of 16;
* `raising_python_op`: has a python_op whose function raises there;
* `not_imported`: never imported xla_ffi_rs, and calls a program that process 0
  exported (with kepler and rms_norm).

The error is not caught: process 1 ends, and `jax.distributed`'s shutdown barrier
(`shutdown_timeout_seconds`, 300 s by default, 3 here) ends process 0, which is
waiting for process 1 in a collective of the program.
"""

from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

PID, N, PORT, CASE, OUT = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
jax.distributed.initialize(
    coordinator_address=f"127.0.0.1:{PORT}",
    num_processes=N,
    process_id=PID,
    initialization_timeout=60,
    shutdown_timeout_seconds=3,
)
if CASE != "not_imported" or PID == 0:
    import xla_ffi_rs as xr
    from xla_ffi_rs import python_op

mesh = Mesh(np.array(jax.devices()).reshape(2, 2), ("data", "model"))
x = np.random.default_rng(0).standard_normal((8, 16), np.float32)
xs = jax.make_array_from_callback(x.shape, NamedSharding(mesh, P("data", "model")), lambda idx: x[idx])
multihost_utils.sync_global_devices("started")
print("started", flush=True)

if CASE == "wrong_weight":
    w = np.ones(15 if PID == 1 else 16, np.float32)
    y = jax.jit(lambda x, w: jnp.sum(xr.rms_norm(x, w)))(xs, w)
elif CASE == "raising_python_op":

    def fails_in_process_1(v: np.ndarray) -> np.ndarray:
        if jax.process_index() == 1:
            raise ValueError("no data for this block")
        return np.sin(v)

    op = python_op(fails_in_process_1, abstract_eval=lambda v: v, num_batch_dims=1)
    y = jax.jit(lambda x: jnp.sum(op(x)))(xs)
elif CASE == "not_imported":
    path = os.path.join(OUT, "model.jaxexport")
    if PID == 0:
        model = jax.jit(lambda x: jnp.sum(xr.rms_norm(x, jnp.ones(16, x.dtype)) * xr.kepler(x, 0.5)[0]))
        with open(path + ".tmp", "wb") as out:
            out.write(jax.export.export(model, disabled_checks=xr.export_checks())(xs).serialize())
        os.replace(path + ".tmp", path)
    multihost_utils.sync_global_devices("exported")
    with open(path, "rb") as src:
        y = jax.export.deserialize(bytearray(src.read())).call(xs)
else:
    raise SystemExit(f"unknown case {CASE}")
print("RESULT=", float(y.addressable_data(0)), flush=True)  # waits for the program
jax.distributed.shutdown()
