//! A fake PJRT plugin (feature `testing`): a `PJRT_Api` table laid out as the
//! shipped plugins', with the FFI extension in its chain and a fake XLA FFI runtime
//! behind it, whose functions record every call. As the real plugins do, it asks
//! each handler for its metadata when registering it (so the probe sees the
//! runtime's table), checks the version the handler reports against the runtime's,
//! and checks argument sizes (`>=` the size its version expects).
//!
//! The fake's functions find their plugin through a thread-local pointer: use a
//! [`FakePlugin`] on the thread that made it (the last one made, or the one given
//! [`FakePlugin::make_current`]).

use core::ffi::{c_char, c_void};
use std::cell::Cell;
use std::ffi::CString;
use std::sync::Mutex;

use xla_ffi_sys as xs;

use crate::sys;

/// One call the fake plugin received.
#[derive(Clone, Debug, PartialEq, Eq)]
// The fields are named for the values the variant's line lists.
#[allow(missing_docs)]
pub enum FakeCall {
    /// The FFI extension's `register_handler`: target, platform, args `struct_size`, traits.
    ExtRegisterHandler { target: String, platform: String, struct_size: usize, traits: u32 },
    /// The FFI extension's `type_register`: name, args `struct_size`, assigned id.
    ExtTypeRegister { name: String, struct_size: usize, id: i64 },
    /// The FFI extension's `user_data_add`: type id, args `struct_size`.
    ExtUserDataAdd { type_id: i64, struct_size: usize },
    /// The runtime's `XLA_FFI_Type_Register`: name, assigned id.
    XlaTypeRegister { name: String, id: i64 },
    /// The runtime's `XLA_FFI_Handler_Register`: target, platform, args
    /// `struct_size`, which bundle entries are set (in the runtime's layout).
    XlaHandlerRegister { target: String, platform: String, struct_size: usize, stages: Vec<bool> },
    /// `PJRT_ExecuteContext_Create`.
    ContextCreate,
    /// `PJRT_ExecuteContext_Destroy`.
    ContextDestroy,
}

/// How to build a [`FakePlugin`].
#[derive(Clone, Debug)]
pub struct FakeConfig {
    /// The PJRT API version of the table.
    pub pjrt_version: (i32, i32),
    /// The XLA FFI API version of the runtime (0.3: a 192-byte table and the
    /// 4-entry bundle layout).
    pub ffi_version: (i32, i32),
    /// Whether the chain holds the FFI extension.
    pub ffi_extension: bool,
    /// The FFI extension's `struct_size` (48 with all three functions).
    pub ffi_extension_size: usize,
    /// The table's `struct_size` (default: through the execute context slots).
    pub api_struct_size: usize,
    /// Whether registration queries the handler's metadata (the real plugins do).
    pub metadata_query: bool,
    /// A target whose registration the plugin refuses, with this message.
    pub refuse: Option<(String, String)>,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            pjrt_version: (0, 115),
            ffi_version: (0, 4),
            ffi_extension: true,
            ffi_extension_size: sys::PJRT_FFI_Extension_STRUCT_SIZE,
            api_struct_size: TABLE_SLOTS * 8 + 40,
            metadata_query: true,
            refuse: None,
        }
    }
}

const TABLE_SLOTS: usize = 100;

/// A `PJRT_Api` table: the head, then function slots.
#[repr(C)]
struct Table {
    struct_size: usize,
    extension_start: *const sys::PJRT_Extension_Base,
    version: sys::PJRT_Api_Version,
    slots: [*const c_void; TABLE_SLOTS],
}

/// An unrelated extension before the FFI one, as real chains have.
#[repr(C)]
struct OtherExtension {
    base: sys::PJRT_Extension_Base,
    payload: [usize; 2],
}

struct Inner {
    table: Table,
    other: OtherExtension,
    ext: sys::PJRT_FFI_Extension,
    xla: xs::XLA_FFI_Api,
    config: FakeConfig,
    calls: Mutex<Vec<FakeCall>>,
    /// Registered types: name and id (ids from 1000 on).
    types: Mutex<Vec<(String, i64)>>,
    /// User data added to contexts: context, type id, data.
    user_data: Mutex<Vec<(usize, i64, DataPtr)>>,
}

/// A user data pointer, kept with its provenance.
#[derive(Clone, Copy)]
struct DataPtr(*const c_void);
// SAFETY: only handed back to the test that stored it.
unsafe impl Send for DataPtr {}

