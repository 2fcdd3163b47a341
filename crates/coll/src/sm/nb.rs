//! Nonblocking collectives of small vectors on the segment: the post writes our
//! contribution into our buffer of the collective (no message, no schedule of rounds), and
//! each progress call looks at the stamps the result needs; once they are all there, the
//! result is computed from the ranks' buffers exactly as the blocking forms do (reductions
//! folded in rank order) and the collective is closed.
//!
//! Nothing here ever waits: a buffer still in use for nonblocking collective
//! `k - NB_NBUF` defers the post to a later progress call. Our nonblocking done word stays
//! below the oldest open one ([`Seg::open_nb`]), so no rank reuses a buffer we may still
//! read, whatever order they finish in. Blocking collectives have their own sequence and
//! buffers ([`super`]), so they may run in between in any order.
//!
//! Every rank takes the same decision (sizes in bytes that MPI requires to match, the
//! communicator): the caller makes the choice with [`SmKind::fits`].
//!
//! The blocking forms of the same collectives ([`Seg::begin`], [`Seg::end`]) post, wait
//! and compute the result with the same rules ([`SmKind::posts`], [`SmKind::needs`],
//! [`SmKind::compute`]) on the blocking buffers.

use super::segment::{chunk_for, copy_own, trade, Large, Pair, Reduction, BCAST_LARGE_TAG};
use super::segment::{lengths_error, post_len_of, LEN_TAG};
use super::{own_pid, Seg, CAP, DATA};
use crate::arg_err;
use crate::base::helpers::{bcast_differs, bcast_tree};
use crate::sched::OwnedOp;
use oxmpi_engine::{cma_copy, Cma, CommId, Engine, ErrorClass, ReqId};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A reduction as the results are computed with it: `f(in, inout)`, `inout = in ∘ inout`.
pub type Fold<'a> = &'a dyn Fn(&[u8], &mut [u8]);

/// Which collective, with what its result needs. Sizes in bytes; `block` is one rank's
/// block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SmKind {
    /// `MPI_Ibarrier`.
    Barrier,
    /// `MPI_Ibcast` from `root` (the root's input is the data, the others' output) of at
    /// most [`DATA`] bytes: the root posts [`BCAST_SMALL_TAG`], 0, its length and its data
    /// (at [`BCAST_AT`]) and is done; every other rank posts its own first word (0: it
    /// takes no message) and copies the data once the root's post says this path and its
    /// own length, else fails (the root's post of every broadcast path says the path and
    /// the length: a rank whose length differs from the root's, which may put it on
    /// another path, fails with `MPI_ERR_TRUNCATE` or `MPI_ERR_COUNT` instead of waiting).
    /// Read by [`SmNb::progress`], not [`SmKind::compute`].
    Bcast {
        /// Root rank.
        root: usize,
    },
    /// `MPI_Ibcast` from `root` whose length goes by message (larger than the single
    /// copy, or no cross-memory copies, and not through the large region): every rank
    /// posts [`BCAST_MSG_TAG`], 0 and its length on the segment first, so that a rank
    /// whose length put it on another path (an erroneous call) sees that the root sends
    /// messages and fails, and a rank of this path sees a root of another one. Then the
    /// binomial tree of the point-to-point ibcast (`CollComm::ibcast`, its length checks
    /// too), on a tag derived from the segment's sequence: a rank receives from its parent
    /// only when the root and each of its ancestors posted this tag (else it fails, and
    /// nobody sends to it). The root sends to each of its children at once, without
    /// waiting for their posts (one cache-line round trip less before the data leaves):
    /// a child of the root on another path takes that message into nothing before it ends
    /// ([`SmNb::drain`]). Every other rank sends only to children that posted the tag
    /// ([`SmNb::bcast_takers`]). Input and output as for [`SmKind::Bcast`]. Read by
    /// [`SmNb::progress`]; the schedule adds the tree's rounds once the segment's part
    /// ended, but below the root it posts the receive from the parent at once and cancels
    /// it when that part fails (`Schedule::shared`, `Schedule::progress`).
    BcastMsg {
        /// Root rank.
        root: usize,
    },
    /// `MPI_Iallreduce` (input and output as long). Every rank posts a length word
    /// ([`LEN_TAG`] and its bytes) and then its vector, and checks the others' lengths
    /// before it folds: a rank whose length differs (erroneous) fails, and so does every
    /// rank that sees it ([`Progress::Lengths`]).
    Allreduce,
    /// `MPI_Iallreduce`, `MPI_Ireduce`, `MPI_Iscan`, `MPI_Iexscan` or
    /// `MPI_Ireduce_scatter(_block)` whose vector goes by message (it does not fit a buffer, nor is it reduced on the segment by cross-memory
    /// copies or through the large region; every rank of those paths posts at least its
    /// length word and stamps, whether it posts its vector or not): every
    /// rank posts its length word first, as [`SmKind::Allreduce`], so that a rank whose
    /// length put it on another path of the segment (an erroneous call) meets it there and
    /// fails instead of waiting; once every length agrees, the point-to-point rounds
    /// (`CollComm::iallreduce_msg`, `CollComm::ireduce_msg`, `CollComm::iscan_msg`,
    /// `CollComm::ireduce_scatter_msg`) on a tag derived from the segment's sequence. Read by
    /// [`SmNb::progress`].
    AllreduceMsg,
    /// `MPI_Ireduce` to `root` (output at the root only). Every rank posts its length word
    /// and its vector, as [`SmKind::Allreduce`]; the root checks every rank's length before
    /// it folds (an erroneous count fails there, [`Progress::Lengths`], also when it put
    /// that rank on another path).
    Reduce {
        /// Root rank.
        root: usize,
    },
    /// `MPI_Iscan` (`exclusive`: `MPI_Iexscan`, no output on rank 0). Posts as
    /// [`SmKind::Reduce`]; each rank checks the lengths of the ranks it folds.
    Scan {
        /// Exclusive scan.
        exclusive: bool,
    },
    /// `MPI_Ialltoall`: input and output `size` blocks. A rank posts the blocks for the
    /// other ranks only and copies its own from the input to the output itself.
    Alltoall {
        /// Bytes per block.
        block: usize,
    },
    /// `MPI_Allgather`, and `MPI_Iallgather` of predefined types: input our block, output
    /// `size` blocks (our own too, as for allgatherv, placed by the rank itself:
    /// [`SmKind::own_place`]), no counts or offsets to allocate.
    Allgather {
        /// Bytes per block.
        block: usize,
    },
    /// `MPI_Iallgatherv`: input our block, output block `i` (`counts[i]` bytes) at
    /// `displs[i]` (our own block too, copied from the input at the post: in place, it is
    /// the data we posted from there).
    Allgatherv {
        /// Bytes per rank.
        counts: Vec<usize>,
        /// Output offset per rank.
        displs: Vec<usize>,
    },
    /// `MPI_Igather` to `root`: input our block, output (root) `size` blocks (the root's
    /// own too, as for allgatherv).
    Gather {
        /// Root rank.
        root: usize,
        /// Bytes per block.
        block: usize,
    },
    /// `MPI_Iscatter` from `root`: input (root) `size` blocks, output our block (none at
    /// the root in place: an empty output region).
    Scatter {
        /// Root rank.
        root: usize,
        /// Bytes per block.
        block: usize,
    },
    /// `MPI_Ireduce_scatter(_block)`: input the whole vector, output our block (block `i`:
    /// `counts[i]` bytes, back to back). Every rank posts the whole vector's length word
    /// and then the vector, as [`SmKind::Allreduce`], and checks every rank's length before
    /// it folds (each block folds every vector): a rank whose counts differ (erroneous)
    /// fails, and so does every rank ([`Progress::Lengths`]), also when its length put it
    /// on another path of the segment. The length word holds the counts' `mark` too, so
    /// that ranks splitting the same sum otherwise (erroneous) fail alike.
    ReduceScatter {
        /// Bytes per rank.
        counts: Vec<usize>,
        /// The counts' [`crate::counts_mark`] (0 when every block is alike).
        mark: usize,
    },
    /// `MPI_Igatherv` to `root`: input our block (the root's: none in place), output
    /// (root) block `i` (`counts[i]` bytes at `displs[i]`; both empty at the other ranks,
    /// which know only their own block). Blocks of at most [`GATHERV_MAX`] bytes go
    /// through the segment, larger ones up to `far` bytes by one cross-memory copy into
    /// the root's output (the root posts its pid and their addresses; a rank stamps its
    /// buffer once it wrote), larger ones still by message (see [`SmKind::each_message`]
    /// for the rule every rank agrees on). Read by [`SmNb::progress`], not
    /// [`SmKind::compute`].
    Gatherv {
        /// Root rank.
        root: usize,
        /// Bytes per rank (root only).
        counts: Vec<usize>,
        /// Output offset per rank (root only).
        displs: Vec<usize>,
        /// Largest block moved by one cross-memory copy (0: none; see [`Seg::single_copy_max`]).
        far: usize,
    },
    /// `MPI_Iscatterv` from `root`: input (root) block `i` (`counts[i]` bytes at
    /// `displs[i]`; both empty at the other ranks), output our block (none at the root in
    /// place). Blocks of at most [`scatterv_max`] bytes go through the root's buffer,
    /// larger ones up to `far` bytes by one cross-memory copy from the root's input (its
    /// table entry says where the root's pid and the block's address are; a rank stamps
    /// its buffer once it read), larger ones still by message ([`SmKind::each_message`]).
    /// A root in place whose other blocks are all far ones of at least two
    /// [`SHARE_CHUNK`]s, on more than 2 ranks, shares them as a [`SmKind::Single`] scatter
    /// root does ([`scatterv_shares`]: its idle CPU writes the chunks its readers have not
    /// claimed yet). Read by [`SmNb::progress`].
    Scatterv {
        /// Root rank.
        root: usize,
        /// Bytes per rank (root only).
        counts: Vec<usize>,
        /// Input offset per rank (root only).
        displs: Vec<usize>,
        /// Largest block moved by one cross-memory copy (0: none; see [`Seg::single_copy_max`]).
        far: usize,
    },
    /// `MPI_Ibcast`, `MPI_Igather` or `MPI_Iscatter` whose blocks are too large for the
    /// segment's buffers, by one cross-memory copy per rank between the root's buffer and
    /// its own, the protocol of the blocking forms ([`Seg::rooted_cma`]) without waiting:
    /// the root posts its pid, its buffer's address (the input of a bcast or scatter, the
    /// output of a gather) and `block`, and copies its own block; every other rank, once
    /// the root's stamp is there, copies its block (at 0 of the root's buffer for a bcast,
    /// at `rank * block` otherwise) in its progress and then stamps its own buffer; the
    /// root ends once every rank has stamped (until then the others may still use its
    /// buffer). A bcast for which [`Seg::bcast_large`] holds goes through the nonblocking
    /// large region instead ([`Seg::bcast_large_step`]: the root copies its data into its
    /// slot and is done, the others copy it from there). Input and output as for
    /// [`SmKind::Bcast`], [`SmKind::Gather`] and [`SmKind::Scatter`]. Read by
    /// [`SmNb::progress`], not [`SmKind::compute`].
    Single {
        /// Root rank.
        root: usize,
        /// Bytes per block (a bcast's whole buffer).
        block: usize,
        /// Which collective.
        coll: Rooted,
    },
    /// `MPI_Ialltoallv` (and `MPI_Ialltoallw`, as bytes): block `j` of the input
    /// (`scounts[j]` bytes at `sdispls[j]`) goes to rank `j`, block `j` of the output
    /// (`rcounts[j]` bytes at `rdispls[j]`) comes from rank `j`. Blocks of at most
    /// [`alltoallv_max`] bytes go through their sender's buffer, larger ones up to `far`
    /// bytes by cross-memory copies between the ranks' buffers (the sender posts its pid
    /// and the block's address), larger ones still by message ([`SmKind::each_message`]);
    /// our own block is copied from the input to the output at the end. `in_place`: the
    /// blocks to send are in the output (`MPI_IN_PLACE`, the input region empty; our own
    /// counts are then 0: that block stays where it is), read from there when posting,
    /// before any block is received into it; only for a rank with no message to send (one
    /// that sends some sets its blocks aside as the input). A far block in place is traded
    /// with its peer's block for us (each of the two ranks swaps half of both, as the
    /// blocking form does, `segment/cma.rs`); out of place its receiver reads it from the
    /// sender's input, unless the receiver asks for it to be written: out of place, for
    /// a far block from rank `r` of at least `push` bytes when its block for `r` is a far
    /// one too, the receiver posts in its record for `r` where it wants `r`'s block and
    /// its count for it ([`SmNb::asks_push`]), and `r`, when it is out of place itself
    /// (its records say so), writes its block there (`process_vm_writev`, each CPU then
    /// copies from the buffer of the rank it runs) instead of the receiver reading it;
    /// both ends decide from the same two posts. A rank that copied by CMA then marks its
    /// post done (the word of its own table entry), and a rank whose buffer others copy
    /// from or into ends only once each of them has (an asking receiver sends a far block
    /// to its writer, so it waits for the writer's mark). Read by [`SmNb::progress`], not
    /// [`SmKind::compute`].
    Alltoallv {
        /// Bytes sent to each rank.
        scounts: Vec<usize>,
        /// Offset in the input of each rank's block.
        sdispls: Vec<usize>,
        /// Bytes received from each rank.
        rcounts: Vec<usize>,
        /// Offset in the output of each rank's block.
        rdispls: Vec<usize>,
        /// The blocks to send are in the output (see above).
        in_place: bool,
        /// Largest block moved by cross-memory copies (0: none; the same on every rank).
        far: usize,
        /// Smallest far block we ask its sender to write into our output (0: we read
        /// every far block; our choice alone, see above).
        push: usize,
    },
    /// `MPI_Iallreduce`, `MPI_Ireduce`, `MPI_Iscan` or `MPI_Iexscan` of a vector larger
    /// than a buffer (at most [`super::NB_LARGE_MAX`] bytes) through the segment's
    /// nonblocking large region (`segment/large.rs`): input and output as for
    /// [`SmKind::Allreduce`], [`SmKind::Reduce`] and [`SmKind::Scan`]. Read by
    /// [`SmNb::progress`], not [`SmKind::compute`].
    Large {
        /// Which reduction.
        red: Reduction,
    },
    /// `MPI_Iallreduce`, `MPI_Ireduce`, `MPI_Ireduce_scatter(_block)` or `MPI_Iscan` of a
    /// vector larger than a buffer on two ranks that reach each other by CMA, by
    /// cross-memory copies between the ranks' buffers, both folding, as the blocking forms
    /// do (`segment/pull_nb.rs`; a scan as a reduce to rank 1): input and output as for
    /// [`SmKind::Large`]. Read by [`SmNb::progress`], not [`SmKind::compute`].
    Pair {
        /// Which reduction (not an exclusive scan).
        red: Reduction,
    },
}

/// The rooted collective of a [`SmKind::Single`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rooted {
    /// `MPI_Ibcast`: every rank reads the root's whole buffer.
    Bcast,
    /// `MPI_Igather`: every rank writes its block into the root's.
    Gather,
    /// `MPI_Iscatter`: every rank reads its block from the root's.
    Scatter,
}

/// Words of a [`SmKind::Single`] root's post: pid, buffer address, block length.
const SINGLE_POST: usize = 3;
const _: () = assert!(8 * SINGLE_POST <= CAP);

/// Chunk of a shared scatter block ([`shares`]).
pub const SHARE_CHUNK: usize = 1 << SHARE_SHIFT;
/// Log2 of [`SHARE_CHUNK`]; a sharing scatterv root's chunk is its own
/// (`coll_sm_nonblocking_share_chunk`), posted in its records ([`SHARE_SHIFT_AT`]).
const SHARE_SHIFT: u32 = 16;
/// Where a sharing scatterv root's records' first words (its pid, [`SHARED_POST`]) hold the
/// log2 of its chunk (6 bits).
const SHARE_SHIFT_AT: u32 = 48;
/// Words per rank after a shared scatter root's [`SINGLE_POST`] words, at
/// `SINGLE_POST + SHARE_WORDS * r`: chunks claimed ([`claim`]: from the front by the
/// reader, from the back by the root), chunks copied (plus [`SHARE_FAILED`]
/// per failed one), the reader's pid, the reader's output address (0 until it opens its
/// block to the root).
const SHARE_WORDS: usize = 4;
/// Added to a shared block's copied count for a chunk whose copy failed.
const SHARE_FAILED: u64 = 1 << 32;
/// Set in a scatter root's first word (its pid) when it shares its blocks ([`shares`]).
const SHARED_POST: u64 = 1 << 40;
const _: () = assert!(8 * (SINGLE_POST + SHARE_WORDS * super::MAX_RANKS as usize) <= CAP);

