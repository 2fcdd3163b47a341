//! The protocol in one process: two or three engines joined by fake links
//! (`crate::btl::fake`), driven by nonblocking calls and progress in a loop, with the wires
//! inspected, held back, cut or fed forged records.

use std::collections::HashMap;

use crate::btl::fake::{self, WireHandle};
use crate::btl::sm::params::{Placement, Settings, SingleCopy};
use crate::btl::Link;
use crate::pml::hdr::{
    Hdr, FIN_READ, F_CMA, HDR, K_BYE, K_CTS, K_DATA, K_EAGER, K_FIN, K_NACK, K_REVOKE, K_RTS,
};
use crate::{CommId, Engine, ErrorClass, ReqId, SendMode, Status, ANY_SOURCE, ANY_TAG};

/// Largest eager message of the test engines.
const EAGER: usize = 256;
/// Rendezvous fragment size of the test engines.
const FRAG: usize = 1000;
/// Passes of progress after which a test calls its operation hung.
const PATIENCE: usize = 10_000;

const WORLD: CommId = CommId(0);

/// Engines `0..n`, every pair joined by a fake wire.
struct Net {
    e: Vec<Engine>,
    /// The wire of each pair `(a, b)`, `a < b`; `a` sends on side 0.
    wires: HashMap<(usize, usize), WireHandle>,
}

impl Net {
    /// `n` engines whose links carry up to `capacity` records in flight each way.
    fn new(n: usize, capacity: usize) -> Net {
        Net::build(n, capacity, 4096, &test_settings())
    }

    /// `n` engines with `settings` whose links carry up to `capacity` records in flight
    /// each way and DATA fragments of up to `max_data` bytes.
    fn build(n: usize, capacity: usize, max_data: usize, settings: &Settings) -> Net {
        let mut links: Vec<Vec<Option<Box<dyn Link>>>> =
            (0..n).map(|_| (0..n).map(|_| None).collect()).collect();
        let mut wires = HashMap::new();
        for (a, b) in (0..n).flat_map(|a| (a + 1..n).map(move |b| (a, b))) {
            let (la, lb, w) = fake::pair(4096, max_data, capacity);
            links[a][b] = Some(Box::new(la));
            links[b][a] = Some(Box::new(lb));
            wires.insert((a, b), w);
        }
        let e = links
            .into_iter()
            .enumerate()
            .map(|(r, l)| Engine::with_links(r as i32, l, settings))
            .collect();
        Net { e, wires }
    }

    /// Two engines joined by the link pair `a` (rank 0's) and `b` (rank 1's), with no fake
    /// wire (a real shared-memory link: its own rings and bulk buffers).
    fn joined(a: Box<dyn Link>, b: Box<dyn Link>) -> Net {
        Net::joined_with(a, b, &test_settings())
    }

    /// [`Net::joined`] with `s`.
    fn joined_with(a: Box<dyn Link>, b: Box<dyn Link>, s: &Settings) -> Net {
        let e = vec![
            Engine::with_links(0, vec![None, Some(a)], s),
            Engine::with_links(1, vec![Some(b), None], s),
        ];
        Net {
            e,
            wires: HashMap::new(),
        }
    }

    /// The wire between `a` and `b`, and the side `from` sends on.
    fn wire(&self, from: usize, to: usize) -> (&WireHandle, usize) {
        let key = (from.min(to), from.max(to));
        (&self.wires[&key], usize::from(from > to))
    }

    /// Record kinds (and payload lengths) sent so far from `from` to `to`.
    fn log(&self, from: usize, to: usize) -> Vec<(u8, usize)> {
        let (w, side) = self.wire(from, to);
        w.log(side)
    }

    /// One progress pass of every engine.
    fn step(&self) {
        for e in &self.e {
            e.progress();
        }
    }

    /// Progress until `r` of engine `rank` completes; `None` if it does not within
    /// [`PATIENCE`] passes.
    fn wait(&self, rank: usize, r: ReqId) -> Option<Status> {
        for _ in 0..PATIENCE {
            if let Some(s) = self.e[rank].test(r) {
                return Some(s);
            }
            self.step();
        }
        None
    }

    /// Like [`Net::wait`], panicking on a hang.
    fn done(&self, rank: usize, r: ReqId) -> Status {
        self.wait(rank, r)
            .unwrap_or_else(|| panic!("request {r:?} of rank {rank} hangs"))
    }

    /// Starts a send of `buf` (which the caller keeps alive until it completes).
    fn isend(&self, from: usize, to: usize, tag: i32, buf: &[u8], mode: SendMode) -> ReqId {
        // SAFETY: the tests keep `buf` alive and unchanged until the request completes.
        unsafe { self.e[from].isend(buf.as_ptr(), buf.len(), to as i32, tag, WORLD, mode) }
            .expect("isend")
    }

    /// Starts a receive into `buf` (which the caller keeps alive until it completes).
    fn irecv(&self, at: usize, src: i32, tag: i32, buf: &mut [u8]) -> ReqId {
        // SAFETY: the tests keep `buf` alive and untouched until the request completes.
        unsafe { self.e[at].irecv(buf.as_mut_ptr(), buf.len(), src, tag, WORLD) }.expect("irecv")
    }
}

/// The settings of the test engines: small eager limit and fragments, no single copy,
/// no cut of lone messages.
fn test_settings() -> Settings {
    Settings {
        ring: 64 << 10,
        ring_hot: 16 << 10,
        bulk: 0,
        eager_limit: EAGER,
        frag: FRAG,
        frag_min: 0,
        single_copy: SingleCopy::None,
        coop_min: usize::MAX,
        coop_chunk: 4096,
        placement: Placement::Near,
        far_eager: 4096,
        far_stream_min: 0,
    }
}

/// `n` bytes that differ from message to message (`seed`).
fn data(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| (i as u8).wrapping_mul(31) ^ seed).collect()
}

/// Sends `n` bytes from 0 to 1 and receives them into a buffer of `cap` bytes; returns the
/// receive's status and buffer (after checking the send completed without error).
fn transfer(net: &Net, n: usize, cap: usize, tag: i32) -> (Status, Vec<u8>) {
    let msg = data(n, tag as u8);
    let mut buf = vec![0xEEu8; cap];
    let s = net.isend(0, 1, tag, &msg, SendMode::Standard);
    let r = net.irecv(1, 0, tag, &mut buf);
    let rs = net.done(1, r);
    let ss = net.done(0, s);
    assert_eq!(ss.error, None, "send of {n} bytes");
    let k = n.min(cap);
    assert_eq!(&buf[..k], &msg[..k], "payload of {n} bytes into {cap}");
    assert!(
        buf[k..].iter().all(|&b| b == 0xEE),
        "nothing beyond what fits"
    );
    (rs, buf)
}

/// Messages up to the eager limit travel as one EAGER record and complete the send at once.
#[test]
fn eager_messages_are_one_record_each() {
    let net = Net::new(2, 64);
    for (i, n) in [0, 1, 16, 100, EAGER - 1, EAGER].into_iter().enumerate() {
        let msg = data(n, i as u8);
        let s = net.isend(0, 1, i as i32, &msg, SendMode::Standard);
        // Written straight into the link: complete before the receiver did anything.
        assert!(
            net.e[0].test(s).is_some(),
            "eager send of {n} bytes completes at once"
        );
        let mut buf = vec![0u8; EAGER];
        let r = net.irecv(1, 0, i as i32, &mut buf);
        let st = net.done(1, r);
        assert_eq!(
            (st.source, st.tag, st.count_bytes, st.error),
            (0, i as i32, n, None)
        );
        assert_eq!(&buf[..n], &msg[..]);
    }
    let log = net.log(0, 1);
    assert!(log.iter().all(|&(k, _)| k == K_EAGER), "{log:?}");
    assert_eq!(log.len(), 6);
    assert!(
        net.log(1, 0).is_empty(),
        "no acknowledgement of standard sends"
    );
}

/// Beyond the eager limit: RTS, CTS, then the data in fragments of at most the fragment
/// size, for sizes around the eager limit and around multiples of the fragment size.
#[test]
fn rendezvous_pipelines_fragments() {
    let net = Net::new(2, 64);
    for (i, n) in [EAGER + 1, FRAG - 1, FRAG, FRAG + 1, 2 * FRAG, 3 * FRAG + 7]
        .into_iter()
        .enumerate()
    {
        let before = net.log(0, 1).len();
        let (st, _) = transfer(&net, n, n, 100 + i as i32);
        assert_eq!((st.count_bytes, st.error, st.source), (n, None, 0));
        let sent = &net.log(0, 1)[before..];
        assert_eq!(sent[0], (K_RTS, 0), "{n} bytes: RTS first");
        let frags: Vec<usize> = sent[1..]
            .iter()
            .map(|&(k, len)| {
                assert_eq!(k, K_DATA, "{n} bytes: only DATA after the RTS");
                len
            })
            .collect();
        let want: Vec<usize> = (0..n.div_ceil(FRAG))
            .map(|k| FRAG.min(n - k * FRAG))
            .collect();
        assert_eq!(frags, want, "{n} bytes");
    }
    let back = net.log(1, 0);
    assert!(back.iter().all(|&(k, _)| k == K_CTS), "{back:?}");
    assert_eq!(back.len(), 6, "one CTS per message");
}

/// A receive buffer shorter than the message: Truncate, the bytes that fit delivered, and
/// the next message arrives normally, for both protocols.
#[test]
fn truncation_delivers_what_fits_and_keeps_the_stream() {
    let net = Net::new(2, 64);
    // Eager.
    let (st, _) = transfer(&net, 200, 50, 1);
    assert_eq!((st.count_bytes, st.error), (50, Some(ErrorClass::Truncate)));
    let (st, _) = transfer(&net, 100, 100, 2);
    assert_eq!((st.count_bytes, st.error), (100, None));
    // Rendezvous: the CTS asks only for what fits, so only that much moves.
    let before = net.log(0, 1).len();
    let (st, _) = transfer(&net, 2500, 1500, 3);
    assert_eq!(
        (st.count_bytes, st.error),
        (1500, Some(ErrorClass::Truncate))
    );
    let moved: usize = net.log(0, 1)[before..]
        .iter()
        .filter(|r| r.0 == K_DATA)
        .map(|r| r.1)
        .sum();
    assert_eq!(moved, 1500);
    // A rendezvous message into a buffer below the eager limit.
    let (st, _) = transfer(&net, 3000, 10, 4);
    assert_eq!((st.count_bytes, st.error), (10, Some(ErrorClass::Truncate)));
    let (st, _) = transfer(&net, 2000, 2000, 5);
    assert_eq!((st.count_bytes, st.error), (2000, None));
}

/// Non-overtaking across protocols: a rendezvous message and an eager one sent after it to
/// the same peer and tag are matched in send order, whether the receives come later or
/// were posted first.
#[test]
fn order_holds_across_eager_and_rendezvous() {
    let net = Net::new(2, 64);
    let big = data(2000, 1);
    let small = data(10, 2);
    for (tag, receives_first) in [(5, false), (6, true)] {
        let mut b1 = vec![0u8; 4000];
        let mut b2 = vec![0u8; 4000];
        let mut recvs = Vec::new();
        if receives_first {
            recvs.push(net.irecv(1, 0, tag, &mut b1));
            recvs.push(net.irecv(1, 0, tag, &mut b2));
        }
        let s1 = net.isend(0, 1, tag, &big, SendMode::Standard);
        let s2 = net.isend(0, 1, tag, &small, SendMode::Standard);
        if !receives_first {
            // Both arrive unexpected.
            for _ in 0..10 {
                net.step();
            }
            recvs.push(net.irecv(1, 0, tag, &mut b1));
            recvs.push(net.irecv(1, 0, ANY_TAG, &mut b2));
        }
        assert_eq!(net.done(1, recvs[0]).count_bytes, 2000, "tag {tag}");
        assert_eq!(net.done(1, recvs[1]).count_bytes, 10, "tag {tag}");
        assert_eq!(&b1[..2000], &big[..]);
        assert_eq!(&b2[..10], &small[..]);
        net.done(0, s1);
        net.done(0, s2);
    }
}

/// A full link: records wait in the sender's queue and still arrive in order, also when
/// the link has room again before the queue was flushed.
#[test]
fn a_full_link_queues_in_order() {
    let net = Net::new(2, 2);
    let msgs: Vec<Vec<u8>> = (0..20).map(|i| data(10 + i * 20, i as u8)).collect();
    let mut sends: Vec<ReqId> = msgs[..10]
        .iter()
        .map(|m| net.isend(0, 1, 9, m, SendMode::Standard))
        .collect();
    // The receiver empties the link while the sender still has records queued: the next
    // sends must queue behind them, not take the free link.
    net.e[1].progress();
    sends.extend(
        msgs[10..]
            .iter()
            .map(|m| net.isend(0, 1, 9, m, SendMode::Standard)),
    );
    for m in &msgs {
        let mut b = vec![0u8; 1000];
        let r = net.irecv(1, 0, 9, &mut b);
        assert_eq!(net.done(1, r).count_bytes, m.len());
        assert_eq!(&b[..m.len()], &m[..]);
    }
    for s in sends {
        assert_eq!(net.done(0, s).error, None);
    }
}

