//! Sending: argument checks, the eager fast path straight into the link, queued eager
//! records and request-to-send, sends to oneself, and the clear-to-send that starts the
//! DATA fragments.

use super::peer::Out;
use super::recv::{Ack, Msg};
use super::request::{empty_status, ReqState, Started};
use super::{streams, State};
use crate::btl::sm::params::Placement;
use crate::btl::sm::place::Place;
use crate::btl::BTL;
use crate::pml::hdr::{Hdr, F_CMA, F_READ, F_RMA, F_SYNC, K_EAGER, K_RTS};
use crate::pml::matching::Envelope;
use crate::{CommId, Error, ErrorClass, ReqId, SendMode, Status, PROC_NULL, TAG_UB};

impl State {
    /// Checks the arguments of a send and starts it; `mark` is 0, or
    /// [`TAG_MARK`](crate::TAG_MARK) for a marked message (`tag` checked alone, sent as
    /// `tag | mark`).
    ///
    /// # Safety
    /// As for [`Engine::isend`](crate::Engine::isend).
    // Inlined into its few callers (`Engine::isend`, `isend_started`, `send`): with the
    // eager fast path of `post_send` this makes a small send one function from the engine's
    // entry point to the link (each call boundary cost about 25 instructions of the ~500 of
    // an `MPI_Isend`).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn start_send(
        &mut self,
        buf: *const u8,
        len: usize,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
        mark: i32,
    ) -> Result<Started, Error> {
        self.check_live()?;
        let (ctx, my, n, dest_world) = {
            let c = self.comm(comm)?;
            let w = usize::try_from(dest)
                .ok()
                .and_then(|d| c.remote.get(d).copied());
            (c.ctx, c.rank, c.remote.len(), w)
        };
        self.check_revoked(ctx)?;
        if dest == PROC_NULL {
            return Ok(Started::Done(Status::PROC_NULL));
        }
        let Some(dest_world) = dest_world else {
            return Err(Error::arg(
                ErrorClass::Rank,
                format!("destination rank {dest} not in 0..{n}"),
            ));
        };
        if !(0..=TAG_UB).contains(&tag) {
            return Err(Error::arg(
                ErrorClass::Tag,
                format!("invalid send tag {tag}"),
            ));
        }
        if buf.is_null() && len > 0 {
            return Err(Error::arg(ErrorClass::Buffer, "null send buffer"));
        }
        if self.comms_watched != 0 {
            self.comm_sent(comm, dest, len);
        }
        let env = Envelope {
            ctx,
            src: my,
            tag: tag | mark,
        };
        if self.cm.is_some() {
            // The mark travels in the offload's tag too (`mtl::ofi::tag`, `Layout::mark`).
            // SAFETY: forwarded caller guarantee.
            return unsafe { self.cm_send(env, dest, dest_world, buf, len, mode) };
        }
        // SAFETY: forwarded caller guarantee.
        unsafe { self.post_send(env, dest_world, buf, len, mode) }
    }

    /// Counts a message of `len` bytes sent to rank `dest` of `comm` if its counters are
    /// read now.
    #[cold]
    fn comm_sent(&mut self, comm: CommId, dest: i32, len: usize) {
        if let Some(Some(c)) = self.comms.get_mut(comm.0 as usize) {
            c.count_sent(dest, len);
        }
    }

    /// # Safety
    /// `buf` valid for `len` reads until completion (copied at once for Buffered).
    #[inline(always)]
    pub(crate) unsafe fn post_send(
        &mut self,
        env: Envelope,
        dest: i32,
        buf: *const u8,
        len: usize,
        mode: SendMode,
    ) -> Result<Started, Error> {
        // SAFETY: forwarded caller guarantee.
        if let Some(s) = unsafe { self.eager_now(env, dest, buf, len, mode) } {
            return Ok(s);
        }
        // SAFETY: forwarded caller guarantee.
        unsafe { self.post_send_queued(env, dest, buf, len, mode) }
    }

    /// The fast path of [`State::post_send`]: a standard or ready send that fits eagerly to
    /// a live peer with nothing queued goes straight into the link and completes; its
    /// request is born done (the receiver ignores the sender request id of a
    /// non-synchronous eager record). `None`: nothing was sent, take the general path.
    ///
    /// # Safety
    /// As for [`State::post_send`].
    #[inline(always)]
    unsafe fn eager_now(
        &mut self,
        env: Envelope,
        dest: i32,
        buf: *const u8,
        len: usize,
        mode: SendMode,
    ) -> Option<Started> {
        if matches!(mode, SendMode::Standard | SendMode::Ready)
            && dest != self.me
            && len <= self.eager_limit
            && (len <= self.far_eager || !self.far_to(dest))
        {
            let peer = &mut self.peers[dest as usize];
            if let (false, true, Some(link)) = (peer.dead, peer.outq.is_empty(), peer.link.as_mut())
            {
                let hdr = Hdr {
                    kind: K_EAGER,
                    ctx: env.ctx,
                    src: env.src,
                    tag: env.tag,
                    ..Hdr::default()
                };
                if self.answering {
                    link.answer_next();
                }
                let timed =
                    len >= self.sense_min && peer.single_copy && peer.place.wants(len, false);
                let t0 = if timed {
                    self.clock.elapsed()
                } else {
                    if streams(self.far_stream, self.placement, &peer.place, len) {
                        link.stream_next();
                    }
                    Default::default()
                };
                // SAFETY: the caller guarantees `len` readable bytes at `buf`; the data is
                // copied into the ring before try_send returns.
                if len <= link.max_payload() && unsafe { link.try_send(&hdr, buf, len) } {
                    if timed {
                        let ns = (self.clock.elapsed() - t0).as_nanos() as u64;
                        let limits = (self.far_eager, self.eager_limit);
                        sensed(&mut peer.place, dest, len, ns, limits);
                    }
                    peer.stats.sent(len, true);
                    oxmpi_base::verbose!(
                        BTL,
                        60,
                        "{}: send {len} B to rank {dest}: eager",
                        link.name()
                    );
                    if !peer.buffered || !link.sending() {
                        return Some(Started::Done(empty_status()));
                    }
                    // Part of it still sits in the link's buffer: complete once it is out.
                    let id = self.new_req(ReqState::Send {
                        peer: dest,
                        ptr: buf,
                        len,
                        rndv: false,
                    });
                    self.peers[dest as usize].unflushed.push(id);
                    return Some(Started::Req(ReqId(id)));
                }
            }
        }
        None
    }

    /// [`State::post_send`] when the message did not go straight into the link: a request,
    /// then the send to oneself, the queued eager record or the request-to-send.
    ///
    /// # Safety
    /// As for [`State::post_send`].
    #[inline(never)]
    unsafe fn post_send_queued(
        &mut self,
        env: Envelope,
        dest: i32,
        buf: *const u8,
        len: usize,
        mode: SendMode,
    ) -> Result<Started, Error> {
        let (user_id, id, ptr) = if mode == SendMode::Buffered {
            // SAFETY: caller guarantees `len` readable bytes at `buf` (or len == 0).
            let owned = if len > 0 {
                // SAFETY: as said above.
                unsafe { std::slice::from_raw_parts(buf, len) }.to_vec()
            } else {
                Vec::new()
            };
            let ptr = owned.as_ptr();
            let id = self.new_req(ReqState::Done);
            let q = self.reqs.get_mut(id).expect("just inserted");
            q.detached = true;
            q._owned = Some(owned);
            (Started::Done(empty_status()), id, ptr)
        } else {
            let id = self.new_req(ReqState::Done);
            (Started::Req(ReqId(id)), id, buf)
        };
        let sync = mode == SendMode::Sync;
        // A message of eager size to a far peer may go by a rendezvous it reads alone.
        let read = len > self.far_eager && len <= self.eager_limit && self.read_instead(dest);
        let eager_limit = if read {
            self.far_eager
        } else {
            self.eager_limit
        };
        let rndv = len > eager_limit;
        self.reqs.get_mut(id).expect("request exists").state = ReqState::Send {
            peer: dest,
            ptr,
            len,
            rndv,
        };
        self.peers[dest as usize].rndv_sends += u32::from(rndv);
        self.rndv_sends_all += u32::from(rndv);
        if dest == self.me {
            let eager = len <= self.eager_limit && !sync;
            self.peers[dest as usize].stats.sent(len, eager);
            self.peers[dest as usize].stats.received(len);
            self.comm_arrived(env.ctx, env.src, len);
            self.send_self(env, id, ptr, len, sync);
            return Ok(user_id);
        }
        let peer = &self.peers[dest as usize];
        if peer.dead {
            self.fail(id, ErrorClass::ProcFailed);
            return Ok(user_id);
        }
        let single_copy = self.cma && peer.single_copy;
        let Some(max_payload) = peer.link.as_ref().map(|l| l.max_payload()) else {
            if let Some(q) = self.reqs.remove(id) {
                self.left_send(&q.state);
            }
            return Err(Error::arg(
                ErrorClass::Unsupported,
                format!(
                    "no btl reaches world rank {dest} (another node without tcp, or sm \
                     excluded by the btl selection)"
                ),
            ));
        };
        let mut hdr = Hdr {
            ctx: env.ctx,
            src: env.src,
            tag: env.tag,
            b: id,
            ..Hdr::default()
        };
        let item = if len <= eager_limit.min(max_payload) {
            hdr.kind = K_EAGER;
            if sync {
                hdr.flags = F_SYNC;
            }
            Out::Eager {
                hdr,
                ptr,
                len,
                complete: (!sync).then_some(id),
            }
        } else {
            hdr.kind = K_RTS;
            hdr.a = len as u64;
            hdr.c = ptr as u64;
            if single_copy {
                hdr.flags = if read { F_CMA | F_READ } else { F_CMA };
            } else if peer.rma_read {
                hdr.flags = F_RMA;
            }
            Out::Ctrl(hdr)
        };
        // The path each message takes (trace level: one atomic load when disabled).
        oxmpi_base::verbose!(
            BTL,
            60,
            "{}: send {len} B to rank {dest}: {}",
            peer.link.as_ref().map_or("?", |l| l.name()),
            match &item {
                Out::Eager { .. } => "eager",
                _ if read => "rendezvous, to be read alone (its CPU is far)",
                _ if single_copy => "rendezvous, single copy offered",
                _ if peer.rma_read => "rendezvous, remote read offered",
                _ => "rendezvous, pipelined copy",
            }
        );
        let peer = &mut self.peers[dest as usize];
        let eager = matches!(item, Out::Eager { .. });
        if !eager && peer.stats.rndv_sent == 0 {
            rendezvous_first(dest, len, eager_limit.min(max_payload), peer);
        }
        peer.stats.sent(len, eager);
        if single_copy && !matches!(item, Out::Eager { .. }) {
            peer.stats.single_copy_offered += 1;
        }
        // Fast path: nothing queued before it, so it may go straight into the link.
        if peer.outq.is_empty() {
            if let (Some(link), Out::Eager { hdr, ptr, len, .. }) = (peer.link.as_mut(), &item) {
                // (a probe of a far peer's placement comes this way: always timed)
                let probe = *len > self.far_eager && peer.place.far();
                let timed =
                    *len >= self.sense_min && peer.single_copy && peer.place.wants(*len, probe);
                let t0 = if timed {
                    self.clock.elapsed()
                } else {
                    if streams(self.far_stream, self.placement, &peer.place, *len) {
                        link.stream_next();
                    }
                    Default::default()
                };
                // SAFETY: the send buffer holds `len` readable bytes until completion.
                if unsafe { link.try_send(hdr, *ptr, *len) } {
                    if timed {
                        let ns = (self.clock.elapsed() - t0).as_nanos() as u64;
                        let limits = (self.far_eager, self.eager_limit);
                        sensed(&mut peer.place, dest, *len, ns, limits);
                    }
                    if !sync {
                        self.complete_send(dest as usize, id);
                    }
                    return Ok(user_id);
                }
            }
        }
        peer.outq.push_back(item);
        self.flush(dest as usize);
        Ok(user_id)
    }

    /// Whether `dest`'s CPU is taken to be far (placement `far`, or sensed).
    #[inline(always)]
    fn far_to(&self, dest: i32) -> bool {
        self.placement == Placement::Far || self.peers[dest as usize].place.far()
    }

    /// Whether `dest`'s CPU is known to be near: placement `near`, or `auto` and sensed near
    /// ([`crate::btl::sm::place::Place::sensed_near`]); a peer nothing was sensed of is not.
    #[inline]
    pub(crate) fn near_known(&self, dest: i32) -> bool {
        match self.placement {
            Placement::Near => true,
            Placement::Far => false,
            Placement::Auto => self.peers[dest as usize].place.sensed_near(),
        }
    }

    /// Whether a send of eager size above `far_eager` to `dest` goes by a rendezvous that
    /// `dest` reads alone ([`crate::btl::sm::place`]): its CPU is far and it may read our
    /// memory. A lone message (a ping-pong's) and every send of a window (a bandwidth
    /// run's) alike: each request-to-send follows the records before it on the link, so
    /// order holds. While sensed far, one such send in
    /// [`crate::btl::sm::place::PROBE_EVERY`] still goes eagerly.
    #[inline(never)]
    fn read_instead(&mut self, dest: i32) -> bool {
        if dest == self.me || !self.cma {
            return false;
        }
        let placement = self.placement;
        let Some(peer) = self.peers.get_mut(dest as usize) else {
            return false;
        };
        if peer.dead || !peer.single_copy || peer.link.is_none() {
            return false;
        }
        match placement {
            Placement::Far => true,
            Placement::Near => false,
            Placement::Auto => peer.place.by_read(),
        }
    }

    pub(crate) fn send_self(
        &mut self,
        env: Envelope,
        sreq: u64,
        ptr: *const u8,
        len: usize,
        sync: bool,
    ) {
        if let Some(rid) = self.matcher.match_arrival(env) {
            self.deliver(rid, env, Msg::Local { ptr, len, sreq });
            return;
        }
        if len <= self.eager_limit && !sync {
            // SAFETY: the send buffer holds `len` readable bytes.
            let data = unsafe { self.eager_copy(ptr, len) };
            self.queue_unexpected(
                env,
                Msg::Eager {
                    data,
                    ack: Ack::None,
                },
            );
            self.finish(sreq);
        } else {
            self.queue_unexpected(env, Msg::Local { ptr, len, sreq });
        }
    }

    /// A send whose last record `peer`'s link accepted: complete now, or once the link's
    /// own buffer is empty.
    pub(crate) fn complete_send(&mut self, p: usize, id: u64) {
        let peer = &self.peers[p];
        if peer.buffered && peer.link.as_ref().is_some_and(|l| l.sending()) {
            self.peers[p].unflushed.push(id);
        } else {
            self.finish(id);
        }
    }

    /// Completes the sends waiting for `p`'s link buffer, if it is empty now.
    #[inline]
    pub(crate) fn settle(&mut self, p: usize) {
        if self.peers[p].link.as_ref().is_some_and(|l| l.sending()) {
            return;
        }
        for id in std::mem::take(&mut self.peers[p].unflushed) {
            self.finish(id);
        }
    }

    /// Whether a rendezvous send to `peer` is under way (the peer is then busy receiving
    /// from us too): its count, kept as sends start and end, not a walk of the requests.
    #[inline]
    pub(crate) fn sending_rndv_to(&self, peer: i32) -> bool {
        let n = self.peers[peer as usize].rndv_sends;
        #[cfg(test)]
        debug_assert_eq!(
            n as usize,
            self.rndv_sends_walked(peer),
            "rendezvous sends to {peer}: count and request table agree"
        );
        n > 0
    }

    /// Whether a rendezvous send to any peer is under way (the one-way chooser then
    /// weighs the pipeline up, [`Chooser::receiver_sends`]): the count of all of them, kept
    /// with the peers' counts, not a walk of the peers (asked once per large transfer).
    ///
    /// [`Chooser::receiver_sends`]: crate::btl::sm::coop::Chooser::receiver_sends
    #[inline]
    pub(crate) fn sending_rndv(&self) -> bool {
        #[cfg(test)]
        debug_assert_eq!(
            self.rndv_sends_all,
            self.peers.iter().map(|q| q.rndv_sends).sum::<u32>(),
            "rendezvous sends to all peers: the sum of the peers' counts"
        );
        self.rndv_sends_all > 0
    }

    /// The rendezvous sends to `peer` in the request table (what
    /// [`State::sending_rndv_to`]'s count must equal; the tests' check).
    #[cfg(test)]
    pub(crate) fn rndv_sends_walked(&self, peer: i32) -> usize {
        self.reqs
            .values()
            .filter(|q| matches!(q.state, ReqState::Send { peer: d, rndv: true, .. } if d == peer))
            .count()
    }

    /// A send to world rank `p` that may have been a rendezvous ended: if none to it is
    /// under way any more, a period of two-way traffic with it may end
    /// ([`crate::btl::sm::two_way::TwoWay::sends_done`]).
    pub(crate) fn rndv_send_ended(&mut self, p: usize) {
        if self.peers[p].two_way.in_period() && !self.sending_rndv_to(p as i32) {
            let now = self.now_ns();
            self.peers[p].sends_done(p, now);
        }
    }

    /// A clear-to-send for our send request `hdr.b`: queue the `hdr.a` bytes the receiver
    /// wants as DATA fragments for its request `hdr.c`.
    pub(crate) fn on_cts(&mut self, peer: i32, hdr: Hdr) {
        let (sreq, want, rreq) = (hdr.b, hdr.a as usize, hdr.c);
        let Some(q) = self.reqs.get(sreq) else {
            return;
        };
        let ReqState::Send { ptr, len, .. } = q.state else {
            return;
        };
        let want = want.min(len);
        if want == 0 {
            self.finish(sreq);
        } else {
            self.peers[peer as usize].outq.push_back(Out::Data {
                sreq,
                rreq,
                ptr,
                off: 0,
                len: want,
            });
        }
    }
}

