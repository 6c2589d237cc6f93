//! Decoding operands and results: counts, dtypes, ranks, empty and rank-0 buffers,
//! alignment, and input/output aliasing.

mod common;

use common::{expect_err, expect_ok};
use xla_ffi::half::{bf16, f16};
use xla_ffi::testing::{Arg, CallBuilder};
use xla_ffi::{handler, AnyFloat, Buffer, DataType, ErrorCode, InOut, Result, ResultBuffer};

/// out = x + y, float32.
#[handler(target = "dec.add")]
fn dec_add(x: Buffer<f32>, y: Buffer<f32>, mut out: ResultBuffer<f32>) -> Result<()> {
    let (x, y) = (x.as_slice()?, y.as_slice()?);
    for ((o, &a), &b) in out.as_uninit()?.iter_mut().zip(x).zip(y) {
        o.write(a + b);
    }
    Ok(())
}

fn add_call(x: Arg, y: Arg, out: Arg) -> CallBuilder {
    CallBuilder::new().arg(x).arg(y).ret(out)
}

fn f32s(v: &[f32]) -> Arg {
    Arg::from_slice(v, &[v.len() as i64])
}

#[test]
fn add_works() {
    let mut call = add_call(f32s(&[1.0, 2.0, 3.0]), f32s(&[10.0, 20.0, 30.0]), Arg::zeros::<f32>(&[3]));
    expect_ok(call.run(DEC_ADD));
    assert_eq!(call.ret_as::<f32>(0), vec![11.0, 22.0, 33.0]);
}

#[test]
fn too_few_operands() {
    let mut call = CallBuilder::new().arg(f32s(&[1.0])).ret(Arg::zeros::<f32>(&[1]));
    expect_err(call.run(DEC_ADD), ErrorCode::InvalidArgument, &["dec.add", "expected 2 operands, got 1"]);
}

#[test]
fn too_many_operands() {
    let mut call = add_call(f32s(&[1.0]), f32s(&[1.0]), Arg::zeros::<f32>(&[1])).arg(f32s(&[1.0]));
    let msg = expect_err(call.run(DEC_ADD), ErrorCode::InvalidArgument, &["dec.add", "expected 2 operands, got 3"]);
    assert!(!msg.contains("result"), "result count was right: {msg}");
}

#[test]
fn too_few_results() {
    let mut call = CallBuilder::new().arg(f32s(&[1.0])).arg(f32s(&[1.0]));
    expect_err(call.run(DEC_ADD), ErrorCode::InvalidArgument, &["dec.add", "expected 1 result, got 0"]);
}

#[test]
fn too_many_results() {
    let mut call = add_call(f32s(&[1.0]), f32s(&[1.0]), Arg::zeros::<f32>(&[1])).ret(Arg::zeros::<f32>(&[1]));
    expect_err(call.run(DEC_ADD), ErrorCode::InvalidArgument, &["dec.add", "expected 1 result, got 2"]);
}

#[test]
fn wrong_operand_and_result_counts_reported_together() {
    let mut call = CallBuilder::new();
    expect_err(
        call.run(DEC_ADD),
        ErrorCode::InvalidArgument,
        &["dec.add", "expected 2 operands, got 0", "expected 1 result, got 0"],
    );
}

#[test]
fn wrong_operand_dtype() {
    let mut call = add_call(f32s(&[1.0]), Arg::from_slice(&[1i32], &[1]), Arg::zeros::<f32>(&[1]));
    let msg = expect_err(
        call.run(DEC_ADD),
        ErrorCode::InvalidArgument,
        &["dec.add", "operand 1 (y)", "expected dtype float32", "got int32"],
    );
    assert!(msg.starts_with("dec.add: "), "{msg}");
    assert!(!msg.contains("operand 0"), "operand 0 was fine: {msg}");
}

