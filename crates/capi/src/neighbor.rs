//! Neighbourhood collectives (`MPI_Neighbor_*`) on Cartesian, graph and distributed graph
//! communicators ([`crate::topo`]).
//!
//! Every block travels as one message on the communicator's collective context
//! (`oxmpi_coll::CollComm::exchange`). Neighbour order follows MPI: for a Cartesian grid,
//! per dimension the neighbour in the negative then the positive direction (`MPI_PROC_NULL`
//! at non-periodic borders: nothing is sent or received there); for a graph, the
//! neighbours as listed; for a distributed graph, sources (incoming) and destinations
//! (outgoing). On a Cartesian grid the messages carry the direction in their tag, so that a
//! rank that is both the negative and the positive neighbour (periodic dimension of size 1
//! or 2) still gets each block into the right slot.
//!
//! The nonblocking forms (`MPI_Ineighbor_*`) build the same exchange as a schedule
//! (`crate::icoll::ineighbor`) that progresses in the background.

use crate::backend::EComm;
use crate::consts::*;
use crate::datatype::Datatype;
use crate::ffi::{check_count, slice_in, DispArg, MpiError, MpiResult};
use crate::state::lock;
use crate::topo::table::{Neighbours, Topo};
use crate::topo::{cart_coords_of, cart_rank_of};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// (incoming, outgoing) neighbours of `comm` as (rank, tag) pairs: computed once per
/// communicator, then shared (`crate::topo::table::neighbours`).
pub(crate) fn neighbours(comm: c_int, rank: i32) -> MpiResult<Arc<Neighbours>> {
    crate::topo::table::neighbours(comm, |t| compute(t, rank)).ok_or_else(|| {
        MpiError::new(
            MPI_ERR_TOPOLOGY,
            "neighbourhood collective on a communicator without a topology",
        )
        .on(comm)
    })
}

/// The neighbours of `rank` in topology `t`.
fn compute(t: &Topo, rank: i32) -> Neighbours {
    match t {
        Topo::Cart { dims, periods } => {
            let c = cart_coords_of(dims, rank);
            let (mut ins, mut outs) = (Vec::new(), Vec::new());
            for d in 0..dims.len() {
                let at = |delta: c_int| {
                    let mut x = c.clone();
                    x[d] += delta;
                    cart_rank_of(dims, periods, &x).unwrap_or(MPI_PROC_NULL)
                };
                let (minus, plus) = (at(-1), at(1));
                let t = 2 * d as i32;
                // What the negative neighbour sent to its positive side, and vice versa.
                ins.push((minus, t + 1));
                ins.push((plus, t));
                outs.push((minus, t));
                outs.push((plus, t + 1));
            }
            (ins, outs)
        }
        Topo::Graph { index, edges } => {
            let r = rank as usize;
            let lo = if r == 0 { 0 } else { index[r - 1] as usize };
            let n: Vec<(i32, i32)> = edges[lo..index[r] as usize]
                .iter()
                .map(|&e| (e, 0))
                .collect();
            (n.clone(), n)
        }
        Topo::Dist { sources, dests, .. } => (
            sources.iter().map(|&s| (s, 0)).collect(),
            dests.iter().map(|&d| (d, 0)).collect(),
        ),
    }
}

/// One outgoing block: (datatype, count, address).
type Block = (Arc<Datatype>, usize, *const u8);
/// One incoming block (and an outgoing one once collected): (datatype, count, address).
type RBlock = (Arc<Datatype>, usize, *mut u8);

/// Collect and check the blocks of a neighbourhood collective on `comm` (`send(j)` for
/// outgoing neighbour `j`, `recv(i)` for incoming neighbour `i`), then run it: at once
/// (`request` is `None`) or as a schedule that completes `*request` in the background.
///
/// # Safety
/// Every block address holds (send) or has room for (receive) its items, until completion
/// for the nonblocking forms.
unsafe fn neighbor(
    comm: c_int,
    send: impl Fn(usize) -> MpiResult<Block>,
    recv: impl Fn(usize) -> MpiResult<RBlock>,
    request: Option<*mut c_int>,
) -> MpiResult {
    let (ctx, rank) = {
        let st = lock();
        st.check_active()?;
        let c = st.comm(comm)?;
        (c.coll, c.rank)
    };
    let nb = neighbours(comm, rank)?;
    let (ins, outs) = (&nb.0, &nb.1);
    let mut sends = Vec::with_capacity(outs.len());
    for j in 0..outs.len() {
        let b = send(j)?;
        if b.0.size * b.1 > 0 && b.2.is_null() && b.0.predefined {
            return Err(MpiError::new(MPI_ERR_BUFFER, "NULL send buffer").on(comm));
        }
        sends.push((b.0, b.1, b.2.cast_mut()));
    }
    let mut recvs = Vec::with_capacity(ins.len());
    for i in 0..ins.len() {
        let b = recv(i)?;
        if b.0.size * b.1 > 0 && b.2.is_null() && b.0.predefined {
            return Err(MpiError::new(MPI_ERR_BUFFER, "NULL receive buffer").on(comm));
        }
        recvs.push(b);
    }
    match request {
        // SAFETY: caller contract.
        Some(request) => unsafe { crate::icoll::ineighbor(comm, ins, outs, sends, recvs, request) },
        // SAFETY: caller contract.
        None => unsafe { exchange(comm, ctx, ins, outs, &sends, &recvs) },
    }
}