/// Our copy of an eager message of `n` bytes to world rank `p` into the link took `ns`
/// nanoseconds: feeds `p`'s placement `place` ([`crate::btl::sm::place`]; one sample in
/// 16 said at verbose level 90, a change of the belief at 20). `limits`: the far and the
/// plain eager limit, for the message.
#[cold]
#[inline(never)]
fn sensed(place: &mut Place, p: i32, n: usize, ns: u64, (far, eager): (usize, usize)) {
    if place.samples() % 16 == 0 {
        oxmpi_base::verbose!(BTL, 90, "sm: eager copy of {n} B to rank {p}: {ns} ns");
    }
    if place.record(n, ns) {
        oxmpi_base::verbose!(
            BTL,
            20,
            "sm: rank {p}'s CPU is now taken to be {} (our eager copy of {n} B to it took \
             {ns} ns): messages of {}-{eager} B to it go {}",
            if place.far() { "far" } else { "near" },
            far.saturating_add(1),
            if place.far() {
                "by a rendezvous it reads alone"
            } else {
                "eagerly"
            }
        );
    }
}

/// The first rendezvous send to `dest`: the tools interface's event, if a tool listens.
#[cold]
fn rendezvous_first(dest: i32, len: usize, eager_limit: usize, peer: &super::peer::Peer) {
    use oxmpi_base::events::{self, Event, Kind};
    if events::wanted(Kind::Rendezvous) {
        events::raise(&Event::Rendezvous {
            peer: dest,
            bytes: len as u64,
            eager_limit: eager_limit as u64,
            transport: peer.link.as_ref().map_or("none", |l| l.name()),
        });
    }
}
