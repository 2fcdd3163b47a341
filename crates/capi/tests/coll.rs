//! Collectives and topologies of the installed `libmpi.so.12`: the C programs
//! `tests/c/coll_*.c` built with our `mpicc` and run under our `mpirun` on 1 to 4 ranks
//! (3 and 4 oversubscribe the machine's cores, which the launcher allows).
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::ffi::OsStr;
use std::path::Path;

mod common;
use common::{build, mpirun, success, Scratch};

/// Runs `exe` on `n` ranks under our mpirun; returns stdout. Panics on failure.
fn run(exe: &Path, n: usize) -> String {
    run_args(exe, n, &[], &[])
}

/// [`run`] with program arguments and extra mpirun options.
fn run_args(exe: &Path, n: usize, args: &[&str], mpirun_opts: &[&str]) -> String {
    let mut all: Vec<&OsStr> = mpirun_opts.iter().map(OsStr::new).collect();
    let n_s = n.to_string();
    all.extend([OsStr::new("-n"), OsStr::new(&n_s), exe.as_os_str()]);
    all.extend(args.iter().map(OsStr::new));
    success(
        &mpirun(&all, &[]),
        &format!("{} on {n} ranks", exe.display()),
    )
}

fn check_program(name: &str, done: &str, lines: &[&str]) {
    let dir = Scratch::new("coll-build");
    let exe = build(name, &dir.0);
    for n in 1..=4 {
        let out = run(&exe, n);
        assert!(
            out.lines().any(|l| l == done),
            "{name} on {n} ranks did not finish:\n{out}"
        );
        for l in lines {
            assert!(out.lines().any(|x| x == *l), "{name} on {n}: missing '{l}'");
        }
    }
}

#[test]
fn collective_algorithms_np1_to_4() {
    check_program(
        "coll_algos.c",
        "coll_algos: all checks passed",
        &[
            "int sums, max, min, bcast at every root: ok",
            "non-commutative user op in rank order: ok",
            "minloc/maxloc on double_int: ok",
            "strided vector type: ok",
            "split/dup communicators: ok",
            "split_type shared: ok",
            "nonblocking collectives: ok",
        ],
    );
}

#[test]
fn topologies_np1_to_4() {
    check_program(
        "coll_topo.c",
        "coll_topo: all checks passed",
        &[
            "neighbourhood collectives on a grid: ok",
            "cartesian: ok",
            "graph: ok",
            "distributed graph: ok",
        ],
    );
}

/// Every blocking collective against a locally computed reference, for random counts,
/// roots, ops, datatypes (contiguous and strided) and `MPI_IN_PLACE` variants, at np 2-5.
#[test]
fn collectives_match_reference_np2_to_5() {
    let dir = Scratch::new("coll-prop");
    let exe = build("coll_prop.c", &dir.0);
    for n in 2..=5 {
        let out = run_args(&exe, n, &["24"], &[]);
        assert!(
            out.lines().any(|l| l == "coll_prop: all checks passed"),
            "coll_prop on {n} ranks did not finish:\n{out}"
        );
    }
}

/// Small blocking gathers, scatters, allgather(v)s, reduces, reduce-scatters and scans on
/// the shared-memory segment (`tests/c/coll_sm_blocking.c`): in place and not, every
/// root, sizes on both sides of one segment buffer, contiguous and strided types, against
/// local references; rooted ones back to back with the root moving; broadcasts around the
/// lane's line sizes, and 64 and 128 KiB ones back to back from rank 0 (on 2 ranks long
/// enough for the receiver's choice of copy to try both); `MPI_INT` reduce-scatters and allgatherv with empty blocks and guard
/// items (the direct paths on the user's buffers). At np 2, 3, 4, 5 and 8 (from 3 on
/// oversubscribing the machine, so ranks yield), and at np 3 with the component off (the
/// point-to-point algorithms pass the same checks; the counters then say it was not used).
#[test]
fn small_blocking_collectives_on_shared_memory_np2_to_8() {
    let dir = Scratch::new("coll-sm-blocking");
    let exe = build("coll_sm_blocking.c", &dir.0);
    for (n, on) in [
        (2, true),
        (3, true),
        (4, true),
        (5, true),
        (8, true),
        (3, false),
    ] {
        let opts = ["--mca", "coll_sm_enable", if on { "1" } else { "0" }];
        let out = run_args(&exe, n, &[], &opts);
        let used = if on { "used" } else { "not used" };
        for line in [
            format!("coll_sm_blocking: sm calls: {used}"),
            "coll_sm_blocking: all checks passed".to_string(),
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "coll_sm_blocking on {n} ranks (coll_sm_enable={on}): missing '{line}':\n{out}"
            );
        }
    }
}

