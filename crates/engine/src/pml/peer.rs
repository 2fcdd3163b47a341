//! What the protocol keeps per peer: its link, the queue of records waiting for room in
//! it, liveness, and the single-copy state.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;

use crate::btl::sm::coop::{self, Chooser, CoopMem, Mech};
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
    /// send rendezvous messages to it too, per size class ([`Chooser::both_ways`]).
    pub(crate) both_ways: [BothWays; coop::SIZE_CLASSES],
    /// When the last measured large transfer from it ended (nanoseconds since start).
    pub(crate) last_end: u64,
    /// When the last cooperative transfer from it ended.
    pub(crate) last_coop_end: u64,
    /// The traffic with it.
    pub(crate) stats: super::stats::PeerStats,
    /// How the data of the last rendezvous message from it moved (the copy-choice event
    /// says the first choice and every switch).
    pub(crate) last_copy: super::stats::CopyMech,
}

/// A [`Chooser::both_ways`] (the default of a peer's field).
#[derive(Clone, Debug)]
pub(crate) struct BothWays(pub(crate) Chooser);

impl Default for BothWays {
    fn default() -> Self {
        BothWays(Chooser::both_ways())
    }
}

impl Peer {
    /// A large transfer from this peer (world rank `p`) by `m` moved `n` bytes from `start`
    /// to `now` (nanoseconds): feeds its size class's chooser, the one for traffic in both
    /// directions if `both_ways` (a switch is said at verbose level 20, every sample at 90).
    pub(crate) fn measured(
        &mut self,
        p: usize,
        m: Mech,
        n: usize,
        (start, now): (u64, u64),
        both_ways: bool,
    ) {
        let ns = now.saturating_sub(start);
        oxmpi_base::verbose!(
            BTL,
            90,
            "sm: sample {}{} {n} B {ns} ns at {now}",
            match m {
                Mech::Pipe => "pipe",
                Mech::Coop if both_ways => "cma",
                Mech::Coop => "coop",
            },
            if both_ways { " (both ways)" } else { "" }
        );
        let k = coop::size_class(n);
        let c = if both_ways {
            &mut self.both_ways[k].0
        } else {
            &mut self.chooser[k]
        };
        if c.record(m, n, ns, now) {
            log_switch(c, p, n, both_ways);
        }
        self.last_end = now;
        if m == Mech::Coop {
            self.last_coop_end = now;
        }
    }
}

impl Peer {
    /// A pipelined transfer of `n` bytes from this peer (world rank `p`), chosen by its
    /// [`Chooser::both_ways`] while we were sending to it, ended at `now` after our sends to
    /// it had all finished: not a sample of two-way traffic ([`Chooser::unmeasured`]).
    pub(crate) fn unmeasured(&mut self, p: usize, n: usize, now: u64) {
        oxmpi_base::verbose!(
            BTL,
            90,
            "sm: pipe (both ways) {n} B at {now}: ended after our sends, not measured"
        );
        let c = &mut self.both_ways[coop::size_class(n)].0;
        if c.unmeasured(Mech::Pipe, now) {
            log_switch(c, p, n, true);
        }
        self.last_end = now;
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
