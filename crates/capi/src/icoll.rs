//! Nonblocking collectives (`MPI_I*`).
//!
//! The nonblocking collectives are **blocking at start**: each runs the blocking collective
//! and returns a request that is already complete (its status is empty: `MPI_ANY_SOURCE`,
//! `MPI_ANY_TAG`, count 0). This is correct for every program that does not need progress
//! of the collective while the caller does something the other members depend on before
//! waiting (e.g. an `MPI_Ibarrier` followed by point-to-point messages that other ranks
//! only send after their own barrier request completes would deadlock). An error of the
//! underlying collective is reported through its handler under the blocking function's
//! name and returned by the `MPI_I*` call.

use crate::backend::EStatus;
use crate::consts::*;
use crate::ffi::{enter, out, MpiError, MpiResult};
use crate::request::{Pending, Request};
use crate::state::lock;
use std::ffi::{c_int, c_void};

/// Store an already completed request for `comm` in `*request`.
fn completed(request: *mut c_int, comm: c_int) -> MpiResult {
    if request.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL request").on(comm));
    }
    let status = EStatus {
        source: MPI_ANY_SOURCE,
        tag: MPI_ANY_TAG,
        error: None,
        count_bytes: 0,
        cancelled: false,
    };
    let h = lock().reqs.insert(Request {
        comm,
        persistent: None,
        active: Some(Pending {
            ereq: None,
            done: Some(status),
            stage: None,
            unpack: None,
            bsend_bytes: 0,
        }),
    });
    out(request, h, "request")
}

/// Define `PMPI_I<x>` (+ weak `MPI_I<x>`) as the blocking `$blocking` plus a completed
/// request.
macro_rules! icoll {
    ($($(#[$m:meta])* fn $pname:ident / $name:literal = $blocking:path; ($($arg:ident : $ty:ty),*) comm = $comm:ident;)*) => {$(
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn $pname($($arg: $ty,)* request: *mut c_int) -> c_int {
            if request.is_null() {
                return enter($name, || Err(MpiError::new(MPI_ERR_ARG, "NULL request").on($comm)));
            }
            // SAFETY: forwarding the caller's arguments (same MPI contract).
            let rc = unsafe { $blocking($($arg),*) };
            if rc != MPI_SUCCESS {
                return rc;
            }
            enter($name, || completed(request, $comm))
        }
        crate::ffi::mpi_alias!($pname / $name);
    )*};
}

icoll! {
    /// `MPI_Ibarrier` (blocking at start).
    fn PMPI_Ibarrier / "MPI_Ibarrier" = crate::coll::PMPI_Barrier;
        (comm: c_int) comm = comm;
    /// `MPI_Ibcast` (blocking at start).
    fn PMPI_Ibcast / "MPI_Ibcast" = crate::coll::PMPI_Bcast;
        (buffer: *mut c_void, count: c_int, datatype: c_int, root: c_int, comm: c_int) comm = comm;
    /// `MPI_Ireduce` (blocking at start).
    fn PMPI_Ireduce / "MPI_Ireduce" = crate::coll::PMPI_Reduce;
        (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, root: c_int, comm: c_int) comm = comm;
    /// `MPI_Iallreduce` (blocking at start).
    fn PMPI_Iallreduce / "MPI_Iallreduce" = crate::coll::PMPI_Allreduce;
        (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) comm = comm;
    /// `MPI_Iscan` (blocking at start).
    fn PMPI_Iscan / "MPI_Iscan" = crate::coll::PMPI_Scan;
        (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) comm = comm;
    /// `MPI_Iexscan` (blocking at start).
    fn PMPI_Iexscan / "MPI_Iexscan" = crate::coll::PMPI_Exscan;
        (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) comm = comm;
    /// `MPI_Ireduce_scatter_block` (blocking at start).
    fn PMPI_Ireduce_scatter_block / "MPI_Ireduce_scatter_block" = crate::coll::PMPI_Reduce_scatter_block;
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: c_int, op: c_int, comm: c_int) comm = comm;
    /// `MPI_Ireduce_scatter` (blocking at start).
    fn PMPI_Ireduce_scatter / "MPI_Ireduce_scatter" = crate::coll::PMPI_Reduce_scatter;
        (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: c_int, op: c_int, comm: c_int) comm = comm;
    /// `MPI_Igather` (blocking at start).
    fn PMPI_Igather / "MPI_Igather" = crate::coll::PMPI_Gather;
        (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) comm = comm;
    /// `MPI_Igatherv` (blocking at start).
    fn PMPI_Igatherv / "MPI_Igatherv" = crate::coll::PMPI_Gatherv;
        (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, root: c_int, comm: c_int) comm = comm;
    /// `MPI_Iscatter` (blocking at start).
    fn PMPI_Iscatter / "MPI_Iscatter" = crate::coll::PMPI_Scatter;
        (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) comm = comm;
    /// `MPI_Iscatterv` (blocking at start).
    fn PMPI_Iscatterv / "MPI_Iscatterv" = crate::coll::PMPI_Scatterv;
        (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) comm = comm;
    /// `MPI_Iallgather` (blocking at start).
    fn PMPI_Iallgather / "MPI_Iallgather" = crate::coll::PMPI_Allgather;
        (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) comm = comm;
    /// `MPI_Iallgatherv` (blocking at start).
    fn PMPI_Iallgatherv / "MPI_Iallgatherv" = crate::coll::PMPI_Allgatherv;
        (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int) comm = comm;
    /// `MPI_Ialltoall` (blocking at start).
    fn PMPI_Ialltoall / "MPI_Ialltoall" = crate::coll::PMPI_Alltoall;
        (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) comm = comm;
    /// `MPI_Ialltoallv` (blocking at start).
    fn PMPI_Ialltoallv / "MPI_Ialltoallv" = crate::coll::PMPI_Alltoallv;
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: c_int, comm: c_int) comm = comm;
    /// `MPI_Ialltoallw` (blocking at start).
    fn PMPI_Ialltoallw / "MPI_Ialltoallw" = crate::coll::PMPI_Alltoallw;
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const c_int, comm: c_int) comm = comm;
    /// `MPI_Ineighbor_allgather` (blocking at start).
    fn PMPI_Ineighbor_allgather / "MPI_Ineighbor_allgather" = crate::neighbor::PMPI_Neighbor_allgather;
        (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) comm = comm;
    /// `MPI_Ineighbor_allgatherv` (blocking at start).
    fn PMPI_Ineighbor_allgatherv / "MPI_Ineighbor_allgatherv" = crate::neighbor::PMPI_Neighbor_allgatherv;
        (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int) comm = comm;
    /// `MPI_Ineighbor_alltoall` (blocking at start).
    fn PMPI_Ineighbor_alltoall / "MPI_Ineighbor_alltoall" = crate::neighbor::PMPI_Neighbor_alltoall;
        (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) comm = comm;
    /// `MPI_Ineighbor_alltoallv` (blocking at start).
    fn PMPI_Ineighbor_alltoallv / "MPI_Ineighbor_alltoallv" = crate::neighbor::PMPI_Neighbor_alltoallv;
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: c_int, comm: c_int) comm = comm;
    /// `MPI_Ineighbor_alltoallw` (blocking at start).
    fn PMPI_Ineighbor_alltoallw / "MPI_Ineighbor_alltoallw" = crate::neighbor::PMPI_Neighbor_alltoallw;
        (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const isize, recvtypes: *const c_int, comm: c_int) comm = comm;
}
