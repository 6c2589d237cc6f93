//! `CallBuilder::extension` drops the value with the builder, on any thread: an
//! extension type that is `Sync` but not `Send` is refused.
use std::marker::PhantomData;
use std::sync::MutexGuard;

use xla_ffi::sys::compat::ExtensionHeader;
use xla_ffi::testing::CallBuilder;

#[repr(C)]
struct LocalExt {
    header: ExtensionHeader,
    // `MutexGuard` is `Sync` but not `Send`.
    _local: PhantomData<MutexGuard<'static, ()>>,
}

// SAFETY: shared references only read the header's plain fields.
unsafe impl Sync for LocalExt {}

// SAFETY: `#[repr(C)]`, the header first, and nothing else XLA would read.
unsafe impl xla_ffi::Extension for LocalExt {
    const TYPE: i64 = 0x10ca1;
    const NAME: &'static str = "local";
    const VERSION: (i32, i32) = (1, 0);
}

fn build(e: LocalExt) -> CallBuilder {
    CallBuilder::new().extension(e)
}

fn main() {
    let _ = build;
}
