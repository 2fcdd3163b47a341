//! One communicator's segment: its layout and the protocol of each collective on it (see
//! the [component documentation](super)).

use super::bell::{Bell, SysFutex};
use crate::{CollComm, Result};
use oxmpi_engine::ring::{demote_lines, prefetch_lines};
use oxmpi_engine::sys::Mapping;
use oxmpi_engine::{cma_copy, Cma, Engine};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

mod big;
mod cma;
mod large;
mod pull;
mod pull_all;
mod pull_nb;
mod rooted;
mod stream;
pub use big::{BCAST_BIG_MIN, REDUCE_BIG_MAX};
pub use cma::ALLGATHER_PAIR;
pub(in crate::sm) use cma::{chunk_for, copy_own, trade};
pub(crate) use large::{Large, BCAST_LARGE_TAG};
pub use large::{Reduction, NB_LARGE_MAX, RS_PHASED_MAX};
pub use pull::PULL_MAX;
pub use pull_all::{
    ALLREDUCE_PAIR, IREDUCE_SCATTER_PAIR_WRITTEN, REDUCE_SCATTER_PAIR, REDUCE_SCATTER_PAIR_WRITTEN,
};
pub(crate) use pull_nb::Pair;
pub use rooted::{Given, Side, GATHER_PAIR};

const LINE: usize = 64;
/// Bytes of one data buffer (vectors up to this size take the shared-memory path).
pub const DATA: usize = 4096;
/// Largest allreduce vector through the large region ([`Seg::allreduce_big`]).
pub const BIG_MAX: usize = 8 << 20;
/// Flag of a blocking allreduce's length word ([`Seg::allreduce`], [`Seg::reduction_gate`]):
/// the first word of its post, the bytes in the bits below. A two-rank cross-memory post
/// starts with a pid instead ([`pull::Post`]), which never has it.
pub(crate) const LEN_TAG: u64 = 1 << 63;
/// The length an allreduce's post on the segment holds, its word `i` being `word(i)`: a
/// length word ([`LEN_TAG`]) first, or second after the mark of a post for the
/// nonblocking large region ([`Seg::large_step`]), or a two-rank cross-memory post
/// ([`pull::Post`]: a pid, an address, never with [`LEN_TAG`]; its length is its fourth
/// word).
pub(crate) fn post_len_of(word: impl Fn(usize) -> u64) -> u64 {
    let (w0, w1) = (word(0), word(1));
    if w0 & LEN_TAG != 0 {
        w0 & !LEN_TAG
    } else if w1 & LEN_TAG != 0 {
        w1 & !LEN_TAG
    } else {
        word(3)
    }
}

/// Of posted lengths `posted`, one that differs from our `n`: a longer one if there is
/// one (the error is then `MPI_ERR_TRUNCATE`, [`lengths_error`]).
fn differing_of(n: usize, posted: impl Iterator<Item = u64>) -> Option<usize> {
    let mut found = None;
    for m in posted {
        if m > n as u64 {
            return Some(usize::try_from(m).unwrap_or(usize::MAX));
        }
        if m < n as u64 {
            found.get_or_insert(m as usize);
        }
    }
    found
}

/// The error of a reduction (`what`) whose vector has `ours` bytes here and `theirs` at
/// some other rank (erroneous arguments): `MPI_ERR_TRUNCATE` when theirs is longer, else
/// `MPI_ERR_COUNT`, as a broadcast's reader decides (the vector that comes is longer or
/// shorter than our buffer).
pub(crate) fn lengths_error(what: &str, theirs: usize, ours: usize) -> oxmpi_engine::Error {
    crate::base::helpers::lengths_differ(
        theirs as u64,
        ours,
        format!(
            "{what}: another rank contributes {} bytes, {} here",
            theirs as u64 & crate::base::helpers::LEN_BYTES,
            ours as u64 & crate::base::helpers::LEN_BYTES
        ),
    )
}

/// Buffers per rank (a broadcast root may run `NBUF - 1` collectives ahead).
pub const NBUF: u64 = 8;
/// Most lines after the stamp's that a waiter for a post loads at each look at the stamp
/// ([`Seg::wait_all_lines`]): a post of up to 4 more lines (an allreduce of up to 304
/// bytes) is then asked for whole at once; the lines of a longer one are fetched by the
/// reads after the stamp, many at a time by the hardware.
const WIDE_LINES: usize = 4;
/// One buffer: the stamp word, then the data (`DATA` bytes, rounded to whole lines).
const BUF: usize = LINE + DATA;
/// Bytes of a buffer after its stamp word: [`DATA`] and the rest of the stamp's line. The
/// per-rank posts (scatterv's table and blocks, alltoallv's tables) may use all of them,
/// so that a table and a [`DATA`]-byte block fit together.
pub const CAP: usize = BUF - 8;
/// Entries of a rank's lane for broadcasts of at most [`LANE_MAX`] bytes (a root may run
/// `LANE - 1` of them ahead: oversubscribed ranks then switch far less often).
const LANE: u64 = 64;
/// Lines of one lane entry, each a stamp word and [`LANE_DATA`] bytes of payload.
const LANE_LINES: usize = 2;
/// Payload of one lane line (after its stamp).
const LANE_DATA: usize = LINE - 8;
/// Largest broadcast through the lane: a payload of more than one line stamps every line
/// of it, so the receivers poll all its lines at once and fetch them in parallel, instead
/// of one line after the other behind a single stamp.
pub const LANE_MAX: usize = LANE_LINES * LANE_DATA;
/// Largest post of a scatter's blocks through the root's lane ([`Seg::scatter`]): one line.
/// A post of two lines costs more at both ends than the stamp's line and a ring cell (np=2,
/// 64 B, per-rank medians of 10000 calls: root 0.258 against 0.186 us, reader 0.313
/// against 0.226).
const SCATTER_LANE_MAX: usize = LANE_DATA;
/// Bits of a lane stamp below the collective's number: the length of the post (at most
/// [`LANE_MAX`] bytes), so that a reader that expects another length sees it (erroneous
/// arguments of a rooted collective fail instead of waiting for lines never stamped).
const LANE_SHIFT: u32 = 7;
const _: () = assert!(LANE_MAX < 1 << LANE_SHIFT);

/// The stamp of a lane line of collective `k` whose post has `len` bytes: at least
/// `k << LANE_SHIFT` (the value readers wait for) and below that of collective `k + 1`.
fn lane_stamp_of(k: u64, len: usize) -> u64 {
    (k << LANE_SHIFT) | len as u64
}

/// What a rank posted for a blocking collective ([`Seg::wait_post`]).
#[derive(Debug, Clone, Copy)]
enum Posted {
    /// Its lane entry, with the first line's stamp ([`lane_stamp_of`]).
    Lane(u64),
    /// Its buffer (stamped).
    Buf,
}

/// What a non-root rank got from a broadcast on the segment ([`Seg::bcast`],
/// [`Seg::bcast_head`], [`Seg::bcast_cma`]).
#[derive(Debug)]
pub enum Bcast {
    /// Done (the data is in the buffer; the head only: the lengths agree).
    Done,
    /// The root's data has this many bytes, not as many as the buffer (erroneous): nothing
    /// copied, nothing more to do.
    Differs(usize),
    /// The root's head ([`Seg::bcast_head`]) says this many bytes, not as many as the
    /// buffer (erroneous): nothing copied; the caller still takes part in the rest of the
    /// root's broadcast (point to point or through the large region) with a buffer of that
    /// length, so that nobody waits for it.
    Join(usize),
    /// The cross-memory read of the data failed.
    Failed(std::io::Error),
}
/// Buffers per rank of the nonblocking collectives ([`super::nb`]): their own sequence and
/// buffers, apart from the blocking ones', so that blocking and nonblocking collectives are
/// matched each in their own order, as Open MPI's and MPICH's separate tag spaces do (a
/// program may post `MPI_Iallreduce` and then call `MPI_Barrier` while another rank calls
/// the barrier first; mpi4py's fallback of `MPI_Comm_iagree` does exactly that). 8: 64
/// measured faster (a buffer written again 8 nonblocking collectives later still has its
/// lines in the reader's caches: np=2 iscatterv 4 KiB, per-rank medians, root 0.98 against
/// 0.86 us, reader 1.54 against 1.42) but adds 56 buffers (233 KB) to every rank's slot,
/// which every rank maps and touches as those collectives cycle through them.
pub const NB_NBUF: u64 = 8;
const SLOT: usize =
    LINE + NBUF as usize * BUF + LANE as usize * LANE_LINES * LINE + NB_NBUF as usize * BUF;
/// Offset in a slot of the nonblocking collectives' buffers.
const NB_AT: usize = LINE + NBUF as usize * BUF + LANE as usize * LANE_LINES * LINE;
/// Cells of a rank's ring ([`Seg::ring`]): the data of a blocking collective's post that
/// does not fit the lane (a scatter's or a bcast's payload, a scatterv's blocks, an
/// allgather's block) goes to cell `k mod RING_CELLS` instead of the buffer after the stamp,
/// so that a cell is written again only after 127 more collectives (64 with a barrier
/// between every two, as the benchmarks run them). Written again after 8, as the
/// buffers are, its lines are still in the readers' first-level caches from the last read,
/// and the readers then wait longer for the new data: np=2, one root, pinned threads, a
/// barrier between posts, the reader's median from the barrier to its copied 1 KiB 1000
/// cycles with 8 cells, 260-290 with 128; 4 KiB 2100-2260 against 1750-1950 (MPICH's
/// cells go round 64 of them). Each cell is [`BUF`] bytes, line-aligned; its pages are
/// touched only by the collectives that use it.
pub const RING_CELLS: u64 = 128;
/// Most bytes of a scatterv's posted blocks (together) that stay in the root's buffer after
/// its table ([`Seg::scatterv`]); more go to its ring cell ([`RING_CELLS`]). A ring cell is
/// a fresh page for every collective until all of them were used once: each of the first
/// 64 scatterv's of a benchmark (a barrier between them) faulted a page in at the root and
/// at every reader (np=4, 64 B, 20 calls a sample: the first three samples 6-9 us, the
/// rest 2.4-2.9), where the buffers' 8 pages fault once.
const SCATTERV_BUF_MAX: usize = 4 * LINE;
/// Flag of a scatterv table entry ([`Seg::scatterv`]) whose block is in the root's ring cell
/// (its offset there in the low 32 bits, its length above them).
const IN_RING: u64 = 1 << 62;
/// Flag of a scatterv's first table word ([`Seg::scatterv`]) when every other rank's block
/// is posted in the stamp's line: the word then holds one length byte per rank (byte `r`
/// for rank `r`, 0 for the root) and the blocks follow it back to back in rank order, so
/// a reader fetches one line, where the table of words and the blocks after it spread over
/// two (np=4, 16 B: the table ends at byte 40 of the buffer, the blocks at 88).
const COMPACT: u64 = 1 << 61;
/// Most ranks of a compact scatterv (their length bytes lie below [`COMPACT`]'s byte).
const COMPACT_RANKS: usize = 7;
/// Most bytes of a compact scatterv's blocks: the stamp's line after the stamp and the
/// length word.
const COMPACT_MAX: usize = LINE - 16;
/// Bytes of a rank's ring.
const RING_SLOT: usize = RING_CELLS as usize * BUF;
/// Smallest post into a ring cell ([`RING_CELLS`]) or a nonblocking buffer whose lines go
/// to the shared cache once stamped (`cldemote`), and after which the next collective's
/// cell or buffer is asked for (`prefetchw`) at the first wait ([`Seg::ask_ahead`]; the
/// barrier of a benchmark loop, say). A writer otherwise takes each line of a cell back
/// from the readers' caches (they read it the last time round) one store miss after the
/// other while they wait for its stamp, and they then read the lines from its core.
/// Measured (np=2, far vCPUs, two pinned threads modelling the root's ring post and the
/// reader's copy, a barrier between, median reader time from the barrier): 4 KiB 655 ns
/// plain, 365 with the next cell asked for after the stamp, 321 with its lines demoted
/// too; 2 KiB 314 against 104. Rooted posts only (bcast, scatter, scatterv, iscatterv's
/// root): an allgather rank, which writes and reads, was slower with its block demoted
/// (np=2 4 KiB 1.04 times) and with both 1.08 times.
pub const AHEAD_MIN: usize = 1024;

const _: () = assert!(RING_CELLS >= NBUF);

/// Largest block of a rank that a gatherv posts on the segment (all of its buffer after
/// the stamp word, [`CAP`], less the length word): a [`DATA`]-byte block fits, so a 4 KiB
/// gatherv posts and copies like a gather instead of a cross-memory write behind the
/// root's post of its addresses.
pub const V_MAX: usize = CAP - 8;

/// What a non-root rank got from a scatterv on the segment ([`Seg::scatterv`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VBlock {
    /// Its block, this many bytes, copied into the receive buffer.
    Here(usize),
    /// Its block is not on the segment: it comes point to point, with this tag
    /// ([`scatter_tag`] of the collective).
    Elsewhere(i32),
    /// Its block (this many bytes) is longer than the receive buffer (not copied).
    Truncated(usize),
    /// Its block was to come by a cross-memory copy, which failed.
    Failed,
    /// The root's arguments were invalid: it posted no block (see [`ABANDONED`]).
    Abandoned,
}

/// First tag of the point-to-point blocks of the segment's blocking scatters and scatterv
/// ([`Seg::scatter_head`], [`Seg::scatterv`]), then `+ k mod 2^20` of the collective's
/// number `k` ([`scatter_tag`]): a receive posted before the root's post is read
/// ([`Seg::scatter_open`]) can match only that collective's message, never one of a later
/// scatter from a root that ran ahead (a root on the segment's buffers does not wait for
/// its readers). Above the tags of the segment's nonblocking v-collectives (below
/// `2^29 + 2^28 + 2^23 + 2^20`, `nbc::sched`), below `TAG_UB`.
const TAG_SCATTER_BASE: i32 = (1 << 29) + (1 << 28) + (1 << 24);
const _: () = assert!(TAG_SCATTER_BASE + 0xf_ffff <= oxmpi_engine::TAG_UB);

/// The tag of the point-to-point blocks of blocking scatter(v) `k` on the segment (see
/// [`TAG_SCATTER_BASE`]; `k` and `k + 2^20` are never both under way).
#[inline]
pub fn scatter_tag(k: u64) -> i32 {
    TAG_SCATTER_BASE + (k & 0xf_ffff) as i32
}

/// Every entry of the table a scatterv root posts when its arguments are invalid
/// ([`Seg::scatterv`] with no table at the root): the others then fail instead of waiting
/// for a block that never comes. No real entry has both flags and a length this long.
const ABANDONED: u64 = u64::MAX - 1;

/// A communicator's mapped segment.
pub struct Seg {
    /// Start of the mapping (cached out of `_map`).
    base: *mut u8,
    /// The mapping, unmapped when the segment is dropped.
    _map: Mapping,
    rank: usize,
    size: usize,
    /// Our next sequence number of the blocking collectives (collectives on one
    /// communicator are serialized by the MPI rules).
    seq: AtomicU64,
    /// Our last sequence number of the nonblocking collectives (their own count).
    nb_seq: AtomicU64,
    /// Number of large allreduces done.
    last_big: AtomicU64,
    /// Sequence number of the newest nonblocking reduction through the nonblocking large
    /// region ([`large`]).
    nb_large_last: AtomicU64,
    /// A lower bound of every other rank's done word (cached, see the module doc).
    min_done: AtomicU64,
    /// The same of every rank's nonblocking done word.
    min_nb_done: AtomicU64,
    /// The region of large allreduces and reduces, made at the first one (remade larger on
    /// demand), and whether making it failed: they then stay point-to-point.
    big: Mutex<BigState>,
    /// Nonblocking collectives posted and not finished yet (see [`Seg::open_nb`]).
    nb: Mutex<Open>,
    /// Whether some rank yields when idle (the same on every rank): large allreduces then
    /// stay point-to-point, large reduces wait for whole vectors.
    some_yield: bool,
    yield_idle: bool,
    /// Per rank: whether it and we are pinned to different CPUs, each to one, neither
    /// crowded ([`remote_ranks`]: a waiter for it may look again instead of yielding,
    /// [`Seg::remote`]); all false when we are not pinned.
    remote: Vec<bool>,
    /// The other ranks pinned to our CPU when it has at most [`REMOTE_SHARERS`] of them
    /// ([`cpu_mates`]): a barrier's waiter for a rank of the other CPU looks again instead
    /// of yielding while these have arrived too ([`Seg::barrier`]).
    mates: Vec<usize>,
    /// Per rank the CPU it is pinned to plus one, 0 when not pinned to one ([`Seg::cpu`]).
    cpus: Vec<u32>,
    /// The barrier lets rank 0 out first ([`Seg::barrier`]): `coll_sm_barrier_release` is
    /// on on every rank (the same on every rank).
    release: bool,
    /// `coll_sm_spin_first` (see [`Seg::wait_word`]).
    spin_first: u32,
    /// `coll_sm_block_after` (see [`Seg::wait_word`]; 0 when we do not yield when idle).
    block_after: u32,
    /// Whether some rank may sleep in [`Seg::wait_word`] (the same on every rank): every
    /// rank then rings its doorbell after its stores ([`Seg::put_word`]).
    ring: bool,
    /// `coll_sm_sleep_max`: the time limit of one sleep in [`Seg::wait_word`].
    sleep_max: std::time::Duration,
    /// Whether alltoallvs may move blocks between the ranks' buffers by CMA ([`cma`]).
    cma: AtomicU8,
    /// Whether every rank may also write into every other's memory by CMA
    /// (`process_vm_writev`, which a seccomp filter may deny apart from the read): probed
    /// with the read ([`cma`]), the same states.
    push: AtomicU8,
    /// A byte the other ranks' write probe writes into (nothing reads it).
    sink: AtomicU8,
    /// Alltoall(v)s whose blocks we wrote into the receivers' buffers ([`Seg::pushes`]).
    pushes: AtomicU64,
    /// Allgather(v)s on 2 ranks that read the peer's block rather than wrote ours
    /// ([`Seg::pair_reads`]).
    pair_reads: AtomicU64,
    /// The engine whose transports a waiting rank keeps polling.
    eng: &'static Engine,
    /// Bytes of our last post into our ring cell ([`RING_CELLS`]) whose next cell's lines
    /// we have not asked for yet ([`Seg::ask_ahead`]); 0: none.
    ring_ahead: AtomicUsize,
    /// The same of our last post into a nonblocking buffer ([`Seg::posted_nb`]).
    nb_ahead: AtomicUsize,
    /// Cells and buffers asked for in advance ([`Seg::asks_ahead`]).
    asks: AtomicU64,
}

