//! Copies of large buffers between XLA's memory and Python's, written with
//! non-temporal stores (used by the engine's `copy_from_operand` and
//! `copy_into_result`).
//!
//! It uses nothing but `core`, so that `tests/bulk_copy.rs` compiles it alone (with
//! its unit tests), with no Python interpreter: under Miri and AddressSanitizer too.
//!
//! A copy of several MiB from or to a Python function's arrays (`python_op`'s
//! operand copies and output arrays) does not fit a core's L2, and glibc's `memcpy`
//! writes it with ordinary stores below its non-temporal threshold, which it derives
//! from the shared cache size the CPU reports (hundreds of MiB on some virtual
//! machines): every destination line is then read from memory before it is written.
//! Non-temporal stores write whole lines without reading them and without evicting
//! the caches' other contents; below [`STREAM_MIN_BYTES`] a copy stays in the caches
//! and an ordinary copy is the faster one. See docs/performance.md ("python_op").

/// Copies of at least this many bytes use non-temporal stores on x86-64.
pub(crate) const STREAM_MIN_BYTES: usize = 4 << 20;

/// Copies `n` bytes from `src` to `dst`: with non-temporal stores from
/// [`STREAM_MIN_BYTES`] on x86-64 when the ranges do not overlap, else as
/// `core::ptr::copy` (a `memmove`).
///
/// # Safety
/// `src` must be valid for reads and `dst` for writes of `n` bytes, and nothing else
/// may write either range during the copy.
pub(crate) unsafe fn copy_bytes(dst: *mut u8, src: *const u8, n: usize) {
    let (d, s) = (dst as usize, src as usize);
    let overlap = d < s.wrapping_add(n) && s < d.wrapping_add(n);
    if n >= STREAM_MIN_BYTES && !overlap {
        // SAFETY: the caller's contract, and the ranges do not overlap (checked above).
        unsafe { copy_streaming(dst, src, n) };
        return;
    }
    // SAFETY: the caller's contract; `copy` allows overlapping ranges.
    unsafe { core::ptr::copy(src, dst, n) };
}

