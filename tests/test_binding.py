"""xla_ffi_rs.binding: defining ops from FFI targets and jnp code."""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.core import ShapedArray

import xla_ffi_rs
from helpers import KEPLER, RMS_FWD, count_calls, lowered, rms_norm_np
from xla_ffi_rs import binding
from xla_ffi_rs.binding import Op, elementwise_batching, is_linear_input, same_as_operands
from xla_ffi_rs.ops.kepler import kepler_jnp, kepler_op
from xla_ffi_rs.ops.rms_norm import rms_norm_bwd_jnp, rms_norm_fwd_jnp, rms_norm_fwd_op


def eqn_count(fn, *args, name: str) -> int:
    return len(re.findall(rf"\b{re.escape(name)}\b", str(jax.make_jaxpr(fn)(*args))))


# A jnp-only linear op "twice" whose transpose is a second op "twice_t", so a
# test can see which rule ran.
twice_t = Op("binding_test_twice_t", abstract_eval=same_as_operands(1), jnp_impl=lambda x: (2 * x,))
twice = Op("binding_test_twice", abstract_eval=same_as_operands(1), jnp_impl=lambda x: (2 * x,))
twice.def_batching(elementwise_batching(twice))
twice_t.def_batching(elementwise_batching(twice_t))


@twice.def_jvp
def _twice_jvp(primals, tangents):
    return twice(*primals), twice(*tangents)


@twice.def_transpose
def _twice_transpose(cts, x):
    assert is_linear_input(x)
    return twice_t(*cts)


def test_jnp_op_eager_jit_vmap() -> None:
    x = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(twice(x)[0], 2 * x)
    np.testing.assert_array_equal(twice(x)[0], 2 * x)  # cached eager executable
    np.testing.assert_array_equal(jax.jit(lambda x: twice(x)[0])(x), 2 * x)
    batched = jax.vmap(lambda x: twice(x)[0], in_axes=1)
    np.testing.assert_array_equal(batched(x), 2 * x.T)
    assert eqn_count(batched, x, name="binding_test_twice") == 1


def test_transpose_rule_drives_grad_and_linear_transpose() -> None:
    x = np.arange(3.0)
    g = jax.grad(lambda x: jnp.sum(twice(x)[0] * x))(x)
    np.testing.assert_array_equal(g, 4 * x)
    assert eqn_count(jax.grad(lambda x: jnp.sum(twice(x)[0])), x, name="binding_test_twice_t") == 1
    (ct,) = jax.linear_transpose(lambda x: twice(x)[0], x)(np.ones(3))
    np.testing.assert_array_equal(ct, 2 * np.ones(3))


def test_op_on_an_existing_target_with_renamed_attribute() -> None:
    def abstract_eval(x: ShapedArray, w: ShapedArray, *, epsilon: float) -> list[ShapedArray]:
        return [ShapedArray(x.shape, x.dtype), ShapedArray(x.shape[:-1], x.dtype)]

    op = Op(
        "binding_test_rms",
        abstract_eval=abstract_eval,
        targets={"cpu": RMS_FWD},
        attributes=lambda p: {"eps": p["epsilon"]},
    )
    x, w = np.random.default_rng(0).normal(size=(3, 4)), np.linspace(0.5, 1.5, 4)
    y, inv = op(x, w, epsilon=0.25)
    ref_y, ref_inv = rms_norm_np(x, w, 0.25)
    np.testing.assert_allclose(y, ref_y, rtol=1e-13)
    np.testing.assert_allclose(inv, ref_inv, rtol=1e-13)
    assert count_calls(lowered(lambda x, w: op(x, w, epsilon=0.25), x, w), RMS_FWD) == 1


def _export_text(fn, platform: str, *args) -> str:
    checks = [jax.export.DisabledSafetyCheck.custom_call(t) for t in (KEPLER, RMS_FWD)]
    return jax.export.export(jax.jit(fn), platforms=[platform], disabled_checks=checks)(*args).mlir_module()


