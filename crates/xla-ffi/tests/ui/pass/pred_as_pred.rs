// The supported way to read PRED data: as `Pred`, whose `get()` is `byte != 0`.
use xla_ffi::{Array, Buffer, Pred};

fn count_true(x: &Buffer<'_, Pred>) -> xla_ffi::Result<usize> {
    Ok(x.as_slice()?.iter().filter(|b| b.get()).count())
}

fn array_flags<'f>(a: &Array<'f>) -> Option<&'f [Pred]> {
    a.as_slice::<Pred>()
}

fn main() {
    let _ = (count_true, array_flags);
}
