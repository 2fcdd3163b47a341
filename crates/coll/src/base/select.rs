//! Component selection per call: the `sm` component where it applies (every rank of an
//! intracommunicator on this node, data within its limits, `coll_sm_enable` on, no
//! algorithm forced), the `tuned` point-to-point algorithms otherwise.
//!
//! Every rank takes the same decision at every collective: it depends only on the
//! communicator and on arguments MPI requires to match. Data is bytes; the caller packs
//! non-contiguous datatypes first.

use crate::base::helpers::{bcast_differs, check_own, place_own};
use crate::base::stats::{count, Alg};
use crate::sm::{self, SmKind, VBlock};
use crate::tune::Coll;
use crate::tuned::TAG_GATHER;
use crate::{CollComm, Op, Result};

/// Barrier. On the segment, a barrier right after a barrier on this communicator (no
/// collective of any kind called between them, [`crate::base::stats::last_was`]) meets
/// instead of letting rank 0 out first ([`sm::Seg::barrier`]); so does one right after a
/// blocking allreduce or reduce-scatter on two ranks that do not yield when idle
/// ([`MEET_AFTER_PAIR`]).
#[inline]
pub fn barrier(a: &CollComm) -> Result<()> {
    if let Some(seg) = sm::get(a, Coll::Barrier)? {
        let again = seg.barrier_releases()
            && (crate::base::stats::last_was(a.shadow, &[Alg::SmBarrier, Alg::SmBarrierMeet])
                || (seg.size() == 2
                    && !seg.some_yield()
                    && crate::base::stats::last_was(a.shadow, MEET_AFTER_PAIR)));
        count(
            a.shadow,
            if again {
                Alg::SmBarrierMeet
            } else {
                Alg::SmBarrier
            },
        );
        seg.barrier(again);
        return Ok(());
    }
    a.barrier()
}

/// The collectives after which a barrier of two ranks that do not yield when idle meets
/// instead of letting rank 0 out first: the blocking allreduce and reduce-scatter on the
/// segment (every size). A loop of such a collective and a barrier (the standard suites'
/// timing) then starts each collective with both ranks leaving the barrier together: with
/// rank 0 out first it waited one handoff in the collective for rank 1 (np=2, `ab.sh`,
/// every barrier meeting: far allreduce 64 B 0.584 to 0.511 us, reduce_scatter_block 1 KiB
/// 0.661 to 0.576; session 53, s53-smallar, in `spot-checks-wave2.md`). A collective rooted
/// at rank 0 after it loses that head start; after a rooted one the barrier still releases.
const MEET_AFTER_PAIR: &[Alg] = &[Alg::SmAllreduce, Alg::SmReduceScatter];

/// Broadcast of `buf` from `root` (every rank passes the same length). On the segment:
/// up to [`sm::DATA`] bytes through its buffers ([`sm::Seg::bcast`]), larger ones up to
/// [`sm::Seg::single_copy_max`] by one cross-memory read per rank ([`sm::Seg::bcast_cma`]);
/// the rest, and empty ones, behind a head that carries the root's length
/// ([`sm::Seg::bcast_head`]): through the large region when oversubscribed
/// ([`sm::Seg::bcast_big`]) or point to point. Every post of the root carries its length,
/// and every other rank waits for whichever post comes, so that a rank whose length
/// differs from the root's (erroneous; MPI requires the same amount of data everywhere)
/// fails instead of waiting on another path or returning without the data: it gets
/// `MPI_ERR_TRUNCATE` when the root's data is longer than its buffer, `MPI_ERR_COUNT`
/// when it is shorter, its buffer untouched, after taking part in whatever the root still
/// does (so that nobody waits for it); the root does not wait for the others' verdicts
/// and returns success. Without a segment, point to point ([`CollComm::bcast`]), where
/// each rank learns the root's length from its first message and fails alike.
#[inline]
pub fn bcast(a: &CollComm, buf: &mut [u8], root: i32) -> Result<()> {
    let n = buf.len();
    if n > 0 && n <= sm::DATA {
        if let Some(seg) = sm::get(a, Coll::Bcast)? {
            count(a.shadow, Alg::SmBcast);
            return match seg.bcast(buf, root as usize) {
                sm::Bcast::Done => Ok(()),
                b => bcast_done(a, &seg, b, n, root),
            };
        }
    }
    if (0..a.size).contains(&root) {
        if let Some(seg) = sm::get(a, Coll::Bcast)? {
            if !bcast_big_size(a, n) && bcast_cma_size(&seg, n) {
                count(a.shadow, Alg::SmBcast);
                let b = seg.bcast_cma(buf, root as usize);
                return bcast_done(a, &seg, b, n, root);
            }
            let b = seg.bcast_head(n, root as usize);
            if !matches!(b, sm::Bcast::Done) {
                return bcast_done(a, &seg, b, n, root);
            }
            return bcast_rest(a, &seg, buf, root);
        }
    }
    a.bcast(buf, root)
}

/// Whether a broadcast of `n` bytes may go through the large region ([`sm::Seg::bcast_big`]).
fn bcast_big_size(a: &CollComm, n: usize) -> bool {
    a.size > 2 && (sm::BCAST_BIG_MIN..=sm::REDUCE_BIG_MAX).contains(&n)
}

/// Whether a broadcast of `n` bytes, more than a buffer, moves by one cross-memory read
/// per rank on `seg` ([`sm::Seg::bcast_cma`]).
fn bcast_cma_size(seg: &sm::Seg, n: usize) -> bool {
    n > 0 && n <= seg.single_copy_max()
}

/// A broadcast after its head ([`sm::Seg::bcast_head`]): oversubscribed, larger ones through
/// the large region (the root waits for none of its readers, [`sm::Seg::bcast_big`]); when
/// that declines, by cross-memory reads as far as they go; else point to point.
fn bcast_rest(a: &CollComm, seg: &sm::Seg, buf: &mut [u8], root: i32) -> Result<()> {
    let n = buf.len();
    if bcast_big_size(a, n) && seg.bcast_big(a, buf, root as usize)? {
        count(a.shadow, Alg::SmBcast);
        return Ok(());
    }
    if bcast_cma_size(seg, n) {
        count(a.shadow, Alg::SmBcast);
        let b = seg.bcast_cma(buf, root as usize);
        return bcast_done(a, seg, b, n, root);
    }
    a.bcast_agreed(buf, root)
}

/// The outcome `b` of a broadcast of `n` bytes on the segment as the collective's: a rank
/// whose length differs from the root's fails (see [`bcast`]), after taking part in the
/// rest of the root's broadcast with a buffer of the root's length when the root's head
/// says that some of it is still to come.
#[cold]
fn bcast_done(a: &CollComm, seg: &sm::Seg, b: sm::Bcast, n: usize, root: i32) -> Result<()> {
    let theirs = match b {
        sm::Bcast::Done => return Ok(()),
        sm::Bcast::Failed(e) => return single_copy_done(Err(e), "bcast"),
        sm::Bcast::Differs(m) => m,
        sm::Bcast::Join(m) => {
            let mut sink = vec![0u8; m];
            // The root's own error, if any, is the root's; ours is the mismatch.
            let _ = bcast_rest(a, seg, &mut sink, root);
            m
        }
    };
    Err(bcast_differs(theirs, n))
}

