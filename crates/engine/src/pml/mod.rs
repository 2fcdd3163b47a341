//! The point-to-point messaging layer: the record header and kinds, and matching.

#[cfg(not(loom))]
pub(crate) mod hdr;
pub mod matching;
