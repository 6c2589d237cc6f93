"""batch_axes=True: under vmap the function is called once on the arrays as they
are, told where the batch axes are, and says where its results' are.

References: NumPy's FFT along the non-batch axes, and sums, in float64.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from xla_ffi_rs import linear_op, nonlinear_op
from xla_ffi_rs.python_ops import core_axes

RNG = np.random.default_rng(11)


def fft_op(seen):
    def fft(x, *, batch_axes):
        seen.append((x.shape, batch_axes))
        return np.fft.fftn(x, axes=core_axes(x.ndim, batch_axes[0]))

    return linear_op(
        fft, fft, abstract_eval=lambda x, **_: x, abstract_eval_T=lambda x, **_: x, batch_axes=True, name="fft"
    )


def test_vmap_calls_once_with_the_axes_where_they_are() -> None:
    seen: list[tuple[object, ...]] = []
    op = fft_op(seen)
    x = jnp.asarray(RNG.standard_normal((3, 4, 5)) + 1j * RNG.standard_normal((3, 4, 5)))
    np.testing.assert_allclose(np.asarray(op(x)), np.fft.fftn(np.asarray(x)), rtol=1e-12)
    assert seen.pop() == ((3, 4, 5), ((),))
    f = jax.jit(jax.vmap(op, in_axes=1, out_axes=1))
    np.testing.assert_allclose(np.asarray(f(x)), np.fft.fftn(np.asarray(x), axes=(0, 2)), rtol=1e-12)
    assert seen.pop() == ((3, 4, 5), ((1,),))
    text = f.lower(x).as_text()
    assert "stablehlo.transpose" not in text and "while" not in text and text.count("xla_ffi_rs.python_call") == 1
    # Nested: the inner vmap maps original axis 2, the outer axis 0.
    g = jax.vmap(jax.vmap(op, in_axes=1, out_axes=0), in_axes=0, out_axes=2)
    want = np.transpose(np.fft.fft(np.asarray(x), axis=1), (2, 1, 0))
    np.testing.assert_allclose(np.asarray(g(x)), want, rtol=1e-12)
    assert seen.pop() == ((3, 4, 5), ((2, 0),))
    # Both levels map axis 0: the outer level inserts its axis at the inner one's
    # position, which moves the inner one up (to original axis 1).
    h = jax.vmap(jax.vmap(op))
    np.testing.assert_allclose(np.asarray(h(x)), np.fft.fft(np.asarray(x), axis=2), rtol=1e-12)
    assert seen.pop() == ((3, 4, 5), ((1, 0),))


def test_vmap_of_derivatives_with_batch_axes() -> None:
    op = fft_op([])
    x = jnp.asarray(RNG.standard_normal((3, 4)) + 1j * RNG.standard_normal((3, 4)))
    check_grads(jax.vmap(op, in_axes=1), (x,), order=2, modes=("fwd", "rev"))
    ct = jnp.asarray(RNG.standard_normal((3, 4)) + 0j)
    (lt,) = jax.vmap(lambda c: jax.linear_transpose(op, x[:, 0])(c), in_axes=1, out_axes=1)(ct)
    np.testing.assert_allclose(np.asarray(lt), np.fft.fft(np.asarray(ct), axis=0), rtol=1e-12)


def sum_op():
    """Sum over the non-batch axes; the result's batch axes are given explicitly."""

    def fwd(x, *, batch_axes):
        return np.asarray(x.sum(axis=tuple(core_axes(x.ndim, batch_axes[0]))))

    def abstract(x, *, batch_axes):
        axes = batch_axes[0]
        kept = sorted(a for a in axes if a is not None)
        shape = tuple(x.shape[a] for a in kept)
        out = jax.ShapeDtypeStruct(shape, x.dtype)
        return (out, tuple(kept.index(a) for a in axes)) if axes else out

    def transpose(x_like, c, *, batch_axes):  # (not batched in these tests)
        return np.broadcast_to(c, x_like.shape).copy()

    def abstract_t(x_like, c, **_):
        return x_like

    # The shape of the transpose's result comes from a fixed operand (x itself).
    return linear_op(
        lambda s, x, *, batch_axes: fwd(x, batch_axes=(batch_axes[1],)),
        transpose,
        abstract_eval=lambda s, x, *, batch_axes: abstract(x, batch_axes=(batch_axes[1],)),
        abstract_eval_T=abstract_t,
        fixed=(0,),
        batch_axes=True,
    )


