//! The `sm` component: shared-memory paths for barrier, bcast, alltoall, allreduce,
//! gather, scatter, allgather(v), reduce, reduce-scatter, scan and exscan of small vectors
//! (blocking, through [`Seg::begin`] and [`Seg::end`] for the ones after allreduce), and for
//! allreduce of large vectors ([`Seg::allreduce_big`], from
//! `coll_sm_allreduce_large_min` bytes), on any intracommunicator whose ranks all run on one
//! node.
//!
//! Each such communicator gets, lazily at its first eligible collective, one segment
//! (a `memfd` made by rank 0 and opened by the others through `/proc/<pid>/fd/<fd>`: no
//! file name ever exists) with a slot per rank: a *done* word on its own cache line, then
//! [`NBUF`] buffers used round robin, each a *stamp* word followed by up to [`DATA`] bytes
//! of data (the stamp and the first 56 data bytes share a cache line, so a small message
//! costs the reader one line transfer). Collective number `k` on the communicator uses
//! buffer `k mod NBUF`.
//!
//! Protocol. A contributing rank writes its data, then stores `k` in the buffer's stamp
//! (release); a reader waits for the stamp to reach `k` (acquire) and reads. A rank stores
//! `k` in its done word once it has finished reading everything of collective `k`:
//! * allreduce, alltoall: every rank writes and waits for every other rank's stamp, then
//!   reads (an alltoall's post holds only the blocks for the other ranks);
//! * barrier: the same without data when `coll_sm_barrier_release` is off or the
//!   collective called before it on the communicator, of any kind, was a barrier;
//!   otherwise the others stamp their arrival and wait for rank 0's stamp, which rank 0
//!   writes once it has seen every arrival (rank 0 leaves first, also when ranks yield
//!   when idle);
//! * bcast: only the root writes and does not wait; the others wait for its stamp. A
//!   broadcast of at most 112 bytes goes through the root's *lane* instead, `LANE`
//!   entries of two lines, each line holding a stamp and 56 bytes of payload, so a root
//!   may run up to `LANE - 1` ahead; a receiver polls all the lines of an entry at once,
//!   so their transfers overlap.
//!
//! Before writing buffer `k mod NBUF` a rank waits until every rank's done word has reached
//! `k - NBUF` (nobody reads that buffer for collective `k - NBUF` any more; lane lines:
//! `k - LANE`); the lowest done
//! word seen is cached, so this costs no cache-line transfer in the common case and a run of
//! broadcasts may pipeline up to `NBUF - 1` ahead. The cache is refreshed while a rank waits
//! anyway (its first look that finds a word not there yet), when its next post would need a
//! newer bound, so that the transfer rarely falls on a post (`Seg::refresh_done`). The data of a post that does not fit the
//! lane, for a bcast, a scatter, a scatterv's blocks (then flagged in its table) and an
//! allgather, goes to the poster's *ring* cell `k mod RING_CELLS` instead ([`RING_CELLS`]
//! cells after the nonblocking large region, under the same rule, since
//! `RING_CELLS >= NBUF`): a cell rewritten after 8 collectives still sits in the readers'
//! first-level caches from its last read, and they then wait longer for the new data.
//! Allreduce folds all ranks' buffers in
//! rank order (`x0 ∘ (x1 ∘ (… ∘ x(p-1)))`): every rank computes the identical result, for
//! any operation.
//!
//! Gatherv and scatterv ([`Seg::gatherv_root`], [`Seg::scatterv`]) take the segment per
//! rank: a gatherv rank posts its length, and its block when it fits [`V_MAX`]; a longer
//! block follows the root's post ([`Seg::gather_leaf`]): the root decides from its counts
//! and checks from the posted lengths, so that an erroneous count that disagrees with a
//! block fails on both sides instead of hanging one; a scatterv root posts a table saying for every
//! rank where its block is in the root's buffer or that it comes point to point. Alltoall(v)
//! in place posts from the user's buffer before overwriting it (no temporary). Alltoallv
//! blocks too large for a buffer move by cross-memory copies between the user's buffers
//! (`segment/cma.rs`: in place each pair of ranks trades its two blocks, half each; out of
//! place every rank reads its block where the sender has it), and so do alltoall blocks
//! too large for a buffer, and allgather(v) blocks on more than 2 ranks ([`Seg::allgatherv_cma`]: every rank reads every other rank's block where it is; on 2 ranks, blocks of [`ALLGATHER_PAIR`]: each rank writes its block into the other's buffer, or reads the other's, as rank 0 chooses per call from its timings of both).
//!
//! Reduce (4 KiB to 1 MiB), allreduce (8 KiB to 1 MiB) and reduce-scatter (4 KiB to 2 MiB)
//! on two ranks that reach each other by CMA go by cross-memory copies between the user's
//! buffers, both ranks folding a part (`segment/pull.rs`, `segment/pull_all.rs`): the
//! segment carries only the addresses and the done words.
//!
//! Bcast, gather and scatter of blocks too large for a buffer, and such blocks of gatherv
//! and scatterv, up to `coll_sm_single_copy_max` bytes (`coll_sm_single_copy_max_many` on
//! more than 2 ranks), move by one cross-memory copy each between the root's buffer and the
//! rank's (`segment/rooted.rs`, [`Seg::rooted_cma`]); their nonblocking forms too
//! ([`SmKind::Single`], and the far blocks of [`SmKind::Gatherv`] and [`SmKind::Scatterv`]:
//! each rank copies in its progress, then stamps its buffer; the root ends once all have).
//! Whether CMA reaches every rank is probed when the segment is made.
//!
//! Nonblocking forms of small vectors ([`nb`]) post their data the same way at the call
//! and finish at a later progress call once the stamps they need are there. They count
//! their own sequence, in [`NB_NBUF`] buffers of their own at the end of the slot, with
//! their own done word (bytes 16..24 of the first line), which stays below a rank's oldest
//! unfinished one: blocking and nonblocking collectives are matched each in their own
//! order, like the separate tag spaces of Open MPI and MPICH, so a rank that starts an
//! `MPI_Iallreduce` and then enters `MPI_Barrier` meets a rank that entered the barrier
//! first. Their gatherv, scatterv and alltoallv choose per block, from its length and the
//! communicator's size alone, whether it goes through the segment or by message
//! ([`SmKind::each_message`]).
//!
//! Nonblocking allreduce, reduce, scan, exscan and reduce-scatter of larger vectors (up to
//! [`NB_LARGE_MAX`], on more than 2 ranks: [`SmKind::Large`], [`existing_large`]) go
//! through the nonblocking large region that ends the segment, a slot per rank: the ranks
//! copy their vectors into their slots at the call and the readers fold from there in their
//! progress; the blocking reduce-scatter of such vectors too, waiting. Nonblocking
//! reduce-scatters of equal blocks up to [`RS_PHASED_MAX`] go through it in phases
//! ([`existing_large_phased`]). On two ranks that
//! reach each other by CMA, allreduce, reduce, reduce-scatter and the inclusive scan (a
//! reduce to rank 1) go by cross-memory copies between the ranks' buffers instead, as their
//! blocking forms do ([`SmKind::Pair`], [`existing_pair`]).
//!
//! Every rank takes the same decision at every collective (it depends only on the
//! communicator and on arguments MPI requires to match). Segments of freed communicators are
//! unmapped when the next segment is made. `coll_sm_enable` (default on) turns the paths off;
//! forcing an algorithm with `coll_tuned_<coll>_algorithm` turns it off for that collective.

