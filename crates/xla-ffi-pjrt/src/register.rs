//! [`register`]: a handler library's types and targets, into one plugin.

use core::ffi::c_void;

use crate::api::PjrtApi;
use crate::error::{Error, ErrorKind};
use crate::library::{raw_handler, HandlerLibrary};
use crate::probe::runtime_of;
use crate::runtime::Runtime;
use crate::sys;

/// The oldest PJRT API version whose FFI extension layout this crate knows (the
/// 52-byte `PJRT_FFI_Register_Handler_Args`; older headers had an `api_version`
/// field, and a plugin given the wrong layout crashes). Checked with the CPU
/// plugins of PJRT 0.81 (`xla-cpu-pjrt` 0.0.1: the probe registers and is called;
/// its FFI 0.2 runtime is then refused), 0.106 and 0.115.
pub const MIN_PJRT_API_VERSION: (i32, i32) = (0, 81);

/// What [`register`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Registered {
    /// The plugin's XLA FFI runtime version, `(major, minor)`.
    pub ffi_api_version: (i32, i32),
    /// The types registered, in the library's order.
    pub types: Vec<String>,
    /// The targets registered for the platform, in the library's order.
    pub targets: Vec<String>,
}

/// Registers `lib`'s types and its targets for `platform` into the plugin `api`.
///
/// `platform` is XLA's platform name in that plugin: `"Host"` (or `"cpu"`) for a
/// CPU plugin, `"CUDA"` for the CUDA plugin; the library's host handlers are
/// registered for a CPU name, its device handlers for any other.
///
/// In order: the plugin's PJRT API must be 0.81 or newer and have the FFI
/// extension; its XLA FFI runtime is reached through a probe handler (see
/// `probe.rs`: behaviour the API does not promise) and must be at least the
/// version the library's handlers report
/// ([`HandlerLibrary::min_ffi_api_version`]): an older runtime would drop
/// registration errors, and the host would only see "No FFI handler registered"
/// when it compiles. Then the types are registered (`XLA_FFI_Type_Register`, so
/// that state has its deleter), the execute-only targets through the extension's
/// `register_handler`, and the targets with more stages as whole bundles
/// (`XLA_FFI_Handler_Register`).
///
/// Every error names the plugin, the library and the target or type, and the cause
/// (the plugin's own message and code when it refused). A `platform` not among
/// [`FFI_PLATFORMS`] (`"tpu"`) is refused first ([`ErrorKind::Platform`]).
pub fn register(api: &PjrtApi, lib: &HandlerLibrary, platform: &str) -> Result<Registered, Error> {
    let plugin = api.name();
    let shown = lib.shown();
    check_platform(api, platform, &format!("cannot register the handlers of {shown}"))?;
    check_pjrt_version(api, &format!("cannot register the handlers of {shown}"))?;
    let ext = api.ffi_extension()?;
    let Some(register_handler) = ext.register_handler else {
        return Err(Error::new(
            ErrorKind::NoFfiExtension,
            format!(
                "{plugin}: its FFI extension has no register_handler function; cannot register the handlers of {shown}"
            ),
        ));
    };
    let runtime = runtime(api, register_handler, platform)?;
    let have = runtime.version();
    let need = lib.min_ffi_api_version();
    if have.0 != need.0 || have < need {
        return Err(Error::new(
            ErrorKind::TooOld,
            format!(
                "{plugin}: its XLA FFI runtime has API {}.{}; the handlers of {shown} need {}.{} or newer \
                 (an older runtime drops registration errors, and a program calling them would fail with \
                 \"No FFI handler registered\")",
                have.0, have.1, need.0, need.1
            ),
        ));
    }
    let mut done = Registered { ffi_api_version: have, types: Vec::new(), targets: Vec::new() };
    for t in &lib.types {
        // SAFETY: the slot and type info are the library's `'static` registration
        // record (read from its registry, kept loaded by `lib`; the handlers
        // registered below keep needing the library loaded, as documented).
        unsafe { runtime.register_type(&t.name, t.type_id.cast(), t.type_info.cast()) }.map_err(|msg| {
            Error::new(
                ErrorKind::Refused,
                format!("{plugin}: type {:?} of {shown}: registration failed: {msg}", t.name),
            )
        })?;
        api.note_typed(t.type_id.cast_const().cast());
        done.types.push(t.name.clone());
    }
    let on_platform = |t: &&crate::library::LibraryTarget| t.platform().matches(platform);
    for t in lib.targets().iter().filter(on_platform) {
        let refused =
            |msg: String| Error::new(ErrorKind::Refused, format!("{plugin}: target {} of {shown}: {msg}", t.name()));
        if t.execute_only() {
            let name = t.name();
            let mut args = sys::PJRT_FFI_Register_Handler_Args {
                struct_size: sys::PJRT_FFI_Register_Handler_Args_STRUCT_SIZE,
                target_name: name.as_ptr().cast(),
                target_name_size: name.len(),
                handler: raw_handler(t.bundle.execute),
                platform_name: platform.as_ptr().cast(),
                platform_name_size: platform.len(),
                traits: t.traits(),
            };
            // SAFETY: the plugin's `register_handler` (PJRT >= 0.81: this 52-byte
            // layout, checked above) with initialised args; the handler is the
            // library's exported function, alive while the library is loaded.
            let err = unsafe { register_handler(&mut args) };
            if let Some(msg) = api.take_error(err) {
                return Err(refused(format!("the FFI extension refused it: {msg}")));
            }
        } else {
            let b = &t.bundle;
            let bundle: [sys::XLA_Handler; 5] =
                [b.instantiate, b.prepare, b.initialize, b.execute, b.record].map(|h| {
                    h.map(|f| {
                        // SAFETY: the same C signature (`XLA_FFI_Error* (XLA_FFI_CallFrame*)`),
                        // declared with opaque pointer types here.
                        unsafe {
                            core::mem::transmute::<_, unsafe extern "C" fn(*mut c_void) -> *mut sys::XLA_Error>(f)
                        }
                    })
                });
            // SAFETY: the bundle's handlers are the library's exported functions
            // (made by the `handler` macro), alive while the library is loaded.
            unsafe { runtime.register_bundle(t.name(), platform, bundle, t.traits()) }
                .map_err(|msg| refused(format!("its XLA FFI runtime refused the bundle: {msg}")))?;
        }
        done.targets.push(t.name().to_string());
    }
    Ok(done)
}

