//! One-sided communication (MPI-3.1 RMA): windows, put/get, the accumulate family,
//! fence, passive-target locks, PSCW, window attributes, names, info and error handlers.
//!
//! Design: all ranks of a job share a node, so RMA is truly one-sided and never needs the
//! target to call MPI.
//!
//! * Every window has one **shared segment** (a `memfd` created by rank 0 of the window's
//!   communicator, mapped by every rank through `/proc/<pid>/fd/<fd>`). It starts with one
//!   control block per rank (the passive-target reader/writer lock word, the accumulate
//!   mutex, PSCW counters), followed — for `MPI_Win_allocate` and
//!   `MPI_Win_allocate_shared` — by the window memory of every rank. Put/get on those
//!   windows are plain copies through the mapping; `MPI_Win_shared_query` returns the
//!   peer's memory in our mapping (contiguous across ranks for shared windows).
//! * `MPI_Win_create` (user memory) and `MPI_Win_create_dynamic` reach other ranks' memory
//!   with cross-memory attach (`process_vm_readv`/`process_vm_writev`). Creation probes
//!   every peer once; if the kernel denies it (`EPERM`, e.g. Yama `ptrace_scope` 2/3),
//!   creation fails on every rank with `MPI_ERR_RMA_ATTACH` and a message naming the rank.
//! * Operations complete at the origin before the call returns, so `flush*` only order
//!   memory; accumulate-family operations take the target's accumulate mutex, which makes
//!   them atomic with respect to each other.
//! * Fence is a barrier on the window's private communicator (a duplicate of the user's)
//!   between memory fences. PSCW uses monotonic counters in the control blocks: `post`
//!   increments `posted[me]` at each origin, `start` waits for it, `complete` increments
//!   the target's `completed`, `wait`/`test` compare it with the number of expected
//!   completions.
//!
//! Errors of window calls go through the window's error handler (default
//! `MPI_ERRORS_ARE_FATAL`); errors of creation calls through the communicator's.
//!
//! Layout: this file holds the entry points (`PMPI_Win_*`, `PMPI_Put`, ...) and the error
//! routing to the window's handler (`OnWin`); `window` the segment, its control blocks,
//! the window table and creation; `ops` put, get and the accumulate family; `sync`
//! locks, flush and PSCW; `pt2pt` (operations as messages) and `ofi` (puts and gets over
//! libfabric's RMA, accumulates as its atomics where the window agreed on them) the components for peers on other nodes. Collectives run on the window's private communicator through
//! `comm::Internal`, never through the exported `MPI_*` functions.

mod mem;
mod ofi;
mod ops;
pub(crate) mod pt2pt;
mod sync;
mod window;

use crate::consts::*;
use crate::ffi::{copy_cstr, inp, out, read_cstr, DispArg, ErrorOwner, MpiError, MpiResult};
use crate::state::lock;
use mem::spin_until;
use ops::{access, do_accumulate, do_get, do_put, done_request, dtype, TargetSpec};
use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{fence, Ordering};
use sync::{
    acquire, acquire_all_shared, check_assert, check_target, exposure_done, flush, group_ranks,
    release,
};
use window::{
    bad_win, barrier, delete_attr_value, delete_attrs, free_comm, inner, predefined_key, read_info,
    wins, with_win, Held,
};

/// `MPI_Win_free` of window `h`: attribute callbacks, completion of our operations at
/// targets reached with messages, the final barrier, the progress thread, the private
/// communicator.
fn free_win(h: c_int) -> MpiResult {
    let (inner, attrs) = with_win(h, |w| Ok((w.inner.clone(), std::mem::take(&mut w.attrs))))?;
    delete_attrs(h, attrs)?;
    inner.rdma_flush(None)?;
    if let Some(net) = &inner.net {
        net.flush_all()?;
    }
    fence(Ordering::SeqCst);
    // Nobody may still access our memory when it goes away.
    barrier(&inner)?;
    if let Some(net) = &inner.net {
        net.stop();
    }
    let w = wins().remove(h).ok_or_else(|| bad_win(h))?;
    drop(w);
    let comm = inner.comm;
    drop(inner);
    free_comm(comm);
    Ok(())
}

/// A window just made by [`window::create`] (handle, base): when some of its peers are
/// reached with messages, start the progress thread that serves them our memory.
fn serving(made: MpiResult<(c_int, usize)>) -> MpiResult<(c_int, usize)> {
    let (h, base) = made?;
    let inner = inner(h)?;
    if let Some(net) = &inner.net {
        net.start(Box::new(mem::Exposure(inner.clone())))?;
    }
    Ok((h, base))
}

