//! XLA's stream and context ([`Device`]), loaded modules and launches; the
//! kernels and arguments they take are described in [`kernel`](super::kernel).

use core::ffi::c_void;
use core::marker::PhantomData;
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::sys as cu;

use super::kernel::{describe, ArgKind};
pub use super::kernel::{Arg, Kernel, Param};
use super::loader::{check, driver_ready, nvrtc_ready};
use super::nvrtc::{compile, options, Compiled, Source};
use crate::context::Context;
use crate::{Error, ErrorCode, Result};

fn driver_error(target: &str, what: &str, rc: cu::CUresult) -> Result<()> {
    check(rc).map_err(|e| {
        let code = match rc {
            cu::CUresult::CUDA_ERROR_OUT_OF_MEMORY => ErrorCode::ResourceExhausted,
            cu::CUresult::CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
            | cu::CUresult::CUDA_ERROR_STREAM_CAPTURE_INVALIDATED => ErrorCode::FailedPrecondition,
            _ => ErrorCode::Internal,
        };
        Error::new(code, format!("{target}: CUDA driver: {what} failed: {e}"))
    })
}

// ---------------------------------------------------------------------------------
// Launch configuration
// ---------------------------------------------------------------------------------

/// Grid, block and dynamic shared memory of a launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z (at most 1024 in all).
    pub block: (u32, u32, u32),
    /// Dynamic shared memory per block, bytes.
    pub shared_mem_bytes: u32,
}

impl LaunchConfig {
    /// Shared memory per block, static plus dynamic, that every CUDA device gives a
    /// kernel without opting in (`cuFuncSetAttribute`).
    pub const MAX_SHARED: u32 = 48 * 1024;
    /// The former name of [`MAX_SHARED`](Self::MAX_SHARED): the limit is on static
    /// plus dynamic shared memory, not on dynamic alone.
    pub const MAX_DYNAMIC_SHARED: u32 = Self::MAX_SHARED;

    /// A 1-D launch covering `n` items with `block` threads per block, the grid capped
    /// at `max_grid` blocks (kernels then loop, grid-stride).
    pub fn linear(n: u64, block: u32, max_grid: u32) -> Self {
        let blocks = n.div_ceil(block.max(1) as u64).clamp(1, max_grid.max(1) as u64) as u32;
        LaunchConfig { grid: (blocks, 1, 1), block: (block, 1, 1), shared_mem_bytes: 0 }
    }

    /// The driver's limits for compute capability 7.0 and newer, with `static_smem`
    /// bytes of static shared memory in the kernel.
    pub fn validate(&self, static_smem: u32) -> core::result::Result<(), String> {
        let (g, b) = (self.grid, self.block);
        if g.0 == 0 || g.1 == 0 || g.2 == 0 || b.0 == 0 || b.1 == 0 || b.2 == 0 {
            return Err(format!("empty launch configuration {self:?}"));
        }
        if g.0 > i32::MAX as u32 || g.1 > 65535 || g.2 > 65535 {
            return Err(format!("grid beyond (2^31-1, 65535, 65535): {self:?}"));
        }
        if b.0 > 1024 || b.1 > 1024 || b.2 > 64 || (b.0 as u64) * (b.1 as u64) * (b.2 as u64) > 1024 {
            return Err(format!("more than 1024 threads per block (or a block beyond (1024, 1024, 64)): {self:?}"));
        }
        if self.shared_mem_bytes as u64 + static_smem as u64 > Self::MAX_SHARED as u64 {
            return Err(format!(
                "{} bytes of dynamic plus {static_smem} of static shared memory exceed 48 KiB: {self:?}",
                self.shared_mem_bytes
            ));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------
// Modules
// ---------------------------------------------------------------------------------

/// A compiled [`Source`] loaded into one CUDA context. Kept for the process's life.
pub struct Module {
    module: cu::CUmodule,
    ctx_id: u64,
    source: &'static str,
    /// Per kernel: NVRTC's lowered name, and the function once looked up.
    kernels: Mutex<HashMap<Kernel, (CString, Option<Function>)>>,
}

#[derive(Clone, Copy)]
struct Function {
    raw: cu::CUfunction,
    static_smem: u32,
}

// SAFETY: CUmodule and CUfunction are driver handles that the (thread-safe) driver
// API accepts from any thread; the kernel table is behind a Mutex, and the module
// is never unloaded, so the handles stay valid.
unsafe impl Send for Module {}
// SAFETY: as above.
unsafe impl Sync for Module {}

impl core::fmt::Debug for Module {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Module({} in context {})", self.source, self.ctx_id)
    }
}

/// A source is identified by its code's address and length, not its name: two crates
/// may both ship a `kernels.cu`. (Sources are `'static`, so addresses are stable.)
type SourceId = (usize, usize);
type ModuleKey = (u64, SourceId, Vec<String>);
type CubinKey = (SourceId, Vec<String>, String);

fn source_id(source: &'static Source) -> SourceId {
    (source.code().as_ptr() as usize, source.code().len())
}

fn modules() -> &'static Mutex<HashMap<ModuleKey, Arc<Module>>> {
    static M: OnceLock<Mutex<HashMap<ModuleKey, Arc<Module>>>> = OnceLock::new();
    M.get_or_init(Default::default)
}

fn cubins() -> &'static Mutex<HashMap<CubinKey, Arc<Compiled>>> {
    static C: OnceLock<Mutex<HashMap<CubinKey, Arc<Compiled>>>> = OnceLock::new();
    C.get_or_init(Default::default)
}

