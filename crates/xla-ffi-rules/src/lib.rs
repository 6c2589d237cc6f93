//! The shape and dtype rule notations of [`xla-ffi`](https://docs.rs/xla-ffi)'s op
//! declarations, parsed and validated, and the dtype names the notation knows.
//!
//! `#[handler(shapes = "...b ...n, ...n -> ...b ...n", dtypes = "X, W -> promote(X, W)")]`:
//! the `#[handler]` macro parses a rule with [`ShapeRule::parse`] and
//! [`DtypeRule::parse`] at compile time (a bad rule is a compile error, with the
//! message the runtime would give), and `xla-ffi` parses it again once per handler
//! and checks every call against it. One parser, in this crate, so the two cannot
//! disagree; it depends on `std` only.
//!
//! ```
//! use xla_ffi_rules::{DtypeRule, ShapeRule, Tok};
//!
//! let shapes = ShapeRule::parse("...b n, n -> ...b").unwrap();
//! assert_eq!(shapes.names, ["b", "n"]);
//! assert_eq!(shapes.operands[1], [Tok::Factor(1)]);
//! let e = DtypeRule::parse("T -> U").unwrap_err();
//! assert_eq!(e, "dtype rule `T -> U`: result 0 uses `U`, which no operand binds");
//! ```
//!
//! Use it through `xla-ffi`, which re-exports these items under `xla_ffi::decl` and
//! documents the notation on `xla_ffi::handler`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod dtype_rule;
mod dtypes;
mod shape_rule;

pub use dtype_rule::{DtypeRule, Expr, MAX_VARS};
pub use dtypes::{dtype_code, DTYPES, DTYPE_NAMES};
pub use shape_rule::{ShapeRule, Tok, MAX_NAMES};

#[cfg(test)]
mod tests;
