//! Receiving: posting (and the early take of unexpected data), the blocking receive's
//! direct path, delivering matched messages (eager copy, rendezvous clear-to-send), and
//! the inbound EAGER/RTS/DATA records.

use super::request::{msg_status, ReqState, Started};
use super::stats::CopyMech;
use super::State;
use crate::btl::sm::coop::{self, Mech};
use crate::btl::sm::one_way::{self, How};
use crate::btl::sm::params::SingleCopy;
use crate::btl::sm::two_way::Sample;
use crate::btl::BTL;
use crate::mem::copy;
use crate::pml::hdr::{
    Hdr, F_CMA, F_COLD, F_READ, F_RMA, F_SYNC, K_CTS, K_EAGER, K_FIN, K_NACK, K_RTS,
};
use crate::pml::matching::Envelope;
use crate::{CommId, Error, ErrorClass, ReqId, Status, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};

/// Who to notify when a buffered eager message is matched.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ack {
    None,
    Remote { peer: i32, sreq: u64 },
}

/// An unexpected (or matched-probed) message.
#[derive(Debug)]
pub(crate) enum Msg {
    Eager {
        data: Vec<u8>,
        ack: Ack,
    },
    Rts {
        peer: i32,
        total: u64,
        sreq: u64,
        addr: u64,
        cma: bool,
        /// The sender's link offers the buffer for a remote read ([`super::hdr::F_RMA`]).
        rma: bool,
        /// Sent so because our CPU is far from the sender's: read it alone
        /// ([`super::hdr::F_READ`]).
        read: bool,
    },
    /// A large or synchronous send to ourselves: the sender's buffer, copied at match time.
    Local {
        ptr: *const u8,
        len: usize,
        sreq: u64,
    },
}

impl Msg {
    pub(crate) fn len(&self) -> usize {
        match self {
            Msg::Eager { data, .. } => data.len(),
            Msg::Rts { total, .. } => *total as usize,
            Msg::Local { len, .. } => *len,
        }
    }
}

/// Where a blocking receive may take its message directly from (see [`State::recv_direct`]).
pub(crate) struct DirectRecv {
    /// World rank of the source.
    pub(crate) peer: usize,
    pub(crate) ctx: u32,
    /// The communicator (its index in the table).
    pub(crate) comm: usize,
    /// Source rank in the communicator.
    pub(crate) src: i32,
}

/// Outcome of one direct-receive poll.
pub(crate) enum Direct {
    /// The message was delivered.
    Done(Status),
    /// Nothing arrived and nothing else needs attention.
    Idle,
    /// Something else needs the general path (another record, queued output, another link).
    Busy,
}

/// Most buffers of consumed unexpected eager messages kept for reuse.
pub(crate) const EAGER_POOL: usize = 256;

