//! The raw layer's top: XLA's API table ([`ApiTable`]) and call frame ([`Frame`]).
//!
//! `open` reads an `XLA_FFI_CallFrame`: it checks the frame's `struct_size` and those
//! of its args, rets and attrs structs, answers XLA's metadata query (API version,
//! traits, state type id), checks the execution stage, and returns a [`Frame`] whose
//! operands and results are read one at a time by [`Frame::buffer`] (through
//! `raw.rs`, which reads `XLA_FFI_Buffer` and the attribute structs).
//!
//! Who reads what of XLA's raw structures:
//! * this module reads the call frame, the API table's `struct_size` and version,
//!   the metadata extension, and creates and destroys `XLA_FFI_Error`s;
//! * `raw.rs` reads `XLA_FFI_Buffer`, `XLA_FFI_Attrs`, `XLA_FFI_Scalar`,
//!   `XLA_FFI_Array` and `XLA_FFI_ByteSpan`; the views above (`buffer.rs`,
//!   `attr.rs`) read only the data those describe (elements, attribute values);
//! * API functions are reached only through `api_slot!` (below), which checks the
//!   table's `struct_size` first. Its callers, each building the slot's `*_Args`
//!   struct: this module (`XLA_FFI_Error_Create`, `XLA_FFI_Error_Destroy`),
//!   `dispatch.rs` (the host-platform guard: `XLA_FFI_ThreadPool_NumThreads`,
//!   `XLA_FFI_Stream_Get`), `context.rs` (device ordinal, run id, stream, scratch
//!   memory, `XLA_FFI_State_Get`/`Set`, which `state.rs` uses through
//!   [`Context`](crate::Context)) and `pool.rs` (`XLA_FFI_ThreadPool_NumThreads`,
//!   `XLA_FFI_ThreadPool_Schedule`). The slots that the API 0.3 header lacks or
//!   names otherwise (`InvokeContext_Get`, `CustomOptions_Get`,
//!   `InvokeContext_FindExtension`, used by `user_data.rs`, `context.rs` and
//!   `extension.rs`) are reached through `xla_ffi_sys::compat`, which checks the
//!   table's `struct_size` the same way.
//!
//! What every handler symbol does with it is in `dispatch.rs`.

use core::ffi::c_void;
use core::mem::offset_of;
use std::ffi::CString;
use std::panic::catch_unwind;

use xla_ffi_sys as sys;

use crate::error::{Error, ErrorCode, Result};
use crate::panic::{drop_payload, panic_message};
use crate::raw::{self, c_slice, BufferEntry, RawDict};
use crate::site::Role;

/// The lowest FFI API version (major, minor) our handlers need.
///
/// This is what the metadata query reports, *not* the header's version: XLA rejects a
/// handler that reports a newer minor version than the runtime's, so reporting the
/// header's 0.5 would stop a build from loading in jaxlib 0.10 (API 0.3). Everything
/// this crate calls exists in API 0.3, and the slots that came later are reached only
/// after checking `api->struct_size` (see `api_slot!` in `frame.rs`).
pub const MIN_API_VERSION: (i32, i32) = (0, 3);

/// Handler traits reported through the metadata query.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Traits(pub u32);

impl Traits {
    /// No traits.
    pub const NONE: Traits = Traits(0);
    /// The handler may be captured into a command buffer (a CUDA graph): it launches
    /// the same work on every call, does not allocate, and does not look at buffer
    /// contents on the host.
    #[allow(clippy::unnecessary_cast)] // the constant's C type differs between headers
    pub const COMMAND_BUFFER_COMPATIBLE: Traits = Traits(sys::XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE as u32);
}

impl core::ops::BitOr for Traits {
    type Output = Traits;
    fn bitor(self, o: Traits) -> Traits {
        Traits(self.0 | o.0)
    }
}

