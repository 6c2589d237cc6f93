//! The forward's row loops for CPUs with AVX2 and FMA (the natural layout of every
//! dtype, and the bf16 pair layout where the CPU has no AVX-512, with the narrowing
//! of `bf16_avx2.rs` for the rows that cannot hold a NaN), prefetching the
//! next row while the current one is scaled: reached from the copies of
//! [`super::fwd_rows`] and [`super::fwd_rows_inplace`] and of the pair loops that
//! `multiversion` compiles for those features
//! (calling a `#[target_feature]` function from a function, or a closure in one,
//! with the same features is safe, and so is the `std::arch` intrinsic inside one:
//! no `unsafe` here).
//!
//! The loops are [`super::rows::rows_body`] (out of place and in place), the same
//! arithmetic and the same bits; they only add one `prefetcht1` per 64-byte line
//! of the next row, spread over the current row's scale pass (chunk `k` of the
//! pass asks for chunk `k` of the next row). The scale pass reads its row from L1
//! and nothing from memory, so without the hint the hardware prefetcher waits for
//! the next row's first misses; with it the next row streams into L2 while the
//! pass computes, and the sum of squares then reads it from there. `prefetcht1`
//! rather than `prefetcht0`, as measured for the bf16 rows (whose AVX-512 BF16
//! loops in `bf16_avx512.rs` use [`prefetch_chunk`] too). Streaming 8192x4096 f32 in
//! place on one thread this took the kernel from about 0.48-0.51 to 0.36 ns per
//! element (measured then with a hand-written example; today's figures: `cargo bench
//! -p xla-ffi-rs-ops --bench kernels`); rows in cache are unchanged.
//!
//! The bf16 rows in the pair layout ([`super::rows::rows_body`] with
//! [`super::rows::Pairs`]) prefetch the same way on CPUs with AVX2 and
//! no AVX-512 ([`pair_rows`]; a CPU with AVX-512 but not its
//! BF16 extension runs the plain AVX-512 copy, which does not prefetch): on a 2-core AVX2
//! EPYC (Zen 3), two threads streaming 8192x4096 bf16 in place went from 0.30-0.33
//! to 0.21-0.24 CPU ns per element (`THREADS=2 cargo run --release -p
//! xla-ffi-rs-ops --example rms_bf16_threads 8192 5`).

use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};

use super::bf16_avx2::narrow_no_nan;
use super::chunk::narrow;
use super::pairs::narrow_pairs;
use super::rows::{rows_body, Natural, One, Pairs, Split, SrcSink};
use super::L;
use crate::float::Float;
use crate::slot::Slot;

/// Bytes per cache line.
const LINE: usize = 64;

/// Asks for the cache lines of chunk `k` of `row` (its `L` elements from `k * L`)
/// to be brought into L2, those the row has: a hint, which reads nothing and
/// cannot fault. The number of lines per chunk is a constant of `T` (one for
/// `bf16`, two for `f32`), so the loop unrolls into that many bounds-checked
/// hints: a loop up to `(k + 1) * L` compiled, in one of the row driver's
/// copies, to a general loop with its trip count computed for every chunk.
#[inline]
#[target_feature(enable = "sse")]
pub(super) fn prefetch_chunk<T>(row: &[T], k: usize) {
    let step = (LINE / core::mem::size_of::<T>().max(1)).max(1);
    for line in 0..L.div_ceil(step) {
        match row.get(k * L + line * step) {
            Some(e) => _mm_prefetch::<_MM_HINT_T1>(core::ptr::from_ref(e).cast()),
            None => return,
        }
    }
}

/// [`super::rows::rows_body`] in the natural layout, out of place or in place,
/// prefetching the next row.
#[target_feature(enable = "avx2,fma")]
pub(super) fn rows<X: Float, Y: Float, S: SrcSink<X, Y>, I: Slot<Y::Acc>>(
    io: S,
    w: &[Y::Acc],
    n: usize,
    eps: Y::Acc,
    inv: &mut [I],
) {
    rows_body(io, w, n, eps, inv, Natural, One(narrow::<Y, Y::Acc>), |next, k| prefetch_chunk(next, k));
}

/// [`super::rows::rows_body`] in the bf16 pair layout, out of place or in place,
/// with the portable narrowing, and `bf16_avx2`'s for the rows that cannot hold a
/// NaN, prefetching the next row.
#[target_feature(enable = "avx2,fma")]
pub(super) fn pair_rows<X: Float, Y: Float, S: SrcSink<X, Y>, I: Slot<Y::Acc>>(
    io: S,
    w: &[Y::Acc],
    n: usize,
    eps: Y::Acc,
    inv: &mut [I],
) {
    let narrow = Split { any: narrow_pairs::<Y, Y::Acc>, no_nan: |v: &[Y::Acc; L]| narrow_no_nan::<Y, Y::Acc>(v) };
    rows_body(io, w, n, eps, inv, Pairs, narrow, |next, k| prefetch_chunk(next, k));
}