/// XLA's names of the platforms whose plugins run FFI handlers, compared without
/// case: CPU plugins take `"Host"` or `"cpu"`, the CUDA and ROCm plugins
/// `"CUDA"` and `"ROCM"`.
pub const FFI_PLATFORMS: [&str; 4] = ["Host", "cpu", "CUDA", "ROCM"];

/// Refuses a platform name that no plugin runs FFI handlers for (`"tpu"`: XLA:TPU
/// runs none; a typo): XLA would take the registration and never call it, and
/// [`register`] would report success with no target registered.
fn check_platform(api: &PjrtApi, platform: &str, what: &str) -> Result<(), Error> {
    if FFI_PLATFORMS.iter().any(|p| p.eq_ignore_ascii_case(platform)) {
        return Ok(());
    }
    Err(Error::new(
        ErrorKind::Platform,
        format!(
            "{}: platform {platform:?} runs no FFI handlers; expected one of {} (XLA's names of the platforms \
             whose plugins run FFI handlers, any case; XLA:TPU runs none); {what}",
            api.name(),
            FFI_PLATFORMS.map(|p| format!("{p:?}")).join(", ")
        ),
    ))
}

/// Refuses a PJRT API older than [`MIN_PJRT_API_VERSION`] (or of another major).
pub(crate) fn check_pjrt_version(api: &PjrtApi, what: &str) -> Result<(), Error> {
    let (major, minor) = api.version();
    if (major, minor) < MIN_PJRT_API_VERSION || major != MIN_PJRT_API_VERSION.0 {
        return Err(Error::new(
            ErrorKind::TooOld,
            format!(
                "{}: PJRT API {major}.{minor} is older than {}.{}, the oldest whose FFI extension layout \
                 this crate knows; {what}",
                api.name(),
                MIN_PJRT_API_VERSION.0,
                MIN_PJRT_API_VERSION.1
            ),
        ));
    }
    Ok(())
}

/// The plugin's runtime for `platform`, probed once per [`PjrtApi`] and platform.
fn runtime(api: &PjrtApi, register_handler: sys::PJRT_FFI_Register_Handler, platform: &str) -> Result<Runtime, Error> {
    let mut cache = api.runtimes.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, r)) = cache.iter().find(|(p, _)| p == platform) {
        return Ok(*r);
    }
    let r = runtime_of(api, register_handler, platform).map_err(|msg| {
        Error::new(
            ErrorKind::Refused,
            format!("{}: cannot reach its XLA FFI runtime for platform {platform:?}: {msg}", api.name()),
        )
    })?;
    cache.push((platform.to_string(), r));
    Ok(r)
}

/// The plugin's XLA FFI runtime version for `platform`, read through the probe
/// (see [`register`]); for a host that wants to report it before registering.
pub fn ffi_api_version(api: &PjrtApi, platform: &str) -> Result<(i32, i32), Error> {
    check_platform(api, platform, "cannot read its XLA FFI runtime's version")?;
    check_pjrt_version(api, "cannot read its XLA FFI runtime's version")?;
    let ext = api.ffi_extension()?;
    let Some(register_handler) = ext.register_handler else {
        return Err(Error::new(
            ErrorKind::NoFfiExtension,
            format!("{}: its FFI extension has no register_handler function", api.name()),
        ));
    };
    Ok(runtime(api, register_handler, platform)?.version())
}
