//! The choice for rendezvous messages that arrive while the receiver is itself sending
//! rendezvous messages to the same peer ([`Chooser::both_ways`], one per size class), and
//! what each such transfer tells it.
//!
//! Two kinds of traffic reach it. In a *stream* (bidirectional bandwidth, a window of
//! messages each way) every message is a sample of its own: the time it adds to the
//! receiver's stream. In an *exchange* (each rank sends the other one message and receives
//! one, as the collectives at np=2 do: alltoall, allgather, the steps of allreduce and
//! reduce_scatter) a message's own time says little: the receiver's single copy ends
//! before the peer has read our message (we still wait for its FIN), and the pipelined
//! copy ends after our send is done (the peer gave its CPU to our message first). Both are
//! then measured as what the exchange costs: from the moment the receive was chosen until
//! both it and our sends to the peer have ended. A *period* of two-way traffic begins when
//! a receive is chosen and ends when no chosen receive is moving and none of our
//! rendezvous sends to the peer is under way; a period with one receive is an exchange,
//! one with more a stream. Streams of messages below 64 KiB (size class 0) are measured by
//! the period instead ([`by_period`]): all its receives take the mechanism chosen for its
//! first, and the sample is the bytes received over the period's time. Sans-IO: times come
//! in as nanoseconds.

use super::coop::{self, Chooser, Mech};

/// What a transfer tells its chooser.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sample {
    /// `n` bytes moved by `m` from `start` to `end` (nanoseconds).
    Timed {
        m: Mech,
        n: usize,
        start: u64,
        end: u64,
    },
    /// A transfer of `n` bytes by `m` ended at `at` in traffic it cannot be measured in
    /// ([`Chooser::unmeasured`]).
    Unmeasured { m: Mech, n: usize, at: u64 },
    /// A transfer of `n` bytes ended at `at` with no sample to give (a pipelined copy
    /// held up by a cooperative copy that ran meanwhile).
    Skipped { n: usize, at: u64 },
    /// A stream's period of `n`-byte messages ([`by_period`]), all received by `m`, moved
    /// `bytes` to us from `start` to `end`.
    Period {
        m: Mech,
        n: usize,
        bytes: usize,
        start: u64,
        end: u64,
    },
}

/// Whether streams of `n`-byte messages are measured by the period (size class 0, below
/// 64 KiB) rather than per message. A message of 16-32 KiB takes about a microsecond,
/// and the two directions' pipelined copies take turns in bursts: bibw 16 KiB measured the
/// pipeline's messages at 21.9 GB/s against the receiver's read's 19.3 (the waits between
/// a direction's bursts are left out as interruptions, [`coop::OUTLIER`]), and the chooser
/// kept switching to the pipeline, whose windows moved 19.8 GB/s in all against the
/// read's 24.5 (forced, same run). The time of the whole period (a window each way)
/// includes the turns.
pub fn by_period(n: usize) -> bool {
    coop::size_class(n) == 0
}

impl Sample {
    /// Bytes of the transfer (its size class's chooser takes it).
    pub fn bytes(&self) -> usize {
        match *self {
            Sample::Timed { n, .. }
            | Sample::Unmeasured { n, .. }
            | Sample::Skipped { n, .. }
            | Sample::Period { n, .. } => n,
        }
    }

    /// When the transfer ended.
    pub fn end(&self) -> u64 {
        match *self {
            Sample::Timed { end, .. } | Sample::Period { end, .. } => end,
            Sample::Unmeasured { at, .. } | Sample::Skipped { at, .. } => at,
        }
    }

    /// A timed sample's mechanism, bytes, time (ns) and end (a message's or a period's),
    /// `None` for a sample that carries no time.
    pub fn timed(&self) -> Option<(Mech, usize, u64, u64)> {
        match *self {
            Sample::Timed { m, n, start, end } => Some((m, n, end.saturating_sub(start), end)),
            Sample::Period {
                m,
                bytes,
                start,
                end,
                ..
            } => Some((m, bytes, end.saturating_sub(start), end)),
            Sample::Unmeasured { .. } | Sample::Skipped { .. } => None,
        }
    }

    /// Feeds a timed sample ([`Sample::timed`]: its bytes over its time) to `c`:
    /// `Some(true)` if it made `c` switch, `None` for a sample that carries no time.
    pub fn record_timed(self, c: &mut Chooser) -> Option<bool> {
        let (m, bytes, ns, end) = self.timed()?;
        Some(c.record(m, bytes, ns, end))
    }
}

/// Below this rate (bytes per nanosecond: GB/s) of a stream's pipelined periods (bytes
/// received over the period's time), the two CPUs are far apart ([`NearPipe`]).
/// bibw with the pipeline on both sides (`btl_sm_single_copy=none`, session 49's report,
/// 16 KiB-4 MiB) moved 27-38 GB/s in all near (about 14-19 per direction) and 2.4-4.0
/// far (1.2-2.0 per direction).
pub const NEAR_PIPE_FLOOR: f64 = 6.0;

