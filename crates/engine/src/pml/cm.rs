//! `pml cm`: point-to-point through the provider's tagged matching (Open MPI's `pml cm`
//! over `mtl ofi`). Every send, receive, probe and cancel of the engine goes to the ofi
//! endpoint (`crate::btl::ofi::link::mtl`) as one tagged operation; the rules (where the
//! envelope sits in the tag, which bits a wildcard ignores, how a completion reads as a
//! status, when a synchronous send is acknowledged) are the sans-IO core's,
//! `crate::mtl::ofi`, and nothing here matches messages.
//!
//! - Sends: within the provider's inject size a standard send is `fi_tinject` and complete
//!   at once; larger ones are `fi_tsend` and complete with the provider's completion (above
//!   its eager size the provider runs its own rendezvous: rxm over `FI_RMA` reads, shm by
//!   its own copies). A buffered send sends a copy and completes at once.
//! - Synchronous sends post the exact receive of their acknowledgement first, then send
//!   with the synchronous bit; the request completes when both completed. A receive that
//!   matched a synchronous send (truncated or not) sends the acknowledgement.
//! - Receives are `fi_trecv` with the pattern of `(context, source, tag)`; truncation is the
//!   provider's `FI_ETRUNC`, cancel is `fi_cancel` (`FI_ECANCELED` when it had not matched).
//! - A marked message (`Engine::isend_marked`: `TAG_MARK` on the tag) carries the layout's
//!   mark bit (`Layout::mark`, bit 30, where the engine has `TAG_MARK`), which every
//!   receive pattern ignores and the received tag keeps: its status shows `TAG_MARK`, as
//!   on the engine's own path.
//! - Probes are `FI_PEEK` (mprobe: `FI_PEEK | FI_CLAIM`, its receive `FI_CLAIM` with the
//!   peek's context), each waited for under the engine's lock, as the provider answers a
//!   peek from its own queues. A claimed message longer than its receive's buffer (the
//!   peek gave its length) is received whole into a buffer of its length and truncated
//!   here, never by the provider.
//! - Finalize: every rank sends a goodbye to every other and waits for theirs, so what it
//!   injected has left before the fabric closes (a manual-progress provider moves data
//!   only while someone reads its queue).

use std::collections::HashMap;

use super::request::{empty_status, Req, ReqState, Started};
use super::State;
use crate::btl::ofi::link::mtl::{Mtl, Sent};
use crate::btl::ofi::link::peer_gone;
use crate::mtl::ofi::completion::{Cq, RecvEnd};
use crate::mtl::ofi::tag::{Envelope, Layout, Pattern};
use crate::{CommId, Error, ErrorClass, MessageId, ReqId, SendMode, Status, ANY_SOURCE, ANY_TAG};

/// The context id of the finalize goodbyes (one of those the layout reserves below
/// `u32::MAX`; the library's own use the top ones).
const BYE_CTX: u32 = u32::MAX - 15;

/// The context id of a rendezvous's FIN (the receiver read the data): its source is the
/// receiver's world rank, its tag the id the request carried.
const FIN_CTX: u32 = u32::MAX - 14;

/// A rendezvous request's bytes: the address and key to read the data at, the FIN's id
/// (the message's length travels as the request's remote data).
const RNDV_DESC: usize = 20;

/// What an operation in flight is for.
#[derive(Debug)]
enum Pending {
    /// A send (or one part of a synchronous send: its data or its acknowledgement's
    /// receive) of request `req`; `None`: nobody waits (buffered send, acknowledgement,
    /// goodbye).
    Send(Option<u64>),
    /// A receive of request `req` into `len` bytes on `comm`, where we are rank `me`;
    /// through `bounce` (the buffer posted, and the user's buffer's address) if given.
    Recv {
        req: u64,
        comm: CommId,
        me: u32,
        len: usize,
        bounce: Option<(Vec<u8>, usize)>,
        /// The byte posted after the user's buffer ([`Cm::spill`]); boxed, so it stays put.
        _spill: Option<Box<u8>>,
        /// The user's buffer's address (a rendezvous reads into it).
        at: usize,
        /// A claimed rendezvous request: its tag bits and the message's length (the
        /// completion of a claimed receive need not say).
        claimed: Option<(u64, usize)>,
    },
    /// The read of a rendezvous's data into a receive's buffer.
    Read(RndvRead),
    /// A probe waited for under the lock: its completion, once there.
    Peek(Option<Cq>),
    /// A finalize goodbye's receive.
    Bye,
}