/// Where the user's bytes of a block of a contiguous datatype are: (address, length);
/// `None`: the block must be packed or unpacked through a buffer of its own. An empty
/// block is (dangling, 0).
fn direct((dt, n, p): &RBlock) -> Option<(*mut u8, usize)> {
    let len = dt.size * n;
    if len == 0 {
        return Some((std::ptr::NonNull::dangling().as_ptr(), 0));
    }
    // A contiguous type's `n` items are `len` bytes from `lb`.
    (dt.is_contiguous() && !p.is_null()).then(|| (p.wrapping_offset(dt.lb), len))
}

/// A block of the blocking exchange as it travels: the user's bytes (address, length), or
/// a buffer of its own (packed, or to unpack from).
enum Part {
    Direct(*mut u8, usize),
    Own(Vec<u8>),
}

/// The blocking exchange: pack the outgoing blocks, exchange them with the neighbours on
/// the collective context `ctx` and unpack the incoming ones. Blocks of a contiguous
/// datatype are sent from and received into the user's memory itself (no copy).
///
/// # Safety
/// Every block address holds (send) or has room for (receive) its items, and the receive
/// blocks do not overlap each other or the send blocks (MPI's rule for a collective's
/// buffers).
unsafe fn exchange(
    comm: c_int,
    ctx: EComm,
    ins: &[(i32, i32)],
    outs: &[(i32, i32)],
    sblocks: &[RBlock],
    rblocks: &[RBlock],
) -> MpiResult {
    // Each block once: the user's bytes (`direct`), or a buffer of its own (the packed
    // send block, room for the received one).
    let sparts: Vec<Part> = sblocks
        .iter()
        .map(|b @ (dt, n, p)| match direct(b) {
            Some((p, len)) => Part::Direct(p, len),
            None => {
                let mut v = Vec::with_capacity(dt.size * n);
                // SAFETY: caller contract: the block holds `n` items of `dt`.
                unsafe { crate::datatype::pack_into(dt, *n, p.cast_const(), &mut v) };
                Part::Own(v)
            }
        })
        .collect();
    let mut rparts: Vec<Part> = rblocks
        .iter()
        .map(|b| match direct(b) {
            Some((p, len)) => Part::Direct(p, len),
            None => Part::Own(vec![0u8; b.0.size * b.1]),
        })
        .collect();
    let a = crate::coll_alg::alg(ctx, comm)?;
    let sends: Vec<(i32, i32, &[u8])> = outs
        .iter()
        .zip(&sparts)
        .map(|(&(p, t), part)| {
            let d = match part {
                // SAFETY: caller contract: the block's bytes (only read; send blocks
                // may be the same memory, as in an allgather).
                Part::Direct(p, len) => unsafe { std::slice::from_raw_parts(p.cast_const(), *len) },
                Part::Own(v) => &v[..],
            };
            (p, t, d)
        })
        .collect();
    let got = {
        let mut recvs: Vec<(i32, i32, &mut [u8])> = ins
            .iter()
            .zip(rparts.iter_mut())
            .map(|(&(p, t), part)| {
                let d = match part {
                    // SAFETY: caller contract: the block's room, which overlaps no
                    // other block.
                    Part::Direct(p, len) => unsafe { std::slice::from_raw_parts_mut(*p, *len) },
                    Part::Own(v) => &mut v[..],
                };
                (p, t, d)
            })
            .collect();
        a.exchange(&sends, &mut recvs)
            .map_err(crate::coll_alg::err(comm))?
    };
    for (i, ((dt, n, p), part)) in rblocks.iter().zip(&rparts).enumerate() {
        let Part::Own(v) = part else { continue };
        if ins[i].0 == MPI_PROC_NULL {
            continue;
        }
        // SAFETY: caller contract: the block has room for `n` items of `dt`.
        unsafe { crate::datatype::unpack_from(dt, *n, *p, &v[..got[i]]) };
    }
    Ok(())
}

