//! Nonblocking receives that match a message which arrived before they were posted (the
//! library completes them inside `MPI_Irecv` and keeps their status in a completed-request
//! slot): `tests/c/recv_done.c` on 2 ranks checks that their requests behave like any other
//! receive request through every wait/test form, cancel, free, `MPI_Request_get_status`,
//! truncation errors, persistent receives, stale handles, more of them alive than the slot
//! store holds, and four threads at `MPI_THREAD_MULTIPLE`.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX`. The job runs under
//! `mpirun --timeout`, so a hang fails the test instead of blocking it.

mod common;
use common::{build, run_ok, Scratch};

/// Safety net for a hanging job (not a timing assertion).
const TIMEOUT_S: &str = "120";

#[test]
fn receives_completed_at_start_behave_like_requests() {
    let dir = Scratch::new("recv-done");
    let exe = build("recv_done.c", &dir.0);
    let (stdout, stderr) = run_ok(&exe, 2, TIMEOUT_S);
    assert_eq!(
        stdout, "recv_done: all checks passed\n",
        "stderr:\n{stderr}"
    );
}
