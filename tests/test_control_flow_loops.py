"""The ops inside the loops and remat that training and simulation code writes,
beyond ``test_compositions.py`` and the transformation matrix: ``lax.scan`` with
``unroll``, ``reverse`` and length 0, ``lax.map`` with ``batch_size``, ``fori_loop``
with traced bounds under ``vmap``, ``rms_norm_inplace`` as a donated scan carry,
a remat'ed scan of layers under name-based and offload policies, a batched
``cond`` whose unselected branch gets inputs invalid for it, and what a second
call compiles. References: the plain jnp formulas (``kepler_jnp``, the RMS
formula) in float64."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.ad_checkpoint import checkpoint_name

import xla_ffi_rs as xr
from compile_counts import counting
from xla_ffi_rs import binding, examples
from xla_ffi_rs.ops.kepler import kepler_jnp

RNG = np.random.default_rng(11)
XS = RNG.normal(size=(5, 3, 4))
H0 = RNG.normal(size=(3, 4))
W = RNG.uniform(0.5, 1.5, 4)
E = jnp.asarray(RNG.uniform(0.05, 0.9, (3, 4)))


def rms_ref(x: Any, w: Any, eps: float = 1e-5) -> Any:
    return x / jnp.sqrt(jnp.mean(x * x, -1, keepdims=True) + eps) * w


def close(got: Any, want: Any, tol: float = 1e-9) -> None:
    for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want), strict=True):
        assert np.shape(g) == np.shape(w)
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=tol, atol=tol)


sin_op = xr.python_op(np.sin, abstract_eval=lambda x: x, vectorized=True, name="loops_sin")
nl_sin = xr.nonlinear_op(
    np.sin, lambda x, dx: np.cos(x) * dx, lambda x, ct: np.cos(x) * ct, abstract_eval=lambda x: x, name="loops_nl_sin"
)


@sin_op.def_jvp_rule
def _sin_jvp(primals: Any, tangents: Any) -> Any:
    (x,), (dx,) = primals, tangents
    return sin_op(x), None if dx is None else jnp.cos(x) * dx


def _scale(x: Any) -> Any:
    examples.register()
    op = binding.op(xr.declarations()["xla_ffi_rs.examples.scale"])
    return op(x.astype(jnp.float32), factor=0.5)[0].astype(x.dtype)


# name: (op on one (3, 4) block, its jnp formula, tolerance)
OPS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any], float]] = {
    "kepler": (lambda x: xr.kepler(x, E)[0], lambda x: kepler_jnp(x, E)[0], 1e-9),
    "rms_norm": (lambda x: xr.rms_norm(x, W), lambda x: rms_ref(x, W), 1e-9),
    "rms_norm_inplace": (lambda x: xr.rms_norm_inplace(x, W), lambda x: rms_ref(x, W), 1e-9),
    "python_op": (sin_op, jnp.sin, 1e-9),
    "nonlinear_op": (nl_sin, jnp.sin, 1e-9),
    "binding": (_scale, lambda x: x * 0.5, 1e-6),
}


def scanned(op: Callable[[Any], Any], **kw: Any) -> Callable[[Any, Any], Any]:
    """The op on the carry and on each slice; a carry, stacked outputs and a sum."""

    def body(c: Any, x: Any) -> Any:
        y = op(c + x)
        return y * 0.5 + op(x), y.sum()

    def f(c: Any, xs: Any) -> Any:
        c, ys = lax.scan(body, c, xs, **kw)
        return c, ys

    return f


def loss(f: Callable[..., Any]) -> Callable[..., Any]:
    def g(*a: Any) -> Any:
        c, ys = f(*a)
        return (c * c).sum() + (ys * jnp.arange(1, ys.shape[0] + 1)).sum()

    return g


SCANS = {"plain": {}, "unroll2_reverse": {"unroll": 2, "reverse": True}}


@functools.cache
def scan_reference(name: str, reverse: bool, what: str) -> Any:
    """The jnp formula's scan (``unroll`` changes no value, so the reference has
    none): its value, vmapped value, gradient or JVP, computed once for the
    parametrizations that compare with it."""
    g = scanned(OPS[name][1], reverse=reverse)
    if what == "value":
        return g(H0, XS)
    if what == "vmap":
        return jax.vmap(g, (None, 0))(H0, jnp.stack([XS, -XS]))
    if what == "grad":
        return jax.grad(loss(g), (0, 1))(H0, XS)
    return jax.jvp(g, (H0, XS), (H0, XS))


@pytest.mark.parametrize("kw", sorted(SCANS))
@pytest.mark.parametrize("name", sorted(OPS))
def test_scan_unroll_reverse_jit_eager_grad_vmap(name: str, kw: str) -> None:
    op, _, tol = OPS[name]
    f = scanned(op, **SCANS[kw])
    reverse = bool(SCANS[kw].get("reverse"))
    close(jax.jit(f)(H0, XS), scan_reference(name, reverse, "value"), tol)
    close(f(H0, XS), scan_reference(name, reverse, "value"), tol)
    close(jax.vmap(f, (None, 0))(H0, jnp.stack([XS, -XS])), scan_reference(name, reverse, "vmap"), tol)
    if name == "kepler" and kw != "plain":
        return  # kepler_jnp's differentiated solver takes XLA tens of seconds to compile unrolled
    if name != "nonlinear_op":  # reverse mode of a nonlinear_op: its f_vjp, covered in its own tests
        close(jax.jit(jax.grad(loss(f), (0, 1)))(H0, XS), scan_reference(name, reverse, "grad"), tol * 100)
    close(jax.jvp(f, (H0, XS), (H0, XS)), scan_reference(name, reverse, "jvp"), tol * 100)


@pytest.mark.parametrize("name", sorted(OPS))
def test_scan_of_length_zero_returns_the_carry(name: str) -> None:
    op, ref, tol = OPS[name]
    f, g = scanned(op), scanned(ref)
    empty = XS[:0]
    c, ys = jax.jit(f)(H0, empty)
    assert ys.shape == (0,)
    close((c, ys), g(H0, empty), tol)
    close(f(H0, empty), g(H0, empty), tol)
    close(jax.grad(lambda c: f(c, empty)[0].sum())(H0), np.ones_like(H0))
    close(jax.vmap(f, (0, None))(XS, empty), jax.vmap(g, (0, None))(XS, empty), tol)


@pytest.mark.parametrize("batch_size", [2, 5])
@pytest.mark.parametrize("name", sorted(OPS))
def test_map_with_batch_size(name: str, batch_size: int) -> None:
    """``lax.map(batch_size=2)`` over 5 rows: a scan over two batches of 2 (the op
    vmapped) plus a remainder of 1; ``batch_size=5``: one vmapped call."""
    op, ref, tol = OPS[name]
    close(jax.jit(lambda xs: lax.map(op, xs, batch_size=batch_size))(XS), lax.map(ref, XS), tol)
    if name != "nonlinear_op":
        got = jax.grad(lambda xs: (lax.map(op, xs, batch_size=batch_size) ** 2).sum())(XS)
        close(got, jax.grad(lambda xs: (lax.map(ref, xs) ** 2).sum())(XS), tol * 100)


@pytest.mark.parametrize("name", sorted(OPS))
def test_fori_loop_with_traced_bounds_vmapped(name: str) -> None:
    """A traced upper bound makes ``fori_loop`` a ``while_loop``; vmapped over the
    bound, the body runs for every element until the longest is done, the finished
    ones selected away."""
    op, ref, tol = OPS[name]

    def loop(o: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
        return lambda n, x: lax.fori_loop(0, n, lambda i, c: o(c) * 0.9 + 0.1, x)

    ns = jnp.array([0, 1, 3])
    close(jax.jit(loop(op))(3, H0), loop(ref)(3, H0), tol)
    close(jax.vmap(loop(op), (0, None))(ns, H0), jax.vmap(loop(ref), (0, None))(ns, H0), tol)
    close(jax.jvp(lambda x: loop(op)(2, x), (H0,), (H0,)), jax.jvp(lambda x: loop(ref)(2, x), (H0,), (H0,)), tol * 100)


@pytest.mark.parametrize("unroll", [1, 2])
def test_rms_norm_inplace_as_a_donated_scan_carry(unroll: int) -> None:
    """The carry updated in place while the body still reads the old carry after
    the op: the result must be the one of the formula, call after call, with the
    carry donated (XLA reuses the buffers across iterations)."""

    def body(norm: Callable[..., Any]) -> Callable[[Any, Any], Any]:
        def b(h: Any, x: Any) -> Any:
            y = norm(h, W)
            return y + 0.5 * h + x, (y - h).sum()

        return b

    f = jax.jit(lambda h, xs: lax.scan(body(xr.rms_norm_inplace), h, xs, unroll=unroll), donate_argnums=(0,))
    want = lax.scan(body(rms_ref), H0, XS)
    for _ in range(2):
        h = jnp.array(H0)
        close(f(h, XS), want)
        assert h.is_deleted()
    g = jax.jit(jax.vmap(lambda h: lax.scan(body(xr.rms_norm_inplace), h, XS)), donate_argnums=0)
    close(g(jnp.stack([H0, -H0])), jax.vmap(lambda h: lax.scan(body(rms_ref), h, XS))(jnp.stack([H0, -H0])))


LAYERS = 3
WS = RNG.normal(size=(LAYERS, 4, 4)) / 2
GS = RNG.uniform(0.5, 1.5, (LAYERS, 4))

POLICIES: dict[str, Any] = {
    "none": None,
    "nothing_saveable": jax.checkpoint_policies.nothing_saveable,
    "dots_saveable": jax.checkpoint_policies.dots_saveable,
    "save_only_normed": jax.checkpoint_policies.save_only_these_names("normed"),
    "offload_normed": jax.checkpoint_policies.save_and_offload_only_these_names(
        names_which_can_be_saved=[],
        names_which_can_be_offloaded=["normed"],
        offload_src="device",
        offload_dst="pinned_host",
    ),
}


def layer_stack(norm: Callable[..., Any], policy: Any, remat: bool) -> Callable[..., Any]:
    """A pre-norm residual stack, the layers' weights stacked and scanned over."""

    def layer(h: Any, p: Any) -> Any:
        w, g = p
        n = checkpoint_name(norm(h, g), "normed")
        return h + jnp.tanh(n @ w), None

    body = jax.checkpoint(layer, policy=policy) if remat else layer
    return lambda x, ws, gs: lax.scan(body, x, (ws, gs))[0]


