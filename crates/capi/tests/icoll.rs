//! Nonblocking collectives of the installed `libmpi.so.12` beyond `coll.rs`'s `coll_nb.c`:
//! `tests/c/coll_nb_more.c` posts every v/w variant, reduce-scatter, scan, exscan, user-op
//! reduction and neighbourhood `MPI_I*` call with one rank posting last (after the others
//! sent it a token), so an implementation that completes any of them at start deadlocks;
//! results are checked against a local reference (random sizes, roots, ops, strided types,
//! `MPI_IN_PLACE`). Runs at np 2, 3 and 5 (3 and 5 oversubscribe the machine); mpirun's
//! `--timeout` turns a hang into a failure.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::ffi::OsStr;

mod common;
use common::{build, mpirun, success, Scratch};

#[test]
fn nonblocking_collectives_progress_and_match_reference_np2_3_5() {
    let dir = Scratch::new("icoll-more");
    let exe = build("coll_nb_more.c", &dir.0);
    for n in [2, 3, 5] {
        let n_s = n.to_string();
        let args: Vec<&OsStr> = vec![
            OsStr::new("--timeout"),
            OsStr::new("240"),
            OsStr::new("-n"),
            OsStr::new(&n_s),
            exe.as_os_str(),
            OsStr::new("10"),
        ];
        let out = success(&mpirun(&args, &[]), &format!("coll_nb_more on {n} ranks"));
        for line in [
            "ireduce/iallreduce/iscan/iexscan/ireduce_scatter with user and predefined ops: ok",
            "igatherv/iscatterv/iallgatherv/ialltoallv/ialltoallw: ok",
            "ineighbor_* on a periodic ring and a 2-d grid: ok",
            "several outstanding, completed in reverse order: ok",
            "coll_nb_more: all checks passed",
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "coll_nb_more on {n} ranks: missing '{line}':\n{out}"
            );
        }
    }
}
