//! One-sided communication (`MPI_Win_*`, put/get/accumulate, locks, PSCW) through the
//! installed `libmpi.so.12`: `tests/c/rma.c` built with our `mpicc` and with Debian's
//! `mpicc.mpich` (run on our library through `LD_LIBRARY_PATH`), on 2 and 3 ranks under
//! our `mpirun`; and the default fatal error handler of windows.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{prefix, Scratch};

fn build(mpich: bool, name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name);
    let exe = dir.join(format!("{name}-{}", if mpich { "mpich" } else { "ours" }));
    let mut cmd = if mpich {
        Command::new("mpicc.mpich")
    } else {
        Command::new(prefix().join("bin/mpicc"))
    };
    let out = cmd
        .arg("-Wall")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the compiler wrapper for {name}: {e}"));
    assert!(
        out.status.success(),
        "building {name} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Safety net so a broken build cannot hang the test suite (not a timing assertion).
const JOB_LIMIT: Duration = Duration::from_secs(180);

fn run(n: usize, exe: &Path, mpich: bool) -> Output {
    let pre = prefix();
    let mut c = Command::new(pre.join("bin/mpirun"));
    c.arg("-n").arg(n.to_string()).arg(exe);
    if mpich {
        let lib = pre.join("lib");
        let ld = match std::env::var("LD_LIBRARY_PATH") {
            Ok(v) if !v.is_empty() => format!("{}:{v}", lib.display()),
            _ => lib.display().to_string(),
        };
        c.env("LD_LIBRARY_PATH", ld);
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mpirun");
    let start = Instant::now();
    while matches!(child.try_wait(), Ok(None)) && start.elapsed() < JOB_LIMIT {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    child.wait_with_output().expect("collect mpirun output")
}

fn check_rma(n: usize, mpich: bool) {
    let dir = Scratch::new("rma");
    let exe = build(mpich, "rma.c", &dir.0);
    let out = run(n, &exe, mpich);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "rma.c on {n} ranks (mpich build: {mpich}) failed with {:?}:\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status.code()
    );
    assert!(
        stdout
            .lines()
            .any(|l| l == format!("rma: all checks passed on {n} ranks")),
        "rma.c did not finish on {n} ranks:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
}

#[test]
fn rma_on_two_ranks() {
    check_rma(2, false);
}

#[test]
fn rma_on_three_ranks() {
    check_rma(3, false);
}

#[test]
fn rma_mpich_build_on_our_library() {
    check_rma(2, true);
}

#[test]
fn window_errors_are_fatal_by_default() {
    let dir = Scratch::new("rma-fatal");
    let exe = build(false, "rma_fatal.c", &dir.0);
    let out = run(2, &exe, false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "the job should have been aborted:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(!stdout.contains("still running"), "stdout:\n{stdout}");
    assert!(
        stderr.contains("MPI_Put") && stderr.contains("MPI_ERR_RANK"),
        "the abort message names the call and the class:\n{stderr}"
    );
}