/// Looks of a shared scatter's reader pinned to its root's CPU before it claims the chunks
/// of its block the root has not written ([`SmNb::share_later`]).
const SHARE_DEFER_LOOKS: u32 = 8;

/// A shared scatter block left to the root for now ([`SmNb::share_later`]): the root's rank
/// and our record's word in its post, the root's pid, our block's address there, our
/// output's address and the block's length (the arguments of [`SmNb::read_shared`]).
#[derive(Clone, Copy, Debug)]
struct ShareLater {
    root: usize,
    rec: usize,
    pid: i32,
    remote: u64,
    out: usize,
    len: usize,
}

/// Whether a [`SmKind::Single`] collective's blocks of `block` bytes may be shared: a
/// scatter of at least two [`SHARE_CHUNK`]s per block. The root shares them when it has no
/// block of its own to copy (in place; out of place its own copy already keeps its CPU
/// busy, and sharing measured slower there) and says so in its post
/// ([`SHARED_POST`]); then, once it posted, it copies
/// chunks of the blocks of the ranks that opened theirs to it (`process_vm_writev` into
/// their output) while they read the rest (`process_vm_readv`), each chunk claimed by
/// whoever takes it first ([`claim`]: the reader from the front, half of what is left at
/// a time, the root one chunk from the back), when the ranks are pinned only those of
/// other CPUs and only as much as balances the CPUs ([`share_budget`]). Oversubscribed,
/// every reader on the other CPU from the root copies its whole block itself otherwise,
/// while the root's CPU idles once its co-located readers are done.
fn shares(coll: Rooted, block: usize) -> bool {
    coll == Rooted::Scatter && block >= 2 * SHARE_CHUNK
}

/// Claims chunks of a shared block of `n` chunks in its claim word `w` (chunks claimed
/// from the front in the low half, from the back in the high half): the reader (`front`)
/// takes the first half (rounded up) of the chunks nobody claimed yet, so that a block
/// the root does not help with takes a few copies (16 chunks: 8, 4, 2, 1, 1), and one
/// that it helps with is split about evenly from when it came; the root (not `front`)
/// takes the last unclaimed chunk. The chunks claimed, `None` when none is left. Every
/// claim moves the word from a state with unclaimed chunks by a compare-and-swap, so
/// the front and back claims never overlap and never pass `n`.
fn claim(w: &std::sync::atomic::AtomicU64, n: u64, front: bool) -> Option<std::ops::Range<u64>> {
    let mut v = w.load(Ordering::Acquire);
    loop {
        let (f, b) = (v & 0xffff_ffff, v >> 32);
        let left = n.saturating_sub(f + b);
        if left == 0 {
            return None;
        }
        let (add, got) = match front {
            true => (left.div_ceil(2), f..f + left.div_ceil(2)),
            false => (1 << 32, n - b - 1..n - b),
        };
        match w.compare_exchange_weak(v, v + add, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some(got),
            Err(x) => v = x,
        }
    }
}

/// A sharing root's part of one reader's block (iscatter, iscatterv): claims chunks from
/// the back of the reader's record (`word(0)` claimed, [`claim`]; `word(1)` copied;
/// `word(2)` the reader's pid) until none is left or it wrote `budget` bytes (less what
/// it writes here), and writes each from `src` into the reader's output at `to`
/// (`process_vm_writev`), counting it copied (a failed one marked: the reader reports it).
///
/// # Safety
/// `src` is readable for `block` bytes (a write only reads the local side); the record is
/// the one the reader opened with `to`, whose output has room for the block and stays until
/// the reader finishes, which it does only once every chunk is counted.
unsafe fn write_unclaimed<'a>(
    word: &impl Fn(usize) -> &'a std::sync::atomic::AtomicU64,
    src: *const u8,
    (block, shift): (usize, u32),
    to: u64,
    budget: &mut usize,
) {
    let pid = word(2).load(Ordering::Relaxed) as u32 as i32;
    let n = share_chunks(block, shift);
    while *budget > 0 {
        let Some(c) = claim(word(0), n, false) else {
            break;
        };
        let (off, l) = share_chunk(c.start, block, shift);
        // SAFETY: `off + l <= block` bytes at `src` and at the reader's `to` (caller
        // contract).
        let failed =
            unsafe { cma_copy(pid, src.add(off).cast_mut(), to + off as u64, l, Cma::Write) }
                .is_err();
        word(1).fetch_add(1 + u64::from(failed) * SHARE_FAILED, Ordering::Release);
        *budget = budget.saturating_sub(l);
    }
}

/// What a sharing root may write of its readers' blocks (`count(r)` bytes for rank `r`),
/// from where the ranks are pinned ([`Seg::cpu`]): `None` when some rank is not pinned to
/// one CPU (it helps every reader, as much as it can); else only the readers of other
/// CPUs, at most as many bytes as make its CPU copy as much as each other CPU (`Some(0)`:
/// ours copies as much already, so it does not share). Oversubscribed, the ranks of a CPU
/// copy one after another, so a CPU's time is what its ranks copy: np=8 pinned 4 and 4,
/// in place, 1 MiB blocks, ours copies 3 blocks and the other 4, and writing more than
/// half a block of theirs makes ours the slower one.
fn share_budget(seg: &Seg, me: usize, count: impl Fn(usize) -> usize) -> Option<usize> {
    let (p, mine) = (seg.size(), seg.cpu(me));
    if (0..p).any(|r| seg.cpu(r) == 0) {
        return None;
    }
    let ours: usize = (0..p)
        .filter(|&r| r != me && seg.cpu(r) == mine)
        .map(&count)
        .sum();
    let theirs: usize = (0..p).filter(|&r| seg.cpu(r) != mine).map(&count).sum();
    let mut cpus: Vec<u32> = (0..p).map(|r| seg.cpu(r)).filter(|&c| c != mine).collect();
    cpus.sort_unstable();
    cpus.dedup();
    // `k` other CPUs: ours + B = (theirs - B) / k.
    let k = cpus.len();
    Some(theirs.saturating_sub(k * ours) / (k + 1))
}

/// Chunks of `1 << shift` bytes of a shared block of `block` bytes (the last one may be
/// shorter).
fn share_chunks(block: usize, shift: u32) -> u64 {
    block.div_ceil(1 << shift) as u64
}

/// Offset and length of chunk `c` (of `1 << shift` bytes) of a shared block of `block`
/// bytes.
fn share_chunk(c: u64, block: usize, shift: u32) -> (usize, usize) {
    let off = (c as usize) << shift;
    (off, (1 << shift).min(block - off))
}

/// The word of a sharing scatterv root's post ([`scatterv_shares`]) where its
/// [`SHARE_WORDS`] per rank start (rank `r`'s at `at + SHARE_WORDS * r`): right after its
/// table and the far records of every other rank ([`put_blocks`]), `None` when they do not
/// fit its buffer (more than 51 ranks).
fn scatterv_share_at(p: usize) -> Option<usize> {
    let at = p + FAR_RECORD / 8 * p.saturating_sub(1);
    (8 * (at + SHARE_WORDS * p) <= CAP).then_some(at)
}

/// Whether a scatterv root shares its blocks as a [`SmKind::Single`] scatter root does
/// ([`shares`]): in place (`in_place`: no block of its own to copy), more than 2 ranks,
/// every other rank's block a far one (`far`, read from our input by cross-memory copies,
/// so that its post is the table and one record per rank, [`scatterv_share_at`]) of at
/// least two [`SHARE_CHUNK`]s. Its records' first words (its pid) then carry
/// [`SHARED_POST`]; each reader opens its block to it in the share words and both copy
/// chunks, as for [`SmKind::Single`].
fn scatterv_shares(
    (me, p): (usize, usize),
    (in_place, shift): (bool, u32),
    input: usize,
    (counts, displs): (&[usize], &[usize]),
    far: &dyn Fn(usize) -> bool,
) -> bool {
    in_place
        && p > 2
        && scatterv_share_at(p).is_some()
        && (0..p).filter(|&r| r != me).all(|r| {
            let (c, d) = (counts[r], displs[r]);
            far(c) && c >= 2 << shift && d.checked_add(c).is_some_and(|e| e <= input)
        })
}

/// The first word of a small broadcast root's post ([`SmKind::Bcast`]). Every broadcast
/// root posts a first word that names its path (a pid for the cross-memory path,
/// [`SmKind::Single`]; [`BCAST_LARGE_TAG`] for the large region; this; [`BCAST_MSG_TAG`])
/// and its length as its third word, so that a rank whose length put it on another path
/// (an erroneous call) fails instead of waiting or reading the wrong bytes. No pid is
/// this large.
pub(crate) const BCAST_SMALL_TAG: u64 = u64::MAX - 1;
/// The first word of a broadcast's post when its length goes by message
/// ([`SmKind::BcastMsg`]): at the root, its path; elsewhere, that the rank takes the
/// message from its parent (every other rank's post has 0 there).
pub(crate) const BCAST_MSG_TAG: u64 = u64::MAX - 2;
/// Waits of a 2-rank scatter's reader for its root's post between looks at whether the
/// root passed the collective instead ([`SmNb::root_by_message`]).
const ROOT_LOOKS: u32 = 32;
/// Waits before the first such look: the root's done word shares the line of its blocking
/// done word, which it writes at every blocking collective; a reader that pulled that line
/// away at its 32nd wait made a correct 16-byte iscatter slower (np=2 far, 0.504 / 0.515
/// against 0.539 / 0.550 us in two `ab.sh` runs of 6 rounds); a correct call's reader
/// seldom waits this long.
const ROOT_LOOKS_FIRST: u32 = 4096;
/// The first word a 2-rank iscatter's reader by message (`CollComm::iscatter_pair_msg`)
/// posts at the collective's number when it finds its root's post there (an erroneous
/// length on the other side of the message bound): a [`SmKind::Single`] root waits for
/// that stamp and fails on this word (every other reader's first word is 0).
pub(crate) const SCATTER_MSG_MARK: u64 = BCAST_MSG_TAG;
/// Where a small broadcast root's data starts in its post (after the three words).
const BCAST_AT: usize = 24;
const _: () = assert!(BCAST_AT + DATA <= CAP);
const _: () = assert!(BCAST_MSG_TAG < BCAST_SMALL_TAG && BCAST_SMALL_TAG < BCAST_LARGE_TAG);

/// Largest block of an `MPI_Igatherv` through the segment: all of its rank's buffer after
/// the stamp word ([`CAP`]) less the length word posted before it, as for the blocking
/// gatherv ([`super::V_MAX`]): a [`DATA`]-byte block fits, so a 4 KiB igatherv posts and
/// copies like an igather instead of a cross-memory write behind the root's post.
pub const GATHERV_MAX: usize = super::V_MAX;

/// Largest block of an `MPI_Iscatterv` of `p` ranks through the segment: small enough that
/// the root's table (a word per rank) and every other rank's block fit its one buffer
/// ([`CAP`] bytes) whatever the other counts are (on 2 ranks a block of [`DATA`] bytes:
/// a 4 KiB block is copied through the segment, not by a cross-memory copy).
pub fn scatterv_max(p: usize) -> usize {
    (CAP - 8 * p) / p.saturating_sub(1).max(1)
}

/// An `MPI_Iscatterv` root's whole part on `seg` at its call, without a request: when
/// every other rank's block goes through our buffer (at most [`scatterv_max`] bytes) and
/// that buffer is free now, our post of [`SmKind::Scatterv`] (its table and blocks, as
/// [`SmNb::progress`] writes it) opens and closes the collective at once
/// ([`Seg::post_closed_nb`]), and our own block (`counts[me]` bytes at `displs[me]` of
/// `input`) is copied into `out` (none in place: `out` empty) after it, while the readers
/// copy theirs. No collective to open, no counts copied, nothing allocated: the post comes
/// first. False, with nothing taken or written, for any other case (a block larger, one
/// outside `input`, `out` shorter than our block, our buffer still read for an older
/// collective): the caller starts it as [`SmKind::Scatterv`], which also reports errors.
pub fn scatterv_root_now(
    cc: &crate::CollComm,
    seg: &Seg,
    input: &[u8],
    (counts, displs): (&[usize], &[usize]),
    out: &mut [u8],
) -> bool {
    let (me, p) = (seg.rank(), seg.size());
    let max = scatterv_max(p);
    if counts.len() != p || displs.len() != p {
        return false;
    }
    let inside = |r: usize| {
        displs[r]
            .checked_add(counts[r])
            .is_some_and(|e| e <= input.len())
    };
    let own = counts[me];
    if !(0..p).all(|r| inside(r) && (r == me || counts[r] <= max))
        || (!out.is_empty() && own > out.len())
    {
        return false;
    }
    let n: usize = (0..p).filter(|&r| r != me).map(|r| counts[r]).sum();
    let posted = seg.post_closed_nb(n, |b| {
        // SAFETY: `b` is our buffer's `CAP` bytes and `8 p + (p - 1) max <= CAP`
        // (`scatterv_max`); no block is far (`far` 0).
        unsafe { put_blocks(b, (me, p, max, 0), input, (counts, displs), &|_| (0, 0)) }
    });
    if !posted {
        return false;
    }
    crate::base::stats::count(cc.shadow, crate::base::stats::Alg::SmNonblocking);
    if !out.is_empty() {
        out[..own].copy_from_slice(&input[displs[me]..displs[me] + own]);
    }
    true
}

/// Largest block of an `MPI_Ialltoallv` of `p` ranks through the segment: small enough
/// that a rank's table (a word per rank) and its blocks for every other rank fit its one
/// buffer ([`CAP`] bytes) whatever its other counts are.
pub fn alltoallv_max(p: usize) -> usize {
    (CAP - 8 * p) / p.saturating_sub(1).max(1)
}

/// Largest `MPI_Ialltoallv` block on `seg` that moves by cross-memory copies
/// ([`SmKind::Alltoallv`]'s `far`; 0: none): every block larger than the segment takes,
/// when CMA reaches every rank and single copies are on ([`Seg::single_copy_max`], as for
/// the rooted forms; `coll_sm_single_copy_max(_many)=0` turns them off). In place the two
/// blocks of a pair are traded (no rank sets its buffer aside, no block waits for its
/// receiver to be scheduled); out of place each rank reads its blocks from the senders'
/// buffers, one copy each where a message takes a handshake and, when the ranks share
/// cores, a context switch per transfer (measured faster at 16 KiB–1 MiB on 2 and 4 ranks
/// than the messages, whatever single-copy mechanism the engine picks for them). The same
/// on every rank.
pub fn alltoallv_far(seg: &Seg) -> usize {
    if seg.single_copy_max() > 0 {
        usize::MAX
    } else {
        0
    }
}

/// Table entry of a scatterv or alltoallv block that is not in its sender's buffer.
const NOT_HERE: u64 = u64::MAX;
/// Flag of a scatterv table entry whose block its rank reads from the root's input by one
/// cross-memory copy: `FAR | at << 32 | length`, the root's pid and the block's address
/// at byte `at` of the root's buffer.
const FAR: u64 = 1 << 63;
/// Bytes of a far block's record in its sender's post ([`put_blocks`]): the sender's pid,
/// the block's address and its length; then, in an alltoallv, where the sender wants the
/// block from that rank written (0: it reads it itself) and a word with its count for that
/// block (when it asks) and the flag [`WRITES`].
const FAR_RECORD: usize = 40;
/// Flag of the last word of an alltoallv's far record: its poster writes its far blocks
/// where their receivers ask for them (it is out of place).
const WRITES: u64 = 1 << 63;
/// Flag of a scatterv (alltoallv) table entry whose block goes by message: `MSG | length`
/// (a rank whose own length puts its block on the segment then fails instead of waiting).
const MSG: u64 = 1 << 62;

/// A point-to-point transfer of a v-collective's block too large for the segment
/// ([`SmKind::each_message`]): send (else receive) `len` bytes at `at` (region 0: the
/// input, 1: the output; byte offset) to or from `peer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// A send (else a receive).
    pub send: bool,
    /// Region (0 input, 1 output) and offset.
    pub at: (usize, usize),
    /// Bytes.
    pub len: usize,
    /// The other rank.
    pub peer: usize,
}