/// The stage of a handler's life at which XLA calls it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stage {
    /// Once per call site, when the executable is built: may create state.
    Instantiate,
    /// Before execution (GPU only: XLA:CPU never runs it): may create state.
    Prepare,
    /// Before execution, after prepare (GPU only: XLA:CPU never runs it): may
    /// create state.
    Initialize,
    /// Every run.
    Execute,
    /// Command-buffer recording, in place of execute when XLA:GPU captures the op
    /// into a command buffer (a CUDA graph). API 0.4 (the record stage is not in
    /// jaxlib 0.10's API 0.3); GPU only.
    Record,
}

impl Stage {
    pub(crate) fn from_raw(raw: u32) -> Option<Stage> {
        Some(match raw {
            sys::XLA_FFI_ExecutionStage_INSTANTIATE => Stage::Instantiate,
            sys::XLA_FFI_ExecutionStage_PREPARE => Stage::Prepare,
            sys::XLA_FFI_ExecutionStage_INITIALIZE => Stage::Initialize,
            sys::XLA_FFI_ExecutionStage_EXECUTE => Stage::Execute,
            4 => Stage::Record,
            _ => return None,
        })
    }
    pub(crate) fn to_raw(self) -> u32 {
        match self {
            Stage::Instantiate => sys::XLA_FFI_ExecutionStage_INSTANTIATE,
            Stage::Prepare => sys::XLA_FFI_ExecutionStage_PREPARE,
            Stage::Initialize => sys::XLA_FFI_ExecutionStage_INITIALIZE,
            Stage::Execute => sys::XLA_FFI_ExecutionStage_EXECUTE,
            Stage::Record => 4,
        }
    }
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stage::Instantiate => "instantiate",
            Stage::Prepare => "prepare",
            Stage::Initialize => "initialize",
            Stage::Execute => "execute",
            Stage::Record => "record",
        }
    }
}

/// What the [`handler`](crate::handler) macro knows about a handler.
#[doc(hidden)]
#[derive(Debug)]
pub struct HandlerInfo {
    pub target: &'static str,
    /// Whether buffers live in host memory (CPU handlers) or on a device.
    pub host: bool,
    pub stage: Stage,
    pub traits: Traits,
    pub n_args: usize,
    pub n_rets: usize,
    /// `n_args` is a minimum (a `RemainingArgs` parameter).
    pub variadic_args: bool,
    /// `n_rets` is a minimum (a `RemainingRets` parameter).
    pub variadic_rets: bool,
    /// What each parameter takes (optional operands and results; names for messages).
    pub arity: &'static [crate::site::Arity],
    /// The type id of the handler's state, read at metadata time (0 if stateless).
    pub state_type_id: fn() -> i64,
    /// Calls its argument with the name of each attribute the parameters declare
    /// (read only to report an unknown attribute).
    pub attr_names: fn(&mut dyn FnMut(&'static str)),
}

/// A checked view of XLA's API table.
///
/// Only a raw pointer: the runtime's table may be shorter than this header's
/// `XLA_FFI_Api` (jaxlib 0.10's is 192 bytes, the 0.5 header's 208), so a
/// reference to the whole struct would claim memory that is not there. Each field
/// is read on its own, and only after `struct_size` says it exists.
#[derive(Clone, Copy)]
pub(crate) struct ApiTable<'f> {
    raw: *const sys::XLA_FFI_Api,
    _life: core::marker::PhantomData<&'f ()>,
}

/// Reads a function slot of the API table, or `None` when the runtime's table is too
/// short to have it (an older jaxlib) or the slot is empty.
macro_rules! api_slot {
    ($api:expr, $field:ident) => {{
        let api: $crate::frame::ApiTable<'_> = $api;
        let end = core::mem::offset_of!(xla_ffi_sys::XLA_FFI_Api, $field) + core::mem::size_of::<usize>();
        if api.struct_size() >= end {
            // SAFETY: the table holds `struct_size` readable bytes (see `ApiTable`),
            // and this slot ends within them.
            unsafe { core::ptr::addr_of!((*api.ptr()).$field).read() }
        } else {
            None
        }
    }};
}
pub(crate) use api_slot;

/// The first usable API table this process saw, to report errors through when a
/// call frame comes without a usable table of its own.
static FALLBACK_API: core::sync::atomic::AtomicPtr<sys::XLA_FFI_Api> =
    core::sync::atomic::AtomicPtr::new(core::ptr::null_mut());

impl<'f> ApiTable<'f> {
    /// Checks a table: non-null, and long enough to create and destroy errors.
    ///
    /// # Safety
    /// `raw` must be NULL or point to a runtime's API table, at least
    /// `struct_size` bytes long and alive for `'f`.
    unsafe fn new(raw: *const sys::XLA_FFI_Api) -> Option<Self> {
        if raw.is_null() {
            return None;
        }
        let api = ApiTable { raw, _life: core::marker::PhantomData };
        (api.struct_size() >= offset_of!(sys::XLA_FFI_Api, XLA_FFI_Error_Destroy) + 8).then_some(api)
    }

