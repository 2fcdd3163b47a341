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
//! The blocking algorithms are `oxmpi_coll::inter`'s (on bytes); this file resolves the
//! MPI arguments (roots, counts, datatypes, operations), packs and unpacks. Every entry
//! point here is reached through a one-line dispatch at the top of the corresponding
//! `MPI_*` function in `coll.rs`. The nonblocking forms (end of this file, reached from
//! `icoll.rs`) run the same algorithms as schedules progressed in the background.

use crate::coll_alg::{err, with_op, ReduceArgs, Reducer};
use crate::consts::*;
use crate::datatype::Datatype;
use crate::ffi::{check_count, counts_in, slice_in, CountArg, DispArg, MpiError, MpiResult};
use crate::intercomm::Link;
use crate::state::lock;
use oxmpi_coll::inter::{Exchange, InterComm};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// One side of a collective as the caller passed it: `count` items of `datatype` at
/// `buf`, resolved and checked by the algorithm where MPI's checking order puts it.
#[derive(Clone, Copy)]
pub(crate) struct Spec<P> {
    /// The buffer (may be `MPI_IN_PLACE` where the collective allows it).
    pub buf: P,
    /// Items (unchecked; an `int` or an `MPI_Count` as passed).
    pub count: i64,
    /// Datatype handle (unchecked).
    pub datatype: c_int,
}

/// The send side of a collective.
pub(crate) type SendSpec = Spec<*const c_void>;
/// The receive side of a collective.
pub(crate) type RecvSpec = Spec<*mut c_void>;

/// One side of a v/w collective as the caller passed it: per remote rank a count and a
/// displacement; `T` is one datatype handle (v) or an array of per-rank handles (w).
#[derive(Clone, Copy)]
pub(crate) struct Blocks<P, T> {
    /// The buffer.
    pub buf: P,
    /// Per-rank item counts (array of the remote group's size).
    pub counts: Counts,
    /// Per-rank displacements (items of the datatype for v, bytes for w).
    pub displs: Displs,
    /// The datatype handle (v) or per-rank handles (w).
    pub datatype: T,
}

/// The send side of a v collective.
pub(crate) type SendV = Blocks<*const c_void, c_int>;
/// The receive side of a v collective.
pub(crate) type RecvV = Blocks<*mut c_void, c_int>;
/// The send side of a w collective.
pub(crate) type SendW = Blocks<*const c_void, *const c_int>;
/// The receive side of a w collective.
pub(crate) type RecvW = Blocks<*mut c_void, *const c_int>;

impl Laid<*const c_void> {
    /// The same side with a mutable pointer (for code shared with the receive side; the
    /// buffer is only read).
    fn cast_mut(self) -> Laid<*mut c_void> {
        Laid {
            buf: self.buf.cast_mut(),
            layout: self.layout,
            datatype: self.datatype,
        }
    }
}

/// How the root's blocks of a gather(v)/scatter(v) lie in its buffer, one per remote rank.
#[derive(Clone, Copy)]
pub(crate) enum Layout {
    /// `count` items per rank, one after the other (gather, scatter).
    Uniform(i64),
    /// Per-rank counts and displacements in items (gatherv, scatterv).
    Listed(Counts, Displs),
}

/// The root's side of a gather(v)/scatter(v) as the caller passed it: blocks of
/// `datatype` at `buf` laid out by `layout`, resolved at the root only.
#[derive(Clone, Copy)]
pub(crate) struct Laid<P> {
    /// The buffer.
    pub buf: P,
    /// Where the blocks lie.
    pub layout: Layout,
    /// Datatype handle (unchecked).
    pub datatype: c_int,
}

/// An array of per-rank counts as the caller passed it: `int`s, or the `MPI_Count`s of a
/// large-count (`_c`) form. Read only where MPI says the array is significant.
#[derive(Clone, Copy)]
pub(crate) enum Counts {
    Int(*const c_int),
    Large(*const i64),
}

impl Counts {
    /// The count array of an entry point defined by `mpi_fn_c!`.
    pub(crate) fn of<C: CountArg>(p: *const C) -> Counts {
        // `CountArg` has two implementations: `c_int` (an `int` array) and `i64`.
        C::int_ptr(p).map_or(Counts::Large(p.cast()), Counts::Int)
    }
}

/// An array of per-rank displacements as the caller passed it: `int`s, or the `MPI_Aint`s
/// of a large-count (`_c`) form.
#[derive(Clone, Copy)]
pub(crate) enum Displs {
    Int(*const c_int),
    Aint(*const isize),
}