/// Copies `n` bytes from `src` to `dst` (non-overlapping), 64 bytes at a time with
/// SSE2 non-temporal stores (`movntdq`, part of x86-64's baseline) to 16-byte
/// aligned addresses, the unaligned head and tail with `copy_nonoverlapping`, and a
/// store fence after, so that the bytes are visible to whatever follows the copy
/// (the stores are weakly ordered). Elsewhere than on x86-64, `copy_nonoverlapping`.
///
/// # Safety
/// As [`copy_bytes`], and the ranges must not overlap.
unsafe fn copy_streaming(dst: *mut u8, src: *const u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        #[cfg(not(miri))]
        use core::arch::x86_64::_mm_sfence;
        use core::arch::x86_64::{__m128i, _mm_loadu_si128};
        /// `movntdq`; under Miri (which runs no inline assembly, what the intrinsic
        /// is made of) an aligned ordinary store of the same 16 bytes.
        ///
        /// # Safety
        /// `d` is valid for a write of 16 bytes and 16-byte aligned.
        #[inline(always)]
        unsafe fn stream(d: *mut __m128i, v: __m128i) {
            #[cfg(not(miri))]
            // SAFETY: the caller's contract; SSE2 is part of x86-64's baseline.
            unsafe {
                core::arch::x86_64::_mm_stream_si128(d, v)
            };
            #[cfg(miri)]
            // SAFETY: the caller's contract (Miri checks the alignment too).
            unsafe {
                d.write(v)
            };
        }
        const LINE: usize = 64;
        let head = dst.align_offset(16).min(n);
        let body = (n - head) / LINE * LINE;
        // SAFETY: `head <= n`: both ranges hold the first `head` bytes, and they do
        // not overlap (the caller's contract).
        unsafe { core::ptr::copy_nonoverlapping(src, dst, head) };
        let mut i = head;
        while i < head + body {
            // SAFETY: `i + 64 <= head + body <= n`, so the 64 bytes at `src + i` and
            // `dst + i` lie inside the ranges; `dst + i` is 16-byte aligned (`head`
            // aligns it and `i - head` is a multiple of 64), as `movntdq` needs; the
            // loads are unaligned ones (`movdqu`).
            unsafe {
                let (s, d) = (src.add(i).cast::<__m128i>(), dst.add(i).cast::<__m128i>());
                let a = _mm_loadu_si128(s);
                let b = _mm_loadu_si128(s.add(1));
                let c = _mm_loadu_si128(s.add(2));
                let e = _mm_loadu_si128(s.add(3));
                stream(d, a);
                stream(d.add(1), b);
                stream(d.add(2), c);
                stream(d.add(3), e);
            }
            i += LINE;
        }
        // SAFETY: the `n - i` bytes after `i` lie inside both ranges, which do not overlap.
        unsafe { core::ptr::copy_nonoverlapping(src.add(i), dst.add(i), n - i) };
        // SAFETY: SSE is part of x86-64's baseline; the fence orders the
        // non-temporal stores above before every later store. (Miri has no `sfence`;
        // it runs non-temporal stores as ordinary ones, which need none.)
        #[cfg(not(miri))]
        unsafe {
            _mm_sfence()
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        core::ptr::copy_nonoverlapping(src, dst, n)
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every length from 0 to 200 and a few larger ones, from every source and
    /// destination offset within 16 bytes: the streaming copy writes exactly the
    /// source's bytes, and not one byte outside the destination range.
    #[test]
    fn streaming_copy_matches_the_source_at_every_alignment() {
        // (Fewer lengths and source offsets under Miri, which runs each byte slowly:
        // the loads from the source are unaligned ones whatever its offset, while the
        // destination offset decides the head, the body and the tail.)
        let (lens, source_offsets): (Vec<usize>, Vec<usize>) = if cfg!(miri) {
            ((0..=70).chain([127, 128, 129, 200, 257]).collect(), vec![0, 1, 8, 15])
        } else {
            ((0..=200).chain([255, 256, 257, 1000, 4096 + 7]).collect(), (0..16).collect())
        };
        let src: Vec<u8> = (0..5000u32).map(|i| (i * 7 + 3) as u8).collect();
        for &n in &lens {
            for &so in &source_offsets {
                for dof in [0, 1, 7, 8, 15] {
                    let mut dst = vec![0xAAu8; n + 64];
                    // SAFETY: `src` holds `so + n` bytes and `dst` `dof + n` (both
                    // at most 4127 + 16 and 4103 + 64); distinct vectors.
                    unsafe { copy_streaming(dst.as_mut_ptr().add(dof), src.as_ptr().add(so), n) };
                    assert_eq!(
                        &dst[dof..dof + n],
                        &src[so..so + n],
                        "n {n}, source offset {so}, destination offset {dof}"
                    );
                    assert!(dst[..dof].iter().chain(&dst[dof + n..]).all(|&b| b == 0xAA), "n {n}: wrote outside");
                }
            }
        }
    }

    /// Overlapping ranges, large or small, are copied as `memmove` would.
    #[test]
    fn overlapping_ranges_copy_as_memmove() {
        // (Under Miri, the small case only: 4 MiB byte by byte takes minutes there.)
        let large = if cfg!(miri) { None } else { Some((STREAM_MIN_BYTES, 64)) };
        for (n, shift) in [(100usize, 3usize)].into_iter().chain(large) {
            let base: Vec<u8> = (0..n + shift).map(|i| (i % 251) as u8).collect();
            for forward in [true, false] {
                let mut buf = base.clone();
                let mut want = base.clone();
                let (from, to) = if forward { (0, shift) } else { (shift, 0) };
                want.copy_within(from..from + n, to);
                let p = buf.as_mut_ptr();
                // SAFETY: both ranges lie inside `buf` (`n + shift` bytes).
                unsafe { copy_bytes(p.add(to), p.add(from), n) };
                assert!(buf == want, "n {n}, forward {forward}");
            }
        }
    }

    /// A copy at the threshold takes the streaming path and writes the source's bytes.
    #[test]
    #[cfg_attr(miri, ignore = "4 MiB byte by byte takes minutes under Miri; the streaming loop is tested above")]
    fn large_copy_matches_the_source() {
        let n = STREAM_MIN_BYTES + 5;
        let src: Vec<u8> = (0..n).map(|i| (i % 253) as u8).collect();
        let mut dst = vec![0u8; n + 1];
        // SAFETY: both hold `n` bytes from their starts (`dst` one more); distinct vectors.
        unsafe { copy_bytes(dst.as_mut_ptr().add(1), src.as_ptr(), n) };
        assert!(dst[1..] == src[..] && dst[0] == 0);
    }
}
