//! [`HandlerLibrary`]: the targets and types a handler library exports through
//! `xla_ffi_rs_registry` (written by `xla_ffi::export_registry!`), read and checked.

use core::ffi::c_void;
use std::path::{Path, PathBuf};

use xla_ffi::{Platform, Stage};
use xla_ffi_sys as ffi;

use crate::error::{with_sources, Error, ErrorKind};

/// One target of a [`HandlerLibrary`].
#[derive(Clone, Debug)]
pub struct LibraryTarget {
    name: String,
    platform: Platform,
    traits: u32,
    pub(crate) bundle: ffi::XLA_FFI_Rs_Bundle,
}

// SAFETY: the bundle holds function pointers of a loaded library (kept loaded by
// the `HandlerLibrary` that owns this value), callable from any thread.
unsafe impl Send for LibraryTarget {}
// SAFETY: as above.
unsafe impl Sync for LibraryTarget {}

impl LibraryTarget {
    /// The FFI target name.
    pub fn name(&self) -> &str {
        &self.name
    }
    /// Host or device buffers.
    pub fn platform(&self) -> Platform {
        self.platform
    }
    /// The traits its handlers report.
    pub fn traits(&self) -> u32 {
        self.traits
    }
    /// The stages it has handlers for, in XLA's order.
    pub fn stages(&self) -> Vec<Stage> {
        let b = &self.bundle;
        [
            (Stage::Instantiate, b.instantiate.is_some()),
            (Stage::Prepare, b.prepare.is_some()),
            (Stage::Initialize, b.initialize.is_some()),
            (Stage::Execute, b.execute.is_some()),
            (Stage::Record, b.record.is_some()),
        ]
        .into_iter()
        .filter_map(|(s, has)| has.then_some(s))
        .collect()
    }
    /// Whether it is served by an execute handler alone.
    pub fn execute_only(&self) -> bool {
        self.stages() == [Stage::Execute]
    }
}

/// One type of a [`HandlerLibrary`], to register before its targets.
#[derive(Clone, Debug)]
pub(crate) struct LibraryType {
    pub name: String,
    /// The library's `XLA_FFI_TypeId` slot (XLA writes the id there).
    pub type_id: *mut ffi::XLA_FFI_TypeId,
    pub type_info: *const ffi::XLA_FFI_TypeInfo,
}

/// A library of handlers: its targets (with their stage bundles) and types, read
/// from the registry it exports.
///
/// [`load`](Self::load) opens a `cdylib` and keeps it loaded until the process
/// ends (a plugin it was registered into keeps calling its handlers, so it is
/// never unloaded); [`linked`](Self::linked) reads a registry of the running
/// program.
pub struct HandlerLibrary {
    name: String,
    path: Option<PathBuf>,
    min_ffi_api: (i32, i32),
    targets: Vec<LibraryTarget>,
    pub(crate) types: Vec<LibraryType>,
}

// SAFETY: the raw pointers are the library's `'static` handler functions and type
// records (an atomic id, an immutable type info); the library is never unloaded.
unsafe impl Send for HandlerLibrary {}
// SAFETY: as above; `&HandlerLibrary` only reads.
unsafe impl Sync for HandlerLibrary {}

impl core::fmt::Debug for HandlerLibrary {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("HandlerLibrary")
            .field("name", &self.name)
            .field("path", &self.path)
            .field("targets", &self.targets.iter().map(|t| t.name()).collect::<Vec<_>>())
            .field("types", &self.type_names().collect::<Vec<_>>())
            .finish()
    }
}

/// Whether a library that failed to load with `reason` is a Python extension
/// module (the wheel's `_native`), which leaves the interpreter's symbols to the
/// process that imports it. The loaders say so differently: glibc's `dlerror()`
/// "undefined symbol: PyExc_TypeError"; macOS's dyld "symbol not found in flat
/// namespace '_PyBaseObject_Type'" (older: "Symbol not found: _PyExc_TypeError");
/// Windows names no symbol (a `.pyd` imports `python3.dll`, and without it on the
/// search path `LoadLibraryExW` fails with "The specified module could not be
/// found"), so there the file's extension tells.
fn is_python_module(reason: &str, path: &Path) -> bool {
    let lower = reason.to_ascii_lowercase();
    let symbol_at = ["undefined symbol: ", "symbol not found in flat namespace '", "symbol not found: "]
        .iter()
        .find_map(|m| lower.find(m).map(|i| i + m.len()));
    let python_symbol = symbol_at.is_some_and(|i| {
        let name = reason[i..].trim_start_matches('_');
        name.starts_with("Py")
    });
    python_symbol || path.extension().is_some_and(|e| e.eq_ignore_ascii_case("pyd"))
}

