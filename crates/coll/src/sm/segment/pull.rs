//! Reduce of vectors larger than a segment buffer on two ranks, by cross-memory copies
//! (CMA) with both ranks folding: each rank posts its pid and where its contribution is
//! (the root also where its result goes); the root reads the front part of the other
//! rank's vector (`process_vm_readv`) and folds it with its own into its result, while the
//! other rank reads the back part of the root's vector, folds it with its own and writes
//! the result into the root's (`process_vm_writev`). Each contribution is read where its
//! rank left it: a vector that did not change since the previous call is still in the
//! reader's cache, where the large region ([`Seg::reduce_big`]) has every line written
//! into a shared slot and read out of it again, two transfers between the cores per call.

use super::Seg;
use crate::base::helpers::Scratch;
use crate::{arg_err, Result};
use oxmpi_engine::{cma_copy, Cma, ErrorClass};
use std::io;
use std::sync::atomic::Ordering;

/// Largest reduce on two ranks by cross-memory copies ([`Seg::reduce_pull`]); larger ones
/// take the large region.
pub const PULL_MAX: usize = 1 << 20;

/// Vectors from this size on are folded by both ranks; below, the other rank's share
/// would cost it more in system calls and page pinning than it saves the root.
const SPLIT_MIN: usize = 32 << 10;

/// The root's share of a split vector, in percent: the other rank also writes its part
/// of the result back (measured best around 70 on a 2-vCPU Xeon from 32 KiB to 1 MiB).
const ROOT_SHARE: usize = 70;

/// Words of a rank's post: pid, contribution address, result address (the root's), bytes,
/// then the outcome word the other rank writes before it marks the collective done.
const WORDS: usize = 5;
const OUTCOME: usize = 4;

impl Seg {
    /// Reduce to `root` of `n` bytes on a communicator of two ranks that reach each other
    /// by CMA ([`Seg::cma_known`]), both ranks folding a part (see the module
    /// documentation): our contribution is `send` (`None` at the root in place: it is in
    /// `recv`), the root's result `recv`, folded in rank order (`x0 ∘ x1`; `red` computes
    /// `inout = in ∘ inout` on whole elements of `elem` bytes; `commutative` lets a rank
    /// fold the other way round and save a copy). Collective; both ranks take this path
    /// alike (the caller decides from arguments they share). An error on both ranks when
    /// the vectors' lengths differ, on a rank whose copy failed, and at the root when the
    /// other rank's failed (each rank is released either way).
    #[allow(clippy::too_many_arguments)]
    pub fn reduce_pull<F: Fn(&[u8], &mut [u8])>(
        &self,
        send: Option<&[u8]>,
        recv: Option<&mut [u8]>,
        root: usize,
        n: usize,
        (elem, commutative): (usize, bool),
        red: &F,
    ) -> Result<()> {
        debug_assert!(self.size == 2 && root < 2);
        let k = self.next();
        let (me, other) = (self.rank, 1 - self.rank);
        let acc = recv.filter(|_| me == root);
        let own = match (&acc, send) {
            (_, Some(s)) => s.as_ptr(),
            (Some(a), None) => a.as_ptr(),
            (None, None) => std::ptr::null(),
        };
        let out = acc.as_ref().map_or(0, |a| a.as_ptr() as u64);
        let mut post = [0u8; 8 * WORDS];
        let words = [u64::from(std::process::id()), own as u64, out, n as u64, 0];
        for (i, w) in words.iter().enumerate() {
            post[8 * i..8 * i + 8].copy_from_slice(&w.to_ne_bytes());
        }
        self.post(k, &post);
        self.wait_word(self.stamp(other, k), k);
        let word = |r: usize, i: usize| {
            // SAFETY: rank `r` stamped `k` (waited above, or ourselves), posting `WORDS`
            // words, and we finish `k` only after the reads.
            let w = unsafe { self.peer(r, k, 8 * i, 8) };
            u64::from_ne_bytes(w.try_into().expect("8 bytes"))
        };
        let (pid, theirs) = (word(other, 0) as i32, word(other, 1));
        let e = elem.max(1);
        // The root's part: the front, whole elements.
        let h = if n < SPLIT_MIN {
            n
        } else {
            n / 100 * ROOT_SHARE / e * e
        };
        // Rank order: the other rank's vector goes in front of ours when it is below us.
        let below = other < me;
        let cma_err = |e: io::Error| {
            arg_err(
                ErrorClass::Other,
                format!("reduce: a cross-memory copy between ranks failed: {e}"),
            )
        };
        if word(other, 3) as usize != n {
            // Both ranks see both lengths: both end here, nothing copied.
            self.finish(k);
            return Err(arg_err(
                ErrorClass::Truncate,
                format!(
                    "reduce: {} bytes from rank {other}, {n} here",
                    word(other, 3)
                ),
            ));
        }
        let r = if let Some(acc) = acc {
            // The back part is the other rank's to write (by CMA) until its done word says
            // it has: we touch only the front.
            let (front, _back) = acc.split_at_mut(h);
            // SAFETY: the other rank's contribution holds `n` bytes at `theirs`, unchanged
            // until it sees us done with `k` (after the reads).
            let r = unsafe {
                pull_fold(
                    send.map(|s| &s[..h]),
                    front,
                    (pid, theirs),
                    (below, commutative),
                    red,
                )
            };
            // The other rank writes the back part of `acc` and then marks `k` done.
            self.wait_word(self.seq_word(other), k);
            let fail = word(me, OUTCOME) != 0;
            r.map_err(cma_err).and_then(|()| {
                if fail {
                    Err(arg_err(
                        ErrorClass::Other,
                        "reduce: a cross-memory copy of the other rank failed",
                    ))
                } else {
                    Ok(())
                }
            })
        } else {
            let out = word(other, 2);
            let src = send.unwrap_or_default();
            // SAFETY: the root's contribution and result hold `n` bytes at `theirs` and
            // `out`, the back part ours to read and then write (the root only reads and
            // writes the front part) until we mark `k` done.
            let r = unsafe {
                push_fold(
                    &src[h..],
                    (pid, theirs + h as u64, out + h as u64),
                    (below, commutative),
                    red,
                )
            };
            if r.is_err() {
                // SAFETY: bytes 8 * OUTCOME.. of the root's buffer of `k`: written by
                // nobody else, read by the root only after our done word below.
                unsafe {
                    self.data(root, k)
                        .add(8 * OUTCOME)
                        .cast::<u64>()
                        .write_unaligned(1)
                };
            }
            self.finish(k);
            // The root reads our contribution until it is done with `k`.
            self.wait_word(self.seq_word(root), k);
            r.map_err(cma_err)
        };
        if me == root {
            self.finish(k);
        }
        if self.min_done.load(Ordering::Relaxed) < k {
            self.min_done.store(k, Ordering::Relaxed);
        }
        r
    }
}

