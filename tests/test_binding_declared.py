"""binding.op / binding.ops: JAX ops built from handler declarations, over a
generated matrix (shapes, dtypes, vmap axes, jit, grad), compared with float64
numpy references, and fed hostile input. (Sharding: tests/sharding.)"""

from __future__ import annotations

import itertools
import re
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest
from jax.test_util import check_grads

import declared_reference as ref
import xla_ffi_rs
from helpers import kepler_solve_np, rms_norm_bwd_np, rms_norm_np
from xla_ffi_rs import binding, examples
from xla_ffi_rs.ops.rms_norm import rms_norm_dweight_jnp

FLOATS = ("float16", "bfloat16", "float32", "float64")

DECLS = xla_ffi_rs.declarations()  # what the Rust handlers declare
examples.register()

OPS = binding.ops(
    DECLS,
    rms_norm_fwd={},
    rms_norm_bwd={"reductions": {1: rms_norm_dweight_jnp}},
    kepler={},
    kepler_tangent={},
    kepler_cotangent={},
    scale={},
)
FWD, BWD, KEPLER, TANGENT, COTANGENT, SCALE = (
    OPS[n] for n in ("rms_norm_fwd", "rms_norm_bwd", "kepler", "kepler_tangent", "kepler_cotangent", "scale")
)


def count(fn, *args, name: str) -> int:
    return len(re.findall(rf"\b{re.escape(name)}\b", str(jax.make_jaxpr(fn)(*args))))


def dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16 if name == "bfloat16" else name)


def tol(*names: str) -> float:
    return {"float16": 2e-3, "bfloat16": 2e-2, "float32": 2e-6}.get(min(names, key=FLOATS.index), 1e-12)


# -- shapes ----------------------------------------------------------------------

RMS_SHAPES = [  # (x, weight): rank 0-4, 0-size axes, multi-axis or scalar weight, no batch axis
    ((), ()),
    ((2, 3), ()),
    ((4,), (4,)),
    ((3, 4), (4,)),
    ((0, 4), (4,)),
    ((2, 3, 5), (5,)),
    ((2, 3, 5), (3, 5)),
    ((2, 0, 5), (5,)),
    ((2, 3, 2, 4), (4,)),
    ((2, 3, 2, 4), (3, 2, 4)),
    ((2, 3, 2, 4), (2, 3, 2, 4)),
]


@pytest.mark.parametrize(("xs", "ws"), RMS_SHAPES, ids=str)
def test_rms_norm_fwd_shapes(xs, ws) -> None:
    rng = np.random.default_rng(len(xs) + len(ws))
    x, w = rng.normal(size=xs), rng.uniform(0.5, 1.5, ws)
    y, inv = jax.jit(lambda x, w: FWD(x, w, eps=1e-3))(x, w)
    ry, rinv = rms_norm_np(x, w, 1e-3)
    assert y.shape == xs and inv.shape == xs[: len(xs) - len(ws)]
    np.testing.assert_allclose(y, ry, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(inv, rinv, rtol=1e-12)
    assert FWD.batch_dims(*(jax.core.ShapedArray(s, np.float64) for s in (xs, ws))) == len(xs) - len(ws)


@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3), (2, 0, 3), (1, 2, 3, 4)], ids=str)
def test_kepler_shapes_from_scalars_to_rank_4(shape) -> None:
    rng = np.random.default_rng(1)
    m, e = rng.uniform(-4, 4, shape), rng.uniform(0, 0.9, shape)
    s, c = KEPLER(m, e)
    assert s.shape == c.shape == shape
    big_e = kepler_solve_np(m, e)
    np.testing.assert_allclose(s, np.sin(big_e), atol=1e-12)
    np.testing.assert_allclose(c, np.cos(big_e), atol=1e-12)


# -- dtypes ----------------------------------------------------------------------


