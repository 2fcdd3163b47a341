//! Per-function call counts and times for the job profile (`mpi_profile`): while it is on,
//! each outermost MPI call (one the application made; the library's own nested calls are
//! not counted, as a PMPI tool would not see them) is counted in a per-thread table. Off
//! (the default), an entry point pays one relaxed load.
//!
//! Counts are exact. Times are sampled, because reading the clock costs about as much as
//! a whole small-message MPI call (two reads per call doubled the 8-byte latency): on each
//! thread the first `TIMING_EXACT` (16) calls of a function are all timed, after them one
//! call in `TIMING_SAMPLE_EVERY` (256), the engine's policy (`oxmpi_engine::timing_sampled`)
//! that also samples the blocking waits. A function's total time is the sampled time scaled
//! by `count / timed` and its histogram the sampled one scaled the same way, so a function
//! called at most 16 times has exact figures.
//!
//! The per-call work is one thread-local access, a probe of an open-addressing table keyed
//! by the address of the function's name, and a plain load and store of its count (only
//! the owning thread writes it); the timed calls' figures sit behind a mutex taken only
//! for a timed call.

use oxmpi_engine::{timing_sampled as sampled, timing_scale as scale};
#[cfg(test)]
use oxmpi_engine::{TIMING_EXACT as EXACT_CALLS, TIMING_SAMPLE_EVERY as SAMPLE_EVERY};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Buckets of a duration histogram: bucket `b` counts calls of `2^(b-1)..2^b` nanoseconds.
pub(crate) const TIME_BUCKETS: usize = 40;

/// Slots of a thread's table (a power of two, well above the number of entry points).
const SLOTS: usize = 2048;

/// One function's calls.
#[derive(Debug, Clone)]
pub(crate) struct Calls {
    /// Calls made (exact).
    pub count: u64,
    /// Their total duration (estimated from the timed calls unless all were timed).
    pub total_ns: u64,
    /// Their durations by log2 bucket (scaled like `total_ns`).
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

/// The timed calls of one function on one thread.
#[derive(Debug, Clone)]
struct Timed {
    name: &'static str,
    calls: u64,
    total_ns: u64,
    hist: [u64; TIME_BUCKETS],
}

/// One thread's calls: slot `i` holds the function whose name starts at address
/// `keys[i]` (0: free) and its call count; only the owning thread writes either.
struct Table {
    keys: Box<[AtomicUsize]>,
    counts: Box<[AtomicU64]>,
    timed: Mutex<HashMap<usize, Timed>>,
}

impl Table {
    fn new() -> Table {
        Table {
            keys: (0..SLOTS).map(|_| AtomicUsize::new(0)).collect(),
            counts: (0..SLOTS).map(|_| AtomicU64::new(0)).collect(),
            timed: Mutex::new(HashMap::new()),
        }
    }

