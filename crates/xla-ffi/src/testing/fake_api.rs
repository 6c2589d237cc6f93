//! The fake XLA runtime: the API table ([`FakeApi`]) and its functions (errors,
//! streams, states, user data, extensions, futures), the invoke context each
//! synthetic call points at, and the registry of state types.

use core::ffi::{c_char, c_void};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Mutex;

use xla_ffi_sys as sys;

use super::{future, CallResult};
use crate::ErrorCode;

/// An error made by the fake `Error_Create`.
pub(super) struct FakeError {
    code: u32,
    message: CString,
}

/// The fake invoke context that `ctx` points to.
pub(crate) struct FakeCtx {
    pub(super) threads: i64,
    pub(super) device_ordinal: i32,
    pub(super) run_id: i64,
    /// The states set at the instantiate, prepare and initialize stages, by
    /// (stage, type id), as XLA keeps one state store per stage; freed with the
    /// type's deleter when the context is dropped, as XLA frees them when the
    /// executable dies.
    pub(super) states: Mutex<HashMap<(u32, i64), StatePtr>>,
    pub(super) scheduled: Mutex<usize>,
    pub(super) stream: usize,
    /// User data by type id, as an embedder's `ExecutionContext` holds it; freed
    /// when the context is dropped.
    pub(super) user_data: Vec<UserDataEntry>,
    /// What `CustomOptions_Get` returns (NULL: a NULL dictionary pointer).
    pub(super) custom_options: OptionsPtr,
    /// The public extensions attached to the context (`CallBuilder::extension`).
    pub(super) extensions: Vec<UserDataEntry>,
}

/// One value of user data: its type id, the leaked `Box<T>` and the function that
/// frees it.
pub(super) struct UserDataEntry {
    pub(super) id: i64,
    pub(super) data: *mut c_void,
    pub(super) drop: unsafe fn(*mut c_void),
}
// SAFETY: every value stored is `Send + Sync`: user data types through `StateType`,
// extensions through the bounds of `CallBuilder::extension`; and the entry only
// hands out the pointer for shared reads.
unsafe impl Send for UserDataEntry {}
// SAFETY: as above.
unsafe impl Sync for UserDataEntry {}

/// The custom options dictionary of one synthetic call (built by `run`, alive for
/// the call, never written through).
pub(super) struct OptionsPtr(pub(super) *const sys::XLA_FFI_Attrs);
// SAFETY: only read, by the call's handler, while `run` keeps the dictionary alive.
unsafe impl Send for OptionsPtr {}
// SAFETY: as above.
unsafe impl Sync for OptionsPtr {}

/// Frees a `Box<T>` leaked by [`CallBuilder::user_data`](super::CallBuilder::user_data).
///
/// # Safety
/// `p` must come from `Box::<T>::into_raw` and be freed once.
pub(super) unsafe fn drop_box<T>(p: *mut c_void) {
    // SAFETY: guaranteed by the caller.
    drop(unsafe { Box::from_raw(p as *mut T) });
}

/// A state pointer XLA holds (kept as a pointer, with its provenance).
pub(super) struct StatePtr(*mut c_void);
// SAFETY: states are `Send + Sync` (`StateType` requires it).
unsafe impl Send for StatePtr {}

/// The state types registered with the fake runtime: id, address of the type's
/// registration record, and its deleter.
pub(super) type Deleter = unsafe extern "C" fn(*mut c_void);
pub(super) static REGISTERED: Mutex<Vec<(i64, usize, Deleter)>> = Mutex::new(Vec::new());

impl Drop for FakeCtx {
    fn drop(&mut self) {
        let states = core::mem::take(self.states.get_mut().unwrap_or_else(|e| e.into_inner()));
        let deleters = REGISTERED.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for ((_, id), StatePtr(p)) in states {
            if let Some(&(_, _, delete)) = deleters.iter().rev().find(|(i, _, _)| *i == id) {
                // SAFETY: `p` is the state the instantiate stage handed over for type
                // `id`, and this is the one place it is freed, once.
                unsafe { delete(p) };
            }
        }
        for e in core::mem::take(&mut self.user_data).into_iter().chain(core::mem::take(&mut self.extensions)) {
            // SAFETY: `data` is the `Box<T>` `CallBuilder::user_data` (or
            // `extension`) leaked, with `drop_box::<T>`; this is the one place it
            // is freed, once.
            unsafe { (e.drop)(e.data) };
        }
    }
}