/// The nonblocking collectives of a segment that are not finished: a rank's nonblocking
/// done word is then one below the oldest of them (it may still read that collective's
/// buffers), and `last` is the newest one finished (the done word once none is open).
#[derive(Default)]
struct Open {
    open: Vec<u64>,
    last: u64,
}

/// The large region, if made, and whether making it failed.
type BigState = (Option<Big>, bool);

/// A region of `size` slots of `cap` bytes for large allreduces and reduces.
struct Big {
    /// Start of the mapping (cached out of `_map`).
    base: *mut u8,
    cap: usize,
    /// The mapping, unmapped when the region is dropped.
    _map: Mapping,
}

// SAFETY: the mapping lives as long as the `Big`; access is ordered by the segment's
// sequence words (see `Seg::allreduce_big`).
unsafe impl Send for Big {}

// SAFETY: the mapping lives as long as the `Seg`; concurrent access goes through the
// atomic sequence words with release/acquire ordering (see the module comment).
unsafe impl Send for Seg {}
// SAFETY: as above.
unsafe impl Sync for Seg {}

/// Bytes of the segment of a communicator of `size` ranks: the ranks' slots, then the
/// nonblocking large region ([`large`]).
pub(super) fn seg_len(size: usize) -> usize {
    ring_at(size) + size * RING_SLOT
}

/// Per rank, whether it and rank `me` are pinned to different CPUs, each CPU with at most
/// [`REMOTE_SHARERS`] ranks of the communicator pinned to it ([`Seg::remote`]); `cpus`:
/// per rank the CPU it is pinned to plus one, 0 when not pinned to one.
pub(crate) fn remote_ranks(cpus: &[u32], me: usize) -> Vec<bool> {
    let on = |c: u32| cpus.iter().filter(|&&x| x == c).count();
    let mine = cpus[me];
    let roomy = |c: u32| c != 0 && on(c) <= REMOTE_SHARERS;
    (0..cpus.len())
        .map(|r| r != me && roomy(mine) && roomy(cpus[r]) && cpus[r] != mine)
        .collect()
}

/// The ranks other than `me` pinned to `me`'s CPU, when that CPU has at most
/// [`REMOTE_SHARERS`] ranks of the communicator (else none, and none when `me` is not
/// pinned to one CPU); `cpus` as for [`remote_ranks`].
pub(crate) fn cpu_mates(cpus: &[u32], me: usize) -> Vec<usize> {
    let mine = cpus[me];
    let on = cpus.iter().filter(|&&x| x == mine).count();
    if mine == 0 || on > REMOTE_SHARERS {
        return Vec::new();
    }
    (0..cpus.len())
        .filter(|&r| r != me && cpus[r] == mine)
        .collect()
}

/// Most ranks of a communicator pinned to one CPU for a waiter to look again at the words
/// of those of another CPU without yielding ([`remote_ranks`]): with more, the rank it
/// waits for is often not running (np=8 on 2 CPUs, 4 a CPU: ibcast, iscatter and
/// iscatterv 16 B 1.23-1.26x slower when it looked [`REMOTE_SPIN`] turns), and the ranks
/// of its own CPU that wait for the core are more.
const REMOTE_SHARERS: usize = 2;

/// Turns a waiter that yields when idle looks at a word of a rank pinned to another CPU
/// before it yields, once no rank of its own CPU is awaited ([`Seg::wait_word_remote`];
/// the C API's light-request wait spins as long for [`crate::nbc::light::remote_only`]).
pub const REMOTE_SPIN: u32 = 256;

/// Whether the posts of blocking collective `kind` ([`Seg::begin`]) go to the ranks' ring
/// cells ([`RING_CELLS`]): an allgather's blocks of more than [`LANE_MAX`] bytes (the
/// same on every rank, as the block is).
fn in_ring(kind: &super::SmKind) -> bool {
    matches!(kind, super::SmKind::Allgather { block } if *block > LANE_MAX)
}

/// Offset of the rings ([`RING_CELLS`]) in the segment of `size` ranks: after the
/// nonblocking large region (page-aligned, as that region's end is).
fn ring_at(size: usize) -> usize {
    large::seg_end(size)
}

impl Seg {
    /// The segment over `map` (made by [`super::share`], [`seg_len`] bytes, zeroed) as seen
    /// by `rank` of `size`; `big_ok`: large allreduces may use the large region (large
    /// reduces always may); `release`: the barrier lets rank 0 out first (both the same on
    /// every rank).
    pub(super) fn new(
        map: Mapping,
        rank: usize,
        size: usize,
        (yield_idle, big_ok, release): (bool, bool, bool),
        (block_after, ring): (u32, bool),
        cpus: &[u32],
        eng: &'static Engine,
    ) -> Seg {
        // `cpus`: per rank the CPU it is pinned to plus one, 0 when not pinned to one.
        let remote = remote_ranks(cpus, rank);
        let mates = cpu_mates(cpus, rank);
        Seg {
            base: map.ptr(),
            _map: map,
            rank,
            size,
            seq: AtomicU64::new(0),
            nb_seq: AtomicU64::new(0),
            last_big: AtomicU64::new(0),
            nb_large_last: AtomicU64::new(0),
            min_done: AtomicU64::new(0),
            min_nb_done: AtomicU64::new(0),
            big: Mutex::new((None, false)),
            some_yield: !big_ok,
            nb: Mutex::new(Open::default()),
            yield_idle,
            remote,
            mates,
            cpus: cpus.to_vec(),
            release,
            spin_first: super::params::spin_first(),
            block_after,
            ring,
            sleep_max: super::params::sleep_max(),
            cma: AtomicU8::new(cma::CMA_UNKNOWN),
            push: AtomicU8::new(cma::CMA_UNKNOWN),
            sink: AtomicU8::new(0),
            pushes: AtomicU64::new(0),
            pair_reads: AtomicU64::new(0),
            eng,
            ring_ahead: AtomicUsize::new(0),
            nb_ahead: AtomicUsize::new(0),
            asks: AtomicU64::new(0),
        }
    }

