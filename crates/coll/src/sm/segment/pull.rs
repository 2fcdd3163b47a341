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
pub(super) const SPLIT_MIN: usize = 32 << 10;

/// The root's share of a split vector, in percent: the other rank also writes its part
/// of the result back (measured best around 70 on a 2-vCPU Xeon from 32 KiB to 1 MiB).
const ROOT_SHARE: usize = 70;

/// Words of a rank's post: pid, contribution address, result address (the root's), bytes,
/// then the outcome word the other rank writes before it marks the collective done.
pub(super) const WORDS: usize = 5;
pub(super) const OUTCOME: usize = 4;

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
        let me = self.rank;
        let acc = recv.filter(|_| me == root);
        let own = match (&acc, send) {
            (_, Some(s)) => s.as_ptr(),
            (Some(a), None) => a.as_ptr(),
            (None, None) => std::ptr::null(),
        };
        let out = acc.as_ref().map_or(0, |a| a.as_ptr() as u64);
        let w = self.pull_meet(k, [own as u64, out, n as u64]);
        if let Err(e) = pull_same_len(&w, n, "reduce") {
            // Both ranks see both lengths: both end here, nothing copied.
            self.finish(k);
            return Err(e);
        }
        // SAFETY: the other rank posted `w` for `k` and leaves the memory it names alone
        // (and unchanged) until it sees us done with `k` (released below).
        let r = unsafe { reduce_work(me, (send, acc), (root, n), (elem, commutative), &w, red) };
        if me != root && r.is_err() {
            self.pull_fail_other(k);
        }
        // The root reads our contribution, and the other rank writes the back part of the
        // root's result, until each marks `k` done.
        self.pull_release(k);
        pull_outcome(r, me == root && self.pull_failed(k), "reduce")
    }

    /// Post our words of pull collective `k` (contribution address, result address,
    /// bytes; our pid and a clear outcome word added here) and wait for the other rank's.
    pub(super) fn pull_meet(&self, k: u64, words: [u64; 3]) -> Post {
        self.post(k, &post_words(words));
        let other = 1 - self.rank;
        self.wait_word(self.stamp(other, k), k);
        // SAFETY: the other rank stamped `k` (waited above), posting `WORDS` words, and we
        // finish `k` only after these reads.
        Post::read(|i| unsafe { self.peer(other, k, 8 * i, 8) })
    }

    /// Tell the other rank that its result of pull collective `k` lacks our part (a copy
    /// of ours failed): it reads that once we are done with `k` ([`Seg::pull_failed`]).
    pub(super) fn pull_fail_other(&self, k: u64) {
        // SAFETY: bytes 8 * OUTCOME.. of the other rank's buffer of `k` (stamped: we read
        // its post): written by nobody else, read by its owner only after our done word.
        unsafe {
            self.data(1 - self.rank, k)
                .add(8 * OUTCOME)
                .cast::<u64>()
                .write_unaligned(1)
        };
    }

    /// Whether the other rank said our result of pull collective `k` lacks its part (call
    /// after [`Seg::pull_release`]).
    pub(super) fn pull_failed(&self, k: u64) -> bool {
        // SAFETY: our own buffer of `k`, which we posted; the other rank wrote its outcome
        // word before its done word, which we acquired.
        let w = unsafe { self.peer(self.rank, k, 8 * OUTCOME, 8) };
        u64::from_ne_bytes(w.try_into().expect("8 bytes")) != 0
    }

    /// Mark pull collective `k` done here and wait until the other rank has too: each
    /// reads (and writes) the other's buffers until then.
    pub(super) fn pull_release(&self, k: u64) {
        self.finish(k);
        self.wait_word(self.seq_word(1 - self.rank), k);
        if self.min_done.load(Ordering::Relaxed) < k {
            self.min_done.store(k, Ordering::Relaxed);
        }
    }
}

/// The other rank's post of a pull collective ([`Seg::pull_meet`]).
pub(super) struct Post {
    pub(super) pid: i32,
    /// Address of its contribution.
    pub(super) input: u64,
    /// Address of its result (0: none).
    pub(super) output: u64,
    /// Bytes of its vector.
    pub(super) len: u64,
}

impl Post {
    /// The post whose word `i` is `word(i)` (8 bytes).
    pub(super) fn read<'a>(word: impl Fn(usize) -> &'a [u8]) -> Post {
        let w = |i: usize| u64::from_ne_bytes(word(i).try_into().unwrap_or([0; 8]));
        Post {
            pid: w(0) as i32,
            input: w(1),
            output: w(2),
            // An allreduce's length word ([`super::LEN_TAG`]) instead
            // of a pid: the other rank's allreduce takes another path (its length differs).
            len: super::post_len_of(w),
        }
    }
}

