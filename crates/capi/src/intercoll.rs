//! Collectives on intercommunicators (MPI-3.1 §5.2.2).
//!
//! Rooted collectives (bcast, gather(v), scatter(v), reduce) move data between the root
//! (which passes `MPI_ROOT`; the other members of its group pass `MPI_PROC_NULL` and do
//! nothing) and every member of the other group (which pass the root's rank in the
//! root's group). All-to-all style collectives (allgather(v), alltoall(v,w)) exchange data
//! between every pair of a local and a remote member; the local buffers are indexed by
//! remote rank. Reductions fold the contributions of one group in its rank order (also
//! correct for non-commutative operations): allreduce and reduce-scatter reduce at each
//! group's leader, swap the results between the leaders and distribute them locally over
//! the intercommunicator's local context. Barrier is gather / leader swap / release.
//!
//! Algorithms are linear: intercommunicator collectives are not on any latency-critical
//! path. Every entry point here is reached through a one-line dispatch at the top of the
//! corresponding `MPI_*` function in `coll.rs` (whose nonblocking forms in `icoll.rs` run
//! the blocking function, so they complete before returning).

use crate::consts::*;
use crate::datatype::{pack_into, unpack_from, Datatype};
use crate::ffi::{check_count, slice_in, MpiError, MpiResult};
use crate::intercomm::Link;
use crate::state::lock;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// Tags of intercommunicator collectives (the intercommunicator's own contexts carry no
/// other traffic).
mod tag {
    pub const BARRIER: i32 = 1;
    pub const BCAST: i32 = 2;
    pub const GATHER: i32 = 3;
    pub const SCATTER: i32 = 4;
    pub const ALLGATHER: i32 = 5;
    pub const ALLTOALL: i32 = 6;
    pub const REDUCE: i32 = 7;
    pub const ALLREDUCE: i32 = 8;
    pub const REDUCE_SCATTER: i32 = 9;
}

fn dtype(h: c_int, comm: c_int) -> MpiResult<Arc<Datatype>> {
    lock().dtype_committed(h).map_err(|e| e.on(comm))
}

fn count(n: c_int, comm: c_int) -> MpiResult<usize> {
    check_count(n).map_err(|e| e.on(comm))
}

fn pack(dt: &Datatype, count: usize, buf: *const c_void) -> Vec<u8> {
    let mut v = Vec::new();
    // SAFETY: the MPI contract of the collective: `buf` holds `count` items of `dt`.
    unsafe { pack_into(dt, count, buf.cast(), &mut v) };
    v
}

fn unpack(dt: &Datatype, count: usize, buf: *mut c_void, data: &[u8]) {
    // SAFETY: the MPI contract of the collective: `buf` has room for `count` items.
    unsafe { unpack_from(dt, count, buf.cast(), data) };
}

/// `buf` advanced by `bytes` (no dereference).
fn at(buf: *const c_void, bytes: isize) -> *mut c_void {
    buf.cast::<u8>().wrapping_offset(bytes).cast_mut().cast()
}

fn no_in_place(p: *const c_void, comm: c_int) -> MpiResult {
    if p as isize == -1 {
        return Err(MpiError::new(
            MPI_ERR_ARG,
            "MPI_IN_PLACE is not allowed on an intercommunicator",
        )
        .on(comm));
    }
    Ok(())
}

/// What a member does in a rooted collective.
enum Role {
    /// The root (`MPI_ROOT`).
    Root,
    /// Another member of the root's group (`MPI_PROC_NULL`).
    Idle,
    /// A member of the other group; the root's remote rank.
    Leaf(i32),
}

fn role(l: &Link, root: c_int) -> MpiResult<Role> {
    match root {
        MPI_ROOT => Ok(Role::Root),
        MPI_PROC_NULL => Ok(Role::Idle),
        r if (0..l.rsize).contains(&r) => Ok(Role::Leaf(r)),
        r => Err(MpiError::new(
            MPI_ERR_ROOT,
            format!(
                "invalid root {r} on an intercommunicator (remote size {}; MPI_ROOT or MPI_PROC_NULL in the root's group)",
                l.rsize
            ),
        )
        .on(l.net.comm)),
    }
}