    /// Rank `r`'s doorbell (bytes 32..40 of its first line, see [`super::bell`]): a waiter
    /// that yields when idle sleeps on it until `r` writes a word of its slot.
    fn bell(&self, r: usize) -> Bell<'_> {
        // SAFETY: bytes 32..36 and 36..40 of slot `r`'s first line: inside the mapping,
        // 4-aligned, only accessed atomically (by every rank, through this function).
        unsafe {
            Bell {
                ring: &*(self.base.add(r * SLOT + 32).cast::<AtomicU32>()),
                sleepers: &*(self.base.add(r * SLOT + 36).cast::<AtomicU32>()),
            }
        }
    }
    /// Store `v` into `w`, a word of our slot that others wait for ([`Seg::wait_word`]),
    /// and wake the ranks sleeping on our doorbell, if any: only when some rank may sleep
    /// (the same on every rank; else the fence of the ring would cost every store).
    fn put_word(&self, w: &AtomicU64, v: u64) {
        w.store(v, Ordering::Release);
        if self.ring {
            self.bell(self.rank).ring(&SysFutex(self.sleep_max));
        }
    }
    /// Rank `r`'s done word: it has read everything of the collectives up to this one.
    fn seq_word(&self, r: usize) -> &AtomicU64 {
        // SAFETY: slot `r` is inside the mapping, its first 8 bytes are 8-aligned (the
        // mapping is page-aligned, SLOT a multiple of 64) and only accessed atomically.
        unsafe { &*(self.base.add(r * SLOT).cast::<AtomicU64>()) }
    }
    /// Rank `r`'s done word of the nonblocking collectives (bytes 16..24 of its first line).
    fn nb_done_word(&self, r: usize) -> &AtomicU64 {
        // SAFETY: bytes 16..24 of slot `r`'s first line: inside the mapping, 8-aligned,
        // only accessed atomically.
        unsafe { &*(self.base.add(r * SLOT + 16).cast::<AtomicU64>()) }
    }
    /// Rank `r`'s nonblocking buffer of nonblocking collective `k`: stamp word, then data.
    fn nb_buf(&self, r: usize, k: u64) -> *mut u8 {
        // SAFETY: inside slot `r` of the mapping (the nonblocking buffers end it).
        unsafe {
            self.base
                .add(r * SLOT + NB_AT + (k % NB_NBUF) as usize * BUF)
        }
    }
    fn nb_stamp(&self, r: usize, k: u64) -> &AtomicU64 {
        // SAFETY: the first 8 bytes of a 64-aligned buffer, only accessed atomically.
        unsafe { &*(self.nb_buf(r, k).cast::<AtomicU64>()) }
    }
    /// Rank `r`'s stamp of buffer `k mod NBUF`.
    fn stamp(&self, r: usize, k: u64) -> &AtomicU64 {
        // SAFETY: the first 8 bytes of a buffer inside slot `r` (64-aligned), only
        // accessed atomically.
        unsafe {
            &*(self
                .base
                .add(r * SLOT + LINE + (k % NBUF) as usize * BUF)
                .cast::<AtomicU64>())
        }
    }
    fn data(&self, r: usize, k: u64) -> *mut u8 {
        // SAFETY: inside slot `r` of the mapping, after the buffer's stamp.
        unsafe {
            self.base
                .add(r * SLOT + LINE + (k % NBUF) as usize * BUF + 8)
        }
    }
    /// Rank `r`'s ring cell of blocking collective `k` ([`RING_CELLS`]): [`CAP`] bytes, written
    /// by `r` only under the same rule as its buffer of `k` (every rank done with
    /// `k - NBUF`, [`Seg::reusable`]; the cell's previous collective, `k - RING_CELLS`, is
    /// older still), read by the others once they acquired `r`'s stamp of `k`.
    fn ring(&self, r: usize, k: u64) -> *mut u8 {
        // SAFETY: inside rank `r`'s ring, which ends the mapping (`seg_len`).
        unsafe {
            self.base
                .add(ring_at(self.size) + r * RING_SLOT + (k % RING_CELLS) as usize * BUF)
        }
    }
    fn next(&self) -> u64 {
        // Not a read-modify-write (a locked instruction per collective): collectives on
        // one communicator never run concurrently (MPI rules), so nobody else updates it.
        let k = self.seq.load(Ordering::Relaxed) + 1;
        self.seq.store(k, Ordering::Relaxed);
        k
    }
    /// We have read everything of collective `k` (a blocking one).
    fn finish(&self, k: u64) {
        self.put_word(self.seq_word(self.rank), k);
    }
    /// Store our nonblocking done word: one below the oldest open nonblocking collective,
    /// else the newest finished one (never decreasing: they are opened in increasing order).
    fn publish(&self, g: &Open) {
        let v = g.open.iter().min().map_or(g.last, |&m| m - 1);
        self.nb_done_word(self.rank).store(v, Ordering::Release);
    }
    /// Open a nonblocking collective: its sequence number among the nonblocking
    /// collectives (call in MPI's order of them), noted open until [`Seg::close_nb`] (our
    /// nonblocking done word stays below it meanwhile, whatever finishes later).
    pub(crate) fn open_nb(&self) -> u64 {
        let (k, mut g) = self.take_nb();
        g.open.push(k);
        k
    }
    /// The next nonblocking sequence number, with the open list locked (its lower bound
    /// refreshed from our done word when nothing is open): the start of [`Seg::open_nb`],
    /// [`Seg::barrier_nb`] and [`Seg::pass_nb`].
    fn take_nb(&self) -> (u64, std::sync::MutexGuard<'_, Open>) {
        // Not a read-modify-write, as in `next`: nonblocking collectives on one
        // communicator are started in order by one thread at a time.
        let k = self.nb_seq.load(Ordering::Relaxed) + 1;
        self.nb_seq.store(k, Ordering::Relaxed);
        let mut g = self.nb.lock().unwrap_or_else(|p| p.into_inner());
        if g.open.is_empty() {
            g.last = self.nb_done_word(self.rank).load(Ordering::Relaxed);
        }
        (k, g)
    }
    /// Open a nonblocking barrier ([`Seg::open_nb`]), post it and, if every rank has
    /// stamped it already, close it again, all under one lock of the open list (where
    /// opening and closing apart take it twice): `None` if it ended so, else its sequence
    /// number and whether it was posted (it stays open until [`Seg::close_nb`]).
    pub(crate) fn barrier_nb(&self) -> Option<(u64, bool)> {
        let (k, mut g) = self.take_nb();
        // A barrier posts no bytes: only the stamp.
        let posted = self.try_post_with(k, |_| {});
        if posted && (0..self.size).all(|r| self.stamped(r, k)) {
            g.last = g.last.max(k);
            self.publish(&g);
            return None;
        }
        g.open.push(k);
        Some((k, posted))
    }
    /// Take the next nonblocking sequence number for a collective that moves nothing
    /// through the segment (a 2-rank iscatter by message, `CollComm::iscatter_pair_msg`)
    /// and close it at once, under one lock: its number only keeps every rank's sequence
    /// in step and names its messages' tag; a rank of another path at the same number
    /// (an erroneous length) sees that we took none of the segment's ([`Seg::passed`]).
    pub(crate) fn pass_nb(&self) -> u64 {
        let (k, mut g) = self.take_nb();
        g.last = g.last.max(k);
        self.publish(&g);
        k
    }
    /// Open the next nonblocking collective, post it (`write` gets the start of our
    /// buffer's [`CAP`] bytes; about `n` data bytes, [`Seg::posted_nb`]) and close it again,
    /// all under one lock of the open list, when our buffer of it is free now: for a rank
    /// whose part ends with its post (a small scatterv's root). False, with nothing taken
    /// (no sequence number, nothing written), while some rank may still read that buffer
    /// for an older collective: the caller then opens it as any other ([`Seg::open_nb`]).
    pub(crate) fn post_closed_nb(&self, n: usize, write: impl FnOnce(*mut u8)) -> bool {
        // Whether the buffer is free only grows until we post it: looked at before the
        // number is taken.
        if !self.nb_free(self.nb_seq.load(Ordering::Relaxed) + 1) {
            return false;
        }
        let (k, mut g) = self.take_nb();
        // Our own nonblocking buffer of `k`, free (checked above) and read by nobody until
        // we stamp it.
        write(self.nb_buf(self.rank, k).wrapping_add(8));
        self.nb_stamp(self.rank, k).store(k, Ordering::Release);
        self.posted_nb(k, n);
        g.last = g.last.max(k);
        self.publish(&g);
        true
    }
    /// Stamp our buffer of nonblocking collective `k`, which we passed ([`Seg::pass_nb`]),
    /// with the first word `first`, for a rank of another path that waits for it (an
    /// erroneous call): false while the buffer may still be read for `k - NB_NBUF` (try
    /// again); true, with nothing written, when we reused it for a later collective
    /// already (then nobody waits for it: that needed every rank done with `k`).
    pub(crate) fn stamp_passed(&self, k: u64, first: u64) -> bool {
        if self.nb_stamp(self.rank, k).load(Ordering::Relaxed) > k {
            return true;
        }
        // SAFETY: `b` is our buffer's `CAP >= 8` bytes.
        self.try_post_with(k, |b| unsafe { b.cast::<u64>().write_unaligned(first) })
    }
    /// Whether rank `r` stamped its buffer of nonblocking collective `k` itself (acquire),
    /// not a later one (a rank that passed `k`, [`Seg::pass_nb`], may find a collective
    /// `k + NB_NBUF` of another rank's there, which [`Seg::stamped`] would count).
    pub(crate) fn stamped_exactly(&self, r: usize, k: u64) -> bool {
        self.nb_stamp(r, k).load(Ordering::Acquire) == k
    }
    /// Whether rank `r` has finished nonblocking collective `k` (its done word reached it)
    /// without stamping its buffer of it: it took no path through the segment there
    /// ([`Seg::pass_nb`]). Call while `k` is open here (its buffer of `k` then cannot
    /// have been reused).
    pub(crate) fn passed(&self, r: usize, k: u64) -> bool {
        // The done word first (acquire): a rank that stamped `k` did so before it
        // finished it, so its stamp is then visible.
        self.nb_done_word(r).load(Ordering::Acquire) >= k && !self.stamped(r, k)
    }
    /// Nonblocking collective `k` has read everything it needed (any thread).
    pub(crate) fn close_nb(&self, k: u64) {
        let mut g = self.nb.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = g.open.iter().position(|&o| o == k) {
            g.open.swap_remove(i);
        }
        g.last = g.last.max(k);
        self.publish(&g);
    }
    /// Whether rank `r` has stamped its buffer of nonblocking collective `k` (acquire: its
    /// data is then visible).
    pub(crate) fn stamped(&self, r: usize, k: u64) -> bool {
        self.nb_stamp(r, k).load(Ordering::Acquire) >= k
    }
    /// Post `src` (at most `DATA` bytes) as our data of nonblocking collective `k` without
    /// waiting: false (nothing written) while some rank, ourselves included, may still read
    /// the buffer for nonblocking collective `k - NB_NBUF`.
    ///
    /// # Safety
    /// `src` is valid for reads (it may be the caller's memory, not yet handed over).
    pub(crate) unsafe fn try_post(&self, k: u64, src: *const u8, n: usize) -> bool {
        debug_assert!(n <= DATA);
        if !self.nb_free(k) {
            return false;
        }
        // SAFETY: our own nonblocking buffer of `k` (data after the stamp line), read by
        // nobody until we stamp it and no longer by anybody for `k - NB_NBUF` (checked
        // above); `src` per the caller's contract.
        unsafe { std::ptr::copy_nonoverlapping(src, self.nb_buf(self.rank, k).add(8), n) };
        self.nb_stamp(self.rank, k).store(k, Ordering::Release);
        true
    }
    /// [`Seg::try_post`] with the data written by `write`, given the start of our buffer's
    /// [`CAP`] bytes (a gatherv block with its length, a scatterv or alltoallv table).
    pub(crate) fn try_post_with(&self, k: u64, write: impl FnOnce(*mut u8)) -> bool {
        if !self.nb_free(k) {
            return false;
        }
        // Our own nonblocking buffer of `k`, free (checked above) and read by nobody until
        // we stamp it.
        write(self.nb_buf(self.rank, k).wrapping_add(8));
        self.nb_stamp(self.rank, k).store(k, Ordering::Release);
        true
    }
    /// [`Seg::try_post_with`] of a post of about `n` data bytes ([`Seg::posted_nb`]).
    pub(crate) fn try_post_with_n(&self, k: u64, n: usize, write: impl FnOnce(*mut u8)) -> bool {
        let posted = self.try_post_with(k, write);
        if posted {
            self.posted_nb(k, n);
        }
        posted
    }
    /// Whether our nonblocking buffer of collective `k` may be written: no rank, ourselves
    /// included, may still read it for nonblocking collective `k - NB_NBUF`.
    fn nb_free(&self, k: u64) -> bool {
        let need = k.saturating_sub(NB_NBUF);
        if self.min_nb_done.load(Ordering::Relaxed) < need {
            let low = (0..self.size)
                .map(|r| self.nb_done_word(r).load(Ordering::Acquire))
                .min()
                .unwrap_or(need);
            if low < need {
                return false;
            }
            self.min_nb_done.store(low, Ordering::Relaxed);
        }
        true
    }
    /// Rank `r`'s data of collective `k`, `n` bytes from `off`, for a nonblocking
    /// collective.
    ///
    /// # Safety
    /// `r` stamped nonblocking collective `k` ([`Seg::stamped`]), `k` is still open here
    /// (the buffer is then unchanged), and `off + n <= CAP`.
    pub(crate) unsafe fn peer_nb(&self, r: usize, k: u64, off: usize, n: usize) -> &[u8] {
        // SAFETY: caller contract; the view is read only.
        unsafe { std::slice::from_raw_parts(self.nb_buf(r, k).add(8 + off).cast_const(), n) }
    }
    /// Word `i` of rank `r`'s data of nonblocking collective `k` as an atomic: a mark its
    /// owner sets after stamping (an alltoallv's "done with the others' buffers").
    ///
    /// # Safety
    /// `8 (i + 1) <= CAP`; once `r` stamped `k`, the word is only accessed atomically while
    /// `k` is open anywhere.
    pub(crate) unsafe fn nb_word(&self, r: usize, k: u64, i: usize) -> &AtomicU64 {
        // SAFETY: caller contract; inside the buffer's data, which starts 8 bytes into a
        // 64-aligned buffer, so the word is 8-aligned.
        unsafe { &*(self.nb_buf(r, k).add(8 + 8 * i).cast::<AtomicU64>()) }
    }
    /// Rank `r`'s word "done reading the large region up to large allreduce `k`".
    fn done_word(&self, r: usize) -> &AtomicU64 {
        // SAFETY: bytes 8..16 of slot `r`'s first line: inside the mapping, 8-aligned,
        // only accessed atomically.
        unsafe { &*(self.base.add(r * SLOT + 8).cast::<AtomicU64>()) }
    }
    /// Wait until `w` reaches `k`; returns its value.
    ///
    /// While waiting it polls the engine's transports: a rank in a collective must
    /// keep its pending point-to-point operations going (a peer may be waiting for the
    /// data of our earlier `MPI_Isend` before it enters this collective).
    ///
    /// When ranks yield when idle (more ranks than cores), each turn polls the transports
    /// and yields the core, after `coll_sm_spin_first` (default 0) turns that only look at
    /// the word (for a writer running on the other core right then; under load, looking
    /// first was measured slower, hence off by default); after `coll_sm_block_after`
    /// yields it sleeps instead until the word's owner writes a word of its slot (its
    /// doorbell, [`super::bell`]), at most `coll_sm_sleep_max` at a time, polling the
    /// transports before each sleep: the ranks that have work get the cores.
    fn wait_word(&self, w: &AtomicU64, k: u64) -> u64 {
        let v = w.load(Ordering::Acquire);
        if v >= k {
            return v;
        }
        let owner = (w.as_ptr() as usize - self.base as usize) / SLOT;
        debug_assert!(owner < self.size, "a waited word lies in a rank's slot");
        self.wait_until(owner, self.spin_first, || w.load(Ordering::Acquire) >= k);
        w.load(Ordering::Acquire)
    }
    /// [`Seg::wait_word`] for a word of rank `owner` (its slot's) when no rank of our CPU is
    /// awaited any more: a rank pinned to another CPU ([`Seg::remote`]) runs there, so we
    /// look [`REMOTE_SPIN`] turns before we yield ours (to a rank that has nothing to do
    /// for us, and yields back).
    fn wait_word_remote(&self, owner: usize, w: &AtomicU64, k: u64) -> u64 {
        let v = w.load(Ordering::Acquire);
        if v >= k {
            return v;
        }
        self.wait_until(owner, self.first_turns(owner), || {
            w.load(Ordering::Acquire) >= k
        });
        w.load(Ordering::Acquire)
    }
    /// The turns a waiter for a word of rank `owner` looks before it yields (when ranks
    /// yield when idle): [`REMOTE_SPIN`] at least for a rank pinned to the other CPU
    /// ([`Seg::remote`]), else `coll_sm_spin_first`.
    fn first_turns(&self, owner: usize) -> u32 {
        match self.remote[owner] {
            true => self.spin_first.max(REMOTE_SPIN),
            false => self.spin_first,
        }
    }
    /// The waiting of [`Seg::wait_word`] until `ready`, which looks only at words of rank
    /// `owner`'s slot (whose doorbell a sleeping waiter sleeps on); a rank that yields when
    /// idle looks `spin_first` turns before it yields.
    fn wait_until(&self, owner: usize, spin_first: u32, ready: impl Fn() -> bool) {
        self.wait_until_or_look(owner, spin_first, ready, || false);
    }
    /// [`Seg::wait_until`] that also looks again instead of yielding, at most
    /// [`REMOTE_SPIN`] turns in all, at each turn where `look` says so (the ranks of our CPU
    /// wait too, for a rank of the other CPU: [`Seg::barrier`]).
    fn wait_until_or_look(
        &self,
        owner: usize,
        spin_first: u32,
        ready: impl Fn() -> bool,
        look: impl Fn() -> bool,
    ) {
        let (mut spins, mut yields, mut looked) = (0u32, 0u32, 0u32);
        loop {
            if ready() {
                return;
            }
            if spins == 0 {
                self.refresh_done();
                self.ask_ahead();
            }
            if self.block_after != 0 && yields >= self.block_after {
                self.eng.progress();
                self.bell(owner)
                    .sleep(&ready, &SysFutex(self.sleep_max), |_| {});
                continue;
            }
            let mut yielding = self.yield_idle && spins >= spin_first;
            if yielding && looked < REMOTE_SPIN && look() {
                yielding = false;
                looked += 1;
            }
            yields += u32::from(yielding);
            // A progress call costs far more than a look at the word: poll the
            // transports every 32nd turn (and at every yield) only.
            if spins % 32 == 31 || yielding {
                self.eng.progress();
            }
            spins = spins.wrapping_add(1);
            if yielding || spins % 4096 == 0 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
    /// [`Seg::wait_all`] for a barrier (every rank stamps `k`, then waits): the ranks of
    /// our CPU (every rank, not pinned) first, then those of the other CPU, looked at
    /// [`REMOTE_SPIN`] turns before we yield ([`Seg::wait_word_remote`]): ours have stamped
    /// `k` by then and wait for us or that CPU's ranks, so a yield would only hand them our
    /// CPU to look and yield back.
    fn wait_all_mates_first(&self, k: u64) {
        let others = |remote: bool| {
            (0..self.size).filter(move |&r| r != self.rank && self.remote[r] == remote)
        };
        for r in others(false).chain(others(true)) {
            self.wait_word_remote(r, self.stamp(r, k), k);
        }
    }
    /// Whether every other rank pinned to our CPU (`mates`, [`cpu_mates`]) has stamped blocking
    /// collective `k`.
    fn mates_stamped(&self, k: u64) -> bool {
        self.mates
            .iter()
            .all(|&r| self.stamp(r, k).load(Ordering::Acquire) >= k)
    }
    /// After our post of `n` bytes at `d` (our ring cell of a blocking collective), stamped:
    /// see [`AHEAD_MIN`].
    #[inline]
    fn posted_ring(&self, d: *const u8, n: usize) {
        if n >= AHEAD_MIN {
            demote_lines(d, n);
            self.ring_ahead.store(n, Ordering::Relaxed);
        }
    }
    /// After our post of `n` data bytes for nonblocking collective `k`, stamped: see
    /// [`AHEAD_MIN`] (the buffer's stamp line too).
    #[inline]
    pub(crate) fn posted_nb(&self, k: u64, n: usize) {
        if n >= AHEAD_MIN {
            demote_lines(self.nb_buf(self.rank, k), 8 + n.min(CAP));
            self.nb_ahead.store(n.min(CAP), Ordering::Relaxed);
        }
    }
    /// While we wait anyway (the first look of [`Seg::wait_until`] that finds nothing):
    /// after a large post (see [`AHEAD_MIN`]), ask for the lines of the next collective's
    /// ring cell or nonblocking buffer, once.
    #[inline]
    fn ask_ahead(&self) {
        let n = self.ring_ahead.load(Ordering::Relaxed);
        if n != 0 {
            self.ring_ahead.store(0, Ordering::Relaxed);
            prefetch_lines(
                self.ring(self.rank, self.seq.load(Ordering::Relaxed) + 1),
                n,
            );
            self.count_ask();
        }
        let n = self.nb_ahead.load(Ordering::Relaxed);
        if n != 0 {
            self.nb_ahead.store(0, Ordering::Relaxed);
            let next = self.nb_seq.load(Ordering::Relaxed) + 1;
            prefetch_lines(self.nb_buf(self.rank, next), 8 + n);
            self.count_ask();
        }
    }
    #[cold]
    fn count_ask(&self) {
        // Not a read-modify-write: only this rank's waits ask (a count lost between two
        // threads' waits would only skew a diagnostic).
        let n = self.asks.load(Ordering::Relaxed);
        self.asks.store(n + 1, Ordering::Relaxed);
    }
    /// How many ring cells and nonblocking buffers we asked for in advance after rooted
    /// posts of at least [`AHEAD_MIN`] bytes (for tests and diagnostics).
    pub fn asks_ahead(&self) -> u64 {
        self.asks.load(Ordering::Relaxed)
    }
    /// Wait for every other rank's stamp of collective `k`.
    fn wait_all(&self, k: u64) {
        for r in (0..self.size).filter(|&r| r != self.rank) {
            self.wait_word(self.stamp(r, k), k);
        }
    }
    /// [`Seg::wait_all`] for posts that span the first `len` bytes of each rank's buffer
    /// (stamp word included) and are read whole right after: each look at a rank's stamp
    /// also loads a word of each further line of its post (at most [`WIDE_LINES`] of
    /// them, [`Seg::touch_post`]), so that those lines are asked for together with the
    /// stamp's, and the data is in when the stamp is. Otherwise the wait ends on the
    /// stamp's line and only then asks for the next one, a second transfer between the
    /// cores in a row (np=2 allreduce, far vCPUs: 16 B, one line, 0.43 us; 64 B, two
    /// lines, 0.68).
    fn wait_all_lines(&self, k: u64, len: usize) {
        let lines = len.div_ceil(LINE).min(1 + WIDE_LINES);
        for r in (0..self.size).filter(|&r| r != self.rank) {
            let w = self.stamp(r, k);
            let ready = || {
                let stamped = w.load(Ordering::Acquire) >= k;
                self.touch_post(r, k, lines);
                stamped
            };
            if !ready() {
                self.wait_until(r, self.spin_first, ready);
            }
        }
    }
    /// Load (and drop) the first word of lines `1..lines` of rank `r`'s buffer of
    /// collective `k`: the lines' transfers start now, alongside a look at the stamp's.
    #[inline(always)]
    fn touch_post(&self, r: usize, k: u64, lines: usize) {
        debug_assert!(lines * LINE <= BUF);
        let b = self.stamp(r, k).as_ptr().cast::<u8>();
        for i in 1..lines {
            // SAFETY: the first word of line `i` of rank `r`'s buffer of `k` (`i * LINE <
            // BUF`): inside the mapping, 8-aligned (buffers are 64-aligned), read atomically
            // here; the value is dropped, so a post being written meanwhile does no harm.
            let w = unsafe { &*(b.add(i * LINE).cast::<AtomicU64>()) };
            std::hint::black_box(w.load(Ordering::Relaxed));
        }
    }
    /// Wait until our buffer for collective `k` is free (every rank is done with
    /// collective `k - NBUF`), copy `src` into it and stamp it.
    fn post(&self, k: u64, src: &[u8]) {
        self.post_in(k, src, false);
    }
    /// [`Seg::post`] with the data in our buffer (at most [`DATA`] bytes) or, `ring`, in
    /// our ring cell of `k` ([`RING_CELLS`]; at most [`CAP`] bytes); the stamp is where it
    /// always is.
    fn post_in(&self, k: u64, src: &[u8], ring: bool) {
        debug_assert!(src.len() <= if ring { CAP } else { DATA });
        self.reusable(k.saturating_sub(NBUF));
        let dst = if ring {
            self.ring(self.rank, k)
        } else {
            self.data(self.rank, k)
        };
        // SAFETY: our own buffer or ring cell of collective `k`, read by nobody until we
        // stamp `k` and no longer by anybody for `k - NBUF` (the ring cell's: for
        // `k - RING_CELLS <= k - NBUF`), waited for above.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len()) };
        self.put_word(self.stamp(self.rank, k), k);
    }
    /// Line `i` (below [`LANE_LINES`]) of rank `r`'s lane entry of collective `k`: stamp
    /// word, then `LANE_DATA` bytes.
    fn lane(&self, r: usize, k: u64, i: usize) -> *mut u8 {
        debug_assert!(i < LANE_LINES);
        // SAFETY: inside slot `r` of the mapping (the lane follows the buffers).
        unsafe {
            self.base.add(
                r * SLOT
                    + LINE
                    + NBUF as usize * BUF
                    + ((k % LANE) as usize * LANE_LINES + i) * LINE,
            )
        }
    }
    fn lane_stamp(&self, r: usize, k: u64, i: usize) -> &AtomicU64 {
        // SAFETY: the first 8 bytes of a 64-aligned lane line, only accessed atomically.
        unsafe { &*(self.lane(r, k, i).cast::<AtomicU64>()) }
    }
    /// Write `data` (at most [`LANE_MAX`] bytes, at least one) into our lane entry of
    /// collective `k`, `LANE_DATA` bytes per line, each line stamped ([`lane_stamp_of`]: the
    /// collective and the post's length), the first line last.
    fn lane_post(&self, k: u64, data: &[u8]) {
        debug_assert!(!data.is_empty() && data.len() <= LANE_MAX);
        self.reusable(k.saturating_sub(LANE));
        let v = lane_stamp_of(k, data.len());
        for (i, part) in data.chunks(LANE_DATA).enumerate().rev() {
            // SAFETY: the payload of line `i` of our lane entry of `k`: nobody reads it
            // until we stamp it, nor for collective `k - LANE` any more (waited above);
            // `part` has at most `LANE_DATA` bytes.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    part.as_ptr(),
                    self.lane(self.rank, k, i).add(8),
                    part.len(),
                )
            };
            self.put_word(self.lane_stamp(self.rank, k, i), v);
        }
    }
    /// Copy bytes `at..at + out.len()` of `r`'s lane payload of collective `k` (posted by
    /// [`Seg::lane_post`], `total` bytes as we expect it) into `out`, once the lines holding
    /// them are stamped: polled together (their transfers overlap) for a while, then the
    /// first line, stamped last, or `r`'s buffer stamp, whichever comes ([`Seg::wait_post`];
    /// the first line looked at once first, the waiting out of line: [`Seg::lane_wait`]).
    /// `None` when copied; else (nothing copied) what `r` posted instead: a lane post of
    /// another length, or its buffer (another path, from arguments that differ from ours).
    fn lane_read(
        &self,
        r: usize,
        k: u64,
        (at, total): (usize, usize),
        out: &mut [u8],
    ) -> Option<Posted> {
        let n = out.len();
        debug_assert!(at + n <= total && total <= LANE_MAX);
        let want = lane_stamp_of(k, total);
        // The post is often in already: its first line, stamped last, says so.
        if self.lane_stamp(r, k, 0).load(Ordering::Acquire) != want {
            if let Some(p) = self.lane_wait(r, k, at..at + n, want) {
                return Some(p);
            }
        }
        // SAFETY: the first line is stamped last, with a post of `total >= at + n` bytes
        // (acquired); we have not finished `k`.
        unsafe { self.lane_copy(r, k, at, out) };
        None
    }
    /// The waiting of [`Seg::lane_read`] for `r`'s post of `k` (the first line's stamp was
    /// not `want` at the first look): `None` once the first line has that stamp, else what
    /// `r` posted instead.
    #[cold]
    #[inline(never)]
    fn lane_wait(
        &self,
        r: usize,
        k: u64,
        bytes: std::ops::Range<usize>,
        want: u64,
    ) -> Option<Posted> {
        let (at, n) = (bytes.start, bytes.len());
        if !self.yield_idle {
            let lines = at / LANE_DATA..(at + n).div_ceil(LANE_DATA);
            let ready = || {
                lines
                    .clone()
                    .all(|i| self.lane_stamp(r, k, i).load(Ordering::Acquire) >= want)
            };
            for _ in 0..256 {
                if ready() {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        match self.wait_post(r, k, true) {
            Posted::Lane(v) if v == want => None,
            p => Some(p),
        }
    }
    /// The copy of [`Seg::lane_read`]: bytes `at..at + out.len()` of `r`'s lane payload of
    /// collective `k`.
    ///
    /// # Safety
    /// We acquired `r`'s first line of `k` with the stamp of a post of at least
    /// `at + out.len()` bytes (the first line is stamped last: every line of it is in), and
    /// we have not finished `k`.
    #[inline]
    unsafe fn lane_copy(&self, r: usize, k: u64, at: usize, out: &mut [u8]) {
        let n = out.len();
        let mut done = 0;
        while done < n {
            let (line, off) = ((at + done) / LANE_DATA, (at + done) % LANE_DATA);
            let m = (LANE_DATA - off).min(n - done);
            // SAFETY: `r` stamped line `line` of its entry for `k` (caller contract: the
            // post holds these bytes, all its lines are in); it is not rewritten before we
            // finish `k`; `off + m <= LANE_DATA`.
            let src = unsafe { std::slice::from_raw_parts(self.lane(r, k, line).add(8 + off), m) };
            out[done..done + m].copy_from_slice(src);
            done += m;
        }
    }
    /// Wait for rank `r`'s post of blocking collective `k`: its lane entry's first line
    /// ([`Posted::Lane`], with its stamp) or its buffer's stamp ([`Posted::Buf`]), whichever
    /// comes; `lane_first` says which to look at first (the one the caller expects). A
    /// rooted collective's root posts one of them, so that a reader whose arguments put it
    /// on the other path (erroneous) sees what the root did instead of waiting forever.
    ///
    /// Inlined: one look at the expected stamp (the post is often there already); the
    /// waiting, and the look at the other stamp, are out of line ([`Seg::wait_post_slow`]).
    #[inline]
    fn wait_post(&self, r: usize, k: u64, lane_first: bool) -> Posted {
        if lane_first {
            let v = self.lane_stamp(r, k, 0).load(Ordering::Acquire);
            if v >= k << LANE_SHIFT {
                return Posted::Lane(v);
            }
        } else if self.stamp(r, k).load(Ordering::Acquire) >= k {
            return Posted::Buf;
        }
        self.wait_post_slow(r, k, lane_first)
    }
    /// [`Seg::wait_post`] once the expected stamp was not there at the first look.
    #[cold]
    #[inline(never)]
    fn wait_post_slow(&self, r: usize, k: u64, lane_first: bool) -> Posted {
        let (lane, buf, lk) = (self.lane_stamp(r, k, 0), self.stamp(r, k), k << LANE_SHIFT);
        let look_lane = || {
            let v = lane.load(Ordering::Acquire);
            (v >= lk).then_some(Posted::Lane(v))
        };
        let look_buf = || (buf.load(Ordering::Acquire) >= k).then_some(Posted::Buf);
        let look = || match lane_first {
            true => look_lane().or_else(look_buf),
            false => look_buf().or_else(look_lane),
        };
        if let Some(p) = look() {
            return p;
        }
        // The root of a rooted collective pinned to the other CPU is running there and
        // posts right after the barrier that let us in: look as long as for any rank of
        // that CPU before we yield ours to a rank that would only enter the collective
        // before the post too (np=4 pinned, scatter and bcast 16 B: 0.69-0.84 of the time).
        self.wait_until(r, self.first_turns(r), || look().is_some());
        look().expect("a post seen ready stays")
    }
    /// The first word of rank `r`'s buffer of collective `k` (a rooted post's kind).
    ///
    /// # Safety
    /// As for [`Seg::peer`] (`r` stamped its buffer of `k`).
    unsafe fn post_word(&self, r: usize, k: u64, i: usize) -> u64 {
        // SAFETY: caller contract; word `i` of at most the table's, within `CAP`.
        unsafe { self.data(r, k).cast::<u64>().add(i).read_unaligned() }
    }
    /// While we wait anyway (the first look of [`Seg::wait_until`] that finds nothing),
    /// refresh the cached lower bound of the done words ([`Seg::reusable`]) when the post
    /// of our next collective would otherwise have to: reading another rank's done word is
    /// a cache-line transfer from its core (a far vCPU placement's probe round trip, two
    /// transfers, is 600-700 ns), once every `NBUF - 1` collectives or so, and made at the
    /// post it delayed the post by as much, on the critical path of the ranks waiting for
    /// it. Done words only grow, so any value read is a lower bound still; nothing waits
    /// here.
    #[inline]
    fn refresh_done(&self) {
        let need = (self.seq.load(Ordering::Relaxed) + 1).saturating_sub(NBUF);
        let old = self.min_done.load(Ordering::Relaxed);
        if old >= need {
            return;
        }
        // Acquire, as `reusable`'s waits: a rank's reads of the buffers up to its done
        // word happen before our later writes into them.
        let low = (0..self.size)
            .map(|r| self.seq_word(r).load(Ordering::Acquire))
            .min()
            .unwrap_or(old);
        if low > old {
            self.min_done.store(low, Ordering::Relaxed);
        }
    }
    /// Wait until every rank's done word has reached `need`.
    fn reusable(&self, need: u64) {
        if self.min_done.load(Ordering::Relaxed) < need {
            let mut low = u64::MAX;
            for r in 0..self.size {
                low = low.min(self.wait_word(self.seq_word(r), need));
            }
            self.min_done.store(low, Ordering::Relaxed);
        }
    }
    /// Rank `r`'s buffer of collective `k`, `n` bytes from `off`.
    ///
    /// # Safety
    /// `r`'s stamp of `k` was acquired by us and we have not finished `k` (the buffer
    /// is then unchanged); `off + n <= CAP`.
    unsafe fn peer(&self, r: usize, k: u64, off: usize, n: usize) -> &[u8] {
        // SAFETY: caller contract; the view is read only.
        unsafe { std::slice::from_raw_parts(self.data(r, k).add(off).cast_const(), n) }
    }
    /// [`Seg::peer`] of rank `r`'s ring cell of `k` ([`Seg::post_in`]).
    ///
    /// # Safety
    /// As for [`Seg::peer`].
    unsafe fn peer_ring(&self, r: usize, k: u64, off: usize, n: usize) -> &[u8] {
        // SAFETY: caller contract; the view is read only.
        unsafe { std::slice::from_raw_parts(self.ring(r, k).add(off).cast_const(), n) }
    }

    /// Whether a barrier lets rank 0 out first ([`Seg::barrier`] with `again` false):
    /// `coll_sm_barrier_release` is on on every rank.
    #[inline]
    pub fn barrier_releases(&self) -> bool {
        self.release
    }

    /// Number of ranks.
    #[inline]
    pub fn size(&self) -> usize {
        self.size
    }

    /// Our rank.
    #[inline]
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// Whether rank `r` and we are each pinned to one CPU, not the same, neither with more
    /// than [`REMOTE_SHARERS`] ranks of the communicator ([`remote_ranks`]): while we wait only
    /// for such ranks, they run on their own CPU, and a yield of ours would hand our CPU
    /// to a rank that may have nothing to do but wait (see `light_wait` of the C API).
    #[inline]
    pub fn remote(&self, r: usize) -> bool {
        self.remote[r]
    }

    /// The CPU rank `r` is pinned to plus one, 0 when it is not pinned to one CPU (the same
    /// on every rank).
    #[inline]
    pub fn cpu(&self, r: usize) -> u32 {
        self.cpus[r]
    }

    /// Barrier. When `coll_sm_barrier_release` is on, rank 0 waits for every other rank's
    /// arrival stamp and then stamps its own as the release the others wait for: rank 0
    /// leaves first, one handoff before the others, whichever rank came last. A program
    /// that times a collective rooted at rank 0 after a barrier (as the standard suites
    /// do) then finds the root already at work when a receiver starts its clock, as with
    /// MPICH's barrier, instead of the receiver waiting for the root to leave the barrier.
    /// So also when ranks yield the core (more ranks than cores), as with Open MPI's
    /// barrier there: a receiver that left first waited for the root to be scheduled, and
    /// yielded its core meanwhile to a rank that shares it (np=4 on 2 cores, 16 B, medians
    /// of 7 rounds: scatterv 2.17 to 1.67 us, bcast 2.04 to 1.56, ibcast 2.31 to 1.80).
    /// Otherwise every rank posts its stamp and waits for all the others' ([`Seg::meet`]),
    /// and so does a barrier right after a barrier (`again`, which the caller knows from the
    /// collectives counted on the communicator, [`crate::base::stats::last_was`]): nothing
    /// rooted follows the first, so rank 0's head start would gain nothing but cost the
    /// others a handoff (barriers back to back, as a barrier benchmark runs them: one
    /// handoff instead of two). Ranks that decide differently still hold each other until
    /// all arrived (rank 0 stamps only after every arrival or before waiting for all, the
    /// others wait for rank 0's stamp at least), so `again` only changes who leaves first.
    #[inline]
    pub fn barrier(&self, again: bool) {
        if !self.release || again {
            return self.meet();
        }
        let k = self.next();
        if self.rank == 0 {
            self.wait_all_mates_first(k);
            self.post(k, &[]);
        } else {
            self.post(k, &[]);
            // Rank 0 pinned to the other CPU: while the ranks of ours have arrived too
            // (they wait for its release as we do), look again rather than yield our CPU
            // to one of them, which would look and yield back (np=4 cyclic: ranks 1 and 3
            // took turns so until the release, and the first to run after it saw it late).
            let w = self.stamp(0, k);
            if self.remote[0] {
                self.wait_until_or_look(
                    0,
                    self.spin_first,
                    || w.load(Ordering::Acquire) >= k,
                    || self.mates_stamped(k),
                );
            } else {
                self.wait_word(w, k);
            }
        }
        self.finish(k);
    }

    /// Barrier of equals: every rank posts its stamp and waits for every other rank's
    /// (those of our CPU first, [`Seg::wait_all_mates_first`]).
    fn meet(&self) {
        let k = self.next();
        self.post(k, &[]);
        self.wait_all_mates_first(k);
        self.finish(k);
    }

    /// Broadcast of `buf` (1 to `DATA` bytes) from `root`: through its lane up to
    /// [`LANE_MAX`] bytes (its stamps hold the length), else through its ring cell of the
    /// collective ([`RING_CELLS`]; the length with [`rooted::BCAST_RING`] in the stamp's
    /// line). A rank whose `buf` differs in length from the root's (erroneous) waits for
    /// whichever the root posts ([`Seg::wait_post`]), copies nothing and says what the
    /// root did ([`Bcast`]); the root cannot tell and returns [`Bcast::Done`].
    #[inline]
    pub fn bcast(&self, buf: &mut [u8], root: usize) -> Bcast {
        let k = self.next();
        let n = buf.len();
        if self.rank == root {
            if n <= LANE_MAX {
                // Through our lane: one line per `LANE_DATA` bytes, each stamped.
                self.lane_post(k, buf);
            } else {
                // Through our ring cell (see [`RING_CELLS`]).
                self.reusable(k.saturating_sub(NBUF));
                // SAFETY: our own ring cell and buffer of collective `k`, read by nobody
                // until we stamp `k` and no longer by anybody for `k - NBUF` (the ring
                // cell's: for `k - RING_CELLS <= k - NBUF`), waited for above; `n <= DATA`.
                unsafe {
                    std::ptr::copy_nonoverlapping(buf.as_ptr(), self.ring(self.rank, k), n);
                    self.data(self.rank, k)
                        .cast::<u64>()
                        .write_unaligned(rooted::BCAST_RING | n as u64);
                }
                self.put_word(self.stamp(self.rank, k), k);
                self.posted_ring(self.ring(self.rank, k), n);
            }
            self.finish(k);
            return Bcast::Done;
        }
        let other = if n <= LANE_MAX {
            self.lane_read(root, k, (0, n), buf)
        } else {
            let p = self.wait_post(root, k, false);
            // SAFETY: the root stamped its buffer of `k` (waited above), we have not
            // finished `k`.
            let kind = || unsafe { self.post_word(root, k, 0) };
            match p {
                Posted::Buf if kind() == rooted::BCAST_RING | n as u64 => {
                    // SAFETY: the root stamped `k` and we finish `k` only after the copy.
                    buf.copy_from_slice(unsafe { self.peer_ring(root, k, 0, n) });
                    None
                }
                p => Some(p),
            }
        };
        match other {
            None => {
                self.finish(k);
                Bcast::Done
            }
            Some(p) => self.bcast_other(root, k, p),
        }
    }

    /// Scatter from `root` of blocks of `block` bytes, whose blocks other than its own
    /// take at most [`DATA`] bytes together: the root posts those blocks back to back in
    /// rank order (through its lane when they fit [`SCATTER_LANE_MAX`] bytes, else in its
    /// ring cell of the collective, [`RING_CELLS`]), then copies its own block from `send`
    /// into `recv` (`None`: in place, nothing to copy) while the others
    /// read theirs. `send` (the root's `size` blocks) is not looked at elsewhere.
    ///
    /// A non-root rank whose `block` differs from the root's (erroneous) sees another post
    /// than the one it expects (the lane's stamps hold the posted length, the ring cell's
    /// post has it in the stamp's line): it takes its block of the root's length instead
    /// ([`Seg::scatter_other`]), or nothing when that is longer than `recv`
    /// ([`VBlock::Truncated`]) or is not on the segment ([`VBlock::Elsewhere`]). Elsewhere
    /// [`VBlock::Here`] with `block`.
    pub fn scatter(
        &self,
        send: &[u8],
        recv: Option<&mut [u8]>,
        block: usize,
        root: usize,
    ) -> VBlock {
        let k = self.next();
        let (b, p) = (block, self.size);
        let posted = (p - 1) * b;
        debug_assert!(posted <= DATA);
        if self.rank == root {
            let (before, mine, after) = (
                &send[..root * b],
                &send[root * b..(root + 1) * b],
                &send[(root + 1) * b..p * b],
            );
            if posted <= SCATTER_LANE_MAX {
                let mut line = [0u8; SCATTER_LANE_MAX];
                line[..before.len()].copy_from_slice(before);
                line[before.len()..posted].copy_from_slice(after);
                self.lane_post(k, &line[..posted]);
            } else {
                // Into our ring cell (see [`RING_CELLS`]).
                self.reusable(k.saturating_sub(NBUF));
                let d = self.ring(self.rank, k);
                // SAFETY: our own ring cell of collective `k`, read by nobody until we stamp
                // `k` and no longer by anybody for `k - RING_CELLS` (older than `k - NBUF`,
                // waited above); the two parts take `posted <= DATA` bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(before.as_ptr(), d, before.len());
                    std::ptr::copy_nonoverlapping(after.as_ptr(), d.add(before.len()), after.len());
                    // The posted length, in the stamp's line of our buffer of `k` (free too).
                    self.data(self.rank, k)
                        .cast::<u64>()
                        .write_unaligned(rooted::SCATTER_RING | posted as u64);
                }
                self.put_word(self.stamp(self.rank, k), k);
                self.posted_ring(d, posted);
            }
            if let Some(r) = recv {
                r[..b].copy_from_slice(mine);
            }
        } else if let Some(r) = recv {
            // Our block's place among the posted ones (the root's own is not posted).
            let at = (self.rank - usize::from(self.rank > root)) * b;
            let out = &mut r[..b];
            let other = if posted <= SCATTER_LANE_MAX {
                self.lane_read(root, k, (at, posted), out)
            } else {
                let p = self.wait_post(root, k, false);
                // SAFETY: the root stamped its buffer of `k` (waited above).
                let same = matches!(p, Posted::Buf)
                    && unsafe { self.post_word(root, k, 0) }
                        == rooted::SCATTER_RING | posted as u64;
                if same {
                    // SAFETY: the root stamped `k` (waited above) and we finish `k` only
                    // after the copy; `at + b <= posted <= DATA`, in its ring cell.
                    out.copy_from_slice(unsafe { self.peer_ring(root, k, at, b) });
                    None
                } else {
                    Some(p)
                }
            };
            let got = match other {
                None => VBlock::Here(b),
                Some(p) => self.scatter_other(root, k, p, r),
            };
            self.finish(k);
            return got;
        }
        self.finish(k);
        VBlock::Here(b)
    }

    /// A non-root rank's part of a scatter on the segment whose blocks do not take the
    /// root's lane or ring cell ([`Seg::scatter`]) and do not all go point to point
    /// ([`Seg::scatter_p2p`]): the root posts a scatterv table ([`Seg::scatterv`]) for
    /// them, but a root whose blocks differ in length from ours
    /// (erroneous) may have taken the lane or ring cell: we wait for whichever it posts
    /// ([`Seg::wait_post`]) and take our block from there ([`Seg::scatter_other`]).
    pub fn scatter_leaf(&self, recv: &mut [u8], root: usize) -> VBlock {
        let k = self.next();
        self.scatter_rest(k, root, recv)
    }

    /// Whether a scatter's blocks of `block` bytes go point to point: too large for the
    /// root's lane or ring cell ([`Seg::scatter`]), for a scatterv table's first posted
    /// block and for one cross-memory copy ([`Seg::single_copy_max`]), so that the root
    /// posts only a head ([`Seg::scatter_head`]). The same on every rank for the same
    /// block length.
    #[inline]
    pub fn scatter_p2p(&self, block: usize) -> bool {
        (self.size - 1) * block > DATA
            && 8 * self.size + block > CAP
            && block > self.single_copy_max()
    }

    /// The root's part on the segment of a scatter whose blocks go point to point
    /// ([`Seg::scatter_p2p`]): it posts a head (the block length) and goes on without
    /// waiting, as [`Seg::bcast_head`]; returns the tag of the collective's messages
    /// ([`scatter_tag`]), which the caller then sends. Its ranks have posted their
    /// receives already ([`Seg::scatter_open`]), or (a block length that differs from the
    /// root's, erroneous) learn from the head that their block comes point to point
    /// ([`Seg::scatter_other`]).
    pub fn scatter_head(&self, block: usize) -> i32 {
        let k = self.next();
        self.reusable(k.saturating_sub(NBUF));
        let w = self.data(self.rank, k).cast::<u64>();
        // SAFETY: our own buffer of collective `k`, read by nobody until we stamp it and no
        // longer by anybody for `k - NBUF` (waited above); two words.
        unsafe {
            w.write_unaligned(rooted::SCATTER_HEAD);
            w.add(1).write_unaligned(block as u64);
        }
        self.put_word(self.stamp(self.rank, k), k);
        self.finish(k);
        scatter_tag(k)
    }

    /// Opens a non-root rank's part of a scatter whose block, by its own length, goes
    /// point to point ([`Seg::scatter_p2p`]): the collective's number and the tag of its
    /// message, for which the caller posts its receive before it looks at the root's post
    /// ([`Seg::scatter_look`]), as a point-to-point scatter's rank would, rather than after.
    #[inline]
    pub fn scatter_open(&self) -> (u64, i32) {
        let k = self.next();
        (k, scatter_tag(k))
    }

    /// Whether the root of scatter `k` ([`Seg::scatter_open`]) sends our block point to
    /// point (with [`scatter_tag`] of `k`): its post is a head ([`Seg::scatter_head`],
    /// whatever its length: a receive of another length then takes or truncates it), or
    /// a scatterv table whose entry for us says so. We are then done with `k`. Otherwise
    /// (a root whose blocks' length differs from ours, erroneous, on the segment's buffers
    /// or one cross-memory copy) nothing is finished: no message of `k` comes to us, the
    /// caller cancels its receive and takes the block with [`Seg::scatter_rest`].
    pub fn scatter_look(&self, k: u64, root: usize) -> bool {
        let p = self.wait_post(root, k, false);
        // SAFETY: (each use) the root stamped its buffer of `k` (waited above) and we have
        // not finished `k`; a table has a word per rank, a head two words, a ring post one.
        let word = |i: usize| unsafe { self.post_word(root, k, i) };
        let p2p = matches!(p, Posted::Buf) && {
            let w0 = word(0);
            if w0 == rooted::SCATTER_HEAD {
                true
            } else if w0 & !0xffff_ffff == rooted::SCATTER_RING
                || w0 & (rooted::FAR | IN_RING | COMPACT) == COMPACT
            {
                false
            } else {
                // A table (see [`Seg::scatterv_take`]): no entry, sent point to point.
                word(self.rank) == u64::MAX
            }
        };
        if p2p {
            self.finish(k);
        }
        p2p
    }

    /// Our block of scatter `k` (opened, not finished) from whatever its root posted
    /// ([`Seg::scatter_other`]); we are then done with `k`.
    pub fn scatter_rest(&self, k: u64, root: usize, recv: &mut [u8]) -> VBlock {
        let p = self.wait_post(root, k, false);
        let got = self.scatter_other(root, k, p, recv);
        self.finish(k);
        got
    }

    /// Our block of a scatter whose root posted `p` at collective `k` (acquired, not
    /// finished): through its lane or ring cell ([`Seg::scatter`]: the blocks other than
    /// the root's back to back, their total length in the post, so that a rank whose
    /// block length differs from the root's finds its own block and its length), a
    /// scatterv table ([`Seg::scatterv_take`]), or a head ([`Seg::scatter_head`]: the block
    /// comes point to point, [`VBlock::Elsewhere`]). A block longer than `recv` is not
    /// copied.
    fn scatter_other(&self, root: usize, k: u64, p: Posted, recv: &mut [u8]) -> VBlock {
        let parts = self.size - 1;
        let nth = self.rank - usize::from(self.rank > root);
        match p {
            Posted::Lane(v) => {
                let total = (v & ((1 << LANE_SHIFT) - 1)) as usize;
                let c = total / parts;
                if c > recv.len() {
                    return VBlock::Truncated(c);
                }
                match self.lane_read(root, k, (nth * c, total), &mut recv[..c]) {
                    None => VBlock::Here(c),
                    // (Not seen: the lane's stamp is the one just read.)
                    Some(_) => VBlock::Truncated(c),
                }
            }
            Posted::Buf => {
                // SAFETY: the root stamped its buffer of `k` (acquired by the caller), we
                // have not finished `k`.
                let w0 = unsafe { self.post_word(root, k, 0) };
                if w0 == rooted::SCATTER_HEAD {
                    // Every block point to point, whatever its length (the receive takes a
                    // shorter one and fails on a longer one, which it consumes).
                    return VBlock::Elsewhere(scatter_tag(k));
                }
                if w0 & !0xffff_ffff == rooted::SCATTER_RING {
                    let c = (w0 & 0xffff_ffff) as usize / parts;
                    if c > recv.len() || (nth + 1) * c > DATA {
                        return VBlock::Truncated(c);
                    }
                    // SAFETY: as above; block `nth` of the posted ones lies within the
                    // `DATA` bytes of the root's ring cell (checked).
                    recv[..c].copy_from_slice(unsafe { self.peer_ring(root, k, nth * c, c) });
                    return VBlock::Here(c);
                }
                // SAFETY: as above.
                unsafe { self.scatterv_take(root, k, recv) }
            }
        }
    }

    /// Alltoall: block `j` (`block` bytes) of `send` goes to rank `j`; block `j` of
    /// `recv` comes from rank `j`. `send.len() = recv.len() = size * block <= DATA`. Each
    /// rank posts only the blocks for the other ranks ([`Seg::alltoall_post`]) and copies
    /// its own while the others post.
    #[inline]
    pub fn alltoall(&self, send: &[u8], recv: &mut [u8], block: usize) {
        let k = self.next();
        self.alltoall_post(k, send, block);
        let own = self.rank * block;
        recv[own..own + block].copy_from_slice(&send[own..own + block]);
        self.alltoall_read(k, recv, block);
    }

    /// Alltoall in place: `buf` holds the blocks to send and receives the result (ours
    /// are copied into our buffer before any of them is overwritten: no temporary; our
    /// own block stays where it is).
    #[inline]
    pub fn alltoall_in_place(&self, buf: &mut [u8], block: usize) {
        let k = self.next();
        self.alltoall_post(k, buf, block);
        self.alltoall_read(k, buf, block);
    }

    /// Post alltoall `k`: the blocks of `src` for every rank but us, back to back in rank
    /// order (ours left out: rank `j` finds its block at index `j` before ours, `j - 1`
    /// after it), so that on 2 ranks the post is the one block the peer reads (256 B: 5
    /// lines written instead of 9; rank 1 reads 5 instead of 6).
    fn alltoall_post(&self, k: u64, src: &[u8], block: usize) {
        let (own, end) = (self.rank * block, self.size * block);
        debug_assert!(end <= DATA && src.len() >= end);
        self.reusable(k.saturating_sub(NBUF));
        let dst = self.data(self.rank, k);
        // SAFETY: our own buffer of collective `k` (`DATA` bytes, `end - block` of them
        // written), read by nobody until we stamp `k` and no longer by anybody for
        // `k - NBUF`, waited for above; `src` has `end` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), dst, own);
            std::ptr::copy_nonoverlapping(
                src.as_ptr().add(own + block),
                dst.add(own),
                end - own - block,
            );
        }
        self.put_word(self.stamp(self.rank, k), k);
    }

    /// The reading half of alltoall `k` (posted): our block of every other rank into
    /// `recv` (rank `j` left its own block out of its post, [`Seg::alltoall_post`]).
    fn alltoall_read(&self, k: u64, recv: &mut [u8], block: usize) {
        self.wait_all(k);
        let me = self.rank;
        for j in (0..self.size).filter(|&j| j != me) {
            let at = if me < j { me } else { me - 1 } * block;
            // SAFETY: every rank stamped `k` (waited above); its block for us lies within
            // the `(size - 1) * block <= DATA` bytes it posted.
            let src = unsafe { self.peer(j, k, at, block) };
            recv[j * block..(j + 1) * block].copy_from_slice(src);
        }
        self.finish(k);
    }

    /// Alltoallv: block `j` of `send` (`scounts[j]` bytes at `sdispls[j]`) goes to rank
    /// `j`, block `j` of `recv` (`rcounts[j]` bytes at `rdispls[j]`) comes from rank `j`.
    /// Each rank posts a table (offset and length of its block for every rank) and its
    /// blocks for the other ranks back to back (its own it copies itself), or when they do
    /// not fit one buffer its buffer's address ([`cma`]: the blocks then move by
    /// cross-memory copies, up to a size); the ranks read every flag, so all of them exchange here or none does. `None`: nothing was received
    /// (the caller moves the data otherwise, every rank alike); `Some(ok)`: exchanged, `ok`
    /// false if some block's length differed from its `rcounts` entry (such blocks are not
    /// copied).
    pub fn alltoallv(
        &self,
        (send, scounts, sdispls): (&[u8], &[usize], &[usize]),
        (recv, rcounts, rdispls): (&mut [u8], &[usize], &[usize]),
    ) -> Result<Option<bool>> {
        self.alltoallv_from(Some(send), (scounts, sdispls), (recv, rcounts, rdispls))
    }

    /// [`Seg::alltoallv`] in place: `buf` holds block `j` for rank `j` (`counts[j]` bytes
    /// at `displs[j]`) and receives rank `j`'s block there (everything we send is copied
    /// into our buffer before any of it is overwritten, or traded by cross-memory copies
    /// with the peer's block: no temporary).
    pub fn alltoallv_in_place(
        &self,
        buf: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<Option<bool>> {
        self.alltoallv_from(None, (counts, displs), (buf, counts, displs))
    }

    /// [`Seg::alltoallv`] with the data to send in `send`, or (`None`) in `recv`.
    fn alltoallv_from(
        &self,
        send: Option<&[u8]>,
        (scounts, sdispls): (&[usize], &[usize]),
        (recv, rcounts, rdispls): (&mut [u8], &[usize], &[usize]),
    ) -> Result<Option<bool>> {
        let k = self.next();
        self.reusable(k.saturating_sub(NBUF));
        let (me, src): (usize, &[u8]) = (self.rank, send.unwrap_or(&*recv));
        // SAFETY: our own buffer of collective `k` (`CAP` bytes), read by nobody until we
        // stamp it and no longer by anybody for `k - NBUF` (waited above).
        if self.size == 2 && unsafe { put_pair(self.data(me, k), me, (src, scounts, sdispls)) } {
            return self.alltoallv_pair(k, (send, scounts, sdispls), (recv, rcounts, rdispls));
        }
        // Our block for ourselves is never posted: in place it is already where it
        // belongs, out of place we copy it ourselves (once, not into the buffer and out
        // again; so on 2 ranks a whole `DATA`-byte block for the other rank fits with the
        // table).
        // SAFETY: our own buffer of collective `k` (`CAP` bytes), read by nobody until we
        // stamp it and no longer by anybody for `k - NBUF` (waited above).
        let table = unsafe {
            put_table(
                self.data(self.rank, k),
                (self.size, me),
                (src, scounts, sdispls),
            )
        };
        if !table {
            // Out of place, with blocks for us large enough, our senders may write them
            // into `recv` ([`cma`]): post where.
            let min = super::params::alltoall_push_min();
            let big = rcounts.iter().max().is_some_and(|&m| min != 0 && m >= min);
            let layout = (send.is_some() && big).then_some((&*recv, rcounts, rdispls));
            // SAFETY: as above.
            unsafe { self.put_addresses(k, (src, scounts, sdispls), layout) };
        }
        self.put_word(self.stamp(self.rank, k), k);
        // SAFETY: our own post of `k`, just written.
        if unsafe { self.rules_out_cma(k) } {
            // Every rank reads in our post that nothing moves here: we read nobody's.
            self.finish(k);
            return Ok(None);
        }
        // Out of place our own block while the others post (when some rank's blocks do
        // not fit, the cross-memory exchange copies it again, or the caller does).
        let own = match send {
            Some(send) if table => {
                own_block((send, scounts, sdispls), (recv, rcounts, rdispls), me)
            }
            _ => true,
        };
        self.wait_all(k);
        // SAFETY: every rank stamped `k` (waited above) and we finish `k` only after the
        // reads.
        let got = unsafe {
            take_table(
                (me, self.size),
                |r| self.data(r, k),
                (recv, rcounts, rdispls),
            )
        };
        let Some(ok) = got else {
            return self.exchange_cma(k, send, (recv, rcounts, rdispls));
        };
        self.finish(k);
        Ok(Some(ok && own))
    }

    /// The rest of a 2-rank alltoallv `k` whose post is a pair post ([`put_pair`], written,
    /// not stamped yet): stamp it, copy our own block out of place, take the peer's block
    /// from its pair post ([`take_pair`]); a peer whose block did not fit one (it posted
    /// its addresses, or nothing: invalid arguments) leaves the exchange to
    /// [`Seg::exchange_cma`], which reads a pair post as a table.
    fn alltoallv_pair(
        &self,
        k: u64,
        (send, scounts, sdispls): (Option<&[u8]>, &[usize], &[usize]),
        (recv, rcounts, rdispls): (&mut [u8], &[usize], &[usize]),
    ) -> Result<Option<bool>> {
        let me = self.rank;
        self.put_word(self.stamp(me, k), k);
        let own = match send {
            Some(send) => own_block((send, scounts, sdispls), (recv, rcounts, rdispls), me),
            None => true,
        };
        self.wait_all(k);
        // SAFETY: the peer stamped `k` (waited above) and we finish `k` only after the read.
        let got = unsafe { take_pair(self.data(1 - me, k), 1 - me, (recv, rcounts, rdispls)) };
        match got {
            Some(ok) => {
                self.finish(k);
                Ok(Some(ok && own))
            }
            None => self.exchange_cma(k, send, (recv, rcounts, rdispls)),
        }
    }

    /// The root's part of a gatherv on the segment (every other rank runs
    /// [`Seg::gather_leaf`]): `recv` is the buffer, counts and displacements, `send` our
    /// own block (`None`: in place, already there). Blocks of at most [`V_MAX`] bytes are
    /// posted by their ranks and copied from there, blocks of up to `one_copy` bytes
    /// ([`Seg::single_copy_max`]: 0 when CMA does not reach every rank) written into
    /// `recv` by their ranks, each by one cross-memory copy at the address we post (our
    /// pid, then per rank the block's address and count), larger ones travel point to
    /// point: we post that in their entries ([`rooted::BY_P2P`]), their ranks send them and
    /// we return those ranks for the caller to receive from. We post when some count is
    /// larger than [`V_MAX`], and also, with no entry for it, when a rank's posted length
    /// says it waits for us (its count disagrees: erroneous). Every rank's posted length is
    /// checked against its count: a shorter block posted on the segment is copied all the
    /// same (as point to point), a longer one or one outside `recv` is not, and the first
    /// value is false then, or when our own block does not fit.
    pub fn gatherv_root(
        &self,
        send: Option<&[u8]>,
        (recv, counts, displs): (&mut [u8], &[usize], &[usize]),
        one_copy: usize,
    ) -> (bool, Vec<usize>) {
        let (me, p) = (self.rank, self.size);
        let k = self.next();
        let mut ok = true;
        let len = recv.len();
        let count = |r: usize| counts.get(r).copied().unwrap_or(0);
        let fits = |r: usize, n: usize| {
            n <= count(r) && counts.len() > r && displs.get(r).is_some_and(|&d| d + n <= len)
        };
        let far = |r: usize| count(r) > V_MAX && count(r) <= one_copy;
        let at = recv.as_mut_ptr() as u64;
        let post = || {
            self.reusable(k.saturating_sub(NBUF));
            let w = self.data(me, k).cast::<u64>();
            // SAFETY: our own buffer of collective `k`, read by nobody until we stamp it
            // and no longer by anybody for `k - NBUF` (waited above); `8 * (1 + 2p) <=
            // DATA`.
            unsafe {
                w.write_unaligned(crate::sm::own_pid() | rooted::POST_TABLE);
                for r in (0..p).filter(|&r| r != me) {
                    let (a, c) = match count(r) {
                        c if far(r) && fits(r, c) => (at + displs[r] as u64, c as u64),
                        c if c > V_MAX && !far(r) => (0, rooted::BY_P2P),
                        _ => (0, 0),
                    };
                    w.add(1 + 2 * r).write_unaligned(a);
                    w.add(2 + 2 * r).write_unaligned(c);
                }
            }
            self.put_word(self.stamp(me, k), k);
        };
        let mut posted = (0..p).any(|r| r != me && count(r) > V_MAX);
        if posted {
            post();
        }
        if let Some(s) = send {
            if fits(me, s.len()) {
                recv[displs[me]..displs[me] + s.len()].copy_from_slice(s);
            } else {
                ok = false;
            }
        }
        let mut p2p = Vec::new();
        // The ranks that post their block or send it; then those that write it. Those of
        // our CPU (or every rank, not pinned) first: once they posted, a rank pinned to
        // the other CPU is waited for without yielding ours at once (`wait_word_remote`).
        let posters =
            |remote: bool| (0..p).filter(move |&r| r != me && !far(r) && self.remote[r] == remote);
        for r in posters(false).chain(posters(true)) {
            self.wait_word_remote(r, self.stamp(r, k), k);
            // SAFETY: rank `r` stamped `k` (waited above) and we finish `k` only after the
            // reads; the length word is the first 8 posted bytes.
            let n = unsafe { self.data(r, k).cast::<u64>().read_unaligned() } as usize;
            if n <= V_MAX {
                let d = displs.get(r).copied().unwrap_or(0);
                ok &= self
                    .take_posted(r, k, recv.get_mut(d..d + count(r)).unwrap_or(&mut []))
                    .is_none();
            } else if count(r) > V_MAX {
                p2p.push(r);
            } else {
                // It waits for our post, whose entry gives it no room.
                ok = false;
                if !posted {
                    post();
                    posted = true;
                }
            }
        }
        for r in (0..p).filter(|&r| r != me && far(r)) {
            // Our buffer is written by the rank until it is done (after its post).
            self.wait_word(self.seq_word(r), k);
            let d = displs.get(r).copied().unwrap_or(0);
            ok &= self
                .take_posted(r, k, recv.get_mut(d..d + count(r)).unwrap_or(&mut []))
                .is_none();
        }
        self.finish(k);
        (ok, p2p)
    }

    /// Scatterv from `root` (`send`: its buffer, counts and displacements): the root
    /// posts a table (offset and length in its buffer per rank, or none) and the blocks
    /// that fit its buffer after it, back to back, in rank order (those blocks in its ring
    /// cell of the collective instead, [`RING_CELLS`], when they take more than
    /// [`SCATTERV_BUF_MAX`] bytes together, their entries flagged; when all of them fit the
    /// stamp's line, up to 7 ranks, the table is one word of lengths instead, [`COMPACT`]);
    /// a block that does not fit
    /// and has at most `one_copy` bytes ([`Seg::single_copy_max`]: 0 when CMA does not
    /// reach every rank) is read by its rank from the root's buffer by one cross-memory
    /// copy (its entry says so, the root's pid and the block's address follow the table),
    /// and the root waits for those ranks. Returns at the root the ranks whose block is not
    /// posted (to be sent point to point with the returned tag, [`scatter_tag`]; its own is
    /// never posted), at the others what came ([`VBlock`]; a posted block is copied into
    /// `recv`). A root given no table (its
    /// arguments were invalid) posts one that makes every other rank return
    /// [`VBlock::Abandoned`]. A root that waits for readers copies `own` (its own block:
    /// source, destination of the same length) while they read, after its post, and takes
    /// it out of `own`; otherwise `own` is left for the caller.
    pub fn scatterv(
        &self,
        send: Option<(&[u8], &[usize], &[usize])>,
        recv: &mut [u8],
        root: usize,
        one_copy: usize,
        own: &mut Option<(&[u8], &mut [u8])>,
    ) -> (Vec<usize>, VBlock, i32) {
        let p = self.size;
        let k = self.next();
        let mut rest = Vec::new();
        let mut got = VBlock::Elsewhere(scatter_tag(k));
        match send {
            Some((send, counts, displs)) if self.rank == root => {
                self.reusable(k.saturating_sub(NBUF));
                let base = self.data(self.rank, k);
                let valid = |r: usize| match (counts.get(r), displs.get(r)) {
                    (Some(&c), Some(&d)) if r != root && d + c <= send.len() => Some((c, d)),
                    _ => None,
                };
                // Few small blocks: all of them in the stamp's line, after one word of
                // lengths ([`COMPACT`]).
                let compact = p <= COMPACT_RANKS && {
                    let mut total = 0;
                    (0..p).filter(|&r| r != root).all(|r| {
                        valid(r).is_some_and(|(c, _)| {
                            total += c;
                            total <= COMPACT_MAX
                        })
                    })
                };
                if compact {
                    let (mut word, mut off) = (COMPACT, 8);
                    for r in 0..p {
                        if let Some((c, d)) = valid(r) {
                            // SAFETY: our own buffer of collective `k`, read by nobody until
                            // we stamp it and no longer by anybody for `k - NBUF` (waited
                            // above); `off + c <= 8 + COMPACT_MAX <= CAP`, `d + c <=
                            // send.len()`.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    send.as_ptr().add(d),
                                    base.add(off),
                                    c,
                                )
                            };
                            off += c;
                            word |= (c as u64) << (8 * r);
                        }
                    }
                    // SAFETY: as above, the first word of the buffer.
                    unsafe { base.cast::<u64>().write_unaligned(word) };
                    self.put_word(self.stamp(self.rank, k), k);
                    self.finish(k);
                    return (rest, got, scatter_tag(k));
                }
                // Blocks are posted in rank order from the end of the table, each where
                // the previous posted one ended, as long as it fits `CAP`; one that does
                // not and has at most `one_copy` bytes is read by CMA (the root's pid and
                // the blocks' addresses then follow the table, so posting starts after
                // them). One pass finds whether any is read so, one posts (no allocation:
                // this runs at every small scatterv).
                let any_far = {
                    let (mut off, mut far) = (8 * p, false);
                    for r in 0..p {
                        match valid(r) {
                            Some((c, _)) if off + c <= CAP => off += c,
                            Some((c, _)) if c > 0 && c <= one_copy => {
                                far = true;
                                break;
                            }
                            _ => {}
                        }
                    }
                    far
                };
                let start = if any_far { 8 * (2 * p + 1) } else { 8 * p };
                // Blocks of more than a lane's worth together go to our ring cell (see
                // [`RING_CELLS`]), at their offset less the table's (so the same blocks fit
                // as in the buffer), their entries flagged; smaller ones stay in the
                // table's lines.
                let (blocks, shift, flag) =
                    if (0..p).filter_map(valid).map(|(c, _)| c).sum::<usize>() > SCATTERV_BUF_MAX {
                        (self.ring(self.rank, k), start, IN_RING)
                    } else {
                        (base, 0, 0)
                    };
                let mut off = start;
                for r in 0..p {
                    let entry = match valid(r) {
                        Some((c, d)) if off + c <= CAP => {
                            // SAFETY: our own buffer and ring cell of collective `k`, read by
                            // nobody until we stamp it and no longer by anybody for
                            // `k - NBUF` (waited above; the ring cell's previous collective
                            // is older); `off - shift + c <= CAP`, `d + c <= send.len()`.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    send.as_ptr().add(d),
                                    blocks.add(off - shift),
                                    c,
                                )
                            };
                            off += c;
                            ((off - c - shift) as u64) | ((c as u64) << 32) | flag
                        }
                        Some((c, d)) if c > 0 && c <= one_copy => {
                            // SAFETY: as above; the addresses follow the table and the pid
                            // (`8 * (2p + 1)` bytes, within `CAP` for every communicator).
                            unsafe {
                                base.add(8 * (p + 1 + r))
                                    .cast::<u64>()
                                    .write_unaligned(send.as_ptr() as u64 + d as u64)
                            };
                            rooted::FAR | c as u64
                        }
                        _ => {
                            if r != root {
                                rest.push(r);
                            }
                            u64::MAX
                        }
                    };
                    // SAFETY: as above; the table's `8 * p <= CAP` bytes lead the buffer.
                    unsafe { base.add(8 * r).cast::<u64>().write_unaligned(entry) };
                }
                let in_cell = flag != 0;
                if any_far {
                    // SAFETY: as above, the word after the table.
                    unsafe {
                        base.add(8 * p)
                            .cast::<u64>()
                            .write_unaligned(crate::sm::own_pid())
                    };
                }
                self.put_word(self.stamp(self.rank, k), k);
                if in_cell {
                    self.posted_ring(blocks, off - start);
                }
                // Our buffer is read by the ranks whose entries say so until they are done;
                // our own block meanwhile, rather than after the wait.
                if any_far {
                    if let Some((src, dst)) = own.take() {
                        dst.copy_from_slice(src);
                    }
                    for r in 0..p {
                        // SAFETY: entry `r` of our own table, written above; the readers
                        // only read it.
                        let entry = unsafe { base.add(8 * r).cast::<u64>().read_unaligned() };
                        if entry != u64::MAX && entry & rooted::FAR != 0 {
                            self.wait_word(self.seq_word(r), k);
                        }
                    }
                }
            }
            None if self.rank == root => {
                // Invalid arguments at the root: post a table that tells every rank so.
                self.reusable(k.saturating_sub(NBUF));
                let base = self.data(self.rank, k);
                for r in 0..p {
                    // SAFETY: our own buffer of collective `k`, read by nobody until we
                    // stamp it (and no longer for `k - NBUF`, waited above); the table's
                    // `8 * p <= CAP` bytes lead it.
                    unsafe { base.add(8 * r).cast::<u64>().write_unaligned(ABANDONED) };
                }
                self.put_word(self.stamp(self.rank, k), k);
            }
            _ => {
                // As for the other rooted reads ([`Seg::wait_post`]): a root of the other
                // CPU is looked at longer before we yield.
                self.wait_word_remote(root, self.stamp(root, k), k);
                // SAFETY: the root stamped `k` (waited above) and we finish `k` only after
                // the reads.
                got = unsafe { self.scatterv_take(root, k, recv) };
            }
        }
        self.finish(k);
        (rest, got, scatter_tag(k))
    }

    /// A scatterv reader's part of the root's table post of collective `k` (see
    /// [`Seg::scatterv`]): our block copied into `recv` or where it is instead; nothing is
    /// finished here.
    ///
    /// # Safety
    /// The root stamped its buffer of `k` (acquired by us) and we have not finished `k`.
    unsafe fn scatterv_take(&self, root: usize, k: u64, recv: &mut [u8]) -> VBlock {
        let p = self.size;
        // SAFETY: caller contract; entry `rank` lies in its table.
        let word =
            |i: usize| unsafe { self.data(root, k).add(8 * i).cast::<u64>().read_unaligned() };
        let first = word(0);
        let entry = word(self.rank);
        if first & (rooted::FAR | IN_RING | COMPACT) == COMPACT {
            // Every block in the stamp's line (see [`COMPACT`]).
            let len = |r: usize| ((first >> (8 * r)) & 0xff) as usize;
            let (off, n) = (8 + (0..self.rank).map(len).sum::<usize>(), len(self.rank));
            if n > recv.len() {
                return VBlock::Truncated(n);
            }
            // SAFETY: as above; `off + n <= 8 + 255 * COMPACT_RANKS <= CAP`.
            recv[..n].copy_from_slice(unsafe { self.peer(root, k, off, n) });
            VBlock::Here(n)
        } else if entry == ABANDONED {
            VBlock::Abandoned
        } else if entry != u64::MAX && entry & rooted::FAR != 0 {
            let n = (entry & !rooted::FAR) as usize;
            if n > recv.len() {
                return VBlock::Truncated(n);
            }
            let (pid, at) = (word(p) as i32, word(p + 1 + self.rank));
            // SAFETY: the root's buffer holds our `n` bytes at `at`, unchanged until we are
            // done with `k` (it waits for that); `recv` has room.
            match unsafe { cma_copy(pid, recv.as_mut_ptr(), at, n, Cma::Read) } {
                Ok(()) => VBlock::Here(n),
                Err(_) => VBlock::Failed,
            }
        } else if entry != u64::MAX {
            let (off, n) = (
                (entry & 0xffff_ffff) as usize,
                ((entry & !IN_RING) >> 32) as usize,
            );
            if n > recv.len() || off + n > CAP {
                return VBlock::Truncated(n);
            }
            // SAFETY: as above; `off + n <= CAP` (checked).
            let src = unsafe {
                if entry & IN_RING != 0 {
                    self.peer_ring(root, k, off, n)
                } else {
                    self.peer(root, k, off, n)
                }
            };
            recv[..n].copy_from_slice(src);
            VBlock::Here(n)
        } else {
            VBlock::Elsewhere(scatter_tag(k))
        }
    }

    /// Start blocking collective `kind` (gather, scatter, allgather(v), reduce,
    /// reduce-scatter, scan, exscan: see [`super::SmKind`]): post `input` (at most
    /// [`DATA`] bytes; nothing where the kind posts nothing here, e.g. a scatter's
    /// non-roots) and wait for the stamps our result needs. Returns the collective's
    /// number, to pass to [`Seg::end`] right after (the input may be part of the output:
    /// it is copied here, before the output is written).
    pub fn begin(&self, kind: &super::SmKind, input: &[u8]) -> u64 {
        let k = self.next();
        if kind.posts(self.rank) {
            self.post_in(k, input, in_ring(kind));
        }
        for r in kind.needs(self.rank, self.size) {
            if r != self.rank {
                self.wait_word(self.stamp(r, k), k);
            }
        }
        k
    }

    /// Finish blocking collective `k` of `kind` ([`Seg::begin`]): compute our result into
    /// `out` (empty where we have none) from the posted data, folding reductions in rank
    /// order with `op` (`inout = in ∘ inout`), then mark `k` read.
    pub fn end(
        &self,
        kind: &super::SmKind,
        k: u64,
        out: &mut [u8],
        op: Option<super::nb::Fold<'_>>,
    ) {
        // Where `begin` posted (the same rule on every rank).
        let ring = in_ring(kind);
        // SAFETY: the stamps of `k` of every rank `kind` needs were acquired in `begin`
        // (ours: we posted it), and we finish `k` only below, after the reads; every read
        // is within the `DATA` bytes its rank posted (the kinds' offsets and lengths), in
        // its ring cell or its buffer as it posted.
        let peer = |r: usize, off: usize, n: usize| unsafe {
            if ring {
                self.peer_ring(r, k, off, n)
            } else {
                self.peer(r, k, off, n)
            }
        };
        kind.compute((self.rank, self.size), peer, out, op);
        self.finish(k);
    }

    /// The large region, with slots of at least `n` bytes (made, or remade larger, here:
    /// collective, every rank has the same history of large operations and so calls this
    /// alike), locked for one large operation; `None` when it is not to be used or cannot
    /// be made (on every rank alike).
    fn big_region(
        &self,
        a: &CollComm,
        n: usize,
    ) -> Result<Option<std::sync::MutexGuard<'_, BigState>>> {
        let mut g = self.big.lock().unwrap_or_else(|p| p.into_inner());
        if g.1 {
            return Ok(None);
        }
        if g.0.as_ref().is_none_or(|b| b.cap < n) {
            g.0 = None;
            let cap = n.next_power_of_two().max(64 * 1024);
            match super::share(a, cap * self.size)? {
                Some(map) => {
                    g.0 = Some(Big {
                        base: map.ptr(),
                        cap,
                        _map: map,
                    })
                }
                None => {
                    g.1 = true;
                    return Ok(None);
                }
            }
        }
        Ok(Some(g))
    }

    /// Allreduce into `dst` (at most [`BIG_MAX`] bytes) through the large region: every rank
    /// copies its vector into its slot; rank `r` folds slice `r` (elements split evenly)
    /// of all slots in rank order (`x0 ∘ (x1 ∘ …)`) into `dst` and publishes it in its
    /// slot; every rank then copies the other slices. Collective; false (nothing done,
    /// on every rank alike) when the region cannot be made.
    ///
    /// `src` is our contribution (`None`: it is in `dst`), as long as `dst`; `red` computes
    /// `inout = in ∘ inout` on whole elements of `elem` bytes (slices are split between
    /// elements). `a` is the communicator's collective view (to make the region).
    pub fn allreduce_big<F: Fn(&[u8], &mut [u8])>(
        &self,
        a: &CollComm,
        src: Option<&[u8]>,
        dst: &mut [u8],
        elem: usize,
        red: &F,
    ) -> Result<bool> {
        let n = dst.len();
        if self.some_yield {
            return Ok(false);
        }
        let Some(g) = self.big_region(a, n)? else {
            return Ok(false);
        };
        let (slot, last, this) = self.big_start(&g);
        // Everybody has copied the results of the previous large allreduce out of the
        // slots (ours included) before we overwrite ours.
        self.big_wait_free(last);
        let src = src.unwrap_or(dst);
        debug_assert_eq!(src.len(), n);
        // SAFETY: our slot has room for `n` bytes and is read by nobody now (above).
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), slot(self.rank), n) };
        self.meet();
        let (counts, displs) = crate::split_even(n, elem, self.size);
        let (off, m) = (displs[self.rank], counts[self.rank]);
        let view = |r: usize| {
            // SAFETY: every rank passed the barrier after filling its slot, which stays
            // unchanged until it has seen our done word reach this allreduce.
            unsafe { std::slice::from_raw_parts(slot(r).add(off).cast_const(), m) }
        };
        let mine = &mut dst[off..off + m];
        let last_rank = self.size - 1;
        mine.copy_from_slice(view(last_rank));
        for r in (0..last_rank).rev() {
            red(view(r), mine); // mine = x_r ∘ mine
        }
        // SAFETY: slice `rank` of our own slot, read by the others only after the next
        // barrier.
        unsafe { std::ptr::copy_nonoverlapping(mine.as_ptr(), slot(self.rank).add(off), m) };
        self.meet();
        for r in (0..self.size).filter(|&r| r != self.rank) {
            let (o, c) = (displs[r], counts[r]);
            // SAFETY: rank `r` passed the barrier after writing its slice `r`, unchanged
            // until our done word reaches this allreduce.
            let from = unsafe { std::slice::from_raw_parts(slot(r).add(o).cast_const(), c) };
            dst[o..o + c].copy_from_slice(from);
        }
        self.big_end(this);
        Ok(true)
    }

    /// Reduce to `root` (at most `DATA` bytes): every rank posts a length word
    /// ([`LEN_TAG`] and its bytes; the root's alone), every other rank `send` (its
    /// contribution) after it and is done; the root waits for their stamps and folds every
    /// contribution in rank order (`x0 ∘ (x1 ∘ (… ∘ x(p-1)))`, its own from `send`, or from
    /// `recv` in place when `send` is `None`) into `recv`. `red` computes
    /// `inout = in ∘ inout`, `commutative` or not: in place on two ranks (root 0) a
    /// commutative `red` folds the peer's contribution straight into ours, `x1 ∘ x0`,
    /// where the rank order needs our own copied aside first (np=2, 4 KiB: a copy of
    /// 4 KiB per call, the in-place reduce 0.954x Open MPI where out of place was not).
    ///
    /// Erroneous lengths: the root fails ([`lengths_error`], nothing folded) when some
    /// rank posted another length, or took another path (a two-rank cross-memory post,
    /// [`Seg::reduction_gate`]: their lengths are at the same sequence number). The other
    /// ranks do not wait for the root and succeed; a rank at the gate waits for every
    /// post, the root's too, and fails.
    pub fn reduce<F: Fn(&[u8], &mut [u8])>(
        &self,
        send: Option<&[u8]>,
        recv: Option<&mut [u8]>,
        root: usize,
        (red, commutative): (&F, bool),
    ) -> Result<()> {
        let k = self.next();
        match recv {
            Some(buf) if self.rank == root => {
                let n = buf.len();
                self.post_len(k, n, &[]);
                self.wait_all_lines(k, 16 + n);
                if let Err(e) = self.lengths_agree(k, n, "reduce", 0..self.size) {
                    self.finish(k);
                    return Err(e);
                }
                let last = self.size - 1;
                if send.is_none() && commutative && self.size == 2 && root == 0 {
                    // SAFETY: the other rank (1, the last) stamped `k` (waited above) with
                    // `n` bytes after its length word (checked above); the view does not
                    // overlap `buf`.
                    red(unsafe { self.peer(last, k, 8, n) }, buf); // buf = x1 ∘ x0
                    self.finish(k);
                    return Ok(());
                }
                // Our own contribution joins the fold where its rank says: copied aside
                // when the fold would overwrite it first (in place, below the last rank).
                let mut own = [std::mem::MaybeUninit::<u8>::uninit(); DATA];
                let own: &[u8] = match send {
                    Some(s) => s,
                    None if root != last => {
                        let own = own.as_mut_ptr().cast::<u8>();
                        // SAFETY: `n <= DATA` (the caller's bound): `own` has room for
                        // `buf`'s bytes, and is not `buf`; its first `n` bytes are then
                        // initialised.
                        unsafe {
                            std::ptr::copy_nonoverlapping(buf.as_ptr(), own, n);
                            std::slice::from_raw_parts(own.cast_const(), n)
                        }
                    }
                    None => &[],
                };
                if root != last {
                    // SAFETY: every other rank stamped `k` (waited above) with `n` bytes
                    // after its length word (checked above).
                    buf.copy_from_slice(unsafe { self.peer(last, k, 8, n) });
                } else if let Some(s) = send {
                    buf.copy_from_slice(s);
                }
                for r in (0..last).rev() {
                    if r == root {
                        red(own, buf);
                    } else {
                        // SAFETY: as above; the view does not overlap `buf`.
                        red(unsafe { self.peer(r, k, 8, n) }, buf);
                    }
                }
            }
            _ => {
                let s = send.unwrap_or_default();
                self.post_len(k, s.len(), s);
            }
        }
        self.finish(k);
        Ok(())
    }

    /// Inclusive (or, `exclusive`, exclusive) scan of at most `DATA` bytes: every rank
    /// posts a length word ([`LEN_TAG`] and its bytes) and its contribution (`send`, or
    /// `recv` in place when `None`) after it, and folds those of the ranks up to its own
    /// (below its own when exclusive) in rank order into `recv`; rank 0's `recv` is left
    /// untouched by the exclusive scan. Erroneous lengths: a rank that sees a rank below
    /// it post another length (or take another path: [`Seg::reduction_gate`], a two-rank
    /// cross-memory post) fails ([`lengths_error`], `recv` untouched).
    pub fn scan<F: Fn(&[u8], &mut [u8])>(
        &self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        exclusive: bool,
        red: &F,
    ) -> Result<()> {
        let n = recv.len();
        let k = self.next();
        self.post_len(k, n, send.unwrap_or(&*recv));
        let me = self.rank;
        // Every rank below ours: the ranks our result folds (and, exclusive, rank `me - 1`
        // is its last), all waited for and length-checked.
        for r in 0..me {
            self.wait_word(self.stamp(r, k), k);
        }
        if let Err(e) = self.lengths_agree(k, n, "scan", 0..me) {
            self.finish(k);
            return Err(e);
        }
        // The fold's last rank, and whether it is ours (then read from our input).
        let top = if exclusive {
            me.checked_sub(1)
        } else {
            Some(me)
        };
        if let Some(top) = top {
            if top != me {
                // SAFETY: rank `top` stamped `k` (waited above) with `n` bytes after its
                // length word (checked above).
                recv.copy_from_slice(unsafe { self.peer(top, k, 8, n) });
            } else if let Some(s) = send {
                recv.copy_from_slice(s);
            }
            for r in (0..top).rev() {
                // SAFETY: as above; the view does not overlap `recv`.
                red(unsafe { self.peer(r, k, 8, n) }, recv);
            }
        }
        self.finish(k);
        Ok(())
    }

    /// The length check of a blocking allreduce, reduce, scan or exscan (`what`) of `n`
    /// bytes that does not go through a segment buffer or a two-rank cross-memory post
    /// (the large regions, point to point): a post of our length word only, every rank's
    /// checked. The small paths ([`Seg::allreduce`], [`Seg::reduce`], [`Seg::scan`]) post
    /// their length words at the same sequence number (a two-rank cross-memory post holds
    /// its length too, [`post_len_of`]): a rank whose length took another path than ours
    /// meets us here and we fail, instead of waiting where it never comes. Every rank
    /// waits for every post, so that no rank goes on when another fails here.
    pub fn reduction_gate(&self, n: usize, what: &str) -> Result<()> {
        let k = self.next();
        self.post_len(k, n, &[]);
        self.wait_all(k);
        let r = self.lengths_agree(k, n, what, 0..self.size);
        self.finish(k);
        r
    }

    /// Allreduce of `buf` (at most `DATA` bytes) in place; `red` computes `inout = in ∘ inout`.
    /// Our post is a length word ([`LEN_TAG`] and `buf.len()`), then the vector: an error
    /// on every rank that sees another rank's length differ from its own (nothing folded,
    /// `buf` unchanged; [`Seg::lengths_agree`]), and every rank is done with the collective
    /// either way, so that the next one is matched right.
    pub fn allreduce<F: Fn(&[u8], &mut [u8])>(&self, buf: &mut [u8], red: &F) -> Result<()> {
        let n = buf.len();
        let k = self.next();
        self.post_len(k, n, buf);
        // Every post is a length word and `n` bytes after the stamp word.
        self.wait_all_lines(k, 16 + n);
        if let Err(e) = self.lengths_agree(k, n, "allreduce", 0..self.size) {
            self.finish(k);
            return Err(e);
        }
        // Right fold x0 ∘ (x1 ∘ (… ∘ x(p-1))) into `buf` (associativity makes it the
        // rank-order result; every rank computes exactly the same).
        let last = self.size - 1;
        if self.rank != last {
            // SAFETY: every rank stamped `k` (waited above) with `n` bytes after its
            // length word (checked above). (The last rank's `buf` holds its vector.)
            buf.copy_from_slice(unsafe { self.peer(last, k, 8, n) });
        }
        for r in (0..last).rev() {
            // SAFETY: as above; the view does not overlap `buf`.
            let x = unsafe { self.peer(r, k, 8, n) };
            red(x, buf); // buf = x_r ∘ buf
        }
        self.finish(k);
        Ok(())
    }

    /// [`Seg::post`] of a length word ([`LEN_TAG`] and `n`) and then `src` (at most
    /// `CAP - 8` bytes) after it.
    fn post_len(&self, k: u64, n: usize, src: &[u8]) {
        debug_assert!(src.len() <= CAP - 8);
        self.reusable(k.saturating_sub(NBUF));
        let dst = self.data(self.rank, k);
        // SAFETY: our own buffer of collective `k` (at least `CAP` bytes), read by nobody
        // until we stamp `k` and no longer by anybody for `k - NBUF` (waited above); the
        // length word is 8-aligned (the buffer's data starts 8 bytes into a line).
        unsafe {
            // Every line of the post asked for at once (`prefetchw`: the waiters read
            // them at the buffer's last use, and the stores would otherwise take them back
            // one after the other), then the bytes past the stamp's line, then that line's
            // (the length word, the head, the stamp) back to back: a waiter that loads
            // every line of the post ([`Seg::wait_all_lines`]) can take the stamp's line
            // from us only once.
            let head = src.len().min(LINE - 16);
            prefetch_lines(dst.cast_const(), 8 + src.len());
            std::ptr::copy_nonoverlapping(
                src.as_ptr().add(head),
                dst.add(8 + head),
                src.len() - head,
            );
            dst.cast::<u64>().write(LEN_TAG | n as u64);
            std::ptr::copy_nonoverlapping(src.as_ptr(), dst.add(8), head);
        }
        self.put_word(self.stamp(self.rank, k), k);
    }

    /// The bytes rank `r` posted for blocking collective `k` (stamped, acquired by us).
    fn posted_len(&self, r: usize, k: u64) -> u64 {
        post_len_of(|i| {
            // SAFETY: `r` stamped `k` (caller contract); a post's first four words lie
            // within `CAP` (a cross-memory post has `pull::WORDS` of them).
            let w = unsafe { self.peer(r, k, 8 * i, 8) };
            u64::from_ne_bytes(w.try_into().expect("8 bytes"))
        })
    }

    /// Whether the posts of blocking collective `k` of the other ranks in `ranks` (all
    /// stamped, acquired by us) have our `n` bytes, else the error of [`lengths_error`].
    /// The correct call's whole check is one word per rank: each post starts with our
    /// length word; only when one does not are the lengths read ([`Seg::posted_len`]).
    #[inline]
    fn lengths_agree(
        &self,
        k: u64,
        n: usize,
        what: &str,
        ranks: std::ops::Range<usize>,
    ) -> Result<()> {
        let want = LEN_TAG | n as u64;
        let others = || ranks.clone().filter(|&r| r != self.rank);
        if others().all(|r| {
            // SAFETY: `r` stamped `k` (caller contract): the first word of its post,
            // 8-aligned (see `Seg::post_len`), unchanged until we finish `k`.
            unsafe { self.data(r, k).cast::<u64>().read() == want }
        }) {
            return Ok(());
        }
        match differing_of(n, others().map(|r| self.posted_len(r, k))) {
            None => Ok(()),
            Some(m) => Err(lengths_error(what, m, n)),
        }
    }

    /// Of the posted lengths (`posted(r)`) of the other ranks among `ranks`, one that
    /// differs from our `n`: a longer one if there is one.
    pub(crate) fn differing(
        &self,
        n: usize,
        ranks: std::ops::Range<usize>,
        posted: impl Fn(usize) -> u64,
    ) -> Option<usize> {
        differing_of(n, ranks.filter(|&r| r != self.rank).map(posted))
    }

    /// Allgatherv of blocks of at most `DATA` bytes: block `j` is `counts[j]` bytes at
    /// `displs[j]` of `buf`, ours already there. Each rank posts its block and copies
    /// the others' straight into `buf`; a rank with an empty block posts nothing and is
    /// not waited for (every rank knows every count).
    pub fn allgatherv(&self, buf: &mut [u8], counts: &[usize], displs: &[usize]) {
        let (me, p) = (self.rank, self.size);
        assert!(
            counts.len() == p && displs.len() == p,
            "allgatherv: one block per rank"
        );
        let k = self.next();
        if counts[me] > 0 {
            self.post(k, &buf[displs[me]..displs[me] + counts[me]]);
        }
        for j in (0..p).filter(|&j| j != me && counts[j] > 0) {
            self.wait_word(self.stamp(j, k), k);
            // SAFETY: rank `j` stamped `k` (waited above), posting its `counts[j] <= DATA`
            // bytes (the caller's check, the same on every rank), and we finish `k` only
            // after the reads.
            let src = unsafe { self.peer(j, k, 0, counts[j]) };
            buf[displs[j]..displs[j] + counts[j]].copy_from_slice(src);
        }
        self.finish(k);
    }

    /// Reduce-scatter of at most `DATA` bytes: every rank posts its whole vector (`send`,
    /// or in place when `None` the start of `buf`) and folds its block, bytes
    /// `at..at + n` of every rank's vector, in rank order (`x0 ∘ (x1 ∘ (… ∘ x(p-1)))`)
    /// into `buf[..n]`; `red` computes `inout = in ∘ inout`. The vector is posted before
    /// `buf` is written, so in place needs no copy. One handoff each way: a rank waits
    /// for the others' stamps only. On two ranks each posts only the other's block
    /// ([`Seg::reduce_scatter_two`]).
    ///
    /// Every post starts with a length word ([`LEN_TAG`] and the whole vector's bytes), at
    /// the sequence number where the other paths of a blocking reduce-scatter post theirs
    /// ([`Seg::reduction_gate`], a two-rank cross-memory post): a rank that sees another
    /// rank's vector differ from its own (erroneous counts) fails ([`lengths_error`],
    /// `buf` untouched), which is every rank, since every rank waits for every post. The
    /// word holds `mark` too, the [`counts_mark`](crate::counts_mark) of the block counts
    /// (0 when they are alike): counts that differ with the same sum fail alike.
    pub fn reduce_scatter<F: Fn(&[u8], &mut [u8]) + ?Sized>(
        &self,
        send: Option<&[u8]>,
        buf: &mut [u8],
        (at, n, mark): (usize, usize, usize),
        red: &F,
    ) -> Result<()> {
        let k = self.next();
        let input = send.unwrap_or(&*buf);
        let total = input.len();
        assert!(
            at + n <= total && n <= buf.len() && total <= DATA,
            "block outside the vector"
        );
        if self.size == 2 {
            return self.reduce_scatter_two(k, send, buf, (at, n, mark), red);
        }
        self.post_len(k, total | mark, input);
        self.wait_all(k);
        if let Err(e) = self.lengths_agree(k, total | mark, "reduce_scatter", 0..self.size) {
            self.finish(k);
            return Err(e);
        }
        if n > 0 {
            let out = &mut buf[..n];
            let last = self.size - 1;
            // SAFETY: every rank stamped `k` (waited above) and we finish `k` only after
            // the reads; every rank posted a vector as long as ours after its length word
            // (checked above), `at + n` within it.
            out.copy_from_slice(unsafe { self.peer(last, k, 8 + at, n) });
            for r in (0..last).rev() {
                // SAFETY: as above; the view does not overlap `out`.
                red(unsafe { self.peer(r, k, 8 + at, n) }, out); // out = x_r ∘ out
            }
        }
        self.finish(k);
        Ok(())
    }

    /// [`Seg::reduce_scatter`] on two ranks (collective `k`, numbered): the vector is block
    /// 0 then block 1, and each rank posts only the other's block (the bytes that follow
    /// ours on rank 0, that precede ours on rank 1), so half the vector's lines cross
    /// between the cores; each then folds the other's post with its own block in rank order
    /// (`x0 ∘ x1`). In place, rank 0's block is its result's place: it is copied aside first.
    /// The post starts with the whole vector's length word, checked as there.
    fn reduce_scatter_two<F: Fn(&[u8], &mut [u8]) + ?Sized>(
        &self,
        k: u64,
        send: Option<&[u8]>,
        buf: &mut [u8],
        (at, n, mark): (usize, usize, usize),
        red: &F,
    ) -> Result<()> {
        let me = self.rank;
        let input = send.unwrap_or(&*buf);
        let total = input.len();
        let theirs = if me == 0 { at + n..total } else { 0..at };
        self.post_len(k, total | mark, &input[theirs]);
        self.wait_all(k);
        if let Err(e) = self.lengths_agree(k, total | mark, "reduce_scatter", 0..2) {
            self.finish(k);
            return Err(e);
        }
        if n > 0 {
            // SAFETY: the other rank stamped `k` (waited above), posting our block of its
            // vector after its length word (the same vector length as ours: checked
            // above; `n <= DATA` bytes), and we finish `k` only after the reads.
            let other = unsafe { self.peer(1 - me, k, 8, n) };
            match (me, send) {
                // out = x0 ∘ x1, x1 ours: our block first, then fold the other's into it.
                (1, Some(s)) => {
                    buf[..n].copy_from_slice(&s[at..at + n]);
                    red(other, &mut buf[..n]);
                }
                (1, None) => {
                    buf.copy_within(at..at + n, 0);
                    red(other, &mut buf[..n]);
                }
                // x0 ours: the other's block into `out`, ours folded into it.
                (_, Some(s)) => {
                    buf[..n].copy_from_slice(other);
                    red(&s[at..at + n], &mut buf[..n]);
                }
                (_, None) => {
                    /// Room for our block (at most `DATA` bytes), aligned for any kernel.
                    #[repr(C, align(64))]
                    struct Aside([std::mem::MaybeUninit<u8>; DATA]);
                    let mut aside = Aside([std::mem::MaybeUninit::uninit(); DATA]);
                    let mine = aside.0.as_mut_ptr().cast::<u8>();
                    // SAFETY: `n <= DATA` bytes (the vector's length, asserted above) into
                    // `aside`, from `buf[at..at + n]` (asserted by the caller), which `aside`
                    // does not overlap; the view then covers exactly the bytes written.
                    let mine = unsafe {
                        std::ptr::copy_nonoverlapping(buf.as_ptr().add(at), mine, n);
                        std::slice::from_raw_parts(mine.cast_const(), n)
                    };
                    buf[..n].copy_from_slice(other);
                    red(mine, &mut buf[..n]);
                }
            }
        }
        self.finish(k);
        Ok(())
    }
}

