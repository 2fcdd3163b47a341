//! Algorithm selection parameters (`coll_tuned_<coll>_algorithm`).
//!
//! They are MCA parameters of the `coll` framework's `tuned` component, resolved on first
//! use (and again by [`reload`] after a write through the tools interface) through the
//! `oxmpi-base` registry (so `--mca`, `OXMPI_MCA_*`/`OMPI_MCA_*`,
//! `--tune` and parameter files all apply, and `oxmpi-info` lists them). `0` (or an unknown
//! number) selects automatically by message and communicator size. The numbers follow Open
//! MPI's `coll_tuned` numbering for the algorithms implemented here.

use oxmpi_base::params::{self, Component, Framework, ParamDecl, ParamType, Provider};
use std::sync::atomic::{AtomicU32, Ordering};

/// The collectives with a selectable algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coll {
    /// `barrier`: 1 linear (fan-in/fan-out through rank 0), 4 dissemination (Bruck).
    Barrier = 0,
    /// `bcast`: 1 linear, 3 pipelined chain, 6 binomial, 8 scatter (linear) + ring allgather.
    Bcast = 1,
    /// `reduce`: 1 linear (rank order), 5 binomial.
    Reduce = 2,
    /// `allreduce`: 2 reduce + bcast, 3 recursive doubling, 4 ring, 6 Rabenseifner
    /// (reduce-scatter by recursive halving + allgather by recursive doubling); 4 and 6 for
    /// commutative ops only.
    Allreduce = 3,
    /// `allgather`: 3 recursive doubling (power-of-two sizes only), 4 ring.
    Allgather = 4,
    /// `alltoall`: 1 linear (all posted at once), 2 pairwise, 3 Bruck.
    Alltoall = 5,
    /// `reduce_scatter`: 1 reduce + scatterv, 3 ring (commutative ops only).
    ReduceScatter = 6,
    /// `gather`: 1 linear (the root posts every receive), 2 binomial tree.
    Gather = 7,
    /// `scatter`: 1 linear (the root posts every send), 2 binomial tree.
    Scatter = 8,
    /// `scan` and `exscan`: 1 recursive doubling, 2 pipelined chain (forcing either
    /// bypasses the shared-memory path).
    Scan = 9,
}

const fn algorithm_param(param: &'static str, help: &'static str) -> ParamDecl {
    ParamDecl::new(
        "coll",
        "tuned",
        param,
        ParamType::Int { min: 0, max: 100 },
        "0",
        help,
    )
    .level(5)
    .runtime()
}

/// The crate's parameters: one algorithm parameter per [`Coll`], in its order, then the
/// `sm` component's.
pub static PARAMS: [ParamDecl; 24] = [
    algorithm_param(
        "barrier_algorithm",
        "Barrier algorithm: 0 automatic, 1 linear, 4 dissemination",
    ),
    algorithm_param(
        "bcast_algorithm",
        "Broadcast algorithm: 0 automatic, 1 linear, 3 pipelined chain, 6 binomial, 8 scatter + ring allgather",
    ),
    algorithm_param(
        "reduce_algorithm",
        "Reduce algorithm: 0 automatic, 1 linear (rank order), 5 binomial",
    ),
    algorithm_param(
        "allreduce_algorithm",
        "Allreduce algorithm: 0 automatic, 2 reduce + bcast, 3 recursive doubling, 4 ring, 6 Rabenseifner (4 and 6: commutative ops only)",
    ),
    algorithm_param(
        "allgather_algorithm",
        "Allgather algorithm: 0 automatic, 3 recursive doubling (power-of-two sizes), 4 ring",
    ),
    algorithm_param(
        "alltoall_algorithm",
        "Alltoall algorithm: 0 automatic, 1 linear, 2 pairwise, 3 Bruck",
    ),
    algorithm_param(
        "reduce_scatter_algorithm",
        "Reduce-scatter algorithm: 0 automatic, 1 reduce + scatterv, 3 ring (commutative ops)",
    ),
    algorithm_param(
        "gather_algorithm",
        "Gather algorithm: 0 automatic, 1 linear, 2 binomial",
    ),
    algorithm_param(
        "scatter_algorithm",
        "Scatter algorithm: 0 automatic, 1 linear, 2 binomial",
    ),
    algorithm_param(
        "scan_algorithm",
        "Scan and exscan algorithm: 0 automatic, 1 recursive doubling, 2 pipelined chain",
    ),
    crate::sm::params::ENABLE,
    crate::sm::params::ALLREDUCE_LARGE_MIN,
    crate::sm::params::NONBLOCKING,
    crate::sm::params::SPIN_FIRST,
    crate::sm::params::BLOCK_AFTER,
    crate::sm::params::SLEEP_MAX,
    crate::sm::params::BARRIER_RELEASE,
    crate::sm::params::SINGLE_COPY_MAX,
    crate::sm::params::SINGLE_COPY_MAX_MANY,
    crate::sm::params::NONBLOCKING_LARGE_MAX,
    crate::sm::params::ALLTOALL_PUSH_MIN,
    crate::sm::params::NONBLOCKING_PUSH_MIN,
    crate::sm::params::NONBLOCKING_PUSH_MANY,
    crate::sm::params::NONBLOCKING_SHARE_CHUNK,
];

