//! What the CUDA path refuses, for every op alike: device memory read as host memory,
//! a missing or old driver and a missing NVRTC (each in a fresh process), one result
//! passed twice to a launch; and `Device`s dropped out of order.

use xla_ffi::cuda::{Arg as KArg, Device, LaunchConfig};
use xla_ffi::testing::cuda::Gpu;
use xla_ffi::testing::{Arg, CallBuilder};
use xla_ffi::{AnyFloat, Buffer, ErrorCode, ResultBuffer};
use xla_ffi_rs_ops::fixture::{elements, Buf};
use xla_ffi_rs_ops::kernels::{KernelFn, Param};
use xla_ffi_rs_ops::registry::OpHandlers;
use xla_ffi_rs_ops::OPS;

use crate::cases::{no_panic_text, targets, with_attrs, Prepared};
use crate::log::{child, in_child};
use crate::{gpu, need_stub};

/// The text of a caught panic's payload.
fn panic_text(p: Box<dyn std::any::Any + Send>) -> String {
    match p.downcast::<String>() {
        Ok(s) => *s,
        Err(p) => p.downcast_ref::<&str>().map(|s| s.to_string()).unwrap_or_default(),
    }
}

/// Device buffers never reach a CPU handler as host memory (the stand-in keeps device
/// memory inaccessible outside kernels, so a host read would fault): the test frame
/// refuses device buffers outside a device call, and on a device call the crate's
/// host guard refuses the CPU handler. Every CPU twin, with its first probe case.
#[test]
fn host_access_of_device_memory_is_refused() {
    need_stub!();
    for t in targets() {
        let p = Prepared::new(&t, t.probes().remove(0));
        let dev = p.upload();
        let results: Vec<Vec<f64>> = p.s.results.iter().map(|(d, _)| vec![0.0; elements(d)]).collect();
        let host_results = || p.s.results.iter().zip(&results).map(|((d, dt), v)| crate::values::V::new(*dt, v).arg(d));
        let mut host = CallBuilder::new();
        for (b, (dims, _)) in dev.iter().zip(&p.s.operands) {
            host = host.arg(b.arg(dims));
        }
        for r in host_results() {
            host = host.ret(r);
        }
        let mut host = with_attrs(host, &p.s.attrs);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| host.run(t.cpu)));
        let msg = panic_text(r.expect_err("a device buffer on a host frame must be refused"));
        assert!(msg.contains("needs a device call"), "{}: {msg}", p.tag());
        let mut device = CallBuilder::new().on_gpu(gpu());
        for (b, (dims, _)) in dev.iter().zip(&p.s.operands) {
            device = device.arg(b.arg(dims));
        }
        for r in host_results() {
            device = device.ret(r);
        }
        let (code, msg) = with_attrs(device, &p.s.attrs).run(t.cpu).unwrap_err();
        assert_eq!(code, ErrorCode::FailedPrecondition, "{}: {msg}", p.tag());
        assert!(msg.contains("device platform"), "{}: {msg}", p.tag());
        // The sizes are checked too: one element more than allocated.
        let (dims, d) = &p.s.operands[0];
        let bytes = elements(dims) * d.byte_width().unwrap();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dev[0].arg(&[elements(dims) as i64 + 1])));
        let msg = panic_text(r.expect_err("dims past the allocation"));
        assert!(msg.contains(&format!("describe more than the {bytes} bytes allocated")), "{}: {msg}", p.tag());
    }
}

/// The error paths, each in a fresh process: the handler `XFR_TARGET` on its first
/// probe case, its error code and message.
#[test]
fn child_error_path() {
    if !in_child() {
        return;
    }
    let want = std::env::var("XFR_WANT").unwrap();
    let name = std::env::var("XFR_TARGET").unwrap();
    let (code, words) = want.split_once(':').unwrap();
    let all = targets();
    let t = all.iter().find(|t| t.name() == name).unwrap();
    let p = Prepared::new(t, t.probes().remove(0));
    let scratch: Vec<Buf> = (t.fx.scratch)(&p.s).remove(0);
    let r = if Gpu::new().is_ok() {
        let dev = p.upload();
        let devs: Vec<_> = dev.iter().collect();
        let (mut call, _outs) = p.cuda_call(gpu(), &devs, &p.s.operands, &p.s.results, &scratch);
        call.run(t.cuda)
    } else {
        // SAFETY: this branch runs only when `Gpu::new` fails (no usable driver or
        // context), so the handler fails at its first driver call, before any launch:
        // the dummy address is never read or written.
        let args = |(dims, d): &Buf| unsafe { Arg::device(*d, dims, 0x10_0000) };
        // SAFETY: as above: the handler fails before handing the dummy stream to a
        // driver.
        let mut call = unsafe { CallBuilder::new().device_stream(0x2000) };
        for b in &p.s.operands {
            call = call.arg(args(b));
        }
        for b in p.s.results.iter().chain(&scratch) {
            call = call.ret(args(b));
        }
        with_attrs(call, &p.s.attrs).run(t.cuda)
    };
    no_panic_text(&r);
    let (c, msg) = r.unwrap_err();
    assert_eq!(format!("{c:?}"), code, "{msg}");
    assert!(msg.contains(&name), "{name:?} not in {msg}");
    for w in words.split('|') {
        assert!(msg.contains(w), "{w:?} not in {msg}");
    }
    println!("error path message: {msg}");
}

