//! Type errors name the rule: parameters must decode, execute handlers return
//! `Result<()>`, instantiate handlers return a declared state type.
use xla_ffi::{handler, Result};

#[handler(target = "ui.param")]
fn not_a_parameter(_v: Vec<f32>) -> Result<()> { Ok(()) }

#[handler(target = "ui.value")]
fn returns_a_value() -> Result<i32> { Ok(1) }

struct NotState;

#[handler(target = "ui.state", stage = instantiate)]
fn not_a_state() -> Result<NotState> { Ok(NotState) }

fn main() {}
