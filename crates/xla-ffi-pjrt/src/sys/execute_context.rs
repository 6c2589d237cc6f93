//! `PJRT_ExecuteContext_Create` and `_Destroy`: slots 98 and 99 of `PJRT_Api` (after
//! the three error functions at slot 0, counting from the table's first function
//! pointer at byte 40). Present since PJRT 0.5x; a table whose `struct_size` ends
//! before them has none.

use core::ffi::c_void;

use super::header::{PJRT_Error, PJRT_Extension_Base};

/// The byte offset of `PJRT_ExecuteContext_Create` in `PJRT_Api`.
pub const PJRT_ExecuteContext_Create_OFFSET: usize = 40 + 8 * 98;
/// The byte offset of `PJRT_ExecuteContext_Destroy` in `PJRT_Api`.
pub const PJRT_ExecuteContext_Destroy_OFFSET: usize = 40 + 8 * 99;

/// `PJRT_ExecuteContext_Create_Args`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_ExecuteContext_Create_Args {
    pub struct_size: usize,
    pub extension_start: *const PJRT_Extension_Base,
    /// `PJRT_ExecuteContext*` (out).
    pub context: *mut c_void,
}
pub const PJRT_ExecuteContext_Create_Args_STRUCT_SIZE: usize = 24;
pub type PJRT_ExecuteContext_Create =
    unsafe extern "C" fn(args: *mut PJRT_ExecuteContext_Create_Args) -> *mut PJRT_Error;

/// `PJRT_ExecuteContext_Destroy_Args`.
#[repr(C)]
#[derive(Debug, Copy, Clone)]
pub struct PJRT_ExecuteContext_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *const PJRT_Extension_Base,
    pub context: *mut c_void,
}
pub const PJRT_ExecuteContext_Destroy_Args_STRUCT_SIZE: usize = 24;
pub type PJRT_ExecuteContext_Destroy =
    unsafe extern "C" fn(args: *mut PJRT_ExecuteContext_Destroy_Args) -> *mut PJRT_Error;
