//! Alias bookkeeping: which buffers of a call share memory.
//!
//! XLA may pass the same memory as an operand and a result
//! (`input_output_aliases`), and nothing stops a malformed call from overlapping two
//! results. The buffer views must never hand out `&[T]` and `&mut [T]` (or two
//! `&mut`) to the same bytes, so each buffer's byte range is recorded as it is
//! decoded ([`Aliases`]); when decoding ends, one pass finds out whether any result
//! meets an operand or another result (the pairs that could give a `&mut` beside
//! another reference: two operands may share memory, both being read only), once per
//! call; when none do, as in almost every call, each request is answered by that
//! one fact, otherwise by comparing its range with the others'. A call whose
//! buffers were not all recorded (more than [`Aliases::MAX`], or a custom `Decode`
//! that took a slice before every buffer was decoded) scans the frame instead.
//!
//! Sits above the raw layer (`frame.rs`, `raw.rs`) and below the buffer views.

use core::cell::Cell;
use core::ffi::c_void;
use core::mem::MaybeUninit;

use crate::dtype::DataType;
use crate::frame::{Frame, Slot};
use crate::site::Role;

/// The range of no bytes: overlaps nothing.
pub(crate) const EMPTY: (usize, usize) = (0, 0);
/// The range of every byte: what a buffer of unknown element width may cover.
pub(crate) const EVERYWHERE: (usize, usize) = (0, usize::MAX);

/// The bytes `[start, end)` a buffer covers: [`EMPTY`] when it has no bytes,
/// [`EVERYWHERE`] when its dtype's width is unknown (so it overlaps every other
/// buffer), and `None` when its end lies past `isize::MAX` (a malformed buffer: no
/// allocation reaches there, and no slice may).
#[inline(always)]
pub(crate) fn byte_range(data: *mut c_void, len: usize, dtype: DataType) -> Option<(usize, usize)> {
    let Some(width) = dtype.byte_width() else {
        return Some(if len == 0 { EMPTY } else { EVERYWHERE });
    };
    let bytes = len.checked_mul(width)?;
    if bytes == 0 {
        return Some(EMPTY);
    }
    let start = data as usize;
    // A Rust slice may not reach past `isize::MAX`: no real allocation does.
    let end = start.checked_add(bytes).filter(|&end| end <= isize::MAX as usize)?;
    Some((start, end))
}

#[inline(always)]
pub(crate) fn overlaps(a: (usize, usize), b: (usize, usize)) -> bool {
    a.0 < b.1 && b.0 < a.1
}

/// The number of elements of a shape, or `None` for a negative dimension or a count
/// past `usize`. Scalars and vectors (most calls) without the loop.
#[inline(always)]
pub(crate) fn element_count(dims: &[i64]) -> Option<usize> {
    match *dims {
        [] => Some(1),
        [d] => usize::try_from(d).ok(),
        _ => dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?)),
    }
}

/// What few calls have: the problems decoding found, and the attributes marked used
/// past the first 128.
#[derive(Default)]
struct Rare {
    problems: Vec<String>,
    high_attrs: Vec<usize>,
}

