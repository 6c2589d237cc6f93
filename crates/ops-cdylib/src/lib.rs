//! The xla-ffi-rs ops as a shared library without Python: `libxla_ffi_rs_ops.so`
//! (`.dylib`, `xla_ffi_rs_ops.dll`), for hosts that load a PJRT plugin themselves
//! (`xla-ffi-run`, a Rust or C++ service).
//!
//! It exports one C function, `xla_ffi_rs_registry` (see `xla_ffi::export`), listing
//! every op of [`ops::OPS`] (CPU handlers, and the CUDA ones with feature `cuda`),
//! the stateful example `xla_ffi_rs.examples.scale` with its state type, and
//! [`add_offset`](XLA_FFI_RS_EXAMPLES_ADD_OFFSET), an example that reads per-run
//! user data. The Python extension (`_native.abi3.so`) cannot serve here: it needs
//! the Python interpreter's symbols. Build it with
//! `cargo build --release -p xla-ffi-rs-ops-cdylib`.
#![forbid(unsafe_code)]

use ops::scale_state::ScaleState;
use xla_ffi::{handler, state_type, Buffer, HandlerDescriptor, Result, ResultBuffer, UserData};

/// The per-run user data of `xla_ffi_rs.examples.add_offset`: a host adds it to the
/// execute context of each run (`xla_ffi_pjrt::ExecuteContext::add_user_data`).
#[derive(Debug)]
pub struct Offset(pub f32);

state_type!(Offset);

/// `y = x + offset`, in float32, with `offset` from the run's user data: the
/// example of `UserData<T>` outside Python (JAX's Python API sets no user data).
#[handler(target = "xla_ffi_rs.examples.add_offset", shapes = "...b -> ...b", dtypes = "float32 -> float32")]
pub fn xla_ffi_rs_examples_add_offset(
    x: Buffer<f32>,
    mut y: ResultBuffer<f32>,
    offset: UserData<Offset>,
) -> Result<()> {
    for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
        o.write(v + offset.0);
    }
    Ok(())
}

/// Every handler this library exports: the ops' CPU and CUDA handlers, the
/// stateful example and the user data example.
pub fn handlers() -> Vec<&'static HandlerDescriptor> {
    let mut all = ops::cpu_handlers();
    all.extend(ops::cuda_handlers());
    all.extend(ops::EXAMPLE_CPU_HANDLERS.iter().copied());
    all.push(&XLA_FFI_RS_EXAMPLES_ADD_OFFSET);
    all
}

xla_ffi::export_registry! {
    handlers: handlers(),
    types: {
        "xla_ffi_rs.examples.ScaleState" => ScaleState,
        "xla_ffi_rs.examples.Offset" => Offset,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use xla_ffi::testing::{register_state_type, Arg, CallBuilder};

    /// The registry lists every op's targets once, the stateful example as a
    /// two-stage bundle, and both types.
    #[test]
    fn registry_lists_the_ops_and_examples() {
        let reg = registry();
        assert_eq!(reg.error(), None);
        let names: Vec<&str> = reg.targets().map(|t| t.name()).collect();
        for h in ops::cpu_handlers() {
            assert!(names.contains(&h.target), "{} missing", h.target);
        }
        let scale = reg.targets().find(|t| t.name() == "xla_ffi_rs.examples.scale").unwrap();
        assert_eq!(scale.stages().len(), 2);
        let types: Vec<&str> = reg.types().map(|t| t.name()).collect();
        assert_eq!(types, ["xla_ffi_rs.examples.ScaleState", "xla_ffi_rs.examples.Offset"]);
        assert!(!xla_ffi_rs_registry().is_null());
        assert_eq!(xla_ffi_rs_registry(), reg.as_raw());
    }

    #[test]
    fn add_offset_reads_the_user_data() {
        register_state_type::<Offset>(77);
        let mut call = CallBuilder::new()
            .user_data(Offset(0.5))
            .arg(Arg::from_slice(&[1.0f32, 2.0], &[2]))
            .ret(Arg::zeros::<f32>(&[2]));
        call.run(XLA_FFI_RS_EXAMPLES_ADD_OFFSET).unwrap();
        assert_eq!(call.ret_as::<f32>(0), vec![1.5, 2.5]);
    }
}
