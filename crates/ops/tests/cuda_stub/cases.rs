//! The cases of every CUDA target of `OPS`: its CPU twin (the CPU handler of the same
//! target), the samples its declaration and fixture make, running one on both
//! platforms and comparing the results.

use xla_ffi::decl::{infer, ShapeRule, Tok};
use xla_ffi::testing::cuda::{DeviceBuffer, Gpu};
use xla_ffi::testing::{AttrArg, CallBuilder, CallResult};
use xla_ffi::{DataType, HandlerDescriptor};
use xla_ffi_rs_ops::fixture::{elements, Attr, Buf, Group, Sample, TargetFixture};
use xla_ffi_rs_ops::OPS;

use crate::values::{download, garbage, host_ret, V};

/// One CUDA handler of an op, its CPU twin and its fixture.
pub struct Target {
    pub cpu: &'static HandlerDescriptor,
    pub cuda: &'static HandlerDescriptor,
    pub fx: &'static TargetFixture,
}

/// Every CUDA handler of every op, each with its fixture entry (an op whose fixture
/// leaves one out, or lists a handler that is not its own, fails here).
pub fn targets() -> Vec<Target> {
    let mut out = Vec::new();
    for op in OPS {
        for fx in op.fixture.targets {
            assert!(
                op.cuda.iter().any(|h| core::ptr::eq(*h, fx.cuda)),
                "{}: the fixture lists {}, not a CUDA handler of the op",
                op.module,
                fx.cuda.target
            );
        }
        for &cuda in op.cuda {
            let fx = op.fixture.targets.iter().find(|f| core::ptr::eq(f.cuda, cuda));
            let fx = fx.unwrap_or_else(|| panic!("{}: no fixture entry for {}", op.module, cuda.target));
            let cpu = op.cpu.iter().copied().find(|h| h.target == cuda.target).expect("a CPU twin");
            out.push(Target { cpu, cuda, fx });
        }
    }
    assert!(!out.is_empty(), "no CUDA handler in OPS");
    out
}

/// Every dtype combination of the operands' accepted dtypes.
fn combos(accepts: &[Vec<DataType>]) -> Vec<Vec<DataType>> {
    accepts.iter().fold(vec![Vec::new()], |acc, ds| {
        acc.iter().flat_map(|c| ds.iter().map(move |&d| [c.as_slice(), &[d]].concat())).collect()
    })
}

impl Target {
    pub fn name(&self) -> &'static str {
        self.cuda.target
    }

    /// The operands' names, then the results'.
    pub fn names(&self) -> (Vec<&'static str>, Vec<&'static str>) {
        let d = self.cpu.declaration;
        (d.operands().map(|(n, _)| n).collect(), d.results().map(|(n, _)| n).collect())
    }

    /// The samples of `group`: each binding of the shape rule's names with each dtype
    /// combination the declaration allows and the group keeps.
    pub fn samples(&self, group: &Group) -> Vec<Sample> {
        let decl = self.cpu.declaration;
        let sig = decl.signature();
        let text = decl.shapes.unwrap_or_else(|| panic!("{}: no shape rule", self.name()));
        let rule = ShapeRule::parse(text).unwrap();
        let accepts: Vec<Vec<DataType>> = sig.operands.iter().map(|o| o.accepts.clone()).collect();
        let mut out = Vec::new();
        for binding in &group.shapes {
            let bound = |i: usize| -> Vec<i64> {
                let name = &rule.names[i];
                let b = binding.iter().find(|(n, _)| n == name);
                b.unwrap_or_else(|| panic!("{} [{}]: no size for `{name}` of `{text}`", self.name(), group.name))
                    .1
                    .clone()
            };
            let dims = |spec: &Vec<Tok>| -> Vec<i64> {
                spec.iter()
                    .flat_map(|t| match *t {
                        Tok::Ellipsis(i) | Tok::Factor(i) => bound(i),
                        Tok::Literal(v) => vec![v],
                    })
                    .collect()
            };
            let shapes: Vec<Vec<i64>> = rule.operands.iter().map(dims).collect();
            for dtypes in combos(&accepts) {
                if !(group.dtypes)(&dtypes) {
                    continue;
                }
                let Ok(inferred) = infer(&sig, &shapes, &dtypes) else { continue };
                out.push(Sample {
                    group: group.name,
                    operands: shapes.iter().cloned().zip(dtypes).collect(),
                    results: inferred.results,
                    attrs: group.attrs.clone(),
                    seed: out.len() as u64,
                });
            }
        }
        assert!(!out.is_empty(), "{} [{}]: the group makes no case", self.name(), group.name);
        out
    }

    /// Every sample of every group of the fixture.
    pub fn cases(&self) -> Vec<Sample> {
        (self.fx.groups)().iter().flat_map(|g| self.samples(g)).collect()
    }

    /// The probe samples (small; for the tests of the driver's behaviour).
    pub fn probes(&self) -> Vec<Sample> {
        self.samples(&(self.fx.probe)())
    }
}

/// What a sample is, for messages.
pub fn tag(t: &Target, s: &Sample) -> String {
    let ops: Vec<String> = s.operands.iter().map(|(d, t)| format!("{t}{d:?}")).collect();
    format!("{} [{}] ({})", t.name(), s.group, ops.join(", "))
}

/// A sample with its operands' values.
pub struct Prepared<'t> {
    pub t: &'t Target,
    pub s: Sample,
    pub inputs: Vec<V>,
}

