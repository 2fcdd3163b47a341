//! The `sm` component's parameters (`coll_sm_*`), resolved on first use through the
//! `oxmpi-base` registry (`coll_sm_allreduce_large_min` again after a write through the
//! tools interface). They are listed with the framework's other parameters in
//! [`crate::PROVIDER`].

use oxmpi_base::params::{self, ParamDecl, ParamType};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// `coll_sm_enable`.
pub const ENABLE: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "enable",
    ParamType::Bool,
    "true",
    "Shared-memory barrier, bcast, alltoall and allreduce of at most 4 KiB, and \
     allreduce of large vectors (see coll_sm_allreduce_large_min), on communicators \
     whose ranks all run on one node (memfd segments per communicator, made at its \
     first such collective)",
)
.level(5);

/// `coll_sm_allreduce_large_min`.
pub const ALLREDUCE_LARGE_MIN: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "allreduce_large_min",
    ParamType::Int {
        min: 0,
        max: 8 << 20,
    },
    "524288",
    "Allreduce vectors from this many bytes up to 8 MiB go through a per-communicator \
     shared-memory region (each rank reduces its slice of every rank's copy) unless a \
     rank yields when idle (oversubscribed); smaller ones above 4 KiB use the \
     point-to-point algorithms",
)
.level(6)
.runtime();

/// `coll_sm_nonblocking`.
pub const NONBLOCKING: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "nonblocking",
    ParamType::Bool,
    "true",
    "Nonblocking collectives whose contribution per rank is at most 4 KiB (ibarrier, \
     ibcast, ireduce, iallreduce, iscan, iexscan, ialltoall, igather, iscatter, \
     iallgather(v), ireduce_scatter(_block)) go through the communicator's shared-memory \
     segment once an earlier collective made it (with coll_sm_enable); ibcast, igather(v) \
     and iscatter(v) of larger blocks too, by one cross-memory copy per rank up to \
     coll_sm_single_copy_max(_many)",
)
.level(6);

/// `coll_sm_nonblocking_push_min`: the smallest far block (bytes) of a nonblocking
/// allgather(v) in place or alltoall(v/w) out of place on 2 ranks that a rank asks its
/// peer to write into its output (0: none; [`super::nb::SmKind::Alltoallv`]'s `push`).
pub fn nonblocking_push_min() -> usize {
    static MIN: OnceLock<usize> = OnceLock::new();
    *MIN.get_or_init(|| usize::try_from(params::int(&NONBLOCKING_PUSH_MIN)).unwrap_or(0))
}

/// `coll_sm_nonblocking_push_many`: as [`nonblocking_push_min`] for the alltoall(v/w)s out
/// of place on more than 2 ranks (0: none; the default 32 KiB, as the blocking alltoall's
/// `coll_sm_alltoall_push_min`).
pub fn nonblocking_push_many() -> usize {
    static MIN: OnceLock<usize> = OnceLock::new();
    *MIN.get_or_init(|| usize::try_from(params::int(&NONBLOCKING_PUSH_MANY)).unwrap_or(0))
}

/// `coll_sm_spin_first`.
pub const SPIN_FIRST: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "spin_first",
    ParamType::Int {
        min: 0,
        max: 1 << 20,
    },
    "0",
    "When ranks yield when idle (more ranks than cores), a rank waiting in a \
     shared-memory collective first looks this many times at the flag it waits for \
     before it polls the transports and yields the core at every look (0: yield at \
     once; under load looking first was measured slower)",
)
.level(7);

/// `coll_sm_block_after`.
pub const BLOCK_AFTER: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "block_after",
    ParamType::Int {
        min: -1,
        max: 1 << 20,
    },
    "0",
    "When ranks yield when idle (more ranks than cores), a rank waiting in a blocking \
     shared-memory collective yields the core this many times and then sleeps until the \
     rank that owns the flag it waits for writes it (a futex wait, at most \
     coll_sm_sleep_max microseconds at a time; 0, the default: never sleep, yield at every \
     look; -1: after 4 yields on communicators of more than 2 ranks per online CPU, else \
     never). Sleeping helps when other jobs load the cores and costs on an idle machine",
)
.level(7);