/// Per remote rank: (count, displacement in items) from C arrays of the remote size.
fn layout(l: &Link, counts: *const c_int, displs: *const c_int) -> MpiResult<Vec<(usize, isize)>> {
    let n = l.rsize as usize;
    let cs = slice_in(counts, n, "counts").map_err(|e| e.on(l.net.comm))?;
    let ds = slice_in(displs, n, "displs").map_err(|e| e.on(l.net.comm))?;
    cs.iter()
        .zip(ds)
        .map(|(&k, &d)| Ok((count(k, l.net.comm)?, d as isize)))
        .collect()
}

fn uniform(l: &Link, k: usize) -> Vec<(usize, isize)> {
    (0..l.rsize as usize)
        .map(|i| (k, (i * k) as isize))
        .collect()
}

/// `MPI_Barrier`.
pub(crate) fn barrier(l: &Link) -> MpiResult {
    let t = tag::BARRIER;
    if l.star.gather(&l.net, Vec::new(), t)?.is_some() {
        l.net.swap(l.ic, 0, &[], t)?;
    }
    l.star.bcast(&l.net, &mut Vec::new(), t)
}

/// `MPI_Bcast`.
pub(crate) fn bcast(l: &Link, buf: *mut c_void, n: c_int, dth: c_int, root: c_int) -> MpiResult {
    let comm = l.net.comm;
    match role(l, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            let dt = dtype(dth, comm)?;
            let data = pack(&dt, count(n, comm)?, buf);
            let reqs = (0..l.rsize)
                .map(|r| l.net.isend(l.ic, &data, r, tag::BCAST))
                .collect::<MpiResult<Vec<_>>>()?;
            for q in reqs {
                l.net.wait(q)?;
            }
            Ok(())
        }
        Role::Leaf(r) => {
            let dt = dtype(dth, comm)?;
            let n = count(n, comm)?;
            let mut v = vec![0u8; n * dt.size];
            let got = l.net.recv(l.ic, &mut v, r, tag::BCAST)?;
            unpack(&dt, n, buf, &v[..got]);
            Ok(())
        }
    }
}

/// Receive one piece from every remote rank: `pieces[r]` = (type, count, byte offset).
fn recv_all(l: &Link, recvbuf: *mut c_void, pieces: &[Piece], t: i32) -> MpiResult {
    let mut bufs: Vec<Vec<u8>> = pieces
        .iter()
        .map(|(d, k, _)| vec![0u8; k * d.size])
        .collect();
    let mut reqs = Vec::with_capacity(bufs.len());
    for (r, b) in bufs.iter_mut().enumerate() {
        reqs.push(l.net.irecv(l.ic, b, r as i32, t)?);
    }
    let mut lens = Vec::with_capacity(reqs.len());
    for q in reqs {
        lens.push(l.net.wait(q)?);
    }
    for ((d, k, o), (b, n)) in pieces.iter().zip(bufs.iter().zip(lens)) {
        unpack(d, *k, at(recvbuf, *o), &b[..n]);
    }
    Ok(())
}

/// Send one piece to every remote rank.
fn send_all(l: &Link, sendbuf: *const c_void, pieces: &[Piece], t: i32) -> MpiResult {
    let data: Vec<Vec<u8>> = pieces
        .iter()
        .map(|(d, k, o)| pack(d, *k, at(sendbuf, *o)))
        .collect();
    let reqs = data
        .iter()
        .enumerate()
        .map(|(r, v)| l.net.isend(l.ic, v, r as i32, t))
        .collect::<MpiResult<Vec<_>>>()?;
    for q in reqs {
        l.net.wait(q)?;
    }
    Ok(())
}

