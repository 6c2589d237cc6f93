"""JAXbind's multilinear demo: (x, y) -> (x y, x y), one transpose per operand; a zero
cotangent arrives as None (``python examples/multilinear_product.py``)."""

import jax

from xla_ffi_rs import multilinear_op


def ct_sum(a, b):  # a + b, where None is zero
    return (0 if a is None else a) + (0 if b is None else b)


mlin_op = multilinear_op(
    lambda x, y: (x * y, x * y),
    [lambda y, da, db: y * ct_sum(da, db), lambda x, da, db: x * ct_sum(da, db)],
    abstract_eval=lambda x, y: (x, x),
    abstract_eval_T=[lambda y, da, db: y, lambda x, da, db: x],
)

if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    x, y = jax.random.uniform(jax.random.key(42), (2, 10, 10))
    print(jax.jvp(jax.jit(mlin_op), (x, y), (x, y))[1][0][0, :3])
    print(jax.grad(lambda x, y: mlin_op(x, y)[0].sum(), argnums=(0, 1))(x, y)[1][0, :3])