/// A rendezvous read in flight: into receive `req`'s buffer of `len` bytes (the message
/// has `total`), from world rank `from`, which waits for FIN `fin`; we are rank `me` of the
/// communicator; `got`: the request's decoded tag.
#[derive(Debug, Clone, Copy)]
struct RndvRead {
    req: u64,
    me: u32,
    len: usize,
    total: usize,
    got: crate::mtl::ofi::tag::Decoded,
    from: i32,
    fin: u32,
}

/// The offload's state in the engine ([`State::cm`]).
#[derive(Debug)]
pub(crate) struct Cm {
    mtl: Mtl,
    layout: Layout,
    ops: HashMap<u64, Pending>,
    /// Parts left of each pending send request (2 for a synchronous send).
    parts: HashMap<u64, u8>,
    /// Messages claimed by mprobe, by message id: the claim's token, the status, the
    /// communicator and our rank in it (for the acknowledgement of a synchronous send), the
    /// message's tag bits.
    claims: HashMap<u64, (u64, Status, CommId, u32, u64)>,
    /// Completions read but not applied yet.
    buf: Vec<(u64, Cq)>,
    /// Receives shorter than this go through a bounce buffer of this size
    /// (`crate::mtl::ofi::select::bounce_below`).
    bounce: usize,
    /// Receives without a bounce buffer get one spill byte after the user's buffer
    /// (`crate::mtl::ofi::select::spill_byte`): the provider does not report truncation.
    spill: bool,
    /// Bounce buffers of completed receives, kept for the next ones (at most
    /// [`SPARE_BOUNCES`]), so a short receive neither allocates nor zeroes 16 KiB.
    spare: Vec<Vec<u8>>,
    /// Sends and goodbye receives in flight (finalize waits for them).
    sends: usize,
    /// Sends longer than this go as a rendezvous
    /// (`crate::mtl::ofi::select::rendezvous_above`).
    rndv_above: Option<usize>,
    /// The id of the next rendezvous's FIN.
    next_fin: u32,
    /// Each rendezvous's FIN receive (by token): the registration of its data, and the
    /// copy it reads from (buffered sends).
    fins: HashMap<u64, (u64, Option<Vec<u8>>)>,
    /// The finalize goodbyes went out.
    bye_started: bool,
    /// Finalize released the endpoint.
    closed: bool,
}

/// How many bounce buffers [`Cm::spare`] keeps.
const SPARE_BOUNCES: usize = 64;

/// An error of the provider as the engine's (`MPI_ERR_OTHER` with its message).
fn fabric(me: i32, e: String) -> Error {
    Error::arg(ErrorClass::Other, format!("pml cm: rank {me}: {e}"))
}

/// The send status of an operation that failed with `errno`.
fn failed(errno: i32) -> Option<ErrorClass> {
    Some(if peer_gone(errno) {
        ErrorClass::ProcFailed
    } else {
        ErrorClass::Other
    })
}

impl Cm {
    /// The user context ids `0..n` the offload's tag layout carries.
    pub(crate) fn max_contexts(&self) -> u32 {
        self.layout.max_contexts()
    }

    /// Whether a receive is in flight in the provider for a communicator already freed
    /// (`comms`: the engine's table): its context id must not serve a new one yet.
    pub(crate) fn recv_on_freed(&self, comms: &[Option<super::comm::Comm>]) -> bool {
        self.ops.values().any(|p| match p {
            Pending::Recv { comm, .. } => comms.get(comm.0 as usize).is_none_or(Option::is_none),
            _ => false,
        })
    }

    /// The offload over `mtl`, if the `ofi` transport opened it for `pml cm`.
    pub(crate) fn open(mtl: Mtl) -> Option<Cm> {
        let layout = mtl.layout()?;
        let bounce = crate::mtl::ofi::select::bounce_below(&mtl.provider());
        let spill = crate::mtl::ofi::select::spill_byte(&mtl.provider());
        // The request has to fit every receive that may take it (short ones have a bounce
        // buffer, the others are at least that long), and the peer has to read the data.
        let rndv_above = crate::mtl::ofi::select::rendezvous_above(&mtl.provider(), mtl.inject())
            .filter(|_| bounce > RNDV_DESC && mtl.reads());
        Some(Cm {
            bounce,
            spill,
            spare: Vec::new(),
            mtl,
            layout,
            ops: HashMap::new(),
            parts: HashMap::new(),
            claims: HashMap::new(),
            buf: Vec::new(),
            sends: 0,
            rndv_above,
            next_fin: 0,
            fins: HashMap::new(),
            bye_started: false,
            closed: false,
        })
    }

