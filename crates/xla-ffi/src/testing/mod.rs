//! Synthetic call frames and a fake XLA API table, to test handlers without JAX
//! (feature `testing`). The same tests run under Miri and a fuzzer.
//!
//! ```
//! use xla_ffi::testing::{Arg, CallBuilder};
//! use xla_ffi::{handler, Buffer, ResultBuffer, Result};
//!
//! #[handler(target = "t.double")]
//! fn t_double(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
//!     for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) { o.write(2.0 * v); }
//!     Ok(())
//! }
//!
//! let mut call = CallBuilder::new()
//!     .arg(Arg::from_slice(&[1.0f32, 2.0], &[2]))
//!     .ret(Arg::zeros::<f32>(&[2]));
//! call.run(T_DOUBLE).unwrap();
//! assert_eq!(call.ret_as::<f32>(0), vec![2.0, 4.0]);
//! ```

use core::ffi::{c_char, c_void};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::Mutex;

use xla_ffi_sys as sys;

use crate::dtype::{DataType, Element};
use crate::{ErrorCode, Handler, HandlerFn};

#[cfg(feature = "cuda")]
pub mod cuda;

/// An error made by the fake `Error_Create`.
struct FakeError {
    code: u32,
    message: CString,
}

mod future;
pub mod raw;

/// The fake invoke context that `ctx` points to.
struct FakeCtx {
    threads: i64,
    device_ordinal: i32,
    run_id: i64,
    /// The states set at the instantiate, prepare and initialize stages, by
    /// (stage, type id), as XLA keeps one state store per stage; freed with the
    /// type's deleter when the context is dropped, as XLA frees them when the
    /// executable dies.
    states: Mutex<HashMap<(u32, i64), StatePtr>>,
    scheduled: Mutex<usize>,
    stream: usize,
    /// User data by type id, as an embedder's `ExecutionContext` holds it; freed
    /// when the context is dropped.
    user_data: Vec<UserDataEntry>,
    /// What `CustomOptions_Get` returns (NULL: a NULL dictionary pointer).
    custom_options: OptionsPtr,
    /// The public extensions attached to the context (`CallBuilder::extension`).
    extensions: Vec<UserDataEntry>,
}

/// One value of user data: its type id, the leaked `Box<T>` and the function that
/// frees it.
struct UserDataEntry {
    id: i64,
    data: *mut c_void,
    drop: unsafe fn(*mut c_void),
}
// SAFETY: every value stored is `Send + Sync`: user data types through `StateType`,
// extensions through the bounds of `CallBuilder::extension`; and the entry only
// hands out the pointer for shared reads.
unsafe impl Send for UserDataEntry {}
// SAFETY: as above.
unsafe impl Sync for UserDataEntry {}

/// The custom options dictionary of one synthetic call (built by `run`, alive for
/// the call, never written through).
struct OptionsPtr(*const sys::XLA_FFI_Attrs);
// SAFETY: only read, by the call's handler, while `run` keeps the dictionary alive.
unsafe impl Send for OptionsPtr {}
// SAFETY: as above.
unsafe impl Sync for OptionsPtr {}

/// Frees a `Box<T>` leaked by [`CallBuilder::user_data`].
///
/// # Safety
/// `p` must come from `Box::<T>::into_raw` and be freed once.
unsafe fn drop_box<T>(p: *mut c_void) {
    // SAFETY: guaranteed by the caller.
    drop(unsafe { Box::from_raw(p as *mut T) });
}

/// A state pointer XLA holds (kept as a pointer, with its provenance).
struct StatePtr(*mut c_void);
// SAFETY: states are `Send + Sync` (`StateType` requires it).
unsafe impl Send for StatePtr {}

/// The state types registered with the fake runtime: id, address of the type's
/// registration record, and its deleter.
type Deleter = unsafe extern "C" fn(*mut c_void);
static REGISTERED: Mutex<Vec<(i64, usize, Deleter)>> = Mutex::new(Vec::new());

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
    fn new(threads: i64) -> Self {
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
fn take_error(err: *mut sys::XLA_FFI_Error) -> CallResult {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: the handler returned an error made by our fake Error_Create.
    let e = unsafe { Box::from_raw(err as *mut FakeError) };
    Err((ErrorCode::from_raw(e.code), e.message.to_string_lossy().into_owned()))
}

unsafe extern "C" fn error_create(args: *mut sys::XLA_FFI_Error_Create_Args) -> *mut sys::XLA_FFI_Error {
    // SAFETY: the crate under test passes valid args with a NUL-terminated message.
    let args = unsafe { &*args };
    assert!(args.struct_size >= sys::XLA_FFI_Error_Create_Args_STRUCT_SIZE as usize);
    assert_ne!(args.errc, 0, "Error_Create called with OK");
    // SAFETY: as above.
    let message = unsafe { core::ffi::CStr::from_ptr(args.message) }.to_owned();
    Box::into_raw(Box::new(FakeError { code: args.errc, message })) as *mut sys::XLA_FFI_Error
}

unsafe extern "C" fn error_get_details(args: *mut sys::compat::XLA_FFI_Error_GetDetails_Args) {
    // SAFETY: valid args holding an error from `error_create`.
    let args = unsafe { &mut *args };
    // SAFETY: as above.
    let e = unsafe { &*(args.error as *const FakeError) };
    args.message = e.message.as_ptr() as *const c_char;
    sys::compat::set_error_details_code(args, e.code);
}

/// `Error_GetMessage` of an API 0.3 runtime: the message only; `errc` (which a 0.3
/// args struct does not have) is left alone, as jaxlib 0.10 does.
unsafe extern "C" fn error_get_message_0_3(args: *mut sys::compat::XLA_FFI_Error_GetDetails_Args) {
    // SAFETY: valid args holding an error from `error_create`.
    let args = unsafe { &mut *args };
    // SAFETY: as above.
    let e = unsafe { &*(args.error as *const FakeError) };
    args.message = e.message.as_ptr() as *const c_char;
}

unsafe extern "C" fn error_destroy(args: *mut sys::XLA_FFI_Error_Destroy_Args) {
    // SAFETY: destroys an error from `error_create`, once.
    drop(unsafe { Box::from_raw((*args).error as *mut FakeError) });
}

fn ctx<'a>(raw: *mut sys::compat::XLA_FFI_InvokeContext) -> &'a FakeCtx {
    // SAFETY: every frame built here points `ctx` at a live FakeCtx.
    unsafe { &*(raw as *const FakeCtx) }
}

fn fake_error(code: ErrorCode, msg: &str) -> *mut sys::XLA_FFI_Error {
    let message = CString::new(msg).unwrap();
    Box::into_raw(Box::new(FakeError { code: code.to_raw(), message })) as *mut sys::XLA_FFI_Error
}

unsafe extern "C" fn stream_get(_args: *mut sys::XLA_FFI_Stream_Get_Args) -> *mut sys::XLA_FFI_Error {
    fake_error(ErrorCode::Unimplemented, "XLA FFI GPU context is not available")
}

unsafe extern "C" fn stream_get_device(args: *mut sys::XLA_FFI_Stream_Get_Args) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args from the crate under test; the stream is the one set with
    // `CallBuilder::device_stream`, or a dummy address.
    unsafe { (*args).stream = core::ptr::without_provenance_mut(ctx((*args).ctx).stream) };
    core::ptr::null_mut()
}

