//! A small PJRT client: load a plugin, compile StableHLO, run it on host arrays.
//!
//! ```no_run
//! use xla_ffi_pjrt::{Client, ElementType, HostArray, Plugin};
//!
//! // SAFETY: a PJRT plugin (loading it runs its code: `Plugin::load`'s `# Safety`).
//! let plugin = unsafe { Plugin::load("pjrt_c_api_cpu_plugin.so") }?;
//! let client = Client::new(&plugin)?;
//! let program = std::fs::read("sin.mlir")?;
//! let executable = client.compile(&program, "mlir")?;
//! let x = HostArray::new(ElementType::F32, vec![2], [0.0f32, 1.0].iter().flat_map(|v| v.to_le_bytes()).collect())?;
//! let results = executable.execute(&[x])?;
//! assert_eq!(results[0].dims(), &[2]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod array;
mod error;
mod plugin;
mod program_shape;
mod session;

pub use array::{ElementType, HostArray};
pub use error::ClientError;
pub use plugin::{AttributeValue, Plugin};
pub use program_shape::ArrayType;
pub use session::{Client, Executable, COMPILE_OPTIONS_ONE_DEVICE};