/// (type, count, byte offset) of the block of one remote rank.
type Piece = (Arc<Datatype>, usize, isize);

fn pieces(dt: &Arc<Datatype>, slots: &[(usize, isize)]) -> Vec<Piece> {
    slots
        .iter()
        .map(|&(k, d)| (dt.clone(), k, d * dt.extent()))
        .collect()
}

/// Gather(v): `slots` (per remote rank) only matter at the root.
#[allow(clippy::too_many_arguments)]
fn gatherv(
    l: &Link,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    slots: impl FnOnce() -> MpiResult<Vec<(usize, isize)>>,
    recvtype: c_int,
    root: c_int,
) -> MpiResult {
    let comm = l.net.comm;
    match role(l, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            let rdt = dtype(recvtype, comm)?;
            recv_all(l, recvbuf, &pieces(&rdt, &slots()?), tag::GATHER)
        }
        Role::Leaf(r) => {
            no_in_place(sendbuf, comm)?;
            let sdt = dtype(sendtype, comm)?;
            let data = pack(&sdt, count(sendcount, comm)?, sendbuf);
            l.net.send(l.ic, &data, r, tag::GATHER)
        }
    }
}

/// `MPI_Gather`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gather(
    l: &Link,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root: c_int,
) -> MpiResult {
    let slots = || Ok(uniform(l, count(recvcount, l.net.comm)?));
    gatherv(
        l, sendbuf, sendcount, sendtype, recvbuf, slots, recvtype, root,
    )
}

/// `MPI_Gatherv`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gatherv_c(
    l: &Link,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: c_int,
    root: c_int,
) -> MpiResult {
    let slots = || layout(l, recvcounts, displs);
    gatherv(
        l, sendbuf, sendcount, sendtype, recvbuf, slots, recvtype, root,
    )
}

/// Scatter(v): `slots` (per remote rank) only matter at the root.
#[allow(clippy::too_many_arguments)]
fn scatterv(
    l: &Link,
    sendbuf: *const c_void,
    slots: impl FnOnce() -> MpiResult<Vec<(usize, isize)>>,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root: c_int,
) -> MpiResult {
    let comm = l.net.comm;
    match role(l, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            let sdt = dtype(sendtype, comm)?;
            send_all(l, sendbuf, &pieces(&sdt, &slots()?), tag::SCATTER)
        }
        Role::Leaf(r) => {
            no_in_place(recvbuf, comm)?;
            let rdt = dtype(recvtype, comm)?;
            let n = count(recvcount, comm)?;
            let mut v = vec![0u8; n * rdt.size];
            let got = l.net.recv(l.ic, &mut v, r, tag::SCATTER)?;
            unpack(&rdt, n, recvbuf, &v[..got]);
            Ok(())
        }
    }
}

/// `MPI_Scatter`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter(
    l: &Link,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root: c_int,
) -> MpiResult {
    let slots = || Ok(uniform(l, count(sendcount, l.net.comm)?));
    scatterv(
        l, sendbuf, slots, sendtype, recvbuf, recvcount, recvtype, root,
    )
}

/// `MPI_Scatterv`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatterv_c(
    l: &Link,
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
    root: c_int,
) -> MpiResult {
    let slots = || layout(l, sendcounts, displs);
    scatterv(
        l, sendbuf, slots, sendtype, recvbuf, recvcount, recvtype, root,
    )
}

