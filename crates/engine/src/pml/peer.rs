//! What the protocol keeps per peer: its link, the queue of records waiting for room in
//! it, liveness, and the single-copy state.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;

use crate::btl::sm::coop::{self, Chooser, CoopMem, Mech};
use crate::btl::sm::one_way::{How, Kind, OneWay};
use crate::btl::sm::place::Place;
use crate::btl::sm::two_way::{Sample, TwoWay};
use crate::btl::{Link, BTL};
use crate::pml::hdr::Hdr;

#[derive(Debug)]
pub(crate) enum Out {
    Eager {
        hdr: Hdr,
        ptr: *const u8,
        len: usize,
        /// Complete this send request once written.
        complete: Option<u64>,
    },
    Ctrl(Hdr),
    Data {
        sreq: u64,
        rreq: u64,
        ptr: *const u8,
        off: usize,
        len: usize,
    },
}

#[derive(Debug, Default)]
pub(crate) struct Peer {
    pub(crate) pid: i32,
    pub(crate) pidfd: Option<OwnedFd>,
    pub(crate) link: Option<Box<dyn Link>>,
    pub(crate) outq: VecDeque<Out>,
    pub(crate) dead: bool,
    /// It reached finalize under fault tolerance (its `K_BYE` arrived).
    pub(crate) bye: bool,
    /// On our node (its pid is meaningful here).
    pub(crate) local: bool,
    /// Sends whose records the link accepted but still holds in its own buffer (tcp): they
    /// complete once the link has handed every byte on, so a receiver never waits for data
    /// that only the sender's progress could move (the sender may be outside the engine).
    pub(crate) unflushed: Vec<u64>,
    /// The link buffers in user space (tcp), so `unflushed` applies; spares the sm fast
    /// path a call ([`crate::btl::Caps::buffered`]).
    pub(crate) buffered: bool,
    /// A rendezvous may offer it a single copy ([`crate::btl::Caps::single_copy`]).
    pub(crate) single_copy: bool,
    /// A rendezvous may offer it a remote read ([`crate::btl::Caps::rma_read`]).
    pub(crate) rma_read: bool,
    /// Cooperative-copy control area for its transfers to us (in our segment).
    pub(crate) coop_rx: Option<CoopMem>,
    /// Cooperative-copy control area for our transfers to it (in its segment).
    pub(crate) coop_tx: Option<CoopMem>,
    /// Sequence number of the last cooperative transfer from it.
    pub(crate) coop_seq: u32,
    /// Pipelined or cooperative copy for its large messages to us, per size class
    /// ([`coop::size_class`]).
    pub(crate) chooser: [Chooser; coop::SIZE_CLASSES],
    /// Pipelined copy or our single copy alone for its rendezvous messages to us while we
    /// send rendezvous messages to it too ([`TwoWay`]: per size class, a chooser fed per
    /// message in streams and one fed per exchange in exchanges).
    pub(crate) two_way: TwoWay,
    /// Its rendezvous messages below 256 KiB while we send none to it ([`OneWay`]: a
    /// ping-pong's messages are measured one by one by `chooser`, a stream by its periods
    /// with a chooser of its own).
    pub(crate) one_way: OneWay,
    /// Its last answer to a rendezvous message of ours was a FIN with
    /// [`FIN_READ`](crate::pml::hdr::FIN_READ) (it read the message alone), not a
    /// clear-to-send: it reads our messages as they come, so a pipelined transfer of its
    /// messages tried in a stream could not be measured ([`TwoWay::choose`]).
    pub(crate) reads_ours: bool,
    /// Whether its CPU is near ours or far, sensed from its eager messages
    /// ([`crate::btl::sm::place`]).
    pub(crate) place: Place,
    /// When the last measured large transfer from it ended (nanoseconds since start).
    pub(crate) last_end: u64,
    /// When the last cooperative transfer from it ended.
    pub(crate) last_coop_end: u64,
    /// The traffic with it.
    pub(crate) stats: super::stats::PeerStats,
    /// How the data of the last rendezvous message from it moved (the copy-choice event
    /// says the first choice and every switch).
    pub(crate) last_copy: super::stats::CopyMech,
    /// Our rendezvous sends to it under way (requests in [`ReqState::Send`] with `rndv`),
    /// so that [`State::sending_rndv_to`] needs no walk of the request table.
    ///
    /// [`ReqState::Send`]: super::request::ReqState::Send
    /// [`State::sending_rndv_to`]: super::State::sending_rndv_to
    pub(crate) rndv_sends: u32,
}

