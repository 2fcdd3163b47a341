//! Nonblocking collectives of the installed `libmpi.so.12` beyond `coll.rs`'s `coll_nb.c`.
//!
//! `tests/c/coll_nb_more.c` posts every v/w variant, reduce-scatter, scan, exscan, user-op
//! reduction and neighbourhood `MPI_I*` call with one rank posting last (after the others
//! sent it a token), so an implementation that completes any of them at start deadlocks;
//! results are checked against a local reference (random sizes, roots, ops, strided types,
//! `MPI_IN_PLACE`). `tests/c/coll_nb_inter.c` does the same for every intercommunicator
//! `MPI_I*` form and checks that scans, neighbourhood collectives and topology
//! constructors on an intercommunicator fail with `MPI_ERR_COMM` through its error
//! handler. Both run at np 2, 3 and 5 (3 and 5 oversubscribe the machine); mpirun's
//! `--timeout` turns a hang into a failure.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::ffi::OsStr;

mod common;
use common::{build, mpirun, success, Scratch};

/// Build `name`, run it with `iters` at np 2, 3 and 5 and require every line of `lines`.
fn run_np_2_3_5(name: &str, iters: &str, lines: &[&str]) {
    run_on(name, &[2, 3, 5], iters, lines);
}

/// Build `name`, run it with `iters` on each number of ranks of `nps` and require every
/// line of `lines`.
fn run_on(name: &str, nps: &[usize], iters: &str, lines: &[&str]) {
    let dir = Scratch::new("icoll");
    let exe = build(name, &dir.0);
    for &n in nps {
        let n_s = n.to_string();
        let args: Vec<&OsStr> = vec![
            OsStr::new("--timeout"),
            OsStr::new("240"),
            OsStr::new("-n"),
            OsStr::new(&n_s),
            exe.as_os_str(),
            OsStr::new(iters),
        ];
        let out = success(&mpirun(&args, &[]), &format!("{name} on {n} ranks"));
        for line in lines {
            assert!(
                out.lines().any(|l| l == *line),
                "{name} on {n} ranks: missing '{line}':\n{out}"
            );
        }
    }
}

#[test]
fn nonblocking_collectives_progress_and_match_reference_np2_3_5() {
    run_np_2_3_5(
        "coll_nb_more.c",
        "10",
        &[
            "ireduce/iallreduce/iscan/iexscan/ireduce_scatter with user and predefined ops: ok",
            "igatherv/iscatterv/iallgatherv/ialltoallv/ialltoallw: ok",
            "ineighbor_* on a periodic ring and a 2-d grid: ok",
            "several outstanding, completed in reverse order: ok",
            "ialltoallw with MPI_BOTTOM and absolute addresses: ok",
            "coll_nb_more: all checks passed",
        ],
    );
}

#[test]
fn intercommunicator_nonblocking_collectives_and_undefined_calls_np2_3_5() {
    run_np_2_3_5(
        "coll_nb_inter.c",
        "8",
        &[
            "rooted nonblocking intercommunicator collectives: ok",
            "all-to-all nonblocking intercommunicator collectives: ok",
            "undefined on intercommunicators: MPI_ERR_COMM: ok",
            "coll_nb_inter: all checks passed",
        ],
    );
}

/// Small nonblocking collectives on the shared-memory segment (`coll_sm_nonblocking`):
/// `tests/c/coll_nb_sm.c` checks every reduction over every predefined type and the
/// operations defined on it, and the data-movement forms with contiguous and strided types,
/// in place and not, against the blocking forms and local references (igather and igatherv
/// of 32 KiB to 1 MiB blocks, on 2 ranks by one cross-memory copy up to 64 KiB); iscatters
/// whose root posts at its call (20 outstanding, read only after the root posted them all);
/// more outstanding
/// collectives than the segment has buffers, completed in reverse order between blocking
/// ones; and posts that must not wait for the others. At np 2, 3 and 4 (3 and 4
/// oversubscribe the machine, so ranks yield), and once with the component off (the
/// schedules of messages pass the same checks; the counter then says it was not used).
#[test]
fn small_nonblocking_collectives_on_shared_memory_np2_3_4() {
    let dir = Scratch::new("icoll-sm");
    let exe = build("coll_nb_sm.c", &dir.0);
    for (n, on) in [(2, true), (3, true), (4, true), (3, false)] {
        let n_s = n.to_string();
        let args: Vec<&OsStr> = vec![
            OsStr::new("--timeout"),
            OsStr::new("240"),
            OsStr::new("--mca"),
            OsStr::new("coll_sm_nonblocking"),
            OsStr::new(if on { "1" } else { "0" }),
            OsStr::new("-n"),
            OsStr::new(&n_s),
            exe.as_os_str(),
            OsStr::new("1"),
        ];
        let what = format!("coll_nb_sm on {n} ranks (coll_sm_nonblocking={on})");
        let out = success(&mpirun(&args, &[]), &what);
        let used = if on { "used" } else { "not used" };
        for line in [
            format!("coll_nb_sm: sm nonblocking calls: {used}"),
            "coll_nb_sm: all checks passed".to_string(),
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "{what}: missing '{line}':\n{out}"
            );
        }
    }
}

