//! The protocol's counters: what the MPI tools interface's performance variables and the
//! job profile read. They cost nothing measurable when nobody reads them: per-peer plain
//! integers in the state the engine's lock already guards (one add on the paths that
//! send or receive a message, no atomics, no allocation), plus the matcher's own queue
//! statistics. Only the time blocked in waits needs a clock; it is taken when a reader asked
//! for it ([`set_wait_timing`]), so an unread timer costs one relaxed load per blocking wait.
//! Even then only a sample of the waits is timed ([`timing_sampled`]: the clock read after a
//! wait delays its return by about as much as a small message takes), and the total is
//! scaled from the sample.

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
    /// Messages sent by size: bucket 0 holds empty messages, bucket `b` sizes in
    /// `2^(b-1)..2^b` ([`size_bucket`]), the last one everything from 1 GiB.
    pub sent_sizes: [u64; SIZE_BUCKETS],
}

/// How the data of a rendezvous message moved to its receiver.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CopyMech {
    /// No rendezvous message yet.
    #[default]
    None,
    /// The receiver's cross-memory read (single copy).
    Cma,
    /// The cooperative copy (single copy, sender and receiver together).
    Coop,
    /// The network's remote read (single copy).
    Rma,
    /// Fragments through the link.
    Pipelined,
}

impl CopyMech {
    /// Its name in the copy-choice event.
    pub(crate) fn name(self) -> &'static str {
        match self {
            CopyMech::None => "none",
            CopyMech::Cma => "cma",
            CopyMech::Coop => "coop",
            CopyMech::Rma => "rma",
            CopyMech::Pipelined => "pipelined",
        }
    }
}

/// Number of message-size buckets of [`PeerStats::sent_sizes`].
pub const SIZE_BUCKETS: usize = 32;

/// The size bucket of a message of `len` bytes.
#[inline]
pub fn size_bucket(len: usize) -> usize {
    ((usize::BITS - len.leading_zeros()) as usize).min(SIZE_BUCKETS - 1)
}

