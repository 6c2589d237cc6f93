//! Tokens: the operands and results by which XLA orders side effects, as `ffi.h`'s
//! `Token` (a rank-0 buffer of dtype `TOKEN`).

use crate::buffer::{Buffer, ElementSpec, ResultBuffer};
use crate::dtype::DataType;

/// The element spec of a token: accepts only dtype `token`.
///
/// Use it through [`Token`] and [`ResultToken`].
#[derive(Debug, Clone, Copy)]
pub struct TokenSpec;

impl ElementSpec for TokenSpec {
    const DTYPES: Option<&'static [DataType]> = Some(&[DataType::TOKEN]);
    fn accepts(dtype: DataType) -> bool {
        dtype == DataType::TOKEN
    }
    fn describe() -> String {
        "token".into()
    }
}

/// A token operand: a rank-0 buffer of dtype `token`, with no data.
///
/// XLA threads tokens through ops with side effects to order them: a handler that
/// takes a token and returns one runs after the op that made its input token and
/// before the op that consumes its result token. The token has nothing to read or
/// write ([`Buffer::typed`] and [`Buffer::as_bytes`] refuse it): taking it and
/// declaring the result is the whole of it. A call that passes anything else in its
/// place fails before the body, naming the operand: `expected dtype token, got float32`.
///
/// These types follow `ffi.h`'s `Token` (`BufferR0<TOKEN>`). In a declaration a
/// token's spec is `()` and its dtype `token` (`shapes = "(), () -> (), ()"`,
/// `dtypes = "token, float32 -> token, float32"`), and Python's `binding.op` binds a
/// handler with one `Token` operand and one `ResultToken` result as an op with JAX's
/// ordered effect (that of `io_callback(..., ordered=True)`), passing the effect's
/// token through the call, so such calls run in program order; this is tested on
/// jax 0.10 and 0.12 by the example plugin (`docs/binding.md`, "Tokens").
///
/// ```
/// use xla_ffi::testing::{Arg, CallBuilder};
/// use xla_ffi::{handler, Buffer, DataType, Result, ResultBuffer, ResultToken, Token};
///
/// /// Copies x to y, ordered after the op that made `order_in`.
/// #[handler(target = "demo.ordered_copy")]
/// fn demo_ordered_copy(order_in: Token, x: Buffer<f32>, mut y: ResultBuffer<f32>, _order_out: ResultToken) -> Result<()> {
///     let _ = order_in;
///     for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
///         o.write(v);
///     }
///     Ok(())
/// }
///
/// let mut call = CallBuilder::new()
///     .arg(Arg::token())
///     .arg(Arg::from_slice(&[1.0f32, 2.0], &[2]))
///     .ret(Arg::zeros::<f32>(&[2]))
///     .ret(Arg::token());
/// call.run(DEMO_ORDERED_COPY).unwrap();
/// assert_eq!(call.ret_as::<f32>(0), [1.0, 2.0]);
/// ```
pub type Token<'f> = Buffer<'f, TokenSpec, 0>;

/// A token result: see [`Token`].
pub type ResultToken<'f> = ResultBuffer<'f, TokenSpec, 0>;
