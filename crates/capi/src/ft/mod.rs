//! User-level failure mitigation (ULFM, the `MPIX_` interface of MPICH and Open MPI):
//! `MPIX_Comm_revoke`, `MPIX_Comm_shrink`, `MPIX_Comm_ishrink`, `MPIX_Comm_agree`,
//! `MPIX_Comm_iagree`, `MPIX_Comm_failure_ack`, `MPIX_Comm_failure_get_acked` and
//! `MPIX_Comm_get_failed`, on intra- and intercommunicators (also to another job:
//! connect/accept, spawn).
//!
//! * `agree`: the fault-tolerant agreement as a sans-IO state machine (tested in `tests`);
//! * this file: the entry points and the driver that runs an agreement over the engine.
//!
//! Failures come from the engine (a local peer whose process ended, a link that broke:
//! `Engine::failed_peers`); revoke is the engine's (`Engine::comm_revoke`, a control
//! record to every member). Agreements travel on a communicator of their own over the
//! whole world (context [`FT_CTX`]), so they work on revoked communicators too (on an
//! intercommunicator to another job, whose members are not all in our world: on one over
//! both groups, with the intercommunicator's fourth context id, which no revoke touches);
//! each one
//! has a tag made of the communicator's context and a per-communicator sequence number,
//! which the payload repeats (stale messages of an earlier agreement are dropped).

pub(crate) mod agree;
pub(crate) mod record;
#[cfg(test)]
mod tests;

use crate::backend::{self, EComm, SendMode};
use crate::consts::*;
use crate::ffi::{out, MpiError, MpiResult};
use crate::state::lock;
use agree::{Agreement, Value};
use record::{with_comm, COMMS};
use std::ffi::c_int;
use std::sync::atomic::AtomicI32;
use std::sync::OnceLock;

/// Context id of the agreements' communicator (far above what the context allocator
/// hands out).
const FT_CTX: u32 = u32::MAX - 1;

/// The agreements' engine communicator (made on first use; making it is local).
fn ft_comm() -> MpiResult<EComm> {
    static C: OnceLock<EComm> = OnceLock::new();
    if let Some(c) = C.get() {
        return Ok(*c);
    }
    let eng = backend::engine()?;
    let _guard = COMMS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(c) = C.get() {
        return Ok(*c);
    }
    let c = eng
        .comm_create(FT_CTX, (0..eng.size()).collect())
        .map_err(backend::err)?;
    let _ = C.set(c);
    Ok(c)
}

/// What an entry point needs of a communicator.
struct Target {
    ecomm: EComm,
    ctx: u32,
    /// The agreements' engine communicator ([`ft_comm`], or an intercommunicator's own to
    /// another job) and each member's rank in it (in the order of `group`).
    fc: EComm,
    fc_ranks: Vec<i32>,
    /// Our position in `group`.
    rank: i32,
    /// The members (world ranks): the communicator's group; for an intercommunicator
    /// both groups, the one with the lowest world rank first (the same order at every
    /// member).
    group: Vec<i32>,
    /// For an intercommunicator: the sizes of the local and the remote group, and whether
    /// the local group comes first in `group`.
    inter: Option<(usize, usize, bool)>,
}

impl Target {
    /// Whether member `r` (a position in `group`) belongs to our local group.
    fn local(&self, r: usize) -> bool {
        match self.inter {
            None => true,
            Some((nl, _, true)) => r < nl,
            Some((_, nr, false)) => r >= nr,
        }
    }
}

/// Resolve `comm` (any communicator, revoked ones included).
fn target(comm: c_int) -> MpiResult<Target> {
    let (ecomm, rank, group) = {
        let st = lock();
        st.check_active()?;
        let c = st.comm(comm).map_err(|e| e.on(comm))?;
        (c.ecomm, c.rank, c.group.clone())
    };
    let eng = backend::engine()?;
    let ctx = eng
        .comm_context(ecomm)
        .map_err(|e| backend::err(e).on(comm))?;
    let Some(ic) = crate::intercomm::get(comm) else {
        return Ok(Target {
            ecomm,
            ctx,
            fc: ft_comm()?,
            fc_ranks: group.clone(),
            rank,
            group,
            inter: None,
        });
    };
    // Which group comes first, the same at every member: by world rank within a job;
    // with members of another job (connect/accept, spawn), whose indices here are not
    // theirs, by the processes' names (job, world rank).
    let other_job = group.iter().chain(&ic.remote).any(|&w| w >= eng.size());
    let local_first = if other_job {
        let job = crate::dpm::job_key();
        let min = |g: &[i32]| g.iter().filter_map(|&w| eng.peer_name(w, &job)).min();
        min(&group) < min(&ic.remote)
    } else {
        let min = |g: &[i32]| g.iter().copied().min().unwrap_or(i32::MAX);
        min(&group) < min(&ic.remote)
    };
    let (nl, nr) = (group.len(), ic.remote.len());
    let (rank, all): (i32, Vec<i32>) = if local_first {
        (
            rank,
            group.into_iter().chain(ic.remote.iter().copied()).collect(),
        )
    } else {
        (
            rank + nr as i32,
            ic.remote.iter().copied().chain(group).collect(),
        )
    };
    let (fc, fc_ranks) = if other_job {
        let mut made = ic.ft.lock().unwrap_or_else(|e| e.into_inner());
        let fc = match *made {
            Some(c) => c,
            None => {
                let c = eng
                    .comm_create(ctx + 3, all.clone())
                    .map_err(|e| backend::err(e).on(comm))?;
                *made = Some(c);
                c
            }
        };
        (fc, (0..all.len() as i32).collect())
    } else {
        (ft_comm()?, all.clone())
    };
    Ok(Target {
        ecomm,
        ctx,
        fc,
        fc_ranks,
        rank,
        group: all,
        inter: Some((nl, nr, local_first)),
    })
}

