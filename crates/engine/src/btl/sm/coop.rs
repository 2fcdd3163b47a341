//! Cooperative single copy: both processes of a rendezvous copy the message, in parallel,
//! straight from the sender's buffer into the receiver's, with the kernel's cross-process
//! copy (CMA): the receiver pulls chunks from the front with `process_vm_readv`, the
//! sender pushes chunks from the back with `process_vm_writev`, until they meet.
//!
//! On this project's test host one CMA copy is bounded by the kernel's copy routine
//! (about 9 GB/s, a third of memcpy) whatever the placement of the two processes, while the
//! pipelined copy through shared buffers runs at memcpy speed when the two CPUs share a
//! cache and collapses (about 5 GB/s) when they do not. Splitting one CMA copy between both
//! CPUs doubles it (about 16 GB/s) in both placements; [`Chooser`] picks between the two
//! by measured throughput.
//!
//! The chunks are handed out through one control word per sender→receiver pair, in the
//! receiver's shared segment ([`CoopMem`]): `seq | lo | hi`, where `[lo, hi)` are the
//! chunks nobody has claimed yet. The receiver opens a transfer (new `seq`, `lo = 0`,
//! `hi = chunks`) before it tells the sender; each side claims a run of a quarter of what
//! is left (at least one chunk) with a compare-and-swap (receiver `lo += k`, sender
//! `hi -= k`): few large copies while much is left (each CMA call costs about a
//! microsecond), single chunks at the end, so the two finish within a chunk of each other.
//! Messages up to 1 MiB are cut in two chunks ([`chunk_size`]): one call per side.
//! Every chunk is copied exactly once, and a sender that arrives late, or with the
//! clear-to-send of an older transfer, claims nothing. The sender counts the chunks it
//! finished in a second word, with a flag if it could not copy its last run (the receiver
//! copies that run); the receiver's request completes when its own chunks are in and the
//! sender has reported every chunk it claimed. A claim is always finished before its
//! claimer does anything else, so the receiver's wait is bounded by one run of the sender.

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes of the control area ([`CoopCtl`]: claim word and done word, a cache line each) at
/// the end of every sender's slot in a receiver's segment.
pub const COOP_CTL: usize = 128;

const IDX_BITS: u32 = 20;
const IDX_MASK: u64 = (1 << IDX_BITS) - 1;
const SEQ_MASK: u32 = (1 << 24) - 1;

/// Most chunks one transfer may have.
pub const MAX_CHUNKS: usize = IDX_MASK as usize;

/// A claim takes this fraction (1/CLAIM_DIVISOR) of the unclaimed chunks, at least one.
pub const CLAIM_DIVISOR: u64 = 4;

fn pack(seq: u32, x: u64, y: u64) -> u64 {
    ((seq & SEQ_MASK) as u64) << (2 * IDX_BITS) | (x & IDX_MASK) << IDX_BITS | (y & IDX_MASK)
}

fn unpack(w: u64) -> (u32, u64, u64) {
    (
        (w >> (2 * IDX_BITS)) as u32,
        (w >> IDX_BITS) & IDX_MASK,
        w & IDX_MASK,
    )
}

/// The next transfer sequence number after `seq` (24 bits, never 0, so a zeroed word
/// belongs to no transfer).
pub fn next_seq(seq: u32) -> u32 {
    let s = (seq + 1) & SEQ_MASK;
    if s == 0 {
        1
    } else {
        s
    }
}

/// Largest chunk of a message cut in halves ([`chunk_size`]): messages up to twice this
/// are cut in two, larger ones into chunks of this size.
pub const HALF_MAX: usize = 512 << 10;

/// Chunk size for an `n`-byte transfer: half the message, at most [`HALF_MAX`], at least
/// `chunk`, rounded up to a multiple of 4096 (larger for messages that would need more than
/// [`MAX_CHUNKS`] chunks). Each CMA call costs about a microsecond on top of its copy, so
/// a message of up to 1 MiB goes in two runs, one per side when both are there (a late
/// sender leaves the receiver both): in 32 KiB chunks, claimed by quarters, both sides made
/// up to three calls each. Measured at np=2 on 2 vCPUs under load, by the chooser's own
/// choice, 32 KiB chunks against halves (of at least 16 KiB): the C ping-pong at 32 KiB
/// 4.85 against 4.05 us, 128 KiB 8.2 against 7.5, 256 KiB 15.1 against 13.7, 1 MiB 54
/// against 51; mpi4py's ping-pong, whose unchanged send buffer the receiver reads from its
/// own cache, 128 KiB 5.0 against 4.2-4.3, 256 KiB 8.2 against 6.2; the streaming bw at
/// 256 KiB 35 against 49 GB/s, at 1 MiB 49 against 61.
pub fn chunk_size(n: usize, chunk: usize) -> usize {
    let half = n.div_ceil(2).min(HALF_MAX);
    let c = n.div_ceil(MAX_CHUNKS).max(chunk).max(half).max(1);
    c.div_ceil(4096) * 4096
}

#[repr(C, align(64))]
#[derive(Debug, Default)]
struct Line(AtomicU64);

/// The control area of one sender→receiver pair: the claim word and the sender's done word,
/// each on its own cache line ([`COOP_CTL`] bytes; all zero is a valid, idle area).
#[repr(C)]
#[derive(Debug, Default)]
pub struct CoopCtl {
    claim: Line,
    done: Line,
}

/// A handle on a [`CoopCtl`] in shared memory.
#[derive(Clone, Copy, Debug)]
pub struct CoopMem {
    ctl: *const CoopCtl,
}

// SAFETY: the pointers refer to shared memory that is only accessed atomically; the
// mapping outlives the engine state that holds a CoopMem.
unsafe impl Send for CoopMem {}
// SAFETY: every access through a CoopMem is atomic.
unsafe impl Sync for CoopMem {}

impl CoopMem {
    /// Describes the control area at `base`.
    ///
    /// # Safety
    /// `base` must be 64-byte aligned and valid for reads and writes of [`COOP_CTL`] bytes
    /// (zero-initialised) for as long as the CoopMem is used; one receiver and one sender
    /// use it.
    #[cfg(not(loom))]
    pub unsafe fn from_raw(base: *mut u8) -> CoopMem {
        debug_assert!(base as usize % 64 == 0);
        const _: () = assert!(std::mem::size_of::<CoopCtl>() == COOP_CTL);
        CoopMem {
            ctl: base.cast::<CoopCtl>(),
        }
    }

    /// A handle on `ctl`.
    ///
    /// # Safety
    /// `ctl` must stay valid for as long as the CoopMem is used; one receiver and one
    /// sender use it.
    pub unsafe fn from_ctl(ctl: *const CoopCtl) -> CoopMem {
        CoopMem { ctl }
    }

    fn claim(&self) -> &AtomicU64 {
        // SAFETY: valid and aligned for the area's lifetime (constructor contract).
        unsafe { &(*self.ctl).claim.0 }
    }

    fn done(&self) -> &AtomicU64 {
        // SAFETY: as above.
        unsafe { &(*self.ctl).done.0 }
    }

    /// Receiver: opens transfer `seq` of `chunks` chunks (1..=[`MAX_CHUNKS`]). The previous
    /// transfer must be finished (every chunk the sender claimed reported).
    pub fn open(&self, seq: u32, chunks: usize) {
        debug_assert!((1..=MAX_CHUNKS).contains(&chunks));
        self.done().store(pack(seq, 0, 0), Ordering::Relaxed);
        // Release: a sender whose claim reads this word also sees the reset done word.
        self.claim()
            .store(pack(seq, 0, chunks as u64), Ordering::Release);
    }

    /// Receiver: stops handing out chunks of transfer `seq` (the sender claims nothing
    /// more; chunks it already claimed are still reported).
    pub fn close(&self, seq: u32) {
        self.claim().store(pack(seq, 0, 0), Ordering::Release);
    }

    fn take(&self, seq: u32, front: bool) -> Option<(usize, usize)> {
        let c = self.claim();
        let mut w = c.load(Ordering::Acquire);
        loop {
            let (s, lo, hi) = unpack(w);
            if s != seq & SEQ_MASK || lo >= hi {
                return None;
            }
            let k = ((hi - lo) / CLAIM_DIVISOR).max(1);
            let (nw, first) = if front {
                (pack(s, lo + k, hi), lo)
            } else {
                (pack(s, lo, hi - k), hi - k)
            };
            match c.compare_exchange_weak(w, nw, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some((first as usize, k as usize)),
                Err(x) => w = x,
            }
        }
    }

