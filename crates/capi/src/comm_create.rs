//! Communicator creation calls beyond `coll.rs`: `MPI_Comm_idup` (nonblocking: the
//! agreement runs on a library thread) and `MPI_Comm_create_group` (collective over the
//! group only; intracommunicators only).

use crate::backend::{self, SendMode};
use crate::consts::*;
use crate::ffi::{out, MpiError, MpiResult};
use crate::request::{Pending, Request, NO_MESSAGE};
use crate::state::lock;
use std::ffi::{c_int, c_void};
use std::sync::atomic::AtomicI32;

/// Tag base of the context agreement of `MPI_Comm_create_group` (within the parent's
/// collective context; far from the tags of `coll.rs`).
const CREATE_GROUP_TAG: i32 = 1 << 20;

/// Tag base of the context agreements of `MPI_Comm_idup` (within the parent's collective
/// context; above the tags of the blocking and nonblocking collectives): `+ seq mod 2^20`.
const IDUP_TAG: i32 = 3 << 28;

/// A request that is already complete (for operations done synchronously).
fn completed_request(comm: c_int) -> c_int {
    lock().reqs.insert(Request {
        comm,
        persistent: None,
        active: Some(Pending::done(NO_MESSAGE)),
    })
}

/// Shared body of Comm_idup and Comm_idup_with_info (MPI 3.1 §6.4.2): returns at once.
/// The attributes are copied now (their callbacks run on the caller's thread); a library
/// thread agrees on the context ids with the other members (point-to-point on the
/// parent's collective context, with a tag of this idup's own), makes the communicator,
/// writes `*newcomm` and completes the request. Intercommunicators are duplicated at once
/// (the request is complete).
fn idup(comm: c_int, info: c_int, newcomm: NewComm, request: *mut c_int) -> MpiResult {
    if request.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL request").on(comm));
    }
    if newcomm.dst == 0 {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
    }
    if info != MPI_INFO_NULL && lock().infos.get(info).is_none() {
        return Err(MpiError::new(MPI_ERR_INFO, format!("invalid info handle {info:#x}")).on(comm));
    }
    if crate::intercomm::is_inter(comm) {
        let mut h = MPI_COMM_NULL;
        crate::comm::dup(comm, &mut h)?;
        newcomm.put(h);
        return out(request, completed_request(comm), "request");
    }
    let (ctx, rank, size, group, seq) = {
        let mut st = lock();
        st.check_active()?;
        let c = st.comm_mut(comm)?;
        c.idups = c.idups.wrapping_add(1);
        (c.coll, c.rank, c.size, c.group.clone(), c.idups)
    };
    let attrs = crate::comm::copied_attrs(comm)?;
    let (h, code) = crate::grequest::start_coded(comm)?;
    let tag = IDUP_TAG + (seq % (1 << 20)) as i32;
    let job = IdupJob {
        comm,
        ctx,
        rank,
        size,
        group,
        attrs,
        tag,
        newcomm,
        code: code as usize,
        req: h,
    };
    // It takes the engine's lock next to the application's thread(s).
    oxmpi_engine::expect_threads("an idup thread");
    std::thread::Builder::new()
        .name("oxmpi-idup".into())
        .spawn(move || job.run())
        .map_err(|e| {
            MpiError::new(MPI_ERR_OTHER, format!("cannot start the idup thread: {e}")).on(comm)
        })?;
    out(request, h, "request")
}

/// Where an idup stores the new communicator's handle at completion: the caller's
/// `MPI_Comm *` (MPI: not accessed until the request completes), written directly or by
/// `store` (the standard ABI converts the handle there).
#[derive(Clone, Copy)]
struct NewComm {
    dst: usize,
    store: Option<unsafe extern "C" fn(*mut c_void, c_int)>,
}

impl NewComm {
    fn put(self, h: c_int) {
        match self.store {
            // SAFETY: the caller's store function with its own destination.
            Some(f) => unsafe { f(self.dst as *mut c_void, h) },
            // SAFETY: the caller's output pointer (checked non-NULL), valid until completion.
            None => unsafe { (self.dst as *mut c_int).write_unaligned(h) },
        }
    }
}

/// The background part of one `MPI_Comm_idup`.
struct IdupJob {
    comm: c_int,
    ctx: backend::EComm,
    rank: i32,
    size: i32,
    group: Vec<i32>,
    attrs: Vec<(c_int, usize)>,
    tag: i32,
    newcomm: NewComm,
    /// The request's `AtomicI32` error code box.
    code: usize,
    req: c_int,
}

