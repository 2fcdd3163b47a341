//! Nonblocking collectives (`MPI_I*`).
//!
//! `MPI_Ibarrier`, `MPI_Ibcast`, `MPI_Ireduce`, `MPI_Iallreduce`, `MPI_Igather`,
//! `MPI_Iscatter`, `MPI_Iallgather` and `MPI_Ialltoall` on intracommunicators **progress in
//! the background**: the call builds an `oxmpi_coll::sched::Schedule` (rounds of
//! sends/receives on the communicator's collective context, then local reductions/copies),
//! starts it without blocking and returns a request. A progress thread of the library
//! (started on the first such call, asleep while no schedule is active) advances every
//! active schedule whatever the application does meanwhile (computation, point-to-point,
//! other collectives) and completes the request when its schedule ends; `MPI_Test`/
//! `MPI_Wait` then see it complete. The request is internally a generalized request; its
//! status is empty (`MPI_ANY_SOURCE`, `MPI_ANY_TAG`, count 0) with the collective's error
//! code. Non-contiguous datatypes are packed at the call and unpacked at completion.
//!
//! Reductions with a user-defined operation are not run on the progress thread (the user
//! function may depend on the calling thread, e.g. an interpreter lock), so
//! `MPI_Ireduce`/`MPI_Iallreduce` with a user op, and every other nonblocking collective
//! (v/w variants, scans, reduce-scatter, neighbourhood) are still **blocking at start**:
//! they run the blocking collective and return an already completed request. That is
//! correct for every program that does not need progress of such a collective while it
//! does something the other members depend on before waiting.
use crate::backend::EStatus;
use crate::coll_alg as alg;
use crate::consts::*;
use crate::datatype::{pack_into, unpack_from, Datatype};
use crate::ffi::check_count;
use crate::ffi::{enter, out, MpiError, MpiResult};
use crate::request::{Pending, Request};
use crate::state::lock;
use oxmpi_coll::sched::{OwnedOp, Region, Schedule};
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

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
    /// `MPI_Igatherv` (blocking at start).
    fn PMPI_Igatherv / "MPI_Igatherv" = crate::coll::PMPI_Gatherv;
        (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, root: c_int, comm: c_int) comm = comm;
    /// `MPI_Iscatterv` (blocking at start).
    fn PMPI_Iscatterv / "MPI_Iscatterv" = crate::coll::PMPI_Scatterv;
        (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) comm = comm;
    /// `MPI_Iallgatherv` (blocking at start).
    fn PMPI_Iallgatherv / "MPI_Iallgatherv" = crate::coll::PMPI_Allgatherv;
        (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int) comm = comm;
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

// ---- schedules progressed in the background ----

/// Packed bytes to unpack into the user's memory when a schedule completes: datatype,
/// item count, address, and the schedule region holding the bytes.
struct Unpack(Arc<Datatype>, usize, usize, usize);

/// A started schedule and its request.
struct Active {
    h: c_int,
    sched: Schedule,
    unpack: Vec<Unpack>,
    /// The generalized request's extra state: the collective's error code.
    code: *const AtomicI32,
}

// SAFETY: `code` is a leaked box freed only by the request's free callback, which runs
// after the completion (the last use here); the schedule is `Send`; the unpack addresses
// are the user's buffers, valid until completion by the MPI contract.
unsafe impl Send for Active {}

static ACTIVE: Mutex<Vec<Active>> = Mutex::new(Vec::new());
static WAKE: Condvar = Condvar::new();
static THREAD: std::sync::Once = std::sync::Once::new();

/// `MPI_Grequest_query_function`: an empty status with the collective's error code.
unsafe extern "C" fn query(extra: *mut c_void, status: *mut crate::request::MpiStatus) -> c_int {
    // SAFETY: `extra` is the AtomicI32 box of `start`, alive until `free_state`.
    let code = unsafe { &*(extra as *const AtomicI32) }.load(Ordering::Acquire);
    let mut s = crate::request::empty_status();
    s.error = code;
    // SAFETY: the generalized request machinery passes a valid status.
    unsafe { *status = s };
    MPI_SUCCESS
}

/// `MPI_Grequest_free_function`: release the error code box.
unsafe extern "C" fn free_state(extra: *mut c_void) -> c_int {
    // SAFETY: the box leaked in `start`; freed once, after completion.
    drop(unsafe { Box::from_raw(extra.cast::<AtomicI32>()) });
    MPI_SUCCESS
}

