"""xla-ffi-run, the Python-free runner, end to end: programs exported by JAX run on
a CPU PJRT plugin from PyPI with this project's handler libraries, and give JAX's
results; each documented error exits with status 1 and says what is wrong.

The runner is a separate process (no Python in it); this file only starts it and
compares files. .ci/host.sh builds what it needs and sets:

* ``XFR_RUNNER``: the ``xla-ffi-run`` binary;
* ``XFR_PJRT_PLUGIN``: ``pjrt_c_api_cpu_plugin.so`` of ``lammps-jax-pjrt-cpu`` 0.11.2;
* ``XFR_OPS_LIB``: the Python-free cdylib of ``crates/ops``;
* ``XFR_PLUGIN_LIB``: the cdylib of ``examples/plugin`` (built without ``python``);
* ``XFR_HOST_EXPORTS``: the folder ``tests/host/make_exports.py`` wrote;
* ``XFR_OLD_PJRT_PLUGIN`` (optional): ``xla_cpu_pjrt.so`` of ``xla-cpu-pjrt`` 0.0.1
  (PJRT API 0.81, FFI API 0.2: too old for the handlers);
* ``XFR_STABLEHLO_1_16_PLUGIN`` (optional): ``libpjrt_cpu.so`` of
  ``fastatomstruct-xla-cpu`` 2026.6.23 (StableHLO up to 1.16: older than jax 0.12's
  bytecode).

Without them the module is skipped, unless ``XFR_HOST_REQUIRED=1`` (set by the CI
stage), where it fails.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
NEEDED = ("XFR_RUNNER", "XFR_PJRT_PLUGIN", "XFR_OPS_LIB", "XFR_PLUGIN_LIB", "XFR_HOST_EXPORTS")
_missing = [k for k in NEEDED if not os.environ.get(k)]
if _missing:
    if os.environ.get("XFR_HOST_REQUIRED") == "1":
        raise RuntimeError(f"XFR_HOST_REQUIRED=1 but {_missing} are not set (.ci/host.sh sets them)")
    pytest.skip(f"needs {', '.join(_missing)} (.ci/host.sh sets them)", allow_module_level=True)

RUNNER = Path(os.environ["XFR_RUNNER"])
PLUGIN = Path(os.environ["XFR_PJRT_PLUGIN"])
LIBS = {"ops": Path(os.environ["XFR_OPS_LIB"]), "plugin": Path(os.environ["XFR_PLUGIN_LIB"])}
EXPORTS = Path(os.environ["XFR_HOST_EXPORTS"])
MANIFEST = json.loads((EXPORTS / "manifest.json").read_text())["programs"]


def run(
    *args: str | Path, handlers: tuple[str, ...] = ("ops", "plugin"), plugin: Path = PLUGIN
) -> subprocess.CompletedProcess[str]:
    cmd = [str(RUNNER), "--plugin", str(plugin)]
    for h in handlers:
        cmd += ["--handlers", str(LIBS[h])]
    cmd += [str(a) for a in args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


def run_program(
    folder: Path,
    out: Path,
    model: str = "model.jaxexport",
    n_inputs: int | None = None,
    handlers: tuple[str, ...] = ("ops", "plugin"),
) -> subprocess.CompletedProcess[str]:
    n = len(list(folder.glob("in*.npy"))) if n_inputs is None else n_inputs
    inputs = [folder / f"in{i}.npy" for i in range(n)]
    return run(folder / model, *inputs, "--out", out, handlers=handlers)


def ordered(a: np.ndarray) -> np.ndarray:
    """Floats as integers in the order of their values (adjacent floats differ by 1)."""
    bits = a.view({2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize]).astype(np.int64)
    magnitude = bits & np.int64((1 << (8 * a.dtype.itemsize - 1)) - 1)
    return np.where(bits < 0, -magnitude, magnitude)


def test_ulp_distance_counts_adjacent_floats() -> None:
    """The 2-ulp comparison below measures what it says (across zero too)."""
    for dtype in (np.float32, np.float64):
        x = np.array([1.0, -1.0, 0.0, 1e-30], dtype)
        up = np.nextafter(np.nextafter(x, dtype(np.inf)), dtype(np.inf))
        assert (ordered(up) - ordered(x)).tolist() == [2, 2, 2, 2]
        tiny = np.nextafter(np.zeros(1, dtype), np.ones(1, dtype))
        assert (ordered(tiny) - ordered(np.negative(tiny))).tolist() == [2]


def assert_results(folder: Path, out: Path, n_outputs: int, compare: str) -> None:
    for i in range(n_outputs):
        want = np.load(folder / f"expected{i}.npy")
        got = np.load(out / f"out{i}.npy")
        assert (got.dtype, got.shape) == (want.dtype, want.shape), (i, got.dtype, got.shape, want.dtype, want.shape)
        if compare == "exact":
            assert got.tobytes() == want.tobytes(), f"out{i}: not bit-identical\n got {got}\nwant {want}"
        else:
            ulps = np.abs(ordered(got) - ordered(want))
            assert ulps.max() <= 2, f"out{i}: {ulps.max()} ulp apart at {np.argmax(ulps)}\n got {got}\nwant {want}"


@pytest.mark.parametrize("name", sorted(n for n, p in MANIFEST.items() if p["compare"] != "error"))
def test_exported_program_gives_jaxs_results(name: str, tmp_path: Path) -> None:
    p = MANIFEST[name]
    done = run_program(EXPORTS / name, tmp_path, handlers=tuple(p["handlers"]))
    assert done.returncode == 0, done.stderr
    assert_results(EXPORTS / name, tmp_path, p["outputs"], p["compare"])
    assert sorted(f.name for f in tmp_path.iterdir()) == [f"out{i}.npy" for i in range(p["outputs"])]


def test_results_of_an_earlier_run_are_not_left_in_out(tmp_path: Path) -> None:
    """Before the fix a run into a folder that held an earlier run's results left
    the extra ones (out2.npy after a two-result program), which a script reading
    ``out*.npy`` took for results. They are removed; other files are kept, and a
    run that fails changes nothing."""
    stale = np.arange(3.0)
    for name in ("out0.npy", "out1.npy", "out2.npy", "out7.npy", "out01.npy", "outx.npy"):
        np.save(tmp_path / name, stale)
    (tmp_path / "notes.txt").write_text("mine")
    failed = run_program(EXPORTS / "kepler_fwd", tmp_path, n_inputs=1, handlers=("ops",))
    assert_error(failed, "takes 2 inputs")
    assert len(list(tmp_path.glob("out*.npy"))) == 6
    done = run_program(EXPORTS / "kepler_fwd", tmp_path, handlers=("ops",))
    assert done.returncode == 0, done.stderr
    assert sorted(f.name for f in tmp_path.iterdir()) == ["notes.txt", "out0.npy", "out01.npy", "out1.npy", "outx.npy"]
    assert_results(EXPORTS / "kepler_fwd", tmp_path, 2, "exact")
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_an_export_for_another_platform_is_refused(tmp_path: Path) -> None:
    """Before the fix a program exported for CUDA only ran on the CPU plugin
    (jax.export's own ``call`` refuses it: the module may hold that platform's
    calls, or compute otherwise)."""
    done = run_program(EXPORTS / "cuda_only", tmp_path, handlers=("ops",))
    assert_error(done, "exported for cuda, not for cpu", 'platforms=("cpu", ...)')
    assert list(tmp_path.iterdir()) == []


def test_a_shape_polymorphic_export_is_refused_naming_the_dimension(tmp_path: Path) -> None:
    """docs/outside-python.md: a ``jax.export`` file with symbolic dimensions (a
    jnp-only program, or one of the package's ops, which export with them) is
    refused naming the dimension, ``4*k`` as written, before any input is read."""
    import jax  # only this test exports: the others run files make_exports.py wrote
    import jax.numpy as jnp

    import xla_ffi_rs as xr

    cases = (
        ("b, 4", (3, 4), "b", lambda x: jnp.sin(x) * 2),
        ("2, 4*k", (2, 8), "4*k", lambda x: jnp.sin(x) * 2),
        ("b, n", (3, 4), "b", lambda x: xr.rms_norm(x, jnp.ones(x.shape[1:], x.dtype))),
    )
    for spec, shape, name, fn in cases:
        dims = jax.export.symbolic_shape(spec)
        exported = jax.export.export(jax.jit(fn), disabled_checks=xr.export_checks())(
            jax.ShapeDtypeStruct(dims, jnp.float32)
        )
        model = tmp_path / "poly.jaxexport"
        model.write_bytes(bytes(exported.serialize()))
        np.save(tmp_path / "in0.npy", np.ones(shape, np.float32))
        done = run(model, tmp_path / "in0.npy", "--out", tmp_path / "out", handlers=("ops",))
        assert_error(done, f"dimension '{name}' is symbolic", "shape-polymorphic exports are not supported")
        assert not (tmp_path / "out").exists()


def test_the_committed_export_still_runs_to_its_results(tmp_path: Path) -> None:
    """Exports outlive releases: the program that tests/host/golden holds (made
    with an earlier release, see its README) runs to the same results."""
    meta = json.loads((GOLDEN / "manifest.json").read_text())
    done = run_program(GOLDEN, tmp_path, handlers=("ops",))
    assert done.returncode == 0, done.stderr
    assert_results(GOLDEN, tmp_path, meta["outputs"], "exact")


def test_stablehlo_text_runs_too(tmp_path: Path) -> None:
    folder = EXPORTS / "rms_norm_fwd"
    done = run_program(folder, tmp_path, model="model.mlir", handlers=("ops",))
    assert done.returncode == 0, done.stderr
    assert_results(folder, tmp_path, 1, "exact")


def test_the_runner_has_no_python_in_it() -> None:
    assert b"libpython" not in RUNNER.read_bytes()
    for lib in LIBS.values():
        assert b"libpython" not in lib.read_bytes() and b"PyObject_" not in lib.read_bytes(), lib


# ---- errors: exit status 1, the cause on stderr --------------------------------


def assert_error(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    for w in words:
        assert w in done.stderr, (w, done.stderr)


def test_missing_plugin(tmp_path: Path) -> None:
    missing = tmp_path / "no_such_plugin.so"
    done = run(EXPORTS / "kepler_fwd" / "model.jaxexport", "--out", tmp_path, plugin=missing)
    assert_error(done, "cannot load PJRT plugin", str(missing))


def test_plugin_without_get_pjrt_api(tmp_path: Path) -> None:
    done = run(EXPORTS / "kepler_fwd" / "model.jaxexport", "--out", tmp_path, plugin=LIBS["plugin"])
    assert_error(done, "cannot load PJRT plugin", "GetPjrtApi")


def test_missing_handler_library(tmp_path: Path) -> None:
    done = run(
        EXPORTS / "kepler_fwd" / "model.jaxexport", "--handlers", tmp_path / "nope.so", "--out", tmp_path, handlers=()
    )
    assert_error(done, "nope.so", "No such file or directory")  # the loader's reason, not only "dlopen failed"


def test_the_python_extension_as_handlers_says_to_use_the_python_free_library(tmp_path: Path) -> None:
    """The wheel's `_native` cannot be loaded without Python; the loader's reason
    alone ("undefined symbol: PyModuleDef_Init") did not say what to use instead."""
    import importlib.util

    # The package's folder without importing it (that imports jax); the extension
    # module is its shared library `_native`.
    spec = importlib.util.find_spec("xla_ffi_rs")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    natives = sorted(p for d in folders for p in Path(d).glob("_native*.so"))
    if not natives:
        pytest.skip("xla_ffi_rs is not installed")
    native = str(natives[0])
    f = EXPORTS / "kepler_fwd"
    done = run(f / "model.jaxexport", "--handlers", native, "--out", tmp_path, handlers=())
    assert_error(done, native, "undefined symbol: ", "needs a Python interpreter", "libxla_ffi_rs_ops.so")
    # The first symbol the loader misses is one of Python's C API (Py..., _Py...).
    assert re.search(r"undefined symbol: _?Py", done.stderr), done.stderr


def test_libraries_named_without_a_folder_are_files_of_the_current_one(tmp_path: Path) -> None:
    """`--handlers ops.so` in the folder holding it: before the fix dlopen searched
    the library path for the bare name and said "No such file or directory"
    (or could load another library of that name)."""
    import shutil

    shutil.copy(LIBS["ops"], tmp_path / "ops.so")
    shutil.copy(PLUGIN, tmp_path / "pjrt.so")
    f = EXPORTS / "kepler_fwd"
    cmd = [str(RUNNER), "--plugin", "pjrt.so", "--handlers", "ops.so", str(f / "model.jaxexport")]
    cmd += [str(f / "in0.npy"), str(f / "in1.npy"), "--out", "out"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert_results(f, tmp_path / "out", 2, "exact")


def test_target_with_no_handler_is_named_with_the_registered_ones(tmp_path: Path) -> None:
    done = run_program(EXPORTS / "kepler_fwd", tmp_path, handlers=("plugin",))
    assert_error(done, "'xla_ffi_rs.kepler'", "registered targets:", "plugin.scale", "plugin.moments")
    done = run_program(EXPORTS / "kepler_fwd", tmp_path, handlers=())
    assert_error(
        done, "'xla_ffi_rs.kepler'", "no --handlers library given", "give the library that exports it with --handlers"
    )


def test_stablehlo_newer_than_the_plugin_says_both_versions(tmp_path: Path) -> None:
    blob = (EXPORTS / "kepler_fwd" / "model.jaxexport").read_bytes()
    at = blob.index(b"StableHLO_v1.")
    newer = blob[:at] + b"StableHLO_v9." + blob[at + 13 :]  # same length: 9.x.y
    model = tmp_path / "newer.jaxexport"
    model.write_bytes(newer)
    done = run(model, EXPORTS / "kepler_fwd" / "in0.npy", EXPORTS / "kepler_fwd" / "in1.npy", "--out", tmp_path)
    assert_error(done, "StableHLO 9.", "newer than this plugin reads", "StableHLO 1.", "as_text()")


def test_wrong_input_count(tmp_path: Path) -> None:
    done = run_program(EXPORTS / "kepler_fwd", tmp_path, n_inputs=1)
    assert_error(done, "takes 2 inputs", "float64[16], float64[16]", "got 1")


def test_wrong_input_dtype_and_shape(tmp_path: Path) -> None:
    f = EXPORTS / "kepler_fwd"
    np.save(tmp_path / "m32.npy", np.load(f / "in0.npy").astype(np.float32))
    done = run(f / "model.jaxexport", f / "in0.npy", tmp_path / "m32.npy", "--out", tmp_path)
    assert_error(done, "input 1", "m32.npy", "expected float64[16]", "got float32[16]")
    np.save(tmp_path / "short.npy", np.load(f / "in0.npy")[:3])
    done = run(f / "model.jaxexport", tmp_path / "short.npy", f / "in1.npy", "--out", tmp_path)
    assert_error(done, "input 0", "short.npy", "expected float64[16]", "got float64[3]")


def test_stablehlo_text_inputs_are_checked_against_its_main(tmp_path: Path) -> None:
    """The plugin checks an argument only by its size in bytes: an input of another
    dtype or shape with as many bytes would run reinterpreted, so the runner checks
    the inputs against the signature of the text's `main`."""
    f = EXPORTS / "rms_norm_fwd"
    x, w = np.load(f / "in0.npy"), np.load(f / "in1.npy")
    assert x.dtype == np.float32 and w.dtype == np.float32
    np.save(tmp_path / "x_i32.npy", x.view(np.int32))
    done = run(f / "model.mlir", tmp_path / "x_i32.npy", f / "in1.npy", "--out", tmp_path, handlers=("ops",))
    assert_error(done, "input 0", "x_i32.npy", f"expected float32[{','.join(map(str, x.shape))}]", "got int32")
    np.save(tmp_path / "x_flat.npy", x.reshape(-1))
    done = run(f / "model.mlir", tmp_path / "x_flat.npy", f / "in1.npy", "--out", tmp_path, handlers=("ops",))
    assert_error(done, "input 0", "x_flat.npy", f"got float32[{x.size}]")
    done = run(f / "model.mlir", f / "in0.npy", "--out", tmp_path, handlers=("ops",))
    assert_error(done, "takes 2 inputs", "got 1")


def test_bytecode_inputs_are_checked_against_the_compiled_parameters(tmp_path: Path) -> None:
    """Bytecode has no signature the runner reads, and the plugin checks only byte
    sizes: before the fix an int32 view of x ran reinterpreted as float32, exit 0.
    Now the inputs are checked against the compiled program's parameters (the
    plugin's optimized module), naming the file."""
    f = EXPORTS / "rms_norm_fwd"
    x = np.load(f / "in0.npy")
    shape = ",".join(map(str, x.shape))
    done = run(f / "model.mlirbc", f / "in0.npy", f / "in1.npy", "--out", tmp_path, handlers=("ops",))
    assert done.returncode == 0, done.stderr
    assert_results(f, tmp_path, 1, "exact")
    np.save(tmp_path / "x_i32.npy", x.view(np.int32))
    done = run(f / "model.mlirbc", tmp_path / "x_i32.npy", f / "in1.npy", "--out", tmp_path, handlers=("ops",))
    assert_error(done, "input 0 (", "x_i32.npy", f"expected float32[{shape}]", f"got int32[{shape}]")
    np.save(tmp_path / "x_flat.npy", x.reshape(-1))
    done = run(f / "model.mlirbc", tmp_path / "x_flat.npy", f / "in1.npy", "--out", tmp_path, handlers=("ops",))
    assert_error(done, "input 0 (", "x_flat.npy", f"expected float32[{shape}]", f"got float32[{x.size}]")
    done = run(f / "model.mlirbc", f / "in0.npy", "--out", tmp_path, handlers=("ops",))
    assert_error(done, "model.mlirbc takes 2 inputs", f"float32[{shape}], float32[8]", "got 1")


def test_a_truncated_or_corrupt_program_is_not_blamed_on_its_version(tmp_path: Path) -> None:
    """The plugin says "this could indicate forward incompatibility" for any
    bytecode it cannot parse; before the fix the runner then said that StableHLO
    1.18 was newer than the 1.20 the plugin reads. Now it names the file and gives
    the plugin's reason."""
    f = EXPORTS / "rms_norm_fwd"
    code = (f / "model.mlirbc").read_bytes()
    (tmp_path / "cut.mlirbc").write_bytes(code[: len(code) // 2])
    (tmp_path / "cut.mlir").write_text((f / "model.mlir").read_text()[:100])
    for name in ("cut.mlirbc", "cut.mlir"):
        done = run(tmp_path / name, f / "in0.npy", f / "in1.npy", "--out", tmp_path, handlers=("ops",))
        assert_error(done, f"cannot compile {tmp_path / name} (StableHLO", "bytes): PJRT_Client_Compile failed")
        assert "newer than this plugin" not in done.stderr, done.stderr
    whole = (EXPORTS / "kepler_fwd" / "model.jaxexport").read_bytes()
    (tmp_path / "cut.jaxexport").write_bytes(whole[:300])
    done = run(tmp_path / "cut.jaxexport", "--out", tmp_path)
    assert_error(done, "cut.jaxexport", "not a jax.export serialization", "past the end")


def test_out_naming_a_file_is_refused_before_running(tmp_path: Path) -> None:
    folder = EXPORTS / "kepler_fwd"
    taken = tmp_path / "out.npy"
    taken.write_bytes(b"kept")
    done = run_program(folder, taken)
    assert done.returncode == 1
    assert f"--out {taken}: not a folder (a file of that name exists)" in done.stderr, done.stderr
    assert taken.read_bytes() == b"kept"


def test_unreadable_input(tmp_path: Path) -> None:
    (tmp_path / "bad.npy").write_bytes(b"not numpy")
    f = EXPORTS / "kepler_fwd"
    done = run(f / "model.jaxexport", tmp_path / "bad.npy", f / "in1.npy", "--out", tmp_path)
    assert_error(done, "bad.npy", "not a .npy file")


def test_inputs_given_before_the_model(tmp_path: Path) -> None:
    # The first .npy file read as a malformed jax.export ("offset 1297436307 is past the end").
    f = EXPORTS / "kepler_fwd"
    done = run(f / "in0.npy", f / "model.jaxexport", "--out", tmp_path)
    assert_error(done, "in0.npy: a .npy file, not a program", "MODEL file comes first")
    assert "offset" not in done.stderr, done.stderr


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="needs /dev/zero")
def test_an_endless_input_is_an_error_not_a_read_without_end(tmp_path: Path) -> None:
    """An input that never ends (/dev/zero, a pipe) is refused from its first bytes;
    the address space is capped so that a runner that reads it whole fails here
    (by its allocator) instead of filling the machine's memory."""
    import resource

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))

    f = EXPORTS / "kepler_fwd"
    cmd = [str(RUNNER), "--plugin", str(PLUGIN), "--handlers", str(LIBS["ops"]), str(f / "model.jaxexport")]
    cmd += ["/dev/zero", str(f / "in1.npy"), "--out", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False, preexec_fn=cap)
    assert_error(done, "input /dev/zero", "not a .npy file")


