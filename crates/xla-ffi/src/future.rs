//! Async handlers: `#[handler(async)]` and the [`AsyncCall`] that carries the rest of
//! the call to another thread.
//!
//! XLA lets an execute handler finish later: it creates an `XLA_FFI_Future`
//! (`XLA_FFI_Future_Create`), stores it in `call_frame->future`, returns no error,
//! and completes the future afterwards, from any thread, with
//! `XLA_FFI_Future_SetAvailable` or `XLA_FFI_Future_SetError` (which takes the
//! error's ownership). Until then XLA keeps the call's buffers alive and reads or
//! writes none of its results. The structures that *describe* the call (the call
//! frame, its `XLA_FFI_Buffer`s and dims, the attribute dictionary) and the invoke
//! context end when the handler returns: XLA:CPU frees them, or reuses them for the
//! next execution of the op, then.
//!
//! The shim of an async handler ([`dispatch_async`]):
//! 1. decodes and checks every parameter, as a synchronous handler does (through
//!    `dispatch`): a bad call is refused at once, with no future;
//! 2. copies the operand and result entries and the attributes (`snapshot.rs`);
//! 3. creates the future and stores it in the frame;
//! 4. hands an [`AsyncCall`] (the future and the copies) to the handler's spawner,
//!    and returns.
//!
//! [`AsyncCall::run`] decodes the parameters again, from the copies, with a
//! lifetime that ends inside `run`, calls the handler function, and completes the
//! future with its outcome. Completing consumes the `AsyncCall`, so nothing decoded
//! from it can be touched afterwards.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use xla_ffi_sys as sys;

use crate::alias::Aliases;
use crate::call::Call;
use crate::dispatch::dispatch;
use crate::error::{Error, Result};
use crate::frame::{api_slot, ApiTable, HandlerInfo};
use crate::panic::{drop_payload, panic_message};
use crate::snapshot::Snapshot;

/// The decoding and the call of the handler function, as the macro generates them.
type Body = for<'a, 'f> fn(&'a mut Call<'f>) -> Result<()>;

/// The rest of one call of an async handler (`#[handler(async)]`): the call's
/// future, its operands, results and attributes, and the handler function.
///
/// The handler's spawner receives it and must end it, on any thread and at any
/// time, by one of:
/// * [`run`](Self::run): decodes the parameters, calls the handler function and
///   completes the call with its outcome (an `Err` becomes the call's error with its
///   code, a panic an `INTERNAL` error holding the panic message);
/// * [`fail`](Self::fail): completes the call with an error, without running it;
/// * dropping it: completes the call with the error "`<target>`: the asynchronous
///   part ended without completing (promise dropped)", so a lost call never hangs
///   the program. A spawner that panics with the call still in hand completes it
///   with an `INTERNAL` error holding the panic message.
///
/// (`core::mem::forget` on it leaves the call pending for ever: XLA then waits, and
/// keeps the call's buffers, for ever. Nothing unsound happens.)
///
/// # Why the buffers are safe to use in it
/// XLA keeps the call's buffers alive, and touches none of its results, until the
/// future completes; the future completes only when the `AsyncCall` is consumed.
/// The views ([`Buffer`](crate::Buffer), [`ResultBuffer`](crate::ResultBuffer),
/// slices) exist only inside [`run`](Self::run), with a lifetime that ends there,
/// before the completion: the handler function is generic over it, so it cannot
/// store a view anywhere that outlives the call, nor send it to a thread that does.
/// It is `Send` (its pointers are XLA's, valid on every thread) and not `Clone`.
///
/// ```
/// use xla_ffi::testing::{Arg, CallBuilder};
/// use xla_ffi::{handler, AsyncCall, Buffer, Result, ResultBuffer};
///
/// // Each call runs on a thread of its own (the default spawner, `spawn_thread`).
/// #[handler(target = "demo.async_double", async)]
/// fn demo_async_double(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
///     for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
///         o.write(2.0 * v);
///     }
///     Ok(())
/// }
///
/// // A spawner of one's own: any `FnOnce(AsyncCall)` (a pool, an I/O completion).
/// fn later(call: AsyncCall) {
///     std::thread::spawn(move || call.run());
/// }
///
/// #[handler(target = "demo.async_copy", async = later)]
/// fn demo_async_copy(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
///     for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
///         o.write(v);
///     }
///     Ok(())
/// }
///
/// let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f32>(&[2]));
/// call.run(DEMO_ASYNC_DOUBLE).unwrap(); // waits for the future, as XLA does
/// assert_eq!(call.ret_as::<f32>(0), vec![2.0, 4.0]);
/// call.run(DEMO_ASYNC_COPY).unwrap();
/// assert_eq!(call.ret_as::<f32>(0), vec![1.0, 2.0]);
/// ```
pub struct AsyncCall {
    target: &'static str,
    /// Owned until completed: completing hands it back to XLA, which frees it.
    future: *mut sys::XLA_FFI_Future,
    /// Copies of the call's entries and attributes (XLA frees its own when the
    /// handler returns); their data pointers address XLA's buffers.
    frame: Snapshot,
    info: fn() -> HandlerInfo,
    body: Body,
    completed: bool,
}

