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
//! queries take the locked path.
//!
//! Each slot also counts the handle's references. `MPI_Type_get_contents(_c)` returns a
//! derived constituent whose handle is still live as that same handle with one more
//! reference (as MPICH and Open MPI do), and `MPI_Type_free` drops one: the handle (its
//! table entry) goes at the last one. Only the library lock's holders add references, take
//! the last one and reuse a slot; a free that leaves a reference behind takes no lock
//! ([`release_shared`]: one compare-and-swap on the slot's count, which never goes below
//! one there). The object itself lives on (an `Arc`) while another type or an operation
//! holds it.

use crate::consts::{MPI_COMBINER_F90_COMPLEX, MPI_COMBINER_F90_INTEGER, MPI_COMBINER_F90_REAL};
use crate::handles::{direct_base, kind, Table, DATATYPE_FIRST};
use crate::objects::Datatype;
use std::ffi::c_int;
use std::sync::atomic::{fence, AtomicPtr, AtomicU64, Ordering};
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
}

impl Summary {
    /// The summary of `t`, if its counts fit the slot's words.
    fn of(t: &Datatype) -> Option<Summary> {
        Some(Summary {
            combiner: t.combiner,
            num_integers: u32::try_from(t.ints.len()).ok()?,
            num_addresses: u32::try_from(t.aints.len()).ok()?,
            num_large_counts: u32::try_from(t.counts.len()).ok()?,
            num_datatypes: u32::try_from(t.types.len()).ok()?,
            size: t.size as u64,
            lb: t.lb as i64,
            ub: t.ub as i64,
            true_lb: t.true_lb as i64,
            true_ub: t.true_ub as i64,
        })
    }
    /// `ub - lb`.
    pub fn extent(&self) -> i64 {
        self.ub - self.lb
    }
}

/// Slots per chunk.
const CHUNK: usize = 1024;
/// Chunks: `CHUNKS * CHUNK` covers every index a direct handle has (26 bits); the chunk
/// pointers are 512 KiB of zeroed static memory, touched only as far as types are used.
const CHUNKS: usize = 1 << 16;
/// Words of a slot after its sequence.
const WORDS: usize = 8;

/// One handle's summary under a sequence lock. `seq` is even when no write is under way;
/// word 0 holds the handle (high half; 0 = no live type) and the combiner. `refs` counts
/// the handle's references (low 32 bits; 0 = no live handle) and has [`LOCKED_FREE`].
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

/// Drop one reference of derived-type handle `h` without the library lock, if it has
/// another one (`MPI_Type_free` of a handle that `MPI_Type_get_contents` also returned):
/// true if done. False (nothing changed) for the last reference, for a handle that is not
/// a live derived type and for one whose free takes the locked path; the locked path then
/// decides (and reports errors). The count never reaches 0 here, so the entry and its
/// object stay; only the lock's holders remove them.
#[inline]
pub(crate) fn release_shared(h: c_int) -> bool {
    let Some(s) = index_of(h).and_then(slot) else {
        return false;
    };
    let mut w = s.refs.load(Ordering::Relaxed);
    loop {
        if w & LOCKED_FREE != 0 || w & COUNT < 2 {
            return false;
        }
        match s
            .refs
            .compare_exchange_weak(w, w - 1, Ordering::AcqRel, Ordering::Relaxed)
        {
            Ok(_) => return true,
            Err(now) => w = now,
        }
    }
}

/// The summary of the live derived type of handle `h`, read without the library lock;
/// `None` for any other handle, one not published, or (rarely) when a writer kept the
/// slot busy: the caller then takes the locked path, which also reports errors.
#[inline]
pub(crate) fn summary(h: c_int) -> Option<Summary> {
    let s = slot(index_of(h)?)?;
    for _ in 0..4 {
        let seq = s.seq.load(Ordering::Acquire);
        if seq & 1 == 0 {
            let w: [u64; WORDS] = std::array::from_fn(|k| s.w[k].load(Ordering::Relaxed));
            fence(Ordering::Acquire);
            if s.seq.load(Ordering::Relaxed) == seq {
                if (w[0] >> 32) as u32 != h as u32 {
                    return None;
                }
                return Some(Summary {
                    combiner: w[0] as u32 as c_int,
                    num_integers: w[1] as u32,
                    num_addresses: (w[1] >> 32) as u32,
                    num_large_counts: w[2] as u32,
                    num_datatypes: (w[2] >> 32) as u32,
                    size: w[3],
                    lb: w[4] as i64,
                    ub: w[5] as i64,
                    true_lb: w[6] as i64,
                    true_ub: w[7] as i64,
                });
            }
        }
        std::hint::spin_loop();
    }
    None
}