/// What a progress call of a nonblocking collective on the segment ([`SmNb::progress`])
/// found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// Not ended yet.
    Pending,
    /// Ended: the result is in the output.
    Done,
    /// Ended, but some received block's length differed from its receive count (those
    /// blocks were not copied).
    Mismatch,
    /// Ended, but a cross-memory copy failed ([`SmKind::Single`]: a buffer outside its
    /// process's memory).
    CopyFailed,
    /// Ended, but a broadcast's root posted `root` bytes (or took another path) and this
    /// rank holds `ours`: nothing copied (`MPI_ERR_TRUNCATE` when the root's are more,
    /// else `MPI_ERR_COUNT`).
    Differs {
        /// The root's length.
        root: usize,
        /// Ours.
        ours: usize,
    },
    /// Ended, but a rank between the root and this one in a broadcast's tree took no part
    /// in the messages (its length differs from the root's): nothing came (`MPI_ERR_OTHER`
    /// when our length is the root's, else as [`Progress::Differs`]).
    Upstream {
        /// The root's length.
        root: usize,
        /// Ours.
        ours: usize,
    },
    /// Ended, but a reduction's rank posted `theirs` bytes and this one holds `ours`
    /// ([`SmKind::len_word`]): nothing
    /// folded (`MPI_ERR_TRUNCATE` when theirs are more, else `MPI_ERR_COUNT`).
    Lengths {
        /// The other rank's length (a longer one if any).
        theirs: usize,
        /// Ours.
        ours: usize,
    },
}

impl Progress {
    /// The error of a collective that ended so (`None`: pending or done).
    pub fn error(self) -> Option<oxmpi_engine::Error> {
        Some(match self {
            Progress::Pending | Progress::Done => return None,
            Progress::Mismatch => arg_err(
                ErrorClass::Truncate,
                "a block's length differs from its receive count",
            ),
            Progress::CopyFailed => arg_err(
                ErrorClass::Other,
                "a cross-memory copy between ranks failed",
            ),
            Progress::Lengths { theirs, ours } => {
                lengths_error("nonblocking reduction", theirs, ours)
            }
            Progress::Differs { root, ours } | Progress::Upstream { root, ours }
                if root != ours =>
            {
                bcast_differs(root, ours)
            }
            Progress::Differs { root, .. } => arg_err(
                ErrorClass::Intern,
                format!("bcast: the root took another path for the same {root} bytes"),
            ),
            Progress::Upstream { root, .. } => arg_err(
                ErrorClass::Other,
                format!(
                    "bcast: a rank between the root and this one does not hold the root's \
                     {root} bytes and forwards nothing"
                ),
            ),
        })
    }

    /// The error of a collective that ended in failure ([`Progress::error`]; an internal
    /// error when called on one that did not).
    pub fn failure(self) -> oxmpi_engine::Error {
        self.error()
            .unwrap_or_else(|| arg_err(ErrorClass::Intern, "a failed collective without an error"))
    }

    /// Ended: [`Progress::Done`] if every length matched (`ok`), else [`Progress::Mismatch`].
    fn ended(ok: bool) -> Progress {
        if ok {
            Progress::Done
        } else {
            Progress::Mismatch
        }
    }
}

impl SmKind {
    /// Bytes a rank posts: its contribution (`input_len`) must fit one buffer. A pure
    /// function of sizes every rank knows alike, so every rank decides the same.
    pub fn fits(input_len: usize) -> bool {
        input_len <= DATA
    }

    /// The blocks rank `me` of `p` moves by message in this collective (gatherv, scatterv
    /// and alltoallv only; `lens`: the lengths of its input and output regions), in rank
    /// order.
    ///
    /// Which blocks go through the segment: in a gatherv or scatterv a rank knows only its
    /// own count (the root knows them all), so the choice is made per block, from the
    /// block's length and the communicator's size alone: both ends of a block know these
    /// alike (MPI requires the sender's and the receiver's type signatures to match, so
    /// their byte counts are equal). A gatherv block of `n` bytes goes through its
    /// sender's buffer iff `n <= GATHERV_MAX` (each rank has its own buffer: blocks never
    /// compete for room); a scatterv block through the root's buffer iff
    /// `n <= scatterv_max(p)` (the bound leaves room for every block and the table, so one
    /// block's path never depends on another's size); an empty block goes nowhere. Every
    /// rank takes this collective's sequence number on the segment whatever its sizes, and
    /// the larger blocks travel on a tag made from that number (`nbc::sched`), which both
    /// ends therefore agree on without communication.
    ///
    /// An alltoallv follows the same rule: a rank knows its own send and receive counts,
    /// not the others', and the block from rank `i` to rank `j` has the same byte count at
    /// both ends (`scounts[j]` at `i`, `rcounts[i]` at `j`). It goes through rank `i`'s
    /// buffer iff its `n` bytes are `1..=alltoallv_max(p)` (the bound leaves room for the
    /// table and a block for every other rank, so no block's path depends on another's
    /// size), by cross-memory copies iff `alltoallv_max(p) < n <= far` (`far` the same on
    /// every rank), by message iff `n` is larger still; our own block is copied locally.
    ///
    /// A gatherv or scatterv block too large for the segment moves by one cross-memory
    /// copy when it has at most `far` bytes (the same on every rank), by message only
    /// when it is larger.
    ///
    /// These are the messages planned from our own counts; in an erroneous call the root's
    /// count for a block and the block's length lie on either side of the message bound,
    /// and the segment's part settles it before any message moves ([`SmNb::dropped`]): a
    /// gatherv rank whose block goes by message posts its length and sends only when the
    /// root's post gives a count that goes by message too (the root receives from the
    /// ranks whose posted length says they send, and takes a shorter block from the
    /// segment); a scatterv root's table marks its blocks by message, a rank reads its
    /// entry whatever its length and posts its length for such a block, and the root sends
    /// only to the ranks whose length goes by message. The other end fails with
    /// `MPI_ERR_TRUNCATE` instead of waiting for a message that never comes.
    pub fn each_message(
        &self,
        (me, p): (usize, usize),
        lens: (usize, usize),
        mut f: impl FnMut(Message),
    ) {
        if let SmKind::Alltoallv {
            scounts,
            sdispls,
            rcounts,
            rdispls,
            far,
            ..
        } = self
        {
            let max = alltoallv_max(p).max(*far);
            let at = |v: &[usize], r: usize| v.get(r).copied().unwrap_or(0);
            for r in (0..p).filter(|&r| r != me) {
                for (send, counts, displs) in [(false, rcounts, rdispls), (true, scounts, sdispls)]
                {
                    if at(counts, r) > max {
                        f(Message {
                            send,
                            at: (usize::from(!send), at(displs, r)),
                            len: at(counts, r),
                            peer: r,
                        });
                    }
                }
            }
            return;
        }
        let (root, counts, displs, max, gather) = match self {
            SmKind::Gatherv {
                root,
                counts,
                displs,
                far,
            } => (*root, counts, displs, GATHERV_MAX.max(*far), true),
            SmKind::Scatterv {
                root,
                counts,
                displs,
                far,
            } => (*root, counts, displs, scatterv_max(p).max(*far), false),
            _ => return,
        };
        // A gatherv's blocks go to the root (sent from the input, region 0, received into
        // the output, region 1); a scatterv's come from it.
        if me != root {
            let (region, len) = if gather { (0, lens.0) } else { (1, lens.1) };
            if len > max {
                f(Message {
                    send: gather,
                    at: (region, 0),
                    len,
                    peer: root,
                });
            }
            return;
        }
        let region = if gather { 1 } else { 0 };
        for r in (0..p).filter(|&r| r != me && counts[r] > max) {
            f(Message {
                send: !gather,
                at: (region, displs[r]),
                len: counts[r],
                peer: r,
            });
        }
    }

    /// Whether a gatherv, scatterv or alltoallv block of `n` bytes on `p` ranks moves by
    /// cross-memory copies: larger than the segment takes, at most the kind's `far`.
    fn far_block(&self, p: usize, n: usize) -> bool {
        match *self {
            SmKind::Gatherv { far, .. } => n > GATHERV_MAX && n <= far,
            SmKind::Scatterv { far, .. } => n > scatterv_max(p) && n <= far,
            SmKind::Alltoallv { far, .. } => n > alltoallv_max(p) && n <= far,
            _ => false,
        }
    }

    /// Whether rank `me` of `p` asks rank `r` to write its far alltoallv block into our
    /// output (`Some(rdispls[r])`) rather than reading it: out of place, the block at least
    /// `push` bytes, a far one both ways (we post a record for `r`: our block for it is a
    /// far one inside the input, and `r`'s for us moves by CMA) and inside the output.
    /// `lens`: the lengths of the input and the output. The same answer at our post and when
    /// we read (a pure function of our own arguments).
    fn asks_push(&self, (me, p): (usize, usize), r: usize, lens: (usize, usize)) -> Option<usize> {
        let SmKind::Alltoallv {
            scounts,
            sdispls,
            rcounts,
            rdispls,
            in_place,
            push,
            ..
        } = self
        else {
            return None;
        };
        let (sc, rc) = (*scounts.get(r)?, *rcounts.get(r)?);
        let inside = |at: usize, n: usize, len: usize| at.checked_add(n).is_some_and(|e| e <= len);
        let ask = r != me
            && !*in_place
            && *push != 0
            && rc >= *push
            && self.far_block(p, rc)
            && self.far_block(p, sc)
            && inside(*sdispls.get(r)?, sc, lens.0)
            && inside(*rdispls.get(r)?, rc, lens.1);
        ask.then(|| rdispls[r])
    }

    /// Whether a message may come that rank `me` did not plan: an alltoallv whose larger
    /// blocks go by message (no cross-memory copies), where a sender's count may put a
    /// block on a message that our count puts elsewhere (an erroneous call); the schedule
    /// then takes it into scratch ([`SmNb::sinks`]), which a light request cannot.
    pub fn may_take_messages(&self) -> bool {
        matches!(self, SmKind::Alltoallv { far, .. } if *far < usize::MAX)
            || matches!(self, SmKind::BcastMsg { .. } | SmKind::AllreduceMsg)
    }

    /// Whether rank `me` of `p` moves some block by message ([`SmKind::each_message`]).
    pub fn has_messages(&self, at: (usize, usize), lens: (usize, usize)) -> bool {
        let mut any = false;
        self.each_message(at, lens, |_| any = true);
        any
    }

    /// Whether every rank's post starts with its length word ([`LEN_TAG`]): the
    /// reductions whose ranks check the lengths of the ranks they read
    /// ([`SmKind::needs`]) before they fold, so that an erroneous count (which may put a
    /// rank on another path) fails there instead of folding or waiting.
    pub(crate) fn len_word(&self) -> bool {
        matches!(
            self,
            SmKind::Allreduce
                | SmKind::AllreduceMsg
                | SmKind::Reduce { .. }
                | SmKind::Scan { .. }
                | SmKind::ReduceScatter { .. }
        )
    }

    /// Whether rank `me` posts its input (a bcast or scatter only at the root).
    pub(crate) fn posts(&self, me: usize) -> bool {
        match *self {
            SmKind::Bcast { root } | SmKind::Scatter { root, .. } => me == root,
            _ => true,
        }
    }

    /// The ranks whose stamps rank `me` of `p` needs for its result.
    pub(crate) fn needs(&self, me: usize, p: usize) -> std::ops::Range<usize> {
        match *self {
            SmKind::Barrier
            | SmKind::Allreduce
            | SmKind::AllreduceMsg
            | SmKind::Alltoall { .. }
            | SmKind::Allgather { .. }
            | SmKind::Allgatherv { .. }
            | SmKind::ReduceScatter { .. } => 0..p,
            // Read by `SmNb::progress` (their own rules).
            SmKind::Gatherv { .. }
            | SmKind::Scatterv { .. }
            | SmKind::Alltoallv { .. }
            | SmKind::Single { .. }
            | SmKind::Large { .. }
            | SmKind::Pair { .. }
            | SmKind::Bcast { .. }
            | SmKind::BcastMsg { .. } => 0..0,
            SmKind::Reduce { root } | SmKind::Gather { root, .. } => {
                if me == root {
                    0..p
                } else {
                    0..0
                }
            }
            SmKind::Scatter { root, .. } => {
                if me == root {
                    0..0
                } else {
                    root..root + 1
                }
            }
            SmKind::Scan { exclusive } => 0..if exclusive { me } else { me + 1 },
        }
    }

    /// Where rank `me`'s own block goes in its output (offset, bytes) when it is not read
    /// back from its post: an allgather's and an allgatherv's, which [`SmKind::compute`]
    /// leaves out (the blocking allgather places it before it posts; the nonblocking one
    /// copies it from the input at its post, `SmNb::progress`).
    pub(crate) fn own_place(&self, me: usize) -> Option<(usize, usize)> {
        match self {
            SmKind::Allgather { block } => Some((me * block, *block)),
            SmKind::Allgatherv { counts, displs } => Some((*displs.get(me)?, *counts.get(me)?)),
            _ => None,
        }
    }

    /// Compute rank `me`'s (of `p`) result into `out` from the ranks' posted data
    /// (`peer(r, off, n)`: `n` bytes of rank `r`'s data from `off`, for the ranks of
    /// [`SmKind::needs`]); reductions fold in rank order with `op` (`inout = in ∘ inout`).
    pub(crate) fn compute<'a>(
        &self,
        (me, p): (usize, usize),
        peer: impl Fn(usize, usize, usize) -> &'a [u8],
        out: &mut [u8],
        op: Option<Fold<'_>>,
    ) {
        let fold = |out: &mut [u8], ranks: std::ops::Range<usize>, off: usize| {
            let n = out.len();
            if n == 0 {
                return;
            }
            let Some(last) = ranks.clone().last() else {
                return;
            };
            out.copy_from_slice(peer(last, off, n));
            if let Some(op) = op {
                for r in (ranks.start..last).rev() {
                    op(peer(r, off, n), out); // out = x_r ∘ out
                }
            }
        };
        match self {
            SmKind::Barrier | SmKind::AllreduceMsg => {}
            // After the length word.
            SmKind::Allreduce => fold(out, 0..p, 8),
            SmKind::Reduce { root } => {
                if me == *root {
                    fold(out, 0..p, 8)
                }
            }
            SmKind::Scan { exclusive } => {
                let hi = if *exclusive { me } else { me + 1 };
                if hi > 0 {
                    fold(out, 0..hi, 8)
                }
            }
            SmKind::Alltoall { block } => {
                // Rank `j` posted its blocks for the other ranks back to back, its own
                // left out (`SmNb::progress`): ours is its `me`-th before it, `me - 1`-th
                // after; our own block was copied at the post.
                let b = *block;
                if b > 0 {
                    for (j, o) in out.chunks_exact_mut(b).enumerate().take(p) {
                        if j != me {
                            let at = if me < j { me } else { me - 1 } * b;
                            o.copy_from_slice(peer(j, at, b));
                        }
                    }
                }
            }
            // Our own block is in place already ([`SmKind::own_place`]).
            SmKind::Allgather { block } => {
                let b = *block;
                if b > 0 {
                    for (j, o) in out.chunks_exact_mut(b).enumerate().take(p) {
                        if j != me {
                            o.copy_from_slice(peer(j, 0, b));
                        }
                    }
                }
            }
            SmKind::Allgatherv { counts, displs } => {
                for j in (0..p).filter(|&j| j != me) {
                    out[displs[j]..displs[j] + counts[j]].copy_from_slice(peer(j, 0, counts[j]));
                }
            }
            SmKind::Gather { root, block } => {
                if me == *root {
                    let b = *block;
                    for j in 0..p {
                        out[j * b..(j + 1) * b].copy_from_slice(peer(j, 0, b));
                    }
                }
            }
            SmKind::Scatter { root, block } => {
                let b = *block;
                if !out.is_empty() {
                    out[..b].copy_from_slice(peer(*root, me * b, b));
                }
            }
            SmKind::ReduceScatter { counts, .. } => {
                // After the length word.
                let off: usize = counts[..me].iter().sum();
                fold(&mut out[..counts[me]], 0..p, 8 + off);
            }
            // Posted and read by `SmNb::progress`.
            SmKind::Alltoallv { .. }
            | SmKind::Gatherv { .. }
            | SmKind::Scatterv { .. }
            | SmKind::Single { .. }
            | SmKind::Large { .. }
            | SmKind::Pair { .. }
            | SmKind::Bcast { .. }
            | SmKind::BcastMsg { .. } => {}
        }
    }
}

