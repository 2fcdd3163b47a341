//! The link from the C collectives (`coll.rs`) to the algorithm layer `oxmpi-coll`
//! (tree, recursive-doubling, ring, Bruck algorithms over the communicator's collective
//! context), and the typed reduction callback it needs.
//!
//! Data is handed to `oxmpi-coll` packed (the datatype's type map in order, no gaps); for a
//! contiguous datatype the user's buffer is used directly. Reductions run the operation
//! (`op.rs`) on whole items: directly on packed bytes when the packed form equals the
//! type's memory layout, otherwise after unpacking into a scratch buffer in the type's
//! layout (and packing the result back).

use crate::backend::{self, EComm};
use crate::consts::*;
use crate::datatype::{pack_into, unpack_from, Datatype};
use crate::ffi::{MpiError, MpiResult};
use oxmpi_coll::op::{ElemType, OpKind as Kernel};
use oxmpi_coll::CollComm;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// The algorithm layer over the collective context `ctx` of communicator `comm`.
pub(crate) fn alg(ctx: EComm, comm: c_int) -> MpiResult<CollComm> {
    let eng = backend::engine()?;
    CollComm::on_context(eng, ctx, ctx).map_err(|e| backend::err(e).on(comm))
}

/// Map an `oxmpi-coll` error onto the communicator's error handler.
pub(crate) fn err(comm: c_int) -> impl Fn(oxmpi_engine::Error) -> MpiError {
    move |e| backend::err(e).on(comm)
}

/// `count` items of a contiguous datatype at `buf` as one byte slice, if the type is
/// contiguous (`None` otherwise).
///
/// # Safety
/// `buf` must hold `count` items of `dt` (MPI contract), valid for the returned lifetime.
pub(crate) unsafe fn contig<'a>(
    dt: &Datatype,
    count: usize,
    buf: *mut c_void,
) -> Option<&'a mut [u8]> {
    if !dt.is_contiguous() {
        return None;
    }
    let n = dt.size * count;
    if n == 0 {
        return Some(&mut []);
    }
    if buf.is_null() {
        return None;
    }
    // SAFETY: a contiguous type's `count` items occupy `size * count` bytes from
    // `buf + lb` (caller contract).
    Some(unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>().offset(dt.lb), n) })
}

/// Pack `count` items of `dt` at `buf`.
///
/// # Safety
/// `buf` must hold `count` items of `dt`.
pub(crate) unsafe fn pack(dt: &Datatype, count: usize, buf: *const c_void) -> Vec<u8> {
    let mut v = Vec::with_capacity(dt.size * count);
    // SAFETY: caller contract.
    unsafe { pack_into(dt, count, buf.cast(), &mut v) };
    v
}

/// Unpack packed `data` into `count` items of `dt` at `buf`.
///
/// # Safety
/// `buf` must have room for `count` items of `dt`.
pub(crate) unsafe fn unpack(dt: &Datatype, count: usize, buf: *mut c_void, data: &[u8]) {
    // SAFETY: caller contract.
    unsafe { unpack_from(dt, count, buf.cast(), data) };
}

/// A scratch buffer holding items of a datatype in its memory layout.
struct Layout {
    v: Vec<u8>,
    shift: isize,
}

impl Layout {
    fn new(dt: &Datatype, count: usize) -> Layout {
        let span = if count == 0 {
            0
        } else {
            (dt.true_ub - dt.true_lb) as usize + (count - 1) * dt.extent().unsigned_abs()
        };
        Layout {
            // u64 storage would be nicer for alignment; malloc'd blocks are 16-aligned.
            v: vec![0u8; span.max(1)],
            shift: -dt.true_lb,
        }
    }
    fn ptr(&mut self) -> *mut c_void {
        self.v.as_mut_ptr().wrapping_offset(self.shift).cast()
    }
}

/// How a reduction runs on packed items.
#[derive(Clone, Copy)]
enum Mode {
    /// Packed bytes equal the memory layout (contiguous, starting at offset 0).
    Direct,
    /// Builtin op on a derived type of one unpadded basic type: packed data is an array of
    /// that type (handle, size).
    Basic(c_int, usize),
    /// Unpack into the type's layout, reduce, pack back.
    Layout,
}

/// A reduction (op on a datatype) usable as an `oxmpi_coll::Op` on packed items.
pub(crate) struct Reducer {
    dt: Arc<Datatype>,
    dth: c_int,
    op: c_int,
    mode: Mode,
    commutative: bool,
    /// Predefined op on data that is a dense array of one basic type (its kernel element
    /// type, size): run directly by the `oxmpi_coll::op` kernels (no lock, no allocation).
    fast: Option<(Option<ElemType>, usize)>,
    /// The kernel operation of a predefined op.
    kernel: Option<Kernel>,
}

impl Reducer {
    /// Validate `(op, datatype)` and build the reducer (run before any communication so
    /// that an invalid pair fails on every rank alike, without a partial collective).
    pub(crate) fn new(dt: &Arc<Datatype>, dth: c_int, op: c_int) -> MpiResult<Reducer> {
        let dt = dt.clone();
        let kind = crate::op::op_kind(op)?;
        let (builtin, commutative) = match kind {
            crate::op::OpKind::Builtin(_) => (true, true),
            crate::op::OpKind::User(_, c) => (false, c),
        };
        let mut mode = if dt.is_contiguous() && dt.lb == 0 && dt.true_lb == 0 {
            Mode::Direct
        } else {
            Mode::Layout
        };
        let mut fast = None;
        if builtin {
            match (dt.predefined, dt.basic) {
                (true, _) if matches!(mode, Mode::Direct) && dt.size > 0 => {
                    fast = Some((dth, dt.size));
                }
                (false, Some(b)) => {
                    // Packed data of a derived type made of one basic type is a dense array
                    // of that type: reduce it as such (when the basic type has no padding).
                    let bt = crate::state::lock().dtype(b)?;
                    if bt.size > 0 && bt.size as isize == bt.extent() {
                        mode = Mode::Basic(b, bt.size);
                        fast = Some((b, bt.size));
                    }
                }
                _ => {}
            }
        }
        let r = Reducer {
            dt,
            dth,
            op,
            mode,
            commutative,
            fast: fast.map(|(b, size)| (crate::op::elem_type(b), size)),
            kernel: crate::op::builtin_op(op),
        };
        if let Some((b, size)) = fast {
            // One zero item (on the stack): fails for (op, type) pairs MPI does not define.
            let mut x = [0u128; 4];
            let y = [0u128; 4];
            if size <= std::mem::size_of_val(&x) {
                // SAFETY: both buffers hold one (zero) item of the basic type, 16-aligned.
                let ok = unsafe {
                    crate::op::apply_builtin(op, b, y.as_ptr().cast(), x.as_mut_ptr().cast(), 1)
                };
                if !ok {
                    mpi_bail!(
                        MPI_ERR_OP,
                        "operation {op:#x} is not defined for datatype {dth:#x}"
                    );
                }
            }
        } else if r.dt.size > 0 && builtin {
            // Try one zero item: fails for (op, type) pairs MPI does not define.
            let zero = vec![0u8; r.dt.size];
            let mut b = zero.clone();
            r.try_apply(&zero, &mut b)?;
        }
        Ok(r)
    }