impl PeerStats {
    /// Counts one message of `len` bytes sent, eagerly or not.
    #[inline]
    pub(crate) fn sent(&mut self, len: usize, eager: bool) {
        self.msgs_sent += 1;
        self.bytes_sent += len as u64;
        self.sent_sizes[size_bucket(len)] += 1;
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
        for (a, b) in self.sent_sizes.iter_mut().zip(o.sent_sizes) {
            *a += b;
        }
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
static WAITS: AtomicU64 = AtomicU64::new(0);
static WAITS_TIMED: AtomicU64 = AtomicU64::new(0);
static WAIT_NS: AtomicU64 = AtomicU64::new(0);

/// Events (calls of one function, blocking waits) that are all timed before sampling starts.
pub const TIMING_EXACT: u64 = 16;

/// After the first [`TIMING_EXACT`] events, one in this many is timed.
pub const TIMING_SAMPLE_EVERY: u64 = 256;

/// Whether the `n`-th event (from 0) of a kind is timed: the first [`TIMING_EXACT`], then
/// one in [`TIMING_SAMPLE_EVERY`]. Used for the blocking waits here and for the job
/// profile's per-function call times.
#[inline]
pub fn timing_sampled(n: u64) -> bool {
    n < TIMING_EXACT || n % TIMING_SAMPLE_EVERY == 0
}

/// `v * count / timed`, rounded to nearest: a total over `count` events estimated from the
/// `timed` ones.
pub fn timing_scale(v: u64, count: u64, timed: u64) -> u64 {
    if timed == 0 || count == timed {
        return v;
    }
    ((v as u128 * count as u128 + timed as u128 / 2) / timed as u128) as u64
}

/// Readers of the wait timer: started timer handles, and the profile.
static WAIT_READERS: std::sync::Mutex<usize> = std::sync::Mutex::new(0);

/// Adds (`true`) or removes a reader of the time blocked in waits (a started timer
/// handle, the profile): waits are timed while there is one.
pub fn set_wait_timing(on: bool) {
    let mut n = WAIT_READERS.lock().unwrap_or_else(|p| p.into_inner());
    *n = if on { *n + 1 } else { n.saturating_sub(1) };
    WAIT_TIMING.store(*n > 0, Ordering::Relaxed);
}

/// Whether waits are timed now (one relaxed load).
#[inline]
pub(crate) fn wait_timing() -> bool {
    WAIT_TIMING.load(Ordering::Relaxed)
}

/// Counts a blocking wait (before it blocks); whether this one is to be timed. A load
/// and a store rather than a locked read-modify-write: waits that start at the same
/// moment on two threads (`MPI_THREAD_MULTIPLE`) may count once, which only skews the
/// scaling of an estimate.
pub(crate) fn wait_sampled() -> bool {
    let n = WAITS.load(Ordering::Relaxed);
    WAITS.store(n + 1, Ordering::Relaxed);
    timing_sampled(n)
}

/// Adds a timed wait of `ns` nanoseconds.
pub(crate) fn add_wait_ns(ns: u64) {
    WAIT_NS.fetch_add(ns, Ordering::Relaxed);
    WAITS_TIMED.fetch_add(1, Ordering::Relaxed);
}

/// Nanoseconds spent blocked in waits so far (estimated from the timed waits).
pub(crate) fn wait_ns() -> u64 {
    timing_scale(
        WAIT_NS.load(Ordering::Relaxed),
        WAITS.load(Ordering::Relaxed),
        WAITS_TIMED.load(Ordering::Relaxed),
    )
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
        assert_eq!(sm.sent_sizes[size_bucket(8)], 2);
        assert_eq!(
            (
                size_bucket(0),
                size_bucket(1),
                size_bucket(8),
                size_bucket(9)
            ),
            (0, 1, 4, 4)
        );
        assert_eq!(size_bucket(usize::MAX), SIZE_BUCKETS - 1);
    }
}

/// What a performance variable measures (MPI 4.1 §15.3.7's classes that oxmpi uses).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PvarClass {
    /// A count that only grows (`MPI_T_PVAR_CLASS_COUNTER`).
    Counter,
    /// A current level, e.g. a queue length (`MPI_T_PVAR_CLASS_LEVEL`).
    Level,
    /// The largest level seen (`MPI_T_PVAR_CLASS_HIGHWATERMARK`).
    HighWatermark,
    /// A fixed size, e.g. a limit (`MPI_T_PVAR_CLASS_SIZE`).
    Size,
    /// Elapsed time in seconds, a `double` (`MPI_T_PVAR_CLASS_TIMER`).
    Timer,
}

impl PvarClass {
    /// The constant's name without `MPI_T_PVAR_CLASS_`.
    pub fn name(self) -> &'static str {
        match self {
            PvarClass::Counter => "COUNTER",
            PvarClass::Level => "LEVEL",
            PvarClass::HighWatermark => "HIGHWATERMARK",
            PvarClass::Size => "SIZE",
            PvarClass::Timer => "TIMER",
        }
    }
}

/// A performance variable: an engine counter as the tools interface and `oxmpi-info
/// --pvars` show it. Counters and timers are read relative to a handle's start (the
/// readers do that); levels, high-water marks and sizes are read as they are.
#[derive(Debug, Clone, Copy)]
pub struct Pvar {
    /// Name, `<framework>_<component>_<what>`.
    pub name: &'static str,
    /// The category it is listed in (`btl_sm`, `pml_ox`).
    pub category: &'static str,
    /// One-line description.
    pub desc: &'static str,
    /// Its class.
    pub class: PvarClass,
    /// Verbosity level 1–9 (as parameter levels).
    pub level: u8,
    /// Counts without being started (`continuous`); a non-continuous one counts only between
    /// start and stop.
    pub continuous: bool,
    /// For a variable bound to a communicator (`MPI_T_BIND_MPI_COMM`): how it reads and
    /// watches that communicator (`read` is then unused).
    pub comm: Option<CommBinding>,
    /// Its value: a count (or nanoseconds for a timer) from a snapshot.
    pub read: fn(&Stats) -> u64,
}