thread_local! {
    static CURRENT: Cell<*const Inner> = const { Cell::new(core::ptr::null()) };
}

/// The fake plugin of this thread.
fn current() -> &'static Inner {
    let p = CURRENT.with(|c| c.get());
    assert!(!p.is_null(), "a fake plugin function called on a thread without a FakePlugin");
    // SAFETY: set by `FakePlugin::new` to its boxed `Inner`, cleared by its `Drop`
    // (the functions are only called while it lives, on its thread).
    unsafe { &*p }
}

/// A fake PJRT plugin; see the module docs.
pub struct FakePlugin {
    /// From `Box::into_raw`, freed by `Drop`: every pointer handed to the code under
    /// test derives from it (no `Box` retag invalidates them).
    inner: *mut Inner,
}

impl FakePlugin {
    /// A plugin as `config` says, current on this thread.
    pub fn new(config: FakeConfig) -> FakePlugin {
        // SAFETY: plain data of pointers, integers and optional functions: all
        // zero is valid.
        let mut xla: xs::XLA_FFI_Api = unsafe { core::mem::zeroed() };
        xla.struct_size = if config.ffi_version >= (0, 4) { xs::XLA_FFI_Api_STRUCT_SIZE as usize } else { 192 };
        xla.api_version = xs::XLA_FFI_Api_Version {
            struct_size: xs::XLA_FFI_Api_Version_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            major_version: config.ffi_version.0,
            minor_version: config.ffi_version.1,
        };
        xla.XLA_FFI_Error_Create = Some(xla_error_create);
        xla.XLA_FFI_Error_GetDetails = Some(xla_error_get_details);
        xla.XLA_FFI_Error_Destroy = Some(xla_error_destroy);
        // SAFETY: the same C signatures, with the runtime-version-independent
        // argument types of this crate's `sys` (pointers only).
        unsafe {
            xla.XLA_FFI_Handler_Register = Some(core::mem::transmute::<
                unsafe extern "C" fn(*mut c_void) -> *mut c_void,
                unsafe extern "C" fn(*mut xs::XLA_FFI_Handler_Register_Args) -> *mut xs::XLA_FFI_Error,
            >(xla_handler_register));
            xla.XLA_FFI_Type_Register = Some(core::mem::transmute::<
                unsafe extern "C" fn(*mut c_void) -> *mut c_void,
                unsafe extern "C" fn(*mut xs::XLA_FFI_Type_Register_Args) -> *mut xs::XLA_FFI_Error,
            >(xla_type_register));
        }
        let mut slots = [core::ptr::null::<c_void>(); TABLE_SLOTS];
        slots[0] = pjrt_error_destroy as *const c_void;
        slots[1] = pjrt_error_message as *const c_void;
        slots[2] = pjrt_error_get_code as *const c_void;
        slots[98] = context_create as *const c_void;
        slots[99] = context_destroy as *const c_void;
        let inner = Box::into_raw(Box::new(Inner {
            table: Table {
                struct_size: config.api_struct_size,
                extension_start: core::ptr::null(),
                version: sys::PJRT_Api_Version {
                    struct_size: 24,
                    extension_start: core::ptr::null(),
                    major_version: config.pjrt_version.0,
                    minor_version: config.pjrt_version.1,
                },
                slots,
            },
            other: OtherExtension {
                base: sys::PJRT_Extension_Base { struct_size: 40, type_: 1, next: core::ptr::null() },
                payload: [0; 2],
            },
            ext: sys::PJRT_FFI_Extension {
                base: sys::PJRT_Extension_Base {
                    struct_size: config.ffi_extension_size,
                    type_: sys::PJRT_EXTENSION_TYPE_FFI,
                    next: core::ptr::null(),
                },
                type_register: Some(ext_type_register),
                user_data_add: Some(ext_user_data_add),
                register_handler: Some(ext_register_handler),
            },
            xla,
            config,
            calls: Mutex::new(Vec::new()),
            types: Mutex::new(Vec::new()),
            user_data: Mutex::new(Vec::new()),
        }));
        // SAFETY: `inner` is a fresh, unaliased allocation; the chain's pointers are
        // derived from it.
        unsafe {
            if (*inner).config.ffi_extension {
                (*inner).other.base.next = core::ptr::addr_of!((*inner).ext.base);
            }
            (*inner).table.extension_start = core::ptr::addr_of!((*inner).other.base);
        }
        CURRENT.with(|c| c.set(inner));
        FakePlugin { inner }
    }