unsafe extern "C" fn device_ordinal_get(args: *mut sys::XLA_FFI_DeviceOrdinal_Get_Args) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args from the crate under test.
    let args = unsafe { &mut *args };
    args.device_ordinal = ctx(args.ctx).device_ordinal;
    core::ptr::null_mut()
}

unsafe extern "C" fn run_id_get(args: *mut sys::XLA_FFI_RunId_Get_Args) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args from the crate under test.
    let args = unsafe { &mut *args };
    if args.struct_size < sys::XLA_FFI_RunId_Get_Args_STRUCT_SIZE as usize {
        return fake_error(ErrorCode::InvalidArgument, "Unexpected XLA_FFI_RunId_Get size");
    }
    args.run_id = ctx(args.ctx).run_id;
    core::ptr::null_mut()
}

unsafe extern "C" fn num_threads_unavailable(
    _args: *mut sys::XLA_FFI_ThreadPool_NumThreads_Args,
) -> *mut sys::XLA_FFI_Error {
    fake_error(ErrorCode::InvalidArgument, "XLA FFI CPU context is not available")
}

unsafe extern "C" fn num_threads(args: *mut sys::XLA_FFI_ThreadPool_NumThreads_Args) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args with a valid out pointer.
    unsafe { *(*args).num_threads = ctx((*args).ctx).threads };
    core::ptr::null_mut()
}

struct SendPtr(*mut c_void, unsafe extern "C" fn(*mut c_void));
// SAFETY: the task's data is an Arc meant to cross threads.
unsafe impl Send for SendPtr {}

