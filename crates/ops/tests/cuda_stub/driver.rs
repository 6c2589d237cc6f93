//! The driver's behaviour, from the stand-in's call log, each in a fresh process:
//! every CUDA handler's probe cases launch on the frame's stream with XLA's context
//! current, load one module per context and kernels, allocate nothing, never
//! synchronize, and make the launches their fixture states; a first call inside a
//! stream capture works.

use std::collections::HashSet;

use xla_ffi::testing::cuda::{DeviceBuffer, Gpu};
use xla_ffi_rs_ops::fixture::{Buf, Sample};

use crate::cases::{no_panic_text, targets, Prepared, Target};
use crate::log::{child, field, in_child, log_lines, log_path, template_name};
use crate::{gpu, need_stub};

/// The probe cases of the first shape of each target (every dtype combination of it).
fn first_probes(t: &Target) -> Vec<Sample> {
    let all = t.probes();
    let first = all[0].operands.iter().map(|b| b.0.clone()).collect::<Vec<_>>();
    all.into_iter().filter(|s| s.operands.iter().map(|b| b.0.clone()).collect::<Vec<_>>() == first).collect()
}

/// One call of `p`'s CUDA handler on `g`, with `unbind`: no context current when it
/// starts (as on an XLA thread that never touched CUDA), and none after; checks the
/// results and returns the call's log lines.
fn logged_call(p: &Prepared, g: &Gpu, dev: &[DeviceBuffer], scratch: &[Buf], unbind: bool) -> Vec<String> {
    let cpu = p.run_cpu();
    let devs: Vec<&DeviceBuffer> = dev.iter().collect();
    let (mut call, outs) = p.cuda_call(g, &devs, &p.s.operands, &p.s.results, scratch);
    if unbind {
        Gpu::clear_current().unwrap();
    }
    let mark = log_lines().len();
    let r = call.run(p.t.cuda);
    let lines = log_lines()[mark..].to_vec();
    if unbind {
        assert_eq!(Gpu::current().unwrap(), 0, "{}: the handler left a context current", p.tag());
        gpu().make_current().unwrap();
    }
    no_panic_text(&r);
    r.unwrap_or_else(|e| panic!("{}: {e:?}", p.tag()));
    p.compare("logged", &p.download(&outs), &cpu);
    lines
}

/// Checks one call's log: the fixture's launches, each on `g`'s stream with context
/// `ctx` current; no allocation, no synchronization; `loads` modules loaded. Returns
/// the launched kernels' names.
fn check_call(p: &Prepared, lines: &[String], g: &Gpu, ctx: &str, scratch: &[Buf]) -> Vec<String> {
    let tag = p.tag();
    let stream = format!("{:p}", g.stream() as *const u8);
    let launches: Vec<&String> = lines.iter().filter(|l| l.starts_with("cuLaunchKernel")).collect();
    let want = (p.t.fx.launches)(&p.s, scratch);
    assert_eq!(launches.len(), want.len(), "{tag}: launches {want:?}: {lines:#?}");
    for (l, (name, grid)) in launches.iter().zip(&want) {
        assert_eq!(field(l, "stream"), Some(stream.as_str()), "{tag}: a launch not on the frame's stream: {l}");
        assert_eq!(field(l, "ctx"), Some(ctx), "{tag}: a launch without XLA's context current: {l}");
        assert_eq!(template_name(field(l, "name").unwrap_or("?")), *name, "{tag}: {l}");
        let g = format!("{},{},{}", grid.0, grid.1, grid.2);
        assert_eq!(field(l, "grid"), Some(g.as_str()), "{tag}: {l}");
    }
    assert!(!lines.iter().any(|l| l.contains("Synchronize")), "{tag}: a handler synchronized: {lines:#?}");
    assert!(!lines.iter().any(|l| l.starts_with("cuMemAlloc")), "{tag}: a handler allocated device memory: {lines:#?}");
    launches.iter().map(|l| field(l, "name").unwrap_or("?").to_string()).collect()
}

/// How many modules a call loaded.
fn loads(lines: &[String]) -> usize {
    lines.iter().filter(|l| l.starts_with("cuModuleLoadData module=")).count()
}