/// The members of `group` (world ranks) that failed, as communicator ranks.
fn failed_ranks(eng: &oxmpi_engine::Engine, group: &[i32]) -> Vec<u32> {
    let dead = eng.failed_peers();
    group
        .iter()
        .enumerate()
        .filter(|(_, w)| dead.binary_search(w).is_ok())
        .map(|(r, _)| r as u32)
        .collect()
}

/// Run one agreement among `t`'s members with our `flag` and `max`; returns the decision.
fn run(t: &Target, flag: i32, max: u32) -> MpiResult<Value> {
    let eng = backend::engine()?;
    let fc = t.fc;
    let seq = with_comm(t.ctx, |e| {
        e.seq = e.seq.wrapping_add(1);
        e.seq
    });
    let tag = (((t.ctx & 0x7FFF) << 15) | (seq & 0x7FFF)) as i32;
    let n = t.group.len() as u32;
    let me = t.rank as u32;
    let mut a = Agreement::new(n, me, flag, max, &failed_ranks(eng, &t.group));
    let mut buf = vec![0u8; 8 + agree::max_len(n)];
    let mut recv: Option<backend::EReq> = None;
    let mut sends: Vec<(backend::EReq, Vec<u8>)> = Vec::new();
    let mut known_dead: Vec<u32> = Vec::new();
    let mut spins = 0u32;
    let decided: MpiResult<Value> = loop {
        for (to, m) in a.take_output() {
            let mut b = Vec::with_capacity(64);
            b.extend_from_slice(&t.ctx.to_le_bytes());
            b.extend_from_slice(&seq.to_le_bytes());
            b.extend_from_slice(&agree::encode(&m));
            let dest = t.fc_ranks[to as usize];
            // SAFETY: `b` is kept in `sends` until the request completes (or leaked).
            let sent = unsafe { eng.isend(b.as_ptr(), b.len(), dest, tag, fc, SendMode::Standard) };
            // A dead destination fails the send: the agreement learns it from the failures.
            if let Ok(r) = sent {
                sends.push((r, b));
            }
        }
        if let Some(v) = a.decided() {
            break Ok(v.clone());
        }
        sends.retain(|(r, _)| eng.test(*r).is_none());
        let r = match recv {
            Some(r) => r,
            None => {
                // SAFETY: `buf` outlives the request (cancelled and completed below).
                let r = unsafe {
                    eng.irecv(
                        buf.as_mut_ptr(),
                        buf.len(),
                        crate::consts::MPI_ANY_SOURCE,
                        tag,
                        fc,
                    )
                };
                match r {
                    Ok(r) => {
                        recv = Some(r);
                        r
                    }
                    Err(e) => break Err(backend::err(e)),
                }
            }
        };
        if let Some(s) = eng.test(r).filter(|s| {
            // A member failed: the agreement learns it below, the receive goes on.
            s.error != Some(oxmpi_engine::ErrorClass::ProcFailedPending)
                || eng.comm_failure_ack(fc).is_err()
        }) {
            recv = None;
            if s.error.is_none() && s.count_bytes >= 8 {
                let ok = buf[..4] == t.ctx.to_le_bytes() && buf[4..8] == seq.to_le_bytes();
                let from = t.fc_ranks.iter().position(|&w| w == s.source);
                if let (true, Some(from), Some(m)) =
                    (ok, from, agree::decode(&buf[8..s.count_bytes], n))
                {
                    a.on_message(from as u32, m);
                }
            }
            continue;
        }
        spins = spins.wrapping_add(1);
        if spins % 64 == 0 {
            for f in failed_ranks(eng, &t.group) {
                if !known_dead.contains(&f) {
                    known_dead.push(f);
                    a.on_failure(f);
                }
            }
            std::thread::yield_now();
        }
        eng.progress();
    };
    if let Some(r) = recv {
        eng.cancel(r);
        let _ = eng.wait(r);
    }
    // Sends still in flight (to members that already returned) complete in the background.
    for (r, b) in sends {
        if eng.test(r).is_none() {
            eng.request_free(r);
            std::mem::forget(b);
        }
    }
    decided
}

