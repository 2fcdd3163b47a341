//! Nonblocking collectives (`MPI_I*`).
//!
//! Every nonblocking collective on an intracommunicator **progresses in the background**:
//! the call builds an `oxmpi_coll::sched::Schedule` (rounds of sends/receives on the
//! communicator's collective context, then local reductions/copies), starts it without
//! blocking and returns a request — barrier, bcast, reduce, allreduce, gather(v),
//! scatter(v), allgather(v), alltoall(v,w), reduce_scatter(_block), scan, exscan, and the
//! neighbourhood forms (`neighbor.rs`). `MPI_IN_PLACE` is accepted wherever the standard
//! allows it. A progress thread of the library (started on the first such call, asleep
//! while no schedule is active) advances every active schedule whatever the application
//! does meanwhile (computation, point-to-point, other collectives) and completes the
//! request when its schedule ends; `MPI_Test`/`MPI_Wait` then see it complete
//! (`sched::progress_pending` lets a waiting thread advance the schedules itself). The
//! thread and the list of active schedules are `oxmpi_coll::nbc::progress`; this file holds
//! the entry points, which build the schedules from MPI arguments with the helpers of
//! `sched` (regions, starting a schedule, completing its generalized request). The request
//! is internally a generalized request; its status is empty (`MPI_ANY_SOURCE`,
//! `MPI_ANY_TAG`, count 0) with the collective's error code. Non-contiguous datatypes are
//! packed at the call and unpacked at completion. A collective of small contiguous vectors
//! on the communicator's shared-memory segment is instead a *light request*
//! (`oxmpi_coll::nbc::light`, `sched::start_shared`): no schedule and no generalized
//! request, a slot that its wait or test advances and frees.
//!
//! Reductions with a user-defined operation run on the thread that advances the schedule
//! (usually the progress thread), in the order the standard requires for non-commutative
//! operations; the user function pointer is captured at the call, so the op and datatype
//! may be freed before completion.
//!
//! The intercommunicator forms are schedules too (`intercoll.rs`: the intercommunicator
//! algorithms with remote and local phases on their two contexts); `MPI_Iscan`/`MPI_Iexscan`
//! and the neighbourhood forms are not defined on intercommunicators (`MPI_ERR_COMM`).
pub(crate) mod sched;

use crate::coll::Words;
use crate::coll_alg as alg;
use crate::consts::*;
use crate::datatype::Datatype;
use crate::ffi::{check_count, slice_in, CountArg, DispArg, MpiError, MpiResult};
use oxmpi_coll::sched::{Lane, Region, Schedule};
use oxmpi_coll::sm::{Reduction, Rooted, SmKind};
use sched::{
    checked, comm_info, copied, copied_but, dtype, laid, layout, msg_seg, owned_op, pieces,
    planning, reduction_seg, region, region_bytes, rooted_seg, sched_err, shared_seg, spanned,
    start, start_shared, Laid,
};
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// The address of item `k` (in extents, may be negative) of `dt` from `buf`.
fn item(buf: *mut c_void, k: isize, dt: &Datatype) -> *mut c_void {
    buf.cast::<u8>()
        .wrapping_offset(k.wrapping_mul(dt.extent()))
        .cast()
}

/// An empty region (no input or no output on this rank).
fn none() -> Region {
    Region::Owned(Vec::new())
}

/// Our contribution as a schedule region: in place, `own` (`count` items of the receive
/// type at our part of the receive buffer); otherwise `blocks` blocks of the send triple,
/// which must come to `bytes` bytes.
///
/// # Safety
/// MPI contract: the buffers hold the items until completion.
unsafe fn contribution(
    own: Option<(&Arc<Datatype>, usize, *mut c_void)>,
    (sendbuf, sendcount, sendtype, blocks): (*const c_void, i64, c_int, usize),
    bytes: usize,
    (comm, what): (c_int, &str),
    unpack: &mut Vec<sched::Unpack>,
) -> MpiResult<Region> {
    if let Some((rdt, n, at)) = own {
        // SAFETY: caller contract.
        return Ok(unsafe { region(rdt, n, at, true, false, 0, unpack) });
    }
    let (sdt, sc) = checked(sendbuf, sendcount, sendtype, blocks, comm)?;
    if sc * sdt.size * blocks != bytes {
        return Err(truncated(comm, what));
    }
    // SAFETY: caller contract.
    Ok(unsafe {
        region(
            &sdt,
            sc * blocks,
            sendbuf.cast_mut(),
            true,
            false,
            0,
            unpack,
        )
    })
}

/// Bytes `at..at + n` of `r` as a region of their own, aliasing them: an in-place root's
/// block, which the schedule then copies onto itself, i.e. not at all (no copy aside). The
/// bytes stay where they are while the schedule lives (the caller's memory, or the heap
/// buffer of an owned region, which moving the region does not move).
/// A block outside `r` (invalid arguments) comes as zeros, for the schedule to reject.
fn alias(r: &mut Region, at: usize, n: usize) -> Region {
    match region_bytes(r).get_mut(at..at.saturating_add(n)) {
        Some(b) => Region::Raw(b.as_mut_ptr(), n),
        None => Region::Owned(vec![0u8; n]),
    }
}

/// The segment for an iallgather(v) whose largest block is `most` bytes, and how: `None`
/// through its buffers (the block fits one), else `Some(far)`, the largest block moved by
/// cross-memory copies ([`oxmpi_coll::sm::nb::alltoallv_far`]), when `most`
/// is within it. Every rank decides alike (`most` is known to all).
fn allgather_seg(
    a: &oxmpi_coll::CollComm,
    most: usize,
) -> Option<(Arc<oxmpi_coll::sm::Seg>, Option<usize>)> {
    if let Some(seg) = shared_seg(a, most) {
        return Some((seg, None));
    }
    let seg = shared_seg(a, 0)?;
    let far = oxmpi_coll::sm::nb::alltoallv_far(&seg);
    (most <= far).then_some((seg, Some(far)))
}

/// An iallgather(v) on the segment (block `i`: `counts[i]` bytes at `displs[i]` of the
/// output; our contribution the input): through the buffers (`far` `None`), or as an
/// alltoallv that sends our block to every rank, whose blocks then move by cross-memory
/// copies (each rank reads every other's contribution where it is, the whole of it only
/// once). `aliased`: the input is our block of the output itself (in place, contiguous),
/// which then stays where it is; on 2 ranks the blocks of at least
/// `coll_sm_nonblocking_push_min` bytes are then written by their senders into our output
/// instead, as the blocking allgather in place on 2 ranks writes (see `SmKind::Alltoallv`'s
/// `push`; np=8 in place was 7 % slower written, hence 2 ranks only).
fn allgather_kind(
    me: usize,
    (counts, displs): (Vec<usize>, Vec<usize>),
    aliased: bool,
    far: Option<usize>,
) -> SmKind {
    let Some(far) = far else {
        return SmKind::Allgatherv { counts, displs };
    };
    let p = counts.len();
    let (mut scounts, mut rcounts) = (vec![counts.get(me).copied().unwrap_or(0); p], counts);
    if aliased {
        (scounts[me], rcounts[me]) = (0, 0);
    }
    SmKind::Alltoallv {
        scounts,
        sdispls: vec![0; p],
        rcounts,
        rdispls: displs,
        in_place: false,
        far,
        push: if aliased && p == 2 {
            oxmpi_coll::sm::params::nonblocking_push_min()
        } else {
            0
        },
    }
}

/// The input of a segment collective on predefined types: `len` bytes at `own` (in place:
/// our part of the receive buffer) or at `sendbuf`, as the caller's memory.
fn basic_input(in_place: bool, sendbuf: *const c_void, own: *mut u8, len: usize) -> Region {
    if in_place {
        Region::Raw(own, len)
    } else {
        Region::Raw(sendbuf.cast_mut().cast(), len)
    }
}

/// The blocks of an iallgather or ialltoall of predefined basic types (`blocks` blocks a
/// rank posts: 1 or `p`) when they fit a buffer of the segment: the block's bytes, the
/// input (in place: our part of the receive buffer, `own` bytes in) and the output as the
/// caller's memory, with no datatype reference taken (`crate::coll::basic_bytes`, the
/// lock-free size cache, as the blocking fast paths). `None` (the general path, which also
/// reports the errors) for other types, empty or NULL buffers, blocks of different sizes,
/// or data too large for a buffer.
fn basic_seg(
    a: &oxmpi_coll::CollComm,
    (sendbuf, sendcount, sendtype): (*const c_void, i64, c_int),
    (recvbuf, recvcount, recvtype): (*mut c_void, i64, c_int),
    (blocks, own): (usize, usize),
) -> Option<(Arc<oxmpi_coll::sm::Seg>, usize, Region, Region)> {
    let in_place = alg::is_in_place(sendbuf);
    let b = crate::coll::basic_bytes(recvcount, recvtype)?;
    if b == 0
        || recvbuf.is_null()
        || (!in_place && (sendbuf.is_null() || crate::coll::basic_bytes(sendcount, sendtype)? != b))
    {
        return None;
    }
    let posted = b.checked_mul(blocks)?;
    let seg = shared_seg(a, posted)?;
    let p = a.size as usize;
    let at = recvbuf.cast::<u8>();
    let input = basic_input(in_place, sendbuf, at.wrapping_add(own * b), posted);
    // `b * p` does not overflow: a buffer holds `b` bytes (`blocks` is 1 or `p`).
    Some((seg, b, input, Region::Raw(at, b * p)))
}