/// Every blocking and nonblocking collective with ranks passing different datatypes of one
/// type signature (`tests/c/coll_mixed_types.c`: `MPI_INT`s, a contiguous derived type, a
/// strided resized `MPI_INT`, a resized strided vector, rotated over the ranks), blocks of
/// 4 B to 1 MiB around the segment's path bounds, reductions in place and not, against
/// local references with the holes untouched: a path chosen from a rank's own layout must
/// not diverge from the others'. At np 2 and 3, and at np 3 with the shared-memory
/// component off. A hang is reported by the program's alarm (which collective, size,
/// variant) or by mpirun's timeout.
#[test]
fn mixed_datatypes_of_one_signature_np2_np3() {
    let dir = Scratch::new("coll-mixed-types");
    let exe = build("coll_mixed_types.c", &dir.0);
    for (n, on) in [(2, true), (3, true), (3, false)] {
        let opts = [
            "--timeout",
            "170",
            "--mca",
            "coll_sm_enable",
            if on { "1" } else { "0" },
        ];
        let out = run_args(&exe, n, &[], &opts);
        assert!(
            out.lines()
                .any(|l| l == "coll_mixed_types: all checks passed"),
            "coll_mixed_types on {n} ranks (coll_sm_enable={on}) did not finish:\n{out}"
        );
    }
}