impl Peer {
    /// A large transfer from this peer (world rank `p`) by `m`, chosen by its size class's
    /// one-way chooser, moved `n` bytes from `start` to `now` (nanoseconds): feeds that
    /// chooser, telling it whether we have rendezvous sends of our own under way (`sends`,
    /// [`Chooser::receiver_sends`]; a switch is said at verbose level 20, every sample at 90).
    pub(crate) fn measured(
        &mut self,
        p: usize,
        m: Mech,
        n: usize,
        (start, now): (u64, u64),
        sends: bool,
    ) {
        let ns = now.saturating_sub(start);
        oxmpi_base::verbose!(
            BTL,
            90,
            "sm: sample {} {n} B {ns} ns at {now}",
            match m {
                Mech::Pipe => "pipe",
                Mech::Coop => "coop",
            }
        );
        let c = &mut self.chooser[coop::size_class(n)];
        c.receiver_sends(sends);
        if c.record(m, n, ns, now) {
            log_switch(c, p, n, false);
        }
        self.ended_at(m, now);
    }

    /// How a rendezvous message of `n` bytes ([`crate::btl::sm::one_way::by_period`]) from
    /// this peer (world rank `p`) matched at `now`, while we send no rendezvous message to
    /// it, moves ([`OneWay::choose`]; the sample of the period it ends is recorded first).
    pub(crate) fn choose_one_way(&mut self, p: usize, n: usize, now: u64) -> How {
        let sent = self.stats.msgs_sent;
        if let Some((s, kind, sends)) = self.one_way.close(now, sent) {
            self.record_one_way(p, s, kind, sends);
        }
        let k = coop::size_class(n);
        self.one_way.choose(n, now, sent, &mut self.chooser[k])
    }

    /// A message from this peer chosen by [`Peer::choose_one_way`] and moved by `m` ended
    /// at `now`: `Some(start)` if it is measured from `start`, `None` if it cannot be
    /// (cold pages, held up by a cooperative copy); `sends` says whether we have
    /// rendezvous sends under way ([`OneWay::ended`]).
    pub(crate) fn ended_one_way(
        &mut self,
        m: Mech,
        n: usize,
        start: Option<u64>,
        now: u64,
        sends: bool,
    ) {
        let s = match start {
            Some(start) => {
                self.ended_at(m, now);
                Sample::Timed {
                    m,
                    n,
                    start,
                    end: now,
                }
            }
            None => Sample::Skipped { n, at: now },
        };
        self.one_way.ended(s, sends);
    }

    /// Feeds a one-way sample to its chooser ([`OneWay::record`]; every sample said at
    /// verbose level 90, a switch at 20).
    fn record_one_way(&mut self, p: usize, s: Sample, kind: Kind, sends: bool) {
        let k = coop::size_class(s.bytes());
        let stream = kind == Kind::Stream;
        let Some((m, bytes, ns, end)) = s.timed() else {
            return;
        };
        oxmpi_base::verbose!(
            BTL,
            90,
            "sm: sample {}{} {bytes} B {ns} ns at {end}",
            match (m, stream) {
                (Mech::Pipe, _) => "pipe",
                (Mech::Coop, true) if k == 0 => "cma",
                (Mech::Coop, _) => "coop",
            },
            if stream {
                format!(" (one-way stream of {} B messages)", s.bytes())
            } else {
                String::new()
            }
        );
        if !self.one_way.record(s, kind, sends, &mut self.chooser[k]) {
            return;
        }
        if !stream {
            log_switch(&self.chooser[k], p, s.bytes(), false);
            return;
        }
        let c = self.one_way.streams(s.bytes());
        let (pipe, single) = c.rates();
        // Below 64 KiB a stream's single copy is the receiver's read alone, from 64 KiB
        // the cooperative copy (`OneWay`).
        let single_name = if k == 0 {
            "single copy by the receiver"
        } else {
            "cooperative single copy"
        };
        oxmpi_base::verbose!(
            BTL,
            20,
            "sm: streams of {} B messages from rank {p}: now {} (measured: pipelined \
             {pipe:.1} GB/s, {single_name} {single:.1} GB/s)",
            s.bytes(),
            match c.current() {
                Mech::Pipe => "pipelined copy",
                Mech::Coop => single_name,
            }
        );
    }

    /// Notes that a large transfer from this peer by `m` ended at `now`.
    fn ended_at(&mut self, m: Mech, now: u64) {
        self.last_end = now;
        if m == Mech::Coop {
            self.last_coop_end = now;
        }
    }