/// Exchange with every remote rank: `send[r]` goes to remote rank r, `recv[r]` comes from
/// it.
fn exchange_all(
    l: &Link,
    sendbuf: *const c_void,
    send: &[Piece],
    recvbuf: *mut c_void,
    recv: &[Piece],
    t: i32,
) -> MpiResult {
    let data: Vec<Vec<u8>> = send
        .iter()
        .map(|(d, k, o)| pack(d, *k, at(sendbuf, *o)))
        .collect();
    let mut bufs: Vec<Vec<u8>> = recv.iter().map(|(d, k, _)| vec![0u8; k * d.size]).collect();
    let mut rq = Vec::with_capacity(bufs.len());
    for (r, b) in bufs.iter_mut().enumerate() {
        rq.push(l.net.irecv(l.ic, b, r as i32, t)?);
    }
    let sq = data
        .iter()
        .enumerate()
        .map(|(r, v)| l.net.isend(l.ic, v, r as i32, t))
        .collect::<MpiResult<Vec<_>>>()?;
    let mut lens = Vec::with_capacity(rq.len());
    for q in rq {
        lens.push(l.net.wait(q)?);
    }
    for q in sq {
        l.net.wait(q)?;
    }
    for ((d, k, o), (b, n)) in recv.iter().zip(bufs.iter().zip(lens)) {
        unpack(d, *k, at(recvbuf, *o), &b[..n]);
    }
    Ok(())
}

/// `MPI_Allgather` / `MPI_Allgatherv` (`displs` NULL: uniform blocks of `recvcounts[0]`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn allgatherv(
    l: &Link,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    slots: MpiResult<Vec<(usize, isize)>>,
    recvtype: c_int,
) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(sendbuf, comm)?;
    let sdt = dtype(sendtype, comm)?;
    let rdt = dtype(recvtype, comm)?;
    let send = pieces(&sdt, &vec![(count(sendcount, comm)?, 0); l.rsize as usize]);
    exchange_all(
        l,
        sendbuf,
        &send,
        recvbuf,
        &pieces(&rdt, &slots?),
        tag::ALLGATHER,
    )
}

/// `MPI_Allgather`.
pub(crate) fn allgather(
    l: &Link,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
) -> MpiResult {
    let slots = count(recvcount, l.net.comm).map(|k| uniform(l, k));
    allgatherv(l, sendbuf, sendcount, sendtype, recvbuf, slots, recvtype)
}

/// `MPI_Allgatherv`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn allgatherv_c(
    l: &Link,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: c_int,
) -> MpiResult {
    let slots = layout(l, recvcounts, displs);
    allgatherv(l, sendbuf, sendcount, sendtype, recvbuf, slots, recvtype)
}

/// `MPI_Alltoall`.
pub(crate) fn alltoall(
    l: &Link,
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: c_int,
) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(sendbuf, comm)?;
    let send = pieces(
        &dtype(sendtype, comm)?,
        &uniform(l, count(sendcount, comm)?),
    );
    let recv = pieces(
        &dtype(recvtype, comm)?,
        &uniform(l, count(recvcount, comm)?),
    );
    exchange_all(l, sendbuf, &send, recvbuf, &recv, tag::ALLTOALL)
}

/// `MPI_Alltoallv`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn alltoallv(
    l: &Link,
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: c_int,
) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(sendbuf, comm)?;
    let send = pieces(&dtype(sendtype, comm)?, &layout(l, sendcounts, sdispls)?);
    let recv = pieces(&dtype(recvtype, comm)?, &layout(l, recvcounts, rdispls)?);
    exchange_all(l, sendbuf, &send, recvbuf, &recv, tag::ALLTOALL)
}

/// `MPI_Alltoallw` (byte displacements, one type per remote rank).
#[allow(clippy::too_many_arguments)]
pub(crate) fn alltoallw(
    l: &Link,
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const c_int,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const c_int,
) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(sendbuf, comm)?;
    let n = l.rsize as usize;
    let typed = |counts, displs, types: *const c_int| -> MpiResult<Vec<Piece>> {
        let slots = layout(l, counts, displs)?;
        let ts = slice_in(types, n, "types").map_err(|e| e.on(comm))?;
        slots
            .into_iter()
            .zip(ts)
            .map(|((k, d), &t)| Ok((dtype(t, comm)?, k, d)))
            .collect()
    };
    let send = typed(sendcounts, sdispls, sendtypes)?;
    let recv = typed(recvcounts, rdispls, recvtypes)?;
    exchange_all(l, sendbuf, &send, recvbuf, &recv, tag::ALLTOALL)
}

