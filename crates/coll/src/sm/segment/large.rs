//! Nonblocking reductions of vectors larger than a buffer (`MPI_Iallreduce`, `MPI_Ireduce`,
//! `MPI_Iscan`, `MPI_Iexscan`, `MPI_Ireduce_scatter(_block)`, up to [`NB_LARGE_MAX`] bytes) through the segment's
//! nonblocking large region: a slot of [`NB_LARGE_MAX`] bytes per rank after the ranks'
//! slots, in the segment's own mapping (made with it, so no collective has to make it; its
//! pages are only touched by the ranks that use it).
//!
//! A rank whose vector some rank needs copies it into its slot at the post and stamps its
//! nonblocking buffer of the collective; the ranks that need it fold it straight out of the
//! slot in their progress, in rank order (`x0 ∘ (x1 ∘ …)`, whatever the operation):
//! * reduce: every rank but the root posts and is done at once; the root folds every
//!   contribution into its result (its own from its input; in place below the last rank
//!   it posts too, since its result overwrites its input first);
//! * exclusive scan, and inclusive below [`SCAN_CHAIN_MIN`]: every rank but the last
//!   posts; each folds the ranks below its own (up to its own when inclusive);
//! * inclusive scan from [`SCAN_CHAIN_MIN`]: a chain, chunk by chunk ([`SCAN_CHUNK`]):
//!   rank 0 posts its vector, rank `r > 0` folds chunk `c` of rank `r - 1`'s prefix (its
//!   slot) with its own vector into its result once that rank has counted `c` among its
//!   published chunks (the first word of its nonblocking buffer of the collective), and
//!   below the last rank copies it into its slot and counts it: `p - 1` folds in all,
//!   where every rank folding the ranks up to its own made `p (p - 1) / 2` (np=8, 1 MiB,
//!   oversubscribed: measured faster);
//! * reduce-scatter: every rank posts and folds its block of every slot into its result
//!   (equal blocks of a commutative operation, the ranks pinned: by CPU, [`Seg::rs_grouped`]);
//!   one of equal blocks ([`Reduction::ReduceScatterBlock`]) whose vector is larger than a
//!   slot (up to [`RS_PHASED_MAX`]) goes in phases, each the same slice of every block
//!   ([`rs_phases`]): a rank copies the next phase into its slot once every rank has folded
//!   the previous one, and folds a phase once every rank has copied it in (two counters in
//!   its nonblocking buffer);
//! * allreduce: every rank posts and, once all have, folds its slice (the elements split
//!   evenly) of every slot into its result, writes it into its own slot (that slice of its
//!   slot is read by itself only) and marks it there (the first word of its nonblocking
//!   buffer of the collective); each rank copies every other slice once it is marked.
//!
//! Nothing waits: a slot is written only once every rank has finished the previous such
//! collective of the communicator (every rank's nonblocking done word has reached it; until
//! then the post waits for a later progress call), so several may be outstanding and are
//! finished in any order. Every rank takes the same path: the vector's size, the
//! communicator and the order of the collectives are the same everywhere.

use super::{post_len_of, stream, Seg, LEN_TAG, SLOT};
use std::sync::atomic::Ordering;

/// A reduction: `f(in, inout)`, `inout = in ∘ inout`.
type Fold<'a> = &'a dyn Fn(&[u8], &mut [u8]);

/// Largest vector of a nonblocking reduction through the large region (a rank's slot).
pub const NB_LARGE_MAX: usize = 1 << 20;

/// Chunk of an inclusive scan's chain through the large region (whole elements of it): a
/// rank passes its prefix on chunk by chunk, as the blocking chain scan's segments.
const SCAN_CHUNK: usize = crate::tune::SCAN_SEGMENT;
/// Smallest vector of an inclusive scan that runs as a chain, as the blocking scan's
/// (smaller ones: every rank folds the ranks up to its own, no rank waiting for another's
/// fold; np=4 8 KiB measured no faster as a chain).
const SCAN_CHAIN_MIN: usize = crate::tune::SCAN_CHAIN_MIN;

/// Offset of the nonblocking large region in the segment of `size` ranks: after the
/// ranks' slots, page-aligned.
fn region_at(size: usize) -> usize {
    (size * SLOT).next_multiple_of(4096)
}

/// Bytes of the segment of a communicator of `size` ranks, its nonblocking large region
/// included (it ends the segment).
pub(super) fn seg_end(size: usize) -> usize {
    region_at(size) + size * NB_LARGE_MAX
}

/// Which reduction runs through the nonblocking large region.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reduction {
    /// `MPI_Iallreduce` (input and output as long).
    Allreduce,
    /// `MPI_Ireduce` to `root` (output at the root only).
    Reduce {
        /// Root rank.
        root: usize,
    },
    /// `MPI_Iscan` (`exclusive`: `MPI_Iexscan`, no output on rank 0).
    Scan {
        /// Exclusive scan.
        exclusive: bool,
    },
    /// `MPI_Ireduce_scatter(_block)`: input the whole vector, output our block, `len` bytes
    /// at `at` of the vector.
    ReduceScatter {
        /// Offset of our block in the vector.
        at: usize,
        /// Bytes of our block.
        len: usize,
        /// The counts' [`crate::counts_mark`] (0 when every block is alike), posted with
        /// the vector's length: ranks that split the same sum otherwise (erroneous) fail
        /// alike instead of each folding its own block.
        mark: usize,
    },
    /// `MPI_Ireduce_scatter(_block)` whose blocks are all `block` bytes (ours at
    /// `rank * block`): input the whole vector, output our block. Through the nonblocking
    /// large region the vector may be larger than a slot: it goes in phases
    /// ([`rs_phases`]), each moving the same slice of every block.
    ReduceScatterBlock {
        /// Bytes of every rank's block.
        block: usize,
    },
}

impl Reduction {
    /// A [`Reduction::ReduceScatterBlock`] as the [`Reduction::ReduceScatter`] of rank
    /// `me` (the same blocks); every other reduction as it is.
    pub fn with_block_of(self, me: usize) -> Reduction {
        match self {
            Reduction::ReduceScatterBlock { block } => Reduction::ReduceScatter {
                at: me.saturating_mul(block),
                len: block,
                mark: 0,
            },
            red => red,
        }
    }
}

/// Largest vector of a [`Reduction::ReduceScatterBlock`] through the nonblocking large
/// region (in phases of at most a slot each).
pub const RS_PHASED_MAX: usize = 16 << 20;