impl Displs {
    /// The displacement array of an entry point defined by `mpi_fn_c!`.
    pub(crate) fn of<D: DispArg>(p: *const D) -> Displs {
        // `DispArg` has two implementations: `c_int` (an `int` array) and `isize`.
        D::int_ptr(p).map_or(Displs::Aint(p.cast()), Displs::Int)
    }
}

/// The `oxmpi-coll` view of intercommunicator `l`.
fn inter(l: &Link) -> MpiResult<InterComm> {
    let e = crate::backend::engine()?;
    Ok(InterComm::new(
        e,
        l.ic,
        l.star.ctx,
        l.star.rank,
        l.star.size,
        l.rsize,
    ))
}

fn dtype(h: c_int, comm: c_int) -> MpiResult<Arc<Datatype>> {
    lock().dtype_committed(h).map_err(|e| e.on(comm))
}

fn count(n: i64, comm: c_int) -> MpiResult<usize> {
    check_count(n).map_err(|e| e.on(comm))
}

fn pack(dt: &Datatype, count: usize, buf: *const c_void) -> Vec<u8> {
    // SAFETY: the MPI contract of the collective: `buf` holds `count` items of `dt`.
    unsafe { crate::coll_alg::pack(dt, count, buf) }
}

fn unpack(dt: &Datatype, count: usize, buf: *mut c_void, data: &[u8]) {
    // SAFETY: the MPI contract of the collective: `buf` has room for `count` items.
    unsafe { crate::coll_alg::unpack(dt, count, buf, data) }
}

/// `buf` advanced by `bytes` (no dereference).
fn at(buf: *const c_void, bytes: isize) -> *mut c_void {
    buf.cast::<u8>().wrapping_offset(bytes).cast_mut().cast()
}