    /// The process's first usable table (see [`FALLBACK_API`]).
    pub(crate) fn fallback() -> Option<ApiTable<'static>> {
        let raw = FALLBACK_API.load(core::sync::atomic::Ordering::Acquire);
        // SAFETY: only tables that passed `new` are stored, and a runtime's table
        // lives for the whole process.
        unsafe { ApiTable::new(raw) }
    }

    pub(crate) fn struct_size(self) -> usize {
        // SAFETY: `struct_size` is the first field of every table.
        unsafe { core::ptr::addr_of!((*self.raw).struct_size).read() }
    }
    pub(crate) fn ptr(self) -> *const sys::XLA_FFI_Api {
        self.raw
    }

    /// The runtime's FFI API version, or (0, 0) if the table is too short to say.
    pub(crate) fn version(self) -> (i32, i32) {
        let end = offset_of!(sys::XLA_FFI_Api, api_version) + core::mem::size_of::<sys::XLA_FFI_Api_Version>();
        if self.struct_size() < end {
            return (0, 0);
        }
        // SAFETY: the version struct lies inside the table's `struct_size` bytes.
        let v = unsafe { core::ptr::addr_of!((*self.raw).api_version).read() };
        (v.major_version, v.minor_version)
    }

    /// Creates an `XLA_FFI_Error` for XLA to own. The code is never OK.
    pub(crate) fn make_error(self, err: &Error) -> *mut sys::XLA_FFI_Error {
        let Some(create) = api_slot!(self, XLA_FFI_Error_Create) else {
            return core::ptr::null_mut();
        };
        let msg = CString::new(err.message().replace('\0', "\\0"))
            .unwrap_or_else(|_| CString::from(c"invalid error message"));
        let mut args = sys::XLA_FFI_Error_Create_Args {
            struct_size: sys::XLA_FFI_Error_Create_Args_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            message: msg.as_ptr(),
            errc: err.code().to_raw(),
        };
        // SAFETY: `create` comes from the runtime's table and the args struct is fully
        // initialised; XLA copies the message before returning.
        unsafe { create(&mut args) }
    }

    /// Takes ownership of an error an API call returned: reads it, destroys it.
    pub(crate) fn take_error(self, raw: *mut sys::XLA_FFI_Error) -> Result<()> {
        if raw.is_null() {
            return Ok(());
        }
        // SAFETY: `raw` was returned by this API table and is destroyed only below; the
        // message is copied out before that.
        let (msg, code) = unsafe { sys::compat::error_details(self.ptr(), raw) };
        let text = if msg.is_null() {
            String::from("unknown XLA error")
        } else {
            // SAFETY: XLA returns a NUL-terminated message that lives until Destroy.
            unsafe { core::ffi::CStr::from_ptr(msg) }.to_string_lossy().into_owned()
        };
        if let Some(destroy) = api_slot!(self, XLA_FFI_Error_Destroy) {
            let mut args = sys::XLA_FFI_Error_Destroy_Args {
                struct_size: sys::XLA_FFI_Error_Destroy_Args_STRUCT_SIZE as usize,
                extension_start: core::ptr::null_mut(),
                error: raw,
            };
            // SAFETY: destroys an error we own, once.
            unsafe { destroy(&mut args) };
        }
        Err(Error::new(ErrorCode::from_raw(code), text))
    }
}