@pytest.mark.parametrize(("xd", "wd"), list(itertools.product(FLOATS, FLOATS)))
def test_rms_norm_fwd_result_dtypes_follow_the_declared_rule(xd, wd) -> None:
    x = np.random.default_rng(2).normal(size=(3, 4)).astype(dtype(xd))
    w = np.linspace(0.5, 1.5, 4).astype(dtype(wd))
    y, inv = FWD(x, w, eps=1e-5)
    assert y.dtype == jnp.result_type(x.dtype, w.dtype)  # promote(X, W): JAX's promotion
    assert inv.dtype == (np.float64 if "float64" in (xd, wd) else np.float32)  # acc(X, W)
    ry, _ = rms_norm_np(x.astype(np.float64), w.astype(np.float64), 1e-5)
    np.testing.assert_allclose(np.asarray(y, np.float64), ry, rtol=4 * tol(xd, wd), atol=4 * tol(xd, wd))


@pytest.mark.parametrize("name", (*FLOATS, "int32", "bool"))
def test_kepler_accepts_float32_and_float64_only(name) -> None:
    m = np.ones(3, dtype(name))
    if name in ("float32", "float64"):
        assert KEPLER(m, m)[0].dtype == dtype(name)
        return
    with pytest.raises(TypeError) as info:
        KEPLER(m, m)
    for word in ("xla_ffi_rs.kepler", "operand 0 (mean_anomaly)", "float32", "float64", name):
        assert word in str(info.value), (word, str(info.value))


def test_kepler_operands_must_share_their_dtype() -> None:
    with pytest.raises(TypeError) as info:
        KEPLER(np.ones(3, np.float32), np.ones(3))
    for word in ("xla_ffi_rs.kepler", "operand 1 (eccentricity)", "float32", "float64"):
        assert word in str(info.value), (word, str(info.value))


# -- vmap: one call, the batch axes entering the batch ellipsis ----------------


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_vmap_over_every_axis_of_x_is_one_call(axis) -> None:
    rng = np.random.default_rng(3)
    xs, w = rng.normal(size=(4, 3, 5)), rng.uniform(0.5, 1.5, 5)  # 4 examples of (3, 5)
    x = np.moveaxis(xs, 0, axis)
    fn = jax.vmap(lambda x: FWD(x, w, eps=1e-3), in_axes=axis)
    y, inv = fn(x)
    ry, rinv = rms_norm_np(xs, w, 1e-3)
    np.testing.assert_allclose(y, ry, rtol=1e-12)
    np.testing.assert_allclose(inv, rinv, rtol=1e-12)
    text = str(jax.make_jaxpr(fn)(x))
    assert text.count("rms_norm_fwd[") == 1 and "scan" not in text, text


def test_vmap_over_several_operands_at_different_axes_is_one_call() -> None:
    rng = np.random.default_rng(4)
    m, e = rng.uniform(-3, 3, (2, 6)), rng.uniform(0, 0.9, (6, 2))
    fn = jax.vmap(KEPLER, in_axes=(1, 0))
    s, _ = fn(m, e)
    big_e = kepler_solve_np(m.T, e)
    np.testing.assert_allclose(s, np.sin(big_e), atol=1e-12)
    assert count(fn, m, e, name="kepler") == 1 and "scan" not in str(jax.make_jaxpr(fn)(m, e))
    # one operand vmapped, the other broadcast into the batch ellipsis
    s1, _ = jax.vmap(KEPLER, in_axes=(0, None))(m, e[:, 0])
    np.testing.assert_allclose(s1, np.sin(kepler_solve_np(m, e[:, 0])), atol=1e-12)


def test_nested_vmap_is_still_one_call() -> None:
    x, w = np.random.default_rng(5).normal(size=(2, 3, 4, 5)), np.ones(5)
    fn = jax.vmap(jax.vmap(lambda x: FWD(x, w, eps=0.0)[0], in_axes=1), in_axes=0)
    np.testing.assert_allclose(fn(x), np.swapaxes(rms_norm_np(x, w, 0.0)[0], 1, 2), rtol=1e-12)
    assert count(fn, x, name="rms_norm_fwd") == 1


def test_vmap_over_an_operand_without_the_batch_ellipsis_is_correct() -> None:
    """A batched weight cannot enter ...b: the op is mapped over it (lax.map)."""
    rng = np.random.default_rng(6)
    x, w = rng.normal(size=(3, 2, 4)), rng.uniform(0.5, 1.5, (3, 4))
    y, inv = jax.vmap(lambda x, w: FWD(x, w, eps=1e-3))(x, w)
    for i in range(3):
        ry, rinv = rms_norm_np(x[i], w[i], 1e-3)
        np.testing.assert_allclose(y[i], ry, rtol=1e-12)
        np.testing.assert_allclose(inv[i], rinv, rtol=1e-12)