def test_not_a_program(tmp_path: Path) -> None:
    (tmp_path / "model.bin").write_bytes(b"\x00\x01\x02 nothing")
    done = run(tmp_path / "model.bin", "--out", tmp_path)
    assert_error(done, "model.bin", "not a jax.export serialization")


def test_a_handlers_error_reaches_the_host_with_its_code(tmp_path: Path) -> None:
    done = run_program(EXPORTS / "plugin_scale_inf", tmp_path, handlers=("plugin",))
    assert_error(done, "INVALID_ARGUMENT (code 3)", "plugin.scale", "factor", "must be finite")


USER_DATA_PROGRAM = """module @m {
  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {
    %y = stablehlo.custom_call @xla_ffi_rs.examples.add_offset(%x) {api_version = 4 : i32, backend_config = {}} \
: (tensor<4xf32>) -> tensor<4xf32>
    return %y : tensor<4xf32>
  }
}
"""


def test_a_user_data_handler_run_without_user_data_is_an_error_not_a_crash(tmp_path: Path) -> None:
    """The runner has no user data to give; the handler reports it missing (the
    plugin would crash if no execute context were passed at all)."""
    (tmp_path / "m.mlir").write_text(USER_DATA_PROGRAM)
    np.save(tmp_path / "x.npy", np.arange(4, dtype=np.float32))
    done = run(tmp_path / "m.mlir", tmp_path / "x.npy", "--out", tmp_path, handlers=("ops",))
    assert_error(done, "INVALID_ARGUMENT (code 3)", "xla_ffi_rs.examples.add_offset", "user data `offset`", "not found")