/// A checked view of one call frame, valid for `'f` (the handler call).
pub(crate) struct Frame<'f> {
    pub(crate) api: ApiTable<'f>,
    pub(crate) ctx: *mut sys::compat::XLA_FFI_InvokeContext,
    pub(crate) stage: u32,
    /// The operand entries.
    args: Entries<'f>,
    /// The result entries.
    rets: Entries<'f>,
    /// The call's attributes (struct size checked by `open`); read by [`Frame::attrs`].
    attrs: &'f sys::XLA_FFI_Attrs,
    /// How many entries `attrs` has ([`RawDict::count_sized`]), counted once.
    attr_count: usize,
    /// Buffers are host memory (a CPU handler).
    pub(crate) host: bool,
}

/// The operand or result entries of a frame: `len` entry pointers at `ptrs`, and
/// their kinds at `types`. Kept as pointers and a count, not two slices, so that
/// `open` makes them with a few instructions; `len` is 0 when either array is NULL
/// (an entry without its kind cannot be read, so the frame then counts none) or
/// XLA's size is not positive.
#[derive(Clone, Copy)]
struct Entries<'f> {
    ptrs: *const *mut c_void,
    types: *const u32,
    len: usize,
    _life: core::marker::PhantomData<&'f ()>,
}

impl<'f> Entries<'f> {
    /// XLA's `size` entries at `ptrs` and `types`.
    ///
    /// # Safety
    /// When `size > 0`, `ptrs` (if not NULL) must point to `size` entry pointers and
    /// `types` (if not NULL) to `size` kinds, alive for `'f`.
    #[inline(always)]
    unsafe fn new(ptrs: *const *mut c_void, types: *const u32, size: i64) -> Self {
        let len = if ptrs.is_null() || types.is_null() || size <= 0 { 0 } else { size as usize };
        Entries { ptrs, types, len, _life: core::marker::PhantomData }
    }

    /// Entry `index` and its kind; `None` past the entries.
    #[inline(always)]
    fn get(self, index: usize) -> Option<(*mut c_void, u32)> {
        if index >= self.len {
            return None;
        }
        // SAFETY: `index < len`, and `new` has `len` entries at `ptrs` and `len`
        // kinds at `types` (both non-null when `len > 0`).
        unsafe { Some((self.ptrs.add(index).read(), self.types.add(index).read())) }
    }

    /// Copied entries and their kinds (as many of each).
    fn of_copies((ptrs, types): (&'f [*mut c_void], &'f [u32])) -> Self {
        let len = ptrs.len().min(types.len());
        Entries { ptrs: ptrs.as_ptr(), types: types.as_ptr(), len, _life: core::marker::PhantomData }
    }

    /// As two slices of `len` each.
    fn slices(self) -> (&'f [*mut c_void], &'f [u32]) {
        // SAFETY: as `get`: `len` entries and `len` kinds.
        unsafe { (c_slice(self.ptrs, self.len as i64), c_slice(self.types, self.len as i64)) }
    }
}

/// One operand or result entry of a frame, read.
#[derive(Clone, Copy)]
pub(crate) enum Slot<'f> {
    /// No entry at that position.
    Missing,
    /// An entry of another kind than buffer (the raw `XLA_FFI_ArgType`).
    Kind(u32),
    /// A buffer entry that is NULL or malformed (see [`raw::buffer`]).
    Malformed,
    /// A well-formed buffer.
    Buffer(BufferEntry<'f>),
}

