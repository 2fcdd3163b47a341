//! Sans-IO MPI message matching.
//!
//! [`Matcher`] keeps, per communicator context id, the queue of posted receives and the queue
//! of unexpected messages, and applies the MPI matching rules:
//!
//! * a receive `(src, tag)` matches a message whose envelope has the same context, and whose
//!   source and tag are equal to the receive's or the receive uses [`ANY_SOURCE`] /
//!   [`ANY_TAG`];
//! * an arriving message goes to the *earliest posted* matching receive;
//! * a posted receive takes the *earliest arrived* matching unexpected message, so messages
//!   from one source on one context are never overtaken (the transport delivers them in
//!   send order);
//! * a posted receive and an unexpected message that match each other never coexist.
//!
//! It does no I/O: the engine feeds it arrivals and posted receives and acts on the results.
//! Internally, receives with a specific source and unexpected messages are binned per source;
//! global sequence numbers decide between a source's bin and the wildcard list.

use std::collections::{HashMap as StdHashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use crate::{ANY_SOURCE, ANY_TAG, TAG_MARK};

/// A fast, non-cryptographic hasher for small integer keys (ranks, context ids, request
/// ids); the engine's maps are keyed by values the local process or its job chose.
#[derive(Default, Clone, Copy, Debug)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64);
    }
    fn write_i32(&mut self, n: i32) {
        self.write_u64(n as u32 as u64);
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// `HashMap` with [`IntHasher`].
pub type HashMap<K, V> = StdHashMap<K, V, BuildHasherDefault<IntHasher>>;

/// The matching-relevant part of a message: context id, source rank in the communicator, tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Envelope {
    /// Communicator context id.
    pub ctx: u32,
    /// Source rank within the communicator (never a wildcard).
    pub src: i32,
    /// Message tag (never a wildcard, always `>= 0`).
    pub tag: i32,
}

#[derive(Debug)]
struct Posted<R> {
    seq: u64,
    src: i32,
    tag: i32,
    req: R,
}

#[derive(Debug)]
struct Unexpected<M> {
    seq: u64,
    tag: i32,
    msg: M,
}

/// Per-source queues, indexed directly by the source rank (ranks are small and dense; a
/// queue that never held anything costs no allocation).
#[derive(Debug)]
struct Bins<T>(Vec<VecDeque<T>>);

impl<T> Default for Bins<T> {
    fn default() -> Self {
        Bins(Vec::new())
    }
}

impl<T> Bins<T> {
    #[inline]
    fn get(&self, src: i32) -> Option<&VecDeque<T>> {
        self.0.get(usize::try_from(src).ok()?)
    }
    #[inline]
    fn get_mut(&mut self, src: i32) -> Option<&mut VecDeque<T>> {
        self.0.get_mut(usize::try_from(src).ok()?)
    }
    /// The queue of `src` (>= 0), created if needed.
    #[inline]
    fn entry(&mut self, src: i32) -> &mut VecDeque<T> {
        let i = usize::try_from(src).expect("source rank of a bin is never negative");
        if i >= self.0.len() {
            self.0.resize_with(i + 1, VecDeque::new);
        }
        &mut self.0[i]
    }
    /// Non-empty queues with their source.
    fn iter(&self) -> impl Iterator<Item = (i32, &VecDeque<T>)> {
        self.0
            .iter()
            .enumerate()
            .filter(|(_, q)| !q.is_empty())
            .map(|(i, q)| (i as i32, q))
    }
    fn values(&self) -> impl Iterator<Item = &VecDeque<T>> {
        self.0.iter()
    }
    fn values_mut(&mut self) -> impl Iterator<Item = &mut VecDeque<T>> {
        self.0.iter_mut()
    }
}

#[derive(Debug)]
struct CtxQueues<R, M> {
    posted_src: Bins<Posted<R>>,
    posted_any: VecDeque<Posted<R>>,
    unexpected: Bins<Unexpected<M>>,
    /// Number of queued unexpected messages (all bins), so a post skips the search when
    /// there are none (the common case).
    n_unexpected: usize,
}

impl<R, M> Default for CtxQueues<R, M> {
    fn default() -> Self {
        CtxQueues {
            posted_src: Bins::default(),
            posted_any: VecDeque::new(),
            unexpected: Bins::default(),
            n_unexpected: 0,
        }
    }
}

