//! Which algorithm each collective call ran: one relaxed counter per algorithm of every
//! collective, blocking, nonblocking (also persistent: counted at each start) and on
//! intercommunicators (a few nanoseconds per collective, no lock), read by the tools
//! interface's performance variables ([`pvars`]) and the job profile. The algorithms that
//! build a collective out of others (reduce + broadcast, the intercommunicator
//! collectives' local steps) call the parts' algorithms directly, so one call counts once,
//! except that an intercommunicator collective's local steps run as intracommunicator
//! collectives and count there too.

use oxmpi_engine::{Pvar, PvarClass};
use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! algorithms {
    ($($v:ident: $name:literal, $cat:literal, $desc:literal;)*) => {
        /// A collective algorithm whose runs are counted.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Alg { $(#[doc = $desc] $v,)* }

        const NAMES: &[(&str, &str, &str)] = &[$(($name, $cat, $desc),)*];

        /// One reader per counter (a `fn` pointer cannot capture the index).
        const READ: &[fn(&oxmpi_engine::Stats) -> u64] =
            &[$(|_| COUNTS[Alg::$v as usize].load(Ordering::Relaxed),)*];
    };
}

algorithms! {
    SmBarrier: "coll_sm_barrier_calls", "coll_sm", "Barriers run by the shared-memory component";
    SmBcast: "coll_sm_bcast_calls", "coll_sm", "Broadcasts run by the shared-memory component";
    SmAllreduce: "coll_sm_allreduce_calls", "coll_sm", "Allreduces run by the shared-memory component";
    SmAlltoall: "coll_sm_alltoall_calls", "coll_sm", "Alltoalls run by the shared-memory component";
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
    AlltoallLinear: "coll_tuned_alltoall_linear_calls", "coll_tuned", "Alltoalls run by the linear algorithm";
    AlltoallPairwise: "coll_tuned_alltoall_pairwise_calls", "coll_tuned", "Alltoalls run by pairwise exchange";
    AlltoallBruck: "coll_tuned_alltoall_bruck_calls", "coll_tuned", "Alltoalls run by Bruck's algorithm";
    AlltoallvPairwise: "coll_tuned_alltoallv_pairwise_calls", "coll_tuned", "Alltoallvs (and alltoallws) run by pairwise exchange";
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
    NeighborExchange: "coll_tuned_neighbor_exchange_calls", "coll_tuned", "Neighbourhood collectives run as one sparse exchange";
    NbcBarrierDissemination: "coll_nbc_barrier_dissemination_calls", "coll_nbc", "Nonblocking (and persistent) barriers run by dissemination";
    NbcBcastBinomial: "coll_nbc_bcast_binomial_calls", "coll_nbc", "Nonblocking (and persistent) broadcasts run by the binomial tree";
    NbcAllreduceRecdbl: "coll_nbc_allreduce_recursive_doubling_calls", "coll_nbc", "Nonblocking (and persistent) allreduces run by recursive doubling";
    NbcReduceBinomial: "coll_nbc_reduce_binomial_calls", "coll_nbc", "Nonblocking (and persistent) reduces run by the binomial tree";
    NbcAllgathervRing: "coll_nbc_allgatherv_ring_calls", "coll_nbc", "Nonblocking (and persistent) allgathers and allgathervs run by the ring";
    NbcAlltoallvLinear: "coll_nbc_alltoallv_linear_calls", "coll_nbc", "Nonblocking (and persistent) alltoall(v,w)s run with every transfer posted at once";
    NbcGathervLinear: "coll_nbc_gatherv_linear_calls", "coll_nbc", "Nonblocking (and persistent) gathers and gathervs run by the linear algorithm";
    NbcScattervLinear: "coll_nbc_scatterv_linear_calls", "coll_nbc", "Nonblocking (and persistent) scatters and scattervs run by the linear algorithm";
    NbcScanRecdbl: "coll_nbc_scan_recursive_doubling_calls", "coll_nbc", "Nonblocking (and persistent) scans and exclusive scans run by recursive doubling";
    NbcReduceScatterReduceScatterv: "coll_nbc_reduce_scatter_reduce_scatterv_calls", "coll_nbc", "Nonblocking (and persistent) reduce-scatters run as reduce + scatterv";
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

/// Counts one run of `a`.
#[inline]
pub fn count(a: Alg) {
    COUNTS[a as usize].fetch_add(1, Ordering::Relaxed);
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

/// The counters as performance variables (continuous counters).
pub fn pvars() -> impl Iterator<Item = &'static Pvar> {
    static ALL: std::sync::OnceLock<Vec<Pvar>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| {
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
            })
            .collect()
    })
    .iter()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_read_through_their_pvars() {
        let before = runs(Alg::AllreduceRing);
        count(Alg::AllreduceRing);
        let p = pvars()
            .find(|p| p.name == "coll_tuned_allreduce_ring_calls")
            .unwrap();
        assert!((p.read)(&oxmpi_engine::Stats::default()) > before);
        assert_eq!(pvars().count(), N);
        assert!(all_runs().any(|(n, _)| n == "coll_sm_barrier_calls"));
    }
}