    /// Element size (bytes of one packed item).
    pub(crate) fn elem(&self) -> usize {
        self.dt.size.max(1)
    }

    pub(crate) fn commutative(&self) -> bool {
        self.commutative
    }

    /// `inout = in ∘ inout` on packed items.
    pub(crate) fn apply(&self, a: &[u8], b: &mut [u8]) {
        if let Some((h, size)) = self.fast {
            let align = size.min(16);
            if (a.as_ptr() as usize | b.as_ptr() as usize) % align == 0 && a.len() == b.len() {
                // SAFETY: both slices hold `len / size` items of the basic type `h`, aligned
                // for it; the pair was validated in `new`.
                let ok = unsafe {
                    let n = a.len() / size;
                    match (self.kernel, h) {
                        (Some(o), Some(t)) => {
                            oxmpi_coll::op::apply_fast(o, t, a.as_ptr(), b.as_mut_ptr(), n)
                                || oxmpi_coll::op::apply(o, t, a.as_ptr(), b.as_mut_ptr(), n)
                        }
                        _ => false,
                    }
                };
                if ok {
                    return;
                }
            }
        }
        // Validated in `new`; a failure here would leave the collective half done.
        if let Err(e) = self.try_apply(a, b) {
            panic!("reduction failed after validation: {}", e.detail);
        }
    }

    fn try_apply(&self, a: &[u8], b: &mut [u8]) -> MpiResult {
        if self.dt.size == 0 || a.is_empty() {
            return Ok(());
        }
        let k = a.len() / self.dt.size;
        let aligned = (a.as_ptr() as usize | b.as_ptr() as usize) % 16 == 0;
        match self.mode {
            // SAFETY: packed == layout for this type; both slices hold `k` items.
            Mode::Direct if aligned => unsafe {
                crate::op::reduce_local(
                    a.as_ptr().cast(),
                    b.as_mut_ptr().cast(),
                    k,
                    self.dth,
                    self.op,
                )
            },
            // SAFETY: both slices hold `len / size` items of the predefined basic type.
            Mode::Basic(h, size) if aligned => unsafe {
                crate::op::reduce_local(
                    a.as_ptr().cast(),
                    b.as_mut_ptr().cast(),
                    a.len() / size,
                    h,
                    self.op,
                )
            },
            Mode::Basic(..) | Mode::Direct => {
                // Misaligned views: reduce aligned copies.
                let mut x = a.to_vec();
                let mut y = b.to_vec();
                debug_assert!((x.as_ptr() as usize | y.as_ptr() as usize) % 8 == 0);
                let r = self.try_apply_aligned(&mut x, &mut y);
                b.copy_from_slice(&y);
                r
            }
            Mode::Layout => {
                let mut la = Layout::new(&self.dt, k);
                let mut lb = Layout::new(&self.dt, k);
                let (pa, pb) = (la.ptr(), lb.ptr());
                // SAFETY: the scratch buffers span `k` items of the type; the packed data
                // holds `k` items.
                unsafe {
                    unpack_from(&self.dt, k, pa.cast(), a);
                    unpack_from(&self.dt, k, pb.cast(), b);
                }
                // SAFETY: both scratch buffers hold `k` items.
                unsafe { crate::op::reduce_local(pa, pb, k, self.dth, self.op)? };
                let mut out = Vec::with_capacity(b.len());
                // SAFETY: `lb` holds `k` items.
                unsafe { pack_into(&self.dt, k, pb.cast(), &mut out) };
                b.copy_from_slice(&out);
                Ok(())
            }
        }
    }

    /// Like `try_apply` on freshly allocated (malloc-aligned) buffers.
    fn try_apply_aligned(&self, a: &mut [u8], b: &mut [u8]) -> MpiResult {
        let n = match self.mode {
            Mode::Basic(h, size) => (h, a.len() / size),
            _ => (self.dth, a.len() / self.dt.size),
        };
        // SAFETY: both buffers hold `n.1` items of type `n.0` (see `try_apply`).
        unsafe {
            crate::op::reduce_local(a.as_ptr().cast(), b.as_mut_ptr().cast(), n.1, n.0, self.op)
        }
    }
}

/// Run `f` with an `oxmpi_coll::Op` view of the reducer.
pub(crate) fn with_op<R>(r: &Reducer, f: impl FnOnce(&oxmpi_coll::Op) -> R) -> R {
    let apply = |a: &[u8], b: &mut [u8]| r.apply(a, b);
    let op = oxmpi_coll::Op {
        f: &apply,
        elem_size: r.elem(),
        commutative: r.commutative(),
    };
    f(&op)
}

/// `MPI_IN_PLACE` (MPICH: `(void *) -1`).
pub(crate) fn is_in_place(p: *const c_void) -> bool {
    p as isize == -1
}

