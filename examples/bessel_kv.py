"""A SciPy function as a JAX op: the modified Bessel function of the second kind.

``scipy.special.kv(v, x)`` has no JAX counterpart. ``python_op`` makes it a JAX op
that runs SciPy on copies of XLA's buffers, in host memory (one Rust FFI handler,
no pickling, no host transfer), with a derivative rule so that ``grad`` works:

    d/dx K_v(x) = -(K_{v-1}(x) + K_{v+1}(x)) / 2

The order ``v`` is a static parameter (a keyword argument of the op), passed to
SciPy and to the rule. ``kv`` is elementwise and NumPy-vectorized, so ``vmap``
makes one call (``vectorized=True``), and under sharding each device runs SciPy
on its own shard (``num_batch_dims``: every axis of x is independent; here the
op is given rank-1 arrays).

Run it: ``python examples/bessel_kv.py``.
"""

import jax
import jax.numpy as jnp
import scipy.special

from xla_ffi_rs import python_op

kv_op = python_op(
    lambda x, *, v: scipy.special.kv(v, x),  # fn: NumPy in, NumPy out (float64 in, float64 out)
    abstract_eval=lambda x, *, v: x,  # the result looks like x
    vectorized=True,  # vmap: one call on the stacked arrays
    num_batch_dims=1,  # sharding: each shard of x separately
    name="kv",
)


@kv_op.def_jvp_rule
def _kv_jvp(primals, tangents, *, v):
    (x,), (dx,) = primals, tangents
    dkdx = -0.5 * (kv_op(x, v=v - 1.0) + kv_op(x, v=v + 1.0))
    return kv_op(x, v=v), dkdx * dx  # linear in dx (jnp code), so reverse mode follows


def kv(v: float, x: jax.Array) -> jax.Array:
    """K_v(x) for x > 0, in float64 (SciPy computes in double precision)."""
    return kv_op(jnp.asarray(x, jnp.float64), v=float(v))


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    x = jnp.linspace(0.5, 4.0, 4)
    print(jax.jit(kv, static_argnums=0)(1.5, x))  # SciPy's K_1.5 at x
    print(jax.grad(lambda x: kv(1.5, x).sum())(x))  # -(K_0.5 + K_2.5) / 2
    print(jax.vmap(lambda v: kv(0.5, v))(jnp.ones((2, 3))))  # one call on a (2, 3) array