/// An iallgatherv of predefined basic types on the segment ([`allgather_seg`]): the
/// collective, our contribution and the output as the caller's memory, with no datatype
/// reference taken and no list of slots made (block `i`: `counts[i]` items at `displs[i]`,
/// in bytes). `None` (the general path, which also reports the errors) for other types,
/// NULL arrays or buffers, negative counts or displacements, an empty block of ours, a
/// send block whose size differs from ours, or blocks too large for the segment.
fn iallgatherv_basic<C: CountArg, D: DispArg>(
    a: &oxmpi_coll::CollComm,
    (sendbuf, sendcount, sendtype): (*const c_void, i64, c_int),
    (recvbuf, recvcounts, displs, recvtype): (*mut c_void, *const C, *const D, c_int),
) -> Option<(Arc<oxmpi_coll::sm::Seg>, SmKind, Region, Region)> {
    let in_place = alg::is_in_place(sendbuf);
    let size = crate::coll::basic_bytes(1, recvtype)?;
    let (p, me) = (a.size as usize, a.rank as usize);
    if size == 0 || recvbuf.is_null() || recvcounts.is_null() || displs.is_null() {
        return None;
    }
    let cs = slice_in(recvcounts, p, "counts").ok()?;
    let ds = slice_in(displs, p, "displs").ok()?;
    // Every block as long as ours and right after the one before: an iallgather's layout,
    // whose blocks are one length (nothing allocated). Every rank posts its block alike
    // whichever kind it reads with, so ranks whose displacements differ may choose apart.
    let c: i64 = cs.get(me)?.to_owned().into();
    let regular = cs.iter().zip(ds).enumerate().all(|(i, (&k, &d))| {
        k.into() == c && Some(d.aint()) == (i as isize).checked_mul(c as isize)
    });
    if regular && c > 0 {
        let own = usize::try_from(c).ok()?.checked_mul(size)?;
        let out = recvbuf.cast::<u8>();
        if let Some(seg) = shared_seg(a, own) {
            if in_place
                || (!sendbuf.is_null() && crate::coll::basic_bytes(sendcount, sendtype)? == own)
            {
                let input = basic_input(in_place, sendbuf, out.wrapping_add(me * own), own);
                // `own * p` does not overflow: a buffer holds `own` bytes.
                return Some((
                    seg,
                    SmKind::Allgather { block: own },
                    input,
                    Region::Raw(out, own * p),
                ));
            }
            return None;
        }
    }
    let (mut counts, mut offs) = (Vec::with_capacity(p), Vec::with_capacity(p));
    let (mut most, mut end) = (0usize, 0usize);
    for (&c, &d) in cs.iter().zip(ds) {
        let n = usize::try_from(c.into()).ok()?.checked_mul(size)?;
        let off = if n == 0 {
            0
        } else {
            usize::try_from(d.aint()).ok()?.checked_mul(size)?
        };
        most = most.max(n);
        end = end.max(off.checked_add(n)?);
        counts.push(n);
        offs.push(off);
    }
    let (own, at) = (counts[me], offs[me]);
    if own == 0
        || (!in_place
            && (sendbuf.is_null() || crate::coll::basic_bytes(sendcount, sendtype)? != own))
    {
        return None;
    }
    let (seg, far) = allgather_seg(a, most)?;
    let out = recvbuf.cast::<u8>();
    let input = basic_input(in_place, sendbuf, out.wrapping_add(at), own);
    let kind = allgather_kind(me, (counts, offs), in_place, far);
    Some((seg, kind, input, Region::Raw(out, end)))
}

fn truncated(comm: c_int, what: &str) -> MpiError {
    MpiError::new(
        MPI_ERR_TRUNCATE,
        format!("{what}: send and receive blocks differ in size"),
    )
    .on(comm)
}

mpi_fn! {
    /// `MPI_Ibarrier` (progresses in the background).
    fn PMPI_Ibarrier / "MPI_Ibarrier" (comm: c_int, request: *mut c_int) {
        if let Some(r) = sched::light_barrier(comm, request) { return r; }
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::ibarrier(&l, request); }
        let (a, _, _) = comm_info(comm)?;
        if let Some(seg) = shared_seg(&a, 0) {
            sched::remember_barrier(comm, &a, &seg);
            return start_shared(comm, &a, (seg, SmKind::Barrier), (none(), none()), None, Vec::new(), request);
        }
        let s = a.ibarrier().map_err(sched_err(comm))?;
        start(comm, s, Vec::new(), request)
    }
}

mpi_fn_c! {
    /// `MPI_Ibcast` (progresses in the background).
    fn PMPI_Ibcast / "MPI_Ibcast", PMPI_Ibcast_c / "MPI_Ibcast_c" (buffer: *mut c_void, count: Count, datatype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::ibcast(&l, buffer, i64::from(count), datatype, root, request); }
        let (a, rank, size) = comm_info(comm)?;
        alg::check_root(root, size, comm)?;
        let n = check_count(count).map_err(|e| e.on(comm))?;
        let dt = dtype(datatype, comm)?;
        alg::check_buf(buffer, &dt, n, comm)?;
        let mut unpack = Vec::new();
        let me = rank == root;
        let bytes = dt.size.saturating_mul(n);
        let r0 = root as usize;
        if let Some(shared) = rooted_seg(&a, (bytes, SmKind::Bcast { root: r0 }), (r0, bytes, Rooted::Bcast)) {
            // SAFETY: MPI contract: `buffer` holds (root) or has room for `n` items until
            // completion.
            let io = unsafe {
                if me {
                    (region(&dt, n, buffer, true, false, 0, &mut unpack), none())
                } else {
                    (none(), region(&dt, n, buffer, false, true, 1, &mut unpack))
                }
            };
            return start_shared(comm, &a, shared, io, None, unpack, request);
        }
        // SAFETY: MPI contract: `buffer` holds (root) or has room for `n` items until
        // completion.
        let r = unsafe { region(&dt, n, buffer, me, !me, 0, &mut unpack) };
        let s = a.ibcast(r, root).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

mpi_fn_c! {
    /// `MPI_Iallreduce` (progresses in the background).
    fn PMPI_Iallreduce / "MPI_Iallreduce", PMPI_Iallreduce_c / "MPI_Iallreduce_c" (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::iallreduce(&l, alg::ReduceArgs { sendbuf, recvbuf, count: i64::from(count), datatype, op, comm }, request); }
        let (a, _, _) = comm_info(comm)?;
        let n = check_count(count).map_err(|e| e.on(comm))?;
        let dt = dtype(datatype, comm)?;
        let o = owned_op(&dt, datatype, op, comm)?;
        let in_place = alg::is_in_place(sendbuf);
        alg::check_buf(recvbuf, &dt, n, comm)?;
        if !in_place {
            alg::check_buf(sendbuf, &dt, n, comm)?;
        }
        let mut unpack = Vec::new();
        if let Some(shared) = reduction_seg(&a, dt.size.saturating_mul(n), (SmKind::Allreduce, Reduction::Allreduce), false) {
            let src = if in_place { recvbuf } else { sendbuf.cast_mut() };
            // SAFETY: MPI contract: the contribution holds `n` items and recvbuf has room
            // for them until completion.
            let io = unsafe { (region(&dt, n, src, true, false, 0, &mut unpack), region(&dt, n, recvbuf, false, true, 1, &mut unpack)) };
            return start_shared(comm, &a, shared, io, Some(o), unpack, request);
        }
        // SAFETY: MPI contract: recvbuf has room for `n` items (in place: holds ours).
        let r = unsafe { region(&dt, n, recvbuf, in_place, true, 0, &mut unpack) };
        // Not in place: the schedule reads our contribution where it is (the first
        // exchange sends it from there), with no copy into recvbuf first.
        // SAFETY: MPI contract: sendbuf holds `n` items until completion.
        let input = (!in_place).then(|| unsafe { region(&dt, n, sendbuf.cast_mut(), true, false, 1, &mut unpack) });
        // With the segment (not while planning a persistent one), the lengths are checked
        // there first: every rank of a nonblocking allreduce takes the segment's next number.
        let s = match msg_seg(&a) {
            Some(seg) => a.iallreduce_msg(seg, input, r, o),
            None => a.iallreduce_from(input, r, o),
        };
        start(comm, s.map_err(sched_err(comm))?, unpack, request)
    }
}