// ---- reductions ----

/// A buffer holding `count` items of a datatype in its own layout.
struct Typed {
    v: Vec<u8>,
    shift: isize,
}

impl Typed {
    fn from_packed(dt: &Datatype, count: usize, data: &[u8]) -> Typed {
        let span = if count == 0 {
            0
        } else {
            (dt.true_ub - dt.true_lb) as usize + (count - 1) * dt.extent().unsigned_abs()
        };
        let mut t = Typed {
            v: vec![0u8; span.max(1)],
            shift: -dt.true_lb,
        };
        unpack(dt, count, t.ptr(), data);
        t
    }
    fn ptr(&mut self) -> *mut c_void {
        self.v.as_mut_ptr().wrapping_offset(self.shift).cast()
    }
}

/// Reduce packed contributions (in rank order: `parts[0] op parts[1] op ...`) into one
/// packed result.
fn fold(parts: &[Vec<u8>], dt: &Datatype, n: usize, dth: c_int, op: c_int) -> MpiResult<Vec<u8>> {
    let Some(last) = parts.last() else {
        return Ok(Vec::new());
    };
    let mut acc = Typed::from_packed(dt, n, last);
    for p in parts[..parts.len() - 1].iter().rev() {
        let mut x = Typed::from_packed(dt, n, p);
        let (xin, accp) = (x.ptr(), acc.ptr());
        // SAFETY: both typed buffers hold `n` items of `dt`.
        unsafe { crate::op::reduce_local(xin, accp, n, dth, op)? };
    }
    Ok(pack(dt, n, acc.ptr()))
}

/// Check the operation before any message moves.
fn check_op(op: c_int, comm: c_int) -> MpiResult {
    crate::op::op_kind(op).map(|_| ()).map_err(|e| e.on(comm))
}

/// `MPI_Reduce`: the root gets the reduction of the other group's contributions.
#[allow(clippy::too_many_arguments)]
pub(crate) fn reduce(
    l: &Link,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    n: c_int,
    dth: c_int,
    op: c_int,
    root: c_int,
) -> MpiResult {
    let comm = l.net.comm;
    match role(l, root)? {
        Role::Idle => Ok(()),
        Role::Root => {
            check_op(op, comm)?;
            let dt = dtype(dth, comm)?;
            let n = count(n, comm)?;
            let mut parts: Vec<Vec<u8>> = (0..l.rsize).map(|_| vec![0u8; n * dt.size]).collect();
            let mut reqs = Vec::with_capacity(parts.len());
            for (r, b) in parts.iter_mut().enumerate() {
                reqs.push(l.net.irecv(l.ic, b, r as i32, tag::REDUCE)?);
            }
            for (q, b) in reqs.into_iter().zip(parts.iter_mut()) {
                let got = l.net.wait(q)?;
                b.truncate(got);
            }
            let res = fold(&parts, &dt, n, dth, op).map_err(|e| e.on(comm))?;
            unpack(&dt, n, recvbuf, &res);
            Ok(())
        }
        Role::Leaf(r) => {
            no_in_place(sendbuf, comm)?;
            check_op(op, comm)?;
            let dt = dtype(dth, comm)?;
            let data = pack(&dt, count(n, comm)?, sendbuf);
            l.net.send(l.ic, &data, r, tag::REDUCE)
        }
    }
}

