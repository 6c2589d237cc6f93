//! Typed views of XLA's buffers: [`Buffer`] for operands, [`ResultBuffer`] for results.
//!
//! Two facts of XLA shape this API:
//! * **Results arrive uninitialised.** A result is only ever handed out as
//!   `&mut [MaybeUninit<T>]`, so safe code cannot read stale memory.
//! * **An operand may alias a result** (`input_output_aliases`). An operand that
//!   overlaps any result is never handed out as `&[T]`, and a result that overlaps
//!   any operand never as `&mut [MaybeUninit<T>]`; [`ResultBuffer::with_input`] gives
//!   the aliased pair as one `&mut [T]` instead (the memory then holds the input's
//!   values, so it is initialised).
//!
//! Device (GPU) buffers are never handed out as slices at all: only their address,
//! for a kernel launch.

use core::ffi::c_void;
use core::fmt;
use core::marker::PhantomData;
use core::mem::MaybeUninit;

use crate::alias::{byte_range, element_count, Aliases, EMPTY, EVERYWHERE};
use crate::call::{Call, Decode};
use crate::decl::{BufferBounds, ParamDecl};
use crate::dtype::{DataType, Element};
use crate::error::{Error, Result};
use crate::frame::Slot;
use crate::raw::BufferEntry;
use crate::site::{Role, Site};

/// The rank parameter that means "any rank".
pub const ANY_RANK: usize = usize::MAX;

/// What a buffer parameter accepts: one constant per parameter type, so that a
/// refusal passes one address instead of three values.
struct Spec {
    accepts: fn(DataType) -> bool,
    describe: fn() -> String,
    rank: usize,
}

impl Spec {
    const fn of<D: ElementSpec, const R: usize>() -> Spec {
        Spec { accepts: D::accepts, describe: D::describe, rank: R }
    }
}

/// What element types a buffer parameter accepts: one [`Element`] type (checked at
/// decode time), [`AnyFloat`], [`AnyComplex`], or [`AnyType`].
pub trait ElementSpec: 'static {
    /// Whether a buffer of this dtype is accepted.
    fn accepts(dtype: DataType) -> bool;
    /// The accepted types, for messages: `float32`, `float16, bfloat16, float32 or float64`.
    fn describe() -> String;
    /// The accepted dtypes, known at compile time: exactly those for which
    /// [`accepts`](ElementSpec::accepts) is true, or `None` (the default) for a spec
    /// that does not list them. The [`handler`](crate::handler) macro checks a declared
    /// dtype rule against them: `dtypes = "float32 -> float32"` on a `Buffer` of a spec
    /// without `float32` is a compile error. A spec that lists none is not checked.
    ///
    /// ```
    /// use xla_ffi::{DataType, ElementSpec};
    ///
    /// /// `float32` or `float64`.
    /// pub struct F32OrF64;
    ///
    /// impl ElementSpec for F32OrF64 {
    ///     fn accepts(dtype: DataType) -> bool {
    ///         dtype == DataType::F32 || dtype == DataType::F64
    ///     }
    ///     fn describe() -> String {
    ///         "float32 or float64".into()
    ///     }
    ///     const DTYPES: Option<&'static [DataType]> = Some(&[DataType::F32, DataType::F64]);
    /// }
    /// ```
    const DTYPES: Option<&'static [DataType]> = None;
}

impl<T: Element> ElementSpec for T {
    const DTYPES: Option<&'static [DataType]> = Some(&[T::DTYPE]);
    fn accepts(dtype: DataType) -> bool {
        dtype == T::DTYPE
    }
    fn describe() -> String {
        T::DTYPE.to_string()
    }
}

/// Accepts `f16`, `bf16`, `f32` and `f64` ([`DataType::FLOATS`]); pair it with
/// [`dispatch_float!`](crate::dispatch_float) to run one generic function.
#[derive(Debug, Clone, Copy)]
pub struct AnyFloat;

impl ElementSpec for AnyFloat {
    const DTYPES: Option<&'static [DataType]> = Some(&DataType::FLOATS);
    fn accepts(dtype: DataType) -> bool {
        dtype.is_float()
    }
    fn describe() -> String {
        crate::dtype::describe(&DataType::FLOATS)
    }
}

