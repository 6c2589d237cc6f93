//! Every CUDA kernel instantiation the handlers launch: one declared table.
//!
//! [`KERNELS`] lists each `__global__` template of this crate's `.cu` files: its
//! source, the parameters its handler passes, and the template arguments (element
//! types) it is instantiated with. The CUDA handlers pick their kernel from it
//! (`KernelFn::kernel`, feature `cuda`), so no kernel name is written anywhere else in Rust.
//! `cargo run -p xla-ffi-rs-ops --example kernel_list -- json` (or `-- cpp`) prints
//! it for the checks that have no Rust: `cuda/check_ptx.py` compiles every
//! instantiation with NVRTC, and the stand-in driver (`cuda/stub_driver`) compiles
//! every one for the host. The printer refuses a table that [`KernelFn::missing`]
//! faults, so an instantiation dropped from the table fails both, not only the
//! handler that asks for it.

use xla_ffi::{AnyFloat, DataType, ElementSpec};

use crate::kepler::F32OrF64;
use crate::promote::PROMOTION;

/// A kernel parameter as the handlers pass it (`xla_ffi::cuda::Arg`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// An operand buffer: its address and its size in bytes.
    In,
    /// A result buffer: its address and its size in bytes.
    Out,
    /// An `unsigned long long`.
    U64,
    /// A `double`.
    F64,
}

impl Param {
    /// The C++ parameter types it expands to.
    pub fn cpp(self) -> &'static [&'static str] {
        match self {
            Param::In => &["const void*", "unsigned long long"],
            Param::Out => &["void*", "unsigned long long"],
            Param::U64 => &["unsigned long long"],
            Param::F64 => &["double"],
        }
    }
}

/// One `__global__` template and the instantiations the handlers launch.
#[derive(Debug)]
pub struct KernelFn {
    /// The `.cu` file, relative to this crate's root.
    pub source: &'static str,
    /// The template's name.
    pub name: &'static str,
    /// The parameters the handler passes, in order.
    pub params: &'static [Param],
    /// The dtypes the handler accepts for each operand it picks the instantiation
    /// by (its `ElementSpec::accepts`); the first `key.len()` template arguments
    /// of an instantiation are those operands' dtypes.
    pub key: &'static [fn(DataType) -> bool],
    /// Template arguments per instantiation.
    pub arity: usize,
    /// The instantiations' template arguments, `arity` at a time.
    pub types: &'static [DataType],
}

/// One instantiation of a [`KernelFn`].
#[derive(Clone, Copy, Debug)]
pub struct Instance {
    /// The template.
    pub kernel: &'static KernelFn,
    /// Its template arguments.
    pub types: &'static [DataType],
}

/// The C++ type the kernels use for an element type.
pub fn ctype(d: DataType) -> Option<&'static str> {
    match d {
        DataType::F16 => Some("half_t"),
        DataType::BF16 => Some("bhalf_t"),
        DataType::F32 => Some("float"),
        DataType::F64 => Some("double"),
        _ => None,
    }
}

impl Instance {
    /// The name with its template arguments: `rms_norm_fwd<half_t, float, float, float>`.
    pub fn name(&self) -> String {
        let types: Vec<&str> = self.types.iter().map(|&d| ctype(d).unwrap_or("?")).collect();
        format!("{}<{}>", self.kernel.name, types.join(", "))
    }

    /// The NVRTC name expression that instantiates it and checks its signature:
    /// `static_cast<void(*)(const void*, ...)>(kepler<float>)`.
    pub fn name_expression(&self) -> String {
        let params: Vec<&str> = self.kernel.cpp_params().collect();
        format!("static_cast<void(*)({})>({})", params.join(", "), self.name())
    }
}

