//! Registration into a fake PJRT plugin (`xla_ffi_pjrt::testing`), laid out as the
//! shipped plugins are: both layouts by version, the probe, refusals, bad tables.
//! Runs under Miri (`.ci/miri.sh`).

use std::sync::OnceLock;

use xla_ffi::export::{Registry, TypeEntry};
use xla_ffi::{handler, state_type, Attr, Buffer, Result, ResultBuffer, State, UserData};
use xla_ffi_pjrt::testing::{FakeCall, FakeConfig, FakePlugin};
use xla_ffi_pjrt::{register, ErrorKind, ExecuteContext, HandlerLibrary, PjrtApi};

#[handler(target = "t.copy")]
fn t_copy(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(v);
    }
    Ok(())
}

#[derive(Debug)]
pub struct Scale(f32);
state_type!(Scale);

#[handler(target = "t.scale", stage = instantiate, descriptor = SCALE_INSTANTIATE)]
fn t_scale_instantiate(factor: Attr<f32>) -> Result<Scale> {
    Ok(Scale(*factor))
}

#[handler(target = "t.scale", descriptor = SCALE_EXECUTE)]
fn t_scale_execute(x: Buffer<f32>, mut y: ResultBuffer<f32>, s: State<Scale>) -> Result<()> {
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(s.0 * v);
    }
    Ok(())
}

#[derive(Debug, PartialEq)]
pub struct Offset(f32);
state_type!(Offset);

#[handler(target = "t.offset")]
fn t_offset(x: Buffer<f32>, mut y: ResultBuffer<f32>, off: UserData<Offset>) -> Result<()> {
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(v + off.0);
    }
    Ok(())
}

#[handler(target = "t.gpu", platform = device)]
fn t_gpu(x: Buffer<f32>) -> Result<()> {
    let _ = x;
    Ok(())
}

xla_ffi::export_registry! {
    handlers: [&T_COPY, &SCALE_INSTANTIATE, &SCALE_EXECUTE, &T_OFFSET, &T_GPU],
    types: { "t.Scale" => Scale, "t.Offset" => Offset },
}

fn library() -> HandlerLibrary {
    HandlerLibrary::linked(registry()).unwrap()
}

fn api(fake: &FakePlugin) -> PjrtApi {
    // SAFETY: the fake's table lives as long as `fake`, which outlives the value.
    unsafe { PjrtApi::from_raw(fake.api_ptr()) }.unwrap().named("fake_plugin.so")
}

fn ext_registered(calls: &[FakeCall]) -> Vec<(String, usize)> {
    calls
        .iter()
        .filter_map(|c| match c {
            FakeCall::ExtRegisterHandler { target, struct_size, .. } if !target.starts_with("xla_ffi_pjrt.probe") => {
                Some((target.clone(), *struct_size))
            }
            _ => None,
        })
        .collect()
}

fn bundles(calls: &[FakeCall]) -> Vec<(String, usize, Vec<bool>)> {
    calls
        .iter()
        .filter_map(|c| match c {
            FakeCall::XlaHandlerRegister { target, struct_size, stages, .. } => {
                Some((target.clone(), *struct_size, stages.clone()))
            }
            _ => None,
        })
        .collect()
}

