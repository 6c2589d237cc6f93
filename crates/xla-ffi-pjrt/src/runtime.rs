//! [`Runtime`]: a plugin's own XLA FFI API table (`XLA_FFI_Api*`), as the probe
//! obtained it, with the two registration functions the FFI extension lacks:
//! `XLA_FFI_Type_Register` and `XLA_FFI_Handler_Register` with a whole bundle.

use core::ffi::c_void;

use crate::sys;

/// A plugin's XLA FFI runtime table.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Runtime {
    api: *const c_void,
    struct_size: usize,
    version: (i32, i32),
}

impl Runtime {
    /// Reads the table's size and version.
    ///
    /// # Safety
    /// `api` is an `XLA_FFI_Api` table a runtime passed in a call frame: at least
    /// `struct_size` readable bytes, its functions behaving as `c_api.h` says,
    /// valid for as long as the result is used.
    pub(crate) unsafe fn from_raw(api: *const c_void) -> Result<Runtime, String> {
        if api.is_null() {
            return Err("the runtime passed a null XLA_FFI_Api to the probe".into());
        }
        // SAFETY: the caller's promise: the table starts with `struct_size`.
        let struct_size = unsafe { api.cast::<usize>().read() };
        if struct_size < sys::XLA_API_VERSION_MAJOR_OFFSET + 8 {
            return Err(format!("its XLA_FFI_Api has struct_size {struct_size}, too small to hold its version"));
        }
        // SAFETY: the version's two ints lie within `struct_size` (checked).
        let version = unsafe {
            let p = api.cast::<u8>().add(sys::XLA_API_VERSION_MAJOR_OFFSET).cast::<i32>();
            (p.read(), p.add(1).read())
        };
        Ok(Runtime { api, struct_size, version })
    }

    /// The runtime's FFI API version, `(major, minor)`.
    pub(crate) fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The function at byte `offset`, if the table reaches it and it is not null.
    fn slot(&self, offset: usize) -> Option<*const c_void> {
        if self.struct_size < offset + 8 {
            return None;
        }
        // SAFETY: the slot lies within the table's `struct_size` bytes.
        let f = unsafe { self.api.cast::<u8>().add(offset).cast::<*const c_void>().read() };
        (!f.is_null()).then_some(f)
    }

    /// The message and code of a runtime error, which is then destroyed.
    fn take_error(&self, err: *mut sys::XLA_Error) -> Option<String> {
        if err.is_null() {
            return None;
        }
        let mut message = String::from("(no message)");
        if let Some(f) = self.slot(sys::XLA_SLOT_ERROR_GET_DETAILS) {
            // SAFETY: slot 1 holds `XLA_FFI_Error_GetDetails` (0.3: `GetMessage`,
            // whose args are a prefix of these).
            let f: sys::XLA_Error_GetDetails = unsafe { core::mem::transmute(f) };
            let mut args = sys::XLA_Error_GetDetails_Args {
                struct_size: sys::XLA_Error_GetDetails_Args_STRUCT_SIZE,
                extension_start: core::ptr::null_mut(),
                error: err,
                message: core::ptr::null(),
                errc: 13, // INTERNAL, left alone by a 0.3 runtime
            };
            // SAFETY: the runtime's function on its own error, with initialised args.
            unsafe { f(&mut args) };
            if !args.message.is_null() {
                // SAFETY: a NUL-terminated message owned by the error, copied before
                // the error is destroyed.
                let m = unsafe { core::ffi::CStr::from_ptr(args.message) };
                message = format!("code {}: {}", args.errc, m.to_string_lossy());
            }
        }
        if let Some(f) = self.slot(sys::XLA_SLOT_ERROR_DESTROY) {
            // SAFETY: slot 2 holds `XLA_FFI_Error_Destroy`.
            let f: sys::XLA_Error_Destroy = unsafe { core::mem::transmute(f) };
            let mut args = sys::XLA_Error_Destroy_Args {
                struct_size: sys::XLA_Error_Destroy_Args_STRUCT_SIZE,
                extension_start: core::ptr::null_mut(),
                error: err,
            };
            // SAFETY: destroys the runtime's own error, once.
            unsafe { f(&mut args) };
        }
        Some(message)
    }

