//! Per-handler state: created once per call site at the instantiate stage, owned
//! by XLA (freed through the type's deleter when the executable dies), and read as
//! `&S` by every execution, from any number of threads at once.
//!
//! 1. Declare the type: `xla_ffi::state_type!(MyState);` (it must be `Send + Sync`).
//! 2. Register it with XLA from Python before the handlers, with the capsules from
//!    [`python::type_registration`](crate::python) (or your own):
//!    `jax.ffi.register_ffi_type("my_state", {"type_id": ..., "type_info": ...})`.
//! 3. Write an instantiate handler returning `Result<MyState>` and an execute handler
//!    taking `state: State<MyState>`, and register them as one bundle:
//!    `register_ffi_target(name, {"instantiate": c1, "execute": c2})`.

use core::ffi::c_void;
use core::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI64, Ordering};

use xla_ffi_sys as sys;

use crate::call::{Call, Decode};
use crate::context::Context;
use crate::dispatch::dispatch;
use crate::error::{Error, Result};
use crate::frame::HandlerInfo;

/// The registration record XLA needs for state type `S`: an `XLA_FFI_TypeId` that XLA
/// fills in when the type is registered, and an `XLA_FFI_TypeInfo` whose deleter
/// frees a `Box<S>`.
///
/// The record is typed: [`StateType::registration`] returns a
/// `&'static TypeRegistration<Self>`, and the only way to make one is
/// [`TypeRegistration::new`], whose deleter is `S`'s own. So safe code cannot hand
/// one type's record (its id, under which XLA stores the state, and its deleter) to
/// another type: the compiler refuses it. Execute handlers read the state XLA stores
/// under the id as `&S`, and XLA frees it with the record's deleter, both sound only
/// because the record belongs to `S`.
#[repr(C)]
pub struct TypeRegistration<S> {
    /// Laid out as `XLA_FFI_TypeId { int64_t type_id }`; XLA writes it once.
    id: AtomicI64,
    info: sys::XLA_FFI_TypeInfo,
    _state: PhantomData<fn() -> S>,
}

// SAFETY: `info` holds a null extension pointer and a function pointer, never
// written after construction; `id` is atomic; no `S` is stored.
unsafe impl<S> Sync for TypeRegistration<S> {}

unsafe extern "C" fn delete_box<S: Send + Sync + 'static>(p: *mut c_void) {
    if !p.is_null() {
        // SAFETY: XLA passes back the pointer the instantiate stage stored under this
        // record's id, which is a `Box<S>` leaked by `dispatch_instantiate::<S>` (the
        // record is `TypeRegistration<S>`, so only `S`'s instantiate stores under it);
        // XLA calls the deleter once.
        let b = unsafe { Box::from_raw(p as *mut S) };
        // A panicking Drop must not unwind into XLA, nor may dropping its payload
        // (whose own Drop may panic too).
        if let Err(payload) = catch_unwind(AssertUnwindSafe(move || drop(b))) {
            crate::panic::drop_payload(payload);
        }
    }
}

impl<S: Send + Sync + 'static> TypeRegistration<S> {
    /// The record for state type `S` (its deleter drops a `Box<S>`).
    pub const fn new() -> Self {
        TypeRegistration {
            id: AtomicI64::new(0),
            info: sys::XLA_FFI_TypeInfo {
                struct_size: sys::XLA_FFI_TypeInfo_STRUCT_SIZE as usize,
                extension_start: core::ptr::null_mut(),
                deleter: Some(delete_box::<S>),
            },
            _state: PhantomData,
        }
    }
}

impl<S: Send + Sync + 'static> Default for TypeRegistration<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S> TypeRegistration<S> {
    /// The id XLA assigned, or 0 before registration.
    pub fn type_id(&self) -> i64 {
        self.id.load(Ordering::Acquire)
    }
    /// Sets the id, as XLA does at registration (for the fake runtime of `testing`).
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn set_type_id(&self, id: i64) {
        self.id.store(id, Ordering::Release);
    }
    /// The address to hand XLA as `XLA_FFI_TypeId*` (XLA writes the id there).
    pub fn type_id_ptr(&'static self) -> *mut c_void {
        &self.id as *const AtomicI64 as *mut c_void
    }
    /// The address to hand XLA as `XLA_FFI_TypeInfo*`.
    pub fn type_info_ptr(&'static self) -> *mut c_void {
        &self.info as *const sys::XLA_FFI_TypeInfo as *mut c_void
    }
}

