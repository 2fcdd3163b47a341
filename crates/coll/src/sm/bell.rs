//! A rank's doorbell on the segment: how a waiting rank that yields when idle sleeps
//! (a futex wait) until the rank that owns the word it waits for writes it, instead of
//! yielding its core at every look ([`super::segment::Seg`]'s `wait_word`).
//!
//! Each slot has a ring count and a count of sleepers (two 32-bit words of its first
//! line). A waiter registers as a sleeper, reads the ring count, looks at its word once
//! more and sleeps only if the word is still short, on the condition that the ring count
//! still holds what it read (the kernel compares). The slot's owner, after each store that
//! a waiter may wait for, looks at the sleepers and, when there is one, bumps the ring
//! count and wakes every sleeper. No wake-up is lost:
//! - the waiter's registration and the owner's store are each followed by a sequentially
//!   consistent fence: either the owner sees the sleeper (and rings), or the waiter's last
//!   look sees the store (and does not sleep);
//! - the waiter reads the ring count before its last look: a ring after that read changes
//!   the count, so the futex wait returns at once, or the ring finds the waiter asleep.
//!
//! The futex wait has a time limit (`coll_sm_sleep_max`): a sleeping rank polls no
//! transport, and a peer may need our point-to-point progress (the data of an earlier
//! `MPI_Isend`) before it reaches the collective.

use std::sync::atomic::{fence, AtomicU32, Ordering};
use std::time::Duration;

/// Where a waiter stands in [`Bell::sleep`] (for the interleaving test's hook).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    /// Registered as a sleeper (and fenced).
    Registered,
    /// Read the ring count.
    RingRead,
    /// Looked at the word a last time and found it short: about to sleep.
    Short,
    /// Back from the look or the sleep, still registered.
    Back,
}

/// Sleeping and waking on a ring count.
pub(crate) trait Futex {
    /// Sleep while `ring` holds `seen` (may return early).
    fn wait(&self, ring: &AtomicU32, seen: u32);
    /// Wake every sleeper on `ring`.
    fn wake(&self, ring: &AtomicU32);
}

/// The system's futex, shared between processes, with a time limit per wait.
pub(crate) struct SysFutex(pub(crate) Duration);

impl Futex for SysFutex {
    fn wait(&self, ring: &AtomicU32, seen: u32) {
        oxmpi_engine::sys::futex_wait_shared(ring, seen, self.0);
    }
    fn wake(&self, ring: &AtomicU32) {
        oxmpi_engine::sys::futex_wake_shared(ring);
    }
}

/// One rank's doorbell: the ring count and the number of sleepers (words of its slot).
#[derive(Clone, Copy)]
pub(crate) struct Bell<'a> {
    pub(crate) ring: &'a AtomicU32,
    pub(crate) sleepers: &'a AtomicU32,
}

impl Bell<'_> {
    /// Sleep until `ready()` holds or the owner rings (or the futex returns early):
    /// the caller looks at its word again after. `hook` sees each step (the interleaving
    /// test runs the owner's steps there; a no-op otherwise).
    #[inline]
    pub(crate) fn sleep(
        &self,
        ready: impl Fn() -> bool,
        f: &impl Futex,
        mut hook: impl FnMut(Step),
    ) {
        self.sleepers.fetch_add(1, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        hook(Step::Registered);
        let seen = self.ring.load(Ordering::Acquire);
        hook(Step::RingRead);
        if !ready() {
            hook(Step::Short);
            f.wait(self.ring, seen);
        }
        hook(Step::Back);
        self.sleepers.fetch_sub(1, Ordering::Relaxed);
    }

    /// After a store that a sleeper may wait for (the owner of the slot): wake the
    /// sleepers, if any.
    #[inline]
    pub(crate) fn ring(&self, f: &impl Futex) {
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::Relaxed) != 0 {
            self.ring.fetch_add(1, Ordering::Release);
            f.wake(self.ring);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::sync::atomic::AtomicU64;

    /// A futex model for one thread: a wait on an unchanged count leaves the waiter
    /// asleep until a later wake.
    #[derive(Default)]
    struct Model {
        asleep: Cell<bool>,
        slept: Cell<bool>,
    }
    impl Futex for Model {
        fn wait(&self, ring: &AtomicU32, seen: u32) {
            if ring.load(Ordering::Relaxed) == seen {
                self.asleep.set(true);
                self.slept.set(true);
            }
        }
        fn wake(&self, _: &AtomicU32) {
            self.asleep.set(false);
        }
    }

    /// The owner's two steps (the store, then the ring) placed at every point of the
    /// waiter's steps, in every order: the waiter never stays asleep once the word is
    /// written, and does sleep when the owner comes after its last look.
    #[test]
    fn no_interleaving_loses_the_wake_up() {
        // Waiter points: 0 before it starts, 1..=4 its steps (at 4 a sleeping waiter is
        // asleep in the kernel, still registered).
        let points = 5;
        let mut slept_somewhere = false;
        for store_at in 0..points {
            for ring_at in store_at..points {
                let (ring, sleepers, word) =
                    (AtomicU32::new(7), AtomicU32::new(0), AtomicU64::new(0));
                let bell = Bell {
                    ring: &ring,
                    sleepers: &sleepers,
                };
                let f = Model::default();
                let owner = |at: usize| {
                    if at == store_at {
                        word.store(1, Ordering::Release);
                    }
                    if at == ring_at {
                        bell.ring(&f);
                    }
                };
                owner(0);
                bell.sleep(
                    || word.load(Ordering::Acquire) >= 1,
                    &f,
                    |s| {
                        owner(match s {
                            Step::Registered => 1,
                            Step::RingRead => 2,
                            Step::Short => 3,
                            Step::Back => 4,
                        })
                    },
                );
                slept_somewhere |= f.slept.get();
                assert!(
                    !f.asleep.get(),
                    "store at {store_at}, ring at {ring_at}: the waiter sleeps on with the word written"
                );
            }
        }
        assert!(slept_somewhere, "some order must put the waiter to sleep");
    }
}