    /// Posts the receive of an empty message matching `p` (an acknowledgement, a FIN): its
    /// token.
    fn expect(&self, p: Pattern) -> Result<u64, String> {
        // SAFETY: no data.
        unsafe {
            self.mtl.recv(
                p.bits,
                p.ignore,
                std::ptr::null_mut(),
                0,
                None,
                std::ptr::null_mut(),
            )
        }
    }

    /// Sends an empty message with `tag` to world rank `to` that nobody waits for (an
    /// acknowledgement, a FIN); finalize waits for it if it did not go at once.
    fn signal(&mut self, to: usize, tag: u64) -> Result<(), String> {
        // SAFETY: no data.
        match unsafe { self.mtl.send(to, tag, std::ptr::null(), 0, true, None) }? {
            Sent::Injected => {}
            Sent::Pending(t) => {
                self.ops.insert(t, Pending::Send(None));
                self.sends += 1;
            }
        }
        Ok(())
    }

    /// For verbose output.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{}; {} source bits, {} context bits, MPI_TAG_UB {}",
            self.mtl.describe(),
            self.layout.source_bits(),
            self.layout.context_bits(),
            self.layout.tag_ub()
        )
    }
}

/// An envelope value the layout cannot carry, as an MPI error.
fn unfit(e: crate::mtl::ofi::tag::EncodeError) -> Error {
    Error::arg(ErrorClass::Unsupported, format!("pml cm: {e}"))
}

/// A request whose completion the provider reports (its operations carry the request's
/// id), starting with `status`.
fn offload(status: Status) -> Req {
    Req {
        state: ReqState::Offload { tok: None },
        status,
        detached: false,
        _owned: None,
    }
}

