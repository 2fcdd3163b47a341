//! The window memory as this process reaches it: reads and writes of a target's ranges
//! (through the shared segment, our own memory or cross-memory attach), the accumulate
//! mutex and the passive-target lock word of each control block, the reduction of the
//! accumulate family, and the same memory served to the `pt2pt` component's progress
//! thread ([`Exposure`]).

use super::pt2pt::proto::{AccOp, Fail, Memory};
use super::window::{Held, Inner, Target};
use crate::consts::*;
use crate::datatype::{pack_into, unpack_from};
use crate::ffi::{MpiError, MpiResult};
use oxmpi_engine::sys::{cma_copy, Cma};
use std::ffi::c_int;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Writer bit of the passive-target lock word (the low bits count readers).
const WRITER: u64 = 1 << 63;

/// Wait (spinning, then yielding and driving the engine) until `cond` holds.
pub(super) fn spin_until(mut cond: impl FnMut() -> bool) {
    let mut n = 0u32;
    while !cond() {
        n += 1;
        if n < 64 {
            std::hint::spin_loop();
        } else {
            if let Some(e) = oxmpi_engine::engine() {
                e.progress();
            }
            std::thread::yield_now();
        }
    }
}

/// The MPI error of a failed cross-memory-attach `what` on rank `rank` (pid `pid`):
/// `EFAULT` is an out-of-range access, `EPERM` a denied attach.
fn os_err(e: std::io::Error, rank: usize, pid: i32, what: &str) -> MpiError {
    let class = match e.raw_os_error() {
        Some(libc::EFAULT) => MPI_ERR_RMA_RANGE,
        Some(libc::EPERM) => MPI_ERR_RMA_ATTACH,
        _ => MPI_ERR_OTHER,
    };
    MpiError::new(
        class,
        format!("{what} of rank {rank} (pid {pid}) failed: {e}"),
    )
}

impl Inner {
    pub(super) fn target(&self, t: usize) -> Target {
        self.targets[t]
    }

    /// Check a range against the target's window and return its address.
    pub(super) fn addr(&self, t: usize, off: isize, len: usize) -> MpiResult<usize> {
        let tg = self.target(t);
        if let Some(size) = tg.size {
            if off < 0 || off as usize + len > size {
                mpi_bail!(
                    MPI_ERR_RMA_RANGE,
                    "bytes {off}..{} are outside the {size}-byte window of rank {t}",
                    off + len as isize
                );
            }
        }
        Ok((tg.base as isize).wrapping_add(off) as usize)
    }

    /// Read the ranges of target `t` into one packed buffer.
    pub(super) fn read(&self, t: usize, rs: &[(isize, usize)]) -> MpiResult<Vec<u8>> {
        let total: usize = rs.iter().map(|r| r.1).sum();
        let mut buf = vec![0u8; total];
        let tg = self.target(t);
        let mut pos = 0;
        for &(off, len) in rs {
            let a = self.addr(t, off, len)?;
            if tg.local {
                // SAFETY: `a` is in our address space: the shared segment (range checked
                // above) or our own window memory / attached region (the MPI contract).
                unsafe { std::ptr::copy(a as *const u8, buf.as_mut_ptr().add(pos), len) };
            } else {
                // SAFETY: `buf[pos..pos + len]` is ours and writable.
                unsafe { cma_copy(tg.pid, buf.as_mut_ptr().add(pos), a as u64, len, Cma::Read) }
                    .map_err(|e| os_err(e, t, tg.pid, "reading the window memory"))?;
            }
            pos += len;
        }
        Ok(buf)
    }

    /// Write one packed buffer over the ranges of target `t`.
    pub(super) fn write(&self, t: usize, rs: &[(isize, usize)], data: &[u8]) -> MpiResult {
        let tg = self.target(t);
        let mut pos = 0;
        for &(off, len) in rs {
            let a = self.addr(t, off, len)?;
            let len = len.min(data.len() - pos);
            if tg.local {
                // SAFETY: as in `read`, for writing; `data[pos..pos + len]` is in bounds.
                unsafe { std::ptr::copy(data.as_ptr().add(pos), a as *mut u8, len) };
            } else {
                // SAFETY: `data[pos..pos + len]` is readable (cma only reads it when
                // writing to the remote).
                unsafe {
                    cma_copy(
                        tg.pid,
                        data.as_ptr().add(pos).cast_mut(),
                        a as u64,
                        len,
                        Cma::Write,
                    )
                }
                .map_err(|e| os_err(e, t, tg.pid, "writing the window memory"))?;
            }
            pos += len;
        }
        Ok(())
    }

