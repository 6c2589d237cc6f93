//! What an op gives the test that runs its CUDA handlers against their CPU twins
//! under the stand-in driver (`tests/cuda_stub`, run by `.ci/cuda_emu.sh`), feature
//! `fixture`: one [`OpFixture`] in the op's folder (`src/<op>/fixture.rs`), referenced
//! by its [`OpHandlers::fixture`](crate::registry::OpHandlers::fixture).
//!
//! The test derives the rest from the declarations: each CUDA handler's CPU twin (the
//! CPU handler of its target), the operands' dtype combinations (every one the
//! declared dtypes accept that the dtype rule allows, as [`xla_ffi::decl::infer`]
//! says), the operands' shapes (the shape rule's specs with the names bound as a
//! [`Group`] says), the results' shapes and dtypes (inferred), and the checks that
//! need no op knowledge: results within tolerance of the CPU's (where the CPU's is not
//! finite, the CUDA one is not either), every operand and result of a wrong shape
//! or dtype refused by both with the same message, the call log of the stand-in
//! (launches on the frame's stream, one module per context, no allocation, no
//! synchronization), first calls inside a stream capture, calls from threads, the
//! driver's error paths. The fixture says only what the declaration cannot: the
//! sample shapes and attribute values, the inputs, the tolerances, the CUDA
//! handler's results outside the declaration (`scratch`) and their hostile
//! variants, the launches one call makes.

use xla_ffi::{DataType, HandlerDescriptor};

/// An op's fixture: one entry per CUDA handler.
#[derive(Debug)]
pub struct OpFixture {
    /// Every CUDA handler of the op (the test checks that none is left out).
    pub targets: &'static [TargetFixture],
}

/// A buffer the fixture describes: its shape and dtype.
pub type Buf = (Vec<i64>, DataType);

/// An attribute value of a [`Group`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Attr {
    /// A float64 scalar.
    F64(f64),
    /// An int64 scalar.
    I64(i64),
}

/// One set of cases: every binding of [`shapes`](Self::shapes) with every dtype
/// combination [`dtypes`](Self::dtypes) keeps.
#[derive(Clone, Debug)]
pub struct Group {
    /// What the cases are for (in messages, and for the fixture's own functions).
    pub name: &'static str,
    /// One binding of the shape rule's names per case: `("b", vec![3]), ("n", vec![33])`
    /// (an ellipsis name binds any number of axes, a factor name one).
    pub shapes: Vec<Vec<(&'static str, Vec<i64>)>>,
    /// Which operand dtype combinations (of those the declaration allows) to run.
    pub dtypes: fn(&[DataType]) -> bool,
    /// The attributes, by name.
    pub attrs: Vec<(&'static str, Attr)>,
}

/// Every dtype combination the declaration allows.
pub fn all_dtypes(_: &[DataType]) -> bool {
    true
}

/// One case: what the fixture's functions are given.
#[derive(Clone, Debug)]
pub struct Sample {
    /// The [`Group::name`].
    pub group: &'static str,
    /// Each operand's shape and dtype.
    pub operands: Vec<Buf>,
    /// Each declared result's shape and dtype, as the rules infer them.
    pub results: Vec<Buf>,
    /// The attributes.
    pub attrs: Vec<(&'static str, Attr)>,
    /// A seed for the inputs, different for each case of a target.
    pub seed: u64,
}

impl Sample {
    /// Attribute `name` as a float (`0.0` if absent).
    pub fn f64_attr(&self, name: &str) -> f64 {
        match self.attrs.iter().find(|(n, _)| *n == name).map(|(_, v)| *v) {
            Some(Attr::F64(v)) => v,
            Some(Attr::I64(v)) => v as f64,
            None => 0.0,
        }
    }
}

/// A variant of the CUDA handler's results outside the declaration that the handler
/// refuses: the buffers, and the words its message contains.
#[derive(Clone, Debug)]
pub struct BadScratch {
    /// The scratch results.
    pub scratch: Vec<Buf>,
    /// Words of the error (`InvalidArgument`).
    pub words: Vec<String>,
}

/// A kernel launch one call makes: the `__global__` template's name, and its grid.
pub type Launch = (&'static str, (u32, u32, u32));

/// The absolute tolerance of each element of result `k` of a case, given the
/// operands' values (in their dtypes) and the CPU twin's results (as `f64`):
/// `tolerance(sample, inputs, cpu, k)`.
pub type Tolerance = fn(&Sample, &[Vec<f64>], &[Vec<f64>], usize) -> Vec<f64>;

/// What the test needs of one CUDA handler that the declaration does not say.
#[derive(Debug)]
pub struct TargetFixture {
    /// The CUDA handler; its CPU twin is the op's CPU handler of the same target.
    pub cuda: &'static HandlerDescriptor,
    /// The cases compared with the CPU twin.
    pub groups: fn() -> Vec<Group>,
    /// A few small cases for the tests of the driver's behaviour (call log, stream
    /// capture, threads, error paths), compared with the CPU twin too.
    pub probe: fn() -> Group,
    /// Each operand's values (converted to its dtype by the test).
    pub inputs: fn(&Sample) -> Vec<Vec<f64>>,
    /// The absolute tolerance of each element of each result.
    pub tolerance: Tolerance,
    /// The CUDA handler's results past the declared ones (`scratch`): one list per
    /// variant to run, each giving results within tolerance; `vec![vec![]]` for none.
    pub scratch: fn(&Sample) -> Vec<Vec<Buf>>,
    /// Scratch results the handler refuses, before any launch.
    pub bad_scratch: fn(&Sample) -> Vec<BadScratch>,
    /// The launches of one call with these scratch results, in order.
    pub launches: fn(&Sample, &[Buf]) -> Vec<Launch>,
    /// The results (by index) that are the same to the bit on every run.
    pub deterministic: &'static [usize],
}

/// No results outside the declaration.
pub fn no_scratch(_: &Sample) -> Vec<Vec<Buf>> {
    vec![Vec::new()]
}

/// No scratch results to refuse.
pub fn no_bad_scratch(_: &Sample) -> Vec<BadScratch> {
    Vec::new()
}

/// A deterministic pseudo-random stream in `[0, 1)` for the fixtures' inputs.
#[derive(Clone, Debug)]
pub struct Lcg(pub u64);

impl Lcg {
    /// The next value.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }

    /// `n` values uniform in `[lo, hi)`.
    pub fn uniform(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| lo + (hi - lo) * self.next()).collect()
    }
}

/// The number of elements of a shape.
pub fn elements(dims: &[i64]) -> usize {
    dims.iter().map(|&d| d.max(0) as usize).product()
}

/// `ulp(1)` of a float dtype (`f32`'s for the 16-bit ones, which the kernels
/// compute in `f32`).
pub fn epsilon(d: DataType) -> f64 {
    if d == DataType::F64 {
        f64::EPSILON
    } else {
        f32::EPSILON as f64
    }
}