#[test]
fn wrong_result_dtype() {
    let mut call = add_call(f32s(&[1.0]), f32s(&[1.0]), Arg::zeros::<f64>(&[1]));
    expect_err(
        call.run(DEC_ADD),
        ErrorCode::InvalidArgument,
        &["dec.add", "result 0 (out)", "expected dtype float32", "got float64"],
    );
}

#[test]
fn several_bad_buffers_in_one_error() {
    let mut call = add_call(Arg::from_slice(&[1i32], &[1]), Arg::from_slice(&[1.0f64], &[1]), Arg::zeros::<i8>(&[1]));
    let msg = expect_err(
        call.run(DEC_ADD),
        ErrorCode::InvalidArgument,
        &[
            "dec.add",
            "3 problems",
            "operand 0 (x): expected dtype float32, got int32",
            "operand 1 (y): expected dtype float32, got float64",
            "result 0 (out): expected dtype float32, got int8",
        ],
    );
    assert!(msg.starts_with("dec.add: "), "{msg}");
}

// ---- AnyFloat + dispatch_float! ----

/// The float types, computed on in f64 (the test's own: `xla_ffi` has no arithmetic).
trait Real: Copy + Into<f64> {
    fn from_f64(v: f64) -> Self;
}
impl Real for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}
impl Real for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
}
impl Real for f16 {
    fn from_f64(v: f64) -> Self {
        f16::from_f64(v)
    }
}
impl Real for bf16 {
    fn from_f64(v: f64) -> Self {
        bf16::from_f64(v)
    }
}

fn scale_kernel<T: Real>(x: &[T], k: f64, y: &mut [core::mem::MaybeUninit<T>]) {
    for (o, &v) in y.iter_mut().zip(x) {
        o.write(T::from_f64(v.into() * k));
    }
}

#[handler(target = "dec.scale")]
fn dec_scale(x: Buffer<AnyFloat>, mut y: ResultBuffer<AnyFloat>) -> Result<()> {
    y.expect_dims(x.dims(), "the shape of x")?;
    y.expect_dtype(x.dtype(), "the dtype of x")?;
    xla_ffi::dispatch_float!(x.dtype(),
        T => scale_kernel::<T>(x.typed()?, 3.0, y.typed_uninit()?),
        else d => return Err(xla_ffi::Error::internal(format!("{d} is not a float"))));
    Ok(())
}

fn run_scale<T: Real + xla_ffi::Element>(v: &[f32]) -> Vec<T> {
    let xs: Vec<T> = v.iter().map(|&f| T::from_f64(f64::from(f))).collect();
    let mut call =
        CallBuilder::new().arg(Arg::from_slice(&xs, &[xs.len() as i64])).ret(Arg::zeros::<T>(&[xs.len() as i64]));
    expect_ok(call.run(DEC_SCALE));
    call.ret_as::<T>(0)
}

#[test]
fn any_float_accepts_all_four_float_types() {
    let v = [1.0f32, -2.5, 0.25];
    let want = [3.0f64, -7.5, 0.75];
    let f16s: Vec<f64> = run_scale::<f16>(&v).iter().map(|x| x.to_f64()).collect();
    let bf16s: Vec<f64> = run_scale::<bf16>(&v).iter().map(|x| x.to_f64()).collect();
    let f32s: Vec<f64> = run_scale::<f32>(&v).iter().map(|&x| x as f64).collect();
    let f64s: Vec<f64> = run_scale::<f64>(&v);
    for got in [f16s, bf16s, f32s, f64s] {
        assert_eq!(got, want);
    }
}

#[test]
fn any_float_rejects_int32() {
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1i32, 2], &[2])).ret(Arg::zeros::<f32>(&[2]));
    expect_err(
        call.run(DEC_SCALE),
        ErrorCode::InvalidArgument,
        &["dec.scale", "operand 0 (x)", "expected dtype float16, bfloat16, float32 or float64", "got int32"],
    );
}