impl KernelFn {
    /// The C++ parameter list.
    pub fn cpp_params(&self) -> impl Iterator<Item = &'static str> {
        self.params.iter().flat_map(|p| p.cpp().iter().copied())
    }

    /// Every instantiation.
    pub fn instances(&'static self) -> impl Iterator<Item = Instance> {
        self.types.chunks(self.arity.max(1)).map(move |types| Instance { kernel: self, types })
    }

    /// The instantiation for the dtypes of the operands the handler picks by.
    pub fn instance(&'static self, key: &[DataType]) -> Option<Instance> {
        self.instances().find(|i| i.types.get(..key.len()) == Some(key) && key.len() == self.key.len())
    }

    /// What is wrong with this entry: an accepted dtype combination without an
    /// instantiation, an instantiation the handler cannot ask for, two for one
    /// combination, a template argument the kernels have no C++ type for.
    pub fn missing(&'static self) -> Vec<String> {
        let mut out = Vec::new();
        let name = self.name;
        if self.arity < self.key.len() || self.arity == 0 || !self.types.len().is_multiple_of(self.arity) {
            out.push(format!("{name}: {} template arguments do not split into {}", self.types.len(), self.arity));
            return out;
        }
        let mut keys: Vec<&[DataType]> = Vec::new();
        for i in self.instances() {
            let key = &i.types[..self.key.len()];
            if i.types.iter().any(|&d| ctype(d).is_none()) {
                out.push(format!("{name}: an instantiation with an element type the kernels lack: {:?}", i.types));
            }
            if !key.iter().zip(self.key).all(|(&d, accepts)| accepts(d)) {
                out.push(format!("{name}: instantiation {} is for dtypes the handler refuses", i.name()));
            }
            if keys.contains(&key) {
                out.push(format!("{name}: two instantiations for dtypes {}", show(key)));
            }
            keys.push(key);
        }
        // Every combination of known dtype codes the handler accepts.
        let mut combos: Vec<Vec<DataType>> = vec![Vec::new()];
        for accepts in self.key {
            let codes: Vec<DataType> = (0..64).map(DataType).filter(|&d| accepts(d)).collect();
            combos = combos.iter().flat_map(|c| codes.iter().map(|&d| [c.as_slice(), &[d]].concat())).collect();
        }
        for c in combos {
            if self.instance(&c).is_none() {
                out.push(format!("{name}: no instantiation for dtypes {}, which the handler accepts", show(&c)));
            }
        }
        out
    }
}

fn show(dtypes: &[DataType]) -> String {
    let names: Vec<String> = dtypes.iter().map(|d| d.to_string()).collect();
    format!("({})", names.join(", "))
}

/// Every instantiation of every kernel, in table order.
pub fn instances() -> impl Iterator<Item = Instance> {
    KERNELS.iter().flat_map(|k| k.instances())
}

/// The table's faults (see [`KernelFn::missing`]); empty when it is complete.
pub fn missing() -> Vec<String> {
    KERNELS.iter().flat_map(|k| k.missing()).collect()
}

