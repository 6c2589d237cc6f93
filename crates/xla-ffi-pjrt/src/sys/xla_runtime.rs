//! The parts of XLA's FFI C API (`xla/ffi/api/c_api.h`) that registration through
//! a plugin's own runtime uses, declared for *both* runtime versions the plugins
//! ship (FFI API 0.3 and 0.4+), whatever header `xla-ffi-sys` was built from:
//! the handler bundle grew a `record` entry in 0.4, which moves `traits` of
//! `XLA_FFI_Handler_Register_Args`.
//!
//! The table's function slot *k* is at byte 48 + 8k; a slot is used only when the
//! table's `struct_size` reaches it.

use core::ffi::{c_char, c_void};

/// The byte offset of function slot `k` of `XLA_FFI_Api`.
pub const fn xla_slot(k: usize) -> usize {
    48 + 8 * k
}
/// Slot of `XLA_FFI_Error_Create`.
pub const XLA_SLOT_ERROR_CREATE: usize = xla_slot(0);
/// Slot of `XLA_FFI_Error_GetDetails` (0.3: `Error_GetMessage`, without `errc`).
pub const XLA_SLOT_ERROR_GET_DETAILS: usize = xla_slot(1);
/// Slot of `XLA_FFI_Error_Destroy`.
pub const XLA_SLOT_ERROR_DESTROY: usize = xla_slot(2);
/// Slot of `XLA_FFI_Handler_Register`.
pub const XLA_SLOT_HANDLER_REGISTER: usize = xla_slot(3);
/// Slot of `XLA_FFI_Type_Register`.
pub const XLA_SLOT_TYPE_REGISTER: usize = xla_slot(5);
/// The offset of `api_version.major_version` in `XLA_FFI_Api` (then the minor).
pub const XLA_API_VERSION_MAJOR_OFFSET: usize = 32;

/// An error made by the runtime (opaque).
#[repr(C)]
pub struct XLA_Error {
    _private: [u8; 0],
}

/// A handler: `XLA_FFI_Error* handler(XLA_FFI_CallFrame*)`.
pub type XLA_Handler = Option<unsafe extern "C" fn(call_frame: *mut c_void) -> *mut XLA_Error>;

/// `XLA_FFI_ByteSpan`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_ByteSpan {
    pub ptr: *const c_char,
    pub len: usize,
}

/// `XLA_FFI_Error_Create_Args`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_Error_Create_Args {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub message: *const c_char,
    pub errc: u32,
}
pub const XLA_Error_Create_Args_STRUCT_SIZE: usize = 28;
pub type XLA_Error_Create = unsafe extern "C" fn(args: *mut XLA_Error_Create_Args) -> *mut XLA_Error;

/// `XLA_FFI_Error_GetDetails_Args` (0.3's `GetMessage_Args` is its first 32 bytes;
/// a 0.3 runtime leaves `errc` alone).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_Error_GetDetails_Args {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub error: *mut XLA_Error,
    pub message: *const c_char,
    pub errc: u32,
}
pub const XLA_Error_GetDetails_Args_STRUCT_SIZE: usize = 36;
pub type XLA_Error_GetDetails = unsafe extern "C" fn(args: *mut XLA_Error_GetDetails_Args);

/// `XLA_FFI_Error_Destroy_Args`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_Error_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub error: *mut XLA_Error,
}
pub const XLA_Error_Destroy_Args_STRUCT_SIZE: usize = 24;
pub type XLA_Error_Destroy = unsafe extern "C" fn(args: *mut XLA_Error_Destroy_Args);

/// `XLA_FFI_Type_Register_Args` (the header's STRUCT_SIZE stops at `type_id`; the
/// runtime reads `type_info` too, as `jax.ffi.register_ffi_type` passes it).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_Type_Register_Args {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub name: XLA_ByteSpan,
    /// `XLA_FFI_TypeId*`, in/out (0 asks for a new id).
    pub type_id: *mut c_void,
    /// `const XLA_FFI_TypeInfo*`.
    pub type_info: *const c_void,
}
pub const XLA_Type_Register_Args_STRUCT_SIZE: usize = 40;
pub type XLA_Type_Register = unsafe extern "C" fn(args: *mut XLA_Type_Register_Args) -> *mut XLA_Error;