// SAFETY: the pointers are XLA's: the API table (process-wide, its functions callable
// from any thread; XLA documents that futures may be completed from any thread), the
// future (owned by this object alone until completed), and the operand, result and
// attribute structures, alive until the future completes. XLA reads or writes none of
// the results until then, so the thread that runs the `AsyncCall` has them to itself;
// operands are only read. The context, which is tied to XLA's calling thread, is not
// kept. `AsyncCall` is not `Sync` and not `Clone`: one thread at a time owns it.
unsafe impl Send for AsyncCall {}

impl core::fmt::Debug for AsyncCall {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("AsyncCall").field("target", &self.target).finish_non_exhaustive()
    }
}

impl AsyncCall {
    /// The FFI target of the call.
    pub fn target(&self) -> &'static str {
        self.target
    }

    /// Runs the handler function on this thread and completes the call with its
    /// outcome: `Ok` completes it, an `Err` becomes the call's error (its code kept),
    /// a panic an `INTERNAL` error holding the panic message. Never unwinds.
    pub fn run(mut self) {
        let (info, body) = (self.info, self.body);
        let frame = &self.frame;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            // SAFETY: the future is not completed before `complete` below, so XLA
            // keeps the buffers the copied entries address alive, and untouched.
            let frame = unsafe { frame.frame() };
            let info = info();
            let aliases = Aliases::new(&frame, info.target);
            let mut call = Call::new(&aliases, &info);
            call.check_counts()?;
            body(&mut call)
            // Every view decoded from `frame` is dropped here, before completion.
        }));
        let result = match outcome {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e),
            Err(payload) => {
                let msg = catch_unwind(AssertUnwindSafe(|| panic_message(&*payload)))
                    .unwrap_or_else(|_| "panic while formatting a panic".into());
                drop_payload(payload);
                Err(Error::internal(format!("{}: handler panicked: {msg}", self.target)))
            }
        };
        self.complete(result);
    }

    /// Completes the call with `error` without running the handler function (say,
    /// the I/O it waited for failed). The message gets the target as a prefix unless
    /// it starts with it.
    pub fn fail(mut self, error: impl Into<Error>) {
        self.complete(Err(error.into()));
    }

    /// Completes the future, once. Never unwinds (beyond an allocation failure).
    fn complete(&mut self, result: Result<()>) {
        if core::mem::replace(&mut self.completed, true) {
            return;
        }
        let api = self.frame.api();
        match result {
            Ok(()) => set_available(api, self.future),
            Err(e) => {
                let e = if e.message().starts_with(self.target) { e } else { e.context(self.target) };
                set_error(api, self.future, &e)
            }
        }
    }
}

/// A call whose `AsyncCall` was dropped while a panic unwound through the spawner
/// (on the spawner's thread): completed after the spawner's panic is caught, with
/// its message.
struct Unwound {
    api: ApiTable<'static>,
    future: *mut sys::XLA_FFI_Future,
    target: &'static str,
}