/// Flag of a 2-rank alltoallv's pair post ([`put_pair`]), in the low byte of its first word
/// (a table's flag is 1, an address table's 2, no post's 0).
pub(super) const PAIR: u64 = 3;
/// Bit of a pair post's first word where the length of our own block starts (below it,
/// from bit 8, the length of the block posted); own blocks of `2^40` bytes or more take
/// the table's path.
const PAIR_OWN_SHIFT: u32 = 24;
// A posted block (at most `CAP - 8` bytes) fits the bits from 8 below the own length.
const _: () = assert!(CAP - 8 < 1 << (PAIR_OWN_SHIFT - 8));

/// A pair post's first word: [`PAIR`], the length `n` of the block posted, the length
/// `own` of our own block (less than `2^40`, and `n <= CAP - 8`: checked by the caller).
fn pair_word(n: usize, own: usize) -> u64 {
    PAIR | (n as u64) << 8 | (own as u64) << PAIR_OWN_SHIFT
}

/// The lengths in a pair post's first word ([`pair_word`]): the block posted, then the
/// poster's own block.
pub(super) fn pair_lens(w: u64) -> (usize, usize) {
    (
        ((w >> 8) & ((1 << (PAIR_OWN_SHIFT - 8)) - 1)) as usize,
        (w >> PAIR_OWN_SHIFT) as usize,
    )
}