mod bell;
pub mod nb;
pub mod params;
mod segment;
pub(crate) use segment::lengths_error;

pub use nb::{Progress, Rooted, SmKind};
pub use segment::{
    Bcast, Given, Reduction, Seg, Side, VBlock, AHEAD_MIN, ALLGATHER_PAIR, ALLREDUCE_PAIR,
    BCAST_BIG_MIN, BIG_MAX, CAP, DATA, GATHER_PAIR, IREDUCE_SCATTER_PAIR_WRITTEN, LANE_MAX, NBUF,
    NB_LARGE_MAX, NB_NBUF, PULL_MAX, REDUCE_BIG_MAX, REDUCE_SCATTER_PAIR,
    REDUCE_SCATTER_PAIR_WRITTEN, REMOTE_SPIN, RING_CELLS, RS_PHASED_MAX, V_MAX,
};

use crate::tune::{self, Coll};
use crate::{CollComm, Result};
use oxmpi_engine::sys::{self, Mapping};
use oxmpi_engine::CommId;
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, OnceLock};

/// This process's id as the posts that let other ranks copy from or into our memory carry
/// it (cross-memory copies name the process), read once: `std::process::id` is a `getpid`
/// system call each time, which every such post of a blocking or nonblocking collective
/// paid.
pub(crate) fn own_pid() -> u64 {
    static PID: OnceLock<u32> = OnceLock::new();
    u64::from(*PID.get_or_init(std::process::id))
}

