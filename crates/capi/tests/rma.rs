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

/// Fence epochs over messages (`osc=pt2pt`) on 2, 3 and 4 ranks: puts and accumulates of
/// every rank to every other are applied when the fence returns, and a get of the next
/// epoch sees a third rank's update of the epoch before (the counting fence, its held
/// requests).
#[test]
fn fence_epochs_over_messages_see_every_update() {
    let dir = Scratch::new("rma-fence-epochs");
    let exe = build(false, "rma_fence_epochs.c", &dir.0);
    for n in [2, 3, 4] {
        let out = run_with(n, &exe, false, &["--mca", "osc", "pt2pt"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let want = format!("rma_fence_epochs: all checks passed on {n} ranks");
        assert!(
            out.status.success() && stdout.lines().any(|l| l == want),
            "rma_fence_epochs.c on {n} ranks failed with {:?}:\nstdout:\n{stdout}\nstderr:\n{stderr}",
            out.status.code()
        );
    }
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
    // The same over ofi (`tcp;ofi_rxm`): fetch-and-op and compare-and-swap as the
    // provider's atomics from four threads at once, each waiting for its own result.
    if common::ofi_provider("tcp") && ofi_has("tcp", "FI_ATOMIC") {
        let out = run_over_ofi(&exe, 2, "tcp", &[], "rma_threads: ok on 2 ranks");
        every_rank_says(&out, 2, "accumulates native (FI_ATOMIC on tcp;ofi_rxm) for");
    }
}

/// Whether libfabric's `prov` offers `cap` (`fi_info -p PROV -c CAP`); says so loudly
/// when not.
fn ofi_has(prov: &str, cap: &str) -> bool {
    let ok = std::process::Command::new("fi_info")
        .args(["-p", prov, "-t", "FI_EP_RDM", "-c", cap])
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty());
    if !ok {
        eprintln!("SKIPPED: libfabric provider {prov} without {cap} (fi_info -p {prov} -c {cap})");
    }
    ok
}

/// Runs `exe` on `n` ranks over the ofi transport on provider `prov` (`FI_PROVIDER`) with
/// every peer reached with messages and `osc ofi` (`osc=pt2pt,ofi`), `osc_base_verbose`
/// 10 and the extra `--mca` pairs `mca`; asserts that it printed `done`; its stderr.
fn run_over_ofi(exe: &Path, n: usize, prov: &str, mca: &[(&str, &str)], done: &str) -> String {
    let fi_provider = format!("FI_PROVIDER={prov}");
    let mut args = vec![
        "--mca",
        "btl",
        "self,ofi",
        "--mca",
        "osc",
        "pt2pt,ofi",
        "--mca",
        "osc_base_verbose",
        "10",
        "-x",
        &fi_provider,
    ];
    for (k, v) in mca {
        args.extend(["--mca", k, v]);
    }
    let out = run_with(n, exe, false, &args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() && stdout.lines().any(|l| l == done),
        "{} on {n} ranks over ofi provider {prov} {mca:?} failed with {:?}:\nstdout:\n{stdout}\nstderr:\n{stderr}",
        exe.display(),
        out.status.code()
    );
    format!("{stdout}{stderr}")
}

/// Every rank of `n` printed a line containing `want` (`osc_base_verbose` output).
fn every_rank_says(out: &str, n: usize, want: &str) {
    for r in 0..n {
        let rank = format!("osc ofi: rank {r}: ");
        assert!(
            out.lines().any(|l| l.contains(&rank) && l.contains(want)),
            "rank {r} did not say {want:?}:\n{out}"
        );
    }
}

/// The one-sided C tests over the ofi transport on provider `prov` (the name CI shows in
/// each test's name): `rma.c` (every synchronisation mode and flavour) on 2 and 3 ranks
/// with puts and gets as `fi_writemsg`/`fi_read` into registered window memory, and
/// `rma_atomics.c` (fetch-and-op, compare-and-swap, accumulate, get-accumulate under
/// contention, results checked) on 3 ranks with accumulates as the provider's atomics
/// (`FI_ATOMIC`), each rank saying so; then both with `btl_ofi_atomic=false` (a provider
/// without atomics): accumulates as active messages, the same results.
fn rma_over_ofi_provider(prov: &str, full: &str, trusted: bool) {
    if !common::ofi_provider(prov) || !ofi_has(prov, "FI_RMA") {
        return;
    }
    let dir = Scratch::new(&format!("rma-ofi-{prov}"));
    let rma = build(false, "rma.c", &dir.0);
    let atomics = build(false, "rma_atomics.c", &dir.0);
    let native = trusted && ofi_has(prov, "FI_ATOMIC");
    let as_messages = "accumulates as active messages, not FI_ATOMIC: provider";
    let no_atomics = format!("{as_messages} {full} offers no FI_ATOMIC here");
    for n in [2, 3] {
        let done = format!("rma: all checks passed on {n} ranks");
        let out = run_over_ofi(&rma, n, prov, &[], &done);
        let reached = format!(
            "{} of {n} window peers reached with fi_write/fi_read",
            n - 1
        );
        every_rank_says(&out, n, &reached);
        if native {
            let line = format!("accumulates native (FI_ATOMIC on {full}) for");
            every_rank_says(&out, n, &line);
        }
    }
    let done = "rma_atomics: all checks passed on 3 ranks";
    let out = run_over_ofi(&atomics, 3, prov, &[], done);
    if native {
        let line = format!("accumulates native (FI_ATOMIC on {full}) for MPI_SIGNED_CHAR");
        every_rank_says(&out, 3, &line);
        let both = out.contains(" MPI_INT64_T ") && out.contains(" MPI_DOUBLE ");
        assert!(both, "{out}");
    } else {
        every_rank_says(&out, 3, &no_atomics);
    }
    let off = [("btl_ofi_atomic", "false")];
    let out = run_over_ofi(&atomics, 3, prov, &off, done);
    every_rank_says(&out, 3, &no_atomics);
    let out = run_over_ofi(&rma, 2, prov, &off, "rma: all checks passed on 2 ranks");
    every_rank_says(&out, 2, "accumulates as active messages");
}

#[test]
fn rma_over_ofi_tcp_rxm() {
    rma_over_ofi_provider("tcp", "tcp;ofi_rxm", true);
}

/// `udp;ofi_rxd`: puts and gets over its `FI_RMA`; its atomics are not used (libfabric
/// 1.17's crashed under contention, see `fabric::ATOMICS_WRONG`): accumulates as
/// active messages.
#[test]
fn rma_over_ofi_udp_rxd() {
    rma_over_ofi_provider("udp", "udp;ofi_rxd", false);
}

/// `shm` forced with `FI_PROVIDER`: a provider whose atomics are not used (libfabric
/// 1.17's give wrong results under contention, see `fabric::ATOMICS_WRONG`), so
/// accumulates fall back to active messages while puts and gets use its `FI_RMA`.
#[test]
fn rma_over_ofi_shm_accumulates_as_messages() {
    rma_over_ofi_provider("shm", "shm", false);
}

/// Without RMA writes (`btl_ofi_rma=false`, as on a provider without `FI_RMA`) puts, gets
/// and accumulates all go as messages: `rma.c` and `rma_atomics.c` pass, each rank says so.
#[test]
fn rma_over_ofi_without_rma_falls_back_to_messages() {
    if !common::ofi_provider("tcp") {
        return;
    }
    let dir = Scratch::new("rma-ofi-norma");
    let rma = build(false, "rma.c", &dir.0);
    let atomics = build(false, "rma_atomics.c", &dir.0);
    let off = [("btl_ofi_rma", "false")];
    let out = run_over_ofi(&rma, 2, "tcp", &off, "rma: all checks passed on 2 ranks");
    every_rank_says(&out, 2, "no RMA writes over the ofi btl here");
    let done = "rma_atomics: all checks passed on 3 ranks";
    let out = run_over_ofi(&atomics, 3, "tcp", &off, done);
    every_rank_says(&out, 3, "accumulates as active messages");
}

/// `rma_atomics.c` on the direct path (one node, the shared segment) and over messages
/// (`osc=pt2pt`): the same checks hold without libfabric.
#[test]
fn rma_atomics_direct_and_over_messages() {
    let dir = Scratch::new("rma-atomics");
    let exe = build(false, "rma_atomics.c", &dir.0);
    for extra in [&[][..], &["--mca", "osc", "pt2pt"][..]] {
        for n in [2, 3] {
            let out = run_with(n, &exe, false, extra);
            let stdout = String::from_utf8_lossy(&out.stdout);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                out.status.success()
                    && stdout
                        .lines()
                        .any(|l| l == format!("rma_atomics: all checks passed on {n} ranks")),
                "rma_atomics.c on {n} ranks {extra:?} failed with {:?}:\nstdout:\n{stdout}\nstderr:\n{stderr}",
                out.status.code()
            );
        }
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
