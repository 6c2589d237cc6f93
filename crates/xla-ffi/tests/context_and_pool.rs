//! The execution context (device ordinal, run id, stream, scratch), XLA's thread
//! pool, and one handler called from several threads at once.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{expect_err, expect_ok};
use xla_ffi::testing::{Arg, AttrArg, CallBuilder, FakeApi};
use xla_ffi::{handler, Attr, Buffer, Context, ErrorCode, Parts, Result, ResultBuffer, Stage};

/// out = [device ordinal, run id, api major, api minor, num threads, stage is execute]
#[handler(target = "ctx.info")]
fn ctx_info(ctx: Context, mut out: ResultBuffer<i64>) -> Result<()> {
    assert_eq!(ctx.target(), "ctx.info");
    let v = [
        ctx.device_ordinal()? as i64,
        ctx.run_id()?,
        ctx.api_version().0 as i64,
        ctx.api_version().1 as i64,
        ctx.thread_pool().num_threads() as i64,
        (ctx.stage() == Some(Stage::Execute)) as i64,
    ];
    for (o, v) in out.as_uninit()?.iter_mut().zip(v) {
        o.write(v);
    }
    Ok(())
}

#[test]
fn device_ordinal_run_id_version_threads() {
    let mut call = CallBuilder::new().ret(Arg::zeros::<i64>(&[6]));
    expect_ok(call.run(CTX_INFO));
    assert_eq!(call.ret_as::<i64>(0), vec![0, 42, 0, 5, 2, 1]);
    let mut call = CallBuilder::new().threads(8).ret(Arg::zeros::<i64>(&[6]));
    expect_ok(call.run(CTX_INFO));
    assert_eq!(call.ret_as::<i64>(0)[4], 8);
    // A pool reporting 0 or a negative count counts as one thread.
    let mut call = CallBuilder::new().threads(0).ret(Arg::zeros::<i64>(&[6]));
    expect_ok(call.run(CTX_INFO));
    assert_eq!(call.ret_as::<i64>(0)[4], 1);
    let mut call = CallBuilder::new().threads(-3).ret(Arg::zeros::<i64>(&[6]));
    expect_ok(call.run(CTX_INFO));
    assert_eq!(call.ret_as::<i64>(0)[4], 1);
}

#[handler(target = "ctx.stream")]
fn ctx_stream(ctx: Context) -> Result<()> {
    let s = ctx.stream()?;
    let _ = s.as_raw();
    Ok(())
}

#[handler(target = "ctx.scratch")]
fn ctx_scratch(ctx: Context) -> Result<()> {
    let s = ctx.scratch(1024, 16)?;
    let _ = (s.as_ptr(), s.size());
    Ok(())
}

#[test]
fn stream_on_cpu_is_unimplemented() {
    let msg = expect_err(
        CallBuilder::new().run(CTX_STREAM),
        common::runtime_code(ErrorCode::Unimplemented),
        &["ctx.stream", "GPU context is not available"],
    );
    assert!(msg.starts_with("ctx.stream: "), "{msg}");
}

#[test]
fn scratch_on_cpu_is_refused_as_xla_cpu_refuses_it() {
    // XLA:CPU has the slot and answers INVALID_ARGUMENT (observed on jaxlib 0.12).
    let msg = expect_err(
        CallBuilder::new().run(CTX_SCRATCH),
        common::runtime_code(ErrorCode::InvalidArgument),
        &["ctx.scratch", "GPU context is not available"],
    );
    assert!(msg.starts_with("ctx.scratch: "), "{msg}");
}

#[test]
fn scratch_without_allocator_is_unimplemented() {
    // A table that ends before the DeviceMemory_Allocate slot.
    let end = core::mem::offset_of!(xla_ffi::sys::XLA_FFI_Api, XLA_FFI_DeviceMemory_Allocate);
    expect_err(
        CallBuilder::new().api(FakeApi::new(5).with_struct_size(end)).run(CTX_SCRATCH),
        ErrorCode::Unimplemented,
        &["ctx.scratch", "XLA_FFI_DeviceMemory_Allocate"],
    );
}

