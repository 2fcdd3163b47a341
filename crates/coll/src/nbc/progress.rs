//! Progress of started schedules, whatever the application does meanwhile.
//!
//! [`start`] advances a new schedule once and, unless it has already ended, puts it on a
//! process-wide list of active schedules. A progress thread (started at the first such
//! schedule; it looks every 0.5 ms, or every 4 ms when this node's ranks yield when idle
//! or the process is bound to one CPU,
//! for a while after the list empties, then sleeps until [`start`] wakes it) advances every active schedule and runs its
//! completion callback when it ends; [`progress_pending`] lets a waiting thread advance
//! them itself (the thread then keeps out of its way). Callers attach what completion
//! means to them (unpack packed data, complete a request) as the callback; nothing here
//! knows MPI handles.

use super::sched::Schedule;
use crate::Result;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// What to do when a schedule ends: gets the schedule back (its owned regions hold received
/// data; a persistent collective keeps it to [`Schedule::restart`] it) and its outcome. Runs
/// on the thread that advanced the schedule last, with no lock of this module held.
pub type Done = Box<dyn FnOnce(Schedule, Result<()>) + Send>;

/// A started schedule and its completion.
struct Active {
    sched: Schedule,
    done: Done,
}

static ACTIVE: Mutex<Vec<Active>> = Mutex::new(Vec::new());
/// Number of schedules in `ACTIVE` (lets [`progress_pending`] return at once when none).
static NACTIVE: AtomicUsize = AtomicUsize::new(0);
/// Calls of [`progress_pending`] that found active schedules: while this moves, a waiting
/// thread drives them and the progress thread keeps out of its way.
static POLLS: AtomicUsize = AtomicUsize::new(0);
static WAKE: Condvar = Condvar::new();
static THREAD: std::sync::Once = std::sync::Once::new();
/// Set (under the `ACTIVE` lock) while the progress thread waits without a timeout: only
/// then must [`start`] wake it.
static SLEEPING: AtomicBool = AtomicBool::new(false);
/// How long the progress thread waits between looks while it lingers (the list empty, or
/// waiting threads driving the schedules themselves).
const LINGER: Duration = Duration::from_micros(500);
/// [`LINGER`] when the ranks yield when idle (more ranks than cores, [`ranks_yield`]) or
/// the process is bound to one CPU:
/// every look then takes a core from a rank, and a look that finds nothing (the waiting
/// threads completed their collectives) is a context switch for nothing. With 8 ranks on
/// 2 cores, looks every 0.5 ms made iallgather(v) in place at 64 KiB about 17% slower than
/// with no progress thread at all (350 against 292 µs).
const LINGER_YIELDING: Duration = Duration::from_millis(4);
/// How long the progress thread lingers after the last nonblocking collective ended before
/// it waits without a timeout.
const LINGER_FOR: Duration = Duration::from_millis(200);
/// Whether this process's ranks yield when idle ([`ranks_yield`]).
static YIELDING: AtomicBool = AtomicBool::new(false);

/// Tell the progress thread that the ranks of this node yield when idle (more ranks than
/// cores): it then lingers at [`LINGER_YIELDING`] instead of [`LINGER`]. Schedules of
/// [`WAKE_MIN_BYTES`] or more still wake it at once.
pub fn ranks_yield(yes: bool) {
    YIELDING.store(yes, Ordering::Relaxed);
}

/// Whether this process may run on one CPU only (bound to a core, as `--bind-to core`
/// does): the progress thread then shares the waiting thread's core, and every look it
/// takes preempts it. Measured at np=2 bound, ialltoall 1 MiB: 209 µs with looks every
/// 0.5 ms, 182 every 4 ms, 175 with no progress thread (Open MPI 177).
fn one_cpu() -> bool {
    static ONE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ONE.get_or_init(detect_one_cpu)
}

/// [`one_cpu`] before it is cached: the calling thread's affinity mask (and CPU quota)
/// allows one CPU only.
fn detect_one_cpu() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() == 1)
}

/// The progress thread's interval between looks while it lingers: [`LINGER_YIELDING`]
/// when the ranks yield when idle or this process has one CPU, else [`LINGER`].
fn linger() -> Duration {
    interval(YIELDING.load(Ordering::Relaxed), one_cpu())
}