/// Accepts `complex64` and `complex128`; pair it with
/// [`dispatch_complex!`](crate::dispatch_complex) to run one generic function over
/// `Complex<f32>` and `Complex<f64>`.
#[derive(Debug, Clone, Copy)]
pub struct AnyComplex;

impl ElementSpec for AnyComplex {
    const DTYPES: Option<&'static [DataType]> = Some(&DataType::COMPLEXES);
    fn accepts(dtype: DataType) -> bool {
        dtype.is_complex()
    }
    fn describe() -> String {
        crate::dtype::describe(&DataType::COMPLEXES)
    }
}

/// Accepts any element type.
#[derive(Debug, Clone, Copy)]
pub struct AnyType;

impl ElementSpec for AnyType {
    fn accepts(_: DataType) -> bool {
        true
    }
    fn describe() -> String {
        "any type".into()
    }
}

/// The parts of a decoded buffer, shared by operands and results.
///
/// Kept small (56 bytes): the handler's views are built on every call and stored
/// where the handler body takes their address. XLA's buffer struct is reached through
/// one pointer (its dtype, address and dims read when asked for), what one call
/// shares (frame, target, the alias table) through another, and the byte range and
/// [`Site`] are worked out when asked for.
#[derive(Clone, Copy)]
struct RawBuffer<'f> {
    /// XLA's buffer struct, checked well-formed by decoding.
    entry: BufferEntry<'f>,
    len: usize,
    /// Position among the operands or among the results.
    index: usize,
    /// The parameter's name, for messages.
    name: &'static str,
    /// The call's frame, target and alias table.
    aliases: &'f Aliases<'f>,
    role: Role,
}

// Its size is part of the per-call cost: keep it from growing unnoticed.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(core::mem::size_of::<RawBuffer<'static>>() == 56);

/// Results smaller than this are never advised (see [`ResultBuffer::advise_huge_pages`]):
/// one 2 MiB page, the least that can hold a whole aligned huge page. A result of
/// 2 to 4 MiB holds one or none, depending on where it starts; one saves about 500
/// faults on fresh memory (a 1e6-element `f32` result, 4,000,000 bytes, took 977
/// faults on fresh pages without the advice), against one `madvise` call.
pub const HUGE_PAGE_MIN_BYTES: usize = 2 << 20;

