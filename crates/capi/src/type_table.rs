//! The derived datatypes' handle table, with a summary of each live type (its envelope,
//! size and bounds) that the read-only queries read without the library lock.
//!
//! `MPI_Type_get_envelope(_c)`, `MPI_Type_size(_c/_x)` and `MPI_Type_get_(true_)extent`
//! on a derived type only read numbers that never change while its handle is live.
//! mpi4py (at `MPI_THREAD_MULTIPLE`) makes such queries by the million; under the library
//! lock each paid the lock's two read-modify-write atomics (~20 ns of a ~24 ns call).
//! Here every insertion and removal (always under the library lock, so by one writer at
//! a time) also writes the handle's [`Summary`] into a slot of a side table guarded by a
//! sequence lock: a reader loads the sequence, the words and the sequence again, plain
//! loads only, and retries (or falls back to the locked path) when a writer was busy.
//!
//! The slots live in chunks of [`CHUNK`] that are allocated on first use and never freed
//! (a chunk is 80 KiB, indices are reused after `MPI_Type_free`), so a reader never
//! touches freed memory. A summary that does not fit its words is not published: its
//! queries take the locked path. Word 0 also says whether the type is committed
//! ([`TypeTable::note_committed`]): `MPI_Type_commit` of a committed type has nothing to
//! do. The queries answered before the entry wrapper read only the words they need
//! ([`bounds`], [`envelope`], [`committed`]).
//!
//! Each slot also counts the handle's references. `MPI_Type_get_contents(_c)` returns a
//! derived constituent as that same handle with one more reference (as MPICH and Open MPI
//! do), and `MPI_Type_free` drops one. A type made by a constructor *holds* the handles of
//! its derived constituents (one hold per occurrence, in the same word as the count): a
//! handle whose user references are all gone stays in the table while a hold remains,
//! invisible to the user (every lookup but `get_contents`' refuses it, so a stale handle is
//! still an error) but still naming its object, and `get_contents` hands it back with a
//! reference again (mpi4py's `dtlib` frees every field type after `Create_struct`, then
//! decodes the struct over and over). The entry goes when neither references nor holds
//! remain; removing it drops its own holds (which may remove its constituents in turn).
//! Only the library lock's holders add references or holds, drop holds, remove entries
//! and reuse a slot; a free that leaves a reference or a hold behind takes no lock
//! ([`release_shared`]: one compare-and-swap on the slot's word, which then never reaches
//! "no reference and no hold"). The object itself lives on (an `Arc`) while another type
//! or an operation holds it.
//!
//! Below `MPI_THREAD_MULTIPLE` (the level `MPI_Init_thread` or the first session provided:
//! [`set_serial`]) one application thread at a time is in the library, and only
//! application threads change these words (the library's own threads never make, free or
//! decode a type): every update of a word is then a plain load and store
//! ([`update`]), as MPICH counts at `MPI_THREAD_SINGLE`, instead of an atomic
//! read-modify-write. A decode and two frees (mpi4py's `dtlib`) keep the library lock's
//! two atomic operations of the six.

use crate::consts::{MPI_COMBINER_F90_COMPLEX, MPI_COMBINER_F90_INTEGER, MPI_COMBINER_F90_REAL};
use crate::handles::{direct_base, kind, Table, DATATYPE_FIRST};
use crate::objects::Datatype;
use std::ffi::c_int;
use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::Arc;

/// What the read-only queries of a derived datatype return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Summary {
    pub combiner: c_int,
    pub num_integers: u32,
    pub num_addresses: u32,
    pub num_large_counts: u32,
    pub num_datatypes: u32,
    pub size: u64,
    pub lb: i64,
    pub ub: i64,
    pub true_lb: i64,
    pub true_ub: i64,
    /// Committed (`MPI_Type_commit` of it, or made so): a commit of it has nothing to do.
    pub committed: bool,
}

