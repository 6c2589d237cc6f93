//! Dispatch: what every exported handler symbol calls ([`dispatch`]).
//!
//! In order, it:
//! 1. opens the frame (`frame::open`): checks its `struct_size` against the
//!    header's constant, answers XLA's metadata query (API version, traits, state
//!    type id) and returns without touching operands, and checks the execution stage;
//! 2. for a host handler at any stage but instantiate (the stages whose frames
//!    carry buffers), refuses a call from a device platform (the host-platform
//!    guard, answered once per API table);
//! 3. builds the [`Call`] and checks the operand and result counts;
//! 4. runs the decoding and the handler body under `catch_unwind`, so a panic
//!    becomes an `INTERNAL` error carrying the panic message, and no unwinding
//!    crosses `extern "C"`;
//! 5. turns an [`Error`] into an `XLA_FFI_Error` with `XLA_FFI_Error_Create`.
//!
//! It sits above the decode layer (`call.rs`) and below the code the
//! [`handler`](crate::handler) macro generates. The guard calls two API slots
//! (`XLA_FFI_ThreadPool_NumThreads`, `XLA_FFI_Stream_Get`) through `api_slot!`.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicPtr, Ordering};

use xla_ffi_sys as sys;

use crate::alias::Aliases;
use crate::call::Call;
use crate::error::{Error, Result};
use crate::frame::{api_slot, open, ApiTable, Entry, Frame, HandlerInfo, Stage};
use crate::panic::{drop_payload, panic_message};

/// API tables proven to belong to a host (CPU) runtime, and to a device runtime.
/// Each runtime (the CPU client, each GPU plugin) has its own table, stable for the
/// process.
static HOST_APIS: [AtomicPtr<sys::XLA_FFI_Api>; 4] = [const { AtomicPtr::new(core::ptr::null_mut()) }; 4];
static DEVICE_APIS: [AtomicPtr<sys::XLA_FFI_Api>; 4] = [const { AtomicPtr::new(core::ptr::null_mut()) }; 4];

fn cached(set: &[AtomicPtr<sys::XLA_FFI_Api>], api: *mut sys::XLA_FFI_Api) -> bool {
    set.iter().any(|p| p.load(Ordering::Relaxed) == api)
}

fn remember(set: &[AtomicPtr<sys::XLA_FFI_Api>], api: *mut sys::XLA_FFI_Api) {
    for slot in set {
        if slot.compare_exchange(core::ptr::null_mut(), api, Ordering::Relaxed, Ordering::Relaxed).is_ok() {
            break;
        }
    }
}

/// Whether `frame` runs on a host platform, where buffers are host memory.
///
/// Host handlers make slices of their buffers, so one registered for a GPU platform
/// by mistake must be refused, not allowed to read device memory. Only proofs are
/// cached per API table: a working CPU thread pool (`ThreadPool_NumThreads`, which
/// only XLA:CPU's context has) proves a host, a non-null `Stream_Get` stream proves
/// a device. A call with neither proof (a failing or null `Stream_Get` on a runtime
/// without a pool) counts as host for that call only, and the next call asks again,
/// so a transient failure never marks a device runtime as host for good.
#[inline(always)]
fn is_host_platform(frame: &Frame<'_>) -> bool {
    // The usual case, without a call: the one CPU runtime's table, proved before.
    if core::ptr::eq(HOST_APIS[0].load(Ordering::Relaxed), frame.api.ptr()) {
        return true;
    }
    ask_host_platform(frame)
}

/// [`is_host_platform`] past its first cached table.
#[inline(never)]
fn ask_host_platform(frame: &Frame<'_>) -> bool {
    let api = frame.api.ptr() as *mut sys::XLA_FFI_Api;
    if cached(&HOST_APIS, api) {
        return true;
    }
    if cached(&DEVICE_APIS, api) {
        return false;
    }
    if let Some(num_threads) = api_slot!(frame.api, XLA_FFI_ThreadPool_NumThreads) {
        let mut n: i64 = 0;
        let mut args = sys::XLA_FFI_ThreadPool_NumThreads_Args {
            struct_size: sys::XLA_FFI_ThreadPool_NumThreads_Args_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            ctx: frame.ctx,
            num_threads: &mut n,
        };
        // SAFETY: the runtime's own function, with fully initialised args; `n`
        // outlives the call.
        let err = unsafe { num_threads(&mut args) };
        if frame.api.take_error(err).is_ok() {
            remember(&HOST_APIS, api);
            return true;
        }
    }
    let Some(get) = api_slot!(frame.api, XLA_FFI_Stream_Get) else {
        return true;
    };
    let mut args = sys::XLA_FFI_Stream_Get_Args {
        struct_size: sys::XLA_FFI_Stream_Get_Args_STRUCT_SIZE as usize,
        extension_start: core::ptr::null_mut(),
        ctx: frame.ctx,
        stream: core::ptr::null_mut(),
    };
    // SAFETY: the runtime's own function, with fully initialised args.
    let err = unsafe { get(&mut args) };
    if frame.api.take_error(err).is_ok() && !args.stream.is_null() {
        remember(&DEVICE_APIS, api);
        return false;
    }
    true
}