/// Finish a schedule: unpack received data, record the outcome, complete the request.
fn complete(mut a: Active, r: oxmpi_coll::Result<()>) {
    let code = match r {
        Ok(()) => {
            for u in &a.unpack {
                if let Some(v) = a.sched.take_owned(u.3) {
                    // SAFETY: the user's buffer has room for `u.1` items of `u.0` (MPI
                    // contract, valid until completion, which is now).
                    unsafe { unpack_from(&u.0, u.1, u.2 as *mut u8, &v) };
                }
            }
            MPI_SUCCESS
        }
        Err(e) => crate::backend::err(e).code,
    };
    // SAFETY: see `Active::code`.
    unsafe { &*a.code }.store(code, Ordering::Release);
    // SAFETY: `a.h` is the generalized request created in `start`, completed once.
    unsafe { crate::grequest::PMPI_Grequest_complete(a.h) };
}

/// The progress thread: advances every active schedule; sleeps while there is none and
/// backs off (yield, then short sleeps) while they wait for other ranks.
fn progress_thread() {
    let mut idle: u32 = 0;
    loop {
        let mut done = Vec::new();
        {
            let mut g = ACTIVE.lock().unwrap_or_else(|p| p.into_inner());
            while g.is_empty() {
                idle = 0;
                g = WAKE.wait(g).unwrap_or_else(|p| p.into_inner());
            }
            let mut i = 0;
            while i < g.len() {
                match g[i].sched.progress() {
                    Some(r) => done.push((g.swap_remove(i), r)),
                    None => i += 1,
                }
            }
        }
        if done.is_empty() {
            idle = idle.saturating_add(1);
            if idle < 256 {
                std::thread::yield_now();
            } else {
                let us = (u64::from(idle - 256) / 16).min(200) + 2;
                std::thread::sleep(Duration::from_micros(us));
            }
        } else {
            idle = 0;
        }
        for (a, r) in done {
            complete(a, r);
        }
    }
}

/// Start `sched` for `comm` and store its request in `*request`: one progress step now,
/// the rest in the background.
fn start(comm: c_int, sched: Schedule, unpack: Vec<Unpack>, request: *mut c_int) -> MpiResult {
    if request.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL request").on(comm));
    }
    let code = Box::into_raw(Box::new(AtomicI32::new(MPI_SUCCESS)));
    let mut h: c_int = MPI_REQUEST_NULL;
    // SAFETY: valid callbacks and output pointer; `code` is released by `free_state`.
    let rc = unsafe {
        crate::grequest::PMPI_Grequest_start(
            Some(query),
            Some(free_state),
            None,
            code.cast(),
            &mut h,
        )
    };
    if rc != MPI_SUCCESS {
        // SAFETY: not handed over to a request.
        drop(unsafe { Box::from_raw(code) });
        return Err(MpiError::new(rc, "cannot create the request").on(comm));
    }
    if let Some(r) = lock().reqs.get_mut(h) {
        r.comm = comm;
    }
    let mut a = Active {
        h,
        sched,
        unpack,
        code,
    };
    match a.sched.progress() {
        Some(r) => complete(a, r),
        None => {
            THREAD.call_once(|| {
                std::thread::Builder::new()
                    .name("oxmpi-icoll".into())
                    .spawn(progress_thread)
                    .expect("spawn the nonblocking-collective progress thread");
            });
            ACTIVE.lock().unwrap_or_else(|p| p.into_inner()).push(a);
            WAKE.notify_one();
        }
    }
    out(request, h, "request")
}

/// The collective context, rank and size of intracommunicator `comm`.
fn comm_info(comm: c_int) -> MpiResult<(oxmpi_coll::CollComm, i32, i32)> {
    let (ctx, rank, size) = {
        let st = lock();
        st.check_active()?;
        let c = st.comm(comm)?;
        (c.coll, c.rank, c.size)
    };
    let e = crate::backend::engine()?;
    Ok((
        oxmpi_coll::CollComm::on_context_known(e, ctx, ctx, rank, size),
        rank,
        size,
    ))
}

fn dtype(h: c_int, comm: c_int) -> MpiResult<Arc<Datatype>> {
    lock().dtype_committed(h).map_err(|e| e.on(comm))
}