/// Was "got dtype(20)": the handler's check names XLA FFI's float8, float4 and
/// sub-byte types as ml_dtypes and jax.numpy do.
#[test]
fn any_float_rejects_float8_float4_and_int4_by_name() {
    for (d, name) in [
        (DataType::F8E4M3FN, "float8_e4m3fn"),
        (DataType::F8E8M0FNU, "float8_e8m0fnu"),
        (DataType::F4E2M1FN, "float4_e2m1fn"),
        (DataType::S4, "int4"),
        (DataType::U2, "uint2"),
    ] {
        let mut call = CallBuilder::new().arg(Arg::raw(d, &[2], 1)).ret(Arg::zeros::<f32>(&[2]));
        expect_err(
            call.run(DEC_SCALE),
            ErrorCode::InvalidArgument,
            &["dec.scale", "operand 0 (x)", &format!("float32 or float64, got {name}")],
        );
    }
}

#[test]
fn any_float_mismatched_result_dtype_is_reported_by_expect_dtype() {
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f64>(&[2]));
    expect_err(
        call.run(DEC_SCALE),
        ErrorCode::InvalidArgument,
        &["dec.scale", "result 0 (y)", "expected dtype float32", "got float64"],
    );
}

#[test]
fn expect_dims_refuses_a_shape_of_another_rank_with_the_same_leading_dims() {
    // y's shape starts with x's ([2, 3] and [2, 3, 1]; and the other way round): still
    // another shape, refused by name, not compared over the shorter of the two.
    for (x_dims, y_dims) in [(&[2i64, 3][..], &[2i64, 3, 1][..]), (&[2, 3, 1][..], &[2, 3][..])] {
        let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32; 6], x_dims)).ret(Arg::zeros::<f32>(y_dims));
        expect_err(
            call.run(DEC_SCALE),
            ErrorCode::InvalidArgument,
            &["dec.scale", "result 0 (y)", &format!("expected shape {x_dims:?} (the shape of x), got {y_dims:?}")],
        );
    }
}

// ---- declared rank ----

#[handler(target = "dec.rank2")]
fn dec_rank2(m: Buffer<'_, f32, 2>, mut rows: ResultBuffer<'_, i64, 1>) -> Result<()> {
    let (r, c) = (m.dims()[0], m.dims()[1]);
    let m = m.as_slice()?;
    let out = rows.as_uninit()?;
    for (i, o) in out.iter_mut().enumerate() {
        let row = &m[i * c as usize..(i + 1) * c as usize];
        o.write(row.iter().sum::<f32>() as i64);
    }
    assert_eq!(out.len() as i64, r);
    Ok(())
}

#[test]
fn declared_rank_accepts_right_rank() {
    let m: Vec<f32> = (0..6).map(|v| v as f32).collect();
    let mut call = CallBuilder::new().arg(Arg::from_slice(&m, &[2, 3])).ret(Arg::zeros::<i64>(&[2]));
    expect_ok(call.run(DEC_RANK2));
    assert_eq!(call.ret_as::<i64>(0), vec![3, 12]);
}

#[test]
fn declared_rank_rejects_wrong_rank() {
    let m = [0.0f32; 6];
    let mut call = CallBuilder::new().arg(Arg::from_slice(&m, &[6])).ret(Arg::zeros::<i64>(&[2]));
    expect_err(
        call.run(DEC_RANK2),
        ErrorCode::InvalidArgument,
        &["dec.rank2", "operand 0 (m)", "expected rank 2", "got rank 1", "[6]"],
    );
    let mut call = CallBuilder::new().arg(Arg::from_slice(&m, &[1, 2, 3])).ret(Arg::zeros::<i64>(&[1, 1]));
    let msg = expect_err(
        call.run(DEC_RANK2),
        ErrorCode::InvalidArgument,
        &[
            "dec.rank2",
            "2 problems",
            "operand 0 (m): expected rank 2, got rank 3",
            "result 0 (rows): expected rank 1, got rank 2",
        ],
    );
    assert!(msg.contains("[1, 2, 3]"), "{msg}");
}

