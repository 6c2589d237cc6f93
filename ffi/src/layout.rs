//! The hand declarations (`abi`) against bindgen's output (`generated`): sizes,
//! alignments, field offsets and constants. Run with `--features bindgen`, once per
//! supported header (API 0.3 and 0.5).

use core::mem::{align_of, offset_of, size_of};

use crate::{abi, generated as gen};

/// Same size and alignment, and every listed field at the same offset with the same size.
macro_rules! same_layout {
    ($t:ident { $($f:ident),* $(,)? } as $g:ident) => {{
        assert_eq!(size_of::<abi::$t>(), size_of::<gen::$g>(), concat!("size_of ", stringify!($t)));
        assert_eq!(align_of::<abi::$t>(), align_of::<gen::$g>(), concat!("align_of ", stringify!($t)));
        $(
            assert_eq!(
                offset_of!(abi::$t, $f),
                offset_of!(gen::$g, $f),
                concat!("offset_of ", stringify!($t), ".", stringify!($f))
            );
        )*
    }};
    ($t:ident { $($f:ident),* $(,)? }) => {{
        assert_eq!(size_of::<abi::$t>(), size_of::<gen::$t>(), concat!("size_of ", stringify!($t)));
        assert_eq!(align_of::<abi::$t>(), align_of::<gen::$t>(), concat!("align_of ", stringify!($t)));
        $(
            assert_eq!(
                offset_of!(abi::$t, $f),
                offset_of!(gen::$t, $f),
                concat!("offset_of ", stringify!($t), ".", stringify!($f))
            );
            assert_eq!(
                field_size(|v: &abi::$t| &v.$f),
                field_size(|v: &gen::$t| &v.$f),
                concat!("size of field ", stringify!($t), ".", stringify!($f))
            );
        )*
    }};
}

/// Equal constants (compared as i128, whatever their C type).
macro_rules! same_const {
    ($($c:ident),* $(,)?) => {{
        $( assert_eq!(abi::$c as i128, gen::$c as i128, stringify!($c)); )*
    }};
}

fn field_size<T, F>(_: impl Fn(&T) -> &F) -> usize {
    size_of::<F>()
}

#[test]
fn structs_common_to_api_0_3_and_0_5() {
    same_layout!(XLA_FFI_Api_Version { struct_size, extension_start, major_version, minor_version });
    same_layout!(XLA_FFI_Error_Create_Args { struct_size, extension_start, message, errc });
    same_layout!(XLA_FFI_Error_Destroy_Args { struct_size, extension_start, error });
    same_layout!(XLA_FFI_Buffer { struct_size, extension_start, dtype, data, rank, dims });
    same_layout!(XLA_FFI_ByteSpan { ptr, len });
    same_layout!(XLA_FFI_Scalar { dtype, value });
    same_layout!(XLA_FFI_Array { dtype, size, data });
    same_layout!(XLA_FFI_TypeId { type_id });
    same_layout!(XLA_FFI_TypeInfo { struct_size, extension_start, deleter });
    same_layout!(XLA_FFI_Future_Create_Args { struct_size, extension_start, future });
    same_layout!(XLA_FFI_Future_SetAvailable_Args { struct_size, extension_start, future });
    same_layout!(XLA_FFI_Future_SetError_Args { struct_size, extension_start, future, error });
    same_layout!(XLA_FFI_Args { struct_size, extension_start, size, types, args });
    same_layout!(XLA_FFI_Rets { struct_size, extension_start, size, types, rets });
    same_layout!(XLA_FFI_Attrs { struct_size, extension_start, size, types, names, attrs });
    same_layout!(XLA_FFI_CallFrame { struct_size, extension_start, api, ctx, stage, args, rets, attrs, future });
    same_layout!(XLA_FFI_Type_Register_Args { struct_size, extension_start, name, type_id, type_info });
    same_layout!(XLA_FFI_State_Set_Args { struct_size, extension_start, ctx, stage, type_id, state });
    same_layout!(XLA_FFI_State_Get_Args { struct_size, extension_start, ctx, stage, type_id, state });
    same_layout!(XLA_FFI_Stream_Get_Args { struct_size, extension_start, ctx, stream });
    same_layout!(XLA_FFI_DeviceMemory_Allocate_Args { struct_size, extension_start, ctx, size, alignment, data });
    same_layout!(XLA_FFI_DeviceMemory_Free_Args { struct_size, extension_start, ctx, size, data });
    same_layout!(XLA_FFI_ThreadPool_Schedule_Args { struct_size, extension_start, ctx, task, data });
    same_layout!(XLA_FFI_ThreadPool_NumThreads_Args { struct_size, extension_start, ctx, num_threads });
    same_layout!(XLA_FFI_RunId_Get_Args { struct_size, extension_start, ctx, run_id });
    same_layout!(XLA_FFI_DeviceOrdinal_Get_Args { struct_size, extension_start, ctx, device_ordinal });
    same_layout!(XLA_FFI_Metadata { struct_size, api_version, traits, state_type_id });
    same_layout!(XLA_FFI_Metadata_Extension { extension_base, metadata });
}

