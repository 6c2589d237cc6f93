//! The fake runtime's futures (`XLA_FFI_Future_Create`, `_SetAvailable`,
//! `_SetError`), and what [`CallBuilder::run`](super::CallBuilder::run) does with a
//! future a handler returns: wait for it, as XLA does, and take its outcome.
//!
//! A fake future is an `Arc` with two counts: one for the runtime (taken back by
//! [`wait`]) and one for the completer (taken back by the first completion).

use std::sync::{Arc, Condvar, Mutex};

use xla_ffi_sys as sys;

use super::{take_error, CallResult};
use crate::ErrorCode;

#[derive(Default)]
struct FakeFuture {
    outcome: Mutex<Option<CallResult>>,
    done: Condvar,
}

fn complete(raw: *mut sys::XLA_FFI_Future, result: CallResult) -> *mut sys::XLA_FFI_Error {
    if raw.is_null() {
        return core::ptr::null_mut();
    }
    let ptr = raw as *const FakeFuture;
    // SAFETY: `raw` came from `future_create`; its completer's count is still held
    // (checked below before it is released), so the future is alive.
    let f = unsafe { &*ptr };
    let mut slot = f.outcome.lock().unwrap_or_else(|e| e.into_inner());
    if slot.is_some() {
        // A second completion: the completer's count is already gone; keep the first
        // outcome and say so in it.
        if let Some(Ok(())) = *slot {
            *slot = Some(Err((ErrorCode::Internal, "fake runtime: a future was completed twice".into())));
        }
        return core::ptr::null_mut();
    }
    *slot = Some(result);
    f.done.notify_all();
    drop(slot);
    // SAFETY: the completer's count, released once (the first completion).
    drop(unsafe { Arc::from_raw(ptr) });
    core::ptr::null_mut()
}

pub(super) unsafe extern "C" fn future_create(args: *mut sys::XLA_FFI_Future_Create_Args) -> *mut sys::XLA_FFI_Error {
    let f = Arc::new(FakeFuture::default());
    let ptr = Arc::into_raw(f);
    // SAFETY: `ptr` came from `Arc::into_raw`: now one count for the runtime and one
    // for the completer.
    unsafe { Arc::increment_strong_count(ptr) };
    // SAFETY: the crate passes valid args.
    unsafe { (*args).future = ptr as *mut sys::XLA_FFI_Future };
    core::ptr::null_mut()
}

pub(super) unsafe extern "C" fn future_set_available(
    args: *mut sys::XLA_FFI_Future_SetAvailable_Args,
) -> *mut sys::XLA_FFI_Error {
    // SAFETY: the crate passes valid args.
    complete(unsafe { (*args).future }, Ok(()))
}

pub(super) unsafe extern "C" fn future_set_error(
    args: *mut sys::XLA_FFI_Future_SetError_Args,
) -> *mut sys::XLA_FFI_Error {
    // SAFETY: the crate passes valid args.
    let (future, error) = unsafe { ((*args).future, (*args).error) };
    let result = match take_error(error) {
        Err(e) => Err(e),
        Ok(()) => Err((ErrorCode::Internal, "fake runtime: Future_SetError without an error".into())),
    };
    complete(future, result)
}

/// After the handler returned `err` with `future` in the frame: waits for the future
/// (when there is one) and gives the call's outcome, and whether the future was
/// still pending when the handler returned.
pub(super) fn finish(future: *mut sys::XLA_FFI_Future, err: *mut sys::XLA_FFI_Error) -> (CallResult, Option<bool>) {
    if future.is_null() {
        return (take_error(err), None);
    }
    // SAFETY: the runtime's count of a future made by `future_create`.
    let f = unsafe { Arc::from_raw(future as *const FakeFuture) };
    let mut slot = f.outcome.lock().unwrap_or_else(|e| e.into_inner());
    let pending = slot.is_none();
    while slot.is_none() {
        slot = f.done.wait(slot).unwrap_or_else(|e| e.into_inner());
    }
    let outcome = slot.take().unwrap_or(Ok(()));
    drop(slot);
    if !err.is_null() {
        let sync = take_error(err);
        let msg = format!("fake runtime: the handler returned an error ({sync:?}) and set a future");
        return (Err((ErrorCode::Internal, msg)), Some(pending));
    }
    (outcome, Some(pending))
}
