//! Raw layouts of the PJRT C API (`xla/pjrt/c/pjrt_c_api.h` and its FFI extension),
//! as the shipped plugins lay them out. Declared by hand: no header, no bindgen.
#![allow(non_camel_case_types, non_snake_case, non_upper_case_globals, missing_docs, missing_debug_implementations)]

pub mod execute_context;
pub mod ffi_extension;
pub mod header;
pub mod xla_runtime;

pub use execute_context::*;
pub use ffi_extension::*;
pub use header::*;
pub use xla_runtime::*;
/// The client's part of the table and its argument structs (`crate::client`);
/// not glob-exported, its names are the header's as well.
pub mod client;