// ---------------------------------------------------------------------------------
// Device: XLA's stream and context
// ---------------------------------------------------------------------------------

/// XLA's CUDA stream for this call and its context. Each driver call that needs the
/// context ([`module`](Self::module), [`launch`](Self::launch)) makes it current for
/// its own duration and then restores whatever was current before, so any number
/// of `Device`s may exist and be dropped in any order. `!Send`, like the call.
pub struct Device<'f> {
    stream: cu::CUstream,
    ctx: cu::CUcontext,
    ctx_id: u64,
    target: &'static str,
    _life: PhantomData<&'f ()>,
}

/// Makes `ctx` current on this thread until dropped, then restores the previous one.
struct CurrentGuard {
    previous: Option<cu::CUcontext>,
}

impl CurrentGuard {
    fn new(target: &str, ctx: cu::CUcontext) -> Result<Self> {
        let mut current: cu::CUcontext = core::ptr::null_mut();
        // SAFETY: the driver is ready; writes one handle.
        driver_error(target, "cuCtxGetCurrent", unsafe { cu::cuCtxGetCurrent(&mut current) })?;
        if current == ctx {
            return Ok(CurrentGuard { previous: None });
        }
        // SAFETY: `ctx` is the live context of XLA's stream.
        driver_error(target, "cuCtxSetCurrent", unsafe { cu::cuCtxSetCurrent(ctx) })?;
        Ok(CurrentGuard { previous: Some(current) })
    }
}

impl Drop for CurrentGuard {
    fn drop(&mut self) {
        if let Some(prev) = self.previous {
            // SAFETY: restores the context (or none) that was current when the guard
            // was made, on the same thread (the guard is a local, never moved across).
            let _ = unsafe { cu::cuCtxSetCurrent(prev) };
        }
    }
}

/// Lets this thread make calls that a stream capture would otherwise refuse
/// (loading a module) while XLA captures its stream into a CUDA graph, as the CUDA
/// documentation allows with `CU_STREAM_CAPTURE_MODE_RELAXED`; restores the mode.
struct RelaxedCapture {
    previous: cu::CUstreamCaptureMode,
}

impl RelaxedCapture {
    fn new(target: &str) -> Result<Self> {
        let mut mode = cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: exchanges this thread's capture mode; writes one enum.
        driver_error(target, "cuThreadExchangeStreamCaptureMode", unsafe {
            cu::cuThreadExchangeStreamCaptureMode(&mut mode)
        })?;
        Ok(RelaxedCapture { previous: mode })
    }
}

impl Drop for RelaxedCapture {
    fn drop(&mut self) {
        let mut mode = self.previous;
        // SAFETY: restores this thread's previous capture mode.
        let _ = unsafe { cu::cuThreadExchangeStreamCaptureMode(&mut mode) };
    }
}