#[cfg(target_os = "linux")]
fn advise_huge_pages((start, end): (usize, usize)) -> bool {
    const HUGE: usize = 2 << 20;
    // EMPTY and EVERYWHERE start at 0, where no buffer lives.
    if start == 0 || end - start < HUGE_PAGE_MIN_BYTES {
        return false;
    }
    let (lo, hi) = (start.next_multiple_of(HUGE), end / HUGE * HUGE);
    if lo >= hi {
        return false;
    }
    // SAFETY: `[lo, hi)` lies inside a buffer this call owns for its duration;
    // MADV_HUGEPAGE only sets a flag on the mapping (how future faults are served)
    // and never changes or frees memory, so no reference is invalidated.
    unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn advise_huge_pages(_: (usize, usize)) -> bool {
    false
}

/// The element count of `dims`, if it and its size in bytes fit in `isize`.
#[inline(always)]
fn checked_len(dims: &[i64], dtype: DataType) -> Option<usize> {
    let len = element_count(dims)?;
    let bytes = len.checked_mul(dtype.byte_width().unwrap_or(1))?;
    (bytes <= isize::MAX as usize).then_some(len)
}

/// [`checked_len`] and then [`byte_range`], with the element width looked up once:
/// the element count and the bytes covered, or `None` where either is.
#[inline(always)]
fn len_and_range(data: *mut c_void, dims: &[i64], dtype: DataType) -> Option<(usize, (usize, usize))> {
    let len = element_count(dims)?;
    let Some(width) = dtype.byte_width() else {
        // `checked_len` counts a byte per element; `byte_range` covers everything.
        return (len <= isize::MAX as usize).then_some((len, if len == 0 { EMPTY } else { EVERYWHERE }));
    };
    // The common case, one compare for every overflow: no element is wider than
    // `MAX_BYTE_WIDTH` (16 bytes), so at most `isize::MAX / 16` elements take at most
    // `isize::MAX` bytes, and an address and such a size, both below 2^63, add without
    // wrapping; the end (and so the start) fits in `isize` when its sign bit is clear.
    if len <= isize::MAX as usize / crate::dtype::MAX_BYTE_WIDTH {
        let bytes = len * width;
        if bytes == 0 {
            return Some((len, EMPTY));
        }
        let start = data as usize;
        let end = start.wrapping_add(bytes);
        return ((start | end) <= isize::MAX as usize).then_some((len, (start, end)));
    }
    let bytes = len.checked_mul(width).filter(|&b| b <= isize::MAX as usize)?;
    if bytes == 0 {
        return Some((len, EMPTY));
    }
    let start = data as usize;
    let end = start.checked_add(bytes).filter(|&end| end <= isize::MAX as usize)?;
    Some((len, (start, end)))
}

impl<'f> RawBuffer<'f> {
    /// The checked buffer at `(role, index)`, or `None` after recording why not.
    ///
    /// The accepting path is inlined into each handler (so the decoded view is built
    /// in place, not copied through memory); every diagnostic lives in the cold
    /// [`RawBuffer::reject`], called with few arguments so that the accepting path's
    /// code stays together.
    #[inline(always)]
    fn decode(
        call: &mut Call<'f>,
        (role, index, name): (Role, usize, &'static str),
        spec: &'static Spec,
    ) -> Option<Self> {
        let frame = call.frame;
        if let Slot::Buffer(b) = frame.buffer(role, index) {
            let (dtype, data, dims) = (b.dtype(), b.data(), b.dims());
            if (spec.accepts)(dtype) && (spec.rank == ANY_RANK || dims.len() == spec.rank) {
                if let Some((len, range)) = len_and_range(data, dims, dtype) {
                    call.record_buffer(role, index, range, dtype, dims);
                    let aliases = call.aliases;
                    return Some(RawBuffer { entry: b, len, index, name, aliases, role });
                }
            }
        }
        // Scalar arguments (in registers), not a tuple, and not the `Call`: either would
        // make the accepting path keep them in memory for this cold call's sake.
        Self::reject(call.aliases, (role, index), name, spec);
        None
    }

    /// Records every reason the buffer at `(role, index)` was refused.
    #[cold]
    #[inline(never)]
    fn reject(aliases: &Aliases<'f>, (role, index): (Role, usize), name: &'static str, spec: &'static Spec) {
        let site = Site { target: aliases.target, role, index, name };
        let (accepts, describe, rank) = (spec.accepts, spec.describe, spec.rank);
        let (dtype, data, dims) = match aliases.frame.buffer(site.role, site.index) {
            Slot::Buffer(b) => (b.dtype(), b.data(), b.dims()),
            Slot::Missing => return aliases.add_problem(format!("{site}: missing")),
            Slot::Kind(kind) => {
                return aliases.add_problem(format!("{site}: expected a buffer, got XLA argument kind {kind}"));
            }
            Slot::Malformed => return aliases.add_problem(format!("{site}: malformed XLA_FFI_Buffer")),
        };
        if !accepts(dtype) {
            aliases.add_problem(format!("{site}: expected dtype {}, got {dtype}", describe()));
        }
        if rank != ANY_RANK && dims.len() != rank {
            aliases.add_problem(format!("{site}: expected rank {rank}, got rank {} (shape {dims:?})", dims.len()));
        }
        match checked_len(dims, dtype) {
            None => aliases.add_problem(format!("{site}: invalid shape {dims:?}")),
            Some(len) if byte_range(data, len, dtype).is_none() => {
                aliases.add_problem(format!("{site}: data pointer {data:p} plus its size runs past the address space"))
            }
            Some(_) => {}
        }
    }

    /// The element type.
    #[inline(always)]
    fn dtype(&self) -> DataType {
        self.entry.dtype()
    }

    /// The address of the elements.
    #[inline(always)]
    fn data(&self) -> *mut c_void {
        self.entry.data()
    }

    /// The dimensions, row-major.
    #[inline(always)]
    fn dims(&self) -> &'f [i64] {
        self.entry.dims()
    }

    /// The bytes it covers (see [`byte_range`]; `decode` checked that there is a range).
    #[inline(always)]
    fn range(&self) -> (usize, usize) {
        byte_range(self.data(), self.len, self.dtype()).unwrap_or(EVERYWHERE)
    }

    /// Where this buffer sits in the call, for messages.
    fn site(&self) -> Site {
        Site { target: self.aliases.target, role: self.role, index: self.index, name: self.name }
    }

    /// The first buffer that shares memory with this one (see [`Aliases::aliased_by`]).
    #[inline(always)]
    fn aliased_by(&self, operands: bool) -> Option<(Role, usize)> {
        self.aliases.aliased_by((self.role, self.index), self.range(), operands)
    }

    #[inline(always)]
    fn check_host_access<T: Element>(&self) -> Result<()> {
        self.check_access::<T>(true)
    }

    /// Host memory, dtype `T`, aligned, and no overlap with another buffer (operands
    /// left out of that when `operands` is false).
    ///
    /// The accepting path is a few compares, inlined into the caller; the reasons for
    /// a refusal are worked out, in order, by the cold [`RawBuffer::access_error`].
    #[inline(always)]
    fn check_access<T: Element>(&self, operands: bool) -> Result<()> {
        let align = core::mem::align_of::<T>();
        let aligned = !self.data().is_null() && (self.data() as usize) & (align - 1) == 0;
        // Decoding found every buffer of the call in host memory, each apart from the
        // others: only the dtype and alignment are left.
        if self.dtype() == T::DTYPE && self.aliases.is_clean() && aligned {
            return Ok(());
        }
        // By value (a copy made on the cold path): a `&self` call would make the
        // caller keep every view in memory, in one piece, on the accepting path too.
        RawBuffer::check_access_slow::<T>(*self, operands)
    }

    /// [`RawBuffer::check_access`] when the call is not clean (aliased buffers, a
    /// device frame, buffers not all decoded) or the data pointer is null or
    /// misaligned: every check, in full. Cold: out of the accepting path's way.
    #[cold]
    #[inline(never)]
    fn check_access_slow<T: Element>(self, operands: bool) -> Result<()> {
        let align = core::mem::align_of::<T>();
        let aligned = self.len == 0 || (!self.data().is_null() && (self.data() as usize).is_multiple_of(align));
        if self.frame_is_host() && self.dtype() == T::DTYPE && aligned && self.aliased_by(operands).is_none() {
            return Ok(());
        }
        Err(self.access_error(T::DTYPE, align, operands))
    }

    /// Why [`RawBuffer::check_access`] refused.
    #[cold]
    #[inline(never)]
    fn access_error(&self, dtype: DataType, align: usize, operands: bool) -> Error {
        match self.access_problem(dtype, align, operands) {
            Err(e) => e,
            Ok(()) => Error::internal(format!("{}: access refused for no reason found", self.site())),
        }
    }

    fn access_problem(&self, dtype: DataType, align: usize, operands: bool) -> Result<()> {
        if !self.frame_is_host() {
            return Err(self
                .site()
                .error("a device buffer cannot be read or written on the host; pass its address to a kernel"));
        }
        if self.dtype() != dtype {
            return Err(self.site().error(format!("is {}, not {dtype}", self.dtype())));
        }
        if self.len > 0 && self.data().is_null() {
            return Err(self.site().error(format!("null data pointer for {} elements", self.len)));
        }
        if self.len > 0 && !(self.data() as usize).is_multiple_of(align) {
            return Err(self.site().error(format!("data pointer {:p} is not aligned to {align} bytes", self.data())));
        }
        if let Some((role, i)) = self.aliased_by(operands) {
            // An operand and a result may share memory (`input_output_aliases`), and
            // `ResultBuffer::with_input` reads such a pair; two results never may.
            let why = if role == self.role {
                "two results cannot share memory"
            } else {
                "input_output_aliases; use ResultBuffer::with_input"
            };
            return Err(self.site().error(format!("shares memory with {role} {i} ({why})")));
        }
        Ok(())
    }

    /// Host memory of a type with a byte width, and no overlap with another buffer:
    /// what a view of the raw bytes needs.
    fn check_byte_access(&self) -> Result<usize> {
        if !self.frame_is_host() {
            return Err(self
                .site()
                .error("a device buffer cannot be read or written on the host; pass its address to a kernel"));
        }
        // Tokens have no data, and sub-byte integers may be packed several to a byte:
        // neither has one byte range per element to hand out.
        let packed = matches!(
            self.dtype(),
            DataType::TOKEN | DataType::S4 | DataType::U4 | DataType::S2 | DataType::U2 | DataType::S1 | DataType::U1
        );
        let Some(width) = self.dtype().byte_width().filter(|_| !packed) else {
            return Err(self.site().error(format!("{} has no byte representation", self.dtype())));
        };
        if self.len > 0 && self.data().is_null() {
            return Err(self.site().error("null data pointer"));
        }
        if let Some((role, i)) = self.aliased_by(true) {
            return Err(self.site().error(format!("shares memory with {role} {i} (input_output_aliases)")));
        }
        Ok(self.len * width)
    }

    #[inline(always)]
    fn frame_is_host(&self) -> bool {
        self.aliases.frame.host
    }

    #[cold]
    #[inline(never)]
    fn dims_error(&self, dims: &[i64], what: &dyn fmt::Display) -> Error {
        self.site().error(format!("expected shape {dims:?} ({what}), got {:?}", self.dims()))
    }

    #[cold]
    #[inline(never)]
    fn dtype_error(&self, dtype: DataType, what: &dyn fmt::Display) -> Error {
        self.site().error(format!("expected dtype {dtype} ({what}), got {}", self.dtype()))
    }
}

/// Whether two shapes are equal: an element loop, cheaper than `memcmp` for the few
/// dimensions a shape has.
#[inline(always)]
fn same_dims(a: &[i64], b: &[i64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

macro_rules! common_methods {
    () => {
        /// Whether the buffer is host memory: true in a call on the host (XLA:CPU),
        /// false in a device call, whose buffers hold device addresses that the
        /// byte and element views refuse. Answers without checking anything else
        /// (dtype, alignment, aliasing), so a view can still fail when this is true.
        pub fn on_host(&self) -> bool {
            self.raw.frame_is_host()
        }
        /// The element type.
        pub fn dtype(&self) -> DataType {
            self.raw.dtype()
        }
        /// The dimensions, row-major (empty for a scalar).
        pub fn dims(&self) -> &'f [i64] {
            self.raw.dims()
        }
        /// The number of dimensions.
        pub fn rank(&self) -> usize {
            self.raw.dims().len()
        }
        /// The number of elements (1 for a scalar, 0 if any dimension is 0).
        pub fn len(&self) -> usize {
            self.raw.len
        }
        /// Whether there are no elements.
        pub fn is_empty(&self) -> bool {
            self.raw.len == 0
        }
        /// The size in bytes (0 for types without a byte width, such as tokens).
        pub fn size_bytes(&self) -> usize {
            self.raw.len * self.raw.dtype().byte_width().unwrap_or(0)
        }
        /// Where this buffer sits in the call, for error messages.
        pub fn site(&self) -> Site {
            self.raw.site()
        }
        /// An `INVALID_ARGUMENT` error that names this buffer.
        pub fn error(&self, message: impl fmt::Display) -> Error {
            self.raw.site().error(message)
        }
        /// Fails unless the shape is exactly `dims`; `what` says where `dims` came from.
        #[inline]
        pub fn expect_dims(&self, dims: &[i64], what: impl fmt::Display) -> Result<()> {
            if same_dims(self.raw.dims(), dims) {
                Ok(())
            } else {
                Err(self.raw.dims_error(dims, &what))
            }
        }
        /// Fails unless the element type is `dtype`; `what` says why.
        #[inline]
        pub fn expect_dtype(&self, dtype: DataType, what: impl fmt::Display) -> Result<()> {
            if self.raw.dtype() == dtype {
                Ok(())
            } else {
                Err(self.raw.dtype_error(dtype, &what))
            }
        }
    };
}

/// An operand (input buffer) of element spec `D` and rank `R`.
///
/// `Buffer<'f, f32>` accepts only `float32`; `Buffer<'f, AnyFloat>` any float type;
/// `Buffer<'f, f64, 2>` only rank-2 `float64`. The checks run when the call is
/// decoded, and a mismatch names the operand:
/// `my.target: operand 1 (weight): expected dtype float32, got int32`.
pub struct Buffer<'f, D: ElementSpec = AnyType, const R: usize = ANY_RANK> {
    raw: RawBuffer<'f>,
    _spec: PhantomData<D>,
}

impl<'f, D: ElementSpec, const R: usize> Buffer<'f, D, R> {
    common_methods!();

    /// The elements as `&[T]`, row-major.
    ///
    /// Fails if `T` is not the buffer's dtype, if the buffer lives on a device, if
    /// its pointer is misaligned for `T`, or if it shares memory with a result.
    #[inline]
    pub fn typed<T: Element>(&self) -> Result<&'f [T]> {
        self.raw.check_host_access::<T>()?;
        if self.raw.len == 0 {
            return Ok(&[]);
        }
        // SAFETY: checked above: host memory, dtype T, aligned, non-null, `len`
        // elements that XLA initialised and keeps alive for the call, and no result
        // (the only memory anyone may write during the call) overlaps it.
        Ok(unsafe { core::slice::from_raw_parts(self.raw.data() as *const T, self.raw.len) })
    }

    /// The raw bytes, row-major, whatever the element type (for a handler that only
    /// moves or hands on memory, e.g. to Python).
    ///
    /// Fails if the buffer lives on a device, if its type has no byte width (a
    /// token), or if it shares memory with a result.
    pub fn as_bytes(&self) -> Result<&'f [u8]> {
        let bytes = self.raw.check_byte_access()?;
        if bytes == 0 {
            return Ok(&[]);
        }
        // SAFETY: checked above: host memory, non-null, `bytes` bytes that XLA
        // initialised and keeps alive for the call, and no result overlaps it; u8
        // needs no alignment.
        Ok(unsafe { core::slice::from_raw_parts(self.raw.data() as *const u8, bytes) })
    }

    /// The buffer's address: a device pointer for a GPU handler. Reading through it
    /// on the host is up to you.
    pub fn as_ptr(&self) -> *const c_void {
        self.raw.data()
    }
}