#[cfg(feature = "cuda")]
impl KernelFn {
    /// The launcher's kernel: the instantiation for the dtypes `key` of the
    /// operands the handler picks by, taking `args`. Errors (naming `target`) if
    /// the table has no such instantiation, or if `args` are not the declared
    /// parameters.
    pub fn kernel(
        &'static self,
        target: &str,
        key: &[DataType],
        args: &[xla_ffi::cuda::Arg<'_>],
    ) -> xla_ffi::Result<xla_ffi::cuda::Kernel> {
        let inst = self.instance(key).ok_or_else(|| {
            xla_ffi::Error::unimplemented(format!(
                "{target}: no CUDA kernel `{}` for dtypes {} in the kernel table",
                self.name,
                show(key)
            ))
        })?;
        let kernel = xla_ffi::cuda::Kernel::new(inst.name(), args);
        if !kernel.params().iter().map(|p| p.cpp()).eq(self.cpp_params()) {
            let got: Vec<&str> = kernel.params().iter().map(|p| p.cpp()).collect();
            let want: Vec<&str> = self.cpp_params().collect();
            return Err(xla_ffi::Error::internal(format!(
                "{target}: kernel `{}` launched with parameters ({}), declared with ({})",
                self.name,
                got.join(", "),
                want.join(", ")
            )));
        }
        Ok(kernel)
    }
}

use Param::{In, Out, F64, U64};

/// `x, w, result_type(x, w), accumulator` for each row of the promotion table.
const fn promotion_types() -> [DataType; 4 * PROMOTION.len()] {
    let mut out = [DataType::INVALID; 4 * PROMOTION.len()];
    let mut i = 0;
    while i < PROMOTION.len() {
        let (x, w, y, acc) = PROMOTION[i];
        out[4 * i] = x;
        out[4 * i + 1] = w;
        out[4 * i + 2] = y;
        out[4 * i + 3] = acc;
        i += 1;
    }
    out
}

static KEPLER_TYPES: [DataType; 2] = [DataType::F32, DataType::F64];
static RMS_NORM_TYPES: [DataType; 4 * PROMOTION.len()] = promotion_types();

/// `kepler<T>` (`T` the dtype of the operands) of `src/kepler/kepler.cu`.
pub static KEPLER: KernelFn = KernelFn {
    source: "src/kepler/kepler.cu",
    name: "kepler",
    params: &[In, In, Out, Out, U64],
    key: &[F32OrF64::accepts],
    arity: 1,
    types: &KEPLER_TYPES,
};

/// `kepler_tangent<T>` of `src/kepler/kepler.cu`.
pub static KEPLER_TANGENT: KernelFn = KernelFn {
    source: "src/kepler/kepler.cu",
    name: "kepler_tangent",
    params: &[In, In, In, In, In, Out, Out, U64],
    key: &[F32OrF64::accepts],
    arity: 1,
    types: &KEPLER_TYPES,
};

/// `kepler_cotangent<T>` of `src/kepler/kepler.cu`.
pub static KEPLER_COTANGENT: KernelFn = KernelFn {
    source: "src/kepler/kepler.cu",
    name: "kepler_cotangent",
    params: &[In, In, In, In, In, Out, Out, U64],
    key: &[F32OrF64::accepts],
    arity: 1,
    types: &KEPLER_TYPES,
};

/// `kepler_jvp<T>` of `src/kepler/kepler.cu` (`n`, then the steps of the two
/// tangents: 1 for an array, 0 for a scalar), for all three fused targets.
pub static KEPLER_JVP: KernelFn = KernelFn {
    source: "src/kepler/kepler.cu",
    name: "kepler_jvp",
    params: &[In, In, In, In, Out, Out, Out, Out, U64, U64, U64],
    key: &[F32OrF64::accepts],
    arity: 1,
    types: &KEPLER_TYPES,
};

/// `rms_norm_fwd<X, W, Y, ACC>` of `src/rms_norm/rms_norm.cu`, for every `(x, weight)`
/// float pair: `Y = result_type(x, weight)` and `ACC` the accumulator, from the
/// promotion table.
pub static RMS_NORM_FWD: KernelFn = KernelFn {
    source: "src/rms_norm/rms_norm.cu",
    name: "rms_norm_fwd",
    params: &[In, In, Out, Out, U64, U64, F64],
    key: &[AnyFloat::accepts, AnyFloat::accepts],
    arity: 4,
    types: &RMS_NORM_TYPES,
};

/// `rms_norm_bwd<X, W, Y, ACC>` of `src/rms_norm/rms_norm.cu` (as [`RMS_NORM_FWD`]).
pub static RMS_NORM_BWD: KernelFn = KernelFn {
    source: "src/rms_norm/rms_norm.cu",
    name: "rms_norm_bwd",
    params: &[In, In, In, Out, Out, U64, U64, F64],
    key: &[AnyFloat::accepts, AnyFloat::accepts],
    arity: 4,
    types: &RMS_NORM_TYPES,
};

/// `rms_norm_dweight<X, W, Y, ACC>` of `src/rms_norm/rms_norm.cu` (as [`RMS_NORM_FWD`]).
pub static RMS_NORM_DWEIGHT: KernelFn = KernelFn {
    source: "src/rms_norm/rms_norm.cu",
    name: "rms_norm_dweight",
    params: &[In, Out, U64, U64],
    key: &[AnyFloat::accepts, AnyFloat::accepts],
    arity: 4,
    types: &RMS_NORM_TYPES,
};

/// Every kernel the CUDA handlers launch.
pub static KERNELS: &[&KernelFn] =
    &[&KEPLER, &KEPLER_TANGENT, &KEPLER_COTANGENT, &KEPLER_JVP, &RMS_NORM_FWD, &RMS_NORM_BWD, &RMS_NORM_DWEIGHT];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_complete() {
        assert_eq!(missing(), Vec::<String>::new());
        // 2 dtypes for each of the 4 Kepler kernels, 16 (x, weight) pairs for each rms_norm one.
        assert_eq!(instances().count(), 4 * 2 + 3 * 16);
    }

