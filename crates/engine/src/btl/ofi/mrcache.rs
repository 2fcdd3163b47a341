//! The memory registration cache of the `ofi` transport, sans IO: which registrations
//! exist (address intervals with their access rights), how many transfers use each
//! (reference counts), and which unused ones to close first (least recently used), with no
//! call into libfabric. The owner registers on a miss and closes the handles the cache
//! gives back ([`MrCache::release`], [`MrCache::invalidate`], [`MrCache::drain`]).
//!
//! A registration serves any request inside its interval whose access it covers, so a
//! buffer sent from again and again (or a window's memory) is registered once. At most
//! `keep` unused registrations stay open; `keep == 0` closes each one as soon as its last
//! transfer ends (in-flight transfers of overlapping buffers still share it).
//!
//! Invalidation: a registration names virtual addresses, so memory the application frees
//! and maps again at the same address must not be served by a registration of the old
//! pages (on providers that pin them). [`MrCache::invalidate`] drops every registration
//! overlapping a range: unused ones are handed back at once, those in use are marked
//! stale (no new transfer gets them) and handed back by their last release. Which ranges
//! get invalidated, and when caching is safe at all, is the owner's policy (see
//! `link::Net`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{fabric, fi, params};

/// The access user memory is registered with: read by peers (the sender's buffer of a
/// rendezvous) and read into (the receiver's, where the provider wants it registered), so
/// that one registration serves a buffer in both roles.
pub(crate) const USER_ACCESS: u64 = fi::FI_READ | fi::FI_REMOTE_READ;

/// The granule registrations are rounded to: a buffer's whole pages (4 KiB is the
/// smallest page size, so the rounded range lies in pages the buffer occupies), so
/// buffers that share pages share registrations.
const GRANULE: usize = 4096;

/// The interval `[start, end)` of whole granules covering `len` bytes at `addr`.
pub(crate) fn pages(addr: usize, len: usize) -> (usize, usize) {
    let start = addr & !(GRANULE - 1);
    let end = addr.saturating_add(len.max(1)).next_multiple_of(GRANULE);
    (start, end)
}

/// How many unused registrations to keep: `size`
/// ([`params::MR_CACHE_SIZE`]) where keeping them is safe without a memory monitor: on
/// providers that register by virtual address without pinning pages (the [`software`]
/// ones, whose reads go through the address space as it is: memory freed and mapped
/// again at the same address is read anew), or when the user says buffers are never
/// remapped while cached (`pinned`, [`params::MR_CACHE_PINNED`]); else none: hardware
/// providers pin pages and run libfabric's registration cache, which its monitor
/// (`FI_MR_CACHE_MONITOR`) invalidates when memory is unmapped.
///
/// [`software`]: fabric::software
pub(crate) fn keep(software: bool, pinned: bool, size: usize) -> usize {
    if software || pinned {
        size
    } else {
        0
    }
}

/// [`keep`] for provider `prov` with the parameters' values.
pub(crate) fn keep_for(prov: &str) -> usize {
    keep(
        fabric::software(prov),
        oxmpi_base::params::flag(&params::MR_CACHE_PINNED),
        oxmpi_base::params::int(&params::MR_CACHE_SIZE).max(0) as usize,
    )
}

/// A cache entry, as returned by [`MrCache::acquire`]; give it back with
/// [`MrCache::release`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct EntryId(u64);

/// One registration.
#[derive(Debug)]
struct Entry<H> {
    /// Its interval `[start, end)`.
    start: usize,
    end: usize,
    /// The access rights it was registered with (libfabric `FI_*` bits).
    access: u64,
    handle: H,
    /// Transfers using it.
    refs: u32,
    /// Invalidated while in use: closed at the last release, never handed out again.
    stale: bool,
    /// Its stamp in [`MrCache::idle`] while unused.
    idle_since: Option<u64>,
}

/// What the cache did, for verbose output and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stats {
    /// Requests served by an existing registration.
    pub hits: u64,
    /// Requests that registered.
    pub misses: u64,
    /// Unused registrations closed to stay within `keep`.
    pub evictions: u64,
    /// Registrations dropped by [`MrCache::invalidate`].
    pub invalidations: u64,
}

