//! The choice for rendezvous messages below 256 KiB ([`by_period`]) that arrive while the
//! receiver sends no rendezvous message to the peer ([`OneWay`]), and what each such
//! transfer tells it.
//!
//! Two kinds of traffic reach it. In a *ping-pong* the receiver answers every message
//! before the next one comes: each transfer is a sample of its own, for the per-message
//! chooser (between the pipelined and the cooperative copy, `Peer::chooser`). In a
//! *stream* (bandwidth: a window of messages one way, then an acknowledgement) the
//! messages follow each other with nothing sent back between them: the stream is
//! measured by the *period*, as two-way streams are (`two_way::by_period`): all its
//! receives take the mechanism chosen for its first, the sample is the bytes received over
//! the period's time, and it goes to a chooser of its own, between the pipelined copy and
//! the receiver's read of the whole message alone ([`Mech::Coop`] stands for it there).
//! So the ping-pongs' verdict does not carry over to a stream, and a stream's windows are
//! compared as they are. Measured (np=2, 2 vCPUs, `chrt -r 1`, one-way streams of 64
//! messages after the `lat` sweep): bw 16 KiB by the receiver's read alone 14.3–16.1 GB/s,
//! pipelined 12.2–13.3, cooperative 9.6–11.3 (one chunk at 16 KiB: the receiver reads it
//! all anyway, and the clear-to-send to the sender costs it a round of the sender's
//! progress); 32 KiB 16.4–18.6, 10.4–11.0, 10.8–16.4. Per message, the chooser kept the
//! ping-pongs' pipelined copy (bw 16 KiB 11.2–12.0 GB/s).
//!
//! A *period* begins when a receive is chosen with no period open and ends when the next
//! receive is chosen once no receive of the period is moving and either we sent the peer
//! a message since the period began (the acknowledgement of a window, a pong), or the
//! last receive ended more than [`GAP_NS`] before (messages that come apart, as a ring's
//! steps: each is a ping-pong's), or the period has [`PERIOD_MAX`] receives (a stream with
//! no acknowledgements; [`TRY_PERIOD_MAX`] while the streams' chooser tries a mechanism). A
//! period with one receive is a ping-pong's message; one with more a stream's. Sans-IO:
//! times come in as nanoseconds.

use super::coop::{self, Chooser, Mech};
use super::two_way::Sample;

/// Whether a rendezvous message of `n` bytes received one way is measured by the period:
/// below 256 KiB (size classes 0 and 1 of [`coop::size_class`]). Streams of 64-256 KiB
/// messages have a chooser of their own too (between the pipelined and the cooperative
/// copy): a window of them streams through the bulk buffer's stream area
/// ([`super::bulk::STREAM_FACTOR`]) at a rate the per-message measurement does not see.
pub fn by_period(n: usize) -> bool {
    coop::size_class(n) <= 1
}

/// A receive chosen more than this after the period's last receive ended begins a new
/// period: the stream's messages are matched one after the other (a receiver's read of
/// 16 KiB takes about a microsecond, the next message is matched a few hundred
/// nanoseconds after it), a ring's steps come apart.
pub const GAP_NS: u64 = 5_000;

/// Most receives of a period (a stream that sends nothing back still gives samples).
pub const PERIOD_MAX: u32 = 256;

/// Most receives of a period chosen by the streams' chooser while it tries a mechanism
/// ([`Chooser::trying`]): a try takes [`coop::WARMUP`] + [`coop::SETTLE`] periods, and
/// where nothing is sent back between the messages each of them lasted [`PERIOD_MAX`]
/// receives, 2048 messages by the mechanism tried. A 2-rank bcast of 64 KiB (one blocking
/// rendezvous after another, the receiver answering none) tried the pipeline that way at
/// 18-37 us a message far apart against the cooperative copy's 6.3: 30-65 ms slow early in
/// every launch. Windows closed by an acknowledgement are shorter anyway (64 messages),
/// and a pipelined window's receives are all matched before any ends, so it stays one
/// period.
pub const TRY_PERIOD_MAX: u32 = 16;

