//! User-level failure mitigation (ULFM, MPICH's and Open MPI's `MPIX_` interface).
//!
//! * `agree`: the fault-tolerant agreement as a sans-IO state machine (tested in `tests`);
// Used by the entry points that follow; until then only by the tests.
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) mod agree;
#[cfg(test)]
mod tests;
