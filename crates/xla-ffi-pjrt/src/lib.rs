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
//! ```
//! use xla_ffi::{handler, Buffer, Result, ResultBuffer};
//! use xla_ffi_pjrt::testing::{FakeConfig, FakePlugin};
//! use xla_ffi_pjrt::{register, HandlerLibrary, PjrtApi};
//!
//! #[handler(target = "demo.copy")]
//! fn demo_copy(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
//!     for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
//!         o.write(v);
//!     }
//!     Ok(())
//! }
//! // In the handler crate (a cdylib): the registry, exported once.
//! xla_ffi::export_registry! { handlers: [&DEMO_COPY] }
//!
//! # fn main() -> core::result::Result<(), xla_ffi_pjrt::Error> {
//! // A host gets the table from the plugin's `GetPjrtApi`; here, a fake plugin.
//! let plugin = FakePlugin::new(FakeConfig::default());
//! // SAFETY: the plugin (and so its table) outlives `api`.
//! let api = unsafe { PjrtApi::from_raw(plugin.api_ptr()) }?.named("fake_plugin.so");
//! // For a library on disk, `HandlerLibrary::load("libmy_handlers.so")`, an
//! // `unsafe fn`: loading a library runs its code (see its `# Safety`).
//! let lib = HandlerLibrary::linked(registry())?;
//! let done = register(&api, &lib, "Host")?;
//! assert_eq!(done.targets, ["demo.copy"]);
//! assert_eq!(done.ffi_api_version, (0, 4));
//! # Ok(())
//! # }
//! ```
//!
//! To compile and run programs on the plugin as well, [`client`] is a small PJRT
//! client: [`Plugin::load`] opens a plugin (dlopen, `GetPjrtApi`,
//! `PJRT_Plugin_Initialize`) and [`Plugin::pjrt_api`] hands its table to step 1;
//! [`Client::compile`] compiles StableHLO for the first device and
//! [`Executable::execute`] runs it on [`HostArray`]s (`xla-ffi-run` is built on it).
//! [`Exported`] reads a `jax.export` serialization (a `.jaxexport` file): the
//! module to compile, and the module's arguments made from the function's inputs.
//!
//! Layouts are those of the shipped plugins, chosen by version (see [`sys`]).
//! `unsafe` code lives in the loading layer alone (the modules that read or call
//! the raw tables: `api`, `library`, `probe`, `runtime`, `context`, `register`,
//! [`sys`] (its all-zero argument structs), the client's `plugin` and `session`,
//! and the fake plugin of `testing`), each block with a `// SAFETY:` comment; the
//! rest is safe Rust.
//!
//! # Features
//!
//! None is on by default.
//!
//! * `testing`: the `testing` module, a fake PJRT plugin (an API
//!   table with the FFI extension and the XLA runtime's registration functions) that
//!   records what is registered, to test a host without a real plugin.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs, missing_debug_implementations)]

mod api;
pub mod client;
mod context;
mod error;
pub mod export;
mod library;
mod open_library;
mod probe;
mod register;
mod runtime;
pub mod sys;
#[cfg(any(test, feature = "testing"))]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use api::{ExtensionInfo, PjrtApi};
pub use client::{ArrayType, AttributeValue, Client, ClientError, ElementType, Executable, HostArray, Plugin};
pub use context::ExecuteContext;
pub use error::{Error, ErrorKind};
pub use export::Exported;
pub use library::{HandlerLibrary, LibraryTarget};
pub use register::{ffi_api_version, register, Registered, FFI_PLATFORMS, MIN_PJRT_API_VERSION};

// The Rust blocks of docs/outside-python.md, compiled as doc tests of this crate.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/outside-python.md")]
pub struct OutsidePythonDocs;