/// Reduce the local group's contributions at the local leader and swap the result with
/// the remote leader: the remote group's reduction at the local leader, `None` elsewhere.
fn reduce_and_swap(
    l: &Link,
    mine: Vec<u8>,
    dt: &Datatype,
    n: usize,
    dth: c_int,
    op: c_int,
    t: i32,
) -> MpiResult<Option<Vec<u8>>> {
    let Some(parts) = l.star.gather(&l.net, mine, t)? else {
        return Ok(None);
    };
    let local = fold(&parts, dt, n, dth, op).map_err(|e| e.on(l.net.comm))?;
    l.net.swap(l.ic, 0, &local, t).map(Some)
}

/// `MPI_Allreduce`: each group gets the reduction of the other group's contributions.
pub(crate) fn allreduce(
    l: &Link,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    n: c_int,
    dth: c_int,
    op: c_int,
) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(sendbuf, comm)?;
    check_op(op, comm)?;
    let dt = dtype(dth, comm)?;
    let n = count(n, comm)?;
    let mine = pack(&dt, n, sendbuf);
    let mut res = reduce_and_swap(l, mine, &dt, n, dth, op, tag::ALLREDUCE)?.unwrap_or_default();
    l.star.bcast(&l.net, &mut res, tag::ALLREDUCE)?;
    unpack(&dt, n, recvbuf, &res);
    Ok(())
}

/// `MPI_Reduce_scatter` / `_block`: the reduction of the other group's vectors (of
/// `sum(counts)` items) is scattered over the local group by `counts` (local size).
pub(crate) fn reduce_scatter(
    l: &Link,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: &[usize],
    dth: c_int,
    op: c_int,
) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(sendbuf, comm)?;
    check_op(op, comm)?;
    let dt = dtype(dth, comm)?;
    let total: usize = counts.iter().sum();
    let mine = pack(&dt, total, sendbuf);
    let t = tag::REDUCE_SCATTER;
    let me = l.rank() as usize;
    let piece = match reduce_and_swap(l, mine, &dt, total, dth, op, t)? {
        Some(theirs) => {
            let mut pos = 0;
            let mut reqs = Vec::new();
            let mut own = Vec::new();
            let short = theirs.len() != total * dt.size;
            for (r, &k) in counts.iter().enumerate() {
                let end = (pos + k * dt.size).min(theirs.len());
                let slice = &theirs[pos.min(end)..end];
                pos = end;
                if r == me {
                    own = slice.to_vec();
                } else {
                    reqs.push(l.net.isend(l.star.ctx, slice, r as i32, t)?);
                }
            }
            for q in reqs {
                l.net.wait(q)?;
            }
            if short {
                return Err(MpiError::new(
                    MPI_ERR_COUNT,
                    format!(
                        "reduce-scatter: the remote group reduced {} bytes, the local counts need {}",
                        theirs.len(),
                        total * dt.size
                    ),
                )
                .on(comm));
            }
            own
        }
        None => {
            let mut v = vec![0u8; counts[me] * dt.size];
            let got = l.net.recv(l.star.ctx, &mut v, 0, t)?;
            v.truncate(got);
            v
        }
    };
    unpack(&dt, counts[me], recvbuf, &piece);
    Ok(())
}

/// `MPI_Reduce_scatter` with C arguments (`recvcounts` has the local group's size).
pub(crate) fn reduce_scatter_c(
    l: &Link,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    dth: c_int,
    op: c_int,
) -> MpiResult {
    let comm = l.net.comm;
    let counts = slice_in(recvcounts, l.star.size as usize, "recvcounts")
        .map_err(|e| e.on(comm))?
        .iter()
        .map(|&k| count(k, comm))
        .collect::<MpiResult<Vec<_>>>()?;
    reduce_scatter(l, sendbuf, recvbuf, &counts, dth, op)
}

/// `MPI_Reduce_scatter_block`.
pub(crate) fn reduce_scatter_block(
    l: &Link,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    dth: c_int,
    op: c_int,
) -> MpiResult {
    let k = count(recvcount, l.net.comm)?;
    let counts = vec![k; l.star.size as usize];
    reduce_scatter(l, sendbuf, recvbuf, &counts, dth, op)
}