/// Write a 2-rank alltoallv's pair post at `base` (a buffer's [`CAP`] bytes), rank `me`'s:
/// one word ([`PAIR`], the length `n` of our block for the peer, the length of our own
/// block), then the peer's block (`n` bytes of `send` at `sdispls[peer]`) right after it,
/// as alltoall posts its block: no table, and the peer reads the block where it knows it
/// is. Returns false (nothing written) when the block does not fit a buffer with the word,
/// or the arguments do not describe 2 blocks inside `send`: the caller posts a table or
/// addresses then ([`put_table`]).
///
/// The table's post on 2 ranks (a flag, both entries, the block after them, each rank also
/// reading its own flag back after the peer's) cost far vCPUs one more cache-line
/// transfer on the critical path than alltoall's post: np=2 far, rank 0's call 0.55-0.60
/// against alltoall's 0.40-0.43 us at 4 B, rank 1's 0.34-0.37 against 0.21-0.23 at 64 B
/// (the same lines written and read; not reading our own flag back recovered 4 B only,
/// this post both).
///
/// # Safety
/// `base` is valid for `CAP` bytes of writes.
unsafe fn put_pair(
    base: *mut u8,
    me: usize,
    (send, scounts, sdispls): (&[u8], &[usize], &[usize]),
) -> bool {
    let peer = 1 - me;
    let ([s0, s1], [d0, d1]) = (scounts, sdispls) else {
        return false;
    };
    let inside = |d: &usize, c: &usize| d.checked_add(*c).is_some_and(|e| e <= send.len());
    let (n, own) = (scounts[peer], scounts[me]);
    if n > CAP - 8 || own >> (64 - PAIR_OWN_SHIFT) != 0 || !inside(d0, s0) || !inside(d1, s1) {
        return false;
    }
    // SAFETY: the word and the block take `8 + n <= CAP` bytes (checked above); the read
    // of `send` lies within it (checked above).
    unsafe {
        base.cast::<u64>().write_unaligned(pair_word(n, own));
        std::ptr::copy_nonoverlapping(send.as_ptr().add(sdispls[peer]), base.add(8), n);
    }
    true
}