impl<R, M> CtxQueues<R, M> {
    /// The earliest unexpected message matching `(src, tag)`: its source bin and index.
    fn find_unexpected(&self, src: i32, tag: i32) -> Option<(i32, usize)> {
        if self.n_unexpected == 0 {
            return None;
        }
        if src == ANY_SOURCE {
            let mut best: Option<(u64, i32, usize)> = None;
            for (s, bin) in self.unexpected.iter() {
                if let Some(i) = bin.iter().position(|u| tag_matches(tag, u.tag)) {
                    let seq = bin[i].seq;
                    if best.is_none_or(|(b, _, _)| seq < b) {
                        best = Some((seq, s, i));
                    }
                }
            }
            best.map(|(_, s, i)| (s, i))
        } else {
            let bin = self.unexpected.get(src)?;
            // The oldest message usually matches.
            if tag_matches(tag, bin.front()?.tag) {
                return Some((src, 0));
            }
            bin.iter()
                .position(|u| tag_matches(tag, u.tag))
                .map(|i| (src, i))
        }
    }

    /// Removes the unexpected message at `(s, i)` (as found by `find_unexpected`).
    fn remove_unexpected(&mut self, s: i32, i: usize) -> Option<Unexpected<M>> {
        let u = take_at(self.unexpected.get_mut(s)?, i)?;
        self.n_unexpected -= 1;
        Some(u)
    }
}

/// Removes element `i`; the front (the usual case: the oldest entry matches) without the
/// general `VecDeque::remove` shuffling.
#[inline]
fn take_at<T>(q: &mut VecDeque<T>, i: usize) -> Option<T> {
    if i == 0 {
        q.pop_front()
    } else {
        q.remove(i)
    }
}

/// A message of tag `have` (with or without [`TAG_MARK`]) for a receive of `want`.
#[inline]
fn tag_matches(want: i32, have: i32) -> bool {
    want == ANY_TAG || want == have & !TAG_MARK
}

/// Context ids below this are kept in a vector indexed by the id (world, self and the
/// first communicators: the common case, without hashing); larger ones in a hash map.
const DENSE_CTX: u32 = 256;

/// Per-context values: dense ids in a vector, the rest in a hash map.
#[derive(Debug)]
struct Ctxs<Q> {
    dense: Vec<Option<Q>>,
    sparse: HashMap<u32, Q>,
}

impl<Q> Default for Ctxs<Q> {
    fn default() -> Self {
        Ctxs {
            dense: Vec::new(),
            sparse: HashMap::default(),
        }
    }
}

impl<Q: Default> Ctxs<Q> {
    #[inline]
    fn get(&self, ctx: u32) -> Option<&Q> {
        if ctx < DENSE_CTX {
            self.dense.get(ctx as usize)?.as_ref()
        } else {
            self.sparse.get(&ctx)
        }
    }
    #[inline]
    fn get_mut(&mut self, ctx: u32) -> Option<&mut Q> {
        if ctx < DENSE_CTX {
            self.dense.get_mut(ctx as usize)?.as_mut()
        } else {
            self.sparse.get_mut(&ctx)
        }
    }
    /// The value of `ctx`, created if needed.
    #[inline]
    fn entry(&mut self, ctx: u32) -> &mut Q {
        if ctx < DENSE_CTX {
            let i = ctx as usize;
            if i >= self.dense.len() {
                self.dense.resize_with(i + 1, || None);
            }
            self.dense[i].get_or_insert_with(Q::default)
        } else {
            self.sparse.entry(ctx).or_default()
        }
    }
    fn iter_mut(&mut self) -> impl Iterator<Item = (u32, &mut Q)> {
        let dense = self
            .dense
            .iter_mut()
            .enumerate()
            .filter_map(|(i, q)| q.as_mut().map(|q| (i as u32, q)));
        dense.chain(self.sparse.iter_mut().map(|(&c, q)| (c, q)))
    }
    fn values(&self) -> impl Iterator<Item = &Q> {
        self.dense.iter().flatten().chain(self.sparse.values())
    }
}

