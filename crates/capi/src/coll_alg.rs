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
use oxmpi_coll::base::select;
use oxmpi_coll::op::{ElemType, OpKind as Kernel};
use oxmpi_coll::{CollComm, Pooled};
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
    // SAFETY: a contiguous type's `count` items occupy `size * count` bytes from
    // `buf + lb` (caller contract).
    unsafe { bytes_at(buf, dt.lb, dt.size * count) }
}

/// The `n` bytes from `buf + lb` as one slice (empty for `n == 0`, any `buf`); `None` for
/// a NULL `buf` with `n > 0`. What [`contig`] and the [`BasicOp`] paths see of the user's
/// buffers.
///
/// # Safety
/// `buf + lb` holds `n` bytes (MPI contract), valid for the returned lifetime.
unsafe fn bytes_at<'a>(buf: *mut c_void, lb: isize, n: usize) -> Option<&'a mut [u8]> {
    if n == 0 {
        return Some(&mut []);
    }
    if buf.is_null() {
        return None;
    }
    // SAFETY: caller contract.
    Some(unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>().offset(lb), n) })
}

/// Pack `count` items of `dt` at `buf`, into a buffer from `oxmpi-coll`'s pool (a fresh
/// mapping of a large one costs a page fault per page, more than the packing: give it back
/// with `oxmpi_coll::unpool` when done, or hold it in an `oxmpi_coll::Pooled`).
///
/// # Safety
/// `buf` must hold `count` items of `dt`.
pub(crate) unsafe fn pack(dt: &Datatype, count: usize, buf: *const c_void) -> Vec<u8> {
    let mut v = oxmpi_coll::pooled(dt.size * count);
    v.clear();
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
    /// MINLOC/MAXLOC on a predefined value-index pair with a gap in its layout
    /// (`MPI_SHORT_INT`, `MPI_LONG_INT`, `MPI_DOUBLE_INT`, `MPI_LONG_DOUBLE_INT`): the
    /// packed items are reduced as they travel by the packed-form kernels (no unpacking).
    Packed(Kernel, ElemType),
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
        if let (true, Mode::Layout, Some(k)) = (dt.predefined, mode, crate::op::builtin_op(op)) {
            if let Some(t) = crate::op::elem_type(dth).filter(|t| t.packed_size() == dt.size) {
                // One zero item: the pair is defined (MINLOC/MAXLOC) and its kernel exists.
                let (x, mut y) = ([0u8; 32], [0u8; 32]);
                // SAFETY: 32 bytes hold one packed item of every type.
                if unsafe { oxmpi_coll::op::apply_packed(k, t, x.as_ptr(), y.as_mut_ptr(), 1) } {
                    mode = Mode::Packed(k, t);
                }
            }
        }
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
        if let Some((t, _)) = r.fast {
            // Fails for (op, type) pairs MPI does not define (known after the first call).
            let defined =
                matches!((r.kernel, t), (Some(o), Some(t)) if crate::op::kernel_defined(o, t));
            if !defined {
                mpi_bail!(
                    MPI_ERR_OP,
                    "operation {op:#x} is not defined for datatype {dth:#x}"
                );
            }
        } else if r.dt.size > 0 && builtin && !matches!(r.mode, Mode::Packed(..)) {
            // Try one zero item: fails for (op, type) pairs MPI does not define.
            let zero = vec![0u8; r.dt.size];
            let mut b = zero.clone();
            r.try_apply(&zero, &mut b)?;
        }
        Ok(r)
    }

    /// The unit the collectives may split packed data at: a predefined op on a derived type
    /// made of one basic type ([`Mode::Basic`]) folds any whole number of that type's
    /// items, so its size, as for the basic type itself; else one packed item. Ranks may
    /// pass different datatypes of one type signature (`MPI_INT`s, one contiguous type of
    /// them, a strided vector): they must split the vector (halves, slices, chunks) alike.
    pub(crate) fn elem(&self) -> usize {
        match self.mode {
            Mode::Basic(_, size) => size,
            _ => self.dt.size.max(1),
        }
    }

    pub(crate) fn commutative(&self) -> bool {
        self.commutative
    }

    /// `inout = in ∘ inout` on packed items.
    pub(crate) fn apply(&self, a: &[u8], b: &mut [u8]) {
        if let Mode::Packed(k, t) = self.mode {
            let n = a.len().min(b.len()) / self.dt.size;
            // SAFETY: both slices hold `n` packed items (any alignment); the kernel was
            // tried in `new`.
            if unsafe { oxmpi_coll::op::apply_packed(k, t, a.as_ptr(), b.as_mut_ptr(), n) } {
                return;
            }
        }
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
            Mode::Layout | Mode::Packed(..) => {
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

/// A predefined operation on a predefined basic datatype whose items are a dense array
/// of one kernel element type (every basic type, and the value-index pairs without a gap):
/// what [`Reducer`] runs for them, without the datatype reference (two atomic updates of
/// its count per call) or the library lock. For the small collectives' fast paths, which
/// run it on every rank alike (the datatype and op are the same everywhere).
#[derive(Clone, Copy)]
pub(crate) struct BasicOp {
    kernel: Kernel,
    ty: ElemType,
    size: usize,
}

impl BasicOp {
    /// The operation `op` on the datatype handle `dth`, if both are predefined, the type
    /// is a basic one and MPI defines the pair; `None` otherwise (the general path decides
    /// and reports the errors, as [`Reducer::new`] does).
    #[inline]
    pub(crate) fn of(dth: c_int, op: c_int) -> Option<BasicOp> {
        let size = crate::datatype::predefined_size(dth)?;
        let ty = crate::op::elem_type(dth)?;
        let kernel = crate::op::builtin_op(op)?;
        // (Every such size is a power of two: the alignment check is a mask, not a division.)
        let ok = size.is_power_of_two() && ty.packed_size() == size;
        (ok && crate::op::kernel_defined(kernel, ty)).then_some(BasicOp { kernel, ty, size })
    }
    /// Bytes of one item.
    pub(crate) fn size(&self) -> usize {
        self.size
    }
    /// `inout = in ∘ inout` on whole items (`a` and `b` of one length).
    pub(crate) fn apply(&self, a: &[u8], b: &mut [u8]) {
        let n = a.len().min(b.len()) / self.size;
        let (k, t) = (self.kernel, self.ty);
        // (The alignment `Reducer::apply` checks: an item's size, at most 16.)
        if (a.as_ptr() as usize | b.as_ptr() as usize) & (self.size.min(16) - 1) == 0
            // SAFETY: both slices hold `n` items of the element type (a dense array of
            // it), aligned for it (checked above); the pair is defined (`of`).
            && unsafe {
                oxmpi_coll::op::apply_fast(k, t, a.as_ptr(), b.as_mut_ptr(), n)
                    || oxmpi_coll::op::apply(k, t, a.as_ptr(), b.as_mut_ptr(), n)
            }
        {
            return;
        }
        // Misaligned views: reduce aligned (16-byte) copies.
        let words = (n * self.size).div_ceil(16);
        let (mut x, mut y) = (vec![0u128; words], vec![0u128; words]);
        let len = n * self.size;
        // SAFETY: `x` and `y` span `words * 16 >= len` bytes; the sources hold `len` bytes
        // and do not overlap the fresh copies.
        let ok = unsafe {
            std::ptr::copy_nonoverlapping(a.as_ptr(), x.as_mut_ptr().cast::<u8>(), len);
            std::ptr::copy_nonoverlapping(b.as_ptr(), y.as_mut_ptr().cast::<u8>(), len);
            oxmpi_coll::op::apply(k, t, x.as_ptr().cast(), y.as_mut_ptr().cast(), n)
        };
        assert!(ok, "reduction failed after validation");
        // SAFETY: `y` holds the `len` result bytes; `b` has room for them.
        unsafe { std::ptr::copy_nonoverlapping(y.as_ptr().cast::<u8>(), b.as_mut_ptr(), len) };
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
    select::barrier(a).map_err(err(comm))
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
    // SAFETY: caller contract.
    if let Some(s) = unsafe { contig(dt, count, buffer) } {
        return select::bcast(a, s, root).map_err(err(comm));
    }
    let mut data = Pooled::from_vec(if a.rank == root {
        // SAFETY: caller contract.
        unsafe { pack(dt, count, buffer) }
    } else {
        oxmpi_coll::pooled(count * dt.size)
    });
    select::bcast(a, &mut data, root).map_err(err(comm))?;
    if a.rank != root {
        // SAFETY: caller contract.
        unsafe { unpack(dt, count, buffer, &data) };
    }
    Ok(())
}

/// The arguments of a reduction call (scan, exscan, reduce-scatter and their nonblocking
/// forms) as the caller passed them; the shared bodies resolve and check them in MPI order.
/// `C` is the item count: one `c_int` as passed, or the checked counts per rank.
#[derive(Clone, Copy)]
pub(crate) struct ReduceArgs<C = c_int> {
    /// The input (or `MPI_IN_PLACE`).
    pub sendbuf: *const c_void,
    /// The output.
    pub recvbuf: *mut c_void,
    /// Items per buffer (unchecked), or per rank.
    pub count: C,
    /// The datatype handle.
    pub datatype: c_int,
    /// The reduction operation's handle.
    pub op: c_int,
    /// The communicator handle.
    pub comm: c_int,
}

impl<C> ReduceArgs<C> {
    /// The same arguments with another item count (e.g. counts per rank once checked).
    pub(crate) fn with_count<D>(self, count: D) -> ReduceArgs<D> {
        ReduceArgs {
            sendbuf: self.sendbuf,
            recvbuf: self.recvbuf,
            count,
            datatype: self.datatype,
            op: self.op,
            comm: self.comm,
        }
    }
}

/// The arguments of a reduction (`MPI_Reduce`, `MPI_Allreduce`), resolved once at the
/// entry point: the buffers, the checked item count and the datatype (object and handle).
#[derive(Clone, Copy)]
pub(crate) struct Reduction<'a> {
    /// The input (`MPI_IN_PLACE` allowed where the operation allows it).
    pub sendbuf: *const c_void,
    /// The output.
    pub recvbuf: *mut c_void,
    /// Items per buffer.
    pub count: usize,
    /// The item datatype.
    pub dt: &'a Arc<Datatype>,
    /// The datatype's handle (for the (op, type) check).
    pub dth: c_int,
    /// The reduction operation's handle.
    pub op: c_int,
}

/// `MPI_Reduce` (`sendbuf` may be `MPI_IN_PLACE` at the root).
///
/// # Safety
/// MPI contract of `MPI_Reduce` for the buffers.
pub(crate) unsafe fn reduce(
    a: &CollComm,
    comm: c_int,
    r: &Reduction<'_>,
    root: c_int,
) -> MpiResult {
    let (sendbuf, recvbuf, count, dt) = (r.sendbuf, r.recvbuf, r.count, r.dt);
    check_root(root, a.size, comm)?;
    let red = Reducer::new(dt, r.dth, r.op).map_err(|e| e.on(comm))?;
    let src = if is_in_place(sendbuf) && a.rank == root {
        recvbuf.cast_const()
    } else {
        sendbuf
    };
    check_buf(src, dt, count, comm)?;
    if a.rank == root {
        check_buf(recvbuf, dt, count, comm)?;
    }
    if dt.is_contiguous() {
        // The user's memory itself: no packed copies.
        let in_place = a.rank == root && is_in_place(sendbuf);
        let send = if in_place {
            None
        } else {
            // SAFETY: caller contract: the contribution holds `count` items (read only).
            unsafe { contig(dt, count, src.cast_mut()) }.map(|s| &*s)
        };
        let recv = if a.rank == root {
            // SAFETY: caller contract: at the root, recvbuf has room for `count` items and
            // does not overlap the send buffer (that would be in place).
            unsafe { contig(dt, count, recvbuf) }
        } else {
            None
        };
        let f = |x: &[u8], y: &mut [u8]| red.apply(x, y);
        if let Some(r) = reduce_views(
            a,
            comm,
            (in_place, send, recv),
            root,
            (&f, red.elem(), red.commutative()),
        ) {
            return r;
        }
    }
    // SAFETY: caller contract.
    let mut buf = Pooled::from_vec(unsafe { pack(dt, count, src) });
    with_op(&red, |o| select::reduce_packed(a, &mut buf, root, o)).map_err(err(comm))?;
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
pub(crate) unsafe fn allreduce(a: &CollComm, comm: c_int, r: &Reduction<'_>) -> MpiResult {
    let (sendbuf, recvbuf, count, dt) = (r.sendbuf, r.recvbuf, r.count, r.dt);
    let red = Reducer::new(dt, r.dth, r.op).map_err(|e| e.on(comm))?;
    let in_place = is_in_place(sendbuf);
    check_buf(sendbuf, dt, count, comm)?;
    check_buf(recvbuf, dt, count, comm)?;
    let f = |a: &[u8], b: &mut [u8]| red.apply(a, b);
    let (elem, commutative) = (red.elem(), red.commutative());
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
        return allreduce_views(a, comm, s, r, (&f, elem, commutative));
    }
    let src = if in_place {
        recvbuf.cast_const()
    } else {
        sendbuf
    };
    // SAFETY: caller contract.
    let mut buf = Pooled::from_vec(unsafe { pack(dt, count, src) });
    select::allreduce(a, None, &mut buf, &f, elem, commutative).map_err(err(comm))?;
    // SAFETY: caller contract.
    unsafe { unpack(dt, count, recvbuf, &buf) };
    Ok(())
}

/// A reduction on bytes: `inout = in ∘ inout`, the item size, commutativity.
type ByteOp<'f, F> = (&'f F, usize, bool);

/// The rooted reduction on byte views of the user's buffers (`send`: `None` in place at
/// the root; `recv`: the root's result), if they are complete; `None`: the caller packs.
/// One function for the general path's contiguous types and the [`BasicOp`] path, so that
/// a rank on either asks `select::reduce` for the same algorithm (the bytes, item size
/// and commutativity are the same for the same arguments).
fn reduce_views<F: Fn(&[u8], &mut [u8])>(
    a: &CollComm,
    comm: c_int,
    (in_place, send, recv): (bool, Option<&[u8]>, Option<&mut [u8]>),
    root: c_int,
    (f, elem, commutative): ByteOp<'_, F>,
) -> Option<MpiResult> {
    if (in_place || send.is_some()) && (recv.is_some() || a.rank != root) {
        return Some(select::reduce(a, send, recv, root, f, elem, commutative).map_err(err(comm)));
    }
    None
}

/// The allreduce on byte views of the user's buffers (`s`: `None` in place), for the
/// general path's contiguous types and the [`BasicOp`] path alike (see [`reduce_views`]).
fn allreduce_views<F: Fn(&[u8], &mut [u8])>(
    a: &CollComm,
    comm: c_int,
    s: Option<&[u8]>,
    r: &mut [u8],
    (f, elem, commutative): ByteOp<'_, F>,
) -> MpiResult {
    select::allreduce(a, s, r, f, elem, commutative).map_err(err(comm))
}

/// `MPI_Reduce` of `count` items of a predefined basic type with a predefined op
/// ([`BasicOp`]) on the user's buffers: no datatype reference, no [`Reducer`]. `None`:
/// the general path decides (NULL buffers with items, `MPI_IN_PLACE` off the root, a size
/// that overflows) and reports the errors; for correct arguments it would have taken the
/// same [`reduce_views`] with the same bytes, item size and commutativity.
///
/// # Safety
/// MPI contract of `MPI_Reduce` for the buffers.
pub(crate) unsafe fn reduce_basic(
    a: &CollComm,
    comm: c_int,
    b: BasicOp,
    (sendbuf, recvbuf, count): (*const c_void, *mut c_void, usize),
    root: c_int,
) -> Option<MpiResult> {
    let len = count.checked_mul(b.size())?;
    let me = a.rank == root;
    let in_place = is_in_place(sendbuf);
    if in_place && !me {
        return None;
    }
    let send = if in_place {
        None
    } else {
        // SAFETY: caller contract: the contribution holds `count` items of the basic type,
        // `len` bytes from its start (only read).
        Some(&*unsafe { bytes_at(sendbuf.cast_mut(), 0, len) }?)
    };
    let recv = if me {
        // SAFETY: caller contract: the root's recvbuf has room for `count` items and does
        // not overlap the send buffer (that would be in place).
        Some(unsafe { bytes_at(recvbuf, 0, len) }?)
    } else {
        None
    };
    let f = |x: &[u8], y: &mut [u8]| b.apply(x, y);
    reduce_views(a, comm, (in_place, send, recv), root, (&f, b.size(), true))
}

/// `MPI_Allreduce` of a predefined basic type with a predefined op ([`BasicOp`]), as
/// [`reduce_basic`] is to [`reduce`].
///
/// # Safety
/// MPI contract of `MPI_Allreduce` for the buffers.
pub(crate) unsafe fn allreduce_basic(
    a: &CollComm,
    comm: c_int,
    b: BasicOp,
    (sendbuf, recvbuf, count): (*const c_void, *mut c_void, usize),
) -> Option<MpiResult> {
    let len = count.checked_mul(b.size())?;
    let s = if is_in_place(sendbuf) {
        None
    } else {
        // SAFETY: caller contract: sendbuf holds `count` items, not overlapping recvbuf.
        Some(&*unsafe { bytes_at(sendbuf.cast_mut(), 0, len) }?)
    };
    // SAFETY: caller contract: recvbuf has room for `count` items.
    let r = unsafe { bytes_at(recvbuf, 0, len) }?;
    let f = |x: &[u8], y: &mut [u8]| b.apply(x, y);
    Some(allreduce_views(a, comm, s, r, (&f, b.size(), true)))
}

// ---- byte views of typed buffers ----

/// Bytes to send: `count` items of `dt` at `buf`, borrowed when the type is contiguous,
/// packed otherwise (in a buffer from `oxmpi-coll`'s pool, given back when dropped).
pub(crate) enum SendBytes<'a> {
    Borrowed(&'a [u8]),
    Packed(Pooled),
}

impl SendBytes<'_> {
    /// A copy of `bytes` (e.g. an in-place contribution about to be overwritten), in a
    /// pooled buffer.
    pub(crate) fn copy_of(bytes: &[u8]) -> Self {
        let mut v = Pooled::new(bytes.len());
        v.copy_from_slice(bytes);
        SendBytes::Packed(v)
    }

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
        SendBytes::Packed(Pooled::from_vec(unsafe { pack(dt, count, buf) }))
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
/// negative, otherwise a packed scratch buffer (blocks back to back, from `oxmpi-coll`'s
/// pool and given back when dropped) that [`Blocks::store`] unpacks.
pub(crate) struct Blocks<'a> {
    pub counts: Vec<usize>,
    pub displs: Vec<usize>,
    direct: Option<&'a mut [u8]>,
    scratch: Pooled,
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
        // SAFETY: caller contract.
        unsafe { Self::filled(dt, buf, slots, |i| fill(i).then_some(buf.cast_const())) }
    }

    /// The view of `buf` (which has room for every block) with a scratch buffer (if any)
    /// holding the blocks of `src` laid out alike, packed straight from there (e.g. an
    /// out-of-place contribution that the collective then replaces by its result).
    ///
    /// # Safety
    /// `buf` has room for every block, `src` holds every block, both valid for `'a`.
    pub(crate) unsafe fn from_source(
        dt: &'a Datatype,
        buf: *mut c_void,
        slots: Vec<(usize, isize)>,
        src: *const c_void,
    ) -> Self {
        // SAFETY: caller contract.
        let mut b = unsafe { Self::filled(dt, buf, slots, |_| Some(src)) };
        if let Some(d) = &mut b.direct {
            // Contiguous: the view is `buf` itself; copy the source's blocks there.
            let lb = dt.lb;
            for i in 0..b.counts.len() {
                let (o, c) = (b.displs[i], b.counts[i]);
                if c > 0 {
                    // `src` may be MPI_BOTTOM (NULL) with absolute displacements.
                    let p = src.cast::<u8>().wrapping_offset(lb).wrapping_add(o);
                    // SAFETY: block `i` of `src` holds `c` bytes at `src + lb + o` (caller
                    // contract), apart from `buf`'s (MPI: send and receive buffers differ).
                    let s = unsafe { std::slice::from_raw_parts(p, c) };
                    d[o..o + c].copy_from_slice(s);
                }
            }
        }
        b
    }

    /// [`Blocks::new`], the scratch buffer's block `i` packed from `fill(i)` (a buffer
    /// laid out as `buf`), zero where `None`.
    ///
    /// # Safety
    /// `buf` has room for every block, valid for `'a`; every `fill(i)` holds block `i`.
    unsafe fn filled(
        dt: &'a Datatype,
        buf: *mut c_void,
        slots: Vec<(usize, isize)>,
        fill: impl Fn(usize) -> Option<*const c_void>,
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
                scratch: Pooled::default(),
                dt,
                buf,
                slots,
            };
        }
        // From the pool: a fresh mapping of a large buffer costs a page fault per page.
        let mut scratch = Pooled::new(slots.iter().map(|&(c, _)| c * size).sum());
        scratch.clear();
        for (i, &(c, d)) in slots.iter().enumerate() {
            counts.push(c * size);
            displs.push(scratch.len());
            if let Some(from) = fill(i) {
                let p = from.cast::<u8>().wrapping_offset(d * ext);
                // SAFETY: block `i` holds `c` items there (caller contract).
                unsafe { pack_into(dt, c, p, &mut scratch) };
            } else {
                let n = scratch.len();
                scratch.resize(n + c * size, 0);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::lock;

    /// Every predefined datatype handle (those a reduction may name).
    const TYPES: [c_int; 72] = [
        MPI_AINT,
        MPI_COUNT,
        MPI_OFFSET,
        MPI_PACKED,
        MPI_SHORT,
        MPI_INT,
        MPI_LONG,
        MPI_LONG_LONG,
        MPI_LONG_LONG_INT,
        MPI_UNSIGNED_SHORT,
        MPI_UNSIGNED,
        MPI_UNSIGNED_LONG,
        MPI_UNSIGNED_LONG_LONG,
        MPI_FLOAT,
        MPI_C_FLOAT_COMPLEX,
        MPI_C_COMPLEX,
        MPI_CXX_FLOAT_COMPLEX,
        MPI_DOUBLE,
        MPI_C_DOUBLE_COMPLEX,
        MPI_CXX_DOUBLE_COMPLEX,
        MPI_LOGICAL,
        MPI_INTEGER,
        MPI_REAL,
        MPI_COMPLEX,
        MPI_DOUBLE_PRECISION,
        MPI_DOUBLE_COMPLEX,
        MPI_CHARACTER,
        MPI_LONG_DOUBLE,
        MPI_C_LONG_DOUBLE_COMPLEX,
        MPI_CXX_LONG_DOUBLE_COMPLEX,
        MPI_FLOAT_INT,
        MPI_DOUBLE_INT,
        MPI_LONG_INT,
        MPI_2INT,
        MPI_SHORT_INT,
        MPI_LONG_DOUBLE_INT,
        MPI_2REAL,
        MPI_2DOUBLE_PRECISION,
        MPI_2INTEGER,
        MPI_C_BOOL,
        MPI_CXX_BOOL,
        MPI_WCHAR,
        MPI_INT8_T,
        MPI_UINT8_T,
        MPI_CHAR,
        MPI_SIGNED_CHAR,
        MPI_UNSIGNED_CHAR,
        MPI_BYTE,
        MPI_INT16_T,
        MPI_UINT16_T,
        MPI_INT32_T,
        MPI_UINT32_T,
        MPI_INT64_T,
        MPI_UINT64_T,
        MPI_LOGICAL1,
        MPI_INTEGER1,
        MPI_LOGICAL2,
        MPI_INTEGER2,
        MPI_REAL2,
        MPI_LOGICAL4,
        MPI_INTEGER4,
        MPI_REAL4,
        MPI_COMPLEX4,
        MPI_LOGICAL8,
        MPI_INTEGER8,
        MPI_REAL8,
        MPI_COMPLEX8,
        MPI_LOGICAL16,
        MPI_INTEGER16,
        MPI_REAL16,
        MPI_COMPLEX16,
        MPI_COMPLEX32,
    ];

    /// The remembered answer of `Reducer::new` for a predefined op on a predefined type is
    /// the trial reduction's (one zero item, `apply_builtin`), for every pair, asked in an
    /// order where pairs sharing an op or a type are interleaved, and again once known;
    /// the pairs that reduce do so with the kernel (`MPI_SUM` of ones).
    #[test]
    fn predefined_pairs_are_checked_as_the_trial_reduction_does() {
        let ops: Vec<c_int> = (MPI_MAX..=MPI_NO_OP).collect();
        let (mut ok, mut bad) = (0, 0);
        for round in 0..2 {
            for (i, &h) in TYPES.iter().enumerate() {
                let dt = lock().dtype(h).expect("predefined datatype");
                for j in 0..ops.len() {
                    // A different op order per type, so no pair is only asked after its
                    // neighbours.
                    let op = ops[(i * 5 + j) % ops.len()];
                    let mut x = [0u128; 4];
                    let y = [0u128; 4];
                    // SAFETY: 64 zero bytes hold one item of every predefined type.
                    let trial = unsafe {
                        crate::op::apply_builtin(op, h, y.as_ptr().cast(), x.as_mut_ptr().cast(), 1)
                    };
                    let r = Reducer::new(&dt, h, op);
                    let direct = dt.is_contiguous() && dt.lb == 0 && dt.true_lb == 0;
                    if direct && dt.size > 0 {
                        assert_eq!(r.is_ok(), trial, "op {op:#x} type {h:#x} round {round}");
                        if trial {
                            ok += 1;
                        } else {
                            bad += 1;
                        }
                    }
                    if let (Ok(r), true, true) = (&r, op == MPI_SUM, trial && direct) {
                        let s = dt.size;
                        let a = vec![0u8; 4 * s];
                        let mut b = vec![0u8; 4 * s];
                        r.apply(&a, &mut b);
                        assert!(b.iter().all(|&v| v == 0), "type {h:#x}: 0 + 0");
                    }
                }
            }
        }
        assert!(
            ok > 100 && bad > 100,
            "{ok} defined, {bad} undefined pairs seen"
        );
    }

    /// Undefined pairs stay undefined after a defined pair of the same op or type was
    /// remembered, and the other way round.
    #[test]
    fn a_remembered_pair_does_not_answer_for_another() {
        let dt = |h| lock().dtype(h).expect("predefined datatype");
        let (f, i) = (dt(MPI_FLOAT), dt(MPI_INT));
        for _ in 0..2 {
            assert!(Reducer::new(&i, MPI_INT, MPI_BAND).is_ok());
            assert!(Reducer::new(&f, MPI_FLOAT, MPI_SUM).is_ok());
            let e = Reducer::new(&f, MPI_FLOAT, MPI_BAND)
                .err()
                .expect("BAND on FLOAT");
            assert_eq!(e.code, MPI_ERR_OP);
            assert!(Reducer::new(&f, MPI_FLOAT, MPI_MAX).is_ok());
            assert!(Reducer::new(&i, MPI_INT, MPI_LXOR).is_ok());
            assert!(Reducer::new(&f, MPI_FLOAT, MPI_LXOR).is_err());
        }
    }
}
