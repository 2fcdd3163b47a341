//! Intercommunicators (MPI-3.1 §6.6): `MPI_Intercomm_create`, `MPI_Intercomm_merge`, and
//! the intercommunicator forms of dup, split and create.
//!
//! An intercommunicator is a [`Comm`] whose engine communicators (`ecomm` for user traffic,
//! `coll` for collective traffic) are engine *intercommunicators*
//! ([`oxmpi_engine::Engine::comm_create_inter`]): destination and source ranks index the
//! remote group and a message carries the sender's rank in its own local group. Its
//! `group` is the local group and its `size` the remote group's size (the ranks that
//! point-to-point calls address); `MPI_Comm_size` reports `group.len()`. The rest of the
//! intercommunicator lives in a side table here ([`Inter`]): the remote group and an engine
//! intracommunicator over the local group for the local phases of collectives.
//!
//! Context ids: every new intercommunicator takes four consecutive ids (`ctx` user,
//! `ctx + 1` collective, `ctx + 2` local, `ctx + 3` the ULFM agreements' across jobs),
//! returned at `MPI_Comm_free` (`comm::free`), agreed on by *all* members of both groups: each
//! local group gathers its members' next free id at its leader, the two leaders swap their
//! groups' contributions (over the peer communicator for `MPI_Intercomm_create`, over the
//! intercommunicator's collective context otherwise) and each leader broadcasts both lists
//! in its group; everybody then takes the maximum ([`exchange`]).

use crate::backend::{self, EComm, EReq};
use crate::consts::*;
use crate::ffi::{out, MpiError, MpiResult};
use crate::state::{lock, Comm};
use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// The intercommunicator-only parts of a communicator.
#[derive(Debug)]
pub(crate) struct Inter {
    /// World ranks of the remote group, in remote rank order.
    pub remote: Vec<i32>,
    /// Engine intracommunicator over the local group (context id `ctx + 2`), used by the
    /// local phases of collectives and communicator constructors.
    pub local: EComm,
    /// The fault-tolerant agreements' engine intracommunicator over both groups (context
    /// id `ctx + 3`, which no revoke touches), made by the first `MPIX_` call on an
    /// intercommunicator to another job ([`crate::ft`]).
    pub ft: Mutex<Option<EComm>>,
}

static TABLE: Mutex<BTreeMap<c_int, Arc<Inter>>> = Mutex::new(BTreeMap::new());
/// Number of live intercommunicators: lets [`get`] skip the table lock when there are
/// none (the common case on every collective call).
static LIVE: AtomicUsize = AtomicUsize::new(0);

fn table() -> MutexGuard<'static, BTreeMap<c_int, Arc<Inter>>> {
    TABLE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The intercommunicator data of communicator handle `comm`, if it is an
/// intercommunicator.
pub(crate) fn get(comm: c_int) -> Option<Arc<Inter>> {
    if LIVE.load(Ordering::Acquire) == 0 {
        return None;
    }
    table().get(&comm).cloned()
}

/// True if `comm` is an intercommunicator.
pub(crate) fn is_inter(comm: c_int) -> bool {
    get(comm).is_some()
}

/// Fail with `MPI_ERR_COMM` if `comm` is an intercommunicator (for calls only defined on
/// intracommunicators).
pub(crate) fn require_intra(comm: c_int, what: &str) -> MpiResult {
    if is_inter(comm) {
        return Err(MpiError::new(
            MPI_ERR_COMM,
            format!("{what} is not defined on an intercommunicator"),
        )
        .on(comm));
    }
    Ok(())
}

/// Drop the intercommunicator data of a freed handle; frees its local engine
/// communicator.
pub(crate) fn forget(comm: c_int) -> MpiResult {
    let gone = table().remove(&comm);
    if let Some(i) = gone {
        LIVE.fetch_sub(1, Ordering::AcqRel);
        let eng = backend::engine()?;
        eng.comm_free(i.local).map_err(backend::err)?;
        let ft = *i.ft.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = ft {
            eng.comm_free(c).map_err(backend::err)?;
        }
    }
    Ok(())
}