impl HandlerLibrary {
    /// Opens the `cdylib` at `path` and reads its `xla_ffi_rs_registry`.
    ///
    /// The library stays loaded until the process ends, even after the value is
    /// dropped: the handlers registered from it into a plugin must stay callable.
    /// Errors (kind [`ErrorKind::Library`]) name the path and the cause: the file
    /// cannot be opened, it has no `xla_ffi_rs_registry` symbol (not a handler
    /// library, or one built without `export_registry!`; a PyO3 extension module
    /// cannot be loaded without Python at all), or its registry has another layout
    /// version or is malformed.
    ///
    /// # Safety
    ///
    /// Loading a library runs its initialisers, and a symbol named
    /// `xla_ffi_rs_registry` is called as `export_registry!` defines it. `path`
    /// must name a library whose initialisers are sound to run in this process and
    /// whose `xla_ffi_rs_registry`, if it has one, is `export_registry!`'s (what
    /// any handler library built with this project is). A library that defines that
    /// name otherwise is undefined behaviour, which no check made after loading can
    /// catch. (As for `libloading::Library::new`.)
    pub unsafe fn load(path: impl AsRef<Path>) -> Result<HandlerLibrary, Error> {
        let path = path.as_ref();
        let shown = path.display();
        // SAFETY: loading a library runs its initialisers: sound by `load`'s
        // contract (the caller vouches for the library).
        // The file the path names, also for a bare name (`libops.so`): `dlopen`
        // would search the library path for that, not the current folder, and
        // could load another library of the same name.
        let file = path
            .canonicalize()
            .map_err(|e| Error::new(ErrorKind::Library, format!("handler library {shown}: cannot load it: {e}")))?;
        // SAFETY: as above.
        let lib = unsafe { crate::open_library::open(&file) }.map_err(|e| {
            let reason = with_sources(&e);
            let hint = if is_python_module(&reason, path) {
                "; it needs a Python interpreter (a Python extension module): a host needs a Python-free \
                 cdylib of the handlers (libxla_ffi_rs_ops.so, .dylib on macOS, xla_ffi_rs_ops.dll on \
                 Windows, of crates/ops-cdylib, or a crate's cdylib built with `xla_ffi::export_registry!` \
                 and without PyO3)"
            } else {
                ""
            };
            Error::new(ErrorKind::Library, format!("handler library {shown}: cannot load it: {reason}{hint}"))
        })?;
        let symbol = ffi::XLA_FFI_RS_REGISTRY_SYMBOL;
        // SAFETY: the symbol, if present, is `export_registry!`'s function of this
        // type, by `load`'s contract.
        let f: ffi::XLA_FFI_Rs_Registry_Fn = unsafe {
            *lib.get::<ffi::XLA_FFI_Rs_Registry_Fn>(symbol.as_bytes()).map_err(|e| {
                Error::new(
                    ErrorKind::Library,
                    format!(
                        "handler library {shown}: no symbol `{symbol}` ({}); build it with \
                         `xla_ffi::export_registry!` in a cdylib (a Python extension module cannot be used)",
                        with_sources(&e)
                    ),
                )
            })?
        };
        // SAFETY: `export_registry!`'s function takes nothing and never unwinds.
        let raw = unsafe { f() };
        let origin = format!("handler library {shown}");
        // Never unloaded: the registry, its handlers and type records stay valid for
        // the rest of the process, so do the plugins' registrations of them.
        core::mem::forget(lib);
        // SAFETY: the registry (if not null) is `export_registry!`'s, alive while
        // the library is loaded, which is for good (above).
        let mut parsed = unsafe { read_registry(raw, &origin) }?;
        parsed.path = Some(path.to_path_buf());
        Ok(parsed)
    }

