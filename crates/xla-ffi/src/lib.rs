//! Safe, typed XLA FFI handlers in Rust, for JAX custom ops.
//!
//! XLA's typed FFI (`xla/ffi/api/c_api.h`) calls a handler as
//! `XLA_FFI_Error* handler(XLA_FFI_CallFrame*)`. This crate turns a plain Rust function
//! into such a handler, and makes it correct by construction:
//!
//! * **One declaration.** The [`handler`] attribute macro reads an ordinary
//!   function's signature (operands, results, attributes, context, state) and
//!   generates the exported C symbol beside it, plus a [`HandlerDescriptor`]. The
//!   function stays safe code that tests can call; a crate of handlers can
//!   `#![forbid(unsafe_code)]`.
//! * **Declared rules.** `#[handler(shapes = "...b n, n -> ...b", dtypes = "T, T -> T")]`
//!   declares how the shapes and dtypes of operands and results relate; the shim
//!   checks them before the body, and the descriptor's [`Declaration`] hands them
//!   (with the names of every operand, result and attribute) to Python. See
//!   [`handler`](crate::handler#declaring-the-op).
//! * **Checked decoding.** Operand and result counts, element types (static, or any
//!   float through [`AnyFloat`] + [`dispatch_float!`], any complex through
//!   [`AnyComplex`] + [`dispatch_complex!`]), ranks and attributes are
//!   checked before the body runs; every problem is reported in one
//!   `INVALID_ARGUMENT` error that names the target, the operand, what was expected
//!   and what was got. Pointers are checked for alignment before a slice is made.
//! * **Memory rules of XLA, in the types.** Results are uninitialised, so they are
//!   `&mut [MaybeUninit<T>]`. An operand may alias a result, so an aliased pair is
//!   never `&[T]` + `&mut [T]`: [`ResultBuffer::with_input`] gives it as one `&mut [T]`.
//!   Device buffers are never slices.
//! * **No unwinding across the FFI.** A panic becomes an `INTERNAL` error holding the
//!   panic message. It is still printed by the panic hook (this crate installs none;
//!   see [`handler`](crate::handler#panics)), and a `Drop` that panics during
//!   unwinding aborts the process, as everywhere in Rust.
//! * **Versions.** The metadata query is answered with [`MIN_API_VERSION`] (0.3), not
//!   the header's, so one build loads on jaxlib 0.10 (API 0.3) through 0.12 (API 0.5).
//!   API slots newer than the running runtime are never called.
//! * **Threads.** Handlers run concurrently; state is `Send + Sync` and handed out as
//!   `&S`. [`ThreadPool`] runs work on XLA's own CPU pool.
//!
//! # Example
//!
//! ```
//! #![forbid(unsafe_code)]
//! use core::mem::MaybeUninit;
//! use xla_ffi::{handler, Attr, Buffer, Context, Result, ResultBuffer};
//!
//! /// out = a * x + y, in float32.
//! #[handler(target = "demo.axpy")]
//! pub fn demo_axpy(
//!     ctx: Context,
//!     x: Buffer<f32>,
//!     y: Buffer<f32>,
//!     mut out: ResultBuffer<f32>,
//!     a: Attr<f32>,
//! ) -> Result<()> {
//!     y.expect_dims(x.dims(), "the shape of x")?;
//!     out.expect_dims(x.dims(), "the shape of x")?;
//!     let (x, y) = (x.as_slice()?, y.as_slice()?);
//!     let out: &mut [MaybeUninit<f32>] = out.as_uninit()?;
//!     for ((o, &xi), &yi) in out.iter_mut().zip(x).zip(y) {
//!         o.write(*a * xi + yi);
//!     }
//!     let _threads = ctx.thread_pool().num_threads();
//!     Ok(())
//! }
//!
//! // The exported symbol and its registration facts:
//! assert_eq!(DEMO_AXPY.target, "demo.axpy");
//! assert_eq!(DEMO_AXPY.symbol, "xla_ffi_handler__demo_axpy");
//! ```
//!
//! In Python, the symbol goes to JAX as a capsule (`python::capsule` or
//! `python::targets` with the `pyo3` feature, or
//! `jax.ffi.pycapsule(ctypes.CDLL(path).xla_ffi_handler__demo_axpy)`):
//!
//! ```python
//! jax.ffi.register_ffi_target("demo.axpy", capsule, platform="cpu")
//! out = jax.ffi.ffi_call("demo.axpy", jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y, a=np.float32(2))
//! ```
//!
//! # Features
//!
//! None is on by default, and the crate builds with no libclang, jaxlib or Python.
//!
//! * `pyo3`: the `python` module, capsules and registration dictionaries for a PyO3 module
//!   (any pyo3 from 0.25 to 0.30; no pyo3 feature, such as abi3, is forced).
//! * `testing`: the `testing` module, synthetic call frames on a fake API table, to test
//!   handlers without JAX.
//! * `cuda`: the `cuda` module, kernel launches from `platform = device` handlers (cudarc,
//!   loaded at run time: no CUDA toolkit needed to build).
//! * `bindgen`: take the ABI from an installed jaxlib's header with bindgen instead
//!   of `xla-ffi-sys`'s Rust declarations (for checking them; needs libclang).
//!
//! Outside Python, [`export_registry!`] exports a crate's handlers and types from its
//! `cdylib` through one C function, `xla_ffi_rs_registry` (see [`export`]), which the
//! `xla-ffi-pjrt` crate reads to register them into any PJRT plugin.
//!
//! `examples/plugin` in the repository is a complete plugin crate built on this one.
#![warn(missing_docs)]
#![warn(missing_debug_implementations)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Lets the `handler` macro's `::xla_ffi` paths resolve inside this crate too.
extern crate self as xla_ffi;