/// The registration cache over handles `H` (a libfabric registration in the transport,
/// anything in tests).
#[derive(Debug)]
pub(crate) struct MrCache<H> {
    /// Unused registrations kept open at most.
    keep: usize,
    entries: HashMap<EntryId, Entry<H>>,
    /// Entries by (start, id): the candidates for an address are those starting at or
    /// below it.
    by_start: BTreeSet<(usize, EntryId)>,
    /// Unused entries by the time they became unused (oldest first).
    idle: BTreeMap<u64, EntryId>,
    clock: u64,
    next_id: u64,
    stats: Stats,
}

impl<H> MrCache<H> {
    /// An empty cache that keeps at most `keep` unused registrations.
    pub(crate) fn new(keep: usize) -> MrCache<H> {
        MrCache {
            keep,
            entries: HashMap::new(),
            by_start: BTreeSet::new(),
            idle: BTreeMap::new(),
            clock: 0,
            next_id: 0,
            stats: Stats::default(),
        }
    }

    /// A registration covering `[start, start + len)` with at least `access`: an existing
    /// one (its use counted), else the one `register(start, len, access)` makes, which
    /// the cache then owns. The registration's handle and interval start are
    /// [`MrCache::get`]'s.
    pub(crate) fn acquire<E>(
        &mut self,
        start: usize,
        len: usize,
        access: u64,
        register: impl FnOnce(usize, usize, u64) -> Result<H, E>,
    ) -> Result<EntryId, E> {
        let end = start.saturating_add(len);
        let found = self
            .by_start
            .range(..=(start, EntryId(u64::MAX)))
            .rev()
            .map(|&(_, id)| id)
            .find(|id| {
                let e = &self.entries[id];
                !e.stale && e.end >= end && e.access & access == access
            });
        if let Some(id) = found {
            let e = self.entries.get_mut(&id).expect("indexed entry");
            if let Some(t) = e.idle_since.take() {
                self.idle.remove(&t);
            }
            e.refs += 1;
            self.stats.hits += 1;
            return Ok(id);
        }
        let handle = register(start, len, access)?;
        let id = EntryId(self.next_id);
        self.next_id += 1;
        self.entries.insert(
            id,
            Entry {
                start,
                end,
                access,
                handle,
                refs: 1,
                stale: false,
                idle_since: None,
            },
        );
        self.by_start.insert((start, id));
        self.stats.misses += 1;
        Ok(id)
    }

    /// The handle of entry `id` and the start of its interval; `None` once it is closed.
    pub(crate) fn get(&self, id: EntryId) -> Option<(&H, usize)> {
        self.entries.get(&id).map(|e| (&e.handle, e.start))
    }

    /// Ends one use of `id`; the handles to close now: `id`'s if it was invalidated (or
    /// nothing may be kept), else the least recently used ones beyond `keep`.
    pub(crate) fn release(&mut self, id: EntryId) -> Vec<H> {
        let Some(e) = self.entries.get_mut(&id) else {
            return Vec::new();
        };
        e.refs = e.refs.saturating_sub(1);
        if e.refs > 0 {
            return Vec::new();
        }
        if e.stale {
            return self.remove(id).into_iter().collect();
        }
        self.clock += 1;
        e.idle_since = Some(self.clock);
        self.idle.insert(self.clock, id);
        let mut out = Vec::new();
        while self.idle.len() > self.keep {
            let (_, old) = self.idle.pop_first().expect("non-empty");
            self.stats.evictions += 1;
            out.extend(self.remove(old));
        }
        out
    }

    /// Drops every registration overlapping `[start, start + len)` (the application freed
    /// that memory): the unused ones' handles, to close now; the ones in use are handed
    /// back by their last [`MrCache::release`].
    pub(crate) fn invalidate(&mut self, start: usize, len: usize) -> Vec<H> {
        let end = start.saturating_add(len);
        let hit: Vec<EntryId> = self
            .by_start
            .range(..(end, EntryId(0)))
            .map(|&(_, id)| id)
            .filter(|id| {
                let e = &self.entries[id];
                !e.stale && e.end > start
            })
            .collect();
        let mut out = Vec::new();
        for id in hit {
            self.stats.invalidations += 1;
            let e = self.entries.get_mut(&id).expect("indexed entry");
            if e.refs > 0 {
                e.stale = true;
            } else {
                out.extend(self.remove(id));
            }
        }
        out
    }

    /// Every handle, in use or not, to close with the domain; the cache is empty after.
    pub(crate) fn drain(&mut self) -> Vec<H> {
        self.by_start.clear();
        self.idle.clear();
        self.entries.drain().map(|(_, e)| e.handle).collect()
    }