fn no_in_place(p: *const c_void, comm: c_int) -> MpiResult {
    if crate::coll_alg::is_in_place(p) {
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
fn layout(l: &Link, counts: Counts, displs: Displs) -> MpiResult<Vec<(usize, isize)>> {
    use crate::icoll::sched::layout as read;
    let (n, comm) = (l.rsize as usize, l.net.comm);
    match (counts, displs) {
        (Counts::Int(c), Displs::Int(d)) => read(c, d, n, comm),
        (Counts::Int(c), Displs::Aint(d)) => read(c, d, n, comm),
        (Counts::Large(c), Displs::Int(d)) => read(c, d, n, comm),
        (Counts::Large(c), Displs::Aint(d)) => read(c, d, n, comm),
    }
}

/// The (count, displacement) pairs of `lay`, checked.
fn slots_of(l: &Link, lay: Layout) -> MpiResult<Vec<(usize, isize)>> {
    match lay {
        Layout::Uniform(k) => Ok(uniform(l, count(k, l.net.comm)?)),
        Layout::Listed(counts, displs) => layout(l, counts, displs),
    }
}

/// The checked `recvcounts` of a reduce-scatter (one per local rank).
fn local_counts(l: &Link, recvcounts: Counts) -> MpiResult<Vec<usize>> {
    let (n, comm) = (l.star.size as usize, l.net.comm);
    let ks = match recvcounts {
        Counts::Int(p) => counts_in(p, n, "recvcounts"),
        Counts::Large(p) => counts_in(p, n, "recvcounts"),
    };
    ks.map_err(|e| e.on(comm))?
        .into_iter()
        .map(|k| count(k, comm))
        .collect()
}

fn uniform(l: &Link, k: usize) -> Vec<(usize, isize)> {
    crate::coll_alg::regular(l.rsize as usize, k)
}

/// Run a blocking rooted collective's part for this member: nothing for the idle members
/// of the root's group, `at_root` at the root, `at_leaf(root's remote rank)` in the other
/// group.
fn by_role(
    l: &Link,
    root: c_int,
    at_root: impl FnOnce() -> MpiResult,
    at_leaf: impl FnOnce(i32) -> MpiResult,
) -> MpiResult {
    match role(l, root)? {
        Role::Idle => Ok(()),
        Role::Root => at_root(),
        Role::Leaf(r) => at_leaf(r),
    }
}

/// `MPI_Barrier`.
pub(crate) fn barrier(l: &Link) -> MpiResult {
    inter(l)?.barrier().map_err(err(l.net.comm))
}

/// `MPI_Bcast`.
pub(crate) fn bcast(l: &Link, buf: *mut c_void, n: i64, dth: c_int, root: c_int) -> MpiResult {
    let comm = l.net.comm;
    let at_root = || -> MpiResult {
        let dt = dtype(dth, comm)?;
        let data = pack(&dt, count(n, comm)?, buf);
        inter(l)?.bcast_root(&data).map_err(err(comm))
    };
    by_role(l, root, at_root, |r| {
        let dt = dtype(dth, comm)?;
        let n = count(n, comm)?;
        let mut v = vec![0u8; n * dt.size];
        let got = inter(l)?.bcast_recv(&mut v, r).map_err(err(comm))?;
        unpack(&dt, n, buf, &v[..got]);
        Ok(())
    })
}

/// Receive one piece from every remote rank (`pieces[r]` = type, count, byte offset) of
/// a gather at its root.
fn gather_root(l: &Link, recvbuf: *mut c_void, pieces: &[Piece]) -> MpiResult {
    let mut bufs: Vec<Vec<u8>> = pieces
        .iter()
        .map(|(d, k, _)| vec![0u8; k * d.size])
        .collect();
    inter(l)?.gather_root(&mut bufs).map_err(err(l.net.comm))?;
    for ((d, k, o), b) in pieces.iter().zip(&bufs) {
        unpack(d, *k, at(recvbuf, *o), b);
    }
    Ok(())
}

/// Send one piece to every remote rank (the root of a scatter).
fn scatter_root(l: &Link, sendbuf: *const c_void, pieces: &[Piece]) -> MpiResult {
    let data: Vec<Vec<u8>> = pieces
        .iter()
        .map(|(d, k, o)| pack(d, *k, at(sendbuf, *o)))
        .collect();
    inter(l)?.scatter_root(&data).map_err(err(l.net.comm))
}

/// (type, count, byte offset) of the block of one remote rank.
type Piece = (Arc<Datatype>, usize, isize);

fn pieces(dt: &Arc<Datatype>, slots: &[(usize, isize)]) -> Vec<Piece> {
    slots
        .iter()
        .map(|&(k, d)| (dt.clone(), k, d * dt.extent()))
        .collect()
}

/// The root's blocks of a gather(v)/scatter(v): datatype checked, then the layout.
fn root_pieces<P>(l: &Link, side: Laid<P>) -> MpiResult<Vec<Piece>> {
    let dt = dtype(side.datatype, l.net.comm)?;
    Ok(pieces(&dt, &slots_of(l, side.layout)?))
}

/// `MPI_Gather(v)`: the receive layout only matters at the root.
pub(crate) fn gatherv(l: &Link, snd: SendSpec, rcv: Laid<*mut c_void>, root: c_int) -> MpiResult {
    let comm = l.net.comm;
    let at_root = || gather_root(l, rcv.buf, &root_pieces(l, rcv)?);
    by_role(l, root, at_root, |r| {
        no_in_place(snd.buf, comm)?;
        let sdt = dtype(snd.datatype, comm)?;
        let data = pack(&sdt, count(snd.count, comm)?, snd.buf);
        inter(l)?.gather_send(&data, r).map_err(err(comm))
    })
}

/// `MPI_Scatter(v)`: the send layout only matters at the root.
pub(crate) fn scatterv(
    l: &Link,
    snd: Laid<*const c_void>,
    rcv: RecvSpec,
    root: c_int,
) -> MpiResult {
    let comm = l.net.comm;
    let at_root = || scatter_root(l, snd.buf, &root_pieces(l, snd)?);
    by_role(l, root, at_root, |r| {
        no_in_place(rcv.buf, comm)?;
        let rdt = dtype(rcv.datatype, comm)?;
        let n = count(rcv.count, comm)?;
        let mut v = vec![0u8; n * rdt.size];
        let got = inter(l)?.scatter_recv(&mut v, r).map_err(err(comm))?;
        unpack(&rdt, n, rcv.buf, &v[..got]);
        Ok(())
    })
}

/// Exchange with every remote rank: `send[r]` goes to remote rank r, `recv[r]` comes from
/// it.
fn exchange_all(
    l: &Link,
    sendbuf: *const c_void,
    send: &[Piece],
    recvbuf: *mut c_void,
    recv: &[Piece],
    kind: Exchange,
) -> MpiResult {
    let data: Vec<Vec<u8>> = send
        .iter()
        .map(|(d, k, o)| pack(d, *k, at(sendbuf, *o)))
        .collect();
    let mut bufs: Vec<Vec<u8>> = recv.iter().map(|(d, k, _)| vec![0u8; k * d.size]).collect();
    inter(l)?
        .exchange(kind, &data, &mut bufs)
        .map_err(err(l.net.comm))?;
    for ((d, k, o), b) in recv.iter().zip(&bufs) {
        unpack(d, *k, at(recvbuf, *o), b);
    }
    Ok(())
}

/// `MPI_Allgather` / `MPI_Allgatherv` on resolved receive slots.
pub(crate) fn allgatherv(
    l: &Link,
    snd: SendSpec,
    recvbuf: *mut c_void,
    slots: MpiResult<Vec<(usize, isize)>>,
    recvtype: c_int,
) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(snd.buf, comm)?;
    let sdt = dtype(snd.datatype, comm)?;
    let rdt = dtype(recvtype, comm)?;
    let send = pieces(&sdt, &vec![(count(snd.count, comm)?, 0); l.rsize as usize]);
    exchange_all(
        l,
        snd.buf,
        &send,
        recvbuf,
        &pieces(&rdt, &slots?),
        Exchange::Allgather,
    )
}

/// `MPI_Allgather`.
pub(crate) fn allgather(l: &Link, snd: SendSpec, rcv: RecvSpec) -> MpiResult {
    let slots = count(rcv.count, l.net.comm).map(|k| uniform(l, k));
    allgatherv(l, snd, rcv.buf, slots, rcv.datatype)
}

/// `MPI_Allgatherv`.
pub(crate) fn allgatherv_c(l: &Link, snd: SendSpec, rcv: RecvV) -> MpiResult {
    let slots = layout(l, rcv.counts, rcv.displs);
    allgatherv(l, snd, rcv.buf, slots, rcv.datatype)
}

/// `MPI_Alltoall`.
pub(crate) fn alltoall(l: &Link, snd: SendSpec, rcv: RecvSpec) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(snd.buf, comm)?;
    let send = pieces(
        &dtype(snd.datatype, comm)?,
        &uniform(l, count(snd.count, comm)?),
    );
    let recv = pieces(
        &dtype(rcv.datatype, comm)?,
        &uniform(l, count(rcv.count, comm)?),
    );
    exchange_all(l, snd.buf, &send, rcv.buf, &recv, Exchange::Alltoall)
}