/// [`linger`]'s choice, given whether the ranks yield and whether the process has one CPU.
fn interval(yielding: bool, one_cpu: bool) -> Duration {
    if yielding || one_cpu {
        LINGER_YIELDING
    } else {
        LINGER
    }
}
/// Longest sleep of the progress thread while waiting threads keep driving the schedules
/// themselves ([`driven_sleep`]).
const DRIVEN_MAX: Duration = Duration::from_millis(16);

/// The progress thread's sleep after its `n`-th look in a row (from 0) that found waiting
/// threads driving the schedules themselves ([`progress_pending`] calls since the last look):
/// `every` ([`linger`]) doubled at each such look, at most [`DRIVEN_MAX`]. A program that
/// posts and then waits at once (a loop of nonblocking collectives, each completed by its
/// own wait) then leaves the thread asleep instead of waking it every `every` for nothing:
/// each wake takes a core from a rank. Measured with 8 ranks on 2 cores (in-place
/// iallgather 1 MiB + wait in a loop, block pinning, about 6.5 ms a call): the 8 threads
/// woke 12.6 times and used 360 µs of CPU a call with looks every 4 ms, 3.2 times and
/// 118 µs with this backoff (the call's time moved less than its noise). A program that
/// stops waiting and leaves a collective open is looked at again within two such sleeps.
fn driven_sleep(every: Duration, n: u32) -> Duration {
    every
        .saturating_mul(1 << n.min(16))
        .min(DRIVEN_MAX)
        .max(every)
}

/// Schedules of at least this many bytes wake the progress thread at once: they take long
/// enough that progress behind the application's computation pays. Smaller ones end at the
/// caller's wait or test (waking a thread per call would cost more than the collective);
/// the thread still finds them within its linger interval.
const WAKE_MIN_BYTES: usize = 32 * 1024;

/// Advance every schedule of `g` as far as possible; removes and returns the finished ones
/// with their outcome (to complete once the lock is released).
///
/// A panic while advancing one (a reduction that cannot run, e.g. on a datatype freed
/// meanwhile) fails that collective with an internal error instead of ending the progress
/// thread (which would leave every other collective hanging).
fn advance(g: &mut Vec<Active>) -> Vec<(Active, Result<()>)> {
    let mut done = Vec::new();
    let mut i = 0;
    while i < g.len() {
        let sched = &mut g[i].sched;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sched.progress())) {
            Ok(Some(r)) => done.push((g.swap_remove(i), r)),
            Ok(None) => i += 1,
            Err(p) => done.push((g.swap_remove(i), Err(panicked(&*p)))),
        }
    }
    NACTIVE.fetch_sub(done.len(), Ordering::AcqRel);
    done
}

/// The error of a nonblocking collective whose advance panicked with payload `p`.
pub(super) fn panicked(p: &(dyn std::any::Any + Send)) -> oxmpi_engine::Error {
    let what = p
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| p.downcast_ref::<&str>().copied())
        .unwrap_or("panic");
    oxmpi_engine::Error::Arg {
        class: oxmpi_engine::ErrorClass::Intern,
        msg: format!("nonblocking collective failed: {what}"),
    }
}

/// Run the completions of finished schedules.
fn complete(done: Vec<(Active, Result<()>)>) {
    for (a, r) in done {
        (a.done)(a.sched, r);
    }
}

/// Advance the active schedules and light requests ([`super::light`]) on the calling
/// thread and complete the schedules that end; returns whether any was active. Never blocks (if another thread is advancing them right
/// now, returns at once) and costs one atomic load when none is active: meant for the
/// loops of request waits and tests, so that a waiting thread completes its collective
/// itself instead of handing over to the progress thread (which is then only a fallback
/// for threads that do not wait).
pub fn progress_pending() -> bool {
    let light = super::light::any_open();
    if light {
        POLLS.fetch_add(1, Ordering::Relaxed);
        super::light::poll_all();
    }
    if NACTIVE.load(Ordering::Acquire) == 0 {
        return light;
    }
    POLLS.fetch_add(1, Ordering::Relaxed);
    let done = match ACTIVE.try_lock() {
        Ok(mut g) => advance(&mut g),
        Err(std::sync::TryLockError::WouldBlock) => return true,
        Err(std::sync::TryLockError::Poisoned(p)) => advance(&mut p.into_inner()),
    };
    complete(done);
    true
}