/// Phases of a reduce-scatter of `p` blocks of `block` bytes (whole `elem`-byte elements)
/// through slots of `cap` bytes: phase `c` moves slice `c` ([`slice`]) of every block, all
/// of them in a slot (block `r`'s slice at `r` times the slice's length). `None` when not
/// even one element of every block fits a slot.
pub(crate) fn rs_phases(block: usize, elem: usize, p: usize, cap: usize) -> Option<usize> {
    let elem = elem.max(1);
    let per = cap / p.max(1) / elem;
    (per > 0).then(|| (block / elem).div_ceil(per).max(1))
}

/// One rank's progress in a nonblocking reduction through the large region.
#[derive(Debug, Default)]
pub(crate) struct Large {
    /// The sequence number of the previous such collective on the segment (our slot is
    /// free once every rank has finished it).
    prev: u64,
    /// Our vector is in our slot (or we post none).
    posted: bool,
    /// Our result (an allreduce: our slice of it) is computed; a phased reduce-scatter:
    /// every rank's length is checked (before the first fold).
    folded: bool,
    /// The allreduce slices copied into our result (bit `r`: rank `r`'s).
    got: u64,
    /// A phased reduce-scatter: the phases we copied into our slot; an inclusive scan:
    /// the chunks of our result computed (and, below the last rank, published).
    sent: usize,
    /// A phased reduce-scatter: the phases we folded out of every slot.
    read: usize,
    /// A reduce-scatter of equal blocks with a commutative operation, blocking or not: it
    /// may go by CPU ([`Seg::rs_grouped`]).
    grouped: bool,
}

/// Most ranks pinned to one CPU for which a nonblocking reduce-scatter folds by CPU
/// ([`Seg::group_nb`]): measured up to 4 (np=8 cyclic and block). With the partials folded
/// only once every rank had posted, 4 ranks a CPU lost near (np=8 cyclic 64 KiB, load
/// 20-29: launch minima 140-160 against 190-220 us; session 49, s49-irsfold); folded as
/// soon as our CPU's ranks have posted ([`Seg::rs_grouped_step`]) it was level near
/// (launch minima 134-135 against 139-141 us, new faster in 7-8 of 16 paired rounds, load
/// 6-20) and 1.5-2.4x faster far (18-21 of 24 rounds; session 50, s50-irs8).
const RS_GROUPED_NB_PER_CPU: usize = 4;

impl Seg {
    /// Let nonblocking reduction `red` (its state `st`) go by CPU ([`Seg::rs_grouped`]) when
    /// it is a reduce-scatter of equal blocks (a [`Reduction::ReduceScatter`] of mark 0),
    /// its operation `commutative` (as the blocking form's caller decides) and no CPU holds
    /// more than [`RS_GROUPED_NB_PER_CPU`] ranks: the same on every rank (MPI's counts and
    /// operation, the segment's CPUs). Call before each step; decided before our post.
    pub(crate) fn group_nb(&self, st: &mut Large, red: Reduction, commutative: bool) {
        if st.posted {
            return;
        }
        let cpus = &self.cpus;
        let few = || {
            cpus.iter()
                .all(|&c| cpus.iter().filter(|&&x| x == c).count() <= RS_GROUPED_NB_PER_CPU)
        };
        st.grouped =
            commutative && matches!(red, Reduction::ReduceScatter { mark: 0, .. }) && few();
    }
}

/// Bytes and offset of slice `i` of `p` of an `n`-byte vector of `elem`-byte elements
/// (split evenly between elements, the first ones one element longer).
fn slice(n: usize, elem: usize, p: usize, i: usize) -> (usize, usize) {
    let elem = elem.max(1);
    let (q, rem) = ((n / elem) / p, (n / elem) % p);
    let len = (q + usize::from(i < rem)) * elem;
    (len, (i * q + i.min(rem)) * elem)
}

impl Seg {
    /// Rank `r`'s slot of the nonblocking large region.
    fn large_slot(&self, r: usize) -> *mut u8 {
        debug_assert!(r < self.size);
        // SAFETY: the region ends the mapping, `NB_LARGE_MAX` bytes per rank (`seg_end`).
        unsafe { self.base.add(region_at(self.size) + r * NB_LARGE_MAX) }
    }

    /// Open nonblocking reduction `k` (its sequence number, [`Seg::open_nb`]) through the
    /// large region: its progress state (call in MPI's collective order, as `open_nb`).
    pub(crate) fn open_large(&self, k: u64) -> Large {
        Large {
            prev: self.nb_large_last.swap(k, Ordering::Relaxed),
            ..Large::default()
        }
    }

