//! Which algorithm each collective call ran: one relaxed counter per algorithm of every
//! collective, blocking, nonblocking (also persistent: counted at each start) and on
//! intercommunicators (a few nanoseconds per collective, no lock), read by the tools
//! interface's performance variables ([`pvars`]) and the job profile. The same counts per
//! communicator (variables bound to `MPI_T_BIND_MPI_COMM`, named `<component>_comm_...`)
//! are kept only for the communicators a tool watches ([`watch`]): unwatched, they cost
//! one relaxed load per collective. The algorithms that
//! build a collective out of others (reduce + broadcast, the intercommunicator
//! collectives' local steps) call the parts' algorithms directly, so one call counts once,
//! except that an intercommunicator collective's local steps run as intracommunicator
//! collectives and count there too. The run counted last (its communicator and algorithm,
//! one relaxed store) is kept as well, so that a barrier can tell that the collective
//! called before it on its communicator was a barrier ([`last_was`]).

use oxmpi_engine::{CommBinding, CommId, Pvar, PvarClass};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

macro_rules! algorithms {
    ($($v:ident: $name:literal, $cat:literal, $desc:literal;)*) => {
        /// A collective algorithm whose runs are counted.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Alg { $(#[doc = $desc] $v,)* }

        const NAMES: &[(&str, &str, &str)] = &[$(($name, $cat, $desc),)*];

        /// One reader per counter (a `fn` pointer cannot capture the index).
        const READ: &[fn(&oxmpi_engine::Stats) -> u64] =
            &[$(|_| COUNTS[Alg::$v as usize].load(Ordering::Relaxed),)*];

        /// One reader per counter of a watched communicator.
        const READ_COMM: &[fn(CommId) -> u64] = &[$(|c| comm_runs(c, Alg::$v),)*];
    };
}

