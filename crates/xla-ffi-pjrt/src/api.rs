//! [`PjrtApi`]: a plugin's `PJRT_Api` table, checked once, with its FFI extension.

use core::ffi::c_void;
use core::ptr::NonNull;
use std::sync::Mutex;

use crate::error::{Error, ErrorKind};
use crate::runtime::Runtime;
use crate::sys;

/// The longest extension chain walked; a longer one is taken as a cycle.
const MAX_EXTENSIONS: usize = 64;

/// One extension of a plugin's chain: its `PJRT_Extension_Type` and `struct_size`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExtensionInfo {
    /// `PJRT_Extension_Type` (5 is the FFI extension).
    pub type_: u32,
    /// The extension's `struct_size`.
    pub struct_size: usize,
}

/// A PJRT plugin's API table (`const PJRT_Api*` from its `GetPjrtApi`), checked:
/// its `struct_size`, its PJRT API version and its extension chain.
///
/// Made only by the `unsafe` [`from_raw`](Self::from_raw), whose caller promises the
/// table is valid for as long as the value (and everything made from it) lives;
/// every method is safe on that promise.
#[derive(Debug)]
pub struct PjrtApi {
    ptr: NonNull<sys::PJRT_Api_Head>,
    name: String,
    struct_size: usize,
    version: (i32, i32),
    extensions: Vec<ExtensionInfo>,
    ffi: Option<NonNull<sys::PJRT_FFI_Extension>>,
    /// The XLA FFI runtime of each platform, once probed.
    pub(crate) runtimes: Mutex<Vec<(String, Runtime)>>,
    /// The addresses of the type id slots registered into this plugin (through
    /// this value): user data is handed over only under an id this plugin gave
    /// or accepted for that very type.
    pub(crate) typed: Mutex<Vec<usize>>,
}

// SAFETY: the table is immutable and the PJRT C API's functions may be called from
// any thread (the plugin's contract); the value holds no thread-bound state.
unsafe impl Send for PjrtApi {}
// SAFETY: as above.
unsafe impl Sync for PjrtApi {}

impl PjrtApi {
    /// Checks the table at `ptr` and walks its extension chain.
    ///
    /// Errors (kind [`ErrorKind::BadApi`]): a null pointer, a table shorter than
    /// its leading fields, an extension shorter than `PJRT_Extension_Base`, a chain
    /// longer than 64 (a cycle).
    ///
    /// # Safety
    /// `ptr` is null or a `PJRT_Api` table returned by a plugin's `GetPjrtApi`: at
    /// least `struct_size` readable bytes, an extension chain of valid extensions
    /// (each at least its `struct_size` bytes), and functions that behave as the
    /// PJRT C API says. The plugin stays loaded, and the table valid, for as long as
    /// the returned value and everything made from it (registrations use it, and
    /// the handlers registered stay in the plugin) are used.
    pub unsafe fn from_raw(ptr: *const c_void) -> Result<PjrtApi, Error> {
        let Some(head) = NonNull::new(ptr as *mut sys::PJRT_Api_Head) else {
            return Err(Error::new(ErrorKind::BadApi, "the PJRT API table is a null pointer"));
        };
        // SAFETY: the caller promises a table whose first field is `struct_size`.
        let struct_size = unsafe { core::ptr::addr_of!((*head.as_ptr()).struct_size).read() };
        if struct_size < sys::PJRT_Api_Head_SIZE {
            return Err(Error::new(
                ErrorKind::BadApi,
                format!(
                    "the PJRT API table at {ptr:p} has struct_size {struct_size}, shorter than its leading fields ({} bytes)",
                    sys::PJRT_Api_Head_SIZE
                ),
            ));
        }
        // SAFETY: the table has at least the head's bytes (checked above).
        let h = unsafe { head.as_ptr().read() };
        let version = (h.pjrt_api_version.major_version, h.pjrt_api_version.minor_version);
        let name = format!("the PJRT plugin (PJRT API {}.{})", version.0, version.1);
        let mut extensions = Vec::new();
        let mut ffi = None;
        let mut next = h.extension_start;
        while let Some(ext) = NonNull::new(next as *mut sys::PJRT_Extension_Base) {
            if extensions.len() == MAX_EXTENSIONS {
                return Err(Error::new(
                    ErrorKind::BadApi,
                    format!("{name}: its extension chain is longer than {MAX_EXTENSIONS} (a cycle?)"),
                ));
            }
            // SAFETY: the caller promises each extension of the chain has at least
            // the base's fields.
            let base = unsafe { ext.as_ptr().read() };
            if base.struct_size < sys::PJRT_Extension_Base_STRUCT_SIZE {
                return Err(Error::new(
                    ErrorKind::BadApi,
                    format!(
                        "{name}: extension {} (type {}) has struct_size {}, shorter than PJRT_Extension_Base",
                        extensions.len(),
                        base.type_,
                        base.struct_size
                    ),
                ));
            }
            extensions.push(ExtensionInfo { type_: base.type_, struct_size: base.struct_size });
            if base.type_ == sys::PJRT_EXTENSION_TYPE_FFI && ffi.is_none() {
                ffi = Some(ext.cast());
            }
            next = base.next;
        }
        Ok(PjrtApi {
            ptr: head,
            name,
            struct_size,
            version,
            extensions,
            ffi,
            runtimes: Mutex::new(Vec::new()),
            typed: Mutex::new(Vec::new()),
        })
    }

