//! The context ids of a process's communicators: which are taken, what this process
//! proposes for a new communicator, and which pairs are free (sans-IO). The agreements
//! that use it are the C ABI's (`oxmpi-capi`: `comm::agree_ctx_span`,
//! `intercomm::Exchanged::agree_ctx`) and the Rust API's (`oxmpi`: `split.rs`), each over
//! its own `Ids` (a process uses one of the two).
//!
//! A communicator takes a pair of ids (its point-to-point and collective contexts), an
//! intercommunicator two pairs, from [`FIRST`] up, below a limit
//! (`Engine::user_context_limit`: what the transports carry, 8176 ids under `pml cm` with a
//! 14-bit context field). The cheap agreement takes the maximum of every member's
//! [`Ids::top`], the lowest id above all it holds, which is free at all of them. Freeing a
//! communicator returns its ids, so the top comes back down when communicators are freed
//! in the reverse order of their making (a library that dups and frees per call reuses the
//! same pair every time). Only when that maximum reaches the limit do the members AND
//! their [`Ids::free_mask`]s and take the lowest run free at all ([`pick`]), as MPICH
//! always does: fragmented ids are reused too, and creation fails with a clear error only
//! when no run is free at every member.
//!
//! What the layers keep per communicator lives and dies with the communicator, never
//! under its context id (a reused id would carry it over, counted differently at members
//! that had different communicators on it): the nonblocking collectives number their
//! schedules by the engine communicator's own sequence (`Engine::comm_next_seq`), and the
//! C ABI's `MPI_Comm_free` drops the ULFM record of the id.
//!
//! Ids of a freed communicator with operations still pending on them (`MPI_Comm_free`
//! lets them complete) are parked ([`Ids::park`]) and stay taken until the engine finds
//! them idle (`Engine::contexts_idle`; [`Ids::take_parked`], [`Ids::settle`]): a message
//! of the old communicator never matches a new one.

use std::collections::BTreeSet;

/// First context id handed out for user communicators (0/1: world/self, 2/3: their
/// collective contexts).
pub const FIRST: u32 = 4;

/// Context ids come in pairs (a communicator's own and its collective context): a mask
/// has one bit per pair.
pub const PAIR: u32 = 2;

/// The masks of the fallback agreement cover the ids below this at most (65536 pairs, an
/// 8 KiB mask): all of them under `pml cm`; the ids above it, only under the engine's
/// matching, are taken by the cheap agreement alone.
pub const MASK_LIMIT: u32 = FIRST + PAIR * (1 << 16);

/// The context ids of this process.
#[derive(Debug)]
pub struct Ids {
    /// Ids at or above [`FIRST`] in use (by live communicators, by creations that agreed
    /// on them or are checking an agreed value, by freed communicators not yet idle):
    /// several threads may create communicators at once, each over its own parent.
    taken: BTreeSet<u32>,
    /// Freed communicators' ids (first id and count) waiting for their pending operations.
    parked: Vec<(u32, u32)>,
}

impl Default for Ids {
    fn default() -> Self {
        Ids::new()
    }
}

impl Ids {
    /// No id taken.
    pub const fn new() -> Self {
        Ids {
            taken: BTreeSet::new(),
            parked: Vec::new(),
        }
    }

    /// The lowest id above every id taken here (a pair's first id): every id from it up
    /// is free here.
    pub fn top(&self) -> u32 {
        self.taken
            .last()
            .map_or(FIRST, |&t| (t + 1).next_multiple_of(PAIR).max(FIRST))
    }

    /// This process's proposal for a new communicator when the agreement already went
    /// past `floor`: the top, or `floor` if higher.
    pub fn propose(&self, floor: u32) -> u32 {
        self.top().max(floor)
    }

    /// Whether id `ctx` is taken here.
    #[cfg(test)]
    pub fn is_taken(&self, ctx: u32) -> bool {
        self.taken.contains(&ctx)
    }

    /// Number of ids taken here.
    pub fn count(&self) -> usize {
        self.taken.len()
    }

    /// Takes the `span` ids from `ctx` if they are all free here.
    pub fn reserve(&mut self, ctx: u32, span: u32) -> bool {
        if self.taken.range(ctx..ctx + span).next().is_some() {
            return false;
        }
        self.taken.extend(ctx..ctx + span);
        true
    }

    /// Takes the `span` ids from `ctx` whether or not they are free here (an agreement
    /// without a check, as the intercommunicators' is).
    pub fn take(&mut self, ctx: u32, span: u32) {
        self.taken.extend(ctx..ctx + span);
    }

    /// Returns the `span` ids from `ctx` (a reservation the other members could not make,
    /// or a freed communicator's idle ids).
    pub fn release(&mut self, ctx: u32, span: u32) {
        for c in ctx..ctx + span {
            self.taken.remove(&c);
        }
    }

