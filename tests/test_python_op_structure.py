"""python_op: a call's result structure (one array, or a tuple) is fixed by what
``abstract_eval`` returns for the call's static parameters, whichever
transformation runs the op first.

One aval gives one array; a tuple or a list of avals gives a tuple, of one array
too. Rules that call the op with other parameters (a batching rule passing the
batch axes on, a JVP rule asking for another mode) never run ``abstract_eval``
for the outer call's own parameters; the structure must not depend on that.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xla_ffi_rs import python_op

#: abstract_eval's kind of return -> the structure every call gives.
KINDS: dict[str, Any] = {
    "aval": "array",
    "tuple1": ("tuple", 1),
    "list1": ("tuple", 1),
    "tuple2": ("tuple", 2),
    "list2": ("tuple", 2),
}
TRANSFORMS = ("plain", "jit", "vmap", "grad", "jvp")


def structure(out: Any) -> Any:
    return ("tuple", len(out)) if isinstance(out, tuple) else "array" if isinstance(out, jax.Array) else out


def make_op(kind: str, batching: str) -> Any:
    """A fresh op (new functions: nothing memoized) computing sin of its operand,
    once per result. Its rules call it with a ``tag`` parameter the caller never passes."""
    n = 2 if kind.endswith("2") else 1

    def fn(x: np.ndarray, *, tag: str | None = None) -> Any:
        y = np.sin(x)
        return y if kind == "aval" else (y,) * n

    def abstract_eval(x: Any, *, tag: str | None = None) -> Any:
        aval = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return aval if kind == "aval" else [aval] * n if kind.startswith("list") else (aval,) * n

    op = python_op(fn, abstract_eval=abstract_eval, vectorized=batching == "vectorized")

    @op.def_jvp_rule
    def _(primals: tuple[Any, ...], tangents: tuple[Any, ...], *, tag: str | None = None) -> Any:
        (x,), (t,) = primals, tangents
        return op(x, tag="jvp"), jax.tree.map(lambda _: jnp.cos(x) * t, op(x, tag="jvp"))

    if batching == "rule":

        @op.def_batching
        def _(operands: Any, dims: Any, *, tag: str | None = None) -> Any:
            out = op(jnp.moveaxis(operands[0], dims[0], 0), tag="vmap")
            outs = out if isinstance(out, tuple) else (out,)
            return outs, [0] * len(outs)

    return op


def run(op: Any, transform: str, x: jax.Array) -> Any:
    """The structure of ``op(x)`` under ``transform`` (seen while tracing where the
    transformation gives back something else)."""
    seen: list[Any] = []

    def f(x: Any) -> Any:
        out = op(x)
        seen.append(structure(out))
        return sum(jnp.sum(o) for o in jax.tree.leaves(out))

    if transform == "plain":
        return structure(op(x))
    if transform == "jit":
        return structure(jax.jit(op)(x))
    if transform == "vmap":
        return structure(jax.vmap(op)(jnp.stack([x, 2 * x])))
    call: Callable[[], Any] = {
        "grad": lambda: jax.grad(f)(x),
        "jvp": lambda: jax.jvp(f, (x,), (jnp.ones_like(x),)),
    }[transform]
    call()
    assert len(set(seen)) == 1, seen
    return seen[0]


@pytest.mark.parametrize("first", TRANSFORMS)
@pytest.mark.parametrize("batching", ["sequential", "vectorized", "rule"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_result_structure_does_not_depend_on_which_transformation_runs_first(kind, batching, first) -> None:
    op = make_op(kind, batching)
    x = jnp.linspace(0.0, 1.0, 3)
    order = (first, *(t for t in TRANSFORMS if t != first))
    got = {t: run(op, t, x) for t in order}
    assert got == dict.fromkeys(order, KINDS[kind]), f"order {order}"


def test_the_reported_case_vmap_first_with_a_rule_that_passes_other_parameters() -> None:
    def g(x, out, *, batch_axes=None):
        out[...] = np.sin(x)

    def avals(a, *, batch_axes=None):
        return (jax.ShapeDtypeStruct(a.shape, a.dtype),)

    op = python_op(g, abstract_eval=avals, takes_outputs=True)

    @op.def_batching
    def _(operands, dims, *, batch_axes=None):
        return op(*operands, batch_axes=((int(dims[0]),),)), [dims[0]]

    x = jnp.linspace(0.0, 1.0, 6).reshape(2, 3)
    (y,) = jax.vmap(op)(x)
    np.testing.assert_allclose(np.asarray(y), np.sin(np.asarray(x)))
    assert structure(op(x)) == ("tuple", 1)


def test_a_structure_that_depends_on_the_operands_is_refused() -> None:
    def fn(x):
        return np.sin(x) if x.ndim == 1 else (np.sin(x),)

    def avals(x):
        aval = jax.ShapeDtypeStruct(x.shape, x.dtype)
        return aval if x.ndim == 1 else (aval,)

    op = python_op(fn, abstract_eval=avals, name="shifty")
    op(jnp.ones(3))
    with pytest.raises(TypeError, match=r"shifty: abstract_eval returned a sequence of avals .* but one aval"):
        op(jnp.ones((2, 3)))