/// Tag of the context agreement of `MPI_Intercomm_create` (on the local and peer
/// communicators' collective contexts, above the ranges of `oxmpi-coll` and
/// `MPI_Comm_create_group`); the low 20 bits carry the user's tag.
const CREATE_TAG: i32 = 1 << 22;
/// Tag of the agreements over an existing intercommunicator (its own contexts).
const AGREE_TAG: i32 = 100;

// ---- byte messaging on engine contexts ----

/// Blocking byte messaging on engine communicators, errors attributed to `comm`.
pub(crate) struct Net {
    pub eng: &'static oxmpi_engine::Engine,
    pub comm: c_int,
}

impl Net {
    /// A messenger for collective work on `comm`.
    pub fn new(comm: c_int) -> MpiResult<Net> {
        Ok(Net {
            eng: backend::engine()?,
            comm,
        })
    }
    /// The byte link on engine context `ctx`.
    fn wire(&self, ctx: EComm) -> backend::Wire {
        backend::Wire {
            eng: self.eng,
            ctx,
            comm: self.comm,
        }
    }
    /// Start sending `data`; the caller keeps `data` alive until it waits.
    pub fn isend(&self, ctx: EComm, data: &[u8], dest: i32, tag: i32) -> MpiResult<EReq> {
        self.wire(ctx).isend(data, dest, tag)
    }
    /// Start receiving into `buf`; the caller keeps `buf` alive until it waits.
    pub fn irecv(&self, ctx: EComm, buf: &mut [u8], src: i32, tag: i32) -> MpiResult<EReq> {
        self.wire(ctx).irecv(buf, src, tag)
    }
    /// Wait for a request; the number of bytes received.
    pub fn wait(&self, r: EReq) -> MpiResult<usize> {
        let s = self.eng.wait(r);
        match s.error {
            None => Ok(s.count_bytes),
            Some(e) => Err(MpiError::new(
                backend::class_code(e),
                "an intercommunicator collective message failed",
            )
            .on(self.comm)),
        }
    }
    pub fn recv(&self, ctx: EComm, buf: &mut [u8], src: i32, tag: i32) -> MpiResult<usize> {
        let r = self.irecv(ctx, buf, src, tag)?;
        self.wait(r)
    }
    /// Send a byte string of any length (its length first).
    pub fn send_vec(&self, ctx: EComm, data: &[u8], dest: i32, tag: i32) -> MpiResult {
        let len = (data.len() as u64).to_le_bytes();
        let a = self.isend(ctx, &len, dest, tag)?;
        let b = self.isend(ctx, data, dest, tag)?;
        self.wait(a)?;
        self.wait(b).map(|_| ())
    }
    /// Receive a byte string sent by [`Net::send_vec`].
    pub fn recv_vec(&self, ctx: EComm, src: i32, tag: i32) -> MpiResult<Vec<u8>> {
        let mut len = [0u8; 8];
        self.recv(ctx, &mut len, src, tag)?;
        let mut v = vec![0u8; u64::from_le_bytes(len) as usize];
        self.recv(ctx, &mut v, src, tag)?;
        Ok(v)
    }
    /// Swap byte strings with `peer` (both sides call; no deadlock for any size).
    pub fn swap(&self, ctx: EComm, peer: i32, mine: &[u8], tag: i32) -> MpiResult<Vec<u8>> {
        let len = (mine.len() as u64).to_le_bytes();
        let a = self.isend(ctx, &len, peer, tag)?;
        let b = self.isend(ctx, mine, peer, tag)?;
        let theirs = self.recv_vec(ctx, peer, tag)?;
        self.wait(a)?;
        self.wait(b)?;
        Ok(theirs)
    }
}

/// A group seen through an engine intracommunicator: our rank, the size, the leader.
#[derive(Clone, Copy)]
pub(crate) struct Star {
    pub ctx: EComm,
    pub rank: i32,
    pub size: i32,
    pub leader: i32,
}