/// The outcome of a cross-memory copy ([`sm::Seg::gather_pair`]) as the collective's.
fn single_copy_done(r: std::io::Result<Option<usize>>, what: &str) -> Result<()> {
    match r {
        Ok(None) => Ok(()),
        Ok(Some(n)) => Err(crate::arg_err(
            oxmpi_engine::ErrorClass::Truncate,
            format!("{what}: a block of {n} bytes does not fit the buffer for it"),
        )),
        Err(e) => Err(crate::arg_err(
            oxmpi_engine::ErrorClass::Other,
            format!("{what}: a cross-memory copy between ranks failed: {e}"),
        )),
    }
}

/// Allreduce into `dst`: our contribution is `src` (`None`: it is in `dst`; otherwise as
/// long as `dst`). `f` computes `inout = in ∘ inout` on whole elements of `elem_size`
/// bytes; every component combines in rank order, so `∘` need only be associative
/// (`commutative` lets the tuned component pick algorithms that reorder).
///
/// On two ranks that reach each other by CMA, [`sm::ALLREDUCE_PAIR`] bytes go by
/// cross-memory copies ([`sm::Seg::allreduce_pull`]). At most [`sm::DATA`] bytes go
/// through the `sm` segment. When ranks share cores (some yields when idle), more up to
/// `coll_sm_nonblocking_large_max` bytes on more than 2 ranks through its nonblocking
/// large region ([`sm::Seg::allreduce_large`]; the nonblocking allreduce, which takes it,
/// ran 1.7-2.8x faster than these point-to-point algorithms at np 8 on 2 cores, 64 KiB and
/// 1 MiB). Otherwise from
/// `coll_sm_allreduce_large_min` up to [`sm::BIG_MAX`] bytes through its large region;
/// everything else through the tuned algorithms (measured faster in between on a loaded
/// 2-core machine: the large region's three synchronisations cost more than they save).
pub fn allreduce<F: Fn(&[u8], &mut [u8])>(
    a: &CollComm,
    src: Option<&[u8]>,
    dst: &mut [u8],
    f: &F,
    elem_size: usize,
    commutative: bool,
) -> Result<()> {
    let bytes = dst.len();
    if let Some(seg) = pair(a, Coll::Allreduce, bytes, sm::ALLREDUCE_PAIR)? {
        count(a.shadow, Alg::SmAllreduce);
        return seg.allreduce_pull(src, dst, (elem_size, commutative), f);
    }
    let small = bytes <= sm::DATA;
    let large =
        (sm::params::allreduce_large_min().max(sm::DATA + 1)..=sm::BIG_MAX).contains(&bytes);
    // Ranks that share cores (they yield when idle): the nonblocking large region, one
    // handoff each way ([`sm::Seg::allreduce_large`]).
    let nb_large = !small && sm::large_fits(a, bytes);
    // Every length takes the segment when there is one (empty vectors too): each of its
    // paths posts our length at the same sequence number first, so that ranks whose
    // lengths differ (erroneous) fail alike instead of waiting on different paths.
    let seg = sm::get(a, Coll::Allreduce)?;
    if let (Some(seg), true) = (&seg, small) {
        if let Some(s) = src {
            dst.copy_from_slice(s);
        }
        count(a.shadow, Alg::SmAllreduce);
        return seg.allreduce(dst, f);
    }
    if let Some(seg) = &seg {
        seg.reduction_gate(bytes, "allreduce")?;
        if nb_large && seg.some_yield() {
            if !seg.allreduce_large(src, dst, (f, elem_size), &progress_nb) {
                return Err(crate::arg_err(
                    oxmpi_engine::ErrorClass::Count,
                    "allreduce: buffers differ in size or split an item",
                ));
            }
            count(a.shadow, Alg::SmAllreduce);
            return Ok(());
        }
        if large && seg.allreduce_big(a, src, dst, elem_size, f)? {
            count(a.shadow, Alg::SmAllreduce);
            return Ok(());
        }
    }
    let op = Op {
        f,
        elem_size,
        commutative,
    };
    if seg.is_some() {
        // The gate above checked the lengths.
        return a.allreduce_agreed(src, dst, &op);
    }
    a.allreduce_from(src, dst, &op)
}

/// The segment, when an allreduce or reduce-scatter of `bytes` (the whole vector, the same
/// on every rank) goes by cross-memory copies between two ranks ([`sm::Seg::allreduce_pull`],
/// [`sm::Seg::reduce_scatter_pull`]): two ranks that reach each other by CMA, `bytes` in
/// `range` ([`sm::ALLREDUCE_PAIR`], [`sm::REDUCE_SCATTER_PAIR`]).
fn pair(
    a: &CollComm,
    coll: Coll,
    bytes: usize,
    range: std::ops::RangeInclusive<usize>,
) -> Result<Option<std::sync::Arc<sm::Seg>>> {
    if a.size != 2 || !range.contains(&bytes) {
        return Ok(None);
    }
    Ok(sm::get(a, coll)?.filter(|seg| seg.cma_known()))
}

/// An alltoall of `block`-byte blocks on `seg`, the segment of `a` (`size * block` at most
/// [`sm::DATA`] bytes, as [`alltoall`] checks), counted as [`alltoall`] counts it (so that a
/// barrier after it knows a collective came between, [`crate::base::stats::last_was`]): the
/// C ABI's paths on the user's buffers. `send` `None`: in place, `recv` holds the blocks to
/// send ([`sm::Seg::alltoall_in_place`]).
#[inline]
pub fn alltoall_on(
    a: &CollComm,
    seg: &sm::Seg,
    send: Option<&[u8]>,
    recv: &mut [u8],
    block: usize,
) {
    count(a.shadow, Alg::SmAlltoall);
    match send {
        Some(s) => seg.alltoall(s, recv, block),
        None => seg.alltoall_in_place(recv, block),
    }
}

/// Alltoall: block `j` (`block` bytes) of `send` goes to rank `j`, block `j` of `recv`
/// comes from rank `j`. Through the segment's buffers when every block fits one; larger
/// blocks as an alltoallv on the segment ([`sm::Seg::alltoallv`]: through the table when
/// the blocks for the other ranks fit a buffer with it, else by cross-memory copies); point
/// to point when the segment declines (no CMA).
#[inline]
pub fn alltoall(a: &CollComm, send: &[u8], recv: &mut [u8], block: usize) -> Result<()> {
    let n = a.size as usize;
    if n > 1 && block > 0 && n * block <= sm::DATA {
        if let Some(seg) = sm::get(a, Coll::Alltoall)? {
            count(a.shadow, Alg::SmAlltoall);
            seg.alltoall(send, recv, block);
            return Ok(());
        }
    }
    let whole = send.len() == n * block && recv.len() == n * block;
    if n > 1 && block > 0 && whole {
        if let Some(seg) = sm::get(a, Coll::Alltoall)? {
            let (counts, displs) = (vec![block; n], regular_displs(n, block));
            let r = seg.alltoallv((send, &counts, &displs), (recv, &counts, &displs))?;
            if let Some(r) = seg_alltoallv_done(a, r) {
                return r;
            }
        }
    }
    a.alltoall(send, recv, block)
}

