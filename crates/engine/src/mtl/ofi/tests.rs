//! Deterministic tests of the offload's rules: the bit layout, wildcard masks, truncation,
//! cancellation, probes, synchronous-send acknowledgements, and MPI's ordering guarantee
//! when the provider (the in-process model `crate::mtl::fake`) completes out of order.

use super::completion::{Cq, RecvEnd, FI_ECANCELED, FI_ETRUNC};
use super::select::{
    bounce_below, choose, rendezvous_above, spill_byte, Asked, Offer, Pml, BOUNCE,
};
use super::tag::{
    bits_for, EncodeError, Envelope, Layout, LayoutError, RESERVED_CONTEXTS, TAG_BITS,
};
use crate::mtl::fake::{Completion, FakeTagged};
use crate::ErrorClass;

/// 64 bits, 16 of source: 13 of context.
fn layout() -> Layout {
    Layout::new(64, 16).unwrap()
}

fn env(ctx: u32, src: u32, tag: i32) -> Envelope {
    Envelope { ctx, src, tag }
}

#[test]
fn fields_sit_where_the_layout_says() {
    let l = layout();
    assert_eq!((l.source_bits(), l.context_bits()), (16, 13));
    assert_eq!(
        l.tag_ub(),
        crate::TAG_UB,
        "MPI_TAG_UB as on the engine's path"
    );
    assert_eq!(l.max_ranks(), 1 << 16);
    assert_eq!(l.max_contexts(), (1 << 12) - RESERVED_CONTEXTS);
    assert_eq!((l.sync(), l.ack()), (1 << 63, 1 << 62));
    assert_eq!(l.send(&env(0, 0, 0), false).unwrap(), 0);
    assert_eq!(l.send(&env(0, 0, 5), false).unwrap(), 5);
    // The mark right above the tag field, where the engine has it; the source above it.
    assert_eq!(l.mark(), crate::TAG_MARK as u64);
    assert_eq!(l.mark(), 1 << TAG_BITS);
    assert_eq!(
        l.send(&env(0, 0, 5 | crate::TAG_MARK), false).unwrap(),
        5 | l.mark()
    );
    assert_eq!(l.send(&env(0, 3, 0), false).unwrap(), 3 << (TAG_BITS + 1));
    assert_eq!(
        l.send(&env(2, 0, 0), false).unwrap(),
        2 << (TAG_BITS + 1 + 16)
    );
    assert_eq!(l.send(&env(0, 0, 0), true).unwrap(), 1 << 63);
    // The reserved protocol bits stay clear, whatever the fields hold.
    let full = l
        .send(&env(l.max_contexts() - 1, 0xffff, l.tag_ub()), true)
        .unwrap();
    assert_eq!(full & (0b11 << 60), 0);
    // Fewer matched bits (a provider's mem_tag_format): the protocol field moves down.
    let short = Layout::new(56, 10).unwrap();
    assert_eq!(short.context_bits(), 11);
    assert_eq!(short.sync(), 1 << 55);
    assert!(short.send(&env(1, 1, 1), true).unwrap() < 1 << 56);
}

#[test]
fn envelopes_round_trip_including_collective_and_reserved_contexts() {
    let l = layout();
    let half = 1u32 << (l.context_bits() - 1);
    let coll = 1u32 << 31;
    for ctx in [
        0,
        1,
        7,
        l.max_contexts() - 1,
        coll,
        coll | 1,
        coll | (half - 1),
        u32::MAX,
        u32::MAX - 1,
        u32::MAX - (RESERVED_CONTEXTS - 1),
    ] {
        for (src, tag) in [
            (0, 0),
            (1, 1),
            (0xffff, l.tag_ub()),
            (12, 1 << 28),
            (3, crate::TAG_MARK),
            (0xffff, l.tag_ub() | crate::TAG_MARK),
        ] {
            for sync in [false, true] {
                let e = env(ctx, src, tag);
                let d = l.decode(l.send(&e, sync).unwrap());
                assert_eq!((d.env, d.sync, d.ack), (e, sync, false), "{ctx:#x}");
            }
        }
    }
    // Every encodable context has its own field value.
    let mut seen = std::collections::HashSet::new();
    for ctx in (0..l.max_contexts())
        .chain((0..half).map(|c| coll | c))
        .chain((0..RESERVED_CONTEXTS).map(|k| u32::MAX - k))
    {
        assert!(
            seen.insert(l.send(&env(ctx, 0, 0), false).unwrap()),
            "{ctx:#x}"
        );
    }
    assert_eq!(seen.len(), 1 << l.context_bits());
}