    #[test]
    fn kepler_instances_are_picked_by_dtype() {
        let k = KEPLER.instance(&[DataType::F64]).unwrap();
        assert_eq!(k.name(), "kepler<double>");
        assert_eq!(
            k.name_expression(),
            "static_cast<void(*)(const void*, unsigned long long, const void*, unsigned long long, void*, \
             unsigned long long, void*, unsigned long long, unsigned long long)>(kepler<double>)"
        );
        assert_eq!(KEPLER_TANGENT.instance(&[DataType::F32]).unwrap().name(), "kepler_tangent<float>");
        assert_eq!(KEPLER_COTANGENT.instance(&[DataType::F64]).unwrap().name(), "kepler_cotangent<double>");
        assert_eq!(KEPLER_JVP.instance(&[DataType::F32]).unwrap().name(), "kepler_jvp<float>");
        assert!(KEPLER.instance(&[DataType::F16]).is_none());
        assert!(KEPLER.instance(&[DataType::F32, DataType::F32]).is_none(), "one key dtype, not two");
    }

    #[test]
    fn rms_norm_instances_follow_jnp_promotion() {
        // (x, weight) -> template arguments, written out from jnp.result_type and
        // the accumulators of the CPU kernels.
        let cases = [
            (DataType::F16, DataType::F16, "half_t, half_t, half_t, float"),
            (DataType::F16, DataType::BF16, "half_t, bhalf_t, float, float"),
            (DataType::BF16, DataType::BF16, "bhalf_t, bhalf_t, bhalf_t, float"),
            (DataType::BF16, DataType::F32, "bhalf_t, float, float, float"),
            (DataType::F32, DataType::F16, "float, half_t, float, float"),
            (DataType::F16, DataType::F64, "half_t, double, double, double"),
            (DataType::F64, DataType::BF16, "double, bhalf_t, double, double"),
        ];
        for (x, w, types) in cases {
            for k in [&RMS_NORM_FWD, &RMS_NORM_BWD, &RMS_NORM_DWEIGHT] {
                assert_eq!(k.instance(&[x, w]).unwrap().name(), format!("{}<{types}>", k.name));
            }
        }
        assert_eq!(
            RMS_NORM_DWEIGHT.instance(&[DataType::F32, DataType::F32]).unwrap().name_expression(),
            "static_cast<void(*)(const void*, unsigned long long, void*, unsigned long long, unsigned long long, \
             unsigned long long)>(rms_norm_dweight<float, float, float, float>)"
        );
        assert!(RMS_NORM_FWD.instance(&[DataType::F32, DataType::S32]).is_none());
    }