/// The peer's block of a 2-rank alltoallv from its pair post at `base` ([`put_pair`]; we
/// are rank `1 - peer`) into `recv` (`rcounts[peer]` bytes at `rdispls[peer]`): `None`
/// when the peer posted no pair post (nothing copied), else `Some(ok)`, `ok` false (nothing
/// copied) when its length differs from our count or does not fit `recv`.
///
/// # Safety
/// The peer's post is written, visible and unchanged while this runs.
unsafe fn take_pair(
    base: *const u8,
    peer: usize,
    (recv, rcounts, rdispls): (&mut [u8], &[usize], &[usize]),
) -> Option<bool> {
    // SAFETY: caller contract: the post's first word is written.
    let w = unsafe { base.cast::<u64>().read_unaligned() };
    if w & 0xff != PAIR {
        return None;
    }
    let (n, _) = pair_lens(w);
    let (Some(&c), Some(&d)) = (rcounts.get(peer), rdispls.get(peer)) else {
        return Some(false);
    };
    if n != c || d.checked_add(n).is_none_or(|e| e > recv.len()) || n > CAP - 8 {
        return Some(false);
    }
    // SAFETY: the block's `n <= CAP - 8` bytes follow the word (checked above).
    let src = unsafe { std::slice::from_raw_parts(base.add(8), n) };
    recv[d..d + n].copy_from_slice(src);
    Some(true)
}