/// `MPI_Alltoallv`.
pub(crate) fn alltoallv(l: &Link, snd: SendV, rcv: RecvV) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(snd.buf, comm)?;
    let send = pieces(
        &dtype(snd.datatype, comm)?,
        &layout(l, snd.counts, snd.displs)?,
    );
    let recv = pieces(
        &dtype(rcv.datatype, comm)?,
        &layout(l, rcv.counts, rcv.displs)?,
    );
    exchange_all(l, snd.buf, &send, rcv.buf, &recv, Exchange::Alltoall)
}

/// `MPI_Alltoallw` (byte displacements, one type per remote rank).
pub(crate) fn alltoallw(l: &Link, snd: SendW, rcv: RecvW) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(snd.buf, comm)?;
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
    let send = typed(snd.counts, snd.displs, snd.datatype)?;
    let recv = typed(rcv.counts, rcv.displs, rcv.datatype)?;
    exchange_all(l, snd.buf, &send, rcv.buf, &recv, Exchange::Alltoall)
}

// ---- reductions ----

/// The reduction of `(op, datatype)` on packed items, validated before any message moves.
fn reducer(l: &Link, dt: &Arc<Datatype>, dth: c_int, op: c_int) -> MpiResult<Reducer> {
    Reducer::new(dt, dth, op).map_err(|e| e.on(l.net.comm))
}

/// `MPI_Reduce`: the root gets the reduction of the other group's contributions.
pub(crate) fn reduce(l: &Link, args: ReduceArgs<i64>, root: c_int) -> MpiResult {
    let (sendbuf, recvbuf, op) = (args.sendbuf, args.recvbuf, args.op);
    let (n, dth) = (args.count, args.datatype);
    let comm = l.net.comm;
    let at_root = || -> MpiResult {
        let dt = dtype(dth, comm)?;
        let red = reducer(l, &dt, dth, op)?;
        let n = count(n, comm)?;
        let ic = inter(l)?;
        let res = with_op(&red, |o| ic.reduce_root(n * dt.size, o)).map_err(err(comm))?;
        unpack(&dt, n, recvbuf, &res);
        Ok(())
    };
    by_role(l, root, at_root, |r| {
        no_in_place(sendbuf, comm)?;
        let dt = dtype(dth, comm)?;
        reducer(l, &dt, dth, op)?;
        let data = pack(&dt, count(n, comm)?, sendbuf);
        inter(l)?.reduce_send(&data, r).map_err(err(comm))
    })
}

