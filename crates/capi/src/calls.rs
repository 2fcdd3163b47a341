//! Per-function call counts and times for the job profile (`mpi_profile`): while it is on,
//! each outermost MPI call (one the application made; the library's own nested calls are
//! not counted, as a PMPI tool would not see them) is counted in a table. Off (the
//! default), an entry point pays one relaxed load.
//!
//! Counts are exact. Times are sampled, because reading the clock costs about as much as
//! a whole small-message MPI call (two reads per call doubled the 8-byte latency): in each
//! table the first `TIMING_EXACT` (16) calls of a function are all timed, after them one
//! call in `TIMING_SAMPLE_EVERY` (256), the engine's policy (`oxmpi_engine::timing_sampled`)
//! that also samples the blocking waits. A function's total time is the sampled time scaled
//! by `count / timed` and its histogram the sampled one scaled the same way, so a function
//! called at most 16 times has exact figures.
//!
//! The per-call work: below `MPI_THREAD_MULTIPLE`, where no two threads are inside the
//! library at once, one table shared by the threads, reached without thread-local storage
//! (whose access from a shared library is a function call): a relaxed load and store of
//! the call depth, a probe of an open-addressing table keyed by the address of the
//! function's name, and a plain load and store of its count, before the body; a load and
//! store of the depth after it. The body is the same code whether the profile is on or
//! off (an earlier version ran it inside a cold copy of each entry point). With `MPI_THREAD_MULTIPLE`,
//! each thread counts in a table of its own (one thread-local access more). The timed
//! calls' figures sit behind a mutex taken only for a timed call. Library helper threads
//! (a nonblocking ULFM agreement, `MPI_Comm_idup`) that complete a request through an
//! entry point count like the application's calls, as before.

use oxmpi_engine::{timing_sampled as sampled, timing_scale as scale};
#[cfg(test)]
use oxmpi_engine::{TIMING_EXACT as EXACT_CALLS, TIMING_SAMPLE_EVERY as SAMPLE_EVERY};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Buckets of a duration histogram: bucket `b` counts calls of `2^(b-1)..2^b` nanoseconds.
pub(crate) const TIME_BUCKETS: usize = 40;

/// Slots of a table (a power of two, well above the number of entry points).
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

/// The timed calls of one function in one table.
#[derive(Debug, Clone)]
struct Timed {
    name: &'static str,
    calls: u64,
    total_ns: u64,
    hist: [u64; TIME_BUCKETS],
}

/// One slot of a table: the address of a function's name (0: free) and its call count,
/// side by side (one cache line for both).
struct Slot {
    key: AtomicUsize,
    count: AtomicU64,
}

/// One table of calls; only one thread at a time writes a slot.
struct Table {
    /// The call depth of the thread(s) counting here: only depth 0 calls are counted.
    depth: AtomicU32,
    slots: [Slot; SLOTS],
    timed: Mutex<Option<TimedCalls>>,
}

/// The timed calls of one table.
#[derive(Default)]
struct TimedCalls {
    /// By slot.
    calls: HashMap<usize, Timed>,
    /// The outermost call being timed now: its slot, name and start.
    running: Option<(usize, &'static str, Instant)>,
}

impl Table {
    const fn new() -> Table {
        Table {
            depth: AtomicU32::new(0),
            slots: [const {
                Slot {
                    key: AtomicUsize::new(0),
                    count: AtomicU64::new(0),
                }
            }; SLOTS],
            timed: Mutex::new(None),
        }
    }

    /// The slot of `name` (claimed if new), or `None` when the table is full: one probe
    /// inline, the rest (a collision, a new name) out of line.
    #[inline(always)]
    fn slot(&self, name: &'static str) -> Option<usize> {
        let key = name.as_ptr() as usize;
        let i = (key >> 3).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (usize::BITS - 11);
        if self.slots[i].key.load(Ordering::Relaxed) == key {
            return Some(i);
        }
        self.probe(key, i)
    }

    /// [`Table::slot`] past its first probe at `i`.
    #[cold]
    #[inline(never)]
    fn probe(&self, key: usize, mut i: usize) -> Option<usize> {
        for _ in 0..SLOTS {
            let k = self.slots[i].key.load(Ordering::Relaxed);
            if k == key {
                return Some(i);
            }
            if k == 0 {
                self.slots[i].key.store(key, Ordering::Relaxed);
                return Some(i);
            }
            i = (i + 1) & (SLOTS - 1);
        }
        None
    }

    /// Enters MPI function `name`: counts it if it is an outermost call, and for a
    /// sampled one notes the clock ([`Table::end`] takes the time).
    #[inline(always)]
    fn begin(&'static self, name: &'static str) -> Probe {
        let depth = self.depth.load(Ordering::Relaxed);
        self.depth.store(depth + 1, Ordering::Relaxed);
        let mut timed = false;
        if depth == 0 {
            if let Some(i) = self.slot(name) {
                let n = self.slots[i].count.load(Ordering::Relaxed);
                self.slots[i].count.store(n + 1, Ordering::Relaxed);
                if sampled(n) {
                    self.start_timing(i, name);
                    timed = true;
                }
            }
        }
        Probe {
            table: Some(self),
            timed,
        }
    }

    /// Leaves the call [`Table::begin`] entered.
    #[inline(always)]
    fn end(&self, timed: bool) {
        let depth = self.depth.load(Ordering::Relaxed);
        self.depth.store(depth.saturating_sub(1), Ordering::Relaxed);
        if timed {
            self.stop_timing();
        }
    }