/// How a performance variable bound to a communicator reads it. Such counters count
/// only while a reader watches the communicator (unread, they cost one predictable branch
/// where they would count); a handle reads what happened since it was allocated, so
/// nothing it could see is lost.
#[derive(Debug, Clone, Copy)]
pub struct CommBinding {
    /// The value on engine communicator `c` (0 once `c` is freed).
    pub read: fn(crate::CommId) -> u64,
    /// Starts (`true`) or stops one reader of `c`.
    pub watch: fn(crate::CommId, bool),
    /// Whether `c` is the engine communicator the communicator's collectives travel on
    /// (the C library's collective context, the Rust API's shadow) rather than the one
    /// its point-to-point messages travel on.
    pub collective: bool,
    /// For a per-peer variable (one value per peer rank of the communicator, the handle's
    /// count its size, or its remote group's for an intercommunicator): the values on
    /// engine communicator `c` (`read` is then unused; empty once `c` is freed).
    pub peers: Option<fn(crate::CommId) -> Vec<u64>>,
}

/// Counters of one communicator's point-to-point traffic (its collectives run on a
/// communicator of their own).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CommStats {
    /// Messages sent on it (to a real rank).
    pub msgs_sent: u64,
    /// Payload bytes sent on it.
    pub bytes_sent: u64,
    /// Messages that arrived on it (from a real rank, counted on arrival like the
    /// transports' receive counters, matched or not yet).
    pub msgs_recv: u64,
    /// Payload bytes that arrived on it.
    pub bytes_recv: u64,
}

impl CommStats {
    /// Counts a message of `len` bytes sent on the communicator.
    #[inline]
    pub(crate) fn sent(&mut self, len: usize) {
        self.msgs_sent += 1;
        self.bytes_sent += len as u64;
    }

    /// Counts a message of `len` bytes that arrived on the communicator.
    #[inline]
    pub(crate) fn arrived(&mut self, len: usize) {
        self.msgs_recv += 1;
        self.bytes_recv += len as u64;
    }
}

impl Pvar {
    /// Whether handles may reset or write it (counters and timers).
    pub fn resettable(&self) -> bool {
        matches!(self.class, PvarClass::Counter | PvarClass::Timer)
    }
}

macro_rules! transport_pvars {
    ($($t:literal),*) => {[$(
        Pvar { name: concat!("btl_", $t, "_msgs_sent"), category: concat!("btl_", $t),
            desc: concat!("Messages sent to ranks reached by the ", $t, " transport"),
            class: PvarClass::Counter, level: 4, continuous: true,
            comm: None,
            read: |s| s.by_transport(Some($t)).msgs_sent },
        Pvar { name: concat!("btl_", $t, "_bytes_sent"), category: concat!("btl_", $t),
            desc: concat!("Payload bytes sent to ranks reached by the ", $t, " transport"),
            class: PvarClass::Counter, level: 4, continuous: true,
            comm: None,
            read: |s| s.by_transport(Some($t)).bytes_sent },
        Pvar { name: concat!("btl_", $t, "_msgs_recv"), category: concat!("btl_", $t),
            desc: concat!("Messages received from ranks reached by the ", $t, " transport"),
            class: PvarClass::Counter, level: 4, continuous: true,
            comm: None,
            read: |s| s.by_transport(Some($t)).msgs_recv },
        Pvar { name: concat!("btl_", $t, "_bytes_recv"), category: concat!("btl_", $t),
            desc: concat!("Payload bytes received from ranks reached by the ", $t, " transport"),
            class: PvarClass::Counter, level: 4, continuous: true,
            comm: None,
            read: |s| s.by_transport(Some($t)).bytes_recv },
        Pvar { name: concat!("btl_", $t, "_eager_sent"), category: concat!("btl_", $t),
            desc: concat!("Messages sent eagerly (data with the envelope) to ranks reached by the ", $t, " transport"),
            class: PvarClass::Counter, level: 5, continuous: true,
            comm: None,
            read: |s| s.by_transport(Some($t)).eager_sent },
        Pvar { name: concat!("btl_", $t, "_rndv_sent"), category: concat!("btl_", $t),
            desc: concat!("Messages sent by rendezvous to ranks reached by the ", $t, " transport"),
            class: PvarClass::Counter, level: 5, continuous: true,
            comm: None,
            read: |s| s.by_transport(Some($t)).rndv_sent },
    )*]};
}

