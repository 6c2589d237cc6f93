//! Panic payloads: their message, and dropping them without unwinding.
//!
//! Used wherever user code runs under `catch_unwind`: the handler body and the
//! metadata query (`dispatch.rs`, `frame.rs`), thread-pool tasks (`pool.rs`) and
//! state destructors (`state.rs`). It depends on nothing else in the crate.

use std::panic::{catch_unwind, AssertUnwindSafe};

/// Drops a panic payload. Its `Drop` is user code and may panic in turn: each such
/// panic is caught and its payload dropped the same way; only a payload chain
/// that keeps panicking (after 8 rounds) is leaked. Never unwinds.
pub(crate) fn drop_payload(payload: Box<dyn core::any::Any + Send>) {
    let mut p = payload;
    for _ in 0..8 {
        match catch_unwind(AssertUnwindSafe(move || drop(p))) {
            Ok(()) => return,
            Err(next) => p = next,
        }
    }
    core::mem::forget(p);
}

/// Turns a panic payload into text.
pub(crate) fn panic_message(payload: &(dyn core::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}