    /// Notes the start of a timed call (slot `i`, function `name`).
    #[cold]
    #[inline(never)]
    fn start_timing(&self, i: usize, name: &'static str) {
        let mut g = self.timed.lock().unwrap_or_else(|p| p.into_inner());
        g.get_or_insert_with(Default::default).running = Some((i, name, Instant::now()));
    }

    /// Adds the call whose start [`Table::start_timing`] noted.
    #[cold]
    #[inline(never)]
    fn stop_timing(&self) {
        let mut g = self.timed.lock().unwrap_or_else(|p| p.into_inner());
        let Some(t) = g.as_mut() else { return };
        if let Some((i, name, t0)) = t.running.take() {
            let ns = t0.elapsed().as_nanos() as u64;
            let e = t.calls.entry(i).or_insert_with(|| Timed {
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
}

/// What [`begin`] hands to [`end`]: the table an MPI call was entered in (none while the
/// profile is off) and whether the call is being timed.
#[derive(Clone, Copy)]
pub(crate) struct Probe {
    table: Option<&'static Table>,
    timed: bool,
}

/// Not counting.
const OFF: u8 = 0;
/// Counting in [`SHARED`] (below `MPI_THREAD_MULTIPLE`).
const ONE_TABLE: u8 = 1;
/// Counting in each thread's own table.
const PER_THREAD: u8 = 2;

static MODE: AtomicU8 = AtomicU8::new(OFF);
/// The table of the calls made below `MPI_THREAD_MULTIPLE`.
static SHARED: Table = Table::new();
/// The per-thread tables (leaked: they live as long as the process).
static TABLES: Mutex<Vec<&'static Table>> = Mutex::new(Vec::new());

thread_local! {
    /// This thread's table, with `MPI_THREAD_MULTIPLE`.
    static LOCAL: Cell<Option<&'static Table>> = const { Cell::new(None) };
}

/// This thread's table (created on its first counted call).
fn local() -> &'static Table {
    LOCAL.with(|l| {
        l.get().unwrap_or_else(|| {
            let t: &'static Table = Box::leak(Box::new(Table::new()));
            TABLES.lock().unwrap_or_else(|p| p.into_inner()).push(t);
            l.set(Some(t));
            t
        })
    })
}

/// Starts counting calls (`multiple`: threads may call concurrently,
/// `MPI_THREAD_MULTIPLE`) or stops (`None`).
pub(crate) fn set_on(on: Option<bool>) {
    let mode = match on {
        None => OFF,
        Some(false) => ONE_TABLE,
        Some(true) => PER_THREAD,
    };
    MODE.store(mode, Ordering::Relaxed);
}

/// Enters MPI function `name` (before its body): while the profile is off, one relaxed
/// load; on, the call is counted if it is an outermost one (see the module's text).
#[inline(always)]
pub(crate) fn begin(name: &'static str) -> Probe {
    match MODE.load(Ordering::Relaxed) {
        OFF => Probe {
            table: None,
            timed: false,
        },
        ONE_TABLE => SHARED.begin(name),
        _ => begin_threaded(name),
    }
}

/// [`begin`] with `MPI_THREAD_MULTIPLE`: in this thread's table.
#[cold]
#[inline(never)]
fn begin_threaded(name: &'static str) -> Probe {
    local().begin(name)
}

/// Leaves the MPI call [`begin`] entered (after its body).
#[inline(always)]
pub(crate) fn end(p: Probe) {
    if let Some(t) = p.table {
        t.end(p.timed);
    }
}

/// Every function's calls so far, summed over the threads, by name.
pub(crate) fn snapshot() -> Vec<(&'static str, Calls)> {
    let mut sum: HashMap<&'static str, Calls> = HashMap::new();
    let tables = TABLES.lock().unwrap_or_else(|p| p.into_inner());
    for t in std::iter::once(&SHARED).chain(tables.iter().copied()) {
        let timed = t.timed.lock().unwrap_or_else(|p| p.into_inner());
        for (&i, tm) in timed.iter().flat_map(|t| &t.calls) {
            let count = t.slots[i].count.load(Ordering::Relaxed).max(tm.calls);
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

    /// Runs `f`, the body of MPI function `name`, counted in table `t`.
    fn count_in<R>(t: &'static Table, name: &'static str, f: impl FnOnce() -> R) -> R {
        let p = t.begin(name);
        let r = f();
        end(p);
        r
    }

    #[test]
    fn outermost_calls_are_counted_with_their_time() {
        // The shared table (used by this test only: tests run on threads of their own).
        let r = count_in(&SHARED, "MPI_Test_outer", || {
            count_in(&SHARED, "MPI_Test_inner", || 7)
        });
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
            count_in(local(), "MPI_Test_sampled", || {
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

    /// How many calls of `name` this thread's table timed.
    fn t_calls(name: &str) -> u64 {
        local()
            .timed
            .lock()
            .unwrap()
            .iter()
            .flat_map(|t| &t.calls)
            .filter(|(_, t)| t.name == name)
            .map(|(_, t)| t.calls)
            .sum()
    }

    #[test]
    fn per_thread_tables_count_their_threads_calls() {
        let t = std::thread::spawn(|| {
            for _ in 0..3 {
                count_in(local(), "MPI_Test_threaded", || ());
            }
        });
        t.join().unwrap();
        let s = snapshot();
        let c = &s.iter().find(|(n, _)| *n == "MPI_Test_threaded").unwrap().1;
        assert_eq!(c.count, 3);
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
