//! A device handler that takes its target and rules from its host twin
//! (`op = PATH`), with a trailing `scratch` result outside them, in a
//! `forbid(unsafe_code)` crate, referring to a descriptor in another module.
#![forbid(unsafe_code)]
use xla_ffi::{handler, AnyFloat, Attr, Buffer, Context, Result, ResultBuffer};

pub mod cpu {
    use super::*;

    #[handler(
        target = "ui.norm",
        descriptor = NORM_CPU,
        shapes = "...b ...n, ...n -> ...b ...n",
        dtypes = "X, W -> promote(X, W)",
        linear = "x",
        transpose = "ui.norm_t"
    )]
    pub fn norm_cpu(x: Buffer<AnyFloat>, weight: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>, eps: Attr<f64>) -> Result<()> {
        let _ = (x, weight, y, eps);
        Ok(())
    }
}

pub mod cuda {
    use super::*;

    #[handler(op = super::cpu::NORM_CPU, scratch = "workspace", platform = device, descriptor = NORM_CUDA)]
    pub fn norm_cuda<'f>(
        _ctx: Context<'f>,
        x: Buffer<'f, AnyFloat>,
        weight: Buffer<'f, AnyFloat>,
        y: ResultBuffer<'f, AnyFloat>,
        eps: Attr<f64>,
        workspace: ResultBuffer<'f, f32, 2>,
    ) -> Result<()> {
        let _ = (x, weight, y, eps, workspace);
        Ok(())
    }
}

fn main() {
    let (a, b) = (cpu::NORM_CPU.declaration, cuda::NORM_CUDA.declaration);
    assert_eq!(cuda::NORM_CUDA.target, "ui.norm");
    assert_eq!((b.target, b.shapes, b.dtypes, b.linear, b.transpose), (a.target, a.shapes, a.dtypes, a.linear, a.transpose));
    let results: Vec<_> = b.results().map(|(n, _)| n).collect();
    assert_eq!(results, ["y"], "the scratch result is not part of the declaration");
}