#[test]
fn values_outside_their_fields_are_errors() {
    let l = layout();
    let ctx = l.max_contexts();
    assert_eq!(
        l.send(&env(ctx, 0, 0), false),
        Err(EncodeError::Context(ctx))
    );
    let big = (1 << 31) | (1 << 12);
    assert_eq!(
        l.send(&env(big, 0, 0), false),
        Err(EncodeError::Context(big))
    );
    assert_eq!(
        l.send(&env(u32::MAX - RESERVED_CONTEXTS, 0, 0), false),
        Err(EncodeError::Context(u32::MAX - RESERVED_CONTEXTS))
    );
    assert_eq!(
        l.send(&env(0, 1 << 16, 0), false),
        Err(EncodeError::Source(1 << 16))
    );
    assert_eq!(l.send(&env(0, 0, -1), false), Err(EncodeError::Tag(-1)));
    // A message's tag may carry the mark (bit 30); a receive's names none.
    assert!(l.send(&env(0, 0, 1 << 30), false).is_ok());
    assert_eq!(
        l.recv(0, None, Some(1 << 30)),
        Err(EncodeError::Tag(1 << 30))
    );
    assert_eq!(l.recv(0, None, Some(-5)), Err(EncodeError::Tag(-5)));
    assert_eq!(
        EncodeError::Context(ctx).to_string(),
        "context id 0xff0 does not fit the tag"
    );
}

#[test]
fn layouts_fit_the_provider_and_the_job() {
    assert_eq!(bits_for(1), 1);
    assert_eq!(bits_for(2), 1);
    assert_eq!(bits_for(3), 2);
    assert_eq!(bits_for(65536), 16);
    assert_eq!(bits_for(65537), 17);
    let l = Layout::fit(64, 4, 16).unwrap();
    assert_eq!(l.source_bits(), 16, "at least the minimum");
    let l = Layout::fit(64, 100_000, 16).unwrap();
    assert_eq!((l.source_bits(), l.context_bits()), (17, 12));
    assert_eq!(
        Layout::new(40, 1),
        Err(LayoutError::TooFewBits { bits: 40, need: 44 })
    );
    assert_eq!(Layout::new(65, 16), Err(LayoutError::TooManyBits(65)));
    assert_eq!(Layout::new(64, 0), Err(LayoutError::SourceBits(0)));
    assert_eq!(Layout::new(64, 22), Err(LayoutError::SourceBits(22)));
    assert!(Layout::new(64, 21).is_ok());
    // 16 source bits (the job's minimum) need 59 matched bits.
    assert_eq!(Layout::new(58, 16), Err(LayoutError::SourceBits(16)));
    assert_eq!(Layout::new(59, 16).unwrap().context_bits(), 8);
    assert_eq!(
        Layout::new(40, 1).unwrap_err().to_string(),
        "the provider matches 40 tag bits; the MPI envelope needs at least 44"
    );
}