impl Summary {
    /// The summary of `t`, if its counts fit the slot's words.
    fn of(t: &Datatype) -> Option<Summary> {
        Some(Summary {
            // The committed flag takes word 0's bit 31 (combiners are small and positive).
            combiner: (0..=COMBINER_MASK as c_int)
                .contains(&t.combiner)
                .then_some(t.combiner)?,
            num_integers: u32::try_from(t.ints.len()).ok()?,
            num_addresses: u32::try_from(t.aints.len()).ok()?,
            num_large_counts: u32::try_from(t.counts.len()).ok()?,
            num_datatypes: u32::try_from(t.types.len()).ok()?,
            size: t.size as u64,
            lb: t.lb as i64,
            ub: t.ub as i64,
            true_lb: t.true_lb as i64,
            true_ub: t.true_ub as i64,
            committed: t.committed,
        })
    }
    /// `ub - lb`.
    pub fn extent(&self) -> i64 {
        self.ub - self.lb
    }
}

/// Whether at most one application thread at a time is in the library (provided level
/// below `MPI_THREAD_MULTIPLE`): [`update`] then loads and stores. Off until the library
/// is initialised (as if `MPI_THREAD_MULTIPLE`).
static SERIAL: AtomicBool = AtomicBool::new(false);

/// Set from the thread level the library provides, once at initialisation (by its one
/// application thread: the user's threads start, or are synchronised with it, later).
pub(crate) fn set_serial(serial: bool) {
    SERIAL.store(serial, Ordering::Relaxed);
}

#[cfg(test)]
thread_local! {
    /// The unit tests' serial mode, per test thread: a test of the serial mode does not
    /// change the mode of the thread tests running next to it.
    static TEST_SERIAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `f` with the serial mode of [`update`] set to `on` on this thread (tests only).
#[cfg(test)]
pub(crate) fn with_serial<R>(on: bool, f: impl FnOnce() -> R) -> R {
    let was = TEST_SERIAL.with(|c| c.replace(on));
    let r = f();
    TEST_SERIAL.with(|c| c.set(was));
    r
}

/// Whether [`update`] may load and store (see [`SERIAL`]).
#[inline(always)]
fn serial() -> bool {
    #[cfg(not(test))]
    {
        SERIAL.load(Ordering::Relaxed)
    }
    #[cfg(test)]
    {
        TEST_SERIAL.with(|c| c.get())
    }
}

/// Replace the word `a` by `f` of it, if `f` gives a value: `Ok` with the old word, or
/// `Err` with the word `f` refused. Below `MPI_THREAD_MULTIPLE` ([`serial`]) a plain load
/// and store: no other thread changes the word meanwhile (the user orders their calls);
/// otherwise a compare-and-swap loop (the lock-free frees of other threads).
#[inline(always)]
fn update(a: &AtomicU64, mut f: impl FnMut(u64) -> Option<u64>) -> Result<u64, u64> {
    if serial() {
        let w = a.load(Ordering::Relaxed);
        return match f(w) {
            Some(n) => {
                a.store(n, Ordering::Relaxed);
                Ok(w)
            }
            None => Err(w),
        };
    }
    a.fetch_update(Ordering::AcqRel, Ordering::Relaxed, f)
}

/// Word 0's bits of the combiner (below them the handle, above [`COMMITTED`]).
const COMBINER_MASK: u64 = 0x7fff_ffff;
/// Word 0's flag: the type is committed.
const COMMITTED: u64 = 1 << 31;

/// Slots per chunk.
const CHUNK: usize = 1024;
/// Chunks: `CHUNKS * CHUNK` covers every index a direct handle has (26 bits); the chunk
/// pointers are 512 KiB of zeroed static memory, touched only as far as types are used.
const CHUNKS: usize = 1 << 16;
/// Words of a slot after its sequence.
const WORDS: usize = 8;

/// One handle's summary under a sequence lock. `seq` is even when no write is under way;
/// word 0 holds the handle (high half; 0 = no live type) and the combiner. `refs` counts
/// the handle's references (low 32 bits; 0 = not live for the user) and its holds
/// ([`HELD_ONE`]), and has the flags [`LOCKED_FREE`], [`HOLDS`] and [`ATTRS`].
struct Slot {
    seq: AtomicU64,
    w: [AtomicU64; WORDS],
    refs: AtomicU64,
}

/// The reference count's bits of [`Slot::refs`].
const COUNT: u64 = 0xffff_ffff;
/// [`Slot::refs`] flag: `MPI_Type_free` of this handle takes the locked path (an F90
/// parameterized type, which is predefined and cannot be freed).
const LOCKED_FREE: u64 = 1 << 32;
/// [`Slot::refs`] flag: this entry holds the handles of its object's derived constituents
/// (`Datatype::types`, one hold per occurrence), released when the entry goes.
const HOLDS: u64 = 1 << 33;
/// [`Slot::refs`] flag: the handle has (or had) attributes, so the free of its last
/// reference takes the locked path (their delete callbacks).
const ATTRS: u64 = 1 << 34;
/// The first bit of [`Slot::refs`]' hold count: the holds on this handle by the entries of
/// types made from it.
const HELD_SHIFT: u32 = 35;
/// One hold.
const HELD_ONE: u64 = 1 << HELD_SHIFT;
/// The most holds (2^29 - 1): a count that reaches it stays there, never released (the
/// entry then stays for good: half a billion types made of one handle at once first).
const HELD_MAX: u64 = u64::MAX >> HELD_SHIFT;

type Chunk = [Slot; CHUNK];

static CHUNKS_TABLE: [AtomicPtr<Chunk>; CHUNKS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; CHUNKS];

/// The slot of table index `i`, if its chunk exists.
#[inline]
fn slot(i: usize) -> Option<&'static Slot> {
    let c = CHUNKS_TABLE.get(i / CHUNK)?.load(Ordering::Acquire);
    // SAFETY: a non-null chunk pointer comes from `Box::into_raw` in `slot_for_write` and
    // is never freed, so it points to a live `Chunk` for the rest of the process.
    (!c.is_null()).then(|| unsafe { &(*c)[i % CHUNK] })
}

