//! The [`handler!`](crate::handler) macro: declare a handler's signature once; the
//! decoding, checks and the exported C symbol follow from it.

/// Declares an XLA FFI handler and exports it as an `extern "C"` symbol.
///
/// The first line configures it:
/// * `target = "name"`: the FFI target name, used in every error message;
/// * `platform = host` (default) or `platform = device`: device handlers never get
///   host slices of their buffers, only addresses;
/// * `stage = instantiate`: the function creates the handler's state (its return
///   type is `Result<S>` with `S:` [`StateType`](crate::StateType)); otherwise it is
///   the execute stage and returns `Result<()>`;
/// * `traits = Traits::COMMAND_BUFFER_COMPATIBLE`: traits reported to XLA.
///
/// Each parameter's type says what it is: [`Buffer`](crate::Buffer) (the next
/// operand), [`ResultBuffer`](crate::ResultBuffer) (the next result),
/// [`Attr`](crate::Attr) (the attribute named like the parameter),
/// [`Attrs`](crate::Attrs) (all attributes as a struct), [`Context`](crate::Context),
/// [`State`](crate::State). Operand and result counts, dtypes, ranks and attributes
/// are checked before the body runs, and every problem is reported at once, naming
/// the target and the operand. The body runs under `catch_unwind`. Parameters are
/// bound mutably.
///
/// # Example
///
/// ```
/// use xla_ffi::{handler, AnyFloat, Attr, Buffer, Float, ResultBuffer, Result};
///
/// fn scale<T: Float>(x: &[T], k: f64, y: &mut [core::mem::MaybeUninit<T>]) {
///     for (o, &v) in y.iter_mut().zip(x) {
///         o.write(T::from_f64(v.to_f64() * k));
///     }
/// }
///
/// handler! {
///     target = "my_project.scale";
///     /// y = k * x, for any float dtype.
///     pub fn my_project_scale(x: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>, k: Attr<f64>) -> Result<()> {
///         y.expect_dims(x.dims(), "the shape of x")?;
///         y.expect_dtype(x.dtype(), "the dtype of x")?;
///         xla_ffi::dispatch_float!(x.dtype(),
///             T => scale::<T>(x.typed()?, *k, y.typed_uninit()?),
///             else d => unreachable!("{d} is not a float"))
///         ;
///         Ok(())
///     }
/// }
/// // `my_project_scale` is now an `unsafe extern "C" fn(*mut XLA_FFI_CallFrame)`,
/// // exported unmangled, ready for `jax.ffi.pycapsule` or `xla_ffi::python::capsule`.
/// let _f: xla_ffi::HandlerFn = my_project_scale;
/// ```
#[macro_export]
macro_rules! handler {
    (
        target = $target:literal $(, platform = $platform:ident)? , stage = instantiate $(, traits = $traits:expr)? ;
        $(#[$m:meta])*
        $vis:vis fn $name:ident ( $($p:ident : $ty:ty),* $(,)? ) -> Result<$state:ty> $body:block
    ) => {
        $(#[$m])*
        #[no_mangle]
        $vis unsafe extern "C" fn $name(frame: *mut $crate::sys::XLA_FFI_CallFrame) -> *mut $crate::sys::XLA_FFI_Error {
            let info = $crate::__handler_info!($target, $($platform)?, Instantiate, ($($traits)?), ($($ty),*),
                || <$state as $crate::StateType>::registration().type_id());
            // SAFETY: XLA calls this symbol with a valid call frame.
            unsafe {
                $crate::__private::dispatch_instantiate::<$state>(frame, &info, |call| -> Result<$state> {
                    $crate::__decode_and_run!(call, $body, $($p: $ty),*)
                })
            }
        }
    };
    (
        target = $target:literal $(, platform = $platform:ident)? $(, traits = $traits:expr)? ;
        $(#[$m:meta])*
        $vis:vis fn $name:ident ( $($p:ident : $ty:ty),* $(,)? ) -> $ret:ty $body:block
    ) => {
        $(#[$m])*
        #[no_mangle]
        $vis unsafe extern "C" fn $name(frame: *mut $crate::sys::XLA_FFI_CallFrame) -> *mut $crate::sys::XLA_FFI_Error {
            let info = $crate::__handler_info!($target, $($platform)?, Execute, ($($traits)?), ($($ty),*),
                || { let mut id = 0; $( let t = <$ty as $crate::Decode>::state_type_id(); if t != 0 { id = t; } )* id });
            // SAFETY: XLA calls this symbol with a valid call frame.
            unsafe {
                $crate::__private::dispatch(frame, &info, |call| -> $ret {
                    $crate::__decode_and_run!(call, $body, $($p: $ty),*)
                })
            }
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __handler_info {
    ($target:literal, $($platform:ident)?, $stage:ident, ($($traits:expr)?), ($($ty:ty),*), $state:expr) => {
        $crate::__private::HandlerInfo {
            target: $target,
            host: $crate::__is_host!($($platform)?),
            stage: $crate::Stage::$stage,
            traits: $crate::__traits!($($traits)?),
            n_args: 0 $(+ <$ty as $crate::Decode>::ARGS)*,
            n_rets: 0 $(+ <$ty as $crate::Decode>::RETS)*,
            state_type_id: $state,
        }
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __decode_and_run {
    ($call:ident, $body:block, $($p:ident : $ty:ty),*) => {{
        $( let $p: Option<$ty> = <$ty as $crate::Decode>::decode($call, stringify!($p)); )*
        $call.finish()?;
        $(
            #[allow(unused_mut)]
            let Some(mut $p) = $p else {
                return Err($crate::Error::internal(concat!("failed to decode ", stringify!($p))));
            };
        )*
        $body
    }};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __is_host {
    () => {
        true
    };
    (host) => {
        true
    };
    (device) => {
        false
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __traits {
    () => {
        $crate::Traits::NONE
    };
    ($t:expr) => {
        $t
    };
}