/// Fold the other rank's vector (at `base` in process `pid`, as long as `acc`) with ours
/// (`send`, or `acc` in place) into `acc` in rank order (`below`: the other rank is below
/// us, its vector goes in front), by one cross-memory copy.
///
/// # Safety
/// The other rank's vector is readable at `base` and unchanged during the call.
unsafe fn pull_fold<F: Fn(&[u8], &mut [u8])>(
    send: Option<&[u8]>,
    acc: &mut [u8],
    (pid, base): (i32, u64),
    (below, commutative): (bool, bool),
    red: &F,
) -> io::Result<()> {
    let m = acc.len();
    if m == 0 {
        return Ok(());
    }
    match send {
        // Out of place, theirs read straight into the result and ours folded into it.
        Some(s) if !below || commutative => {
            // SAFETY: `acc` holds `m` bytes; caller contract for the remote side.
            unsafe { cma_copy(pid, acc.as_mut_ptr(), base, m, Cma::Read)? };
            red(s, acc); // ours ∘ theirs
        }
        _ => {
            let mut t = Scratch::new(m);
            let t = &mut t[..m];
            // SAFETY: `t` holds `m` bytes; caller contract for the remote side.
            unsafe { cma_copy(pid, t.as_mut_ptr(), base, m, Cma::Read)? };
            if let Some(s) = send {
                acc.copy_from_slice(s);
            }
            if below || commutative {
                red(t, acc); // theirs ∘ ours
            } else {
                red(acc, t); // ours ∘ theirs
                acc.copy_from_slice(t);
            }
        }
    }
    Ok(())
}

/// Read the root's vector part (at `theirs` in process `pid`, as long as `own`), fold it
/// with ours (`own`) in rank order (`below`: the root is below us) and write the result
/// at `out` in the root.
///
/// # Safety
/// The root's part is readable at `theirs` and its result part writable at `out`, and
/// nobody else touches them during the call.
unsafe fn push_fold<F: Fn(&[u8], &mut [u8])>(
    own: &[u8],
    (pid, theirs, out): (i32, u64, u64),
    (below, commutative): (bool, bool),
    red: &F,
) -> io::Result<()> {
    let m = own.len();
    if m == 0 {
        return Ok(());
    }
    let mut t = Scratch::new(2 * m);
    let (t, u) = t[..2 * m].split_at_mut(m);
    // SAFETY: `t` holds `m` bytes; caller contract for the remote side.
    unsafe { cma_copy(pid, t.as_mut_ptr(), theirs, m, Cma::Read)? };
    let res: &[u8] = if !below || commutative {
        red(own, t); // ours ∘ theirs
        t
    } else {
        u.copy_from_slice(own);
        red(t, u); // theirs ∘ ours
        u
    };
    // SAFETY: `res` holds `m` bytes (a write only reads it); caller contract for the
    // remote side.
    unsafe { cma_copy(pid, res.as_ptr().cast_mut(), out, m, Cma::Write) }
}