// ---- entry points with window error handling ----

/// Errors of window calls go to the window's error handler; to the communicator's (or
/// `MPI_COMM_WORLD`'s) when the error names a communicator or the window is invalid.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OnWin(pub c_int);

impl ErrorOwner for OnWin {
    fn raise(&self, func: &str, err: &MpiError) -> c_int {
        let action = if err.comm.is_some() {
            None
        } else {
            wins().get(self.0).map(|w| w.err_action)
        };
        match action {
            None => crate::errors::raise(func, err),
            Some(a) => {
                let mut w = self.0;
                crate::errors::act(func, err, a, &mut w, "the window's error handler")
            }
        }
    }
}

/// A window's displacement unit (an `int` in the library; the `_c` forms pass an `MPI_Aint`).
fn unit(disp_unit: isize, comm: c_int) -> MpiResult<c_int> {
    c_int::try_from(disp_unit).map_err(|_| {
        MpiError::new(
            MPI_ERR_DISP,
            format!("displacement unit {disp_unit} above INT_MAX"),
        )
        .on(comm)
    })
}

mpi_fn_c! {
    /// `MPI_Win_allocate`: window memory in the shared segment.
    fn PMPI_Win_allocate / "MPI_Win_allocate", PMPI_Win_allocate_c / "MPI_Win_allocate_c" (size: isize, disp_unit: Disp, info: c_int, comm: c_int, baseptr: *mut c_void, win: *mut c_int) {
        if baseptr.is_null() || win.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL baseptr or win").on(comm));
        }
        let (h, base) = serving(window::create(comm, MPI_WIN_FLAVOR_ALLOCATE, size, unit(disp_unit.aint(), comm)?, info, 0)).map_err(|e| e.on(comm))?;
        out(baseptr.cast::<*mut c_void>(), base as *mut c_void, "baseptr")?;
        out(win, h, "win")
    }
}

mpi_fn_c! {
    /// `MPI_Win_allocate_shared`: like allocate; the memory of all ranks is contiguous
    /// (unless `alloc_shared_noncontig`) and reachable with `MPI_Win_shared_query`.
    fn PMPI_Win_allocate_shared / "MPI_Win_allocate_shared", PMPI_Win_allocate_shared_c / "MPI_Win_allocate_shared_c" (size: isize, disp_unit: Disp, info: c_int, comm: c_int, baseptr: *mut c_void, win: *mut c_int) {
        if baseptr.is_null() || win.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL baseptr or win").on(comm));
        }
        let (h, base) = serving(window::create(comm, MPI_WIN_FLAVOR_SHARED, size, unit(disp_unit.aint(), comm)?, info, 0)).map_err(|e| e.on(comm))?;
        out(baseptr.cast::<*mut c_void>(), base as *mut c_void, "baseptr")?;
        out(win, h, "win")
    }
}

mpi_fn_c! {
    /// `MPI_Win_create`: a window over user memory (reached with cross-memory attach).
    fn PMPI_Win_create / "MPI_Win_create", PMPI_Win_create_c / "MPI_Win_create_c" (base: *mut c_void, size: isize, disp_unit: Disp, info: c_int, comm: c_int, win: *mut c_int) {
        if win.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL win").on(comm));
        }
        let (h, _) = serving(window::create(comm, MPI_WIN_FLAVOR_CREATE, size, unit(disp_unit.aint(), comm)?, info, base as usize)).map_err(|e| e.on(comm))?;
        out(win, h, "win")
    }
}

mpi_fn! {
    /// `MPI_Win_create_dynamic`: target displacements are addresses of attached memory.
    fn PMPI_Win_create_dynamic / "MPI_Win_create_dynamic" (info: c_int, comm: c_int, win: *mut c_int) {
        if win.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL win").on(comm));
        }
        let (h, _) = serving(window::create(comm, MPI_WIN_FLAVOR_DYNAMIC, 0, 1, info, 0)).map_err(|e| e.on(comm))?;
        out(win, h, "win")
    }
}

mpi_fn! {
    /// `MPI_Win_free`: collective; releases the segment and the private communicator.
    fn PMPI_Win_free / "MPI_Win_free" [OnWin(if win.is_null() { MPI_WIN_NULL } else { win.read_unaligned() })] (win: *mut c_int) {
        let h = inp(win, "win")?;
        free_win(h)?;
        out(win, MPI_WIN_NULL, "win")
    }
}

