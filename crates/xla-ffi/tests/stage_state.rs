//! State at the prepare and initialize stages (`State<S, Prepare>`, `Prepared<S>`,
//! `Initialized<S>`), and the record stage, on synthetic frames: XLA:CPU runs
//! neither prepare, initialize nor record, so the GPU-like fake runtime stands in.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use common::{expect_err, expect_ok};
use xla_ffi::stage::{Initialize, Instantiate, Prepare};
use xla_ffi::testing::{register_state_type, CallBuilder, FakeApi};
use xla_ffi::{
    handler, state_type, Call, Decode, ErrorCode, Initialized, Prepared, Result, ResultBuffer, Stage, State,
};

/// One state type per stage, and one used at two stages.
struct Plan(i64);
struct Workspace(i64);
struct Compiled(i64);
struct Shared(&'static str);
/// Never registered.
struct Unregistered;
state_type!(Plan);
state_type!(Workspace);
state_type!(Compiled);
state_type!(Shared);
state_type!(Unregistered);

static DROPPED: Mutex<Vec<i64>> = Mutex::new(Vec::new());
impl Drop for Workspace {
    fn drop(&mut self) {
        DROPPED.lock().unwrap().push(self.0);
    }
}

fn register() {
    register_state_type::<Plan>(301);
    register_state_type::<Workspace>(302);
    register_state_type::<Compiled>(303);
    register_state_type::<Shared>(304);
}

/// A GPU-like call at `stage` (XLA:GPU passes the operands at every stage).
fn device_call(stage: Stage) -> CallBuilder {
    register();
    CallBuilder::new().api(FakeApi::device_like(5)).stage(stage)
}

#[handler(target = "ss.full", stage = instantiate, platform = device)]
fn ss_full_instantiate() -> Result<Compiled> {
    Ok(Compiled(1))
}

#[handler(target = "ss.full", stage = prepare, platform = device)]
fn ss_full_prepare(compiled: State<Compiled>) -> Result<Plan> {
    Ok(Plan(compiled.0 * 10))
}

#[handler(target = "ss.full", stage = initialize, platform = device)]
fn ss_full_initialize(plan: Prepared<Plan>, compiled: State<Compiled, Instantiate>) -> Result<Workspace> {
    Ok(Workspace(plan.0 + compiled.0 + 1000))
}

static EXECUTED: AtomicUsize = AtomicUsize::new(0);

#[handler(target = "ss.full", platform = device)]
fn ss_full_execute(
    compiled: State<Compiled>,
    plan: State<Plan, Prepare>,
    workspace: Initialized<Workspace>,
) -> Result<()> {
    assert_eq!((compiled.0, plan.0, workspace.0), (1, 10, 1011));
    EXECUTED.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[test]
fn each_stage_creates_state_that_the_later_stages_read() {
    let mut call = device_call(Stage::Instantiate);
    expect_ok(call.run(SS_FULL_INSTANTIATE));
    call.set_stage(Stage::Prepare);
    expect_ok(call.run(SS_FULL_PREPARE));
    call.set_stage(Stage::Initialize);
    expect_ok(call.run(SS_FULL_INITIALIZE));
    call.set_stage(Stage::Execute);
    let before = EXECUTED.load(Ordering::SeqCst);
    expect_ok(call.run(SS_FULL_EXECUTE));
    expect_ok(call.run(SS_FULL_EXECUTE));
    assert_eq!(EXECUTED.load(Ordering::SeqCst), before + 2);
}

#[test]
fn prepare_and_initialize_state_is_freed_with_the_executable() {
    #[handler(target = "ss.drop", stage = initialize, platform = device)]
    fn ss_drop_initialize() -> Result<Workspace> {
        Ok(Workspace(-7))
    }
    let mut call = device_call(Stage::Initialize);
    expect_ok(call.run(SS_DROP_INITIALIZE));
    assert!(!DROPPED.lock().unwrap().contains(&-7), "state freed too early");
    // XLA frees every stage's state with the executable; the fake context does too.
    drop(call);
    assert_eq!(DROPPED.lock().unwrap().iter().filter(|&&d| d == -7).count(), 1);
}

#[test]
fn execute_before_initialize_ran_names_the_stage_and_parameter() {
    let mut call = device_call(Stage::Instantiate);
    expect_ok(call.run(SS_FULL_INSTANTIATE));
    call.set_stage(Stage::Prepare);
    expect_ok(call.run(SS_FULL_PREPARE));
    call.set_stage(Stage::Execute);
    expect_err(call.run(SS_FULL_EXECUTE), ErrorCode::InvalidArgument, &["ss.full", "state `workspace`", "not found"]);
}

#[test]
fn the_prepare_state_is_not_the_instantiate_state() {
    // XLA keeps one store per stage: one type can have a state at each.
    #[handler(target = "ss.shared", stage = instantiate, platform = device)]
    fn ss_shared_instantiate() -> Result<Shared> {
        Ok(Shared("instantiate"))
    }
    #[handler(target = "ss.shared", stage = prepare, platform = device)]
    fn ss_shared_prepare() -> Result<Shared> {
        Ok(Shared("prepare"))
    }
    #[handler(target = "ss.shared", platform = device)]
    fn ss_shared_execute(a: State<Shared>, b: Prepared<Shared>) -> Result<()> {
        assert_eq!((a.0, b.0), ("instantiate", "prepare"));
        Ok(())
    }
    let mut call = device_call(Stage::Instantiate);
    expect_ok(call.run(SS_SHARED_INSTANTIATE));
    call.set_stage(Stage::Execute);
    expect_err(call.run(SS_SHARED_EXECUTE), ErrorCode::InvalidArgument, &["state `b`", "not found"]);
    call.set_stage(Stage::Prepare);
    expect_ok(call.run(SS_SHARED_PREPARE));
    // A second prepare state of the same type is refused, as XLA does.
    expect_err(
        call.run(SS_SHARED_PREPARE),
        common::runtime_code(ErrorCode::AlreadyExists),
        &["ss.shared", "already set"],
    );
    call.set_stage(Stage::Execute);
    expect_ok(call.run(SS_SHARED_EXECUTE));
}

static PREPARED_PLAIN: AtomicUsize = AtomicUsize::new(0);

#[handler(target = "ss.plain", stage = prepare, platform = device)]
fn ss_plain_prepare() -> Result<()> {
    PREPARED_PLAIN.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[test]
fn a_prepare_handler_may_keep_no_state() {
    let mut call = device_call(Stage::Prepare);
    let before = PREPARED_PLAIN.load(Ordering::SeqCst);
    expect_ok(call.run(SS_PLAIN_PREPARE));
    expect_ok(call.run(SS_PLAIN_PREPARE));
    assert_eq!(PREPARED_PLAIN.load(Ordering::SeqCst), before + 2);
    assert_eq!(call.metadata(SS_PLAIN_PREPARE).unwrap(), (0, 3, 0, 0));
}

#[test]
fn metadata_reports_the_state_a_stage_creates() {
    let mut call = device_call(Stage::Execute);
    assert_eq!(call.metadata(SS_FULL_PREPARE).unwrap().3, 301);
    assert_eq!(call.metadata(SS_FULL_INITIALIZE).unwrap().3, 302);
}

static UNREGISTERED_RAN: AtomicUsize = AtomicUsize::new(0);

#[handler(target = "ss.unregistered", stage = initialize, platform = device)]
fn ss_unregistered_initialize() -> Result<Unregistered> {
    UNREGISTERED_RAN.fetch_add(1, Ordering::SeqCst);
    Ok(Unregistered)
}

#[test]
fn an_unregistered_state_type_fails_before_the_body_runs() {
    let mut call = device_call(Stage::Initialize);
    expect_err(
        call.run(SS_UNREGISTERED_INITIALIZE),
        ErrorCode::FailedPrecondition,
        &["ss.unregistered", "not registered", "register_ffi_type"],
    );
    assert_eq!(UNREGISTERED_RAN.load(Ordering::SeqCst), 0);
}

// ---- CPU: XLA:CPU keeps no prepare or initialize state ----

#[handler(target = "ss.host_reads_prepared")]
fn ss_host_reads_prepared(plan: Prepared<Plan>, mut out: ResultBuffer<i64>) -> Result<()> {
    out.as_uninit()?[0].write(plan.0);
    Ok(())
}

#[test]
fn a_cpu_handler_cannot_read_prepare_state() {
    register();
    let mut call = CallBuilder::new().ret(xla_ffi::testing::Arg::zeros::<i64>(&[1]));
    expect_err(
        call.run(SS_HOST_READS_PREPARED),
        ErrorCode::InvalidArgument,
        &["ss.host_reads_prepared", "state `plan`", "prepare state exists only on GPU", "never runs the prepare stage"],
    );
}

// ---- the stage of the call, checked at run time too ----

/// A third-party parameter type that reads initialize state: the macro cannot see
/// inside it (its `STATE_STAGE` is the default), so the decoder checks the stage.
struct Sneaky<'f>(#[allow(dead_code)] Initialized<'f, Workspace>);

impl<'f> Decode<'f> for Sneaky<'f> {
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        State::<Workspace, Initialize>::decode(call, name).map(Sneaky)
    }
}

