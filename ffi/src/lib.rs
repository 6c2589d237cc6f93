//! Raw declarations of XLA's C FFI, `xla/ffi/api/c_api.h`.
//!
//! By default the ABI is declared by hand in Rust ([`abi.rs`](https://docs.rs/xla-ffi-sys)):
//! struct layouts, enums as integer constants, function-pointer types, as the API
//! 0.5 header (jaxlib 0.12) has them. Building needs no libclang, no jaxlib and no
//! Python. The header is never copied into this repository.
//!
//! With the `bindgen` feature the bindings are generated at build time from an
//! installed jaxlib's header instead (`XLA_FFI_INCLUDE_DIR`, or the build's Python
//! asked for `jax.ffi.include_dir()`; see `build.rs`), and the test suite compares
//! the size, alignment and field offsets of every hand-declared struct, and the value
//! of every constant, with what bindgen generated. CI runs that check against the API
//! 0.3 and 0.5 headers, so bindgen stays the source of truth.
//!
//! Enums are plain integer constants, never Rust `enum`s: a value the runtime sends
//! that these declarations do not know (a newer data type, say) must not be undefined
//! behaviour.
//!
//! The same source builds against the API 0.3 header (jaxlib 0.10) with `bindgen`.
//! The names that changed between 0.3 and 0.5 are re-exported under the 0.5 names in
//! [`compat`], so code above this crate uses one set of names.
//! `XLA_FFI_HEADER_MINOR` says which declaration this build uses.
#![no_std]
#![allow(non_upper_case_globals, non_camel_case_types, non_snake_case)]
#![allow(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(not(feature = "bindgen"))]
mod abi;
#[cfg(not(feature = "bindgen"))]
pub use abi::*;

// xla-ffi-rs's own registry of a handler library (not from XLA's header).
mod registry;
pub use registry::*;

#[cfg(feature = "bindgen")]
#[allow(clippy::all, rustdoc::all)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}
#[cfg(feature = "bindgen")]
pub use generated::*;

// With `bindgen`, the hand declarations are still compiled for the layout tests.
#[cfg(all(test, feature = "bindgen"))]
#[allow(dead_code)]
mod abi;
#[cfg(all(test, feature = "bindgen"))]
mod layout;

/// The minor API version of the header these bindings were generated from.
pub const XLA_FFI_HEADER_MINOR: i32 = XLA_FFI_API_MINOR as i32;

/// Names that differ between the API 0.3 and 0.5 headers, under their 0.5 names.
pub mod compat {
    #[cfg(xla_ffi_header_legacy)]
    pub use super::XLA_FFI_Error_GetMessage_Args as XLA_FFI_Error_GetDetails_Args;
    #[cfg(xla_ffi_header_legacy)]
    pub use super::XLA_FFI_Error_GetMessage_Args_STRUCT_SIZE as XLA_FFI_Error_GetDetails_Args_STRUCT_SIZE;
    #[cfg(not(xla_ffi_header_legacy))]
    pub use super::{XLA_FFI_Error_GetDetails_Args, XLA_FFI_Error_GetDetails_Args_STRUCT_SIZE};

    #[cfg(xla_ffi_header_legacy)]
    pub use super::XLA_FFI_Extension_Base as XLA_FFI_InternalExtension;
    #[cfg(not(xla_ffi_header_legacy))]
    pub use super::XLA_FFI_InternalExtension;

    #[cfg(xla_ffi_header_legacy)]
    pub use super::XLA_FFI_ExecutionContext as XLA_FFI_InvokeContext;
    #[cfg(not(xla_ffi_header_legacy))]
    pub use super::XLA_FFI_InvokeContext;

    #[cfg(xla_ffi_header_legacy)]
    pub use super::XLA_FFI_ExecutionContext_Get_Args as XLA_FFI_InvokeContext_Get_Args;
    #[cfg(xla_ffi_header_legacy)]
    pub use super::XLA_FFI_ExecutionContext_Get_Args_STRUCT_SIZE as XLA_FFI_InvokeContext_Get_Args_STRUCT_SIZE;
    #[cfg(not(xla_ffi_header_legacy))]
    pub use super::{XLA_FFI_InvokeContext_Get_Args, XLA_FFI_InvokeContext_Get_Args_STRUCT_SIZE};

    /// The type of the user data slot (`InvokeContext_Get`, 0.3: `ExecutionContext_Get`).
    pub type InvokeContextGetFn =
        unsafe extern "C" fn(*mut XLA_FFI_InvokeContext_Get_Args) -> *mut super::XLA_FFI_Error;

