//! Persistent collectives (`MPI_*_init`, MPI 4.0 §6.13), the neighbourhood forms included.
//!
//! The init call validates what is significant on the calling process (communicator,
//! info, counts, datatypes, operation, root; the neighbourhood forms need a topology) and
//! makes a persistent request (`request::persistent_coll`). Each `MPI_Start` runs one
//! round: the collective's nonblocking form with the arguments captured at init, so a
//! round is a schedule of `oxmpi_coll::nbc` progressing in the background like any
//! nonblocking collective, and reads the send buffers as they are at the start (the MPI
//! contract keeps buffers and count arrays valid until the request is freed). Waiting or
//! testing completes the round and leaves the request inactive for the next start;
//! `MPI_Request_free` releases an inactive one.

use crate::consts::*;
use crate::ffi::{check_count, quietly, slice_in, MpiError, MpiResult};
use crate::icoll::*;
use crate::neighbor::*;
use crate::state::lock;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// What the init call checks: the communicator and the info; returns the communicator's
/// size (its local group's) and whether it is an intercommunicator.
fn base(comm: c_int, info: c_int) -> MpiResult<(i32, bool)> {
    let st = lock();
    st.check_active()?;
    let size = st.comm(comm).map_err(|e| e.on(comm))?.size;
    if info != MPI_INFO_NULL && st.infos.get(info).is_none() {
        return Err(MpiError::new(MPI_ERR_INFO, format!("invalid info handle {info:#x}")).on(comm));
    }
    drop(st);
    Ok((size, crate::intercomm::is_inter(comm)))
}

/// A count and its datatype (committed).
fn counted(count: c_int, datatype: c_int, comm: c_int) -> MpiResult {
    check_count(count).map_err(|e| e.on(comm))?;
    lock()
        .dtype_committed(datatype)
        .map(|_| ())
        .map_err(|e| e.on(comm))
}

/// A reduction operation handle.
fn op(op: c_int, comm: c_int) -> MpiResult {
    crate::op::op_kind(op).map(|_| ()).map_err(|e| e.on(comm))
}

/// A root (of the local group; intercommunicators: `MPI_ROOT`, `MPI_PROC_NULL` or a rank
/// of the remote group, checked at the start).
fn root(root: c_int, (size, inter): (i32, bool), comm: c_int) -> MpiResult {
    if inter {
        return Ok(());
    }
    crate::coll_alg::check_root(root, size, comm)
}

/// Whether the caller's send side is significant (not `MPI_IN_PLACE`).
fn sends(sendbuf: *const c_void) -> bool {
    !crate::coll_alg::is_in_place(sendbuf)
}

/// The neighbourhood forms: an intracommunicator with a process topology.
fn topology(comm: c_int, name: &str) -> MpiResult {
    crate::intercomm::require_intra(comm, name).map_err(|e| e.on(comm))?;
    degrees(comm).map(|_| ()).map_err(|e| e.on(comm))
}

/// Make the persistent request whose rounds `begin` starts (it stores the round's request
/// through its argument, like the nonblocking form it calls).
fn plan(
    comm: c_int,
    request: *mut c_int,
    begin: impl Fn(*mut c_int) -> c_int + Send + Sync + 'static,
) -> MpiResult {
    let start = move || {
        let mut h = MPI_REQUEST_NULL;
        quietly(|| begin(&mut h))?;
        Ok(h)
    };
    crate::request::persistent_coll(comm, Arc::new(start), request)
}

