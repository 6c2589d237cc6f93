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
pub(crate) fn run_blocks(ctx: &Context<'_>, blocks: usize, f: impl Fn(usize) + Sync) -> Result<()> {
    if blocks <= 1 {
        f(0);
        Ok(())
    } else {
        ctx.thread_pool().for_each(blocks, f)
    }
}