/// Erroneous counts fail cleanly instead of hanging (`tests/c/coll_errcounts.c`): bcasts
/// and ibcasts whose root sends more or fewer bytes than one rank posts, and alltoallv/w
/// and their I-forms where one pair's send and receive counts differ, allreduces where one
/// rank passes another count (blocking, nonblocking, persistent), reduces, scans and
/// exscans (every form) and reduce-scatters where one rank passes other counts (or splits
/// the vector otherwise with the same sum: every form), lengths on
/// both sides of the segment's bounds and far apart, one-byte items (error markers met by
/// receives of their length) and scans of a length header's image; each erroneous call is
/// followed by a correct one.
/// The rank that gets less room than the data fails with `MPI_ERR_TRUNCATE`. At np 2 to 4
/// with the shared-memory component off (the point-to-point algorithms and schedules), at
/// np 2 and 3 with it on (bcasts also at np 4, the nonblocking large region), and with it
/// on and single copies off (larger ialltoallv blocks and ibcasts by message). A hang is reported by the program's alarm (which call, which counts) or by
/// mpirun's timeout.
#[test]
fn erroneous_counts_fail_cleanly_np2_np3() {
    let dir = Scratch::new("coll-errcounts");
    let exe = build("coll_errcounts.c", &dir.0);
    // (ranks, segment, single copies, what). Broadcasts on the segment: every bound of
    // their paths (its buffer, the single copy, the large region on 3 and 4 ranks, which
    // yield on 2 cores) with single copies on and off.
    for (n, on, single, part) in [
        (2, "0", "1", &["bcast"][..]),
        (3, "0", "1", &["bcast"]),
        (4, "0", "1", &["bcast"]),
        (2, "1", "1", &["bcast"]),
        (3, "1", "1", &["bcast"]),
        (4, "1", "1", &["bcast"]),
        (2, "1", "0", &["bcast"]),
        (4, "1", "0", &["bcast"]),
        // 2-rank iscatters whose block lengths straddle the single copy's bound, or a
        // block through the segment's buffers against one by message (the message path
        // takes the segment's number without a post: a rank of the other path meets it
        // there), with single copies on and off.
        (2, "1", "1", &["scatter"]),
        (2, "1", "0", &["scatter"]),
        (2, "0", "1", &["a2a"]),
        (3, "0", "1", &["a2a"]),
        (2, "1", "1", &["a2a"]),
        (3, "1", "1", &["a2a"]),
        (3, "1", "0", &["a2a"]),
        // Allreduces where one rank passes another count: every form with the segment at
        // np 2 to 4 (the persistent one compares the lengths at its init), and without it
        // the blocking one (exact point-to-point exchanges) at np 2 to 4 and the
        // persistent one at np 2.
        (2, "1", "1", &["allreduce"]),
        (3, "1", "1", &["allreduce"]),
        (4, "1", "1", &["allreduce"]),
        (2, "0", "1", &["allreduce", "persistent"]),
        (2, "0", "1", &["allreduce", "blocking"]),
        (3, "0", "1", &["allreduce", "blocking"]),
        (4, "0", "1", &["allreduce", "blocking"]),
        // Without the segment, the nonblocking allreduce (a rank of recursive doubling
        // that got a wrong length runs the rounds Rabenseifner's algorithm has more, and
        // one of 8 to 16 KiB runs them always).
        (2, "0", "1", &["allreduce", "nonblocking"]),
        (3, "0", "1", &["allreduce", "nonblocking"]),
        (4, "0", "1", &["allreduce", "nonblocking"]),
        // Two erroneous ranks, every pair (on 4 ranks without the segment, ranks 1 and 2
        // on recursive doubling against 0 and 3 on Rabenseifner's algorithm: recursive
        // doubling takes its partners in that plan's order), blocking and nonblocking,
        // and with the segment.
        (3, "0", "1", &["allreduce", "twobad", "nopersistent"]),
        (4, "0", "1", &["allreduce", "twobad", "nopersistent"]),
        (4, "1", "1", &["allreduce", "twobad"]),
        // Reduces, scans and exscans where one rank passes another count, every form,
        // with the segment (every path of every length posts its length word at one
        // sequence number; the persistent forms compare the lengths at their init) at np 2
        // to 4; scans and exscans without it, every form (exact exchanges of recursive
        // doubling and the chain, exact schedules; "nosm" leaves out the pairs on
        // different plans at np 3 and 4, see the program's header).
        (2, "1", "1", &["reduce", "scan"]),
        (3, "1", "1", &["reduce", "scan"]),
        (4, "1", "1", &["reduce", "scan"]),
        (2, "0", "1", &["scan", "nosm"]),
        (3, "0", "1", &["scan", "nosm"]),
        (4, "0", "1", &["scan", "nosm"]),
        // Without it, blocking and nonblocking, also the pairs whose lengths take
        // different plans (recursive doubling against the chain, whose ranks check the
        // lengths over recursive doubling's messages first: the nonblocking ones in
        // rounds before the chain's) or chains of different segment counts.
        (3, "0", "1", &["scan", "nosm", "allplans", "blocking"]),
        (4, "0", "1", &["scan", "nosm", "allplans", "blocking"]),
        (3, "0", "1", &["scan", "nosm", "allplans", "nonblocking"]),
        (4, "0", "1", &["scan", "nosm", "allplans", "nonblocking"]),
        (5, "0", "1", &["scan", "nosm", "allplans", "nonblocking"]),
        (
            4,
            "0",
            "1",
            &["scan", "nosm", "allplans", "nonblocking", "noncomm"],
        ),
        // Reduce-scatters (block and counts) where one rank passes other counts: every
        // form with the segment (each path posts the whole vector's length at one
        // sequence number; the persistent forms compare it at their init), every form
        // without it (the ring's exact exchanges, the exact pairwise schedule), and the
        // blocking non-commutative path without it (the exact tree to rank 0, then its
        // exact scatterv); reduces without the segment, every form (the binomial tree's
        // exact receives, the exact ireduce schedule, the persistent init's check).
        (2, "1", "1", &["rs"]),
        (3, "1", "1", &["rs"]),
        (4, "1", "1", &["rs"]),
        (2, "0", "1", &["rs"]),
        (3, "0", "1", &["rs"]),
        (4, "0", "1", &["rs"]),
        (2, "0", "1", &["rs", "noncomm", "blocking"]),
        (3, "0", "1", &["rs", "noncomm", "blocking"]),
        (4, "0", "1", &["rs", "noncomm", "blocking"]),
        (2, "0", "1", &["reduce"]),
        (3, "0", "1", &["reduce"]),
        (4, "0", "1", &["reduce"]),
        // Reduce-scatters whose ranks split the vector otherwise with the same sum (counts
        // {1, 3} against {2, 2}, up to beyond the large region): the blocking,
        // nonblocking and persistent forms with the segment (the counts' mark in every
        // length compared: the small post, the pair's, the large region's, the phased
        // one's against a split by message), and without it (the ring's exact exchanges,
        // the exact pairwise schedule).
        (2, "1", "1", &["rsmix", "blocking"]),
        (3, "1", "1", &["rsmix", "blocking"]),
        (4, "1", "1", &["rsmix", "blocking"]),
        (2, "1", "1", &["rsmix", "nonblocking"]),
        (3, "1", "1", &["rsmix", "nonblocking"]),
        (4, "1", "1", &["rsmix", "nonblocking"]),
        (2, "1", "1", &["rsmix", "persistent"]),
        (4, "1", "1", &["rsmix", "persistent"]),
        (2, "0", "1", &["rsmix", "blocking", "nosm"]),
        (4, "0", "1", &["rsmix", "blocking", "nosm"]),
        (2, "0", "1", &["rsmix", "nonblocking", "nosm"]),
        (3, "0", "1", &["rsmix", "nonblocking", "nosm"]),
        (4, "0", "1", &["rsmix", "nonblocking", "nosm"]),
        // One-byte items without the segment (allreduce, reduce, scan, exscan, blocking
        // and nonblocking): an error marker meets receives of exactly its length, and
        // tells itself from data by its mark; with the segment at np 3.
        (2, "0", "1", &["bytes"]),
        (3, "0", "1", &["bytes"]),
        (4, "0", "1", &["bytes"]),
        (3, "1", "1", &["bytes"]),
        // A scan's length header against data of its bytes: 32-byte scans whose every
        // vector is a header's image succeed, and rank 0's image against the chain ranks'
        // length fails every rank above it (no hang).
        (3, "0", "1", &["magic"]),
        (4, "0", "1", &["magic"]),
    ] {
        let max = if single == "1" { "32768" } else { "0" };
        let many = if single == "1" { "1048576" } else { "0" };
        let opts = [
            "--timeout",
            "170",
            "--mca",
            "coll_sm_enable",
            on,
            "--mca",
            "coll_sm_single_copy_max",
            max,
            "--mca",
            "coll_sm_single_copy_max_many",
            many,
        ];
        let out = run_args(&exe, n, part, &opts);
        assert!(
            out.lines()
                .any(|l| l == "coll_errcounts: all checks passed"),
            "coll_errcounts {part:?} on {n} ranks (coll_sm_enable={on}, single copies {single}) \
             did not finish:\n{out}"
        );
    }
}

