//! The MPI tools interface (`MPI_T_*`, MPI 4.1 §15.3), exported like every other function
//! (`PMPI_T_*` with weak `MPI_T_*` aliases, MPICH's handle types and constants in
//! `mpi.h`):
//! * `state`: initialization, stable indices, handle tables, constants, string helpers;
//! * `cvar`: control variables = the MCA parameter registry (one registry, seen through
//!   `oxmpi_base::params::tools`), and their enumerations;
//! * `category`: categories = frameworks and their components;
//! * `pvar`: performance variables = the engine's counters (`oxmpi_engine::pvars`) and the
//!   collectives' algorithm counters (`oxmpi_coll::pvars`);
//! * `event`: the event source and the events (`event_types`: their names and layouts);
//! * `init`: `MPI_T_init_thread` and `MPI_T_finalize`;
//! * `profile`: the job profile's per-rank file (`mpi_profile`), from the same counters.

pub mod category;
pub mod cvar;
pub mod event;
pub(crate) mod event_types;
pub mod init;
pub(crate) mod profile;
pub mod pvar;
pub mod state;
