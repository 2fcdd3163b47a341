//! Progress of point-to-point operations while a rank is inside a collective:
//! `tests/c/coll_progress.c` (a rank starts an `MPI_Isend`/`MPI_Issend` of up to 1 MiB,
//! then enters `MPI_Barrier`/`MPI_Allreduce`; its peer receives the message before entering
//! the collective). Regression test for a hang of mpi4py's `test_util_pkl5`
//! (`TestMPIWorld.testBigMPI`, issend + request free + barrier) when the shared-memory
//! barrier spun without polling the transports.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX`. The job runs under
//! `mpirun --timeout`, so a regression fails the test instead of hanging it.

use std::path::Path;
use std::process::Command;

mod common;
use common::{prefix, Scratch};

/// Safety net for a hanging job (not a timing assertion): mpirun aborts it with exit code
/// 124 after this many seconds.
const TIMEOUT_S: &str = "120";

fn run(np: usize, exe: &Path) -> std::process::Output {
    Command::new(prefix().join("bin/mpirun"))
        .args(["--timeout", TIMEOUT_S, "-n", &np.to_string()])
        .arg(exe)
        .output()
        .expect("start mpirun")
}

#[test]
fn sends_progress_inside_barrier_and_allreduce() {
    let dir = Scratch::new("progress");
    let exe = dir.0.join("coll_progress");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/coll_progress.c");
    let out = Command::new(prefix().join("bin/mpicc"))
        .arg("-Wall")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run mpicc");
    assert!(
        out.status.success(),
        "building coll_progress.c failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
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
