//! A device handler hands the call's stream to the CUDA driver as XLA's own, and
//! the driver does not check it: giving an arbitrary stream is an unsafe promise
//! (`CallBuilder::on_gpu` is the safe form, with a test GPU's stream).
use xla_ffi::testing::CallBuilder;

fn main() {
    let _ = CallBuilder::new().device_stream(0x2000);
}