/// `MPI_Allreduce`: each group gets the reduction of the other group's contributions.
pub(crate) fn allreduce(l: &Link, args: ReduceArgs<i64>) -> MpiResult {
    let (sendbuf, recvbuf, op) = (args.sendbuf, args.recvbuf, args.op);
    let (n, dth) = (args.count, args.datatype);
    let comm = l.net.comm;
    no_in_place(sendbuf, comm)?;
    let dt = dtype(dth, comm)?;
    let red = reducer(l, &dt, dth, op)?;
    let n = count(n, comm)?;
    let mine = pack(&dt, n, sendbuf);
    let ic = inter(l)?;
    let res = with_op(&red, |o| ic.allreduce(mine, o)).map_err(err(comm))?;
    unpack(&dt, n, recvbuf, &res);
    Ok(())
}

/// `MPI_Reduce_scatter` / `_block`: the reduction of the other group's vectors (of
/// `sum(counts)` items) is scattered over the local group by `counts` (local size).
pub(crate) fn reduce_scatter(l: &Link, args: ReduceArgs<&[usize]>) -> MpiResult {
    let (sendbuf, recvbuf, op) = (args.sendbuf, args.recvbuf, args.op);
    let (counts, dth) = (args.count, args.datatype);
    let comm = l.net.comm;
    no_in_place(sendbuf, comm)?;
    let dt = dtype(dth, comm)?;
    let red = reducer(l, &dt, dth, op)?;
    let total: usize = counts.iter().sum();
    let mine = pack(&dt, total, sendbuf);
    let bytes: Vec<usize> = counts.iter().map(|k| k * dt.size).collect();
    let ic = inter(l)?;
    let piece = with_op(&red, |o| ic.reduce_scatter(mine, &bytes, o)).map_err(err(comm))?;
    unpack(&dt, counts[l.rank() as usize], recvbuf, &piece);
    Ok(())
}

/// `MPI_Reduce_scatter` with C arguments (`recvcounts` has the local group's size).
pub(crate) fn reduce_scatter_c(l: &Link, args: ReduceArgs<Counts>) -> MpiResult {
    let counts = local_counts(l, args.count)?;
    reduce_scatter(l, args.with_count(&counts))
}

/// `MPI_Reduce_scatter_block`.
pub(crate) fn reduce_scatter_block(l: &Link, args: ReduceArgs<i64>) -> MpiResult {
    let recvcount = args.count;
    let k = count(recvcount, l.net.comm)?;
    let counts = vec![k; l.star.size as usize];
    reduce_scatter(l, args.with_count(&counts))
}

// ---- nonblocking forms: schedules progressed in the background ----
//
// The schedules are `oxmpi_coll::inter::nbc`'s (the algorithms above as rounds of
// transfers); here the MPI arguments become regions (packed data to send, room to unpack
// into at completion). Idle members of rooted collectives run an empty schedule (to keep
// the collective context's order).

use crate::icoll::sched::{self, Unpack};
use oxmpi_coll::sched::{Region, Schedule};

/// The empty schedule of an idle member.
fn idle(l: &Link) -> MpiResult<Schedule> {
    built(l, |ic| ic.schedule(Vec::new(), None))
}

/// A schedule made by `f` on the `oxmpi-coll` view of `l`.
fn built(
    l: &Link,
    f: impl FnOnce(&InterComm) -> oxmpi_coll::Result<Schedule>,
) -> MpiResult<Schedule> {
    f(&inter(l)?).map_err(err(l.net.comm))
}

fn start(l: &Link, s: Schedule, unpack: Vec<Unpack>, request: *mut c_int) -> MpiResult {
    sched::start(l.net.comm, s, unpack, request)
}

/// Our `count` items of `dt` at `buf` packed (the data to send).
fn send_region(dt: &Arc<Datatype>, n: usize, buf: *const c_void) -> Region {
    // SAFETY: the MPI contract of the collective: `buf` holds `n` items of `dt`.
    Region::Owned(unsafe { sched::packed(dt, n, buf) })
}

