//! What a result holds before the handler writes it. XLA hands a handler result
//! memory with whatever was there (stale data, NaN), so the harness fills each
//! result with 0xFF bytes before every run: an element a handler forgets to write
//! reads back as NaN or -1, never as a plausible 0 or as the previous run's value.

use xla_ffi::testing::{Arg, AttrArg, CallBuilder};
use xla_ffi::{handler, Attr, Buffer, Result, ResultBuffer};

/// Writes the first `n` elements of `y` (a bug when `n` is short of `y.len()`).
#[handler(target = "rm.first_n")]
fn rm_first_n(mut y: ResultBuffer<f32>, z: ResultBuffer<i32>, n: Attr<i64>) -> Result<()> {
    let _ = z; // never written
    for o in y.as_uninit()?.iter_mut().take(*n as usize) {
        o.write(1.5);
    }
    Ok(())
}

fn first_n(n: i64) -> CallBuilder {
    CallBuilder::new().ret(Arg::zeros::<f32>(&[3])).ret(Arg::zeros::<i32>(&[2])).attr("n", AttrArg::scalar(n))
}

fn bits(v: Vec<f32>) -> Vec<u32> {
    v.into_iter().map(f32::to_bits).collect()
}

#[test]
fn an_unwritten_element_reads_back_as_0xff_bytes_not_zero() {
    let mut call = first_n(1);
    call.run(RM_FIRST_N).unwrap();
    assert_eq!(bits(call.ret_as::<f32>(0)), vec![1.5f32.to_bits(), u32::MAX, u32::MAX]);
    assert_eq!(call.ret_as::<i32>(1), vec![-1, -1]);
}

#[test]
fn a_second_run_does_not_see_the_first_runs_results() {
    let mut call = first_n(3);
    call.run(RM_FIRST_N).unwrap();
    assert_eq!(call.ret_as::<f32>(0), vec![1.5; 3]);
    // Same builder, same frame: a handler that writes nothing this time.
    call.run(RM_NOTHING).unwrap();
    assert_eq!(bits(call.ret_as::<f32>(0)), vec![u32::MAX; 3]);
}

#[handler(target = "rm.nothing")]
fn rm_nothing(y: ResultBuffer<f32>, z: ResultBuffer<i32>, n: Attr<i64>) -> Result<()> {
    let _ = (y, z, n);
    Ok(())
}

#[handler(target = "rm.keep")]
fn rm_keep(x: Buffer<f32>, y: ResultBuffer<f32>) -> Result<()> {
    let _ = (x, y);
    Ok(())
}

#[test]
fn an_aliased_result_holds_its_operands_data() {
    let mut call =
        CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f32>(&[2])).alias(0, 0);
    call.run(RM_KEEP).unwrap();
    assert_eq!(call.ret_as::<f32>(0), vec![1.0, 2.0]);
}

#[handler(target = "rm.add_one")]
fn rm_add_one(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    match y.with_input::<f32, _, _>(&x)? {
        xla_ffi::InOut::InPlace(xy) => xy.iter_mut().for_each(|v| *v += 1.0),
        xla_ffi::InOut::Separate { .. } => return Err(y.error("expected to run in place")),
    }
    Ok(())
}

#[test]
fn an_aliased_result_is_read_where_a_shifted_operand_starts() {
    // The operand starts 4 bytes into its storage: [2.0, 0.0] (see `Arg::misaligned`).
    let x = Arg::from_slice(&[1.0f32, 2.0], &[2]).misaligned(4);
    let mut call = CallBuilder::new().arg(x).ret(Arg::zeros::<f32>(&[2])).alias(0, 0);
    call.run(RM_ADD_ONE).unwrap();
    assert_eq!(call.arg_as::<f32>(0), vec![3.0, 1.0]);
    assert_eq!(call.ret_as::<f32>(0), vec![3.0, 1.0]);
}