/// A nonblocking collective on the segment (a [`crate::sched::Schedule`] of the `sm`
/// kind): input region 0, output region 1 of its schedule.
pub struct SmNb {
    seg: Arc<Seg>,
    k: u64,
    kind: SmKind,
    posted: bool,
    done: bool,
    /// The outcome of a rank's cross-memory copy, made before it could stamp (an
    /// alltoallv: of its reading, done before it marks its post done); a gatherv's or
    /// scatterv's root: of the copy of its own block, made right after its post.
    copied: Option<Progress>,
    /// The ranks whose far alltoallv blocks we have copied or traded (bit `r`).
    moved: u64,
    /// The ranks whose posts we looked at for our far alltoallv block for them, written
    /// into their output when they asked (bit `r`).
    pushed: u64,
    /// What went wrong with one of those (else `Done`).
    fault: Progress,
    /// A [`SmKind::Large`]'s progress.
    large: Large,
    /// A [`SmKind::Pair`]'s progress.
    pair: Pair,
    /// A gatherv's or scatterv's root leaves its own block to its schedule, which copies it
    /// while the blocks that go by message travel ([`SmNb::own_block_elsewhere`]).
    own_elsewhere: bool,
    /// A gatherv's or scatterv's messages that the other end does not expect (bit `r`:
    /// rank `r`'s), dropped from its schedule ([`SmNb::dropped`]).
    no_msg: u64,
    /// An alltoallv's receives of messages that their senders do not send (bit `r`: from
    /// rank `r`; [`SmNb::dropped_receives`]).
    no_recv: u64,
    /// An alltoallv's messages that come although our count for them put the block
    /// elsewhere: (sender, bytes), received into scratch ([`SmNb::sinks`]).
    sinks: Vec<(usize, usize)>,
    /// A [`SmKind::BcastMsg`]'s children that take the message from us (bit `r`).
    takers: u64,
    /// A [`SmKind::Single`] scatter whose root shares its blocks ([`shares`]): chunks per
    /// block (0: not shared). A reader stamps once all of its block's are copied; the
    /// root helps copy them until every reader stamped. A [`SmKind::Scatterv`] whose root
    /// shares ([`scatterv_shares`]): at a reader its block's chunks, at the root 1.
    share: u64,
    /// Log2 of the chunk of a shared block ([`SmNb::share`]).
    share_shift: u32,
    /// A sharing root: the bytes of its readers' blocks it may still write, and its CPU
    /// plus one when every rank is pinned (it then helps only the readers of other CPUs;
    /// 0: every reader), [`share_budget`].
    share_budget: (usize, u32),
    /// A shared [`SmKind::Single`] scatter's reader pinned to its root's CPU: its block
    /// opened to the root but no chunk claimed yet, so that the root, which runs between
    /// our looks, writes it ([`SmNb::help_scatter`]); we claim what is left ourselves after
    /// [`SHARE_DEFER_LOOKS`] looks ([`SmNb::share_looks`]). Chunks read by the readers of
    /// one CPU and the other at once from one 2 MiB stretch of the root's memory (one page
    /// table page) go at half speed or worse (the kernel pins each page under that
    /// table's lock); a block the root writes pins the reader's pages instead.
    share_later: Option<ShareLater>,
    /// Pending looks of a reader with [`SmNb::share_later`].
    share_looks: u32,
    /// The engine and the communicator (the collective's shadow) a broadcast's child of
    /// the root takes a message on that it does not want ([`SmNb::drain`]); `None` for a
    /// barrier opened by [`Seg::barrier_nb`].
    engine: Option<(&'static Engine, CommId)>,
    /// A broadcast's child of the root read the root's [`BCAST_MSG_TAG`] while its own
    /// length put it on another path (an erroneous call): the root sends it the message
    /// anyway, without waiting for its post, so it takes that message (none of its bytes)
    /// before it ends ([`SmNb::drain`]).
    drain: bool,
    /// That receive, and how the collective ended.
    draining: Option<(ReqId, Progress)>,
    /// Looks at the root's stamp that found none yet (a 2-rank scatter's reader, see
    /// [`SmNb::root_by_message`]).
    looks: u32,
    /// Added to the length word of a reduction's post and to the length compared with the
    /// others' ([`SmKind::len_word`]): a reduce-scatter's [`crate::counts_mark`] (0 for every
    /// other collective and for blocks alike).
    mark: usize,
}

impl SmNb {
    /// Open collective `kind` on `seg` (takes its sequence number: call in MPI's
    /// collective order).
    pub(crate) fn open(cc: &crate::CollComm, seg: Arc<Seg>, kind: SmKind) -> SmNb {
        let k = seg.open_nb();
        let mark = match kind {
            SmKind::ReduceScatter { mark, .. } => mark,
            _ => 0,
        };
        let large = match kind {
            SmKind::Large { .. } => seg.open_large(k),
            SmKind::Single {
                block,
                coll: Rooted::Bcast,
                ..
            } if seg.bcast_large(block) => seg.open_large(k),
            _ => Large::default(),
        };
        SmNb {
            seg,
            k,
            kind,
            large,
            pair: Pair::default(),
            posted: false,
            done: false,
            copied: None,
            moved: 0,
            pushed: 0,
            fault: Progress::Done,
            own_elsewhere: false,
            no_msg: 0,
            no_recv: 0,
            sinks: Vec::new(),
            takers: 0,
            share: 0,
            share_shift: SHARE_SHIFT,
            share_budget: (0, 0),
            share_later: None,
            share_looks: 0,
            engine: Some((cc.e, cc.shadow)),
            drain: false,
            draining: None,
            looks: 0,
            mark,
        }
    }

    /// This collective's length word holds `mark` too (a reduce-scatter by message's
    /// [`crate::counts_mark`], [`SmKind::AllreduceMsg`]).
    pub(crate) fn with_mark(mut self, mark: usize) -> SmNb {
        self.mark = mark;
        self
    }

    /// A nonblocking barrier on `seg` that [`Seg::barrier_nb`] opened as `k` (and posted
    /// if `posted`) and that has not ended yet.
    pub(crate) fn opened_barrier(seg: Arc<Seg>, k: u64, posted: bool) -> SmNb {
        SmNb {
            seg,
            k,
            kind: SmKind::Barrier,
            large: Large::default(),
            pair: Pair::default(),
            posted,
            done: false,
            copied: None,
            moved: 0,
            pushed: 0,
            fault: Progress::Done,
            own_elsewhere: false,
            no_msg: 0,
            no_recv: 0,
            sinks: Vec::new(),
            takers: 0,
            share: 0,
            share_shift: SHARE_SHIFT,
            share_budget: (0, 0),
            share_later: None,
            share_looks: 0,
            engine: None,
            drain: false,
            draining: None,
            looks: 0,
            mark: 0,
        }
    }

    /// Whether this collective, posted and not ended, waits only for the stamps of ranks
    /// pinned to another CPU than ours ([`Seg::remote`]), at least one: they run on their
    /// own CPU, so its waiter may look again instead of yielding ours to a rank that may
    /// have nothing to do (`light_wait` of the C API). Only the small rooted collectives,
    /// whose waits are stamps alone: a gather's (gatherv's) root, a scatter's (scatterv's,
    /// small bcast's) other ranks; false for every other collective and rank.
    pub(crate) fn waits_remote_only(&self) -> bool {
        if !self.posted || self.done {
            return false;
        }
        let seg = &*self.seg;
        let (me, p, k) = (seg.rank(), seg.size(), self.k);
        let waits = match self.kind {
            SmKind::Gather { root, .. } | SmKind::Gatherv { root, .. } if me == root => 0..p,
            SmKind::Scatter { root, .. }
            | SmKind::Scatterv { root, .. }
            | SmKind::Bcast { root }
                if me != root =>
            {
                root..root + 1
            }
            _ => return false,
        };
        let mut any = false;
        for r in waits.filter(|&r| r != me && !seg.stamped(r, k)) {
            if !seg.remote(r) {
                return false;
            }
            any = true;
        }
        any
    }

    /// A gatherv's or scatterv's root does not copy its own block (from the input to the
    /// output) when it reads its result: its schedule does, once it posted the messages.
    pub(crate) fn own_block_elsewhere(&mut self) {
        self.own_elsewhere = true;
    }

