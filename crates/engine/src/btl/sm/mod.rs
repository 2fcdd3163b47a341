//! The `sm` transport: ranks of one node exchange records through shared-memory rings in
//! `memfd` segments, with bulk buffers for rendezvous fragments and a cooperative single
//! copy (CMA) for large messages.

#[cfg(not(loom))]
pub(crate) mod bulk;
pub mod coop;
#[cfg(not(loom))]
pub(crate) mod link;
pub mod ring;
