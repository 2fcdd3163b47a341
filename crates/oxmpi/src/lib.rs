//! Safe Rust API for oxmpi.

extern crate self as oxmpi;

#[allow(dead_code)] // helpers used by the communicator layer
pub mod datatype;

pub use datatype::Equivalence;
/// Derive macro for [`Equivalence`] (see [`oxmpi_derive`]).
pub use oxmpi_derive::Equivalence;
