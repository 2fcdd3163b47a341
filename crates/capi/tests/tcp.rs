//! The network btls under the installed library: C programs built with our `mpicc` run under
//! `mpirun --mca btl self,tcp` (shared memory excluded, so every message between ranks
//! crosses a TCP connection on the loopback) and `--mca btl self,ofi` over libfabric's
//! software providers (`tcp;ofi_rxm`, `shm`, `udp;ofi_rxd`, chosen with `FI_PROVIDER`).
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::{compile, mpirun, prefix, success, Scratch};

fn build(src: &Path, dir: &Path, name: &str) -> PathBuf {
    let exe = dir.join(name);
    compile(&prefix().join("bin/mpicc"), src, &exe);
    exe
}

/// Runs `exe` on `n` ranks with `btl=self,<btl>` and btl verbose level 20, with `env`.
fn run_btl(exe: &Path, n: usize, btl: &str, env: &[(&str, &OsStr)]) -> Output {
    let n_s = n.to_string();
    let sel = format!("self,{btl}");
    let mut args: Vec<&OsStr> = [
        "--mca",
        "btl",
        &sel,
        "--mca",
        "btl_base_verbose",
        "20",
        "-n",
    ]
    .into_iter()
    .map(OsStr::new)
    .collect();
    args.extend([OsStr::new(&n_s), exe.as_os_str()]);
    let out = mpirun(&args, env);
    success(
        &out,
        &format!("{} on {n} ranks over {btl} {env:?}", exe.display()),
    );
    out
}

/// Runs `exe` on `n` ranks with `btl=self,tcp`.
fn run_tcp(exe: &Path, n: usize) -> Output {
    run_btl(exe, n, "tcp", &[])
}

/// Every rank reports each other rank as reached by `btl`, none by sm.
fn assert_all_by(out: &Output, n: usize, btl: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    let tail = format!("reached by {btl}");
    for r in 0..n {
        for p in (0..n).filter(|&p| p != r) {
            let want = format!("rank {r}: rank {p} on ");
            assert!(
                err.lines().any(|l| l.contains(&want) && l.ends_with(&tail)),
                "no {btl} link from rank {r} to rank {p}:\n{err}"
            );
        }
    }
    assert!(!err.contains("reached by sm"), "{err}");
}

/// Every rank reports each other rank as reached by tcp, none by sm.
fn assert_all_tcp(out: &Output, n: usize) {
    assert_all_by(out, n, "tcp")
}

/// The ring program, built in `dir`.
fn ring(dir: &Path) -> PathBuf {
    let c = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    build(&c.join("ring.c"), dir, "ring")
}

#[test]
fn ring_over_tcp_np3() {
    let dir = Scratch::new("tcp-ring");
    let exe = ring(&dir.0);
    for n in [2, 3] {
        let out = run_tcp(&exe, n);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            stdout
                .lines()
                .any(|l| l == format!("ring: ok on {n} ranks")),
            "{stdout}"
        );
        assert_all_tcp(&out, n);
    }
}

#[test]
fn collectives_and_p2p_over_tcp() {
    let dir = Scratch::new("tcp-c");
    // (program, ranks, the line that says all passed); the last: large messages truncated
    // into smaller buffers (as over ofi below).
    for (exe, n, done) in build_all(
        &dir.0,
        &[
            ("coll", 3, "coll: all checks passed"),
            ("p2p", 2, "p2p: all checks passed"),
            ("truncate_large", 2, "truncate_large: all checks passed"),
        ],
    ) {
        let out = run_tcp(&exe, n);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.lines().any(|l| l == done), "{stdout}");
        assert_all_tcp(&out, n);
    }
}

