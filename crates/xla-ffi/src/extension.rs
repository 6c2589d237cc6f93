//! Public extensions (FFI API 0.4): structs that XLA attaches to a call's invoke
//! context, found by id with `XLA_FFI_InvokeContext_FindExtension` (`ffi.h`'s
//! `Extension<T>`). XLA:GPU attaches the record extension (building command-buffer
//! commands, [`RECORD`]) and the collectives extension ([`COLLECTIVES`]); XLA:CPU
//! attaches none (looking one up finds nothing, without an error).
//!
//! [`Context::find_extension_id`] says whether an extension is there and at which
//! version, in safe code; [`Context::find_extension`] gives `&E` for a type `E`
//! that declares the extension's C layout ([`Extension`], an `unsafe` trait: the
//! layout is the implementer's promise).

use crate::context::Context;
use crate::error::{Error, ErrorCode, Result};

/// The id of the record extension (`XLA_FFI_Extension_Record`, `record_c_api.h`):
/// GPU command-buffer recording. Unstable in XLA.
pub const RECORD: i64 = 128;
/// The id of the collectives extension (`XLA_FFI_Extension_Collectives`,
/// `collectives_c_api.h`): NCCL communicators and memory windows. Unstable in XLA.
pub const COLLECTIVES: i64 = 129;

/// The first FFI API version with public extensions.
pub(crate) const EXTENSIONS_SINCE: (i32, i32) = (0, 4);

/// A public extension's C struct, as a Rust type.
///
/// # Safety
/// Implement it only for a `#[repr(C)]` type that is the C layout of the extension
/// whose id is [`TYPE`](Self::TYPE), at every version
/// [`supports`](Self::supports) accepts: it starts with the `XLA_FFI_Extension`
/// header ([`sys::compat::ExtensionHeader`](crate::sys::compat::ExtensionHeader)),
/// every field is a value for which any bit pattern XLA may store is valid
/// (integers, raw pointers, `Option` of function pointers), and it is safe to share
/// between threads (XLA may run several calls at once). The crate checks the id, the
/// version and that XLA's struct is at least `size_of::<Self>()` bytes before making
/// a reference.
pub unsafe trait Extension: Sync + Sized + 'static {
    /// The extension's id (`XLA_FFI_ExtensionId::extension_type`).
    const TYPE: i64;
    /// Its name, for messages.
    const NAME: &'static str;
    /// The version this type declares, `(major, minor)`.
    const VERSION: (i32, i32);
    /// Whether the layout of version `major.minor` is this type's. By default only
    /// [`VERSION`](Self::VERSION) exactly, as `ffi.h` does.
    fn supports(major: i32, minor: i32) -> bool {
        (major, minor) == Self::VERSION
    }
}

/// What XLA's header of an extension says: its id, version and size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtensionId {
    /// The extension's id ([`RECORD`], [`COLLECTIVES`], ...).
    pub extension_type: i64,
    /// Its version, `(major, minor)`.
    pub version: (i32, i32),
    /// The size in bytes of XLA's struct.
    pub struct_size: usize,
}

impl<'f> Context<'f> {
    /// Looks up the extension `extension_type` in this call's context: its id,
    /// version and size, or `None` when XLA attached none (always, on XLA:CPU).
    ///
    /// Errors: `UNIMPLEMENTED` naming the API version on a runtime older than FFI
    /// API 0.4 (jaxlib 0.10 has 0.3), which has no extensions; otherwise the
    /// runtime's own error, prefixed by the target.
    ///
    /// ```
    /// use xla_ffi::testing::{CallBuilder, DemoExtension, FakeApi};
    /// use xla_ffi::{handler, Context, ErrorCode, Result};
    ///
    /// #[handler(target = "demo.ext")]
    /// fn demo_ext(ctx: Context) -> Result<()> {
    ///     let id = ctx.find_extension_id(DemoExtension::ID)?.expect("attached by the test");
    ///     assert_eq!(id.version, (1, 2));
    ///     let demo = ctx.find_extension::<DemoExtension>()?.expect("the same one");
    ///     assert_eq!(demo.value, 42);
    ///     // XLA attached no record extension to this call (nor does it on the CPU).
    ///     assert!(ctx.find_extension_id(xla_ffi::extension::RECORD)?.is_none());
    ///     Ok(())
    /// }
    ///
    /// # if xla_ffi::sys::compat::HAS_FIND_EXTENSION {
    /// CallBuilder::new().extension(DemoExtension::new(42)).run(DEMO_EXT).unwrap();
    /// # }
    /// // An API 0.3 runtime (jaxlib 0.10) has no extensions: a clear error.
    /// let mut old = CallBuilder::new().api(FakeApi::new(3).with_struct_size(192));
    /// let (code, msg) = old.run(DEMO_EXT).unwrap_err();
    /// assert_eq!(code, ErrorCode::Unimplemented);
    /// assert!(msg.contains("demo.ext: extensions need XLA FFI API 0.4 or newer"));
    /// ```
    pub fn find_extension_id(&self, extension_type: i64) -> Result<Option<ExtensionId>> {
        // SAFETY: a header XLA returns lives for the call; only its header fields
        // are read, by value.
        Ok(self.find_raw(extension_type, "")?.map(|h| unsafe { header_id(h) }))
    }