impl<'f> Frame<'f> {
    /// How many operands or results the frame has.
    pub(crate) fn count(&self, role: Role) -> usize {
        match role {
            Role::Operand => self.args.len,
            Role::Result => self.rets.len,
        }
    }

    /// The call's attributes, read.
    #[inline(always)]
    pub(crate) fn attrs(&self) -> RawDict<'f> {
        // SAFETY: XLA's attributes, with their names and values, live for the call;
        // `open` (or `from_copies`'s caller) checked the struct's size, and
        // `attr_count` is `count_sized` of it.
        unsafe { RawDict::from_sized(self.attrs, self.attr_count) }
    }

    /// The operand or result at `index`, read.
    #[inline(always)]
    pub(crate) fn buffer(&self, role: Role, index: usize) -> Slot<'f> {
        let entries = match role {
            Role::Operand => self.args,
            Role::Result => self.rets,
        };
        match entries.get(index) {
            Some((ptr, sys::XLA_FFI_ArgType_BUFFER)) => {
                // SAFETY: XLA passes, for an entry of kind BUFFER, NULL or a pointer to
                // an `XLA_FFI_Buffer` alive for the call.
                match unsafe { raw::buffer(ptr) } {
                    Some(b) => Slot::Buffer(b),
                    None => Slot::Malformed,
                }
            }
            Some((_, kind)) => Slot::Kind(kind),
            None => Slot::Missing,
        }
    }
}

pub(crate) enum Entry<'f> {
    /// The metadata query was answered.
    Metadata,
    /// A normal call.
    Call(Frame<'f>),
}

/// Reads the frame. `Err` holds the API table (when there is one) and the error.
///
/// # Safety
/// `raw` must be the call frame XLA passed to the handler, valid for `'f`.
#[inline(always)]
pub(crate) unsafe fn open<'f>(
    raw: *mut sys::XLA_FFI_CallFrame,
    info: &HandlerInfo,
) -> core::result::Result<Entry<'f>, (Option<ApiTable<'f>>, Error)> {
    if raw.is_null() {
        return Err((None, refused(info, Refusal::NullFrame)));
    }
    // SAFETY: XLA passes a valid frame; `struct_size` is the first field of every
    // version of it, and the size is checked before any later field is read.
    let size = unsafe { core::ptr::addr_of!((*raw).struct_size).read() };
    if size < offset_of!(sys::XLA_FFI_CallFrame, ctx) {
        return Err((None, refused(info, Refusal::FrameWithoutTable(size))));
    }
    // SAFETY: within `size`, checked above.
    let api_ptr = unsafe { core::ptr::addr_of!((*raw).api).read() };
    // SAFETY: the runtime's API table holds `struct_size` bytes and outlives every call.
    let Some(api) = (unsafe { ApiTable::new(api_ptr) }) else {
        return Err((None, refused(info, Refusal::UnusableTable)));
    };
    if FALLBACK_API.load(core::sync::atomic::Ordering::Relaxed).is_null() {
        FALLBACK_API.store(api_ptr as *mut _, core::sync::atomic::Ordering::Release);
    }
    if size < sys::XLA_FFI_CallFrame_STRUCT_SIZE as usize {
        return Err((Some(api), refused(info, Refusal::FrameTooSmall(size))));
    }
    // SAFETY: the frame is at least CallFrame_STRUCT_SIZE bytes, so every field up to
    // and including `attrs` is there.
    let frame = unsafe { &*raw };
    if !frame.extension_start.is_null() {
        // SAFETY: a non-null extension chain starts with the internal extension header.
        let ext = unsafe { &*(frame.extension_start as *const sys::compat::XLA_FFI_InternalExtension) };
        if ext.type_ == sys::XLA_FFI_Extension_Metadata {
            // SAFETY: an extension of type Metadata is an XLA_FFI_Metadata_Extension.
            unsafe { answer_metadata(frame.extension_start.cast(), info, api) }.map_err(|e| (Some(api), e))?;
            return Ok(Entry::Metadata);
        }
    }
    // The usual case first, in one compare: the handler's own stage (never the
    // record stage, which needs its own checks below).
    if frame.stage != info.stage.to_raw() || info.stage == Stage::Record {
        check_stage(frame.stage, info, api).map_err(|e| (Some(api), e))?;
    }
    if frame.args.struct_size < sys::XLA_FFI_Args_STRUCT_SIZE as usize
        || frame.rets.struct_size < sys::XLA_FFI_Rets_STRUCT_SIZE as usize
        || frame.attrs.struct_size < sys::XLA_FFI_Attrs_STRUCT_SIZE as usize
    {
        return Err((Some(api), refused(info, Refusal::SmallParts(frame))));
    }
    // SAFETY: XLA provides `size` entries in each array, alive for the call.
    let (args, rets) = unsafe {
        (
            Entries::new(frame.args.args as *const *mut c_void, frame.args.types as *const u32, frame.args.size),
            Entries::new(frame.rets.rets as *const *mut c_void, frame.rets.types as *const u32, frame.rets.size),
        )
    };
    let attr_count = RawDict::count_sized(&frame.attrs);
    Ok(Entry::Call(Frame {
        api,
        ctx: frame.ctx,
        stage: frame.stage,
        args,
        rets,
        attrs: &frame.attrs,
        attr_count,
        host: info.host,
    }))
}