    /// Receiver: claims a run at the front of the unclaimed chunks of transfer `seq`:
    /// `(first chunk, chunks)`.
    pub fn claim_front(&self, seq: u32) -> Option<(usize, usize)> {
        self.take(seq, true)
    }

    /// Sender: claims a run at the back of the unclaimed chunks of transfer `seq`.
    pub fn claim_back(&self, seq: u32) -> Option<(usize, usize)> {
        self.take(seq, false)
    }

    /// Sender: a claimed run of `k` chunks is copied (Release: the copy happened before).
    pub fn report_done(&self, k: usize) {
        self.done()
            .fetch_add((k as u64 & IDX_MASK) << IDX_BITS, Ordering::Release);
    }

    /// Sender: its last claimed run could not be copied (the receiver copies it); the
    /// sender claims nothing more in this transfer.
    pub fn report_failed(&self) {
        self.done().fetch_or(1, Ordering::Release);
    }

    /// Receiver: the sender's account of transfer `seq`: chunks copied, and whether its
    /// last run failed (`None` for a word of another transfer). After a failure the failed
    /// run is the lowest of the sender's: it starts where the receiver's runs end.
    pub fn sender_report(&self, seq: u32) -> Option<(usize, bool)> {
        let (s, n, f) = unpack(self.done().load(Ordering::Acquire));
        (s == seq & SEQ_MASK).then_some((n as usize, f != 0))
    }
}

/// Which large-message mechanism a transfer uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mech {
    /// Pipelined copy through the shared bulk buffer (both sides copy every byte).
    Pipe = 0,
    /// Cooperative single copy (CMA, both sides copy half).
    Coop = 1,
}

impl Mech {
    fn other(self) -> Mech {
        match self {
            Mech::Pipe => Mech::Coop,
            Mech::Coop => Mech::Pipe,
        }
    }
}

/// Size classes with a [`Chooser`] each (the two mechanisms' speeds depend on the size).
pub const SIZE_CLASSES: usize = 4;

/// The size class of an `n`-byte transfer: below 64 KiB, below 256 KiB, below 1 MiB, from
/// 1 MiB. Messages of 16-64 KiB have a class of their own: their rates are a fraction of
/// the larger ones' in either mechanism (fixed costs: the clear-to-send, a CMA call), and
/// which mechanism wins there depends on the workload (a broadcast's unchanged send buffer
/// is read from the receiver's own cache by the single copy; a ping-pong's was just written
/// by the other CPU).
pub fn size_class(n: usize) -> usize {
    match n {
        0..0x1_0000 => 0,
        0x1_0000..0x4_0000 => 1,
        0x4_0000..0x10_0000 => 2,
        _ => 3,
    }
}

/// How long a mechanism's measurement stays good before the chooser tries it again (the
/// shortest interval: each try that confirms the mechanism in use doubles it, up to
/// [`EXPLORE_MAX_NS`]; a switch resets it).
pub const EXPLORE_NS: u64 = 20_000_000;

/// The longest interval between tries of the mechanism not in use.
pub const EXPLORE_MAX_NS: u64 = 320_000_000;

/// A change of the mechanism in use's average rate by this fraction since its last
/// comparison resets the interval between tries (the workload or the placement changed:
/// a ping-pong measures the cooperative copy faster than a stream of messages does).
pub const RATE_CHANGE: f64 = 0.3;

/// Weight of a measurement above the average in the moving average.
pub const RISE: f64 = 0.5;

/// Weight of a measurement below the average. A transfer is slowed down by what else the
/// two processes do (the other direction's copies, a late peer) but never sped up, so a
/// mechanism's capacity shows in its faster measurements: slow ones pull the average down
/// slowly (a bidirectional stream measured its cooperative copies at 4–15 GB/s in turn, and
/// a symmetric average made the chooser flip between the two mechanisms), a lasting change
/// still moves it within about 20 measurements.
pub const FALL: f64 = 0.1;

/// Measurements ignored after a switch: the first transfers by the new mechanism overlap
/// the tail of the old one's (a window of messages matched before the switch, and in a
/// bidirectional stream the peer's own transfers) and measure slow (cooperative copies in
/// a stream at 4 MiB: 5, 7, 9, 12, then 15 GB/s; in a bidirectional one at 1 MiB: 4, 7, 9,
/// 10, then 12). A fresh chooser ignores its first transfers too: they touch the buffers
/// and the bulk buffer for the first time (the first 1 MiB transfer of an alltoall at np=2
/// measured 28 ms against 0.06-0.13 ms for the next ones), and measured they made the
/// pipeline look slower than the cooperative copy for a whole exploration interval.
pub const WARMUP: u32 = 4;

/// Measurements of the current mechanism after a switch before the chooser compares.
pub const SETTLE: u32 = 4;

/// How much faster (as a factor) the other mechanism's rate must be to switch to it.
pub const HYSTERESIS: f64 = 1.1;

/// Weight of the pipelined copy's measured rate when the two are compared: the cooperative
/// copy must be this much faster to be preferred. A transfer's rate is measured in one
/// direction; when both directions are busy, the two cooperative copies compete for both
/// CPUs (each side mostly copies its own receives alone) while the pipelined copies share
/// them, so the measured per-direction rates undervalue the pipeline (bibw 1 MiB near:
/// pipelined 25 GB/s in all, cooperative 14, with per-direction rates 12 and 9–12). Not
/// applied by [`Chooser::both_ways`], whose two mechanisms are measured in the same
/// traffic.
pub const PIPE_WEIGHT: f64 = 1.4;

/// Per-peer choice between [`Mech::Pipe`] and [`Mech::Coop`] by measured throughput (the
/// placement of the two processes' CPUs decides which is faster, and it can change while
/// a job runs). It keeps using the current mechanism and keeps a moving average of its
/// rate (the first measurement after a switch replaces the old average; faster
/// measurements weigh [`RISE`], slower ones [`FALL`]); after [`SETTLE`]
/// measurements it compares: it switches when the other mechanism's last average is
/// [`HYSTERESIS`] times higher, or, to notice a change of placement, tries the other one
/// when it has not been measured for an interval ([`EXPLORE_NS`], doubled by every try that
/// confirms the mechanism in use, up to [`EXPLORE_MAX_NS`]: a try of the pipelined copy
/// costs all the messages matched before its measurements come back). Sans-IO: times come
/// in as nanoseconds.
#[derive(Clone, Debug)]
pub struct Chooser {
    cur: Mech,
    /// Average bytes per nanosecond of each mechanism (0: never measured).
    rate: [f64; 2],
    /// When each was last measured, switched to or switched from (nanoseconds).
    at: [u64; 2],
    /// Measurements of the current mechanism since the last switch.
    taken: u32,
    /// Measurements still to ignore after the last switch ([`WARMUP`]).
    skip: u32,
    /// The current mechanism is being tried (a switch by `choose`, not by a measurement).
    trying: bool,
    /// Interval between tries.
    interval: u64,
    /// The current mechanism's average rate when it was last compared.
    baseline: f64,
    /// Weight of the pipelined copy's rate in the comparison ([`PIPE_WEIGHT`], or 1 for
    /// [`Chooser::both_ways`]).
    pipe_weight: f64,
    /// A one-way chooser, whose pipeline weight follows [`Chooser::receiver_sends`].
    one_way: bool,
    /// [`Chooser::both_ways`]: the average is bytes over time ([`TIME_WEIGHT`]), not the
    /// [`RISE`]/[`FALL`] average of the rates.
    by_time: bool,
    /// With `by_time`: decayed sums of the current mechanism's bytes and nanoseconds.
    sums: (f64, f64),
    /// With `by_time`: transfers in a row left out of the average as interruptions
    /// ([`OUTLIER`]).
    outliers: u32,
    /// One-way: the current mechanism is being measured afresh after an idle period,
    /// before the try that was due ([`Chooser::choose_unless`]).
    refreshing: bool,
}

/// Weight of the newest transfer in the both-ways average ([`Chooser::both_ways`]): the
/// bytes and the nanoseconds of the transfers are each summed with this decay, and the
/// rate is their ratio, so every transfer counts by its time. Two pipelined streams in
/// opposite directions take turns: a receiver's transfers alternate between bursts at
/// the one-way rate and waits while the peer serves the other direction (1 MiB: 9.3 GB/s
/// in the [`RISE`]/[`FALL`] average, which follows the faster ones, against 5-6 GB/s in
/// all), and the chooser then left the single copy after eight transfers of every window.
pub const TIME_WEIGHT: f64 = 0.1;

