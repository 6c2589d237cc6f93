//! What the [`handler`](crate::handler) attribute macro emits beside a handler: a
//! [`HandlerDescriptor`] (target, stage, platform, traits, exported symbol, function
//! pointer). Registration tables and Python capsule dictionaries are built from
//! descriptors, so a target name is written once, in the attribute.

use crate::decl::Declaration;
use crate::frame::{Stage, Traits};
use crate::{sys, Error, Result};

/// The raw type of an exported handler symbol. Safe code gets one only from a
/// [`Handler`], which only the [`handler`](crate::handler) macro makes.
pub type HandlerFn = unsafe extern "C" fn(*mut sys::XLA_FFI_CallFrame) -> *mut sys::XLA_FFI_Error;

/// Where a handler's buffers live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Platform {
    /// Host (CPU) memory: register with `platform="cpu"`. Buffers can be slices.
    Host,
    /// Device (GPU) memory: register with `platform="CUDA"` (the name XLA's CUDA plugin
    /// listens for; `jax.ffi.register_ffi_target` does not translate `"cuda"`).
    /// Buffers are only addresses.
    Device,
}

impl Platform {
    /// Whether this handler belongs under JAX's platform name `platform`
    /// (`"cpu"`/`"host"` for [`Platform::Host`], anything else for [`Platform::Device`]).
    pub fn matches(self, platform: &str) -> bool {
        let host = matches!(platform.to_ascii_lowercase().as_str(), "cpu" | "host");
        host == (self == Platform::Host)
    }
}

impl Stage {
    /// The stage's key in a JAX handler bundle: `"instantiate"`, `"prepare"`,
    /// `"initialize"`, `"execute"` or `"record"`.
    pub fn key(self) -> &'static str {
        match self {
            Stage::Instantiate => "instantiate",
            Stage::Prepare => "prepare",
            Stage::Initialize => "initialize",
            Stage::Execute => "execute",
            Stage::Record => "record",
        }
    }
}

/// One exported handler, as the [`handler`](crate::handler) macro describes it.
///
/// `#[handler(target = "my.op")] fn my_op(...)` emits `const MY_OP: HandlerDescriptor`.
/// Group descriptors by [`target`](Self::target) to register a stage bundle; see
/// [`bundles`] and, with the `pyo3` feature, `python::targets`.
///
/// It is `#[non_exhaustive]`: read its fields, but only the macro makes one (so that
/// a new field is not a breaking change).
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub struct HandlerDescriptor {
    /// The FFI target name (`jax.ffi.ffi_call(target, ...)`).
    pub target: &'static str,
    /// The stage this symbol serves.
    pub stage: Stage,
    /// Host or device buffers.
    pub platform: Platform,
    /// The traits reported to XLA.
    pub traits: Traits,
    /// The name of the exported C symbol (for `ctypes.CDLL(path).<symbol>`).
    pub symbol: &'static str,
    /// The exported function itself.
    pub handler: Handler,
    /// The op's declaration: operand, result and attribute names and kinds, and the
    /// rules given to the macro (`shapes`, `dtypes`, `linear`, `transpose`).
    pub declaration: &'static Declaration,
}

impl HandlerDescriptor {
    #[doc(hidden)]
    pub const fn __new(
        target: &'static str,
        stage: Stage,
        platform: Platform,
        traits: Traits,
        symbol: &'static str,
        handler: Handler,
        declaration: &'static Declaration,
    ) -> Self {
        HandlerDescriptor { target, stage, platform, traits, symbol, handler, declaration }
    }
}

/// An exported handler function that keeps the contract XLA relies on: given a call
/// frame, it returns null or an error this crate made, and never unwinds.
///
/// Only the [`handler`](crate::handler) macro makes one (or `unsafe`
/// [`from_raw`](Self::from_raw)), so every safe function that hands a handler to XLA
/// or to [`testing`](crate#features) takes a `Handler` (or a descriptor), never a bare
/// function pointer: a safe `extern "C" fn` of the same signature that returned a
/// dangling error pointer would otherwise be called as one.
#[derive(Clone, Copy, Debug)]
pub struct Handler(HandlerFn);

impl Handler {
    /// Wraps a raw handler function.
    ///
    /// # Safety
    /// `f` must behave as XLA requires of a handler for every call frame XLA (or
    /// `testing`) passes it: return null or a pointer to an `XLA_FFI_Error` made by the
    /// frame's API, and never unwind.
    #[doc(hidden)]
    pub const unsafe fn from_raw(f: HandlerFn) -> Self {
        Handler(f)
    }
    /// The raw function pointer (calling it is `unsafe`).
    pub const fn as_raw(self) -> HandlerFn {
        self.0
    }
}

