//! One-sided communication (`MPI_Win_*`, put/get/accumulate, locks, PSCW) through the
//! installed `libmpi.so.12`: `tests/c/rma.c` built with our `mpicc` and with Debian's
//! `mpicc.mpich` (run on our library through `LD_LIBRARY_PATH`), on 2 and 3 ranks under
//! our `mpirun`; and the default fatal error handler of windows.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::{c_source, compile, mpirun, our_libs_first, prefix, Scratch};

fn build(mpich: bool, name: &str, dir: &Path) -> PathBuf {
    let exe = dir.join(format!("{name}-{}", if mpich { "mpich" } else { "ours" }));
    let cc = if mpich {
        PathBuf::from("mpicc.mpich")
    } else {
        prefix().join("bin/mpicc")
    };
    compile(&cc, &c_source(name), &exe);
    exe
}

fn run(n: usize, exe: &Path, mpich: bool) -> Output {
    run_with(n, exe, mpich, &[])
}

/// Run `exe` on `n` ranks with extra `mpirun` arguments `extra` (e.g. `--mca osc pt2pt`).
fn run_with(n: usize, exe: &Path, mpich: bool, extra: &[&str]) -> Output {
    let libs = our_libs_first();
    let env: &[(&str, &OsStr)] = if mpich {
        &[("LD_LIBRARY_PATH", libs.as_os_str())]
    } else {
        &[]
    };
    let n_s = n.to_string();
    let mut args: Vec<&OsStr> = vec![OsStr::new("-n"), OsStr::new(&n_s)];
    args.extend(extra.iter().map(OsStr::new));
    args.push(exe.as_os_str());
    mpirun(&args, env)
}

fn check_rma(n: usize, mpich: bool) {
    check_rma_with(n, mpich, &[]);
}

/// `rma.c` (every synchronisation mode and window flavour) on `n` ranks passes.
fn check_rma_with(n: usize, mpich: bool, extra: &[&str]) {
    let dir = Scratch::new("rma");
    let exe = build(mpich, "rma.c", &dir.0);
    let out = run_with(n, &exe, mpich, extra);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "rma.c on {n} ranks (mpich build: {mpich}, {extra:?}) failed with {:?}:\nstdout:\n{stdout}\nstderr:\n{stderr}",
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

/// The `pt2pt` component forced on one node: every peer but the process itself is reached
/// with messages served by the target's progress thread, as across nodes.
#[test]
fn rma_over_messages_on_two_ranks() {
    check_rma_with(2, false, &["--mca", "osc", "pt2pt"]);
}

#[test]
fn rma_over_messages_on_three_ranks() {
    check_rma_with(3, false, &["--mca", "osc", "pt2pt"]);
}

#[test]
fn rma_over_messages_mpich_build() {
    check_rma_with(2, true, &["--mca", "osc", "pt2pt"]);
}

/// Four threads of each rank run fetch-and-op, get and compare-and-swap to one target of
/// one window at once, over messages (`osc=pt2pt`) and directly: each gets its own reply.
#[test]
fn rma_from_four_threads_to_one_target() {
    let dir = Scratch::new("rma-threads");
    let exe = build(false, "rma_threads.c", &dir.0);
    for extra in [&["--mca", "osc", "pt2pt"][..], &[]] {
        let out = run_with(2, &exe, false, extra);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.lines().any(|l| l == "rma_threads: ok on 2 ranks"),
            "rma_threads.c {extra:?} failed with {:?}:\nstdout:\n{stdout}\nstderr:\n{stderr}",
            out.status.code()
        );
    }
}

/// One-sided operations over the ofi transport (`--mca btl self,ofi` on libfabric's
/// `tcp;ofi_rxm`, which has `FI_RMA`): with `osc=pt2pt,ofi` every peer is reached with
/// messages, and puts and gets go straight into its registered window memory
/// (`fi_writemsg`, `fi_read`); with `btl_ofi_rma=false` (as on a provider without
/// `FI_RMA`) they fall back to messages. `rma.c` passes both ways.
#[test]
fn rma_over_ofi_rma_and_its_fallback() {
    if !common::ofi_provider("tcp") {
        return;
    }
    let dir = Scratch::new("rma-ofi");
    let exe = build(false, "rma.c", &dir.0);
    for (rma, want) in [
        (
            "true",
            "osc ofi: rank 0: 1 of 2 window peers reached with fi_write/fi_read",
        ),
        (
            "false",
            "osc ofi: rank 0: no RMA writes over the ofi btl here",
        ),
    ] {
        let args = [
            "--mca",
            "btl",
            "self,ofi",
            "--mca",
            "osc",
            "pt2pt,ofi",
            "--mca",
            "btl_ofi_rma",
            rma,
            "--mca",
            "osc_base_verbose",
            "10",
            "-x",
            "FI_PROVIDER=tcp",
        ];
        let out = run_with(2, &exe, false, &args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.lines().any(|l| l == "rma: all checks passed on 2 ranks"),
            "rma.c over ofi (btl_ofi_rma={rma}) failed with {:?}:\nstdout:\n{stdout}\nstderr:\n{stderr}",
            out.status.code()
        );
        assert!(
            stdout.contains(want) || stderr.contains(want),
            "no line {want:?}:\nstdout:\n{stdout}\nstderr:\n{stderr}"
        );
    }
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