/// Fail with `MPI_ERR_BUFFER` for a NULL buffer that should hold data of a predefined type
/// (with a derived type, NULL is `MPI_BOTTOM` and the type holds absolute addresses).
pub(crate) fn check_buf(p: *const c_void, dt: &Datatype, count: usize, comm: c_int) -> MpiResult {
    if p.is_null() && dt.size * count > 0 && dt.predefined {
        return Err(MpiError::new(MPI_ERR_BUFFER, "NULL buffer with a nonzero count").on(comm));
    }
    Ok(())
}

/// Check a root argument.
pub(crate) fn check_root(root: c_int, size: i32, comm: c_int) -> MpiResult {
    if !(0..size).contains(&root) {
        return Err(
            MpiError::new(MPI_ERR_ROOT, format!("invalid root {root} (size {size})")).on(comm),
        );
    }
    Ok(())
}

/// `MPI_Barrier` over `a` (the collective view of `comm`).
pub(crate) fn barrier(a: &CollComm, comm: c_int) -> MpiResult {
    if let Some(seg) = shm::get(a, comm, oxmpi_coll::tune::Coll::Barrier)? {
        seg.barrier();
        return Ok(());
    }
    a.barrier().map_err(err(comm))
}

/// `MPI_Bcast` of `count` items of `dt` at `buffer` from `root`.
///
/// # Safety
/// `buffer` holds (at the root) or has room for `count` items of `dt`.
pub(crate) unsafe fn bcast(
    a: &CollComm,
    comm: c_int,
    buffer: *mut c_void,
    count: usize,
    dt: &Datatype,
    root: c_int,
) -> MpiResult {
    check_root(root, a.size, comm)?;
    check_buf(buffer, dt, count, comm)?;
    let bytes = count * dt.size;
    let seg = if bytes > 0 && bytes <= shm::DATA {
        shm::get(a, comm, oxmpi_coll::tune::Coll::Bcast)?
    } else {
        None
    };
    // SAFETY: caller contract.
    if let Some(s) = unsafe { contig(dt, count, buffer) } {
        return match seg {
            Some(seg) => {
                seg.bcast(s, root as usize);
                Ok(())
            }
            None => a.bcast(s, root).map_err(err(comm)),
        };
    }
    let mut data = if a.rank == root {
        // SAFETY: caller contract.
        unsafe { pack(dt, count, buffer) }
    } else {
        vec![0u8; count * dt.size]
    };
    match seg {
        Some(seg) => seg.bcast(&mut data, root as usize),
        None => a.bcast(&mut data, root).map_err(err(comm))?,
    }
    if a.rank != root {
        // SAFETY: caller contract.
        unsafe { unpack(dt, count, buffer, &data) };
    }
    Ok(())
}

/// `MPI_Reduce` (`sendbuf` may be `MPI_IN_PLACE` at the root).
///
/// # Safety
/// MPI contract of `MPI_Reduce` for the buffers.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn reduce(
    a: &CollComm,
    comm: c_int,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    dt: &Arc<Datatype>,
    dth: c_int,
    op: c_int,
    root: c_int,
) -> MpiResult {
    check_root(root, a.size, comm)?;
    let red = Reducer::new(dt, dth, op).map_err(|e| e.on(comm))?;
    let src = if is_in_place(sendbuf) && a.rank == root {
        recvbuf.cast_const()
    } else {
        sendbuf
    };
    check_buf(src, dt, count, comm)?;
    if a.rank == root {
        check_buf(recvbuf, dt, count, comm)?;
    }
    // SAFETY: caller contract.
    let mut buf = unsafe { pack(dt, count, src) };
    with_op(&red, |o| a.reduce(&mut buf, root, o)).map_err(err(comm))?;
    if a.rank == root {
        // SAFETY: caller contract.
        unsafe { unpack(dt, count, recvbuf, &buf) };
    }
    Ok(())
}

/// `MPI_Allreduce` (`sendbuf` may be `MPI_IN_PLACE`).
///
/// # Safety
/// MPI contract of `MPI_Allreduce` for the buffers.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn allreduce(
    a: &CollComm,
    comm: c_int,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: usize,
    dt: &Arc<Datatype>,
    dth: c_int,
    op: c_int,
) -> MpiResult {
    let red = Reducer::new(dt, dth, op).map_err(|e| e.on(comm))?;
    let in_place = is_in_place(sendbuf);
    check_buf(sendbuf, dt, count, comm)?;
    check_buf(recvbuf, dt, count, comm)?;
    let bytes = count * dt.size;
    let small = bytes <= shm::DATA;
    // Between `DATA` and `coll_sm_allreduce_large_min`, point-to-point algorithms (measured
    // faster there on a loaded 2-core machine: the large region's three synchronisations
    // cost more than they save).
    let large =
        (oxmpi_coll::tune::sm_large_min().max(shm::DATA + 1)..=shm::BIG_MAX).contains(&bytes);
    let seg = if bytes > 0 && (small || large) {
        shm::get(a, comm, oxmpi_coll::tune::Coll::Allreduce)?
    } else {
        None
    };
    // SAFETY: caller contract (recvbuf has room for `count` items).
    if let Some(r) = unsafe { contig(dt, count, recvbuf) } {
        let s = if in_place {
            None
        } else {
            // SAFETY: caller contract: sendbuf holds `count` items of the contiguous type,
            // not overlapping recvbuf.
            match unsafe { contig(dt, count, sendbuf.cast_mut()) } {
                Some(s) => Some(&*s),
                None => mpi_bail!(MPI_ERR_BUFFER, "NULL send buffer"),
            }
        };
        if let Some(seg) = &seg {
            if !small && seg.allreduce_big(a, comm, s, r, &red)? {
                return Ok(());
            }
        }
        if let Some(s) = s {
            r.copy_from_slice(s);
        }
        if let (Some(seg), true) = (&seg, small) {
            seg.allreduce(r, &red);
            return Ok(());
        }
        return with_op(&red, |o| a.allreduce(r, o)).map_err(err(comm));
    }
    let src = if in_place {
        recvbuf.cast_const()
    } else {
        sendbuf
    };
    // SAFETY: caller contract.
    let mut buf = unsafe { pack(dt, count, src) };
    let done = match &seg {
        Some(seg) if small => {
            seg.allreduce(&mut buf, &red);
            true
        }
        Some(seg) => seg.allreduce_big(a, comm, None, &mut buf, &red)?,
        None => false,
    };
    if !done {
        with_op(&red, |o| a.allreduce(&mut buf, o)).map_err(err(comm))?;
    }
    // SAFETY: caller contract.
    unsafe { unpack(dt, count, recvbuf, &buf) };
    Ok(())
}

