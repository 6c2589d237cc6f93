//! A raw exported symbol name, with the explicit unsafe opt-in.
use xla_ffi::handler;

// SAFETY: no other symbol of the process is called `ui_raw_exported_name`.
#[handler(target = "ui.raw", unsafe(symbol = "ui_raw_exported_name"))]
pub fn ui_raw() {}

fn main() {
    assert_eq!(UI_RAW.symbol, "ui_raw_exported_name");
}
