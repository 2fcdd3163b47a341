//! The protocol layer's parameters and its verbose stream.

use oxmpi_base::output::Stream;
use oxmpi_base::params::{self, ParamDecl, ParamType};

/// `pml` verbose stream (`pml_base_verbose`).
pub(crate) static PML: Stream = Stream::new("pml");

/// `mpi_yield_when_idle`.
pub(crate) static YIELD_WHEN_IDLE: ParamDecl = ParamDecl::new(
    "mpi",
    "",
    "yield_when_idle",
    ParamType::Bool,
    "false",
    "Yield the processor while waiting for communication (also automatic when the node has \
     more ranks than CPUs)",
)
.level(4);

/// `mpi_profile`: where the job profile goes (`mpirun --profile[=DIR]` sets it).
pub static PROFILE: ParamDecl = ParamDecl::new(
    "mpi",
    "",
    "profile",
    ParamType::String,
    "",
    "Directory to write this job's profile to (one file per rank, rendered by oxmpi-profile); \
     empty: no profile",
)
.level(2);

/// `mpi_ft_enable`: fault tolerance (ULFM) on; `mpirun --with-ft ulfm` sets it.
pub static FT_ENABLE: ParamDecl = ParamDecl::new(
    "mpi",
    "",
    "ft_enable",
    ParamType::Bool,
    "false",
    "Keep the job running when a process fails: the survivors get MPIX_ERR_PROC_FAILED \
     and can revoke, shrink and agree (ULFM; also mpirun --with-ft ulfm / --enable-recovery)",
)
.level(4);

/// The protocol layer's parameters.
pub(crate) static PARAMS: [ParamDecl; 3] = [YIELD_WHEN_IDLE, PROFILE, FT_ENABLE];

/// `Some(value)` if `mpi_yield_when_idle` was set explicitly (any source but the default).
pub(crate) fn yield_when_idle_explicit() -> Option<bool> {
    params::explicit(&YIELD_WHEN_IDLE).and_then(|v| v.as_bool())
}
