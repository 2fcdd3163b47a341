//! The `tuned` component: point-to-point algorithms for every collective, chosen by
//! message and communicator size (the decision constants and the
//! `coll_tuned_<coll>_algorithm` parameters are in [`crate::base::params`]).

mod allgather;
mod allreduce;
mod alltoall;
mod barrier;
mod bcast;
mod gather;
mod neighbor;
mod reduce;

pub(crate) use allreduce::marker;

pub(crate) const TAG_BARRIER: i32 = 1;
pub(crate) const TAG_BCAST: i32 = 2;
pub(crate) const TAG_REDUCE: i32 = 3;
pub(crate) const TAG_ALLREDUCE: i32 = 4;
pub(crate) const TAG_GATHER: i32 = 5;
pub(crate) const TAG_SCATTER: i32 = 6;
pub(crate) const TAG_ALLGATHER: i32 = 7;
pub(crate) const TAG_ALLTOALL: i32 = 8;
pub(crate) const TAG_REDSCAT: i32 = 9;
pub(crate) const TAG_SCAN: i32 = 10;
pub(crate) const TAG_EXSCAN: i32 = 11;
pub(crate) const TAG_NEIGHBOR: i32 = 1 << 19;
