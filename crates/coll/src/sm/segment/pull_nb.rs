//! Nonblocking reduce, allreduce, reduce-scatter(_block) and inclusive scan of vectors
//! larger than a buffer on two ranks that reach each other by CMA: the protocols of
//! [`Seg::reduce_pull`], [`Seg::allreduce_pull`] and [`Seg::reduce_scatter_pull`] on the
//! nonblocking buffers, advanced by progress calls instead of waiting (`SmKind::Pair`; a
//! scan, as the blocking one on two ranks, is a reduce to rank 1, and rank 0 copies its
//! own vector into its result).
//!
//! The call posts our words in our nonblocking buffer of the collective (pid, where our
//! contribution and our result are, the bytes; [`super::pull::post_words`]) and stamps it.
//! A progress call that finds the other rank's stamp makes our copies and folds (the same
//! ones as the blocking forms, [`super::pull::reduce_work`] and
//! [`super::pull_all::pair_work`]) and then sets our *mark* (the word after the post, in our
//! own buffer): we are done with the other rank's memory, and our part of its result is
//! written. A rank ends once the other's mark is there when the other rank uses its memory
//! (reads its contribution, writes its result): every rank but a reduce's root whose vector
//! is not split, which ends right after its own copy. Nothing waits, so the two ranks may
//! post, test and wait in any order, and the progress thread may do the copies of a rank
//! that computes.

use super::pull::{post_words, reduce_work, Post, OUTCOME, SPLIT_MIN, WORDS};
use super::pull_all::{pair_tail, pair_work};
use super::{Reduction, Seg};
use crate::sm::nb::{Fold, Progress};
use std::io;
use std::sync::atomic::Ordering;

/// Word of a rank's nonblocking buffer that marks it done with the other rank's memory.
const MARK: usize = WORDS;

/// One rank's progress in a nonblocking pair reduction.
#[derive(Debug, Default)]
pub(crate) struct Pair {
    /// Our words are posted.
    posted: bool,
    /// Our copies are made (and our mark set): their outcome, `None` when the lengths
    /// differ.
    copied: Option<Option<io::Result<()>>>,
}