def test_targets_per_platform_and_jnp_fallback() -> None:
    op = Op(
        "binding_test_kepler",
        abstract_eval=same_as_operands(2),
        targets={"cpu": KEPLER},
        jnp_impl=lambda m, e: (jnp.sin(m), jnp.cos(m)),
    )
    m, e = np.ones(3), np.full(3, 0.5)
    assert count_calls(_export_text(lambda m, e: op(m, e), "cpu", m, e), KEPLER) == 1
    cuda_text = _export_text(lambda m, e: op(m, e), "cuda", m, e)
    assert count_calls(cuda_text, KEPLER) == 0 and "sine" in cuda_text


def test_no_target_and_no_fallback_cannot_lower() -> None:
    op = Op("binding_test_cpu_only", abstract_eval=same_as_operands(2), targets={"cpu": KEPLER})
    m = np.ones(2)
    with pytest.raises(NotImplementedError, match="binding_test_cpu_only") as info:
        _export_text(lambda m: op(m, m), "cuda", m)
    # JAX's own words named only the primitive: the platform, the target and the fix too.
    for words in ("platform 'cuda'", KEPLER, "'cpu' only", "register_targets", "first"):
        assert words in str(info.value), (words, str(info.value))


def test_a_plugins_cuda_twin_lowers_when_registered_before_the_op_is_built() -> None:
    """docs/gpu.md's flow for a plugin's CUDA twin, without a GPU: the CPU and CUDA
    capsules go through `register_targets`, then `binding.op` builds the op, which
    lowers to the same target for both platforms. Built before the CUDA
    registration, the op names the platform, the target and that order."""
    name = "binding_test.cuda_twin"
    decl = {**xla_ffi_rs.declarations()[KEPLER], "target": name}
    capsule = xla_ffi_rs.handlers("cpu")[KEPLER]  # queued for CUDA only: never runs here
    xla_ffi_rs.register_targets({name: capsule}, "cpu")
    early = binding.op(decl, name="binding_test_cuda_twin_early")
    xla_ffi_rs.register_targets({name: capsule}, "cuda")
    assert xla_ffi_rs.target_names(name) == {"cpu": name, "cuda": name}
    late = binding.op(decl, name="binding_test_cuda_twin")
    m, e = np.ones(3), np.full(3, 0.5)

    def export(op, platform):
        exported = jax.export.export(jax.jit(op), platforms=[platform], disabled_checks=xla_ffi_rs.export_checks())
        return exported(m, e).mlir_module()

    for platform in ("cpu", "cuda"):
        assert count_calls(export(late, platform), name) == 1
    with pytest.raises(NotImplementedError, match=r"no FFI target for platform 'cuda'.*register the handlers"):
        export(early, "cuda")


def test_package_ops_lower_for_cuda_as_registered() -> None:
    m = np.ones(3)
    text = _export_text(lambda m: kepler_op(m, m), "cuda", m)
    expected = 1 if "cuda" in kepler_op.targets else 0
    assert count_calls(text, KEPLER) == expected
    assert kepler_op.targets["cpu"] == KEPLER


def test_abstract_eval_errors_surface_at_trace_time() -> None:
    with pytest.raises(ValueError, match=r"xla_ffi_rs\.kepler: operand 1 \(eccentricity\): expected .*got"):
        jax.eval_shape(lambda a, b: kepler_op(a, b), jnp.ones(3), jnp.ones(4))
    with pytest.raises(TypeError, match=r"xla_ffi_rs\.kepler: operand 0 \(mean_anomaly\): .*float32.*float64.*int32"):
        kepler_op(np.ones(2, np.int32), np.ones(2, np.int32))


def test_batch_dims_hook() -> None:
    x, w = ShapedArray((2, 3, 4), jnp.float32), ShapedArray((4,), jnp.float32)
    assert rms_norm_fwd_op.batch_dims(x, w, eps=1e-5) == 2
    assert kepler_op.batch_dims(x, x) == 3
    assert twice.batch_dims(x) == 0