impl Star {
    /// Gather every member's byte string at the leader (`None` elsewhere).
    pub fn gather(&self, net: &Net, mine: Vec<u8>, tag: i32) -> MpiResult<Option<Vec<Vec<u8>>>> {
        if self.rank != self.leader {
            net.send_vec(self.ctx, &mine, self.leader, tag)?;
            return Ok(None);
        }
        let mut all = Vec::with_capacity(self.size as usize);
        for r in 0..self.size {
            if r == self.rank {
                all.push(Vec::new());
            } else {
                all.push(net.recv_vec(self.ctx, r, tag)?);
            }
        }
        all[self.rank as usize] = mine;
        Ok(Some(all))
    }
    /// Broadcast a byte string from the leader.
    pub fn bcast(&self, net: &Net, data: &mut Vec<u8>, tag: i32) -> MpiResult {
        if self.rank == self.leader {
            let mut reqs = Vec::new();
            let len = (data.len() as u64).to_le_bytes();
            for r in (0..self.size).filter(|&r| r != self.rank) {
                reqs.push(net.isend(self.ctx, &len, r, tag)?);
                reqs.push(net.isend(self.ctx, data, r, tag)?);
            }
            for q in reqs {
                net.wait(q)?;
            }
        } else {
            *data = net.recv_vec(self.ctx, self.leader, tag)?;
        }
        Ok(())
    }
}

/// Serialize a list of byte strings.
pub(crate) fn enc_list(l: &[Vec<u8>]) -> Vec<u8> {
    let mut v = (l.len() as u32).to_le_bytes().to_vec();
    for x in l {
        v.extend((x.len() as u32).to_le_bytes());
        v.extend(x);
    }
    v
}

/// Deserialize [`enc_list`]'s output starting at `*pos` (advances `*pos`).
pub(crate) fn dec_list(b: &[u8], pos: &mut usize) -> Option<Vec<Vec<u8>>> {
    let word = |pos: &mut usize| -> Option<usize> {
        let w = u32::from_le_bytes(b.get(*pos..*pos + 4)?.try_into().ok()?);
        *pos += 4;
        Some(w as usize)
    };
    let n = word(pos)?;
    let mut l = Vec::with_capacity(n);
    for _ in 0..n {
        let k = word(pos)?;
        l.push(b.get(*pos..*pos + k)?.to_vec());
        *pos += k;
    }
    Some(l)
}

/// The i32 at word `i` of a contribution.
pub(crate) fn word(b: &[u8], i: usize) -> i32 {
    b.get(4 * i..4 * i + 4)
        .map_or(0, |w| i32::from_le_bytes(w.try_into().expect("4 bytes")))
}

/// A contribution: our proposal of context ids (the lowest above those we hold) followed
/// by `words`.
pub(crate) fn contribution(words: &[i32]) -> MpiResult<Vec<u8>> {
    let next = crate::comm::ctx::proposal(0)? as i32;
    Ok(std::iter::once(next)
        .chain(words.iter().copied())
        .flat_map(i32::to_le_bytes)
        .collect())
}

/// What [`exchange`] returns: every member's contribution, by local and remote rank.
pub(crate) struct Exchanged {
    pub local: Vec<Vec<u8>>,
    pub remote: Vec<Vec<u8>>,
}

/// A second exchange over the same channel with other words (each member's contribution
/// then carries them after its proposal): what [`Exchanged::agree_ctx`] needs for the
/// masks of free pairs when the ids above every member's run out.
pub(crate) type Again<'a> = &'a mut dyn FnMut(&[i32]) -> MpiResult<Exchanged>;