/// The matcher's queue statistics ([`Matcher::stats`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MatchStats {
    /// Unexpected messages queued now.
    pub unexpected: u64,
    /// Most unexpected messages queued at once.
    pub unexpected_hwm: u64,
    /// Arrivals matched against the posted receives.
    pub arrivals: u64,
    /// Posted receives inspected by those arrivals (the search depth, summed).
    pub posted_searched: u64,
}

/// Posted-receive and unexpected-message queues for all contexts.
///
/// `R` identifies a posted receive (the engine uses its request id), `M` is the engine's
/// handle for an unexpected message (buffered eager data, a rendezvous request, ...).
#[derive(Debug)]
pub struct Matcher<R, M> {
    ctxs: Ctxs<CtxQueues<R, M>>,
    seq: u64,
    /// Unexpected messages queued on all contexts.
    n_unexpected: usize,
    /// Queue statistics (plain counters: the matcher is always behind its owner's lock).
    stats: MatchStats,
}

impl<R, M> Default for Matcher<R, M> {
    fn default() -> Self {
        Matcher {
            ctxs: Ctxs::default(),
            seq: 0,
            n_unexpected: 0,
            stats: MatchStats::default(),
        }
    }
}

impl<R: PartialEq, M> Matcher<R, M> {
    /// An empty matcher.
    pub fn new() -> Self {
        Self::default()
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Finds the earliest unexpected message on `ctx` matching `(src, tag)`; returns its source
    /// bin and index in that bin.
    fn find_unexpected(&self, ctx: u32, src: i32, tag: i32) -> Option<(i32, usize)> {
        self.ctxs.get(ctx)?.find_unexpected(src, tag)
    }

    /// Posts a receive. If an unexpected message matches, it is removed and returned with its
    /// envelope (the receive is then *not* queued); otherwise the receive is queued and `None`
    /// is returned.
    pub fn post(&mut self, ctx: u32, src: i32, tag: i32, req: R) -> Option<(Envelope, M)> {
        self.seq += 1;
        let seq = self.seq;
        let q = self.ctxs.entry(ctx);
        let found = if self.n_unexpected == 0 {
            None
        } else {
            q.find_unexpected(src, tag)
        };
        if let Some((s, i)) = found {
            let u = q.remove_unexpected(s, i)?;
            self.n_unexpected -= 1;
            return Some((
                Envelope {
                    ctx,
                    src: s,
                    tag: u.tag,
                },
                u.msg,
            ));
        }
        let p = Posted { seq, src, tag, req };
        if src == ANY_SOURCE {
            q.posted_any.push_back(p);
        } else {
            q.posted_src.entry(src).push_back(p);
        }
        None
    }

    /// Removes and returns the posted receive that an arriving message with envelope `env`
    /// matches, if any. When `None` is returned the caller must store the message with
    /// [`Matcher::push_unexpected`] before handling any other arrival or post on this context.
    pub fn match_arrival(&mut self, env: Envelope) -> Option<R> {
        self.stats.arrivals += 1;
        let q = self.ctxs.get_mut(env.ctx)?;
        // The common case: no wildcard receive posted and the oldest receive posted for the
        // source matches (what the general search below finds first, without its steps).
        if q.posted_any.is_empty() {
            let bin = q.posted_src.get_mut(env.src)?;
            if bin.front().is_some_and(|p| tag_matches(p.tag, env.tag)) {
                self.stats.posted_searched += 1;
                return bin.pop_front().map(|p| p.req);
            }
        }
        let wild = if q.posted_any.is_empty() {
            None
        } else {
            let w = q
                .posted_any
                .iter()
                .position(|p| tag_matches(p.tag, env.tag));
            self.stats.posted_searched += w.map_or(q.posted_any.len(), |j| j + 1) as u64;
            w
        };
        // Empty bins are kept (one per source at most) so that the next post does not
        // allocate again.
        if let Some(bin) = q.posted_src.get_mut(env.src).filter(|b| !b.is_empty()) {
            let first = tag_matches(bin[0].tag, env.tag);
            let found = if first {
                Some(0)
            } else {
                bin.iter().position(|p| tag_matches(p.tag, env.tag))
            };
            self.stats.posted_searched += found.map_or(bin.len(), |i| i + 1) as u64;
            if let Some(i) = found {
                let take_specific = wild.is_none_or(|j| bin[i].seq < q.posted_any[j].seq);
                if take_specific {
                    return take_at(bin, i).map(|p| p.req);
                }
            }
        }
        take_at(&mut q.posted_any, wild?).map(|p| p.req)
    }

    /// `true` if nothing queued on `ctx` involves source `src` (>= 0): no unexpected message
    /// from it, no posted receive for it and no posted `ANY_SOURCE` receive. Then a receive
    /// `(src, tag)` posted now would be the earliest posted receive for every message from
    /// `src` it matches, and no queued message from `src` precedes them.
    #[inline(always)]
    pub fn quiet_for(&self, ctx: u32, src: i32) -> bool {
        let Some(q) = self.ctxs.get(ctx) else {
            return true;
        };
        q.posted_any.is_empty()
            && q.posted_src.get(src).is_none_or(VecDeque::is_empty)
            && (q.n_unexpected == 0 || q.unexpected.get(src).is_none_or(VecDeque::is_empty))
    }

    /// `true` if nothing is queued on `ctx`: no posted receive, no unexpected message.
    pub fn idle_on(&self, ctx: u32) -> bool {
        self.ctxs.get(ctx).is_none_or(|q| {
            q.posted_any.is_empty()
                && q.n_unexpected == 0
                && q.posted_src.values().all(VecDeque::is_empty)
        })
    }

    /// Queues a message that matched no posted receive.
    pub fn push_unexpected(&mut self, env: Envelope, msg: M) {
        let seq = self.next_seq();
        self.n_unexpected += 1;
        self.stats.unexpected_hwm = self.stats.unexpected_hwm.max(self.n_unexpected as u64);
        let q = self.ctxs.entry(env.ctx);
        q.n_unexpected += 1;
        q.unexpected.entry(env.src).push_back(Unexpected {
            seq,
            tag: env.tag,
            msg,
        });
    }

    /// Like `MPI_Iprobe`: the envelope and message that a receive `(src, tag)` on `ctx` would
    /// take now, without removing it.
    pub fn probe(&self, ctx: u32, src: i32, tag: i32) -> Option<(Envelope, &M)> {
        let (s, i) = self.find_unexpected(ctx, src, tag)?;
        let u = &self.ctxs.get(ctx)?.unexpected.get(s)?[i];
        Some((
            Envelope {
                ctx,
                src: s,
                tag: u.tag,
            },
            &u.msg,
        ))
    }

    /// Like `MPI_Improbe`: removes and returns the message a receive `(src, tag)` would take.
    pub fn take_unexpected(&mut self, ctx: u32, src: i32, tag: i32) -> Option<(Envelope, M)> {
        let q = self.ctxs.get_mut(ctx)?;
        let (s, i) = q.find_unexpected(src, tag)?;
        let u = q.remove_unexpected(s, i)?;
        self.n_unexpected -= 1;
        Some((
            Envelope {
                ctx,
                src: s,
                tag: u.tag,
            },
            u.msg,
        ))
    }

    /// Cancels a posted receive (`src` as it was posted). Returns `true` if it was still
    /// queued (it is then removed), `false` if it had already matched or is unknown.
    pub fn cancel(&mut self, ctx: u32, src: i32, req: &R) -> bool {
        let Some(q) = self.ctxs.get_mut(ctx) else {
            return false;
        };
        let bin = if src == ANY_SOURCE {
            &mut q.posted_any
        } else {
            match q.posted_src.get_mut(src) {
                Some(b) => b,
                None => return false,
            }
        };
        match bin.iter().position(|p| &p.req == req) {
            Some(i) => {
                bin.remove(i);
                true
            }
            None => false,
        }
    }

    /// Removes every posted receive for which `pred(ctx, src_as_posted, &req)` holds and
    /// returns them (used to fail receives from a dead peer).
    pub fn remove_posted_where(&mut self, mut pred: impl FnMut(u32, i32, &R) -> bool) -> Vec<R> {
        let mut out = Vec::new();
        for (ctx, q) in self.ctxs.iter_mut() {
            let mut taken: Vec<Posted<R>> = Vec::new();
            for bin in q
                .posted_src
                .values_mut()
                .chain(std::iter::once(&mut q.posted_any))
            {
                let mut keep = VecDeque::with_capacity(bin.len());
                for p in bin.drain(..) {
                    if pred(ctx, p.src, &p.req) {
                        taken.push(p);
                    } else {
                        keep.push_back(p);
                    }
                }
                *bin = keep;
            }
            taken.sort_by_key(|p| p.seq);
            out.extend(taken.into_iter().map(|p| p.req));
        }
        out
    }

    /// The queue statistics: unexpected messages now and at most, arrivals and the posted
    /// receives they inspected.
    pub fn stats(&self) -> MatchStats {
        MatchStats {
            unexpected: self.n_unexpected as u64,
            ..self.stats
        }
    }

    /// Whether any unexpected message is queued (on any context): when not, a receive
    /// posted now cannot match at once.
    #[inline]
    pub fn has_unexpected(&self) -> bool {
        self.n_unexpected != 0
    }

    /// Number of queued posted receives and unexpected messages (for diagnostics and tests).
    pub fn queued(&self) -> (usize, usize) {
        self.ctxs.values().fold((0, 0), |(p, u), q| {
            (
                p + q.posted_any.len() + q.posted_src.values().map(VecDeque::len).sum::<usize>(),
                u + q.unexpected.values().map(VecDeque::len).sum::<usize>(),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn env(ctx: u32, src: i32, tag: i32) -> Envelope {
        Envelope { ctx, src, tag }
    }

    #[test]
    fn stats_count_queue_depths() {
        let mut m: Matcher<u32, u32> = Matcher::new();
        m.post(0, 1, 5, 10);
        m.post(0, 1, 6, 11);
        assert_eq!(m.match_arrival(env(0, 1, 6)), Some(11));
        m.push_unexpected(env(0, 2, 1), 20);
        m.push_unexpected(env(0, 2, 2), 21);
        assert!(m.post(0, 2, 1, 12).is_some());
        let s = m.stats();
        assert_eq!((s.arrivals, s.posted_searched), (1, 2));
        assert_eq!((s.unexpected, s.unexpected_hwm), (1, 2));
    }

    #[test]
    fn quiet_for_sees_everything_queued_for_a_source() {
        let mut m: Matcher<u32, u32> = Matcher::new();
        assert!(m.quiet_for(0, 1));
        // An unexpected message from 1 (not from 2), on context 0 only.
        assert_eq!(arrive(&mut m, env(0, 1, 5), 10), None);
        assert!(!m.quiet_for(0, 1));
        assert!(m.quiet_for(0, 2) && m.quiet_for(3, 1));
        assert_eq!(m.post(0, 1, ANY_TAG, 1), Some((env(0, 1, 5), 10)));
        assert!(m.quiet_for(0, 1));
        // A posted receive for 1; then an ANY_SOURCE one concerns every source.
        assert_eq!(m.post(0, 1, 7, 2), None);
        assert!(!m.quiet_for(0, 1) && m.quiet_for(0, 2));
        assert!(m.cancel(0, 1, &2));
        assert_eq!(m.post(0, ANY_SOURCE, 7, 3), None);
        assert!(!m.quiet_for(0, 1) && !m.quiet_for(0, 2) && m.quiet_for(1, 2));
        assert_eq!(m.match_arrival(env(0, 2, 7)), Some(3));
        assert!(m.quiet_for(0, 1) && m.quiet_for(0, 2));
    }

    /// Arrival helper: match or queue.
    fn arrive(m: &mut Matcher<u32, u32>, e: Envelope, msg: u32) -> Option<u32> {
        match m.match_arrival(e) {
            Some(r) => Some(r),
            None => {
                m.push_unexpected(e, msg);
                None
            }
        }
    }

    /// A marked message ([`TAG_MARK`]) is one of its tag without the mark: it matches a
    /// receive of that tag (posted before or after it arrived) and a wildcard, no other
    /// tag, and keeps its order among its source's messages.
    #[test]
    fn marked_messages_match_their_tag() {
        let mut m: Matcher<u32, u32> = Matcher::new();
        assert_eq!(m.post(0, 1, 5, 1), None);
        assert_eq!(m.post(0, ANY_SOURCE, 6, 2), None);
        assert_eq!(arrive(&mut m, env(0, 1, 6 | TAG_MARK), 100), Some(2));
        assert_eq!(arrive(&mut m, env(0, 1, 5 | TAG_MARK), 101), Some(1));
        assert_eq!(arrive(&mut m, env(0, 1, 7 | TAG_MARK), 102), None);
        assert_eq!(arrive(&mut m, env(0, 1, 5), 103), None);
        assert_eq!(m.post(0, 1, 5, 3), Some((env(0, 1, 5), 103)));
        assert_eq!(m.post(0, 1, 8, 4), None);
        assert_eq!(
            m.post(0, 1, ANY_TAG, 5),
            Some((env(0, 1, 7 | TAG_MARK), 102))
        );
        assert_eq!(m.queued(), (1, 0));
    }

    #[test]
    fn non_overtaking_and_wildcards() {
        let mut m: Matcher<u32, u32> = Matcher::new();
        assert_eq!(arrive(&mut m, env(0, 1, 5), 100), None);
        assert_eq!(arrive(&mut m, env(0, 1, 5), 101), None);
        assert_eq!(arrive(&mut m, env(0, 2, 7), 102), None);
        // Wildcard source and tag takes the earliest arrival.
        assert_eq!(m.post(0, ANY_SOURCE, ANY_TAG, 1), Some((env(0, 1, 5), 100)));
        // Specific tag skips the earlier non-matching one.
        assert_eq!(m.post(0, ANY_SOURCE, 7, 2), Some((env(0, 2, 7), 102)));
        assert_eq!(m.post(0, 1, ANY_TAG, 3), Some((env(0, 1, 5), 101)));
        // Other contexts are separate.
        assert_eq!(m.post(1, 1, 5, 4), None);
        assert_eq!(arrive(&mut m, env(0, 1, 5), 103), None);
        assert_eq!(arrive(&mut m, env(1, 1, 5), 104), Some(4));
        assert_eq!(m.queued(), (0, 1));
    }

    #[test]
    fn earliest_posted_wins_between_specific_and_wildcard() {
        let mut m: Matcher<u32, u32> = Matcher::new();
        assert_eq!(m.post(0, ANY_SOURCE, 3, 1), None);
        assert_eq!(m.post(0, 2, 3, 2), None);
        assert_eq!(arrive(&mut m, env(0, 2, 3), 9), Some(1));
        assert_eq!(arrive(&mut m, env(0, 2, 3), 9), Some(2));
        assert_eq!(m.post(0, 2, 3, 3), None);
        assert_eq!(m.post(0, ANY_SOURCE, ANY_TAG, 4), None);
        assert_eq!(arrive(&mut m, env(0, 2, 3), 9), Some(3));
        assert_eq!(arrive(&mut m, env(0, 2, 3), 9), Some(4));
    }

    #[test]
    fn cancel_and_probe() {
        let mut m: Matcher<u32, u32> = Matcher::new();
        assert_eq!(m.post(0, 1, 1, 1), None);
        assert!(m.cancel(0, 1, &1));
        assert!(!m.cancel(0, 1, &1));
        assert_eq!(arrive(&mut m, env(0, 1, 1), 50), None);
        assert_eq!(
            m.probe(0, ANY_SOURCE, 1).map(|(e, &x)| (e, x)),
            Some((env(0, 1, 1), 50))
        );
        assert_eq!(m.probe(0, 2, ANY_TAG), None);
        assert_eq!(m.take_unexpected(0, 1, ANY_TAG), Some((env(0, 1, 1), 50)));
        assert_eq!(m.probe(0, 1, 1), None);
        assert_eq!(m.post(0, 3, 0, 7), None);
        assert_eq!(m.post(0, ANY_SOURCE, 0, 8), None);
        assert_eq!(m.post(0, 4, 0, 9), None);
        assert_eq!(
            m.remove_posted_where(|_, s, _| s == 3 || s == ANY_SOURCE),
            vec![7, 8]
        );
        assert_eq!(m.queued(), (1, 0));
    }

    // ---- property test against a flat reference model ----

    #[derive(Clone, Debug)]
    enum Op {
        Post { ctx: u32, src: i32, tag: i32 },
        Arrive { ctx: u32, src: i32, tag: i32 },
        Probe { ctx: u32, src: i32, tag: i32 },
        MProbe { ctx: u32, src: i32, tag: i32 },
        Cancel { nth: usize },
    }

    fn wsrc() -> impl Strategy<Value = i32> {
        prop_oneof![1 => Just(ANY_SOURCE), 3 => 0..3i32]
    }
    fn wtag() -> impl Strategy<Value = i32> {
        prop_oneof![1 => Just(ANY_TAG), 3 => 0..3i32]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0..2u32, wsrc(), wtag()).prop_map(|(ctx, src, tag)| Op::Post { ctx, src, tag }),
            4 => (0..2u32, 0..3i32, 0..3i32).prop_map(|(ctx, src, tag)| Op::Arrive { ctx, src, tag }),
            1 => (0..2u32, wsrc(), wtag()).prop_map(|(ctx, src, tag)| Op::Probe { ctx, src, tag }),
            1 => (0..2u32, wsrc(), wtag()).prop_map(|(ctx, src, tag)| Op::MProbe { ctx, src, tag }),
            1 => (0..8usize).prop_map(|nth| Op::Cancel { nth }),
        ]
    }

    /// The MPI rules written as plainly as possible: one list of posted receives in post
    /// order, one list of unexpected messages in arrival order, first match wins.
    #[derive(Default)]
    struct Model {
        posted: Vec<(u32, i32, i32, u32)>,
        unexpected: Vec<(Envelope, u32)>,
    }

    fn compatible(ctx: u32, src: i32, tag: i32, e: &Envelope) -> bool {
        ctx == e.ctx && (src == ANY_SOURCE || src == e.src) && (tag == ANY_TAG || tag == e.tag)
    }

    impl Model {
        fn post(&mut self, ctx: u32, src: i32, tag: i32, id: u32) -> Option<(Envelope, u32)> {
            if let Some(i) = self
                .unexpected
                .iter()
                .position(|(e, _)| compatible(ctx, src, tag, e))
            {
                return Some(self.unexpected.remove(i));
            }
            self.posted.push((ctx, src, tag, id));
            None
        }
        fn arrive(&mut self, e: Envelope, msg: u32) -> Option<u32> {
            if let Some(i) = self
                .posted
                .iter()
                .position(|&(c, s, t, _)| compatible(c, s, t, &e))
            {
                return Some(self.posted.remove(i).3);
            }
            self.unexpected.push((e, msg));
            None
        }
        fn probe(&self, ctx: u32, src: i32, tag: i32) -> Option<(Envelope, u32)> {
            self.unexpected
                .iter()
                .find(|(e, _)| compatible(ctx, src, tag, e))
                .copied()
        }
        /// MPI progress rule: no queued receive matches a queued message.
        fn check_no_stuck_pair(&self) -> bool {
            !self
                .posted
                .iter()
                .any(|&(c, s, t, _)| self.unexpected.iter().any(|(e, _)| compatible(c, s, t, e)))
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn matches_reference_model(ops in proptest::collection::vec(op(), 1..120)) {
            let mut m: Matcher<u32, u32> = Matcher::new();
            let mut model = Model::default();
            let mut next_id = 0u32;
            for op in ops {
                next_id += 1;
                match op {
                    Op::Post { ctx, src, tag } => {
                        prop_assert_eq!(m.post(ctx, src, tag, next_id), model.post(ctx, src, tag, next_id));
                    }
                    Op::Arrive { ctx, src, tag } => {
                        let e = env(ctx, src, tag);
                        let got = arrive(&mut m, e, next_id);
                        prop_assert_eq!(got, model.arrive(e, next_id));
                    }
                    Op::Probe { ctx, src, tag } => {
                        prop_assert_eq!(m.probe(ctx, src, tag).map(|(e, &x)| (e, x)), model.probe(ctx, src, tag));
                    }
                    Op::MProbe { ctx, src, tag } => {
                        let want = model.probe(ctx, src, tag);
                        if let Some(w) = want {
                            let i = model.unexpected.iter().position(|u| *u == w).unwrap();
                            model.unexpected.remove(i);
                        }
                        prop_assert_eq!(m.take_unexpected(ctx, src, tag), want);
                    }
                    Op::Cancel { nth } => {
                        if !model.posted.is_empty() {
                            let (c, s, _, id) = model.posted.remove(nth % model.posted.len());
                            prop_assert!(m.cancel(c, s, &id));
                        }
                    }
                }
                prop_assert!(model.check_no_stuck_pair());
                prop_assert_eq!(m.queued(), (model.posted.len(), model.unexpected.len()));
                prop_assert_eq!(m.has_unexpected(), !model.unexpected.is_empty());
            }
        }
    }
}
