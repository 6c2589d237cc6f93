//! A Rust host on a real CPU PJRT plugin: handlers linked into this test program
//! are registered with `register`, StableHLO text that calls them is compiled and
//! run by `Client`, user data reaches a `UserData<T>` handler through an
//! `ExecuteContext`, and a handler's error comes back with its code.
//!
//! Needs `XFR_PJRT_PLUGIN` (the `pjrt_c_api_cpu_plugin.so` of
//! `lammps-jax-pjrt-cpu` 0.11.2; `.ci/host.sh` sets it); without it each test
//! prints why and passes, unless `XFR_HOST_REQUIRED=1`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use xla_ffi::{handler, state_type, Buffer, Error, Result, ResultBuffer, State, UserData};
use xla_ffi_pjrt::{Client, ClientError, ElementType, ExecuteContext, HandlerLibrary, HostArray, PjrtApi, Plugin};

/// Per-run data a host hands to its handlers.
struct Offset(f32);
state_type!(Offset);

/// `y = x + offset`, the offset from the run's user data.
#[handler(target = "host_test.add_offset")]
fn host_test_add_offset(offset: UserData<Offset>, x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(v + offset.0);
    }
    Ok(())
}

/// Refuses negative inputs, to see a handler's error reach the host.
#[handler(target = "host_test.checked_copy")]
fn host_test_checked_copy(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    let xs = x.as_slice()?;
    if let Some(bad) = xs.iter().find(|v| **v < 0.0) {
        return Err(Error::invalid_argument(format!("host_test.checked_copy: got a negative value {bad}")));
    }
    for (o, &v) in y.as_uninit()?.iter_mut().zip(xs) {
        o.write(v);
    }
    Ok(())
}

/// How many times an instantiate stage ran, in this process.
static INSTANTIATED: AtomicUsize = AtomicUsize::new(0);

/// The state of `host_test.instance`: which instantiation made it (1, 2, ...).
struct Instance(usize);
state_type!(Instance);

#[handler(target = "host_test.instance", stage = instantiate, descriptor = INSTANCE_INSTANTIATE)]
fn host_test_instance_instantiate() -> Result<Instance> {
    Ok(Instance(INSTANTIATED.fetch_add(1, Ordering::SeqCst) + 1))
}

/// Writes the number of the instantiation whose state it was given.
#[handler(target = "host_test.instance", descriptor = INSTANCE_EXECUTE)]
fn host_test_instance_execute(x: Buffer<f32>, mut y: ResultBuffer<f32>, state: State<Instance>) -> Result<()> {
    for (o, _) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(state.0 as f32);
    }
    Ok(())
}

/// Panics on a negative first value, to see a panic reach the host as an error.
#[handler(target = "host_test.panics")]
fn host_test_panics(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    let xs = x.as_slice()?;
    assert!(xs[0] >= 0.0, "host_test.panics: a negative first value {}", xs[0]);
    for (o, &v) in y.as_uninit()?.iter_mut().zip(xs) {
        o.write(v);
    }
    Ok(())
}

xla_ffi::export_registry! {
    handlers: [&HOST_TEST_ADD_OFFSET, &HOST_TEST_CHECKED_COPY, &INSTANCE_INSTANTIATE, &INSTANCE_EXECUTE, &HOST_TEST_PANICS],
    types: { "host_test.Offset" => Offset, "host_test.Instance" => Instance },
}

fn program(target: &str) -> String {
    format!(
        "module @m {{\n  func.func public @main(%x: tensor<4xf32>) -> tensor<4xf32> {{\n    \
         %y = stablehlo.custom_call @{target}(%x) {{api_version = 4 : i32, backend_config = {{}}}} \
         : (tensor<4xf32>) -> tensor<4xf32>\n    return %y : tensor<4xf32>\n  }}\n}}\n"
    )
}

fn f32s(values: &[f32]) -> HostArray {
    let bytes = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    HostArray::new(ElementType::F32, vec![values.len() as i64], bytes).unwrap()
}