impl FakeCtx {
    pub(crate) fn new(threads: i64) -> Self {
        FakeCtx {
            threads,
            device_ordinal: 0,
            run_id: 42,
            states: Mutex::new(HashMap::new()),
            scheduled: Mutex::new(0),
            stream: 0x1000,
            user_data: Vec::new(),
            custom_options: OptionsPtr(core::ptr::null()),
            extensions: Vec::new(),
        }
    }
}

/// Takes an error the handler returned (made by the fake `Error_Create`).
pub(crate) fn take_error(err: *mut sys::XLA_FFI_Error) -> CallResult {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: the handler returned an error made by our fake Error_Create.
    let e = unsafe { Box::from_raw(err as *mut FakeError) };
    Err((ErrorCode::from_raw(e.code), e.message.to_string_lossy().into_owned()))
}

pub(super) unsafe extern "C" fn error_create(args: *mut sys::XLA_FFI_Error_Create_Args) -> *mut sys::XLA_FFI_Error {
    // SAFETY: the crate under test passes valid args with a NUL-terminated message.
    let args = unsafe { &*args };
    assert!(args.struct_size >= sys::XLA_FFI_Error_Create_Args_STRUCT_SIZE as usize);
    assert_ne!(args.errc, 0, "Error_Create called with OK");
    // SAFETY: as above.
    let message = unsafe { core::ffi::CStr::from_ptr(args.message) }.to_owned();
    Box::into_raw(Box::new(FakeError { code: args.errc, message })) as *mut sys::XLA_FFI_Error
}

pub(super) unsafe extern "C" fn error_get_details(args: *mut sys::compat::XLA_FFI_Error_GetDetails_Args) {
    // SAFETY: valid args holding an error from `error_create`.
    let args = unsafe { &mut *args };
    // SAFETY: as above.
    let e = unsafe { &*(args.error as *const FakeError) };
    args.message = e.message.as_ptr() as *const c_char;
    sys::compat::set_error_details_code(args, e.code);
}

/// `Error_GetMessage` of an API 0.3 runtime: the message only; `errc` (which a 0.3
/// args struct does not have) is left alone, as jaxlib 0.10 does.
pub(super) unsafe extern "C" fn error_get_message_0_3(args: *mut sys::compat::XLA_FFI_Error_GetDetails_Args) {
    // SAFETY: valid args holding an error from `error_create`.
    let args = unsafe { &mut *args };
    // SAFETY: as above.
    let e = unsafe { &*(args.error as *const FakeError) };
    args.message = e.message.as_ptr() as *const c_char;
}

pub(super) unsafe extern "C" fn error_destroy(args: *mut sys::XLA_FFI_Error_Destroy_Args) {
    // SAFETY: destroys an error from `error_create`, once.
    drop(unsafe { Box::from_raw((*args).error as *mut FakeError) });
}

pub(super) fn ctx<'a>(raw: *mut sys::compat::XLA_FFI_InvokeContext) -> &'a FakeCtx {
    // SAFETY: every frame built here points `ctx` at a live FakeCtx.
    unsafe { &*(raw as *const FakeCtx) }
}

pub(super) fn fake_error(code: ErrorCode, msg: &str) -> *mut sys::XLA_FFI_Error {
    let message = CString::new(msg).unwrap();
    Box::into_raw(Box::new(FakeError { code: code.to_raw(), message })) as *mut sys::XLA_FFI_Error
}

pub(super) unsafe extern "C" fn stream_get(_args: *mut sys::XLA_FFI_Stream_Get_Args) -> *mut sys::XLA_FFI_Error {
    fake_error(ErrorCode::Unimplemented, "XLA FFI GPU context is not available")
}

/// As XLA:CPU answers (observed on jaxlib 0.12: `INVALID_ARGUMENT`): a host call has
/// no device allocator.
pub(super) unsafe extern "C" fn device_memory_allocate_host(
    _args: *mut sys::XLA_FFI_DeviceMemory_Allocate_Args,
) -> *mut sys::XLA_FFI_Error {
    fake_error(ErrorCode::InvalidArgument, "XLA FFI GPU context is not available")
}

/// The device-like table has no device memory to give (XLA:GPU's allocator is not
/// emulated): an error that says so, rather than a missing slot.
pub(super) unsafe extern "C" fn device_memory_allocate_device(
    _args: *mut sys::XLA_FFI_DeviceMemory_Allocate_Args,
) -> *mut sys::XLA_FFI_Error {
    fake_error(ErrorCode::Unimplemented, "fake XLA: the device-like test runtime allocates no device memory (scratch)")
}