    /// The registry of a crate linked into this program (`registry()`, defined by
    /// `export_registry!`, or any [`xla_ffi::export::Registry`]).
    pub fn linked(registry: &'static xla_ffi::export::Registry) -> Result<HandlerLibrary, Error> {
        let origin = format!("handler library {}", registry.library());
        // SAFETY: a `Registry` is made only from handler descriptors and type
        // records (its documented invariant), and lives for `'static`.
        unsafe { read_registry(registry.as_raw(), &origin) }
    }

    /// The library's name, `crate version` (from its registry).
    pub fn name(&self) -> &str {
        &self.name
    }
    /// The path it was loaded from ([`load`](Self::load)), if any.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
    /// The lowest XLA FFI API version its handlers need (what they report to XLA).
    pub fn min_ffi_api_version(&self) -> (i32, i32) {
        self.min_ffi_api
    }
    /// Its targets, each once per platform.
    pub fn targets(&self) -> &[LibraryTarget] {
        &self.targets
    }
    /// The names of its types (state and user data types).
    pub fn type_names(&self) -> impl Iterator<Item = &str> {
        self.types.iter().map(|t| t.name.as_str())
    }
    /// The name used in messages: the path when loaded from one, else the name.
    pub(crate) fn shown(&self) -> String {
        match &self.path {
            Some(p) => p.display().to_string(),
            None => self.name.clone(),
        }
    }
}

/// A string span of the registry as an owned `String`.
///
/// # Safety
/// `s.ptr` points to `s.len` readable bytes (or `len` is 0).
unsafe fn string(s: ffi::XLA_FFI_Rs_Str, origin: &str, what: &str) -> Result<String, Error> {
    if s.len == 0 {
        return Ok(String::new());
    }
    if s.ptr.is_null() || s.len > isize::MAX as usize {
        return Err(Error::new(ErrorKind::Library, format!("{origin}: registry: {what}: a null or oversized string")));
    }
    // SAFETY: the caller's promise.
    let bytes = unsafe { core::slice::from_raw_parts(s.ptr.cast::<u8>(), s.len) };
    String::from_utf8(bytes.to_vec())
        .map_err(|e| Error::new(ErrorKind::Library, format!("{origin}: registry: {what}: not UTF-8 ({e})")))
}

/// Reads and checks a registry.
///
/// # Safety
/// `raw` is null or points to an `XLA_FFI_Rs_Registry` as `export_registry!` writes
/// it (every pointer in it valid for as long as the result is used).
pub(crate) unsafe fn read_registry(
    raw: *const ffi::XLA_FFI_Rs_Registry,
    origin: &str,
) -> Result<HandlerLibrary, Error> {
    let bad = |why: String| Error::new(ErrorKind::Library, format!("{origin}: {why}"));
    if raw.is_null() {
        return Err(bad("its `xla_ffi_rs_registry` returned null (building the registry failed)".into()));
    }
    // SAFETY: a registry starts with `struct_size` and `version`.
    let (size, version) = unsafe { ((*raw).struct_size, (*raw).version) };
    if version != ffi::XLA_FFI_RS_REGISTRY_VERSION {
        return Err(bad(format!(
            "its registry has layout version {version}; this reader knows version {}",
            ffi::XLA_FFI_RS_REGISTRY_VERSION
        )));
    }
    let need = core::mem::size_of::<ffi::XLA_FFI_Rs_Registry>();
    if size < need {
        return Err(bad(format!("its registry has struct_size {size}, smaller than {need}")));
    }
    // SAFETY: checked: the registry has all of this version's fields.
    let r = unsafe { raw.read() };
    // SAFETY: the writer's spans are valid strings.
    let error = unsafe { string(r.error, origin, "error") }?;
    if !error.is_empty() {
        return Err(bad(format!("its registry could not be built: {error}")));
    }
    // SAFETY: as above.
    let name = unsafe { string(r.library, origin, "library name") }?;
    let target_need = core::mem::size_of::<ffi::XLA_FFI_Rs_Target>();
    let type_need = core::mem::size_of::<ffi::XLA_FFI_Rs_Type>();
    if r.num_targets > 0 && (r.targets.is_null() || r.target_size < target_need) {
        return Err(bad(format!("registry: target stride {} (need {target_need}) or a null array", r.target_size)));
    }
    if r.num_types > 0 && (r.types.is_null() || r.type_size < type_need) {
        return Err(bad(format!("registry: type stride {} (need {type_need}) or a null array", r.type_size)));
    }
    let mut targets = Vec::with_capacity(r.num_targets.min(4096));
    for i in 0..r.num_targets {
        // SAFETY: `num_targets` entries of `target_size` bytes (at least one
        // `XLA_FFI_Rs_Target`, checked) lie at `targets`, aligned like it.
        let t = unsafe { (r.targets as *const u8).add(i * r.target_size).cast::<ffi::XLA_FFI_Rs_Target>().read() };
        // SAFETY: the writer's spans are valid strings.
        let tname = unsafe { string(t.name, origin, &format!("target {i}")) }?;
        if t.struct_size < target_need {
            return Err(bad(format!(
                "registry: target {tname:?} has struct_size {}, need {target_need}",
                t.struct_size
            )));
        }
        let platform = match t.platform {
            ffi::XLA_FFI_RS_PLATFORM_HOST => Platform::Host,
            ffi::XLA_FFI_RS_PLATFORM_DEVICE => Platform::Device,
            p => return Err(bad(format!("registry: target {tname:?} has unknown platform {p}"))),
        };
        if t.bundle.execute.is_none() {
            return Err(bad(format!("registry: target {tname:?} has no execute handler")));
        }
        targets.push(LibraryTarget { name: tname, platform, traits: t.traits, bundle: t.bundle });
    }
    let mut types = Vec::with_capacity(r.num_types.min(4096));
    for i in 0..r.num_types {
        // SAFETY: as for the targets.
        let t = unsafe { (r.types as *const u8).add(i * r.type_size).cast::<ffi::XLA_FFI_Rs_Type>().read() };
        // SAFETY: the writer's spans are valid strings.
        let tname = unsafe { string(t.name, origin, &format!("type {i}")) }?;
        if t.struct_size < type_need || t.type_id.is_null() || tname.is_empty() {
            return Err(bad(format!("registry: type {i} ({tname:?}) is malformed (size, name or id slot)")));
        }
        types.push(LibraryType { name: tname, type_id: t.type_id, type_info: t.type_info });
    }
    Ok(HandlerLibrary { name, path: None, min_ffi_api: (r.ffi_api_major, r.ffi_api_minor), targets, types })
}

