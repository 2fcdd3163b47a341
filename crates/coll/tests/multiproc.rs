//! Multi-process tests: the test binary re-runs itself as N ranks (test `rank_entry`), which
//! bootstrap through the engine's file key-value store in a temporary directory. Every
//! collective is compared with a straightforward reference computed locally (each rank can
//! regenerate every rank's contribution) for random sizes, roots and ops, with the
//! automatic algorithm choice and with each alternative forced.

use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use oxmpi_coll::base::select;
use oxmpi_coll::tune::Coll;
use oxmpi_coll::{comm_free, CollComm, Op};
use oxmpi_engine::{init, Engine, SendMode, ThreadLevel};

const SCENARIO: &str = "OXMPI_COLL_TEST_SCENARIO";
static COUNTER: AtomicU32 = AtomicU32::new(0);

struct Job {
    dir: std::path::PathBuf,
    children: Vec<Child>,
}

impl Drop for Job {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn run(n: usize, scenario: &str, env: &[(&str, &str)]) {
    run_within(n, scenario, env, 300);
}

/// [`run`], failing when the ranks have not all exited after `secs` seconds (a hang).
fn run_within(n: usize, scenario: &str, env: &[(&str, &str)], secs: u64) {
    let dir = std::env::temp_dir().join(format!(
        "oxmpi-coll-test-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let mut job = Job {
        dir: dir.clone(),
        children: Vec::new(),
    };
    let exe = std::env::current_exe().unwrap();
    for r in 0..n {
        let mut cmd = Command::new(&exe);
        cmd.args([
            "--ignored",
            "--exact",
            "rank_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(SCENARIO, scenario)
        .env("OXMPI_ENGINE_KVS_DIR", &dir)
        .env("OXMPI_ENGINE_RANK", r.to_string())
        .env("OXMPI_ENGINE_SIZE", n.to_string())
        .env("OXMPI_MCA_mpi_yield_when_idle", "1")
        .stdout(std::process::Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        // SAFETY: prctl is async-signal-safe; it makes the rank die with the test process.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        job.children.push(cmd.spawn().unwrap());
    }
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut codes = vec![None; n];
    while codes.iter().any(Option::is_none) {
        for (r, c) in job.children.iter_mut().enumerate() {
            if codes[r].is_none() {
                if let Some(st) = c.try_wait().unwrap() {
                    codes[r] = Some(st);
                }
            }
        }
        assert!(
            Instant::now() < deadline,
            "scenario {scenario} on {n} ranks hung; exit states so far {codes:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    for (r, c) in codes.iter().enumerate() {
        let c = c.unwrap();
        assert!(
            c.success(),
            "scenario {scenario}: rank {r} of {n} failed: {c:?}"
        );
    }
}

#[test]
fn collectives_np1() {
    run(1, "suite", &[]);
}
#[test]
fn collectives_np2() {
    run(2, "suite", &[]);
}
#[test]
fn collectives_np3() {
    run(3, "suite", &[]);
}
#[test]
fn collectives_np4() {
    run(4, "suite", &[]);
}
#[test]
fn collectives_np5() {
    run(5, "suite", &[]);
}

const FORCED_A: &[(&str, &str)] = &[
    ("OXMPI_MCA_coll_tuned_barrier_algorithm", "1"),
    ("OXMPI_MCA_coll_tuned_bcast_algorithm", "8"),
    ("OXMPI_MCA_coll_tuned_reduce_algorithm", "1"),
    ("OXMPI_MCA_coll_tuned_allreduce_algorithm", "4"),
    ("OXMPI_MCA_coll_tuned_allgather_algorithm", "4"),
    ("OXMPI_MCA_coll_tuned_alltoall_algorithm", "3"),
    ("OXMPI_MCA_coll_tuned_reduce_scatter_algorithm", "1"),
    ("OXMPI_MCA_coll_tuned_gather_algorithm", "2"),
    ("OXMPI_MCA_coll_tuned_scatter_algorithm", "2"),
];
const FORCED_B: &[(&str, &str)] = &[
    ("OXMPI_MCA_coll_tuned_bcast_algorithm", "1"),
    ("OXMPI_MCA_coll_tuned_reduce_algorithm", "5"),
    ("OXMPI_MCA_coll_tuned_allreduce_algorithm", "2"),
    ("OXMPI_MCA_coll_tuned_allgather_algorithm", "3"),
    ("OXMPI_MCA_coll_tuned_alltoall_algorithm", "2"),
    ("OXMPI_MCA_coll_tuned_reduce_scatter_algorithm", "3"),
    ("OXMPI_MCA_coll_tuned_gather_algorithm", "1"),
    ("OXMPI_MCA_coll_tuned_scatter_algorithm", "1"),
];
const FORCED_C: &[(&str, &str)] = &[
    ("OXMPI_MCA_coll_tuned_alltoall_algorithm", "1"),
    ("OXMPI_MCA_coll_tuned_bcast_algorithm", "3"),
    ("OXMPI_MCA_coll_tuned_allreduce_algorithm", "6"),
];

#[test]
fn forced_algorithms_a_np3() {
    run(3, "suite", FORCED_A);
}
#[test]
fn forced_algorithms_a_np4() {
    run(4, "suite", FORCED_A);
}
#[test]
fn forced_algorithms_b_np4() {
    run(4, "suite", FORCED_B);
}
#[test]
fn forced_algorithms_b_np5() {
    run(5, "suite", FORCED_B);
}
#[test]
fn forced_algorithms_c_np3() {
    run(3, "suite", FORCED_C);
}
#[test]
fn forced_algorithms_c_np4() {
    run(4, "suite", FORCED_C);
}
#[test]
fn forced_algorithms_c_np5() {
    run(5, "suite", FORCED_C);
}
/// The `sm` component through the framework's selection (`base::select`), with the large
/// allreduce region enabled from 16 KiB (ranks busy-poll so that it is used).
const SM: &[(&str, &str)] = &[
    ("OXMPI_MCA_mpi_yield_when_idle", "0"),
    ("OXMPI_MCA_coll_sm_allreduce_large_min", "16384"),
];

#[test]
fn shared_memory_component_np2() {
    run(2, "sm", SM);
}
#[test]
fn shared_memory_component_np3() {
    run(3, "sm", SM);
}
/// Scatterv on the segment whose root reuses its send buffer at once ([`scatterv_reuse`]),
/// ranks busy-polling and yielding.
#[test]
fn scatterv_root_reuse_np2() {
    run(2, "sv-reuse", SM);
}
/// Allreduces and reduces of one to six lines on the segment back to back ([`lines_suite`]),
/// ranks busy-polling and yielding.
#[test]
fn reductions_lines_np2() {
    run(2, "lines", SM);
}
#[test]
fn reductions_lines_yielding_np3() {
    run(3, "lines", &[("OXMPI_MCA_mpi_yield_when_idle", "1")]);
}
/// Bcasts, scatters, scattervs and allgathers whose data goes through the ranks' ring cells
/// ([`ring_suite`]): many times round the ring, roots running ahead of slow readers.
#[test]
fn ring_cells_np2() {
    run(2, "ring", SM);
}
/// A scatterv whose root was given invalid counts fails at every rank, on the segment,
/// instead of leaving the root waiting for its own post; the next one works.
#[test]
fn scatterv_invalid_root_args_np3() {
    run(3, "sv-invalid", SM);
}
/// Rooted posts of at least `AHEAD_MIN` bytes into a ring cell or a nonblocking buffer have
/// their root ask for the next collective's lines once, at its next wait; smaller posts and
/// allgathers not ([`ask_ahead_suite`]).
#[test]
fn ask_ahead_np2() {
    run(2, "ask-ahead", SM);
}
#[test]
fn ring_cells_yielding_np3() {
    run(3, "ring", &[("OXMPI_MCA_mpi_yield_when_idle", "1")]);
}
/// Small scattervs on the segment whose blocks fit the stamp's line, with a word of lengths
/// for a table, or just do not ([`scatterv_compact`]), the root moving and running ahead of
/// late readers.
#[test]
fn scatterv_compact_np4() {
    run(4, "sv-compact", SM);
}
#[test]
fn scatterv_compact_yielding_np3() {
    run(3, "sv-compact", &[("OXMPI_MCA_mpi_yield_when_idle", "1")]);
}
/// Scattervs whose other ranks' blocks stay in the root's buffer or go to its ring cell,
/// by turns ([`scatterv_ring_edge`]), the root running ahead of late readers.
#[test]
fn scatterv_ring_edge_np4() {
    run(4, "sv-ring-edge", SM);
}
#[test]
fn scatterv_ring_edge_yielding_np3() {
    run(3, "sv-ring-edge", &[("OXMPI_MCA_mpi_yield_when_idle", "1")]);
}
#[test]
fn scatterv_root_reuse_yielding_np3() {
    run(3, "sv-reuse", &[("OXMPI_MCA_mpi_yield_when_idle", "1")]);
}
/// Ranks that yield when idle wait on the segment's flags: yielding at every look (the
/// default), and looking `coll_sm_spin_first` times first.
#[test]
fn shared_memory_component_yielding_np4() {
    run(4, "sm", &[("OXMPI_MCA_mpi_yield_when_idle", "1")]);
}
#[test]
fn shared_memory_component_yielding_after_spinning_np3() {
    run(
        3,
        "sm",
        &[
            ("OXMPI_MCA_mpi_yield_when_idle", "1"),
            ("OXMPI_MCA_coll_sm_spin_first", "64"),
        ],
    );
}
#[test]
fn shared_memory_component_disabled_np3() {
    run(3, "sm-off", &[("OXMPI_MCA_coll_sm_enable", "0")]);
}

/// Alltoallv through the segment's table, its cross-memory copies and the point-to-point
/// fallback, in place and not, at every rank count from 2 to 8 (ranks yield when idle).
#[test]
fn alltoallv_on_segment_np2() {
    run(2, "a2a", &[]);
}
#[test]
fn alltoallv_on_segment_np3() {
    run(3, "a2a", &[]);
}
#[test]
fn alltoallv_on_segment_np4() {
    run(4, "a2a", &[]);
}
#[test]
fn alltoallv_on_segment_np5() {
    run(5, "a2a", &[]);
}
#[test]
fn alltoallv_on_segment_np6() {
    run(6, "a2a", &[]);
}
#[test]
fn alltoallv_on_segment_np7() {
    run(7, "a2a", &[]);
}
#[test]
fn alltoallv_on_segment_np8() {
    run(8, "a2a", &[]);
}

/// Out-of-place alltoall(v)s of blocks of 64-128 KiB, many in a row, each rank writing its
/// blocks into the receivers' buffers (`coll_sm_alltoall_push_min`, [`a2a_push_suite`]):
/// a fresh receive buffer per call with its own layout, the last ones kept and checked
/// unchanged after every later call (a late write or one at a stale layout shows there),
/// in-place alltoallvs between them. 8 ranks yield on this machine's few cores, so
/// writers and receivers interleave.
#[test]
fn alltoall_push_np2() {
    run(2, "a2a-push", &[PUSH_ON]);
}
#[test]
fn alltoall_push_np4() {
    run(4, "a2a-push", &[PUSH_ON]);
}
#[test]
fn alltoall_push_np8() {
    run(8, "a2a-push", &[PUSH_ON]);
}
/// Allgather(v)s on 2 ranks of blocks too large for a segment buffer, 96 in a row: out of
/// place rank 0 picks per call whether each rank writes its block into the other's buffer or reads the
/// other's block, and the other follows its post ([`ag_pair_suite`]); both ways must run
/// and every call's data arrive whole in its own fresh buffer.
#[test]
fn allgather_pair_ways_np2() {
    run(2, "ag-pair", &[]);
}
/// The same exchanges read by the receivers instead: push off by parameter, and with
/// `process_vm_writev` denied by a seccomp filter (the probe finds the read allowed and the
/// write not: every rank reads).
#[test]
fn alltoall_push_off_np4() {
    run(
        4,
        "a2a-pull",
        &[("OXMPI_MCA_coll_sm_alltoall_push_min", "0")],
    );
}
#[test]
#[cfg(target_arch = "x86_64")]
fn alltoall_push_denied_np4() {
    let seccomp = std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.starts_with("Seccomp:")));
    if !seccomp {
        eprintln!("SKIPPED: the kernel has no seccomp filters to deny process_vm_writev");
        return;
    }
    run(4, "a2a-pull", &[(DENY_WRITEV, "1"), PUSH_ON]);
}

/// Push on for blocks from 64 KiB (the default is 32 KiB: set here so that the suite does
/// not depend on it).
const PUSH_ON: (&str, &str) = ("OXMPI_MCA_coll_sm_alltoall_push_min", "65536");

/// Set: the rank installs a seccomp filter that makes `process_vm_writev` fail with EPERM
/// before it starts.
const DENY_WRITEV: &str = "OXMPI_COLL_TEST_DENY_WRITEV";

/// Installs a seccomp filter making `process_vm_writev` fail with EPERM in this process.
#[cfg(target_arch = "x86_64")]
fn deny_process_vm_writev() {
    // Classic BPF over struct seccomp_data (nr at offset 0).
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    let filter = [
        op(LD_W_ABS, 0, 0, 0),
        op(JEQ_K, 0, 1, libc::SYS_process_vm_writev as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        op(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ];
    let prog = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    // SAFETY: `prog` points to a valid filter that the kernel copies during the call; these
    // prctls only restrict this process.
    unsafe {
        assert_eq!(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
        assert_eq!(
            libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER as libc::c_ulong,
                &prog as *const libc::sock_fprog
            ),
            0
        );
    }
}

/// Ranks that yield when idle and sleep on the segment's doorbells after one yield
/// (`coll_sm_block_after`), each sleep allowed a minute (`coll_sm_sleep_max`): a lost
/// wake-up (a rank asleep on a word already written) shows as a round far longer than
/// the time limit of [`sleep_suite`]. 8 ranks on this machine's few cores: most waits sleep.
#[test]
fn segment_waiters_sleep_and_are_woken_np8() {
    run(
        8,
        "sm-sleep",
        &[
            ("OXMPI_MCA_mpi_yield_when_idle", "1"),
            ("OXMPI_MCA_coll_sm_block_after", "1"),
            ("OXMPI_MCA_coll_sm_sleep_max", "60000000"),
        ],
    );
}

/// The point-to-point alltoallv and allgatherv (see [`v_tuned_suite`]) at 2 to 8 ranks.
#[test]
fn v_point_to_point_np2() {
    run(2, "vtuned", &[]);
}
#[test]
fn v_point_to_point_np3() {
    run(3, "vtuned", &[]);
}
#[test]
fn v_point_to_point_np4() {
    run(4, "vtuned", &[]);
}
#[test]
fn v_point_to_point_np8() {
    run(8, "vtuned", &[]);
}

#[test]
fn nonblocking_progress_np3() {
    run(3, "nbc", &[]);
}

#[test]
fn progress_thread_after_driven_waits_np2() {
    run(2, "nbc-driven", &[]);
}

/// The nonblocking reductions' schedules reading the input where it is (out of place, in
/// place, and in place through the same memory given twice), every root, a commutative and
/// a non-commutative operation: power-of-two, folded and tree-interior ranks.
#[test]
fn nonblocking_reductions_np2() {
    run(2, "nbc-reduce", &[]);
}
#[test]
fn nonblocking_reductions_np3() {
    run(3, "nbc-reduce", &[]);
}
#[test]
fn nonblocking_reductions_np5() {
    run(5, "nbc-reduce", &[]);
}

/// The large-vector reductions at every rank count from 2 to 8 (oversubscribed past 2 on
/// small machines): scan and exscan through the pipelined chain, their schedules, and the
/// nonblocking allreduce's Rabenseifner schedule ([`large_reduce_suite`]).
/// Two-rank reduce-scatter on both sides of the cross-memory path's bounds, in place and
/// not, through the calls the C library makes.
#[test]
fn reduce_scatter_pair_np2() {
    run(2, "rs-pair", SM);
}
#[test]
fn large_reductions_np2() {
    run(2, "large-red", &[]);
}
#[test]
fn large_reductions_np3() {
    run(3, "large-red", &[]);
}
#[test]
fn large_reductions_np4() {
    run(4, "large-red", &[]);
}
#[test]
fn large_reductions_np5() {
    run(5, "large-red", &[]);
}
#[test]
fn large_reductions_np6() {
    run(6, "large-red", &[]);
}
#[test]
fn large_reductions_np7() {
    run(7, "large-red", &[]);
}
#[test]
fn large_reductions_np8() {
    run(8, "large-red", &[]);
}
/// Back-to-back broadcasts larger than a segment buffer among ranks that yield when idle
/// (through the large region: the root returns without waiting for its readers), see
/// [`bcast_big_suite`]; without single copies, so that only the region carries them on
/// the segment.
#[test]
fn bcast_big_np3() {
    run(3, "bcast-big", BCAST_BIG);
}
#[test]
fn bcast_big_np4() {
    run(4, "bcast-big", BCAST_BIG);
}
/// Gathers and gathervs on 2 ranks by one cross-memory copy whose direction the root's post
/// decides (`sm::Seg::gather_pair`), see [`gather_pair_suite`]; with ranks that spin and
/// with ranks that yield when idle.
#[test]
fn gather_pair_np2() {
    run(2, "gather-pair", &[("OXMPI_MCA_mpi_yield_when_idle", "0")]);
}
#[test]
fn gather_pair_yielding_np2() {
    run(2, "gather-pair", &[]);
}
/// Erroneous gathervs whose root count for a rank's block and the block's length lie on
/// either side of a bound between paths (posted on the segment, written by one
/// cross-memory copy, [`oxmpi_coll::sm::GATHER_PAIR`] on 2 ranks, point to point), see
/// [`gatherv_mismatch_suite`]: a longer block than its count fails on the root with
/// `MPI_ERR_TRUNCATE` (and on its rank where the segment decides), a shorter one arrives;
/// no rank waits for a post that never comes (the harness fails a run that takes more than
/// 120 s), and a correct gatherv afterwards works. The same for scatterv, whose root's
/// table already decides for every rank ([`scatterv_mismatch`]).
#[test]
fn gatherv_mismatch_np2() {
    run_within(2, "gv-mismatch", &[], 120);
}
#[test]
fn gatherv_mismatch_np3() {
    run_within(3, "gv-mismatch", &[], 120);
}
/// Erroneous gathers and scatters whose root's block and one rank's block lie one byte
/// apart on either side of every bound between paths (lane, ring cell, posted, one
/// cross-memory copy, [`oxmpi_coll::sm::GATHER_PAIR`] on 2 ranks, point to point), every
/// root, in place and not, see [`gather_scatter_mismatch_suite`]: the rank that would get
/// more than it expects fails with `MPI_ERR_TRUNCATE`, a shorter block arrives, no rank
/// waits for a post that never comes (the harness fails a run that takes more than 120 s),
/// and a correct gather and scatter afterwards work.
#[test]
fn gather_scatter_mismatch_np2() {
    run_within(2, "gs-mismatch", &[], 120);
}
#[test]
fn gather_scatter_mismatch_np3() {
    run_within(3, "gs-mismatch", &[], 120);
}
/// A scatter rank whose block goes point to point posts its receive before it reads the
/// root's post, on the collective's own tag (`select::scatter_leaf_p2p`): erroneous
/// scatters whose root's blocks are on the segment (lane, ring cell, table) while the other
/// ranks expect point-to-point blocks, each right after followed by a correct
/// point-to-point scatter from the same root, the other ranks arriving late, so that the
/// root's message of the second is there before they post their receive of the first
/// ([`scatter_ahead_suite`]): the first gets the root's short block, the second its own.
#[test]
fn scatter_ahead_np2() {
    run_within(2, "scatter-ahead", &[], 60);
}
#[test]
fn scatter_ahead_np3() {
    run_within(3, "scatter-ahead", &[], 60);
}
/// A scatterv root whose receive buffer is shorter than its own block fails with
/// `MPI_ERR_TRUNCATE` but still gives every other rank its block, posted on the segment or
/// sent point to point ([`scatterv_root_short_suite`]; the point-to-point ones were not
/// sent, and their ranks waited for them forever).
#[test]
fn scatterv_root_short_np2() {
    run_within(2, "sv-root-short", &[], 60);
}
#[test]
fn scatterv_root_short_np3() {
    run_within(3, "sv-root-short", &[], 60);
}
/// Erroneous broadcasts: the root's length and one rank's one byte apart on either side of
/// every bound between paths (empty, one or two lane lines, lane, ring cell, one
/// cross-memory read, large region on more than 2 ranks, 1 MiB) and a few farther apart,
/// every root, see [`bcast_mismatch_suite`]: the rank whose length differs fails
/// (`MPI_ERR_TRUNCATE` when the root's data is longer, `MPI_ERR_COUNT` when shorter) with
/// its buffer untouched, the root and the other ranks get the data, nobody waits for a post
/// that never comes (the harness fails a run that takes more than 120 s), and a correct
/// broadcast afterwards works.
#[test]
fn bcast_mismatch_np2() {
    run_within(2, "bcast-mismatch", &[], 120);
}
#[test]
fn bcast_mismatch_np3() {
    run_within(3, "bcast-mismatch", &[], 120);
}
/// Erroneous broadcasts without the segment (`coll_sm_enable` 0: point to point), with
/// the automatic choice and each algorithm forced in turn: the root's length and one
/// rank's on either side of the bounds (empty, the pipeline's segment, the binomial tree's
/// limit above which the scatter-allgather runs) and a few farther apart, every root, the
/// erroneous rank a leaf or an inner rank of the tree, see [`bcast_mismatch_p2p_suite`]:
/// the rank whose length differs fails (`MPI_ERR_TRUNCATE` or `MPI_ERR_COUNT`), the root
/// and the others get the data (a rank below a too short buffer in the binomial tree fails
/// too), nobody waits (the harness fails a run that takes more than 120 s), and a correct
/// broadcast afterwards works.
#[test]
fn bcast_mismatch_p2p_np2() {
    run_within(
        2,
        "bcast-mismatch-p2p",
        &[("OXMPI_MCA_coll_sm_enable", "0")],
        120,
    );
}
#[test]
fn bcast_mismatch_p2p_np4() {
    run_within(
        4,
        "bcast-mismatch-p2p",
        &[("OXMPI_MCA_coll_sm_enable", "0")],
        120,
    );
}
/// Erroneous nonblocking gathervs and scattervs on the segment on 2 and 3 ranks (one
/// rank's block one byte off the root's count for it across the segment's bounds and the
/// message bound, with the segment's single-copy limit, the 2-rank igatherv's 64 KiB and
/// with none, every root),
/// see [`igatherv_mismatch_suite`]: the rank that would get more than it expects fails
/// with `MPI_ERR_TRUNCATE` (so does a rank with an empty receive buffer that the root
/// sends a block), nobody waits forever, a correct one afterwards works.
#[test]
fn igatherv_mismatch_np2() {
    run_within(2, "igv-mismatch", &[], 120);
}
#[test]
fn igatherv_mismatch_np3() {
    run_within(3, "igv-mismatch", &[], 120);
}
/// Erroneous nonblocking broadcasts on the segment whose root's length goes by message
/// (`SmKind::BcastMsg`: the root sends to its children at once, without waiting for their
/// posts) while a child of the root holds a length of another path (the segment's buffer,
/// one cross-memory read), and the reverse, every root, with that child late (the root's
/// message arrives before it opened the collective), the root late, or neither, see
/// [`ibcast_drain_suite`]: the child fails (`MPI_ERR_TRUNCATE` or `MPI_ERR_COUNT`) with its
/// buffer untouched, the root's send ends (the child takes its message into nothing; the
/// harness fails a run that hangs), the other ranks get the data, and no message is left
/// on the collectives' communicator.
#[test]
fn ibcast_drain_np2() {
    run_within(2, "ibcast-drain", &[], 120);
}
#[test]
fn ibcast_drain_np3() {
    run_within(3, "ibcast-drain", &[], 120);
}
/// [`ibcast_drain_np2`] without cross-memory copies (`coll_sm_single_copy_max` 0): from
/// 4 KiB + 1 by message, eager up to `btl_sm_eager_limit`, so that a message not taken
/// would stay behind instead of holding its root up.
#[test]
fn ibcast_drain_no_single_copy_np2() {
    run_within(
        2,
        "ibcast-drain",
        &[("OXMPI_MCA_coll_sm_single_copy_max", "0")],
        120,
    );
}
const BCAST_BIG: &[(&str, &str)] = &[
    ("OXMPI_MCA_mpi_yield_when_idle", "1"),
    ("OXMPI_MCA_coll_sm_single_copy_max_many", "0"),
];
/// The chain scan forced at any size and rank count (`coll_tuned_scan_algorithm` 2), and
/// Rabenseifner's allreduce forced for the schedules (`coll_tuned_allreduce_algorithm` 6).
#[test]
fn large_reductions_forced_np3() {
    run(
        3,
        "large-red",
        &[
            ("OXMPI_MCA_coll_tuned_scan_algorithm", "2"),
            ("OXMPI_MCA_coll_tuned_allreduce_algorithm", "6"),
        ],
    );
}
/// Light requests (`nbc::light`): many outstanding segment collectives of mixed kinds
/// (more than the segment has nonblocking buffers; alltoalls and allgather(v)s in place and
/// not among them), every root, completed in a random order
/// per rank while two more threads and the progress thread advance them all the time: the
/// results match the local references, and every slot is given back.
#[test]
fn light_requests_racing_np2() {
    run(2, "light", &[("OXMPI_MCA_mpi_yield_when_idle", "0")]);
}
#[test]
fn light_requests_racing_np3() {
    run(3, "light", &[]);
}

/// Small nonblocking rooted collectives on ranks pinned half to each of two CPUs: whether a
/// waiter may look again instead of yielding (it waits for ranks of the other CPU alone),
/// checked against who is late ([`remote_waits_suite`]); never unpinned.
#[test]
fn remote_waits_pinned_np4() {
    run(4, "remote-waits", &[(PIN, "block")]);
}
#[test]
fn remote_waits_pinned_np3() {
    run(3, "remote-waits", &[(PIN, "block")]);
}
/// Barriers (each rank late in turn, releasing and meeting, [`sm_barrier_suite`]) on ranks
/// pinned two a CPU: a rank waiting for those of the other CPU looks again instead of
/// yielding while the ranks of its own CPU have arrived too (`Seg::barrier`); nobody
/// leaves before the late rank arrived. Cyclic (ranks 0 and 2 on one CPU, 1 and 3 on the
/// other: rank 0's release is awaited across CPUs by 1 and 3) and block.
#[test]
fn barrier_pinned_cyclic_np4() {
    run(4, "barrier-pinned", &[(PIN, "cyclic")]);
}
#[test]
fn barrier_pinned_block_np4() {
    run(4, "barrier-pinned", &[(PIN, "block")]);
}
/// Three ranks a CPU: nobody waits without yielding.
#[test]
fn remote_waits_crowded_np6() {
    run(6, "remote-waits", &[(PIN, "block")]);
}
#[test]
fn remote_waits_unpinned_np4() {
    run(4, "remote-waits", &[]);
}

/// Nonblocking scatters whose blocks the root helps copy (`SmKind::Single` of at least two
/// `sm::nb::SHARE_CHUNK`s per block, the root in place: it writes the chunks its readers
/// have not claimed yet; out of place too, unshared), every root, one rank late per round (the root, so
/// that the readers copy it all, or a reader, so that the root copies much of its block),
/// advanced by two more threads as well ([`iscatter_shared_suite`]): every block arrives
/// whole before its request ends, and nothing is written into it afterwards.
#[test]
fn iscatter_shared_np3() {
    run(3, "iscatter-shared", &[]);
}
#[test]
fn iscatter_shared_np4() {
    run(4, "iscatter-shared", &[]);
}

/// The same for nonblocking scatterv (`SmKind::Scatterv` whose root in place shares its far
/// blocks, `sm::nb::scatterv_shares`): blocks of different lengths per rank at permuted
/// places of the root's input, in some rounds one of them too short to share (the root
/// then does not), one rank late per round.
#[test]
fn iscatterv_shared_np3() {
    run(3, "iscatterv-shared", &[]);
}
#[test]
fn iscatterv_shared_np4() {
    run(4, "iscatterv-shared", &[]);
}
/// Both, pinned (`PIN` block: 1 and 2 ranks, 2 and 2): the root helps only the readers of
/// the other CPU, and at most as many bytes as balance the CPUs (`sm::nb::share_budget`;
/// no sharing where its own CPU copies as much already).
#[test]
fn iscatter_shared_pinned_np3() {
    run(3, "iscatter-shared", &[(PIN, "block")]);
}
#[test]
fn iscatterv_shared_pinned_np4() {
    run(4, "iscatterv-shared", &[(PIN, "block")]);
}

/// Nonblocking reduce-scatters of equal blocks whose vector is larger than a slot of the
/// segment's nonblocking large region (`Reduction::ReduceScatterBlock`, in 2 to 4 phases),
/// several outstanding at once with allreduces through the same slots between them, in
/// place or not, completed in a random order per rank while two more threads advance them
/// ([`phased_suite`]).
#[test]
fn phased_reduce_scatter_np3() {
    run(3, "phased", &[]);
}
#[test]
fn phased_reduce_scatter_np4() {
    run(4, "phased", &[]);
}

/// Blocking reduce-scatters of equal blocks whose vector is larger than a slot of the
/// nonblocking large region, as the C library's fast path runs them
/// (`select::reduce_scatter_phased`, [`blocking_phased_suite`]).
#[test]
fn blocking_phased_reduce_scatter_np3() {
    run(3, "blocking_phased", &[]);
}
#[test]
fn blocking_phased_reduce_scatter_np4() {
    run(4, "blocking_phased", &[]);
}

#[test]
fn persistent_schedules_np3() {
    run(3, "persistent", &[]);
}

#[test]
fn communicators_np4() {
    run(4, "comms", &[]);
}
#[test]
fn communicators_np2() {
    run(2, "comms", &[]);
}
#[test]
fn communicators_np5() {
    run(5, "comms", &[]);
}

// ------------------------------------------------------------------------------------------
// Rank side
// ------------------------------------------------------------------------------------------

#[test]
#[ignore = "run by the multi-process harness"]
fn rank_entry() {
    let scenario = std::env::var(SCENARIO).expect("run by the multi-process harness only");
    #[cfg(target_arch = "x86_64")]
    if std::env::var_os(DENY_WRITEV).is_some() {
        deny_process_vm_writev();
    }
    if let Ok(how) = std::env::var(PIN) {
        pin_self(&how);
    }
    let e = init(ThreadLevel::Single).expect("init");
    match scenario.as_str() {
        "suite" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            suite(&w, 1);
        }
        "comms" => comms(e),
        "nbc" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            nbc_suite(&w);
        }
        "nbc-driven" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            nbc_after_driven(&w);
        }
        "persistent" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            persistent_suite(&w);
        }
        "a2a" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            a2a_suite(&w);
        }
        "ag-pair" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            ag_pair_suite(&w);
        }
        "a2a-push" | "a2a-pull" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            a2a_push_suite(&w, scenario == "a2a-push");
        }
        "vtuned" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            v_tuned_suite(&w);
        }
        "light" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            light_suite(&w);
        }
        "ibcast-drain" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            ibcast_drain_suite(e, &w);
        }
        "phased" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            phased_suite(&w);
        }
        "iscatter-shared" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            iscatter_shared_suite(&w, false);
        }
        "iscatterv-shared" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            iscatter_shared_suite(&w, true);
        }
        "blocking_phased" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            blocking_phased_suite(&w);
        }
        "nbc-reduce" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            nb_reduce_suite(&w);
        }
        "rs-pair" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            rs_pair_suite(&w);
        }
        "large-red" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            large_reduce_suite(&w);
        }
        "sv-reuse" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            scatterv_reuse(&w);
        }
        "lines" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            lines_suite(&w);
        }
        "ring" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            ring_suite(&w);
        }
        "ask-ahead" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            ask_ahead_suite(&w);
        }
        "sv-invalid" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            scatterv_invalid(&w);
        }
        "sv-compact" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            scatterv_compact(&w);
        }
        "sv-ring-edge" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            scatterv_ring_edge(&w);
        }
        "gather-pair" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            gather_pair_suite(&w);
        }
        "gv-mismatch" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            gatherv_mismatch_suite(&w);
        }
        "gs-mismatch" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            gather_scatter_mismatch_suite(&w);
        }
        "sv-root-short" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            scatterv_root_short_suite(&w);
        }
        "scatter-ahead" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            scatter_ahead_suite(&w);
        }
        "bcast-mismatch" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            bcast_mismatch_suite(&w);
        }
        "bcast-mismatch-p2p" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            bcast_mismatch_p2p_suite(&w);
        }
        "igv-mismatch" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            igatherv_mismatch_suite(&w);
        }
        "bcast-big" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            bcast_big_suite(&w);
        }
        "sm-sleep" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            sleep_suite(&w);
        }
        "sm" | "sm-off" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            let seg = oxmpi_coll::sm::get(&w, Coll::Allreduce).unwrap();
            // Every rank of the job runs on this node: the segment exists unless disabled.
            assert_eq!(seg.is_some(), scenario == "sm", "segment of {scenario}");
            sm_suite(&w);
        }
        "barrier-pinned" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            let seg = oxmpi_coll::sm::get(&w, Coll::Barrier).unwrap();
            let seg = seg.expect("the segment exists");
            let (me, cyclic) = (
                w.rank as usize,
                std::env::var(PIN).as_deref() == Ok("cyclic"),
            );
            // With two CPUs, the ranks that wait for rank 0's release across CPUs.
            if UNPINNED_CPUS.load(Ordering::Relaxed) > 1 {
                let apart = if cyclic { me % 2 == 1 } else { me >= 2 };
                assert_eq!(seg.remote(0), apart, "rank {me}: rank 0 on the other CPU");
            }
            sm_barrier_suite(&w);
        }
        "remote-waits" => {
            let w = CollComm::new(e, e.comm_world()).unwrap();
            remote_waits_suite(&w, std::env::var(PIN).is_ok());
        }
        s => panic!("unknown scenario {s}"),
    }
    e.finalize().expect("finalize");
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut r = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    (0..len).map(|_| r.next() as u8).collect()
}

