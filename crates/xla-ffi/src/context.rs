//! The execution context: device ordinal, run id, the platform stream, scratch device
//! memory, XLA's CPU thread pool, per-execution custom options, and the raw reads of
//! per-handler state and user data.

use core::ffi::c_void;
use core::marker::PhantomData;

use xla_ffi_sys as sys;

use crate::alias::Aliases;
use crate::attr::Dict;
use crate::call::{Call, Decode};
use crate::error::{Error, Result};
use crate::frame::{api_slot, Frame, Stage};
use crate::pool::ThreadPool;
use crate::raw::RawDict;

/// The first FFI API version with per-execution custom options
/// (`XLA_FFI_CustomOptions_Get`): jaxlib 0.12.
pub(crate) const CUSTOM_OPTIONS_SINCE: (i32, i32) = (0, 5);

/// The first FFI API version whose `XLA_FFI_State_Set/Get_Args` name the stage
/// (state at the prepare and initialize stages): jaxlib 0.10. An older runtime
/// reads those args with another layout.
pub(crate) const STAGED_STATE_SINCE: (i32, i32) = (0, 3);

/// A handler parameter giving access to XLA's execution context: device ordinal,
/// run id, stream, scratch memory and XLA's CPU thread pool.
///
/// A handler that squares its input on XLA's thread pool, each task writing its own
/// part of the output (run here on a synthetic frame with 4 pool threads):
///
/// ```
/// use xla_ffi::testing::{Arg, CallBuilder};
/// use xla_ffi::{handler, Buffer, Context, Parts, Result, ResultBuffer};
///
/// #[handler(target = "demo.square")]
/// fn demo_square(ctx: Context, x: Buffer<f64>, mut y: ResultBuffer<f64>) -> Result<()> {
///     y.expect_dims(x.dims(), "the shape of x")?;
///     let x = x.as_slice()?;
///     let parts = Parts::new(y.as_uninit()?, 256); // disjoint chunks of the output
///     ctx.thread_pool().for_each(parts.len(), |i| {
///         let (start, out) = parts.take(i);
///         for (o, &v) in out.iter_mut().zip(&x[start..]) {
///             o.write(v * v);
///         }
///     })?;
///     let _threads = ctx.thread_pool().num_threads();
///     Ok(())
/// }
///
/// let x: Vec<f64> = (0..1000).map(f64::from).collect();
/// let mut call = CallBuilder::new()
///     .threads(4)
///     .arg(Arg::from_slice(&x, &[1000]))
///     .ret(Arg::zeros::<f64>(&[1000]));
/// call.run(DEMO_SQUARE).unwrap();
/// assert_eq!(call.ret_as::<f64>(0)[999], 999.0 * 999.0);
/// ```
#[derive(Clone, Copy)]
pub struct Context<'f> {
    pub(crate) frame: &'f Frame<'f>,
    pub(crate) target: &'static str,
}

impl<'f> Decode<'f> for Context<'f> {
    const NEEDS_CONTEXT: bool = true;
    #[inline(always)]
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        Context::of(call, name)
    }
}

impl<'f> Context<'f> {
    /// The call's context, for the parameter `name`; `None` (with the problem
    /// recorded) in an async handler's asynchronous part, where XLA's invoke context
    /// no longer exists (the frame's `ctx` is null there).
    #[inline(always)]
    pub(crate) fn of(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        if call.frame.ctx.is_null() {
            return Context::no_context(call.target(), call.aliases, name);
        }
        Some(Context { frame: call.frame, target: call.target() })
    }

    /// [`Context::of`] in an async handler's asynchronous part (not given the `Call`:
    /// see `Aliases::problems`).
    #[cold]
    #[inline(never)]
    fn no_context(target: &str, aliases: &Aliases<'_>, name: &'static str) -> Option<Self> {
        aliases.add_problem(format!(
            "{target}: parameter `{name}` reads XLA's execution context, which ends when the handler call \
             returns: an async handler cannot take it",
        ));
        None
    }
}

