//! Reduce of vectors larger than a segment buffer through the large region (the one of
//! [`Seg::allreduce_big`]): every rank but the root copies its vector into its slot in
//! chunks, publishing its progress after each, and the root folds every chunk as soon as
//! all ranks have written it, straight out of their slots into its result. The root reads
//! each other rank's data once, where the point-to-point tree moved it into a buffer first
//! and folded it afterwards; the writers' copies overlap the root's folds.

use super::{stream, Seg, LINE, SLOT};
use crate::base::helpers::Scratch;
use crate::{CollComm, Result};
use std::sync::atomic::{AtomicU64, Ordering};

/// Largest reduce vector through the large region ([`Seg::reduce_big`]).
pub const REDUCE_BIG_MAX: usize = super::BIG_MAX;

/// Smallest broadcast through the large region on more than 2 ranks when some rank yields
/// when idle ([`Seg::bcast_big`]; smaller ones by cross-memory copies). Measured at 4
/// ranks on 2 cores: 128 KiB 1.15 times slower through the region (4 copies instead of 3),
/// 256 KiB 1.5 times faster, 1 MiB 1.5 times (8 ranks 1.3 times).
pub const BCAST_BIG_MIN: usize = 256 * 1024;

/// Largest chunk: the root folds a chunk while the writers copy the next ones (a chunk of
/// each rank and of the result stay in the first-level cache).
const CHUNK: usize = 8 * 1024;
/// Smallest chunk (a vector is cut in at least 4 chunks down to this size).
const CHUNK_MIN: usize = 2 * 1024;

/// Segment of the blocking inclusive scan's chain through the region ([`Seg::scan_big`];
/// whole elements, see [`scan_segments`]): small enough that the ranks after the first
/// fold while those before them still copy (oversubscribed, the two CPUs' halves of the
/// chain overlap). Block placement, 3 interleaved rounds each, against 64 KiB segments
/// from 128 KiB (and the ranks folding every rank below them up to 64 KiB): np=8 32 KiB
/// 53.0 to 38.6 us, 64 KiB 83.4 to 56.2, 128 KiB 121 to 97, 1 MiB 1282 to 1159; np=4
/// 32 KiB 18.3 to 16.8, 64 KiB 31.0 to 25.7, 1 MiB 481 to 432.
const SCAN_CHAIN_SEGMENT: usize = 16 * 1024;

/// The segments (offset, length) of the blocking scan's chain of an `n`-byte vector of
/// `elem`-byte elements: [`SCAN_CHAIN_SEGMENT`] bytes rounded down to a multiple of
/// `8 * elem` (whole elements, each segment as aligned as the vector), the last shorter.
fn scan_segments(n: usize, elem: usize) -> impl Iterator<Item = (usize, usize)> {
    let unit = 8 * elem.max(1);
    let seg = (SCAN_CHAIN_SEGMENT / unit).max(1) * unit;
    (0..n).step_by(seg).map(move |o| (o, seg.min(n - o)))
}

/// Bits of a progress word that count the chunks written; the large operation's number
/// is above them, so a word only grows.
const CHUNK_BITS: u32 = 24;

/// A progress word's value once `done` chunks of large operation `this` are written.
fn progress(this: u64, done: usize) -> u64 {
    (this << CHUNK_BITS) | done as u64
}

/// The chunks of an `n`-byte vector of `elem`-byte elements, as `(offset, length)`: whole
/// elements each, the whole vector in one when `whole`.
fn chunks(n: usize, elem: usize, whole: bool) -> impl Iterator<Item = (usize, usize)> {
    let elem = elem.max(1);
    let step = if whole {
        n.max(1)
    } else {
        ((n / 4).clamp(CHUNK_MIN, CHUNK) / elem).max(1) * elem
    };
    (0..n).step_by(step).map(move |o| (o, step.min(n - o)))
}

impl Seg {
    /// Rank `r`'s progress word of the large reduce: [`progress`] of the chunks it has
    /// written into its slot (bytes 24..32 of its slot's first line).
    fn big_progress(&self, r: usize) -> &AtomicU64 {
        const _: () = assert!(32 <= LINE);
        // SAFETY: bytes 24..32 of slot `r`'s first line: inside the mapping, 8-aligned,
        // only accessed atomically.
        unsafe { &*(self.base.add(r * SLOT + 24).cast::<AtomicU64>()) }
    }