/// `MPI_Reduce` and `MPI_Allreduce` of every predefined op on the predefined basic types
/// MPI defines it for (`tests/c/coll_basic_ops.c`, the path without a datatype reference),
/// against a reference computed in the program: counts on both sides of a segment buffer,
/// buffers aligned and one byte off, in place and not, every root; MINLOC/MAXLOC on
/// `MPI_2INT` and a non-commutative user op (general path) folding in rank order. At np
/// 2, 3 and 4, and at np 3 with the shared-memory component off.
#[test]
fn reduce_allreduce_basic_ops_np2_to_4() {
    let dir = Scratch::new("coll-basic-ops");
    let exe = build("coll_basic_ops.c", &dir.0);
    for (n, on) in [(2, true), (3, true), (4, true), (3, false)] {
        let opts = ["--mca", "coll_sm_enable", if on { "1" } else { "0" }];
        let out = run_args(&exe, n, &[], &opts);
        for line in [
            "basic ops: ok",
            "pairs and user ops: ok",
            "coll_basic_ops: all checks passed",
        ] {
            assert!(
                out.lines().any(|l| l == line),
                "coll_basic_ops on {n} ranks (coll_sm_enable={on}): missing '{line}':\n{out}"
            );
        }
    }
}

/// Reduces past one segment buffer (`tests/c/coll_reduce_big.c`), which take the segment's
/// large region when it can be used: sizes around 4 KiB, the chunks and items straddling
/// them, up to 1 MiB; `MPI_CHAR`, `INT`, `FLOAT`, `DOUBLE`, `LONG` (SUM, MAX), MINLOC on
/// 12-byte pairs and a non-commutative user op; every root, in place and not, back to back
/// with the root moving and large allreduces sharing the region. At np 2 (the large region
/// used), 3, 4, 5 and 8, and at np 2 with large allreduces through the region too. Also
/// allreduce and reduce_scatter(_block) of the same sizes, which on two ranks go by
/// cross-memory copies (the counters say so there, and not on three ranks that spin), and
/// on four that yield through the nonblocking large region (the counters say so).
#[test]
fn large_reduces_np2_to_8() {
    let dir = Scratch::new("coll-reduce-big");
    let exe = build("coll_reduce_big.c", &dir.0);
    let region = ["--mca", "coll_sm_allreduce_large_min", "0"];
    let spin = ["--mca", "mpi_yield_when_idle", "0"];
    let yields = ["--mca", "mpi_yield_when_idle", "1"];
    for (n, opts) in [
        (2, &[][..]),
        (2, &region[..]),
        (3, &spin[..]),
        (4, &yields[..]),
        (5, &[]),
        (8, &[]),
    ] {
        let out = run_args(&exe, n, &[], opts);
        assert!(
            out.lines()
                .any(|l| l == "coll_reduce_big: all checks passed"),
            "coll_reduce_big on {n} ranks {opts:?} did not finish:\n{out}"
        );
        if n == 2 {
            assert!(
                out.lines()
                    .any(|l| l == "coll_reduce_big: large reduce on sm: used"),
                "coll_reduce_big on 2 ranks: the large region was not used:\n{out}"
            );
        }
        // Two ranks: allreduce and reduce_scatter by cross-memory copies; three that spin:
        // not (the allreduce point to point); four that yield: the allreduce through the
        // nonblocking large region (as the reduce-scatter).
        let (pair, allr) = match n {
            2 => ("used", "used"),
            3 => ("not used", "not used"),
            4 => ("used", "used"),
            _ => continue,
        };
        assert!(
            out.lines()
                .any(|l| l == format!("coll_reduce_big: allreduce on sm: {allr}")),
            "coll_reduce_big on {n} ranks: the allreduce on sm should be {allr}:\n{out}"
        );
        assert!(
            out.lines().any(|l| l
                == format!("coll_reduce_big: pair allreduce and reduce_scatter on sm: {pair}")),
            "coll_reduce_big on {n} ranks: the pair path should be {pair}:\n{out}"
        );
    }
}