#[test]
fn constants_common_to_api_0_3_and_0_5() {
    same_const!(
        XLA_FFI_API_MAJOR,
        XLA_FFI_Extension_Metadata,
        XLA_FFI_Api_Version_STRUCT_SIZE,
        XLA_FFI_Error_Create_Args_STRUCT_SIZE,
        XLA_FFI_Error_Destroy_Args_STRUCT_SIZE,
        XLA_FFI_Buffer_STRUCT_SIZE,
        XLA_FFI_TypeInfo_STRUCT_SIZE,
        XLA_FFI_Future_Create_Args_STRUCT_SIZE,
        XLA_FFI_Future_SetAvailable_Args_STRUCT_SIZE,
        XLA_FFI_Future_SetError_Args_STRUCT_SIZE,
        XLA_FFI_Args_STRUCT_SIZE,
        XLA_FFI_Rets_STRUCT_SIZE,
        XLA_FFI_Attrs_STRUCT_SIZE,
        XLA_FFI_CallFrame_STRUCT_SIZE,
        XLA_FFI_Type_Register_Args_STRUCT_SIZE,
        XLA_FFI_State_Set_Args_STRUCT_SIZE,
        XLA_FFI_State_Get_Args_STRUCT_SIZE,
        XLA_FFI_Stream_Get_Args_STRUCT_SIZE,
        XLA_FFI_DeviceMemory_Allocate_Args_STRUCT_SIZE,
        XLA_FFI_DeviceMemory_Free_Args_STRUCT_SIZE,
        XLA_FFI_ThreadPool_Schedule_Args_STRUCT_SIZE,
        XLA_FFI_ThreadPool_NumThreads_Args_STRUCT_SIZE,
        XLA_FFI_RunId_Get_Args_STRUCT_SIZE,
        XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE,
        XLA_FFI_Metadata_STRUCT_SIZE,
        XLA_FFI_Metadata_Extension_STRUCT_SIZE,
        XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE,
        XLA_FFI_ArgType_BUFFER,
        XLA_FFI_RetType_BUFFER,
        XLA_FFI_AttrType_ARRAY,
        XLA_FFI_AttrType_DICTIONARY,
        XLA_FFI_AttrType_SCALAR,
        XLA_FFI_AttrType_STRING,
        XLA_FFI_ExecutionStage_INSTANTIATE,
        XLA_FFI_ExecutionStage_PREPARE,
        XLA_FFI_ExecutionStage_INITIALIZE,
        XLA_FFI_ExecutionStage_EXECUTE,
    );
    same_const!(
        XLA_FFI_Error_Code_OK,
        XLA_FFI_Error_Code_CANCELLED,
        XLA_FFI_Error_Code_UNKNOWN,
        XLA_FFI_Error_Code_INVALID_ARGUMENT,
        XLA_FFI_Error_Code_DEADLINE_EXCEEDED,
        XLA_FFI_Error_Code_NOT_FOUND,
        XLA_FFI_Error_Code_ALREADY_EXISTS,
        XLA_FFI_Error_Code_PERMISSION_DENIED,
        XLA_FFI_Error_Code_RESOURCE_EXHAUSTED,
        XLA_FFI_Error_Code_FAILED_PRECONDITION,
        XLA_FFI_Error_Code_ABORTED,
        XLA_FFI_Error_Code_OUT_OF_RANGE,
        XLA_FFI_Error_Code_UNIMPLEMENTED,
        XLA_FFI_Error_Code_INTERNAL,
        XLA_FFI_Error_Code_UNAVAILABLE,
        XLA_FFI_Error_Code_DATA_LOSS,
        XLA_FFI_Error_Code_UNAUTHENTICATED,
    );
    same_const!(
        XLA_FFI_DataType_INVALID,
        XLA_FFI_DataType_PRED,
        XLA_FFI_DataType_S8,
        XLA_FFI_DataType_S16,
        XLA_FFI_DataType_S32,
        XLA_FFI_DataType_S64,
        XLA_FFI_DataType_U8,
        XLA_FFI_DataType_U16,
        XLA_FFI_DataType_U32,
        XLA_FFI_DataType_U64,
        XLA_FFI_DataType_F16,
        XLA_FFI_DataType_F32,
        XLA_FFI_DataType_F64,
        XLA_FFI_DataType_BF16,
        XLA_FFI_DataType_C64,
        XLA_FFI_DataType_C128,
        XLA_FFI_DataType_TOKEN,
        XLA_FFI_DataType_F8E5M2,
        XLA_FFI_DataType_F8E4M3FN,
        XLA_FFI_DataType_F8E4M3B11FNUZ,
        XLA_FFI_DataType_F8E5M2FNUZ,
        XLA_FFI_DataType_F8E4M3FNUZ,
        XLA_FFI_DataType_S4,
        XLA_FFI_DataType_U4,
    );
}