#[test]
fn declared_rank_and_dtype_both_wrong_in_one_operand() {
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1i64], &[1])).ret(Arg::zeros::<i64>(&[1]));
    expect_err(
        call.run(DEC_RANK2),
        ErrorCode::InvalidArgument,
        &[
            "2 problems",
            "operand 0 (m): expected dtype float32, got int64",
            "operand 0 (m): expected rank 2, got rank 1",
        ],
    );
}

// ---- rank 0 and zero-size buffers ----

/// info = [rank, len, size_bytes, slice len, is_empty, sum]
#[handler(target = "dec.describe")]
fn dec_describe(x: Buffer<f32>, mut info: ResultBuffer<i64>) -> Result<()> {
    let s = x.as_slice()?;
    let v = [
        x.rank() as i64,
        x.len() as i64,
        x.size_bytes() as i64,
        s.len() as i64,
        x.is_empty() as i64,
        s.iter().sum::<f32>() as i64,
    ];
    for (o, v) in info.as_uninit()?.iter_mut().zip(v) {
        o.write(v);
    }
    Ok(())
}

fn describe(x: Arg) -> Vec<i64> {
    let mut call = CallBuilder::new().arg(x).ret(Arg::zeros::<i64>(&[6]));
    expect_ok(call.run(DEC_DESCRIBE));
    call.ret_as::<i64>(0)
}

#[test]
fn rank0_buffer() {
    assert_eq!(describe(Arg::from_slice(&[7.0f32], &[])), vec![0, 1, 4, 1, 0, 7]);
}

#[test]
fn zero_size_buffers() {
    assert_eq!(describe(Arg::from_slice::<f32>(&[], &[0])), vec![1, 0, 0, 0, 1, 0]);
    assert_eq!(describe(Arg::from_slice::<f32>(&[], &[3, 0])), vec![2, 0, 0, 0, 1, 0]);
    assert_eq!(describe(Arg::from_slice::<f32>(&[], &[0, 5, 2])), vec![3, 0, 0, 0, 1, 0]);
}

#[test]
fn zero_size_add_and_rank0_add() {
    let mut call = add_call(
        Arg::from_slice::<f32>(&[], &[3, 0]),
        Arg::from_slice::<f32>(&[], &[3, 0]),
        Arg::zeros::<f32>(&[3, 0]),
    );
    expect_ok(call.run(DEC_ADD));
    assert!(call.ret_as::<f32>(0).is_empty());
    let mut call = add_call(Arg::from_slice(&[1.5f32], &[]), Arg::from_slice(&[2.0f32], &[]), Arg::zeros::<f32>(&[]));
    expect_ok(call.run(DEC_ADD));
    assert_eq!(call.ret_as::<f32>(0), vec![3.5]);
}

#[test]
fn negative_dim_is_rejected() {
    let mut call = CallBuilder::new().arg(Arg::raw(xla_ffi::DataType::F32, &[-1], 4)).ret(Arg::zeros::<i64>(&[6]));
    expect_err(
        call.run(DEC_DESCRIBE),
        ErrorCode::InvalidArgument,
        &["dec.describe", "operand 0 (x)", "invalid shape [-1]"],
    );
}

