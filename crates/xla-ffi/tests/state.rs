//! Handler state: instantiate creates it, execute reads it as `&S`, XLA frees it
//! through the registered deleter.

mod common;

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;

use common::{expect_err, expect_ok};
use xla_ffi::testing::{register_state_type, Arg, AttrArg, CallBuilder};
use xla_ffi::{handler, state_type, Attr, ErrorCode, Result, ResultBuffer, Stage, State, StateType};

/// Ids of the `Table`s dropped so far.
static DROPPED: Mutex<Vec<i64>> = Mutex::new(Vec::new());
/// Address of the last state an execute call saw, per id (id -> address).
static SEEN: Mutex<Vec<(i64, usize)>> = Mutex::new(Vec::new());

/// A state: a table of `len` values `id * 1000 + i`, and a call counter.
struct Table {
    id: i64,
    values: Vec<i64>,
    calls: AtomicUsize,
}

impl Drop for Table {
    fn drop(&mut self) {
        DROPPED.lock().unwrap().push(self.id);
    }
}

state_type!(Table);

const TABLE_TYPE_ID: i64 = 7;

/// A state type that is never registered.
struct Unregistered(#[allow(dead_code)] i64);
state_type!(Unregistered);

#[handler(target = "st.table", stage = instantiate)]
fn st_table_init(id: Attr<i64>, len: Attr<i64>) -> Result<Table> {
    if *len < 0 {
        return Err(xla_ffi::Error::invalid_argument(format!("len = {} < 0", *len)));
    }
    Ok(Table { id: *id, values: (0..*len).map(|i| *id * 1000 + i).collect(), calls: AtomicUsize::new(0) })
}

/// out = [calls so far (including this one), values...]
#[handler(target = "st.table")]
fn st_table_exec(state: State<Table>, id: Attr<i64>, len: Attr<i64>, mut out: ResultBuffer<i64>) -> Result<()> {
    assert_eq!((state.id, state.values.len() as i64), (*id, *len));
    SEEN.lock().unwrap().push((state.id, &*state as *const Table as usize));
    let calls = state.calls.fetch_add(1, Ordering::SeqCst) + 1;
    let out = out.as_uninit()?;
    out[0].write(calls as i64);
    for (o, &v) in out[1..].iter_mut().zip(&state.values) {
        o.write(v);
    }
    Ok(())
}

#[handler(target = "st.unregistered", stage = instantiate)]
fn st_unregistered_init() -> Result<Unregistered> {
    Ok(Unregistered(1))
}

#[handler(target = "st.unregistered")]
fn st_unregistered_exec(state: State<Unregistered>) -> Result<()> {
    let _ = &*state;
    Ok(())
}

fn table_call(id: i64, len: i64) -> CallBuilder {
    register_state_type::<Table>(TABLE_TYPE_ID);
    CallBuilder::new()
        .stage(Stage::Instantiate)
        .attr("id", AttrArg::scalar(id))
        .attr("len", AttrArg::scalar(len))
        .ret(Arg::zeros::<i64>(&[len + 1]))
}

#[test]
fn instantiate_then_execute_on_the_same_call_site() {
    let mut call = table_call(1, 3);
    expect_ok(call.run(ST_TABLE_INIT));
    call.set_stage(Stage::Execute);
    for n in 1..=3 {
        expect_ok(call.run(ST_TABLE_EXEC));
        assert_eq!(call.ret_as::<i64>(0), vec![n, 1000, 1001, 1002]);
    }
    assert!(!DROPPED.lock().unwrap().contains(&1), "state freed too early");
}

#[test]
fn execute_without_instantiate_is_an_error() {
    let mut call = table_call(2, 1);
    call.set_stage(Stage::Execute);
    expect_err(call.run(ST_TABLE_EXEC), ErrorCode::InvalidArgument, &["st.table", "state `state`", "not found"]);
}

#[test]
fn instantiate_errors_are_reported_and_create_no_state() {
    let mut call = table_call(3, -1);
    expect_err(call.run(ST_TABLE_INIT), ErrorCode::InvalidArgument, &["st.table: len = -1 < 0"]);
    call.set_stage(Stage::Execute);
    expect_err(call.run(ST_TABLE_EXEC), ErrorCode::InvalidArgument, &["st.table", "not found"]);
}

#[test]
fn second_instantiate_fails_and_frees_its_state() {
    let mut call = table_call(4, 2);
    expect_ok(call.run(ST_TABLE_INIT));
    assert!(!DROPPED.lock().unwrap().contains(&4));
    // XLA refuses a second state for the same type: the new one is dropped at once,
    // the first stays.
    expect_err(call.run(ST_TABLE_INIT), common::runtime_code(ErrorCode::AlreadyExists), &["st.table", "already set"]);
    assert_eq!(DROPPED.lock().unwrap().iter().filter(|&&d| d == 4).count(), 1);
    call.set_stage(Stage::Execute);
    expect_ok(call.run(ST_TABLE_EXEC));
    assert_eq!(call.ret_as::<i64>(0), vec![1, 4000, 4001]);
}

#[test]
fn unregistered_state_type() {
    assert_eq!(Unregistered::registration().type_id(), 0);
    let mut call = CallBuilder::new().stage(Stage::Instantiate);
    expect_err(
        call.run(ST_UNREGISTERED_INIT),
        ErrorCode::FailedPrecondition,
        &["st.unregistered", "not registered", "register_ffi_type"],
    );
    call.set_stage(Stage::Execute);
    expect_err(
        call.run(ST_UNREGISTERED_EXEC),
        ErrorCode::InvalidArgument,
        &["st.unregistered", "state `state`", "not registered", "register_ffi_type"],
    );
    // The metadata reports no state type yet.
    assert_eq!(CallBuilder::new().metadata(ST_UNREGISTERED_EXEC).unwrap(), (0, 3, 0, 0));
}

#[test]
fn metadata_reports_the_state_type_id() {
    register_state_type::<Table>(TABLE_TYPE_ID);
    assert_eq!(Table::registration().type_id(), TABLE_TYPE_ID);
    assert_eq!(CallBuilder::new().metadata(ST_TABLE_INIT).unwrap(), (0, 3, 0, TABLE_TYPE_ID));
    assert_eq!(CallBuilder::new().metadata(ST_TABLE_EXEC).unwrap(), (0, 3, 0, TABLE_TYPE_ID));
}

#[test]
fn stage_mismatch_for_an_instantiate_handler() {
    let mut call = table_call(5, 1);
    call.set_stage(Stage::Execute);
    expect_err(
        call.run(ST_TABLE_INIT),
        ErrorCode::Internal,
        &["st.table", "handles the instantiate stage", "called at the execute stage"],
    );
}

#[test]
fn deleter_drops_the_state() {
    let mut call = table_call(6, 2);
    expect_ok(call.run(ST_TABLE_INIT));
    call.set_stage(Stage::Execute);
    expect_ok(call.run(ST_TABLE_EXEC));
    let addr =
        SEEN.lock().unwrap().iter().rev().find(|(id, _)| *id == 6).map(|&(_, a)| a).expect("execute saw the state");
    assert!(!DROPPED.lock().unwrap().contains(&6));
    // XLA frees the state through the TypeInfo's deleter when the executable dies:
    // the fake runtime does that when the call's context is dropped.
    drop(call);
    assert_eq!(DROPPED.lock().unwrap().iter().filter(|&&d| d == 6).count(), 1);
    let _ = addr;
    // A NULL state is ignored.
    let info = Table::registration().type_info_ptr() as *const xla_ffi::sys::XLA_FFI_TypeInfo;
    // SAFETY: a registration's TypeInfo is a valid static.
    let deleter = unsafe { (*info).deleter }.expect("a deleter");
    // SAFETY: the deleter accepts NULL.
    unsafe { deleter(core::ptr::null_mut()) };
}

/// A state whose Drop panics: the deleter must not unwind into XLA.
struct PanicsOnDrop;
impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        PANIC_DROPS.fetch_add(1, Ordering::SeqCst);
        panic!("deliberate panic in Drop");
    }
}
state_type!(PanicsOnDrop);
static PANIC_DROPS: AtomicI64 = AtomicI64::new(0);