std::thread_local! {
    /// `Some` while this thread runs a spawner ([`dispatch_async`]): the calls
    /// dropped by a panic in it, to complete with the panic's message.
    static UNWOUND: core::cell::RefCell<Option<Vec<Unwound>>> = const { core::cell::RefCell::new(None) };
}

impl Drop for AsyncCall {
    fn drop(&mut self) {
        if !self.completed && std::thread::panicking() {
            // `try_with`: no panic (an abort, while unwinding) if the thread's locals
            // are being destroyed.
            let deferred = UNWOUND
                .try_with(|u| match u.try_borrow_mut().as_deref_mut() {
                    Ok(Some(list)) => {
                        list.push(Unwound { api: self.frame.api(), future: self.future, target: self.target });
                        true
                    }
                    _ => false,
                })
                .unwrap_or(false);
            if deferred {
                self.completed = true;
                return;
            }
        }
        let why = if std::thread::panicking() {
            "the asynchronous part ended without completing (promise dropped while a panic unwound)"
        } else {
            "the asynchronous part ended without completing (promise dropped)"
        };
        let e = Error::internal(format!("{}: {why}", self.target));
        self.complete(Err(e));
    }
}

/// Completes `future` successfully.
fn set_available(api: ApiTable<'static>, future: *mut sys::XLA_FFI_Future) {
    // Checked present when the future was created (same table).
    let Some(set) = api_slot!(api, XLA_FFI_Future_SetAvailable) else { return };
    let mut args = sys::XLA_FFI_Future_SetAvailable_Args {
        struct_size: sys::XLA_FFI_Future_SetAvailable_Args_STRUCT_SIZE as usize,
        extension_start: core::ptr::null_mut(),
        future,
    };
    // SAFETY: the runtime's own function; `future` came from its `Future_Create` and is
    // completed only here or in `set_error`, once (`AsyncCall::complete`).
    let err = unsafe { set(&mut args) };
    let _ = api.take_error(err);
}

/// Completes `future` with `e`; the error made for it passes to XLA.
fn set_error(api: ApiTable<'static>, future: *mut sys::XLA_FFI_Future, e: &Error) {
    let Some(set) = api_slot!(api, XLA_FFI_Future_SetError) else { return };
    let error = api.make_error(e);
    let mut args = sys::XLA_FFI_Future_SetError_Args {
        struct_size: sys::XLA_FFI_Future_SetError_Args_STRUCT_SIZE as usize,
        extension_start: core::ptr::null_mut(),
        future,
        error,
    };
    // SAFETY: as in `set_available`; `error` is a non-OK error made by this table
    // (`make_error` never makes an OK one), whose ownership passes to XLA.
    let err = unsafe { set(&mut args) };
    let _ = api.take_error(err);
}

/// The lowest API version with the future functions (slots 13 to 15).
const FUTURE_SINCE: (i32, i32) = (0, 1);

/// Creates a future, after checking that the runtime's table has all three future
/// functions.
fn create_future(api: ApiTable<'_>, target: &str) -> Result<*mut sys::XLA_FFI_Future> {
    let have_all = api_slot!(api, XLA_FFI_Future_SetAvailable).is_some()
        && api_slot!(api, XLA_FFI_Future_SetError).is_some()
        && api.version() >= FUTURE_SINCE;
    let create = api_slot!(api, XLA_FFI_Future_Create).filter(|_| have_all).ok_or_else(|| {
        let (major, minor) = api.version();
        Error::unimplemented(format!(
            "{target}: this XLA runtime's FFI API table (API {major}.{minor}, {} bytes) has no future functions \
             (XLA_FFI_Future_Create, _SetAvailable, _SetError, API {}.{}); an async handler needs them",
            api.struct_size(),
            FUTURE_SINCE.0,
            FUTURE_SINCE.1
        ))
    })?;
    let mut args = sys::XLA_FFI_Future_Create_Args {
        struct_size: sys::XLA_FFI_Future_Create_Args_STRUCT_SIZE as usize,
        extension_start: core::ptr::null_mut(),
        future: core::ptr::null_mut(),
    };
    // SAFETY: the runtime's own function with fully initialised args.
    let err = unsafe { create(&mut args) };
    api.take_error(err).map_err(|e| e.context(format!("{target}: XLA_FFI_Future_Create failed")))?;
    if args.future.is_null() {
        return Err(Error::internal(format!("{target}: XLA_FFI_Future_Create gave no future")));
    }
    Ok(args.future)
}