impl<'f> Device<'f> {
    /// Binds the stream XLA handed this call.
    ///
    /// Fails with `FAILED_PRECONDITION` when the CUDA driver cannot be loaded or is
    /// too old (the message names the version needed), and with `INVALID_ARGUMENT`
    /// for a handler not declared `platform = device` (its buffers could otherwise
    /// be viewed as host slices).
    pub fn new(ctx: &Context<'f>) -> Result<Self> {
        let target = ctx.target;
        if ctx.frame.host {
            return Err(Error::invalid_argument(format!(
                "{target}: CUDA launches need a handler declared with `platform = device`"
            )));
        }
        driver_ready().map_err(|e| Error::failed_precondition(format!("{target}: {e}")))?;
        let stream = ctx.stream()?.as_raw() as cu::CUstream;
        let mut cuctx: cu::CUcontext = core::ptr::null_mut();
        // SAFETY: `stream` is the live CUstream XLA passed for this call; writes one handle.
        driver_error(target, "cuStreamGetCtx", unsafe { cu::cuStreamGetCtx(stream, &mut cuctx) })?;
        let mut id: core::ffi::c_ulonglong = 0;
        // SAFETY: `cuctx` is live; writes one integer. The id is unique per context for
        // the process's life (unlike the handle's address, which may be reused).
        driver_error(target, "cuCtxGetId", unsafe { cu::cuCtxGetId(cuctx, &mut id) })?;
        Ok(Device { stream, ctx: cuctx, ctx_id: id, target, _life: PhantomData })
    }

    /// The raw stream (`CUstream`), for diagnostics.
    pub fn stream_raw(&self) -> *mut c_void {
        self.stream as *mut c_void
    }

    /// The compute capability `(major, minor)` of the stream's device.
    pub fn compute_capability(&self) -> Result<(i32, i32)> {
        let _current = CurrentGuard::new(self.target, self.ctx)?;
        let mut dev: cu::CUdevice = 0;
        // SAFETY: our context is current; writes one integer.
        driver_error(self.target, "cuCtxGetDevice", unsafe { cu::cuCtxGetDevice(&mut dev) })?;
        let attr = |a| {
            let mut v = 0;
            // SAFETY: `dev` is a valid device ordinal from the driver; writes one int.
            driver_error(self.target, "cuDeviceGetAttribute", unsafe { cu::cuDeviceGetAttribute(&mut v, a, dev) })
                .map(|_| v)
        };
        Ok((
            attr(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ))
    }

    /// `source` compiled with NVRTC for this device's architecture with exactly the
    /// `kernels` (see [`Kernel`]), loaded into this context: compiled at the first
    /// call for each (source, kernels, architecture), loaded once per context, then
    /// served from a process-wide cache.
    ///
    /// Fails with `FAILED_PRECONDITION` when NVRTC cannot be found (the message says
    /// what to install), and `INTERNAL` with the compiler log when compilation fails
    /// (a kernel whose signature is not the [`Kernel`]'s parameter list, say).
    pub fn module(&self, source: &'static Source, kernels: &[Kernel]) -> Result<Arc<Module>> {
        let target = self.target;
        if let Some(k) = kernels.iter().find(|k| !k.is_plain_name()) {
            return Err(Error::invalid_argument(format!(
                "{target}: kernel name {:?}: expected a C++ name with template arguments (letters, digits, `_`, \
                 `::`, `<`, `>`, `,` and spaces), nothing that could change the name expression's meaning",
                k.name()
            )));
        }
        let exprs: Vec<String> = kernels.iter().map(Kernel::name_expression).collect();
        let key = (self.ctx_id, source_id(source), exprs.clone());
        if let Some(m) = modules().lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
            return Ok(m.clone());
        }
        let (major, minor) = self.compute_capability()?;
        let arch = format!("sm_{major}{minor}");
        let ckey = (source_id(source), exprs.clone(), arch.clone());
        let cached = cubins().lock().unwrap_or_else(|e| e.into_inner()).get(&ckey).cloned();
        let compiled = match cached {
            Some(c) => c,
            None => {
                nvrtc_ready().map_err(|e| Error::failed_precondition(format!("{target}: {e}")))?;
                let c =
                    compile(source, &options(&arch), &exprs).map_err(|e| Error::internal(format!("{target}: {e}")))?;
                cubins().lock().unwrap_or_else(|e| e.into_inner()).entry(ckey).or_insert(Arc::new(c)).clone()
            }
        };
        let mut raw: cu::CUmodule = core::ptr::null_mut();
        {
            let _current = CurrentGuard::new(target, self.ctx)?;
            let _relaxed = RelaxedCapture::new(target)?;
            // SAFETY: `compiled.cubin` is a complete CUBIN image from NVRTC for this
            // device's architecture, alive during the call; our context is current.
            driver_error(target, &format!("cuModuleLoadData ({} for {arch})", source.name()), unsafe {
                cu::cuModuleLoadData(&mut raw, compiled.cubin.as_ptr() as *const c_void)
            })?;
        }
        let table = kernels
            .iter()
            .zip(&compiled.lowered)
            .map(|(k, l)| {
                let name = CString::new(l.as_str()).map_err(|_| Error::internal("lowered name with a NUL byte"))?;
                Ok((k.clone(), (name, None)))
            })
            .collect::<Result<HashMap<_, _>>>()?;
        let module =
            Arc::new(Module { module: raw, ctx_id: self.ctx_id, source: source.name(), kernels: Mutex::new(table) });
        let mut map = modules().lock().unwrap_or_else(|e| e.into_inner());
        // Another thread may have loaded it meanwhile: keep theirs (ours stays loaded,
        // unused; this happens at most once per racing thread).
        Ok(map.entry(key).or_insert(module).clone())
    }