    /// Names the plugin in every message (its path or file name, say).
    pub fn named(mut self, name: impl Into<String>) -> PjrtApi {
        self.name = name.into();
        self
    }

    /// The plugin's name in messages.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The table's PJRT API version, `(major, minor)`.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The table's `struct_size`.
    pub fn struct_size(&self) -> usize {
        self.struct_size
    }

    /// The raw table, as given to [`from_raw`](Self::from_raw).
    pub fn as_ptr(&self) -> *const c_void {
        self.ptr.as_ptr() as *const c_void
    }

    /// The extensions of the chain, in order.
    pub fn extensions(&self) -> &[ExtensionInfo] {
        &self.extensions
    }

    /// Whether the chain holds the FFI extension (`PJRT_Extension_Type_FFI`).
    pub fn has_ffi_extension(&self) -> bool {
        self.ffi.is_some()
    }

    /// The FFI extension's functions, or an error naming the plugin and what it has.
    pub(crate) fn ffi_extension(&self) -> Result<FfiFunctions, Error> {
        let Some(ext) = self.ffi else {
            let types: Vec<String> = self.extensions.iter().map(|e| e.type_.to_string()).collect();
            return Err(Error::new(
                ErrorKind::NoFfiExtension,
                format!(
                    "{}: no FFI extension (PJRT_Extension_Type_FFI = {}) in its extension chain (extension types: [{}]); \
                     it cannot register handlers",
                    self.name,
                    sys::PJRT_EXTENSION_TYPE_FFI,
                    types.join(", ")
                ),
            ));
        };
        // SAFETY: `from_raw` read the base of this extension; its `struct_size`
        // says which of the three slots exist (the caller promised that many bytes).
        let size = unsafe { core::ptr::addr_of!((*ext.as_ptr()).base.struct_size).read() };
        let slot = |offset: usize| -> Option<*const c_void> {
            if size < offset + 8 {
                return None;
            }
            // SAFETY: the slot lies within the extension's `struct_size` bytes.
            let f = unsafe { (ext.as_ptr() as *const u8).add(offset).cast::<*const c_void>().read() };
            (!f.is_null()).then_some(f)
        };
        let type_register = slot(core::mem::offset_of!(sys::PJRT_FFI_Extension, type_register));
        let user_data_add = slot(core::mem::offset_of!(sys::PJRT_FFI_Extension, user_data_add));
        let register_handler = slot(core::mem::offset_of!(sys::PJRT_FFI_Extension, register_handler));
        // SAFETY: each non-null slot of the FFI extension is the plugin's function of
        // that slot's type (the caller's promise for the table).
        unsafe {
            Ok(FfiFunctions {
                type_register: type_register.map(|f| core::mem::transmute::<_, sys::PJRT_FFI_Type_Register>(f)),
                user_data_add: user_data_add.map(|f| core::mem::transmute::<_, sys::PJRT_FFI_UserData_Add>(f)),
                register_handler: register_handler
                    .map(|f| core::mem::transmute::<_, sys::PJRT_FFI_Register_Handler>(f)),
            })
        }
    }

