//! The program file: a `jax.export` serialization, StableHLO bytecode or text.

use crate::flatbuf::Table;
use xla_ffi_pjrt::{ArrayType, ElementType};

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
    /// Which of the inputs the module takes (the others were unused and dropped).
    pub kept_inputs: Option<Vec<usize>>,
    /// The platforms the module was exported for; with more than one, the module
    /// takes the index of the platform as a first `i32` argument.
    pub platforms: Vec<String>,
    /// How the file was read: `jax.export`, `StableHLO bytecode` or `StableHLO text`.
    pub kind: &'static str,
}

/// Reads a program from its file's bytes.
pub fn parse(bytes: Vec<u8>) -> Result<Model, String> {
    if bytes.starts_with(MLIR_BYTECODE_MAGIC) {
        return Ok(raw(bytes, "StableHLO bytecode"));
    }
    if let Ok(text) = std::str::from_utf8(&bytes) {
        if text.contains("func.func") || text.trim_start().starts_with("module") {
            let in_avals = crate::signature::main_inputs(text);
            return Ok(Model { in_avals, ..raw(bytes, "StableHLO text") });
        }
    }
    parse_export(&bytes).map_err(|e| {
        format!(
            "not a jax.export serialization ({e}), nor StableHLO bytecode (which starts with \
             'ML\\xefR'), nor StableHLO text"
        )
    })
}

fn raw(code: Vec<u8>, kind: &'static str) -> Model {
    Model { code, in_avals: None, kept_inputs: None, platforms: Vec::new(), kind }
}

/// `jax.export`'s `DType` numbering (`jax/_src/export/serialization.fbs`).
fn dtype(code: u64) -> Result<ElementType, String> {
    Ok(match code {
        0 => ElementType::Pred,
        1 => ElementType::S8,
        2 => ElementType::S16,
        3 => ElementType::S32,
        4 => ElementType::S64,
        5 => ElementType::U8,
        6 => ElementType::U16,
        7 => ElementType::U32,
        8 => ElementType::U64,
        9 => ElementType::F16,
        10 => ElementType::F32,
        11 => ElementType::F64,
        12 => ElementType::C64,
        13 => ElementType::C128,
        14 => ElementType::BF16,
        other => return Err(format!("dtype code {other} (fp8, int4 or a key type) is not supported")),
    })
}

fn aval(table: &Table<'_>) -> Result<ArrayType, String> {
    if table.uint(0, 1, 0)? != 0 {
        return Err("a token input or output (ordered effects) is not supported".into());
    }
    let dims = table
        .strings(1)?
        .iter()
        .map(|d| {
            d.trim()
                .parse::<i64>()
                .map_err(|_| format!("dimension '{d}' is symbolic: shape-polymorphic exports are not supported"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ArrayType { element_type: dtype(table.uint(2, 1, 0)?)?, dims })
}

/// Field numbers of the `Exported` table.
mod field {
    pub const IN_AVALS: usize = 3;
    pub const NR_DEVICES_SHORT: usize = 6;
    pub const PLATFORMS: usize = 9;
    pub const ORDERED_EFFECTS: usize = 10;
    pub const MLIR_MODULE_SERIALIZED: usize = 13;
    pub const MODULE_KEPT_VAR_IDX: usize = 15;
    pub const NR_DEVICES: usize = 18;
    pub const UNIQUE_AVALS: usize = 19;
    pub const IN_AVALS_IDXS: usize = 22;
}

fn parse_export(bytes: &[u8]) -> Result<Model, String> {
    let root = Table::root(bytes)?;
    let code = root.bytes(field::MLIR_MODULE_SERIALIZED)?.ok_or("no mlir_module_serialized")?;
    let devices = root.uint(field::NR_DEVICES, 4, 0)?.max(root.uint(field::NR_DEVICES_SHORT, 2, 0)?);
    if devices > 1 {
        return Err(format!("it was exported for {devices} devices; the runner runs one"));
    }
    if !root.tables(field::ORDERED_EFFECTS)?.is_empty() {
        return Err("it has ordered effects (token arguments), which the runner does not pass".into());
    }
    let idxs = root.uints(field::IN_AVALS_IDXS, 4)?;
    let in_avals = if idxs.is_empty() {
        root.tables(field::IN_AVALS)?.iter().map(aval).collect::<Result<Vec<_>, _>>()?
    } else {
        let unique = root.tables(field::UNIQUE_AVALS)?;
        idxs.iter()
            .map(|&i| unique.get(i as usize).ok_or_else(|| format!("aval index {i} out of range")).and_then(aval))
            .collect::<Result<Vec<_>, _>>()?
    };
    let kept: Vec<usize> = root.uints(field::MODULE_KEPT_VAR_IDX, 2)?.into_iter().map(|i| i as usize).collect();
    if let Some(&bad) = kept.iter().find(|&&i| i >= in_avals.len()) {
        return Err(format!("kept input {bad} of {} inputs", in_avals.len()));
    }
    Ok(Model {
        code: code.to_vec(),
        in_avals: Some(in_avals),
        kept_inputs: Some(kept),
        platforms: root.strings(field::PLATFORMS)?,
        kind: "jax.export",
    })
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
    fn reads_the_stablehlo_version() {
        assert_eq!(stablehlo_version(b"ML\xefR\x06StableHLO_v1.18.0\0..."), Some(vec![1, 18, 0]));
        assert_eq!(stablehlo_version(b"module {}"), None);
    }
}
