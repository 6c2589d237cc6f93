"""JAXbind's nonlinear demo: (x, y) -> (x y, y^2) from NumPy value, JVP and VJP functions,
x fixed (``python examples/nonlinear_fixed.py``)."""

import jax
import jax.numpy as jnp

from xla_ffi_rs import nonlinear_op


def zero_if_none(ct):
    return 0 if ct is None else ct


nonlin_op = nonlinear_op(
    lambda x, y: (x * y, y * y),
    lambda x, y, dy: (x * dy, 2 * y * dy),  # the tangents of the non-fixed operand y only
    lambda x, y, da, db: x * zero_if_none(da) + 2 * y * zero_if_none(db),  # y's cotangent
    abstract_eval=lambda x, y: (y, y),
    fixed=(0,),
)

if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    x, y = jnp.full(1, 4.0), jnp.full(1, 6.0)
    print(jax.jvp(lambda y: nonlin_op(x, y), (y,), (y,))[1])
    print(jax.jit(jax.vjp(lambda y: nonlin_op(x, y), y)[1])((y, y)))