/// The transports' counters: messages and bytes each way, eager and rendezvous sends.
pub(crate) const TRANSPORT_PVARS: [Pvar; 24] = transport_pvars!("self", "sm", "tcp", "ofi");

pub(crate) const PML_PVARS: [Pvar; 10] = [
    Pvar {
        name: "pml_ox_eager_sent",
        category: "pml_ox",
        desc: "Messages sent eagerly (data with the envelope)",
        class: PvarClass::Counter,
        level: 4,
        continuous: true,
        comm: None,
        read: |s| s.by_transport(None).eager_sent,
    },
    Pvar {
        name: "pml_ox_rndv_sent",
        category: "pml_ox",
        desc: "Messages sent by rendezvous (request to send, then the data)",
        class: PvarClass::Counter,
        level: 4,
        continuous: true,
        comm: None,
        read: |s| s.by_transport(None).rndv_sent,
    },
    Pvar {
        name: "pml_ox_single_copy_offered",
        category: "pml_ox",
        desc: "Rendezvous sends that offered the receiver a single copy",
        class: PvarClass::Counter,
        level: 5,
        continuous: true,
        comm: None,
        read: |s| s.by_transport(None).single_copy_offered,
    },
    Pvar {
        name: "pml_ox_single_copy_recv",
        category: "pml_ox",
        desc: "Rendezvous receives done by a single copy (CMA read or cooperative copy)",
        class: PvarClass::Counter,
        level: 5,
        continuous: true,
        comm: None,
        read: |s| s.by_transport(None).single_copy_recv,
    },
    Pvar {
        name: "pml_ox_pipelined_recv",
        category: "pml_ox",
        desc: "Rendezvous receives done by the pipelined copy through the link",
        class: PvarClass::Counter,
        level: 5,
        continuous: true,
        comm: None,
        read: |s| s.by_transport(None).pipelined_recv,
    },
    Pvar {
        name: "pml_ox_unexpected",
        category: "pml_ox",
        desc: "Unexpected messages queued now (arrived before a matching receive)",
        class: PvarClass::Level,
        level: 4,
        continuous: true,
        comm: None,
        read: |s| s.matching.unexpected,
    },
    Pvar {
        name: "pml_ox_unexpected_hwm",
        category: "pml_ox",
        desc: "Most unexpected messages queued at once",
        class: PvarClass::HighWatermark,
        level: 4,
        continuous: true,
        comm: None,
        read: |s| s.matching.unexpected_hwm,
    },
    Pvar {
        name: "pml_ox_posted_searched",
        category: "pml_ox",
        desc: "Posted receives inspected by arriving messages (the search depth, summed; divide by pml_ox_arrivals)",
        class: PvarClass::Counter,
        level: 6,
        continuous: true,
        comm: None,
        read: |s| s.matching.posted_searched,
    },
    Pvar {
        name: "pml_ox_arrivals",
        category: "pml_ox",
        desc: "Arriving messages matched against the posted receives",
        class: PvarClass::Counter,
        level: 6,
        continuous: true,
        comm: None,
        read: |s| s.matching.arrivals,
    },
    Pvar {
        name: "pml_ox_eager_limit",
        category: "pml_ox",
        desc: "Largest message sent eagerly, in bytes (btl_sm_eager_limit capped by the ring's record size)",
        class: PvarClass::Size,
        level: 4,
        continuous: true,
        comm: None,
        read: |s| s.eager_limit,
    },
];

pub(crate) const WAIT_PVAR: Pvar = Pvar {
    name: "pml_ox_wait_time",
    category: "pml_ox",
    desc: "Seconds spent blocked in waits (measured only while a handle of it is started)",
    class: PvarClass::Timer,
    level: 4,
    continuous: false,
    comm: None,
    read: |s| s.wait_ns,
};