/// Displacements of `n` blocks of `block` bytes back to back.
fn regular_displs(n: usize, block: usize) -> Vec<usize> {
    (0..n).map(|j| j * block).collect()
}

/// The segment, when an allgather(v) whose blocks do not all fit a segment buffer (the
/// largest `block` bytes) moves them by cross-memory copies ([`sm::Seg::allgatherv_cma`]):
/// on more than 2 ranks, when CMA reaches every rank and single copies are on
/// ([`sm::Seg::single_copy_max`]); on 2 ranks, blocks of [`sm::ALLGATHER_PAIR`] when CMA
/// reaches the peer and may write into it ([`sm::Seg::push_known`]). The same on every rank.
fn allgather_cma(a: &CollComm, block: usize) -> Result<Option<std::sync::Arc<sm::Seg>>> {
    if a.size == 2 {
        // Each rank writes its block into the other's buffer: only where writes are allowed.
        let seg = pair(a, Coll::Allgather, block, sm::ALLGATHER_PAIR)?;
        return Ok(seg.filter(|seg| seg.push_known()));
    }
    if a.size < 2 {
        return Ok(None);
    }
    Ok(sm::get(a, Coll::Allgather)?.filter(|seg| seg.single_copy_max() > 0))
}

/// Reduce to `root`: our contribution is `send` (`None` at the root in place: it is in
/// `recv`); at the root, `recv` receives the result (other ranks pass `None`). `f` as
/// for [`allreduce`]. At most [`sm::DATA`] bytes go through the `sm` segment (every rank
/// folded in rank order at the root), up to [`sm::REDUCE_BIG_MAX`] through its large
/// region when it can be used ([`sm::Seg::reduce_big`]), the rest through the tuned
/// binomial tree ([`CollComm::reduce_into`]), without copying the input.
pub fn reduce<F: Fn(&[u8], &mut [u8])>(
    a: &CollComm,
    send: Option<&[u8]>,
    mut recv: Option<&mut [u8]>,
    root: i32,
    f: &F,
    elem_size: usize,
    commutative: bool,
) -> Result<()> {
    let bytes = send.map_or_else(|| recv.as_deref().map_or(0, <[u8]>::len), <[u8]>::len);
    let sm_ok = a.rank != root || recv.as_ref().is_some_and(|r| r.len() == bytes);
    // Every length takes the segment when there is one (empty vectors too): each of its
    // paths posts our length at the same sequence number first (the small one with its
    // data, the two-rank cross-memory one in its post, the others at the gate), so that
    // ranks whose lengths differ (erroneous) fail at the root instead of waiting on
    // different paths.
    let seg = if sm_ok && (0..a.size).contains(&root) {
        sm::get(a, Coll::Reduce)?
    } else {
        None
    };
    if let Some(seg) = &seg {
        if bytes <= sm::DATA {
            count(a.shadow, Alg::SmReduce);
            return seg.reduce(send, recv, root as usize, (f, commutative));
        }
        let big = (sm::DATA + 1..=sm::REDUCE_BIG_MAX).contains(&bytes);
        if big && seg.size() == 2 && seg.cma_known() && bytes <= sm::PULL_MAX {
            count(a.shadow, Alg::SmReduce);
            let ec = (elem_size, commutative);
            return seg.reduce_pull(send, recv, root as usize, bytes, ec, f);
        }
        seg.reduction_gate(bytes, "reduce")?;
        let (to, root) = (recv.as_deref_mut(), root as usize);
        if big && seg.reduce_big(a, send, to, root, bytes, (elem_size, commutative), f)? {
            count(a.shadow, Alg::SmReduce);
            return Ok(());
        }
    }
    let op = Op {
        f,
        elem_size,
        commutative,
    };
    a.reduce_into(send, recv, root, &op)
}

/// Inclusive scan (`exclusive`: exclusive scan, rank 0's `recv` left untouched) of our
/// contribution `send` (`None`: it is in `recv`, in place) into `recv`. `f` as for
/// [`allreduce`]. At most [`sm::DATA`] bytes go through the `sm` segment (each rank folds
/// the contributions up to its own in rank order), up to [`sm::REDUCE_BIG_MAX`] through its
/// large region when it can be used ([`sm::Seg::scan_big`]; an inclusive scan of two ranks
/// that reach each other by CMA, up to [`sm::PULL_MAX`], as a reduce to rank 1 by
/// cross-memory copies, [`sm::Seg::reduce_pull`], both ranks folding), the rest through
/// recursive doubling ([`CollComm::scan_into`]).
#[allow(clippy::too_many_arguments)]
pub fn scan<F: Fn(&[u8], &mut [u8])>(
    a: &CollComm,
    send: Option<&[u8]>,
    recv: &mut [u8],
    exclusive: bool,
    f: &F,
    elem_size: usize,
    commutative: bool,
) -> Result<()> {
    let n = recv.len();
    // Every length takes the segment when there is one (empty vectors too), as for
    // [`reduce`]: its paths post our length at the same sequence number first.
    let seg = if send.is_none_or(|s| s.len() == n) {
        sm::get(a, Coll::Scan)?
    } else {
        None
    };
    if let Some(seg) = &seg {
        if n <= sm::DATA {
            count(a.shadow, Alg::SmScan);
            return seg.scan(send, recv, exclusive, f);
        }
        let big = (sm::DATA + 1..=sm::REDUCE_BIG_MAX).contains(&n);
        if big && !exclusive && seg.size() == 2 && seg.cma_known() && n <= sm::PULL_MAX {
            // Two ranks: rank 1's result is the reduce of both vectors to it, rank 0's
            // its own vector.
            count(a.shadow, Alg::SmScan);
            let ec = (elem_size, commutative);
            if a.rank == 1 {
                return seg.reduce_pull(send, Some(recv), 1, n, ec, f);
            }
            seg.reduce_pull(Some(send.unwrap_or(&*recv)), None, 1, n, ec, f)?;
            if let Some(s) = send {
                recv.copy_from_slice(s);
            }
            return Ok(());
        }
        seg.reduction_gate(n, if exclusive { "exscan" } else { "scan" })?;
        if big && seg.scan_big(a, send, recv, (exclusive, elem_size), f)? {
            count(a.shadow, Alg::SmScan);
            return Ok(());
        }
    }
    let op = Op {
        f,
        elem_size,
        commutative,
    };
    if seg.is_some() {
        // The gate checked the lengths.
        return a.scan_into_agreed(send, recv, exclusive, &op);
    }
    a.scan_into(send, recv, exclusive, &op)
}

