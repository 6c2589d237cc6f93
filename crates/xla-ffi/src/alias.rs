//! Alias bookkeeping: which buffers of a call share memory.
//!
//! XLA may pass the same memory as an operand and a result
//! (`input_output_aliases`), and nothing stops a malformed call from overlapping two
//! results. The buffer views must never hand out `&[T]` and `&mut [T]` (or two
//! `&mut`) to the same bytes, so each buffer's byte range is recorded as it is
//! decoded ([`Ranges`]); once every parameter is decoded, [`Ranges::overlaps`] turns
//! them into bit sets ([`Overlaps`]), so that the check a slice request makes is a
//! bit test. A buffer whose bit is set, or a call whose buffers were not all
//! recorded, falls back to [`aliased_by`], which scans the frame.
//!
//! Sits above the raw layer (`frame.rs`, `raw.rs`) and below the buffer views.

use core::ffi::c_void;

use crate::dtype::DataType;
use crate::frame::{Frame, Slot};
use crate::site::{Role, Site};

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

#[inline(always)]
pub(crate) fn element_count(dims: &[i64]) -> Option<usize> {
    dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?))
}

/// Which buffers of a call share memory with another. Bit `i` of `args` is set when
/// operand `i` overlaps a result; bit `j` of `rets` when result `j` overlaps an
/// operand or another result. Built by [`Ranges::overlaps`] once every parameter is
/// decoded, so that each `typed()` is a bit test; [`Overlaps::ALL`] (every bit set)
/// makes [`aliased_by`] scan the frame instead.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Overlaps {
    args: u64,
    rets: u64,
}

/// The byte ranges of the decoded buffers, recorded as they are decoded.
pub(crate) struct Ranges {
    /// `(start, end)` per slot (operands first, then results); `(0, 0)` overlaps
    /// nothing (an empty buffer).
    slots: [(usize, usize); Ranges::MAX],
    /// Slots recorded, as a bit set.
    seen: u32,
}

impl Ranges {
    /// Calls with more buffers than this scan the frame instead.
    const MAX: usize = 16;

    pub(crate) fn new() -> Self {
        Ranges { slots: [(0, 0); Ranges::MAX], seen: 0 }
    }

    #[inline(always)]
    pub(crate) fn record(&mut self, frame: &Frame<'_>, site: Site, range: (usize, usize)) {
        let slot = match site.role {
            Role::Operand => site.index,
            Role::Result => frame.count(Role::Operand) + site.index,
        };
        if slot < Ranges::MAX {
            self.slots[slot] = range;
            self.seen |= 1 << slot;
        }
    }

    /// The overlaps, if every buffer of the frame was recorded; else [`Overlaps::ALL`].
    pub(crate) fn overlaps(&self, frame: &Frame<'_>) -> Overlaps {
        let (na, nr) = (frame.count(Role::Operand), frame.count(Role::Result));
        let n = na + nr;
        if n > Ranges::MAX || self.seen != (((1u64 << n) - 1) as u32) {
            return Overlaps::ALL;
        }
        // Plain `while` loops; indices masked to the array (n <= MAX, a power of
        // two), so no bounds checks: this runs on every call.
        const MASK: usize = Ranges::MAX - 1;
        let s = &self.slots;
        let mut out = Overlaps { args: 0, rets: 0 };
        let mut j = 0;
        while j < nr {
            let rj = s[(na + j) & MASK];
            let mut i = 0;
            while i < na {
                if overlaps(rj, s[i & MASK]) {
                    out.args |= 1 << i;
                    out.rets |= 1 << j;
                }
                i += 1;
            }
            let mut k = j + 1;
            while k < nr {
                if overlaps(rj, s[(na + k) & MASK]) {
                    out.rets |= (1 << j) | (1 << k);
                }
                k += 1;
            }
            j += 1;
        }
        out
    }
}

impl Overlaps {
    pub(crate) const ALL: Overlaps = Overlaps { args: u64::MAX, rets: u64::MAX };

    /// Whether the buffer at `index` on side `role` may share memory with another.
    #[inline(always)]
    pub(crate) fn may_overlap(self, role: Role, index: usize) -> bool {
        let mask = match role {
            Role::Operand => self.args,
            Role::Result => self.rets,
        };
        index >= 64 || mask & (1u64 << index) != 0
    }
}

/// The first buffer on the other side of the call that shares memory with the one
/// at `site`, covering `mine` (or, for a result, another result that does).
/// Operands are left out when `operands` is false (an in-place pair).
#[inline(always)]
pub(crate) fn aliased_by(
    frame: &Frame<'_>,
    known: Overlaps,
    site: Site,
    mine: (usize, usize),
    operands: bool,
) -> Option<(Role, usize)> {
    if !known.may_overlap(site.role, site.index) || mine == EMPTY {
        return None;
    }
    scan(frame, site, mine, operands)
}

/// [`aliased_by`]'s scan of the frame, for a buffer the bit sets could not clear.
#[inline(never)]
fn scan(frame: &Frame<'_>, site: Site, mine: (usize, usize), operands: bool) -> Option<(Role, usize)> {
    // The first entry on side `role`, other than number `skip`, that may overlap
    // this one. An entry that is not a well-formed buffer (another kind, which a
    // custom `Decode` may have left unchecked, or a malformed one) may be anything,
    // so it counts as overlapping.
    let first = |role: Role, skip: Option<usize>| {
        (0..frame.count(role)).filter(|&i| Some(i) != skip).find(|&i| match frame.buffer(role, i) {
            Slot::Buffer(b) => {
                let range = element_count(b.dims).and_then(|n| byte_range(b.data, n, b.dtype)).unwrap_or(EVERYWHERE);
                overlaps(mine, range)
            }
            Slot::Missing => false,
            Slot::Kind(_) | Slot::Malformed => true,
        })
    };
    match site.role {
        Role::Operand => first(Role::Result, None).map(|i| (Role::Result, i)),
        Role::Result => operands
            .then(|| first(Role::Operand, None))
            .flatten()
            .map(|i| (Role::Operand, i))
            // Two results sharing memory would give two `&mut`s to it.
            .or_else(|| first(Role::Result, Some(site.index)).map(|i| (Role::Result, i))),
    }
}
