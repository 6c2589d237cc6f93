//! [`CallBuilder`]: one synthetic call of a handler, built, run against the fake
//! runtime, and its results read back.

use core::ffi::c_void;

use xla_ffi_sys as sys;

use super::args::count;
#[cfg(feature = "cuda")]
use super::cuda;
use super::fake_api::{drop_box, take_error, OptionsPtr, UserDataEntry};
use super::{future, Arg, AttrArg, AttrStore, FakeApi, FakeCtx};
use crate::dtype::Element;
use crate::{ErrorCode, Handler, HandlerFn};

/// What a synthetic call returned: `Ok`, or the error's code and message.
pub type CallResult = Result<(), (ErrorCode, String)>;

/// Builds and runs one synthetic call of a handler.
pub struct CallBuilder {
    api: FakeApi,
    args: Vec<Arg>,
    rets: Vec<Arg>,
    attrs: Vec<(String, AttrArg)>,
    stage: u32,
    threads: i64,
    alias: Vec<(usize, usize)>,
    /// Operand entries with another kind tag than BUFFER.
    arg_kinds: Vec<(usize, u32)>,
    /// Operand entries that point at the data itself instead of an XLA_FFI_Buffer.
    data_entries: Vec<usize>,
    /// Operand data pointers replaced by an address (never dereferenced by a
    /// correct crate: see `arg_data_address`).
    data_addrs: Vec<(usize, usize)>,
    frame_size: Option<usize>,
    /// `struct_size` of the frame's args, rets and attrs structs, where replaced.
    part_sizes: [Option<usize>; 3],
    /// The per-execution custom options (`CustomOptions_Get`).
    custom_options: Vec<(String, AttrArg)>,
    ctx: Box<FakeCtx>,
    /// Whether the last run's future was still pending when its handler returned
    /// (`None`: the handler returned no future).
    pending_at_return: Option<bool>,
}

