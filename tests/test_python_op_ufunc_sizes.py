"""python_op of a NumPy ufunc around the size from which it writes straight into
output arrays (4096 elements; smaller calls are given none and compute a new
array): the same values as NumPy on either side, with one and two results."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from xla_ffi_rs import python_op


def like(x):
    return x


@pytest.mark.parametrize("n", [1, 4095, 4096, 4097])
def test_ufunc_values_on_both_sides_of_the_output_size(n) -> None:
    x = np.linspace(-3.0, 3.0, n)
    sin = jax.jit(python_op(np.sin, abstract_eval=like, name=f"sin_{n}"))
    np.testing.assert_array_equal(np.asarray(sin(x)), np.sin(x))
    both = jax.jit(python_op(np.divmod, abstract_eval=lambda a, b: (a, a), name=f"divmod_{n}"))
    q, r = both(x, np.full(n, 0.7))
    np.testing.assert_array_equal(np.asarray(q), np.divmod(x, 0.7)[0])
    np.testing.assert_array_equal(np.asarray(r), np.divmod(x, 0.7)[1])
    # Different shapes: never written into outputs, whatever the size.
    add = jax.jit(python_op(np.add, abstract_eval=lambda a, b: b, name=f"add_{n}"))
    np.testing.assert_array_equal(np.asarray(add(x[:1], x[None, :])), x[:1] + x[None, :])