def test_vmap_of_a_result_summed_over_the_batch_uses_its_reduction() -> None:
    rng = np.random.default_rng(7)
    dy, x, w = rng.normal(size=(3, 2, 4)), rng.normal(size=(3, 2, 4)), rng.uniform(0.5, 1.5, 4)
    fn = jax.vmap(lambda dy, x: BWD(dy, x, w, eps=1e-3))
    dx, dw = fn(dy, x)
    for i in range(3):
        rdx, rdw = rms_norm_bwd_np(dy[i], x[i], w, 1e-3)
        np.testing.assert_allclose(dx[i], rdx, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(dw[i], rdw, rtol=1e-10, atol=1e-12)
    assert count(fn, dy, x, name="rms_norm_bwd") == 1


# -- attributes ------------------------------------------------------------------


def test_attributes_are_converted_to_their_declared_types() -> None:
    text = jax.jit(lambda x: SCALE(x, factor=2)[0]).lower(np.ones(3, np.float32)).as_text()
    assert re.search(r"factor = 2\.0+e\+00 : f32", text), text
    text = jax.jit(lambda x, w: FWD(x, w, eps=1)[0]).lower(np.ones((2, 3)), np.ones(3)).as_text()
    assert re.search(r"eps = 1\.0+e\+00 : f64", text), text


# -- jit, grad: JVP and transpose from `linear` and `transpose` ----------------


def test_jit_and_eager_agree() -> None:
    x = np.arange(6.0, dtype=np.float32)
    np.testing.assert_array_equal(SCALE(x, factor=1.5)[0], 1.5 * x)
    np.testing.assert_array_equal(jax.jit(lambda x: SCALE(x, factor=1.5))(x)[0], 1.5 * x)


def test_an_op_linear_in_every_operand_is_differentiable_to_any_order() -> None:
    x = np.linspace(-1, 1, 5).astype(np.float32)
    f = lambda x: SCALE(x, factor=-2.5)[0]  # noqa: E731
    check_grads(f, (x,), order=2, modes=["fwd", "rev"], atol=1e-2, rtol=1e-2)
    np.testing.assert_array_equal(jax.grad(lambda x: f(x).sum())(x), np.full(5, -2.5, np.float32))
    (ct,) = jax.linear_transpose(f, x)(np.ones(5, np.float32))
    np.testing.assert_array_equal(ct, np.full(5, -2.5, np.float32))
    assert count(jax.grad(lambda x: f(x).sum()), x, name="scale") == 2  # primal and transpose


def _point(shape=(7,)):
    rng = np.random.default_rng(8)
    e = rng.uniform(0, 0.9, shape)
    s, c = KEPLER(rng.uniform(-3, 3, shape), e)
    return e, s, c


def test_transpose_follows_from_linear_and_transpose() -> None:
    """kepler_tangent transposes into kepler_cotangent (and back): reverse mode
    through the linear tangent op runs the cotangent kernel."""
    e, s, c = _point()
    tangent = lambda dm, de: TANGENT(dm, de, e, s, c)  # noqa: E731
    dm, de = np.random.default_rng(9).normal(size=(2, 7))
    check_grads(tangent, (dm, de), order=1, modes=["fwd", "rev"])
    check_grads(lambda a, b: COTANGENT(a, b, e, s, c), (dm, de), order=1, modes=["fwd", "rev"])
    grad = jax.grad(lambda dm: tangent(dm, de)[0].sum())
    assert count(grad, dm, name="kepler_cotangent") == 1
    # independent reference: the implicit derivative of E - e sin E = M
    big_e = np.arctan2(s, c)
    np.testing.assert_allclose(grad(dm), c / (1 - e * np.cos(big_e)), rtol=1e-10)


def test_no_derivative_with_respect_to_a_non_linear_operand_without_a_rule() -> None:
    e, s, c = _point()
    with pytest.raises(NotImplementedError) as info:
        jax.jvp(lambda e: TANGENT(e, e, e, s, c), (e,), (e,))
    for word in ("xla_ffi_rs.kepler_tangent", "operand 2 (eccentricity)", "linear in", "def_jvp"):
        assert word in str(info.value), (word, str(info.value))


def test_second_order_through_a_declared_transpose_without_a_rule_names_the_transpose() -> None:
    """grad of grad through a tangent op differentiates it (and its transpose target,
    which the user never calls) in their non-linear operands: the error names the
    op, says that its transpose target needs a rule as well, and that a def_jvp
    rule must also give the linear part."""
    e, s, c = _point()
    dm, de = np.ones(7), np.zeros(7)
    inner = lambda e: jax.grad(lambda dm: TANGENT(dm, de, e, s, c)[0].sum())(dm)  # noqa: E731
    np.testing.assert_allclose(inner(e), c / (1 - e * np.cos(np.arctan2(s, c))), rtol=1e-10)
    with pytest.raises(NotImplementedError) as info:
        jax.grad(lambda e: inner(e).sum())(e)
    for word in (
        "xla_ffi_rs.kepler_tangent: no derivative with respect to operand 2 (eccentricity)",
        "def_jvp",
        "also gives the part in d_mean_anomaly, d_eccentricity",
        "grad of grad",
        "its transpose xla_ffi_rs.kepler_cotangent: each needs such a rule",
    ):
        assert word in str(info.value), (word, str(info.value))


@pytest.mark.parametrize("how", ["grad", "jvp"])
def test_an_op_linear_in_no_operand_without_a_rule_says_it_has_no_derivative(how) -> None:
    """No JVP rule and no `linear` operand: the error names the target and the
    operand, and says how to give a derivative (not JAX's generic "Differentiation
    rule for 'rms_norm_fwd' not implemented")."""
    x, w = jnp.ones((2, 4), jnp.float32), jnp.ones((4,), jnp.float32)
    f = {
        "grad": lambda: jax.grad(lambda w: FWD(x, w, eps=1e-6)[0].sum())(w),
        "jvp": lambda: jax.jvp(lambda w: FWD(x, w, eps=1e-6)[0], (w,), (w,)),
    }[how]
    with pytest.raises(NotImplementedError) as info:
        f()
    for word in (
        "xla_ffi_rs.rms_norm_fwd",
        "no derivative",
        "operand 1 (weight)",
        "no JVP rule",
        "def_jvp",
        "linear =",
    ):
        assert word in str(info.value), (word, str(info.value))


# -- hostile input: exact error types and words, before lowering ----------------


@pytest.mark.parametrize(
    ("args", "error", "words"),
    [
        (
            (np.ones((2, 3)), np.ones(4)),
            ValueError,
            ("xla_ffi_rs.rms_norm_fwd", "operand", "weight", "expected", "got"),
        ),
        ((np.ones(3), np.ones((2, 3))), ValueError, ("xla_ffi_rs.rms_norm_fwd", "operand", "expected", "got")),
        ((np.ones(3, np.int32), np.ones(3)), TypeError, ("xla_ffi_rs.rms_norm_fwd", "operand 0 (x)", "int32")),
        ((np.ones(3), np.ones(3, bool)), TypeError, ("xla_ffi_rs.rms_norm_fwd", "operand 1 (weight)", "bool")),
    ],
    ids=["weight_shape", "weight_rank", "x_dtype", "weight_dtype"],
)
def test_bad_operands_raise_the_handler_words_while_tracing(args, error, words) -> None:
    for trace in (lambda *a: FWD(*a, eps=1e-5), lambda *a: jax.eval_shape(lambda *b: FWD(*b, eps=1e-5), *a)):
        with pytest.raises(error) as info:
            trace(*args)
        for word in words:
            assert word in str(info.value), (word, str(info.value))


@pytest.mark.parametrize(
    ("params", "error", "words"),
    [
        ({}, TypeError, ("xla_ffi_rs.rms_norm_fwd", "'eps'", "missing")),
        ({"eps": "1e-5"}, TypeError, ("'eps'", "expected a float (f64)", "got str")),
        ({"eps": True}, TypeError, ("'eps'", "expected a float (f64)", "got bool")),
        ({"eps": None}, TypeError, ("'eps'", "missing")),
        ({"eps": 1e-5, "epsilon": 1.0}, TypeError, ("unknown attribute 'epsilon'", "this op takes: eps")),
        ({"esp": 1e-5}, TypeError, ("unknown attribute 'esp'", "did you mean 'eps'")),
    ],
)
def test_bad_attributes_raise_before_lowering(params, error, words) -> None:
    with pytest.raises(error) as info:
        jax.eval_shape(lambda x, w: FWD(x, w, **params), np.ones((2, 3)), np.ones(3))
    for word in words:
        assert word in str(info.value), (word, str(info.value))


def test_scale_factor_out_of_f32_range_and_traced() -> None:
    x = np.ones(2, np.float32)
    with pytest.raises(ValueError, match=r"examples\.scale: attribute 'factor': expected a float in the f32 range"):
        SCALE(x, factor=1e300)
    with pytest.raises(
        ValueError, match=r"examples\.scale: attribute 'factor': .* got 1e-50 \(float32 rounds it to 0\)"
    ):
        SCALE(x, factor=1e-50)
    SCALE(x, factor=1e-40)[0].block_until_ready()  # a float32 subnormal: accepted
    with pytest.raises(TypeError, match=r"attribute 'factor' \(f32\) is traced"):
        jax.jit(lambda x, f: SCALE(x, factor=f))(x, 2.0)
    with pytest.raises(TypeError, match=r"attribute 'factor' \(f32\) is traced .*static_broadcasted_argnums"):
        jax.pmap(lambda x, f: SCALE(x, factor=f), in_axes=(0, None))(x[None], 2.0)


def test_wrong_operand_count() -> None:
    with pytest.raises(
        TypeError, match=r"xla_ffi_rs\.kepler: expected 2 operands \(mean_anomaly, eccentricity\), got 1"
    ):
        KEPLER(np.ones(3))


# -- building: declarations that cannot make an op --------------------------------


def test_a_result_summed_over_the_batch_needs_a_reduction() -> None:
    with pytest.raises(ValueError) as info:
        binding.op(DECLS["xla_ffi_rs.rms_norm_bwd"])
    for word in ("xla_ffi_rs.rms_norm_bwd", "result 1 (dweight)", "...b", "reductions={1:"):
        assert word in str(info.value), (word, str(info.value))


def test_declaration_errors() -> None:
    with pytest.raises(TypeError, match="declaration: expected a dict, got str"):
        binding.op("xla_ffi_rs.kepler")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="missing key"):
        binding.op({"target": "t"})
    no_shapes = dict(DECLS["xla_ffi_rs.kepler"], shapes=None)
    with pytest.raises(ValueError, match=r"xla_ffi_rs\.kepler: the declaration has no shape rule"):
        binding.op(no_shapes)
    with pytest.raises(
        ValueError, match=r"plugin\.x is not a registered target; register it with xla_ffi_rs\.register_targets"
    ):
        binding.op(dict(DECLS["xla_ffi_rs.kepler"], target="plugin.x"))
    with pytest.raises(ValueError, match=r"binding.ops: no declaration for \['kepler_typo'\]"):
        binding.ops(DECLS, kepler_typo={})
    with pytest.raises(TypeError, match=r"binding.ops: kepler: unknown option\(s\) \['jnp'\]"):
        binding.ops(DECLS, kepler={"jnp": None})