    /// Advance nonblocking reduction `k` (`red`, opened by [`Seg::open_large`] into `st`)
    /// of the `n`-byte vector `input` (pointer; `output`: the result, `n` bytes where this
    /// rank has one, else empty); `f` computes `inout = in ∘ inout` on whole elements of
    /// `elem` bytes. `None` while it has not ended, else whether it ended well (`false`: an
    /// output or a vector of the wrong length, nothing computed); either way it then read
    /// everything it needed, and the caller closes `k`. The input may be the output itself
    /// (in place).
    ///
    /// # Safety
    /// `input` is readable for `n <= NB_LARGE_MAX` bytes and `output` writable until the
    /// collective ends; `k` is open here; every rank runs the same `red` on the same `n`.
    pub(crate) unsafe fn large_step(
        &self,
        (st, k, red): (&mut Large, u64, Reduction),
        (input, n): (*const u8, usize),
        output: (*mut u8, usize),
        (f, elem): (Fold<'_>, usize),
    ) -> Option<bool> {
        if let Reduction::ReduceScatterBlock { block } = red {
            // SAFETY: caller contract.
            return unsafe { self.rs_block_step((st, k, block), (input, n), output, (f, elem)) };
        }
        let (me, p) = (self.rank, self.size);
        let last = p - 1;
        let aliased = output.1 > 0 && input == output.0.cast_const();
        // The bytes of our result, if we have one.
        let result = match red {
            Reduction::Allreduce => Some(n),
            Reduction::Reduce { root } => (me == root).then_some(n),
            Reduction::Scan { exclusive } => (!exclusive || me > 0).then_some(n),
            Reduction::ReduceScatter { len, .. } => Some(len),
            Reduction::ReduceScatterBlock { .. } => unreachable!("phased, above"),
        };
        let fits = result.is_none_or(|m| output.1 == m && m % elem.max(1) == 0);
        let inside = match red {
            Reduction::ReduceScatter { at, len, .. } => at.checked_add(len).is_some_and(|e| e <= n),
            _ => true,
        };
        // The length every rank posts and compares: a reduce-scatter's holds its counts'
        // mark too ([`crate::counts_mark`], in bits no length reaches).
        let marked = match red {
            Reduction::ReduceScatter { mark, .. } => n | mark,
            _ => n,
        };
        if n > NB_LARGE_MAX || n % elem.max(1) != 0 || !fits || !inside {
            return Some(false);
        }
        // An inclusive scan from `SCAN_CHAIN_MIN` runs as a chain of chunks (whole elements).
        let chain = red == Reduction::Scan { exclusive: false } && n >= SCAN_CHAIN_MIN;
        let chunk = (SCAN_CHUNK / elem.max(1)).max(1) * elem.max(1);
        // Whether we post our vector: some rank reads it (a reduce root in place below the
        // last rank reads its own from there, its input being overwritten first).
        let posts = match red {
            Reduction::Allreduce
            | Reduction::ReduceScatter { .. }
            | Reduction::ReduceScatterBlock { .. } => true,
            Reduction::Reduce { root } => me != root || (aliased && root != last),
            Reduction::Scan { .. } => me != last,
        };
        // Every rank stamps `k`, whether it posts its vector or not (then only its mark and
        // length word): a rank whose length put it on another path of the segment (an
        // erroneous count, `SmKind::AllreduceMsg`) waits for every rank's post.
        if !st.posted {
            let free =
                !posts || (0..p).all(|r| self.nb_done_word(r).load(Ordering::Acquire) >= st.prev);
            let slot = self.large_slot(me);
            // Our slot, free (checked: every rank finished the previous collective that
            // used the region, and nobody reads it for `k` before our stamp); the
            // allreduce's mark (the first word of our post) starts below `k`.
            // An inclusive scan's chain: rank 0 posts its whole vector (every chunk
            // ready at once); the others post nothing yet and publish their prefix
            // chunk by chunk, counted in that first word.
            // Whether our post may stream past our caches ([`stream::copy`]): not a
            // reduce root's (in place: it reads its slot itself), nor a reduce-scatter's
            // (each reader reads one block of it: np=4 cyclic, 64 KiB measured no
            // faster in far placements and 5-10 % slower near; 1 MiB far 0.93-1.04x).
            let streamed = match red {
                Reduction::Reduce { root } => me != root,
                Reduction::ReduceScatter { .. } | Reduction::ReduceScatterBlock { .. } => false,
                Reduction::Allreduce | Reduction::Scan { .. } => true,
            };
            let (copy, mark) = match (chain, me) {
                (true, 0) => (true, n.div_ceil(chunk)),
                (true, _) => (false, 0),
                (false, _) => (posts, 0),
            };
            let posted = free
                && self.try_post_with(k, |b| {
                    // SAFETY: `input` holds `n <= NB_LARGE_MAX` bytes (caller contract);
                    // `b` is our nonblocking buffer's `CAP >= 8` bytes.
                    unsafe {
                        if copy && streamed {
                            // Other ranks read it: it may stream past our caches
                            // (their cores hold these lines from the last such
                            // collective), fenced before the stamp's release.
                            stream::copy(input, slot, n);
                        } else if copy {
                            std::ptr::copy_nonoverlapping(input, slot, n);
                        }
                        b.cast::<u64>().write_unaligned(mark as u64);
                        // The length word after the mark: a rank whose length put it
                        // on another path reads it ([`post_len_of`]), and so does a
                        // reader of ours before it folds.
                        b.add(8)
                            .cast::<u64>()
                            .write_unaligned(LEN_TAG | marked as u64);
                    }
                });
            if !posted {
                return None;
            }
            st.posted = true;
        }
        // Whether a rank among `ranks` (each stamped `k`, acquired) posted another length
        // than ours (an erroneous count, which may have put it on another path).
        let differ = |ranks: std::ops::Range<usize>| {
            let posted = |r: usize| {
                post_len_of(|i| {
                    // SAFETY: the first four words of each post, within `CAP`, read
                    // atomically (a mark or a chain's count is updated by its owner).
                    unsafe { self.nb_word(r, k, i) }.load(Ordering::Acquire)
                })
            };
            self.differing(marked, ranks, posted).is_some()
        };
        // A view of `m` bytes at `o` of rank `r`'s slot (once its stamp of `k` is acquired).
        let view = |r: usize, o: usize, m: usize| {
            // SAFETY: rank `r` stamped `k` (acquired by the caller of `view`) after filling
            // its slot, which it leaves alone until we finish `k`; `o + m <= n`.
            unsafe { std::slice::from_raw_parts(self.large_slot(r).add(o).cast_const(), m) }
        };
        let out = |o: usize, m: usize| {
            // SAFETY: `output` is writable for `n >= o + m` bytes (caller contract), and no
            // other view of it is alive while this one is.
            unsafe { std::slice::from_raw_parts_mut(output.0.add(o), m) }
        };
        match red {
            Reduction::Reduce { root } if me == root => {
                if !(0..p).all(|r| r == me || self.stamped(r, k)) {
                    return None;
                }
                if differ(0..p) {
                    return Some(false);
                }
                let acc = out(0, n);
                // Our own vector: from our slot when posted, else from our input.
                if last != me || posts {
                    acc.copy_from_slice(view(last, 0, n));
                } else if !aliased {
                    // SAFETY: the input holds `n` bytes and does not overlap the output.
                    acc.copy_from_slice(unsafe { std::slice::from_raw_parts(input, n) });
                }
                for r in (0..last).rev() {
                    if r == me && !posts {
                        // SAFETY: as above (not in place: only in place do we post).
                        f(unsafe { std::slice::from_raw_parts(input, n) }, acc);
                    } else {
                        f(view(r, 0, n), acc); // acc = x_r ∘ acc
                    }
                }
                Some(true)
            }
            Reduction::Reduce { .. } => Some(true),
            Reduction::Scan { exclusive: false } if chain => {
                // The chain: our prefix of chunk `c` is rank `me - 1`'s prefix of it folded
                // with our vector's (`x_0 ∘ … ∘ x_me`), once that rank has counted `c`
                // among its published chunks; every chunk we compute (the last rank
                // excepted) goes into our slot for rank `me + 1` and is counted there.
                if me == 0 {
                    if !aliased {
                        // SAFETY: the input holds `n` bytes and does not overlap the output.
                        out(0, n).copy_from_slice(unsafe { std::slice::from_raw_parts(input, n) });
                    }
                    return Some(true);
                }
                // Before the first chunk: every rank below us posted our length (a rank
                // of another length fails, and so does every rank above it, which would
                // wait for chunks that never come).
                if st.sent == 0 {
                    if !(0..me).all(|r| self.stamped(r, k)) {
                        return None;
                    }
                    if differ(0..me) {
                        return Some(false);
                    }
                }
                // SAFETY: `8 <= CAP`; once stamped, the word is only accessed atomically.
                let count = |r: usize| unsafe { self.nb_word(r, k, 0) };
                let chunks = n.div_ceil(chunk);
                while st.sent < chunks {
                    let c = st.sent;
                    let ready =
                        self.stamped(me - 1, k) && count(me - 1).load(Ordering::Acquire) > c as u64;
                    if !ready {
                        return None;
                    }
                    let (o, m) = (c * chunk, chunk.min(n - c * chunk));
                    let acc = out(o, m);
                    if !aliased {
                        // SAFETY: the input holds `n >= o + m` bytes, apart from the output.
                        acc.copy_from_slice(unsafe { std::slice::from_raw_parts(input.add(o), m) });
                    }
                    // Rank `me - 1` counted chunk `c` (acquired) after writing it.
                    f(view(me - 1, o, m), acc); // acc = (x_0 ∘ … ∘ x_(me-1)) ∘ x_me
                    if me != last {
                        // SAFETY: chunk `c` of our own slot (ours since our post), read by
                        // rank `me + 1` only once we count it (below); `o + m <= n`. The
                        // copy may stream, fenced before the count's release.
                        unsafe { stream::copy(acc.as_ptr(), self.large_slot(me).add(o), m) };
                        count(me).store(c as u64 + 1, Ordering::Release);
                    }
                    st.sent += 1;
                }
                Some(true)
            }
            Reduction::Scan { exclusive } => {
                let top = if exclusive {
                    me.checked_sub(1)
                } else {
                    Some(me)
                };
                let Some(top) = top else {
                    return Some(true);
                };
                if !(0..=top).all(|r| r == me || self.stamped(r, k)) {
                    return None;
                }
                if differ(0..top + 1) {
                    return Some(false);
                }
                let acc = out(0, n);
                if top != me {
                    acc.copy_from_slice(view(top, 0, n));
                } else if !aliased {
                    // SAFETY: the input holds `n` bytes and does not overlap the output.
                    acc.copy_from_slice(unsafe { std::slice::from_raw_parts(input, n) });
                }
                for r in (0..top).rev() {
                    f(view(r, 0, n), acc); // acc = x_r ∘ acc
                }
                Some(true)
            }
            Reduction::ReduceScatter { at, len, .. } => {
                if st.grouped && self.rs_grouped(n, len) {
                    // SAFETY: every rank that posts our length runs this path (the same
                    // `n`, `len`, CPUs and flag everywhere); `k` is open; `output` holds
                    // `len` (checked); `at + len <= n` (checked).
                    return unsafe {
                        self.rs_grouped_step(st, k, (at, len, n), output.0, f, &differ)
                    };
                }
                if !(0..p).all(|r| self.stamped(r, k)) {
                    return None;
                }
                // Each block folds every vector: a length other than ours (erroneous
                // counts, which may have put that rank on another path) fails us, and
                // every rank of this path sees it alike.
                if differ(0..p) {
                    return Some(false);
                }
                // Our own contribution too from our slot: in place our block of the output
                // is the start of our input.
                let acc = out(0, len);
                acc.copy_from_slice(view(last, at, len));
                for r in (0..last).rev() {
                    f(view(r, at, len), acc); // acc = x_r ∘ acc
                }
                Some(true)
            }
            Reduction::ReduceScatterBlock { .. } => unreachable!("phased, above"),
            Reduction::Allreduce => {
                // The allreduce's mark of rank `r`'s slice (its post's first word).
                // SAFETY: `8 <= CAP`; once stamped, the word is only accessed atomically.
                let mark = |r: usize| unsafe { self.nb_word(r, k, 0) };
                if !st.folded {
                    if !(0..p).all(|r| self.stamped(r, k)) {
                        return None;
                    }
                    // Every rank posted (stamped, acquired): a length other than ours
                    // (erroneous) ends us before we fold or mark, as it does every rank
                    // of this path (each sees it), so that nobody waits for a mark.
                    if differ(0..p) {
                        return Some(false);
                    }
                    let (m, o) = slice(n, elem, p, me);
                    let mine = out(o, m);
                    mine.copy_from_slice(view(last, o, m));
                    for r in (0..last).rev() {
                        f(view(r, o, m), mine); // mine = x_r ∘ mine
                    }
                    // SAFETY: slice `me` of our own slot, read by ourselves only until we
                    // mark it (below); `o + m <= n`. The copy may stream (the other ranks
                    // read it), fenced before the mark's release.
                    unsafe { stream::copy(mine.as_ptr(), self.large_slot(me).add(o), m) };
                    mark(me).store(k, Ordering::Release);
                    st.folded = true;
                    st.got |= 1 << me;
                }
                for r in 0..p {
                    if st.got & 1 << r == 0 && mark(r).load(Ordering::Acquire) == k {
                        let (m, o) = slice(n, elem, p, r);
                        // Rank `r` marked its slice of the result (acquired): unchanged
                        // until we finish `k`.
                        out(o, m).copy_from_slice(view(r, o, m));
                        st.got |= 1 << r;
                    }
                }
                (st.got.count_ones() as usize == p).then_some(true)
            }
        }
    }
}

/// Smallest nonblocking broadcast through the large region on more than 2 ranks when some
/// rank yields when idle ([`Seg::bcast_large_step`]): the blocking broadcast's bound
/// ([`super::BCAST_BIG_MIN`], measured there).
const IBCAST_LARGE_MIN: usize = super::BCAST_BIG_MIN;

/// The first word of a root's post of a broadcast through the large region: where a root
/// that reads by cross-memory copies ([`crate::sm::SmKind::Single`]) posts its pid, so
/// that a rank taking the other path (an erroneous call whose counts straddle
/// [`IBCAST_LARGE_MIN`]) fails instead of reading the wrong bytes (no process has this
/// pid, and a root's pid is never this word).
pub(crate) const BCAST_LARGE_TAG: u64 = u64::MAX;

impl Seg {
    /// Whether a nonblocking broadcast of `n` bytes (the root's input, the others' output:
    /// the same everywhere in a correct call) goes through the large region
    /// ([`Seg::bcast_large_step`]): more than 2 ranks, some of which yield when idle, and
    /// [`IBCAST_LARGE_MIN`] to `coll_sm_nonblocking_large_max` bytes. The same answer on
    /// every rank for the same `n`.
    pub fn bcast_large(&self, n: usize) -> bool {
        self.size > 2
            && self.some_yield
            && n >= IBCAST_LARGE_MIN
            && n <= crate::sm::params::nonblocking_large_max()
    }