fn read_f32s(a: &HostArray) -> Vec<f32> {
    a.data().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

/// The plugin, loaded and registered once for the test binary.
fn setup() -> Option<(Plugin, &'static PjrtApi)> {
    static API: OnceLock<Option<(Plugin, PjrtApi)>> = OnceLock::new();
    let loaded = API.get_or_init(|| {
        let Ok(path) = std::env::var("XFR_PJRT_PLUGIN") else {
            assert!(std::env::var("XFR_HOST_REQUIRED").as_deref() != Ok("1"), "XFR_PJRT_PLUGIN is not set");
            eprintln!("skipping: XFR_PJRT_PLUGIN is not set (.ci/host.sh sets it)");
            return None;
        };
        // SAFETY: the CPU PJRT plugin from PyPI that .ci/host.sh names.
        let plugin = unsafe { Plugin::load(&path) }.unwrap();
        let api = plugin.pjrt_api().unwrap().named(path);
        let lib = HandlerLibrary::linked(registry()).unwrap();
        let done = xla_ffi_pjrt::register(&api, &lib, "Host").unwrap();
        assert_eq!(
            done.targets,
            ["host_test.add_offset", "host_test.checked_copy", "host_test.instance", "host_test.panics"]
        );
        Some((plugin, api))
    });
    loaded.as_ref().map(|(p, a)| (*p, a))
}

#[test]
fn user_data_reaches_the_handler_through_an_execute_context() {
    let Some((plugin, api)) = setup() else { return };
    let client = Client::new(&plugin).unwrap();
    let exe = client.compile(program("host_test.add_offset").as_bytes(), "mlir").unwrap();
    let mut context = ExecuteContext::new(api).unwrap();
    context.add_user_data(Offset(0.25)).unwrap();
    let out = exe.execute_with(&[f32s(&[1.0, 2.0, 3.0, 4.0])], Some(&context)).unwrap();
    assert_eq!(read_f32s(&out[0]), [1.25, 2.25, 3.25, 4.25]);
    // Another context, another value: the data is per run.
    let mut context = ExecuteContext::new(api).unwrap();
    context.add_user_data(Offset(-1.0)).unwrap();
    let out = exe.execute_with(&[f32s(&[1.0, 2.0, 3.0, 4.0])], Some(&context)).unwrap();
    assert_eq!(read_f32s(&out[0]), [0.0, 1.0, 2.0, 3.0]);
    // Without a context, `execute` passes an empty one (with none at all,
    // lammps-jax-pjrt-cpu 0.11.2's XLA reads through a null pointer and crashes):
    // the handler says that the user data is missing.
    let err = exe.execute(&[f32s(&[1.0, 2.0, 3.0, 4.0])]).unwrap_err();
    assert!(err.to_string().contains("host_test.add_offset"), "{err}");
    assert!(err.to_string().contains("offset"), "{err}");
}

#[test]
fn a_handlers_error_comes_back_with_its_code_and_message() {
    let Some((plugin, _)) = setup() else { return };
    let client = Client::new(&plugin).unwrap();
    let exe = client.compile(program("host_test.checked_copy").as_bytes(), "mlir").unwrap();
    assert_eq!(read_f32s(&exe.execute(&[f32s(&[0.0, 1.0, 2.0, 3.0])]).unwrap()[0]), [0.0, 1.0, 2.0, 3.0]);
    match exe.execute(&[f32s(&[0.0, -1.0, 2.0, 3.0])]).unwrap_err() {
        ClientError::Pjrt { code, message, .. } => {
            assert_eq!(code, 3, "{message}");
            assert!(message.contains("host_test.checked_copy: got a negative value -1"), "{message}");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn compile_errors_and_bad_inputs_are_errors() {
    let Some((plugin, _)) = setup() else { return };
    let client = Client::new(&plugin).unwrap();
    assert_eq!(client.platform_name(), "cpu");
    let err = client.compile(b"module { this is not mlir", "mlir").unwrap_err();
    assert!(matches!(err, ClientError::Pjrt { call: "PJRT_Client_Compile", .. }), "{err}");
    // Named, with how to register it (before the fix only the plugin's "No FFI
    // handler registered for host_test.nowhere on a platform Host").
    let err = client.compile(program("host_test.nowhere").as_bytes(), "mlir").unwrap_err();
    assert!(matches!(&err, ClientError::UnknownTarget { target, .. } if target == "host_test.nowhere"), "{err:?}");
    assert!(err.to_string().starts_with("the program calls target 'host_test.nowhere'"), "{err}");
    assert!(err.to_string().contains("xla_ffi_pjrt::register"), "{err}");
    let exe = client.compile(program("host_test.checked_copy").as_bytes(), "mlir").unwrap();
    let err = exe.execute(&[f32s(&[1.0, 2.0])]).unwrap_err();
    assert!(matches!(err, ClientError::Input { .. }), "{err}");
    assert_eq!(err.to_string(), "input 0: expected float32[4], got float32[2]");
    let (major, minor) = plugin.api_version();
    assert!(major == 0 && minor >= 106, "{major}.{minor}");
    let (min, current) = plugin.stablehlo_versions().unwrap();
    assert!(min <= current && current[0] >= 1, "{min:?} {current:?}");
}

/// Before the fix `execute_with` handed any context to the plugin: one made from
/// another plugin's table (here the fake plugin's) was read by the real plugin as
/// its own `PJRT_ExecuteContext`, from safe code. Now it is refused, naming both.
#[test]
fn a_context_of_another_plugin_is_refused() {
    let Some((plugin, _)) = setup() else { return };
    let fake = xla_ffi_pjrt::testing::FakePlugin::new(xla_ffi_pjrt::testing::FakeConfig::default());
    // SAFETY: the fake plugin outlives `other`.
    let other = unsafe { PjrtApi::from_raw(fake.api_ptr()) }.unwrap().named("fake_plugin.so");
    let context = ExecuteContext::new(&other).unwrap();
    let client = Client::new(&plugin).unwrap();
    let exe = client.compile(program("host_test.checked_copy").as_bytes(), "mlir").unwrap();
    let err = exe.execute_with(&[f32s(&[1.0, 2.0, 3.0, 4.0])], Some(&context)).unwrap_err();
    assert!(matches!(err, ClientError::Input { .. }), "{err}");
    assert!(err.to_string().contains("fake_plugin.so") && err.to_string().contains("execute context"), "{err}");
    // One line of prose (a string continuation once left a run of spaces in it).
    assert!(!err.to_string().contains("  "), "{err:?}");
}

/// Before the fix `execute` checked inputs by byte size only (the plugin's own
/// check): an `int32[4]` ran as the `float32[4]` it has the bytes of, and a
/// `float32[2,2]` as a `float32[4]`. Now the compiled program's parameter types
/// (read from the plugin's optimized module) are checked first, by count, element
/// type and dimensions, naming the input.
#[test]
fn inputs_are_checked_against_the_compiled_parameters() {
    let Some((plugin, _)) = setup() else { return };
    let client = Client::new(&plugin).unwrap();
    let exe = client.compile(program("host_test.checked_copy").as_bytes(), "mlir").unwrap();
    let params: Vec<String> = exe.parameters().unwrap().iter().map(ToString::to_string).collect();
    assert_eq!(params, ["float32[4]"]);
    let ints =
        HostArray::new(ElementType::S32, vec![4], [1i32, 2, 3, 4].iter().flat_map(|v| v.to_le_bytes()).collect());
    let err = exe.execute(&[ints.unwrap()]).unwrap_err();
    assert!(matches!(err, ClientError::Input { .. }), "{err}");
    assert_eq!(err.to_string(), "input 0: expected float32[4], got int32[4]");
    let square = HostArray::new(ElementType::F32, vec![2, 2], f32s(&[1.0; 4]).into_data()).unwrap();
    assert_eq!(exe.execute(&[square]).unwrap_err().to_string(), "input 0: expected float32[4], got float32[2,2]");
    let err = exe.execute(&[f32s(&[1.0; 4]), f32s(&[1.0; 4])]).unwrap_err();
    assert_eq!(err.to_string(), "the program takes 1 input (float32[4]), got 2");
    assert_eq!(exe.execute(&[]).unwrap_err().to_string(), "the program takes 1 input (float32[4]), got 0");

    // Several parameters of several types, a scalar and a zero-sized one.
    let text = "module @m {\n  func.func public @main(%a: tensor<f64>, %b: tensor<2x0xbf16>, %c: tensor<3xi8>, \
                %d: tensor<2xi1>) -> tensor<f64> {\n    return %a : tensor<f64>\n  }\n}\n";
    let exe = client.compile(text.as_bytes(), "mlir").unwrap();
    let params: Vec<String> = exe.parameters().unwrap().iter().map(ToString::to_string).collect();
    assert_eq!(params, ["float64[]", "bfloat16[2,0]", "int8[3]", "bool[2]"]);
    let a = HostArray::new(ElementType::F64, vec![], 2.5f64.to_le_bytes().to_vec()).unwrap();
    let b = HostArray::new(ElementType::BF16, vec![2, 0], vec![]).unwrap();
    let c = HostArray::new(ElementType::S8, vec![3], vec![1, 2, 3]).unwrap();
    let d = HostArray::new(ElementType::Pred, vec![2], vec![1, 0]).unwrap();
    let out = exe.execute(&[a.clone(), b.clone(), c.clone(), d.clone()]).unwrap();
    assert_eq!(out[0].data(), 2.5f64.to_le_bytes());
    let u8s = HostArray::new(ElementType::U8, vec![3], vec![1, 2, 3]).unwrap();
    let err = exe.execute(&[a, b, u8s, d]).unwrap_err();
    assert_eq!(err.to_string(), "input 2: expected int8[3], got uint8[3]");
}

/// A stateful handler's state is made once per executable, when it is compiled,
/// and every run of that executable, from any thread, reads that one state;
/// compiling again makes another (docs/outside-python.md says so).
#[test]
fn a_stateful_handlers_state_is_made_once_per_executable() {
    let Some((plugin, _)) = setup() else { return };
    let client = Client::new(&plugin).unwrap();
    let first = client.compile(program("host_test.instance").as_bytes(), "mlir").unwrap();
    let made = INSTANTIATED.load(Ordering::SeqCst);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                for _ in 0..10 {
                    let out = first.execute(&[f32s(&[0.0; 4])]).unwrap();
                    assert_eq!(read_f32s(&out[0]), [made as f32; 4]);
                }
            });
        }
    });
    assert_eq!(INSTANTIATED.load(Ordering::SeqCst), made, "no run instantiates again");
    let second = client.compile(program("host_test.instance").as_bytes(), "mlir").unwrap();
    assert_eq!(INSTANTIATED.load(Ordering::SeqCst), made + 1);
    assert_eq!(read_f32s(&second.execute(&[f32s(&[0.0; 4])]).unwrap()[0]), [(made + 1) as f32; 4]);
    assert_eq!(read_f32s(&first.execute(&[f32s(&[0.0; 4])]).unwrap()[0]), [made as f32; 4]);
}