def squared(f: Callable[..., Any]) -> Callable[..., Any]:
    return lambda *a: (f(*a) ** 2).sum()


@functools.cache
def layer_stack_reference() -> tuple[Any, Any, Any]:
    """The jnp stack without remat: value, gradient of its square's sum, and that
    gradient vmapped over (H0, -H0); once for every norm and policy."""
    ref = layer_stack(rms_ref, None, False)
    grads = jax.grad(squared(ref), (0, 1, 2))(H0, WS, GS)
    vmapped = jax.vmap(jax.grad(squared(ref)), (0, None, None))(jnp.stack([H0, -H0]), WS, GS)
    return ref(H0, WS, GS), grads, vmapped


@pytest.mark.parametrize("policy", sorted(POLICIES))
@pytest.mark.parametrize("norm", ["rms_norm", "rms_norm_inplace"])
def test_remat_of_a_scanned_layer_stack(norm: str, policy: str) -> None:
    op = {"rms_norm": xr.rms_norm, "rms_norm_inplace": xr.rms_norm_inplace}[norm]
    ours = layer_stack(op, POLICIES[policy], True)
    value, grads, vmapped_grads = layer_stack_reference()
    close(jax.jit(ours)(H0, WS, GS), value)
    close(jax.jit(jax.grad(squared(ours), (0, 1, 2)))(H0, WS, GS), grads, 1e-8)
    got = jax.vmap(jax.grad(squared(ours)), (0, None, None))(jnp.stack([H0, -H0]), WS, GS)
    close(got, vmapped_grads, 1e-8)
    # one norm per layer body, forward; the backward has the one backward kernel
    text = str(jax.make_jaxpr(jax.grad(squared(ours), (0, 1, 2)))(H0, WS, GS))
    assert text.count("rms_norm_bwd") == 1


