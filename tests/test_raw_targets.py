"""The native targets called directly with ``jax.ffi.ffi_call``, and registration."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import xla_ffi_rs
from helpers import KEPLER, RMS_BWD, RMS_FWD, assert_ffi_error, kepler_residual, rms_norm_bwd_np, rms_norm_np
from xla_ffi_rs import examples

TARGETS = (KEPLER, RMS_FWD, RMS_BWD)


def sds(shape: Sequence[int], dtype: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(shape), jnp.dtype(dtype))


def raw_kepler(m: np.ndarray, e: np.ndarray) -> tuple[jax.Array, jax.Array]:
    out = sds(m.shape, m.dtype)
    s, c = jax.ffi.ffi_call(KEPLER, (out, out))(m, e)
    return s, c


def raw_fwd(x: np.ndarray, w: np.ndarray, **attrs: Any) -> tuple[jax.Array, jax.Array]:
    acc = np.float64 if np.float64 in (x.dtype, w.dtype) else np.float32
    res = (sds(x.shape, jnp.result_type(x.dtype, w.dtype)), sds(x.shape[: x.ndim - w.ndim], acc))
    y, inv = jax.ffi.ffi_call(RMS_FWD, res)(x, w, **attrs)
    return y, inv


def raw_bwd(dy: np.ndarray, x: np.ndarray, w: np.ndarray, **attrs: Any) -> tuple[jax.Array, jax.Array]:
    dx, dw = jax.ffi.ffi_call(RMS_BWD, (sds(x.shape, x.dtype), sds(w.shape, w.dtype)))(dy, x, w, **attrs)
    return dx, dw


# -- the native module and registration ---------------------------------------


def test_handlers_lists_the_cpu_targets() -> None:
    cpu = xla_ffi_rs.handlers("cpu")
    assert set(TARGETS) <= set(cpu)
    for handler in cpu.values():
        assert type(handler).__name__ == "PyCapsule" or (isinstance(handler, dict) and "execute" in handler)
    cuda = xla_ffi_rs.handlers("cuda")
    assert isinstance(cuda, dict) and (set(TARGETS) <= set(cuda)) == xla_ffi_rs.has_cuda
    assert isinstance(xla_ffi_rs.__version__, str) and xla_ffi_rs.__version__
    with pytest.raises(ValueError, match=r"unknown platform \"tpu\"; expected \"cpu\" or \"cuda\""):
        xla_ffi_rs.handlers("tpu")
    with pytest.raises(TypeError, match=r"handlers: platform: expected a platform name \(str\), got int"):
        xla_ffi_rs.handlers(0)  # type: ignore[arg-type]


def test_min_api_version_is_a_version_pair_jax_can_run() -> None:
    major, minor = xla_ffi_rs.min_api_version()
    assert isinstance(major, int) and isinstance(minor, int) and (major, minor) >= (0, 1)
    assert isinstance(xla_ffi_rs.has_cuda, bool)


def test_example_target_is_not_in_the_production_table() -> None:
    assert not any(name.startswith("xla_ffi_rs.examples.") for name in xla_ffi_rs.handlers("cpu"))
    assert set(examples.handlers("cpu")) == {"xla_ffi_rs.examples.scale"}
    assert examples.handlers("cuda") == {}
    with pytest.raises(ValueError, match="unknown platform"):
        examples.handlers("tpu")


def test_target_names_is_public_and_rejects_unknown_names() -> None:
    assert xla_ffi_rs.target_names(KEPLER) == {"cpu": KEPLER, **({"cuda": KEPLER} if xla_ffi_rs.has_cuda else {})}
    with pytest.raises(
        ValueError, match=r"'xla_ffi_rs\.kepler2' is not a registered target; registered: .*xla_ffi_rs\.kepler"
    ):
        xla_ffi_rs.target_names("xla_ffi_rs.kepler2")


def test_example_target_registers_only_on_request() -> None:
    code = """
        import pytest, xla_ffi_rs
        from xla_ffi_rs import examples
        with pytest.raises(ValueError, match=r"examples.register\\(\\) first"):
            xla_ffi_rs.target_names("xla_ffi_rs.examples.scale")
        assert examples.register() == {"cpu": "xla_ffi_rs.examples.scale"}
        assert examples.register() == {"cpu": "xla_ffi_rs.examples.scale"}  # idempotent
        print("ok")
    """
    out = run_python(code)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120, check=False
    )


def test_import_initializes_no_backend_and_queued_cuda_registration_is_harmless() -> None:
    proc = run_python(
        """
        import jax, numpy as np
        import xla_ffi_rs
        # Raises if a backend had been initialized by the import.
        jax.config.update("jax_num_cpu_devices", 3)
        handler = xla_ffi_rs.handlers("cpu")["xla_ffi_rs.kepler"]
        jax.ffi.register_ffi_target("xla_ffi_rs.test_cuda_probe", handler, platform="cuda")
        assert jax.device_count() == 3, jax.devices()
        s, c = xla_ffi_rs.kepler(np.float32(1.0), np.float32(0.5))
        assert abs(float(s) - 0.9974) < 1e-3, s
        print("ok")
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_register_targets_refuses_what_is_not_a_handler_and_the_backend_survives() -> None:
    """A handler that is not a PyCapsule (or a bundle of them with an "execute"
    stage) is refused naming the target, before anything is registered: JAX took
    such an entry and then failed to start the CPU backend at its next use
    (``Unable to initialize backend 'cpu'``), for every computation in the process."""
    proc = run_python(
        """
        import jax.numpy as jnp
        import xla_ffi_rs
        capsule = xla_ffi_rs.handlers("cpu")["xla_ffi_rs.kepler"]
        cases = [
            ({"bad.int": 3}, TypeError, "register_targets: bad.int: expected a PyCapsule (or a dict of stage name -> PyCapsule), got int"),
            ({"bad.none": None}, TypeError, "register_targets: bad.none: expected a PyCapsule (or a dict of stage name -> PyCapsule), got NoneType"),
            ({"bad.stage": {"execute": "x"}}, TypeError, "register_targets: bad.stage: expected a bundle of stage name -> PyCapsule, got 'execute': str"),
            ({"bad.noexec": {"instantiate": capsule}}, ValueError, "register_targets: bad.noexec: a bundle needs an 'execute' stage, got stages ['instantiate']"),
            ({"good.first": capsule, "bad.second": 1.5}, TypeError, "register_targets: bad.second: expected a PyCapsule"),
        ]
        cases = [(h, e, w, "cpu") for h, e, w in cases] + [
            ({"bad.platform": capsule}, ValueError, "register_targets: platform: expected one of 'cpu', 'cuda', 'rocm' (JAX's lowercase names of the platforms that run FFI handlers), got 'CPU'", "CPU"),
            ({"bad.platform": capsule}, ValueError, "got 'cpux'", "cpux"),
            # Nothing takes a handler queued for "tpu": it was accepted and target_names then named it.
            ({"bad.platform": capsule}, ValueError, "register_targets: platform: expected one of 'cpu', 'cuda', 'rocm'", "tpu"),
            ({}, ValueError, "got 'tpu'", "tpu"),
        ]
        for handlers, error, words, platform in cases:
            try:
                xla_ffi_rs.register_targets(handlers, platform)
            except error as e:
                assert words in str(e), str(e)
            else:
                raise AssertionError(f"not refused: {handlers}")
        for name in ("bad.int", "good.first", "bad.platform"):
            try:
                xla_ffi_rs.target_names(name)
            except ValueError:
                pass
            else:
                raise AssertionError(f"{name} was registered")
        assert float((jnp.ones(3) + 1).sum()) == 6.0
        print("ok")
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_register_targets_again_after_a_stateful_target_ran() -> None:
    """A notebook cell that registers a plugin's targets, run again after its ops
    ran: XLA had filled in the stateful handler's state type since, and refused the
    same handler again (``JaxRuntimeError: Duplicate FFI handler registration ...
    with different metadata``). The same handler again does nothing."""
    examples.register()
    sds = jax.ShapeDtypeStruct((3,), jnp.float32)
    scale = jax.jit(lambda x: jax.ffi.ffi_call("xla_ffi_rs.examples.scale", sds)(x, factor=np.float32(2.0)))
    x = np.arange(3, dtype=np.float32)
    np.testing.assert_array_equal(scale(x), 2 * x)
    np.testing.assert_allclose(xla_ffi_rs.kepler(np.array([0.5]), 0.0)[0], [np.sin(0.5)], rtol=1e-6)
    for _ in range(2):
        xla_ffi_rs.register_targets(examples.handlers("cpu"))
        xla_ffi_rs.register_targets(xla_ffi_rs.handlers("cpu"))
        examples.register()
    np.testing.assert_array_equal(jax.jit(lambda x: scale(x) + 0)(x), 2 * x)


def test_register_targets_refuses_another_handler_for_a_registered_name_and_the_backend_survives() -> None:
    """XLA takes one handler per name and platform: a second, other handler for a
    registered name was queued and then failed the CPU backend's start (``Duplicate
    FFI handler registration``) for every computation in the process. It is refused
    naming the target, before anything of the call is registered; the same handler
    again (a fresh capsule of the same function) is still accepted."""
    proc = run_python(
        """
        import jax.numpy as jnp
        import xla_ffi_rs
        from xla_ffi_rs import examples
        cpu = xla_ffi_rs.handlers("cpu")
        kepler, rms = cpu["xla_ffi_rs.kepler"], cpu["xla_ffi_rs.rms_norm_fwd"]
        xla_ffi_rs.register_targets({"plugin.once": kepler})
        xla_ffi_rs.register_targets({"plugin.once": xla_ffi_rs.handlers("cpu")["xla_ffi_rs.kepler"]})  # the same
        xla_ffi_rs.register_targets({"xla_ffi_rs.kepler": xla_ffi_rs.handlers("cpu")["xla_ffi_rs.kepler"]})
        demo = examples.register_async()[0]
        cases = [
            {"plugin.once": rms},
            {"plugin.fresh": kepler, "xla_ffi_rs.kepler": rms},
            {"xla_ffi_rs.rms_norm_fwd": {"execute": rms, "prepare": rms}},
            {demo: kepler},
        ]
        for handlers in cases:
            try:
                xla_ffi_rs.register_targets(handlers)
            except ValueError as e:
                assert "already registered for 'cpu' with another handler" in str(e), str(e)
                assert str(e).startswith("register_targets: " + list(handlers)[-1] + ": "), str(e)
            else:
                raise AssertionError(f"not refused: {handlers}")
        try:
            xla_ffi_rs.target_names("plugin.fresh")
        except ValueError:
            pass
        else:
            raise AssertionError("plugin.fresh was registered")
        xla_ffi_rs.register_targets({"plugin.other": kepler}, "cuda")  # another platform, another name space
        xla_ffi_rs.register_targets({"plugin.once": rms}, "cuda")
        assert float((jnp.ones(3) + 1).sum()) == 6.0
        sin_e, _ = xla_ffi_rs.kepler(jnp.array([0.5]), 0.0)
        assert abs(float(sin_e[0]) - 0.479425538604203) < 1e-6, sin_e
        print("ok")
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok"