@pytest.mark.skipif(not os.environ.get("XFR_OLD_PJRT_PLUGIN"), reason="needs XFR_OLD_PJRT_PLUGIN (xla-cpu-pjrt 0.0.1)")
def test_ffi_api_too_old_for_the_handlers(tmp_path: Path) -> None:
    old = Path(os.environ["XFR_OLD_PJRT_PLUGIN"])
    done = run(EXPORTS / "kepler_fwd" / "model.jaxexport", "--out", tmp_path, handlers=("ops",), plugin=old)
    # xla-cpu-pjrt 0.0.1: XLA FFI API 0.2, refused before registering (such a
    # runtime drops registration errors silently).
    assert_error(done, "xla_cpu_pjrt.so", "XLA FFI runtime has API 0.2", "need 0.3 or newer", "libxla_ffi_rs_ops")


@pytest.mark.skipif(
    not os.environ.get("XFR_STABLEHLO_1_16_PLUGIN"), reason="needs XFR_STABLEHLO_1_16_PLUGIN (fastatomstruct-xla-cpu)"
)
def test_a_plugin_with_older_stablehlo_refuses_the_bytecode_and_runs_the_text(tmp_path: Path) -> None:
    """fastatomstruct-xla-cpu 2026.6.23 (PJRT 0.106) reads StableHLO up to 1.16;
    jax 0.12 writes 1.18 bytecode. The text form of the same function runs."""
    older = Path(os.environ["XFR_STABLEHLO_1_16_PLUGIN"])
    f = EXPORTS / "rms_norm_fwd"
    done = run(f / "model.jaxexport", f / "in0.npy", f / "in1.npy", "--out", tmp_path, plugin=older)
    assert_error(done, "StableHLO 1.18.0 bytecode", "StableHLO 1.16", "as_text()")
    done = run(f / "model.mlir", f / "in0.npy", f / "in1.npy", "--out", tmp_path, handlers=("ops",), plugin=older)
    assert done.returncode == 0, done.stderr
    assert_results(f, tmp_path, 1, "exact")


