"""An op's eager calls keep the jitted programs of its most recently *used* sets of
static parameters: a set used at every step stays compiled while others come and
go (the oldest *made* was dropped first, so a hot set was compiled again after
every 32 new ones)."""

from __future__ import annotations

import numpy as np

from compile_counts import counting
from xla_ffi_rs import python_op

X = np.arange(4, dtype=np.float32)


def test_a_set_of_parameters_used_at_every_step_is_compiled_once() -> None:
    op = python_op(lambda x, *, k: x + k, abstract_eval=lambda x, **_: x, name="hot_and_cold")
    op(X, k=0).block_until_ready()
    with counting() as compiles:
        for k in range(1, 81):
            op(X, k=k).block_until_ready()  # a new set: compiled
            np.testing.assert_array_equal(np.asarray(op(X, k=0)), X)  # the hot one: never again
    assert compiles[0] == 80
