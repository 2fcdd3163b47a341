//! Nonblocking receives that match a message which arrived before they were posted (the
//! library completes them inside `MPI_Irecv` and keeps their status in a completed-request
//! slot): `tests/c/recv_done.c` on 2 ranks checks that their requests behave like any other
//! receive request through every wait/test form, cancel, free, `MPI_Request_get_status`,
//! truncation errors, persistent receives, stale handles, more of them alive than the slot
//! store holds, and four threads at `MPI_THREAD_MULTIPLE`.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX`. The job runs under
//! `mpirun --timeout`, so a hang fails the test instead of blocking it.

use std::ffi::OsStr;

mod common;
use common::{build, mpirun, Scratch};

/// Safety net for a hanging job (not a timing assertion).
const TIMEOUT_S: &str = "120";

#[test]
fn receives_completed_at_start_behave_like_requests() {
    let dir = Scratch::new("recv-done");
    let exe = build("recv_done.c", &dir.0);
    let out = mpirun(
        &[
            OsStr::new("--timeout"),
            OsStr::new(TIMEOUT_S),
            OsStr::new("-n"),
            OsStr::new("2"),
            exe.as_os_str(),
        ],
        &[],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "recv_done.c failed (124 = hung until mpirun's timeout):\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert_eq!(
        stdout, "recv_done: all checks passed\n",
        "stderr:\n{stderr}"
    );
}