    /// Advance: post if not yet done, then finish if every needed stamp is there. `input`
    /// and `output` are the schedule's regions 0 and 1 (pointer, length); `op` its
    /// reduction.
    ///
    /// # Safety
    /// The regions are valid (input readable, output writable) until the end (the MPI
    /// contract of the nonblocking call).
    pub(crate) unsafe fn progress(
        &mut self,
        input: (*const u8, usize),
        output: (*mut u8, usize),
        op: Option<&OwnedOp>,
    ) -> Progress {
        if let Some((r, end)) = self.draining {
            return self.drained(r, end);
        }
        if self.done {
            return Progress::Done;
        }
        if let SmKind::Single { root, block, coll } = self.kind {
            // SAFETY: caller contract.
            let end = unsafe { self.single((root, block, coll), input, output) };
            return self.drain(root, end);
        }
        if let SmKind::Bcast { root } = self.kind {
            // SAFETY: caller contract.
            let end = unsafe { self.bcast_small(root, input, output) };
            return self.drain(root, end);
        }
        if let SmKind::BcastMsg { root } = self.kind {
            return self.bcast_msg(root, input.1, output.1);
        }
        if let SmKind::Pair { red } = self.kind {
            let Some(op) = op else {
                return Progress::Mismatch;
            };
            let (seg, k) = (&*self.seg, self.k);
            let f = (&*op.f as Fold<'_>, op.elem_size, op.commutative);
            // SAFETY: caller contract (the regions are valid until the end); `k` is open
            // (closed below), and both ranks run the same reduction on the same length.
            let Some(end) = (unsafe { seg.pair_step((&mut self.pair, k, red), input, output, f) })
            else {
                return Progress::Pending;
            };
            seg.close_nb(k);
            self.done = true;
            return end;
        }
        if let SmKind::Large { red } = self.kind {
            let Some(op) = op else {
                return Progress::Mismatch;
            };
            let (seg, k) = (&*self.seg, self.k);
            let f = (&*op.f as Fold<'_>, op.elem_size);
            // A reduce-scatter of equal blocks with a commutative operation folds by CPU
            // when the ranks are pinned, at most 4 a CPU (`Seg::group_nb`), as the blocking
            // one (`Seg::rs_grouped_step`).
            seg.group_nb(&mut self.large, red, op.commutative);
            // SAFETY: caller contract (the regions are valid until the end); `k` is open
            // (closed below), and every rank runs the same reduction on the same length.
            let end = unsafe { seg.large_step((&mut self.large, k, red), input, output, f) };
            let Some(ok) = end else {
                return Progress::Pending;
            };
            return self.finish(Progress::ended(ok));
        }
        let seg = &*self.seg;
        let k = self.k;
        let bytes = |(p, n): (*const u8, usize)| -> &[u8] {
            if n == 0 {
                &[]
            } else {
                // SAFETY: caller contract (the region is readable, `n` bytes).
                unsafe { std::slice::from_raw_parts(p, n) }
            }
        };
        if !self.posted {
            // A scatterv root that shares its blocks (`scatterv_shares`).
            let mut share_post = false;
            let posted = match &self.kind {
                SmKind::Alltoallv {
                    scounts,
                    sdispls,
                    rcounts,
                    in_place,
                    far,
                    ..
                } => {
                    let (me, p) = (seg.rank(), seg.size());
                    let max = alltoallv_max(p);
                    // In place the blocks are still in the output: nothing is received
                    // into it before this post.
                    let src = if *in_place {
                        bytes((output.0.cast_const(), output.1))
                    } else {
                        bytes(input)
                    };
                    // Every rank posts its table, whatever its counts (an empty block's
                    // entry too): every receiver compares each sender's length with its
                    // count, and marks there that it is done with the senders' buffers.
                    // Per far record: where we want the block from that rank when we ask
                    // for it to be written, our count for it, and whether we write ours.
                    let writes = if *in_place { 0 } else { WRITES };
                    let back =
                        |r: usize| match self.kind.asks_push((me, p), r, (src.len(), output.1)) {
                            Some(d) => (
                                (output.0 as u64).wrapping_add(d as u64),
                                writes | rcounts[r] as u64,
                            ),
                            None => (0, writes),
                        };
                    seg.try_post_with(k, |b| {
                        // SAFETY: `b` is our buffer's `CAP` bytes; `max >= FAR_RECORD`
                        // (`far_entries_fit_where_blocks_would`).
                        unsafe { put_blocks(b, (me, p, max, *far), src, (scounts, sdispls), &back) }
                    })
                }
                SmKind::Gatherv {
                    root,
                    counts,
                    displs,
                    ..
                } => {
                    let (me, p, n) = (seg.rank(), seg.size(), input.1);
                    let far = |c: usize| self.kind.far_block(p, c);
                    if me == *root {
                        // With writers, our pid, then per rank the address and length of
                        // its block in our output when it writes it there (else 0, 0).
                        // Without, one word 0 (no table): a rank whose block is longer
                        // than the segment takes (erroneous: its count differs from ours)
                        // waits for our post and then writes nothing.
                        let base = output.0 as u64;
                        // Every block larger than the segment takes gets its place (a rank
                        // whose length is a cross-memory one writes there, whatever path
                        // our count gives it) and our count, which a rank whose block goes
                        // by message reads before it sends.
                        let big = |r: usize| r != me && counts[r] > GATHERV_MAX;
                        if !(0..p).any(big) {
                            // SAFETY: `b` is our buffer's `CAP` bytes.
                            seg.try_post_with(k, |b| unsafe { b.cast::<u64>().write_unaligned(0) })
                        } else {
                            seg.try_post_with(k, |b| {
                                let w = b.cast::<u64>();
                                // SAFETY: `b` is our buffer's `CAP >= 8 (1 + 2p)` bytes (the
                                // largest communicator has 64 ranks).
                                unsafe {
                                    w.write_unaligned(own_pid());
                                    for r in 0..p {
                                        let (c, d) = (counts[r], displs[r]);
                                        let (at, len) = match big(r) {
                                            true if d + c <= output.1 => (base + d as u64, c),
                                            true => (0, c),
                                            false => (0, 0),
                                        };
                                        w.add(1 + 2 * r).write_unaligned(at);
                                        w.add(2 + 2 * r).write_unaligned(len as u64);
                                    }
                                }
                            })
                        }
                    } else if n <= GATHERV_MAX {
                        // An empty block is posted too (its length): a root whose count
                        // for it is not 0 (erroneous) waits for that.
                        seg.try_post_with(k, |b| {
                            // SAFETY: `b` is our buffer's `CAP` bytes and `8 + n <= CAP`;
                            // the input is readable (caller contract).
                            unsafe {
                                b.cast::<u64>().write_unaligned(n as u64);
                                std::ptr::copy_nonoverlapping(input.0, b.add(8), n);
                            }
                        })
                    } else {
                        // A writer posts its length once it wrote; a block that goes by
                        // message posts its length now: a root whose count for it puts it
                        // on the segment (erroneous) sees it and expects no message.
                        far(n)
                            || seg.try_post_with(k, |b| {
                                // SAFETY: `b` is our buffer's `CAP` bytes.
                                unsafe { b.cast::<u64>().write_unaligned(n as u64) }
                            })
                    }
                }
                SmKind::Scatterv {
                    root,
                    counts,
                    displs,
                    far,
                } => {
                    let (me, p) = (seg.rank(), seg.size());
                    let far_block = |c: usize| self.kind.far_block(p, c);
                    let shift = super::params::nonblocking_share_shift();
                    let budget = shift
                        .filter(|&shift| {
                            me == *root
                                && scatterv_shares(
                                    (me, p),
                                    (output.1 == 0, shift),
                                    input.1,
                                    (counts, displs),
                                    &far_block,
                                )
                        })
                        .map(|_| share_budget(seg, me, |r| if r == me { 0 } else { counts[r] }))
                        .filter(|&b| b != Some(0));
                    let share = budget.is_some();
                    let shift = shift.unwrap_or(SHARE_SHIFT);
                    share_post = share;
                    self.share_shift = shift;
                    if let Some(b) = budget {
                        self.share_budget = (b.unwrap_or(usize::MAX), b.map_or(0, |_| seg.cpu(me)));
                    }
                    // The root's post: the other ranks' blocks, when all of them fit
                    // our buffer (only the root posts: the others skip the sum).
                    let posted = || {
                        let n: usize = counts
                            .iter()
                            .enumerate()
                            .filter_map(|(r, &c)| (r != me).then_some(c))
                            .sum();
                        if n <= CAP {
                            n
                        } else {
                            0
                        }
                    };
                    me != *root
                        || seg.try_post_with_n(k, posted(), |b| {
                            let at = (me, p, scatterv_max(p), *far);
                            // SAFETY: `b` is our buffer's `CAP >= DATA` bytes.
                            unsafe {
                                put_blocks(b, at, bytes(input), (counts, displs), &|_| (0, 0))
                            }
                            if let (true, Some(at)) = (share, scatterv_share_at(p)) {
                                let w = b.cast::<u64>();
                                for r in (0..p).filter(|&r| r != me) {
                                    // SAFETY: `b` is our buffer's `CAP` bytes: the table
                                    // (a word per rank) leads it; every other rank's block
                                    // is far (`scatterv_shares`), so its entry names its
                                    // record (`FAR_RECORD` bytes) among the `p - 1` after
                                    // the table, and the share words after those fit
                                    // (`scatterv_share_at`).
                                    unsafe {
                                        let e = w.add(r).read_unaligned();
                                        let rec = ((e >> 32) & 0x7fff_ffff) as usize / 8;
                                        let pid = w.add(rec).read_unaligned();
                                        let flag = SHARED_POST | u64::from(shift) << SHARE_SHIFT_AT;
                                        w.add(rec).write_unaligned(pid | flag);
                                    }
                                }
                                // Every rank's share words cleared (nothing claimed, copied
                                // or opened); only accessed atomically once stamped.
                                for i in at..at + SHARE_WORDS * p {
                                    // SAFETY: within `CAP` (`scatterv_share_at`).
                                    unsafe { w.add(i).write_unaligned(0) };
                                }
                            }
                        })
                }
                SmKind::Alltoall { block } => {
                    // The blocks for the other ranks back to back, ours left out (rank `j`
                    // finds its block at index `j` before ours, `j - 1` after it), as the
                    // blocking alltoall posts: on 2 ranks the post is the one block the
                    // peer reads, right after the stamp (1 KiB: 17 lines written instead
                    // of 33, far 1.63 to 1.0 us). Our own block goes straight from the
                    // input to the output below, not through our buffer.
                    let (b, me, p) = (*block, seg.rank(), seg.size());
                    // The input is our `p` blocks (the builder's); the bounds are clamped
                    // to it all the same.
                    let n = input.1.min(p * b);
                    let (own, rest) = ((me * b).min(n), (me * b + b).min(n));
                    let posted = seg.try_post_with(k, |d| {
                        // SAFETY: `d` is our buffer's `CAP` bytes, at least the `n <= DATA`
                        // (the builder's check) we write; the input is readable, `n` bytes
                        // (caller contract), `own <= rest <= n`.
                        unsafe {
                            std::ptr::copy_nonoverlapping(input.0, d, own);
                            std::ptr::copy_nonoverlapping(input.0.add(rest), d.add(own), n - rest);
                        }
                    });
                    let ours = rest - own;
                    if posted && ours > 0 && rest <= output.1 && input.0 != output.0.cast_const() {
                        // SAFETY: the input holds `rest` bytes, the output has room for
                        // them (checked); `copy`, as they might overlap in an erroneous
                        // call (in place, the same address, our block is where it belongs
                        // already).
                        unsafe { std::ptr::copy(input.0.add(own), output.0.add(own), ours) };
                    }
                    posted
                }
                SmKind::Allreduce
                | SmKind::AllreduceMsg
                | SmKind::Reduce { .. }
                | SmKind::Scan { .. }
                | SmKind::ReduceScatter { .. } => {
                    // Our length word, then (fitting a buffer) our vector. The word is
                    // written last, right before the stamp (readers look at it only after
                    // the stamp): written first (into the stamp's line, before the copy),
                    // the collective took longer (np=2, far, 1 KiB ireduce_scatter_block
                    // 1.22 against 1.08 us; why, not measured).
                    let n = input.1;
                    let len = n | self.mark;
                    let data = if self.kind == SmKind::AllreduceMsg {
                        0
                    } else {
                        n
                    };
                    seg.try_post_with(k, |b| {
                        // SAFETY: `b` is our buffer's `CAP` bytes and `8 + DATA <= CAP`
                        // (`n <= DATA` was checked by the builder for a vector posted);
                        // the input is readable (caller contract).
                        unsafe {
                            std::ptr::copy_nonoverlapping(input.0, b.add(8), data);
                            b.cast::<u64>().write_unaligned(LEN_TAG | len as u64);
                        }
                    })
                }
                kind => {
                    let n = if kind.posts(seg.rank()) { input.1 } else { 0 };
                    // SAFETY: caller contract (input readable); `n <= DATA` was checked
                    // by the builder.
                    let posted = unsafe { seg.try_post(k, input.0, n) };
                    if let (true, Some((at, len))) = (posted, kind.own_place(seg.rank())) {
                        // An allgather(v)'s own block goes straight from the input to its
                        // place in the output while the others post, not through our
                        // buffer after the wait ([`SmKind::compute`] leaves it out).
                        let len = len.min(input.1);
                        let to = output.0.wrapping_add(at);
                        if len > 0 && at + len <= output.1 && input.0 != to.cast_const() {
                            // SAFETY: the input holds `len` bytes, the output has room for
                            // them at `at` (checked); `copy`, as they might overlap in an
                            // erroneous call (in place, the same address, our block is
                            // where it belongs already).
                            unsafe { std::ptr::copy(input.0, to, len) };
                        }
                    }
                    posted
                }
            };
            if !posted {
                return Progress::Pending;
            }
            self.posted = true;
            if share_post {
                self.share = 1;
            }
        }
        let (me, p) = (seg.rank(), seg.size());
        if matches!(
            self.kind,
            SmKind::Gatherv { .. } | SmKind::Scatterv { .. } | SmKind::Alltoallv { .. }
        ) {
            // SAFETY: caller contract (the regions are valid); `k` is open (closed below).
            let Some(end) = (unsafe { self.read_v(bytes(input), output) }) else {
                return Progress::Pending;
            };
            self.seg.close_nb(k);
            self.done = true;
            if let SmKind::Scatterv { root, .. } = self.kind {
                return self.drain(root, end);
            }
            return end;
        }
        let needs = self.kind.needs(me, p);
        if !needs.clone().all(|r| seg.stamped(r, k)) {
            if let SmKind::Scatter { root, .. } = self.kind {
                if me != root && self.root_by_message(root) {
                    let end = self.finish(Progress::Mismatch);
                    return self.drain(root, end);
                }
            }
            return Progress::Pending;
        }
        let ours = input.1 | self.mark;
        let want = LEN_TAG | ours as u64;
        // The correct call's whole check: every post starts with our length word.
        let same = |r: usize| {
            // SAFETY: rank `r` stamped `k` (acquired above) and `k` is open; its first word,
            // read atomically (a large-region post's first word is a mark its owner updates).
            unsafe { seg.nb_word(r, k, 0) }.load(Ordering::Relaxed) == want
        };
        if self.kind.len_word() && !needs.clone().filter(|&r| r != me).all(same) {
            let posted = |r: usize| {
                post_len_of(|i| {
                    // SAFETY: every rank stamped `k` (acquired above) and `k` is open; a
                    // post's first four words lie within `CAP` (read atomically: a
                    // large-region post's first word is a mark its owner updates).
                    unsafe { seg.nb_word(r, k, i) }.load(Ordering::Acquire)
                })
            };
            if let Some(theirs) = seg.differing(ours, needs, posted) {
                return self.finish(Progress::Lengths { theirs, ours });
            }
        }
        let out: &mut [u8] = if output.1 == 0 {
            &mut []
        } else {
            // SAFETY: caller contract (output writable).
            unsafe { std::slice::from_raw_parts_mut(output.0, output.1) }
        };
        // SAFETY: every needed stamp of `k` is acquired and `k` is open (closed below).
        let peer = |r: usize, off: usize, n: usize| unsafe { seg.peer_nb(r, k, off, n) };
        let f = op.map(|o| &*o.f as Fold<'_>);
        self.kind.compute((me, p), peer, out, f);
        seg.close_nb(k);
        self.done = true;
        Progress::Done
    }
}

impl SmNb {
    /// Closes the collective's slot and marks it done: it ended with `end`.
    fn finish(&mut self, end: Progress) -> Progress {
        self.seg.close_nb(self.k);
        self.done = true;
        end
    }

    /// The first word and the length (third word) of the root's post of this broadcast
    /// (call once the root's stamp of it is acquired).
    fn root_post(&self, root: usize) -> (u64, usize) {
        let word = |i: usize| {
            // SAFETY: the root stamped `k` (acquired by the caller) and `k` is open here,
            // so its post is unchanged; its first 24 bytes lie within `CAP`.
            let w = unsafe { self.seg.peer_nb(root, self.k, 8 * i, 8) };
            u64::from_ne_bytes(w.try_into().unwrap_or([0; 8]))
        };
        (word(0), usize::try_from(word(2)).unwrap_or(usize::MAX))
    }

    /// Whether we drain ([`SmNb::drain`]) after reading the first word `tag` of the root's
    /// post of a broadcast that we do not take by message: it is [`BCAST_MSG_TAG`] and the
    /// root is our parent on `seg`, so the root sends us
    /// its message anyway (it does not wait for its children's posts), which we take
    /// before we end ([`SmNb::drain`]).
    fn drains(seg: &Seg, root: usize, tag: u64) -> bool {
        let (me, p) = (seg.rank(), seg.size());
        tag == BCAST_MSG_TAG && me != root && bcast_tree(me, root, p).0.is_empty()
    }

    /// A broadcast of another path than the root's [`SmKind::BcastMsg`] that ended with
    /// `end`: when the root is our parent ([`SmNb::drains`]), receive its message into
    /// nothing (the engine's clear-to-send then asks for none of its bytes; an eager one is
    /// dropped), so that its send ends and no message is left behind, and end once that
    /// receive has. The error is ours already (`end`).
    fn drain(&mut self, root: usize, end: Progress) -> Progress {
        if end == Progress::Pending || !std::mem::take(&mut self.drain) {
            return end;
        }
        let Some((e, comm)) = self.engine else {
            return end;
        };
        let buf = std::ptr::NonNull::<u8>::dangling().as_ptr();
        // SAFETY: a receive of 0 bytes writes nothing.
        match unsafe { e.irecv(buf, 0, root as i32, crate::sched::sm_tag(self.k), comm) } {
            Ok(r) => self.drained(r, end),
            // The root's send then never ends; our error says why.
            Err(_) => end,
        }
    }

    /// [`SmNb::drain`]'s receive `r`: `end` once it has ended.
    fn drained(&mut self, r: ReqId, end: Progress) -> Progress {
        let Some((e, _)) = self.engine else {
            return end;
        };
        // (It ends truncated: the root's message is longer than nothing.)
        if e.test(r).is_none() {
            self.draining = Some((r, end));
            return Progress::Pending;
        }
        self.draining = None;
        end
    }

    /// A 2-rank scatter's reader whose root has not stamped this collective yet: whether
    /// the root passed it instead ([`Seg::passed`]: its block went by message,
    /// `CollComm::iscatter_pair_msg`, so its length is another than ours, an erroneous
    /// call). Then it sends us its block, which we take into nothing ([`SmNb::drain`],
    /// set here) before we fail. Looked at once per [`ROOT_LOOKS`] waits from the
    /// [`ROOT_LOOKS_FIRST`]th: the root's done word shares a line it writes, which a
    /// correct call should not pull away from it.
    fn root_by_message(&mut self, root: usize) -> bool {
        let passed = Self::root_passed(&self.seg, &mut self.looks, root, self.k);
        self.drain |= passed;
        passed
    }

    /// [`SmNb::root_by_message`] on `seg`'s collective `k` with its count of `looks`
    /// (without setting [`SmNb::drain`]).
    #[inline(always)]
    fn root_passed(seg: &Seg, looks: &mut u32, root: usize, k: u64) -> bool {
        *looks = looks.wrapping_add(1);
        *looks >= ROOT_LOOKS_FIRST && *looks % ROOT_LOOKS == 0 && Self::root_gone(seg, root, k)
    }

    /// [`SmNb::root_passed`]'s look (out of the waiting path: a correct call's reader
    /// seldom gets there).
    #[cold]
    #[inline(never)]
    fn root_gone(seg: &Seg, root: usize, k: u64) -> bool {
        seg.size() == 2 && seg.passed(root, k)
    }

    /// Whether rank `r` posted [`BCAST_MSG_TAG`] as its first word of this broadcast
    /// (`None`: it has not stamped yet).
    fn takes_message(&self, r: usize) -> Option<bool> {
        if !self.seg.stamped(r, self.k) {
            return None;
        }
        // SAFETY: `r` stamped `k` (acquired) and `k` is open here; 8 <= CAP.
        let w = unsafe { self.seg.peer_nb(r, self.k, 0, 8) };
        Some(u64::from_ne_bytes(w.try_into().unwrap_or([0; 8])) == BCAST_MSG_TAG)
    }

    /// Advance a small [`SmKind::Bcast`] (see there).
    ///
    /// # Safety
    /// As [`SmNb::progress`].
    unsafe fn bcast_small(
        &mut self,
        root: usize,
        input: (*const u8, usize),
        output: (*mut u8, usize),
    ) -> Progress {
        let seg = &*self.seg;
        let (k, me) = (self.k, seg.rank());
        if !self.posted {
            let posted = if me == root {
                let n = input.1;
                seg.try_post_with(k, |b| {
                    let w = b.cast::<u64>();
                    // SAFETY: `b` is our buffer's `CAP >= BCAST_AT + DATA` bytes and the
                    // input holds `n <= DATA` bytes (the builder chose this path for
                    // them; readable by the caller contract).
                    unsafe {
                        w.write_unaligned(BCAST_SMALL_TAG);
                        w.add(1).write_unaligned(0);
                        w.add(2).write_unaligned(n as u64);
                        if n > 0 {
                            std::ptr::copy_nonoverlapping(input.0, b.add(BCAST_AT), n);
                        }
                    }
                })
            } else {
                // Our first word: we take no message (a root whose length goes by
                // message, an erroneous call, reads it).
                // SAFETY: `b` is our buffer's `CAP >= 8` bytes.
                seg.try_post_with(k, |b| unsafe { b.cast::<u64>().write_unaligned(0) })
            };
            if !posted {
                return Progress::Pending;
            }
            self.posted = true;
        }
        if me == root {
            return self.finish(Progress::Done);
        }
        if !seg.stamped(root, k) {
            return Progress::Pending;
        }
        let (tag, len) = self.root_post(root);
        self.drain = Self::drains(seg, root, tag);
        let end = if tag == BCAST_SMALL_TAG && len == output.1 {
            if len > 0 {
                // SAFETY: the root stamped `k` (acquired) and `k` is open here: its
                // `len <= DATA` bytes at `BCAST_AT` are unchanged; the output is writable
                // for `len` bytes (caller contract) and outside the segment.
                unsafe {
                    let src = seg.peer_nb(root, k, BCAST_AT, len);
                    std::ptr::copy_nonoverlapping(src.as_ptr(), output.0, len);
                }
            }
            Progress::Done
        } else {
            Progress::Differs {
                root: len,
                ours: output.1,
            }
        };
        self.finish(end)
    }

    /// Advance the segment's part of a [`SmKind::BcastMsg`] (see there): `n` is our
    /// length (the root's input, the others' output). The root ends at its post (it sends
    /// to every child); below it, once we know whom we send to ([`SmNb::bcast_takers`])
    /// and that the root and every ancestor take part.
    fn bcast_msg(&mut self, root: usize, input: usize, output: usize) -> Progress {
        let (k, me, p) = (self.k, self.seg.rank(), self.seg.size());
        let n = if me == root { input } else { output };
        if !self.posted {
            let posted = self.seg.try_post_with(k, |b| {
                let w = b.cast::<u64>();
                // SAFETY: `b` is our buffer's `CAP >= 24` bytes.
                unsafe {
                    w.write_unaligned(BCAST_MSG_TAG);
                    w.add(1).write_unaligned(0);
                    w.add(2).write_unaligned(n as u64);
                }
            });
            if !posted {
                return Progress::Pending;
            }
            self.posted = true;
        }
        let (ancestors, children) = bcast_tree(me, root, p);
        if me == root {
            // The root sends to every child at once, without waiting for their posts: a
            // child whose length put it on another path (an erroneous call) sees our tag
            // and takes the message into nothing ([`SmNb::drain`]).
            self.takers = children.iter().fold(0, |t, &c| t | 1 << c);
            return self.finish(Progress::Done);
        }
        if !self.seg.stamped(root, k) {
            return Progress::Pending;
        }
        let (tag, len) = self.root_post(root);
        if tag != BCAST_MSG_TAG {
            return self.finish(Progress::Differs { root: len, ours: n });
        }
        for &a in &ancestors {
            match self.takes_message(a) {
                None => return Progress::Pending,
                Some(false) => return self.finish(Progress::Upstream { root: len, ours: n }),
                Some(true) => {}
            }
        }
        let mut takers = 0;
        for &c in &children {
            match self.takes_message(c) {
                None => return Progress::Pending,
                Some(t) => takers |= u64::from(t) << c,
            }
        }
        self.takers = takers;
        self.finish(Progress::Done)
    }

    /// The children (bit `r`) that take a [`SmKind::BcastMsg`]'s message from us, known
    /// once the segment's part ended well.
    pub(crate) fn bcast_takers(&self) -> u64 {
        self.takers
    }

    /// Advance a [`SmKind::Single`] collective (see there).
    ///
    /// # Safety
    /// As [`SmNb::progress`].
    unsafe fn single(
        &mut self,
        (root, block, coll): (usize, usize, Rooted),
        input: (*const u8, usize),
        output: (*mut u8, usize),
    ) -> Progress {
        let seg = &*self.seg;
        let (k, me, p) = (self.k, seg.rank(), seg.size());
        if coll == Rooted::Bcast && seg.bcast_large(block) {
            // Through the nonblocking large region (oversubscribed): the root copies its
            // data into its slot and is done, the others copy it out of there.
            // SAFETY: caller contract (the regions are valid until the end); `k` is open
            // (closed below); `bcast_large` holds for `block`, the root's input's length
            // and the others' output's.
            let end = unsafe { seg.bcast_large_step((&mut self.large, k, root), input, output) };
            let Some(ok) = end else {
                return Progress::Pending;
            };
            if !ok && me != root {
                // The root's post is there (the step read it) and says another length or
                // path.
                let (tag, len) = self.root_post(root);
                self.drain = Self::drains(seg, root, tag);
                return self.finish(Progress::Differs {
                    root: len,
                    ours: output.1,
                });
            }
            return self.finish(Progress::ended(ok));
        }
        if me == root {
            if !self.posted {
                let buf = match coll {
                    Rooted::Gather => output.0 as u64,
                    Rooted::Bcast | Rooted::Scatter => input.0 as u64,
                };
                let budget = (shares(coll, block) && output.1 == 0)
                    .then(|| share_budget(seg, me, |r| if r == me { 0 } else { block }))
                    .filter(|&b| b != Some(0));
                let share = budget.is_some();
                let posted = seg.try_post_with(k, |b| {
                    let w = b.cast::<u64>();
                    // SAFETY: `b` is our buffer's `CAP` bytes, of which we write the
                    // post's first words.
                    unsafe {
                        w.write_unaligned(own_pid() | if share { SHARED_POST } else { 0 });
                        w.add(1).write_unaligned(buf);
                        w.add(2).write_unaligned(block as u64);
                        // Shared blocks: every rank's record cleared (nothing claimed,
                        // copied or opened); only accessed atomically once stamped.
                        if share {
                            for i in SINGLE_POST..SINGLE_POST + SHARE_WORDS * p {
                                w.add(i).write_unaligned(0);
                            }
                        }
                    }
                });
                if !posted {
                    return Progress::Pending;
                }
                self.posted = true;
                if let Some(b) = budget {
                    self.share = share_chunks(block, SHARE_SHIFT);
                    self.share_budget = (b.unwrap_or(usize::MAX), b.map_or(0, |_| seg.cpu(me)));
                }
                // Our own block (none in place), which no other rank touches. Gather in
                // place passes our block of the output as the input: `copy` allows that.
                let (src, dst, n) = match coll {
                    Rooted::Bcast => (input.0, output.0, 0),
                    Rooted::Gather => (input.0, output.0.wrapping_add(me * block), input.1),
                    Rooted::Scatter => (input.0.wrapping_add(me * block), output.0, output.1),
                };
                let fits = n == 0
                    || match coll {
                        Rooted::Bcast => true,
                        Rooted::Gather => n <= block && (me + 1) * block <= output.1,
                        Rooted::Scatter => n >= block && (me + 1) * block <= input.1,
                    };
                if !fits {
                    self.copied = Some(Progress::Mismatch);
                } else if n > 0 {
                    let n = n.min(block);
                    // SAFETY: caller contract (input readable, output writable), `n` bytes
                    // inside each (checked above).
                    unsafe { std::ptr::copy(src, dst, n) };
                }
            }
            // Every other rank has stamped once it no longer uses our buffer.
            if !(0..p).filter(|&r| r != me).all(|r| seg.stamped(r, k)) {
                if self.share != 0 {
                    // SAFETY: caller contract (the input is readable); `k` is open here.
                    unsafe { self.help_scatter(input, block) };
                }
                return Progress::Pending;
            }
            // A 2-rank scatter's reader whose length put its block on a message (an
            // erroneous call) stamped with its mark when it saw our post: it read nothing.
            if coll == Rooted::Scatter && p == 2 {
                // SAFETY: the other rank stamped `k` (acquired above) and `k` is open here;
                // its first word lies within `CAP` (in its stamp's line).
                let first = unsafe { seg.nb_word(1 - me, k, 0) }.load(Ordering::Relaxed);
                if first == SCATTER_MSG_MARK {
                    self.copied = Some(Progress::Mismatch);
                }
            }
        } else {
            if self.copied.is_none() && !seg.stamped(root, k) {
                if coll != Rooted::Scatter || !Self::root_passed(seg, &mut self.looks, root, k) {
                    return Progress::Pending;
                }
                self.drain = true;
                // The root's block goes by message (ours here): nothing to copy; we still
                // stamp below (the root reads no stamp of ours then; our sequence stays).
                self.copied = Some(Progress::Mismatch);
            }
            if self.copied.is_none() {
                // SAFETY: the root stamped `k` (acquired) and `k` is open here (closed
                // below), so its post is unchanged; `8 * SINGLE_POST <= CAP`.
                let word = |i: usize| unsafe {
                    let w = seg.peer_nb(root, k, 8 * i, 8);
                    u64::from_ne_bytes(w.try_into().unwrap_or([0; 8]))
                };
                let (pid, base, len) = (word(0) as i32, word(1), word(2) as usize);
                let at = base
                    + if coll == Rooted::Bcast {
                        0
                    } else {
                        (me * len) as u64
                    };
                // A broadcast's root that took another path (its first word is a tag, not
                // a pid) or posted another length: nothing to copy (an erroneous call).
                if coll == Rooted::Bcast && (word(0) >= BCAST_MSG_TAG || len != output.1) {
                    self.drain = Self::drains(seg, root, word(0));
                    self.copied = Some(Progress::Differs {
                        root: len,
                        ours: output.1,
                    });
                }
                // The root's buffer holds `len` bytes at `at` for us, unchanged (and
                // written by nobody else) until we stamp, as the root waits for that.
                let r = match coll {
                    _ if self.copied.is_some() => Some(Ok(())),
                    Rooted::Scatter
                        if word(0) & SHARED_POST != 0 && shares(coll, len) && len <= output.1 =>
                    {
                        self.share = share_chunks(len, SHARE_SHIFT);
                        let rec = SINGLE_POST + SHARE_WORDS * me;
                        // Pinned to the root's CPU: the root writes our block (see
                        // `share_later`), we only open it for now.
                        let beside = seg.cpu(me) != 0 && seg.cpu(me) == seg.cpu(root);
                        if beside {
                            self.share_later = Some(ShareLater {
                                root,
                                rec,
                                pid,
                                remote: at,
                                out: output.0 as usize,
                                len,
                            });
                        }
                        // SAFETY: the root stamped `k` (acquired) and `k` is open here; the
                        // output has room for `len` bytes (checked, writable by the caller
                        // contract); the root's block for us is `len` bytes at `at`,
                        // unchanged until we stamp, which we do only once every chunk is
                        // counted copied; our record at `rec` lies within `CAP` (checked
                        // at compile time).
                        Some(unsafe {
                            self.read_shared((root, rec), (pid, at), output.0, len, !beside)
                        })
                    }
                    Rooted::Bcast | Rooted::Scatter if len <= output.1 => {
                        // SAFETY: see above; the output has room for `len` bytes (checked,
                        // writable by the caller contract).
                        Some(unsafe { cma_copy(pid, output.0, at, len, Cma::Read) })
                    }
                    Rooted::Gather if input.1 <= len => {
                        // SAFETY: see above; the input holds `input.1 <= len` bytes, and a
                        // write only reads the local side.
                        Some(unsafe { cma_copy(pid, input.0.cast_mut(), at, input.1, Cma::Write) })
                    }
                    _ => None,
                };
                self.copied = self.copied.or(Some(match r {
                    None => Progress::Mismatch,
                    Some(Ok(())) => Progress::Done,
                    Some(Err(_)) => Progress::CopyFailed,
                }));
            }
            // A shared block: every chunk copied, by us or by the root, before we stamp
            // (the root writes into our output until then).
            if self.share != 0 {
                // SAFETY: the root stamped `k` and `k` is open here: its record for us is
                // only accessed atomically; within `CAP` (checked at compile time).
                let copied = unsafe { seg.nb_word(root, k, SINGLE_POST + SHARE_WORDS * me + 1) }
                    .load(Ordering::Acquire);
                if copied % SHARE_FAILED < self.share {
                    if let Some(l) = self.share_later {
                        self.share_looks += 1;
                        if self.share_looks >= SHARE_DEFER_LOOKS {
                            self.share_later = None;
                            // SAFETY: as at the opening above (the same arguments; the
                            // root's post stays until we stamp, which we have not).
                            let r = unsafe {
                                self.read_shared(
                                    (l.root, l.rec),
                                    (l.pid, l.remote),
                                    l.out as *mut u8,
                                    l.len,
                                    true,
                                )
                            };
                            if r.is_err() {
                                self.copied = Some(Progress::CopyFailed);
                            }
                        }
                    }
                    return Progress::Pending;
                }
                if copied >= SHARE_FAILED && self.copied == Some(Progress::Done) {
                    self.copied = Some(Progress::CopyFailed);
                }
            }
            // Tell the root we are done with its buffer (later if our buffer is in use);
            // our first word: we take no message (a broadcast root whose length goes by
            // message, an erroneous call, reads it).
            // SAFETY: `b` is our buffer's `CAP >= 8` bytes.
            if !seg.try_post_with(k, |b| unsafe { b.cast::<u64>().write_unaligned(0) }) {
                return Progress::Pending;
            }
        }
        seg.close_nb(k);
        self.done = true;
        self.copied.unwrap_or(Progress::Done)
    }

    /// A shared scatter (or scatterv) block's reader ([`shares`], [`scatterv_shares`]):
    /// opens its block to the root (its pid and output address in the root's record for
    /// it, the [`SHARE_WORDS`] at word `rec` of the root's post), then copies the chunks it
    /// claims first from the root's buffer (`remote`: the root's pid and our block's
    /// address there); the root writes the others. Err when one of our copies failed.
    ///
    /// # Safety
    /// The root stamped our collective (acquired) and it is open here, its post sharing
    /// with [`SHARE_WORDS`] at `rec` (within `CAP`); `out` is writable for `len` bytes, the
    /// root's block for us `len` bytes long, and neither changes until we stamp. Not `now`:
    /// only opens the block (the root writes it, [`SmNb::share_later`]); called again with
    /// `now` it claims what is left.
    unsafe fn read_shared(
        &self,
        (root, rec): (usize, usize),
        (pid, remote): (i32, u64),
        out: *mut u8,
        len: usize,
        now: bool,
    ) -> std::io::Result<()> {
        let (seg, k) = (&*self.seg, self.k);
        // SAFETY: caller contract (stamped, open): the record is only accessed atomically;
        // within `CAP` (checked at compile time, or by `scatterv_share_at`).
        let word = |i: usize| unsafe { seg.nb_word(root, k, rec + i) };
        word(2).store(own_pid(), Ordering::Relaxed);
        // The root writes only once it sees our address (acquire: our pid too).
        word(3).store(out as u64, Ordering::Release);
        if !now {
            return Ok(());
        }
        let shift = self.share_shift;
        let (n, mut res) = (share_chunks(len, shift), Ok(()));
        loop {
            let Some(c) = claim(word(0), n, true) else {
                return res;
            };
            // The claimed chunks are contiguous: one copy.
            let (off, _) = share_chunk(c.start, len, shift);
            let (last, l) = share_chunk(c.end - 1, len, shift);
            let l = last + l - off;
            // SAFETY: caller contract: `off + l <= len` bytes at `out` and at `remote`.
            let r = unsafe { cma_copy(pid, out.add(off), remote + off as u64, l, Cma::Read) };
            let failed = r.is_err();
            if let Err(e) = r {
                res = Err(e);
            }
            let k = c.end - c.start;
            word(1).fetch_add(k + u64::from(failed) * SHARE_FAILED, Ordering::Release);
        }
    }

    /// A shared scatter's root ([`shares`]) between its post and its end: copies the
    /// unclaimed chunks (within its budget, of the readers it helps: [`share_budget`]) of
    /// every block whose reader opened it to us, from our `input`
    /// into the reader's output (`process_vm_writev`), each counted in the reader's record
    /// (a failed one marked, the reader reports it).
    ///
    /// # Safety
    /// We posted our collective (stamped) and it is open here; `input` is readable.
    unsafe fn help_scatter(&mut self, input: (*const u8, usize), block: usize) {
        let (seg, k, me, p) = (&*self.seg, self.k, self.seg.rank(), self.seg.size());
        let (budget, mine) = &mut self.share_budget;
        // First the readers pinned to our CPU, whole (they leave their blocks to us for a
        // while, `SmNb::share_later`; ours is the CPU that copies them either way), then
        // those of other CPUs within the budget.
        for beside in [true, false] {
            for r in (1..p).rev().map(|i| (me + i) % p) {
                if (r + 1) * block > input.1 || (*mine != 0 && seg.cpu(r) == *mine) != beside {
                    continue;
                }
                if !beside && *budget == 0 {
                    break;
                }
                // SAFETY: our own post of `k`, stamped and open: the records are only
                // accessed atomically; within `CAP` (checked at compile time).
                let word =
                    |i: usize| unsafe { seg.nb_word(me, k, SINGLE_POST + SHARE_WORDS * r + i) };
                let to = word(3).load(Ordering::Acquire);
                if to == 0 {
                    continue;
                }
                let mut whole = usize::MAX;
                let b = if beside { &mut whole } else { &mut *budget };
                // SAFETY: `(r + 1) * block <= input.1` (checked above), readable (caller
                // contract); the record is the reader's, which opened it with `to`.
                unsafe {
                    write_unclaimed(&word, input.0.add(r * block), (block, SHARE_SHIFT), to, b)
                };
            }
        }
    }

    /// A sharing scatterv's root ([`scatterv_shares`]) between its post and its end, as
    /// [`SmNb::help_scatter`] (`shift`: log2 of our chunk; the budget and our CPU of
    /// [`SmNb::share_budget`]): copies the unclaimed chunks of every block whose reader
    /// opened it to us (rank `r`'s: `counts[r]` bytes at `displs[r]` of our `input`) into
    /// the reader's output, each counted in its share words.
    ///
    /// # Safety
    /// We posted our collective sharing (stamped) and it is open here; `input` is readable
    /// and holds every other rank's block (`scatterv_shares` checked it).
    unsafe fn help_scatterv(
        (seg, k): (&Seg, u64),
        (shift, (budget, mine)): (u32, &mut (usize, u32)),
        input: &[u8],
        (counts, displs): (&[usize], &[usize]),
    ) {
        let (me, p) = (seg.rank(), seg.size());
        let Some(at) = scatterv_share_at(p) else {
            return;
        };
        for r in (1..p).rev().map(|i| (me + i) % p) {
            if *mine != 0 && seg.cpu(r) == *mine {
                continue;
            }
            if *budget == 0 {
                break;
            }
            let (block, d) = (counts[r], displs[r]);
            let Some(src) = input.get(d..d + block) else {
                continue;
            };
            // SAFETY: our own post of `k`, stamped and open: the share words are only
            // accessed atomically; within `CAP` (`scatterv_share_at`).
            let word = |i: usize| unsafe { seg.nb_word(me, k, at + SHARE_WORDS * r + i) };
            let to = word(3).load(Ordering::Acquire);
            if to == 0 {
                continue;
            }
            // SAFETY: `src` is inside our input, readable (caller contract); the record is
            // the reader's, which opened it with `to`.
            unsafe { write_unclaimed(&word, src.as_ptr(), (block, shift), to, budget) };
        }
    }

    /// The ranks (bit `r`) whose message of a gatherv or scatterv, planned from our own
    /// counts ([`SmKind::each_message`]), does not move: the other end's count puts the
    /// block on the segment (an erroneous call). Known once the segment's part ended.
    pub(crate) fn dropped(&self) -> u64 {
        self.no_msg
    }

    /// The ranks (bit `r`) whose alltoallv message to us, planned from our receive count,
    /// does not come: the sender's count put the block elsewhere (an erroneous call; our
    /// sends to them still move). Known once the segment's part ended.
    pub(crate) fn dropped_receives(&self) -> u64 {
        self.no_recv
    }

    /// The alltoallv messages (sender, bytes) that come to us although our receive count
    /// put the block elsewhere (an erroneous call): the schedule takes each into scratch,
    /// so that no sender waits for a receive that is never posted. Known once the
    /// segment's part ended.
    pub(crate) fn sinks(&self) -> &[(usize, usize)] {
        &self.sinks
    }

    /// The sequence number of this collective among the segment's nonblocking ones (the
    /// same on every rank).
    pub(crate) fn seq(&self) -> u64 {
        self.k
    }

    /// The collective.
    pub(crate) fn kind(&self) -> &SmKind {
        &self.kind
    }

    /// The result of a posted gatherv or scatterv once the stamps it needs are there
    /// (`None`: not yet): the blocks that came through the segment copied into `output`,
    /// the root's own block from `input` (the rule of [`SmKind::each_message`] says which
    /// blocks; the others are the caller's messages).
    ///
    /// # Safety
    /// `output` is writable (`input` is a readable slice); `k` is open.
    unsafe fn read_v(&mut self, input: &[u8], output: (*mut u8, usize)) -> Option<Progress> {
        if let SmKind::Scatterv { root, .. } = self.kind {
            // A 2-rank iscatter's reader (through the root's buffer, `scatterv_max`) whose
            // root's block went by message (an erroneous length): nothing comes here.
            let (me, k) = (self.seg.rank(), self.k);
            if me != root && self.copied.is_none() && !self.seg.stamped(root, k) {
                return self.root_by_message(root).then_some(Progress::Mismatch);
            }
        }
        let seg = &*self.seg;
        let (k, me, p) = (self.k, seg.rank(), seg.size());
        let out: &mut [u8] = if output.1 == 0 {
            &mut []
        } else {
            // SAFETY: caller contract (output writable).
            unsafe { std::slice::from_raw_parts_mut(output.0, output.1) }
        };
        if matches!(self.kind, SmKind::Alltoallv { .. }) {
            // SAFETY: caller contract.
            return unsafe { self.read_alltoallv(input, out) };
        }
        // A word of rank `r`'s posted data (called once its stamp of `k` is acquired).
        let word = |r: usize, off: usize| {
            // SAFETY: rank `r` stamped `k` (acquired) and `k` is open here, so its buffer is
            // unchanged; the words read (a length at 0, a table entry at `8 * me`) lie
            // within its `CAP` bytes.
            let w = unsafe { seg.peer_nb(r, k, off, 8) };
            u64::from_ne_bytes(w.try_into().unwrap_or([0xff; 8]))
        };
        let mut ok = true;
        match &self.kind {
            SmKind::Gatherv {
                root,
                counts,
                displs,
                ..
            } => {
                let far = |c: usize| self.kind.far_block(p, c);
                let by_message = |c: usize| c > GATHERV_MAX && !far(c);
                if me != *root {
                    if by_message(input.len()) {
                        // We send by message only when the root's count for us says it
                        // receives one (else it took our length from our post and fails).
                        if self.copied.is_none() {
                            if !seg.stamped(*root, k) {
                                return None;
                            }
                            let pid = word(*root, 0);
                            let c = match pid {
                                0 => 0,
                                _ => word(*root, 8 * (2 + 2 * me)) as usize,
                            };
                            self.copied = Some(if by_message(c) {
                                Progress::Done
                            } else {
                                self.no_msg |= 1 << *root;
                                Progress::Mismatch
                            });
                        }
                        return self.copied;
                    }
                    if !far(input.len()) {
                        return Some(Progress::Done);
                    }
                    if self.copied.is_none() {
                        if !seg.stamped(*root, k) {
                            return None;
                        }
                        let pid = word(*root, 0) as i32;
                        // No table (pid 0): the root takes no block by CMA.
                        let (at, room) = match pid {
                            0 => (0, 0),
                            _ => (
                                word(*root, 8 * (1 + 2 * me)),
                                word(*root, 8 * (2 + 2 * me)) as usize,
                            ),
                        };
                        self.copied = Some(if at == 0 || input.len() > room {
                            Progress::Mismatch
                        } else {
                            let src = input.as_ptr().cast_mut();
                            // SAFETY: the root's output has room for `room >= input.len()`
                            // bytes at `at` for us alone, unchanged until we stamp (it
                            // waits for that); a write only reads our side.
                            match unsafe { cma_copy(pid, src, at, input.len(), Cma::Write) } {
                                Ok(()) => Progress::Done,
                                Err(_) => Progress::CopyFailed,
                            }
                        });
                    }
                    // Tell the root we wrote (later if our buffer is in use), with our
                    // length: a root that expected a posted block (erroneous) sees it.
                    let n = input.len() as u64;
                    // SAFETY: `b` is our buffer's `CAP` bytes.
                    let post = |b: *mut u8| unsafe { b.cast::<u64>().write_unaligned(n) };
                    return seg.try_post_with(k, post).then_some(self.copied?);
                }
                // Our own block at the first look after our post, while the others write
                // or post theirs (none of them touches it), as a single-copy gather's root
                // does, rather than after the last of them.
                if self.copied.is_none() {
                    let own = input.is_empty()
                        || self.own_elsewhere
                        || (input.len() <= counts[me] && put(out, displs[me], input));
                    self.copied = Some(if own {
                        Progress::Done
                    } else {
                        Progress::Mismatch
                    });
                }
                // Every rank we expect a block from posts its length: with the block (up
                // to `GATHERV_MAX` bytes), once it wrote it (a cross-memory length), or
                // before it sends it by message. The length, not our count, says where
                // the block is: a shorter one arrives, a longer one fails.
                let expected = |r: usize| r != me && counts[r] > 0;
                if !(0..p).filter(|&r| expected(r)).all(|r| seg.stamped(r, k)) {
                    return None;
                }
                ok &= self.copied == Some(Progress::Done);
                for r in (0..p).filter(|&r| expected(r)) {
                    let (n, c, d) = (word(r, 0) as usize, counts[r], displs[r]);
                    if by_message(n) {
                        // It sends iff our count is a message's too.
                        ok &= by_message(c);
                        continue;
                    }
                    if by_message(c) {
                        self.no_msg |= 1 << r;
                    }
                    if n <= GATHERV_MAX {
                        // SAFETY: as in `word` (stamp acquired, `k` open); `8 + n <= CAP`.
                        ok &= n <= c && put(out, d, unsafe { seg.peer_nb(r, k, 8, n) });
                    } else {
                        // It wrote iff our post gave it a place with room for its block.
                        ok &= n <= c && d + c <= out.len();
                    }
                }
            }
            SmKind::Scatterv {
                root,
                counts,
                displs,
                far: far_max,
            } => {
                let smax = scatterv_max(p);
                let by_message = |c: usize| c > smax.max(*far_max);
                if me == *root {
                    // Our own block at the first look after our post, while the others read
                    // theirs (from our input, which we only read too).
                    if self.copied.is_none() {
                        let own = out.is_empty()
                            || self.own_elsewhere
                            || input
                                .get(displs[me]..displs[me] + counts[me])
                                .is_some_and(|b| put(out, 0, b));
                        self.copied = Some(if own {
                            Progress::Done
                        } else {
                            Progress::Mismatch
                        });
                    }
                    // Blocks larger than the segment takes: those that read theirs from our
                    // input (our table says where) have stamped once they no longer do;
                    // those we send by message (our table says so) have posted their
                    // length.
                    if (0..p).any(|r| r != me && counts[r] > smax) {
                        let listed = |r: usize| {
                            let (c, d) = (counts[r], displs[r]);
                            r != me && c > smax && input.get(d..d + c).is_some()
                        };
                        if !(0..p).filter(|&r| listed(r)).all(|r| seg.stamped(r, k)) {
                            if self.share != 0 {
                                // SAFETY: we posted sharing (`self.share`), `k` is open;
                                // the input is readable (caller contract).
                                unsafe {
                                    Self::help_scatterv(
                                        (seg, k),
                                        (self.share_shift, &mut self.share_budget),
                                        input,
                                        (counts, displs),
                                    )
                                };
                            }
                            return None;
                        }
                        // A rank whose length puts its block on the segment (erroneous:
                        // shorter than our count) took none: it expects no message.
                        for r in (0..p).filter(|&r| listed(r) && by_message(counts[r])) {
                            if !by_message(word(r, 0) as usize) {
                                self.no_msg |= 1 << r;
                            }
                        }
                    }
                    ok = self.copied == Some(Progress::Done);
                } else {
                    // Our block is on the segment, read by CMA or sent by message: the
                    // root's entry says which, whatever our length (it differs from the
                    // root's count in an erroneous program).
                    if self.copied.is_none() {
                        if !seg.stamped(*root, k) {
                            return None;
                        }
                        let e = word(*root, 8 * me);
                        let got = if e == NOT_HERE {
                            // (No block: none for an empty buffer.)
                            match out.is_empty() {
                                true => Progress::Done,
                                false => Progress::Mismatch,
                            }
                        } else if e & FAR != 0 {
                            let (at, n) = (
                                ((e >> 32) & 0x7fff_ffff) as usize,
                                (e & 0xffff_ffff) as usize,
                            );
                            if n <= out.len() && at + 16 <= CAP {
                                let (first, addr) = (word(*root, at), word(*root, at + 8));
                                let pid = first as i32;
                                let shared = (first & SHARED_POST != 0)
                                    .then(|| scatterv_share_at(p))
                                    .flatten();
                                let r = if let Some(rec) = shared {
                                    // The root's chunk (6 bits; at least 4 KiB when set).
                                    let shift = ((first >> SHARE_SHIFT_AT) & 63) as u32;
                                    self.share_shift = shift.max(12);
                                    self.share = share_chunks(n, self.share_shift);
                                    // SAFETY: the root stamped `k` (acquired) and `k` is
                                    // open here, its post sharing with our share words at
                                    // `rec + SHARE_WORDS * me` (within `CAP`); `out` has
                                    // room for `n` bytes; the root's block for us is `n`
                                    // bytes at `addr`, unchanged until we post, which we do
                                    // only once every chunk is counted copied.
                                    unsafe {
                                        self.read_shared(
                                            (*root, rec + SHARE_WORDS * me),
                                            (pid, addr),
                                            out.as_mut_ptr(),
                                            n,
                                            true,
                                        )
                                    }
                                } else {
                                    // SAFETY: the root's input holds our `n` bytes at
                                    // `addr`, unchanged until we stamp (it waits for that);
                                    // `out` has room.
                                    unsafe { cma_copy(pid, out.as_mut_ptr(), addr, n, Cma::Read) }
                                };
                                match r {
                                    Ok(()) => Progress::Done,
                                    Err(_) => Progress::CopyFailed,
                                }
                            } else {
                                Progress::Mismatch
                            }
                        } else if e & MSG != 0 {
                            // By message iff our length says so too (the root reads it).
                            match by_message(out.len()) {
                                true => Progress::Done,
                                false => Progress::Mismatch,
                            }
                        } else {
                            let (off, n) = ((e & 0xffff_ffff) as usize, (e >> 32) as usize);
                            if n <= out.len() && off + n <= CAP {
                                // SAFETY: as in `word` (stamp acquired, `k` open);
                                // `off + n <= CAP`.
                                out[..n].copy_from_slice(unsafe { seg.peer_nb(*root, k, off, n) });
                                Progress::Done
                            } else {
                                Progress::Mismatch
                            }
                        };
                        if by_message(out.len()) && e & (FAR | MSG) != MSG {
                            self.no_msg |= 1 << *root;
                        }
                        self.copied = Some(got);
                    }
                    // A shared block: every chunk copied, by us or by the root, before we
                    // post (the root writes into our output until then).
                    if self.share != 0 {
                        let rec = scatterv_share_at(p).unwrap_or(0) + SHARE_WORDS * me;
                        // SAFETY: the root stamped `k` and `k` is open here, its post sharing
                        // (we read its flag): our share words are only accessed atomically;
                        // within `CAP` (`scatterv_share_at`).
                        let copied =
                            unsafe { seg.nb_word(*root, k, rec + 1) }.load(Ordering::Acquire);
                        if copied % SHARE_FAILED < self.share {
                            return None;
                        }
                        if copied >= SHARE_FAILED && self.copied == Some(Progress::Done) {
                            self.copied = Some(Progress::CopyFailed);
                        }
                    }
                    // A root whose entry for us is read by CMA waits until we no longer
                    // read its input, one that sends by message for our length: post it
                    // (later if our buffer is in use).
                    let e = word(*root, 8 * me);
                    let n = out.len() as u64;
                    // SAFETY: `b` is our buffer's `CAP` bytes.
                    let post = |b: *mut u8| unsafe { b.cast::<u64>().write_unaligned(n) };
                    if e != NOT_HERE && e & (FAR | MSG) != 0 && !seg.try_post_with(k, post) {
                        return None;
                    }
                    return self.copied;
                }
            }
            SmKind::Alltoallv { .. } => unreachable!("read by read_alltoallv"),
            _ => unreachable!("read_v reads a gatherv, a scatterv or an alltoallv"),
        }
        Some(if ok {
            Progress::Done
        } else {
            Progress::Mismatch
        })
    }
}

impl SmNb {
    /// The result of a posted alltoallv ([`SmKind::Alltoallv`]) once every block it
    /// receives through the segment or by CMA is in `out` and every rank that copies from
    /// or into our buffers by CMA has marked its post done (`None`: not yet). Our own block
    /// is copied at the first call (it waits for no rank; when ranks yield when idle and
    /// some rank has not posted, we yield our core once before it); a far block is copied
    /// (in place: traded) as soon as its sender's post is there, each once, from rank
    /// `me + 1` on (mod `p`), the blocking form's order (`Seg::read_all`'s documentation
    /// has what reading in rank order cost there).
    ///
    /// # Safety
    /// As [`SmNb::read_v`]; `out` is the output.
    unsafe fn read_alltoallv(&mut self, input: &[u8], out: &mut [u8]) -> Option<Progress> {
        let seg = &*self.seg;
        let (k, me, p) = (self.k, seg.rank(), seg.size());
        let lens = (input.len(), out.len());
        let SmKind::Alltoallv {
            scounts,
            sdispls,
            rcounts,
            rdispls,
            in_place,
            far,
            ..
        } = &self.kind
        else {
            unreachable!("read_alltoallv reads an alltoallv")
        };
        // `SmKind::far_block` with the bound computed once: this runs at every test of a
        // small alltoallv, which has no far block at all.
        let (max, far_max) = (alltoallv_max(p), *far);
        let far = |c: usize| c > max && c <= far_max;
        // Whether some block moves by CMA, ours to read or ours to be read: else no
        // rank copies from our buffers, and there is nothing to mark or to wait for.
        let any_far = (0..p).any(|r| r != me && (far(rcounts[r]) || far(scounts[r])));
        // A word of rank `r`'s posted table (called once its stamp of `k` is acquired).
        let word = |r: usize, off: usize| {
            // SAFETY: rank `r` stamped `k` (acquired) and `k` is open here, so its post is
            // unchanged; the words read (a table entry at `8 * me`, a far block's pid and
            // address at its offset) lie within its `CAP` bytes.
            let w = unsafe { seg.peer_nb(r, k, off, 8) };
            u64::from_ne_bytes(w.try_into().unwrap_or([0xff; 8]))
        };
        if self.copied.is_none() {
            // Our own block first, once (none in place: it stays where it is): work of
            // ours that waits for no rank, done while the others post.
            if self.moved & 1 << me == 0 {
                if any_far && seg.some_yield() && !(0..p).all(|r| seg.stamped(r, k)) {
                    // More ranks than cores: a rank that has not posted yet may share our
                    // core and posts only once we leave it. Yield it once before our
                    // copies, so that its post (which the ranks on the other cores wait
                    // for) does not wait for them.
                    std::thread::yield_now();
                }
                self.moved |= 1 << me;
                let (c, d) = (scounts[me], sdispls[me]);
                let ok = c == rcounts[me]
                    && (c == 0
                        || input.get(d..d + c).is_some_and(|b| {
                            let total = out.len();
                            out.get_mut(rdispls[me]..rdispls[me] + c)
                                .map(|o| copy_own(o, b, total))
                                .is_some()
                        }));
                if !ok && self.fault == Progress::Done {
                    self.fault = Progress::Mismatch;
                }
            }
            let mut bounce = Vec::new();
            // From rank `me + 1`, `me + 2`, ... (mod `p`), as the blocking form reads
            // (`Seg::read_all`): when every post is there, no two ranks read from the
            // same rank at once.
            for r in (1..p).map(|i| (me + i) % p).filter(|_| any_far) {
                if !seg.stamped(r, k) {
                    continue;
                }
                // Rank `r`'s far record for us (valid: a far block of its for us).
                let e = word(r, 8 * me);
                let at = ((e >> 32) & 0x7fff_ffff) as usize;
                let valid = e != NOT_HERE && e & FAR != 0 && at + FAR_RECORD <= CAP;
                if far(scounts[r]) && self.pushed & 1 << r == 0 {
                    self.pushed |= 1 << r;
                    // Rank `r` asks for our block (its record's place and count for it):
                    // written there when we are out of place (our records say so, and it
                    // then does not read it) and the count is our length.
                    let (to, want) = if valid {
                        (word(r, at + 24), word(r, at + 32) & !WRITES)
                    } else {
                        (0, 0)
                    };
                    let (c, d) = (scounts[r], sdispls[r]);
                    if to != 0 && !*in_place && want == c as u64 {
                        if let Some(src) = input.get(d..d + c) {
                            // SAFETY: rank `r` posted `to` as the place of our block in its
                            // output, `c` bytes (its count, checked), written by us alone;
                            // it leaves the collective only once we marked our post done
                            // (it sends us a far block: it waits for that), after this
                            // write. `src` holds `c` bytes, only read (the write copies
                            // from the local side).
                            let w = unsafe {
                                cma_copy(
                                    word(r, at) as i32,
                                    src.as_ptr().cast_mut(),
                                    to,
                                    c,
                                    Cma::Write,
                                )
                            };
                            if w.is_err() {
                                self.fault = Progress::CopyFailed;
                            }
                        }
                    }
                }
                if !far(rcounts[r]) || self.moved & 1 << r != 0 {
                    continue;
                }
                self.moved |= 1 << r;
                let n = if valid { word(r, at + 16) as usize } else { 0 };
                let dst = out.get_mut(rdispls[r]..rdispls[r].saturating_add(n));
                let (true, true, Some(dst)) = (valid, n == rcounts[r], dst) else {
                    self.fault = Progress::Mismatch;
                    continue;
                };
                // We asked for it and `r` writes what is asked: it is written (or was,
                // before `r` marked its post done, which we wait for below).
                if self.kind.asks_push((me, p), r, lens).is_some() && word(r, at + 32) & WRITES != 0
                {
                    continue;
                }
                let (pid, addr) = (word(r, at) as i32, word(r, at + 8));
                let copied = if *in_place {
                    // SAFETY: rank `r` posted its block for us, `n` bytes at `addr`; our
                    // half of it is ours alone (it trades the other half) until we mark
                    // our post done (it waits for that).
                    unsafe { trade(pid, dst, addr, me < r, (&mut bounce, chunk_for(p))) }
                } else {
                    // SAFETY: rank `r`'s input holds our `n` bytes at `addr`, unchanged
                    // until we mark our post done (it waits for that); `dst` has room.
                    unsafe { cma_copy(pid, dst.as_mut_ptr(), addr, n, Cma::Read) }
                };
                if copied.is_err() {
                    self.fault = Progress::CopyFailed;
                }
            }
            let far_left = any_far
                && (0..p).any(|r| {
                    let bit = 1 << r;
                    r != me
                        && ((far(rcounts[r]) && self.moved & bit == 0)
                            || (far(scounts[r]) && self.pushed & bit == 0))
                });
            // Every rank posts its table, so every block's two counts are compared here,
            // empty ones and those that go by message too: an erroneous call fails
            // instead of waiting for a block, or dropping one, that the other end sends
            // elsewhere.
            if far_left || !(0..p).all(|r| r == me || seg.stamped(r, k)) {
                return None;
            }
            let mut ok = true;
            // Whether a sender posted a far block for us: it waits for our mark.
            let mut far_for_us = false;
            let by_message = |c: usize| c > max.max(far_max);
            for r in (0..p).filter(|&r| r != me) {
                let (e, rc) = (word(r, 8 * me), rcounts[r]);
                let sent_far = e != NOT_HERE && e & FAR != 0;
                let sent_msg = e != NOT_HERE && e & (FAR | MSG) == MSG;
                far_for_us |= sent_far;
                if sent_msg {
                    let n = (e & !MSG) as usize;
                    if !by_message(rc) {
                        // Its message comes although we expect none (or the block
                        // elsewhere): taken into scratch.
                        self.sinks.push((r, n));
                        ok = false;
                    } else if n != rc {
                        // Longer: the receive reports the truncation too.
                        ok = false;
                    }
                    continue;
                }
                if by_message(rc) {
                    // Our receive waits for a message that does not come.
                    self.no_recv |= 1 << r;
                    ok = false;
                    continue;
                }
                if far(rc) {
                    // Read above (or found wrong there).
                    continue;
                }
                if rc == 0 {
                    ok &= e == NOT_HERE;
                    continue;
                }
                let (off, n) = ((e & 0xffff_ffff) as usize, (e >> 32) as usize);
                if e == NOT_HERE || sent_far || n != rc || off + n > CAP {
                    ok = false;
                    continue;
                }
                // SAFETY: as in `word` (stamp acquired, `k` open); `off + n <= CAP`.
                ok &= put(out, rdispls[r], unsafe { seg.peer_nb(r, k, off, n) });
            }
            self.copied = Some(match (self.fault, ok) {
                (Progress::Done, false) => Progress::Mismatch,
                (f, _) => f,
            });
            if any_far || far_for_us {
                // SAFETY: our post of `k` (every rank posts its table) has our own table
                // entry, unused by the others' reads, at `8 * me < CAP`.
                unsafe { seg.nb_word(me, k, me) }.store(k, Ordering::Release);
            }
        }
        // The ranks that copy from (in place: trade with) our buffers are done with them.
        let done = |r: usize| {
            // SAFETY: rank `r` has a far block for or from us, so it posted `k`; its own
            // table entry is its mark, accessed atomically.
            seg.stamped(r, k) && unsafe { seg.nb_word(r, k, r) }.load(Ordering::Acquire) == k
        };
        if any_far && !(0..p).filter(|&r| r != me && far(scounts[r])).all(done) {
            return None;
        }
        self.copied
    }
}

/// `out[at..at + n] = src` if it fits, else false.
fn put(out: &mut [u8], at: usize, src: &[u8]) -> bool {
    match out.get_mut(at..at + src.len()) {
        Some(o) => {
            o.copy_from_slice(src);
            true
        }
        None => false,
    }
}

/// Write a rank's table and blocks at `b` (its buffer's [`CAP`] bytes) for a scatterv (the
/// root) or an alltoallv: entry `r` (a word at `8 r`) is `offset | length << 32` of rank
/// `r`'s block, copied after the table, when the block goes through the segment (`1..=max`
/// bytes, [`SmKind::each_message`]; never our own), `FAR | at << 32 | length` (its low 32
/// bits) when it moves from `input` by cross-memory copies (`max < length <= far`; its
/// [`FAR_RECORD`] at `at`, among the blocks: our pid, the block's address, its whole
/// length, then the two words `back(r)`), `MSG | length` when it goes by message
/// (`length > max.max(far)`), else [`NOT_HERE`].
///
/// # Safety
/// `b` is valid for `CAP` bytes of writes, `8 p + (p - 1) max <=` [`CAP`], and `max >=`
/// [`FAR_RECORD`] when `far > max` (a far block's record takes no more room than a posted
/// block).
unsafe fn put_blocks(
    b: *mut u8,
    (me, p, max, far): (usize, usize, usize, usize),
    input: &[u8],
    (counts, displs): (&[usize], &[usize]),
    back: &dyn Fn(usize) -> (u64, u64),
) {
    let mut off = 8 * p;
    for r in 0..p {
        let (c, d) = (counts[r], displs[r]);
        let mut entry = NOT_HERE;
        if r != me && (1..=max).contains(&c) {
            if let Some(src) = input.get(d..d + c) {
                // SAFETY: `off + c <= 8 p + (p - 1) max <= CAP` (at most `p - 1` blocks of
                // at most `max` bytes after the table).
                unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), b.add(off), c) };
                entry = off as u64 | (c as u64) << 32;
                off += c;
            }
        } else if r != me && c > max && c <= far {
            if let Some(src) = input.get(d..d + c) {
                let (to, count) = back(r);
                // SAFETY: as above, `FAR_RECORD <= max` bytes (caller contract).
                unsafe {
                    let w = b.add(off).cast::<u64>();
                    w.write_unaligned(own_pid());
                    w.add(1).write_unaligned(src.as_ptr() as u64);
                    w.add(2).write_unaligned(c as u64);
                    w.add(3).write_unaligned(to);
                    w.add(4).write_unaligned(count);
                }
                entry = FAR | (off as u64) << 32 | (c & 0xffff_ffff) as u64;
                off += FAR_RECORD;
            }
        } else if r != me && c > max.max(far) && input.get(d..d + c).is_some() {
            entry = MSG | (c as u64 & (MSG - 1));
        }
        // SAFETY: the table's `8 p <= CAP` bytes lead the buffer.
        unsafe { b.add(8 * r).cast::<u64>().write_unaligned(entry) };
    }
}

impl Drop for SmNb {
    fn drop(&mut self) {
        // A collective dropped before its end (its schedule failed or was abandoned):
        // never keep the others from reusing buffers.
        if !self.done {
            self.seg.close_nb(self.k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shared block's claims ([`claim`]): the reader alone takes halves of what is left
    /// (16 chunks in 5 copies), the root alone one chunk at a time from the back, and any
    /// interleaving of the two, also from threads racing on one word, claims every chunk
    /// exactly once.
    #[test]
    fn shared_block_claims_take_every_chunk_once() {
        use std::sync::atomic::AtomicU64;
        let w = AtomicU64::new(0);
        let alone: Vec<_> = std::iter::from_fn(|| claim(&w, 16, true)).collect();
        assert_eq!(alone, [0..8, 8..12, 12..14, 14..15, 15..16]);
        let w = AtomicU64::new(0);
        let back: Vec<_> = std::iter::from_fn(|| claim(&w, 3, false)).collect();
        assert_eq!(back, [2..3, 1..2, 0..1]);
        for n in [1, 2, 5, 16, 17] {
            for pattern in 0..64u32 {
                let w = AtomicU64::new(0);
                let mut seen = vec![0; n as usize];
                let mut i = 0;
                while let Some(c) = claim(&w, n, pattern >> (i % 6) & 1 == 1) {
                    c.for_each(|c| seen[c as usize] += 1);
                    i += 1;
                }
                assert!(
                    seen.iter().all(|&s| s == 1),
                    "n {n}, pattern {pattern}: {seen:?}"
                );
            }
        }
        let w = AtomicU64::new(0);
        let n = 4000;
        let seen: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
        std::thread::scope(|s| {
            for front in [true, false, false] {
                let (w, seen) = (&w, &seen);
                s.spawn(move || {
                    while let Some(c) = claim(w, n, front) {
                        c.for_each(|c| {
                            seen[c as usize].fetch_add(1, Ordering::Relaxed);
                        });
                    }
                });
            }
        });
        assert!(seen.iter().all(|s| s.load(Ordering::Relaxed) == 1));
    }

    /// A scatterv's and an alltoallv's far blocks ([`FAR_RECORD`] bytes each in the
    /// poster's buffer) take no more room than posted ones on every communicator size
    /// ([`put_blocks`]' contract).
    #[test]
    fn far_entries_fit_where_blocks_would() {
        for p in 2..=64 {
            assert!(scatterv_max(p) >= FAR_RECORD, "p = {p}");
            assert!(alltoallv_max(p) >= FAR_RECORD, "p = {p}");
            assert!(8 * p + (p - 1) * scatterv_max(p) <= CAP, "p = {p}");
        }
    }

    /// The alltoallv rule: both ends of every block agree on its path from their own
    /// counts alone, and a rank's blocks through the segment always fit its buffer.
    #[test]
    fn alltoallv_blocks_take_one_path_at_both_ends_and_fit() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |m: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % m as u64) as usize
        };
        for p in [2, 3, 4, 5, 8, 17, 64] {
            let max = alltoallv_max(p);
            assert!(8 * p + (p - 1) * max <= CAP, "p = {p}");
            for i in 0..30 {
                // Larger blocks by message, by CMA up to twice the bound, or all by CMA.
                let far = [0, 2 * max, usize::MAX][i % 3];
                // n[i][j]: bytes from rank i to rank j, around the bound.
                let n: Vec<Vec<usize>> = (0..p)
                    .map(|_| {
                        (0..p)
                            .map(|_| [0, 1, max, max + 1, next(3 * max)][next(5)])
                            .collect()
                    })
                    .collect();
                let kind = |me: usize| SmKind::Alltoallv {
                    scounts: n[me].clone(),
                    sdispls: (0..p).map(|j| 1000 * j).collect(),
                    rcounts: (0..p).map(|i| n[i][me]).collect(),
                    rdispls: (0..p).map(|i| 2000 * i).collect(),
                    in_place: false,
                    far,
                    push: 0,
                };
                let mut sent = vec![vec![false; p]; p];
                let mut got = vec![vec![false; p]; p];
                for me in 0..p {
                    kind(me).each_message((me, p), (0, 0), |m| {
                        assert_ne!(m.peer, me);
                        if m.send {
                            assert_eq!((m.at, m.len), ((0, 1000 * m.peer), n[me][m.peer]));
                            sent[me][m.peer] = true;
                        } else {
                            assert_eq!((m.at, m.len), ((1, 2000 * m.peer), n[m.peer][me]));
                            got[m.peer][me] = true;
                        }
                    });
                    // A far block takes its record in the post.
                    let posted: usize = (0..p)
                        .filter(|&j| j != me && !sent[me][j])
                        .map(|j| if n[me][j] > max { FAR_RECORD } else { n[me][j] })
                        .sum();
                    assert!(8 * p + posted <= CAP, "p = {p}: rank {me} posts {posted}");
                }
                for i in 0..p {
                    for j in (0..p).filter(|&j| j != i) {
                        assert_eq!(sent[i][j], got[i][j], "p = {p}: block {i} -> {j}");
                        let message = n[i][j] > max.max(far);
                        assert_eq!(sent[i][j], message, "p = {p}: block {i} -> {j}");
                        let cma = kind(i).far_block(p, n[i][j]);
                        assert_eq!(cma, n[i][j] > max && !message, "p = {p}: {i} -> {j}");
                    }
                }
            }
        }
    }
}