/// The slot of table index `i`, allocating its chunk (writers only, under the library
/// lock: one at a time).
fn slot_for_write(i: usize) -> Option<&'static Slot> {
    let cell = CHUNKS_TABLE.get(i / CHUNK)?;
    if cell.load(Ordering::Acquire).is_null() {
        // Writers hold the library lock, so no other one installs this chunk meanwhile;
        // the compare-exchange only makes that assumption harmless if it ever breaks.
        let p = new_chunk();
        if cell
            .compare_exchange(std::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            // SAFETY: `p` came from `new_chunk` (the global allocator, `Chunk`'s layout)
            // and was never shared.
            drop(unsafe { Box::from_raw(p) });
        }
    }
    slot(i)
}

/// A zeroed chunk on the heap (all slots empty). Out of line and built in place: a chunk
/// built on the stack gave every insertion a 72 KiB frame to probe.
#[cold]
#[inline(never)]
fn new_chunk() -> *mut Chunk {
    let layout = std::alloc::Layout::new::<Chunk>();
    // SAFETY: `Chunk` has a non-zero size, and all-zero bytes are a valid `Chunk` (atomic
    // integers of 0), so the zeroed allocation is an initialised `Chunk`.
    let p = unsafe { std::alloc::alloc_zeroed(layout) }.cast::<Chunk>();
    if p.is_null() {
        std::alloc::handle_alloc_error(layout);
    }
    p
}

/// Writes `words` into slot `s` (the single writer's side of the sequence lock).
fn publish(s: &Slot, words: [u64; WORDS]) {
    let seq = s.seq.load(Ordering::Relaxed);
    s.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
    fence(Ordering::Release);
    for (w, v) in s.w.iter().zip(words) {
        w.store(v, Ordering::Relaxed);
    }
    s.seq.store(seq.wrapping_add(2), Ordering::Release);
}