/// The byte ranges of the decoded buffers, recorded as they are decoded (through a
/// shared reference: the views keep one to check their own access later), with the
/// frame and target they belong to: the one per-call reference a buffer view holds.
pub(crate) struct Aliases<'f> {
    /// The call's frame.
    pub(crate) frame: &'f Frame<'f>,
    /// The FFI target, for messages.
    pub(crate) target: &'static str,
    /// What decoding found wrong (see [`Call::problem`](crate::Call::problem)), and
    /// the attributes marked used past the first 128 (which the `Call` keeps as
    /// bits): allocated on the first of either, which a call that decodes cleanly
    /// never has, so the accepting path makes and drops one NULL pointer. Here,
    /// behind the shared reference every view and the `Call` hold, and not in the
    /// `Call`: the cold paths that record a problem then never take the `Call`'s
    /// address, so the optimizer keeps the `Call` (its positions, the dtype and shape
    /// of the first buffer) in registers on the accepting path.
    rare: Cell<Option<Box<Rare>>>,
    /// Whether any problem was recorded (one load to ask on the accepting path).
    any_problem: Cell<bool>,
    /// `(start, end)` per slot (operands first, then results); [`EMPTY`] overlaps
    /// nothing. A slot is written before its bit is set in `seen`, and read only
    /// when that bit is set (so the table needs no clearing per call).
    slots: [Cell<MaybeUninit<(usize, usize)>>; Aliases::MAX],
    /// Slots recorded, as a bit set.
    seen: Cell<u32>,
    /// Whether no recorded result meets an operand or another result, once every
    /// buffer of the call is recorded: [`UNKNOWN`](Aliases::UNKNOWN), [`DISJOINT`](Aliases::DISJOINT)
    /// or [`OVERLAPPING`](Aliases::OVERLAPPING). The common case (no aliasing at all)
    /// then answers every later access with one compare.
    disjoint: Cell<u8>,
    /// Every buffer of the call recorded, no result sharing a byte with another
    /// buffer, and host memory: a
    /// slice of a buffer then needs only its dtype and alignment checked. Worked out
    /// once per call, when decoding ends ([`Aliases::settle`]); any later `record`
    /// clears it.
    clean: Cell<bool>,
}

impl<'f> Aliases<'f> {
    /// Calls with more buffers than this scan the frame instead (and their rules are
    /// checked on the frame).
    pub(crate) const MAX: usize = 8;
    const UNKNOWN: u8 = 0;
    const DISJOINT: u8 = 1;
    const OVERLAPPING: u8 = 2;

    pub(crate) fn new(frame: &'f Frame<'f>, target: &'static str) -> Self {
        Aliases {
            frame,
            target,
            rare: Cell::new(None),
            any_problem: Cell::new(false),
            slots: [const { Cell::new(MaybeUninit::uninit()) }; Aliases::MAX],
            seen: Cell::new(0),
            disjoint: Cell::new(Aliases::UNKNOWN),
            clean: Cell::new(false),
        }
    }

    /// Records a problem of decoding this call (see [`Call::problem`](crate::Call::problem)).
    pub(crate) fn add_problem(&self, message: String) {
        self.with_rare(|r| r.problems.push(message));
        self.any_problem.set(true);
    }

    /// Runs `f` on the rarely used part (made on first use). Taken out of its cell
    /// and put back: `f` cannot reach the cell meanwhile (it is given the part alone).
    fn with_rare<R>(&self, f: impl FnOnce(&mut Rare) -> R) -> R {
        let mut rare = self.rare.take().unwrap_or_default();
        let r = f(&mut rare);
        self.rare.set(Some(rare));
        r
    }

    /// Marks attribute `index` (128 or more) used.
    #[cold]
    #[inline(never)]
    pub(crate) fn use_high_attr(&self, index: usize) {
        self.with_rare(|r| {
            if !r.high_attrs.contains(&index) {
                r.high_attrs.push(index);
            }
        });
    }

    /// Whether attribute `index` (128 or more) was marked used.
    pub(crate) fn high_attr_used(&self, index: usize) -> bool {
        self.with_rare(|r| r.high_attrs.contains(&index))
    }

    /// Whether any problem was recorded.
    #[inline(always)]
    pub(crate) fn any_problem(&self) -> bool {
        self.any_problem.get()
    }

    /// The problems recorded, taken out (for the error that reports them).
    pub(crate) fn take_problems(&self) -> Vec<String> {
        self.any_problem.set(false);
        self.with_rare(|r| core::mem::take(&mut r.problems))
    }

    /// Whether a buffer of this call may be handed out as a slice of its dtype with
    /// only the dtype and alignment checked (see `clean`): one load on the hot path.
    #[inline(always)]
    pub(crate) fn is_clean(&self) -> bool {
        self.clean.get()
    }

