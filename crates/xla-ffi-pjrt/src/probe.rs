//! The probe: how this crate reaches a plugin's own XLA FFI runtime.
//!
//! **This relies on behaviour the PJRT and XLA FFI APIs do not promise.** The FFI
//! extension registers one execute handler per target and has no way to register
//! a stage bundle or (before PJRT 0.115) a type with a deleter. But when XLA
//! registers a handler it calls it once, at once, with a metadata query, and that
//! call frame carries the runtime's `XLA_FFI_Api*` (`call_frame->api`). So a probe
//! handler registered through the extension under a fresh name hands the table
//! over; through it, `XLA_FFI_Type_Register` and `XLA_FFI_Handler_Register` do the
//! rest, as `jax.ffi.register_ffi_type` and `register_ffi_target` do in jaxlib.
//! Checked with the CPU plugins of PJRT 0.81 (FFI 0.2), 0.106 (FFI 0.3) and 0.115
//! (FFI 0.4). A
//! plugin that does not query metadata at registration gives a clear error here,
//! never a crash. Everything that depends on it goes through [`runtime_of`].
//!
//! The probe answers the query with FFI API 0.1 (which every runtime accepts) and
//! no traits, and refuses to run as a target.

use core::ffi::c_void;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::api::PjrtApi;
use crate::runtime::Runtime;
use crate::sys;

/// The table the probe saw last (taken under [`PROBE_LOCK`]).
static SEEN: AtomicPtr<c_void> = AtomicPtr::new(core::ptr::null_mut());
/// One probe at a time in the process, so that [`SEEN`] is the current probe's.
static PROBE_LOCK: Mutex<()> = Mutex::new(());
/// Makes each probe's target name fresh: XLA skips the metadata query when the
/// same name is registered again with the same function.
static PROBES: AtomicUsize = AtomicUsize::new(0);

/// The prefix of the probe targets' names.
pub(crate) const PROBE_PREFIX: &str = "xla_ffi_pjrt.probe.";

/// The probe handler. During the metadata query it records `call_frame->api` and
/// answers with FFI API 0.1; called as a target, it returns an error.
unsafe extern "C" fn probe(frame: *mut c_void) -> *mut sys::XLA_Error {
    if frame.is_null() {
        return core::ptr::null_mut();
    }
    // SAFETY: XLA passes a call frame, whose first three fields are `struct_size`,
    // `extension_start` and `api`; its `struct_size` is checked before the rest.
    let head = unsafe {
        if frame.cast::<usize>().read() < core::mem::size_of::<sys::XLA_CallFrame_Head>() {
            return core::ptr::null_mut();
        }
        frame.cast::<sys::XLA_CallFrame_Head>().read()
    };
    SEEN.store(head.api as *mut c_void, Ordering::SeqCst);
    let ext = head.extension_start;
    if !ext.is_null() {
        // SAFETY: a non-null `extension_start` is an internal extension; its size is
        // checked before it is read as the metadata extension, and the metadata's
        // before it is written (only fields up to its STRUCT_SIZE).
        unsafe {
            let base = ext.read();
            if base.type_ == sys::XLA_EXTENSION_METADATA && base.struct_size >= sys::XLA_Metadata_Extension_STRUCT_SIZE
            {
                let md = ext.cast::<sys::XLA_Metadata_Extension>().read().metadata;
                if !md.is_null() && (*md).struct_size >= sys::XLA_Metadata_STRUCT_SIZE {
                    (*md).api_version = sys::XLA_Api_Version {
                        struct_size: sys::XLA_Api_Version_STRUCT_SIZE,
                        extension_start: core::ptr::null_mut(),
                        major_version: 0,
                        minor_version: 1,
                    };
                    (*md).traits = 0;
                }
            }
        }
        return core::ptr::null_mut();
    }
    // Called as a target: refuse, through the runtime's own error constructor.
    // SAFETY: `api` is the runtime's table (XLA's call frame contract); its size is
    // checked before slot 0 is read.
    unsafe {
        let api = head.api;
        if api.is_null() || api.cast::<usize>().read() < sys::XLA_SLOT_ERROR_CREATE + 8 {
            return core::ptr::null_mut();
        }
        let f = api.cast::<u8>().add(sys::XLA_SLOT_ERROR_CREATE).cast::<Option<sys::XLA_Error_Create>>().read();
        let Some(f) = f else { return core::ptr::null_mut() };
        let mut args = sys::XLA_Error_Create_Args {
            struct_size: sys::XLA_Error_Create_Args_STRUCT_SIZE,
            extension_start: core::ptr::null_mut(),
            message: c"xla_ffi_pjrt.probe: a registration probe, not a target to call".as_ptr(),
            errc: 12, // UNIMPLEMENTED
        };
        f(&mut args)
    }
}

/// The plugin's XLA FFI runtime for `platform`, reached by registering a probe
/// handler through the FFI extension's `register_handler` (see the module docs:
/// unpromised behaviour). The error says why it could not be reached.
pub(crate) fn runtime_of(
    api: &PjrtApi,
    register_handler: sys::PJRT_FFI_Register_Handler,
    platform: &str,
) -> Result<Runtime, String> {
    let _guard = PROBE_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let name = format!("{PROBE_PREFIX}{}", PROBES.fetch_add(1, Ordering::Relaxed));
    SEEN.store(core::ptr::null_mut(), Ordering::SeqCst);
    let handler: unsafe extern "C" fn(*mut c_void) -> *mut sys::XLA_Error = probe;
    let mut args = sys::PJRT_FFI_Register_Handler_Args {
        struct_size: sys::PJRT_FFI_Register_Handler_Args_STRUCT_SIZE,
        target_name: name.as_ptr().cast(),
        target_name_size: name.len(),
        handler: handler as *mut c_void,
        platform_name: platform.as_ptr().cast(),
        platform_name_size: platform.len(),
        traits: 0,
    };
    // SAFETY: the plugin's own `register_handler` (from its FFI extension, whose
    // layout `register` checked by version) with initialised args; the probe is a
    // `'static` function that keeps XLA's handler contract and never unwinds.
    let err = unsafe { register_handler(&mut args) };
    if let Some(msg) = api.take_error(err) {
        return Err(format!("registering the probe handler {name} failed: {msg}"));
    }
    let seen = SEEN.swap(core::ptr::null_mut(), Ordering::SeqCst);
    if seen.is_null() {
        return Err(format!(
            "the probe handler {name} was not called at registration (the plugin does not query handler \
             metadata then), so its XLA FFI runtime cannot be reached to check its version"
        ));
    }
    // SAFETY: `seen` is the `XLA_FFI_Api*` the plugin's runtime passed in the
    // probe's call frame: its own table, alive as long as the plugin is loaded
    // (which the `PjrtApi` contract covers).
    unsafe { Runtime::from_raw(seen) }
}