impl Default for CallBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl CallBuilder {
    /// An execute-stage call on a fake API 0.5 runtime with 2 pool threads.
    pub fn new() -> Self {
        CallBuilder {
            api: FakeApi::new(5),
            args: Vec::new(),
            rets: Vec::new(),
            attrs: Vec::new(),
            stage: sys::XLA_FFI_ExecutionStage_EXECUTE,
            threads: 2,
            alias: Vec::new(),
            arg_kinds: Vec::new(),
            data_entries: Vec::new(),
            data_addrs: Vec::new(),
            frame_size: None,
            part_sizes: [None; 3],
            custom_options: Vec::new(),
            ctx: Box::new(FakeCtx::new(2)),
            pending_at_return: None,
        }
    }
    /// Uses this API table.
    pub fn api(mut self, api: FakeApi) -> Self {
        self.api = api;
        self
    }
    /// Makes this a GPU call: `Stream_Get` gives `stream` (a `CUstream`).
    ///
    /// # Safety
    /// A `platform = device` handler hands the stream to the CUDA driver as XLA's
    /// own (`cuda::Device::new`), and the driver does not check it: `stream` must be
    /// a live `CUstream` of the driver the process loaded, or no handler run with
    /// this builder may reach a CUDA call (a host handler, which the host guard
    /// refuses on a device frame, or a device handler that fails first). With a
    /// test GPU, `on_gpu` (feature `cuda`) is the safe form.
    pub unsafe fn device_stream(mut self, stream: usize) -> Self {
        self.api = FakeApi::device_like(5);
        self.ctx.stream = stream;
        self
    }
    /// Makes this a GPU call on `gpu`'s stream (see
    /// [`device_stream`](Self::device_stream)).
    #[cfg(feature = "cuda")]
    pub fn on_gpu(self, gpu: &cuda::Gpu) -> Self {
        // SAFETY: a `Gpu`'s stream is created with it and never destroyed (nor its
        // context): it is live for the rest of the process.
        unsafe { self.device_stream(gpu.stream()) }
    }
    /// Adds an operand.
    pub fn arg(mut self, a: Arg) -> Self {
        self.args.push(a);
        self
    }
    /// Adds a result.
    pub fn ret(mut self, r: Arg) -> Self {
        self.rets.push(r);
        self
    }
    /// Adds an attribute. A name added twice is sent twice (XLA never does so, and
    /// the handler refuses it: "attribute `x` is given more than once"); to change a
    /// value, build the call again.
    pub fn attr(mut self, name: &str, v: AttrArg) -> Self {
        self.attrs.push((name.to_string(), v));
        self
    }
    /// Makes result `ret` share operand `arg`'s memory, as `input_output_aliases` does.
    ///
    /// The result may describe fewer bytes than the operand holds (to test the
    /// checks on a mismatched pair), never more: [`run`](Self::run) panics if it
    /// does, since the handler would write the result's bytes into the operand's
    /// storage.
    pub fn alias(mut self, arg: usize, ret: usize) -> Self {
        self.alias.push((arg, ret));
        self
    }
    /// Gives operand entry `arg` the kind tag `kind` (XLA only ever sends BUFFER = 1).
    pub fn arg_kind(mut self, arg: usize, kind: u32) -> Self {
        self.arg_kinds.push((arg, kind));
        self
    }
    /// Makes operand entry `arg` point at its data bytes instead of at an
    /// `XLA_FFI_Buffer`: an entry of another kind, so give it one with
    /// [`arg_kind`](Self::arg_kind) ([`run`](Self::run) panics if it is still tagged
    /// BUFFER, which the crate would read as an `XLA_FFI_Buffer` from those bytes).
    pub fn arg_entry_is_data(mut self, arg: usize) -> Self {
        self.data_entries.push(arg);
        self
    }
    /// Replaces operand `arg`'s data pointer by `addr`, to test the checks on the
    /// address itself (a crate that accepted it would read unowned memory).
    ///
    /// # Safety
    /// The handler may read the bytes operand `arg` describes at `addr`: they must be
    /// readable for the whole call, or the crate must refuse the address before
    /// reading (an address whose range wraps around or passes `isize::MAX`, which the
    /// decoder checks). If a result is aliased to operand `arg`
    /// ([`alias`](Self::alias)), the handler writes that result at `addr` too: the
    /// bytes must then be writable as well, and not used by anything else during the
    /// call.
    pub unsafe fn arg_data_address(mut self, arg: usize, addr: usize) -> Self {
        self.data_addrs.push((arg, addr));
        self
    }
    /// Sends a call frame whose `struct_size` is `size` (too small, say).
    pub fn frame_size(mut self, size: usize) -> Self {
        self.frame_size = Some(size);
        self
    }
    /// Sends the frame's operand struct (`XLA_FFI_Args`) with `struct_size` = `size`
    /// (too small, say: the handler must refuse the call).
    pub fn args_struct_size(mut self, size: usize) -> Self {
        self.part_sizes[0] = Some(size);
        self
    }
    /// Sends the frame's result struct (`XLA_FFI_Rets`) with `struct_size` = `size`.
    pub fn rets_struct_size(mut self, size: usize) -> Self {
        self.part_sizes[1] = Some(size);
        self
    }
    /// Sends the frame's attribute dictionary (`XLA_FFI_Attrs`) with `struct_size` =
    /// `size`.
    pub fn attrs_struct_size(mut self, size: usize) -> Self {
        self.part_sizes[2] = Some(size);
        self
    }
    /// Sets the stage.
    pub fn stage(mut self, stage: crate::Stage) -> Self {
        self.stage = stage.to_raw();
        self
    }
    /// Sets the frame's raw `stage` field, which may be a value no [`Stage`](crate::Stage)
    /// stands for (XLA never sends one; the handler must refuse it).
    pub fn raw_stage(mut self, stage: u32) -> Self {
        self.stage = stage;
        self
    }
    /// Sets the stage of later [`run`](Self::run)s on this builder, keeping its
    /// context, so an instantiate call's state is seen by a later execute call.
    pub fn set_stage(&mut self, stage: crate::Stage) {
        self.stage = stage.to_raw();
    }
    /// Adds a per-execution custom option, which the handler reads through
    /// [`Context::custom_options`](crate::Context::custom_options) (the dictionary is
    /// empty, as on XLA:CPU, when none is added).
    pub fn custom_option(mut self, name: &str, v: AttrArg) -> Self {
        self.custom_options.push((name.to_string(), v));
        self
    }
    /// Puts `value` into the run's execution context as user data of type `T`, under
    /// `T`'s registered type id, as an embedder of XLA does; handlers read it with
    /// [`UserData<T>`](crate::UserData). It is dropped with the builder.
    ///
    /// # Panics
    /// If `T` is not registered ([`register_state_type`](super::register_state_type)): its id would be 0.
    pub fn user_data<T: crate::StateType>(mut self, value: T) -> Self {
        let id = T::registration().type_id();
        assert!(
            id != 0,
            "CallBuilder::user_data: `{}` is not registered; call testing::register_state_type first",
            core::any::type_name::<T>()
        );
        let data = Box::into_raw(Box::new(value)) as *mut c_void;
        self.ctx.user_data.push(UserDataEntry { id, data, drop: drop_box::<T> });
        self
    }
    /// Attaches a public extension to the call's invoke context, as XLA:GPU
    /// attaches its record and collectives extensions; handlers find it with
    /// [`Context::find_extension`](crate::Context::find_extension). It is dropped
    /// with the builder, on whichever thread drops the builder: so `E` must be
    /// `Send` as well as `Sync`.
    pub fn extension<E: crate::Extension + Send>(mut self, value: E) -> Self {
        let data = Box::into_raw(Box::new(value)) as *mut c_void;
        self.ctx.extensions.push(UserDataEntry { id: E::TYPE, data, drop: drop_box::<E> });
        self
    }
    /// Sets the fake pool's thread count.
    pub fn threads(mut self, n: i64) -> Self {
        self.threads = n;
        self.ctx.threads = n;
        self
    }
    /// How many tasks were scheduled on the fake pool so far.
    pub fn scheduled(&self) -> usize {
        *self.ctx.scheduled.lock().unwrap()
    }

