//! Programs serialized by `jax.export` (`Exported.serialize()`, a `.jaxexport`
//! file): the StableHLO module inside, the inputs the function takes, and the
//! arguments the module is called with.
//!
//! [`Client::compile`](crate::Client::compile) takes StableHLO only; a
//! serialization is a FlatBuffer around it, which the plugin cannot parse. And the
//! module's arguments are not always the function's: an input the function does
//! not use is dropped from the module, and an export for several platforms
//! (`platforms=("cpu", "cuda")`) takes the platform's index first.
//! [`Exported`] reads the serialization and makes the module's arguments from
//! the function's inputs:
//!
//! ```no_run
//! use xla_ffi_pjrt::{Client, Exported, HostArray, Plugin};
//!
//! # fn inputs() -> Vec<HostArray> { Vec::new() }
//! // SAFETY: a PJRT plugin (loading it runs its code: `Plugin::load`'s `# Safety`).
//! let plugin = unsafe { Plugin::load("pjrt_c_api_cpu_plugin.so") }?;
//! let client = Client::new(&plugin)?;
//! let exported = Exported::parse(&std::fs::read("orbit.jaxexport")?)?;
//! let executable = client.compile(exported.module(), "mlir")?;
//! // The function's flattened arguments, as `exported.in_types()` lists them.
//! let results = exported.execute(&executable, &inputs())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Refused by [`Exported::parse`], with a message: shape-polymorphic exports
//! (symbolic dimensions), exports for more than one device, programs with ordered
//! effects (tokens), and element types that [`ElementType`] lacks (fp8, int4,
//! PRNG keys).

mod flatbuf;

use flatbuf::Table;

use crate::client::{ArrayType, ClientError, ElementType, Executable, HostArray};

/// A `jax.export` serialization, read.
#[derive(Clone, PartialEq, Eq)]
pub struct Exported {
    module: Vec<u8>,
    in_types: Vec<ArrayType>,
    kept_inputs: Vec<usize>,
    platforms: Vec<String>,
}

impl std::fmt::Debug for Exported {
    /// The inputs and platforms; the module by its size, not its bytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let in_types: Vec<String> = self.in_types.iter().map(ArrayType::to_string).collect();
        f.debug_struct("Exported")
            .field("module", &format_args!("<{} bytes>", self.module.len()))
            .field("in_types", &in_types)
            .field("kept_inputs", &self.kept_inputs)
            .field("platforms", &self.platforms)
            .finish()
    }
}

/// Why a serialization is refused: it is not one (truncated, another format), or
/// it is one that this crate does not run.
enum Bad {
    Malformed(String),
    Unsupported(String),
}

impl From<String> for Bad {
    fn from(message: String) -> Self {
        Bad::Malformed(message)
    }
}

impl From<&str> for Bad {
    fn from(message: &str) -> Self {
        Bad::Malformed(message.to_string())
    }
}

/// `jax.export`'s `DType` numbering (`jax/_src/export/serialization.fbs`).
fn dtype(code: u64) -> Result<ElementType, Bad> {
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
        other => {
            return Err(Bad::Unsupported(format!("dtype code {other} (fp8, int4 or a key type) is not supported")))
        }
    })
}

