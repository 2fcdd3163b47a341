//! Communicator creation calls beyond `coll.rs`: `MPI_Comm_idup` and
//! `MPI_Comm_create_group` (collective over the group only; intracommunicators only).

use crate::backend::{self, SendMode};
use crate::consts::*;
use crate::ffi::{out, MpiError, MpiResult};
use crate::request::{Pending, Request, NO_MESSAGE};
use crate::state::lock;
use std::ffi::c_int;

/// Tag base of the context agreement of `MPI_Comm_create_group` (within the parent's
/// collective context; far from the tags of `coll.rs`).
const CREATE_GROUP_TAG: i32 = 1 << 20;

/// A request that is already complete (for operations done synchronously).
fn completed_request(comm: c_int) -> c_int {
    lock().reqs.insert(Request {
        comm,
        persistent: None,
        active: Some(Pending::done(NO_MESSAGE)),
    })
}

/// Shared body of Comm_idup and Comm_idup_with_info: a blocking dup whose request is
/// complete on return.
fn idup(comm: c_int, newcomm: *mut c_int, request: *mut c_int) -> MpiResult {
    if request.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL request").on(comm));
    }
    crate::comm::dup(comm, newcomm)?;
    out(request, completed_request(comm), "request")
}

mpi_fn! {
    /// `MPI_Comm_idup`: duplicates at once; the request is complete.
    fn PMPI_Comm_idup / "MPI_Comm_idup" (comm: c_int, newcomm: *mut c_int, request: *mut c_int) {
        idup(comm, newcomm, request)
    }
}

/// Exchange 4 bytes with a peer of the parent's collective context.
fn xfer(
    eng: &oxmpi_engine::Engine,
    ctx: backend::EComm,
    send: Option<(u32, i32)>,
    recv_from: Option<i32>,
    tag: i32,
) -> MpiResult<u32> {
    if let Some((v, dest)) = send {
        let b = v.to_ne_bytes();
        // SAFETY: `b` lives until the wait below.
        let r = unsafe { eng.isend(b.as_ptr(), 4, dest, tag, ctx, SendMode::Standard) }
            .map_err(backend::err)?;
        let s = eng.wait(r);
        if let Some(e) = s.error {
            return Err(MpiError::new(
                backend::class_code(e),
                "context agreement failed",
            ));
        }
    }
    if let Some(src) = recv_from {
        let mut b = [0u8; 4];
        // SAFETY: `b` lives until the wait below.
        let r = unsafe { eng.irecv(b.as_mut_ptr(), 4, src, tag, ctx) }.map_err(backend::err)?;
        let s = eng.wait(r);
        if let Some(e) = s.error {
            return Err(MpiError::new(
                backend::class_code(e),
                "context agreement failed",
            ));
        }
        return Ok(u32::from_ne_bytes(b));
    }
    Ok(0)
}

mpi_fn! {
    /// `MPI_Comm_create_group`: collective over the members of `group` only.
    fn PMPI_Comm_create_group / "MPI_Comm_create_group" (comm: c_int, group: c_int, tag: c_int, newcomm: *mut c_int) {
        if newcomm.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
        }
        crate::intercomm::require_intra(comm, "MPI_Comm_create_group")?;
        let (ctx, members, parent_ranks, me) = {
            let st = lock();
            st.check_active()?;
            let c = st.comm(comm)?;
            let members = st.group(group).map_err(|e| e.on(comm))?;
            let me = st.world_rank();
            // Parent ranks of the members.
            let mut pr = Vec::with_capacity(members.len());
            for &w in &members {
                match c.group.iter().position(|&x| x == w) {
                    Some(p) => pr.push(p as i32),
                    None => {
                        return Err(MpiError::new(MPI_ERR_GROUP, "group is not a subgroup of the communicator").on(comm))
                    }
                }
            }
            (c.coll, members, pr, me)
        };
        if !(0..=backend::TAG_UB).contains(&tag) {
            return Err(MpiError::new(MPI_ERR_TAG, format!("tag {tag} out of range")).on(comm));
        }
        let Some(pos) = members.iter().position(|&w| w == me) else {
            return Err(MpiError::new(MPI_ERR_GROUP, "the calling process is not in the group").on(comm));
        };
        let eng = backend::engine()?;
        let t = CREATE_GROUP_TAG + (tag % (1 << 20));
        let leader = parent_ranks[0];
        // One exchange through the leader (the group's first member): everyone's `v`
        // combined with `pick`, at everyone.
        let round = |v: u32, pick: fn(u32, u32) -> u32| -> MpiResult<u32> {
            if pos == 0 {
                let mut m = v;
                for &p in &parent_ranks[1..] {
                    m = pick(m, xfer(eng, ctx, None, Some(p), t)?);
                }
                for &p in &parent_ranks[1..] {
                    xfer(eng, ctx, Some((m, p)), None, t)?;
                }
                Ok(m)
            } else {
                xfer(eng, ctx, Some((v, leader)), None, t)?;
                xfer(eng, ctx, None, Some(leader), t)
            }
        };
        let agreed = crate::comm::agree_ctx_by(
            |v| round(v, u32::max),
            |ok| Ok(round(u32::from(ok), u32::min)? == 1),
        )
        .map_err(|e| e.on(comm))?;
        let h = crate::comm::make::make_comm(comm, agreed, members)?;
        out(newcomm, h, "newcomm")
    }
}
