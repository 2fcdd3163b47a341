//! Nonblocking point-to-point requests and generalized requests: `tests/c/requests.c` at 1
//! rank (generalized requests only) and 2 ranks (also Isend/Irecv completed by every
//! wait/test form, cancel, free, Request_get_status, truncation errors in statuses and
//! through the request's communicator's error handler, persistent requests, and four
//! threads using requests at once under `MPI_THREAD_MULTIPLE`).
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX`. The job runs under
//! `mpirun --timeout`, so a hang fails the test instead of blocking it.

mod common;
use common::{build, run_ok, Scratch};

/// Safety net for a hanging job (not a timing assertion).
const TIMEOUT_S: &str = "120";

#[test]
fn requests_and_generalized_requests_on_one_and_two_ranks() {
    let dir = Scratch::new("requests");
    let exe = build("requests.c", &dir.0);
    for np in [1, 2] {
        let (stdout, stderr) = run_ok(&exe, np, TIMEOUT_S);
        assert_eq!(
            stdout,
            format!("requests: all checks passed ({np} ranks)\n"),
            "np={np}, stderr:\n{stderr}"
        );
    }
}
