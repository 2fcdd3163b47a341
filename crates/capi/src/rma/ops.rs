//! Data movement: put, get and the accumulate family on a target's memory (through the
//! shared segment or cross-memory attach), under the target's accumulate mutex.

use super::pt2pt::proto::AccOp;
use super::window::{inner, Inner};
use crate::consts::*;
use crate::datatype::{pack_into, unpack_from, Datatype};
use crate::ffi::{check_count, out, MpiResult};
use crate::state::lock;
use std::ffi::{c_int, c_void};
use std::sync::Arc;

/// Byte ranges (offset from a target's base, length).
type Ranges = Vec<(isize, usize)>;

/// Byte ranges (offset from the target's base, length) of `count` items of `dt` starting
/// at byte `start`, in type-map order, adjacent ranges merged.
fn ranges(dt: &Datatype, count: usize, start: isize) -> Ranges {
    let mut v: Ranges = Vec::new();
    for i in 0..count {
        let base = start + i as isize * dt.extent();
        for b in &dt.blocks {
            if b.len == 0 {
                continue;
            }
            let off = base + b.disp;
            match v.last_mut() {
                Some(last) if last.0 + last.1 as isize == off => last.1 += b.len,
                _ => v.push((off, b.len)),
            }
        }
    }
    v
}

/// Validated arguments of one operation on a target.
pub(super) struct Access {
    pub(super) inner: Arc<Inner>,
    /// `None` for `MPI_PROC_NULL`.
    pub(super) target: Option<usize>,
    pub(super) start: isize,
}

/// Resolve an access to `target_rank` at `target_disp` of window `win` (a valid rank, a
/// non-negative displacement except on dynamic windows); `target` is `None` for
/// `MPI_PROC_NULL`.
pub(super) fn access(win: c_int, target_rank: c_int, target_disp: isize) -> MpiResult<Access> {
    let inner = inner(win)?;
    if target_rank == MPI_PROC_NULL {
        return Ok(Access {
            inner,
            target: None,
            start: 0,
        });
    }
    if target_rank < 0 || target_rank as usize >= inner.nranks {
        mpi_bail!(
            MPI_ERR_RANK,
            "target rank {target_rank} is not in the window's group of {} ranks",
            inner.nranks
        );
    }
    let t = target_rank as usize;
    if target_disp < 0 && inner.flavor != MPI_WIN_FLAVOR_DYNAMIC {
        mpi_bail!(MPI_ERR_DISP, "negative target displacement {target_disp}");
    }
    let start = target_disp.wrapping_mul(inner.targets[t].disp_unit);
    if !inner.targets[t].remote {
        inner.direct_after_fence(t)?;
    }
    Ok(Access {
        inner,
        target: Some(t),
        start,
    })
}

/// The target side of a one-sided operation as the caller gave it: rank, displacement,
/// count and datatype in window `win`; checked when the operation resolves it.
#[derive(Clone, Copy)]
pub(super) struct TargetSpec {
    /// Rank in the window's group (or `MPI_PROC_NULL`).
    pub rank: c_int,
    /// Displacement in the target's displacement units.
    pub disp: isize,
    /// Item count at the target.
    pub count: i64,
    /// Datatype handle at the target.
    pub datatype: c_int,
    /// The window.
    pub win: c_int,
}

impl TargetSpec {
    /// Resolve the access ([`access`]).
    fn access(&self) -> MpiResult<Access> {
        access(self.win, self.rank, self.disp)
    }
}

/// The committed datatype of handle `h`.
pub(super) fn dtype(h: c_int) -> MpiResult<Arc<Datatype>> {
    lock().dtype_committed(h)
}

/// Pack `count` items of `h` at `buf`.
fn pack(buf: *const c_void, count: i64, h: c_int) -> MpiResult<(Arc<Datatype>, Vec<u8>)> {
    let n = check_count(count)?;
    let dt = dtype(h)?;
    let mut v = Vec::new();
    if n > 0 && dt.size > 0 {
        if buf.is_null() && dt.true_lb >= 0 && dt.predefined {
            mpi_bail!(MPI_ERR_BUFFER, "NULL origin buffer");
        }
        // SAFETY: the caller's buffer holds `count` items of the datatype (MPI contract).
        unsafe { pack_into(&dt, n, buf.cast(), &mut v) };
    }
    Ok((dt, v))
}