/// A shape whose element count fits in `usize` but whose size in bytes does not fit
/// in `isize` (2^61 float32s: 2^63 bytes) is an invalid shape, said as such (not a
/// data pointer that runs past the address space).
#[test]
fn shape_of_more_bytes_than_isize_is_an_invalid_shape() {
    use xla_ffi::testing::raw::{Data, RawBuffer, RawCall};
    let buffer = |dtype: xla_ffi::DataType, dims: Vec<i64>, data: Data| RawBuffer {
        kind: 1,
        null_entry: false,
        struct_size: xla_ffi::sys::XLA_FFI_Buffer_STRUCT_SIZE as usize,
        dtype: dtype.0,
        dims,
        rank_override: None,
        data,
        fill: 0,
    };
    let mut call = RawCall::new();
    call.args.push(buffer(xla_ffi::DataType::F32, vec![1 << 61], Data::Address(0x1000)));
    call.rets.push(buffer(xla_ffi::DataType::S64, vec![6], Data::Own { misalign: 0 }));
    let out = call.run(&xla_ffi::testing::FakeApi::new(5), 1, DEC_DESCRIBE.into());
    let msg = expect_err(
        out.result,
        ErrorCode::InvalidArgument,
        &["dec.describe", "operand 0 (x)", "invalid shape [2305843009213693952]"],
    );
    assert!(!msg.contains("address space") && !msg.contains("dtype"), "{msg}");
}

// ---- alignment ----

#[test]
fn misaligned_operand_is_an_error() {
    let mut call = add_call(f32s(&[1.0, 2.0]).misaligned(1), f32s(&[1.0, 2.0]), Arg::zeros::<f32>(&[2]));
    expect_err(call.run(DEC_ADD), ErrorCode::InvalidArgument, &["dec.add", "operand 0 (x)", "not aligned to 4 bytes"]);
}

/// Before the fix a null data pointer was "data pointer 0x0 is not aligned to 4
/// bytes", which sends one looking for an alignment problem.
#[test]
fn null_data_pointer_is_named_as_such() {
    // SAFETY: the decoder refuses a null pointer for a non-empty buffer before reading.
    let mut call =
        unsafe { add_call(f32s(&[1.0, 2.0]), f32s(&[1.0, 2.0]), Arg::zeros::<f32>(&[2])).arg_data_address(1, 0) };
    let msg = expect_err(
        call.run(DEC_ADD),
        ErrorCode::InvalidArgument,
        &["dec.add", "operand 1 (y)", "null data pointer for 2 elements"],
    );
    assert!(!msg.contains("aligned"), "{msg}");
}

#[test]
fn misaligned_result_is_an_error() {
    let mut call = add_call(f32s(&[1.0, 2.0]), f32s(&[1.0, 2.0]), Arg::zeros::<f32>(&[2]).misaligned(2));
    expect_err(call.run(DEC_ADD), ErrorCode::InvalidArgument, &["dec.add", "result 0 (out)", "not aligned to 4 bytes"]);
}

#[test]
fn misaligned_empty_buffer_is_fine() {
    assert_eq!(describe(Arg::from_slice::<f32>(&[], &[0]).misaligned(3)), vec![1, 0, 0, 0, 1, 0]);
}

#[test]
fn misaligned_by_four_is_fine_for_f32_but_not_f64() {
    let mut call = add_call(f32s(&[1.0, 2.0]).misaligned(4), f32s(&[3.0, 4.0]), Arg::zeros::<f32>(&[2]));
    expect_ok(call.run(DEC_ADD));
    // `misaligned` moves only the pointer: x now reads [2.0, <padding 0.0>].
    assert_eq!(call.ret_as::<f32>(0), vec![5.0, 4.0]);
    let mut call =
        CallBuilder::new().arg(Arg::from_slice(&[1.0f64, 2.0], &[2]).misaligned(4)).ret(Arg::zeros::<f64>(&[2]));
    expect_err(
        call.run(DEC_SCALE),
        ErrorCode::InvalidArgument,
        &["dec.scale", "operand 0 (x)", "not aligned to 8 bytes"],
    );
}

// ---- aliasing (input_output_aliases) ----

#[handler(target = "dec.read_aliased")]
fn dec_read_aliased(x: Buffer<f32>, y: ResultBuffer<f32>) -> Result<()> {
    let _ = &y;
    let _s = x.as_slice()?;
    Ok(())
}

#[handler(target = "dec.write_aliased")]
fn dec_write_aliased(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    let _ = &x;
    for o in y.as_uninit()? {
        o.write(-1.0);
    }
    Ok(())
}

