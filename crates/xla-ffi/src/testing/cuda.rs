//! A CUDA context, stream and device memory for tests of `platform = device`
//! handlers (features `testing` and `cuda`), through the driver API directly. With
//! the project's stand-in driver (`cuda/stub_driver`) on the library path this runs
//! without a GPU; on a real GPU it uses the real driver.
//!
//! ```ignore
//! let gpu = xla_ffi::testing::cuda::Gpu::new()?;
//! let x = gpu.upload(&[1.0f32, 2.0])?;
//! let mut call = CallBuilder::new().on_gpu(&gpu).arg(x.arg(&[2]));
//! ```

use core::ffi::c_void;
use std::sync::{Arc, OnceLock};

use cudarc::driver::sys as cu;

use crate::cuda::loader::{check, driver_ready};
use crate::dtype::{DataType, Element};
use crate::testing::Arg;

/// An error of a test helper: the driver's message.
pub type GpuResult<T> = Result<T, String>;

fn ok(what: &str, rc: cu::CUresult) -> GpuResult<()> {
    check(rc).map_err(|e| format!("{what}: {e}"))
}

/// The primary context of device 0 and a stream of it (neither is ever destroyed:
/// [`CallBuilder::on_gpu`](crate::testing::CallBuilder::on_gpu) relies on it).
#[derive(Debug)]
pub struct Gpu {
    ctx: cu::CUcontext,
    stream: cu::CUstream,
}

// SAFETY: driver handles are usable from any thread; the context is made current
// on the calling thread by every method that needs it.
unsafe impl Send for Gpu {}
// SAFETY: as above.
unsafe impl Sync for Gpu {}

impl Gpu {
    /// Device 0's primary context and a new stream; the context is current on this
    /// thread afterwards. An error (never a panic) without a usable driver.
    pub fn new() -> GpuResult<Self> {
        driver_ready()?;
        let mut dev: cu::CUdevice = 0;
        // SAFETY: the driver is ready; writes one int.
        ok("cuDeviceGet", unsafe { cu::cuDeviceGet(&mut dev, 0) })?;
        let mut ctx: cu::CUcontext = core::ptr::null_mut();
        // SAFETY: writes one handle.
        ok("cuDevicePrimaryCtxRetain", unsafe { cu::cuDevicePrimaryCtxRetain(&mut ctx, dev) })?;
        // SAFETY: `ctx` is live.
        ok("cuCtxSetCurrent", unsafe { cu::cuCtxSetCurrent(ctx) })?;
        let mut stream: cu::CUstream = core::ptr::null_mut();
        // SAFETY: a context is current; writes one handle.
        ok("cuStreamCreate", unsafe { cu::cuStreamCreate(&mut stream, 0) })?;
        Ok(Gpu { ctx, stream })
    }

    /// A new (non-primary) context of device 0 and a stream of it, as a second XLA
    /// client would have; current on this thread afterwards.
    pub fn new_context() -> GpuResult<Self> {
        driver_ready()?;
        let mut dev: cu::CUdevice = 0;
        // SAFETY: the driver is ready; writes one int.
        ok("cuDeviceGet", unsafe { cu::cuDeviceGet(&mut dev, 0) })?;
        let mut ctx: cu::CUcontext = core::ptr::null_mut();
        // SAFETY: writes one handle; NULL parameters ask for the defaults. The
        // context is never destroyed (tests keep it for the process's life).
        ok("cuCtxCreate", unsafe { cu::cuCtxCreate_v4(&mut ctx, core::ptr::null_mut(), 0, dev) })?;
        let mut stream: cu::CUstream = core::ptr::null_mut();
        // SAFETY: the new context is current; writes one handle.
        ok("cuStreamCreate", unsafe { cu::cuStreamCreate(&mut stream, 0) })?;
        Ok(Gpu { ctx, stream })
    }

