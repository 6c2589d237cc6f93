// The handler of README.md's "Writing your own handler in Rust", verbatim: keep them equal.
#![forbid(unsafe_code)] // a crate of handlers needs no unsafe
use core::mem::MaybeUninit;
use num_traits::Float; // num-traits 0.2; half's "num-traits" feature covers f16, bf16
use xla_ffi::{dispatch_float, handler, AnyFloat, Attr, Buffer, Context, Parts, Result, ResultBuffer};

fn scale<T: Float>(x: &[T], k: f64, y: &mut [MaybeUninit<T>]) {
    let k = T::from(k).expect("every float type converts from f64");
    for (o, &v) in y.iter_mut().zip(x) {
        o.write(v * k);
    }
}

/// y = k * x for any float dtype, on XLA's CPU thread pool.
#[handler(target = "my_project.scale")]
pub fn my_project_scale(ctx: Context, x: Buffer<AnyFloat>, mut y: ResultBuffer<AnyFloat>, k: Attr<f64>) -> Result<()> {
    y.expect_dims(x.dims(), "the shape of x")?;
    y.expect_dtype(x.dtype(), "the dtype of x")?;
    dispatch_float!(x.dtype(), T => {
        let (x, y) = (x.typed::<T>()?, y.typed_uninit::<T>()?);
        let parts = Parts::new(y, 1 << 15);
        ctx.thread_pool().for_each(parts.len(), |i| {
            let (start, y) = parts.take(i);
            scale(&x[start..start + y.len()], *k, y);
        })
    }, else d => unreachable!("{d}"))
}

fn main() {
    assert_eq!(MY_PROJECT_SCALE.symbol, "xla_ffi_handler__my_project_scale");
}
