//! The `tcp` btl under the installed library: C programs built with our `mpicc` run under
//! `mpirun --mca btl self,tcp` (shared memory excluded, so every message between ranks
//! crosses a TCP connection on the loopback).
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Output;

mod common;
use common::{compile, mpirun, prefix, success, Scratch};

/// A ring of messages of growing size (eager to several MiB, so rendezvous fragments
/// cross the sockets), then both neighbours exchanging large messages at once.
const RING: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#define CHECK(c) do { if (!(c)) { fprintf(stderr, "check failed: %s line %d\n", #c, __LINE__); MPI_Abort(MPI_COMM_WORLD, 1); } } while (0)
int main(int argc, char **argv) {
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    size_t max = 4u << 20;
    unsigned char *out = malloc(max), *in = malloc(max);
    for (size_t len = 0; len <= max; len = len ? len * 4 : 1) {
        for (size_t i = 0; i < len; i++) out[i] = (unsigned char)(i * 7 + rank);
        MPI_Status st;
        MPI_Sendrecv(out, (int)len, MPI_BYTE, next, 1, in, (int)len, MPI_BYTE, MPI_ANY_SOURCE,
                     1, MPI_COMM_WORLD, &st);
        int n;
        MPI_Get_count(&st, MPI_BYTE, &n);
        CHECK(n == (int)len && st.MPI_SOURCE == prev);
        for (size_t i = 0; i < len; i++) CHECK(in[i] == (unsigned char)(i * 7 + prev));
    }
    /* Everyone sends a large message to both neighbours before receiving. */
    MPI_Request r[4];
    unsigned char *in2 = malloc(max);
    MPI_Isend(out, (int)max, MPI_BYTE, next, 2, MPI_COMM_WORLD, &r[0]);
    MPI_Isend(out, (int)max, MPI_BYTE, prev, 3, MPI_COMM_WORLD, &r[1]);
    MPI_Irecv(in, (int)max, MPI_BYTE, prev, 2, MPI_COMM_WORLD, &r[2]);
    MPI_Irecv(in2, (int)max, MPI_BYTE, next, 3, MPI_COMM_WORLD, &r[3]);
    MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
    for (size_t i = 0; i < max; i++) {
        CHECK(in[i] == (unsigned char)(i * 7 + prev));
        CHECK(in2[i] == (unsigned char)(i * 7 + next));
    }
    /* Synchronous send around the ring. */
    int token = rank;
    if (rank == 0) {
        MPI_Ssend(&token, 1, MPI_INT, next, 4, MPI_COMM_WORLD);
        MPI_Recv(&token, 1, MPI_INT, prev, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(token == size - 1);
    } else {
        MPI_Recv(&token, 1, MPI_INT, prev, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(token == rank - 1);
        token = rank;
        MPI_Ssend(&token, 1, MPI_INT, next, 4, MPI_COMM_WORLD);
    }
    long sum = rank, total;
    MPI_Allreduce(&sum, &total, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    CHECK(total == (long)size * (size - 1) / 2);
    if (rank == 0) printf("ring: ok on %d ranks\n", size);
    free(out); free(in); free(in2);
    MPI_Finalize();
    return 0;
}
"#;

fn build(src: &Path, dir: &Path, name: &str) -> PathBuf {
    let exe = dir.join(name);
    compile(&prefix().join("bin/mpicc"), src, &exe);
    exe
}

/// Runs `exe` on `n` ranks with `btl=self,tcp` and btl verbose level 20.
fn run_tcp(exe: &Path, n: usize) -> Output {
    let n_s = n.to_string();
    let mut args: Vec<&OsStr> = [
        "--mca",
        "btl",
        "self,tcp",
        "--mca",
        "btl_base_verbose",
        "20",
        "-n",
    ]
    .iter()
    .map(OsStr::new)
    .collect();
    args.extend([OsStr::new(&n_s), exe.as_os_str()]);
    let out = mpirun(&args, &[]);
    success(&out, &format!("{} on {n} ranks", exe.display()));
    out
}

/// Every rank reports each other rank as reached by tcp, none by sm.
fn assert_all_tcp(out: &Output, n: usize) {
    let err = String::from_utf8_lossy(&out.stderr);
    for r in 0..n {
        for p in (0..n).filter(|&p| p != r) {
            let want = format!("rank {r}: rank {p} on ");
            assert!(
                err.lines()
                    .any(|l| l.contains(&want) && l.ends_with("reached by tcp")),
                "no tcp link from rank {r} to rank {p}:\n{err}"
            );
        }
    }
    assert!(!err.contains("reached by sm"), "{err}");
}

#[test]
fn ring_over_tcp_np3() {
    let dir = Scratch::new("tcp-ring");
    let src = dir.0.join("ring.c");
    std::fs::write(&src, RING).unwrap();
    let exe = build(&src, &dir.0, "ring");
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
    let c = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c");
    let coll = build(&c.join("coll.c"), &dir.0, "coll");
    let out = run_tcp(&coll, 3);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l == "coll: all checks passed"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_all_tcp(&out, 3);
    let p2p = build(&c.join("p2p.c"), &dir.0, "p2p");
    let out = run_tcp(&p2p, 2);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l == "p2p: all checks passed"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_all_tcp(&out, 2);
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