/// Defines persistent collectives: each takes the arguments of its nonblocking form
/// `$ifn` plus `info`, runs `$check` (the communicator argument is `$comm`) (the argument checks; `$b` is [`base`]'s result) and
/// makes a request whose starts call `$ifn` with the same arguments.
macro_rules! persistent {
    ($(
        #[doc = $doc:literal] $pname:ident $name:literal => $ifn:ident,
        ($($arg:ident: $ty:ty),*) on $comm:ident |$b:ident| $check:block
    )*) => {$(
        mpi_fn! {
            #[doc = $doc]
            fn $pname / $name ($($arg: $ty),*, info: c_int, request: *mut c_int) {
                #[allow(unused_variables)]
                let $b = base($comm, info)?;
                $check
                #[derive(Clone, Copy)]
                struct Args { $($arg: $ty),* }
                // SAFETY: the pointers are the caller's buffers and count arrays, which MPI
                // requires to stay valid until the request is freed; they are only passed
                // back to the nonblocking form, on whichever thread calls `MPI_Start`.
                unsafe impl Send for Args {}
                // SAFETY: as above (never dereferenced here).
                unsafe impl Sync for Args {}
                let a = Args { $($arg),* };
                plan($comm, request, move |req| {
                    // The whole `Args` (closures would capture its fields one by one).
                    let whole: Args = a;
                    let Args { $($arg),* } = whole;
                    // SAFETY: the arguments were given to the init call (see `Args`).
                    unsafe { $ifn($($arg),*, req) }
                })
            }
        }
    )*};
}

