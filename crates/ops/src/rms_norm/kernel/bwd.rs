//! The backward's row kernels: the dot product `sum_k dy_k * w_k * x_k` of a row,
//! and the pass that writes its `dx` and adds its `dweight` terms.

use super::chunk::{add_lanes, arr, load, load_tail, pad, reduce, store};
use super::{GROUP, L};
use crate::float::{AccFloat, Float};
use crate::slot::Slot;

/// `acc + d * w * x`, lane by lane.
#[inline(always)]
pub(super) fn add_dot3<A: AccFloat>(mut acc: [A; L], d: [A; L], x: [A; L], w: [A; L]) -> [A; L] {
    for i in 0..L {
        acc[i] += d[i] * w[i] * x[i];
    }
    acc
}

/// `sum_k dy_k * w_k * x_k` of one row, in `A`, grouped as [`sum_sq`].
#[inline(always)]
pub(super) fn dot3<Y: Float, X: Float, A: AccFloat>(dy: &[Y], x: &[X], w: &[A]) -> A {
    let mut total = [A::ZERO; L];
    let groups = dy.chunks(L * GROUP).zip(x.chunks(L * GROUP)).zip(w.chunks(L * GROUP));
    for ((dy, x), w) in groups {
        let mut acc = [A::ZERO; L];
        let (mut dc, mut xc, mut wc) = (dy.chunks_exact(L), x.chunks_exact(L), w.chunks_exact(L));
        for ((ds, xs), ws) in (&mut dc).zip(&mut xc).zip(&mut wc) {
            let (d, x) = (load::<Y, A>(arr(ds)), load::<X, A>(arr(xs)));
            acc = add_dot3(acc, d, x, *arr(ws));
        }
        if !dc.remainder().is_empty() {
            let d = load_tail::<Y, A>(dc.remainder());
            let x = load_tail::<X, A>(xc.remainder());
            acc = add_dot3(acc, d, x, pad(wc.remainder()));
        }
        total = add_lanes(total, acc);
    }
    reduce(total)
}

/// One chunk of the backward pass: returns `dx = r*w*dy - x*c` and `dw + dy*x*r`.
#[inline(always)]
pub(super) fn bwd_chunk<A: AccFloat>(dy: [A; L], x: [A; L], w: [A; L], r: A, c: A, mut dw: [A; L]) -> ([A; L], [A; L]) {
    let mut dx = x;
    for i in 0..L {
        dx[i] = r * (w[i] * dy[i]) - x[i] * c;
        dw[i] += dy[i] * x[i] * r;
    }
    (dx, dw)
}

/// Writes `dx` of one row and accumulates its `dweight` terms into `dw`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) fn bwd_row<Y: Float, X: Float, O: Slot<X>>(
    dy: &[Y],
    x: &[X],
    w: &[Y::Acc],
    r: Y::Acc,
    c: Y::Acc,
    dx: &mut [O],
    dw: &mut [Y::Acc],
) {
    type A<Y> = <Y as Float>::Acc;
    let (mut dc, mut xc, mut wc) = (dy.chunks_exact(L), x.chunks_exact(L), w.chunks_exact(L));
    let (mut oc, mut gc) = (dx.chunks_exact_mut(L), dw.chunks_exact_mut(L));
    for ((((ds, xs), ws), os), gs) in (&mut dc).zip(&mut xc).zip(&mut wc).zip(&mut oc).zip(&mut gc) {
        let (v, g) = bwd_chunk(load::<Y, A<Y>>(arr(ds)), load::<X, A<Y>>(arr(xs)), *arr(ws), r, c, *arr(gs));
        gs.copy_from_slice(&g);
        store::<X, A<Y>, O>(&v, os);
    }
    let (os, gs) = (oc.into_remainder(), gc.into_remainder());
    if !os.is_empty() {
        let (v, g) = bwd_chunk(
            load_tail::<Y, A<Y>>(dc.remainder()),
            load_tail::<X, A<Y>>(xc.remainder()),
            pad(wc.remainder()),
            r,
            c,
            pad(gs),
        );
        let len = gs.len();
        gs.copy_from_slice(&g[..len]);
        store::<X, A<Y>, O>(&v, os);
    }
}
