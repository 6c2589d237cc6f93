//! A crate's handlers, listed once and exported once, for hosts without Python.
//!
//! Python gets a crate's handlers as capsules (`python::targets`). Any other host
//! that runs XLA (a PJRT plugin loaded by a Rust or C++ service, `xla-ffi-run`)
//! reads them from one exported C function of the crate's `cdylib`,
//! `xla_ffi_rs_registry`, which [`export_registry!`](crate::export_registry) writes:
//!
//! ```
//! use xla_ffi::{handler, state_type, Buffer, Result, ResultBuffer};
//!
//! #[handler(target = "demo.copy")]
//! fn demo_copy(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
//!     for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
//!         o.write(v);
//!     }
//!     Ok(())
//! }
//!
//! struct Offset(f32);
//! state_type!(Offset);
//!
//! // Once per crate: `extern "C" fn xla_ffi_rs_registry()`, unmangled.
//! xla_ffi::export_registry! {
//!     handlers: [&DEMO_COPY],
//!     types: { "demo.Offset" => Offset },
//! }
//!
//! // The same registry, in Rust (for a host that links the crate):
//! let reg = registry();
//! assert_eq!(reg.targets().next().unwrap().name(), "demo.copy");
//! assert_eq!(reg.types().next().unwrap().name(), "demo.Offset");
//! ```
//!
//! The registry ([`Registry`], laid out as `xla_ffi_sys::XLA_FFI_Rs_Registry`) lists
//! each target once per platform with its stage bundle (instantiate, prepare,
//! initialize, execute, record: grouped by [`bundles`]), and the
//! types to register before them (state types and user data types, each with the
//! address XLA writes its id to). The exported function is `#[no_mangle] pub extern
//! "C"`, so it survives LTO in a `cdylib` on Linux, macOS and Windows; no linker
//! sections are used. It builds the registry on its first call and never unwinds:
//! a registry that cannot be built (two handlers for one stage of a target, one type
//! under two names) has no entries and says why in its `error`.

use core::ffi::c_void;
use std::sync::OnceLock;

use crate::descriptor::{bundles, HandlerDescriptor, Platform};
use crate::frame::{Stage, MIN_API_VERSION};
use crate::state::StateType;
use crate::{sys, Handler};

/// One type of a [`Registry`]: its name and the record XLA registers.
#[derive(Clone, Copy, Debug)]
pub struct TypeEntry {
    name: &'static str,
    type_id: *mut c_void,
    type_info: *mut c_void,
}

// SAFETY: the pointers are addresses of a `'static` `TypeRegistration` (an atomic id
// and an immutable `XLA_FFI_TypeInfo`), which is `Sync`.
unsafe impl Send for TypeEntry {}
// SAFETY: as above.
unsafe impl Sync for TypeEntry {}

impl TypeEntry {
    /// Type `S` under the name XLA registers it with (`jax.ffi.register_ffi_type`'s).
    pub fn of<S: StateType>(name: &'static str) -> TypeEntry {
        let reg = S::registration();
        TypeEntry { name, type_id: reg.type_id_ptr(), type_info: reg.type_info_ptr() }
    }
    /// The name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

/// One target of a [`Registry`], on one platform.
#[derive(Clone, Debug)]
pub struct TargetEntry {
    name: &'static str,
    platform: Platform,
    traits: u32,
    stages: Vec<(Stage, Handler)>,
}

impl TargetEntry {
    /// The FFI target name.
    pub fn name(&self) -> &'static str {
        self.name
    }
    /// Host or device buffers.
    pub fn platform(&self) -> Platform {
        self.platform
    }
    /// Its stages and their handlers.
    pub fn stages(&self) -> &[(Stage, Handler)] {
        &self.stages
    }
}

/// Every target and type of one crate of handlers, and their C layout
/// (`xla_ffi_sys::XLA_FFI_Rs_Registry`) for hosts that read it through the exported
/// `xla_ffi_rs_registry` function.
///
/// Made only from descriptors (which only the [`handler`](crate::handler) macro
/// makes) and [`TypeEntry`] (from a [`StateType`]'s own record), so every pointer
/// of its C form is a handler keeping XLA's contract or a type's registration record.
pub struct Registry {
    targets: Vec<TargetEntry>,
    types: Vec<TypeEntry>,
    error: Option<String>,
    library: &'static str,
    raw_targets: Vec<sys::XLA_FFI_Rs_Target>,
    raw_types: Vec<sys::XLA_FFI_Rs_Type>,
    raw: sys::XLA_FFI_Rs_Registry,
}