    fn function(&self, module: &Module, kernel: &Kernel) -> Result<Function> {
        let target = self.target;
        let mut table = module.kernels.lock().unwrap_or_else(|e| e.into_inner());
        let Some((lowered, cached)) = table.get_mut(kernel) else {
            return Err(Error::internal(format!(
                "{target}: kernel {}{} was not compiled into this module of {}",
                kernel.name(),
                describe(kernel.params()),
                module.source
            )));
        };
        if let Some(f) = cached {
            return Ok(*f);
        }
        let mut raw: cu::CUfunction = core::ptr::null_mut();
        // SAFETY: `module.module` is a loaded, never-unloaded module of this context
        // (current: the caller holds a CurrentGuard); writes one handle.
        driver_error(target, &format!("cuModuleGetFunction({lowered:?})"), unsafe {
            cu::cuModuleGetFunction(&mut raw, module.module, lowered.as_ptr())
        })?;
        let mut smem = 0;
        // SAFETY: `raw` is a function of a live module; writes one int.
        driver_error(target, "cuFuncGetAttribute(SHARED_SIZE_BYTES)", unsafe {
            cu::cuFuncGetAttribute(&mut smem, cu::CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, raw)
        })?;
        let f = Function { raw, static_smem: smem.max(0) as u32 };
        *cached = Some(f);
        Ok(f)
    }

    /// The static shared memory of `kernel` in `module`, in bytes, as the compiled
    /// code declares it: what a launch's dynamic shared memory must leave room for
    /// within [`LaunchConfig::MAX_SHARED`].
    pub fn static_shared_bytes(&self, module: &Module, kernel: &Kernel) -> Result<u32> {
        let _current = CurrentGuard::new(self.target, self.ctx)?;
        Ok(self.function(module, kernel)?.static_smem)
    }

