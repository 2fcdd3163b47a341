//! Persistent collectives (`MPI_*_init`, MPI 4.0 §6.13), the neighbourhood forms included.
//!
//! The init call validates what is significant on the calling process (communicator,
//! info, counts, datatypes, operation, root; the neighbourhood forms need a topology) and
//! makes a persistent request (`request::persistent_coll`). The init then plans the
//! collective once: the nonblocking form runs with the init's arguments and its schedule
//! (`oxmpi_coll::nbc`) is kept instead of started (`icoll::sched::Plan`). Each `MPI_Start`
//! runs one round: it reads the send buffers as they are at the start into the schedule's
//! places (the MPI contract keeps the buffers valid until the request is freed) and restarts
//! the planned schedule, which progresses in the background like any nonblocking
//! collective; nothing is planned again. The count, displacement
//! and datatype arrays are copied at init (callers such as mpi4py pass temporary ones, and
//! the standard ABI converts datatypes into arrays that live only during the call). Waiting or
//! testing completes the round and leaves the request inactive for the next start;
//! `MPI_Request_free` releases an inactive one.

use crate::consts::*;
use crate::ffi::{check_count, quietly, slice_in, MpiError, MpiResult};
use crate::icoll::sched::{comm_info, sched_err, Plan};
use crate::icoll::*;
use crate::neighbor::*;
use crate::state::lock;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// The calling process's view of the communicator, from [`base`].
#[derive(Clone, Copy)]
struct Base {
    /// Ranks that point-to-point addresses (the remote group's on an intercommunicator).
    size: usize,
    /// Size of the local group.
    local: usize,
    rank: i32,
    inter: bool,
}

impl Base {
    /// Whether the root's arguments are significant here (`root` is ours, or `MPI_ROOT`).
    fn at_root(&self, root: c_int) -> bool {
        if self.inter {
            root == MPI_ROOT
        } else {
            root == self.rank
        }
    }
}

/// What the init call checks: the communicator and the info.
fn base(comm: c_int, info: c_int) -> MpiResult<Base> {
    let st = lock();
    st.check_active()?;
    let c = st.comm(comm).map_err(|e| e.on(comm))?;
    let b = Base {
        size: c.size.max(0) as usize,
        local: c.group.len(),
        rank: c.rank,
        inter: crate::intercomm::is_inter(comm),
    };
    if info != MPI_INFO_NULL && st.infos.get(info).is_none() {
        return Err(MpiError::new(MPI_ERR_INFO, format!("invalid info handle {info:#x}")).on(comm));
    }
    Ok(b)
}

/// The array arguments copied at init, kept as long as the request (counts, displacements
/// and datatypes of either form: `int`, `MPI_Count` or `MPI_Aint`).
#[derive(Default)]
struct Kept(Vec<Box<dyn std::any::Any + Send + Sync>>);

impl Kept {
    /// A copy of `n` items at `p` (`None`: not significant here, `p` as it is).
    fn ints<T: Copy + Send + Sync + 'static>(
        &mut self,
        p: *const T,
        n: Option<usize>,
        what: &str,
    ) -> MpiResult<*const T> {
        let Some(n) = n else { return Ok(p) };
        let v = slice_in(p, n, what)?.to_vec();
        // The vector's heap buffer does not move with the box.
        let at = v.as_ptr();
        self.0.push(Box::new(v));
        Ok(at)
    }
}