    /// Makes this plugin the thread's current one again (after another was made).
    pub fn make_current(&self) {
        CURRENT.with(|c| c.set(self.inner));
    }

    /// The table, as a plugin's `GetPjrtApi` returns it.
    pub fn api_ptr(&self) -> *const c_void {
        // SAFETY: only the field's address is taken.
        unsafe { core::ptr::addr_of!((*self.inner).table) as *const c_void }
    }

    /// The fake runtime's `XLA_FFI_Api`.
    pub fn runtime_ptr(&self) -> *const c_void {
        // SAFETY: only the field's address is taken.
        unsafe { core::ptr::addr_of!((*self.inner).xla) as *const c_void }
    }

    fn inner(&self) -> &Inner {
        // SAFETY: alive until `Drop`; only shared references are made (the
        // mutable parts are behind mutexes).
        unsafe { &*self.inner }
    }

    /// Registers a type as another library would have (name and id).
    pub fn add_type(&self, name: &str, id: i64) {
        self.inner().types.lock().unwrap().push((name.to_string(), id));
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<FakeCall> {
        self.inner().calls.lock().unwrap().clone()
    }

    /// The types registered (through the extension or the runtime), with their ids.
    pub fn types(&self) -> Vec<(String, i64)> {
        self.inner().types.lock().unwrap().clone()
    }

    /// The user data of type `type_id` added to `context`, as a pointer.
    pub fn user_data(&self, context: *mut c_void, type_id: i64) -> Option<*const c_void> {
        let all = self.inner().user_data.lock().unwrap();
        all.iter().find(|(c, t, _)| *c == context as usize && *t == type_id).map(|&(_, _, d)| d.0)
    }
}

impl core::fmt::Debug for FakePlugin {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FakePlugin").field("calls", &self.calls().len()).finish_non_exhaustive()
    }
}

impl Drop for FakePlugin {
    fn drop(&mut self) {
        CURRENT.with(|c| {
            if std::ptr::eq(c.get(), self.inner) {
                c.set(core::ptr::null())
            }
        });
        // SAFETY: from `Box::into_raw` in `new`, freed once; the plugin's functions
        // are no longer reachable through `CURRENT`.
        drop(unsafe { Box::from_raw(self.inner) });
    }
}

fn record(call: FakeCall) {
    current().calls.lock().unwrap().push(call);
}

/// # Safety
/// `len` bytes at `ptr`.
unsafe fn string(ptr: *const c_char, len: usize) -> String {
    if ptr.is_null() {
        return String::new();
    }
    // SAFETY: the caller's promise.
    String::from_utf8_lossy(unsafe { core::slice::from_raw_parts(ptr.cast::<u8>(), len) }).into_owned()
}

// ---- PJRT errors ----------------------------------------------------------------

struct PjrtError {
    code: u32,
    message: String,
}

fn pjrt_error(code: u32, message: String) -> *mut sys::PJRT_Error {
    Box::into_raw(Box::new(PjrtError { code, message })).cast()
}

unsafe extern "C" fn pjrt_error_destroy(args: *mut sys::PJRT_Error_Destroy_Args) {
    // SAFETY: the caller passes initialised args holding one of our errors.
    unsafe { drop(Box::from_raw((*args).error.cast::<PjrtError>())) };
}

unsafe extern "C" fn pjrt_error_message(args: *mut sys::PJRT_Error_Message_Args) {
    // SAFETY: as above; the message lives until the error is destroyed.
    unsafe {
        let e = &*(*args).error.cast::<PjrtError>();
        (*args).message = e.message.as_ptr().cast();
        (*args).message_size = e.message.len();
    }
}

unsafe extern "C" fn pjrt_error_get_code(args: *mut sys::PJRT_Error_GetCode_Args) -> *mut sys::PJRT_Error {
    // SAFETY: as above.
    unsafe { (*args).code = (*(*args).error.cast::<PjrtError>()).code };
    core::ptr::null_mut()
}

// ---- XLA errors -----------------------------------------------------------------

struct XlaError {
    code: u32,
    message: CString,
}

fn xla_error(code: u32, message: &str) -> *mut c_void {
    let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
    Box::into_raw(Box::new(XlaError { code, message })).cast()
}