    /// When decoding ends: finds out, once, whether the recorded buffers are all of the
    /// call's and no result meets another buffer (which sets `clean` for a host call).
    ///
    /// `declared` is the handler's operand and result count: when the call has exactly
    /// those (every call of a handler without optional or variadic parameters), the
    /// pass runs on them, constants where the handler's description is inlined, so the
    /// few compares are unrolled.
    #[inline(always)]
    pub(crate) fn settle(&self, declared: (usize, usize)) {
        let frame = self.frame;
        let got = (frame.count(Role::Operand), frame.count(Role::Result));
        // Two calls, not one on a chosen count: the first is then compiled for the
        // constants.
        if got == declared {
            self.settle_on(declared.0, declared.0 + declared.1);
        } else {
            self.settle_other(got);
        }
    }

    /// [`Aliases::settle`] for a call without the declared counts (optional or
    /// variadic parameters): out of line.
    #[cold]
    #[inline(never)]
    fn settle_other(&self, got: (usize, usize)) {
        self.settle_on(got.0, got.0 + got.1);
    }

    /// [`Aliases::settle`] for `n` buffers, the first `na` of them operands.
    #[inline(always)]
    fn settle_on(&self, na: usize, n: usize) {
        if n <= Aliases::MAX && self.seen.get() == (((1u64 << n) - 1) as u32) {
            // SAFETY: the first `n` slots are recorded (their bits are all set).
            unsafe { self.all_disjoint(na, n) };
        }
    }

    /// Whether, of the first `n` slots (the first `na` of them operands), no result
    /// meets an operand or another result; worked out once per call.
    ///
    /// # Safety
    /// The first `n` slots are recorded (their bits set in `seen`).
    #[inline(always)]
    unsafe fn all_disjoint(&self, na: usize, n: usize) -> bool {
        match self.disjoint.get() {
            Aliases::DISJOINT => true,
            Aliases::OVERLAPPING => false,
            _ => {
                // SAFETY: this function's own precondition.
                let disjoint = unsafe { self.pairwise_disjoint(na, n) };
                self.disjoint.set(if disjoint { Aliases::DISJOINT } else { Aliases::OVERLAPPING });
                self.clean.set(disjoint && self.frame.host);
                disjoint
            }
        }
    }

    /// The range recorded in `slot`.
    ///
    /// # Safety
    /// `slot` is recorded (its bit set in `seen`).
    #[inline(always)]
    unsafe fn slot(&self, slot: usize) -> (usize, usize) {
        debug_assert!(self.seen.get() & (1 << slot) != 0);
        // SAFETY: the slot is recorded (the caller's promise), and `record` writes a
        // slot before setting its bit.
        unsafe { self.slots[slot].get().assume_init() }
    }

    /// Whether, of the first `n` slots, no result (the slots from `na` on) meets an
    /// operand or another result. Two operands may share memory: both are only read.
    ///
    /// # Safety
    /// The first `n` slots are recorded (their bits set in `seen`).
    #[inline(always)]
    unsafe fn pairwise_disjoint(&self, na: usize, n: usize) -> bool {
        let n = n.min(Aliases::MAX);
        let mut j = na.min(n);
        while j < n {
            // SAFETY: i < j < n, recorded (the caller's promise).
            let b = unsafe { self.slot(j) };
            let mut i = 0;
            while i < j {
                // SAFETY: as above.
                if overlaps(unsafe { self.slot(i) }, b) {
                    return false;
                }
                i += 1;
            }
            j += 1;
        }
        true
    }

    /// Records the range of the buffer at `slot` (operands first, then results), and
    /// says whether the slot is one this table keeps (below [`Aliases::MAX`]).
    #[inline(always)]
    pub(crate) fn record(&self, slot: usize, range: (usize, usize)) -> bool {
        if slot < Aliases::MAX {
            self.slots[slot].set(MaybeUninit::new(range));
            self.seen.set(self.seen.get() | 1 << slot);
            self.disjoint.set(Aliases::UNKNOWN);
            self.clean.set(false);
            return true;
        }
        false
    }

    /// Whether every buffer of the call is recorded, as [`Aliases::settle`] found
    /// (and no `record` since): its overlap pass then ran, which left the state known.
    #[inline(always)]
    pub(crate) fn all_recorded(&self) -> bool {
        self.disjoint.get() != Aliases::UNKNOWN
    }

