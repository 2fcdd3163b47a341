//! Progress of point-to-point operations while a rank is inside a collective:
//! `tests/c/coll_progress.c` (a rank starts an `MPI_Isend`/`MPI_Issend` of up to 1 MiB,
//! then enters `MPI_Barrier`/`MPI_Allreduce`; its peer receives the message before entering
//! the collective). Regression test for a hang of mpi4py's `test_util_pkl5`
//! (`TestMPIWorld.testBigMPI`, issend + request free + barrier) when the shared-memory
//! barrier spun without polling the transports.
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

fn run(np: usize, exe: &Path) -> std::process::Output {
    let np_s = np.to_string();
    mpirun(
        &[
            OsStr::new("--timeout"),
            OsStr::new(TIMEOUT_S),
            OsStr::new("-n"),
            OsStr::new(&np_s),
            exe.as_os_str(),
        ],
        &[],
    )
}

#[test]
fn sends_progress_inside_barrier_and_allreduce() {
    let dir = Scratch::new("progress");
    let exe = build("coll_progress.c", &dir.0);
    for np in [2, 3] {
        let out = run(np, &exe);
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