/// A handler that panics is an INTERNAL error naming the target (no panic
/// crosses into the plugin), and the executable runs again afterwards.
#[test]
fn a_handler_that_panics_is_an_error_and_the_executable_runs_again() {
    let Some((plugin, _)) = setup() else { return };
    let client = Client::new(&plugin).unwrap();
    let exe = client.compile(program("host_test.panics").as_bytes(), "mlir").unwrap();
    match exe.execute(&[f32s(&[-1.0, 0.0, 1.0, 2.0])]).unwrap_err() {
        ClientError::Pjrt { code, message, .. } => {
            assert_eq!(code, 13, "{message}");
            assert!(message.contains("host_test.panics") && message.contains("panicked"), "{message}");
            assert!(message.contains("a negative first value -1"), "{message}");
        }
        other => panic!("{other}"),
    }
    assert_eq!(read_f32s(&exe.execute(&[f32s(&[1.0, 0.0, 1.0, 2.0])]).unwrap()[0]), [1.0, 0.0, 1.0, 2.0]);
}

/// One executable shared by several threads, each running it with its own inputs
/// (as JAX runs one compiled program from many Python threads). Before `Executable`
/// was `Send + Sync` this did not compile: each thread needed its own compile.
#[test]
fn one_executable_runs_from_several_threads() {
    let Some((plugin, _)) = setup() else { return };
    let client = Client::new(&plugin).unwrap();
    let exe = client.compile(program("host_test.checked_copy").as_bytes(), "mlir").unwrap();
    std::thread::scope(|s| {
        let exe = &exe;
        let workers: Vec<_> = (0..4)
            .map(|t| {
                s.spawn(move || {
                    for k in 0..25 {
                        let x = [t as f32, k as f32, 0.5, 100.0 * t as f32 + k as f32];
                        assert_eq!(read_f32s(&exe.execute(&[f32s(&x)]).unwrap()[0]), x);
                    }
                })
            })
            .collect();
        workers.into_iter().for_each(|w| w.join().unwrap());
    });
    // Moved to another thread and dropped there.
    std::thread::scope(|s| {
        s.spawn(move || assert_eq!(exe.num_outputs(), 1));
    });
}