// ---- ThreadPool::for_each ----

/// Runs `n` tasks; out = [tasks run exactly once, tasks run, n]
#[handler(target = "ctx.for_each")]
fn ctx_for_each(ctx: Context, n: Attr<u32>, mut out: ResultBuffer<i64>) -> Result<()> {
    let n = *n as usize;
    let counts: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
    let runs = AtomicUsize::new(0);
    ctx.thread_pool().for_each(n, |i| {
        counts[i].fetch_add(1, Ordering::Relaxed);
        runs.fetch_add(1, Ordering::Relaxed);
    })?;
    let once = counts.iter().filter(|c| c.load(Ordering::Relaxed) == 1).count();
    let v = [once as i64, runs.into_inner() as i64, n as i64];
    for (o, v) in out.as_uninit()?.iter_mut().zip(v) {
        o.write(v);
    }
    Ok(())
}

#[test]
fn for_each_runs_every_index_exactly_once() {
    for threads in [1i64, 4] {
        for n in [0usize, 1, 7, 1000] {
            let mut call =
                CallBuilder::new().threads(threads).ret(Arg::zeros::<i64>(&[3])).attr("n", AttrArg::scalar(n as i64));
            expect_ok(call.run(CTX_FOR_EACH));
            let n = n as i64;
            assert_eq!(call.ret_as::<i64>(0), vec![n, n, n], "threads = {threads}, n = {n}");
            // Helpers are scheduled only when there is a pool and more than one task.
            let expect_scheduled = if threads > 1 && n > 1 { (threads.min(n) - 1) as usize } else { 0 };
            assert_eq!(call.scheduled(), expect_scheduled, "threads = {threads}, n = {n}");
        }
    }
}

/// y = 3 x + 1, written by pool tasks through disjoint chunks of `chunk` elements.
#[handler(target = "ctx.parts")]
fn ctx_parts(ctx: Context, x: Buffer<f32>, mut y: ResultBuffer<f32>, chunk: Attr<i64>) -> Result<()> {
    let x = x.as_slice()?;
    let parts = Parts::new(y.as_uninit()?, *chunk as usize);
    ctx.thread_pool().for_each(parts.len(), |i| {
        let (start, out) = parts.take(i);
        for (k, o) in out.iter_mut().enumerate() {
            o.write(3.0 * x[start + k] + 1.0);
        }
    })
}

#[test]
fn for_each_with_disjoint_chunks() {
    for (threads, len, chunk) in
        [(4i64, 1000usize, 64i64), (4, 1000, 1), (1, 1000, 64), (4, 5, 100), (4, 0, 8), (3, 17, 0)]
    {
        let x: Vec<f32> = (0..len).map(|i| i as f32).collect();
        let mut call = CallBuilder::new()
            .threads(threads)
            .arg(Arg::from_slice(&x, &[len as i64]))
            .ret(Arg::zeros::<f32>(&[len as i64]))
            .attr("chunk", AttrArg::scalar(chunk));
        expect_ok(call.run(CTX_PARTS));
        let want: Vec<f32> = x.iter().map(|&v| 3.0 * v + 1.0).collect();
        assert_eq!(call.ret_as::<f32>(0), want, "threads = {threads}, len = {len}, chunk = {chunk}");
    }
}

// ---- one handler, four threads at once ----

/// y = x * k + run id, using the pool.
#[handler(target = "ctx.threaded")]
fn ctx_threaded(ctx: Context, x: Buffer<f64>, mut y: ResultBuffer<f64>, k: Attr<f64>) -> Result<()> {
    let x = x.as_slice()?;
    let run = ctx.run_id()? as f64;
    let parts = Parts::new(y.as_uninit()?, 100);
    ctx.thread_pool().for_each(parts.len(), |i| {
        let (start, out) = parts.take(i);
        for (j, o) in out.iter_mut().enumerate() {
            o.write(x[start + j] * *k + run);
        }
    })
}