    /// The slots recorded, as a bit set.
    #[inline(always)]
    pub(crate) fn seen(&self) -> u32 {
        self.seen.get()
    }

    /// The first buffer on the other side of the call that shares memory with the one
    /// at `(role, index)`, covering `mine` (or, for a result, another result that does).
    /// Operands are left out when `operands` is false (an in-place pair).
    ///
    /// Compared with the recorded ranges when every buffer of the frame was recorded
    /// (after decoding, for up to [`Aliases::MAX`] buffers); else the frame is scanned.
    #[inline(always)]
    pub(crate) fn aliased_by(
        &self,
        (role, index): (Role, usize),
        mine: (usize, usize),
        operands: bool,
    ) -> Option<(Role, usize)> {
        // Every buffer recorded and no result sharing a byte with another buffer (found
        // when decoding ended or by an earlier access; any later `record` resets it):
        // one compare.
        if self.disjoint.get() == Aliases::DISJOINT {
            return None;
        }
        let frame = self.frame;
        let (na, nr) = (frame.count(Role::Operand), frame.count(Role::Result));
        let n = na + nr;
        let recorded = n <= Aliases::MAX && self.seen.get() == (((1u64 << n) - 1) as u32);
        // No result shares a byte with another buffer: nothing to look for.
        // SAFETY: `recorded`: the first `n` slots are.
        if recorded && unsafe { self.all_disjoint(na, n) } {
            return None;
        }
        if mine == EMPTY {
            return None;
        }
        if !recorded {
            return scan(frame, (role, index), mine, operands);
        }
        // The first recorded slot in `lo..hi`, other than `skip`, that meets `mine`
        // (indices masked to the array: n <= MAX, a power of two).
        let first = |lo: usize, hi: usize, skip: usize| {
            let mut i = lo;
            while i < hi {
                // SAFETY: `recorded` holds here, and lo <= i < hi <= n: slot i is recorded.
                if i != skip && overlaps(mine, unsafe { self.slot(i & (Aliases::MAX - 1)) }) {
                    return Some(i - lo);
                }
                i += 1;
            }
            None
        };
        match role {
            Role::Operand => first(na, n, usize::MAX).map(|j| (Role::Result, j)),
            Role::Result => operands
                .then(|| first(0, na, usize::MAX))
                .flatten()
                .map(|i| (Role::Operand, i))
                // Two results sharing memory would give two `&mut`s to it.
                .or_else(|| first(na, n, na + index).map(|j| (Role::Result, j))),
        }
    }
}

/// [`Aliases::aliased_by`]'s scan of the frame, for a call whose buffers were not all
/// recorded.
#[inline(never)]
fn scan(
    frame: &Frame<'_>,
    (role, index): (Role, usize),
    mine: (usize, usize),
    operands: bool,
) -> Option<(Role, usize)> {
    // The first entry on side `role`, other than number `skip`, that may overlap
    // this one. An entry that is not a well-formed buffer (another kind, which a
    // custom `Decode` may have left unchecked, or a malformed one) may be anything,
    // so it counts as overlapping.
    let first = |role: Role, skip: Option<usize>| {
        (0..frame.count(role)).filter(|&i| Some(i) != skip).find(|&i| match frame.buffer(role, i) {
            Slot::Buffer(b) => {
                let range =
                    element_count(b.dims()).and_then(|n| byte_range(b.data(), n, b.dtype())).unwrap_or(EVERYWHERE);
                overlaps(mine, range)
            }
            Slot::Missing => false,
            Slot::Kind(_) | Slot::Malformed => true,
        })
    };
    match role {
        Role::Operand => first(Role::Result, None).map(|i| (Role::Result, i)),
        Role::Result => operands
            .then(|| first(Role::Operand, None))
            .flatten()
            .map(|i| (Role::Operand, i))
            // Two results sharing memory would give two `&mut`s to it.
            .or_else(|| first(Role::Result, Some(index)).map(|i| (Role::Result, i))),
    }
}
