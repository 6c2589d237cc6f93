"""Compositions of two (and a few of three) transformations, generated as a
matrix over every op: kepler, rms_norm, rms_norm_inplace, a python_op with JVP
and vectorized batching, a nonlinear_op, and a ``binding.op`` (the example
target ``scale``). Each composition is applied to the op and to its plain jnp
formula alike; the results must have the same pytree, shapes, dtypes and weak
types, and the same values (float64), and ``jax.eval_shape`` of the composition
must give the structure the call gives. A representative subset is run here (the
pairs are chosen so that every transformation appears first and second for some
op); ``check_grads`` and the order of first use in fresh processes below."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.test_util import check_grads

import xla_ffi_rs as xr
from xla_ffi_rs import binding, examples
from xla_ffi_rs.ops.kepler import kepler_jnp

Fn = Callable[..., Any]
Args = tuple[Any, ...]

sin_op = xr.python_op(np.sin, abstract_eval=lambda x: x, vectorized=True, name="matrix_sin")
cos_op = xr.python_op(np.cos, abstract_eval=lambda x: x, vectorized=True, name="matrix_cos")


@sin_op.def_jvp_rule
def _sin_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (dx,) = primals, tangents
    return sin_op(x), None if dx is None else cos_op(x) * dx


@cos_op.def_jvp_rule
def _cos_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (dx,) = primals, tangents
    return cos_op(x), None if dx is None else -sin_op(x) * dx


nl_sin = xr.nonlinear_op(
    np.sin, lambda x, dx: np.cos(x) * dx, lambda x, ct: np.cos(x) * ct, abstract_eval=lambda x: x, name="matrix_nl_sin"
)


def _scale_op() -> Any:
    examples.register()
    return binding.op(xr.declarations()["xla_ffi_rs.examples.scale"])


scale_op = _scale_op()


def rms_ref(x: Any, w: Any) -> Any:
    return x / jnp.sqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-5) * w


def vec(n: int, lo: float, hi: float, dtype: Any = np.float64) -> np.ndarray:
    return np.linspace(lo, hi, n).astype(dtype)


# name: (op, jnp formula, arguments, tolerance, highest order of derivative in the matrix)
OPS: dict[str, tuple[Fn, Fn, Args, float, int]] = {
    # second order of kepler_jnp's solver takes XLA seconds to compile: in test_check_grads below
    "kepler": (xr.kepler, kepler_jnp, (vec(6, -3, 3), vec(6, 0.1, 0.8)), 1e-9, 1),
    # closed over eps: custom_jvp/custom_vjp would trace a defaulted argument
    # closed over eps: custom_jvp/custom_vjp would trace a defaulted argument
    "rms_norm": (lambda x, w: xr.rms_norm(x, w), rms_ref, (vec(12, -2, 3).reshape(3, 4), vec(4, 0.5, 1.5)), 1e-9, 2),
    "rms_norm_inplace": (
        lambda x, w: xr.rms_norm_inplace(x, w),
        rms_ref,
        (vec(12, -2, 3).reshape(3, 4), vec(4, 0.5, 1.5)),
        1e-9,
        2,
    ),
    "python_op": (lambda x, y: sin_op(x) * y, lambda x, y: jnp.sin(x) * y, (vec(6, -2, 3), vec(6, 0.5, 1.5)), 1e-9, 2),
    # second order in the operands is a documented ValueError for nonlinear_op
    "nonlinear_op": (
        lambda x, y: nl_sin(x) * y,
        lambda x, y: jnp.sin(x) * y,
        (vec(6, -2, 3), vec(6, 0.5, 1.5)),
        1e-9,
        1,
    ),
    "binding_op": (
        lambda x, y: scale_op(x * y, factor=2.5)[0],
        lambda x, y: 2.5 * (x * y),
        (vec(6, -2, 3, np.float32), vec(6, 0.5, 1.5, np.float32)),
        1e-5,
        2,
    ),
}


def weighted_sum(out: Any) -> Any:
    return sum(jnp.sum(leaf * (i + 1.25)) for i, leaf in enumerate(jax.tree.leaves(out)))


def stacked(a: Any, axis: int) -> Any:
    a = jnp.asarray(a)
    return jnp.stack([a, a * 0.875 + 0.0625], axis=axis)


def ones_like_tree(tree: Any, scale: float = 0.75) -> Any:
    return jax.tree.map(lambda v: jnp.ones_like(v) * scale, tree)


def vmap_t(in_axes: Any, out_axes: int = 0) -> Callable[[Fn, Args], tuple[Fn, Args]]:
    def t(f: Fn, args: Args) -> tuple[Fn, Args]:
        axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
        new = tuple(a if ax is None else stacked(a, ax) for a, ax in zip(args, axes, strict=True))
        return jax.vmap(f, in_axes=axes, out_axes=out_axes), new

    return t


def vjp_t(f: Fn, args: Args) -> tuple[Fn, Args]:
    def g(*a: Any) -> Any:
        out, pullback = jax.vjp(f, *a)
        return out, pullback(ones_like_tree(out, 0.5))

    return g, args


def linearize_t(f: Fn, args: Args) -> tuple[Fn, Args]:
    def g(*a: Any) -> Any:
        out, f_lin = jax.linearize(f, *a)
        return out, f_lin(*ones_like_tree(a))

    return g, args


def transpose_in_second_t(f: Fn, args: Args) -> tuple[Fn, Args]:
    """linear_transpose of the JVP in the second operand alone."""

    def g(*a: Any) -> Any:
        tangent = lambda d: jax.jvp(lambda y: f(a[0], y), (a[1],), (d,))[1]  # noqa: E731
        return jax.linear_transpose(tangent, a[1])(ones_like_tree(jax.eval_shape(f, *a), 0.5))

    return g, args


def custom_jvp_t(f: Fn, args: Args) -> tuple[Fn, Args]:
    g = jax.custom_jvp(f)
    g.defjvp(lambda p, t: jax.jvp(f, p, t))
    return g, args


def custom_vjp_t(f: Fn, args: Args) -> tuple[Fn, Args]:
    g = jax.custom_vjp(f)
    g.defvjp(lambda *a: (f(*a), a), lambda res, ct: jax.vjp(f, *res)[1](ct))
    return g, args


def loop_t(kind: str) -> Callable[[Fn, Args], tuple[Fn, Args]]:
    def t(f: Fn, args: Args) -> tuple[Fn, Args]:
        def step(out: Any, a: Args) -> Any:
            return jax.tree.map(lambda u, v: u * 0.5 + v, out, f(*a))

        if kind == "scan":
            return (lambda *a: lax.scan(lambda c, xs: (c, f(*xs)), 0.0, a)[1]), tuple(stacked(x, 0) for x in args)
        if kind == "map":
            return (lambda *a: lax.map(lambda xs: f(*xs), a)), tuple(stacked(x, 0) for x in args)
        if kind == "fori":
            return (lambda *a: lax.fori_loop(0, 2, lambda i, o: step(o, a), f(*a))), args
        if kind == "while":
            body = lambda c, a: (c[0] + 1, step(c[1], a))  # noqa: E731
            return (lambda *a: lax.while_loop(lambda c: c[0] < 2, lambda c: body(c, a), (0, f(*a)))[1]), args
        zero = lambda *a: jax.tree.map(jnp.zeros_like, f(*a))  # noqa: E731
        if kind == "cond":
            return (lambda *a: lax.cond(True, f, zero, *a)), args
        return (lambda *a: lax.switch(1, [zero, f], *a)), args

    return t


def all_args(n: int) -> tuple[int, ...]:
    return tuple(range(n))


TRANSFORMS: dict[str, Callable[[Fn, Args], tuple[Fn, Args]]] = {
    "jit": lambda f, a: (jax.jit(f), a),
    "vmap0": vmap_t(0),
    "vmap1": vmap_t(1),
    "vmap-1_out1": vmap_t(-1, 1),
    "vmap0_None": vmap_t((0, None)),
    "vmapNone_0": vmap_t((None, 0)),
    "vmap_axis_size": lambda f, a: (jax.vmap(lambda: f(*a), axis_size=2), ()),
    "grad": lambda f, a: (jax.grad(lambda *b: weighted_sum(f(*b)), all_args(len(a))), a),
    "grad_1_0": lambda f, a: (jax.grad(lambda *b: weighted_sum(f(*b)), (1, 0)), a),
    "grad_weight": lambda f, a: (jax.grad(lambda *b: weighted_sum(f(*b)), 1), a),
    "jvp": lambda f, a: ((lambda *b: jax.jvp(f, b, ones_like_tree(b))), a),
    "vjp": vjp_t,
    "linearize": linearize_t,
    "transpose_second": transpose_in_second_t,
    "jacfwd": lambda f, a: (jax.jacfwd(f, all_args(len(a))), a),
    "jacrev": lambda f, a: (jax.jacrev(f, all_args(len(a))), a),
    "hessian": lambda f, a: (jax.hessian(lambda *b: weighted_sum(f(*b)), all_args(len(a))), a),
    "checkpoint": lambda f, a: (jax.checkpoint(f), a),
    "checkpoint_nothing": lambda f, a: (jax.checkpoint(f, policy=jax.checkpoint_policies.nothing_saveable), a),
    "scan": loop_t("scan"),
    "map": loop_t("map"),
    "fori": loop_t("fori"),
    "while": loop_t("while"),
    "cond": loop_t("cond"),
    "switch": loop_t("switch"),
    "custom_jvp": custom_jvp_t,
    "custom_vjp": custom_vjp_t,
    "named_call": lambda f, a: (jax.named_call(f, name="matrix"), a),
}
SECOND_ORDER = {"hessian"}
DERIVATIVES = {"grad", "grad_1_0", "grad_weight", "jvp", "vjp", "linearize", "transpose_second", "jacfwd", "jacrev"}


def order(name: str) -> int:
    return 2 if name in SECOND_ORDER else int(name in DERIVATIVES)


def matrix() -> list[tuple[str, tuple[str, ...]]]:
    """Per op, pairs (a, b), every 7th transformation a with a rotation b past it:
    across the ops every transformation comes first and second, each time beside
    a different one; plus a few chains of three."""
    names = list(TRANSFORMS)
    cases: list[tuple[str, tuple[str, ...]]] = []
    for i, (op, (*_, highest)) in enumerate(OPS.items()):
        for k in range(i % 7, len(names), 7):
            j = (k + 5 + 3 * i) % len(names)
            while order(names[k]) + order(names[j]) > highest:  # third order: slow, and covered elsewhere
                j = (j + 1) % len(names)
            cases.append((op, (names[k], names[j])))
    chains: list[tuple[str, ...]] = [
        ("jit", "vmap1", "grad_1_0"),
        ("vmap0_None", "jacrev", "checkpoint"),
        ("scan", "jvp", "custom_vjp"),
        ("grad", "vmap0", "jit"),
        ("linearize", "cond", "vmapNone_0"),
    ]
    cases += [(op, chain) for op, chain in zip(list(OPS) * 2, chains, strict=False)]
    return cases


def compose(f: Fn, names: tuple[str, ...], args: Args) -> tuple[Fn, Args]:
    for name in names:
        f, args = TRANSFORMS[name](f, args)
    return f, args


def structure(tree: Any) -> tuple[Any, list[tuple[Any, Any, bool]]]:
    leaves, treedef = jax.tree.flatten(tree)
    return treedef, [(leaf.shape, leaf.dtype, jax.typeof(leaf).weak_type) for leaf in leaves]


@pytest.mark.parametrize(("op", "names"), matrix(), ids=lambda v: v if isinstance(v, str) else "-".join(v))
def test_composition_matches_the_jnp_formula(op: str, names: tuple[str, ...]) -> None:
    f, ref, args, tol, _ = OPS[op]
    ours, ours_args = compose(f, names, args)
    want, _ = compose(ref, names, args)
    try:
        expected = jax.jit(want)(*ours_args)  # jitted: the formula's eager ops compile one by one
    except (ValueError, TypeError) as e:  # JAX refuses the composition itself (reverse mode of a while_loop)
        with pytest.raises(type(e)):
            ours(*ours_args)
        return
    got = ours(*ours_args)
    assert structure(got) == structure(expected)
    shapes = jax.eval_shape(ours, *ours_args)
    assert str(jax.tree.structure(shapes)) == str(jax.tree.structure(got))
    assert [(s.shape, s.dtype) for s in jax.tree.leaves(shapes)] == [(g.shape, g.dtype) for g in jax.tree.leaves(got)]
    for g, r in zip(jax.tree.leaves(got), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(r, np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["kepler", "rms_norm", "python_op"])
def test_check_grads_through_vmap_and_jit(op: str) -> None:
    f, _, args, _, _ = OPS[op]
    g = jax.jit(jax.vmap(lambda a, b: weighted_sum(f(a, b)), in_axes=(0, None)))
    check_grads(g, (stacked(args[0], 0), args[1]), order=2, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)


FIRST_USE = """
import json, sys, jax, numpy as np
jax.config.update("jax_enable_x64", True)
import xla_ffi_rs as xr
x, w = np.linspace(-2, 3, 12).reshape(3, 4), np.linspace(0.5, 1.5, 4)
m, e = np.linspace(-3, 3, 6), np.linspace(0.1, 0.8, 6)
steps = {
    "vmap": lambda: (jax.vmap(xr.rms_norm, (1, None), 1)(x.T.copy(), w), jax.vmap(xr.kepler, (0, None))(m, 0.5)),
    "grad": lambda: (jax.grad(lambda w, x: xr.rms_norm(x, w).sum(), (1, 0))(w, x),
                     jax.grad(lambda e, m: xr.kepler(m, e)[1].sum())(e, m)),
    "jvp": lambda: (jax.jvp(lambda w: xr.rms_norm(x, w), (w,), (w,)), jax.jvp(lambda e: xr.kepler(m, e), (e,), (e,))),
}
out = {}
for name in sys.argv[1].split(","):
    leaves = jax.tree.leaves(steps[name]())
    out[name] = [[list(l.shape), str(l.dtype), bool(jax.typeof(l).weak_type), np.asarray(l).tolist()] for l in leaves]
print(json.dumps(out))
"""


def test_results_do_not_depend_on_the_order_of_first_use() -> None:
    """vmap before grad before jvp in one fresh process, the reverse in another:
    the same structures and the same values."""
    runs = []
    for order in ("vmap,grad,jvp", "jvp,grad,vmap"):
        done = subprocess.run(
            [sys.executable, "-c", FIRST_USE, order], capture_output=True, text=True, timeout=120, check=True
        )
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert runs[0] == runs[1]