    /// Puts `f` into the user data slot (for fake API tables in tests).
    pub fn set_invoke_context_get_fn(api: &mut super::XLA_FFI_Api, f: InvokeContextGetFn) {
        #[cfg(not(xla_ffi_header_legacy))]
        {
            api.XLA_FFI_InvokeContext_Get = Some(f);
        }
        #[cfg(xla_ffi_header_legacy)]
        {
            api.XLA_FFI_ExecutionContext_Get = Some(f);
        }
    }

    /// Calls the user data slot (`InvokeContext_Get`, 0.3: `ExecutionContext_Get`)
    /// with `args`. `None` when the runtime's table ends before the slot or it is
    /// empty; otherwise the error the runtime returned (NULL on success).
    ///
    /// # Safety
    /// `api` must point to a runtime's API table of `struct_size` readable bytes, and
    /// `args` must be fully initialised for a call in progress on it.
    pub unsafe fn invoke_context_get(
        api: *const super::XLA_FFI_Api,
        args: &mut XLA_FFI_InvokeContext_Get_Args,
    ) -> Option<*mut super::XLA_FFI_Error> {
        #[cfg(not(xla_ffi_header_legacy))]
        let (offset, slot) = (core::mem::offset_of!(super::XLA_FFI_Api, XLA_FFI_InvokeContext_Get), {
            // SAFETY: only the field's address is taken here, not read.
            unsafe { core::ptr::addr_of!((*api).XLA_FFI_InvokeContext_Get) }
        });
        #[cfg(xla_ffi_header_legacy)]
        let (offset, slot) = (core::mem::offset_of!(super::XLA_FFI_Api, XLA_FFI_ExecutionContext_Get), {
            // SAFETY: only the field's address is taken here, not read.
            unsafe { core::ptr::addr_of!((*api).XLA_FFI_ExecutionContext_Get) }
        });
        // SAFETY: `struct_size` is the first field of every table (caller's promise).
        if unsafe { core::ptr::addr_of!((*api).struct_size).read() } < offset + core::mem::size_of::<usize>() {
            return None;
        }
        // SAFETY: the slot ends within the table's `struct_size` bytes.
        let f = unsafe { slot.read() }?;
        // SAFETY: the runtime's own function with the caller's initialised args.
        Some(unsafe { f(args) })
    }

    /// Whether this header declares `XLA_FFI_CustomOptions_Get` (0.5 headers).
    pub const HAS_CUSTOM_OPTIONS: bool = cfg!(not(xla_ffi_header_legacy));

    /// The type of the custom options slot (API 0.5).
    pub type CustomOptionsGetFn = unsafe extern "C" fn(*mut CustomOptionsGetArgs) -> *mut super::XLA_FFI_Error;

    /// `XLA_FFI_CustomOptions_Get_Args` (declared here too for 0.3 headers, which
    /// lack it; the slot is then never called).
    #[cfg(not(xla_ffi_header_legacy))]
    pub use super::XLA_FFI_CustomOptions_Get_Args as CustomOptionsGetArgs;
    #[cfg(xla_ffi_header_legacy)]
    #[repr(C)]
    #[derive(Debug, Copy, Clone)]
    pub struct CustomOptionsGetArgs {
        pub struct_size: usize,
        pub extension_start: *mut XLA_FFI_InternalExtension,
        pub ctx: *mut XLA_FFI_InvokeContext,
        pub attrs: *const super::XLA_FFI_Attrs,
    }

    /// Puts `f` into the custom options slot where this header has one (for fake
    /// API tables in tests; a 0.3 header's table ends before it).
    pub fn set_custom_options_get_fn(api: &mut super::XLA_FFI_Api, f: CustomOptionsGetFn) {
        #[cfg(not(xla_ffi_header_legacy))]
        {
            api.XLA_FFI_CustomOptions_Get = Some(f);
        }
        let _ = (api, f);
    }