    /// Start a large operation on the region `g` (made): rank `r`'s slot as a function, the
    /// number of the previous large operation and of this one.
    pub(super) fn big_start<'g>(
        &self,
        g: &'g super::BigState,
    ) -> (impl Fn(usize) -> *mut u8 + Copy + 'g, u64, u64) {
        let big = g.0.as_ref().expect("made by big_region");
        // SAFETY: slot `r` of the region (`cap` bytes each, `size` of them).
        let slot = move |r: usize| unsafe { big.base.add(r * big.cap) };
        let last = self.last_big.load(Ordering::Relaxed);
        (slot, last, last + 1)
    }

    /// Rank `r`'s chunk `i` (`m` bytes at `o` of its slot, given by `slot`) of large
    /// operation `this`, once it has written it.
    ///
    /// # Safety
    /// `slot` gives the slots of the large region, of at least `o + m` bytes.
    unsafe fn big_view(
        &self,
        slot: impl Fn(usize) -> *mut u8,
        this: u64,
        (r, i): (usize, usize),
        (o, m): (usize, usize),
    ) -> &[u8] {
        self.wait_word(self.big_progress(r), progress(this, i + 1));
        // SAFETY: rank `r` published chunk `i` of this operation (acquired above) and
        // leaves its slot alone until our done word reaches this operation; the bytes are
        // within the slot (caller contract).
        unsafe { std::slice::from_raw_parts(slot(r).add(o).cast_const(), m) }
    }

    /// Wait until every other rank has read the slots of large operation `last` (ours
    /// included): we may then write ours.
    pub(super) fn big_wait_free(&self, last: u64) {
        for r in (0..self.size).filter(|&r| r != self.rank) {
            self.wait_word(self.done_word(r), last);
        }
    }

    /// We are done with large operation `this` (read what we needed of the others' slots):
    /// they may overwrite theirs for the next one.
    pub(super) fn big_end(&self, this: u64) {
        self.put_word(self.done_word(self.rank), this);
        self.last_big.store(this, Ordering::Relaxed);
    }

    /// Copy `part` to offset `o` of our slot `slot` and publish progress word `done`. From
    /// [`stream::STREAM_MIN`] bytes the copy may stream past our caches ([`stream::copy`]):
    /// the readers of the last large operation hold these lines, which a plain copy must
    /// fetch from them, slowly when their core is far.
    ///
    /// # Safety
    /// `slot` is our slot of the large region, with room for `o + part.len()` bytes, and
    /// nobody reads those bytes until we publish them.
    unsafe fn big_put(&self, slot: *mut u8, part: &[u8], o: usize, done: u64) {
        // SAFETY: caller contract; `stream::copy` fences its stores before the progress
        // word's release below.
        unsafe { stream::copy(part.as_ptr(), slot.add(o), part.len()) };
        self.put_word(self.big_progress(self.rank), done);
    }

    /// Inclusive (or, `exclusive`, exclusive) scan of `recv.len()` bytes (at most
    /// [`REDUCE_BIG_MAX`]) through the large region: every rank but the last copies its
    /// contribution (`send`, or `recv` in place when `None`) into its slot chunk by chunk,
    /// and folds each chunk of the ranks below it into its own (`x0 ∘ (x1 ∘ (… ∘ x_me))`,
    /// rank order whatever the operation) into `recv` as they come; rank 0's `recv` is left
    /// untouched by the exclusive scan. `red` computes `inout = in ∘ inout` on whole
    /// elements of `elem` bytes. Collective; false (nothing done, on every rank alike) when
    /// the region cannot be used. `a` is the communicator's collective view. An inclusive
    /// scan of more than [`crate::tune::SCAN_CHAIN_MIN`] bytes on more than 3 ranks (twice
    /// that on 3) is a chain instead, as the nonblocking one's, in segments of [`SCAN_CHAIN_SEGMENT`]: rank
    /// `r` folds each segment of rank `r - 1`'s prefix, read from its slot, with its own
    /// vector into `recv` and, below the last rank, copies it into its slot for `r + 1`
    /// (`p - 1` folds in all rather than `p (p - 1) / 2`; oversubscribed, 128 KiB-1 MiB in
    /// 64 KiB segments measured 1.1-1.9 times faster, then 16 KiB segments from 32 KiB
    /// faster still, see [`SCAN_CHAIN_SEGMENT`]; 16 KiB is level, left to the folds).
    pub fn scan_big<F: Fn(&[u8], &mut [u8])>(
        &self,
        a: &CollComm,
        send: Option<&[u8]>,
        recv: &mut [u8],
        (exclusive, elem): (bool, usize),
        red: &F,
    ) -> Result<bool> {
        let n = recv.len();
        debug_assert!(n <= REDUCE_BIG_MAX && send.is_none_or(|s| s.len() == n));
        let Some(g) = self.big_region(a, n)? else {
            return Ok(false);
        };
        let (slot, last, this) = self.big_start(&g);
        let me = self.rank;
        let view = |r: usize, i: usize, o: usize, m: usize| {
            // SAFETY: `slot` is the region's, whose slots hold `n >= o + m` bytes.
            unsafe { self.big_view(slot, this, (r, i), (o, m)) }
        };
        let writes = me + 1 < self.size;
        if writes {
            self.big_wait_free(last);
        }
        // On 3 ranks (3 folds against 2) the chain of 32 KiB was slower (cyclic 13.2 against
        // 15.4 us, block 11.8 against 12.9; 64 KiB 0.93x, 128 KiB 0.64x): from 64 KiB there.
        let min = crate::tune::SCAN_CHAIN_MIN * if self.size == 3 { 2 } else { 1 };
        if !exclusive && self.size > 2 && n > min {
            // The chain, as the nonblocking scan's: our prefix of a segment is rank
            // `me - 1`'s folded with our vector's (`(x0 ∘ … ∘ x(me-1)) ∘ x_me`), and goes
            // into our slot for rank `me + 1` (the last rank excepted): `p - 1` folds in
            // all, where every rank folding the ranks up to its own makes `p (p - 1) / 2`.
            for (i, (o, m)) in scan_segments(n, elem).enumerate() {
                let out = &mut recv[o..o + m];
                if let Some(s) = send {
                    out.copy_from_slice(&s[o..o + m]);
                }
                if me > 0 {
                    red(view(me - 1, i, o, m), out); // out = (x0 ∘ … ∘ x(me-1)) ∘ x_me
                }
                if writes {
                    // SAFETY: our slot, free (waited above); `o + m <= n <= cap`; rank
                    // `me + 1` reads segment `i` only once we publish it here.
                    unsafe { self.big_put(slot(me), out, o, progress(this, i + 1)) };
                }
            }
            self.big_end(this);
            return Ok(true);
        }
        for (i, (o, m)) in chunks(n, elem, self.some_yield).enumerate() {
            let out = &mut recv[o..o + m];
            if writes {
                let own = send.map_or(&*out, |s| &s[o..o + m]);
                // SAFETY: our slot, free (waited above); `o + m <= n <= cap`; published
                // before `out` is written (in place it is our input).
                unsafe { self.big_put(slot(me), own, o, progress(this, i + 1)) };
            }
            // The fold's last rank (below us when exclusive), then those below it.
            let top = if exclusive {
                me.checked_sub(1)
            } else {
                Some(me)
            };
            let Some(top) = top else { continue };
            if top != me {
                out.copy_from_slice(view(top, i, o, m));
            } else if let Some(s) = send {
                out.copy_from_slice(&s[o..o + m]);
            }
            for r in (0..top).rev() {
                red(view(r, i, o, m), out); // out = x_r ∘ out
            }
        }
        self.big_end(this);
        Ok(true)
    }

    /// Reduce to `root` of `n` bytes (at most [`REDUCE_BIG_MAX`]) through the large region:
    /// every other rank copies its contribution `send` into its slot chunk by chunk and is
    /// done; the root folds each chunk of every rank in rank order
    /// (`x0 ∘ (x1 ∘ (… ∘ x(p-1)))`, its own from `send`, or from `recv` in place when `send`
    /// is `None`) into `recv`, or when the operation is `commutative` every other rank's
    /// into the root's own (copied into `recv` while the others write). `red` computes
    /// `inout = in ∘ inout` on whole elements of `elem` bytes. Collective; false (nothing
    /// done, on every rank alike) when the region cannot be used. `a` is the
    /// communicator's collective view (to make the region).
    #[allow(clippy::too_many_arguments)]
    pub fn reduce_big<F: Fn(&[u8], &mut [u8])>(
        &self,
        a: &CollComm,
        send: Option<&[u8]>,
        recv: Option<&mut [u8]>,
        root: usize,
        n: usize,
        (elem, commutative): (usize, bool),
        red: &F,
    ) -> Result<bool> {
        debug_assert!(n <= REDUCE_BIG_MAX);
        let Some(g) = self.big_region(a, n)? else {
            return Ok(false);
        };
        let (slot, last, this) = self.big_start(&g);
        // Oversubscribed, a wait per chunk may cost a context switch: one chunk then (every
        // rank cuts the same chunks: `some_yield` is the same everywhere).
        let parts = || chunks(n, elem, self.some_yield);
        let view = |r: usize, i: usize, o: usize, m: usize| {
            // SAFETY: `slot` is the region's, whose slots hold `n >= o + m` bytes.
            unsafe { self.big_view(slot, this, (r, i), (o, m)) }
        };
        match recv {
            Some(acc) if self.rank == root && commutative => {
                // Our contribution first (while the others copy theirs), then every
                // other rank's folded into it as its chunks come: no copy in place.
                if let Some(s) = send {
                    acc.copy_from_slice(s);
                }
                for (i, (o, m)) in parts().enumerate() {
                    let out = &mut acc[o..o + m];
                    for r in (0..self.size).filter(|&r| r != root) {
                        red(view(r, i, o, m), out);
                    }
                }
            }
            Some(acc) if self.rank == root => {
                debug_assert_eq!(acc.len(), n);
                let top = self.size - 1;
                // In place below the last rank, our chunk is overwritten first: copied aside.
                let mut aside = Scratch::new(if send.is_none() && root != top {
                    parts().next().map_or(0, |(_, m)| m)
                } else {
                    0
                });
                for (i, (o, m)) in parts().enumerate() {
                    let out = &mut acc[o..o + m];
                    let own: &[u8] = match send {
                        Some(s) => &s[o..o + m],
                        None if root != top => {
                            aside[..m].copy_from_slice(out);
                            &aside[..m]
                        }
                        None => &[],
                    };
                    if root != top {
                        out.copy_from_slice(view(top, i, o, m));
                    } else if send.is_some() {
                        out.copy_from_slice(own);
                    }
                    for r in (0..top).rev() {
                        if r == root {
                            red(own, out);
                        } else {
                            red(view(r, i, o, m), out); // out = x_r ∘ out
                        }
                    }
                }
            }
            _ => {
                self.big_wait_free(last);
                let src = send.unwrap_or_default();
                debug_assert_eq!(src.len(), n);
                for (i, (o, m)) in parts().enumerate() {
                    // SAFETY: our slot, free (waited above); `o + m <= n <= cap`.
                    unsafe {
                        self.big_put(slot(self.rank), &src[o..o + m], o, progress(this, i + 1))
                    };
                }
            }
        }
        // We have read what we needed of this operation (a writer reads nothing).
        self.big_end(this);
        Ok(true)
    }
}

