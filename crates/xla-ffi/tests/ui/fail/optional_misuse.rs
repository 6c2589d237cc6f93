// Optional operands and results: trailing only, never beside RemainingArgs /
// RemainingRets, marked `?` in the rules exactly where the handler has them, and
// only buffers (an optional attribute is Attr<Option<T>>).
use xla_ffi::{handler, Attr, Buffer, RemainingArgs, RemainingRets, Result, ResultBuffer};

#[handler(target = "ui.opt_middle")]
fn optional_in_the_middle(a: Option<Buffer<f32>>, b: Buffer<f32>) -> Result<()> {
    let _ = (a, b);
    Ok(())
}

#[handler(target = "ui.opt_result_middle")]
fn optional_result_in_the_middle(a: Option<ResultBuffer<f32>>, b: ResultBuffer<f32>) -> Result<()> {
    let _ = (a, b);
    Ok(())
}

#[handler(target = "ui.opt_then_rest")]
fn optional_then_remaining(a: Option<Buffer<f32>>, rest: RemainingArgs) -> Result<()> {
    let _ = (a, rest);
    Ok(())
}

#[handler(target = "ui.rest_then_opt")]
fn remaining_then_optional(rest: RemainingRets, a: Option<ResultBuffer<f32>>) -> Result<()> {
    let _ = (a, rest);
    Ok(())
}

#[handler(target = "ui.opt_rules", shapes = "n, n -> n")]
fn optional_with_rules(x: Buffer<f32>, b: Option<Buffer<f32>>, y: ResultBuffer<f32>) -> Result<()> {
    let _ = (x, b, y);
    Ok(())
}

#[handler(target = "ui.rule_marks_required", shapes = "n, n? -> n")]
fn rule_marks_a_required_operand(x: Buffer<f32>, b: Buffer<f32>, y: ResultBuffer<f32>) -> Result<()> {
    let _ = (x, b, y);
    Ok(())
}

#[handler(target = "ui.opt_rules_wrong_place", shapes = "n, n -> n?")]
fn optional_result_marked_but_operand_optional(x: Buffer<f32>, b: Option<Buffer<f32>>, y: ResultBuffer<f32>) -> Result<()> {
    let _ = (x, b, y);
    Ok(())
}

#[handler(target = "ui.opt_attr")]
fn optional_attr_outside(k: Option<Attr<f32>>) -> Result<()> {
    let _ = k;
    Ok(())
}

fn main() {}