/// A platform stream (a `CUstream` on CUDA), borrowed for the call.
///
/// Enqueue work on it and return; never synchronise it inside a handler.
#[derive(Clone, Copy, Debug)]
pub struct Stream<'f> {
    raw: *mut c_void,
    _life: PhantomData<&'f ()>,
}

impl Stream<'_> {
    /// The raw stream handle (`CUstream` / `cudaStream_t`).
    pub fn as_raw(&self) -> *mut c_void {
        self.raw
    }
}

/// Scratch device memory from XLA's allocator, freed when dropped (at the latest,
/// when the handler returns).
#[must_use = "the memory is freed as soon as the Scratch is dropped"]
pub struct Scratch<'f> {
    frame: &'f Frame<'f>,
    data: *mut c_void,
    size: usize,
}

impl Scratch<'_> {
    /// The device address.
    pub fn as_ptr(&self) -> *mut c_void {
        self.data
    }
    /// The size in bytes.
    pub fn size(&self) -> usize {
        self.size
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        let api = self.frame.api;
        if let Some(free) = api_slot!(api, XLA_FFI_DeviceMemory_Free) {
            let mut args = sys::XLA_FFI_DeviceMemory_Free_Args {
                struct_size: sys::XLA_FFI_DeviceMemory_Free_Args_STRUCT_SIZE as usize,
                extension_start: core::ptr::null_mut(),
                ctx: self.frame.ctx,
                size: self.size,
                data: self.data,
            };
            // SAFETY: frees memory this context allocated, once, during the call.
            let err = unsafe { free(&mut args) };
            let _ = api.take_error(err);
        }
    }
}

macro_rules! call_api {
    ($self:expr, $slot:ident, $args:ident) => {{
        let api = $self.frame.api;
        let Some(f) = api_slot!(api, $slot) else {
            return Err(Error::unimplemented(format!(
                "{}: this XLA runtime (FFI API {}.{}) has no {}",
                $self.target,
                api.version().0,
                api.version().1,
                stringify!($slot)
            )));
        };
        // SAFETY: `f` is the runtime's own function and `args` is fully initialised
        // with the header's struct size and this call's context.
        let err = unsafe { f(&mut $args) };
        api.take_error(err).map_err(|e| e.context($self.target))?;
    }};
}

impl<'f> Context<'f> {
    /// The FFI API version of the running XLA, `(major, minor)`.
    pub fn api_version(&self) -> (i32, i32) {
        self.frame.api.version()
    }

    /// The stage XLA is calling the handler at.
    pub fn stage(&self) -> Option<crate::Stage> {
        Stage::from_raw(self.frame.stage)
    }