/// The derived datatypes by handle, with their summaries published for [`summary`].
/// Only insertion and removal change a summary's numbers; `get_mut` serves the calls that
/// change what is not in it (commit, name).
pub(crate) struct TypeTable(Table<Arc<Datatype>>);

impl TypeTable {
    pub const fn new() -> Self {
        TypeTable(Table::new(kind::DATATYPE, DATATYPE_FIRST))
    }
    /// Store a type; returns its handle (its summary published, one reference).
    pub fn insert(&mut self, t: Arc<Datatype>) -> c_int {
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
            if locked_free { LOCKED_FREE | 1 } else { 1 },
            Ordering::Release,
        );
        publish(
            s,
            match sum {
                Some(sum) => [
                    (h as u32 as u64) << 32 | sum.combiner as u32 as u64,
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
    /// The type of handle `h`, if it is live.
    #[inline]
    pub fn get(&self, h: c_int) -> Option<&Arc<Datatype>> {
        self.0.get(h)
    }
    /// The type of handle `h`, mutably (for what the summary does not hold).
    pub fn get_mut(&mut self, h: c_int) -> Option<&mut Arc<Datatype>> {
        self.0.get_mut(h)
    }
    /// Remove and return the type of handle `h`, whatever its references (its summary
    /// withdrawn first).
    pub fn remove(&mut self, h: c_int) -> Option<Arc<Datatype>> {
        if self.0.get(h).is_some() {
            if let Some(s) = index_of(h).and_then(slot) {
                publish(s, [0; WORDS]);
                s.refs.store(0, Ordering::Release);
            }
        }
        self.0.remove(h)
    }
    /// One more reference to the live handle `h` (`MPI_Type_get_contents` returns it
    /// again); false if it cannot take one (the caller then makes a new handle). A handle
    /// that is not live has no references: refused.
    pub fn add_ref(&self, h: c_int) -> bool {
        let Some(s) = index_of(h).and_then(slot) else {
            return false;
        };
        // Under the lock: the others only drop references above the last one
        // (`release_shared`), so the count stays positive and the add cannot overflow
        // into the flag after this check.
        let n = s.refs.load(Ordering::Relaxed) & COUNT;
        if n == 0 || n >= COUNT - 1 {
            return false;
        }
        s.refs.fetch_add(1, Ordering::Relaxed);
        true
    }
    /// The references of handle `h` (0 if it is not live).
    pub fn refs(&self, h: c_int) -> u32 {
        match (self.0.get(h), index_of(h).and_then(slot)) {
            (Some(_), Some(s)) => (s.refs.load(Ordering::Relaxed) & COUNT) as u32,
            (Some(_), None) => 1,
            _ => 0,
        }
    }
    /// Drop one reference of handle `h`: `None` if it is not live, `Some(None)` if others
    /// remain, `Some(Some(t))` with its type when that was the last (the handle removed).
    pub fn release(&mut self, h: c_int) -> Option<Option<Arc<Datatype>>> {
        self.0.get(h)?;
        if let Some(s) = index_of(h).and_then(slot) {
            let mut w = s.refs.load(Ordering::Relaxed);
            while w & COUNT > 1 {
                match s
                    .refs
                    .compare_exchange_weak(w, w - 1, Ordering::AcqRel, Ordering::Relaxed)
                {
                    Ok(_) => return Some(None),
                    Err(now) => w = now,
                }
            }
        }
        // The last reference (`release_shared` never takes it, and the others that
        // change the count hold the lock as we do).
        Some(self.remove(h))
    }
}
