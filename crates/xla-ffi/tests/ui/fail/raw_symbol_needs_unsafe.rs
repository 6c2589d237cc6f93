//! A raw exported symbol name replaces any other function of that name in the
//! process (`malloc` here): safe code cannot choose one.
use xla_ffi::handler;

#[handler(target = "ui.raw", symbol = "malloc")]
pub fn ui_raw() {}

fn main() {}