/// The table index of derived-type handle `h`, if it is one.
#[inline]
fn index_of(h: c_int) -> Option<usize> {
    let hu = h as u32;
    if hu & 0xfc00_0000 != direct_base(kind::DATATYPE) {
        return None;
    }
    Some((hu & 0x03ff_ffff) as usize)
}

/// Drop one reference of derived-type handle `h` without the library lock, if another
/// reference or a hold remains (`MPI_Type_free` of a handle that `MPI_Type_get_contents`
/// also returned, or of one that a type was made of): true if done. False (nothing
/// changed) for the last reference of a handle no type holds, for the last one of a handle
/// with attributes, for a handle that is not a live derived type and for one whose free
/// takes the locked path; the locked path then decides (and reports errors). The word
/// never loses its last reference and its last hold here, so the entry and its object
/// stay; only the lock's holders remove them.
#[inline]
pub(crate) fn release_shared(h: c_int) -> bool {
    let Some(s) = index_of(h).and_then(slot) else {
        return false;
    };
    update(&s.refs, |w| {
        let n = w & COUNT;
        let keep = w & LOCKED_FREE != 0 || n == 0 || (n == 1 && (w < HELD_ONE || w & ATTRS != 0));
        (!keep).then(|| w - 1)
    })
    .is_ok()
}

/// Word 0 and words `ks` of the summary of the live derived type of handle `h`, read
/// without the library lock (a seqlock read: a few tries while a writer holds the slot);
/// `None` as for [`summary`], which reads them all through it. The calls answered before
/// the entry wrapper read only the words they need, inline (an out-of-line [`summary`]
/// returning the whole of it was ~60 instructions of a ~100-instruction size query).
#[inline(always)]
fn words<const N: usize>(h: c_int, ks: [usize; N]) -> Option<(u64, [u64; N])> {
    let s = slot(index_of(h)?)?;
    for _ in 0..4 {
        let seq = s.seq.load(Ordering::Acquire);
        if seq & 1 == 0 {
            let w0 = s.w[0].load(Ordering::Relaxed);
            let w = ks.map(|k| s.w[k].load(Ordering::Relaxed));
            fence(Ordering::Acquire);
            if s.seq.load(Ordering::Relaxed) == seq {
                // Not this handle's, or kept for `get_contents` only (freed by the user).
                if (w0 >> 32) as u32 != h as u32 || s.refs.load(Ordering::Relaxed) & COUNT == 0 {
                    return None;
                }
                return Some((w0, w));
            }
        }
        std::hint::spin_loop();
    }
    None
}

/// Whether handle `h` names a live derived type that is committed, read without the
/// library lock (false also when that cannot be told so: the caller takes the locked path).
#[inline(always)]
pub(crate) fn committed(h: c_int) -> bool {
    words(h, []).is_some_and(|(w0, [])| w0 & COMMITTED != 0)
}

/// The size, lower bound and extent of the live derived type of handle `h` (its
/// [`Summary`]'s), read without the library lock; `None` as for [`summary`].
#[inline(always)]
pub(crate) fn bounds(h: c_int) -> Option<(u64, i64, i64)> {
    words(h, [3, 4, 5])
        .map(|(_, [size, lb, ub])| (size, lb as i64, (ub as i64).wrapping_sub(lb as i64)))
}

/// The envelope of the live derived type of handle `h` (its [`Summary`]'s numbers of
/// integers, addresses, large counts and datatypes, and its combiner), read without the
/// library lock; `None` as for [`summary`].
#[inline(always)]
pub(crate) fn envelope(h: c_int) -> Option<[u32; 5]> {
    words(h, [1, 2]).map(|(w0, [a, b])| {
        [
            a as u32,
            (a >> 32) as u32,
            b as u32,
            (b >> 32) as u32,
            (w0 & COMBINER_MASK) as u32,
        ]
    })
}

