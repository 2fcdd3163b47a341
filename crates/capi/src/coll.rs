//! Blocking collectives and communicator creation, built on the engine's point-to-point
//! byte interface.
//!
//! Every communicator has a second engine communicator (its *collective context*) over
//! the same group, so collective traffic never matches user point-to-point messages.
//! Context ids are agreed on by a MAX-allreduce of each member's next free id over the
//! parent's collective context. The collectives themselves run `oxmpi-coll`'s algorithms
//! (chosen by message and communicator size, see `coll_alg.rs`) on the collective context;
//! typed buffers are seen as bytes directly when the datatype is contiguous and packed
//! otherwise.

use crate::backend::{self, EComm};
use crate::coll_alg as alg;
use crate::consts::*;
use crate::datatype::{pack_into, unpack_from, Datatype};
use crate::ffi::{check_count, inp, out, slice_in, CountArg, DispArg, MpiError, MpiResult};
use crate::state::lock;
use oxmpi_coll::base::select;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// Tags of collective messages (within a collective context).
mod tag {
    pub const BARRIER: i32 = 1;
    pub const BCAST: i32 = 2;
    pub const ALLGATHER: i32 = 6;
}

/// The collective view of a communicator.
struct Coll {
    eng: &'static oxmpi_engine::Engine,
    ctx: EComm,
    rank: i32,
    size: i32,
    comm: c_int,
}

impl Coll {
    fn wire(&self) -> backend::Wire {
        backend::Wire {
            eng: self.eng,
            ctx: self.ctx,
            comm: self.comm,
        }
    }
    /// The `oxmpi-coll` view (no engine call: rank and size are ours already).
    fn alg(&self) -> oxmpi_coll::CollComm {
        oxmpi_coll::CollComm::on_context_known(self.eng, self.ctx, self.ctx, self.rank, self.size)
    }
}

/// [`coll`] and a committed datatype under one lock acquisition.
fn coll_dt(comm: c_int, datatype: c_int) -> MpiResult<(Coll, Arc<Datatype>)> {
    let st = lock();
    st.check_active()?;
    let c = st.comm(comm)?;
    let coll = Coll {
        eng: backend::engine()?,
        ctx: c.coll,
        rank: c.rank,
        size: c.size,
        comm,
    };
    let dt = st.dtype_committed(datatype).map_err(|e| e.on(comm))?;
    Ok((coll, dt))
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
        self.wire().isend(data, dest, tag)
    }
    fn irecv(&self, buf: &mut [u8], src: i32, tag: i32) -> MpiResult<backend::EReq> {
        self.wire().irecv(buf, src, tag)
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

fn dtype(h: c_int, comm: c_int) -> MpiResult<Arc<Datatype>> {
    lock().dtype_committed(h).map_err(|e| e.on(comm))
}

/// Bytes of `count` items of the predefined basic datatype `t` (contiguous from offset 0),
/// from the lock-free size cache (`datatype::predefined_size`): the small collectives' fast
/// paths need no datatype reference. `None` for other types and negative counts.
#[inline]
pub(crate) fn basic_bytes(count: i64, t: c_int) -> Option<usize> {
    usize::try_from(count)
        .ok()?
        .checked_mul(crate::datatype::predefined_size(t)?)
}

mpi_fn! {
    /// `MPI_Barrier`.
    fn PMPI_Barrier / "MPI_Barrier" (comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::barrier(&l); }
        crate::coll_alg::barrier(&coll(comm)?.alg(), comm)
    }
}

mpi_fn_c! {
    /// `MPI_Bcast`.
    fn PMPI_Bcast / "MPI_Bcast", PMPI_Bcast_c / "MPI_Bcast_c" (buffer: *mut c_void, count: Count, datatype: c_int, root: c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::bcast(&l, buffer, i64::from(count), datatype, root); }
        // A predefined basic type: the user's bytes, with no datatype reference taken.
        if let Some(len) = basic_bytes(count.into(), datatype).filter(|&n| n == 0 || !buffer.is_null()) {
            let c = coll(comm)?;
            c.check_root(root)?;
            // SAFETY: MPI contract: `buffer` holds (root) or has room for `count` items of
            // the type, `len` contiguous bytes from its start (checked non-NULL if any).
            let bytes: &mut [u8] = if len == 0 { &mut [] } else { unsafe { std::slice::from_raw_parts_mut(buffer.cast::<u8>(), len) } };
            return oxmpi_coll::base::select::bcast(&c.alg(), bytes, root).map_err(alg::err(comm));
        }
        let (c, dt) = coll_dt(comm, datatype)?;
        c.check_root(root)?;
        let n = check_count(count).map_err(|e| e.on(comm))?;
        // SAFETY: MPI contract: `buffer` holds/has room for `count` items of `datatype`.
        unsafe { crate::coll_alg::bcast(&c.alg(), comm, buffer, n, &dt, root) }
    }
}

mpi_fn_c! {
    /// `MPI_Reduce`.
    fn PMPI_Reduce / "MPI_Reduce", PMPI_Reduce_c / "MPI_Reduce_c" (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, root: c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::reduce(&l, alg::ReduceArgs { sendbuf, recvbuf, count: i64::from(count), datatype, op, comm }, root); }
        // A predefined basic type and op: no datatype reference (one lock acquisition).
        if let Some(b) = alg::BasicOp::of(datatype, op) {
            let c = coll(comm)?;
            c.check_root(root)?;
            let n = check_count(count).map_err(|e| e.on(comm))?;
            // SAFETY: MPI contract of MPI_Reduce for the buffers.
            if let Some(r) = unsafe { alg::reduce_basic(&c.alg(), comm, b, (sendbuf, recvbuf, n), root) } {
                return r;
            }
        }
        let (c, dt) = coll_dt(comm, datatype)?;
        c.check_root(root)?;
        let n = check_count(count).map_err(|e| e.on(comm))?;
        let r = alg::Reduction { sendbuf, recvbuf, count: n, dt: &dt, dth: datatype, op };
        // SAFETY: MPI contract of MPI_Reduce for the buffers.
        unsafe { alg::reduce(&c.alg(), comm, &r, root) }
    }
}

mpi_fn_c! {
    /// `MPI_Allreduce`.
    fn PMPI_Allreduce / "MPI_Allreduce", PMPI_Allreduce_c / "MPI_Allreduce_c" (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::allreduce(&l, alg::ReduceArgs { sendbuf, recvbuf, count: i64::from(count), datatype, op, comm }); }
        // A predefined basic type and op: no datatype reference (one lock acquisition).
        if let Some(b) = alg::BasicOp::of(datatype, op) {
            let c = coll(comm)?;
            let n = check_count(count).map_err(|e| e.on(comm))?;
            // SAFETY: MPI contract of MPI_Allreduce for the buffers.
            if let Some(r) = unsafe { alg::allreduce_basic(&c.alg(), comm, b, (sendbuf, recvbuf, n)) } {
                return r;
            }
        }
        let (c, dt) = coll_dt(comm, datatype)?;
        let n = check_count(count).map_err(|e| e.on(comm))?;
        let r = alg::Reduction { sendbuf, recvbuf, count: n, dt: &dt, dth: datatype, op };
        // SAFETY: MPI contract of MPI_Allreduce for the buffers.
        unsafe { alg::allreduce(&c.alg(), comm, &r) }
    }
}

/// Shared body of Scan (`exclusive = false`) and Exscan: recursive doubling in
/// `oxmpi-coll` on packed items.
fn scan(r: alg::ReduceArgs<i64>, exclusive: bool) -> MpiResult {
    let (sendbuf, recvbuf, comm) = (r.sendbuf, r.recvbuf, r.comm);
    let (count, datatype, op) = (r.count, r.datatype, r.op);
    let c = coll(comm)?;
    let n = check_count(count).map_err(|e| e.on(comm))?;
    let dt = dtype(datatype, comm)?;
    // Reject undefined (op, type) pairs on every rank before any message moves.
    let red = alg::Reducer::new(&dt, datatype, op).map_err(|e| e.on(comm))?;
    let a = c.alg();
    let in_place = alg::is_in_place(sendbuf);
    alg::check_buf(recvbuf, &dt, n, comm)?;
    if !in_place {
        alg::check_buf(sendbuf, &dt, n, comm)?;
    }
    let f = |x: &[u8], y: &mut [u8]| red.apply(x, y);
    let (elem, commutative) = (red.elem(), red.commutative());
    // SAFETY: MPI contract: recvbuf has room for `n` items (in place it holds our input).
    if let Some(out) = unsafe { alg::contig(&dt, n, recvbuf) } {
        // Contiguous: the user's memory itself.
        let send = if in_place {
            Some(None)
        } else {
            // SAFETY: MPI contract: sendbuf holds `n` items, apart from recvbuf.
            unsafe { alg::contig(&dt, n, sendbuf.cast_mut()) }.map(|s| Some(&*s))
        };
        if let Some(send) = send {
            return oxmpi_coll::base::select::scan(&a, send, out, exclusive, &f, elem, commutative)
                .map_err(alg::err(comm));
        }
    }
    // Packed items in pooled buffers (a fresh mapping of a large one costs a page fault per
    // page, more than the packing).
    if exclusive {
        // SAFETY: MPI contract: recvbuf has room for `n` items; in place it holds our input.
        let mut out = unsafe { alg::Blocks::new(&dt, recvbuf, vec![(n, 0)], |_| in_place) };
        let send = if in_place {
            alg::SendBytes::copy_of(out.bytes())
        } else {
            // SAFETY: MPI contract: sendbuf holds `n` items.
            unsafe { alg::SendBytes::new(&dt, n, sendbuf) }
        };
        alg::with_op(&red, |o| select::exscan(&a, send.bytes(), out.bytes(), o))
            .map_err(alg::err(comm))?;
        if c.rank > 0 {
            out.store(|_| true);
        }
    } else {
        // Our input packed straight into the buffer that becomes the result.
        // SAFETY: MPI contract: recvbuf has room for `n` items (in place it holds our
        // input); sendbuf holds our `n` items, apart from recvbuf.
        let mut out = unsafe {
            if in_place {
                alg::Blocks::new(&dt, recvbuf, vec![(n, 0)], |_| true)
            } else {
                alg::Blocks::from_source(&dt, recvbuf, vec![(n, 0)], sendbuf)
            }
        };
        alg::with_op(&red, |o| select::scan_packed(&a, out.bytes(), o)).map_err(alg::err(comm))?;
        out.store(|_| true);
    }
    Ok(())
}

mpi_fn_c! {
    /// `MPI_Scan`.
    fn PMPI_Scan / "MPI_Scan", PMPI_Scan_c / "MPI_Scan_c" (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int) {
        crate::intercomm::require_intra(comm, "MPI_Scan")?;
        scan(alg::ReduceArgs { sendbuf, recvbuf, count: count.into(), datatype, op, comm }, false)
    }
}