    pub(super) fn acc_lock(&self, t: usize) {
        let m = self.acc_mutex(t);
        spin_until(|| {
            m.compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        });
    }
    pub(super) fn acc_unlock(&self, t: usize) {
        self.acc_mutex(t).store(0, Ordering::Release);
    }

    /// The accumulate family on rank `t`'s memory (reached directly), atomic with respect
    /// to every other accumulate on it: `Some(old bytes)` when `fetch`.
    pub(super) fn accumulate_at(
        &self,
        t: usize,
        op: AccOp,
        rs: &[(isize, usize)],
        data: &[u8],
        fetch: bool,
    ) -> MpiResult<Option<Vec<u8>>> {
        let total: usize = rs.iter().map(|r| r.1).sum();
        self.acc_lock(t);
        let r = (|| {
            let mut cur = if op.op == MPI_REPLACE && !fetch {
                vec![0u8; total]
            } else {
                self.read(t, rs)?
            };
            let old = fetch.then(|| cur.clone());
            if op.op != MPI_NO_OP {
                combine(op.op, op.basic, op.bsize as usize, data, &mut cur)?;
                self.write(t, rs, &cur)?;
            }
            Ok::<_, MpiError>(old)
        })();
        self.acc_unlock(t);
        r
    }

    /// Compare-and-swap of one element at byte `off` of rank `t`'s memory (reached
    /// directly), under its accumulate mutex: the old bytes.
    pub(super) fn cas_at(
        &self,
        t: usize,
        off: isize,
        cmp: &[u8],
        new: &[u8],
    ) -> MpiResult<Vec<u8>> {
        let rs = [(off, cmp.len())];
        self.acc_lock(t);
        let r = (|| {
            let cur = self.read(t, &rs)?;
            if cur == cmp {
                self.write(t, &rs, new)?;
            }
            Ok::<_, MpiError>(cur)
        })();
        self.acc_unlock(t);
        r
    }

    /// Check ranges of a target reached with messages against its window (the target
    /// checks again; this reports the error at the call, as the direct path does).
    pub(super) fn check(&self, t: usize, rs: &[(isize, usize)]) -> MpiResult {
        rs.iter()
            .try_for_each(|&(off, len)| self.addr(t, off, len).map(|_| ()))
    }

    /// Try once to take the passive-target lock of rank `t` as `kind`.
    pub(super) fn try_lock(&self, t: usize, kind: Held) -> bool {
        let w = self.lock_word(t);
        match kind {
            Held::Exclusive => w
                .compare_exchange(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
                .is_ok(),
            Held::Shared => {
                let mut v = w.load(Ordering::Relaxed);
                loop {
                    if v & WRITER != 0 {
                        return false;
                    }
                    match w.compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed) {
                        Ok(_) => return true,
                        Err(cur) => v = cur,
                    }
                }
            }
        }
    }

    /// Release the passive-target lock of rank `t` taken as `kind`.
    pub(super) fn unlock(&self, t: usize, kind: Held) {
        let w = self.lock_word(t);
        match kind {
            Held::Exclusive => w.fetch_and(!WRITER, Ordering::Release),
            Held::Shared => w.fetch_sub(1, Ordering::Release),
        };
    }
}

