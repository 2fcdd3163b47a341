//! Light requests: nonblocking collectives on the communicator's shared-memory segment
//! ([`crate::sm::nb`]) without a schedule, a generalized request or a completion callback.
//!
//! A collective whose result the caller still has to move (a packed result unpacked into
//! the user's memory) hands [`start_then`] a function that gets the output region's bytes
//! once the collective ended well, before the request completes.
//!
//! A light request is a slot of a fixed process-wide table ([`SLOTS`] of them), claimed with
//! a compare-and-swap at the post and given back by the call that completes it; the slot
//! holds the collective ([`SmNb`]), its two regions and its reduction. Progress is the
//! segment collective's own: post our data once its buffer is free, then check the stamps
//! the result needs and compute it. Nothing is allocated per call beyond what the caller
//! hands in (a reduction's callback, the counts of a v-collective).
//!
//! Slot states: free → *filling* (the poster writes the body) → *pending* → (advanced by
//! one thread at a time: *busy*) → *done* (the outcome is in the slot) → free again once the
//! owner took the outcome ([`test`]). Any thread may advance a pending slot: the owner's
//! wait and test calls ([`test`], [`poll_all`] from their progress loops) and the
//! nonblocking-collective progress thread ([`super::progress`]), which finds the pending
//! slots when the application does not call into MPI (a root that posts and computes must
//! not hold the others up: its post is then done by that thread if its buffer was not free
//! at the call, and its reading, which frees the buffer for later collectives, too).
//!
//! Order: the segment collectives count their own sequence and each rank's done word
//! stays below its oldest open one, so several light requests on one communicator (and
//! schedules of the `sm` kind among them) may be completed in any order, and blocking
//! collectives run in between on their own buffers.
//!
//! A request freed by its owner before it ended (`MPI_Request_free`, erroneous for a
//! collective but tolerated) is an *orphan*: the thread that ends it frees the slot.

use super::progress;
use crate::base::stats::{count, Alg};
use crate::sched::{OwnedOp, Region};
use crate::sm::nb::{Progress, SmNb};
use crate::sm::{Seg, SmKind};
use crate::{unpool, CollComm, Result};
use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;

/// Number of light request slots (more outstanding at once take the schedule path).
pub const SLOTS: usize = 256;

const FREE: u32 = 0;
/// Claimed: the poster writes the body.
const FILLING: u32 = 1;
const PENDING: u32 = 2;
/// One thread advances it.
const BUSY: u32 = 3;
/// Ended: the outcome is in the body.
const DONE: u32 = 4;
/// Bit of a pending or busy slot whose owner freed the handle.
const ORPHAN: u32 = 8;

/// A collective of a slot.
struct Body {
    nb: SmNb,
    input: Region,
    output: Region,
    op: Option<OwnedOp>,
    /// Run on the output's bytes when the collective ends well ([`start_then`]).
    then: Option<Then>,
    outcome: Option<Result<()>>,
}

/// What [`start_then`] runs on the output region's bytes when the collective ends well.
pub type Then = Box<dyn FnOnce(&[u8]) + Send>;

struct Slot {
    state: AtomicU32,
    /// The caller's word (the C ABI's communicator handle, for its error handler).
    owner: AtomicI32,
    /// Set by the last advance that left it pending: it waits only for ranks pinned to
    /// another CPU ([`remote_only`]).
    remote: AtomicBool,
    /// Initialised from filling to free.
    body: UnsafeCell<MaybeUninit<Body>>,
}

// SAFETY: the body is accessed only by the thread that moved the state to filling or busy
// (a compare-and-swap), or by the owner once it is done; the state's release stores and
// acquire loads order those accesses. The raw regions are the MPI caller's memory, valid
// until completion whichever thread advances the collective.
unsafe impl Sync for Slot {}

static TABLE: [Slot; SLOTS] = [const {
    Slot {
        state: AtomicU32::new(FREE),
        owner: AtomicI32::new(0),
        remote: AtomicBool::new(false),
        body: UnsafeCell::new(MaybeUninit::uninit()),
    }
}; SLOTS];

