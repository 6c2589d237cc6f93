//! Loading a PJRT plugin and reading its `PJRT_Api` table.

use std::collections::HashMap;
use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use super::ClientError;
use crate::error::with_sources;
use crate::sys::client as sys;

/// A PJRT plugin: its `PJRT_Api` table, checked to hold every function this
/// crate calls. Plugins stay loaded until the process ends (they are never
/// unloaded, as in JAX), so a `Plugin` is a cheap `Copy` handle.
#[derive(Clone, Copy)]
pub struct Plugin {
    api: &'static sys::PJRT_Api,
}

// SAFETY: the PJRT C API is thread-safe (JAX calls one plugin from many threads);
// a `Plugin` only holds a shared reference to the plugin's immutable table.
unsafe impl Send for Plugin {}
// SAFETY: as above.
unsafe impl Sync for Plugin {}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor) = self.api_version();
        write!(f, "Plugin(PJRT API {major}.{minor})")
    }
}

/// A plugin attribute's value (`PJRT_Plugin_Attributes`).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AttributeValue {
    /// A string.
    String(String),
    /// An integer.
    Int(i64),
    /// A list of integers (`stablehlo_current_version` is `[1, 18, 0]`).
    IntList(Vec<i64>),
    /// A float, a bool or a kind this crate does not read.
    Other,
}

/// The tables already initialized in this process (`PJRT_Plugin_Initialize` is
/// called once per plugin), by the address of the table.
fn loaded() -> &'static Mutex<HashMap<PathBuf, usize>> {
    static LOADED: OnceLock<Mutex<HashMap<PathBuf, usize>>> = OnceLock::new();
    LOADED.get_or_init(Default::default)
}