pub(super) unsafe extern "C" fn stream_get_device(args: *mut sys::XLA_FFI_Stream_Get_Args) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args from the crate under test; the stream is the one set with
    // `CallBuilder::device_stream`, or a dummy address.
    unsafe { (*args).stream = core::ptr::without_provenance_mut(ctx((*args).ctx).stream) };
    core::ptr::null_mut()
}

pub(super) unsafe extern "C" fn device_ordinal_get(
    args: *mut sys::XLA_FFI_DeviceOrdinal_Get_Args,
) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args from the crate under test.
    let args = unsafe { &mut *args };
    args.device_ordinal = ctx(args.ctx).device_ordinal;
    core::ptr::null_mut()
}

pub(super) unsafe extern "C" fn run_id_get(args: *mut sys::XLA_FFI_RunId_Get_Args) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args from the crate under test.
    let args = unsafe { &mut *args };
    if args.struct_size < sys::XLA_FFI_RunId_Get_Args_STRUCT_SIZE as usize {
        return fake_error(ErrorCode::InvalidArgument, "Unexpected XLA_FFI_RunId_Get size");
    }
    args.run_id = ctx(args.ctx).run_id;
    core::ptr::null_mut()
}

pub(super) unsafe extern "C" fn num_threads_unavailable(
    _args: *mut sys::XLA_FFI_ThreadPool_NumThreads_Args,
) -> *mut sys::XLA_FFI_Error {
    fake_error(ErrorCode::InvalidArgument, "XLA FFI CPU context is not available")
}

pub(super) unsafe extern "C" fn num_threads(
    args: *mut sys::XLA_FFI_ThreadPool_NumThreads_Args,
) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args with a valid out pointer.
    unsafe { *(*args).num_threads = ctx((*args).ctx).threads };
    core::ptr::null_mut()
}

pub(super) struct SendPtr(*mut c_void, unsafe extern "C" fn(*mut c_void));
// SAFETY: the task's data is an Arc meant to cross threads.
unsafe impl Send for SendPtr {}

pub(super) unsafe extern "C" fn schedule(args: *mut sys::XLA_FFI_ThreadPool_Schedule_Args) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args from the crate under test.
    let args = unsafe { &*args };
    // Nothing here may panic (this is `extern "C"`): each failure is an error.
    let Some(f) = args.task else {
        return fake_error(ErrorCode::InvalidArgument, "fake XLA: ThreadPool_Schedule without a task");
    };
    *ctx(args.ctx).scheduled.lock().unwrap_or_else(|e| e.into_inner()) += 1;
    let task = SendPtr(args.data, f);
    // A real pool runs tasks later, on other threads: do the same.
    let spawned = std::thread::Builder::new().spawn(move || {
        let t = task;
        // SAFETY: runs the scheduled task with its own data, once.
        unsafe { (t.1)(t.0) }
    });
    match spawned {
        Ok(_) => core::ptr::null_mut(),
        Err(e) => fake_error(ErrorCode::ResourceExhausted, &format!("fake XLA: cannot start a pool thread: {e}")),
    }
}

/// XLA keeps state for the instantiate, prepare and initialize stages only; its
/// runtime dereferences a null store for any other stage. The fake API answers
/// with an error that names this (the crate must never ask).
pub(super) fn state_stage(stage: u32) -> Result<u32, *mut sys::XLA_FFI_Error> {
    let ok = [
        sys::XLA_FFI_ExecutionStage_INSTANTIATE,
        sys::XLA_FFI_ExecutionStage_PREPARE,
        sys::XLA_FFI_ExecutionStage_INITIALIZE,
    ];
    if ok.contains(&stage) {
        Ok(stage)
    } else {
        Err(fake_error(ErrorCode::Internal, &format!("fake XLA: no state store for stage {stage} (XLA would crash)")))
    }
}

pub(super) unsafe extern "C" fn state_set(args: *mut sys::XLA_FFI_State_Set_Args) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args from the crate under test.
    let args = unsafe { &*args };
    // SAFETY: type_id points to a valid id.
    let id = unsafe { (*args.type_id).type_id };
    let key = match state_stage(args.stage) {
        Ok(stage) => (stage, id),
        Err(e) => return e,
    };
    let mut states = ctx(args.ctx).states.lock().unwrap();
    if states.contains_key(&key) {
        return fake_error(ErrorCode::AlreadyExists, "state already set");
    }
    states.insert(key, StatePtr(args.state));
    core::ptr::null_mut()
}