// ---- byte views of typed buffers ----

/// Bytes to send: `count` items of `dt` at `buf`, borrowed when the type is contiguous,
/// packed otherwise.
pub(crate) enum SendBytes<'a> {
    Borrowed(&'a [u8]),
    Packed(Vec<u8>),
}

impl SendBytes<'_> {
    /// # Safety
    /// `buf` holds `count` items of `dt`, readable for the returned lifetime.
    pub(crate) unsafe fn new(dt: &Datatype, count: usize, buf: *const c_void) -> Self {
        if dt.is_contiguous() && dt.size > 0 && !buf.is_null() {
            // SAFETY: a contiguous type's `count` items occupy `size * count` bytes from
            // `buf + lb` (caller contract).
            let s = unsafe {
                std::slice::from_raw_parts(buf.cast::<u8>().offset(dt.lb), dt.size * count)
            };
            return SendBytes::Borrowed(s);
        }
        // SAFETY: caller contract.
        SendBytes::Packed(unsafe { pack(dt, count, buf) })
    }
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            SendBytes::Borrowed(s) => s,
            SendBytes::Packed(v) => v,
        }
    }
}

/// Blocks of items of one datatype in a user buffer, block `i` being `slots[i] = (count,
/// displacement in extents)`, seen as one byte buffer with byte `counts`/`displs` for
/// `oxmpi-coll`: the user's memory itself when the type is contiguous and no displacement is
/// negative, otherwise a packed scratch buffer (blocks back to back) that [`Blocks::store`]
/// unpacks.
pub(crate) struct Blocks<'a> {
    pub counts: Vec<usize>,
    pub displs: Vec<usize>,
    direct: Option<&'a mut [u8]>,
    scratch: Vec<u8>,
    dt: &'a Datatype,
    buf: *mut c_void,
    slots: Vec<(usize, isize)>,
}

impl<'a> Blocks<'a> {
    /// The view; with `fill`, a scratch buffer gets the blocks' current contents (blocks
    /// for which `fill` returns true).
    ///
    /// # Safety
    /// `buf` holds (or has room for) every block, valid for the lifetime `'a`.
    pub(crate) unsafe fn new(
        dt: &'a Datatype,
        buf: *mut c_void,
        slots: Vec<(usize, isize)>,
        fill: impl Fn(usize) -> bool,
    ) -> Self {
        let size = dt.size;
        let ext = dt.extent();
        let direct_ok = dt.is_contiguous()
            && size > 0
            && !buf.is_null()
            && slots.iter().all(|&(c, d)| c == 0 || d >= 0);
        let mut counts = Vec::with_capacity(slots.len());
        let mut displs = Vec::with_capacity(slots.len());
        if direct_ok {
            let mut end = 0usize;
            for &(c, d) in &slots {
                let off = if c == 0 { 0 } else { (d * ext) as usize };
                counts.push(c * size);
                displs.push(off);
                end = end.max(off + c * size);
            }
            // SAFETY: every block lies in `buf + lb .. + end` (caller contract).
            let s = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>().offset(dt.lb), end) };
            return Blocks {
                counts,
                displs,
                direct: Some(s),
                scratch: Vec::new(),
                dt,
                buf,
                slots,
            };
        }
        let mut scratch = Vec::new();
        for (i, &(c, d)) in slots.iter().enumerate() {
            counts.push(c * size);
            displs.push(scratch.len());
            if fill(i) {
                let p = buf.cast::<u8>().wrapping_offset(d * ext).cast::<c_void>();
                // SAFETY: block `i` holds `c` items (caller contract).
                unsafe { pack_into(dt, c, p.cast(), &mut scratch) };
            } else {
                scratch.resize(scratch.len() + c * size, 0);
            }
        }
        Blocks {
            counts,
            displs,
            direct: None,
            scratch,
            dt,
            buf,
            slots,
        }
    }

    /// The byte buffer handed to `oxmpi-coll`.
    pub(crate) fn bytes(&mut self) -> &mut [u8] {
        match &mut self.direct {
            Some(s) => s,
            None => &mut self.scratch,
        }
    }

    /// Block `i` as bytes.
    pub(crate) fn block(&mut self, i: usize) -> &mut [u8] {
        let (d, c) = (self.displs[i], self.counts[i]);
        &mut self.bytes()[d..d + c]
    }

    /// Unpack the scratch buffer's blocks for which `which` is true into the user buffer
    /// (nothing to do for a direct view).
    pub(crate) fn store(&self, which: impl Fn(usize) -> bool) {
        if self.direct.is_some() {
            return;
        }
        for (i, &(c, d)) in self.slots.iter().enumerate() {
            if which(i) {
                let p = self.buf.cast::<u8>().wrapping_offset(d * self.dt.extent());
                let data = &self.scratch[self.displs[i]..self.displs[i] + self.counts[i]];
                // SAFETY: block `i` has room for `c` items (contract of `new`).
                unsafe { unpack_from(self.dt, c, p, data) };
            }
        }
    }
}

/// `(count, i * count)` for `n` blocks.
pub(crate) fn regular(n: usize, count: usize) -> Vec<(usize, isize)> {
    (0..n).map(|i| (count, (i * count) as isize)).collect()
}

