//! XLA's metadata query, execution stages, and older / shorter API tables.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::{expect_err, expect_ok};
use xla_ffi::testing::{Arg, CallBuilder, FakeApi};
use xla_ffi::{handler, Buffer, Context, ErrorCode, Result, ResultBuffer, Stage, Traits, MIN_API_VERSION};

static PLAIN_CALLS: AtomicUsize = AtomicUsize::new(0);

#[handler(target = "md.plain")]
fn md_plain(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    PLAIN_CALLS.fetch_add(1, Ordering::SeqCst);
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(v + 1.0);
    }
    Ok(())
}

#[handler(target = "md.cb", traits = Traits::COMMAND_BUFFER_COMPATIBLE)]
fn md_cb(x: Buffer<f32>) -> Result<()> {
    let _ = x;
    Ok(())
}

#[handler(target = "md.panics")]
fn md_panics(x: Buffer<f32>, y: ResultBuffer<f32>) -> Result<()> {
    let _ = (x, y);
    panic!("deliberate: the metadata query must not run the body");
}

#[test]
fn metadata_reports_min_api_version_and_no_traits() {
    assert_eq!(MIN_API_VERSION, (0, 3));
    let md = CallBuilder::new().metadata(MD_PLAIN).unwrap();
    assert_eq!(md, (0, 3, 0, 0));
    assert_eq!((md.0, md.1), MIN_API_VERSION);
    // Whatever header the bindings came from, and whatever the runtime reports,
    // the handler answers 0.3.
    let md = CallBuilder::new().api(FakeApi::new(5)).metadata(MD_PLAIN).unwrap();
    assert_eq!((md.0, md.1), (0, 3));
    let md = CallBuilder::new().api(FakeApi::new(3).with_struct_size(192)).metadata(MD_PLAIN).unwrap();
    assert_eq!((md.0, md.1), (0, 3));
}

#[test]
fn metadata_reports_traits() {
    assert_eq!(CallBuilder::new().metadata(MD_CB).unwrap(), (0, 3, 1, 0));
    assert_eq!(Traits::COMMAND_BUFFER_COMPATIBLE.0, 1);
    assert_eq!((Traits::NONE | Traits::COMMAND_BUFFER_COMPATIBLE).0, 1);
}

#[test]
fn metadata_query_does_not_run_the_body() {
    common::quiet_deliberate_panics();
    // A panicking body: the query still succeeds.
    assert_eq!(CallBuilder::new().metadata(MD_PANICS).unwrap(), (0, 3, 0, 0));
    // A counting body: the query does not count. (Only this test calls md_plain
    // for real, so the count is exact.)
    let before = PLAIN_CALLS.load(Ordering::SeqCst);
    for _ in 0..3 {
        CallBuilder::new().metadata(MD_PLAIN).unwrap();
    }
    assert_eq!(PLAIN_CALLS.load(Ordering::SeqCst), before);
    let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32], &[1])).ret(Arg::zeros::<f32>(&[1]));
    expect_ok(call.run(MD_PLAIN));
    assert_eq!(PLAIN_CALLS.load(Ordering::SeqCst), before + 1);
    assert_eq!(call.ret_as::<f32>(0), vec![2.0]);
}

#[test]
fn execute_handler_at_another_stage_names_the_stage() {
    for (stage, name) in
        [(Stage::Instantiate, "instantiate"), (Stage::Prepare, "prepare"), (Stage::Initialize, "initialize")]
    {
        let mut call =
            CallBuilder::new().stage(stage).arg(Arg::from_slice(&[1.0f32], &[1])).ret(Arg::zeros::<f32>(&[1]));
        expect_err(
            call.run(MD_PLAIN),
            ErrorCode::Internal,
            &["md.plain", "handles the execute stage", &format!("called at the {name} stage")],
        );
        // Still the 0xFF bytes the harness fills results with.
        assert_eq!(call.ret_as::<f32>(0)[0].to_bits(), u32::MAX, "body did not run");
    }
}

#[test]
fn unknown_stage_is_refused_with_its_number() {
    for raw in [5u32, 9, u32::MAX] {
        let mut call =
            CallBuilder::new().raw_stage(raw).arg(Arg::from_slice(&[1.0f32], &[1])).ret(Arg::zeros::<f32>(&[1]));
        expect_err(call.run(MD_PLAIN), ErrorCode::Internal, &["md.plain", &format!("unknown execution stage {raw}")]);
        // Still the 0xFF bytes the harness fills results with.
        assert_eq!(call.ret_as::<f32>(0)[0].to_bits(), u32::MAX, "body did not run");
    }
}

