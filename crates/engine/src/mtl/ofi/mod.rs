//! The libfabric matching offload's rules, sans-IO (no provider, no clock): `tag` puts
//! the MPI envelope (context id, source rank, tag) and the synchronous-send protocol bits
//! in the 64-bit tag and builds the receive patterns whose ignore bits make the provider
//! match `MPI_ANY_SOURCE` and `MPI_ANY_TAG`; `completion` reads a receive's completion
//! entry as an MPI status (truncation from `FI_ETRUNC`, cancellation from `FI_ECANCELED`)
//! and says when an acknowledgement is owed; `select` decides from the `pml` list and the
//! provider's offer whether the offload runs.
//!
//! MPI's guarantees come from the provider under these rules: messages of one sender are
//! matched in the order sent (`FI_ORDER_SAS`, required), whatever order their
//! completions come in; a synchronous send posts the exact receive of its
//! acknowledgement before it sends, and the receiver acknowledges once matched, so the
//! k-th acknowledgement of an envelope proves that the first k sends with that envelope
//! matched (they match in order), even when the receiver's completions, and so its
//! acknowledgements, come out of order; `FI_PEEK` is a probe, `FI_PEEK | FI_CLAIM` an
//! mprobe whose message no other receive can take. `tests.rs` checks all of this against
//! the in-process model `crate::mtl::fake`.

pub mod completion;
pub mod select;
pub mod tag;

#[cfg(test)]
mod tests;