#[test]
fn wildcard_receives_ignore_exactly_their_fields() {
    let l = layout();
    let msg = |ctx, src, tag, sync| l.send(&env(ctx, src, tag), sync).unwrap();
    let exact = l.recv(5, Some(3), Some(9)).unwrap();
    let any_src = l.recv(5, None, Some(9)).unwrap();
    let any_tag = l.recv(5, Some(3), None).unwrap();
    let any = l.recv(5, None, None).unwrap();
    for sync in [false, true] {
        for p in [exact, any_src, any_tag, any] {
            assert!(
                p.matches(msg(5, 3, 9, sync)),
                "{p:?} takes a standard or sync send"
            );
            assert!(!p.matches(msg(6, 3, 9, sync)), "never another communicator");
            assert!(
                !p.matches(msg(5 | 1 << 31, 3, 9, sync)),
                "nor its collectives"
            );
        }
        assert!(!exact.matches(msg(5, 4, 9, sync)) && !exact.matches(msg(5, 3, 8, sync)));
        assert!(any_src.matches(msg(5, 0xffff, 9, sync)) && !any_src.matches(msg(5, 3, 8, sync)));
        assert!(any_tag.matches(msg(5, 3, 0, sync)) && !any_tag.matches(msg(5, 4, 9, sync)));
        assert!(any.matches(msg(5, 0xffff, l.tag_ub(), sync)));
        // A rendezvous request is taken like the message it stands for.
        for p in [exact, any_src, any_tag, any] {
            assert!(p.matches(msg(5, 3, 9, sync) | l.rndv()));
            assert!(!p.matches(msg(6, 3, 9, sync) | l.rndv()));
        }
        assert!(l.decode(msg(5, 3, 9, sync) | l.rndv()).rndv);
        assert!(!l.decode(msg(5, 3, 9, sync)).rndv);
    }
    assert_eq!(
        l.rndv() & (l.sync() | l.ack() | crate::btl::ofi::link::BTL_TAG),
        0
    );
    assert_eq!(
        l.mark() & (l.sync() | l.ack() | l.rndv() | crate::btl::ofi::link::BTL_TAG),
        0
    );
    // Acknowledgements match only their own exact receive, never a wildcard receive.
    let a = l.ack_send(&env(5, 3, 9), 2).unwrap();
    for p in [exact, any_src, any_tag, any] {
        assert!(!p.matches(a));
    }
    assert!(l.ack_recv(&env(5, 3, 9), 2).unwrap().matches(a));
    assert!(
        !l.ack_recv(&env(5, 3, 9), 1).unwrap().matches(a),
        "another rank's ack"
    );
    assert!(
        !l.ack_recv(&env(5, 3, 8), 2).unwrap().matches(a),
        "another tag's ack"
    );
    assert_eq!(
        any.ignore,
        l.sync() | l.rndv() | ((1 << (16 + 1 + TAG_BITS)) - 1)
    );
    assert_eq!(exact.ignore, l.sync() | l.rndv() | l.mark());
}

/// A marked message (the engine's `TAG_MARK`: the collectives' error markers and length
/// headers) through the provider's matching (the in-process model): every kind of receive
/// of its tag takes it as one of that tag (exact, any source, any tag, fully wild; posted
/// before it arrives or after), in send order with the unmarked messages of that tag, and
/// never a receive of another tag or communicator; its completion's status shows
/// `TAG_MARK` on the tag, an unmarked message's does not, whatever their lengths (a
/// one-byte marker and one byte of data alike). A synchronous marked send is acknowledged
/// as any other, and a marked rendezvous request keeps its mark.
#[test]
fn a_marked_message_arrives_marked_and_matching_ignores_the_mark() {
    let l = layout();
    let mark = crate::TAG_MARK;
    const CTX: u32 = (1 << 31) | 4;
    let from = 2u32;
    let wants = [
        (Some(from), Some(7)),
        (None, Some(7)),
        (Some(from), None),
        (None, None),
    ];
    for (k, &(src, tag)) in wants.iter().enumerate() {
        let pat = l.recv(CTX, src, tag).unwrap();
        for posted_first in [false, true] {
            let mut ep = FakeTagged::new();
            // Sender 2's messages of tag 7, in this order: unmarked, marked, marked and
            // 32 bytes long, unmarked; each numbered by its first 8 bytes (one-byte ones
            // by their only byte).
            let sent = [(false, 1usize), (true, 1), (true, 32), (false, 1)];
            let data = |i: usize, n: usize| {
                let mut d = (i as u64).to_le_bytes().to_vec();
                d.resize(n, 0xee);
                d
            };
            // A receive of another tag and one of another communicator, posted first,
            // take none of them.
            let other_tag = l.recv(CTX, Some(from), Some(8)).unwrap();
            let other_comm = l.recv(CTX & !(1 << 31), src, tag).unwrap();
            ep.recv(100, Some(from), other_tag, 64);
            ep.recv(101, src, other_comm, 64);
            if posted_first {
                for i in 0..sent.len() {
                    ep.recv(i as u64, src, pat, 64);
                }
            }
            for (i, &(marked, n)) in sent.iter().enumerate() {
                let t = if marked { 7 | mark } else { 7 };
                let bits = l.send(&env(CTX, from, t), false).unwrap();
                assert_eq!(bits & l.mark() != 0, marked);
                ep.arrive(from, bits, &data(i, n));
            }
            if !posted_first {
                for i in 0..sent.len() {
                    ep.recv(i as u64, src, pat, 64);
                }
            }
            assert_eq!((ep.posted(), ep.unexpected()), (2, 0), "case {k}");
            let order: Vec<u64> = ep.matches.iter().map(|m| m.0).collect();
            assert_eq!(order, [0, 1, 2, 3], "case {k}: matched in send order");
            for c in ep.completions(k as u64 + 1) {
                let (marked, n) = sent[c.id as usize];
                let st = RecvEnd::read(&l, c.cq).status(|_| false);
                let want = if marked { 7 | mark } else { 7 };
                assert_eq!(
                    (st.source, st.tag, st.count, st.error),
                    (Some(from), Some(want), n, None),
                    "case {k}, message {}",
                    c.id
                );
                assert_eq!(st.tag.unwrap() & mark != 0, marked);
                assert_eq!(st.tag.unwrap() & !mark, 7, "the tag under the mark");
                assert_eq!(c.data[0], c.id as u8);
            }
        }
    }
    // A synchronous marked send: matched by a receive of its tag, acknowledged to the
    // sender's exact receive of that acknowledgement.
    let mut sender = FakeTagged::new();
    let mut receiver = FakeTagged::new();
    let e = env(CTX, from, 3 | mark);
    sender.recv(0, Some(1), l.ack_recv(&e, 1).unwrap(), 0);
    receiver.arrive(from, l.send(&e, true).unwrap(), &[0]);
    receiver.recv(0, Some(from), l.recv(CTX, Some(from), Some(3)).unwrap(), 1);
    let c = receiver.completions(0);
    let end = RecvEnd::read(&l, c[0].cq);
    assert_eq!(end.status(|_| false).tag, Some(3 | mark));
    let (got, to) = end.ack_owed().unwrap();
    sender.arrive(1, l.ack_send(&got, 1).unwrap(), &[]);
    assert_eq!(to, from);
    assert_eq!(sender.completions(0).len(), 1, "acknowledged");
    // A rendezvous request keeps the mark of the message it stands for.
    let d = l.decode(l.send(&env(CTX, from, 9 | mark), false).unwrap() | l.rndv());
    assert!(d.rndv && d.env.tag == 9 | mark);
}

