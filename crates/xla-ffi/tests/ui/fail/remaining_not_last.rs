// `RemainingArgs` / `RemainingRets` take every operand or result left: a buffer
// parameter (or a second `Remaining*`) after one would be missing from every call.
use xla_ffi::{handler, Buffer, RemainingArgs, RemainingRets, Result, ResultBuffer};

#[handler(target = "ui.rest_then_operand")]
fn remaining_then_operand(rest: RemainingArgs, x: Buffer<f32>) -> Result<()> {
    let _ = (rest, x);
    Ok(())
}

#[handler(target = "ui.rest_then_result")]
fn remaining_then_result(rest: RemainingRets, y: ResultBuffer<f32>) -> Result<()> {
    let _ = (rest, y);
    Ok(())
}

#[handler(target = "ui.rest_twice")]
fn remaining_twice(a: RemainingArgs, b: RemainingArgs) -> Result<()> {
    let _ = (a, b);
    Ok(())
}

// Results after operands' `RemainingArgs` (and the other way round) are fine: the
// two lists are separate.
#[handler(target = "ui.rest_then_other_list")]
fn remaining_then_other_list(rest: RemainingArgs, y: ResultBuffer<f32>, more: RemainingRets) -> Result<()> {
    let _ = (rest, y, more);
    Ok(())
}

fn main() {}