/// With `btl_tcp_links=3` every pair of ranks is joined by three connections: ordered
/// records stay on the first, large messages are striped over all three (each carries DATA
/// records) and arrive intact, several at a time, both ways.
#[test]
fn large_messages_striped_over_several_connections() {
    let dir = Scratch::new("tcp-stripe");
    let c = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let exe = build(&c.join("stripe.c"), &dir.0, "stripe");
    let three = OsStr::new("3");
    let out = run_btl(&exe, 3, "tcp", &[("OXMPI_MCA_btl_tcp_links", three)]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().any(|l| l == "stripe: ok on 3 ranks"),
        "{stdout}"
    );
    assert_all_tcp(&out, 3);
    let err = String::from_utf8_lossy(&out.stderr);
    let connected = err
        .lines()
        .filter(|l| l.contains("over 3 connection(s)"))
        .count();
    assert_eq!(connected, 6, "each of 3 pairs, both ends:\n{err}");
    // Each striped link reports the DATA records it sent per connection when it closes.
    let counts: Vec<Vec<u64>> = err
        .lines()
        .filter_map(|l| l.split_once("striped link over 3 connections sent DATA records "))
        .map(|(_, v)| {
            v.trim_matches(|c| c == '[' || c == ']')
                .split(", ")
                .map(|k| k.parse().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(counts.len(), 6, "{err}");
    assert!(
        counts
            .iter()
            .all(|c| c.len() == 3 && c.iter().all(|&k| k > 0)),
        "every connection carried data: {counts:?}"
    );
}

/// The libfabric software providers the ofi tests run over, by `FI_PROVIDER` value; none
/// (said loudly) without libfabric (`scripts/deps.sh` installs it).
fn ofi_providers() -> Vec<&'static str> {
    match oxmpi_engine::ofi_providers() {
        Ok(_) => vec!["tcp", "shm", "udp"],
        Err(e) => {
            eprintln!("SKIPPED: no libfabric ({e}); scripts/deps.sh installs libfabric1");
            Vec::new()
        }
    }
}

/// The ring over `--mca btl self,ofi` on each software provider: eager messages,
/// rendezvous fragments of the largest ofi payload, both directions at once, synchronous
/// sends; every pair linked by ofi.
#[test]
fn ring_over_ofi_software_providers() {
    let dir = Scratch::new("ofi-ring");
    let exe = ring(&dir.0);
    for prov in ofi_providers() {
        for n in [2, 3] {
            let out = run_btl(&exe, n, "ofi", &[("FI_PROVIDER", OsStr::new(prov))]);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout
                    .lines()
                    .any(|l| l == format!("ring: ok on {n} ranks")),
                "{prov}: {stdout}"
            );
            assert_all_by(&out, n, "ofi");
        }
    }
}

/// The C test programs `(name, ranks, the line that says all passed)` of `tests/c`,
/// built in `dir`.
fn build_all(
    dir: &Path,
    progs: &[(&str, usize, &'static str)],
) -> Vec<(PathBuf, usize, &'static str)> {
    let c = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    progs
        .iter()
        .map(|&(name, n, done)| (build(&c.join(format!("{name}.c")), dir, name), n, done))
        .collect()
}

/// The C tests of the tcp transport above (collectives, point-to-point, truncation of large
/// messages) and the probe and truncation ones over ofi (`pml ox`: the engine's matching
/// over the ofi btl), on each software provider; every pair linked by ofi.
#[test]
fn collectives_and_p2p_over_ofi() {
    let dir = Scratch::new("ofi-c");
    let progs = build_all(
        &dir.0,
        &[
            ("coll", 3, "coll: all checks passed"),
            ("p2p", 2, "p2p: all checks passed"),
            ("probe", 2, "probe: all checks passed"),
            ("truncate", 2, "truncate: all checks passed"),
            ("truncate_large", 2, "truncate_large: all checks passed"),
        ],
    );
    for prov in ofi_providers() {
        let env = [("FI_PROVIDER", OsStr::new(prov))];
        for (exe, n, done) in &progs {
            let out = run_btl(exe, *n, "ofi", &env);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.lines().any(|l| l == *done), "{prov}: {stdout}");
            assert_all_by(&out, *n, "ofi");
        }
    }
}

/// Runs `exe` on `n` ranks under `pml cm` with the btl list `btl` on provider `prov`
/// (`pml_base_verbose` 10).
fn run_cm(exe: &Path, n: usize, btl: &str, prov: &str) -> Output {
    run_cm_with(exe, n, btl, prov, &[], &[])
}

/// [`run_cm`] with more mpirun options `opts` (before the others) and the program's
/// arguments `prog_args`.
fn run_cm_with(
    exe: &Path,
    n: usize,
    btl: &str,
    prov: &str,
    opts: &[&str],
    prog_args: &[&str],
) -> Output {
    let n_s = n.to_string();
    let args = [
        "--mca",
        "pml",
        "cm",
        "--mca",
        "btl",
        btl,
        "--mca",
        "pml_base_verbose",
        "10",
        "-n",
        &n_s,
    ];
    let mut argv: Vec<&OsStr> = opts.iter().chain(&args).map(OsStr::new).collect();
    argv.push(exe.as_os_str());
    argv.extend(prog_args.iter().map(OsStr::new));
    mpirun(&argv, &[("FI_PROVIDER", OsStr::new(prov))])
}

/// `pml cm` (`--mca pml cm`, Open MPI's `pml cm` + `mtl ofi`): every send, receive,
/// probe and cancel goes through the provider's tagged matching. The point-to-point,
/// probe, ring and collective C tests and the matching test (`cm_match.c`: wildcards,
/// synchronous sends, mprobe, cancel) on `tcp;ofi_rxm` and `udp;ofi_rxd`; the first with
/// the default btl list (sm links the ranks, the messages still go through the provider),
/// the others with `btl self,ofi`; truncation (`truncate.c`, and `truncate_large.c`: 16 KiB
/// to 1 MiB into smaller buffers, through the bounce buffer and past it) too, which
/// libfabric 1.17's rxm and rxd mishandle (rxm places no data and then delivers nothing
/// more from that sender, rxd reports none), so their short receives go through a bounce
/// buffer and the offload truncates itself, and rxd's longer messages go as a rendezvous
/// (the receiver reads min(length, buffer) bytes). `shm` cannot carry the offload (see
/// `pml_cm_refuses_shm_in_one_line`).
#[test]
fn pml_cm_over_ofi_software_providers() {
    let dir = Scratch::new("ofi-cm");
    let progs = build_all(
        &dir.0,
        &[
            ("cm_match", 3, "cm_match: all checks passed"),
            ("p2p", 2, "p2p: all checks passed"),
            ("probe", 2, "probe: all checks passed"),
            ("coll", 3, "coll: all checks passed"),
            ("ring", 3, "ring: ok on 3 ranks"),
            ("truncate", 2, "truncate: all checks passed"),
            ("truncate_large", 2, "truncate_large: all checks passed"),
        ],
    );
    for prov in ofi_providers().into_iter().filter(|&p| p != "shm") {
        for (k, (exe, n, done)) in progs.iter().enumerate() {
            // The default btl list for the first program, self,ofi for the others.
            let btl = if k == 0 {
                "self,sm,tcp,ofi"
            } else {
                "self,ofi"
            };
            let out = run_cm(exe, *n, btl, prov);
            success(&out, &format!("{} under pml cm over {prov}", exe.display()));
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(stdout.lines().any(|l| l == *done), "{prov}: {stdout}");
            let err = String::from_utf8_lossy(&out.stderr);
            let cm = err
                .lines()
                .filter(|l| l.contains("pml cm over mtl ofi"))
                .count();
            assert_eq!(cm, *n, "every rank runs pml cm over {prov}:\n{err}");
        }
    }
}

/// The collectives' error markers and a scan's length headers are marked messages
/// (`TAG_MARK`), which under `pml cm` travel with the mark bit of the provider's tag
/// (`mtl/ofi/tag.rs`): `coll_errcounts.c`'s one-byte items ("bytes": a one-byte marker met
/// by a receive of exactly one byte fails it, blocking and nonblocking) and its scans of a
/// header's image ("magic": data of a header's 32 bytes is data) pass under `pml cm` on
/// `tcp;ofi_rxm` and `udp;ofi_rxd`, the shared-memory collectives off (their
/// point-to-point algorithms and schedules send the markers), as under the engine's
/// matching (`coll.rs`'s `erroneous_counts_fail_cleanly_np2_np3`).
#[test]
fn pml_cm_carries_the_collectives_marks() {
    let dir = Scratch::new("ofi-cm-mark");
    let c = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let exe = build(&c.join("coll_errcounts.c"), &dir.0, "coll_errcounts");
    for prov in ofi_providers().into_iter().filter(|&p| p != "shm") {
        for (n, part) in [
            (2, "bytes"),
            (3, "bytes"),
            (4, "bytes"),
            (3, "magic"),
            (4, "magic"),
        ] {
            let out = run_cm_with(
                &exe,
                n,
                "self,ofi",
                prov,
                &["--timeout", "170", "--mca", "coll_sm_enable", "0"],
                &[part],
            );
            let what = format!("coll_errcounts {part} on {n} ranks under pml cm over {prov}");
            success(&out, &what);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                stdout
                    .lines()
                    .any(|l| l == "coll_errcounts: all checks passed"),
                "{what}: {stdout}"
            );
            let err = String::from_utf8_lossy(&out.stderr);
            let cm = err
                .lines()
                .filter(|l| l.contains("pml cm over mtl ofi"))
                .count();
            assert_eq!(cm, n, "every rank runs pml cm over {prov}:\n{err}");
        }
    }
}

/// `pml cm` on `shm` fails to start with one line naming the provider's limit (its
/// wildcard receives take a sender's messages out of order), never a wrong match.
#[test]
fn pml_cm_refuses_shm_in_one_line() {
    if !ofi_providers().contains(&"shm") {
        return;
    }
    let dir = Scratch::new("ofi-cm-shm");
    let exe = ring(&dir.0);
    let out = run_cm(&exe, 2, "self,ofi", "shm");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("pml cm: provider shm matches wildcard receives (MPI_ANY_SOURCE, MPI_ANY_TAG) out of send order"),
        "{err}"
    );
}