impl Exchanged {
    /// The agreed context id (the maximum proposal of both groups); takes it and the
    /// next `span - 1` ids locally (4 for an intercommunicator, 2 for an
    /// intracommunicator). When that maximum reaches the limit, `again` exchanges every
    /// member's mask of free pairs (`ctxid::Ids::free_mask`) and the lowest `span` ids free
    /// at all of them are taken, as in `comm::agree_ctx_span`; without `again`, or with no
    /// such run, the `MPI_ERR_OTHER` error. The same at every member of both groups (they
    /// all see the same contributions).
    pub(crate) fn agree_ctx(&self, span: u32, again: Option<Again<'_>>) -> MpiResult<u32> {
        let ctx = self
            .local
            .iter()
            .chain(&self.remote)
            .map(|c| word(c, 0) as u32)
            .max()
            .unwrap_or(0);
        let limit = crate::comm::ctx::limit()?;
        if ctx.saturating_add(span) <= limit {
            lock().ids.take(ctx, span);
            return Ok(ctx);
        }
        let Some(again) = again else {
            return Err(crate::comm::ctx::exhausted(limit, span));
        };
        crate::comm::ctx::settle_parked()?;
        let mut and = lock()
            .ids
            .free_mask(0, limit.min(oxmpi_engine::ctxid::MASK_LIMIT));
        // Two words a 64-bit word of the mask, low half first.
        let words: Vec<i32> = and
            .iter()
            .flat_map(|&w| [w as u32 as i32, (w >> 32) as u32 as i32])
            .collect();
        let x = again(&words)?;
        let n = and.len();
        for c in x.local.iter().chain(&x.remote) {
            // A word missing from a contribution reads 0: no pair free there.
            let theirs = (0..n).map(|k| {
                u64::from(word(c, 1 + 2 * k) as u32) | u64::from(word(c, 2 + 2 * k) as u32) << 32
            });
            oxmpi_engine::ctxid::and_into(&mut and, theirs);
        }
        let Some(ctx) = oxmpi_engine::ctxid::pick(&and, span) else {
            return Err(crate::comm::ctx::exhausted(limit, span));
        };
        lock().ids.take(ctx, span);
        Ok(ctx)
    }
}

/// The all-to-all of small contributions between two groups: gather at the local leader,
/// swap between the leaders (at the leader `swap` gives the context and the remote
/// leader's rank there, or the error to report to the whole local group), broadcast both
/// lists locally.
pub(crate) fn exchange(
    net: &Net,
    star: Star,
    swap: Option<MpiResult<(EComm, i32)>>,
    mine: Vec<u8>,
    tag: i32,
) -> MpiResult<Exchanged> {
    let swap = swap.map(|s| s.map(|(ctx, peer)| move |l: &[u8]| net.swap(ctx, peer, l, tag)));
    exchange_with(net, star, swap, mine, tag)
}

/// [`exchange`] with the leaders' swap of their groups' lists done by `swap` (at the
/// leader: the function, or the error to report to the whole local group), e.g. over a
/// socket between two jobs.
pub(crate) fn exchange_with<F: FnOnce(&[u8]) -> MpiResult<Vec<u8>>>(
    net: &Net,
    star: Star,
    swap: Option<MpiResult<F>>,
    mine: Vec<u8>,
    tag: i32,
) -> MpiResult<Exchanged> {
    let mut blob = Vec::new();
    if let Some(local) = star.gather(net, mine, tag)? {
        match swap.expect("the leader has a swap partner") {
            Err(e) => return fail_group(net, star, e, tag),
            Ok(swap) => {
                let l = enc_list(&local);
                let r = match swap(&l) {
                    Ok(r) => r,
                    Err(e) => return fail_group(net, star, e, tag),
                };
                blob.push(0u8);
                blob.extend(l);
                blob.extend(r);
            }
        }
    }
    star.bcast(net, &mut blob, tag)?;
    let bad = || MpiError::new(MPI_ERR_INTERN, "malformed intercommunicator agreement");
    let body = from_leader(net, &blob)?;
    let mut pos = 0;
    let local = dec_list(body, &mut pos).ok_or_else(bad)?;
    let remote = dec_list(body, &mut pos).ok_or_else(bad)?;
    Ok(Exchanged { local, remote })
}

/// What a leader broadcast to its group: a status byte 0 and the body (returned), or 1, the
/// error code and its text ([`fail_group`]: returned as the error).
pub(crate) fn from_leader<'b>(net: &Net, blob: &'b [u8]) -> MpiResult<&'b [u8]> {
    match blob.first() {
        Some(0) => Ok(&blob[1..]),
        Some(_) if blob.len() >= 5 => {
            let code = i32::from_le_bytes(blob[1..5].try_into().expect("4 bytes"));
            let detail = String::from_utf8_lossy(&blob[5..]).into_owned();
            Err(MpiError::new(code, format!("at the local leader: {detail}")).on(net.comm))
        }
        _ => Err(
            MpiError::new(MPI_ERR_INTERN, "malformed message of the group's leader").on(net.comm),
        ),
    }
}

