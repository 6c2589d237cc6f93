//! Per-execution user data: values the embedder of XLA puts into a run's execution
//! context (`xla::ffi::ExecutionContext`), keyed by a registered type id, read by
//! handlers as `&T` (`ffi.h`'s `UserData<T>`).
//!
//! The type is declared and registered like a state type ([`state_type!`](crate::state_type),
//! then `jax.ffi.register_ffi_type`), so its id belongs to `T` alone: safe code
//! cannot read data stored under one type's id as another type (see
//! [`TypeRegistration`](crate::TypeRegistration)). That the data stored under `T`'s
//! id is a `T` is the embedder's promise to XLA, as for state.

use crate::call::{Call, Decode};
use crate::context::Context;
use crate::error::{Error, Result};
use crate::state::StateType;

/// A handler parameter: the user data of type `T` in this run's execution context,
/// as `&T`.
///
/// `T` is declared with [`state_type!`](crate::state_type) (it must be `Send + Sync`)
/// and registered with XLA. Missing data, or an unregistered type, is an
/// `INVALID_ARGUMENT` error naming the target and the parameter, reported with
/// every other decoding problem. [`Context::user_data`] reads it inside the body.
///
/// JAX's Python API does not set user data (an embedder in C++ does, through
/// `ExecutionContext::Insert`), so the example runs on a synthetic frame:
///
/// ```
/// use xla_ffi::testing::{register_state_type, Arg, CallBuilder};
/// use xla_ffi::{handler, state_type, Result, ResultBuffer, UserData};
///
/// /// Set by the embedder for each run.
/// struct Offset(f32);
/// state_type!(Offset);
///
/// #[handler(target = "demo.offset")]
/// fn demo_offset(offset: UserData<Offset>, mut y: ResultBuffer<f32>) -> Result<()> {
///     for o in y.as_uninit()? {
///         o.write(offset.0);
///     }
///     Ok(())
/// }
///
/// register_state_type::<Offset>(41); // as jax.ffi.register_ffi_type does
/// let mut call = CallBuilder::new().user_data(Offset(2.5)).ret(Arg::zeros::<f32>(&[2]));
/// call.run(DEMO_OFFSET).unwrap();
/// assert_eq!(call.ret_as::<f32>(0), vec![2.5, 2.5]);
/// ```
pub struct UserData<'f, T: StateType> {
    data: &'f T,
}

impl<T: StateType> core::ops::Deref for UserData<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.data
    }
}

impl<'f> Context<'f> {
    /// The user data of type `T` in this run's execution context (see [`UserData`]).
    ///
    /// Errors: `FAILED_PRECONDITION` when `T` is not registered with XLA;
    /// `NOT_FOUND` when the run holds none of that type; otherwise the runtime's own
    /// error, with its code, prefixed by the target.
    pub fn user_data<T: StateType>(&self) -> Result<&'f T> {
        let id = T::registration().type_id();
        if id == 0 {
            return Err(Error::failed_precondition(format!(
                "{}: user data of type `{}`: the type is not registered with XLA (call jax.ffi.register_ffi_type first)",
                self.target,
                core::any::type_name::<T>()
            )));
        }
        let p = self.user_data_ptr(id)?;
        if p.is_null() {
            return Err(Error::new(
                crate::ErrorCode::NotFound,
                format!("{}: no user data of type `{}` in this run", self.target, core::any::type_name::<T>()),
            ));
        }
        // SAFETY: XLA returns the data its embedder stored under `T`'s registered id,
        // which only `T`'s own record carries (`TypeRegistration<T>`), so it is a
        // `T`; the execution context keeps it alive for the whole run, so beyond this
        // call; only shared references are made (`T: Sync`).
        Ok(unsafe { &*(p as *const T) })
    }
}

impl<'f, T: StateType> Decode<'f> for UserData<'f, T> {
    const NEEDS_CONTEXT: bool = true;
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        let ctx = Context::of(call, name)?;
        match ctx.user_data::<T>() {
            Ok(data) => Some(UserData { data }),
            Err(e) => {
                let target = call.target();
                let why = e.message().strip_prefix(target).unwrap_or(e.message()).trim_start_matches(": ");
                call.problem(format!("{target}: user data `{name}`: {why}"));
                None
            }
        }
    }
}

impl<T: StateType + core::fmt::Debug> core::fmt::Debug for UserData<'_, T> {
    /// The value, as `T` shows it (a `UserData` is a `&T`).
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("UserData").field(self.data).finish()
    }
}