impl Seg {
    /// Broadcast of `buf` from `root` (at most [`REDUCE_BIG_MAX`] bytes) through the large
    /// region, when some rank yields when idle: the root copies `buf` into its slot (one
    /// chunk, as [`Seg::reduce_big`] cuts them then), publishes its progress and returns
    /// without waiting for anybody; every other rank copies it out of the root's slot into
    /// `buf`. One more copy than the cross-memory reads of [`Seg::rooted_cma`], and no
    /// system call, and the root is free as soon as its data is out: it waits for none of
    /// its readers (see [`BCAST_BIG_MIN`] for the sizes where that pays). The root's next
    /// large operation writes its slot only once every rank has read this one
    /// ([`Seg::big_wait_free`]). Collective; false (nothing done, on every rank alike) when
    /// no rank yields when idle or the region cannot be used. `a` is the communicator's
    /// collective view (to make the region).
    pub fn bcast_big(&self, a: &CollComm, buf: &mut [u8], root: usize) -> Result<bool> {
        let n = buf.len();
        debug_assert!(n <= REDUCE_BIG_MAX);
        if !self.some_yield {
            return Ok(false);
        }
        let Some(g) = self.big_region(a, n)? else {
            return Ok(false);
        };
        let (slot, last, this) = self.big_start(&g);
        let parts = chunks(n, 1, self.some_yield);
        if self.rank == root {
            self.big_wait_free(last);
            for (i, (o, m)) in parts.enumerate() {
                // SAFETY: our slot, free (waited above); `o + m <= n <= cap`.
                unsafe { self.big_put(slot(root), &buf[o..o + m], o, progress(this, i + 1)) };
            }
        } else {
            for (i, (o, m)) in parts.enumerate() {
                // SAFETY: `slot` is the region's, whose slots hold `n >= o + m` bytes.
                let src = unsafe { self.big_view(slot, this, (root, i), (o, m)) };
                buf[o..o + m].copy_from_slice(src);
            }
        }
        self.big_end(this);
        Ok(true)
    }
}