/// Contribution of `rank` in iteration `it`, tag `what`.
fn contrib(len: usize, it: u64, rank: usize, what: u64) -> Vec<u8> {
    pattern(len, (it << 24) ^ ((rank as u64) << 8) ^ what)
}

fn sum_u32(a: &[u8], io: &mut [u8]) {
    for (x, y) in a.chunks_exact(4).zip(io.chunks_exact_mut(4)) {
        let v = u32::from_le_bytes(x.try_into().unwrap())
            .wrapping_add(u32::from_le_bytes((&*y).try_into().unwrap()));
        y.copy_from_slice(&v.to_le_bytes());
    }
}

/// Affine maps t -> a*t + b composed left to right: (a1,b1)∘(a2,b2) = (a1*a2, b1*a2+b2).
/// Associative, not commutative.
fn affine(a: &[u8], io: &mut [u8]) {
    for (x, y) in a.chunks_exact(8).zip(io.chunks_exact_mut(8)) {
        let w = |s: &[u8], i: usize| u32::from_le_bytes(s[i..i + 4].try_into().unwrap());
        let (a1, b1, a2, b2) = (w(x, 0), w(x, 4), w(y, 0), w(y, 4));
        y[..4].copy_from_slice(&a1.wrapping_mul(a2).to_le_bytes());
        y[4..].copy_from_slice(&b1.wrapping_mul(a2).wrapping_add(b2).to_le_bytes());
    }
}

/// Blocking allreduces (in and out of place) and reduces of 8 to 344 bytes back to back,
/// no barrier between, every contribution new at each call: a waiter loads the further
/// lines of a post together with its stamp (`Seg::wait_all_lines`) while their owner may
/// still be writing them, and must fold only what was posted for that call. Round the
/// segment's buffers many times, at every length of one to six lines.
fn lines_suite(c: &CollComm) {
    let (p, r) = (c.size as usize, c.rank as usize);
    let ops: [(&ReduceFn, usize, bool); 2] = [(&sum_u32, 4, true), (&affine, 8, false)];
    for it in 0..3000u64 {
        let (f, es, comm) = ops[(it % 2) as usize];
        let len = 8 * (1 + (it as usize * 7) % 43);
        let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(len, it, i, 50)).collect();
        let total = fold(f, &xs);
        match it % 3 {
            0 => {
                let mut b = xs[r].clone();
                select::allreduce(c, None, &mut b, &f, es, comm).unwrap();
                assert_eq!(b, total, "allreduce in place {it}, {len} bytes");
            }
            1 => {
                let mut out = vec![0u8; len];
                select::allreduce(c, Some(&xs[r]), &mut out, &f, es, comm).unwrap();
                assert_eq!(out, total, "allreduce {it}, {len} bytes");
            }
            _ => {
                let root = (it as usize / 3) % p;
                let mut out = vec![0u8; len];
                let recv = (r == root).then_some(&mut out[..]);
                select::reduce(c, Some(&xs[r]), recv, root as i32, &f, es, comm).unwrap();
                if r == root {
                    assert_eq!(out, total, "reduce {it} to {root}, {len} bytes");
                }
            }
        }
    }
}

/// `x_lo ∘ … ∘ x_(hi-1)` for the contributions of ranks lo..hi.
fn fold(f: &dyn Fn(&[u8], &mut [u8]), xs: &[Vec<u8>]) -> Vec<u8> {
    let mut acc = xs[0].clone();
    for x in &xs[1..] {
        let mut t = x.clone();
        f(&acc, &mut t);
        acc = t;
    }
    acc
}

type ReduceFn = dyn Fn(&[u8], &mut [u8]);

fn suite(c: &CollComm, seed: u64) {
    let p = c.size as usize;
    let r = c.rank as usize;
    let mut rng = Rng(0x1234_5678 ^ seed ^ ((p as u64) << 32));
    let ops: [(&ReduceFn, usize, bool); 2] = [(&sum_u32, 4, true), (&affine, 8, false)];
    for it in 0..14u64 {
        c.barrier().unwrap();
        // Sizes: empty, tiny, medium, large (crossing the algorithm thresholds).
        let nelem = match it % 4 {
            0 => rng.below(3),
            1 => 1 + rng.below(40),
            2 => 500 + rng.below(2000),
            _ => 3000 + rng.below(6000),
        };
        let root = rng.below(p) as i32;

        // bcast (odd byte lengths too)
        let len = nelem * 4 + rng.below(4);
        let data = contrib(len, it, root as usize, 1);
        let mut buf = if r == root as usize {
            data.clone()
        } else {
            vec![0u8; len]
        };
        c.bcast(&mut buf, root).unwrap();
        assert_eq!(buf, data, "bcast it {it} len {len} root {root}");

        for (oi, &(f, es, comm)) in ops.iter().enumerate() {
            let op = Op {
                f,
                elem_size: es,
                commutative: comm,
            };
            let len = nelem * es;
            let xs: Vec<Vec<u8>> = (0..p)
                .map(|i| contrib(len, it, i, 10 + oi as u64))
                .collect();
            let total = fold(f, &xs);

            let mut b = xs[r].clone();
            c.reduce(&mut b, root, &op).unwrap();
            if r == root as usize {
                assert_eq!(b, total, "reduce it {it} op {oi} root {root} len {len}");
            }

            // Without copies: out of place (the input left alone) and in place at the root;
            // then through the component selection (the sm segment up to 4 KiB).
            let me_root = r == root as usize;
            for select in [false, true] {
                let what = format!("it {it} op {oi} root {root} len {len} select {select}");
                let run = |send: Option<&[u8]>, recv: Option<&mut [u8]>| {
                    if select {
                        oxmpi_coll::base::select::reduce(c, send, recv, root, &f, es, comm)
                    } else {
                        c.reduce_into(send, recv, root, &op)
                    }
                };
                let mut res = vec![0x5au8; len];
                run(Some(&xs[r]), me_root.then_some(&mut res[..])).unwrap();
                if me_root {
                    assert_eq!(res, total, "reduce_into {what}");
                }
                let mut b = xs[r].clone();
                if me_root {
                    run(None, Some(&mut b)).unwrap();
                    assert_eq!(b, total, "reduce_into in place {what}");
                } else {
                    run(Some(&b), None).unwrap();
                }
            }
            // Scans through the component selection, out of place and in place.
            for exclusive in [false, true] {
                let pre = if exclusive { &xs[..r] } else { &xs[..=r] };
                let want = (!pre.is_empty()).then(|| fold(f, pre));
                let what = format!("it {it} op {oi} len {len} exclusive {exclusive}");
                let sel = |send: Option<&[u8]>, recv: &mut [u8]| {
                    oxmpi_coll::base::select::scan(c, send, recv, exclusive, &f, es, comm)
                };
                let mut out = vec![0xa5u8; len];
                sel(Some(&xs[r]), &mut out).unwrap();
                let mut b = xs[r].clone();
                sel(None, &mut b).unwrap();
                match &want {
                    Some(w) => {
                        assert_eq!(&out, w, "select::scan {what}");
                        assert_eq!(&b, w, "select::scan in place {what}");
                    }
                    None => {
                        assert!(out.iter().all(|&x| x == 0xa5), "exscan touched rank 0");
                        assert_eq!(b, xs[r], "exscan in place touched rank 0");
                    }
                }
            }

            let mut b = xs[r].clone();
            c.allreduce(&mut b, &op).unwrap();
            assert_eq!(b, total, "allreduce it {it} op {oi} len {len}");

            let mut b = xs[r].clone();
            c.scan(&mut b, &op).unwrap();
            assert_eq!(b, fold(f, &xs[..=r]), "scan it {it} op {oi}");

            let mut out = vec![0xa5u8; len];
            c.exscan(&xs[r], &mut out, &op).unwrap();
            if r > 0 {
                assert_eq!(out, fold(f, &xs[..r]), "exscan it {it} op {oi}");
            } else {
                assert!(out.iter().all(|&x| x == 0xa5), "exscan touched rank 0");
            }

            // reduce_scatter with random per-rank element counts
            let counts: Vec<usize> = (0..p).map(|_| rng.below(nelem + 2) * es).collect();
            let tot: usize = counts.iter().sum();
            let ys: Vec<Vec<u8>> = (0..p)
                .map(|i| contrib(tot, it, i, 20 + oi as u64))
                .collect();
            let full = fold(f, &ys);
            let off: usize = counts[..r].iter().sum();
            let mut b = ys[r].clone();
            let mut out = vec![0u8; counts[r]];
            c.reduce_scatter(&mut b, &counts, &mut out, &op).unwrap();
            assert_eq!(
                out,
                full[off..off + counts[r]],
                "reduce_scatter it {it} op {oi}"
            );
        }

        // gather / scatter / allgather / alltoall with a common block size
        let block = match it % 4 {
            0 => rng.below(2),
            1 => 1 + rng.below(100),
            _ => 1 + rng.below(9000),
        };
        let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(block, it, i, 30)).collect();
        let cat: Vec<u8> = xs.concat();
        let mut g = vec![0u8; if r == root as usize { p * block } else { 0 }];
        c.gather(&xs[r], &mut g, root).unwrap();
        if r == root as usize {
            assert_eq!(g, cat, "gather it {it}");
        }
        let mut s = vec![0u8; block];
        let src = if r == root as usize {
            cat.clone()
        } else {
            vec![]
        };
        c.scatter(&src, &mut s, root).unwrap();
        assert_eq!(s, xs[r], "scatter it {it}");
        let mut ag = vec![0u8; p * block];
        ag[r * block..(r + 1) * block].copy_from_slice(&xs[r]);
        c.allgather(&mut ag, block).unwrap();
        assert_eq!(ag, cat, "allgather it {it} block {block}");

        // alltoall: block j of rank i's send buffer is contrib(.., i*p + j)
        let a2a = |i: usize, j: usize| contrib(block, it, i * p + j, 40);
        let send: Vec<u8> = (0..p).flat_map(|j| a2a(r, j)).collect();
        let mut recv = vec![0u8; p * block];
        c.alltoall(&send, &mut recv, block).unwrap();
        let want: Vec<u8> = (0..p).flat_map(|i| a2a(i, r)).collect();
        assert_eq!(recv, want, "alltoall it {it} block {block}");

        // v-variants with per-rank counts and gaps between blocks
        let vc: Vec<usize> = (0..p).map(|_| rng.below(block + 3)).collect();
        let gap = rng.below(5);
        let mut vd = Vec::new();
        let mut o = 0;
        for &n in &vc {
            vd.push(o);
            o += n + gap;
        }
        let vlen = o;
        let vx: Vec<Vec<u8>> = (0..p).map(|i| contrib(vc[i], it, i, 50)).collect();
        let mut expect = vec![0u8; vlen];
        for i in 0..p {
            expect[vd[i]..vd[i] + vc[i]].copy_from_slice(&vx[i]);
        }
        let mut g = vec![0u8; if r == root as usize { vlen } else { 0 }];
        c.gatherv(&vx[r], &mut g, &vc, &vd, root).unwrap();
        if r == root as usize {
            assert_eq!(g, expect, "gatherv it {it}");
        }
        let mut s = vec![0u8; vc[r]];
        let src = if r == root as usize {
            expect.clone()
        } else {
            vec![]
        };
        c.scatterv(&src, &vc, &vd, &mut s, root).unwrap();
        assert_eq!(s, vx[r], "scatterv it {it}");
        let mut ag = vec![0u8; vlen];
        ag[vd[r]..vd[r] + vc[r]].copy_from_slice(&vx[r]);
        c.allgatherv(&mut ag, &vc, &vd).unwrap();
        assert_eq!(ag, expect, "allgatherv it {it}");

        // alltoallv: rank i sends n(i, j) bytes to rank j
        let n = |i: usize, j: usize| ((i * 7 + j * 13 + it as usize * 5) % 11) * (block % 97 + 1);
        let blk = |i: usize, j: usize| contrib(n(i, j), it, i * p + j, 60);
        let sc: Vec<usize> = (0..p).map(|j| n(r, j)).collect();
        let sd: Vec<usize> = prefix(&sc, 1);
        let send: Vec<u8> = {
            let mut v = vec![0u8; sd[p - 1] + sc[p - 1] + 1];
            for j in 0..p {
                v[sd[j]..sd[j] + sc[j]].copy_from_slice(&blk(r, j));
            }
            v
        };
        let rc: Vec<usize> = (0..p).map(|i| n(i, r)).collect();
        let rd: Vec<usize> = prefix(&rc, 2);
        let mut recv = vec![0u8; rd[p - 1] + rc[p - 1]];
        c.alltoallv(&send, &sc, &sd, &mut recv, &rc, &rd).unwrap();
        for i in 0..p {
            assert_eq!(
                recv[rd[i]..rd[i] + rc[i]],
                blk(i, r),
                "alltoallv it {it} from {i}"
            );
        }
    }
    c.barrier().unwrap();
}

/// Barrier, bcast, allreduce (both ops, both argument forms) and alltoall through
/// `base::select` at sizes on both sides of the `sm` limits (4 KiB; 16 KiB for the large
/// region, see [`SM`]), against the local reference.
/// Rounds of barrier, small bcast and allreduce (the segment's buffers and lane) and
/// allgathers of 8 B to 200 KB (buffers, then cross-memory copies), results checked, each
/// round under 20 s (a lost wake-up sleeps a whole `coll_sm_sleep_max`).
fn sleep_suite(c: &CollComm) {
    let (p, r) = (c.size as usize, c.rank as usize);
    for it in 0..240u64 {
        let t0 = Instant::now();
        select::barrier(c).unwrap();
        let root = (it as usize) % p;
        let data = contrib(8, it, root, 1);
        let mut b = if r == root {
            data.clone()
        } else {
            vec![0u8; 8]
        };
        select::bcast(c, &mut b, root as i32).unwrap();
        assert_eq!(b, data, "bcast {it}");
        let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(16, it, i, 2)).collect();
        let mut sum = xs[r].clone();
        select::allreduce(c, None, &mut sum, &sum_u32, 4, true).unwrap();
        assert_eq!(sum, fold(&sum_u32, &xs), "allreduce {it}");
        let block = [8, 4000, 200_000][(it % 3) as usize];
        let own = contrib(block, it, r, 3);
        let mut all = vec![0u8; block * p];
        select::allgather(c, &mut all, block, Some(&own)).unwrap();
        for (i, got) in all.chunks_exact(block).enumerate() {
            assert!(got == contrib(block, it, i, 3), "allgather {it}, block {i}");
        }
        let took = t0.elapsed();
        assert!(took < Duration::from_secs(20), "round {it} took {took:?}");
    }
}

fn sm_suite(c: &CollComm) {
    let p = c.size as usize;
    let r = c.rank as usize;
    sm_barrier_suite(c);
    let ops: [(&ReduceFn, usize, bool); 2] = [(&sum_u32, 4, true), (&affine, 8, false)];
    let one_copy = oxmpi_coll::sm::params::single_copy_max_for(p);
    let seg = oxmpi_coll::sm::get(c, Coll::Bcast).unwrap().is_some();
    let yielding = std::env::var("OXMPI_MCA_mpi_yield_when_idle").as_deref() == Ok("1");
    let sizes = [
        0usize,
        1,
        7,
        56,
        57,
        512,
        4096,
        4097,
        16 * 1024,
        one_copy,
        one_copy + 1,
        100_000,
    ];
    for (it, &bytes) in sizes.iter().enumerate() {
        let it = it as u64;
        select::barrier(c).unwrap();
        let root = (it as usize) % p;
        let data = contrib(bytes, it, root, 1);
        let mut buf = if r == root {
            data.clone()
        } else {
            vec![0u8; bytes]
        };
        // Ranks that yield when idle take the large region from `BCAST_BIG_MIN` on 3 ranks
        // or more.
        let region = p > 2 && yielding && bytes >= oxmpi_coll::sm::BCAST_BIG_MIN;
        let before = oxmpi_coll::base::stats::runs(oxmpi_coll::base::stats::Alg::SmBcast);
        select::bcast(c, &mut buf, root as i32).unwrap();
        assert_eq!(buf, data, "bcast of {bytes} bytes from {root}");
        assert_eq!(
            oxmpi_coll::base::stats::runs(oxmpi_coll::base::stats::Alg::SmBcast) - before,
            u64::from(seg && bytes > 0 && (bytes <= oxmpi_coll::sm::DATA.max(one_copy) || region)),
            "bcast of {bytes} bytes on the segment"
        );
        for (oi, &(f, es, comm)) in ops.iter().enumerate() {
            let len = bytes / es * es;
            let xs: Vec<Vec<u8>> = (0..p)
                .map(|i| contrib(len, it, i, 10 + oi as u64))
                .collect();
            let total = fold(f, &xs);
            let mut b = xs[r].clone();
            select::allreduce(c, None, &mut b, &f, es, comm).unwrap();
            assert_eq!(b, total, "allreduce in place, {len} bytes, op {oi}");
            let mut out = vec![0u8; len];
            select::allreduce(c, Some(&xs[r]), &mut out, &f, es, comm).unwrap();
            assert_eq!(out, total, "allreduce, {len} bytes, op {oi}");
        }
        sm_v_suite(c, bytes, it);
        let block = bytes / p / 2;
        let send = contrib(block * p, it, r, 30);
        let mut recv = vec![0u8; block * p];
        select::alltoall(c, &send, &mut recv, block).unwrap();
        for j in 0..p {
            let theirs = contrib(block * p, it, j, 30);
            assert_eq!(
                recv[j * block..(j + 1) * block],
                theirs[r * block..(r + 1) * block],
                "alltoall block {block} from {j}"
            );
        }
    }
    sm_regular_suite(c);
    sm_gatherv_posted(c);
    sm_igatherv_posted(c);
    sm_ialltoallv_far(c);
}

/// Gatherv straight on the segment with no cross-memory copies (`one_copy` 0), every
/// root: blocks of a whole [`sm::DATA`] and of [`sm::V_MAX`] bytes are posted in the
/// ranks' buffers and arrive; one byte more is left to the caller (the root's post tells
/// the other ranks to send it, the root returns them to receive from, nothing copied).
fn sm_gatherv_posted(c: &CollComm) {
    use oxmpi_coll::sm;
    let (p, r) = (c.size as usize, c.rank as usize);
    let Some(seg) = sm::get(c, Coll::Gather).unwrap() else {
        return;
    };
    for (it, b) in [sm::DATA, sm::V_MAX, sm::V_MAX + 1].into_iter().enumerate() {
        let posted = b != sm::V_MAX + 1;
        let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(b, 300 + it as u64, i, 33)).collect();
        let counts = vec![b; p];
        let displs: Vec<usize> = (0..p).map(|i| i * b).collect();
        for root in 0..p {
            if r != root {
                let got = seg.gather_leaf(root, &xs[r]);
                match got {
                    sm::Given::Done if posted => {}
                    sm::Given::Send if !posted => {
                        p2p_send(c, &xs[r], root);
                    }
                    other => panic!("gatherv of {b} bytes: {other:?}"),
                }
                continue;
            }
            let mut g = vec![0u8; p * b];
            let (ok, rest) = seg.gatherv_root(Some(&xs[r]), (&mut g, &counts, &displs), 0);
            assert!(ok, "gatherv of {b} bytes to {root}");
            let others: Vec<usize> = (0..p).filter(|&i| i != root && !posted).collect();
            assert_eq!(rest, others, "gatherv of {b} bytes: ranks to receive from");
            for i in rest {
                let mut x = vec![0u8; b];
                p2p_recv(c, &mut x, i);
                assert_eq!(x, xs[i], "gatherv of {b} bytes from {i}, point to point");
            }
            for (i, x) in xs.iter().enumerate() {
                let got = &g[i * b..(i + 1) * b];
                if posted || i == root {
                    assert_eq!(got, &x[..], "gatherv of {b} bytes from {i} to {root}");
                } else {
                    assert!(got.iter().all(|&v| v == 0), "gatherv of {b} bytes posted");
                }
            }
        }
    }
}

/// A blocking point-to-point send of `buf` to `dest` on `c`'s communicator (tag 77).
fn p2p_send(c: &CollComm, buf: &[u8], dest: usize) {
    let e = oxmpi_engine::engine().expect("engine");
    // SAFETY: `buf` outlives the blocking send.
    let st = unsafe {
        e.send(
            buf.as_ptr(),
            buf.len(),
            dest as i32,
            77,
            c.comm,
            SendMode::Standard,
        )
    };
    st.unwrap();
}