mpi_fn! {
    /// `MPI_Win_attach`.
    fn PMPI_Win_attach / "MPI_Win_attach" [OnWin(win)] (win: c_int, base: *mut c_void, size: isize) {
        with_win(win, |w| {
            if w.flavor != MPI_WIN_FLAVOR_DYNAMIC {
                mpi_bail!(MPI_ERR_RMA_FLAVOR, "MPI_Win_attach needs a window made by MPI_Win_create_dynamic");
            }
            if size < 0 {
                mpi_bail!(MPI_ERR_SIZE, "negative size {size}");
            }
            w.attached.push((base as usize, size as usize));
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_detach`.
    fn PMPI_Win_detach / "MPI_Win_detach" [OnWin(win)] (win: c_int, base: *const c_void) {
        with_win(win, |w| {
            if w.flavor != MPI_WIN_FLAVOR_DYNAMIC {
                mpi_bail!(MPI_ERR_RMA_FLAVOR, "MPI_Win_detach needs a window made by MPI_Win_create_dynamic");
            }
            match w.attached.iter().position(|a| a.0 == base as usize) {
                Some(i) => {
                    w.attached.remove(i);
                    Ok(())
                }
                None => mpi_bail!(MPI_ERR_RMA_ATTACH, "address {base:p} is not attached to this window"),
            }
        })
    }
}

mpi_fn_c! {
    /// `MPI_Win_shared_query`: the memory of `rank` in our mapping (shared windows; other
    /// flavors but dynamic give size 0 and a NULL base, as MPI 4.0 allows).
    fn PMPI_Win_shared_query / "MPI_Win_shared_query", PMPI_Win_shared_query_c / "MPI_Win_shared_query_c" [OnWin(win)] (win: c_int, rank: c_int, size: *mut isize, disp_unit: *mut Disp, baseptr: *mut c_void) {
        let inner = inner(win)?;
        if inner.flavor == MPI_WIN_FLAVOR_DYNAMIC {
            mpi_bail!(MPI_ERR_RMA_FLAVOR, "MPI_Win_shared_query on a dynamic window");
        }
        // MPI 4.0: other windows answer too; their memory is not offered as shared (size 0,
        // NULL base).
        let shared = inner.flavor == MPI_WIN_FLAVOR_SHARED;
        let r = if rank == MPI_PROC_NULL {
            (0..inner.nranks).find(|&r| inner.targets[r].size != Some(0)).unwrap_or(0)
        } else if rank < 0 || rank as usize >= inner.nranks {
            mpi_bail!(MPI_ERR_RANK, "rank {rank} is not in the window's group");
        } else {
            rank as usize
        };
        let t = inner.targets[r];
        let (bytes, base) = if shared { (t.size.unwrap_or(0) as isize, t.base as *mut c_void) } else { (0, std::ptr::null_mut()) };
        out(size, bytes, "size")?;
        let du = Disp::try_from(t.disp_unit).map_err(|_| MpiError::new(MPI_ERR_ARG, format!("displacement unit {} does not fit in an int", t.disp_unit)))?;
        out(disp_unit, du, "disp_unit")?;
        out(baseptr.cast::<*mut c_void>(), base, "baseptr")
    }
}

// ---- communication ----

mpi_fn_c! {
    /// `MPI_Put`.
    fn PMPI_Put / "MPI_Put", PMPI_Put_c / "MPI_Put_c" [OnWin(win)] (origin_addr: *const c_void, origin_count: Count, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, win: c_int) {
        do_put(origin_addr, origin_count.into(), origin_datatype, TargetSpec { rank: target_rank, disp: target_disp, count: target_count.into(), datatype: target_datatype, win })
    }
}

mpi_fn_c! {
    /// `MPI_Get`.
    fn PMPI_Get / "MPI_Get", PMPI_Get_c / "MPI_Get_c" [OnWin(win)] (origin_addr: *mut c_void, origin_count: Count, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, win: c_int) {
        do_get(origin_addr, origin_count.into(), origin_datatype, TargetSpec { rank: target_rank, disp: target_disp, count: target_count.into(), datatype: target_datatype, win })
    }
}

mpi_fn_c! {
    /// `MPI_Accumulate`.
    fn PMPI_Accumulate / "MPI_Accumulate", PMPI_Accumulate_c / "MPI_Accumulate_c" [OnWin(win)] (origin_addr: *const c_void, origin_count: Count, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, op: c_int, win: c_int) {
        do_accumulate(origin_addr, origin_count.into(), origin_datatype, None, TargetSpec { rank: target_rank, disp: target_disp, count: target_count.into(), datatype: target_datatype, win }, op)
    }
}

mpi_fn_c! {
    /// `MPI_Get_accumulate`.
    fn PMPI_Get_accumulate / "MPI_Get_accumulate", PMPI_Get_accumulate_c / "MPI_Get_accumulate_c" [OnWin(win)] (origin_addr: *const c_void, origin_count: Count, origin_datatype: c_int, result_addr: *mut c_void, result_count: Count, result_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, op: c_int, win: c_int) {
        do_accumulate(origin_addr, origin_count.into(), origin_datatype, Some((result_addr, result_count.into(), result_datatype)), TargetSpec { rank: target_rank, disp: target_disp, count: target_count.into(), datatype: target_datatype, win }, op)
    }
}

mpi_fn! {
    /// `MPI_Fetch_and_op`.
    fn PMPI_Fetch_and_op / "MPI_Fetch_and_op" [OnWin(win)] (origin_addr: *const c_void, result_addr: *mut c_void, datatype: c_int, target_rank: c_int, target_disp: isize, op: c_int, win: c_int) {
        do_accumulate(origin_addr, 1, datatype, Some((result_addr, 1, datatype)), TargetSpec { rank: target_rank, disp: target_disp, count: 1, datatype, win }, op)
    }
}

mpi_fn! {
    /// `MPI_Compare_and_swap`.
    fn PMPI_Compare_and_swap / "MPI_Compare_and_swap" [OnWin(win)] (origin_addr: *const c_void, compare_addr: *const c_void, result_addr: *mut c_void, datatype: c_int, target_rank: c_int, target_disp: isize, win: c_int) {
        let a = access(win, target_rank, target_disp)?;
        let dt = dtype(datatype)?;
        if !dt.predefined || dt.basic.is_none() {
            mpi_bail!(MPI_ERR_TYPE, "MPI_Compare_and_swap needs a predefined integer-like datatype");
        }
        let n = dt.size;
        let Some(t) = a.target else { return Ok(()) };
        if origin_addr.is_null() || compare_addr.is_null() || result_addr.is_null() {
            mpi_bail!(MPI_ERR_BUFFER, "NULL origin, compare or result buffer");
        }
        // SAFETY: each buffer holds one element of the predefined datatype.
        let (new, cmp) = unsafe {
            (
                std::slice::from_raw_parts(origin_addr.cast::<u8>(), n).to_vec(),
                std::slice::from_raw_parts(compare_addr.cast::<u8>(), n).to_vec(),
            )
        };
        let basic = dt.basic.unwrap_or(datatype);
        let cur = ops::cas_to(&a.inner, t, basic, a.start, &cmp, &new)?;
        // SAFETY: the result buffer holds one element (n bytes).
        unsafe { std::ptr::copy_nonoverlapping(cur.as_ptr(), result_addr.cast::<u8>(), n) };
        Ok(())
    }
}

mpi_fn_c! {
    /// `MPI_Rput`: completes at once.
    fn PMPI_Rput / "MPI_Rput", PMPI_Rput_c / "MPI_Rput_c" [OnWin(win)] (origin_addr: *const c_void, origin_count: Count, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, win: c_int, request: *mut c_int) {
        do_put(origin_addr, origin_count.into(), origin_datatype, TargetSpec { rank: target_rank, disp: target_disp, count: target_count.into(), datatype: target_datatype, win })?;
        done_request(request, win)
    }
}

mpi_fn_c! {
    /// `MPI_Rget`: completes at once.
    fn PMPI_Rget / "MPI_Rget", PMPI_Rget_c / "MPI_Rget_c" [OnWin(win)] (origin_addr: *mut c_void, origin_count: Count, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, win: c_int, request: *mut c_int) {
        do_get(origin_addr, origin_count.into(), origin_datatype, TargetSpec { rank: target_rank, disp: target_disp, count: target_count.into(), datatype: target_datatype, win })?;
        done_request(request, win)
    }
}

mpi_fn_c! {
    /// `MPI_Raccumulate`: completes at once.
    fn PMPI_Raccumulate / "MPI_Raccumulate", PMPI_Raccumulate_c / "MPI_Raccumulate_c" [OnWin(win)] (origin_addr: *const c_void, origin_count: Count, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, op: c_int, win: c_int, request: *mut c_int) {
        do_accumulate(origin_addr, origin_count.into(), origin_datatype, None, TargetSpec { rank: target_rank, disp: target_disp, count: target_count.into(), datatype: target_datatype, win }, op)?;
        done_request(request, win)
    }
}

mpi_fn_c! {
    /// `MPI_Rget_accumulate`: completes at once.
    fn PMPI_Rget_accumulate / "MPI_Rget_accumulate", PMPI_Rget_accumulate_c / "MPI_Rget_accumulate_c" [OnWin(win)] (origin_addr: *const c_void, origin_count: Count, origin_datatype: c_int, result_addr: *mut c_void, result_count: Count, result_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, op: c_int, win: c_int, request: *mut c_int) {
        do_accumulate(origin_addr, origin_count.into(), origin_datatype, Some((result_addr, result_count.into(), result_datatype)), TargetSpec { rank: target_rank, disp: target_disp, count: target_count.into(), datatype: target_datatype, win }, op)?;
        done_request(request, win)
    }
}

// ---- synchronization ----

mpi_fn! {
    /// `MPI_Win_fence`: memory fence, barrier, memory fence.
    fn PMPI_Win_fence / "MPI_Win_fence" [OnWin(win)] (assert: c_int, win: c_int) {
        check_assert(assert)?;
        let inner = inner(win)?;
        inner.rdma_flush(None)?;
        fence(Ordering::SeqCst);
        match &inner.net {
            // Every rank of the window has a message path when one has (a peer on
            // another node, or `osc=pt2pt`): all take the counting fence.
            Some(net) => {
                net.fence(&inner.coll)?;
                // Our node's ranks wait for this before reaching our memory directly.
                inner
                    .fences_closed(inner.rank)
                    .store(net.epoch(), Ordering::Release);
            }
            None => barrier(&inner)?,
        }
        fence(Ordering::SeqCst);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_lock`.
    fn PMPI_Win_lock / "MPI_Win_lock" [OnWin(win)] (lock_type: c_int, rank: c_int, assert: c_int, win: c_int) {
        let kind = match lock_type {
            MPI_LOCK_EXCLUSIVE => Held::Exclusive,
            MPI_LOCK_SHARED => Held::Shared,
            _ => mpi_bail!(MPI_ERR_LOCKTYPE, "invalid lock type {lock_type}"),
        };
        check_assert(assert)?;
        let inner = inner(win)?;
        let Some(t) = check_target(&inner, rank)? else { return Ok(()) };
        with_win(win, |w| {
            if w.lock_all || w.held.contains_key(&t) {
                mpi_bail!(MPI_ERR_RMA_SYNC, "rank {t} of this window is already locked by this process");
            }
            Ok(())
        })?;
        acquire(&inner, t, kind)?;
        with_win(win, |w| {
            w.held.insert(t, kind);
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_unlock`.
    fn PMPI_Win_unlock / "MPI_Win_unlock" [OnWin(win)] (rank: c_int, win: c_int) {
        let inner = inner(win)?;
        let Some(t) = check_target(&inner, rank)? else { return Ok(()) };
        let kind = with_win(win, |w| match w.held.remove(&t) {
            Some(k) => Ok(k),
            None => mpi_bail!(MPI_ERR_RMA_SYNC, "rank {t} of this window is not locked by this process"),
        })?;
        fence(Ordering::SeqCst);
        release(&inner, t, kind)
    }
}

mpi_fn! {
    /// `MPI_Win_lock_all`: a shared lock on every rank.
    fn PMPI_Win_lock_all / "MPI_Win_lock_all" [OnWin(win)] (assert: c_int, win: c_int) {
        check_assert(assert)?;
        let inner = inner(win)?;
        with_win(win, |w| {
            if w.lock_all || !w.held.is_empty() {
                mpi_bail!(MPI_ERR_RMA_SYNC, "this window is already locked by this process");
            }
            w.lock_all = true;
            Ok(())
        })?;
        acquire_all_shared(&inner)
    }
}

mpi_fn! {
    /// `MPI_Win_unlock_all`.
    fn PMPI_Win_unlock_all / "MPI_Win_unlock_all" [OnWin(win)] (win: c_int) {
        let inner = inner(win)?;
        with_win(win, |w| {
            if !w.lock_all {
                mpi_bail!(MPI_ERR_RMA_SYNC, "MPI_Win_unlock_all without MPI_Win_lock_all");
            }
            w.lock_all = false;
            Ok(())
        })?;
        fence(Ordering::SeqCst);
        (0..inner.nranks).try_for_each(|t| release(&inner, t, Held::Shared))
    }
}

mpi_fn! {
    /// `MPI_Win_flush`.
    fn PMPI_Win_flush / "MPI_Win_flush" [OnWin(win)] (rank: c_int, win: c_int) {
        flush(win, Some(rank))
    }
}

mpi_fn! {
    /// `MPI_Win_flush_local`.
    fn PMPI_Win_flush_local / "MPI_Win_flush_local" [OnWin(win)] (rank: c_int, win: c_int) {
        flush(win, Some(rank))
    }
}

mpi_fn! {
    /// `MPI_Win_flush_all`.
    fn PMPI_Win_flush_all / "MPI_Win_flush_all" [OnWin(win)] (win: c_int) {
        flush(win, None)
    }
}

mpi_fn! {
    /// `MPI_Win_flush_local_all`.
    fn PMPI_Win_flush_local_all / "MPI_Win_flush_local_all" [OnWin(win)] (win: c_int) {
        flush(win, None)
    }
}

mpi_fn! {
    /// `MPI_Win_sync`: a memory fence (the memory model is unified).
    fn PMPI_Win_sync / "MPI_Win_sync" [OnWin(win)] (win: c_int) {
        inner(win)?;
        fence(Ordering::SeqCst);
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_post`: open an exposure epoch to the origins of `group`.
    fn PMPI_Win_post / "MPI_Win_post" [OnWin(win)] (group: c_int, assert: c_int, win: c_int) {
        check_assert(assert)?;
        let ranks = group_ranks(win, group)?;
        let inner = inner(win)?;
        with_win(win, |w| {
            if w.exposure {
                mpi_bail!(MPI_ERR_RMA_SYNC, "an exposure epoch is already open on this window");
            }
            w.exposure = true;
            w.expected += ranks.len() as u64;
            Ok(())
        })?;
        fence(Ordering::SeqCst);
        for &o in &ranks {
            if inner.targets[o].remote {
                inner.net()?.post(o)?;
            } else {
                inner.posted(o, inner.rank).fetch_add(1, Ordering::Release);
            }
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_start`: open an access epoch to the targets of `group` once they posted.
    fn PMPI_Win_start / "MPI_Win_start" [OnWin(win)] (group: c_int, assert: c_int, win: c_int) {
        check_assert(assert)?;
        let ranks = group_ranks(win, group)?;
        let inner = inner(win)?;
        let consumed = with_win(win, |w| {
            if w.access.is_some() {
                mpi_bail!(MPI_ERR_RMA_SYNC, "an access epoch is already open on this window");
            }
            Ok(w.consumed.clone())
        })?;
        for &t in &ranks {
            let p = inner.posted(inner.rank, t);
            spin_until(|| p.load(Ordering::Acquire) > consumed[t]);
        }
        with_win(win, |w| {
            for &t in &ranks {
                w.consumed[t] += 1;
            }
            w.access = Some(ranks);
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_complete`: close the access epoch; tell each target.
    fn PMPI_Win_complete / "MPI_Win_complete" [OnWin(win)] (win: c_int) {
        let inner = inner(win)?;
        let ranks = with_win(win, |w| match w.access.take() {
            Some(r) => Ok(r),
            None => mpi_bail!(MPI_ERR_RMA_SYNC, "MPI_Win_complete without MPI_Win_start"),
        })?;
        fence(Ordering::SeqCst);
        for t in ranks {
            if inner.targets[t].remote {
                inner.rdma_flush(Some(t))?;
                inner.net()?.complete(t)?;
            } else {
                inner.completed(t).fetch_add(1, Ordering::Release);
            }
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_wait`.
    fn PMPI_Win_wait / "MPI_Win_wait" [OnWin(win)] (win: c_int) {
        exposure_done(win, true).map(|_| ())
    }
}

mpi_fn! {
    /// `MPI_Win_test`.
    fn PMPI_Win_test / "MPI_Win_test" [OnWin(win)] (win: c_int, flag: *mut c_int) {
        if flag.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL flag");
        }
        let done = exposure_done(win, false)?;
        if !done {
            // Polled in a loop: yield when oversubscribed, as MPI_Test does.
            crate::request::poll()?;
        }
        out(flag, done as c_int, "flag")
    }
}

// ---- attributes, group, name, info, error handlers ----

mpi_fn! {
    /// `MPI_Win_get_attr`: the predefined attributes and user keyvals.
    fn PMPI_Win_get_attr / "MPI_Win_get_attr" [OnWin(win)] (win: c_int, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) {
        let v: Option<usize> = with_win(win, |w| {
            Ok(match keyval {
                MPI_WIN_BASE => Some(w.base),
                MPI_WIN_SIZE => Some(&w.size as *const isize as usize),
                MPI_WIN_DISP_UNIT => Some(&w.disp_unit as *const c_int as usize),
                MPI_WIN_CREATE_FLAVOR => Some(&w.flavor as *const c_int as usize),
                MPI_WIN_MODEL => Some(&w.model as *const c_int as usize),
                _ => {
                    if lock().keyvals.get(keyval).is_none() {
                        mpi_bail!(MPI_ERR_KEYVAL, "invalid attribute key {keyval:#x}");
                    }
                    w.attrs.get(&keyval).copied()
                }
            })
        })?;
        match v {
            Some(v) => {
                out(attribute_val.cast::<*mut c_void>(), v as *mut c_void, "attribute_val")?;
                out(flag, 1, "flag")
            }
            None => out(flag, 0, "flag"),
        }
    }
}

mpi_fn! {
    /// `MPI_Win_set_attr`.
    fn PMPI_Win_set_attr / "MPI_Win_set_attr" [OnWin(win)] (win: c_int, keyval: c_int, attribute_val: *mut c_void) {
        if predefined_key(keyval) {
            mpi_bail!(MPI_ERR_KEYVAL, "predefined window attributes cannot be set");
        }
        crate::attrs::live_keyval(&lock(), keyval)?;
        let old = with_win(win, |w| Ok(w.attrs.insert(keyval, attribute_val as usize)))?;
        match old {
            Some(old) => delete_attr_value(win, keyval, old)?,
            None => crate::attrs::attr_added(&mut lock(), keyval),
        }
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Win_delete_attr`.
    fn PMPI_Win_delete_attr / "MPI_Win_delete_attr" [OnWin(win)] (win: c_int, keyval: c_int) {
        if predefined_key(keyval) {
            mpi_bail!(MPI_ERR_KEYVAL, "predefined window attributes cannot be deleted");
        }
        if lock().keyvals.get(keyval).is_none() {
            mpi_bail!(MPI_ERR_KEYVAL, "invalid attribute key {keyval:#x}");
        }
        let old = with_win(win, |w| Ok(w.attrs.remove(&keyval)))?;
        match old {
            Some(old) => delete_attrs(win, [(keyval, old)].into()),
            None => mpi_bail!(MPI_ERR_KEYVAL, "attribute {keyval:#x} is not set on this window"),
        }
    }
}

mpi_fn! {
    /// `MPI_Win_get_group`.
    fn PMPI_Win_get_group / "MPI_Win_get_group" [OnWin(win)] (win: c_int, group: *mut c_int) {
        let comm = inner(win)?.comm;
        let mut st = lock();
        let members = st.comm(comm)?.group.clone();
        let g = st.new_group(members);
        drop(st);
        out(group, g, "group")
    }
}

mpi_fn! {
    /// `MPI_Win_set_name`.
    fn PMPI_Win_set_name / "MPI_Win_set_name" [OnWin(win)] (win: c_int, win_name: *const c_char) {
        let mut s = read_cstr(win_name, "win_name")?;
        s.truncate(MPI_MAX_OBJECT_NAME as usize - 1);
        with_win(win, |w| {
            w.name = s;
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_get_name` (`MPI_WIN_NULL` is named too).
    fn PMPI_Win_get_name / "MPI_Win_get_name" [OnWin(win)] (win: c_int, win_name: *mut c_char, resultlen: *mut c_int) {
        let name = if win == MPI_WIN_NULL {
            "MPI_WIN_NULL".to_string()
        } else {
            with_win(win, |w| Ok(w.name.clone()))?
        };
        let n = copy_cstr(win_name, MPI_MAX_OBJECT_NAME as usize, &name)?;
        out(resultlen, n, "resultlen")
    }
}

mpi_fn! {
    /// `MPI_Win_set_info`.
    fn PMPI_Win_set_info / "MPI_Win_set_info" [OnWin(win)] (win: c_int, info: c_int) {
        let entries = read_info(info)?;
        with_win(win, |w| {
            for (k, v) in entries {
                match w.info.iter_mut().find(|(x, _)| *x == k) {
                    Some(e) => e.1 = v,
                    None => w.info.push((k, v)),
                }
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_get_info`: a new info object with the window's hints.
    fn PMPI_Win_get_info / "MPI_Win_get_info" [OnWin(win)] (win: c_int, info_used: *mut c_int) {
        if info_used.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL info_used");
        }
        let entries = with_win(win, |w| Ok(w.info.clone()))?;
        let h = lock().infos.insert(crate::state::Info { entries });
        out(info_used, h, "info_used")
    }
}

mpi_fn! {
    /// `MPI_Win_create_errhandler`.
    fn PMPI_Win_create_errhandler / "MPI_Win_create_errhandler" (func: Option<crate::errors::CommErrFn>, errhandler: *mut c_int) {
        let Some(func) = func else { mpi_bail!(MPI_ERR_ARG, "NULL error handler function") };
        if errhandler.is_null() {
            mpi_bail!(MPI_ERR_ARG, "NULL errhandler");
        }
        let h = lock().errhandlers.insert(crate::errors::UserErrhandler { func, refs: 1 });
        out(errhandler, h, "errhandler")
    }
}

mpi_fn! {
    /// `MPI_Win_set_errhandler`.
    fn PMPI_Win_set_errhandler / "MPI_Win_set_errhandler" [OnWin(win)] (win: c_int, errhandler: c_int) {
        let action = lock().errhandler_action(errhandler)?;
        with_win(win, |w| {
            w.errh = errhandler;
            w.err_action = action;
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_get_errhandler`.
    fn PMPI_Win_get_errhandler / "MPI_Win_get_errhandler" [OnWin(win)] (win: c_int, errhandler: *mut c_int) {
        let h = with_win(win, |w| Ok(w.errh))?;
        out(errhandler, crate::errors::handed_out(h), "errhandler")
    }
}

mpi_fn! {
    /// `MPI_Win_call_errhandler`: invoke the window's error handler with `errorcode`.
    fn PMPI_Win_call_errhandler / "MPI_Win_call_errhandler" [OnWin(win)] (win: c_int, errorcode: c_int) {
        with_win(win, |_| Ok(()))?;
        let e = MpiError::new(errorcode, "raised by MPI_Win_call_errhandler");
        OnWin(win).raise("MPI_Win_call_errhandler", &e);
        Ok(())
    }
}

// ---- a counter for the library's own use ----

/// A 64-bit counter held by rank 0 of a communicator and updated atomically by every rank:
/// directly on rank 0's node, with messages from other nodes (the `pt2pt` component). The
/// shared file pointer of MPI-IO. Internally a window, without MPI epochs.
pub(crate) struct Counter {
    h: c_int,
    inner: std::sync::Arc<window::Inner>,
}

impl Counter {
    /// Collectively create the counter on `comm` with the value `init` (rank 0's).
    pub(crate) fn new(comm: c_int, init: i64) -> MpiResult<Counter> {
        let root = crate::comm::Internal::of(comm)?.rank() == 0;
        let size = if root { 8 } else { 0 };
        let (h, base) = serving(window::create(
            comm,
            MPI_WIN_FLAVOR_ALLOCATE,
            size,
            8,
            MPI_INFO_NULL,
            0,
        ))?;
        let inner = inner(h)?;
        if root {
            // SAFETY: `base` is this rank's 8 window bytes in the shared segment (page
            // aligned); nobody else touches them before the barrier below.
            unsafe { (base as *mut i64).write(init) };
        }
        fence(Ordering::SeqCst);
        barrier(&inner)?;
        Ok(Counter { h, inner })
    }

    /// Apply `op` (`MPI_SUM`, `MPI_NO_OP`, `MPI_REPLACE`) with `v`; the previous value.
    fn op(&self, op: c_int, v: i64) -> MpiResult<i64> {
        let acc = pt2pt::proto::AccOp {
            op,
            basic: MPI_INT64_T,
            bsize: 8,
        };
        let rs = [(0isize, 8usize)];
        let data = v.to_ne_bytes();
        let old = ops::accumulate_to(&self.inner, 0, acc, &rs, &data, true)?;
        match old.as_deref().and_then(|b| b.get(..8)) {
            Some(b) => Ok(i64::from_ne_bytes(b.try_into().unwrap_or_default())),
            None => Err(MpiError::new(
                MPI_ERR_INTERN,
                "the counter's holder returned no value",
            )),
        }
    }

    /// Add `v`; the value before.
    pub(crate) fn fetch_add(&self, v: i64) -> MpiResult<i64> {
        self.op(MPI_SUM, v)
    }

    /// The current value.
    pub(crate) fn load(&self) -> MpiResult<i64> {
        self.op(MPI_NO_OP, 0)
    }

    /// Set the value.
    pub(crate) fn store(&self, v: i64) -> MpiResult {
        self.op(MPI_REPLACE, v).map(|_| ())
    }

    /// Collectively free the counter (once, at the end of its use).
    pub(crate) fn free(&self) -> MpiResult {
        free_win(self.h)
    }
}
