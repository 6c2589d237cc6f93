"""An op's ``jnp_impl`` that gives other results than its ``abstract_eval`` is an
error naming the op and the result, expected and got, when it is lowered (it was an
MLIR verifier error, or a ``safe_zip`` one, naming neither)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from xla_ffi_rs.binding import Op, same_as_operands

CASES = {
    "dtype": (
        lambda x: (x.astype(jnp.int32),),
        TypeError,
        r"result 0: expected float32\[2,3\] \(abstract_eval\), got int32\[2,3\]",
    ),
    "shape": (
        lambda x: (x[:1],),
        ValueError,
        r"result 0: expected float32\[2,3\] \(abstract_eval\), got float32\[1,3\]",
    ),
    "count": (lambda x: (x, x), ValueError, r"jnp_impl returned 2 results, abstract_eval gives 1"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("how", ["eager", "jit", "scan"])
def test_jnp_impl_results_that_break_abstract_eval_name_the_op(case: str, how: str) -> None:
    impl, error, message = CASES[case]
    op = Op(f"jnp_impl_test_{case}_{how}", abstract_eval=same_as_operands(1), jnp_impl=impl)
    x = jnp.ones((2, 3), jnp.float32)
    in_scan = jax.jit(lambda x: jax.lax.scan(lambda c, _: (op(c)[0], None), x, None, length=2)[0])
    call: Any = {"eager": op, "jit": jax.jit(op), "scan": in_scan}[how]
    with pytest.raises(error, match=f"jnp_impl_test_{case}_{how}: (jnp_impl )?{message}"):
        call(x)


def test_a_jnp_impl_giving_its_result_bare_or_in_a_tuple_runs() -> None:
    for impl in (lambda x: 2 * x, lambda x: (2 * x,), lambda x: [2 * x]):
        op = Op("jnp_impl_test_ok", abstract_eval=same_as_operands(1), jnp_impl=impl)
        x = np.arange(3, dtype=np.float32)
        np.testing.assert_array_equal(np.asarray(jax.jit(op)(x)[0]), 2 * x)


def test_a_jnp_impl_giving_one_result_of_two_says_one_result() -> None:
    def two(x: Any) -> list[Any]:
        return [x, x]

    op = Op("jnp_impl_test_one_of_two", abstract_eval=two, jnp_impl=lambda x: (x,))
    with pytest.raises(
        ValueError, match=r"jnp_impl_test_one_of_two: jnp_impl returned 1 result, abstract_eval gives 2"
    ):
        jax.jit(op)(jnp.ones(3, jnp.float32))
