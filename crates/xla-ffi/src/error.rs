//! Errors that a handler returns to XLA.
//!
//! An [`Error`] carries one of XLA's (absl's) status codes and a message. `?` works on
//! it, on `std::io::Error` and `TryFromIntError`; other errors convert with
//! `.map_err(Error::from_display)` (an `INTERNAL` error with their text). In
//! Python the error surfaces as `jax.errors.JaxRuntimeError` with the text
//! `"<CODE>: <message>"`, for example `INVALID_ARGUMENT: xla_ffi_rs.kepler: ...`.

use core::fmt;

/// XLA's error codes (`XLA_FFI_Error_Code`), without `OK`: success is `Ok(())`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// The operation was cancelled.
    Cancelled,
    /// Unknown error.
    Unknown,
    /// Bad input from the caller: dtype, shape, count or attribute.
    InvalidArgument,
    /// A deadline passed.
    DeadlineExceeded,
    /// Something looked up was not there.
    NotFound,
    /// Something to create was already there.
    AlreadyExists,
    /// Not allowed.
    PermissionDenied,
    /// Out of memory or another resource.
    ResourceExhausted,
    /// The system is not in a state that allows the operation (a missing CUDA driver, say).
    FailedPrecondition,
    /// Aborted.
    Aborted,
    /// A value outside its valid range.
    OutOfRange,
    /// Not implemented (or not supported by this runtime).
    Unimplemented,
    /// A bug: an invariant broke, or a handler panicked.
    Internal,
    /// A service is unavailable.
    Unavailable,
    /// Unrecoverable data loss.
    DataLoss,
    /// Not authenticated.
    Unauthenticated,
}

impl ErrorCode {
    /// The `XLA_FFI_Error_Code` value.
    pub fn to_raw(self) -> u32 {
        use ErrorCode::*;
        match self {
            Cancelled => 1,
            Unknown => 2,
            InvalidArgument => 3,
            DeadlineExceeded => 4,
            NotFound => 5,
            AlreadyExists => 6,
            PermissionDenied => 7,
            ResourceExhausted => 8,
            FailedPrecondition => 9,
            Aborted => 10,
            OutOfRange => 11,
            Unimplemented => 12,
            Internal => 13,
            Unavailable => 14,
            DataLoss => 15,
            Unauthenticated => 16,
        }
    }

    /// The code for a raw value; `OK` (0) and unknown values map to `Internal`.
    pub fn from_raw(raw: u32) -> Self {
        use ErrorCode::*;
        match raw {
            1 => Cancelled,
            2 => Unknown,
            3 => InvalidArgument,
            4 => DeadlineExceeded,
            5 => NotFound,
            6 => AlreadyExists,
            7 => PermissionDenied,
            8 => ResourceExhausted,
            9 => FailedPrecondition,
            10 => Aborted,
            11 => OutOfRange,
            12 => Unimplemented,
            14 => Unavailable,
            15 => DataLoss,
            16 => Unauthenticated,
            _ => Internal,
        }
    }
}

/// An error for XLA: a code and a message.
///
/// ```
/// use xla_ffi::{Error, ErrorCode, Result};
/// fn check(n: usize) -> Result<()> {
///     if n == 0 {
///         return Err(Error::invalid_argument("n must be positive"));
///     }
///     let _v: u32 = "12".parse().map_err(Error::from_display)?;
///     Ok(())
/// }
/// assert_eq!(check(0).unwrap_err().code(), ErrorCode::InvalidArgument);
/// ```
#[derive(Clone, PartialEq, Eq)]
#[must_use = "an error does nothing unless it is returned: `return Err(e)`"]
pub struct Error {
    code: ErrorCode,
    message: String,
}

/// `Result<T, xla_ffi::Error>`.
pub type Result<T, E = Error> = core::result::Result<T, E>;

impl Error {
    /// An error with this code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Error { code, message: message.into() }
    }
    /// `INVALID_ARGUMENT`: the caller's input is wrong.
    pub fn invalid_argument(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidArgument, message)
    }
    /// `INTERNAL`: a bug.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
    /// `UNIMPLEMENTED`.
    pub fn unimplemented(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unimplemented, message)
    }
    /// `FAILED_PRECONDITION`: the environment is not right (a library is missing, say).
    pub fn failed_precondition(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::FailedPrecondition, message)
    }
    /// `RESOURCE_EXHAUSTED`.
    pub fn resource_exhausted(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::ResourceExhausted, message)
    }
    /// An `INTERNAL` error from anything printable (for `map_err`).
    pub fn from_display(e: impl fmt::Display) -> Self {
        Self::internal(e.to_string())
    }
    /// The code.
    pub fn code(&self) -> ErrorCode {
        self.code
    }
    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
    /// Prefixes the message with context: `"{context}: {message}"`.
    pub fn context(mut self, context: impl fmt::Display) -> Self {
        self.message = format!("{context}: {}", self.message);
        self
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::internal(e.to_string())
    }
}

impl From<core::num::TryFromIntError> for Error {
    fn from(e: core::num::TryFromIntError) -> Self {
        Error::invalid_argument(e.to_string())
    }
}

/// Returns early with an error: `bail!(InvalidArgument, "n = {n} is negative")`.
#[macro_export]
macro_rules! bail {
    ($code:ident, $($fmt:tt)+) => {
        return ::core::result::Result::Err($crate::Error::new(
            $crate::ErrorCode::$code,
            $crate::__private::format!($($fmt)+),
        ))
    };
}

/// Returns early with an error unless a condition holds:
/// `ensure!(n > 0, InvalidArgument, "n = {n} must be positive")`.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $code:ident, $($fmt:tt)+) => {
        if !$cond { $crate::bail!($code, $($fmt)+); }
    };
}
