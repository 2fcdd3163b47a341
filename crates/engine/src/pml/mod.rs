//! The point-to-point messaging layer (`pml ox`): the protocol over the transports' links.
//!
//! [`State`] (here) holds the communicators, requests, matching queues and peers, and runs
//! progress: draining each link's inbound records ([`State::handle`] dispatches them by
//! kind) and flushing each peer's queue of outbound records. The rest, by concern:
//!
//! * `hdr`: the record header and the record kinds and flags.
//! * `matching`: the sans-IO matcher (posted receives, unexpected messages).
//! * `request`: request states, the request table, completion.
//! * `comm`: the communicator table and argument checks.
//! * `peer`: per-peer state (link, outbound queue, liveness, single-copy choice).
//! * `send`: sends (the eager fast path into the link, RTS, sends to oneself, CTS handling).
//! * `recv`: receives (posting, the blocking receive's direct path, delivery, inbound
//!   EAGER/RTS/DATA).
//! * `single_copy`: CMA reads and the cooperative copy of `sm` peers.
//! * `sleep`: threads that sleep until traffic comes (their doorbells, the descriptors
//!   they wait on).
//! * `params`: `mpi_yield_when_idle` and the `pml` verbose stream.
//! * `stats`: the per-peer traffic counters and queue statistics the tools interface reads.

pub(crate) mod cm;
pub(crate) mod comm;
pub mod ctxid;
pub(crate) mod hdr;
pub mod matching;
pub(crate) mod params;
pub(crate) mod peer;
pub(crate) mod recv;
pub(crate) mod request;
pub(crate) mod send;
pub(crate) mod single_copy;
pub(crate) mod sleep;
pub mod stats;
#[cfg(test)]
mod tests;

use self::comm::Comm;
use self::peer::{Out, Peer};
use self::recv::{Ack, Msg};
use self::request::{msg_status, Req, ReqState, Slab};
use crate::btl::sm::params::{Placement, Settings, SingleCopy};
use crate::btl::sm::place;
use crate::btl::{PeerInfo, BTL};
use crate::pml::hdr::{
    Hdr, FIN_READ, F_COOP, HDR, K_BYE, K_CTS, K_DATA, K_EAGER, K_FIN, K_NACK, K_REVOKE, K_RTS,
};
use crate::pml::matching::{Envelope, HashMap, Matcher};
use crate::pml::params::PML;
use crate::sys;
use crate::{CommId, Error, ErrorClass, MessageId, ReqId, Status, ANY_SOURCE, ANY_TAG};