/// Reduce-scatters through the nonblocking large region with the ranks pinned to CPUs
/// round-robin (`tests/c/coll_rs_cpu.c`: rank r on the r-th CPU it may use, modulo their
/// number), where commutative operations on equal blocks fold by CPU and cross CPUs once
/// per block: reduce_scatter_block and reduce_scatter with equal counts (in place and not,
/// 17 KiB to 512 KiB vectors, a late starter on each CPU in turn and every call's values
/// new), uneven counts and a non-commutative op (the rank-order fold), checked element by
/// element. At np 3 (CPUs of 2 and 1 ranks on 2 CPUs), 4, 5 and 8.
#[test]
fn reduce_scatters_by_cpu_np3_to_8() {
    let dir = Scratch::new("coll-rs-cpu");
    let exe = build("coll_rs_cpu.c", &dir.0);
    for n in [3, 4, 5, 8] {
        let out = run_args(&exe, n, &[], &[]);
        assert!(
            out.lines()
                .any(|l| l == "coll_rs_cpu: all checks passed (96)"),
            "coll_rs_cpu on {n} ranks did not finish:\n{out}"
        );
    }
}

/// Allgather(v) past the segment's blocks (`tests/c/coll_allgather_big.c`), whose first
/// exchange out of place sends our block from the send buffer: sizes around 4 KiB and up
/// to 256 KiB, `MPI_INT`, a strided type, uneven and empty allgatherv blocks, at np 2 to 5
/// and 8 (power of two: recursive doubling; others: ring), and with single copy off.
#[test]
fn large_allgathers_out_of_place_np2_to_8() {
    let dir = Scratch::new("coll-allgather-big");
    let exe = build("coll_allgather_big.c", &dir.0);
    for (n, opts) in [
        (2, &[][..]),
        (3, &[]),
        (4, &[]),
        (5, &[]),
        (8, &[]),
        (2, &["--mca", "btl_sm_single_copy_mechanism", "none"]),
        (3, &["--mca", "btl_sm_single_copy_mechanism", "none"]),
    ] {
        let out = run_args(&exe, n, &[], opts);
        assert!(
            out.lines()
                .any(|l| l == "coll_allgather_big: all checks passed"),
            "coll_allgather_big on {n} ranks {opts:?} did not finish:\n{out}"
        );
    }
}