#[test]
fn deleter_contains_a_panicking_drop() {
    common::quiet_deliberate_panics();
    let info = PanicsOnDrop::registration().type_info_ptr() as *const xla_ffi::sys::XLA_FFI_TypeInfo;
    // SAFETY: a registration's TypeInfo is a valid static.
    let deleter = unsafe { (*info).deleter }.expect("a deleter");
    let p = Box::into_raw(Box::new(PanicsOnDrop)) as *mut core::ffi::c_void;
    // SAFETY: `p` is a leaked Box<PanicsOnDrop>, as instantiate stores; freed once.
    unsafe { deleter(p) };
    assert_eq!(PANIC_DROPS.load(Ordering::SeqCst), 1);
}

#[test]
fn type_registration_pointers_alias_the_id() {
    register_state_type::<Table>(TABLE_TYPE_ID);
    let reg = Table::registration();
    // SAFETY: type_id_ptr points to an XLA_FFI_TypeId-shaped i64.
    assert_eq!(unsafe { *(reg.type_id_ptr() as *const i64) }, TABLE_TYPE_ID);
    let info = reg.type_info_ptr() as *const xla_ffi::sys::XLA_FFI_TypeInfo;
    // SAFETY: as above.
    assert_eq!(unsafe { (*info).struct_size }, xla_ffi::sys::XLA_FFI_TypeInfo_STRUCT_SIZE as usize);
}