/// `count` items of `dt` at `buf` as a schedule region: the memory itself when the type is
/// contiguous, otherwise owned bytes (packed from `buf` if `fill`) that are unpacked back
/// into `buf` at completion if `store` (then pushed to `unpack` as region `index`).
///
/// # Safety
/// `buf` holds (if `fill`) or has room for (if `store`) `count` items of `dt`, valid until
/// the schedule completes.
unsafe fn region(
    dt: &Arc<Datatype>,
    count: usize,
    buf: *mut c_void,
    fill: bool,
    store: bool,
    index: usize,
    unpack: &mut Vec<Unpack>,
) -> Region {
    let n = dt.size * count;
    if dt.is_contiguous() && !buf.is_null() && n > 0 {
        return Region::Raw(buf.cast::<u8>().wrapping_offset(dt.lb), n);
    }
    let mut v = Vec::with_capacity(n);
    if fill && n > 0 {
        // SAFETY: caller contract.
        unsafe { pack_into(dt, count, buf.cast(), &mut v) };
    }
    v.resize(n, 0);
    if store && n > 0 {
        unpack.push(Unpack(dt.clone(), count, buf as usize, index));
    }
    Region::Owned(v)
}

/// Bytes of a region (for copying our own block).
fn region_bytes(r: &mut Region) -> &mut [u8] {
    match r {
        // SAFETY: a raw region is `n` bytes of the caller's memory (see `region`).
        Region::Raw(p, n) => unsafe { std::slice::from_raw_parts_mut(*p, *n) },
        Region::Owned(v) => v,
    }
}

/// The reduction of `(datatype, op)` as an owned op, or `None` for a user-defined op (run
/// blocking at start instead).
fn owned_op(dt: &Arc<Datatype>, dth: c_int, op: c_int, comm: c_int) -> MpiResult<Option<OwnedOp>> {
    let red = alg::Reducer::new(dt, dth, op).map_err(|e| e.on(comm))?;
    if !matches!(crate::op::op_kind(op)?, crate::op::OpKind::Builtin(_)) {
        return Ok(None);
    }
    let (elem_size, commutative) = (red.elem(), red.commutative());
    Ok(Some(OwnedOp {
        f: Box::new(move |a: &[u8], b: &mut [u8]| red.apply(a, b)),
        elem_size,
        commutative,
    }))
}

fn sched_err(comm: c_int) -> impl Fn(oxmpi_engine::Error) -> MpiError {
    alg::err(comm)
}

mpi_fn! {
    /// `MPI_Ibarrier` (progresses in the background).
    fn PMPI_Ibarrier / "MPI_Ibarrier" (comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { crate::intercoll::barrier(&l)?; return completed(request, comm); }
        let (a, _, _) = comm_info(comm)?;
        let s = a.ibarrier().map_err(sched_err(comm))?;
        start(comm, s, Vec::new(), request)
    }
}

