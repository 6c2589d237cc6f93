//! Every stage may read the state of the stages before it, and the record stage
//! is accepted.
#![forbid(unsafe_code)]
use xla_ffi::stage::{Initialize, Instantiate, Prepare};
use xla_ffi::{handler, state_type, Initialized, Prepared, Result, State};

pub struct A(u32);
pub struct B(u32);
pub struct C(u32);
state_type!(A);
state_type!(B);
state_type!(C);

#[handler(target = "ui.stages", stage = instantiate, platform = device)]
fn stages_instantiate() -> Result<A> {
    Ok(A(1))
}

#[handler(target = "ui.stages", stage = prepare, platform = device)]
fn stages_prepare(a: State<A, Instantiate>) -> Result<B> {
    Ok(B(a.0))
}

#[handler(target = "ui.stages", stage = initialize, platform = device)]
fn stages_initialize(a: State<A>, b: State<B, Prepare>) -> Result<C> {
    Ok(C(a.0 + b.0))
}

#[handler(target = "ui.stages", platform = device)]
fn stages_execute(a: State<A>, b: Prepared<B>, c: State<C, Initialize>) -> Result<()> {
    let _ = (a.0, b.0, c.0);
    Ok(())
}

#[handler(target = "ui.stages", stage = record, platform = device)]
fn stages_record(a: State<A>, b: Prepared<B>, c: Initialized<C>) -> Result<()> {
    let _ = (a.0, b.0, c.0);
    Ok(())
}

fn main() {}