/// A stream's pipelined messages while the peer's CPU is believed near
/// (`crate::btl::sm::place`): near, both sides' pipelined copies move a two-way stream
/// 1.2-4 times as fast as the receivers' reads (bibw 16 KiB-4 MiB, session 49's report:
/// 27-38 GB/s against 8-26), but neither side's streams' chooser can measure that: a try of
/// the pipeline while the peer reads ours alone runs after the peer's reads
/// ([`Chooser::choose_unless`]), so both sides stayed on the read. Near, every stream
/// message is pipelined from the start (both sides believe the same placement), and the
/// stream is judged by its whole periods (a window each way: bytes received over the
/// period's time). One by one the messages say nothing of the placement: far apart, bibw
/// 64 KiB's pipelined messages measured 12-17 GB/s each (from the end of the one before)
/// while the windows moved 4.3 GB/s in all against the reads' 18.8. The first period is
/// left out (cold pages); then in each group of [`SLOW_PERIODS`] periods the fastest must
/// reach [`NEAR_PIPE_FLOOR`], else the CPUs are far after all and the size class goes to
/// the streams' chooser for good, which tries the pipeline no more. Near means known near
/// (the caller's `far` is false only for a peer sensed near from our timed eager copies,
/// or `btl_sm_placement=near`): a peer nothing was sensed of may be far, and a far pair
/// pipelining its first windows paid for them (bibw far 1-4 MiB 0.93-0.95x, s50-bibw2). The fastest of a
/// group, not their average: on a loaded machine a near window may lose milliseconds to a
/// descheduled process (taken as slow three in a row, near bibw 64 KiB-4 MiB fell to
/// 0.69-0.82x the read's).
#[derive(Clone, Copy, Debug, Default)]
struct NearPipe {
    /// Whole pipelined periods seen.
    periods: u32,
    /// The fastest rate of the current group's periods (bytes per nanosecond).
    best: f64,
    /// The pipeline measured slow: the streams' chooser decides.
    slow: bool,
}

/// Periods of a group ([`NearPipe`]).
pub const SLOW_PERIODS: u32 = 4;

impl NearPipe {
    /// A whole period of pipelined receives: `bytes` in `ns`. The group's fastest rate if
    /// the period ended a group that showed the pipeline slow.
    fn period(&mut self, bytes: usize, ns: u64) -> Option<f64> {
        self.periods = self.periods.saturating_add(1);
        if self.slow || self.periods == 1 || ns == 0 {
            return None;
        }
        self.best = self.best.max(bytes as f64 / ns as f64);
        if (self.periods - 1) % SLOW_PERIODS != 0 {
            return None;
        }
        let best = std::mem::take(&mut self.best);
        self.slow = best < NEAR_PIPE_FLOOR;
        self.slow.then_some(best)
    }
}

/// Per peer: the choosers of each size class for streams ([`Chooser::both_ways`],
/// beginning with the receiver's single copy: a first window of a bidirectional stream
/// pipelined moved half the bytes, and its two-way rate, measured high, kept the pipeline
/// for the next windows) and for exchanges ([`Chooser::exchanges`], beginning with the
/// pipeline), and the current period of two-way traffic (see the module's description).
#[derive(Clone, Debug)]
pub struct TwoWay {
    streams: [Chooser; coop::SIZE_CLASSES],
    /// Near streams on the pipeline ([`NearPipe`]).
    near: [NearPipe; coop::SIZE_CLASSES],
    exchanges: [Chooser; coop::SIZE_CLASSES],
    /// The last period was an exchange: the next one's first receive is chosen by the
    /// exchanges' chooser (the kind of a period shows only at its second receive or end).
    last_exchange: bool,
    /// When the period's first receive was chosen (0: no period).
    start: u64,
    /// Receives chosen in the period.
    chosen: u32,
    /// Of them, still moving.
    open: u32,
    /// The period's first receive: its mechanism and bytes.
    first: (Mech, usize),
    /// Its own sample, held while the period may still be an exchange (one receive).
    held: Option<Sample>,
    /// Bytes of the period's receives.
    bytes: usize,
    /// Every receive of the period is of a size measured by the period ([`by_period`]).
    whole: bool,
    /// Every receive of the period was pipelined as a near stream's ([`NearPipe`]).
    piped: bool,
    /// How the peer answered our last rendezvous message of a stream
    /// ([`TwoWay::answered`]): `Some(true)` it read it alone, `Some(false)` with a
    /// clear-to-send (it pipelines them), `None` no answer in a stream yet.
    answers: Option<bool>,
}

impl Default for TwoWay {
    fn default() -> Self {
        TwoWay {
            streams: std::array::from_fn(|_| Chooser::both_ways().starting_with(Mech::Coop)),
            near: [NearPipe::default(); coop::SIZE_CLASSES],
            exchanges: std::array::from_fn(|_| Chooser::exchanges()),
            last_exchange: false,
            start: 0,
            chosen: 0,
            open: 0,
            first: (Mech::Pipe, 0),
            held: None,
            bytes: 0,
            whole: false,
            piped: false,
            answers: None,
        }
    }
}