/// The target ranges of `count` items of `h`, checked against the origin's byte count.
fn target_ranges(
    a: &Access,
    count: i64,
    h: c_int,
    origin_bytes: usize,
) -> MpiResult<(Arc<Datatype>, Ranges)> {
    let n = check_count(count)?;
    let dt = dtype(h)?;
    if n * dt.size != origin_bytes {
        mpi_bail!(
            MPI_ERR_TYPE,
            "origin data ({origin_bytes} bytes) and target data ({} bytes) differ in size",
            n * dt.size
        );
    }
    let rs = ranges(&dt, n, a.start);
    Ok((dt, rs))
}

/// `MPI_Put` (and `MPI_Rput`): write `ocount` items of `otype` at `origin` to `t`.
pub(super) fn do_put(origin: *const c_void, ocount: i64, otype: c_int, t: TargetSpec) -> MpiResult {
    let a = t.access()?;
    let (_, data) = pack(origin, ocount, otype)?;
    let (_, rs) = target_ranges(&a, t.count, t.datatype, data.len())?;
    let Some(t) = a.target else { return Ok(()) };
    if a.inner.targets[t].remote {
        a.inner.check(t, &rs)?;
        if let Some(r) = a.inner.rdma_to(t) {
            return r.put(t, &rs, &data);
        }
        return a.inner.net()?.put(t, &rs, &data);
    }
    a.inner.write(t, &rs, &data)
}

/// `MPI_Get` (and `MPI_Rget`): read `t` into `ocount` items of `otype` at `origin`.
pub(super) fn do_get(origin: *mut c_void, ocount: i64, otype: c_int, t: TargetSpec) -> MpiResult {
    let a = t.access()?;
    let n = check_count(ocount)?;
    let odt = dtype(otype)?;
    let (_, rs) = target_ranges(&a, t.count, t.datatype, n * odt.size)?;
    let Some(t) = a.target else { return Ok(()) };
    let data = if a.inner.targets[t].remote {
        a.inner.check(t, &rs)?;
        match a.inner.rdma_to(t) {
            Some(r) => r.get(t, &rs)?,
            None => a.inner.net()?.get(t, &rs)?,
        }
    } else {
        a.inner.read(t, &rs)?
    };
    // SAFETY: the origin buffer holds `ocount` items of the origin datatype.
    unsafe { unpack_from(&odt, n, origin.cast(), &data) };
    Ok(())
}

/// The predefined basic type an accumulate works on, and its size.
fn acc_basic(op: c_int, odt: &Datatype, tdt: &Datatype) -> MpiResult<(c_int, usize)> {
    if !(MPI_MAX..=MPI_NO_OP).contains(&op) {
        if op == MPI_OP_NULL {
            mpi_bail!(MPI_ERR_OP, "MPI_OP_NULL passed");
        }
        mpi_bail!(
            MPI_ERR_OP,
            "operation {op:#x} cannot be used in RMA (only predefined operations can)"
        );
    }
    let (Some(tb), ob) = (tdt.basic, odt.basic) else {
        mpi_bail!(
            MPI_ERR_TYPE,
            "accumulate target datatype mixes different basic types"
        );
    };
    if op != MPI_NO_OP && odt.size > 0 && ob != Some(tb) {
        mpi_bail!(
            MPI_ERR_TYPE,
            "accumulate origin and target datatypes have different basic types"
        );
    }
    let sz = lock().dtype(tb)?.size.max(1);
    Ok((tb, sz))
}

/// Accumulate (and fetch the previous contents into `result`, if given).
pub(super) fn do_accumulate(
    origin: *const c_void,
    ocount: i64,
    otype: c_int,
    result: Option<(*mut c_void, i64, c_int)>,
    t: TargetSpec,
    op: c_int,
) -> MpiResult {
    let a = t.access()?;
    let n = check_count(t.count)?;
    // MPI 3.1 §11.3.4: a zero-count accumulate does nothing, whatever the datatypes.
    if n == 0 && ocount == 0 && result.is_none_or(|(_, rc, _)| rc == 0) {
        return Ok(());
    }
    let tdt = dtype(t.datatype)?;
    // With MPI_NO_OP the origin buffer, count and datatype are ignored (MPI 3.1
    // §11.3.4): MPI_DATATYPE_NULL is allowed there.
    let (odt, data) = if op == MPI_NO_OP {
        (tdt.clone(), Vec::new())
    } else {
        pack(origin, ocount, otype)?
    };
    let tbytes = n * tdt.size;
    if op != MPI_NO_OP && data.len() != tbytes {
        mpi_bail!(
            MPI_ERR_TYPE,
            "origin data ({} bytes) and target data ({tbytes} bytes) differ in size",
            data.len()
        );
    }
    let (basic, bsize) = acc_basic(op, &odt, &tdt)?;
    let res = match result {
        Some((buf, count, h)) => {
            let rn = check_count(count)?;
            let rdt = dtype(h)?;
            if rn * rdt.size != tbytes {
                mpi_bail!(
                    MPI_ERR_TYPE,
                    "result data ({} bytes) and target data ({tbytes} bytes) differ in size",
                    rn * rdt.size
                );
            }
            Some((buf, rn, rdt))
        }
        None => None,
    };
    let Some(t) = a.target else { return Ok(()) };
    let rs = ranges(&tdt, n, a.start);
    let acc = AccOp {
        op,
        basic,
        bsize: bsize as u32,
    };
    let r = accumulate_to(&a.inner, t, acc, &rs, &data, res.is_some());
    if let (Some(old), Some((buf, rn, rdt))) = (r?, res) {
        // SAFETY: the result buffer holds `rn` items of its datatype.
        unsafe { unpack_from(&rdt, rn, buf.cast(), &old) };
    }
    Ok(())
}