/// Wildcard receives take messages from either peer; a specific-source receive posted
/// first is not taken by the other peer's message.
#[test]
fn wildcard_receives_from_two_peers() {
    let net = Net::new(3, 64);
    let (m1, m2) = (data(30, 1), data(3000, 2));
    let mut specific = vec![0u8; 4000];
    let rs = net.irecv(0, 2, ANY_TAG, &mut specific);
    let s1 = net.isend(1, 0, 11, &m1, SendMode::Standard);
    let s2 = net.isend(2, 0, 22, &m2, SendMode::Standard);
    let mut any = vec![0u8; 4000];
    let ra = net.irecv(0, ANY_SOURCE, ANY_TAG, &mut any);
    let st = net.done(0, rs);
    assert_eq!((st.source, st.tag, st.count_bytes), (2, 22, 3000));
    assert_eq!(&specific[..3000], &m2[..]);
    let st = net.done(0, ra);
    assert_eq!((st.source, st.tag, st.count_bytes), (1, 11, 30));
    assert_eq!(&any[..30], &m1[..]);
    net.done(1, s1);
    net.done(2, s2);
    // Two wildcard receives, one message from each peer: each taken once.
    let (m1, m2) = (data(40, 3), data(50, 4));
    let s1 = net.isend(1, 0, 1, &m1, SendMode::Standard);
    let s2 = net.isend(2, 0, 2, &m2, SendMode::Standard);
    let mut b1 = vec![0u8; 100];
    let mut b2 = vec![0u8; 100];
    let r1 = net.irecv(0, ANY_SOURCE, ANY_TAG, &mut b1);
    let r2 = net.irecv(0, ANY_SOURCE, ANY_TAG, &mut b2);
    let (st1, st2) = (net.done(0, r1), net.done(0, r2));
    let mut got = [(st1.source, st1.count_bytes), (st2.source, st2.count_bytes)];
    got.sort();
    assert_eq!(got, [(1, 40), (2, 50)]);
    for (st, b) in [(st1, &b1), (st2, &b2)] {
        let want = if st.source == 1 { &m1 } else { &m2 };
        assert_eq!(&b[..want.len()], &want[..]);
    }
    net.done(1, s1);
    net.done(2, s2);
}

/// A synchronous send completes only after the receiver matched it: not while the message
/// waits unexpected, not while the acknowledgement is held back on the wire.
#[test]
fn synchronous_send_completes_after_the_match() {
    let net = Net::new(2, 64);
    let msg = data(20, 7);
    let s = net.isend(0, 1, 3, &msg, SendMode::Sync);
    let (w, back) = net.wire(1, 0);
    w.hold(back, true);
    for _ in 0..100 {
        net.step();
    }
    assert_eq!(net.e[0].test(s), None, "no receive posted yet");
    let mut b = vec![0u8; 20];
    let r = net.irecv(1, 0, 3, &mut b);
    assert_eq!(net.done(1, r).count_bytes, 20);
    for _ in 0..100 {
        net.step();
    }
    assert_eq!(net.e[0].test(s), None, "acknowledgement held back");
    assert_eq!(net.log(1, 0), [(K_FIN, 0)]);
    w.hold(back, false);
    assert_eq!(net.done(0, s).error, None);
}

/// A peer that dies (its link cut) fails the receive posted for it and the send waiting
/// for its clear-to-send with ProcFailed; later operations on it fail at once.
#[test]
fn dead_peer_fails_pending_operations() {
    let net = Net::new(2, 64);
    let mut b = vec![0u8; 100];
    let r = net.irecv(0, 1, 1, &mut b);
    let big = data(5000, 1);
    let s = net.isend(0, 1, 2, &big, SendMode::Standard);
    for _ in 0..10 {
        net.e[0].progress();
    }
    assert_eq!(net.e[0].test(r), None);
    assert_eq!(net.e[0].test(s), None, "waiting for the CTS");
    net.wire(0, 1).0.cut();
    let rs = net.wait(0, r).expect("receive fails instead of hanging");
    let ss = net.wait(0, s).expect("send fails instead of hanging");
    assert_eq!(rs.error, Some(ErrorClass::ProcFailed));
    assert_eq!(ss.error, Some(ErrorClass::ProcFailed));
    let s = net.isend(0, 1, 3, &big, SendMode::Standard);
    assert_eq!(net.done(0, s).error, Some(ErrorClass::ProcFailed));
    let r = net.irecv(0, 1, 3, &mut b);
    assert_eq!(net.done(0, r).error, Some(ErrorClass::ProcFailed));
}

/// A peer that dies while progress walks the links (the first of two) is dropped from the
/// walk without skipping or overrunning the others: no panic, the other peer's message
/// arrives in the same pass, and operations on the dead one fail with ProcFailed.
#[test]
fn a_peer_dying_during_progress_does_not_disturb_the_others() {
    let net = Net::new(3, 64);
    let mut from1 = vec![0u8; 16];
    let mut from2 = vec![0u8; 16];
    let r1 = net.irecv(0, 1, 1, &mut from1);
    let r2 = net.irecv(0, 2, 1, &mut from2);
    let m = data(16, 9);
    let s2 = net.isend(2, 0, 1, &m, SendMode::Standard);
    assert_eq!(net.e[2].test(s2).map(|s| s.error), Some(None), "eager");
    net.wire(0, 1).0.cut();
    net.e[0].progress();
    assert_eq!(net.e[0].test(r2).map(|s| s.error), Some(None), "same pass");
    assert_eq!(from2, m);
    assert_eq!(
        net.e[0].test(r1).map(|s| s.error),
        Some(Some(ErrorClass::ProcFailed))
    );
    // Both orders: the dead peer last in the walk.
    let net = Net::new(3, 64);
    let r1 = net.irecv(0, 1, 1, &mut from1);
    let r2 = net.irecv(0, 2, 1, &mut from2);
    net.wire(0, 2).0.cut();
    let s1 = net.isend(1, 0, 1, &m, SendMode::Standard);
    assert_eq!(net.e[1].test(s1).map(|s| s.error), Some(None));
    net.e[0].progress();
    assert_eq!(net.e[0].test(r1).map(|s| s.error), Some(None));
    assert_eq!(
        net.e[0].test(r2).map(|s| s.error),
        Some(Some(ErrorClass::ProcFailed))
    );
    net.e[0].progress();
}

/// A cancelled receive completes as cancelled and does not take the message sent later.
#[test]
fn cancel_of_a_posted_receive() {
    let net = Net::new(2, 64);
    let mut b1 = vec![0u8; 10];
    let r1 = net.irecv(1, 0, 4, &mut b1);
    net.e[1].cancel(r1);
    let st = net.e[1].test(r1).expect("cancelled at once");
    assert!(st.cancelled);
    assert_eq!(st.count_bytes, 0);
    let msg = data(10, 9);
    let s = net.isend(0, 1, 4, &msg, SendMode::Standard);
    let mut b2 = vec![0u8; 10];
    let r2 = net.irecv(1, 0, 4, &mut b2);
    let st = net.done(1, r2);
    assert!(!st.cancelled);
    assert_eq!(st.count_bytes, 10);
    assert_eq!(b2, msg);
    assert_eq!(b1, [0u8; 10], "the cancelled receive got nothing");
    net.done(0, s);
}

/// A FIN that says the receiver read our message alone ([`FIN_READ`]) tells the sender
/// that the peer reads its messages as they come; a clear-to-send (the peer pipelines
/// them) says it no longer does; a FIN without the flag (a synchronous send's
/// acknowledgement) changes nothing.
#[test]
fn fin_read_tells_that_the_peer_reads_our_messages() {
    let net = Net::new(2, 64);
    let (w, side) = net.wire(1, 0);
    let inject = |kind, a| {
        let h = Hdr {
            kind,
            a,
            b: 12345,
            ..Hdr::default()
        };
        w.inject(side, fake::encode(&h, &[]));
        for _ in 0..10 {
            net.step();
        }
    };
    assert!(!net.e[0].peer_reads_ours(1));
    inject(K_FIN, FIN_READ);
    assert!(net.e[0].peer_reads_ours(1));
    inject(K_FIN, 0);
    assert!(net.e[0].peer_reads_ours(1));
    inject(K_CTS, 0);
    assert!(!net.e[0].peer_reads_ours(1));
    // The stream goes on.
    transfer(&net, 3 * FRAG, 3 * FRAG, 1);
}

/// A rendezvous message whose request-to-send arrived before its receive was posted is
/// chosen at the next progress pass, with the sends posted after the receive under way:
/// bibw posts a window's receives, then its sends, and where the peer's requests-to-send
/// came first (it began its window while we were still taking its last acknowledgement),
/// each was chosen as its receive was posted, as one-way traffic (the pipeline: a
/// clear-to-send), and the window went through the pipeline while the peer read ours. Here
/// the streams' two-way chooser reads the message alone (a FIN, no clear-to-send).
#[test]
fn a_receive_posted_after_its_request_to_send_is_chosen_with_the_sends_that_follow() {
    // Far apart: near, a stream both ways is pipelined from its first message.
    let settings = Settings {
        single_copy: SingleCopy::Auto,
        coop_min: 16 << 10,
        placement: Placement::Far,
        ..test_settings()
    };
    let net = Net::build(2, 256, 4096, &settings);
    // Rank 1 is a fake peer in this process: its single copy reads our memory.
    net.e[0].set_peer_pid(1, std::process::id() as i32);
    let n = 1 << 20;
    let theirs = data(n, 7);
    // Rank 1's request-to-send (world context 0, tag 9), offering a single copy of
    // `theirs`; it waits unexpected at rank 0.
    let (w, side) = net.wire(1, 0);
    let rts = Hdr {
        kind: K_RTS,
        flags: F_CMA,
        ctx: 0,
        src: 1,
        tag: 9,
        a: n as u64,
        b: 4242,
        c: theirs.as_ptr() as u64,
        ..Hdr::default()
    };
    w.inject(side, fake::encode(&rts, &[]));
    net.e[0].progress();
    // Rank 0 posts its receive, then a send of its own to rank 1, then progresses.
    let mut buf = vec![0u8; n];
    let r = net.irecv(0, 1, 9, &mut buf);
    let ours = data(n, 8);
    let s = net.isend(0, 1, 9, &ours, SendMode::Standard);
    for _ in 0..4 {
        net.e[0].progress();
    }
    let answers: Vec<u8> = net
        .log(0, 1)
        .iter()
        .map(|&(k, _)| k)
        .filter(|&k| k != K_RTS)
        .collect();
    assert_eq!(
        answers,
        [K_FIN],
        "rank 0 read the message alone (FIN), not pipelined (CTS = {K_CTS})"
    );
    let st = net.e[0].test(r).expect("the message was read at once");
    assert_eq!(st.count_bytes, n);
    assert!(buf == theirs, "the data");
    net.done(1, net.irecv(1, 0, 9, &mut vec![0u8; n]));
    net.done(0, s);
}

/// The count of rendezvous sends under way to each peer (what the two-way chooser asks
/// about every large message) follows the request table through every way a send starts
/// and ends: eager, synchronous and buffered sends, a freed request, a send to ourselves,
/// completion by the receiver, and failure with a dead peer.
#[test]
fn rendezvous_sends_under_way_are_counted_per_peer() {
    let net = Net::new(3, 64);
    let count = |p: usize, want: usize, when: &str| {
        let (n, walked) = net.e[0].rndv_sends_to(p);
        assert_eq!(n, walked, "peer {p} {when}: count and request table agree");
        assert_eq!(n, want, "peer {p} {when}");
        let (all, sum) = net.e[0].rndv_sends_all();
        assert_eq!(
            all, sum,
            "all peers {when}: the total and the peers' counts agree"
        );
    };
    let total = |want: usize, when: &str| {
        assert_eq!(net.e[0].rndv_sends_all().0, want, "all peers {when}");
    };
    let (a, b) = (data(5000, 1), data(3000, 2));
    let (small, big) = (data(EAGER, 3), data(EAGER + 1, 4));
    let ra = net.isend(0, 1, 1, &a, SendMode::Standard);
    let rb = net.isend(0, 1, 2, &b, SendMode::Standard);
    let rs = net.isend(0, 1, 3, &small, SendMode::Sync);
    let re = net.isend(0, 1, 4, &small, SendMode::Standard);
    net.isend(0, 1, 5, &big, SendMode::Buffered);
    let freed = net.isend(0, 2, 6, &a, SendMode::Standard);
    net.e[0].request_free(freed);
    let to_self = net.isend(0, 0, 7, &b, SendMode::Standard);
    for _ in 0..20 {
        net.step();
    }
    count(1, 3, "with two standard and a buffered rendezvous");
    count(2, 1, "with a freed request");
    count(0, 1, "with a send to ourselves");
    total(5, "with five rendezvous sends");
    assert!(net.e[0].test(re).is_some(), "an eager send is done at once");
    let mut bufs: Vec<Vec<u8>> = [5000, 3000, EAGER, EAGER, EAGER + 1]
        .iter()
        .map(|&n| vec![0; n])
        .collect();
    let mut it = bufs.iter_mut();
    // Receives the message with `tag` and waits for it and for its send (if not done).
    let mut take = |tag, send: Option<ReqId>| {
        let buf = it.next().expect("a buffer per message");
        let r = net.irecv(1, 0, tag, buf);
        net.done(1, r);
        if let Some(s) = send {
            net.done(0, s);
        }
    };
    take(1, Some(ra));
    count(1, 2, "after the first rendezvous ended");
    take(2, Some(rb));
    take(3, Some(rs));
    count(1, 1, "with the buffered send left");
    take(4, None);
    take(5, None);
    for _ in 0..20 {
        net.step();
    }
    count(1, 0, "after every send ended");
    let mut mine = vec![0u8; 3000];
    let r = net.irecv(0, 0, 7, &mut mine);
    net.done(0, r);
    net.done(0, to_self);
    count(0, 0, "after the send to ourselves");
    count(2, 1, "while its receiver has not received");
    net.wire(0, 2).0.cut();
    let late = net.isend(0, 2, 8, &b, SendMode::Standard);
    assert_eq!(net.done(0, late).error, Some(ErrorClass::ProcFailed));
    count(2, 0, "after the peer died");
    total(0, "after every rendezvous send ended");
    assert_eq!(bufs[0], a);
    assert_eq!(bufs[1], b);
    assert_eq!(bufs[4], big);
}