def test_transpose_links_are_checked() -> None:
    with pytest.raises(ValueError, match="which is not built: add kepler_cotangent="):
        binding.ops(DECLS, kepler_tangent={})
    # A misspelt transpose target in the Rust #[handler]: no option could build it.
    tangent = dict(DECLS["xla_ffi_rs.kepler_tangent"], transpose="xla_ffi_rs.kepler_cotangnet")
    typo = {"xla_ffi_rs.kepler_tangent": tangent, "xla_ffi_rs.kepler_cotangent": DECLS["xla_ffi_rs.kepler_cotangent"]}
    with pytest.raises(
        ValueError,
        match=r"xla_ffi_rs\.kepler_tangent transposes into xla_ffi_rs\.kepler_cotangnet, which none of the declarations "
        r"declares \(did you mean xla_ffi_rs\.kepler_cotangent\?\); declared: ",
    ):
        binding.ops(typo)
    tangent = DECLS["xla_ffi_rs.kepler_tangent"]
    with pytest.raises(ValueError, match=r"transpose: expected the op of xla_ffi_rs\.kepler_cotangent, got"):
        binding.op(tangent, transpose=KEPLER)
    alone = binding.op(tangent)  # its transpose op is missing: a clear error when needed
    e, s, c = _point()
    with pytest.raises(NotImplementedError, match=r"its transpose target xla_ffi_rs\.kepler_cotangent has no op"):
        jax.grad(lambda dm: alone(dm, dm, e, s, c)[0].sum())(e)