/// A [`Chooser::both_ways`] transfer that took more than this many times what the
/// average rate gives for its bytes was interrupted (the receiver or the peer descheduled,
/// a page fault): it is left out of the average, unless it is the [`OUTLIER_RUN`]th such
/// transfer in a row (a lasting change). In the bytes-over-time average one interruption
/// weighs by its time: a bidirectional stream of 64 KiB messages read by the receivers
/// at 3.8 us each (17 GB/s) had one read of 86 us, which took the single copy's average
/// to 5.4 GB/s, below the pipeline's older 6.0, and the chooser left the single copy for
/// a pipeline that moved 9 GB/s per direction against the reads' 18.
pub const OUTLIER: f64 = 8.0;

/// Interrupted transfers in a row ([`OUTLIER`]) after which they count: the slowdown lasts.
pub const OUTLIER_RUN: u32 = 3;

impl Default for Chooser {
    fn default() -> Self {
        Chooser {
            pipe_weight: PIPE_WEIGHT,
            one_way: true,
            by_time: false,
            sums: (0.0, 0.0),
            outliers: 0,
            refreshing: false,
            cur: Mech::Pipe,
            rate: [0.0; 2],
            at: [0; 2],
            taken: 0,
            skip: WARMUP,
            trying: false,
            interval: EXPLORE_NS,
            baseline: 0.0,
        }
    }
}

impl Chooser {
    /// A chooser for the messages that arrive while the receiver is sending rendezvous
    /// messages to the same peer, where [`Mech::Coop`] stands for the receiver's single copy
    /// alone (the sender's CPU is busy with its own receives): both mechanisms are then
    /// measured in the same traffic, as the time each message adds to the receiver's
    /// stream, so their rates compare as they are (no [`PIPE_WEIGHT`]), each averaged as
    /// bytes over time ([`TIME_WEIGHT`]).
    pub fn both_ways() -> Chooser {
        Chooser {
            pipe_weight: 1.0,
            one_way: false,
            by_time: true,
            ..Chooser::default()
        }
    }

    /// This chooser, beginning with `m` instead of the pipeline.
    pub fn starting_with(self, m: Mech) -> Chooser {
        Chooser { cur: m, ..self }
    }

    /// For a one-way chooser ([`Chooser::default`]): whether the receiver has rendezvous
    /// sends of its own under way, which decides the pipeline's weight in the comparisons
    /// from now on. [`PIPE_WEIGHT`] applies only then: the cooperative copies of both
    /// directions competing for both CPUs is what undervalues the pipeline. A receiver that
    /// sends nothing large compares the rates as measured (a one-way stream of 64 KiB
    /// messages measured its tries of the cooperative copy at 22-24 GB/s against the
    /// pipeline's 18-19, short of the 1.54x that weight and [`HYSTERESIS`] ask, and kept the
    /// pipeline, 17.9 GB/s in all against the single copy's 27.7, for whole measurements).
    /// No effect on [`Chooser::both_ways`] and [`Chooser::exchanges`].
    pub fn receiver_sends(&mut self, sends: bool) {
        if self.one_way {
            self.pipe_weight = if sends { PIPE_WEIGHT } else { 1.0 };
        }
    }

    /// A chooser for exchanges of one message each way while both directions are busy
    /// (`btl::sm::two_way`): the two mechanisms of [`Chooser::both_ways`], each sample the
    /// time of a whole exchange, compared as they are, averaged by [`RISE`] and [`FALL`]
    /// (an exchange is slowed down by a late or descheduled peer, never sped up: one that
    /// waited 1.7 ms for its peer weighed as much as two hundred 8 us ones in the average of
    /// bytes over time).
    pub fn exchanges() -> Chooser {
        Chooser {
            pipe_weight: 1.0,
            one_way: false,
            ..Chooser::default()
        }
    }

    /// The mechanism for a transfer starting at `now`.
    pub fn choose(&mut self, now: u64) -> Mech {
        self.choose_unless(now, false)
    }

    /// [`Chooser::choose`], except that with `no_pipe_try` no try of the pipeline begins
    /// (the single copy in use stays, and the try comes with a later transfer once it may
    /// begin): in a stream both ways, a pipelined transfer tried while the peer reads our
    /// messages alone cannot be measured. The peer reads our requests-to-send in order and
    /// our clear-to-sends queue behind them, so the tried transfers wait until it has read
    /// all of ours and then run one way, after our sends ([`Chooser::unmeasured`]: the try
    /// ends as one that confirmed the single copy), at the cost of every message chosen
    /// meanwhile (bibw at 4 MiB: the rest of a 64-message window, half the throughput).
    ///
    /// A try that comes due when the mechanism in use was itself idle for longer than
    /// [`EXPLORE_NS`] (no transfer of this size class since: the workload may have changed) first
    /// measures the mechanism in use afresh ([`WARMUP`] and [`SETTLE`] transfers, its old
    /// average dropped), once, and only then begins: otherwise the try would be compared
    /// with a rate of another workload. The full p2p run measures bw 64 KiB right after
    /// ping-pongs of 64-128 KiB and larger sizes: the cooperative copy's ping-pong rate
    /// (17 GB/s) against the pipeline's streaming 18-19 kept the tried pipeline, and its
    /// 20 ms until the next try of the single copy (22-24 GB/s in the stream) were most of
    /// the 30 ms the bw row lasts (the sizes between the two took from 50 ms, less than the
    /// interval, which tries confirming the single copy had doubled, to seconds). Only one-way choosers ([`Chooser::default`]) do this:
    /// the two-way ones see pauses between the windows of one workload, and their tries
    /// after such a pause are meant to come at once.
    pub fn choose_unless(&mut self, now: u64, no_pipe_try: bool) -> Mech {
        let other = self.cur.other() as usize;
        if self.taken >= SETTLE
            && !(no_pipe_try && self.cur == Mech::Coop)
            && (self.rate[other] == 0.0 || now.saturating_sub(self.at[other]) > self.interval)
        {
            let k = self.cur as usize;
            if self.one_way
                && !self.refreshing
                && self.rate[k] > 0.0
                && now.saturating_sub(self.at[k]) > EXPLORE_NS
            {
                self.refreshing = true;
                self.taken = 0;
                self.skip = WARMUP;
                self.outliers = 0;
                self.at[k] = now;
            } else {
                self.switch(now);
                self.trying = true;
            }
        }
        self.cur
    }

    fn switch(&mut self, now: u64) {
        // The mechanism left was in use until now, so the next try of it comes an interval
        // after this, not after its last measurement: a try of the pipeline in a
        // bidirectional stream of 4 MiB windows lasts the rest of a window, 70 ms and more,
        // longer than the interval, and ends without a measurement (`unmeasured`); the
        // next window tried it again after its first WARMUP + SETTLE transfers, and 80% of
        // the messages went by the pipeline. Likewise a try that begins long after the
        // last measurement (a pause between windows) would end in another try at once.
        self.at[self.cur as usize] = now;
        self.cur = self.cur.other();
        self.at[self.cur as usize] = now;
        self.taken = 0;
        self.skip = WARMUP;
        self.trying = false;
        self.outliers = 0;
        self.refreshing = false;
    }