    /// Runs `handler` once on this frame. At the instantiate stage the frame has no
    /// operands or results (XLA passes only attributes then), so one builder can
    /// serve an instantiate call and, after [`set_stage`](Self::set_stage), execute
    /// calls that see its state.
    ///
    /// Before each run every result that is not [aliased](Self::alias) is filled with
    /// 0xFF bytes (NaN for the floats, -1 for the signed integers), as XLA hands a
    /// handler result memory holding whatever was there: an element the handler
    /// leaves unwritten reads back as that, never as 0 or as an earlier run's value.
    ///
    /// # Panics
    /// On a frame a safe caller could not otherwise make sound: an operand entry made
    /// data ([`arg_entry_is_data`](Self::arg_entry_is_data)) but still tagged BUFFER,
    /// or a device buffer ([`Arg::device`]) in a call that is not a device call with a
    /// stream ([`device_stream`](Self::device_stream)), where a host handler would
    /// read the device address as host memory; or a result [aliased](Self::alias)
    /// to a host operand whose storage is smaller than the result's bytes; or an
    /// operand or result index given to the builder ([`alias`](Self::alias),
    /// [`arg_kind`](Self::arg_kind), ...) that the call does not have.
    pub fn run(&mut self, handler: impl Into<Handler>) -> CallResult {
        let handler: HandlerFn = handler.into().as_raw();
        self.check_indices();
        for &a in &self.data_entries {
            let kind = self.arg_kinds.iter().rev().find(|(i, _)| *i == a).map_or(sys::XLA_FFI_ArgType_BUFFER, |k| k.1);
            assert!(
                kind != sys::XLA_FFI_ArgType_BUFFER,
                "CallBuilder: operand entry {a} points at data but is tagged BUFFER; give it another kind with arg_kind"
            );
        }
        let has_device = self.args.iter().chain(&self.rets).any(|a| a.device.is_some());
        assert!(
            !has_device || (self.api.device && self.ctx.stream != 0),
            "CallBuilder: a device buffer (Arg::device) needs a device call: CallBuilder::on_gpu or device_stream with a \
             non-zero stream, and no other API table after it"
        );
        for &(a, r) in &self.alias {
            let (arg, ret) = (&self.args[a], &self.rets[r]);
            // The result's bytes are written where the operand's storage lies (a
            // device operand's address is the unsafe `Arg::device`'s promise).
            let need = count(&ret.dims).checked_mul(ret.dtype.byte_width().unwrap_or(0));
            let have = arg.data.len() * 8 - arg.offset_bytes;
            if arg.device.is_none() && need.is_none_or(|n| n > have) {
                let need = need.map_or_else(|| "too many".to_string(), |n| n.to_string());
                panic!(
                    "CallBuilder: result {r} ({} {:?}, {need} bytes) is aliased to operand {a}, whose storage holds \
                     {have} bytes; XLA aliases buffers of one shape and dtype",
                    ret.dtype, ret.dims,
                );
            }
        }
        // XLA hands a handler result memory holding whatever was there (stale data,
        // NaN): fill each result's storage with 0xFF bytes (NaN for the floats, -1 for
        // the signed integers), so an element the handler leaves unwritten reads back
        // as that, never as a plausible 0 or as the previous run's value. An aliased
        // result holds its operand's data, as in XLA.
        for (r, ret) in self.rets.iter_mut().enumerate() {
            if !self.alias.iter().any(|&(_, aliased)| aliased == r) {
                ret.data.fill(u64::MAX);
            }
        }
        let mut store = AttrStore::default();
        let attrs = store.dict(&self.attrs);
        let options = store.dict(&self.custom_options);
        self.ctx.custom_options = OptionsPtr(&options);
        let mut arg_ptrs: Vec<*mut c_void> = self.args.iter_mut().map(Arg::ptr).collect();
        for &(a, addr) in &self.data_addrs {
            arg_ptrs[a] = core::ptr::without_provenance_mut(addr);
        }
        let mut ret_ptrs: Vec<*mut c_void> = self.rets.iter_mut().map(Arg::ptr).collect();
        for &(a, r) in &self.alias {
            ret_ptrs[r] = arg_ptrs[a];
        }
        let mut bufs: Vec<sys::XLA_FFI_Buffer> = Vec::new();
        // The dims are this call's own copies, as XLA's are (freed with the frame).
        let dims: Vec<Vec<i64>> = self.args.iter().chain(&self.rets).map(|a| a.dims.clone()).collect();
        let all: Vec<(&Arg, *mut c_void)> = self
            .args
            .iter()
            .zip(arg_ptrs.iter().copied())
            .chain(self.rets.iter().zip(ret_ptrs.iter().copied()))
            .collect();
        for ((a, p), d) in all.iter().zip(&dims) {
            bufs.push(sys::XLA_FFI_Buffer {
                struct_size: sys::XLA_FFI_Buffer_STRUCT_SIZE as usize,
                extension_start: core::ptr::null_mut(),
                dtype: a.dtype.0,
                data: *p,
                rank: d.len() as i64,
                dims: d.as_ptr() as *mut i64,
            });
        }
        let mut buf_ptrs: Vec<*mut c_void> = bufs.iter_mut().map(|b| b as *mut _ as *mut c_void).collect();
        for &a in &self.data_entries {
            buf_ptrs[a] = self.args[a].ptr();
        }
        let (arg_bufs, ret_bufs) = buf_ptrs.split_at_mut(self.args.len());
        let mut arg_types = vec![sys::XLA_FFI_ArgType_BUFFER; arg_bufs.len()];
        for &(a, kind) in &self.arg_kinds {
            arg_types[a] = kind;
        }
        let mut ret_types = vec![sys::XLA_FFI_RetType_BUFFER; ret_bufs.len()];
        // SAFETY: all-zero is a valid call frame (null pointers, zero sizes); every
        // field the crate reads is set below.
        let mut frame: sys::XLA_FFI_CallFrame = unsafe { core::mem::zeroed() };
        frame.struct_size = sys::XLA_FFI_CallFrame_STRUCT_SIZE as usize;
        frame.api = self.api.table;
        frame.ctx = &*self.ctx as *const FakeCtx as *mut _;
        frame.stage = self.stage;
        frame.args = sys::XLA_FFI_Args {
            struct_size: sys::XLA_FFI_Args_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            size: arg_bufs.len() as i64,
            types: arg_types.as_mut_ptr() as *mut _,
            args: arg_bufs.as_mut_ptr(),
        };
        frame.rets = sys::XLA_FFI_Rets {
            struct_size: sys::XLA_FFI_Rets_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            size: ret_bufs.len() as i64,
            types: ret_types.as_mut_ptr() as *mut _,
            rets: ret_bufs.as_mut_ptr(),
        };
        if self.stage == sys::XLA_FFI_ExecutionStage_INSTANTIATE {
            // As XLA does: the instantiate stage sees attributes, no buffers.
            frame.args.size = 0;
            frame.rets.size = 0;
        }
        frame.attrs = attrs;
        if let Some(size) = self.frame_size {
            frame.struct_size = size;
        }
        let [args_size, rets_size, attrs_size] = self.part_sizes;
        frame.args.struct_size = args_size.unwrap_or(frame.args.struct_size);
        frame.rets.struct_size = rets_size.unwrap_or(frame.rets.struct_size);
        frame.attrs.struct_size = attrs_size.unwrap_or(frame.attrs.struct_size);
        // SAFETY: the frame and everything it points to live until after the call.
        let err = unsafe { handler(&mut frame) };
        self.ctx.custom_options = OptionsPtr(core::ptr::null());
        // An async handler left a future. As XLA:CPU does, free the structures that
        // describe the call now (the `XLA_FFI_Buffer`s, dims, entry arrays and
        // attributes; scribbled over first, so a use shows without Miri too), keep the
        // buffers' memory, and wait for the future.
        if !frame.future.is_null() {
            for b in &mut bufs {
                b.data = core::ptr::null_mut();
                b.rank = -1;
            }
            arg_types.fill(0xdead);
            ret_types.fill(0xdead);
            store.scribble();
            frame.args.size = -1;
            frame.rets.size = -1;
            frame.attrs.size = -1;
            drop(arg_types);
            drop(ret_types);
            drop(buf_ptrs);
            drop(bufs);
            drop(dims);
            store = AttrStore::default();
        }
        let (result, pending) = future::finish(frame.future, err);
        self.pending_at_return = pending;
        // The handler may have left bytes uninitialized (safe code can store
        // `MaybeUninit::uninit()` into a result): the buffers are read back as
        // plain data from here on.
        for a in self.args.iter_mut().chain(&mut self.rets) {
            freeze(&mut a.data);
        }
        // Aliased results: copy what was written in place back into the result.
        // The result starts where the operand does (after any `misaligned` shift).
        for &(a, r) in &self.alias {
            let (data, offset) = (self.args[a].data.clone(), self.args[a].offset_bytes);
            self.rets[r].data = data;
            self.rets[r].offset_bytes = offset;
        }
        drop(store);
        result
    }

