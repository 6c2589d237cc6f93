//! The program file: a `jax.export` serialization, StableHLO bytecode or text.

use xla_ffi_pjrt::{ArrayType, Exported};

/// The magic of MLIR bytecode (StableHLO portable artifacts).
const MLIR_BYTECODE_MAGIC: &[u8] = b"ML\xefR";

/// What the runner compiles and how it calls it.
#[derive(Debug)]
pub struct Model {
    /// StableHLO (bytecode or text), for PJRT's `"mlir"` format.
    pub code: Vec<u8>,
    /// The inputs: `jax.export`'s (all of the function's flattened arguments), or
    /// those of `main` in StableHLO text; `None` for bytecode and a text whose
    /// signature the runner does not read.
    pub in_avals: Option<Vec<ArrayType>>,
    /// The serialization, for a `jax.export` file: it makes the module's
    /// arguments (the platform index, the inputs the module kept).
    pub exported: Option<Exported>,
    /// How the file was read: `jax.export`, `StableHLO bytecode` or `StableHLO text`.
    pub kind: &'static str,
}

/// The magic of a NumPy `.npy` file (an input given where the program goes).
const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// Reads a program from its file's bytes.
pub fn parse(bytes: Vec<u8>) -> Result<Model, String> {
    if bytes.is_empty() {
        return Err("the file is empty (0 bytes); expected a jax.export serialization or StableHLO".into());
    }
    if bytes.starts_with(NPY_MAGIC) {
        return Err("a .npy file, not a program: the MODEL file comes first, before the INPUT.npy files \
                    (xla-ffi-run --plugin PLUGIN.so MODEL [INPUT.npy]... --out DIR)"
            .into());
    }
    if bytes.starts_with(MLIR_BYTECODE_MAGIC) {
        return Ok(raw(bytes, "StableHLO bytecode"));
    }
    if let Ok(text) = std::str::from_utf8(&bytes) {
        if text.contains("func.func") || text.trim_start().starts_with("module") {
            let in_avals = crate::signature::main_inputs(text);
            return Ok(Model { in_avals, ..raw(bytes, "StableHLO text") });
        }
    }
    let exported = Exported::parse(&bytes)
        .map_err(|e| format!("{e}; nor is it StableHLO bytecode (which starts with 'ML\\xefR') or StableHLO text"))?;
    Ok(Model {
        code: exported.module().to_vec(),
        in_avals: Some(exported.in_types().to_vec()),
        exported: Some(exported),
        kind: "jax.export",
    })
}

fn raw(code: Vec<u8>, kind: &'static str) -> Model {
    Model { code, in_avals: None, exported: None, kind }
}

/// The StableHLO version of a bytecode module, from the producer string that
/// StableHLO's portable artifacts carry (`StableHLO_v1.18.0`).
pub fn stablehlo_version(code: &[u8]) -> Option<Vec<i64>> {
    if !code.starts_with(MLIR_BYTECODE_MAGIC) {
        return None;
    }
    let head = &code[..code.len().min(256)];
    let at = head.windows(11).position(|w| w == b"StableHLO_v")? + 11;
    let end = head[at..].iter().position(|&b| !(b.is_ascii_digit() || b == b'.'))? + at;
    let text = std::str::from_utf8(&head[at..end]).ok()?;
    text.split('.').map(|p| p.parse().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tells_the_formats_apart() {
        assert_eq!(parse(b"ML\xefR\x06StableHLO_v1.9.3\0".to_vec()).unwrap().kind, "StableHLO bytecode");
        assert_eq!(parse(b"module @jit_f {\n func.func public @main() {}}".to_vec()).unwrap().kind, "StableHLO text");
        let err = parse(b"\x01\x02garbage".to_vec()).unwrap_err();
        assert!(err.contains("not a jax.export serialization"), "{err}");
    }

    #[test]
    fn an_npy_file_given_as_the_model_says_the_order() {
        // It read as a malformed jax.export serialization: "offset 1297436307 is past the end".
        let err = parse(b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', ...}".to_vec()).unwrap_err();
        assert!(err.starts_with("a .npy file, not a program: the MODEL file comes first"), "{err}");
        assert!(!err.contains("offset"), "{err}");
    }

    #[test]
    fn an_empty_file_is_called_empty() {
        let err = parse(Vec::new()).unwrap_err();
        assert!(err.starts_with("the file is empty (0 bytes); expected a jax.export"), "{err}");
    }

    #[test]
    fn reads_the_stablehlo_version() {
        assert_eq!(stablehlo_version(b"ML\xefR\x06StableHLO_v1.18.0\0..."), Some(vec![1, 18, 0]));
        assert_eq!(stablehlo_version(b"module {}"), None);
    }
}