    /// Advance nonblocking broadcast `k` from `root` (opened by [`Seg::open_large`] into
    /// `st`) through the large region, as the blocking [`Seg::bcast_big`] does with its
    /// region: the root copies its `n`-byte input into its slot once the region is free
    /// (every rank finished the previous collective that used it), posts
    /// [`BCAST_LARGE_TAG`], 0 and `n`, and is done at once (it waits for none of its
    /// readers: its next use of the slot waits for them); every other rank, once the
    /// root's post is there, copies the root's `n` bytes out of the root's slot into its
    /// `output` and then stamps its own buffer (a root that took the cross-memory path in
    /// an erroneous call waits for that). `None` while it has not ended, else whether it
    /// ended well (`false`: the root posted another length than `output` has, or took another
    /// path; nothing copied).
    ///
    /// # Safety
    /// At the root `input` is readable for `n` bytes until the collective ends, elsewhere
    /// `output` writable for its length; `k` is open here; [`Seg::bcast_large`] holds for
    /// the caller's length.
    pub(crate) unsafe fn bcast_large_step(
        &self,
        (st, k, root): (&mut Large, u64, usize),
        (input, n): (*const u8, usize),
        output: (*mut u8, usize),
    ) -> Option<bool> {
        let me = self.rank;
        if me == root {
            if n > NB_LARGE_MAX {
                return Some(false);
            }
            let free =
                (0..self.size).all(|r| self.nb_done_word(r).load(Ordering::Acquire) >= st.prev);
            let slot = self.large_slot(me);
            let posted = free
                && self.try_post_with(k, |b| {
                    // SAFETY: `input` holds `n <= NB_LARGE_MAX` bytes (caller contract);
                    // our slot is free (checked above: every rank finished the previous
                    // collective that used the region) and read by nobody for `k` before
                    // our stamp; `b` is our nonblocking buffer's `CAP >= 24` bytes. The
                    // copy may stream (every other rank reads it, their cores holding these
                    // lines from the last such collective), fenced before the stamp.
                    unsafe {
                        stream::copy(input, slot, n);
                        let w = b.cast::<u64>();
                        w.write_unaligned(BCAST_LARGE_TAG);
                        w.add(1).write_unaligned(0);
                        w.add(2).write_unaligned(n as u64);
                    }
                });
            return posted.then_some(true);
        }
        if !st.folded {
            if !self.stamped(root, k) {
                return None;
            }
            // SAFETY: the root stamped `k` (acquired) and `k` is open here, so its post is
            // unchanged; its first 24 bytes lie within `CAP`.
            let word = |i: usize| unsafe {
                let w = self.peer_nb(root, k, 8 * i, 8);
                u64::from_ne_bytes(w.try_into().unwrap_or([0; 8]))
            };
            let len = usize::try_from(word(2)).unwrap_or(usize::MAX);
            // Exactly our length: a root that sends fewer bytes than we hold is an error
            // too (`MPI_ERR_COUNT`, as the blocking bcast says), found by the caller.
            let ok = word(0) == BCAST_LARGE_TAG && len == output.1 && len <= NB_LARGE_MAX;
            if ok && len > 0 {
                // SAFETY: the root filled `len` bytes of its slot before its stamp (acquired)
                // and leaves them alone until we finish `k`; `output` has room for them
                // (checked; writable by the caller contract) and lies outside the segment.
                unsafe {
                    std::ptr::copy_nonoverlapping(self.large_slot(root).cast_const(), output.0, len)
                };
            }
            st.folded = true;
            st.got = u64::from(ok);
        }
        // Tell a root that took the cross-memory path (an erroneous call) that we are done
        // with its buffer (later if our buffer is still in use); our first word says that
        // we take no message from a parent ([`crate::sm::nb::BCAST_MSG_TAG`]: a root whose
        // length goes by message, an erroneous call, reads it).
        // SAFETY: `b` is our buffer's `CAP >= 8` bytes.
        if !self.try_post_with(k, |b| unsafe { b.cast::<u64>().write_unaligned(0) }) {
            return None;
        }
        Some(st.got == 1)
    }
}

/// Words of a phased reduce-scatter's post (its nonblocking buffer): the phases the rank
/// copied into its slot, the phases it folded out of every slot, and the vector's bytes
/// (the fourth word, where [`post_len_of`] finds a post's length when neither of the first
/// two is a length word: a rank whose length put it on another path reads it, and so does
/// every rank of this path before its first fold).
const SENT: usize = 0;
const READ: usize = 1;
const LEN: usize = 3;
const _: () = assert!(8 * (LEN + 1) <= super::CAP && SENT < 2 && READ < 2);

impl Seg {
    /// [`Seg::large_step`] of a [`Reduction::ReduceScatterBlock`] of `block` bytes per
    /// rank: in [`rs_phases`] phases. Phase `c`: once every rank folded phase `c - 1` (the
    /// first: once the region is free, as every post), each rank copies slice `c` of each
    /// block of its input into its slot (block `r`'s at `r` times the slice's length) and
    /// counts it in its post's `SENT` word; once every rank has, each folds slice `c` of
    /// its own block out of every slot, in rank order, into its output, and counts it in
    /// its `READ` word. In place our output (the start of our input) gets slice `c` only
    /// after we copied slice `c` of block 0 into our slot; later phases read later
    /// slices. Each rank moves its vector once (into its slot) and reads the others'
    /// slices where they are, where the messages copy each block twice.
    ///
    /// # Safety
    /// As for [`Seg::large_step`], `n` bytes at most [`RS_PHASED_MAX`].
    unsafe fn rs_block_step(
        &self,
        (st, k, block): (&mut Large, u64, usize),
        (input, n): (*const u8, usize),
        output: (*mut u8, usize),
        (f, elem): (Fold<'_>, usize),
    ) -> Option<bool> {
        let (me, p) = (self.rank, self.size);
        let last = p - 1;
        let e = elem.max(1);
        let phases = rs_phases(block, e, p, NB_LARGE_MAX);
        let whole = p.checked_mul(block) == Some(n) && block % e == 0 && output.1 == block;
        let Some(phases) = phases.filter(|_| whole && n <= RS_PHASED_MAX) else {
            return Some(false);
        };
        // Rank `r`'s word `i` of its post (once its stamp of `k` is acquired).
        // SAFETY: `8 (READ + 1) <= CAP`; after the stamp the words are only accessed
        // atomically while `k` is open anywhere (we keep it open until we end).
        let word = |r: usize, i: usize| unsafe { self.nb_word(r, k, i) };
        // Copy slice `c` of every block of our input into our slot.
        let put = |c: usize| {
            let (m, o) = slice(block, e, phases, c);
            let slot = self.large_slot(me);
            for r in 0..p {
                // SAFETY: the input holds `p * block` bytes (checked) and `o + m <= block`;
                // the slot `NB_LARGE_MAX >= p * m` bytes (`rs_phases`), written by us only
                // while no rank reads it (the caller's checks). Plain, as the unphased
                // reduce-scatter's post (see `large_step`).
                unsafe {
                    std::ptr::copy_nonoverlapping(input.add(r * block + o), slot.add(r * m), m)
                };
            }
        };
        loop {
            let mut moved = false;
            if st.sent < phases {
                let c = st.sent;
                let ready = if c == 0 {
                    // The region is free once every rank finished the previous collective
                    // that used it; our buffer's words start at zero.
                    (0..p).all(|r| self.nb_done_word(r).load(Ordering::Acquire) >= st.prev)
                        && self.try_post_with(k, |b| {
                            put(0);
                            // SAFETY: `b` is our nonblocking buffer's `CAP >= 8 (LEN + 1)`
                            // bytes.
                            unsafe {
                                b.cast::<u64>().add(SENT).write_unaligned(1);
                                b.cast::<u64>().add(READ).write_unaligned(0);
                                b.cast::<u64>().add(LEN).write_unaligned(n as u64);
                            }
                        })
                } else if (0..p).all(|r| {
                    self.stamped(r, k) && word(r, READ).load(Ordering::Acquire) >= c as u64
                }) {
                    // Every rank folded phase `c - 1`: nobody reads our slot until we count
                    // phase `c` (below).
                    put(c);
                    word(me, SENT).store(c as u64 + 1, Ordering::Release);
                    true
                } else {
                    false
                };
                if ready {
                    st.sent += 1;
                    moved = true;
                }
            }
            // Before the first fold, once every rank posted: every rank's vector as long
            // as ours (a rank of another length, which may have taken another path of the
            // segment, fails every rank of this path, each seeing it alike; nothing is
            // folded, and nobody waits for a phase we would count).
            if !st.folded && st.sent > 0 && (0..p).all(|r| self.stamped(r, k)) {
                let posted = |r: usize| {
                    post_len_of(|i| {
                        // SAFETY: the first four words of each post (stamped, acquired),
                        // within `CAP`, read atomically (the counters change).
                        unsafe { self.nb_word(r, k, i) }.load(Ordering::Acquire)
                    })
                };
                if self.differing(n, 0..p, posted).is_some() {
                    return Some(false);
                }
                st.folded = true;
            }
            if st.folded
                && st.read < st.sent
                && (0..p).all(|r| {
                    self.stamped(r, k) && word(r, SENT).load(Ordering::Acquire) > st.read as u64
                })
            {
                let c = st.read;
                let (m, o) = slice(block, e, phases, c);
                // Every rank copied phase `c` into its slot (acquired) and leaves it
                // until we count our read.
                let view = |r: usize| {
                    // SAFETY: `(me + 1) * m <= p * m <= NB_LARGE_MAX` of rank `r`'s slot.
                    unsafe {
                        std::slice::from_raw_parts(self.large_slot(r).add(me * m).cast_const(), m)
                    }
                };
                // SAFETY: the output holds `block >= o + m` bytes (checked); in place it is
                // the start of the input, whose bytes `o..o + m` (slice `c` of block 0) we
                // copied into our slot already and no later phase reads.
                let acc = unsafe { std::slice::from_raw_parts_mut(output.0.add(o), m) };
                acc.copy_from_slice(view(last));
                for r in (0..last).rev() {
                    f(view(r), acc); // acc = x_r ∘ acc
                }
                st.read += 1;
                word(me, READ).store(st.read as u64, Ordering::Release);
                moved = true;
            }
            if st.read == phases {
                return Some(true);
            }
            if !moved {
                return None;
            }
        }
    }
}

impl Seg {
    /// Whether some rank yields when idle (more ranks than cores; the same on every rank):
    /// blocking allreduces then take the nonblocking large region
    /// ([`Seg::allreduce_large`]) rather than the large one ([`Seg::allreduce_big`]).
    pub fn some_yield(&self) -> bool {
        self.some_yield
    }