    /// Keeps the `span` ids from `ctx` of a freed communicator taken until [`Ids::settle`]
    /// finds them idle.
    pub fn park(&mut self, ctx: u32, span: u32) {
        self.parked.push((ctx, span));
    }

    /// The parked ids, to ask the engine about (without this state's lock) and hand back
    /// to [`Ids::settle`]; empty (and cheap) in the common case.
    pub fn take_parked(&mut self) -> Vec<(u32, u32)> {
        std::mem::take(&mut self.parked)
    }

    /// Releases the parked ids found idle, parks the others again.
    pub fn settle(&mut self, checked: Vec<((u32, u32), bool)>) {
        for ((ctx, span), idle) in checked {
            if idle {
                self.release(ctx, span);
            } else {
                self.park(ctx, span);
            }
        }
    }

    /// The first of the lowest `span` free ids here (whole pairs from [`FIRST`]) at or
    /// above `floor` and below `limit`, if any: a member's proposal in an agreement by
    /// search, which needs no mask exchange (the largest proposal, if taken somewhere, is
    /// passed by a pair: no run starting below it is free at the member that proposed it).
    pub fn lowest_free(&self, floor: u32, span: u32, limit: u32) -> Option<u32> {
        let mut c = floor.max(FIRST).next_multiple_of(PAIR);
        loop {
            let end = c.checked_add(span).filter(|&e| e <= limit)?;
            match self.taken.range(c..end).next_back() {
                Some(&t) => c = (t + 1).next_multiple_of(PAIR),
                None => return Some(c),
            }
        }
    }

    /// One bit per pair of ids from [`FIRST`] below `limit`, in 64-bit words: set if both
    /// ids of the pair are free here and the pair starts at or above `floor`.
    pub fn free_mask(&self, floor: u32, limit: u32) -> Vec<u64> {
        let pairs = pairs_below(limit);
        let mut m = vec![0u64; pairs.div_ceil(64) as usize];
        for k in 0..pairs {
            let c = FIRST + PAIR * k;
            if c >= floor && self.taken.range(c..c + PAIR).next().is_none() {
                m[(k / 64) as usize] |= 1 << (k % 64);
            }
        }
        m
    }
}

/// ANDs the words of another member's mask ([`Ids::free_mask`]) into `acc`.
pub fn and_into(acc: &mut [u64], other: impl IntoIterator<Item = u64>) {
    for (a, w) in acc.iter_mut().zip(other) {
        *a &= w;
    }
}

/// Pairs of ids from [`FIRST`] below `limit`.
fn pairs_below(limit: u32) -> u32 {
    limit.saturating_sub(FIRST) / PAIR
}