/// Records a peer could not have sent correctly: unknown kinds and DATA for no request are
/// ignored (the stream goes on); a record shorter than a header is reported and the peer
/// treated as failed, without a panic.
#[test]
fn corrupt_and_short_records_are_reported() {
    let net = Net::new(2, 64);
    let (w, side) = net.wire(1, 0);
    let junk = Hdr {
        kind: 99,
        ..Hdr::default()
    };
    w.inject(side, fake::encode(&junk, &[1, 2, 3]));
    let stray = Hdr {
        kind: K_DATA,
        a: 1 << 40,
        c: 12345,
        ..Hdr::default()
    };
    w.inject(side, fake::encode(&stray, &[0; 64]));
    let (st, _) = {
        let msg = data(20, 1);
        let s = net.isend(1, 0, 8, &msg, SendMode::Standard);
        let mut b = vec![0u8; 20];
        let r = net.irecv(0, 1, 8, &mut b);
        let st = net.done(0, r);
        net.done(1, s);
        assert_eq!(b, msg);
        (st, b)
    };
    assert_eq!((st.count_bytes, st.error), (20, None));
    // A real record cut short on the wire.
    let mut b = vec![0u8; 20];
    let r = net.irecv(0, 1, 9, &mut b);
    let msg = data(100, 2);
    w.hold(side, true);
    let s = net.isend(1, 0, 9, &msg, SendMode::Standard);
    net.done(1, s);
    w.truncate_last(side, HDR - 1);
    w.hold(side, false);
    let st = net.wait(0, r).expect("reported instead of hanging");
    assert_eq!(st.error, Some(ErrorClass::ProcFailed));
    assert_eq!(b, [0u8; 20], "nothing delivered from the broken record");
}

/// The blocking receive's direct path takes an eager record waiting in the link, and
/// leaves a rendezvous one to the general path.
#[test]
fn blocking_receive_direct_and_general() {
    let net = Net::new(2, 64);
    let msg = data(100, 5);
    let s = net.isend(0, 1, 1, &msg, SendMode::Standard);
    let mut b = vec![0u8; 100];
    // SAFETY: b is valid for 100 bytes for the duration of the call.
    let st = unsafe { net.e[1].recv(b.as_mut_ptr(), 100, 0, 1, WORLD) }.expect("recv");
    assert_eq!((st.source, st.tag, st.count_bytes), (0, 1, 100));
    assert_eq!(b, msg);
    net.done(0, s);
}

/// A blocking call keeps the engine lock across many polls below `MPI_THREAD_MULTIPLE`,
/// but gives it up as soon as another thread of the process waits for it (the one-sided
/// progress thread, which serves the requests the blocked call's peers wait for): here a
/// second thread's calls each get the lock after a poll or two of the blocked receive
/// (the direct path of `recv`, and the general one of `wait`), not after the 1024 polls of
/// a hold, which on a loaded machine, where each idle poll yields the CPU, took seconds.
#[test]
fn a_blocked_call_gives_the_lock_to_a_waiting_thread() {
    const CALLS: u64 = 200;
    for general in [false, true] {
        let net = Net::new(2, 64);
        let (w, side) = net.wire(1, 0);
        let (e0, e1) = (&net.e[0], &net.e[1]);
        let looks = std::thread::scope(|s| {
            let blocked = s.spawn(move || {
                let mut b = [0u8; 8];
                if general {
                    // SAFETY: b outlives the request, which completes before the wait returns.
                    let r = unsafe { e1.irecv(b.as_mut_ptr(), b.len(), 0, 3, WORLD) };
                    e1.wait(r.expect("irecv"));
                } else {
                    // SAFETY: b is valid for its length during the call.
                    unsafe { e1.recv(b.as_mut_ptr(), b.len(), 0, 3, WORLD) }.expect("recv");
                }
                b
            });
            // Until the receive blocks (its polls look at the link).
            while w.looks(side) < 10_000 {
                std::thread::yield_now();
            }
            let mut looks = 0;
            for _ in 0..CALLS {
                // The receive has the lock again (it polled since our last call).
                let l = w.looks(side);
                while w.looks(side) < l + 2 {
                    std::thread::yield_now();
                }
                let before = w.looks(side);
                e1.progress();
                looks += w.looks(side) - before;
            }
            let msg = [7u8; 8];
            let r = net.isend(0, 1, 3, &msg, SendMode::Standard);
            e0.wait(r);
            assert_eq!(blocked.join().expect("receiver"), msg);
            looks
        });
        // Ours (one per call) and the few of the blocked receive before it lets go of the
        // lock (without letting go: up to 1024 each).
        assert!(
            looks < CALLS * 16,
            "{} path: {looks} polls during {CALLS} calls of another thread",
            if general { "general" } else { "direct" }
        );
    }
}

#[test]
fn stats_count_messages_bytes_and_protocols() {
    let net = Net::new(2, 64);
    transfer(&net, 8, 8, 1);
    transfer(&net, EAGER + 1, EAGER + 1, 2);
    let (s0, s1) = (net.e[0].stats(), net.e[1].stats());
    assert_eq!(s0.eager_limit, EAGER as u64);
    assert_eq!(s0.peers[0].0, "self");
    let to1 = s0.peers[1].1;
    assert_eq!((to1.msgs_sent, to1.eager_sent, to1.rndv_sent), (2, 1, 1));
    assert_eq!(to1.bytes_sent, (8 + EAGER + 1) as u64);
    let from0 = s1.peers[0].1;
    assert_eq!(
        (from0.msgs_recv, from0.bytes_recv),
        (2, (8 + EAGER + 1) as u64)
    );
    assert_eq!(from0.pipelined_recv, 1);
    assert_eq!(s1.by_transport(Some(s1.peers[0].0)), from0);
    assert_eq!(s1.matching.unexpected, 0);
}

/// A new eager limit applied while running (a control variable written after `MPI_Init`)
/// changes the protocol of the next send; the communicator counts what arrives on it.
#[test]
fn a_runtime_eager_limit_and_per_communicator_arrivals() {
    let net = Net::new(2, 64);
    // Unread, a communicator counts nothing.
    transfer(&net, 100, 100, 9);
    assert_eq!(net.e[0].comm_stats(WORLD).unwrap(), Default::default());
    assert_eq!(net.e[1].comm_stats(WORLD).unwrap(), Default::default());
    net.e[0].comm_watch(WORLD, true);
    net.e[1].comm_watch(WORLD, true);
    transfer(&net, 100, 100, 1);
    assert!(net.log(0, 1).iter().all(|&(k, _)| k == K_EAGER));
    let lower = Settings {
        ring: 64 << 10,
        ring_hot: 16 << 10,
        bulk: 0,
        eager_limit: 64,
        frag: FRAG,
        frag_min: 0,
        single_copy: SingleCopy::None,
        coop_min: usize::MAX,
        coop_chunk: 4096,
        placement: Placement::Near,
        far_eager: 4096,
        far_stream_min: 0,
    };
    net.e[0].apply_runtime(&lower);
    assert_eq!(net.e[0].stats().eager_limit, 64);
    transfer(&net, 100, 100, 2);
    assert!(net.log(0, 1).iter().any(|&(k, _)| k == K_RTS));
    let to1 = net.e[0].stats().peers[1].1;
    assert_eq!((to1.eager_sent, to1.rndv_sent), (2, 1));
    let (c0, c1) = (
        net.e[0].comm_stats(WORLD).unwrap(),
        net.e[1].comm_stats(WORLD).unwrap(),
    );
    assert_eq!((c0.msgs_sent, c0.bytes_sent, c0.msgs_recv), (2, 200, 0));
    assert_eq!((c1.msgs_recv, c1.bytes_recv, c1.msgs_sent), (2, 200, 0));
}

/// ULFM revoke: the revoking rank's pending receive and the other ranks' (waiting for a
/// message nobody will send) fail with Revoked; later operations on the communicator are
/// refused with Revoked at every member, while other communicators keep working.
#[test]
fn revoke_fails_pending_and_later_operations_everywhere() {
    let net = Net::new(3, 64);
    let mut b0 = vec![0u8; 8];
    let mut b2 = vec![0u8; 8];
    let r0 = net.irecv(0, 1, 5, &mut b0);
    let r2 = net.irecv(2, ANY_SOURCE, 5, &mut b2);
    for _ in 0..10 {
        net.step();
    }
    assert_eq!(net.e[0].test(r0), None);
    net.e[1].comm_revoke(WORLD).expect("revoke");
    assert!(net.e[1].comm_revoked(WORLD).unwrap());
    assert_eq!(net.done(0, r0).error, Some(ErrorClass::Revoked));
    assert_eq!(net.done(2, r2).error, Some(ErrorClass::Revoked));
    for e in &net.e {
        assert!(e.comm_revoked(WORLD).unwrap());
        let x = [1u8];
        // SAFETY: `x` outlives the call (it fails before touching it).
        let err = unsafe { e.isend(x.as_ptr(), 1, 0, 1, WORLD, SendMode::Standard) }
            .expect_err("send on a revoked communicator");
        assert_eq!(err.class(), ErrorClass::Revoked);
    }
    // MPI_COMM_SELF is not revoked.
    let x = [7u8];
    let mut y = [0u8];
    let selfc = net.e[0].comm_self();
    // SAFETY: both buffers outlive the blocking calls.
    unsafe {
        let r = net.e[0].irecv(y.as_mut_ptr(), 1, 0, 1, selfc).unwrap();
        net.e[0]
            .send(x.as_ptr(), 1, 0, 1, selfc, SendMode::Standard)
            .unwrap();
        assert_eq!(net.e[0].wait(r).error, None);
    }
    assert_eq!(y, [7]);
}

/// ULFM revoke by a rank that dies part-way through its notices: its notice reaches rank 1
/// but never rank 2 (held back for good, then the revoker's links are cut); rank 1 passes
/// it on when it first gets it, so rank 2's pending receive fails with Revoked instead of
/// hanging. Each rank passes it on once.
#[test]
fn revoke_is_forwarded_when_the_revoker_dies_part_way() {
    let net = Net::new(3, 64);
    let mut b = vec![0u8; 8];
    let r2 = net.irecv(2, 1, 5, &mut b);
    let (w02, side) = net.wire(0, 2);
    w02.hold(side, true);
    net.e[0].comm_revoke(WORLD).expect("revoke");
    net.e[1].progress();
    assert!(net.e[1].comm_revoked(WORLD).unwrap());
    net.wire(0, 1).0.cut();
    assert_eq!(net.done(2, r2).error, Some(ErrorClass::Revoked));
    assert!(net.e[2].comm_revoked(WORLD).unwrap());
    let revokes = |from, to| {
        net.log(from, to)
            .iter()
            .filter(|&&(k, _)| k == K_REVOKE)
            .count()
    };
    assert_eq!(
        [revokes(0, 2), revokes(1, 2), revokes(2, 1), revokes(1, 0)],
        [1, 1, 0, 0],
        "rank 1 forwards to rank 2 only (not back to the revoker); rank 2 knew already when it heard"
    );
    assert_eq!(revokes(2, 0), 1, "rank 2 forwards to the (dead) revoker");
}