impl<'f, T: Element, const R: usize> Buffer<'f, T, R> {
    /// The elements as `&[T]`; see [`Buffer::typed`].
    pub fn as_slice(&self) -> Result<&'f [T]> {
        self.typed::<T>()
    }
}

/// A result (output buffer) of element spec `D` and rank `R`.
///
/// Its memory is uninitialised when the handler starts: write every element.
pub struct ResultBuffer<'f, D: ElementSpec = AnyType, const R: usize = ANY_RANK> {
    raw: RawBuffer<'f>,
    _spec: PhantomData<D>,
}

/// An output and the input it may alias, as [`ResultBuffer::with_input`] returns them.
pub enum InOut<'a, T> {
    /// Separate memory: read `input`, write `output`.
    Separate {
        /// The input's elements.
        input: &'a [T],
        /// The output, uninitialised.
        output: &'a mut [MaybeUninit<T>],
    },
    /// One buffer (`input_output_aliases`): it holds the input; overwrite it.
    InPlace(&'a mut [T]),
}

impl<'f, D: ElementSpec, const R: usize> ResultBuffer<'f, D, R> {
    common_methods!();

    /// The elements as `&mut [MaybeUninit<T>]`, row-major.
    ///
    /// Fails if `T` is not the buffer's dtype, if the buffer lives on a device, if
    /// its pointer is misaligned, or if it shares memory with an operand (then use
    /// [`ResultBuffer::with_input`]).
    #[inline]
    pub fn typed_uninit<T: Element>(&mut self) -> Result<&mut [MaybeUninit<T>]> {
        self.raw.check_host_access::<T>()?;
        if self.raw.len == 0 {
            return Ok(&mut []);
        }
        // SAFETY: host memory of dtype T, aligned, `len` elements alive for the call;
        // no operand or other result overlaps it, so this is the only reference to it
        // (`&mut self` keeps it unique); MaybeUninit makes no claim about contents.
        Ok(unsafe { core::slice::from_raw_parts_mut(self.raw.data() as *mut MaybeUninit<T>, self.raw.len) })
    }