/// A blocking point-to-point receive into `buf` from `src` on `c`'s communicator (tag 77).
fn p2p_recv(c: &CollComm, buf: &mut [u8], src: usize) {
    let e = oxmpi_engine::engine().expect("engine");
    // SAFETY: `buf` outlives the blocking receive.
    let st = unsafe { e.recv(buf.as_mut_ptr(), buf.len(), src as i32, 77, c.comm) }.unwrap();
    assert_eq!(st.error, None);
}

/// Run a light request on the segment to its end (`None`: no free slot).
fn light_run(
    c: &CollComm,
    seg: &std::sync::Arc<oxmpi_coll::sm::Seg>,
    kind: oxmpi_coll::sm::SmKind,
    (input, output): (&mut [u8], &mut [u8]),
) -> oxmpi_coll::Result<()> {
    use oxmpi_coll::nbc::light;
    use oxmpi_coll::sched::Region;
    let input = Region::Raw(input.as_mut_ptr(), input.len());
    let output = Region::Raw(output.as_mut_ptr(), output.len());
    let i = light::claim().expect("a free slot");
    // SAFETY: the regions are the caller's slices, which outlive this call, and the
    // request ends before it returns.
    if let Some(res) = unsafe { light::start(i, c, (seg.clone(), kind), (input, output), None, 0) }
    {
        return res;
    }
    loop {
        if let Some(res) = light::test(i) {
            return res;
        }
        std::thread::yield_now();
    }
}

/// [`light_run`], or a schedule ([`oxmpi_coll::sched::Schedule::shared`]) when some of our
/// blocks go by message.
fn shared_run(
    c: &CollComm,
    seg: &std::sync::Arc<oxmpi_coll::sm::Seg>,
    kind: oxmpi_coll::sm::SmKind,
    (input, output): (&mut [u8], &mut [u8]),
) -> oxmpi_coll::Result<()> {
    use oxmpi_coll::sched::{Region, Schedule};
    let at = (c.rank as usize, c.size as usize);
    if !kind.has_messages(at, (input.len(), output.len())) {
        return light_run(c, seg, kind, (input, output));
    }
    let input = Region::Raw(input.as_mut_ptr(), input.len());
    let output = Region::Raw(output.as_mut_ptr(), output.len());
    // The regions are the caller's slices, which outlive this call, and the schedule ends
    // before it returns.
    let mut s = Schedule::shared(c, seg.clone(), kind, input, output, None);
    loop {
        if let Some(res) = s.progress() {
            return res;
        }
        std::thread::yield_now();
    }
}

/// The nonblocking gatherv and scatterv on the segment ([`sm::SmKind::Gatherv`],
/// [`sm::SmKind::Scatterv`], light requests), every root, out of place:
/// - gatherv with no cross-memory copies (`far` 0): blocks of a whole [`sm::DATA`] and of
///   [`sm::V_MAX`] (the blocking form's bound, [`sm::nb::GATHERV_MAX`] too) bytes are
///   posted in the ranks' buffers, with no message, and arrive; one byte more moves by
///   message;
/// - gatherv and scatterv of 16 KiB blocks by cross-memory copies (`far`: the segment's
///   single-copy limit, when CMA reaches every rank), where the root copies its own block
///   while the others copy theirs: every block, the root's too, where it belongs.
fn sm_igatherv_posted(c: &CollComm) {
    use oxmpi_coll::sm::{self, SmKind};
    let (p, r) = (c.size as usize, c.rank as usize);
    let Some(seg) = sm::existing(c) else {
        return;
    };
    let one_copy = seg.single_copy_max();
    // Posted up to the blocking form's bound, whatever the nonblocking one says.
    let mut cases = vec![(sm::DATA, 0), (sm::V_MAX, 0), (sm::V_MAX + 1, 0)];
    if one_copy >= 16 << 10 {
        cases.push((16 << 10, one_copy));
    }
    for (it, &(b, far)) in cases.iter().enumerate() {
        let by_message = b > sm::V_MAX.max(far);
        let mut xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(b, 400 + it as u64, i, 35)).collect();
        let counts = vec![b; p];
        let displs: Vec<usize> = (0..p).map(|i| i * b).collect();
        let full: Vec<u8> = xs.concat();
        for root in 0..p {
            let at_root = r == root;
            let (rc, rd) = if at_root {
                (counts.clone(), displs.clone())
            } else {
                (Vec::new(), Vec::new())
            };
            let kind = SmKind::Gatherv {
                root,
                counts: rc.clone(),
                displs: rd.clone(),
                far,
            };
            let mut g = vec![0u8; if at_root { p * b } else { 0 }];
            assert_eq!(
                kind.has_messages((r, p), (b, g.len())),
                by_message,
                "igatherv of {b} bytes to {root}: by message"
            );
            if by_message {
                continue;
            }
            light_run(c, &seg, kind, (&mut xs[r], &mut g)).unwrap();
            if at_root {
                assert_eq!(g, full, "igatherv of {b} bytes to {root}");
            }
            if far == 0 {
                continue;
            }
            let kind = SmKind::Scatterv {
                root,
                counts: rc,
                displs: rd,
                far,
            };
            let mut src = if at_root { full.clone() } else { Vec::new() };
            let mut got = vec![0u8; b];
            light_run(c, &seg, kind, (&mut src, &mut got)).unwrap();
            assert_eq!(got, xs[r], "iscatterv of {b} bytes from {root}");
        }
    }
}

/// The nonblocking alltoallv on the segment with cross-memory copies
/// ([`sm::SmKind::Alltoallv`] with its `far` bound, light requests), out of place: uneven
/// blocks that differ per sender and per receiver (some posted in the sender's buffer,
/// some read by cross-memory copies, larger than the bounce buffer too, some empty), our
/// own block among them, at displacements that differ between the send and receive sides,
/// with gaps; in each round one rank starts late, so that the others read whichever posts
/// are there, in their order (`me + 1`, `me + 2`, ...), and copy their own block while
/// they wait: every block where it belongs, the gaps untouched. Each rank asks for its far
/// blocks to be written (`push`) or not, differently per round and rank (every far block,
/// only the larger ones, none): the late rank is then a writer that the others must wait
/// for. Every round's output is checked again after the last round (a write that came
/// late, or into an old layout, shows there).
fn sm_ialltoallv_far(c: &CollComm) {
    use oxmpi_coll::sm::{self, SmKind};
    let (p, r) = (c.size as usize, c.rank as usize);
    let Some(seg) = sm::existing(c) else {
        return;
    };
    let far = sm::nb::alltoallv_far(&seg);
    if far == 0 {
        return;
    }
    let small = sm::nb::alltoallv_max(p);
    // Bytes from rank `i` to rank `j` in round `round`, and the block. In odd rounds both
    // blocks of a pair take the same path (far ones both ways: a receiver may ask for
    // its block to be written).
    let n = |round: usize, i: usize, j: usize| match (i + (2 - round % 2) * j + round + round % 2)
        % 4
    {
        0 => small - i - j,
        1 => 20_000 + 7 * i + j,
        2 => 0,
        _ => (70 << 10) + 3 * i + j,
    };
    let block = |round: usize, i: usize, j: usize| {
        contrib(n(round, i, j), 500 + round as u64, i * p + j, 63)
    };
    let check = |round: usize, recv: &[u8], rdispls: &[usize], when: &str| {
        let how = format!("ialltoallv far round {round} ({when})");
        let mut gap = vec![true; recv.len()];
        for (i, &d) in rdispls.iter().enumerate() {
            let m = n(round, i, r);
            assert!(
                recv[d..d + m] == block(round, i, r)[..],
                "{how}: block from {i}"
            );
            gap[d..d + m].fill(false);
        }
        assert!(
            recv.iter().zip(&gap).all(|(&b, &g)| !g || b == 0xa5),
            "{how}: gaps"
        );
    };
    let mut kept = Vec::new();
    for round in 0..8 {
        let n = |i: usize, j: usize| n(round, i, j);
        let block = |i: usize, j: usize| block(round, i, j);
        let scounts: Vec<usize> = (0..p).map(|j| n(r, j)).collect();
        let rcounts: Vec<usize> = (0..p).map(|i| n(i, r)).collect();
        // Send blocks in reverse rank order, receive blocks in rank order.
        let mut sdispls = vec![0; p];
        let mut at = 5;
        for j in (0..p).rev() {
            sdispls[j] = at;
            at += scounts[j] + 1;
        }
        let mut send = vec![0u8; at];
        for j in 0..p {
            send[sdispls[j]..sdispls[j] + scounts[j]].copy_from_slice(&block(r, j));
        }
        let rdispls = prefix(&rcounts, 3);
        let mut recv = vec![0xa5u8; rdispls[p - 1] + rcounts[p - 1] + 3];
        let kind = SmKind::Alltoallv {
            scounts: scounts.clone(),
            sdispls,
            rcounts: rcounts.clone(),
            rdispls: rdispls.clone(),
            in_place: false,
            far,
            push: if round % 2 == 1 {
                [1, 30_000][(round / 2 + r) % 2]
            } else {
                [1, 30_000, 0][(round + r) % 3]
            },
        };
        if r == round % p {
            std::thread::sleep(Duration::from_millis(20));
        }
        light_run(c, &seg, kind, (&mut send, &mut recv)).unwrap();
        check(round, &recv, &rdispls, "at its end");
        kept.push((recv, rdispls));
    }
    select::barrier(c).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    for (round, (recv, rdispls)) in kept.iter().enumerate() {
        check(round, recv, rdispls, "after the last round");
    }
}

/// The barrier through `base::select` holds every rank until all have arrived, whichever
/// rank comes last, in both its forms (ranks that busy-poll get the release barrier, rank
/// 0 leaving first, after any other collective, and meet in a barrier called right after a
/// barrier): before each barrier a rank creates a file of its own in the job's directory,
/// the late rank after a sleep, and after it every rank finds every rank's file. Before
/// the barrier of each round comes one collective of another kind, or none, and the
/// barrier must meet (counted in `coll_sm_barrier_meet_calls`) exactly when none came
/// and the barrier releases at all: every kind of collective, blocking or nonblocking, on
/// the segment or not, tells the barrier after it that it came between.
fn sm_barrier_suite(c: &CollComm) {
    use oxmpi_coll::base::stats::{runs, Alg};
    use oxmpi_coll::nbc::light;
    use oxmpi_coll::sched::Region;
    use oxmpi_coll::sm::SmKind;
    let p = c.size as usize;
    let r = c.rank as usize;
    let dir = std::path::PathBuf::from(std::env::var("OXMPI_ENGINE_KVS_DIR").unwrap());
    let seg = oxmpi_coll::sm::get(c, Coll::Barrier).unwrap();
    let releases = seg.as_ref().is_some_and(|s| s.barrier_releases());
    // Rank 0 leaves first whenever `coll_sm_barrier_release` is on, also when ranks yield
    // when idle (oversubscribed: a receiver of a collective rooted at rank 0 otherwise
    // left first and waited for the root to be scheduled).
    assert_eq!(
        releases,
        seg.is_some() && oxmpi_coll::sm::params::barrier_release(),
        "the barrier lets rank 0 out first (yielding: {:?})",
        std::env::var("OXMPI_MCA_mpi_yield_when_idle")
    );
    // Too large for the segment and its single copies: point to point.
    let far = oxmpi_coll::sm::params::single_copy_max_for(p) + 1;
    const KINDS: usize = 5;
    select::barrier(c).unwrap();
    for round in 0..KINDS * p {
        let kind = round % KINDS;
        let data = |n: usize| contrib(n, round as u64, 0, 40);
        let mine = |n: usize| if r == 0 { data(n) } else { vec![0xEE; n] };
        match kind {
            // Nothing: the previous round's barrier comes right before.
            0 => {}
            // A blocking bcast on the segment.
            1 => {
                let mut b = mine(8);
                select::bcast(c, &mut b, 0).unwrap();
                assert_eq!(b, data(8), "bcast before barrier round {round}");
            }
            // A nonblocking bcast on the segment (a light request, as the C library's).
            2 => {
                let mut b = mine(8);
                if let Some(seg) = &seg {
                    let (input, output) = if r == 0 {
                        (
                            Region::Raw(b.as_mut_ptr(), 8),
                            Region::Raw(b.as_mut_ptr(), 0),
                        )
                    } else {
                        (
                            Region::Raw(b.as_mut_ptr(), 0),
                            Region::Raw(b.as_mut_ptr(), 8),
                        )
                    };
                    let i = light::claim().expect("a free slot");
                    let kind = (seg.clone(), SmKind::Bcast { root: 0 });
                    // SAFETY: `b` lives until the request ended (waited for below).
                    let mut ended = unsafe { light::start(i, c, kind, (input, output), None, 0) };
                    while ended.is_none() {
                        ended = light::test(i);
                    }
                    ended.unwrap().unwrap();
                } else {
                    b = run_sched(c.ibcast(Region::Owned(b), 0).unwrap())
                        .owned_bytes(0)
                        .unwrap()
                        .to_vec();
                }
                assert_eq!(b, data(8), "ibcast before barrier round {round}");
            }
            // A nonblocking bcast by messages (a schedule).
            3 => {
                let s = run_sched(c.ibcast(Region::Owned(mine(8)), 0).unwrap());
                assert_eq!(s.owned_bytes(0).unwrap(), &data(8)[..], "round {round}");
            }
            // A blocking bcast point to point.
            _ => {
                let mut b = mine(far);
                select::bcast(c, &mut b, 0).unwrap();
                assert!(b == data(far), "large bcast before barrier round {round}");
            }
        }
        if round / KINDS % p == r {
            std::thread::sleep(Duration::from_millis(20));
        }
        std::fs::write(dir.join(format!("barrier-{round}-{r}")), b"").unwrap();
        let met = runs(Alg::SmBarrierMeet);
        select::barrier(c).unwrap();
        assert_eq!(
            runs(Alg::SmBarrierMeet) - met,
            u64::from(releases && kind == 0),
            "barrier round {round} after collective kind {kind} met or not"
        );
        for i in 0..p {
            assert!(
                dir.join(format!("barrier-{round}-{i}")).exists(),
                "rank {r} left barrier round {round} before rank {i} arrived"
            );
        }
    }
}

/// Reduce-scatter on two ranks as the C library runs it: first on the user's memory
/// (`select::reduce_scatter_direct`, in place or not), and when that declines from a
/// packed copy (`select::reduce_scatter`). Out of place the vectors of
/// `sm::REDUCE_SCATTER_PAIR` go by cross-memory copies; in place, and from the copy, only
/// those of `sm::REDUCE_SCATTER_PAIR_WRITTEN`, the others point to point. Results (the
/// non-commutative `affine`, uneven blocks) against the local reference, and the path
/// taken from the algorithm counts.
fn rs_pair_suite(c: &CollComm) {
    use oxmpi_coll::base::stats::{runs, Alg};
    use oxmpi_coll::sm;
    let r = c.rank as usize;
    let seg = sm::get(c, Coll::ReduceScatter).unwrap().expect("a segment");
    assert!(seg.cma_known(), "CMA between a user's processes");
    let written = *sm::REDUCE_SCATTER_PAIR_WRITTEN.start();
    let totals = [
        *sm::REDUCE_SCATTER_PAIR.start(),
        8192,
        written - 1,
        written,
        written + 8,
        65_536,
    ];
    let op = Op {
        f: &affine,
        elem_size: 8,
        commutative: false,
    };
    let f = |x: &[u8], y: &mut [u8]| affine(x, y);
    let tuned = || runs(Alg::ReduceScatterRing) + runs(Alg::ReduceScatterReduceScatterv);
    for (it, &total) in totals.iter().enumerate() {
        // Whole 8-byte items, uneven blocks.
        let total = total.next_multiple_of(8);
        let counts = [total / 16 * 8, total - total / 16 * 8];
        let ys: Vec<Vec<u8>> = (0..2).map(|i| contrib(total, it as u64, i, 50)).collect();
        let (at, n) = (if r == 0 { 0 } else { counts[0] }, counts[r]);
        let mine = &fold(&affine, &ys)[at..at + n];
        // 0: out of place on the user's memory; 1: in place there, else from a copy as the
        // C library's general path; 2: from a copy (as for a packed type).
        for form in 0..3 {
            let pulled = form == 0 || total >= written;
            let (sm0, tuned0) = (runs(Alg::SmReduceScatter), tuned());
            let what = format!("total {total}, form {form}");
            let mut buf = vec![0xa5; if form == 1 { total } else { n }];
            let mut done = false;
            if form == 0 {
                let send = Some(&ys[r][..]);
                done =
                    select::reduce_scatter_direct(c, send, &mut buf, (at, n, total), (&f, false))
                        .unwrap();
                assert!(done, "{what}: out of place on the user's memory");
            } else if form == 1 {
                buf.copy_from_slice(&ys[r]);
                done =
                    select::reduce_scatter_direct(c, None, &mut buf, (at, n, total), (&f, false))
                        .unwrap();
                assert_eq!(done, pulled, "{what}: in place on the user's memory");
            }
            if !done {
                let mut copy = ys[r].clone();
                select::reduce_scatter(c, &mut copy, &counts, &mut buf[..n], &op).unwrap();
            }
            assert_eq!(&buf[..n], mine, "{what}");
            let pulls = runs(Alg::SmReduceScatter) - sm0;
            assert_eq!(pulls, u64::from(pulled), "{what}: by cross-memory copies");
            assert_eq!(tuned() > tuned0, !pulled, "{what}: point to point");
        }
    }
}

/// Gather and scatter of regular blocks through `base::select`, in place at the root and
/// not, every root, with blocks on both sides of each of the segment's limits (all blocks
/// in one buffer; one block after a scatterv table, in the rest of the stamp's line; point
/// to point, linear or binomial), and alltoall in place of blocks that fit one buffer only
/// without the rank's own block, against the local reference. The scatters that fit the
/// segment must run there.
fn sm_regular_suite(c: &CollComm) {
    use oxmpi_coll::base::stats::{runs, Alg};
    use oxmpi_coll::sm;
    let p = c.size as usize;
    let r = c.rank as usize;
    let seg = sm::get(c, Coll::Scatter).unwrap().is_some();
    // The largest block that fits a buffer after a scatterv table.
    let one = sm::CAP - 8 * p;
    // Blocks up to this size that do not fit a buffer move by one cross-memory copy
    // between the root's buffer and each rank's (CMA works between a user's processes).
    let one_copy = sm::params::single_copy_max_for(p);
    // Blocks of the other ranks fitting a lane entry, a buffer (the root's own is not
    // posted), and one more byte each.
    let lane = sm::LANE_MAX / (p - 1);
    let buffer = sm::DATA / (p - 1);
    let blocks = [
        1,
        lane,
        lane + 1,
        sm::DATA / p,
        sm::DATA / p + 1,
        buffer,
        buffer + 1,
        one,
        one + 1,
        sm::DATA,
        sm::DATA + 1,
        16 * 1024,
        one_copy,
        one_copy + 1,
        100_000,
        300_000,
    ];
    for (it, &block) in blocks.iter().enumerate() {
        let it = it as u64 + 100;
        let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(block, it, i, 31)).collect();
        let cat = xs.concat();
        for root in 0..p {
            let at_root = r == root;
            for in_place in [false, true] {
                let mut g = vec![0u8; if at_root { p * block } else { 0 }];
                if at_root && in_place {
                    g[r * block..(r + 1) * block].copy_from_slice(&xs[r]);
                }
                let send = (!(at_root && in_place)).then_some(&xs[r][..]);
                let before = runs(Alg::SmGather);
                select::gather(c, send, &mut g, block, root as i32).unwrap();
                // (Every size takes the segment: larger blocks as a gatherv's, point to
                // point behind the segment's round above the single-copy limit.)
                assert_eq!(
                    runs(Alg::SmGather) - before,
                    u64::from(seg),
                    "gather of {block}-byte blocks on the segment"
                );
                if at_root {
                    assert_eq!(
                        g, cat,
                        "gather of {block}-byte blocks to {root}, in place {in_place}"
                    );
                }
                let before = runs(Alg::SmScatter);
                let src: &[u8] = if at_root { &cat } else { &[] };
                let mut out = vec![0xa5u8; block];
                let recv = (!(at_root && in_place)).then_some(&mut out[..]);
                select::scatter(c, src, recv, block, root as i32).unwrap();
                if at_root && in_place {
                    assert!(out.iter().all(|&b| b == 0xa5), "scatter in place wrote");
                } else {
                    assert_eq!(
                        out, xs[r],
                        "scatter of {block}-byte blocks from {root}, in place {in_place}"
                    );
                }
                // (Every size takes the segment, as for the gather.)
                assert_eq!(
                    runs(Alg::SmScatter) - before,
                    u64::from(seg),
                    "scatter of {block}-byte blocks on the segment"
                );
            }
        }
    }
    // Alltoall in place whose table fits a buffer without our own block only.
    let block = (sm::CAP - 8 - 8 * p) / (p - 1);
    for b in [block, block + 1] {
        let a2a = |i: usize, j: usize| contrib(b, 200, i * p + j, 41);
        let mut buf: Vec<u8> = (0..p).flat_map(|j| a2a(r, j)).collect();
        let counts = vec![b; p];
        let displs: Vec<usize> = (0..p).map(|j| j * b).collect();
        select::alltoallv_in_place(c, &mut buf, (&counts, &displs), Some(b)).unwrap();
        let want: Vec<u8> = (0..p).flat_map(|i| a2a(i, r)).collect();
        assert_eq!(buf, want, "alltoall in place of {b}-byte blocks");
    }
}

/// Gatherv, scatterv (each in place at the root and not, every root) and alltoallv in
/// place through `base::select`, with per-rank blocks around `bytes` (some on either side of
/// the segment's limit `sm::V_MAX` in one call) and gaps between them, against the local
/// reference.
fn sm_v_suite(c: &CollComm, bytes: usize, it: u64) {
    let p = c.size as usize;
    let r = c.rank as usize;
    // Rank i's block: spread around `bytes` (rank 0 the smallest, the last the largest).
    let vc: Vec<usize> = (0..p).map(|i| bytes / 2 + bytes * i / p + i % 3).collect();
    let vd = prefix(&vc, 3);
    let vlen = vd[p - 1] + vc[p - 1];
    let vx: Vec<Vec<u8>> = (0..p).map(|i| contrib(vc[i], it, i, 70)).collect();
    let mut full = vec![0u8; vlen];
    for i in 0..p {
        full[vd[i]..vd[i] + vc[i]].copy_from_slice(&vx[i]);
    }
    for root in 0..p {
        let at_root = r == root;
        for in_place in [false, true] {
            let mut g = vec![0u8; if at_root { vlen } else { 0 }];
            if at_root && in_place {
                g[vd[r]..vd[r] + vc[r]].copy_from_slice(&vx[r]);
            }
            let send = (!(at_root && in_place)).then_some(&vx[r][..]);
            let (gc, gd): (&[usize], &[usize]) = if at_root { (&vc, &vd) } else { (&[], &[]) };
            select::gatherv(c, send, &mut g, (gc, gd), root as i32).unwrap();
            if at_root {
                assert_eq!(
                    g, full,
                    "gatherv around {bytes} bytes to {root}, in place {in_place}"
                );
            }
            let src: &[u8] = if at_root { &full } else { &[] };
            let mut s = vec![0u8; vc[r]];
            let recv = (!(at_root && in_place)).then_some(&mut s[..]);
            select::scatterv(c, (src, gc, gd), recv, root as i32).unwrap();
            if !(at_root && in_place) {
                assert_eq!(
                    s, vx[r],
                    "scatterv around {bytes} bytes from {root}, in place {in_place}"
                );
            }
        }
    }
    // Alltoallv in place: rank i and rank j exchange n(i, j) = n(j, i) bytes.
    let n = |i: usize, j: usize| (bytes / p) * ((i + j) % 3) / 2 + (i + j) % 5;
    let blk = |from: usize, to: usize| contrib(n(from, to), it, from * p + to, 80);
    let counts: Vec<usize> = (0..p).map(|j| n(r, j)).collect();
    let displs = prefix(&counts, 1);
    let mut buf = vec![0u8; displs[p - 1] + counts[p - 1] + 1];
    for j in 0..p {
        buf[displs[j]..displs[j] + counts[j]].copy_from_slice(&blk(r, j));
    }
    select::alltoallv_in_place(c, &mut buf, (&counts, &displs), None).unwrap();
    for j in 0..p {
        assert_eq!(
            buf[displs[j]..displs[j] + counts[j]],
            blk(j, r),
            "alltoallv in place around {bytes} bytes from {j}"
        );
    }
}

/// Alltoallv with uneven blocks (some empty) around `bytes` per rank, on both sides of
/// the segment buffer's size, of 64 KiB sent per rank (the out-of-place cross-memory limit
/// of 2 ranks before) and of the swap's bounce buffer: through `base::select` and straight
/// on the segment, which moves the data whatever the sizes (the table when every rank's
/// blocks fit, else cross-memory copies).
fn a2a_suite(c: &CollComm) {
    use oxmpi_coll::base::stats::{runs, Alg};
    use oxmpi_coll::sm;
    let p = c.size as usize;
    let r = c.rank as usize;
    let seg = sm::get(c, Coll::Alltoall).unwrap().expect("a segment");
    let sizes = [
        0usize,
        1,
        57,
        1024,
        3000,
        4096,
        4097,
        5000,
        16 << 10,
        100_000,
        300_000,
    ];
    for (it, &bytes) in sizes.iter().enumerate() {
        let it = it as u64;
        // In place: ranks i and j trade n(i, j) = n(j, i) bytes; in odd rounds the higher
        // ranks send more, so that around 4 KiB some ranks' blocks fit a segment buffer
        // and others' do not (the two kinds of rank trade differently).
        let n = |i: usize, j: usize| {
            if it % 2 == 0 {
                (bytes / p) * ((i + j) % 3) / 2 + (i + j) % 5
            } else {
                bytes * (i + j) / (2 * p) + (i * j) % 3
            }
        };
        let blk = |from: usize, to: usize| contrib(n(from, to), it, from * p + to, 80);
        let counts: Vec<usize> = (0..p).map(|j| n(r, j)).collect();
        let displs = prefix(&counts, 3);
        let len = displs[p - 1] + counts[p - 1] + 2;
        let fill = |buf: &mut Vec<u8>| {
            *buf = vec![0xa5; len];
            for j in 0..p {
                buf[displs[j]..displs[j] + counts[j]].copy_from_slice(&blk(r, j));
            }
        };
        let check = |buf: &[u8], how: &str| {
            for j in 0..p {
                assert_eq!(
                    buf[displs[j]..displs[j] + counts[j]],
                    blk(j, r),
                    "alltoallv in place ({how}) around {bytes} bytes from {j}"
                );
                // The gaps between blocks are never written.
                assert!(buf[displs[j] + counts[j]..displs[j] + counts[j] + 2]
                    .iter()
                    .all(|&b| b == 0xa5));
            }
        };
        let mut buf = Vec::new();
        fill(&mut buf);
        select::alltoallv_in_place(c, &mut buf, (&counts, &displs), None).unwrap();
        check(&buf, "select");
        fill(&mut buf);
        let got = seg.alltoallv_in_place(&mut buf, &counts, &displs).unwrap();
        assert_eq!(
            got,
            Some(true),
            "alltoallv in place around {bytes} bytes on the segment"
        );
        check(&buf, "segment");
        // Out of place: rank i sends s(i, j) bytes to rank j.
        let s = |i: usize, j: usize| (bytes / p) * ((2 * i + j) % 3) / 2 + (i + 3 * j) % 5;
        let sc: Vec<usize> = (0..p).map(|j| s(r, j)).collect();
        let sd = prefix(&sc, 2);
        let mut send = vec![0u8; sd[p - 1] + sc[p - 1]];
        for j in 0..p {
            send[sd[j]..sd[j] + sc[j]].copy_from_slice(&contrib(sc[j], it, r * p + j, 90));
        }
        let rc: Vec<usize> = (0..p).map(|j| s(j, r)).collect();
        let rd = prefix(&rc, 1);
        let check = |recv: &[u8], how: &str| {
            for j in 0..p {
                assert_eq!(
                    recv[rd[j]..rd[j] + rc[j]],
                    contrib(rc[j], it, j * p + r, 90),
                    "alltoallv ({how}) around {bytes} bytes from {j}"
                );
            }
        };
        let mut recv = vec![0u8; rd[p - 1] + rc[p - 1] + 1];
        let before = runs(Alg::SmAlltoallv);
        select::alltoallv(c, &send, (&sc, &sd), &mut recv, (&rc, &rd)).unwrap();
        check(&recv, "select");
        assert_eq!(
            runs(Alg::SmAlltoallv) - before,
            1,
            "alltoallv around {bytes} bytes through select: on the segment"
        );
        recv.fill(0);
        let got = seg
            .alltoallv((&send, &sc, &sd), (&mut recv, &rc, &rd))
            .unwrap();
        assert_eq!(got, Some(true), "alltoallv around {bytes} bytes: path");
        check(&recv, "segment");
    }
    a2a_mismatch(c, &seg);
    a2a_large_suite(c);
}