/// Which chooser a period's sample goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The per-message chooser (pipelined or cooperative copy): a ping-pong's message.
    PerMessage,
    /// The streams' chooser (pipelined copy or the receiver's read alone).
    Stream,
}

/// How a receive chosen by [`OneWay::choose`] moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// Pipelined copy.
    Pipe,
    /// Cooperative single copy (receiver and sender).
    Coop,
    /// The receiver reads the whole message alone.
    Read,
}

/// Per peer: the streams' chooser and the current period (see the module's description).
#[derive(Clone, Debug)]
pub struct OneWay {
    /// The streams' choosers, by size class (0: below 64 KiB, 1: 64-256 KiB).
    streams: [Chooser; 2],
    /// The last period had one receive: the next one's first receive is chosen by the
    /// per-message chooser (the kind of a period shows only at its second receive).
    last_single: bool,
    /// When the period's first receive was chosen (meaningful while `chosen > 0`).
    start: u64,
    /// Receives chosen in the period (0: none open).
    chosen: u32,
    /// Of them, still moving.
    open: u32,
    /// The period's first receive: its mechanism, bytes, and the chooser that chose it.
    first: (Mech, usize, Kind),
    /// Bytes of the period's receives.
    bytes: usize,
    /// When its last receive ended.
    last_end: u64,
    /// One of its transfers could not be measured (cold pages, held up by another copy).
    spoiled: bool,
    /// Most receives of the period ([`PERIOD_MAX`], or [`TRY_PERIOD_MAX`] for a try).
    max: u32,
    /// Our messages sent to the peer when the period began.
    sent: u64,
    /// The first receive's own sample and whether we had rendezvous sends under way, held
    /// while the period has one receive.
    held: Option<(Sample, bool)>,
}

impl Default for OneWay {
    /// The streams' chooser begins with the receiver's read, the faster one in the
    /// measurements above, and compares the rates as measured (no pipeline weight: both
    /// are measured as whole windows in the same traffic).
    fn default() -> Self {
        let mut c = Chooser::default().starting_with(Mech::Coop);
        c.receiver_sends(false);
        let streams = [c.clone(), c];
        OneWay {
            streams,
            last_single: true,
            start: 0,
            chosen: 0,
            open: 0,
            first: (Mech::Pipe, 0, Kind::PerMessage),
            bytes: 0,
            last_end: 0,
            spoiled: false,
            max: PERIOD_MAX,
            sent: 0,
            held: None,
        }
    }
}

impl OneWay {
    /// The sample of the period that a receive chosen at `now` ends, if it ends it (call
    /// right before [`OneWay::choose`]; `sent` counts our messages to the peer so far):
    /// with the chooser it goes to ([`OneWay::record`]) and whether rendezvous sends of
    /// ours were under way when it ended (for [`Chooser::receiver_sends`]).
    pub fn close(&mut self, now: u64, sent: u64) -> Option<(Sample, Kind, bool)> {
        if self.chosen == 0
            || self.open > 0
            || (sent == self.sent
                && self.chosen < self.max
                && now.saturating_sub(self.last_end) <= GAP_NS)
        {
            return None;
        }
        let (m, n, kind) = self.first;
        let out = if self.chosen == 1 {
            // A ping-pong's message: its own sample, for the per-message chooser if that
            // one chose it (the streams' one means another mechanism by Coop).
            self.held
                .take()
                .filter(|_| kind == Kind::PerMessage)
                .map(|(s, sends)| (s, Kind::PerMessage, sends))
        } else {
            (!self.spoiled && kind == Kind::Stream).then_some((
                Sample::Period {
                    m,
                    n,
                    bytes: self.bytes,
                    start: self.start,
                    end: self.last_end,
                },
                Kind::Stream,
                false,
            ))
        };
        self.last_single = self.chosen == 1;
        self.chosen = 0;
        self.open = 0;
        self.held = None;
        out
    }

