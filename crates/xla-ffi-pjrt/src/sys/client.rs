//! The part of the PJRT C API (`xla/pjrt/c/pjrt_c_api.h`) that a client needs:
//! the `PJRT_Api` function table up to `PJRT_ExecuteContext_Destroy`, and the
//! argument structs of the calls `crate::client` makes.
//!
//! Declared from the header that `xla-cpu-pjrt` 0.0.1 ships (PJRT API 0.81); the
//! table and every argument struct only grow at their end from one minor version to
//! the next, so these prefixes hold for the 0.106 and 0.115 plugins as well. A
//! plugin refuses an argument struct shorter than its own (`Unexpected ... size`),
//! so each struct here carries every field up to the newest one we know, and is
//! zeroed before use: a field a plugin does not know is never read, a field we do
//! not set is zero (its documented default).
#![allow(non_camel_case_types, non_snake_case, dead_code)]

use std::ffi::{c_char, c_int, c_void};
use std::mem::offset_of;

/// An opaque PJRT object.
#[repr(C)]
pub struct PJRT_Error {
    _private: [u8; 0],
}
macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        /// An opaque PJRT object.
        #[repr(C)]
        pub struct $name { _private: [u8; 0] }
    )*};
}
opaque!(
    PJRT_Client,
    PJRT_Device,
    PJRT_Memory,
    PJRT_Event,
    PJRT_Executable,
    PJRT_LoadedExecutable,
    PJRT_Buffer,
    PJRT_ExecuteContext,
    PJRT_Buffer_MemoryLayout,
);

/// `PJRT_Extension_Base`: the head of every extension in the chain of `PJRT_Api`.
#[repr(C)]
pub struct PJRT_Extension_Base {
    pub struct_size: usize,
    pub type_: c_int,
    pub next: *mut PJRT_Extension_Base,
}

/// `PJRT_Api_Version`.
#[repr(C)]
pub struct PJRT_Api_Version {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub major_version: c_int,
    pub minor_version: c_int,
}

/// A slot of the table that this crate never calls.
pub type Slot = Option<unsafe extern "C" fn()>;
/// A slot that takes one argument struct and returns an error or null.
pub type Call<A> = Option<unsafe extern "C" fn(*mut A) -> *mut PJRT_Error>;

/// `PJRT_Api`, up to `PJRT_ExecuteContext_Destroy` (every field before it is in
/// the header's order; `struct_size` says how many the plugin has).
#[repr(C)]
pub struct PJRT_Api {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub pjrt_api_version: PJRT_Api_Version,

    pub PJRT_Error_Destroy: Option<unsafe extern "C" fn(*mut PJRT_Error_Destroy_Args)>,
    pub PJRT_Error_Message: Option<unsafe extern "C" fn(*mut PJRT_Error_Message_Args)>,
    pub PJRT_Error_GetCode: Call<PJRT_Error_GetCode_Args>,

    pub PJRT_Plugin_Initialize: Call<PJRT_Plugin_Initialize_Args>,
    pub PJRT_Plugin_Attributes: Call<PJRT_Plugin_Attributes_Args>,

    pub PJRT_Event_Destroy: Call<PJRT_Event_Destroy_Args>,
    pub PJRT_Event_IsReady: Slot,
    pub PJRT_Event_Error: Slot,
    pub PJRT_Event_Await: Call<PJRT_Event_Await_Args>,
    pub PJRT_Event_OnReady: Slot,

    pub PJRT_Client_Create: Call<PJRT_Client_Create_Args>,
    pub PJRT_Client_Destroy: Call<PJRT_Client_Destroy_Args>,
    pub PJRT_Client_PlatformName: Call<PJRT_Client_PlatformName_Args>,
    pub PJRT_Client_ProcessIndex: Slot,
    pub PJRT_Client_PlatformVersion: Slot,
    pub PJRT_Client_Devices: Slot,
    pub PJRT_Client_AddressableDevices: Call<PJRT_Client_AddressableDevices_Args>,
    pub PJRT_Client_LookupDevice: Slot,
    pub PJRT_Client_LookupAddressableDevice: Slot,
    pub PJRT_Client_AddressableMemories: Slot,
    pub PJRT_Client_Compile: Call<PJRT_Client_Compile_Args>,
    pub PJRT_Client_DefaultDeviceAssignment: Slot,
    pub PJRT_Client_BufferFromHostBuffer: Call<PJRT_Client_BufferFromHostBuffer_Args>,