/// PJRT 0.115 / FFI 0.4: types first through the runtime, execute-only targets
/// through the extension (52 bytes), the bundle with five entries (92 bytes); the
/// device target is left out on "Host".
#[test]
fn registers_everything_on_pjrt_0_115() {
    let fake = FakePlugin::new(FakeConfig::default());
    let api = api(&fake);
    assert_eq!(api.version(), (0, 115));
    assert!(api.has_ffi_extension());
    assert_eq!(api.extensions().len(), 2);
    let lib = library();
    assert_eq!(lib.min_ffi_api_version(), xla_ffi::MIN_API_VERSION);
    let done = register(&api, &lib, "Host").unwrap();
    assert_eq!(done.ffi_api_version, (0, 4));
    assert_eq!(done.types, ["t.Scale", "t.Offset"]);
    assert_eq!(done.targets, ["t.copy", "t.scale", "t.offset"]);
    let calls = fake.calls();
    // The probe came first, then the types, then the targets.
    assert!(matches!(&calls[0], FakeCall::ExtRegisterHandler { target, platform, .. }
        if target.starts_with("xla_ffi_pjrt.probe.") && platform == "Host"));
    assert!(matches!(&calls[1], FakeCall::XlaTypeRegister { name, .. } if name == "t.Scale"));
    assert_eq!(ext_registered(&calls), [("t.copy".to_string(), 52), ("t.offset".to_string(), 52)]);
    assert_eq!(bundles(&calls), [("t.scale".to_string(), 92, vec![true, false, false, true, false])]);
    // XLA wrote the ids into the types' own records.
    let ids = fake.types();
    assert_eq!(
        ids.iter().find(|(n, _)| n == "t.Scale").unwrap().1,
        <Scale as xla_ffi::StateType>::registration().type_id()
    );
    // A second registration probes no more (the runtime is cached per platform).
    register(&api, &lib, "Host").unwrap();
    let probes = fake
        .calls()
        .iter()
        .filter(
            |c| matches!(c, FakeCall::ExtRegisterHandler { target, .. } if target.starts_with("xla_ffi_pjrt.probe")),
        )
        .count();
    assert_eq!(probes, 1);
    // The device target goes to a device platform.
    let gpu = register(&api, &lib, "CUDA").unwrap();
    assert_eq!(gpu.targets, ["t.gpu"]);
}

/// PJRT 0.106 / FFI 0.3: the bundle in the 0.3 layout (four entries, 84 bytes).
#[test]
fn registers_bundles_in_the_0_3_layout() {
    let fake = FakePlugin::new(FakeConfig { pjrt_version: (0, 106), ffi_version: (0, 3), ..FakeConfig::default() });
    let api = api(&fake);
    let done = register(&api, &library(), "cpu").unwrap();
    assert_eq!(done.ffi_api_version, (0, 3));
    assert_eq!(bundles(&fake.calls()), [("t.scale".to_string(), 84, vec![true, false, false, true])]);
}

/// An FFI 0.2 runtime drops registration errors: refused first, with our message.
#[test]
fn refuses_an_ffi_0_2_runtime() {
    let fake = FakePlugin::new(FakeConfig { ffi_version: (0, 2), ..FakeConfig::default() });
    let e = register(&api(&fake), &library(), "Host").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooOld);
    let m = e.message();
    assert!(m.starts_with("fake_plugin.so: its XLA FFI runtime has API 0.2;"), "{m}");
    assert!(m.contains("need 0.3 or newer") && m.contains("No FFI handler registered"), "{m}");
    // Nothing but the probe reached the plugin.
    assert!(ext_registered(&fake.calls()).is_empty());
}

#[test]
fn refuses_a_plugin_without_the_ffi_extension() {
    let fake = FakePlugin::new(FakeConfig { ffi_extension: false, ..FakeConfig::default() });
    let api = api(&fake);
    assert!(!api.has_ffi_extension());
    let e = register(&api, &library(), "Host").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoFfiExtension);
    assert!(e.message().contains("fake_plugin.so: no FFI extension") && e.message().contains("[1]"), "{e}");
    // An extension too short for `register_handler`.
    let fake = FakePlugin::new(FakeConfig { ffi_extension_size: 40, ..FakeConfig::default() });
    let e = register(&api_of(&fake), &library(), "Host").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::NoFfiExtension);
    assert!(e.message().contains("no register_handler"), "{e}");
}

fn api_of(fake: &FakePlugin) -> PjrtApi {
    api(fake)
}