/// A type usable as handler state. Implement it with [`state_type!`](crate::state_type).
///
/// The trait is safe to implement: [`registration`](Self::registration) must return a
/// `&'static TypeRegistration<Self>`, which only [`TypeRegistration::new`] makes, so an
/// implementation cannot return another type's record (see [`TypeRegistration`]).
/// Return the same `static` on every call: XLA writes the type's id into the record it
/// was given, and a record it never saw has id 0 (the type counts as unregistered).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a handler state type",
    note = "declare it with `xla_ffi::state_type!({Self});` (it must be `Send + Sync + 'static`)"
)]
pub trait StateType: Send + Sync + Sized + 'static {
    /// The type's registration record.
    fn registration() -> &'static TypeRegistration<Self>;
}

/// Declares a handler state type: `xla_ffi::state_type!(MyState);`.
#[macro_export]
macro_rules! state_type {
    ($t:ty) => {
        impl $crate::StateType for $t {
            fn registration() -> &'static $crate::TypeRegistration<$t> {
                static REG: $crate::TypeRegistration<$t> = $crate::TypeRegistration::<$t>::new();
                &REG
            }
        }
    };
}

/// A handler parameter: the state the instantiate stage created, as `&S`.
pub struct State<'f, S: StateType> {
    state: &'f S,
}

impl<S: StateType> core::ops::Deref for State<'_, S> {
    type Target = S;
    fn deref(&self) -> &S {
        self.state
    }
}

impl<'f, S: StateType> Decode<'f> for State<'f, S> {
    const NEEDS_CONTEXT: bool = true;
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        // The attribute policy: see `Call::accept_unbound_attrs`.
        call.accept_unbound_attrs();
        let ctx = Context::of(call, name)?;
        let id = S::registration().type_id();
        if id == 0 {
            call.problem(format!(
                "{}: state `{name}`: its type is not registered with XLA (call jax.ffi.register_ffi_type first)",
                call.target()
            ));
            return None;
        }
        match ctx.state_ptr(id) {
            Ok(p) if !p.is_null() => Some(State {
                // SAFETY: XLA returns the pointer stored at instantiate for this type id,
                // a `Box<S>` it keeps alive until the executable dies, so beyond this call;
                // only shared references are ever made (S: Sync).
                state: unsafe { &*(p as *const S) },
            }),
            Ok(_) => {
                call.problem(format!("{}: state `{name}`: none was created at instantiate", call.target()));
                None
            }
            Err(e) => {
                let target = call.target();
                let why = e.message().strip_prefix(target).unwrap_or(e.message()).trim_start_matches(": ");
                call.problem(format!("{target}: state `{name}`: {why}"));
                None
            }
        }
    }
    fn state_type_id() -> i64 {
        S::registration().type_id()
    }
}

/// Runs an instantiate body and hands its state to XLA.
///
/// # Safety
/// `raw` must be the call frame XLA passed to the handler.
#[doc(hidden)]
pub unsafe fn dispatch_instantiate<S: StateType>(
    raw: *mut sys::XLA_FFI_CallFrame,
    info: &HandlerInfo,
    body: impl for<'f> FnOnce(&mut Call<'f>) -> Result<S>,
) -> *mut sys::XLA_FFI_Error {
    let run = |call: &mut Call<'_>| -> Result<()> {
        let id = S::registration().type_id();
        if id == 0 {
            return Err(Error::failed_precondition(format!(
                "{}: the state type is not registered with XLA; call jax.ffi.register_ffi_type \
                 before registering the handler",
                call.target()
            )));
        }
        let state = body(call)?;
        let ptr = Box::into_raw(Box::new(state)) as *mut c_void;
        let ctx = Context { frame: call.frame, target: call.target() };
        if let Err(e) = ctx.set_state(id, ptr) {
            // XLA did not take it: free it ourselves.
            // SAFETY: `ptr` came from Box::into_raw above and XLA did not keep it.
            drop(unsafe { Box::from_raw(ptr as *mut S) });
            return Err(e);
        }
        Ok(())
    };
    // SAFETY: forwarded from the caller.
    unsafe { dispatch(raw, info, run) }
}