#[test]
fn completions_read_as_statuses() {
    let l = layout();
    let gone = |e: i32| e == libc::ECONNRESET;
    let bits = l.send(&env(1, 4, 77), true).unwrap();
    let done = RecvEnd::read(&l, Cq::Ok { tag: bits, len: 12 });
    let s = done.status(gone);
    assert_eq!(
        (s.source, s.tag, s.count, s.error),
        (Some(4), Some(77), 12, None)
    );
    assert_eq!(done.ack_owed(), Some((env(1, 4, 77), 4)));
    // Truncation: what fits arrived, MPI_ERR_TRUNCATE, and the sync send is still
    // acknowledged (it matched).
    let cut = RecvEnd::read(
        &l,
        Cq::Err {
            errno: FI_ETRUNC,
            tag: bits,
            len: 8,
            olen: 92,
        },
    );
    assert!(matches!(
        cut,
        RecvEnd::Truncated {
            count: 8,
            len: 100,
            ..
        }
    ));
    let s = cut.status(gone);
    assert_eq!((s.source, s.tag, s.count), (Some(4), Some(77), 8));
    assert_eq!(s.error, Some(ErrorClass::Truncate));
    assert!(cut.ack_owed().is_some());
    let plain = l.send(&env(1, 4, 77), false).unwrap();
    assert_eq!(
        RecvEnd::read(&l, Cq::Ok { tag: plain, len: 0 }).ack_owed(),
        None
    );
    let cancelled = RecvEnd::read(
        &l,
        Cq::Err {
            errno: FI_ECANCELED,
            tag: 0,
            len: 0,
            olen: 0,
        },
    );
    let s = cancelled.status(gone);
    assert!(s.cancelled && s.error.is_none() && s.source.is_none());
    assert_eq!(cancelled.ack_owed(), None);
    let failed = |errno| {
        RecvEnd::read(
            &l,
            Cq::Err {
                errno,
                tag: 0,
                len: 0,
                olen: 0,
            },
        )
        .status(gone)
        .error
    };
    assert_eq!(failed(libc::ECONNRESET), Some(ErrorClass::ProcFailed));
    assert_eq!(failed(libc::EINVAL), Some(ErrorClass::Other));
}