/// `--mca pml cm` where the offload cannot run is one line and a failed start, never a
/// silent fall back: here the btl list leaves the ofi transport out.
#[test]
fn pml_cm_without_ofi_is_one_line() {
    let dir = Scratch::new("ofi-cm-none");
    let exe = ring(&dir.0);
    let argv: Vec<&OsStr> = ["--mca", "pml", "cm", "--mca", "btl", "self,tcp", "-n", "2"]
        .iter()
        .map(OsStr::new)
        .chain([exe.as_os_str()])
        .collect();
    let out = mpirun(&argv, &[]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("pml cm: needs the ofi transport"), "{err}");
}

/// The last rank kills itself after a barrier; the others, with `MPI_ERRORS_RETURN`, receive
/// from it and write what `MPI_Recv` returned into `DIR/rankR` (they ignore mpirun's SIGTERM
/// so that they outlive the job's end long enough to report; its SIGKILL follows).
const PEER_DIES: &str = r#"
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank, size, v = 0, cls = -1, len = 0;
    char msg[MPI_MAX_ERROR_STRING] = "", path[4096];
    signal(SIGTERM, SIG_IGN);
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == size - 1)
        kill(getpid(), SIGKILL);
    int rc = MPI_Recv(&v, 1, MPI_INT, size - 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Error_class(rc, &cls);
    MPI_Error_string(cls, msg, &len);
    snprintf(path, sizeof path, "%s/rank%d", argv[1], rank);
    FILE *f = fopen(path, "w");
    fprintf(f, "rc %d class %d (MPIX_ERR_PROC_FAILED %d): %s\n", rc, cls, MPIX_ERR_PROC_FAILED, msg);
    fclose(f);
    _exit(0);
}
"#;