/// One FFI target's stage bundle, built from descriptors by [`bundles`].
#[derive(Clone, Debug)]
pub struct Bundle {
    /// The FFI target name.
    pub target: &'static str,
    /// `(stage, handler)` pairs, in the order given.
    pub stages: Vec<(Stage, Handler)>,
}

impl Bundle {
    /// The execute handler, when the bundle is only that (register it as a plain
    /// capsule rather than a dictionary).
    pub fn execute_only(&self) -> Option<Handler> {
        match self.stages.as_slice() {
            [(Stage::Execute, f)] => Some(*f),
            _ => None,
        }
    }
}

/// Groups the descriptors of `platform` (JAX's name: `"cpu"`, `"cuda"`, ...) by
/// target, in order of first appearance.
///
/// Fails if a target has no execute stage (XLA would refuse it) or two handlers for
/// one stage.
///
/// ```
/// use xla_ffi::{bundles, handler, Buffer, ResultBuffer, Result};
///
/// #[handler(target = "demo.copy")]
/// fn demo_copy(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
///     y.expect_dims(x.dims(), "the shape of x")?;
///     for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
///         o.write(v);
///     }
///     Ok(())
/// }
///
/// let b = bundles(&[&DEMO_COPY], "cpu").unwrap();
/// assert_eq!(b[0].target, "demo.copy");
/// assert!(b[0].execute_only().is_some());
/// assert!(bundles(&[&DEMO_COPY], "cuda").unwrap().is_empty());
/// ```
pub fn bundles(handlers: &[&HandlerDescriptor], platform: &str) -> Result<Vec<Bundle>> {
    let mut out: Vec<Bundle> = Vec::new();
    for h in handlers.iter().filter(|h| h.platform.matches(platform)) {
        let i = match out.iter().position(|b| b.target == h.target) {
            Some(i) => i,
            None => {
                out.push(Bundle { target: h.target, stages: Vec::new() });
                out.len() - 1
            }
        };
        if out[i].stages.iter().any(|(s, _)| *s == h.stage) {
            return Err(Error::invalid_argument(format!(
                "{}: two handlers for the {} stage (symbol {})",
                h.target,
                h.stage.key(),
                h.symbol
            )));
        }
        out[i].stages.push((h.stage, h.handler));
    }
    if let Some(b) = out.iter().find(|b| !b.stages.iter().any(|(s, _)| *s == Stage::Execute)) {
        return Err(Error::invalid_argument(format!("{}: no execute handler among the descriptors", b.target)));
    }
    Ok(out)
}

/// What a handler function may return: `Result<T, E>` with `E: Into<Error>`
/// (`T = ()` for execute handlers, the state for instantiate handlers), or `()`.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a handler returns `xla_ffi::Result<T>` (any `Result<T, E>` with `E: Into<xla_ffi::Error>`) or `()`, not `{Self}`",
    label = "not a handler return type"
)]
pub trait HandlerReturn {
    /// `T`.
    type Output;
    /// The value as this crate's `Result`.
    fn into_result(self) -> Result<Self::Output>;
}

impl HandlerReturn for () {
    type Output = ();
    fn into_result(self) -> Result<()> {
        Ok(())
    }
}

impl<T, E: Into<Error>> HandlerReturn for core::result::Result<T, E> {
    type Output = T;
    fn into_result(self) -> Result<T> {
        self.map_err(Into::into)
    }
}

/// The return types allowed at the execute (prepare, initialize) stages.
#[doc(hidden)]
#[diagnostic::on_unimplemented(
    message = "a handler at the execute stage returns `xla_ffi::Result<()>` or `()`, not `{Self}`",
    label = "only handlers at the instantiate, prepare or initialize stage return a value (a state)"
)]
pub trait ExecuteReturn {}
impl ExecuteReturn for () {}
impl<E: Into<Error>> ExecuteReturn for core::result::Result<(), E> {}

#[doc(hidden)]
#[inline(always)]
pub fn assert_execute_return<R: ExecuteReturn>() {}

/// The error when a [`Decode`](crate::Decode) implementation returned `None`
/// without recording a problem (only a third-party implementation can).
#[doc(hidden)]
#[cold]
pub fn undecoded(target: &str, names: &[&str]) -> Error {
    Error::internal(format!(
        "{target}: a parameter decoder returned no value and no reason (parameters: {}); \
         a `Decode` implementation must call `Call::problem` when it returns None",
        names.join(", ")
    ))
}

impl From<HandlerDescriptor> for Handler {
    fn from(d: HandlerDescriptor) -> Handler {
        d.handler
    }
}

impl From<&HandlerDescriptor> for Handler {
    fn from(d: &HandlerDescriptor) -> Handler {
        d.handler
    }
}