impl State {
    /// Checks the arguments of a receive and posts it.
    ///
    /// # Safety
    /// As for [`Engine::irecv`](crate::Engine::irecv).
    #[inline]
    pub(crate) unsafe fn start_recv(
        &mut self,
        buf: *mut u8,
        len: usize,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Result<ReqId, Error> {
        // SAFETY: forwarded caller guarantee.
        match unsafe { self.start_recv_as(buf, len, src, tag, comm, false) }? {
            Started::Req(r) => Ok(r),
            Started::Done(s) => Ok(self.new_done(s)),
        }
    }

    /// [`State::start_recv`]; with `started`, a receive whose message arrived already as
    /// unexpected eager data takes it at once and returns [`Started::Done`] without
    /// creating a request (the caller keeps its status), and a receive that completed
    /// otherwise while starting (a message to ourselves, a failed peer) returns
    /// [`Started::Done`] with its request freed.
    ///
    /// # Safety
    /// As for [`Engine::irecv`](crate::Engine::irecv).
    #[inline(always)]
    pub(crate) unsafe fn start_recv_as(
        &mut self,
        buf: *mut u8,
        len: usize,
        src: i32,
        tag: i32,
        comm: CommId,
        started: bool,
    ) -> Result<Started, Error> {
        self.check_live()?;
        let (ctx, n, src_world) = {
            let c = self.comm(comm)?;
            let w = usize::try_from(src)
                .ok()
                .and_then(|d| c.remote.get(d).copied());
            (c.ctx, c.remote.len(), w)
        };
        self.check_revoked(ctx)?;
        if src == PROC_NULL {
            if started {
                return Ok(Started::Done(Status::PROC_NULL));
            }
            return Ok(Started::Req(self.new_done(Status::PROC_NULL)));
        }
        if src != ANY_SOURCE && src_world.is_none() {
            return Err(Error::arg(
                ErrorClass::Rank,
                format!("source rank {src} not in 0..{n}"),
            ));
        }
        if tag != ANY_TAG && !(0..=TAG_UB).contains(&tag) {
            return Err(Error::arg(
                ErrorClass::Tag,
                format!("invalid receive tag {tag}"),
            ));
        }
        if buf.is_null() && len > 0 {
            return Err(Error::arg(ErrorClass::Buffer, "null receive buffer"));
        }
        if self.cm.is_some() {
            let me = self.comm(comm)?.rank;
            // SAFETY: forwarded caller guarantee.
            return unsafe { self.cm_recv(buf, len, src, tag, comm, ctx, me) };
        }
        let peer = src_world;
        if let Some(p) = peer {
            if p != self.me && self.peers[p as usize].link.is_none() && !self.peers[p as usize].dead
            {
                return Err(Error::arg(
                    ErrorClass::Unsupported,
                    format!("no btl reaches world rank {p} (another node, or sm excluded)"),
                ));
            }
        }
        // With `started`, a message that arrived already is taken before any request exists;
        // an eager one completes the receive right here.
        let mut early = None;
        if started && self.matcher.has_unexpected() {
            match self.matcher.take_unexpected(ctx, src, tag) {
                Some((env, Msg::Eager { data, ack })) => {
                    let n = data.len().min(len);
                    // SAFETY: buf has len >= n writable bytes (caller); data has n readable
                    // bytes.
                    unsafe { copy(data.as_ptr(), buf, n) };
                    let status = Status {
                        error: (data.len() > len).then_some(ErrorClass::Truncate),
                        ..msg_status(env, n)
                    };
                    self.eager_recycle(data);
                    if let Ack::Remote { peer, sreq } = ack {
                        self.ctrl(peer, K_FIN, 0, sreq, 0);
                    }
                    return Ok(Started::Done(status));
                }
                other => early = other,
            }
        }
        let id = self.new_req(ReqState::Posted {
            buf,
            cap: len,
            ctx,
            src,
            peer,
        });
        let found = match early {
            // Arrived already (also from a peer that died since).
            Some(m) => Some(m),
            None => self.matcher.post(ctx, src, tag, id),
        };
        let settled = if let Some((env, msg)) = found {
            // Messages that arrived before a peer died are still delivered.
            if self.defers(&msg, msg.len().min(len)) {
                self.deferred.push((id, env, msg));
            } else {
                self.deliver(id, env, msg);
            }
            true
        } else if peer.is_some_and(|p| self.peers[p as usize].dead) {
            self.matcher.cancel(ctx, src, &id);
            self.fail(id, ErrorClass::ProcFailed);
            true
        } else {
            false
        };
        // (A receive that was queued cannot have completed yet.)
        if started && settled {
            if let Some(s) = self.take_done(ReqId(id)) {
                return Ok(Started::Done(s));
            }
        }
        Ok(Started::Req(ReqId(id)))
    }

    /// A nonblocking receive's common case in one pass: valid arguments, a specific source
    /// on another live rank with a link, no unexpected message queued on any context, no
    /// revoked context, neither `pml cm` nor fault tolerance. The arguments and the
    /// communicator are read once (the general path, [`State::direct_recv_target`] and then
    /// [`State::start_recv_as`], reads them twice). When nothing queued in the matcher
    /// involves the source, an eager message waiting at the front of its link is taken
    /// first ([`State::take_direct`]); otherwise, or when none is there, the receive is
    /// posted (no unexpected message can match it). `None`: not the common case, nothing
    /// changed, the caller takes the general path.
    ///
    /// # Safety
    /// As for [`Engine::irecv`](crate::Engine::irecv).
    #[inline(always)]
    pub(crate) unsafe fn irecv_fast(
        &mut self,
        buf: *mut u8,
        len: usize,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Option<Started> {
        if self.matcher.has_unexpected() || !self.revoked.is_empty() {
            return None;
        }
        let (ctx, peer) = self.linked_source(buf.is_null() && len > 0, src, tag, comm)?;
        if self.matcher.quiet_for(ctx, src) {
            let d = DirectRecv {
                peer: peer as usize,
                ctx,
                comm: comm.0 as usize,
                src,
            };
            // SAFETY: forwarded caller guarantee.
            if let Direct::Done(s) = unsafe { self.take_direct(&d, buf, len, tag) } {
                return Some(Started::Done(s));
            }
        }
        let id = self.new_req(ReqState::Posted {
            buf,
            cap: len,
            ctx,
            src,
            peer: Some(peer),
        });
        let found = self.matcher.post(ctx, src, tag, id);
        debug_assert!(
            found.is_none(),
            "a post matched although nothing was unexpected"
        );
        Some(Started::Req(ReqId(id)))
    }

    /// Whether a blocking receive `(src, tag)` on `comm` may use the direct path: valid
    /// arguments (anything invalid goes to the
    /// general path, which reports it), a specific source on another rank with a live link,
    /// and nothing queued in the matcher that
    /// involves that source on the communicator (so the receive would be the earliest posted
    /// one for whatever arrives from it, and nothing from it waits unexpected).
    #[inline]
    pub(crate) fn direct_recv_target(
        &self,
        null_buf: bool,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Option<DirectRecv> {
        let (ctx, peer) = self.linked_source(null_buf, src, tag, comm)?;
        self.matcher.quiet_for(ctx, src).then_some(DirectRecv {
            peer: peer as usize,
            comm: comm.0 as usize,
            ctx,
            src,
        })
    }

    /// The context of `comm` and the world rank of `src` when a receive `(src, tag)` may
    /// bypass the general path's checks: valid arguments (`null_buf`: a null buffer with
    /// a length), a specific source on another live rank reached by a link, neither `pml
    /// cm` nor fault tolerance, the engine not finalized. `None` otherwise (the general
    /// path reports what is wrong).
    #[inline(always)]
    fn linked_source(
        &self,
        null_buf: bool,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Option<(u32, i32)> {
        if self.finalized
            || self.ft
            || self.cm.is_some()
            || null_buf
            || src < 0
            || (tag != ANY_TAG && !(0..=TAG_UB).contains(&tag))
        {
            return None;
        }
        let c = self.comms.get(comm.0 as usize)?.as_ref()?;
        let (ctx, peer) = (c.ctx, *c.remote.get(src as usize)?);
        let p = self.peers.get(peer as usize)?;
        if peer == self.me || p.dead || p.link.is_none() {
            return None;
        }
        Some((ctx, peer))
    }

    /// One poll of the direct receive path: if the only thing to do is the next record from
    /// `d.peer` and it is an eager message for this receive, copy it into `buf` and consume
    /// it (acknowledging a synchronous send). Changes no state otherwise.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` bytes (or `len == 0`).
    #[inline]
    pub(crate) unsafe fn recv_direct(
        &mut self,
        d: &DirectRecv,
        buf: *mut u8,
        len: usize,
        tag: i32,
    ) -> Direct {
        for &q in &self.linked {
            let peer = &self.peers[q];
            if !peer.outq.is_empty()
                || (q != d.peer && peer.link.as_ref().is_some_and(|l| l.ready()))
            {
                return Direct::Busy;
            }
        }
        // SAFETY: forwarded caller guarantee.
        unsafe { self.take_direct(d, buf, len, tag) }
    }

    /// The core of [`State::recv_direct`] without its look at the other links: if the next
    /// record from `d.peer` is an eager message for this receive, copy it into `buf` and
    /// consume it (acknowledging a synchronous send). Changes no state otherwise. Also
    /// what a nonblocking receive tries first ([`Engine::irecv_started`](crate::Engine::irecv_started)):
    /// one poll, so nothing else waits on it. Matching stays in order because
    /// [`State::direct_recv_target`] admits only a receive that would be the earliest posted
    /// one for everything from its source, and the record at the front of the source's link
    /// is the earliest message from it that nobody has seen.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` bytes (or `len == 0`).
    ///
    /// The idle case (nothing at the front of the link: a blocking receive's polls) is
    /// this inlined check; [`State::take_ready`] does the rest.
    #[inline(always)]
    pub(crate) unsafe fn take_direct(
        &mut self,
        d: &DirectRecv,
        buf: *mut u8,
        len: usize,
        tag: i32,
    ) -> Direct {
        let Some(link) = self.peers[d.peer].link.as_ref() else {
            return Direct::Busy;
        };
        if !link.ready() {
            return Direct::Idle;
        }
        // SAFETY: forwarded caller guarantee.
        unsafe { self.take_ready(d, buf, len, tag) }
    }

    /// [`State::take_direct`] once the link from `d.peer` has a record at its front.
    ///
    /// # Safety
    /// As for [`State::take_direct`].
    #[inline(never)]
    unsafe fn take_ready(&mut self, d: &DirectRecv, buf: *mut u8, len: usize, tag: i32) -> Direct {
        let Some(link) = self.peers[d.peer].link.as_mut() else {
            return Direct::Busy;
        };
        // (the sm link's poll and release without the trait object's indirect calls, as in
        // `drain`)
        let polled = match link.as_sm() {
            Some(sm) => crate::btl::Link::poll(sm),
            None => link.poll(),
        };
        let (hdr, payload, plen) = match polled {
            Ok(Some(r)) => r,
            Ok(None) => return Direct::Idle,
            Err(_) => return Direct::Busy,
        };
        if hdr.kind != K_EAGER
            || hdr.ctx != d.ctx
            || hdr.src != d.src
            || (tag != ANY_TAG && hdr.tag & !crate::TAG_MARK != tag)
        {
            // Left in the link (not released): the general path handles it next (a
            // sleeper's descriptors do not show it).
            self.may_wake();
            return Direct::Busy;
        }
        let n = plen.min(len);
        // SAFETY: buf has len >= n writable bytes (caller); payload has plen >= n readable
        // bytes until the release below.
        unsafe { copy(payload, buf, n) };
        match link.as_sm() {
            Some(sm) => crate::btl::Link::release(sm),
            None => link.release(),
        }
        self.peers[d.peer].stats.received(plen);
        if self.comms_watched != 0 {
            self.comm_index_arrived(d.comm, d.src, plen);
        }
        if hdr.flags & F_SYNC != 0 {
            self.ctrl(d.peer as i32, K_FIN, 0, hdr.b, 0);
        }
        Direct::Done(Status {
            source: d.src,
            tag: hdr.tag,
            error: (plen > len).then_some(ErrorClass::Truncate),
            count_bytes: n,
            cancelled: false,
        })
    }

    /// Copies `len` bytes at `ptr` into a buffer for an unexpected eager message (a pooled
    /// one when there is one).
    ///
    /// # Safety
    /// `ptr` must be valid for reads of `len` bytes.
    #[inline]
    pub(crate) unsafe fn eager_copy(&mut self, ptr: *const u8, len: usize) -> Vec<u8> {
        if len == 0 {
            return Vec::new();
        }
        let mut v = self.eager_pool.pop().unwrap_or_default();
        // SAFETY: caller guarantee.
        v.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr, len) });
        v
    }

    /// Returns the buffer of a consumed unexpected eager message to the pool (at most
    /// [`EAGER_POOL`] buffers of at most the eager limit are kept).
    #[inline]
    pub(crate) fn eager_recycle(&mut self, mut v: Vec<u8>) {
        if v.capacity() != 0
            && v.capacity() <= self.eager_limit
            && self.eager_pool.len() < EAGER_POOL
        {
            v.clear();
            self.eager_pool.push(v);
        }
    }

    /// Whether a rendezvous message `msg` (`n` bytes to copy) that a receive matches as it
    /// is posted waits for the next progress pass before its copy is chosen
    /// ([`State::deliver_deferred`]): from 64 KiB, with the `auto` single copy, from a
    /// peer we send no rendezvous message to yet. A program that receives from and sends
    /// to the same peer posts its receives first (bibw's windows, the collectives'
    /// exchanges): where the peer's requests-to-send came before our receives (the peer
    /// began its window while we were still taking its last acknowledgement), each was
    /// chosen as it was posted, before our sends, as one-way traffic (the pipeline), and
    /// the window went through the pipeline while the peer read ours (bibw 1 MiB: 61 of a
    /// window's 64 messages). At the next pass our sends are under way, and the two-way
    /// choosers decide, as for the messages that came after our receives.
    fn defers(&self, msg: &Msg, n: usize) -> bool {
        let Msg::Rts { peer, cma, rma, .. } = *msg else {
            return false;
        };
        cma && !rma
            && self.cma
            && self.single_copy == SingleCopy::Auto
            && coop::size_class(n) > 0
            && !self.peers[peer as usize].dead
            && !self.sending_rndv_to(peer)
    }

    /// Delivers the messages [`State::defers`] held back (a progress pass).
    pub(crate) fn deliver_deferred(&mut self) {
        for (rid, env, msg) in std::mem::take(&mut self.deferred) {
            self.deliver(rid, env, msg);
        }
    }

    /// Hands a matched message to receive request `rid`.
    pub(crate) fn deliver(&mut self, rid: u64, env: Envelope, msg: Msg) {
        let Some(q) = self.reqs.get_mut(rid) else {
            return;
        };
        let ReqState::Posted { buf, cap, .. } = q.state else {
            return;
        };
        let total = msg.len();
        let n = total.min(cap);
        q.status = Status {
            source: env.src,
            tag: env.tag,
            error: (total > cap).then_some(ErrorClass::Truncate),
            count_bytes: n,
            cancelled: false,
        };
        match msg {
            Msg::Eager { data, ack } => {
                // SAFETY: buf has cap >= n writable bytes; data has n readable bytes.
                unsafe { copy(data.as_ptr(), buf, n) };
                self.eager_recycle(data);
                self.finish(rid);
                match ack {
                    Ack::None => {}
                    Ack::Remote { peer, sreq } => self.ctrl(peer, K_FIN, 0, sreq, 0),
                }
            }
            Msg::Local { ptr, sreq, .. } => {
                // SAFETY: the (local) sender's buffer is valid until its request completes.
                unsafe { copy(ptr, buf, n) };
                self.finish(rid);
                self.finish(sreq);
            }
            Msg::Rts {
                peer,
                sreq,
                addr,
                cma,
                rma,
                read,
                ..
            } => {
                if self.peers[peer as usize].dead {
                    // The data can no longer come.
                    self.fail(rid, ErrorClass::ProcFailed);
                    return;
                }
                if rma && n > 0 && self.rma_pull(rid, peer, sreq, buf, n) {
                    return;
                }
                // The clock read where `auto` chose the pipelined or the cooperative copy
                // (0: none): the transfer's measurement starts there.
                let mut since = 0;
                let p = peer as usize;
                let coop_ok = n >= self.coop_min && self.peers[p].coop_rx.is_some();
                let single_copy = self.single_copy;
                let auto = single_copy == SingleCopy::Auto && cma && self.cma && n > 0;
                // Both directions busy: the choice is between the pipelined copy and our
                // single copy alone (the sender's help would take its CPU from its own
                // receives), for every rendezvous size, by their rates in this traffic.
                let both_ways = auto && self.sending_rndv_to(peer);
                let how = match single_copy {
                    _ if !(cma && self.cma && n > 0) => Mech::Pipe,
                    // A message of eager size, sent so because the sender's CPU is far:
                    // the read costs the same near and far (`crate::btl::sm::place`).
                    _ if read && self.pull(rid, peer, sreq, buf, addr, n) => return,
                    SingleCopy::Cma if self.pull(rid, peer, sreq, buf, addr, n) => return,
                    SingleCopy::Coop if coop_ok => Mech::Coop,
                    SingleCopy::Auto if both_ways => {
                        let now = self.now_ns();
                        // Near streams are pipelined only once the peer was sensed near:
                        // a far pair believed near for want of eager messages to time
                        // paid the pipeline's first windows (bibw far 0.85-0.92x).
                        let far = !self.near_known(peer);
                        if self.peers[p].choose_two_way(p, n, now, far) == Mech::Coop
                            && self.pull(rid, peer, sreq, buf, addr, n)
                        {
                            oxmpi_base::verbose!(
                                BTL,
                                60,
                                "sm: received {n} B from rank {peer}: single copy by the \
                                 receiver alone (both directions busy)"
                            );
                            let end = self.now_ns();
                            let start = now.max(self.peers[p].last_end);
                            let s = Sample::Timed {
                                m: Mech::Coop,
                                n,
                                start,
                                end,
                            };
                            let sending = self.sending_rndv_to(peer);
                            self.peers[p].ended_two_way(p, s, sending);
                            return;
                        }
                        // (Also when the kernel refused the single copy: the pipelined
                        // transfer then ends the receive's part of the period.)
                        since = now;
                        Mech::Pipe
                    }
                    // Below 64 KiB a stream one way is judged by its periods, a
                    // ping-pong per message (`one_way`).
                    SingleCopy::Auto if coop_ok && one_way::by_period(n) => {
                        let now = self.now_ns();
                        match self.peers[p].choose_one_way(p, n, now) {
                            How::Read if self.pull(rid, peer, sreq, buf, addr, n) => {
                                oxmpi_base::verbose!(
                                    BTL,
                                    60,
                                    "sm: received {n} B from rank {peer}: single copy by the \
                                     receiver alone (a stream one way)"
                                );
                                let end = self.now_ns();
                                let sends = self.sending_rndv();
                                self.peers[p].ended_one_way(Mech::Coop, n, Some(now), end, sends);
                                return;
                            }
                            How::Read => {
                                // The kernel refused: no single copy from now on, and this
                                // transfer measures nothing.
                                self.peers[p].ended_one_way(Mech::Pipe, n, None, now, false);
                                Mech::Pipe
                            }
                            How::Coop => {
                                since = now;
                                Mech::Coop
                            }
                            How::Pipe => {
                                since = now;
                                Mech::Pipe
                            }
                        }
                    }
                    SingleCopy::Auto if coop_ok => {
                        let now = self.now_ns();
                        since = now;
                        self.peers[p].chooser[coop::size_class(n)].choose(now)
                    }
                    _ => Mech::Pipe,
                };
                if how == Mech::Coop {
                    if self.coop_recv(peer, sreq, addr, buf, n, rid, (since != 0).then_some(since))
                    {
                        self.copy_chosen(p, CopyMech::Coop, n);
                        return;
                    }
                    if self.one_way_chosen(n) {
                        // Refused by the kernel: the period's transfer measures nothing.
                        let now = self.now_ns();
                        self.peers[p].ended_one_way(Mech::Pipe, n, None, now, false);
                    }
                    since = 0;
                }
                if n == 0 {
                    self.finish(rid);
                } else {
                    self.copy_chosen(p, CopyMech::Pipelined, n);
                    self.reqs.get_mut(rid).expect("request exists").state = ReqState::Data {
                        buf,
                        want: n,
                        got: 0,
                        peer,
                        since,
                        both_ways,
                        cold: false,
                    };
                }
                self.ctrl(peer, K_CTS, n as u64, sreq, rid);
            }
        }
    }

    pub(crate) fn deliver_eager_direct(
        &mut self,
        rid: u64,
        env: Envelope,
        payload: *const u8,
        plen: usize,
        ack: Ack,
    ) {
        let Some(q) = self.reqs.get_mut(rid) else {
            return;
        };
        let ReqState::Posted { buf, cap, .. } = q.state else {
            return;
        };
        let n = plen.min(cap);
        // SAFETY: buf has cap >= n writable bytes; payload has plen >= n readable bytes.
        unsafe { copy(payload, buf, n) };
        q.status = Status {
            source: env.src,
            tag: env.tag,
            error: (plen > cap).then_some(ErrorClass::Truncate),
            count_bytes: n,
            cancelled: false,
        };
        // `State::finish` on the request in hand (one slot lookup instead of two).
        q.state = ReqState::Done;
        if q.detached {
            self.reqs.remove(rid);
        }
        if let Ack::Remote { peer, sreq } = ack {
            self.ctrl(peer, K_FIN, 0, sreq, 0);
        }
    }

    /// Counts `len` bytes from peer rank `src` that arrived on context `ctx` on its
    /// communicator, if some communicator's counters are read now (else one predictable
    /// branch).
    #[inline(always)]
    pub(crate) fn comm_arrived(&mut self, ctx: u32, src: i32, len: usize) {
        if self.comms_watched != 0 {
            self.comm_arrived_watched(ctx, src, len);
        }
    }

    /// [`State::comm_arrived`] while counters are read: one lookup in the context table.
    #[cold]
    fn comm_arrived_watched(&mut self, ctx: u32, src: i32, len: usize) {
        if let Some(&c) = self.ctx_comm.get(&ctx) {
            self.comm_index_arrived(c as usize, src, len);
        }
    }

    /// Counts `len` bytes from peer rank `src` that arrived on communicator `c` if a tools
    /// handle watches it.
    #[cold]
    fn comm_index_arrived(&mut self, c: usize, src: i32, len: usize) {
        if let Some(Some(c)) = self.comms.get_mut(c) {
            c.count_arrived(src, len);
        }
    }

    /// An EAGER or RTS record from `peer`: matched against the posted receives (an eager
    /// payload copied straight into the matching buffer), or queued as unexpected.
    #[inline]
    pub(crate) fn on_envelope(&mut self, peer: i32, hdr: Hdr, payload: *const u8, plen: usize) {
        if !self.revoked.is_empty() && self.revoked.contains(&hdr.ctx) {
            // Nobody receives on a revoked context: drop it, and refuse it to a sender
            // that waits for it (its send fails with `Revoked`).
            if hdr.kind == K_RTS || hdr.flags & F_SYNC != 0 {
                self.ctrl(peer, K_NACK, 0, hdr.b, 0);
            }
            return;
        }
        if !self.sleepers.is_empty() {
            self.arrived_on(hdr.ctx, hdr.tag);
        }
        let env = Envelope {
            ctx: hdr.ctx,
            src: hdr.src,
            tag: hdr.tag,
        };
        let total = if hdr.kind == K_EAGER {
            plen
        } else {
            hdr.a as usize
        };
        self.peers[peer as usize].stats.received(total);
        self.comm_arrived(hdr.ctx, hdr.src, total);
        let msg = if hdr.kind == K_EAGER {
            let ack = if hdr.flags & F_SYNC != 0 {
                Ack::Remote { peer, sreq: hdr.b }
            } else {
                Ack::None
            };
            if let Some(rid) = self.matcher.match_arrival(env) {
                self.deliver_eager_direct(rid, env, payload, plen, ack);
                return;
            }
            // SAFETY: payload has plen readable bytes in the ring record.
            let data = unsafe { self.eager_copy(payload, plen) };
            Msg::Eager { data, ack }
        } else {
            let msg = Msg::Rts {
                peer,
                total: hdr.a,
                sreq: hdr.b,
                addr: hdr.c,
                cma: hdr.flags & F_CMA != 0,
                rma: hdr.flags & F_RMA != 0,
                read: hdr.flags & F_READ != 0,
            };
            if let Some(rid) = self.matcher.match_arrival(env) {
                self.deliver(rid, env, msg);
                return;
            }
            msg
        };
        self.queue_unexpected(env, msg);
    }

    /// Queues a message that matched no posted receive (raising the tools interface's
    /// event when a tool listens).
    pub(crate) fn queue_unexpected(&mut self, env: Envelope, msg: Msg) {
        if oxmpi_base::events::wanted(oxmpi_base::events::Kind::Unexpected) {
            oxmpi_base::events::raise(&oxmpi_base::events::Event::Unexpected {
                source: env.src,
                tag: env.tag,
                context: env.ctx,
                bytes: msg.len() as u64,
            });
        }
        self.matcher.push_unexpected(env, msg);
    }

    /// A DATA record: `plen` bytes at offset `hdr.a` of receive request `hdr.c`.
    ///
    /// # Safety
    /// `payload` must be readable for `plen` bytes.
    #[inline]
    pub(crate) unsafe fn on_data(&mut self, peer: i32, hdr: Hdr, payload: *const u8, plen: usize) {
        let (rreq, off) = (hdr.c, hdr.a as usize);
        let Some(q) = self.reqs.get_mut(rreq) else {
            return;
        };
        let ReqState::Data {
            buf,
            want,
            got,
            since,
            both_ways,
            cold,
            ..
        } = &mut q.state
        else {
            return;
        };
        *cold |= hdr.flags & F_COLD != 0;
        let n = plen.min(want.saturating_sub(off));
        // SAFETY: off + n <= want <= the receive buffer's capacity (n == 0, and nothing
        // is written, for an out-of-range offset).
        unsafe { copy(payload, buf.wrapping_add(off), n) };
        *got += n;
        if *got >= *want {
            let (since, want, both_ways, cold) = (*since, *want, *both_ways, *cold);
            self.finish(rreq);
            let p = peer as usize;
            if since == 0 {
                return;
            }
            // Throughput of the pipelined copy, from the later of its clear-to-send and the
            // previous large transfer's end (not measured when a cooperative copy ran
            // meanwhile: it held up this one; one way, nor when it went through the bulk
            // buffer's untouched pages, `F_COLD`: the two-way choosers, which begin with the
            // single copy, keep measuring them).
            let now = self.now_ns();
            let overlapped = since < self.peers[p].last_coop_end;
            let start = since.max(self.peers[p].last_end);
            if !both_ways {
                let sends = self.sending_rndv();
                if self.one_way_chosen(want) {
                    let start = (!overlapped && !cold).then_some(start);
                    self.peers[p].ended_one_way(Mech::Pipe, want, start, now, sends);
                } else if !overlapped && !cold {
                    self.peers[p].measured(p, Mech::Pipe, want, (start, now), sends);
                }
                return;
            }
            let sending = self.sending_rndv_to(peer);
            let (m, n) = (Mech::Pipe, want);
            let s = if overlapped {
                Sample::Skipped { n, at: now }
            } else if sending {
                Sample::Timed {
                    m,
                    n,
                    start,
                    end: now,
                }
            } else {
                // Chosen while both directions were busy, but ours is done: the peer
                // finished our messages first and only then gave its CPU to this one, so
                // in a stream its time is a one-way rate, no measure of two-way traffic
                // (an exchange is measured as a whole instead: `TwoWay`).
                Sample::Unmeasured { m, n, at: now }
            };
            self.peers[p].ended_two_way(p, s, sending);
        }
    }
}