    /// Reduce-scatter of the `total`-byte vector `send` (`None`: in place, it starts `buf`)
    /// through the nonblocking large region, blocking: our block, `len` bytes at `at` of the
    /// vector, goes to `buf[..len]`; `f` computes `inout = in ∘ inout`. A collective of the
    /// nonblocking sequence (taken in MPI's collective order, as the nonblocking ones are):
    /// it posts, then polls the engine and `poll` (the pending nonblocking collectives,
    /// which may hold the region) until every rank has posted. `grouped` (the blocks are
    /// alike and `f` commutes; the same on every rank): ranks pinned to CPUs fold by CPU
    /// ([`Seg::rs_grouped_step`]). False (nothing computed) for lengths that do not fit
    /// (the same on every rank).
    pub fn reduce_scatter_large(
        &self,
        send: Option<&[u8]>,
        buf: &mut [u8],
        (at, len, total): (usize, usize, usize),
        (f, grouped): (Fold<'_>, bool),
        poll: &dyn Fn(),
    ) -> bool {
        if send.map_or(buf.len(), <[u8]>::len) < total || buf.len() < len {
            return false;
        }
        // In place both come from `buf`'s one pointer.
        let out = buf.as_mut_ptr();
        let input = send.map_or(out.cast_const(), <[u8]>::as_ptr);
        // (The counts' mark was compared at the caller's `Seg::reduction_gate`.)
        let red = Reduction::ReduceScatter { at, len, mark: 0 };
        // SAFETY: `input` holds `total` bytes and `buf` has room for `len` (checked); in
        // place the input is `buf` itself, read only when posting, before the result is
        // written; every rank reduces the same `total` bytes (MPI's counts).
        unsafe { self.large_blocking(red, (input, total), (out, len), (f, 1), poll, grouped) }
    }

    /// Reduce-scatter of `p` equal blocks of `block` bytes (whole `elem`-byte elements; the
    /// vector larger than a slot, at most [`RS_PHASED_MAX`]) through the nonblocking large
    /// region in phases ([`Reduction::ReduceScatterBlock`]), blocking: `send` is our whole
    /// contribution (`None`: in place, it starts `buf`), our block of the result goes to
    /// `buf[..block]`; `f` computes `inout = in ∘ inout`. Each rank copies its vector into
    /// its slot once, a slice of every block per phase, and folds its block's slices out of
    /// every slot, where the ring sends every block `p - 1` times, each a handoff to a
    /// neighbour. A collective of the nonblocking sequence as
    /// [`Seg::reduce_scatter_large`]; false (nothing computed) for lengths that do not fit
    /// (the same on every rank).
    pub fn reduce_scatter_phased(
        &self,
        send: Option<&[u8]>,
        buf: &mut [u8],
        (block, elem): (usize, usize),
        f: Fold<'_>,
        poll: &dyn Fn(),
    ) -> bool {
        let Some(total) = block.checked_mul(self.size) else {
            return false;
        };
        if send.map_or(buf.len(), <[u8]>::len) < total || buf.len() < block {
            return false;
        }
        // In place both come from `buf`'s one pointer.
        let out = buf.as_mut_ptr();
        let input = send.map_or(out.cast_const(), <[u8]>::as_ptr);
        let red = Reduction::ReduceScatterBlock { block };
        // SAFETY: `input` holds `total` bytes and `buf` has room for `block` (checked); in
        // place the input is `buf` itself, whose slice `c` of block 0 is copied into our
        // slot before our result's slice `c` is written (`rs_block_step`); every rank
        // reduces the same blocks (MPI's counts).
        unsafe { self.large_blocking(red, (input, total), (out, block), (f, elem), poll, false) }
    }

    /// Allreduce of `dst.len()` bytes (at most [`NB_LARGE_MAX`]) through the nonblocking
    /// large region, blocking: `src` is our contribution (`None`: in place, it is `dst`),
    /// `dst` gets the result; `f` computes `inout = in ∘ inout` on whole elements of `elem`
    /// bytes. Each rank posts its vector once, folds its slice of every slot and copies the
    /// others' slices as they are marked: one handoff each way, where the point-to-point
    /// algorithms wait for a partner at every step (a context switch each when ranks share
    /// cores). A collective of the nonblocking sequence as [`Seg::reduce_scatter_large`];
    /// false (nothing computed) for lengths that do not fit (the same on every rank).
    pub fn allreduce_large(
        &self,
        src: Option<&[u8]>,
        dst: &mut [u8],
        (f, elem): (Fold<'_>, usize),
        poll: &dyn Fn(),
    ) -> bool {
        let n = dst.len();
        if src.is_some_and(|s| s.len() != n) {
            return false;
        }
        let out = dst.as_mut_ptr();
        let input = src.map_or(out.cast_const(), <[u8]>::as_ptr);
        // SAFETY: `input` and `dst` hold `n` bytes (checked); in place the input is `dst`
        // itself, read only when posting, before any result is written; every rank reduces
        // the same `n` bytes (MPI's counts).
        unsafe {
            self.large_blocking(
                Reduction::Allreduce,
                (input, n),
                (out, n),
                (f, elem),
                poll,
                false,
            )
        }
    }

    /// Run reduction `red` through the nonblocking large region to its end (see
    /// [`Seg::large_step`] for the arguments), polling the engine and `poll` meanwhile;
    /// `grouped` as [`Large::grouped`] (the same on every rank).
    ///
    /// # Safety
    /// As for [`Seg::large_step`] (the collective is opened and closed here).
    unsafe fn large_blocking(
        &self,
        red: Reduction,
        input: (*const u8, usize),
        output: (*mut u8, usize),
        fold: (Fold<'_>, usize),
        poll: &dyn Fn(),
        grouped: bool,
    ) -> bool {
        let k = self.open_nb();
        let mut st = self.open_large(k);
        st.grouped = grouped;
        let mut spins = 0u32;
        let ok = loop {
            // SAFETY: caller contract; `k` is open (closed below).
            let end = unsafe { self.large_step((&mut st, k, red), input, output, fold) };
            if let Some(ok) = end {
                break ok;
            }
            poll();
            spins = spins.wrapping_add(1);
            if self.yield_idle || spins % 32 == 0 {
                self.eng.progress();
            }
            if self.yield_idle || spins % 4096 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        };
        self.close_nb(k);
        ok
    }
}

/// Smallest vector of a reduce-scatter by CPU ([`Seg::rs_grouped`]): below, the wait for
/// the other CPUs' partials costs more than the bytes it keeps on a CPU (np=8 cyclic, near
/// vCPUs, load 8: 8 KiB vectors 26-36 against 161-198 us; 32 KiB level; 128 KiB 358 against
/// 263).
const RS_GROUPED_MIN: usize = 128 << 10;

/// Where rank `r`'s block gets the partial of CPU `cpu`'s ranks in a reduce-scatter by
/// CPU ([`Seg::rs_grouped_step`]), `cpus` per rank as [`Seg::cpu`] (`r` not on `cpu`): the
/// rank of `cpu` that folds it and the index of the partial among that rank's. The ranks
/// of other CPUs than `cpu`'s, in rank order, go round-robin to `cpu`'s ranks.
/// Allocation-free: it runs for each other CPU on every poll of the wait for the partials.
pub(crate) fn rs_provider(cpus: &[u32], cpu: u32, r: usize) -> (usize, usize) {
    let on = cpus.iter().filter(|&&c| c == cpu).count();
    let j = cpus[..r].iter().filter(|&&c| c != cpu).count();
    let folder = (0..cpus.len())
        .filter(|&q| cpus[q] == cpu)
        .nth(j % on)
        .expect("`cpu` holds a rank");
    (folder, j / on)
}

impl Seg {
    /// Whether a reduce-scatter (blocking or not) of equal `len`-byte blocks of an `n`-byte
    /// vector with a commutative operation goes by CPU ([`Seg::rs_grouped_step`]): at most 64
    /// ranks, every rank pinned to one CPU, at least two CPUs and one with two ranks, at
    /// least [`RS_GROUPED_MIN`] bytes and room in a slot for the vector and the partials.
    /// The same answer on every rank.
    fn rs_grouped(&self, n: usize, len: usize) -> bool {
        let p = self.size;
        if p > 64 || len.checked_mul(p) != Some(n) || n < RS_GROUPED_MIN || 2 * n > NB_LARGE_MAX {
            return false;
        }
        if (0..p).any(|r| self.cpus[r] == 0) {
            return false;
        }
        let shared = (0..p).any(|r| (0..r).any(|q| self.cpus[q] == self.cpus[r]));
        let several = (0..p).any(|r| self.cpus[r] != self.cpus[0]);
        shared && several
    }

    /// A reduce-scatter of equal blocks by CPU, every rank's vector in its slot: for each
    /// block of a rank of another CPU, one rank of ours ([`rs_provider`]) folds our CPU's
    /// contributions to it into its slot after the vector and marks them (the first word of
    /// its post); each rank folds its CPU's contributions to its own block, then the partial
    /// of every other CPU once marked. One block a rank crosses CPUs, where every rank
    /// folding its block out of every slot reads the blocks of all the ranks of the other
    /// CPUs there (np=8 cyclic 64 KiB: 2 MiB a call against 512 KiB). Commutative
    /// operations only: the order of the folds follows the CPUs, not the ranks.
    ///
    /// The first part needs only our CPU's vectors: it runs as soon as our CPU's ranks have
    /// stamped `k` with our length, whatever the other CPUs' ranks do, so that a rank of
    /// another CPU that posts last finds its partials marked (one wait across CPUs, where
    /// waiting for every rank's post first made two). The other CPUs' partials are read
    /// once every rank stamped `k` with our length (`differ`: whether one of `ranks`, each
    /// stamped `k`, posted another length). On a length that differs (erroneous counts) it
    /// ends false, after our CPU's part may have been written into `out`.
    ///
    /// # Safety
    /// Every rank that posts our length runs this path; `k` is open here; `out` is writable
    /// for `len` bytes until the collective ends; `at + len <= n`.
    unsafe fn rs_grouped_step(
        &self,
        st: &mut Large,
        k: u64,
        (at, len, n): (usize, usize, usize),
        out: *mut u8,
        f: Fold<'_>,
        differ: &dyn Fn(std::ops::Range<usize>) -> bool,
    ) -> Option<bool> {
        let (me, p) = (self.rank, self.size);
        let mine = self.cpus[me];
        let view = |r: usize, o: usize| {
            // SAFETY: rank `r` stamped `k` (acquired) with our length after filling its
            // slot's first `n` bytes, and marked (acquired) before we read its partials past
            // them; it leaves them alone until we finish `k`; `o + len <= 2 n <=
            // NB_LARGE_MAX`.
            unsafe { std::slice::from_raw_parts(self.large_slot(r).add(o).cast_const(), len) }
        };
        // SAFETY: `out` is writable for `len` bytes (caller contract), no other view of it.
        let acc = unsafe { std::slice::from_raw_parts_mut(out, len) };
        // SAFETY: `8 <= CAP`; once stamped, the word is only accessed atomically.
        let mark = |r: usize| unsafe { self.nb_word(r, k, 0) };
        if !st.folded {
            let ours = || (0..p).filter(|&r| self.cpus[r] == mine);
            // Our CPU's vectors only: each rank of ours posted (stamped, acquired) our
            // length, else nothing is read (another length fails every rank of this path
            // once all have posted, below or at their own check). Checked before the
            // group is collected: a progress pass that finds a rank of ours not yet
            // posted allocates nothing.
            if !ours().all(|g| self.stamped(g, k)) {
                return None;
            }
            if ours().any(|g| differ(g..g + 1)) {
                return Some(false);
            }
            let group: Vec<usize> = ours().collect();
            for b in (0..p).filter(|&b| self.cpus[b] != mine) {
                let (r, q) = rs_provider(&self.cpus, mine, b);
                if r != me {
                    continue;
                }
                // SAFETY: our own slot past the vector (`n + (q + 1) len <= 2 n`: `q` is
                // below the ranks of other CPUs), read by others only once we mark it.
                let part = unsafe {
                    std::slice::from_raw_parts_mut(self.large_slot(me).add(n + q * len), len)
                };
                part.copy_from_slice(view(group[0], b * len));
                for &g in &group[1..] {
                    f(view(g, b * len), part);
                }
            }
            mark(me).store(k, Ordering::Release);
            acc.copy_from_slice(view(group[0], at));
            for &g in &group[1..] {
                f(view(g, at), acc);
            }
            st.folded = true;
        }
        // The other CPUs' partials: once every rank posted (stamped, acquired) our length; a
        // rank of another length (which may have taken another path) fails us, as it does
        // every rank of this path, none waiting for a mark.
        if !(0..p).all(|r| self.stamped(r, k)) {
            return None;
        }
        if differ(0..p) {
            return Some(false);
        }
        let mut all = true;
        let mut seen: u64 = 0;
        for c in (0..p).map(|r| self.cpus[r]).filter(|&c| c != mine) {
            let (r, q) = rs_provider(&self.cpus, c, me);
            if seen & 1 << r != 0 {
                continue;
            }
            seen |= 1 << r;
            if st.got & 1 << r != 0 {
                continue;
            }
            if mark(r).load(Ordering::Acquire) != k {
                all = false;
                continue;
            }
            f(view(r, n + q * len), acc);
            st.got |= 1 << r;
        }
        all.then_some(true)
    }
}

#[cfg(test)]
mod tests {
    use super::{rs_phases, rs_provider, slice, NB_LARGE_MAX};

    /// The partials of a reduce-scatter by CPU: each block of a rank off CPU `c` has one
    /// folder on `c`, the folders share them evenly and each one's indices are 0, 1, ...
    #[test]
    fn providers_share_the_blocks() {
        for cpus in [
            vec![1, 2, 1, 2, 1, 2, 1, 2],
            vec![1, 1, 1, 1, 2, 2, 2, 2],
            vec![1, 1, 1, 2, 2],
            vec![3, 1, 2, 1, 3, 3],
        ] {
            let p = cpus.len();
            for &c in &cpus {
                let mut got: Vec<Vec<usize>> = vec![Vec::new(); p];
                for r in (0..p).filter(|&r| cpus[r] != c) {
                    let (g, q) = rs_provider(&cpus, c, r);
                    assert_eq!(cpus[g], c, "{cpus:?} cpu {c} rank {r}");
                    got[g].push(q);
                }
                let on = cpus.iter().filter(|&&x| x == c).count();
                let off = p - on;
                for (g, qs) in got.iter().enumerate() {
                    assert_eq!(*qs, (0..qs.len()).collect::<Vec<_>>(), "{cpus:?} {g}");
                    assert!(qs.len() <= off.div_ceil(on), "{cpus:?} {g}");
                }
            }
        }
    }

    /// The phases of a reduce-scatter of equal blocks put one slice of every block in a
    /// slot, as few phases as that allows, and cover each block in whole elements.
    #[test]
    fn phases_fit_the_slot() {
        for (block, elem, p) in [
            (1 << 20, 1, 8),
            (1 << 20, 8, 4),
            (4104, 8, 3),
            (3 << 20, 4, 5),
        ] {
            let n = rs_phases(block, elem, p, NB_LARGE_MAX).unwrap();
            let longest = |n: usize| (0..n).map(|c| slice(block, elem, n, c).0).max().unwrap();
            assert!(
                p * longest(n) <= NB_LARGE_MAX,
                "block {block} p {p}: {n} phases fit"
            );
            assert!(
                n == 1 || p * longest(n - 1) > NB_LARGE_MAX,
                "block {block} p {p}: fewest"
            );
            assert_eq!(
                (0..n).map(|c| slice(block, elem, n, c).0).sum::<usize>(),
                block
            );
        }
        assert_eq!(rs_phases(1 << 20, 1, 8, NB_LARGE_MAX), Some(8));
        assert_eq!(rs_phases(64, 1 << 20, 2, NB_LARGE_MAX), None);
    }

    /// The allreduce's slices cover the vector in whole elements, back to back.
    #[test]
    fn slices_tile_the_vector() {
        for (n, elem) in [(4104, 8), (65536, 1), (1 << 20, 4), (4100, 4), (40, 8)] {
            for p in 2..=64 {
                let mut at = 0;
                for i in 0..p {
                    let (m, o) = slice(n, elem, p, i);
                    assert_eq!((o, m % elem), (at, 0), "n {n} elem {elem} p {p} i {i}");
                    at += m;
                }
                assert_eq!(at, n / elem * elem);
            }
        }
    }
}