/// Write an alltoallv's blocks at `base` (a buffer's [`CAP`] bytes) for `p` ranks: a
/// flag word (1: the table follows), then per rank `j` the offset and length of its block
/// (`u32` each), then the blocks back to back (block `j`: `scounts[j]` bytes of `send` at
/// `sdispls[j]`), except the block of rank `me` (our own, which stays where it is or we
/// copy ourselves: its entry has its length and no data); or only the flag 0 when they do not fit one
/// buffer (or the arguments do not describe `p` blocks inside `send`). Returns whether
/// they fit.
///
/// # Safety
/// `base` is valid for `CAP` bytes of writes.
unsafe fn put_table(
    base: *mut u8,
    (p, me): (usize, usize),
    (send, scounts, sdispls): (&[u8], &[usize], &[usize]),
) -> bool {
    let head = 8 + 8 * p;
    if p == 2 && scounts.len() == 2 && sdispls.len() == 2 {
        // SAFETY: caller contract.
        return unsafe { put_pair_table(base, me, head, (send, scounts, sdispls)) };
    }
    let posted = |j: usize| if j == me { 0 } else { scounts[j] };
    let fits = scounts.len() == p
        && sdispls.len() == p
        && head + (0..p).map(posted).sum::<usize>() <= CAP
        && (0..p).all(|j| sdispls[j] + scounts[j] <= send.len());
    // SAFETY: every write is within `head + posted total <= CAP` bytes (checked in `fits`),
    // every read of `send` within its length.
    unsafe {
        base.cast::<u64>().write_unaligned(u64::from(fits));
        if fits {
            let mut off = head;
            for j in 0..p {
                let at = base.add(8 + 8 * j).cast::<u32>();
                at.write_unaligned(off as u32);
                at.add(1).write_unaligned(scounts[j] as u32);
                let n = posted(j);
                std::ptr::copy_nonoverlapping(send.as_ptr().add(sdispls[j]), base.add(off), n);
                off += n;
            }
        }
    }
    fits
}