/// The property test on a duplicate of world and on a split with the ranks reversed (the
/// shared-memory paths are made per communicator), at np 2 and 5, also with every
/// allreduce above 4 KiB through the large-vector shared-memory region.
#[test]
fn collectives_match_reference_on_derived_communicators() {
    let dir = Scratch::new("coll-prop-comms");
    let exe = build("coll_prop.c", &dir.0);
    for (n, on, opts) in [
        (2, "dup", &[][..]),
        (2, "rsplit", &[]),
        (2, "dup", &["--mca", "coll_sm_allreduce_large_min", "0"]),
        (5, "dup", &[]),
        // The region is skipped when ranks yield (oversubscribed): keep them spinning.
        (
            5,
            "rsplit",
            &[
                "--mca",
                "coll_sm_allreduce_large_min",
                "0",
                "--mca",
                "mpi_yield_when_idle",
                "0",
            ],
        ),
    ] {
        let out = run_args(&exe, n, &["16", on], opts);
        assert!(
            out.lines().any(|l| l == "coll_prop: all checks passed"),
            "coll_prop on {n} ranks ({on}) did not finish:\n{out}"
        );
    }
}

/// Alltoall, alltoallv and alltoallw, in place and not, with blocks on both sides of the
/// segment's buffer, of the out-of-place cross-memory limit and of the in-place trade's
/// bounce buffer (`tests/c/coll_a2a_large.c`: uneven and zero counts, untouched gaps,
/// strided derived types on either side of alltoallw), at np 2 to 8 (oversubscribed).
#[test]
fn alltoall_family_large_np2_to_8() {
    let dir = Scratch::new("coll-a2a-large");
    let exe = build("coll_a2a_large.c", &dir.0);
    for n in 2..=8 {
        let out = run_args(&exe, n, &[], &["--timeout", "150"]);
        assert!(
            out.lines()
                .any(|l| l == "coll_a2a_large: all checks passed"),
            "coll_a2a_large on {n} ranks did not finish:\n{out}"
        );
    }
}

