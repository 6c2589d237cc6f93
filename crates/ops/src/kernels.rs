//! The CUDA kernel tables: the types each op's table is written in, and the
//! functions over every op's table.
//!
//! Each op lists the `__global__` templates of its `.cu` file its CUDA handlers
//! launch, as [`KernelFn`]s in its own folder (`src/<op>/kernel_table.rs`, collected in
//! its op's `OpHandlers::kernels`): the source,
//! the parameters its handler passes, and the template arguments (element types)
//! it is instantiated with. The CUDA handlers pick their kernel from it
//! (`KernelFn::kernel` in `kernel_launch.rs`, feature `cuda`), which refuses arguments other than the
//! declared parameters, so no kernel name or signature is written anywhere else in Rust.
//! [`all`] gathers every op's table;
//! `cargo run -p xla-ffi-rs-ops --example kernel_list -- json` (or `-- cpp`) prints
//! it for the checks that have no Rust: `cuda/check_ptx.py` compiles every
//! instantiation with NVRTC, and the stand-in driver (`cuda/stub_driver`) compiles
//! every one for the host. The printer refuses a table that [`KernelFn::missing`]
//! faults, so an instantiation dropped from the table fails both, not only the
//! handler that asks for it.

use xla_ffi::DataType;

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

pub(crate) fn show(dtypes: &[DataType]) -> String {
    let names: Vec<String> = dtypes.iter().map(|d| d.to_string()).collect();
    format!("({})", names.join(", "))
}

/// Every kernel of every op ([`crate::OPS`]), in registration order.
pub fn all() -> impl Iterator<Item = &'static KernelFn> {
    crate::OPS.iter().flat_map(|op| op.kernels.iter().copied())
}

/// Every instantiation of every kernel, in table order.
pub fn instances() -> impl Iterator<Item = Instance> {
    all().flat_map(|k| k.instances())
}

/// The tables' faults (see [`KernelFn::missing`]), and a template that two entries
/// declare; empty when they are complete.
pub fn missing() -> Vec<String> {
    let mut out: Vec<String> = all().flat_map(|k| k.missing()).collect();
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for k in all() {
        if seen.contains(&(k.source, k.name)) {
            out.push(format!("{}: declared twice for {}", k.name, k.source));
        }
        seen.push((k.source, k.name));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kepler::F32OrF64;
    use xla_ffi::{AnyFloat, ElementSpec};
    use Param::{In, Out, U64};

    /// Every op's table is complete, each kernel's source is a file in the op's
    /// folder, and no template is declared twice.
    #[test]
    fn the_tables_are_complete() {
        assert_eq!(missing(), Vec::<String>::new());
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for op in crate::OPS {
            let folder = format!("src/{}/", op.module.rsplit("::").next().unwrap());
            for k in op.kernels {
                assert!(k.source.starts_with(&folder), "{}: {} is outside {folder}", k.name, k.source);
                assert!(root.join(k.source).is_file(), "{}: no file {}", k.name, k.source);
            }
        }
    }

    /// Each kernel's source is one of the CUDA sources its op's handlers embed.
    #[cfg(feature = "cuda")]
    #[test]
    fn the_handlers_embed_the_sources_the_tables_name() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        for op in crate::OPS {
            for k in op.kernels {
                let path = root.join(k.source);
                let file = path.file_name().and_then(|n| n.to_str());
                let src = op.sources.iter().find(|s| Some(s.name()) == file);
                let src = src.unwrap_or_else(|| panic!("{}: {} is not a source of {}", k.name, k.source, op.module));
                assert_eq!(src.code(), std::fs::read_to_string(&path).unwrap(), "{}", k.name);
            }
        }
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

    /// The launcher's kernel is the table's instantiation, and a handler that asks
    /// for one the table lacks, or passes other parameters, gets an error naming
    /// its target.
    #[cfg(feature = "cuda")]
    #[test]
    fn handlers_get_the_declared_kernel_or_an_error() {
        use xla_ffi::cuda::Arg;
        use xla_ffi::ErrorCode;
        use Param::F64;
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

        // An op's CUDA handler launching a kernel outside its op's table.
        let op = crate::OPS.iter().find(|op| !op.cuda.is_empty()).expect("an op with CUDA handlers");
        let target = op.cuda[0].target;
        let e = ONE_U64.kernel(target, &[DataType::F32], &[Arg::u64(1), Arg::f64(2.0)]);
        if cfg!(debug_assertions) {
            let e = e.unwrap_err();
            assert_eq!(e.code(), ErrorCode::Internal);
            assert_eq!(e.message(), format!("{target}: kernel `k` is not in the kernel table of {}", op.module));
        }
    }
}
