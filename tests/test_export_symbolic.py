"""``jax.export`` with symbolic dimensions (shape polymorphism) under ``jax.vmap``:
refused with the op's ValueError naming the target and operand, as without vmap
(tests/test_export.py), not JAX's ``InconclusiveDimensionOperation`` from a
batching rule that reads the vmapped size as an int."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import pytest

import xla_ffi_rs as xr
from xla_ffi_rs import binding, examples

F32 = jnp.float32


def _scale_op() -> Any:
    examples.register()
    return binding.op(xr.declarations()["xla_ffi_rs.examples.scale"])


def _cases() -> list[Any]:
    b = jax.export.symbolic_shape("b")[0]

    def spec(*shape: Any) -> jax.ShapeDtypeStruct:
        return jax.ShapeDtypeStruct(shape, F32)

    scale = _scale_op()
    return [
        pytest.param(jax.vmap(xr.kepler), (spec(b, 3), spec(b, 3)), "xla_ffi_rs.kepler: operand 0", id="kepler"),
        pytest.param(
            jax.vmap(xr.kepler, in_axes=(1, None)),
            (spec(3, b), spec(3)),
            "xla_ffi_rs.kepler: operand 0",
            id="kepler-axis1",
        ),
        pytest.param(
            jax.vmap(jax.grad(lambda m, e: xr.kepler(m, e)[0].sum())),
            (spec(b, 3), spec(b, 3)),
            "xla_ffi_rs.kepler: operand 0",
            id="kepler-grad",
        ),
        pytest.param(
            jax.vmap(xr.rms_norm), (spec(b, 2, 8), spec(b, 8)), "xla_ffi_rs.rms_norm_fwd: operand 0", id="rms_norm"
        ),
        pytest.param(
            jax.vmap(xr.rms_norm, in_axes=(0, None)),
            (spec(b, 2, 8), spec(8)),
            "xla_ffi_rs.rms_norm_fwd: operand 0",
            id="rms_norm-shared-weight",
        ),
        pytest.param(
            jax.vmap(xr.rms_norm_inplace, in_axes=(0, None)),
            (spec(b, 2, 8), spec(8)),
            "xla_ffi_rs.rms_norm_fwd: operand 0",
            id="rms_norm_inplace",
        ),
        pytest.param(
            jax.vmap(lambda x: scale(x, factor=2.0)[0]),
            (spec(b, 4),),
            "xla_ffi_rs.examples.scale: operand 0",
            id="binding",
        ),
    ]


@pytest.mark.parametrize(("fn", "specs", "words"), _cases())
def test_vmap_over_a_symbolic_batch_is_refused_naming_the_op_and_operand(fn: Any, specs: Any, words: str) -> None:
    with pytest.raises(ValueError) as info:
        jax.export.export(jax.jit(fn), disabled_checks=xr.export_checks())(*specs)
    message = str(info.value)
    assert words in message, message
    assert "expected a shape of known dimensions" in message and "symbolic dimensions" in message, message
