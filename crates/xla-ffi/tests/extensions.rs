//! Public extensions (`XLA_FFI_InvokeContext_FindExtension`, API 0.4) on synthetic
//! frames: found by id, checked for id, version and size, absent on CPU-like
//! contexts, refused with the API version on older runtimes.

mod common;

use common::{expect_err, expect_ok};
use xla_ffi::extension::{COLLECTIVES, RECORD};
use xla_ffi::testing::{Arg, CallBuilder, DemoExtension, FakeApi};
use xla_ffi::{handler, Context, ErrorCode, ExtensionId, Result, ResultBuffer};

/// out = [value of the demo extension, or -1 when absent]
#[handler(target = "ex.value")]
fn ex_value(ctx: Context, mut out: ResultBuffer<i64>) -> Result<()> {
    let v = ctx.find_extension::<DemoExtension>()?.map_or(-1, |d| d.value);
    out.as_uninit()?[0].write(v);
    Ok(())
}

/// out = [id, major, minor, struct size] of the demo extension, or -1s.
#[handler(target = "ex.id")]
fn ex_id(ctx: Context, mut out: ResultBuffer<i64>) -> Result<()> {
    let id = ctx.find_extension_id(DemoExtension::ID)?;
    // No XLA extension is attached to a synthetic call.
    assert_eq!(ctx.find_extension_id(RECORD)?, None);
    assert_eq!(ctx.find_extension_id(COLLECTIVES)?, None);
    let v = match id {
        Some(ExtensionId { extension_type, version: (major, minor), struct_size }) => {
            [extension_type, major as i64, minor as i64, struct_size as i64]
        }
        None => [-1; 4],
    };
    for (o, v) in out.as_uninit()?.iter_mut().zip(v) {
        o.write(v);
    }
    Ok(())
}

fn call(ext: Option<DemoExtension>, n: i64) -> CallBuilder {
    let c = CallBuilder::new().ret(Arg::zeros::<i64>(&[n]));
    match ext {
        Some(e) => c.extension(e),
        None => c,
    }
}

#[test]
fn an_attached_extension_is_found_by_id() {
    if !xla_ffi::sys::compat::HAS_FIND_EXTENSION {
        return; // a build over the API 0.3 header: see `a_0_3_header_build_reports_it`
    }
    let mut c = call(Some(DemoExtension::new(42)), 1);
    expect_ok(c.run(EX_VALUE));
    assert_eq!(c.ret_as::<i64>(0), vec![42]);
    let mut c = call(Some(DemoExtension::new(42)), 4);
    expect_ok(c.run(EX_ID));
    let size = core::mem::size_of::<DemoExtension>() as i64;
    assert_eq!(c.ret_as::<i64>(0), vec![DemoExtension::ID, 1, 2, size]);
}

#[test]
fn a_missing_extension_is_none_not_an_error() {
    if !xla_ffi::sys::compat::HAS_FIND_EXTENSION {
        return;
    }
    let mut c = call(None, 1);
    expect_ok(c.run(EX_VALUE));
    assert_eq!(c.ret_as::<i64>(0), vec![-1]);
    let mut c = call(None, 4);
    expect_ok(c.run(EX_ID));
    assert_eq!(c.ret_as::<i64>(0), vec![-1; 4]);
}

#[test]
fn another_version_is_refused_naming_both() {
    if !xla_ffi::sys::compat::HAS_FIND_EXTENSION {
        return;
    }
    let mut c = call(Some(DemoExtension::new(1).with_version(1, 3)), 1);
    expect_err(
        c.run(EX_VALUE),
        ErrorCode::FailedPrecondition,
        &["ex.value: extension demo (id 32343)", "version mismatch", "XLA's is 1.3", "declares 1.2"],
    );
    // The id lookup reports the version and lets the caller decide.
    let mut c = call(Some(DemoExtension::new(1).with_version(2, 0)), 4);
    expect_ok(c.run(EX_ID));
    assert_eq!(c.ret_as::<i64>(0)[1..3], [2, 0]);
}

#[test]
fn a_struct_smaller_than_declared_is_refused() {
    if !xla_ffi::sys::compat::HAS_FIND_EXTENSION {
        return;
    }
    let size = core::mem::size_of::<DemoExtension>();
    // Header only: the value is not there, so no `&DemoExtension` may be made.
    let mut c = call(Some(DemoExtension::new(1).with_struct_size(size - 8)), 1);
    expect_err(
        c.run(EX_VALUE),
        ErrorCode::FailedPrecondition,
        &["ex.value: extension demo", &format!("XLA's struct is {} bytes, smaller than the {size} bytes", size - 8)],
    );
    // Not even a header.
    let mut c = call(Some(DemoExtension::new(1).with_struct_size(8)), 4);
    expect_err(c.run(EX_ID), ErrorCode::Internal, &["ex.id: extension id 32343", "8 bytes is smaller than its header"]);
}

#[test]
fn older_runtimes_have_no_extensions() {
    for api in [FakeApi::new(3), FakeApi::new(3).with_struct_size(192)] {
        let mut c = CallBuilder::new().api(api).extension(DemoExtension::new(1)).ret(Arg::zeros::<i64>(&[1]));
        expect_err(
            c.run(EX_VALUE),
            ErrorCode::Unimplemented,
            &["ex.value: extensions need XLA FFI API 0.4 or newer", "looking up demo (id 32343)", "FFI API 0.3"],
        );
    }
    // A 0.4 table that ends before the slot.
    let short = FakeApi::new(4).with_struct_size(192);
    let mut c = CallBuilder::new().api(short).ret(Arg::zeros::<i64>(&[4]));
    expect_err(c.run(EX_ID), ErrorCode::Unimplemented, &["ex.id: extensions need XLA FFI API 0.4", "FindExtension"]);
}

#[test]
fn a_0_3_header_build_reports_it() {
    if xla_ffi::sys::compat::HAS_FIND_EXTENSION {
        return;
    }
    let mut c = call(None, 1);
    expect_err(c.run(EX_VALUE), ErrorCode::Unimplemented, &["this build's XLA FFI header (API 0.3)"]);
}