mpi_fn_c! {
    /// `MPI_Exscan` (the result on rank 0 is undefined and left untouched).
    fn PMPI_Exscan / "MPI_Exscan", PMPI_Exscan_c / "MPI_Exscan_c" (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int) {
        crate::intercomm::require_intra(comm, "MPI_Exscan")?;
        scan(alg::ReduceArgs { sendbuf, recvbuf, count: count.into(), datatype, op, comm }, true)
    }
}

/// Per-rank (count, displacement) pairs of a v-collective.
fn layout<C: CountArg, D: DispArg>(
    c: &Coll,
    counts: *const C,
    displs: *const D,
) -> MpiResult<Vec<(usize, isize)>> {
    let n = c.size as usize;
    let cs = slice_in(counts, n, "counts")?;
    let ds = slice_in(displs, n, "displs")?;
    cs.iter()
        .zip(ds)
        .map(|(&k, &d)| Ok((check_count(k)?, d.aint())))
        .collect::<MpiResult<Vec<_>>>()
        .map_err(|e| e.on(c.comm))
}

/// Gather(v) body: `slots[i]` = (count, displacement in items) of rank i at the root;
/// `regular` selects `oxmpi-coll`'s gather (binomial tree for small blocks) over gatherv.
#[allow(clippy::too_many_arguments)]
fn gatherv(
    c: &Coll,
    sendbuf: *const c_void,
    scount: usize,
    sdt: Option<Arc<Datatype>>,
    recvbuf: *mut c_void,
    rdt: Option<&Datatype>,
    slots: Vec<(usize, isize)>,
    root: i32,
    regular: bool,
) -> MpiResult {
    let a = c.alg();
    if c.rank != root {
        let sdt = sdt.expect("send type checked");
        // SAFETY: MPI contract: sendbuf holds `scount` items.
        let send = unsafe { alg::SendBytes::new(&sdt, scount, sendbuf) };
        let r = if regular {
            let b = send.bytes().len();
            select::gather(&a, Some(send.bytes()), &mut [], b, root)
        } else {
            select::gatherv(&a, Some(send.bytes()), &mut [], (&[], &[]), root)
        };
        return r.map_err(alg::err(c.comm));
    }
    let rdt = rdt.expect("receive type checked");
    let me = root as usize;
    let in_place = alg::is_in_place(sendbuf);
    // SAFETY: MPI contract: recvbuf has room for every block (in place: holds ours).
    let mut area = unsafe { alg::Blocks::new(rdt, recvbuf, slots, |i| in_place && i == me) };
    if regular {
        // In place, our block is already in `area` (no copy).
        let b = area.counts.first().copied().unwrap_or(0);
        let r = match &sdt {
            Some(sdt) if !in_place => {
                // SAFETY: MPI contract: sendbuf holds `scount` items.
                let send = unsafe { alg::SendBytes::new(sdt, scount, sendbuf) };
                if send.bytes().len() != b {
                    // Still take part (as in place, our block left out): the other
                    // ranks' blocks are on their way, none may be left waiting.
                    let _ = select::gather(&a, None, area.bytes(), b, root);
                    return Err(MpiError::new(
                        MPI_ERR_TRUNCATE,
                        "gather: the root's send size differs from its receive block",
                    )
                    .on(c.comm));
                }
                select::gather(&a, Some(send.bytes()), area.bytes(), b, root)
            }
            _ => select::gather(&a, None, area.bytes(), b, root),
        };
        r.map_err(alg::err(c.comm))?;
        area.store(|i| !(in_place && i == me));
        return Ok(());
    }
    let send = match &sdt {
        // SAFETY: MPI contract: sendbuf holds `scount` items.
        Some(sdt) if !in_place => Some(unsafe { alg::SendBytes::new(sdt, scount, sendbuf) }),
        // In place, our block is already in `area` (no copy).
        _ => None,
    };
    let r = {
        let (counts, displs) = (area.counts.clone(), area.displs.clone());
        let own = send.as_ref().map(alg::SendBytes::bytes);
        select::gatherv(&a, own, area.bytes(), (&counts, &displs), root)
    };
    r.map_err(alg::err(c.comm))?;
    area.store(|i| !(in_place && i == me));
    Ok(())
}

/// Scatter(v) body (`regular`: `oxmpi-coll`'s scatter, binomial for small blocks).
#[allow(clippy::too_many_arguments)]
fn scatterv(
    c: &Coll,
    sendbuf: *const c_void,
    sdt: Option<&Datatype>,
    slots: Vec<(usize, isize)>,
    recvbuf: *mut c_void,
    rcount: usize,
    rdt: Option<Arc<Datatype>>,
    root: i32,
    regular: bool,
) -> MpiResult {
    let a = c.alg();
    if c.rank != root {
        let rdt = rdt.expect("receive type checked");
        // SAFETY: MPI contract: recvbuf has room for `rcount` items.
        let mut out = unsafe { alg::Blocks::new(&rdt, recvbuf, vec![(rcount, 0)], |_| false) };
        let r = if regular {
            let b = out.bytes().len();
            select::scatter(&a, &[], Some(out.bytes()), b, root)
        } else {
            select::scatterv(&a, (&[], &[], &[]), Some(out.bytes()), root)
        };
        r.map_err(alg::err(c.comm))?;
        out.store(|_| true);
        return Ok(());
    }
    let sdt = sdt.expect("send type checked");
    let me = root as usize;
    // SAFETY: MPI contract: sendbuf holds every block (read only: `store` is never called).
    let mut src = unsafe { alg::Blocks::new(sdt, sendbuf.cast_mut(), slots, |_| true) };
    let (counts, displs) = (src.counts.clone(), src.displs.clone());
    let mine = counts[me];
    let in_place = alg::is_in_place(recvbuf);
    if in_place {
        // Our block stays where it is: nothing to receive or copy.
        let r = if regular {
            select::scatter(&a, src.bytes(), None, mine, root)
        } else {
            select::scatterv(&a, (src.bytes(), &counts, &displs), None, root)
        };
        return r.map_err(alg::err(c.comm));
    }
    let mut scratch;
    let mut out = if in_place {
        scratch = vec![0u8; mine];
        None
    } else {
        scratch = Vec::new();
        let rdt = rdt.as_ref().expect("receive type checked");
        // SAFETY: MPI contract: recvbuf has room for `rcount` items.
        Some(unsafe { alg::Blocks::new(rdt, recvbuf, vec![(rcount, 0)], |_| false) })
    };
    let rbytes: &mut [u8] = match &mut out {
        Some(o) => o.bytes(),
        None => &mut scratch,
    };
    let r = if regular {
        if rbytes.len() != mine {
            // Still take part (as in place, our block left out): every other rank waits
            // for its block.
            let _ = select::scatter(&a, src.bytes(), None, mine, root);
            return Err(MpiError::new(
                MPI_ERR_TRUNCATE,
                "scatter: the root's receive size differs from its send block",
            )
            .on(c.comm));
        }
        select::scatter(&a, src.bytes(), Some(rbytes), mine, root)
    } else {
        select::scatterv(&a, (src.bytes(), &counts, &displs), Some(rbytes), root)
    };
    r.map_err(alg::err(c.comm))?;
    if let Some(o) = out {
        o.store(|_| true);
    }
    Ok(())
}

/// A send (buffer, count, datatype handle) triple as passed.
type SendArgs = (*const c_void, i64, c_int);
/// A receive (buffer, count, datatype handle) triple as passed.
type RecvArgs = (*mut c_void, i64, c_int);

/// Gather of predefined basic types on the user's buffers (sizes from the lock-free cache,
/// `basic_bytes`: no datatype reference, no block list). `None`: the general path decides
/// (other types, NULL buffers, empty blocks, differing sizes; it also reports the errors).
/// The receive arguments are only looked at on the root, as MPI says.
fn gather_fast(
    c: &Coll,
    (sendbuf, sendcount, sendtype): SendArgs,
    (recvbuf, recvcount, recvtype): RecvArgs,
    root: i32,
) -> Option<MpiResult> {
    let at_root = c.rank == root;
    let in_place = alg::is_in_place(sendbuf);
    let b = if in_place {
        if !at_root {
            return None;
        }
        basic_bytes(recvcount, recvtype)?
    } else {
        basic_bytes(sendcount, sendtype)?
    };
    if b == 0
        || (!in_place && sendbuf.is_null())
        || (at_root && (recvbuf.is_null() || basic_bytes(recvcount, recvtype)? != b))
    {
        return None;
    }
    let n = c.size as usize;
    // SAFETY: MPI contract: sendbuf holds one block of `b` bytes (a predefined basic type is
    // contiguous from offset 0); at the root recvbuf has room for `n` blocks (in place it
    // holds ours, which is then not read from elsewhere).
    let (send, recv): (Option<&[u8]>, &mut [u8]) = unsafe {
        (
            (!in_place).then(|| std::slice::from_raw_parts(sendbuf.cast::<u8>(), b)),
            if at_root {
                std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), n * b)
            } else {
                &mut []
            },
        )
    };
    Some(select::gather(&c.alg(), send, recv, b, root).map_err(alg::err(c.comm)))
}

/// Scatter of predefined basic types on the user's buffers (see [`gather_fast`]); the send
/// arguments are only looked at on the root.
fn scatter_fast(
    c: &Coll,
    send: SendArgs,
    (recvbuf, recvcount, recvtype): RecvArgs,
    root: i32,
) -> Option<MpiResult> {
    let (sendbuf, sendcount, sendtype) = send;
    let in_place = alg::is_in_place(recvbuf);
    let at_root = c.rank == root;
    if in_place && !at_root {
        return None;
    }
    let b = if at_root {
        basic_bytes(sendcount, sendtype)?
    } else {
        basic_bytes(recvcount, recvtype)?
    };
    if b == 0
        || (at_root && sendbuf.is_null())
        || (!in_place && (recvbuf.is_null() || basic_bytes(recvcount, recvtype)? != b))
    {
        return None;
    }
    let n = c.size as usize;
    // SAFETY: MPI contract: at the root sendbuf holds `n` blocks of `b` bytes (contiguous
    // from offset 0); recvbuf (unless in place) has room for one, not overlapping them.
    let (send, recv): (&[u8], Option<&mut [u8]>) = unsafe {
        (
            if at_root {
                std::slice::from_raw_parts(sendbuf.cast::<u8>(), n * b)
            } else {
                &[]
            },
            (!in_place).then(|| std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), b)),
        )
    };
    Some(select::scatter(&c.alg(), send, recv, b, root).map_err(alg::err(c.comm)))
}

/// Largest communicator whose scatterv goes by [`scatterv_fast`] (larger ones have no
/// shared-memory segment anyway).
const FAST_V_MAX: usize = 64;