/// Why [`open`] refused a frame (its message is built out of line, in [`refused`]).
#[derive(Clone, Copy)]
enum Refusal<'a> {
    NullFrame,
    FrameWithoutTable(usize),
    UnusableTable,
    FrameTooSmall(usize),
    /// A frame whose args, rets or attrs struct is smaller than this header's (the
    /// frame itself is whole: its size was checked first).
    SmallParts(&'a sys::XLA_FFI_CallFrame),
}

/// The error of a refused frame. Cold and out of line, as every refusal of the
/// decoding layer: the code of the accepting path stays together, which is what a
/// call costs when it starts with its code out of the instruction cache (inside
/// XLA, where the executor's own code runs between two calls).
#[cold]
#[inline(never)]
fn refused(info: &HandlerInfo, why: Refusal<'_>) -> Error {
    let t = info.target;
    match why {
        Refusal::NullFrame => Error::internal(format!("{t}: null call frame")),
        Refusal::FrameWithoutTable(size) => {
            Error::internal(format!("{t}: call frame of {size} bytes is too small to hold an API table"))
        }
        Refusal::UnusableTable => Error::internal(format!("{t}: call frame without a usable XLA FFI API table")),
        Refusal::FrameTooSmall(size) => Error::internal(format!(
            "{t}: unexpected XLA_FFI_CallFrame size: expected at least {}, got {size}",
            sys::XLA_FFI_CallFrame_STRUCT_SIZE
        )),
        Refusal::SmallParts(frame) => {
            let parts = [
                ("XLA_FFI_Args", frame.args.struct_size, sys::XLA_FFI_Args_STRUCT_SIZE as usize),
                ("XLA_FFI_Rets", frame.rets.struct_size, sys::XLA_FFI_Rets_STRUCT_SIZE as usize),
                ("XLA_FFI_Attrs", frame.attrs.struct_size, sys::XLA_FFI_Attrs_STRUCT_SIZE as usize),
            ];
            let small: Vec<String> = parts
                .iter()
                .filter(|&&(_, got, min)| got < min)
                .map(|(name, got, min)| format!("{name} struct of {got} bytes (expected at least {min})"))
                .collect();
            Error::internal(format!("{t}: the call frame's {}", small.join(", ")))
        }
    }
}