#[test]
fn dead_peer_is_mpix_err_proc_failed() {
    let dir = Scratch::new("tcp-dies");
    let src = dir.0.join("dies.c");
    std::fs::write(&src, PEER_DIES).unwrap();
    let exe = build(&src, &dir.0, "dies");
    let n = 3;
    let out = mpirun(
        &[
            OsStr::new("--mca"),
            OsStr::new("btl"),
            OsStr::new("self,tcp"),
            OsStr::new("-n"),
            OsStr::new("3"),
            exe.as_os_str(),
            dir.0.as_os_str(),
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{err}");
    for r in 0..n - 1 {
        let got = std::fs::read_to_string(dir.0.join(format!("rank{r}")))
            .unwrap_or_else(|e| panic!("rank {r} did not report ({e}):\n{err}"));
        assert!(
            got.starts_with("rc 101 class 101 (MPIX_ERR_PROC_FAILED 101): "),
            "rank {r}: {got}"
        );
        assert!(got.contains("failed"), "rank {r}: {got}");
    }
}

/// A transport's performance variables (`btl_<t>_msgs_sent`, `_bytes_sent`, `_eager_sent`,
/// `_rndv_sent`, `_msgs_recv`, `_bytes_recv`) count one eager and one rendezvous message
/// over tcp and over ofi on each of libfabric's software providers (`tcp;ofi_rxm`, `shm`,
/// `udp;ofi_rxd`).
#[test]
fn transport_counters_over_tcp_and_ofi() {
    let dir = Scratch::new("mpit-btl");
    let c = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let exe = build(&c.join("mpit_btl.c"), &dir.0, "mpit_btl");
    let mut runs: Vec<(&str, Option<&str>)> = vec![("tcp", None)];
    runs.extend(ofi_providers().into_iter().map(|p| ("ofi", Some(p))));
    for (btl, prov) in runs {
        let env: Vec<(&str, &OsStr)> = prov
            .iter()
            .map(|p| ("FI_PROVIDER", OsStr::new(*p)))
            .collect();
        let n_s = "2";
        let sel = format!("self,{btl}");
        let args: Vec<&OsStr> = ["--mca", "btl", &sel, "-n", n_s]
            .into_iter()
            .map(OsStr::new)
            .chain([exe.as_os_str(), OsStr::new(btl)])
            .collect();
        let out = mpirun(&args, &env);
        success(&out, &format!("mpit_btl over {btl} {prov:?}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        for l in [
            format!("mpit_btl: {btl} sent 2 msgs 65544 bytes, eager 1 rndv 1"),
            format!("mpit_btl: {btl} received 2 msgs 65544 bytes"),
            "mpit_btl: all checks passed".to_string(),
        ] {
            assert!(
                stdout.lines().any(|x| x == l),
                "{btl} {prov:?}: no '{l}' in\n{stdout}"
            );
        }
    }
}