    /// The raw bytes, uninitialised, whatever the element type; see
    /// [`Buffer::as_bytes`] for when this fails.
    pub fn as_uninit_bytes(&mut self) -> Result<&mut [MaybeUninit<u8>]> {
        let bytes = self.raw.check_byte_access()?;
        if bytes == 0 {
            return Ok(&mut []);
        }
        // SAFETY: host memory, non-null, `bytes` bytes alive for the call; no operand
        // or other result overlaps it, and `&mut self` keeps this the only reference.
        Ok(unsafe { core::slice::from_raw_parts_mut(self.raw.data() as *mut MaybeUninit<u8>, bytes) })
    }

    /// Asks Linux to back this (host) result with transparent huge pages, and says
    /// whether it asked.
    ///
    /// XLA's CPU runtime takes large results from `malloc`, which maps fresh pages
    /// for each call; the first write to each 4 KiB page then faults, and for a
    /// memory-bound kernel those faults cost as much as the work (about a quarter
    /// millisecond per 128 MiB). `madvise(MADV_HUGEPAGE)` on the 2 MiB-aligned
    /// interior makes that one fault per 2 MiB. It changes no contents and no
    /// ownership (the memory stays XLA's); it is only a hint, asked only for results
    /// of at least [`HUGE_PAGE_MIN_BYTES`], and a no-op off Linux, on device
    /// buffers, or where the kernel's `transparent_hugepage` setting is `never`.
    /// Call it before writing the result.
    #[inline]
    pub fn advise_huge_pages(&mut self) -> bool {
        // The common small result returns here, without a call (and without working
        // out the byte range: a type without a width has size 0 here); first on its
        // element count alone (no element is wider than `MAX_BYTE_WIDTH`).
        if self.raw.len < HUGE_PAGE_MIN_BYTES / crate::dtype::MAX_BYTE_WIDTH {
            return false;
        }
        // What it needs, in registers: a `&self` call would make the caller keep the
        // whole view in memory, in one piece, on the small result's path too.
        let raw = &self.raw;
        Self::advise_large(raw.entry, raw.len, raw.frame_is_host())
    }