/// y = 2 * x, in place when aliased; mode = [1] for InPlace, [2] for Separate.
#[handler(target = "dec.inplace")]
fn dec_inplace(x: Buffer<f32>, mut y: ResultBuffer<f32>, mut mode: ResultBuffer<i32>) -> Result<()> {
    let io: InOut<'_, f32> = y.with_input(&x)?;
    let m = match io {
        InOut::InPlace(xy) => {
            for v in xy.iter_mut() {
                *v *= 2.0;
            }
            1
        }
        InOut::Separate { input, output } => {
            for (o, &v) in output.iter_mut().zip(input) {
                o.write(2.0 * v);
            }
            2
        }
    };
    mode.as_uninit()?[0].write(m);
    Ok(())
}

fn aliased_call() -> CallBuilder {
    CallBuilder::new().arg(f32s(&[1.0, 2.0, 3.0])).ret(Arg::zeros::<f32>(&[3])).ret(Arg::zeros::<i32>(&[1])).alias(0, 0)
}

#[test]
fn aliased_operand_as_slice_is_an_error() {
    let mut call = CallBuilder::new().arg(f32s(&[1.0, 2.0])).ret(Arg::zeros::<f32>(&[2])).alias(0, 0);
    expect_err(
        call.run(DEC_READ_ALIASED),
        ErrorCode::InvalidArgument,
        &["dec.read_aliased", "operand 0 (x)", "shares memory with result 0", "with_input"],
    );
    // Not aliased: fine.
    let mut call = CallBuilder::new().arg(f32s(&[1.0, 2.0])).ret(Arg::zeros::<f32>(&[2]));
    expect_ok(call.run(DEC_READ_ALIASED));
}

#[test]
fn aliased_result_as_uninit_is_an_error() {
    let mut call = CallBuilder::new().arg(f32s(&[1.0, 2.0])).ret(Arg::zeros::<f32>(&[2])).alias(0, 0);
    expect_err(
        call.run(DEC_WRITE_ALIASED),
        ErrorCode::InvalidArgument,
        &["dec.write_aliased", "result 0 (y)", "shares memory with operand 0"],
    );
    // Nothing was written through the aliased result.
    assert_eq!(call.arg_as::<f32>(0), vec![1.0, 2.0]);
}

#[test]
fn with_input_in_place() {
    let mut call = aliased_call();
    expect_ok(call.run(DEC_INPLACE));
    assert_eq!(call.ret_as::<i32>(1), vec![1], "expected InOut::InPlace");
    // The in-place slice held the input's values (else the doubling would give 0),
    // and the writes landed in the shared buffer.
    assert_eq!(call.arg_as::<f32>(0), vec![2.0, 4.0, 6.0]);
    assert_eq!(call.ret_as::<f32>(0), vec![2.0, 4.0, 6.0]);
}

#[test]
fn with_input_separate() {
    let mut call =
        CallBuilder::new().arg(f32s(&[1.0, 2.0, 3.0])).ret(Arg::zeros::<f32>(&[3])).ret(Arg::zeros::<i32>(&[1]));
    expect_ok(call.run(DEC_INPLACE));
    assert_eq!(call.ret_as::<i32>(1), vec![2], "expected InOut::Separate");
    assert_eq!(call.ret_as::<f32>(0), vec![2.0, 4.0, 6.0]);
    assert_eq!(call.arg_as::<f32>(0), vec![1.0, 2.0, 3.0], "input unchanged");
}

#[test]
fn with_input_aliased_with_a_different_size_is_an_error() {
    let mut call = CallBuilder::new()
        .arg(f32s(&[1.0, 2.0, 3.0]))
        .ret(Arg::zeros::<f32>(&[2]))
        .ret(Arg::zeros::<i32>(&[1]))
        .alias(0, 0);
    let msg = expect_err(
        call.run(DEC_INPLACE),
        ErrorCode::InvalidArgument,
        &["dec.inplace", "result 0 (y)", "aliases operand 0 (x) but differs", "[2] vs float32 [3]"],
    );
    assert_eq!(msg.matches("dec.inplace").count(), 1, "target named once: {msg}");
}