impl TwoWay {
    /// The mechanism for a receive of `n` bytes chosen at `now` (`now > 0`), which joins
    /// the current period or opens one (the caller records [`TwoWay::take_held`]'s sample
    /// first). `peer_reads` says that the peer read our last rendezvous message alone: the
    /// streams' chooser then begins no try of the pipeline ([`Chooser::choose_unless`]).
    /// For messages of 64 KiB and more it begins one only once the peer answered a
    /// message of ours in a stream with a clear-to-send ([`TwoWay::answered`]): its
    /// answers to a window's messages come behind its requests-to-send, after we chose
    /// our receives of that window, so in a stream's first window `peer_reads` is what
    /// earlier traffic left (false in a new job). Both ranks then tried the pipeline at
    /// their ninth message of bibw 4 MiB, every later message of the window was matched
    /// to it before its first sample came back, and the pipelined window, measured high,
    /// kept it for whole launches (11-13 GB/s against the reads' 21). In a period whose
    /// receives are all measured by the period ([`by_period`]), every receive takes the
    /// first one's mechanism. With `far` false (the peer's CPU known near) a stream's
    /// messages take the pipeline until it measures slow ([`NearPipe`]).
    pub fn choose(&mut self, n: usize, now: u64, peer_reads: bool, far: bool) -> Mech {
        let k = coop::size_class(n);
        let mut near = false;
        let m = if self.chosen > 0 && self.whole && by_period(n) {
            self.first.0
        } else if self.chosen == 0 && self.last_exchange {
            self.exchanges[k].choose(now)
        } else if !far && !self.near[k].slow {
            near = true;
            Mech::Pipe
        } else {
            // Near streams whose pipeline measured slow by the window try it no more: one
            // by one its messages measured fast (bibw 64 KiB far apart: 12-17 GB/s against
            // the reads' 10), and the tries kept it (4.3 GB/s in all against 18.8).
            let unknown = !by_period(n) && self.answers != Some(false);
            self.streams[k].choose_unless(now, peer_reads || unknown || self.near[k].slow)
        };
        if self.chosen == 0 {
            self.start = now;
            self.first = (m, n);
            self.bytes = 0;
            self.whole = true;
            self.piped = true;
        }
        self.piped &= near && coop::size_class(self.first.1) == k;
        self.bytes = self.bytes.saturating_add(n);
        self.whole &= by_period(n);
        self.chosen = self.chosen.saturating_add(1);
        self.open = self.open.saturating_add(1);
        m
    }

    /// The first receive's own sample, if another receive is about to join its period
    /// (call right before [`TwoWay::choose`]): the traffic is a stream, where each
    /// transfer is a sample of its own (for the streams' chooser), unless the stream is
    /// measured by the period ([`by_period`]).
    pub fn take_held(&mut self) -> Option<Sample> {
        self.held.take().filter(|s| !by_period(s.bytes()))
    }

    /// A chosen receive ended; `s` is its own sample and `sending` says whether a
    /// rendezvous send of ours to the peer is still under way. Returns what to record
    /// ([`TwoWay::record`]) and whether it is an exchange's: `s` itself in a stream, the
    /// exchange's time when this ends an exchange, nothing while it may still be one (`s`
    /// is held). In a stream measured by the period ([`by_period`]) its messages give no
    /// samples of their own: the period's sample comes when it ends.
    pub fn ended(&mut self, s: Sample, sending: bool) -> Option<(Sample, bool)> {
        self.open = self.open.saturating_sub(1);
        if self.chosen != 1 {
            let own = (!by_period(s.bytes())).then_some((s, false));
            if !sending && self.open == 0 {
                let period = self.period(s.end());
                self.near_period(s.end());
                self.reset();
                return period.map(|p| (p, false)).or(own);
            }
            return own;
        }
        if sending {
            self.held = Some(s);
            return None;
        }
        Some((self.close(s.end()), true))
    }

    /// Our last rendezvous send to the peer ended at `now`: the end of the period if no
    /// chosen receive is moving, with the exchange's time to record if it was one.
    pub fn sends_done(&mut self, now: u64) -> Option<(Sample, bool)> {
        if self.chosen == 0 || self.open > 0 {
            return None;
        }
        if self.chosen == 1 {
            return Some((self.close(now), true));
        }
        let period = self.period(now);
        self.near_period(now);
        self.reset();
        period.map(|p| (p, false))
    }

    /// A stream's period ends at `end`: if all its receives were pipelined as a near
    /// stream's, of 64 KiB and more, its time goes to [`NearPipe::period`] (below 64 KiB
    /// the period's own sample does, [`by_period`]).
    fn near_period(&mut self, end: u64) {
        let (_, n) = self.first;
        if self.piped && self.chosen > 1 && !by_period(n) {
            let k = coop::size_class(n);
            // The streams' chooser takes over with the pipeline's rate.
            if let Some(rate) = self.near[k].period(self.bytes, end.saturating_sub(self.start)) {
                self.streams[k].note(Mech::Pipe, rate, end);
            }
        }
    }