/// The summary of the live derived type of handle `h`, read without the library lock;
/// `None` for any other handle, one not published, or (rarely) when a writer kept the
/// slot busy: the caller then takes the locked path, which also reports errors.
#[inline]
pub(crate) fn summary(h: c_int) -> Option<Summary> {
    let (w0, [w1, w2, size, lb, ub, true_lb, true_ub]) = words(h, [1, 2, 3, 4, 5, 6, 7])?;
    Some(Summary {
        combiner: (w0 & COMBINER_MASK) as c_int,
        num_integers: w1 as u32,
        num_addresses: (w1 >> 32) as u32,
        num_large_counts: w2 as u32,
        num_datatypes: (w2 >> 32) as u32,
        size,
        lb: lb as i64,
        ub: ub as i64,
        true_lb: true_lb as i64,
        true_ub: true_ub as i64,
        committed: w0 & COMMITTED != 0,
    })
}

/// The derived datatypes by handle, with their summaries published for [`summary`].
/// Only insertion and removal change a summary's numbers; `get_mut` serves the calls that
/// change what is not in it (commit, name). An entry is *live* while it has references;
/// one without any is kept (not live) while types made from it hold it.
pub(crate) struct TypeTable(Table<Arc<Datatype>>);

impl TypeTable {
    pub const fn new() -> Self {
        TypeTable(Table::new(kind::DATATYPE, DATATYPE_FIRST))
    }
    /// Store a type; returns its handle (its summary published, one reference). It holds
    /// nothing (an object that lived on outside the table: the handles it names may be
    /// gone; `get_contents` then checks each against the object it holds).
    pub fn insert(&mut self, t: Arc<Datatype>) -> c_int {
        self.insert_flags(t, 0)
    }
    /// Store a type just made from the handles `t.types` (all live or kept entries or
    /// predefined, as checked under the lock the caller still holds), holding each derived
    /// one until this entry goes; returns its handle.
    pub fn insert_holding(&mut self, t: Arc<Datatype>) -> c_int {
        let mut holds = 0;
        for &c in &t.types {
            if self.hold(c) {
                holds = HOLDS;
            }
        }
        self.insert_flags(t, holds)
    }
    fn insert_flags(&mut self, t: Arc<Datatype>, flags: u64) -> c_int {
        let sum = Summary::of(&t);
        let locked_free = matches!(
            t.combiner,
            MPI_COMBINER_F90_REAL | MPI_COMBINER_F90_COMPLEX | MPI_COMBINER_F90_INTEGER
        );
        let h = self.0.insert(t);
        // Every index of a direct handle has a slot (`CHUNKS`).
        let Some(s) = index_of(h).and_then(slot_for_write) else {
            return h;
        };
        s.refs.store(
            flags | if locked_free { LOCKED_FREE | 1 } else { 1 },
            Ordering::Release,
        );
        publish(
            s,
            match sum {
                Some(sum) => [
                    (h as u32 as u64) << 32
                        | sum.combiner as u32 as u64
                        | if sum.committed { COMMITTED } else { 0 },
                    (sum.num_addresses as u64) << 32 | sum.num_integers as u64,
                    (sum.num_datatypes as u64) << 32 | sum.num_large_counts as u64,
                    sum.size,
                    sum.lb as u64,
                    sum.ub as u64,
                    sum.true_lb as u64,
                    sum.true_ub as u64,
                ],
                // Not publishable: no earlier type's summary answers for it.
                None => [0; WORDS],
            },
        );
        h
    }
    /// Publish that the live type of handle `h` is now committed (`MPI_Type_commit`, under
    /// the library lock, after it set the object's flag): [`summary`] then reports it, and
    /// the commits after this one answer without the lock. Nothing if `h` has no published
    /// summary (its commits take the locked path).
    pub fn note_committed(&self, h: c_int) {
        // Every direct handle has a slot; the words say whether they are `h`'s.
        let Some(s) = index_of(h).and_then(slot) else {
            return;
        };
        // The one writer (under the lock): word 0 is ours to read as it is, and only it
        // changes (the sequence still brackets the store for the readers).
        let w0 = s.w[0].load(Ordering::Relaxed);
        if (w0 >> 32) as u32 != h as u32 || w0 & COMMITTED != 0 {
            return;
        }
        let seq = s.seq.load(Ordering::Relaxed);
        s.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        s.w[0].store(w0 | COMMITTED, Ordering::Relaxed);
        s.seq.store(seq.wrapping_add(2), Ordering::Release);
    }
    /// One more hold on `c` if it is an entry (live or kept): true then (also when the
    /// holds are at [`HELD_MAX`], where they stay).
    fn hold(&self, c: c_int) -> bool {
        if self.0.get(c).is_none() {
            return false;
        }
        let Some(s) = index_of(c).and_then(slot) else {
            return false;
        };
        // Under the lock; the lock-free frees change the count at the same time (hence
        // the atomic update of the whole word).
        let _ = update(&s.refs, |w| {
            (w >> HELD_SHIFT < HELD_MAX).then_some(w + HELD_ONE)
        });
        true
    }
    /// The type of handle `h`, if it is live (has references).
    #[inline]
    pub fn get(&self, h: c_int) -> Option<&Arc<Datatype>> {
        let t = self.0.get(h)?;
        live(h).then_some(t)
    }
    /// The type of handle `h`, mutably (for what the summary does not hold), if it is live.
    pub fn get_mut(&mut self, h: c_int) -> Option<&mut Arc<Datatype>> {
        if !live(h) {
            return None;
        }
        self.0.get_mut(h)
    }
    /// Remove and return the type of handle `h`, whatever its references (its summary
    /// withdrawn first), and drop the holds it has; an entry that this leaves without
    /// references or holds goes too. Only for an entry that no type holds (its holders
    /// would later drop holds it no longer has).
    pub fn remove(&mut self, h: c_int) -> Option<Arc<Datatype>> {
        let (t, holds) = self.remove_one(h)?;
        if holds {
            let mut gone = Vec::new();
            self.unhold_all(&t, &mut gone);
            // A worklist: a long chain of types each made of the next goes without
            // recursion.
            while let Some(c) = gone.pop() {
                if let Some((ct, holds)) = self.remove_one(c) {
                    if holds {
                        self.unhold_all(&ct, &mut gone);
                    }
                }
            }
        }
        Some(t)
    }
    /// Remove the entry `h` alone (its summary withdrawn, its word cleared), if present:
    /// its type and whether it held its constituents (then the caller drops the holds).
    fn remove_one(&mut self, h: c_int) -> Option<(Arc<Datatype>, bool)> {
        self.0.get(h)?;
        let mut holds = false;
        if let Some(s) = index_of(h).and_then(slot) {
            publish(s, [0; WORDS]);
            // A load and a store, not a swap (one atomic read-modify-write fewer per
            // removal): a lock-free free (`release_shared`) that lands between them finds
            // the entry as removed as after a swap (its change is lost with the entry),
            // and `HOLDS` is only written under the lock.
            holds = s.refs.load(Ordering::Acquire) & HOLDS != 0;
            s.refs.store(0, Ordering::Release);
        }
        Some((self.0.remove(h)?, holds))
    }
    /// Drop the holds of an entry of type `t` on its derived constituents (those that are
    /// entries: the same ones as when they were taken, which the holds kept); push those
    /// left without references or holds onto `gone`, to be removed.
    fn unhold_all(&mut self, t: &Datatype, gone: &mut Vec<c_int>) {
        for &c in &t.types {
            if self.0.get(c).is_none() {
                continue;
            }
            let Some(s) = index_of(c).and_then(slot) else {
                continue;
            };
            // Never taken (cannot happen) or saturated: nothing to drop.
            if let Ok(w) = update(&s.refs, |w| {
                let held = w >> HELD_SHIFT;
                (held != 0 && held != HELD_MAX).then(|| w - HELD_ONE)
            }) {
                let nw = w - HELD_ONE;
                // No reference and no hold left: no lock-free free can change the word
                // any more (they need one of them), so it is ours to remove.
                if nw & COUNT == 0 && nw < HELD_ONE {
                    gone.push(c);
                }
            }
        }
    }
    /// One more reference to handle `h` if it is an entry that still names `t` (the type
    /// `MPI_Type_get_contents` returns it for): live, or kept by the holds of the types
    /// made from it (it becomes live again). False if not (the caller then makes a new
    /// handle on `t`).
    pub fn add_ref_to(&self, h: c_int, t: &Arc<Datatype>) -> bool {
        if !self.0.get(h).is_some_and(|x| Arc::ptr_eq(x, t)) {
            return false;
        }
        let Some(s) = index_of(h).and_then(slot) else {
            return false;
        };
        // Under the lock: the others only drop references above the last one or while a
        // hold remains (`release_shared`), so the add cannot overflow into the flags
        // after this check.
        let w = s.refs.load(Ordering::Relaxed);
        if w & COUNT >= COUNT - 1 {
            return false;
        }
        if serial() {
            // No lock-free free meanwhile (one application thread at a time).
            s.refs.store(w + 1, Ordering::Relaxed);
        } else {
            s.refs.fetch_add(1, Ordering::Relaxed);
        }
        true
    }
    /// Note that handle `h` has attributes: the free of its last reference takes the
    /// locked path (which calls their delete callbacks).
    pub fn note_attrs(&self, h: c_int) {
        if self.0.get(h).is_some() {
            if let Some(s) = index_of(h).and_then(slot) {
                let _ = update(&s.refs, |w| Some(w | ATTRS));
            }
        }
    }
    /// The references of handle `h` (0 if it is not live).
    pub fn refs(&self, h: c_int) -> u32 {
        match (self.0.get(h), index_of(h).and_then(slot)) {
            (Some(_), Some(s)) => (s.refs.load(Ordering::Relaxed) & COUNT) as u32,
            (Some(_), None) => 1,
            _ => 0,
        }
    }
    /// The holds on handle `h` (0 if it is not an entry).
    #[cfg(test)]
    pub fn held(&self, h: c_int) -> u32 {
        match (self.0.get(h), index_of(h).and_then(slot)) {
            (Some(_), Some(s)) => (s.refs.load(Ordering::Relaxed) >> HELD_SHIFT) as u32,
            _ => 0,
        }
    }
    /// Whether handle `h` is an entry at all (live or kept).
    #[cfg(test)]
    pub fn is_entry(&self, h: c_int) -> bool {
        self.0.get(h).is_some()
    }
    /// Drop one reference of handle `h`: `None` if it is not live, `Some(None)` if
    /// references or holds remain (the entry stays), `Some(Some(t))` with its type when
    /// that was the last of both (the handle removed, with the holds it had).
    pub fn release(&mut self, h: c_int) -> Option<Option<Arc<Datatype>>> {
        self.0.get(h)?;
        let Some(s) = index_of(h).and_then(slot) else {
            return Some(self.remove(h));
        };
        // Neither the last reference with no hold nor no reference: dropped here.
        match update(&s.refs, |w| {
            let nw = w.wrapping_sub(1);
            (w & COUNT != 0 && (nw & COUNT != 0 || nw >= HELD_ONE)).then_some(nw)
        }) {
            Ok(_) => Some(None),
            // Kept for `get_contents` only: not the user's any more.
            Err(w) if w & COUNT == 0 => None,
            // The last reference and no hold: `release_shared` does not take it, and the
            // others that change the word hold the lock as we do.
            Err(_) => Some(self.remove(h)),
        }
    }
}

/// Whether the entry of handle `h` (known to exist) has references.
#[inline]
fn live(h: c_int) -> bool {
    index_of(h)
        .and_then(slot)
        .is_none_or(|s| s.refs.load(Ordering::Relaxed) & COUNT != 0)
}
