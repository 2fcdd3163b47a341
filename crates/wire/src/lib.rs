//! Sans-IO wire protocols of oxmpi.
//!
//! * [`pmi`]: PMI-1 / PMI-2 codec and the PMI server core ([`pmi::PmiServer`]) that the
//!   runtime's daemons drive for their ranks; also used by the `oxmpi-pmi` client.
//! * [`ctl`]: the authenticated head ↔ daemon control channel ([`ctl::Connection`],
//!   [`ctl::Msg`]).
//! * [`names`]: the name service's protocol (`oxmpi-server` and the MPI library's
//!   `MPI_Publish_name`/`MPI_Lookup_name`).
//!
//! Nothing in this crate performs I/O: callers feed received bytes in and perform the
//! returned actions (send bytes, close, abort), so every protocol is tested deterministically.
#![warn(missing_docs)]

pub mod ctl;
pub mod names;
pub mod pmi;