/// `coll_sm_sleep_max`.
pub const SLEEP_MAX: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "sleep_max",
    ParamType::Int {
        min: 1,
        max: 60_000_000,
    },
    "1000",
    "Longest sleep, in microseconds, of a rank waiting in a shared-memory collective \
     (see coll_sm_block_after) before it polls the transports and looks again",
)
.level(9);

/// `coll_sm_barrier_release`.
pub const BARRIER_RELEASE: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "barrier_release",
    ParamType::Bool,
    "true",
    "The shared-memory barrier gathers the arrivals at rank 0, which leaves first and then \
     releases the others (a collective rooted at rank 0 right after it starts one handoff \
     earlier, also when ranks yield when idle), except in a barrier called right after a \
     barrier on the same communicator (no collective of any kind between), or on two ranks \
     that do not yield when idle right after a blocking allreduce or reduce-scatter, where \
     every rank waits for every other's arrival as with this off (the last to arrive leaves \
     first: one handoff instead of two)",
)
.level(7);

/// `coll_sm_single_copy_max`.
pub const SINGLE_COPY_MAX: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "single_copy_max",
    ParamType::Int {
        min: 0,
        max: 1 << 30,
    },
    "32768",
    "Bcast, gather and scatter (and their v and nonblocking forms) on 2 ranks whose block \
     (per rank) is larger than a shared-memory buffer (4 KiB) and at most this many bytes \
     move by one cross-memory copy (process_vm_readv/writev) between the root's and each \
     rank's buffer, when every rank of the communicator reaches every other that way; \
     larger ones, and all when 0, go point to point (see coll_sm_single_copy_max_many for \
     more ranks)",
)
.level(6);

/// `coll_sm_single_copy_max_many`.
pub const SINGLE_COPY_MAX_MANY: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "single_copy_max_many",
    ParamType::Int {
        min: 0,
        max: 1 << 30,
    },
    "1048576",
    "coll_sm_single_copy_max for communicators of more than 2 ranks, where the \
     point-to-point algorithms move the blocks one message after another, each behind a \
     clear-to-send round trip that needs its receiver running (a context switch each when \
     ranks share cores); 0: none",
)
.level(6);

/// `coll_sm_alltoall_push_min`.
pub const ALLTOALL_PUSH_MIN: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "alltoall_push_min",
    ParamType::Int {
        min: 0,
        max: 1 << 30,
    },
    "32768",
    "Out-of-place alltoall(v)s whose blocks move by \
     cross-memory copies (too large for a shared-memory buffer): when every rank's largest \
     receive block is at least this many bytes, each rank writes its blocks into the \
     receivers' buffers (process_vm_writev, at the receive layout they post) instead of \
     each receiver reading them from the senders' buffers (process_vm_readv); 0: always \
     read",
)
.level(7);

/// `coll_sm_nonblocking_push_min`.
pub const NONBLOCKING_PUSH_MIN: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "nonblocking_push_min",
    ParamType::Int {
        min: 0,
        max: 1 << 30,
    },
    "32768",
    "Nonblocking allgather(v)s in place and alltoall(v/w)s out of place on 2 ranks whose \
     blocks move by cross-memory copies (too large for a shared-memory buffer): a rank \
     asks its peer to write its block, when of at least this many bytes, into its receive \
     buffer (process_vm_writev, at the address it posts), as the blocking allgather in \
     place and alltoall on 2 ranks do, instead of reading it from the peer's buffer \
     (process_vm_readv); 0: always read",
)
.level(7);

