//! Per-handler state: created for a call site at the instantiate stage (or, on
//! GPU, at the prepare or initialize stage), owned by XLA (freed through the type's
//! deleter when the executable dies), and read as `&S` by the later stages, from
//! any number of threads at once. The stage is in the parameter's type:
//! `State<S>`, `Prepared<S>`, `Initialized<S>` (see [`State`]).
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
use crate::frame::{HandlerInfo, Stage};
use crate::stage::{Initialize, Instantiate, Prepare, StateStage};

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
        // record's id, which is a `Box<S>` leaked by `dispatch_stage::<S>` (the
        // record is `TypeRegistration<S>`, so only a stage returning `S` stores under it);
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

/// A handler parameter: the state that stage `At` created for this call site, as
/// `&S` (`ffi.h`'s `State<T>`, `Prepared<T>`, `Initialized<T>`).
///
/// `At` is [`stage::Instantiate`](crate::stage::Instantiate) (the default),
/// [`stage::Prepare`](crate::stage::Prepare) or
/// [`stage::Initialize`](crate::stage::Initialize); [`Prepared<S>`] and
/// [`Initialized<S>`] are short for the last two. A handler may read only the
/// state of an earlier stage: the [`handler`](crate::handler) macro refuses, at
/// compile time, a prepare handler that takes `State<S, Initialize>` or an
/// instantiate handler that takes any state, and the decoder checks the stage of
/// the call again at run time.
///
/// XLA:CPU runs only the instantiate and execute stages, so on the CPU only
/// `State<S>` exists: a host handler (`platform = host`, the default) that takes
/// prepare or initialize state gets an `INVALID_ARGUMENT` error naming the
/// parameter, without asking XLA (whose CPU runtime keeps no such state).
///
/// A GPU bundle whose prepare stage creates a workspace description that the
/// execute stage reads (run here on synthetic frames):
///
/// ```
/// use xla_ffi::testing::{register_state_type, CallBuilder, FakeApi};
/// use xla_ffi::{handler, state_type, Prepared, Result, Stage};
///
/// struct Plan { bytes: usize }
/// state_type!(Plan);
///
/// #[handler(target = "demo.plan", stage = prepare, platform = device)]
/// fn demo_plan_prepare() -> Result<Plan> {
///     Ok(Plan { bytes: 1 << 20 })
/// }
///
/// #[handler(target = "demo.plan", platform = device)]
/// fn demo_plan(plan: Prepared<Plan>) -> Result<()> {
///     assert_eq!(plan.bytes, 1 << 20);
///     Ok(())
/// }
///
/// register_state_type::<Plan>(51); // as jax.ffi.register_ffi_type does
/// let mut call = CallBuilder::new().api(FakeApi::device_like(5)).stage(Stage::Prepare);
/// call.run(DEMO_PLAN_PREPARE).unwrap();
/// call.set_stage(Stage::Execute);
/// call.run(DEMO_PLAN).unwrap();
/// ```
pub struct State<'f, S: StateType, At: StateStage = Instantiate> {
    state: &'f S,
    _stage: PhantomData<At>,
}

/// The state a prepare handler created: `State<S, stage::Prepare>` (`ffi.h`'s
/// `Prepared<T>`). GPU only: XLA:CPU never runs the prepare stage.
pub type Prepared<'f, S> = State<'f, S, Prepare>;

/// The state an initialize handler created: `State<S, stage::Initialize>`
/// (`ffi.h`'s `Initialized<T>`). GPU only: XLA:CPU never runs the initialize stage.
pub type Initialized<'f, S> = State<'f, S, Initialize>;

impl<S: StateType, At: StateStage> core::ops::Deref for State<'_, S, At> {
    type Target = S;
    fn deref(&self) -> &S {
        self.state
    }
}