/// Scatterv of predefined basic types on the user's buffers (see [`gather_fast`]): the
/// root turns the counts and displacements into byte lengths and offsets ([`byte_blocks`]), the
/// others take their block as bytes, without a datatype reference or a block list. `None`:
/// the general path decides (other types, NULL buffers, negative displacements, more than
/// [`FAST_V_MAX`] ranks; it also reports the errors). The send arguments are only looked at
/// on the root.
fn scatterv_fast<C: CountArg, D: DispArg>(
    c: &Coll,
    (sendbuf, sendcounts, displs, sendtype): (*const c_void, *const C, *const D, c_int),
    (recvbuf, recvcount, recvtype): RecvArgs,
    root: i32,
) -> Option<MpiResult> {
    let at_root = c.rank == root;
    let in_place = alg::is_in_place(recvbuf);
    let n = c.size as usize;
    if (in_place && !at_root) || (!in_place && recvbuf.is_null()) || n > FAST_V_MAX {
        return None;
    }
    let recv = if in_place {
        None
    } else {
        let b = basic_bytes(recvcount, recvtype)?;
        // SAFETY: MPI contract: recvbuf (not NULL) has room for `recvcount` items of a
        // predefined basic type, contiguous from offset 0, apart from the send buffer.
        Some(unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), b) })
    };
    if !at_root {
        let r = select::scatterv(&c.alg(), (&[], &[], &[]), recv, root);
        return Some(r.map_err(alg::err(c.comm)));
    }
    let size = crate::datatype::predefined_size(sendtype)?;
    if sendbuf.is_null() {
        return None;
    }
    let (mut counts, mut offs) = (Words::zeros(n), Words::zeros(n));
    let end = byte_blocks((sendcounts, displs), size, (counts.as_mut(), offs.as_mut()))?;
    // SAFETY: MPI contract: sendbuf holds every block, `counts[i]` bytes at `offs[i]` (a
    // predefined basic type is contiguous), so `end` bytes from it; read only.
    let send = unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), end) };
    let r = select::scatterv(&c.alg(), (send, &counts, &offs), recv, root);
    Some(r.map_err(alg::err(c.comm)))
}

/// Gatherv of predefined basic types on the user's buffers (see [`gather_fast`]), as
/// [`scatterv_fast`] the other way: the root turns the counts and displacements into byte
/// lengths and offsets ([`byte_blocks`]), the others pass their block as bytes, without a
/// datatype reference, a block list or copies of the counts. `None`: the general path
/// decides (other types, NULL buffers, negative displacements, more than [`FAST_V_MAX`]
/// ranks; it also reports the errors). The receive arguments are only looked at on the
/// root.
fn gatherv_fast<C: CountArg, D: DispArg>(
    c: &Coll,
    (sendbuf, sendcount, sendtype): SendArgs,
    (recvbuf, recvcounts, displs, recvtype): (*mut c_void, *const C, *const D, c_int),
    root: i32,
) -> Option<MpiResult> {
    let at_root = c.rank == root;
    let in_place = alg::is_in_place(sendbuf);
    let n = c.size as usize;
    if (in_place && !at_root) || (!in_place && sendbuf.is_null()) || n > FAST_V_MAX {
        return None;
    }
    let send = if in_place {
        None
    } else {
        let b = basic_bytes(sendcount, sendtype)?;
        // SAFETY: MPI contract: sendbuf (not NULL) holds `sendcount` items of a predefined
        // basic type, contiguous from offset 0; read only.
        Some(unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), b) })
    };
    if !at_root {
        let r = select::gatherv(&c.alg(), send, &mut [], (&[], &[]), root);
        return Some(r.map_err(alg::err(c.comm)));
    }
    let size = crate::datatype::predefined_size(recvtype)?;
    if recvbuf.is_null() {
        return None;
    }
    let (mut counts, mut offs) = (Words::zeros(n), Words::zeros(n));
    let end = byte_blocks((recvcounts, displs), size, (counts.as_mut(), offs.as_mut()))?;
    // SAFETY: MPI contract: recvbuf has room for every block, `counts[i]` bytes at `offs[i]`
    // (a predefined basic type is contiguous), so `end` bytes from it, apart from the send
    // buffer (in place it holds our block, which is then not read from elsewhere).
    let recv = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), end) };
    let r = select::gatherv(&c.alg(), send, recv, (&counts, &offs), root);
    Some(r.map_err(alg::err(c.comm)))
}

/// Allgather of predefined basic types on the user's buffers (see [`gather_fast`]).
fn allgather_fast(
    c: &Coll,
    (sendbuf, sendcount, sendtype): SendArgs,
    (recvbuf, recvcount, recvtype): RecvArgs,
) -> Option<MpiResult> {
    let in_place = alg::is_in_place(sendbuf);
    let b = basic_bytes(recvcount, recvtype)?;
    if b == 0
        || recvbuf.is_null()
        || (!in_place && (sendbuf.is_null() || basic_bytes(sendcount, sendtype)? != b))
    {
        return None;
    }
    let (n, me) = (c.size as usize, c.rank as usize);
    let send = (!in_place).then_some(sendbuf);
    // SAFETY: MPI contract: recvbuf has room for `n` blocks of `b` bytes (contiguous from
    // offset 0), sendbuf (unless in place) holds one.
    let (recv, own) = unsafe { own_block(send, b, recvbuf, (me * b, n * b)) };
    Some(select::allgather(&c.alg(), recv, b, own).map_err(alg::err(c.comm)))
}

/// The receive buffer (`end` bytes at `recvbuf`) and our block out of place (`len` bytes
/// at `send`, `None` in place) as the slice the allgather sends it from (see
/// [`select::allgather`]). A send buffer overlapping the receive buffer (erroneous, but it
/// must stay memory safe) is copied to its slot `at` first and the block counts as in place.
///
/// # Safety
/// `recvbuf` is valid for `end` bytes and `send` (when given) for `len` bytes, both for
/// `'a`, and nothing else accesses them meanwhile; `at + len <= end`.
unsafe fn own_block<'a>(
    send: Option<*const c_void>,
    len: usize,
    recvbuf: *mut c_void,
    (at, end): (usize, usize),
) -> (&'a mut [u8], Option<&'a [u8]>) {
    let (r, s) = (recvbuf as usize, send.map_or(0, |s| s as usize));
    let apart = s + len <= r || r + end <= s;
    // SAFETY: the caller's guarantee; the two slices are made only when disjoint, and
    // `copy` allows any overlap.
    unsafe {
        let own = match send {
            Some(s) if apart => Some(std::slice::from_raw_parts(s.cast::<u8>(), len)),
            Some(s) => {
                std::ptr::copy(s.cast::<u8>(), recvbuf.cast::<u8>().add(at), len);
                None
            }
            None => None,
        };
        (
            std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), end),
            own,
        )
    }
}

mpi_fn_c! {
    /// `MPI_Gather`.
    fn PMPI_Gather / "MPI_Gather", PMPI_Gather_c / "MPI_Gather_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::gatherv(&l, crate::intercoll::SendSpec { buf: sendbuf, count: i64::from(sendcount), datatype: sendtype }, crate::intercoll::Laid { buf: recvbuf, layout: crate::intercoll::Layout::Uniform(i64::from(recvcount)), datatype: recvtype }, root); }
        let c = coll(comm)?;
        c.check_root(root)?;
        if let Some(r) = gather_fast(&c, (sendbuf, sendcount.into(), sendtype), (recvbuf, recvcount.into(), recvtype), root) {
            return r;
        }
        let inplace = alg::is_in_place(sendbuf) && c.rank == root;
        let sdt = if inplace { None } else { Some(dtype(sendtype, comm)?) };
        let sc = if inplace { 0 } else { check_count(sendcount).map_err(|e| e.on(comm))? };
        let rdt = if c.rank == root { Some(dtype(recvtype, comm)?) } else { None };
        let rc = if c.rank == root { check_count(recvcount).map_err(|e| e.on(comm))? } else { 0 };
        let slots = if c.rank == root { alg::regular(c.size as usize, rc) } else { vec![] };
        gatherv(&c, sendbuf, sc, sdt, recvbuf, rdt.as_deref(), slots, root, true)
    }
}

mpi_fn_c! {
    /// `MPI_Gatherv`.
    fn PMPI_Gatherv / "MPI_Gatherv", PMPI_Gatherv_c / "MPI_Gatherv_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Disp, recvtype: c_int, root: c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::gatherv(&l, crate::intercoll::SendSpec { buf: sendbuf, count: i64::from(sendcount), datatype: sendtype }, crate::intercoll::Laid { buf: recvbuf, layout: crate::intercoll::Layout::Listed(crate::intercoll::Counts::of(recvcounts), crate::intercoll::Displs::of(displs)), datatype: recvtype }, root); }
        let c = coll(comm)?;
        c.check_root(root)?;
        if let Some(r) = gatherv_fast(&c, (sendbuf, sendcount.into(), sendtype), (recvbuf, recvcounts, displs, recvtype), root) {
            return r;
        }
        let inplace = alg::is_in_place(sendbuf) && c.rank == root;
        let sdt = if inplace { None } else { Some(dtype(sendtype, comm)?) };
        let sc = if inplace { 0 } else { check_count(sendcount).map_err(|e| e.on(comm))? };
        let (rdt, slots) = if c.rank == root { (Some(dtype(recvtype, comm)?), layout(&c, recvcounts, displs)?) } else { (None, vec![]) };
        gatherv(&c, sendbuf, sc, sdt, recvbuf, rdt.as_deref(), slots, root, false)
    }
}

mpi_fn_c! {
    /// `MPI_Scatter`.
    fn PMPI_Scatter / "MPI_Scatter", PMPI_Scatter_c / "MPI_Scatter_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::scatterv(&l, crate::intercoll::Laid { buf: sendbuf, layout: crate::intercoll::Layout::Uniform(i64::from(sendcount)), datatype: sendtype }, crate::intercoll::RecvSpec { buf: recvbuf, count: i64::from(recvcount), datatype: recvtype }, root); }
        let c = coll(comm)?;
        c.check_root(root)?;
        if let Some(r) = scatter_fast(&c, (sendbuf, sendcount.into(), sendtype), (recvbuf, recvcount.into(), recvtype), root) {
            return r;
        }
        let inplace = alg::is_in_place(recvbuf) && c.rank == root;
        let rdt = if inplace { None } else { Some(dtype(recvtype, comm)?) };
        let rc = if inplace { 0 } else { check_count(recvcount).map_err(|e| e.on(comm))? };
        let sdt = if c.rank == root { Some(dtype(sendtype, comm)?) } else { None };
        let sc = if c.rank == root { check_count(sendcount).map_err(|e| e.on(comm))? } else { 0 };
        let slots = if c.rank == root { alg::regular(c.size as usize, sc) } else { vec![] };
        scatterv(&c, sendbuf, sdt.as_deref(), slots, recvbuf, rc, rdt, root, true)
    }
}