/// `XLA_FFI_Handler_Register_Args` of FFI API 0.4 and newer (5-entry bundle).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_Handler_Register_Args {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub name: XLA_ByteSpan,
    pub platform: XLA_ByteSpan,
    /// instantiate, prepare, initialize, execute, record.
    pub bundle: [XLA_Handler; 5],
    pub traits: u32,
}
pub const XLA_Handler_Register_Args_STRUCT_SIZE: usize = 92;

/// `XLA_FFI_Handler_Register_Args` of FFI API 0.3 (4-entry bundle, no `record`).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_Handler_Register_Args_V03 {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub name: XLA_ByteSpan,
    pub platform: XLA_ByteSpan,
    /// instantiate, prepare, initialize, execute.
    pub bundle: [XLA_Handler; 4],
    pub traits: u32,
}
pub const XLA_Handler_Register_Args_V03_STRUCT_SIZE: usize = 84;

/// The FFI API version from which the bundle has `record`.
pub const XLA_RECORD_SINCE: (i32, i32) = (0, 4);

/// The leading fields of `XLA_FFI_CallFrame` the probe reads.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_CallFrame_Head {
    pub struct_size: usize,
    /// `XLA_FFI_InternalExtension*`: the metadata extension during the query.
    pub extension_start: *mut XLA_InternalExtension,
    /// `const XLA_FFI_Api*`.
    pub api: *const c_void,
}

/// `XLA_FFI_InternalExtension` (0.3: `XLA_FFI_Extension_Base`).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_InternalExtension {
    pub struct_size: usize,
    pub type_: u32,
    pub next: *mut XLA_InternalExtension,
}
/// `XLA_FFI_Extension_Metadata`.
pub const XLA_EXTENSION_METADATA: u32 = 1;

/// `XLA_FFI_Api_Version`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_Api_Version {
    pub struct_size: usize,
    pub extension_start: *mut c_void,
    pub major_version: i32,
    pub minor_version: i32,
}
pub const XLA_Api_Version_STRUCT_SIZE: usize = 24;

/// `XLA_FFI_Metadata` up to `traits` (its STRUCT_SIZE, 36).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_Metadata {
    pub struct_size: usize,
    pub api_version: XLA_Api_Version,
    pub traits: u32,
}
pub const XLA_Metadata_STRUCT_SIZE: usize = 36;

/// `XLA_FFI_Metadata_Extension`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct XLA_Metadata_Extension {
    pub extension_base: XLA_InternalExtension,
    pub metadata: *mut XLA_Metadata,
}
pub const XLA_Metadata_Extension_STRUCT_SIZE: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    /// The same sizes as `xla-ffi-sys`'s 0.5 declarations, and the 0.3 bundle's.
    #[test]
    fn layouts_match_the_headers() {
        assert_eq!(offset_of!(XLA_Handler_Register_Args, traits) + 4, XLA_Handler_Register_Args_STRUCT_SIZE);
        assert_eq!(offset_of!(XLA_Handler_Register_Args_V03, traits) + 4, XLA_Handler_Register_Args_V03_STRUCT_SIZE);
        assert_eq!(offset_of!(XLA_Type_Register_Args, type_id) + 8, XLA_Type_Register_Args_STRUCT_SIZE);
        assert_eq!(offset_of!(XLA_Error_GetDetails_Args, errc) + 4, XLA_Error_GetDetails_Args_STRUCT_SIZE);
        assert_eq!(offset_of!(XLA_Metadata, traits) + 4, XLA_Metadata_STRUCT_SIZE);
        assert_eq!(size_of::<XLA_Metadata_Extension>(), XLA_Metadata_Extension_STRUCT_SIZE);
        assert_eq!(size_of::<XLA_Api_Version>(), XLA_Api_Version_STRUCT_SIZE);
        assert_eq!(offset_of!(xla_ffi_sys::XLA_FFI_Api, api_version) + 16, XLA_API_VERSION_MAJOR_OFFSET);
        assert_eq!(offset_of!(xla_ffi_sys::XLA_FFI_Api, XLA_FFI_Type_Register), XLA_SLOT_TYPE_REGISTER);
        assert_eq!(offset_of!(xla_ffi_sys::XLA_FFI_Api, XLA_FFI_Handler_Register), XLA_SLOT_HANDLER_REGISTER);
    }
}