    /// Launches `kernel` of `module` on XLA's stream with `args`, and returns
    /// without waiting.
    ///
    /// `args` must expand to the kernel's parameter list (see [`Kernel::new`]),
    /// otherwise this is an `INTERNAL` error before anything is launched.
    pub fn launch(&self, module: &Module, kernel: &Kernel, cfg: LaunchConfig, args: &[Arg<'f>]) -> Result<()> {
        let target = self.target;
        let name = kernel.name();
        if module.ctx_id != self.ctx_id {
            return Err(Error::internal(format!("{target}: module {} belongs to another CUDA context", module.source)));
        }
        let params: Vec<(Param, [u8; 8])> = args.iter().flat_map(|a| a.params()).collect();
        let types: Vec<Param> = params.iter().map(|p| p.0).collect();
        if types != kernel.params() {
            return Err(Error::internal(format!(
                "{target}: kernel {name} takes {} but the launch passes {}",
                describe(kernel.params()),
                describe(&types)
            )));
        }
        // `Arg` is `Copy`: one result could be passed twice. XLA never aliases two
        // results, and the kernels' contract allows an input to be an output only.
        let outs: Vec<(usize, u64)> =
            args.iter().filter_map(|a| if let ArgKind::Out(p, n) = a.kind { Some((p, n)) } else { None }).collect();
        for (i, &(p, n)) in outs.iter().enumerate() {
            let end = p as u128 + n as u128;
            if outs[i + 1..]
                .iter()
                .any(|&(q, m)| n > 0 && m > 0 && (q as u128) < end && (p as u128) < q as u128 + m as u128)
            {
                return Err(Error::invalid_argument(format!(
                    "{target}: launch of {name}: two result arguments overlap (a result passed twice?): each \
                     result buffer may be passed once"
                )));
            }
        }
        let _current = CurrentGuard::new(target, self.ctx)?;
        let func = self.function(module, kernel)?;
        cfg.validate(func.static_smem).map_err(|e| Error::internal(format!("{target}: launch of {name}: {e}")))?;

        // Parameter storage: one 8-byte slot per kernel parameter, values stored in
        // their native width at the slot's start.
        let mut slots: Vec<u64> = params.iter().map(|(_, b)| u64::from_ne_bytes(*b)).collect();
        let mut ptrs: Vec<*mut c_void> = slots.iter_mut().map(|s| s as *mut u64 as *mut c_void).collect();
        // Why the launch is sound: `func` is a kernel of a live module of the current
        // context, looked up by NVRTC's lowered name of a name expression that fixed
        // its signature to `kernel.params`, which equal the types in `slots`; so the
        // kernel reads each parameter with the type and width it was stored with.
        // Every address is a device buffer of this call frame (Arg can only be made
        // from this call's decoded buffers), passed together with its size in bytes,
        // and XLA keeps those buffers alive until the work on its stream completes.
        // The kernels are trusted (Source::new's contract) to stay within those sizes
        // and to write only through result buffers. `stream` is XLA's live stream for
        // this call; the launch is asynchronous and nothing here reads device memory.
        // SAFETY: as argued just above.
        let rc = unsafe {
            cu::cuLaunchKernel(
                func.raw,
                cfg.grid.0,
                cfg.grid.1,
                cfg.grid.2,
                cfg.block.0,
                cfg.block.1,
                cfg.block.2,
                cfg.shared_mem_bytes,
                self.stream,
                ptrs.as_mut_ptr(),
                core::ptr::null_mut(),
            )
        };
        driver_error(target, &format!("cuLaunchKernel({name}, {cfg:?})"), rc)
    }
}

impl core::fmt::Debug for Device<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Device")
            .field("target", &self.target)
            .field("stream", &self.stream)
            .field("ctx", &self.ctx)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inp() -> Arg<'static> {
        Arg::new(ArgKind::In(0x1000, 16))
    }
    fn outp() -> Arg<'static> {
        Arg::new(ArgKind::Out(0x2000, 16))
    }

    #[test]
    fn name_expressions_spell_the_signature() {
        let k = Kernel::new("kepler<float>", &[inp(), outp(), Arg::u64(1), Arg::f32(0.0), Arg::i32(0)]);
        assert_eq!(
            k.name_expression(),
            "static_cast<void(*)(const void*, unsigned long long, void*, unsigned long long, unsigned long long, \
             float, int)>(kepler<float>)"
        );
    }

    #[test]
    fn only_plain_names_reach_the_name_expression() {
        for good in ["kepler<float>", "ns::rms_fwd<__nv_bfloat16, float, 8>", "k"] {
            assert!(Kernel::new(good, &[]).is_plain_name(), "{good}");
        }
        // A cast would launch a kernel with another signature than `params`.
        for bad in ["reinterpret_cast<void(*)(int)>(other)", "k)", "(k", "k{}", "", " ", "k;", "k\"x\"", "k/**/"] {
            assert!(!Kernel::new(bad, &[]).is_plain_name(), "{bad}");
        }
    }

    #[test]
    fn params_expand_buffers_to_address_and_size() {
        let p: Vec<_> = inp().params().collect();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].0, Param::In);
        assert_eq!(u64::from_ne_bytes(p[0].1), 0x1000);
        assert_eq!(u64::from_ne_bytes(p[1].1), 16);
        let q: Vec<_> = Arg::f32(1.5).params().collect();
        assert_eq!(q.len(), 1);
        assert_eq!(f32::from_ne_bytes(q[0].1[..4].try_into().unwrap()), 1.5);
    }

    #[test]
    fn launch_config_validation() {
        assert!(LaunchConfig::linear(10, 256, 1024).validate(0).is_ok());
        assert_eq!(LaunchConfig::linear(0, 256, 1024).grid.0, 1);
        assert_eq!(LaunchConfig::linear(1 << 30, 256, 4096).grid.0, 4096);
        let bad = LaunchConfig { grid: (1, 1, 1), block: (2048, 1, 1), shared_mem_bytes: 0 };
        assert!(bad.validate(0).is_err());
        let smem = LaunchConfig { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 48 * 1024 };
        assert!(smem.validate(0).is_ok());
        assert!(smem.validate(128).is_err(), "static plus dynamic shared memory is what is limited");
    }
}
