//! Blocking collectives and communicator creation, built on the engine's point-to-point
//! byte interface.
//!
//! Every communicator has a second engine communicator (its *collective context*) over
//! the same group, so collective traffic never matches user point-to-point messages.
//! Context ids are agreed on by a MAX-allreduce of each member's next free id over the
//! parent's collective context. Algorithms are simple linear/pairwise ones (correct for
//! any op, including non-commutative ones: reductions fold in rank order).

use crate::backend::{self, EComm, SendMode};
use crate::consts::*;
use crate::datatype::{pack_into, unpack_from, Datatype};
use crate::ffi::{check_count, inp, out, slice_in, MpiError, MpiResult};
use crate::state::{lock, Comm};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// Tags of collective messages (within a collective context).
mod tag {
    pub const BARRIER: i32 = 1;
    pub const BCAST: i32 = 2;
    pub const REDUCE: i32 = 3;
    pub const GATHER: i32 = 4;
    pub const SCATTER: i32 = 5;
    pub const ALLGATHER: i32 = 6;
    pub const ALLTOALL: i32 = 7;
    pub const SCAN: i32 = 8;
}

/// First context id handed out for user communicators (0/1: world/self, 2/3: their
/// collective contexts).
pub(crate) const FIRST_FREE_CTX: u32 = 4;

/// The collective view of a communicator.
struct Coll {
    eng: &'static oxmpi_engine::Engine,
    ctx: EComm,
    rank: i32,
    size: i32,
    comm: c_int,
}

fn coll(comm: c_int) -> MpiResult<Coll> {
    let st = lock();
    st.check_active()?;
    let c = st.comm(comm)?;
    Ok(Coll {
        eng: backend::engine()?,
        ctx: c.coll,
        rank: c.rank,
        size: c.size,
        comm,
    })
}

impl Coll {
    fn fail(&self, s: backend::EStatus) -> MpiResult<usize> {
        match s.error {
            None => Ok(s.count_bytes),
            Some(e) => Err(
                MpiError::new(backend::class_code(e), "a collective message failed").on(self.comm),
            ),
        }
    }
    fn isend(&self, data: &[u8], dest: i32, tag: i32) -> MpiResult<backend::EReq> {
        // SAFETY: `data` stays alive until the caller waits for the request (every
        // caller waits before dropping the buffer).
        unsafe {
            self.eng.isend(
                data.as_ptr(),
                data.len(),
                dest,
                tag,
                self.ctx,
                SendMode::Standard,
            )
        }
        .map_err(|e| backend::err(e).on(self.comm))
    }
    fn irecv(&self, buf: &mut [u8], src: i32, tag: i32) -> MpiResult<backend::EReq> {
        // SAFETY: `buf` stays alive until the caller waits for the request.
        unsafe {
            self.eng
                .irecv(buf.as_mut_ptr(), buf.len(), src, tag, self.ctx)
        }
        .map_err(|e| backend::err(e).on(self.comm))
    }
    fn wait(&self, r: backend::EReq) -> MpiResult<usize> {
        let s = self.eng.wait(r);
        self.fail(s)
    }
    fn send(&self, data: &[u8], dest: i32, tag: i32) -> MpiResult {
        let r = self.isend(data, dest, tag)?;
        self.wait(r).map(|_| ())
    }
    fn recv(&self, buf: &mut [u8], src: i32, tag: i32) -> MpiResult<usize> {
        let r = self.irecv(buf, src, tag)?;
        self.wait(r)
    }
    fn check_root(&self, root: c_int) -> MpiResult {
        if !(0..self.size).contains(&root) {
            return Err(MpiError::new(
                MPI_ERR_ROOT,
                format!("invalid root {root} (size {})", self.size),
            )
            .on(self.comm));
        }
        Ok(())
    }
    fn barrier(&self) -> MpiResult {
        if self.rank == 0 {
            for r in 1..self.size {
                self.recv(&mut [], r, tag::BARRIER)?;
            }
            for r in 1..self.size {
                self.send(&[], r, tag::BARRIER)?;
            }
        } else {
            self.send(&[], 0, tag::BARRIER)?;
            self.recv(&mut [], 0, tag::BARRIER)?;
        }
        Ok(())
    }
    /// Broadcast a byte vector from `root` (its length is sent first).
    fn bcast_vec(&self, data: &mut Vec<u8>, root: i32) -> MpiResult {
        if self.rank == root {
            let len = (data.len() as u64).to_ne_bytes();
            for r in (0..self.size).filter(|&r| r != root) {
                self.send(&len, r, tag::BCAST)?;
                self.send(data, r, tag::BCAST)?;
            }
        } else {
            let mut len = [0u8; 8];
            self.recv(&mut len, root, tag::BCAST)?;
            data.resize(u64::from_ne_bytes(len) as usize, 0);
            self.recv(data, root, tag::BCAST)?;
        }
        Ok(())
    }
    /// Every rank's byte vector, at every rank.
    fn allgather_vec(&self, mine: &[u8]) -> MpiResult<Vec<Vec<u8>>> {
        let mut all = vec![Vec::new(); self.size as usize];
        if self.rank == 0 {
            all[0] = mine.to_vec();
            for r in 1..self.size {
                let mut len = [0u8; 8];
                self.recv(&mut len, r, tag::ALLGATHER)?;
                let mut v = vec![0u8; u64::from_ne_bytes(len) as usize];
                self.recv(&mut v, r, tag::ALLGATHER)?;
                all[r as usize] = v;
            }
        } else {
            self.send(&(mine.len() as u64).to_ne_bytes(), 0, tag::ALLGATHER)?;
            self.send(mine, 0, tag::ALLGATHER)?;
        }
        let mut flat = Vec::new();
        if self.rank == 0 {
            for v in &all {
                flat.extend((v.len() as u64).to_ne_bytes());
                flat.extend(v);
            }
        }
        self.bcast_vec(&mut flat, 0)?;
        let mut pos = 0;
        let mut res = Vec::with_capacity(self.size as usize);
        for _ in 0..self.size {
            let n = u64::from_ne_bytes(flat[pos..pos + 8].try_into().expect("8 bytes")) as usize;
            pos += 8;
            res.push(flat[pos..pos + n].to_vec());
            pos += n;
        }
        Ok(res)
    }
}

