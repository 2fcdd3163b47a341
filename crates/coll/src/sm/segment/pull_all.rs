//! Allreduce and reduce-scatter(_block) of vectors larger than a segment buffer on two
//! ranks by cross-memory copies (CMA), without the point-to-point layer: each rank posts
//! its pid and where its contribution is (an allreduce rank also where its result goes);
//! each reads its block of the other rank's contribution with one `process_vm_readv` and
//! folds it with its own block in rank order (`x0 ∘ x1`); an allreduce rank then writes its
//! folded block straight into the other rank's result with one `process_vm_writev`. One
//! handoff each way before the copies (the posts), one after (the done words), both cores
//! folding half of the vector, and the speed no longer depends on the point-to-point
//! layer's choice of mechanism for each message.
//!
//! An allreduce writes into the other rank's result only the block the other rank leaves
//! alone (it folds and reads only its own block); in place, that block of the other's
//! vector is the one we have just read. A reduce-scatter's rank 1 folds in place where its
//! block is in its vector (rank 0 reads block 0 there) and moves the result to the start
//! of its buffer once rank 0 is done.

use super::pull::{pull_fold, pull_outcome, pull_same_len, Post};
use super::Seg;
use crate::Result;
use oxmpi_engine::{cma_copy, Cma};
use std::io;
use std::ops::RangeInclusive;

/// Allreduce vectors (bytes) on two ranks by cross-memory copies ([`Seg::allreduce_pull`]).
/// Below, the point-to-point exchange, eager up to 8 KiB, was measured faster (3.6-3.9 µs
/// against 5.2 at 8 KiB on a loaded 2-vCPU Xeon: two system calls per rank cost more than
/// eager messages); above, the large region (at 1 MiB 260-340 µs against 100-140).
pub const ALLREDUCE_PAIR: RangeInclusive<usize> = (8 << 10) + 1..=1 << 20;

/// Reduce-scatter vectors (bytes, the whole vector) on two ranks by cross-memory copies
/// ([`Seg::reduce_scatter_pull`]): from where the segment's buffers end (level with the
/// point-to-point algorithms at 5 KiB, twice as fast at 20 KiB), up to 2 MiB (blocks of
/// 1 MiB: the largest the benchmarks time; measured faster there too).
pub const REDUCE_SCATTER_PAIR: RangeInclusive<usize> = super::DATA + 1..=2 << 20;

/// Of [`REDUCE_SCATTER_PAIR`], the vectors a rank's contribution is read from memory its
/// rank has just written (in place: the result of its previous call starts it; a packed
/// copy: made at every call), so that the other rank's read takes every line from the
/// other core's cache: above 16 KiB. Up to there (blocks up to the 8 KiB eager limit on
/// two ranks) the point-to-point ring was measured faster: in place at np=2, per-call
/// medians over 3 rounds of 5000 on a loaded 2-vCPU Xeon, 4 KiB blocks 1.50 µs against
/// 2.47 by cross-memory copies (out of place, from a buffer left alone, 1.45 for both),
/// 8 KiB blocks 2.27 against 3.24; 10 KiB blocks (rendezvous) 4.47-4.80 against 3.71-3.79.
pub const REDUCE_SCATTER_PAIR_WRITTEN: RangeInclusive<usize> = (16 << 10) + 1..=2 << 20;

/// [`REDUCE_SCATTER_PAIR_WRITTEN`] for the nonblocking reduce-scatter (`SmKind::Pair`):
/// above 8 KiB. Its schedule of messages costs more than the blocking ring, so that in
/// place at np=2 it led the cross-memory copies at 4 KiB blocks (medians of interleaved
/// launches under load, near 3.59 to 2.81 us, far 6.26 to 5.46) but lost far at 8 KiB
/// blocks (9.0 against 11.5-12.8 us; session 51, s51-coll2, in `spot-checks-wave2.md`).
pub const IREDUCE_SCATTER_PAIR_WRITTEN: RangeInclusive<usize> =
    (8 << 10) + 1..=*REDUCE_SCATTER_PAIR_WRITTEN.end();

impl Seg {
    /// Allreduce of `dst` on a communicator of two ranks that reach each other by CMA
    /// ([`Seg::cma_known`]): our contribution is `src` (`None`: in place, it is in `dst`),
    /// folded in rank order (`x0 ∘ x1`; `red` computes `inout = in ∘ inout` on whole
    /// elements of `elem` bytes; `commutative` lets a rank fold the other way round and
    /// save a copy). Rank 0 folds the front half (whole elements), rank 1 the back (see
    /// the module documentation). Collective; both ranks take this path alike. An error on
    /// both ranks when the lengths differ, and on both when a copy failed (each rank is
    /// released either way).
    pub fn allreduce_pull<F: Fn(&[u8], &mut [u8]) + ?Sized>(
        &self,
        src: Option<&[u8]>,
        dst: &mut [u8],
        (elem, commutative): (usize, bool),
        red: &F,
    ) -> Result<()> {
        let n = dst.len();
        let block = super::pull_nb::half(n, elem, self.rank);
        self.pair_pull(src, dst, (block, n, 0), (true, commutative), red)
    }