mpi_fn_c! {
    /// `MPI_Ireduce` (progresses in the background).
    fn PMPI_Ireduce / "MPI_Ireduce", PMPI_Ireduce_c / "MPI_Ireduce_c" (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::ireduce(&l, alg::ReduceArgs { sendbuf, recvbuf, count: i64::from(count), datatype, op, comm }, root, request); }
        let (a, rank, size) = comm_info(comm)?;
        alg::check_root(root, size, comm)?;
        let n = check_count(count).map_err(|e| e.on(comm))?;
        let dt = dtype(datatype, comm)?;
        let o = owned_op(&dt, datatype, op, comm)?;
        let me = rank == root;
        let src = if alg::is_in_place(sendbuf) && me { recvbuf.cast_const() } else { sendbuf };
        alg::check_buf(src, &dt, n, comm)?;
        if me {
            alg::check_buf(recvbuf, &dt, n, comm)?;
        }
        let r0 = root as usize;
        if let Some(shared) = reduction_seg(&a, dt.size.saturating_mul(n), (SmKind::Reduce { root: r0 }, Reduction::Reduce { root: r0 }), false) {
            let mut unpack = Vec::new();
            // SAFETY: MPI contract: the contribution holds `n` items and recvbuf (root)
            // has room for them until completion.
            let io = unsafe {
                let input = region(&dt, n, src.cast_mut(), true, false, 0, &mut unpack);
                (input, if me { region(&dt, n, recvbuf, false, true, 1, &mut unpack) } else { none() })
            };
            return start_shared(comm, &a, shared, io, Some(o), unpack, request);
        }
        let mut unpack = Vec::new();
        // Read where it is (packed only for a non-contiguous type).
        // SAFETY: MPI contract: the contribution holds `n` items until completion.
        let data = unsafe { region(&dt, n, src.cast_mut(), true, false, 0, &mut unpack) };
        let out = if me {
            // SAFETY: MPI contract: recvbuf has room for `n` items at the root.
            Some(unsafe { region(&dt, n, recvbuf, false, true, 1, &mut unpack) })
        } else {
            None
        };
        // With the segment (not while planning a persistent one), the lengths are checked
        // there first, as for the allreduce: a rank whose erroneous count put it on a path
        // of the segment meets us there.
        let s = match msg_seg(&a) {
            Some(seg) => a.ireduce_msg(seg, data, out, root, o),
            None => a.ireduce(data, out, root, o),
        };
        start(comm, s.map_err(sched_err(comm))?, unpack, request)
    }
}

mpi_fn_c! {
    /// `MPI_Igather` (progresses in the background).
    fn PMPI_Igather / "MPI_Igather", PMPI_Igather_c / "MPI_Igather_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::igatherv(&l, crate::intercoll::SendSpec { buf: sendbuf, count: i64::from(sendcount), datatype: sendtype }, crate::intercoll::Laid { buf: recvbuf, layout: crate::intercoll::Layout::Uniform(i64::from(recvcount)), datatype: recvtype }, root, request); }
        let (a, rank, size) = comm_info(comm)?;
        alg::check_root(root, size, comm)?;
        let p = size as usize;
        let me = rank == root;
        let in_place = alg::is_in_place(sendbuf) && me;
        let mut unpack = Vec::new();
        let blk = if me {
            let (rdt, rc) = checked(recvbuf, recvcount, recvtype, p, comm)?;
            rc * rdt.size
        } else {
            let (sdt, sc) = checked(sendbuf, sendcount, sendtype, 1, comm)?;
            sc * sdt.size
        };
        let r0 = root as usize;
        if let Some(shared) = rooted_seg(&a, (blk, SmKind::Gather { root: r0, block: blk }), (r0, blk, Rooted::Gather)) {
            let io = if me {
                let (rdt, rc) = checked(recvbuf, recvcount, recvtype, p, comm)?;
                let own = in_place.then(|| (&rdt, rc, item(recvbuf, (rank as usize * rc) as isize, &rdt)));
                // SAFETY: MPI contract: the contribution (in place: the root's block of
                // recvbuf) holds its items until completion.
                let input = unsafe { contribution(own, (sendbuf, sendcount.into(), sendtype, 1), blk, (comm, "gather"), &mut unpack)? };
                // SAFETY: MPI contract: recvbuf has room for `size` blocks until completion.
                (input, unsafe { region(&rdt, rc * p, recvbuf, false, true, 1, &mut unpack) })
            } else {
                let (sdt, sc) = checked(sendbuf, sendcount, sendtype, 1, comm)?;
                // SAFETY: MPI contract: sendbuf holds `sc` items until completion.
                (unsafe { region(&sdt, sc, sendbuf.cast_mut(), true, false, 0, &mut unpack) }, none())
            };
            return start_shared(comm, &a, shared, io, None, unpack, request);
        }
        let (recv, b) = if me {
            let (rdt, rc) = checked(recvbuf, recvcount, recvtype, p, comm)?;
            // SAFETY: MPI contract: recvbuf has room for `size` blocks of `rc` items (in
            // place: holds ours).
            (unsafe { region(&rdt, rc * p, recvbuf, in_place, true, 1, &mut unpack) }, rc * rdt.size)
        } else {
            (Region::Owned(Vec::new()), 0)
        };
        let mut recv = recv;
        let send = if in_place {
            alias(&mut recv, root as usize * b, b)
        } else {
            let (sdt, sc) = checked(sendbuf, sendcount, sendtype, 1, comm)?;
            // SAFETY: MPI contract: sendbuf holds `sc` items until completion.
            unsafe { region(&sdt, sc, sendbuf.cast_mut(), true, false, 0, &mut unpack) }
        };
        let (counts, displs): (Vec<usize>, Vec<usize>) = (0..p).map(|i| (b, i * b)).unzip();
        let s = a.igatherv(send, recv, &counts, &displs, root).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

/// The end of a root's post at its call: the other collectives advanced (after our post:
/// it comes first), then the completed request handed out.
fn posted_at_call(request: *mut c_int) -> MpiResult {
    sched::progress_pending();
    crate::ffi::out(request, crate::handles::SEND_DONE, "request")
}

/// An iscatter root's whole part at its call, on the communicator's segment and the
/// caller's memory ([`oxmpi_coll::sm::nb::scatter_root_now`]): for predefined basic types
/// whose blocks go through the segment as a scatterv
/// ([`oxmpi_coll::sm::nb::scatter_as_scatterv`], as [`rooted_seg`] chooses on every rank),
/// when our buffer is free, the post comes before anything else (no datatype reference, no
/// counts on the heap, no request slot) and the request is a completed one. `None`: the
/// general path, which also reports the errors (other types, NULL buffers, a receive
/// buffer whose length is not the block's, other paths, our buffer still in use, a
/// persistent collective being planned).
fn iscatter_root_now(
    a: &oxmpi_coll::CollComm,
    (sendbuf, sendcount, sendtype): (*const c_void, i64, c_int),
    (recvbuf, recvcount, recvtype, in_place): (*mut c_void, i64, c_int, bool),
    request: *mut c_int,
) -> Option<MpiResult> {
    let p = a.size as usize;
    let block = crate::coll::basic_bytes(sendcount, sendtype)?;
    if !oxmpi_coll::sm::nb::scatter_as_scatterv(p, block)
        || request.is_null()
        || sendbuf.is_null()
        || planning()
    {
        return None;
    }
    let seg = oxmpi_coll::sm::existing(a)?;
    let out: &mut [u8] = if in_place {
        &mut []
    } else {
        if recvbuf.is_null() || crate::coll::basic_bytes(recvcount, recvtype)? != block {
            return None;
        }
        // SAFETY: MPI contract: recvbuf (not NULL) has room for `recvcount` items of a
        // predefined basic type, `block` bytes from offset 0, apart from the send buffer.
        unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), block) }
    };
    // SAFETY: MPI contract: sendbuf holds `size` blocks of `sendcount` items of a
    // predefined basic type (contiguous), `p * block` bytes (no overflow: `block` is at
    // most `scatterv_max(p)`); read only.
    let send = unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), p * block) };
    if !oxmpi_coll::sm::nb::scatter_root_now(a, &seg, send, block, out) {
        return None;
    }
    Some(posted_at_call(request))
}