    /// The slot of `name` (claimed if new), or `None` when the table is full.
    #[inline]
    fn slot(&self, name: &'static str) -> Option<usize> {
        let key = name.as_ptr() as usize;
        let mut i = (key >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (usize::BITS - 11);
        for _ in 0..SLOTS {
            let k = self.keys[i].load(Ordering::Relaxed);
            if k == key {
                return Some(i);
            }
            if k == 0 {
                self.keys[i].store(key, Ordering::Relaxed);
                return Some(i);
            }
            i = (i + 1) & (SLOTS - 1);
        }
        None
    }

    /// Adds one timed call of `name` (slot `i`) lasting `ns`.
    fn add_timed(&self, i: usize, name: &'static str, ns: u64) {
        let mut t = self.timed.lock().unwrap_or_else(|p| p.into_inner());
        let e = t.entry(i).or_insert_with(|| Timed {
            name,
            calls: 0,
            total_ns: 0,
            hist: [0; TIME_BUCKETS],
        });
        e.calls += 1;
        e.total_ns += ns;
        e.hist[((u64::BITS - ns.leading_zeros()) as usize).min(TIME_BUCKETS - 1)] += 1;
    }
}

static ON: AtomicBool = AtomicBool::new(false);
static TABLES: Mutex<Vec<Arc<Table>>> = Mutex::new(Vec::new());

/// This thread's call depth and table.
struct Local {
    depth: Cell<u32>,
    table: Arc<Table>,
}

thread_local! {
    static LOCAL: Local = {
        let table = Arc::new(Table::new());
        TABLES.lock().unwrap_or_else(|p| p.into_inner()).push(table.clone());
        Local { depth: Cell::new(0), table }
    };
}

/// Whether calls are being counted (one relaxed load).
#[inline]
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Starts or stops counting calls.
pub(crate) fn set_on(v: bool) {
    ON.store(v, Ordering::Relaxed);
}

/// Runs `f`, the body of MPI function `name`, counting it (and timing it when sampled) if
/// it is an outermost call (out of line and cold: the profile is off by default).
#[cold]
pub(crate) fn timed<R>(name: &'static str, f: impl FnOnce() -> R) -> R {
    LOCAL.with(|l| {
        let depth = l.depth.get();
        l.depth.set(depth + 1);
        let slot = if depth == 0 { l.table.slot(name) } else { None };
        let Some(i) = slot else {
            let r = f();
            l.depth.set(depth);
            return r;
        };
        let n = l.table.counts[i].load(Ordering::Relaxed);
        l.table.counts[i].store(n + 1, Ordering::Relaxed);
        if !sampled(n) {
            let r = f();
            l.depth.set(0);
            return r;
        }
        let t0 = Instant::now();
        let r = f();
        let ns = t0.elapsed().as_nanos() as u64;
        l.depth.set(0);
        l.table.add_timed(i, name, ns);
        r
    })
}

/// Every function's calls so far, summed over the threads, by name.
pub(crate) fn snapshot() -> Vec<(&'static str, Calls)> {
    let mut sum: HashMap<&'static str, Calls> = HashMap::new();
    for t in TABLES.lock().unwrap_or_else(|p| p.into_inner()).iter() {
        for (&i, tm) in t.timed.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let count = t.counts[i].load(Ordering::Relaxed).max(tm.calls);
            let s = sum.entry(tm.name).or_default();
            s.count += count;
            s.total_ns += scale(tm.total_ns, count, tm.calls);
            for (a, &b) in s.hist.iter_mut().zip(&tm.hist) {
                *a += scale(b, count, tm.calls);
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

    #[test]
    fn counts_are_exact_and_times_are_scaled_from_the_samples() {
        let calls = EXACT_CALLS + 10 * SAMPLE_EVERY + 3;
        for _ in 0..calls {
            timed("MPI_Test_sampled", || {
                std::thread::sleep(std::time::Duration::from_micros(20))
            });
        }
        let s = snapshot();
        let c = &s.iter().find(|(n, _)| *n == "MPI_Test_sampled").unwrap().1;
        assert_eq!(c.count, calls);
        // Each call slept at least 20 us, so the scaled total is at least calls x 20 us.
        assert!(c.total_ns >= calls * 20_000, "{c:?}");
        // The scaled histogram sums to the count (up to rounding per bucket).
        let h: u64 = c.hist.iter().sum();
        assert!(h.abs_diff(calls) <= TIME_BUCKETS as u64, "{h} vs {calls}");
        let timed = t_calls("MPI_Test_sampled");
        assert_eq!(timed, EXACT_CALLS + 10);
    }

    /// How many calls of `name` this thread timed.
    fn t_calls(name: &str) -> u64 {
        LOCAL.with(|l| {
            l.table
                .timed
                .lock()
                .unwrap()
                .values()
                .filter(|t| t.name == name)
                .map(|t| t.calls)
                .sum()
        })
    }

    #[test]
    fn only_the_first_calls_and_every_sample_th_are_timed() {
        let picked: Vec<u64> = (0..EXACT_CALLS + 2 * SAMPLE_EVERY + 1)
            .filter(|&n| sampled(n))
            .collect();
        let mut want: Vec<u64> = (0..EXACT_CALLS).collect();
        want.extend([SAMPLE_EVERY, 2 * SAMPLE_EVERY]);
        assert_eq!(picked, want);
    }
}