/// A count and its datatype (committed).
fn counted(count: impl Into<i64>, datatype: c_int, comm: c_int) -> MpiResult {
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
fn root(root: c_int, b: Base, comm: c_int) -> MpiResult {
    if b.inter {
        return Ok(());
    }
    crate::coll_alg::check_root(root, b.size as i32, comm)
}

/// `MPI_Allreduce_init`, `MPI_Reduce_init`, `MPI_Scan_init`, `MPI_Exscan_init`,
/// `MPI_Reduce_scatter(_block)_init` (the whole vector): whether
/// every rank passes as many bytes as we do (checked once
/// here, for every start: the rounds planned for one length do not match those of another,
/// so that erroneous counts would hang or sum wrong). Every rank fails alike when they
/// differ (`CollComm::same_length`); nothing is planned then.
fn same_length(count: impl Into<i64>, datatype: c_int, comm: c_int) -> MpiResult {
    same_length_marked(count, 0, datatype, comm)
}

/// [`same_length`] of a vector whose length carries `mark` too (a reduce-scatter's
/// [`oxmpi_coll::counts_mark`]: different block counts of the same sum fail alike).
fn same_length_marked(
    count: impl Into<i64>,
    mark: usize,
    datatype: c_int,
    comm: c_int,
) -> MpiResult {
    let size = lock()
        .dtype_committed(datatype)
        .map_err(|e| e.on(comm))?
        .size;
    let n = usize::try_from(count.into()).unwrap_or(0);
    let (a, _, _) = comm_info(comm)?;
    a.same_length(n.saturating_mul(size) | mark)
        .map_err(sched_err(comm))
}

/// Whether the caller's send side is significant (not `MPI_IN_PLACE`).
fn sends(sendbuf: *const c_void) -> bool {
    !crate::coll_alg::is_in_place(sendbuf)
}

/// The neighbourhood forms: an intracommunicator with a process topology; its (in, out)
/// degrees.
fn topology(comm: c_int, name: &str) -> MpiResult<(usize, usize)> {
    crate::intercomm::require_intra(comm, name).map_err(|e| e.on(comm))?;
    degrees(comm).map_err(|e| e.on(comm))
}

/// Make the persistent request whose rounds `begin` (the nonblocking form, which stores a
/// request through its argument) plans: once, here, and each start restarts that plan.
fn plan(
    comm: c_int,
    request: *mut c_int,
    begin: impl Fn(*mut c_int) -> c_int + Send + Sync + 'static,
) -> MpiResult {
    if request.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL request").on(comm));
    }
    let mut h = MPI_REQUEST_NULL;
    let planned = Plan::make(comm, || quietly(|| begin(&mut h)))?;
    let Some(p) = planned else {
        // Every nonblocking collective is a schedule; none means a bug there.
        return Err(
            MpiError::new(MPI_ERR_INTERN, "persistent collective: no schedule planned").on(comm),
        );
    };
    let start = move || {
        // The init's arguments (and the arrays copied for them) live with the plan.
        let _ = &begin;
        p.start()
    };
    crate::request::persistent_coll(comm, Arc::new(start), request)
}

/// Defines persistent collectives in both forms (`int` counts and the large-count `_c`
/// form, as [`mpi_fn_c!`](crate::ffi::mpi_fn_c) does: `Count` and `Disp` are the form's
/// count and displacement types): each takes the arguments of its nonblocking form
/// (`$ifn`, `$cifn`) plus `info`, runs `$check` (the communicator argument is `$comm`; `$b`
/// is [`base`]'s result) and makes a request whose starts call the nonblocking form of the
/// same family with the same arguments.
macro_rules! persistent {
    ($(
        #[doc = $doc:literal] $pname:ident $name:literal => $ifn:ident,
        $cpname:ident $cname:literal => $cifn:ident,
        ($($arg:ident: $ty:ty),*) on $comm:ident |$b:ident, $kept:ident| $check:block
    )*) => {$(
        persistent!(@form $pname $name ::std::ffi::c_int, ::std::ffi::c_int, $ifn, #[doc = $doc]
            ($($arg: $ty),*) on $comm |$b, $kept| $check);
        persistent!(@form $cpname $cname i64, isize, $cifn, #[doc = $doc]
            ($($arg: $ty),*) on $comm |$b, $kept| $check);
    )*};
    (@form $pname:ident $name:literal $count:ty, $disp:ty, $ifn:ident, #[doc = $doc:literal]
        ($($arg:ident: $ty:ty),*) on $comm:ident |$b:ident, $kept:ident| $check:block) => {
        crate::ffi::mpi_fn_c! {
            @form $pname $name $count, $disp, #[doc = $doc]
            ($($arg: $ty),*, info: c_int, request: *mut c_int) {
                #[allow(unused_variables)]
                let $b = base($comm, info)?;
                #[allow(unused_mut)]
                let mut $kept = Kept::default();
                $(
                    #[allow(unused_mut)]
                    let mut $arg = $arg;
                )*
                $check
                #[derive(Clone, Copy)]
                struct Args { $($arg: $ty),* }
                // SAFETY: the pointers are the caller's buffers, which MPI requires to stay
                // valid until the request is freed, and the arrays in `$kept` (moved into
                // the closure with them); they are only passed back to the nonblocking
                // form, on whichever thread calls `MPI_Start`.
                unsafe impl Send for Args {}
                // SAFETY: as above (never dereferenced here).
                unsafe impl Sync for Args {}
                let a = Args { $($arg),* };
                plan($comm, request, move |req| {
                    // The copied arrays the arguments may point into live with the closure.
                    let _ = &$kept;
                    // The whole `Args` (closures would capture its fields one by one).
                    let whole: Args = a;
                    let Args { $($arg),* } = whole;
                    // SAFETY: the arguments were given to the init call (see `Args`).
                    unsafe { $ifn($($arg),*, req) }
                })
            }
        }
    };
}