/// `MPIX_ERR_PROC_FAILED` if the agreed failed set holds a member whose failure we did not
/// acknowledge.
fn unacked_failure(comm: c_int, t: &Target, failed: &[u32]) -> MpiResult {
    let acked = with_comm(t.ctx, |e| e.acked.clone());
    if let Some(&f) = failed
        .iter()
        .find(|&&f| !acked.contains(&t.group[f as usize]))
    {
        return Err(MpiError::new(
            MPIX_ERR_PROC_FAILED,
            format!("rank {f} of the communicator failed (not acknowledged)"),
        )
        .on(comm));
    }
    Ok(())
}

/// `MPIX_Comm_agree`'s work: the AND of the flags (on an intercommunicator: of the remote
/// group's flags), then the error if unacknowledged failures were agreed on.
fn agree_on(comm: c_int, flag: *mut c_int) -> MpiResult {
    if flag.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL flag").on(comm));
    }
    let t = target(comm)?;
    // SAFETY: checked non-NULL; the caller's int.
    let mine = unsafe { flag.read_unaligned() };
    let v = match t.inter {
        None => run(&t, mine, 0)?,
        Some((_, _, local_first)) => {
            // Two agreements, one per group (the other group contributes all ones): every
            // member gets the AND of the remote group's flags, and all agree on the
            // failures.
            let first = run(&t, if local_first { mine } else { -1 }, 0)?;
            let mut second = run(&t, if local_first { -1 } else { mine }, 0)?;
            if !local_first {
                second.flag = first.flag;
            }
            second
        }
    };
    // SAFETY: as above.
    unsafe { flag.write_unaligned(v.flag) };
    unacked_failure(comm, &t, &v.failed)
}

/// `MPI_Comm_disconnect`'s meeting under fault tolerance: an agreement among the members
/// that did not fail (`MPIX_ERR_PROC_FAILED` if a failure is not acknowledged on `comm`).
pub(crate) fn disconnect_sync(comm: c_int) -> MpiResult {
    let mut flag: c_int = 1;
    agree_on(comm, &mut flag)
}

/// `MPIX_Comm_shrink`'s work: the new communicator's handle (an intercommunicator for an
/// intercommunicator).
fn shrink(comm: c_int) -> MpiResult<c_int> {
    let t = target(comm)?;
    // First the failed set (and a first context proposal), then the context ids free at
    // every survivor, both by fault-tolerant agreements.
    let mut failed: Option<Vec<u32>> = None;
    let span = if t.inter.is_some() { 4 } else { 2 };
    let ctx = crate::comm::agree_ctx_span(
        span,
        |v| {
            let d = run(&t, -1, v)?;
            failed.get_or_insert(d.failed);
            Ok(d.max)
        },
        None,
        |ok| Ok(run(&t, i32::from(ok), 0)?.flag == 1),
    )?;
    let failed = failed.unwrap_or_default();
    let alive = |local: bool| -> Vec<i32> {
        t.group
            .iter()
            .enumerate()
            .filter(|(r, _)| t.local(*r) == local && !failed.contains(&(*r as u32)))
            .map(|(_, &w)| w)
            .collect()
    };
    if t.inter.is_none() {
        return crate::comm::make::make_comm(comm, ctx, alive(true));
    }
    let remote = alive(false);
    if remote.is_empty() {
        lock().ids.release(ctx, span);
        return Err(MpiError::new(
            MPIX_ERR_PROC_FAILED,
            "every member of the remote group failed: no intercommunicator is left",
        )
        .on(comm));
    }
    crate::intercomm::make_inter(comm, ctx, alive(true), remote)
}

mpi_fn! {
    /// `MPIX_Comm_revoke`: every member's pending and later operations on `comm` fail with
    /// `MPIX_ERR_REVOKED` (agreement and shrink still work on it).
    fn PMPIX_Comm_revoke / "MPIX_Comm_revoke" (comm: c_int) {
        // Any communicator: also an intercommunicator to another job.
        let (ecomm, coll) = {
            let st = lock();
            st.check_active()?;
            let c = st.comm(comm).map_err(|e| e.on(comm))?;
            (c.ecomm, c.coll)
        };
        let eng = backend::engine()?;
        eng.comm_revoke(ecomm).map_err(|e| backend::err(e).on(comm))?;
        eng.comm_revoke(coll).map_err(|e| backend::err(e).on(comm))
    }
}