/// Alltoallv on the segment whose receive count from the next rank disagrees with that
/// rank's send count (erroneous): even ranks expect a byte more than they are sent, odd
/// ones a byte less. Every rank reports it (`Some(false)`, the caller's
/// `MPI_ERR_TRUNCATE`) and leaves that block's place untouched, and still copies its own
/// block; on 2 ranks this is the pair table's check of the peer's entry.
fn a2a_mismatch(c: &CollComm, seg: &oxmpi_coll::sm::Seg) {
    let (p, r) = (c.size as usize, c.rank as usize);
    let next = (r + 1) % p;
    let sc = vec![4; p];
    let sd = prefix(&sc, 1);
    let mut send = vec![0u8; sd[p - 1] + 4];
    for j in 0..p {
        send[sd[j]..sd[j] + 4].copy_from_slice(&contrib(4, 99, r * p + j, 70));
    }
    let mut rc = vec![4; p];
    rc[next] = if r % 2 == 0 { 5 } else { 3 };
    let rd = prefix(&rc, 2);
    let mut recv = vec![0xa5u8; rd[p - 1] + rc[p - 1] + 2];
    let got = seg
        .alltoallv((&send, &sc, &sd), (&mut recv, &rc, &rd))
        .unwrap();
    assert_eq!(got, Some(false), "alltoallv with a count that disagrees");
    assert_eq!(
        recv[rd[r]..rd[r] + 4],
        contrib(4, 99, r * p + r, 70),
        "alltoallv with a count that disagrees: our own block"
    );
    assert!(
        recv[rd[next]..rd[next] + rc[next]]
            .iter()
            .all(|&b| b == 0xa5),
        "alltoallv with a count that disagrees: the block from {next} written"
    );
}

/// Allgathers and allgatherv(s) on 2 ranks of blocks in `sm::ALLGATHER_PAIR` (8-160 KiB,
/// in place every third call, uneven blocks in odd calls), 96 in a row through
/// `base::select`, each by cross-memory copies: out of place rank 0 chooses per call
/// whether each rank writes its block into the other's receive buffer or reads the
/// other's block, and posts the choice (its timing chooser tries both ways on its first
/// calls of a size and every 32nd call after); in place both write. Each call gets a fresh receive buffer filled with 0xa5, its
/// blocks at an offset and with gaps that differ per call; after the call both blocks
/// must hold this call's data and the gaps 0xa5 (a rank that followed its own choice
/// instead of rank 0's leaves its peer's block unwritten; a reader that left before the
/// writer was done shows too); the last 10 receive buffers stay alive and must not change
/// in later calls (a write into a stale layout shows there). Both ways must have run.
fn ag_pair_suite(c: &CollComm) {
    use oxmpi_coll::sm;
    use std::collections::VecDeque;
    let r = c.rank as usize;
    assert_eq!(c.size, 2, "ag-pair runs on 2 ranks");
    let seg = sm::get(c, Coll::Allgather).unwrap().expect("a segment");
    if !seg.cma_known() || !seg.push_known() {
        eprintln!("ag-pair: cross-memory writes not allowed here, nothing to test");
        return;
    }
    let reads = seg.pair_reads();
    let mut kept: VecDeque<(u64, Vec<u8>, Vec<u8>)> = VecDeque::new();
    let calls = 96u64;
    for it in 0..calls {
        let i = it as usize;
        let block = (8 << 10) + (i % 4) * (50 << 10) + i;
        let counts: Vec<usize> = if i % 2 == 0 {
            vec![block; 2]
        } else {
            vec![block, block / 2 + 3]
        };
        let lead = 1 + i % 7;
        // Even calls: the blocks back to back (an allgather); odd: a gap between them
        // that differs per rank (an allgatherv whose receive layouts differ).
        let gap = if i % 2 == 0 { 0 } else { 1 + (i + r) % 5 };
        let displs = vec![lead, lead + counts[0] + gap];
        let len = displs[1] + counts[1] + 3;
        let mut buf = vec![0xa5u8; len];
        let xs: Vec<Vec<u8>> = (0..2).map(|j| contrib(counts[j], it, j, 80)).collect();
        let in_place = i % 3 == 2;
        if in_place {
            buf[displs[r]..displs[r] + counts[r]].copy_from_slice(&xs[r]);
        }
        let own = (!in_place).then_some(&xs[r][..]);
        if i % 2 == 0 {
            select::allgather(c, &mut buf[lead..lead + 2 * block], block, own).unwrap();
        } else {
            select::allgatherv(c, &mut buf, (&counts, &displs), own).unwrap();
        }
        for j in 0..2 {
            let (d, n) = (displs[j], counts[j]);
            assert!(
                buf[d..d + n] == xs[j][..],
                "call {it} (in place {in_place}): the block of rank {j} on rank {r}"
            );
            let end = if j == 0 { displs[1] } else { len };
            assert!(
                buf[d + n..end].iter().all(|&b| b == 0xa5),
                "call {it}: the gap after the block of rank {j} on rank {r} was written"
            );
        }
        assert!(
            buf[..lead].iter().all(|&b| b == 0xa5),
            "call {it}: before the blocks on rank {r}"
        );
        keep_checking(&mut kept, it, buf, r);
    }
    let read = seg.pair_reads() - reads;
    assert!(
        read > 0 && read < calls,
        "rank {r}: {read} of {calls} calls read (both ways must run)"
    );
}

/// Out-of-place alltoalls and alltoallvs of blocks too large for a segment buffer (64-128
/// KiB, at least the default `coll_sm_alltoall_push_min`), 40 in a row through
/// `base::select`, with an in-place alltoallv after every third. Each out-of-place call
/// gets a fresh receive buffer, filled with 0xa5, its blocks at an offset and with gaps
/// that differ per call; after the call its blocks must hold this call's data (a receiver
/// that left before its writers were done shows here) and the gaps 0xa5; the last 10
/// receive buffers stay alive and must not change in later calls (a write into a stale
/// receive layout shows there). `push`: every out-of-place call wrote its blocks into the
/// receivers' buffers (when CMA reaches every rank), else none did.
fn a2a_push_suite(c: &CollComm, push: bool) {
    use oxmpi_coll::sm;
    use std::collections::VecDeque;
    let (p, r) = (c.size as usize, c.rank as usize);
    let seg = sm::get(c, Coll::Alltoall).unwrap().expect("a segment");
    let before = seg.pushes();
    let mut kept: VecDeque<(u64, Vec<u8>, Vec<u8>)> = VecDeque::new();
    let mut out_of_place = 0;
    for it in 0..40u64 {
        let i = it as usize;
        // Regular blocks in even calls, uneven ones (each at least 64 KiB) in odd calls.
        let n = |from: usize, to: usize| {
            if it % 2 == 0 {
                (64 << 10) + (i * 7919) % (64 << 10)
            } else {
                (64 << 10) + ((from * 3 + to * 5 + i) % 7) * 9001
            }
        };
        let sc: Vec<usize> = (0..p).map(|j| n(r, j)).collect();
        let sd = prefix(&sc, i % 3);
        let mut send = vec![0u8; sd[p - 1] + sc[p - 1]];
        for j in 0..p {
            send[sd[j]..sd[j] + sc[j]].copy_from_slice(&contrib(sc[j], it, r * p + j, 70));
        }
        let rc: Vec<usize> = (0..p).map(|j| n(j, r)).collect();
        // The blocks start `lead` bytes in and have gaps of 1-4 bytes between them.
        let lead = 1 + (i * 13) % 61;
        let rd: Vec<usize> = prefix(&rc, 1 + i % 4).iter().map(|d| d + lead).collect();
        let mut recv = vec![0xa5u8; rd[p - 1] + rc[p - 1] + 3];
        if it % 2 == 0 {
            let b = sc[0];
            // select::alltoall takes the blocks back to back.
            let mut dense = vec![0u8; p * b];
            for j in 0..p {
                dense[j * b..(j + 1) * b].copy_from_slice(&send[sd[j]..sd[j] + b]);
            }
            let mut out = vec![0xa5u8; lead + p * b + 3];
            select::alltoall(c, &dense, &mut out[lead..lead + p * b], b).unwrap();
            for j in 0..p {
                let at = lead + j * b;
                recv[rd[j]..rd[j] + b].copy_from_slice(&out[at..at + b]);
            }
            assert!(
                out[..lead].iter().all(|&x| x == 0xa5),
                "call {it}: before the blocks"
            );
            assert!(
                out[lead + p * b..].iter().all(|&x| x == 0xa5),
                "call {it}: after the blocks"
            );
        } else {
            select::alltoallv(c, &send, (&sc, &sd), &mut recv, (&rc, &rd)).unwrap();
        }
        out_of_place += 1;
        for j in 0..p {
            assert!(
                recv[rd[j]..rd[j] + rc[j]] == contrib(rc[j], it, j * p + r, 70)[..],
                "call {it} ({} bytes): the block from rank {j} on rank {r}",
                rc[j]
            );
            let gap = rd[j] + rc[j]..if j + 1 < p { rd[j + 1] } else { recv.len() };
            assert!(
                recv[gap].iter().all(|&x| x == 0xa5),
                "call {it}: the gap after the block from rank {j} on rank {r} was written"
            );
        }
        assert!(
            recv[..lead].iter().all(|&x| x == 0xa5),
            "call {it}: before the blocks"
        );
        keep_checking(&mut kept, it, recv, r);
        if it % 3 == 2 {
            // In place: ranks i and j trade blocks of the same length (these trade, not
            // push).
            let m = |a: usize, b: usize| (64 << 10) + ((a + b + i) % 5) * 7001;
            let counts: Vec<usize> = (0..p).map(|j| m(r, j)).collect();
            let displs = prefix(&counts, 2);
            let mut buf = vec![0xa5u8; displs[p - 1] + counts[p - 1] + 2];
            for j in 0..p {
                buf[displs[j]..displs[j] + counts[j]].copy_from_slice(&contrib(
                    counts[j],
                    it,
                    r * p + j,
                    71,
                ));
            }
            select::alltoallv_in_place(c, &mut buf, (&counts, &displs), None).unwrap();
            for j in 0..p {
                assert!(
                    buf[displs[j]..displs[j] + counts[j]]
                        == contrib(counts[j], it, j * p + r, 71)[..],
                    "call {it}: in place, the block from rank {j} on rank {r}"
                );
            }
        }
    }
    let pushed = seg.pushes() - before;
    if push && seg.cma_known() {
        assert_eq!(
            pushed, out_of_place,
            "out-of-place calls that pushed on rank {r}"
        );
    } else if !push {
        assert_eq!(pushed, 0, "calls that pushed on rank {r}");
    }
}

/// Alltoall and allgather(v) of blocks too large for a segment buffer, through
/// `base::select`: alltoall as an alltoallv on the segment (through the table when the
/// block for the other rank fits a buffer with it: the largest such block on 2 ranks and
/// one byte more; else by cross-memory copies, on 2 ranks too, on both sides of the 64 KiB
/// sent per rank they were limited to before); allgather(v) (in place and not, uneven
/// blocks with gaps, some empty) by cross-memory copies on more than 2 ranks, on 2 each
/// rank writing its block into the other's buffer (blocks of `sm::ALLGATHER_PAIR`: 1 MiB
/// blocks too, one byte more goes point to point; the allgatherv's gaps after the blocks
/// differ between ranks, so the two receive layouts differ); the counters say which path
/// ran, the gaps stay untouched.
fn a2a_large_suite(c: &CollComm) {
    use oxmpi_coll::base::stats::{runs, Alg};
    use oxmpi_coll::sm;
    let (p, r) = (c.size as usize, c.rank as usize);
    let seg = sm::get(c, Coll::Allgather).unwrap().expect("a segment");
    let many = p > 2 && seg.single_copy_max() > 0;
    let pair = |largest: usize| p == 2 && seg.cma_known() && sm::ALLGATHER_PAIR.contains(&largest);
    let big: &[usize] = if p == 2 {
        &[1 << 20, (1 << 20) + 1]
    } else {
        &[]
    };
    // The largest alltoall block of 2 ranks that fits a buffer with the table.
    let table = sm::CAP - 8 - 8 * 2;
    for (it, block) in [
        sm::DATA + 1,
        table,
        table + 1,
        32 << 10,
        (32 << 10) + 1,
        40_000,
    ]
    .into_iter()
    .chain(big.iter().copied())
    .enumerate()
    {
        let it = it as u64 + 50;
        let a2a = |i: usize, j: usize| contrib(block, it, i * p + j, 60);
        let send: Vec<u8> = (0..p).flat_map(|j| a2a(r, j)).collect();
        let mut recv = vec![0u8; p * block];
        let before = runs(Alg::SmAlltoallv);
        select::alltoall(c, &send, &mut recv, block).unwrap();
        assert_eq!(
            runs(Alg::SmAlltoallv) - before,
            1,
            "alltoall of {block}-byte blocks on the segment"
        );
        let want: Vec<u8> = (0..p).flat_map(|i| a2a(i, r)).collect();
        assert_eq!(recv, want, "alltoall of {block}-byte blocks");
        // Allgather, then allgatherv of uneven blocks (rank 0's empty) with gaps.
        let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(block, it, i, 61)).collect();
        let m = |i: usize| block * (i % 3) / 2 + i;
        let counts: Vec<usize> = (0..p).map(m).collect();
        let displs = prefix(&counts, 3 + r);
        let len = displs[p - 1] + counts[p - 1] + 3;
        let vs: Vec<Vec<u8>> = (0..p).map(|i| contrib(m(i), it, i, 62)).collect();
        for in_place in [false, true] {
            let mut buf = vec![0u8; p * block];
            if in_place {
                buf[r * block..(r + 1) * block].copy_from_slice(&xs[r]);
            }
            let own = (!in_place).then_some(&xs[r][..]);
            let before = runs(Alg::SmAllgather);
            select::allgather(c, &mut buf, block, own).unwrap();
            let how = format!("allgather of {block}-byte blocks, in place {in_place}");
            assert_eq!(
                runs(Alg::SmAllgather) - before,
                u64::from(many || pair(block)),
                "{how}: path"
            );
            assert_eq!(buf, xs.concat(), "{how}");
            let mut buf = vec![0xa5u8; len];
            if in_place {
                buf[displs[r]..displs[r] + counts[r]].copy_from_slice(&vs[r]);
            }
            let own = (!in_place).then_some(&vs[r][..]);
            let before = runs(Alg::SmAllgather);
            select::allgatherv(c, &mut buf, (&counts, &displs), own).unwrap();
            let how = format!("allgatherv around {block} bytes, in place {in_place}");
            // (Blocks that all fit a buffer go through the segment's buffers.)
            let largest = counts.iter().copied().max().unwrap_or(0);
            let seg_path = many || pair(largest) || largest <= sm::DATA;
            assert_eq!(
                runs(Alg::SmAllgather) - before,
                u64::from(seg_path),
                "{how}: path"
            );
            for i in 0..p {
                let (d, n) = (displs[i], counts[i]);
                assert_eq!(buf[d..d + n], vs[i], "{how}, from {i}");
                assert!(
                    buf[d + n..d + n + 3].iter().all(|&b| b == 0xa5),
                    "{how}: gap"
                );
            }
        }
    }
}

/// The point-to-point alltoallv (every transfer posted at once up to
/// `ALLTOALL_LINEAR_MAX` ranks) and allgatherv (recursive doubling on a power of two of
/// ranks when the blocks lie in rank order back to back, else the ring), with uneven
/// blocks (some empty) around the engine's eager limit and its large-message protocols,
/// in place and not, against the reference; the algorithm counters say which ran, and
/// the gaps between receive blocks stay untouched.
fn v_tuned_suite(c: &CollComm) {
    use oxmpi_coll::base::stats::{runs, Alg};
    let p = c.size as usize;
    let r = c.rank as usize;
    let sizes = [0usize, 1, 100, 4095, 4097, 70_000, 300_000];
    for (it, &bytes) in sizes.iter().enumerate() {
        let it = it as u64;
        // Alltoallv: rank i sends n(i, j) bytes to rank j.
        let n = |i: usize, j: usize| bytes * ((i + 2 * j + it as usize) % 4) / 3;
        let blk = |i: usize, j: usize| contrib(n(i, j), it, i * p + j, 70);
        let sc: Vec<usize> = (0..p).map(|j| n(r, j)).collect();
        let sd = prefix(&sc, 3);
        let mut send = vec![0u8; sd[p - 1] + sc[p - 1]];
        for j in 0..p {
            send[sd[j]..sd[j] + sc[j]].copy_from_slice(&blk(r, j));
        }
        let rc: Vec<usize> = (0..p).map(|i| n(i, r)).collect();
        let rd = prefix(&rc, 2);
        let mut recv = vec![0xa5u8; rd[p - 1] + rc[p - 1] + 2];
        let linear = runs(Alg::AlltoallvLinear);
        c.alltoallv(&send, &sc, &sd, &mut recv, &rc, &rd).unwrap();
        assert_eq!(
            runs(Alg::AlltoallvLinear) - linear,
            u64::from(p <= oxmpi_coll::tune::ALLTOALL_LINEAR_MAX),
            "alltoallv around {bytes} bytes: linear"
        );
        for j in 0..p {
            let (d, n) = (rd[j], rc[j]);
            assert_eq!(
                recv[d..d + n],
                blk(j, r),
                "alltoallv {bytes} bytes from {j}"
            );
            assert!(recv[d + n..d + n + 2].iter().all(|&b| b == 0xa5), "gap");
        }
        // Allgatherv: rank i's block is m(i) bytes, back to back (gap 0) or with gaps.
        let m = |i: usize| bytes * ((i + it as usize) % 3) / 2 + i % 2;
        let counts: Vec<usize> = (0..p).map(m).collect();
        let mine = contrib(m(r), it, r, 80);
        for gap in [0, 1 + it as usize % 2] {
            let displs = prefix(&counts, gap);
            let len = displs[p - 1] + counts[p - 1] + 1;
            for in_place in [true, false] {
                let mut buf = vec![0xa5u8; len];
                if in_place {
                    buf[displs[r]..displs[r] + counts[r]].copy_from_slice(&mine);
                }
                let own = (!in_place).then_some(&mine[..]);
                let recdbl = runs(Alg::AllgathervRecdbl);
                c.allgatherv_from(&mut buf, &counts, &displs, own).unwrap();
                assert_eq!(
                    runs(Alg::AllgathervRecdbl) - recdbl,
                    u64::from(gap == 0 && p.is_power_of_two()),
                    "allgatherv {bytes} bytes, gap {gap}: recursive doubling"
                );
                for i in 0..p {
                    let (d, n) = (displs[i], counts[i]);
                    let how = format!("allgatherv {bytes} bytes, gap {gap}, in place {in_place}");
                    assert_eq!(buf[d..d + n], contrib(n, it, i, 80), "{how}, from {i}");
                    let next = displs.get(i + 1).copied().unwrap_or(len);
                    assert!(buf[d + n..next].iter().all(|&b| b == 0xa5), "{how}: gap");
                }
            }
        }
    }
    c.barrier().unwrap();
}

/// Schedules started through `nbc::progress`: completed by the progress thread while the
/// rank only waits on a channel, and by the rank's own `progress_pending` calls; blocking
/// collectives may run while they are outstanding. The progress thread lingers as it does
/// when ranks yield when idle (its longer interval between looks): left alone, it still
/// completes every iteration well within 10 s.
fn nbc_suite(c: &CollComm) {
    use oxmpi_coll::nbc::progress;
    use oxmpi_coll::sched::{OwnedOp, Region};
    use std::sync::mpsc;
    progress::ranks_yield(true);
    let p = c.size as usize;
    let r = c.rank as usize;
    for it in 0..6u64 {
        let (tx, rx) = mpsc::channel::<(&str, Vec<u8>)>();
        let len = [0usize, 4, 4096, 40_000][it as usize % 4];
        let root = (it as usize) % p;
        let data = contrib(len, it, root, 1);
        let buf = if r == root {
            data.clone()
        } else {
            vec![0u8; len]
        };
        let s = c.ibcast(Region::Owned(buf), root as i32).unwrap();
        let t = tx.clone();
        progress::start(
            s,
            Box::new(move |s, res| {
                res.unwrap();
                t.send(("bcast", s.owned_bytes(0).unwrap().to_vec()))
                    .unwrap();
            }),
        );
        let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(len, it, i, 10)).collect();
        let op = OwnedOp {
            f: Box::new(sum_u32),
            elem_size: 4,
            commutative: true,
        };
        let s = c.iallreduce(Region::Owned(xs[r].clone()), op).unwrap();
        let t = tx.clone();
        progress::start(
            s,
            Box::new(move |s, res| {
                res.unwrap();
                t.send(("allreduce", s.owned_bytes(0).unwrap().to_vec()))
                    .unwrap();
            }),
        );
        let s = c.ibarrier().unwrap();
        progress::start(
            s,
            Box::new(move |_, res| {
                res.unwrap();
                tx.send(("barrier", Vec::new())).unwrap();
            }),
        );
        // A blocking collective while the schedules are outstanding (its own tags).
        let mut b = vec![r as u8; 3];
        c.bcast(&mut b, 0).unwrap();
        assert_eq!(b, [0, 0, 0]);
        let mut got = std::collections::HashMap::new();
        let began = Instant::now();
        while got.len() < 3 {
            // Odd iterations leave everything to the progress thread.
            if it % 2 == 0 {
                progress::progress_pending();
            }
            assert!(
                began.elapsed() < Duration::from_secs(10),
                "iteration {it}: only {:?} of 3 schedules ended within 10 s",
                got.keys().collect::<Vec<_>>()
            );
            if let Ok((what, v)) = rx.recv_timeout(Duration::from_millis(1)) {
                got.insert(what, v);
            }
        }
        assert_eq!(got["bcast"], data, "ibcast it {it}");
        assert_eq!(got["allreduce"], fold(&sum_u32, &xs), "iallreduce it {it}");
    }
    assert!(!oxmpi_coll::nbc::progress::progress_pending(), "all done");
}

/// The progress thread backs off while waiting threads drive the schedules themselves
/// (`progress_pending` calls between its looks): rank 1 starts an ibcast from rank 0 and
/// drives it for 1.2 s while rank 0 has not started it (no MPI call), then stops calling
/// into the library as rank 0 starts it. The progress thread of rank 1 (and of rank 0, which
/// never drives) must complete it soon: within 1 s of the end of the driven phase, against
/// about 32 ms for the thread's longest sleep while driven twice; a backoff without a bound
/// would be asleep for seconds by then. Several rounds, so that a rank's stopping falls at
/// various points of the thread's sleeps.
fn nbc_after_driven(c: &CollComm) {
    use oxmpi_coll::nbc::progress;
    use oxmpi_coll::sched::Region;
    use std::sync::mpsc;
    progress::ranks_yield(true);
    let r = c.rank as usize;
    for round in 0..3u64 {
        c.barrier().unwrap();
        let began = Instant::now();
        let driven = Duration::from_millis(1200);
        let data = contrib(4, round, 0, 1);
        let (tx, rx) = mpsc::channel::<Vec<u8>>();
        let start = |buf: Vec<u8>| {
            let s = c.ibcast(Region::Owned(buf), 0).unwrap();
            let tx = tx.clone();
            progress::start(
                s,
                Box::new(move |s, res| {
                    res.unwrap();
                    tx.send(s.owned_bytes(0).unwrap().to_vec()).unwrap();
                }),
            );
        };
        if r == 0 {
            // No MPI call while rank 1 drives its side.
            std::thread::sleep(driven);
            start(data.clone());
        } else {
            start(vec![0u8; 4]);
            while began.elapsed() < driven {
                progress::progress_pending();
                std::thread::yield_now();
            }
        }
        let stopped = Instant::now();
        let got = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("round {round}: the ibcast did not end within 20 s: {e}"));
        let after = stopped.elapsed();
        assert_eq!(got, data, "round {round}: ibcast data");
        assert!(
            after < Duration::from_secs(1),
            "round {round}: rank {r}: the progress thread completed the ibcast {after:?} after \
             the waits stopped driving it (1 s at most)"
        );
    }
    c.barrier().unwrap();
    assert!(!oxmpi_coll::nbc::progress::progress_pending(), "all done");
}

/// Two helper threads that advance the light requests (`light::poll_all`) until stopped,
/// as other threads of an application would.
struct Pollers {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Pollers {
    fn start() -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let threads = (0..2)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        oxmpi_coll::nbc::light::poll_all();
                        std::thread::yield_now();
                    }
                })
            })
            .collect();
        Pollers { stop, threads }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.threads {
            h.join().unwrap();
        }
    }
}