#[handler(target = "ss.sneaky", stage = prepare, platform = device)]
fn ss_sneaky_prepare(_w: Sneaky) -> Result<()> {
    Ok(())
}

#[test]
fn a_wrapped_state_of_a_later_stage_is_refused_at_run_time() {
    let mut call = device_call(Stage::Prepare);
    expect_err(
        call.run(SS_SNEAKY_PREPARE),
        ErrorCode::InvalidArgument,
        &["ss.sneaky", "state `_w`", "at the prepare stage cannot read the state of the initialize stage"],
    );
}

// ---- older runtimes ----

#[test]
fn staged_state_needs_api_0_3() {
    register();
    // Reading: the parameter names what is missing.
    let mut call = CallBuilder::new().api(FakeApi::device_like(2)).stage(Stage::Execute);
    expect_err(
        call.run(SS_FULL_EXECUTE),
        ErrorCode::InvalidArgument,
        &["ss.full", "state `compiled`", "instantiate state needs XLA FFI API 0.3 or newer", "FFI API 0.2"],
    );
    // Creating: refused before the body runs.
    call.set_stage(Stage::Prepare);
    #[handler(target = "ss.make_plan", stage = prepare, platform = device)]
    fn ss_make_plan() -> Result<Plan> {
        Ok(Plan(0))
    }
    expect_err(
        call.run(SS_MAKE_PLAN),
        ErrorCode::Unimplemented,
        &["ss.make_plan", "prepare state needs XLA FFI API 0.3 or newer", "FFI API 0.2"],
    );
}