    /// Unused registrations kept open at most.
    pub(crate) fn keep(&self) -> usize {
        self.keep
    }

    /// What the cache did so far.
    pub(crate) fn stats(&self) -> Stats {
        self.stats
    }

    /// Open registrations (in use, unused and stale).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// Takes entry `id` out of every index; its handle.
    fn remove(&mut self, id: EntryId) -> Option<H> {
        let e = self.entries.remove(&id)?;
        self.by_start.remove(&(e.start, id));
        if let Some(t) = e.idle_since {
            self.idle.remove(&t);
        }
        Some(e.handle)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const R: u64 = 1; // "read"
    const W: u64 = 2; // "write"

    /// A cache whose registrations are numbered in order, and a log of them.
    struct Fixture {
        cache: MrCache<u32>,
        made: Vec<(usize, usize, u64)>,
    }

    impl Fixture {
        fn new(keep: usize) -> Fixture {
            Fixture {
                cache: MrCache::new(keep),
                made: Vec::new(),
            }
        }

        fn get(&mut self, start: usize, len: usize, access: u64) -> (EntryId, u32) {
            let made = &mut self.made;
            let id = self
                .cache
                .acquire(start, len, access, |s, l, a| {
                    made.push((s, l, a));
                    Ok::<u32, ()>(made.len() as u32 - 1)
                })
                .unwrap();
            (id, *self.cache.get(id).unwrap().0)
        }
    }

    #[test]
    fn pages_round_out_and_the_policy_keeps_only_where_safe() {
        assert_eq!(pages(0x1000, 0x1000), (0x1000, 0x2000));
        assert_eq!(pages(0x1001, 1), (0x1000, 0x2000));
        assert_eq!(pages(0x1fff, 2), (0x1000, 0x3000));
        assert_eq!(pages(0x1000, 0), (0x1000, 0x2000));
        assert_eq!(keep(true, false, 64), 64, "software provider");
        assert_eq!(keep(false, false, 64), 0, "pinning provider");
        assert_eq!(keep(false, true, 64), 64, "the user's promise");
        assert_eq!(keep(true, true, 0), 0);
    }

    #[test]
    fn a_registration_serves_requests_inside_it_with_covered_access() {
        let mut f = Fixture::new(8);
        let (a, h) = f.get(0x1000, 0x3000, R | W);
        assert_eq!(h, 0);
        // Inside, same or less access: the same registration, counted.
        assert_eq!(f.get(0x1000, 0x3000, R).1, 0);
        assert_eq!(f.get(0x2000, 0x10, W).1, 0);
        assert_eq!(f.get(0x3fff, 1, R | W).1, 0);
        assert_eq!(f.cache.get(a).unwrap().1, 0x1000, "its interval's start");
        // Crossing its end, or before its start: new registrations.
        assert_eq!(f.get(0x3fff, 2, R).1, 1);
        assert_eq!(f.get(0xfff, 2, R).1, 2);
        let s = f.cache.stats();
        assert_eq!((s.hits, s.misses), (3, 3));
        // More access than it has: a new one.
        let mut g = Fixture::new(8);
        g.get(0x1000, 0x1000, R);
        assert_eq!(g.get(0x1000, 0x1000, R | W).1, 1);
        assert_eq!(g.made, vec![(0x1000, 0x1000, R), (0x1000, 0x1000, R | W)]);
    }

    #[test]
    fn a_failed_registration_leaves_nothing_behind() {
        let mut c: MrCache<u32> = MrCache::new(4);
        let r = c.acquire(0x1000, 8, R, |_, _, _| Err("no memory"));
        assert_eq!(r, Err("no memory"));
        assert_eq!(c.len(), 0);
        let id = c.acquire(0x1000, 8, R, |_, _, _| Ok::<_, ()>(7)).unwrap();
        assert_eq!(c.get(id).unwrap(), (&7, 0x1000));
    }

    #[test]
    fn references_keep_registrations_open_and_lru_evicts_beyond_keep() {
        let mut f = Fixture::new(2);
        let (a, _) = f.get(0x10000, 0x1000, R);
        let (b, _) = f.get(0x20000, 0x1000, R);
        let (c, _) = f.get(0x30000, 0x1000, R);
        let (a2, _) = f.get(0x10000, 0x100, R);
        assert_eq!(a, a2);
        // Everything in use: nothing closes, whatever `keep`.
        assert!(f.cache.release(a).is_empty(), "a still used once");
        assert!(f.cache.release(b).is_empty());
        assert!(f.cache.release(c).is_empty());
        // Three unused now: b, c; a's last release makes a third: the oldest (b) goes.
        assert_eq!(f.cache.release(a), vec![1]);
        assert_eq!(f.cache.len(), 2);
        // Using c again makes it the most recent: the next overflow closes a.
        let (c2, _) = f.get(0x30000, 0x10, R);
        assert_eq!(c2, c);
        let (d, _) = f.get(0x40000, 0x1000, R);
        assert!(f.cache.release(c).is_empty());
        assert_eq!(f.cache.release(d), vec![0]);
        // b was closed: asking for it registers again.
        assert_eq!(f.get(0x20000, 0x1000, R).1, 4);
        assert_eq!(f.cache.stats().evictions, 2);
    }

    #[test]
    fn keep_zero_closes_at_last_release_but_shares_while_in_use() {
        let mut f = Fixture::new(0);
        let (a, _) = f.get(0x1000, 0x2000, R);
        let (b, _) = f.get(0x1800, 0x100, R);
        assert_eq!(a, b, "in-flight transfers share");
        assert!(f.cache.release(a).is_empty());
        assert_eq!(f.cache.release(b), vec![0]);
        assert_eq!(f.cache.len(), 0);
        assert_eq!(f.get(0x1000, 0x2000, R).1, 1);
    }

    #[test]
    fn invalidation_closes_unused_and_marks_used_stale() {
        let mut f = Fixture::new(8);
        let (a, _) = f.get(0x10000, 0x1000, R); // [0x10000, 0x11000)
        let (b, _) = f.get(0x11000, 0x1000, R); // [0x11000, 0x12000)
        let (c, _) = f.get(0x13000, 0x1000, R); // [0x13000, 0x14000)
        assert!(f.cache.release(a).is_empty());
        assert!(f.cache.release(c).is_empty());
        // Freed: [0x10800, 0x11800): overlaps a (unused: closed now) and b (in use).
        assert_eq!(f.cache.invalidate(0x10800, 0x1000), vec![0]);
        assert_eq!(f.cache.len(), 2);
        // b is stale: the same buffer mapped again gets a new registration.
        let (b2, h) = f.get(0x11000, 0x1000, R);
        assert_ne!(b2, b);
        assert_eq!(h, 3);
        // b's last release closes it; c, untouched, stays.
        assert_eq!(f.cache.release(b), vec![1]);
        assert_eq!(f.get(0x13000, 0x10, R).1, 2);
        // Touching ends only: [0x12000, 0x13000) overlaps neither b2 nor c.
        assert!(f.cache.invalidate(0x12000, 0x1000).is_empty());
        assert_eq!(f.cache.stats().invalidations, 2);
        let mut left = f.cache.drain();
        left.sort_unstable();
        assert_eq!(left, vec![2, 3]);
        assert_eq!(f.cache.len(), 0);
    }

    #[test]
    fn free_and_map_again_at_the_same_address_registers_anew() {
        // The transport's sequence for a buffer sent from, freed, and allocated again at the
        // same address: invalidated in between, the second send registers the new memory.
        let mut f = Fixture::new(8);
        let (a, h) = f.get(0x7000_0000, 1 << 20, R);
        assert!(f.cache.release(a).is_empty());
        assert_eq!(f.cache.invalidate(0x7000_0000, 1 << 20), vec![h]);
        let (_, h2) = f.get(0x7000_0000, 1 << 20, R);
        assert_ne!(h, h2);
        assert_eq!(f.made.len(), 2);
    }

    #[test]
    fn many_overlapping_registrations_pick_a_covering_one() {
        let mut f = Fixture::new(64);
        // Nested and shifted intervals, all released.
        for k in 0..32usize {
            let (id, _) = f.get(0x1000 * k, 0x1000 * (k + 1), R);
            assert!(f.cache.release(id).is_empty());
        }
        for k in 0..32usize {
            let (id, h) = f.get(0x1000 * k + 5, 0x100, R);
            let (_, start) = f.cache.get(id).unwrap();
            let e = &f.made[h as usize];
            assert!(start <= 0x1000 * k + 5 && e.0 + e.1 >= 0x1000 * k + 0x105);
            assert!(f.cache.release(id).is_empty());
        }
        assert_eq!(f.made.len(), 32, "every request hit");
    }
}