mpi_fn_c! {
    /// `MPI_Iscatter` (progresses in the background).
    fn PMPI_Iscatter / "MPI_Iscatter", PMPI_Iscatter_c / "MPI_Iscatter_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::iscatterv(&l, crate::intercoll::Laid { buf: sendbuf, layout: crate::intercoll::Layout::Uniform(i64::from(sendcount)), datatype: sendtype }, crate::intercoll::RecvSpec { buf: recvbuf, count: i64::from(recvcount), datatype: recvtype }, root, request); }
        let (a, rank, size) = comm_info(comm)?;
        alg::check_root(root, size, comm)?;
        let p = size as usize;
        let me = rank == root;
        let in_place = alg::is_in_place(recvbuf) && me;
        // A root of predefined types whose blocks go through the segment as a scatterv:
        // posted first (the other ranks take the general path's reading of that post).
        if let Some(r) = me.then(|| iscatter_root_now(&a, (sendbuf, i64::from(sendcount), sendtype), (recvbuf, i64::from(recvcount), recvtype, in_place), request)).flatten() {
            return r;
        }
        let mut unpack = Vec::new();
        let blk = if me {
            let (sdt, sc) = checked(sendbuf, sendcount, sendtype, p, comm)?;
            sc * sdt.size
        } else {
            let (rdt, rc) = checked(recvbuf, recvcount, recvtype, 1, comm)?;
            rc * rdt.size
        };
        let r0 = root as usize;
        if let Some(shared) = rooted_seg(&a, (blk.saturating_mul(p), SmKind::Scatter { root: r0, block: blk }), (r0, blk, Rooted::Scatter)) {
            let output = if in_place {
                none()
            } else {
                let (rdt, rc) = checked(recvbuf, recvcount, recvtype, 1, comm)?;
                if rc * rdt.size != blk {
                    return Err(truncated(comm, "scatter"));
                }
                // SAFETY: MPI contract: recvbuf has room for `rc` items until completion.
                unsafe { region(&rdt, rc, recvbuf, false, true, 1, &mut unpack) }
            };
            let input = if me {
                let (sdt, sc) = checked(sendbuf, sendcount, sendtype, p, comm)?;
                // SAFETY: MPI contract: sendbuf holds `size` blocks until completion.
                unsafe { region(&sdt, sc * p, sendbuf.cast_mut(), true, false, 0, &mut unpack) }
            } else {
                none()
            };
            return start_shared(comm, &a, shared, (input, output), None, unpack, request);
        }
        let (mut send, b) = if me {
            let (sdt, sc) = checked(sendbuf, sendcount, sendtype, p, comm)?;
            // SAFETY: MPI contract: sendbuf holds `size` blocks of `sc` items.
            (unsafe { region(&sdt, sc * p, sendbuf.cast_mut(), true, false, 0, &mut unpack) }, sc * sdt.size)
        } else {
            (Region::Owned(Vec::new()), 0)
        };
        let recv = if in_place {
            alias(&mut send, root as usize * b, b)
        } else {
            let (rdt, rc) = checked(recvbuf, recvcount, recvtype, 1, comm)?;
            // SAFETY: MPI contract: recvbuf has room for `rc` items until completion.
            unsafe { region(&rdt, rc, recvbuf, false, true, 1, &mut unpack) }
        };
        // On 2 ranks with the segment, numbered by it (no post): a rank whose erroneous
        // length took the segment meets the number there and fails instead of waiting.
        if let Some(seg) = (p == 2).then(|| msg_seg(&a)).flatten() {
            let s = a.iscatter_pair_msg(seg, send, blk, recv, root).map_err(sched_err(comm))?;
            return start(comm, s, unpack, request);
        }
        let (counts, displs): (Vec<usize>, Vec<usize>) = (0..p).map(|i| (b, i * b)).unzip();
        let s = a.iscatterv(send, &counts, &displs, recv, root).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

mpi_fn_c! {
    /// `MPI_Iallgather` (ring, progresses in the background).
    fn PMPI_Iallgather / "MPI_Iallgather", PMPI_Iallgather_c / "MPI_Iallgather_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::iallgather(&l, crate::intercoll::SendSpec { buf: sendbuf, count: i64::from(sendcount), datatype: sendtype }, crate::intercoll::RecvSpec { buf: recvbuf, count: i64::from(recvcount), datatype: recvtype }, request); }
        let (a, rank, size) = comm_info(comm)?;
        let p = size as usize;
        // Predefined types through the buffers: the caller's bytes, no datatype looked up,
        // the blocks as one length (no counts and offsets to allocate).
        if let Some((seg, b, input, output)) = basic_seg(&a, (sendbuf, sendcount.into(), sendtype), (recvbuf, recvcount.into(), recvtype), (1, rank as usize)) {
            return start_shared(comm, &a, (seg, SmKind::Allgather { block: b }), (input, output), None, Vec::new(), request);
        }
        let in_place = alg::is_in_place(sendbuf);
        let (rdt, rc) = checked(recvbuf, recvcount, recvtype, p, comm)?;
        let b = rc * rdt.size;
        let mut unpack = Vec::new();
        if let Some((seg, far)) = allgather_seg(&a, b) {
            let own = in_place.then(|| (&rdt, rc, item(recvbuf, (rank as usize * rc) as isize, &rdt)));
            // SAFETY: MPI contract: the contribution (in place: our block of recvbuf) holds
            // its items until completion.
            let input = unsafe { contribution(own, (sendbuf, sendcount.into(), sendtype, 1), b, (comm, "allgather"), &mut unpack)? };
            // SAFETY: MPI contract: recvbuf has room for `size` blocks until completion.
            let output = unsafe { region(&rdt, rc * p, recvbuf, false, true, 1, &mut unpack) };
            let (counts, displs) = (0..p).map(|i| (b, i * b)).unzip();
            let kind = allgather_kind(rank as usize, (counts, displs), in_place && unpack.is_empty(), far);
            return start_shared(comm, &a, (seg, kind), (input, output), None, unpack, request);
        }
        // SAFETY: MPI contract: recvbuf has room for `size` blocks (in place: holds ours).
        let r = unsafe { region(&rdt, rc * p, recvbuf, in_place, true, 0, &mut unpack) };
        // Out of place our block leaves from the send buffer (see `iallgatherv_from`).
        // SAFETY: MPI contract: sendbuf holds our block until completion.
        let own = if in_place { None } else { Some(unsafe { contribution(None, (sendbuf, sendcount.into(), sendtype, 1), b, (comm, "allgather"), &mut unpack)? }) };
        let (counts, displs): (Vec<usize>, Vec<usize>) = (0..p).map(|i| (b, i * b)).unzip();
        let s = a.iallgatherv_from(r, own, &counts, &displs).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

mpi_fn_c! {
    /// `MPI_Ialltoall` (progresses in the background).
    fn PMPI_Ialltoall / "MPI_Ialltoall", PMPI_Ialltoall_c / "MPI_Ialltoall_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::ialltoall(&l, crate::intercoll::SendSpec { buf: sendbuf, count: i64::from(sendcount), datatype: sendtype }, crate::intercoll::RecvSpec { buf: recvbuf, count: i64::from(recvcount), datatype: recvtype }, request); }
        let (a, _, size) = comm_info(comm)?;
        let p = size as usize;
        // Predefined types through the buffers: the caller's bytes, no datatype looked up
        // (in place the whole receive buffer is the input).
        if let Some((seg, b, input, output)) = basic_seg(&a, (sendbuf, sendcount.into(), sendtype), (recvbuf, recvcount.into(), recvtype), (p, 0)) {
            return start_shared(comm, &a, (seg, SmKind::Alltoall { block: b }), (input, output), None, Vec::new(), request);
        }
        let in_place = alg::is_in_place(sendbuf);
        let (rdt, rc) = checked(recvbuf, recvcount, recvtype, p, comm)?;
        let b = rc * rdt.size;
        let mut unpack = Vec::new();
        if let Some(seg) = shared_seg(&a, b.saturating_mul(p)) {
            let own = in_place.then_some((&rdt, rc * p, recvbuf));
            // SAFETY: MPI contract: the data to send (in place: in recvbuf) stays until
            // completion.
            let input = unsafe { contribution(own, (sendbuf, sendcount.into(), sendtype, p), b * p, (comm, "alltoall"), &mut unpack)? };
            // SAFETY: MPI contract: recvbuf has room for `size` blocks until completion.
            let output = unsafe { region(&rdt, rc * p, recvbuf, false, true, 1, &mut unpack) };
            return start_shared(comm, &a, (seg, SmKind::Alltoall { block: b }), (input, output), None, unpack, request);
        }
        // Larger, on the segment with CMA: as the alltoallv, whose blocks then move by
        // cross-memory copies (in place traded between the ranks' buffers: nothing set
        // aside), no message.
        if shared_seg(&a, 0).is_some_and(|s| b <= oxmpi_coll::sm::nb::alltoallv_far(&s)) {
            let slots = |c: usize| (0..p).map(|i| (c, (i * c) as isize)).collect::<Vec<_>>();
            let send = if in_place {
                None
            } else {
                let (sdt, sc) = checked(sendbuf, sendcount, sendtype, p, comm)?;
                Some((sdt, slots(sc)))
            };
            // SAFETY: MPI contract of MPI_Ialltoall: sendbuf holds the `size` blocks to send
            // (in place: recvbuf does), recvbuf has room for `size` blocks until completion.
            return unsafe { ialltoallv(a, comm, sendbuf, send, recvbuf, (&rdt, &slots(rc)), request) };
        }
        // SAFETY: MPI contract: recvbuf has room for `size` blocks (in place: holds the data).
        let recv = unsafe { region(&rdt, rc * p, recvbuf, in_place, true, 1, &mut unpack) };
        let (counts, displs): (Vec<usize>, Vec<usize>) = (0..p).map(|i| (b, i * b)).unzip();
        let (send, sc, sd, recv, rc) = if in_place {
            aside(&a, recv, counts, displs.clone())
        } else {
            let (sdt, sc) = checked(sendbuf, sendcount, sendtype, p, comm)?;
            if sc * sdt.size != b {
                return Err(MpiError::new(MPI_ERR_TRUNCATE, "alltoall: send and receive blocks differ in size").on(comm));
            }
            // SAFETY: MPI contract: sendbuf holds `size` blocks of `sc` items until completion.
            let send = unsafe { region(&sdt, sc * p, sendbuf.cast_mut(), true, false, 0, &mut unpack) };
            (send, counts.clone(), displs.clone(), recv, counts)
        };
        let s = a.ialltoallv(send, &sc, &sd, recv, &rc, &displs).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

mpi_fn_c! {
    /// `MPI_Igatherv` (progresses in the background).
    fn PMPI_Igatherv / "MPI_Igatherv", PMPI_Igatherv_c / "MPI_Igatherv_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Disp, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::igatherv(&l, crate::intercoll::SendSpec { buf: sendbuf, count: i64::from(sendcount), datatype: sendtype }, crate::intercoll::Laid { buf: recvbuf, layout: crate::intercoll::Layout::Listed(crate::intercoll::Counts::of(recvcounts), crate::intercoll::Displs::of(displs)), datatype: recvtype }, root, request); }
        let (a, rank, size) = comm_info(comm)?;
        alg::check_root(root, size, comm)?;
        let me = rank == root;
        let in_place = alg::is_in_place(sendbuf) && me;
        let mut unpack = Vec::new();
        // On the segment whatever the sizes (every rank alike; a rank knows only its own
        // block): blocks too large for it move by message, see `SmKind::each_message`.
        if let Some(seg) = shared_seg(&a, 0) {
            let r = rank as usize;
            let (input, output, counts, displs) = if me {
                let rdt = dtype(recvtype, comm)?;
                let slots = layout(recvcounts, displs, size as usize, comm)?;
                // SAFETY: MPI contract: recvbuf has room for every block (in place: holds
                // ours, left where it is).
                let l = unsafe { laid(&rdt, recvbuf, &slots, |_| false, |i| !(in_place && i == r), 1, &mut unpack) };
                let input = if in_place {
                    none()
                } else {
                    let (sdt, sc) = checked(sendbuf, sendcount, sendtype, 1, comm)?;
                    if sc * sdt.size != l.counts[r] {
                        return Err(truncated(comm, "gatherv"));
                    }
                    // SAFETY: MPI contract: sendbuf holds `sc` items until completion.
                    unsafe { region(&sdt, sc, sendbuf.cast_mut(), true, false, 0, &mut unpack) }
                };
                (input, l.region, l.counts, l.displs)
            } else {
                let (sdt, sc) = checked(sendbuf, sendcount, sendtype, 1, comm)?;
                // SAFETY: MPI contract: sendbuf holds `sc` items until completion.
                (unsafe { region(&sdt, sc, sendbuf.cast_mut(), true, false, 0, &mut unpack) }, none(), Vec::new(), Vec::new())
            };
            let far = sched::gatherv_far(&seg);
            let kind = SmKind::Gatherv { root: root as usize, counts, displs, far };
            return start_shared(comm, &a, (seg, kind), (input, output), None, unpack, request);
        }
        let (mut recv, counts, displs) = if me {
            let rdt = dtype(recvtype, comm)?;
            let slots = layout(recvcounts, displs, size as usize, comm)?;
            let r = rank as usize;
            // SAFETY: MPI contract: recvbuf has room for every block (in place: holds ours).
            let l = unsafe { laid(&rdt, recvbuf, &slots, |i| in_place && i == r, |i| !(in_place && i == r), 1, &mut unpack) };
            (l.region, l.counts, l.displs)
        } else {
            (Region::Owned(Vec::new()), Vec::new(), Vec::new())
        };
        let send = if in_place {
            let own = rank as usize;
            alias(&mut recv, displs[own], counts[own])
        } else {
            let (sdt, sc) = checked(sendbuf, sendcount, sendtype, 1, comm)?;
            // SAFETY: MPI contract: sendbuf holds `sc` items until completion.
            unsafe { region(&sdt, sc, sendbuf.cast_mut(), true, false, 0, &mut unpack) }
        };
        let s = a.igatherv(send, recv, &counts, &displs, root).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

/// An iscatterv root's whole part at its call, on the segment `seg` and the caller's
/// memory ([`oxmpi_coll::sm::nb::scatterv_root_now`]): for predefined basic types whose
/// other blocks all go through the root's buffer, when that buffer is free, the post comes
/// before anything else (no datatype reference, no list of slots, no counts copied onto
/// the heap up to 16 ranks, no request slot) and the request is a completed one. `None`:
/// the general path, which also reports the errors (other types, NULL arrays or buffers,
/// negative counts or displacements, a receive buffer shorter than our block, larger
/// blocks, our buffer still in use).
fn iscatterv_root_now<C: CountArg, D: DispArg>(
    a: &oxmpi_coll::CollComm,
    seg: &oxmpi_coll::sm::Seg,
    (sendbuf, sendcounts, displs, sendtype): (*const c_void, *const C, *const D, c_int),
    (recvbuf, recvcount, recvtype, in_place): (*mut c_void, i64, c_int, bool),
    request: *mut c_int,
) -> Option<MpiResult> {
    let p = a.size as usize;
    let size = crate::datatype::predefined_size(sendtype)?;
    if request.is_null() || sendbuf.is_null() || sendcounts.is_null() || displs.is_null() {
        return None;
    }
    let (mut counts, mut offs) = (Words::zeros(p), Words::zeros(p));
    let end =
        crate::coll::byte_blocks((sendcounts, displs), size, (counts.as_mut(), offs.as_mut()))?;
    let own = counts[a.rank as usize];
    let out: &mut [u8] = if in_place {
        &mut []
    } else {
        let b = crate::coll::basic_bytes(recvcount, recvtype)?;
        if b < own || (b > 0 && recvbuf.is_null()) {
            return None;
        }
        if b == 0 {
            &mut []
        } else {
            // SAFETY: MPI contract: recvbuf (not NULL) has room for `recvcount` items of a
            // predefined basic type, contiguous from offset 0, apart from the send buffer.
            unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), b) }
        }
    };
    // SAFETY: MPI contract: sendbuf holds every block, `counts[i]` bytes at `offs[i]` (a
    // predefined basic type is contiguous), so `end` bytes from it; read only.
    let send = unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), end) };
    if !oxmpi_coll::sm::nb::scatterv_root_now(a, seg, send, (&counts, &offs), out) {
        return None;
    }
    Some(posted_at_call(request))
}