    /// How a receive of `n` bytes ([`by_period`]) chosen at `now` moves; it joins the open
    /// period or opens one (the caller records [`OneWay::close`]'s sample first). The
    /// first receive after a period of one receive is chosen by `per_message`, the first
    /// after a stream's period by the streams' chooser; every other receive of a period
    /// takes its first one's mechanism.
    pub fn choose(&mut self, n: usize, now: u64, sent: u64, per_message: &mut Chooser) -> How {
        debug_assert!(by_period(n));
        if self.chosen == 0 {
            let (m, kind, max) = if self.last_single {
                (per_message.choose(now), Kind::PerMessage, PERIOD_MAX)
            } else {
                let c = &mut self.streams[coop::size_class(n)];
                let m = c.choose(now);
                let max = if c.trying() {
                    TRY_PERIOD_MAX
                } else {
                    PERIOD_MAX
                };
                (m, Kind::Stream, max)
            };
            self.max = max;
            self.first = (m, n, kind);
            self.start = now;
            self.bytes = 0;
            self.last_end = now;
            self.spoiled = false;
            self.sent = sent;
        }
        self.held = None;
        self.bytes = self.bytes.saturating_add(n);
        self.chosen = self.chosen.saturating_add(1);
        self.open = self.open.saturating_add(1);
        Self::how(self.first)
    }

    /// A stream's [`Mech::Coop`] is the receiver's read alone below 64 KiB (one chunk: the
    /// receiver reads it all anyway), the cooperative copy from 64 KiB.
    fn how((m, n, kind): (Mech, usize, Kind)) -> How {
        match (m, kind) {
            (Mech::Pipe, _) => How::Pipe,
            (Mech::Coop, Kind::PerMessage) => How::Coop,
            (Mech::Coop, Kind::Stream) if coop::size_class(n) == 0 => How::Read,
            (Mech::Coop, Kind::Stream) => How::Coop,
        }
    }

    /// A receive chosen by [`OneWay::choose`] ended: `s` is its own sample
    /// ([`Sample::Timed`], or [`Sample::Skipped`] when it cannot be measured), `sends`
    /// whether we had rendezvous sends under way.
    pub fn ended(&mut self, s: Sample, sends: bool) {
        if self.chosen == 0 {
            return;
        }
        self.open = self.open.saturating_sub(1);
        self.last_end = self.last_end.max(s.end());
        let timed = matches!(s, Sample::Timed { .. });
        self.spoiled |= !timed;
        if self.chosen == 1 {
            self.held = timed.then_some((s, sends));
        }
    }

    /// Feeds `s` to the chooser of `kind` (`per_message` for [`Kind::PerMessage`]), the
    /// per-message one told `sends` ([`Chooser::receiver_sends`]); `true` if it made the
    /// chooser switch.
    pub fn record(
        &mut self,
        s: Sample,
        kind: Kind,
        sends: bool,
        per_message: &mut Chooser,
    ) -> bool {
        let c = match kind {
            Kind::PerMessage => {
                per_message.receiver_sends(sends);
                per_message
            }
            Kind::Stream => &mut self.streams[coop::size_class(s.bytes()).min(1)],
        };
        // An unmeasured transfer tells neither chooser anything here.
        s.record_timed(c).unwrap_or(false)
    }

