"""Hostile inputs to every public function of the package that takes arrays or
scalars: each raises TypeError or ValueError naming the function and the
argument, before anything is lowered, and a traced value that must be static
says how to make it static (with a spelling that the test then runs)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs as xr

X, W = np.ones((2, 4), np.float32), np.ones(4, np.float32)

#: (value, error type, words the message must contain after "<fn>: <arg>").
ARRAY_CASES: list[tuple[Any, type[Exception], str]] = [
    ("1.0", TypeError, "got str"),
    (b"1.0", TypeError, "got bytes"),
    (None, TypeError, "got NoneType"),
    ({}, TypeError, "got dict"),
    ({1.0}, TypeError, "got set"),
    (print, TypeError, "got builtin_function_or_method"),
    (["a", "b"], TypeError, "got a list of str"),
    ([1.0, None], TypeError, "got a list of objects (NoneType or float)"),
    ([[1.0], [1.0, 2.0]], TypeError, "not an array of numbers"),
    ([10**400], TypeError, "got a list of objects (int)"),
    (np.array([1.0, None]), TypeError, "got an array of objects (NoneType or float)"),
    (np.array([1.0, 2.0], dtype=object), TypeError, "got an array of objects (float)"),
    (np.array(["1.0"]), TypeError, "got an array of str"),
    (np.array(["2020-01-01"], dtype="datetime64[D]"), TypeError, "got an array of datetime64"),
    (10**400, ValueError, "got an int beyond the float64 range"),
]
if np.dtype(np.longdouble).itemsize > 8:  # x86-64 Linux: 80-bit extended precision, stored in 16 bytes
    _LONG = np.dtype(np.longdouble).name
    ARRAY_CASES += [
        (np.ones(2, np.longdouble), TypeError, f"got an array of {_LONG}, which JAX has no dtype for"),
        (np.longdouble(1.0), TypeError, f"got an array of {_LONG}, which JAX has no dtype for"),
        ([np.longdouble(1.0)], TypeError, f"got a list of {_LONG}"),
    ]


def _message(fn: str, arg: str, words: str) -> str:
    return rf"^{re.escape(fn)}: {re.escape(arg)}: expected .*{re.escape(words)}"


@pytest.mark.parametrize(("value", "error", "words"), ARRAY_CASES, ids=[w for _, _, w in ARRAY_CASES])
@pytest.mark.parametrize("arg", ["mean_anomaly", "eccentricity"])
def test_kepler_array_arguments(value: Any, error: type[Exception], words: str, arg: str) -> None:
    args = {"mean_anomaly": 1.0, "eccentricity": 0.5, arg: value}
    with pytest.raises(error, match=_message("kepler", arg, words)):
        xr.kepler(**args)


@pytest.mark.parametrize(
    ("value", "got"),
    [
        (["a", "bc"], "a list of str"),
        ([1.0, "a"], "a list of str"),
        ([b"ab"], "a list of bytes"),
        (np.array(["1.0"]), "an array of str"),
        (np.array([b"1.0"]), "an array of bytes"),
    ],
)
@pytest.mark.parametrize(
    ("name", "fn"), [("kepler", lambda v: xr.kepler(v, 0.5)), ("rms_norm", lambda v: xr.rms_norm(v, W))]
)
def test_strings_are_named_str_or_bytes_not_by_numpys_bit_count(
    value: Any, got: str, name: str, fn: Callable[..., Any]
) -> None:
    # NumPy names a string dtype by its bits (str1024, bytes16), which reads as a type of its own.
    arg = "mean_anomaly" if name == "kepler" else "x"
    with pytest.raises(TypeError, match=rf"^{name}: {arg}: expected .*, got {re.escape(got)}$"):
        fn(value)


@pytest.mark.parametrize(
    ("value", "got"),
    [(True, "bool"), (np.array([True, False]), "bool"), (1j, "complex128"), (np.complex64(1), "complex64")],
)
@pytest.mark.parametrize("arg", ["mean_anomaly", "eccentricity"])
def test_kepler_bool_and_complex(value: Any, got: str, arg: str) -> None:
    args = {"mean_anomaly": 1.0, "eccentricity": 0.5, arg: value}
    with pytest.raises(
        TypeError, match=rf"^kepler: {arg}: expected a real \(integer or floating\) dtype: .*, got {got}$"
    ):
        xr.kepler(**args)


# A float8 is floating and an int4 an integer: the message said "expected a real
# (integer or floating) dtype, got float8_e4m3fn", which reads as if it were accepted.
@pytest.mark.parametrize("dtype", [jnp.float8_e4m3fn, jnp.float8_e5m2, jnp.int4])
@pytest.mark.parametrize("arg", ["mean_anomaly", "eccentricity"])
def test_kepler_dtypes_without_a_kernel_list_the_dtypes_taken(dtype: Any, arg: str) -> None:
    args: dict[str, Any] = {"mean_anomaly": 1.0, "eccentricity": 0.5, arg: jnp.ones(3, dtype)}
    taken = "integers (int8 to int64, uint8 to uint64) or float16, bfloat16, float32 or float64"
    with pytest.raises(
        TypeError, match=rf"^kepler: {arg}: expected .*{re.escape(taken)}, got {jnp.dtype(dtype).name}$"
    ):
        xr.kepler(**args)


@pytest.mark.parametrize("arg", ["mean_anomaly", "eccentricity"])
def test_kepler_prng_key(arg: str) -> None:
    # Before: "Cannot interpret 'key<fry>' as a data type", naming neither.
    args: dict[str, Any] = {"mean_anomaly": 1.0, "eccentricity": 0.5, arg: jax.random.key(0)}
    with pytest.raises(TypeError, match=rf"^kepler: {arg}: expected .*got an array of key<fry> \(a PRNG key"):
        xr.kepler(**args)


def test_kepler_shapes_that_do_not_broadcast() -> None:
    with pytest.raises(ValueError, match=r"^kepler: mean_anomaly and eccentricity: .*got \(3,\) and \(2,\)"):
        xr.kepler(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match=r"^kepler: mean_anomaly and eccentricity"):
        jax.jit(xr.kepler)(np.ones((2, 3)), np.ones((3, 2)))


RMS_FUNCTIONS: list[tuple[str, Callable[..., Any]]] = [
    ("rms_norm", xr.rms_norm),
    ("rms_norm_inplace", xr.rms_norm_inplace),
]


@pytest.mark.parametrize(("value", "error", "words"), ARRAY_CASES, ids=[w for _, _, w in ARRAY_CASES])
@pytest.mark.parametrize("arg", ["x", "weight"])
@pytest.mark.parametrize(("name", "fn"), RMS_FUNCTIONS)
def test_rms_norm_array_arguments(
    value: Any, error: type[Exception], words: str, arg: str, name: str, fn: Callable[..., Any]
) -> None:
    args = {"x": X, "weight": W, arg: value}
    with pytest.raises(error, match=_message(name, arg, words)):
        fn(**args)


# Dtypes and shapes are the handler's checks (its declaration), with its words.
@pytest.mark.parametrize(
    ("x", "w", "error", "words"),
    [
        (np.ones((2, 4), bool), W, TypeError, ("operand 0 (x)", "float32", "got bool")),
        (X, np.ones(4, complex), TypeError, ("operand 1 (weight)", "float64", "got complex128")),
        (np.float32(1.0), W, ValueError, ("(x)", "expected", "got")),
        (X, np.ones((1, 4), np.float32), ValueError, ("(x)", "expected", "got")),
        (X, np.ones(5, np.float32), ValueError, ("(x)", "weight", "expected", "got")),
        (True, W, TypeError, ("operand 0 (x)", "got bool")),
    ],
)
@pytest.mark.parametrize(("name", "fn"), RMS_FUNCTIONS)
def test_rms_norm_dtypes_and_ranks(
    x: Any, w: Any, error: type[Exception], words: tuple[str, ...], name: str, fn: Callable[..., Any]
) -> None:
    with pytest.raises(error, match=r"^xla_ffi_rs\.rms_norm_fwd: ") as info:
        fn(x, w)
    for word in words:
        assert word in str(info.value), (word, str(info.value))


# Dtypes JAX's promotion refuses, or with no float kernel: named before promotion
# (before: JAX's TypePromotionError, a ValueError naming neither function nor argument).
@pytest.mark.parametrize(
    ("dtype", "got"),
    [(jnp.float8_e4m3fn, "float8_e4m3fn"), (jnp.float8_e5m2, "float8_e5m2"), (jnp.int4, "int4")],
)
@pytest.mark.parametrize("arg", ["x", "weight"])
@pytest.mark.parametrize(("name", "fn"), RMS_FUNCTIONS)
def test_rms_norm_dtypes_without_a_kernel(dtype: Any, got: str, arg: str, name: str, fn: Callable[..., Any]) -> None:
    args = {"x": X, "weight": W, arg: jnp.ones(X.shape if arg == "x" else W.shape, dtype)}
    words = f"expected a float array of float16, bfloat16, float32 or float64, got {got}"
    with pytest.raises(TypeError, match=rf"^{name}: {arg}: {re.escape(words)}$"):
        fn(**args)


def test_kernel_floats_are_what_the_handlers_accept() -> None:
    # The floats Python lets through to the kernels, and names when it refuses one,
    # are exactly those the rms_norm handlers' x and weight accept (their declarations).
    decls = xr.declarations()
    targets = [t for t in decls if t.startswith("xla_ffi_rs.rms_norm")]
    assert targets
    accepted = {tuple(b["dtypes"]) for t in targets for b in decls[t]["operands"] if b["name"] in ("x", "weight")}
    assert len(accepted) == 1, accepted
    (floats,) = accepted
    words = f"expected a float array of {', '.join(floats[:-1])} or {floats[-1]}, got float8_e4m3fn"
    for name, fn in RMS_FUNCTIONS:
        with pytest.raises(TypeError, match=rf"^{name}: x: {re.escape(words)}$"):
            fn(jnp.ones(X.shape, jnp.float8_e4m3fn), W)
    for dtype in floats:
        if dtype == "float64" and not jax.config.jax_enable_x64:
            continue
        y = xr.rms_norm(jnp.ones(X.shape, dtype), jnp.ones(W.shape, dtype))
        assert y.dtype == jnp.dtype(dtype)


@pytest.mark.parametrize("arg", ["x", "weight"])
@pytest.mark.parametrize(("name", "fn"), RMS_FUNCTIONS)
def test_rms_norm_prng_key(arg: str, name: str, fn: Callable[..., Any]) -> None:
    # Before: ValueError "dtype=key<fry> is not a valid dtype for JAX type promotion".
    args: dict[str, Any] = {"x": X, "weight": W, arg: jax.random.key(0)}
    with pytest.raises(TypeError, match=rf"^{name}: {arg}: expected a float array, got an array of key<fry>"):
        fn(**args)


@pytest.mark.parametrize(("name", "fn"), RMS_FUNCTIONS)
def test_rms_norm_eps_beyond_the_accumulation_type(name: str, fn: Callable[..., Any]) -> None:
    # Before: eps 3.5e38 on float32 rows was added as infinity: y = 0 where the
    # formula gives 5.3e-20.
    # The words are the handlers' (`_native.eps_problem`, the Rust rule).
    for eps, got in ((3.5e38, "3.5e38"), (1e39, "1e39")):
        words = (
            "expected a finite value >= 0 that fits float32 (at most 3.4028234663852886e38, the accumulator dtype "
            f"of these rows), got {got}"
        )
        with pytest.raises(ValueError, match=rf"^{name}: eps: {re.escape(words)}$"):
            fn(X, W, eps=eps)
    y = np.asarray(xr.rms_norm(X, W, eps=3.4e38))
    np.testing.assert_allclose(y, 1 / np.sqrt(1 + 3.4e38), rtol=1e-6)


EPS_CASES: list[tuple[Any, type[Exception], str]] = [
    (10**400, ValueError, "expected a finite float >= 0, got an int beyond the float64 range"),
    (float("nan"), ValueError, "expected a finite float >= 0, got nan"),
    (float("inf"), ValueError, "expected a finite float >= 0, got inf"),
    (-1e-5, ValueError, "expected a finite float >= 0, got -1e-05"),
    (-1, ValueError, "expected a finite float >= 0, got -1.0"),
    ("1e-5", TypeError, "expected a Python float >= 0, got str"),
    (None, TypeError, "expected a Python float >= 0, got NoneType"),
    (True, TypeError, "expected a Python float >= 0, got bool"),
    (1e-5j, TypeError, "expected a Python float >= 0, got complex"),
    ([1e-5], TypeError, "expected a Python float >= 0, got list"),
    (np.array([1e-5]), TypeError, "expected a Python float >= 0, got ndarray"),
]


@pytest.mark.parametrize(("eps", "error", "words"), EPS_CASES, ids=[w for _, _, w in EPS_CASES])
@pytest.mark.parametrize(("name", "fn"), RMS_FUNCTIONS)
def test_rms_norm_eps(eps: Any, error: type[Exception], words: str, name: str, fn: Callable[..., Any]) -> None:
    with pytest.raises(error, match=rf"^{name}: eps: {re.escape(words)}$"):
        fn(X, W, eps)
    with pytest.raises(error, match=rf"^{name}: eps: {re.escape(words)}$"):
        fn(X, W, eps=eps)


def test_errors_come_before_lowering() -> None:
    # Under eval_shape nothing is lowered or run: the checks are in the Python entry points.
    with pytest.raises(TypeError, match=r"^kepler: mean_anomaly"):
        jax.eval_shape(lambda e: xr.kepler("1.0", e), jax.ShapeDtypeStruct((2,), jnp.float32))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^rms_norm: eps"):
        jax.eval_shape(lambda x, w: xr.rms_norm(x, w, 10**400), X, W)


# -- a traced eps -------------------------------------------------------------


@pytest.mark.parametrize(("name", "fn"), RMS_FUNCTIONS)
def test_traced_eps_says_how_to_make_it_static(name: str, fn: Callable[..., Any]) -> None:
    pmapped = jax.pmap(fn, in_axes=(0, None, None))  # pmap has no static_argnames: its own spelling
    for call in (
        lambda: jax.jit(fn)(X, W, 1e-5),
        lambda: jax.jit(fn)(X, W, eps=1e-5),
        lambda: pmapped(X[None], W, 1e-5),
    ):
        with pytest.raises(TypeError) as info:
            call()
        msg = str(info.value)
        assert msg.startswith(f"{name}: eps is traced (")
        assert f"jax.jit(xr.{name}, static_argnames='eps')" in msg and "static_argnums=2" in msg
        assert f"jax.pmap(xr.{name}, static_broadcasted_argnums=2)" in msg
    # Under grad or vmap with respect to eps, the same message.
    with pytest.raises(TypeError, match=rf"^{name}: eps is traced .*static_argnames='eps'"):
        jax.grad(lambda eps: fn(X, W, eps).sum())(1e-5)
    with pytest.raises(TypeError, match=rf"^{name}: eps is traced"):
        jax.vmap(lambda eps: fn(X, W, eps))(np.array([1e-5, 1e-4]))


@pytest.mark.parametrize(("name", "fn"), RMS_FUNCTIONS)
def test_the_suggested_static_spellings_work(name: str, fn: Callable[..., Any]) -> None:
    want = xr.rms_norm(X, W, 1e-3)
    xr_ns = {"xr": xr, "jax": jax}
    by_name = eval(f"jax.jit(xr.{name}, static_argnames='eps')", xr_ns)  # the spelling in the message
    by_number = eval(f"jax.jit(xr.{name}, static_argnums=2)", xr_ns)
    for got in (by_name(X, W, eps=1e-3), by_name(X, W, 1e-3), by_number(X, W, 1e-3)):
        np.testing.assert_allclose(got, want, rtol=1e-6)
    pmapped = eval(f"jax.pmap(xr.{name}, static_broadcasted_argnums=2)", xr_ns)
    np.testing.assert_allclose(pmapped(X[None], W[None], 1e-3)[0], want, rtol=1e-6)
    eps = 1e-3
    closed = eval(f"jax.jit(lambda *a: xr.{name}(*a, eps=eps))", {**xr_ns, "eps": eps})
    np.testing.assert_allclose(closed(X, W), want, rtol=1e-6)


@pytest.mark.parametrize("m", [[0.5, 1.0, 2.0], (0.5, 1.0, 2.0), [[0.5], [1.0]], range(3), [1, 2, 3]])
def test_kepler_takes_sequences(m: Any) -> None:
    # The docstring's "any real array-like": lists, tuples and ranges, like arrays.
    s, c = xr.kepler(m, 0.3)
    s_ref, c_ref = xr.kepler(np.asarray(m, np.float64), 0.3)
    np.testing.assert_array_equal(s, s_ref)
    np.testing.assert_array_equal(c, c_ref)
    # Statically the parameters are jax.typing.ArrayLike, which (as for jnp) has no lists.
    s, _ = xr.kepler(0.5, [0.1, 0.2])  # type: ignore[arg-type]
    assert s.shape == (2,)


@pytest.mark.parametrize(("value", "got"), [(None, "NoneType"), (123, "int"), (b"xla_ffi_rs.kepler", "bytes")])
def test_target_names_wants_a_string(value: Any, got: str) -> None:
    with pytest.raises(TypeError, match=rf"^target_names: name: expected a target name \(str\), got {got}$"):
        xr.target_names(value)


@pytest.mark.parametrize(("name", "fn"), RMS_FUNCTIONS)
def test_big_python_ints_are_numbers(name: str, fn: Callable[..., Any]) -> None:
    # Before: OverflowError from jnp.asarray ("Python int too large to convert to
    # int64"), naming neither the function nor the argument. Such an int is a
    # number like a Python float of the same value.
    for x, w in [(2**70, 1.0), (np.ones(3), 2**63), (-(2**70), 2.0)]:
        want = np.asarray(fn(float(x) if isinstance(x, int) else x, float(w), eps=0.0))
        np.testing.assert_array_equal(np.asarray(fn(x, w, eps=0.0)), want)
    np.testing.assert_allclose(np.asarray(xr.rms_norm(np.ones(3), 2**63, eps=0.0)), 2.0**63)


@pytest.mark.parametrize(("name", "fn"), RMS_FUNCTIONS)
@pytest.mark.parametrize(
    ("x", "w", "words"),
    [
        (
            np.ones(8),
            np.ones(8),
            "operand 0 (x): expected rank at least 1 (`...b ...n`, with ...n of rank 1), got rank 0",
        ),
        (np.ones((3, 4)), np.ones((4, 4)), "operand 0 (x): expected rank at least 2"),
        (np.ones((3, 5)), np.ones(4), "operand 1 (weight): expected shape [5]"),
    ],
)
def test_vmap_checks_each_example_as_the_call_without_vmap_does(
    name: str, fn: Callable[..., Any], x: np.ndarray, w: np.ndarray, words: str
) -> None:
    # Before: an IndexError from JAX's batching (an example of fewer axes than the
    # weight), or a shape message about the stacked x ("expected shape [3, 4]").
    with pytest.raises(ValueError, match=re.escape(words)):
        fn(x[0], w)
    with pytest.raises(ValueError, match=re.escape(words)):
        jax.vmap(fn, in_axes=(0, None))(x, w)


def test_vmap_of_rms_norm_inplace_refuses_a_weight_that_promotes_y() -> None:
    # Before: with the weight batched too, the rule fell back to the out-of-place
    # op and returned float32 rows for float16 x.
    from xla_ffi_rs.ops.rms_norm_inplace import rms_norm_inplace_op

    x, w = np.ones((5, 8), np.float16), np.ones((5, 8), np.float32)
    words = "rms_norm_inplace: weight: a float32 weight makes y float32, which cannot be written into x of float16"
    with pytest.raises(TypeError, match=f"^{re.escape(words)}"):
        xr.rms_norm_inplace(x[0], w[0])
    with pytest.raises(TypeError, match=f"^{re.escape(words)}"):
        jax.vmap(xr.rms_norm_inplace)(x, w)
    # The op itself (what the function binds) checks each example too.
    words = "result 0 (y) is float32[8], which cannot be written into operand 0 (x) of float16[8]"
    with pytest.raises(TypeError, match=re.escape(words)):
        jax.vmap(lambda x, w: rms_norm_inplace_op(x, w, eps=1e-5))(x, w)
    y = jax.vmap(xr.rms_norm_inplace)(x, w.astype(np.float16))
    assert y.dtype == np.float16 and y.shape == (5, 8)


@pytest.mark.parametrize(
    ("operands", "words"),
    [
        (
            (np.ones((2, 4)), np.ones(4), np.ones((3, 4)), np.ones(4), np.ones(3)),
            "operand 0 (dx): expected float64[3,4]",
        ),
        ((np.ones((3, 4), np.int32), np.ones(4), np.ones((3, 4)), np.ones(4), np.ones(3)), "operand 0 (dx)"),
        ((np.ones((3, 4)), np.ones(5), np.ones((3, 4)), np.ones(4), np.ones(3)), "operand 1 (dweight)"),
        ((np.ones((3, 4)), np.ones(4), np.ones((3, 4)), np.ones(4), np.ones(4)), "operand 4 (inv_rms)"),
    ],
)
def test_rms_norm_tangent_op_checks_its_operands(operands: tuple[np.ndarray, ...], words: str) -> None:
    # Before: "mul got incompatible shapes for broadcasting", or an int32 dx accepted.
    from xla_ffi_rs.ops.rms_norm import rms_norm_tangent_op

    with pytest.raises(TypeError, match=rf"^rms_norm_tangent: {re.escape(words)}"):
        rms_norm_tangent_op(*operands, eps=1e-5)
    # Well-typed operands give the jvp of the plain formula (eps is optional: the
    # tangent reads it from inv_rms).
    rng = np.random.default_rng(0)
    x, w, dx, dw = (
        rng.standard_normal((3, 4)),
        rng.uniform(0.5, 1.5, 4),
        rng.standard_normal((3, 4)),
        rng.standard_normal(4),
    )
    inv = 1 / np.sqrt(np.mean(x**2, axis=-1) + 1e-5)
    (dy,) = rms_norm_tangent_op(dx, dw, x, w, inv)

    def formula(x: jax.Array, w: jax.Array) -> jax.Array:
        return x / jnp.sqrt(jnp.mean(x**2, axis=-1, keepdims=True) + 1e-5) * w

    np.testing.assert_allclose(np.asarray(dy), np.asarray(jax.jvp(formula, (x, w), (dx, dw))[1]), rtol=1e-12)


def test_the_jnp_reference_gives_the_kernels_inv_rms_for_rows_of_no_elements() -> None:
    # Before: NaN (the mean of no elements) where the kernels give 1/sqrt(eps).
    from xla_ffi_rs.ops.rms_norm import rms_norm_fwd_jnp, rms_norm_fwd_op

    x, w = jnp.ones((3, 0), jnp.float32), jnp.ones(0, jnp.float32)
    _, inv_kernel = rms_norm_fwd_op(x, w, eps=1e-4)
    _, inv_jnp = rms_norm_fwd_jnp(x, w, eps=1e-4)
    np.testing.assert_allclose(np.asarray(inv_jnp), 100.0, rtol=1e-6)
    np.testing.assert_allclose(np.asarray(inv_kernel), np.asarray(inv_jnp), rtol=1e-6)