mpi_fn_c! {
    /// `MPI_Iscatterv` (progresses in the background).
    fn PMPI_Iscatterv / "MPI_Iscatterv", PMPI_Iscatterv_c / "MPI_Iscatterv_c" (sendbuf: *const c_void, sendcounts: *const Count, displs: *const Disp, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::iscatterv(&l, crate::intercoll::Laid { buf: sendbuf, layout: crate::intercoll::Layout::Listed(crate::intercoll::Counts::of(sendcounts), crate::intercoll::Displs::of(displs)), datatype: sendtype }, crate::intercoll::RecvSpec { buf: recvbuf, count: i64::from(recvcount), datatype: recvtype }, root, request); }
        let (a, rank, size) = comm_info(comm)?;
        alg::check_root(root, size, comm)?;
        let me = rank == root;
        let in_place = alg::is_in_place(recvbuf) && me;
        let mut unpack = Vec::new();
        // On the segment whatever the sizes, as MPI_Igatherv.
        if let Some(seg) = shared_seg(&a, 0) {
            // A root of predefined types whose blocks go through its buffer: posted first.
            if let Some(r) = me.then(|| iscatterv_root_now(&a, &seg, (sendbuf, sendcounts, displs, sendtype), (recvbuf, i64::from(recvcount), recvtype, in_place), request)).flatten() {
                return r;
            }
            let (input, counts, displs) = if me {
                let sdt = dtype(sendtype, comm)?;
                let slots = layout(sendcounts, displs, size as usize, comm)?;
                // SAFETY: MPI contract: sendbuf holds every block until completion.
                let l = unsafe { laid(&sdt, sendbuf.cast_mut(), &slots, |_| true, |_| false, 0, &mut unpack) };
                (l.region, l.counts, l.displs)
            } else {
                (none(), Vec::new(), Vec::new())
            };
            let output = if in_place {
                none()
            } else {
                let (rdt, rc) = checked(recvbuf, recvcount, recvtype, 1, comm)?;
                if me && rc * rdt.size < counts[rank as usize] {
                    return Err(truncated(comm, "scatterv"));
                }
                // SAFETY: MPI contract: recvbuf has room for `rc` items until completion.
                unsafe { region(&rdt, rc, recvbuf, false, true, 1, &mut unpack) }
            };
            let far = sched::gatherv_far(&seg);
            let kind = SmKind::Scatterv { root: root as usize, counts, displs, far };
            return start_shared(comm, &a, (seg, kind), (input, output), None, unpack, request);
        }
        let (mut send, counts, displs) = if me {
            let sdt = dtype(sendtype, comm)?;
            let slots = layout(sendcounts, displs, size as usize, comm)?;
            // SAFETY: MPI contract: sendbuf holds every block until completion.
            let l = unsafe { laid(&sdt, sendbuf.cast_mut(), &slots, |_| true, |_| false, 0, &mut unpack) };
            (l.region, l.counts, l.displs)
        } else {
            (Region::Owned(Vec::new()), Vec::new(), Vec::new())
        };
        let recv = if in_place {
            let own = rank as usize;
            alias(&mut send, displs[own], counts[own])
        } else {
            let (rdt, rc) = checked(recvbuf, recvcount, recvtype, 1, comm)?;
            // SAFETY: MPI contract: recvbuf has room for `rc` items until completion.
            unsafe { region(&rdt, rc, recvbuf, false, true, 1, &mut unpack) }
        };
        let s = a.iscatterv(send, &counts, &displs, recv, root).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

mpi_fn_c! {
    /// `MPI_Iallgatherv` (ring, progresses in the background).
    fn PMPI_Iallgatherv / "MPI_Iallgatherv", PMPI_Iallgatherv_c / "MPI_Iallgatherv_c" (sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Disp, recvtype: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::iallgatherv_c(&l, crate::intercoll::SendSpec { buf: sendbuf, count: i64::from(sendcount), datatype: sendtype }, crate::intercoll::RecvV { buf: recvbuf, counts: crate::intercoll::Counts::of(recvcounts), displs: crate::intercoll::Displs::of(displs), datatype: recvtype }, request); }
        let (a, rank, size) = comm_info(comm)?;
        // Predefined types: the caller's bytes, no datatype looked up.
        if let Some((seg, kind, input, output)) = iallgatherv_basic(&a, (sendbuf, sendcount.into(), sendtype), (recvbuf, recvcounts, displs, recvtype)) {
            return start_shared(comm, &a, (seg, kind), (input, output), None, Vec::new(), request);
        }
        let in_place = alg::is_in_place(sendbuf);
        let rdt = dtype(recvtype, comm)?;
        let slots = layout(recvcounts, displs, size as usize, comm)?;
        let me = rank as usize;
        let mut unpack = Vec::new();
        let most = slots.iter().map(|&(c, _)| c.saturating_mul(rdt.size)).max().unwrap_or(0);
        if let Some((seg, far)) = allgather_seg(&a, most) {
            let (c, d) = slots[me];
            let own = in_place.then(|| (&rdt, c, item(recvbuf, d, &rdt)));
            // SAFETY: MPI contract: the contribution (in place: our block of recvbuf) holds
            // its items until completion.
            let input = unsafe { contribution(own, (sendbuf, sendcount.into(), sendtype, 1), c * rdt.size, (comm, "allgatherv"), &mut unpack)? };
            // SAFETY: MPI contract: recvbuf has room for every block until completion.
            let l = unsafe { laid(&rdt, recvbuf, &slots, |_| false, |_| true, 1, &mut unpack) };
            let kind = allgather_kind(me, (l.counts, l.displs), in_place && unpack.is_empty(), far);
            return start_shared(comm, &a, (seg, kind), (input, l.region), None, unpack, request);
        }
        // SAFETY: MPI contract: recvbuf has room for every block (in place: holds ours).
        let l = unsafe { laid(&rdt, recvbuf, &slots, |i| in_place && i == me, |_| true, 0, &mut unpack) };
        // Out of place our block leaves from the send buffer (see `iallgatherv_from`).
        // SAFETY: MPI contract: sendbuf holds our block until completion.
        let own = if in_place { None } else { Some(unsafe { contribution(None, (sendbuf, sendcount.into(), sendtype, 1), l.counts[me], (comm, "allgatherv"), &mut unpack)? }) };
        let s = a.iallgatherv_from(l.region, own, &l.counts, &l.displs).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

mpi_fn_c! {
    /// `MPI_Ialltoallv` (progresses in the background).
    fn PMPI_Ialltoallv / "MPI_Ialltoallv", PMPI_Ialltoallv_c / "MPI_Ialltoallv_c" (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Disp, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Disp, recvtype: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::ialltoallv(&l, crate::intercoll::SendV { buf: sendbuf, counts: crate::intercoll::Counts::of(sendcounts), displs: crate::intercoll::Displs::of(sdispls), datatype: sendtype }, crate::intercoll::RecvV { buf: recvbuf, counts: crate::intercoll::Counts::of(recvcounts), displs: crate::intercoll::Displs::of(rdispls), datatype: recvtype }, request); }
        let (a, _, size) = comm_info(comm)?;
        let p = size as usize;
        let unit = |t: c_int| move |_: usize| crate::datatype::predefined_size(t).map(|s| (s, s));
        // SAFETY: MPI contract of MPI_Ialltoallv.
        if let Some(r) = unsafe { basic_sides(sendbuf, (sendcounts, sdispls, unit(sendtype)), recvbuf, (recvcounts, rdispls, unit(recvtype)), p) } {
            // SAFETY: MPI contract of MPI_Ialltoallv.
            return unsafe { ialltoallv_laid(a, comm, r, Vec::new(), request) };
        }
        let rdt = dtype(recvtype, comm)?;
        let rslots = layout(recvcounts, rdispls, p, comm)?;
        let send = if alg::is_in_place(sendbuf) {
            None
        } else {
            Some((dtype(sendtype, comm)?, layout(sendcounts, sdispls, p, comm)?))
        };
        // SAFETY: MPI contract of MPI_Ialltoallv.
        unsafe { ialltoallv(a, comm, sendbuf, send, recvbuf, (&rdt, &rslots), request) }
    }
}

/// An in-place alltoallv's schedule arguments from its buffer `recv` (block `j`: `counts[j]`
/// bytes at `displs[j]`): the blocks for the other ranks set aside ([`copied_but`]), ours
/// left where it is (its counts 0 on both sides: nothing to move), as (send region, its
/// counts and displacements, `recv`, the receive counts).
#[allow(clippy::type_complexity)]
fn aside(
    a: &oxmpi_coll::CollComm,
    mut recv: Region,
    mut counts: Vec<usize>,
    displs: Vec<usize>,
) -> (Region, Vec<usize>, Vec<usize>, Region, Vec<usize>) {
    let me = a.rank as usize;
    match copied_but(region_bytes(&mut recv), (&counts, &displs), me) {
        Some((v, sd)) if me < counts.len() => {
            counts[me] = 0;
            (Region::Owned(v), counts.clone(), sd, recv, counts)
        }
        _ => {
            let send = Region::Owned(copied(region_bytes(&mut recv)));
            (send, counts.clone(), displs, recv, counts)
        }
    }
}

/// One side of an alltoallv: the datatype and each block's `(count, displacement in extents)`.
type Side = (Arc<Datatype>, Vec<(usize, isize)>);

/// Body of `MPI_Ialltoallv` (also `MPI_Ialltoallw` on contiguous types, as bytes): `send`
/// is the send type and its `(count, displacement in extents)` slots (`None`: in place),
/// `recv` the same for the receive side.
///
/// # Safety
/// MPI contract of `MPI_Ialltoallv`: the buffers hold (or have room for) every block until
/// completion.
unsafe fn ialltoallv(
    a: oxmpi_coll::CollComm,
    comm: c_int,
    sendbuf: *const c_void,
    send: Option<Side>,
    recvbuf: *mut c_void,
    (rdt, rslots): (&Arc<Datatype>, &[(usize, isize)]),
    request: *mut c_int,
) -> MpiResult {
    let in_place = send.is_none();
    let mut unpack = Vec::new();
    // SAFETY: caller contract: recvbuf has room for every block (in place: holds the data).
    let r = unsafe { laid(rdt, recvbuf, rslots, |_| in_place, |_| true, 1, &mut unpack) };
    let send = send.map(|(sdt, sslots)| {
        // SAFETY: caller contract: sendbuf holds every block until completion.
        unsafe {
            laid(
                &sdt,
                sendbuf.cast_mut(),
                &sslots,
                |_| true,
                |_| false,
                0,
                &mut unpack,
            )
        }
    });
    // SAFETY: caller contract.
    unsafe { ialltoallv_laid(a, comm, (send, r), unpack, request) }
}

/// An alltoallv/w side of the user's memory whose every block is of a predefined basic
/// type, as a schedule region ([`laid`]'s contiguous case without a datatype reference or
/// the state lock): `unit(i)` is block `i`'s bytes per item and per unit of its
/// displacement (`None`: not such a type). `None` also for a NULL buffer, a negative count
/// or displacement of a non-empty block, or when nothing is to move: the general path
/// decides (and reports the errors).
fn basic_laid<C: CountArg, D: DispArg>(
    buf: *mut c_void,
    (counts, displs, unit): (*const C, *const D, impl Fn(usize) -> Option<(usize, usize)>),
    n: usize,
) -> Option<Laid> {
    if buf.is_null() {
        return None;
    }
    let cs = slice_in(counts, n, "counts").ok()?;
    let ds = slice_in(displs, n, "displs").ok()?;
    let (mut bc, mut bd) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut end = 0usize;
    for (i, (&k, &x)) in cs.iter().zip(ds).enumerate() {
        let (size, dunit) = unit(i)?;
        let k = usize::try_from(k.into()).ok()?.checked_mul(size)?;
        let x = if k == 0 {
            0
        } else {
            usize::try_from(x.aint()).ok()?.checked_mul(dunit)?
        };
        end = end.max(x.checked_add(k)?);
        bc.push(k);
        bd.push(x);
    }
    (end > 0).then(|| Laid {
        region: Region::Raw(buf.cast::<u8>(), end),
        counts: bc,
        displs: bd,
    })
}

/// Both sides of an alltoallv/w as [`basic_laid`] makes them (in place: the receive side
/// alone, `None` for the send side), or `None` when either side needs the general path.
///
/// # Safety
/// MPI contract of `MPI_Ialltoallv`: the buffers hold (or have room for) every block until
/// completion.
unsafe fn basic_sides<C: CountArg, D: DispArg>(
    sendbuf: *const c_void,
    send: (*const C, *const D, impl Fn(usize) -> Option<(usize, usize)>),
    recvbuf: *mut c_void,
    recv: (*const C, *const D, impl Fn(usize) -> Option<(usize, usize)>),
    n: usize,
) -> Option<(Option<Laid>, Laid)> {
    let r = basic_laid(recvbuf, recv, n)?;
    if alg::is_in_place(sendbuf) {
        return Some((None, r));
    }
    Some((Some(basic_laid(sendbuf.cast_mut(), send, n)?), r))
}

/// [`ialltoallv`] once both sides are schedule regions (`send` `None`: in place, the data
/// in `r`), with what to unpack at completion.
///
/// # Safety
/// As [`ialltoallv`].
unsafe fn ialltoallv_laid(
    a: oxmpi_coll::CollComm,
    comm: c_int,
    (send, mut r): (Option<Laid>, Laid),
    unpack: Vec<sched::Unpack>,
    request: *mut c_int,
) -> MpiResult {
    // On the segment whatever the sizes (every rank alike; a rank knows only its own
    // counts): blocks too large for it move by message, see `SmKind::each_message`.
    if let Some(seg) = shared_seg(&a, 0) {
        let me = a.rank as usize;
        let far = oxmpi_coll::sm::nb::alltoallv_far(&seg);
        let by_message = |c: &[usize]| {
            let max = oxmpi_coll::sm::nb::alltoallv_max(a.size as usize).max(far);
            (0..c.len()).any(|j| j != me && c[j] > max)
        };
        let (input, scounts, sdispls, in_place) = match send {
            Some(l) => (l.region, l.counts, l.displs, false),
            // In place with blocks to move by message: they would be received over blocks
            // still to be sent, so the blocks for the other ranks are set aside first.
            None if by_message(&r.counts) => {
                let (send, sc, sd, region, rc) = aside(&a, r.region, r.counts, r.displs.clone());
                (r.region, r.counts) = (region, rc);
                (send, sc, sd, false)
            }
            // In place otherwise: the blocks are sent from the output (read there at the
            // post, before anything is received into it); our own stays where it is.
            None => {
                if let Some(c) = r.counts.get_mut(me) {
                    *c = 0;
                }
                (none(), r.counts.clone(), r.displs.clone(), true)
            }
        };
        let kind = SmKind::Alltoallv {
            scounts,
            sdispls,
            rcounts: r.counts,
            rdispls: r.displs,
            in_place,
            far,
            // Out of place each rank asks the senders of its far blocks to write them into
            // our output (as the blocking alltoall writes): on 2 ranks from
            // `coll_sm_nonblocking_push_min`, on more from `coll_sm_nonblocking_push_many`
            // (np=8 1 MiB, loaded machine: 0.88-1.04x base's time cyclic, 0.92-0.94x block;
            // np=4 level).
            push: match (a.size, in_place) {
                (_, true) => 0,
                (2, false) => oxmpi_coll::sm::params::nonblocking_push_min(),
                (_, false) => oxmpi_coll::sm::params::nonblocking_push_many(),
            },
        };
        return start_shared(
            comm,
            &a,
            (seg, kind),
            (input, r.region),
            None,
            unpack,
            request,
        );
    }
    let (send, sc, sd) = match send {
        Some(l) => (l.region, l.counts, l.displs),
        None => {
            let (send, sc, sd, region, rc) = aside(&a, r.region, r.counts, r.displs.clone());
            (r.region, r.counts) = (region, rc);
            (send, sc, sd)
        }
    };
    let s = a
        .ialltoallv(send, &sc, &sd, r.region, &r.counts, &r.displs)
        .map_err(sched_err(comm))?;
    start(comm, s, unpack, request)
}

mpi_fn_c! {
    /// `MPI_Ialltoallw` (displacements in bytes; progresses in the background).
    fn PMPI_Ialltoallw / "MPI_Ialltoallw", PMPI_Ialltoallw_c / "MPI_Ialltoallw_c" (sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Disp, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Disp, recvtypes: *const c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::ialltoallw(&l, crate::intercoll::SendW { buf: sendbuf, counts: crate::intercoll::Counts::of(sendcounts), displs: crate::intercoll::Displs::of(sdispls), datatype: sendtypes }, crate::intercoll::RecvW { buf: recvbuf, counts: crate::intercoll::Counts::of(recvcounts), displs: crate::intercoll::Displs::of(rdispls), datatype: recvtypes }, request); }
        let (a, _, size) = comm_info(comm)?;
        let p = size as usize;
        // Predefined basic types everywhere (the commonest case): byte blocks of the user's
        // buffers straight from the arguments (no type reference, no state lock).
        let unit = |t: *const c_int| { let ts = slice_in(t, p, "types").ok(); move |i: usize| Some((crate::datatype::predefined_size(*ts?.get(i)?)?, 1)) };
        // SAFETY: MPI contract of MPI_Ialltoallw, the same blocks in bytes.
        if let Some(r) = unsafe { basic_sides(sendbuf, (sendcounts, sdispls, unit(sendtypes)), recvbuf, (recvcounts, rdispls, unit(recvtypes)), p) } {
            // SAFETY: MPI contract of MPI_Ialltoallw, the same blocks in bytes.
            return unsafe { ialltoallv_laid(a, comm, r, Vec::new(), request) };
        }
        // Contiguous types everywhere (the common case): byte blocks of the user's buffers,
        // moved as MPI_Ialltoallv moves them, without packing.
        let bytes = |counts, displs, types: *const c_int| -> MpiResult<Option<Vec<(usize, isize)>>> {
            let l = layout(counts, displs, p, comm)?;
            let t = slice_in(types, p, "types").map_err(|e| e.on(comm))?;
            let mut v = Vec::with_capacity(p);
            for ((k, d), &h) in l.into_iter().zip(t) {
                // A basic predefined type without the state lock (contiguous, bounds 0).
                if let Some(size) = crate::datatype::predefined_size(h) {
                    v.push((size * k, d));
                    continue;
                }
                let dt = dtype(h, comm)?;
                if !dt.is_contiguous() {
                    return Ok(None);
                }
                v.push((dt.size * k, d + dt.lb));
            }
            Ok(Some(v))
        };
        // In place the receive pieces alone describe the data (the send arguments are
        // ignored).
        if let Some(rs) = bytes(recvcounts, rdispls, recvtypes)? {
            let ss = if alg::is_in_place(sendbuf) { Some(None) } else { bytes(sendcounts, sdispls, sendtypes)?.map(Some) };
            if let Some(ss) = ss {
                let byte = dtype(MPI_BYTE, comm)?;
                let ss = ss.map(|ss| (byte.clone(), ss));
                // SAFETY: MPI contract of MPI_Ialltoallw, the same blocks in bytes.
                return unsafe { ialltoallv(a, comm, sendbuf, ss, recvbuf, (&byte, &rs), request) };
            }
        }
        let typed = |base: *const c_void, counts, displs, types: *const c_int| -> MpiResult<Vec<(Arc<Datatype>, usize, *mut u8)>> {
            let l = layout(counts, displs, p, comm)?;
            let t = slice_in(types, p, "types").map_err(|e| e.on(comm))?;
            l.into_iter().zip(t).map(|((k, d), &h)| {
                let dt = dtype(h, comm)?;
                // No NULL check: with MPI_BOTTOM the types hold absolute addresses.
                let at = base.cast::<u8>().wrapping_offset(d).cast_mut();
                Ok((dt, k, at))
            }).collect()
        };
        let recv = typed(recvbuf, recvcounts, rdispls, recvtypes)?;
        let mut unpack = Vec::new();
        let in_place = alg::is_in_place(sendbuf);
        let send = if in_place { recv.clone() } else { typed(sendbuf, sendcounts, sdispls, sendtypes)? };
        // SAFETY: MPI contract: every send piece holds its items (in place: the receive
        // pieces hold the data), every receive piece has room for its items until
        // completion.
        let ((mut sreg, mut sc, sd), (mut rreg, mut rc, rd)) = unsafe { (pieces(&send, false, 0, &mut unpack), pieces(&recv, true, 1, &mut unpack)) };
        // On the segment as the contiguous form (the other ranks' types may be contiguous:
        // every rank must take the same path), packed (in place our own block too).
        if let Some(seg) = shared_seg(&a, 0) {
            let far = oxmpi_coll::sm::nb::alltoallv_far(&seg);
            let me = a.rank as usize;
            // In place with blocks traded, as the contiguous ranks trade theirs: the packed
            // data in the output (same layout), traded from there; our own block stays.
            let traded = in_place && far > 0 && me < sc.len() && region_bytes(&mut sreg).len() == region_bytes(&mut rreg).len();
            if traded {
                region_bytes(&mut rreg).copy_from_slice(region_bytes(&mut sreg));
                (sreg, sc[me], rc[me]) = (none(), 0, 0);
            }
            let kind = SmKind::Alltoallv { scounts: sc, sdispls: sd, rcounts: rc, rdispls: rd, in_place: traded, far, push: 0 };
            return start_shared(comm, &a, (seg, kind), (sreg, rreg), None, unpack, request);
        }
        let s = a.ialltoallv(sreg, &sc, &sd, rreg, &rc, &rd).map_err(sched_err(comm))?;
        start(comm, s, unpack, request)
    }
}

