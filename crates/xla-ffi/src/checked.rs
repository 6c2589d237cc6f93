//! The buffers of a call checked in one pass, before any parameter is decoded.
//!
//! When a call has the operand and result counts its handler declares (every call of
//! a handler without optional or variadic parameters, up to [`Aliases::MAX`]
//! buffers), [`check_all`] reads every entry of the frame at once, in straight-line
//! code (the counts are constants): each must be a well-formed buffer whose element
//! count is valid (`raw::buffer_with_len`: kind, struct size, rank, dims, count) and
//! whose byte range fits (`alias::range_of_len`). Their byte ranges go into the alias
//! table, whose overlap pass then runs once, and the first buffer's dtype and shape
//! are compared with every other's for the elementwise rules. Each buffer parameter
//! then takes its entry and element count from [`Checked`] (the `Buffer` and
//! `ResultBuffer` implementations of `Decode::decode_checked`) and checks its own
//! position, dtype and rank.
//!
//! The pass is all or nothing: if any entry fails, nothing is kept, and every
//! parameter decodes (and reports) as it would without the pass.

use core::mem::MaybeUninit;

use crate::alias::{range_of_len, Aliases};
use crate::dtype::DataType;
use crate::frame::Frame;
use crate::raw::BufferEntry;
use crate::site::Role;

/// What the one pass over a call's buffers found: per slot (operands first, then
/// results), XLA's checked buffer struct and its element count.
///
/// A local of the code the [`handler`](crate::handler) macro generates (so that
/// the optimizer keeps it in registers), handed to each parameter's
/// [`Decode::decode_checked`](crate::Decode::decode_checked).
#[doc(hidden)]
pub struct Checked<'f> {
    /// Written for the slots below `n` when the pass succeeded.
    entries: [MaybeUninit<(BufferEntry<'f>, usize)>; Aliases::MAX],
    /// The operands checked (0 when the pass did not run or failed).
    na: usize,
    /// The buffers checked, operands first (0 when the pass did not run or failed).
    n: usize,
}

impl<'f> Checked<'f> {
    /// Nothing checked.
    #[inline(always)]
    fn none() -> Self {
        Checked { entries: [const { MaybeUninit::uninit() }; Aliases::MAX], na: 0, n: 0 }
    }

    /// Whether the pass ran and checked every buffer of the call.
    #[inline(always)]
    pub(crate) fn all(&self) -> bool {
        self.n != 0
    }

    /// The checked buffer struct and element count of operand or result `index`, or
    /// `None` when the pass did not check it.
    #[inline(always)]
    pub(crate) fn get(&self, role: Role, index: usize) -> Option<(BufferEntry<'f>, usize)> {
        let slot = match role {
            Role::Operand if index < self.na => index,
            Role::Result if index < self.n - self.na => self.na + index,
            _ => return None,
        };
        // SAFETY: `slot < n` (both cases above), and `check_all` writes every slot
        // below the `n` it sets; the mask keeps the index inside the array (n <= MAX,
        // a power of two).
        Some(unsafe { self.entries[slot & (Aliases::MAX - 1)].assume_init() })
    }
}

/// Whether `dims` equals `d0`: a vector (most calls) with one compare, else an index
/// loop over the few dimensions (cheaper than `memcmp`).
#[inline(always)]
pub(crate) fn same_shape(dims: &[i64], d0: &[i64]) -> bool {
    match (dims, d0) {
        ([a], [b]) => a == b,
        _ => {
            let mut same = dims.len() == d0.len();
            let mut k = 0;
            while same && k < dims.len() {
                same = dims[k] == d0[k];
                k += 1;
            }
            same
        }
    }
}

/// The first buffer's dtype and shape, and whether every other buffer has them.
pub(crate) type Alike<'f> = ((DataType, &'f [i64]), bool);

/// Checks every buffer of a call with `NA` operands and `NR` results in one pass (see
/// the module docs): the [`Checked`] entries (none when the call has other counts or
/// a buffer fails), and the first buffer's dtype and shape with whether every other
/// buffer has them (the elementwise rules' shortcut).
#[inline(always)]
pub(crate) fn check_all<'f, const NA: usize, const NR: usize>(
    frame: &'f Frame<'f>,
    aliases: &Aliases<'f>,
) -> (Checked<'f>, Option<Alike<'f>>) {
    let mut checked = Checked::none();
    if NA + NR == 0 || NA + NR > Aliases::MAX || frame.count(Role::Operand) != NA || frame.count(Role::Result) != NR {
        return (checked, None);
    }
    let mut first: (DataType, &'f [i64]) = (DataType::INVALID, &[]);
    let mut alike = true;
    let mut i = 0;
    while i < NA {
        if !check_one((frame, aliases), &mut checked, (Role::Operand, i, i), (&mut first, &mut alike)) {
            return (checked, None);
        }
        i += 1;
    }
    let mut j = 0;
    while j < NR {
        if !check_one((frame, aliases), &mut checked, (Role::Result, j, NA + j), (&mut first, &mut alike)) {
            return (checked, None);
        }
        j += 1;
    }
    // Every slot passed: keep them, and run the overlap pass once.
    aliases.record_all(NA, NA + NR);
    checked.na = NA;
    checked.n = NA + NR;
    (checked, Some((first, alike)))
}

/// Checks the buffer at `(role, index)`, slot `slot`, for [`check_all`]: writes its
/// entry and byte range, compares it with the first, and says whether it passed.
#[inline(always)]
fn check_one<'f>(
    (frame, aliases): (&'f Frame<'f>, &Aliases<'f>),
    checked: &mut Checked<'f>,
    (role, index, slot): (Role, usize, usize),
    (first, alike): (&mut (DataType, &'f [i64]), &mut bool),
) -> bool {
    let Some((b, len)) = frame.buffer_with_len(role, index) else {
        return false;
    };
    let (dtype, dims) = (b.dtype(), b.dims());
    let Some(range) = range_of_len(b.data(), len, dtype) else {
        return false;
    };
    checked.entries[slot & (Aliases::MAX - 1)] = MaybeUninit::new((b, len));
    aliases.put(slot, range);
    if slot == 0 {
        *first = (dtype, dims);
    } else {
        *alike &= dtype == first.0 && same_shape(dims, first.1);
    }
    true
}