/// Build and start a rooted schedule: an empty one for the idle members of the root's
/// group, `at_root`'s at the root, `at_leaf(root's remote rank)`'s in the other group;
/// either may register regions to unpack at completion.
fn rooted(
    l: &Link,
    root: c_int,
    request: *mut c_int,
    at_root: impl FnOnce(&mut Vec<Unpack>) -> MpiResult<Schedule>,
    at_leaf: impl FnOnce(i32, &mut Vec<Unpack>) -> MpiResult<Schedule>,
) -> MpiResult {
    let mut unpack = Vec::new();
    let s = match role(l, root)? {
        Role::Idle => idle(l)?,
        Role::Root => at_root(&mut unpack)?,
        Role::Leaf(r) => at_leaf(r, &mut unpack)?,
    };
    start(l, s, unpack, request)
}

/// `MPI_Ibarrier`: gather at the local leader, leaders swap, release.
pub(crate) fn ibarrier(l: &Link, request: *mut c_int) -> MpiResult {
    let s = built(l, InterComm::ibarrier)?;
    start(l, s, Vec::new(), request)
}

/// `MPI_Ibcast`.
pub(crate) fn ibcast(
    l: &Link,
    buf: *mut c_void,
    n: i64,
    dth: c_int,
    root: c_int,
    request: *mut c_int,
) -> MpiResult {
    let comm = l.net.comm;
    let at_root = |_: &mut Vec<Unpack>| -> MpiResult<Schedule> {
        let dt = dtype(dth, comm)?;
        let n = count(n, comm)?;
        let data = send_region(&dt, n, buf);
        built(l, |ic| ic.ibcast_root(data, dt.size * n))
    };
    rooted(l, root, request, at_root, |r, unpack| {
        let dt = dtype(dth, comm)?;
        let n = count(n, comm)?;
        // SAFETY: MPI contract: `buf` has room for `n` items until completion.
        let reg = unsafe { sched::region(&dt, n, buf, false, true, 0, unpack) };
        built(l, |ic| ic.ione(reg, dt.size * n, r, false))
    })
}

/// The root's schedule of an `MPI_Igather(v)` (`gather`: its blocks are received) or
/// `MPI_Iscatter(v)` (its blocks are sent).
fn root_blocks(
    l: &Link,
    side: Laid<*mut c_void>,
    gather: bool,
    unpack: &mut Vec<Unpack>,
) -> MpiResult<Schedule> {
    let dt = dtype(side.datatype, l.net.comm)?;
    let slots = slots_of(l, side.layout)?;
    // SAFETY: MPI contract: the root's buffer holds (scatter) or has room for (gather)
    // every block until completion.
    let b = unsafe { sched::laid(&dt, side.buf, &slots, |_| !gather, |_| gather, 0, unpack) };
    built(l, |ic| ic.irooted(b.region, &b.counts, &b.displs, gather))
}

/// `MPI_Igather(v)`: the receive layout only matters at the root.
pub(crate) fn igatherv(
    l: &Link,
    snd: SendSpec,
    rcv: Laid<*mut c_void>,
    root: c_int,
    request: *mut c_int,
) -> MpiResult {
    let comm = l.net.comm;
    let at_root = |unpack: &mut Vec<Unpack>| root_blocks(l, rcv, true, unpack);
    rooted(l, root, request, at_root, |r, _| {
        no_in_place(snd.buf, comm)?;
        let sdt = dtype(snd.datatype, comm)?;
        let n = count(snd.count, comm)?;
        let data = send_region(&sdt, n, snd.buf);
        built(l, |ic| ic.ione(data, sdt.size * n, r, true))
    })
}

/// `MPI_Iscatter(v)`: the send layout only matters at the root.
pub(crate) fn iscatterv(
    l: &Link,
    snd: Laid<*const c_void>,
    rcv: RecvSpec,
    root: c_int,
    request: *mut c_int,
) -> MpiResult {
    let comm = l.net.comm;
    let at_root = |unpack: &mut Vec<Unpack>| root_blocks(l, snd.cast_mut(), false, unpack);
    rooted(l, root, request, at_root, |r, unpack| {
        no_in_place(rcv.buf, comm)?;
        let rdt = dtype(rcv.datatype, comm)?;
        let n = count(rcv.count, comm)?;
        // SAFETY: MPI contract: rcv.buf has room for `n` items until completion.
        let reg = unsafe { sched::region(&rdt, n, rcv.buf, false, true, 0, unpack) };
        built(l, |ic| ic.ione(reg, rdt.size * n, r, false))
    })
}