fn aval(table: &Table<'_>) -> Result<ArrayType, Bad> {
    if table.uint(0, 1, 0)? != 0 {
        return Err(Bad::Unsupported("a token input or output (ordered effects) is not supported".into()));
    }
    let dims = table
        .strings(1)?
        .iter()
        .map(|d| {
            d.trim().parse::<i64>().map_err(|_| {
                Bad::Unsupported(format!(
                    "dimension '{d}' is symbolic: shape-polymorphic exports are not supported (export \
                     with concrete shapes, one export per shape)"
                ))
            })
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

fn parse(bytes: &[u8]) -> Result<Exported, Bad> {
    let root = Table::root(bytes)?;
    let code = root.bytes(field::MLIR_MODULE_SERIALIZED)?.ok_or("no mlir_module_serialized")?;
    let devices = root.uint(field::NR_DEVICES, 4, 0)?.max(root.uint(field::NR_DEVICES_SHORT, 2, 0)?);
    if devices > 1 {
        return Err(Bad::Unsupported(format!("it was exported for {devices} devices; one device is supported")));
    }
    if !root.tables(field::ORDERED_EFFECTS)?.is_empty() {
        return Err(Bad::Unsupported("it has ordered effects (token arguments), which are not supported".into()));
    }
    let idxs = root.uints(field::IN_AVALS_IDXS, 4)?;
    let in_types = if idxs.is_empty() {
        root.tables(field::IN_AVALS)?.iter().map(aval).collect::<Result<Vec<_>, _>>()?
    } else {
        let unique = root.tables(field::UNIQUE_AVALS)?;
        idxs.iter()
            .map(|&i| {
                unique.get(i as usize).ok_or_else(|| format!("aval index {i} out of range").into()).and_then(aval)
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    let kept_inputs: Vec<usize> = root.uints(field::MODULE_KEPT_VAR_IDX, 2)?.into_iter().map(|i| i as usize).collect();
    if let Some(&bad) = kept_inputs.iter().find(|&&i| i >= in_types.len()) {
        return Err(format!("kept input {bad} of {} inputs", in_types.len()).into());
    }
    let mut seen = vec![false; in_types.len()];
    if let Some(&twice) = kept_inputs.iter().find(|&&i| std::mem::replace(&mut seen[i], true)) {
        return Err(format!("input {twice} is kept twice").into());
    }
    Ok(Exported { module: code.to_vec(), in_types, kept_inputs, platforms: root.strings(field::PLATFORMS)? })
}

impl Exported {
    /// Reads the bytes of `jax.export.Exported.serialize()`. A file that is not
    /// one (StableHLO bytecode or text, a truncated file) is a
    /// [`ClientError::Program`] naming what was wrong, as is an export this
    /// crate does not run (see the [module](self) documentation).
    pub fn parse(bytes: &[u8]) -> Result<Exported, ClientError> {
        parse(bytes).map_err(|bad| ClientError::Program {
            message: match bad {
                Bad::Malformed(e) => format!("not a jax.export serialization ({e})"),
                Bad::Unsupported(e) => format!("a jax.export serialization that cannot run here: {e}"),
            },
        })
    }

    /// The StableHLO module (MLIR bytecode), for [`Client::compile`](crate::Client::compile)
    /// with format `"mlir"`.
    pub fn module(&self) -> &[u8] {
        &self.module
    }

    /// The types of the function's inputs (its flattened arguments, `in_avals`),
    /// in order: what [`Exported::execute`] takes.
    pub fn in_types(&self) -> &[ArrayType] {
        &self.in_types
    }

    /// The inputs the module takes, as indices into [`Exported::in_types`] (the
    /// others were unused and dropped from it).
    pub fn kept_inputs(&self) -> &[usize] {
        &self.kept_inputs
    }

    /// The platforms it was exported for (`["cpu"]`, `["cpu", "cuda"]`).
    pub fn platforms(&self) -> &[String] {
        &self.platforms
    }

    /// Refuses inputs that are not [`Exported::in_types`]: their count, then each
    /// one's element type and dimensions, naming the input.
    pub fn check_inputs(&self, inputs: &[HostArray]) -> Result<(), ClientError> {
        if self.in_types.len() != inputs.len() {
            let list: Vec<String> = self.in_types.iter().map(ArrayType::to_string).collect();
            return Err(ClientError::Input {
                message: format!(
                    "the exported function takes {} ({}), got {}",
                    crate::error::counted(self.in_types.len(), "input"),
                    list.join(", "),
                    inputs.len()
                ),
            });
        }
        for (i, (expected, input)) in self.in_types.iter().zip(inputs).enumerate() {
            let got = ArrayType { element_type: input.element_type(), dims: input.dims().to_vec() };
            if *expected != got {
                return Err(ClientError::Input { message: format!("input {i}: expected {expected}, got {got}") });
            }
        }
        Ok(())
    }

    /// The module's arguments for `executable` (compiled from [`Exported::module`]):
    /// the platform's index first when it was exported for several platforms
    /// (an `int32` scalar, or `int64` where the compiled program takes that, as an
    /// export made with `jax_enable_x64` does), then the inputs the module kept.
    /// Checks the inputs first ([`Exported::check_inputs`]); the executable's
    /// platform must be one it was exported for (as `jax.export`'s `call`
    /// checks), else a [`ClientError::Input`] names both.
    pub fn module_arguments(
        &self,
        executable: &Executable<'_>,
        inputs: &[HostArray],
    ) -> Result<Vec<HostArray>, ClientError> {
        self.check_inputs(inputs)?;
        // As `jax.export`'s `call` does: a module lowered for another platform is
        // not run (it may call that platform's targets, or compute otherwise).
        let platform = executable.client().platform_name();
        let index = self
            .platforms
            .iter()
            .position(|p| p.eq_ignore_ascii_case(platform) || (p == "cpu" && platform.eq_ignore_ascii_case("host")))
            .ok_or_else(|| ClientError::Input {
                message: format!(
                    "the program was exported for {}, not for {platform}; export it with \
                     platforms=(\"{platform}\", ...)",
                    self.platforms.join(", ")
                ),
            })?;
        let mut out = Vec::with_capacity(self.kept_inputs.len() + 1);
        if self.platforms.len() > 1 {
            let wide = executable
                .parameters()
                .and_then(|p| p.first())
                .is_some_and(|t| t.element_type == ElementType::S64 && t.dims.is_empty());
            let bytes =
                if wide { (index as i64).to_le_bytes().to_vec() } else { (index as i32).to_le_bytes().to_vec() };
            let ty = if wide { ElementType::S64 } else { ElementType::S32 };
            out.push(HostArray::new(ty, vec![], bytes)?);
        }
        out.extend(self.kept_inputs.iter().map(|&i| inputs[i].clone()));
        Ok(out)
    }

    /// Runs `executable` (compiled from [`Exported::module`]) on the function's
    /// inputs: [`Exported::module_arguments`], then [`Executable::execute`].
    pub fn execute(&self, executable: &Executable<'_>, inputs: &[HostArray]) -> Result<Vec<HostArray>, ClientError> {
        executable.execute(&self.module_arguments(executable, inputs)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_the_modules_size_not_its_bytes() {
        let e = Exported {
            module: vec![7; 5000],
            in_types: vec![ArrayType { element_type: ElementType::F64, dims: vec![8] }],
            kept_inputs: vec![0],
            platforms: vec!["cpu".into()],
        };
        let shown = format!("{e:?}");
        assert_eq!(
            shown,
            r#"Exported { module: <5000 bytes>, in_types: ["float64[8]"], kept_inputs: [0], platforms: ["cpu"] }"#
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for buf in [&b""[..], b"\x01", b"\xff\xff\xff\xff", b"\x08\0\0\0\0\0\0\0\xfc\xff\xff\xff", b"ML\xefR\x06"] {
            let err = Exported::parse(buf).unwrap_err();
            assert!(matches!(err, ClientError::Program { .. }), "{err:?}");
            assert!(err.to_string().contains("not a jax.export serialization"), "{err}");
        }
    }
}
