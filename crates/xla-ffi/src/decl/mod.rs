//! Op declarations: what `#[handler(shapes = ..., dtypes = ..., linear = ..., transpose = ...)]`
//! declares, parsed once and checked on every call.
//!
//! * [`Declaration`] (in every [`HandlerDescriptor`](crate::HandlerDescriptor)): the
//!   names and kinds of the operands, results and attributes, and the rules;
//! * [`ShapeRule`] and [`DtypeRule`]: the notations, parsed (the `#[handler]` macro
//!   compiles the same parser, so a bad rule is a compile error);
//! * [`infer`]: result shapes and dtypes from operand shapes and dtypes, with the
//!   messages of the handler's own check (Python's abstract evaluation calls it).
//!
//! The notation is documented on [`handler`](crate::handler#declaring-the-op).

mod check;
mod dtype_rule;
mod shape_rule;
mod types;

pub(crate) use check::check_call;
pub use check::{
    accumulator, dtype_by_name, infer, known_dtypes, promote, BufferSig, Inferred, ProblemKind, RuleError, Rules,
    Signature, NOTATION_DTYPES,
};
pub use dtype_rule::{DtypeRule, Expr, DTYPE_NAMES};
pub use shape_rule::{ShapeRule, Tok};
pub use types::{BufferBounds, Declaration, ParamDecl};

#[cfg(test)]
mod tests;