def test_batching_helpers() -> None:
    assert binding.move_batch_axis_to_front(jnp.ones((2, 3)), 1, 3).shape == (3, 2)
    assert binding.move_batch_axis_to_front(jnp.ones((2,)), None, 4).shape == (4, 2)
    assert binding.batch_size([np.ones(2), np.ones((5, 2))], [None, 0]) == 5
    with pytest.raises(ValueError, match="no batched operand"):
        binding.batch_size([np.ones(2)], [None])
    (y,), dims = binding.vmap_batching(lambda x: (x + 1,))([np.zeros((2, 3))], [1])
    assert y.shape == (3, 2) and list(dims) == [0]


def test_symbolic_zero_tangents_are_instantiated() -> None:
    # grad wrt eccentricity only: the mean-anomaly tangent is a symbolic zero.
    g = jax.grad(lambda e: kepler_op(jnp.float64(1.0), e)[0])(jnp.float64(0.3))
    assert np.isfinite(g)


def test_jnp_fallbacks_match_references() -> None:
    """The jnp implementations lowered on platforms without a native handler."""
    from helpers import kepler_residual, rms_norm_bwd_np

    m = np.linspace(-12, 12, 97)
    for e in (0.0, 0.5, 0.9, 0.9999):
        s, c = jax.jit(kepler_jnp)(m, np.full_like(m, e))
        assert np.max(kepler_residual(m, e, s, c)) <= 1e-12
    s, _ = kepler_jnp(jnp.asarray(m[:2]), jnp.array([1.0, np.nan]))
    assert np.isnan(s).all()
    rng = np.random.default_rng(0)
    x, w, dy = (
        jnp.asarray(a) for a in (rng.normal(size=(3, 2, 5)), rng.uniform(0.5, 1.5, (2, 5)), rng.normal(size=(3, 2, 5)))
    )
    y, inv = rms_norm_fwd_jnp(x, w, eps=1e-3)
    want_y, want_inv = rms_norm_np(x, w, 1e-3)
    np.testing.assert_allclose(y, want_y, rtol=1e-13)
    np.testing.assert_allclose(inv, want_inv, rtol=1e-13)
    dx, dw = rms_norm_bwd_jnp(dy, x, w, eps=1e-3)
    rdx, rdw = rms_norm_bwd_np(dy, x, w, 1e-3)
    np.testing.assert_allclose(dx, rdx, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(dw, rdw, rtol=1e-12, atol=1e-14)


def test_package_ops_use_fallback_where_no_handler() -> None:
    m = np.ones(3)
    text = _export_text(lambda m: kepler_op(m, m), "rocm", m)
    assert count_calls(text, KEPLER) == 0 and "sine" in text


# -- sharding declarations (the partitioned behaviour is in tests/sharding) -------


def test_extra_results_are_appended_to_the_call_and_dropped() -> None:
    """A per-platform extra result (a CUDA workspace, say) is in the custom call only."""
    ws = ShapedArray((7, 3), jnp.float32)
    op = Op(
        "binding_test_workspace",
        abstract_eval=same_as_operands(1),
        targets={"cpu": KEPLER, "cuda": "binding_test.with_workspace"},
        extra_results={"cuda": lambda x: [ws]},
    )
    x = np.ones((2, 3), np.float32)
    checks = [jax.export.DisabledSafetyCheck.custom_call("binding_test.with_workspace")]
    text = jax.export.export(jax.jit(lambda x: op(x)[0]), platforms=["cuda"], disabled_checks=checks)(x).mlir_module()
    call = next(line for line in text.splitlines() if "custom_call @binding_test.with_workspace" in line)
    assert "-> (tensor<2x3xf32>, tensor<7x3xf32>)" in call, call
    main = text[text.index("func.func public @main") :].splitlines()[0]
    assert "tensor<7x3xf32>" not in main, main
    assert jax.eval_shape(lambda x: op(x), x)[0].shape == (2, 3)


def test_reductions_are_unbatched_results() -> None:
    from xla_ffi_rs.ops.rms_norm import rms_norm_bwd_op

    assert rms_norm_bwd_op.batched(3, 2) == ([True, True, False], [True, False])
    assert set(rms_norm_bwd_op.reductions) == {1}
    assert rms_norm_fwd_op.batched(2, 2) == ([True, False], [True, True])
    assert kepler_op.batched(2, 2) == ([True, True], [True, True])


@pytest.mark.parametrize(
    ("x", "w", "unit_axes", "num_batch_dims"),
    [
        ((16, 12), (12,), 1, 2),  # (tokens, hidden): the weight would be split along hidden
        ((8, 4, 12), (12,), 0, 2),  # (batch, seq, hidden): already safe
        ((8, 4, 6), (4, 6), 2, 3),
        ((16,), (16,), 2, 2),  # one row: no batch axis at all
    ],
)
def test_layout_keeps_the_weight_below_num_batch_dims(
    x: tuple[int, ...], w: tuple[int, ...], unit_axes: int, num_batch_dims: int
) -> None:
    """XLA's batch partitioner splits the leading num_batch_dims axes of EVERY operand
    of rank >= num_batch_dims: the unbatched ones must have a lower rank."""
    from xla_ffi_rs.sharding import Layout

    xa, wa = ShapedArray(x, jnp.float32), ShapedArray(w, jnp.float32)
    inv = ShapedArray(x[: len(x) - len(w)], jnp.float32)
    lay = Layout.plan(len(x) - len(w), [xa, wa], [True, False], [xa, inv], [True, True])
    assert (lay.unit_axes, lay.num_batch_dims, lay.trailing) == (unit_axes, num_batch_dims, False)
    assert len(w) < lay.num_batch_dims <= len(lay.shape(x, True)) - len(w)
    assert lay.shape(w, False) == w and len(lay.shape(inv.shape, True)) == lay.num_batch_dims


def test_layout_gives_an_all_batch_op_a_trailing_unit_axis() -> None:
    from xla_ffi_rs.sharding import Layout

    for shape in [(), (5,), (0, 3), (2, 3, 4)]:
        a = ShapedArray(shape, jnp.float64)
        lay = Layout.plan(len(shape), [a, a], [True, True], [a, a], [True, True])
        assert lay == Layout(len(shape), 0, True)
        assert lay.shape(shape, True) == (*shape, 1)


def test_shardy_rule_writes_rank_0_values() -> None:
    """A rank-0 inv_rms was written "()", which Shardy's parser refuses."""
    from jax._src.custom_partitioning_sharding_rule import str_to_sdy_sharding_rule

    from xla_ffi_rs.sharding import sdy_rule_string

    text, replicated = sdy_rule_string(0, [1, 1], [True, False], [1, 0], [True, True])
    assert text == "r0, r1 -> r2, " and replicated == ("r0", "r1", "r2")
    str_to_sdy_sharding_rule(text, need_replication_factors=replicated)  # parses
    text, replicated = sdy_rule_string(2, [3, 1], [True, False], [3, 2, 1], [True, True, False])
    assert text == "b0 b1 r0, r1 -> b0 b1 r2, b0 b1, r3"
    str_to_sdy_sharding_rule(text, need_replication_factors=replicated)


def test_jnp_code_in_an_ops_abstract_eval_computes() -> None:
    """An Op's abstract_eval may compute with jnp on concrete values: jax 0.12 runs
    abstract evaluation with no trace, where ``jnp.asarray`` raised
    ``AttributeError: 'NoneType' object has no attribute 'stage_value'``."""
    op = Op(
        "binding_test_jnp_aval",
        abstract_eval=lambda x: [ShapedArray(x.shape, (jnp.asarray(x.dtype.type(1)) + 1).dtype)],
        jnp_impl=lambda x: (x * x,),
    )
    x = jnp.arange(3.0, dtype=jnp.float32)
    for call in (op, jax.jit(op)):
        (y,) = call(x)
        np.testing.assert_array_equal(np.asarray(y), np.arange(3.0) ** 2)
