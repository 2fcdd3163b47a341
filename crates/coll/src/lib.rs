//! The collective framework: every collective algorithm of oxmpi, in Open MPI-style
//! components, and communicator construction, over the point-to-point engine. The C ABI
//! (`oxmpi-capi`) and the safe Rust API (`oxmpi`) both call it; neither holds an algorithm.
//!
//! | folder | what |
//! |---|---|
//! | [`base`] | the collective context of a communicator ([`CollComm`], its hidden shadow, context ids of new communicators), point-to-point helpers, the parameters and decision constants ([`tune`]), and per-call component selection ([`base::select`]) |
//! | [`tuned`] | point-to-point algorithms of every intracommunicator collective (the table below), as methods of [`CollComm`] |
//! | [`sm`] | shared-memory barrier, bcast, alltoall, allreduce among the ranks of one node (a memfd segment per communicator); `coll_sm_*` parameters |
//! | [`inter`] | intercommunicator algorithms ([`inter::InterComm`]) |
//! | [`nbc`] | nonblocking collectives: schedules ([`sched`]) and their background progress |
//! | [`op`] | reduction kernels of the predefined operations on the predefined element types (AVX2 chosen at run time) |
//!
//! Everything here moves **contiguous bytes**; datatypes are the caller's business (the C ABI
//! packs non-contiguous data first). Reductions are given as an [`Op`]: a callback
//! `f(in, inout)` computing `inout = in ∘ inout` elementwise (MPI's user-function order), the
//! element size (blocks are only ever split at element boundaries) and whether `∘` commutes.
//! For non-commutative operations every algorithm combines in rank order
//! (`x0 ∘ x1 ∘ … ∘ x(p-1)`).
//!
//! # Hidden collective context
//!
//! Collective traffic of a communicator whose context id is `c` travels on a *shadow* engine
//! communicator with context id `c | COLL_BIT` (bit 31, [`COLL_BIT`]) over the same group, so
//! it can never match user point-to-point messages (not even `MPI_ANY_TAG` receives). The
//! shadow is created lazily on the first collective ([`CollComm::new`]) — every member derives
//! the same id without communication — and removed by [`release`]. Each collective uses its
//! own tag on the shadow (collectives on one communicator are ordered by the MPI standard,
//! and the engine does not overtake between one pair of ranks).
//!
//! # Context ids of new communicators
//!
//! Context ids of user communicators stay below `COLL_BIT`. Every process keeps the next id
//! it has not used yet (starting at 2: world is 0, self is 1). `dup`, `split` and `create`
//! agree on a new id by an allreduce(MAX) of every member's next free id over the parent; all
//! members then set their next free id past the agreed one. Ids are never reused. Disjoint
//! results of one `split` share the id (a process belongs to only one of them).
//! `create_group` (collective over the new group only) runs the same agreement with
//! point-to-point messages among the group members on the parent's shadow, with a tag
//! derived from the caller's tag. Limitation: two threads creating communicators at the
//! same time (on different parents) may pick the same id; comm creation must be serialized
//! per process.
//!
//! # Algorithms
//!
//! | collective | algorithms (automatic choice first) |
//! |---|---|
//! | barrier | dissemination; linear |
//! | bcast | binomial tree (≤ [`tune::BCAST_SMALL`] bytes, or 2 ranks); scatter + ring allgather; linear; pipelined chain ([`tune::BCAST_SEGMENT`]-byte segments) |
//! | reduce | binomial (commutative: rooted tree; non-commutative: tree at rank 0 in rank order, result forwarded to the root); linear in rank order |
//! | allreduce | recursive doubling (small or non-commutative); Rabenseifner (large, commutative, more than 2 ranks); ring reduce-scatter + ring allgather (large, commutative, 2 ranks); reduce + bcast |
//! | gather, scatter | binomial tree (blocks ≤ [`tune::GATHER_SMALL`] bytes, more than 2 ranks); linear |
//! | gatherv, scatterv | linear (the root posts all transfers at once) |
//! | allgather | recursive doubling (power-of-two sizes); ring |
//! | allgatherv | ring |
//! | alltoall | linear, all transfers posted at once (≤ [`tune::ALLTOALL_LINEAR_MAX`] ranks); Bruck (blocks ≤ [`tune::ALLTOALL_SMALL`] bytes); pairwise exchange |
//! | alltoallv | pairwise exchange |
//! | reduce_scatter | ring (commutative); reduce + scatterv (non-commutative) |
//! | scan, exscan | recursive doubling (MPICH's order-preserving scheme) |
//!
//! The choice can be forced per collective with `OXMPI_MCA_coll_tuned_<coll>_algorithm`
//! (see [`tune`]).
#![warn(missing_docs)]

pub mod base;
pub mod inter;
pub mod nbc;
pub mod op;
pub mod sm;
pub mod tuned;

pub(crate) use base::comm::arg_err;
pub use base::comm::{comm_free, release, CollComm, Result, COLL_BIT};
pub use base::helpers::{counts_mark, pooled, split_even, unpool, Op, Pooled};
pub use base::params as tune;
pub use base::params::PROVIDER;
pub use base::stats::pvars;
pub use nbc::sched;