    /// [`ResultBuffer::advise_huge_pages`] past its first test: out of line, as the
    /// small result's code is what a call costs.
    #[inline(never)]
    fn advise_large(entry: BufferEntry<'_>, len: usize, host: bool) -> bool {
        let dtype = entry.dtype();
        if !host || len * dtype.byte_width().unwrap_or(0) < HUGE_PAGE_MIN_BYTES {
            return false;
        }
        advise_huge_pages(byte_range(entry.data(), len, dtype).unwrap_or(EVERYWHERE))
    }

    /// This output together with an input it may alias.
    ///
    /// Both must have dtype `T`. If the call aliased them (the same memory), you get
    /// [`InOut::InPlace`] holding the input's values; if they are apart,
    /// [`InOut::Separate`]. Partial overlap is an error.
    ///
    /// The last generic argument is the input's rank parameter (`ANY_RANK` for a
    /// plain `Buffer<T>`); `_` infers it:
    ///
    /// ```
    /// use xla_ffi::testing::{Arg, CallBuilder};
    /// use xla_ffi::{handler, Buffer, InOut, Result, ResultBuffer};
    ///
    /// /// y = 2x; in place when XLA aliases y to x (`input_output_aliases`).
    /// #[handler(target = "demo.double")]
    /// fn demo_double(x: Buffer<f32>, mut y: ResultBuffer<f32>) -> Result<()> {
    ///     match y.with_input::<f32, _, _>(&x)? {
    ///         InOut::Separate { input, output } => {
    ///             for (o, &v) in output.iter_mut().zip(input) {
    ///                 o.write(2.0 * v);
    ///             }
    ///         }
    ///         InOut::InPlace(xy) => xy.iter_mut().for_each(|v| *v *= 2.0),
    ///     }
    ///     Ok(())
    /// }
    ///
    /// for aliased in [false, true] {
    ///     let mut call = CallBuilder::new().arg(Arg::from_slice(&[1.0f32, 2.0], &[2])).ret(Arg::zeros::<f32>(&[2]));
    ///     if aliased {
    ///         call = call.alias(0, 0);
    ///     }
    ///     call.run(DEMO_DOUBLE).unwrap();
    ///     assert_eq!(call.ret_as::<f32>(0), vec![2.0, 4.0]);
    /// }
    /// ```
    pub fn with_input<'a, 'g, T: Element, E: ElementSpec, const S: usize>(
        &'a mut self,
        input: &'a Buffer<'g, E, S>,
    ) -> Result<InOut<'a, T>> {
        let (out, inp) = (self.raw, input.raw);
        if out.range() != EMPTY && out.data() == inp.data() {
            if out.dtype() != inp.dtype() || out.len != inp.len {
                let s = inp.site();
                return Err(self.error(format!(
                    "aliases {} {} ({}) but differs in dtype or size ({} {:?} vs {} {:?})",
                    s.role,
                    s.index,
                    s.name,
                    out.dtype(),
                    out.dims(),
                    inp.dtype(),
                    inp.dims()
                )));
            }
            // Check dtype, host, alignment; aliasing with `input` is expected here, but
            // not with any other result.
            out.check_access::<T>(false)?;
            // The input never hands out `&[T]` (it overlaps a result), and `&'a mut self`
            // keeps the reference made below unique.
            // SAFETY: host memory of dtype T, aligned, `len` elements initialised by XLA
            // (the input's data), overlapping no other result (checked above).
            let xy = unsafe { core::slice::from_raw_parts_mut(out.data() as *mut T, out.len) };
            return Ok(InOut::InPlace(xy));
        }
        let input = input.typed::<T>()?;
        let output = self.typed_uninit::<T>()?;
        Ok(InOut::Separate { input, output })
    }

    /// The buffer's address: a device pointer for a GPU handler.
    pub fn as_mut_ptr(&mut self) -> *mut c_void {
        self.raw.data()
    }
}

