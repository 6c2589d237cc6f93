//! Safe code that tries to hold an operand's slice while the result aliased to it
//! is written: each attempt is refused at run time (the compile-time ones are in
//! the ui suite), and the refusal names the operand and the result.

mod common;

use common::expect_err;
use xla_ffi::testing::{Arg, CallBuilder};
use xla_ffi::{handler, Buffer, Call, Decode, InOut, Result, ResultBuffer};

/// An operand decoded together with its slice, taken inside `decode`, before the
/// result aliased to it is decoded (the `Decode` trait is public).
struct EarlySlice<'f> {
    x: Buffer<'f, f32>,
    early: Result<&'f [f32]>,
}

impl<'f> Decode<'f> for EarlySlice<'f> {
    const ARGS: usize = 1;
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        let x = Buffer::<'f, f32>::decode(call, name)?;
        let early = x.as_slice();
        Some(EarlySlice { x, early })
    }
}

/// Writes through the in-place view while the early slice would still be alive.
#[handler(target = "probe.early_slice")]
fn probe_early_slice(x: EarlySlice, mut y: ResultBuffer<f32>) -> Result<()> {
    let early = x.early?;
    match y.with_input::<f32, _, _>(&x.x)? {
        InOut::InPlace(xy) => xy.iter_mut().for_each(|v| *v = early[0] + 1.0),
        InOut::Separate { input, output } => {
            for (o, &v) in output.iter_mut().zip(input) {
                o.write(v + early[0]);
            }
        }
    }
    Ok(())
}

#[test]
fn a_slice_taken_in_decode_is_refused_when_a_result_aliases_it() {
    let mut call =
        CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f32>(&[2])).alias(0, 0);
    expect_err(
        call.run(PROBE_EARLY_SLICE),
        xla_ffi::ErrorCode::InvalidArgument,
        &["probe.early_slice", "operand 0", "result 0"],
    );
    // Apart, the same handler runs.
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f32>(&[2]));
    common::expect_ok(call.run(PROBE_EARLY_SLICE));
    assert_eq!(call.ret_as::<f32>(0), vec![2.0, 3.0]);
}

/// Takes the operand's slice first, then asks for the pair.
#[handler(target = "probe.slice_then_pair")]
fn probe_slice_then_pair(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    let before = x.as_slice()?;
    if let InOut::InPlace(xy) = y.with_input::<f32, _, _>(&x)? {
        xy[0] = before[0];
    }
    Ok(())
}

/// One operand aliased to two results: the second pair would be a second `&mut`.
#[handler(target = "probe.two_pairs")]
fn probe_two_pairs(x: Buffer<f32>, mut y: ResultBuffer<f32>, mut z: ResultBuffer<f32>) -> Result<()> {
    let InOut::InPlace(a) = y.with_input::<f32, _, _>(&x)? else { return Ok(()) };
    let InOut::InPlace(b) = z.with_input::<f32, _, _>(&x)? else { return Ok(()) };
    a[0] = 1.0;
    b[0] = 2.0;
    Ok(())
}

#[test]
fn an_operand_slice_and_a_second_pair_are_refused() {
    let mut call =
        CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f32>(&[2])).alias(0, 0);
    expect_err(
        call.run(PROBE_SLICE_THEN_PAIR),
        xla_ffi::ErrorCode::InvalidArgument,
        &["probe.slice_then_pair", "operand 0", "result 0"],
    );
    let mut call = CallBuilder::new()
        .arg(Arg::from_slice(&[1.0f32, 2.0], &[2]))
        .ret(Arg::zeros::<f32>(&[2]))
        .ret(Arg::zeros::<f32>(&[2]))
        .alias(0, 0)
        .alias(0, 1);
    expect_err(call.run(PROBE_TWO_PAIRS), xla_ffi::ErrorCode::InvalidArgument, &["probe.two_pairs", "result"]);
}