/// Exchange with every remote rank: `send` pieces `(type, count, address)` go to remote
/// rank r, `recv` pieces come from it (one round).
fn iexchange(
    l: &Link,
    send: &[(Arc<Datatype>, usize, *mut u8)],
    recv: &[(Arc<Datatype>, usize, *mut u8)],
    request: *mut c_int,
) -> MpiResult {
    let mut unpack = Vec::new();
    // SAFETY: MPI contract: every send piece holds its items, every receive piece has room
    // for its items until completion.
    let ((sreg, sc, sd), (rreg, rc, rd)) = unsafe {
        (
            sched::pieces(send, false, 0, &mut unpack),
            sched::pieces(recv, true, 1, &mut unpack),
        )
    };
    let s = built(l, |ic| ic.iexchange((sreg, &sc, &sd), (rreg, &rc, &rd)))?;
    start(l, s, unpack, request)
}

/// Pieces of one datatype at `buf + displacement * extent`.
fn typed_pieces(
    dt: &Arc<Datatype>,
    buf: *const c_void,
    slots: &[(usize, isize)],
) -> Vec<(Arc<Datatype>, usize, *mut u8)> {
    slots
        .iter()
        .map(|&(k, d)| (dt.clone(), k, at(buf, d * dt.extent()).cast()))
        .collect()
}

/// `MPI_Iallgather` / `MPI_Iallgatherv`.
fn iallgatherv(
    l: &Link,
    snd: SendSpec,
    recvbuf: *mut c_void,
    slots: MpiResult<Vec<(usize, isize)>>,
    recvtype: c_int,
    request: *mut c_int,
) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(snd.buf, comm)?;
    let sdt = dtype(snd.datatype, comm)?;
    let rdt = dtype(recvtype, comm)?;
    let send = typed_pieces(
        &sdt,
        snd.buf,
        &vec![(count(snd.count, comm)?, 0); l.rsize as usize],
    );
    iexchange(l, &send, &typed_pieces(&rdt, recvbuf, &slots?), request)
}

/// `MPI_Iallgather`.
pub(crate) fn iallgather(l: &Link, snd: SendSpec, rcv: RecvSpec, request: *mut c_int) -> MpiResult {
    let slots = count(rcv.count, l.net.comm).map(|k| uniform(l, k));
    iallgatherv(l, snd, rcv.buf, slots, rcv.datatype, request)
}

/// `MPI_Iallgatherv`.
pub(crate) fn iallgatherv_c(l: &Link, snd: SendSpec, rcv: RecvV, request: *mut c_int) -> MpiResult {
    let slots = layout(l, rcv.counts, rcv.displs);
    iallgatherv(l, snd, rcv.buf, slots, rcv.datatype, request)
}

/// `MPI_Ialltoall`.
pub(crate) fn ialltoall(l: &Link, snd: SendSpec, rcv: RecvSpec, request: *mut c_int) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(snd.buf, comm)?;
    let send = typed_pieces(
        &dtype(snd.datatype, comm)?,
        snd.buf,
        &uniform(l, count(snd.count, comm)?),
    );
    let recv = typed_pieces(
        &dtype(rcv.datatype, comm)?,
        rcv.buf,
        &uniform(l, count(rcv.count, comm)?),
    );
    iexchange(l, &send, &recv, request)
}

/// `MPI_Ialltoallv`.
pub(crate) fn ialltoallv(l: &Link, snd: SendV, rcv: RecvV, request: *mut c_int) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(snd.buf, comm)?;
    let send = typed_pieces(
        &dtype(snd.datatype, comm)?,
        snd.buf,
        &layout(l, snd.counts, snd.displs)?,
    );
    let recv = typed_pieces(
        &dtype(rcv.datatype, comm)?,
        rcv.buf,
        &layout(l, rcv.counts, rcv.displs)?,
    );
    iexchange(l, &send, &recv, request)
}

/// `MPI_Ialltoallw` (byte displacements, one type per remote rank).
pub(crate) fn ialltoallw(l: &Link, snd: SendW, rcv: RecvW, request: *mut c_int) -> MpiResult {
    let comm = l.net.comm;
    no_in_place(snd.buf, comm)?;
    let n = l.rsize as usize;
    let typed = |base: *const c_void,
                 counts,
                 displs,
                 types: *const c_int|
     -> MpiResult<Vec<(Arc<Datatype>, usize, *mut u8)>> {
        let slots = layout(l, counts, displs)?;
        let ts = slice_in(types, n, "types").map_err(|e| e.on(comm))?;
        slots
            .into_iter()
            .zip(ts)
            .map(|((k, d), &t)| Ok((dtype(t, comm)?, k, at(base, d).cast())))
            .collect()
    };
    let send = typed(snd.buf, snd.counts, snd.displs, snd.datatype)?;
    let recv = typed(rcv.buf, rcv.counts, rcv.displs, rcv.datatype)?;
    iexchange(l, &send, &recv, request)
}