impl Plugin {
    /// Loads the shared library at `path`, calls its `GetPjrtApi` and
    /// `PJRT_Plugin_Initialize`. Loading the same file again returns the same
    /// plugin (initialized once). The table is checked (its version, its struct
    /// sizes) before anything else of it is used; errors name the path.
    ///
    /// # Safety
    ///
    /// Loading a library runs its initialisers, and its `GetPjrtApi` is called as
    /// `const PJRT_Api* GetPjrtApi(void)`. `path` must name a PJRT plugin (or a
    /// library whose initialisers are sound to run in this process and which has no
    /// `GetPjrtApi` of another signature): what any PJRT plugin is. Anything else
    /// under that name is undefined behaviour, which no check made after loading can
    /// catch. (As for `libloading::Library::new`.)
    pub unsafe fn load(path: impl AsRef<Path>) -> Result<Plugin, ClientError> {
        let path = path.as_ref();
        let load_error = |message: String| ClientError::Load { path: path.to_path_buf(), message };
        let key = path.canonicalize().map_err(|e| load_error(e.to_string()))?;
        let mut loaded = loaded().lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&addr) = loaded.get(&key) {
            // SAFETY: `addr` is the table of a plugin loaded, checked and initialized
            // below; the library is never unloaded.
            return unsafe { Self::from_raw(addr as *const c_void) };
        }
        // SAFETY: loading a library runs its initializers: sound by `load`'s
        // contract (the caller vouches that `path` is a PJRT plugin).
        let library = unsafe { crate::open_library::open(&key) }.map_err(|e| load_error(with_sources(&e)))?;
        type GetPjrtApi = unsafe extern "C" fn() -> *const c_void;
        // SAFETY: `GetPjrtApi` has this signature in every PJRT plugin
        // (`const PJRT_Api* GetPjrtApi(void)`), and `path` is one by `load`'s contract.
        let get_api = unsafe { library.get::<GetPjrtApi>(b"GetPjrtApi\0") }
            .map_err(|e| load_error(format!("no symbol GetPjrtApi ({})", with_sources(&e))))?;
        // SAFETY: the plugin's own entry point, no arguments.
        let raw = unsafe { get_api() };
        // The plugin stays loaded for the process: its table and objects are used
        // until the end, and XLA's static destructors do not survive an unload.
        std::mem::forget(library);
        if raw.is_null() {
            return Err(load_error("GetPjrtApi returned null".into()));
        }
        // SAFETY: `raw` is the table `GetPjrtApi` returned, valid for the process
        // since the library is never unloaded.
        let plugin = unsafe { Self::from_raw(raw) }?;
        plugin.initialize()?;
        loaded.insert(key, raw as usize);
        Ok(plugin)
    }

    /// A plugin from a `PJRT_Api*` that the host already has (from `GetPjrtApi`
    /// of a library it loaded, or from another PJRT client). The table is checked
    /// (`struct_size`, major version 0, the functions this crate calls) but
    /// `PJRT_Plugin_Initialize` is not called: the host has done that.
    ///
    /// # Safety
    ///
    /// `api` must be null or point to a `PJRT_Api` table of at least the
    /// `struct_size` it states, valid (and its plugin loaded) for the rest of the
    /// process.
    pub unsafe fn from_raw(api: *const c_void) -> Result<Plugin, ClientError> {
        if api.is_null() {
            return Err(ClientError::Unsupported { message: "the PJRT_Api pointer is null".into() });
        }
        // SAFETY: the caller promises a table of at least `struct_size` bytes;
        // `struct_size` is its first field, an aligned `size_t`.
        let struct_size = unsafe { *(api as *const usize) };
        if struct_size < sys::PJRT_API_PREFIX_SIZE {
            return Err(ClientError::Unsupported {
                message: format!(
                    "its PJRT_Api table has {struct_size} bytes; this crate calls functions up to \
                     PJRT_ExecuteContext_Destroy and needs at least {} (PJRT API 0.5x or newer)",
                    sys::PJRT_API_PREFIX_SIZE
                ),
            });
        }
        // SAFETY: the table has at least `size_of::<PJRT_Api>()` bytes (checked
        // above), lives for the process (the caller's promise), and every field
        // is a pointer, an integer or an optional function pointer.
        let api: &'static sys::PJRT_Api = unsafe { &*(api as *const sys::PJRT_Api) };
        let plugin = Plugin { api };
        let (major, minor) = plugin.api_version();
        if major != 0 {
            return Err(ClientError::Unsupported {
                message: format!("PJRT API {major}.{minor}; this crate knows major version 0"),
            });
        }
        if api.PJRT_Error_Destroy.is_none() || api.PJRT_Error_Message.is_none() {
            return Err(ClientError::Unsupported {
                message: "PJRT_Error_Destroy or PJRT_Error_Message is null".into(),
            });
        }
        Ok(plugin)
    }

    /// The `PJRT_Api*`, for code that takes the raw table (registering handlers
    /// with `xla_ffi_pjrt`'s registration functions, another PJRT client).
    pub fn as_raw(&self) -> *const c_void {
        self.api as *const sys::PJRT_Api as *const c_void
    }

    /// The plugin's table as a [`PjrtApi`](crate::PjrtApi), for registering
    /// handler libraries into it ([`register`](crate::register)).
    pub fn pjrt_api(&self) -> Result<crate::PjrtApi, crate::Error> {
        // SAFETY: a `Plugin` holds a checked table that lives for the process (a
        // plugin loaded by `load` is never unloaded; `from_raw`'s caller promised
        // the same).
        unsafe { crate::PjrtApi::from_raw(self.as_raw()) }
    }

    /// The PJRT C API version the plugin was built with, `(major, minor)`.
    pub fn api_version(&self) -> (i32, i32) {
        (self.api.pjrt_api_version.major_version, self.api.pjrt_api_version.minor_version)
    }

    pub(crate) fn api(&self) -> &'static sys::PJRT_Api {
        self.api
    }

    fn initialize(&self) -> Result<(), ClientError> {
        let f = self.slot(self.api.PJRT_Plugin_Initialize, "PJRT_Plugin_Initialize")?;
        let mut args: sys::PJRT_Plugin_Initialize_Args = sys::args();
        // SAFETY: a valid, zeroed argument struct with its size.
        let err = unsafe { f(&mut args) };
        self.check(err, "PJRT_Plugin_Initialize")
    }

    /// The plugin's attributes (`xla_version`, `stablehlo_current_version`,
    /// `stablehlo_minimum_version`, ...), in its order.
    pub fn attributes(&self) -> Result<Vec<(String, AttributeValue)>, ClientError> {
        let f = self.slot(self.api.PJRT_Plugin_Attributes, "PJRT_Plugin_Attributes")?;
        let mut args: sys::PJRT_Plugin_Attributes_Args = sys::args();
        // SAFETY: a valid, zeroed argument struct with its size.
        let err = unsafe { f(&mut args) };
        self.check(err, "PJRT_Plugin_Attributes")?;
        let mut out = Vec::new();
        for i in 0..args.num_attributes {
            // SAFETY: the plugin returned an array of `num_attributes` named values
            // that live for the process.
            let value = unsafe { &*args.attributes.add(i) };
            // SAFETY: `name` has `name_size` bytes (the plugin's promise).
            let name = unsafe { bytes(value.name.cast(), value.name_size) };
            let name = String::from_utf8_lossy(name).into_owned();
            let parsed = match value.type_ {
                sys::PJRT_NAMED_VALUE_STRING => {
                    // SAFETY: for a string, the union holds `const char*` of
                    // `value_size` bytes.
                    let s = unsafe { bytes(value.value as usize as *const u8, value.value_size) };
                    AttributeValue::String(String::from_utf8_lossy(s).into_owned())
                }
                sys::PJRT_NAMED_VALUE_INT64 => AttributeValue::Int(value.value as i64),
                sys::PJRT_NAMED_VALUE_INT64_LIST => {
                    let ptr = value.value as usize as *const i64;
                    let list = if ptr.is_null() || value.value_size == 0 {
                        Vec::new()
                    } else {
                        // SAFETY: for a list, the union holds `const int64_t*` of
                        // `value_size` elements.
                        unsafe { std::slice::from_raw_parts(ptr, value.value_size) }.to_vec()
                    };
                    AttributeValue::IntList(list)
                }
                _ => AttributeValue::Other,
            };
            out.push((name, parsed));
        }
        Ok(out)
    }

    /// The StableHLO versions the plugin reads, `(minimum, current)`, from its
    /// attributes, when it states them.
    pub fn stablehlo_versions(&self) -> Option<(Vec<i64>, Vec<i64>)> {
        let attributes = self.attributes().ok()?;
        let find = |key: &str| {
            attributes.iter().find_map(|(name, value)| match value {
                AttributeValue::IntList(list) if name == key => Some(list.clone()),
                _ => None,
            })
        };
        Some((find("stablehlo_minimum_version")?, find("stablehlo_current_version")?))
    }

    /// A function of the table, or an error naming it when the plugin left it null.
    pub(crate) fn slot<F>(&self, f: Option<F>, name: &str) -> Result<F, ClientError> {
        f.ok_or_else(|| ClientError::Unsupported { message: format!("the plugin does not implement {name}") })
    }

    /// Turns a returned `PJRT_Error*` into `Err` (with its code and message) and
    /// frees it.
    pub(crate) fn check(&self, err: *mut sys::PJRT_Error, call: &'static str) -> Result<(), ClientError> {
        if err.is_null() {
            return Ok(());
        }
        let mut message_args: sys::PJRT_Error_Message_Args = sys::args();
        message_args.error = err;
        // SAFETY: checked non-null in `from_raw`; `err` is a live error of this plugin.
        unsafe { (self.api.PJRT_Error_Message.expect("checked in from_raw"))(&mut message_args) };
        // SAFETY: the message has `message_size` bytes and lives as long as `err`.
        let message = unsafe { bytes(message_args.message.cast(), message_args.message_size) };
        let message = String::from_utf8_lossy(message).into_owned();
        let mut code = 2; // UNKNOWN, when the plugin cannot say
        if let Some(get_code) = self.api.PJRT_Error_GetCode {
            let mut code_args: sys::PJRT_Error_GetCode_Args = sys::args();
            code_args.error = err;
            // SAFETY: a valid argument struct naming a live error.
            let code_err = unsafe { get_code(&mut code_args) };
            if code_err.is_null() {
                code = code_args.code;
            } else {
                self.destroy_error(code_err);
            }
        }
        self.destroy_error(err);
        Err(ClientError::Pjrt { call, code, message })
    }

    fn destroy_error(&self, err: *mut sys::PJRT_Error) {
        let mut args: sys::PJRT_Error_Destroy_Args = sys::args();
        args.error = err;
        // SAFETY: checked non-null in `from_raw`; `err` is freed once, here.
        unsafe { (self.api.PJRT_Error_Destroy.expect("checked in from_raw"))(&mut args) };
    }
}

/// A byte slice from a pointer and length given by the plugin; empty for null.
///
/// # Safety
///
/// Unless null or `len == 0`, `ptr` points to `len` readable bytes that outlive
/// `'a`.
pub(crate) unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if ptr.is_null() || len == 0 {
        &[]
    } else {
        // SAFETY: the caller's promise.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}
