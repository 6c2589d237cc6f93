//! Optional operands and results: `Option<Buffer<..>>`, `Option<ResultBuffer<..>>`
//! (and so `Option<Token>`, `Option<ResultToken>`), present or absent by the call's
//! arity, like `ffi.h`'s `OptionalArg<T>` / `OptionalRet<T>`.

use crate::buffer::{Buffer, ElementSpec, ResultBuffer};
use crate::call::{Call, Decode};
use crate::decl::ParamDecl;

mod sealed {
    pub trait Sealed {}
}

/// A parameter type that may be optional: one operand ([`Buffer`], [`Token`](crate::Token))
/// or one result ([`ResultBuffer`], [`ResultToken`](crate::ResultToken)). Sealed.
///
/// `Option<B>` of such a type is a handler parameter: `Some` when the call passes
/// the operand (result), `None` when the call has one operand (result) fewer. Only
/// trailing operands and results can be optional: after an optional operand every
/// operand must be optional too (and likewise results), and `RemainingArgs` /
/// `RemainingRets` cannot share a handler with optional operands / results. The
/// macro refuses both at compile time. Beside `shapes` and `dtypes`, each optional
/// operand's (result's) spec ends in `?` (`shapes = "...b n, n? -> ...b n"`,
/// `dtypes = "T, T? -> T"`; the macro checks that the marks and the `Option`
/// parameters agree), and the shim checks the rule without the absent ones. The
/// op's declaration marks them optional, and Python's `binding.op` leaves an operand
/// passed as `None` (or not passed) out of the call.
///
/// A call with fewer operands than the required ones is an error that names the
/// missing ones, one with more than all of them is an error too.
///
/// ```
/// use xla_ffi::testing::{Arg, CallBuilder};
/// use xla_ffi::{handler, Buffer, ErrorCode, Result, ResultBuffer};
///
/// /// y = x + bias, or y = x without a bias.
/// #[handler(target = "demo.bias")]
/// fn demo_bias(x: Buffer<f32>, bias: Option<Buffer<f32>>, mut y: ResultBuffer<f32>) -> Result<()> {
///     let b = match &bias {
///         Some(b) => b.as_slice()?[0],
///         None => 0.0,
///     };
///     for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
///         o.write(v + b);
///     }
///     Ok(())
/// }
///
/// let x = || Arg::from_slice(&[1.0f32, 2.0], &[2]);
/// let mut with = CallBuilder::new().arg(x()).arg(Arg::from_slice(&[10.0f32], &[1])).ret(Arg::zeros::<f32>(&[2]));
/// with.run(DEMO_BIAS).unwrap();
/// assert_eq!(with.ret_as::<f32>(0), [11.0, 12.0]);
/// let mut without = CallBuilder::new().arg(x()).ret(Arg::zeros::<f32>(&[2]));
/// without.run(DEMO_BIAS).unwrap();
/// assert_eq!(without.ret_as::<f32>(0), [1.0, 2.0]);
/// let (code, msg) = CallBuilder::new().ret(Arg::zeros::<f32>(&[2])).run(DEMO_BIAS).unwrap_err();
/// assert_eq!(code, ErrorCode::InvalidArgument);
/// assert!(msg.contains("expected 1 to 2 operands (`bias` is optional), got 0 (missing `x`)"));
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be optional",
    label = "`Option<{Self}>` is not a handler parameter",
    note = "only operands and results can be optional: Option<Buffer<..>>, Option<ResultBuffer<..>>, \
            Option<Token>, Option<ResultToken>; an optional attribute is Attr<Option<T>>"
)]
pub trait OptionalBuffer<'f>: Decode<'f> + sealed::Sealed {}

impl<D: ElementSpec, const R: usize> sealed::Sealed for Buffer<'_, D, R> {}
impl<'f, D: ElementSpec, const R: usize> OptionalBuffer<'f> for Buffer<'f, D, R> {}
impl<D: ElementSpec, const R: usize> sealed::Sealed for ResultBuffer<'_, D, R> {}
impl<'f, D: ElementSpec, const R: usize> OptionalBuffer<'f> for ResultBuffer<'f, D, R> {}

impl<'f, B: OptionalBuffer<'f>> Decode<'f> for Option<B> {
    const ARGS: usize = B::ARGS;
    const RETS: usize = B::RETS;
    const OPTIONAL_ARGS: usize = B::ARGS;
    const OPTIONAL_RETS: usize = B::RETS;
    const DECL: ParamDecl = match B::DECL {
        ParamDecl::Operand(a) => ParamDecl::OptionalOperand(a),
        ParamDecl::Result(a) => ParamDecl::OptionalResult(a),
        other => other,
    };
    const BUFFER: crate::decl::BufferBounds = B::BUFFER;
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        // One operand or one result (sealed): present when the frame has one left.
        let present = if B::ARGS > 0 { call.remaining_args() >= B::ARGS } else { call.remaining_rets() >= B::RETS };
        if present {
            B::decode(call, name).map(Some)
        } else {
            Some(None)
        }
    }
}