/// [`open`]'s stage check past its one-compare fast path: an unknown stage, the
/// record stage on a runtime without it, or another stage than the handler's.
#[cold]
#[inline(never)]
fn check_stage(raw: u32, info: &HandlerInfo, api: ApiTable<'_>) -> Result<()> {
    let Some(stage) = Stage::from_raw(raw) else {
        return Err(Error::internal(format!("{}: unknown execution stage {raw}", info.target)));
    };
    if stage == Stage::Record && api.version() < RECORD_SINCE {
        let (major, minor) = api.version();
        return Err(Error::unimplemented(format!(
            "{}: the record stage needs XLA FFI API 0.4 or newer; this XLA runtime has FFI API {major}.{minor}",
            info.target
        )));
    }
    if stage != info.stage {
        return Err(Error::internal(format!(
            "{}: this symbol handles the {} stage but was called at the {} stage; \
             register it under the key \"{}\"",
            info.target,
            info.stage.name(),
            stage.name(),
            info.stage.name()
        )));
    }
    Ok(())
}

/// The first FFI API version with the record stage (`XLA_FFI_ExecutionStage_RECORD`,
/// the bundle's `record` entry): the 0.4 header.
pub(crate) const RECORD_SINCE: (i32, i32) = (0, 4);

/// The lowest runtime API version known to read `XLA_FFI_Metadata::state_type_id`
/// (the field lies past `XLA_FFI_Metadata_STRUCT_SIZE`, so its size check cannot
/// say): both the 0.3 and 0.5 headers declare it and both runtimes read it.
const STATE_TYPE_ID_SINCE: (i32, i32) = (0, 3);

/// Fills XLA's metadata: our minimum API version, traits and state type.
///
/// # Safety
/// `ext` must point to a valid `XLA_FFI_Metadata_Extension`.
unsafe fn answer_metadata(
    ext: *const sys::XLA_FFI_Metadata_Extension,
    info: &HandlerInfo,
    api: ApiTable<'_>,
) -> Result<()> {
    let t = info.target;
    // SAFETY: guaranteed by the caller.
    let ext = unsafe { &*ext };
    if ext.extension_base.struct_size < sys::XLA_FFI_Metadata_Extension_STRUCT_SIZE as usize || ext.metadata.is_null() {
        return Err(Error::internal(format!("{t}: malformed metadata extension")));
    }
    let runtime = api.version();
    if runtime.0 != MIN_API_VERSION.0 || runtime < MIN_API_VERSION {
        return Err(Error::failed_precondition(format!(
            "{t}: this XLA runtime has FFI API {}.{}; these handlers need {}.{} or newer (jaxlib 0.10 or later)",
            runtime.0, runtime.1, MIN_API_VERSION.0, MIN_API_VERSION.1
        )));
    }
    if info.stage == Stage::Record && runtime < RECORD_SINCE {
        return Err(Error::unimplemented(format!(
            "{t}: a record-stage handler needs XLA FFI API 0.4 or newer; this XLA runtime has FFI API {}.{} \
             (register it only with a newer jaxlib)",
            runtime.0, runtime.1
        )));
    }
    // User code (`StateType::registration`, `Decode::state_type_id`) may panic:
    // nothing may unwind out of the handler.
    let state_type_id = catch_unwind(info.state_type_id).map_err(|payload| {
        let msg = panic_message(&*payload);
        drop_payload(payload);
        Error::internal(format!("{t}: finding the state type id panicked: {msg}"))
    })?;
    // SAFETY: checked non-null; XLA owns a whole XLA_FFI_Metadata (it reads
    // `state_type_id` past STRUCT_SIZE too, so that field exists).
    let md = unsafe { &mut *ext.metadata };
    if md.struct_size < sys::XLA_FFI_Metadata_STRUCT_SIZE as usize {
        return Err(Error::internal(format!("{t}: metadata struct too small")));
    }
    md.api_version = sys::XLA_FFI_Api_Version {
        struct_size: sys::XLA_FFI_Api_Version_STRUCT_SIZE as usize,
        extension_start: core::ptr::null_mut(),
        major_version: MIN_API_VERSION.0,
        minor_version: MIN_API_VERSION.1,
    };
    md.traits = info.traits.0;
    if runtime >= STATE_TYPE_ID_SINCE {
        md.state_type_id = sys::XLA_FFI_TypeId { type_id: state_type_id };
    }
    Ok(())
}

