//! Base layer of oxmpi: the typed MCA parameter registry with provenance ([`params`]).
#![warn(missing_docs)]

pub mod params;