/// Reduce of the packed `buf` (our contribution) to `root`, where `buf` gets the result:
/// [`reduce`] on one buffer.
pub fn reduce_packed(a: &CollComm, buf: &mut [u8], root: i32, op: &Op) -> Result<()> {
    if a.rank == root {
        reduce(
            a,
            None,
            Some(buf),
            root,
            &op.f,
            op.elem_size,
            op.commutative,
        )
    } else {
        reduce(
            a,
            Some(buf),
            None,
            root,
            &op.f,
            op.elem_size,
            op.commutative,
        )
    }
}

/// Inclusive scan of the packed `buf` (our contribution, replaced by the result).
pub fn scan_packed(a: &CollComm, buf: &mut [u8], op: &Op) -> Result<()> {
    scan(a, None, buf, false, &op.f, op.elem_size, op.commutative)
}

/// Exclusive scan of `send` into `recv` (untouched on rank 0).
pub fn exscan(a: &CollComm, send: &[u8], recv: &mut [u8], op: &Op) -> Result<()> {
    let n = send.len().min(recv.len());
    scan(
        a,
        Some(&send[..n]),
        &mut recv[..n],
        true,
        &op.f,
        op.elem_size,
        op.commutative,
    )
}

/// Gather of blocks of `block` bytes in rank order into `recv` at `root`: our block is
/// `send` (`None`: in place at the root, our block is already in `recv`). On the segment
/// every other rank follows the root's post ([`sm::Seg::gather_leaf`]: it posts its block
/// when that has at most [`sm::V_MAX`] bytes, else waits for where to write it or whether
/// to send it), so that a root and a rank whose block lengths disagree (erroneous) fail
/// instead of waiting for each other on different paths. The root takes blocks of at most
/// [`sm::DATA`] bytes from their posts ([`sm::Seg::gather_root`]), larger ones as a
/// gatherv's ([`seg_gatherv_root`]: on 2 ranks [`sm::GATHER_PAIR`] by
/// [`sm::Seg::gather_pair`], else one cross-memory copy per rank up to
/// [`sm::Seg::single_copy_max`], the rest point to point). Without the segment point to
/// point.
pub fn gather(
    a: &CollComm,
    send: Option<&[u8]>,
    recv: &mut [u8],
    block: usize,
    root: i32,
) -> Result<()> {
    let p = a.size as usize;
    if (0..a.size).contains(&root) {
        if let Some(seg) = sm::get(a, Coll::Gather)? {
            count(a.shadow, Alg::SmGather);
            if a.rank != root {
                let g = seg.gather_leaf(root as usize, send.unwrap_or_default());
                return given_done(a, g, send, root, "gather");
            }
            if (1..=sm::DATA).contains(&block) && recv.len() >= p * block {
                let own = send.map(|s| &s[..block.min(s.len())]);
                if !seg.gather_root(own, &mut recv[..p * block], block) {
                    return Err(crate::arg_err(
                        oxmpi_engine::ErrorClass::Truncate,
                        "gather: a rank's block is longer than the root's count",
                    ));
                }
                return Ok(());
            }
            let (counts, displs) = (vec![block; p], regular_displs(p, block));
            let send = send.map(|s| &s[..block.min(s.len())]);
            return seg_gatherv_root(a, &seg, send, recv, (&counts, &displs), "gather");
        }
    }
    a.gather_from(send, recv, block, root)
}

/// The outcome of a non-root rank's gather(v) block on the segment
/// ([`sm::Seg::gather_leaf`]) as the collective's: a block the root takes point to point
/// is sent from here (`send`, to `root`).
fn given_done(
    a: &CollComm,
    g: sm::Given,
    send: Option<&[u8]>,
    root: i32,
    what: &str,
) -> Result<()> {
    match g {
        sm::Given::Done => Ok(()),
        sm::Given::Send => a.send(send.unwrap_or_default(), root, TAG_GATHER),
        sm::Given::Truncated(n) => Err(crate::arg_err(
            oxmpi_engine::ErrorClass::Truncate,
            format!("{what}: a block of {n} bytes is longer than the root's count for it"),
        )),
        sm::Given::Failed(e) => single_copy_done(Err(e), what),
    }
}

/// The two blocks of a 2-rank gather(v) root's receive buffer: the other rank's (`n`
/// bytes at `theirs`) and its own (`own..`, to the end of `recv` past `theirs`, or up to
/// `theirs`); the caller checked that they lie in `recv` and do not overlap.
fn pair_blocks(recv: &mut [u8], theirs: usize, own: usize, n: usize) -> (&mut [u8], &mut [u8]) {
    if theirs < own {
        let (lo, hi) = recv.split_at_mut(own);
        (&mut lo[theirs..theirs + n], hi)
    } else {
        let (lo, hi) = recv.split_at_mut(theirs);
        (&mut hi[..n], &mut lo[own..])
    }
}

/// Scatter of the root's `send` (blocks of `block` bytes in rank order): ours lands in
/// `recv` (`None`: in place at the root, nothing to copy). On the segment when the blocks
/// other than the root's fit one buffer ([`sm::Seg::scatter`]: through the root's lane when
/// they fit one lane line, else its ring cell); else as a scatterv on the segment (the blocks
/// that fit a buffer after the scatterv table posted there, larger ones read by one
/// cross-memory copy up to [`sm::Seg::single_copy_max`], the rest point to point; the
/// root's own is never posted), whose other ranks follow whichever post the root made
/// ([`sm::Seg::scatter_leaf`]), so that ranks whose block lengths disagree with the root's
/// (erroneous) take the root's block or fail instead of waiting on another path. Without
/// the segment point to point.
pub fn scatter(
    a: &CollComm,
    send: &[u8],
    recv: Option<&mut [u8]>,
    block: usize,
    root: i32,
) -> Result<()> {
    let p = a.size as usize;
    if (0..a.size).contains(&root) {
        if let Some(seg) = sm::get(a, Coll::Scatter)? {
            count(a.shadow, Alg::SmScatter);
            let mut recv = recv;
            if block > 0 && (p - 1) * block <= sm::DATA {
                let got = seg.scatter(send, recv.as_deref_mut(), block, root as usize);
                if matches!(got, VBlock::Here(_)) {
                    return Ok(());
                }
                return vblock_done(a, got, recv.unwrap_or_default(), root, "scatter");
            }
            if seg.scatter_p2p(block) {
                return if a.rank == root {
                    scatter_root_p2p(a, &seg, send, recv, block, root)
                } else {
                    scatter_leaf_p2p(a, &seg, recv.unwrap_or_default(), root)
                };
            }
            if a.rank != root {
                let r = recv.unwrap_or_default();
                let got = seg.scatter_leaf(r, root as usize);
                return vblock_done(a, got, r, root, "scatter");
            }
            let (counts, displs) = (vec![block; p], regular_displs(p, block));
            return seg_scatterv(a, &seg, (send, &counts, &displs), recv, root);
        }
    }
    a.scatter_into(send, recv, block, root)
}

