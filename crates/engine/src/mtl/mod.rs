//! Matching transports (Open MPI's `mtl` framework under `pml cm`): the network matches
//! MPI envelopes itself, so the engine hands it whole messages. `ofi` holds the
//! offload's sans-IO rules for libfabric providers with tagged messages (the envelope in
//! the tag, completions read as MPI statuses, when the offload runs); `fake` models a
//! provider's tagged matching in-process for their deterministic tests.

pub mod fake;
pub mod ofi;