fn dtype(h: c_int, comm: c_int) -> MpiResult<Arc<Datatype>> {
    lock().dtype_committed(h).map_err(|e| e.on(comm))
}

pub(crate) fn degrees(comm: c_int) -> MpiResult<(usize, usize)> {
    let rank = lock().comm(comm)?.rank;
    let nb = neighbours(comm, rank)?;
    Ok((nb.0.len(), nb.1.len()))
}

/// Address `base + items * extent` (items may be 0 with a NULL base).
fn at(base: *const c_void, items: isize, dt: &Datatype) -> *const u8 {
    base.cast::<u8>().wrapping_offset(items * dt.extent())
}

/// Defines a blocking neighbourhood collective and its nonblocking form (the same
/// arguments and `request`), each with its large-count `_c` form, from one body, run after the intracommunicator check of the
/// argument `$comm`; in it `$req` is the request to complete: `None` for the blocking form,
/// `Some(request)` for the nonblocking one.
macro_rules! neighbor_forms {
    ($(
        #[doc = $doc:literal] $pname:ident $name:literal $cpname:ident $cname:literal,
        #[doc = $idoc:literal] $ipname:ident $iname:literal $icpname:ident $icname:literal,
        ($($arg:ident: $ty:ty),*) |$comm:ident, $req:ident| $body:block
    )*) => {$(
        mpi_fn_c! {
            #[doc = $doc]
            fn $pname / $name, $cpname / $cname ($($arg: $ty),*) {
                crate::intercomm::require_intra($comm, $name)?;
                let $req: Option<*mut c_int> = None;
                $body
            }
        }
        mpi_fn_c! {
            #[doc = $idoc]
            fn $ipname / $iname, $icpname / $icname ($($arg: $ty),*, request: *mut c_int) {
                crate::intercomm::require_intra($comm, $iname)?;
                let $req = Some(request);
                $body
            }
        }
    )*};
}

