// PRED buffers and attributes may hold any byte, and a `bool` holding 2 is
// undefined behaviour: they are read as `Pred` (`byte != 0`), never as `bool`.
use xla_ffi::{Array, Buffer, Pred};

fn buffer_as_bools<'f>(x: &Buffer<'f, Pred>) -> xla_ffi::Result<&'f [bool]> {
    x.typed::<bool>()
}

fn array_as_bools<'f>(a: &Array<'f>) -> Option<&'f [bool]> {
    a.as_slice::<bool>()
}

fn main() {}