    /// Calls `XLA_FFI_CustomOptions_Get` (API 0.5) for `ctx`.
    ///
    /// `None` when the slot is absent: this header predates it, or the runtime's
    /// table (by its `struct_size`) ends before it, or it is empty. Otherwise the
    /// error the runtime returned (NULL on success) and the dictionary it gave.
    ///
    /// # Safety
    /// `api` must point to a runtime's API table of `struct_size` readable bytes, and
    /// `ctx` must be the invoke context of a call in progress on it.
    pub unsafe fn custom_options(
        api: *const super::XLA_FFI_Api,
        ctx: *mut XLA_FFI_InvokeContext,
    ) -> Option<(*mut super::XLA_FFI_Error, *const super::XLA_FFI_Attrs)> {
        #[cfg(not(xla_ffi_header_legacy))]
        {
            let end =
                core::mem::offset_of!(super::XLA_FFI_Api, XLA_FFI_CustomOptions_Get) + core::mem::size_of::<usize>();
            // SAFETY: `struct_size` is the first field of every table (caller's promise).
            if unsafe { core::ptr::addr_of!((*api).struct_size).read() } < end {
                return None;
            }
            // SAFETY: the slot ends within the table's `struct_size` bytes.
            let f = unsafe { core::ptr::addr_of!((*api).XLA_FFI_CustomOptions_Get).read() }?;
            let mut args = CustomOptionsGetArgs {
                struct_size: super::XLA_FFI_CustomOptions_Get_Args_STRUCT_SIZE as usize,
                extension_start: core::ptr::null_mut(),
                ctx,
                attrs: core::ptr::null(),
            };
            // SAFETY: the runtime's own function, with fully initialised args of the
            // header's struct size and the call's context.
            let err = unsafe { f(&mut args) };
            Some((err, args.attrs))
        }
        #[cfg(xla_ffi_header_legacy)]
        {
            let _ = (api, ctx);
            None
        }
    }

    /// Whether this header declares `XLA_FFI_InvokeContext_FindExtension` and the
    /// public extension structs (0.4+ headers).
    pub const HAS_FIND_EXTENSION: bool = cfg!(not(xla_ffi_header_legacy));

    #[cfg(not(xla_ffi_header_legacy))]
    pub use super::{
        XLA_FFI_Extension as ExtensionHeader, XLA_FFI_ExtensionId as ExtensionId,
        XLA_FFI_InvokeContext_FindExtension_Args as FindExtensionArgs,
        XLA_FFI_InvokeContext_FindExtension_Args_STRUCT_SIZE as FindExtensionArgs_STRUCT_SIZE,
    };

    /// `XLA_FFI_ExtensionId` (declared here too for 0.3 headers, which lack it).
    #[cfg(xla_ffi_header_legacy)]
    #[repr(C)]
    #[derive(Debug, Copy, Clone)]
    pub struct ExtensionId {
        pub extension_type: i64,
        pub major_version: i32,
        pub minor_version: i32,
    }

    /// `XLA_FFI_Extension`, the header of a public extension (declared here too
    /// for 0.3 headers, which lack it).
    #[cfg(xla_ffi_header_legacy)]
    #[repr(C)]
    #[derive(Debug, Copy, Clone)]
    pub struct ExtensionHeader {
        pub struct_size: usize,
        pub id: ExtensionId,
        pub next: *const ExtensionHeader,
    }

    /// `XLA_FFI_InvokeContext_FindExtension_Args` (declared here too for 0.3
    /// headers, which lack it; the slot is then never called).
    #[cfg(xla_ffi_header_legacy)]
    #[repr(C)]
    #[derive(Debug, Copy, Clone)]
    pub struct FindExtensionArgs {
        pub struct_size: usize,
        pub extension_start: *mut XLA_FFI_InternalExtension,
        pub ctx: *mut XLA_FFI_InvokeContext,
        pub extension_type: i64,
        pub extension: *const ExtensionHeader,
    }
    #[cfg(xla_ffi_header_legacy)]
    pub const FindExtensionArgs_STRUCT_SIZE: usize = 40;

    /// The type of the extension lookup slot (API 0.4).
    pub type FindExtensionFn = unsafe extern "C" fn(*mut FindExtensionArgs) -> *mut super::XLA_FFI_Error;

    /// Puts `f` into the extension lookup slot where this header has one (for fake
    /// API tables in tests; a 0.3 header's table ends before it).
    pub fn set_find_extension_fn(api: &mut super::XLA_FFI_Api, f: FindExtensionFn) {
        #[cfg(not(xla_ffi_header_legacy))]
        {
            api.XLA_FFI_InvokeContext_FindExtension = Some(f);
        }
        let _ = (api, f);
    }