/// A tiny deterministic generator (xorshift64).
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// One receive the test posted: its pattern's MPI meaning.
#[derive(Debug, Clone, Copy)]
struct Want {
    src: Option<u32>,
    tag: Option<i32>,
}

/// MPI's non-overtaking rule on a finished run: for every receive `r` that took message
/// `j` of sender `s`, every earlier message `i < j` of `s` that `r` would also have taken
/// was matched before `r` matched. `sent[s][i]` is the tag of sender `s`'s message `i`.
fn check_non_overtaking(matches: &[(u64, u32, u64)], wants: &[Want], sent: &[Vec<i32>]) {
    let when: std::collections::HashMap<(u32, u64), usize> = matches
        .iter()
        .enumerate()
        .map(|(k, &(_, s, i))| ((s, i), k))
        .collect();
    for (k, &(r, s, j)) in matches.iter().enumerate() {
        let w = wants[r as usize];
        for i in 0..j {
            let tag = sent[s as usize][i as usize];
            let would = w.src.is_none_or(|x| x == s) && w.tag.is_none_or(|t| t == tag);
            if would {
                let earlier = when.get(&(s, i)).is_some_and(|&m| m < k);
                assert!(
                    earlier,
                    "receive {r} took message {j} of {s} before its message {i}"
                );
            }
        }
    }
}

/// Many runs: three senders each send a numbered stream with tags from a small set
/// (interleaved at random, each sender's in order, as `FI_ORDER_SAS` delivers them), while
/// the receiver posts exact, any-source, any-tag and fully wild receives at random times;
/// the provider's completions are then read in a shuffled order. Each completion, read on
/// its own, gives the right status (source and tag from the tag, count, the data it
/// carries), and MPI's ordering guarantee holds.
#[test]
fn matching_order_survives_out_of_order_completions() {
    let l = layout();
    const CTX: u32 = 3;
    for seed in 1..=200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let mut ep = FakeTagged::new();
        let senders = 3u32;
        let per = 12u64;
        let sent: Vec<Vec<i32>> = (0..senders)
            .map(|_| (0..per).map(|_| rng.next(3) as i32).collect())
            .collect();
        let mut next = vec![0u64; senders as usize];
        let mut wants = Vec::new();
        let total = u64::from(senders) * per;
        let mut arrived = 0;
        while arrived < total || (wants.len() as u64) < total {
            let post = (wants.len() as u64) < total && (arrived == total || rng.next(2) == 0);
            if post {
                // Receives use wildcards only where the run can still complete all of
                // them: the last receives are fully wild.
                let late = wants.len() as u64 >= total - 6;
                let w = match (late, rng.next(4)) {
                    (true, _) | (false, 0) => Want {
                        src: None,
                        tag: None,
                    },
                    (false, 1) => Want {
                        src: None,
                        tag: Some(rng.next(3) as i32),
                    },
                    (false, 2) => Want {
                        src: Some(rng.next(u64::from(senders)) as u32),
                        tag: None,
                    },
                    _ => Want {
                        src: Some(rng.next(u64::from(senders)) as u32),
                        tag: Some(rng.next(3) as i32),
                    },
                };
                let pat = l.recv(CTX, w.src, w.tag).unwrap();
                // FI_DIRECTED_RECV: a receive from one source names its address too.
                ep.recv(wants.len() as u64, w.src, pat, 64);
                wants.push(w);
            } else {
                let s = rng.next(u64::from(senders)) as u32;
                let i = next[s as usize];
                if i == per {
                    continue;
                }
                next[s as usize] += 1;
                arrived += 1;
                let tag = sent[s as usize][i as usize];
                let bits = l.send(&env(CTX, s, tag), rng.next(5) == 0).unwrap();
                let mut data = i.to_le_bytes().to_vec();
                data.extend_from_slice(&[s as u8; 8]);
                ep.arrive(s, bits, &data);
            }
        }
        check_non_overtaking(&ep.matches, &wants, &sent);
        // Completions in a shuffled order: each one alone says who sent what.
        let matched = ep.matches.len();
        for c in ep.completions(seed) {
            let Completion { id, cq, data, from } = c;
            let end = RecvEnd::read(&l, cq);
            let st = end.status(|_| false);
            let (src, tag) = (st.source.unwrap(), st.tag.unwrap());
            assert_eq!(Some(src), from, "seed {seed}: the source from the tag");
            let i = u64::from_le_bytes(data[..8].try_into().unwrap());
            assert_eq!(data[8..], [src as u8; 8]);
            assert_eq!(sent[src as usize][i as usize], tag, "seed {seed}");
            let w = wants[id as usize];
            assert!(w.src.is_none_or(|s| s == src) && w.tag.is_none_or(|t| t == tag));
            assert_eq!(st.count, 16);
        }
        // Whatever did not match is still there for later receives, none lost.
        assert_eq!(matched + ep.unexpected(), total as usize, "seed {seed}");
        assert_eq!(matched + ep.posted(), total as usize, "seed {seed}");
    }
}