impl<'t> Prepared<'t> {
    pub fn new(t: &'t Target, s: Sample) -> Self {
        let values = (t.fx.inputs)(&s);
        assert_eq!(values.len(), s.operands.len(), "{}: inputs for each operand", tag(t, &s));
        let inputs = values
            .iter()
            .zip(&s.operands)
            .map(|(v, (dims, d))| {
                assert_eq!(v.len(), elements(dims), "{}: an input of shape {dims:?}", tag(t, &s));
                V::new(*d, v)
            })
            .collect();
        Prepared { t, s, inputs }
    }

    pub fn tag(&self) -> String {
        tag(self.t, &self.s)
    }

    /// The host call of the CPU twin with `operands` and `results` (shape, dtype).
    pub fn cpu_call(&self, operands: &[(Buf, &V)], results: &[Buf]) -> CallBuilder {
        let mut call = CallBuilder::new();
        for ((dims, _), v) in operands {
            call = call.arg(v.arg(dims));
        }
        for (dims, d) in results {
            call = call.ret(V::zeros(*d, elements(dims)).arg(dims));
        }
        with_attrs(call, &self.s.attrs)
    }

    /// The CPU twin's results.
    pub fn run_cpu(&self) -> Vec<V> {
        let ops: Vec<(Buf, &V)> = self.s.operands.iter().cloned().zip(&self.inputs).collect();
        let mut call = self.cpu_call(&ops, &self.s.results);
        call.run(self.t.cpu).unwrap_or_else(|e| panic!("{}: the CPU twin failed: {e:?}", self.tag()));
        self.s.results.iter().enumerate().map(|(i, (_, d))| host_ret(&call, i, *d)).collect()
    }

    /// The operands on the device.
    pub fn upload(&self) -> Vec<DeviceBuffer> {
        self.inputs.iter().map(V::upload).collect()
    }

    /// The device call of the CUDA handler on `g`: `dev` described as `operands`,
    /// fresh results and `scratch`; returns the call and its result buffers.
    pub fn cuda_call(
        &self,
        g: &Gpu,
        dev: &[&DeviceBuffer],
        operands: &[Buf],
        results: &[Buf],
        scratch: &[Buf],
    ) -> (CallBuilder, Vec<DeviceBuffer>) {
        let mut call = CallBuilder::new().on_gpu(g);
        for (b, (dims, _)) in dev.iter().zip(operands) {
            call = call.arg(b.arg(dims));
        }
        let outs: Vec<DeviceBuffer> =
            results.iter().chain(scratch).map(|(dims, d)| garbage(*d, elements(dims))).collect();
        for (b, (dims, _)) in outs.iter().zip(results.iter().chain(scratch)) {
            call = call.ret(b.arg(dims));
        }
        (with_attrs(call, &self.s.attrs), outs)
    }

    /// The CUDA handler's declared results on `g`, with `scratch`.
    pub fn run_cuda(&self, g: &Gpu, dev: &[DeviceBuffer], scratch: &[Buf]) -> Vec<V> {
        let dev: Vec<&DeviceBuffer> = dev.iter().collect();
        let (mut call, outs) = self.cuda_call(g, &dev, &self.s.operands, &self.s.results, scratch);
        let r = call.run(self.t.cuda);
        no_panic_text(&r);
        r.unwrap_or_else(|e| panic!("{}: the CUDA handler failed: {e:?}", self.tag()));
        self.download(&outs)
    }

    /// The declared results of a finished call.
    pub fn download(&self, outs: &[DeviceBuffer]) -> Vec<V> {
        self.s.results.iter().zip(outs).map(|((_, d), b)| download(*d, b)).collect()
    }

    /// Compares the CUDA results with the CPU twin's: where the CPU's is finite,
    /// within the fixture's tolerance (a NaN fails); where not, not finite either.
    pub fn compare(&self, what: &str, cuda: &[V], cpu: &[V]) {
        let inputs: Vec<Vec<f64>> = self.inputs.iter().map(V::f64s).collect();
        let cpu: Vec<Vec<f64>> = cpu.iter().map(V::f64s).collect();
        let (_, names) = self.t.names();
        for (k, g) in cuda.iter().enumerate() {
            let (g, c) = (g.f64s(), &cpu[k]);
            assert_eq!(g.len(), c.len(), "{} {what}: result {k} length", self.tag());
            let tol = (self.t.fx.tolerance)(&self.s, &inputs, &cpu, k);
            assert_eq!(tol.len(), c.len(), "{}: a tolerance per element of result {k}", self.tag());
            for i in 0..c.len() {
                let ok = if c[i].is_finite() { (g[i] - c[i]).abs() <= tol[i] } else { !g[i].is_finite() };
                if !ok {
                    let at: Vec<String> =
                        inputs.iter().filter(|v| v.len() == c.len()).map(|v| format!("{:e}", v[i])).collect();
                    panic!(
                        "{} {what}: result {k} ({})[{i}] (operands there: {}): cuda {} vs cpu {} (tolerance {:e})",
                        self.tag(),
                        names[k],
                        at.join(", "),
                        g[i],
                        c[i],
                        tol[i]
                    );
                }
            }
        }
    }
}

pub fn with_attrs(mut call: CallBuilder, attrs: &[(&str, Attr)]) -> CallBuilder {
    for (name, v) in attrs {
        call = call.attr(
            name,
            match *v {
                Attr::F64(x) => AttrArg::scalar(x),
                Attr::I64(x) => AttrArg::scalar(x),
            },
        );
    }
    call
}

/// A handler's error never carries a panic's message.
pub fn no_panic_text(r: &CallResult) {
    if let Err((_, m)) = r {
        assert!(!m.contains("panicked"), "a panic message reached the error: {m}");
    }
}