pub(super) unsafe extern "C" fn state_get(args: *mut sys::XLA_FFI_State_Get_Args) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args from the crate under test.
    let args = unsafe { &mut *args };
    // SAFETY: type_id points to a valid id.
    let id = unsafe { (*args.type_id).type_id };
    let key = match state_stage(args.stage) {
        Ok(stage) => (stage, id),
        Err(e) => return e,
    };
    match ctx(args.ctx).states.lock().unwrap().get(&key) {
        Some(p) => {
            args.state = p.0;
            core::ptr::null_mut()
        }
        None => fake_error(ErrorCode::NotFound, "state not found"),
    }
}

pub(super) unsafe extern "C" fn invoke_context_get(
    args: *mut sys::compat::XLA_FFI_InvokeContext_Get_Args,
) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args from the crate under test.
    let args = unsafe { &mut *args };
    if args.struct_size < sys::compat::XLA_FFI_InvokeContext_Get_Args_STRUCT_SIZE as usize {
        return fake_error(ErrorCode::InvalidArgument, "Unexpected XLA_FFI_InvokeContext_Get size");
    }
    // SAFETY: type_id points to a valid id.
    let id = unsafe { (*args.type_id).type_id };
    match ctx(args.ctx).user_data.iter().rev().find(|e| e.id == id) {
        Some(e) => {
            args.data = e.data;
            core::ptr::null_mut()
        }
        // XLA's own words (`ExecutionContext::LookupUserData`).
        None => fake_error(ErrorCode::NotFound, &format!("User data with type id {id} not found")),
    }
}

pub(super) unsafe extern "C" fn custom_options_get(
    args: *mut sys::compat::CustomOptionsGetArgs,
) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args from the crate under test.
    let args = unsafe { &mut *args };
    args.attrs = ctx(args.ctx).custom_options.0;
    core::ptr::null_mut()
}

pub(super) unsafe extern "C" fn find_extension(args: *mut sys::compat::FindExtensionArgs) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args from the crate under test.
    let args = unsafe { &mut *args };
    if args.struct_size < sys::compat::FindExtensionArgs_STRUCT_SIZE as usize {
        return fake_error(ErrorCode::InvalidArgument, "Unexpected XLA_FFI_InvokeContext_FindExtension size");
    }
    // As XLA does: the first extension of that id, or NULL (no error) when none.
    args.extension = ctx(args.ctx)
        .extensions
        .iter()
        .map(|e| e.data as *const sys::compat::ExtensionHeader)
        // SAFETY: every entry is a live `Box<E>` whose layout starts with the header
        // (`Extension`'s contract).
        .find(|&h| unsafe { (*h).id.extension_type } == args.extension_type)
        .unwrap_or(core::ptr::null());
    core::ptr::null_mut()
}

/// A public extension for tests and examples, of id [`DemoExtension::ID`] and
/// version 1.2: the `XLA_FFI_Extension` header and one value. Attach one to a
/// synthetic call with [`CallBuilder::extension`](super::CallBuilder::extension); handlers find it with
/// [`Context::find_extension`](crate::Context::find_extension).
#[repr(C)]
#[derive(Debug)]
pub struct DemoExtension {
    header: sys::compat::ExtensionHeader,
    /// The payload.
    pub value: i64,
}

// SAFETY: the header's `next` pointer is never followed through this type, and
// `value` is plain data.
unsafe impl Send for DemoExtension {}
// SAFETY: as above.
unsafe impl Sync for DemoExtension {}

// SAFETY: `#[repr(C)]`, starts with the extension header, then an `i64`; every bit
// pattern is valid for both; the fake runtime stores it with this id and version.
unsafe impl crate::Extension for DemoExtension {
    const TYPE: i64 = DemoExtension::ID;
    const NAME: &'static str = "demo";
    const VERSION: (i32, i32) = (1, 2);
}

impl DemoExtension {
    /// Its id (no XLA extension uses it).
    pub const ID: i64 = 0x7e57;

    /// Version 1.2, with a header of its true size.
    pub fn new(value: i64) -> Self {
        DemoExtension {
            header: sys::compat::ExtensionHeader {
                struct_size: core::mem::size_of::<Self>(),
                id: sys::compat::ExtensionId { extension_type: Self::ID, major_version: 1, minor_version: 2 },
                next: core::ptr::null(),
            },
            value,
        }
    }
    /// Claims another version in the header (to test the version check).
    pub fn with_version(mut self, major: i32, minor: i32) -> Self {
        self.header.id.major_version = major;
        self.header.id.minor_version = minor;
        self
    }
    /// Claims another struct size in the header (to test the size checks; the
    /// crate reads no further than the header says and this type holds).
    pub fn with_struct_size(mut self, size: usize) -> Self {
        self.header.struct_size = size;
        self
    }
}