    /// One `Gpu` per process, shared by tests.
    pub fn shared() -> GpuResult<&'static Gpu> {
        static G: OnceLock<GpuResult<Gpu>> = OnceLock::new();
        G.get_or_init(Gpu::new).as_ref().map_err(|e| e.clone())
    }

    /// The stream, as the address a call frame carries.
    pub fn stream(&self) -> usize {
        self.stream as usize
    }

    /// The context, as an address (for comparing with the driver's log).
    pub fn context(&self) -> usize {
        self.ctx as usize
    }

    /// Makes this context current on the calling thread.
    pub fn make_current(&self) -> GpuResult<()> {
        // SAFETY: `ctx` is live (primary contexts are never destroyed here).
        ok("cuCtxSetCurrent", unsafe { cu::cuCtxSetCurrent(self.ctx) })
    }

    /// Makes no context current on the calling thread.
    pub fn clear_current() -> GpuResult<()> {
        // SAFETY: NULL unbinds the current context.
        ok("cuCtxSetCurrent(NULL)", unsafe { cu::cuCtxSetCurrent(core::ptr::null_mut()) })
    }

    /// The context current on the calling thread, as an address (0 for none).
    pub fn current() -> GpuResult<usize> {
        let mut c: cu::CUcontext = core::ptr::null_mut();
        // SAFETY: writes one handle.
        ok("cuCtxGetCurrent", unsafe { cu::cuCtxGetCurrent(&mut c) })?;
        Ok(c as usize)
    }

    /// Device memory holding `values`.
    pub fn upload<T: Element>(&self, values: &[T]) -> GpuResult<DeviceBuffer> {
        let bytes = core::mem::size_of_val(values);
        let buf = self.alloc(T::DTYPE, bytes)?;
        if bytes > 0 {
            // SAFETY: `buf` has `bytes` bytes; `values` is plain data of that size.
            ok("cuMemcpyHtoD", unsafe { cu::cuMemcpyHtoD_v2(buf.ptr, values.as_ptr() as *const c_void, bytes) })?;
        }
        Ok(buf)
    }

    /// Device memory for `count` elements of `T`, filled with 0xFF bytes (a NaN for
    /// floats), as stale memory might be: outputs are uninitialized in XLA.
    pub fn garbage<T: Element>(&self, count: usize) -> GpuResult<DeviceBuffer> {
        let bytes = count * core::mem::size_of::<T>();
        let buf = self.alloc(T::DTYPE, bytes)?;
        let fill = vec![0xFFu8; bytes];
        if bytes > 0 {
            // SAFETY: `buf` has `bytes` bytes.
            ok("cuMemcpyHtoD", unsafe { cu::cuMemcpyHtoD_v2(buf.ptr, fill.as_ptr() as *const c_void, bytes) })?;
        }
        Ok(buf)
    }

    fn alloc(&self, dtype: DataType, bytes: usize) -> GpuResult<DeviceBuffer> {
        self.make_current()?;
        let mut ptr: cu::CUdeviceptr = 0;
        // SAFETY: a context is current; writes one address. A zero-byte buffer gets
        // a one-byte allocation (its address is never dereferenced).
        ok("cuMemAlloc", unsafe { cu::cuMemAlloc_v2(&mut ptr, bytes.max(1)) })?;
        Ok(DeviceBuffer { alloc: Arc::new(DeviceAlloc(ptr)), ptr, bytes, dtype })
    }

    /// Begins capturing the stream into a graph (global capture mode, as XLA's
    /// command buffers do).
    pub fn begin_capture(&self) -> GpuResult<()> {
        // SAFETY: `stream` is live.
        ok("cuStreamBeginCapture", unsafe {
            cu::cuStreamBeginCapture_v2(self.stream, cu::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL)
        })
    }

    /// Ends the capture and runs the captured graph once on the stream.
    pub fn end_capture_and_launch(&self) -> GpuResult<()> {
        let mut graph: cu::CUgraph = core::ptr::null_mut();
        // SAFETY: `stream` is capturing; writes one handle.
        ok("cuStreamEndCapture", unsafe { cu::cuStreamEndCapture(self.stream, &mut graph) })?;
        let mut exec: cu::CUgraphExec = core::ptr::null_mut();
        // SAFETY: `graph` is the graph just captured; writes one handle.
        ok("cuGraphInstantiate", unsafe { cu::cuGraphInstantiateWithFlags(&mut exec, graph, 0) })?;
        // SAFETY: `exec` and `stream` are live.
        ok("cuGraphLaunch", unsafe { cu::cuGraphLaunch(exec, self.stream) })?;
        // SAFETY: `stream` is live and no longer capturing.
        ok("cuStreamSynchronize", unsafe { cu::cuStreamSynchronize(self.stream) })
    }

    /// Waits for the stream.
    pub fn synchronize(&self) -> GpuResult<()> {
        // SAFETY: `stream` is live.
        ok("cuStreamSynchronize", unsafe { cu::cuStreamSynchronize(self.stream) })
    }
}

/// One device allocation, freed when the last [`DeviceBuffer`] or [`Arg`] made from
/// it is dropped.
#[derive(Debug)]
struct DeviceAlloc(cu::CUdeviceptr);

impl Drop for DeviceAlloc {
    fn drop(&mut self) {
        // SAFETY: frees this allocation once, when nothing refers to it any more.
        let _ = unsafe { cu::cuMemFree_v2(self.0) };
    }
}

/// Device memory (freed when it and every [`Arg`] made from it are dropped).
#[derive(Debug)]
pub struct DeviceBuffer {
    alloc: Arc<DeviceAlloc>,
    ptr: cu::CUdeviceptr,
    bytes: usize,
    dtype: DataType,
}

impl DeviceBuffer {
    /// The device address.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }

    /// A call-frame buffer of shape `dims` at this address.
    ///
    /// # Panics
    /// If `dims` describe more bytes than the allocation holds.
    pub fn arg(&self, dims: &[i64]) -> Arg {
        let width = self.dtype.byte_width().unwrap_or(0);
        let need = dims.iter().try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).unwrap_or(0)));
        assert!(
            need.and_then(|n| n.checked_mul(width)).is_some_and(|b| b <= self.bytes),
            "DeviceBuffer::arg: dims {dims:?} of {} describe more than the {} bytes allocated",
            self.dtype,
            self.bytes
        );
        // SAFETY: the allocation holds the bytes `dims` describe (checked above), and
        // the `Arg` keeps it alive.
        unsafe { Arg::device(self.dtype, dims, self.ptr) }.keep_alive(self.alloc.clone())
    }

    /// The contents, copied to the host (after the stream's work: the copy is
    /// synchronous).
    pub fn download<T: Element>(&self) -> GpuResult<Vec<T>> {
        assert_eq!(T::DTYPE, self.dtype, "download with the buffer's dtype");
        assert_ne!(T::DTYPE, DataType::PRED, "download of bool buffers is not supported (any byte is not a bool)");
        let n = self.bytes / core::mem::size_of::<T>();
        let mut out: Vec<T> = Vec::with_capacity(n);
        if self.bytes > 0 {
            // SAFETY: `out` has capacity for `bytes` bytes, which the copy fills with
            // plain data (every bit pattern is a valid float) before the length is set.
            unsafe {
                ok("cuMemcpyDtoH", cu::cuMemcpyDtoH_v2(out.as_mut_ptr() as *mut c_void, self.ptr, self.bytes))?;
                out.set_len(n);
            }
        }
        Ok(out)
    }
}
