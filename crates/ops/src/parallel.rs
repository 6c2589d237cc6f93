//! Splitting work into blocks for XLA's thread pool.

use xla_ffi::{Context, Result};

/// How many elements of work make a task worth scheduling (a task round trip on
/// XLA's pool costs about a microsecond; this is tens of microseconds of work).
const MIN_TASK_WORK: usize = 1 << 15;

/// The number of blocks to split `items` items of `work_per_item` cost into: a few
/// per thread for balance, none smaller than [`MIN_TASK_WORK`].
///
/// Inlined: a call too small to split (most calls that time the per-call cost) is
/// answered without a call or a look at the pool.
#[inline]
pub(crate) fn block_count(ctx: &Context<'_>, items: usize, work_per_item: usize) -> usize {
    let total = items.saturating_mul(work_per_item.max(1));
    let by_work = total / MIN_TASK_WORK;
    if by_work < 2 {
        return 1;
    }
    blocks_on_pool(ctx, items, by_work)
}

/// [`block_count`] for work worth splitting: a few blocks per pool thread.
#[inline(never)]
fn blocks_on_pool(ctx: &Context<'_>, items: usize, by_work: usize) -> usize {
    let threads = ctx.thread_pool().num_threads();
    by_work.clamp(1, threads * 4).min(items.max(1))
}

/// Items per block, for `blocks` blocks over `items` items.
pub(crate) fn block_len(items: usize, blocks: usize) -> usize {
    items.div_ceil(blocks.max(1)).max(1)
}

/// Runs `f(block)` for each block on XLA's pool.
///
/// The pool's threads claim tasks in order, so plain block order would start
/// every thread in the first blocks, on the same fresh pages: each such page is
/// zeroed by the kernel once, on the first thread that touches it, while the
/// others wait on it (with huge pages, 2 MiB at a time). Blocks are claimed
/// [`spread`] instead: the first claim of each thread starts its own contiguous
/// segment of the range.
pub(crate) fn run_blocks(ctx: &Context<'_>, blocks: usize, f: impl Fn(usize) + Sync) -> Result<()> {
    if blocks <= 1 {
        f(0);
        Ok(())
    } else {
        let pool = ctx.thread_pool();
        let lanes = pool.num_threads().clamp(1, blocks);
        pool.for_each(blocks, |i| f(spread(i, blocks, lanes)))
    }
}

/// The block of claim `i` when `blocks` blocks are cut into `lanes` contiguous
/// segments (the first `blocks % lanes` one longer) and claimed a round at a time,
/// one block of each segment per round: a bijection of `0..blocks`.
#[inline]
fn spread(i: usize, blocks: usize, lanes: usize) -> usize {
    let (q, r) = (blocks / lanes, blocks % lanes);
    let (round, lane) = if i < q * lanes { (i / lanes, i % lanes) } else { (q, i - q * lanes) };
    lane * q + lane.min(r) + round
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn spread_is_a_bijection_that_starts_each_lane_in_its_own_segment() {
        for blocks in 1..70 {
            for lanes in 1..=blocks.min(9) {
                let order: Vec<usize> = (0..blocks).map(|i| spread(i, blocks, lanes)).collect();
                let mut seen = order.clone();
                seen.sort_unstable();
                assert_eq!(seen, (0..blocks).collect::<Vec<_>>(), "blocks {blocks} lanes {lanes}");
                // The first round: one block per segment, each its segment's first.
                let q = blocks / lanes;
                let starts: Vec<usize> = (0..lanes).map(|j| j * q + j.min(blocks % lanes)).collect();
                assert_eq!(order[..lanes], starts[..], "blocks {blocks} lanes {lanes}");
            }
        }
    }
}