/// Largest communicator with a segment.
const MAX_RANKS: i32 = 64;

/// Segments by collective-context engine communicator (`None`: no segment possible).
/// Engine communicator ids are never reused.
type Segs = HashMap<u32, Option<Arc<Seg>>>;
static SEGS: Mutex<Option<Segs>> = Mutex::new(None);

thread_local! {
    /// This thread's last entry of [`SEGS`] (programs mostly run their collectives on
    /// one communicator: no lock, no hashing then). Ids are never reused, so a stale
    /// entry is never hit.
    static LAST: std::cell::RefCell<Option<(u32, Option<Arc<Seg>>)>> =
        const { std::cell::RefCell::new(None) };
}

/// Whether the shared-memory path may run `coll`: `coll_sm_enable` is on and no
/// algorithm is forced for it (`coll_tuned_<coll>_algorithm` other than 0 runs that
/// algorithm at every size).
#[inline]
pub fn allowed(coll: Coll) -> bool {
    params::enabled() && tune::algorithm(coll) == 0
}

/// The segment of the communicator whose collective view is `a` (keyed by the engine
/// communicator its collective traffic travels on), creating it on first use (collective
/// over the communicator: every rank calls this at the same collective). `None` when the
/// ranks span several nodes, the communicator is too small or too large, the paths are
/// disabled, or the segment cannot be made.
#[inline]
pub fn get(a: &CollComm, coll: Coll) -> Result<Option<Arc<Seg>>> {
    if !allowed(coll) {
        return Ok(None);
    }
    get_any(a)
}

/// [`get`] for a collective that has no algorithm parameter (scan, exscan): only
/// `coll_sm_enable` turns the path off.
#[inline]
pub fn get_any(a: &CollComm) -> Result<Option<Arc<Seg>>> {
    if a.size < 2 || a.size > MAX_RANKS || !params::enabled() {
        return Ok(None);
    }
    let key = a.shadow.0;
    let cached = LAST.with(|l| match &*l.borrow() {
        Some((k, s)) if *k == key => Some(s.clone()),
        _ => None,
    });
    if let Some(s) = cached {
        return Ok(s);
    }
    let known = SEGS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|m| m.get(&key).cloned());
    if let Some(s) = known {
        LAST.with(|l| *l.borrow_mut() = Some((key, s.clone())));
        return Ok(s);
    }
    let s = setup(a)?.map(Arc::new);
    LAST.with(|l| *l.borrow_mut() = Some((key, s.clone())));
    let mut g = SEGS.lock().unwrap_or_else(|p| p.into_inner());
    let m = g.get_or_insert_with(HashMap::new);
    // Forget the segments of freed communicators (their engine communicator is gone).
    m.retain(|&c, _| a.e.comm_size(CommId(c)).is_ok());
    m.insert(key, s.clone());
    Ok(s)
}

/// The segment of the communicator whose collective view is `a` if an earlier collective
/// made it, for the nonblocking forms ([`nb`]): they never make one, since making it is a
/// blocking exchange. `None` too when `coll_sm_enable` or `coll_sm_nonblocking` is off.
/// Every rank gets the same answer: segments are made at the same collective everywhere.
#[inline]
pub fn existing(a: &CollComm) -> Option<Arc<Seg>> {
    if a.size < 2 || a.size > MAX_RANKS || !params::enabled() || !params::nonblocking() {
        return None;
    }
    let key = a.shadow.0;
    let cached = LAST.with(|l| match &*l.borrow() {
        Some((k, s)) if *k == key => Some(s.clone()),
        _ => None,
    });
    if let Some(s) = cached {
        return s;
    }
    SEGS.lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .and_then(|m| m.get(&key).cloned())
        .flatten()
}

/// The segment for a nonblocking bcast, gather or scatter whose blocks are `block` bytes,
/// too large for the segment's buffers, by one cross-memory copy per rank
/// ([`SmKind::Single`]): when an earlier collective made it ([`existing`]), the blocks are
/// at most `coll_sm_single_copy_max` bytes (`_many` on more than 2 ranks) and CMA reaches
/// every rank (probed when the segment was made). Every rank gets the same answer.
pub fn existing_single_copy(a: &CollComm, block: usize) -> Option<Arc<Seg>> {
    if block == 0 || block > params::single_copy_max_for(a.size as usize) {
        return None;
    }
    existing(a).filter(|s| block <= s.single_copy_max())
}