/// One past the highest slot ever claimed (the scans of [`poll_all`] stop there).
static HIGH: AtomicUsize = AtomicUsize::new(0);
/// Slots pending or busy (not ended yet): [`poll_all`] returns at once when none.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// Make slot `i` (its body written) pending for `owner`: the scans of [`poll_all`] reach it,
/// it counts as open, and the progress engine learns that a light request was posted.
#[inline]
fn publish(slot: &Slot, i: usize, owner: i32) {
    slot.owner.store(owner, Ordering::Relaxed);
    if HIGH.load(Ordering::Relaxed) <= i {
        HIGH.fetch_max(i + 1, Ordering::Relaxed);
    }
    OPEN.fetch_add(1, Ordering::SeqCst);
    slot.state.store(PENDING, Ordering::Release);
    progress::light_posted();
}

/// Whether some light request has not ended (the progress thread then keeps looking).
#[inline]
pub(crate) fn any_open() -> bool {
    OPEN.load(Ordering::SeqCst) != 0
}

/// Number of light requests not ended yet (pending or being advanced).
pub fn open() -> usize {
    OPEN.load(Ordering::SeqCst)
}

/// Claim a free slot for a new light request (`None`: all taken, use a schedule).
#[inline]
pub fn claim() -> Option<usize> {
    (0..SLOTS).find(|&i| {
        let s = &TABLE[i].state;
        s.load(Ordering::Relaxed) == FREE
            && s.compare_exchange(FREE, FILLING, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    })
}

/// Give back claimed slot `i` unused.
pub fn unclaim(i: usize) {
    debug_assert_eq!(TABLE[i].state.load(Ordering::Relaxed), FILLING);
    TABLE[i].state.store(FREE, Ordering::Release);
}

/// Start nonblocking collective `kind` on `seg` in claimed slot `i` ([`claim`]): `input`
/// (our contribution, at most [`crate::sm::DATA`] bytes, see [`SmKind::fits`]) and
/// `output` as for [`crate::sched::Schedule::shared`], `op` its reduction, `owner` a word
/// the caller gets back with [`owner`]. Takes the segment's next nonblocking sequence
/// number (call in MPI's collective order). Advances it once: `Some(outcome)` if it ended
/// already (the slot is free again), `None` if it is pending in slot `i` (complete it with
/// [`test`]).
///
/// # Safety
/// Raw regions are valid (input readable, output writable) until the collective ends (the
/// MPI contract of the nonblocking call).
pub unsafe fn start(
    i: usize,
    cc: &CollComm,
    kind: (Arc<Seg>, SmKind),
    io: (Region, Region),
    op: Option<OwnedOp>,
    owner: i32,
) -> Option<Result<()>> {
    // SAFETY: forwarded caller contract.
    unsafe { start_then(i, cc, kind, io, op, owner, None) }
}

/// [`start`], and `then` (if any) runs on the output region's bytes once the collective
/// ended well, in the thread that ends it and before the request completes (the outcome
/// of [`start`] or [`test`], or [`peek`], follows it).
///
/// # Safety
/// As [`start`]; what `then` touches stays valid until the collective ends.
pub unsafe fn start_then(
    i: usize,
    cc: &CollComm,
    (seg, kind): (Arc<Seg>, SmKind),
    (input, output): (Region, Region),
    op: Option<OwnedOp>,
    owner: i32,
    then: Option<Then>,
) -> Option<Result<()>> {
    count(cc.shadow, Alg::SmNonblocking);
    let slot = &TABLE[i];
    debug_assert_eq!(slot.state.load(Ordering::Relaxed), FILLING);
    // The body is made in its slot and advanced there: not moved again whether it ends now
    // or stays pending.
    // SAFETY: we hold the slot (filling) and its body is uninitialised.
    let body = unsafe {
        (*slot.body.get()).write(Body {
            nb: SmNb::open(cc, seg, kind),
            input,
            output,
            op,
            then,
            outcome: None,
        })
    };
    if advance(body) {
        // SAFETY: initialised just above and still ours (filling).
        let r = unsafe { finish(slot) };
        slot.state.store(FREE, Ordering::Release);
        return r;
    }
    slot.remote
        .store(body.nb.waits_remote_only(), Ordering::Relaxed);
    publish(slot, i, owner);
    None
}

/// What [`start_barrier`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Barrier {
    /// Every rank had stamped it: ended at the post, no slot kept.
    Done,
    /// Pending in this slot (complete it with [`test`]).
    Pending(usize),
    /// No slot free: nothing was started (use a schedule).
    NoSlot,
}