/// The protocol state of one engine (behind the engine's lock).
pub(crate) struct State {
    /// Our world rank.
    pub(crate) me: i32,
    /// The communicator table (`CommId` indexes it; freed slots are `None`).
    pub(crate) comms: Vec<Option<Comm>>,
    /// Communicator of each live context id.
    pub(crate) ctx_comm: HashMap<u32, u32>,
    /// Readers of communicators' counters, summed over the communicators
    /// ([`Comm::watched`]): while 0, the paths that move messages count nothing per
    /// communicator (one predictable branch).
    pub(crate) comms_watched: u32,
    /// Posted receives (request ids) and unexpected messages.
    pub(crate) matcher: Matcher<u64, Msg>,
    /// The requests.
    pub(crate) reqs: Slab,
    /// Next matched-probe message id.
    pub(crate) next_req: u64,
    /// Messages taken by `improbe`/`mprobe`, waiting for `imrecv`.
    pub(crate) messages: HashMap<u64, (Envelope, Msg)>,
    /// Buffers of consumed unexpected eager messages, reused for the next ones (no
    /// allocation per unexpected message).
    pub(crate) eager_pool: Vec<Vec<u8>>,
    /// Every world rank's peer state (ours included, without a link).
    pub(crate) peers: Vec<Peer>,
    /// Indices of the peers that have a link (the ones progress polls).
    pub(crate) linked: Vec<usize>,
    /// Largest eager message.
    pub(crate) eager_limit: usize,
    /// Largest eager message to a peer taken to be far (`usize::MAX`: placement
    /// `near`, or no single copy): larger ones up to `eager_limit` go by a rendezvous the
    /// receiver reads alone ([`State::read_instead`]).
    pub(crate) far_eager: usize,
    /// `btl_sm_placement`.
    pub(crate) placement: Placement,
    /// Smallest eager message to a peer taken to be far whose payload the link writes with
    /// non-temporal stores (`Link::stream_next`; `usize::MAX`: never).
    pub(crate) far_stream: usize,
    /// Smallest eager message whose copy into the link may be timed for the placement
    /// ([`crate::btl::sm::place`]; `usize::MAX`: no sensing).
    pub(crate) sense_min: usize,
    /// Set while a blocking send starts (`Engine::send`): its eager record may answer one
    /// just received (`Link::answer_next`).
    pub(crate) answering: bool,
    /// Rendezvous fragment size (each link may cap it further).
    pub(crate) frag: usize,
    /// Smallest fragment of a lone rendezvous message ([`lone_fragment`]; 0: not cut).
    pub(crate) frag_min: usize,
    /// Single-copy (CMA) reads from peers are allowed and have not failed.
    pub(crate) cma: bool,
    /// Single-copy (CMA) writes into peers have not failed.
    pub(crate) cma_push: bool,
    /// The configured large-message mechanism.
    pub(crate) single_copy: SingleCopy,
    /// Smallest message for the cooperative copy.
    pub(crate) coop_min: usize,
    /// Our rendezvous sends under way to all peers: the sum of every
    /// [`Peer::rndv_sends`], so that [`State::sending_rndv`] needs no walk of the peers.
    pub(crate) rndv_sends_all: u32,
    /// Bytes per chunk of the cooperative copy.
    pub(crate) coop_chunk: usize,
    /// Rendezvous messages matched by a receive as it was posted whose copy is chosen at
    /// the next progress pass instead ([`State::defers`]).
    pub(crate) deferred: Vec<(u64, Envelope, Msg)>,
    /// Time base of the transfer measurements.
    pub(crate) clock: std::time::Instant,
    /// `finalize` ran: communication calls fail.
    pub(crate) finalized: bool,
    /// Fault tolerance is on (`mpi_ft_enable`): no blocking shortcut polls a single link,
    /// so revoke notices from any peer are seen.
    pub(crate) ft: bool,
    /// Revoked context ids (ULFM): operations on them fail with `ErrorClass::Revoked`.
    pub(crate) revoked: std::collections::HashSet<u32>,
    /// Some peer failed (`declare_dead` ran): wildcard receives may be failure-pending.
    pub(crate) any_dead: bool,
    /// Per context id, the failed world ranks acknowledged on it (ULFM's
    /// `MPIX_Comm_failure_ack`): a wildcard receive there is no longer held up by them.
    pub(crate) acked: HashMap<u32, Vec<i32>>,
    /// Threads sleeping in `Engine::wait_message`: the context id and tag (or `ANY_TAG`)
    /// they wait for and their doorbell (`sleep`).
    pub(crate) sleepers: Vec<(u32, i32, std::os::fd::RawFd)>,
    /// Something a sleeper may wait for happened: ring them when the lock is released.
    pub(crate) wake: bool,
    /// Threads inside a loop that polls every transport (a blocking wait's
    /// `Engine::poll_until`, a [`crate::Serving`] guard): while there is one, it takes
    /// whatever arrives off the sockets and rings the sleepers it concerns, so a sleeper
    /// may sleep on its doorbell alone (`Engine::wait_message`'s hand-off).
    pub(crate) pollers: u32,
    /// Context ids and tags that a polling thread serves itself (`Engine::serving`, e.g.
    /// an origin serving its own window's requests while it waits for a reply): an
    /// envelope of one of them does not ring the sleepers, the server takes it.
    pub(crate) served: Vec<(u32, i32)>,
    /// `pml cm`: point-to-point goes through the provider's matching ([`cm`]).
    pub(crate) cm: Option<cm::Cm>,
}

// SAFETY: the raw pointers in State are user buffers (kept valid by the MPI contract until
// their request completes) and shared-memory rings; all access happens under the Engine lock.
unsafe impl Send for State {}

/// Whether an eager send of `len` bytes to a peer at `place` asks its link for non-temporal
/// stores (`Link::stream_next`): at least `far_stream` bytes ([`State::far_stream`]) to a peer
/// forced or sensed far.
#[inline]
pub(crate) fn streams(
    far_stream: usize,
    placement: Placement,
    place: &place::Place,
    len: usize,
) -> bool {
    len >= far_stream && (placement == Placement::Far || place.far())
}