// ---- the record stage ----

static RECORDED: AtomicUsize = AtomicUsize::new(0);

#[handler(target = "ss.full", stage = record, platform = device)]
fn ss_full_record(workspace: Initialized<Workspace>, plan: Prepared<Plan>) -> Result<()> {
    assert_eq!((workspace.0, plan.0), (1011, 10));
    RECORDED.fetch_add(1, Ordering::SeqCst);
    Ok(())
}

#[test]
fn a_record_handler_runs_at_the_record_stage_and_reads_earlier_state() {
    let mut call = device_call(Stage::Instantiate);
    expect_ok(call.run(SS_FULL_INSTANTIATE));
    call.set_stage(Stage::Prepare);
    expect_ok(call.run(SS_FULL_PREPARE));
    call.set_stage(Stage::Initialize);
    expect_ok(call.run(SS_FULL_INITIALIZE));
    call.set_stage(Stage::Record);
    let before = RECORDED.load(Ordering::SeqCst);
    expect_ok(call.run(SS_FULL_RECORD));
    assert_eq!(RECORDED.load(Ordering::SeqCst), before + 1);
    // The execute symbol is not the record one, nor the other way round.
    expect_err(
        call.run(SS_FULL_EXECUTE),
        ErrorCode::Internal,
        &["handles the execute stage", "called at the record stage"],
    );
    call.set_stage(Stage::Execute);
    expect_err(call.run(SS_FULL_RECORD), ErrorCode::Internal, &["handles the record stage", "key \"record\""]);
    assert_eq!(SS_FULL_RECORD.stage.key(), "record");
}

#[test]
fn the_record_stage_needs_api_0_4() {
    register();
    // At registration: XLA's metadata query of a record handler fails on API 0.3.
    let mut old = CallBuilder::new().api(FakeApi::device_like(3));
    let (code, msg) = old.metadata(SS_FULL_RECORD).unwrap_err();
    assert_eq!(code, ErrorCode::Unimplemented);
    assert!(msg.contains("ss.full: a record-stage handler needs XLA FFI API 0.4 or newer"), "{msg}");
    assert!(msg.contains("FFI API 0.3"), "{msg}");
    assert_eq!(CallBuilder::new().api(FakeApi::device_like(4)).metadata(SS_FULL_RECORD).unwrap(), (0, 3, 0, 301));
    // At the call, should a runtime older than 0.4 ever send the record stage.
    let mut call = CallBuilder::new().api(FakeApi::device_like(3)).stage(Stage::Record);
    expect_err(
        call.run(SS_FULL_RECORD),
        ErrorCode::Unimplemented,
        &["ss.full", "the record stage needs XLA FFI API 0.4 or newer", "FFI API 0.3"],
    );
}

#[test]
fn bundles_carry_every_stage() {
    let b = xla_ffi::bundles(
        &[&SS_FULL_INSTANTIATE, &SS_FULL_PREPARE, &SS_FULL_INITIALIZE, &SS_FULL_EXECUTE, &SS_FULL_RECORD],
        "cuda",
    )
    .unwrap();
    let keys: Vec<&str> = b[0].stages.iter().map(|(s, _)| s.key()).collect();
    assert_eq!(keys, ["instantiate", "prepare", "initialize", "execute", "record"]);
}