/// [`put_table`] on two ranks (`me` is 0 or 1, two counts and displacements): the same
/// table, written without its loops over the ranks (the small alltoallv's instruction
/// count): entry 0 at `head`, entry 1 after the posted bytes of block 0 (none when block 0
/// is ours), the peer's block at `head`.
///
/// # Safety
/// As [`put_table`].
unsafe fn put_pair_table(
    base: *mut u8,
    me: usize,
    head: usize,
    (send, scounts, sdispls): (&[u8], &[usize], &[usize]),
) -> bool {
    let peer = 1 - me;
    let n = scounts[peer];
    let fits = head + n <= CAP
        && sdispls[0] + scounts[0] <= send.len()
        && sdispls[1] + scounts[1] <= send.len();
    // SAFETY: every write is within `head + n <= CAP` bytes (checked in `fits`), the read
    // of `send` within its length.
    unsafe {
        base.cast::<u64>().write_unaligned(u64::from(fits));
        if fits {
            let first = if me == 0 { 0 } else { scounts[0] };
            let at = base.add(8).cast::<u32>();
            at.write_unaligned(head as u32);
            at.add(1).write_unaligned(scounts[0] as u32);
            at.add(2).write_unaligned((head + first) as u32);
            at.add(3).write_unaligned(scounts[1] as u32);
            std::ptr::copy_nonoverlapping(send.as_ptr().add(sdispls[peer]), base.add(head), n);
        }
    }
    fits
}

/// Copy block `me` of `send` (`scounts[me]` bytes at `sdispls[me]`) to its place in
/// `recv` (`rcounts[me]` bytes at `rdispls[me]`); false (nothing copied) when the lengths
/// differ or either block is out of its buffer.
fn own_block(
    (send, scounts, sdispls): (&[u8], &[usize], &[usize]),
    (recv, rcounts, rdispls): (&mut [u8], &[usize], &[usize]),
    me: usize,
) -> bool {
    let (Some(&n), Some(&s), Some(&rn), Some(&r)) = (
        scounts.get(me),
        sdispls.get(me),
        rcounts.get(me),
        rdispls.get(me),
    ) else {
        return false;
    };
    if n != rn || s + n > send.len() || r + n > recv.len() {
        return false;
    }
    recv[r..r + n].copy_from_slice(&send[s..s + n]);
    true
}

/// Rank `me` of `p` takes its block from every rank's table ([`put_table`]; `data(r)`:
/// where rank `r` wrote it) into `recv` (block `j`: `rcounts[j]` bytes at `rdispls[j]`).
/// `None`: some rank's blocks did not fit (nothing copied: every rank sees the same flags,
/// so all move the data otherwise); `Some(ok)`, `ok` false if some block's length differed
/// from its `rcounts` entry (such blocks are not copied). Our own block is not posted
/// (see [`Seg::alltoallv`]) and is left alone.
///
/// # Safety
/// Every rank's table is written, visible and unchanged while this runs.
unsafe fn take_table(
    (me, p): (usize, usize),
    data: impl Fn(usize) -> *mut u8,
    (recv, rcounts, rdispls): (&mut [u8], &[usize], &[usize]),
) -> Option<bool> {
    if p == 2 {
        // SAFETY: caller contract.
        return unsafe { take_pair_table(me, data, (recv, rcounts, rdispls)) };
    }
    // SAFETY: caller contract: the flag is the first 8 written bytes.
    if (0..p).any(|r| unsafe { data(r).cast::<u64>().read_unaligned() } != 1) {
        return None;
    }
    let mut ok = rcounts.len() == p && rdispls.len() == p;
    for j in (0..p).filter(|&j| j != me) {
        // SAFETY: rank `j`'s flag says its table follows; entry `me` lies within it.
        let (off, len) = unsafe {
            let at = data(j).add(8 + 8 * me).cast::<u32>();
            (
                at.read_unaligned() as usize,
                at.add(1).read_unaligned() as usize,
            )
        };
        if !ok || len != rcounts[j] || rdispls[j] + len > recv.len() || off + len > CAP {
            ok = false;
            continue;
        }
        // SAFETY: `off + len <= CAP` (checked), within rank `j`'s buffer.
        let src = unsafe { std::slice::from_raw_parts(data(j).add(off).cast_const(), len) };
        recv[rdispls[j]..rdispls[j] + len].copy_from_slice(src);
    }
    Some(ok)
}

/// [`take_table`] on two ranks (`me` is 0 or 1): the same checks and copy, without its
/// loops over the ranks.
///
/// # Safety
/// As [`take_table`].
unsafe fn take_pair_table(
    me: usize,
    data: impl Fn(usize) -> *mut u8,
    (recv, rcounts, rdispls): (&mut [u8], &[usize], &[usize]),
) -> Option<bool> {
    let peer = 1 - me;
    // SAFETY: caller contract: the flag is the first 8 written bytes of either post.
    let flags = unsafe {
        (
            data(0).cast::<u64>().read_unaligned(),
            data(1).cast::<u64>().read_unaligned(),
        )
    };
    if flags != (1, 1) {
        return None;
    }
    if rcounts.len() != 2 || rdispls.len() != 2 {
        return Some(false);
    }
    // SAFETY: the peer's flag says its table follows; entry `me` lies within it.
    let (off, len) = unsafe {
        let at = data(peer).add(8 + 8 * me).cast::<u32>();
        (
            at.read_unaligned() as usize,
            at.add(1).read_unaligned() as usize,
        )
    };
    if len != rcounts[peer] || rdispls[peer] + len > recv.len() || off + len > CAP {
        return Some(false);
    }
    // SAFETY: `off + len <= CAP` (checked), within the peer's buffer.
    let src = unsafe { std::slice::from_raw_parts(data(peer).add(off).cast_const(), len) };
    recv[rdispls[peer]..rdispls[peer] + len].copy_from_slice(src);
    Some(true)
}

#[cfg(test)]
mod remote_ranks_tests {
    use super::remote_ranks;

    #[test]
    fn ranks_are_remote_only_pinned_apart_on_cpus_of_at_most_two_ranks() {
        // np=4 block (CPUs 0, 0, 1, 1 as plus one): the other CPU's ranks.
        let block = [1, 1, 2, 2];
        assert_eq!(remote_ranks(&block, 0), [false, false, true, true]);
        assert_eq!(remote_ranks(&block, 3), [true, true, false, false]);
        // Cyclic.
        assert_eq!(remote_ranks(&[1, 2, 1, 2], 1), [true, false, true, false]);
        // np=8 block: 4 a CPU, none.
        assert_eq!(remote_ranks(&[1, 1, 1, 1, 2, 2, 2, 2], 0), [false; 8]);
        // np=3: one CPU with one rank, the other with two.
        assert_eq!(remote_ranks(&[1, 2, 2], 1), [true, false, false]);
        // A rank not pinned (0) is never remote, nor is anybody to it.
        assert_eq!(remote_ranks(&[1, 0, 2], 0), [false, false, true]);
        assert_eq!(remote_ranks(&[1, 0, 2], 1), [false, false, false]);
    }

    #[test]
    fn mates_are_the_ranks_of_our_cpu_when_it_has_at_most_two() {
        use super::cpu_mates;
        // np=4 cyclic (CPUs 0, 1, 0, 1 as plus one) and block.
        assert_eq!(cpu_mates(&[1, 2, 1, 2], 1), [3]);
        assert_eq!(cpu_mates(&[1, 2, 1, 2], 2), [0]);
        assert_eq!(cpu_mates(&[1, 1, 2, 2], 3), [2]);
        // Alone on our CPU (np=3): none.
        assert_eq!(cpu_mates(&[1, 2, 2], 0), [0usize; 0]);
        // Crowded (np=8 block) or not pinned: none.
        assert_eq!(cpu_mates(&[1, 1, 1, 1, 2, 2, 2, 2], 0), [0usize; 0]);
        assert_eq!(cpu_mates(&[0, 0, 1, 1], 0), [0usize; 0]);
    }
}