    /// The mechanism for a rendezvous message of `n` bytes from this peer (world rank `p`)
    /// matched at `now` while we send to it too ([`TwoWay::choose`]; a sample the choice
    /// makes due is recorded first); `far`: its CPU is taken to be far.
    pub(crate) fn choose_two_way(&mut self, p: usize, n: usize, now: u64, far: bool) -> Mech {
        if let Some(s) = self.two_way.take_held() {
            self.record_two_way(p, (s, false));
        }
        self.two_way.choose(n, now, self.reads_ours, far)
    }

    /// A message from this peer (world rank `p`) chosen by [`Peer::choose_two_way`]
    /// ended; `s` is its own sample, `sending` says whether we still send to the peer
    /// ([`TwoWay::ended`]).
    pub(crate) fn ended_two_way(&mut self, p: usize, s: Sample, sending: bool) {
        match s {
            Sample::Timed { m, end, .. } => self.ended_at(m, end),
            Sample::Unmeasured { at, .. } => self.last_end = at,
            Sample::Skipped { .. } | Sample::Period { .. } => {}
        }
        let slow = self.near_slow_logged();
        if let Some(s) = self.two_way.ended(s, sending) {
            self.record_two_way(p, s);
        }
        self.log_near_slow(slow, p);
    }

    /// Our last rendezvous send to this peer (world rank `p`) ended at `now`
    /// ([`TwoWay::sends_done`]).
    pub(crate) fn sends_done(&mut self, p: usize, now: u64) {
        let slow = self.near_slow_logged();
        if let Some(s) = self.two_way.sends_done(now) {
            self.record_two_way(p, s);
        }
        self.log_near_slow(slow, p);
    }

    /// The size classes whose near streams found the pipeline slow
    /// ([`TwoWay::near_slow`]), only while their change is logged (verbose level 20): the
    /// rendezvous paths that end a measurement look at no more than one level otherwise.
    fn near_slow_logged(&self) -> Option<u8> {
        BTL.enabled(20).then(|| self.two_way.near_slow())
    }

    /// Says at verbose level 20 which size classes' near streams from `peer` found the
    /// pipeline slow since `before` ([`Peer::near_slow_logged`] before the measurement).
    fn log_near_slow(&self, before: Option<u8>, peer: usize) {
        let Some(before) = before else { return };
        let new = self.two_way.near_slow() & !before;
        if new != 0 {
            oxmpi_base::verbose!(
                BTL,
                20,
                "sm: streams both ways with rank {peer} (size classes {new:#06b}): the pipeline \
                 measured slow, now the streams' chooser (the CPUs are far apart)"
            );
        }
    }

    /// Feeds `s` to the two-way chooser of its size class, the exchanges' one if
    /// `exchange` (every sample said at verbose level 90, a switch at 20).
    fn record_two_way(&mut self, p: usize, (s, exchange): (Sample, bool)) {
        let name = |m: Mech| match m {
            Mech::Pipe => "pipe",
            Mech::Coop => "cma",
        };
        match s {
            Sample::Timed { m, n, start, end } => oxmpi_base::verbose!(
                BTL,
                90,
                "sm: sample {} (both ways{}) {n} B {} ns at {end}",
                name(m),
                if exchange { ", exchange" } else { "" },
                end.saturating_sub(start)
            ),
            Sample::Unmeasured { m, n, at } => oxmpi_base::verbose!(
                BTL,
                90,
                "sm: {} (both ways) {n} B at {at}: ended after our sends, not measured",
                name(m)
            ),
            Sample::Period {
                m,
                n,
                bytes,
                start,
                end,
            } => oxmpi_base::verbose!(
                BTL,
                90,
                "sm: sample {} (both ways, a period of {n} B messages) {bytes} B {} ns at {end}",
                name(m),
                end.saturating_sub(start)
            ),
            Sample::Skipped { .. } => return,
        }
        if self.two_way.record(s, exchange) {
            log_switch(
                self.two_way.chooser(s.bytes(), exchange),
                p,
                s.bytes(),
                true,
            );
        }
    }
}

/// Says at verbose level 20 that a measurement made `c` switch for messages of `n` bytes'
/// size class from `peer` (`both_ways`: while we send to it too).
pub(crate) fn log_switch(c: &Chooser, peer: usize, n: usize, both_ways: bool) {
    let (pipe, coop) = c.rates();
    let single = if both_ways {
        "single copy by the receiver"
    } else {
        "cooperative single copy"
    };
    oxmpi_base::verbose!(
        BTL,
        20,
        "sm: messages of {n} B from rank {peer}{}: now {} (measured: pipelined {pipe:.1} \
         GB/s, {single} {coop:.1} GB/s)",
        if both_ways {
            " while sending to it"
        } else {
            ""
        },
        match c.current() {
            Mech::Pipe => "pipelined copy",
            Mech::Coop => single,
        }
    );
}
