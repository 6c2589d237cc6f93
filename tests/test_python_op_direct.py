"""The handler's direct path: an op with no static parameters, output arrays or
sharding is called as ``fn(*operands)`` from Rust, its results checked and copied
there when they are exact arrays of the expected dtype and shape, and everything
else settled by the Python checks. Each case is compared with NumPy run directly.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xla_ffi_rs import python_op
from xla_ffi_rs.python_ops import PythonOp

#: Small (tobytes copy) and large (flat memoryview copy, >= 128 KiB) results.
SIZES = [(2, 3), (300, 200), (1 << 15,)]


def like(x):
    return x


def transposed(x):
    return jax.ShapeDtypeStruct(x.shape[::-1], x.dtype)


@pytest.mark.parametrize("shape", SIZES)
def test_non_contiguous_results_are_copied_in_c_order(shape) -> None:
    x = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)
    op = python_op(lambda x: x.T, abstract_eval=transposed, name="direct_T")
    np.testing.assert_array_equal(jax.jit(op)(x), x.T)
    strided = python_op(lambda x: (x * 2)[::-1], abstract_eval=like, name="direct_strided")
    np.testing.assert_array_equal(jax.jit(strided)(x), (x * 2)[::-1])


@pytest.mark.parametrize("shape", SIZES)
def test_several_results_as_tuple_or_list(shape) -> None:
    x = np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape)
    pair = python_op(lambda x: (np.sin(x), np.cos(x)), abstract_eval=lambda x: (x, x), name="direct_pair")
    as_list = python_op(lambda x: [np.sin(x), np.cos(x)], abstract_eval=lambda x: (x, x), name="direct_list")
    for op in (pair, as_list):
        s, c = jax.jit(op)(x)
        np.testing.assert_array_equal(s, np.sin(x))
        np.testing.assert_array_equal(c, np.cos(x))


def test_scalars_subclasses_and_python_values_are_settled_by_the_checks() -> None:
    x = np.array([1.0, 2.0, 3.0])
    total = python_op(
        lambda x: float(x.sum()), abstract_eval=lambda x: jax.ShapeDtypeStruct((), x.dtype), name="py_float"
    )
    assert float(jax.jit(total)(x)) == 6.0
    np_scalar = python_op(
        lambda x: x.sum(), abstract_eval=lambda x: jax.ShapeDtypeStruct((), x.dtype), name="np_scalar"
    )
    assert float(jax.jit(np_scalar)(x)) == 6.0
    masked = python_op(lambda x: np.ma.masked_array(x * 3.0), abstract_eval=like, name="masked")
    np.testing.assert_array_equal(jax.jit(masked)(x), x * 3.0)
    as_int = python_op(lambda x: np.asarray(x > 1.5), abstract_eval=lambda x: jax.ShapeDtypeStruct(x.shape, bool))
    np.testing.assert_array_equal(jax.jit(as_int)(x), x > 1.5)


@pytest.mark.parametrize(
    ("fn", "words"),
    [
        (lambda x: x.astype(np.float32), "op 'direct_bad': result 0: expected float64[3], got float32[3]"),
        (lambda x: x[:2], "op 'direct_bad': result 0: expected float64[3], got float64[2]"),
        (
            lambda x: (x, x),
            "op 'direct_bad': result 0: expected float64[3], got a tuple of 2 values, as an array float64[2,3]",
        ),
        (
            lambda x: None,
            "op 'direct_bad': result 0: expected float64[3], got None (did the function forget to return its result?)",
        ),
    ],
    ids=["dtype", "shape", "tuple_for_one", "none"],
)
def test_wrong_results_fail_naming_the_op(fn, words) -> None:
    op = python_op(fn, abstract_eval=like, name="direct_bad")
    with pytest.raises(jax.errors.JaxRuntimeError, match="INVALID_ARGUMENT: .*" + re.escape(words)):
        jax.jit(op)(np.ones(3)).block_until_ready()


def test_wrong_count_of_results_fails_naming_the_op() -> None:
    op = python_op(lambda x: (x,), abstract_eval=lambda x: (x, x), name="direct_count")
    with pytest.raises(
        jax.errors.JaxRuntimeError,
        match="op 'direct_count': expected the function to return a tuple of 2 arrays, got 1 values",
    ):
        jax.jit(op)(np.ones(3)).block_until_ready()


def test_exceptions_keep_the_functions_own_frames() -> None:
    def inner(x):
        raise ValueError("no good")

    def outer(x):
        return inner(x)

    op = python_op(outer, abstract_eval=like, name="direct_raises")
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.jit(op)(np.ones(3)).block_until_ready()
    text = str(info.value)
    assert "op 'direct_raises' raised ValueError: no good" in text
    assert "Traceback (last 2 frames)" in text and "in outer" in text and "in inner" in text
    # The process keeps working: the same op runs again.
    ok = python_op(np.cos, abstract_eval=like, name="direct_after")
    np.testing.assert_array_equal(jax.jit(ok)(np.zeros(3)), np.ones(3))


def test_the_direct_path_is_used_only_without_params_or_sharding() -> None:
    def f(x, **params):
        return x

    assert python_op(f, abstract_eval=like)._direct({}, (1,)) is not None
    assert python_op(f, abstract_eval=like)._direct({"k": 1}, (1,)) is None
    # takes_outputs: called directly too (with its output arrays), not with parameters.
    outs = python_op(lambda x, o, **params: None, abstract_eval=like, takes_outputs=True)
    assert outs._direct({}, (1,)) is not None
    assert outs._direct({"k": 1}, (1,)) is None
    op: PythonOp = python_op(f, abstract_eval=like, num_batch_dims=1)
    assert op._direct({}, (1,)) is None
    with_params = python_op(f, abstract_eval=lambda x, **params: x)
    assert jnp.array_equal(jax.jit(lambda x: with_params(x, k=2))(jnp.ones(2)), jnp.ones(2))


@pytest.mark.parametrize("shape", SIZES)
def test_a_result_in_the_other_byte_order_is_converted(shape) -> None:
    x = np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape)
    swapped = python_op(lambda x: np.sin(x).astype(">f8"), abstract_eval=like, name="big_endian")
    np.testing.assert_array_equal(jax.jit(swapped)(x), np.sin(x))
    # A different dtype stays an error that names both, even in the other byte order.
    wrong = python_op(lambda x: x.astype(">f4"), abstract_eval=like, name="big_endian_f32")
    with pytest.raises(jax.errors.JaxRuntimeError, match=r"result 0: expected float64\[.*got float32"):
        jax.jit(wrong)(x).block_until_ready()


@pytest.mark.parametrize("shape", SIZES)
def test_takes_outputs_is_called_directly_and_kept_outputs_keep_their_values(shape) -> None:
    """A ``takes_outputs`` function is called by the handler itself; an output or
    operand array it keeps across calls is its own: later calls neither reuse nor
    change it (small and pooled large sizes)."""
    kept: list[tuple[np.ndarray, np.ndarray]] = []

    def keep(x, o):
        np.multiply(x, 2.0, out=o)
        kept.append((x, o))

    op = jax.jit(python_op(keep, abstract_eval=like, takes_outputs=True, name="direct_keeper"))
    xs = [np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape) + i for i in range(4)]
    for x in xs:
        np.testing.assert_array_equal(np.asarray(op(x)), 2.0 * x)
    assert len(kept) == len(xs)
    for x, (kx, ko) in zip(xs, kept, strict=True):
        np.testing.assert_array_equal(kx, x)
        np.testing.assert_array_equal(ko, 2.0 * x)
    assert len({ko.ctypes.data for _, ko in kept}) == len(kept)


@pytest.mark.parametrize("shape", SIZES)
def test_takes_outputs_may_return_its_outputs(shape) -> None:
    x = np.linspace(-1.0, 1.0, int(np.prod(shape))).reshape(shape)
    one = python_op(lambda x, o: np.sin(x, out=o), abstract_eval=like, takes_outputs=True, name="direct_out")
    np.testing.assert_array_equal(np.asarray(jax.jit(one)(x)), np.sin(x))
    two = python_op(
        lambda x, a, b: [np.sin(x, out=a), np.cos(x, out=b)],
        abstract_eval=lambda x: (x, x),
        takes_outputs=True,
        name="direct_outs",
    )
    s, c = jax.jit(two)(x)
    np.testing.assert_array_equal(np.asarray(s), np.sin(x))
    np.testing.assert_array_equal(np.asarray(c), np.cos(x))


#: Copies of 4 MiB or more are written with non-temporal stores (``numpy_engine/bulk_copy.rs``):
#: an odd byte length (int8) and a float64 one, both above that.
STREAMED = [(np.int8, (4 << 20) + 3), (np.float64, (4 << 20) // 8 + 5)]


@pytest.mark.parametrize(("dtype", "n"), STREAMED)
def test_streamed_copies_hold_the_exact_bytes_and_kept_arrays_keep_theirs(dtype, n) -> None:
    """Operand copies, output arrays and returned results of 4 MiB or more (the
    streamed copies), also from a source at an odd address, carry every byte
    exactly; arrays the function keeps keep the values of their own call."""
    rng = np.random.default_rng(7)
    xs = [rng.integers(-100, 100, n).astype(dtype) for _ in range(3)]
    kept: list[tuple[np.ndarray, np.ndarray]] = []

    def keep(x, o):
        np.add(x, 1, out=o)
        kept.append((x, o))

    out = jax.jit(python_op(keep, abstract_eval=like, takes_outputs=True, name="streamed_out"))

    def shifted(x):
        buf = np.empty(n * np.dtype(dtype).itemsize + 1, dtype=np.uint8)
        view = buf[1:].view(dtype)  # C-contiguous at an odd address
        np.multiply(x, 3, out=view)
        return view

    returned = jax.jit(python_op(shifted, abstract_eval=like, name="streamed_returned"))
    for x in xs:
        np.testing.assert_array_equal(np.asarray(out(x)), x + 1)
        np.testing.assert_array_equal(np.asarray(returned(x)), x * 3)
    for x, (kx, ko) in zip(xs, kept, strict=True):
        np.testing.assert_array_equal(kx, x)
        np.testing.assert_array_equal(ko, x + 1)


@pytest.mark.filterwarnings("ignore:Setting the shape:DeprecationWarning")
def test_takes_outputs_direct_errors_keep_their_messages() -> None:
    x = np.ones((300, 200))

    def reshaped(x, o):
        o[...] = x
        o.shape = (o.size,)

    op = jax.jit(python_op(reshaped, abstract_eval=like, takes_outputs=True, name="direct_reshaped"))
    with pytest.raises(
        jax.errors.JaxRuntimeError, match=r"result 0: expected float64\[300,200\], got float64\[60000\]"
    ):
        jax.block_until_ready(op(x))
    other = jax.jit(python_op(lambda x, o: (o, o), abstract_eval=like, takes_outputs=True, name="direct_pair"))
    with pytest.raises(
        jax.errors.JaxRuntimeError, match=r"op 'direct_pair': with takes_outputs=True .* returned tuple"
    ):
        jax.block_until_ready(other(x))

    def inner(o):
        raise ValueError("no room")

    def outer(x, o):
        inner(o)

    raises = jax.jit(python_op(outer, abstract_eval=like, takes_outputs=True, name="direct_out_raises"))
    with pytest.raises(jax.errors.JaxRuntimeError) as info:
        jax.block_until_ready(raises(x))
    text = str(info.value)
    assert "op 'direct_out_raises' raised ValueError: no room" in text
    assert "in outer" in text and "in inner" in text
    # The process goes on.
    np.testing.assert_array_equal(
        np.asarray(
            jax.jit(
                python_op(lambda x, o: np.copyto(o, x), abstract_eval=like, takes_outputs=True, name="direct_after_out")
            )(x)
        ),
        x,
    )


_WEAK_SCALARS = r"""
import warnings
warnings.simplefilter("error")
import jax, jax.numpy as jnp, numpy as np
from xla_ffi_rs import python_op
assert not jax.config.jax_enable_x64
def scalar_op(fn, dtype, name):
    return python_op(fn, abstract_eval=lambda x: jax.ShapeDtypeStruct((), dtype), name=name)
