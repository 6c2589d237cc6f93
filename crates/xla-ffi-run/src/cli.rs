//! Command-line arguments.

use std::ffi::{OsStr, OsString};
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
                      arguments (jax.tree.leaves: a dict's values by sorted key, not in
                      the order written). Each is checked (element type and shape)
                      against the exported input of a jax.export file, or the argument of main in
                      StableHLO text; for bytecode, against the compiled program's
                      parameters as the plugin reports them (PJRT's optimized program).

OPTIONS:
    --plugin PATH     A PJRT plugin: a shared library exporting GetPjrtApi (for example
                      pjrt_c_api_cpu_plugin.so of the PyPI package lammps-jax-pjrt-cpu).
    --handlers PATH   A Python-free library of xla-ffi handlers (a cdylib exporting the
                      handler registry); its targets are registered into the plugin before
                      compiling. Repeatable.
    --out DIR         Where the results go: DIR/out0.npy, DIR/out1.npy, ... (made if absent),
                      the outputs flattened the same way.
                      After a run, DIR holds this run's results only: an outK.npy of an
                      earlier run with more results is removed (other files are kept).
                      On an error, DIR is not changed.
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
         - a jax.export file made for other platforms than the plugin's (both named),
           or one that cannot run here (symbolic shapes, several devices, ordered
           effects);
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

/// `--flag=value` split at its first `=` (the value may be any path, also one
/// that is not UTF-8); `None` for anything else.
fn split_inline(arg: &OsStr) -> Option<(String, OsString)> {
    let bytes = arg.as_encoded_bytes();
    let at = bytes.iter().position(|&b| b == b'=')?;
    let flag = std::str::from_utf8(&bytes[..at]).ok().filter(|f| f.starts_with("--"))?;
    #[cfg(unix)]
    let value = {
        use std::os::unix::ffi::OsStrExt;
        OsStr::from_bytes(&bytes[at + 1..]).to_os_string()
    };
    // Windows: split the UTF-16 form at the same `=` (its encoded bytes cannot be
    // turned back into an `OsStr` safely, and a lossy conversion would change a
    // file name holding an unpaired surrogate).
    #[cfg(windows)]
    let value = {
        use std::os::windows::ffi::{OsStrExt, OsStringExt};
        let wide: Vec<u16> = arg.encode_wide().collect();
        let eq = wide.iter().position(|&w| w == u16::from(b'='))?;
        OsString::from_wide(&wide[eq + 1..])
    };
    #[cfg(not(any(unix, windows)))]
    let value = OsString::from(String::from_utf8_lossy(&bytes[at + 1..]).into_owned());
    Some((flag.to_string(), value))
}

/// Parses the arguments after the program name. They are `OsString`s: a path
/// need not be UTF-8 (`std::env::args` would panic on one).
pub fn parse(argv: impl IntoIterator<Item = OsString>) -> Result<Command, String> {
    let mut plugin = None;
    let mut out = None;
    let mut handlers = Vec::new();
    let mut positional = Vec::new();
    let mut argv = argv.into_iter();
    while let Some(arg) = argv.next() {
        let (flag, inline) = match split_inline(&arg) {
            Some((f, v)) => (f, Some(v)),
            None => (arg.to_string_lossy().into_owned(), None),
        };
        let mut value = |name: &str| {
            inline.clone().or_else(|| argv.next()).map(PathBuf::from).ok_or_else(|| format!("{name} needs a value"))
        };
        let mut once = |slot: &mut Option<PathBuf>, name: &str| -> Result<(), String> {
            let v = value(name)?;
            if let Some(first) = slot.replace(v) {
                return Err(format!("{name} is given twice (first {})", first.display()));
            }
            Ok(())
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "-V" | "--version" => return Ok(Command::Version),
            "--plugin" => once(&mut plugin, "--plugin")?,
            "--handlers" => handlers.push(value("--handlers")?),
            "--out" => once(&mut out, "--out")?,
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
        match parse(args.iter().map(OsString::from))? {
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

    /// Before the fix the runner read its arguments with `std::env::args`, which
    /// panics (exit 101) on an argument that is not UTF-8; a path may be any bytes.
    #[cfg(unix)]
    #[test]
    fn paths_need_not_be_utf8() {
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(b"in\xff.npy".to_vec());
        let argv = [OsString::from("--plugin"), OsString::from("p.so"), "m.bin".into(), odd.clone()];
        let mut out = OsString::from("--out=o\u{e9}");
        out.push(OsString::from_vec(b"\xfe".to_vec()));
        let Command::Run(a) = parse(argv.into_iter().chain([out])).unwrap() else { panic!("not a run") };
        assert_eq!(a.inputs, vec![PathBuf::from(odd)]);
        assert_eq!(a.out.as_os_str().as_encoded_bytes(), b"o\xc3\xa9\xfe");
    }

    /// A Windows path is UTF-16 and may hold an unpaired surrogate, which the
    /// lossy conversion once used for `--flag=value` turned into U+FFFD.
    #[cfg(windows)]
    #[test]
    fn windows_paths_need_not_be_unicode() {
        use std::os::windows::ffi::{OsStrExt, OsStringExt};
        let wide = |s: &str, tail: &[u16]| {
            OsString::from_wide(&s.encode_utf16().chain(tail.iter().copied()).collect::<Vec<_>>())
        };
        let argv =
            [OsString::from("--plugin"), OsString::from("p.dll"), "m.bin".into(), wide("--out=C:\\o\u{e9}", &[0xD800])];
        let Command::Run(a) = parse(argv).unwrap() else { panic!("not a run") };
        let got: Vec<u16> = a.out.as_os_str().encode_wide().collect();
        assert_eq!(got, "C:\\o\u{e9}".encode_utf16().chain([0xD800]).collect::<Vec<_>>());
    }

    #[test]
    fn an_option_given_twice_is_an_error() {
        let e = run(&["--plugin", "a.so", "--plugin=b.so", "m.bin", "--out", "o"]).unwrap_err();
        assert_eq!(e, "--plugin is given twice (first a.so)");
        assert!(run(&["--plugin", "a.so", "m.bin", "--out", "o", "--out", "p"])
            .unwrap_err()
            .contains("--out is given twice"));
    }
}