/// See [`iscatter_shared_np3`] (`v`: [`iscatterv_shared_np3`]).
fn iscatter_shared_suite(c: &CollComm, v: bool) {
    use oxmpi_coll::nbc::light;
    use oxmpi_coll::sched::Region;
    use oxmpi_coll::sm::nb::SHARE_CHUNK;
    use oxmpi_coll::sm::{Rooted, SmKind};
    let (p, me) = (c.size as usize, c.rank as usize);
    // A blocking collective makes the segment (and probes CMA, reading and writing).
    let seg0 = oxmpi_coll::sm::get(c, Coll::Allreduce).unwrap();
    assert!(seg0.is_some_and(|s| s.cma_known() && s.push_known()));
    let pollers = Pollers::start();
    for it in 0..48u64 {
        // Same root, size and late rank on every rank (a shared seed).
        let mut rng = Rng(it * 11 + 5);
        let root = (it as usize) % p;
        let sizes = [2 * SHARE_CHUNK, 3 * SHARE_CHUNK + 1, 200_003, 1 << 20];
        let block = sizes[rng.below(4)];
        // Scatterv: a length per rank, and in one round of 8 one rank's block far but too
        // short to share (the root then reads as before); the blocks at permuted places
        // of the input (rank `r`'s after those of ranks `r + 1..`), with gaps.
        let short = if it % 8 == 5 { rng.below(p) } else { p };
        let counts: Vec<usize> = (0..p)
            .map(|r| match r == short {
                true => SHARE_CHUNK + 4097,
                false => sizes[rng.below(4)],
            })
            .collect();
        let mut displs = vec![0; p];
        let mut at = 0;
        for r in (0..p).rev() {
            displs[r] = at;
            at += counts[r] + 8 * rng.below(3);
        }
        let (counts, displs) = match v {
            true => (counts, displs),
            false => (vec![block; p], (0..p).map(|r| r * block).collect()),
        };
        let late = rng.below(p);
        // The root shares only in place: out of place one round in four.
        let in_place = me == root && it % 4 != 3;
        let total = (0..p).map(|r| displs[r] + counts[r]).max().unwrap_or(0);
        let all = contrib(total, it, root, 12);
        let mine = displs[me]..displs[me] + counts[me];
        let want = all[mine.clone()].to_vec();
        let mut inp = if me == root { all.clone() } else { Vec::new() };
        let mut out = vec![0u8; if in_place { 0 } else { counts[me] }];
        if me == late {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let seg = oxmpi_coll::sm::existing(c).expect("the segment exists");
        let kind = match v {
            false => SmKind::Single {
                root,
                block,
                coll: Rooted::Scatter,
            },
            true => SmKind::Scatterv {
                root,
                counts: if me == root {
                    counts.clone()
                } else {
                    Vec::new()
                },
                displs: if me == root {
                    displs.clone()
                } else {
                    Vec::new()
                },
                far: seg.single_copy_max(),
            },
        };
        let block = counts[me];
        let input = Region::Raw(inp.as_mut_ptr(), inp.len());
        let output = Region::Raw(out.as_mut_ptr(), out.len());
        let i = light::claim().expect("a free slot");
        // SAFETY: `inp` and `out` live until the request ended (waited for below).
        let ended = unsafe { light::start_then(i, c, (seg, kind), (input, output), None, 0, None) };
        if ended.is_none() {
            loop {
                if let Some(r) = light::test(i) {
                    r.unwrap();
                    break;
                }
                std::hint::spin_loop();
            }
        }
        if !in_place {
            // First, at once, the last byte of every page (a copy in flight, the kernel's
            // forward one, writes it last); then every byte.
            let late_page = (1..=block.div_ceil(4096))
                .map(|i| (i * 4096).min(block) - 1)
                .find(|&j| out[j] != want[j]);
            assert!(
                late_page.is_none(),
                "iscatter shared, iteration {it} (block {block}, root {root}, late {late}): \
                 byte {} of rank {me}'s block (a page's last) not there at its end",
                late_page.unwrap_or(0)
            );
            let bad = out.iter().zip(&want).position(|(a, b)| a != b);
            assert!(
                bad.is_none(),
                "iscatter shared, iteration {it} (block {block}, root {root}, late {late}): \
                 byte {} of rank {me}'s block wrong at its end",
                bad.unwrap_or(0)
            );
        }
        if me == root {
            assert!(inp == all, "iteration {it}: the root's input changed");
        }
        // Nothing may write into the output once the request ended: overwrite it, let
        // every rank finish, then look again.
        out.fill(0xa5);
        c.barrier().unwrap();
        let bad = out.iter().position(|&b| b != 0xa5);
        assert!(
            bad.is_none(),
            "iscatter shared, iteration {it} (block {block}, root {root}, late {late}): \
             byte {} of rank {me}'s output written after its end",
            bad.unwrap_or(0)
        );
    }
    pollers.stop();
    assert_eq!(light::open(), 0, "every light request ended exactly once");
}

/// See [`light_requests_racing_np2`].
fn light_suite(c: &CollComm) {
    use oxmpi_coll::nbc::light;
    use oxmpi_coll::sched::{OwnedOp, Region};
    use oxmpi_coll::sm::{Reduction, Rooted, SmKind};
    let (p, me) = (c.size as usize, c.rank as usize);
    // A blocking collective makes the segment; the light requests need it.
    let seg = oxmpi_coll::sm::get(c, Coll::Allreduce).unwrap();
    // CMA works between a user's processes: known since the segment was made.
    assert!(seg.is_some_and(|s| s.cma_known()));
    // Each request's body holds the segment until it ended: every body is dropped once
    // (the holders of the segment are as many after as before).
    let held = |s: &std::sync::Arc<oxmpi_coll::sm::Seg>| std::sync::Arc::strong_count(s);
    let seg0 = oxmpi_coll::sm::existing(c).expect("the segment exists");
    let held0 = held(&seg0);
    let pollers = Pollers::start();
    let mut order_rng = Rng(0x5eed ^ ((me as u64 + 1) * 0x1234_5678_9abc));
    // More outstanding than the segment has nonblocking buffers: later posts wait for a
    // buffer.
    const N: usize = oxmpi_coll::sm::NB_NBUF as usize + 5;
    for it in 0..60u64 {
        // Same kinds, sizes and roots on every rank (a shared seed).
        let mut rng = Rng(it * 7 + 3);
        let mut posted = Vec::new();
        for j in 0..N {
            let t = (it << 8) + j as u64;
            let root = rng.below(p);
            let most = if rng.below(4) == 0 { 4096 / 8 / p } else { 4 };
            let block = 8 * (1 + rng.below(most));
            // Blocks too large for a buffer: one cross-memory copy per rank, sizes on both
            // sides of a buffer, a page, and up to 64 KiB.
            let big = [4097, 4096 + 8, 8191, 8192, 20_000, 65_536][rng.below(6)];
            // Reductions through the nonblocking large region: whole 8-byte items (the
            // non-commutative `affine`), in place or not; an inclusive scan's chain in one
            // chunk or in several, the last one partial (`SCAN_SEGMENT` each).
            let large = [4104, 8200, 20_000, 65_536, 200_008][rng.below(5)];
            let in_place = rng.below(2) == 0;
            let kind = match rng.below(13) {
                8 | 9 => {
                    let red = match rng.below(5) {
                        0 => Reduction::Allreduce,
                        1 => Reduction::Reduce { root },
                        // Blocks of whole items, the last rank's the longest.
                        4 => {
                            let base = large / 8 / p * 8;
                            let len = if me + 1 == p { large - base * me } else { base };
                            // (The same counts on every rank: no mark needed.)
                            Reduction::ReduceScatter {
                                at: base * me,
                                len,
                                mark: 0,
                            }
                        }
                        e => Reduction::Scan { exclusive: e == 3 },
                    };
                    // On two ranks, the reductions but exclusive scans also by
                    // cross-memory copies between the ranks' buffers (the reduce split
                    // from 32 KiB; an inclusive scan as a reduce to rank 1).
                    let pair = p == 2 && !matches!(red, Reduction::Scan { exclusive: true });
                    if pair && rng.below(2) == 0 {
                        SmKind::Pair { red }
                    } else {
                        SmKind::Large { red }
                    }
                }
                0 => SmKind::Bcast { root },
                1 => SmKind::Allreduce,
                2 => SmKind::Reduce { root },
                3 => SmKind::Gather { root, block },
                4 => SmKind::Scatter { root, block },
                // Each rank posts the blocks for the others only and copies its own
                // itself; an allgather(v)'s own block goes from the input to the output
                // at the post (in place: it is there already).
                10 => SmKind::Alltoall { block },
                11 => SmKind::Allgather { block },
                12 => {
                    // Blocks of 1 to 3 times 8 bytes, one per rank, with a gap after each.
                    let counts: Vec<usize> = (0..p).map(|r| 8 * (1 + (r + j) % 3)).collect();
                    let displs = prefix(&counts, 5);
                    SmKind::Allgatherv { counts, displs }
                }
                c @ 5..=7 => SmKind::Single {
                    root,
                    block: big,
                    coll: [Rooted::Bcast, Rooted::Gather, Rooted::Scatter][c - 5],
                },
                _ => unreachable!(),
            };
            let (inp, out_len, want): (Vec<u8>, usize, Vec<u8>) = match &kind {
                SmKind::Bcast { root } => {
                    let d = contrib(block, t, *root, 1);
                    let mine = if me == *root { d.clone() } else { Vec::new() };
                    (
                        mine,
                        if me == *root { 0 } else { block },
                        if me == *root { Vec::new() } else { d },
                    )
                }
                SmKind::Allreduce => {
                    let xs: Vec<_> = (0..p).map(|r| contrib(block, t, r, 2)).collect();
                    (xs[me].clone(), block, fold(&sum_u32, &xs))
                }
                SmKind::Reduce { root } => {
                    let xs: Vec<_> = (0..p).map(|r| contrib(block, t, r, 3)).collect();
                    let want = if me == *root {
                        fold(&affine, &xs)
                    } else {
                        Vec::new()
                    };
                    (xs[me].clone(), want.len(), want)
                }
                SmKind::Gather { root, block } => {
                    let xs: Vec<_> = (0..p).map(|r| contrib(*block, t, r, 4)).collect();
                    let want = if me == *root { xs.concat() } else { Vec::new() };
                    (xs[me].clone(), want.len(), want)
                }
                SmKind::Scatter { root, block } => {
                    let all = contrib(block * p, t, *root, 5);
                    let mine = all[me * block..(me + 1) * block].to_vec();
                    (if me == *root { all } else { Vec::new() }, *block, mine)
                }
                SmKind::Single { root, block, coll } => {
                    let (root, block) = (*root, *block);
                    let at_root = me == root;
                    match coll {
                        Rooted::Bcast => {
                            let d = contrib(block, t, root, 6);
                            let out = if at_root { 0 } else { block };
                            let mine = if at_root { d.clone() } else { Vec::new() };
                            (mine, out, if at_root { Vec::new() } else { d })
                        }
                        Rooted::Gather => {
                            let xs: Vec<_> = (0..p).map(|r| contrib(block, t, r, 7)).collect();
                            let want = if at_root { xs.concat() } else { Vec::new() };
                            (xs[me].clone(), want.len(), want)
                        }
                        Rooted::Scatter => {
                            let all = contrib(block * p, t, root, 8);
                            let mine = all[me * block..(me + 1) * block].to_vec();
                            (if at_root { all } else { Vec::new() }, block, mine)
                        }
                    }
                }
                SmKind::Alltoall { block } => {
                    // Rank `i`'s block for rank `j`.
                    let x = |i: usize, j: usize| contrib(*block, t, i * p + j, 11);
                    let mine: Vec<u8> = (0..p).flat_map(|j| x(me, j)).collect();
                    let want: Vec<u8> = (0..p).flat_map(|i| x(i, me)).collect();
                    (mine, p * block, want)
                }
                SmKind::Allgather { block } => {
                    let xs: Vec<_> = (0..p).map(|r| contrib(*block, t, r, 12)).collect();
                    (xs[me].clone(), p * block, xs.concat())
                }
                SmKind::Allgatherv { counts, displs } => {
                    let end = displs[p - 1] + counts[p - 1] + 3;
                    // The gaps stay as they were (0).
                    let mut want = vec![0u8; end];
                    for r in 0..p {
                        let x = contrib(counts[r], t, r, 13);
                        want[displs[r]..displs[r] + counts[r]].copy_from_slice(&x);
                    }
                    let mine = want[displs[me]..displs[me] + counts[me]].to_vec();
                    (mine, end, want)
                }
                SmKind::Large { red } | SmKind::Pair { red } => {
                    let xs: Vec<_> = (0..p).map(|r| contrib(large, t, r, 10)).collect();
                    let want = match *red {
                        Reduction::Allreduce => fold(&affine, &xs),
                        Reduction::Reduce { root } if root == me => fold(&affine, &xs),
                        Reduction::Reduce { .. } => Vec::new(),
                        // In place the rest of the input stays as it was.
                        Reduction::ReduceScatter { at, len, .. } => {
                            let mut w = fold(&affine, &xs)[at..at + len].to_vec();
                            // (The pair path leaves the rest of an in-place vector
                            // undefined, as MPI allows: compared up to `len` below.)
                            if in_place {
                                w.extend_from_slice(&xs[me][len..]);
                            }
                            w
                        }
                        Reduction::ReduceScatterBlock { .. } => unreachable!("not drawn"),
                        Reduction::Scan { exclusive } => {
                            let upto = if exclusive { me } else { me + 1 };
                            match upto {
                                // Exclusive on rank 0: the output is left alone.
                                0 if in_place => xs[0].clone(),
                                0 => vec![0; large],
                                _ => fold(&affine, &xs[..upto]),
                            }
                        }
                    };
                    let out_len = match *red {
                        Reduction::ReduceScatter { len, .. } => len,
                        _ if want.is_empty() => 0,
                        _ => large,
                    };
                    (xs[me].clone(), out_len, want)
                }
                _ => unreachable!(),
            };
            let op = match &kind {
                SmKind::Allreduce => Some(OwnedOp {
                    f: Box::new(sum_u32),
                    elem_size: 4,
                    commutative: true,
                }),
                SmKind::Reduce { .. } | SmKind::Large { .. } | SmKind::Pair { .. } => {
                    Some(OwnedOp {
                        f: Box::new(affine),
                        elem_size: 8,
                        commutative: false,
                    })
                }
                _ => None,
            };
            let seg = oxmpi_coll::sm::existing(c).expect("the segment exists");
            let mut inp = inp;
            let mut out = vec![0u8; out_len];
            // In place: the input is the output itself (where a rank has one; a
            // reduce-scatter's output is the start of its input).
            let aliased = matches!(
                kind,
                SmKind::Large { .. } | SmKind::Pair { .. } | SmKind::Alltoall { .. }
            ) && in_place
                && out_len > 0;
            // An allgather(v) in place: the input is our block where it lies in the output.
            let own_in_out = match &kind {
                SmKind::Allgather { block } if in_place => Some((me * block, *block)),
                SmKind::Allgatherv { counts, displs } if in_place => Some((displs[me], counts[me])),
                _ => None,
            };
            // What the result is compared with: the output, or its first `len` bytes after
            // an in-place reduce-scatter by the pair path.
            let upto = match kind {
                SmKind::Pair {
                    red: Reduction::ReduceScatter { len, .. },
                } if aliased => len,
                _ => usize::MAX,
            };
            if aliased {
                out = inp.clone();
            }
            if let Some((at, n)) = own_in_out {
                out[at..at + n].copy_from_slice(&inp);
            }
            let reg = |v: &mut Vec<u8>| Region::Raw(v.as_mut_ptr(), v.len());
            let input = if aliased {
                reg(&mut out)
            } else if let Some((at, n)) = own_in_out {
                Region::Raw(out.as_mut_ptr().wrapping_add(at), n)
            } else {
                reg(&mut inp)
            };
            let output = Region::Raw(out.as_mut_ptr(), out_len);
            let i = light::claim().expect("a free slot");
            // Every other one with a function to run on the output once it ended (as the
            // C library unpacks a packed result): it must see the whole result, once,
            // before the request completes.
            let seen = Arc::new(Mutex::new(Vec::<Vec<u8>>::new()));
            let then = (t % 2 == 1).then(|| {
                let seen = seen.clone();
                Box::new(move |v: &[u8]| seen.lock().unwrap().push(v.to_vec())) as light::Then
            });
            // SAFETY: `inp` and `out` live until the request ended (checked below).
            let ended = unsafe {
                light::start_then(i, c, (seg, kind), (input, output), op, j as i32, then)
            };
            let then = (t % 2 == 1).then_some(seen);
            posted.push((
                Some(i).filter(|_| ended.is_none()),
                inp,
                out,
                want,
                j,
                upto,
                then,
            ));
        }
        // A blocking single-copy bcast while they are pending (its own sequence).
        let root = (it as usize) % p;
        let d = contrib(20_000, it, root, 9);
        let mut b = if me == root {
            d.clone()
        } else {
            vec![0u8; d.len()]
        };
        select::bcast(c, &mut b, root as i32).unwrap();
        assert_eq!(b, d, "blocking bcast among pending ones, iteration {it}");
        // Complete in a random order.
        while !posted.is_empty() {
            let k = order_rng.below(posted.len());
            let (slot, _inp, out, want, j, upto, then) = posted.swap_remove(k);
            if let Some(i) = slot {
                assert_eq!(light::owner(i), j as i32);
                loop {
                    if let Some(r) = light::test(i) {
                        r.unwrap();
                        break;
                    }
                    light::poll_all();
                }
            }
            let upto = upto.min(out.len());
            assert_eq!(out[..upto], want[..upto], "iteration {it}, collective {j}");
            assert_eq!(out.len(), want.len(), "iteration {it}, collective {j}");
            if let Some(seen) = then {
                let seen = seen.lock().unwrap();
                assert_eq!(
                    seen.len(),
                    1,
                    "iteration {it}, collective {j}: then ran once"
                );
                // The output region's bytes (a reduce-scatter's block in place: the
                // front of `out`), as the result checked above.
                let n = seen[0].len().min(upto);
                assert_eq!(
                    seen[0][..n],
                    want[..n],
                    "iteration {it}, collective {j}: then"
                );
            }
        }
        if it % 10 == 0 {
            c.barrier().unwrap();
        }
    }
    pollers.stop();
    assert_eq!(light::open(), 0, "every light request ended exactly once");
    assert_eq!(
        held(&seg0),
        held0,
        "every light request's body was dropped once"
    );
}

/// See [`blocking_phased_reduce_scatter_np3`]: reduce-scatters of equal blocks of 8-byte
/// items under the non-commutative `affine`, vectors of 1 to 4 slots (2 to 5 phases, the
/// last one shorter unless a multiple; odd item counts, so that a phase split in bytes
/// rather than whole items would cut items), in place and out of place, each block the
/// rank-order fold of the ranks' blocks; they run through the segment (not the ring), out
/// of place the input is left alone, and vectors of one slot or more than
/// `sm::RS_PHASED_MAX` are declined on every rank. A nonblocking allreduce through the same
/// slots is left outstanding across some of them: the blocking call runs it meanwhile.
fn blocking_phased_suite(c: &CollComm) {
    use oxmpi_coll::base::stats::{runs, Alg};
    use oxmpi_coll::nbc::light;
    use oxmpi_coll::sched::{OwnedOp, Region};
    use oxmpi_coll::sm::{self, Reduction, SmKind, NB_LARGE_MAX, RS_PHASED_MAX};
    let (p, me) = (c.size as usize, c.rank as usize);
    let f = |x: &[u8], y: &mut [u8]| affine(x, y);
    // A blocking collective makes the segment; the light requests need it.
    assert!(
        sm::get(c, Coll::Allreduce).unwrap().is_some(),
        "the segment exists"
    );
    // Declined on every rank, nothing done: one slot, and more than the phased maximum.
    for block in [NB_LARGE_MAX / p / 8 * 8, (RS_PHASED_MAX / p / 8 + 1) * 8] {
        let mut buf = vec![0u8; block];
        let send = vec![0u8; block * p];
        let done = select::reduce_scatter_phased(c, Some(&send), &mut buf, (block, 8), &f);
        assert!(!done.unwrap(), "block {block}: not phased");
    }
    for it in 0..8u64 {
        let mut rng = Rng(it * 7 + 3);
        let items = NB_LARGE_MAX / p / 8 * (1 + rng.below(4)) + 1 + 2 * rng.below(4096);
        let block = 8 * items;
        let in_place = it % 2 == 1;
        let t = it + 900;
        let xs: Vec<_> = (0..p).map(|r| contrib(block * p, t, r, 13)).collect();
        let blocks: Vec<_> = xs
            .iter()
            .map(|x| x[me * block..][..block].to_vec())
            .collect();
        let want = fold(&affine, &blocks);
        // Every fourth call with an allreduce through the slots outstanding.
        let mut ar = (it % 4 == 0).then(|| {
            let n = 65_536;
            let xs: Vec<_> = (0..p).map(|r| contrib(n, t, r, 14)).collect();
            let mut out = contrib(n, t, me, 14);
            let seg = sm::existing(c).expect("the segment exists");
            let i = light::claim().expect("a free slot");
            let op = OwnedOp {
                f: Box::new(affine),
                elem_size: 8,
                commutative: false,
            };
            let io = (
                Region::Raw(out.as_mut_ptr(), n),
                Region::Raw(out.as_mut_ptr(), n),
            );
            let red = Reduction::Allreduce;
            // SAFETY: `out` lives until the request ended (waited below; moving it into the
            // tuple does not move its heap buffer).
            let ended =
                unsafe { light::start(i, c, (seg, SmKind::Large { red }), io, Some(op), 7) };
            (ended.is_none().then_some(i), out, fold(&affine, &xs))
        });
        let (sm0, ring0) = (runs(Alg::SmReduceScatter), runs(Alg::ReduceScatterRing));
        let x = xs[me].clone();
        let what = format!("block {block}, in place {in_place}");
        let mut buf = if in_place {
            x.clone()
        } else {
            vec![0xa5; block]
        };
        let send = (!in_place).then_some(&x[..]);
        let done = select::reduce_scatter_phased(c, send, &mut buf, (block, 8), &f).unwrap();
        assert!(done, "{what}: phased");
        assert!(buf[..block] == want[..], "{what}: our block of the result");
        assert_eq!(x, xs[me], "{what}: the input left alone");
        assert_eq!(
            runs(Alg::SmReduceScatter) - sm0,
            1,
            "{what}: on the segment"
        );
        assert_eq!(runs(Alg::ReduceScatterRing), ring0, "{what}: not the ring");
        if let Some((slot, out, want)) = ar.take() {
            while let Some(i) = slot {
                if let Some(r) = light::test(i) {
                    r.unwrap();
                    break;
                }
                light::poll_all();
            }
            assert!(out == want, "allreduce outstanding across {what}");
        }
    }
    assert_eq!(light::open(), 0, "every light request ended exactly once");
}

/// See [`phased_reduce_scatter_np3`]: every block is the rank-order fold of the ranks'
/// blocks under a non-commutative operation; in place the rest of the vector stays as it
/// was, out of place the input is left alone.
fn phased_suite(c: &CollComm) {
    use oxmpi_coll::nbc::light;
    use oxmpi_coll::sched::{OwnedOp, Region};
    use oxmpi_coll::sm::{Reduction, SmKind, NB_LARGE_MAX};
    let (p, me) = (c.size as usize, c.rank as usize);
    // A blocking collective makes the segment; the light requests need it.
    let seg = oxmpi_coll::sm::get(c, Coll::Allreduce).unwrap();
    assert!(seg.is_some(), "the segment exists");
    let pollers = Pollers::start();
    let mut order_rng = Rng(0x9a5e ^ ((me as u64 + 1) * 0x1234_5678_9abc));
    // Items (8 bytes) of every block in one phase: the slot holds one slice of each block.
    let per = NB_LARGE_MAX / p / 8;
    for it in 0..6u64 {
        // Same kinds and sizes on every rank (a shared seed).
        let mut rng = Rng(it * 11 + 5);
        let mut posted = Vec::new();
        for j in 0..5usize {
            let t = (it << 8) + j as u64;
            let in_place = rng.below(2) == 0;
            let (red, n, out_len, want) = if j % 2 == 1 {
                // A single-phase allreduce through the same slots.
                let n = 65_536;
                let xs: Vec<_> = (0..p).map(|r| contrib(n, t, r, 11)).collect();
                (Reduction::Allreduce, n, n, fold(&affine, &xs))
            } else {
                // 2 to 4 phases, the last one shorter unless a multiple.
                let items = per * (1 + rng.below(3)) + 1 + rng.below(per);
                let block = 8 * items;
                let mine = |r: usize| contrib(block * p, t, r, 12)[me * block..][..block].to_vec();
                let xs: Vec<_> = (0..p).map(mine).collect();
                (
                    Reduction::ReduceScatterBlock { block },
                    block * p,
                    block,
                    fold(&affine, &xs),
                )
            };
            let x = if matches!(red, Reduction::Allreduce) {
                contrib(n, t, me, 11)
            } else {
                contrib(n, t, me, 12)
            };
            let mut inp = x.clone();
            // In place the output is the start of the input.
            let mut out = if in_place {
                x.clone()
            } else {
                vec![0u8; out_len]
            };
            let input = if in_place {
                Region::Raw(out.as_mut_ptr(), n)
            } else {
                Region::Raw(inp.as_mut_ptr(), n)
            };
            let output = Region::Raw(out.as_mut_ptr(), out_len);
            let op = OwnedOp {
                f: Box::new(affine),
                elem_size: 8,
                commutative: false,
            };
            let seg = oxmpi_coll::sm::existing(c).expect("the segment exists");
            let i = light::claim().expect("a free slot");
            // SAFETY: `inp` and `out` live until the request ended (checked below); moving
            // the vectors into `posted` does not move their heap buffers.
            let ended = unsafe {
                light::start(
                    i,
                    c,
                    (seg, SmKind::Large { red }),
                    (input, output),
                    Some(op),
                    j as i32,
                )
            };
            if let Some(r) = &ended {
                assert!(r.is_ok(), "collective {j} failed at its post");
            }
            let slot = ended.is_none().then_some(i);
            posted.push((slot, inp, out, x, want, j, in_place, out_len));
        }
        while !posted.is_empty() {
            let k = order_rng.below(posted.len());
            let (slot, inp, out, x, want, j, in_place, len) = posted.swap_remove(k);
            while let Some(i) = slot {
                if let Some(r) = light::test(i) {
                    r.unwrap();
                    break;
                }
                light::poll_all();
            }
            assert!(
                out[..len] == want[..],
                "iteration {it}, collective {j}, in place {in_place}"
            );
            if in_place {
                assert!(
                    out[len..] == x[len..],
                    "iteration {it}, collective {j}: the rest kept"
                );
            } else {
                assert!(inp == x, "iteration {it}, collective {j}: input left alone");
            }
        }
    }
    pollers.stop();
    assert_eq!(light::open(), 0, "every light request ended exactly once");
}

/// Run a schedule to its end on this thread and get it back.
fn run_sched(s: oxmpi_coll::sched::Schedule) -> oxmpi_coll::sched::Schedule {
    use oxmpi_coll::nbc::progress;
    let (tx, rx) = std::sync::mpsc::channel();
    progress::start(
        s,
        Box::new(move |s, res| {
            res.unwrap();
            tx.send(s).unwrap();
        }),
    );
    loop {
        progress::progress_pending();
        if let Ok(s) = rx.recv_timeout(Duration::from_millis(1)) {
            return s;
        }
    }
}

/// `iscan_from` (`exclusive`: the exclusive scan) of our contribution `x`, out of place
/// (the input given as the caller's memory and checked left alone; the output starting as
/// `0xa5` bytes) and in place (the same memory given as input and output): both results.
fn iscan_both(
    c: &CollComm,
    x: &[u8],
    op: &dyn Fn() -> oxmpi_coll::sched::OwnedOp,
    exclusive: bool,
    what: &str,
) -> (Vec<u8>, Vec<u8>) {
    use oxmpi_coll::sched::Region;
    let len = x.len();
    let mut input = x.to_vec();
    let mut out = vec![0xa5u8; len];
    let s = c
        .iscan_from(
            Region::Raw(out.as_mut_ptr(), len),
            Region::Raw(input.as_mut_ptr(), len),
            op(),
            exclusive,
        )
        .unwrap();
    run_sched(s);
    assert!(input == x, "iscan_from left the input alone, {what}");
    let mut buf = x.to_vec();
    let (ptr, n) = (buf.as_mut_ptr(), buf.len());
    let s = c
        .iscan_from(Region::Raw(ptr, n), Region::Raw(ptr, n), op(), exclusive)
        .unwrap();
    run_sched(s);
    (out, buf)
}

/// `iallreduce_from` and `ireduce` against the rank-order fold of every rank's
/// contribution: out of place (the input only read, checked unchanged), in place, and in
/// place with the same memory passed as input and output; every root.
fn nb_reduce_suite(c: &CollComm) {
    use oxmpi_coll::sched::{OwnedOp, Region};
    let p = c.size as usize;
    let r = c.rank as usize;
    type Kernel = fn(&[u8], &mut [u8]);
    let ops: [(&str, Kernel, bool); 2] = [("sum", sum_u32, true), ("affine", affine, false)];
    let mut it = 0u64;
    for len in [0usize, 8, 4096, 40_000] {
        for (name, f, commutative) in ops {
            let op = || OwnedOp {
                f: Box::new(f),
                elem_size: 8,
                commutative,
            };
            it += 1;
            let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(len, it, i, 3)).collect();
            let want = fold(&f, &xs);
            let what = format!("{name}, {len} bytes, rank {r} of {p}");
            // Out of place: raw input (the caller's memory), owned output.
            let mut input = xs[r].clone();
            let s = c
                .iallreduce_from(
                    Some(Region::Raw(input.as_mut_ptr(), len)),
                    Region::Owned(vec![0u8; len]),
                    op(),
                )
                .unwrap();
            let mut s = run_sched(s);
            assert_eq!(s.take_owned(0).unwrap(), want, "iallreduce_from {what}");
            assert_eq!(input, xs[r], "iallreduce_from left the input alone, {what}");
            // In place, and the same memory given as both.
            let s = c
                .iallreduce_from(None, Region::Owned(xs[r].clone()), op())
                .unwrap();
            assert_eq!(
                run_sched(s).take_owned(0).unwrap(),
                want,
                "iallreduce in place {what}"
            );
            let mut buf = xs[r].clone();
            let (ptr, n) = (buf.as_mut_ptr(), buf.len());
            let s = c
                .iallreduce_from(Some(Region::Raw(ptr, n)), Region::Raw(ptr, n), op())
                .unwrap();
            run_sched(s);
            assert_eq!(buf, want, "iallreduce aliased {what}");
            for root in 0..p {
                let mut input = xs[r].clone();
                let out = (r == root).then(|| Region::Owned(vec![0u8; len]));
                let s = c
                    .ireduce(Region::Raw(input.as_mut_ptr(), len), out, root as i32, op())
                    .unwrap();
                let mut s = run_sched(s);
                if r == root {
                    assert_eq!(s.take_owned(1).unwrap(), want, "ireduce root {root} {what}");
                }
                assert_eq!(
                    input, xs[r],
                    "ireduce left the input alone, root {root} {what}"
                );
                // In place at the root (input and output the same memory).
                let mut buf = xs[r].clone();
                let (ptr, n) = (buf.as_mut_ptr(), buf.len());
                let out = (r == root).then_some(Region::Raw(ptr, n));
                let s = c
                    .ireduce(Region::Raw(ptr, n), out, root as i32, op())
                    .unwrap();
                run_sched(s);
                if r == root {
                    assert_eq!(buf, want, "ireduce in place root {root} {what}");
                } else {
                    assert_eq!(buf, xs[r], "ireduce in place left a non-root alone {what}");
                }
            }
            // Scans: out of place (raw input, left alone) and in place (the same memory).
            for exclusive in [false, true] {
                let pre = if exclusive { &xs[..r] } else { &xs[..=r] };
                let scan_want = (!pre.is_empty()).then(|| fold(&f, pre));
                let what = format!("{what}, exclusive {exclusive}");
                let (out, buf) = iscan_both(c, &xs[r], &op, exclusive, &what);
                match &scan_want {
                    Some(w) => assert_eq!(&out, w, "iscan_from {what}"),
                    None => assert!(out.iter().all(|&x| x == 0xa5), "iexscan touched rank 0"),
                }
                match &scan_want {
                    Some(w) => assert_eq!(&buf, w, "iscan in place {what}"),
                    None => assert_eq!(buf, xs[r], "iexscan in place touched rank 0"),
                }
            }
            // Reduce-scatter with uneven blocks (some empty): out of place and in place
            // (our block lands at the start of our own input).
            let counts: Vec<usize> = (0..p).map(|i| ((len / 8 + 3 * i) % 7) * 8).collect();
            let total: usize = counts.iter().sum();
            let ys: Vec<Vec<u8>> = (0..p).map(|i| contrib(total, it, i, 4)).collect();
            let full = fold(&f, &ys);
            let off: usize = counts[..r].iter().sum();
            let mine = &full[off..off + counts[r]];
            let mut input = ys[r].clone();
            let s = c
                .ireduce_scatter_from(
                    Region::Raw(input.as_mut_ptr(), total),
                    Region::Owned(vec![0u8; counts[r]]),
                    &counts,
                    op(),
                )
                .unwrap();
            let mut s = run_sched(s);
            assert_eq!(
                s.take_owned(0).unwrap(),
                mine,
                "ireduce_scatter_from {what}"
            );
            assert_eq!(
                input, ys[r],
                "ireduce_scatter_from left the input alone, {what}"
            );
            let mut buf = ys[r].clone();
            let ptr = buf.as_mut_ptr();
            let s = c
                .ireduce_scatter_from(
                    Region::Raw(ptr, total),
                    Region::Raw(ptr, counts[r]),
                    &counts,
                    op(),
                )
                .unwrap();
            run_sched(s);
            assert_eq!(&buf[..counts[r]], mine, "ireduce_scatter in place {what}");
        }
    }
    assert!(!oxmpi_coll::nbc::progress::progress_pending(), "all done");
}