/// Shared-memory paths for barrier, bcast, alltoall and allreduce of small vectors, and for
/// allreduce of large vectors ([`shm::Seg::allreduce_big`], from
/// `coll_sm_allreduce_large_min` bytes), on any intracommunicator whose ranks all run on one
/// node.
///
/// Each such communicator gets, lazily at its first eligible collective, one segment
/// (a `memfd` made by rank 0 and opened by the others through `/proc/<pid>/fd/<fd>`: no
/// file name ever exists) with a slot per rank: a *done* word on its own cache line, then
/// [`NBUF`] buffers used round robin, each a *stamp* word followed by up to [`DATA`] bytes
/// of data (the stamp and the first 56 data bytes share a cache line, so a small message
/// costs the reader one line transfer). Collective number `k` on the communicator uses
/// buffer `k mod NBUF`.
///
/// Protocol. A contributing rank writes its data, then stores `k` in the buffer's stamp
/// (release); a reader waits for the stamp to reach `k` (acquire) and reads. A rank stores
/// `k` in its done word once it has finished reading everything of collective `k`:
/// * barrier, allreduce, alltoall: every rank writes (the barrier no data) and waits for
///   every other rank's stamp, then reads;
/// * bcast: only the root writes and does not wait; the others wait for its stamp. A
///   broadcast of at most 56 bytes goes through the root's *lane* instead, [`LANE`] lines
///   each holding a stamp and the payload, so a root may run up to `LANE - 1` ahead.
///
/// Before writing buffer `k mod NBUF` a rank waits until every rank's done word has reached
/// `k - NBUF` (nobody reads that buffer for collective `k - NBUF` any more; lane lines:
/// `k - LANE`); the lowest done
/// word seen is cached, so this costs no cache-line transfer in the common case and a run of
/// broadcasts may pipeline up to `NBUF - 1` ahead. Allreduce folds all ranks' buffers in
/// rank order (`x0 ∘ (x1 ∘ (… ∘ x(p-1)))`): every rank computes the identical result, for
/// any operation.
///
/// Every rank takes the same decision at every collective (it depends only on the
/// communicator and on arguments MPI requires to match). Segments of freed communicators are
/// unmapped when the next segment is made. `coll_sm_enable` (default on) turns the paths off;
/// forcing an algorithm with `coll_tuned_<coll>_algorithm` turns it off for that collective.
pub(crate) mod shm {
    use super::{CollComm, Reducer};
    use crate::ffi::{MpiError, MpiResult};
    use oxmpi_coll::tune::{self, Coll};
    use oxmpi_engine::CommId;
    use std::collections::HashMap;
    use std::ffi::c_int;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    const LINE: usize = 64;
    /// Bytes of one data buffer (vectors up to this size take the shared-memory path).
    pub(crate) const DATA: usize = 4096;
    /// Largest allreduce vector through the large region ([`Seg::allreduce_big`]).
    pub(crate) const BIG_MAX: usize = 8 << 20;
    /// Buffers per rank (a broadcast root may run `NBUF - 1` collectives ahead).
    pub(crate) const NBUF: u64 = 8;
    /// One buffer: the stamp word, then the data (`DATA` bytes, rounded to whole lines).
    const BUF: usize = LINE + DATA;
    /// Lines of a rank's lane for broadcasts of at most [`LANE_DATA`] bytes (a root may run
    /// `LANE - 1` of them ahead: oversubscribed ranks then switch far less often).
    const LANE: u64 = 64;
    /// Payload of one lane line (after its stamp).
    const LANE_DATA: usize = LINE - 8;
    const SLOT: usize = LINE + NBUF as usize * BUF + LANE as usize * LINE;
    /// Largest communicator with a segment.
    const MAX_RANKS: i32 = 64;

    /// A communicator's mapped segment.
    pub(crate) struct Seg {
        base: *mut u8,
        len: usize,
        rank: usize,
        size: usize,
        /// Our next sequence number (collectives on one communicator are serialized by the
        /// MPI rules).
        seq: AtomicU64,
        /// Number of large allreduces done.
        last_big: AtomicU64,
        /// A lower bound of every other rank's done word (cached, see the module doc).
        min_done: AtomicU64,
        /// The region of large allreduces, made at the first one (remade larger on demand),
        /// and whether it is not to be used (making it failed, or some rank yields when
        /// idle): large allreduces then stay point-to-point.
        big: Mutex<(Option<Big>, bool)>,
        yield_idle: bool,
    }

    /// A region of `size` slots of `cap` bytes for large allreduces.
    pub(crate) struct Big {
        base: *mut u8,
        cap: usize,
        len: usize,
    }

    impl Drop for Big {
        fn drop(&mut self) {
            // SAFETY: our own mapping of `len` bytes; no reference into it outlives `self`.
            unsafe { libc::munmap(self.base.cast(), self.len) };
        }
    }

    // SAFETY: the mapping lives as long as the `Big`; access is ordered by the segment's
    // sequence words (see `Seg::allreduce_big`).
    unsafe impl Send for Big {}

    // SAFETY: the mapping lives as long as the `Seg`; concurrent access goes through the
    // atomic sequence words with release/acquire ordering (see the module comment).
    unsafe impl Send for Seg {}
    // SAFETY: as above.
    unsafe impl Sync for Seg {}

    impl Drop for Seg {
        fn drop(&mut self) {
            // SAFETY: our own mapping of `len` bytes; no reference into it outlives `self`.
            unsafe { libc::munmap(self.base.cast(), self.len) };
        }
    }

    /// Segments by collective-context engine communicator (`None`: no segment possible).
    /// Engine communicator ids are never reused.
    type Segs = HashMap<u32, Option<Arc<Seg>>>;
    static SEGS: Mutex<Option<Segs>> = Mutex::new(None);

    thread_local! {
        /// This thread's last entry of [`SEGS`] (programs mostly run their collectives on
        /// one communicator: no lock, no hashing then). Ids are never reused, so a stale
        /// entry is never hit.
        static LAST: std::cell::RefCell<Option<(u32, Option<Arc<Seg>>)>> =
            const { std::cell::RefCell::new(None) };
    }