    /// Panics, naming the method, where an index given to the builder names no
    /// operand or result of the call.
    fn check_indices(&self) {
        let (n_args, n_rets) = (self.args.len(), self.rets.len());
        let arg_uses =
            self.alias.iter().map(|&(a, _)| ("alias", a)).chain(self.arg_kinds.iter().map(|&(a, _)| ("arg_kind", a)));
        let arg_uses = arg_uses
            .chain(self.data_entries.iter().map(|&a| ("arg_entry_is_data", a)))
            .chain(self.data_addrs.iter().map(|&(a, _)| ("arg_data_address", a)));
        for (method, a) in arg_uses {
            assert!(a < n_args, "CallBuilder::{method}: operand {a} does not exist (the call has {n_args} operand(s))");
        }
        for &(_, r) in &self.alias {
            assert!(r < n_rets, "CallBuilder::alias: result {r} does not exist (the call has {n_rets} result(s))");
        }
    }

    fn take(&self, err: *mut sys::XLA_FFI_Error) -> CallResult {
        take_error(err)
    }

    /// Asks the handler for its metadata: `(api major, minor, traits, state type id)`.
    pub fn metadata(&mut self, handler: impl Into<Handler>) -> Result<(i32, i32, u32, i64), (ErrorCode, String)> {
        let handler: HandlerFn = handler.into().as_raw();
        // SAFETY: plain data; all zero is valid.
        let mut md: sys::XLA_FFI_Metadata = unsafe { core::mem::zeroed() };
        md.struct_size = sys::XLA_FFI_Metadata_STRUCT_SIZE as usize;
        // SAFETY: as above.
        let mut ext: sys::XLA_FFI_Metadata_Extension = unsafe { core::mem::zeroed() };
        ext.extension_base.struct_size = sys::XLA_FFI_Metadata_Extension_STRUCT_SIZE as usize;
        ext.extension_base.type_ = sys::XLA_FFI_Extension_Metadata;
        ext.metadata = &mut md;
        // SAFETY: as above.
        let mut frame: sys::XLA_FFI_CallFrame = unsafe { core::mem::zeroed() };
        frame.struct_size = sys::XLA_FFI_CallFrame_STRUCT_SIZE as usize;
        frame.api = self.api.table;
        frame.stage = sys::XLA_FFI_ExecutionStage_EXECUTE;
        frame.extension_start = &mut ext as *mut _ as *mut _;
        // SAFETY: the frame and the metadata live until after the call.
        let err = unsafe { handler(&mut frame) };
        self.take(err)?;
        Ok((md.api_version.major_version, md.api_version.minor_version, md.traits, md.state_type_id.type_id))
    }