/// The root of a [`scatter`] on the segment whose blocks go point to point
/// ([`sm::Seg::scatter_p2p`]): a head on the segment ([`sm::Seg::scatter_head`]), then
/// every other block sent, our own copied while they are read, as the linear scatter. A
/// send buffer too short for the blocks takes the scatterv root instead (its table says
/// so to every rank); a receive buffer too short for our block still lets every other
/// rank have its own, then fails.
fn scatter_root_p2p(
    a: &CollComm,
    seg: &sm::Seg,
    send: &[u8],
    recv: Option<&mut [u8]>,
    block: usize,
    root: i32,
) -> Result<()> {
    let (p, me) = (a.size as usize, root as usize);
    if send.len() < p * block {
        let (counts, displs) = (vec![block; p], regular_displs(p, block));
        return seg_scatterv(a, seg, (send, &counts, &displs), recv, root);
    }
    let tag = seg.scatter_head(block);
    let mut reqs = Vec::with_capacity(p - 1);
    for r in (0..p).filter(|&r| r != me) {
        // SAFETY: the block is in bounds (checked); `send` outlives the waitall.
        match unsafe { a.isend_raw(send.as_ptr().add(r * block), block, r as i32, tag) } {
            Ok(q) => reqs.push((q, r as i32)),
            Err(e) => {
                a.abandon(&reqs);
                return Err(e);
            }
        }
    }
    // Our own block once the messages are out (their receivers read while we copy).
    let own = match recv {
        Some(r) if r.len() >= block => {
            r[..block].copy_from_slice(&send[me * block..(me + 1) * block]);
            Ok(())
        }
        Some(_) => Err(crate::arg_err(
            oxmpi_engine::ErrorClass::Truncate,
            "scatter: root's receive buffer is smaller than its block",
        )),
        None => Ok(()),
    };
    a.waitall(&reqs, "scatter").and(own)
}

/// A non-root rank of a [`scatter`] on the segment whose blocks (by our length) go point
/// to point ([`sm::Seg::scatter_p2p`]): our receive is posted first, as a point-to-point
/// scatter's, then the root's post looked at ([`sm::Seg::scatter_look`]). Its tag is the
/// collective's own ([`sm::Seg::scatter_open`]), so a root that ran ahead to a later
/// scatter cannot have its message taken by this receive. A root whose blocks' length
/// differs from ours (erroneous) and that took the segment's buffers or a cross-memory
/// copy instead sends nothing: the receive is cancelled and the block taken from there.
fn scatter_leaf_p2p(a: &CollComm, seg: &sm::Seg, r: &mut [u8], root: i32) -> Result<()> {
    let (k, tag) = seg.scatter_open();
    // SAFETY: `r` outlives the request: it is waited for (or cancelled and waited for)
    // below before `r` is touched again.
    let q = match unsafe { a.irecv_raw(r.as_mut_ptr(), r.len(), root, tag) } {
        Ok(q) => q,
        Err(e) => {
            // Still take part; a block that comes point to point is left unreceived.
            let _ = seg.scatter_rest(k, root as usize, r);
            return Err(e);
        }
    };
    if seg.scatter_look(k, root as usize) {
        return a.waitall(&[(q, root)], "scatter");
    }
    // No message of this collective comes to us: the cancel cannot find it matched.
    a.cancel_wait(q);
    let got = seg.scatter_rest(k, root as usize, r);
    vblock_done(a, got, r, root, "scatter")
}

/// Allgather of blocks of `block` bytes: ours is already in place in `buf` (`own` `None`)
/// or only in `own` (out of place; point to point it is sent from there, see
/// [`CollComm::allgather_from`]).
pub fn allgather(a: &CollComm, buf: &mut [u8], block: usize, own: Option<&[u8]>) -> Result<()> {
    let (me, p) = (a.rank as usize, a.size as usize);
    if (1..=sm::DATA).contains(&block) && buf.len() >= p * block {
        if let Some(seg) = sm::get(a, Coll::Allgather)? {
            count(a.shadow, Alg::SmAllgather);
            check_own(own, block)?;
            place_own(buf, me * block..(me + 1) * block, own);
            let kind = SmKind::Allgather { block };
            let k = seg.begin(&kind, &buf[me * block..(me + 1) * block]);
            seg.end(&kind, k, &mut buf[..p * block], None);
            return Ok(());
        }
    }
    if block > sm::DATA && buf.len() == p * block {
        if let Some(seg) = allgather_cma(a, block)? {
            count(a.shadow, Alg::SmAllgather);
            check_own(own, block)?;
            let counts = vec![block; p];
            return seg.allgatherv_cma(buf, (&counts, &regular_displs(p, block)), own);
        }
    }
    a.allgather_from(buf, block, own)
}

/// Allgatherv: block `i` is `counts[i]` bytes at `displs[i]` of `buf`; ours is already in
/// place (`own` `None`) or only in `own` (out of place, as for [`allgather`]).
pub fn allgatherv(
    a: &CollComm,
    buf: &mut [u8],
    (counts, displs): (&[usize], &[usize]),
    own: Option<&[u8]>,
) -> Result<()> {
    let p = a.size as usize;
    let fits = counts.len() == p
        && displs.len() == p
        && counts.iter().all(|&c| c <= sm::DATA)
        && counts.iter().any(|&c| c > 0)
        && counts.iter().zip(displs).all(|(&c, &d)| d + c <= buf.len());
    if fits {
        if let Some(seg) = sm::get(a, Coll::Allgather)? {
            count(a.shadow, Alg::SmAllgather);
            let me = a.rank as usize;
            check_own(own, counts[me])?;
            place_own(buf, displs[me]..displs[me] + counts[me], own);
            seg.allgatherv(buf, counts, displs);
            return Ok(());
        }
    }
    let valid = counts.len() == p
        && displs.len() == p
        && counts.iter().any(|&c| c > 0)
        && crate::base::helpers::check_blocks(buf.len(), counts, displs).is_ok();
    if valid && !fits {
        let largest = counts.iter().copied().max().unwrap_or(0);
        if let Some(seg) = allgather_cma(a, largest)? {
            count(a.shadow, Alg::SmAllgather);
            let me = a.rank as usize;
            check_own(own, counts[me])?;
            return seg.allgatherv_cma(buf, (counts, displs), own);
        }
    }
    a.allgatherv_from(buf, counts, displs, own)
}

