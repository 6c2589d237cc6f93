"""binding.op / binding.ops pair an op with its transpose target by the two
declarations' roles and names (``linear``, operand and result names), not by
position: a transpose declared with its cotangent after a non-linear operand,
or with its results in another order, gives the right gradient; a pair that
does not fit is refused when the ops are built, naming both targets.

The ops here are declarations with jnp implementations (no Rust target), so that
every layout of a transpose target can be written; the end-to-end case with
Rust handlers (kepler_tangent and kepler_cotangent) is in test_binding_declared.py."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.test_util import check_grads

from xla_ffi_rs import binding

jax.config.update("jax_enable_x64", True)


def spec(name: str) -> dict[str, Any]:
    return {"name": name, "dims": ["...b"], "dtype": None, "dtypes": ["float64"], "optional": False}


def decl(target: str, operands: str, results: str, linear: str, transpose: str | None) -> dict[str, Any]:
    ops, res = operands.split(), results.split()
    return {
        "target": target,
        "operands": [spec(n) for n in ops],
        "results": [spec(n) for n in res],
        "attributes": [],
        "shapes": ", ".join(["...b"] * len(ops)) + " -> " + ", ".join(["...b"] * len(res)),
        "dtypes": None,
        "batch": "b",
        "linear": linear.split(),
        "transpose": transpose,
    }


def build(primal: dict[str, Any], primal_impl: Any, transposed: dict[str, Any], transposed_impl: Any) -> Any:
    """The primal op, linked to its transpose op (built with binding.ops)."""
    built = binding.ops(
        {primal["target"]: primal, transposed["target"]: transposed},
        targets=NO_TARGETS,
        **{
            primal["target"].rsplit(".", 1)[-1]: {"jnp_impl": primal_impl},
            transposed["target"].rsplit(".", 1)[-1]: {"jnp_impl": transposed_impl},
        },
    )
    return built[primal["target"].rsplit(".", 1)[-1]]


def NO_TARGETS(target: str) -> dict[str, str]:
    """No FFI target: the ops here run their jnp implementations."""
    return {}


A = np.array([0.5, 2.0, -3.0])
X = np.array([1.5, -0.25, 4.0])


@pytest.mark.parametrize("cotangent_first", [False, True], ids=["ct-after-a", "ct-first"])
def test_a_transpose_gets_its_cotangent_wherever_it_declares_it(cotangent_first: bool) -> None:
    """y = a*a*x, linear in x; its transpose declared (a, ct) or (ct, a)."""
    lin2 = decl("t.lin2", "a x", "y", "x", "t.lin2t")
    t_ops = "ct a" if cotangent_first else "a ct"
    lin2t = decl("t.lin2t", t_ops, "ct_x", "ct", "t.lin2")

    def t_impl(*args: Any) -> tuple[Any]:
        ct, a = args if cotangent_first else args[::-1]
        return (a * a * ct,)

    op = build(lin2, lambda a, x: (a * a * x,), lin2t, t_impl)
    f = lambda a, x: op(a, x)[0]  # noqa: E731
    g = jax.grad(lambda x: f(A, x).sum())(X)
    np.testing.assert_allclose(g, A**2, rtol=1e-15)
    gv = jax.vmap(jax.grad(lambda a, x: f(a, x).sum(), argnums=1))(A[:, None] * np.ones(3), X[:, None] * np.ones(3))
    np.testing.assert_allclose(gv, (A**2)[:, None] * np.ones(3), rtol=1e-15)
    (ct,) = jax.linear_transpose(lambda x: f(A, x), X)(np.ones(3))
    np.testing.assert_allclose(ct, A**2, rtol=1e-15)
    check_grads(lambda x: f(A, x), (X,), order=2, modes=["fwd", "rev"])


def test_several_non_linear_operands_are_paired_by_name() -> None:
    """y = (a - b) * x; the transpose takes (b, ct, a): a and b swapped, ct between."""
    primal = decl("t.diff", "a b x", "y", "x", "t.diff_t")
    transposed = decl("t.diff_t", "b ct a", "ct_x", "ct", "t.diff")
    op = build(primal, lambda a, b, x: ((a - b) * x,), transposed, lambda b, ct, a: ((a - b) * ct,))
    b = np.array([1.0, 1.0, 1.0])
    g = jax.grad(lambda x: op(A, b, x)[0].sum())(X)
    np.testing.assert_allclose(g, A - b, rtol=1e-15)


def test_results_and_cotangents_are_paired_by_name() -> None:
    """(p, q) = (2x + y, x - 3y), linear in x and y; the transpose takes the
    cotangents as (ct_q, ct_p) and gives (ct_y, ct_x)."""
    primal = decl("t.mix", "x y", "p q", "x y", "t.mix_t")
    transposed = decl("t.mix_t", "ct_q ct_p", "ct_y ct_x", "ct_q ct_p", "t.mix")

    def t_impl(cq: Any, cp: Any) -> tuple[Any, Any]:
        return (cp - 3 * cq, 2 * cp + cq)  # (ct_y, ct_x)

    op = build(primal, lambda x, y: (2 * x + y, x - 3 * y), transposed, t_impl)
    y = np.array([0.1, 0.2, 0.3])
    f = lambda x, y: jnp.sum(5 * op(x, y)[0] + 7 * op(x, y)[1])  # noqa: E731
    gx, gy = jax.grad(f, argnums=(0, 1))(X, y)
    np.testing.assert_allclose(gx, np.full(3, 5 * 2 + 7 * 1.0), rtol=1e-15)
    np.testing.assert_allclose(gy, np.full(3, 5 * 1 - 7 * 3.0), rtol=1e-15)


@pytest.mark.parametrize(
    ("t_operands", "t_results", "t_linear", "words"),
    [
        # a non-linear operand of the transpose that names none of the op's
        ("ct b c", "ct_x", "ct", ("t.p", "t.p_t", "operand 2 (c)", "a, b", "name them alike")),
        # two cotangent operands for an op of one result
        ("ct ct2 a b", "ct_x", "ct ct2", ("t.p", "t.p_t", "1 result", "2 cotangent operand(s)")),
        # a missing non-linear operand
        ("ct a", "ct_x", "ct", ("t.p", "t.p_t", "2 non-linear operand(s)", "a, b", "1 other(s) (a)")),
        # too many results
        ("ct a b", "ct_x ct_a", "ct", ("t.p", "t.p_t", "must give 1 result(s)", "gives 2")),
    ],
    ids=["unnamed-operand", "extra-cotangent", "missing-operand", "extra-result"],
)
def test_a_transpose_that_does_not_fit_is_refused_when_built(
    t_operands: str, t_results: str, t_linear: str, words: tuple[str, ...]
) -> None:
    primal = decl("t.p", "a b x", "y", "x", "t.p_t")
    transposed = decl("t.p_t", t_operands, t_results, t_linear, "t.p")
    with pytest.raises(ValueError) as info:
        binding.ops({"t.p": primal, "t.p_t": transposed}, targets=NO_TARGETS)
    for w in words:
        assert w in str(info.value), (w, str(info.value))
    with pytest.raises(ValueError) as info:  # the same check through binding.op
        binding.op(primal, targets={}, transpose=binding.op(dict(transposed, transpose=None), targets={}))
    assert "t.p_t" in str(info.value)


def test_a_transpose_without_linear_finds_its_cotangent_by_the_other_names() -> None:
    primal = decl("t.q", "a x", "y", "x", "t.q_t")
    transposed = decl("t.q_t", "a g", "ct_x", "", None)  # declares no `linear`
    op = build(primal, lambda a, x: (a * a * x,), transposed, lambda a, g: (a * a * g,))
    np.testing.assert_allclose(jax.grad(lambda x: op(A, x)[0].sum())(X), A**2, rtol=1e-15)