    /// The extension `E` in this call's context, as `&E`, or `None` when XLA
    /// attached none of its id (always, on XLA:CPU).
    ///
    /// Errors: `UNIMPLEMENTED` on a runtime older than FFI API 0.4;
    /// `FAILED_PRECONDITION` when XLA's extension has a version `E` does not
    /// support, or a struct smaller than `E`; `INTERNAL` when the runtime answers
    /// with an extension of another id; otherwise the runtime's own error. Each
    /// names the target and the extension. See [`find_extension_id`](Self::find_extension_id)
    /// for an example.
    pub fn find_extension<E: Extension>(&self) -> Result<Option<&'f E>> {
        let Some(h) = self.find_raw(E::TYPE, E::NAME)? else {
            return Ok(None);
        };
        // SAFETY: as in `find_extension_id`.
        let id = unsafe { header_id(h) };
        let what = format!("{}: extension {} (id {})", self.target, E::NAME, E::TYPE);
        if id.extension_type != E::TYPE {
            return Err(Error::internal(format!(
                "{what}: the runtime returned an extension of id {} instead",
                id.extension_type
            )));
        }
        let (major, minor) = id.version;
        if !E::supports(major, minor) {
            return Err(Error::failed_precondition(format!(
                "{what}: version mismatch: XLA's is {major}.{minor}, this code declares {}.{}",
                E::VERSION.0,
                E::VERSION.1
            )));
        }
        if id.struct_size < core::mem::size_of::<E>() {
            return Err(Error::failed_precondition(format!(
                "{what}: XLA's struct is {} bytes, smaller than the {} bytes this code declares",
                id.struct_size,
                core::mem::size_of::<E>()
            )));
        }
        // SAFETY: the extension has `E`'s id and a version `E` supports, so (by
        // `E`'s `unsafe impl`) its layout is `E`'s; it holds at least
        // `size_of::<E>()` bytes, any bit pattern is a valid `E`, and XLA keeps it
        // alive for the call (`'f`); only a shared reference is made (`E: Sync`).
        Ok(Some(unsafe { &*(h as *const E) }))
    }

    /// `XLA_FFI_InvokeContext_FindExtension`, gated on the API version.
    fn find_raw(&self, extension_type: i64, name: &str) -> Result<Option<*const crate::sys::compat::ExtensionHeader>> {
        let api = self.frame.api;
        let (major, minor) = api.version();
        let what =
            if name.is_empty() { format!("id {extension_type}") } else { format!("{name} (id {extension_type})") };
        let missing = |why: String| {
            Error::unimplemented(format!(
                "{}: extensions need XLA FFI API 0.4 or newer (looking up {what}); {why}",
                self.target
            ))
        };
        if (major, minor) < EXTENSIONS_SINCE {
            return Err(missing(format!("this XLA runtime has FFI API {major}.{minor}")));
        }
        // SAFETY: the frame's table holds `struct_size` bytes (see `ApiTable`) and
        // `ctx` is this call's context; `find_extension` checks the size first.
        let Some((err, ext)) =
            (unsafe { crate::sys::compat::find_extension(api.ptr(), self.frame.ctx, extension_type) })
        else {
            return Err(missing(if crate::sys::compat::HAS_FIND_EXTENSION {
                format!("this XLA runtime (FFI API {major}.{minor}) has no XLA_FFI_InvokeContext_FindExtension")
            } else {
                "this build's XLA FFI header (API 0.3) has no XLA_FFI_InvokeContext_FindExtension".to_string()
            }));
        };
        api.take_error(err).map_err(|e| e.context(self.target))?;
        if ext.is_null() {
            return Ok(None);
        }
        // An extension too small for its own header is not one.
        // SAFETY: a non-null extension starts with its `struct_size`.
        let size = unsafe { core::ptr::addr_of!((*ext).struct_size).read() };
        if size < core::mem::size_of::<crate::sys::compat::ExtensionHeader>() {
            return Err(Error::new(
                ErrorCode::Internal,
                format!("{}: extension {what}: XLA's struct of {size} bytes is smaller than its header", self.target),
            ));
        }
        Ok(Some(ext))
    }
}

/// Reads an extension's header.
///
/// # Safety
/// `h` must point to an extension XLA returned for the call in progress, whose
/// `struct_size` covers the header (checked by `find_raw`).
unsafe fn header_id(h: *const crate::sys::compat::ExtensionHeader) -> ExtensionId {
    // SAFETY: guaranteed by the caller.
    let h = unsafe { h.read() };
    ExtensionId {
        extension_type: h.id.extension_type,
        version: (h.id.major_version, h.id.minor_version),
        struct_size: h.struct_size,
    }
}