mpi_fn! {
    /// `MPIX_Comm_agree`: fault-tolerant agreement on the bitwise AND of `*flag`.
    fn PMPIX_Comm_agree / "MPIX_Comm_agree" (comm: c_int, flag: *mut c_int) {
        agree_on(comm, flag)
    }
}

/// Run `work` on a library thread behind a new request (on `comm`) that completes with
/// `work`'s error code: the nonblocking forms of agree and shrink.
fn in_background(
    comm: c_int,
    what: &str,
    request: *mut c_int,
    work: impl FnOnce() -> MpiResult + Send + 'static,
) -> MpiResult {
    let (h, code) = crate::grequest::start_coded(comm)?;
    let code = code as usize;
    // `work` takes the engine's lock next to the application's thread(s).
    oxmpi_engine::expect_threads("a fault-tolerance thread");
    std::thread::Builder::new()
        .name(format!("oxmpi-{what}"))
        .spawn(move || {
            let rc = match work() {
                Ok(()) => MPI_SUCCESS,
                Err(e) => e.code,
            };
            // SAFETY: `h` and `code` come from one start_coded, completed once, here.
            unsafe { crate::grequest::complete_coded(h, code as *const AtomicI32, rc) };
        })
        .map_err(|e| {
            MpiError::new(
                MPI_ERR_OTHER,
                format!("cannot start the {what} thread: {e}"),
            )
            .on(comm)
        })?;
    out(request, h, "request")
}

mpi_fn! {
    /// `MPIX_Comm_iagree`: the agreement runs on a library thread; the request completes
    /// when it is decided (`*flag` written then).
    fn PMPIX_Comm_iagree / "MPIX_Comm_iagree" (comm: c_int, flag: *mut c_int, request: *mut c_int) {
        if request.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL request").on(comm));
        }
        if flag.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL flag").on(comm));
        }
        target(comm)?;
        let flag = flag as usize;
        in_background(comm, "iagree", request, move || agree_on(comm, flag as *mut c_int))
    }
}

mpi_fn! {
    /// `MPIX_Comm_shrink`: a new communicator of the members that have not failed (agreed
    /// by all of them); allowed on a revoked communicator. On an intercommunicator, an
    /// intercommunicator of both groups' survivors.
    fn PMPIX_Comm_shrink / "MPIX_Comm_shrink" (comm: c_int, newcomm: *mut c_int) {
        if newcomm.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
        }
        let h = shrink(comm)?;
        out(newcomm, h, "newcomm")
    }
}

mpi_fn! {
    /// `MPIX_Comm_ishrink`: the shrink on a library thread; `*newcomm` is set when the
    /// request completes.
    fn PMPIX_Comm_ishrink / "MPIX_Comm_ishrink" (comm: c_int, newcomm: *mut c_int, request: *mut c_int) {
        if request.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL request").on(comm));
        }
        if newcomm.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
        }
        target(comm)?;
        let newcomm = newcomm as usize;
        in_background(comm, "ishrink", request, move || {
            let h = shrink(comm)?;
            out(newcomm as *mut c_int, h, "newcomm")
        })
    }
}

mpi_fn! {
    /// `MPIX_Comm_failure_ack`: acknowledge the failures known now (`MPIX_Comm_agree`
    /// no longer reports them).
    fn PMPIX_Comm_failure_ack / "MPIX_Comm_failure_ack" (comm: c_int) {
        let t = target(comm)?;
        let eng = backend::engine()?;
        let failed: Vec<i32> = failed_ranks(eng, &t.group)
            .into_iter()
            .map(|r| t.group[r as usize])
            .collect();
        with_comm(t.ctx, |e| e.acked = failed);
        // Receives from any source on it go on (no longer failure-pending).
        eng.comm_failure_ack(t.ecomm).map_err(|e| backend::err(e).on(comm))
    }
}

/// Store a new group of world ranks `ranks` into `*group`.
fn group_out(ranks: Vec<i32>, group: *mut c_int) -> MpiResult {
    let h = lock().new_group(ranks);
    out(group, h, "group")
}

mpi_fn! {
    /// `MPIX_Comm_failure_get_acked`: the group of the failures acknowledged last.
    fn PMPIX_Comm_failure_get_acked / "MPIX_Comm_failure_get_acked" (comm: c_int, failedgrp: *mut c_int) {
        let t = target(comm)?;
        let acked = with_comm(t.ctx, |e| e.acked.clone());
        group_out(acked, failedgrp)
    }
}

mpi_fn! {
    /// `MPIX_Comm_get_failed`: the group of the members known to have failed.
    fn PMPIX_Comm_get_failed / "MPIX_Comm_get_failed" (comm: c_int, failedgrp: *mut c_int) {
        let t = target(comm)?;
        let failed = failed_ranks(backend::engine()?, &t.group)
            .into_iter()
            .map(|r| t.group[r as usize])
            .collect();
        group_out(failed, failedgrp)
    }
}