/// Finalize under fault tolerance: the goodbyes replace the process manager's fence. A
/// rank that finalizes waits until every other rank said goodbye; once rank 2 dies (its
/// wires cut) without saying it, ranks 0 and 1 are through as soon as they notice, with
/// one goodbye each to each other rank.
#[test]
fn finalize_under_fault_tolerance_waits_for_the_live_ranks_only() {
    let mut net = Net::new(3, 64);
    net.e = std::mem::take(&mut net.e)
        .into_iter()
        .map(Engine::with_ft)
        .collect();
    net.e[0].finalize_say_bye();
    for _ in 0..20 {
        net.step();
    }
    assert!(
        !net.e[0].finalize_byes_in(),
        "ranks 1 and 2 are not there yet"
    );
    net.e[1].finalize_say_bye();
    for _ in 0..20 {
        net.step();
    }
    assert!(
        !net.e[0].finalize_byes_in(),
        "rank 2 is alive and not there"
    );
    assert!(!net.e[1].finalize_byes_in());
    net.wire(0, 2).0.cut();
    net.wire(1, 2).0.cut();
    for _ in 0..20 {
        net.e[0].progress();
        net.e[1].progress();
    }
    assert!(net.e[0].finalize_byes_in(), "rank 2 failed");
    assert!(net.e[1].finalize_byes_in());
    let byes = |from, to| {
        net.log(from, to)
            .iter()
            .filter(|&&(k, _)| k == K_BYE)
            .count()
    };
    assert_eq!(
        [byes(0, 1), byes(0, 2), byes(1, 0), byes(1, 2)],
        [1, 1, 1, 1]
    );
    assert_eq!(byes(2, 0) + byes(2, 1), 0);
}

/// ULFM revoke and pending sends: a rendezvous send waiting for its clear-to-send and a
/// synchronous send waiting for its match fail with Revoked (the receivers refuse them
/// with a NACK), whether their request-to-send reached the receiver before the revoke
/// notice or after it; a large send to ourselves fails the same way.
#[test]
fn revoke_fails_pending_rendezvous_and_synchronous_sends() {
    let net = Net::new(3, 64);
    let big = data(5000, 3);
    let small = data(20, 4);
    // Unexpected at the receivers when the revoke comes.
    let rdv = net.isend(0, 1, 2, &big, SendMode::Standard);
    let sync = net.isend(0, 2, 3, &small, SendMode::Sync);
    let to_self = net.isend(0, 0, 4, &big, SendMode::Standard);
    // Held back until the receiver knows of the revoke.
    let (w, side) = net.wire(2, 1);
    w.hold(side, true);
    let late = net.isend(2, 1, 5, &big, SendMode::Standard);
    for _ in 0..20 {
        net.step();
    }
    for (at, r) in [(0, rdv), (0, sync), (0, to_self), (2, late)] {
        assert_eq!(
            net.e[at].test(r),
            None,
            "rank {at}: {r:?} waits for a receive"
        );
    }
    net.e[0].comm_revoke(WORLD).expect("revoke");
    for (at, r) in [(0, rdv), (0, sync), (0, to_self)] {
        assert_eq!(net.done(at, r).error, Some(ErrorClass::Revoked), "{r:?}");
    }
    assert!(net.log(1, 0).contains(&(K_NACK, 0)), "{:?}", net.log(1, 0));
    assert!(net.log(2, 0).contains(&(K_NACK, 0)), "{:?}", net.log(2, 0));
    assert_eq!(
        net.e[2].test(late),
        None,
        "its request-to-send is held back"
    );
    w.hold(side, false);
    assert_eq!(net.done(2, late).error, Some(ErrorClass::Revoked));
    // Nothing is left waiting unexpected anywhere.
    for e in &net.e {
        assert_eq!(e.stats().matching.unexpected, 0);
    }
}

/// ULFM: under fault tolerance, a receive from any source pending when a member of its
/// communicator fails reports ProcFailedPending and stays posted, again and again, until
/// the failure is acknowledged; then it goes on and takes a live member's message. A
/// blocking receive from any source fails with ProcFailed instead, and a communicator
/// without the failed member is not affected.
#[test]
fn a_wildcard_receive_is_failure_pending_until_acknowledged() {
    let mut net = Net::new(3, 64);
    net.e = std::mem::take(&mut net.e)
        .into_iter()
        .map(Engine::with_ft)
        .collect();
    let pair = net.e[0].comm_create(10, vec![0, 1]).expect("comm 0-1");
    let mut b = vec![0u8; 16];
    let mut c = vec![0u8; 16];
    let r = net.irecv(0, ANY_SOURCE, 1, &mut b);
    let rc = irecv_on(&net.e[0], ANY_SOURCE, 1, &mut c, pair);
    for _ in 0..10 {
        net.step();
    }
    assert_eq!(net.e[0].test(r), None);
    net.wire(0, 2).0.cut();
    let s = net.wait(0, r).expect("the failure is reported");
    assert_eq!(s.error, Some(ErrorClass::ProcFailedPending));
    assert_eq!(
        net.e[0].test(r).map(|s| s.error),
        Some(Some(ErrorClass::ProcFailedPending)),
        "until acknowledged"
    );
    assert_eq!(
        net.e[0].test(rc),
        None,
        "rank 2 is not in that communicator"
    );
    let mut x = [0u8; 4];
    // SAFETY: `x` outlives the blocking call.
    let st = unsafe { net.e[0].recv(x.as_mut_ptr(), 4, ANY_SOURCE, 9, WORLD) }.expect("recv");
    assert_eq!(st.error, Some(ErrorClass::ProcFailed), "blocking receive");
    net.e[0].comm_failure_ack(WORLD).expect("ack");
    assert_eq!(net.e[0].test(r), None, "goes on after the acknowledgement");
    let m = data(16, 5);
    let s1 = net.isend(1, 0, 1, &m, SendMode::Standard);
    let rs = net.done(0, r);
    assert_eq!((rs.error, rs.source), (None, 1));
    assert_eq!(b, m);
    assert_eq!(net.done(1, s1).error, None);
    net.e[0].cancel(rc);
    assert!(net.done(0, rc).cancelled);
}

/// Starts a send of `buf` on `comm` from engine `e` (the caller keeps `buf` alive).
fn isend_on(e: &Engine, to: i32, tag: i32, buf: &[u8], comm: CommId) -> ReqId {
    // SAFETY: the test keeps `buf` alive and unchanged until the request completes.
    unsafe { e.isend(buf.as_ptr(), buf.len(), to, tag, comm, SendMode::Standard) }.expect("isend")
}

/// Starts a receive into `buf` on `comm` at engine `e` (the caller keeps `buf` alive).
fn irecv_on(e: &Engine, src: i32, tag: i32, buf: &mut [u8], comm: CommId) -> ReqId {
    // SAFETY: the test keeps `buf` alive and untouched until the request completes.
    unsafe { e.irecv(buf.as_mut_ptr(), buf.len(), src, tag, comm) }.expect("irecv")
}

/// Progress of every engine in `es` until `r` of `es[at]` completes (panics on a hang).
fn done_among(es: &[&Engine], at: usize, r: ReqId) -> Status {
    for _ in 0..PATIENCE {
        if let Some(s) = es[at].test(r) {
            return s;
        }
        for e in es {
            e.progress();
        }
    }
    panic!("request {r:?} hangs");
}

/// A peer added after start-up (a process of another job, linked late): it takes the next
/// peer index after the world ranks, an intercommunicator holds it like any rank, eager
/// and rendezvous messages cross both ways on the late link while the job's own traffic
/// goes on, and the late peer's death fails operations on it with ProcFailed, not a hang,
/// and leaves the job's own links alone.
#[test]
fn a_peer_added_late_joins_an_intercommunicator() {
    // Job A: two ranks wired at start; job B: one rank.
    let a = Net::new(2, 64);
    let b = Net::new(1, 64);
    let (la, lb, wire) = fake::pair(4096, 4096, 64);
    assert_eq!(
        a.e[1].add_peer_link(Box::new(la)),
        2,
        "after world ranks 0 and 1"
    );
    assert_eq!(b.e[0].add_peer_link(Box::new(lb)), 1, "after world rank 0");
    let (a1, b0) = (&a.e[1], &b.e[0]);
    let ia = a1.comm_create_inter(7, vec![1], Some(vec![2])).unwrap();
    let ib = b0.comm_create_inter(7, vec![0], Some(vec![1])).unwrap();
    let all = [&a.e[0], a1, b0];
    for (n, tag) in [(100, 1), (5000, 2)] {
        let there = data(n, tag as u8);
        let back = data(n, !tag as u8);
        let (mut got_b, mut got_a) = (vec![0u8; n], vec![0u8; n]);
        let s1 = isend_on(a1, 0, tag, &there, ia);
        let r1 = irecv_on(b0, 0, tag, &mut got_b, ib);
        let s2 = isend_on(b0, 0, tag, &back, ib);
        let r2 = irecv_on(a1, 0, tag, &mut got_a, ia);
        // The job's own traffic on the same tag meanwhile.
        let world = data(n, 9);
        let mut got_w = vec![0u8; n];
        let s3 = a.isend(0, 1, tag, &world, SendMode::Standard);
        let r3 = a.irecv(1, 0, tag, &mut got_w);
        for (at, r) in [(2, r1), (1, r2), (1, r3), (1, s1), (2, s2), (0, s3)] {
            let st = done_among(&all, at, r);
            assert_eq!(st.error, None, "{n} bytes, request {r:?}");
        }
        assert_eq!(got_b, there, "{n} bytes to the late peer");
        assert_eq!(got_a, back, "{n} bytes from the late peer");
        assert_eq!(got_w, world, "{n} bytes within job A");
    }
    let kinds = |from| wire.log(from).iter().map(|&(k, _)| k).collect::<Vec<_>>();
    assert_eq!(
        kinds(0)[..2],
        [K_EAGER, K_RTS],
        "over the late link: {:?}",
        kinds(0)
    );
    // A source status names the intercommunicator's remote rank.
    let mut x = [0u8; 4];
    let s = isend_on(b0, 0, 5, &[1, 2, 3, 4], ib);
    let r = irecv_on(a1, ANY_SOURCE, ANY_TAG, &mut x, ia);
    let st = done_among(&all, 1, r);
    assert_eq!((st.source, st.tag, st.error), (0, 5, None));
    done_among(&all, 2, s);
    // The late peer dies: operations on it fail, job A's own link still works.
    wire.cut();
    let mut buf = vec![0u8; 10];
    let r = irecv_on(a1, 0, 6, &mut buf, ia);
    assert_eq!(done_among(&all, 1, r).error, Some(ErrorClass::ProcFailed));
    let (msg, mut got) = (data(10, 3), vec![0u8; 10]);
    let s = a.isend(0, 1, 6, &msg, SendMode::Standard);
    let r = a.irecv(1, 0, 6, &mut got);
    assert_eq!(done_among(&all, 1, r).error, None);
    assert_eq!(done_among(&all, 0, s).error, None);
    assert_eq!(got, msg);
}

/// The tools interface's events (`oxmpi_base::events`): a message queued before its
/// receive was posted, and a peer found dead, each reach the sink once wanted.
#[test]
fn events_tell_of_unexpected_arrivals_and_dead_peers() {
    use oxmpi_base::events::{self, Event, Kind};
    use std::sync::Mutex;
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    fn sink(e: &Event<'_>) {
        let line = match *e {
            // Other tests run alongside: only this test's tag counts.
            Event::Unexpected {
                source: 0,
                tag: 4242,
                bytes,
                ..
            } => format!("unexpected {bytes}"),
            Event::ProcFailed { rank } => format!("failed {rank}"),
            _ => return,
        };
        SEEN.lock().unwrap().push(line);
    }
    events::set_sink(sink);
    events::set_wanted(Kind::Unexpected, true);
    events::set_wanted(Kind::ProcFailed, true);
    let net = Net::new(2, 64);
    let s = net.isend(0, 1, 4242, &data(40, 3), SendMode::Standard);
    net.done(0, s);
    for _ in 0..100 {
        net.step();
    }
    let mut b = vec![0u8; 40];
    let r = net.irecv(1, 0, 4242, &mut b);
    assert_eq!(net.done(1, r).count_bytes, 40);
    net.wire(0, 1).0.cut();
    let r = net.irecv(0, 1, 1, &mut b);
    assert_eq!(
        net.wait(0, r).expect("fails").error,
        Some(ErrorClass::ProcFailed)
    );
    let seen = SEEN.lock().unwrap().clone();
    assert_eq!(
        seen.iter().filter(|l| *l == "unexpected 40").count(),
        1,
        "{seen:?}"
    );
    assert!(seen.iter().any(|l| l == "failed 1"), "{seen:?}");
}

/// Fragment sizes of lone rendezvous messages: quarters rounded up to 4 KiB, never below
/// the minimum; a zero minimum turns the cut off.
#[test]
fn lone_fragments_are_quarters_above_the_minimum() {
    use crate::pml::lone_fragment;
    const K: usize = 1024;
    assert_eq!(lone_fragment(128 * K, 16 * K), 32 * K);
    assert_eq!(lone_fragment(64 * K, 16 * K), 16 * K);
    assert_eq!(lone_fragment(40 * K, 16 * K), 16 * K);
    assert_eq!(lone_fragment(100 * K + 1, 16 * K), 28 * K);
    assert_eq!(lone_fragment(8 * K, 16 * K), 16 * K);
    assert_eq!(lone_fragment(128 * K, 0), usize::MAX);
}

