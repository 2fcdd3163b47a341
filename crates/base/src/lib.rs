//! Base layer of oxmpi: the typed MCA parameter registry with provenance ([`params`]) and the
//! verbose output framework ([`output`]), component selection ([`select`]) and Slurm-style
//! hostlists ([`hostlist`]).
#![warn(missing_docs)]

pub mod hostlist;
pub mod output;
pub mod params;
pub mod select;

/// What this crate declares for `oxmpi-info`: the `mca_base_*` parameters (parameter files,
/// override warnings, output sink and format, `mca_base_verbose`).
pub static PROVIDER: params::Provider = params::Provider {
    name: "oxmpi-base",
    frameworks: &[],
    params: params::BASE_PARAMS,
};