impl<'f, S: StateType, At: StateStage> Decode<'f> for State<'f, S, At> {
    const STATE_STAGE: Option<Stage> = Some(At::STAGE);
    const NEEDS_CONTEXT: bool = true;
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        // The attribute policy: see `Call::accept_unbound_attrs`.
        call.accept_unbound_attrs();
        let target = call.target();
        let at = At::STAGE;
        let ctx = Context::of(call, name)?;
        // The macro checks the stage at compile time; a `Decode` of another type
        // that wraps this one is checked here. XLA is never asked for a stage's
        // state before that stage ran (its runtime may not keep it yet).
        match ctx.stage() {
            Some(now) if now.reads_state_of(at) => {}
            now => {
                call.problem(format!(
                    "{target}: state `{name}`: a handler at the {} stage cannot read the state of the {} stage \
                     (only a later stage can)",
                    now.map_or("unknown", Stage::name),
                    at.name()
                ));
                return None;
            }
        }
        if at != Stage::Instantiate && call.frame.host {
            call.problem(format!(
                "{target}: state `{name}`: {} state exists only on GPU: XLA:CPU never runs the {} stage; \
                 take `State<S>` (instantiate state) in a CPU handler",
                at.name(),
                at.name()
            ));
            return None;
        }
        let id = S::registration().type_id();
        if id == 0 {
            call.problem(format!(
                "{target}: state `{name}`: its type is not registered with XLA (call jax.ffi.register_ffi_type first)"
            ));
            return None;
        }
        match ctx.state_ptr(id, at) {
            Ok(p) if !p.is_null() => Some(State {
                // SAFETY: XLA returns the pointer stored at stage `at` for this type
                // id, a `Box<S>` (only `S`'s record carries the id) that it keeps
                // alive until the executable dies, so beyond this call; only shared
                // references are ever made (S: Sync).
                state: unsafe { &*(p as *const S) },
                _stage: PhantomData,
            }),
            Ok(_) => {
                call.problem(format!("{target}: state `{name}`: none was created at {}", at.name()));
                None
            }
            Err(e) => {
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

/// What a handler at a stage that creates state (instantiate, prepare,
/// initialize) returns in its `Result`: a state type, which XLA then keeps for
/// the call site at that stage, or `()` (a handler that keeps none).
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "an instantiate, prepare or initialize handler returns `xla_ffi::Result<S>` with `S` a state type, or `Result<()>`, not `Result<{Self}>`",
    label = "not a state type",
    note = "declare the state with `xla_ffi::state_type!({Self});` (it must be `Send + Sync + 'static`)"
)]
pub trait StageOutput: Sized {
    /// The type id reported to XLA's metadata query (0 for `()`).
    fn state_type_id() -> i64;
    /// Checks, before the body runs, that a value could be stored.
    fn check(ctx: &Context<'_>, stage: Stage) -> Result<()>;
    /// Hands the value to XLA as the state of the frame's stage.
    fn store(self, ctx: &Context<'_>, stage: Stage) -> Result<()>;
}

impl StageOutput for () {
    fn state_type_id() -> i64 {
        0
    }
    fn check(_ctx: &Context<'_>, _stage: Stage) -> Result<()> {
        Ok(())
    }
    fn store(self, _ctx: &Context<'_>, _stage: Stage) -> Result<()> {
        Ok(())
    }
}

impl<S: StateType> StageOutput for S {
    fn state_type_id() -> i64 {
        S::registration().type_id()
    }
    fn check(ctx: &Context<'_>, stage: Stage) -> Result<()> {
        if S::registration().type_id() == 0 {
            return Err(Error::failed_precondition(format!(
                "{}: the state type is not registered with XLA; call jax.ffi.register_ffi_type \
                 before registering the handler",
                ctx.target
            )));
        }
        ctx.check_state_stage(stage)
    }
    fn store(self, ctx: &Context<'_>, stage: Stage) -> Result<()> {
        let id = S::registration().type_id();
        let ptr = Box::into_raw(Box::new(self)) as *mut c_void;
        if let Err(e) = ctx.set_state(id, stage, ptr) {
            // XLA did not take it: free it ourselves.
            // SAFETY: `ptr` came from Box::into_raw above and XLA did not keep it.
            drop(unsafe { Box::from_raw(ptr as *mut S) });
            return Err(e);
        }
        Ok(())
    }
}

/// Runs the body of a handler at a stage that creates state (instantiate,
/// prepare, initialize) and hands what it returns to XLA as that stage's state.
///
/// # Safety
/// `raw` must be the call frame XLA passed to the handler.
#[doc(hidden)]
pub unsafe fn dispatch_stage<O: StageOutput>(
    raw: *mut sys::XLA_FFI_CallFrame,
    info: &HandlerInfo,
    body: impl for<'f> FnOnce(&mut Call<'f>) -> Result<O>,
) -> *mut sys::XLA_FFI_Error {
    let stage = info.stage;
    let run = |call: &mut Call<'_>| -> Result<()> {
        // Checked before the body runs: no work is done for a state XLA cannot keep.
        O::check(&Context { frame: call.frame, target: call.target() }, stage)?;
        let state = body(call)?;
        let ctx = Context { frame: call.frame, target: call.target() };
        state.store(&ctx, stage)
    };
    // SAFETY: forwarded from the caller.
    unsafe { dispatch(raw, info, run) }
}

impl<S: StateType + core::fmt::Debug, At: StateStage> core::fmt::Debug for State<'_, S, At> {
    /// The state, as `S` shows it (a `State` is a `&S`).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("State").field(self.state).finish()
    }
}

impl<S> core::fmt::Debug for TypeRegistration<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TypeRegistration")
            .field("type", &core::any::type_name::<S>())
            .field("id", &self.id.load(core::sync::atomic::Ordering::Acquire))
            .finish_non_exhaustive()
    }
}