/// At the leader: tells the local group that `e` ended the agreement (they return it too)
/// and returns it.
pub(crate) fn fail_group<T>(net: &Net, star: Star, e: MpiError, tag: i32) -> MpiResult<T> {
    let mut blob = vec![1u8];
    blob.extend(e.code.to_le_bytes());
    blob.extend(e.detail.as_bytes());
    star.bcast(net, &mut blob, tag)?;
    Err(e.on(net.comm))
}

/// Create an intercommunicator with context ids `ctx..ctx + 3` over the local group
/// `local` and the remote group `remote` (world ranks); error handler from `parent`.
pub(crate) fn make_inter(
    parent: c_int,
    ctx: u32,
    local: Vec<i32>,
    remote: Vec<i32>,
) -> MpiResult<c_int> {
    let eng = backend::engine()?;
    let ecomm = eng
        .comm_create_inter(ctx, local.clone(), Some(remote.clone()))
        .map_err(|e| backend::err(e).on(parent))?;
    let coll = eng
        .comm_create_inter(ctx + 1, local.clone(), Some(remote.clone()))
        .map_err(|e| backend::err(e).on(parent))?;
    let lcomm = eng
        .comm_create(ctx + 2, local.clone())
        .map_err(|e| backend::err(e).on(parent))?;
    let mut st = lock();
    let me = st.world_rank();
    let (errh, err_action) = {
        let p = st.comm(parent)?;
        (p.errh, p.err_action)
    };
    let rank = local.iter().position(|&w| w == me).expect("member") as i32;
    let h = st.comms.insert(Comm {
        ecomm,
        coll,
        rank,
        size: remote.len() as i32,
        group: local,
        errh,
        err_action,
        name: String::new(),
        attrs: Default::default(),
        idups: 0,
    });
    // Register before the state lock is released: no other thread can see the handle
    // as an intracommunicator.
    table().insert(
        h,
        Arc::new(Inter {
            remote,
            local: lcomm,
            ft: Mutex::new(None),
        }),
    );
    LIVE.fetch_add(1, Ordering::AcqRel);
    drop(st);
    Ok(h)
}

/// The view of an intercommunicator for agreements and collectives.
pub(crate) struct Link {
    pub net: Net,
    /// Collective context (engine intercommunicator).
    pub ic: EComm,
    /// Local group through the local engine intracommunicator (leader = rank 0).
    pub star: Star,
    /// Size of the remote group.
    pub rsize: i32,
    pub local_group: Vec<i32>,
    pub remote_group: Vec<i32>,
}

impl Link {
    /// The link of intercommunicator `comm` (`None` if it is an intracommunicator).
    pub fn of(comm: c_int) -> MpiResult<Option<Link>> {
        let Some(i) = get(comm) else {
            return Ok(None);
        };
        let st = lock();
        st.check_active()?;
        let c = st.comm(comm)?;
        let (ic, rank, group) = (c.coll, c.rank, c.group.clone());
        drop(st);
        Ok(Some(Link {
            net: Net::new(comm)?,
            ic,
            star: Star {
                ctx: i.local,
                rank,
                size: group.len() as i32,
                leader: 0,
            },
            rsize: i.remote.len() as i32,
            local_group: group,
            remote_group: i.remote.clone(),
        }))
    }
    /// Our rank in the local group.
    pub fn rank(&self) -> i32 {
        self.star.rank
    }
    /// [`exchange`] over this intercommunicator (leaders: local rank 0 on both sides).
    fn exchange(&self, words: &[i32]) -> MpiResult<Exchanged> {
        let swap = (self.star.rank == 0).then_some(Ok((self.ic, 0)));
        exchange(&self.net, self.star, swap, contribution(words)?, AGREE_TAG)
    }
}