/// Combine `origin` into `cur` (`cur = origin op cur`).
fn combine(op: c_int, basic: c_int, bsize: usize, origin: &[u8], cur: &mut [u8]) -> MpiResult {
    match op {
        MPI_NO_OP => Ok(()),
        MPI_REPLACE => {
            cur.copy_from_slice(origin);
            Ok(())
        }
        _ => {
            let len = cur.len();
            if len == 0 {
                return Ok(());
            }
            // The data is packed; the kernels read elements at their extent (the
            // `{value, int}` pair types have padding) from storage aligned for them:
            // unpack into 16-byte aligned buffers.
            let Some(bdt) = crate::datatype::builtin(basic) else {
                mpi_bail!(MPI_ERR_TYPE, "{basic:#x} is not a predefined datatype");
            };
            let n = len / bsize;
            let ext = (bdt.extent().max(0) as usize).max(bsize);
            let words = (n * ext).div_ceil(16);
            let mut a = vec![0u128; words];
            let mut b = vec![0u128; words];
            // SAFETY: `a` and `b` hold `n` items of the basic type at its extent; the
            // sources hold `len` packed bytes (origin.len() == cur.len() is checked by
            // the callers).
            unsafe {
                unpack_from(&bdt, n, a.as_mut_ptr().cast(), origin);
                unpack_from(&bdt, n, b.as_mut_ptr().cast(), cur);
            }
            // SAFETY: both buffers hold n aligned elements of `basic`.
            let ok = unsafe {
                crate::op::apply_builtin(op, basic, a.as_ptr().cast(), b.as_mut_ptr().cast(), n)
            };
            if !ok {
                mpi_bail!(
                    MPI_ERR_OP,
                    "operation {op:#x} is not defined for datatype {basic:#x}"
                );
            }
            let mut packed = Vec::with_capacity(len);
            // SAFETY: `b` holds `n` items of the basic type.
            unsafe { pack_into(&bdt, n, b.as_ptr().cast(), &mut packed) };
            cur.copy_from_slice(&packed);
            Ok(())
        }
    }
}

/// This process's own window memory, served to origins that reach it with messages.
pub(super) struct Exposure(pub(super) Arc<Inner>);

impl Exposure {
    fn me(&self) -> usize {
        self.0.rank
    }
}

/// An MPI error as the target core reports it.
fn fail(e: MpiError) -> Fail {
    Fail {
        code: e.code,
        detail: e.detail,
    }
}

fn kind(exclusive: bool) -> Held {
    if exclusive {
        Held::Exclusive
    } else {
        Held::Shared
    }
}

impl Memory for Exposure {
    fn put(&mut self, ranges: &[(isize, usize)], data: &[u8]) -> Result<(), Fail> {
        self.0.write(self.me(), ranges, data).map_err(fail)
    }
    fn get(&mut self, ranges: &[(isize, usize)]) -> Result<Vec<u8>, Fail> {
        self.0.read(self.me(), ranges).map_err(fail)
    }
    fn accumulate(
        &mut self,
        op: AccOp,
        ranges: &[(isize, usize)],
        data: &[u8],
        fetch: bool,
    ) -> Result<Vec<u8>, Fail> {
        self.0
            .accumulate_at(self.me(), op, ranges, data, fetch)
            .map(|old| old.unwrap_or_default())
            .map_err(fail)
    }
    fn cas(&mut self, off: isize, cmp: &[u8], new: &[u8]) -> Result<Vec<u8>, Fail> {
        self.0.cas_at(self.me(), off, cmp, new).map_err(fail)
    }
    fn try_lock(&mut self, exclusive: bool) -> bool {
        self.0.try_lock(self.me(), kind(exclusive))
    }
    fn unlock(&mut self, exclusive: bool) {
        self.0.unlock(self.me(), kind(exclusive));
    }
    fn posted(&mut self, target: usize) {
        let i = &self.0;
        i.posted(i.rank, target).fetch_add(1, Ordering::Release);
    }
    fn completed(&mut self) {
        let i = &self.0;
        i.completed(i.rank).fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combine_applies_predefined_ops() {
        let o = 5i32.to_ne_bytes();
        let mut cur = 7i32.to_ne_bytes();
        combine(MPI_SUM, MPI_INT, 4, &o, &mut cur).expect("sum");
        assert_eq!(i32::from_ne_bytes(cur), 12);
        combine(MPI_REPLACE, MPI_INT, 4, &o, &mut cur).expect("replace");
        assert_eq!(i32::from_ne_bytes(cur), 5);
        combine(MPI_NO_OP, MPI_INT, 4, &9i32.to_ne_bytes(), &mut cur).expect("no_op");
        assert_eq!(i32::from_ne_bytes(cur), 5);
        let e = combine(MPI_BAND, MPI_DOUBLE, 8, &[0; 8], &mut [0; 8]).unwrap_err();
        assert_eq!(e.code, MPI_ERR_OP);
    }
}