/// A nonblocking barrier on `seg` as a light request of `owner` ([`start`]), cheaper at the
/// post: the segment opens, posts, checks and (if every rank was there) closes it under
/// one lock ([`Seg::barrier_nb`]), and a slot's body is made only if it stays pending (a
/// slot is claimed first, so that nothing is opened when none is free, and given back when
/// it ends at once). Takes the segment's next nonblocking sequence number (call in MPI's
/// collective order).
pub fn start_barrier(cc: &CollComm, seg: &Arc<Seg>, owner: i32) -> Barrier {
    let Some(i) = claim() else {
        return Barrier::NoSlot;
    };
    count(cc.shadow, Alg::SmNonblocking);
    let slot = &TABLE[i];
    let Some((k, posted)) = seg.barrier_nb() else {
        unclaim(i);
        return Barrier::Done;
    };
    // SAFETY: we hold the slot (filling) and its body is uninitialised.
    unsafe {
        (*slot.body.get()).write(Body {
            nb: SmNb::opened_barrier(seg.clone(), k, posted),
            input: Region::Owned(Vec::new()),
            output: Region::Owned(Vec::new()),
            op: None,
            then: None,
            outcome: None,
        });
    }
    publish(slot, i, owner);
    Barrier::Pending(i)
}

/// The outcome of the ended collective in `slot`, dropping its body in place (its owned
/// regions go back to the pool); the caller then frees the slot.
///
/// # Safety
/// The slot's body is initialised, and the caller alone holds it (filling, busy, or done
/// and the caller is its owner); it is uninitialised after.
unsafe fn finish(slot: &Slot) -> Option<Result<()>> {
    // SAFETY: caller contract.
    let body = unsafe { (*slot.body.get()).assume_init_mut() };
    let r = body.take();
    // SAFETY: caller contract; not used again until written anew.
    unsafe { (*slot.body.get()).assume_init_drop() };
    r
}

impl Body {
    /// The outcome of an ended collective; its owned regions go back to the pool.
    fn take(&mut self) -> Option<Result<()>> {
        for r in [&mut self.input, &mut self.output] {
            // (An empty region, e.g. a barrier's, has nothing to give back.)
            if let Region::Owned(v) = r {
                if v.capacity() != 0 {
                    unpool(std::mem::take(v));
                }
            }
        }
        self.outcome.take()
    }
}

/// Advance `b` once; whether it ended (its outcome is then set).
fn advance(b: &mut Body) -> bool {
    let input = b.input.ptr_len();
    let output = b.output.ptr_len();
    let (nb, op) = (&mut b.nb, b.op.as_ref());
    // A reduction that cannot run (e.g. a user function that panics) fails this collective
    // instead of the thread advancing it.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: the regions are the caller's memory (valid until completion by the
        // contract of `start`) or owned by the body.
        unsafe { nb.progress((input.0.cast_const(), input.1), output, op) }
    }));
    let outcome = match r {
        Ok(Progress::Pending) => return false,
        Ok(Progress::Done) => {
            if let Some(f) = b.then.take() {
                let out: &[u8] = if output.1 == 0 {
                    &[]
                } else {
                    // SAFETY: as above: the output region is valid until the end, now.
                    unsafe { std::slice::from_raw_parts(output.0.cast_const(), output.1) }
                };
                f(out);
            }
            Ok(())
        }
        Ok(failed) => Err(failed.failure()),
        Err(p) => Err(progress::panicked(&*p)),
    };
    b.outcome = Some(outcome);
    true
}