    pub PJRT_DeviceDescription_Id: Slot,
    pub PJRT_DeviceDescription_ProcessIndex: Slot,
    pub PJRT_DeviceDescription_Attributes: Slot,
    pub PJRT_DeviceDescription_Kind: Slot,
    pub PJRT_DeviceDescription_DebugString: Slot,
    pub PJRT_DeviceDescription_ToString: Slot,

    pub PJRT_Device_GetDescription: Slot,
    pub PJRT_Device_IsAddressable: Slot,
    pub PJRT_Device_LocalHardwareId: Slot,
    pub PJRT_Device_AddressableMemories: Slot,
    pub PJRT_Device_DefaultMemory: Slot,
    pub PJRT_Device_MemoryStats: Slot,

    pub PJRT_Memory_Id: Slot,
    pub PJRT_Memory_Kind: Slot,
    pub PJRT_Memory_DebugString: Slot,
    pub PJRT_Memory_ToString: Slot,
    pub PJRT_Memory_AddressableByDevices: Slot,

    pub PJRT_Executable_Destroy: Call<PJRT_Executable_Destroy_Args>,
    pub PJRT_Executable_Name: Slot,
    pub PJRT_Executable_NumReplicas: Slot,
    pub PJRT_Executable_NumPartitions: Slot,
    pub PJRT_Executable_NumOutputs: Call<PJRT_Executable_NumOutputs_Args>,
    pub PJRT_Executable_SizeOfGeneratedCodeInBytes: Slot,
    pub PJRT_Executable_GetCostAnalysis: Slot,
    pub PJRT_Executable_OutputMemoryKinds: Slot,
    pub PJRT_Executable_OptimizedProgram: Call<PJRT_Executable_OptimizedProgram_Args>,
    pub PJRT_Executable_Serialize: Slot,

    pub PJRT_LoadedExecutable_Destroy: Call<PJRT_LoadedExecutable_Destroy_Args>,
    pub PJRT_LoadedExecutable_GetExecutable: Call<PJRT_LoadedExecutable_GetExecutable_Args>,
    pub PJRT_LoadedExecutable_AddressableDevices: Slot,
    pub PJRT_LoadedExecutable_Delete: Slot,
    pub PJRT_LoadedExecutable_IsDeleted: Slot,
    pub PJRT_LoadedExecutable_Execute: Call<PJRT_LoadedExecutable_Execute_Args>,
    pub PJRT_Executable_DeserializeAndLoad: Slot,
    pub PJRT_LoadedExecutable_Fingerprint: Slot,

    pub PJRT_Buffer_Destroy: Call<PJRT_Buffer_Destroy_Args>,
    pub PJRT_Buffer_ElementType: Call<PJRT_Buffer_ElementType_Args>,
    pub PJRT_Buffer_Dimensions: Call<PJRT_Buffer_Dimensions_Args>,
    pub PJRT_Buffer_UnpaddedDimensions: Slot,
    pub PJRT_Buffer_DynamicDimensionIndices: Slot,
    pub PJRT_Buffer_GetMemoryLayout: Slot,
    pub PJRT_Buffer_OnDeviceSizeInBytes: Slot,
    pub PJRT_Buffer_Device: Slot,
    pub PJRT_Buffer_Memory: Slot,
    pub PJRT_Buffer_Delete: Slot,
    pub PJRT_Buffer_IsDeleted: Slot,
    pub PJRT_Buffer_CopyToDevice: Slot,
    pub PJRT_Buffer_ToHostBuffer: Call<PJRT_Buffer_ToHostBuffer_Args>,
    pub PJRT_Buffer_IsOnCpu: Slot,
    pub PJRT_Buffer_ReadyEvent: Slot,
    pub PJRT_Buffer_UnsafePointer: Slot,
    pub PJRT_Buffer_IncreaseExternalReferenceCount: Slot,
    pub PJRT_Buffer_DecreaseExternalReferenceCount: Slot,
    pub PJRT_Buffer_OpaqueDeviceMemoryDataPointer: Slot,

    pub PJRT_CopyToDeviceStream_Destroy: Slot,
    pub PJRT_CopyToDeviceStream_AddChunk: Slot,
    pub PJRT_CopyToDeviceStream_TotalBytes: Slot,
    pub PJRT_CopyToDeviceStream_GranuleSize: Slot,
    pub PJRT_CopyToDeviceStream_CurrentBytes: Slot,

    pub PJRT_TopologyDescription_Create: Slot,
    pub PJRT_TopologyDescription_Destroy: Slot,
    pub PJRT_TopologyDescription_PlatformName: Slot,
    pub PJRT_TopologyDescription_PlatformVersion: Slot,
    pub PJRT_TopologyDescription_GetDeviceDescriptions: Slot,
    pub PJRT_TopologyDescription_Serialize: Slot,
    pub PJRT_TopologyDescription_Attributes: Slot,