// ---- API tables of older or shorter runtimes ----

/// out = [api minor, num_threads, device ordinal]; fails if the ordinal is unavailable.
#[handler(target = "md.ctx_probe")]
fn md_ctx_probe(ctx: Context, mut out: ResultBuffer<i64>) -> Result<()> {
    let out = out.as_uninit()?;
    out[0].write(ctx.api_version().1 as i64);
    out[1].write(ctx.thread_pool().num_threads() as i64);
    let ordinal = ctx.device_ordinal()?;
    out[2].write(ordinal as i64);
    Ok(())
}

fn probe(api: FakeApi) -> (CallBuilder, xla_ffi::testing::CallResult) {
    let mut call = CallBuilder::new().api(api).threads(3).ret(Arg::zeros::<i64>(&[3]));
    let r = call.run(MD_CTX_PROBE);
    (call, r)
}

#[test]
fn api_0_3_sized_table_works() {
    let (call, r) = probe(FakeApi::new(3).with_struct_size(192));
    expect_ok(r);
    assert_eq!(call.ret_as::<i64>(0), vec![3, 3, 0]);
    let mut call = CallBuilder::new()
        .api(FakeApi::new(3).with_struct_size(192))
        .arg(Arg::from_slice(&[1.0f32, 2.0], &[2]))
        .ret(Arg::zeros::<f32>(&[2]));
    expect_ok(call.run(MD_PLAIN_FOR_VERSIONS));
    assert_eq!(call.ret_as::<f32>(0), vec![2.0, 3.0]);
    // Errors still get through a 0.3 table.
    let mut call = CallBuilder::new().api(FakeApi::new(3).with_struct_size(192)).ret(Arg::zeros::<f32>(&[2]));
    expect_err(
        call.run(MD_PLAIN_FOR_VERSIONS),
        ErrorCode::InvalidArgument,
        &["md.versions", "expected 1 operand, got 0"],
    );
}

#[handler(target = "md.versions")]
fn md_plain_for_versions(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(v + 1.0);
    }
    Ok(())
}

#[test]
fn api_0_5_table_works() {
    let (call, r) = probe(FakeApi::new(5));
    expect_ok(r);
    assert_eq!(call.ret_as::<i64>(0), vec![5, 3, 0]);
}

#[test]
fn table_cut_before_num_threads() {
    let cut = core::mem::offset_of!(xla_ffi::sys::XLA_FFI_Api, XLA_FFI_ThreadPool_NumThreads);
    let (call, r) = probe(FakeApi::new(3).with_struct_size(cut));
    // The fake table still holds the later slots: only the size check keeps the
    // crate from calling them, so these results show that it checked.
    expect_err(r, ErrorCode::Unimplemented, &["md.ctx_probe", "FFI API 0.3", "has no XLA_FFI_DeviceOrdinal_Get"]);
    assert_eq!(call.ret_as::<i64>(0)[..2], [3, 1], "num_threads falls back to 1");
}

#[test]
fn table_cut_just_after_num_threads() {
    let cut = core::mem::offset_of!(xla_ffi::sys::XLA_FFI_Api, XLA_FFI_ThreadPool_NumThreads) + 8;
    let (call, r) = probe(FakeApi::new(3).with_struct_size(cut));
    expect_err(r, ErrorCode::Unimplemented, &["md.ctx_probe", "has no XLA_FFI_DeviceOrdinal_Get"]);
    assert_eq!(call.ret_as::<i64>(0)[..2], [3, 3], "num_threads is in the table");
    // One byte short of the ordinal slot is still too short.
    let ord_end = core::mem::offset_of!(xla_ffi::sys::XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get) + 8;
    let (_, r) = probe(FakeApi::new(3).with_struct_size(ord_end - 1));
    expect_err(r, ErrorCode::Unimplemented, &["has no XLA_FFI_DeviceOrdinal_Get"]);
    let (call, r) = probe(FakeApi::new(3).with_struct_size(ord_end));
    expect_ok(r);
    assert_eq!(call.ret_as::<i64>(0), vec![3, 3, 0]);
}
