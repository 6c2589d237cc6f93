//! The [`handler`] attribute macro, re-exported from `xla-ffi-macros` with its
//! documentation here (where its examples can run).

/// Turns an ordinary Rust function into an XLA FFI handler.
///
/// ```
/// use xla_ffi::{handler, Attr, Buffer, Result, ResultBuffer};
///
/// /// y = k * x, in float32.
/// #[handler(target = "demo.scale")]
/// pub fn demo_scale(x: Buffer<f32>, mut y: ResultBuffer<f32>, k: Attr<f32>) -> Result<()> {
///     y.expect_dims(x.dims(), "the shape of x")?;
///     for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
///         o.write(*k * v);
///     }
///     Ok(())
/// }
///
/// // The descriptor the macro emits beside the function:
/// assert_eq!(DEMO_SCALE.target, "demo.scale");
/// assert_eq!(DEMO_SCALE.symbol, "xla_ffi_handler__demo_scale");
/// let _f: xla_ffi::HandlerFn = DEMO_SCALE.handler.as_raw();
/// ```
///
/// # What it generates
///
/// The function itself stays as written: an ordinary, safe Rust function that tests
/// can call and rustfmt formats. Beside it the macro emits:
///
/// * `const DEMO_SCALE: `[`HandlerDescriptor`](crate::HandlerDescriptor) (the function's
///   name in upper case, or `descriptor = NAME`), with the same visibility: target,
///   stage, platform, traits, symbol name and the exported function pointer. Build
///   registration tables from descriptors ([`bundles`](crate::bundles), or
///   `python::targets` with the `pyo3` feature), never from repeated strings.
/// * inside that const, an `unsafe extern "C"` shim exported unmangled as
///   `xla_ffi_handler__<function name>`, for
///   `ctypes.CDLL(path).xla_ffi_handler__demo_scale`. The shim answers XLA's metadata
///   query, checks the stage, decodes and checks every parameter, then **calls** the
///   function under `catch_unwind`.
///
/// # Exported symbol names
///
/// An exported symbol is global to the process: a handler exported as `write` or
/// `malloc` would replace libc's function in every program that links the crate. So
/// the default name carries the prefix `xla_ffi_handler__` (reserved for handlers;
/// no C library uses it), and safe code cannot choose another. The name is the
/// function's, not its path: two handlers with one function name in one library
/// (`cpu::rms_norm` and `cuda::rms_norm`, as C++ namespaces would have them) are
/// the error "symbol `xla_ffi_handler__rms_norm` is already defined" (in two crates
/// linked into one library, the linker's "duplicate symbol"); name the
/// functions apart (`rms_norm_cpu`, `rms_norm_cuda`), the target may stay the same.
/// A raw name is an unsafe opt-in, as Rust 2024's `#[unsafe(export_name)]` is:
///
/// ```
/// // SAFETY: no other symbol in any program linking this crate is named
/// // `my_project_raw_scale`.
/// #[xla_ffi::handler(target = "demo.raw", unsafe(symbol = "my_project_raw_scale"))]
/// fn demo_raw() {}
/// assert_eq!(DEMO_RAW.symbol, "my_project_raw_scale");
/// ```
///
/// Its contract: no other symbol of the process (C libraries, other crates, other
/// handlers) has that name. `#![forbid(unsafe_code)]` refuses `unsafe(symbol = ...)`,
/// and `symbol = "..."` without `unsafe` is a compile error.
///
/// The body is never pasted into generated code, so it is not an unsafe context: an
/// unsafe operation needs an `unsafe` block, which `#![forbid(unsafe_code)]` refuses.
/// A crate with `#![forbid(unsafe_code)]` can hold handlers.
///
/// # Options
///
/// | option | meaning |
/// |---|---|
/// | `target = "name"` | required (unless `op`): the FFI target name, in every error message |
/// | `platform = host` / `device` | host (CPU) buffers (default), or device (GPU) buffers that are only addresses |
/// | `stage = execute` / `instantiate` / `prepare` / `initialize` / `record` | the stage this symbol serves (default `execute`; `prepare`, `initialize` and `record` run on GPU only, `record` needs FFI API 0.4) |
/// | `traits = expr` | [`Traits`](crate::Traits) reported to XLA, e.g. `Traits::COMMAND_BUFFER_COMPATIBLE` |
/// | `unsafe(symbol = "c_name")` | a raw exported symbol name (default: `xla_ffi_handler__<function name>`); see above |
/// | `descriptor = NAME` | the descriptor const's name (default: the function's name in upper case) |
/// | `crate = "path"` | where `xla_ffi` is, if the dependency is renamed |
/// | `shapes = "..."` | the shape rule, checked before the body (see [below](#declaring-the-op)) |
/// | `dtypes = "..."` | the dtype rule, checked before the body |
/// | `linear = "x, y"` | the operands the op is linear in |
/// | `transpose = "target"` | the target computing the transpose of the linear operands |
/// | `op = PATH` | take the target and all rules from the descriptor at `PATH` (see [below](#one-op-several-handlers)) |
/// | `scratch = "ws"` | with `op`: trailing results outside the referenced rules |
/// | `async` / `async = spawner` | run the function later, on a thread of its own (or the spawner's), completing XLA's future (see [below](#async-handlers)) |
///
/// # Declaring the op
///
/// The descriptor carries the op's [`Declaration`](crate::Declaration): the names and
/// kinds of its operands, results and attributes (always), and the rules given in
/// the attribute. The rules are checked when the crate compiles (notation, one entry
/// per `Buffer` and `ResultBuffer` parameter, `linear` naming operands), and on
/// every call after decoding, before the body: the body can rely on them. The check
/// allocates nothing when the call fits; the rules are parsed once, on the first
/// call. Python gets the same facts from `python::declarations`, and
/// [`decl::infer`](crate::decl::infer) gives the result shapes and dtypes with the
/// same messages.
///
/// ```
/// use xla_ffi::{handler, AnyFloat, Attr, Buffer, Result, ResultBuffer};
///
/// /// RMS normalization over weight's axes: y has x's shape, inv_rms its leading axes.
/// #[handler(
///     target = "demo.rms_norm",
///     shapes = "...b ...n, ...n -> ...b ...n, ...b",
///     dtypes = "X, W -> promote(X, W), acc(X, W)",
/// )]
/// fn demo_rms_norm(
///     x: Buffer<AnyFloat>,
///     weight: Buffer<AnyFloat>,
///     y: ResultBuffer<AnyFloat>,
///     inv_rms: ResultBuffer<AnyFloat>,
///     eps: Attr<f64>,
/// ) -> Result<()> {
///     // No `expect_dims` or `expect_dtype` here: the rules were checked.
///     let _ = (x, weight, y, inv_rms, eps);
///     Ok(())
/// }
///
/// use xla_ffi::decl::infer;
/// use xla_ffi::DataType;
/// let sig = DEMO_RMS_NORM.declaration.signature();
/// let e = infer(&sig, &[vec![2, 4], vec![5]], &[DataType::F32, DataType::F32]).unwrap_err();
/// assert_eq!(e.message, "demo.rms_norm: operand 1 (weight): expected shape [4] (...n of operand 0 (x)), got [5]");
/// ```
///
/// **Shapes**: `specs -> specs`, one comma-separated spec per operand buffer, then
/// one per result buffer. A spec is space-separated tokens:
///
/// * `...name`, an ellipsis: zero or more axes;
/// * `name`, a factor: exactly one axis;
/// * a decimal literal: one axis of that size;
/// * `()` alone: a scalar.
///
/// The same name means the same size(s). The length of each ellipsis comes from
/// the operands: over and over, a spec with one ellipsis of unknown length gets it
/// from its operand's rank, until all are known (a rule where that cannot happen,
/// such as `"...a ...b -> ...a"`, is a compile error). Then each operand, in order,
/// binds the names it shows first and is compared with the names bound before it.
/// Every name of a result spec must appear in an operand spec. The ellipsis that
/// starts the first operand's spec is the *batch* ellipsis (Python vmaps and shards
/// over it).
///
/// **A size may be 0.** A rule relates sizes; it does not bound them. `"...b n -> ...b"`
/// accepts `x` of shape `[3, 0]` (`n = 0`: three empty rows) and `[0, 4]` (no rows),
/// and the body runs (XLA:CPU calls it for JAX's `jnp.zeros((3, 0))`; it may skip a
/// call whose operands and results are all empty). Two things follow
/// for a body that walks rows: `chunks_exact(n)` and `chunks(n)` panic for `n = 0`
/// (an `INTERNAL` error, "handler panicked: chunk size must be non-zero"), and a
/// result that does not shrink with `n` (here `[3]`) still has elements to write, the
/// value of an empty row (0 for a sum) or an error. The body decides:
///
/// ```
/// use xla_ffi::testing::{Arg, CallBuilder};
/// use xla_ffi::{handler, Buffer, Result, ResultBuffer};
///
/// /// The sum of each row (the last axis).
/// #[handler(target = "demo.row_sum", shapes = "...b n -> ...b")]
/// fn demo_row_sum(x: Buffer<f64>, mut y: ResultBuffer<f64>) -> Result<()> {
///     let n = *x.dims().last().expect("the rule gives x rank >= 1") as usize;
///     let y = y.as_uninit()?;
///     if n == 0 {
///         y.iter_mut().for_each(|o| { o.write(0.0); }); // each empty row sums to 0
///         return Ok(());
///     }
///     for (o, row) in y.iter_mut().zip(x.as_slice()?.chunks_exact(n)) {
///         o.write(row.iter().sum());
///     }
///     Ok(())
/// }
///
/// let mut call = CallBuilder::new().arg(Arg::from_slice::<f64>(&[], &[3, 0])).ret(Arg::zeros::<f64>(&[3]));
/// call.run(DEMO_ROW_SUM).unwrap(); // passes the rule: n = 0
/// assert_eq!(call.ret_as::<f64>(0), vec![0.0; 3]);
/// ```
///
/// To refuse empty rows instead, return an error that names the target and operand
/// ([`Buffer::error`](crate::Buffer::error)):
/// `return Err(x.error(format!("expected rows of length >= 1, got shape {:?}", x.dims())))`.
///
/// **Dtypes**: `exprs -> exprs`, one per operand, then one per result, each
/// `VAR | dtype | promote(expr, ...) | acc(expr, ...)`. A dtype is a NumPy,
/// `ml_dtypes` or `jax.numpy` name of an XLA FFI type (`float32`, `bfloat16`, `int64`,
/// `float8_e4m3fn`, `int4`, ...), any other identifier a variable (but Rust's
/// and other spellings of a dtype, `f32`, `Float32`, `double`, are errors, not variables). An
/// operand whose expression is a bare variable binds it (the first such operand);
/// every other operand must have its expression's dtype. `promote` is JAX's
/// promotion of floats (float16 with bfloat16 gives float32, otherwise the wider;
/// [`decl::promote`](crate::decl::promote)), `acc` the accumulator (float64 if any
/// argument is, else float32). The dtypes an operand accepts at all come from its
/// element type (`Buffer<AnyFloat>`, `Buffer<f32>`). Without `dtypes`, nothing
/// relates the dtypes of different buffers. A [`Token`](crate::Token)'s dtype is
/// `token` (and its spec `()`).
///
/// **Optional operands and results** (`Option<Buffer<..>>`, `Option<ResultBuffer<..>>`,
/// trailing): their spec and dtype expression end in `?` (`shapes = "...b n, n? ->
/// ...b n"`, `dtypes = "T, T? -> T"`), in the same places as the `Option`
/// parameters (a compile error otherwise). Optional entries come last on their
/// side, and the rules must hold with any of them left out (`"n, m? -> n m"` is a
/// compile error: without `m` the result is unknown). A call without some of them
/// is checked against the rules without those entries.
///
/// **Rules against the parameter types**: a rule that no call could satisfy with
/// the handler's own parameter types is a compile error on the rule: a dtype the
/// element type does not accept (`dtypes = "float32 -> float32"` on a `Buffer<f64>`),
/// a spec whose number of axes a fixed-rank buffer cannot have (`shapes = "n m -> n m"`
/// on a `Buffer<f64, 1>`; with an ellipsis, fewer axes than the spec's others), or
/// one variable on buffers whose element types share no dtype (`"T, T -> T"` on a
/// `Buffer<f32>` and a `Buffer<f64>`). An any-rank buffer is not checked against a
/// spec, nor an element type that lists no dtypes
/// ([`ElementSpec::DTYPES`](crate::ElementSpec::DTYPES), `None` by default, so list
/// them in your own element sets). Bare variables and fixed dtypes are checked;
/// `promote(...)` and `acc(...)` are not.
///
/// **Errors** name the target, the operand or result and what was expected and got:
/// `"demo.rms_norm: operand 1 (weight): expected shape [4] (...n of operand 0 (x)), got [5]"`,
/// `"k.op: operand 1 (e): expected dtype float64 (T, the dtype of operand 0 (m)), got float32"`.
///
/// **Linearity**: `linear = "dx, dy"` names the operands the op is linear in (a
/// compile error unless each is a `Buffer` parameter), and `transpose = "other.target"`
/// the target that computes its transpose: that target takes the cotangents of this
/// op's results (its own `linear` operands) and this op's non-linear operands
/// (named as here), in any order, and its results are the cotangents of the linear
/// operands (in their order, or named after them: `ct_x` for `x`). Python's
/// `binding.ops` pairs them by these roles and names, and refuses a pair that does
/// not fit, naming both targets.
///
/// # One op, several handlers
///
/// A CUDA handler of an op declared by its CPU handler writes nothing twice:
/// `op = PATH` takes the target, `shapes`, `dtypes`, `linear` and `transpose` from
/// the declaration of the descriptor at `PATH` (giving any of those keys beside `op`
/// is a compile error). The handler must have that declaration's operands, results
/// and attributes, with the same names in the same order; the macro checks it at
/// compile time (so the referenced rules, checked against the referenced
/// parameters, fit these too), and the shim enforces the rules on every call, with
/// the same messages. `scratch = "ws, ..."` names trailing results the referenced op
/// does not have (a workspace): they are left out of the declaration and of the
/// rules, and the body checks them.
///
/// ```
/// use xla_ffi::{handler, AnyFloat, Attr, Buffer, Result, ResultBuffer};
///
/// mod cpu {
///     use xla_ffi::{handler, AnyFloat, Attr, Buffer, Result, ResultBuffer};
///     #[handler(target = "demo.norm", descriptor = NORM_CPU,
///               shapes = "...b ...n, ...n -> ...b ...n", dtypes = "X, W -> promote(X, W)")]
///     pub fn norm_cpu(x: Buffer<AnyFloat>, weight: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>,
///                     eps: Attr<f64>) -> Result<()> {
///         let _ = (x, weight, y, eps);
///         Ok(())
///     }
/// }
///
/// // Same target and rules; `workspace` is outside them.
/// #[handler(op = cpu::NORM_CPU, scratch = "workspace", platform = device, descriptor = NORM_CUDA)]
/// fn norm_cuda(x: Buffer<AnyFloat>, weight: Buffer<AnyFloat>, y: ResultBuffer<AnyFloat>,
///              eps: Attr<f64>, workspace: ResultBuffer<f32, 2>) -> Result<()> {
///     let _ = (x, weight, y, eps, workspace);
///     Ok(())
/// }
///
/// assert_eq!(NORM_CUDA.target, "demo.norm");
/// assert_eq!(NORM_CUDA.declaration.shapes, cpu::NORM_CPU.declaration.shapes);
/// assert_eq!(NORM_CUDA.declaration.results().count(), 1);
/// ```
///
/// A parameter named differently from the one at its place in the referenced
/// declaration, a different number of operands, results or attributes, a `scratch`
/// that is not a result or is followed by a declared result: each is a compile error
/// naming `op` and the parameter.
///
/// # Parameters and return type
///
/// Each parameter's type says what it takes from the call, in order:
/// [`Buffer`](crate::Buffer) (the next operand), [`ResultBuffer`](crate::ResultBuffer)
/// (the next result), `Option<Buffer<..>>` / `Option<ResultBuffer<..>>` (the next
/// operand or result if the call has one more: trailing optional ones, see
/// [`OptionalBuffer`](crate::OptionalBuffer)), [`RemainingArgs`](crate::RemainingArgs) /
/// [`RemainingRets`](crate::RemainingRets) (all the operands or results left),
/// [`Attr<T>`](crate::Attr) (the attribute named like the parameter;
/// `Attr<Option<T>>` when it may be absent; an enum with
/// [`#[derive(AttrEnum)]`](crate::AttrEnum) as `T`), [`Attrs<T>`](crate::Attrs) (all attributes
/// as a struct; `Attrs<Dict>`: the whole dictionary, any attribute accepted), [`Context`](crate::Context), [`State<S>`](crate::State) /
/// [`Prepared<S>`](crate::Prepared) / [`Initialized<S>`](crate::Initialized) (the state
/// an earlier stage created; a later stage's is a compile error),
/// [`UserData<T>`](crate::UserData), or any type
/// implementing [`Decode`](crate::Decode). Parameters may be `mut`. Operand and result
/// counts, dtypes, ranks and attributes are checked before the function runs, and
/// every problem is reported in one `INVALID_ARGUMENT` error naming the target and
/// the operand.
///
/// An execute (or record) handler returns `Result<()>` (any path:
/// `xla_ffi::Result<()>`, `core::result::Result<(), E>` with `E: Into<Error>`) or
/// nothing. An instantiate, prepare or initialize handler returns `Result<S>`
/// where `S` is its [`StateType`](crate::StateType): XLA keeps the state for that
/// stage, and later stages read it as [`State<S>`](crate::State),
/// [`Prepared<S>`](crate::Prepared) or [`Initialized<S>`](crate::Initialized). Or it
/// returns `Result<()>` and keeps none (`ffi.h`'s plain `Error` at that stage: an
/// instantiate handler that only checks the attributes once, when XLA compiles).
///
/// # Async handlers
///
/// With `async`, the shim decodes and checks the call as usual (a bad call is
/// refused at once), copies the descriptions of the call's buffers and its
/// attributes, creates XLA's future and returns: XLA's thread is free, and XLA runs
/// the ops that do not depend on this one. The function itself runs later, on a new
/// thread ([`spawn_thread`](crate::spawn_thread)), or wherever `async = spawner`
/// puts the [`AsyncCall`](crate::AsyncCall) it is given (`spawner` is any
/// `FnOnce(AsyncCall)`: a pool, a callback of an I/O library). The call completes
/// when the function returns: `Ok` completes it, an `Err` (with its code) or a panic
/// (`INTERNAL`) becomes the call's error, and an `AsyncCall` dropped without running
/// is the error "`<target>`: the asynchronous part ended without completing (promise
/// dropped)", never a hang.
///
/// ```
/// use std::time::Duration;
/// use xla_ffi::testing::{Arg, AttrArg, CallBuilder};
/// use xla_ffi::{handler, Attr, Buffer, Result, ResultBuffer};
///
/// /// y = 2x, written after `delay_ms` on a thread of its own.
/// #[handler(target = "demo.slow_double", async)]
/// fn demo_slow_double(x: Buffer<f32>, mut y: ResultBuffer<f32>, delay_ms: Attr<u64>) -> Result<()> {
///     std::thread::sleep(Duration::from_millis(*delay_ms));
///     for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
///         o.write(2.0 * v);
///     }
///     Ok(())
/// }
///
/// let mut call = CallBuilder::new()
///     .arg(Arg::from_slice(&[1.0f32, 2.0], &[2]))
///     .ret(Arg::zeros::<f32>(&[2]))
///     .attr("delay_ms", AttrArg::scalar(100u64));
/// call.run(DEMO_SLOW_DOUBLE).unwrap();
/// assert_eq!(call.pending_at_return(), Some(true)); // it finished after the handler returned
/// assert_eq!(call.ret_as::<f32>(0), vec![2.0, 4.0]);
/// ```
///
/// Why it is sound: XLA keeps the buffers alive, and touches none of the results,
/// until the future completes, which happens only after the function returned. The
/// function is generic over the lifetime of its views, so it can neither keep one
/// (in a static, in state) nor hand one to a thread that outlives the call; both are
/// compile errors. The structures that describe the call (XLA frees or reuses them
/// when the handler returns) are read from the shim's own copies. Parameters that
/// read XLA's execution context ([`Context`](crate::Context), [`State`](crate::State),
/// [`UserData`](crate::UserData)) are refused: that context ends with the handler
/// call. `async` is for host (CPU) handlers at the execute stage.
///
/// # Attribute policy
///
/// Every attribute of a call must be bound by a parameter, so a misspelt keyword
/// (`epsilon=` for `eps`) is an error naming the unknown attribute and listing the
/// ones the handler declares (its `Attr` parameters and `Attrs` fields), with the
/// closest as a guess: "unknown attribute \`epsilon\`; this handler takes: eps (did
/// you mean \`eps\`?)". One exception: a handler with a [`State`](crate::State)
/// parameter may leave attributes unbound. Those are the attributes its instantiate
/// stage consumed; that stage ran at the same call site with the same attributes and
/// is strict, so a misspelt attribute was already refused there.
///
/// ```
/// use xla_ffi::{handler, state_type, Attr, Buffer, Result, ResultBuffer, State};
///
/// struct Factor(f32);
/// state_type!(Factor);
///
/// #[handler(target = "demo.scaled", stage = instantiate)]
/// fn demo_scaled_instantiate(factor: Attr<f32>) -> Result<Factor> {
///     Ok(Factor(*factor))
/// }
///
/// // `factor` is not bound here: the instantiate stage consumed it.
/// #[handler(target = "demo.scaled")]
/// fn demo_scaled(x: Buffer<f32>, mut y: ResultBuffer<f32>, s: State<Factor>) -> Result<()> {
///     for (o, &v) in y.as_uninit()?.iter_mut().zip(x.as_slice()?) {
///         o.write(s.0 * v);
///     }
///     Ok(())
/// }
///
/// let b = xla_ffi::bundles(&[&DEMO_SCALED_INSTANTIATE, &DEMO_SCALED], "cpu").unwrap();
/// assert_eq!(b.len(), 1);
/// assert_eq!(b[0].stages.len(), 2);
/// ```
///
/// # Misuse is a compile error
///
/// `unsafe fn`, `async fn`, `extern "C" fn`, type parameters, `self`, patterns as
/// parameter names, unknown or repeated options, a missing `target`, an instantiate
/// handler without a state, a return value at the execute stage, a raw `symbol`
/// without `unsafe`, a rule that does not parse or does not fit the parameters,
/// `linear` naming anything but an operand, rule keys beside `op` and a signature
/// that differs from `op`'s declaration are all refused with a message that says
/// what to write instead.
///
/// A handler must be a free function (in a module or a block): on an associated
/// function, inside an `impl` block, the exported shim could not call `Self::f`. When
/// the signature shows it (`self`, or `Self` in a type) the macro says "#[handler]
/// must be on a free function"; otherwise the macro's output is refused first with
/// "\`use\` import is not supported in \`trait\`s or \`impl\`s", pointing at
/// `#[handler]` (followed by "cannot find function"). Move the function out of the
/// `impl`.
///
/// # Panics
///
/// A panic in the function (or in decoding) becomes an `INTERNAL` error holding the
/// panic message; it never unwinds into XLA. It is still printed by the panic hook,
/// as every panic is (std's default hook prints to stderr, with a backtrace under
/// `RUST_BACKTRACE=1`). This crate installs no hook, which would change the whole
/// program; set one with [`std::panic::set_hook`] to silence or log handler panics.
/// A `Drop` that panics while a panic is already unwinding aborts the process: that
/// is Rust's rule, and no `catch_unwind` can stop it.
pub use xla_ffi_macros::handler;
