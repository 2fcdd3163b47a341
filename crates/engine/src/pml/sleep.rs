//! Threads that sleep until traffic comes (`Engine::wait_message`, e.g. the one-sided
//! progress thread): each registers its doorbell (`sys::bell`, an eventfd) with the context
//! id and tag it waits for, and sleeps in `poll` on the doorbell and the sockets of the peers it
//! expects a message from. Whoever holds the engine lock when something the sleepers may
//! wait for happens (an envelope on their context taken off a socket by another thread,
//! records left in a link's user-space buffer, a peer declared dead) sets [`State::wake`];
//! releasing the lock then rings every registered doorbell. Registration happens under the
//! same lock as the sleeper's last look at the matching queues, so no arrival is missed.
//! While another thread polls every transport ([`State::pollers`]), a sleeper may leave
//! the sockets to it and sleep on its doorbell alone for a bounded time (the hand-off of
//! `Engine::wait_message`); the poller rings it as soon as it takes a matching envelope,
//! unless the poller serves that context and tag itself (`Engine::serving`).

use std::os::fd::RawFd;

use super::State;
use crate::btl::Wake;
use crate::sys;

impl State {
    /// An envelope with `tag` arrived on context `ctx`: wake the sleepers when one waits
    /// for it, unless a polling thread serves that context and tag itself
    /// ([`State::served`]).
    #[inline]
    pub(crate) fn arrived_on(&mut self, ctx: u32, tag: i32) {
        // A marked message is one of its tag without the mark.
        let tag = tag & !crate::TAG_MARK;
        if !self.served.contains(&(ctx, tag))
            && self
                .sleepers
                .iter()
                .any(|s| s.0 == ctx && (s.1 == tag || s.1 == crate::ANY_TAG))
        {
            self.wake = true;
        }
    }

    /// Something any sleeper may wait for happened (records left in a link's buffer, a
    /// failed peer): wake them all, if there are any.
    #[inline]
    pub(crate) fn may_wake(&mut self) {
        if !self.sleepers.is_empty() {
            self.wake = true;
        }
    }

    /// Rings every sleeper's doorbell (the engine lock's release does this when
    /// [`State::wake`] is set).
    #[cold]
    pub(crate) fn ring_sleepers(&mut self) {
        self.wake = false;
        for &(_, _, fd) in &self.sleepers {
            sys::ring(fd);
        }
    }

    /// Rings the doorbells of the sleepers waiting on context `ctx` (a thread that wants
    /// them to look again, e.g. to see a stop flag).
    pub(crate) fn ring_ctx(&mut self, ctx: u32) {
        for &(c, _, fd) in &self.sleepers {
            if c == ctx {
                sys::ring(fd);
            }
        }
    }

    /// The descriptors to sleep on until world ranks `from` send something: pushed into
    /// `fds` with [`Wake::Fds`]; [`Wake::Now`] if something is there already (a record in a
    /// link's buffer, a record queued for the peer); [`Wake::Opaque`] if some link of
    /// theirs has no descriptor that tells. Dead peers and ourselves are skipped.
    pub(crate) fn wait_set(&self, from: &[i32], fds: &mut Vec<(RawFd, bool)>) -> Wake {
        let mut w = Wake::Fds;
        for &r in from {
            let Some(p) = self.peers.get(r as usize) else {
                continue;
            };
            if r == self.me || p.dead {
                continue;
            }
            let Some(link) = p.link.as_ref() else {
                continue;
            };
            match link.wait_fds(!p.outq.is_empty(), fds) {
                Wake::Now => return Wake::Now,
                Wake::Opaque => w = Wake::Opaque,
                Wake::Fds => {}
            }
        }
        w
    }

    /// Registers doorbell `bell` as a sleeper for `tag` (or `ANY_TAG`) on context `ctx`.
    pub(crate) fn add_sleeper(&mut self, ctx: u32, tag: i32, bell: RawFd) {
        self.sleepers.push((ctx, tag, bell));
    }

    /// Removes doorbell `bell` from the sleepers.
    pub(crate) fn remove_sleeper(&mut self, bell: RawFd) {
        if let Some(i) = self.sleepers.iter().position(|s| s.2 == bell) {
            self.sleepers.swap_remove(i);
        }
    }
}
