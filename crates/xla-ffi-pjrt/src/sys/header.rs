//! The leading fields of `PJRT_Api` (`xla/pjrt/c/pjrt_c_api.h`), which every PJRT
//! version has at the same offsets, the extension chain's base, and the error
//! functions of the table's first slots.
//!
//! Everything past these fields is read by offset after checking the table's
//! `struct_size` (see `client.rs` for the client's slots).

use core::ffi::{c_char, c_void};

/// `PJRT_Extension_Type` of the FFI extension (`PJRT_Extension_Type_FFI`).
pub const PJRT_EXTENSION_TYPE_FFI: u32 = 5;
/// `PJRT_Extension_Type` of the GPU custom call extension.
pub const PJRT_EXTENSION_TYPE_GPU_CUSTOM_CALL: u32 = 0;

/// `PJRT_Extension_Base`: the head of every extension in the chain.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_Extension_Base {
    pub struct_size: usize,
    /// `PJRT_Extension_Type` (a C enum: 4 bytes).
    pub type_: u32,
    pub next: *const PJRT_Extension_Base,
}
/// `PJRT_Extension_Base_STRUCT_SIZE`.
pub const PJRT_Extension_Base_STRUCT_SIZE: usize = 24;

/// `PJRT_Api_Version`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_Api_Version {
    pub struct_size: usize,
    pub extension_start: *const PJRT_Extension_Base,
    pub major_version: i32,
    pub minor_version: i32,
}

/// An error made by the plugin (opaque).
#[repr(C)]
pub struct PJRT_Error {
    _private: [u8; 0],
}

/// `PJRT_Error_Destroy_Args`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_Error_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *const PJRT_Extension_Base,
    pub error: *mut PJRT_Error,
}
/// `PJRT_Error_Destroy_Args_STRUCT_SIZE`.
pub const PJRT_Error_Destroy_Args_STRUCT_SIZE: usize = 24;
pub type PJRT_Error_Destroy = unsafe extern "C" fn(args: *mut PJRT_Error_Destroy_Args);

/// `PJRT_Error_Message_Args`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_Error_Message_Args {
    pub struct_size: usize,
    pub extension_start: *const PJRT_Extension_Base,
    pub error: *const PJRT_Error,
    pub message: *const c_char,
    pub message_size: usize,
}
/// `PJRT_Error_Message_Args_STRUCT_SIZE`.
pub const PJRT_Error_Message_Args_STRUCT_SIZE: usize = 40;
pub type PJRT_Error_Message = unsafe extern "C" fn(args: *mut PJRT_Error_Message_Args);

/// `PJRT_Error_GetCode_Args`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_Error_GetCode_Args {
    pub struct_size: usize,
    pub extension_start: *const PJRT_Extension_Base,
    pub error: *const PJRT_Error,
    /// `PJRT_Error_Code` (out).
    pub code: u32,
}
/// `PJRT_Error_GetCode_Args_STRUCT_SIZE`.
pub const PJRT_Error_GetCode_Args_STRUCT_SIZE: usize = 28;
pub type PJRT_Error_GetCode = unsafe extern "C" fn(args: *mut PJRT_Error_GetCode_Args) -> *mut PJRT_Error;

/// The first fields of `PJRT_Api`: the same in every PJRT version. The table goes
/// on with more function slots (`struct_size` says how many).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_Api_Head {
    pub struct_size: usize,
    pub extension_start: *const PJRT_Extension_Base,
    pub pjrt_api_version: PJRT_Api_Version,
    pub PJRT_Error_Destroy: Option<PJRT_Error_Destroy>,
    pub PJRT_Error_Message: Option<PJRT_Error_Message>,
    pub PJRT_Error_GetCode: Option<PJRT_Error_GetCode>,
}
/// The bytes of [`PJRT_Api_Head`]: a table must be at least this long.
pub const PJRT_Api_Head_SIZE: usize = 64;

/// `GetPjrtApi`, the one symbol a plugin exports.
pub type GetPjrtApi = unsafe extern "C" fn() -> *const c_void;

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn offsets_match_the_header() {
        assert_eq!(size_of::<PJRT_Extension_Base>(), PJRT_Extension_Base_STRUCT_SIZE);
        assert_eq!(offset_of!(PJRT_Api_Head, pjrt_api_version), 16);
        assert_eq!(offset_of!(PJRT_Api_Head, PJRT_Error_Destroy), 40);
        assert_eq!(size_of::<PJRT_Api_Head>(), PJRT_Api_Head_SIZE);
        assert_eq!(offset_of!(PJRT_Error_GetCode_Args, code) + 4, PJRT_Error_GetCode_Args_STRUCT_SIZE);
        assert_eq!(size_of::<PJRT_Error_Message_Args>(), PJRT_Error_Message_Args_STRUCT_SIZE);
    }
}
