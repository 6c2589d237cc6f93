//! Variadic operands and results: [`RemainingArgs`] and [`RemainingRets`], like
//! `ffi.h`'s `RemainingArgs`/`RemainingRets`.

use crate::buffer::{AnyType, Buffer, ResultBuffer};
use crate::call::{Call, Decode};

/// Every operand after the ones bound before it, each decoded as
/// [`Buffer<AnyType>`](Buffer) (check the dtype with [`Buffer::typed`] or
/// [`Buffer::expect_dtype`]).
///
/// It must come after the handler's [`Buffer`] parameters. The operand count is then
/// "at least" the number of fixed operands. Aliasing with results is tracked for these
/// operands as for the others.
///
/// ```
/// use xla_ffi::{handler, RemainingArgs, ResultBuffer, Result};
///
/// /// out = the sum of any number of float32 operands of out's shape.
/// #[handler(target = "demo.sum")]
/// fn demo_sum(mut out: ResultBuffer<f32>, xs: RemainingArgs) -> Result<()> {
///     let out = out.as_uninit()?;
///     let mut acc = vec![0f32; out.len()];
///     for x in xs.iter() {
///         x.expect_dims(&[acc.len() as i64], "the shape of out")?;
///         for (a, &v) in acc.iter_mut().zip(x.typed::<f32>()?) {
///             *a += v;
///         }
///     }
///     for (o, a) in out.iter_mut().zip(acc) {
///         o.write(a);
///     }
///     Ok(())
/// }
/// ```
pub struct RemainingArgs<'f> {
    items: Vec<Buffer<'f, AnyType>>,
}

impl<'f> RemainingArgs<'f> {
    /// How many operands there are.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// Operand `i` of the remaining ones.
    pub fn get(&self, i: usize) -> Option<&Buffer<'f, AnyType>> {
        self.items.get(i)
    }
    /// The operands in order.
    pub fn iter(&self) -> core::slice::Iter<'_, Buffer<'f, AnyType>> {
        self.items.iter()
    }
    /// The operands as a slice.
    pub fn as_slice(&self) -> &[Buffer<'f, AnyType>] {
        &self.items
    }
}

/// Every result after the ones bound before it, each as
/// [`ResultBuffer<AnyType>`](ResultBuffer). It must come after the handler's
/// [`ResultBuffer`] parameters.
pub struct RemainingRets<'f> {
    items: Vec<ResultBuffer<'f, AnyType>>,
}

impl<'f> RemainingRets<'f> {
    /// How many results there are.
    pub fn len(&self) -> usize {
        self.items.len()
    }
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
    /// Result `i` of the remaining ones.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut ResultBuffer<'f, AnyType>> {
        self.items.get_mut(i)
    }
    /// The results in order (shapes and dtypes; write through [`iter_mut`](Self::iter_mut)).
    pub fn iter(&self) -> core::slice::Iter<'_, ResultBuffer<'f, AnyType>> {
        self.items.iter()
    }
    /// The results in order, to write.
    pub fn iter_mut(&mut self) -> core::slice::IterMut<'_, ResultBuffer<'f, AnyType>> {
        self.items.iter_mut()
    }
    /// The results as a mutable slice (each written through `&mut`).
    pub fn as_mut_slice(&mut self) -> &mut [ResultBuffer<'f, AnyType>] {
        &mut self.items
    }
}

impl<'f> Decode<'f> for RemainingArgs<'f> {
    const VARIADIC_ARGS: bool = true;
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        let mut items = Vec::new();
        let mut ok = true;
        while call.remaining_args() > 0 {
            match Buffer::<AnyType>::decode(call, name) {
                Some(b) => items.push(b),
                None => ok = false,
            }
        }
        ok.then_some(RemainingArgs { items })
    }
}

impl<'f> Decode<'f> for RemainingRets<'f> {
    const VARIADIC_RETS: bool = true;
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        let mut items = Vec::new();
        let mut ok = true;
        while call.remaining_rets() > 0 {
            match ResultBuffer::<AnyType>::decode(call, name) {
                Some(b) => items.push(b),
                None => ok = false,
            }
        }
        ok.then_some(RemainingRets { items })
    }
}

impl core::fmt::Debug for RemainingArgs<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(&self.items).finish()
    }
}

impl core::fmt::Debug for RemainingRets<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(&self.items).finish()
    }
}