/// In-place all-to-all exchanges with blocks too large for the shared-memory segment
/// (`tests/c/coll_nb_trade.c`): each pair of ranks trades its two blocks by cross-memory
/// copies in its progress (`SmKind::Alltoallv`'s far blocks); blocks around the segment's
/// limit and the bounce buffer's, uneven v/w blocks with gaps, more outstanding than the
/// segment has buffers, a rank that does not wait while the others need its halves, and a
/// rank that posts only after the others (requests pending and tested) sent it a token:
/// nobody may copy its blocks before its post. At np 2, 5 and 8 (5 and 8 oversubscribe the
/// machine, so ranks yield).
#[test]
fn in_place_alltoalls_trade_blocks_on_shared_memory_np2_5_8() {
    run_on(
        "coll_nb_trade.c",
        &[2, 5, 8],
        "1",
        &[
            "coll_nb_trade: in-place ialltoalls on the segment: yes",
            "coll_nb_trade: all checks passed",
        ],
    );
}

/// Nonblocking broadcasts of 256 KiB to 1 MiB (`tests/c/coll_ibcast_big.c`), which on more
/// than 2 ranks that yield when idle go through the segment's nonblocking large region: the
/// root's request ends at its post (the test checks that it does there and nowhere else),
/// the root then overwrites its buffer and broadcasts other data from the same slot, which
/// it must not overwrite before every rank, posting only later, has read the first; sizes
/// around both bounds, every root, several outstanding with an allreduce sharing the
/// region. At np 3 and 8 yielding, np 4 spinning and np 2 (the other paths; on 2 ranks
/// some of these sizes go by messages, whose root may end at its post: not checked).
#[test]
fn large_ibcasts_through_the_large_region_np2_3_4_8() {
    let dir = Scratch::new("icoll-bcast-big");
    let exe = build("coll_ibcast_big.c", &dir.0);
    for (n, yields, through) in [
        (3, "1", "yes"),
        (8, "1", "yes"),
        (4, "0", "no"),
        (2, "1", ""),
    ] {
        let n_s = n.to_string();
        let args: Vec<&OsStr> = vec![
            OsStr::new("--timeout"),
            OsStr::new("240"),
            OsStr::new("--oversubscribe"),
            OsStr::new("--mca"),
            OsStr::new("mpi_yield_when_idle"),
            OsStr::new(yields),
            OsStr::new("-n"),
            OsStr::new(&n_s),
            exe.as_os_str(),
            OsStr::new("1"),
        ];
        let what = format!("coll_ibcast_big on {n} ranks (mpi_yield_when_idle={yields})");
        let out = success(&mpirun(&args, &[]), &what);
        let mut lines = vec!["coll_ibcast_big: all checks passed".to_string()];
        if !through.is_empty() {
            lines.push(format!(
                "coll_ibcast_big: root ended at its post: {through}"
            ));
        }
        for line in lines {
            assert!(
                out.lines().any(|l| l == line),
                "{what}: missing '{line}':\n{out}"
            );
        }
    }
}

/// Nonblocking reduce-scatters through the nonblocking large region with the ranks pinned
/// to CPUs round-robin (`tests/c/icoll_rs_cpu.c`: rank r on the r-th CPU it may use, modulo
/// their number), where commutative operations on equal blocks fold by CPU as the blocking
/// forms do: ireduce_scatter_block and ireduce_scatter with equal counts (in place and
/// not, 17 KiB to 512 KiB vectors, a late starter on each CPU in turn and every call's
/// values new), uneven counts and a non-commutative op (the rank-order fold), and several
/// outstanding at once with an iallreduce through the same region and an ibarrier,
/// completed in reverse order; checked element by element. At np 3 (CPUs of 2 and 1 ranks
/// on 2 CPUs), 4, 5 and 8 (up to 4 ranks a CPU, `Seg::group_nb`), all folding by CPU.
#[test]
fn nonblocking_reduce_scatters_by_cpu_np3_to_8() {
    run_on(
        "icoll_rs_cpu.c",
        &[3, 4, 5, 8],
        "",
        &["icoll_rs_cpu: all checks passed (70)"],
    );
}

/// Nonblocking scatters of 128 KiB to 1 MiB blocks (cross-memory copies) with the ranks
/// pinned to CPUs round-robin (`tests/c/icoll_scat_cpu.c`), where an in-place root shares
/// its readers' copies and writes the whole blocks of the readers pinned to its own CPU
/// (they leave them to it for a few looks, then claim what is left): every root, in place
/// and not, lengths of two chunks and of no multiple of a chunk or of 8, a root that
/// sleeps between its post and its wait, readers that sleep before theirs, two outstanding
/// with different roots completed in reverse order; every byte checked. At np 3, 4 and 8.
#[test]
fn nonblocking_scatters_by_cpu_np3_4_8() {
    for n in [3, 4, 8] {
        let line = format!("icoll_scat_cpu: all checks passed ({})", 12 * n + 6);
        run_on("icoll_scat_cpu.c", &[n], "", &[&line]);
    }
}