// SAFETY: the raw form holds pointers to `'static` strings, handler functions, type
// records (`Sync`) and to the registry's own vectors, never written after `new`.
unsafe impl Send for Registry {}
// SAFETY: as above; `&Registry` gives only reads.
unsafe impl Sync for Registry {}

fn span(s: &'static str) -> sys::XLA_FFI_Rs_Str {
    sys::XLA_FFI_Rs_Str { ptr: s.as_ptr().cast(), len: s.len() }
}

impl Registry {
    /// The registry of `handlers` (of every platform) and `types`; `library` names
    /// the crate in messages (`export_registry!` passes `"name version"`).
    ///
    /// A target with two handlers for one stage, or with no execute handler, makes
    /// an empty registry whose [`error`](Self::error) says so (a host reports it).
    pub fn new(library: &'static str, handlers: &[&HandlerDescriptor], types: &[TypeEntry]) -> Registry {
        let mut targets = Vec::new();
        let mut error = None;
        for (platform, name) in [(Platform::Host, "cpu"), (Platform::Device, "cuda")] {
            match bundles(handlers, name) {
                Ok(groups) => targets.extend(groups.into_iter().map(|b| {
                    let traits = handlers
                        .iter()
                        .filter(|h| h.target == b.target && h.platform == platform)
                        .fold(0, |t, h| t | h.traits.0);
                    TargetEntry { name: b.target, platform, traits, stages: b.stages }
                })),
                Err(e) => error = Some(format!("{library}: {}", e.message())),
            }
        }
        let mut names: Vec<&str> = types.iter().map(|t| t.name).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            error = Some(format!("{library}: type {:?} listed twice", w[0]));
        }
        // One Rust type has one id slot: registered under a second name, XLA would
        // write the second id over the first, and the first name would find nothing.
        for (i, a) in types.iter().enumerate() {
            if let Some(b) = types[..i].iter().find(|b| b.type_id == a.type_id) {
                error = Some(format!(
                    "{library}: one type listed under two names, {:?} and {:?} (a type has one XLA type id: \
                     list it once)",
                    b.name, a.name
                ));
                break;
            }
        }
        let (targets, types) = if error.is_some() { (Vec::new(), Vec::new()) } else { (targets, types.to_vec()) };
        let raw_targets: Vec<sys::XLA_FFI_Rs_Target> = targets.iter().map(raw_target).collect();
        let raw_types: Vec<sys::XLA_FFI_Rs_Type> = types
            .iter()
            .map(|t| sys::XLA_FFI_Rs_Type {
                struct_size: core::mem::size_of::<sys::XLA_FFI_Rs_Type>(),
                name: span(t.name),
                type_id: t.type_id.cast(),
                type_info: t.type_info.cast_const().cast(),
            })
            .collect();
        let mut reg = Registry {
            targets,
            types,
            error,
            library,
            raw_targets,
            raw_types,
            raw: sys::XLA_FFI_Rs_Registry {
                struct_size: core::mem::size_of::<sys::XLA_FFI_Rs_Registry>(),
                version: sys::XLA_FFI_RS_REGISTRY_VERSION,
                ffi_api_major: MIN_API_VERSION.0,
                ffi_api_minor: MIN_API_VERSION.1,
                target_size: core::mem::size_of::<sys::XLA_FFI_Rs_Target>(),
                targets: core::ptr::null(),
                num_targets: 0,
                type_size: core::mem::size_of::<sys::XLA_FFI_Rs_Type>(),
                types: core::ptr::null(),
                num_types: 0,
                error: sys::XLA_FFI_Rs_Str { ptr: core::ptr::null(), len: 0 },
                library: span(library),
            },
        };
        // The vectors' buffers do not move when `reg` does.
        reg.raw.targets = reg.raw_targets.as_ptr();
        reg.raw.num_targets = reg.raw_targets.len();
        reg.raw.types = reg.raw_types.as_ptr();
        reg.raw.num_types = reg.raw_types.len();
        if let Some(e) = &reg.error {
            reg.raw.error = sys::XLA_FFI_Rs_Str { ptr: e.as_ptr().cast(), len: e.len() };
        }
        reg
    }

    /// The targets, each once per platform, in order of first appearance.
    pub fn targets(&self) -> impl Iterator<Item = &TargetEntry> {
        self.targets.iter()
    }
    /// The types to register before the targets.
    pub fn types(&self) -> impl Iterator<Item = &TypeEntry> {
        self.types.iter()
    }
    /// Why the registry is empty, if it could not be built.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }
    /// The library's name, as given to [`new`](Self::new).
    pub fn library(&self) -> &'static str {
        self.library
    }
    /// The C form, valid as long as `self`.
    pub fn as_raw(&self) -> *const sys::XLA_FFI_Rs_Registry {
        &self.raw
    }
}