mpi_fn_c! {
    /// `MPI_Scatterv`.
    fn PMPI_Scatterv / "MPI_Scatterv", PMPI_Scatterv_c / "MPI_Scatterv_c" (sendbuf: *const c_void, sendcounts: *const Count, displs: *const Disp, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::scatterv(&l, crate::intercoll::Laid { buf: sendbuf, layout: crate::intercoll::Layout::Listed(crate::intercoll::Counts::of(sendcounts), crate::intercoll::Displs::of(displs)), datatype: sendtype }, crate::intercoll::RecvSpec { buf: recvbuf, count: i64::from(recvcount), datatype: recvtype }, root); }
        let c = coll(comm)?;
        c.check_root(root)?;
        if let Some(r) = scatterv_fast(&c, (sendbuf, sendcounts, displs, sendtype), (recvbuf, recvcount.into(), recvtype), root) {
            return r;
        }
        let inplace = alg::is_in_place(recvbuf) && c.rank == root;
        let rdt = if inplace { None } else { Some(dtype(recvtype, comm)?) };
        let rc = if inplace { 0 } else { check_count(recvcount).map_err(|e| e.on(comm))? };
        let (sdt, slots) = if c.rank == root { (Some(dtype(sendtype, comm)?), layout(&c, sendcounts, displs)?) } else { (None, vec![]) };
        scatterv(&c, sendbuf, sdt.as_deref(), slots, recvbuf, rc, rdt, root, false)
    }
}

/// Allgather(v) body: our block goes into its slot, then `oxmpi-coll` fills the others
/// (recursive doubling or ring for regular blocks, ring for v).
#[allow(clippy::too_many_arguments)]
fn allgatherv(
    c: &Coll,
    sendbuf: *const c_void,
    scount: usize,
    sdt: Option<Arc<Datatype>>,
    recvbuf: *mut c_void,
    rdt: &Datatype,
    slots: Vec<(usize, isize)>,
    regular: bool,
) -> MpiResult {
    let a = c.alg();
    let me = c.rank as usize;
    let in_place = sdt.is_none();
    // SAFETY: MPI contract: recvbuf has room for every block (in place: holds ours).
    let mut area = unsafe { alg::Blocks::new(rdt, recvbuf, slots, |i| in_place && i == me) };
    if let Some(sdt) = &sdt {
        // SAFETY: MPI contract: sendbuf holds `scount` items.
        let send = unsafe { alg::SendBytes::new(sdt, scount, sendbuf) };
        let dst = area.block(me);
        if dst.len() != send.bytes().len() {
            return Err(MpiError::new(
                MPI_ERR_TRUNCATE,
                "allgather: send size differs from the receive block",
            )
            .on(c.comm));
        }
        dst.copy_from_slice(send.bytes());
    }
    let (counts, displs) = (area.counts.clone(), area.displs.clone());
    let r = if regular {
        let b = counts.first().copied().unwrap_or(0);
        let len = b * counts.len();
        select::allgather(&a, &mut area.bytes()[..len], b, None)
    } else {
        select::allgatherv(&a, area.bytes(), (&counts, &displs), None)
    };
    r.map_err(alg::err(c.comm))?;
    area.store(|_| true);
    Ok(())
}

/// Allgatherv of predefined basic types on the user's buffers (see [`gather_fast`]): only
/// byte counts and displacements are made. `None`: the general path decides (other
/// types, NULL buffers, negative values, our block's size differing from its count).
fn allgatherv_fast<C: CountArg, D: DispArg>(
    c: &Coll,
    (sendbuf, sendcount, sendtype): SendArgs,
    (recvbuf, recvcounts, displs, recvtype): (*mut c_void, *const C, *const D, c_int),
) -> Option<MpiResult> {
    let in_place = alg::is_in_place(sendbuf);
    let (n, me) = (c.size as usize, c.rank as usize);
    let (mut bc, mut bd) = (Words::zeros(n), Words::zeros(n));
    let end = byte_blocks(
        (recvcounts, displs),
        basic_bytes(1, recvtype)?,
        (bc.as_mut(), bd.as_mut()),
    )?;
    if recvbuf.is_null() || end == 0 {
        return None;
    }
    if !in_place && (sendbuf.is_null() || basic_bytes(sendcount, sendtype)? != bc[me]) {
        return None;
    }
    let send = (!in_place).then_some(sendbuf);
    // SAFETY: MPI contract: recvbuf has room for every block (predefined basic type:
    // contiguous bytes at their displacements, all within `end` bytes), sendbuf (unless in
    // place) holds our block.
    let (recv, own) = unsafe { own_block(send, bc[me], recvbuf, (bd[me], end)) };
    Some(select::allgatherv(&c.alg(), recv, (&bc, &bd), own).map_err(alg::err(c.comm)))
}

mpi_fn_c! {
    /// `MPI_Allgather`.
    fn PMPI_Allgather / "MPI_Allgather", PMPI_Allgather_c / "MPI_Allgather_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::allgather(&l, crate::intercoll::SendSpec { buf: sendbuf, count: i64::from(sendcount), datatype: sendtype }, crate::intercoll::RecvSpec { buf: recvbuf, count: i64::from(recvcount), datatype: recvtype }); }
        let c = coll(comm)?;
        if let Some(r) = allgather_fast(&c, (sendbuf, sendcount.into(), sendtype), (recvbuf, recvcount.into(), recvtype)) {
            return r;
        }
        let sdt = if alg::is_in_place(sendbuf) { None } else { Some(dtype(sendtype, comm)?) };
        let sc = if sdt.is_some() { check_count(sendcount).map_err(|e| e.on(comm))? } else { 0 };
        let rdt = dtype(recvtype, comm)?;
        let rc = check_count(recvcount).map_err(|e| e.on(comm))?;
        let slots = alg::regular(c.size as usize, rc);
        allgatherv(&c, sendbuf, sc, sdt, recvbuf, &rdt, slots, true)
    }
}

mpi_fn_c! {
    /// `MPI_Allgatherv`.
    fn PMPI_Allgatherv / "MPI_Allgatherv", PMPI_Allgatherv_c / "MPI_Allgatherv_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Disp, recvtype: c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::allgatherv_c(&l, crate::intercoll::SendSpec { buf: sendbuf, count: i64::from(sendcount), datatype: sendtype }, crate::intercoll::RecvV { buf: recvbuf, counts: crate::intercoll::Counts::of(recvcounts), displs: crate::intercoll::Displs::of(displs), datatype: recvtype }); }
        let c = coll(comm)?;
        if let Some(r) = allgatherv_fast(&c, (sendbuf, sendcount.into(), sendtype), (recvbuf, recvcounts, displs, recvtype)) {
            return r;
        }
        let sdt = if alg::is_in_place(sendbuf) { None } else { Some(dtype(sendtype, comm)?) };
        let sc = if sdt.is_some() { check_count(sendcount).map_err(|e| e.on(comm))? } else { 0 };
        let rdt = dtype(recvtype, comm)?;
        let slots = layout(&c, recvcounts, displs)?;
        allgatherv(&c, sendbuf, sc, sdt, recvbuf, &rdt, slots, false)
    }
}

/// A send side of alltoall(v): the datatype and per-peer (count, displacement) slots.
type SendSide = (Arc<Datatype>, Vec<(usize, isize)>);

/// Alltoall(v) body over `oxmpi-coll` (its alltoall for regular blocks, alltoallv
/// otherwise). `send = None`: in place (the data to send is in the receive buffer).
fn alltoallv(
    c: &Coll,
    sendbuf: *const c_void,
    send: Option<SendSide>,
    recvbuf: *mut c_void,
    rdt: &Datatype,
    rslots: Vec<(usize, isize)>,
    regular: bool,
) -> MpiResult {
    let a = c.alg();
    let in_place = send.is_none();
    // SAFETY: MPI contract: recvbuf has room for every block (in place: holds the data).
    let mut out = unsafe { alg::Blocks::new(rdt, recvbuf, rslots, |_| in_place) };
    let uniform = |v: &[usize]| v.iter().all(|&x| x == v[0]);
    // Regular blocks of one size back to back: the alltoall algorithms may move them.
    let regular_block = |counts: &[usize], displs: &[usize]| {
        (regular
            && !counts.is_empty()
            && uniform(counts)
            && displs.iter().enumerate().all(|(i, &d)| d == i * counts[0]))
        .then(|| counts[0])
    };
    let Some((sdt, sslots)) = &send else {
        // In place. The segment needs no temporary; point to point copies what we send
        // first.
        let (counts, displs) = (out.counts.clone(), out.displs.clone());
        let block = regular_block(&counts, &displs);
        select::alltoallv_in_place(&a, out.bytes(), (&counts, &displs), block)
            .map_err(alg::err(c.comm))?;
        out.store(|_| true);
        return Ok(());
    };
    // SAFETY: MPI contract: sendbuf holds every block (read only).
    let mut src = unsafe { alg::Blocks::new(sdt, sendbuf.cast_mut(), sslots.clone(), |_| true) };
    let (scounts, sdispls) = (src.counts.clone(), src.displs.clone());
    let sbytes: &[u8] = src.bytes();
    let (rcounts, rdispls) = (out.counts.clone(), out.displs.clone());
    let r = match regular_block(&rcounts, &rdispls) {
        Some(b) if regular_block(&scounts, &sdispls) == Some(b) => {
            let len = b * rcounts.len();
            select::alltoall(&a, &sbytes[..len], &mut out.bytes()[..len], b)
        }
        _ => select::alltoallv(
            &a,
            sbytes,
            (&scounts, &sdispls),
            out.bytes(),
            (&rcounts, &rdispls),
        ),
    };
    r.map_err(alg::err(c.comm))?;
    out.store(|_| true);
    Ok(())
}

/// Alltoall of at most `oxmpi_coll::sm::DATA` bytes per rank through the communicator's
/// shared-memory segment (`rc` items of `rdt` per block; `sendbuf` may be `MPI_IN_PLACE`).
#[allow(clippy::too_many_arguments)]
fn alltoall_shm(
    a: &oxmpi_coll::CollComm,
    seg: &oxmpi_coll::sm::Seg,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    rc: usize,
    rdt: &Datatype,
    comm: c_int,
) -> MpiResult {
    let n = seg.size();
    let block = rc * rdt.size;
    let total = n * rc;
    alg::check_buf(recvbuf, rdt, total, comm)?;
    let send = if alg::is_in_place(sendbuf) {
        // SAFETY: MPI contract: recvbuf has room for `total` items.
        if let Some(r) = unsafe { alg::contig(rdt, total, recvbuf) } {
            // Contiguous in place: posted from the user's buffer before any block lands.
            select::alltoall_on(a, seg, None, r, block);
            return Ok(());
        }
        // SAFETY: MPI contract: in place, recvbuf holds the data to send.
        alg::SendBytes::Packed(oxmpi_coll::Pooled::from_vec(unsafe {
            alg::pack(rdt, total, recvbuf)
        }))
    } else {
        let sdt = dtype(sendtype, comm)?;
        let sc = check_count(sendcount).map_err(|e| e.on(comm))?;
        alg::check_buf(sendbuf, &sdt, sc * n, comm)?;
        if sc * sdt.size != block {
            mpi_bail!(
                MPI_ERR_TRUNCATE,
                "alltoall: send and receive blocks differ in size ({} and {block} bytes)",
                sc * sdt.size
            );
        }
        // SAFETY: MPI contract: sendbuf holds `n * sc` items of the send type.
        unsafe { alg::SendBytes::new(&sdt, sc * n, sendbuf) }
    };
    // SAFETY: MPI contract: recvbuf has room for `n * rc` items of the receive type.
    match unsafe { alg::contig(rdt, total, recvbuf) } {
        Some(r) if !alg::is_in_place(sendbuf) => {
            select::alltoall_on(a, seg, Some(send.bytes()), r, block)
        }
        _ => {
            let mut r = vec![0u8; n * block];
            select::alltoall_on(a, seg, Some(send.bytes()), &mut r, block);
            // SAFETY: as above.
            unsafe { alg::unpack(rdt, total, recvbuf, &r) };
        }
    }
    Ok(())
}