    #[test]
    fn a_dropped_or_extra_instantiation_is_reported() {
        static ONLY_F32: KernelFn = KernelFn { types: &[DataType::F32], ..KEPLER_SHAPE };
        static WITH_F16: KernelFn = KernelFn { types: &[DataType::F32, DataType::F64, DataType::F16], ..KEPLER_SHAPE };
        static TWICE: KernelFn = KernelFn { types: &[DataType::F32, DataType::F64, DataType::F64], ..KEPLER_SHAPE };
        static RAGGED: KernelFn = KernelFn { types: &[DataType::F32; 63], ..RMS_SHAPE };
        static NO_CTYPE: KernelFn =
            KernelFn { key: &[<i32 as ElementSpec>::accepts], types: &[DataType::S32], ..KEPLER_SHAPE };
        const KEPLER_SHAPE: KernelFn = KernelFn {
            source: "src/kepler/kepler.cu",
            name: "kepler",
            params: &[In, In, Out, Out, U64],
            key: &[F32OrF64::accepts],
            arity: 1,
            types: &[],
        };
        const RMS_SHAPE: KernelFn =
            KernelFn { name: "rms_norm_fwd", key: &[AnyFloat::accepts, AnyFloat::accepts], arity: 4, ..KEPLER_SHAPE };

        assert_eq!(ONLY_F32.missing(), ["kepler: no instantiation for dtypes (float64), which the handler accepts"]);
        assert_eq!(WITH_F16.missing(), ["kepler: instantiation kepler<half_t> is for dtypes the handler refuses"]);
        assert_eq!(TWICE.missing(), ["kepler: two instantiations for dtypes (float64)"]);
        assert_eq!(RAGGED.missing(), ["rms_norm_fwd: 63 template arguments do not split into 4"]);
        let m = NO_CTYPE.missing();
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].starts_with("kepler: an instantiation with an element type the kernels lack"), "{m:?}");
    }

    /// The handlers compile the file each of their kernels names (the `Source` they
    /// embed is that file).
    #[cfg(feature = "cuda")]
    #[test]
    fn the_handlers_embed_the_sources_the_table_names() {
        use crate::kepler::KEPLER_CU;
        use crate::rms_norm::RMS_NORM_CU;
        let pairs = [
            (&KEPLER_CU, &KEPLER),
            (&KEPLER_CU, &KEPLER_TANGENT),
            (&KEPLER_CU, &KEPLER_COTANGENT),
            (&KEPLER_CU, &KEPLER_JVP),
            (&RMS_NORM_CU, &RMS_NORM_FWD),
            (&RMS_NORM_CU, &RMS_NORM_BWD),
            (&RMS_NORM_CU, &RMS_NORM_DWEIGHT),
        ];
        assert_eq!(pairs.len(), KERNELS.len());
        for (src, k) in pairs {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(k.source);
            assert_eq!(src.code(), std::fs::read_to_string(&path).unwrap(), "{}", k.name);
            assert_eq!(Some(src.name()), path.file_name().and_then(|n| n.to_str()), "{}", k.name);
        }
    }

    /// The launcher's kernel is the table's instantiation, and a handler that asks
    /// for one the table lacks, or passes other parameters, gets an error naming
    /// its target.
    #[cfg(feature = "cuda")]
    #[test]
    fn handlers_get_the_declared_kernel_or_an_error() {
        use xla_ffi::cuda::Arg;
        use xla_ffi::ErrorCode;
        static ONE_U64: KernelFn = KernelFn {
            source: "src/kepler/kepler.cu",
            name: "k",
            params: &[U64, F64],
            key: &[F32OrF64::accepts],
            arity: 1,
            types: &[DataType::F32],
        };
        let k = ONE_U64.kernel("t.op", &[DataType::F32], &[Arg::u64(1), Arg::f64(2.0)]).unwrap();
        assert_eq!(k.name(), "k<float>");
        assert_eq!(k.name_expression(), "static_cast<void(*)(unsigned long long, double)>(k<float>)");
        assert_eq!(k.name_expression(), ONE_U64.instance(&[DataType::F32]).unwrap().name_expression());

        let e = ONE_U64.kernel("t.op", &[DataType::F64], &[Arg::u64(1), Arg::f64(2.0)]).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Unimplemented);
        assert_eq!(e.message(), "t.op: no CUDA kernel `k` for dtypes (float64) in the kernel table");

        let e = ONE_U64.kernel("t.op", &[DataType::F32], &[Arg::u64(1), Arg::f32(2.0)]).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Internal);
        assert_eq!(
            e.message(),
            "t.op: kernel `k` launched with parameters (unsigned long long, float), declared with \
             (unsigned long long, double)"
        );
    }
}