/// Reduce-scatter of `full` (our whole contribution, block `i` of `counts[i]` bytes, back
/// to back): our block of the result goes to `out`. `full` may be used as scratch. On the
/// segment when the vector fits it, by cross-memory copies on two ranks
/// ([`sm::REDUCE_SCATTER_PAIR_WRITTEN`]: `full` is a copy made at the call), else point to
/// point.
pub fn reduce_scatter(
    a: &CollComm,
    full: &mut [u8],
    counts: &[usize],
    out: &mut [u8],
    op: &Op,
) -> Result<()> {
    let total: usize = counts.iter().sum();
    let me = a.rank as usize;
    // Every length compared below holds the counts' mark (different counts of the same
    // sum fail alike, [`crate::counts_mark`]).
    let mark = crate::counts_mark(counts.iter().copied());
    if counts.len() == a.size as usize && full.len() >= total && out.len() >= counts[me] {
        let at = counts[..me].iter().sum();
        let geom = (at, counts[me], total, mark);
        let grouped = op.commutative && mark == 0;
        if reduce_scatter_large(a, Some(&full[..total]), out, geom, op.f, grouped)? {
            return Ok(());
        }
    }
    if counts.len() == a.size as usize
        && (1..=sm::DATA).contains(&total)
        && full.len() >= total
        && out.len() >= counts[me]
    {
        if let Some(seg) = sm::get(a, Coll::ReduceScatter)? {
            count(a.shadow, Alg::SmReduceScatter);
            let at = counts[..me].iter().sum();
            return seg.reduce_scatter(Some(&full[..total]), out, (at, counts[me], mark), op.f);
        }
    }
    // `full` is a copy made at this call: its lines are in our core's cache, so vectors
    // of up to 16 KiB go faster point to point ([`sm::REDUCE_SCATTER_PAIR_WRITTEN`]).
    if counts.len() == 2 && full.len() >= total && out.len() >= counts[me] {
        if let Some(seg) = pair(
            a,
            Coll::ReduceScatter,
            total,
            sm::REDUCE_SCATTER_PAIR_WRITTEN,
        )? {
            count(a.shadow, Alg::SmReduceScatter);
            let block = (if me == 0 { 0 } else { counts[0] }, counts[me], total, mark);
            return seg.reduce_scatter_pull(Some(&full[..total]), out, block, op.commutative, op.f);
        }
    }
    // Every length meets the others on the segment when there is one: its other paths post
    // the vector's length at the same sequence number, so ranks whose counts differ
    // (erroneous) fail alike instead of waiting on different paths.
    if let Some(seg) = sm::get(a, Coll::ReduceScatter)? {
        seg.reduction_gate(total | mark, "reduce_scatter")?;
    }
    a.reduce_scatter(full, counts, out, op)
}

/// Reduce-scatter on the caller's memory, no copy: our whole contribution is `send`
/// (`None`: in place, it starts `buf`), our block of the result (bytes `at..at + n` of
/// the vector, `total` bytes on every rank) goes to `buf[..n]`. `f` as for [`allreduce`].
/// Runs on the `sm` segment when the vector fits it, or on two ranks by cross-memory
/// copies ([`sm::Seg::reduce_scatter_pull`], [`sm::REDUCE_SCATTER_PAIR`], in place
/// [`sm::REDUCE_SCATTER_PAIR_WRITTEN`]; `commutative` says whether `f` is); false
/// (nothing done, on every rank alike: `total` and being in place are the same
/// everywhere) otherwise, for the caller to take [`reduce_scatter`].
pub fn reduce_scatter_direct<F: Fn(&[u8], &mut [u8])>(
    a: &CollComm,
    send: Option<&[u8]>,
    buf: &mut [u8],
    geom: (usize, usize, usize),
    op: (&F, bool),
) -> Result<bool> {
    reduce_scatter_direct_as(a, send, buf, geom, op, (send.is_none(), 0))
}

/// [`reduce_scatter_direct`] where `send` may be a copy of the call's contribution (the
/// packed vector of a non-contiguous datatype, in place or not): `in_place` is the call's
/// (the same on every rank), so that the choice among the paths below depends only on what
/// every rank agrees on (`total`, the ranks, being in place), whichever datatype each rank
/// passed. A rank whose datatype is contiguous and one whose is not (equal type
/// signatures, legal MPI) then take the same path. (Inlined: the small vectors' call from
/// the user's buffers costs no more than before the flag, 37 instructions at np=2 4 B.)
/// `mark` is the [`counts_mark`](crate::counts_mark) of the call's block counts (0 when
/// they are alike), compared with the vector's length.
#[inline(always)]
pub fn reduce_scatter_direct_as<F: Fn(&[u8], &mut [u8])>(
    a: &CollComm,
    send: Option<&[u8]>,
    buf: &mut [u8],
    (at, n, total): (usize, usize, usize),
    (f, commutative): (&F, bool),
    (in_place, mark): (bool, usize),
) -> Result<bool> {
    // A vector of one buffer: neither the pair (`REDUCE_SCATTER_PAIR*` start above `DATA`)
    // nor the large region (more than `DATA` bytes) applies, so ask for the segment first.
    if (1..=sm::DATA).contains(&total) {
        let Some(seg) = sm::get(a, Coll::ReduceScatter)? else {
            return Ok(false);
        };
        count(a.shadow, Alg::SmReduceScatter);
        // (Slicing checks the caller's lengths: `at + n <= total` is the segment's to check.)
        match send {
            Some(s) => seg.reduce_scatter(Some(&s[..total]), buf, (at, n, mark), f)?,
            None => seg.reduce_scatter(None, &mut buf[..total], (at, n, mark), f)?,
        }
        return Ok(true);
    }
    // In place our contribution is the result of our previous call, in our core's cache:
    // vectors of up to 16 KiB go faster point to point (the caller's general path, from a
    // copy: see [`reduce_scatter`]).
    let range = if in_place {
        sm::REDUCE_SCATTER_PAIR_WRITTEN
    } else {
        sm::REDUCE_SCATTER_PAIR
    };
    if let Some(seg) = pair(a, Coll::ReduceScatter, total, range)? {
        count(a.shadow, Alg::SmReduceScatter);
        seg.reduce_scatter_pull(send, buf, (at, n, total, mark), commutative, f)?;
        return Ok(true);
    }
    let grouped = commutative && mark == 0;
    reduce_scatter_large(a, send, buf, (at, n, total, mark), f, grouped)
}

// `reduce_scatter_direct` asks for the segment's buffers first for vectors of up to `DATA`
// bytes: the pair's ranges start above.
const _: () = assert!(
    *sm::REDUCE_SCATTER_PAIR.start() > sm::DATA
        && *sm::REDUCE_SCATTER_PAIR_WRITTEN.start() > sm::DATA
);

/// What a blocking collective through the nonblocking large region runs while it waits:
/// the pending nonblocking collectives' progress (they may hold the slots it needs).
fn progress_nb() {
    crate::nbc::progress::progress_pending();
}

/// Reduce-scatter of more than [`sm::DATA`] bytes up to `coll_sm_nonblocking_large_max` on
/// more than 2 ranks through the segment's nonblocking large region
/// ([`sm::Seg::reduce_scatter_large`]: each rank copies its vector into its slot and folds
/// its block of every slot, one handoff where the ring waits `p - 1` times for a
/// neighbour, each a context switch when ranks share cores). Arguments as for
/// [`reduce_scatter_direct`]; `grouped`: the blocks are alike and the operation is
/// commutative, so that ranks pinned to CPUs may fold by CPU ([`sm::Seg::reduce_scatter_large`]).
/// False (nothing done, on every rank alike) when it does not apply.
fn reduce_scatter_large(
    a: &CollComm,
    send: Option<&[u8]>,
    buf: &mut [u8],
    (at, n, total, mark): (usize, usize, usize, usize),
    f: &dyn Fn(&[u8], &mut [u8]),
    grouped: bool,
) -> Result<bool> {
    if !sm::large_fits(a, total) {
        return Ok(false);
    }
    let Some(seg) = sm::get(a, Coll::ReduceScatter)? else {
        return Ok(false);
    };
    // Our length at the sequence number where the other paths post theirs (erroneous
    // counts fail on every rank, [`reduce_scatter`]; with the counts' mark).
    seg.reduction_gate(total | mark, "reduce_scatter")?;
    if !seg.reduce_scatter_large(send, buf, (at, n, total), (f, grouped), &progress_nb) {
        return Err(crate::arg_err(
            oxmpi_engine::ErrorClass::Count,
            "reduce_scatter: block outside the vector",
        ));
    }
    count(a.shadow, Alg::SmReduceScatter);
    Ok(true)
}