/// The first id of the lowest `span` consecutive ids (whole pairs) whose pairs are all set
/// in `mask` ([`Ids::free_mask`] ANDed over the members), if any.
pub fn pick(mask: &[u64], span: u32) -> Option<u32> {
    let need = span.div_ceil(PAIR) as usize;
    let bit = |k: usize| mask.get(k / 64).is_some_and(|w| w >> (k % 64) & 1 == 1);
    let mut run = 0;
    for k in 0..64 * mask.len() {
        run = if bit(k) { run + 1 } else { 0 };
        if run == need {
            return Some(FIRST + PAIR * (k + 1 - need) as u32);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AND of the members' masks (what the agreement computes).
    fn and(ms: &[Vec<u64>]) -> Vec<u64> {
        let mut out = ms[0].clone();
        for m in &ms[1..] {
            and_into(&mut out, m.iter().copied());
        }
        out
    }

    #[test]
    fn freed_ids_bring_the_top_back_down() {
        let mut ids = Ids::new();
        assert_eq!(ids.top(), FIRST);
        for _ in 0..20_000 {
            let c = ids.propose(0);
            assert_eq!(c, FIRST, "a dup/free loop reuses the first pair");
            assert!(ids.reserve(c, 2));
            assert_eq!(ids.top(), FIRST + 2);
            ids.release(c, 2);
        }
        assert_eq!(ids.count(), 0);
        // A long-lived communicator below: the loop reuses the pair above it.
        assert!(ids.reserve(FIRST, 2));
        for _ in 0..3 {
            let c = ids.propose(0);
            assert_eq!(c, FIRST + 2);
            assert!(ids.reserve(c, 4));
            ids.release(c, 4);
        }
        // A floor (an earlier round found the agreed pair taken somewhere) is respected.
        assert_eq!(ids.propose(40), 40);
    }

    #[test]
    fn reservations_of_taken_ids_fail_and_leave_them_alone() {
        let mut ids = Ids::new();
        assert!(ids.reserve(8, 2));
        assert!(!ids.reserve(6, 4), "overlaps 8");
        assert!(!ids.reserve(9, 2));
        assert!(ids.is_taken(8) && ids.is_taken(9) && !ids.is_taken(6) && !ids.is_taken(7));
        assert_eq!(ids.top(), 10);
        assert!(ids.reserve(4, 4));
        assert_eq!(ids.count(), 6);
    }

    #[test]
    fn parked_ids_stay_taken_until_idle() {
        let mut ids = Ids::new();
        assert!(ids.reserve(4, 2));
        assert!(ids.reserve(6, 4));
        ids.park(4, 2);
        ids.park(6, 4);
        let p = ids.take_parked();
        assert_eq!(p, vec![(4, 2), (6, 4)]);
        // Still taken while the engine is being asked.
        assert_eq!(ids.top(), 10);
        ids.settle(vec![((4, 2), false), ((6, 4), true)]);
        assert_eq!(ids.top(), 6, "the intercommunicator's ids are back");
        assert!(ids.is_taken(4));
        let p = ids.take_parked();
        assert_eq!(p, vec![(4, 2)]);
        ids.settle(vec![((4, 2), true)]);
        assert_eq!((ids.count(), ids.top()), (0, FIRST));
        assert!(ids.take_parked().is_empty());
    }

    #[test]
    fn masks_find_the_lowest_pair_free_at_every_member() {
        let limit = FIRST + 2 * 200;
        let (mut a, mut b) = (Ids::new(), Ids::new());
        // a holds every other pair, b the others below 100 and pair 150.
        for k in 0..100 {
            let c = FIRST + 2 * k;
            if k % 2 == 0 {
                assert!(a.reserve(c, 2));
            } else {
                assert!(b.reserve(c, 2));
            }
        }
        assert!(b.reserve(FIRST + 300, 2));
        let (ma, mb) = (a.free_mask(0, limit), b.free_mask(0, limit));
        assert_eq!(ma.len(), 4);
        let m = and(&[ma, mb]);
        assert_eq!(pick(&m, 2), Some(FIRST + 200));
        assert_eq!(pick(&m, 4), Some(FIRST + 200));
        // Above a floor.
        let m = and(&[a.free_mask(FIRST + 300, limit), b.free_mask(0, limit)]);
        assert_eq!(pick(&m, 2), Some(FIRST + 302));
        // Two pairs: the first run of two free pairs.
        let mut c = Ids::new();
        assert!(c.reserve(FIRST + 2, 2));
        assert!(c.reserve(FIRST + 6, 2));
        let m = c.free_mask(0, limit);
        assert_eq!(pick(&m, 2), Some(FIRST));
        assert_eq!(pick(&m, 4), Some(FIRST + 8));
    }

    /// The agreement by search over several members (what `agree_ctx_span` runs without a
    /// mask exchange): the largest lowest-free proposal, passed while it is taken
    /// somewhere.
    fn search(members: &[Ids], span: u32, limit: u32) -> Option<u32> {
        let mut floor = 0;
        loop {
            let c = members
                .iter()
                .map(|m| m.lowest_free(floor, span, limit).unwrap_or(limit))
                .max()?;
            if c.saturating_add(span) > limit {
                return None;
            }
            if members
                .iter()
                .all(|m| m.taken.range(c..c + span).next().is_none())
            {
                return Some(c);
            }
            floor = c + PAIR;
        }
    }

    #[test]
    fn the_search_finds_what_the_masks_find() {
        let limit = FIRST + 2 * 64;
        assert_eq!(Ids::new().lowest_free(0, 2, limit), Some(FIRST));
        assert_eq!(Ids::new().lowest_free(7, 4, limit), Some(8));
        assert_eq!(Ids::new().lowest_free(limit - 2, 4, limit), None);
        // Members holding different pairs, pseudo-random, against the AND of their masks.
        let mut x = 0x9e37_79b9_u32;
        for round in 0..300 {
            let n = 2 + round % 3;
            let mut members: Vec<Ids> = (0..n).map(|_| Ids::new()).collect();
            for m in &mut members {
                for k in 0..64 {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    if x % 100 < 30 + round % 50 {
                        assert!(m.reserve(FIRST + 2 * k, 2));
                    }
                }
            }
            let mut mask = members[0].free_mask(0, limit);
            for m in &members[1..] {
                and_into(&mut mask, m.free_mask(0, limit));
            }
            for span in [2, 4] {
                assert_eq!(
                    search(&members, span, limit),
                    pick(&mask, span),
                    "round {round}, span {span}"
                );
            }
        }
    }

    #[test]
    fn a_full_mask_picks_nothing() {
        let limit = FIRST + 2 * 70;
        let mut a = Ids::new();
        for k in 0..70 {
            assert!(a.reserve(FIRST + 2 * k, 2));
        }
        let m = a.free_mask(0, limit);
        assert_eq!(pick(&m, 2), None);
        // The last pair below the limit is found, never one past it.
        a.release(FIRST + 2 * 69, 2);
        let m = a.free_mask(0, limit);
        assert_eq!(pick(&m, 2), Some(FIRST + 138));
        assert_eq!(pick(&m, 4), None);
        assert_eq!(pick(&a.free_mask(0, FIRST + 2 * 69), 2), None);
    }
}
