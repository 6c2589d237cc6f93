//! Registration into a real CPU PJRT plugin (for example `pjrt_c_api_cpu_plugin.so`
//! of `pip download --no-deps lammps-jax-pjrt-cpu==0.11.2`: PJRT 0.115, FFI 0.4).
//! Opt-in, as it needs the plugin and the built handler library:
//!
//! ```bash
//! cargo build -p xla-ffi-rs-ops-cdylib
//! XFR_PJRT_PLUGIN=/path/to/pjrt_c_api_cpu_plugin.so \
//! XFR_HANDLERS_LIB=$PWD/target/debug/libxla_ffi_rs_ops.so \
//!     cargo test -p xla-ffi-pjrt --test real_plugin -- --ignored
//! ```
//!
//! Compiling and running programs is the client's part (`xla-ffi-run`); this checks
//! what registration alone can: the version read through the probe, every target
//! and type accepted, a duplicate refused with the plugin's reason, and user data
//! through an execute context.

use std::path::PathBuf;

use xla_ffi_pjrt::{ffi_api_version, register, ErrorKind, ExecuteContext, HandlerLibrary, PjrtApi};

fn env_path(name: &str) -> PathBuf {
    PathBuf::from(std::env::var_os(name).unwrap_or_else(|| panic!("set {name} (see the file's docs)")))
}

/// The plugin, loaded for the whole process (its handlers stay registered in it).
fn plugin() -> PjrtApi {
    let path = env_path("XFR_PJRT_PLUGIN");
    // SAFETY: a PJRT plugin, trusted as any plugin; leaked, so it stays loaded for
    // as long as the returned table is used.
    let lib = Box::leak(Box::new(unsafe { libloading::Library::new(&path) }.expect("the plugin loads")));
    // SAFETY: `GetPjrtApi` is the plugin's one entry point, of this type.
    let get: libloading::Symbol<unsafe extern "C" fn() -> *const core::ffi::c_void> =
        unsafe { lib.get(b"GetPjrtApi") }.expect("GetPjrtApi");
    // SAFETY: the plugin's own table, valid while the (leaked) library is loaded.
    unsafe { PjrtApi::from_raw(get()) }.unwrap().named(path.display().to_string())
}

#[derive(Debug)]
struct HostValue(#[allow(dead_code)] f64);

/// Laid out as `xla_ffi_rs_ops::Offset` of the loaded library.
#[repr(transparent)]
struct Offset(#[allow(dead_code)] f32);
xla_ffi::state_type!(HostValue);

#[test]
#[ignore = "needs XFR_PJRT_PLUGIN and XFR_HANDLERS_LIB (see the file's docs)"]
fn registers_into_a_real_cpu_plugin() {
    let api = plugin();
    eprintln!("plugin: PJRT API {:?}, extensions {:?}", api.version(), api.extensions());
    assert!(api.has_ffi_extension());
    let ffi = ffi_api_version(&api, "Host").unwrap();
    eprintln!("XLA FFI runtime: {ffi:?}");
    let lib_path = env_path("XFR_HANDLERS_LIB");
    // SAFETY: the ops library of this workspace (`export_registry!`), as .ci/host.sh builds it.
    let lib = unsafe { HandlerLibrary::load(&lib_path) }.unwrap();
    if ffi < lib.min_ffi_api_version() {
        // An FFI 0.2 runtime (`xla-cpu-pjrt` 0.0.1) is refused before anything is
        // registered, with our own message.
        let e = register(&api, &lib, "Host").unwrap_err();
        eprintln!("refused: {e}");
        assert_eq!(e.kind(), ErrorKind::TooOld);
        assert!(e.message().contains("need 0.3 or newer"), "{e}");
        return;
    }
    let done = register(&api, &lib, "Host").unwrap();
    eprintln!("registered {} types {:?} and {} targets", done.types.len(), done.types, done.targets.len());
    assert_eq!(done.targets.len(), lib.targets().iter().filter(|t| t.platform() == xla_ffi::Platform::Host).count());
    assert!(done.targets.iter().any(|t| t == "xla_ffi_rs.examples.scale"));
    // Again: the same functions under the same names are accepted.
    register(&api, &lib, "Host").unwrap();

    // A second copy of the library has its own type records (id 0) and function
    // addresses: its state type's name is taken, and the plugin's reason comes back
    // naming the plugin, the copy and the type.
    let copy = std::env::temp_dir().join(format!("xfr_copy_{}.so", std::process::id()));
    std::fs::copy(&lib_path, &copy).unwrap();
    // SAFETY: a byte copy of the same handler library.
    let other = unsafe { HandlerLibrary::load(&copy) }.unwrap();
    match register(&api, &other, "Host") {
        Ok(r) => {
            eprintln!("the second copy was accepted: {} targets (the plugin drops duplicate errors)", r.targets.len())
        }
        Err(e) => {
            eprintln!("second copy: {e}");
            assert_eq!(e.kind(), ErrorKind::Refused);
            assert!(e.message().contains(&api.name().to_string()), "{e}");
            assert!(e.message().contains(&copy.display().to_string()), "{e}");
            assert!(
                e.message().contains("xla_ffi_rs.examples.ScaleState") && e.message().contains("already registered"),
                "{e}"
            );
        }
    }
    let _ = std::fs::remove_file(&copy);

    // User data: a type the plugin has not seen goes through the extension's
    // `type_register` (48 bytes on 0.115), then `user_data_add`.
    let mut ctx = ExecuteContext::new(&api).unwrap();
    ctx.add_user_data(HostValue(1.5)).unwrap();
    assert!(!ctx.as_ptr().is_null());
    let e = ctx.add_user_data(HostValue(2.5)).unwrap_err();
    eprintln!("second value of one type: {e}");
    assert!(e.message().contains("already"), "{e}");
    // The loaded library's own user data type, by name: `Offset(f32)` there.
    // SAFETY: laid out as the library's `Offset` (one `f32`).
    unsafe { ctx.add_user_data_for(&lib, "xla_ffi_rs.examples.Offset", Offset(0.5)) }.unwrap();
    drop(ctx);

    // A file that is no handler library.
    // SAFETY: a PJRT plugin: its initialisers are sound to run (the test loaded it
    // already), and it has no `xla_ffi_rs_registry`.
    let e = unsafe { HandlerLibrary::load(env_path("XFR_PJRT_PLUGIN")) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Library);
    assert!(e.message().contains("no symbol `xla_ffi_rs_registry`"), "{e}");
}

#[test]
fn a_missing_library_names_its_path() {
    if cfg!(miri) {
        return; // no dlopen under Miri
    }
    // SAFETY: no such file: nothing is loaded.
    let e = unsafe { HandlerLibrary::load("/nonexistent/libnothing.so") }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Library);
    assert!(e.message().starts_with("handler library /nonexistent/libnothing.so: cannot load it"), "{e}");
    // The loader's own reason (`dlerror()`), not only "dlopen failed".
    #[cfg(target_os = "linux")]
    assert!(e.message().contains("No such file or directory"), "{e}");
}