#[test]
fn child_driver_behaviour() {
    if !in_child() {
        return;
    }
    let g = gpu();
    assert_eq!(xla_ffi::cuda::driver_version(), Some(12080));
    let all = targets();
    let cases: Vec<Prepared> =
        all.iter().flat_map(|t| first_probes(t).into_iter().map(move |s| Prepared::new(t, s))).collect();
    // The last scratch variant (the probe's first case of a target with a workspace
    // gives it several rows).
    let scratch = |p: &Prepared| (p.t.fx.scratch)(&p.s).pop().unwrap();
    let mut modules: HashSet<Vec<String>> = HashSet::new();
    for pass in 0..2 {
        for p in &cases {
            let (dev, sc) = (p.upload(), scratch(p));
            let lines = logged_call(p, g, &dev, &sc, true);
            let mut kernels = check_call(p, &lines, g, "1", &sc);
            kernels.sort();
            // One module per (context, kernels): loaded by the first call that
            // launches those kernels, never again.
            let new = pass == 0 && !kernels.is_empty() && modules.insert(kernels);
            assert_eq!(loads(&lines), new as usize, "{} pass {pass}: {lines:#?}", p.tag());
        }
    }
    // A second context (another XLA client) loads its own module, once, and launches
    // on its own stream with it current.
    let other = Gpu::new_context().unwrap();
    gpu().make_current().unwrap();
    let mut other_modules: HashSet<Vec<String>> = HashSet::new();
    for t in &all {
        let p = Prepared::new(t, first_probes(t).remove(0));
        let sc = scratch(&p);
        for pass in 0..2 {
            let dev = p.upload();
            let lines = logged_call(&p, &other, &dev, &sc, false);
            let mut kernels = check_call(&p, &lines, &other, "2", &sc);
            kernels.sort();
            let new = pass == 0 && !kernels.is_empty() && other_modules.insert(kernels);
            assert_eq!(loads(&lines), new as usize, "{} on another context, pass {pass}: {lines:#?}", p.tag());
        }
    }
}

#[test]
fn driver_behaviour() {
    need_stub!();
    // A CUDA 12.8 driver, older than the NVRTC 13 that compiles the CUBINs: the
    // handlers need only CUDA 12.0's entry points.
    let (ok, out) = child(
        "driver::child_driver_behaviour",
        &[("XFR_STUB_LOG", &log_path("behaviour")), ("XFR_STUB_DRIVER_VERSION", "12080")],
    );
    assert!(ok, "{out}");
}

/// One handler's first call in this (fresh) process, inside a stream capture, as
/// when XLA records a command buffer; then the graph is replayed and the results
/// compared with the CPU twin's. `XFR_TARGET` picks the handler, its first probe case.
#[test]
fn child_first_call_inside_capture() {
    if !in_child() {
        return;
    }
    let name = std::env::var("XFR_TARGET").unwrap();
    let all = targets();
    let t = all.iter().find(|t| t.name() == name).unwrap();
    let p = Prepared::new(t, t.probes().remove(0));
    let cpu = p.run_cpu();
    let dev = p.upload();
    let devs: Vec<&DeviceBuffer> = dev.iter().collect();
    let scratch = (t.fx.scratch)(&p.s).remove(0);
    let (mut call, outs) = p.cuda_call(gpu(), &devs, &p.s.operands, &p.s.results, &scratch);
    gpu().begin_capture().unwrap();
    let r = call.run(t.cuda);
    no_panic_text(&r);
    r.unwrap();
    gpu().end_capture_and_launch().unwrap();
    let lines = log_lines();
    assert!(!lines.iter().any(|l| l.starts_with("capture_violation")), "{lines:#?}");
    assert!(loads(&lines) > 0, "the first call loaded no module: {lines:#?}");
    p.compare("captured", &p.download(&outs), &cpu);
}

#[test]
fn first_call_inside_capture() {
    need_stub!();
    for t in targets() {
        let name = t.name();
        let (ok, out) = child(
            "driver::child_first_call_inside_capture",
            &[("XFR_STUB_LOG", &log_path(&format!("capture-{name}"))), ("XFR_TARGET", name)],
        );
        assert!(ok, "{name}: {out}");
    }
}