/// The accumulate family on `rs` of target `t` by the window's path for its type: the
/// provider's atomics where the window runs that type natively (`rma/ofi`), else messages
/// for a target reached with messages, else directly under the target's accumulate
/// mutex. `Some(old bytes)` when `fetch`.
pub(super) fn accumulate_to(
    inner: &Inner,
    t: usize,
    acc: AccOp,
    rs: &[(isize, usize)],
    data: &[u8],
    fetch: bool,
) -> MpiResult<Option<Vec<u8>>> {
    if let Some(r) = inner
        .rdma
        .as_ref()
        .filter(|r| r.native(acc.basic).is_some())
    {
        inner.check(t, rs)?;
        return r.accumulate(t, acc, rs, data, fetch);
    }
    if inner.targets[t].remote {
        inner.check(t, rs)?;
        inner.net()?.accumulate(t, acc, rs, data, fetch)
    } else {
        inner.accumulate_at(t, acc, rs, data, fetch)
    }
}

/// Compare-and-swap of one element of predefined type `basic` at byte `off` of target
/// `t`, by the window's path for the type (as [`accumulate_to`]): the old bytes.
pub(super) fn cas_to(
    inner: &Inner,
    t: usize,
    basic: c_int,
    off: isize,
    cmp: &[u8],
    new: &[u8],
) -> MpiResult<Vec<u8>> {
    let rs = [(off, cmp.len())];
    if let Some(r) = inner.rdma.as_ref().filter(|r| r.native(basic).is_some()) {
        inner.check(t, &rs)?;
        return r.cas(t, basic, off, cmp, new);
    }
    if inner.targets[t].remote {
        inner.check(t, &rs)?;
        inner.net()?.cas(t, off, cmp, new)
    } else {
        inner.cas_at(t, off, cmp, new)
    }
}

/// A request that is already complete (the operation finished at the origin).
pub(super) fn done_request(request: *mut c_int, win: c_int) -> MpiResult {
    if request.is_null() {
        mpi_bail!(MPI_ERR_ARG, "NULL request pointer");
    }
    let comm = inner(win)?.comm;
    let h = lock().reqs.insert(crate::request::Request {
        comm,
        persistent: None,
        active: Some(crate::request::Pending {
            ereq: None,
            done: None,
            stage: None,
            unpack: None,
            bsend_bytes: 0,
        }),
    });
    out(request, h, "request")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dt(blocks: &[(isize, usize)], lb: isize, ub: isize) -> Datatype {
        let mut d = lock().dtype(MPI_BYTE).expect("MPI_BYTE").as_ref().clone();
        d.blocks = blocks
            .iter()
            .map(|&(disp, len)| crate::datatype::Block { disp, len, elem: 1 })
            .collect();
        d.size = blocks.iter().map(|b| b.1).sum();
        d.lb = lb;
        d.ub = ub;
        d
    }

    #[test]
    fn ranges_follow_the_type_map_and_merge_adjacent_blocks() {
        // Two bytes at 0 and 4 in an extent of 8.
        let v = dt(&[(0, 2), (4, 2)], 0, 8);
        assert_eq!(ranges(&v, 2, 16), vec![(16, 2), (20, 2), (24, 2), (28, 2)]);
        // A contiguous type merges into one range across items.
        let c = dt(&[(0, 4)], 0, 4);
        assert_eq!(ranges(&c, 3, 8), vec![(8, 12)]);
        assert!(ranges(&c, 0, 8).is_empty());
    }
}