impl State {
    /// The state of rank `me` of `size`, with no links yet, under the `sm` settings `sm`
    /// (eager limit, fragments, single copy).
    pub(crate) fn new(me: i32, size: i32, sm: &Settings) -> State {
        let world = Comm {
            ctx: 0,
            group: (0..size).collect(),
            remote: (0..size).collect(),
            rank: me,
            stats: Default::default(),
            watched: 0,
            peer_stats: Vec::new(),
            seq: 0,
        };
        let selfc = Comm {
            ctx: 1,
            group: vec![me],
            remote: vec![me],
            rank: 0,
            stats: Default::default(),
            watched: 0,
            peer_stats: Vec::new(),
            seq: 0,
        };
        State {
            me,
            comms: vec![Some(world), Some(selfc)],
            ctx_comm: HashMap::from_iter([(0, 0), (1, 1)]),
            comms_watched: 0,
            matcher: Matcher::new(),
            reqs: Slab::default(),
            next_req: 1,
            messages: HashMap::default(),
            eager_pool: Vec::new(),
            peers: (0..size.max(0)).map(|_| Peer::default()).collect(),
            linked: Vec::new(),
            eager_limit: Self::eager_cap(sm),
            far_eager: Self::far_cap(sm),
            placement: sm.placement,
            far_stream: Self::far_stream(sm),
            sense_min: Self::sense_min(sm),
            answering: false,
            frag: sm.frag,
            frag_min: sm.frag_min,
            cma: sm.single_copy != SingleCopy::None,
            cma_push: sm.single_copy != SingleCopy::None,
            single_copy: sm.single_copy,
            coop_min: sm.coop_min,
            rndv_sends_all: 0,
            coop_chunk: sm.coop_chunk,
            deferred: Vec::new(),
            clock: std::time::Instant::now(),
            finalized: false,
            ft: false,
            revoked: Default::default(),
            any_dead: false,
            acked: HashMap::default(),
            sleepers: Vec::new(),
            wake: false,
            pollers: 0,
            served: Vec::new(),
            cm: None,
        }
    }

    /// The eager limit of `sm`: every sm link has a ring of `sm.ring` bytes, so records up
    /// to its largest fit any link.
    fn eager_cap(sm: &Settings) -> usize {
        sm.eager_limit
            .min(crate::btl::sm::ring::max_record(sm.ring) - HDR)
    }

    /// The largest eager message to a far peer: `usize::MAX` (no rendezvous below the
    /// eager limit) for placement `near`, without single copy, or at or above the eager
    /// limit.
    fn far_cap(sm: &Settings) -> usize {
        if sm.placement == Placement::Near
            || sm.single_copy == SingleCopy::None
            || sm.far_eager >= Self::eager_cap(sm)
        {
            usize::MAX
        } else {
            sm.far_eager
        }
    }

    /// The smallest eager message written into a far peer's link with non-temporal stores:
    /// none (`usize::MAX`) for placement `near` or `btl_sm_far_stream_min` 0.
    fn far_stream(sm: &Settings) -> usize {
        if sm.placement == Placement::Near || sm.far_stream_min == 0 {
            usize::MAX
        } else {
            sm.far_stream_min
        }
    }

    /// The smallest eager message whose copy may be timed for the placement: none
    /// (`usize::MAX`) unless it is sensed (`auto`) and matters (a far limit).
    fn sense_min(sm: &Settings) -> usize {
        match sm.placement {
            Placement::Auto if Self::far_cap(sm) != usize::MAX => place::SENSE_MIN,
            _ => usize::MAX,
        }
    }

    /// Applies the values of the parameters declared `runtime` among `sm` (the eager limit
    /// and the cooperative copy's smallest message); the rest of `sm` was fixed at start.
    /// Messages already started keep the protocol they started with.
    pub(crate) fn apply_runtime(&mut self, sm: &Settings) {
        self.eager_limit = Self::eager_cap(sm);
        self.far_eager = Self::far_cap(sm);
        self.sense_min = Self::sense_min(sm);
        self.coop_min = sm.coop_min;
    }

    /// Takes the peers' links (and what they can do) from the wire-up.
    pub(crate) fn attach(&mut self, peers: Vec<PeerInfo>) {
        for (p, info) in peers.into_iter().enumerate() {
            Self::attach_one(&mut self.peers[p], info);
        }
        self.linked = (0..self.peers.len())
            .filter(|&p| self.peers[p].link.is_some())
            .collect();
    }

    /// Adds peers met after start-up (processes of other jobs), each with its link, after
    /// the world ranks and the peers added before: returns the index of each (what
    /// communicator groups hold for it, like a world rank).
    pub(crate) fn add_peers(&mut self, infos: Vec<PeerInfo>) -> Vec<i32> {
        infos
            .into_iter()
            .map(|info| {
                let p = self.peers.len();
                let mut peer = Peer::default();
                Self::attach_one(&mut peer, info);
                if peer.link.is_some() {
                    self.linked.push(p);
                }
                self.peers.push(peer);
                p as i32
            })
            .collect()
    }

