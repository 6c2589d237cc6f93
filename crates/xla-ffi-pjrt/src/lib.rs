//! Run XLA programs on a PJRT plugin from Rust, without Python.
//!
//! [`Plugin::load`] opens a PJRT plugin (any shared library exporting
//! `GetPjrtApi`, such as the CPU plugins on PyPI), [`Client`] compiles StableHLO
//! for its first device, and [`Executable::execute`] runs it on host arrays.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod client;
mod sys;

pub use client::{Client, ClientError, ElementType, Executable, ExecuteContext, HostArray, Plugin};

// The Rust blocks of docs/outside-python.md, compiled as doc tests of this crate.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/outside-python.md")]
pub struct OutsidePythonDocs;