/// The property test with each algorithm forced through its `coll_tuned_*_algorithm`
/// parameter (which also bypasses the shared-memory paths for that collective), and with
/// the shared-memory paths off, at np 3 (not a power of two) and 4, on world, a duplicate
/// and a reversed split in turn.
#[test]
fn forced_algorithms_match_reference_np3_and_4() {
    let dir = Scratch::new("coll-prop-forced");
    let exe = build("coll_prop.c", &dir.0);
    let cases = [
        ("coll_tuned_allreduce_algorithm", "2"),
        ("coll_tuned_allreduce_algorithm", "3"),
        ("coll_tuned_allreduce_algorithm", "4"),
        ("coll_tuned_allreduce_algorithm", "6"),
        ("coll_tuned_bcast_algorithm", "1"),
        ("coll_tuned_bcast_algorithm", "3"),
        ("coll_tuned_bcast_algorithm", "6"),
        ("coll_tuned_bcast_algorithm", "8"),
        ("coll_tuned_alltoall_algorithm", "1"),
        ("coll_tuned_alltoall_algorithm", "2"),
        ("coll_tuned_alltoall_algorithm", "3"),
        ("coll_tuned_barrier_algorithm", "1"),
        ("coll_sm_enable", "0"),
        ("coll_sm_allreduce_large_min", "0"),
    ];
    for (i, (name, value)) in cases.iter().enumerate() {
        let on = ["world", "dup", "rsplit"][i % 3];
        for n in [3, 4] {
            let out = run_args(&exe, n, &["10", on], &["--mca", name, value]);
            assert!(
                out.lines().any(|l| l == "coll_prop: all checks passed"),
                "coll_prop on {n} ranks ({on}) with {name}={value} did not finish:\n{out}"
            );
        }
    }
}

/// mpi4py's testGatherv3 / testScatterv3 loop (every root, counts 0..size, predefined
/// types of 1-32 bytes and a strided vector, Barrier between the calls, NULL receive
/// arguments on non-roots, blocking and nonblocking) on 5 oversubscribed ranks; mpirun's
/// `--timeout` ends the job if it hangs (mpi4py's modules once stalled there at np=5).
#[test]
fn gatherv_scatterv_loop_np3_and_5() {
    let dir = Scratch::new("coll-vloop");
    let exe = build("coll_vloop.c", &dir.0);
    for n in [3, 5] {
        let out = run_args(&exe, n, &[], &["--timeout", "150"]);
        assert!(
            out.lines().any(|l| l == "coll_vloop: all checks passed"),
            "coll_vloop on {n} ranks did not finish:\n{out}"
        );
    }
}

/// Nonblocking collectives progress without blocking at start (the program deadlocks on a
/// blocking-at-start implementation) and match a local reference, at np 1-4.
#[test]
fn nonblocking_collectives_progress_np1_to_4() {
    check_program(
        "coll_nb.c",
        "coll_nb: all checks passed",
        &["coll_nb: random outstanding nonblocking collectives: ok"],
    );
}

/// Every predefined (datatype, operation) pair through allreduce, reduce and iallreduce,
/// out of place and in place, at counts taking each path (segment, point-to-point, and at
/// np 2 the large-vector region), against a reference: the vectorised kernels included.
#[test]
fn reductions_of_every_predefined_type_and_op() {
    let dir = Scratch::new("coll-types");
    let exe = build("coll_types.c", &dir.0);
    for (n, args) in [(2, &["big"][..]), (3, &[])] {
        let out = run_args(&exe, n, args, &[]);
        assert!(
            out.lines().any(|l| l == "coll_types: all checks passed"),
            "coll_types on {n} ranks did not finish:\n{out}"
        );
    }
}

