//! The PJRT FFI extension (`xla/pjrt/c/pjrt_c_api_ffi_extension.h`) as the shipped
//! plugins lay it out, which is not what every header says:
//!
//! * `PJRT_FFI_Register_Handler_Args` of the plugins of PJRT 0.81 to 0.116 has no
//!   `api_version` field (typed FFI only): 52 bytes. The older header's layout,
//!   with `int api_version` after `target_name_size`, made these plugins throw
//!   `std::bad_alloc`.
//! * `PJRT_FFI_Type_Register_Args` ends at `type_info` (48 bytes) in the plugins of
//!   PJRT 0.106 and 0.115, which refuse the 40-byte form of older headers (ending
//!   at `type_id`) and dereference `type_info`.
//! * `PJRT_FFI_UserData` may carry a `deleter` (read only by some versions, which
//!   call it when the context dies); it is sent as null here.

use core::ffi::{c_char, c_void};

use super::header::{PJRT_Error, PJRT_Extension_Base};

/// `PJRT_FFI_Type_Info` (PJRT 0.115): the deleter of a type's objects, and two
/// serialization hooks left null.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_FFI_Type_Info {
    pub deleter: Option<unsafe extern "C" fn(object: *mut c_void)>,
    pub serialize: *const c_void,
    pub deserialize: *const c_void,
}

/// `PJRT_FFI_Type_Register_Args` (older headers' `PJRT_FFI_TypeID_Register_Args`
/// ends at `type_id`).
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_FFI_Type_Register_Args {
    pub struct_size: usize,
    pub extension_start: *const PJRT_Extension_Base,
    pub type_name: *const c_char,
    pub type_name_size: usize,
    /// In/out: 0 asks the plugin to assign one.
    pub type_id: i64,
    /// Dereferenced by the plugins of 0.106 and 0.115, so never null.
    pub type_info: *const PJRT_FFI_Type_Info,
}
/// The size of older headers' form (ends at `type_id`), refused by 0.106 and 0.115.
pub const PJRT_FFI_Type_Register_Args_STRUCT_SIZE_V1: usize = 40;
/// The size with `type_info`, what this crate sends.
pub const PJRT_FFI_Type_Register_Args_STRUCT_SIZE: usize = 48;
pub type PJRT_FFI_Type_Register = unsafe extern "C" fn(args: *mut PJRT_FFI_Type_Register_Args) -> *mut PJRT_Error;

/// `PJRT_FFI_UserData`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_FFI_UserData {
    pub type_id: i64,
    pub data: *mut c_void,
    /// Read only by plugins whose header has it; null here.
    pub deleter: Option<unsafe extern "C" fn(data: *mut c_void)>,
}

/// `PJRT_FFI_UserData_Add_Args`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_FFI_UserData_Add_Args {
    pub struct_size: usize,
    pub extension_start: *const PJRT_Extension_Base,
    /// `PJRT_ExecuteContext*`.
    pub context: *mut c_void,
    pub user_data: PJRT_FFI_UserData,
}
/// The size with the deleter (a plugin without it reads the first 40 bytes).
pub const PJRT_FFI_UserData_Add_Args_STRUCT_SIZE: usize = 48;
pub type PJRT_FFI_UserData_Add = unsafe extern "C" fn(args: *mut PJRT_FFI_UserData_Add_Args) -> *mut PJRT_Error;

/// `PJRT_FFI_Register_Handler_Args` of the shipped plugins (PJRT 0.81 to 0.116):
/// typed FFI only, no `api_version`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_FFI_Register_Handler_Args {
    pub struct_size: usize,
    pub target_name: *const c_char,
    pub target_name_size: usize,
    /// `XLA_FFI_Handler*`.
    pub handler: *mut c_void,
    pub platform_name: *const c_char,
    pub platform_name_size: usize,
    /// `PJRT_FFI_Handler_TraitsBits` (a C enum: 4 bytes).
    pub traits: u32,
}
/// 52: the offset of `traits` plus its size.
pub const PJRT_FFI_Register_Handler_Args_STRUCT_SIZE: usize = 52;
pub type PJRT_FFI_Register_Handler = unsafe extern "C" fn(args: *mut PJRT_FFI_Register_Handler_Args) -> *mut PJRT_Error;

/// `PJRT_FFI_Extension` with its three functions (48 bytes). An extension whose
/// `struct_size` ends before a slot does not have it.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_FFI_Extension {
    pub base: PJRT_Extension_Base,
    pub type_register: Option<PJRT_FFI_Type_Register>,
    pub user_data_add: Option<PJRT_FFI_UserData_Add>,
    pub register_handler: Option<PJRT_FFI_Register_Handler>,
}
/// `PJRT_FFI_Extension_STRUCT_SIZE` with `register_handler`.
pub const PJRT_FFI_Extension_STRUCT_SIZE: usize = 48;

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    #[test]
    fn sizes_match_the_plugins() {
        assert_eq!(offset_of!(PJRT_FFI_Register_Handler_Args, traits) + 4, PJRT_FFI_Register_Handler_Args_STRUCT_SIZE);
        assert_eq!(offset_of!(PJRT_FFI_Type_Register_Args, type_id) + 8, PJRT_FFI_Type_Register_Args_STRUCT_SIZE_V1);
        assert_eq!(size_of::<PJRT_FFI_Type_Register_Args>(), PJRT_FFI_Type_Register_Args_STRUCT_SIZE);
        assert_eq!(size_of::<PJRT_FFI_UserData_Add_Args>(), PJRT_FFI_UserData_Add_Args_STRUCT_SIZE);
        assert_eq!(size_of::<PJRT_FFI_Extension>(), PJRT_FFI_Extension_STRUCT_SIZE);
    }
}
