//! Safe Rust API for oxmpi.
//!
//! Start MPI with [`init`] (or [`init_thread`]); the returned [`Universe`] finalizes MPI when it
//! is dropped, and every communicator and request borrows it, so nothing can outlive
//! finalization. Messages are slices of any [`Equivalence`] type: primitive numbers, `bool`,
//! arrays, and `#[repr(C)]` structs with `#[derive(Equivalence)]`.
//!
//! ```
//! use oxmpi::Equivalence;
//!
//! #[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
//! #[repr(C)]
//! struct Point {
//!     x: f64,
//!     y: f64,
//!     label: u8,
//! }
//!
//! fn main() -> oxmpi::Result<()> {
//!     let universe = oxmpi::init()?;
//!     let world = universe.world();
//!     let (rank, size) = (world.rank(), world.size());
//!     let next = (rank + 1) % size;
//!     let prev = (rank + size - 1) % size;
//!
//!     // Every rank sends a point to the next rank and receives one from the previous rank
//!     // (in a single process, rank 0 of 1, it sends to itself).
//!     let mine = [Point { x: rank as f64, y: 1.0, label: b'p' }];
//!     let mut got = [Point { x: 0.0, y: 0.0, label: 0 }];
//!     let status = world.sendrecv(&mine[..], next, 7, &mut got[..], prev, 7)?;
//!     assert_eq!(status.source(), prev);
//!     assert_eq!(got[0].x, prev as f64);
//!     assert_eq!(got[0].label, b'p');
//!     Ok(())
//! } // `universe` is dropped here: MPI is finalized.
//! ```
//!
//! Errors are returned as [`Error`] values carrying the MPI [`ErrorClass`] (like
//! `MPI_ERRORS_RETURN`); the API does not panic on bad input.
//!
//! # Overview
//!
//! * [`init`] / [`init_thread`] → [`Universe`]: [`Universe::world`], [`Universe::self_comm`],
//!   [`Universe::thread_level`], [`Universe::finalize`] (or drop).
//! * [`Communicator`]: [`rank`](Communicator::rank), [`size`](Communicator::size), blocking
//!   [`send`](Communicator::send), [`ssend`](Communicator::ssend),
//!   [`recv`](Communicator::recv), [`recv_vec`](Communicator::recv_vec),
//!   [`sendrecv`](Communicator::sendrecv), [`sendrecv_replace`](Communicator::sendrecv_replace),
//!   [`probe`](Communicator::probe),
//!   [`iprobe`](Communicator::iprobe), [`mprobe`](Communicator::mprobe) /
//!   [`improbe`](Communicator::improbe) with [`Message::recv_into`].
//! * Nonblocking operations on borrowed slices live in a [`request::scope`], which keeps their
//!   buffers borrowed until they complete ([`Communicator::isend_scoped`],
//!   [`Communicator::issend_scoped`], [`Communicator::irecv_scoped`], then
//!   [`ScopedRequest::wait`](request::ScopedRequest::wait), [`request::wait_all`],
//!   [`request::wait_any`]). [`Communicator::isend`] and [`Communicator::irecv`] take an owned
//!   `Vec` instead and give it back on completion ([`Request`]).
//! * Collectives over point-to-point (in a separate message space):
//!   [`barrier`](Communicator::barrier), [`broadcast`](Communicator::broadcast),
//!   [`reduce`](Communicator::reduce) and [`all_reduce`](Communicator::all_reduce) with any
//!   associative closure, [`gather`](Communicator::gather),
//!   [`all_gather`](Communicator::all_gather).
//! * New communicators: [`dup`](Communicator::dup) and [`split`](Communicator::split) give an
//!   [`OwnedCommunicator`], freed on drop.
//! * [`Status`]: source, tag, [`count`](Status::count) of elements.
//! * Sessions (MPI 4, [`session`]): [`Session::init`] without a universe, the process sets,
//!   [`Session::group_from_pset`] and [`Session::comm_from_group`].
//! * The tools interface ([`tools`]): control variables (read, write), performance
//!   variables ([`tools::PvarSession`], [`tools::PvarHandle`]) and categories.
//! * Wildcards and the null process: [`ANY_SOURCE`], [`ANY_TAG`], [`PROC_NULL`].
//!
//! # Running
//!
//! A program is an ordinary executable; start several copies with a launcher:
//!
//! ```text
//! cargo build --release --example ring
//! mpirun -n 4 target/release/examples/ring
//! ```
//!
//! Under a launcher offering PMI (oxmpi's `mpirun`/`mpiexec`; MPICH's `mpiexec.hydra` works
//! too) the processes form one job; started alone, a program is a singleton (rank 0 of 1),
//! which is how the examples in this documentation run.
//!
//! # Threads
//!
//! [`Communicator`] is `Send + Sync` and the engine serializes concurrent calls, so using it
//! from several threads is memory-safe at any level; MPI semantics still ask for
//! [`init_thread`]`(`[`ThreadLevel::Multiple`]`)` before doing so.

#![warn(missing_docs)]

extern crate self as oxmpi;

mod coll;
mod comm;
pub mod datatype;
mod error;
mod icoll;
mod part;
mod persist;
pub mod request;
pub mod session;
mod split;
mod status;
mod sys;
pub mod tools;

use std::sync::atomic::{AtomicBool, Ordering};

use oxmpi_engine::{CommId, Engine};