/// Shared body of Ireduce_scatter(_block): `counts` items per rank.
fn ireduce_scatter(
    r: alg::ReduceArgs<&[usize]>,
    a: oxmpi_coll::CollComm,
    request: *mut c_int,
) -> MpiResult {
    let (sendbuf, recvbuf, comm) = (r.sendbuf, r.recvbuf, r.comm);
    let (counts, datatype, op) = (r.count, r.datatype, r.op);
    let dt = dtype(datatype, comm)?;
    let o = owned_op(&dt, datatype, op, comm)?;
    let total: usize = counts.iter().sum();
    let in_place = alg::is_in_place(sendbuf);
    let contrib = if in_place {
        recvbuf.cast_const()
    } else {
        sendbuf
    };
    alg::check_buf(contrib, &dt, total, comm)?;
    let me = a.rank as usize;
    alg::check_buf(recvbuf, &dt, counts[me], comm)?;
    let bytes: Vec<usize> = counts.iter().map(|&k| k * dt.size).collect();
    let at = bytes[..me].iter().sum();
    // The counts' mark (0 when the blocks are alike: no cost), posted with the vector's
    // length on every path of the segment: ranks that split the same sum otherwise
    // (erroneous) fail alike instead of each folding its own block.
    let equal = bytes.iter().all(|&b| b == bytes[me]);
    let mark = if equal {
        0
    } else {
        oxmpi_coll::counts_mark(bytes.iter().copied())
    };
    // Equal blocks (the same on every rank: MPI's counts), on more than 2 ranks: vectors
    // larger than a slot of the nonblocking large region may go through it in phases.
    let red = if a.size > 2 && equal {
        Reduction::ReduceScatterBlock { block: bytes[me] }
    } else {
        Reduction::ReduceScatter {
            at,
            len: bytes[me],
            mark,
        }
    };
    let small = SmKind::ReduceScatter {
        counts: bytes.clone(),
        mark,
    };
    // In place (on every rank: MPI's rule), vectors of up to 8 KiB on two ranks go by
    // message rather than by the cross-memory pair (`existing_pair`).
    if let Some(shared) = reduction_seg(&a, total.saturating_mul(dt.size), (small, red), in_place) {
        let mut unpack = Vec::new();
        // SAFETY: MPI contract: the contribution holds `total` items and recvbuf has room
        // for ours until completion.
        let io = unsafe {
            (
                region(&dt, total, contrib.cast_mut(), true, false, 0, &mut unpack),
                region(&dt, counts[me], recvbuf, false, true, 1, &mut unpack),
            )
        };
        return start_shared(comm, &a, shared, io, Some(o), unpack, request);
    }
    let mut unpack = Vec::new();
    // With the segment (not while planning a persistent one), the lengths are checked
    // there first (see `PMPI_Ireduce`); the input is region 0 there, the output region 1
    // (`CollComm::ireduce_scatter_msg`), else the other way round.
    let seg = msg_seg(&a);
    let (oi, ii) = if seg.is_some() { (1, 0) } else { (0, 1) };
    // SAFETY: MPI contract: the contribution holds `total` items and recvbuf has room for
    // our `counts[me]` items until completion (contiguous: the user's memory, read and
    // written there; otherwise packed now and unpacked at completion).
    let (out, input) = unsafe {
        (
            region(&dt, counts[me], recvbuf, false, true, oi, &mut unpack),
            region(&dt, total, contrib.cast_mut(), true, false, ii, &mut unpack),
        )
    };
    let s = match seg {
        Some(seg) => a.ireduce_scatter_msg(seg, input, out, &bytes, o),
        None => a.ireduce_scatter_from(input, out, &bytes, o),
    };
    start(comm, s.map_err(sched_err(comm))?, unpack, request)
}

