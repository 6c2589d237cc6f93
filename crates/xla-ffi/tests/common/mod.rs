//! Helpers shared by the integration tests.
#![allow(dead_code)]

use xla_ffi::testing::CallResult;
use xla_ffi::ErrorCode;

/// Asserts that a call failed with `code` and a message containing every word of
/// `words`; returns the message.
#[track_caller]
pub fn expect_err(result: CallResult, code: ErrorCode, words: &[&str]) -> String {
    let (got_code, msg) = match result {
        Ok(()) => panic!("expected a {code:?} error containing {words:?}, got Ok"),
        Err(e) => e,
    };
    assert_eq!(got_code, code, "wrong error code; message: {msg}");
    for w in words {
        assert!(msg.contains(w), "message does not contain {w:?}: {msg}");
    }
    msg
}

/// Asserts that a call succeeded.
#[track_caller]
pub fn expect_ok(result: CallResult) {
    if let Err((code, msg)) = result {
        panic!("expected Ok, got {code:?}: {msg}");
    }
}

/// Installs (once per test binary) a panic hook that keeps quiet about the
/// deliberate panics of these tests (payloads containing "deliberate", the one
/// deliberate out-of-bounds index, or a [`DeliberatePayload`]) and prints
/// every other panic as before, so real test failures stay visible.
pub fn quiet_deliberate_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let p = info.payload();
            let text = p.downcast_ref::<&str>().map(|s| s.to_string()).or_else(|| p.downcast_ref::<String>().cloned());
            let deliberate = match text {
                Some(t) => t.contains("deliberate") || t.contains("the len is 3 but the index is 30"),
                None => p.downcast_ref::<DeliberatePayload>().is_some(),
            };
            if !deliberate {
                previous(info);
            }
        }));
    });
}

/// A non-string panic payload used on purpose.
#[derive(Debug)]
pub struct DeliberatePayload(pub i32);

/// The code an error read back from the runtime carries: with an API 0.3 header
/// (Error_GetMessage, no code) it is unknown and reported as INTERNAL.
#[allow(dead_code)]
pub fn runtime_code(code: ErrorCode) -> ErrorCode {
    if xla_ffi::sys::compat::HAS_ERROR_DETAILS {
        code
    } else {
        ErrorCode::Internal
    }
}

/// The text of a caught panic's payload (a `&str` or `String`; else a placeholder).
pub fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p.downcast_ref::<&str>().map(|s| s.to_string()).unwrap_or_else(|| "<non-string payload>".into()),
    }
}