/// A handler function of a bundle slot, as the raw `void*` PJRT takes.
pub(crate) fn raw_handler(h: ffi::XLA_FFI_Rs_Handler) -> *mut c_void {
    h.map_or(core::ptr::null_mut(), |f| f as *mut c_void)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::OnceLock;
    use xla_ffi::export::{Registry, TypeEntry};

    #[xla_ffi::handler(target = "lib.copy")]
    fn lib_copy(x: xla_ffi::Buffer<f32>) -> xla_ffi::Result<()> {
        let _ = x;
        Ok(())
    }

    struct Kind;
    xla_ffi::state_type!(Kind);

    fn valid() -> &'static Registry {
        static REG: OnceLock<Registry> = OnceLock::new();
        REG.get_or_init(|| Registry::new("lib 1.0", &[&LIB_COPY], &[TypeEntry::of::<Kind>("lib.Kind")]))
    }

    type Edit = Box<dyn FnOnce(&mut ffi::XLA_FFI_Rs_Registry, &mut ffi::XLA_FFI_Rs_Target, &mut ffi::XLA_FFI_Rs_Type)>;

    /// Reads a copy of the valid registry after `edit`, with its target and type
    /// arrays copied too (so that `edit` may change their entries).
    fn read_edited(
        edit: impl FnOnce(&mut ffi::XLA_FFI_Rs_Registry, &mut ffi::XLA_FFI_Rs_Target, &mut ffi::XLA_FFI_Rs_Type),
    ) -> Error {
        // SAFETY: the registry `Registry` made, with one target and one type.
        let (mut r, mut t, mut ty) = unsafe {
            let r = valid().as_raw().read();
            (r, r.targets.read(), r.types.read())
        };
        edit(&mut r, &mut t, &mut ty);
        r.targets = &t;
        r.types = &ty;
        // SAFETY: every pointer is valid for the call (the edits change sizes,
        // versions and values, not the memory behind them).
        unsafe { read_registry(&r, "test") }.unwrap_err()
    }

    #[test]
    fn a_valid_registry_reads_back() {
        // SAFETY: `Registry`'s own C form.
        let lib = unsafe { read_registry(valid().as_raw(), "test") }.unwrap();
        assert_eq!(lib.name(), "lib 1.0");
        assert_eq!(lib.targets()[0].name(), "lib.copy");
        assert!(lib.targets()[0].execute_only());
        assert_eq!(lib.type_names().collect::<Vec<_>>(), ["lib.Kind"]);
        assert_eq!(lib.min_ffi_api_version(), xla_ffi::MIN_API_VERSION);
    }

    #[test]
    fn python_extension_modules_are_recognised_in_each_loaders_words() {
        let so = Path::new("/site/xla_ffi_rs/_native.abi3.so");
        // glibc, macOS dyld (dyld4 and older), and a .pyd on Windows.
        assert!(is_python_module("/site/_native.abi3.so: undefined symbol: PyExc_TypeError", so));
        assert!(is_python_module("undefined symbol: _Py_NoneStruct", so));
        assert!(is_python_module(
            "dlopen(/site/_native.abi3.so, 0x0001): symbol not found in flat namespace '_PyBaseObject_Type'",
            so
        ));
        assert!(is_python_module("dlopen(x, 5): Symbol not found: _PyExc_TypeError\n  Referenced from: x", so));
        let pyd = Path::new(r"C:\site\xla_ffi_rs\_native.pyd");
        assert!(is_python_module(
            "LoadLibraryExW failed: The specified module could not be found. (os error 126)",
            pyd
        ));
        assert!(is_python_module("os error 126", Path::new("_native.PYD")));
        // Anything else: no hint.
        assert!(!is_python_module("undefined symbol: cudaMalloc", so));
        assert!(!is_python_module("symbol not found in flat namespace '_cblas_dgemm'", so));
        assert!(!is_python_module("cannot open shared object file: No such file or directory", so));
        assert!(!is_python_module("The specified module could not be found. (os error 126)", Path::new("ops.dll")));
    }

    #[test]
    fn malformed_registries_are_refused_with_the_reason() {
        // SAFETY: null is allowed.
        let e = unsafe { read_registry(core::ptr::null(), "test") }.unwrap_err();
        assert!(e.message().contains("returned null"), "{e}");
        let cases: Vec<(&str, Edit)> = vec![
            ("layout version 2", Box::new(|r: &mut ffi::XLA_FFI_Rs_Registry, _: &mut _, _: &mut _| r.version = 2)),
            ("struct_size 8", Box::new(|r: &mut ffi::XLA_FFI_Rs_Registry, _: &mut _, _: &mut _| r.struct_size = 8)),
            ("target stride 8", Box::new(|r: &mut ffi::XLA_FFI_Rs_Registry, _: &mut _, _: &mut _| r.target_size = 8)),
            ("type stride 0", Box::new(|r: &mut ffi::XLA_FFI_Rs_Registry, _: &mut _, _: &mut _| r.type_size = 0)),
            (
                "has no execute handler",
                Box::new(|_: &mut _, t: &mut ffi::XLA_FFI_Rs_Target, _: &mut _| t.bundle.execute = None),
            ),
            ("unknown platform 7", Box::new(|_: &mut _, t: &mut ffi::XLA_FFI_Rs_Target, _: &mut _| t.platform = 7)),
            ("has struct_size 3", Box::new(|_: &mut _, t: &mut ffi::XLA_FFI_Rs_Target, _: &mut _| t.struct_size = 3)),
            (
                "not UTF-8",
                Box::new(|_: &mut _, t: &mut ffi::XLA_FFI_Rs_Target, _: &mut _| {
                    t.name = ffi::XLA_FFI_Rs_Str { ptr: b"\xff\xfe".as_ptr().cast(), len: 2 }
                }),
            ),
            (
                "is malformed",
                Box::new(|_: &mut _, _: &mut _, ty: &mut ffi::XLA_FFI_Rs_Type| ty.type_id = core::ptr::null_mut()),
            ),
            (
                "could not be built: boom",
                Box::new(|r: &mut ffi::XLA_FFI_Rs_Registry, _: &mut _, _: &mut _| {
                    r.error = ffi::XLA_FFI_Rs_Str { ptr: b"boom".as_ptr().cast(), len: 4 }
                }),
            ),
        ];
        for (words, edit) in cases {
            let e = read_edited(edit);
            assert_eq!(e.kind(), ErrorKind::Library);
            assert!(e.message().starts_with("test: ") && e.message().contains(words), "{words}: {e}");
        }
    }
}