/// A rendezvous message alone in its sender's queue goes in quarters (the receiver copies
/// one while the sender writes the next); one with another behind it in whole fragments;
/// both arrive intact and in order, whatever the fragments' sizes.
#[test]
fn a_lone_rendezvous_message_is_cut_into_quarters() {
    const K: usize = 1024;
    let settings = Settings {
        frag: 1 << 20,
        frag_min: 16 * K,
        ..test_settings()
    };
    let net = Net::build(2, 64, 1 << 20, &settings);
    // Ping-pong style: receive posted, one send.
    let before = net.log(0, 1).len();
    let (st, _) = transfer(&net, 128 * K, 128 * K, 1);
    assert_eq!((st.count_bytes, st.error), (128 * K, None));
    let frags: Vec<usize> = net.log(0, 1)[before..]
        .iter()
        .filter(|r| r.0 == K_DATA)
        .map(|r| r.1)
        .collect();
    assert_eq!(frags, [32 * K; 4]);
    // Two messages whose clear-to-sends arrive together: the first, with the second
    // queued behind it, goes whole; the second, alone by then, in quarters.
    let (m1, m2) = (data(128 * K, 7), data(64 * K + 5, 8));
    let (mut b1, mut b2) = (vec![0u8; 128 * K], vec![0u8; 64 * K + 5]);
    let r1 = net.irecv(1, 0, 2, &mut b1);
    let r2 = net.irecv(1, 0, 2, &mut b2);
    let before = net.log(0, 1).len();
    let s1 = net.isend(0, 1, 2, &m1, SendMode::Standard);
    let s2 = net.isend(0, 1, 2, &m2, SendMode::Standard);
    net.e[1].progress();
    assert_eq!(net.done(1, r1).count_bytes, 128 * K);
    assert_eq!(net.done(1, r2).count_bytes, 64 * K + 5);
    net.done(0, s1);
    net.done(0, s2);
    assert_eq!((b1, b2), (m1, m2));
    let frags: Vec<usize> = net.log(0, 1)[before..]
        .iter()
        .filter(|r| r.0 == K_DATA)
        .map(|r| r.1)
        .collect();
    assert_eq!(frags, [128 * K, 20 * K, 20 * K, 20 * K, 4 * K + 5]);
}

/// `Engine::wait_each` (what `MPI_Waitall` uses for fast requests): every request's status
/// goes to its own index, whether the call had to wait for it (the first: nothing was
/// progressed yet) or found it complete after that wait's progress; messages arrive in the
/// reverse order of the list; an unknown request id gets the "invalid request" status, as
/// `wait` gives it.
#[test]
fn wait_each_gives_each_request_its_own_status() {
    let net = Net::new(2, 256);
    let n = 40usize;
    let mut bufs: Vec<Vec<u8>> = (0..n).map(|_| vec![0u8; 8]).collect();
    let mut reqs: Vec<ReqId> = bufs
        .iter_mut()
        .enumerate()
        .map(|(i, b)| net.irecv(1, 0, 100 + i as i32, b))
        .collect();
    // A request completed and freed already: its id is stale.
    let mut one = [0u8; 1];
    let stale = net.irecv(1, 0, 7, &mut one);
    let s = net.isend(0, 1, 7, &[9], SendMode::Standard);
    net.done(1, stale);
    net.done(0, s);
    reqs.insert(5, stale);
    let msgs: Vec<Vec<u8>> = (0..n).map(|i| data(8, i as u8)).collect();
    for i in (0..n).rev() {
        let s = net.isend(0, 1, 100 + i as i32, &msgs[i], SendMode::Standard);
        net.done(0, s);
    }
    let mut got: Vec<Option<Status>> = vec![None; reqs.len()];
    net.e[1].wait_each(&reqs, |k, s| {
        assert!(got[k].replace(s).is_none(), "index {k} completed twice");
    });
    for (k, s) in got.into_iter().enumerate() {
        let s = s.unwrap_or_else(|| panic!("index {k} not completed"));
        if k == 5 {
            assert_eq!(s.error, Some(ErrorClass::Request), "stale id");
            continue;
        }
        let i = if k < 5 { k } else { k - 1 };
        assert_eq!(
            (s.tag, s.source, s.count_bytes, s.error),
            (100 + i as i32, 0, 8, None)
        );
        assert_eq!(bufs[i], msgs[i], "payload of message {i}");
    }
}

/// A nonblocking receive started while eager messages wait in the link takes them directly
/// (complete at start, no request), in the order they were sent; once a receive had to be
/// posted (a rendezvous message at the front, or nothing there), later receives from that
/// source are posted behind it and match in order too.
#[test]
fn started_receives_take_waiting_eager_records_in_order() {
    let net = Net::new(2, 64);
    let (a, b, big) = (data(16, 1), data(16, 2), data(600, 3));
    let sends: Vec<ReqId> = [&a, &b, &big, &a]
        .into_iter()
        .map(|m| net.isend(0, 1, 5, m, SendMode::Standard))
        .collect();
    let mut bufs = [[0u8; 600]; 4];
    let [b0, b1, b2, b3] = &mut bufs;
    let start = |buf: &mut [u8; 600]| {
        // SAFETY: the buffers outlive every request of this test.
        unsafe { net.e[1].irecv_started(buf.as_mut_ptr(), 600, 0, ANY_TAG, WORLD) }
            .expect("irecv_started")
    };
    // No progress on rank 1 yet: the records wait in the link.
    let first = [start(b0), start(b1)];
    for (i, s) in first.iter().enumerate() {
        let crate::Started::Complete(s) = s else {
            panic!("receive {i}: an eager record waited at the front, yet it was posted");
        };
        assert_eq!((s.source, s.tag, s.count_bytes), (0, 5, 16));
    }
    // The front is now a rendezvous record: posted. The last eager message stays behind it.
    let crate::Started::Pending(r2) = start(b2) else {
        panic!("a rendezvous record was taken directly");
    };
    let crate::Started::Pending(r3) = start(b3) else {
        panic!("a receive overtook the posted one");
    };
    assert_eq!(net.done(1, r2).count_bytes, 600);
    assert_eq!(net.done(1, r3).count_bytes, 16);
    for s in sends {
        assert_eq!(net.done(0, s).error, None);
    }
    assert_eq!((&bufs[0][..16], &bufs[1][..16]), (&a[..], &b[..]));
    assert_eq!((&bufs[2][..], &bufs[3][..16]), (&big[..], &a[..]));
}

/// The one-pass path of a nonblocking receive (`State::irecv_fast`) leaves everything it
/// does not cover to the general path: bad arguments still fail with their class, and a
/// receive started while an unexpected message waits (here from the other source) still
/// takes the earliest matching message, and one from the other source still finds it.
#[test]
fn started_receives_off_the_fast_path_keep_their_rules() {
    let net = Net::new(3, 64);
    let mut buf = [0u8; 64];
    let start = |src: i32, tag: i32, buf: &mut [u8; 64]| {
        // SAFETY: the buffers outlive every request of this test.
        unsafe { net.e[0].irecv_started(buf.as_mut_ptr(), 64, src, tag, WORLD) }
    };
    let class = |r: Result<crate::Started, crate::Error>| match r {
        Err(e) => e.class(),
        Ok(_) => panic!("a bad argument was accepted"),
    };
    assert_eq!(class(start(1, -5, &mut buf)), ErrorClass::Tag);
    assert_eq!(class(start(7, 0, &mut buf)), ErrorClass::Rank);
    // SAFETY: a null buffer with a length: refused before anything is written.
    let null = unsafe { net.e[0].irecv_started(std::ptr::null_mut(), 4, 1, 0, WORLD) };
    assert_eq!(class(null), ErrorClass::Buffer);
    // Rank 2's message arrives unexpected (no receive posted for it).
    let (m2, m1a, m1b) = (data(8, 2), data(8, 11), data(8, 12));
    let s2 = net.isend(2, 0, 3, &m2, SendMode::Standard);
    net.done(2, s2);
    for _ in 0..4 {
        net.e[0].progress();
    }
    // From rank 1 (nothing of it unexpected): the receives post in order.
    let (mut b1a, mut b1b, mut b2) = ([0u8; 64], [0u8; 64], [0u8; 64]);
    let r1a = start(1, ANY_TAG, &mut b1a).expect("receive from 1");
    let r1b = start(1, ANY_TAG, &mut b1b).expect("receive from 1");
    let r2 = start(2, 3, &mut b2).expect("receive from 2");
    let crate::Started::Complete(st2) = r2 else {
        panic!("the unexpected message from rank 2 was not taken at start");
    };
    assert_eq!((st2.source, st2.tag, st2.count_bytes), (2, 3, 8));
    assert_eq!(&b2[..8], &m2[..]);
    for (m, tag) in [(&m1a, 1), (&m1b, 2)] {
        let s = net.isend(1, 0, tag, m, SendMode::Standard);
        net.done(1, s);
    }
    let got: Vec<Status> = [r1a, r1b]
        .into_iter()
        .map(|r| match r {
            crate::Started::Pending(r) => net.done(0, r),
            crate::Started::Complete(s) => s,
        })
        .collect();
    assert_eq!(
        (got[0].tag, got[1].tag),
        (1, 2),
        "rank 1's messages out of order"
    );
    assert_eq!((&b1a[..8], &b1b[..8]), (&m1a[..], &m1b[..]));
}

mod matching_order {
    //! Property test: nonblocking receives started at random moments (some find their
    //! message waiting in the link and take it directly) against sends of eager,
    //! synchronous and rendezvous messages from two peers and random progress keep MPI's
    //! matching rules.

    use super::*;
    use proptest::prelude::*;

    /// Size of a rendezvous message (above [`EAGER`]) and of every receive buffer.
    const BIG: usize = 600;