#[test]
fn dtype_constants_print_like_jax() {
    assert_eq!(DataType::F32.to_string(), "float32");
    assert_eq!(DataType::BF16.to_string(), "bfloat16");
    assert_eq!(DataType(99).to_string(), "dtype(99)");
    assert_eq!(DataType(13).to_string(), "dtype(13)"); // xla::PrimitiveType's TUPLE: no XLA FFI type
    assert_eq!(DataType::INVALID.to_string(), "invalid");
    // Every type of XLA FFI's header, by its ml_dtypes/jax.numpy name.
    use xla_ffi::sys;
    for (code, name) in [
        (sys::XLA_FFI_DataType_F8E5M2, "float8_e5m2"),
        (sys::XLA_FFI_DataType_F8E4M3FN, "float8_e4m3fn"),
        (sys::XLA_FFI_DataType_F8E4M3B11FNUZ, "float8_e4m3b11fnuz"),
        (sys::XLA_FFI_DataType_F8E5M2FNUZ, "float8_e5m2fnuz"),
        (sys::XLA_FFI_DataType_F8E4M3FNUZ, "float8_e4m3fnuz"),
        (sys::XLA_FFI_DataType_F8E4M3, "float8_e4m3"),
        (sys::XLA_FFI_DataType_F8E3M4, "float8_e3m4"),
        (sys::XLA_FFI_DataType_F8E8M0FNU, "float8_e8m0fnu"),
        (sys::XLA_FFI_DataType_F4E2M1FN, "float4_e2m1fn"),
        (sys::XLA_FFI_DataType_S4, "int4"),
        (sys::XLA_FFI_DataType_U4, "uint4"),
        (sys::XLA_FFI_DataType_S2, "int2"),
        (sys::XLA_FFI_DataType_U2, "uint2"),
        (sys::XLA_FFI_DataType_S1, "int1"),
        (sys::XLA_FFI_DataType_U1, "uint1"),
        (sys::XLA_FFI_DataType_TOKEN, "token"),
    ] {
        assert_eq!(DataType(code).to_string(), name);
        assert_eq!(xla_ffi::decl::dtype_by_name(name), Some(DataType(code)));
    }
}

#[test]
fn two_results_sharing_memory_are_refused() {
    // Result 1 (an int32[1]) is laid over the first bytes of operand 0 / result 0.
    let mut call = aliased_call().alias(0, 1);
    let msg = expect_err(
        call.run(DEC_INPLACE),
        ErrorCode::InvalidArgument,
        &["dec.inplace", "result 0 (y)", "shares memory with result 1", "two results cannot share memory"],
    );
    assert!(!msg.contains("with_input"), "with_input reads an operand-result pair, not two results: {msg}");
}

/// Reads operand 0 as a slice; operand 1 is aliased to the result.
#[handler(target = "dec.one_of_two_aliased")]
fn dec_one_of_two_aliased(a: Buffer<f32>, b: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    let a = a.as_slice()?;
    match y.with_input::<f32, _, { xla_ffi::ANY_RANK }>(&b)? {
        InOut::InPlace(by) => by.iter_mut().zip(a).for_each(|(v, &w)| *v += w),
        InOut::Separate { .. } => return Err(xla_ffi::Error::internal("expected in place")),
    }
    // The aliased operand itself is still refused as a slice.
    b.as_slice().map(|_| ())
}

#[test]
fn overlap_is_tracked_per_buffer() {
    let mut call =
        CallBuilder::new().arg(f32s(&[1.0, 2.0])).arg(f32s(&[10.0, 20.0])).ret(Arg::zeros::<f32>(&[2])).alias(1, 0);
    expect_err(
        call.run(DEC_ONE_OF_TWO_ALIASED),
        ErrorCode::InvalidArgument,
        &["dec.one_of_two_aliased", "operand 1 (b)", "shares memory with result 0"],
    );
    // The in-place update ran before the refusal, reading the unaliased operand 0.
    assert_eq!(call.ret_as::<f32>(0), vec![11.0, 22.0]);
}