fn link(comm: c_int) -> MpiResult<Link> {
    Link::of(comm)?.ok_or_else(|| {
        MpiError::new(
            MPI_ERR_COMM,
            "an intercommunicator is required; this is an intracommunicator",
        )
        .on(comm)
    })
}

mpi_fn! {
    /// `MPI_Intercomm_create`: collective over the union of two disjoint groups; the local
    /// leaders talk over `peer_comm` with `tag`.
    fn PMPI_Intercomm_create / "MPI_Intercomm_create" (local_comm: c_int, local_leader: c_int, peer_comm: c_int, remote_leader: c_int, tag: c_int, newintercomm: *mut c_int) {
        if newintercomm.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL newintercomm").on(local_comm));
        }
        let (star, me) = {
            let st = lock();
            st.check_active()?;
            let c = st.comm(local_comm)?;
            (Star { ctx: c.coll, rank: c.rank, size: c.group.len() as i32, leader: local_leader }, st.world_rank())
        };
        require_intra(local_comm, "the local communicator of MPI_Intercomm_create")?;
        if !(0..star.size).contains(&local_leader) {
            return Err(MpiError::new(MPI_ERR_RANK, format!("invalid local leader {local_leader} (local communicator size {})", star.size)).on(local_comm));
        }
        // The peer communicator, the remote leader and the tag matter at the leader only.
        let swap = (star.rank == local_leader).then(|| -> MpiResult<(EComm, i32)> {
            if !(0..=backend::TAG_UB).contains(&tag) {
                mpi_bail!(MPI_ERR_TAG, "invalid tag {tag}");
            }
            let st = lock();
            let p = st.comm(peer_comm)?;
            if is_inter(peer_comm) {
                mpi_bail!(MPI_ERR_COMM, "the peer communicator is an intercommunicator");
            }
            let Some(&w) = usize::try_from(remote_leader).ok().and_then(|r| p.group.get(r)) else {
                mpi_bail!(MPI_ERR_RANK, "invalid remote leader {remote_leader} (peer communicator size {})", p.group.len());
            };
            if w == me {
                mpi_bail!(MPI_ERR_RANK, "the remote leader {remote_leader} is the local leader itself");
            }
            Ok((p.coll, remote_leader))
        });
        let net = Net::new(local_comm)?;
        let t = CREATE_TAG | (tag & 0xf_ffff);
        // The leader's partner again, for a second exchange (the masks' agreement).
        let partner = swap.as_ref().map(|s| s.as_ref().ok().copied());
        let x = exchange(&net, star, swap, contribution(&[me])?, t)?;
        let local: Vec<i32> = x.local.iter().map(|c| word(c, 1)).collect();
        let remote: Vec<i32> = x.remote.iter().map(|c| word(c, 1)).collect();
        if let Some(w) = local.iter().find(|w| remote.contains(w)) {
            return Err(MpiError::new(MPI_ERR_COMM, format!("the local and remote groups overlap (world rank {w} is in both)")).on(local_comm));
        }
        if remote.is_empty() {
            return Err(MpiError::new(MPI_ERR_COMM, "empty remote group").on(local_comm));
        }
        let mut again = |w: &[i32]| {
            let lost = || MpiError::new(MPI_ERR_INTERN, "no peer for the second exchange");
            let swap = partner.map(|p| p.ok_or_else(lost));
            exchange(&net, star, swap, contribution(w)?, t)
        };
        let ctx = x.agree_ctx(4, Some(&mut again))?;
        let h = make_inter(local_comm, ctx, local, remote)?;
        out(newintercomm, h, "newintercomm")
    }
}