    /// Records that the type id slot at `slot` is registered into this plugin.
    pub(crate) fn note_typed(&self, slot: *const c_void) {
        let mut typed = self.typed.lock().unwrap_or_else(|e| e.into_inner());
        if !typed.contains(&(slot as usize)) {
            typed.push(slot as usize);
        }
    }

    /// Whether the type id slot at `slot` was registered into this plugin.
    pub(crate) fn is_typed(&self, slot: *const c_void) -> bool {
        self.typed.lock().unwrap_or_else(|e| e.into_inner()).contains(&(slot as usize))
    }

    /// The function pointer at byte `offset` of the table, if the table reaches it
    /// and it is not null.
    pub(crate) fn slot(&self, offset: usize) -> Option<*const c_void> {
        if self.struct_size < offset + 8 {
            return None;
        }
        // SAFETY: the slot lies within the table's `struct_size` bytes.
        let f = unsafe { (self.ptr.as_ptr() as *const u8).add(offset).cast::<*const c_void>().read() };
        (!f.is_null()).then_some(f)
    }

    /// Takes a `PJRT_Error*` the plugin returned: its message and code, then
    /// destroys it. `None` for null (success).
    pub(crate) fn take_error(&self, err: *mut sys::PJRT_Error) -> Option<String> {
        if err.is_null() {
            return None;
        }
        // SAFETY: the head's bytes were checked by `from_raw`.
        let h = unsafe { self.ptr.as_ptr().read() };
        let mut message = String::from("(the plugin gave no message)");
        if let Some(f) = h.PJRT_Error_Message {
            let mut args = sys::PJRT_Error_Message_Args {
                struct_size: sys::PJRT_Error_Message_Args_STRUCT_SIZE,
                extension_start: core::ptr::null(),
                error: err,
                message: core::ptr::null(),
                message_size: 0,
            };
            // SAFETY: the plugin's own function on its own error, with initialised args.
            unsafe { f(&mut args) };
            if !args.message.is_null() {
                // SAFETY: the plugin returns `message_size` bytes at `message`, alive
                // until the error is destroyed (below, after the copy).
                let bytes = unsafe { core::slice::from_raw_parts(args.message.cast::<u8>(), args.message_size) };
                message = String::from_utf8_lossy(bytes).into_owned();
            }
        }
        if let Some(f) = h.PJRT_Error_GetCode {
            let mut args = sys::PJRT_Error_GetCode_Args {
                struct_size: sys::PJRT_Error_GetCode_Args_STRUCT_SIZE,
                extension_start: core::ptr::null(),
                error: err,
                code: 0,
            };
            // SAFETY: as above; a failure of GetCode is itself an error to destroy.
            let e = unsafe { f(&mut args) };
            if e.is_null() && args.code != 0 {
                message = format!("code {}: {}", args.code, message);
            } else if !e.is_null() {
                self.destroy_error(e);
            }
        }
        self.destroy_error(err);
        Some(message)
    }

    fn destroy_error(&self, err: *mut sys::PJRT_Error) {
        // SAFETY: the head's bytes were checked by `from_raw`.
        let h = unsafe { self.ptr.as_ptr().read() };
        if let Some(f) = h.PJRT_Error_Destroy {
            let mut args = sys::PJRT_Error_Destroy_Args {
                struct_size: sys::PJRT_Error_Destroy_Args_STRUCT_SIZE,
                extension_start: core::ptr::null(),
                error: err,
            };
            // SAFETY: the plugin's own function on an error it made, destroyed once.
            unsafe { f(&mut args) };
        }
    }
}

/// The FFI extension's functions that the plugin has.
#[derive(Clone, Copy)]
pub(crate) struct FfiFunctions {
    pub type_register: Option<sys::PJRT_FFI_Type_Register>,
    pub user_data_add: Option<sys::PJRT_FFI_UserData_Add>,
    pub register_handler: Option<sys::PJRT_FFI_Register_Handler>,
}