/// `(a, b, c) ∘ (a', b', c') = (a a', b a' + b', c ^ c')` on 12-byte elements of three
/// `u32`: associative, not commutative, and an element size that is no power of two.
fn affine_xor(a: &[u8], io: &mut [u8]) {
    for (x, y) in a.chunks_exact(12).zip(io.chunks_exact_mut(12)) {
        let mut t = [0u8; 8];
        t.copy_from_slice(&y[..8]);
        affine(&x[..8], &mut t);
        y[..8].copy_from_slice(&t);
        for i in 8..12 {
            y[i] ^= x[i];
        }
    }
}

fn sum_u8(a: &[u8], io: &mut [u8]) {
    for (x, y) in a.iter().zip(io.iter_mut()) {
        *y = y.wrapping_add(*x);
    }
}

/// Scan and exscan (blocking through the selection and `scan_into`, nonblocking through
/// `iscan_from`) and `iallreduce_from` of vectors around the thresholds of the chain scan
/// (`SCAN_CHAIN_MIN`), of its segments (`SCAN_SEGMENT`) and of Rabenseifner's schedule
/// (`ALLREDUCE_SMALL`), for element sizes 1, 4, 8 and 12, commutative and not, out of
/// place (the input checked unchanged), in place and with the same memory given twice,
/// against the rank-order fold; the algorithm counters must show the chain and
/// Rabenseifner's schedule exactly where the selection rules say.
fn large_reduce_suite(c: &CollComm) {
    use oxmpi_coll::base::stats::{runs, Alg};
    use oxmpi_coll::sched::{OwnedOp, Region};
    use oxmpi_coll::tune::{algorithm, ALLREDUCE_SMALL, SCAN_CHAIN_MIN, SCAN_SEGMENT};
    let p = c.size as usize;
    let r = c.rank as usize;
    type Kernel = fn(&[u8], &mut [u8]);
    let ops: [(&str, Kernel, usize, bool); 4] = [
        ("u8 sum", sum_u8, 1, true),
        ("u32 sum", sum_u32, 4, true),
        ("affine", affine, 8, false),
        ("affine-xor", affine_xor, 12, false),
    ];
    let forced_chain = algorithm(Coll::Scan) == 2;
    let forced_rab = algorithm(Coll::Allreduce) == 6;
    let mut it = 0u64;
    for target in [
        SCAN_CHAIN_MIN / 2,
        SCAN_CHAIN_MIN - 1,
        SCAN_CHAIN_MIN,
        SCAN_SEGMENT + 40,
        3 * SCAN_SEGMENT + SCAN_SEGMENT / 2 + 4,
    ] {
        for (name, f, es, commutative) in ops {
            let len = target / es * es;
            let op = || OwnedOp {
                f: Box::new(f),
                elem_size: es,
                commutative,
            };
            let bop = Op {
                f: &f,
                elem_size: es,
                commutative,
            };
            it += 1;
            let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(len, it, i, 9)).collect();
            let what = format!("{name}, {len} bytes, rank {r} of {p}");
            let chain = forced_chain || (p > 2 && len >= SCAN_CHAIN_MIN);
            let rab =
                commutative && len / es >= p && (forced_rab || (p > 2 && len > ALLREDUCE_SMALL));
            for exclusive in [false, true] {
                let pre = if exclusive { &xs[..r] } else { &xs[..=r] };
                let want = (!pre.is_empty()).then(|| fold(&f, pre));
                let what = format!("{what}, exclusive {exclusive}");
                let (alg, nb_alg) = match (chain, exclusive) {
                    (true, false) => (Alg::ScanChain, Alg::NbcScanChain),
                    (true, true) => (Alg::ExscanChain, Alg::NbcScanChain),
                    (false, false) => (Alg::ScanRecdbl, Alg::NbcScanRecdbl),
                    (false, true) => (Alg::ExscanRecdbl, Alg::NbcScanRecdbl),
                };
                let check = |got: &[u8], input: &[u8], how: &str| match &want {
                    Some(w) => assert!(got == &w[..], "{how} {what}"),
                    None => assert!(got == input, "{how} touched rank 0, {what}"),
                };
                // Blocking, through the selection and directly; out of place and in place.
                let (before, sm_before) = (runs(alg), runs(Alg::SmScan));
                let mut out = vec![0xa5u8; len];
                select::scan(c, Some(&xs[r]), &mut out, exclusive, &f, es, commutative).unwrap();
                check(&out, &vec![0xa5u8; len], "select::scan");
                let mut b = xs[r].clone();
                select::scan(c, None, &mut b, exclusive, &f, es, commutative).unwrap();
                check(&b, &xs[r], "select::scan in place");
                let mut out = vec![0xa5u8; len];
                c.scan_into(Some(&xs[r]), &mut out, exclusive, &bop)
                    .unwrap();
                check(&out, &vec![0xa5u8; len], "scan_into");
                // Vectors of at most the segment's size may take the shared-memory path,
                // larger ones its large region: each call ran one of the two.
                if len > oxmpi_coll::sm::DATA {
                    let ran = runs(alg) - before + runs(Alg::SmScan) - sm_before;
                    assert_eq!(ran, 3, "{alg:?} or the sm scan ran, {what}");
                    if len > oxmpi_coll::sm::REDUCE_BIG_MAX {
                        assert_eq!(runs(alg) - before, 3, "{alg:?} ran, {what}");
                    }
                }
                // Nonblocking: out of place (input left alone) and in place.
                let before = runs(nb_alg);
                let (out, buf) = iscan_both(c, &xs[r], &op, exclusive, &what);
                check(&out, &vec![0xa5u8; len], "iscan_from");
                check(&buf, &xs[r], "iscan in place");
                assert_eq!(runs(nb_alg) - before, 2, "{nb_alg:?} ran, {what}");
            }
            // Blocking allreduce through the selection (Rabenseifner's algorithm reads the
            // contribution where it is; ranks that yield when idle take the segment's
            // nonblocking large region up to its size instead), out of place and in place.
            let want = fold(&f, &xs);
            let (before, sm_before) = (runs(Alg::AllreduceRabenseifner), runs(Alg::SmAllreduce));
            let mut out = vec![0xa5u8; len];
            select::allreduce(c, Some(&xs[r]), &mut out, &f, es, commutative).unwrap();
            assert!(out == want, "select::allreduce {what}");
            let mut b = xs[r].clone();
            select::allreduce(c, None, &mut b, &f, es, commutative).unwrap();
            assert!(b == want, "select::allreduce in place {what}");
            let ran = runs(Alg::AllreduceRabenseifner) - before;
            match runs(Alg::SmAllreduce) - sm_before {
                0 => assert_eq!(ran, if rab { 2 } else { 0 }, "Rabenseifner, {what}"),
                sm => {
                    assert_eq!((sm, ran), (2, 0), "the sm allreduce ran, {what}");
                    assert!(len <= oxmpi_coll::sm::NB_LARGE_MAX, "sm allreduce, {what}");
                }
            }
            // Nonblocking allreduce: out of place, in place, aliased.
            let nb_alg = if rab {
                Alg::NbcAllreduceRabenseifner
            } else {
                Alg::NbcAllreduceRecdbl
            };
            let before = runs(nb_alg);
            let mut input = xs[r].clone();
            let s = c
                .iallreduce_from(
                    Some(Region::Raw(input.as_mut_ptr(), len)),
                    Region::Owned(vec![0u8; len]),
                    op(),
                )
                .unwrap();
            let mut s = run_sched(s);
            assert!(s.take_owned(0).unwrap() == want, "iallreduce_from {what}");
            assert_eq!(input, xs[r], "iallreduce_from left the input alone, {what}");
            let s = c
                .iallreduce_from(None, Region::Owned(xs[r].clone()), op())
                .unwrap();
            assert!(
                run_sched(s).take_owned(0).unwrap() == want,
                "iallreduce in place {what}"
            );
            let mut buf = xs[r].clone();
            let (ptr, n) = (buf.as_mut_ptr(), buf.len());
            let s = c
                .iallreduce_from(Some(Region::Raw(ptr, n)), Region::Raw(ptr, n), op())
                .unwrap();
            run_sched(s);
            assert!(buf == want, "iallreduce aliased {what}");
            assert_eq!(runs(nb_alg) - before, 3, "{nb_alg:?} ran, {what}");
        }
    }
    assert!(!oxmpi_coll::nbc::progress::progress_pending(), "all done");
}

/// Persistent collectives' schedules: planned once, restarted 1000 times over the caller's
/// memory whose contents change every round (results right each time), interleaved with a
/// planned barrier; no schedule is planned after the first round.
fn persistent_suite(c: &CollComm) {
    use oxmpi_coll::nbc::sched::planned;
    use oxmpi_coll::sched::{OwnedOp, Region};
    let p = c.size as usize;
    let r = c.rank as usize;
    let len = 64;
    let mut buf = vec![0u8; len];
    let op = OwnedOp {
        f: Box::new(sum_u32),
        elem_size: 4,
        commutative: true,
    };
    // The schedule reads and writes `buf` itself (a raw region), as for a contiguous MPI
    // buffer: refreshing the input is writing `buf` before each start.
    let mut all = Some(
        c.iallreduce(Region::Raw(buf.as_mut_ptr(), len), op)
            .unwrap(),
    );
    let mut bar = Some(c.ibarrier().unwrap());
    let plans = planned();
    let run = run_sched;
    for it in 0..1000u64 {
        let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(len, it, i, 7)).collect();
        buf.copy_from_slice(&xs[r]);
        let mut s = all.take().unwrap();
        if it > 0 {
            s.restart().unwrap();
        }
        all = Some(run(s));
        assert_eq!(buf, fold(&sum_u32, &xs), "persistent allreduce round {it}");
        let mut b = bar.take().unwrap();
        if it > 0 {
            b.restart().unwrap();
        }
        bar = Some(run(b));
    }
    assert_eq!(
        planned(),
        plans,
        "no schedule planned after the first round"
    );
}

/// Scatterv through `base::select` whose blocks take every way of the segment in one call
/// (posted after the root's table, read from the root's buffer by one cross-memory copy,
/// point to point), every root, the root overwriting its send buffer as soon as the call
/// returns: the root must not return before every rank that copies from its buffer has
/// done so, so every rank gets its block of this call, never the overwritten bytes.
fn scatterv_reuse(c: &CollComm) {
    let p = c.size as usize;
    let r = c.rank as usize;
    let one_copy = oxmpi_coll::sm::params::single_copy_max_for(p);
    assert!(one_copy > 16 * 1024, "single copies are on ({one_copy})");
    for it in 0..300u64 {
        let root = (it as usize / 3) % p;
        // Rank i's block: posted, by a cross-memory copy or point to point, by turns.
        let vc: Vec<usize> = (0..p)
            .map(|i| match (i + it as usize) % 3 {
                0 => 100 + i,
                1 => 16 * 1024 + i,
                _ => one_copy + 1 + i,
            })
            .collect();
        let vd = prefix(&vc, 5);
        let mut full = vec![0u8; vd[p - 1] + vc[p - 1]];
        let at_root = r == root;
        if at_root {
            for i in 0..p {
                full[vd[i]..vd[i] + vc[i]].copy_from_slice(&contrib(vc[i], it, i, 95));
            }
        }
        let (gc, gd): (&[usize], &[usize]) = if at_root { (&vc, &vd) } else { (&[], &[]) };
        let mut s = vec![0u8; vc[r]];
        select::scatterv(c, (&full, gc, gd), Some(&mut s[..]), root as i32).unwrap();
        // The root reuses its buffer right away (as a program may).
        full.fill(0xee);
        assert_eq!(
            s,
            contrib(vc[r], it, r, 95),
            "scatterv it {it} from {root}: block of {} bytes",
            vc[r]
        );
    }
    c.barrier().unwrap();
}

fn scatterv_invalid(c: &CollComm) {
    let p = c.size as usize;
    let r = c.rank as usize;
    assert!(
        oxmpi_coll::sm::get(c, Coll::Scatter).unwrap().is_some(),
        "scatterv runs on the segment"
    );
    for it in 0..3 * p {
        let root = it % p;
        let vc: Vec<usize> = (0..p).map(|i| 8 + i).collect();
        let vd = prefix(&vc, 3);
        let full = vec![7u8; vd[p - 1] + vc[p - 1]];
        let mut s = vec![0u8; vc[r]];
        if it % 2 == 0 {
            // One count short at the root.
            let (gc, gd): (&[usize], &[usize]) = if r == root {
                (&vc[..p - 1], &vd[..p - 1])
            } else {
                (&[], &[])
            };
            let got = select::scatterv(c, (&full, gc, gd), Some(&mut s[..]), root as i32);
            assert!(
                got.is_err(),
                "scatterv it {it} from {root}: invalid root arguments, rank {r} got {got:?}"
            );
        } else {
            let (gc, gd): (&[usize], &[usize]) = if r == root { (&vc, &vd) } else { (&[], &[]) };
            select::scatterv(c, (&full, gc, gd), Some(&mut s[..]), root as i32).unwrap();
            assert_eq!(s, vec![7u8; vc[r]], "scatterv it {it} from {root}");
        }
    }
    c.barrier().unwrap();
}

/// Scattervs through `base::select` whose other ranks' blocks take at most 48 bytes
/// together (all of them posted in the root's stamp line after one word of lengths) or a
/// few bytes more (a table of words, then the blocks), by turns at random, of unequal
/// lengths (some empty), every root, in place at the root or not, no barrier between the
/// calls and a reader now and then late by a millisecond, so the root runs up to 7
/// collectives ahead and rewrites each buffer every 8: a reader that took one format for
/// the other, read at the wrong offset or got a buffer rewritten too early would get other
/// bytes than its block of this call. Every call is checked to have run on the segment.
fn scatterv_compact(c: &CollComm) {
    // Up to 48 bytes for the others together, or up to 12 more.
    scatterv_draws(c, |rng| {
        48 + if rng.below(2) == 0 {
            0
        } else {
            1 + rng.below(12)
        }
    });
}

/// [`scatterv_compact`]'s calls with the other ranks' blocks taking 100 to 319 bytes
/// together: in the root's buffer after its table up to 256 bytes (more than a lane's
/// worth too), in its ring cell above, by turns at random: a reader that looked for its
/// block in the wrong place would get other bytes than its block of this call.
fn scatterv_ring_edge(c: &CollComm) {
    scatterv_draws(c, |rng| 100 + rng.below(220));
}

/// The calls of [`scatterv_compact`], the other ranks' blocks taking `budget(rng)` bytes
/// together.
fn scatterv_draws(c: &CollComm, budget: impl Fn(&mut Rng) -> usize) {
    use oxmpi_coll::base::stats::{runs, Alg};
    let p = c.size as usize;
    let r = c.rank as usize;
    // The same draws on every rank.
    let mut rng = Rng(0x5ca7_7e27);
    for it in 0..600u64 {
        let root = rng.below(p);
        let in_place = rng.below(2) == 0;
        let budget = budget(&mut rng);
        let mut vc = vec![0usize; p];
        let mut left = budget;
        for (i, v) in vc.iter_mut().enumerate() {
            let others_after = (i + 1..p).filter(|&j| j != root).count();
            *v = if i == root {
                1 + rng.below(20)
            } else if others_after == 0 {
                left
            } else {
                let n = rng.below(left.min(2 * budget / (p - 1).max(1)) + 1);
                left -= n;
                n
            };
        }
        let vd = prefix(&vc, 2);
        let full: Vec<u8> = if r == root {
            let mut f = vec![0u8; vd[p - 1] + vc[p - 1]];
            for i in 0..p {
                f[vd[i]..vd[i] + vc[i]].copy_from_slice(&contrib(vc[i], it, i, 27));
            }
            f
        } else {
            Vec::new()
        };
        if rng.below(8) == 0 && r == (root + 1) % p {
            std::thread::sleep(Duration::from_millis(1));
        }
        let (gc, gd): (&[usize], &[usize]) = if r == root { (&vc, &vd) } else { (&[], &[]) };
        let mut s = vec![0xeeu8; vc[r]];
        let before = runs(Alg::SmScatter);
        let recv = if r == root && in_place {
            None
        } else {
            Some(&mut s[..])
        };
        select::scatterv(c, (&full, gc, gd), recv, root as i32).unwrap();
        if !(r == root && in_place) {
            assert!(
                s == contrib(vc[r], it, r, 27),
                "scatterv {it} from {root} of {vc:?} (in place {in_place}): rank {r}"
            );
        }
        assert_eq!(
            runs(Alg::SmScatter) - before,
            1,
            "scatterv {it} on the segment"
        );
    }
    c.barrier().unwrap();
}

/// Rooted collectives and allgathers of more than a lane's worth ([`oxmpi_coll::sm::LANE_MAX`])
/// on the segment, whose posts go to the posting rank's ring cell of their collective
/// (`k mod RING_CELLS`): enough iterations to go round the ring several times, the root
/// moving, a few broadcasts back to back (their root runs ahead of the readers by up to
/// `NBUF - 1` collectives) and a reader now and then late by a millisecond, so that a cell
/// written again too early, or read at the wrong place, hands some rank other bytes. Every
/// call is checked to have run on the segment.
/// On 2 ranks, root 0: each case runs one collective (its data checked), then rank 1 comes
/// late to a barrier (rank 0 waits there) and both meet in a second one; rank 0 must have
/// asked for the next cell or buffer exactly once after a bcast, scatter, scatterv (ring
/// cells) and iscatterv (its nonblocking buffer) of at least `AHEAD_MIN` bytes, and never
/// after one byte less or after an allgather (both ranks write and read: demoting and
/// asking measured slower there); rank 1, which posts nothing rooted, never.
fn ask_ahead_suite(c: &CollComm) {
    use oxmpi_coll::sm::{self, SmKind, AHEAD_MIN, LANE_MAX};
    let r = c.rank as usize;
    assert_eq!(c.size, 2, "ask-ahead runs on 2 ranks");
    let seg = sm::get(c, Coll::Bcast).unwrap().expect("a segment");
    let case = |what: &str, run: &mut dyn FnMut(), asks: u64| {
        let before = seg.asks_ahead();
        run();
        if r == 1 {
            std::thread::sleep(Duration::from_millis(2));
        }
        select::barrier(c).unwrap();
        select::barrier(c).unwrap();
        let want = if r == 0 { asks } else { 0 };
        assert_eq!(seg.asks_ahead() - before, want, "{what}: asks on rank {r}");
    };
    let sizes = [AHEAD_MIN - 1, AHEAD_MIN, 4096, LANE_MAX + 1];
    for (it, n) in sizes.into_iter().enumerate() {
        let it = 500 + it as u64;
        let big = u64::from(n >= AHEAD_MIN);
        case(
            &format!("bcast {n}"),
            &mut || {
                let data = contrib(n, it, 0, 61);
                let mut buf = if r == 0 { data.clone() } else { vec![0u8; n] };
                select::bcast(c, &mut buf, 0).unwrap();
                assert!(buf == data, "bcast {n}: rank {r}");
            },
            big,
        );
        // Scatter: rank 1's block is all that is posted.
        case(
            &format!("scatter {n}"),
            &mut || {
                let send: Vec<u8> = if r == 0 {
                    (0..2).flat_map(|i| contrib(n, it, i, 62)).collect()
                } else {
                    Vec::new()
                };
                let mut got = vec![0u8; n];
                select::scatter(c, &send, Some(&mut got), n, 0).unwrap();
                assert!(got == contrib(n, it, r, 62), "scatter {n}: rank {r}");
            },
            big,
        );
        // Scatterv: rank 1's block in the ring cell, the root's own not posted.
        case(
            &format!("scatterv {n}"),
            &mut || {
                let xs: Vec<Vec<u8>> = (0..2).map(|i| contrib(n, it, i, 63)).collect();
                let full = xs.concat();
                let (counts, displs) = ([n, n], [0, n]);
                let (src, gc, gd): (&[u8], &[usize], &[usize]) = if r == 0 {
                    (&full, &counts, &displs)
                } else {
                    (&[], &[], &[])
                };
                let mut got = vec![0u8; n];
                select::scatterv(c, (src, gc, gd), Some(&mut got[..]), 0).unwrap();
                assert!(got == xs[r], "scatterv {n}: rank {r}");
            },
            big,
        );
        // Iscatterv: the root posts rank 1's block in its nonblocking buffer.
        case(
            &format!("iscatterv {n}"),
            &mut || {
                let xs: Vec<Vec<u8>> = (0..2).map(|i| contrib(n, it, i, 64)).collect();
                let kind = SmKind::Scatterv {
                    root: 0,
                    counts: vec![n, n],
                    displs: vec![0, n],
                    far: 0,
                };
                let mut src = if r == 0 { xs.concat() } else { Vec::new() };
                let mut got = vec![0u8; n];
                light_run(c, &seg, kind, (&mut src, &mut got)).unwrap();
                assert!(got == xs[r], "iscatterv {n}: rank {r}");
            },
            big,
        );
        // Allgather: every rank posts its block in its ring cell; nobody asks.
        case(
            &format!("allgather {n}"),
            &mut || {
                let own = contrib(n, it, r, 65);
                let mut all = vec![0u8; 2 * n];
                select::allgather(c, &mut all, n, Some(&own)).unwrap();
                for (i, got) in all.chunks_exact(n).enumerate() {
                    assert!(got == contrib(n, it, i, 65), "allgather {n}, block {i}");
                }
            },
            0,
        );
    }
}

