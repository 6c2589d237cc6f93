//! Execution-context user data (`UserData<T>`), per-execution custom options
//! (`Context::custom_options`, API 0.5) and the code and message of errors the
//! runtime returns, on synthetic frames; older runtimes give a clear error.

mod common;

use common::{expect_err, expect_ok};
use xla_ffi::testing::{register_state_type, Arg, AttrArg, CallBuilder, FakeApi};
use xla_ffi::{handler, state_type, Context, Error, ErrorCode, Result, ResultBuffer, UserData};

/// User data an embedder sets per run.
struct Scale(f64);
state_type!(Scale);
const SCALE_ID: i64 = 301;

/// Another registered type: data stored under its id is never read as a `Scale`.
struct Other(#[allow(dead_code)] u8);
state_type!(Other);
const OTHER_ID: i64 = 302;

/// Never registered.
struct NotRegistered(#[allow(dead_code)] f64);
state_type!(NotRegistered);

fn register() {
    register_state_type::<Scale>(SCALE_ID);
    register_state_type::<Other>(OTHER_ID);
}

#[handler(target = "ud.scale")]
fn ud_scale(scale: UserData<Scale>, mut y: ResultBuffer<f64>) -> Result<()> {
    for (i, o) in y.as_uninit()?.iter_mut().enumerate() {
        o.write(scale.0 * i as f64);
    }
    Ok(())
}

#[test]
fn user_data_is_read_as_its_type() {
    register();
    let mut call = CallBuilder::new().user_data(Other(9)).user_data(Scale(1.5)).ret(Arg::zeros::<f64>(&[3]));
    expect_ok(call.run(UD_SCALE));
    assert_eq!(call.ret_as::<f64>(0), vec![0.0, 1.5, 3.0]);
}

#[test]
fn missing_user_data_names_target_parameter_and_type() {
    register();
    // Only another type's data is there: it is not taken for a `Scale`.
    let mut call = CallBuilder::new().user_data(Other(1)).ret(Arg::zeros::<f64>(&[3]));
    expect_err(
        call.run(UD_SCALE),
        ErrorCode::InvalidArgument,
        &["ud.scale: user data `scale`", &format!("User data with type id {SCALE_ID} not found")],
    );
}

#[handler(target = "ud.unregistered")]
fn ud_unregistered(_d: UserData<NotRegistered>) -> Result<()> {
    Ok(())
}

#[test]
fn user_data_of_an_unregistered_type_is_refused() {
    expect_err(
        CallBuilder::new().run(UD_UNREGISTERED),
        ErrorCode::InvalidArgument,
        &["ud.unregistered: user data `_d`", "NotRegistered", "not registered with XLA", "register_ffi_type"],
    );
}

#[test]
#[should_panic(expected = "is not registered; call testing::register_state_type first")]
fn builder_refuses_user_data_of_an_unregistered_type() {
    let _ = CallBuilder::new().user_data(NotRegistered(1.0));
}

/// Reads the user data in the body and reports the error it got as the call's.
#[handler(target = "ud.in_body")]
fn ud_in_body(ctx: Context) -> Result<()> {
    let s: &Scale = ctx.user_data::<Scale>()?;
    if s.0 != 2.0 {
        return Err(Error::internal("wrong value"));
    }
    Ok(())
}

/// The runtime's error comes back with its code (NOT_FOUND) and message on API 0.5
/// (a build on the 0.3 header, which has no code field, reads `INTERNAL`).
#[test]
fn runtime_error_code_and_message_come_back() {
    register();
    expect_ok(CallBuilder::new().user_data(Scale(2.0)).run(UD_IN_BODY));
    let code = if xla_ffi::sys::compat::HAS_ERROR_DETAILS { ErrorCode::NotFound } else { ErrorCode::Internal };
    expect_err(
        CallBuilder::new().run(UD_IN_BODY),
        code,
        &["ud.in_body: ", &format!("User data with type id {SCALE_ID} not found")],
    );
}

/// API 0.3's `Error_GetMessage` gives no code: the message still comes back, with
/// `INTERNAL`, as XLA's C++ wrapper reads it.
#[test]
fn runtime_error_on_api_0_3_keeps_its_message() {
    register();
    let api = FakeApi::new(3).with_struct_size(192);
    expect_ok(CallBuilder::new().api(api).user_data(Scale(2.0)).run(UD_IN_BODY));
    let api = FakeApi::new(3).with_struct_size(192);
    expect_err(
        CallBuilder::new().api(api).run(UD_IN_BODY),
        ErrorCode::Internal,
        &["ud.in_body: ", &format!("User data with type id {SCALE_ID} not found")],
    );
}

#[test]
fn table_without_the_user_data_slot_is_a_clear_error() {
    register();
    // Cut just before the slot (it follows `Type_Register`).
    let cut = core::mem::offset_of!(xla_ffi::sys::XLA_FFI_Api, XLA_FFI_Type_Register) + 8;
    let api = FakeApi::new(3).with_struct_size(cut);
    expect_err(
        CallBuilder::new().api(api).user_data(Scale(2.0)).run(UD_IN_BODY),
        ErrorCode::Unimplemented,
        &["ud.in_body", "FFI API 0.3", "has no XLA_FFI_InvokeContext_Get"],
    );
}

/// out = [number of options, `scale` (or -1), length of `label` (or -1)]
#[handler(target = "co.read")]
fn co_read(ctx: Context, mut out: ResultBuffer<f64>) -> Result<()> {
    let options = ctx.custom_options()?;
    let scale: Option<f64> = options.get("scale").map_err(|e| Error::invalid_argument(format!("scale: {e}")))?;
    let label: Option<&str> = options.get("label").map_err(|e| Error::invalid_argument(format!("label: {e}")))?;
    let out = out.as_uninit()?;
    out[0].write(options.len() as f64);
    out[1].write(scale.unwrap_or(-1.0));
    out[2].write(label.map_or(-1.0, |l| l.len() as f64));
    Ok(())
}

#[test]
fn custom_options_are_read() {
    if !xla_ffi::sys::compat::HAS_CUSTOM_OPTIONS {
        return; // a build on the API 0.3 header: `custom_options_on_old_runtimes` covers it
    }
    let mut call = CallBuilder::new()
        .custom_option("scale", AttrArg::scalar(2.5f64))
        .custom_option("label", AttrArg::Str("fast".into()))
        .ret(Arg::zeros::<f64>(&[3]));
    expect_ok(call.run(CO_READ));
    assert_eq!(call.ret_as::<f64>(0), vec![2.0, 2.5, 4.0]);
    // None given: an empty dictionary, as on XLA:CPU.
    let mut call = CallBuilder::new().ret(Arg::zeros::<f64>(&[3]));
    expect_ok(call.run(CO_READ));
    assert_eq!(call.ret_as::<f64>(0), vec![0.0, -1.0, -1.0]);
    // A wrong type is the handler's error, with the option's name.
    let mut call = CallBuilder::new().custom_option("scale", AttrArg::Str("x".into())).ret(Arg::zeros::<f64>(&[3]));
    expect_err(call.run(CO_READ), ErrorCode::InvalidArgument, &["scale: expected"]);
}

#[test]
fn custom_options_on_old_runtimes() {
    // jaxlib 0.10: API 0.3, a 192-byte table.
    let mut call = CallBuilder::new().api(FakeApi::new(3).with_struct_size(192)).ret(Arg::zeros::<f64>(&[3]));
    expect_err(
        call.run(CO_READ),
        ErrorCode::Unimplemented,
        &["co.read: custom options need XLA FFI API 0.5 or newer", "this XLA runtime has FFI API 0.3"],
    );
    // A full-size table that reports 0.4: the version decides, the slot is not called.
    let mut call = CallBuilder::new().api(FakeApi::new(4)).ret(Arg::zeros::<f64>(&[3]));
    expect_err(call.run(CO_READ), ErrorCode::Unimplemented, &["need XLA FFI API 0.5", "FFI API 0.4"]);
    // A 0.5 table cut before the slot (at jaxlib 0.10's 192 bytes): its size decides.
    let cut = core::mem::offset_of!(xla_ffi::sys::XLA_FFI_Api, XLA_FFI_DeviceOrdinal_Get) + 8;
    assert_eq!(cut, 192);
    let mut call = CallBuilder::new().api(FakeApi::new(5).with_struct_size(cut)).ret(Arg::zeros::<f64>(&[3]));
    expect_err(
        call.run(CO_READ),
        ErrorCode::Unimplemented,
        &["need XLA FFI API 0.5", "has no XLA_FFI_CustomOptions_Get"],
    );
}