    /// A transfer by `m` moved `bytes` in `ns` nanoseconds, ending at `now`. Measurements of
    /// the mechanism not in use are ignored (begun before the last switch, their time
    /// overlaps the other mechanism's). Returns `true` if it made the chooser switch.
    pub fn record(&mut self, m: Mech, bytes: usize, ns: u64, now: u64) -> bool {
        if m != self.cur || ns == 0 || self.warming_up(m, now) {
            return false;
        }
        let r = bytes as f64 / ns as f64;
        let k = m as usize;
        let pipe_weight = self.pipe_weight;
        let weight = |m: Mech| if m == Mech::Pipe { pipe_weight } else { 1.0 };
        if self.by_time && self.taken > 0 && self.rate[k] > 0.0 {
            if ns as f64 > OUTLIER * bytes as f64 / self.rate[k] && self.outliers + 1 < OUTLIER_RUN
            {
                self.outliers += 1;
                return false;
            }
            self.outliers = 0;
        }
        self.rate[k] = if self.by_time {
            let (b, t) = if self.taken == 0 {
                (0.0, 0.0)
            } else {
                self.sums
            };
            let w = 1.0 - TIME_WEIGHT;
            self.sums = (w * b + bytes as f64, w * t + ns as f64);
            self.sums.0 / self.sums.1
        } else if self.taken == 0 {
            r
        } else {
            let w = if r > self.rate[k] { RISE } else { FALL };
            (1.0 - w) * self.rate[k] + w * r
        };
        self.at[k] = now;
        self.taken = self.taken.saturating_add(1);
        let o = m.other();
        let switch = self.taken >= SETTLE
            && weight(o) * self.rate[o as usize] > HYSTERESIS * weight(m) * self.rate[k];
        if self.taken == SETTLE {
            self.baseline = self.rate[k];
        } else if self.taken > SETTLE
            && (self.rate[k] - self.baseline).abs() > RATE_CHANGE * self.baseline
        {
            self.interval = EXPLORE_NS;
            self.baseline = self.rate[k];
        }
        let ends_try = self.taken == SETTLE && self.trying;
        if ends_try {
            // A try ends: back off when it confirmed the mechanism in use before it.
            self.interval = if switch {
                (self.interval * 2).min(EXPLORE_MAX_NS)
            } else {
                EXPLORE_NS
            };
            self.trying = false;
        } else if switch {
            self.interval = EXPLORE_NS;
        }
        if switch {
            self.switch(now);
            // Both ways, a switch by a measurement of the mechanism in use (not the end of
            // a try) is a try of the other one: a pipeline chosen while the peer reads our
            // messages alone is not measured (its transfers end after our sends,
            // `unmeasured`), and without a try to end the chooser stayed on it, unmeasured,
            // until the single copy's next try (bibw 64 KiB: 18 ms of the pipeline at half
            // the throughput).
            self.trying = self.by_time && !ends_try;
        }
        switch
    }

    /// A transfer by `m`, the mechanism in use, ended at `now` among the first ones after a
    /// switch, which are ignored ([`WARMUP`]): counts it. `false` once they are over.
    fn warming_up(&mut self, m: Mech, now: u64) -> bool {
        if self.skip == 0 {
            return false;
        }
        self.skip -= 1;
        self.at[m as usize] = now;
        true
    }

    /// A transfer by `m` ended, at `now`, in traffic it cannot be measured in: a
    /// [`Chooser::both_ways`] transfer that ended after the receiver's own sends to the
    /// peer (a pipelined copy tried while the peer reads our messages by single copy waits
    /// until the peer has read them all, then runs alone: one-way 4 MiB messages measured
    /// 11 GB/s there against the two-way single copy's 10, and the chooser took the
    /// pipeline for whole windows of messages, at half the two-way throughput). During a
    /// try of `m` this ends the try as one that confirmed the mechanism before it (back to
    /// it, the interval between tries doubled and counted from now). Otherwise, for the
    /// mechanism in use, it counts as a transfer taken without a rate (the last transfers
    /// of a stream's window; a chooser that ignored such transfers never settled where
    /// every transfer was one). Exchanges of one message each way, whose pipelined
    /// receives all end after our send, are measured as whole exchanges instead
    /// (`btl::sm::two_way`). Returns `true` if it made the chooser switch.
    pub fn unmeasured(&mut self, m: Mech, now: u64) -> bool {
        if m != self.cur {
            return false;
        }
        if !self.trying {
            if !self.warming_up(m, now) {
                self.taken = self.taken.saturating_add(1);
                self.at[m as usize] = now;
            }
            return false;
        }
        self.interval = (self.interval * 2).min(EXPLORE_MAX_NS);
        self.switch(now);
        true
    }

    /// `m`, not in use, was measured elsewhere at `rate` (bytes per nanosecond) until `now`:
    /// its next try comes an interval after `now` ([`Chooser::choose_unless`]), and is
    /// compared with `rate` until then. No effect on the mechanism in use.
    pub fn note(&mut self, m: Mech, rate: f64, now: u64) {
        if m != self.cur {
            self.rate[m as usize] = rate;
            self.at[m as usize] = now;
        }
    }

    /// Whether the mechanism in use is being tried: a switch by [`Chooser::choose`] whose
    /// [`WARMUP`] and [`SETTLE`] measurements are not all in yet.
    pub fn trying(&self) -> bool {
        self.trying
    }

    /// The mechanism in use.
    pub fn current(&self) -> Mech {
        self.cur
    }