// No large-count form: it has no count.
persistent!(@form PMPI_Barrier_init "MPI_Barrier_init" c_int, c_int, PMPI_Ibarrier,
    #[doc = "`MPI_Barrier_init`."] (comm: c_int) on comm |b, kept| {});

persistent! {
    #[doc = "`MPI_Bcast_init`."] PMPI_Bcast_init "MPI_Bcast_init" => PMPI_Ibcast,
    PMPI_Bcast_init_c "MPI_Bcast_init_c" => PMPI_Ibcast_c,
    (buffer: *mut c_void, count: Count, datatype: c_int, root_: c_int, comm: c_int) on comm |b, kept| {
        root(root_, b, comm)?;
        counted(count, datatype, comm)?;
    }

    #[doc = "`MPI_Reduce_init`."] PMPI_Reduce_init "MPI_Reduce_init" => PMPI_Ireduce,
    PMPI_Reduce_init_c "MPI_Reduce_init_c" => PMPI_Ireduce_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op_: c_int, root_: c_int, comm: c_int) on comm |b, kept| {
        root(root_, b, comm)?;
        counted(count, datatype, comm)?;
        op(op_, comm)?;
        if !b.inter {
            same_length(count, datatype, comm)?;
        }
    }

    #[doc = "`MPI_Allreduce_init`."] PMPI_Allreduce_init "MPI_Allreduce_init" => PMPI_Iallreduce,
    PMPI_Allreduce_init_c "MPI_Allreduce_init_c" => PMPI_Iallreduce_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op_: c_int, comm: c_int) on comm |b, kept| {
        counted(count, datatype, comm)?;
        op(op_, comm)?;
        if !b.inter {
            same_length(count, datatype, comm)?;
        }
    }

    #[doc = "`MPI_Reduce_scatter_block_init`."] PMPI_Reduce_scatter_block_init "MPI_Reduce_scatter_block_init" => PMPI_Ireduce_scatter_block,
    PMPI_Reduce_scatter_block_init_c "MPI_Reduce_scatter_block_init_c" => PMPI_Ireduce_scatter_block_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count, datatype: c_int, op_: c_int, comm: c_int) on comm |b, kept| {
        counted(recvcount, datatype, comm)?;
        op(op_, comm)?;
        if !b.inter {
            // The whole vector's length (each block folds every rank's vector).
            same_length(i64::from(recvcount).saturating_mul(b.size as i64), datatype, comm)?;
        }
    }

    #[doc = "`MPI_Reduce_scatter_init`."] PMPI_Reduce_scatter_init "MPI_Reduce_scatter_init" => PMPI_Ireduce_scatter,
    PMPI_Reduce_scatter_init_c "MPI_Reduce_scatter_init_c" => PMPI_Ireduce_scatter_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count, datatype: c_int, op_: c_int, comm: c_int) on comm |b, kept| {
        recvcounts = kept.ints(recvcounts, Some(b.local), "recvcounts")?;
        counted(0, datatype, comm)?;
        op(op_, comm)?;
        if !b.inter {
            // The whole vector's length, as `MPI_Reduce_scatter_block_init`.
            let counts = slice_in(recvcounts, b.local, "recvcounts")?;
            let total = counts.iter().fold(0i64, |t, &c| t.saturating_add(i64::from(c).max(0)));
            // And the blocks' mark: counts that differ with the same sum fail alike.
            let mark = oxmpi_coll::counts_mark(counts.iter().map(|&c| usize::try_from(c).unwrap_or(0)));
            same_length_marked(total, mark, datatype, comm)?;
        }
    }

    #[doc = "`MPI_Scan_init`."] PMPI_Scan_init "MPI_Scan_init" => PMPI_Iscan,
    PMPI_Scan_init_c "MPI_Scan_init_c" => PMPI_Iscan_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op_: c_int, comm: c_int) on comm |b, kept| {
        crate::intercomm::require_intra(comm, "MPI_Scan_init").map_err(|e| e.on(comm))?;
        counted(count, datatype, comm)?;
        op(op_, comm)?;
        same_length(count, datatype, comm)?;
    }

    #[doc = "`MPI_Exscan_init`."] PMPI_Exscan_init "MPI_Exscan_init" => PMPI_Iexscan,
    PMPI_Exscan_init_c "MPI_Exscan_init_c" => PMPI_Iexscan_c,
    (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op_: c_int, comm: c_int) on comm |b, kept| {
        crate::intercomm::require_intra(comm, "MPI_Exscan_init").map_err(|e| e.on(comm))?;
        counted(count, datatype, comm)?;
        op(op_, comm)?;
        same_length(count, datatype, comm)?;
    }

    #[doc = "`MPI_Gather_init`."] PMPI_Gather_init "MPI_Gather_init" => PMPI_Igather,
    PMPI_Gather_init_c "MPI_Gather_init_c" => PMPI_Igather_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root_: c_int, comm: c_int) on comm |b, kept| {
        root(root_, b, comm)?;
        if !b.inter && b.at_root(root_) {
            counted(recvcount, recvtype, comm)?;
        }
        if sends(sendbuf) && root_ != MPI_ROOT && root_ != MPI_PROC_NULL {
            counted(sendcount, sendtype, comm)?;
        }
    }

    #[doc = "`MPI_Gatherv_init`."] PMPI_Gatherv_init "MPI_Gatherv_init" => PMPI_Igatherv,
    PMPI_Gatherv_init_c "MPI_Gatherv_init_c" => PMPI_Igatherv_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Disp, recvtype: c_int, root_: c_int, comm: c_int) on comm |b, kept| {
        root(root_, b, comm)?;
        let n = b.at_root(root_).then_some(b.size);
        recvcounts = kept.ints(recvcounts, n, "recvcounts")?;
        displs = kept.ints(displs, n, "displs")?;
        if sends(sendbuf) && root_ != MPI_ROOT && root_ != MPI_PROC_NULL {
            counted(sendcount, sendtype, comm)?;
        }
    }

    #[doc = "`MPI_Scatter_init`."] PMPI_Scatter_init "MPI_Scatter_init" => PMPI_Iscatter,
    PMPI_Scatter_init_c "MPI_Scatter_init_c" => PMPI_Iscatter_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root_: c_int, comm: c_int) on comm |b, kept| {
        root(root_, b, comm)?;
        if !b.inter && b.at_root(root_) {
            counted(sendcount, sendtype, comm)?;
        }
    }

    #[doc = "`MPI_Scatterv_init`."] PMPI_Scatterv_init "MPI_Scatterv_init" => PMPI_Iscatterv,
    PMPI_Scatterv_init_c "MPI_Scatterv_init_c" => PMPI_Iscatterv_c,
    (sendbuf: *const c_void, sendcounts: *const Count, displs: *const Disp, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root_: c_int, comm: c_int) on comm |b, kept| {
        root(root_, b, comm)?;
        let n = b.at_root(root_).then_some(b.size);
        sendcounts = kept.ints(sendcounts, n, "sendcounts")?;
        displs = kept.ints(displs, n, "displs")?;
    }

    #[doc = "`MPI_Allgather_init`."] PMPI_Allgather_init "MPI_Allgather_init" => PMPI_Iallgather,
    PMPI_Allgather_init_c "MPI_Allgather_init_c" => PMPI_Iallgather_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int) on comm |b, kept| {
        counted(recvcount, recvtype, comm)?;
        if sends(sendbuf) {
            counted(sendcount, sendtype, comm)?;
        }
    }

    #[doc = "`MPI_Allgatherv_init`."] PMPI_Allgatherv_init "MPI_Allgatherv_init" => PMPI_Iallgatherv,
    PMPI_Allgatherv_init_c "MPI_Allgatherv_init_c" => PMPI_Iallgatherv_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Disp, recvtype: c_int, comm: c_int) on comm |b, kept| {
        counted(0, recvtype, comm)?;
        if sends(sendbuf) {
            counted(sendcount, sendtype, comm)?;
        }
        recvcounts = kept.ints(recvcounts, Some(b.size), "recvcounts")?;
        displs = kept.ints(displs, Some(b.size), "displs")?;
    }

    #[doc = "`MPI_Alltoall_init`."] PMPI_Alltoall_init "MPI_Alltoall_init" => PMPI_Ialltoall,
    PMPI_Alltoall_init_c "MPI_Alltoall_init_c" => PMPI_Ialltoall_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int) on comm |b, kept| {
        counted(recvcount, recvtype, comm)?;
        if sends(sendbuf) {
            counted(sendcount, sendtype, comm)?;
        }
    }

    #[doc = "`MPI_Alltoallv_init`."] PMPI_Alltoallv_init "MPI_Alltoallv_init" => PMPI_Ialltoallv,
    PMPI_Alltoallv_init_c "MPI_Alltoallv_init_c" => PMPI_Ialltoallv_c,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Disp, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Disp, recvtype: c_int, comm: c_int) on comm |b, kept| {
        counted(0, recvtype, comm)?;
        let n = sends(sendbuf).then_some(b.size);
        if n.is_some() {
            counted(0, sendtype, comm)?;
        }
        sendcounts = kept.ints(sendcounts, n, "sendcounts")?;
        sdispls = kept.ints(sdispls, n, "sdispls")?;
        recvcounts = kept.ints(recvcounts, Some(b.size), "recvcounts")?;
        rdispls = kept.ints(rdispls, Some(b.size), "rdispls")?;
    }

    #[doc = "`MPI_Alltoallw_init`."] PMPI_Alltoallw_init "MPI_Alltoallw_init" => PMPI_Ialltoallw,
    PMPI_Alltoallw_init_c "MPI_Alltoallw_init_c" => PMPI_Ialltoallw_c,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Disp, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Disp, recvtypes: *const c_int, comm: c_int) on comm |b, kept| {
        let n = sends(sendbuf).then_some(b.size);
        sendcounts = kept.ints(sendcounts, n, "sendcounts")?;
        sdispls = kept.ints(sdispls, n, "sdispls")?;
        sendtypes = kept.ints(sendtypes, n, "sendtypes")?;
        recvcounts = kept.ints(recvcounts, Some(b.size), "recvcounts")?;
        rdispls = kept.ints(rdispls, Some(b.size), "rdispls")?;
        recvtypes = kept.ints(recvtypes, Some(b.size), "recvtypes")?;
    }

    #[doc = "`MPI_Neighbor_allgather_init`."] PMPI_Neighbor_allgather_init "MPI_Neighbor_allgather_init" => PMPI_Ineighbor_allgather,
    PMPI_Neighbor_allgather_init_c "MPI_Neighbor_allgather_init_c" => PMPI_Ineighbor_allgather_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int) on comm |b, kept| {
        topology(comm, "MPI_Neighbor_allgather_init")?;
        counted(sendcount, sendtype, comm)?;
        counted(recvcount, recvtype, comm)?;
    }

    #[doc = "`MPI_Neighbor_allgatherv_init`."] PMPI_Neighbor_allgatherv_init "MPI_Neighbor_allgatherv_init" => PMPI_Ineighbor_allgatherv,
    PMPI_Neighbor_allgatherv_init_c "MPI_Neighbor_allgatherv_init_c" => PMPI_Ineighbor_allgatherv_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Disp, recvtype: c_int, comm: c_int) on comm |b, kept| {
        let (indeg, _) = topology(comm, "MPI_Neighbor_allgatherv_init")?;
        counted(sendcount, sendtype, comm)?;
        counted(0, recvtype, comm)?;
        recvcounts = kept.ints(recvcounts, Some(indeg), "recvcounts")?;
        displs = kept.ints(displs, Some(indeg), "displs")?;
    }

    #[doc = "`MPI_Neighbor_alltoall_init`."] PMPI_Neighbor_alltoall_init "MPI_Neighbor_alltoall_init" => PMPI_Ineighbor_alltoall,
    PMPI_Neighbor_alltoall_init_c "MPI_Neighbor_alltoall_init_c" => PMPI_Ineighbor_alltoall_c,
    (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int) on comm |b, kept| {
        topology(comm, "MPI_Neighbor_alltoall_init")?;
        counted(sendcount, sendtype, comm)?;
        counted(recvcount, recvtype, comm)?;
    }

    #[doc = "`MPI_Neighbor_alltoallv_init`."] PMPI_Neighbor_alltoallv_init "MPI_Neighbor_alltoallv_init" => PMPI_Ineighbor_alltoallv,
    PMPI_Neighbor_alltoallv_init_c "MPI_Neighbor_alltoallv_init_c" => PMPI_Ineighbor_alltoallv_c,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Disp, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Disp, recvtype: c_int, comm: c_int) on comm |b, kept| {
        let (indeg, outdeg) = topology(comm, "MPI_Neighbor_alltoallv_init")?;
        counted(0, sendtype, comm)?;
        counted(0, recvtype, comm)?;
        sendcounts = kept.ints(sendcounts, Some(outdeg), "sendcounts")?;
        sdispls = kept.ints(sdispls, Some(outdeg), "sdispls")?;
        recvcounts = kept.ints(recvcounts, Some(indeg), "recvcounts")?;
        rdispls = kept.ints(rdispls, Some(indeg), "rdispls")?;
    }

    #[doc = "`MPI_Neighbor_alltoallw_init` (displacements in bytes)."] PMPI_Neighbor_alltoallw_init "MPI_Neighbor_alltoallw_init" => PMPI_Ineighbor_alltoallw,
    PMPI_Neighbor_alltoallw_init_c "MPI_Neighbor_alltoallw_init_c" => PMPI_Ineighbor_alltoallw_c,
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const isize, recvtypes: *const c_int, comm: c_int) on comm |b, kept| {
        let (indeg, outdeg) = topology(comm, "MPI_Neighbor_alltoallw_init")?;
        sendcounts = kept.ints(sendcounts, Some(outdeg), "sendcounts")?;
        sdispls = kept.ints(sdispls, Some(outdeg), "sdispls")?;
        sendtypes = kept.ints(sendtypes, Some(outdeg), "sendtypes")?;
        recvcounts = kept.ints(recvcounts, Some(indeg), "recvcounts")?;
        rdispls = kept.ints(rdispls, Some(indeg), "rdispls")?;
        recvtypes = kept.ints(recvtypes, Some(indeg), "recvtypes")?;
    }

}
