//! `unsafe(symbol = "...")` is an unsafe opt-in: `#![forbid(unsafe_code)]` refuses it.
#![forbid(unsafe_code)]
use xla_ffi::handler;

#[handler(target = "ui.raw", unsafe(symbol = "my_raw_name"))]
pub fn ui_raw() {}

fn main() {}
