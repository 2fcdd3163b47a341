//! Dynamic process management between processes of one job (`tests/c/dpm.c`): ports,
//! accept/connect in both directions and twice on one port, join over a socket, the name
//! service, and the error classes of bad ports and names, at 2 and 4 ranks.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX`. The job runs under
//! `mpirun --timeout`, so a hang fails the test instead of blocking it.

mod common;
use common::{build, run_ok, Scratch};

/// Safety net for a hanging job (not a timing assertion).
const TIMEOUT_S: &str = "120";

#[test]
fn ports_accept_connect_join_and_names() {
    let dir = Scratch::new("dpm");
    let exe = build("dpm.c", &dir.0);
    for np in [2, 4] {
        let (stdout, stderr) = run_ok(&exe, np, TIMEOUT_S);
        let parts = [
            "accept/connect",
            "connect/accept twice on one port",
            "port errors",
            "name service",
            "join",
        ];
        let want: String = parts
            .iter()
            .map(|p| format!("dpm: {p} ok\n"))
            .chain(std::iter::once(format!(
                "dpm: all checks passed ({np} ranks)\n"
            )))
            .collect();
        assert_eq!(stdout, want, "np={np}, stderr:\n{stderr}");
    }
}