def test_remat_of_a_scanned_layer_stack_second_order() -> None:
    from jax.test_util import check_grads

    f = layer_stack(xr.rms_norm, POLICIES["save_only_normed"], True)
    check_grads(lambda x, g: f(x, WS, g), (H0[:2], GS), order=2, modes=("fwd", "rev"))


def test_the_op_appears_once_per_body_when_unrolled() -> None:
    """``unroll=2`` is XLA's business: the jaxpr has one call per body, the loop
    kept, and the lowered program has the unrolled copies only."""
    f = scanned(lambda x: xr.kepler(x, E)[0], unroll=2)
    text = str(jax.make_jaxpr(f)(H0, XS))
    assert text.count("kepler ") == 2 and "scan[" in text  # the carry's and the slice's


def test_a_batched_cond_runs_the_unselected_branch_on_its_inputs() -> None:
    """Under ``vmap`` with a batched predicate JAX turns ``cond`` into ``select``:
    both branches run on every element. The ops give NaN (kepler's ``e >= 1``) or a
    finite value there and the select drops it, values and gradients alike; a
    ``python_op`` whose function raises on the unselected element's inputs fails
    the computation (as ``jax.pure_callback`` does): guard its inputs."""
    ps, ms, es = jnp.array([True, False]), jnp.array([1.0, 1.0]), jnp.array([0.5, 1.5])

    def kep(cond_pick: Any, m: Any, e: Any) -> Any:
        return lax.cond(cond_pick, lambda: xr.kepler(m, e)[0], lambda: m * 0)

    def kep_ref(cond_pick: Any, m: Any, e: Any) -> Any:
        return lax.cond(cond_pick, lambda: kepler_jnp(m, e)[0], lambda: m * 0)

    close(jax.vmap(kep)(ps, ms, es), jax.vmap(kep_ref)(ps, ms, es))
    got = jax.grad(lambda m: jax.vmap(kep)(ps, m, es).sum())(ms)
    assert np.all(np.isfinite(got)) and got[1] == 0
    close(got, jax.grad(lambda m: jax.vmap(kep_ref)(ps, m, es).sum())(ms))

    def checked_sqrt(x: np.ndarray) -> np.ndarray:
        if np.any(x < 0):
            raise ValueError("negative operand")
        return np.sqrt(x)

    sqrt_op = xr.python_op(checked_sqrt, abstract_eval=lambda x: x, vectorized=True, name="loops_checked_sqrt")
    xs = jnp.array([4.0, -1.0])
    with pytest.raises((jax.errors.JaxRuntimeError, ValueError), match=r"loops_checked_sqrt.*negative operand"):
        jax.vmap(lambda p, x: lax.cond(p, sqrt_op, lambda x: -x, x))(ps, xs).block_until_ready()
    guarded = jax.vmap(lambda p, x: lax.cond(p, lambda x: sqrt_op(jnp.where(p, x, 1.0)), lambda x: -x, x))
    close(guarded(ps, xs), np.array([2.0, 1.0]))