impl IdupJob {
    fn run(self) {
        let r = self.agree_and_make();
        let code = match r {
            Ok(h) => {
                self.newcomm.put(h);
                MPI_SUCCESS
            }
            Err(e) => e.code,
        };
        // SAFETY: `req` and `code` come from `idup`'s request, completed once, here.
        unsafe { crate::grequest::complete_coded(self.req, self.code as *const AtomicI32, code) };
    }

    fn agree_and_make(&self) -> MpiResult<c_int> {
        let eng = backend::engine()?;
        let (ctx, tag) = (self.ctx, self.tag);
        // One exchange through rank 0 of the parent: everyone's `v` combined with `pick`.
        let round = |v: u32, pick: fn(u32, u32) -> u32| -> MpiResult<u32> {
            if self.rank == 0 {
                let mut m = v;
                for p in 1..self.size {
                    m = pick(m, xfer(eng, ctx, None, Some(p), tag)?);
                }
                for p in 1..self.size {
                    xfer(eng, ctx, Some((m, p)), None, tag)?;
                }
                Ok(m)
            } else {
                xfer(eng, ctx, Some((v, 0)), None, tag)?;
                xfer(eng, ctx, None, Some(0), tag)
            }
        };
        let mut and = |mask: Vec<u64>| and_masks(&round, &mask);
        let agreed = crate::comm::agree_ctx_by(
            |v| round(v, u32::max),
            Some(&mut and),
            |ok| Ok(round(u32::from(ok), u32::min)? == 1),
        )?;
        let h = crate::comm::make::make_comm(self.comm, agreed, self.group.clone())?;
        crate::comm::attach_attrs(h, &self.attrs)?;
        crate::topo::table::copy(self.comm, h);
        Ok(h)
    }
}

mpi_fn! {
    /// `MPI_Comm_idup`: returns at once; the duplicate is made in the background.
    fn PMPI_Comm_idup / "MPI_Comm_idup" (comm: c_int, newcomm: *mut c_int, request: *mut c_int) {
        idup(comm, MPI_INFO_NULL, NewComm { dst: newcomm as usize, store: None }, request)
    }
}

mpi_fn! {
    /// `MPI_Comm_idup_with_info` (MPI 4.0): `MPI_Comm_idup`; the info hints are checked and
    /// not used (the duplicate gets no hints of its own).
    fn PMPI_Comm_idup_with_info / "MPI_Comm_idup_with_info" (comm: c_int, info: c_int, newcomm: *mut c_int, request: *mut c_int) {
        idup(comm, info, NewComm { dst: newcomm as usize, store: None }, request)
    }
}

/// `MPI_Comm_idup_with_info` for the standard-ABI layer (`libmpi_abi.so.1`, not exported
/// by `libmpi.so.12`): at completion the new handle goes through `store(newcomm, h)`,
/// which converts it into the caller's `MPI_Comm`.
///
/// # Safety
/// `newcomm` must stay valid for `store` until the request completes.
#[no_mangle]
pub unsafe extern "C" fn oxmpi_abi_comm_idup(
    comm: c_int,
    info: c_int,
    store: Option<unsafe extern "C" fn(*mut c_void, c_int)>,
    newcomm: *mut c_void,
    request: *mut c_int,
) -> c_int {
    static SITE: crate::calls::Site = crate::calls::Site::new("MPI_Comm_idup");
    crate::ffi::enter(&SITE, "MPI_Comm_idup", crate::ffi::OnComm, || {
        // A NULL `newcomm` comes with a NULL `store`: `idup` reports the NULL newcomm.
        idup(
            comm,
            info,
            NewComm {
                dst: newcomm as usize,
                store,
            },
            request,
        )
    })
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
        let mut and = |mask: Vec<u64>| and_masks(&round, &mask);
        let agreed = crate::comm::agree_ctx_by(
            |v| round(v, u32::max),
            Some(&mut and),
            |ok| Ok(round(u32::from(ok), u32::min)? == 1),
        )
        .map_err(|e| e.on(comm))?;
        let h = crate::comm::make::make_comm(comm, agreed, members)?;
        out(newcomm, h, "newcomm")
    }
}

/// The bitwise AND over every member of each member's mask of free context-id pairs,
/// through `round` (one exchange that combines every member's `u32` with its `pick`), half a
/// word at a time.
fn and_masks(
    round: &impl Fn(u32, fn(u32, u32) -> u32) -> MpiResult<u32>,
    mask: &[u64],
) -> MpiResult<Vec<u64>> {
    mask.iter()
        .map(|&w| {
            let lo = round(w as u32, |a, b| a & b)?;
            let hi = round((w >> 32) as u32, |a, b| a & b)?;
            Ok(u64::from(hi) << 32 | u64::from(lo))
        })
        .collect()
}
