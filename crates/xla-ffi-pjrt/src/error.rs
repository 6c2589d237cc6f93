//! The crate's one error type: a message that names the plugin, the library or
//! target, and the cause, with a kind to match on.

use core::fmt;

/// What went wrong, broadly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The PJRT API table is malformed (null, too small, a broken extension chain).
    BadApi,
    /// The plugin has no FFI extension, or lacks a function of it.
    NoFfiExtension,
    /// The plugin (its PJRT API or its XLA FFI runtime) is older than needed.
    TooOld,
    /// A handler library could not be loaded or its registry read.
    Library,
    /// The plugin refused a registration, or an execute context call.
    Refused,
    /// A platform name that no plugin runs FFI handlers for (`"tpu"`).
    Platform,
}

/// An error of this crate. Its message names the plugin (or library), the target
/// or type when there is one, and the cause.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: ErrorKind,
    message: String,
}

impl Error {
    pub(crate) fn new(kind: ErrorKind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into() }
    }
    /// What went wrong, broadly.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }
    /// The whole message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

/// An error's message followed by its sources' (libloading puts `dlerror()`'s
/// text, the loader's reason, in the source: its own message is only
/// "dlopen failed").
pub(crate) fn with_sources(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text = format!("{text}: {s}");
        source = s.source();
    }
    text
}

/// `1 input`, `2 inputs`: a count with its noun, singular for one.
pub(crate) fn counted(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("{n} {noun}")
    } else {
        format!("{n} {noun}s")
    }
}