algorithms! {
    SmBarrier: "coll_sm_barrier_calls", "coll_sm", "Barriers run by the shared-memory component (but those counted in coll_sm_barrier_meet_calls)";
    SmBarrierMeet: "coll_sm_barrier_meet_calls", "coll_sm", "Barriers run by the shared-memory component right after a barrier on the same communicator (or, on two ranks that do not yield when idle, right after a blocking allreduce or reduce-scatter), where every rank waits for every other's arrival instead of rank 0 leaving first";
    SmBcast: "coll_sm_bcast_calls", "coll_sm", "Broadcasts run by the shared-memory component";
    SmAllreduce: "coll_sm_allreduce_calls", "coll_sm", "Allreduces run by the shared-memory component";
    SmReduce: "coll_sm_reduce_calls", "coll_sm", "Reduces run by the shared-memory component";
    SmScan: "coll_sm_scan_calls", "coll_sm", "Scans and exclusive scans run by the shared-memory component";
    SmAlltoall: "coll_sm_alltoall_calls", "coll_sm", "Alltoalls run by the shared-memory component";
    SmAlltoallv: "coll_sm_alltoallv_calls", "coll_sm", "Alltoallvs (and alltoallws) run by the shared-memory component";
    SmGather: "coll_sm_gather_calls", "coll_sm", "Gathers and gathervs run by the shared-memory component";
    SmScatter: "coll_sm_scatter_calls", "coll_sm", "Scatters and scattervs run by the shared-memory component";
    SmAllgather: "coll_sm_allgather_calls", "coll_sm", "Allgathers and allgathervs run by the shared-memory component";
    SmReduceScatter: "coll_sm_reduce_scatter_calls", "coll_sm", "Reduce-scatters run by the shared-memory component";
    SmNonblocking: "coll_sm_nonblocking_calls", "coll_sm", "Nonblocking collectives of small vectors run by the shared-memory component";
    BcastLinear: "coll_tuned_bcast_linear_calls", "coll_tuned", "Broadcasts run by the linear algorithm";
    BcastPipeline: "coll_tuned_bcast_pipeline_calls", "coll_tuned", "Broadcasts run by the pipelined chain";
    BcastBinomial: "coll_tuned_bcast_binomial_calls", "coll_tuned", "Broadcasts run by the binomial tree";
    BcastScatterAllgather: "coll_tuned_bcast_scatter_allgather_calls", "coll_tuned", "Broadcasts run by scatter + ring allgather";
    AllreduceReduceBcast: "coll_tuned_allreduce_reduce_bcast_calls", "coll_tuned", "Allreduces run as reduce + broadcast";
    AllreduceRecdbl: "coll_tuned_allreduce_recursive_doubling_calls", "coll_tuned", "Allreduces run by recursive doubling";
    AllreduceRing: "coll_tuned_allreduce_ring_calls", "coll_tuned", "Allreduces run by the ring";
    AllreduceRabenseifner: "coll_tuned_allreduce_rabenseifner_calls", "coll_tuned", "Allreduces run by Rabenseifner's algorithm";
    BarrierLinear: "coll_tuned_barrier_linear_calls", "coll_tuned", "Barriers run by the linear algorithm (through rank 0)";
    BarrierDissemination: "coll_tuned_barrier_dissemination_calls", "coll_tuned", "Barriers run by dissemination";
    ReduceLinear: "coll_tuned_reduce_linear_calls", "coll_tuned", "Reduces run by the linear algorithm";
    ReduceBinomial: "coll_tuned_reduce_binomial_calls", "coll_tuned", "Reduces run by the binomial tree";
    AllgatherRecdbl: "coll_tuned_allgather_recursive_doubling_calls", "coll_tuned", "Allgathers run by recursive doubling";
    AllgatherRing: "coll_tuned_allgather_ring_calls", "coll_tuned", "Allgathers run by the ring";
    AllgathervRing: "coll_tuned_allgatherv_ring_calls", "coll_tuned", "Allgathervs run by the ring";
    AllgathervRecdbl: "coll_tuned_allgatherv_recursive_doubling_calls", "coll_tuned", "Allgathervs (blocks in rank order back to back, a power of two of ranks) run by recursive doubling";
    AlltoallLinear: "coll_tuned_alltoall_linear_calls", "coll_tuned", "Alltoalls run by the linear algorithm";
    AlltoallPairwise: "coll_tuned_alltoall_pairwise_calls", "coll_tuned", "Alltoalls run by pairwise exchange";
    AlltoallBruck: "coll_tuned_alltoall_bruck_calls", "coll_tuned", "Alltoalls run by Bruck's algorithm";
    AlltoallvPairwise: "coll_tuned_alltoallv_pairwise_calls", "coll_tuned", "Alltoallvs (and alltoallws) run by pairwise exchange";
    AlltoallvLinear: "coll_tuned_alltoallv_linear_calls", "coll_tuned", "Alltoallvs (and alltoallws) run by the linear algorithm (every transfer posted at once)";
    ReduceScatterReduceScatterv: "coll_tuned_reduce_scatter_reduce_scatterv_calls", "coll_tuned", "Reduce-scatters run as reduce + scatterv";
    ReduceScatterRing: "coll_tuned_reduce_scatter_ring_calls", "coll_tuned", "Reduce-scatters run by the ring";
    GatherLinear: "coll_tuned_gather_linear_calls", "coll_tuned", "Gathers run by the linear algorithm";
    GatherBinomial: "coll_tuned_gather_binomial_calls", "coll_tuned", "Gathers run by the binomial tree";
    GathervLinear: "coll_tuned_gatherv_linear_calls", "coll_tuned", "Gathervs run by the linear algorithm";
    ScatterLinear: "coll_tuned_scatter_linear_calls", "coll_tuned", "Scatters run by the linear algorithm";
    ScatterBinomial: "coll_tuned_scatter_binomial_calls", "coll_tuned", "Scatters run by the binomial tree";
    ScattervLinear: "coll_tuned_scatterv_linear_calls", "coll_tuned", "Scattervs run by the linear algorithm";
    ScanRecdbl: "coll_tuned_scan_recursive_doubling_calls", "coll_tuned", "Scans run by recursive doubling";
    ExscanRecdbl: "coll_tuned_exscan_recursive_doubling_calls", "coll_tuned", "Exclusive scans run by recursive doubling";
    ScanChain: "coll_tuned_scan_chain_calls", "coll_tuned", "Scans run by the pipelined chain (each rank extends its predecessor's prefix segment by segment)";
    ExscanChain: "coll_tuned_exscan_chain_calls", "coll_tuned", "Exclusive scans run by the pipelined chain";
    NeighborExchange: "coll_tuned_neighbor_exchange_calls", "coll_tuned", "Neighbourhood collectives run as one sparse exchange";
    NbcBarrierDissemination: "coll_nbc_barrier_dissemination_calls", "coll_nbc", "Nonblocking (and persistent) barriers run by dissemination";
    NbcBcastBinomial: "coll_nbc_bcast_binomial_calls", "coll_nbc", "Nonblocking (and persistent) broadcasts run by the binomial tree";
    NbcAllreduceRecdbl: "coll_nbc_allreduce_recursive_doubling_calls", "coll_nbc", "Nonblocking (and persistent) allreduces run by recursive doubling";
    NbcAllreduceRabenseifner: "coll_nbc_allreduce_rabenseifner_calls", "coll_nbc", "Nonblocking (and persistent) allreduces run by Rabenseifner's algorithm (recursive-halving reduce-scatter, recursive-doubling allgather)";
    NbcReduceBinomial: "coll_nbc_reduce_binomial_calls", "coll_nbc", "Nonblocking (and persistent) reduces run by the binomial tree";
    NbcAllgathervRing: "coll_nbc_allgatherv_ring_calls", "coll_nbc", "Nonblocking (and persistent) allgathers and allgathervs run by the ring";
    NbcAlltoallvLinear: "coll_nbc_alltoallv_linear_calls", "coll_nbc", "Nonblocking (and persistent) alltoall(v,w)s run with every transfer posted at once";
    NbcGathervLinear: "coll_nbc_gatherv_linear_calls", "coll_nbc", "Nonblocking (and persistent) gathers and gathervs run by the linear algorithm";
    NbcScattervLinear: "coll_nbc_scatterv_linear_calls", "coll_nbc", "Nonblocking (and persistent) scatters and scattervs run by the linear algorithm";
    NbcScanRecdbl: "coll_nbc_scan_recursive_doubling_calls", "coll_nbc", "Nonblocking (and persistent) scans and exclusive scans run by recursive doubling";
    NbcScanChain: "coll_nbc_scan_chain_calls", "coll_nbc", "Nonblocking (and persistent) scans and exclusive scans run by the pipelined chain";
    NbcReduceScatterPairwise: "coll_nbc_reduce_scatter_pairwise_calls", "coll_nbc", "Nonblocking (and persistent) reduce-scatters run by pairwise exchange (each block sent to its rank in one round, folded there in rank order)";
    InterBarrier: "coll_inter_barrier_calls", "coll_inter", "Intercommunicator barriers (leaders swap)";
    InterBcast: "coll_inter_bcast_calls", "coll_inter", "Intercommunicator broadcasts (root to every remote rank)";
    InterGather: "coll_inter_gather_calls", "coll_inter", "Intercommunicator gathers (every remote rank to the root)";
    InterScatter: "coll_inter_scatter_calls", "coll_inter", "Intercommunicator scatters (root to every remote rank)";
    InterAllgather: "coll_inter_allgather_calls", "coll_inter", "Intercommunicator allgathers (every rank with every remote rank)";
    InterAlltoall: "coll_inter_alltoall_calls", "coll_inter", "Intercommunicator alltoalls (every rank with every remote rank)";
    InterReduce: "coll_inter_reduce_calls", "coll_inter", "Intercommunicator reduces (every remote rank to the root)";
    InterAllreduce: "coll_inter_allreduce_calls", "coll_inter", "Intercommunicator allreduces (local reduce, leaders swap, local broadcast)";
    InterReduceScatter: "coll_inter_reduce_scatter_calls", "coll_inter", "Intercommunicator reduce-scatters (local reduce, leaders swap, local scatter)";
    InterNbc: "coll_inter_nbc_calls", "coll_inter", "Nonblocking (and persistent) intercommunicator collectives";
}

