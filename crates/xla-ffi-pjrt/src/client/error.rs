//! The errors of loading a plugin, compiling and running.

use std::fmt;
use std::path::PathBuf;

/// What went wrong, with the plugin call, PJRT's code and message where PJRT
/// reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientError {
    /// The plugin file could not be loaded, or it does not export `GetPjrtApi`.
    Load {
        /// The path given.
        path: PathBuf,
        /// The loader's reason.
        message: String,
    },
    /// The plugin's API is older than this crate needs, or lacks a function.
    Unsupported {
        /// What is missing, with the versions.
        message: String,
    },
    /// A PJRT call returned an error.
    Pjrt {
        /// The function of the PJRT C API that failed (`PJRT_Client_Compile`).
        call: &'static str,
        /// Its `PJRT_Error_Code` (absl status code: 3 is `INVALID_ARGUMENT`).
        code: i32,
        /// The plugin's message.
        message: String,
    },
    /// Host arrays that do not fit what was asked (size, count, element type).
    Input {
        /// What was expected and what was got.
        message: String,
    },
    /// The program calls a custom-call target with no handler registered in the
    /// plugin (compiling refused it).
    UnknownTarget {
        /// The target's name (`xla_ffi_rs.kepler`).
        target: String,
        /// The plugin's message.
        message: String,
    },
    /// A program file that cannot be read as what it was given as (a
    /// [`Exported`](crate::Exported) that is not a `jax.export` serialization, or
    /// one that this crate does not run).
    Program {
        /// What is wrong with it.
        message: String,
    },
}

impl ClientError {
    /// The PJRT error code's name (`INVALID_ARGUMENT`), for [`ClientError::Pjrt`].
    pub fn code_name(code: i32) -> &'static str {
        match code {
            0 => "OK",
            1 => "CANCELLED",
            2 => "UNKNOWN",
            3 => "INVALID_ARGUMENT",
            4 => "DEADLINE_EXCEEDED",
            5 => "NOT_FOUND",
            6 => "ALREADY_EXISTS",
            7 => "PERMISSION_DENIED",
            8 => "RESOURCE_EXHAUSTED",
            9 => "FAILED_PRECONDITION",
            10 => "ABORTED",
            11 => "OUT_OF_RANGE",
            12 => "UNIMPLEMENTED",
            13 => "INTERNAL",
            14 => "UNAVAILABLE",
            15 => "DATA_LOSS",
            16 => "UNAUTHENTICATED",
            _ => "UNKNOWN_CODE",
        }
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Load { path, message } => {
                write!(f, "cannot load PJRT plugin {}: {message}", path.display())
            }
            Self::Unsupported { message } => write!(f, "unsupported PJRT plugin: {message}"),
            Self::Pjrt { call, code, message } => {
                let name = Self::code_name(*code);
                write!(f, "{call} failed with {name} (code {code}): {message}")
            }
            Self::UnknownTarget { target, message } => write!(
                f,
                "the program calls target '{target}', which no handler library registered in this \
                 plugin; register the library that exports it (xla_ffi_pjrt::register) before \
                 compiling ({message})"
            ),
            Self::Input { message } | Self::Program { message } => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for ClientError {}

/// What the plugin says when a program calls a target with no handler: XLA's FFI
/// (typed handlers) and its older custom-call registry.
const UNKNOWN_TARGET: [&str; 2] =
    ["No FFI handler registered for ", "No registered implementation for custom call to "];

impl ClientError {
    /// A compile error that names a target with no handler, as
    /// [`ClientError::UnknownTarget`]; any other error as it is.
    pub(crate) fn name_unknown_target(self) -> Self {
        let Self::Pjrt { message, .. } = &self else { return self };
        for marker in UNKNOWN_TARGET {
            if let Some(at) = message.find(marker) {
                let target: String = message[at + marker.len()..]
                    .chars()
                    .take_while(|c| !c.is_whitespace() && *c != ',' && *c != ';')
                    .collect();
                if !target.is_empty() {
                    return Self::UnknownTarget { target, message: message.clone() };
                }
            }
        }
        self
    }
}
