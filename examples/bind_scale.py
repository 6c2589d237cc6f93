"""Bind a new op with xla_ffi_rs.binding: `scale(x, factor) = factor * x`.

The Rust handler is crates/ops/src/scale_state.rs (target "xla_ffi_rs.examples.scale",
a stateful instantiate + execute bundle, registered by `xla_ffi_rs.examples.register()`).
Its `#[handler(...)]` declares `shapes = "...b -> ...b"`, `linear = "x"` and itself as
its transpose; `binding.op` builds everything else from that: abstract eval, the
`factor` attribute as an f32, vmap (one call), sharding, JVP and transpose.

Run it: ``python examples/bind_scale.py``.
"""

import jax
import jax.numpy as jnp

import xla_ffi_rs
from xla_ffi_rs import binding, examples

examples.register()  # the example target is registered only on request
scale_op = binding.op(xla_ffi_rs.declarations()["xla_ffi_rs.examples.scale"])


def scale(x: jax.Array, factor: float) -> jax.Array:
    return scale_op(jnp.asarray(x, jnp.float32), factor=factor)[0]


if __name__ == "__main__":
    x = jnp.arange(4.0, dtype=jnp.float32)
    print(jax.jit(scale, static_argnums=1)(x, 3.0))  # [0. 3. 6. 9.]
    print(jax.grad(lambda x: scale(x, 3.0).sum())(x))  # [3. 3. 3. 3.]
    print(jax.vmap(lambda x: scale(x, 2.0))(jnp.ones((2, 3))))  # [[2. 2. 2.] [2. 2. 2.]]