/// The progress thread: advances every active schedule; backs off (yield, then sleeps of
/// at most 50 µs) while they wait for other ranks. While threads waiting for requests
/// advance the schedules themselves ([`progress_pending`]) it only looks every
/// [`LINGER`] ([`LINGER_YIELDING`] when ranks yield; a fallback that does not compete with
/// them for the core), that interval doubling at each look that finds them still at it, up
/// to [`DRIVEN_MAX`] ([`driven_sleep`]). With nothing active it lingers (looks at that interval for
/// [`LINGER_FOR`], so that [`start`] need not wake it), then
/// sleeps on a condition variable until [`start`] wakes it.
fn progress_thread() {
    let mut idle: u32 = 0;
    let mut empty_looks: u32 = 0;
    let mut polls = POLLS.load(Ordering::Relaxed);
    // Looks in a row that found waiting threads driving the schedules themselves.
    let mut driven: u32 = 0;
    loop {
        let now = POLLS.load(Ordering::Relaxed);
        if now != polls {
            polls = now;
            std::thread::sleep(driven_sleep(linger(), driven));
            driven = driven.saturating_add(1);
            continue;
        }
        driven = 0;
        let done = {
            let mut g = ACTIVE.lock().unwrap_or_else(|p| p.into_inner());
            if g.is_empty() && !super::light::any_open() {
                idle = 0;
                let every = linger();
                if empty_looks < (LINGER_FOR.as_micros() / every.as_micros().max(1)) as u32 {
                    empty_looks += 1;
                    drop(
                        WAKE.wait_timeout(g, every)
                            .unwrap_or_else(|p| p.into_inner()),
                    );
                    continue;
                }
                // Set before the last look at the light requests, which `light_posted`
                // counts before it looks at this flag: one of the two sees the other.
                SLEEPING.store(true, Ordering::SeqCst);
                while g.is_empty() && !super::light::any_open() {
                    g = WAKE.wait(g).unwrap_or_else(|p| p.into_inner());
                }
                SLEEPING.store(false, Ordering::Relaxed);
            }
            empty_looks = 0;
            advance(&mut g)
        };
        let ended = super::light::poll_all();
        if done.is_empty() && ended == 0 {
            idle = idle.saturating_add(1);
            if idle < 256 {
                std::thread::yield_now();
            } else {
                let us = (u64::from(idle - 256) / 16).min(48) + 2;
                std::thread::sleep(Duration::from_micros(us));
            }
        } else {
            idle = 0;
        }
        complete(done);
    }
}

/// Start `sched`: advance the schedules already outstanding and this one once now, the
/// rest in the background; `done` runs when it ends (here, if it ends at once). Wakes the
/// progress thread at once for schedules of [`WAKE_MIN_BYTES`] or more, or when it sleeps
/// without a timeout.
pub fn start(mut sched: Schedule, done: Done) {
    match first(&mut sched) {
        Some(r) => done(sched, r),
        None => enqueue(sched, done),
    }
}

/// A light request ([`super::light`]) is pending: make sure the progress thread runs and
/// wake it if it sleeps without a timeout (it then finds the request within its linger interval).
pub(super) fn light_posted() {
    spawn_thread();
    if SLEEPING.load(Ordering::SeqCst) {
        let g = ACTIVE.lock().unwrap_or_else(|p| p.into_inner());
        drop(g);
        WAKE.notify_one();
    }
}

/// Start the progress thread unless it runs.
fn spawn_thread() {
    THREAD.call_once(|| {
        // It takes the engine's lock next to the application's thread(s).
        oxmpi_engine::expect_threads("the nonblocking collectives' progress thread");
        std::thread::Builder::new()
            .name("oxmpi-icoll".into())
            .spawn(progress_thread)
            .expect("spawn the nonblocking-collective progress thread");
    });
}

/// The first step of [`start`]: advance the schedules already outstanding (posting a
/// collective also advances them) and `sched` once; its outcome if it ended already (then
/// it needs no completion of its own: the caller may skip making a request for it).
pub fn first(sched: &mut Schedule) -> Option<Result<()>> {
    progress_pending();
    sched.progress()
}