/// Runs a handler body at its stage. See the module docs.
///
/// Inlined into the handler's shim, its one caller (the body closure makes each
/// instance the shim's own): the handler's description is then a constant there, so
/// the checks against it (stage, platform, operand counts) fold.
///
/// # Safety
/// `raw` must be the call frame XLA passed to the handler.
#[doc(hidden)]
#[inline(always)]
pub unsafe fn dispatch(
    raw: *mut sys::XLA_FFI_CallFrame,
    info: &HandlerInfo,
    body: impl for<'f> FnOnce(&mut Call<'f>) -> Result<()>,
) -> *mut sys::XLA_FFI_Error {
    // Nothing below may unwind: `open` and `make_error` do not panic on any input, and
    // the body runs inside catch_unwind. Every failure is handled out of line (`fail`,
    // `refused`), so that the code of a call that succeeds stays together.
    // SAFETY: forwarded from the caller.
    let frame = match unsafe { open(raw, info) } {
        Ok(Entry::Call(f)) => f,
        Ok(Entry::Metadata) => return core::ptr::null_mut(),
        Err((api, e)) => return refused(api, &e),
    };
    // The byte ranges of the decoded buffers, for the alias checks.
    let aliases = Aliases::new(&frame, info.target);
    let result = catch_unwind(AssertUnwindSafe(|| {
        // Every stage but instantiate (whose frame has no buffers) sees the call's
        // buffers: a host handler must never see a device runtime's.
        if info.host && info.stage != Stage::Instantiate && !is_host_platform(&frame) {
            return Err(not_host(info));
        }
        let mut call = Call::new(&aliases, info);
        call.check_counts()?;
        body(&mut call)
    }));
    if let Ok(Ok(())) = result {
        return core::ptr::null_mut();
    }
    fail(frame.api, info, result)
}

/// The error of a host handler called on a device platform.
#[cold]
#[inline(never)]
fn not_host(info: &HandlerInfo) -> Error {
    Error::failed_precondition(format!(
        "{}: this handler is for host (CPU) buffers but was registered for a device \
         platform; register it with platform=\"cpu\", or declare it `platform = device`",
        info.target
    ))
}

/// The error of a frame `open` refused, through its API table when it has one.
#[cold]
#[inline(never)]
fn refused(api: Option<ApiTable<'_>>, e: &Error) -> *mut sys::XLA_FFI_Error {
    match api {
        Some(api) => api.make_error(e),
        None => no_table_error(e),
    }
}

/// The `XLA_FFI_Error` of a call whose decoding or body failed or panicked: the
/// message starts with the target, and a panic becomes `INTERNAL` with its message.
#[cold]
#[inline(never)]
fn fail(api: ApiTable<'_>, info: &HandlerInfo, result: std::thread::Result<Result<()>>) -> *mut sys::XLA_FFI_Error {
    let err = match result {
        Ok(Ok(())) => return core::ptr::null_mut(),
        Ok(Err(e)) if e.message().starts_with(info.target) => e,
        Ok(Err(e)) => e.context(info.target),
        Err(payload) => {
            let msg = catch_unwind(AssertUnwindSafe(|| panic_message(&*payload)))
                .unwrap_or_else(|_| "panic while formatting a panic".into());
            // Dropping the payload could itself panic (user code): contained.
            drop_payload(payload);
            Error::internal(format!("{}: handler panicked: {msg}", info.target))
        }
    };
    api.make_error(&err)
}

/// Reports an error for a call frame without a usable API table of its own: through
/// the first table this process saw. XLA never sends such a frame; if it did and no
/// table was ever seen, there is no way to create an error, and returning NULL would
/// claim success with the results unwritten, so the process stops with a message.
#[cold]
fn no_table_error(e: &Error) -> *mut sys::XLA_FFI_Error {
    match ApiTable::fallback() {
        Some(api) => api.make_error(e),
        None => {
            eprintln!("xla-ffi: fatal: {} (and no XLA FFI API table to report it through)", e.message());
            std::process::abort()
        }
    }
}
