//! `crate = "..."` for a renamed dependency; full paths for every type, including
//! `Result`; a generic lifetime; a `mut` parameter; no return type.
extern crate xla_ffi as ffi;

#[ffi::handler(target = "ui.renamed", crate = "ffi")]
fn ui_renamed<'f>(x: ffi::Buffer<'f, f32>, mut y: ffi::ResultBuffer<'f, f32>) -> core::result::Result<(), ffi::Error> {
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(v);
    }
    Ok(())
}

#[ffi::handler(target = "ui.unit", crate = "ffi", descriptor = UNIT)]
fn ui_unit() {}

fn main() {
    let _: ffi::HandlerFn = UI_RENAMED.handler.as_raw();
    assert_eq!(UNIT.symbol, "xla_ffi_handler__ui_unit");
}