def test_ops_builds_every_declaration_by_default() -> None:
    built = binding.ops({t: DECLS[t] for t in ("xla_ffi_rs.kepler_tangent", "xla_ffi_rs.kepler_cotangent")})
    assert sorted(built) == ["kepler_cotangent", "kepler_tangent"]
    assert built["kepler_tangent"].targets == {
        "cpu": "xla_ffi_rs.kepler_tangent",
        **({"cuda": "xla_ffi_rs.kepler_tangent"} if "cuda" in OPS["kepler"].targets else {}),
    }


# -- the native checker against the independent reading of the notation --------

INFER_CASES = [
    ("xla_ffi_rs.rms_norm_fwd", [xs, ws], [xd, wd])
    for (xs, ws) in [*RMS_SHAPES, ((2, 3), (4,)), ((3,), (2, 3)), ((2, 3), ()), ((), ())]
    for xd, wd in [("float32", "float32"), ("float16", "bfloat16"), ("bfloat16", "float64"), ("int32", "float32")]
] + [
    ("xla_ffi_rs.kepler", [a, b], [da, db])
    for a, b in [((), ()), ((3,), (3,)), ((2, 3), (3,)), ((0,), (0,))]
    for da, db in [("float32", "float32"), ("float64", "float32"), ("float16", "float16")]
]