/// The segment for a nonblocking allreduce, reduce, scan or exscan of `bytes` bytes (more
/// than a buffer) through its nonblocking large region ([`SmKind::Large`]): on more than 2
/// ranks (2 ranks keep their schedules, measured faster there), when an earlier collective
/// made it ([`existing`]) and the vector has at most `coll_sm_nonblocking_large_max` bytes.
/// Every rank gets the same answer.
pub fn existing_large(a: &CollComm, bytes: usize) -> Option<Arc<Seg>> {
    large_fits(a, bytes).then(|| existing(a)).flatten()
}

/// The segment for a nonblocking reduce-scatter of equal blocks whose `bytes`-byte vector
/// is larger than `coll_sm_nonblocking_large_max` (at most [`RS_PHASED_MAX`]) through its
/// nonblocking large region in phases ([`Reduction::ReduceScatterBlock`]): on more than 2
/// ranks, when an earlier collective made it and the large region is on
/// (`coll_sm_nonblocking_large_max` not 0). Every rank gets the same answer.
pub fn existing_large_phased(a: &CollComm, bytes: usize) -> Option<Arc<Seg>> {
    phased_fits(a, bytes).then(|| existing(a)).flatten()
}

/// Whether a reduce-scatter of equal blocks whose vector has `bytes` bytes goes through the
/// segment's nonblocking large region in phases ([`Reduction::ReduceScatterBlock`]): on more
/// than 2 ranks, larger than `coll_sm_nonblocking_large_max` (not 0) up to
/// [`RS_PHASED_MAX`]. The same answer on every rank.
pub fn phased_fits(a: &CollComm, bytes: usize) -> bool {
    let max = params::nonblocking_large_max();
    let on = a.size > 2 && max > 0 && params::nonblocking();
    on && bytes > max.max(DATA) && bytes <= RS_PHASED_MAX
}

/// The segment for a nonblocking reduction (`red`) of `bytes` bytes (more than a buffer) on
/// two ranks by cross-memory copies ([`SmKind::Pair`]), when an earlier collective made it
/// ([`existing`]) and found that the ranks reach each other by CMA, for the sizes whose
/// blocking forms go that way too (a reduce up to [`PULL_MAX`], an allreduce up to the end
/// of [`ALLREDUCE_PAIR`], a reduce-scatter in [`REDUCE_SCATTER_PAIR`], an inclusive scan,
/// a reduce to rank 1, up to [`PULL_MAX`]; not an exclusive scan). Every rank gets the same
/// answer.
///
/// `in_place`: the call is in place on every rank (MPI makes it alike for a
/// reduce-scatter); only a reduce-scatter looks at it. In place, its contribution is the
/// result of its previous call, just written by its rank, and the other rank's reads take
/// every line from the other core's cache: as for the blocking form
/// (`base::select::reduce_scatter_direct`, [`REDUCE_SCATTER_PAIR_WRITTEN`]), smaller
/// vectors go by message, here those up to 8 KiB ([`IREDUCE_SCATTER_PAIR_WRITTEN`]).
pub fn existing_pair(
    a: &CollComm,
    bytes: usize,
    red: Reduction,
    in_place: bool,
) -> Option<Arc<Seg>> {
    let range = match red {
        Reduction::Reduce { .. } | Reduction::Scan { exclusive: false } => DATA + 1..=PULL_MAX,
        Reduction::Allreduce => DATA + 1..=*ALLREDUCE_PAIR.end(),
        Reduction::ReduceScatter { .. } | Reduction::ReduceScatterBlock { .. } if in_place => {
            IREDUCE_SCATTER_PAIR_WRITTEN
        }
        Reduction::ReduceScatter { .. } | Reduction::ReduceScatterBlock { .. } => {
            REDUCE_SCATTER_PAIR
        }
        Reduction::Scan { exclusive: true } => return None,
    };
    if a.size != 2 || !range.contains(&bytes) {
        return None;
    }
    existing(a).filter(|s| s.cma_known())
}

/// Whether a reduction of `bytes` bytes on the communicator of `a` may take the segment's
/// nonblocking large region (see [`existing_large`]; a blocking one makes the segment).
pub fn large_fits(a: &CollComm, bytes: usize) -> bool {
    a.size > 2 && bytes > DATA && bytes <= params::nonblocking_large_max() && params::nonblocking()
}