mpi_fn_c! {
    /// `MPI_Ireduce_scatter_block` (progresses in the background).
    fn PMPI_Ireduce_scatter_block / "MPI_Ireduce_scatter_block", PMPI_Ireduce_scatter_block_c / "MPI_Ireduce_scatter_block_c" (sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::ireduce_scatter_block(&l, alg::ReduceArgs { sendbuf, recvbuf, count: i64::from(recvcount), datatype, op, comm }, request); }
        let (a, _, size) = comm_info(comm)?;
        let k = check_count(recvcount).map_err(|e| e.on(comm))?;
        ireduce_scatter(alg::ReduceArgs { sendbuf, recvbuf, count: &vec![k; size as usize], datatype, op, comm }, a, request)
    }
}

mpi_fn_c! {
    /// `MPI_Ireduce_scatter` (progresses in the background).
    fn PMPI_Ireduce_scatter / "MPI_Ireduce_scatter", PMPI_Ireduce_scatter_c / "MPI_Ireduce_scatter_c" (sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) {
        if let Some(l) = crate::intercomm::Link::of(comm)? { return crate::intercoll::ireduce_scatter_c(&l, alg::ReduceArgs { sendbuf, recvbuf, count: crate::intercoll::Counts::of(recvcounts), datatype, op, comm }, request); }
        let (a, _, size) = comm_info(comm)?;
        let counts = slice_in(recvcounts, size as usize, "recvcounts").map_err(|e| e.on(comm))?
            .iter().map(|&k| check_count(k).map_err(|e| e.on(comm))).collect::<MpiResult<Vec<_>>>()?;
        ireduce_scatter(alg::ReduceArgs { sendbuf, recvbuf, count: &counts, datatype, op, comm }, a, request)
    }
}

