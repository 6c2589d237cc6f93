"""What a python op's function may return for a result besides a plain C-ordered
``ndarray``: views and layouts NumPy reads as the same values are taken; a masked
array with masked elements is refused naming the op and the result (its mask would
be dropped and the values under it handed to XLA)."""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
import numpy.ma as ma
import pytest

from xla_ffi_rs import python_op

X = np.arange(6, dtype=np.float32).reshape(2, 3)
WANT = X * 2


class _Sub(np.ndarray):
    pass


class _DeviceLike:
    """A cupy-like object: no buffer protocol, only ``__array__``."""

    def __init__(self, a: np.ndarray) -> None:
        self.a = a

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self.a


def _readonly(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


TAKEN = {
    "fortran": lambda x: np.asfortranarray(x * 2),
    "strided": lambda x: np.repeat(x * 2, 2, axis=1)[:, ::2],
    "readonly": lambda x: _readonly(x * 2),
    "broadcast": lambda x: np.broadcast_to((x * 2)[1], (2, 3)),  # stride 0 along the first axis
    "matrix": lambda x: np.matrix(x * 2),
    "unmasked": lambda x: ma.masked_array(x * 2, mask=False),
    "subclass": lambda x: (x * 2).view(_Sub),
    "memoryview": lambda x: memoryview(x * 2),
    "array_interface": lambda x: _DeviceLike(x * 2),
    "big_endian": lambda x: (x * 2).astype(">f4"),
}


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("kind", sorted(TAKEN))
def test_views_layouts_and_array_likes_are_read_as_their_values(kind: str) -> None:
    fn = TAKEN[kind]
    want = np.asarray(fn(X.copy()))
    assert want.dtype.newbyteorder("=") == np.float32 and want.shape == (2, 3)
    op = python_op(fn, abstract_eval=lambda x: x, name=f"returns_{kind}")
    np.testing.assert_array_equal(np.asarray(op(X)), want)
    np.testing.assert_array_equal(np.asarray(jax.jit(op)(X)), want)


def _masked_one(x: np.ndarray, **params: Any) -> Any:
    return ma.masked_array(x * 2, mask=[[True, False, False], [False, False, True]])


MASKED = {
    "direct": (lambda x: _masked_one(x), lambda x: x, {}),
    "static_params": (_masked_one, lambda x, **p: x, {"k": 1}),
    "second_of_two": (lambda x: (x * 2, _masked_one(x)), lambda x: (x, x), {}),
}


@pytest.mark.parametrize("path", sorted(MASKED))
def test_a_masked_array_with_masked_elements_is_refused_naming_op_and_result(path: str) -> None:
    fn, abstract_eval, params = MASKED[path]
    op = python_op(fn, abstract_eval=abstract_eval, name="masked_result")
    result = "1" if path == "second_of_two" else "0"
    with pytest.raises((jax.errors.JaxRuntimeError, ValueError)) as info:
        jax.block_until_ready(jax.jit(lambda x: op(x, **params))(X))
    text = str(info.value)
    assert "INVALID_ARGUMENT" in text and "op 'masked_result'" in text, text
    assert f"result {result}: expected float32[2,3], got a MaskedArray with 2 masked elements" in text, text
    assert "filled" in text


def test_an_object_array_result_is_refused_naming_its_dtype() -> None:
    op = python_op(lambda x: (x * 2).astype(object), abstract_eval=lambda x: x, name="object_result")
    expected = r"op 'object_result': result 0: expected float32\[2,3\], got object\[2,3\]"
    with pytest.raises(jax.errors.JaxRuntimeError, match=expected):
        jax.block_until_ready(op(X))
