//! Per-function call counts and times for the job profile (`mpi_profile`): while it is on,
//! each outermost MPI call (one the application made; the library's own nested calls are
//! not counted, as a PMPI tool would not see them) is counted. Off (the default), an entry
//! point pays one relaxed load.
//!
//! Counts are exact. Times are sampled, because reading the clock costs about as much as
//! a whole small-message MPI call (two reads per call doubled the 8-byte latency): the
//! first `TIMING_EXACT` (16) calls of a function are all timed, after them one call in
//! `TIMING_SAMPLE_EVERY` (256), the engine's policy (`oxmpi_engine::timing_sampled`) that
//! also samples the blocking waits. A function's total time is the sampled time scaled by
//! `count / timed` and its histogram the sampled one scaled the same way, so a function
//! called at most 16 times has exact figures. A call that is not timed reads no clock and
//! touches no histogram.
//!
//! Each entry point has a [`Site`] of its own, a static that `mpi_fn!` declares next to
//! it. Below `MPI_THREAD_MULTIPLE`, where no two threads are inside the library at once,
//! the call is counted in its site (no table search, no thread-local storage, whose
//! access from a shared library is a function call): per call, a relaxed load and store
//! of the call depth and of the site's count and one comparison that picks the sampled
//! calls, before the body; a load and store of the depth after it (a timed call marks the
//! depth, so nothing else is handed from before the body to after it). The body is the
//! same code whether the profile is on or off. With `MPI_THREAD_MULTIPLE`, each thread
//! counts in a table of its own, indexed by the site's number (given at its first counted
//! call). The timed calls' figures sit behind a mutex taken only for a timed call.
//! Library helper threads (a nonblocking ULFM agreement, `MPI_Comm_idup`) that complete a
//! request through an entry point count like the application's calls, as before.

use oxmpi_engine::{timing_sampled as sampled, timing_scale as scale};
#[cfg(test)]
use oxmpi_engine::{TIMING_EXACT as EXACT_CALLS, TIMING_SAMPLE_EVERY as SAMPLE_EVERY};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Buckets of a duration histogram: bucket `b` counts calls of `2^(b-1)..2^b` nanoseconds.
pub(crate) const TIME_BUCKETS: usize = 40;

/// Sites a per-thread table has room for (well above the number of entry points; a site
/// numbered beyond it is not counted with `MPI_THREAD_MULTIPLE`).
const SLOTS: usize = 2048;

/// The depth mark of an outermost call being timed: [`Table::end`] sees it and takes the
/// time.
const TIMED: u32 = 1 << 31;

/// One entry point's counters: its name, the calls counted below `MPI_THREAD_MULTIPLE`,
/// and its number among the sites counted so far.
pub(crate) struct Site {
    /// The MPI function's name.
    pub(crate) name: &'static str,
    /// Calls counted below `MPI_THREAD_MULTIPLE`.
    count: AtomicU64,
    /// 1 + its index in [`SITES`] (its slot in a per-thread table); 0 until its first
    /// counted call.
    number: AtomicU32,
}

impl Site {
    /// The site of MPI function `name`.
    pub(crate) const fn new(name: &'static str) -> Site {
        Site {
            name,
            count: AtomicU64::new(0),
            number: AtomicU32::new(0),
        }
    }

    /// Its index in [`SITES`], numbering it on first use.
    fn index(&'static self) -> usize {
        match self.number.load(Ordering::Relaxed) {
            0 => self.register(),
            n => n as usize - 1,
        }
    }

    /// Numbers this site (once, under the lock of the list).
    #[cold]
    #[inline(never)]
    fn register(&'static self) -> usize {
        let mut sites = SITES.lock().unwrap_or_else(|p| p.into_inner());
        match self.number.load(Ordering::Relaxed) {
            0 => {
                sites.push(self);
                self.number.store(sites.len() as u32, Ordering::Relaxed);
                sites.len() - 1
            }
            n => n as usize - 1,
        }
    }
}

/// Every site counted so far, by index.
static SITES: Mutex<Vec<&'static Site>> = Mutex::new(Vec::new());

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
    calls: u64,
    total_ns: u64,
    hist: [u64; TIME_BUCKETS],
}

/// The timed calls of one table.
#[derive(Default)]
struct TimedCalls {
    /// By site index.
    calls: HashMap<usize, Timed>,
    /// The outermost call being timed now: its site index and start.
    running: Option<(usize, Instant)>,
}