persistent! {
    #[doc = "`MPI_Barrier_init`."] PMPI_Barrier_init "MPI_Barrier_init" => PMPI_Ibarrier,
    (comm: c_int) on comm |b| {}

    #[doc = "`MPI_Bcast_init`."] PMPI_Bcast_init "MPI_Bcast_init" => PMPI_Ibcast,
    (buffer: *mut c_void, count: c_int, datatype: c_int, root_: c_int, comm: c_int) on comm |b| {
        root(root_, b, comm)?;
        counted(count, datatype, comm)?;
    }

    #[doc = "`MPI_Reduce_init`."] PMPI_Reduce_init "MPI_Reduce_init" => PMPI_Ireduce,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op_: c_int, root_: c_int, comm: c_int) on comm |b| {
        root(root_, b, comm)?;
        counted(count, datatype, comm)?;
        op(op_, comm)?;
    }

    #[doc = "`MPI_Allreduce_init`."] PMPI_Allreduce_init "MPI_Allreduce_init" => PMPI_Iallreduce,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op_: c_int, comm: c_int) on comm |b| {
        counted(count, datatype, comm)?;
        op(op_, comm)?;
    }

    #[doc = "`MPI_Reduce_scatter_block_init`."] PMPI_Reduce_scatter_block_init "MPI_Reduce_scatter_block_init" => PMPI_Ireduce_scatter_block,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: c_int, op_: c_int, comm: c_int) on comm |b| {
        counted(recvcount, datatype, comm)?;
        op(op_, comm)?;
    }

    #[doc = "`MPI_Reduce_scatter_init`."] PMPI_Reduce_scatter_init "MPI_Reduce_scatter_init" => PMPI_Ireduce_scatter,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: c_int, op_: c_int, comm: c_int) on comm |b| {
        counted(0, datatype, comm)?;
        op(op_, comm)?;
    }

    #[doc = "`MPI_Scan_init`."] PMPI_Scan_init "MPI_Scan_init" => PMPI_Iscan,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op_: c_int, comm: c_int) on comm |b| {
        crate::intercomm::require_intra(comm, "MPI_Scan_init").map_err(|e| e.on(comm))?;
        counted(count, datatype, comm)?;
        op(op_, comm)?;
    }

    #[doc = "`MPI_Exscan_init`."] PMPI_Exscan_init "MPI_Exscan_init" => PMPI_Iexscan,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op_: c_int, comm: c_int) on comm |b| {
        crate::intercomm::require_intra(comm, "MPI_Exscan_init").map_err(|e| e.on(comm))?;
        counted(count, datatype, comm)?;
        op(op_, comm)?;
    }

    #[doc = "`MPI_Gather_init`."] PMPI_Gather_init "MPI_Gather_init" => PMPI_Igather,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root_: c_int, comm: c_int) on comm |b| {
        root(root_, b, comm)?;
        if !b.1 && root_ == lock().comm(comm)?.rank {
            counted(recvcount, recvtype, comm)?;
        }
        if sends(sendbuf) && root_ != MPI_ROOT && root_ != MPI_PROC_NULL {
            counted(sendcount, sendtype, comm)?;
        }
    }

    #[doc = "`MPI_Gatherv_init`."] PMPI_Gatherv_init "MPI_Gatherv_init" => PMPI_Igatherv,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, root_: c_int, comm: c_int) on comm |b| {
        root(root_, b, comm)?;
        if sends(sendbuf) && root_ != MPI_ROOT && root_ != MPI_PROC_NULL {
            counted(sendcount, sendtype, comm)?;
        }
    }

    #[doc = "`MPI_Scatter_init`."] PMPI_Scatter_init "MPI_Scatter_init" => PMPI_Iscatter,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root_: c_int, comm: c_int) on comm |b| {
        root(root_, b, comm)?;
        if !b.1 && root_ == lock().comm(comm)?.rank {
            counted(sendcount, sendtype, comm)?;
        }
    }

    #[doc = "`MPI_Scatterv_init`."] PMPI_Scatterv_init "MPI_Scatterv_init" => PMPI_Iscatterv,
    (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root_: c_int, comm: c_int) on comm |b| {
        root(root_, b, comm)?;
    }

    #[doc = "`MPI_Allgather_init`."] PMPI_Allgather_init "MPI_Allgather_init" => PMPI_Iallgather,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm |b| {
        counted(recvcount, recvtype, comm)?;
        if sends(sendbuf) {
            counted(sendcount, sendtype, comm)?;
        }
    }

    #[doc = "`MPI_Allgatherv_init`."] PMPI_Allgatherv_init "MPI_Allgatherv_init" => PMPI_Iallgatherv,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int) on comm |b| {
        counted(0, recvtype, comm)?;
        if sends(sendbuf) {
            counted(sendcount, sendtype, comm)?;
        }
    }

    #[doc = "`MPI_Alltoall_init`."] PMPI_Alltoall_init "MPI_Alltoall_init" => PMPI_Ialltoall,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm |b| {
        counted(recvcount, recvtype, comm)?;
        if sends(sendbuf) {
            counted(sendcount, sendtype, comm)?;
        }
    }

    #[doc = "`MPI_Alltoallv_init`."] PMPI_Alltoallv_init "MPI_Alltoallv_init" => PMPI_Ialltoallv,
    (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: c_int, comm: c_int) on comm |b| {
        counted(0, recvtype, comm)?;
        if sends(sendbuf) {
            counted(0, sendtype, comm)?;
        }
    }

    #[doc = "`MPI_Neighbor_allgather_init`."] PMPI_Neighbor_allgather_init "MPI_Neighbor_allgather_init" => PMPI_Ineighbor_allgather,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm |b| {
        topology(comm, "MPI_Neighbor_allgather_init")?;
        counted(sendcount, sendtype, comm)?;
        counted(recvcount, recvtype, comm)?;
    }

    #[doc = "`MPI_Neighbor_allgatherv_init`."] PMPI_Neighbor_allgatherv_init "MPI_Neighbor_allgatherv_init" => PMPI_Ineighbor_allgatherv,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int) on comm |b| {
        topology(comm, "MPI_Neighbor_allgatherv_init")?;
        counted(sendcount, sendtype, comm)?;
        counted(0, recvtype, comm)?;
    }

    #[doc = "`MPI_Neighbor_alltoall_init`."] PMPI_Neighbor_alltoall_init "MPI_Neighbor_alltoall_init" => PMPI_Ineighbor_alltoall,
    (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) on comm |b| {
        topology(comm, "MPI_Neighbor_alltoall_init")?;
        counted(sendcount, sendtype, comm)?;
        counted(recvcount, recvtype, comm)?;
    }

    #[doc = "`MPI_Neighbor_alltoallv_init`."] PMPI_Neighbor_alltoallv_init "MPI_Neighbor_alltoallv_init" => PMPI_Ineighbor_alltoallv,
    (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: c_int, comm: c_int) on comm |b| {
        topology(comm, "MPI_Neighbor_alltoallv_init")?;
        counted(0, sendtype, comm)?;
        counted(0, recvtype, comm)?;
    }

}

