//! Synthetic call frames and a fake XLA API table, to test handlers without JAX
//! (feature `testing`). The same tests run under Miri and a fuzzer.
//!
//! ```
//! use xla_ffi::testing::{Arg, CallBuilder};
//! use xla_ffi::{handler, Buffer, ResultBuffer, Result};
//!
//! #[handler(target = "t.double")]
//! fn t_double(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
//!     for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) { o.write(2.0 * v); }
//!     Ok(())
//! }
//!
//! let mut call = CallBuilder::new()
//!     .arg(Arg::from_slice(&[1.0f32, 2.0], &[2]))
//!     .ret(Arg::zeros::<f32>(&[2]));
//! call.run(T_DOUBLE).unwrap();
//! assert_eq!(call.ret_as::<f32>(0), vec![2.0, 4.0]);
//! ```

#[cfg(feature = "cuda")]
pub mod cuda;

mod args;
mod call;
mod fake_api;
mod future;
pub mod raw;

pub(crate) use args::AttrStore;
pub use args::{Arg, AttrArg};
pub use call::{CallBuilder, CallResult};
pub use fake_api::{register_state_type, DemoExtension, FakeApi};
pub(crate) use fake_api::{take_error, FakeCtx};
