//! Op declarations: what `#[handler(shapes = ..., dtypes = ..., linear = ..., transpose = ...)]`
//! declares, parsed once and checked on every call.
//!
//! * [`Declaration`] (in every [`HandlerDescriptor`](crate::HandlerDescriptor)): the
//!   names and kinds of the operands, results and attributes, and the rules;
//! * [`ShapeRule`] and [`DtypeRule`]: the notations, parsed (by `xla-ffi-rules`,
//!   which the `#[handler]` macro uses too, so a bad rule is a compile error);
//! * [`infer`]: result shapes and dtypes from operand shapes and dtypes, with the
//!   messages of the handler's own check (Python's abstract evaluation calls it).
//!
//! The notation is documented on [`handler`](crate::handler#declaring-the-op).

mod check;
mod dtypes;
mod infer;
mod rules;
mod types;

pub use crate::dtype::describe as describe_dtypes;
pub(crate) use check::check_call;
pub use dtypes::{accumulator, dtype_by_name, known_dtypes, promote, NOTATION_DTYPES};
pub use infer::{infer, BufferSig, Inferred, Signature};
pub use rules::{ProblemKind, RuleError, Rules};
pub use types::{BufferBounds, Declaration, ParamDecl};
pub use xla_ffi_rules::{DtypeRule, Expr, ShapeRule, Tok, DTYPE_NAMES};

#[cfg(test)]
mod tests;