/// The API table: every slot of the 0.3 table sits where the hand declaration
/// (0.5) has it, so a 0.3 runtime's 192-byte table is its prefix.
#[test]
fn api_table_slots() {
    same_layout_prefix();
    #[cfg(not(xla_ffi_header_legacy))]
    {
        same_layout!(XLA_FFI_Api {
            XLA_FFI_Error_GetDetails,
            XLA_FFI_InvokeContext_FindExtension,
            XLA_FFI_CustomOptions_Get
        });
        same_const!(XLA_FFI_Api_STRUCT_SIZE);
    }
    #[cfg(xla_ffi_header_legacy)]
    {
        assert_eq!(
            offset_of!(abi::XLA_FFI_Api, XLA_FFI_Error_GetDetails),
            offset_of!(gen::XLA_FFI_Api, XLA_FFI_Error_GetMessage)
        );
        assert_eq!(
            gen::XLA_FFI_Api_STRUCT_SIZE as usize,
            offset_of!(abi::XLA_FFI_Api, XLA_FFI_InvokeContext_FindExtension)
        );
    }
}

fn same_layout_prefix() {
    macro_rules! same_offsets {
        ($t:ident { $($f:ident),* $(,)? }) => {{
            $( assert_eq!(offset_of!(abi::$t, $f), offset_of!(gen::$t, $f), concat!("offset_of ", stringify!($f))); )*
        }};
    }
    same_offsets!(XLA_FFI_Api {
        struct_size,
        extension_start,
        api_version,
        internal_api,
        XLA_FFI_Error_Create,
        XLA_FFI_Error_Destroy,
        XLA_FFI_Handler_Register,
        XLA_FFI_Stream_Get,
        XLA_FFI_Type_Register,
        XLA_FFI_State_Set,
        XLA_FFI_State_Get,
        XLA_FFI_DeviceMemory_Allocate,
        XLA_FFI_DeviceMemory_Free,
        XLA_FFI_ThreadPool_Schedule,
        XLA_FFI_ThreadPool_NumThreads,
        XLA_FFI_Future_Create,
        XLA_FFI_Future_SetAvailable,
        XLA_FFI_Future_SetError,
        XLA_FFI_RunId_Get,
        XLA_FFI_DeviceOrdinal_Get,
    });
    #[cfg(not(xla_ffi_header_legacy))]
    same_offsets!(XLA_FFI_Api { XLA_FFI_InvokeContext_Get });
    #[cfg(xla_ffi_header_legacy)]
    assert_eq!(
        offset_of!(abi::XLA_FFI_Api, XLA_FFI_InvokeContext_Get),
        offset_of!(gen::XLA_FFI_Api, XLA_FFI_ExecutionContext_Get)
    );
}

