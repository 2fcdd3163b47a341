//! Context ids of the safe API's communicators across processes: dropped communicators give
//! their ids back, fragmented ids are found by the members' masks once the ids above run
//! out, and running out is a clean [`ErrorClass::Other`] error at every member. The test
//! starts itself under the installed `mpirun` with 3 ranks and `mpi_max_context_ids 24`
//! (world's and self's ids 0-3, then ten pairs), and under `pml cm` (whose tag carries
//! 8176 ids) for a long dup loop. Needs `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

mod common;

use std::process::Command;
use std::time::Duration;

use oxmpi::session::Session;
use oxmpi::{Communicator, ErrorClass, OwnedCommunicator};

const RANKS: i32 = 3;
/// Safety net only: a hung job is killed after this long so the test fails instead of hanging.
const HANG_LIMIT: Duration = Duration::from_secs(240);
/// User pairs under `mpi_max_context_ids 24`.
const PAIRS: usize = 10;

/// Runs `test` of this binary under `mpirun -n 3` with `args`; asserts every rank finished.
fn launch(test: &str, args: &[&str]) {
    common::run_ranks(test, RANKS, args, HANG_LIMIT, &format!("{test} passed"));
}

/// Sends `v` around the ring of `c` and checks what arrives from the previous rank.
fn ring(c: &Communicator<'_>, v: u64) {
    let (rank, size) = (c.rank(), c.size());
    let (next, prev) = ((rank + 1) % size, (rank + size - 1) % size);
    let mut got = [0u64];
    c.sendrecv(&[v + rank as u64][..], next, 5, &mut got[..], prev, 5)
        .expect("sendrecv");
    assert_eq!(got[0], v + prev as u64, "a message crossed communicators");
}

/// Dups `world` until it fails (at most `PAIRS + 2` times); every member must fail at the
/// same dup with the out-of-ids error.
fn hold_all<'u>(world: &Communicator<'u>, held: &mut Vec<OwnedCommunicator<'u>>) -> usize {
    for n in 0..PAIRS + 2 {
        match world.dup() {
            Ok(c) => held.push(c),
            Err(e) => {
                assert_eq!(e.class(), ErrorClass::Other, "{e}");
                assert!(e.to_string().contains("out of context ids"), "{e}");
                return n;
            }
        }
    }
    panic!(
        "{} dups held under 10 pairs: the cap is not applied",
        PAIRS + 2
    );
}

#[test]
fn capped_ids_are_reused_and_run_out_cleanly() {
    if common::under_launcher() {
        capped_body();
        return;
    }
    launch(
        "capped_ids_are_reused_and_run_out_cleanly",
        &["--mca", "mpi_max_context_ids", "24"],
    );
}

fn capped_body() {
    let universe = oxmpi::init().expect("init");
    let world = universe.world();
    let rank = world.rank();

    // 1. A dup/drop loop far past the ten pairs reuses them.
    for i in 0..1000u64 {
        let d = world.dup().expect("dup in the loop");
        ring(&d, i * 10);
    }

    // 2. Rank 0 alone holds a pair (its own communicator from a split): the dups take the
    //    nine pairs free at every member, then fail cleanly at every member.
    let mine = world
        .split(if rank == 0 { 0 } else { -1 }, 0)
        .expect("split");
    assert_eq!(mine.is_some(), rank == 0);
    let mut held = Vec::new();
    assert_eq!(hold_all(&world, &mut held), PAIRS - 1, "dups held");
    for (i, c) in held.iter().enumerate() {
        ring(c, 1000 + 10 * i as u64);
    }

    // 3. Every other dup dropped: the ids left below the top are found by the masks.
    let mut k = 0;
    held.retain(|_| {
        k += 1;
        k % 2 == 0
    });
    let kept = held.len();
    let more = hold_all(&world, &mut held);
    assert_eq!(more, PAIRS - 1 - kept, "fragmented pairs reused");
    for (i, c) in held.iter().enumerate() {
        ring(c, 2000 + 10 * i as u64);
    }

    // 4. A communicator from a group takes the same way: none free, then one dropped.
    let session = Session::init(oxmpi::ThreadLevel::Single).expect("session");
    let g = session.group_from_pset("mpi://WORLD").expect("group");
    let e = session
        .comm_from_group(&g, "org.oxmpi.test.ctxids")
        .expect_err("no pair is free");
    assert_eq!(e.class(), ErrorClass::Other, "{e}");
    held.remove(1);
    let c = session
        .comm_from_group(&g, "org.oxmpi.test.ctxids")
        .expect("comm_from_group after a drop");
    ring(&c, 3000);
    drop(c);
    drop(held);
    drop(mine);
    // Everything back: the loop runs again.
    for i in 0..100u64 {
        ring(&world.dup().expect("dup after the drops"), 4000 + 10 * i);
    }
    drop(session);
    println!("rank {rank}: capped_ids_are_reused_and_run_out_cleanly passed");
}

#[test]
fn pml_cm_dups_past_its_tags_ids() {
    if common::under_launcher() {
        cm_body();
        return;
    }
    let fi = Command::new("fi_info")
        .args(["-p", "tcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !fi {
        eprintln!(
            "SKIPPED: no libfabric tcp provider (fi_info -p tcp); scripts/deps.sh installs \
             libfabric-bin"
        );
        return;
    }
    launch(
        "pml_cm_dups_past_its_tags_ids",
        &[
            "--mca",
            "pml",
            "cm",
            "--mca",
            "btl",
            "self,ofi",
            "-x",
            "FI_PROVIDER=tcp;ofi_rxm",
        ],
    );
}

fn cm_body() {
    let universe = oxmpi::init().expect("init");
    let world = universe.world();
    // 5000 pairs: past the 4086 the tag carries, unless freed ids are reused.
    for i in 0..5000u64 {
        ring(&world.dup().expect("dup under pml cm"), i);
    }
    println!(
        "rank {}: pml_cm_dups_past_its_tags_ids passed",
        world.rank()
    );
}
