"""JAXbind's linear demo: SciPy's FFT over the non-batch axes; vmap makes one call at any
axis, without moving it (``python examples/fft_linear.py``)."""

import jax
import jax.numpy as jnp
import scipy.fft

from xla_ffi_rs import linear_op
from xla_ffi_rs.python_ops import core_axes


def fftn(x, *, batch_axes, workers=None):
    return scipy.fft.fftn(x, axes=core_axes(x.ndim, batch_axes[0]), norm="forward", workers=workers)


# The DFT matrix is symmetric: the FFT is its own transpose (its adjoint would be conj . ifft).
fftn_op = linear_op(fftn, fftn, abstract_eval=lambda x, **kw: x, abstract_eval_T=lambda c, **kw: c, batch_axes=True)

if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    x = jax.random.normal(jax.random.key(42), (10, 10)) * (1 + 1j)
    print(jnp.allclose(jax.jit(fftn_op)(x), jnp.fft.fftn(x, norm="forward")), fftn_op(x, workers=2).shape)
    print(jax.vmap(fftn_op, in_axes=1, out_axes=1)(x).shape, jax.jvp(fftn_op, (x,), (x,))[1].dtype)