impl State {
    /// Sends to rank `dest` (world rank `world`) of a communicator under `pml cm`.
    ///
    /// # Safety
    /// As for `State::start_send`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn cm_send(
        &mut self,
        env: super::matching::Envelope,
        dest: i32,
        world: i32,
        buf: *const u8,
        len: usize,
        mode: SendMode,
    ) -> Result<Started, Error> {
        let me = self.me;
        let Some(cm) = self.cm.as_mut() else {
            return Err(Error::State("pml cm is not open".into()));
        };
        let env = Envelope {
            ctx: env.ctx,
            src: env.src as u32,
            tag: env.tag,
        };
        let sync = mode == SendMode::Sync;
        let tag = cm.layout.send(&env, sync).map_err(unfit)?;
        let done = Status {
            count_bytes: len,
            ..empty_status()
        };
        if cm.rndv_above.is_some_and(|t| len > t) {
            // SAFETY: the caller's promise.
            return unsafe { self.cm_rndv_send(env, (dest, world), (buf, len), mode, (tag, done)) };
        }
        if mode == SendMode::Buffered {
            // SAFETY: the caller's buffer is readable for len bytes now.
            let copy = unsafe { std::slice::from_raw_parts(buf, len) }.to_vec();
            let p = copy.as_ptr();
            // SAFETY: the operation keeps its own copy.
            match unsafe { cm.mtl.send(world as usize, tag, p, len, true, Some(copy)) } {
                Ok(Sent::Injected) => {}
                Ok(Sent::Pending(t)) => {
                    cm.ops.insert(t, Pending::Send(None));
                    cm.sends += 1;
                }
                Err(e) => return Err(fabric(me, e)),
            }
            return Ok(Started::Done(done));
        }
        let req = self.reqs.insert(offload(done));
        let mut parts = 0u8;
        if sync {
            let ack = cm.layout.ack_recv(&env, dest as u32).map_err(unfit)?;
            // SAFETY: an acknowledgement carries no data.
            let t = unsafe {
                cm.mtl.recv(
                    ack.bits,
                    ack.ignore,
                    std::ptr::null_mut(),
                    0,
                    None,
                    std::ptr::null_mut(),
                )
            }
            .map_err(|e| fabric(me, e))?;
            cm.ops.insert(t, Pending::Send(Some(req)));
            parts += 1;
        }
        // SAFETY: the caller keeps buf valid until the request completes.
        match unsafe { cm.mtl.send(world as usize, tag, buf, len, !sync, None) } {
            Ok(Sent::Injected) => {}
            Ok(Sent::Pending(t)) => {
                cm.ops.insert(t, Pending::Send(Some(req)));
                cm.sends += 1;
                parts += 1;
            }
            Err(e) => {
                self.reqs.remove(req);
                return Err(fabric(me, e));
            }
        }
        if parts == 0 {
            self.reqs.remove(req);
            return Ok(Started::Done(done));
        }
        cm.parts.insert(req, parts);
        Ok(Started::Req(ReqId(req)))
    }

    /// [`State::cm_send`] of a message longer than [`Cm::rndv_above`]: registers the data
    /// for the receiver to read, posts the receive of the FIN that says it did, and sends
    /// the request (the envelope's tag with [`Layout::rndv`], the descriptor, the length as
    /// remote data). The request completes with the FIN (and the acknowledgement, if
    /// synchronous); a buffered send reads from a copy and completes at once.
    ///
    /// # Safety
    /// As for `State::start_send`.
    /// `(dest, world)`: the destination's rank and world rank; `(tag, done)`: the send's
    /// tag and completed status, as [`State::cm_send`] made them.
    unsafe fn cm_rndv_send(
        &mut self,
        env: Envelope,
        (dest, world): (i32, i32),
        (buf, len): (*const u8, usize),
        mode: SendMode,
        (tag, done): (u64, Status),
    ) -> Result<Started, Error> {
        let me = self.me;
        let Some(cm) = self.cm.as_mut() else {
            return Err(Error::State("pml cm is not open".into()));
        };
        let sync = mode == SendMode::Sync;
        let tag = tag | cm.layout.rndv();
        let fin = cm.next_fin;
        cm.next_fin = (cm.next_fin + 1) & cm.layout.tag_ub() as u32;
        let fin_pat = cm
            .layout
            .recv(FIN_CTX, Some(world as u32), Some(fin as i32))
            .map_err(unfit)?;
        let mut copy = (mode == SendMode::Buffered).then(|| {
            // SAFETY: the caller's buffer is readable for len bytes now.
            unsafe { std::slice::from_raw_parts(buf, len) }.to_vec()
        });
        let from = copy.as_ref().map_or(buf, |c| c.as_ptr());
        // SAFETY: the copy, or the caller's buffer (valid until the request completes),
        // stays until the FIN, when the registration closes.
        let (id, key, addr) = unsafe { cm.mtl.expose(from, len) }.map_err(|e| fabric(me, e))?;
        let req = copy.is_none().then(|| self.reqs.insert(offload(done)));
        let Some(cm) = self.cm.as_mut() else {
            return Err(Error::State("pml cm is not open".into()));
        };
        let mut parts = 0u8;
        let fail = |s: &mut State, e: String| {
            if let Some(r) = req {
                s.reqs.remove(r);
            }
            if let Some(cm) = s.cm.as_mut() {
                cm.mtl.unexpose(id);
            }
            Err(fabric(me, e))
        };
        // The acknowledgement of a synchronous send, then the FIN.
        let ack = if sync {
            Some(cm.layout.ack_recv(&env, dest as u32).map_err(unfit)?)
        } else {
            None
        };
        let fin_pat = Pattern {
            bits: fin_pat.bits,
            ignore: 0,
        };
        for (k, p) in ack.into_iter().chain([fin_pat]).enumerate() {
            match cm.expect(p) {
                Ok(t) => {
                    cm.ops.insert(t, Pending::Send(req));
                    if k == usize::from(sync) {
                        cm.fins.insert(t, (id, copy.take()));
                    }
                    cm.sends += 1;
                    parts += 1;
                }
                Err(e) => return fail(self, e),
            }
        }
        let mut d = [0u8; RNDV_DESC];
        d[..8].copy_from_slice(&addr.to_le_bytes());
        d[8..16].copy_from_slice(&key.to_le_bytes());
        d[16..].copy_from_slice(&fin.to_le_bytes());
        match cm.mtl.send_data(world as usize, tag, &d, len as u64) {
            Ok(t) => {
                cm.ops.insert(t, Pending::Send(req));
                cm.sends += 1;
                parts += 1;
            }
            // The FIN's receive stays posted: nothing will match it (a fresh id).
            Err(e) => return fail(self, e),
        }
        match req {
            Some(r) => {
                cm.parts.insert(r, parts);
                Ok(Started::Req(ReqId(r)))
            }
            None => Ok(Started::Done(done)),
        }
    }

    /// Receives from rank `src` (or [`ANY_SOURCE`]) with `tag` (or [`ANY_TAG`]) on `comm`
    /// (context `ctx`, where we are rank `me`) under `pml cm`.
    ///
    /// # Safety
    /// As for `State::start_recv`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn cm_recv(
        &mut self,
        buf: *mut u8,
        len: usize,
        src: i32,
        tag: i32,
        comm: CommId,
        ctx: u32,
        me: i32,
    ) -> Result<Started, Error> {
        let rank = self.me;
        let Some(cm) = self.cm.as_mut() else {
            return Err(Error::State("pml cm is not open".into()));
        };
        let Pattern { bits, ignore } = pattern(&cm.layout, ctx, src, tag)?;
        let req = self.reqs.insert(offload(empty_status()));
        // A provider that mishandles truncation receives short messages whole into a
        // buffer of its own; the completion copies what fits and truncates.
        let mut bounce = (len < cm.bounce).then(|| {
            let b = cm.spare.pop().unwrap_or_else(|| vec![0u8; cm.bounce]);
            (b, buf as usize)
        });
        let (at, room) = match bounce.as_mut() {
            Some((b, _)) => (b.as_mut_ptr(), b.len()),
            None => (buf, len),
        };
        // Where the provider would not report a truncation, one more byte shows it.
        let mut spill = (bounce.is_none() && cm.spill).then(|| Box::new(0u8));
        let spill_at = spill
            .as_deref_mut()
            .map_or(std::ptr::null_mut(), std::ptr::from_mut);
        // SAFETY: the caller keeps buf valid until the request completes; the bounce
        // buffer and the spill byte live in the pending operation until then (their heap
        // blocks stay put).
        match unsafe { cm.mtl.recv(bits, ignore, at, room, None, spill_at) } {
            Ok(t) => {
                cm.ops.insert(
                    t,
                    Pending::Recv {
                        req,
                        comm,
                        me: me as u32,
                        len,
                        bounce,
                        _spill: spill,
                        at: buf as usize,
                        claimed: None,
                    },
                );
                if let Some(q) = self.reqs.get_mut(req) {
                    q.state = ReqState::Offload { tok: Some(t) };
                }
                Ok(Started::Req(ReqId(req)))
            }
            Err(e) => {
                self.reqs.remove(req);
                Err(fabric(rank, e))
            }
        }
    }

    /// Reads the offload's completions and applies them; whether any came.
    pub(crate) fn cm_progress(&mut self) -> bool {
        let Some(cm) = self.cm.as_mut().filter(|c| !c.closed) else {
            return false;
        };
        let mut got = std::mem::take(&mut cm.buf);
        if let Err(e) = cm.mtl.poll(&mut got) {
            oxmpi_base::verbose!(super::params::PML, 1, "pml cm: rank {}: {e}", self.me);
        }
        let busy = !got.is_empty();
        for (t, cq) in got.drain(..) {
            self.cm_complete(t, cq);
        }
        if let Some(cm) = self.cm.as_mut() {
            cm.buf = got;
        }
        busy
    }

    /// Applies the completion `cq` of operation `t`.
    fn cm_complete(&mut self, t: u64, cq: Cq) {
        let Some(cm) = self.cm.as_mut() else { return };
        let Some(what) = cm.ops.remove(&t) else {
            return;
        };
        let layout = cm.layout;
        match what {
            Pending::Send(req) => {
                cm.sends = cm.sends.saturating_sub(1);
                if let Some((id, _copy)) = cm.fins.remove(&t) {
                    cm.mtl.unexpose(id);
                }
                let err = match cq {
                    Cq::Err { errno, .. } => failed(errno),
                    Cq::Ok { .. } => None,
                };
                let Some(req) = req else { return };
                let left = cm.parts.get_mut(&req).map(|n| {
                    *n -= 1;
                    *n
                });
                if let (Some(e), Some(q)) = (err, self.reqs.get_mut(req)) {
                    q.status.error.get_or_insert(e);
                }
                if left.unwrap_or(0) == 0 {
                    cm.parts.remove(&req);
                    self.finish(req);
                }
            }
            Pending::Peek(_) => {
                cm.ops.insert(t, Pending::Peek(Some(cq)));
            }
            Pending::Bye => {
                cm.sends = cm.sends.saturating_sub(1);
            }
            Pending::Read(r) => {
                cm.sends = cm.sends.saturating_sub(1);
                let err = match cq {
                    Cq::Err { errno, .. } => failed(errno),
                    Cq::Ok { .. } => None,
                };
                self.cm_rndv_done(r, err);
            }
            Pending::Recv {
                req,
                comm,
                me,
                len,
                bounce,
                _spill,
                at,
                claimed,
            } if claimed.is_some()
                || matches!(cq, Cq::Ok { tag, .. } if tag & layout.rndv() != 0) =>
            {
                let (tag, total) = match (claimed, cq) {
                    (Some(c), _) => c,
                    (None, Cq::Ok { tag, len }) => (tag, len),
                    (None, Cq::Err { .. }) => unreachable!("matched above"),
                };
                // The request's descriptor: in the bounce buffer, or the user's (at least
                // as long as the descriptor where there is no bounce buffer).
                let mut d = [0u8; RNDV_DESC];
                match &bounce {
                    Some((b, _)) => d.copy_from_slice(&b[..RNDV_DESC]),
                    // SAFETY: the receive's buffer holds len >= RNDV_DESC bytes (no bounce
                    // buffer below that) and the descriptor was placed there.
                    None if len >= RNDV_DESC => d.copy_from_slice(unsafe {
                        std::slice::from_raw_parts(at as *const u8, RNDV_DESC)
                    }),
                    None => {}
                }
                if let Some((b, _)) = bounce {
                    if cm.spare.len() < SPARE_BOUNCES && b.len() == cm.bounce {
                        cm.spare.push(b);
                    }
                }
                let addr = u64::from_le_bytes(d[..8].try_into().expect("8 bytes"));
                let key = u64::from_le_bytes(d[8..16].try_into().expect("8 bytes"));
                let fin = u32::from_le_bytes(d[16..].try_into().expect("4 bytes"));
                let got = layout.decode(tag);
                let from = self
                    .comms
                    .get(comm.0 as usize)
                    .and_then(Option::as_ref)
                    .and_then(|c| c.remote.get(got.env.src as usize).copied())
                    .unwrap_or(-1);
                let n = total.min(len);
                let r = RndvRead {
                    req,
                    me,
                    len,
                    total,
                    got,
                    from,
                    fin,
                };
                let Some(cm) = self.cm.as_mut() else { return };
                let read = if n > 0 && from >= 0 {
                    // SAFETY: the receive's buffer holds len >= n bytes and stays valid
                    // until its request completes, after the read.
                    Some(unsafe { cm.mtl.read(from as usize, at as *mut u8, n, addr, key) })
                } else {
                    None
                };
                match read {
                    Some(Ok(rt)) => {
                        cm.ops.insert(rt, Pending::Read(r));
                        cm.sends += 1;
                    }
                    Some(Err(e)) => {
                        oxmpi_base::verbose!(
                            super::params::PML,
                            1,
                            "pml cm: rank {}: rendezvous read: {e}",
                            self.me
                        );
                        let err = Some(ErrorClass::Other);
                        self.cm_rndv_done(r, err);
                    }
                    None => self.cm_rndv_done(r, None),
                }
            }
            Pending::Recv {
                req,
                comm,
                me,
                len,
                bounce,
                _spill,
                at: _,
                claimed: _,
            } => {
                let cq = cq.capped(len);
                if let Some((b, to)) = bounce {
                    let placed = match cq {
                        Cq::Ok { len: n, .. } | Cq::Err { len: n, .. } => n.min(len).min(b.len()),
                    };
                    if placed > 0 {
                        // SAFETY: the receive's buffer holds len >= placed bytes and is
                        // valid until its request completes (below); b is ours.
                        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), to as *mut u8, placed) };
                    }
                    // Only the receives' own size: a claimed receive's is the message's.
                    if cm.spare.len() < SPARE_BOUNCES && b.len() == cm.bounce {
                        cm.spare.push(b);
                    }
                }
                let end = RecvEnd::read(&layout, cq);
                if let Some((env, sender)) = end.ack_owed() {
                    let world = self
                        .comms
                        .get(comm.0 as usize)
                        .and_then(Option::as_ref)
                        .and_then(|c| c.remote.get(sender as usize).copied());
                    self.cm_ack(&env, me, world);
                }
                let s = end.status(peer_gone);
                if let Some(q) = self.reqs.get_mut(req) {
                    q.status = Status {
                        source: s.source.map_or(ANY_SOURCE, |v| v as i32),
                        tag: s.tag.unwrap_or(ANY_TAG),
                        error: s.error,
                        count_bytes: s.count,
                        cancelled: s.cancelled,
                    };
                }
                self.finish(req);
            }
        }
    }

    /// Ends rendezvous receive `r.req` (its read done, failed with `err`, or not needed):
    /// sends FIN `fin` to world rank `from` (and the acknowledgement of a synchronous
    /// send), and completes the request with `min(total, len)` bytes, truncated if the
    /// message was longer than the buffer.
    fn cm_rndv_done(&mut self, r: RndvRead, err: Option<ErrorClass>) {
        let RndvRead {
            req,
            me,
            len,
            total,
            got,
            from,
            fin,
        } = r;
        let rank = self.me;
        if let Some(cm) = self.cm.as_mut() {
            let sent = Envelope {
                ctx: FIN_CTX,
                src: rank as u32,
                tag: fin as i32,
            };
            if let (Ok(tag), true) = (cm.layout.send(&sent, false), from >= 0) {
                if let Err(e) = cm.signal(from as usize, tag) {
                    oxmpi_base::verbose!(
                        super::params::PML,
                        1,
                        "pml cm: rank {rank}: FIN to rank {from}: {e}"
                    );
                }
            }
        }
        if got.sync {
            self.cm_ack(&got.env, me, (from >= 0).then_some(from));
        }
        let truncated = total > len;
        if let Some(q) = self.reqs.get_mut(req) {
            q.status = Status {
                source: got.env.src as i32,
                tag: got.env.tag,
                error: err.or(truncated.then_some(ErrorClass::Truncate)),
                count_bytes: total.min(len),
                cancelled: false,
            };
        }
        self.finish(req);
    }

    /// Acknowledges a synchronous send received with envelope `env` (we are rank `me` in
    /// its communicator) to its sender, world rank `world`.
    fn cm_ack(&mut self, env: &Envelope, me: u32, world: Option<i32>) {
        let rank = self.me;
        let Some(cm) = self.cm.as_mut() else { return };
        let (Ok(tag), Some(w)) = (cm.layout.ack_send(env, me), world) else {
            oxmpi_base::verbose!(
                super::params::PML,
                1,
                "pml cm: rank {rank}: no acknowledgement for {env:?} (communicator gone)"
            );
            return;
        };
        if let Err(e) = cm.signal(w as usize, tag) {
            oxmpi_base::verbose!(
                super::params::PML,
                1,
                "pml cm: rank {rank}: acknowledgement to rank {w}: {e}"
            );
        }
    }

    /// Probes `(src, tag)` on context `ctx` (`FI_PEEK`; `claim`: `FI_CLAIM` too, for
    /// mprobe): the status of a matching message and, for a claim, its message id.
    pub(crate) fn cm_probe(
        &mut self,
        comm: CommId,
        src: i32,
        tag: i32,
        claim: bool,
    ) -> Result<Option<(MessageId, Status)>, Error> {
        let rank = self.me;
        let (ctx, me) = {
            let c = self.comm(comm)?;
            (c.ctx, c.rank as u32)
        };
        let (t, layout) = {
            let Some(cm) = self.cm.as_mut() else {
                return Err(Error::State("pml cm is not open".into()));
            };
            let p = pattern(&cm.layout, ctx, src, tag)?;
            // SAFETY: a peek places no data.
            let t = unsafe {
                cm.mtl.recv(
                    p.bits,
                    p.ignore,
                    std::ptr::null_mut(),
                    0,
                    Some(claim),
                    std::ptr::null_mut(),
                )
            }
            .map_err(|e| fabric(rank, e))?;
            cm.ops.insert(t, Pending::Peek(None));
            (t, cm.layout)
        };
        // The provider answers a peek from its own queues: wait for it here.
        let cq = loop {
            self.cm_progress();
            let Some(cm) = self.cm.as_mut() else {
                return Ok(None);
            };
            if let Some(Pending::Peek(Some(_))) = cm.ops.get(&t) {
                let Some(Pending::Peek(Some(cq))) = cm.ops.remove(&t) else {
                    unreachable!("just seen")
                };
                break cq;
            }
        };
        let (found, raw) = match cq {
            Cq::Ok { tag: bits, len } => {
                let d = layout.decode(bits);
                let s = Status {
                    source: d.env.src as i32,
                    tag: d.env.tag,
                    error: None,
                    count_bytes: len,
                    cancelled: false,
                };
                (s, bits)
            }
            Cq::Err { errno, .. } if errno == crate::btl::ofi::fi::FI_ENOMSG => return Ok(None),
            Cq::Err { errno, .. } => {
                return Err(fabric(rank, format!("fi_trecvmsg(FI_PEEK): error {errno}")))
            }
        };
        let id = self.next_req;
        self.next_req += 1;
        if claim {
            if let Some(cm) = self.cm.as_mut() {
                cm.claims.insert(id, (t, found, comm, me, raw));
            }
        }
        Ok(Some((MessageId(id), found)))
    }

    /// Receives a message mprobe claimed (`FI_CLAIM`); `None` if `m` is not one of ours.
    ///
    /// # Safety
    /// As for `State::imrecv`.
    pub(crate) unsafe fn cm_imrecv(
        &mut self,
        buf: *mut u8,
        len: usize,
        m: MessageId,
    ) -> Option<Result<ReqId, Error>> {
        let rank = self.me;
        let cm = self.cm.as_mut()?;
        let (t, status, comm, me, bits) = cm.claims.remove(&m.0)?;
        // A rendezvous request: its descriptor goes into a buffer of its own, the data is
        // read into the user's buffer once it is there.
        let claimed = (bits & cm.layout.rndv() != 0).then_some((bits, status.count_bytes));
        let req = self.reqs.insert(Req {
            state: ReqState::Offload { tok: Some(t) },
            status,
            detached: false,
            _owned: None,
        });
        // The peek gave the message's length: a message longer than the buffer is received
        // whole into a buffer of its length, and the completion copies what fits and
        // reports the truncation (`Cq::capped`), so the provider never truncates a claimed
        // receive (some would not report it, or would then deliver nothing more).
        let room = if claimed.is_some() {
            RNDV_DESC
        } else {
            status.count_bytes
        };
        let mut bounce = (claimed.is_some() || status.count_bytes > len).then(|| {
            let b = vec![0u8; room];
            (b, buf as usize)
        });
        let (at, room) = match bounce.as_mut() {
            Some((b, _)) => (b.as_mut_ptr(), b.len()),
            None => (buf, len),
        };
        // SAFETY: the caller keeps buf valid until the request completes; the bounce
        // buffer lives in the pending operation until then (its heap block stays put).
        match unsafe { cm.mtl.claimed_recv(t, at, room) } {
            Ok(t) => {
                cm.ops.insert(
                    t,
                    Pending::Recv {
                        req,
                        comm,
                        me,
                        len,
                        bounce,
                        _spill: None,
                        at: buf as usize,
                        claimed,
                    },
                );
                Some(Ok(ReqId(req)))
            }
            Err(e) => {
                self.reqs.remove(req);
                Some(Err(fabric(rank, e)))
            }
        }
    }

    /// Cancels receive `r` if it is the offload's and has not matched (`fi_cancel`);
    /// whether it is the offload's.
    pub(crate) fn cm_cancel(&mut self, r: ReqId) -> bool {
        let Some(cm) = self.cm.as_ref() else {
            return false;
        };
        match self.reqs.get(r.0).map(|q| &q.state) {
            Some(ReqState::Offload { tok: Some(t) }) => {
                if matches!(cm.ops.get(t), Some(Pending::Recv { .. })) {
                    cm.mtl.cancel(*t);
                }
                true
            }
            Some(ReqState::Offload { tok: None }) => true,
            _ => false,
        }
    }

    /// No send of the offload is in flight any more.
    pub(crate) fn cm_flushed(&self) -> bool {
        self.cm.as_ref().is_none_or(|c| c.sends == 0)
    }

    /// Finalize: exchanges goodbyes with every rank (so that what we injected has left
    /// and what peers injected to us has arrived), then releases the endpoint. Whether it
    /// is done.
    pub(crate) fn cm_closing(&mut self) -> bool {
        let (me, size) = (self.me, self.peers.len());
        let Some(cm) = self.cm.as_mut().filter(|c| !c.closed) else {
            return true;
        };
        if !cm.bye_started {
            cm.bye_started = true;
            for p in (0..size).filter(|&p| p != me as usize) {
                let dead = self.peers[p].dead;
                if dead {
                    continue;
                }
                let sent = Envelope {
                    ctx: BYE_CTX,
                    src: me as u32,
                    tag: 0,
                };
                let (Ok(pat), Ok(tag)) = (
                    cm.layout.recv(BYE_CTX, Some(p as u32), Some(0)),
                    cm.layout.send(&sent, false),
                ) else {
                    continue;
                };
                // SAFETY: goodbyes carry no data.
                if let Ok(t) = unsafe {
                    cm.mtl.recv(
                        pat.bits,
                        pat.ignore,
                        std::ptr::null_mut(),
                        0,
                        None,
                        std::ptr::null_mut(),
                    )
                } {
                    cm.ops.insert(t, Pending::Bye);
                    cm.sends += 1;
                }
                // SAFETY: as above.
                match unsafe { cm.mtl.send(p, tag, std::ptr::null(), 0, false, None) } {
                    Ok(Sent::Pending(t)) => {
                        cm.ops.insert(t, Pending::Send(None));
                        cm.sends += 1;
                    }
                    Ok(Sent::Injected) => {}
                    Err(e) => oxmpi_base::verbose!(
                        super::params::PML,
                        1,
                        "pml cm: rank {me}: goodbye to rank {p}: {e}"
                    ),
                }
            }
        }
        self.cm_progress();
        let Some(cm) = self.cm.as_mut() else {
            return true;
        };
        if cm.sends > 0 {
            return false;
        }
        cm.mtl.close();
        cm.closed = true;
        true
    }
}

/// The receive pattern of `(src, tag)` on context `ctx`, wildcards included.
fn pattern(layout: &Layout, ctx: u32, src: i32, tag: i32) -> Result<Pattern, Error> {
    layout
        .recv(
            ctx,
            (src != ANY_SOURCE).then_some(src as u32),
            (tag != ANY_TAG).then_some(tag),
        )
        .map_err(unfit)
}
