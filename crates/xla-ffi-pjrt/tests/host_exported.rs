//! A Rust service on a real CPU PJRT plugin: `jax.export` files read with
//! `Exported`, compiled once, run many times and from several threads sharing
//! one executable, with this project's ops library registered.
//!
//! Needs `XFR_PJRT_PLUGIN`, `XFR_OPS_LIB` and `XFR_HOST_EXPORTS` (the folder that
//! `tests/host/make_exports.py` wrote); `.ci/host.sh` sets them. Without them each
//! test prints why and passes, unless `XFR_HOST_REQUIRED=1`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use xla_ffi_pjrt::{Client, ClientError, ElementType, Exported, HandlerLibrary, HostArray, Plugin};

/// The plugin with the ops library registered, and the exports' folder.
fn setup() -> Option<(Plugin, PathBuf)> {
    static SETUP: OnceLock<Option<(Plugin, PathBuf)>> = OnceLock::new();
    SETUP
        .get_or_init(|| {
            let vars: Option<Vec<String>> =
                ["XFR_PJRT_PLUGIN", "XFR_OPS_LIB", "XFR_HOST_EXPORTS"].iter().map(|k| std::env::var(k).ok()).collect();
            let Some([plugin, ops, exports]) = vars.and_then(|v| <[String; 3]>::try_from(v).ok()) else {
                assert!(std::env::var("XFR_HOST_REQUIRED").as_deref() != Ok("1"), "the XFR_ variables are not set");
                eprintln!(
                    "skipping: XFR_PJRT_PLUGIN, XFR_OPS_LIB or XFR_HOST_EXPORTS is not set (.ci/host.sh sets them)"
                );
                return None;
            };
            // SAFETY: the CPU PJRT plugin from PyPI that .ci/host.sh names.
            let plugin = unsafe { Plugin::load(&plugin) }.unwrap();
            // SAFETY: this project's handler library, built with `export_registry!`.
            let ops = unsafe { HandlerLibrary::load(&ops) }.unwrap();
            xla_ffi_pjrt::register(&plugin.pjrt_api().unwrap(), &ops, "cpu").unwrap();
            Some((plugin, PathBuf::from(exports)))
        })
        .clone()
}

/// A little-endian `.npy` file of a plain dtype, as NumPy writes it.
fn npy(path: &Path) -> HostArray {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    let descr = header.split("'descr': '").nth(1).unwrap().split('\'').next().unwrap();
    let element_type = match descr {
        "<f8" => ElementType::F64,
        "<f4" => ElementType::F32,
        other => panic!("{}: dtype {other}", path.display()),
    };
    let shape = header.split("'shape': (").nth(1).unwrap().split(')').next().unwrap();
    let dims = shape.split(',').filter(|d| !d.trim().is_empty()).map(|d| d.trim().parse().unwrap()).collect();
    HostArray::new(element_type, dims, bytes[10 + header_len..].to_vec()).unwrap()
}

fn arrays(folder: &Path, prefix: &str, count: usize) -> Vec<HostArray> {
    (0..count).map(|i| npy(&folder.join(format!("{prefix}{i}.npy")))).collect()
}

/// Before the fix a `.jaxexport` could only be given to `Client::compile`, which
/// failed to parse it as StableHLO; only the runner unwrapped it. And an export
/// for several platforms made with `jax_enable_x64` takes an `int64` platform
/// index, where the runner passed an `int32` one: "input 0: expected int64[], got
/// int32[]". `Exported` unwraps the file and passes the index of the compiled
/// program's type; the results are JAX's, bit for bit.
#[test]
fn a_multi_platform_export_runs_with_jaxs_results() {
    let Some((plugin, exports)) = setup() else { return };
    let folder = exports.join("multi_platform");
    let exported = Exported::parse(&std::fs::read(folder.join("model.jaxexport")).unwrap()).unwrap();
    assert_eq!(exported.platforms(), ["cpu", "cuda"]);
    assert_eq!(exported.in_types().iter().map(ToString::to_string).collect::<Vec<_>>(), ["float64[16]"; 2]);
    let client = Client::new(&plugin).unwrap();
    let exe = client.compile(exported.module(), "mlir").unwrap();
    // The module itself takes the index first.
    assert_eq!(exe.parameters().unwrap()[0].to_string(), "int64[]");
    let inputs = arrays(&folder, "in", 2);
    let results = exported.execute(&exe, &inputs).unwrap();
    assert_eq!(results, arrays(&folder, "expected", 2));
    // The function's inputs are checked, naming the input.
    let err = exported.execute(&exe, &inputs[..1]).unwrap_err();
    assert!(matches!(err, ClientError::Input { .. }), "{err}");
    assert!(err.to_string().contains("takes 2 inputs (float64[16], float64[16]), got 1"), "{err}");
}