/// The rest of [`start`] for a schedule whose [`first`] step did not end it: put it on
/// the active list; `done` runs when it ends.
pub fn enqueue(mut sched: Schedule, done: Done) {
    spawn_thread();
    let big = sched.bytes() >= WAKE_MIN_BYTES;
    let mut g = ACTIVE.lock().unwrap_or_else(|p| p.into_inner());
    g.push(Active { sched, done });
    NACTIVE.fetch_add(1, Ordering::AcqRel);
    let wake = big || SLEEPING.load(Ordering::Relaxed);
    drop(g);
    if wake {
        WAKE.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    /// The child's side of [`one_cpu_follows_the_affinity_mask`]: set to "1" or "0", the
    /// detection this process must make.
    const CHILD: &str = "OXMPI_TEST_ONE_CPU_EXPECT";

    /// The first CPU of this process's affinity mask, from `/proc/self/status`.
    fn first_allowed_cpu() -> usize {
        let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .expect("Cpus_allowed_list in /proc/self/status")
            .trim();
        let first = list.split([',', '-']).next().unwrap_or_default();
        first
            .parse()
            .unwrap_or_else(|e| panic!("CPU list {list:?}: {e}"))
    }

    /// Bound to one core (as `--bind-to core` binds a rank), the process detects one CPU and
    /// the progress thread takes the long interval; unbound on a machine of several CPUs, it
    /// does not. The test runs itself again as a child, once under `taskset` to one CPU.
    #[test]
    fn one_cpu_follows_the_affinity_mask() {
        if let Ok(want) = std::env::var(CHILD) {
            assert_eq!(
                detect_one_cpu(),
                want == "1",
                "one-CPU detection in the child"
            );
            assert_eq!(
                linger() == LINGER_YIELDING,
                want == "1",
                "interval in the child"
            );
            return;
        }
        let exe = std::env::current_exe().expect("test executable");
        let test = "nbc::progress::tests::one_cpu_follows_the_affinity_mask";
        let child = |bound: bool| {
            let mut cmd = if bound {
                let mut c = Command::new("taskset");
                c.arg("-c").arg(first_allowed_cpu().to_string()).arg(&exe);
                c
            } else {
                Command::new(&exe)
            };
            let several = std::thread::available_parallelism().is_ok_and(|n| n.get() > 1);
            let want = bound || !several;
            let out = cmd
                .args(["--exact", test, "--test-threads=1"])
                .env(CHILD, if want { "1" } else { "0" })
                .output()
                .unwrap_or_else(|e| panic!("run the child (bound: {bound}; taskset needed): {e}"));
            assert!(
                out.status.success(),
                "child (bound: {bound}) failed: {}\n{}{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(said.contains("1 passed"), "the child ran no test: {said}");
        };
        child(true);
        child(false);
    }

    /// While waiting threads drive the schedules, the thread's sleeps double from the
    /// linger interval up to [`DRIVEN_MAX`] and never pass it (nor drop below the interval).
    #[test]
    fn driven_sleeps_double_up_to_a_bound() {
        for every in [LINGER, LINGER_YIELDING] {
            assert_eq!(driven_sleep(every, 0), every);
            assert_eq!(driven_sleep(every, 1), every * 2);
            let mut last = Duration::ZERO;
            for n in 0..100 {
                let d = driven_sleep(every, n);
                assert!(
                    d >= last && d >= every && d <= DRIVEN_MAX,
                    "{every:?} n={n}: {d:?}"
                );
                last = d;
            }
            assert_eq!(last, DRIVEN_MAX);
        }
        // An interval longer than the bound is kept as it is.
        let long = DRIVEN_MAX * 2;
        assert_eq!(driven_sleep(long, 5), long);
    }

    #[test]
    fn the_long_interval_applies_when_ranks_yield_or_on_one_cpu() {
        assert_eq!(interval(false, false), LINGER);
        assert_eq!(interval(true, false), LINGER_YIELDING);
        assert_eq!(interval(false, true), LINGER_YIELDING);
        assert_eq!(interval(true, true), LINGER_YIELDING);
        assert!(LINGER < LINGER_YIELDING);
    }
}