mpi_fn! {
    /// `MPI_Intercomm_merge`: an intracommunicator over both groups; the group whose
    /// members pass `high = false` comes first (equal flags: the group whose leader has the
    /// lower world rank).
    fn PMPI_Intercomm_merge / "MPI_Intercomm_merge" (intercomm: c_int, high: c_int, newintracomm: *mut c_int) {
        let l = link(intercomm)?;
        if newintracomm.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL newintracomm").on(intercomm));
        }
        let x = l.exchange(&[(high != 0) as i32])?;
        let (lh, rh) = (word(&x.local[0], 1), word(&x.remote[0], 1));
        let local_first = match lh.cmp(&rh) {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => l.local_group[0] < l.remote_group[0],
        };
        let group: Vec<i32> = if local_first {
            l.local_group.iter().chain(&l.remote_group).copied().collect()
        } else {
            l.remote_group.iter().chain(&l.local_group).copied().collect()
        };
        let ctx = x.agree_ctx(2, Some(&mut |w: &[i32]| l.exchange(w)))?;
        let h = crate::comm::make::make_comm(intercomm, ctx, group)?;
        out(newintracomm, h, "newintracomm")
    }
}

/// The new intercommunicator of `MPI_Comm_dup` of intercommunicator `comm` (the caller,
/// `comm::dup`, copies the attributes and stores the handle in `*newcomm`, checked for
/// NULL here before any communication).
pub(crate) fn dup(comm: c_int, newcomm: *mut c_int) -> MpiResult<c_int> {
    let l = link(comm)?;
    if newcomm.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
    }
    let ctx = l
        .exchange(&[])?
        .agree_ctx(4, Some(&mut |w: &[i32]| l.exchange(w)))?;
    make_inter(comm, ctx, l.local_group, l.remote_group)
}

/// Members of `contribs` (words `[ctx, color, key]` by rank) with `color`, ordered by key
/// then rank, as world ranks of `group`.
fn by_color(contribs: &[Vec<u8>], group: &[i32], color: i32) -> Vec<i32> {
    let mut m: Vec<(i32, usize)> = contribs
        .iter()
        .enumerate()
        .filter(|(_, c)| word(c, 1) == color)
        .map(|(r, c)| (word(c, 2), r))
        .collect();
    m.sort_unstable();
    m.into_iter().map(|(_, r)| group[r]).collect()
}

/// `MPI_Comm_split` of an intercommunicator: local members of one color are connected to
/// the remote members of the same color; `MPI_COMM_NULL` if either side has none.
pub(crate) fn split(comm: c_int, color: c_int, key: c_int, newcomm: *mut c_int) -> MpiResult {
    let l = link(comm)?;
    if newcomm.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
    }
    if color < 0 && color != MPI_UNDEFINED {
        return Err(MpiError::new(MPI_ERR_ARG, format!("invalid color {color}")).on(comm));
    }
    let x = l.exchange(&[color, key])?;
    let ctx = x.agree_ctx(4, Some(&mut |w: &[i32]| l.exchange(w)))?;
    let local = by_color(&x.local, &l.local_group, color);
    let remote = by_color(&x.remote, &l.remote_group, color);
    if color == MPI_UNDEFINED || remote.is_empty() {
        // Not a member: the ids stay taken at the members only.
        lock().ids.release(ctx, 4);
        return out(newcomm, MPI_COMM_NULL, "newcomm");
    }
    let h = make_inter(comm, ctx, local, remote)?;
    out(newcomm, h, "newcomm")
}

/// `MPI_Comm_create` of an intercommunicator: `group` is a subgroup of the local group;
/// the result connects it with the subgroup the remote side chose (`MPI_COMM_NULL` for
/// non-members and if either subgroup is empty).
pub(crate) fn create(comm: c_int, group: c_int, newcomm: *mut c_int) -> MpiResult {
    let l = link(comm)?;
    if newcomm.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
    }
    let members = lock().group(group).map_err(|e| e.on(comm))?;
    // Local ranks of the members (the group must be a subgroup of the local group).
    let mut ranks = Vec::with_capacity(members.len());
    for w in &members {
        match l.local_group.iter().position(|x| x == w) {
            Some(r) => ranks.push(r as i32),
            None => {
                return Err(MpiError::new(
                    MPI_ERR_GROUP,
                    format!("world rank {w} of the group is not in the local group"),
                )
                .on(comm))
            }
        }
    }
    let x = l.exchange(&ranks)?;
    let ctx = x.agree_ctx(4, Some(&mut |w: &[i32]| l.exchange(w)))?;
    // Every member passes the same group; the leaders' contributions are used.
    let pick = |c: &Vec<u8>, g: &[i32]| -> Vec<i32> {
        (1..c.len() / 4)
            .filter_map(|i| g.get(word(c, i) as usize).copied())
            .collect()
    };
    let local = pick(&x.local[0], &l.local_group);
    let remote = pick(&x.remote[0], &l.remote_group);
    let me = lock().world_rank();
    if !local.contains(&me) || remote.is_empty() {
        // Not a member: the ids stay taken at the members only.
        lock().ids.release(ctx, 4);
        return out(newcomm, MPI_COMM_NULL, "newcomm");
    }
    let h = make_inter(comm, ctx, local, remote)?;
    out(newcomm, h, "newcomm")
}