mpi_fn! {
    /// `MPI_Ibcast` (progresses in the background).
    fn PMPI_Ibcast / "MPI_Ibcast" (buffer: *mut c_void, count: c_int, datatype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { crate::intercoll::bcast(&l, buffer, count, datatype, root)?; return completed(request, comm); }
        let (a, rank, size) = comm_info(comm)?;
        alg::check_root(root, size, comm)?;
        let n = check_count(count).map_err(|e| e.on(comm))?;
        let dt = dtype(datatype, comm)?;
        alg::check_buf(buffer, &dt, n, comm)?;
        let mut unpack = Vec::new();
        let me = rank == root;
        // SAFETY: MPI contract: `buffer` holds (root) or has room for `n` items until
        // completion.
        let r = unsafe { region(&dt, n, buffer, me, !me, 0, &mut unpack) };
        let s = a.ibcast(r, root).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

mpi_fn! {
    /// `MPI_Iallreduce` (in the background for predefined ops).
    fn PMPI_Iallreduce / "MPI_Iallreduce" (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { crate::intercoll::allreduce(&l, sendbuf, recvbuf, count, datatype, op)?; return completed(request, comm); }
        let (a, _, _) = comm_info(comm)?;
        let n = check_count(count).map_err(|e| e.on(comm))?;
        let dt = dtype(datatype, comm)?;
        let Some(o) = owned_op(&dt, datatype, op, comm)? else {
            // SAFETY: forwarding the caller's arguments.
            let rc = unsafe { crate::coll::PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm) };
            if rc != MPI_SUCCESS {
                return Err(MpiError::new(rc, "MPI_Allreduce failed").on(comm));
            }
            return completed(request, comm);
        };
        let in_place = alg::is_in_place(sendbuf);
        alg::check_buf(recvbuf, &dt, n, comm)?;
        if !in_place {
            alg::check_buf(sendbuf, &dt, n, comm)?;
        }
        let mut unpack = Vec::new();
        // SAFETY: MPI contract: recvbuf has room for `n` items (in place: holds ours).
        let mut r = unsafe { region(&dt, n, recvbuf, in_place, true, 0, &mut unpack) };
        if !in_place {
            // SAFETY: MPI contract: sendbuf holds `n` items.
            let send = unsafe { alg::SendBytes::new(&dt, n, sendbuf) };
            region_bytes(&mut r).copy_from_slice(send.bytes());
        }
        let s = a.iallreduce(r, o).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

mpi_fn! {
    /// `MPI_Ireduce` (in the background for predefined ops).
    fn PMPI_Ireduce / "MPI_Ireduce" (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { crate::intercoll::reduce(&l, sendbuf, recvbuf, count, datatype, op, root)?; return completed(request, comm); }
        let (a, rank, size) = comm_info(comm)?;
        alg::check_root(root, size, comm)?;
        let n = check_count(count).map_err(|e| e.on(comm))?;
        let dt = dtype(datatype, comm)?;
        let Some(o) = owned_op(&dt, datatype, op, comm)? else {
            // SAFETY: forwarding the caller's arguments.
            let rc = unsafe { crate::coll::PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm) };
            if rc != MPI_SUCCESS {
                return Err(MpiError::new(rc, "MPI_Reduce failed").on(comm));
            }
            return completed(request, comm);
        };
        let me = rank == root;
        let src = if alg::is_in_place(sendbuf) && me { recvbuf.cast_const() } else { sendbuf };
        alg::check_buf(src, &dt, n, comm)?;
        if me {
            alg::check_buf(recvbuf, &dt, n, comm)?;
        }
        // SAFETY: MPI contract: the contribution holds `n` items.
        let data = unsafe { alg::pack(&dt, n, src) };
        let mut unpack = Vec::new();
        let out = if me {
            // SAFETY: MPI contract: recvbuf has room for `n` items at the root.
            Some(unsafe { region(&dt, n, recvbuf, false, true, 1, &mut unpack) })
        } else {
            None
        };
        let s = a.ireduce(data, out, root, o).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

mpi_fn! {
    /// `MPI_Igather` (progresses in the background).
    fn PMPI_Igather / "MPI_Igather" (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { crate::intercoll::gather(&l, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root)?; return completed(request, comm); }
        let (a, rank, size) = comm_info(comm)?;
        alg::check_root(root, size, comm)?;
        let p = size as usize;
        let me = rank == root;
        let in_place = alg::is_in_place(sendbuf) && me;
        let mut unpack = Vec::new();
        let (recv, b) = if me {
            let rdt = dtype(recvtype, comm)?;
            let rc = check_count(recvcount).map_err(|e| e.on(comm))?;
            alg::check_buf(recvbuf, &rdt, rc * p, comm)?;
            // SAFETY: MPI contract: recvbuf has room for `size` blocks of `rc` items (in
            // place: holds ours).
            (unsafe { region(&rdt, rc * p, recvbuf, in_place, true, 1, &mut unpack) }, rc * rdt.size)
        } else {
            (Region::Owned(Vec::new()), 0)
        };
        let mut recv = recv;
        let send = if in_place {
            let own = root as usize * b;
            Region::Owned(region_bytes(&mut recv)[own..own + b].to_vec())
        } else {
            let sdt = dtype(sendtype, comm)?;
            let sc = check_count(sendcount).map_err(|e| e.on(comm))?;
            alg::check_buf(sendbuf, &sdt, sc, comm)?;
            // SAFETY: MPI contract: sendbuf holds `sc` items until completion.
            unsafe { region(&sdt, sc, sendbuf.cast_mut(), true, false, 0, &mut unpack) }
        };
        let (counts, displs): (Vec<usize>, Vec<usize>) = (0..p).map(|i| (b, i * b)).unzip();
        let s = a.igatherv(send, recv, &counts, &displs, root).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

mpi_fn! {
    /// `MPI_Iscatter` (progresses in the background).
    fn PMPI_Iscatter / "MPI_Iscatter" (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { crate::intercoll::scatter(&l, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root)?; return completed(request, comm); }
        let (a, rank, size) = comm_info(comm)?;
        alg::check_root(root, size, comm)?;
        let p = size as usize;
        let me = rank == root;
        let in_place = alg::is_in_place(recvbuf) && me;
        let mut unpack = Vec::new();
        let (send, b) = if me {
            let sdt = dtype(sendtype, comm)?;
            let sc = check_count(sendcount).map_err(|e| e.on(comm))?;
            alg::check_buf(sendbuf, &sdt, sc * p, comm)?;
            // SAFETY: MPI contract: sendbuf holds `size` blocks of `sc` items.
            (unsafe { region(&sdt, sc * p, sendbuf.cast_mut(), true, false, 0, &mut unpack) }, sc * sdt.size)
        } else {
            (Region::Owned(Vec::new()), 0)
        };
        let recv = if in_place {
            Region::Owned(vec![0u8; b])
        } else {
            let rdt = dtype(recvtype, comm)?;
            let rc = check_count(recvcount).map_err(|e| e.on(comm))?;
            alg::check_buf(recvbuf, &rdt, rc, comm)?;
            // SAFETY: MPI contract: recvbuf has room for `rc` items until completion.
            unsafe { region(&rdt, rc, recvbuf, false, true, 1, &mut unpack) }
        };
        let (counts, displs): (Vec<usize>, Vec<usize>) = (0..p).map(|i| (b, i * b)).unzip();
        let s = a.iscatterv(send, &counts, &displs, recv, root).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

mpi_fn! {
    /// `MPI_Iallgather` (ring, progresses in the background).
    fn PMPI_Iallgather / "MPI_Iallgather" (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { crate::intercoll::allgather(&l, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype)?; return completed(request, comm); }
        let (a, rank, size) = comm_info(comm)?;
        let p = size as usize;
        let in_place = alg::is_in_place(sendbuf);
        let rdt = dtype(recvtype, comm)?;
        let rc = check_count(recvcount).map_err(|e| e.on(comm))?;
        alg::check_buf(recvbuf, &rdt, rc * p, comm)?;
        let b = rc * rdt.size;
        let mut unpack = Vec::new();
        // SAFETY: MPI contract: recvbuf has room for `size` blocks (in place: holds ours).
        let mut r = unsafe { region(&rdt, rc * p, recvbuf, in_place, true, 0, &mut unpack) };
        if !in_place {
            let sdt = dtype(sendtype, comm)?;
            let sc = check_count(sendcount).map_err(|e| e.on(comm))?;
            alg::check_buf(sendbuf, &sdt, sc, comm)?;
            // SAFETY: MPI contract: sendbuf holds `sc` items.
            let send = unsafe { alg::SendBytes::new(&sdt, sc, sendbuf) };
            if send.bytes().len() != b {
                return Err(MpiError::new(MPI_ERR_TRUNCATE, "allgather: send size differs from the receive block").on(comm));
            }
            let own = rank as usize * b;
            region_bytes(&mut r)[own..own + b].copy_from_slice(send.bytes());
        }
        let (counts, displs): (Vec<usize>, Vec<usize>) = (0..p).map(|i| (b, i * b)).unzip();
        let s = a.iallgatherv(r, &counts, &displs).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

mpi_fn! {
    /// `MPI_Ialltoall` (progresses in the background).
    fn PMPI_Ialltoall / "MPI_Ialltoall" (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { crate::intercoll::alltoall(&l, sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype)?; return completed(request, comm); }
        let (a, _, size) = comm_info(comm)?;
        let p = size as usize;
        let in_place = alg::is_in_place(sendbuf);
        let rdt = dtype(recvtype, comm)?;
        let rc = check_count(recvcount).map_err(|e| e.on(comm))?;
        alg::check_buf(recvbuf, &rdt, rc * p, comm)?;
        let b = rc * rdt.size;
        let mut unpack = Vec::new();
        // SAFETY: MPI contract: recvbuf has room for `size` blocks (in place: holds the data).
        let mut recv = unsafe { region(&rdt, rc * p, recvbuf, in_place, true, 1, &mut unpack) };
        let send = if in_place {
            Region::Owned(region_bytes(&mut recv).to_vec())
        } else {
            let sdt = dtype(sendtype, comm)?;
            let sc = check_count(sendcount).map_err(|e| e.on(comm))?;
            alg::check_buf(sendbuf, &sdt, sc * p, comm)?;
            if sc * sdt.size != b {
                return Err(MpiError::new(MPI_ERR_TRUNCATE, "alltoall: send and receive blocks differ in size").on(comm));
            }
            // SAFETY: MPI contract: sendbuf holds `size` blocks of `sc` items until completion.
            unsafe { region(&sdt, sc * p, sendbuf.cast_mut(), true, false, 0, &mut unpack) }
        };
        let (counts, displs): (Vec<usize>, Vec<usize>) = (0..p).map(|i| (b, i * b)).unzip();
        let s = a.ialltoallv(send, &counts, &displs, recv, &counts, &displs).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}
