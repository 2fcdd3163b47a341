//! Algorithm selection parameters (`coll_tuned_<coll>_algorithm`).
//!
//! Until the MCA registry of `oxmpi-base` is wired into the MPI library, the values are read
//! from the environment: `OXMPI_MCA_coll_tuned_<coll>_algorithm`, then
//! `OMPI_MCA_coll_tuned_<coll>_algorithm` (launchers deliver `--mca` values this way). The
//! value is read once per process. `0` (or an unknown number) selects automatically by
//! message and communicator size. The numbers follow Open MPI's `coll_tuned` numbering for
//! the algorithms implemented here.

use std::sync::OnceLock;

/// The collectives with a selectable algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coll {
    /// `barrier`: 1 linear (fan-in/fan-out through rank 0), 4 dissemination (Bruck).
    Barrier = 0,
    /// `bcast`: 1 linear, 6 binomial, 8 scatter (linear) + ring allgather.
    Bcast = 1,
    /// `reduce`: 1 linear (rank order), 5 binomial.
    Reduce = 2,
    /// `allreduce`: 2 reduce + bcast, 3 recursive doubling, 4 ring (commutative ops only).
    Allreduce = 3,
    /// `allgather`: 3 recursive doubling (power-of-two sizes only), 4 ring.
    Allgather = 4,
    /// `alltoall`: 2 pairwise, 3 Bruck.
    Alltoall = 5,
    /// `reduce_scatter`: 1 reduce + scatterv, 3 ring (commutative ops only).
    ReduceScatter = 6,
}

impl Coll {
    fn name(self) -> &'static str {
        match self {
            Coll::Barrier => "barrier",
            Coll::Bcast => "bcast",
            Coll::Reduce => "reduce",
            Coll::Allreduce => "allreduce",
            Coll::Allgather => "allgather",
            Coll::Alltoall => "alltoall",
            Coll::ReduceScatter => "reduce_scatter",
        }
    }
}

static CACHE: [OnceLock<u32>; 7] = [const { OnceLock::new() }; 7];

/// The forced algorithm number of `coll` (0 = automatic selection).
pub fn algorithm(coll: Coll) -> u32 {
    *CACHE[coll as usize].get_or_init(|| {
        let var = format!("coll_tuned_{}_algorithm", coll.name());
        ["OXMPI_MCA_", "OMPI_MCA_"]
            .iter()
            .find_map(|p| std::env::var(format!("{p}{var}")).ok())
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    })
}

/// Messages up to this many bytes use the binomial broadcast (larger: scatter + allgather).
pub const BCAST_SMALL: usize = 12 * 1024;
/// Vectors up to this many bytes use recursive doubling allreduce (larger: ring).
pub const ALLREDUCE_SMALL: usize = 16 * 1024;
/// Blocks up to this many bytes use the Bruck alltoall (larger: pairwise).
pub const ALLTOALL_SMALL: usize = 256;
