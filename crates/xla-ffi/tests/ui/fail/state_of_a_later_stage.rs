//! A handler reads only the state of a stage that runs before its own: a prepare
//! handler cannot take initialize state, an instantiate handler no state at all,
//! and an initialize handler not its own stage's state.
use xla_ffi::stage::Initialize;
use xla_ffi::{handler, state_type, Initialized, Result, State};

pub struct Plan(u32);
state_type!(Plan);

#[handler(target = "ui.later.prepare", stage = prepare, platform = device)]
fn later_prepare(plan: State<Plan, Initialize>) -> Result<()> {
    let _ = plan.0;
    Ok(())
}

#[handler(target = "ui.later.instantiate", stage = instantiate)]
fn later_instantiate(plan: State<Plan>) -> Result<Plan> {
    Ok(Plan(plan.0))
}

#[handler(target = "ui.later.initialize", stage = initialize, platform = device)]
fn later_initialize(plan: Initialized<Plan>) -> Result<()> {
    let _ = plan.0;
    Ok(())
}

fn main() {}
