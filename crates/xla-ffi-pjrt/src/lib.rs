//! Register a crate's XLA FFI handlers into any PJRT plugin, with no Python.
//!
//! A program exported with `jax.export` that calls this project's targets runs in
//! any host that loads a PJRT plugin (a Rust or C++ service, `xla-ffi-run`), once
//! the handlers are registered there. This crate does that from the plugin's raw
//! `PJRT_Api*` (what its `GetPjrtApi` returns, which any PJRT client can hand over):
//!
//! 1. [`PjrtApi::from_raw`] checks the table and finds the FFI extension in its
//!    extension chain.
//! 2. [`HandlerLibrary::load`] opens a handler library's `cdylib` and reads the
//!    registry that [`xla_ffi::export_registry!`] exported from it (or
//!    [`HandlerLibrary::linked`] takes a linked crate's registry).
//! 3. [`register`] reads the plugin's XLA FFI runtime version (refusing one older
//!    than the handlers need), registers the library's types, its execute-only
//!    handlers through the FFI extension, and its stage bundles (stateful handlers)
//!    through the runtime's own FFI API.
//! 4. [`ExecuteContext`] carries per-run user data (`xla_ffi::UserData<T>`) into a
//!    `PJRT_ExecuteOptions.context`.
//!
//! To compile and run programs on the plugin as well, [`client`] is a small PJRT
//! client: [`Plugin::load`] opens a plugin (dlopen, `GetPjrtApi`,
//! `PJRT_Plugin_Initialize`) and [`Plugin::pjrt_api`] hands its table to step 1;
//! [`Client::compile`] compiles StableHLO for the first device and
//! [`Executable::execute`] runs it on [`HostArray`]s (`xla-ffi-run` is built on it).
//!
//! Layouts are those of the shipped plugins, chosen by version (see [`sys`]).
//! `unsafe` code lives in the loading layer alone (the modules that read the raw
//! tables: `api`, `library`, `probe`, `runtime`, `context`), each block with a
//! `// SAFETY:` comment; the rest is safe Rust.

mod api;
pub mod client;
mod context;
mod error;
mod library;
mod probe;
mod register;
mod runtime;
pub mod sys;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use api::{ExtensionInfo, PjrtApi};
pub use client::{AttributeValue, Client, ClientError, ElementType, Executable, HostArray, Plugin};
pub use context::ExecuteContext;
pub use error::{Error, ErrorKind};
pub use library::{HandlerLibrary, LibraryTarget};
pub use register::{ffi_api_version, register, Registered, MIN_PJRT_API_VERSION};

// The Rust blocks of docs/outside-python.md, compiled as doc tests of this crate.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/outside-python.md")]
pub struct OutsidePythonDocs;