    /// Takes one peer's process id, locality and link (with what the link can do).
    fn attach_one(peer: &mut Peer, info: PeerInfo) {
        peer.pid = info.pid;
        peer.local = info.local;
        if info.local {
            peer.pidfd = sys::pidfd_open(info.pid).ok();
        }
        if let Some(link) = info.link {
            let caps = link.caps();
            peer.single_copy = caps.single_copy;
            peer.rma_read = caps.rma_read;
            peer.buffered = caps.buffered;
            if let Some((rx, tx)) = caps.coop {
                peer.coop_rx = Some(rx);
                peer.coop_tx = Some(tx);
            }
            peer.link = Some(link);
        }
    }

    #[inline]
    pub(crate) fn check_live(&self) -> Result<(), Error> {
        if self.finalized {
            return Err(Error::State("engine finalized".into()));
        }
        Ok(())
    }

    /// Error for a blocking probe whose source died.
    pub(crate) fn probe_failure(&self, comm: CommId, src: i32) -> Option<Error> {
        let c = self.comm(comm).ok()?;
        let dead = |w: i32| self.peers[w as usize].dead;
        let failed = if src == ANY_SOURCE {
            c.remote.iter().find(|&&w| dead(w)).copied()
        } else {
            Some(c.remote[src as usize]).filter(|&w| dead(w))
        };
        failed.map(|w| Error::PeerFailed {
            peer: w,
            pid: self.peers[w as usize].pid,
        })
    }

    pub(crate) fn take_message(
        &mut self,
        comm: CommId,
        src: i32,
        tag: i32,
    ) -> Option<(MessageId, Status)> {
        if self.cm.is_some() {
            return self.cm_probe(comm, src, tag, true).ok().flatten();
        }
        let ctx = self.comm(comm).ok()?.ctx;
        let (env, msg) = self.matcher.take_unexpected(ctx, src, tag)?;
        let status = msg_status(env, msg.len());
        let id = self.next_req;
        self.next_req += 1;
        self.messages.insert(id, (env, msg));
        Some((MessageId(id), status))
    }

    /// Nanoseconds since the engine started (at least 1).
    pub(crate) fn now_ns(&self) -> u64 {
        (self.clock.elapsed().as_nanos() as u64).max(1)
    }

    /// `true` if local peer `p`'s process has ended.
    pub(crate) fn peer_exited(&self, p: usize) -> bool {
        let peer = &self.peers[p];
        match &peer.pidfd {
            Some(fd) => sys::pidfd_exited(fd),
            None => !sys::pid_alive(peer.pid),
        }
    }

    pub(crate) fn ctrl(&mut self, peer: i32, kind: u8, a: u64, b: u64, c: u64) {
        let hdr = Hdr {
            kind,
            a,
            b,
            c,
            ..Hdr::default()
        };
        self.ctrl_hdr(peer, hdr);
    }

    pub(crate) fn ctrl_hdr(&mut self, peer: i32, hdr: Hdr) {
        let p = peer as usize;
        if self.peers[p].dead {
            return;
        }
        self.peers[p].outq.push_back(Out::Ctrl(hdr));
        self.flush(p);
    }

    /// Writes queued records to `peer`'s link while there is room.
    pub(crate) fn flush(&mut self, p: usize) {
        let (frag, frag_min) = (self.frag, self.frag_min);
        loop {
            let peer = &mut self.peers[p];
            let Some(link) = peer.link.as_mut() else {
                return;
            };
            // Nothing queued behind the front record: a rendezvous message then travels
            // alone (ping-pong), and smaller fragments let both sides copy at once.
            let lone = peer.outq.len() == 1;
            let Some(item) = peer.outq.front_mut() else {
                return;
            };
            let mut done_req = None;
            // The front record is a rendezvous message's last DATA fragment.
            let mut rndv = false;
            let consumed = match item {
                // SAFETY: no payload.
                Out::Ctrl(hdr) => unsafe { link.try_send(hdr, std::ptr::null(), 0) },
                Out::Eager {
                    hdr,
                    ptr,
                    len,
                    complete,
                } => {
                    if streams(self.far_stream, self.placement, &peer.place, *len) {
                        link.stream_next();
                    }
                    // SAFETY: the send buffer is valid until its request completes.
                    let ok = unsafe { link.try_send(hdr, *ptr, *len) };
                    if ok {
                        done_req = *complete;
                    }
                    ok
                }
                Out::Data {
                    sreq,
                    rreq,
                    ptr,
                    off,
                    len,
                } => {
                    let mut k = frag.min(link.max_data());
                    if lone {
                        k = k.min(lone_fragment(*len, frag_min));
                    }
                    let k = k.min(*len - *off);
                    let hdr = Hdr {
                        kind: K_DATA,
                        a: *off as u64,
                        c: *rreq,
                        ..Hdr::default()
                    };
                    // SAFETY: `off + k <= len` bytes of the send buffer, valid until the
                    // send request completes.
                    if !unsafe { link.try_send(&hdr, ptr.wrapping_add(*off), k) } {
                        return;
                    }
                    *off += k;
                    if *off < *len {
                        continue;
                    }
                    done_req = Some(*sreq);
                    rndv = true;
                    true
                }
            };
            if !consumed {
                return;
            }
            peer.outq.pop_front();
            if let Some(id) = done_req {
                self.complete_send(p, id);
                if rndv {
                    self.rndv_send_ended(p);
                }
            }
        }
    }

