//! Progress of point-to-point operations while a rank is inside a collective:
//! `tests/c/coll_progress.c` (a rank starts an `MPI_Isend`/`MPI_Issend` of up to 1 MiB,
//! then enters `MPI_Barrier`/`MPI_Allreduce`; its peer receives the message before entering
//! the collective). Regression test for a hang of mpi4py's `test_util_pkl5`
//! (`TestMPIWorld.testBigMPI`, issend + request free + barrier) when the shared-memory
//! barrier spun without polling the transports.
//!
//! Also `tests/c/part_poll.c`: `MPI_Parrived` and `MPI_Win_test` polled in a loop by ranks
//! that share one core (mpi4py's `test_p2p_buf_part` polls `Parrived` so): a poll that
//! finds nothing must yield the core when the ranks yield while idle.
//!
//! And `tests/c/lock_mode.c`: the engine's lock is plain only while one thread uses the
//! library, and atomic before the nonblocking collectives' progress thread starts.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX`. The job runs under
//! `mpirun --timeout`, so a regression fails the test instead of hanging it.

use std::ffi::OsStr;
use std::path::Path;

mod common;
use common::{build, mpirun, Scratch};

/// Safety net for a hanging job (not a timing assertion): mpirun aborts it with exit code
/// 124 after this many seconds.
const TIMEOUT_S: &str = "120";

/// `exe` on `np` ranks under [`TIMEOUT_S`], with MCA parameters `mca` and program arguments
/// `args`.
fn run(np: usize, exe: &Path, mca: &[(&str, &str)], args: &[&str]) -> std::process::Output {
    let np_s = np.to_string();
    let mut argv = vec![OsStr::new("--timeout"), OsStr::new(TIMEOUT_S)];
    for (k, v) in mca {
        argv.extend([OsStr::new("--mca"), OsStr::new(k), OsStr::new(v)]);
    }
    argv.extend([OsStr::new("-n"), OsStr::new(&np_s), exe.as_os_str()]);
    argv.extend(args.iter().map(OsStr::new));
    mpirun(&argv, &[])
}

#[test]
fn sends_progress_inside_barrier_and_allreduce() {
    let dir = Scratch::new("progress");
    let exe = build("coll_progress.c", &dir.0);
    for np in [2, 3] {
        let out = run(np, &exe, &[], &[]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "coll_progress on {np} ranks failed (124 = hung until mpirun's timeout):\n\
             stdout:\n{stdout}\nstderr:\n{stderr}"
        );
        assert_eq!(
            stdout, "coll_progress: 20 rounds passed\n",
            "np={np}, stderr:\n{stderr}"
        );
    }
}

/// Most polls per round and rank of `part_poll.c` that found nothing: a poll that yields
/// lets the awaited rank run on the shared core, so a few polls pass before its data is
/// there (measured: 0 on 3 and 4 ranks); one that spins polls through its time slice
/// (measured before the fix: about 14000 `MPI_Parrived` and 33000 to 40000
/// `MPI_Win_test` polls per round on 3 and 4 ranks).
const MAX_POLLS: u64 = 1000;

#[test]
fn parrived_and_win_test_yield_when_oversubscribed() {
    let dir = Scratch::new("part-poll");
    let exe = build("part_poll.c", &dir.0);
    for np in [3, 4] {
        let out = run(np, &exe, &[("mpi_yield_when_idle", "1")], &["100"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "part_poll on {np} ranks failed:\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
        assert!(
            stdout.lines().any(|l| l == "part_poll: all checks passed"),
            "np={np}:\n{stdout}\nstderr:\n{stderr}"
        );
        let polls: Vec<u64> = stdout
            .lines()
            .find_map(|l| l.strip_prefix("part_poll: polls per round parrived "))
            .map(|l| {
                l.split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(polls.len(), 2, "np={np}: no poll counts:\n{stdout}");
        assert!(
            polls.iter().all(|&n| n <= MAX_POLLS),
            "np={np}: polls that found nothing per round (MPI_Parrived, MPI_Win_test) \
             {polls:?} > {MAX_POLLS}: a poll spins through its time slice instead of \
             yielding the core\n{stdout}"
        );
    }
}

/// `tests/c/lock_mode.c` at every thread level, with `pml_base_verbose` 10: below
/// `MPI_THREAD_SERIALIZED` the engine's lock starts plain (no atomic read-modify-write: one
/// thread in the library) and turns atomic on each rank before its nonblocking-collective
/// progress thread starts, which then runs next to the application thread's messages
/// (checked byte by byte, and the reduction's result); at the higher levels it is atomic
/// from the start. A library thread that took the plain lock would race with the
/// application thread on the engine's state.
#[test]
fn engine_lock_is_plain_only_while_one_thread_uses_it() {
    let dir = Scratch::new("lock-mode");
    let exe = build("lock_mode.c", &dir.0);
    for level in ["single", "funneled", "serialized", "multiple"] {
        let out = run(2, &exe, &[("pml_base_verbose", "10")], &[level]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(0),
            "lock_mode {level} failed (124 = hung until mpirun's timeout):\n\
             stdout:\n{stdout}\nstderr:\n{stderr}"
        );
        assert_eq!(
            stdout,
            format!("lock_mode: {level} passed\n"),
            "stderr:\n{stderr}"
        );
        let one = matches!(level, "single" | "funneled");
        for rank in 0..2 {
            let has = |what: &str| {
                stderr
                    .lines()
                    .any(|l| l.contains(&format!("rank {rank}: engine lock {what}")))
            };
            assert_eq!(
                has("plain (one thread)"),
                one,
                "{level}: rank {rank}'s lock at init, stderr:\n{stderr}"
            );
            assert_eq!(
                has("atomic (thread level"),
                !one,
                "{level}: rank {rank}'s lock at init, stderr:\n{stderr}"
            );
            assert_eq!(
                has("atomic from now on (the nonblocking collectives' progress thread)"),
                one,
                "{level}: rank {rank}'s switch before its progress thread, stderr:\n{stderr}"
            );
        }
    }
}