/// Alltoall of predefined basic types whose blocks fit the shared-memory segment, on the
/// user's buffers: their sizes come from the lock-free cache (`datatype::predefined_size`), so
/// the call takes the library lock once (for the communicator) and no datatype reference.
/// In place (the send arguments ignored, as MPI says) it takes the general path's in-place
/// route, [`oxmpi_coll::sm::Seg::alltoall_in_place`], without its datatype reference.
/// `None`: the general path decides (other types, NULL buffers, larger blocks, no segment;
/// it also reports the errors).
#[allow(clippy::too_many_arguments)]
fn alltoall_fast(
    c: &Coll,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: c_int,
) -> Option<MpiResult> {
    let in_place = alg::is_in_place(sendbuf);
    if (!in_place && sendbuf.is_null()) || recvbuf.is_null() {
        return None;
    }
    let n = c.size as usize;
    let block = basic_bytes(recvcount, recvtype)?;
    if n < 2
        || block == 0
        || (!in_place && basic_bytes(sendcount, sendtype)? != block)
        || n * block > oxmpi_coll::sm::DATA
    {
        return None;
    }
    let a = c.alg();
    let seg = match oxmpi_coll::sm::get(&a, oxmpi_coll::tune::Coll::Alltoall) {
        Ok(Some(seg)) => seg,
        Ok(None) => return None,
        Err(e) => return Some(Err(alg::err(c.comm)(e))),
    };
    if in_place {
        // SAFETY: MPI contract: recvbuf holds the `n` blocks to send and receives `n`
        // blocks of `block` bytes there (a predefined basic type is contiguous from
        // offset 0).
        let buf = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), n * block) };
        select::alltoall_on(&a, &seg, None, buf, block);
        return Some(Ok(()));
    }
    // SAFETY: MPI contract: sendbuf holds `n` blocks and recvbuf has room for `n` blocks
    // of `block` bytes (a predefined basic type is contiguous from offset 0); the two do
    // not overlap (that would be in place).
    let (send, recv) = unsafe {
        (
            std::slice::from_raw_parts(sendbuf.cast::<u8>(), n * block),
            std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), n * block),
        )
    };
    select::alltoall_on(&a, &seg, Some(send), recv, block);
    Some(Ok(()))
}

mpi_fn_c! {
    /// `MPI_Alltoall`.
    fn PMPI_Alltoall / "MPI_Alltoall", PMPI_Alltoall_c / "MPI_Alltoall_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::alltoall(&l, crate::intercoll::SendSpec { buf: sendbuf, count: i64::from(sendcount), datatype: sendtype }, crate::intercoll::RecvSpec { buf: recvbuf, count: i64::from(recvcount), datatype: recvtype }); }
        let c = coll(comm)?;
        if let Some(r) = alltoall_fast(&c, sendbuf, sendcount.into(), sendtype, recvbuf, recvcount.into(), recvtype) {
            return r;
        }
        let n = c.size as usize;
        let rdt = dtype(recvtype, comm)?;
        let rc = check_count(recvcount).map_err(|e| e.on(comm))?;
        let block = rc * rdt.size;
        if n > 1 && block > 0 && n * block <= oxmpi_coll::sm::DATA {
            let a = c.alg();
            if let Some(seg) = oxmpi_coll::sm::get(&a, oxmpi_coll::tune::Coll::Alltoall).map_err(alg::err(comm))? {
                return alltoall_shm(&a, &seg, sendbuf, sendcount.into(), sendtype, recvbuf, rc, &rdt, comm);
            }
        }
        let send = if alg::is_in_place(sendbuf) {
            None
        } else {
            let sdt = dtype(sendtype, comm)?;
            let sc = check_count(sendcount).map_err(|e| e.on(comm))?;
            Some((sdt, alg::regular(n, sc)))
        };
        alltoallv(&c, sendbuf, send, recvbuf, &rdt, alg::regular(n, rc), true)
    }
}

/// Ranks whose block counts and displacements the fast paths keep on the stack.
const INLINE_BLOCKS: usize = 16;

/// One word per rank (byte counts or displacements of a v-collective's blocks): on the
/// stack up to [`INLINE_BLOCKS`] ranks, so that a small collective allocates nothing.
pub(crate) enum Words {
    Stack([usize; INLINE_BLOCKS], usize),
    Heap(Vec<usize>),
}

impl Words {
    /// `n` zero words.
    pub(crate) fn zeros(n: usize) -> Words {
        if n <= INLINE_BLOCKS {
            Words::Stack([0; INLINE_BLOCKS], n)
        } else {
            Words::Heap(vec![0; n])
        }
    }
    pub(crate) fn as_mut(&mut self) -> &mut [usize] {
        match self {
            Words::Stack(a, n) => &mut a[..*n],
            Words::Heap(v) => v,
        }
    }
}

impl std::ops::Deref for Words {
    type Target = [usize];
    fn deref(&self) -> &[usize] {
        match self {
            Words::Stack(a, n) => &a[..*n],
            Words::Heap(v) => v,
        }
    }
}

/// Byte counts and displacements of `n` blocks (into `bc` and `bd`, `n` words each,
/// filled in place: no array is moved) of a predefined basic type of `size` bytes from C
/// arrays; the bytes they span, `None` for a negative count or displacement (the general
/// path reports it).
pub(crate) fn byte_blocks<C: CountArg, D: DispArg>(
    (counts, displs): (*const C, *const D),
    size: usize,
    (bc, bd): (&mut [usize], &mut [usize]),
) -> Option<usize> {
    unit_blocks((counts, displs), (size, size), (bc, bd))
}

/// [`byte_blocks`] with one unit for every block: `size` bytes per item and `dunit` bytes
/// per unit of displacement (the item's size for the v-collectives, 1 for alltoallw's
/// byte displacements).
#[inline(always)]
fn unit_blocks<C: CountArg, D: DispArg>(
    (counts, displs): (*const C, *const D),
    (size, dunit): (usize, usize),
    (bc, bd): (&mut [usize], &mut [usize]),
) -> Option<usize> {
    // One unit for every block: a loop of its own, not [`blocks_by`]'s per-block closure,
    // indexed over the caller's arrays as they are (no `slice_in`, whose error we drop, no
    // iterator chain): the small alltoallv's instruction count (np=2, 4 B: each side's
    // blocks 101 instructions in the chained form).
    let n = bc.len();
    let bd = &mut bd[..n];
    if n > 0 && (counts.is_null() || displs.is_null()) {
        return None;
    }
    let mut end = 0usize;
    for i in 0..n {
        // SAFETY: MPI contract: `counts` and `displs` (non-NULL, checked) hold an entry per
        // rank of the communicator, `n` of them.
        let (k, x) = unsafe { (*counts.add(i), *displs.add(i)) };
        let k = usize::try_from(k.into()).ok()?.checked_mul(size)?;
        let x = usize::try_from(x.aint()).ok()?.checked_mul(dunit)?;
        end = end.max(x.checked_add(k)?);
        bc[i] = k;
        bd[i] = x;
    }
    Some(end)
}

/// [`byte_blocks`] with per-block units: `unit(i)` is the bytes per item of block `i` and
/// per unit of its displacement (`None`: not a predefined basic type, the general path
/// decides).
fn blocks_by<C: CountArg, D: DispArg>(
    (counts, displs): (*const C, *const D),
    unit: impl Fn(usize) -> Option<(usize, usize)>,
    (bc, bd): (&mut [usize], &mut [usize]),
) -> Option<usize> {
    let n = bc.len();
    let cs = slice_in(counts, n, "counts").ok()?;
    let ds = slice_in(displs, n, "displs").ok()?;
    let mut end = 0;
    for (i, (&k, &x)) in cs.iter().zip(ds).enumerate() {
        let (size, dunit) = unit(i)?;
        let k = usize::try_from(k.into()).ok()?.checked_mul(size)?;
        let x = usize::try_from(x.aint()).ok()?.checked_mul(dunit)?;
        end = end.max(x.checked_add(k)?);
        bc[i] = k;
        bd[i] = x;
    }
    Some(end)
}

/// Byte blocks of an alltoallw side whose every type is a predefined basic one
/// (displacements in bytes), from the lock-free size cache; `None` otherwise.
fn w_blocks<C: CountArg, D: DispArg>(
    (counts, displs): (*const C, *const D),
    types: *const c_int,
    (bc, bd): (&mut [usize], &mut [usize]),
) -> Option<usize> {
    let ts = slice_in(types, bc.len(), "types").ok()?;
    // One type for every block (the usual call): one size lookup and the v-collectives'
    // loop, not a lookup per block (np=4, 16 B: 629 instructions a call in the two sides'
    // block making against alltoallv's 317).
    if let Some((&t, rest)) = ts.split_first() {
        if rest.iter().all(|&u| u == t) {
            return unit_blocks((counts, displs), (basic_bytes(1, t)?, 1), (bc, bd));
        }
    }
    blocks_by(
        (counts, displs),
        |i| Some((basic_bytes(1, ts[i])?, 1)),
        (bc, bd),
    )
}

/// Alltoallv of predefined basic types on the user's buffers (see [`gather_fast`]): only
/// byte counts and displacements are made (in place, the receive side's alone). `None`:
/// the general path decides (other types, NULL buffers, negative values).
fn alltoallv_fast<C: CountArg, D: DispArg>(
    c: &Coll,
    (sendbuf, sendcounts, sdispls, sendtype): (*const c_void, *const C, *const D, c_int),
    (recvbuf, recvcounts, rdispls, recvtype): (*mut c_void, *const C, *const D, c_int),
) -> Option<MpiResult> {
    // One size lookup when both sides have the same type (the usual call).
    let rsize = basic_bytes(1, recvtype)?;
    let ssize = if sendtype == recvtype {
        Some(rsize)
    } else {
        basic_bytes(1, sendtype)
    };
    let send = |w: BlockWords<'_>| byte_blocks((sendcounts, sdispls), ssize?, w);
    let recv = |w: BlockWords<'_>| byte_blocks((recvcounts, rdispls), rsize, w);
    alltoall_bytes(c, sendbuf, recvbuf, send, recv)
}