def test_cuda_targets_reach_the_cuda_plugins_registration_handler() -> None:
    # What jax's CUDA plugin does when its backend starts: it installs handlers for
    # the XLA platform name "CUDA", and only entries queued under that exact name
    # reach the GPU (a target queued under "cuda" is never registered there).
    proc = run_python(
        """
        import json
        from jax._src.lib import xla_client
        calls = []
        xla_client.register_custom_call_handler(
            "CUDA", lambda name, fn, platform, api_version, traits: calls.append([name, platform, api_version]))
        import xla_ffi_rs
        xla_ffi_rs.register_targets({"plugin.gpu_probe": xla_ffi_rs.handlers("cpu")["xla_ffi_rs.kepler"]}, "cuda")
        print(json.dumps({"calls": calls, "has_cuda": xla_ffi_rs.has_cuda,
                          "cuda": sorted(xla_ffi_rs.handlers("cuda"))}))
        """
    )
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    # Without the CUDA handlers (a build without the feature) only the probe arrives.
    assert bool(got["cuda"]) == got["has_cuda"], got
    names = {c[0] for c in got["calls"]}
    assert set(got["cuda"]) | {"plugin.gpu_probe"} == names, got
    assert {c[1] for c in got["calls"]} == {"CUDA"} and {c[2] for c in got["calls"]} == {1}, got