@pytest.mark.parametrize(("target", "shapes", "dtypes"), INFER_CASES, ids=str)
def test_native_infer_agrees_with_the_reference(target, shapes, dtypes) -> None:
    decl = DECLS[target]
    try:
        want = ref.infer(decl, shapes, dtypes)
    except (TypeError, ValueError):
        # (which problem is reported first, of a bad dtype and a bad shape, is the checker's choice)
        with pytest.raises((TypeError, ValueError)) as info:
            binding.infer(decl, shapes, dtypes)
        assert str(info.value).startswith(f"{target}: operand "), str(info.value)
        return
    results, batch = binding.infer(decl, shapes, dtypes)
    assert [(tuple(s), d) for s, d in results] == [(tuple(s), d) for s, d in want[0]]
    assert batch == want[1]


def test_a_hand_rule_that_cannot_take_the_attributes_is_refused_when_given() -> None:
    # The rules are called with the call's attributes as keywords: a rule without
    # them failed only when differentiated, in Python's words naming neither.
    scale = binding.op(DECLS["xla_ffi_rs.examples.scale"])
    x = jnp.arange(3.0, dtype=jnp.float32)

    def no_params(primals: Any, tangents: Any) -> Any:
        return scale(primals[0], factor=2.0), scale(tangents[0], factor=2.0)

    with pytest.raises(
        TypeError,
        match=r"xla_ffi_rs\.examples\.scale: the JVP rule .*no_params is called with the call's attributes as "
        r"keyword arguments \(factor\), but it does not take factor: add \*\*params",
    ):
        scale.def_jvp(no_params)
    with pytest.raises(TypeError, match=r"examples\.scale: the transpose rule .* does not take factor"):
        scale.def_transpose(lambda cts, x: cts)

    # Taking them by name or as **params is accepted, and used.
    @scale.def_jvp
    def by_name(primals: Any, tangents: Any, factor: float) -> Any:
        return scale(primals[0], factor=factor), scale(tangents[0], factor=3 * factor)

    _, dy = jax.jvp(lambda v: scale(v, factor=2.0)[0], (x,), (jnp.ones(3, jnp.float32),))
    np.testing.assert_array_equal(dy, np.full(3, 6.0, np.float32))
    scale.def_jvp(lambda primals, tangents, **params: (scale(*primals, **params), scale(*tangents, **params)))
    _, dy = jax.jvp(lambda v: scale(v, factor=2.0)[0], (x,), (jnp.ones(3, jnp.float32),))
    np.testing.assert_array_equal(dy, np.full(3, 2.0, np.float32))