/// Alltoallw whose types are all predefined basic ones, as [`alltoallv_fast`] (the
/// types' sizes from the lock-free cache: no library lock, no datatype references).
fn alltoallw_fast<C: CountArg, D: DispArg>(
    c: &Coll,
    (sendbuf, sendcounts, sdispls, sendtypes): (*const c_void, *const C, *const D, *const c_int),
    (recvbuf, recvcounts, rdispls, recvtypes): (*mut c_void, *const C, *const D, *const c_int),
) -> Option<MpiResult> {
    let send = |w: BlockWords<'_>| w_blocks((sendcounts, sdispls), sendtypes, w);
    let recv = |w: BlockWords<'_>| w_blocks((recvcounts, rdispls), recvtypes, w);
    alltoall_bytes(c, sendbuf, recvbuf, send, recv)
}

/// Where [`blocks_by`] writes a side's byte counts and displacements.
type BlockWords<'a> = (&'a mut [usize], &'a mut [usize]);

/// Alltoallv of byte blocks (`send(w)`, `recv(w)`: write the counts and displacements
/// into `w`, return the bytes they span, `None` when the general path must decide) on the
/// user's buffers. Inlined into each caller, with the two sides' closures: called apart,
/// each side's block making cost a call and its loop's setup again.
#[inline(always)]
fn alltoall_bytes(
    c: &Coll,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    send: impl FnOnce(BlockWords<'_>) -> Option<usize>,
    recv: impl FnOnce(BlockWords<'_>) -> Option<usize>,
) -> Option<MpiResult> {
    let n = c.size as usize;
    // The four word arrays (send and receive counts and displacements) in one: on two ranks
    // 8 words on the stack, not four arrays of `INLINE_BLOCKS` to clear and move.
    let mut pair = [0; 8];
    let mut inline;
    let mut heap;
    let words: &mut [usize] = if n <= 2 {
        &mut pair[..4 * n]
    } else if n <= INLINE_BLOCKS {
        inline = [0; 4 * INLINE_BLOCKS];
        &mut inline[..4 * n]
    } else {
        heap = vec![0; 4 * n];
        &mut heap
    };
    let (r, s) = words.split_at_mut(2 * n);
    let ((rc, rd), (sc, sd)) = (r.split_at_mut(n), s.split_at_mut(n));
    if alg::is_in_place(sendbuf) && !recvbuf.is_null() {
        let rlen = recv((&mut *rc, &mut *rd))?;
        // SAFETY: MPI contract: recvbuf holds every block to send and has room for every
        // block received (predefined basic types: contiguous bytes at their displacements,
        // all within `rlen` bytes).
        let buf = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), rlen) };
        let r = select::alltoallv_in_place(&c.alg(), buf, (rc, rd), None);
        return Some(r.map_err(alg::err(c.comm)));
    }
    if alg::is_in_place(sendbuf) || sendbuf.is_null() || recvbuf.is_null() {
        return None;
    }
    let slen = send((&mut *sc, &mut *sd))?;
    let rlen = recv((&mut *rc, &mut *rd))?;
    // SAFETY: MPI contract: sendbuf holds every send block and recvbuf has room for every
    // receive block (predefined basic types: contiguous bytes from the buffer at their
    // displacements, all within `slen` and `rlen` bytes); the two do not overlap (that
    // would be in place).
    let (send, recv) = unsafe {
        (
            std::slice::from_raw_parts(sendbuf.cast::<u8>(), slen),
            std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), rlen),
        )
    };
    Some(select::alltoallv(&c.alg(), send, (sc, sd), recv, (rc, rd)).map_err(alg::err(c.comm)))
}

mpi_fn_c! {
    /// `MPI_Alltoallv`.
    fn PMPI_Alltoallv / "MPI_Alltoallv", PMPI_Alltoallv_c / "MPI_Alltoallv_c" (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Disp, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Disp, recvtype: c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::alltoallv(&l, crate::intercoll::SendV { buf: sendbuf, counts: crate::intercoll::Counts::of(sendcounts), displs: crate::intercoll::Displs::of(sdispls), datatype: sendtype }, crate::intercoll::RecvV { buf: recvbuf, counts: crate::intercoll::Counts::of(recvcounts), displs: crate::intercoll::Displs::of(rdispls), datatype: recvtype }); }
        let c = coll(comm)?;
        if let Some(r) = alltoallv_fast(&c, (sendbuf, sendcounts, sdispls, sendtype), (recvbuf, recvcounts, rdispls, recvtype)) {
            return r;
        }
        let rdt = dtype(recvtype, comm)?;
        let rslots = layout(&c, recvcounts, rdispls)?;
        let send = if alg::is_in_place(sendbuf) {
            None
        } else {
            Some((dtype(sendtype, comm)?, layout(&c, sendcounts, sdispls)?))
        };
        alltoallv(&c, sendbuf, send, recvbuf, &rdt, rslots, false)
    }
}

/// Alltoallw piece: (type, count, byte offset).
type Piece = (Arc<Datatype>, usize, isize);

fn alltoallw(
    c: &Coll,
    sendbuf: *const c_void,
    send: Option<Vec<Piece>>,
    recvbuf: *mut c_void,
    recv: &[Piece],
) -> MpiResult {
    // Contiguous types everywhere (the common case): the pieces are byte blocks of the
    // user's buffers, moved by the alltoallv path without packing.
    let bytes = |p: &[Piece]| -> Option<Vec<(usize, isize)>> {
        p.iter()
            .map(|(t, k, o)| t.is_contiguous().then_some((t.size * k, o + t.lb)))
            .collect()
    };
    // In place (`send = None`) the receive pieces alone describe the data.
    if let Some(r) = bytes(recv) {
        let s = match send.as_deref() {
            None => Some(None),
            Some(s) => bytes(s).map(Some),
        };
        if let Some(s) = s {
            let byte = dtype(MPI_BYTE, c.comm)?;
            let s = s.map(|s| (byte.clone(), s));
            return alltoallv(c, sendbuf, s, recvbuf, &byte, r, false);
        }
    }
    let a = c.alg();
    let off = |b: *const c_void, o: isize| b.cast::<u8>().wrapping_offset(o).cast::<c_void>();
    // Pieces packed back to back; in place the data to send is in the receive buffer.
    let (sbase, spieces) = match &send {
        Some(s) => (sendbuf, s.as_slice()),
        None => (recvbuf.cast_const(), recv),
    };
    let mut sbytes = Vec::new();
    let (mut scounts, mut sdispls) = (Vec::new(), Vec::new());
    for (t, k, o) in spieces {
        sdispls.push(sbytes.len());
        // SAFETY: MPI contract: each piece holds `k` items of its type.
        unsafe { pack_into(t, *k, off(sbase, *o).cast(), &mut sbytes) };
        scounts.push(sbytes.len() - sdispls[sdispls.len() - 1]);
    }
    let (mut rcounts, mut rdispls) = (Vec::new(), Vec::new());
    let mut total = 0;
    for (t, k, _) in recv {
        rdispls.push(total);
        rcounts.push(t.size * k);
        total += t.size * k;
    }
    let mut rbytes = vec![0u8; total];
    select::alltoallv(
        &a,
        &sbytes,
        (&scounts, &sdispls),
        &mut rbytes,
        (&rcounts, &rdispls),
    )
    .map_err(alg::err(c.comm))?;
    for (i, (t, k, o)) in recv.iter().enumerate() {
        let data = &rbytes[rdispls[i]..rdispls[i] + rcounts[i]];
        // SAFETY: MPI contract: each receive piece has room for `k` items of its type.
        unsafe { unpack_from(t, *k, off(recvbuf, *o).cast_mut().cast(), data) };
    }
    Ok(())
}

mpi_fn_c! {
    /// `MPI_Alltoallw` (displacements in bytes).
    fn PMPI_Alltoallw / "MPI_Alltoallw", PMPI_Alltoallw_c / "MPI_Alltoallw_c" (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Disp, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Disp, recvtypes: *const c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::alltoallw(&l, crate::intercoll::SendW { buf: sendbuf, counts: crate::intercoll::Counts::of(sendcounts), displs: crate::intercoll::Displs::of(sdispls), datatype: sendtypes }, crate::intercoll::RecvW { buf: recvbuf, counts: crate::intercoll::Counts::of(recvcounts), displs: crate::intercoll::Displs::of(rdispls), datatype: recvtypes }); }
        let c = coll(comm)?;
        if let Some(r) = alltoallw_fast(&c, (sendbuf, sendcounts, sdispls, sendtypes), (recvbuf, recvcounts, rdispls, recvtypes)) {
            return r;
        }
        let n = c.size as usize;
        let pieces = |counts, displs, types: *const c_int| -> MpiResult<Vec<Piece>> {
            let l = layout(&c, counts, displs)?;
            let t = slice_in(types, n, "types")?;
            // Every type under one acquisition of the library lock.
            let st = lock();
            l.into_iter().zip(t).map(|((k, d), &h)| Ok((st.dtype_committed(h).map_err(|e| e.on(comm))?, k, d))).collect()
        };
        let recv = pieces(recvcounts, rdispls, recvtypes)?;
        let send = if alg::is_in_place(sendbuf) { None } else { Some(pieces(sendcounts, sdispls, sendtypes)?) };
        alltoallw(&c, sendbuf, send, recvbuf, &recv)
    }
}