#[test]
fn refuses_old_pjrt_layouts_and_bad_tables() {
    let fake = FakePlugin::new(FakeConfig { pjrt_version: (0, 80), ..FakeConfig::default() });
    let e = register(&api(&fake), &library(), "Host").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TooOld);
    assert!(e.message().contains("PJRT API 0.80 is older than 0.81"), "{e}");
    assert!(fake.calls().is_empty());
    // A type no registration gave an id is not registered either.
    struct Fresh;
    state_type!(Fresh);
    let e = ExecuteContext::new(&api(&fake)).unwrap().add_user_data(Fresh).unwrap_err();
    assert!(e.message().contains("PJRT API 0.80 is older than 0.81"), "{e}");

    // SAFETY: null is allowed.
    let e = unsafe { PjrtApi::from_raw(core::ptr::null()) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadApi);
    let fake = FakePlugin::new(FakeConfig { api_struct_size: 16, ..FakeConfig::default() });
    // SAFETY: the fake's table, alive.
    let e = unsafe { PjrtApi::from_raw(fake.api_ptr()) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::BadApi);
    assert!(e.message().contains("struct_size 16"), "{e}");
    let fake = FakePlugin::new(FakeConfig { ffi_extension_size: 8, ..FakeConfig::default() });
    // SAFETY: as above.
    let e = unsafe { PjrtApi::from_raw(fake.api_ptr()) }.unwrap_err();
    assert!(e.message().contains("shorter than PJRT_Extension_Base"), "{e}");
}

/// The plugin's refusal reaches the caller with the plugin, target and cause.
#[test]
fn a_refusal_names_plugin_target_and_cause() {
    let fake = FakePlugin::new(FakeConfig {
        refuse: Some(("t.copy".into(), "deliberately refused".into())),
        ..FakeConfig::default()
    });
    let e = register(&api(&fake), &library(), "Host").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Refused);
    let m = e.message();
    assert!(m.starts_with("fake_plugin.so: target t.copy of "), "{m}");
    assert!(m.contains("code 3: deliberately refused"), "{m}");
    let fake = FakePlugin::new(FakeConfig {
        refuse: Some(("t.scale".into(), "no bundles today".into())),
        ..FakeConfig::default()
    });
    let e = register(&api(&fake), &library(), "Host").unwrap_err();
    assert!(e.message().contains("target t.scale of") && e.message().contains("code 3: no bundles today"), "{e}");
}

/// A plugin that does not query metadata at registration cannot be probed.
#[test]
fn a_plugin_without_the_metadata_query_cannot_be_probed() {
    let fake = FakePlugin::new(FakeConfig { metadata_query: false, ..FakeConfig::default() });
    let e = register(&api(&fake), &library(), "Host").unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Refused);
    assert!(e.message().contains("cannot reach its XLA FFI runtime") && e.message().contains("was not called"), "{e}");
}

/// A registry that could not be built is refused with its reason.
#[test]
fn a_broken_registry_is_refused() {
    // Statics, so that Miri does not count them as leaks.
    static BROKEN: OnceLock<Registry> = OnceLock::new();
    static DUP: OnceLock<Registry> = OnceLock::new();
    static NOEXEC: OnceLock<Registry> = OnceLock::new();
    let reg = BROKEN.get_or_init(|| Registry::new("broken 0.1", &[&SCALE_EXECUTE, &SCALE_EXECUTE], &[]));
    let e = HandlerLibrary::linked(reg).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Library);
    assert!(e.message().contains("two handlers for the execute stage"), "{e}");
    let types = [TypeEntry::of::<Scale>("x"), TypeEntry::of::<Offset>("x")];
    let reg = DUP.get_or_init(|| Registry::new("dup 0.1", &[&T_COPY], &types));
    assert!(HandlerLibrary::linked(reg).unwrap_err().message().contains("type \"x\" listed twice"));
    // One type under two names: its one id slot cannot hold both ids.
    static TWO_NAMES: OnceLock<Registry> = OnceLock::new();
    let types = [TypeEntry::of::<Scale>("a"), TypeEntry::of::<Scale>("b")];
    let reg = TWO_NAMES.get_or_init(|| Registry::new("two 0.1", &[&T_COPY], &types));
    let e = HandlerLibrary::linked(reg).unwrap_err();
    assert!(e.message().contains("one type listed under two names, \"a\" and \"b\""), "{e}");
    // No bundle without an execute stage.
    let reg = NOEXEC.get_or_init(|| Registry::new("noexec 0.1", &[&SCALE_INSTANTIATE], &[]));
    assert!(HandlerLibrary::linked(reg).unwrap_err().message().contains("no execute handler"));
}

