//! `MPI_Comm_spawn` and `MPI_Comm_spawn_multiple` under our `mpirun` on one node
//! (`tests/c/spawn.c`): children exchange with their parents, merge and reduce;
//! `MPI_APPNUM` and `wdir` per command; a missing program is `MPI_ERR_SPAWN` and
//! `maxprocs` 0 is `MPI_ERR_ARG` on every parent; under `MPI_ERRORS_ARE_FATAL` the job
//! ends with one line naming the command and host, and so does a request beyond the
//! slots with `--nooversubscribe`. Nothing is left running.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX`. The jobs run under
//! `mpirun --timeout`, so a hang fails the test instead of blocking it.

mod common;
use common::{build, mpirun, run_ok, Scratch};
use std::ffi::OsStr;

/// Safety net for a hanging job (not a timing assertion).
const TIMEOUT_S: &str = "120";

#[test]
fn spawn_and_spawn_multiple_on_one_node() {
    let dir = Scratch::new("spawn");
    let exe = build("spawn.c", &dir.0);
    for np in [1, 2] {
        let (stdout, stderr) = run_ok(&exe, np, TIMEOUT_S);
        assert_eq!(
            stdout,
            "spawn: 2 children, exchange, merge, allreduce ok\n\
             spawn_multiple: MPI_APPNUM and wdir ok\n\
             spawn errors: missing program and maxprocs 0 ok\n",
            "np={np}, stderr:\n{stderr}"
        );
    }
}

/// Runs the parent part with `SPAWN_FATAL=program SPAWN_N=n` and mpirun options `extra`;
/// the job must fail with one line saying why; returns its stderr.
fn fatal(exe: &std::path::Path, program: &str, n: &str, extra: &[&str]) -> String {
    let mut args: Vec<&OsStr> = ["--timeout", TIMEOUT_S]
        .iter()
        .chain(extra)
        .map(OsStr::new)
        .collect();
    args.push(exe.as_os_str());
    let out = mpirun(
        &args,
        &[
            ("SPAWN_FATAL", OsStr::new(program)),
            ("SPAWN_N", OsStr::new(n)),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !out.status.success() && out.status.code() != Some(124),
        "{program} x{n}: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    assert!(!stdout.contains("not reached"), "{stdout}");
    stderr
}

#[test]
fn a_failed_spawn_names_the_command_and_host() {
    let dir = Scratch::new("spawn-fatal");
    let exe = build("spawn.c", &dir.0);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").expect("host name");
    let host = host.trim();
    let e = fatal(&exe, "no-such-program-xyz", "1", &["-n", "1"]);
    assert!(
        e.contains("MPI_ERR_SPAWN")
            && e.contains(&format!(
                "cannot spawn 'no-such-program-xyz' on host {host}"
            )),
        "{e}"
    );
    let e = fatal(
        &exe,
        &exe.display().to_string(),
        "2",
        &["-n", "1", "--host", "localhost:2", "--nooversubscribe"],
    );
    assert!(
        e.contains("MPI_ERR_SPAWN")
            && e.contains("2 process(es) requested but only 1 slot(s) are free"),
        "{e}"
    );
}