#[test]
fn one_handler_from_four_threads_at_once() {
    let barrier = std::sync::Barrier::new(4);
    std::thread::scope(|s| {
        for t in 0..4 {
            let barrier = &barrier;
            s.spawn(move || {
                // Shorter under Miri (still three or four parts of 100 for the pool: its race detector
                // sees the same sharing).
                let len = if cfg!(miri) { 250 + t * 37 } else { 1000 + t * 37 };
                let x: Vec<f64> = (0..len).map(|i| (i * (t + 1)) as f64).collect();
                let k = t as f64 + 0.5;
                let mut calls: Vec<CallBuilder> = (0..if cfg!(miri) { 2 } else { 5 })
                    .map(|_| {
                        CallBuilder::new()
                            .threads(3)
                            .arg(Arg::from_slice(&x, &[len as i64]))
                            .ret(Arg::zeros::<f64>(&[len as i64]))
                            .attr("k", AttrArg::scalar(k))
                    })
                    .collect();
                barrier.wait();
                for call in calls.iter_mut() {
                    expect_ok(call.run(CTX_THREADED));
                }
                let want: Vec<f64> = x.iter().map(|&v| v * k + 42.0).collect();
                for call in &calls {
                    assert_eq!(call.ret_as::<f64>(0), want, "thread {t}");
                }
            });
        }
    });
}

#[xla_ffi::handler(target = "ctx.host_only")]
fn ctx_host_only(x: xla_ffi::Buffer<f32>) -> xla_ffi::Result<()> {
    let _ = x.as_slice()?;
    Ok(())
}

#[test]
fn host_handler_refuses_a_device_platform() {
    use xla_ffi::testing::{Arg, CallBuilder, FakeApi};
    let mut call = CallBuilder::new().api(FakeApi::device_like(5)).arg(Arg::from_slice(&[1.0f32], &[1]));
    let (code, msg) = call.run(CTX_HOST_ONLY).unwrap_err();
    assert_eq!(code, xla_ffi::ErrorCode::FailedPrecondition);
    assert!(msg.contains("ctx.host_only") && msg.contains("device platform"), "{msg}");
    // The same handler on a CPU-like runtime runs.
    let mut ok = CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1]));
    ok.run(CTX_HOST_ONLY).unwrap();
}

/// Takes part `again` twice: a caller bug that must become an INTERNAL error.
#[handler(target = "ctx.parts_twice")]
fn ctx_parts_twice(mut y: ResultBuffer<f32>, again: Attr<i64>) -> Result<()> {
    let parts = Parts::new(y.as_uninit()?, 1);
    for i in 0..parts.len() {
        parts.take(i).1[0].write(i as f32);
    }
    let _ = parts.take(*again as usize);
    Ok(())
}

#[test]
fn taking_a_part_twice_or_out_of_range_is_an_internal_error() {
    // 130 parts: more than one 64-bit word of bookkeeping.
    for (again, words) in [(0i64, "part 0 taken twice"), (129, "part 129 taken twice"), (130, "part 130 out of range")]
    {
        let mut call = CallBuilder::new().ret(Arg::zeros::<f32>(&[130])).attr("again", AttrArg::scalar(again));
        expect_err(call.run(CTX_PARTS_TWICE), ErrorCode::Internal, &["ctx.parts_twice", "panicked", words]);
        let want: Vec<f32> = (0..130).map(|i| i as f32).collect();
        assert_eq!(call.ret_as::<f32>(0), want);
    }
}

#[test]
fn scratch_on_the_device_like_runtime_says_it_has_no_device_memory() {
    let msg = expect_err(
        CallBuilder::new().api(FakeApi::device_like(5)).run(CTX_SCRATCH_DEVICE),
        common::runtime_code(ErrorCode::Unimplemented),
        &["ctx.scratch_device", "allocates no device memory"],
    );
    assert!(msg.starts_with("ctx.scratch_device: "), "{msg}");
}

#[handler(target = "ctx.scratch_device", platform = device)]
fn ctx_scratch_device(ctx: Context) -> Result<()> {
    let s = ctx.scratch(1024, 16)?;
    let _ = (s.as_ptr(), s.size());
    Ok(())
}