impl<'f, T: Element, const R: usize> ResultBuffer<'f, T, R> {
    /// The elements as `&mut [MaybeUninit<T>]`; see [`ResultBuffer::typed_uninit`].
    pub fn as_uninit(&mut self) -> Result<&mut [MaybeUninit<T>]> {
        self.typed_uninit::<T>()
    }
}

impl<'f, D: ElementSpec, const R: usize> Decode<'f> for Buffer<'f, D, R> {
    const ARGS: usize = 1;
    const DECL: ParamDecl = ParamDecl::Operand(D::accepts);
    const BUFFER: BufferBounds = BufferBounds { dtypes: D::DTYPES, rank: R };
    #[inline(always)]
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        let index = call.next_arg();
        let raw = RawBuffer::decode(call, (Role::Operand, index, name), &const { Spec::of::<D, R>() })?;
        Some(Buffer { raw, _spec: PhantomData })
    }
}

impl<'f, D: ElementSpec, const R: usize> Decode<'f> for ResultBuffer<'f, D, R> {
    const RETS: usize = 1;
    const DECL: ParamDecl = ParamDecl::Result(D::accepts);
    const BUFFER: BufferBounds = BufferBounds { dtypes: D::DTYPES, rank: R };
    #[inline(always)]
    fn decode(call: &mut Call<'f>, name: &'static str) -> Option<Self> {
        let index = call.next_ret();
        let raw = RawBuffer::decode(call, (Role::Result, index, name), &const { Spec::of::<D, R>() })?;
        Some(ResultBuffer { raw, _spec: PhantomData })
    }
}

// SAFETY-free marker impls: a buffer view is a borrowed address plus metadata; the
// memory rules above (no shared & / &mut) hold across threads as well.
// Buffers are not Send/Sync automatically because of the raw pointer; handing a
// `&[T]` (which is Sync) to threads is the supported way to share them.

macro_rules! debug_view {
    ($name:literal, $ty:ident) => {
        impl<D: ElementSpec, const R: usize> fmt::Debug for $ty<'_, D, R> {
            /// Where it sits in the call, its dtype and its shape (not its contents).
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.debug_struct($name)
                    .field("site", &format_args!("{}", self.site()))
                    .field("dtype", &self.dtype())
                    .field("dims", &self.dims())
                    .finish()
            }
        }
    };
}
debug_view!("Buffer", Buffer);
debug_view!("ResultBuffer", ResultBuffer);

impl<T: fmt::Debug> fmt::Debug for InOut<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InOut::Separate { input, output } => {
                // The output is uninitialised: only its length is shown.
                f.debug_struct("Separate").field("input", input).field("output_len", &output.len()).finish()
            }
            InOut::InPlace(xy) => f.debug_tuple("InPlace").field(xy).finish(),
        }
    }
}