/// Where calls are counted: the shared depth and timings below `MPI_THREAD_MULTIPLE`
/// (the counts are in the sites), or one thread's depth, counts and timings.
struct Table {
    /// The call depth of the thread(s) counting here (only depth 0 calls are counted),
    /// plus [`TIMED`] while an outermost timed call runs.
    depth: AtomicU32,
    /// By site index (per-thread tables only).
    counts: Option<Box<[AtomicU64]>>,
    timed: Mutex<Option<TimedCalls>>,
}

impl Table {
    /// The count of `site`'s calls made here.
    fn count(&self, site: &'static Site) -> Option<&AtomicU64> {
        match &self.counts {
            None => Some(&site.count),
            Some(c) => c.get(site.index()),
        }
    }

    /// Counts `site`'s call and for a sampled one notes the clock (the caller is an
    /// outermost call, the depth already raised).
    #[inline(always)]
    fn count_call(&self, site: &'static Site, count: &AtomicU64) {
        let n = count.load(Ordering::Relaxed);
        count.store(n + 1, Ordering::Relaxed);
        if sampled(n) {
            self.start_timing(site);
        }
    }

    /// Leaves the call [`begin`] entered here.
    #[inline(always)]
    fn end(&self) {
        let depth = self.depth.load(Ordering::Relaxed);
        if depth == TIMED + 1 {
            self.stop_timing();
        } else {
            self.depth.store(depth.saturating_sub(1), Ordering::Relaxed);
        }
    }

    /// Notes the start of a timed call of `site` and marks the depth.
    #[cold]
    #[inline(never)]
    fn start_timing(&self, site: &'static Site) {
        let i = site.index();
        let mut g = self.timed.lock().unwrap_or_else(|p| p.into_inner());
        g.get_or_insert_with(Default::default).running = Some((i, Instant::now()));
        self.depth.store(TIMED + 1, Ordering::Relaxed);
    }