x = np.arange(1.0, 4.0, dtype=np.float32)
cases = [
    (lambda x: float(x.sum()), np.float32, 6.0),
    (lambda x: 1e300, np.float32, np.inf),
    (lambda x: 7, np.float32, 7.0),
    (lambda x: 7, np.int32, 7),
    (lambda x: 7, np.uint8, 7),
    (lambda x: 1.5, np.complex64, 1.5 + 0j),
    (lambda x: 2j, np.complex64, 2j),
    (lambda x: True, np.bool_, True),
    (lambda x: float(x.sum()) / 4, jnp.bfloat16, 1.5),
    (lambda x: 1e300, jnp.bfloat16, np.inf),
    (lambda x: -3, jnp.bfloat16, -3.0),
    (lambda x: 0.25, np.float16, 0.25),
    (lambda x: 7, np.float16, 7.0),
    (lambda x: -128, np.int8, -128),
    (lambda x: 255, np.uint8, 255),
]
for i, (fn, dtype, want) in enumerate(cases):
    for call in (scalar_op(fn, dtype, f"weak{i}"), jax.jit(scalar_op(fn, dtype, f"weak_jit{i}"))):
        got = call(x)
        assert got.dtype == dtype and got.shape == () and got == want, (i, got)
refused = [
    (lambda x: 1.5, np.int32, "expected int32[], got float64[]"),
    (lambda x: -1, np.uint8, "expected uint8[], got int"),
    (lambda x: True, np.int32, "expected int32[], got bool[]"),
    (lambda x: 1j, np.float32, "expected float32[], got complex128[]"),
    (lambda x: 1.5, np.int8, "expected int8[], got float64[]"),
    (lambda x: 2.0, np.uint8, "expected uint8[], got float64[]"),
    (lambda x: 128, np.int8, "expected int8[], got int"),
    (lambda x: 1j, jnp.bfloat16, "expected bfloat16[], got complex128[]"),
    (lambda x: 1j, np.float16, "expected float16[], got complex128[]"),
    (lambda x: True, jnp.bfloat16, "expected bfloat16[], got bool[]"),
]
for i, (fn, dtype, words) in enumerate(refused):
    try:
        jax.jit(scalar_op(fn, dtype, f"refused{i}"))(x).block_until_ready()
    except jax.errors.JaxRuntimeError as e:
        assert "INVALID_ARGUMENT" in str(e) and f"op 'refused{i}': result 0: " + words in str(e), str(e)
    else:
        raise AssertionError(f"case {i} was not refused")
print("OK")
"""


def test_python_scalars_take_the_results_dtype_as_jax_weak_types_do() -> None:
    """With JAX's default (x64 off), a function returning a Python float for a
    float32 result is answered (the float rounded to float32), as a weakly typed
    Python scalar is in JAX, for ml_dtypes' bfloat16 (NumPy kind 'V') as for NumPy's
    float16 and small ints; casts weak typing does not make are still refused."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    done = subprocess.run(
        [sys.executable, "-c", _WEAK_SCALARS], check=False, capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("OK"), done.stderr[-3000:]
