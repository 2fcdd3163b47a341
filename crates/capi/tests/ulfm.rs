//! ULFM end to end under the installed library: `tests/c/ulfm.c` on 4 ranks with
//! `mpirun --with-ft ulfm`, over shared memory and over TCP. The last rank kills itself;
//! the survivors detect it, revoke, acknowledge, agree, shrink and finish an
//! `MPI_Allreduce` on the shrunk communicator, and mpirun reports the death in one line
//! and exits 0. Without fault tolerance the same program ends the job promptly. The same
//! program built for the MPI-5 standard ABI (`mpicc_abi`, `libmpi_abi.so.1`) does the same.
//! `tests/c/ulfm_spawn.c`: the same interface on the intercommunicator between parents and
//! the children they spawned (another job), before and after a child dies.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::ffi::OsStr;

mod common;
use common::{build, compile, mpirun, prefix, Scratch};

fn run(exe: &std::path::Path, extra: &[&str]) -> std::process::Output {
    let mut args: Vec<&OsStr> = ["--timeout", "30", "-n", "4"]
        .iter()
        .chain(extra)
        .map(OsStr::new)
        .collect();
    args.push(exe.as_os_str());
    mpirun(&args, &[])
}

/// Runs `exe` with each of `extras` and checks the survivors' lines and mpirun's report.
fn survivors_finish(exe: &std::path::Path, extras: &[&[&str]]) {
    for extra in extras {
        let out = run(exe, extra);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let what = format!("{extra:?}:\nstdout:\n{stdout}\nstderr:\n{stderr}");
        assert_eq!(out.status.code(), Some(0), "{what}");
        let mut ok: Vec<&str> = stdout.lines().filter(|l| l.ends_with(" ok")).collect();
        ok.sort_unstable();
        assert_eq!(
            ok,
            ["ulfm: rank 0 ok", "ulfm: rank 1 ok", "ulfm: rank 2 ok"],
            "{what}"
        );
        let deaths: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("rank 3 (pid "))
            .collect();
        assert_eq!(deaths.len(), 1, "{what}");
        assert!(
            deaths[0].contains("exited on signal 9 (Killed); the job continues"),
            "{what}"
        );
    }
}

#[test]
fn survivors_revoke_shrink_and_reduce() {
    let dir = Scratch::new("ulfm");
    let exe = build("ulfm.c", &dir.0);
    survivors_finish(
        &exe,
        &[
            &["--with-ft", "ulfm"],
            &["--enable-recovery", "--mca", "btl", "self,tcp"],
        ],
    );
}

#[test]
fn survivors_finish_in_the_standard_abi() {
    let dir = Scratch::new("ulfm-abi");
    let exe = dir.0.join("ulfm-abi");
    compile(
        &prefix().join("bin/mpicc_abi"),
        &common::c_source("ulfm.c"),
        &exe,
    );
    survivors_finish(&exe, &[&["--with-ft", "ulfm"]]);
}

#[test]
fn without_fault_tolerance_the_job_ends() {
    let dir = Scratch::new("ulfm-off");
    let exe = build("ulfm.c", &dir.0);
    let out = run(&exe, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let code = out.status.code();
    assert!(code != Some(0) && code != Some(124), "{code:?}: {stderr}");
    assert!(stderr.contains("rank 3 (pid "), "{stderr}");
}

/// A passive-target lock holder that dies silently (`tests/c/rma_deadholder.c`, the window
/// over messages as across nodes): its waiter gets `MPIX_ERR_PROC_FAILED` instead of
/// hanging, and the lock is free again.
#[test]
fn a_dead_lock_holder_fails_its_waiters() {
    let dir = Scratch::new("ulfm-deadholder");
    let exe = build("rma_deadholder.c", &dir.0);
    let opts = [
        "--timeout",
        "30",
        "--with-ft",
        "ulfm",
        "--mca",
        "osc",
        "pt2pt",
        "-n",
        "3",
    ];
    survivors_say_ok(
        &exe,
        &opts,
        &["deadholder: rank 0 ok", "deadholder: rank 2 ok"],
    );
}

/// Runs `exe` under mpirun with `opts`: the job must exit 0 and the lines ending in " ok"
/// must be `want` (in any order).
fn survivors_say_ok(exe: &std::path::Path, opts: &[&str], want: &[&str]) {
    let args: Vec<&OsStr> = opts
        .iter()
        .map(OsStr::new)
        .chain([exe.as_os_str()])
        .collect();
    let out = mpirun(&args, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let what = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    let mut ok: Vec<&str> = stdout.lines().filter(|l| l.ends_with(" ok")).collect();
    ok.sort_unstable();
    assert_eq!(ok, want, "{what}");
    assert_eq!(out.status.code(), Some(0), "{what}");
}

/// ULFM on an intercommunicator to another job (`tests/c/ulfm_spawn.c`): 2 parents and the
/// 2 children they spawned agree, acknowledge, list the failures and shrink, with nobody
/// failed and after child 1 killed itself; the survivors say so.
#[test]
fn on_the_intercommunicator_to_spawned_children() {
    let dir = Scratch::new("ulfm-spawn");
    let exe = build("ulfm_spawn.c", &dir.0);
    survivors_say_ok(
        &exe,
        &["--timeout", "60", "--with-ft", "ulfm", "-n", "2"],
        &[
            "ulfm_spawn: child 0 ok",
            "ulfm_spawn: parent 0 ok",
            "ulfm_spawn: parent 1 ok",
        ],
    );
}

/// ULFM over the ofi transport on libfabric's `shm` provider: the survivors finish as over
/// sm and tcp, and each closes its fabric at `MPI_Finalize` although a peer died (the
/// link of the dead peer is abandoned, not left open), so the provider removes each
/// survivor's shared-memory region: `btl_base_verbose` 20 prints the ofi closing line once
/// per survivor. The killed rank's own region (libfabric's `/dev/shm/<pid>:...` file) can
/// only be removed by someone else: this test removes it.
#[test]
fn survivors_close_their_fabric_over_ofi_shm() {
    if !common::ofi_provider("shm") {
        return;
    }
    let dir = Scratch::new("ulfm-ofi");
    let exe = build("ulfm.c", &dir.0);
    let out = run(
        &exe,
        &[
            "--with-ft",
            "ulfm",
            "--mca",
            "btl",
            "self,ofi",
            "--mca",
            "btl_base_verbose",
            "20",
            "-x",
            "FI_PROVIDER=shm",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The killed rank's region, named by its pid in mpirun's report.
    for pid in stderr
        .lines()
        .filter_map(|l| l.split("rank 3 (pid ").nth(1))
        .filter_map(|r| r.split(')').next())
        .filter(|p| p.chars().all(|c| c.is_ascii_digit()))
    {
        if let Ok(rd) = std::fs::read_dir("/dev/shm") {
            for e in rd.flatten() {
                if e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("{pid}:"))
                {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
    let what = format!("stdout:\n{stdout}\nstderr:\n{stderr}");
    assert_eq!(out.status.code(), Some(0), "{what}");
    let ok = stdout.lines().filter(|l| l.ends_with(" ok")).count();
    assert_eq!(ok, 3, "{what}");
    let closed = stderr
        .lines()
        .filter(|l| l.contains("ofi: rank ") && l.contains("records injected"))
        .count();
    assert_eq!(closed, 3, "every survivor closes its fabric: {what}");
}