/// A fake API table. `struct_size` can be shrunk to emulate an older runtime.
///
/// It answers as XLA:CPU does where that was observed: no stream
/// (`UNIMPLEMENTED`) and no scratch memory (`Context::scratch`: `INVALID_ARGUMENT`,
/// "XLA FFI GPU context is not available"). A [`device_like`](Self::device_like)
/// table gives the call's stream but allocates no device memory either.
///
/// Tables are leaked (a few hundred bytes each), never freed: a real runtime's table
/// lives for the whole process, and the dispatcher caches facts per table address
/// (whether it is a host platform), so an address must never be reused by a table
/// that behaves differently.
pub struct FakeApi {
    /// A leaked table of `alloc_size(struct_size)` bytes; never written after setup.
    pub(super) table: *mut sys::XLA_FFI_Api,
    /// Made by [`FakeApi::device_like`] and unchanged since: its `Stream_Get` gives
    /// the call's stream, so the host guard refuses host handlers.
    pub(super) device: bool,
}

/// Every table made, so that they stay reachable (a runtime's table lives for the
/// process; Miri counts unreachable leaked memory as a leak).
pub(super) static TABLES: Mutex<Vec<TablePtr>> = Mutex::new(Vec::new());
pub(super) struct TablePtr(#[allow(dead_code)] *mut sys::XLA_FFI_Api);
// SAFETY: only kept, never used through this list.
unsafe impl Send for TablePtr {}

pub(super) fn keep_table(t: *mut sys::XLA_FFI_Api) -> *mut sys::XLA_FFI_Api {
    TABLES.lock().unwrap_or_else(|e| e.into_inner()).push(TablePtr(t));
    t
}

// SAFETY: the table is leaked (lives for the process) and only read once built.
unsafe impl Send for FakeApi {}
// SAFETY: as above.
unsafe impl Sync for FakeApi {}

impl FakeApi {
    /// A table with every slot this crate uses, reporting API `0.minor`.
    pub fn new(minor: i32) -> Self {
        // SAFETY: the API struct is plain data (integers, pointers, Option<fn>); all
        // zero is a valid value (every slot None).
        let t: &'static mut sys::XLA_FFI_Api = Box::leak(Box::new(unsafe { core::mem::zeroed() }));
        t.struct_size = sys::XLA_FFI_Api_STRUCT_SIZE as usize;
        t.api_version.struct_size = sys::XLA_FFI_Api_Version_STRUCT_SIZE as usize;
        t.api_version.major_version = 0;
        t.api_version.minor_version = minor;
        t.XLA_FFI_Error_Create = Some(error_create);
        // Before API 0.4 the slot is `Error_GetMessage`, which gives no code.
        sys::compat::set_error_details_fn(t, if minor < 4 { error_get_message_0_3 } else { error_get_details });
        t.XLA_FFI_Error_Destroy = Some(error_destroy);
        t.XLA_FFI_Stream_Get = Some(stream_get);
        t.XLA_FFI_State_Set = Some(state_set);
        t.XLA_FFI_State_Get = Some(state_get);
        t.XLA_FFI_ThreadPool_Schedule = Some(schedule);
        t.XLA_FFI_ThreadPool_NumThreads = Some(num_threads);
        t.XLA_FFI_RunId_Get = Some(run_id_get);
        t.XLA_FFI_DeviceOrdinal_Get = Some(device_ordinal_get);
        t.XLA_FFI_DeviceMemory_Allocate = Some(device_memory_allocate_host);
        sys::compat::set_invoke_context_get_fn(t, invoke_context_get);
        sys::compat::set_custom_options_get_fn(t, custom_options_get);
        t.XLA_FFI_Future_Create = Some(future::future_create);
        t.XLA_FFI_Future_SetAvailable = Some(future::future_set_available);
        t.XLA_FFI_Future_SetError = Some(future::future_set_error);
        sys::compat::set_find_extension_fn(t, find_extension);
        FakeApi { table: keep_table(t), device: false }
    }

    fn full(&mut self) -> &mut sys::XLA_FFI_Api {
        assert!(
            // SAFETY: every table starts with its size field.
            unsafe { (*self.table).struct_size } >= core::mem::size_of::<sys::XLA_FFI_Api>(),
            "configure a FakeApi before shrinking it"
        );
        // SAFETY: a full-size table, leaked, owned by this FakeApi until shared.
        unsafe { &mut *self.table }
    }

    /// A table that behaves like a GPU runtime's: `Stream_Get` gives a stream.
    /// (Each call leaks a new table, so it is never mistaken for a cached host one.)
    pub fn device_like(minor: i32) -> Self {
        let mut api = Self::new(minor);
        let t = api.full();
        t.XLA_FFI_Stream_Get = Some(stream_get_device);
        // A GPU context has no CPU thread pool.
        t.XLA_FFI_ThreadPool_NumThreads = Some(num_threads_unavailable);
        t.XLA_FFI_DeviceMemory_Allocate = Some(device_memory_allocate_device);
        api.device = true;
        api
    }

    /// Replaces `Stream_Get` (to emulate a runtime whose answer changes).
    ///
    /// # Safety
    /// The crate calls `f` as the runtime's `XLA_FFI_Stream_Get` and trusts it as it
    /// trusts XLA: `f` must return NULL or an error made by this table's
    /// `Error_Create` (which the crate then reads and frees), and may write to
    /// `(*args).stream` only: NULL or an address that the test never hands to
    /// a kernel as memory.
    pub unsafe fn with_stream_get(
        mut self,
        f: unsafe extern "C" fn(*mut sys::XLA_FFI_Stream_Get_Args) -> *mut sys::XLA_FFI_Error,
    ) -> Self {
        self.full().XLA_FFI_Stream_Get = Some(f);
        self.device = false;
        self
    }

    /// Removes the thread pool (as on a GPU, where `ThreadPool_NumThreads` fails).
    pub fn without_thread_pool(mut self) -> Self {
        self.full().XLA_FFI_ThreadPool_NumThreads = Some(num_threads_unavailable);
        self
    }

    /// Makes the table exactly `size` bytes long, as an older runtime's is (jaxlib
    /// 0.10's is 192 bytes): the memory past it does not exist, so reading it is out
    /// of bounds for Miri and the sanitizers.
    pub fn with_struct_size(self, size: usize) -> Self {
        let full = core::mem::size_of::<sys::XLA_FFI_Api>();
        let n = size.clamp(core::mem::size_of::<usize>(), full);
        let layout = std::alloc::Layout::from_size_align(n, core::mem::align_of::<sys::XLA_FFI_Api>()).unwrap();
        // SAFETY: `n > 0`; the copy stays inside both allocations (the source is a
        // full table); `struct_size` is the first field, inside every allocation.
        let table = unsafe {
            let p = std::alloc::alloc_zeroed(layout);
            assert!(!p.is_null(), "out of memory");
            core::ptr::copy_nonoverlapping(self.table as *const u8, p, n);
            (*(p as *mut sys::XLA_FFI_Api)).struct_size = size;
            p as *mut sys::XLA_FFI_Api
        };
        FakeApi { table: keep_table(table), device: false }
    }

    /// The table's address, for a synthetic call frame.
    pub fn as_ptr(&self) -> *const sys::XLA_FFI_Api {
        self.table
    }
}

/// Registers state type `S` with the fake runtime (gives it a type id), as
/// `jax.ffi.register_ffi_type` does in Python.
///
/// Registering a type again with the same id is allowed (tests share types).
///
/// # Panics
/// If `id` is 0 (which means "unregistered"), or if `id` is already registered for
/// another state type: XLA never gives two types one id, and if it did, one type's
/// state would be read, and freed, as the other's.
pub fn register_state_type<S: crate::StateType>(id: i64) {
    assert!(id != 0, "register_state_type: id 0 means \"not registered\"; use another id");
    let reg = S::registration();
    let record = reg as *const crate::TypeRegistration<S> as usize;
    let mut registered = REGISTERED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, other, _)) = registered.iter().find(|(i, r, _)| *i == id && *r != record) {
        drop(registered);
        panic!(
            "register_state_type: id {id} is already registered for another state type \
             (record at {other:#x}); give `{}` its own id",
            core::any::type_name::<S>()
        );
    }
    reg.set_type_id(id);
    // SAFETY: a registration's TypeInfo is a valid static.
    let info = unsafe { &*(reg.type_info_ptr() as *const sys::XLA_FFI_TypeInfo) };
    if let Some(delete) = info.deleter {
        registered.push((id, record, delete));
    }
}

impl core::fmt::Debug for FakeApi {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FakeApi").field("table", &self.table).field("device", &self.device).finish()
    }
}