    /// The size classes whose near streams' pipeline measured slow ([`NearPipe`]), one bit
    /// each.
    pub fn near_slow(&self) -> u8 {
        self.near
            .iter()
            .enumerate()
            .fold(0, |a, (k, p)| a | (u8::from(p.slow) << k))
    }

    /// The sample of a stream's period ending at `end`, if it is measured by the period
    /// ([`by_period`]).
    fn period(&self, end: u64) -> Option<Sample> {
        let (m, n) = self.first;
        (self.chosen > 1 && self.whole).then_some(Sample::Period {
            m,
            n,
            bytes: self.bytes,
            start: self.start,
            end,
        })
    }

    /// The peer answered a rendezvous message of ours: it read it alone (`reads`, its FIN
    /// says so) or sent a clear-to-send. Counts only in a stream (a period with more than
    /// one receive chosen): an exchange's or a one-way answer says nothing of how the
    /// peer takes a stream's messages.
    pub fn answered(&mut self, reads: bool) {
        if self.chosen > 1 {
            self.answers = Some(reads);
        }
    }

    /// A period is open (a receive was chosen and the period has not ended).
    pub fn in_period(&self) -> bool {
        self.chosen != 0
    }

    /// Feeds `s` to its size class's chooser for exchanges (`exchange`) or streams;
    /// `true` if it made the chooser switch.
    pub fn record(&mut self, s: Sample, exchange: bool) -> bool {
        if let (false, Sample::Period { m: Mech::Pipe, .. }) = (exchange, s) {
            if let Some((_, bytes, ns, end)) = s.timed() {
                let k = coop::size_class(s.bytes());
                if let Some(rate) = self.near[k].period(bytes, ns) {
                    self.streams[k].note(Mech::Pipe, rate, end);
                }
            }
        }
        let c = self.chooser_mut(s.bytes(), exchange);
        match s {
            Sample::Unmeasured { m, at, .. } => c.unmeasured(m, at),
            s => s.record_timed(c).unwrap_or(false),
        }
    }

    /// The chooser of `n`-byte messages' size class for exchanges (`exchange`) or streams.
    pub fn chooser(&self, n: usize, exchange: bool) -> &Chooser {
        let k = coop::size_class(n);
        if exchange {
            &self.exchanges[k]
        } else {
            &self.streams[k]
        }
    }

    fn chooser_mut(&mut self, n: usize, exchange: bool) -> &mut Chooser {
        let k = coop::size_class(n);
        if exchange {
            &mut self.exchanges[k]
        } else {
            &mut self.streams[k]
        }
    }

    /// The exchange's sample: its one receive's bytes over the time from its choice to
    /// `end`; the period is over.
    fn close(&mut self, end: u64) -> Sample {
        let (m, n) = self.first;
        let start = self.start;
        self.reset();
        self.last_exchange = true;
        Sample::Timed { m, n, start, end }
    }