pub use comm::{Communicator, Message};
pub use datatype::Equivalence;
pub use error::{Error, ErrorClass, Result};
pub use icoll::CollRequest;
/// Derive macro for [`Equivalence`] on `#[repr(C)]` structs (see the `oxmpi-derive` crate).
pub use oxmpi_derive::Equivalence;
pub use oxmpi_engine::ThreadLevel;
pub use part::{PartitionedRecv, PartitionedSend};
pub use persist::Persistent;
pub use request::Request;
pub use session::{Group, Session};
pub use split::OwnedCommunicator;
pub use status::Status;

/// Wildcard source for receives and probes (`MPI_ANY_SOURCE`).
pub const ANY_SOURCE: i32 = oxmpi_engine::ANY_SOURCE;
/// Wildcard tag for receives and probes (`MPI_ANY_TAG`).
pub const ANY_TAG: i32 = oxmpi_engine::ANY_TAG;
/// The null process (`MPI_PROC_NULL`): operations with it complete at once and move no data.
pub const PROC_NULL: i32 = oxmpi_engine::PROC_NULL;
/// Largest valid tag (`MPI_TAG_UB`).
pub const TAG_UB: i32 = oxmpi_engine::TAG_UB;

/// Set once the process has initialized MPI; MPI cannot be initialized twice, not even after
/// finalization.
static INITIALIZED: AtomicBool = AtomicBool::new(false);
/// Set once the universe is gone (finalized, or dropped while panicking).
static FINALIZED: AtomicBool = AtomicBool::new(false);

/// The MPI environment of this process (`MPI_Init` … `MPI_Finalize`), the World Model.
///
/// There is at most one per process: a second [`init`] returns an error. Dropping it finalizes
/// MPI (`MPI_Finalize`), except while the thread is panicking: finalization waits for all ranks,
/// so a panicking rank skips it and its exit makes the launcher end the job. [`Session`]s may
/// live next to it; while one does, finalization waits for the last of them.
pub struct Universe {
    engine: &'static Engine,
    /// Collective contexts of world and self.
    world_coll: CommId,
    self_coll: CommId,
}

impl std::fmt::Debug for Universe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Universe")
            .field("rank", &self.engine.rank())
            .field("size", &self.engine.size())
            .field("thread_level", &self.engine.thread_level())
            .finish()
    }
}

/// Initializes MPI with thread level [`ThreadLevel::Single`] (`MPI_Init`).
///
/// Under `mpirun` (or any launcher offering PMI) the process joins its job; started alone it is
/// a singleton, rank 0 of 1.
///
/// ```
/// # fn main() -> oxmpi::Result<()> {
/// let universe = oxmpi::init()?;
/// assert!(universe.world().rank() < universe.world().size());
/// // Only one universe per process.
/// assert_eq!(oxmpi::init().unwrap_err().class(), oxmpi::ErrorClass::Other);
/// # Ok(())
/// # }
/// ```
pub fn init() -> Result<Universe> {
    init_thread(ThreadLevel::Single)
}

/// Initializes MPI asking for thread support `required` (`MPI_Init_thread`); the level actually
/// provided is [`Universe::thread_level`].
pub fn init_thread(required: ThreadLevel) -> Result<Universe> {
    if INITIALIZED.swap(true, Ordering::SeqCst) {
        return Err(Error::new(
            ErrorClass::Other,
            "MPI is already initialized in this process (only one Universe per process, and \
             none after finalization)",
        ));
    }
    let up = session::start_world(required)?;
    Ok(Universe {
        engine: up.engine,
        world_coll: up.world_coll,
        self_coll: up.self_coll,
    })
}

/// Whether this process has initialized MPI (`MPI_Initialized`), even if it has finalized since.
pub fn is_initialized() -> bool {
    INITIALIZED.load(Ordering::SeqCst)
}

impl Universe {
    /// The communicator of all processes of the job (`MPI_COMM_WORLD`).
    pub fn world(&self) -> Communicator<'_> {
        Communicator::new(self.engine, self.engine.comm_world(), self.world_coll)
            .expect("the engine always knows MPI_COMM_WORLD")
    }

    /// The communicator holding only this process (`MPI_COMM_SELF`).
    pub fn self_comm(&self) -> Communicator<'_> {
        Communicator::new(self.engine, self.engine.comm_self(), self.self_coll)
            .expect("the engine always knows MPI_COMM_SELF")
    }

    /// The thread support level provided (`MPI_Query_thread`).
    pub fn thread_level(&self) -> ThreadLevel {
        self.engine.thread_level()
    }

    /// Ends the whole job with exit code `code` (`MPI_Abort`).
    pub fn abort(&self, code: i32) -> ! {
        self.engine.abort(code)
    }
}

/// Whether this process's universe is gone (`MPI_Finalized`).
pub fn is_finalized() -> bool {
    FINALIZED.load(Ordering::SeqCst)
}

impl Universe {
    /// Finalizes MPI now (`MPI_Finalize`) and reports whether that worked; dropping the
    /// universe does the same but ignores errors.
    pub fn finalize(self) -> Result<()> {
        std::mem::forget(self);
        FINALIZED.store(true, Ordering::SeqCst);
        session::end_world(false)
    }
}

impl Drop for Universe {
    fn drop(&mut self) {
        FINALIZED.store(true, Ordering::SeqCst);
        // Finalizing synchronizes with every rank; while this thread panics the other ranks may
        // be blocked on us, so skip it: the process ends without finalizing and the launcher
        // ends the job instead of every rank hanging.
        let _ = session::end_world(std::thread::panicking());
    }
}