    /// Calls `XLA_FFI_InvokeContext_FindExtension` (API 0.4) for `ctx` and
    /// `extension_type`.
    ///
    /// `None` when the slot is absent: this header predates it, or the runtime's
    /// table (by its `struct_size`) ends before it, or it is empty. Otherwise the
    /// error the runtime returned (NULL on success) and the extension it found
    /// (NULL when there is none).
    ///
    /// # Safety
    /// `api` must point to a runtime's API table of `struct_size` readable bytes, and
    /// `ctx` must be the invoke context of a call in progress on it.
    pub unsafe fn find_extension(
        api: *const super::XLA_FFI_Api,
        ctx: *mut XLA_FFI_InvokeContext,
        extension_type: i64,
    ) -> Option<(*mut super::XLA_FFI_Error, *const ExtensionHeader)> {
        #[cfg(not(xla_ffi_header_legacy))]
        {
            let end = core::mem::offset_of!(super::XLA_FFI_Api, XLA_FFI_InvokeContext_FindExtension)
                + core::mem::size_of::<usize>();
            // SAFETY: `struct_size` is the first field of every table (caller's promise).
            if unsafe { core::ptr::addr_of!((*api).struct_size).read() } < end {
                return None;
            }
            // SAFETY: the slot ends within the table's `struct_size` bytes.
            let f = unsafe { core::ptr::addr_of!((*api).XLA_FFI_InvokeContext_FindExtension).read() }?;
            let mut args = FindExtensionArgs {
                struct_size: FindExtensionArgs_STRUCT_SIZE as usize,
                extension_start: core::ptr::null_mut(),
                ctx,
                extension_type,
                extension: core::ptr::null(),
            };
            // SAFETY: the runtime's own function, with fully initialised args of the
            // header's struct size and the call's context.
            let err = unsafe { f(&mut args) };
            Some((err, args.extension))
        }
        #[cfg(xla_ffi_header_legacy)]
        {
            let _ = (api, ctx, extension_type);
            None
        }
    }

    /// The type of API slot 1 (`Error_GetDetails`, or `Error_GetMessage` in 0.3).
    pub type ErrorDetailsFn = unsafe extern "C" fn(*mut XLA_FFI_Error_GetDetails_Args);

    /// Puts `f` into API slot 1 (for fake API tables in tests).
    pub fn set_error_details_fn(api: &mut super::XLA_FFI_Api, f: ErrorDetailsFn) {
        #[cfg(not(xla_ffi_header_legacy))]
        {
            api.XLA_FFI_Error_GetDetails = Some(f);
        }
        #[cfg(xla_ffi_header_legacy)]
        {
            api.XLA_FFI_Error_GetMessage = Some(f);
        }
    }

    /// Writes the `errc` out field where this header has one (for fake API tables).
    pub fn set_error_details_code(args: &mut XLA_FFI_Error_GetDetails_Args, code: u32) {
        #[cfg(not(xla_ffi_header_legacy))]
        {
            args.errc = code;
        }
        let _ = (args, code);
    }

    /// Whether `XLA_FFI_Error_GetDetails_Args` has the `errc` out field (0.4+ headers).
    pub const HAS_ERROR_DETAILS: bool = cfg!(not(xla_ffi_header_legacy));

    /// Reads the error message (and code, where this header has it) through the
    /// API's slot 1, which is `Error_GetDetails` in 0.4+ and `Error_GetMessage` in 0.3.
    ///
    /// Returns `(message pointer, errc)`. On a 0.3 runtime `errc` is never written, so
    /// it is pre-set to INTERNAL, as XLA's own C++ wrapper does.
    ///
    /// # Safety
    /// `api` must be a valid API table and `error` an error that it created and that
    /// has not been destroyed. The message pointer lives until the error is destroyed.
    pub unsafe fn error_details(
        api: *const super::XLA_FFI_Api,
        error: *mut super::XLA_FFI_Error,
    ) -> (*const core::ffi::c_char, u32) {
        // SAFETY: the caller promises `api` is a valid table; the args struct is
        // plain data, fully initialised here (zeroed, then every input field set).
        unsafe {
            let mut args: XLA_FFI_Error_GetDetails_Args = core::mem::zeroed();
            args.struct_size = XLA_FFI_Error_GetDetails_Args_STRUCT_SIZE as usize;
            args.error = error;
            #[cfg(not(xla_ffi_header_legacy))]
            {
                args.errc = super::XLA_FFI_Error_Code_INTERNAL;
                match (*api).XLA_FFI_Error_GetDetails {
                    Some(f) => f(&mut args),
                    None => return (core::ptr::null(), super::XLA_FFI_Error_Code_INTERNAL),
                }
                (args.message, args.errc)
            }
            #[cfg(xla_ffi_header_legacy)]
            {
                match (*api).XLA_FFI_Error_GetMessage {
                    Some(f) => f(&mut args),
                    None => return (core::ptr::null(), super::XLA_FFI_Error_Code_INTERNAL),
                }
                (args.message, super::XLA_FFI_Error_Code_INTERNAL)
            }
        }
    }
}