    /// Adds the call whose start [`Table::start_timing`] noted and leaves it.
    #[cold]
    #[inline(never)]
    fn stop_timing(&self) {
        let mut g = self.timed.lock().unwrap_or_else(|p| p.into_inner());
        self.depth.store(0, Ordering::Relaxed);
        let Some(t) = g.as_mut() else { return };
        if let Some((i, t0)) = t.running.take() {
            let ns = t0.elapsed().as_nanos() as u64;
            let e = t.calls.entry(i).or_insert_with(|| Timed {
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
/// profile is off).
#[derive(Clone, Copy)]
pub(crate) struct Probe(Option<&'static Table>);

/// Not counting.
const OFF: u8 = 0;
/// Counting in the sites (below `MPI_THREAD_MULTIPLE`).
const ONE_TABLE: u8 = 1;
/// Counting in each thread's own table.
const PER_THREAD: u8 = 2;

static MODE: AtomicU8 = AtomicU8::new(OFF);
/// The depth and timings of the calls made below `MPI_THREAD_MULTIPLE`.
static SHARED: Table = Table {
    depth: AtomicU32::new(0),
    counts: None,
    timed: Mutex::new(None),
};
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
            let t: &'static Table = Box::leak(Box::new(Table {
                depth: AtomicU32::new(0),
                counts: Some((0..SLOTS).map(|_| AtomicU64::new(0)).collect()),
                timed: Mutex::new(None),
            }));
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

/// Whether the profile is off (no call is counted): a call that skips [`begin`] then
/// loses no count.
#[inline(always)]
pub(crate) fn off() -> bool {
    MODE.load(Ordering::Relaxed) == OFF
}

/// Enters MPI function `site` (before its body): while the profile is off, one relaxed
/// load; on, the call is counted if it is an outermost one (see the module's text).
#[inline(always)]
pub(crate) fn begin(site: &'static Site) -> Probe {
    match MODE.load(Ordering::Relaxed) {
        OFF => Probe(None),
        ONE_TABLE => Probe(Some(enter_in(&SHARED, site, &site.count))),
        _ => begin_threaded(site),
    }
}

/// Raises the depth of `t` and counts `site`'s call in `count` if it is an outermost one.
#[inline(always)]
fn enter_in(t: &'static Table, site: &'static Site, count: &AtomicU64) -> &'static Table {
    let depth = t.depth.load(Ordering::Relaxed);
    t.depth.store(depth + 1, Ordering::Relaxed);
    if depth == 0 {
        t.count_call(site, count);
    }
    t
}

/// [`begin`] with `MPI_THREAD_MULTIPLE`: in this thread's table.
#[cold]
#[inline(never)]
fn begin_threaded(site: &'static Site) -> Probe {
    let t = local();
    match t.count(site) {
        Some(c) => Probe(Some(enter_in(t, site, c))),
        None => Probe(None),
    }
}

/// Leaves the MPI call [`begin`] entered (after its body).
#[inline(always)]
pub(crate) fn end(p: Probe) {
    if let Some(t) = p.0 {
        t.end();
    }
}

/// Every function's calls so far, summed over the threads (and the sites of one name),
/// by name.
pub(crate) fn snapshot() -> Vec<(&'static str, Calls)> {
    let sites: Vec<&'static Site> = SITES.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut sum: HashMap<&'static str, Calls> = HashMap::new();
    let tables = TABLES.lock().unwrap_or_else(|p| p.into_inner());
    for t in std::iter::once(&SHARED).chain(tables.iter().copied()) {
        let timed = t.timed.lock().unwrap_or_else(|p| p.into_inner());
        for (i, site) in sites.iter().enumerate() {
            let count = t.count(site).map_or(0, |c| c.load(Ordering::Relaxed));
            let tm = timed.as_ref().and_then(|t| t.calls.get(&i));
            if count == 0 && tm.is_none() {
                continue;
            }
            let s = sum.entry(site.name).or_default();
            let timed_calls = tm.map_or(0, |tm| tm.calls);
            let count = count.max(timed_calls);
            s.count += count;
            if let Some(tm) = tm {
                s.total_ns += scale(tm.total_ns, count, tm.calls);
                for (a, &b) in s.hist.iter_mut().zip(&tm.hist) {
                    *a += scale(b, count, tm.calls);
                }
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

    /// Runs `f`, the body of MPI function `site`, counted in table `t`.
    fn count_in<R>(t: &'static Table, site: &'static Site, f: impl FnOnce() -> R) -> R {
        let p = Probe(Some(enter_in(t, site, t.count(site).unwrap())));
        let r = f();
        end(p);
        r
    }

    static OUTER: Site = Site::new("MPI_Test_outer");
    static INNER: Site = Site::new("MPI_Test_inner");
    static SAMPLED: Site = Site::new("MPI_Test_sampled");
    static THREADED: Site = Site::new("MPI_Test_threaded");
    static TWIN_A: Site = Site::new("MPI_Test_twin");
    static TWIN_B: Site = Site::new("MPI_Test_twin");

    #[test]
    fn outermost_calls_are_counted_with_their_time() {
        // The shared table (used by this test only: tests run on threads of their own).
        let r = count_in(&SHARED, &OUTER, || count_in(&SHARED, &INNER, || 7));
        assert_eq!(r, 7);
        // The timed call left the depth as it found it.
        assert_eq!(SHARED.depth.load(Ordering::Relaxed), 0);
        let s = snapshot();
        let outer = &s.iter().find(|(n, _)| *n == "MPI_Test_outer").unwrap().1;
        assert_eq!(outer.count, 1);
        assert_eq!(outer.hist.iter().sum::<u64>(), 1);
        assert!(!s.iter().any(|(n, _)| *n == "MPI_Test_inner"));
        // Two sites of one name (an entry point and a helper) add up.
        count_in(&SHARED, &TWIN_A, || ());
        count_in(&SHARED, &TWIN_B, || ());
        let s = snapshot();
        assert_eq!(
            s.iter()
                .find(|(n, _)| *n == "MPI_Test_twin")
                .unwrap()
                .1
                .count,
            2
        );
    }

    #[test]
    fn counts_are_exact_and_times_are_scaled_from_the_samples() {
        let calls = EXACT_CALLS + 10 * SAMPLE_EVERY + 3;
        for _ in 0..calls {
            count_in(local(), &SAMPLED, || {
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
        let timed = local()
            .timed
            .lock()
            .unwrap()
            .as_ref()
            .and_then(|t| t.calls.get(&SAMPLED.index()).map(|t| t.calls));
        assert_eq!(timed, Some(EXACT_CALLS + 10));
        assert_eq!(local().depth.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn per_thread_tables_count_their_threads_calls() {
        let t = std::thread::spawn(|| {
            for _ in 0..3 {
                count_in(local(), &THREADED, || ());
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