/// `coll_sm_nonblocking_push_many`.
pub const NONBLOCKING_PUSH_MANY: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "nonblocking_push_many",
    ParamType::Int {
        min: 0,
        max: 1 << 30,
    },
    "32768",
    "coll_sm_nonblocking_push_min for the nonblocking alltoall(v/w)s out of place on more \
     than 2 ranks: a rank asks each sender of a far block of at least this many bytes to \
     write it into its receive buffer (process_vm_writev) instead of reading it; 0: \
     always read",
)
.level(7);

/// `coll_sm_nonblocking_share_chunk`.
pub const NONBLOCKING_SHARE_CHUNK: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "nonblocking_share_chunk",
    ParamType::Int {
        min: 0,
        max: 1 << 24,
    },
    "65536",
    "Nonblocking scatterv in place on more than 2 ranks whose other blocks all move by \
     cross-memory copies: the root shares each block's copy with its reader in chunks of \
     this many bytes (rounded down to a power of two, at least 4096), writing the chunks \
     the reader has not claimed yet while it waits (blocks of at least two chunks); 0: \
     every reader copies its whole block",
)
.level(7);

/// `coll_sm_nonblocking_share_chunk`: log2 of the chunk of a shared nonblocking scatterv
/// block (`None`: not shared; [`super::nb::SmKind::Scatterv`]).
pub fn nonblocking_share_shift() -> Option<u32> {
    static SHIFT: OnceLock<Option<u32>> = OnceLock::new();
    *SHIFT.get_or_init(|| {
        let v = usize::try_from(params::int(&NONBLOCKING_SHARE_CHUNK)).unwrap_or(0);
        (v != 0).then(|| v.max(4096).ilog2())
    })
}

/// `coll_sm_nonblocking_large_max`.
pub const NONBLOCKING_LARGE_MAX: ParamDecl = ParamDecl::new(
    "coll",
    "sm",
    "nonblocking_large_max",
    ParamType::Int {
        min: 0,
        max: 1 << 20,
    },
    "1048576",
    "Nonblocking allreduce, reduce, scan, exscan and reduce-scatter (and the blocking \
     reduce-scatter, and the blocking allreduce when ranks yield when idle) on more than 2 ranks of vectors larger than a shared-memory buffer \
     (4 KiB) and at most this many bytes (at most 1 MiB) go through the segment's \
     nonblocking large region (with coll_sm_nonblocking): each rank copies its vector into \
     its slot at the call and the ranks that need it fold it from there in their progress; \
     larger ones (but nonblocking reduce-scatters of equal blocks up to 16 MiB, which go \
     through it in phases), and all when 0, run as schedules of messages",
)
.level(6);

/// `coll_sm_nonblocking_large_max`: the largest vector (bytes) of a nonblocking reduction
/// through the segment's nonblocking large region (0: none).
pub fn nonblocking_large_max() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| {
        let v = usize::try_from(params::int(&NONBLOCKING_LARGE_MAX)).unwrap_or(0);
        v.min(super::NB_LARGE_MAX)
    })
}

/// `coll_sm_single_copy_max`: largest block (bytes) of a rooted collective on 2 ranks moved
/// by one cross-memory copy ([`super::Seg::rooted_cma`]; 0: none).
pub fn single_copy_max() -> usize {
    static MAX: OnceLock<usize> = OnceLock::new();
    *MAX.get_or_init(|| usize::try_from(params::int(&SINGLE_COPY_MAX)).unwrap_or(0))
}

/// The largest block (bytes) of a rooted collective on `p` ranks moved by one cross-memory
/// copy: [`single_copy_max`] on 2 ranks, `coll_sm_single_copy_max_many` on more.
pub fn single_copy_max_for(p: usize) -> usize {
    static MANY: OnceLock<usize> = OnceLock::new();
    if p <= 2 {
        return single_copy_max();
    }
    *MANY.get_or_init(|| usize::try_from(params::int(&SINGLE_COPY_MAX_MANY)).unwrap_or(0))
}