    #[derive(Clone, Debug)]
    enum Op {
        /// Rank `from` (1 or 2) sends to rank 0.
        Send {
            from: usize,
            tag: i32,
            big: bool,
            sync: bool,
        },
        /// Rank 0 starts a receive (`None`: wildcard).
        Recv { src: Option<i32>, tag: Option<i32> },
        /// One progress pass of rank `who`.
        Step { who: usize },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (1..3usize, 0..3i32, any::<bool>(), any::<bool>()).prop_map(
                |(from, tag, big, sync)| Op::Send {
                    from,
                    tag,
                    big,
                    sync
                }
            ),
            (
                prop::option::weighted(0.7, 1..3i32),
                prop::option::weighted(0.6, 0..3i32)
            )
                .prop_map(|(src, tag)| Op::Recv { src, tag }),
            (0..3usize).prop_map(|who| Op::Step { who }),
        ]
    }

    /// Message `seq` from `from`: its bytes name both (checked on arrival).
    fn message(from: usize, seq: usize, big: bool) -> Vec<u8> {
        let n = if big { BIG } else { 16 };
        let mut m = data(n, (from * 40 + seq) as u8);
        m[0] = from as u8;
        m[1] = seq as u8;
        m
    }

    /// One receive of rank 0: its pattern, and how it started.
    struct Recv {
        src: i32,
        tag: i32,
        buf: Box<[u8; BIG]>,
        req: Option<ReqId>,
        got: Option<Status>,
    }

    fn matches(r: &Recv, from: usize, tag: i32) -> bool {
        (r.src == ANY_SOURCE || r.src == from as i32) && (r.tag == ANY_TAG || r.tag == tag)
    }

    fn start(net: &Net, src: i32, tag: i32) -> Recv {
        let mut buf = Box::new([0u8; BIG]);
        // SAFETY: the buffer is boxed and lives in `Recv` until the test ends.
        let s = unsafe { net.e[0].irecv_started(buf.as_mut_ptr(), BIG, src, tag, WORLD) }
            .expect("irecv_started");
        let (req, got) = match s {
            crate::Started::Complete(s) => (None, Some(s)),
            crate::Started::Pending(r) => (Some(r), None),
        };
        Recv {
            src,
            tag,
            buf,
            req,
            got,
        }
    }

    /// Tests every pending receive once.
    fn test_all(net: &Net, recvs: &mut [Recv]) {
        for r in recvs.iter_mut().filter(|r| r.got.is_none()) {
            if let Some(s) = net.e[0].test(r.req.expect("pending")) {
                r.got = Some(s);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn started_receives_keep_the_matching_rules(ops in proptest::collection::vec(op(), 1..80)) {
            // Links of 4 records: senders also queue (and send from their queues).
            let net = Net::new(3, 4);
            // Per sender: its messages (tag, bytes) in send order, and the send requests.
            let mut sent: Vec<Vec<(i32, Vec<u8>)>> = vec![Vec::new(); 3];
            let mut sends = Vec::new();
            let mut recvs: Vec<Recv> = Vec::new();
            for op in ops {
                match op {
                    Op::Send { from, tag, big, sync } => {
                        let m = message(from, sent[from].len(), big);
                        let mode = if sync { SendMode::Sync } else { SendMode::Standard };
                        sends.push((from, net.isend(from, 0, tag, &m, mode)));
                        sent[from].push((tag, m));
                    }
                    Op::Recv { src, tag } => {
                        recvs.push(start(&net, src.unwrap_or(ANY_SOURCE), tag.unwrap_or(ANY_TAG)));
                    }
                    Op::Step { who } => {
                        net.e[who].progress();
                        if who == 0 {
                            test_all(&net, &mut recvs);
                        }
                    }
                }
            }
            // Let everything arrive, then take what nobody received with wildcards.
            let total: usize = sent.iter().map(Vec::len).sum();
            loop {
                for _ in 0..50 {
                    net.step();
                    test_all(&net, &mut recvs);
                }
                let received = recvs.iter().filter(|r| r.got.is_some()).count();
                if received == total {
                    break;
                }
                recvs.push(start(&net, ANY_SOURCE, ANY_TAG));
                prop_assert!(recvs.len() <= 3 * total + 200, "messages never arrive");
            }
            for (from, s) in sends {
                prop_assert!(net.wait(from, s).is_some(), "a send of rank {} hangs", from);
            }
            // Which message (sender, sequence number) each receive got, named by its bytes
            // and checked against the status and the whole payload.
            let mut taken = vec![Vec::new(); 3];
            let mut got: Vec<Option<(usize, usize)>> = Vec::new();
            for (i, r) in recvs.iter().enumerate() {
                let Some(s) = r.got else {
                    got.push(None);
                    continue;
                };
                let (from, seq) = (r.buf[0] as usize, r.buf[1] as usize);
                prop_assert!(from > 0 && from < 3 && seq < sent[from].len(), "receive {} got garbage", i);
                let (tag, m) = &sent[from][seq];
                prop_assert_eq!((s.source, s.tag, s.count_bytes, s.error), (from as i32, *tag, m.len(), None));
                prop_assert_eq!(&r.buf[..m.len()], &m[..]);
                prop_assert!(matches(r, from, *tag), "receive {} got a message it does not match", i);
                taken[from].push(seq);
                got.push(Some((from, seq)));
            }
            for t in &mut taken {
                let n = t.len();
                t.sort_unstable();
                t.dedup();
                prop_assert_eq!(t.len(), n, "a message was received twice");
            }
            // Non-overtaking: an earlier receive never gets a later message of a sender while
            // an earlier message of that sender which it matches goes to a later receive, and
            // a receive left pending matches no message a later receive got.
            for i in 0..recvs.len() {
                for j in i + 1..recvs.len() {
                    let Some((fj, sj)) = got[j] else { continue };
                    if !matches(&recvs[i], fj, sent[fj][sj].0) {
                        continue;
                    }
                    match got[i] {
                        None => prop_assert!(false, "receive {} pending while later receive {} took a message it matches", i, j),
                        Some((fi, si)) => prop_assert!(
                            fi != fj || si < sj,
                            "receive {} got message {} of rank {}, later receive {} its earlier message {}",
                            i, si, fi, j, sj
                        ),
                    }
                }
            }
        }
    }
}

/// Two engines joined by a real shared-memory link (its rings of 4096 bytes in one memfd
/// segment): windows of 64 small receives and sends, drained through the sm link's own
/// `poll` and `release` (the drain's static dispatch, not the trait object), arrive intact,
/// in order and matched to the right receives, and the ring's space comes back (1280
/// records of 32-64 bytes pass through a 4096-byte ring).
#[test]
fn windows_over_a_real_sm_link_arrive_in_order() {
    let (a, b) = crate::btl::sm::link::tests::pair(0);
    let net = Net::joined(Box::new(a), Box::new(b));
    for round in 0..20u8 {
        let sent: Vec<Vec<u8>> = (0..64u8)
            .map(|i| data(usize::from(i % 17), round.wrapping_mul(64).wrapping_add(i)))
            .collect();
        let mut got = vec![[0xeeu8; 16]; 64];
        let rr: Vec<ReqId> = got
            .iter_mut()
            .map(|g| net.irecv(1, 0, 2, &mut g[..]))
            .collect();
        let sr: Vec<ReqId> = sent
            .iter()
            .map(|m| net.isend(0, 1, 2, m, SendMode::Standard))
            .collect();
        for r in sr {
            net.done(0, r);
        }
        for (i, r) in rr.into_iter().enumerate() {
            let st = net.done(1, r);
            assert_eq!((st.source, st.tag, st.count_bytes), (0, 2, sent[i].len()));
            assert_eq!(
                &got[i][..sent[i].len()],
                &sent[i][..],
                "round {round} message {i}"
            );
            assert!(got[i][sent[i].len()..].iter().all(|&x| x == 0xee));
        }
    }
}

/// Two engines joined by a real shared-memory link whose bulk buffers have a stream area
/// (16 KiB, hot part 4 KiB): windows of 32 rendezvous messages of 1-3 fragments, whose
/// receives are posted after their requests-to-send arrived (one of them too short), with
/// the receiver progressing once for every 8 passes of the sender (so the sender's
/// fragments run ahead into the stream area, then the receiver catches up): every message
/// arrives intact, in order, the short one truncated, the stream going on after it.
#[test]
fn windows_through_the_bulk_stream_area_arrive_intact_with_late_receives_and_truncation() {
    let (a, b) = crate::btl::sm::link::tests::pair_hot(16 << 10, 4 << 10);
    let net = Net::joined(Box::new(a), Box::new(b));
    for round in 0..8u8 {
        let sent: Vec<Vec<u8>> = (0..32u8)
            .map(|i| data(EAGER + 1 + usize::from(i) * 89, round.wrapping_mul(32) ^ i))
            .collect();
        let sr: Vec<ReqId> = sent
            .iter()
            .map(|m| net.isend(0, 1, 3, m, SendMode::Standard))
            .collect();
        // The requests-to-send arrive before the receives are posted.
        for _ in 0..4 {
            net.step();
        }
        let short = usize::from(round) * 3 + 1;
        let mut got: Vec<Vec<u8>> = sent
            .iter()
            .enumerate()
            .map(|(i, m)| vec![0xee; if i == short { m.len() / 2 } else { m.len() }])
            .collect();
        let rr: Vec<ReqId> = got
            .iter_mut()
            .map(|g| net.irecv(1, 0, 3, &mut g[..]))
            .collect();
        let open = sr.into_iter().map(|r| (0, r)).collect();
        sends_done_with_a_slow_rank_1(&net, open, &format!("round {round}"));
        for (i, r) in rr.into_iter().enumerate() {
            let st = net.done(1, r);
            let k = got[i].len();
            assert_eq!(
                (st.source, st.tag, st.count_bytes),
                (0, 3, k),
                "round {round} message {i}"
            );
            assert_eq!(st.error, (i == short).then_some(ErrorClass::Truncate));
            assert!(got[i][..] == sent[i][..k], "round {round} message {i}");
        }
    }
}

/// Windows both ways at once (bibw) over a real shared-memory link pair with a bulk stream
/// area, under the `auto` single copy: 24 rendezvous messages each way per window, half
/// the receives posted after the peer's requests-to-send arrived, one truncated, rank 1
/// progressing once for every 8 passes of rank 0. Near (believed), the two-way streams
/// are pipelined (every receive through the link; the windows are as many as the near
/// streams' first judgement takes, `SLOW_PERIODS` after a cold one: in-process windows of
/// a few KiB are slow); far, read by the receivers alone. Every message arrives intact
/// either way.
#[test]
fn windows_both_ways_through_the_bulk_stream_area_pipelined_near_read_far() {
    for placement in [Placement::Near, Placement::Far] {
        let (a, b) = crate::btl::sm::link::tests::pair_hot(16 << 10, 4 << 10);
        let settings = Settings {
            single_copy: SingleCopy::Auto,
            coop_min: 16 << 10,
            placement,
            ..test_settings()
        };
        let net = Net::joined_with(Box::new(a), Box::new(b), &settings);
        for (x, y) in [(0, 1), (1, 0)] {
            net.e[x].set_peer_pid(y, std::process::id() as i32);
            net.e[x].set_peer_single_copy(y);
        }
        let rounds = 1 + crate::btl::sm::two_way::SLOW_PERIODS as u8;
        for round in 0..rounds {
            let sent: [Vec<Vec<u8>>; 2] = std::array::from_fn(|r| {
                (0..24u8)
                    .map(|i| data(EAGER + 1 + usize::from(i) * 97, round ^ i ^ (r as u8 * 64)))
                    .collect()
            });
            let short = usize::from(round) * 3 + 1;
            let mut got: [Vec<Vec<u8>>; 2] = std::array::from_fn(|r| {
                sent[1 - r]
                    .iter()
                    .enumerate()
                    .map(|(i, m)| vec![0xee; if i == short { m.len() / 2 } else { m.len() }])
                    .collect()
            });
            let (rr, open) = post_windows_both_ways(&net, &sent, &mut got);
            sends_done_with_a_slow_rank_1(&net, open, &format!("{placement:?} round {round}"));
            for r in 0..2 {
                for (i, &q) in rr[r].iter().enumerate() {
                    let st = net.done(r, q);
                    let k = got[r][i].len();
                    assert_eq!(
                        (st.source, st.tag, st.count_bytes),
                        ((1 - r) as i32, 3, k),
                        "{placement:?} round {round} rank {r} message {i}"
                    );
                    assert_eq!(st.error, (i == short).then_some(ErrorClass::Truncate));
                    assert!(
                        got[r][i][..] == sent[1 - r][i][..k],
                        "{placement:?} round {round} rank {r} message {i}"
                    );
                }
            }
        }
        for r in 0..2 {
            let st = net.e[r].stats().peers[1 - r].1;
            let (piped, read) = (st.pipelined_recv, st.single_copy_recv);
            match placement {
                Placement::Near => assert!(
                    read == 0 && piped == u64::from(rounds) * 24,
                    "rank {r} near: {piped} pipelined, {read} read"
                ),
                _ => assert!(
                    read >= u64::from(rounds - 1) * 24,
                    "rank {r} far: {piped} pipelined, {read} read"
                ),
            }
        }
    }
}

/// Progresses `net` until every send of `open` (rank, request) completed without an
/// error, rank 1 once for every 8 passes of rank 0 (a slow receiver); `what` names the
/// case in the failures.
fn sends_done_with_a_slow_rank_1(net: &Net, mut open: Vec<(usize, ReqId)>, what: &str) {
    let mut passes = 0;
    loop {
        open.retain(|&(r, q)| match net.e[r].test(q) {
            Some(st) => {
                assert_eq!(st.error, None, "{what}: a send");
                false
            }
            None => true,
        });
        if open.is_empty() {
            break;
        }
        for _ in 0..8 {
            net.e[0].progress();
        }
        net.e[1].progress();
        passes += 1;
        assert!(passes < PATIENCE, "{what} hangs");
    }
}

/// Posts one window each way of `sent` (rank `r` sends `sent[r]` to `1 - r`, tag 3):
/// the first 12 of each side's receives into `got`, then every send, 4 steps of both
/// ranks, then the rest of the receives (posted after the peer's requests-to-send came).
/// Returns each rank's receives in order and every send with its rank.
#[allow(clippy::type_complexity)]
fn post_windows_both_ways(
    net: &Net,
    sent: &[Vec<Vec<u8>>; 2],
    got: &mut [Vec<Vec<u8>>; 2],
) -> ([Vec<ReqId>; 2], Vec<(usize, ReqId)>) {
    let [g0, g1] = got;
    let mut rr: [Vec<ReqId>; 2] = [Vec::new(), Vec::new()];
    for (r, g) in [(0usize, &mut *g0), (1, &mut *g1)] {
        for m in g[..12].iter_mut() {
            rr[r].push(net.irecv(r, (1 - r) as i32, 3, &mut m[..]));
        }
    }
    let mut open: Vec<(usize, ReqId)> = Vec::new();
    for (r, ms) in sent.iter().enumerate() {
        for m in ms {
            open.push((r, net.isend(r, 1 - r, 3, m, SendMode::Standard)));
        }
    }
    for _ in 0..4 {
        net.step();
    }
    for (r, g) in [(0usize, &mut *g0), (1, &mut *g1)] {
        for m in g[12..].iter_mut() {
            rr[r].push(net.irecv(r, (1 - r) as i32, 3, &mut m[..]));
        }
    }
    (rr, open)
}

/// One window each way (bibw) of 24 rendezvous messages of 12-15 KiB over `net`, half the
/// receives posted after the peer's requests-to-send came; checks every message and
/// returns each rank's receives of the window pipelined and read alone.
fn window_both_ways(net: &Net, round: u8) -> [(u64, u64); 2] {
    let counts = |r: usize| {
        let st = net.e[r].stats().peers[1 - r].1;
        (st.pipelined_recv, st.single_copy_recv)
    };
    let before = [counts(0), counts(1)];
    let sent: [Vec<Vec<u8>>; 2] = std::array::from_fn(|r| {
        (0..24u8)
            .map(|i| {
                data(
                    (12 << 10) + usize::from(i) * 131,
                    round ^ i ^ (r as u8 * 64),
                )
            })
            .collect()
    });
    let mut got: [Vec<Vec<u8>>; 2] =
        std::array::from_fn(|r| sent[1 - r].iter().map(|m| vec![0xee; m.len()]).collect());
    let (rr, mut open) = post_windows_both_ways(net, &sent, &mut got);
    let mut passes = 0;
    while !open.is_empty() {
        open.retain(|&(r, q)| net.e[r].test(q).is_none());
        net.step();
        passes += 1;
        assert!(passes < PATIENCE, "round {round} hangs");
    }
    for r in 0..2 {
        for (i, &q) in rr[r].iter().enumerate() {
            let st = net.done(r, q);
            assert_eq!(st.error, None, "round {round} rank {r} message {i}");
            assert!(
                got[r][i] == sent[1 - r][i],
                "round {round} rank {r} message {i}"
            );
        }
    }
    std::array::from_fn(|r| {
        let (piped, read) = counts(r);
        (piped - before[r].0, read - before[r].1)
    })
}

/// Placement `auto`: a peer nothing was sensed of (a far pair believed near for want of
/// eager messages to time, as much as a near one) gets the streams' chooser, which begins
/// on the read; once sensed near (a timed eager copy below the far rate) the stream both
/// ways is pipelined from the next window, every window; after a copy sensed far (the
/// belief not flipped yet) back on the read.
#[test]
fn near_streams_are_pipelined_once_the_peer_was_sensed_near() {
    let (a, b) = crate::btl::sm::link::tests::pair_hot(64 << 10, 16 << 10);
    let settings = Settings {
        single_copy: SingleCopy::Auto,
        coop_min: 16 << 10,
        placement: Placement::Auto,
        far_eager: 128,
        frag: 16 << 10,
        ..test_settings()
    };
    let net = Net::joined_with(Box::new(a), Box::new(b), &settings);
    for (x, y) in [(0, 1), (1, 0)] {
        net.e[x].set_peer_pid(y, std::process::id() as i32);
        net.e[x].set_peer_single_copy(y);
    }
    let sense = |ns| {
        for (x, y) in [(0, 1), (1, 0)] {
            net.e[x].sense_peer(y, 8192, ns);
        }
    };
    assert_eq!(window_both_ways(&net, 0), [(0, 24); 2], "nothing sensed");
    use crate::btl::sm::place::FAR_NS_PER_KIB;
    sense(FAR_NS_PER_KIB * 8);
    for round in 1..4 {
        let w = window_both_ways(&net, round);
        assert_eq!(w, [(24, 0); 2], "sensed near, window {round}");
    }
    sense(FAR_NS_PER_KIB * 8 + 1);
    assert_eq!(window_both_ways(&net, 4), [(0, 24); 2], "one far sample");
}

/// The hand-off of `Engine::wait_message` (the one-sided progress thread's sleep): while
/// another thread of the process polls every transport in a blocking wait, a sleeper
/// sleeps on its doorbell alone, and the poller rings it as soon as it takes a message for
/// it (context and tag) off the link; messages of other tags on that context do not count.
/// Once the poller left, the sleeper's next wait goes back to the links (here fake ones,
/// which have no descriptor: `Opaque`), instead of sleeping on a doorbell nobody rings.
#[test]
fn a_sleeper_leaves_the_links_to_a_polling_thread_which_rings_it() {
    use crate::Wait;
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant};
    let net = Net::new(2, 64);
    let (e0, e1) = (&net.e[0], &net.e[1]);
    let win = e1.comm_create(10, vec![0, 1]).expect("comm at 1");
    let win0 = e0.comm_create(10, vec![0, 1]).expect("comm at 0");
    let never_flag = AtomicBool::new(false);
    let never = &never_flag;
    // Long enough that a doorbell nobody rings shows as a timeout, not a late wake-up.
    let handoff = crate::SLEEP_MAX;
    // Waits until engine 1 has `pollers` pollers and `sleepers` sleepers.
    let until = |pollers: u32, sleepers: usize| until_counts(e1, pollers, sleepers);
    std::thread::scope(|s| {
        // The application thread: blocked in a wait on the world (general path).
        let blocked = s.spawn(move || {
            let mut b = [0u8; 8];
            let r = irecv_on(e1, 0, 3, &mut b, WORLD);
            e1.wait(r);
            b
        });
        until(1, 0);
        // The progress thread: waits for tag 5 on `win`, sleeping whenever it can.
        let sleeper = s.spawn(move || sleep_for_tag5(e1, win, handoff));
        // It sleeps on its doorbell (the links have no descriptor: without the hand-off
        // it would poll, `Opaque`).
        until(1, 1);
        // Another tag on its context: the poller takes it, the sleeper sleeps on.
        let other = [1u8; 4];
        let r = isend_on(e0, 1, 6, &other, win0);
        e0.wait(r);
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_millis(50) {
            assert_eq!(e1.pollers_and_sleepers(), (1, 1), "woken by another tag");
            std::thread::yield_now();
        }
        // Its tag: rung by the poller at once.
        let req = [5u8; 16];
        let r = isend_on(e0, 1, 5, &req, win0);
        e0.wait(r);
        let (got, waits) = sleeper.join().expect("sleeper");
        // The poller leaves (before any check fails: the scope joins it).
        let msg = [3u8; 8];
        let r = isend_on(e0, 1, 3, &msg, WORLD);
        e0.wait(r);
        assert_eq!(blocked.join().expect("blocked"), msg);
        assert_eq!(got, req);
        assert_eq!(
            waits,
            [Wait::Slept],
            "the sleeper must be rung by the polling thread (a timeout is a lost wake-up)"
        );
        // A sleeper now goes back to the links.
        assert_eq!(e1.pollers_and_sleepers(), (0, 0));
        let w = e1
            .wait_message(ANY_SOURCE, 5, win, &[0], never, handoff)
            .expect("wait_message");
        assert_eq!(
            w,
            Wait::Opaque,
            "no poller: the sleeper must watch the links"
        );
        // The tag-6 message is still there for whoever receives it.
        let mut b = [0u8; 4];
        let r = irecv_on(e1, 0, 6, &mut b, win);
        net.done(1, r);
        assert_eq!(b, other);
    });
}

