//! The shared file pointer: a counter held by rank 0 of the file's group
//! ([`crate::rma::Counter`]: reached directly by the ranks of rank 0's node and with
//! messages from other nodes, so ranks that share only the file system agree on it), or
//! local memory for a file opened by one process.

use crate::ffi::MpiResult;
use crate::rma::Counter;
use std::ffi::c_int;
use std::sync::atomic::{AtomicI64, Ordering};

/// The counter behind the shared file pointer (in etypes of the view).
pub(super) enum SharedPtr {
    /// A file opened by a single process.
    Local(AtomicI64),
    /// The counter at rank 0 of the file's group.
    Held(Counter),
}

impl SharedPtr {
    /// Advance by `n`; the position before.
    pub(super) fn fetch_add(&self, n: i64) -> MpiResult<i64> {
        match self {
            SharedPtr::Local(a) => Ok(a.fetch_add(n, Ordering::SeqCst)),
            SharedPtr::Held(c) => c.fetch_add(n),
        }
    }

    /// The position.
    pub(super) fn load(&self) -> MpiResult<i64> {
        match self {
            SharedPtr::Local(a) => Ok(a.load(Ordering::SeqCst)),
            SharedPtr::Held(c) => c.load(),
        }
    }

    /// Move to `v`.
    pub(super) fn store(&self, v: i64) -> MpiResult {
        match self {
            SharedPtr::Local(a) => {
                a.store(v, Ordering::SeqCst);
                Ok(())
            }
            SharedPtr::Held(c) => c.store(v),
        }
    }

    /// Release it (collective over the file's group, at close).
    pub(super) fn free(&self) -> MpiResult {
        match self {
            SharedPtr::Local(_) => Ok(()),
            SharedPtr::Held(c) => c.free(),
        }
    }
}

/// Collectively create the shared file pointer of a file opened by `size` ranks on
/// `comm` (the file's private communicator), starting at `init`.
pub(super) fn shared_ptr(comm: c_int, size: usize, init: i64) -> MpiResult<SharedPtr> {
    if size == 1 {
        return Ok(SharedPtr::Local(AtomicI64::new(init)));
    }
    Counter::new(comm, init).map(SharedPtr::Held)
}
