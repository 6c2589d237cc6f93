//! Command-line arguments.

use std::path::PathBuf;

pub const HELP: &str = "\
xla-ffi-run: run a jax.export'ed program on a PJRT plugin, with the XLA FFI handlers
of Rust libraries, without Python.

USAGE:
    xla-ffi-run --plugin PLUGIN.so [--handlers LIB.so]... MODEL [INPUT.npy]... --out DIR

ARGUMENTS:
    MODEL             The program: the bytes that jax.export's Exported.serialize() wrote,
                      or StableHLO as MLIR bytecode or text (jax.jit(f).lower(...).as_text()).
    INPUT.npy         One .npy file per input, in the order of the function's flattened
                      arguments. Each is checked (element type and shape) against the
                      exported input of a jax.export file, or the argument of main in
                      StableHLO text; for bytecode the plugin checks only the byte size.

OPTIONS:
    --plugin PATH     A PJRT plugin: a shared library exporting GetPjrtApi (for example
                      pjrt_c_api_cpu_plugin.so of the PyPI package lammps-jax-pjrt-cpu).
    --handlers PATH   A Python-free library of xla-ffi handlers (a cdylib exporting the
                      handler registry); its targets are registered into the plugin before
                      compiling. Repeatable.
    --out DIR         Where the results go: DIR/out0.npy, DIR/out1.npy, ... (made if absent).
    -h, --help        This text.
    -V, --version     The version.

EXIT STATUS:
    0  the program ran and its results were written.
    1  an error, reported on stderr with its cause:
         - the plugin cannot be loaded, or has no GetPjrtApi symbol;
         - a --handlers library cannot be loaded or lacks the handler registry;
         - the plugin has no FFI extension, or its FFI API is older than the handlers need;
         - the program calls a target that no --handlers library registers (named, with
           the list of the registered targets);
         - the StableHLO is newer than the plugin reads (both versions are said; the text
           form, jax.jit(f).lower(...).as_text(), may load where the bytecode does not);
         - wrong inputs: how many, or an input's element type or shape (named with what
           was expected and what was got); unreadable .npy files;
         - a handler's or PJRT's error while compiling or running (its code and message).
    2  bad command-line arguments.
";

/// The parsed command line.
#[derive(Debug, Default)]
pub struct Args {
    pub plugin: PathBuf,
    pub handlers: Vec<PathBuf>,
    pub model: PathBuf,
    pub inputs: Vec<PathBuf>,
    pub out: PathBuf,
}

/// What the command line asks for.
pub enum Command {
    Run(Args),
    Help,
    Version,
}

/// Parses the arguments after the program name.
pub fn parse(argv: impl IntoIterator<Item = String>) -> Result<Command, String> {
    let mut plugin = None;
    let mut out = None;
    let mut handlers = Vec::new();
    let mut positional = Vec::new();
    let mut argv = argv.into_iter();
    while let Some(arg) = argv.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        let mut value = |name: &str| {
            inline.clone().or_else(|| argv.next()).map(PathBuf::from).ok_or_else(|| format!("{name} needs a value"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "--plugin" => plugin = Some(value("--plugin")?),
            "--handlers" => handlers.push(value("--handlers")?),
            "--out" => out = Some(value("--out")?),
            "--" => positional.extend(argv.by_ref().map(PathBuf::from)),
            f if f.starts_with('-') && f.len() > 1 => return Err(format!("unknown option {f}")),
            _ => positional.push(PathBuf::from(arg)),
        }
    }
    let plugin = plugin.ok_or("--plugin is required")?;
    let out = out.ok_or("--out is required")?;
    let mut positional = positional.into_iter();
    let model = positional.next().ok_or("the MODEL file is required")?;
    Ok(Command::Run(Args { plugin, handlers, model, inputs: positional.collect(), out }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> Result<Args, String> {
        match parse(args.iter().map(|s| s.to_string()))? {
            Command::Run(a) => Ok(a),
            _ => Err("not a run".into()),
        }
    }

    #[test]
    fn parses_the_documented_form() {
        let a = run(&["--plugin", "p.so", "--handlers", "a.so", "--handlers=b.so", "m.bin", "x.npy", "--out", "o"])
            .unwrap();
        assert_eq!(a.plugin, PathBuf::from("p.so"));
        assert_eq!(a.handlers, vec![PathBuf::from("a.so"), PathBuf::from("b.so")]);
        assert_eq!(a.model, PathBuf::from("m.bin"));
        assert_eq!(a.inputs, vec![PathBuf::from("x.npy")]);
        assert_eq!(a.out, PathBuf::from("o"));
    }

    #[test]
    fn says_what_is_missing() {
        assert!(run(&["m.bin", "--out", "o"]).unwrap_err().contains("--plugin"));
        assert!(run(&["--plugin", "p", "m.bin"]).unwrap_err().contains("--out"));
        assert!(run(&["--plugin", "p", "--out", "o"]).unwrap_err().contains("MODEL"));
        assert!(run(&["--plugin"]).unwrap_err().contains("needs a value"));
        assert!(run(&["--plugn", "p"]).unwrap_err().contains("unknown option --plugn"));
    }
}