/// `Engine::serving`: a thread that polls every transport and serves one context and tag
/// itself (an origin serving its own window's requests while it waits for a reply) takes
/// those messages without ringing the sleeper that waits for them (the window's progress
/// thread sleeps on); once its guard dropped, such a message rings the sleeper again
/// (else it would sleep through it: a lost wake-up, seen here as a timeout).
#[test]
fn a_serving_poller_takes_its_own_requests_without_ringing_the_sleeper() {
    use crate::Wait;
    use std::time::{Duration, Instant};
    let net = Net::new(2, 64);
    let (e0, e1) = (&net.e[0], &net.e[1]);
    let win = e1.comm_create(10, vec![0, 1]).expect("comm at 1");
    let win0 = e0.comm_create(10, vec![0, 1]).expect("comm at 0");
    let handoff = crate::SLEEP_MAX;
    // Waits until engine 1 has `pollers` pollers and `sleepers` sleepers.
    let until = |pollers: u32, sleepers: usize| until_counts(e1, pollers, sleepers);
    // Takes one message of tag 5 on `win`, or gives up after a while.
    let take = move || -> Option<Vec<u8>> {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Some(b) = take_tag5(e1, win) {
                return Some(b);
            }
            std::hint::spin_loop();
        }
        None
    };
    std::thread::scope(|s| {
        // The application thread: blocked in a wait on the world (a poller).
        let blocked = s.spawn(move || {
            let mut b = [0u8; 8];
            let r = irecv_on(e1, 0, 3, &mut b, WORLD);
            e1.wait(r);
            b
        });
        until(1, 0);
        // The progress thread: waits for tag 5 on `win`, sleeping whenever it can.
        let sleeper = s.spawn(move || sleep_for_tag5(e1, win, handoff));
        until(1, 1);
        // The server: serves tag 5 on `win` itself while it polls.
        let server = s.spawn(move || {
            let _g = e1.serving(5, win).expect("serving");
            take()
        });
        until(2, 1);
        let first = [7u8; 16];
        let r = isend_on(e0, 1, 5, &first, win0);
        e0.wait(r);
        let served = server.join().expect("server");
        // The sleeper was not rung for it, and sleeps on.
        let t0 = Instant::now();
        let mut woken = None;
        while t0.elapsed() < Duration::from_millis(50) {
            if e1.pollers_and_sleepers() != (1, 1) {
                woken = Some(e1.pollers_and_sleepers());
                break;
            }
            std::thread::yield_now();
        }
        let served_left = e1.served();
        // The server left: the next request rings the sleeper again.
        let second = [9u8; 16];
        let r = isend_on(e0, 1, 5, &second, win0);
        e0.wait(r);
        let (got, waits) = sleeper.join().expect("sleeper");
        // The poller leaves (before any check fails: the scope joins it).
        let msg = [3u8; 8];
        let r = isend_on(e0, 1, 3, &msg, WORLD);
        e0.wait(r);
        assert_eq!(blocked.join().expect("blocked"), msg);
        assert_eq!(
            served.as_deref(),
            Some(&first[..]),
            "the server must take the request that came while it served"
        );
        assert_eq!(woken, None, "the sleeper was woken while the server served");
        assert_eq!(
            served_left, 0,
            "the server's context and tag outlived its guard"
        );
        assert_eq!(got, second);
        assert_eq!(
            waits,
            [Wait::Slept],
            "the sleeper must be rung once, for the request after the server left \
             (a timeout is a lost wake-up)"
        );
        assert_eq!(e1.pollers_and_sleepers(), (0, 0));
    });
}

/// The hand-off tests: takes a message of tag 5 on `win` at `e`, if one is there.
fn take_tag5(e: &Engine, win: CommId) -> Option<Vec<u8>> {
    let (m, st) = e.improbe(ANY_SOURCE, 5, win).expect("improbe")?;
    let mut b = vec![0u8; st.count_bytes];
    // SAFETY: b outlives the receive, which completes before `wait` returns.
    let r = unsafe { e.imrecv(b.as_mut_ptr(), b.len(), m) }.expect("imrecv");
    e.wait(r);
    Some(b)
}

/// The hand-off tests: a one-sided progress thread's loop at `e`, waiting for a message of
/// tag 5 on `win` and sleeping in `Engine::wait_message` whenever it can; returns the
/// message and what each of its waits did.
fn sleep_for_tag5(
    e: &Engine,
    win: CommId,
    handoff: std::time::Duration,
) -> (Vec<u8>, Vec<crate::Wait>) {
    let never = std::sync::atomic::AtomicBool::new(false);
    let mut waits = Vec::new();
    loop {
        if let Some(b) = take_tag5(e, win) {
            return (b, waits);
        }
        let w = e
            .wait_message(ANY_SOURCE, 5, win, &[0], &never, handoff)
            .expect("wait_message");
        waits.push(w);
        if w == crate::Wait::Opaque {
            std::thread::yield_now();
        }
    }
}

/// The hand-off tests: waits until `e` has `pollers` pollers and `sleepers` sleepers.
fn until_counts(e: &Engine, pollers: u32, sleepers: usize) {
    let t0 = std::time::Instant::now();
    while e.pollers_and_sleepers() != (pollers, sleepers) {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "the engine never had {pollers} pollers and {sleepers} sleepers: {:?}",
            e.pollers_and_sleepers()
        );
        std::thread::yield_now();
    }
}

/// A communicator's sequence (`Engine::comm_next_seq`, which numbers the collectives'
/// schedules) starts at 0 with the communicator: engines 0 and 1 count 3 on a communicator
/// with context id 10 that engine 2 is not in, free it, and a new communicator of all
/// three on id 10 starts at 0 everywhere (counted per context id, engines 0 and 1 would
/// start at 3 and their schedules' tags would not match engine 2's).
#[test]
fn a_reused_context_id_starts_its_sequence_at_zero() {
    let net = Net::new(3, 64);
    for e in &net.e[..2] {
        let pair = e.comm_create(10, vec![0, 1]).expect("comm 0-1");
        let counted: Vec<u32> = (0..3).map(|_| e.comm_next_seq(pair).unwrap()).collect();
        assert_eq!(counted, vec![0, 1, 2]);
        e.comm_free(pair).expect("free");
        assert!(
            e.comm_next_seq(pair).is_err(),
            "a freed communicator has none"
        );
    }
    for e in &net.e {
        let all = e.comm_create(10, vec![0, 1, 2]).expect("comm of all");
        assert_eq!(e.comm_next_seq(all).unwrap(), 0);
        assert_eq!(e.comm_next_seq(all).unwrap(), 1);
        // World's own sequence is apart.
        assert_eq!(e.comm_next_seq(WORLD).unwrap(), 0);
    }
}