    /// The average rates (bytes per nanosecond = GB/s) of the pipelined and the
    /// cooperative copy (0: never measured).
    pub fn rates(&self) -> (f64, f64) {
        (
            self.rate[Mech::Pipe as usize],
            self.rate[Mech::Coop as usize],
        )
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[repr(C, align(64))]
    struct Area([u8; COOP_CTL]);

    fn area() -> Box<Area> {
        Box::new(Area([0; COOP_CTL]))
    }

    #[test]
    fn chunk_sizes_cover_any_length() {
        // The default of btl_sm_coop_chunk_size.
        const DEFAULT_CHUNK: usize = 16 << 10;
        assert_eq!(chunk_size(1, DEFAULT_CHUNK), DEFAULT_CHUNK);
        assert_eq!(chunk_size(16 << 10, DEFAULT_CHUNK), DEFAULT_CHUNK);
        // Up to 1 MiB a message is cut in two (halves rounded up to pages: the second
        // chunk holds the rest), into no chunk below the parameter's.
        assert_eq!(chunk_size(20 << 10, DEFAULT_CHUNK), DEFAULT_CHUNK);
        assert_eq!(chunk_size(32 << 10, DEFAULT_CHUNK), 16 << 10);
        assert_eq!(chunk_size(64 << 10, DEFAULT_CHUNK), 32 << 10);
        assert_eq!(chunk_size(256 << 10, DEFAULT_CHUNK), 128 << 10);
        assert_eq!(chunk_size(100_000, DEFAULT_CHUNK), 53_248);
        assert_eq!(100_000usize.div_ceil(53_248), 2);
        assert_eq!(chunk_size(1 << 20, DEFAULT_CHUNK), HALF_MAX);
        assert_eq!(chunk_size(1 << 20, 5000), HALF_MAX);
        // Larger messages in chunks of HALF_MAX, or of the parameter when it is larger.
        assert_eq!(chunk_size(8 << 20, DEFAULT_CHUNK), HALF_MAX);
        assert_eq!(chunk_size(8 << 20, 1 << 20), 1 << 20);
        assert_eq!(chunk_size(20_000, 5000), 12_288);
        let big = DEFAULT_CHUNK * MAX_CHUNKS * 3;
        let c = chunk_size(big, DEFAULT_CHUNK);
        assert!(big.div_ceil(c) <= MAX_CHUNKS && c % 4096 == 0);
        assert_eq!(next_seq(SEQ_MASK), 1);
        assert_eq!(
            [
                16 << 10,
                (64 << 10) - 1,
                64 << 10,
                256 << 10,
                (1 << 20) - 1,
                1 << 20,
                1 << 30
            ]
            .map(size_class),
            [0, 0, 1, 2, 2, 3, 3]
        );
        assert_eq!(next_seq(7), 8);
    }

    #[test]
    fn both_ends_claim_every_chunk_once() {
        let mut a = area();
        // SAFETY: a zeroed, aligned COOP_CTL-byte area that outlives `m`.
        let m = unsafe { CoopMem::from_raw(a.0.as_mut_ptr()) };
        assert_eq!(m.claim_front(1), None, "nothing open yet");
        m.open(1, 20);
        // A quarter of what is left, at least one chunk.
        assert_eq!(m.claim_front(1), Some((0, 5)));
        assert_eq!(m.claim_back(1), Some((17, 3)));
        assert_eq!(m.claim_back(2), None, "another transfer's clear-to-send");
        assert_eq!(m.claim_back(1), Some((14, 3)));
        assert_eq!(m.claim_front(1), Some((5, 2)));
        let mut rest = Vec::new();
        while let Some(r) = m.claim_front(1) {
            rest.push(r);
        }
        assert_eq!(
            rest,
            vec![(7, 1), (8, 1), (9, 1), (10, 1), (11, 1), (12, 1), (13, 1)]
        );
        assert_eq!(m.claim_back(1), None);
        assert_eq!(m.sender_report(1), Some((0, false)));
        m.report_done(3);
        m.report_done(3);
        assert_eq!(m.sender_report(1), Some((6, false)));
        assert_eq!(m.sender_report(2), None);
        // The next transfer resets the sender's account.
        m.open(2, 3);
        assert_eq!(m.sender_report(2), Some((0, false)));
        assert_eq!(m.claim_back(2), Some((2, 1)));
        m.report_failed();
        assert_eq!(m.sender_report(2), Some((0, true)));
        m.close(2);
        assert_eq!(m.claim_front(2), None);
        assert_eq!(m.claim_back(2), None);
    }

    #[test]
    fn concurrent_claims_partition_the_chunks() {
        let mut a = area();
        // SAFETY: as above; the area outlives both threads (scoped).
        let m = unsafe { CoopMem::from_raw(a.0.as_mut_ptr()) };
        for seq in 1..200u32 {
            let chunks = 1 + (seq as usize * 37) % 300;
            m.open(seq, chunks);
            let (front, back) = std::thread::scope(|s| {
                let h = s.spawn(|| {
                    let mut got = Vec::new();
                    while let Some((k, n)) = m.claim_back(seq) {
                        got.push((k, n));
                        m.report_done(n);
                    }
                    got
                });
                let mut got = Vec::new();
                while let Some(r) = m.claim_front(seq) {
                    got.push(r);
                }
                (got, h.join().unwrap())
            });
            // The receiver's runs are a prefix in order, the sender's the rest, descending.
            let mut next = 0;
            for &(k, n) in &front {
                assert_eq!(k, next);
                next += n;
            }
            let mut end = chunks;
            for &(k, n) in &back {
                assert_eq!(k + n, end);
                end = k;
            }
            assert_eq!(next, end, "runs meet without gap or overlap");
            let theirs: usize = back.iter().map(|r| r.1).sum();
            assert_eq!(m.sender_report(seq), Some((theirs, false)));
        }
    }

    /// Feeds 1 MiB transfers of `ns` nanoseconds by `m`, which the chooser must be using,
    /// until it compares them with the other mechanism (its warm-up and [`SETTLE`]).
    fn settle(c: &mut Chooser, m: Mech, ns: u64, t: &mut u64) {
        assert_eq!(c.choose(*t), m);
        for _ in 0..SETTLE + c.skip {
            assert_eq!(c.choose(*t), m);
            c.record(m, 1 << 20, ns, *t);
            *t += 1000;
        }
    }

    #[test]
    fn chooser_retries_soon_when_the_rate_in_use_changes() {
        let mut c = Chooser::default();
        let mib = 1 << 20;
        let mut t = 1_000u64;
        settle(&mut c, Mech::Pipe, 200_000, &mut t);
        settle(&mut c, Mech::Coop, 45_000, &mut t);
        assert_eq!(c.current(), Mech::Coop);
        c.interval = EXPLORE_MAX_NS;
        // Steady: the interval stays.
        for _ in 0..10 {
            c.record(Mech::Coop, mib, 46_000, t);
            t += 1000;
        }
        assert_eq!(c.interval, EXPLORE_MAX_NS);
        // From ping-pong to streaming: the coop rate drops by a third; tries come soon (the
        // average falls slowly: a few slow transfers are not a change).
        for _ in 0..3 {
            c.record(Mech::Coop, mib, 75_000, t);
            t += 1000;
        }
        assert_eq!(c.interval, EXPLORE_MAX_NS);
        for _ in 0..17 {
            c.record(Mech::Coop, mib, 75_000, t);
            t += 1000;
        }
        assert_eq!(c.interval, EXPLORE_NS);
    }

    #[test]
    fn chooser_prefers_the_pipeline_unless_coop_is_clearly_faster() {
        let mut c = Chooser::default();
        let mut t = 1_000u64;
        // Per-direction rates of a bidirectional run: pipelined 12, cooperative 14 GB/s.
        settle(&mut c, Mech::Pipe, 87_000, &mut t);
        settle(&mut c, Mech::Coop, 75_000, &mut t);
        assert_eq!(c.current(), Mech::Pipe, "14 is not 1.54 x 12");
        // One-directional, CPUs far apart: pipelined 5, cooperative 14.
        let mut c = Chooser::default();
        let mut t = 1_000u64;
        settle(&mut c, Mech::Pipe, 210_000, &mut t);
        settle(&mut c, Mech::Coop, 75_000, &mut t);
        assert_eq!(c.current(), Mech::Coop);
    }

    /// A one-way stream of 64 KiB messages (bw, np=2), as `btl_base_verbose=20` measured
    /// it: the pipeline at 19.0 GB/s (3450 ns a message), the cooperative copy at 23.0 GB/s
    /// (2850 ns) in its tries. Weighed up by [`PIPE_WEIGHT`], the pipeline (1.4 x 19.0 =
    /// 26.6) beat 1.1 x 23.0 = 25.3: every try of the single copy ended back on the
    /// pipeline, the interval between tries doubled up to [`EXPLORE_MAX_NS`], and whole
    /// measurements ran at the pipeline's rate. A receiver without rendezvous sends of its
    /// own compares the rates as measured and stays on the single copy.
    #[test]
    fn one_way_stream_converges_to_the_faster_single_copy() {
        let run = |sends: bool| {
            let mut c = Chooser::default();
            let n = 64 << 10;
            let mut t = 1_000u64;
            let mut coop = 0u64;
            let mut all = 0u64;
            // 200 ms of back-to-back transfers, the first four cold.
            let mut cold = [98_849u64, 29_608, 30_853, 36_132].into_iter();
            while t < 200_000_000 {
                c.receiver_sends(sends);
                let m = c.choose(t);
                let ns = cold.next().unwrap_or(match m {
                    Mech::Pipe => 3450,
                    Mech::Coop => 2850,
                });
                t += ns;
                c.record(m, n, ns, t);
                all += 1;
                coop += u64::from(m == Mech::Coop);
            }
            (coop as f64 / all as f64, c.current())
        };
        let (share, m) = run(false);
        assert_eq!(m, Mech::Coop);
        assert!(share > 0.99, "single copy for {share} of the transfers");
        // While the receiver sends too, the pipeline stays weighed up (as before).
        let (share, m) = run(true);
        assert_eq!(m, Mech::Pipe);
        assert!(share < 0.01, "single copy for {share} of the transfers");
    }

    #[test]
    fn both_ways_chooser_compares_the_rates_as_measured() {
        // Both directions busy, CPUs far apart: per direction, the pipeline moves 5 GB/s
        // and the receiver's single copy alone 6 GB/s (bibw 10 against 12 GB/s in all).
        let (pipe, cma) = (210_000, 175_000);
        let mut t = 1_000u64;
        let mut c = Chooser::both_ways();
        settle(&mut c, Mech::Pipe, pipe, &mut t);
        settle(&mut c, Mech::Coop, cma, &mut t);
        assert_eq!(c.current(), Mech::Coop, "6 GB/s is 1.2 x 5");
        // The one-way chooser weighs the pipeline up (1.4 x 5 > 1.1 x 6) and would keep it.
        let mut c = Chooser::default();
        let mut t = 1_000u64;
        settle(&mut c, Mech::Pipe, pipe, &mut t);
        settle(&mut c, Mech::Coop, cma, &mut t);
        assert_eq!(c.current(), Mech::Pipe);
        // CPUs sharing a cache: the pipeline at 12, the single copy at 9 GB/s.
        let mut c = Chooser::both_ways();
        let mut t = 1_000u64;
        settle(&mut c, Mech::Pipe, 87_000, &mut t);
        settle(&mut c, Mech::Coop, 116_000, &mut t);
        assert_eq!(c.current(), Mech::Pipe);
    }

    /// Windows of 64 messages of 4 MiB each way, CPUs far apart: the pipeline moves
    /// 5 GB/s per direction when both use it, the receiver's single copy 10 GB/s while the
    /// peer reads ours. A try of the pipeline while the peer reads ours by single copy
    /// waits for the peer to finish them (the first message, a warm-up one), then runs
    /// alone at the one-way 11 GB/s after our sends are done: not measured, and the try
    /// ends at the first such transfer.
    #[test]
    fn both_ways_tries_end_on_transfers_after_our_sends() {
        // Rates of 4 MiB windows, as 1 MiB transfers ([`settle`]'s size).
        let (two_way_pipe, pull, one_way_pipe) = (210_000, 105_000, 95_000);
        let mib = 1 << 20;
        let mut t = 1_000u64;
        let mut c = Chooser::both_ways();
        settle(&mut c, Mech::Pipe, two_way_pipe, &mut t);
        settle(&mut c, Mech::Coop, pull, &mut t);
        assert_eq!(c.current(), Mech::Coop);
        // A window during which the chooser tries the pipeline: every message is matched
        // (and chosen) before the first one ends.
        let at = c.at[Mech::Pipe as usize] + c.interval + 1;
        let window: Vec<Mech> = (0..64).map(|i| c.choose(at + i)).collect();
        assert!(window.iter().all(|&m| m == Mech::Pipe));
        t = at + 100;
        // The first ends after the peer read all of ours, in its warm-up.
        c.record(Mech::Pipe, mib, 6_700_000, t);
        assert_eq!(c.current(), Mech::Pipe);
        // The next one ends after our sends: the try is over, back to the single copy.
        t += one_way_pipe;
        assert!(c.unmeasured(Mech::Pipe, t));
        assert_eq!(c.current(), Mech::Coop);
        assert_eq!(c.interval, 2 * EXPLORE_NS, "as a try that confirmed coop");
        // The rest of the window changes nothing.
        for _ in 0..62 {
            t += one_way_pipe;
            assert!(!c.unmeasured(Mech::Pipe, t));
        }
        assert!((c.rates().0 - mib as f64 / two_way_pipe as f64).abs() < 1e-9);
        // Measured instead, the one-way transfers (11 GB/s) would have beaten the
        // single copy (10 GB/s) and kept the pipeline for the next windows.
        let mut m = Chooser::both_ways();
        let mut t = 1_000u64;
        settle(&mut m, Mech::Pipe, two_way_pipe, &mut t);
        settle(&mut m, Mech::Coop, pull, &mut t);
        let at = m.at[Mech::Pipe as usize] + m.interval + 1;
        assert_eq!(m.choose(at), Mech::Pipe);
        t = at + 100;
        m.record(Mech::Pipe, mib, 6_700_000, t);
        for _ in 0..63 {
            t += one_way_pipe;
            m.record(Mech::Pipe, mib, one_way_pipe, t);
        }
        assert_eq!(m.current(), Mech::Pipe);
        // Outside a try (both directions pipelined, the pipeline chosen on its two-way
        // rate), transfers after our sends do not switch.
        let mut c = Chooser::both_ways();
        let mut t = 1_000u64;
        settle(&mut c, Mech::Pipe, two_way_pipe, &mut t);
        settle(&mut c, Mech::Coop, 2 * two_way_pipe, &mut t);
        assert_eq!(c.current(), Mech::Pipe);
        assert!(!c.unmeasured(Mech::Pipe, t));
        assert!(!c.unmeasured(Mech::Coop, t));
        assert_eq!(c.current(), Mech::Pipe);
    }

    /// A both-ways chooser settled on the receivers' single copy (1 MiB in `pull` ns; the
    /// pipeline measured at 1 MiB in 175 us), and the clock after it.
    fn both_ways_on_the_single_copy(pull: u64) -> (Chooser, u64) {
        let mut c = Chooser::both_ways();
        let mut t = 1_000u64;
        settle(&mut c, Mech::Pipe, 175_000, &mut t);
        settle(&mut c, Mech::Coop, pull, &mut t);
        assert_eq!(c.current(), Mech::Coop);
        (c, t)
    }

    /// A bidirectional stream on the receivers' single copy (17 GB/s per direction; the
    /// pipeline measured 6 GB/s): one read interrupted for 22 times its time leaves the
    /// average alone, a lasting slowdown still moves it.
    #[test]
    fn both_ways_ignores_an_interrupted_transfer() {
        let mib = 1 << 20;
        let pull = 61_700;
        let (mut c, mut t) = both_ways_on_the_single_copy(pull);
        let steady = c.rates().1;
        for i in 0..40 {
            let ns = if i == 20 { 22 * pull } else { pull };
            assert!(!c.record(Mech::Coop, mib, ns, t));
            t += ns;
        }
        assert_eq!(c.current(), Mech::Coop);
        assert!((c.rates().1 - steady).abs() < 1e-9, "{}", c.rates().1);
        // Interruptions in a row are a lasting change: the pipeline is faster now.
        let mut switched = false;
        for _ in 0..OUTLIER_RUN + 2 {
            switched |= c.record(Mech::Coop, mib, 22 * pull, t);
            t += 22 * pull;
        }
        assert!(switched);
        assert_eq!(c.current(), Mech::Pipe);
    }

    /// A switch from the single copy to the pipeline by the single copy's measurements is
    /// a try of the pipeline: while the peer reads our messages alone, the pipelined
    /// transfers end after our sends, unmeasured, and the first one ends the try.
    #[test]
    fn both_ways_switch_by_measurement_ends_on_an_unmeasured_transfer() {
        let mib = 1 << 20;
        let pull = 61_700;
        let (mut c, mut t) = both_ways_on_the_single_copy(pull);
        // The reads slow down to 2.6 GB/s (not interruptions: 6.5 times their time).
        let mut n = 0;
        while !c.record(Mech::Coop, mib, 400_000, t) {
            t += 400_000;
            n += 1;
            assert!(n < 40, "still the single copy");
        }
        assert_eq!(c.current(), Mech::Pipe);
        t += 1_000;
        assert_eq!(c.choose(t), Mech::Pipe);
        t += 95_000;
        assert!(c.unmeasured(Mech::Pipe, t), "the try ends");
        assert_eq!(c.current(), Mech::Coop);
        assert_eq!(c.interval, 2 * EXPLORE_NS);
    }

    /// Windows of 64 messages of 4 MiB each way on the single copy (40 ms a window): a try
    /// of the pipeline takes the rest of its window (every message is matched before the
    /// first ends) and lasts 70 ms, longer than the interval between tries. The next try
    /// comes a doubled interval after the try ended, not after it began: the following
    /// windows stay on the single copy.
    #[test]
    fn both_ways_next_try_counts_from_the_end_of_the_last() {
        let size = 4 << 20;
        let (two_way_pipe, pull) = (840_000, 420_000);
        let mut c = Chooser::both_ways();
        let mut t = 1_000u64;
        for _ in 0..WARMUP + SETTLE {
            assert_eq!(c.choose(t), Mech::Pipe);
            c.record(Mech::Pipe, size, two_way_pipe, t + two_way_pipe);
            t += two_way_pipe;
        }
        // A window on the single copy: pulls one after another, each chosen as it comes.
        let window = |c: &mut Chooser, t: &mut u64| -> Vec<Mech> {
            (0..64)
                .map(|_| {
                    let m = c.choose(*t);
                    if m == Mech::Coop {
                        c.record(m, size, pull, *t + pull);
                        *t += pull;
                    }
                    m
                })
                .collect()
        };
        for _ in 0..WARMUP + SETTLE {
            assert_eq!(c.choose(t), Mech::Coop);
            c.record(Mech::Coop, size, pull, t + pull);
            t += pull;
        }
        // The try: the whole next window by the pipeline, matched at once.
        t = c.at[Mech::Pipe as usize] + c.interval + 1;
        assert!((0..64).all(|i| c.choose(t + i) == Mech::Pipe));
        // Its first transfers end in their warm-up, then one after our sends ends it, 70 ms
        // after it began.
        for _ in 0..WARMUP {
            t += 4_000_000;
            c.record(Mech::Pipe, size, 4_000_000, t);
        }
        t += 54_000_000;
        assert!(c.unmeasured(Mech::Pipe, t));
        assert_eq!(c.interval, 2 * EXPLORE_NS);
        // The rest of the try's window ends, then the next windows (40 ms each) keep the
        // single copy for the doubled interval after the try's end.
        for _ in 0..59 {
            t += 200_000;
            assert!(!c.unmeasured(Mech::Pipe, t));
        }
        let end = t;
        while t + 64 * pull <= end + 2 * EXPLORE_NS {
            assert!(
                window(&mut c, &mut t).iter().all(|&m| m == Mech::Coop),
                "tried again {} ms after the last try ended",
                (t - end) / 1_000_000
            );
        }
    }

    /// `choose_unless` holds back only a try of the pipeline: a chooser on the pipeline
    /// still tries the single copy (its own reads are measured whatever the peer does).
    #[test]
    fn no_pipe_try_still_tries_the_single_copy() {
        let mut c = Chooser::both_ways();
        let mut t = 1_000u64;
        for _ in 0..WARMUP + SETTLE {
            assert_eq!(c.choose_unless(t, true), Mech::Pipe);
            c.record(Mech::Pipe, 1 << 20, 100_000, t + 100_000);
            t += 100_000;
        }
        assert_eq!(c.choose_unless(t, true), Mech::Coop);
    }

    /// The single copy is tried long after the pipeline's last measurement (a pause
    /// between windows, or the pipeline's slow transfers of a loaded host): once it has
    /// settled, the pipeline is not tried again before an interval has passed since the
    /// switch.
    #[test]
    fn both_ways_next_try_counts_from_the_switch() {
        let size = 4 << 20;
        let mut c = Chooser::both_ways();
        let mut t = 1_000u64;
        for _ in 0..WARMUP + SETTLE {
            assert_eq!(c.choose(t), Mech::Pipe);
            c.record(Mech::Pipe, size, 30_000_000, t + 30_000_000);
            t += 30_000_000;
        }
        t += 200_000_000;
        let from = t;
        assert_eq!(c.choose(t), Mech::Coop);
        while t < from + EXPLORE_NS {
            assert_eq!(
                c.choose(t),
                Mech::Coop,
                "tried again {} us after the switch",
                (t - from) / 1000
            );
            c.record(Mech::Coop, size, 700_000, t + 700_000);
            t += 700_000;
        }
    }

    /// Pipelined receives that all end after our sends, so none is a two-way sample (as
    /// every exchange of one message each way did before exchanges were measured whole,
    /// `btl::sm::two_way`): the chooser still settles, tries the receiver's single copy,
    /// keeps it, and its later tries of the pipeline end at once.
    #[test]
    fn both_ways_exchange_of_single_messages_reaches_the_single_copy() {
        let mut c = Chooser::both_ways();
        let mut t = 1_000u64;
        for _ in 0..WARMUP + SETTLE {
            assert_eq!(c.choose(t), Mech::Pipe);
            assert!(!c.unmeasured(Mech::Pipe, t + 20_000));
            t += 65_000;
        }
        assert_eq!(
            c.choose(t),
            Mech::Coop,
            "settled on unmeasured transfers, then tried"
        );
        for _ in 0..WARMUP + SETTLE {
            assert_eq!(c.choose(t), Mech::Coop);
            assert!(!c.record(Mech::Coop, 256 << 10, 18_000, t + 18_000));
            t += 36_000;
        }
        assert_eq!(c.current(), Mech::Coop);
        // After the interval the pipeline is tried; its first transfer ends after our send
        // and ends the try.
        t += c.interval + 1;
        assert_eq!(c.choose(t), Mech::Pipe);
        assert!(c.unmeasured(Mech::Pipe, t + 20_000));
        assert_eq!(c.current(), Mech::Coop);
    }

    /// Both directions pipelined, 1 MiB: a receiver's transfers alternate between bursts at
    /// the one-way 11 GB/s (95 us) and waits while the peer serves the other direction
    /// (600 us): 3.0 GB/s in all. The receiver's single copy alone: 7 GB/s (150 us).
    #[test]
    fn both_ways_average_weighs_transfers_by_their_time() {
        let mib = 1 << 20;
        let run = |mut c: Chooser| {
            let mut t = 1_000u64;
            assert_eq!(c.choose(t), Mech::Pipe);
            for i in 0..WARMUP + SETTLE {
                let ns = if i % 2 == 0 { 95_000 } else { 600_000 };
                assert!(!c.record(Mech::Pipe, mib, ns, t));
                t += ns;
            }
            let pipe = c.rates().0;
            assert_eq!(c.choose(t), Mech::Coop, "the single copy is tried");
            for _ in 0..WARMUP + SETTLE {
                c.record(Mech::Coop, mib, 150_000, t);
                t += 150_000;
            }
            (pipe, c.current())
        };
        let (pipe, m) = run(Chooser::both_ways());
        assert!((2.5..3.5).contains(&pipe), "{pipe}");
        assert_eq!(m, Mech::Coop);
        // The average of the rates follows the bursts and keeps the pipeline.
        let (pipe, m) = run(Chooser {
            by_time: false,
            ..Chooser::both_ways()
        });
        assert!(pipe > 9.0, "{pipe}");
        assert_eq!(m, Mech::Pipe);
    }

    /// The full p2p run's sequence for one size class (64 KiB - 256 KiB): ping-pongs of
    /// 64 and 128 KiB (`lat`, as `btl_base_verbose=20` measured them: pipelined 9.4 GB/s,
    /// cooperative 17.1), seconds of other sizes, then a one-way stream of 64 KiB messages
    /// (`bw`: pipelined 19.0 GB/s, cooperative 23.0) lasting 30 ms. The stream's first try,
    /// of the pipeline, was compared with the single copy's ping-pong rate and kept the
    /// pipeline until the next try 20 ms later (bw 64 KiB at the pipeline's rate in two of
    /// three repetitions). Measured afresh first, the single copy stays.
    /// One receiver's chooser in a ping-pong of 16 KiB messages, replaying the rates
    /// measured (2 ranks on 2 vCPUs, `chrt -r 1`) in the C benchmark's `lat`, which sends
    /// the buffer it has just received into (pipelined 2.9 us a transfer, single copy 3.85
    /// us: the kernel's copy reads lines the peer just wrote), and in mpi4py's, which sends
    /// an unchanged buffer (pipelined 3.3, single copy 2.05). The first 64 pipelined
    /// transfers go through the 1 MiB bulk buffer's untouched pages (9-14 us each). When
    /// they were measured (`cold`), they made the single copy look faster in its first try
    /// and every later try of the pipeline, alone on one side of the ping-pong, ran
    /// through the rest of the cold pages: `lat` stayed on the single copy (3.85 us against
    /// 2.9). Left out (the sm link marks them `F_COLD`), each benchmark ends on its faster
    /// mechanism. Returns the transfers by each mechanism and the one in use at the end.
    fn ping_pong_16k(pipe: u64, coop: u64, measure_cold: bool) -> ([u32; 2], Mech) {
        let mut c = Chooser::default();
        let (mut t, mut bulk_used, mut n) = (1_000_000u64, 0usize, [0u32; 2]);
        while t < 200_000_000 {
            c.receiver_sends(false);
            let m = c.choose(t);
            let cold = m == Mech::Pipe && bulk_used < 1 << 20;
            let ns = match m {
                Mech::Pipe if cold => 10_000,
                Mech::Pipe => pipe,
                Mech::Coop => coop,
            };
            if m == Mech::Pipe {
                bulk_used += 16 << 10;
            }
            if !cold || measure_cold {
                c.record(m, 16 << 10, ns, t + ns);
            }
            n[m as usize] += 1;
            // The reply's way back and forth.
            t += 2 * ns + 1_000;
        }
        (n, c.current())
    }

    #[test]
    fn ping_pong_settles_on_the_faster_copy_once_the_bulk_pages_are_warm() {
        let (p, c) = (Mech::Pipe as usize, Mech::Coop as usize);
        // C lat: the pipeline.
        let (n, end) = ping_pong_16k(2_900, 3_850, false);
        assert_eq!(end, Mech::Pipe);
        assert!(n[p] > 10 * n[c], "{n:?}");
        // mpi4py: the single copy.
        let (n, end) = ping_pong_16k(3_300, 2_050, false);
        assert_eq!(end, Mech::Coop);
        assert!(n[c] > 10 * n[p], "{n:?}");
        // The cold transfers measured: the C ping-pong was kept on the single copy.
        let (n, end) = ping_pong_16k(2_900, 3_850, true);
        assert_eq!(end, Mech::Coop);
        assert!(n[c] > 10 * n[p], "{n:?}");
    }

    #[test]
    fn a_stream_after_ping_pongs_is_not_judged_by_their_rates() {
        for gap in [50_000_000, 3_000_000_000] {
            stream_after_ping_pongs(gap);
        }
    }

    fn stream_after_ping_pongs(gap: u64) {
        let mut c = Chooser::default();
        let mut t = 1_000_000u64;
        // 300 ms of ping-pongs: a transfer every 22 us.
        let mut lat = [0u64; 2];
        while t < 300_000_000 {
            c.receiver_sends(false);
            let m = c.choose(t);
            let ns = match m {
                Mech::Pipe => 13_944,
                Mech::Coop => 7_665,
            };
            c.record(m, 128 << 10, ns, t + ns);
            lat[m as usize] += 1;
            t += 22_000;
        }
        assert_eq!(c.current(), Mech::Coop);
        assert!(lat[Mech::Coop as usize] > 10 * lat[Mech::Pipe as usize]);
        // Other sizes, then the stream.
        t += gap;
        let end = t + 30_000_000;
        let mut bw = [0u64; 2];
        while t < end {
            c.receiver_sends(false);
            let m = c.choose(t);
            let ns = match m {
                Mech::Pipe => 3450,
                Mech::Coop => 2850,
            };
            t += ns;
            c.record(m, 64 << 10, ns, t);
            bw[m as usize] += 1;
        }
        let share = bw[Mech::Coop as usize] as f64 / (bw[0] + bw[1]) as f64;
        assert!(
            share > 0.99,
            "after {gap} ns: single copy for {share} of the stream ({bw:?})"
        );
        assert_eq!(c.current(), Mech::Coop);
        // The measurement of the mechanism in use happens once per idle period: a sparse
        // stream (a transfer every 30 ms, longer than the interval) still tries the other.
        let mut tried = 0;
        for _ in 0..40 {
            t += 30_000_000;
            let m = c.choose(t);
            tried += u32::from(m == Mech::Pipe);
            c.record(m, 64 << 10, 3000, t + 3000);
        }
        assert!(tried > 0, "the pipeline is still tried in a sparse stream");
    }

    #[test]
    fn chooser_keeps_coop_through_a_run_of_slow_transfers() {
        // Bidirectional stream, CPUs far apart: pipelined 4 GB/s, cooperative 13 GB/s, then
        // ten cooperative transfers at 4.2 GB/s (both sides inside their own receive). With a
        // symmetric average (weight 0.25) it would switch to the pipeline (4.7 * 1.1 < 4 * 1.4).
        let mut c = Chooser::default();
        let mib = 1 << 20;
        let mut t = 1_000u64;
        settle(&mut c, Mech::Pipe, 262_000, &mut t);
        settle(&mut c, Mech::Coop, 80_700, &mut t);
        assert_eq!(c.current(), Mech::Coop);
        for _ in 0..10 {
            c.record(Mech::Coop, mib, 250_000, t);
            t += 1000;
        }
        assert_eq!(c.current(), Mech::Coop);
    }

    /// The first transfers of a job touch cold buffers: the first four pipelined 1 MiB
    /// transfers of an alltoall (np=2) took 28.4 ms, 6.2 ms, 1.1 ms and 186 us, the next ones
    /// 60 us, against 85 us for the receiver's single copy. Measured, the cold ones made the
    /// cooperative copy look faster for a whole exploration interval; ignored, the chooser
    /// tries coop and comes back to the pipeline at once.
    #[test]
    fn chooser_ignores_its_first_transfers() {
        let mut c = Chooser::default();
        let mib = 1 << 20;
        let mut t = 1_000u64;
        for ns in [28_400_000, 6_200_000, 1_100_000, 186_000] {
            assert_eq!(c.choose(t), Mech::Pipe);
            c.record(Mech::Pipe, mib, ns, t);
            t += 1000;
        }
        // 100 transfers, 0.1 ms apart (well within one exploration interval), each at its
        // mechanism's warm rate: coop only for its one try (warm-up and settling).
        let mut coop = 0;
        for _ in 0..100 {
            let m = c.choose(t);
            coop += u32::from(m == Mech::Coop);
            c.record(m, mib, if m == Mech::Pipe { 60_000 } else { 85_000 }, t);
            t += 100_000;
        }
        assert_eq!(coop, WARMUP + SETTLE);
        assert_eq!(c.current(), Mech::Pipe);
    }

    #[test]
    fn chooser_ignores_the_first_transfers_after_a_switch() {
        let mut c = Chooser::default();
        let mib = 1 << 20;
        let mut t = 1_000u64;
        for _ in 0..WARMUP + SETTLE {
            c.record(Mech::Pipe, mib, 210_000, t); // 5 GB/s
            t += 1000;
        }
        assert_eq!(c.choose(t), Mech::Coop);
        // The first cooperative copies overlap the pipelined tail: slow, ignored.
        for _ in 0..WARMUP {
            c.record(Mech::Coop, mib, 500_000, t);
            t += 1000;
        }
        assert_eq!(c.rate[Mech::Coop as usize], 0.0);
        for _ in 0..SETTLE {
            c.record(Mech::Coop, mib, 70_000, t); // 15 GB/s
            t += 1000;
        }
        assert_eq!(c.current(), Mech::Coop);
        assert!((c.rate[Mech::Coop as usize] - mib as f64 / 70_000.0).abs() < 1e-9);
    }

    #[test]
    fn chooser_backs_off_while_tries_confirm() {
        let mut c = Chooser::default();
        let mut t = 1_000_000u64;
        // Coop is faster; each try of the pipeline that confirms coop doubles the interval.
        settle(&mut c, Mech::Pipe, 200_000, &mut t);
        settle(&mut c, Mech::Coop, 65_000, &mut t);
        let mut expect = EXPLORE_NS;
        for _ in 0..8 {
            assert_eq!(c.current(), Mech::Coop);
            let last = c.at[Mech::Pipe as usize];
            // The single copy meanwhile, a transfer a millisecond (a size class left idle
            // would first measure it afresh).
            while t + 1_000_000 < last + expect {
                assert_eq!(c.choose(t), Mech::Coop);
                c.record(Mech::Coop, 1 << 20, 65_000, t);
                t += 1_000_000;
            }
            assert_eq!(
                c.choose(last + expect),
                Mech::Coop,
                "not before the interval"
            );
            t = last + expect + 1;
            settle(&mut c, Mech::Pipe, 200_000, &mut t);
            expect = (expect * 2).min(EXPLORE_MAX_NS);
            assert_eq!(c.interval, expect);
            settle(&mut c, Mech::Coop, 65_000, &mut t);
        }
        assert_eq!(c.interval, EXPLORE_MAX_NS);
        // A try that finds the pipeline faster switches and resets the interval.
        let last = c.at[Mech::Pipe as usize];
        while t + 1_000_000 < last + EXPLORE_MAX_NS {
            c.record(Mech::Coop, 1 << 20, 65_000, t);
            t += 1_000_000;
        }
        t = last + EXPLORE_MAX_NS + 1;
        settle(&mut c, Mech::Pipe, 40_000, &mut t);
        assert_eq!((c.current(), c.interval), (Mech::Pipe, EXPLORE_NS));
    }

    #[test]
    fn chooser_explores_and_follows_the_faster() {
        let mut c = Chooser::default();
        let ms = 1_000_000u64;
        let mib = 1 << 20;
        // SETTLE measurements of mechanism m taking ns each, ending at t, t+1, ...
        let feed = |c: &mut Chooser, m: Mech, ns: u64, t: u64| {
            for i in 0..(SETTLE + c.skip) as u64 {
                assert_eq!(c.current(), m);
                c.record(m, mib, ns, t + i);
            }
        };
        // Starts with the pipeline; after SETTLE measurements the unmeasured coop is tried.
        assert_eq!(c.choose(ms), Mech::Pipe);
        feed(&mut c, Mech::Pipe, 40_000, ms); // 26 B/ns
        assert_eq!(c.choose(2 * ms), Mech::Coop);
        c.record(Mech::Pipe, mib, 10, 2 * ms); // begun before the switch: ignored
        feed(&mut c, Mech::Coop, 65_000, 3 * ms); // 16 B/ns
                                                  // The pipeline measured faster: back to it.
        assert_eq!(c.current(), Mech::Pipe);
        assert_eq!(c.choose(4 * ms), Mech::Pipe);
        // One slow measurement among fast ones does not switch (moving average).
        feed(&mut c, Mech::Pipe, 40_000, 5 * ms);
        c.record(Mech::Pipe, mib, 120_000, 6 * ms);
        assert_eq!(c.current(), Mech::Pipe);
        // A short burst of slow pipelined transfers (the other direction busy) does not
        // switch...
        for i in 0..3 {
            c.record(Mech::Pipe, mib, 200_000, 7 * ms + i);
        }
        assert_eq!(c.current(), Mech::Pipe);
        // ...a lasting collapse well below coop's rate (the placement changed) does, within
        // 20 measurements.
        let mut n = 3;
        while c.current() == Mech::Pipe {
            c.record(Mech::Pipe, mib, 200_000, 7 * ms + n);
            n += 1;
            assert!(n <= 20, "still the pipeline after {n} slow measurements");
        }
        assert_eq!(c.current(), Mech::Coop);
        assert_eq!(c.choose(8 * ms), Mech::Coop);
        feed(&mut c, Mech::Coop, 65_000, 9 * ms);
        assert_eq!(c.choose(10 * ms), Mech::Coop);
        // Coop stays until EXPLORE_NS after the pipeline's last measurement.
        let at = c.at[Mech::Pipe as usize];
        assert_eq!(c.choose(at + EXPLORE_NS), Mech::Coop);
        // Long after the pipeline's last measurement, it is tried again.
        assert_eq!(c.choose(at + EXPLORE_NS + 1), Mech::Pipe);
    }
}