// ---- huge-page advice for fresh results ----

/// y = x + 1 after advising y; `advised` = [1] if the advice was given.
#[handler(target = "dec.advise")]
fn dec_advise(x: Buffer<f32>, mut y: ResultBuffer<f32>, mut advised: ResultBuffer<i32>) -> Result<()> {
    let asked = y.advise_huge_pages();
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(v + 1.0);
    }
    advised.as_uninit()?[0].write(i32::from(asked));
    Ok(())
}

#[test]
#[cfg_attr(miri, ignore = "Miri does not support madvise, and interpreting 24 MiB buffers takes minutes")]
fn huge_page_advice_is_given_for_large_results_only_and_changes_nothing() {
    let thp = std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists();
    for (len, want) in [(1usize << 10, false), (xla_ffi::HUGE_PAGE_MIN_BYTES / 4 - 1, false), (6 << 20, thp)] {
        let x: Vec<f32> = (0..len).map(|i| (i % 1000) as f32).collect();
        let mut call = CallBuilder::new()
            .arg(Arg::from_slice(&x, &[len as i64]))
            .ret(Arg::zeros::<f32>(&[len as i64]))
            .ret(Arg::zeros::<i32>(&[1]));
        expect_ok(call.run(DEC_ADVISE));
        assert_eq!(call.ret_as::<i32>(1), vec![i32::from(want)], "len {len}");
        let y = call.ret_as::<f32>(0);
        assert!(y.iter().zip(&x).all(|(&o, &v)| o == v + 1.0), "len {len}: results changed");
    }
}

/// Fails unless advising a (large) device result is refused.
#[handler(target = "dec.advise_device", platform = device)]
fn dec_advise_device(mut y: ResultBuffer<f32>) -> Result<()> {
    if y.advise_huge_pages() {
        return Err(xla_ffi::Error::internal("advised a device buffer"));
    }
    Ok(())
}

#[test]
fn huge_page_advice_is_never_given_for_device_buffers() {
    let len = 6i64 << 20;
    let mut call = CallBuilder::new().api(xla_ffi::testing::FakeApi::device_like(5)).ret(Arg::zeros::<f32>(&[len]));
    expect_ok(call.run(DEC_ADVISE_DEVICE));
}

/// Fails unless both buffers say they are host memory.
#[handler(target = "dec.on_host")]
fn dec_on_host(x: Buffer, y: ResultBuffer) -> Result<()> {
    if !x.on_host() || !y.on_host() {
        return Err(xla_ffi::Error::internal("a host buffer said it was not on the host"));
    }
    Ok(())
}

/// Fails unless both buffers say they are not host memory, and their byte views
/// are refused.
#[handler(target = "dec.on_device", platform = device)]
fn dec_on_device(x: Buffer, mut y: ResultBuffer) -> Result<()> {
    if x.on_host() || y.on_host() {
        return Err(xla_ffi::Error::internal("a device buffer said it was on the host"));
    }
    if x.as_bytes().is_ok() || y.as_uninit_bytes().is_ok() {
        return Err(xla_ffi::Error::internal("a device buffer handed out host bytes"));
    }
    Ok(())
}

#[test]
fn on_host_tells_host_buffers_from_device_buffers() {
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f32>(&[2]));
    expect_ok(call.run(DEC_ON_HOST));
    let mut call = CallBuilder::new()
        .api(xla_ffi::testing::FakeApi::device_like(5))
        .arg(Arg::from_slice(&[1.0f32, 2.0], &[2]))
        .ret(Arg::zeros::<f32>(&[2]));
    expect_ok(call.run(DEC_ON_DEVICE));
}