/// Calls the spawner of `#[handler(async = spawner)]` with `call` (from a safe
/// `fn` the macro generates: the spawner expression is safe code there, and a
/// closure's parameter type is inferred from this signature).
#[doc(hidden)]
#[inline(always)]
pub fn spawn_with(call: AsyncCall, spawner: impl FnOnce(AsyncCall)) {
    spawner(call)
}

/// Runs an async handler's synchronous part: see the module docs.
///
/// `check` decodes and checks the parameters (the views are dropped), `body`
/// decodes them and calls the handler function; `info` rebuilds `HandlerInfo` on the
/// thread that runs the [`AsyncCall`].
///
/// # Safety
/// `raw` must be the call frame XLA passed to the handler.
#[doc(hidden)]
pub unsafe fn dispatch_async(
    raw: *mut sys::XLA_FFI_CallFrame,
    handler_info: &HandlerInfo,
    info: fn() -> HandlerInfo,
    check: Body,
    body: Body,
    spawn: impl FnOnce(AsyncCall),
) -> *mut sys::XLA_FFI_Error {
    let target = handler_info.target;
    let start = move |call: &mut Call<'_>| -> Result<()> {
        check(call)?;
        let snapshot = Snapshot::of(call.frame)?;
        let future = create_future(call.frame.api, target)?;
        // SAFETY: `raw` is XLA's call frame (the caller's promise), and `open` (in
        // `dispatch`) checked it is at least `XLA_FFI_CallFrame_STRUCT_SIZE` bytes.
        // The `future` field lies just past that size, which stops at `attrs`, yet
        // the runtime's struct has the field, and XLA reads it after the handler
        // returns (it is how an async result is returned, since API 0.1).
        unsafe { core::ptr::addr_of_mut!((*raw).future).write(future) };
        let call = AsyncCall { target, future, frame: snapshot, info, body, completed: false };
        // From here on the call's outcome goes through the future: the handler returns
        // no error. A panic in the spawner drops the `AsyncCall`, which, on this
        // thread, leaves the completion to the code below, with the panic's message.
        let outer = UNWOUND.with(|u| u.replace(Some(Vec::new())));
        let outcome = catch_unwind(AssertUnwindSafe(move || spawn(call)));
        let unwound = UNWOUND.with(|u| u.replace(outer)).unwrap_or_default();
        let why = match &outcome {
            Err(payload) => format!("the async spawner panicked before the call ran: {}", panic_message(&**payload)),
            Ok(()) => "the asynchronous part ended without completing (promise dropped while a panic unwound)".into(),
        };
        for u in unwound {
            set_error(u.api, u.future, &Error::internal(format!("{}: {why}", u.target)));
        }
        if let Err(payload) = outcome {
            drop_payload(payload);
        }
        Ok(())
    };
    // SAFETY: forwarded from the caller.
    unsafe { dispatch(raw, handler_info, start) }
}

/// The default spawner of `#[handler(async)]`: runs the call on a new thread
/// (named after the target). If no thread can be started, the call completes with
/// an error saying so.
pub fn spawn_thread(call: AsyncCall) {
    let slot = Arc::new(Mutex::new(Some(call)));
    let theirs = Arc::clone(&slot);
    let started = std::thread::Builder::new().name("xla-ffi async".into()).spawn(move || {
        let call = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(call) = call {
            call.run();
        }
    });
    if let Err(e) = started {
        let call = slot.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(call) = call {
            let target = call.target();
            call.fail(Error::resource_exhausted(format!("{target}: could not start a thread for the call: {e}")));
        }
    }
}