/// Synchronous sends: the sender posts the exact receive of each acknowledgement before
/// sending; the receiver acknowledges each message when its completion is read, in a
/// shuffled order. The sender's ack receives complete in the order posted; whenever the
/// k-th of an envelope completes, the first k sends with that envelope have matched.
#[test]
fn sync_send_acknowledgements_are_sound_in_any_completion_order() {
    let l = layout();
    const CTX: u32 = 9;
    let (me, peer) = (0u32, 1u32);
    for seed in 1..=100u64 {
        let mut rng = Rng(seed | 1);
        let mut sender = FakeTagged::new();
        let mut receiver = FakeTagged::new();
        // Sender: 10 synchronous sends, tags 0 or 1; ack receive ids = send index.
        let tags: Vec<i32> = (0..10).map(|_| rng.next(2) as i32).collect();
        for (i, &t) in tags.iter().enumerate() {
            let e = env(CTX, me, t);
            sender.recv(i as u64, Some(peer), l.ack_recv(&e, peer).unwrap(), 0);
            let data = (i as u64).to_le_bytes();
            receiver.arrive(me, l.send(&e, true).unwrap(), &data);
        }
        // Receiver: any-tag receives, some now, some after a first batch of acks.
        for r in 0..5 {
            receiver.recv(r, Some(me), l.recv(CTX, Some(me), None).unwrap(), 8);
        }
        let mut matched = receiver.matches.len();
        let mut acked = 0;
        for round in 0..2 {
            for c in receiver.completions(seed + round) {
                let end = RecvEnd::read(&l, c.cq);
                let (got, to) = end.ack_owed().expect("a sync send is acknowledged");
                assert_eq!(to, me);
                sender.arrive(peer, l.ack_send(&got, peer).unwrap(), &[]);
                acked += 1;
                // Every ack completion so far: ack receive k of a tag means the k-th
                // send of that tag matched at the receiver.
                let acks: Vec<u64> = sender.completions(0).iter().map(|c| c.id).collect();
                for id in acks {
                    let t = tags[id as usize];
                    let nth = tags[..=id as usize].iter().filter(|&&x| x == t).count();
                    let matched_of_tag = receiver.matches[..matched]
                        .iter()
                        .filter(|m| tags[m.2 as usize] == t)
                        .count();
                    assert!(
                        matched_of_tag >= nth,
                        "seed {seed}: send {id} acked before it matched"
                    );
                }
            }
            for r in 5..10 {
                receiver.recv(r, Some(me), l.recv(CTX, Some(me), None).unwrap(), 8);
            }
            matched = receiver.matches.len();
        }
        assert_eq!(acked, 10);
        assert_eq!(sender.posted(), 0, "every ack receive completed");
        let order: Vec<u64> = receiver.matches.iter().map(|m| m.2).collect();
        assert_eq!(order, (0..10).collect::<Vec<_>>(), "matched in send order");
    }
}