/// Advance slot `i` if it is pending and no other thread is at it; returns its state
/// after (an orphan that ended is free).
fn try_advance(i: usize) -> u32 {
    let slot = &TABLE[i];
    let s = slot.state.load(Ordering::Acquire);
    if s & !ORPHAN != PENDING
        || slot
            .state
            .compare_exchange(s, BUSY | (s & ORPHAN), Ordering::Acquire, Ordering::Relaxed)
            .is_err()
    {
        return slot.state.load(Ordering::Acquire);
    }
    // SAFETY: we moved the slot from pending to busy: its body is initialised and ours.
    let body = unsafe { (*slot.body.get()).assume_init_mut() };
    if !advance(body) {
        slot.remote
            .store(body.nb.waits_remote_only(), Ordering::Relaxed);
        slot.state.store(s, Ordering::Release);
        return s;
    }
    OPEN.fetch_sub(1, Ordering::SeqCst);
    if s & ORPHAN != 0 {
        // SAFETY: initialised (above) and nobody else's: the owner gave it up.
        drop(unsafe { finish(slot) });
        slot.state.store(FREE, Ordering::Release);
        return FREE;
    }
    slot.state.store(DONE, Ordering::Release);
    DONE
}

/// Advance every pending light request once; returns how many ended. One atomic load
/// when none is open.
pub fn poll_all() -> usize {
    if OPEN.load(Ordering::Relaxed) == 0 {
        return 0;
    }
    let high = HIGH.load(Ordering::Relaxed);
    (0..high)
        .filter(|&i| {
            TABLE[i].state.load(Ordering::Relaxed) & !ORPHAN == PENDING
                && matches!(try_advance(i), DONE | FREE)
        })
        .count()
}

/// The owner's test of its light request `i`: advances it, and once it ended frees the
/// slot and returns its outcome (`None`: not ended yet).
pub fn test(i: usize) -> Option<Result<()>> {
    match try_advance(i) {
        DONE => {}
        // Another thread (the progress thread, which may share our core) is advancing it,
        // e.g. copying a large block: let it run instead of spinning against it.
        BUSY => {
            std::thread::yield_now();
            return None;
        }
        _ => return None,
    }
    let slot = &TABLE[i];
    // SAFETY: done: the body is initialised, and only the owner (us) takes it.
    let r = unsafe { finish(slot) };
    slot.state.store(FREE, Ordering::Release);
    r
}

/// Whether the owner's light request `i` ended (advancing it first), without taking it:
/// `f` sees the outcome.
pub fn peek<R>(i: usize, f: impl FnOnce(&Result<()>) -> R) -> Option<R> {
    if try_advance(i) != DONE {
        return None;
    }
    // SAFETY: done: the body is initialised and stays until the owner (us) takes it.
    let body = unsafe { (*TABLE[i].body.get()).assume_init_ref() };
    body.outcome.as_ref().map(f)
}

/// Whether pending light request `i`, at its last advance, waited only for ranks pinned to
/// another CPU than ours (`SmNb::waits_remote_only`): its waiter may look again instead of
/// yielding its CPU. Advisory (false once it ended, or for a slot not live).
pub fn remote_only(i: usize) -> bool {
    TABLE[i].remote.load(Ordering::Relaxed)
}

/// The owner's word given to [`start`] for light request `i`.
pub fn owner(i: usize) -> i32 {
    TABLE[i].owner.load(Ordering::Relaxed)
}

/// Whether slot `i` holds a live light request (pending, busy or done, not an orphan).
pub fn is_live(i: usize) -> bool {
    let s = TABLE[i].state.load(Ordering::Acquire);
    matches!(s, PENDING | BUSY | DONE)
}

/// The owner gives up its light request `i` (`MPI_Request_free`): freed now if it ended,
/// otherwise by the thread that ends it.
pub fn free(i: usize) {
    let slot = &TABLE[i];
    loop {
        match slot.state.load(Ordering::Acquire) {
            PENDING => {
                if slot
                    .state
                    .compare_exchange(
                        PENDING,
                        PENDING | ORPHAN,
                        Ordering::AcqRel,
                        Ordering::Relaxed,
                    )
                    .is_ok()
                {
                    return;
                }
            }
            DONE => {
                drop(test(i));
                return;
            }
            BUSY => std::hint::spin_loop(),
            // Not live: nothing to free.
            _ => return,
        }
    }
}