/// Reduce-scatter of equal blocks of `block` bytes (whole `elem`-byte elements) on the
/// caller's memory, no copy: `send` is our whole contribution (`None`: in place, it starts
/// `buf`), our block of the result goes to `buf[..block]`. On more than 2 ranks, for
/// vectors larger than `coll_sm_nonblocking_large_max` up to [`sm::RS_PHASED_MAX`], through
/// the segment's nonblocking large region in phases ([`sm::Seg::reduce_scatter_phased`]:
/// each rank copies its vector once and reads the others' slices where they are, where the
/// ring moves each block `p - 1` times, each a handoff to a neighbour that may have to be
/// scheduled first). False (nothing done, on every rank alike) when it does not apply, for
/// the caller to take [`reduce_scatter`].
pub fn reduce_scatter_phased(
    a: &CollComm,
    send: Option<&[u8]>,
    buf: &mut [u8],
    (block, elem): (usize, usize),
    f: &dyn Fn(&[u8], &mut [u8]),
) -> Result<bool> {
    let Some(total) = block.checked_mul(a.size as usize) else {
        return Ok(false);
    };
    if !sm::phased_fits(a, total) {
        return Ok(false);
    }
    let Some(seg) = sm::get(a, Coll::ReduceScatter)? else {
        return Ok(false);
    };
    seg.reduction_gate(total, "reduce_scatter")?;
    if !seg.reduce_scatter_phased(send, buf, (block, elem), f, &progress_nb) {
        return Err(crate::arg_err(
            oxmpi_engine::ErrorClass::Count,
            "reduce_scatter: buffers shorter than the blocks",
        ));
    }
    count(a.shadow, Alg::SmReduceScatter);
    Ok(true)
}

/// Alltoallv: block `j` of `send` (`scounts[j]` bytes at `sdispls[j]`) goes to rank `j`,
/// block `j` of `recv` (`rcounts[j]` bytes at `rdispls[j]`) comes from rank `j`. Through
/// the segment when every rank's blocks fit one buffer (every rank learns it there:
/// counts differ between ranks), point to point otherwise.
pub fn alltoallv(
    a: &CollComm,
    send: &[u8],
    (scounts, sdispls): (&[usize], &[usize]),
    recv: &mut [u8],
    (rcounts, rdispls): (&[usize], &[usize]),
) -> Result<()> {
    if let Some(seg) = sm::get(a, Coll::Alltoall)? {
        let r = seg.alltoallv((send, scounts, sdispls), (recv, rcounts, rdispls))?;
        if let Some(r) = seg_alltoallv_done(a, r) {
            return r;
        }
    }
    a.alltoallv(send, scounts, sdispls, recv, rcounts, rdispls)
}

/// The outcome of an alltoallv on the segment ([`sm::Seg::alltoallv`]): `None` when the
/// data did not fit (to move point to point), else its result.
fn seg_alltoallv_done(a: &CollComm, r: Option<bool>) -> Option<Result<()>> {
    match r? {
        true => {
            count(a.shadow, Alg::SmAlltoallv);
            Some(Ok(()))
        }
        false => Some(Err(crate::arg_err(
            oxmpi_engine::ErrorClass::Truncate,
            "alltoallv: a block's length differs from its receive count",
        ))),
    }
}

/// Alltoallv in place: `buf` holds block `j` for rank `j` (`counts[j]` bytes at
/// `displs[j]`) and receives rank `j`'s block there. Through the segment when every rank's
/// blocks fit one buffer, or else by cross-memory copies between the ranks' buffers (no
/// temporary either way), else point to point from a copy of the data to send (from the
/// pool): by the alltoall algorithms when `block` says the blocks are regular (block `j`
/// of `block` bytes at `j * block`).
pub fn alltoallv_in_place(
    a: &CollComm,
    buf: &mut [u8],
    (counts, displs): (&[usize], &[usize]),
    block: Option<usize>,
) -> Result<()> {
    if let Some(seg) = sm::get(a, Coll::Alltoall)? {
        let r = seg.alltoallv_in_place(buf, counts, displs)?;
        if let Some(r) = seg_alltoallv_done(a, r) {
            return r;
        }
    }
    let mut copy = crate::pooled(buf.len());
    copy.copy_from_slice(buf);
    let r = match block {
        Some(b) => {
            let len = b * a.size as usize;
            a.alltoall(&copy[..len], &mut buf[..len], b)
        }
        None => a.alltoallv(&copy, counts, displs, buf, counts, displs),
    };
    crate::unpool(copy);
    r
}

/// Gatherv to `root`: our block is `send` (`None`: in place at the root, already in
/// `recv`); at the root, block `i` (`counts[i]` bytes at `displs[i]`) of `recv` comes
/// from rank `i` (other ranks pass empty `recv`, `counts`, `displs`). On the segment the
/// root decides by its counts ([`sm::Seg::gatherv_root`]): blocks of at most [`sm::V_MAX`]
/// bytes are posted there, larger ones written by one cross-memory copy up to
/// [`sm::Seg::single_copy_max`], the rest point to point; on 2 ranks a block of
/// [`sm::GATHER_PAIR`] moves as a gather's ([`sm::Seg::gather_pair`]). The other ranks
/// follow the root's post ([`sm::Seg::gather_leaf`]), so that a count that disagrees
/// with its block (erroneous) fails instead of hanging: `MPI_ERR_TRUNCATE` at the root
/// when the block is longer.
pub fn gatherv(
    a: &CollComm,
    send: Option<&[u8]>,
    recv: &mut [u8],
    (counts, displs): (&[usize], &[usize]),
    root: i32,
) -> Result<()> {
    let at_root = a.rank == root;
    if (0..a.size).contains(&root) {
        if let Some(seg) = sm::get(a, Coll::Gather)? {
            count(a.shadow, Alg::SmGather);
            if !at_root {
                // Whatever the root's path, ours follows its post (`sm::Seg::gather_leaf`).
                let s = send.unwrap_or_default();
                return given_done(a, seg.gather_leaf(root as usize, s), send, root, "gatherv");
            }
            return seg_gatherv_root(a, &seg, send, recv, (counts, displs), "gatherv");
        }
    }
    count(a.shadow, Alg::GathervLinear);
    a.gatherv_linear(send, recv, (counts, displs), root)
}