/// Probe is a peek (the message stays for any receive); mprobe a peek with `FI_CLAIM`
/// (the message is hidden from every other receive, and the claimed receive takes
/// exactly it); a receive cancelled before it matched ends cancelled, one that matched
/// is not cancelled; a message larger than the buffer is truncated, the next one intact.
#[test]
fn probe_mprobe_cancel_and_truncation_on_the_provider() {
    let l = layout();
    let mut ep = FakeTagged::new();
    let from = 2;
    let data = |i: u64, n: usize| {
        let mut d = i.to_le_bytes().to_vec();
        d.resize(n, 0xee);
        d
    };
    ep.arrive(
        from,
        l.send(&env(1, from, 4), false).unwrap(),
        &data(0, 100),
    );
    ep.arrive(from, l.send(&env(1, from, 5), false).unwrap(), &data(1, 10));
    let any = l.recv(1, None, None).unwrap();
    // Probe: the first message, twice (nothing taken).
    for _ in 0..2 {
        let p = ep.peek(None, any, None).unwrap();
        assert_eq!((l.decode(p.bits).env.tag, p.len, p.from), (4, 100, from));
    }
    assert!(
        ep.peek(None, l.recv(2, None, None).unwrap(), None)
            .is_none(),
        "other comm"
    );
    // Mprobe claims the first; a wild receive then takes the second.
    let p = ep.peek(Some(from), any, Some(77)).unwrap();
    assert_eq!(p.len, 100);
    ep.recv(10, None, any, 64);
    let c = ep.completions(0);
    assert_eq!(c.len(), 1);
    assert_eq!(
        l.decode(c[0].cq_tag()).env.tag,
        5,
        "the claimed message is not taken"
    );
    // Mrecv into a 32-byte buffer: truncated, 32 of 100 bytes.
    assert!(ep.claimed_recv(11, 77, 32));
    assert!(!ep.claimed_recv(12, 77, 32), "a claim is taken once");
    let c = ep.completions(0);
    let end = RecvEnd::read(&l, c[0].cq);
    assert!(matches!(
        end,
        RecvEnd::Truncated {
            count: 32,
            len: 100,
            ..
        }
    ));
    assert_eq!(c[0].data, data(0, 32));
    // Cancel: a posted receive ends cancelled; a matched one is not cancelled.
    ep.recv(20, None, any, 64);
    assert!(ep.cancel(20));
    let c = ep.completions(0);
    assert!(RecvEnd::read(&l, c[0].cq).status(|_| false).cancelled);
    ep.arrive(from, l.send(&env(1, from, 6), false).unwrap(), &data(2, 8));
    ep.recv(21, None, any, 64);
    assert!(!ep.cancel(21), "matched at once: too late to cancel");
    assert!(
        !RecvEnd::read(&l, ep.completions(0)[0].cq)
            .status(|_| false)
            .cancelled
    );
    assert_eq!((ep.posted(), ep.unexpected()), (0, 0));
}

impl Completion {
    /// The tag of a successful completion (tests only).
    fn cq_tag(&self) -> u64 {
        match self.cq {
            Cq::Ok { tag, .. } | Cq::Err { tag, .. } => tag,
        }
    }
}

fn offer(prov: &str, software: bool) -> Offer {
    Offer {
        prov: prov.into(),
        software,
        tagged: true,
        directed: true,
        ordered: true,
        tag_bits: 64,
    }
}

