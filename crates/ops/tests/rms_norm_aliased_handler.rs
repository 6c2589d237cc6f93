//! The CPU forward handler with `y` aliased to `x` (`input_output_aliases={0: 0}`,
//! what `rms_norm_inplace` lowers to) gives the bits of the separate call, `y` and
//! `inv_rms` alike, for every dtype pair whose result fits in `x`, on one thread and
//! on several (row blocks split over the pool): one row, no rows, empty rows, odd
//! lengths and lengths that are no multiple of a SIMD width. Results not aliased
//! start as the harness's NaN sentinel, so an element left unwritten shows.

use xla_ffi::half::{bf16, f16};
use xla_ffi::testing::{Arg, AttrArg, CallBuilder};
use xla_ffi::DataType;
use xla_ffi_rs_ops::rms_norm::FWD_CPU;

/// Deterministic values in [-3, 3), as every dtype's bytes.
fn values(len: usize, seed: u64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 6.0 - 3.0
        })
        .collect()
}

fn arg(d: DataType, v: &[f64], dims: &[i64]) -> Arg {
    match d {
        DataType::F64 => Arg::from_slice(v, dims),
        DataType::F32 => Arg::from_slice(&v.iter().map(|&t| t as f32).collect::<Vec<_>>(), dims),
        DataType::BF16 => Arg::from_slice(&v.iter().map(|&t| bf16::from_f64(t)).collect::<Vec<_>>(), dims),
        DataType::F16 => Arg::from_slice(&v.iter().map(|&t| f16::from_f64(t)).collect::<Vec<_>>(), dims),
        _ => unreachable!(),
    }
}

fn zeros(d: DataType, dims: &[i64]) -> Arg {
    match d {
        DataType::F64 => Arg::zeros::<f64>(dims),
        DataType::F32 => Arg::zeros::<f32>(dims),
        DataType::BF16 => Arg::zeros::<bf16>(dims),
        DataType::F16 => Arg::zeros::<f16>(dims),
        _ => unreachable!(),
    }
}

/// The result's bytes, to compare bit for bit.
fn ret_bytes(call: &CallBuilder, i: usize, d: DataType) -> Vec<u64> {
    match d {
        DataType::F64 => call.ret_as::<f64>(i).iter().map(|v| v.to_bits()).collect(),
        DataType::F32 => call.ret_as::<f32>(i).iter().map(|v| v.to_bits() as u64).collect(),
        DataType::BF16 => call.ret_as::<bf16>(i).iter().map(|v| v.to_bits() as u64).collect(),
        DataType::F16 => call.ret_as::<f16>(i).iter().map(|v| v.to_bits() as u64).collect(),
        _ => unreachable!(),
    }
}

fn as_f64(call: &CallBuilder, i: usize, d: DataType) -> Vec<f64> {
    match d {
        DataType::F64 => call.ret_as::<f64>(i),
        DataType::F32 => call.ret_as::<f32>(i).iter().map(|&v| v as f64).collect(),
        _ => unreachable!(),
    }
}

/// Runs the forward on `x` of `rows x n` (and `weight` of `n`), aliased or not,
/// on `threads` pool threads: `(y bits, inv_rms bits)`.
fn run(x_d: DataType, w_d: DataType, rows: usize, n: usize, threads: i64, aliased: bool) -> (Vec<u64>, Vec<f64>) {
    let acc = if x_d == DataType::F64 || w_d == DataType::F64 { DataType::F64 } else { DataType::F32 };
    let (x, w) = (values(rows * n, (rows * 31 + n) as u64), values(n, n as u64 + 7));
    let dims = [rows as i64, n as i64];
    let mut call = CallBuilder::new()
        .arg(arg(x_d, &x, &dims))
        .arg(arg(w_d, &w, &[n as i64]))
        .ret(zeros(x_d, &dims))
        .ret(zeros(acc, &[rows as i64]))
        .attr("eps", AttrArg::scalar(1e-3f64))
        .threads(threads);
    if aliased {
        call = call.alias(0, 0);
    }
    let what = format!("{x_d}/{w_d} {rows}x{n} threads {threads} aliased {aliased}");
    if let Err((code, message)) = call.run(FWD_CPU.handler) {
        panic!("{what}: {code:?} {message}");
    }
    let inv = as_f64(&call, 1, acc);
    let unwritten = inv.iter().filter(|v| !(v.is_finite() && **v > 0.0)).count();
    assert!(unwritten == 0, "{what}: {unwritten} of {rows} inv_rms left unwritten (the NaN sentinel)");
    (ret_bytes(&call, 0, x_d), inv)
}

#[test]
fn aliased_forward_gives_the_separate_calls_bits() {
    use DataType as D;
    // Pairs whose result dtype is x's (the ones rms_norm_inplace accepts).
    let pairs = [
        (D::F64, D::F64),
        (D::F64, D::F32),
        (D::F64, D::BF16),
        (D::F64, D::F16),
        (D::F32, D::F32),
        (D::F32, D::BF16),
        (D::F32, D::F16),
        (D::BF16, D::BF16),
        (D::F16, D::F16),
    ];
    let shapes = [
        (1, 1),
        (1, 7),
        (0, 5),
        (3, 0),
        (1, 15),
        (1, 16),
        (1, 17),
        (3, 31),
        (2, 33),
        (2, 65),
        (9, 129),
        (700, 9),
        (1001, 131),
        (4097, 33),
    ];
    for (x_d, w_d) in pairs {
        for (rows, n) in shapes {
            for threads in [1, 4] {
                let separate = run(x_d, w_d, rows, n, threads, false);
                let aliased = run(x_d, w_d, rows, n, threads, true);
                assert_eq!(aliased.0, separate.0, "{x_d}/{w_d} {rows}x{n} threads {threads}: y");
                let bits = |v: &[f64]| v.iter().map(|t| t.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&aliased.1), bits(&separate.1), "{x_d}/{w_d} {rows}x{n} threads {threads}: inv_rms");
            }
        }
    }
}