/// The root's part of a gatherv on the segment `seg` (every other rank runs
/// [`sm::Seg::gather_leaf`]); `what` names the collective in errors.
fn seg_gatherv_root(
    a: &CollComm,
    seg: &sm::Seg,
    send: Option<&[u8]>,
    recv: &mut [u8],
    (counts, displs): (&[usize], &[usize]),
    what: &str,
) -> Result<()> {
    let valid = a
        .check_vec_len(counts, displs)
        .and_then(|()| crate::base::helpers::check_blocks(recv.len(), counts, displs));
    if let Err(e) = valid {
        // Still take part, with room for no block: no rank is left waiting.
        let none = vec![0; a.size as usize];
        seg.gatherv_root(None, (&mut [], &none, &none), 0);
        return Err(e);
    }
    // (`other` is the other rank only on 2 ranks, the one case that reads it.)
    let (me, other) = (a.rank as usize, a.rank as usize ^ 1);
    // On 2 ranks, a block of `sm::GATHER_PAIR` as a gather's
    // ([`sm::Seg::gather_pair`]; the other rank follows our post).
    if a.size == 2 && seg.cma_known() && sm::GATHER_PAIR.contains(&counts[other]) {
        let n = counts[other];
        let (t, o) = (displs[other], displs[me]);
        // Disjoint blocks (MPI: no place written twice), or the other block alone.
        let apart = send.is_none() || t + n <= o || o + counts[me] <= t;
        let (theirs, own) = match apart {
            true => pair_blocks(recv, t, o, n),
            false => (&mut recv[t..t + n], &mut [][..]),
        };
        let room = counts[me].min(own.len());
        let own = send.map(|s| (s, &mut own[..room]));
        return single_copy_done(seg.gather_pair(theirs, own), what);
    }
    let one_copy = seg.single_copy_max();
    let (ok, rest) = seg.gatherv_root(send, (&mut *recv, counts, displs), one_copy);
    // The blocks that travel point to point.
    let base = recv.as_mut_ptr();
    let mut reqs = Vec::new();
    for i in rest {
        // SAFETY: the block is in bounds (checked); `recv` outlives the waitall.
        match unsafe { a.irecv_raw(base.add(displs[i]), counts[i], i as i32, TAG_GATHER) } {
            Ok(q) => reqs.push((q, i as i32)),
            Err(e) => {
                a.abandon(&reqs);
                return Err(e);
            }
        }
    }
    a.waitall(&reqs, what)?;
    if !ok {
        return Err(crate::arg_err(
            oxmpi_engine::ErrorClass::Truncate,
            format!("{what}: a rank's block is longer than the root's count for it"),
        ));
    }
    Ok(())
}

/// Scatterv from `root`: block `i` of `send` (`counts[i]` bytes at `displs[i]`, root
/// only) lands in `recv` of rank `i` (`None`: in place at the root, nothing to copy).
/// Through the segment the blocks that fit the root's buffer after its table (the
/// others learn there whether theirs is posted), the rest point to point.
pub fn scatterv(
    a: &CollComm,
    (send, counts, displs): (&[u8], &[usize], &[usize]),
    recv: Option<&mut [u8]>,
    root: i32,
) -> Result<()> {
    if (0..a.size).contains(&root) {
        if let Some(seg) = sm::get(a, Coll::Scatter)? {
            count(a.shadow, Alg::SmScatter);
            return seg_scatterv(a, &seg, (send, counts, displs), recv, root);
        }
    }
    count(a.shadow, Alg::ScattervLinear);
    a.scatterv_linear((send, counts, displs), recv, root)
}

/// The outcome of a non-root rank's scatter(v) block on the segment as the collective's
/// (`what`): a block that is not on the segment comes from `root` point to point into `r`.
fn vblock_done(a: &CollComm, got: VBlock, r: &mut [u8], root: i32, what: &str) -> Result<()> {
    match got {
        VBlock::Here(_) => Ok(()),
        VBlock::Elsewhere(tag) => a.recv(r, root, tag).map(|_| ()),
        VBlock::Failed => single_copy_done(Err(std::io::ErrorKind::Other.into()), what),
        VBlock::Abandoned => Err(crate::arg_err(
            oxmpi_engine::ErrorClass::Arg,
            format!("{what}: the root (rank {root}) was given invalid counts or displacements"),
        )),
        VBlock::Truncated(n) => Err(crate::arg_err(
            oxmpi_engine::ErrorClass::Truncate,
            format!("{what}: {n} bytes for a receive buffer of {}", r.len()),
        )),
    }
}

/// [`scatterv`] on the segment `seg`.
fn seg_scatterv(
    a: &CollComm,
    seg: &sm::Seg,
    (send, counts, displs): (&[u8], &[usize], &[usize]),
    recv: Option<&mut [u8]>,
    root: i32,
) -> Result<()> {
    let at_root = a.rank == root;
    let one_copy = seg.single_copy_max();
    if !at_root {
        let r = recv.unwrap_or_default();
        let got = seg.scatterv(None, r, root as usize, one_copy, &mut None).1;
        return vblock_done(a, got, r, root, "scatterv");
    }
    let valid = a
        .check_vec_len(counts, displs)
        .and_then(|()| crate::base::helpers::check_blocks(send.len(), counts, displs));
    // Invalid arguments still take part (a table that fails the others), then fail.
    let table = valid.is_ok().then_some((send, counts, displs));
    let me = root as usize;
    // Our own block (valid arguments, room for it), copied by the segment while ranks
    // read theirs by cross-memory copies, else below once the messages are out. Without
    // room for it the others still get theirs (some wait for a message), then we fail.
    let mut own_room = Ok(());
    let mut own = match (&valid, recv) {
        (Ok(()), Some(r)) if r.len() >= counts[me] => Some((
            &send[displs[me]..displs[me] + counts[me]],
            &mut r[..counts[me]],
        )),
        (Ok(()), Some(_)) => {
            own_room = Err(crate::arg_err(
                oxmpi_engine::ErrorClass::Truncate,
                "root's receive buffer is smaller than its block",
            ));
            None
        }
        _ => None,
    };
    let (rest, _, tag) = seg.scatterv(table, &mut [], root as usize, one_copy, &mut own);
    valid?;
    let mut reqs = Vec::new();
    for r in rest {
        let i = r as i32;
        // SAFETY: the block is in bounds (checked); `send` outlives the waitall.
        match unsafe { a.isend_raw(send.as_ptr().add(displs[r]), counts[r], i, tag) } {
            Ok(q) => reqs.push((q, i)),
            Err(e) => {
                a.abandon(&reqs);
                return Err(e);
            }
        }
    }
    // Our own block once the messages are out (their receivers read while we copy).
    if let Some((src, dst)) = own {
        dst.copy_from_slice(src);
    }
    // Every block on the segment (the small scatterv): nothing to wait for.
    if reqs.is_empty() {
        return own_room;
    }
    a.waitall(&reqs, "scatterv").and(own_room)
}