def test_results_say_where_their_batch_axes_are() -> None:
    op = sum_op()
    x = jnp.asarray(RNG.standard_normal((2, 3, 4)))
    np.testing.assert_allclose(float(op(x, x)), float(np.asarray(x).sum()), rtol=1e-13)
    got = jax.vmap(op, in_axes=(2, 2))(x, x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(x).sum(axis=(0, 1)), rtol=1e-13)
    got = jax.vmap(jax.vmap(op, in_axes=(0, 0)), in_axes=(1, 1))(x, x)
    np.testing.assert_allclose(np.asarray(got), np.asarray(x).sum(axis=2).T, rtol=1e-13)
    np.testing.assert_allclose(np.asarray(jax.grad(lambda v: op(x, v))(x)), np.ones((2, 3, 4)))


def test_a_plain_aval_with_no_operand_mapped_everywhere_is_an_error() -> None:
    op = nonlinear_op(
        lambda x, y, *, batch_axes: x + y,
        lambda x, y, dx, dy, *, batch_axes: dx + dy,
        lambda x, y, c, *, batch_axes: (c, c),
        abstract_eval=lambda x, y, **_: jax.ShapeDtypeStruct(jnp.broadcast_shapes(x.shape, y.shape), x.dtype),
        batch_axes=True,
        name="add",
    )
    a = jnp.ones((2, 3))
    np.testing.assert_allclose(np.asarray(jax.vmap(op, in_axes=(0, None))(a, a[0])), 2 * np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"add: no operand is mapped at every vmap level.*\(aval, batch axes\)"):
        jax.vmap(jax.vmap(op, in_axes=(0, None)), in_axes=(None, 0))(a, a)


def test_cotangent_of_an_unmapped_operand_has_its_shape() -> None:
    """x * y with y not mapped: under vmap of grad the VJP sees y broadcast (so its
    cotangent carries the batch axis and JAX sums it); under grad of vmap it is told
    that y is not mapped and returns y's shape, summing over x's batch axis."""

    def vjp(x, y, c, *, batch_axes):
        gy = c * x
        extra = tuple(a for a, b in zip(batch_axes[0], batch_axes[1], strict=True) if b is None and a is not None)
        return c * y, gy.sum(axis=extra) if extra else gy

    op = nonlinear_op(
        lambda x, y, *, batch_axes: x * y,
        lambda x, y, dx, dy, *, batch_axes: (0 if dx is None else dx * y) + (0 if dy is None else x * dy),
        vjp,
        abstract_eval=lambda x, y, **_: jax.ShapeDtypeStruct(jnp.broadcast_shapes(x.shape, y.shape), x.dtype),
        batch_axes=True,
    )
    xs, y = jnp.asarray(RNG.standard_normal((2, 4))), jnp.asarray(RNG.standard_normal(4))
    gx, gy = jax.vmap(jax.grad(lambda a, b: op(a, b).sum(), argnums=(0, 1)), in_axes=(0, None))(xs, y)
    np.testing.assert_allclose(np.asarray(gx), np.broadcast_to(np.asarray(y), (2, 4)))
    np.testing.assert_allclose(np.asarray(gy), np.asarray(xs))
    gx, gy = jax.grad(lambda a, b: jax.vmap(op, in_axes=(0, None))(a, b).sum(), argnums=(0, 1))(xs, y)
    np.testing.assert_allclose(np.asarray(gy), np.asarray(xs).sum(axis=0))
    check_grads(jax.vmap(op, in_axes=(0, None)), (xs, y), order=1, modes=("fwd", "rev"))