    /// One progress pass: drain inbound links, flush outbound queues. Returns `false` if
    /// there was nothing to do (no record arrived, nothing queued): then no request
    /// changed state.
    #[inline]
    pub(crate) fn progress(&mut self) -> bool {
        let mut busy = self.cm.is_some() && self.cm_progress();
        if !self.deferred.is_empty() {
            self.deliver_deferred();
            busy = true;
        }
        // `declare_dead` (reached from drain, flush or settle) removes a peer from `linked`
        // while we walk it: the next peer then moves into slot `k`, so `k` only advances
        // past a peer that is still there.
        let mut k = 0;
        while let Some(&p) = self.linked.get(k) {
            let peer = &self.peers[p];
            let Some(link) = peer.link.as_ref() else {
                k += 1;
                continue;
            };
            let (ready, queued) = (link.ready(), !peer.outq.is_empty());
            if ready | queued {
                busy = true;
                if ready {
                    self.drain(p);
                }
                // Also what the records just drained queued (the DATA a clear-to-send
                // asks for goes out in this pass, not the next).
                if queued || !self.peers[p].outq.is_empty() {
                    self.flush(p);
                }
                if !self.peers[p].unflushed.is_empty() {
                    self.settle(p);
                }
            }
            if self.linked.get(k) == Some(&p) {
                k += 1;
            }
        }
        busy
    }

    pub(crate) fn drain(&mut self, p: usize) {
        for _ in 0..64 {
            let Some(link) = self.peers[p].link.as_mut() else {
                return;
            };
            // (the sm link's poll and release without the trait object's indirect calls)
            let polled = match link.as_sm() {
                Some(sm) => crate::btl::Link::poll(sm),
                None => link.poll(),
            };
            let (hdr, payload, len) = match polled {
                Ok(Some(r)) => r,
                Ok(None) => return,
                Err(e) if e.is_peer_gone() => {
                    // A peer process that ends closes its sockets (or resets them, if our
                    // data was still unread): the same event as the sm peers' pidfd
                    // reporting an exit.
                    oxmpi_base::verbose!(
                        BTL,
                        10,
                        "{} link from rank {p}: {e}; treating the peer as failed",
                        link.name()
                    );
                    self.declare_dead(p);
                    return;
                }
                Err(e) => {
                    oxmpi_base::output::error(format_args!(
                        "{} link from rank {p}: {e}; treating the peer as failed",
                        link.name()
                    ));
                    self.declare_dead(p);
                    return;
                }
            };
            self.handle(p as i32, hdr, payload, len);
            if let Some(link) = self.peers[p].link.as_mut() {
                match link.as_sm() {
                    Some(sm) => crate::btl::Link::release(sm),
                    None => link.release(),
                }
            }
        }
        // Records may be left in the link's buffers, where a sleeper's descriptors do
        // not show them.
        self.may_wake();
    }

    /// Acts on one record from `peer` (its payload: `plen` bytes at `payload`, readable
    /// until the record is released): unknown kinds and records for no request are ignored.
    pub(crate) fn handle(&mut self, peer: i32, hdr: Hdr, payload: *const u8, plen: usize) {
        match hdr.kind {
            K_EAGER | K_RTS => self.on_envelope(peer, hdr, payload, plen),
            K_CTS => {
                self.peers[peer as usize].reads_ours = false;
                self.peers[peer as usize].two_way.answered(false);
                if hdr.flags & F_COOP != 0 {
                    self.coop_send(peer, hdr);
                } else {
                    self.on_cts(peer, hdr);
                }
            }
            // SAFETY: the link keeps the payload readable until the record is released.
            K_DATA => unsafe { self.on_data(peer, hdr, payload, plen) },
            K_FIN => {
                if hdr.a == FIN_READ {
                    self.peers[peer as usize].reads_ours = true;
                    self.peers[peer as usize].two_way.answered(true);
                }
                self.finish(hdr.b);
                self.rndv_send_ended(peer as usize);
            }
            K_REVOKE => {
                let ctx = hdr.a as u32;
                if self.revoke_ctx(ctx) {
                    // A revoke must reach every member even if the revoker dies part-way
                    // through its notices: whoever learns of it first passes it on (a
                    // member that knows already ignores it).
                    self.send_revoke(ctx, Some(peer));
                }
            }
            K_NACK => self.on_nack(hdr.b),
            K_BYE => self.peers[peer as usize].bye = true,
            _ => {}
        }
    }

