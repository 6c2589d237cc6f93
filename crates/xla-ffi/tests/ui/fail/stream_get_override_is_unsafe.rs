//! A replaced `Stream_Get` is trusted as XLA's own: whatever it returns is read as
//! an `XLA_FFI_Error`, so installing one is an unsafe promise.
use xla_ffi::sys;
use xla_ffi::testing::FakeApi;

extern "C" fn bogus(_: *mut sys::XLA_FFI_Stream_Get_Args) -> *mut sys::XLA_FFI_Error {
    core::ptr::without_provenance_mut(0x10)
}

fn main() {
    let _ = FakeApi::new(5).with_stream_get(bogus);
}
