//! Per-function call counts and times for the job profile (`mpi_profile`): while it is on,
//! each outermost MPI call (one the application made; the library's own nested calls are
//! not counted, as a PMPI tool would not see them) adds its duration to its function's
//! count, total and log2 histogram in a per-thread table. Off (the default), an entry point
//! pays one relaxed load.

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Buckets of a duration histogram: bucket `b` counts calls of `2^(b-1)..2^b` nanoseconds.
pub(crate) const TIME_BUCKETS: usize = 40;

/// One function's calls.
#[derive(Debug, Clone)]
pub(crate) struct Calls {
    pub count: u64,
    pub total_ns: u64,
    pub hist: [u64; TIME_BUCKETS],
}

impl Default for Calls {
    fn default() -> Self {
        Calls {
            count: 0,
            total_ns: 0,
            hist: [0; TIME_BUCKETS],
        }
    }
}

type Table = HashMap<&'static str, Calls>;

static ON: AtomicBool = AtomicBool::new(false);
static TABLES: Mutex<Vec<Arc<Mutex<Table>>>> = Mutex::new(Vec::new());

thread_local! {
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    static MINE: Arc<Mutex<Table>> = {
        let t = Arc::new(Mutex::new(Table::new()));
        TABLES.lock().unwrap_or_else(|p| p.into_inner()).push(t.clone());
        t
    };
}

/// Whether calls are being timed (one relaxed load).
#[inline]
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Starts or stops timing calls.
pub(crate) fn set_on(v: bool) {
    ON.store(v, Ordering::Relaxed);
}

/// Runs `f`, the body of MPI function `name`, timing it if it is an outermost call.
#[cold]
pub(crate) fn timed<R>(name: &'static str, f: impl FnOnce() -> R) -> R {
    let depth = DEPTH.with(|d| d.replace(d.get() + 1));
    if depth > 0 {
        let r = f();
        DEPTH.with(|d| d.set(depth));
        return r;
    }
    let t0 = Instant::now();
    let r = f();
    let ns = t0.elapsed().as_nanos() as u64;
    DEPTH.with(|d| d.set(0));
    MINE.with(|t| {
        let mut t = t.lock().unwrap_or_else(|p| p.into_inner());
        let c = t.entry(name).or_default();
        c.count += 1;
        c.total_ns += ns;
        c.hist[((u64::BITS - ns.leading_zeros()) as usize).min(TIME_BUCKETS - 1)] += 1;
    });
    r
}

/// Every function's calls so far, summed over the threads, by name.
pub(crate) fn snapshot() -> Vec<(&'static str, Calls)> {
    let mut sum = Table::new();
    for t in TABLES.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        for (name, c) in t.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let s = sum.entry(name).or_default();
            s.count += c.count;
            s.total_ns += c.total_ns;
            for (a, b) in s.hist.iter_mut().zip(c.hist) {
                *a += b;
            }
        }
    }
    let mut v: Vec<_> = sum.into_iter().collect();
    v.sort_by_key(|(n, _)| *n);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outermost_calls_are_counted_with_their_time() {
        let r = timed("MPI_Test_outer", || timed("MPI_Test_inner", || 7));
        assert_eq!(r, 7);
        let s = snapshot();
        let outer = &s.iter().find(|(n, _)| *n == "MPI_Test_outer").unwrap().1;
        assert_eq!(outer.count, 1);
        assert_eq!(outer.hist.iter().sum::<u64>(), 1);
        assert!(!s.iter().any(|(n, _)| *n == "MPI_Test_inner"));
    }
}