#[test]
fn the_offload_runs_on_hardware_or_when_asked() {
    let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(Asked::from_list(false, &[]), Asked::Open);
    assert_eq!(Asked::from_list(false, &names(&["cm"])), Asked::Cm);
    assert_eq!(Asked::from_list(false, &names(&["ox"])), Asked::Ox);
    assert_eq!(Asked::from_list(false, &names(&["ox", "cm"])), Asked::Open);
    assert_eq!(Asked::from_list(true, &names(&["cm"])), Asked::Ox);
    assert_eq!(Asked::from_list(true, &names(&["ox"])), Asked::Cm);
    assert_eq!(Asked::from_list(true, &names(&["self"])), Asked::Open);
    let verbs = offer("verbs;ofi_rxm", false);
    let tcp = offer("tcp;ofi_rxm", true);
    let is_cm = |r: Result<(Pml, String), String>| matches!(r.unwrap().0, Pml::Cm { .. });
    // Open: hardware yes, software no, none no.
    assert!(is_cm(choose(Asked::Open, Ok(&verbs), 64, 16)));
    let (p, why) = choose(Asked::Open, Ok(&tcp), 64, 16).unwrap();
    assert_eq!(p, Pml::Ox);
    assert!(why.contains("software"), "{why}");
    assert_eq!(
        choose(Asked::Open, Err("no libfabric"), 64, 16).unwrap().0,
        Pml::Ox
    );
    // Asked for: any provider that can carry it; else one line.
    assert!(is_cm(choose(Asked::Cm, Ok(&tcp), 64, 16)));
    assert_eq!(
        choose(Asked::Cm, Err("no libfabric"), 2, 16).unwrap_err(),
        "pml cm: no libfabric"
    );
    let untagged = Offer {
        tagged: false,
        ..verbs.clone()
    };
    assert_eq!(
        choose(Asked::Cm, Ok(&untagged), 2, 16).unwrap_err(),
        "pml cm: provider verbs;ofi_rxm has no tagged messages (FI_TAGGED)"
    );
    assert_eq!(
        choose(Asked::Open, Ok(&untagged), 2, 16).unwrap().0,
        Pml::Ox
    );
    let unordered = Offer {
        ordered: false,
        ..verbs.clone()
    };
    assert!(choose(Asked::Cm, Ok(&unordered), 2, 16)
        .unwrap_err()
        .contains("FI_ORDER_SAS"));
    let narrow = Offer {
        tag_bits: 56,
        ..verbs.clone()
    };
    assert!(choose(Asked::Cm, Ok(&narrow), 2, 16)
        .unwrap_err()
        .contains("56 tag bits"));
    assert!(is_cm(choose(Asked::Cm, Ok(&narrow), 2, 8)));
    // Without FI_DIRECTED_RECV the source still matches, through the tag.
    let undirected = Offer {
        directed: false,
        ..verbs.clone()
    };
    match choose(Asked::Cm, Ok(&undirected), 2, 16).unwrap().0 {
        Pml::Cm { directed, layout } => {
            assert!(!directed);
            assert!(!layout
                .recv(0, Some(1), None)
                .unwrap()
                .matches(layout.send(&env(0, 0, 0), false).unwrap()));
        }
        Pml::Ox => panic!("cm expected"),
    }
    assert_eq!(choose(Asked::Ox, Ok(&verbs), 2, 16).unwrap().0, Pml::Ox);
    // shm's wildcard receives take a sender's messages out of order: refused, one line.
    assert_eq!(
        choose(Asked::Cm, Ok(&offer("shm", true)), 3, 16).unwrap_err(),
        "pml cm: provider shm matches wildcard receives (MPI_ANY_SOURCE, MPI_ANY_TAG) out of \
         send order; use it with pml ox (--mca btl self,ofi)"
    );
}

/// A receive into a bounce buffer that got more bytes than the user's buffer holds is
/// read as the truncation it is; rxm and rxd receive short messages that way.
#[test]
fn a_completion_longer_than_the_buffer_is_a_truncation() {
    let ok = Cq::Ok { tag: 7, len: 40 };
    assert_eq!(
        ok.capped(16),
        Cq::Err {
            errno: FI_ETRUNC,
            tag: 7,
            len: 16,
            olen: 24
        }
    );
    assert_eq!(ok.capped(40), ok);
    assert_eq!(bounce_below("tcp;ofi_rxm"), BOUNCE);
    assert_eq!(bounce_below("udp;ofi_rxd"), BOUNCE);
    assert_eq!(bounce_below("shm"), 0);
    assert_eq!(bounce_below("cxi"), 0);
    assert!(spill_byte("udp;ofi_rxd"));
    assert!(!spill_byte("tcp;ofi_rxm") && !spill_byte("shm") && !spill_byte("cxi"));
    // Only rxd's messages longer than one packet (inject size less headers) go as a
    // rendezvous.
    assert_eq!(rendezvous_above("udp;ofi_rxd", 1256), Some(1192));
    assert_eq!(rendezvous_above("tcp;ofi_rxm", 64), None);
    assert_eq!(rendezvous_above("shm", 4096), None);
    assert_eq!(ok.capped(64), ok);
    let err = Cq::Err {
        errno: FI_ECANCELED,
        tag: 0,
        len: 0,
        olen: 0,
    };
    assert_eq!(err.capped(0), err);
    // A message longer than the 16 KiB bounce buffer of a 1000-byte receive: the provider
    // truncates at the bounce buffer, the user's buffer holds 1000 bytes of 100000.
    let past = Cq::Err {
        errno: FI_ETRUNC,
        tag: 9,
        len: BOUNCE,
        olen: 100_000 - BOUNCE,
    };
    assert_eq!(
        past.capped(1000),
        Cq::Err {
            errno: FI_ETRUNC,
            tag: 9,
            len: 1000,
            olen: 99_000
        }
    );
    assert_eq!(past.capped(BOUNCE), past);
}