unsafe extern "C" fn schedule(args: *mut sys::XLA_FFI_ThreadPool_Schedule_Args) -> *mut sys::XLA_FFI_Error {
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
fn state_stage(stage: u32) -> Result<u32, *mut sys::XLA_FFI_Error> {
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

unsafe extern "C" fn state_set(args: *mut sys::XLA_FFI_State_Set_Args) -> *mut sys::XLA_FFI_Error {
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

unsafe extern "C" fn state_get(args: *mut sys::XLA_FFI_State_Get_Args) -> *mut sys::XLA_FFI_Error {
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

unsafe extern "C" fn invoke_context_get(
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

unsafe extern "C" fn custom_options_get(args: *mut sys::compat::CustomOptionsGetArgs) -> *mut sys::XLA_FFI_Error {
    // SAFETY: valid args from the crate under test.
    let args = unsafe { &mut *args };
    args.attrs = ctx(args.ctx).custom_options.0;
    core::ptr::null_mut()
}

unsafe extern "C" fn find_extension(args: *mut sys::compat::FindExtensionArgs) -> *mut sys::XLA_FFI_Error {
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
/// synthetic call with [`CallBuilder::extension`]; handlers find it with
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
/// Tables are leaked (a few hundred bytes each), never freed: a real runtime's table
/// lives for the whole process, and the dispatcher caches facts per table address
/// (whether it is a host platform), so an address must never be reused by a table
/// that behaves differently.
pub struct FakeApi {
    /// A leaked table of `alloc_size(struct_size)` bytes; never written after setup.
    table: *mut sys::XLA_FFI_Api,
    /// Made by [`FakeApi::device_like`] and unchanged since: its `Stream_Get` gives
    /// the call's stream, so the host guard refuses host handlers.
    device: bool,
}

/// Every table made, so that they stay reachable (a runtime's table lives for the
/// process; Miri counts unreachable leaked memory as a leak).
static TABLES: Mutex<Vec<TablePtr>> = Mutex::new(Vec::new());
struct TablePtr(#[allow(dead_code)] *mut sys::XLA_FFI_Api);
// SAFETY: only kept, never used through this list.
unsafe impl Send for TablePtr {}

fn keep_table(t: *mut sys::XLA_FFI_Api) -> *mut sys::XLA_FFI_Api {
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

/// An owned buffer for a synthetic call: bytes plus dtype and dims.
///
/// The storage always covers the bytes the dims describe (from the data pointer,
/// after any [`misaligned`](Arg::misaligned) shift), so reading a result back never
/// leaves the allocation.
#[derive(Clone, Debug)]
pub struct Arg {
    dtype: DataType,
    dims: Vec<i64>,
    data: Vec<u64>, // u64 storage keeps data 8-byte aligned
    /// Bytes the dims describe.
    nbytes: usize,
    offset_bytes: usize,
    device: Option<usize>,
    /// What must outlive the frame (the device allocation of a `DeviceBuffer`).
    #[allow(dead_code)]
    keep: Option<std::sync::Arc<dyn core::any::Any + Send + Sync>>,
}

/// The element count of `dims` (0 if any is negative); panics on overflow.
fn count(dims: &[i64]) -> usize {
    if dims.iter().any(|&d| d < 0) {
        return 0;
    }
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize))
        .unwrap_or_else(|| panic!("dims {dims:?} overflow usize"))
}

impl Arg {
    fn with_bytes(dtype: DataType, dims: &[i64], bytes: &[u8], nbytes: usize) -> Self {
        let mut data = vec![0u64; nbytes.max(bytes.len()).div_ceil(8) + 1];
        // SAFETY: `data` has room for `bytes`; the regions do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), data.as_mut_ptr() as *mut u8, bytes.len()) };
        Arg { dtype, dims: dims.to_vec(), data, nbytes, offset_bytes: 0, device: None, keep: None }
    }
    /// A buffer holding `values` with shape `dims`.
    ///
    /// # Panics
    /// If `dims` does not describe exactly `values.len()` elements.
    pub fn from_slice<T: Element>(values: &[T], dims: &[i64]) -> Self {
        let n = count(dims);
        assert!(
            n == values.len() && dims.iter().all(|&d| d >= 0),
            "Arg::from_slice: dims {dims:?} describe {n} elements, but {} values were given",
            values.len()
        );
        Self::with_bytes(T::DTYPE, dims, &as_bytes(values), core::mem::size_of_val(values))
    }
    /// A token (operand or result): a rank-0 buffer of dtype `TOKEN`, no data, as
    /// XLA passes one.
    pub fn token() -> Self {
        Self::raw(DataType::TOKEN, &[], 0)
    }
    /// A zero-filled buffer (for results).
    pub fn zeros<T: Element>(dims: &[i64]) -> Self {
        Self::raw(T::DTYPE, dims, core::mem::size_of::<T>())
    }
    /// A buffer of a raw dtype code with zeroed storage of `width` bytes per element.
    ///
    /// # Panics
    /// If `width` is less than the dtype's [`byte_width`](DataType::byte_width): the
    /// handler would read `dims × byte_width` bytes, past the storage.
    pub fn raw(dtype: DataType, dims: &[i64], width: usize) -> Self {
        let need = dtype.byte_width().unwrap_or(0);
        assert!(
            width >= need,
            "Arg::raw: {dtype} has {need} bytes per element, but a width of {width} was given \
             (the handler would read past the buffer)"
        );
        let nbytes = count(dims).checked_mul(width).expect("buffer size overflows usize");
        Self::with_bytes(dtype, dims, &[], nbytes)
    }
    /// A buffer of dtype code `dtype` holding exactly `bytes` (PRED bytes other than
    /// 0 and 1, say, or a dtype this crate has no Rust type for).
    ///
    /// # Panics
    /// If `bytes` is shorter than the `dims × byte_width` bytes the handler may read
    /// ([`DataType::byte_width`]; 0 for a dtype without one).
    pub fn from_bytes(dtype: DataType, dims: &[i64], bytes: &[u8]) -> Self {
        let need = count(dims).checked_mul(dtype.byte_width().unwrap_or(0)).expect("buffer size overflows usize");
        assert!(
            bytes.len() >= need,
            "Arg::from_bytes: dims {dims:?} of {dtype} describe {need} bytes, but {} were given \
             (the handler would read past them)",
            bytes.len()
        );
        Self::with_bytes(dtype, dims, bytes, bytes.len())
    }
    /// A buffer at device address `ptr` (for `platform = device` handlers; see
    /// `testing::cuda`, whose `DeviceBuffer::arg` is the safe way to make one): the
    /// frame carries the address, and nothing is read back. A call with such a buffer
    /// runs only on a device frame ([`CallBuilder::device_stream`] with a non-zero
    /// stream), where host handlers are refused.
    ///
    /// # Safety
    /// A handler hands the address to kernels that read and write the `dims × width`
    /// bytes its dtype describes: `ptr` must be device memory of at least that size,
    /// valid for the whole call, or no kernel may run (a test of an error path that
    /// stops before any launch).
    pub unsafe fn device(dtype: DataType, dims: &[i64], ptr: u64) -> Self {
        let device = Some(ptr as usize);
        Arg { dtype, dims: dims.to_vec(), data: Vec::new(), nbytes: 0, offset_bytes: 0, device, keep: None }
    }
    /// Keeps `owner` alive as long as this buffer (its memory, for a device buffer).
    #[cfg(feature = "cuda")]
    pub(crate) fn keep_alive(mut self, owner: std::sync::Arc<dyn core::any::Any + Send + Sync>) -> Self {
        self.keep = Some(owner);
        self
    }
    /// Shifts the data pointer by `bytes`, to test alignment checks. The contents
    /// stay where they were (the buffer now starts `bytes` into them), and the
    /// storage grows so that the shifted buffer still lies inside it.
    ///
    /// # Panics
    /// If the shifted buffer's end does not fit in `usize` words of storage.
    pub fn misaligned(mut self, bytes: usize) -> Self {
        let words = bytes
            .checked_add(self.nbytes)
            .and_then(|end| end.div_ceil(8).checked_add(1))
            .filter(|&w| w.checked_mul(8).is_some_and(|b| b <= isize::MAX as usize))
            .unwrap_or_else(|| {
                panic!(
                    "Arg::misaligned({bytes}): a {}-byte buffer shifted that far does not fit in memory",
                    self.nbytes
                )
            });
        self.offset_bytes = bytes;
        if self.data.len() < words {
            self.data.resize(words, 0);
        }
        self
    }
    fn ptr(&mut self) -> *mut c_void {
        if let Some(p) = self.device {
            return core::ptr::without_provenance_mut(p);
        }
        // SAFETY: `misaligned` keeps the offset inside the allocation.
        unsafe { (self.data.as_mut_ptr() as *mut u8).add(self.offset_bytes) as *mut c_void }
    }
    /// The bytes the buffer holds, from its data pointer on.
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: `data` is plain memory of `8 * len` bytes; any byte is a valid u8.
        let all = unsafe { core::slice::from_raw_parts(self.data.as_ptr() as *const u8, self.data.len() * 8) };
        &all[self.offset_bytes..self.offset_bytes + self.nbytes]
    }
}

/// An owned attribute value for a synthetic call.
///
/// The constructors ([`AttrArg::scalar`], [`AttrArg::array`], [`AttrArg::bool`])
/// give bytes that match the dtype. Built by hand, a `Scalar` must hold the
/// dtype's width in bytes and an `Array` its count times that width (any bytes
/// for a dtype without a width, such as `INVALID`, which the crate never reads).
///
/// # Panics
/// Running a call ([`CallBuilder::run`], `testing::raw::RawCall::run`) with an
/// attribute whose bytes do not match panics, naming the attribute.
#[derive(Clone, Debug)]
pub enum AttrArg {
    /// A scalar: dtype code and its bytes (little-endian).
    Scalar(DataType, Vec<u8>),
    /// An array: dtype code, element count, bytes.
    Array(DataType, usize, Vec<u8>),
    /// A string.
    Str(String),
    /// A dictionary (sorted by name when built).
    Dict(Vec<(String, AttrArg)>),
}

impl AttrArg {
    /// A scalar of any element type.
    pub fn scalar<T: Element>(v: T) -> Self {
        AttrArg::Scalar(T::DTYPE, as_bytes(&[v]))
    }
    /// A bool (PRED) scalar, as a Python `bool` arrives.
    pub fn bool(v: bool) -> Self {
        AttrArg::Scalar(DataType::PRED, vec![v as u8])
    }
    /// An array of any element type.
    pub fn array<T: Element>(v: &[T]) -> Self {
        AttrArg::Array(T::DTYPE, v.len(), as_bytes(v))
    }
}

fn as_bytes<T: Element>(v: &[T]) -> Vec<u8> {
    let n = core::mem::size_of_val(v);
    let mut out = vec![0u8; n];
    // SAFETY: copies the bytes of plain-data values.
    unsafe { core::ptr::copy_nonoverlapping(v.as_ptr() as *const u8, out.as_mut_ptr(), n) };
    out
}

/// Keeps every C structure of one built attribute dictionary alive.
///
/// Each C struct lives in its own `Vec`, and pointers are taken from the vector's
/// heap buffer: moving a `Vec` does not move (or re-borrow) its buffer, so the
/// pointers stay valid under Miri's aliasing rules. (A `Box` would not do: moving a
/// box asserts unique ownership and invalidates pointers taken before the move.)
#[derive(Default)]
pub(crate) struct AttrStore {
    spans: Vec<Vec<sys::XLA_FFI_ByteSpan>>,
    ptrs: Vec<Vec<*mut c_void>>,
    types: Vec<Vec<u32>>,
    scalars: Vec<Vec<sys::XLA_FFI_Scalar>>,
    arrays: Vec<Vec<sys::XLA_FFI_Array>>,
    dicts: Vec<Vec<sys::XLA_FFI_Attrs>>,
    bytes: Vec<Vec<u64>>,
}

/// Moves `v` into `store` and returns a pointer to its first element.
fn keep<T>(store: &mut Vec<Vec<T>>, mut v: Vec<T>) -> *mut T {
    let p = v.as_mut_ptr();
    store.push(v);
    p
}

impl AttrStore {
    /// Overwrites every structure and payload (an async handler must not read them
    /// after its handler call: XLA frees them then).
    pub(crate) fn scribble(&mut self) {
        self.spans.iter_mut().flatten().for_each(|s| *s = sys::XLA_FFI_ByteSpan { ptr: core::ptr::null(), len: 0 });
        self.ptrs.iter_mut().flatten().for_each(|p| *p = core::ptr::null_mut());
        self.types.iter_mut().flatten().for_each(|t| *t = 0xdead);
        self.scalars.iter_mut().flatten().for_each(|s| s.value = core::ptr::null_mut());
        self.arrays.iter_mut().flatten().for_each(|a| a.data = core::ptr::null_mut());
        self.dicts.iter_mut().flatten().for_each(|d| d.size = -1);
        self.bytes.iter_mut().flatten().for_each(|b| *b = 0xdead_dead_dead_dead);
    }
    pub(crate) fn span(&mut self, s: &[u8]) -> *mut sys::XLA_FFI_ByteSpan {
        let ptr = self.payload(s) as *const c_char;
        keep(&mut self.spans, vec![sys::XLA_FFI_ByteSpan { ptr, len: s.len() }])
    }
    /// A copy of `bytes`, 8-byte aligned.
    pub(crate) fn payload(&mut self, bytes: &[u8]) -> *mut c_void {
        let mut words = vec![0u64; bytes.len().div_ceil(8).max(1)];
        // SAFETY: `words` has room for `bytes`; they do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), words.as_mut_ptr() as *mut u8, bytes.len()) };
        keep(&mut self.bytes, words) as *mut c_void
    }
    pub(crate) fn scalar(&mut self, dtype: DataType, value: *mut c_void) -> *mut c_void {
        keep(&mut self.scalars, vec![sys::XLA_FFI_Scalar { dtype: dtype.0, value }]) as *mut c_void
    }
    pub(crate) fn array(&mut self, dtype: DataType, size: usize, data: *mut c_void) -> *mut c_void {
        keep(&mut self.arrays, vec![sys::XLA_FFI_Array { dtype: dtype.0, size, data }]) as *mut c_void
    }
    pub(crate) fn boxed_dict(&mut self, d: sys::XLA_FFI_Attrs) -> *mut c_void {
        keep(&mut self.dicts, vec![d]) as *mut c_void
    }
    /// An `XLA_FFI_Attrs` over parallel arrays of names, kinds and values.
    pub(crate) fn attrs(
        &mut self,
        names: Vec<*mut sys::XLA_FFI_ByteSpan>,
        types: Vec<u32>,
        values: Vec<*mut c_void>,
    ) -> sys::XLA_FFI_Attrs {
        let size = names.len() as i64;
        let names = keep(&mut self.ptrs, names.into_iter().map(|p| p as *mut c_void).collect());
        let types = keep(&mut self.types, types);
        let values = keep(&mut self.ptrs, values);
        sys::XLA_FFI_Attrs {
            struct_size: sys::XLA_FFI_Attrs_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            size,
            types: types as *mut _,
            names: names as *mut *mut sys::XLA_FFI_ByteSpan,
            attrs: values,
        }
    }
    pub(crate) fn dict(&mut self, entries: &[(String, AttrArg)]) -> sys::XLA_FFI_Attrs {
        let mut sorted: Vec<&(String, AttrArg)> = entries.iter().collect();
        sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let (mut names, mut types, mut values) = (Vec::new(), Vec::new(), Vec::new());
        for (name, v) in sorted {
            check_attr_bytes(name, v);
            names.push(self.span(name.as_bytes()));
            let (t, p): (u32, *mut c_void) = match v {
                AttrArg::Scalar(d, b) => {
                    let value = self.payload(b);
                    (sys::XLA_FFI_AttrType_SCALAR, self.scalar(*d, value))
                }
                AttrArg::Array(d, n, b) => {
                    let data = self.payload(b);
                    (sys::XLA_FFI_AttrType_ARRAY, self.array(*d, *n, data))
                }
                AttrArg::Str(s) => (sys::XLA_FFI_AttrType_STRING, self.span(s.as_bytes()) as *mut c_void),
                AttrArg::Dict(entries) => {
                    let d = self.dict(entries);
                    (sys::XLA_FFI_AttrType_DICTIONARY, self.boxed_dict(d))
                }
            };
            types.push(t);
            values.push(p);
        }
        self.attrs(names, types, values)
    }
}

/// Panics unless the bytes of `v` (named `name`) are what its dtype and count
/// describe: the runtime the crate trusts never hands it fewer, so neither may a
/// synthetic call.
fn check_attr_bytes(name: &str, v: &AttrArg) {
    let (dtype, count, got, what) = match v {
        AttrArg::Scalar(d, b) => (*d, Some(1), b.len(), "scalar"),
        AttrArg::Array(d, n, b) => (*d, Some(*n), b.len(), "array"),
        AttrArg::Str(_) | AttrArg::Dict(_) => return,
    };
    let Some(width) = dtype.byte_width() else { return };
    let need = count.and_then(|n| n.checked_mul(width));
    assert!(
        need == Some(got),
        "AttrArg for attribute `{name}`: a {what} of {} {dtype:?} element(s) needs {} bytes, got {got}",
        count.unwrap_or(0),
        need.map_or("more than usize::MAX".to_string(), |n| n.to_string()),
    );
}

/// What a synthetic call returned: `Ok`, or the error's code and message.
pub type CallResult = Result<(), (ErrorCode, String)>;

/// Builds and runs one synthetic call of a handler.
pub struct CallBuilder {
    api: FakeApi,
    args: Vec<Arg>,
    rets: Vec<Arg>,
    attrs: Vec<(String, AttrArg)>,
    stage: u32,
    threads: i64,
    alias: Vec<(usize, usize)>,
    /// Operand entries with another kind tag than BUFFER.
    arg_kinds: Vec<(usize, u32)>,
    /// Operand entries that point at the data itself instead of an XLA_FFI_Buffer.
    data_entries: Vec<usize>,
    /// Operand data pointers replaced by an address (never dereferenced by a
    /// correct crate: see `arg_data_address`).
    data_addrs: Vec<(usize, usize)>,
    frame_size: Option<usize>,
    /// `struct_size` of the frame's args, rets and attrs structs, where replaced.
    part_sizes: [Option<usize>; 3],
    /// The per-execution custom options (`CustomOptions_Get`).
    custom_options: Vec<(String, AttrArg)>,
    ctx: Box<FakeCtx>,
    /// Whether the last run's future was still pending when its handler returned
    /// (`None`: the handler returned no future).
    pending_at_return: Option<bool>,
}

impl Default for CallBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl CallBuilder {
    /// An execute-stage call on a fake API 0.5 runtime with 2 pool threads.
    pub fn new() -> Self {
        CallBuilder {
            api: FakeApi::new(5),
            args: Vec::new(),
            rets: Vec::new(),
            attrs: Vec::new(),
            stage: sys::XLA_FFI_ExecutionStage_EXECUTE,
            threads: 2,
            alias: Vec::new(),
            arg_kinds: Vec::new(),
            data_entries: Vec::new(),
            data_addrs: Vec::new(),
            frame_size: None,
            part_sizes: [None; 3],
            custom_options: Vec::new(),
            ctx: Box::new(FakeCtx::new(2)),
            pending_at_return: None,
        }
    }
    /// Uses this API table.
    pub fn api(mut self, api: FakeApi) -> Self {
        self.api = api;
        self
    }
    /// Makes this a GPU call: `Stream_Get` gives `stream` (a `CUstream`).
    ///
    /// # Safety
    /// A `platform = device` handler hands the stream to the CUDA driver as XLA's
    /// own (`cuda::Device::new`), and the driver does not check it: `stream` must be
    /// a live `CUstream` of the driver the process loaded, or no handler run with
    /// this builder may reach a CUDA call (a host handler, which the host guard
    /// refuses on a device frame, or a device handler that fails first). With a
    /// test GPU, [`on_gpu`](Self::on_gpu) is the safe form.
    pub unsafe fn device_stream(mut self, stream: usize) -> Self {
        self.api = FakeApi::device_like(5);
        self.ctx.stream = stream;
        self
    }
    /// Makes this a GPU call on `gpu`'s stream (see
    /// [`device_stream`](Self::device_stream)).
    #[cfg(feature = "cuda")]
    pub fn on_gpu(self, gpu: &cuda::Gpu) -> Self {
        // SAFETY: a `Gpu`'s stream is created with it and never destroyed (nor its
        // context): it is live for the rest of the process.
        unsafe { self.device_stream(gpu.stream()) }
    }
    /// Adds an operand.
    pub fn arg(mut self, a: Arg) -> Self {
        self.args.push(a);
        self
    }
    /// Adds a result.
    pub fn ret(mut self, r: Arg) -> Self {
        self.rets.push(r);
        self
    }
    /// Adds an attribute.
    pub fn attr(mut self, name: &str, v: AttrArg) -> Self {
        self.attrs.push((name.to_string(), v));
        self
    }
    /// Makes result `ret` share operand `arg`'s memory, as `input_output_aliases` does.
    ///
    /// The result may describe fewer bytes than the operand holds (to test the
    /// checks on a mismatched pair), never more: [`run`](Self::run) panics if it
    /// does, since the handler would write the result's bytes into the operand's
    /// storage.
    pub fn alias(mut self, arg: usize, ret: usize) -> Self {
        self.alias.push((arg, ret));
        self
    }
    /// Gives operand entry `arg` the kind tag `kind` (XLA only ever sends BUFFER = 1).
    pub fn arg_kind(mut self, arg: usize, kind: u32) -> Self {
        self.arg_kinds.push((arg, kind));
        self
    }
    /// Makes operand entry `arg` point at its data bytes instead of at an
    /// `XLA_FFI_Buffer`: an entry of another kind, so give it one with
    /// [`arg_kind`](Self::arg_kind) ([`run`](Self::run) panics if it is still tagged
    /// BUFFER, which the crate would read as an `XLA_FFI_Buffer` from those bytes).
    pub fn arg_entry_is_data(mut self, arg: usize) -> Self {
        self.data_entries.push(arg);
        self
    }
    /// Replaces operand `arg`'s data pointer by `addr`, to test the checks on the
    /// address itself (a crate that accepted it would read unowned memory).
    ///
    /// # Safety
    /// The handler may read the bytes operand `arg` describes at `addr`: they must be
    /// readable for the whole call, or the crate must refuse the address before
    /// reading (an address whose range wraps around or passes `isize::MAX`, which the
    /// decoder checks). If a result is aliased to operand `arg`
    /// ([`alias`](Self::alias)), the handler writes that result at `addr` too: the
    /// bytes must then be writable as well, and not used by anything else during the
    /// call.
    pub unsafe fn arg_data_address(mut self, arg: usize, addr: usize) -> Self {
        self.data_addrs.push((arg, addr));
        self
    }
    /// Sends a call frame whose `struct_size` is `size` (too small, say).
    pub fn frame_size(mut self, size: usize) -> Self {
        self.frame_size = Some(size);
        self
    }
    /// Sends the frame's operand struct (`XLA_FFI_Args`) with `struct_size` = `size`
    /// (too small, say: the handler must refuse the call).
    pub fn args_struct_size(mut self, size: usize) -> Self {
        self.part_sizes[0] = Some(size);
        self
    }
    /// Sends the frame's result struct (`XLA_FFI_Rets`) with `struct_size` = `size`.
    pub fn rets_struct_size(mut self, size: usize) -> Self {
        self.part_sizes[1] = Some(size);
        self
    }
    /// Sends the frame's attribute dictionary (`XLA_FFI_Attrs`) with `struct_size` =
    /// `size`.
    pub fn attrs_struct_size(mut self, size: usize) -> Self {
        self.part_sizes[2] = Some(size);
        self
    }
    /// Sets the stage.
    pub fn stage(mut self, stage: crate::Stage) -> Self {
        self.stage = stage.to_raw();
        self
    }
    /// Sets the frame's raw `stage` field, which may be a value no [`Stage`](crate::Stage)
    /// stands for (XLA never sends one; the handler must refuse it).
    pub fn raw_stage(mut self, stage: u32) -> Self {
        self.stage = stage;
        self
    }
    /// Sets the stage of later [`run`](Self::run)s on this builder, keeping its
    /// context, so an instantiate call's state is seen by a later execute call.
    pub fn set_stage(&mut self, stage: crate::Stage) {
        self.stage = stage.to_raw();
    }
    /// Adds a per-execution custom option, which the handler reads through
    /// [`Context::custom_options`](crate::Context::custom_options) (the dictionary is
    /// empty, as on XLA:CPU, when none is added).
    pub fn custom_option(mut self, name: &str, v: AttrArg) -> Self {
        self.custom_options.push((name.to_string(), v));
        self
    }
    /// Puts `value` into the run's execution context as user data of type `T`, under
    /// `T`'s registered type id, as an embedder of XLA does; handlers read it with
    /// [`UserData<T>`](crate::UserData). It is dropped with the builder.
    ///
    /// # Panics
    /// If `T` is not registered ([`register_state_type`]): its id would be 0.
    pub fn user_data<T: crate::StateType>(mut self, value: T) -> Self {
        let id = T::registration().type_id();
        assert!(
            id != 0,
            "CallBuilder::user_data: `{}` is not registered; call testing::register_state_type first",
            core::any::type_name::<T>()
        );
        let data = Box::into_raw(Box::new(value)) as *mut c_void;
        self.ctx.user_data.push(UserDataEntry { id, data, drop: drop_box::<T> });
        self
    }
    /// Attaches a public extension to the call's invoke context, as XLA:GPU
    /// attaches its record and collectives extensions; handlers find it with
    /// [`Context::find_extension`](crate::Context::find_extension). It is dropped
    /// with the builder, on whichever thread drops the builder: so `E` must be
    /// `Send` as well as `Sync`.
    pub fn extension<E: crate::Extension + Send>(mut self, value: E) -> Self {
        let data = Box::into_raw(Box::new(value)) as *mut c_void;
        self.ctx.extensions.push(UserDataEntry { id: E::TYPE, data, drop: drop_box::<E> });
        self
    }
    /// Sets the fake pool's thread count.
    pub fn threads(mut self, n: i64) -> Self {
        self.threads = n;
        self.ctx.threads = n;
        self
    }
    /// How many tasks were scheduled on the fake pool so far.
    pub fn scheduled(&self) -> usize {
        *self.ctx.scheduled.lock().unwrap()
    }

    /// Runs `handler` once on this frame. At the instantiate stage the frame has no
    /// operands or results (XLA passes only attributes then), so one builder can
    /// serve an instantiate call and, after [`set_stage`](Self::set_stage), execute
    /// calls that see its state.
    ///
    /// # Panics
    /// On a frame a safe caller could not otherwise make sound: an operand entry made
    /// data ([`arg_entry_is_data`](Self::arg_entry_is_data)) but still tagged BUFFER,
    /// or a device buffer ([`Arg::device`]) in a call that is not a device call with a
    /// stream ([`device_stream`](Self::device_stream)), where a host handler would
    /// read the device address as host memory; or a result [aliased](Self::alias)
    /// to a host operand whose storage is smaller than the result's bytes.
    pub fn run(&mut self, handler: impl Into<Handler>) -> CallResult {
        let handler: HandlerFn = handler.into().as_raw();
        for &a in &self.data_entries {
            let kind = self.arg_kinds.iter().rev().find(|(i, _)| *i == a).map_or(sys::XLA_FFI_ArgType_BUFFER, |k| k.1);
            assert!(
                kind != sys::XLA_FFI_ArgType_BUFFER,
                "CallBuilder: operand entry {a} points at data but is tagged BUFFER; give it another kind with arg_kind"
            );
        }
        let has_device = self.args.iter().chain(&self.rets).any(|a| a.device.is_some());
        assert!(
            !has_device || (self.api.device && self.ctx.stream != 0),
            "CallBuilder: a device buffer (Arg::device) needs a device call: CallBuilder::on_gpu or device_stream with a \
             non-zero stream, and no other API table after it"
        );
        for &(a, r) in &self.alias {
            let (arg, ret) = (&self.args[a], &self.rets[r]);
            // The result's bytes are written where the operand's storage lies (a
            // device operand's address is the unsafe `Arg::device`'s promise).
            let need = count(&ret.dims).checked_mul(ret.dtype.byte_width().unwrap_or(0));
            let have = arg.data.len() * 8 - arg.offset_bytes;
            if arg.device.is_none() && need.is_none_or(|n| n > have) {
                let need = need.map_or_else(|| "too many".to_string(), |n| n.to_string());
                panic!(
                    "CallBuilder: result {r} ({} {:?}, {need} bytes) is aliased to operand {a}, whose storage holds \
                     {have} bytes; XLA aliases buffers of one shape and dtype",
                    ret.dtype, ret.dims,
                );
            }
        }
        let mut store = AttrStore::default();
        let attrs = store.dict(&self.attrs);
        let options = store.dict(&self.custom_options);
        self.ctx.custom_options = OptionsPtr(&options);
        let mut arg_ptrs: Vec<*mut c_void> = self.args.iter_mut().map(Arg::ptr).collect();
        for &(a, addr) in &self.data_addrs {
            arg_ptrs[a] = core::ptr::without_provenance_mut(addr);
        }
        let mut ret_ptrs: Vec<*mut c_void> = self.rets.iter_mut().map(Arg::ptr).collect();
        for &(a, r) in &self.alias {
            ret_ptrs[r] = arg_ptrs[a];
        }
        let mut bufs: Vec<sys::XLA_FFI_Buffer> = Vec::new();
        // The dims are this call's own copies, as XLA's are (freed with the frame).
        let dims: Vec<Vec<i64>> = self.args.iter().chain(&self.rets).map(|a| a.dims.clone()).collect();
        let all: Vec<(&Arg, *mut c_void)> = self
            .args
            .iter()
            .zip(arg_ptrs.iter().copied())
            .chain(self.rets.iter().zip(ret_ptrs.iter().copied()))
            .collect();
        for ((a, p), d) in all.iter().zip(&dims) {
            bufs.push(sys::XLA_FFI_Buffer {
                struct_size: sys::XLA_FFI_Buffer_STRUCT_SIZE as usize,
                extension_start: core::ptr::null_mut(),
                dtype: a.dtype.0,
                data: *p,
                rank: d.len() as i64,
                dims: d.as_ptr() as *mut i64,
            });
        }
        let mut buf_ptrs: Vec<*mut c_void> = bufs.iter_mut().map(|b| b as *mut _ as *mut c_void).collect();
        for &a in &self.data_entries {
            buf_ptrs[a] = self.args[a].ptr();
        }
        let (arg_bufs, ret_bufs) = buf_ptrs.split_at_mut(self.args.len());
        let mut arg_types = vec![sys::XLA_FFI_ArgType_BUFFER; arg_bufs.len()];
        for &(a, kind) in &self.arg_kinds {
            arg_types[a] = kind;
        }
        let mut ret_types = vec![sys::XLA_FFI_RetType_BUFFER; ret_bufs.len()];
        // SAFETY: all-zero is a valid call frame (null pointers, zero sizes); every
        // field the crate reads is set below.
        let mut frame: sys::XLA_FFI_CallFrame = unsafe { core::mem::zeroed() };
        frame.struct_size = sys::XLA_FFI_CallFrame_STRUCT_SIZE as usize;
        frame.api = self.api.table;
        frame.ctx = &*self.ctx as *const FakeCtx as *mut _;
        frame.stage = self.stage;
        frame.args = sys::XLA_FFI_Args {
            struct_size: sys::XLA_FFI_Args_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            size: arg_bufs.len() as i64,
            types: arg_types.as_mut_ptr() as *mut _,
            args: arg_bufs.as_mut_ptr(),
        };
        frame.rets = sys::XLA_FFI_Rets {
            struct_size: sys::XLA_FFI_Rets_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            size: ret_bufs.len() as i64,
            types: ret_types.as_mut_ptr() as *mut _,
            rets: ret_bufs.as_mut_ptr(),
        };
        if self.stage == sys::XLA_FFI_ExecutionStage_INSTANTIATE {
            // As XLA does: the instantiate stage sees attributes, no buffers.
            frame.args.size = 0;
            frame.rets.size = 0;
        }
        frame.attrs = attrs;
        if let Some(size) = self.frame_size {
            frame.struct_size = size;
        }
        let [args_size, rets_size, attrs_size] = self.part_sizes;
        frame.args.struct_size = args_size.unwrap_or(frame.args.struct_size);
        frame.rets.struct_size = rets_size.unwrap_or(frame.rets.struct_size);
        frame.attrs.struct_size = attrs_size.unwrap_or(frame.attrs.struct_size);
        // SAFETY: the frame and everything it points to live until after the call.
        let err = unsafe { handler(&mut frame) };
        self.ctx.custom_options = OptionsPtr(core::ptr::null());
        // An async handler left a future. As XLA:CPU does, free the structures that
        // describe the call now (the `XLA_FFI_Buffer`s, dims, entry arrays and
        // attributes; scribbled over first, so a use shows without Miri too), keep the
        // buffers' memory, and wait for the future.
        if !frame.future.is_null() {
            for b in &mut bufs {
                b.data = core::ptr::null_mut();
                b.rank = -1;
            }
            arg_types.fill(0xdead);
            ret_types.fill(0xdead);
            store.scribble();
            frame.args.size = -1;
            frame.rets.size = -1;
            frame.attrs.size = -1;
            drop(arg_types);
            drop(ret_types);
            drop(buf_ptrs);
            drop(bufs);
            drop(dims);
            store = AttrStore::default();
        }
        let (result, pending) = future::finish(frame.future, err);
        self.pending_at_return = pending;
        // The handler may have left bytes uninitialized (safe code can store
        // `MaybeUninit::uninit()` into a result): the buffers are read back as
        // plain data from here on.
        for a in self.args.iter_mut().chain(&mut self.rets) {
            freeze(&mut a.data);
        }
        // Aliased results: copy what was written in place back into the result.
        for &(a, r) in &self.alias {
            let data = self.args[a].data.clone();
            self.rets[r].data = data;
        }
        drop(store);
        result
    }

    fn take(&self, err: *mut sys::XLA_FFI_Error) -> CallResult {
        take_error(err)
    }

    /// Asks the handler for its metadata: `(api major, minor, traits, state type id)`.
    pub fn metadata(&mut self, handler: impl Into<Handler>) -> Result<(i32, i32, u32, i64), (ErrorCode, String)> {
        let handler: HandlerFn = handler.into().as_raw();
        // SAFETY: plain data; all zero is valid.
        let mut md: sys::XLA_FFI_Metadata = unsafe { core::mem::zeroed() };
        md.struct_size = sys::XLA_FFI_Metadata_STRUCT_SIZE as usize;
        // SAFETY: as above.
        let mut ext: sys::XLA_FFI_Metadata_Extension = unsafe { core::mem::zeroed() };
        ext.extension_base.struct_size = sys::XLA_FFI_Metadata_Extension_STRUCT_SIZE as usize;
        ext.extension_base.type_ = sys::XLA_FFI_Extension_Metadata;
        ext.metadata = &mut md;
        // SAFETY: as above.
        let mut frame: sys::XLA_FFI_CallFrame = unsafe { core::mem::zeroed() };
        frame.struct_size = sys::XLA_FFI_CallFrame_STRUCT_SIZE as usize;
        frame.api = self.api.table;
        frame.stage = sys::XLA_FFI_ExecutionStage_EXECUTE;
        frame.extension_start = &mut ext as *mut _ as *mut _;
        // SAFETY: the frame and the metadata live until after the call.
        let err = unsafe { handler(&mut frame) };
        self.take(err)?;
        Ok((md.api_version.major_version, md.api_version.minor_version, md.traits, md.state_type_id.type_id))
    }

    /// For the last [`run`](Self::run): `None` if the handler returned no future (a
    /// synchronous call, or an error before its asynchronous part), else whether the
    /// future was still pending when the handler returned (`run` waits for it, as XLA
    /// does, before returning its outcome).
    pub fn pending_at_return(&self) -> Option<bool> {
        self.pending_at_return
    }

    /// Result `i` read back as `T`s.
    pub fn ret_as<T: Element>(&self, i: usize) -> Vec<T> {
        read_back(&self.rets[i])
    }
    /// Operand `i` read back as `T`s (after an in-place call).
    pub fn arg_as<T: Element>(&self, i: usize) -> Vec<T> {
        read_back(&self.args[i])
    }
}

/// Makes every byte of `data` an initialized byte with the value it holds, as
/// XLA sees a result: the handler's safe code may have written
/// `MaybeUninit::uninit()` into it, and reading such bytes as integers or floats
/// would be undefined behaviour. Rust has no `freeze`; an inline-assembly block
/// that the compiler must assume wrote the memory is the accepted substitute.
/// Miri cannot run assembly: there the bytes stay as the handler left them, and
/// Miri reports a read of uninitialized memory (a handler that leaves a result
/// unwritten) when the test reads them.
#[inline(never)]
fn freeze(data: &mut [u64]) {
    #[cfg(not(miri))]
    // SAFETY: the block executes no instruction. The compiler must assume it may
    // have written any bytes of `data` (a pointer to it is an operand and neither
    // `nomem` nor `readonly` is given), so afterwards each byte holds whatever value
    // the machine has there: initialized. Nothing outside `data` is reachable from
    // the operand, and the `&mut` guarantees no other reference observes the write.
    unsafe {
        core::arch::asm!("/* {0} */", in(reg) data.as_mut_ptr(), options(nostack, preserves_flags));
    }
    #[cfg(miri)]
    let _ = data;
}

fn read_back<T: Element>(a: &Arg) -> Vec<T> {
    assert!(a.device.is_none(), "a device buffer is read back with testing::cuda, not from the frame");
    let bytes = a.bytes();
    let width = core::mem::size_of::<T>();
    let n = count(&a.dims);
    assert!(
        n.checked_mul(width).is_some_and(|b| b <= bytes.len()),
        "cannot read {n} elements of {} from a buffer of {} bytes",
        T::DTYPE,
        bytes.len()
    );
    bytes[..n * width]
        .chunks_exact(width)
        // SAFETY: `c` holds `size_of::<T>()` bytes; T is plain data for which every
        // bit pattern is valid (the Element types); the read is unaligned.
        .map(|c| unsafe { (c.as_ptr() as *const T).read_unaligned() })
        .collect()
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