/// An input the function does not use is dropped from the module: `execute`
/// takes the function's inputs, all of them checked, and passes the kept ones.
#[test]
fn an_unused_input_is_checked_and_dropped() {
    let Some((plugin, exports)) = setup() else { return };
    let folder = exports.join("unused_input");
    let exported = Exported::parse(&std::fs::read(folder.join("model.jaxexport")).unwrap()).unwrap();
    assert_eq!(exported.kept_inputs(), [0, 2]);
    let client = Client::new(&plugin).unwrap();
    let exe = client.compile(exported.module(), "mlir").unwrap();
    let mut inputs = arrays(&folder, "in", 3);
    assert_eq!(exported.execute(&exe, &inputs).unwrap(), arrays(&folder, "expected", 1));
    inputs[1] = inputs[0].clone();
    let err = exported.execute(&exe, &inputs).unwrap_err();
    assert!(err.to_string().starts_with("input 1: expected float32[4,8], got float64[16]"), "{err}");
}

/// StableHLO given as a `jax.export` file is refused, saying what it is not; and
/// a `jax.export` file given to `Client::compile` says to unwrap it (before, only
/// the plugin's "Failed to parse using StableHLO v1.20.0, this could indicate
/// forward incompatibility").
#[test]
fn stablehlo_is_not_an_export_nor_an_export_stablehlo() {
    let Some((plugin, exports)) = setup() else { return };
    let bytecode = std::fs::read(exports.join("rms_norm_fwd/model.mlirbc")).unwrap();
    let err = Exported::parse(&bytecode).unwrap_err();
    assert!(matches!(err, ClientError::Program { .. }), "{err}");
    assert!(err.to_string().starts_with("not a jax.export serialization ("), "{err}");
    let client = Client::new(&plugin).unwrap();
    let err =
        client.compile(&std::fs::read(exports.join("rms_norm_fwd/model.jaxexport")).unwrap(), "mlir").unwrap_err();
    assert!(matches!(err, ClientError::Program { .. }), "{err}");
    assert!(err.to_string().starts_with("the program is a jax.export serialization, not StableHLO"), "{err}");
    assert!(err.to_string().contains("Exported::parse"), "{err}");
}

/// Before the fix `Executable` was neither `Send` nor `Sync`, so a service could
/// not share a compiled program between its threads (this did not compile).
/// Eight threads run one executable, each many times, and get JAX's results.
#[test]
fn one_executable_runs_from_several_threads() {
    let Some((plugin, exports)) = setup() else { return };
    let folder = exports.join("kepler_fwd");
    let exported = Exported::parse(&std::fs::read(folder.join("model.jaxexport")).unwrap()).unwrap();
    let client = Client::new(&plugin).unwrap();
    let exe = client.compile(exported.module(), "mlir").unwrap();
    let inputs = arrays(&folder, "in", 2);
    let expected = arrays(&folder, "expected", 2);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..25 {
                    assert_eq!(exported.execute(&exe, &inputs).unwrap(), expected);
                }
            });
        }
    });
}

/// Before the fix a program exported for CUDA only ran on the CPU plugin; it is
/// refused, as `jax.export`'s `call` refuses it, naming both platforms.
#[test]
fn an_export_for_another_platform_is_refused() {
    let Some((plugin, exports)) = setup() else { return };
    let folder = exports.join("cuda_only");
    let exported = Exported::parse(&std::fs::read(folder.join("model.jaxexport")).unwrap()).unwrap();
    let client = Client::new(&plugin).unwrap();
    let exe = client.compile(exported.module(), "mlir").unwrap();
    let err = exported.execute(&exe, &arrays(&folder, "in", 2)).unwrap_err();
    assert!(matches!(err, ClientError::Input { .. }), "{err}");
    assert!(err.to_string().starts_with("the program was exported for cuda, not for cpu"), "{err}");
}

/// A service that reloads its model: the export parsed, compiled, run and dropped
/// again and again, every other executable dropped on another thread than the one
/// that compiled it, each run with JAX's results (1000 rounds kept the process's
/// memory flat when measured; this checks that nothing fails or changes).
#[test]
fn executables_compiled_and_dropped_in_a_loop_and_on_other_threads() {
    let Some((plugin, exports)) = setup() else { return };
    let folder = exports.join("kepler_fwd");
    let bytes = std::fs::read(folder.join("model.jaxexport")).unwrap();
    let inputs = arrays(&folder, "in", 2);
    let expected = arrays(&folder, "expected", 2);
    let client = Client::new(&plugin).unwrap();
    for round in 0..40 {
        let exported = Exported::parse(&bytes).unwrap();
        let exe = client.compile(exported.module(), "mlir").unwrap();
        assert_eq!(exported.execute(&exe, &inputs).unwrap(), expected, "round {round}");
        if round % 2 == 0 {
            std::thread::scope(|s| {
                s.spawn(move || drop(exe));
            });
        }
    }
    for _ in 0..4 {
        let client = Client::new(&plugin).unwrap();
        let exported = Exported::parse(&bytes).unwrap();
        let exe = client.compile(exported.module(), "mlir").unwrap();
        assert_eq!(exported.execute(&exe, &inputs).unwrap(), expected);
        drop(exe);
        std::thread::spawn(move || drop(client)).join().unwrap();
    }
}