/// Shared body of Iscan and Iexscan.
fn iscan(r: alg::ReduceArgs<i64>, exclusive: bool, request: *mut c_int) -> MpiResult {
    let (sendbuf, recvbuf, comm) = (r.sendbuf, r.recvbuf, r.comm);
    let (count, datatype, op) = (r.count, r.datatype, r.op);
    let (a, rank, _) = comm_info(comm)?;
    let n = check_count(count).map_err(|e| e.on(comm))?;
    let dt = dtype(datatype, comm)?;
    let o = owned_op(&dt, datatype, op, comm)?;
    let src = if alg::is_in_place(sendbuf) {
        recvbuf.cast_const()
    } else {
        sendbuf
    };
    alg::check_buf(src, &dt, n, comm)?;
    alg::check_buf(recvbuf, &dt, n, comm)?;
    let mut unpack = Vec::new();
    let store = !(exclusive && rank == 0);
    let kinds = (SmKind::Scan { exclusive }, Reduction::Scan { exclusive });
    if let Some(shared) = reduction_seg(&a, dt.size.saturating_mul(n), kinds, false) {
        // SAFETY: MPI contract: the contribution holds `n` items and recvbuf has room for
        // them until completion.
        let io = unsafe {
            (
                region(&dt, n, src.cast_mut(), true, false, 0, &mut unpack),
                region(&dt, n, recvbuf, false, store, 1, &mut unpack),
            )
        };
        return start_shared(comm, &a, shared, io, Some(o), unpack, request);
    }
    // SAFETY: MPI contract: the contribution holds `n` items and recvbuf has room for
    // them until completion (contiguous: the user's memory; otherwise packed now and
    // unpacked at completion).
    let (out, input) = unsafe {
        (
            region(&dt, n, recvbuf, false, store, 0, &mut unpack),
            region(&dt, n, src.cast_mut(), true, false, 1, &mut unpack),
        )
    };
    // With the segment, the lengths are checked there first (see `PMPI_Ireduce`); a
    // persistent scan compared them at its init; otherwise the rounds check them (the
    // chain's ranks over recursive doubling's messages first, `CollComm::iscan_from`).
    let s = match msg_seg(&a) {
        Some(seg) => a.iscan_msg(seg, out, input, o, exclusive),
        None if planning() => a.iscan_agreed(out, input, o, exclusive),
        None => a.iscan_from(out, input, o, exclusive),
    };
    start(comm, s.map_err(sched_err(comm))?, unpack, request)
}

mpi_fn_c! {
    /// `MPI_Iscan` (recursive doubling, progresses in the background).
    fn PMPI_Iscan / "MPI_Iscan", PMPI_Iscan_c / "MPI_Iscan_c" (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) {
        crate::intercomm::require_intra(comm, "MPI_Iscan")?;
        iscan(alg::ReduceArgs { sendbuf, recvbuf, count: count.into(), datatype, op, comm }, false, request)
    }
}

mpi_fn_c! {
    /// `MPI_Iexscan` (recursive doubling, progresses in the background; the result on rank
    /// 0 is undefined and left untouched).
    fn PMPI_Iexscan / "MPI_Iexscan", PMPI_Iexscan_c / "MPI_Iexscan_c" (sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) {
        crate::intercomm::require_intra(comm, "MPI_Iexscan")?;
        iscan(alg::ReduceArgs { sendbuf, recvbuf, count: count.into(), datatype, op, comm }, true, request)
    }
}

/// A neighbourhood exchange as a schedule: `sends[j]` (datatype, count, address) goes to
/// outgoing neighbour `j`, `recvs[i]` is received from incoming neighbour `i`; both lists
/// of `(rank, tag)` come from the topology (`MPI_PROC_NULL` neighbours are skipped, their
/// receive blocks left untouched). One round; the tag separates the directions of a
/// Cartesian grid.
///
/// # Safety
/// Every send block holds its items; every receive block has room for its items until
/// the schedule completes.
pub(crate) unsafe fn ineighbor(
    comm: c_int,
    ins: &[(i32, i32)],
    outs: &[(i32, i32)],
    sends: Vec<(Arc<Datatype>, usize, *mut u8)>,
    mut recvs: Vec<(Arc<Datatype>, usize, *mut u8)>,
    request: *mut c_int,
) -> MpiResult {
    let (a, _, _) = comm_info(comm)?;
    for (i, r) in recvs.iter_mut().enumerate() {
        if ins[i].0 == MPI_PROC_NULL {
            r.1 = 0;
        }
    }
    let mut unpack = Vec::new();
    // SAFETY: caller contract (neighbourhood collectives have no `MPI_IN_PLACE`: send and
    // receive blocks do not overlap).
    let ((sreg, sc, sd), (rreg, rc, rd)) = unsafe {
        (
            spanned(&sends, false, 0, &mut unpack),
            spanned(&recvs, true, 1, &mut unpack),
        )
    };
    let mut s = Schedule::new(&a, vec![sreg, rreg], None).map_err(sched_err(comm))?;
    let lane = |t: i32| Lane {
        link: 0,
        sub: t as u16,
    };
    for (i, &(peer, t)) in ins.iter().enumerate() {
        s.recv(lane(t), (1, rd[i]), rc[i], peer);
    }
    for (j, &(peer, t)) in outs.iter().enumerate() {
        s.send(lane(t), (0, sd[j]), sc[j], peer);
    }
    start(comm, s, unpack, request)
}
