//! Synchronization: passive-target locks (the lock word of each control block), flush,
//! PSCW counters and the assertions of fence/post/start.

use super::window::{inner, with_win, Held, Inner};
use crate::consts::*;
use crate::ffi::{MpiError, MpiResult};
use crate::state::lock;
use std::ffi::c_int;
use std::sync::atomic::{fence, Ordering};

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

/// Take the passive-target lock of rank `t` (spinning until it is free).
pub(super) fn acquire(inner: &Inner, t: usize, kind: Held) {
    let w = inner.lock_word(t);
    match kind {
        Held::Exclusive => spin_until(|| {
            w.compare_exchange_weak(0, WRITER, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        }),
        Held::Shared => spin_until(|| {
            let v = w.load(Ordering::Relaxed);
            v & WRITER == 0
                && w.compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
        }),
    }
}

/// Take a shared lock on every rank, all or nothing: if one target is held exclusively,
/// drop the ones taken so far and start over, so that `lock_all` never holds shared locks
/// while waiting (a process holding an exclusive lock and waiting for another target
/// cannot deadlock with it).
pub(super) fn acquire_all_shared(inner: &Inner) {
    spin_until(|| {
        for t in 0..inner.nranks {
            let w = inner.lock_word(t);
            let mut v = w.load(Ordering::Relaxed);
            let got = loop {
                if v & WRITER != 0 {
                    break false;
                }
                match w.compare_exchange_weak(v, v + 1, Ordering::Acquire, Ordering::Relaxed) {
                    Ok(_) => break true,
                    Err(cur) => v = cur,
                }
            };
            if !got {
                for u in 0..t {
                    release(inner, u, Held::Shared);
                }
                return false;
            }
        }
        true
    });
}

/// Release the passive-target lock of rank `t` taken as `kind`.
pub(super) fn release(inner: &Inner, t: usize, kind: Held) {
    let w = inner.lock_word(t);
    match kind {
        Held::Exclusive => w.fetch_and(!WRITER, Ordering::Release),
        Held::Shared => w.fetch_sub(1, Ordering::Release),
    };
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
    Ok(())
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