/// A buffer holding `count` items of a datatype in its own layout (for reductions).
struct Typed {
    v: Vec<u8>,
    shift: isize,
}

impl Typed {
    fn new(dt: &Datatype, count: usize) -> Typed {
        let span = if count == 0 {
            0
        } else {
            (dt.true_ub - dt.true_lb) as usize + (count - 1) * dt.extent().unsigned_abs()
        };
        Typed {
            v: vec![0u8; span.max(1)],
            shift: -dt.true_lb,
        }
    }
    fn ptr(&mut self) -> *mut c_void {
        self.v.as_mut_ptr().wrapping_offset(self.shift).cast()
    }
    fn from_packed(dt: &Datatype, count: usize, data: &[u8]) -> Typed {
        let mut t = Typed::new(dt, count);
        let p = t.ptr();
        // SAFETY: `t` spans the type map of `count` items (true extent and strides).
        unsafe { unpack_from(dt, count, p.cast(), data) };
        t
    }
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

fn is_in_place(p: *const c_void) -> bool {
    p as isize == -1
}

fn dtype(h: c_int, comm: c_int) -> MpiResult<Arc<Datatype>> {
    lock().dtype_committed(h).map_err(|e| e.on(comm))
}

/// Reduce packed contributions (in rank order) into one typed buffer.
fn fold(parts: &[Vec<u8>], dt: &Datatype, count: usize, dth: c_int, op: c_int) -> MpiResult<Typed> {
    let mut acc = Typed::from_packed(dt, count, &parts[parts.len() - 1]);
    for p in parts[..parts.len() - 1].iter().rev() {
        let mut x = Typed::from_packed(dt, count, p);
        let (xin, accp) = (x.ptr(), acc.ptr());
        // SAFETY: both typed buffers hold `count` items of `dt`.
        unsafe { crate::op::reduce_local(xin, accp, count, dth, op)? };
    }
    Ok(acc)
}

/// Gather packed contributions at `root` (`None` elsewhere).
fn gather_packed(
    c: &Coll,
    mine: Vec<u8>,
    root: i32,
    expect: usize,
) -> MpiResult<Option<Vec<Vec<u8>>>> {
    if c.rank != root {
        c.send(&mine, root, tag::REDUCE)?;
        return Ok(None);
    }
    let mut parts = vec![Vec::new(); c.size as usize];
    for r in 0..c.size {
        if r == root {
            continue;
        }
        let mut v = vec![0u8; expect];
        let n = c.recv(&mut v, r, tag::REDUCE)?;
        v.truncate(n);
        parts[r as usize] = v;
    }
    parts[root as usize] = mine;
    Ok(Some(parts))
}

#[allow(clippy::too_many_arguments)]
fn reduce_impl(
    c: &Coll,
    contrib: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    dt: &Datatype,
    dth: c_int,
    op: c_int,
    root: i32,
) -> MpiResult {
    crate::op::op_kind(op).map_err(|e| e.on(c.comm))?;
    // Reject undefined (op, type) pairs on every rank before any message moves.
    crate::coll_alg::Reducer::new(dt, dth, op).map_err(|e| e.on(c.comm))?;
    let mine = pack(dt, count, contrib);
    if let Some(parts) = gather_packed(c, mine, root, count * dt.size)? {
        let mut acc = fold(&parts, dt, count, dth, op).map_err(|e| e.on(c.comm))?;
        let p = acc.ptr();
        let bytes = pack(dt, count, p);
        unpack(dt, count, recvbuf, &bytes);
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Barrier`.
    fn PMPI_Barrier / "MPI_Barrier" (comm: c_int) {
        crate::coll_alg::barrier(coll(comm)?.ctx, comm)
    }
}

mpi_fn! {
    /// `MPI_Bcast`.
    fn PMPI_Bcast / "MPI_Bcast" (buffer: *mut c_void, count: c_int, datatype: c_int, root: c_int, comm: c_int) {
        let c = coll(comm)?;
        c.check_root(root)?;
        let n = check_count(count).map_err(|e| e.on(comm))?;
        let dt = dtype(datatype, comm)?;
        // SAFETY: MPI contract: `buffer` holds/has room for `count` items of `datatype`.
        unsafe { crate::coll_alg::bcast(c.ctx, comm, buffer, n, &dt, root) }
    }
}

mpi_fn! {
    /// `MPI_Reduce`.
    fn PMPI_Reduce / "MPI_Reduce" (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, root: c_int, comm: c_int) {
        let c = coll(comm)?;
        c.check_root(root)?;
        let n = check_count(count).map_err(|e| e.on(comm))?;
        let dt = dtype(datatype, comm)?;
        // SAFETY: MPI contract of MPI_Reduce for the buffers.
        unsafe { crate::coll_alg::reduce(c.ctx, comm, sendbuf, recvbuf, n, &dt, datatype, op, root) }
    }
}

mpi_fn! {
    /// `MPI_Allreduce`.
    fn PMPI_Allreduce / "MPI_Allreduce" (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) {
        let c = coll(comm)?;
        let n = check_count(count).map_err(|e| e.on(comm))?;
        let dt = dtype(datatype, comm)?;
        // SAFETY: MPI contract of MPI_Allreduce for the buffers.
        unsafe { crate::coll_alg::allreduce(c.ctx, comm, sendbuf, recvbuf, n, &dt, datatype, op) }
    }
}

/// Shared body of Scan (`exclusive = false`) and Exscan.
fn scan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    exclusive: bool,
) -> MpiResult {
    let c = coll(comm)?;
    let n = check_count(count).map_err(|e| e.on(comm))?;
    let dt = dtype(datatype, comm)?;
    crate::op::op_kind(op).map_err(|e| e.on(comm))?;
    // Reject undefined (op, type) pairs on every rank before any message moves.
    crate::coll_alg::Reducer::new(&dt, datatype, op).map_err(|e| e.on(comm))?;
    let contrib = if is_in_place(sendbuf) {
        recvbuf.cast_const()
    } else {
        sendbuf
    };
    let mine = pack(&dt, n, contrib);
    // prefix of ranks 0..rank-1 (None on rank 0)
    let before = if c.rank > 0 {
        let mut v = vec![0u8; n * dt.size];
        let k = c.recv(&mut v, c.rank - 1, tag::SCAN)?;
        v.truncate(k);
        Some(v)
    } else {
        None
    };
    let upto = match &before {
        Some(b) => {
            let mut acc =
                fold(&[b.clone(), mine.clone()], &dt, n, datatype, op).map_err(|e| e.on(comm))?;
            let p = acc.ptr();
            pack(&dt, n, p)
        }
        None => mine.clone(),
    };
    if c.rank + 1 < c.size {
        c.send(&upto, c.rank + 1, tag::SCAN)?;
    }
    if exclusive {
        if let Some(b) = before {
            unpack(&dt, n, recvbuf, &b);
        }
    } else {
        unpack(&dt, n, recvbuf, &upto);
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Scan`.
    fn PMPI_Scan / "MPI_Scan" (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) {
        scan(sendbuf, recvbuf, count, datatype, op, comm, false)
    }
}

mpi_fn! {
    /// `MPI_Exscan` (the result on rank 0 is undefined and left untouched).
    fn PMPI_Exscan / "MPI_Exscan" (sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) {
        scan(sendbuf, recvbuf, count, datatype, op, comm, true)
    }
}

/// Per-rank (count, displacement) pairs of a v-collective.
fn layout(c: &Coll, counts: *const c_int, displs: *const c_int) -> MpiResult<Vec<(usize, isize)>> {
    let n = c.size as usize;
    let cs = slice_in(counts, n, "counts")?;
    let ds = slice_in(displs, n, "displs")?;
    cs.iter()
        .zip(ds)
        .map(|(&k, &d)| Ok((check_count(k)?, d as isize)))
        .collect::<MpiResult<Vec<_>>>()
        .map_err(|e| e.on(c.comm))
}

/// Gather(v) body: `slots[i]` = (count, displacement in items) of rank i at the root.
#[allow(clippy::too_many_arguments)]
fn gatherv(
    c: &Coll,
    sendbuf: *const c_void,
    scount: usize,
    sdt: Option<Arc<Datatype>>,
    recvbuf: *mut c_void,
    rdt: Option<&Datatype>,
    slots: &[(usize, isize)],
    root: i32,
) -> MpiResult {
    if c.rank != root {
        let sdt = sdt.expect("send type checked");
        return c.send(&pack(&sdt, scount, sendbuf), root, tag::GATHER);
    }
    let rdt = rdt.expect("receive type checked");
    for r in 0..c.size {
        let (k, d) = slots[r as usize];
        let dst = recvbuf
            .cast::<u8>()
            .wrapping_offset(d * rdt.extent())
            .cast::<c_void>();
        if r == root {
            if !is_in_place(sendbuf) {
                let sdt = sdt.as_ref().expect("send type checked");
                unpack(rdt, k, dst, &pack(sdt, scount, sendbuf));
            }
            continue;
        }
        let mut v = vec![0u8; k * rdt.size];
        let n = c.recv(&mut v, r, tag::GATHER)?;
        unpack(rdt, k, dst, &v[..n]);
    }
    Ok(())
}

/// Scatter(v) body.
#[allow(clippy::too_many_arguments)]
fn scatterv(
    c: &Coll,
    sendbuf: *const c_void,
    sdt: Option<&Datatype>,
    slots: &[(usize, isize)],
    recvbuf: *mut c_void,
    rcount: usize,
    rdt: Option<Arc<Datatype>>,
    root: i32,
) -> MpiResult {
    if c.rank != root {
        let rdt = rdt.expect("receive type checked");
        let mut v = vec![0u8; rcount * rdt.size];
        let n = c.recv(&mut v, root, tag::SCATTER)?;
        unpack(&rdt, rcount, recvbuf, &v[..n]);
        return Ok(());
    }
    let sdt = sdt.expect("send type checked");
    for r in 0..c.size {
        let (k, d) = slots[r as usize];
        let src = sendbuf
            .cast::<u8>()
            .wrapping_offset(d * sdt.extent())
            .cast::<c_void>();
        let data = pack(sdt, k, src);
        if r == root {
            if !is_in_place(recvbuf) {
                let rdt = rdt.as_ref().expect("receive type checked");
                unpack(rdt, rcount, recvbuf, &data);
            }
        } else {
            c.send(&data, r, tag::SCATTER)?;
        }
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Gather`.
    fn PMPI_Gather / "MPI_Gather" (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) {
        let c = coll(comm)?;
        c.check_root(root)?;
        let inplace = is_in_place(sendbuf) && c.rank == root;
        let sdt = if inplace { None } else { Some(dtype(sendtype, comm)?) };
        let sc = if inplace { 0 } else { check_count(sendcount).map_err(|e| e.on(comm))? };
        let rdt = if c.rank == root { Some(dtype(recvtype, comm)?) } else { None };
        let rc = if c.rank == root { check_count(recvcount).map_err(|e| e.on(comm))? } else { 0 };
        let slots: Vec<_> = (0..c.size as usize).map(|i| (rc, (i * rc) as isize)).collect();
        gatherv(&c, sendbuf, sc, sdt, recvbuf, rdt.as_deref(), &slots, root)
    }
}

mpi_fn! {
    /// `MPI_Gatherv`.
    fn PMPI_Gatherv / "MPI_Gatherv" (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, root: c_int, comm: c_int) {
        let c = coll(comm)?;
        c.check_root(root)?;
        let inplace = is_in_place(sendbuf) && c.rank == root;
        let sdt = if inplace { None } else { Some(dtype(sendtype, comm)?) };
        let sc = if inplace { 0 } else { check_count(sendcount).map_err(|e| e.on(comm))? };
        let (rdt, slots) = if c.rank == root { (Some(dtype(recvtype, comm)?), layout(&c, recvcounts, displs)?) } else { (None, vec![]) };
        gatherv(&c, sendbuf, sc, sdt, recvbuf, rdt.as_deref(), &slots, root)
    }
}

mpi_fn! {
    /// `MPI_Scatter`.
    fn PMPI_Scatter / "MPI_Scatter" (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) {
        let c = coll(comm)?;
        c.check_root(root)?;
        let inplace = is_in_place(recvbuf) && c.rank == root;
        let rdt = if inplace { None } else { Some(dtype(recvtype, comm)?) };
        let rc = if inplace { 0 } else { check_count(recvcount).map_err(|e| e.on(comm))? };
        let sdt = if c.rank == root { Some(dtype(sendtype, comm)?) } else { None };
        let sc = if c.rank == root { check_count(sendcount).map_err(|e| e.on(comm))? } else { 0 };
        let slots: Vec<_> = (0..c.size as usize).map(|i| (sc, (i * sc) as isize)).collect();
        scatterv(&c, sendbuf, sdt.as_deref(), &slots, recvbuf, rc, rdt, root)
    }
}

mpi_fn! {
    /// `MPI_Scatterv`.
    fn PMPI_Scatterv / "MPI_Scatterv" (sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) {
        let c = coll(comm)?;
        c.check_root(root)?;
        let inplace = is_in_place(recvbuf) && c.rank == root;
        let rdt = if inplace { None } else { Some(dtype(recvtype, comm)?) };
        let rc = if inplace { 0 } else { check_count(recvcount).map_err(|e| e.on(comm))? };
        let (sdt, slots) = if c.rank == root { (Some(dtype(sendtype, comm)?), layout(&c, sendcounts, displs)?) } else { (None, vec![]) };
        scatterv(&c, sendbuf, sdt.as_deref(), &slots, recvbuf, rc, rdt, root)
    }
}

/// Allgather(v) body: pairwise exchange of every rank's piece.
fn allgatherv(
    c: &Coll,
    sendbuf: *const c_void,
    scount: usize,
    sdt: Option<Arc<Datatype>>,
    recvbuf: *mut c_void,
    rdt: &Datatype,
    slots: &[(usize, isize)],
) -> MpiResult {
    let slot = |r: usize| {
        recvbuf
            .cast::<u8>()
            .wrapping_offset(slots[r].1 * rdt.extent())
            .cast::<c_void>()
    };
    let me = c.rank as usize;
    let mine = match &sdt {
        Some(sdt) => pack(sdt, scount, sendbuf),
        None => pack(rdt, slots[me].0, slot(me)),
    };
    let mut bufs: Vec<Vec<u8>> = slots.iter().map(|(k, _)| vec![0u8; k * rdt.size]).collect();
    let mut reqs = Vec::new();
    for (r, b) in bufs.iter_mut().enumerate() {
        if r != me {
            reqs.push((r, c.irecv(b, r as i32, tag::ALLGATHER)?));
        }
    }
    let mut sends = Vec::new();
    for r in 0..c.size {
        if r != c.rank {
            sends.push(c.isend(&mine, r, tag::ALLGATHER)?);
        }
    }
    let mut lens = vec![0usize; slots.len()];
    for (r, q) in reqs {
        lens[r] = c.wait(q)?;
    }
    for q in sends {
        c.wait(q)?;
    }
    for (r, b) in bufs.iter().enumerate() {
        if r == me {
            if sdt.is_some() {
                unpack(rdt, slots[r].0, slot(r), &mine);
            }
        } else {
            unpack(rdt, slots[r].0, slot(r), &b[..lens[r]]);
        }
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Allgather`.
    fn PMPI_Allgather / "MPI_Allgather" (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) {
        let c = coll(comm)?;
        let sdt = if is_in_place(sendbuf) { None } else { Some(dtype(sendtype, comm)?) };
        let sc = if sdt.is_some() { check_count(sendcount).map_err(|e| e.on(comm))? } else { 0 };
        let rdt = dtype(recvtype, comm)?;
        let rc = check_count(recvcount).map_err(|e| e.on(comm))?;
        let slots: Vec<_> = (0..c.size as usize).map(|i| (rc, (i * rc) as isize)).collect();
        allgatherv(&c, sendbuf, sc, sdt, recvbuf, &rdt, &slots)
    }
}

mpi_fn! {
    /// `MPI_Allgatherv`.
    fn PMPI_Allgatherv / "MPI_Allgatherv" (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int) {
        let c = coll(comm)?;
        let sdt = if is_in_place(sendbuf) { None } else { Some(dtype(sendtype, comm)?) };
        let sc = if sdt.is_some() { check_count(sendcount).map_err(|e| e.on(comm))? } else { 0 };
        let rdt = dtype(recvtype, comm)?;
        let slots = layout(&c, recvcounts, displs)?;
        allgatherv(&c, sendbuf, sc, sdt, recvbuf, &rdt, &slots)
    }
}

/// Alltoall(v/w) body: `send[r]`/`recv[r]` = (type, count, byte offset) for rank r.
type Piece = (Arc<Datatype>, usize, isize);

fn alltoallw(
    c: &Coll,
    sendbuf: *const c_void,
    send: Option<Vec<Piece>>,
    recvbuf: *mut c_void,
    recv: &[Piece],
) -> MpiResult {
    let off = |b: *const c_void, o: isize| b.cast::<u8>().wrapping_offset(o).cast::<c_void>();
    // In place: the data to send is in the receive buffer; copy it out first.
    let out: Vec<Vec<u8>> = match &send {
        Some(s) => s
            .iter()
            .map(|(t, k, o)| pack(t, *k, off(sendbuf, *o)))
            .collect(),
        None => recv
            .iter()
            .map(|(t, k, o)| pack(t, *k, off(recvbuf, *o)))
            .collect(),
    };
    let mut bufs: Vec<Vec<u8>> = recv.iter().map(|(t, k, _)| vec![0u8; k * t.size]).collect();
    let mut reqs = Vec::new();
    for (r, b) in bufs.iter_mut().enumerate() {
        if r as i32 != c.rank {
            reqs.push((r, c.irecv(b, r as i32, tag::ALLTOALL)?));
        }
    }
    let mut sends = Vec::new();
    for (r, o) in out.iter().enumerate() {
        if r as i32 != c.rank {
            sends.push(c.isend(o, r as i32, tag::ALLTOALL)?);
        }
    }
    let mut lens = vec![0usize; recv.len()];
    for (r, q) in reqs {
        lens[r] = c.wait(q)?;
    }
    for q in sends {
        c.wait(q)?;
    }
    for (r, (t, k, o)) in recv.iter().enumerate() {
        let data = if r as i32 == c.rank {
            &out[r][..]
        } else {
            &bufs[r][..lens[r]]
        };
        unpack(t, *k, off(recvbuf, *o).cast_mut(), data);
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Alltoall`.
    fn PMPI_Alltoall / "MPI_Alltoall" (sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) {
        let c = coll(comm)?;
        let n = c.size as usize;
        let rdt = dtype(recvtype, comm)?;
        let rc = check_count(recvcount).map_err(|e| e.on(comm))?;
        let recv: Vec<Piece> = (0..n).map(|i| (rdt.clone(), rc, (i * rc) as isize * rdt.extent())).collect();
        let send = if is_in_place(sendbuf) {
            None
        } else {
            let sdt = dtype(sendtype, comm)?;
            let sc = check_count(sendcount).map_err(|e| e.on(comm))?;
            Some((0..n).map(|i| (sdt.clone(), sc, (i * sc) as isize * sdt.extent())).collect())
        };
        alltoallw(&c, sendbuf, send, recvbuf, &recv)
    }
}

mpi_fn! {
    /// `MPI_Alltoallv`.
    fn PMPI_Alltoallv / "MPI_Alltoallv" (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: c_int, comm: c_int) {
        let c = coll(comm)?;
        let rdt = dtype(recvtype, comm)?;
        let recv: Vec<Piece> = layout(&c, recvcounts, rdispls)?.into_iter().map(|(k, d)| (rdt.clone(), k, d * rdt.extent())).collect();
        let send = if is_in_place(sendbuf) {
            None
        } else {
            let sdt = dtype(sendtype, comm)?;
            Some(layout(&c, sendcounts, sdispls)?.into_iter().map(|(k, d)| (sdt.clone(), k, d * sdt.extent())).collect())
        };
        alltoallw(&c, sendbuf, send, recvbuf, &recv)
    }
}

mpi_fn! {
    /// `MPI_Alltoallw` (displacements in bytes).
    fn PMPI_Alltoallw / "MPI_Alltoallw" (sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtypes: *const c_int, comm: c_int) {
        let c = coll(comm)?;
        let n = c.size as usize;
        let pieces = |counts, displs, types: *const c_int| -> MpiResult<Vec<Piece>> {
            let l = layout(&c, counts, displs)?;
            let t = slice_in(types, n, "types")?;
            l.into_iter().zip(t).map(|((k, d), &h)| Ok((dtype(h, comm)?, k, d))).collect()
        };
        let recv = pieces(recvcounts, rdispls, recvtypes)?;
        let send = if is_in_place(sendbuf) { None } else { Some(pieces(sendcounts, sdispls, sendtypes)?) };
        alltoallw(&c, sendbuf, send, recvbuf, &recv)
    }
}

/// Reduce-scatter body: reduce everything at rank 0, then scatter `counts`.
fn reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts: &[usize],
    datatype: c_int,
    op: c_int,
    comm: c_int,
) -> MpiResult {
    let c = coll(comm)?;
    let dt = dtype(datatype, comm)?;
    let total: usize = counts.iter().sum();
    let contrib = if is_in_place(sendbuf) {
        recvbuf.cast_const()
    } else {
        sendbuf
    };
    let mut full = Typed::new(&dt, total);
    let fp = full.ptr();
    reduce_impl(&c, contrib, fp, total, &dt, datatype, op, 0)?;
    let mut slots = Vec::new();
    let mut d = 0isize;
    for &k in counts {
        slots.push((k, d));
        d += k as isize;
    }
    let me = c.rank as usize;
    scatterv(
        &c,
        fp,
        Some(&dt),
        &slots,
        recvbuf,
        counts[me],
        Some(dt.clone()),
        0,
    )
}

mpi_fn! {
    /// `MPI_Reduce_scatter_block`.
    fn PMPI_Reduce_scatter_block / "MPI_Reduce_scatter_block" (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: c_int, op: c_int, comm: c_int) {
        let n = coll(comm)?.size as usize;
        let k = check_count(recvcount).map_err(|e| e.on(comm))?;
        reduce_scatter(sendbuf, recvbuf, &vec![k; n], datatype, op, comm)
    }
}

mpi_fn! {
    /// `MPI_Reduce_scatter`.
    fn PMPI_Reduce_scatter / "MPI_Reduce_scatter" (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: c_int, op: c_int, comm: c_int) {
        let n = coll(comm)?.size as usize;
        let counts = slice_in(recvcounts, n, "recvcounts")?.iter().map(|&k| check_count(k)).collect::<MpiResult<Vec<_>>>()?;
        reduce_scatter(sendbuf, recvbuf, &counts, datatype, op, comm)
    }
}

// ---- communicator creation ----

/// Agree on a fresh context id pair over `c` (all members call).
fn agree_ctx(c: &Coll) -> MpiResult<u32> {
    let mine = lock().next_ctx;
    let all = c.allgather_vec(&mine.to_ne_bytes())?;
    let ctx = all
        .iter()
        .map(|v| u32::from_ne_bytes(v[..4].try_into().expect("4 bytes")))
        .max()
        .unwrap_or(mine);
    lock().next_ctx = ctx + 2;
    Ok(ctx)
}

/// Create a communicator over `group` (world ranks) with context ids `ctx`/`ctx + 1`,
/// inheriting the error handler of `parent`.
pub(crate) fn make_comm(parent: c_int, ctx: u32, group: Vec<i32>) -> MpiResult<c_int> {
    let eng = backend::engine()?;
    let ecomm = eng.comm_create(ctx, group.clone()).map_err(backend::err)?;
    let collc = eng
        .comm_create(ctx + 1, group.clone())
        .map_err(backend::err)?;
    let mut st = lock();
    let me = st.world_rank();
    let (errh, err_action) = {
        let p = st.comm(parent)?;
        (p.errh, p.err_action)
    };
    let rank = group.iter().position(|&w| w == me).expect("member") as i32;
    let size = group.len() as i32;
    Ok(st.comms.insert(Comm {
        ecomm,
        coll: collc,
        rank,
        size,
        group,
        errh,
        err_action,
        name: String::new(),
        attrs: Default::default(),
    }))
}

/// Copy the attributes of `from` to `to` through the keyvals' copy callbacks.
pub(crate) fn copy_attrs(from: c_int, to: c_int) -> MpiResult {
    type CopyFn = unsafe extern "C" fn(
        c_int,
        c_int,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        *mut c_int,
    ) -> c_int;
    let attrs: Vec<(c_int, usize, crate::state::Keyval)> = {
        let st = lock();
        let c = st.comm(from)?;
        c.attrs
            .iter()
            .filter_map(|(&k, &v)| st.keyvals.get(k).map(|kv| (k, v, *kv)))
            .collect()
    };
    for (k, v, kv) in attrs {
        if kv.copy == 0 {
            continue;
        }
        // SAFETY: a non-NULL copy callback registered with MPI_Comm_create_keyval.
        let f: CopyFn = unsafe { std::mem::transmute::<usize, CopyFn>(kv.copy) };
        let mut newv: *mut c_void = std::ptr::null_mut();
        let mut flag: c_int = 0;
        // SAFETY: calling the user's copy callback with valid output pointers.
        let rc = unsafe {
            f(
                from,
                k,
                kv.extra as *mut c_void,
                v as *mut c_void,
                (&mut newv as *mut *mut c_void).cast(),
                &mut flag,
            )
        };
        if rc != MPI_SUCCESS {
            return Err(MpiError::new(rc, "attribute copy callback failed").on(from));
        }
        if flag != 0 {
            lock().comm_mut(to)?.attrs.insert(k, newv as usize);
        }
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Comm_dup`.
    fn PMPI_Comm_dup / "MPI_Comm_dup" (comm: c_int, newcomm: *mut c_int) {
        let c = coll(comm)?;
        if newcomm.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
        }
        let ctx = agree_ctx(&c)?;
        let group = lock().comm(comm)?.group.clone();
        let h = make_comm(comm, ctx, group)?;
        copy_attrs(comm, h)?;
        crate::topo::copy(comm, h);
        out(newcomm, h, "newcomm")
    }
}

mpi_fn! {
    /// `MPI_Comm_dup_with_info` (the info is accepted and ignored).
    fn PMPI_Comm_dup_with_info / "MPI_Comm_dup_with_info" (comm: c_int, _info: c_int, newcomm: *mut c_int) {
        let c = coll(comm)?;
        if newcomm.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
        }
        let ctx = agree_ctx(&c)?;
        let group = lock().comm(comm)?.group.clone();
        let h = make_comm(comm, ctx, group)?;
        copy_attrs(comm, h)?;
        crate::topo::copy(comm, h);
        out(newcomm, h, "newcomm")
    }
}

mpi_fn! {
    /// `MPI_Comm_split`.
    fn PMPI_Comm_split / "MPI_Comm_split" (comm: c_int, color: c_int, key: c_int, newcomm: *mut c_int) {
        let c = coll(comm)?;
        if newcomm.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
        }
        if color < 0 && color != MPI_UNDEFINED {
            return Err(MpiError::new(MPI_ERR_ARG, format!("invalid color {color}")).on(comm));
        }
        let mut mine = color.to_ne_bytes().to_vec();
        mine.extend(key.to_ne_bytes());
        let all = c.allgather_vec(&mine)?;
        let ctx = agree_ctx(&c)?;
        if color == MPI_UNDEFINED {
            return out(newcomm, MPI_COMM_NULL, "newcomm");
        }
        let parent_group = lock().comm(comm)?.group.clone();
        let mut members: Vec<(c_int, usize)> = all
            .iter()
            .enumerate()
            .filter_map(|(r, v)| {
                let col = c_int::from_ne_bytes(v[..4].try_into().ok()?);
                let k = c_int::from_ne_bytes(v[4..8].try_into().ok()?);
                (col == color).then_some((k, r))
            })
            .collect();
        members.sort();
        let group = members.iter().map(|&(_, r)| parent_group[r]).collect();
        let h = make_comm(comm, ctx, group)?;
        out(newcomm, h, "newcomm")
    }
}

mpi_fn! {
    /// `MPI_Comm_split_type`: `MPI_COMM_TYPE_SHARED` groups the ranks of one host.
    fn PMPI_Comm_split_type / "MPI_Comm_split_type" (comm: c_int, split_type: c_int, key: c_int, _info: c_int, newcomm: *mut c_int) {
        let color = if split_type == MPI_UNDEFINED {
            MPI_UNDEFINED
        } else if split_type == MPI_COMM_TYPE_SHARED {
            let h = crate::env::hostname();
            (h.bytes().fold(5381u32, |a, b| a.wrapping_mul(33) ^ b as u32) & 0x7fff_ffff) as c_int
        } else {
            return Err(MpiError::new(MPI_ERR_ARG, format!("unsupported split type {split_type}")).on(comm));
        };
        // SAFETY: forwarding our own arguments.
        let rc = unsafe { PMPI_Comm_split(comm, color, key, newcomm) };
        if rc != MPI_SUCCESS {
            return Err(MpiError::new(rc, "MPI_Comm_split failed").on(comm));
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_create`.
    fn PMPI_Comm_create / "MPI_Comm_create" (comm: c_int, group: c_int, newcomm: *mut c_int) {
        let c = coll(comm)?;
        if newcomm.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
        }
        let members = lock().group(group).map_err(|e| e.on(comm))?;
        let ctx = agree_ctx(&c)?;
        let me = lock().world_rank();
        if !members.contains(&me) {
            return out(newcomm, MPI_COMM_NULL, "newcomm");
        }
        let h = make_comm(comm, ctx, members)?;
        out(newcomm, h, "newcomm")
    }
}

mpi_fn! {
    /// `MPI_Comm_disconnect`: like `MPI_Comm_free` after the pending traffic (there is no
    /// dynamic process support, so every communicator is local).
    fn PMPI_Comm_disconnect / "MPI_Comm_disconnect" (comm: *mut c_int) {
        let h = inp(comm, "comm")?;
        coll(h)?.barrier()?;
        // SAFETY: forwarding our own argument.
        let rc = unsafe { crate::comm::PMPI_Comm_free(comm) };
        if rc != MPI_SUCCESS {
            return Err(MpiError::new(rc, "MPI_Comm_free failed").on(h));
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Comm_get_info`: a new, empty info object.
    fn PMPI_Comm_get_info / "MPI_Comm_get_info" (comm: c_int, info_used: *mut c_int) {
        let mut st = lock();
        st.comm(comm)?;
        let h = st.infos.insert(Default::default());
        drop(st);
        out(info_used, h, "info_used")
    }
}

mpi_fn! {
    /// `MPI_Comm_set_info`: hints are accepted and ignored.
    fn PMPI_Comm_set_info / "MPI_Comm_set_info" (comm: c_int, _info: c_int) {
        lock().comm(comm)?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Topo_test`: `MPI_CART`, `MPI_GRAPH`, `MPI_DIST_GRAPH` or `MPI_UNDEFINED`.
    fn PMPI_Topo_test / "MPI_Topo_test" (comm: c_int, status: *mut c_int) {
        lock().comm(comm)?;
        out(status, crate::topo::kind(comm), "status")
    }
}