    /// Checks whether peers are still alive; fails everything that depends on a dead one.
    pub(crate) fn check_peers(&mut self) {
        for p in 0..self.peers.len() {
            let peer = &self.peers[p];
            if peer.dead || p as i32 == self.me || !peer.local {
                continue;
            }
            if self.peer_exited(p) {
                // Take what it sent before dying.
                if self.peers[p].link.is_some() {
                    self.drain(p);
                }
                self.declare_dead(p);
            }
        }
    }

    pub(crate) fn declare_dead(&mut self, p: usize) {
        if self.peers[p].dead {
            return;
        }
        oxmpi_base::verbose!(
            PML,
            10,
            "peer rank {p} (pid {}) is gone; failing its operations",
            self.peers[p].pid
        );
        self.peers[p].dead = true;
        self.any_dead = true;
        // Sleepers wake to see the failure (and stop waiting on its closed socket).
        self.may_wake();
        oxmpi_base::events::raise(&oxmpi_base::events::Event::ProcFailed { rank: p as i32 });
        self.peers[p].outq.clear();
        self.peers[p].unflushed.clear();
        // Nothing more comes from it: stop polling its link (a closed socket would report
        // its end again on every pass).
        // The link may release what its transport holds for the peer first.
        if let Some(mut l) = self.peers[p].link.take() {
            l.abandon();
        }
        // Its control areas lived in the link's mappings.
        self.peers[p].coop_rx = None;
        self.peers[p].coop_tx = None;
        self.linked.retain(|&q| q != p);
        let pw = p as i32;
        let reqs = &self.reqs;
        // Under fault tolerance a wildcard receive stays posted: it is failure-pending
        // ([`State::failure_pending`]) until the failure is acknowledged, then goes on.
        let any = !self.ft;
        let posted = self.matcher.remove_posted_where(|_, _, rid| {
            matches!(reqs.get(*rid), Some(Req { state: ReqState::Posted { peer, .. }, .. }) if peer.map_or(any, |w| w == pw))
        });
        let mut failed: Vec<u64> = posted;
        for (id, q) in self.reqs.iter() {
            match q.state {
                ReqState::Send { peer, .. } | ReqState::Data { peer, .. } if peer == pw => {
                    failed.push(id)
                }
                _ => {}
            }
        }
        for id in failed {
            self.fail(id, ErrorClass::ProcFailed);
        }
    }

    /// Revokes context `ctx` (ULFM): its posted receives fail with `ErrorClass::Revoked`
    /// and later operations on it are refused. Messages waiting unexpected on it are
    /// dropped, and their senders, if they wait (a request-to-send, a synchronous send),
    /// are refused with a NACK, so their sends fail too; a send of ours whose transfer has
    /// started (matched before the revoke) completes. Returns whether `ctx` was not
    /// revoked before.
    pub(crate) fn revoke_ctx(&mut self, ctx: u32) -> bool {
        if !self.revoked.insert(ctx) {
            return false;
        }
        oxmpi_base::verbose!(PML, 10, "context {ctx} revoked");
        let reqs = &self.reqs;
        let posted = self.matcher.remove_posted_where(|_, _, rid| {
            matches!(reqs.get(*rid), Some(Req { state: ReqState::Posted { ctx: c, .. }, .. }) if *c == ctx)
        });
        for id in posted {
            self.fail(id, ErrorClass::Revoked);
        }
        while let Some((_, msg)) = self.matcher.take_unexpected(ctx, ANY_SOURCE, ANY_TAG) {
            self.refuse(msg);
        }
        true
    }

    /// Tells every other member of context `ctx`'s communicator (both groups of an
    /// intercommunicator) but `skip` (who told us) that it is revoked.
    pub(crate) fn send_revoke(&mut self, ctx: u32, skip: Option<i32>) {
        let Some(c) = self
            .ctx_comm
            .get(&ctx)
            .and_then(|&c| self.comms.get(c as usize))
            .and_then(Option::as_ref)
        else {
            return;
        };
        let mut members: Vec<i32> = c.group.iter().chain(&c.remote).copied().collect();
        members.sort_unstable();
        members.dedup();
        for w in members {
            if w != self.me && Some(w) != skip {
                self.ctrl(w, K_REVOKE, u64::from(ctx), 0, 0);
            }
        }
    }