/// `MPI_Ireduce`: the root folds the other group's contributions in rank order.
pub(crate) fn ireduce(
    l: &Link,
    args: ReduceArgs<i64>,
    root: c_int,
    request: *mut c_int,
) -> MpiResult {
    let (sendbuf, recvbuf, op) = (args.sendbuf, args.recvbuf, args.op);
    let (n, dth) = (args.count, args.datatype);
    let comm = l.net.comm;
    let at_root = |unpack: &mut Vec<Unpack>| -> MpiResult<Schedule> {
        let dt = dtype(dth, comm)?;
        let o = sched::owned_op(&dt, dth, op, comm)?;
        let n = count(n, comm)?;
        let len = dt.size * n;
        // SAFETY: MPI contract: recvbuf has room for `n` items until completion.
        let out = unsafe { sched::region(&dt, n, recvbuf, false, true, 0, unpack) };
        built(l, |ic| ic.ireduce_root(out, len, o))
    };
    rooted(l, root, request, at_root, |r, _| {
        no_in_place(sendbuf, comm)?;
        let dt = dtype(dth, comm)?;
        let o = sched::owned_op(&dt, dth, op, comm)?;
        let n = count(n, comm)?;
        let data = send_region(&dt, n, sendbuf);
        built(l, |ic| ic.ireduce_send(data, dt.size * n, r, o))
    })
}

/// Shared body of Iallreduce (`counts` = None) and Ireduce_scatter (local `counts`):
/// local contributions folded at the leader, leaders swap, the remote group's result is
/// sent to every local member (whole, or its block of `counts`).
fn ireduce_swap(
    l: &Link,
    args: ReduceArgs<usize>,
    counts: Option<&[usize]>,
    request: *mut c_int,
) -> MpiResult {
    let (sendbuf, recvbuf, op) = (args.sendbuf, args.recvbuf, args.op);
    let (total, dth) = (args.count, args.datatype);
    let comm = l.net.comm;
    no_in_place(sendbuf, comm)?;
    let dt = dtype(dth, comm)?;
    let o = sched::owned_op(&dt, dth, op, comm)?;
    // SAFETY: the MPI contract of the collective: `sendbuf` holds `total` items.
    let mine = unsafe { sched::packed(&dt, total, sendbuf) };
    let ours = counts.map_or(total, |c| c[l.rank() as usize]);
    let mut unpack = Vec::new();
    // SAFETY: MPI contract: recvbuf has room for our `ours` items until completion.
    let out = unsafe { sched::region(&dt, ours, recvbuf, false, true, 0, &mut unpack) };
    let bytes: Option<Vec<usize>> = counts.map(|c| c.iter().map(|k| k * dt.size).collect());
    let s = built(l, |ic| ic.ireduce_swap(out, mine, bytes.as_deref(), o))?;
    start(l, s, unpack, request)
}

/// `MPI_Iallreduce`: each group gets the reduction of the other group's contributions.
pub(crate) fn iallreduce(l: &Link, args: ReduceArgs<i64>, request: *mut c_int) -> MpiResult {
    let n = count(args.count, l.net.comm)?;
    ireduce_swap(l, args.with_count(n), None, request)
}

/// `MPI_Ireduce_scatter` with C arguments (`recvcounts` has the local group's size).
pub(crate) fn ireduce_scatter_c(
    l: &Link,
    args: ReduceArgs<Counts>,
    request: *mut c_int,
) -> MpiResult {
    let counts = local_counts(l, args.count)?;
    let total = counts.iter().sum();
    ireduce_swap(l, args.with_count(total), Some(&counts), request)
}

/// `MPI_Ireduce_scatter_block`.
pub(crate) fn ireduce_scatter_block(
    l: &Link,
    args: ReduceArgs<i64>,
    request: *mut c_int,
) -> MpiResult {
    let recvcount = args.count;
    let k = count(recvcount, l.net.comm)?;
    let counts = vec![k; l.star.size as usize];
    ireduce_swap(l, args.with_count(k * counts.len()), Some(&counts), request)
}