fn ring_suite(c: &CollComm) {
    use oxmpi_coll::base::stats::{runs, Alg};
    use oxmpi_coll::sm::{DATA, LANE_MAX, RING_CELLS};
    let p = c.size as usize;
    let r = c.rank as usize;
    // The same draws on every rank.
    let mut rng = Rng(0x0071_26e5);
    let mut it = 0u64;
    while it < 3 * RING_CELLS {
        let root = rng.below(p);
        let n = [LANE_MAX + 1, 1024, 2000, DATA][rng.below(4)];
        if rng.below(8) == 0 && r == (root + 1) % p {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Broadcasts back to back: the root returns at once.
        for _ in 0..1 + rng.below(4) {
            it += 1;
            let data = contrib(n, it, root, 11);
            let mut buf = if r == root {
                data.clone()
            } else {
                vec![0u8; n]
            };
            let before = runs(Alg::SmBcast);
            select::bcast(c, &mut buf, root as i32).unwrap();
            assert!(buf == data, "bcast {it} of {n} from {root}: rank {r}");
            assert_eq!(runs(Alg::SmBcast) - before, 1, "bcast {it} on the segment");
        }
        // Scatter: the other ranks' blocks together at most `DATA` bytes.
        it += 1;
        let b = (n / p)
            .max(LANE_MAX / (p - 1).max(1) + 1)
            .min(DATA / (p - 1).max(1));
        let send: Vec<u8> = if r == root {
            (0..p).flat_map(|i| contrib(b, it, i, 12)).collect()
        } else {
            Vec::new()
        };
        let mut got = vec![0u8; b];
        let before = runs(Alg::SmScatter);
        select::scatter(c, &send, Some(&mut got), b, root as i32).unwrap();
        assert!(
            got == contrib(b, it, r, 12),
            "scatter {it} of {b} from {root}: rank {r}"
        );
        assert_eq!(
            runs(Alg::SmScatter) - before,
            1,
            "scatter {it} on the segment"
        );
        // Scatterv: blocks of different lengths, posted (in the ring cell when they take
        // more than a lane together, in the table's lines otherwise).
        it += 1;
        let small = rng.below(3) == 0;
        let vc: Vec<usize> = (0..p)
            .map(|i| {
                if small {
                    1 + i
                } else {
                    (n / p).min(3000 / p) + 5 * i
                }
            })
            .collect();
        let vd = prefix(&vc, 3);
        let full: Vec<u8> = if r == root {
            let mut f = vec![0u8; vd[p - 1] + vc[p - 1]];
            for i in 0..p {
                f[vd[i]..vd[i] + vc[i]].copy_from_slice(&contrib(vc[i], it, i, 13));
            }
            f
        } else {
            Vec::new()
        };
        let (gc, gd): (&[usize], &[usize]) = if r == root { (&vc, &vd) } else { (&[], &[]) };
        let mut s = vec![0u8; vc[r]];
        let before = runs(Alg::SmScatter);
        select::scatterv(c, (&full, gc, gd), Some(&mut s[..]), root as i32).unwrap();
        assert!(
            s == contrib(vc[r], it, r, 13),
            "scatterv {it} from {root}: rank {r}"
        );
        assert_eq!(
            runs(Alg::SmScatter) - before,
            1,
            "scatterv {it} on the segment"
        );
        // Allgather of blocks of `n` bytes.
        it += 1;
        let mut all = vec![0u8; p * n];
        all[r * n..(r + 1) * n].copy_from_slice(&contrib(n, it, r, 14));
        let before = runs(Alg::SmAllgather);
        select::allgather(c, &mut all, n, None).unwrap();
        for i in 0..p {
            assert!(
                all[i * n..(i + 1) * n] == contrib(n, it, i, 14),
                "allgather {it} of {n}: rank {r}, block of {i}"
            );
        }
        assert_eq!(
            runs(Alg::SmAllgather) - before,
            1,
            "allgather {it} on the segment"
        );
    }
    c.barrier().unwrap();
}

fn prefix(counts: &[usize], gap: usize) -> Vec<usize> {
    let mut o = 0;
    counts
        .iter()
        .map(|&c| {
            let d = o;
            o += c + gap;
            d
        })
        .collect()
}

fn comms(e: &'static Engine) {
    let w = CollComm::new(e, e.comm_world()).unwrap();
    let p = w.size;
    let r = w.rank;

    // Isolation: a user message with the tag the collectives use internally stays pending
    // across collectives and is received intact afterwards.
    let token = [r as u8; 3];
    let dest = (r + 1) % p;
    let src = (r + p - 1) % p;
    // SAFETY: `token` outlives the wait at the end of this block.
    let sreq = unsafe {
        e.isend(
            token.as_ptr(),
            3,
            dest,
            2,
            e.comm_world(),
            SendMode::Standard,
        )
    }
    .unwrap();
    w.barrier().unwrap();
    let mut b = vec![7u8; 100];
    w.bcast(&mut b, 0).unwrap();
    let mut got = [0u8; 3];
    // SAFETY: `got` outlives the wait.
    let rreq = unsafe { e.irecv(got.as_mut_ptr(), 3, src, 2, e.comm_world()) }.unwrap();
    let st = e.wait(rreq);
    assert_eq!(st.error, None);
    assert_eq!(got, [src as u8; 3]);
    assert_eq!(e.wait(sreq).error, None);

    // Sparse exchange: to the right with tag 1, to the left with tag 2 (left and right are
    // the same rank on 2 ranks: the tags keep them apart), plus PROC_NULL peers.
    {
        let right = (r + 1) % p;
        let left = (r + p - 1) % p;
        let to_r = vec![r as u8; 10];
        let to_l = vec![100 + r as u8; 3];
        let mut from_l = vec![0u8; 10];
        let mut from_r = vec![0u8; 3];
        let mut none = [0u8; 1];
        let got = w
            .exchange(
                &[
                    (right, 1, &to_r),
                    (left, 2, &to_l),
                    (oxmpi_engine::PROC_NULL, 1, &[]),
                ],
                &mut [
                    (left, 1, &mut from_l),
                    (right, 2, &mut from_r),
                    (oxmpi_engine::PROC_NULL, 1, &mut none),
                ],
            )
            .unwrap();
        assert_eq!(got, vec![10, 3, 0]);
        assert_eq!(from_l, vec![left as u8; 10]);
        assert_eq!(from_r, vec![100 + right as u8; 3]);
    }

    // dup: same group, new context; collectives work on it.
    let d = w.dup().unwrap();
    assert_ne!(e.comm_context(d).unwrap(), 0);
    let dc = CollComm::new(e, d).unwrap();
    assert_eq!((dc.rank, dc.size), (r, p));
    suite(&dc, 2);

    // split by parity, reverse order inside each half; odd ranks >= 3 opt out.
    let color = if r % 2 == 1 && r >= 3 {
        None
    } else {
        Some(r % 2)
    };
    let s = w.split(color, -r).unwrap();
    match (color, s) {
        (None, None) => {}
        (Some(col), Some(s)) => {
            let members: Vec<i32> = (0..p)
                .filter(|&i| i % 2 == col && !(i % 2 == 1 && i >= 3))
                .rev()
                .collect();
            assert_eq!(e.comm_group(s).unwrap(), members);
            let sc = CollComm::new(e, s).unwrap();
            assert_eq!(
                sc.rank as usize,
                members.iter().position(|&x| x == r).unwrap()
            );
            suite(&sc, 3);
            comm_free(e, s).unwrap();
        }
        other => panic!("split returned {other:?} for color {color:?}"),
    }

    // create over the first three ranks; create_group over ranks {p-1, 0}.
    let first: Vec<i32> = (0..p.min(3)).collect();
    let c3 = w.create(&first).unwrap();
    assert_eq!(c3.is_some(), r < 3);
    if let Some(c3) = c3 {
        let cc = CollComm::new(e, c3).unwrap();
        let mut x = (r as u32 + 1).to_le_bytes();
        cc.allreduce(
            &mut x,
            &Op {
                f: &sum_u32,
                elem_size: 4,
                commutative: true,
            },
        )
        .unwrap();
        let n = p.min(3) as u32;
        assert_eq!(u32::from_le_bytes(x), n * (n + 1) / 2);
        comm_free(e, c3).unwrap();
    }
    let pair = [p - 1, 0];
    if pair.contains(&r) {
        let g = w.create_group(&pair, 77).unwrap();
        let gc = CollComm::new(e, g).unwrap();
        assert_eq!(gc.size, 2);
        let mut v = if gc.rank == 0 {
            vec![9u8; 5]
        } else {
            vec![0; 5]
        };
        gc.bcast(&mut v, 0).unwrap();
        assert_eq!(v, vec![9u8; 5]);
        comm_free(e, g).unwrap();
    }
    w.barrier().unwrap();
    comm_free(e, d).unwrap();
}

/// Gathers and gathervs of blocks too large for a segment buffer on 2 ranks (both roots,
/// the root in place or not as it pleases, which the other rank cannot know: out of place
/// the other rank writes its block into the root's buffer, in place the root reads it),
/// back to back with no barrier between them. The other rank overwrites its block as soon
/// as its call returns, and the root checks its buffer as soon as its own returns: a rank
/// that returned before the other was done with its buffer (the root before the write, the
/// other rank before the read) shows as a wrong block. Gatherv blocks are unequal, in
/// either order in the root's buffer with gaps between them; the gaps and the buffer's tail
/// stay untouched. A 1 MiB + 1 gather goes point to point (the counter says which ran).
fn gather_pair_suite(c: &CollComm) {
    use oxmpi_coll::base::stats::{runs, Alg};
    use oxmpi_coll::sm;
    let me = c.rank as usize;
    // (Made here: every gather below takes it.)
    sm::get(c, Coll::Gather).unwrap().expect("a segment");
    let mut it = 0u64;
    for block in [
        sm::DATA + 1,
        sm::V_MAX + 1,
        (16 << 10) + 3,
        (32 << 10) + 1,
        64 << 10,
        1 << 20,
        (1 << 20) + 1,
    ] {
        for root in [0usize, 1, 1, 0] {
            let other = 1 - root;
            for rep in 0..3u64 {
                it += 1;
                // Both ranks know the root's choice here only to check it.
                let in_place = (it * 7 + rep) % 3 != 0;
                let how = format!("block {block}, root {root}, in place {in_place}, it {it}");
                let xs: Vec<Vec<u8>> = (0..2).map(|i| contrib(block, it, i, 80)).collect();
                // Gather.
                let before = runs(Alg::SmGather);
                if me == root {
                    let mut recv = vec![0xa5u8; 2 * block + 5];
                    if in_place {
                        recv[root * block..(root + 1) * block].copy_from_slice(&xs[root]);
                    }
                    let send = (!in_place).then_some(&xs[root][..]);
                    select::gather(c, send, &mut recv, block, root as i32).unwrap();
                    assert!(recv[..block] == xs[0], "gather {how}: block 0");
                    assert!(recv[block..2 * block] == xs[1], "gather {how}: block 1");
                    assert!(
                        recv[2 * block..].iter().all(|&b| b == 0xa5),
                        "gather {how}: tail"
                    );
                } else {
                    let mut send = xs[me].clone();
                    select::gather(c, Some(&send), &mut [], block, root as i32).unwrap();
                    send.fill(0xee);
                    std::hint::black_box(&send);
                }
                // (On the segment either way, as a gatherv: a larger block goes point to
                // point behind the segment's round.)
                let ran = runs(Alg::SmGather) - before;
                assert_eq!(ran, 1, "gather {how}: path");
                // Gatherv: the other rank's block is `block` bytes, the root's a different
                // length; the other's first or last, gaps of 3 bytes.
                let counts = {
                    let mut v = [0usize; 2];
                    v[other] = block;
                    v[root] = block / 3 + 7 * (rep as usize);
                    v
                };
                let first = if it % 2 == 0 { other } else { root };
                let mut displs = [0usize; 2];
                displs[first] = 3;
                displs[1 - first] = 3 + counts[first] + 3;
                let len = displs[1 - first] + counts[1 - first] + 3;
                let vs: Vec<Vec<u8>> = (0..2).map(|i| contrib(counts[i], it, i, 81)).collect();
                let before = runs(Alg::SmGather);
                if me == root {
                    let mut recv = vec![0xa5u8; len];
                    let own = displs[root]..displs[root] + counts[root];
                    if in_place {
                        recv[own].copy_from_slice(&vs[root]);
                    }
                    let send = (!in_place).then_some(&vs[root][..]);
                    select::gatherv(c, send, &mut recv, (&counts, &displs), root as i32).unwrap();
                    for i in 0..2 {
                        let (d, n) = (displs[i], counts[i]);
                        assert!(recv[d..d + n] == vs[i], "gatherv {how}: block {i}");
                    }
                    let gaps = [
                        0..3,
                        displs[first] + counts[first]..displs[1 - first],
                        len - 3..len,
                    ];
                    for g in gaps {
                        assert!(recv[g].iter().all(|&b| b == 0xa5), "gatherv {how}: gap");
                    }
                } else {
                    let mut send = vs[me].clone();
                    select::gatherv(c, Some(&send), &mut [], (&[], &[]), root as i32).unwrap();
                    send.fill(0xee);
                    std::hint::black_box(&send);
                }
                // (On the segment either way: a gatherv larger block goes point to point
                // behind the segment's round.)
                assert_eq!(runs(Alg::SmGather) - before, 1, "gatherv {how}: path");
            }
        }
    }
}

/// Broadcasts of 256 KiB to 1 MiB back to back (no barrier between them), the same
/// root several times in a row and then others, a rank that falls behind now and then
/// (the root may then be broadcasts ahead of it), and a large reduce (the same region,
/// every rank but the root writing its slot) every 16th: every rank gets every root's
/// data, every broadcast on the segment.
fn bcast_big_suite(c: &CollComm) {
    use oxmpi_coll::base::stats::{runs, Alg};
    let p = c.size as usize;
    let r = c.rank as usize;
    // The same draws on every rank.
    let mut rng = Rng(0x5eed);
    for it in 0..160u64 {
        let min = oxmpi_coll::sm::BCAST_BIG_MIN;
        let len = [min, min + 3, 300_007, 1 << 20][rng.below(4)];
        let root = if it % 8 < 6 {
            (it as usize / 8) % p
        } else {
            rng.below(p)
        };
        if rng.below(4) == 0 && r == (root + 1) % p {
            std::thread::sleep(Duration::from_millis(2));
        }
        let data = contrib(len, it, root, 3);
        let mut buf = if r == root {
            data.clone()
        } else {
            vec![0u8; len]
        };
        let before = runs(Alg::SmBcast);
        select::bcast(c, &mut buf, root as i32).unwrap();
        assert!(
            buf == data,
            "bcast {it} of {len} bytes from {root}: rank {r} got other bytes"
        );
        assert_eq!(runs(Alg::SmBcast) - before, 1, "bcast {it} on the segment");
        if it % 16 == 15 {
            let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(len, it, i, 4)).collect();
            let total = fold(&sum_u8, &xs);
            let mut out = vec![0u8; len];
            let to = (r == root).then_some(&mut out[..]);
            select::reduce(c, Some(&xs[r]), to, root as i32, &sum_u8, 1, true).unwrap();
            if r == root {
                assert!(out == total, "reduce {it} of {len} bytes to {root}");
            }
        }
    }
}

/// Gathervs where one rank's block and the root's count for it differ by one byte across
/// each bound between the paths: [`sm::V_MAX`] (posted / written by one cross-memory copy
/// or sent), the single-copy limit (32 KiB on 2 ranks: into [`sm::GATHER_PAIR`]) and 1 MiB
/// (out of it, point to point); every root, in place or not; the other ranks (on 3) send
/// what their counts say. A block longer than its count: the root fails with
/// `MPI_ERR_TRUNCATE`, and so does its rank unless the root takes the block point to point
/// (the send then completes with what the receive takes). A shorter block arrives (its
/// bytes, the rest of its room untouched). After each, a correct gatherv of every size
/// class shows the segment in order.
fn gatherv_mismatch_suite(c: &CollComm) {
    use oxmpi_coll::sm;
    use oxmpi_engine::ErrorClass;
    let (p, me) = (c.size as usize, c.rank as usize);
    let seg = sm::get(c, Coll::Gather).unwrap().expect("a segment");
    let one_copy = seg.single_copy_max();
    let pair = p == 2 && seg.cma_known();
    // Whether the root takes a block of its count `c` point to point.
    let by_p2p = |c: usize| c > sm::V_MAX.max(one_copy) && !(pair && sm::GATHER_PAIR.contains(&c));
    let mut it = 0u64;
    for bound in [sm::V_MAX, 32 << 10, 1 << 20] {
        for (count, len) in [(bound, bound + 1), (bound + 1, bound)] {
            for root in 0..p {
                for in_place in [false, true] {
                    it += 1;
                    let bad = (root + 1) % p;
                    let how = format!(
                        "count {count}, block {len}, root {root}, in place {in_place}, it {it}"
                    );
                    let counts: Vec<usize> =
                        (0..p).map(|i| if i == root { 5 } else { count }).collect();
                    let mut displs = vec![0usize; p];
                    for i in 1..p {
                        displs[i] = displs[i - 1] + counts[i - 1] + 3;
                    }
                    let total = displs[p - 1] + counts[p - 1] + 3;
                    let lens: Vec<usize> = (0..p)
                        .map(|i| if i == bad { len } else { counts[i] })
                        .collect();
                    let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(lens[i], it, i, 90)).collect();
                    let longer = len > count;
                    if me == root {
                        let mut recv = vec![0xa5u8; total];
                        if in_place {
                            recv[displs[me]..displs[me] + 5].copy_from_slice(&xs[me]);
                        }
                        let send = (!in_place).then_some(&xs[me][..]);
                        let r =
                            select::gatherv(c, send, &mut recv, (&counts, &displs), root as i32);
                        if longer {
                            let e = r.expect_err(&format!("gatherv {how}: root"));
                            assert_eq!(e.class(), ErrorClass::Truncate, "gatherv {how}: {e}");
                        } else {
                            r.unwrap_or_else(|e| panic!("gatherv {how}: root: {e}"));
                            for i in 0..p {
                                let d = displs[i];
                                assert!(recv[d..d + lens[i]] == xs[i], "gatherv {how}: block {i}");
                                assert!(
                                    recv[d + lens[i]..d + counts[i]].iter().all(|&b| b == 0xa5),
                                    "gatherv {how}: room after block {i}"
                                );
                            }
                        }
                    } else {
                        let r = select::gatherv(c, Some(&xs[me]), &mut [], (&[], &[]), root as i32);
                        match r {
                            Err(e) if me == bad && longer => {
                                assert_eq!(e.class(), ErrorClass::Truncate, "gatherv {how}: {e}")
                            }
                            Ok(()) if me == bad && longer => {
                                assert!(by_p2p(count), "gatherv {how}: rank {me} took no error")
                            }
                            r => r.unwrap_or_else(|e| panic!("gatherv {how}: rank {me}: {e}")),
                        }
                    }
                    gatherv_correct(c, it);
                }
            }
        }
    }
    scatterv_mismatch(c);
}

/// Scatterv with the root's count for one rank's block one byte off that rank's receive
/// buffer across the same bounds: the root's table decides for every rank, so none waits
/// in vain; a block longer than the receive buffer fails on its rank with
/// `MPI_ERR_TRUNCATE`, a shorter one arrives.
fn scatterv_mismatch(c: &CollComm) {
    let (p, me) = (c.size as usize, c.rank as usize);
    let mut it = 1000u64;
    for bound in [oxmpi_coll::sm::V_MAX, 32 << 10, 1 << 20] {
        for (count, len) in [(bound, bound + 1), (bound + 1, bound)] {
            for root in 0..p {
                it += 1;
                let bad = (root + 1) % p;
                let how = format!("count {count}, buffer {len}, root {root}, it {it}");
                let counts: Vec<usize> =
                    (0..p).map(|i| if i == root { 5 } else { count }).collect();
                let displs: Vec<usize> = (0..p).map(|i| counts[..i].iter().sum()).collect();
                let send = contrib(counts.iter().sum(), it, root, 92);
                if me == root {
                    let mut own = [0u8; 5];
                    select::scatterv(c, (&send, &counts, &displs), Some(&mut own), root as i32)
                        .unwrap_or_else(|e| panic!("scatterv {how}: root: {e}"));
                    assert!(
                        own[..] == send[displs[me]..displs[me] + 5],
                        "scatterv {how}: root"
                    );
                    gatherv_correct(c, it);
                    continue;
                }
                let room = if me == bad { len } else { count };
                let mut recv = vec![0xa5u8; room];
                let r = select::scatterv(c, (&[], &[], &[]), Some(&mut recv), root as i32);
                let want = &send[displs[me]..displs[me] + count];
                check_scatter_leaf(
                    &format!("scatterv {how}: rank {me}"),
                    r,
                    me == bad && count > len,
                    &recv,
                    want,
                );
                gatherv_correct(c, it);
            }
        }
    }
}

/// A scatter(v) leaf's outcome in the mismatch tests: `MPI_ERR_TRUNCATE` where the root
/// sends more than the leaf expects (`erroneous`), else its block (`want`) followed by the
/// untouched 0xa5 fill.
fn check_scatter_leaf(
    what: &str,
    r: oxmpi_coll::Result<()>,
    erroneous: bool,
    recv: &[u8],
    want: &[u8],
) {
    if erroneous {
        let e = r.expect_err(what);
        assert_eq!(e.class(), oxmpi_engine::ErrorClass::Truncate, "{what}: {e}");
    } else {
        r.unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(recv[..want.len()] == *want, "{what}: block");
        assert!(
            recv[want.len()..].iter().all(|&b| b == 0xa5),
            "{what}: room"
        );
    }
}

/// A correct gatherv to a rotating root with blocks of every size class (posted, one
/// cross-memory copy, and, on 2 ranks, the pair's), checked at the root.
fn gatherv_correct(c: &CollComm, it: u64) {
    let (p, me) = (c.size as usize, c.rank as usize);
    let root = it as usize % p;
    let sizes = [100usize, 8 << 10, 40 << 10];
    let counts: Vec<usize> = (0..p).map(|i| sizes[(i + it as usize) % 3]).collect();
    let displs: Vec<usize> = (0..p).map(|i| counts[..i].iter().sum()).collect();
    let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(counts[i], it, i, 91)).collect();
    if me == root {
        let mut recv = vec![0u8; counts.iter().sum()];
        select::gatherv(c, Some(&xs[me]), &mut recv, (&counts, &displs), root as i32).unwrap();
        for i in 0..p {
            assert!(
                recv[displs[i]..displs[i] + counts[i]] == xs[i],
                "correct gatherv after it {it}: block {i}"
            );
        }
    } else {
        select::gatherv(c, Some(&xs[me]), &mut [], (&[], &[]), root as i32).unwrap();
    }
}

/// Block sizes on both sides of which a rooted collective's path changes: empty, a compact
/// scatterv line, the lane, a buffer, a gatherv's posted block, one cross-memory copy, the
/// point-to-point rendezvous.
fn rooted_bounds() -> [usize; 7] {
    use oxmpi_coll::sm;
    [0, 48, sm::LANE_MAX, sm::DATA, sm::V_MAX, 32 << 10, 1 << 20]
}

/// See [`gather_scatter_mismatch_np2`]: for each bound, the root's block `count` and one
/// rank's (`bad`) `len` one byte apart either way, every root, in place and not.
fn gather_scatter_mismatch_suite(c: &CollComm) {
    use oxmpi_engine::ErrorClass;
    let (p, me) = (c.size as usize, c.rank as usize);
    let mut pairs: Vec<(usize, usize)> = rooted_bounds()
        .iter()
        .flat_map(|&b| [(b, b + 1), (b + 1, b)])
        .collect();
    // Far apart: a root on the segment's buffers against a rank whose block is larger than
    // a buffer (it waits for the root's post) and against one that goes point to point.
    pairs.extend([(100, 40000), (40000, 100), (1, 2 << 20), (2 << 20, 1)]);
    let mut it = 2000u64;
    for (count, len) in pairs {
        for root in 0..p {
            for in_place in [false, true] {
                it += 1;
                let bad = (root + 1) % p;
                let how = format!(
                    "count {count}, other {len}, root {root}, in place {in_place}, it {it}"
                );
                let lens: Vec<usize> = (0..p).map(|i| if i == bad { len } else { count }).collect();
                // Gather: rank `bad` sends `len` bytes where the root expects `count`.
                let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(lens[i], it, i, 93)).collect();
                if me == root {
                    let mut recv = vec![0xa5u8; p * count];
                    if in_place {
                        recv[me * count..(me + 1) * count].copy_from_slice(&xs[me]);
                    }
                    let send = (!in_place).then_some(&xs[me][..]);
                    let r = select::gather(c, send, &mut recv, count, root as i32);
                    if len > count {
                        let e = r.expect_err(&format!("gather {how}: root"));
                        assert_eq!(e.class(), ErrorClass::Truncate, "gather {how}: {e}");
                    } else {
                        r.unwrap_or_else(|e| panic!("gather {how}: root: {e}"));
                        for i in 0..p {
                            let d = i * count;
                            assert!(recv[d..d + lens[i]] == xs[i], "gather {how}: block {i}");
                            assert!(
                                recv[d + lens[i]..d + count].iter().all(|&b| b == 0xa5),
                                "gather {how}: room after block {i}"
                            );
                        }
                    }
                } else {
                    let r = select::gather(c, Some(&xs[me]), &mut [], lens[me], root as i32);
                    match r {
                        // The rank learns it from the root's post, or not at all when
                        // its block went point to point or was posted whole.
                        Err(e) if me == bad && len > count => {
                            assert_eq!(e.class(), ErrorClass::Truncate, "gather {how}: {e}")
                        }
                        r => r.unwrap_or_else(|e| panic!("gather {how}: rank {me}: {e}")),
                    }
                }
                gather_correct(c, it);
                // Scatter: the root's blocks are `count` bytes, rank `bad` has room
                // for `len`.
                let send = contrib(p * count, it, root, 94);
                if me == root {
                    let mut own = vec![0u8; count];
                    let recv = (!in_place).then_some(&mut own[..]);
                    select::scatter(c, &send, recv, count, root as i32)
                        .unwrap_or_else(|e| panic!("scatter {how}: root: {e}"));
                    if !in_place {
                        assert!(
                            own[..] == send[me * count..(me + 1) * count],
                            "scatter {how}"
                        );
                    }
                } else {
                    let mut recv = vec![0xa5u8; lens[me]];
                    let r = select::scatter(c, &[], Some(&mut recv), lens[me], root as i32);
                    let want = &send[me * count..(me + 1) * count];
                    check_scatter_leaf(
                        &format!("scatter {how}: rank {me}"),
                        r,
                        me == bad && count > len,
                        &recv,
                        want,
                    );
                }
                scatter_correct(c, it);
            }
        }
    }
}