// The layers, lowest first; a module uses only modules below it (no import cycles:
// checked by `tests/layering.rs`):
// 1. `error`, `dtype`, `panic` (payload handling), `site` (`Role`, `Site`), `decl`
//    (declarations and their rules: data and checks over dims and dtypes);
// 2. raw: `raw` (XLA's buffer and attribute structs), `frame` (API table, call frame),
//    `snapshot` (owned copies of a frame's entries and attributes, for async handlers);
// 3. `alias` (which buffers share memory);
// 4. views and decoding: `attr`, then `call` (`Call`, `Decode`), then the views that
//    implement `Decode`: `buffer`, `pool` and `context`, `remaining`;
// 5. `dispatch` (what every exported symbol calls: catch_unwind, host guard);
// 6. `state` (its instantiate stage wraps `dispatch`), `user_data`, `descriptor`, `handler`, and
//    `__private` for the macro's generated code; `export` (the C registry of a crate's
//    handlers), `cuda`, `python`, `testing` on top.
mod alias;
pub mod attr;
mod attr_enum;
mod attr_scalars;
mod buffer;
mod call;
mod context;
pub mod decl;
mod descriptor;
mod dispatch;
mod dtype;
mod error;
pub mod export;
pub mod extension;
mod frame;
mod future;
mod handler;
mod optional;
mod panic;
mod pool;
mod raw;
mod remaining;
mod site;
mod snapshot;
pub mod stage;
mod state;
mod token;
mod user_data;

#[cfg(feature = "cuda")]
#[cfg_attr(docsrs, doc(cfg(feature = "cuda")))]
pub mod cuda;

#[cfg(feature = "pyo3")]
#[cfg_attr(docsrs, doc(cfg(feature = "pyo3")))]
pub mod python;

#[cfg(any(test, feature = "testing"))]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;

pub use attr::{Array, Attr, AttrValue, Attrs, Dict, EnumValues, FromAttr, FromAttrs, FromNumber, Number, Scalar};
pub use attr_enum::AttrEnum;
pub use attr_scalars::Pointer;
pub use buffer::{
    AnyComplex, AnyFloat, AnyType, Buffer, ElementSpec, InOut, ResultBuffer, ANY_RANK, HUGE_PAGE_MIN_BYTES,
};
pub use call::{Call, Decode};
pub use context::{Context, Scratch, Stream};
pub use decl::Declaration;
pub use descriptor::{bundles, Bundle, Handler, HandlerDescriptor, HandlerFn, Platform};
pub use dtype::{DataType, Element, Pred};
pub use error::{Error, ErrorCode, Result};
pub use extension::{Extension, ExtensionId};
pub use frame::{Stage, Traits, MIN_API_VERSION};
pub use future::{spawn_thread, AsyncCall};
pub use handler::handler;
pub use optional::OptionalBuffer;
pub use pool::{Parts, ThreadPool};
pub use remaining::{RemainingArgs, RemainingRets};
pub use site::{Role, Site};
pub use state::{Initialized, Prepared, State, StateType, TypeRegistration};
pub use token::{ResultToken, Token, TokenSpec};
pub use user_data::UserData;

/// The `half` crate (`f16`, `bf16`), re-exported for [`dispatch_float!`].
pub use half;
/// The `num-complex` crate: `Complex<f32>` and `Complex<f64>` are the [`Element`]
/// types of complex64 and complex128, re-exported for [`dispatch_complex!`].
pub use num_complex;
/// The raw bindings, re-exported for generated code.
pub use xla_ffi_sys as sys;

#[doc(hidden)]
pub mod __private {
    pub use crate::attr_enum::{enum_expected, enum_index};
    pub use crate::descriptor::{assert_execute_return, undecoded, ExecuteReturn, HandlerReturn};
    pub use crate::dispatch::dispatch;
    pub use crate::frame::HandlerInfo;
    pub use crate::future::{dispatch_async, spawn_with};
    pub use crate::site::Arity;
    pub use crate::stage::state_readable;
    pub use crate::state::{dispatch_stage, StageOutput};
    // For the exported `macro_rules!` macros, whose paths are absolute (hygiene).
    pub use std::format;
    pub use std::string::String;
    pub use std::vec;
    pub use std::vec::Vec;
}

// The Rust blocks of the repository's README.md and docs/, and of this crate's
// README, run as doc tests: a block that stops compiling or asserting fails
// `cargo test`. Compiled only by rustdoc's test mode; not part of the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
mod crate_readme_blocks {}
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
mod readme_blocks {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/handlers.md")]
mod handlers_md_blocks {}
#[cfg(doctest)]
#[doc = include_str!("../../../docs/binding.md")]
mod binding_md_blocks {}
// Its CUDA handler embeds cuda/scale.cu of this crate.
#[cfg(all(doctest, feature = "cuda"))]
#[doc = include_str!("../../../docs/gpu.md")]
mod gpu_md_blocks {}