    impl Seg {
        /// Rank `r`'s done word: it has read everything of the collectives up to this one.
        fn seq_word(&self, r: usize) -> &AtomicU64 {
            // SAFETY: slot `r` is inside the mapping, its first 8 bytes are 8-aligned (the
            // mapping is page-aligned, SLOT a multiple of 64) and only accessed atomically.
            unsafe { &*(self.base.add(r * SLOT).cast::<AtomicU64>()) }
        }
        /// Rank `r`'s stamp of buffer `k mod NBUF`.
        fn stamp(&self, r: usize, k: u64) -> &AtomicU64 {
            // SAFETY: the first 8 bytes of a buffer inside slot `r` (64-aligned), only
            // accessed atomically.
            unsafe {
                &*(self
                    .base
                    .add(r * SLOT + LINE + (k % NBUF) as usize * BUF)
                    .cast::<AtomicU64>())
            }
        }
        fn data(&self, r: usize, k: u64) -> *mut u8 {
            // SAFETY: inside slot `r` of the mapping, after the buffer's stamp.
            unsafe {
                self.base
                    .add(r * SLOT + LINE + (k % NBUF) as usize * BUF + 8)
            }
        }
        fn next(&self) -> u64 {
            self.seq.fetch_add(1, Ordering::Relaxed) + 1
        }
        /// We have read everything of collective `k`.
        fn finish(&self, k: u64) {
            self.seq_word(self.rank).store(k, Ordering::Release);
        }
        /// Rank `r`'s word "done reading the large region up to large allreduce `k`".
        fn done_word(&self, r: usize) -> &AtomicU64 {
            // SAFETY: bytes 8..16 of slot `r`'s first line: inside the mapping, 8-aligned,
            // only accessed atomically.
            unsafe { &*(self.base.add(r * SLOT + 8).cast::<AtomicU64>()) }
        }
        /// Wait until `w` reaches `k`; returns its value.
        ///
        /// While waiting it polls the engine's transports: a rank in a collective must
        /// keep its pending point-to-point operations going (a peer may be waiting for the
        /// data of our earlier `MPI_Isend` before it enters this collective).
        fn wait_word(&self, w: &AtomicU64, k: u64) -> u64 {
            let v = w.load(Ordering::Acquire);
            if v >= k {
                return v;
            }
            let eng = oxmpi_engine::engine();
            let mut spins = 0u32;
            loop {
                let v = w.load(Ordering::Acquire);
                if v >= k {
                    return v;
                }
                // A progress call costs far more than a look at the word: poll the
                // transports every 32nd turn (and at every yield) only.
                if spins % 32 == 31 || self.yield_idle {
                    if let Some(e) = eng {
                        e.progress();
                    }
                }
                spins = spins.wrapping_add(1);
                if self.yield_idle || spins % 4096 == 0 {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
        /// Wait for every other rank's stamp of collective `k`.
        fn wait_all(&self, k: u64) {
            for r in (0..self.size).filter(|&r| r != self.rank) {
                self.wait_word(self.stamp(r, k), k);
            }
        }
        /// Wait until our buffer for collective `k` is free (every rank is done with
        /// collective `k - NBUF`), copy `src` into it and stamp it.
        fn post(&self, k: u64, src: &[u8]) {
            debug_assert!(src.len() <= DATA);
            self.reusable(k.saturating_sub(NBUF));
            // SAFETY: our own buffer of collective `k`, read by nobody until we stamp it
            // and no longer by anybody for collective `k - NBUF` (waited for above).
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), self.data(self.rank, k), src.len())
            };
            self.stamp(self.rank, k).store(k, Ordering::Release);
        }
        /// Rank `r`'s lane line of collective `k`: stamp word, then `LANE_DATA` bytes.
        fn lane(&self, r: usize, k: u64) -> *mut u8 {
            // SAFETY: inside slot `r` of the mapping (the lane follows the buffers).
            unsafe {
                self.base
                    .add(r * SLOT + LINE + NBUF as usize * BUF + (k % LANE) as usize * LINE)
            }
        }
        fn lane_stamp(&self, r: usize, k: u64) -> &AtomicU64 {
            // SAFETY: the first 8 bytes of a 64-aligned lane line, only accessed atomically.
            unsafe { &*(self.lane(r, k).cast::<AtomicU64>()) }
        }
        /// Wait until every other rank's done word has reached `need`.
        fn reusable(&self, need: u64) {
            if self.min_done.load(Ordering::Relaxed) < need {
                let mut low = u64::MAX;
                for r in (0..self.size).filter(|&r| r != self.rank) {
                    low = low.min(self.wait_word(self.seq_word(r), need));
                }
                self.min_done.store(low, Ordering::Relaxed);
            }
        }
        /// Rank `r`'s buffer of collective `k`, `n` bytes from `off`.
        ///
        /// # Safety
        /// `r`'s stamp of `k` was acquired by us and we have not finished `k` (the buffer
        /// is then unchanged); `off + n <= DATA`.
        unsafe fn peer(&self, r: usize, k: u64, off: usize, n: usize) -> &[u8] {
            // SAFETY: caller contract; the view is read only.
            unsafe { std::slice::from_raw_parts(self.data(r, k).add(off).cast_const(), n) }
        }

        /// Number of ranks.
        pub(crate) fn size(&self) -> usize {
            self.size
        }

        /// Barrier.
        pub(crate) fn barrier(&self) {
            let k = self.next();
            self.post(k, &[]);
            self.wait_all(k);
            self.finish(k);
        }

        /// Broadcast of `buf` (at most `DATA` bytes) from `root`.
        pub(crate) fn bcast(&self, buf: &mut [u8], root: usize) {
            let k = self.next();
            let n = buf.len();
            if n <= LANE_DATA {
                // Through the root's lane (one line per broadcast).
                if self.rank == root {
                    self.reusable(k.saturating_sub(LANE));
                    // SAFETY: the payload of our lane line of `k`: nobody reads it until we
                    // stamp it, nor for collective `k - LANE` any more (waited above).
                    unsafe {
                        std::ptr::copy_nonoverlapping(buf.as_ptr(), self.lane(root, k).add(8), n)
                    };
                    self.lane_stamp(root, k).store(k, Ordering::Release);
                } else {
                    self.wait_word(self.lane_stamp(root, k), k);
                    // SAFETY: the root stamped the line for `k`; it is not rewritten before
                    // we finish `k`.
                    let src = unsafe { std::slice::from_raw_parts(self.lane(root, k).add(8), n) };
                    buf.copy_from_slice(src);
                }
                self.finish(k);
                return;
            }
            if self.rank == root {
                self.post(k, buf);
            } else {
                self.wait_word(self.stamp(root, k), k);
                // SAFETY: the root stamped `k`; we finish `k` only after the copy.
                let src = unsafe { self.peer(root, k, 0, buf.len()) };
                buf.copy_from_slice(src);
            }
            self.finish(k);
        }