/// `MPI_Comm_compare` when at least one side is an intercommunicator.
pub(crate) fn compare(a: c_int, b: c_int) -> MpiResult<c_int> {
    let (ia, ib) = (get(a), get(b));
    let st = lock();
    let (ca, cb) = (st.comm(a)?, st.comm(b)?);
    if a == b {
        return Ok(MPI_IDENT);
    }
    let (Some(ia), Some(ib)) = (ia, ib) else {
        return Ok(MPI_UNEQUAL);
    };
    let sorted = |v: &[i32]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v
    };
    Ok(if ca.group == cb.group && ia.remote == ib.remote {
        MPI_CONGRUENT
    } else if sorted(&ca.group) == sorted(&cb.group) && sorted(&ia.remote) == sorted(&ib.remote) {
        MPI_SIMILAR
    } else {
        MPI_UNEQUAL
    })
}

mpi_fn! {
    /// `MPI_Comm_test_inter`.
    fn PMPI_Comm_test_inter / "MPI_Comm_test_inter" (comm: c_int, flag: *mut c_int) {
        lock().comm(comm)?;
        out(flag, is_inter(comm) as c_int, "flag")
    }
}

mpi_fn! {
    /// `MPI_Comm_remote_size`.
    fn PMPI_Comm_remote_size / "MPI_Comm_remote_size" (comm: c_int, size: *mut c_int) {
        lock().comm(comm)?;
        let i = get(comm).ok_or_else(|| MpiError::new(MPI_ERR_COMM, "MPI_Comm_remote_size on an intracommunicator").on(comm))?;
        out(size, i.remote.len() as c_int, "size")
    }
}

mpi_fn! {
    /// `MPI_Comm_remote_group`.
    fn PMPI_Comm_remote_group / "MPI_Comm_remote_group" (comm: c_int, group: *mut c_int) {
        lock().comm(comm)?;
        let i = get(comm).ok_or_else(|| MpiError::new(MPI_ERR_COMM, "MPI_Comm_remote_group on an intracommunicator").on(comm))?;
        let h = lock().new_group(i.remote.clone());
        out(group, h, "group")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_round_trip_and_reject_truncation() {
        let l = vec![vec![1u8, 2, 3], vec![], vec![9u8; 70]];
        let mut b = enc_list(&l);
        b.extend(enc_list(&[vec![7u8]]));
        let mut pos = 0;
        assert_eq!(dec_list(&b, &mut pos), Some(l));
        assert_eq!(dec_list(&b, &mut pos), Some(vec![vec![7u8]]));
        assert_eq!(pos, b.len());
        let short = &b[..10];
        assert_eq!(dec_list(short, &mut 0), None);
    }

    #[test]
    fn split_orders_members_by_key_then_rank() {
        let c = |color: i32, key: i32| -> Vec<u8> {
            [4, color, key]
                .iter()
                .flat_map(|w: &i32| w.to_le_bytes())
                .collect()
        };
        let contribs = vec![c(1, 5), c(2, 0), c(1, 0), c(1, 5), c(MPI_UNDEFINED, 0)];
        let group = [10, 11, 12, 13, 14];
        assert_eq!(by_color(&contribs, &group, 1), vec![12, 10, 13]);
        assert_eq!(by_color(&contribs, &group, 2), vec![11]);
        assert!(by_color(&contribs, &group, 3).is_empty());
    }
}
