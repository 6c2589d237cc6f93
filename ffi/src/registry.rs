//! The handler registry a library of handlers exports for hosts without Python.
//!
//! Not part of XLA's header: this is xla-ffi-rs's own C ABI, shared by the writer
//! (`xla_ffi::export_registry!`, which a crate of handlers writes once) and the
//! readers (`xla-ffi-pjrt`'s `HandlerLibrary`, or a host in any language). A
//! library exports one function,
//!
//! ```c
//! const XLA_FFI_Rs_Registry* xla_ffi_rs_registry(void);
//! ```
//!
//! returning a registry that lives as long as the library is loaded. Every struct
//! starts with its `struct_size` (as XLA's structs do); arrays are read with the
//! registry's `target_size` and `type_size` as their strides, so a later version
//! may append fields. A reader checks `version` (the layout's major version: fields
//! are only ever appended within one) and that each size is at least its own.
//!
//! Strings are UTF-8 byte spans (`ptr`, `len`), not NUL-terminated.

use core::ffi::c_char;

use crate::{XLA_FFI_CallFrame, XLA_FFI_Error, XLA_FFI_TypeId, XLA_FFI_TypeInfo};

/// The exported symbol's name (`xla_ffi_rs_registry`), as `dlsym` takes it.
pub const XLA_FFI_RS_REGISTRY_SYMBOL: &str = "xla_ffi_rs_registry";

/// The layout version this declaration describes. A reader refuses another.
pub const XLA_FFI_RS_REGISTRY_VERSION: u32 = 1;

/// `XLA_FFI_Rs_Target::platform` for a handler of host (CPU) buffers.
pub const XLA_FFI_RS_PLATFORM_HOST: u32 = 0;
/// `XLA_FFI_Rs_Target::platform` for a handler of device (GPU) buffers.
pub const XLA_FFI_RS_PLATFORM_DEVICE: u32 = 1;

/// A handler, or null: `XLA_FFI_Error* (*)(XLA_FFI_CallFrame*)` (declared here, not
/// taken from the header's typedef, so the layout is the same with `bindgen`).
pub type XLA_FFI_Rs_Handler = Option<unsafe extern "C" fn(call_frame: *mut XLA_FFI_CallFrame) -> *mut XLA_FFI_Error>;

/// The type of the exported function.
pub type XLA_FFI_Rs_Registry_Fn = unsafe extern "C" fn() -> *const XLA_FFI_Rs_Registry;

/// A UTF-8 string: `len` bytes at `ptr` (not NUL-terminated; `ptr` may be null
/// when `len` is 0).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_FFI_Rs_Str {
    pub ptr: *const c_char,
    pub len: usize,
}

/// One FFI target: its name, platform, traits and stage bundle (the handler of
/// each stage, or null). `execute` is never null.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_FFI_Rs_Target {
    pub struct_size: usize,
    pub name: XLA_FFI_Rs_Str,
    /// [`XLA_FFI_RS_PLATFORM_HOST`] or [`XLA_FFI_RS_PLATFORM_DEVICE`].
    pub platform: u32,
    /// `XLA_FFI_Handler_Traits` bits, as the handlers report them.
    pub traits: u32,
    pub bundle: XLA_FFI_Rs_Bundle,
}

/// The handler of each stage, or null; declared here with all five stages whatever
/// the XLA header of the build (the 0.3 header's bundle lacks `record`).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_FFI_Rs_Bundle {
    pub instantiate: XLA_FFI_Rs_Handler,
    pub prepare: XLA_FFI_Rs_Handler,
    pub initialize: XLA_FFI_Rs_Handler,
    pub execute: XLA_FFI_Rs_Handler,
    pub record: XLA_FFI_Rs_Handler,
}

/// One type to register with XLA before the targets (`XLA_FFI_Type_Register`):
/// a state type or a user data type.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_FFI_Rs_Type {
    pub struct_size: usize,
    /// The name XLA registers the type under (`jax.ffi.register_ffi_type`'s name).
    pub name: XLA_FFI_Rs_Str,
    /// Where XLA writes the type's id; the library's handlers read it there.
    pub type_id: *mut XLA_FFI_TypeId,
    /// The type's deleter, for state XLA owns.
    pub type_info: *const XLA_FFI_TypeInfo,
}

/// The registry: every target and type of one library of handlers.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_FFI_Rs_Registry {
    pub struct_size: usize,
    /// [`XLA_FFI_RS_REGISTRY_VERSION`] of the writer.
    pub version: u32,
    /// The XLA FFI API version the handlers report to XLA (the lowest runtime
    /// version they need): major, minor.
    pub ffi_api_major: i32,
    pub ffi_api_minor: i32,
    /// The stride of `targets`, at least `size_of::<XLA_FFI_Rs_Target>()`.
    pub target_size: usize,
    pub targets: *const XLA_FFI_Rs_Target,
    pub num_targets: usize,
    /// The stride of `types`, at least `size_of::<XLA_FFI_Rs_Type>()`.
    pub type_size: usize,
    pub types: *const XLA_FFI_Rs_Type,
    pub num_types: usize,
    /// Why the writer could not build the registry (then it has no targets and no
    /// types), or an empty string.
    pub error: XLA_FFI_Rs_Str,
    /// The writing crate, `name version`, for messages.
    pub library: XLA_FFI_Rs_Str,
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    /// The layout is part of the ABI: a change of any offset needs a new version.
    #[cfg(target_pointer_width = "64")]
    #[test]
    fn layout_is_fixed() {
        assert_eq!(size_of::<XLA_FFI_Rs_Str>(), 16);
        assert_eq!(size_of::<XLA_FFI_Rs_Target>(), 72);
        assert_eq!(offset_of!(XLA_FFI_Rs_Target, bundle), 32);
        assert_eq!(size_of::<XLA_FFI_Rs_Type>(), 40);
        assert_eq!(offset_of!(XLA_FFI_Rs_Registry, target_size), 24);
        assert_eq!(offset_of!(XLA_FFI_Rs_Registry, error), 72);
        assert_eq!(size_of::<XLA_FFI_Rs_Registry>(), 104);
    }
}
