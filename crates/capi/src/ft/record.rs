//! ULFM's record of each communicator (agreements started, failures acknowledged), by its
//! point-to-point context id, dropped when the communicator is freed ([`forget`], called by
//! `comm::free`, which `ft` itself uses: this file is below both).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// Per communicator (by its point-to-point context id): agreements started and the
/// failures acknowledged (world ranks).
#[derive(Default)]
pub(crate) struct FtComm {
    pub(crate) seq: u32,
    pub(crate) acked: Vec<i32>,
}

/// The records, by point-to-point context id.
pub(crate) static COMMS: Mutex<BTreeMap<u32, FtComm>> = Mutex::new(BTreeMap::new());
/// Whether [`COMMS`] ever had a record (lets [`forget`] skip its lock in programs that
/// make no `MPIX_` call).
static USED: AtomicBool = AtomicBool::new(false);

/// The ULFM record of the communicator with context `ctx`, under the lock.
pub(crate) fn with_comm<R>(ctx: u32, f: impl FnOnce(&mut FtComm) -> R) -> R {
    let mut m = COMMS.lock().unwrap_or_else(|e| e.into_inner());
    USED.store(true, Ordering::Relaxed);
    f(m.entry(ctx).or_default())
}

/// Drops the ULFM record of a freed communicator with context `ctx`: a new communicator
/// that reuses the id starts with no agreement counted and no failure acknowledged (a
/// record kept would give its members different agreement tags where they counted
/// differently on the freed communicators of that id).
pub(crate) fn forget(ctx: u32) {
    if USED.load(Ordering::Relaxed) {
        COMMS.lock().unwrap_or_else(|e| e.into_inner()).remove(&ctx);
    }
}
