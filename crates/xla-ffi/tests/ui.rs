//! Compile-time guarantees, checked with trybuild: the `#[handler]` macro's
//! diagnostics and the type rules of the API (a PRED buffer cannot be read as
//! `bool`, a `forbid(unsafe_code)` crate of handlers compiles, a body cannot do an
//! unsafe operation without writing `unsafe`).
//!
//! Each file in `tests/ui/fail/` must fail to compile with the error recorded next
//! to it (`*.stderr`), and each file in `tests/ui/pass/` must compile. Add a case by
//! dropping a file into either folder; regenerate the expected errors with
//! `TRYBUILD=overwrite cargo test -p xla-ffi --test ui` and check them in after
//! reading them. The messages are stable rustc's, so the sanitizer and Miri runs
//! (nightly) skip this test.

#[test]
#[cfg_attr(miri, ignore = "trybuild runs rustc, which Miri cannot interpret")]
fn compile_time_guarantees() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