/// MINLOC/MAXLOC on every value-index pair type (those with a gap, moved packed and reduced
/// by the packed-form kernels, and those without) through the blocking and nonblocking
/// reductions, in place and not, at np 2 (up to the large-vector region) and 3: the values,
/// and no byte outside the type map written (gaps, padding, past the buffer, whose last
/// item's padding is an inaccessible page).
#[test]
fn pair_type_reductions_leave_gaps_and_padding_alone() {
    let dir = Scratch::new("coll-pairs");
    let exe = build("coll_pairs.c", &dir.0);
    for (n, args) in [(2, &["big"][..]), (3, &[])] {
        let out = run_args(&exe, n, args, &[]);
        assert!(
            out.lines().any(|l| l == "coll_pairs: all checks passed"),
            "coll_pairs on {n} ranks did not finish:\n{out}"
        );
    }
}

/// MINLOC/MAXLOC on `MPI_2INT` and `MPI_FLOAT_INT` (reduced in their layout by the one-word
/// pair kernels) at odd counts on both sides of 1 MiB, through allreduce, reduce and their
/// nonblocking forms, in place and not, at np 2 and 4 (the large region's slices and the
/// paths past it), each buffer also 4 bytes into a page (aligned for the ints, not for
/// 8-byte words): every rank's values and indices against a reference, and no byte outside
/// the type map written.
#[test]
fn pair_type_reductions_of_odd_counts_around_1mib_np2_4() {
    let dir = Scratch::new("coll-pairs-pieces");
    let exe = build("coll_pairs.c", &dir.0);
    for n in [2, 4] {
        let out = run_args(&exe, n, &["pieces"], &[]);
        assert!(
            out.lines().any(|l| l == "coll_pairs: all checks passed"),
            "coll_pairs pieces on {n} ranks did not finish:\n{out}"
        );
    }
}

/// The benchmark program `bench/c/oxbench.c` runs every collective it measures, blocking
/// and nonblocking (with its overlap line), out of place and in place, with a pair type
/// and MINLOC too, at np 2 and 3: each prints its result line (no timing is checked).
#[test]
fn oxbench_runs_every_collective() {
    let dir = Scratch::new("oxbench");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bench/c/oxbench.c");
    let exe = dir.0.join("oxbench");
    common::compile(&common::prefix().join("bin/mpicc"), &src, &exe);
    let colls = [
        "allreduce",
        "reduce",
        "bcast",
        "gather",
        "gatherv",
        "scatter",
        "scatterv",
        "allgather",
        "allgatherv",
        "alltoall",
        "alltoallv",
        "alltoallw",
        "reduce_scatter",
        "reduce_scatter_block",
        "scan",
        "barrier",
    ];
    let all: Vec<String> = colls
        .iter()
        .flat_map(|c| [c.to_string(), format!("i{c}")])
        .collect();
    let tests = all.join(",");
    for (n, opts) in [
        (2, &["method=osu", "inplace=0"][..]),
        (3, &["inplace=1", "method=b2b"]),
        (2, &["dtype=DOUBLE_INT", "op=MAXLOC"]),
    ] {
        let mut args = vec![tests.as_str(), "1", "0.01", "budget=0.02"];
        args.extend(opts);
        args.extend(["16", "8192"]);
        let out = run_args(&exe, n, &args, &[]);
        for t in &all {
            let sizes: &[&str] = if t.ends_with("barrier") {
                &["0"]
            } else {
                &["16", "8192"]
            };
            for s in sizes {
                let want = format!("RESULT test={t} np={n} size={s} ");
                assert!(
                    out.lines().any(|l| l.starts_with(&want)),
                    "oxbench {opts:?} on {n} ranks: no '{want}':\n{out}"
                );
            }
            if t.starts_with('i') {
                let want = format!("OVERLAP test={t} np={n} ");
                assert!(out.lines().any(|l| l.starts_with(&want)), "no '{want}'");
            }
        }
    }
}