        /// Alltoall: block `j` (`block` bytes) of `send` goes to rank `j`; block `j` of
        /// `recv` comes from rank `j`. `send.len() = recv.len() = size * block <= DATA`.
        pub(crate) fn alltoall(&self, send: &[u8], recv: &mut [u8], block: usize) {
            let k = self.next();
            self.post(k, send);
            self.wait_all(k);
            for j in 0..self.size {
                // SAFETY: every rank stamped `k` (waited above); block `rank` of its
                // buffer is within `DATA`.
                let src = unsafe { self.peer(j, k, self.rank * block, block) };
                recv[j * block..(j + 1) * block].copy_from_slice(src);
            }
            self.finish(k);
        }

        /// Allreduce into `dst` (at most [`BIG_MAX`] bytes) through the large region: every rank
        /// copies its vector into its slot; rank `r` folds slice `r` (elements split evenly)
        /// of all slots in rank order (`x0 ∘ (x1 ∘ …)`) into `dst` and publishes it in its
        /// slot; every rank then copies the other slices. Collective; false (nothing done,
        /// on every rank alike) when the region cannot be made.
        ///
        /// `src` is our contribution (`None`: it is in `dst`), as long as `dst`.
        pub(crate) fn allreduce_big(
            &self,
            a: &CollComm,
            comm: c_int,
            src: Option<&[u8]>,
            dst: &mut [u8],
            red: &Reducer,
        ) -> MpiResult<bool> {
            let n = dst.len();
            let mut g = self.big.lock().unwrap_or_else(|p| p.into_inner());
            if g.1 {
                return Ok(false);
            }
            if g.0.as_ref().is_none_or(|b| b.cap < n) {
                // Every rank has the same history, so all remake it at the same call.
                g.0 = None;
                let cap = n.next_power_of_two().max(64 * 1024);
                match share(a, comm, cap * self.size)? {
                    Some(base) => {
                        g.0 = Some(Big {
                            base,
                            cap,
                            len: cap * self.size,
                        })
                    }
                    None => {
                        g.1 = true;
                        return Ok(false);
                    }
                }
            }
            let big = g.0.as_ref().expect("made above");
            // SAFETY: slot `r` of the region (`cap >= n` bytes).
            let slot = |r: usize| unsafe { big.base.add(r * big.cap) };
            // Everybody has copied the results of the previous large allreduce out of the
            // slots (ours included) before we overwrite ours.
            let last = self.last_big.load(Ordering::Relaxed);
            for r in (0..self.size).filter(|&r| r != self.rank) {
                self.wait_word(self.done_word(r), last);
            }
            let this = last + 1;
            let src = src.unwrap_or(dst);
            debug_assert_eq!(src.len(), n);
            // SAFETY: our slot has room for `n` bytes and is read by nobody now (above).
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), slot(self.rank), n) };
            self.barrier();
            let (counts, displs) = oxmpi_coll::split_even(n, red.elem(), self.size);
            let (off, m) = (displs[self.rank], counts[self.rank]);
            let view = |r: usize| {
                // SAFETY: every rank passed the barrier after filling its slot, which stays
                // unchanged until it has seen our done word reach this allreduce.
                unsafe { std::slice::from_raw_parts(slot(r).add(off).cast_const(), m) }
            };
            let mine = &mut dst[off..off + m];
            let last_rank = self.size - 1;
            mine.copy_from_slice(view(last_rank));
            for r in (0..last_rank).rev() {
                red.apply(view(r), mine); // mine = x_r ∘ mine
            }
            // SAFETY: slice `rank` of our own slot, read by the others only after the next
            // barrier.
            unsafe { std::ptr::copy_nonoverlapping(mine.as_ptr(), slot(self.rank).add(off), m) };
            self.barrier();
            for r in (0..self.size).filter(|&r| r != self.rank) {
                let (o, c) = (displs[r], counts[r]);
                // SAFETY: rank `r` passed the barrier after writing its slice `r`, unchanged
                // until our done word reaches this allreduce.
                let from = unsafe { std::slice::from_raw_parts(slot(r).add(o).cast_const(), c) };
                dst[o..o + c].copy_from_slice(from);
            }
            self.done_word(self.rank).store(this, Ordering::Release);
            self.last_big.store(this, Ordering::Relaxed);
            Ok(true)
        }

        /// Allreduce of `buf` (at most `DATA` bytes) in place.
        pub(crate) fn allreduce(&self, buf: &mut [u8], red: &Reducer) {
            let n = buf.len();
            let k = self.next();
            self.post(k, buf);
            self.wait_all(k);
            // Right fold x0 ∘ (x1 ∘ (… ∘ x(p-1))) into `buf` (associativity makes it the
            // rank-order result; every rank computes exactly the same).
            let last = self.size - 1;
            // SAFETY: every rank stamped `k` (waited above).
            buf.copy_from_slice(unsafe { self.peer(last, k, 0, n) });
            for r in (0..last).rev() {
                // SAFETY: as above; the view does not overlap `buf`.
                let x = unsafe { self.peer(r, k, 0, n) };
                red.apply(x, buf); // buf = x_r ∘ buf
            }
            self.finish(k);
        }
    }

    /// Whether the shared-memory path may run `coll`: `coll_sm_enable` is on and no
    /// algorithm is forced for it (`coll_tuned_<coll>_algorithm` other than 0 runs that
    /// algorithm at every size).
    pub(crate) fn allowed(coll: Coll) -> bool {
        tune::sm_enabled() && tune::algorithm(coll) == 0
    }

    /// The segment of the communicator `comm` whose collective view is `a`, creating it on
    /// first use (collective over the communicator: every rank calls this at the same
    /// collective). `None` when the ranks span several nodes, the communicator is too small
    /// or too large, the paths are disabled, or the segment cannot be made.
    pub(crate) fn get(a: &CollComm, comm: c_int, coll: Coll) -> MpiResult<Option<Arc<Seg>>> {
        if a.size < 2 || a.size > MAX_RANKS || !allowed(coll) {
            return Ok(None);
        }
        let key = a.comm.0;
        let cached = LAST.with(|l| match &*l.borrow() {
            Some((k, s)) if *k == key => Some(s.clone()),
            _ => None,
        });
        if let Some(s) = cached {
            return Ok(s);
        }
        let known = SEGS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .and_then(|m| m.get(&key).cloned());
        if let Some(s) = known {
            LAST.with(|l| *l.borrow_mut() = Some((key, s.clone())));
            return Ok(s);
        }
        let s = setup(a, comm)?.map(Arc::new);
        LAST.with(|l| *l.borrow_mut() = Some((key, s.clone())));
        let mut g = SEGS.lock().unwrap_or_else(|p| p.into_inner());
        let m = g.get_or_insert_with(HashMap::new);
        // Forget the segments of freed communicators (their engine communicator is gone).
        if let Some(e) = oxmpi_engine::engine() {
            m.retain(|&c, _| e.comm_size(CommId(c)).is_ok());
        }
        m.insert(key, s.clone());
        Ok(s)
    }

    /// Hash of the node name (`OXMPI_ENGINE_NODE` when set, as the engine's `sm` transport
    /// uses it to simulate several nodes, else the host name).
    fn node_hash() -> u64 {
        let node = std::env::var("OXMPI_ENGINE_NODE").unwrap_or_else(|_| crate::env::hostname());
        node.bytes()
            .fold(5381u64, |x, b| x.wrapping_mul(33) ^ u64::from(b))
    }

    fn setup(a: &CollComm, comm: c_int) -> MpiResult<Option<Seg>> {
        let yield_idle = crate::backend::engine()
            .map(|e| e.yields_when_idle())
            .unwrap_or(true);
        // Does any rank yield when idle (more ranks than cores)? Then the large-vector
        // region stays unused: its synchronisations cost a context switch each, and the
        // point-to-point algorithms were measured twice as fast there (np=4 on 2 cores).
        let mut flags = vec![0u8; a.size as usize];
        flags[a.rank as usize] = u8::from(yield_idle);
        a.allgather(&mut flags, 1)
            .map_err(|e| crate::backend::err(e).on(comm))?;
        let big_ok = !flags.contains(&1);
        let len = a.size as usize * SLOT;
        let Some(base) = share(a, comm, len)? else {
            return Ok(None);
        };
        Ok(Some(Seg {
            base,
            len,
            rank: a.rank as usize,
            size: a.size as usize,
            seq: AtomicU64::new(0),
            last_big: AtomicU64::new(0),
            min_done: AtomicU64::new(0),
            big: Mutex::new((None, !big_ok)),
            yield_idle,
        }))
    }

    /// Map one `len`-byte memfd made by rank 0 on every rank of the communicator
    /// (collective). `None` (nothing mapped anywhere) when the ranks are not all on this
    /// node or some rank could not map it.
    fn share(a: &CollComm, comm: c_int, len: usize) -> MpiResult<Option<*mut u8>> {
        let fail = |e: oxmpi_engine::Error| -> MpiError { crate::backend::err(e).on(comm) };
        let (rank, size) = (a.rank as usize, a.size as usize);
        let mut fd: c_int = -1;
        if rank == 0 {
            // SAFETY: plain libc calls; the name is a NUL-terminated literal.
            unsafe {
                fd = libc::memfd_create(c"oxmpi-coll".as_ptr(), libc::MFD_CLOEXEC);
                if fd >= 0 && libc::ftruncate(fd, len as libc::off_t) != 0 {
                    libc::close(fd);
                    fd = -1;
                }
            }
        }
        // (node hash, pid, fd) of every rank; rank 0's pid and fd name the segment.
        let mut info = vec![0u8; 16 * size];
        let me = &mut info[16 * rank..16 * rank + 16];
        me[..8].copy_from_slice(&node_hash().to_ne_bytes());
        me[8..12].copy_from_slice(&(std::process::id() as i32).to_ne_bytes());
        me[12..].copy_from_slice(&fd.to_ne_bytes());
        let gathered = a.allgather(&mut info, 16).map_err(fail);
        let close_own = |fd: c_int| {
            if fd >= 0 {
                // SAFETY: our own descriptor.
                unsafe { libc::close(fd) };
            }
        };
        if let Err(e) = gathered {
            close_own(fd);
            return Err(e);
        }
        let word = |r: usize, at: usize| {
            i32::from_ne_bytes(
                info[16 * r + at..16 * r + at + 4]
                    .try_into()
                    .expect("4 bytes"),
            )
        };
        let (pid0, fd0) = (word(0, 8), word(0, 12));
        let one_node = info.chunks_exact(16).all(|c| c[..8] == info[..8]);
        if !one_node || fd0 < 0 {
            close_own(fd);
            return Ok(None);
        }
        if rank != 0 {
            let path = std::ffi::CString::new(format!("/proc/{pid0}/fd/{fd0}"))
                .expect("no NUL in the path");
            // SAFETY: plain libc call on a NUL-terminated path.
            fd = unsafe { libc::open(path.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
        }
        let mut base = libc::MAP_FAILED;
        if fd >= 0 {
            // SAFETY: mapping `len` bytes of the memfd (rank 0 sized it).
            base = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    fd,
                    0,
                )
            };
        }
        if rank != 0 {
            // The mapping keeps the memory; our descriptor is no longer needed.
            close_own(fd);
        }
        // Everybody mapped it (or failed)?
        let mut flags = vec![0u8; size];
        flags[rank] = u8::from(base != libc::MAP_FAILED);
        let agreed = a.allgather(&mut flags, 1).map_err(fail);
        if rank == 0 {
            // Every rank has opened it: the mappings keep the memory alive.
            close_own(fd);
        }
        let unmap = || {
            if base != libc::MAP_FAILED {
                // SAFETY: our own mapping of `len` bytes, not used by anybody.
                unsafe { libc::munmap(base, len) };
            }
        };
        if let Err(e) = agreed {
            unmap();
            return Err(e);
        }
        if flags.contains(&0) {
            unmap();
            return Ok(None);
        }
        Ok(Some(base.cast()))
    }
}