unsafe extern "C" fn xla_error_create(args: *mut xs::XLA_FFI_Error_Create_Args) -> *mut xs::XLA_FFI_Error {
    // SAFETY: the handler passes initialised args with a NUL-terminated message.
    let (code, msg) = unsafe { ((*args).errc, core::ffi::CStr::from_ptr((*args).message)) };
    xla_error(code, &msg.to_string_lossy()).cast()
}

unsafe extern "C" fn xla_error_get_details(args: *mut xs::XLA_FFI_Error_GetDetails_Args) {
    // SAFETY: initialised args holding one of our errors.
    unsafe {
        let e = &*(*args).error.cast::<XlaError>();
        (*args).message = e.message.as_ptr();
        (*args).errc = e.code;
    }
}

unsafe extern "C" fn xla_error_destroy(args: *mut xs::XLA_FFI_Error_Destroy_Args) {
    // SAFETY: initialised args holding one of our errors, destroyed once.
    unsafe { drop(Box::from_raw((*args).error.cast::<XlaError>())) };
}

/// Takes an error a handler returned: its code and message.
fn take_xla_error(e: *mut xs::XLA_FFI_Error) -> Option<(u32, String)> {
    if e.is_null() {
        return None;
    }
    // SAFETY: handlers make errors with this runtime's `Error_Create` (ours).
    let e = unsafe { Box::from_raw(e.cast::<XlaError>()) };
    Some((e.code, e.message.to_string_lossy().into_owned()))
}

// ---- the metadata query ---------------------------------------------------------

/// Asks `handler` for its metadata as XLA does at registration: the version it
/// reports must be in [0.1, runtime]. Returns the state type id it reports.
fn query(target: &str, handler: *const c_void) -> Result<i64, (u32, String)> {
    let inner = current();
    // SAFETY: plain data; all zero is valid.
    let mut md: xs::XLA_FFI_Metadata = unsafe { core::mem::zeroed() };
    md.struct_size = xs::XLA_FFI_Metadata_STRUCT_SIZE as usize;
    // SAFETY: as above.
    let mut ext: xs::XLA_FFI_Metadata_Extension = unsafe { core::mem::zeroed() };
    ext.extension_base.struct_size = xs::XLA_FFI_Metadata_Extension_STRUCT_SIZE as usize;
    ext.extension_base.type_ = xs::XLA_FFI_Extension_Metadata;
    ext.metadata = &mut md;
    // SAFETY: as above.
    let mut frame: xs::XLA_FFI_CallFrame = unsafe { core::mem::zeroed() };
    frame.struct_size = xs::XLA_FFI_CallFrame_STRUCT_SIZE as usize;
    frame.api = &inner.xla;
    frame.stage = xs::XLA_FFI_ExecutionStage_EXECUTE;
    frame.extension_start = &mut ext as *mut xs::XLA_FFI_Metadata_Extension as *mut _;
    frame.args.struct_size = xs::XLA_FFI_Args_STRUCT_SIZE as usize;
    frame.rets.struct_size = xs::XLA_FFI_Rets_STRUCT_SIZE as usize;
    frame.attrs.struct_size = xs::XLA_FFI_Attrs_STRUCT_SIZE as usize;
    // SAFETY: registration hands over a handler function (XLA's contract).
    let f: unsafe extern "C" fn(*mut xs::XLA_FFI_CallFrame) -> *mut xs::XLA_FFI_Error =
        unsafe { core::mem::transmute(handler) };
    // SAFETY: the frame and metadata live until after the call.
    let err = unsafe { f(&mut frame) };
    if let Some(e) = take_xla_error(err) {
        return Err(e);
    }
    let v = (md.api_version.major_version, md.api_version.minor_version);
    if v.0 != 0 || v < (0, 1) || v > inner.config.ffi_version {
        return Err((
            3,
            format!(
                "XLA FFI handler registration for {target} failed because the handler's API version ({}.{}) is \
                 incompatible with the framework's API version ({}.{})",
                v.0, v.1, inner.config.ffi_version.0, inner.config.ffi_version.1
            ),
        ));
    }
    Ok(md.state_type_id.type_id)
}

// ---- the FFI extension ----------------------------------------------------------

