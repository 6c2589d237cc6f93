"""The rules Python and Rust share come from one source: the native module."""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np
import pytest
from jax.core import ShapedArray

from xla_ffi_rs import dtypes
from xla_ffi_rs.ops.rms_norm import bwd_workspace_aval, bwd_workspace_rows, rms_norm_fwd_jnp

FLOATS = (jnp.float16, jnp.bfloat16, jnp.float32, jnp.float64)


def test_promotion_table_is_jnp_result_type_for_every_float_pair() -> None:
    assert len(dtypes.PROMOTION) == len(FLOATS) ** 2
    for x, w in itertools.product(FLOATS, repeat=2):
        y, acc = dtypes.PROMOTION[(jnp.dtype(x), jnp.dtype(w))]
        assert y == jnp.result_type(x, w), (x, w)
        assert acc == (jnp.float64 if jnp.float64 in (x, w) else jnp.float32), (x, w)
        assert dtypes.result_dtype(x, w) == y and dtypes.accumulation_dtype(x, w) == acc


def test_promotion_rejects_non_float_dtypes() -> None:
    with pytest.raises(TypeError, match=r"no float promotion for dtypes int32 and float32; expected one of"):
        dtypes.result_dtype(jnp.int32, jnp.float32)


def test_fallback_uses_the_table() -> None:
    x = jnp.ones((2, 4), jnp.float16)
    y, inv = rms_norm_fwd_jnp(x, jnp.ones(4, jnp.bfloat16), eps=1e-5)
    assert y.dtype == jnp.float32 and inv.dtype == jnp.float32


@pytest.mark.parametrize(
    ("rows", "blocks"), [(0, 1), (1, 1), (16, 1), (17, 2), (160, 10), (16 * 1024, 1024), (10**9, 1024)]
)
def test_cuda_workspace_rows_come_from_rust(rows: int, blocks: int) -> None:
    assert bwd_workspace_rows(rows) == blocks


def test_workspace_aval_uses_the_native_rule() -> None:
    aval = bwd_workspace_aval(ShapedArray((3, 100, 8), np.float32), ShapedArray((8,), np.float64))
    assert aval.shape == (bwd_workspace_rows(300), 8) and aval.dtype == np.float64