/// Our post of a pull collective: our pid, then the contribution address, the result
/// address and the bytes, then a clear outcome word (`WORDS` words).
pub(super) fn post_words([input, output, n]: [u64; 3]) -> [u8; 8 * WORDS] {
    let mut post = [0u8; 8 * WORDS];
    let words = [crate::sm::own_pid(), input, output, n, 0];
    for (i, w) in words.iter().enumerate() {
        post[8 * i..8 * i + 8].copy_from_slice(&w.to_ne_bytes());
    }
    post
}

/// Our copies and folds of a two-rank reduce to `root` of `n` bytes once the other rank's
/// post `w` is there ([`Seg::reduce_pull`]): `send` our contribution (`None` at the root
/// in place: it is in `acc`), `acc` the root's result (`None` elsewhere). The root folds
/// the front part (all of it below `SPLIT_MIN`) into `acc`; the other rank folds the back
/// part and writes it into the root's result.
///
/// # Safety
/// The memory `w` names (the other rank's contribution, the root's result) holds `n`
/// bytes, unchanged (the back of the root's result: ours to write) during the call.
pub(super) unsafe fn reduce_work<F: Fn(&[u8], &mut [u8]) + ?Sized>(
    me: usize,
    (send, acc): (Option<&[u8]>, Option<&mut [u8]>),
    (root, n): (usize, usize),
    (elem, commutative): (usize, bool),
    w: &Post,
    red: &F,
) -> io::Result<()> {
    let (pid, theirs) = (w.pid, w.input);
    let e = elem.max(1);
    // The root's part: the front, whole elements.
    let h = if n < SPLIT_MIN {
        n
    } else {
        n / 100 * ROOT_SHARE / e * e
    };
    // Rank order: the other rank's vector goes in front of ours when it is below us.
    let below = 1 - me < me;
    if let Some(acc) = acc.filter(|_| me == root) {
        // The back part is the other rank's to write (by CMA) until its done word says it
        // has: we touch only the front.
        let (front, _back) = acc.split_at_mut(h);
        // SAFETY: caller contract (the other rank's contribution holds `n` bytes at
        // `theirs`, unchanged).
        unsafe {
            pull_fold(
                send.map(|s| &s[..h]),
                front,
                (pid, theirs),
                (below, commutative),
                red,
            )
        }
    } else {
        let src = send.unwrap_or_default();
        // SAFETY: caller contract: the root's contribution and result hold `n` bytes at
        // `theirs` and `w.output`, the back part ours to read and then write (the root
        // only reads and writes the front part).
        unsafe {
            push_fold(
                &src[h..],
                (pid, theirs + h as u64, w.output + h as u64),
                (below, commutative),
                red,
            )
        }
    }
}

/// An error on both ranks when the vectors' lengths differ (`what`: the collective).
pub(super) fn pull_same_len(w: &Post, n: usize, what: &str) -> Result<()> {
    if w.len == n as u64 {
        return Ok(());
    }
    // As a broadcast's reader: the other rank's longer vector truncates ours.
    Err(crate::base::helpers::lengths_differ(
        w.len,
        n,
        format!("{what}: {} bytes from the other rank, {n} here", w.len),
    ))
}

/// The outcome of a pull collective: our copies' `r`, and whether the other rank's failed
/// (`theirs`: our result lacks its part).
pub(super) fn pull_outcome(r: io::Result<()>, theirs: bool, what: &str) -> Result<()> {
    r.map_err(|e| {
        arg_err(
            ErrorClass::Other,
            format!("{what}: a cross-memory copy between ranks failed: {e}"),
        )
    })?;
    if theirs {
        return Err(arg_err(
            ErrorClass::Other,
            format!("{what}: a cross-memory copy of the other rank failed"),
        ));
    }
    Ok(())
}

/// Fold the other rank's vector (at `base` in process `pid`, as long as `acc`) with ours
/// (`send`, or `acc` in place) into `acc` in rank order (`below`: the other rank is below
/// us, its vector goes in front), by one cross-memory copy.
///
/// # Safety
/// The other rank's vector is readable at `base` and unchanged during the call.
pub(super) unsafe fn pull_fold<F: Fn(&[u8], &mut [u8]) + ?Sized>(
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
unsafe fn push_fold<F: Fn(&[u8], &mut [u8]) + ?Sized>(
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