impl Seg {
    /// Advance nonblocking pair reduction `k` (`red`, see the module documentation):
    /// `input` our contribution (`n` bytes; in place the same memory as `output`, whose
    /// start is our block of a reduce-scatter), `output` our result (none at a reduce's
    /// other rank). `None` while pending; else whether it ended well (`Progress::Done`),
    /// with lengths that differ between the ranks or from our result (`Mismatch`, on both
    /// ranks: we then post an impossible length) or with a failed copy (`CopyFailed`, on
    /// the rank whose copy failed and on the rank whose result lacks its part).
    ///
    /// # Safety
    /// `input` is readable (in place: writable) and `output` writable until the collective
    /// ends; `k` is open here; both ranks run the same `red` on the same `n`.
    pub(crate) unsafe fn pair_step(
        &self,
        (st, k, red): (&mut Pair, u64, Reduction),
        (input, n): (*const u8, usize),
        output: (*mut u8, usize),
        (f, elem, commutative): (Fold<'_>, usize, bool),
    ) -> Option<Progress> {
        debug_assert!(self.size == 2);
        let (me, other) = (self.rank, 1 - self.rank);
        // An inclusive scan is a reduce to rank 1 (as the blocking scan on two ranks):
        // rank 0's result is its own vector, copied (out of place) once our copies for
        // the reduce are made. Rank 0 then takes part as a reduce's other rank, with no
        // result of its own there.
        let (red, own) = match red.with_block_of(me) {
            Reduction::Scan { exclusive: false } => (Reduction::Reduce { root: 1 }, me == 0),
            red => (red, false),
        };
        let own_output = output;
        let output = if own {
            (std::ptr::null_mut(), 0)
        } else {
            output
        };
        let in_place = output.1 > 0 && input == output.0.cast_const();
        // The length both ranks post and compare: a reduce-scatter's holds its counts'
        // mark ([`crate::counts_mark`]): ranks that split the same sum otherwise
        // (erroneous) both see a mismatch.
        let marked = match red {
            Reduction::ReduceScatter { mark, .. } => (n | mark) as u64,
            _ => n as u64,
        };
        // Our result: its bytes, and whether the other rank writes part of it.
        let (result, written) = match red {
            Reduction::Allreduce => (Some(n), true),
            Reduction::Reduce { root } => ((me == root).then_some(n), n >= SPLIT_MIN),
            Reduction::ReduceScatter { len, .. } => (Some(len), false),
            // As a `ReduceScatter` (above); an inclusive scan as a `Reduce` (above),
            // exclusive ones do not come here.
            Reduction::Scan { .. } | Reduction::ReduceScatterBlock { .. } => (None, false),
        };
        let fits = match red {
            Reduction::ReduceScatter { at, len, .. } => {
                at.checked_add(len).is_some_and(|e| e <= n) && output.1 == len
            }
            Reduction::Scan { .. } => false,
            _ => result.is_none_or(|m| output.1 == m),
        } && n % elem.max(1) == 0
            && (!own || own_output.1 == n);
        if !st.posted {
            // Arguments that do not fit post a length no rank has: both see a mismatch.
            let len = if fits { marked } else { u64::MAX };
            let out = if result.is_some() && written {
                output.0 as u64
            } else {
                0
            };
            let post = post_words([input as u64, out, len]);
            let posted = self.try_post_with(k, |b| {
                // SAFETY: `b` is our buffer's `CAP >= 8 (WORDS + 1)` bytes: the post,
                // then our mark, clear.
                unsafe {
                    std::ptr::copy_nonoverlapping(post.as_ptr(), b, post.len());
                    b.add(8 * MARK).cast::<u64>().write_unaligned(0);
                }
            });
            if !posted {
                return None;
            }
            st.posted = true;
        }
        if st.copied.is_none() {
            if !self.stamped(other, k) {
                return None;
            }
            // SAFETY: the other rank stamped `k` (acquired), and `k` is open here, so its
            // post is unchanged; `8 * WORDS <= CAP`.
            let w = Post::read(|i| unsafe { self.peer_nb(other, k, 8 * i, 8) });
            let r = (fits && w.len == marked).then(|| {
                // SAFETY: the other rank's post names its contribution (and result) of
                // `n` bytes, left alone and unchanged until it sees our mark; ours are
                // valid by the caller's contract.
                let r = unsafe {
                    self.pair_copies(
                        red,
                        (input, n),
                        output,
                        in_place,
                        &w,
                        (f, elem, commutative),
                    )
                };
                if r.is_err() && (red == Reduction::Allreduce || result.is_none()) {
                    // The other rank's result lacks our part.
                    // SAFETY: the outcome word of the other rank's buffer of `k`
                    // (stamped, open): read by its owner only after our mark.
                    unsafe { self.nb_word(other, k, OUTCOME) }.store(1, Ordering::Relaxed);
                }
                r
            });
            // SAFETY: our own buffer of `k`, stamped and open; the mark is only accessed
            // atomically from here on.
            unsafe { self.nb_word(me, k, MARK) }.store(1, Ordering::Release);
            if own && fits && own_output.0.cast_const() != input {
                // SAFETY: a scan's rank 0: `input` holds `n` readable bytes and its result
                // `own_output` has room for them (`fits`), both valid until the end
                // (caller contract); out of place (other addresses) MPI has them apart.
                unsafe { std::ptr::copy_nonoverlapping(input, own_output.0, n) };
            }
            st.copied = Some(r);
        }
        // The other rank uses our memory until its mark: it reads our contribution (all
        // but a reduce's root) or writes part of our result.
        let used = result.is_none() || !matches!(red, Reduction::Reduce { .. }) || written;
        let mismatch = matches!(st.copied, Some(None));
        // SAFETY: the other rank's buffer of `k` (stamped, open here).
        if used && !mismatch && unsafe { self.nb_word(other, k, MARK) }.load(Ordering::Acquire) == 0
        {
            return None;
        }
        let Some(Some(r)) = st.copied.take() else {
            return Some(Progress::Mismatch);
        };
        if let Reduction::ReduceScatter { at, len, .. } = red {
            if in_place && r.is_ok() {
                // SAFETY: in place, our vector (`n` bytes) is our result's memory,
                // writable (caller contract), and the other rank is done with it.
                let buf = unsafe { std::slice::from_raw_parts_mut(output.0, n) };
                pair_tail(None, buf, (at, len), false);
            }
        }
        // SAFETY: our own buffer of `k`: the other rank wrote its outcome word before its
        // mark, acquired above (or it never writes it: a reduce's root does not wait).
        let theirs = used && unsafe { self.nb_word(me, k, OUTCOME) }.load(Ordering::Relaxed) != 0;
        Some(if r.is_err() || theirs {
            Progress::CopyFailed
        } else {
            Progress::Done
        })
    }

    /// Our copies and folds of a pair reduction once the other rank's post `w` is there.
    ///
    /// # Safety
    /// As [`Seg::pair_step`], and the memory `w` names holds `n` bytes, left to us as the
    /// blocking forms' contracts say.
    unsafe fn pair_copies(
        &self,
        red: Reduction,
        (input, n): (*const u8, usize),
        output: (*mut u8, usize),
        in_place: bool,
        w: &Post,
        (f, elem, commutative): (Fold<'_>, usize, bool),
    ) -> io::Result<()> {
        let me = self.rank;
        // SAFETY: caller contract: `input` holds `n` readable bytes, `output` is writable;
        // out of place they do not overlap.
        let (send, out) = unsafe {
            (
                (!in_place).then(|| std::slice::from_raw_parts(input, n)),
                (output.1 > 0).then(|| std::slice::from_raw_parts_mut(output.0, output.1)),
            )
        };
        match red {
            // SAFETY: caller contract (the other rank's memory).
            Reduction::Reduce { root } => unsafe {
                reduce_work(me, (send, out), (root, n), (elem, commutative), w, f)
            },
            Reduction::Allreduce
            | Reduction::ReduceScatter { .. }
            | Reduction::ReduceScatterBlock { .. } => {
                let (all, (at, m)) = match red.with_block_of(me) {
                    Reduction::ReduceScatter { at, len, .. } => (false, (at, len)),
                    _ => (true, half(n, elem, me)),
                };
                // In place, the whole vector is where our result goes.
                let buf = match (send, out) {
                    // SAFETY: in place: `n` bytes of our result's memory (caller contract).
                    (None, _) => unsafe { std::slice::from_raw_parts_mut(output.0, n) },
                    (Some(_), Some(o)) => o,
                    (Some(_), None) => &mut [],
                };
                // SAFETY: caller contract (the other rank's memory).
                unsafe { pair_work(me, send, buf, ((at, m), n), (all, commutative), w, f) }
            }
            Reduction::Scan { .. } => Ok(()),
        }
    }
}

/// Offset and bytes of rank `rank`'s block of a two-rank allreduce of `n` bytes: rank 0
/// the front half (whole elements of `elem` bytes), rank 1 the back.
pub(super) fn half(n: usize, elem: usize, rank: usize) -> (usize, usize) {
    let e = elem.max(1);
    let h = n / 2 / e * e;
    if rank == 0 {
        (0, h)
    } else {
        (h, n - h)
    }
}