const N: usize = NAMES.len();
static COUNTS: [AtomicU64; N] = [const { AtomicU64::new(0) }; N];
// An algorithm fits the low byte of a [`key`].
const _: () = assert!(N <= 256);

/// The [`key`] of the collective run this process counted last (`u64::MAX`: none yet).
static LAST: AtomicU64 = AtomicU64::new(u64::MAX);

/// One word for a run of `a` on `comm`.
#[inline]
fn key(comm: CommId, a: Alg) -> u64 {
    (u64::from(comm.0) << 8) | a as u64
}

/// The watched communicators (by the engine communicator their collectives travel on):
/// readers, and runs per algorithm since the first reader came.
type Watched = HashMap<CommId, (u32, Box<[u64; N]>)>;
static PER_COMM: Mutex<Option<Watched>> = Mutex::new(None);
/// Readers over every watched communicator (0: nothing is counted per communicator).
static WATCHERS: AtomicUsize = AtomicUsize::new(0);

fn per_comm() -> std::sync::MutexGuard<'static, Option<Watched>> {
    PER_COMM.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counts one run of `a` on the collective traffic communicator `comm` (a
/// [`crate::CollComm`]'s shadow).
#[inline]
pub fn count(comm: CommId, a: Alg) {
    COUNTS[a as usize].fetch_add(1, Ordering::Relaxed);
    LAST.store(key(comm, a), Ordering::Relaxed);
    if WATCHERS.load(Ordering::Relaxed) != 0 {
        count_watched(comm, a);
    }
}

/// Whether the collective run this process counted last ([`count`]) was one of `algs` on
/// the collective traffic communicator `comm`. Every collective call counts one run,
/// blocking or nonblocking (at its start), on the segment or point to point, so on a
/// communicator whose collectives no other thread runs meanwhile (MPI's rules) this says
/// whether the collective called before ours on it was one of `algs`, with nothing else
/// between (a collective on another communicator in between also makes it false). Every
/// rank of `comm` calls its collectives in the same order, so all see the same answer
/// unless a rank ran something on another communicator in between.
#[inline]
pub fn last_was(comm: CommId, algs: &[Alg]) -> bool {
    let last = LAST.load(Ordering::Relaxed);
    algs.iter().any(|&a| key(comm, a) == last)
}

/// [`count`] while some communicator is watched.
#[cold]
fn count_watched(comm: CommId, a: Alg) {
    if let Some(e) = per_comm().as_mut().and_then(|m| m.get_mut(&comm)) {
        e.1[a as usize] += 1;
    }
}

/// Starts (`on`) or stops one reader of the algorithm counts on `comm` (the engine
/// communicator its collectives travel on): they count while it has readers.
pub fn watch(comm: CommId, on: bool) {
    let mut g = per_comm();
    let m = g.get_or_insert_with(HashMap::new);
    if on {
        m.entry(comm).or_insert_with(|| (0, Box::new([0; N]))).0 += 1;
        WATCHERS.fetch_add(1, Ordering::Relaxed);
    } else if let Some(e) = m.get_mut(&comm) {
        e.0 -= 1;
        if e.0 == 0 {
            m.remove(&comm);
        }
        WATCHERS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs of `a` on the watched communicator `comm` since it was first watched (0 if it
/// is not watched).
pub fn comm_runs(comm: CommId, a: Alg) -> u64 {
    per_comm()
        .as_ref()
        .and_then(|m| m.get(&comm))
        .map_or(0, |e| e.1[a as usize])
}

/// Runs of `a` so far.
pub fn runs(a: Alg) -> u64 {
    COUNTS[a as usize].load(Ordering::Relaxed)
}

/// `(name, runs)` of every counted algorithm, in [`pvars`] order.
pub fn all_runs() -> impl Iterator<Item = (&'static str, u64)> {
    NAMES
        .iter()
        .zip(&COUNTS)
        .map(|(n, c)| (n.0, c.load(Ordering::Relaxed)))
}

/// The counters as performance variables (continuous counters): the per-process ones,
/// then the per-communicator ones (`coll_tuned_bcast_linear_calls` is
/// `coll_tuned_comm_bcast_linear_calls` on a communicator).
pub fn pvars() -> impl Iterator<Item = &'static Pvar> {
    static ALL: std::sync::OnceLock<Vec<Pvar>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
        let process =
            NAMES
                .iter()
                .zip(READ.iter().copied())
                .map(|(&(name, category, desc), read)| Pvar {
                    name,
                    category,
                    desc,
                    class: PvarClass::Counter,
                    level: 5,
                    continuous: true,
                    comm: None,
                    read,
                });
        let comm =
            NAMES
                .iter()
                .zip(READ_COMM.iter().copied())
                .map(|(&(name, category, desc), read)| {
                    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
                    Pvar {
                        name: leak(format!("{category}_comm_{}", &name[category.len() + 1..])),
                        category,
                        desc: leak(format!(
                            "{desc}, on the communicator the handle is bound to"
                        )),
                        class: PvarClass::Counter,
                        level: 5,
                        continuous: true,
                        comm: Some(CommBinding {
                            read,
                            watch,
                            collective: true,
                            peers: None,
                        }),
                        read: |_| 0,
                    }
                });
        process.chain(comm).collect()
    })
    .iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_read_through_their_pvars() {
        let before = runs(Alg::AllreduceRing);
        count(CommId(0), Alg::AllreduceRing);
        let p = pvars()
            .find(|p| p.name == "coll_tuned_allreduce_ring_calls")
            .unwrap();
        assert!((p.read)(&oxmpi_engine::Stats::default()) > before);
        assert_eq!(pvars().count(), 2 * N);
        assert!(all_runs().any(|(n, _)| n == "coll_sm_barrier_calls"));
    }

    #[test]
    fn watched_communicators_count_their_own_runs() {
        let p = pvars()
            .find(|p| p.name == "coll_tuned_comm_barrier_linear_calls")
            .unwrap();
        let b = p.comm.unwrap();
        assert!(b.collective && p.category == "coll_tuned");
        let (a, c) = (CommId(1000), CommId(1001));
        count(a, Alg::BarrierLinear);
        assert_eq!((b.read)(a), 0, "unwatched: not counted");
        (b.watch)(a, true);
        (b.watch)(a, true);
        count(a, Alg::BarrierLinear);
        count(c, Alg::BarrierLinear);
        count(a, Alg::BarrierDissemination);
        assert_eq!(((b.read)(a), (b.read)(c)), (1, 0));
        assert_eq!(comm_runs(a, Alg::BarrierDissemination), 1);
        (b.watch)(a, false);
        count(a, Alg::BarrierLinear);
        assert_eq!((b.read)(a), 2, "one reader left");
        (b.watch)(a, false);
        (b.watch)(a, false);
        assert_eq!((b.read)(a), 0);
    }
}