def test_usage_errors_exit_2_and_help_documents_every_error() -> None:
    done = subprocess.run([str(RUNNER), "--plugin"], capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "--plugin needs a value" in done.stderr
    text = subprocess.run([str(RUNNER), "--help"], capture_output=True, text=True, check=True).stdout
    for words in (
        "--plugin",
        "--handlers",
        "--out",
        "GetPjrtApi",
        "FFI extension",
        "no --handlers library",
        "newer than the plugin",
        "as_text()",
        "element type or shape",
        "by sorted key",
        "other platforms than the plugin's",
        "symbolic shapes",
        "EXIT STATUS",
    ):
        assert words in text, words


# ---- docs/outside-python.md: its commands run as written ------------------------


def doc_blocks(lang: str) -> list[str]:
    text = (HERE.parent.parent / "docs" / "outside-python.md").read_text(encoding="utf-8")
    return re.findall(rf"^```{re.escape(lang)}\n(.*?)^```$", text, flags=re.M | re.S)


def test_the_docs_commands_run_as_written() -> None:
    """The page's Python block, then its bash blocks in order (from the
    repository's root, this interpreter's venv first on PATH), then its claim:
    out0.npy is JAX's sin E, bit for bit."""
    root = HERE.parent.parent
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XLA_", "JAX_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    (python_block,) = doc_blocks("python")
    done = subprocess.run(
        [sys.executable, "-c", python_block],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    bash = doc_blocks("bash")
    assert len(bash) >= 3 and any("xla-ffi-run" in b for b in bash)
    for block in bash:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", block],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        assert done.returncode == 0, (block, done.stdout, done.stderr)
    demo = Path("/tmp/kepler-demo")
    assert np.load(demo / "out" / "out0.npy").tobytes() == np.load(demo / "expected_sin.npy").tobytes()