/// Engines whose sm-like peers may read each other (single copy offered, our own pid)
/// with `placement`, messages above 128 B of the 256 B eager limit taken by a far peer
/// by a read; the size-class chooser would pipeline them (`coop_min` above them).
fn placement_net(placement: Placement) -> Net {
    let settings = Settings {
        single_copy: SingleCopy::Auto,
        coop_min: 16 << 10,
        placement,
        far_eager: 128,
        ..test_settings()
    };
    let net = Net::build(2, 256, 4096, &settings);
    for (a, b) in [(0, 1), (1, 0)] {
        net.e[a].set_peer_pid(b, std::process::id() as i32);
        net.e[a].set_peer_single_copy(b);
    }
    net
}

/// The kinds of the records `from` sent to `to` since the log had `since` of them.
fn kinds_since(net: &Net, from: usize, to: usize, since: usize) -> Vec<u8> {
    net.log(from, to)[since..].iter().map(|&(k, _)| k).collect()
}

/// A far peer (two slow eager copies from it) gets our messages of 129-256 B as a
/// request-to-send that it answers with a FIN after reading the message alone (no
/// clear-to-send, though its chooser pipelines that size), but for one probe in
/// `PROBE_EVERY`, sent eagerly; messages up to 128 B stay eager; a window of sends behind a
/// rendezvous under way goes by the read as well, with its probes; two fast copies make it
/// near again.
#[test]
fn a_far_peer_reads_our_eager_sizes_alone_but_for_the_probes() {
    use crate::btl::sm::place::{FAR_NS_PER_KIB, PROBE_EVERY};
    let net = placement_net(Placement::Auto);
    // Near (nothing sensed): eager.
    let n0 = net.log(0, 1).len();
    transfer(&net, 200, 200, 1);
    assert_eq!(kinds_since(&net, 0, 1, n0), [K_EAGER]);
    // Two slow copies of 8 KiB from rank 1: far.
    let slow = FAR_NS_PER_KIB * 8 + 1;
    net.e[0].sense_peer(1, 8192, slow);
    net.e[0].sense_peer(1, 8192, slow);
    let (sent, answers) = (net.log(0, 1).len(), net.log(1, 0).len());
    for i in 0..PROBE_EVERY as usize * 2 {
        transfer(&net, 200, 200, (i % 100) as i32);
    }
    let kinds = kinds_since(&net, 0, 1, sent);
    let rts = kinds.iter().filter(|&&k| k == K_RTS).count();
    let eager = kinds.iter().filter(|&&k| k == K_EAGER).count();
    assert_eq!((rts, eager), (PROBE_EVERY as usize * 2 - 2, 2), "{kinds:?}");
    let back = kinds_since(&net, 1, 0, answers);
    assert!(
        back.iter().all(|&k| k == K_FIN) && back.len() == rts,
        "read alone, answered by FIN only: {back:?}"
    );
    // Up to the far limit: eager.
    let sent = net.log(0, 1).len();
    transfer(&net, 128, 128, 3);
    assert_eq!(kinds_since(&net, 0, 1, sent), [K_EAGER]);
    // Behind a rendezvous under way (a 1000 B message not yet received), a window of
    // `PROBE_EVERY` sends of 200 B: by the read, but for one probe.
    let big = data(1000, 5);
    let s1 = net.isend(0, 1, 7, &big, SendMode::Standard);
    let sent = net.log(0, 1).len();
    let small: Vec<Vec<u8>> = (0..PROBE_EVERY as u8).map(|i| data(200, i)).collect();
    let ss: Vec<ReqId> = small
        .iter()
        .map(|m| net.isend(0, 1, 8, m, SendMode::Standard))
        .collect();
    let kinds = kinds_since(&net, 0, 1, sent);
    let eager = kinds.iter().filter(|&&k| k == K_EAGER).count();
    assert_eq!((kinds.len(), eager), (PROBE_EVERY as usize, 1), "{kinds:?}");
    let mut b1 = vec![0u8; 1000];
    let mut bs = vec![vec![0u8; 200]; small.len()];
    let r1 = net.irecv(1, 0, 7, &mut b1);
    let rs: Vec<ReqId> = bs.iter_mut().map(|b| net.irecv(1, 0, 8, b)).collect();
    for r in std::iter::once(r1).chain(rs) {
        net.done(1, r);
    }
    for s in std::iter::once(s1).chain(ss) {
        net.done(0, s);
    }
    assert_eq!((b1, bs), (big, small));
    // Two fast copies: near, eager again.
    net.e[0].sense_peer(1, 8192, FAR_NS_PER_KIB * 8);
    net.e[0].sense_peer(1, 8192, FAR_NS_PER_KIB * 8);
    let sent = net.log(0, 1).len();
    transfer(&net, 200, 200, 4);
    assert_eq!(kinds_since(&net, 0, 1, sent), [K_EAGER]);
}

/// `btl_sm_placement`: `near` sends eager sizes eagerly whatever is sensed; `far` sends
/// every one above the far limit by a read, with nothing sensed and no probes.
#[test]
fn a_forced_placement_ignores_what_is_sensed() {
    use crate::btl::sm::place::{FAR_NS_PER_KIB, PROBE_EVERY};
    let near = placement_net(Placement::Near);
    near.e[0].sense_peer(1, 8192, FAR_NS_PER_KIB * 100);
    near.e[0].sense_peer(1, 8192, FAR_NS_PER_KIB * 100);
    let sent = near.log(0, 1).len();
    transfer(&near, 200, 200, 1);
    assert_eq!(kinds_since(&near, 0, 1, sent), [K_EAGER]);
    let far = placement_net(Placement::Far);
    let (sent, answers) = (far.log(0, 1).len(), far.log(1, 0).len());
    for i in 0..PROBE_EVERY as usize + 1 {
        transfer(&far, 129 + i, 256, i as i32);
    }
    let kinds = kinds_since(&far, 0, 1, sent);
    assert!(kinds.iter().all(|&k| k == K_RTS), "{kinds:?}");
    assert!(kinds_since(&far, 1, 0, answers).iter().all(|&k| k == K_FIN));
    let sent = far.log(0, 1).len();
    transfer(&far, 128, 128, 2);
    assert_eq!(kinds_since(&far, 0, 1, sent), [K_EAGER]);
}

/// Two engines joined by a fake link (records of at most `max_payload` bytes, DATA
/// fragments of 4096, 256 records in flight), each knowing the other's pid (this process)
/// and able to copy from it across memory.
fn cma_pair(settings: &Settings, max_payload: usize) -> Net {
    let (la, lb, wire) = fake::pair(max_payload, 4096, 256);
    let net = Net {
        e: vec![
            Engine::with_links(0, vec![None, Some(Box::new(la))], settings),
            Engine::with_links(1, vec![Some(Box::new(lb)), None], settings),
        ],
        wires: HashMap::from([((0, 1), wire)]),
    };
    for (a, b) in [(0, 1), (1, 0)] {
        net.e[a].set_peer_pid(b, std::process::id() as i32);
        net.e[a].set_peer_single_copy(b);
    }
    net
}

/// A window of eager-size sends (above the far limit) to a peer placed far goes by reads
/// alone, each a request-to-send answered by a FIN, whether the receives come late or
/// early: every message intact and in order (one tag), a short receive truncated without
/// disturbing the rest, an eager message of the far limit in the window kept in its place.
#[test]
fn a_window_to_a_far_peer_goes_by_reads_in_order() {
    const N: usize = 8192;
    let settings = Settings {
        single_copy: SingleCopy::Auto,
        placement: Placement::Far,
        eager_limit: N,
        far_eager: 4096,
        ..test_settings()
    };
    let net = cma_pair(&settings, N);
    // Message 5 is of the far limit (eager); message 3's receive is short.
    let len = |i: usize| if i == 5 { 4096 } else { N - i };
    let (short, cap) = (3, 5000);
    for late in [true, false] {
        let msgs: Vec<Vec<u8>> = (0..16).map(|i| data(len(i), i as u8)).collect();
        let mut bufs: Vec<Vec<u8>> = (0..16)
            .map(|i| vec![0xEE; if i == short { cap } else { N }])
            .collect();
        let (sent, answers) = (net.log(0, 1).len(), net.log(1, 0).len());
        let mut rs = Vec::new();
        if !late {
            rs = bufs.iter_mut().map(|b| net.irecv(1, 0, 9, b)).collect();
        }
        let ss: Vec<ReqId> = msgs
            .iter()
            .map(|m| net.isend(0, 1, 9, m, SendMode::Standard))
            .collect();
        if late {
            // Every request-to-send arrives unexpected before a receive is posted.
            for _ in 0..10 {
                net.step();
            }
            rs = bufs.iter_mut().map(|b| net.irecv(1, 0, 9, b)).collect();
        }
        let sts: Vec<Status> = rs.into_iter().map(|r| net.done(1, r)).collect();
        for s in ss {
            assert_eq!(net.done(0, s).error, None, "late {late}");
        }
        let kinds = kinds_since(&net, 0, 1, sent);
        let want: Vec<u8> = (0..16)
            .map(|i| if i == 5 { K_EAGER } else { K_RTS })
            .collect();
        assert_eq!(kinds, want, "a window by reads (late {late})");
        let back = kinds_since(&net, 1, 0, answers);
        assert_eq!(back, vec![K_FIN; 15], "read alone (late {late})");
        for (i, (st, (b, m))) in sts.iter().zip(bufs.iter().zip(&msgs)).enumerate() {
            let k = m.len().min(b.len());
            assert_eq!(&b[..k], &m[..k], "message {i} (late {late})");
            assert!(
                b[k..].iter().all(|&x| x == 0xEE),
                "message {i} (late {late})"
            );
            let err = (i == short).then_some(ErrorClass::Truncate);
            assert_eq!(
                (st.count_bytes, st.error),
                (k, err),
                "message {i} (late {late})"
            );
        }
    }
}

/// `btl_sm_far_stream_min`: an eager send of at least that size to a peer taken to be far
/// asks its link for non-temporal stores (`Link::stream_next`), but for the copies timed
/// for the placement (one in `EVERY` of at least `SENSE_MIN` bytes: a streamed copy does
/// not take the far reader's lines back, so timed it would read near); smaller sends and
/// sends to a near peer never do; placement `near` never, `far` always (nothing timed).
#[test]
fn eager_sends_to_a_far_peer_are_streamed_but_the_timed_copies() {
    use crate::btl::sm::place::{EVERY, FAR_NS_PER_KIB, SENSE_MIN};
    let net_of = |placement| {
        let settings = Settings {
            single_copy: SingleCopy::Auto,
            coop_min: 16 << 10,
            placement,
            eager_limit: 8192,
            far_eager: 4096,
            far_stream_min: 2048,
            ..test_settings()
        };
        cma_pair(&settings, 8192)
    };
    // The indices (counted from `since`) of the records 0 sent to 1 with the hint.
    let streamed = |net: &Net, since: usize| -> Vec<usize> {
        let (w, side) = net.wire(0, 1);
        w.streamed(side)
            .into_iter()
            .filter_map(|i| i.checked_sub(since))
            .collect()
    };
    let net = net_of(Placement::Auto);
    // Near (nothing sensed): plain.
    let n0 = net.log(0, 1).len();
    transfer(&net, SENSE_MIN, SENSE_MIN, 1);
    transfer(&net, 2048, 2048, 2);
    assert_eq!(streamed(&net, n0), [] as [usize; 0], "near");
    // Two slow copies: far. Of `EVERY` eager sends of `SENSE_MIN` bytes one is timed and
    // plain, the others streamed.
    let slow = FAR_NS_PER_KIB * 8 + 1;
    net.e[0].sense_peer(1, 8192, slow);
    net.e[0].sense_peer(1, 8192, slow);
    let n0 = net.log(0, 1).len();
    for i in 0..EVERY as usize {
        transfer(&net, SENSE_MIN, SENSE_MIN, i as i32);
    }
    let s = streamed(&net, n0);
    assert_eq!(
        net.log(0, 1).len() - n0,
        EVERY as usize,
        "one eager record each"
    );
    assert_eq!(s.len(), EVERY as usize - 1, "all but the timed copy: {s:?}");
    // Below the far stream size: plain; at it (below SENSE_MIN: never timed): streamed.
    let n0 = net.log(0, 1).len();
    transfer(&net, 2047, 2047, 3);
    transfer(&net, 2048, 2048, 4);
    assert_eq!(streamed(&net, n0), [1]);
    // Placement `near`: never, whatever is sensed; `far`: every eager send from the size on.
    let near = net_of(Placement::Near);
    near.e[0].sense_peer(1, 8192, slow);
    near.e[0].sense_peer(1, 8192, slow);
    for i in 0..4 {
        transfer(&near, 4096, 4096, i);
    }
    assert_eq!(streamed(&near, 0), [] as [usize; 0], "placement near");
    let far = net_of(Placement::Far);
    for i in 0..EVERY as i32 {
        transfer(&far, 4096, 4096, i);
    }
    transfer(&far, 100, 100, 0);
    assert_eq!(streamed(&far, 0), (0..EVERY as usize).collect::<Vec<_>>());
}
