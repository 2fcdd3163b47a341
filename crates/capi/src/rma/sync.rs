//! Synchronization: passive-target locks (the lock word of each control block), flush,
//! PSCW counters and the assertions of fence/post/start.

use super::mem::spin_until;
use super::window::{inner, with_win, Held, Inner};
use crate::consts::*;
use crate::ffi::{MpiError, MpiResult};
use crate::state::lock;
use std::ffi::c_int;
use std::sync::atomic::{fence, Ordering};

/// Check the assertion argument of fence, post, start and lock.
pub(super) fn check_assert(assert: c_int) -> MpiResult {
    let all = MPI_MODE_NOCHECK
        | MPI_MODE_NOSTORE
        | MPI_MODE_NOPUT
        | MPI_MODE_NOPRECEDE
        | MPI_MODE_NOSUCCEED;
    if assert & !all != 0 {
        mpi_bail!(MPI_ERR_ASSERT, "invalid assertion {assert:#x}");
    }
    Ok(())
}

/// Take the passive-target lock of rank `t`: spinning on its lock word when reached
/// directly, else asking its progress thread and waiting for the grant.
pub(super) fn acquire(inner: &Inner, t: usize, kind: Held) -> MpiResult {
    if inner.targets[t].remote {
        return inner.net()?.lock(t, kind == Held::Exclusive);
    }
    spin_until(|| inner.try_lock(t, kind));
    Ok(())
}

/// Take a shared lock on every rank. The directly reached ones all or nothing: if one is
/// held exclusively, drop the ones taken so far and start over, so that `lock_all` never
/// holds shared locks while waiting (a process holding an exclusive lock and waiting for
/// another target cannot deadlock with it). Then the ones reached with messages, in rank
/// order (their grants are queued first come first served at each target).
pub(super) fn acquire_all_shared(inner: &Inner) -> MpiResult {
    let direct = |t: &usize| !inner.targets[*t].remote;
    spin_until(|| {
        for t in (0..inner.nranks).filter(direct) {
            if !inner.try_lock(t, Held::Shared) {
                for u in (0..t).filter(direct) {
                    inner.unlock(u, Held::Shared);
                }
                return false;
            }
        }
        true
    });
    for t in (0..inner.nranks).filter(|&t| inner.targets[t].remote) {
        inner.net()?.lock(t, false)?;
    }
    Ok(())
}

/// Release the passive-target lock of rank `t` taken as `kind` (for a target reached with
/// messages: once it applied our operations).
pub(super) fn release(inner: &Inner, t: usize, kind: Held) -> MpiResult {
    if inner.targets[t].remote {
        inner.rdma_flush(Some(t))?;
        return inner.net()?.unlock(t);
    }
    inner.unlock(t, kind);
    Ok(())
}

/// The target rank of a lock or flush (`None` for `MPI_PROC_NULL`).
pub(super) fn check_target(inner: &Inner, rank: c_int) -> MpiResult<Option<usize>> {
    if rank == MPI_PROC_NULL {
        return Ok(None);
    }
    if rank < 0 || rank as usize >= inner.nranks {
        mpi_bail!(
            MPI_ERR_RANK,
            "rank {rank} is not in the window's group of {} ranks",
            inner.nranks
        );
    }
    Ok(Some(rank as usize))
}

/// Flush-type calls: operations are complete already; order memory, and check that a
/// passive-target epoch is open.
pub(super) fn flush(win: c_int, rank: Option<c_int>) -> MpiResult {
    let inner = inner(win)?;
    let t = match rank {
        Some(r) => check_target(&inner, r)?,
        None => None,
    };
    with_win(win, |w| {
        let ok = w.lock_all || t.map_or(!w.held.is_empty(), |t| w.held.contains_key(&t));
        if !ok && rank != Some(MPI_PROC_NULL) {
            mpi_bail!(
                MPI_ERR_RMA_SYNC,
                "no passive-target epoch is open on this window"
            );
        }
        Ok(())
    })?;
    fence(Ordering::SeqCst);
    inner.rdma_flush(t)?;
    match (&inner.net, t) {
        (None, _) => Ok(()),
        (Some(net), Some(t)) => net.flush(t),
        (Some(net), None) => net.flush_all(),
    }
}

/// Ranks (in the window's group) of the members of group `g`.
pub(super) fn group_ranks(win: c_int, g: c_int) -> MpiResult<Vec<usize>> {
    let comm = inner(win)?.comm;
    let st = lock();
    let members = st.group(g)?;
    let cg = &st.comm(comm)?.group;
    members
        .iter()
        .map(|m| {
            cg.iter().position(|x| x == m).ok_or_else(|| {
                MpiError::new(
                    MPI_ERR_GROUP,
                    format!("process {m} of the group is not in the window's group"),
                )
            })
        })
        .collect()
}

/// Whether every origin of the open exposure epoch completed (waiting for it when
/// `block`); closes the epoch when they did.
pub(super) fn exposure_done(win: c_int, block: bool) -> MpiResult<bool> {
    let inner = inner(win)?;
    let expected = with_win(win, |w| {
        if !w.exposure {
            mpi_bail!(
                MPI_ERR_RMA_SYNC,
                "no exposure epoch is open on this window (MPI_Win_post)"
            );
        }
        Ok(w.expected)
    })?;
    let c = inner.completed(inner.rank);
    if block {
        spin_until(|| c.load(Ordering::Acquire) >= expected);
    } else if c.load(Ordering::Acquire) < expected {
        return Ok(false);
    }
    with_win(win, |w| {
        w.exposure = false;
        Ok(true)
    })
}