    /// `XLA_FFI_Type_Register(name, type_id, type_info)`: XLA writes the id into
    /// `type_id`.
    ///
    /// # Safety
    /// `type_id` is a writable `XLA_FFI_TypeId` slot and `type_info` null or a valid
    /// `XLA_FFI_TypeInfo`, both alive as long as the runtime (a library's `'static`
    /// registration record).
    pub(crate) unsafe fn register_type(
        &self,
        name: &str,
        type_id: *mut c_void,
        type_info: *const c_void,
    ) -> Result<(), String> {
        let Some(f) = self.slot(sys::XLA_SLOT_TYPE_REGISTER) else {
            return Err("its XLA FFI runtime has no XLA_FFI_Type_Register".into());
        };
        // SAFETY: slot 5 holds `XLA_FFI_Type_Register`.
        let f: sys::XLA_Type_Register = unsafe { core::mem::transmute(f) };
        let mut args = sys::XLA_Type_Register_Args {
            struct_size: sys::XLA_Type_Register_Args_STRUCT_SIZE,
            extension_start: core::ptr::null_mut(),
            name: sys::XLA_ByteSpan { ptr: name.as_ptr().cast(), len: name.len() },
            type_id,
            type_info,
        };
        // SAFETY: initialised args; the name is copied by the runtime; the slots
        // are the caller's promise.
        let err = unsafe { f(&mut args) };
        self.take_error(err).map_or(Ok(()), Err)
    }

    /// `XLA_FFI_Handler_Register` with the whole bundle, in the layout of this
    /// runtime's version (a 0.3 runtime's bundle has no `record`).
    ///
    /// # Safety
    /// Every handler of `bundle` is a handler keeping XLA's contract, alive as long
    /// as the runtime.
    pub(crate) unsafe fn register_bundle(
        &self,
        name: &str,
        platform: &str,
        bundle: [sys::XLA_Handler; 5],
        traits: u32,
    ) -> Result<(), String> {
        let Some(f) = self.slot(sys::XLA_SLOT_HANDLER_REGISTER) else {
            return Err("its XLA FFI runtime has no XLA_FFI_Handler_Register".into());
        };
        let span = |s: &str| sys::XLA_ByteSpan { ptr: s.as_ptr().cast(), len: s.len() };
        let err = if self.version >= sys::XLA_RECORD_SINCE {
            let mut args = sys::XLA_Handler_Register_Args {
                struct_size: sys::XLA_Handler_Register_Args_STRUCT_SIZE,
                extension_start: core::ptr::null_mut(),
                name: span(name),
                platform: span(platform),
                bundle,
                traits,
            };
            // SAFETY: slot 3 holds `XLA_FFI_Handler_Register`, taking this layout
            // from FFI API 0.4 on; the args are initialised; the handlers are the
            // caller's promise.
            unsafe {
                let f: unsafe extern "C" fn(*mut sys::XLA_Handler_Register_Args) -> *mut sys::XLA_Error =
                    core::mem::transmute(f);
                f(&mut args)
            }
        } else {
            if bundle[4].is_some() {
                return Err(format!(
                    "a record-stage handler needs XLA FFI API 0.4 or newer; the runtime has {}.{}",
                    self.version.0, self.version.1
                ));
            }
            let mut args = sys::XLA_Handler_Register_Args_V03 {
                struct_size: sys::XLA_Handler_Register_Args_V03_STRUCT_SIZE,
                extension_start: core::ptr::null_mut(),
                name: span(name),
                platform: span(platform),
                bundle: [bundle[0], bundle[1], bundle[2], bundle[3]],
                traits,
            };
            // SAFETY: as above, in the 0.3 layout (4-entry bundle).
            unsafe {
                let f: unsafe extern "C" fn(*mut sys::XLA_Handler_Register_Args_V03) -> *mut sys::XLA_Error =
                    core::mem::transmute(f);
                f(&mut args)
            }
        };
        self.take_error(err).map_or(Ok(()), Err)
    }
}