/// Reduce-scatter body: `oxmpi-coll`'s ring reduce-scatter (commutative ops) or reduce +
/// scatterv, on packed items.
fn reduce_scatter(c: &Coll, dt: &Arc<Datatype>, r: alg::ReduceArgs<&[usize]>) -> MpiResult {
    let (sendbuf, recvbuf, comm) = (r.sendbuf, r.recvbuf, r.comm);
    let (counts, datatype, op) = (r.count, r.datatype, r.op);
    let red = alg::Reducer::new(dt, datatype, op).map_err(|e| e.on(comm))?;
    let a = c.alg();
    let total: usize = counts.iter().sum();
    let contrib = if alg::is_in_place(sendbuf) {
        recvbuf.cast_const()
    } else {
        sendbuf
    };
    alg::check_buf(contrib, dt, total, comm)?;
    let me = c.rank as usize;
    if !alg::is_in_place(sendbuf) {
        alg::check_buf(recvbuf, dt, counts[me], comm)?;
    }
    // A copy (used as scratch), in a pooled buffer (given back when dropped): a fresh mapping of
    // a large one costs a page fault per page.
    let mut full = oxmpi_coll::Pooled::new(total * dt.size);
    full.clear();
    // SAFETY: MPI contract: the contribution holds `total` items.
    unsafe { pack_into(dt, total, contrib.cast(), &mut full) };
    let bytes: Vec<usize> = counts.iter().map(|&k| k * dt.size).collect();
    // SAFETY: MPI contract: recvbuf has room for our `counts[me]` items.
    let mut out = unsafe { alg::Blocks::new(dt, recvbuf, vec![(counts[me], 0)], |_| false) };
    // The segment's paths first, chosen as a rank on its user's contiguous buffers chooses
    // them ([`reduce_scatter_bytes`]): from the vector's bytes, the blocks being equal and
    // the call being in place, never from our datatype's layout, which another rank's
    // (equal type signature) may not share.
    let at: usize = bytes[..me].iter().sum();
    // 0 when the blocks are alike, compared with the vector's length on the segment.
    let mark = oxmpi_coll::counts_mark(counts.iter().copied());
    let vector = (at, bytes[me], total * dt.size);
    if let Some(phased) = reduce_scatter_plan(c, vector.2, mark == 0) {
        let f = |x: &[u8], y: &mut [u8]| red.apply(x, y);
        let op = (&f, red.elem(), red.commutative());
        let in_place = alg::is_in_place(sendbuf);
        match reduce_scatter_seg(
            c,
            (Some(&full[..]), out.bytes(), in_place),
            phased,
            vector,
            (op, mark),
        ) {
            Ok(true) => {
                out.store(|_| true);
                return Ok(());
            }
            Ok(false) => {}
            Err(e) => return Err(alg::err(comm)(e)),
        }
    }
    alg::with_op(&red, |o| {
        select::reduce_scatter(&a, &mut full, &bytes, out.bytes(), o)
    })
    .map_err(alg::err(comm))?;
    out.store(|_| true);
    Ok(())
}

/// Reduce-scatter of a predefined contiguous type whose whole vector fits the
/// shared-memory segment (a buffer, or the nonblocking large region, in phases when the
/// blocks are `equal` and the vector larger than a slot; on two ranks up to 2 MiB by
/// cross-memory copies), on the user's buffers: no packed copy, no scratch, no count
/// vectors. Our block is `mine` items from item `at` of the `total`-item vector. `None`:
/// the general path decides (other types, NULL buffers, larger vectors, no segment: the
/// same on every rank for correct arguments) and reports the errors.
fn reduce_scatter_fast(
    c: &Coll,
    dt: &Arc<Datatype>,
    r: alg::ReduceArgs<()>,
    geom: (usize, usize, usize, usize),
) -> Option<MpiResult> {
    if dt.predefined && !dt.is_contiguous() {
        return reduce_scatter_pairs(c, dt, r, geom);
    }
    if !dt.predefined || !dt.is_contiguous() || dt.lb != 0 {
        return None;
    }
    // (An invalid op fails here as it would on the general path.)
    let red = match alg::Reducer::new(dt, r.datatype, r.op) {
        Ok(red) => red,
        Err(e) => return Some(Err(e.on(r.comm))),
    };
    let f = |x: &[u8], y: &mut [u8]| red.apply(x, y);
    reduce_scatter_bytes(c, r, dt.size, geom, (&f, red.commutative()))
}

/// [`reduce_scatter_fast`] of a predefined basic type with a predefined op
/// ([`alg::BasicOp`]): no datatype reference, no reducer (the caller took the library lock
/// once, for the communicator). `None`: the general path decides.
fn reduce_scatter_basic(
    c: &Coll,
    b: alg::BasicOp,
    r: alg::ReduceArgs<()>,
    geom: (usize, usize, usize, usize),
) -> Option<MpiResult> {
    let f = |x: &[u8], y: &mut [u8]| b.apply(x, y);
    reduce_scatter_bytes(c, r, b.size(), geom, (&f, true))
}

/// The body of [`reduce_scatter_fast`] for a contiguous type of `s` bytes an item (its
/// items at offset 0), reduced by `f` (`inout = in ∘ inout`, commutative or not): on the
/// user's buffers when the vector fits the segment's ways, else `None`. `mark` is the
/// counts' [`oxmpi_coll::counts_mark`] (0: the blocks are alike).
fn reduce_scatter_bytes<F: Fn(&[u8], &mut [u8])>(
    c: &Coll,
    r: alg::ReduceArgs<()>,
    s: usize,
    (at, mine, total, mark): (usize, usize, usize, usize),
    (f, commutative): (&F, bool),
) -> Option<MpiResult> {
    let bytes = total.checked_mul(s)?;
    let phased = reduce_scatter_plan(c, bytes, mark == 0)?;
    let in_place = alg::is_in_place(r.sendbuf);
    if (!in_place && r.sendbuf.is_null()) || (r.recvbuf.is_null() && (in_place || mine > 0)) {
        return None;
    }
    // `n` bytes from `p` (not NULL when `n > 0`, checked above).
    let view = |p: *mut c_void, n: usize| -> &mut [u8] {
        if n == 0 {
            &mut []
        } else {
            // SAFETY: MPI contract: recvbuf has room for our `mine` items (in place: holds
            // the whole vector of `total` items); sendbuf (unless in place) holds `total`
            // items and does not overlap recvbuf (that would be in place); a contiguous
            // type's items are `s` bytes each from the buffer's start.
            unsafe { std::slice::from_raw_parts_mut(p.cast::<u8>(), n) }
        }
    };
    let buf = view(r.recvbuf, if in_place { bytes } else { mine * s });
    let send = (!in_place).then(|| &*view(r.sendbuf.cast_mut(), bytes));
    let vector = (at * s, mine * s, bytes);
    match reduce_scatter_seg(
        c,
        (send, buf, in_place),
        phased,
        vector,
        ((f, s, commutative), mark),
    ) {
        Ok(true) => Some(Ok(())),
        Ok(false) => None,
        Err(e) => Some(Err(alg::err(r.comm)(e))),
    }
}

/// Whether a reduce-scatter of a `bytes`-byte vector (the same on every rank) goes to the
/// segment's ways ([`reduce_scatter_seg`]): `Some(phased)`, in phases through the
/// nonblocking large region or not; `None`: it does not fit them. Small vectors go
/// through the segment's buffers; larger ones on two ranks by cross-memory copies, on more
/// through the segment's nonblocking large region (`equal` blocks of a vector larger than
/// a slot: in phases). Depends only on what every rank agrees on.
fn reduce_scatter_plan(c: &Coll, bytes: usize, equal: bool) -> Option<bool> {
    let small = bytes <= oxmpi_coll::sm::DATA;
    let phased = !small && c.size > 2 && equal && oxmpi_coll::sm::phased_fits(&c.alg(), bytes);
    let fits = small
        || if c.size == 2 {
            bytes <= *oxmpi_coll::sm::REDUCE_SCATTER_PAIR.end()
        } else {
            oxmpi_coll::sm::large_fits(&c.alg(), bytes) || phased
        };
    (bytes > 0 && fits).then_some(phased)
}

/// A reduce-scatter on the segment's ways as [`reduce_scatter_plan`] chose them: our
/// contribution `send` (`None`: in place, it starts `buf`; a packed copy of a
/// non-contiguous one otherwise, `in_place` still the call's), our block (`mine` bytes
/// from byte `at` of the `bytes`-byte vector) into `buf`, folded by `f` on whole items of
/// `elem` bytes. False: nothing done (on every rank alike), for the general path. `mark`:
/// the counts' [`oxmpi_coll::counts_mark`] (phased only when it is 0).
fn reduce_scatter_seg<F: Fn(&[u8], &mut [u8])>(
    c: &Coll,
    (send, buf, in_place): (Option<&[u8]>, &mut [u8], bool),
    phased: bool,
    (at, mine, bytes): (usize, usize, usize),
    ((f, elem, commutative), mark): ((&F, usize, bool), usize),
) -> oxmpi_coll::Result<bool> {
    if phased {
        select::reduce_scatter_phased(&c.alg(), send, buf, (mine, elem), f)
    } else {
        select::reduce_scatter_direct_as(
            &c.alg(),
            send,
            buf,
            (at, mine, bytes),
            (f, commutative),
            (in_place, mark),
        )
    }
}

/// Reduce-scatter of a predefined value-index pair type with a gap (`MPI_DOUBLE_INT`,
/// `MPI_LONG_INT`, `MPI_SHORT_INT`, `MPI_LONG_DOUBLE_INT`) whose packed vector fits a
/// segment buffer: packed on the stack, reduced on the segment as the contiguous types
/// are ([`select::reduce_scatter_direct`]), our block unpacked into `recvbuf`. The general
/// path's pooled copies, count vectors and result blocks cost more than the collective
/// itself at these sizes (np=2, 16 B: 0.63-0.68 us where `MPI_2INT` took 0.53). `None`:
/// the general path decides, as for [`reduce_scatter_fast`].
fn reduce_scatter_pairs(
    c: &Coll,
    dt: &Arc<Datatype>,
    r: alg::ReduceArgs<()>,
    (at, mine, total, mark): (usize, usize, usize, usize),
) -> Option<MpiResult> {
    use std::mem::MaybeUninit;
    const DATA: usize = oxmpi_coll::sm::DATA;
    let s = dt.size;
    let bytes = total.checked_mul(s)?;
    if bytes == 0 || bytes > DATA || at.checked_add(mine)? > total {
        return None;
    }
    let in_place = alg::is_in_place(r.sendbuf);
    let contrib = if in_place {
        r.recvbuf.cast_const()
    } else {
        r.sendbuf
    };
    if contrib.is_null() || (mine > 0 && r.recvbuf.is_null()) {
        return None;
    }
    let red = match alg::Reducer::new(dt, r.datatype, r.op) {
        Ok(red) => red,
        Err(e) => return Some(Err(e.on(r.comm))),
    };
    let mut packed = [MaybeUninit::<u8>::uninit(); DATA];
    // SAFETY: MPI contract: `contrib` holds `total` items of `dt` (in place, the receive
    // buffer holds the whole vector); `packed` has room for their `bytes` packed bytes and
    // is not user memory.
    if !unsafe {
        crate::datatype::pair_copy::<true>(dt, total, contrib.cast(), packed.as_mut_ptr().cast())
    } {
        return None;
    }
    // SAFETY: the copy just wrote the first `bytes` bytes.
    let send = unsafe { std::slice::from_raw_parts(packed.as_ptr().cast::<u8>(), bytes) };
    // Our block of the result, zeroed as far as it goes (not the whole buffer).
    let mut block = [MaybeUninit::<u8>::uninit(); DATA];
    block[..mine * s].fill(MaybeUninit::new(0));
    // SAFETY: its first `mine * s` bytes (at most `bytes`) were just initialised.
    let out = unsafe { std::slice::from_raw_parts_mut(block.as_mut_ptr().cast::<u8>(), mine * s) };
    let f = |x: &[u8], y: &mut [u8]| red.apply(x, y);
    match select::reduce_scatter_direct_as(
        &c.alg(),
        Some(send),
        out,
        (at * s, mine * s, bytes),
        (&f, red.commutative()),
        (false, mark),
    ) {
        Ok(true) => {
            // SAFETY: MPI contract: recvbuf has room for our `mine` items; `out` holds them
            // packed.
            unsafe { unpack_from(dt, mine, r.recvbuf.cast(), out) };
            Some(Ok(()))
        }
        Ok(false) => None,
        Err(e) => Some(Err(alg::err(r.comm)(e))),
    }
}

