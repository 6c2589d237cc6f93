//! Every CUDA target of every op against its CPU twin, over the cases its declaration
//! and fixture make: the results, their determinism, the operands and results of a
//! wrong shape or dtype, the scratch results the handler refuses.

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

use xla_ffi::decl::infer;
use xla_ffi::testing::cuda::DeviceBuffer;
use xla_ffi::{DataType, ErrorCode};
use xla_ffi_rs_ops::fixture::{elements, Buf};

use crate::cases::{no_panic_text, targets, Prepared, Target};
use crate::values::V;
use crate::{gpu, need_stub};

/// How many checks of each kind ran.
#[derive(Default)]
struct Counts {
    compared: AtomicUsize,
    repeated: AtomicUsize,
    refused: AtomicUsize,
    scratch_refused: AtomicUsize,
    /// The (target, operand dtypes) whose wrong variants ran.
    refused_for: Mutex<HashSet<(&'static str, Vec<DataType>)>>,
}

/// One case: the CPU twin, the CUDA handler with each scratch variant (and again, for
/// the results the fixture says are deterministic), then the hostile calls.
fn run_case(p: &Prepared, counts: &Counts) {
    let cpu = p.run_cpu();
    let dev = p.upload();
    let variants = (p.t.fx.scratch)(&p.s);
    for (v, scratch) in variants.iter().enumerate() {
        let what = format!("scratch {scratch:?}");
        let cuda = p.run_cuda(gpu(), &dev, scratch);
        p.compare(&what, &cuda, &cpu);
        counts.compared.fetch_add(1, Relaxed);
        if v == 0 && !p.t.fx.deterministic.is_empty() {
            let again = p.run_cuda(gpu(), &dev, scratch);
            for &k in p.t.fx.deterministic {
                assert_eq!(cuda[k].bits(), again[k].bits(), "{}: result {k} differs between two runs", p.tag());
            }
            counts.repeated.fetch_add(1, Relaxed);
        }
    }
    // The hostile calls once per dtype combination (see `claim_refused`).
    if claim_refused(p, counts) {
        refused(p, &dev, &variants[0], counts);
    }
    for bad in (p.t.fx.bad_scratch)(&p.s) {
        let devs: Vec<&DeviceBuffer> = dev.iter().collect();
        let (mut call, _outs) = p.cuda_call(gpu(), &devs, &p.s.operands, &p.s.results, &bad.scratch);
        let r = call.run(p.t.cuda);
        no_panic_text(&r);
        let (code, msg) = r.expect_err(&format!("{}: scratch {:?} must be refused", p.tag(), bad.scratch));
        assert_eq!(code, ErrorCode::InvalidArgument, "{}: {msg}", p.tag());
        for w in &bad.words {
            assert!(msg.contains(w.as_str()), "{}: {w:?} not in {msg}", p.tag());
        }
        counts.scratch_refused.fetch_add(1, Relaxed);
    }
}

/// The largest buffer of a case whose wrong variants [`refused`] calls.
const REFUSED_UP_TO: usize = 1 << 14;

/// Whether [`refused`] runs for this case: the first of its target and dtypes whose
/// buffers are neither empty nor large (every axis of at least 2, at most
/// [`REFUSED_UP_TO`] elements). What the handlers check before any launch does not
/// depend on the size, and a dozen wrong frames of a million elements (in a debug
/// build) cost more than the case.
fn claim_refused(p: &Prepared, counts: &Counts) -> bool {
    let bufs = || p.s.operands.iter().chain(&p.s.results);
    let fits = bufs().all(|b| b.0.iter().all(|&d| d >= 2) && elements(&b.0) <= REFUSED_UP_TO);
    let key = (p.t.name(), p.s.operands.iter().map(|b| b.1).collect::<Vec<_>>());
    fits && counts.refused_for.lock().unwrap().insert(key)
}

/// One axis shorter or longer by `by` at the end (a scalar becomes `[1]`); `None`
/// where that is not a shape.
fn reshaped(dims: &[i64], by: i64) -> Option<Vec<i64>> {
    let Some((&last, lead)) = dims.split_last() else { return (by < 0).then(|| vec![1]) };
    (last + by >= 0).then(|| [lead, &[last + by]].concat())
}

/// Each operand one element short on its last axis (a scalar: `[1]`), or of another
/// dtype it accepts that the dtype rule refuses; each result one element short or
/// long: both handlers refuse it with the same message, naming the target and the
/// buffer (the one changed, or the one it is checked against).
fn refused(p: &Prepared, dev: &[DeviceBuffer], scratch: &[Buf], counts: &Counts) {
    let t = p.t;
    let (op_names, res_names) = t.names();
    let sig = t.cpu.declaration.signature();
    let dtypes: Vec<DataType> = p.s.operands.iter().map(|b| b.1).collect();
    let shapes: Vec<Vec<i64>> = p.s.operands.iter().map(|b| b.0.clone()).collect();
    // (what, operands, results, a buffer the message names)
    let mut bad: Vec<(String, Vec<Buf>, Vec<Buf>, usize)> = Vec::new();
    for (k, (dims, d)) in p.s.operands.iter().enumerate() {
        if let Some(short) = reshaped(dims, -1) {
            let mut ops = p.s.operands.clone();
            ops[k].0 = short;
            bad.push((format!("operand {k} ({}) of shape {:?}", op_names[k], ops[k].0), ops, p.s.results.clone(), k));
        }
        let other = sig.operands[k].accepts.iter().copied().find(|&o| {
            let mut ds = dtypes.clone();
            ds[k] = o;
            o != *d && infer(&sig, &shapes, &ds).is_err()
        });
        if let Some(o) = other {
            let mut ops = p.s.operands.clone();
            ops[k].1 = o;
            bad.push((format!("operand {k} ({}) of dtype {o}", op_names[k]), ops, p.s.results.clone(), k));
        }
    }
    for (k, (dims, _)) in p.s.results.iter().enumerate() {
        for by in [-1, 1] {
            if let Some(dims) = reshaped(dims, by) {
                let mut res = p.s.results.clone();
                res[k].0 = dims;
                let what = format!("result {k} ({}) of shape {:?}", res_names[k], res[k].0);
                bad.push((what, p.s.operands.clone(), res, usize::MAX - k));
            }
        }
    }
    for (what, ops, res, named) in bad {
        // The values, cut to the shape and rounded to the dtype.
        let values: Vec<V> = ops
            .iter()
            .zip(&p.inputs)
            .map(|((dims, d), v)| {
                let f = v.f64s();
                V::new(*d, &f[..elements(dims).min(f.len())])
            })
            .collect();
        let host: Vec<(Buf, &V)> = ops.iter().cloned().zip(&values).collect();
        let mut cpu = p.cpu_call(&host, &res);
        let cpu_r = cpu.run(t.cpu);
        // On the device: the uploaded operand where only its shape changed (it fits).
        let fresh: Vec<Option<DeviceBuffer>> = ops
            .iter()
            .zip(&p.s.operands)
            .zip(&values)
            .map(|(((_, d), (_, was)), v)| (d != was).then(|| v.upload()))
            .collect();
        let own: Vec<&DeviceBuffer> = fresh.iter().zip(dev).map(|(f, d)| f.as_ref().unwrap_or(d)).collect();
        let (mut call, _outs) = p.cuda_call(gpu(), &own, &ops, &res, scratch);
        let cuda_r = call.run(t.cuda);
        no_panic_text(&cuda_r);
        let ctx = format!("{}: {what}", p.tag());
        let (code, msg) = cuda_r.expect_err(&format!("{ctx}: the CUDA handler must refuse it"));
        let (cpu_code, cpu_msg) = cpu_r.expect_err(&format!("{ctx}: the CPU handler must refuse it"));
        assert_eq!(code, ErrorCode::InvalidArgument, "{ctx}: {msg}");
        assert_eq!((code, &msg), (cpu_code, &cpu_msg), "{ctx}: the CUDA and CPU handlers word it the same");
        assert!(msg.contains(&format!("{}: ", t.name())), "{ctx}: {msg}");
        let name = if named < usize::MAX / 2 {
            format!("operand {named} ({})", op_names[named])
        } else {
            let k = usize::MAX - named;
            format!("result {k} ({})", res_names[k])
        };
        assert!(msg.contains(&name), "{ctx}: {name:?} not in {msg}");
        counts.refused.fetch_add(1, Relaxed);
    }
}

/// Which cases of [`every_cuda_target_matches_its_cpu_twin`] this process runs:
/// `XFR_STUB_CASES=i/n` takes every n-th case from the i-th (0-based), so that n
/// processes side by side run them all (the stand-in driver runs one kernel at a
/// time per process); unset, every case.
fn case_share() -> (usize, usize) {
    let Some(v) = std::env::var_os("XFR_STUB_CASES") else { return (0, 1) };
    let v = v.to_string_lossy();
    let parsed = v.split_once('/').and_then(|(i, n)| Some((i.parse().ok()?, n.parse().ok()?)));
    match parsed {
        Some((i, n)) if i < n => (i, n),
        _ => panic!("XFR_STUB_CASES: expected i/n with 0 <= i < n (as 1/2), got {v:?}"),
    }
}

/// Every CUDA target of every op against its CPU twin (two threads take the cases
/// in turn; `XFR_STUB_CASES` splits them between processes).
#[test]
fn every_cuda_target_matches_its_cpu_twin() {
    need_stub!();
    let all = targets();
    let (share, shares) = case_share();
    let jobs: Vec<(&Target, xla_ffi_rs_ops::fixture::Sample)> = all
        .iter()
        .flat_map(|t| t.cases().into_iter().map(move |s| (t, s)))
        .enumerate()
        .filter_map(|(k, job)| (k % shares == share).then_some(job))
        .collect();
    assert!(!jobs.is_empty(), "no case for this share ({share}/{shares})");
    let next = AtomicUsize::new(0);
    let counts = Counts::default();
    // (target, cases, seconds)
    let per_target: Mutex<Vec<(&str, usize, f64)>> = Mutex::new(all.iter().map(|t| (t.name(), 0, 0.0)).collect());
    std::thread::scope(|sc| {
        for _ in 0..2 {
            sc.spawn(|| loop {
                let i = next.fetch_add(1, Relaxed);
                let Some((t, s)) = jobs.get(i) else { break };
                let start = std::time::Instant::now();
                run_case(&Prepared::new(t, s.clone()), &counts);
                let secs = start.elapsed().as_secs_f64();
                let mut per = per_target.lock().unwrap();
                per.iter_mut().filter(|e| e.0 == t.name()).for_each(|e| (e.1, e.2) = (e.1 + 1, e.2 + secs));
            });
        }
    });
    let per = per_target.into_inner().unwrap();
    println!(
        "(target, cases, seconds) {per:?}; compared {}, repeated {}, refused {}, scratch refused {}",
        counts.compared.load(Relaxed),
        counts.repeated.load(Relaxed),
        counts.refused.load(Relaxed),
        counts.scratch_refused.load(Relaxed)
    );
}

/// Handlers run concurrently from several threads (as XLA runs them): first calls
/// racing to compile and load the same modules, on one stream; each thread takes
/// every sixth probe case of every target.
#[test]
fn concurrent_calls_from_threads() {
    need_stub!();
    let all = targets();
    std::thread::scope(|sc| {
        for th in 0..6 {
            let all = &all;
            sc.spawn(move || {
                for t in all {
                    for s in t.probes().into_iter().skip(th).step_by(6) {
                        let p = Prepared::new(t, s);
                        let cpu = p.run_cpu();
                        let scratch = &(t.fx.scratch)(&p.s)[0];
                        let cuda = p.run_cuda(gpu(), &p.upload(), scratch);
                        p.compare("from a thread", &cuda, &cpu);
                    }
                }
            });
        }
    });
}

/// Without the stand-in too: every CUDA handler has a fixture entry whose groups and
/// probe make cases, with inputs of the operands' shapes and the launches stated.
#[test]
fn every_cuda_handler_has_a_fixture_that_makes_cases() {
    for t in targets() {
        let cases = t.cases();
        let probes = t.probes();
        for s in cases.iter().chain(&probes).filter(|s| elements(&s.operands[0].0) < 1 << 14) {
            let p = Prepared::new(&t, s.clone());
            assert!(!(t.fx.scratch)(&p.s).is_empty(), "{}: no scratch variant", p.tag());
        }
        assert!(!probes.is_empty() && !cases.is_empty(), "{}", t.name());
    }
}
