//! One run: load, register, check the inputs, compile, execute, write.

use std::path::Path;

use xla_ffi_pjrt::{Client, ClientError, HostArray, Plugin};

use crate::cli::Args;
use crate::model::{self, Model};
use crate::{handlers, npy};
use xla_ffi_pjrt::ArrayType;

fn read(path: &Path, what: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {what} {}: {e}", path.display()))
}

fn version(v: &[i64]) -> String {
    v.iter().map(i64::to_string).collect::<Vec<_>>().join(".")
}

/// Runs the program as the arguments say.
pub fn run(args: &Args) -> Result<(), String> {
    // Before any work: --out naming a file would fail only after the run.
    if args.out.exists() && !args.out.is_dir() {
        return Err(format!("--out {}: not a folder (a file of that name exists)", args.out.display()));
    }
    // SAFETY: the PJRT plugin the user named with --plugin: running it is what the
    // runner is for (`load`'s contract).
    #[allow(unsafe_code)]
    let plugin = unsafe { Plugin::load(&args.plugin) }.map_err(|e| e.to_string())?;
    let registered = handlers::register_all(&plugin, &args.plugin, &args.handlers)?;
    let model = model::parse(read(&args.model, "the model")?).map_err(|e| format!("{}: {e}", args.model.display()))?;
    let inputs = args
        .inputs
        .iter()
        .map(|p| {
            let mut file = std::fs::File::open(p).map_err(|e| format!("cannot read input {}: {e}", p.display()))?;
            npy::read(&mut std::io::BufReader::new(&mut file)).map_err(|e| format!("input {}: {e}", p.display()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(avals) = &model.in_avals {
        check_inputs(args, avals, &inputs)?;
    }
    check_stablehlo_version(&plugin, &model)?;

    let client = Client::new(&plugin).map_err(|e| e.to_string())?;
    let executable = client
        .compile(&model.code, "mlir")
        .map_err(|e| explain_compile_error(&args.model, e, &model, &plugin, &registered))?;
    if model.in_avals.is_none() {
        // Bytecode, or text whose `main` the runner does not read: the module
        // takes the inputs as given (no platform index, none dropped), so they
        // are checked against the compiled program's parameters, which the
        // plugin reports (PJRT_Executable_OptimizedProgram) where it can.
        if let Some(parameters) = executable.parameters() {
            check_inputs(args, parameters, &inputs)?;
        }
    }
    let results = match &model.exported {
        // The platform index (several platforms), then the inputs the module kept.
        Some(exported) => exported.execute(&executable, &inputs),
        None => executable.execute(&inputs),
    }
    .map_err(|e| e.to_string())?;

    std::fs::create_dir_all(&args.out).map_err(|e| format!("cannot make {}: {e}", args.out.display()))?;
    for (i, result) in results.iter().enumerate() {
        let path = args.out.join(format!("out{i}.npy"));
        std::fs::write(&path, npy::serialize(result)).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        let aval = ArrayType { element_type: result.element_type(), dims: result.dims().to_vec() };
        println!("{} {aval}", path.display());
    }
    remove_stale_results(&args.out, results.len())
}

/// Removes the runner's result files of an earlier run that this one did not
/// write (`outK.npy` for K >= `count`), so that DIR's `out*.npy` are this run's
/// results only. Other files are left alone.
fn remove_stale_results(out: &Path, count: usize) -> Result<(), String> {
    let entries = std::fs::read_dir(out).map_err(|e| format!("cannot list {}: {e}", out.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(index) = name.to_str().and_then(result_index) else { continue };
        if index >= count {
            let path = entry.path();
            std::fs::remove_file(&path)
                .map_err(|e| format!("cannot remove {}, a result of an earlier run: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// K of a file named `outK.npy` as the runner writes it (`out0.npy`, `out12.npy`;
/// not `out01.npy`).
fn result_index(name: &str) -> Option<usize> {
    let digits = name.strip_prefix("out")?.strip_suffix(".npy")?;
    let index: usize = digits.parse().ok()?;
    (index.to_string() == digits).then_some(index)
}

/// `1 input`, `2 inputs`: a count with its noun, singular for one.
fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The inputs against `jax.export`'s `in_avals`: the count, then each one's
/// element type and shape.
fn check_inputs(args: &Args, avals: &[ArrayType], inputs: &[HostArray]) -> Result<(), String> {
    if avals.len() != inputs.len() {
        let list: Vec<String> = avals.iter().map(ArrayType::to_string).collect();
        return Err(format!(
            "{} takes {} ({}), got {}",
            args.model.display(),
            counted(avals.len(), "input"),
            list.join(", "),
            counted(inputs.len(), ".npy file")
        ));
    }
    for (i, ((aval, input), path)) in avals.iter().zip(inputs).zip(&args.inputs).enumerate() {
        let got = ArrayType { element_type: input.element_type(), dims: input.dims().to_vec() };
        if *aval != got {
            return Err(format!("input {i} ({}): expected {aval}, got {got}", path.display()));
        }
    }
    Ok(())
}

/// Refuses bytecode newer than the plugin reads, before the plugin does (its own
/// message does not name the versions).
fn check_stablehlo_version(plugin: &Plugin, model: &Model) -> Result<(), String> {
    let (Some(module), Some((_, current))) = (model::stablehlo_version(&model.code), plugin.stablehlo_versions())
    else {
        return Ok(());
    };
    if module > current {
        return Err(too_new(&module, &version(&current)));
    }
    Ok(())
}

fn too_new(module: &[i64], current: &str) -> String {
    format!(
        "the program is StableHLO {} bytecode, newer than this plugin reads (StableHLO {} at most); \
         use a newer plugin, or give the program as text (jax.jit(f).lower(...).as_text()), which \
         may load",
        version(module),
        current
    )
}

/// Names a missing target and lists the registered ones; explains a refusal of
/// the bytecode's version.
fn explain_compile_error(
    path: &Path,
    err: ClientError,
    model: &Model,
    plugin: &Plugin,
    registered: &handlers::Registered,
) -> String {
    if let ClientError::UnknownTarget { target, message } = &err {
        let list = if registered.targets.is_empty() {
            "none (no --handlers library given)".to_string()
        } else {
            registered.targets.join(", ")
        };
        return format!(
            "the program calls target '{target}', which no --handlers library registers; \
             registered targets: {list}; give the library that exports it with --handlers LIB.so \
             (a Python-free cdylib of handlers, built with xla_ffi::export_registry!)\n  (plugin: {message})"
        );
    }
    let text = err.to_string();
    // The plugin says "this could indicate forward incompatibility" for any
    // bytecode it cannot parse: blame the version only when it is newer (or the
    // plugin does not say what it reads); a truncated or corrupt file is not.
    if text.contains("forward incompatib") || text.contains("newer than") {
        if let Some(module) = model::stablehlo_version(&model.code) {
            match plugin.stablehlo_versions() {
                Some((_, current)) if module <= current => {}
                Some((_, current)) => return format!("{}\n  (plugin: {text})", too_new(&module, &version(&current))),
                None => return format!("{}\n  (plugin: {text})", too_new(&module, "?")),
            }
        }
    }
    format!("cannot compile {} ({}, {} bytes): {text}", path.display(), model.kind, model.code.len())
}

#[cfg(test)]
mod tests {
    #[test]
    fn result_index_reads_the_runners_names_only() {
        use super::result_index;
        assert_eq!(result_index("out0.npy"), Some(0));
        assert_eq!(result_index("out12.npy"), Some(12));
        for other in ["out01.npy", "out.npy", "out-1.npy", "out+1.npy", "outx.npy", "out1.npz", "xout1.npy"] {
            assert_eq!(result_index(other), None, "{other}");
        }
    }

    #[test]
    fn counts_take_the_singular_for_one() {
        use super::counted;
        assert_eq!(counted(1, "input"), "1 input");
        assert_eq!(counted(0, ".npy file"), "0 .npy files");
        assert_eq!(counted(2, "input"), "2 inputs");
    }
}