    /// For the last [`run`](Self::run): `None` if the handler returned no future (a
    /// synchronous call, or an error before its asynchronous part), else whether the
    /// future was still pending when the handler returned (`run` waits for it, as XLA
    /// does, before returning its outcome).
    pub fn pending_at_return(&self) -> Option<bool> {
        self.pending_at_return
    }

    /// Result `i` read back as `T`s.
    ///
    /// # Panics
    /// If the call has no result `i`, or result `i`'s dtype is not `T`'s (a float32
    /// result read as `i32`s would give its bit patterns, not its values). A result
    /// of one-byte elements (PRED, an 8-bit float) may be read as `u8`, its bytes.
    pub fn ret_as<T: Element>(&self, i: usize) -> Vec<T> {
        read_back(&self.rets, "ret_as", "result", i)
    }
    /// Operand `i` read back as `T`s (after an in-place call).
    ///
    /// # Panics
    /// As [`ret_as`](Self::ret_as), for operand `i`.
    pub fn arg_as<T: Element>(&self, i: usize) -> Vec<T> {
        read_back(&self.args, "arg_as", "operand", i)
    }
}

/// Makes every byte of `data` an initialized byte with the value it holds, as
/// XLA sees a result: the handler's safe code may have written
/// `MaybeUninit::uninit()` into it, and reading such bytes as integers or floats
/// would be undefined behaviour. Rust has no `freeze`; an inline-assembly block
/// that the compiler must assume wrote the memory is the accepted substitute.
/// Miri cannot run assembly: there the bytes stay as the handler left them, and
/// Miri reports a read of uninitialized memory (a handler that leaves a result
/// unwritten) when the test reads them.
#[inline(never)]
pub(super) fn freeze(data: &mut [u64]) {
    #[cfg(not(miri))]
    // SAFETY: the block executes no instruction. The compiler must assume it may
    // have written any bytes of `data` (a pointer to it is an operand and neither
    // `nomem` nor `readonly` is given), so afterwards each byte holds whatever value
    // the machine has there: initialized. Nothing outside `data` is reachable from
    // the operand, and the `&mut` guarantees no other reference observes the write.
    unsafe {
        core::arch::asm!("/* {0} */", in(reg) data.as_mut_ptr(), options(nostack, preserves_flags));
    }
    #[cfg(miri)]
    let _ = data;
}