#[test]
fn error_paths() {
    need_stub!();
    let stub_dir = std::env::var("XFR_STUB_DRIVER").unwrap();
    type Case<'a> = (&'a str, Vec<(&'a str, String)>, &'a str);
    let cases: [Case; 3] = [
        (
            "missing driver",
            vec![("LD_LIBRARY_PATH", "/nonexistent".into())],
            "FailedPrecondition:CUDA driver library could not be loaded|jax[cuda13]",
        ),
        (
            "driver too old",
            vec![("LD_LIBRARY_PATH", format!("{stub_dir}/old"))],
            "FailedPrecondition:CUDA 11.8|lacks cuCtxGetId|CUDA 12.0 or newer",
        ),
        (
            "missing NVRTC",
            vec![("XLA_FFI_RS_NVRTC", "/nonexistent/libnvrtc.so.13".into())],
            "FailedPrecondition:NVRTC|pip install nvidia-cuda-nvrtc",
        ),
    ];
    for t in targets() {
        for (what, env, want) in &cases {
            let mut env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            env.push(("XFR_WANT", want));
            env.push(("XFR_TARGET", t.name()));
            let (ok, out) = child("errors::child_error_path", &env);
            assert!(ok, "{} {what}: {out}", t.name());
        }
    }
}

/// The first kernel of `OPS` with two results, and its op.
fn two_result_kernel() -> (&'static OpHandlers, &'static KernelFn) {
    OPS.iter()
        .flat_map(|op| op.kernels.iter().map(move |k| (*op, *k)))
        .find(|(_, k)| k.params.iter().filter(|p| **p == Param::Out).count() >= 2)
        .expect("a kernel with two results")
}

/// A handler passing one result as every result of a kernel (`cuda::Arg` is `Copy`):
/// the launch refuses it before anything runs (two outputs of a kernel never overlap
/// in XLA).
#[xla_ffi::handler(target = "test.result_twice", platform = device)]
fn result_twice(ctx: xla_ffi::Context, x: Buffer<AnyFloat>, mut y: ResultBuffer<AnyFloat>) -> xla_ffi::Result<()> {
    let (op, k) = two_result_kernel();
    let inst = k.instances().next().unwrap();
    let out = KArg::from(&mut y);
    let args: Vec<KArg> = k
        .params
        .iter()
        .map(|p| match p {
            Param::In => KArg::from(&x),
            Param::Out => out,
            Param::U64 => KArg::u64(x.len() as u64),
            Param::F64 => KArg::f64(1.0),
        })
        .collect();
    let kernel = k.kernel(ctx.target(), &inst.types[..k.key.len()], &args)?;
    let source = op.sources.iter().find(|s| k.source.ends_with(s.name())).expect("the kernel's source");
    let dev = Device::new(&ctx)?;
    let module = dev.module(source, core::slice::from_ref(&kernel))?;
    dev.launch(&module, &kernel, LaunchConfig::linear(x.len() as u64, 32, 1), &args)
}

#[test]
fn one_result_passed_twice_is_refused() {
    need_stub!();
    let (_, k) = two_result_kernel();
    let inst = k.instances().next().unwrap();
    let d = inst.types[0];
    let x = crate::values::V::new(d, &[0.5; 4]).upload();
    let y = crate::values::garbage(d, 4);
    let mut call = CallBuilder::new().on_gpu(gpu()).arg(x.arg(&[4])).ret(y.arg(&[4]));
    let (code, msg) = call.run(RESULT_TWICE).unwrap_err();
    assert_eq!(code, ErrorCode::InvalidArgument, "{msg}");
    let want = format!("test.result_twice: launch of {}: two result arguments overlap", inst.name());
    assert!(msg.contains(&want), "{want:?} not in {msg}");
}

/// Two `Device`s of one call, used and dropped in creation order (not LIFO).
/// (`Device` has no `Drop` any more; the drops spell out the order that the old
/// push/pop design got wrong.)
#[allow(clippy::drop_non_drop)]
#[xla_ffi::handler(target = "test.two_devices", platform = device)]
fn two_devices(ctx: xla_ffi::Context) -> xla_ffi::Result<()> {
    let a = Device::new(&ctx)?;
    let b = Device::new(&ctx)?;
    a.compute_capability()?;
    b.compute_capability()?;
    drop(a);
    b.compute_capability()?;
    drop(b);
    Ok(())
}

/// Dropping two `Device`s out of order leaves the thread's current context as it was
/// (the old push/pop design popped the wrong one).
#[test]
fn devices_dropped_out_of_order_restore_the_context() {
    need_stub!();
    let g = gpu();
    let mut call = CallBuilder::new().on_gpu(g);
    Gpu::clear_current().unwrap();
    call.run(TWO_DEVICES).unwrap();
    assert_eq!(Gpu::current().unwrap(), 0, "none was current before the call");
    g.make_current().unwrap();
    call.run(TWO_DEVICES).unwrap();
    assert_eq!(Gpu::current().unwrap(), g.context(), "XLA's context was current before the call");
}
