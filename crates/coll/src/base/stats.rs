//! Which algorithm each collective call ran: one relaxed counter per algorithm (a few
//! nanoseconds per collective, no lock), read by the tools interface's performance
//! variables ([`pvars`]) and the job profile.

use oxmpi_engine::{Pvar, PvarClass};
use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! algorithms {
    ($($v:ident: $name:literal, $cat:literal, $desc:literal;)*) => {
        /// A collective algorithm whose runs are counted.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Alg { $(#[doc = $desc] $v,)* }

        const NAMES: &[(&str, &str, &str)] = &[$(($name, $cat, $desc),)*];
    };
}

algorithms! {
    SmBarrier: "coll_sm_barrier_calls", "coll_sm", "Barriers run by the shared-memory component";
    SmBcast: "coll_sm_bcast_calls", "coll_sm", "Broadcasts run by the shared-memory component";
    SmAllreduce: "coll_sm_allreduce_calls", "coll_sm", "Allreduces run by the shared-memory component";
    SmAlltoall: "coll_sm_alltoall_calls", "coll_sm", "Alltoalls run by the shared-memory component";
    BcastLinear: "coll_tuned_bcast_linear_calls", "coll_tuned", "Broadcasts run by the linear algorithm";
    BcastPipeline: "coll_tuned_bcast_pipeline_calls", "coll_tuned", "Broadcasts run by the pipelined chain";
    BcastBinomial: "coll_tuned_bcast_binomial_calls", "coll_tuned", "Broadcasts run by the binomial tree";
    BcastScatterAllgather: "coll_tuned_bcast_scatter_allgather_calls", "coll_tuned", "Broadcasts run by scatter + ring allgather";
    AllreduceReduceBcast: "coll_tuned_allreduce_reduce_bcast_calls", "coll_tuned", "Allreduces run as reduce + broadcast";
    AllreduceRecdbl: "coll_tuned_allreduce_recursive_doubling_calls", "coll_tuned", "Allreduces run by recursive doubling";
    AllreduceRing: "coll_tuned_allreduce_ring_calls", "coll_tuned", "Allreduces run by the ring";
    AllreduceRabenseifner: "coll_tuned_allreduce_rabenseifner_calls", "coll_tuned", "Allreduces run by Rabenseifner's algorithm";
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
    // A `fn` pointer cannot capture the index: one reader per slot.
    macro_rules! readers {
        ($($i:literal)*) => { [$(|_: &oxmpi_engine::Stats| COUNTS[$i].load(Ordering::Relaxed),)*] };
    }
    const READ: [fn(&oxmpi_engine::Stats) -> u64; N] = readers!(0 1 2 3 4 5 6 7 8 9 10 11);
    ALL.get_or_init(|| {
        NAMES
            .iter()
            .zip(READ)
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