impl<'f> Frame<'f> {
    /// The operand or result entries (pointers and kinds), as `open` read them.
    pub(crate) fn entries(&self, role: Role) -> (&'f [*mut c_void], &'f [u32]) {
        match role {
            Role::Operand => self.args.slices(),
            Role::Result => self.rets.slices(),
        }
    }

    /// The call's raw attributes struct (its size checked by `open`).
    pub(crate) fn raw_attrs(&self) -> &'f sys::XLA_FFI_Attrs {
        self.attrs
    }

    /// How many attributes the call has, as [`Frame::attrs`] reads them (without
    /// checking the struct's size again: `open` did, and `from_copies` is given one
    /// that `open` accepted).
    #[inline(always)]
    pub(crate) fn attr_count(&self) -> usize {
        self.attr_count
    }

    /// A frame over copies of a call's entries and attributes, with no invoke
    /// context (`ctx` is null: the context-reading parameters refuse it). For an
    /// async handler's asynchronous part (`snapshot.rs`).
    ///
    /// # Safety
    /// The entries and attributes must be as `open` would accept them (each BUFFER
    /// entry NULL or a valid `XLA_FFI_Buffer`, the attributes a valid dictionary),
    /// alive for `'f`, and `api` a runtime's API table that passed `open`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn from_copies(
        api: *const sys::XLA_FFI_Api,
        stage: u32,
        host: bool,
        args: (&'f [*mut c_void], &'f [u32]),
        rets: (&'f [*mut c_void], &'f [u32]),
        attrs: &'f sys::XLA_FFI_Attrs,
    ) -> Frame<'f> {
        Frame {
            api: ApiTable { raw: api, _life: core::marker::PhantomData },
            ctx: core::ptr::null_mut(),
            stage,
            args: Entries::of_copies(args),
            rets: Entries::of_copies(rets),
            attrs,
            attr_count: RawDict::count_sized(attrs),
            host,
        }
    }

    /// The API table, which lives for the process.
    pub(crate) fn api_static(&self) -> ApiTable<'static> {
        ApiTable { raw: self.api.raw, _life: core::marker::PhantomData }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An entry array without its kinds (or kinds without entries, or a size that is
    /// not positive) counts no entries, so nothing reads past what XLA gave.
    #[test]
    fn entries_without_both_arrays_count_none() {
        let mut ptrs = [core::ptr::null_mut::<c_void>(); 2];
        let kinds = [sys::XLA_FFI_ArgType_BUFFER; 2];
        let (p, k) = (ptrs.as_mut_ptr() as *const *mut c_void, kinds.as_ptr());
        // SAFETY: each non-null array holds two entries.
        let cases = unsafe {
            [
                Entries::new(p, core::ptr::null(), 2),
                Entries::new(core::ptr::null(), k, 2),
                Entries::new(p, k, 0),
                Entries::new(p, k, -1),
            ]
        };
        for entries in cases {
            assert_eq!(entries.len, 0);
            assert!(entries.get(0).is_none());
            assert_eq!(entries.slices().0.len(), 0);
        }
        // SAFETY: as above.
        let both = unsafe { Entries::new(p, k, 2) };
        assert_eq!(both.len, 2);
        assert_eq!(both.get(1), Some((core::ptr::null_mut(), sys::XLA_FFI_ArgType_BUFFER)));
        assert!(both.get(2).is_none());
        assert_eq!(both.slices().1, &kinds[..]);
    }
}