/// User data: the type registered through the runtime (its record has the id),
/// the value handed to the context under that id, the context destroyed on drop.
#[test]
fn user_data_goes_into_an_execute_context() {
    let fake = FakePlugin::new(FakeConfig::default());
    let api = api(&fake);
    register(&api, &library(), "Host").unwrap();
    let id = <Offset as xla_ffi::StateType>::registration().type_id();
    assert_ne!(id, 0);
    {
        let mut ctx = ExecuteContext::new(&api).unwrap();
        ctx.add_user_data(Offset(2.5)).unwrap();
        let p = fake.user_data(ctx.as_ptr(), id).unwrap();
        // SAFETY: the fake hands back the pointer it was given: an `Offset` owned by `ctx`.
        assert_eq!(unsafe { &*(p as *const Offset) }, &Offset(2.5));
        let e = ctx.add_user_data(Offset(1.0)).unwrap_err();
        assert!(e.message().contains("adding user data of type") && e.message().contains("already"), "{e}");
    }
    let calls = fake.calls();
    assert!(calls.contains(&FakeCall::ExtUserDataAdd { type_id: id, struct_size: 48 }));
    assert_eq!(calls.last(), Some(&FakeCall::ContextDestroy));
}

/// A type no registered library lists is registered through the extension, with
/// 48-byte args (with `type_info`) on every version: 0.106 and 0.115 refuse 40.
#[test]
fn unlisted_user_data_types_register_through_the_extension() {
    #[derive(Debug)]
    struct Loose(#[allow(dead_code)] u8);
    state_type!(Loose);
    #[derive(Debug)]
    struct Loose2(#[allow(dead_code)] u8);
    state_type!(Loose2);
    for (version, ty, size) in [((0, 115), 0, 48usize), ((0, 81), 1, 48)] {
        let fake = FakePlugin::new(FakeConfig { pjrt_version: version, ..FakeConfig::default() });
        let api = api(&fake);
        let mut ctx = ExecuteContext::new(&api).unwrap();
        if ty == 0 {
            ctx.add_user_data(Loose(1)).unwrap();
        } else {
            ctx.add_user_data(Loose2(1)).unwrap();
        }
        let reg = fake.calls().into_iter().find_map(|c| match c {
            FakeCall::ExtTypeRegister { name, struct_size, id } => Some((name, struct_size, id)),
            _ => None,
        });
        let (name, struct_size, id) = reg.unwrap();
        assert!(name.ends_with(if ty == 0 { "Loose" } else { "Loose2" }), "{name}");
        assert_eq!(struct_size, size);
        let registered = if ty == 0 {
            <Loose as xla_ffi::StateType>::registration().type_id()
        } else {
            <Loose2 as xla_ffi::StateType>::registration().type_id()
        };
        assert_eq!(registered, id);
    }
}

/// User data for a library's type by name (as for a library loaded from a file):
/// the id read from the library's own record; an unknown or unregistered name is
/// refused, naming it.
#[test]
fn user_data_by_the_library_type_name() {
    let fake = FakePlugin::new(FakeConfig::default());
    let api = api(&fake);
    let lib = library();
    register(&api, &lib, "Host").unwrap();
    let id = <Offset as xla_ffi::StateType>::registration().type_id();
    let mut ctx = ExecuteContext::new(&api).unwrap();
    // SAFETY: `Offset` is the type the library's handlers read under "t.Offset".
    unsafe { ctx.add_user_data_for(&lib, "t.Offset", Offset(4.0)) }.unwrap();
    let p = fake.user_data(ctx.as_ptr(), id).unwrap();
    // SAFETY: the pointer handed to the fake: an `Offset` owned by `ctx`.
    assert_eq!(unsafe { &*(p as *const Offset) }, &Offset(4.0));
    // SAFETY: as above (refused before anything is handed over).
    let e = unsafe { ctx.add_user_data_for(&lib, "t.Nothing", Offset(1.0)) }.unwrap_err();
    assert!(e.message().contains("no type \"t.Nothing\"") && e.message().contains("t.Offset"), "{e}");

    struct Never;
    state_type!(Never);
    // Registered into another plugin only: still refused here.
    static NEVER: OnceLock<Registry> = OnceLock::new();
    let reg = NEVER.get_or_init(|| Registry::new("never 0.1", &[&T_COPY], &[TypeEntry::of::<Never>("t.Never")]));
    let never = HandlerLibrary::linked(reg).unwrap();
    let other = FakePlugin::new(FakeConfig::default());
    register(&api_of(&other), &never, "Host").unwrap();
    drop(other);
    fake.make_current();
    // SAFETY: refused before anything is handed over.
    let e = unsafe { ctx.add_user_data_for(&never, "t.Never", Never) }.unwrap_err();
    assert!(
        e.message().contains("type \"t.Never\" of handler library never 0.1 is not registered into this plugin"),
        "{e}"
    );
}

/// A type with an id from one plugin is not handed to another plugin whose
/// registry gave that id to another type: its registration there is refused.
#[test]
fn user_data_ids_from_another_plugin_are_checked() {
    #[derive(Debug)]
    struct Travels;
    state_type!(Travels);
    let first = FakePlugin::new(FakeConfig::default());
    let id = {
        let api = api(&first);
        ExecuteContext::new(&api).unwrap().add_user_data(Travels).unwrap();
        <Travels as xla_ffi::StateType>::registration().type_id()
    };
    let second = FakePlugin::new(FakeConfig::default());
    second.add_type("someone.Else", id);
    let api = api(&second);
    let mut ctx = ExecuteContext::new(&api).unwrap();
    let e = ctx.add_user_data(Travels).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Refused);
    assert!(e.message().contains(&format!("Type id {id} already registered for type someone.Else")), "{e}");
    assert!(second.calls().iter().all(|c| !matches!(c, FakeCall::ExtUserDataAdd { .. })));
    drop(first);
}

/// Before the fix `register(&api, &lib, "tpu")` returned `Ok` with no target (the
/// library's handlers are host or device ones, and "tpu" is not a CPU name): a
/// host learnt nothing until its program failed to compile. Now a platform that
/// runs no FFI handlers is refused before anything reaches the plugin, as
/// Python's `register_targets` refuses it.
#[test]
fn a_platform_without_ffi_handlers_is_refused() {
    let fake = FakePlugin::new(FakeConfig::default());
    let api = api(&fake);
    for platform in ["tpu", "TPU", "", "cpu0", "gpu"] {
        let e = register(&api, &library(), platform).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Platform, "{platform}: {e}");
        let m = e.message();
        assert!(m.starts_with(&format!("fake_plugin.so: platform {platform:?} runs no FFI handlers")), "{m}");
        assert!(m.contains("\"Host\", \"cpu\", \"CUDA\", \"ROCM\""), "{m}");
        let e = xla_ffi_pjrt::ffi_api_version(&api, platform).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Platform, "{e}");
    }
    assert!(fake.calls().is_empty(), "{:?}", fake.calls().len());
    // Every name of FFI_PLATFORMS, in any case, is taken.
    for platform in xla_ffi_pjrt::FFI_PLATFORMS.iter().chain(&["HOST", "Cpu", "cuda", "rocm"]) {
        register(&api, &library(), platform).unwrap();
    }
}