/// The datatype arrays of the `w` forms, copied at init: the standard-ABI library passes
/// converted copies that live only during the call.
struct Types(Vec<c_int>, Vec<c_int>);

impl Types {
    /// `n_send` send types (none when `sendbuf` is `MPI_IN_PLACE`) and `n_recv` receive
    /// types.
    fn copy(
        sendbuf: *const c_void,
        send: *const c_int,
        n_send: usize,
        recv: *const c_int,
        n_recv: usize,
    ) -> MpiResult<Types> {
        let s = if sends(sendbuf) {
            slice_in(send, n_send, "sendtypes")?.to_vec()
        } else {
            Vec::new()
        };
        Ok(Types(s, slice_in(recv, n_recv, "recvtypes")?.to_vec()))
    }

    /// The send types for the nonblocking form (NULL when in place).
    fn send(&self) -> *const c_int {
        if self.0.is_empty() {
            std::ptr::null()
        } else {
            self.0.as_ptr()
        }
    }
}

/// A `w` form's pointer arguments besides the type arrays.
#[derive(Clone, Copy)]
struct WArgs<D> {
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const D,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const D,
}

// SAFETY: the caller's buffers and count/displacement arrays, which MPI requires to stay
// valid until the request is freed; only passed back to the nonblocking form.
unsafe impl<D> Send for WArgs<D> {}
// SAFETY: as above (never dereferenced here).
unsafe impl<D> Sync for WArgs<D> {}

/// Make the persistent request of a `w` form: `begin` gets the arguments, the send and
/// receive type arrays and the round's request pointer.
fn plan_w<D: Copy + 'static>(
    comm: c_int,
    request: *mut c_int,
    a: WArgs<D>,
    types: Types,
    begin: unsafe extern "C" fn(
        *const c_void,
        *const c_int,
        *const D,
        *const c_int,
        *mut c_void,
        *const c_int,
        *const D,
        *const c_int,
        c_int,
        *mut c_int,
    ) -> c_int,
) -> MpiResult {
    plan(comm, request, move |req| {
        let whole: WArgs<D> = a;
        // SAFETY: the arguments of the init call (see `WArgs`) and our copies of its type
        // arrays, alive as long as this closure.
        unsafe {
            begin(
                whole.sendbuf,
                whole.sendcounts,
                whole.sdispls,
                types.send(),
                whole.recvbuf,
                whole.recvcounts,
                whole.rdispls,
                types.1.as_ptr(),
                comm,
                req,
            )
        }
    })
}

mpi_fn! {
    /// `MPI_Alltoallw_init`.
    fn PMPI_Alltoallw_init / "MPI_Alltoallw_init" (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const c_int, comm: c_int, info: c_int, request: *mut c_int) {
        let (size, _) = base(comm, info)?;
        let n = size as usize;
        let types = Types::copy(sendbuf, sendtypes, n, recvtypes, n).map_err(|e| e.on(comm))?;
        let a = WArgs { sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls };
        plan_w(comm, request, a, types, PMPI_Ialltoallw)
    }
}

mpi_fn! {
    /// `MPI_Neighbor_alltoallw_init` (displacements in bytes).
    fn PMPI_Neighbor_alltoallw_init / "MPI_Neighbor_alltoallw_init" (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const isize, recvtypes: *const c_int, comm: c_int, info: c_int, request: *mut c_int) {
        base(comm, info)?;
        topology(comm, "MPI_Neighbor_alltoallw_init")?;
        let (indeg, outdeg) = degrees(comm)?;
        let types = Types::copy(sendbuf, sendtypes, outdeg, recvtypes, indeg).map_err(|e| e.on(comm))?;
        let a = WArgs { sendbuf, sendcounts, sdispls, recvbuf, recvcounts, rdispls };
        plan_w(comm, request, a, types, PMPI_Ineighbor_alltoallw)
    }
}
