//! Where a buffer sits in a call ([`Site`]: target, operand or result, index,
//! name), for diagnostics and for the alias bookkeeping of `alias.rs`.

use core::fmt;

use crate::Error;

/// Which side of the call a buffer is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// An input (XLA's "argument").
    Operand,
    /// An output (XLA's "result").
    Result,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Operand => "operand",
            Role::Result => "result",
        })
    }
}

/// What one handler parameter takes from the frame, for the count checks and
/// their messages: the macro emits one per parameter, in order.
#[doc(hidden)]
#[derive(Clone, Copy, Debug)]
pub struct Arity {
    /// The parameter's name.
    pub name: &'static str,
    /// [`Decode::ARGS`](crate::Decode::ARGS).
    pub args: usize,
    /// [`Decode::RETS`](crate::Decode::RETS).
    pub rets: usize,
    /// [`Decode::OPTIONAL_ARGS`](crate::Decode::OPTIONAL_ARGS).
    pub optional_args: usize,
    /// [`Decode::OPTIONAL_RETS`](crate::Decode::OPTIONAL_RETS).
    pub optional_rets: usize,
}

impl Arity {
    pub(crate) fn takes(&self, role: Role) -> (usize, usize) {
        match role {
            Role::Operand => (self.args, self.optional_args),
            Role::Result => (self.rets, self.optional_rets),
        }
    }
}

/// Where an item of the call sits, for diagnostics: `operand 1 (weight)`.
#[derive(Clone, Copy, Debug)]
pub struct Site {
    /// The FFI target name.
    pub target: &'static str,
    /// Operand or result.
    pub role: Role,
    /// Position among the operands or among the results.
    pub index: usize,
    /// The parameter's name in the handler.
    pub name: &'static str,
}

impl Site {
    /// An `INVALID_ARGUMENT` error about this item:
    /// `"{target}: operand {index} ({name}): {message}"`.
    pub fn error(&self, message: impl fmt::Display) -> Error {
        Error::invalid_argument(format!("{self}: {message}"))
    }
}

impl fmt::Display for Site {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} {} ({})", self.target, self.role, self.index, self.name)
    }
}