    pub PJRT_Compile: Slot,

    pub PJRT_Executable_OutputElementTypes: Slot,
    pub PJRT_Executable_OutputDimensions: Slot,

    pub PJRT_Buffer_CopyToMemory: Slot,

    pub PJRT_Client_CreateViewOfDeviceBuffer: Slot,

    pub PJRT_Executable_Fingerprint: Slot,

    pub PJRT_Client_TopologyDescription: Slot,

    pub PJRT_Executable_GetCompiledMemoryStats: Slot,

    pub PJRT_Memory_Kind_Id: Slot,

    pub PJRT_ExecuteContext_Create: Call<PJRT_ExecuteContext_Create_Args>,
    pub PJRT_ExecuteContext_Destroy: Call<PJRT_ExecuteContext_Destroy_Args>,
}

/// The size of the part of `PJRT_Api` declared here: a plugin whose
/// `struct_size` is smaller is refused before the table is read.
pub const PJRT_API_PREFIX_SIZE: usize = size_of::<PJRT_Api>();

/// The bytes of `PJRT_Api` up to and including the slot at `offset`.
pub const fn slot_end(offset: usize) -> usize {
    offset + size_of::<Slot>()
}

/// Offsets of the slots this crate calls (for the `struct_size` check).
pub const EXECUTE_CONTEXT_DESTROY_END: usize = slot_end(offset_of!(PJRT_Api, PJRT_ExecuteContext_Destroy));

/// `PJRT_Error_Code` values (absl status codes).
pub type PJRT_Error_Code = c_int;

/// `PJRT_Buffer_Type` values used by [`crate::client::ElementType`].
pub type PJRT_Buffer_Type = c_int;

/// `PJRT_HostBufferSemantics_kImmutableOnlyDuringCall`: the plugin copies the
/// host data before `BufferFromHostBuffer` returns.
pub const PJRT_HOST_BUFFER_IMMUTABLE_ONLY_DURING_CALL: c_int = 0;

/// `PJRT_NamedValue_Type`.
pub const PJRT_NAMED_VALUE_STRING: c_int = 0;
pub const PJRT_NAMED_VALUE_INT64: c_int = 1;
pub const PJRT_NAMED_VALUE_INT64_LIST: c_int = 2;

#[repr(C)]
pub struct PJRT_Error_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub error: *mut PJRT_Error,
}

#[repr(C)]
pub struct PJRT_Error_Message_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub error: *const PJRT_Error,
    pub message: *const c_char,
    pub message_size: usize,
}

#[repr(C)]
pub struct PJRT_Error_GetCode_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub error: *const PJRT_Error,
    pub code: PJRT_Error_Code,
}

#[repr(C)]
pub struct PJRT_Plugin_Initialize_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
}

/// `PJRT_NamedValue`: the value is a union of a pointer, an `int64_t`, a
/// `float` and a `bool`; it is read as the pointer-sized word it occupies.
#[repr(C)]
pub struct PJRT_NamedValue {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub name: *const c_char,
    pub name_size: usize,
    pub type_: c_int,
    pub value: u64,
    pub value_size: usize,
}

#[repr(C)]
pub struct PJRT_Plugin_Attributes_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub attributes: *const PJRT_NamedValue,
    pub num_attributes: usize,
}

#[repr(C)]
pub struct PJRT_Event_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub event: *mut PJRT_Event,
}

#[repr(C)]
pub struct PJRT_Event_Await_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub event: *mut PJRT_Event,
}

#[repr(C)]
pub struct PJRT_Client_Create_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub create_options: *const PJRT_NamedValue,
    pub num_options: usize,
    pub kv_get_callback: *mut c_void,
    pub kv_get_user_arg: *mut c_void,
    pub kv_put_callback: *mut c_void,
    pub kv_put_user_arg: *mut c_void,
    pub client: *mut PJRT_Client,
    pub kv_try_get_callback: *mut c_void,
    pub kv_try_get_user_arg: *mut c_void,
}

#[repr(C)]
pub struct PJRT_Client_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub client: *mut PJRT_Client,
}

#[repr(C)]
pub struct PJRT_Client_PlatformName_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub client: *mut PJRT_Client,
    pub platform_name: *const c_char,
    pub platform_name_size: usize,
}

#[repr(C)]
pub struct PJRT_Client_AddressableDevices_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub client: *mut PJRT_Client,
    pub addressable_devices: *const *mut PJRT_Device,
    pub num_addressable_devices: usize,
}