    /// The streams' chooser of `n`-byte messages ([`by_period`]).
    pub fn streams(&self, n: usize) -> &Chooser {
        &self.streams[coop::size_class(n).min(1)]
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    const N: usize = 16 << 10;

    fn mech(h: How) -> Mech {
        match h {
            How::Pipe => Mech::Pipe,
            How::Coop | How::Read => Mech::Coop,
        }
    }

    /// The receiver's side of one round trip of a 16 KiB ping-pong beginning at `t`: the
    /// message takes `pipe` or `coop` ns by the mechanism chosen, then we send the pong.
    fn ping_pong(
        w: &mut OneWay,
        c: &mut Chooser,
        sent: &mut u64,
        t: &mut u64,
        pipe: u64,
        coop: u64,
    ) {
        let (_, d) = receive(w, c, (N, *t, *sent), |how| match how {
            How::Pipe => pipe,
            How::Coop => coop,
            How::Read => panic!("a ping-pong's message read alone"),
        });
        *sent += 1;
        *t += 2 * d;
    }

    /// One receive of `n` bytes at `t` with `sent` of our messages out: the period it ends
    /// recorded, its mechanism chosen, and its transfer timed as taking `took(how)` ns.
    /// Returns the mechanism and that time.
    fn receive(
        w: &mut OneWay,
        c: &mut Chooser,
        (n, t, sent): (usize, u64, u64),
        took: impl FnOnce(How) -> u64,
    ) -> (How, u64) {
        if let Some((s, kind, sends)) = w.close(t, sent) {
            w.record(s, kind, sends, c);
        }
        let how = w.choose(n, t, sent, c);
        let d = took(how);
        w.ended(
            Sample::Timed {
                m: mech(how),
                n,
                start: t,
                end: t + d,
            },
            false,
        );
        (how, d)
    }

    /// One window of 64 messages of 16 KiB beginning at `t`, then our acknowledgement.
    /// Pipelined, all 64 are matched at once (their clear-to-sends go out together) and end
    /// `pipe` ns apart; read by the receiver alone, each is matched when the previous one
    /// is done and takes `read` ns, the next matched 300 ns later; by the cooperative copy
    /// likewise, `coop` ns each. Returns the first message's mechanism and whether every
    /// message took it.
    fn window(
        w: &mut OneWay,
        c: &mut Chooser,
        sent: &mut u64,
        t: &mut u64,
        times: (u64, u64, u64),
    ) -> (How, bool) {
        window_of(N, w, c, sent, t, times)
    }

    /// [`window`] of `n`-byte messages.
    fn window_of(
        n: usize,
        w: &mut OneWay,
        c: &mut Chooser,
        sent: &mut u64,
        t: &mut u64,
        (pipe, read, coop): (u64, u64, u64),
    ) -> (How, bool) {
        let choose = |w: &mut OneWay, c: &mut Chooser, at: u64, sent: u64| {
            if let Some((s, kind, sends)) = w.close(at, sent) {
                w.record(s, kind, sends, c);
            }
            w.choose(n, at, sent, c)
        };
        let first = choose(w, c, *t, *sent);
        let mut same = true;
        if first == How::Pipe {
            let hows: Vec<How> = std::iter::once(first)
                .chain((1..64).map(|_| choose(w, c, *t, *sent)))
                .collect();
            for (i, &h) in hows.iter().enumerate() {
                same &= h == first;
                let end = *t + (i as u64 + 1) * pipe;
                let start = end - pipe;
                w.ended(
                    Sample::Timed {
                        m: mech(h),
                        n,
                        start,
                        end,
                    },
                    false,
                );
            }
            *t += 64 * pipe;
        } else {
            for i in 0..64 {
                let h = if i == 0 {
                    first
                } else {
                    choose(w, c, *t, *sent)
                };
                same &= h == first;
                let d = if h == How::Read { read } else { coop };
                w.ended(
                    Sample::Timed {
                        m: mech(h),
                        n,
                        start: *t,
                        end: *t + d,
                    },
                    false,
                );
                *t += d + 300;
            }
        }
        *sent += 1;
        *t += 3_000;
        (first, same)
    }

    /// The harness's `lat` sweep then `bw`, at 16 KiB, as measured (np=2, `chrt -r 1`):
    /// the ping-pong's messages pipelined 2.9 us, cooperative 3.85 us (its sent buffer was
    /// just written by the peer); then one-way windows of 64 messages, pipelined 1.25 us a
    /// message (13 GB/s), read by the receiver alone 0.75 us + 0.3 us to match the next
    /// (15.6 GB/s), cooperative 1.2 us + 0.3. The ping-pong ends on the pipeline, and the
    /// stream does not inherit it: it ends on the read, nearly all its windows by the
    /// read, every window by one mechanism. Where the pipeline's windows are the faster
    /// (CPUs sharing a cache: 0.6 us a message), the stream takes it.
    #[test]
    fn a_stream_after_ping_pongs_is_judged_by_its_windows() {
        let run = |pipe_msg: u64| {
            let mut w = OneWay::default();
            let mut c = Chooser::default();
            let (mut sent, mut t) = (0u64, 1_000u64);
            while t < 100_000_000 {
                ping_pong(&mut w, &mut c, &mut sent, &mut t, 2_900, 3_850);
            }
            assert_eq!(c.current(), Mech::Pipe, "the ping-pong's verdict");
            let (mut all, mut by_read, mut mixed) = (0u32, 0u32, 0u32);
            let from = t;
            while t < from + 200_000_000 {
                let (h, same) = window(&mut w, &mut c, &mut sent, &mut t, (pipe_msg, 750, 1_200));
                all += 1;
                by_read += u32::from(h == How::Read);
                mixed += u32::from(!same);
            }
            assert_eq!(mixed, 0, "windows of more than one mechanism");
            assert_eq!(
                c.current(),
                Mech::Pipe,
                "the ping-pong's chooser is left alone"
            );
            (w.streams(N).current(), f64::from(by_read) / f64::from(all))
        };
        let (m, share) = run(1_250);
        assert_eq!(m, Mech::Coop);
        assert!(share > 0.95, "{share} of the windows read by the receiver");
        let (m, share) = run(600);
        assert_eq!(m, Mech::Pipe);
        assert!(share < 0.05, "{share} of the windows read by the receiver");
    }

    /// A ping-pong's messages are measured one by one, by the per-message chooser, which
    /// follows the faster one; messages that come apart without anything sent back (a
    /// ring's steps) are each a period of one, measured the same way; a stream that sends
    /// nothing back still gives period samples every [`PERIOD_MAX`] receives.
    #[test]
    fn ping_pongs_and_apart_messages_are_measured_per_message() {
        let mut w = OneWay::default();
        let mut c = Chooser::default();
        let (mut sent, mut t) = (0u64, 1_000u64);
        while t < 100_000_000 {
            ping_pong(&mut w, &mut c, &mut sent, &mut t, 3_300, 2_050);
        }
        assert_eq!(
            c.current(),
            Mech::Coop,
            "mpi4py's ping-pong: the cooperative copy"
        );
        // Apart: 20 us between messages, nothing sent back.
        let mut w = OneWay::default();
        let mut c = Chooser::default();
        let mut t = 1_000u64;
        while t < 100_000_000 {
            if let Some((s, kind, sends)) = w.close(t, 0) {
                assert_eq!(kind, Kind::PerMessage);
                w.record(s, kind, sends, &mut c);
            }
            let h = w.choose(N, t, 0, &mut c);
            assert_ne!(h, How::Read);
            let d = if h == How::Pipe { 3_300 } else { 2_050 };
            let s = Sample::Timed {
                m: mech(h),
                n: N,
                start: t,
                end: t + d,
            };
            w.ended(s, false);
            t += 20_000;
        }
        assert_eq!(c.current(), Mech::Coop);
        // Back to back with nothing sent back: a period sample every PERIOD_MAX receives.
        let mut w = OneWay::default();
        let mut c = Chooser::default();
        let mut t = 1_000u64;
        let mut periods = 0;
        for _ in 0..4 * PERIOD_MAX + 1 {
            if let Some((s, kind, _)) = w.close(t, 0) {
                periods += u32::from(kind == Kind::Stream && matches!(s, Sample::Period { .. }));
            }
            let h = w.choose(N, t, 0, &mut c);
            let s = Sample::Timed {
                m: mech(h),
                n: N,
                start: t,
                end: t + 1_000,
            };
            w.ended(s, false);
            t += 1_300;
        }
        // The first period was chosen by the per-message chooser: no stream sample.
        assert_eq!(periods, 3);
    }

    /// A 2-rank bcast of 64 KiB far apart, as measured (`chrt -r 1`): one blocking
    /// rendezvous after another, nothing sent back, the next message matched 1.5 us after
    /// the last one ended; the cooperative copy 6.3 us a message, the pipeline 25. The
    /// streams' chooser settles on the cooperative copy and tries the pipeline now and
    /// then: each try lasts [`coop::WARMUP`] + [`coop::SETTLE`] periods of at most
    /// [`TRY_PERIOD_MAX`] receives, not of [`PERIOD_MAX`] (2048 pipelined messages, 50 ms).
    #[test]
    fn a_try_in_a_stream_without_acknowledgements_is_short() {
        const M: usize = 64 << 10;
        let mut w = OneWay::default();
        let mut c = Chooser::default();
        let mut t = 1_000u64;
        let (mut run, mut longest, mut runs, mut settled) = (0u32, 0u32, 0u32, false);
        while t < 300_000_000 {
            let (h, d) = receive(&mut w, &mut c, (M, t, 0), |h| {
                if h == How::Pipe {
                    25_000
                } else {
                    6_300
                }
            });
            t += d + 1_500;
            if h == How::Pipe {
                run += 1;
                continue;
            }
            if settled && run > 0 {
                longest = longest.max(run);
                runs += 1;
            }
            run = 0;
            settled |= w.streams(M).current() == Mech::Coop && !w.streams(M).trying();
        }
        let most = (coop::WARMUP + coop::SETTLE) * TRY_PERIOD_MAX;
        assert!(
            longest <= most,
            "a try of the pipeline took {longest} messages in a row (at most {most})"
        );
        assert!(runs >= 2, "{runs} tries of the pipeline once settled");
        assert_eq!(w.streams(M).current(), Mech::Coop);
    }

    /// A transfer that could not be measured (cold pages) spoils its period's sample; a
    /// ping-pong's message chosen by the streams' chooser (right after a stream) gives the
    /// per-message chooser nothing (the read alone is not its cooperative copy).
    #[test]
    fn unmeasured_transfers_give_no_sample() {
        let mut w = OneWay::default();
        let mut c = Chooser::default();
        assert_eq!(w.choose(N, 100, 0, &mut c), How::Pipe);
        assert_eq!(w.choose(N, 100, 0, &mut c), How::Pipe);
        w.ended(Sample::Skipped { n: N, at: 2_000 }, false);
        assert_eq!(w.close(2_100, 0), None, "a receive still moves");
        w.ended(
            Sample::Timed {
                m: Mech::Pipe,
                n: N,
                start: 2_000,
                end: 3_000,
            },
            false,
        );
        assert_eq!(w.close(3_100, 1), None, "spoiled by the cold transfer");
        // The next period is a stream's: chosen by the streams' chooser, the read.
        assert_eq!(w.choose(N, 3_100, 1, &mut c), How::Read);
        let s = Sample::Timed {
            m: Mech::Coop,
            n: N,
            start: 3_100,
            end: 4_000,
        };
        w.ended(s, false);
        assert_eq!(
            w.close(4_100, 2),
            None,
            "not the per-message chooser's mechanism"
        );
        // After that period of one, the per-message chooser chooses again.
        assert_eq!(w.choose(N, 4_100, 2, &mut c), How::Pipe);
    }

    /// Streams of 64-256 KiB messages have their own streams' chooser, between the
    /// pipelined and the cooperative copy (not the receiver's read alone), which the
    /// streams below 64 KiB do not share. The harness's `lat` then `bw` at 64 KiB in the
    /// placement where the pipeline streams through the bulk buffer's stream area at
    /// 25 GB/s (2.6 us a message) and the cooperative copy moves 15 GB/s (4.4 us + 0.3 to
    /// match the next): the ping-pong's per-message verdict (cooperative) stays, and the
    /// stream takes the pipeline after its first windows, every window by one mechanism.
    /// Where the pipeline streams at 11 GB/s (6 us), the stream keeps the cooperative copy.
    #[test]
    fn a_stream_of_64k_messages_chooses_between_the_pipeline_and_the_cooperative_copy() {
        const M: usize = 64 << 10;
        let run = |pipe_msg: u64| {
            let mut w = OneWay::default();
            let mut c = Chooser::default();
            let (mut sent, mut t) = (0u64, 1_000u64);
            // 64 KiB ping-pong: cooperative 4.4 us, pipelined 6.5 us per message.
            while t < 100_000_000 {
                if let Some((s, kind, sends)) = w.close(t, sent) {
                    w.record(s, kind, sends, &mut c);
                }
                let how = w.choose(M, t, sent, &mut c);
                assert_ne!(how, How::Read, "a ping-pong's message read alone");
                let d = if how == How::Pipe { 6_500 } else { 4_400 };
                w.ended(
                    Sample::Timed {
                        m: mech(how),
                        n: M,
                        start: t,
                        end: t + d,
                    },
                    false,
                );
                sent += 1;
                t += 2 * d;
            }
            assert_eq!(c.current(), Mech::Coop, "the ping-pong's verdict");
            let (mut all, mut piped, mut mixed, mut read) = (0u32, 0u32, 0u32, 0u32);
            let from = t;
            while t < from + 300_000_000 {
                let (h, same) = window_of(
                    M,
                    &mut w,
                    &mut c,
                    &mut sent,
                    &mut t,
                    (pipe_msg, 1_000, 4_400),
                );
                all += 1;
                piped += u32::from(h == How::Pipe);
                mixed += u32::from(!same);
                read += u32::from(h == How::Read);
            }
            assert_eq!(mixed, 0, "windows of more than one mechanism");
            assert_eq!(read, 0, "a 64 KiB stream read by the receiver alone");
            assert_eq!(
                c.current(),
                Mech::Coop,
                "the ping-pong's chooser is left alone"
            );
            assert_eq!(
                w.streams(N).current(),
                Mech::Coop,
                "the 16 KiB streams' chooser"
            );
            (w.streams(M).current(), f64::from(piped) / f64::from(all))
        };
        let (m, share) = run(2_600);
        assert_eq!(m, Mech::Pipe);
        assert!(share > 0.9, "{share} of the windows pipelined");
        let (m, share) = run(6_000);
        assert_eq!(m, Mech::Coop);
        assert!(share < 0.1, "{share} of the windows pipelined");
    }

    /// The placement changes in the middle of a 64 KiB stream (the pipeline's stream rate
    /// goes from 11 to 25 GB/s, then back): the streams' chooser follows it within its
    /// exploration interval, switching only between windows (every window is moved by one
    /// mechanism, and a window's receives are never split between two).
    #[test]
    fn the_streams_chooser_switches_between_windows_when_the_rates_change() {
        const M: usize = 64 << 10;
        let mut w = OneWay::default();
        let mut c = Chooser::default();
        let (mut sent, mut t) = (0u64, 1_000u64);
        let mut phase = |pipe_msg: u64, t: &mut u64, sent: &mut u64| {
            let from = *t;
            let mut last = How::Coop;
            while *t < from + 1_500_000_000 {
                let (h, same) = window_of(M, &mut w, &mut c, sent, t, (pipe_msg, 1_000, 4_400));
                assert!(same, "a window split between two mechanisms at {t}");
                last = h;
            }
            (w.streams(M).current(), last)
        };
        assert_eq!(phase(6_000, &mut t, &mut sent), (Mech::Coop, How::Coop));
        assert_eq!(phase(2_600, &mut t, &mut sent), (Mech::Pipe, How::Pipe));
        assert_eq!(phase(6_000, &mut t, &mut sent), (Mech::Coop, How::Coop));
    }
}