# -- good calls ----------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "tol"), [(np.float32, 2e-5), (np.float64, 1e-12)])
def test_kepler_target(dtype: Any, tol: float) -> None:
    m = np.linspace(-7, 7, 301).astype(dtype)
    e = np.resize(np.array([0.0, 0.3, 0.9, 0.9999]), 301).astype(dtype)
    s, c = raw_kepler(m, e)
    assert s.dtype == c.dtype == dtype
    assert np.max(kepler_residual(m, e, s, c)) <= tol
    s, c = jax.jit(raw_kepler)(m.reshape(7, 43), e.reshape(7, 43))
    assert s.shape == (7, 43)


def test_eps_message_of_python_and_of_the_handler_are_the_same_words() -> None:
    # One rule (the handlers' check_eps), said once: rms_norm refuses before
    # lowering with the words the handler gives the raw target.
    x, w = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    with pytest.raises(ValueError) as info:
        xla_ffi_rs.rms_norm(x, w, eps=1e39)
    prefix = "rms_norm: eps: "
    assert str(info.value).startswith(prefix), str(info.value)
    words = str(info.value).removeprefix(prefix)
    assert_ffi_error(lambda: raw_fwd(x, w, eps=1e39), RMS_FWD, ("attribute `eps`: " + words,))


@pytest.mark.parametrize("eps", [0.01, np.float32(0.01), np.float64(0.01)])
def test_rms_norm_fwd_target_eps_types(eps: Any) -> None:
    rng = np.random.default_rng(0)
    x, w = rng.normal(size=(3, 2, 5)), rng.uniform(0.5, 1.5, (2, 5))
    y, inv = raw_fwd(x, w, eps=eps)
    ry, rinv = rms_norm_np(x, w, float(np.float32(0.01)) if isinstance(eps, np.float32) else 0.01)
    np.testing.assert_allclose(y, ry, rtol=1e-13)
    np.testing.assert_allclose(inv, rinv, rtol=1e-13)