/// Another state type, for the id-collision check of the fake runtime.
struct Other(#[allow(dead_code)] u8);
state_type!(Other);

/// Two state types under one id would let one type's state be read (and freed) as
/// the other's: the fake runtime refuses it, as XLA gives each type its own id.
#[test]
fn one_id_cannot_be_registered_for_two_state_types() {
    register_state_type::<Table>(TABLE_TYPE_ID);
    let r = std::panic::catch_unwind(|| register_state_type::<Other>(TABLE_TYPE_ID));
    let msg = common::panic_text(r.expect_err("a second type under one id must be refused"));
    assert!(msg.contains("id 7 is already registered for another state type") && msg.contains("Other"), "{msg}");
    // The record of `Other` was left untouched, and `Table` keeps its id.
    assert_eq!(Other::registration().type_id(), 0);
    assert_eq!(Table::registration().type_id(), TABLE_TYPE_ID);
    let r = std::panic::catch_unwind(|| register_state_type::<Other>(0));
    assert!(common::panic_text(r.expect_err("id 0 must be refused")).contains("id 0"));
}

// ---- an instantiate stage that keeps no state (`ffi.h`'s plain `Error` there) ----

static CHECKED: AtomicUsize = AtomicUsize::new(0);

/// Validates the call site's attributes once, when XLA compiles, and keeps nothing.
#[handler(target = "st.checked", stage = instantiate)]
fn st_checked_init(k: Attr<i64>) -> Result<()> {
    CHECKED.fetch_add(1, Ordering::SeqCst);
    xla_ffi::ensure!(*k > 0, InvalidArgument, "attribute `k`: expected a positive integer, got {}", *k);
    Ok(())
}

#[handler(target = "st.checked")]
fn st_checked_exec(k: Attr<i64>, mut out: ResultBuffer<i64>) -> Result<()> {
    out.as_uninit()?[0].write(*k);
    Ok(())
}

#[test]
fn instantiate_may_keep_no_state() {
    let mut call =
        CallBuilder::new().stage(Stage::Instantiate).attr("k", AttrArg::scalar(3i64)).ret(Arg::zeros::<i64>(&[1]));
    let before = CHECKED.load(Ordering::SeqCst);
    expect_ok(call.run(ST_CHECKED_INIT));
    assert_eq!(CHECKED.load(Ordering::SeqCst), before + 1);
    call.set_stage(Stage::Execute);
    expect_ok(call.run(ST_CHECKED_EXEC));
    assert_eq!(call.ret_as::<i64>(0), vec![3]);
    // Its error is the call's; the metadata reports no state type.
    let mut bad = CallBuilder::new().stage(Stage::Instantiate).attr("k", AttrArg::scalar(0i64));
    expect_err(bad.run(ST_CHECKED_INIT), ErrorCode::InvalidArgument, &["st.checked", "attribute `k`", "got 0"]);
    assert_eq!(CallBuilder::new().metadata(ST_CHECKED_INIT).unwrap(), (0, 3, 0, 0));
    // A second instantiate at the same call site is fine: there is nothing to store.
    call.set_stage(Stage::Instantiate);
    expect_ok(call.run(ST_CHECKED_INIT));
}