unsafe extern "C" fn ext_register_handler(args: *mut sys::PJRT_FFI_Register_Handler_Args) -> *mut sys::PJRT_Error {
    // SAFETY: the caller passes initialised args of at least the size checked.
    let a = unsafe { *args };
    // SAFETY: spans of the given lengths.
    let (target, platform) =
        unsafe { (string(a.target_name, a.target_name_size), string(a.platform_name, a.platform_name_size)) };
    record(FakeCall::ExtRegisterHandler {
        target: target.clone(),
        platform,
        struct_size: a.struct_size,
        traits: a.traits,
    });
    if a.struct_size < sys::PJRT_FFI_Register_Handler_Args_STRUCT_SIZE {
        return pjrt_error(3, format!("Unexpected PJRT_FFI_Register_Handler_Args size: got {}", a.struct_size));
    }
    if a.handler.is_null() {
        return pjrt_error(3, "FFI handler cannot be null".into());
    }
    let inner = current();
    if let Some((t, msg)) = &inner.config.refuse {
        if *t == target {
            return pjrt_error(3, msg.clone());
        }
    }
    if inner.config.metadata_query {
        if let Err((code, msg)) = query(&target, a.handler) {
            // An FFI 0.2 runtime drops the error, as `xla-cpu-pjrt` 0.0.1 does.
            if inner.config.ffi_version >= (0, 3) {
                return pjrt_error(code, msg);
            }
        }
    }
    core::ptr::null_mut()
}

unsafe extern "C" fn ext_type_register(args: *mut sys::PJRT_FFI_Type_Register_Args) -> *mut sys::PJRT_Error {
    let inner = current();
    // SAFETY: `struct_size` is the first field of any version's args.
    let size = unsafe { (*args).struct_size };
    let need = if inner.config.pjrt_version >= (0, 106) { 48 } else { 40 };
    if size < need {
        return pjrt_error(3, format!("Unexpected PJRT_FFI_Type_Register_Args size: expected {need}, got {size}"));
    }
    if need == 48 {
        // SAFETY: 48 bytes were promised; these plugins dereference `type_info`.
        if unsafe { (*args).type_info.is_null() } {
            return pjrt_error(13, "type_info is null (the fake plugin would crash here)".into());
        }
    }
    // SAFETY: at least the 40-byte fields are there.
    let (name, asked) = unsafe { (string((*args).type_name, (*args).type_name_size), (*args).type_id) };
    let id = match assign(&name, asked) {
        Ok(id) => id,
        Err(msg) => return pjrt_error(13, msg),
    };
    // SAFETY: as above.
    unsafe { (*args).type_id = id };
    record(FakeCall::ExtTypeRegister { name, struct_size: size, id });
    core::ptr::null_mut()
}

static NEXT_ID: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1000);

/// XLA's type registry: `asked` 0 assigns a new id (an error for a known name),
/// another value registers the name under it (an error if the name has another id
/// or the id another name).
fn assign(name: &str, asked: i64) -> Result<i64, String> {
    let mut types = current().types.lock().unwrap();
    let by_name = types.iter().find(|(n, _)| n == name).map(|(_, id)| *id);
    let by_id = types.iter().find(|(_, id)| *id == asked).map(|(n, _)| n.clone());
    match (asked, by_name, by_id) {
        (0, Some(id), _) => Err(format!("Type name {name} already registered with type id {id}")),
        (0, None, _) => {
            // Unique in the process, so that records shared by several fakes (as
            // by several real plugins) never meet a conflict by accident.
            let id = NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            types.push((name.to_string(), id));
            Ok(id)
        }
        (a, Some(id), _) if id == a => Ok(a),
        (a, Some(id), _) => Err(format!("Type name {name} already registered with type id {id}, not {a}")),
        (a, None, Some(other)) => Err(format!("Type id {a} already registered for type {other}")),
        (a, None, None) => {
            types.push((name.to_string(), a));
            Ok(a)
        }
    }
}

unsafe extern "C" fn ext_user_data_add(args: *mut sys::PJRT_FFI_UserData_Add_Args) -> *mut sys::PJRT_Error {
    // SAFETY: initialised args of at least 40 bytes (the deleter is not read).
    let (size, ctx, id, data) =
        unsafe { ((*args).struct_size, (*args).context, (*args).user_data.type_id, (*args).user_data.data) };
    record(FakeCall::ExtUserDataAdd { type_id: id, struct_size: size });
    if ctx.is_null() {
        return pjrt_error(3, "PJRT FFI extension requires execute context to be not nullptr".into());
    }
    let mut all = current().user_data.lock().unwrap();
    if all.iter().any(|(c, t, _)| *c == ctx as usize && *t == id) {
        return pjrt_error(6, format!("user data of type id {id} is already in the context"));
    }
    all.push((ctx as usize, id, DataPtr(data)));
    core::ptr::null_mut()
}