fn raw_target(t: &TargetEntry) -> sys::XLA_FFI_Rs_Target {
    let mut bundle =
        sys::XLA_FFI_Rs_Bundle { instantiate: None, prepare: None, initialize: None, execute: None, record: None };
    for (stage, h) in &t.stages {
        let slot = match stage {
            Stage::Instantiate => &mut bundle.instantiate,
            Stage::Prepare => &mut bundle.prepare,
            Stage::Initialize => &mut bundle.initialize,
            Stage::Execute => &mut bundle.execute,
            Stage::Record => &mut bundle.record,
        };
        *slot = Some(h.as_raw());
    }
    sys::XLA_FFI_Rs_Target {
        struct_size: core::mem::size_of::<sys::XLA_FFI_Rs_Target>(),
        name: span(t.name),
        platform: match t.platform {
            Platform::Host => sys::XLA_FFI_RS_PLATFORM_HOST,
            Platform::Device => sys::XLA_FFI_RS_PLATFORM_DEVICE,
        },
        traits: t.traits,
        bundle,
    }
}

/// What the exported function of `export_registry!` calls: the registry in `cell`,
/// built by `make` on the first call, as a C pointer; null if building it panicked
/// (nothing unwinds out of the `extern "C"` function).
#[doc(hidden)]
pub fn exported(cell: &'static OnceLock<Registry>, make: fn() -> Registry) -> *const sys::XLA_FFI_Rs_Registry {
    match std::panic::catch_unwind(|| cell.get_or_init(make).as_raw()) {
        Ok(p) => p,
        Err(payload) => {
            crate::panic::drop_payload(payload);
            core::ptr::null()
        }
    }
}

/// Exports a crate's handlers and types from its `cdylib` through one C function,
/// `xla_ffi_rs_registry` (see [`export`](crate::export)), and defines `fn registry()
/// -> &'static Registry` beside it for Rust hosts that link the crate.
///
/// ```ignore
/// xla_ffi::export_registry! {
///     handlers: my_crate::HANDLERS,                 // any `&[&HandlerDescriptor]` expression
///     types: { "my_crate.MyState" => MyState },     // optional: state and user data types
/// }
/// ```
///
/// Write it once per linked program: a second `xla_ffi_rs_registry` is a link error.
#[macro_export]
macro_rules! export_registry {
    (handlers: $handlers:expr $(, types: { $($name:literal => $ty:ty),* $(,)? })? $(,)?) => {
        static __XLA_FFI_RS_REGISTRY: ::std::sync::OnceLock<$crate::export::Registry> = ::std::sync::OnceLock::new();

        /// The registry of this crate's handlers and types (see `xla_ffi::export`).
        pub fn registry() -> &'static $crate::export::Registry {
            __XLA_FFI_RS_REGISTRY.get_or_init(__xla_ffi_rs_make_registry)
        }

        fn __xla_ffi_rs_make_registry() -> $crate::export::Registry {
            let handlers: &[&$crate::HandlerDescriptor] = &$handlers;
            let types: &[$crate::export::TypeEntry] = &[$($($crate::export::TypeEntry::of::<$ty>($name)),*)?];
            $crate::export::Registry::new(
                ::core::concat!(::core::env!("CARGO_PKG_NAME"), " ", ::core::env!("CARGO_PKG_VERSION")),
                handlers,
                types,
            )
        }

        /// `const XLA_FFI_Rs_Registry* xla_ffi_rs_registry(void)`: this library's
        /// handlers and types, for hosts without Python (see `xla_ffi::export`).
        #[no_mangle]
        pub extern "C" fn xla_ffi_rs_registry() -> *const $crate::sys::XLA_FFI_Rs_Registry {
            $crate::export::exported(&__XLA_FFI_RS_REGISTRY, __xla_ffi_rs_make_registry)
        }
    };
}

impl core::fmt::Debug for Registry {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Registry")
            .field("library", &self.library)
            .field("targets", &self.targets.len())
            .field("types", &self.types.len())
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}