    /// The FFI target name.
    pub fn target(&self) -> &'static str {
        self.target
    }

    /// The ordinal of the device this call runs on.
    pub fn device_ordinal(&self) -> Result<i32> {
        let mut args = sys::XLA_FFI_DeviceOrdinal_Get_Args {
            struct_size: sys::XLA_FFI_DeviceOrdinal_Get_Args_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            ctx: self.frame.ctx,
            device_ordinal: 0,
        };
        call_api!(self, XLA_FFI_DeviceOrdinal_Get, args);
        Ok(args.device_ordinal)
    }

    /// The id of the logical execution (the same for all devices of one run).
    pub fn run_id(&self) -> Result<i64> {
        let mut args = sys::XLA_FFI_RunId_Get_Args {
            struct_size: sys::XLA_FFI_RunId_Get_Args_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            ctx: self.frame.ctx,
            run_id: 0,
        };
        call_api!(self, XLA_FFI_RunId_Get, args);
        Ok(args.run_id)
    }

    /// The platform stream (GPU). On CPU this is an `UNIMPLEMENTED` error.
    pub fn stream(&self) -> Result<Stream<'f>> {
        let mut args = sys::XLA_FFI_Stream_Get_Args {
            struct_size: sys::XLA_FFI_Stream_Get_Args_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            ctx: self.frame.ctx,
            stream: core::ptr::null_mut(),
        };
        call_api!(self, XLA_FFI_Stream_Get, args);
        Ok(Stream { raw: args.stream, _life: PhantomData })
    }

    /// Allocates `size` bytes of device memory (alignment a power of two, at most 16).
    /// On CPU this is an error: use ordinary allocation there.
    pub fn scratch(&self, size: usize, alignment: usize) -> Result<Scratch<'f>> {
        let mut args = sys::XLA_FFI_DeviceMemory_Allocate_Args {
            struct_size: sys::XLA_FFI_DeviceMemory_Allocate_Args_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            ctx: self.frame.ctx,
            size,
            alignment,
            data: core::ptr::null_mut(),
        };
        call_api!(self, XLA_FFI_DeviceMemory_Allocate, args);
        Ok(Scratch { frame: self.frame, data: args.data, size })
    }

    /// XLA's intra-op CPU thread pool.
    pub fn thread_pool(&self) -> ThreadPool<'f> {
        ThreadPool::new(self.frame, self.target)
    }

    /// The per-execution custom options (FFI API 0.5, `ffi.h`'s `CustomOptions`): a
    /// dictionary the caller of the executable passes with each run, separate from
    /// the op's attributes, read with the same [`Dict`] methods. Empty when the run
    /// was given none (JAX passes none: on jaxlib 0.12's CPU runtime it is empty).
    ///
    /// On an older runtime (jaxlib 0.10 has FFI API 0.3) this is an `UNIMPLEMENTED`
    /// error naming the target and the API version needed and found; errors the
    /// runtime returns come back with its code, prefixed by the target.
    ///
    /// ```
    /// use xla_ffi::testing::{AttrArg, CallBuilder, FakeApi};
    /// use xla_ffi::{handler, Context, Error, ErrorCode, Result};
    ///
    /// #[handler(target = "demo.options")]
    /// fn demo_options(ctx: Context) -> Result<()> {
    ///     let options = ctx.custom_options()?;
    ///     let verbose: Option<bool> = options.get("verbose").map_err(Error::invalid_argument)?;
    ///     assert_eq!(verbose, Some(true));
    ///     Ok(())
    /// }
    ///
    /// let mut call = CallBuilder::new().custom_option("verbose", AttrArg::bool(true));
    /// # // A build on the API 0.3 header (bindgen's, from jaxlib 0.10) has no such slot.
    /// # if xla_ffi::sys::compat::HAS_CUSTOM_OPTIONS {
    /// call.run(DEMO_OPTIONS).unwrap();
    /// # }
    /// // An API 0.3 runtime (jaxlib 0.10) has no custom options: a clear error.
    /// let (code, msg) = CallBuilder::new().api(FakeApi::new(3).with_struct_size(192)).run(DEMO_OPTIONS).unwrap_err();
    /// assert_eq!(code, ErrorCode::Unimplemented);
    /// assert!(msg.contains("demo.options: custom options need XLA FFI API 0.5"));
    /// ```
    pub fn custom_options(&self) -> Result<Dict<'f>> {
        let api = self.frame.api;
        let (major, minor) = api.version();
        let missing = |why: &str| {
            Error::unimplemented(format!(
                "{}: custom options need XLA FFI API 0.5 or newer (jaxlib 0.12); {why}",
                self.target
            ))
        };
        if (major, minor) < CUSTOM_OPTIONS_SINCE {
            return Err(missing(&format!("this XLA runtime has FFI API {major}.{minor}")));
        }
        // SAFETY: the frame's table holds `struct_size` bytes (see `ApiTable`) and
        // `ctx` is this call's context; `custom_options` checks the size first.
        let Some((err, attrs)) = (unsafe { sys::compat::custom_options(api.ptr(), self.frame.ctx) }) else {
            return Err(missing(&if sys::compat::HAS_CUSTOM_OPTIONS {
                format!("this XLA runtime (FFI API {major}.{minor}) has no XLA_FFI_CustomOptions_Get")
            } else {
                "this build's XLA FFI header (API 0.3) has no XLA_FFI_CustomOptions_Get".to_string()
            }));
        };
        api.take_error(err).map_err(|e| e.context(self.target))?;
        if attrs.is_null() {
            return Ok(Dict::new(RawDict::EMPTY));
        }
        // SAFETY: XLA returns a dictionary (with its names and values) that lives for
        // the execution, so for the call; one of a smaller struct size reads as empty.
        Ok(Dict::new(unsafe { RawDict::from_raw(&*attrs) }))
    }

    /// Reads the user data stored under `type_id` in the execution context.
    pub(crate) fn user_data_ptr(&self, type_id: i64) -> Result<*mut c_void> {
        let api = self.frame.api;
        let mut tid = sys::XLA_FFI_TypeId { type_id };
        let mut args = sys::compat::XLA_FFI_InvokeContext_Get_Args {
            struct_size: sys::compat::XLA_FFI_InvokeContext_Get_Args_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            ctx: self.frame.ctx,
            type_id: &mut tid,
            data: core::ptr::null_mut(),
        };
        // SAFETY: the frame's table holds `struct_size` bytes (see `ApiTable`), which
        // `invoke_context_get` checks first; `args` is fully initialised for this call.
        let Some(err) = (unsafe { sys::compat::invoke_context_get(api.ptr(), &mut args) }) else {
            return Err(Error::unimplemented(format!(
                "{}: this XLA runtime (FFI API {}.{}) has no XLA_FFI_InvokeContext_Get (user data)",
                self.target,
                api.version().0,
                api.version().1
            )));
        };
        api.take_error(err).map_err(|e| e.context(self.target))?;
        Ok(args.data)
    }

    /// Checks that this runtime keeps state for `stage` (instantiate, prepare or
    /// initialize; the stage in `XLA_FFI_State_Set/Get_Args` is API 0.3).
    pub(crate) fn check_state_stage(&self, stage: Stage) -> Result<()> {
        let (major, minor) = self.api_version();
        if (major, minor) < STAGED_STATE_SINCE {
            return Err(Error::unimplemented(format!(
                "{}: {} state needs XLA FFI API 0.3 or newer (jaxlib 0.10); this XLA runtime has FFI API {major}.{minor}",
                self.target,
                stage.name()
            )));
        }
        if !stage.creates_state() {
            // XLA keeps no state for these stages; asking it is undefined there.
            return Err(Error::internal(format!("{}: XLA keeps no state for the {} stage", self.target, stage.name())));
        }
        Ok(())
    }

    /// Reads the state that `stage` stored for this call site.
    pub(crate) fn state_ptr(&self, type_id: i64, stage: Stage) -> Result<*mut c_void> {
        self.check_state_stage(stage)?;
        let mut tid = sys::XLA_FFI_TypeId { type_id };
        let mut args = sys::XLA_FFI_State_Get_Args {
            struct_size: sys::XLA_FFI_State_Get_Args_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            ctx: self.frame.ctx,
            stage: stage.to_raw(),
            type_id: &mut tid,
            state: core::ptr::null_mut(),
        };
        call_api!(self, XLA_FFI_State_Get, args);
        Ok(args.state)
    }

    /// Hands `state` (a leaked box) to XLA as `stage`'s state; XLA frees it with
    /// the type's deleter.
    pub(crate) fn set_state(&self, type_id: i64, stage: Stage, state: *mut c_void) -> Result<()> {
        self.check_state_stage(stage)?;
        let mut tid = sys::XLA_FFI_TypeId { type_id };
        let mut args = sys::XLA_FFI_State_Set_Args {
            struct_size: sys::XLA_FFI_State_Set_Args_STRUCT_SIZE as usize,
            extension_start: core::ptr::null_mut(),
            ctx: self.frame.ctx,
            stage: stage.to_raw(),
            type_id: &mut tid,
            state,
        };
        call_api!(self, XLA_FFI_State_Set, args);
        Ok(())
    }
}

impl core::fmt::Debug for Context<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Context")
            .field("target", &self.target)
            .field("api_version", &self.api_version())
            .field("stage", &self.stage())
            .field("host", &self.frame.host)
            .finish_non_exhaustive()
    }
}

impl core::fmt::Debug for Scratch<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Scratch").field("ptr", &self.data).field("size", &self.size).finish()
    }
}