    /// Drops a message nobody will receive (its context is revoked), failing its sender's
    /// request if the sender waits for it.
    pub(crate) fn refuse(&mut self, msg: Msg) {
        match msg {
            Msg::Rts { peer, sreq, .. }
            | Msg::Eager {
                ack: Ack::Remote { peer, sreq },
                ..
            } => self.ctrl(peer, K_NACK, 0, sreq, 0),
            Msg::Eager { .. } => {}
            Msg::Local { sreq, .. } => self.fail(sreq, ErrorClass::Revoked),
        }
    }

    /// A NACK: the receiver refused our send request `sreq` (its context is revoked
    /// there); nothing of it was transferred.
    pub(crate) fn on_nack(&mut self, sreq: u64) {
        if let Some(Req {
            state: ReqState::Send { .. },
            ..
        }) = self.reqs.get(sreq)
        {
            self.fail(sreq, ErrorClass::Revoked);
        }
    }

    /// Whether request `id` is a wildcard receive, not matched yet, on a communicator with
    /// a failed member whose failure was not acknowledged there (ULFM: the receive is then
    /// failure-pending; only under fault tolerance).
    pub(crate) fn failure_pending(&self, id: u64) -> bool {
        if !self.any_dead || !self.ft {
            return false;
        }
        let Some(Req {
            state: ReqState::Posted {
                ctx, peer: None, ..
            },
            ..
        }) = self.reqs.get(id)
        else {
            return false;
        };
        let Some(c) = self
            .ctx_comm
            .get(ctx)
            .and_then(|&c| self.comms.get(c as usize))
        else {
            return false;
        };
        let acked = self.acked.get(ctx).map_or(&[][..], Vec::as_slice);
        c.as_ref().is_some_and(|c| {
            c.remote
                .iter()
                .any(|&w| self.peers[w as usize].dead && !acked.contains(&w))
        })
    }

    /// The status of request `r` if it is complete (freed then), or a
    /// `ProcFailedPending` status (the request stays) if it is failure-pending
    /// ([`State::failure_pending`]): the completion of nonblocking requests.
    #[inline]
    pub(crate) fn take_done_or_pending(&mut self, r: ReqId) -> Option<Status> {
        self.take_done(r).or_else(|| {
            self.failure_pending(r.0)
                .then(|| self.request_status(r))
                .flatten()
        })
    }

    /// The status of request `r` if it is complete (freed then); a failure-pending
    /// receive is cancelled and completes with `ProcFailed`: the completion of blocking
    /// receives.
    pub(crate) fn take_done_or_failed(&mut self, r: ReqId) -> Option<Status> {
        if let Some(s) = self.take_done(r) {
            return Some(s);
        }
        if !self.failure_pending(r.0) {
            return None;
        }
        if let Some(Req {
            state: ReqState::Posted { ctx, src, .. },
            ..
        }) = self.reqs.get(r.0)
        {
            let (ctx, src) = (*ctx, *src);
            self.matcher.cancel(ctx, src, &r.0);
        }
        self.fail(r.0, ErrorClass::ProcFailed);
        self.take_done(r)
    }

    /// `Err(Revoked)` if context `ctx` is revoked.
    #[inline]
    pub(crate) fn check_revoked(&self, ctx: u32) -> Result<(), Error> {
        if !self.revoked.is_empty() && self.revoked.contains(&ctx) {
            return Err(Error::arg(
                ErrorClass::Revoked,
                format!("the communicator (context {ctx}) was revoked"),
            ));
        }
        Ok(())
    }

    /// The process id of world rank `r` if it runs on our node (see `Engine::node_pid`).
    pub(crate) fn node_pid(&self, r: i32) -> Option<i32> {
        let p = self.peers.get(usize::try_from(r).ok()?)?;
        p.local.then_some(p.pid)
    }