def _body(c: Any, x: Any) -> Any:
    return xr.rms_norm(c + x, W), sin_op(x).sum()


def _fori_body(i: Any, c: Any) -> Any:
    return xr.kepler(c, E)[0]


def _branch(x: Any) -> Any:
    return nl_sin(x)


def _identity(x: Any) -> Any:
    return x


LOOPS: dict[str, Callable[[Any], Any]] = {
    "scan": lambda x: lax.scan(_body, x, XS),
    "scan_unroll": lambda x: lax.scan(_body, x, XS, unroll=2),
    "fori": lambda x: lax.fori_loop(0, 3, _fori_body, x),
    "cond": lambda x: lax.cond(True, _branch, _identity, x),
    "switch": lambda x: lax.switch(1, [_identity, _branch], x),
    "vmapped_cond": lambda x: jax.vmap(lambda p, x: lax.cond(p, _branch, _identity, x))(x[:, 0] > 0, x),
}


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_an_eager_loop_compiles_once(loop: str) -> None:
    """The same loop called eagerly with new values: no compilation after the first
    (the loop bodies are module-level functions, as JAX caches on their identity)."""
    f = LOOPS[loop]
    f(jnp.asarray(H0) * 1)
    with counting() as n:
        for k in range(2):
            jax.block_until_ready(f(jnp.asarray(H0) * (k + 2)))
    assert n[0] == 0