/// The `coll` framework and its parameters, for `oxmpi-info` and `mpirun`'s validation.
pub static PROVIDER: Provider = Provider {
    name: "oxmpi-coll",
    frameworks: &[Framework {
        name: "coll",
        description: "Collective operations",
        components: &[
            Component {
                name: "tuned",
                description:
                    "Algorithms chosen by message and communicator size, each forcible by parameter",
            },
            Component {
                name: "sm",
                description: "Shared-memory collectives among the ranks of one node",
            },
        ],
    }],
    params: &PARAMS,
};

/// Not read from the registry yet.
const UNREAD: u32 = u32::MAX;

static CACHE: [AtomicU32; 10] = [const { AtomicU32::new(UNREAD) }; 10];

/// The forced algorithm number of `coll` (0 = automatic selection): one relaxed load once
/// read.
pub fn algorithm(coll: Coll) -> u32 {
    let v = CACHE[coll as usize].load(Ordering::Relaxed);
    if v != UNREAD {
        return v;
    }
    let v = read(coll);
    CACHE[coll as usize].store(v, Ordering::Relaxed);
    v
}

/// `coll_tuned_<coll>_algorithm` from the registry.
fn read(coll: Coll) -> u32 {
    u32::try_from(params::int(&PARAMS[coll as usize]))
        .unwrap_or(0)
        .min(UNREAD - 1)
}

/// Re-reads the parameters declared `runtime` (the algorithm choices and
/// `coll_sm_allreduce_large_min`): collectives started after this call use the new values.
/// They are `MPI_T_SCOPE_ALL_EQ`: every rank must write the same value before the
/// collective that should see it.
pub fn reload() {
    for (i, c) in CACHE.iter().enumerate() {
        if c.load(Ordering::Relaxed) != UNREAD {
            c.store(read(ALL[i]), Ordering::Relaxed);
        }
    }
    crate::sm::params::reload();
}

/// Every [`Coll`], in its numbering.
const ALL: [Coll; 10] = [
    Coll::Barrier,
    Coll::Bcast,
    Coll::Reduce,
    Coll::Allreduce,
    Coll::Allgather,
    Coll::Alltoall,
    Coll::ReduceScatter,
    Coll::Gather,
    Coll::Scatter,
    Coll::Scan,
];

/// Messages up to this many bytes use the binomial broadcast (larger: scatter + allgather).
pub const BCAST_SMALL: usize = 512 * 1024;
/// Segment size of the pipelined broadcast.
pub const BCAST_SEGMENT: usize = 64 * 1024;
/// Vectors up to this many bytes use recursive doubling allreduce (larger: ring).
pub const ALLREDUCE_SMALL: usize = 16 * 1024;
/// Scans of at least this many bytes on more than 2 ranks use the pipelined chain (each
/// rank receives its predecessor's prefix, extends it by its own contribution and passes it
/// on, segment by segment): every byte moves `p - 1` times and is combined `p - 1` times in
/// all, against about `p log2 p` of each for recursive doubling, which matters as soon as
/// the ranks share cores. Smaller ones use recursive doubling (fewer steps in a row).
pub const SCAN_CHAIN_MIN: usize = 16 * 1024;
/// Segment size of the pipelined chain scan (a multiple of the element size is taken).
pub const SCAN_SEGMENT: usize = 64 * 1024;
/// Communicators up to this size use the linear alltoall (all transfers posted at once).
pub const ALLTOALL_LINEAR_MAX: usize = 8;
/// Blocks up to this many bytes use the Bruck alltoall (larger: pairwise), above
/// [`ALLTOALL_LINEAR_MAX`] ranks.
pub const ALLTOALL_SMALL: usize = 256;
/// Gather/scatter blocks up to this many bytes use the binomial tree (larger: linear).
pub const GATHER_SMALL: usize = 8 * 1024;