mpi_fn_c! {
    /// `MPI_Reduce_scatter_block`.
    fn PMPI_Reduce_scatter_block / "MPI_Reduce_scatter_block", PMPI_Reduce_scatter_block_c / "MPI_Reduce_scatter_block_c" (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count, datatype: c_int, op: c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::reduce_scatter_block(&l, alg::ReduceArgs { sendbuf, recvbuf, count: i64::from(recvcount), datatype, op, comm }); }
        let args = alg::ReduceArgs { sendbuf, recvbuf, count: (), datatype, op, comm };
        // A predefined basic type and op: no datatype reference (one lock acquisition).
        if let Some(b) = alg::BasicOp::of(datatype, op) {
            let c = coll(comm)?;
            let (me, n) = (c.rank as usize, c.size as usize);
            let k = check_count(recvcount).map_err(|e| e.on(comm))?;
            if let Some(r) = k.checked_mul(n).and_then(|total| reduce_scatter_basic(&c, b, args, (me * k, k, total, 0))) {
                return r;
            }
        }
        let (c, dt) = coll_dt(comm, datatype)?;
        let (me, n) = (c.rank as usize, c.size as usize);
        let k = check_count(recvcount).map_err(|e| e.on(comm))?;
        if let Some(r) = k.checked_mul(n).and_then(|total| reduce_scatter_fast(&c, &dt, args, (me * k, k, total, 0))) {
            return r;
        }
        reduce_scatter(&c, &dt, args.with_count(&vec![k; n]))
    }
}

mpi_fn_c! {
    /// `MPI_Reduce_scatter`.
    fn PMPI_Reduce_scatter / "MPI_Reduce_scatter", PMPI_Reduce_scatter_c / "MPI_Reduce_scatter_c" (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count, datatype: c_int, op: c_int, comm: c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::reduce_scatter_c(&l, alg::ReduceArgs { sendbuf, recvbuf, count: crate::intercoll::Counts::of(recvcounts), datatype, op, comm }); }
        // A predefined basic type and op: no datatype reference (one lock acquisition).
        let basic = alg::BasicOp::of(datatype, op);
        let (c, dt) = match basic {
            Some(_) => (coll(comm)?, None),
            None => {
                let (c, dt) = coll_dt(comm, datatype)?;
                (c, Some(dt))
            }
        };
        let (me, n) = (c.rank as usize, c.size as usize);
        let raw = slice_in(recvcounts, n, "recvcounts")?;
        // Our block's first item, its items and the vector's (no count vector yet), and
        // whether all blocks are alike.
        let (mut at, mut mine, mut total) = (0usize, 0usize, Some(0usize));
        let equal = raw.iter().all(|&k| k == raw[0]);
        for (i, &k) in raw.iter().enumerate() {
            let k = check_count(k)?;
            if i < me {
                at += k;
            } else if i == me {
                mine = k;
            }
            total = total.and_then(|t| t.checked_add(k));
        }
        // The counts' mark (0 when alike: no cost), compared with the vector's length.
        let mark = if equal { 0 } else { oxmpi_coll::counts_mark(raw.iter().map(|&k| usize::try_from(k).unwrap_or(0))) };
        let args = alg::ReduceArgs { sendbuf, recvbuf, count: (), datatype, op, comm };
        let geom = |total| (at, mine, total, mark);
        if let Some(b) = basic {
            if let Some(r) = total.and_then(|total| reduce_scatter_basic(&c, b, args, geom(total))) {
                return r;
            }
        }
        let dt = match dt {
            Some(dt) => dt,
            None => lock().dtype_committed(datatype).map_err(|e| e.on(comm))?,
        };
        if let Some(r) = total.and_then(|total| reduce_scatter_fast(&c, &dt, args, geom(total))) {
            return r;
        }
        let counts = raw.iter().map(|&k| check_count(k)).collect::<MpiResult<Vec<_>>>()?;
        reduce_scatter(&c, &dt, args.with_count(&counts))
    }
}

// ---- communicator creation ----

mpi_fn! {
    /// `MPI_Comm_dup`.
    fn PMPI_Comm_dup / "MPI_Comm_dup" (comm: c_int, newcomm: *mut c_int) {
        crate::comm::dup(comm, newcomm)
    }
}

mpi_fn! {
    /// `MPI_Comm_dup_with_info` (the info is accepted and ignored).
    fn PMPI_Comm_dup_with_info / "MPI_Comm_dup_with_info" (comm: c_int, _info: c_int, newcomm: *mut c_int) {
        crate::comm::dup(comm, newcomm)
    }
}

mpi_fn! {
    /// `MPI_Comm_split`.
    fn PMPI_Comm_split / "MPI_Comm_split" (comm: c_int, color: c_int, key: c_int, newcomm: *mut c_int) {
        if crate::intercomm::is_inter(comm) { return crate::intercomm::split(comm, color, key, newcomm); }
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
        let ctx = crate::comm::Internal::of(comm)?.agree_ctx()?;
        if color == MPI_UNDEFINED {
            // Not a member: the ids stay taken at the members only.
            lock().ids.release(ctx, 2);
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
        let h = crate::comm::make::make_comm(comm, ctx, group)?;
        out(newcomm, h, "newcomm")
    }
}

/// The info key naming a hardware resource type (`MPI_COMM_TYPE_HW_GUIDED`, MPI 4.0 §7.4.2).
const HW_RESOURCE_TYPE: &str = "mpi_hw_resource_type";
/// The resource type every implementation knows: the processes sharing memory (a node).
const SHARED_MEMORY: &str = "mpi_shared_memory";

/// The split color of this process on its node: the lowest world rank there (the engine's
/// view of nodes: `Engine::node_pid`).
fn node_color(comm: c_int) -> MpiResult<c_int> {
    let e = backend::engine().map_err(|e| e.on(comm))?;
    Ok((0..e.size())
        .find(|&r| e.node_pid(r).is_some())
        .unwrap_or(e.rank()))
}

mpi_fn! {
    /// `MPI_Comm_split_type`: `MPI_COMM_TYPE_SHARED` groups the ranks of one node (as the
    /// engine sees nodes: `Engine::node_pid`; the color is the lowest world rank there).
    /// The MPI 4.x types: `MPI_COMM_TYPE_HW_GUIDED` and `MPI_COMM_TYPE_RESOURCE_GUIDED`
    /// split by the `mpi_hw_resource_type` of `info` (`mpi_shared_memory` is the node;
    /// no info, no key or a type we do not know gives `MPI_COMM_NULL`, as the standard
    /// says); `MPI_COMM_TYPE_HW_UNGUIDED` splits into nodes when that makes smaller groups
    /// than `comm`'s (and sets the key to the type in `info`), otherwise gives
    /// `MPI_COMM_NULL` (there is no finer level known here).
    fn PMPI_Comm_split_type / "MPI_Comm_split_type" (comm: c_int, split_type: c_int, key: c_int, info: c_int, newcomm: *mut c_int) {
        let info_value = |k: &str| -> MpiResult<Option<String>> {
            if info == MPI_INFO_NULL {
                return Ok(None);
            }
            let st = lock();
            let i = st.infos.get(info).ok_or_else(|| MpiError::new(MPI_ERR_INFO, format!("invalid info handle {info:#x}")).on(comm))?;
            Ok(i.entries.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()))
        };
        let color = if split_type == MPI_UNDEFINED {
            MPI_UNDEFINED
        } else if split_type == MPI_COMM_TYPE_SHARED {
            node_color(comm)?
        } else if split_type == MPI_COMM_TYPE_HW_GUIDED || split_type == MPI_COMM_TYPE_RESOURCE_GUIDED {
            match info_value(HW_RESOURCE_TYPE)?.as_deref() {
                Some(SHARED_MEMORY) => node_color(comm)?,
                _ => MPI_UNDEFINED,
            }
        } else if split_type == MPI_COMM_TYPE_HW_UNGUIDED {
            let e = backend::engine().map_err(|e| e.on(comm))?;
            let group = lock().comm(comm)?.group.clone();
            // Every member sees the same answer: nodes are smaller than `comm` unless all
            // of its members share one.
            if group.iter().all(|&r| e.node_pid(r).is_some()) {
                MPI_UNDEFINED
            } else {
                if info != MPI_INFO_NULL {
                    let mut st = lock();
                    let i = st.infos.get_mut(info).ok_or_else(|| MpiError::new(MPI_ERR_INFO, format!("invalid info handle {info:#x}")).on(comm))?;
                    i.entries.retain(|(n, _)| n != HW_RESOURCE_TYPE);
                    i.entries.push((HW_RESOURCE_TYPE.to_string(), SHARED_MEMORY.to_string()));
                }
                node_color(comm)?
            }
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
        if crate::intercomm::is_inter(comm) { return crate::intercomm::create(comm, group, newcomm); }
        coll(comm)?;
        if newcomm.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
        }
        let members = lock().group(group).map_err(|e| e.on(comm))?;
        let ctx = crate::comm::Internal::of(comm)?.agree_ctx()?;
        let me = lock().world_rank();
        if !members.contains(&me) {
            // Not a member: the ids stay taken at the members only.
            lock().ids.release(ctx, 2);
            return out(newcomm, MPI_COMM_NULL, "newcomm");
        }
        let h = crate::comm::make::make_comm(comm, ctx, members)?;
        out(newcomm, h, "newcomm")
    }
}

mpi_fn! {
    /// `MPI_Comm_disconnect`: like `MPI_Comm_free` once every member got here (a barrier,
    /// over both groups of an intercommunicator). Under fault tolerance the members meet in
    /// a fault-tolerant agreement instead, so a failed member (a dead child of
    /// `MPI_Comm_spawn`) cannot hold the others. A failure not acknowledged on it
    /// (`MPIX_Comm_failure_ack`) fails the call with `MPIX_ERR_PROC_FAILED` at every member
    /// alike (the agreement is uniform), leaving the communicator as it was, as
    /// `MPIX_Comm_agree` does.
    fn PMPI_Comm_disconnect / "MPI_Comm_disconnect" (comm: *mut c_int) {
        let h = inp(comm, "comm")?;
        let synced = if backend::engine()?.ft_enabled() {
            crate::ft::disconnect_sync(h)
        } else if let Some(l) = crate::intercomm::Link::of(h)? {
            crate::intercoll::barrier(&l)
        } else {
            coll(h)?.barrier()
        };
        synced?;
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
        out(status, crate::topo::table::kind(comm), "status")
    }
}