#[repr(C)]
pub struct PJRT_Program {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub code: *mut c_char,
    pub code_size: usize,
    pub format: *const c_char,
    pub format_size: usize,
}

#[repr(C)]
pub struct PJRT_Client_Compile_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub client: *mut PJRT_Client,
    pub program: *const PJRT_Program,
    pub compile_options: *const c_char,
    pub compile_options_size: usize,
    pub executable: *mut PJRT_LoadedExecutable,
}

#[repr(C)]
pub struct PJRT_Client_BufferFromHostBuffer_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub client: *mut PJRT_Client,
    pub data: *const c_void,
    pub type_: PJRT_Buffer_Type,
    pub dims: *const i64,
    pub num_dims: usize,
    pub byte_strides: *const i64,
    pub num_byte_strides: usize,
    pub host_buffer_semantics: c_int,
    pub device: *mut PJRT_Device,
    pub memory: *mut PJRT_Memory,
    pub device_layout: *mut PJRT_Buffer_MemoryLayout,
    pub done_with_host_buffer: *mut PJRT_Event,
    pub buffer: *mut PJRT_Buffer,
}

#[repr(C)]
pub struct PJRT_LoadedExecutable_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub executable: *mut PJRT_LoadedExecutable,
}

#[repr(C)]
pub struct PJRT_LoadedExecutable_GetExecutable_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub loaded_executable: *mut PJRT_LoadedExecutable,
    pub executable: *mut PJRT_Executable,
}

#[repr(C)]
pub struct PJRT_Executable_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub executable: *mut PJRT_Executable,
}

#[repr(C)]
pub struct PJRT_Executable_NumOutputs_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub executable: *mut PJRT_Executable,
    pub num_outputs: usize,
}

/// `PJRT_Executable_OptimizedProgram_Args` (PJRT 0.81 as in 0.115): called
/// with `program.code` null, the plugin sets `code_size` (and `format`); called
/// again with `code_size` writable bytes, it writes the serialized module there.
#[repr(C)]
pub struct PJRT_Executable_OptimizedProgram_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub executable: *mut PJRT_Executable,
    pub program: *mut PJRT_Program,
}

#[repr(C)]
pub struct PJRT_ExecuteOptions {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub send_callbacks: *mut c_void,
    pub recv_callbacks: *mut c_void,
    pub num_send_ops: usize,
    pub num_recv_ops: usize,
    pub launch_id: c_int,
    pub non_donatable_input_indices: *const i64,
    pub num_non_donatable_input_indices: usize,
    pub context: *mut PJRT_ExecuteContext,
    pub call_location: *const c_char,
    pub num_tasks: usize,
    pub task_ids: *mut c_int,
    pub incarnation_ids: *mut i64,
}

#[repr(C)]
pub struct PJRT_LoadedExecutable_Execute_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub executable: *mut PJRT_LoadedExecutable,
    pub options: *mut PJRT_ExecuteOptions,
    pub argument_lists: *const *const *mut PJRT_Buffer,
    pub num_devices: usize,
    pub num_args: usize,
    pub output_lists: *const *mut *mut PJRT_Buffer,
    pub device_complete_events: *mut *mut PJRT_Event,
    pub execute_device: *mut PJRT_Device,
}

#[repr(C)]
pub struct PJRT_Buffer_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub buffer: *mut PJRT_Buffer,
}

#[repr(C)]
pub struct PJRT_Buffer_ElementType_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub buffer: *mut PJRT_Buffer,
    pub type_: PJRT_Buffer_Type,
}

#[repr(C)]
pub struct PJRT_Buffer_Dimensions_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub buffer: *mut PJRT_Buffer,
    pub dims: *const i64,
    pub num_dims: usize,
}

#[repr(C)]
pub struct PJRT_Buffer_ToHostBuffer_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub src: *mut PJRT_Buffer,
    pub host_layout: *mut PJRT_Buffer_MemoryLayout,
    pub dst: *mut c_void,
    pub dst_size: usize,
    pub event: *mut PJRT_Event,
}

#[repr(C)]
pub struct PJRT_ExecuteContext_Create_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub context: *mut PJRT_ExecuteContext,
}

#[repr(C)]
pub struct PJRT_ExecuteContext_Destroy_Args {
    pub struct_size: usize,
    pub extension_start: *mut PJRT_Extension_Base,
    pub context: *mut PJRT_ExecuteContext,
}