/// Structs whose 0.3 form differs: the 0.5 form is checked against the 0.5 header,
/// and the 0.3 form must be a prefix of it.
#[test]
fn structs_that_changed_after_api_0_3() {
    #[cfg(not(xla_ffi_header_legacy))]
    {
        same_layout!(XLA_FFI_InvokeContext_Get_Args { struct_size, extension_start, ctx, type_id, data });
        same_const!(XLA_FFI_InvokeContext_Get_Args_STRUCT_SIZE);
        same_layout!(XLA_FFI_InternalExtension { struct_size, type_, next });
        same_layout!(XLA_FFI_ExtensionId { extension_type, major_version, minor_version });
        same_layout!(XLA_FFI_Extension { struct_size, id, next });
        same_layout!(XLA_FFI_Error_GetDetails_Args { struct_size, extension_start, error, message, errc });
        same_layout!(XLA_FFI_Handler_Bundle { instantiate, prepare, initialize, execute, record });
        same_layout!(XLA_FFI_Handler_Register_Args { struct_size, extension_start, name, platform, bundle, traits });
        same_layout!(XLA_FFI_InvokeContext_FindExtension_Args {
            struct_size,
            extension_start,
            ctx,
            extension_type,
            extension
        });
        same_layout!(XLA_FFI_CustomOptions_Get_Args { struct_size, extension_start, ctx, attrs });
        same_const!(
            XLA_FFI_API_MINOR,
            XLA_FFI_InternalExtension_STRUCT_SIZE,
            XLA_FFI_ExtensionId_STRUCT_SIZE,
            XLA_FFI_Extension_STRUCT_SIZE,
            XLA_FFI_Error_GetDetails_Args_STRUCT_SIZE,
            XLA_FFI_Handler_Register_Args_STRUCT_SIZE,
            XLA_FFI_InvokeContext_FindExtension_Args_STRUCT_SIZE,
            XLA_FFI_CustomOptions_Get_Args_STRUCT_SIZE,
            XLA_FFI_ExecutionStage_RECORD,
            XLA_FFI_DataType_S1,
            XLA_FFI_DataType_S2,
            XLA_FFI_DataType_U1,
            XLA_FFI_DataType_U2,
            XLA_FFI_DataType_F8E3M4,
            XLA_FFI_DataType_F8E4M3,
            XLA_FFI_DataType_F4E2M1FN,
            XLA_FFI_DataType_F8E8M0FNU,
        );
    }
    #[cfg(xla_ffi_header_legacy)]
    {
        // 0.3: `Extension_Base` has the internal extension's layout.
        assert_eq!(size_of::<abi::XLA_FFI_InternalExtension>(), size_of::<gen::XLA_FFI_Extension_Base>());
        assert_eq!(offset_of!(abi::XLA_FFI_InternalExtension, type_), offset_of!(gen::XLA_FFI_Extension_Base, type_));
        assert_eq!(offset_of!(abi::XLA_FFI_InternalExtension, next), offset_of!(gen::XLA_FFI_Extension_Base, next));
        // 0.3: `GetMessage_Args` is `GetDetails_Args` without `errc`; the runtime checks
        // `struct_size >=` its own, so sending the larger 0.5 size is accepted.
        assert_eq!(
            offset_of!(abi::XLA_FFI_Error_GetDetails_Args, message),
            offset_of!(gen::XLA_FFI_Error_GetMessage_Args, message)
        );
        assert_eq!(
            offset_of!(abi::XLA_FFI_Error_GetDetails_Args, error),
            offset_of!(gen::XLA_FFI_Error_GetMessage_Args, error)
        );
        assert!(
            abi::XLA_FFI_Error_GetDetails_Args_STRUCT_SIZE >= gen::XLA_FFI_Error_GetMessage_Args_STRUCT_SIZE as u32
        );
        // 0.3: the bundle has no `record`; the other four sit where they do in 0.5.
        assert_eq!(offset_of!(abi::XLA_FFI_Handler_Bundle, execute), offset_of!(gen::XLA_FFI_Handler_Bundle, execute));
        assert!(abi::XLA_FFI_API_MINOR > gen::XLA_FFI_API_MINOR);
        // 0.3: `ExecutionContext_Get_Args` is the later `InvokeContext_Get_Args`.
        same_layout!(XLA_FFI_InvokeContext_Get_Args { struct_size, extension_start, ctx, type_id, data }
            as XLA_FFI_ExecutionContext_Get_Args);
        // 0.3 has no custom options; `compat` declares their args struct as 0.5 does.
        type Co = crate::compat::CustomOptionsGetArgs;
        type CoAbi = abi::XLA_FFI_CustomOptions_Get_Args;
        assert_eq!((size_of::<Co>(), align_of::<Co>()), (size_of::<CoAbi>(), align_of::<CoAbi>()));
        assert_eq!(offset_of!(Co, ctx), offset_of!(CoAbi, ctx));
        assert_eq!(offset_of!(Co, attrs), offset_of!(CoAbi, attrs));
    }
}