def test_rms_norm_fwd_target_mixed_dtypes() -> None:
    rng = np.random.default_rng(1)
    x, w = rng.normal(size=(4, 8)).astype(np.float16), rng.uniform(0.5, 1.5, 8).astype(np.float32)
    y, inv = raw_fwd(x, w, eps=1e-5)
    assert y.dtype == np.float32 and inv.dtype == np.float32 and inv.shape == (4,)
    np.testing.assert_allclose(y, rms_norm_np(x, w, 1e-5)[0], rtol=1e-5, atol=1e-5)


def test_rms_norm_bwd_target_takes_eps_and_recomputes_inv_rms() -> None:
    """rms_norm_bwd(dy, x, weight; eps) -> (dx, dweight): nothing from the forward."""
    rng = np.random.default_rng(2)
    x, w, dy = rng.normal(size=(3, 6)), rng.uniform(0.5, 1.5, 6), rng.normal(size=(3, 6))
    for eps in (1e-5, 0.5):
        dx, dw = raw_bwd(dy, x, w, eps=eps)
        rdx, rdw = rms_norm_bwd_np(dy, x, w, eps)
        np.testing.assert_allclose(dx, rdx, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(dw, rdw, rtol=1e-12, atol=1e-14)


# -- bad calls: a JaxRuntimeError naming the target, and the process goes on ---


def good_call_still_works() -> None:
    s, c = raw_kepler(np.array([1.0]), np.array([0.5]))
    assert np.max(kepler_residual(1.0, 0.5, s, c)) <= 1e-12
    y, _ = raw_fwd(np.ones((2, 3)), np.ones(3), eps=0.0)
    np.testing.assert_allclose(y, np.ones((2, 3)), rtol=1e-15)


ONE = np.ones(3)
BAD_CALLS: dict[str, tuple[Callable[[], Any], str, tuple[str, ...]]] = {
    "kepler int operands": (
        lambda: jax.ffi.ffi_call(KEPLER, (sds((3,), np.int32),) * 2)(np.ones(3, np.int32), np.ones(3, np.int32)),
        KEPLER,
        ("operand 0 (mean_anomaly)", "expected", "int32"),
    ),
    "kepler mixed dtypes": (
        lambda: jax.ffi.ffi_call(KEPLER, (sds((3,), np.float64),) * 2)(ONE, ONE.astype(np.float32)),
        KEPLER,
        ("operand 1 (eccentricity)", "expected dtype", "float32"),
    ),
    "kepler mismatched shapes": (
        lambda: jax.ffi.ffi_call(KEPLER, (sds((3,), np.float64),) * 2)(ONE, np.ones(4)),
        KEPLER,
        ("operand 1 (eccentricity)", "expected shape", "[4]"),
    ),
    "kepler three operands": (
        lambda: jax.ffi.ffi_call(KEPLER, (sds((3,), np.float64),) * 2)(ONE, ONE, ONE),
        KEPLER,
        ("expected 2 operands", "3"),
    ),
    "fwd int weight": (
        lambda: raw_fwd(np.ones((2, 3)), np.ones(3, np.int32), eps=1e-5),
        RMS_FWD,
        ("operand 1 (weight)", "expected", "int32"),
    ),
    "fwd weight shape": (
        lambda: raw_fwd(np.ones((2, 3)), np.ones(2), eps=1e-5),
        RMS_FWD,
        ("operand 1 (weight)", "expected shape", "[2]"),
    ),
    "fwd missing eps": (lambda: raw_fwd(np.ones((2, 3)), np.ones(3)), RMS_FWD, ("attribute", "eps", "missing")),
    "fwd string eps": (
        lambda: raw_fwd(np.ones((2, 3)), np.ones(3), eps="big"),
        RMS_FWD,
        ("attribute", "eps", "expected", "string"),
    ),
    "fwd misspelt eps": (
        lambda: raw_fwd(np.ones((2, 3)), np.ones(3), epsilon=1e-5),
        RMS_FWD,
        ("attribute `eps`: missing", "unknown attribute `epsilon`; this handler takes: eps (did you mean `eps`?)"),
    ),
    "fwd bool eps": (
        lambda: raw_fwd(np.ones((2, 3)), np.ones(3), eps=True),
        RMS_FWD,
        ("attribute", "eps", "expected"),
    ),
    "bwd one operand short": (
        lambda: jax.ffi.ffi_call(RMS_BWD, (sds((2, 3), np.float64), sds((3,), np.float64)))(
            np.ones((2, 3)), np.ones(3), eps=1e-5
        ),
        RMS_BWD,
        ("expected 3 operands", "2"),
    ),
    "bwd an inv_rms operand (the former signature)": (
        lambda: jax.ffi.ffi_call(RMS_BWD, (sds((2, 3), np.float64), sds((3,), np.float64)))(
            np.ones((2, 3)), np.ones((2, 3)), np.ones(3), np.ones(2), eps=1e-5
        ),
        RMS_BWD,
        ("expected 3 operands", "4"),
    ),
    "bwd no eps": (
        lambda: raw_bwd(np.ones((2, 3)), np.ones((2, 3)), np.ones(3)),
        RMS_BWD,
        ("attribute `eps`: missing",),
    ),
    "bwd negative eps": (
        lambda: raw_bwd(np.ones((2, 3)), np.ones((2, 3)), np.ones(3), eps=-1.0),
        RMS_BWD,
        ("attribute `eps`", "expected a finite value >= 0", "-1"),
    ),
    "fwd eps beyond float32 for float32 rows": (
        lambda: raw_fwd(np.ones((2, 3), np.float32), np.ones(3, np.float32), eps=1e39),
        RMS_FWD,
        ("attribute `eps`", "fits float32", "3.4028234663852886e38", "got 1e39"),
    ),
    "bwd eps beyond float32 for bfloat16 rows": (
        lambda: raw_bwd(
            np.ones((2, 3), jnp.bfloat16), np.ones((2, 3), jnp.bfloat16), np.ones(3, jnp.bfloat16), eps=1e39
        ),
        RMS_BWD,
        ("attribute `eps`", "fits float32", "got 1e39"),
    ),
    "python_call float callback": (
        lambda: jax.ffi.ffi_call("xla_ffi_rs.python_call", sds((3,), np.float64))(ONE, callback=1.0),
        "xla_ffi_rs.python_call",
        ("attribute `callback`", "expected an integer scalar (i64), got 1.0"),
    ),
    "bwd int dy": (
        lambda: raw_bwd(np.ones((2, 3), np.int32), np.ones((2, 3)), np.ones(3), eps=1e-5),
        RMS_BWD,
        ("operand 0 (dy)", "expected", "int32"),
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_raw_call_raises_and_process_survives(case: str) -> None:
    call, target, words = BAD_CALLS[case]
    assert_ffi_error(call, target, words)
    good_call_still_works()


def test_stateful_example_target_registered_with_its_state_type() -> None:
    # A stage bundle (instantiate + execute), registered on request, runs.
    from xla_ffi_rs import examples

    examples.register()
    x = np.arange(4, dtype=np.float32)
    call = jax.ffi.ffi_call("xla_ffi_rs.examples.scale", sds(x.shape, np.float32))
    np.testing.assert_array_equal(jax.jit(lambda x: call(x, factor=np.float32(2.5)))(x), 2.5 * x)


def test_eps_up_to_the_accumulator_maximum_is_accepted_and_exact() -> None:
    # The limit is the accumulator's: float32 rows take float32's largest eps, and
    # float64 rows (x or weight float64) take one far beyond it.
    x, w = np.array([[3.0, 4.0]]), np.array([1.0, 2.0])
    big32 = float(np.finfo(np.float32).max)
    y, inv = raw_fwd(x.astype(np.float32), w.astype(np.float32), eps=big32)
    expect = 1.0 / np.sqrt(12.5 + big32)
    np.testing.assert_allclose(np.asarray(inv), [expect], rtol=1e-6)
    np.testing.assert_allclose(np.asarray(y), x * w * expect, rtol=1e-6)
    for xd, wd in [(np.float64, np.float32), (np.float32, np.float64)]:
        y, inv = raw_fwd(x.astype(xd), w.astype(wd), eps=1e300)
        np.testing.assert_allclose(np.asarray(inv), [1e-150], rtol=1e-12)
        dy = np.array([[1.0, -2.0]])
        dx, dw = raw_bwd(dy, x.astype(xd), w.astype(wd), eps=1e300)
        r = 1e-150
        want_dx = r * w * dy - r**3 * x / 2 * np.sum(dy * w * x)
        np.testing.assert_allclose(np.asarray(dx), want_dx.astype(xd), rtol=1e-6)
        np.testing.assert_allclose(np.asarray(dw), (dy * x * r)[0].astype(wd), rtol=1e-6)


@pytest.mark.parametrize(
    ("handlers", "got"),
    [
        ([1], "got list"),
        (None, "got NoneType"),
        ({1: None}, "got the key 1 (int)"),
        ({"a.ok": None, b"a.bytes": None}, "got the key b'a.bytes' (bytes)"),
    ],
)
def test_register_targets_says_what_is_wrong_with_the_dict(handlers: Any, got: str) -> None:
    # The whole value's repr (capsule addresses and all) said neither which key nor what was wrong.
    with pytest.raises(
        TypeError, match=rf"^register_targets: handlers: expected a dict of target name .*, {re.escape(got)}$"
    ):
        xla_ffi_rs.register_targets(handlers)
