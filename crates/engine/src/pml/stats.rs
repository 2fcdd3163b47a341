//! The protocol's counters: what the MPI tools interface's performance variables and the
//! job profile read. They cost nothing measurable when nobody reads them: per-peer plain
//! integers in the state the engine's lock already guards (one add on the paths that
//! send or receive a message, no atomics, no allocation), plus the matcher's own queue
//! statistics. Only the time blocked in waits needs a clock; it is taken when a reader asked
//! for it ([`set_wait_timing`]), so an unread timer costs one relaxed load per blocking wait.

pub use super::matching::MatchStats;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Counters of the traffic with one peer (our own rank included: sends to oneself).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PeerStats {
    /// Messages sent to the peer.
    pub msgs_sent: u64,
    /// Payload bytes sent to the peer.
    pub bytes_sent: u64,
    /// Messages received from the peer (matched or queued as unexpected).
    pub msgs_recv: u64,
    /// Payload bytes received from the peer.
    pub bytes_recv: u64,
    /// Sends that went eagerly (the data with the envelope).
    pub eager_sent: u64,
    /// Sends that went by rendezvous (request to send, then the data).
    pub rndv_sent: u64,
    /// Rendezvous sends that offered the receiver a single copy.
    pub single_copy_offered: u64,
    /// Rendezvous receives done by a single copy (CMA read or cooperative copy).
    pub single_copy_recv: u64,
    /// Rendezvous receives done by the pipelined copy through the link.
    pub pipelined_recv: u64,
}

impl PeerStats {
    /// Counts one message of `len` bytes sent, eagerly or not.
    #[inline]
    pub(crate) fn sent(&mut self, len: usize, eager: bool) {
        self.msgs_sent += 1;
        self.bytes_sent += len as u64;
        if eager {
            self.eager_sent += 1;
        } else {
            self.rndv_sent += 1;
        }
    }

    /// Counts one message of `len` bytes received.
    #[inline]
    pub(crate) fn received(&mut self, len: usize) {
        self.msgs_recv += 1;
        self.bytes_recv += len as u64;
    }

    /// Adds `o` to these counters.
    pub fn add(&mut self, o: &PeerStats) {
        self.msgs_sent += o.msgs_sent;
        self.bytes_sent += o.bytes_sent;
        self.msgs_recv += o.msgs_recv;
        self.bytes_recv += o.bytes_recv;
        self.eager_sent += o.eager_sent;
        self.rndv_sent += o.rndv_sent;
        self.single_copy_offered += o.single_copy_offered;
        self.single_copy_recv += o.single_copy_recv;
        self.pipelined_recv += o.pipelined_recv;
    }
}

/// A snapshot of the engine's counters ([`crate::Engine::stats`]).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Stats {
    /// Per world rank: the transport reaching it (`self`, `sm`, `tcp`, or `none`) and the
    /// traffic with it.
    pub peers: Vec<(&'static str, PeerStats)>,
    /// The matching queues.
    pub matching: MatchStats,
    /// The current eager limit in bytes.
    pub eager_limit: u64,
    /// Nanoseconds spent blocked in waits while wait timing was on.
    pub wait_ns: u64,
}

impl Stats {
    /// The counters summed over the peers a transport reaches (`None`: over every peer).
    pub fn by_transport(&self, transport: Option<&str>) -> PeerStats {
        let mut t = PeerStats::default();
        for (name, s) in &self.peers {
            if transport.is_none_or(|w| w == *name) {
                t.add(s);
            }
        }
        t
    }
}

static WAIT_TIMING: AtomicBool = AtomicBool::new(false);
static WAIT_NS: AtomicU64 = AtomicU64::new(0);

/// Turns the measurement of the time blocked in waits on or off (a performance variable
/// handle for it was started, or the profile is on).
pub fn set_wait_timing(on: bool) {
    WAIT_TIMING.store(on, Ordering::Relaxed);
}

/// Whether waits are timed now (one relaxed load).
#[inline]
pub(crate) fn wait_timing() -> bool {
    WAIT_TIMING.load(Ordering::Relaxed)
}

/// Adds `ns` nanoseconds of blocking.
pub(crate) fn add_wait_ns(ns: u64) {
    WAIT_NS.fetch_add(ns, Ordering::Relaxed);
}

/// Nanoseconds spent blocked in waits so far.
pub(crate) fn wait_ns() -> u64 {
    WAIT_NS.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_counters_add_up_per_transport() {
        let mut a = PeerStats::default();
        a.sent(8, true);
        a.sent(1 << 20, false);
        a.received(8);
        let mut b = PeerStats::default();
        b.sent(16, true);
        let s = Stats {
            peers: vec![("self", b), ("sm", a), ("sm", a)],
            ..Stats::default()
        };
        let sm = s.by_transport(Some("sm"));
        assert_eq!((sm.msgs_sent, sm.eager_sent, sm.rndv_sent), (4, 2, 2));
        assert_eq!(sm.bytes_sent, 2 * (8 + (1 << 20)));
        assert_eq!(sm.bytes_recv, 16);
        assert_eq!(s.by_transport(None).msgs_sent, 5);
        assert_eq!(s.by_transport(Some("tcp")), PeerStats::default());
    }
}