fn read_back<T: Element>(all: &[Arg], method: &str, what: &str, i: usize) -> Vec<T> {
    let n = all.len();
    let call = || format!("CallBuilder::{method}::<{}>({i})", core::any::type_name::<T>());
    let a = all.get(i).unwrap_or_else(|| panic!("{}: the call has {n} {what}(s), so no {what} {i}", call()));
    // One-byte elements (PRED, the 8-bit floats) may also be read as their raw bytes.
    let raw_bytes = T::DTYPE == crate::DataType::U8 && a.dtype.byte_width() == Some(1);
    assert!(
        a.dtype == T::DTYPE || raw_bytes,
        "{}: {what} {i} is {} {:?}, not {}; read it with the Rust type of its dtype",
        call(),
        a.dtype,
        a.dims,
        T::DTYPE
    );
    assert!(a.device.is_none(), "a device buffer is read back with testing::cuda, not from the frame");
    let bytes = a.bytes();
    let width = core::mem::size_of::<T>();
    let n = count(&a.dims);
    assert!(
        n.checked_mul(width).is_some_and(|b| b <= bytes.len()),
        "cannot read {n} elements of {} from a buffer of {} bytes",
        T::DTYPE,
        bytes.len()
    );
    bytes[..n * width]
        .chunks_exact(width)
        // SAFETY: `c` holds `size_of::<T>()` bytes; T is plain data for which every
        // bit pattern is valid (the Element types); the read is unaligned.
        .map(|c| unsafe { (c.as_ptr() as *const T).read_unaligned() })
        .collect()
}

impl core::fmt::Debug for CallBuilder {
    /// The buffers, attributes, stage and aliases the call will carry.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CallBuilder")
            .field("api", &self.api)
            .field("args", &self.args)
            .field("rets", &self.rets)
            .field("attrs", &self.attrs)
            .field("stage", &self.stage)
            .field("alias", &self.alias)
            .finish_non_exhaustive()
    }
}