unsafe extern "C" fn context_create(args: *mut sys::PJRT_ExecuteContext_Create_Args) -> *mut sys::PJRT_Error {
    record(FakeCall::ContextCreate);
    // SAFETY: initialised args.
    unsafe { (*args).context = Box::into_raw(Box::new(0u64)).cast() };
    core::ptr::null_mut()
}

unsafe extern "C" fn context_destroy(args: *mut sys::PJRT_ExecuteContext_Destroy_Args) -> *mut sys::PJRT_Error {
    record(FakeCall::ContextDestroy);
    // SAFETY: a context `context_create` made, destroyed once.
    let ctx = unsafe { (*args).context };
    current().user_data.lock().unwrap().retain(|(c, _, _)| *c != ctx as usize);
    // SAFETY: as above.
    unsafe { drop(Box::from_raw(ctx.cast::<u64>())) };
    core::ptr::null_mut()
}

// ---- the runtime's registration functions ---------------------------------------

unsafe extern "C" fn xla_type_register(args: *mut c_void) -> *mut c_void {
    let a = args.cast::<sys::XLA_Type_Register_Args>();
    // SAFETY: initialised args (the runtime reads `type_info` past STRUCT_SIZE too).
    let (name, slot) = unsafe { (string((*a).name.ptr, (*a).name.len), (*a).type_id.cast::<i64>()) };
    if slot.is_null() {
        return xla_error(3, "type_id is null");
    }
    // SAFETY: the caller's `XLA_FFI_TypeId` slot (an `AtomicI64`; read plainly, as
    // XLA does).
    let asked = unsafe { core::ptr::read_volatile(slot) };
    let id = match assign(&name, asked) {
        Ok(id) => id,
        Err(msg) => return xla_error(13, &msg),
    };
    // SAFETY: the caller's writable `XLA_FFI_TypeId` slot (an `AtomicI64` in a
    // registration record; a plain write as XLA does it).
    unsafe { core::ptr::write_volatile(slot, id) };
    record(FakeCall::XlaTypeRegister { name, id });
    core::ptr::null_mut()
}

unsafe extern "C" fn xla_handler_register(args: *mut c_void) -> *mut c_void {
    let inner = current();
    let v04 = inner.config.ffi_version >= (0, 4);
    // SAFETY: initialised args in the layout of this runtime's version (what the
    // caller must send); `struct_size` first, checked before the rest is read.
    let size = unsafe { args.cast::<usize>().read() };
    let need =
        if v04 { sys::XLA_Handler_Register_Args_STRUCT_SIZE } else { sys::XLA_Handler_Register_Args_V03_STRUCT_SIZE };
    if size < need {
        return xla_error(3, &format!("Unexpected XLA_FFI_Handler_Register_Args size: expected {need}, got {size}"));
    }
    // SAFETY: as above.
    let (name, platform, bundle, traits): (_, _, Vec<sys::XLA_Handler>, u32) = unsafe {
        if v04 {
            let a = args.cast::<sys::XLA_Handler_Register_Args>().read();
            (a.name, a.platform, a.bundle.to_vec(), a.traits)
        } else {
            let a = args.cast::<sys::XLA_Handler_Register_Args_V03>().read();
            (a.name, a.platform, a.bundle.to_vec(), a.traits)
        }
    };
    // SAFETY: spans of the given lengths.
    let (target, platform) = unsafe { (string(name.ptr, name.len), string(platform.ptr, platform.len)) };
    let _ = traits;
    if let Some((t, msg)) = &inner.config.refuse {
        if *t == target {
            return xla_error(3, msg);
        }
    }
    record(FakeCall::XlaHandlerRegister {
        target: target.clone(),
        platform,
        struct_size: size,
        stages: bundle.iter().map(|h| h.is_some()).collect(),
    });
    if bundle[3].is_none() {
        return xla_error(3, &format!("{target}: no execute handler"));
    }
    for (i, h) in bundle.iter().enumerate() {
        let Some(h) = h else { continue };
        match query(&target, *h as *const c_void) {
            Err((code, msg)) => return xla_error(code, &msg),
            Ok(id) if i == 0 => {
                let known = inner.types.lock().unwrap().iter().any(|(_, t)| *t == id);
                if !known {
                    return xla_error(
                        9,
                        &format!("{target}: the instantiate handler's state type id {id} is not registered"),
                    );
                }
            }
            Ok(_) => {}
        }
    }
    core::ptr::null_mut()
}
