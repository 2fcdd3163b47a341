//! Base layer of oxmpi: the typed MCA parameter registry with provenance ([`params`]), the
//! verbose output framework ([`output`]), component selection ([`select`]) and Slurm-style
//! hostlists ([`hostlist`]). It depends only on `std`, `libc` and `thiserror`, so it can be
//! linked into `libmpi`.
//!
//! # Using it from another crate
//!
//! Declare parameters (and frameworks) statically and expose them as one [`params::Provider`]:
//!
//! ```
//! use oxmpi_base::params::{self, Component, Framework, ParamDecl, ParamType, Provider};
//! use oxmpi_base::{output::Stream, verbose};
//!
//! pub static FIFO_SIZE: ParamDecl =
//!     ParamDecl::new("btl", "sm", "fifo_size", ParamType::Size, "64k", "Bytes per FIFO").level(4);
//! pub static PROVIDER: Provider = Provider {
//!     name: "oxmpi-engine",
//!     frameworks: &[Framework {
//!         name: "btl",
//!         description: "byte transfer layer",
//!         components: &[Component { name: "sm", description: "shared memory" }],
//!     }],
//!     params: &[FIFO_SIZE],
//! };
//! static BTL: Stream = Stream::new("btl"); // reads btl_base_verbose on first use
//!
//! params::register_global(&PROVIDER).expect("bad MCA parameter"); // one-line error to show
//! let fifo = params::resolve(&FIFO_SIZE).unwrap().as_size().unwrap();
//! verbose!(BTL, 40, "sm: FIFO size {fifo}");
//! ```
//!
//! `mpirun` builds the global registry itself with its `--mca` pairs and `--tune` files
//! ([`params::init_global`] with a [`params::Sources`]), then gives its children
//! [`params::Registry::child_env`] (plus `OXMPI_PREFIX`), so ranks resolve the same values and
//! know they came from the command line. [`params::register_global`] prints the values it had
//! to ignore (locked by the override file, read-only). Processes call
//! [`output::report_problems`] once all their parameters are registered (it warns about
//! `OXMPI_MCA_` names nobody registered, so only a process that registers every parameter it
//! may be given should call it). A framework picks its components with
//! [`select::select_global`]. Verbose lines of a rank started by `mpirun` carry `[jobid,rank]`
//! from its environment; [`output::set_process_name`] sets it explicitly.
#![warn(missing_docs)]

pub mod events;
pub mod hostlist;
pub mod net;
pub mod output;
pub mod params;
pub mod select;
mod sys;

/// What this crate declares for `oxmpi-info`: the `mca_base_*` parameters (parameter files,
/// override warnings, output sink and format, `mca_base_verbose`).
pub static PROVIDER: params::Provider = params::Provider {
    name: "oxmpi-base",
    frameworks: &[],
    params: params::BASE_PARAMS,
};