/// `coll_sm_alltoall_push_min`: the smallest receive block (bytes) of an out-of-place
/// alltoall(v) by cross-memory copies that its senders write into place (0: none;
/// [`super::Seg::alltoallv`]).
pub fn alltoall_push_min() -> usize {
    static MIN: OnceLock<usize> = OnceLock::new();
    *MIN.get_or_init(|| usize::try_from(params::int(&ALLTOALL_PUSH_MIN)).unwrap_or(0))
}

/// `coll_sm_spin_first`: looks at a flag before a waiting rank that yields when idle
/// starts yielding (read once per segment).
pub fn spin_first() -> u32 {
    u32::try_from(params::int(&SPIN_FIRST)).unwrap_or(0)
}

/// Yields before a waiting rank that yields when idle sleeps, on a communicator of `size`
/// ranks (0, the default: never; read once per segment): `coll_sm_block_after`, or when it
/// is -1, 4 above 2 ranks per online CPU and 0 otherwise. With 2 ranks per core a yield
/// hands the core to the other rank at once, and sleeping was measured slower (np=4 on 2
/// vCPUs, 1 MiB: bcast 197 against 331 us, allgather 979 against 1057). With 4 ranks per
/// core and other jobs on the cores it was faster (np=8, 1 MiB allgather 7244 against 4388
/// us, load 20-24), but on an idle machine slower (np=8, medians of 10 interleaved rounds:
/// allreduce 16 B 17.1 against 15.2 us, allgather 16 B 14.7 against 8.9, alltoall 1 MiB
/// 7644 against 6543; after 256 yields level with never), hence off by default.
pub fn block_after(size: usize) -> u32 {
    match params::int(&BLOCK_AFTER) {
        -1 if size > 2 * oxmpi_engine::sys::online_cpus() => 4,
        n => u32::try_from(n).unwrap_or(0),
    }
}

/// `coll_sm_sleep_max`: the longest sleep of a waiting rank (read once per segment).
pub fn sleep_max() -> std::time::Duration {
    std::time::Duration::from_micros(u64::try_from(params::int(&SLEEP_MAX)).unwrap_or(1000))
}

/// `coll_sm_barrier_release`: whether the barrier lets rank 0 out first.
pub fn barrier_release() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| params::flag(&BARRIER_RELEASE))
}

/// `coll_sm_nonblocking`: whether small nonblocking collectives may use the segment.
pub fn nonblocking() -> bool {
    static NB: OnceLock<bool> = OnceLock::new();
    *NB.get_or_init(|| params::flag(&NONBLOCKING))
}

/// `coll_sm_enable`: whether the shared-memory collectives may run. Never with fault
/// tolerance (`mpi_ft_enable`): they wait on shared flags and cannot notice a dead member,
/// while the point-to-point algorithms fail with the engine's `ProcFailed`/`Revoked`.
pub fn enabled() -> bool {
    static SM: OnceLock<bool> = OnceLock::new();
    *SM.get_or_init(|| params::flag(&ENABLE) && !params::flag(&oxmpi_engine::FT_ENABLE))
}

/// Not read from the registry yet.
const UNREAD: usize = usize::MAX;

static LARGE_MIN: AtomicUsize = AtomicUsize::new(UNREAD);

/// `coll_sm_allreduce_large_min`: smallest allreduce vector (bytes) for the shared-memory
/// large-vector path (re-read by [`crate::base::params::reload`]).
pub fn allreduce_large_min() -> usize {
    let v = LARGE_MIN.load(Ordering::Relaxed);
    if v != UNREAD {
        return v;
    }
    let v = read_large_min();
    LARGE_MIN.store(v, Ordering::Relaxed);
    v
}

fn read_large_min() -> usize {
    usize::try_from(params::int(&ALLREDUCE_LARGE_MIN)).unwrap_or(0)
}

/// Re-reads `coll_sm_allreduce_large_min` (if it was read before).
pub(crate) fn reload() {
    if LARGE_MIN.load(Ordering::Relaxed) != UNREAD {
        LARGE_MIN.store(read_large_min(), Ordering::Relaxed);
    }
}