/// See [`scatterv_root_short_np2`]: blocks posted, read by one cross-memory copy, sent
/// point to point, every root.
fn scatterv_root_short_suite(c: &CollComm) {
    use oxmpi_coll::sm;
    let (p, me) = (c.size as usize, c.rank as usize);
    let seg = sm::get(c, Coll::Scatter).unwrap().expect("a segment");
    let big = (seg.single_copy_max() + 1).max(64 << 10);
    let mut it = 7500u64;
    for b in [100usize, 20000, big] {
        for root in 0..p {
            it += 1;
            let how = format!("block {b}, root {root}");
            let send = contrib(p * b, it, root, 100);
            if me == root {
                let counts = vec![b; p];
                let displs: Vec<usize> = (0..p).map(|i| i * b).collect();
                let mut own = vec![0u8; b - 1];
                let e = select::scatterv(c, (&send, &counts, &displs), Some(&mut own), root as i32)
                    .expect_err(&how);
                assert_eq!(e.class(), oxmpi_engine::ErrorClass::Truncate, "{how}: {e}");
            } else {
                let mut recv = vec![0u8; b];
                select::scatterv(c, (&[], &[], &[]), Some(&mut recv), root as i32)
                    .unwrap_or_else(|e| panic!("{how}: rank {me}: {e}"));
                assert!(recv[..] == send[me * b..(me + 1) * b], "{how}: rank {me}");
            }
            scatter_correct(c, it);
        }
    }
}

/// See [`scatter_ahead_np2`].
fn scatter_ahead_suite(c: &CollComm) {
    use oxmpi_coll::sm;
    let (p, me) = (c.size as usize, c.rank as usize);
    let seg = sm::get(c, Coll::Scatter).unwrap().expect("a segment");
    let big = (seg.single_copy_max() + 1).max(64 << 10);
    assert!(seg.scatter_p2p(big), "{big} bytes go point to point");
    let mut it = 7000u64;
    // Lane, ring cell (2 ranks) or table, table (posted, then one cross-memory copy on 3).
    for small in [1usize, 100, 3000, 4100] {
        assert!(!seg.scatter_p2p(small));
        for root in 0..p {
            for _ in 0..3 {
                it += 1;
                let how = format!("root {root}, {small} against {big}, it {it}");
                if me != root {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let send = contrib(p * small, it, root, 98);
                if me == root {
                    let mut own = vec![0u8; small];
                    select::scatter(c, &send, Some(&mut own), small, root as i32)
                        .unwrap_or_else(|e| panic!("erroneous scatter {how}: root: {e}"));
                } else {
                    let mut recv = vec![0xa5u8; big];
                    let r = select::scatter(c, &[], Some(&mut recv), big, root as i32);
                    let want = &send[me * small..(me + 1) * small];
                    check_scatter_leaf(&format!("erroneous scatter {how}"), r, false, &recv, want);
                }
                let send = contrib(p * big, it, root, 99);
                let mut recv = vec![0u8; big];
                let s: &[u8] = if me == root { &send } else { &[] };
                select::scatter(c, s, Some(&mut recv), big, root as i32)
                    .unwrap_or_else(|e| panic!("scatter after {how}: rank {me}: {e}"));
                assert!(
                    recv[..] == send[me * big..(me + 1) * big],
                    "scatter after {how}: rank {me}"
                );
            }
        }
    }
}

/// A correct gather to a rotating root with a block size that cycles through the paths,
/// checked at the root.
fn gather_correct(c: &CollComm, it: u64) {
    let (p, me) = (c.size as usize, c.rank as usize);
    let root = it as usize % p;
    let b = [3usize, 1000, 8 << 10, 40 << 10][it as usize % 4];
    let xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(b, it, i, 95)).collect();
    if me == root {
        let mut recv = vec![0u8; p * b];
        select::gather(c, Some(&xs[me]), &mut recv, b, root as i32).unwrap();
        for i in 0..p {
            assert!(
                recv[i * b..(i + 1) * b] == xs[i],
                "correct gather after it {it}: {i}"
            );
        }
    } else {
        select::gather(c, Some(&xs[me]), &mut [], b, root as i32).unwrap();
    }
}

/// A correct scatter from a rotating root (see [`gather_correct`]), checked everywhere.
fn scatter_correct(c: &CollComm, it: u64) {
    let (p, me) = (c.size as usize, c.rank as usize);
    let root = it as usize % p;
    let b = [3usize, 1000, 8 << 10, 40 << 10][(it as usize + 1) % 4];
    let send = contrib(p * b, it, root, 96);
    let mut recv = vec![0u8; b];
    let s: &[u8] = if me == root { &send } else { &[] };
    select::scatter(c, s, Some(&mut recv), b, root as i32).unwrap();
    assert!(
        recv[..] == send[me * b..(me + 1) * b],
        "correct scatter after it {it}"
    );
}

/// See [`bcast_mismatch_np2`]: pairs of the root's length and one rank's (`bad`), every root.
fn bcast_mismatch_suite(c: &CollComm) {
    use oxmpi_coll::sm;
    let (p, me) = (c.size as usize, c.rank as usize);
    let seg = sm::get(c, Coll::Bcast).unwrap().expect("a segment");
    let one_copy = seg.single_copy_max();
    let mut bounds = vec![
        0,
        56,
        sm::LANE_MAX,
        sm::DATA,
        32 << 10,
        sm::BCAST_BIG_MIN,
        1 << 20,
    ];
    if one_copy > 0 && !bounds.contains(&one_copy) {
        bounds.push(one_copy);
    }
    let mut pairs: Vec<(usize, usize)> = bounds
        .iter()
        .flat_map(|&b| [(b, b + 1), (b + 1, b)])
        .collect();
    // Seen hanging or returning without the data before the lengths were checked.
    pairs.extend([
        (50, 200),
        (50, 100),
        (200, 50),
        (40000, 30000),
        (4096, 4097),
    ]);
    let mut it = 5000u64;
    for &(theirs, len) in &pairs {
        for root in 0..p {
            it += 1;
            let bad = (root + 1) % p;
            let how = format!("root {root} sends {theirs}, rank {bad} expects {len}, it {it}");
            let data = contrib(theirs, it, root, 97);
            let mine = if me == bad { len } else { theirs };
            let mut buf = if me == root {
                data.clone()
            } else {
                vec![0xa5u8; mine]
            };
            let r = select::bcast(c, &mut buf, root as i32);
            if me == bad {
                expect_length_error(r, theirs, len, &how, me);
                assert!(
                    buf.iter().all(|&b| b == 0xa5),
                    "bcast {how}: buffer touched"
                );
            } else {
                r.unwrap_or_else(|e| panic!("bcast {how}: rank {me}: {e}"));
                assert!(buf == data, "bcast {how}: rank {me}'s data");
            }
            bcast_correct(c, it);
        }
    }
}

/// See [`ibcast_drain_np2`]: pairs of the root's length and a child's (`bad`, a child of
/// the root in the binomial tree), each rank on the segment's path of its own length as
/// the C library picks it (`rooted_seg`), every root, late child, late root or neither.
fn ibcast_drain_suite(e: &'static Engine, c: &CollComm) {
    use oxmpi_coll::sched::{Region, Schedule};
    use oxmpi_coll::sm::{self, Rooted, SmKind};
    let (p, me) = (c.size as usize, c.rank as usize);
    let seg = sm::get(c, Coll::Bcast).unwrap().expect("a segment");
    let one_copy = seg.single_copy_max();
    let path = |len: usize, root: usize| {
        if len <= sm::DATA {
            SmKind::Bcast { root }
        } else if len <= one_copy {
            SmKind::Single {
                root,
                block: len,
                coll: Rooted::Bcast,
            }
        } else {
            SmKind::BcastMsg { root }
        }
    };
    // The shortest length by message, a rendezvous one, and one far above.
    let msg = one_copy.max(sm::DATA) + 1;
    let mut pairs = vec![(msg, sm::DATA), (msg, 0), (msg, 100), (300 << 10, 1)];
    pairs.push((sm::DATA, msg));
    if one_copy > sm::DATA {
        pairs.extend([(msg, one_copy), (msg, sm::DATA + 1), (one_copy, msg)]);
    } else {
        pairs.extend([(9000, sm::DATA), (9000, 50)]);
    }
    let mut it = 7000u64;
    for &(theirs, len) in &pairs {
        for root in 0..p {
            for late in ["child", "root", "none"] {
                it += 1;
                let bad = (root + 1) % p;
                let how = format!(
                    "root {root} sends {theirs}, rank {bad} expects {len}, {late} late, it {it}"
                );
                let data = contrib(theirs, it, root, 91);
                let mine = if me == bad { len } else { theirs };
                let (mut inp, mut out) = if me == root {
                    (data.clone(), Vec::new())
                } else {
                    (Vec::new(), vec![0xa5u8; mine])
                };
                let kind = path(mine, root);
                if (late == "child" && me == bad) || (late == "root" && me == root) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                let seg = sm::existing(c).expect("the segment exists");
                let r = if matches!(kind, SmKind::BcastMsg { .. }) {
                    let input = Region::Raw(inp.as_mut_ptr(), inp.len());
                    let output = Region::Raw(out.as_mut_ptr(), out.len());
                    // The regions outlive the schedule, which ends before they are read.
                    let mut s = Schedule::shared(c, seg, kind, input, output, None);
                    loop {
                        if let Some(res) = s.progress() {
                            break res;
                        }
                        std::thread::yield_now();
                    }
                } else {
                    light_run(c, &seg, kind, (&mut inp, &mut out))
                };
                if me == bad {
                    expect_length_error(r, theirs, len, &how, me);
                    assert!(
                        out.iter().all(|&b| b == 0xa5),
                        "ibcast {how}: buffer touched"
                    );
                } else {
                    r.unwrap_or_else(|e| panic!("ibcast {how}: rank {me}: {e}"));
                    if me != root {
                        assert!(out == data, "ibcast {how}: rank {me}'s data");
                    }
                }
                // Every message sent has arrived by now (an eager one before its send
                // ended, which the barrier follows): none may be left.
                select::barrier(c).unwrap();
                let left = e
                    .iprobe(oxmpi_engine::ANY_SOURCE, oxmpi_engine::ANY_TAG, c.traffic())
                    .unwrap();
                assert!(
                    left.is_none(),
                    "ibcast {how}: rank {me} has a message left: {left:?}"
                );
                select::barrier(c).unwrap();
            }
        }
    }
}

/// See [`bcast_mismatch_p2p_np2`]: `bcast_mismatch_suite`'s pairs around the point-to-point
/// bounds, for each forced algorithm (set in the registry on every rank alike).
fn bcast_mismatch_p2p_suite(c: &CollComm) {
    use oxmpi_coll::tune::{self, BCAST_SEGMENT, BCAST_SMALL};
    use oxmpi_engine::ErrorClass;
    let (p, me) = (c.size as usize, c.rank as usize);
    assert!(oxmpi_coll::sm::get(c, Coll::Bcast).unwrap().is_none());
    let bounds = [0, 1, 4096, BCAST_SEGMENT, BCAST_SMALL];
    let mut pairs: Vec<(usize, usize)> = bounds
        .iter()
        .flat_map(|&b| [(b, b + 1), (b + 1, b)])
        .collect();
    pairs.extend([
        (50, 200),
        (200, 50),
        (0, 100),
        (100, 0),
        (40, BCAST_SMALL + 40),
    ]);
    let mut it = 6000u64;
    for forced in ["0", "1", "3", "6", "8"] {
        let _ = tune::algorithm(Coll::Bcast);
        oxmpi_base::params::global()
            .unwrap()
            .set("coll_tuned_bcast_algorithm", forced)
            .unwrap();
        tune::reload();
        assert_eq!(tune::algorithm(Coll::Bcast).to_string(), forced);
        for &(theirs, len) in &pairs {
            for root in 0..p {
                it += 1;
                let rel = |r: usize| (r + p - root) % p;
                // A leaf or (from 4 ranks) an inner rank of the binomial tree.
                let bad = (root + 1 + it as usize % (p - 1)) % p;
                let how = format!(
                    "algorithm {forced}: root {root} sends {theirs}, rank {bad} expects {len}, it {it}"
                );
                let data = contrib(theirs, it, root, 95);
                let mut buf = if me == root {
                    data.clone()
                } else {
                    vec![0xa5u8; if me == bad { len } else { theirs }]
                };
                let r = select::bcast(c, &mut buf, root as i32);
                // The data travels as it is (no marker) down the binomial tree, where a
                // rank below a too short buffer cannot get it.
                let data_first = theirs > 0
                    && match forced {
                        "1" | "6" => true,
                        "0" => p <= 2 || theirs <= BCAST_SMALL || theirs < p,
                        _ => false,
                    };
                let (b, m) = (rel(bad), rel(me));
                let below_bad = forced != "1" && b != 0 && m > b && m < b + (b & b.wrapping_neg());
                if me == bad {
                    expect_length_error(r, theirs, len, &how, me);
                } else if below_bad && data_first && theirs > len {
                    let e = r.expect_err(&format!("bcast {how}: rank {me} took no error"));
                    assert!(
                        matches!(e.class(), ErrorClass::Truncate | ErrorClass::Other),
                        "bcast {how}: rank {me}: {e}"
                    );
                } else {
                    r.unwrap_or_else(|e| panic!("bcast {how}: rank {me}: {e}"));
                    assert!(buf == data, "bcast {how}: rank {me}'s data");
                }
                bcast_correct(c, it);
            }
        }
    }
}

/// A correct broadcast from a rotating root with a length that cycles through the paths,
/// checked everywhere.
fn bcast_correct(c: &CollComm, it: u64) {
    let (p, me) = (c.size as usize, c.rank as usize);
    let root = it as usize % p;
    let n = [3usize, 100, 1000, 40000, 300 << 10, 0][it as usize % 6];
    let data = contrib(n, it, root, 98);
    let mut buf = if me == root {
        data.clone()
    } else {
        vec![0u8; n]
    };
    select::bcast(c, &mut buf, root as i32).unwrap();
    assert!(buf == data, "correct bcast after it {it}");
}

/// See [`igatherv_mismatch_np3`]: the nonblocking gatherv and scatterv on the segment
/// ([`oxmpi_coll::sm::SmKind::Gatherv`], `Scatterv`) with the root's count for rank `bad`
/// one byte off its block, across the bounds where no block moves by message.
fn igatherv_mismatch_suite(c: &CollComm) {
    use oxmpi_coll::sm::{self, SmKind};
    use oxmpi_engine::ErrorClass;
    let (p, me) = (c.size as usize, c.rank as usize);
    // Made by a blocking collective first (the nonblocking ones never make it).
    select::barrier(c).unwrap();
    let seg = sm::existing(c).expect("a segment");
    let one_copy = seg.single_copy_max();
    // The segment's single-copy bound, then none (every block above the segment's by
    // message): each side of the message bound too.
    let mut cases: Vec<(usize, usize)> = [0, 48, sm::LANE_MAX, sm::DATA, sm::V_MAX]
        .iter()
        .map(|&b| (b, one_copy))
        .collect();
    if one_copy > 0 {
        cases.extend([(one_copy, one_copy), (sm::V_MAX, 0)]);
        // The 2-rank nonblocking gathers' bound (`IGATHER_PAIR_SINGLE` in the C API).
        cases.push((64 << 10, 64 << 10));
    }
    let mut it = 7000u64;
    for (bound, far) in cases {
        for (count, len) in [(bound, bound + 1), (bound + 1, bound)] {
            for root in 0..p {
                it += 1;
                let bad = (root + 1) % p;
                let how = format!("count {count}, block {len}, far {far}, root {root}, it {it}");
                let counts: Vec<usize> =
                    (0..p).map(|i| if i == root { 5 } else { count }).collect();
                let displs: Vec<usize> = (0..p).map(|i| i * (count + 5)).collect();
                let total = p * (count + 5);
                let lens: Vec<usize> = (0..p)
                    .map(|i| if i == bad { len } else { counts[i] })
                    .collect();
                let mut xs: Vec<Vec<u8>> = (0..p).map(|i| contrib(lens[i], it, i, 99)).collect();
                let (rc, rd) = if me == root {
                    (counts.clone(), displs.clone())
                } else {
                    (Vec::new(), Vec::new())
                };
                // Gatherv: the root fails when rank `bad`'s block is longer than its count.
                let kind = SmKind::Gatherv {
                    root,
                    counts: rc.clone(),
                    displs: rd.clone(),
                    far,
                };
                let mut g = vec![0xa5u8; if me == root { total } else { 0 }];
                let r = shared_run(c, &seg, kind, (&mut xs[me], &mut g));
                if me == root && len > count {
                    match r {
                        Err(e) => {
                            assert_eq!(e.class(), ErrorClass::Truncate, "igatherv {how}: {e}")
                        }
                        // An empty count: the block is not looked at (no hang, no error).
                        Ok(()) if count == 0 => {}
                        Ok(()) => panic!("igatherv {how}: the root took no error"),
                    }
                } else if me == bad && len > count {
                    if let Err(e) = r {
                        assert_eq!(e.class(), ErrorClass::Truncate, "igatherv {how}: {e}");
                    }
                } else {
                    r.unwrap_or_else(|e| panic!("igatherv {how}: rank {me}: {e}"));
                    if me == root {
                        for i in 0..p {
                            let d = displs[i];
                            assert!(g[d..d + lens[i]] == xs[i], "igatherv {how}: block {i}");
                        }
                    }
                }
                // Scatterv: rank `bad` has room for `len` bytes where the root sends `count`.
                let kind = SmKind::Scatterv {
                    root,
                    counts: rc,
                    displs: rd,
                    far,
                };
                let mut src = if me == root {
                    contrib(total, it, root, 100)
                } else {
                    Vec::new()
                };
                let want = src.clone();
                let mut got = vec![0xa5u8; lens[me]];
                let r = shared_run(c, &seg, kind, (&mut src, &mut got));
                if me == bad && count > len {
                    match r {
                        Err(e) => {
                            assert_eq!(e.class(), ErrorClass::Truncate, "iscatterv {how}: {e}")
                        }
                        Ok(()) => panic!("iscatterv {how}: rank {me} took no error"),
                    }
                } else if me == bad {
                    // A shorter block than the receive count: the nonblocking scatterv
                    // fails it too (its length differs), or delivers it.
                    if let Err(e) = r {
                        assert_eq!(e.class(), ErrorClass::Truncate, "iscatterv {how}: {e}");
                    }
                } else {
                    r.unwrap_or_else(|e| panic!("iscatterv {how}: rank {me}: {e}"));
                    if me == root {
                        assert!(
                            got[..5] == want[displs[me]..displs[me] + 5],
                            "iscatterv {how}"
                        );
                    }
                }
                gatherv_correct(c, it);
            }
        }
    }
}

/// Checks that none of the last ten calls' receive buffers in `kept` changed since their
/// call returned (a late write by a peer), then keeps call `it`'s buffer `buf` (rank `r`).
fn keep_checking(
    kept: &mut std::collections::VecDeque<(u64, Vec<u8>, Vec<u8>)>,
    it: u64,
    buf: Vec<u8>,
    r: usize,
) {
    for (old, b, copy) in kept.iter() {
        assert!(
            b == copy,
            "call {it}: the receive buffer of call {old} on rank {r} changed later"
        );
    }
    let copy = buf.clone();
    kept.push_back((it, buf, copy));
    if kept.len() > 10 {
        kept.pop_front();
    }
}

/// The error a bcast receiver whose length `len` differs from the root's `theirs` must
/// get: `MPI_ERR_TRUNCATE` when the root sends more, `MPI_ERR_COUNT` when it sends less.
fn expect_length_error<T: std::fmt::Debug>(
    r: oxmpi_coll::Result<T>,
    theirs: usize,
    len: usize,
    how: &str,
    me: usize,
) {
    let e = r.expect_err(&format!("bcast {how}: rank {me} took no error"));
    let class = if theirs > len {
        oxmpi_engine::ErrorClass::Truncate
    } else {
        oxmpi_engine::ErrorClass::Count
    };
    assert_eq!(e.class(), class, "bcast {how}: {e}");
}

/// Each rank pins itself to one CPU before it starts: `block` (the first half of the ranks
/// on the first CPU it may run on, the rest on the second, as `pin` of the benchmarks
/// places them), `cyclic` (even ranks on the first, odd ones on the second) or `one`
/// (every rank on the first).
const PIN: &str = "OXMPI_COLL_TEST_PIN";

/// The CPUs this process may run on (below 1024).
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed `cpu_set_t` is a valid empty set; sched_getaffinity writes at most
    // its size; pid 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(
            libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set),
            0
        );
        (0..1024).filter(|&c| libc::CPU_ISSET(c, &set)).collect()
    }
}

/// The CPU rank `r` of `p` is pinned to by [`PIN`] `how` (an index into [`allowed_cpus`]).
fn pin_slot(how: &str, r: usize, p: usize, cpus: usize) -> usize {
    match how {
        "block" if cpus > 1 => usize::from(r >= p / 2),
        "cyclic" if cpus > 1 => r % 2,
        _ => 0,
    }
}

/// How many CPUs this process could run on before [`pin_self`] pinned it (0: not pinned).
static UNPINNED_CPUS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Pin this rank ([`PIN`]).
fn pin_self(how: &str) {
    let r: usize = std::env::var("OXMPI_ENGINE_RANK").unwrap().parse().unwrap();
    let p: usize = std::env::var("OXMPI_ENGINE_SIZE").unwrap().parse().unwrap();
    let cpus = allowed_cpus();
    UNPINNED_CPUS.store(cpus.len(), Ordering::Relaxed);
    let cpu = cpus[pin_slot(how, r, p, cpus.len())];
    // SAFETY: as in `allowed_cpus`; the set names one CPU we may run on.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(
            libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set),
            0
        );
    }
}

/// Small nonblocking rooted collectives (gather, gatherv, scatter, scatterv, bcast) as light
/// requests, every root, one rank late per round (it sleeps 30 ms before it posts): each
/// waiter records whether its request ever said that it waited for ranks pinned to another
/// CPU alone (`light::remote_only`, which lets `MPI_Wait` look again instead of yielding).
/// Pinned (`pinned`, [`PIN`] `block`): a gather's root whose late rank is on the other CPU
/// says so, and so does a scatter's (bcast's) reader whose root is late there; a waiter that
/// still waits for a rank of its own CPU (the late one, or the root) never does, nor does a
/// rank that waits for nobody. Not pinned: never. The results match the references.
fn remote_waits_suite(c: &CollComm, pinned: bool) {
    use oxmpi_coll::nbc::light;
    use oxmpi_coll::sched::Region;
    use oxmpi_coll::sm::SmKind;
    let (p, me) = (c.size as usize, c.rank as usize);
    let seg = oxmpi_coll::sm::get(c, Coll::Allreduce).unwrap();
    assert!(seg.is_some(), "the segment exists");
    let cpus = UNPINNED_CPUS.load(Ordering::Relaxed);
    // Whether ranks `a` and `b` are pinned to different CPUs, each with at most 2 of
    // the ranks (with more, nobody waits without yielding).
    let slot = |r: usize| pin_slot("block", r, p, cpus);
    let roomy = |c: usize| (0..p).filter(|&r| slot(r) == c).count() <= 2;
    let apart =
        |a: usize, b: usize| pinned && slot(a) != slot(b) && roomy(slot(a)) && roomy(slot(b));
    let mut seen_true = 0;
    for it in 0..(5 * p * p) as u64 {
        let what = (it as usize) % 5;
        let root = (it as usize / 5) % p;
        let late = (it as usize / (5 * p)) % p;
        let block = 1 + (it as usize * 7) % 40;
        let xs: Vec<Vec<u8>> = (0..p).map(|r| contrib(block, it, r, 30)).collect();
        let all = contrib(block * p, it, root, 31);
        let at_root = me == root;
        let seg = oxmpi_coll::sm::existing(c).expect("the segment exists");
        let counts = vec![block; p];
        let displs: Vec<usize> = (0..p).map(|r| r * block).collect();
        let (kind, inp, out_len, want) = match what {
            0 | 1 => {
                let kind = if what == 0 {
                    SmKind::Gather { root, block }
                } else {
                    SmKind::Gatherv {
                        root,
                        counts: if at_root { counts.clone() } else { Vec::new() },
                        displs: if at_root { displs.clone() } else { Vec::new() },
                        far: seg.single_copy_max(),
                    }
                };
                let want = if at_root { xs.concat() } else { Vec::new() };
                (kind, xs[me].clone(), want.len(), want)
            }
            2 | 3 => {
                let kind = if what == 2 {
                    SmKind::Scatter { root, block }
                } else {
                    SmKind::Scatterv {
                        root,
                        counts: if at_root { counts.clone() } else { Vec::new() },
                        displs: if at_root { displs.clone() } else { Vec::new() },
                        far: seg.single_copy_max(),
                    }
                };
                let inp = if at_root { all.clone() } else { Vec::new() };
                (kind, inp, block, all[me * block..(me + 1) * block].to_vec())
            }
            _ => {
                let inp = if at_root {
                    xs[root].clone()
                } else {
                    Vec::new()
                };
                let out = if at_root { 0 } else { block };
                let want = if at_root {
                    Vec::new()
                } else {
                    xs[root].clone()
                };
                (SmKind::Bcast { root }, inp, out, want)
            }
        };
        let name = format!("{kind:?} (round {it}, late {late}, rank {me})");
        let mut inp = inp;
        let mut out = vec![0u8; out_len];
        c.barrier().unwrap();
        if me == late {
            std::thread::sleep(std::time::Duration::from_millis(30));
        }
        let input = Region::Raw(inp.as_mut_ptr(), inp.len());
        let output = Region::Raw(out.as_mut_ptr(), out.len());
        let i = light::claim().expect("a free slot");
        // SAFETY: `inp` and `out` live until the request ended (waited for below).
        let ended = unsafe { light::start(i, c, (seg, kind), (input, output), None, 0) };
        let mut said = false;
        if ended.is_none() {
            loop {
                if let Some(r) = light::test(i) {
                    r.unwrap();
                    break;
                }
                said |= light::remote_only(i);
                std::thread::yield_now();
            }
        }
        assert_eq!(out, want, "{name}: result");
        let gather = what < 2;
        // A gather's root waits for every other rank, a scatter's (bcast's) reader for the
        // root; nobody else waits.
        let waiter = if gather { at_root } else { !at_root };
        // The rank it waits for longest: the late one, or the root.
        let last = if gather { late } else { root };
        if !waiter || !pinned || last == me || !apart(me, last) {
            // Never while a rank of our CPU is awaited (the late one or the root: the
            // others post at once), nor for nobody, nor unpinned.
            assert!(!said, "{name}: said it waits for other CPUs alone");
        } else if late == last {
            // 30 ms for a late rank of the other CPU alone (ours posted at once).
            assert!(said, "{name}: never said it waits for other CPUs alone");
            seen_true += 1;
        }
        c.barrier().unwrap();
    }
    if pinned && cpus > 1 && p == 4 {
        assert!(
            seen_true > 0,
            "rank {me}: no wait for other CPUs alone checked"
        );
    }
    assert_eq!(light::open(), 0, "every light request ended");
}