    /// The status of a message a receive `(src, tag)` on `comm` would match now.
    pub(crate) fn probe(
        &mut self,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<Option<Status>, Error> {
        if self.cm.is_some() {
            return Ok(self.cm_probe(comm, src, tag, false)?.map(|(_, s)| s));
        }
        let ctx = self.comm(comm)?.ctx;
        Ok(self
            .matcher
            .probe(ctx, src, tag)
            .map(|(env, m)| msg_status(env, m.len())))
    }

    /// `MPI_Imrecv` (see `Engine::imrecv`).
    ///
    /// # Safety
    /// As for `Engine::irecv`.
    pub(crate) unsafe fn imrecv(
        &mut self,
        buf: *mut u8,
        len: usize,
        m: MessageId,
    ) -> Result<ReqId, Error> {
        if m == MessageId::NO_PROC {
            return Ok(self.new_done(Status::PROC_NULL));
        }
        if buf.is_null() && len > 0 {
            return Err(Error::arg(ErrorClass::Buffer, "null receive buffer"));
        }
        // SAFETY: forwarded caller guarantee.
        if let Some(r) = unsafe { self.cm_imrecv(buf, len, m) } {
            return r;
        }
        let (env, msg) = self
            .messages
            .remove(&m.0)
            .ok_or_else(|| Error::arg(ErrorClass::Request, format!("unknown message {}", m.0)))?;
        let id = self.new_req(ReqState::Posted {
            buf,
            cap: len,
            ctx: env.ctx,
            src: env.src,
            peer: None,
        });
        self.deliver(id, env, msg);
        Ok(ReqId(id))
    }

    /// Cancels a receive that has not matched yet (see `Engine::cancel`).
    pub(crate) fn cancel(&mut self, r: ReqId) {
        if self.cm_cancel(r) {
            return;
        }
        let Some(q) = self.reqs.get(r.0) else { return };
        if let ReqState::Posted { ctx, src, .. } = q.state {
            if self.matcher.cancel(ctx, src, &r.0) {
                let q = self.reqs.get_mut(r.0).expect("request exists");
                q.status.cancelled = true;
                self.finish(r.0);
            }
        }
    }

    /// Tells every link that the application frees `len` bytes at `addr`.
    pub(crate) fn memory_freed(&mut self, addr: usize, len: usize) {
        for l in self.peers.iter_mut().filter_map(|p| p.link.as_mut()) {
            l.memory_freed(addr, len);
        }
    }

    /// Whether every live link has finished closing ([`crate::btl::Link::closing`]);
    /// finalize waits for it after [`State::flushed`].
    pub(crate) fn links_closed(&mut self) -> bool {
        let mut done = self.cm_closing();
        for p in &mut self.peers {
            if let Some(l) = p.link.as_mut().filter(|_| !p.dead) {
                done &= l.closing();
            }
        }
        done
    }

    /// Finalize under fault tolerance: tells every other live world rank (the first
    /// `world` peers) that we finalize (`K_BYE`).
    pub(crate) fn say_bye(&mut self, world: usize) {
        for w in 0..world.min(self.peers.len()) {
            if w as i32 != self.me {
                self.ctrl(w as i32, K_BYE, 0, 0, 0);
            }
        }
    }

    /// Whether our goodbyes are out ([`State::flushed`]) and every other world rank (the
    /// first `world` peers) said goodbye (`State::say_bye`) or failed; a rank no link
    /// reaches cannot say it and is not waited for.
    pub(crate) fn finalize_byes_in(&self, world: usize) -> bool {
        let byes = self
            .peers
            .iter()
            .take(world)
            .enumerate()
            .all(|(w, p)| w as i32 == self.me || p.bye || p.dead || p.link.is_none());
        byes && self.flushed()
    }

    /// Whether nothing waits to go out any more: no queued record or byte a link still
    /// buffers (to a live peer), no detached request in progress (buffered sends waiting
    /// for their clear-to-send).
    pub(crate) fn flushed(&self) -> bool {
        // Also what a link still buffers (tcp: bytes the socket did not take yet).
        let queued = self.peers.iter().any(|p| {
            !p.dead && (!p.outq.is_empty() || p.link.as_ref().is_some_and(|l| l.sending()))
        });
        let detached = self
            .reqs
            .values()
            .any(|q| q.detached && !matches!(q.state, ReqState::Done));
        !queued && !detached && self.cm_flushed()
    }
}

/// Pieces a lone rendezvous message is cut into (see [`lone_fragment`]).
const LONE_PIECES: usize = 4;

/// Largest fragment of a rendezvous message of `len` bytes that travels alone: a quarter
/// of it, rounded up to 4 KiB, but at least `min` (`btl_sm_fragment_min_size`; 0: no
/// limit below the fragment size, `usize::MAX`). With nothing queued behind it nothing
/// else overlaps its copies, so without this the receiver would start copying only after
/// the sender had copied a whole fragment (of a 128 KiB message: all of it).
pub(crate) fn lone_fragment(len: usize, min: usize) -> usize {
    if min == 0 {
        return usize::MAX;
    }
    len.div_ceil(LONE_PIECES).next_multiple_of(4096).max(min)
}