/// A zeroed argument struct with its `struct_size` set: every PJRT argument
/// struct starts with `size_t struct_size`, and all-zero is a valid value of
/// each (null pointers, zero counts, `None` slots).
pub fn args<A: ZeroedArgs>() -> A {
    A::zeroed_with_size()
}

/// Argument structs that are valid when zeroed (raw pointers, integers, `Option`
/// of function pointers) and start with `struct_size`.
pub trait ZeroedArgs: Sized {
    /// The zeroed struct with `struct_size = size_of::<Self>()`.
    fn zeroed_with_size() -> Self;
}

macro_rules! zeroed_args {
    ($($name:ident),* $(,)?) => {$(
        impl ZeroedArgs for $name {
            fn zeroed_with_size() -> Self {
                // SAFETY: every field of this struct is a raw pointer, an integer or
                // an `Option` of a function pointer, for all of which all-zero bytes
                // are a valid value (null, 0, `None`).
                let mut value: Self = unsafe { std::mem::zeroed() };
                value.struct_size = size_of::<Self>();
                value
            }
        }
    )*};
}
zeroed_args!(
    PJRT_Error_Destroy_Args,
    PJRT_Error_Message_Args,
    PJRT_Error_GetCode_Args,
    PJRT_Plugin_Initialize_Args,
    PJRT_Plugin_Attributes_Args,
    PJRT_Event_Destroy_Args,
    PJRT_Event_Await_Args,
    PJRT_Client_Create_Args,
    PJRT_Client_Destroy_Args,
    PJRT_Client_PlatformName_Args,
    PJRT_Client_AddressableDevices_Args,
    PJRT_Program,
    PJRT_Client_Compile_Args,
    PJRT_Client_BufferFromHostBuffer_Args,
    PJRT_LoadedExecutable_Destroy_Args,
    PJRT_LoadedExecutable_GetExecutable_Args,
    PJRT_Executable_Destroy_Args,
    PJRT_Executable_NumOutputs_Args,
    PJRT_Executable_OptimizedProgram_Args,
    PJRT_ExecuteOptions,
    PJRT_LoadedExecutable_Execute_Args,
    PJRT_Buffer_Destroy_Args,
    PJRT_Buffer_ElementType_Args,
    PJRT_Buffer_Dimensions_Args,
    PJRT_Buffer_ToHostBuffer_Args,
    PJRT_ExecuteContext_Create_Args,
    PJRT_ExecuteContext_Destroy_Args,
);

#[cfg(test)]
mod tests {
    use super::*;

    /// Offsets printed by a C program built against the 0.81 header (LP64): the table's first slot
    /// follows the 24-byte version struct; `PJRT_ExecuteContext_Destroy` is the
    /// 100th slot.
    #[test]
    fn table_offsets_match_the_header() {
        assert_eq!(offset_of!(PJRT_Api, PJRT_Error_Destroy), 40);
        assert_eq!(offset_of!(PJRT_Api, PJRT_Client_Create), 40 + 10 * 8);
        assert_eq!(offset_of!(PJRT_Api, PJRT_Client_Compile), 40 + 20 * 8);
        assert_eq!(offset_of!(PJRT_Api, PJRT_Executable_OptimizedProgram), 40 + 48 * 8);
        assert_eq!(offset_of!(PJRT_Api, PJRT_LoadedExecutable_Execute), 40 + 55 * 8);
        assert_eq!(offset_of!(PJRT_Api, PJRT_Buffer_ToHostBuffer), 40 + 70 * 8);
        assert_eq!(offset_of!(PJRT_Api, PJRT_ExecuteContext_Create), 40 + 98 * 8);
        assert_eq!(EXECUTE_CONTEXT_DESTROY_END, 40 + 100 * 8);
    }

    #[test]
    /// `sizeof` of each struct, printed by a C program built against the 0.81 header.
    fn argument_struct_sizes_match_the_header() {
        assert_eq!(size_of::<PJRT_Client_BufferFromHostBuffer_Args>(), 120);
        assert_eq!(size_of::<PJRT_ExecuteOptions>(), 112);
        assert_eq!(size_of::<PJRT_LoadedExecutable_Execute_Args>(), 80);
        assert_eq!(size_of::<PJRT_Client_Create_Args>(), 88);
        assert_eq!(size_of::<PJRT_NamedValue>(), 56);
        assert_eq!(size_of::<PJRT_Buffer_ToHostBuffer_Args>(), 56);
        assert_eq!(size_of::<PJRT_Client_Compile_Args>(), 56);
        assert_eq!(size_of::<PJRT_Executable_OptimizedProgram_Args>(), 32);
        assert_eq!(size_of::<PJRT_Program>(), 48);
    }
}