fn setup(a: &CollComm) -> Result<Option<Seg>> {
    let yield_idle = a.e.yields_when_idle();
    crate::nbc::progress::ranks_yield(yield_idle);
    // Does any rank yield when idle (more ranks than cores)? Then large allreduces do
    // not use the large-vector region: its synchronisations cost a context switch each,
    // and the point-to-point algorithms were measured twice as fast there (np=4 on 2
    // cores). Large reduces (one handoff each way) still do. The barrier lets rank 0
    // out first (`Seg::barrier`) when `coll_sm_barrier_release` is on on every rank,
    // whether ranks yield or not.
    // Per rank 4 bytes: flags, then the CPU it is pinned to plus one (0: not pinned to
    // one CPU), 24 bits little-endian.
    let mut words = vec![0u8; 4 * a.size as usize];
    // Bit 2: we may sleep in waits (`Seg::wait_word`): every rank then rings its doorbell
    // after its stores, else none does (a fence per store, measured at np=4).
    let block_after = if yield_idle {
        params::block_after(a.size as usize)
    } else {
        0
    };
    let cpu = sys::single_cpu().map_or(0, |c| (c + 1) & 0xff_ffff);
    let at = 4 * a.rank as usize;
    words[at] = u8::from(yield_idle)
        | u8::from(params::barrier_release()) << 1
        | u8::from(block_after != 0) << 2;
    words[at + 1..at + 4].copy_from_slice(&cpu.to_le_bytes()[..3]);
    a.allgather(&mut words, 4)?;
    let flags: Vec<u8> = words.iter().step_by(4).copied().collect();
    let cpus: Vec<u32> = words
        .chunks_exact(4)
        .map(|w| u32::from_le_bytes([w[1], w[2], w[3], 0]))
        .collect();
    let big_ok = flags.iter().all(|&f| f & 1 == 0);
    let release = flags.iter().all(|&f| f & 2 != 0);
    let ring = flags.iter().any(|&f| f & 4 != 0);
    let (rank, size) = (a.rank as usize, a.size as usize);
    let Some(map) = share(a, segment::seg_len(size))? else {
        return Ok(None);
    };
    let seg = Seg::new(
        map,
        rank,
        size,
        (yield_idle, big_ok, release),
        (block_after, ring),
        &cpus,
        a.e,
    );
    // Whether CMA reaches every rank, known from here on to the nonblocking rooted
    // collectives too (they cannot probe): every rank makes the segment at the same
    // collective.
    if params::single_copy_max_for(size) > 0 {
        seg.cma_ready();
    }
    Ok(Some(seg))
}

/// Process id of communicator rank 0 when every rank of the communicator runs on this
/// node (the engine says which world ranks do), else `None`. Every rank gets the same
/// answer: sharing a node is symmetric.
fn node_root_pid(a: &CollComm) -> Result<Option<i32>> {
    let group = a.e.comm_group(a.shadow)?;
    let mut pids = group.iter().map(|&w| a.e.node_pid(w));
    let Some(Some(pid0)) = pids.next() else {
        return Ok(None);
    };
    Ok(pids.all(|p| p.is_some()).then_some(pid0))
}

/// Map one `len`-byte memfd made by rank 0 on every rank of the communicator
/// (collective). `None` (nothing mapped anywhere) when the ranks are not all on this
/// node or some rank could not map it.
fn share(a: &CollComm, len: usize) -> Result<Option<Mapping>> {
    let (rank, size) = (a.rank as usize, a.size as usize);
    let Some(pid0) = node_root_pid(a)? else {
        return Ok(None);
    };
    // Rank 0 makes the file and names it by its descriptor number (-1: it could not).
    let own: Option<OwnedFd> = if rank == 0 {
        sys::memfd("oxmpi-coll", len).ok()
    } else {
        None
    };
    let mut fd0 = own.as_ref().map_or(-1, sys::raw_fd).to_ne_bytes();
    a.bcast(&mut fd0, 0)?;
    let fd0 = i32::from_ne_bytes(fd0);
    if fd0 < 0 {
        return Ok(None);
    }
    let map = match &own {
        Some(fd) => Mapping::map(fd, len).ok(),
        // The mapping keeps the memory; the opened file is closed right after.
        None => sys::open_peer_fd(pid0, fd0)
            .and_then(|f| Mapping::map(&f, len))
            .ok(),
    };
    // Everybody mapped it (or failed)? Rank 0's descriptor stays open until every rank has
    // opened it: `own` lives until the return, after this exchange.
    let mut flags = vec![0u8; size];
    flags[rank] = u8::from(map.is_some());
    a.allgather(&mut flags, 1)?;
    if flags.contains(&0) {
        return Ok(None);
    }
    Ok(map)
}