    /// Reduce-scatter on a communicator of two ranks that reach each other by CMA: our
    /// contribution is `send` (`None`: in place, it starts `buf`), `n` bytes; our block of
    /// the result, bytes `at..at + m` of the vector (rank 0's block starts it, rank 1's
    /// ends it), goes to `buf[..m]`. `red` and `commutative` as for
    /// [`Seg::allreduce_pull`]. Collective. An error on both ranks when the lengths differ,
    /// on a rank whose copy failed.
    pub fn reduce_scatter_pull<F: Fn(&[u8], &mut [u8]) + ?Sized>(
        &self,
        send: Option<&[u8]>,
        buf: &mut [u8],
        (at, m, n, mark): (usize, usize, usize, usize),
        commutative: bool,
        red: &F,
    ) -> Result<()> {
        self.pair_pull(send, buf, ((at, m), n, mark), (false, commutative), red)
    }

    /// [`Seg::allreduce_pull`] (`all`) and [`Seg::reduce_scatter_pull`]: our block is `m`
    /// bytes at `at` of the `n`-byte vector.
    fn pair_pull<F: Fn(&[u8], &mut [u8]) + ?Sized>(
        &self,
        send: Option<&[u8]>,
        buf: &mut [u8],
        ((at, m), n, mark): ((usize, usize), usize, usize),
        (all, commutative): (bool, bool),
        red: &F,
    ) -> Result<()> {
        debug_assert!(self.size == 2);
        let what = if all { "allreduce" } else { "reduce_scatter" };
        let k = self.next();
        let input = send.map_or(buf.as_ptr(), <[u8]>::as_ptr) as u64;
        let output = if all { buf.as_ptr() as u64 } else { 0 };
        // The length posted and compared holds a reduce-scatter's counts mark (see
        // [`Seg::reduce_scatter`]); the copies below use `n`.
        let w = self.pull_meet(k, [input, output, (n | mark) as u64]);
        if let Err(e) = pull_same_len(&w, n | mark, what) {
            // Both ranks see both lengths: both end here, nothing copied.
            self.finish(k);
            return Err(e);
        }
        // SAFETY: the other rank posted `w` for `k` and leaves the memory it names alone
        // (and unchanged) until it sees us done with `k` (released below).
        let r = unsafe {
            pair_work(
                self.rank,
                send,
                buf,
                ((at, m), n),
                (all, commutative),
                &w,
                red,
            )
        };
        if all && r.is_err() {
            self.pull_fail_other(k);
        }
        self.pull_release(k);
        pair_tail(send, buf, (at, m), all);
        pull_outcome(r, all && self.pull_failed(k), what)
    }
}

/// Our copies and folds of a two-rank allreduce (`all`) or reduce-scatter once the other
/// rank's post `w` is there ([`Seg::allreduce_pull`], [`Seg::reduce_scatter_pull`]): our
/// block is `m` bytes at `at` of the `n`-byte vector, our contribution `send` (`None`: in
/// place, it starts `buf`), folded where our result goes (in place and in an allreduce
/// where it is in the vector, else at the start of `buf`: see [`pair_tail`]); an
/// allreduce's block is then written into the other rank's result. An error when a copy
/// failed (an allreduce's other rank then lacks our block: the caller tells it).
///
/// # Safety
/// The memory `w` names (the other rank's contribution, its result) holds `n` bytes,
/// unchanged (the block `at..at + m` of its result: ours to write) during the call.
pub(super) unsafe fn pair_work<F: Fn(&[u8], &mut [u8]) + ?Sized>(
    rank: usize,
    send: Option<&[u8]>,
    buf: &mut [u8],
    ((at, m), n): ((usize, usize), usize),
    (all, commutative): (bool, bool),
    w: &Post,
    red: &F,
) -> io::Result<()> {
    // Where our block of the result is folded: in place (and in an allreduce) where it is
    // in the vector, else at the start of `buf`.
    let to = if all || send.is_none() { at } else { 0 };
    debug_assert!(at + m <= n && send.is_none_or(|s| s.len() >= n) && buf.len() >= to + m);
    let below = rank == 1;
    // The rest of `buf` is the other rank's to read (our contribution in place) or write
    // (an allreduce's other block) until it is done.
    let acc = &mut buf[to..to + m];
    // SAFETY: caller contract (the other rank's contribution holds `n` bytes at `w.input`,
    // unchanged); `at + m <= n`.
    unsafe {
        pull_fold(
            send.map(|s| &s[at..at + m]),
            acc,
            (w.pid, w.input + at as u64),
            (below, commutative),
            red,
        )
    }?;
    if !all || m == 0 {
        return Ok(());
    }
    // SAFETY: `acc` holds `m` bytes (a write only reads them); caller contract: the other
    // rank's result holds `n` bytes at `w.output`, block `at..at + m` ours to write (it
    // touches only its own block).
    unsafe { cma_copy(w.pid, acc.as_mut_ptr(), w.output + at as u64, m, Cma::Write) }
}

/// After both ranks are done with a reduce-scatter ([`pair_work`]): in place, rank 1's
/// block moves to the start of `buf` (rank 0 read block 0 there).
pub(super) fn pair_tail(send: Option<&[u8]>, buf: &mut [u8], (at, m): (usize, usize), all: bool) {
    if !all && send.is_none() && at != 0 {
        buf.copy_within(at..at + m, 0);
    }
}
