//! Kernels as a launch and NVRTC see them: the parameter types ([`Param`]), a
//! kernel's name and parameter list ([`Kernel`]), and the arguments a launch passes
//! ([`Arg`]).

use core::marker::PhantomData;

use crate::buffer::{Buffer, ElementSpec, ResultBuffer};

/// The C++ type of one kernel parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Param {
    /// `const void*` (an input buffer's address).
    In,
    /// `void*` (a result buffer's address).
    Out,
    /// `unsigned long long`.
    U64,
    /// `long long`.
    I64,
    /// `unsigned int`.
    U32,
    /// `int`.
    I32,
    /// `float`.
    F32,
    /// `double`.
    F64,
}

impl Param {
    /// The C++ spelling.
    pub fn cpp(self) -> &'static str {
        match self {
            Param::In => "const void*",
            Param::Out => "void*",
            Param::U64 => "unsigned long long",
            Param::I64 => "long long",
            Param::U32 => "unsigned int",
            Param::I32 => "int",
            Param::F32 => "float",
            Param::F64 => "double",
        }
    }
}

/// A kernel: a `__global__` function (template arguments included, such as
/// `kepler<float>`) and the parameter list the launch passes.
///
/// The module is compiled with the NVRTC name expression
/// `static_cast<void(*)(params...)>(name)`, which both instantiates a template and
/// checks that the kernel's C++ signature is exactly `params`: a mismatch is a
/// compile error, never a launch that reads its parameters with the wrong types.
/// The launch is then looked up by NVRTC's lowered name of that expression.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Kernel {
    name: String,
    params: Vec<Param>,
}

impl Kernel {
    /// Kernel `name` taking the parameters that `args` expand to (a buffer is two
    /// parameters: address and size in bytes).
    pub fn new(name: impl Into<String>, args: &[Arg<'_>]) -> Self {
        let params = args.iter().flat_map(|a| a.params().map(|(p, _)| p)).collect();
        Kernel { name: name.into(), params }
    }

    /// Kernel `name` with the parameter list `params`, spelled out: for checking a
    /// kernel's signature without a call frame ([`Source::check`](super::Source::check)).
    /// A launch still compares its arguments with this list.
    pub fn with_params(name: impl Into<String>, params: &[Param]) -> Self {
        Kernel { name: name.into(), params: params.to_vec() }
    }

    /// The name, with its template arguments.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The parameter list.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// Whether the name is a C++ name with template arguments and nothing else:
    /// no parentheses, braces, quotes or operators, so no cast or other expression
    /// can ride in it. The `static_cast` of [`name_expression`](Self::name_expression)
    /// then fixes the launched function's signature to [`params`](Self::params).
    pub(crate) fn is_plain_name(&self) -> bool {
        !self.name.trim().is_empty()
            && self.name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | ':' | '<' | '>' | ',' | ' '))
    }

    /// The NVRTC name expression: `static_cast<void(*)(const void*, ...)>(name)`.
    pub fn name_expression(&self) -> String {
        let ps: Vec<&str> = self.params.iter().map(|p| p.cpp()).collect();
        format!("static_cast<void(*)({})>({})", ps.join(", "), self.name)
    }
}

#[derive(Clone, Copy, Debug)]
pub(crate) enum ArgKind {
    In(usize, u64),
    Out(usize, u64),
    U64(u64),
    I64(i64),
    U32(u32),
    I32(i32),
    F32(f32),
    F64(f64),
}

/// One kernel argument: a buffer of this call, or a scalar.
///
/// A `&Buffer` becomes `const void*, unsigned long long` (address, size in bytes), a
/// `&mut ResultBuffer` becomes `void*, unsigned long long` (see [`Arg::read_only`]
/// to read it back as an input); scalars map to
/// `unsigned long long`, `long long`, `unsigned int`, `int`, `float`, `double`.
#[derive(Clone, Copy, Debug)]
pub struct Arg<'f> {
    pub(crate) kind: ArgKind,
    _life: PhantomData<&'f ()>,
}

impl<'f> Arg<'f> {
    pub(crate) fn new(kind: ArgKind) -> Self {
        Arg { kind, _life: PhantomData }
    }
    /// An `unsigned long long` parameter.
    pub fn u64(v: u64) -> Self {
        Self::new(ArgKind::U64(v))
    }
    /// A `long long` parameter.
    pub fn i64(v: i64) -> Self {
        Self::new(ArgKind::I64(v))
    }
    /// An `unsigned int` parameter.
    pub fn u32(v: u32) -> Self {
        Self::new(ArgKind::U32(v))
    }
    /// An `int` parameter.
    pub fn i32(v: i32) -> Self {
        Self::new(ArgKind::I32(v))
    }
    /// A `float` parameter.
    pub fn f32(v: f32) -> Self {
        Self::new(ArgKind::F32(v))
    }
    /// A `double` parameter.
    pub fn f64(v: f64) -> Self {
        Self::new(ArgKind::F64(v))
    }

    /// This argument as a kernel *input* (`const void*`): for a result that an
    /// earlier launch of the same call wrote (a workspace, say) and a later launch
    /// reads. XLA's stream orders the two launches. Other arguments are unchanged.
    pub fn read_only(self) -> Self {
        match self.kind {
            ArgKind::Out(p, n) => Self::new(ArgKind::In(p, n)),
            _ => self,
        }
    }

    /// The kernel parameters this argument expands to: (type, native bytes).
    pub(crate) fn params(&self) -> impl Iterator<Item = (Param, [u8; 8])> {
        let w4 = |v: [u8; 4]| {
            let mut b = [0u8; 8];
            b[..4].copy_from_slice(&v);
            b
        };
        let (a, b) = match self.kind {
            ArgKind::In(p, n) => ((Param::In, (p as u64).to_ne_bytes()), Some((Param::U64, n.to_ne_bytes()))),
            ArgKind::Out(p, n) => ((Param::Out, (p as u64).to_ne_bytes()), Some((Param::U64, n.to_ne_bytes()))),
            ArgKind::U64(v) => ((Param::U64, v.to_ne_bytes()), None),
            ArgKind::I64(v) => ((Param::I64, v.to_ne_bytes()), None),
            ArgKind::F64(v) => ((Param::F64, v.to_ne_bytes()), None),
            ArgKind::U32(v) => ((Param::U32, w4(v.to_ne_bytes())), None),
            ArgKind::I32(v) => ((Param::I32, w4(v.to_ne_bytes())), None),
            ArgKind::F32(v) => ((Param::F32, w4(v.to_ne_bytes())), None),
        };
        core::iter::once(a).chain(b)
    }
}

impl<'a, 'f, D: ElementSpec, const R: usize> From<&'a Buffer<'f, D, R>> for Arg<'f> {
    fn from(b: &'a Buffer<'f, D, R>) -> Self {
        Arg::new(ArgKind::In(b.as_ptr() as usize, b.size_bytes() as u64))
    }
}

impl<'a, 'f, D: ElementSpec, const R: usize> From<&'a mut ResultBuffer<'f, D, R>> for Arg<'f> {
    fn from(b: &'a mut ResultBuffer<'f, D, R>) -> Self {
        let bytes = b.size_bytes() as u64;
        Arg::new(ArgKind::Out(b.as_mut_ptr() as usize, bytes))
    }
}

/// A parameter list as C++ spells it: `(const void*, unsigned long long)`.
pub(crate) fn describe(params: &[Param]) -> String {
    let names: Vec<&str> = params.iter().map(|p| p.cpp()).collect();
    format!("({})", names.join(", "))
}
