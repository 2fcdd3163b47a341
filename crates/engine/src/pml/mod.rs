//! The point-to-point messaging layer: the record header and kinds, matching, and the
//! protocol's parameters.

pub(crate) mod hdr;
pub mod matching;
pub(crate) mod params;
#[cfg(test)]
mod tests;