neighbor_forms! {
    #[doc = "`MPI_Neighbor_allgather`."] PMPI_Neighbor_allgather "MPI_Neighbor_allgather" PMPI_Neighbor_allgather_c "MPI_Neighbor_allgather_c",
    #[doc = "`MPI_Ineighbor_allgather` (progresses in the background)."] PMPI_Ineighbor_allgather "MPI_Ineighbor_allgather" PMPI_Ineighbor_allgather_c "MPI_Ineighbor_allgather_c",
    (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int) |comm, req| {
        let (sn, rn) = (check_count(sendcount)?, check_count(recvcount)?);
        let (st, rt) = (dtype(sendtype, comm)?, dtype(recvtype, comm)?);
        // SAFETY: MPI contract of the call for the buffers (valid until completion for the
        // nonblocking form).
        unsafe {
            neighbor(comm, |_| Ok((st.clone(), sn, sendbuf.cast())), |i| {
                Ok((rt.clone(), rn, at(recvbuf, (i * rn) as isize, &rt).cast_mut()))
            }, req)
        }
    }

    #[doc = "`MPI_Neighbor_allgatherv`."] PMPI_Neighbor_allgatherv "MPI_Neighbor_allgatherv" PMPI_Neighbor_allgatherv_c "MPI_Neighbor_allgatherv_c",
    #[doc = "`MPI_Ineighbor_allgatherv` (progresses in the background)."] PMPI_Ineighbor_allgatherv "MPI_Ineighbor_allgatherv" PMPI_Ineighbor_allgatherv_c "MPI_Ineighbor_allgatherv_c",
    (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Disp, recvtype: c_int, comm: c_int) |comm, req| {
        let sn = check_count(sendcount)?;
        let (st, rt) = (dtype(sendtype, comm)?, dtype(recvtype, comm)?);
        let (indeg, _) = degrees(comm)?;
        let rc = slice_in(recvcounts, indeg, "recvcounts")?;
        let rd = slice_in(displs, indeg, "displs")?;
        // SAFETY: MPI contract of the call for the buffers (valid until completion for the
        // nonblocking form).
        unsafe {
            neighbor(comm, |_| Ok((st.clone(), sn, sendbuf.cast())), |i| {
                Ok((rt.clone(), check_count(rc[i])?, at(recvbuf, rd[i].aint(), &rt).cast_mut()))
            }, req)
        }
    }

    #[doc = "`MPI_Neighbor_alltoall`."] PMPI_Neighbor_alltoall "MPI_Neighbor_alltoall" PMPI_Neighbor_alltoall_c "MPI_Neighbor_alltoall_c",
    #[doc = "`MPI_Ineighbor_alltoall` (progresses in the background)."] PMPI_Ineighbor_alltoall "MPI_Ineighbor_alltoall" PMPI_Ineighbor_alltoall_c "MPI_Ineighbor_alltoall_c",
    (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int) |comm, req| {
        let (sn, rn) = (check_count(sendcount)?, check_count(recvcount)?);
        let (st, rt) = (dtype(sendtype, comm)?, dtype(recvtype, comm)?);
        // SAFETY: MPI contract of the call for the buffers (valid until completion for the
        // nonblocking form).
        unsafe {
            neighbor(comm, |j| Ok((st.clone(), sn, at(sendbuf, (j * sn) as isize, &st))), |i| {
                Ok((rt.clone(), rn, at(recvbuf, (i * rn) as isize, &rt).cast_mut()))
            }, req)
        }
    }

    #[doc = "`MPI_Neighbor_alltoallv`."] PMPI_Neighbor_alltoallv "MPI_Neighbor_alltoallv" PMPI_Neighbor_alltoallv_c "MPI_Neighbor_alltoallv_c",
    #[doc = "`MPI_Ineighbor_alltoallv` (progresses in the background)."] PMPI_Ineighbor_alltoallv "MPI_Ineighbor_alltoallv" PMPI_Ineighbor_alltoallv_c "MPI_Ineighbor_alltoallv_c",
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Disp, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Disp, recvtype: c_int, comm: c_int) |comm, req| {
        let (st, rt) = (dtype(sendtype, comm)?, dtype(recvtype, comm)?);
        let (indeg, outdeg) = degrees(comm)?;
        let sc = slice_in(sendcounts, outdeg, "sendcounts")?;
        let sd = slice_in(sdispls, outdeg, "sdispls")?;
        let rc = slice_in(recvcounts, indeg, "recvcounts")?;
        let rd = slice_in(rdispls, indeg, "rdispls")?;
        // SAFETY: MPI contract of the call for the buffers (valid until completion for the
        // nonblocking form).
        unsafe {
            neighbor(comm, |j| Ok((st.clone(), check_count(sc[j])?, at(sendbuf, sd[j].aint(), &st))), |i| {
                Ok((rt.clone(), check_count(rc[i])?, at(recvbuf, rd[i].aint(), &rt).cast_mut()))
            }, req)
        }
    }

    #[doc = "`MPI_Neighbor_alltoallw` (displacements in bytes)."] PMPI_Neighbor_alltoallw "MPI_Neighbor_alltoallw" PMPI_Neighbor_alltoallw_c "MPI_Neighbor_alltoallw_c",
    #[doc = "`MPI_Ineighbor_alltoallw` (displacements in bytes; progresses in the background)."] PMPI_Ineighbor_alltoallw "MPI_Ineighbor_alltoallw" PMPI_Ineighbor_alltoallw_c "MPI_Ineighbor_alltoallw_c",
    (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const isize, recvtypes: *const c_int, comm: c_int) |comm, req| {
        let (indeg, outdeg) = degrees(comm)?;
        let sc = slice_in(sendcounts, outdeg, "sendcounts")?;
        let sd = slice_in(sdispls, outdeg, "sdispls")?;
        let stt = slice_in(sendtypes, outdeg, "sendtypes")?;
        let rc = slice_in(recvcounts, indeg, "recvcounts")?;
        let rd = slice_in(rdispls, indeg, "rdispls")?;
        let rtt = slice_in(recvtypes, indeg, "recvtypes")?;
        // SAFETY: MPI contract of the call for the buffers (valid until completion for the
        // nonblocking form).
        unsafe {
            neighbor(comm, |j| Ok((dtype(stt[j], comm)?, check_count(sc[j])?, sendbuf.cast::<u8>().wrapping_offset(sd[j]))), |i| {
                Ok((dtype(rtt[i], comm)?, check_count(rc[i])?, recvbuf.cast::<u8>().wrapping_offset(rd[i])))
            }, req)
        }
    }
}