    fn reset(&mut self) {
        self.last_exchange = false;
        self.start = 0;
        self.chosen = 0;
        self.open = 0;
        self.held = None;
        self.bytes = 0;
        self.whole = false;
        self.piped = false;
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::btl::sm::coop::{SETTLE, WARMUP};

    /// One exchange of `n` bytes each way beginning at `t`: the receive is chosen, then
    /// with the pipeline our send ends after `pipe.0` ns and the receive after `pipe.1`
    /// (after our send: the peer copied our message in first); with the single copy the
    /// receive ends after `pull.0` and our send when the peer's FIN comes, after `pull.1`.
    /// Every sample goes to its chooser as the engine records them.
    fn exchange(w: &mut TwoWay, n: usize, t: &mut u64, pipe: (u64, u64), pull: (u64, u64)) {
        if let Some(s) = w.take_held() {
            w.record(s, false);
        }
        let m = w.choose(n, *t, false, true);
        let out = match m {
            Mech::Pipe => {
                assert_eq!(w.sends_done(*t + pipe.0), None, "the receive still moves");
                let own = Sample::Unmeasured {
                    m,
                    n,
                    at: *t + pipe.1,
                };
                w.ended(own, false)
            }
            Mech::Coop => {
                let own = Sample::Timed {
                    m,
                    n,
                    start: *t,
                    end: *t + pull.0,
                };
                assert_eq!(w.ended(own, true), None, "held while our send is under way");
                w.sends_done(*t + pull.1)
            }
        };
        let took = if m == Mech::Pipe { pipe.1 } else { pull.1 };
        let whole = Sample::Timed {
            m,
            n,
            start: *t,
            end: *t + took,
        };
        assert_eq!(
            out,
            Some((whole, true)),
            "the exchange's time, from the choice to the end of both"
        );
        w.record(whole, true);
        assert!(!w.in_period());
        *t += took + 3_000;
    }

    /// Exchanges of 32 KiB each way (the steps of allreduce at np=2): the pipelined
    /// exchange takes 8 us, the one by single copy 12 us, although the single copy itself
    /// ends after 4 us (the peer's FIN comes later). Measured as whole exchanges the
    /// pipeline wins and stays; measured as their own transfers (the single copy's 4 us
    /// against an unmeasured pipeline) the single copy won, at 1.5 times the cost.
    #[test]
    fn exchanges_are_measured_as_a_whole() {
        let n = 32 << 10;
        let mut w = TwoWay::default();
        let mut t = 1_000u64;
        let mut pipe = 0;
        for _ in 0..200 {
            exchange(&mut w, n, &mut t, (3_000, 8_000), (4_000, 12_000));
            pipe += u32::from(w.chooser(n, true).current() == Mech::Pipe);
        }
        assert_eq!(w.chooser(n, true).current(), Mech::Pipe);
        assert!(
            pipe >= 200 - 2 * (WARMUP + SETTLE),
            "{pipe} of 200 by the pipeline"
        );
        let (p, c) = w.chooser(n, true).rates();
        assert!((p - n as f64 / 8_000.0).abs() < 1e-9, "pipeline {p}");
        assert!((c - n as f64 / 12_000.0).abs() < 1e-9, "single copy {c}");
        // Where the single copy's exchange is the faster one (alltoall at 64 KiB: 12 us
        // against 17), it is kept.
        let n = 64 << 10;
        let mut t = 1_000u64;
        for _ in 0..200 {
            exchange(&mut w, n, &mut t, (9_000, 17_000), (5_000, 12_000));
        }
        assert_eq!(w.chooser(n, true).current(), Mech::Coop);
    }

    /// An exchange that waited for a descheduled peer (1.7 ms among 8 us ones) does not
    /// make the chooser leave the faster mechanism: exchanges are averaged as rates,
    /// where a slow one weighs little, not as bytes over time, where it would weigh as
    /// much as two hundred others.
    #[test]
    fn a_late_peer_does_not_switch_an_exchange() {
        let n = 32 << 10;
        let (pipe, pull) = ((3_000, 8_000), (4_000, 12_000));
        let mut w = TwoWay::default();
        let mut t = 1_000u64;
        for _ in 0..50 {
            exchange(&mut w, n, &mut t, pipe, pull);
        }
        assert_eq!(w.chooser(n, true).current(), Mech::Pipe);
        exchange(&mut w, n, &mut t, (3_000, 1_700_000), pull);
        assert_eq!(w.chooser(n, true).current(), Mech::Pipe);
    }

    /// A stream of 4 MiB messages each way that settled on the single copy (the pipeline
    /// 5 GB/s, the receiver's read 10 GB/s). While the peer reads our messages alone, the
    /// streams' chooser begins no try of the pipeline, however long the stream lasts: such
    /// a try could not be measured and cost every message chosen during it (the peer reads
    /// all of ours before it serves our clear-to-sends). Once the peer answers ours with
    /// clear-to-sends (it is on the pipeline too), the try comes.
    #[test]
    fn no_pipeline_try_in_a_stream_while_the_peer_reads_ours() {
        let n = 4 << 20;
        let (pipe, pull) = (840_000, 420_000);
        let mut w = TwoWay::default();
        let mut t = 1_000u64;
        // One message of the stream (our sends go on all along), chosen with `reads`.
        let next = |w: &mut TwoWay, t: &mut u64, reads: bool| {
            if let Some(s) = w.take_held() {
                w.record(s, false);
            }
            let m = w.choose(n, *t, reads, true);
            let d = if m == Mech::Pipe { pipe } else { pull };
            let s = Sample::Timed {
                m,
                n,
                start: *t,
                end: *t + d,
            };
            *t += d;
            if let Some((s, exchange)) = w.ended(s, true) {
                w.record(s, exchange);
            }
            m
        };
        // The peer pipelines ours (it answered one with a clear-to-send): after the
        // single copy's first measurements the pipeline is tried, and the single copy kept.
        next(&mut w, &mut t, false);
        next(&mut w, &mut t, false);
        w.answered(false);
        for _ in 1..2 * (WARMUP + SETTLE) {
            next(&mut w, &mut t, false);
        }
        assert_eq!(w.chooser(n, false).current(), Mech::Coop);
        assert!(
            w.chooser(n, false).rates().0 > 0.0,
            "the pipeline was tried"
        );
        // The peer reads ours alone from now on.
        w.answered(true);
        let from = t;
        while t < from + 10 * coop::EXPLORE_MAX_NS {
            assert_eq!(
                next(&mut w, &mut t, true),
                Mech::Coop,
                "a try of the pipeline {} ms into the stream",
                (t - from) / 1_000_000
            );
        }
        // Once it answers with a clear-to-send (it is on the pipeline too), the try comes.
        w.answered(false);
        assert_eq!(next(&mut w, &mut t, false), Mech::Pipe);
    }

    /// One window of bibw at 4 MiB as a receiver sees it (64 messages each way, far
    /// apart): the peer's 64 requests-to-send come first and each is chosen as it is
    /// matched. Read alone (420 us) a message is read right then, so its sample comes
    /// before the next choice; pipelined it is only answered, so every later message of
    /// the window is chosen before the first pipelined sample (700 us each, both ways)
    /// comes back. The peer's answers to our 64 messages, FINs of its reads, come behind
    /// its requests-to-send: after the window's choices (`reads` is what the last one
    /// said, false before any). Returns the window's mechanisms.
    fn window4m(w: &mut TwoWay, t: &mut u64, reads: &mut bool) -> Vec<Mech> {
        let n = 4 << 20;
        let mut ms = Vec::new();
        let mut piped = Vec::new();
        for _ in 0..64 {
            if let Some(s) = w.take_held() {
                w.record(s, false);
            }
            let m = w.choose(n, *t, *reads, true);
            ms.push(m);
            if m == Mech::Coop {
                let s = Sample::Timed {
                    m,
                    n,
                    start: *t,
                    end: *t + 420_000,
                };
                *t += 420_000;
                if let Some((s, exchange)) = w.ended(s, true) {
                    w.record(s, exchange);
                }
            } else {
                piped.push(*t);
                *t += 1_000;
            }
        }
        for _ in piped {
            let s = Sample::Timed {
                m: Mech::Pipe,
                n,
                start: *t,
                end: *t + 700_000,
            };
            *t += 700_000;
            if let Some((s, exchange)) = w.ended(s, true) {
                w.record(s, exchange);
            }
        }
        for _ in 0..64 {
            w.answered(true);
        }
        *reads = true;
        if let Some((s, exchange)) = w.sends_done(*t) {
            w.record(s, exchange);
        }
        assert!(!w.in_period());
        *t += 50_000;
        ms
    }

    /// bibw 1-4 MiB (far apart) ran pipelined for whole launches: in the first window
    /// the peer had not answered any of ours yet, so nothing said that it reads them
    /// alone, and the streams' chooser, with no rate of the pipeline, tried it at the
    /// ninth message; the window's remaining 56 messages were matched to it before its
    /// first sample. No try begins before the peer has answered a message of ours in a
    /// stream, and a stream whose peer reads ours stays on the single copy throughout,
    /// also after an exchange whose peer pipelined ours and in a new stream after a
    /// pause.
    #[test]
    fn a_stream_tries_no_pipeline_before_the_peer_answers() {
        let n = 4 << 20;
        let mut w = TwoWay::default();
        let mut t = 1_000u64;
        // An exchange first (say a reduction's step), whose peer pipelined ours: its
        // answer tells nothing of streams, and `reads` is false.
        let m = w.choose(n, t, false, true);
        w.answered(false);
        let own = Sample::Timed {
            m,
            n,
            start: t,
            end: t + 400_000,
        };
        assert_eq!(w.ended(own, true), None);
        if let Some((s, exchange)) = w.sends_done(t + 800_000) {
            w.record(s, exchange);
        }
        t += 1_000_000;
        let mut reads = false;
        for k in 0..20 {
            let ms = window4m(&mut w, &mut t, &mut reads);
            // (The first receive after the exchange is the exchanges' chooser's.)
            let from = usize::from(k == 0);
            let piped = ms[from..].iter().filter(|&&m| m == Mech::Pipe).count();
            assert_eq!(piped, 0, "window {k}: {piped} of 64 messages pipelined");
            if k == 9 {
                t += 3 * coop::EXPLORE_MAX_NS;
            }
        }
        assert_eq!(w.chooser(n, false).current(), Mech::Coop);
    }

    /// A stream both ways begins on the receivers' single copy: the first window's
    /// messages, all chosen before the first one ends, are read by the receiver (on the
    /// pipeline they were the first window's 64 messages at half the throughput, and its
    /// two-way rate, measured high, kept the pipeline for the next windows). The exchanges
    /// still begin on the pipeline.
    #[test]
    fn streams_begin_on_the_single_copy() {
        for n in [64 << 10, 2 << 20] {
            let mut w = TwoWay::default();
            for i in 0..64 {
                if let Some(s) = w.take_held() {
                    w.record(s, false);
                }
                assert_eq!(
                    w.choose(n, 1_000 + i, false, true),
                    Mech::Coop,
                    "{n} B, message {i}"
                );
            }
            assert_eq!(w.chooser(n, true).current(), Mech::Pipe);
        }
    }

    /// One window of 64 messages of 16 KiB each way beginning at `t`, as bibw (np=2, CPUs
    /// far apart) measured them: read by the receiver, the messages are matched and read
    /// one by one, 849 ns each, and the window takes `pull` ns; pipelined, all 64 are
    /// matched at once and end in two bursts of 748 ns per message with the other
    /// direction's burst in between (left out of the per-message average as an
    /// interruption), and the window takes `pipe` ns. The window's times are those of its
    /// first message's mechanism. Every sample goes to its chooser as the engine records
    /// them. Returns the first message's mechanism and whether every message took it.
    fn window16k(w: &mut TwoWay, t: &mut u64, pipe: u64, pull: u64) -> (Mech, bool) {
        let n = 16 << 10;
        let feed = |w: &mut TwoWay, out: Option<(Sample, bool)>| {
            if let Some((s, exchange)) = out {
                w.record(s, exchange);
            }
        };
        let choose = |w: &mut TwoWay, at: u64| {
            if let Some(s) = w.take_held() {
                w.record(s, false);
            }
            w.choose(n, at, false, true)
        };
        let first = choose(w, *t);
        let mut same = true;
        let mut last = *t;
        if first == Mech::Coop {
            let gap = pull / 64;
            for i in 0..64u64 {
                let c = *t + i * gap;
                let m = if i == 0 { first } else { choose(w, c) };
                same &= m == first;
                let s = Sample::Timed {
                    m,
                    n,
                    start: c.max(last),
                    end: c + 849,
                };
                last = c + 849;
                let out = w.ended(s, true);
                feed(w, out);
            }
            *t += pull;
        } else {
            let ms: Vec<Mech> = std::iter::once(first)
                .chain((1..64).map(|_| choose(w, *t)))
                .collect();
            let turn = pipe - 64 * 748;
            for (i, &m) in ms.iter().enumerate() {
                same &= m == first;
                let end = last + 748 + if i == 32 { turn } else { 0 };
                let s = Sample::Timed {
                    m,
                    n,
                    start: last,
                    end,
                };
                last = end;
                let out = w.ended(s, true);
                feed(w, out);
            }
            *t += pipe;
        }
        let out = w.sends_done(*t);
        feed(w, out);
        assert!(!w.in_period());
        *t += 2_000;
        (first, same)
    }

    /// bibw 16 KiB, far apart: per message the pipeline measured faster (21.9 GB/s
    /// against the receiver's read's 19.3), per window slower (19.8 GB/s in all, a window
    /// of 2 MiB in 106 us, against 24.5, 86 us). Streams below 64 KiB are measured by the
    /// period, so the read is kept, with the pipeline tried for a few windows now and
    /// then; where the pipeline's windows are the faster ones (CPUs sharing a cache), it
    /// is taken. Every window's messages take one mechanism.
    #[test]
    fn small_streams_are_measured_by_the_window() {
        let run = |pipe: u64, pull: u64| {
            let mut w = TwoWay::default();
            let mut t = 1_000u64;
            let (mut piped, mut all, mut mixed) = (0u32, 0u32, 0u32);
            while t < 200_000_000 {
                let (m, same) = window16k(&mut w, &mut t, pipe, pull);
                piped += u32::from(m == Mech::Pipe);
                mixed += u32::from(!same);
                all += 1;
            }
            let share = f64::from(piped) / f64::from(all);
            (share, w.chooser(16 << 10, false).current(), mixed)
        };
        let (share, m, mixed) = run(106_000, 86_000);
        assert_eq!(m, Mech::Coop);
        assert!(share < 0.05, "{share} of the windows pipelined");
        assert_eq!(mixed, 0, "windows of both mechanisms");
        let (share, m, mixed) = run(60_000, 86_000);
        assert_eq!(m, Mech::Pipe);
        assert!(share > 0.95, "{share} of the windows pipelined");
        assert_eq!(mixed, 0, "windows of both mechanisms");
    }

    /// A stream (a window of messages each way): every transfer is a sample of its own;
    /// the first one's, held while the period might have been an exchange, is handed back
    /// when the second receive is chosen, and the period ends with the last of our sends.
    #[test]
    fn streams_are_measured_per_transfer() {
        let n = 1 << 20;
        let mut w = TwoWay::default();
        assert_eq!(w.choose(n, 100, false, true), Mech::Coop);
        let first = Sample::Timed {
            m: Mech::Coop,
            n,
            start: 100,
            end: 200,
        };
        assert_eq!(w.ended(first, true), None);
        assert_eq!(w.take_held(), Some(first));
        assert_eq!(w.choose(n, 210, false, true), Mech::Coop);
        assert_eq!(w.choose(n, 220, false, true), Mech::Coop);
        let own = |end| Sample::Timed {
            m: Mech::Coop,
            n,
            start: end - 100,
            end,
        };
        assert_eq!(w.take_held(), None);
        assert_eq!(w.ended(own(300), true), Some((own(300), false)));
        assert_eq!(w.sends_done(350), None, "a receive still moves");
        assert!(w.in_period());
        let last = Sample::Unmeasured {
            m: Mech::Coop,
            n,
            at: 400,
        };
        assert_eq!(
            w.ended(last, false),
            Some((last, false)),
            "as it ends, so does the period"
        );
        assert!(!w.in_period());
        // The next period begins afresh: an exchange again.
        assert_eq!(w.choose(n, 500, false, true), Mech::Coop);
        assert_eq!(w.ended(own(600), true), None);
        let whole = Sample::Timed {
            m: Mech::Coop,
            n,
            start: 500,
            end: 650,
        };
        assert_eq!(w.sends_done(650), Some((whole, true)));
    }

    /// One window of 64 messages of `n` bytes each way as a receiver sees it: all 64 are
    /// chosen at `t` (`reads`: the peer reads ours alone; `far`: the placement believed),
    /// then each ends `msg` ns after the one before (`gap` ns later), measured from the
    /// end of the one before, and our sends end with the last. Every sample goes to its
    /// chooser as the engine records them. Returns the window's mechanisms.
    fn window(
        w: &mut TwoWay,
        n: usize,
        t: &mut u64,
        (msg, gap): (u64, u64),
        reads: bool,
        far: bool,
    ) -> Vec<Mech> {
        let mut ms = Vec::new();
        for _ in 0..64 {
            if let Some(s) = w.take_held() {
                w.record(s, false);
            }
            ms.push(w.choose(n, *t, reads, far));
        }
        let mut last = *t;
        for &m in &ms {
            let s = Sample::Timed {
                m,
                n,
                start: last,
                end: last + msg,
            };
            last += msg + gap;
            if let Some((s, exchange)) = w.ended(s, true) {
                w.record(s, exchange);
            }
        }
        if let Some((s, exchange)) = w.sends_done(last) {
            w.record(s, exchange);
        }
        assert!(!w.in_period());
        *t = last + 2_000;
        ms
    }

    /// Near (the placement sensed or not yet), a stream both ways is pipelined from its
    /// first message, although the peer reads ours alone and no try of the pipeline could
    /// be measured: both sides believe the same placement. With the pipeline fast (16 GB/s
    /// a direction, bibw's windows near) in one window of four, the others slowed down,
    /// it stays so for a whole launch; far (the
    /// placement believed) the streams' chooser decides, beginning on the read.
    #[test]
    fn near_streams_take_the_pipeline_while_it_is_fast() {
        for n in [16 << 10, 64 << 10, 1 << 20] {
            let msg = n as u64 / 16;
            let mut w = TwoWay::default();
            let mut t = 1_000u64;
            let mut i = 0;
            while t < 2 * coop::EXPLORE_MAX_NS {
                // Three windows in four descheduled (2 GB/s), as on a loaded machine.
                let gap = if i % 4 == 0 { msg / 10 } else { 7 * msg };
                let ms = window(&mut w, n, &mut t, (msg, gap), true, false);
                assert!(
                    ms.iter().all(|&m| m == Mech::Pipe),
                    "{n} B, window {i}: {ms:?}"
                );
                i += 1;
            }
            assert_eq!(w.near_slow(), 0, "{n} B");
            let ms = window(&mut TwoWay::default(), n, &mut t, (msg, 0), false, true);
            assert_eq!(ms[0], Mech::Coop, "{n} B, far");
        }
    }

    /// Believed near but far apart (no eager message sensed the placement): the stream's
    /// pipelined windows move 2 GB/s a direction, while one by one its messages measure
    /// fast (each from the end of the one before, the waits between them left out:
    /// bibw 64 KiB far, 12-17 GB/s). After the first (cold) window and [`SLOW_PERIODS`]
    /// slow ones the size class goes to the streams' chooser, on the read, and it tries
    /// the pipeline no more,
    /// also when the peer answers ours with clear-to-sends. Other size classes stay near.
    #[test]
    fn near_streams_whose_windows_are_slow_go_back_to_the_read_for_good() {
        for n in [16 << 10, 64 << 10, 1 << 20] {
            let k = coop::size_class(n);
            let msg = n as u64 / 16;
            // 16 GB/s per message, 2 GB/s per window.
            let timing = (msg, 7 * msg);
            let mut w = TwoWay::default();
            let mut t = 1_000u64;
            let mut piped = 0;
            for _ in 0..20 {
                let ms = window(&mut w, n, &mut t, timing, false, false);
                piped += usize::from(ms[0] == Mech::Pipe);
                assert!(ms.iter().all(|&m| m == ms[0]), "{n} B: {ms:?}");
            }
            assert_eq!(piped, 1 + SLOW_PERIODS as usize, "{n} B: windows pipelined");
            assert_eq!(w.near_slow(), 1 << k, "{n} B");
            w.answered(false);
            let from = t;
            while t < from + 3 * coop::EXPLORE_MAX_NS {
                let ms = window(&mut w, n, &mut t, (msg, 0), false, false);
                assert!(
                    ms.iter().all(|&m| m == Mech::Coop),
                    "{n} B: a try of the pipeline {} ms later",
                    (t - from) / 1_000_000
                );
            }
            let other = if k == 0 { 1 << 20 } else { 16 << 10 };
            let ms = window(&mut w, other, &mut t, (msg, 0), true, false);
            assert_eq!(ms[0], Mech::Pipe, "{other} B after {n} B");
        }
    }
}
