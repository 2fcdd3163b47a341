//! C ABI of oxmpi: an MPICH-compatible `libmpi.so.12` over the oxmpi engine.
//!
//! This crate is built as a `staticlib` and linked into `libmpi.so.12` by
//! `cargo xtask install` (see `xtask/src/libmpi.rs`): every MPI function is exported as a
//! strong `PMPI_*` symbol and a weak `MPI_*` alias (the MPI profiling interface); the
//! version script exports nothing else. The header is `include/mpi.h` (MPICH's handle
//! values and 20-byte `MPI_Status`).
//!
//! Layout (files import one another only downwards, `cargo xtask check-arch`):
//! * `calls`: per-function call counts and times for the job profile (below `ffi`);
//! * `ffi`: the entry-point macro `mpi_fn!` and its one `enter` (`catch_unwind`, errors to
//!   the handler of the communicator, window or file that owns them, weak aliases) and
//!   checked pointer helpers;
//! * `handles`: handle tables with MPICH's 32-bit handle encoding; `objects`: the MPI
//!   objects' data (communicators, groups, datatypes, requests, error handlers, ...);
//!   [`state`]: their tables behind one lock. The three sit below the modules that
//!   implement the objects' calls;
//! * [`datatype`]: predefined and derived datatypes, pack/unpack; `status`: `MPI_Status`;
//! * [`request`], [`p2p`]: point-to-point over the engine's byte interface;
//! * [`errors`]: error classes, strings and handlers;
//! * [`comm`]: communicators, groups and the library's own use of communicators
//!   (`comm::Internal`, `comm::dup_context`: collectives and duplication for windows and
//!   files without the exported `MPI_*` functions); `comm::make` makes the communicator
//!   object once its creator (`coll`, `comm`, `comm_create`, `intercomm`) agreed on the
//!   context ids;
//! * [`coll`], [`icoll`], [`neighbor`], [`topo`]: collectives, nonblocking collectives
//!   (their schedules in `icoll::sched`, below the entry points and `request`), neighbourhood
//!   collectives and process topologies (their table in `topo::table`, below the entry
//!   points and `comm`); `intercomm`, `intercoll`: intercommunicators and their
//!   collectives;
//! * [`part`]: partitioned point-to-point (`MPI_Psend_init` & co.), driven by the request
//!   machinery through `objects::Partitioned`;
//! * [`persist`]: persistent collectives (`MPI_*_init`), each start a round of the
//!   nonblocking form;
//! * [`session`]: sessions (`MPI_Session_*`, communicators from groups), over the
//!   library's world;
//! * [`rma`]: one-sided communication (`rma/`: entry points, window, ops, sync);
//! * [`io`]: MPI-IO (`io/`: entry points, file, view, access, shared file pointer);
//! * [`tools`]: the MPI tools interface (`MPI_T_*`: the parameter registry as control
//!   variables, the engine's counters as performance variables);
//! * [`env`](mod@env), [`op`], [`misc`]: the rest of the implemented API;
//! * [`f90`]: `MPI_Type_create_f90_real/complex/integer` (cached predefined handles);
//! * [`ft`]: fault tolerance (ULFM's `MPIX_Comm_revoke/shrink/agree/...`), its agreement a
//!   sans-IO state machine (`ft::agree`);
//! * [`legacy`]: the MPI-1 names MPICH still exports (`MPI_Attr_get`, `MPI_Type_struct`,
//!   ...), each forwarding to its replacement;
//! * `sys`: the crate's OS layer (the few system calls that are not the engine's
//!   `oxmpi_engine::sys`: host name, thread id, record locks, `posix_fallocate`,
//!   `malloc`/`free`, page size);
//! * [`stubs`]: exported functions that are not implemented yet (they raise
//!   `MPI_ERR_UNSUPPORTED_OPERATION`; the list is in `UNIMPLEMENTED.md`).
//!
//! All exported functions are `unsafe extern "C"`: their safety contract is the MPI
//! standard's (valid pointers of the documented types and sizes).
#![allow(clippy::missing_safety_doc)]

pub(crate) mod calls;
#[macro_use]
pub(crate) mod ffi;
pub(crate) mod attrs;
pub(crate) mod backend;
pub mod coll;
pub(crate) mod coll_alg;
pub mod comm;
pub(crate) mod comm_create;
pub mod consts;
pub mod datatype;
pub mod dpm;
pub mod env;
pub mod errors;
pub(crate) mod external;
pub mod f90;
pub mod ft;
pub(crate) mod grequest;
pub(crate) mod handles;
pub mod icoll;
pub(crate) mod intercoll;
pub(crate) mod intercomm;
pub mod io;
pub mod legacy;
pub mod misc;
pub mod neighbor;
pub(crate) mod objects;
pub mod op;
pub mod p2p;
pub mod part;
pub mod persist;
pub mod request;
pub mod rma;
pub mod session;
pub mod spawn;
pub mod state;
pub(crate) mod status;
pub mod stubs;
pub(crate) mod sys;
pub mod tools;
pub mod topo;
pub(crate) mod type_table;
