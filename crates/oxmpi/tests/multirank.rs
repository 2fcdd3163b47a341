//! The safe API across processes: this test starts itself under the installed `mpirun` with 3
//! ranks (needs `OXMPI_TEST_PREFIX`, set by `cargo xtask test`); each rank then runs
//! [`rank_body`] (it knows it is a rank because the launcher gave it PMI variables).

mod common;

use std::time::Duration;

use oxmpi::{Equivalence, ErrorClass, ANY_SOURCE, ANY_TAG};

const RANKS: i32 = 3;
/// Safety net only: a hung job is killed after this long so the test fails instead of hanging.
const HANG_LIMIT: Duration = Duration::from_secs(300);

#[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Record {
    from: i16,
    index: u32,
    weight: f64,
    flag: bool,
}

/// A decimal number as (value, 10^digits): concatenation is associative, not commutative.
#[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Digits {
    value: u64,
    scale: u64,
}

impl Digits {
    fn concat(a: Digits, b: Digits) -> Digits {
        Digits {
            value: a.value * b.scale + b.value,
            scale: a.scale * b.scale,
        }
    }
}

fn record(from: i32, index: u32) -> Record {
    Record {
        from: from as i16,
        index,
        weight: f64::from(index) * 1.25 + f64::from(from),
        flag: index % 3 == 0,
    }
}

#[test]
fn three_ranks() {
    if common::under_launcher() {
        rank_body();
        return;
    }
    common::run_ranks("three_ranks", RANKS, &[], HANG_LIMIT, "all checks passed");
}

/// What every rank does (3 ranks).
fn rank_body() {
    let universe = oxmpi::init().expect("init");
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    assert_eq!(size, RANKS);
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;

    // 1. Gather of packed structs at rank 0 with ANY_SOURCE; large enough for rendezvous.
    const N: u32 = 3000;
    if rank == 0 {
        let mut seen = Vec::new();
        for _ in 1..size {
            let (v, st) = world.recv_vec::<Record>(ANY_SOURCE, 10).expect("recv_vec");
            assert_eq!(v.len(), N as usize);
            assert_eq!(st.count::<Record>(), Some(N as usize));
            for (i, r) in v.iter().enumerate() {
                assert_eq!(*r, record(st.source(), i as u32));
            }
            seen.push(st.source());
        }
        seen.sort_unstable();
        assert_eq!(seen, (1..size).collect::<Vec<_>>());
    } else {
        let mine: Vec<Record> = (0..N).map(|i| record(rank, i)).collect();
        world.send(&mine[..], 0, 10).expect("send records");
    }

    // 2. Ring exchange with sendrecv (contiguous, large).
    let out: Vec<u64> = (0..100_000).map(|i| i * 7 + rank as u64).collect();
    let mut inc = vec![0u64; 100_000];
    let st = world
        .sendrecv(&out[..], next, 20, &mut inc[..], prev, 20)
        .expect("sendrecv");
    assert_eq!(st.source(), prev);
    assert!(inc
        .iter()
        .enumerate()
        .all(|(i, &v)| v == i as u64 * 7 + prev as u64));

    let mut token = [record(rank, 1), record(rank, 2)];
    world
        .sendrecv_replace(&mut token[..], next, 21, prev, 21)
        .expect("sendrecv_replace");
    assert_eq!(token, [record(prev, 1), record(prev, 2)]);

    // 3. Non-overtaking: rank 1 sends a numbered series, rank 0 takes it with wildcards.
    if rank == 1 {
        for i in 0..50u32 {
            world
                .send(&[i][..], 0, 30 + (i % 2) as i32)
                .expect("series");
        }
    } else if rank == 0 {
        for i in 0..50u32 {
            let mut b = [u32::MAX];
            let st = world.recv(&mut b[..], 1, ANY_TAG).expect("series recv");
            assert_eq!(b[0], i, "messages from one source arrive in order");
            assert_eq!(st.tag(), 30 + (i % 2) as i32);
        }
    }

    // 4. Truncation across processes; the stream stays usable afterwards.
    if rank == 2 {
        let big: Vec<u32> = (0..10_000).collect();
        world.send(&big[..], 0, 40).expect("big");
        world.send(&[99u32][..], 0, 41).expect("after");
    } else if rank == 0 {
        let mut small = [0u32; 10];
        let e = world.recv(&mut small[..], 2, 40).expect_err("truncated");
        assert_eq!(e.class(), ErrorClass::Truncate);
        assert_eq!(small, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        let st = world
            .recv(&mut small[..1], 2, 41)
            .expect("after truncation");
        assert_eq!((small[0], st.count::<u32>()), (99, Some(1)));
    }

    // 5. Scoped nonblocking exchange with every other rank at once, plus a synchronous send.
    let mine = [rank; 64];
    let mut from: Vec<[i32; 64]> = vec![[-1; 64]; size as usize];
    oxmpi::request::scope(|s| {
        let mut reqs = Vec::new();
        for (peer, slot) in from.iter_mut().enumerate() {
            let peer = peer as i32;
            if peer != rank {
                reqs.push(
                    world
                        .irecv_scoped(s, &mut slot[..], peer, 50)
                        .expect("irecv"),
                );
            }
        }
        for peer in 0..size {
            if peer != rank {
                reqs.push(world.issend_scoped(s, &mine[..], peer, 50).expect("issend"));
            }
        }
        oxmpi::request::wait_all(reqs).expect("wait_all");
    });
    for (peer, got) in from.iter().enumerate() {
        if peer as i32 != rank {
            assert!(got.iter().all(|&v| v == peer as i32));
        }
    }

    // 6. Matched probe across processes.
    if rank == 1 {
        world.send(&[1.5f32, 2.5][..], 2, 60).expect("mprobe send");
    } else if rank == 2 {
        let (msg, st) = world.mprobe(ANY_SOURCE, 60).expect("mprobe");
        assert_eq!((st.source(), st.count::<f32>()), (1, Some(2)));
        let mut b = [0f32; 2];
        msg.recv_into(&mut b[..]).expect("mrecv");
        assert_eq!(b, [1.5, 2.5]);
    }

    // 7. Collectives: barrier, broadcast of packed structs from a non-zero root, reductions
    //    (a non-commutative one must combine in rank order), user tags do not interfere.
    world
        .send(&[5u8][..], next, 0)
        .expect("pending user message");
    world.barrier().expect("barrier");
    let mut recs: Vec<Record> = if rank == 1 {
        (0..500).map(|i| record(1, i)).collect()
    } else {
        vec![record(-1, 0); 500]
    };
    world.broadcast(1, &mut recs[..]).expect("broadcast");
    assert!(recs
        .iter()
        .enumerate()
        .all(|(i, r)| *r == record(1, i as u32)));
    let mut sum = [0i64; 3];
    world
        .all_reduce(
            &[1, i64::from(rank), i64::from(rank) * 100][..],
            &mut sum[..],
            |a, b| a + b,
        )
        .expect("all_reduce");
    assert_eq!(sum, [3, 3, 300]);
    let digit = Digits {
        value: rank as u64 + 1,
        scale: 10,
    };
    let mut out = [Digits { value: 0, scale: 0 }];
    world
        .reduce(2, &[digit][..], &mut out[..], Digits::concat)
        .expect("reduce");
    if rank == 2 {
        assert_eq!(out[0].value, 123, "combined in rank order");
    } else {
        assert_eq!(out[0].value, 0, "only the root receives the result");
    }
    // The same non-commutative op through all_reduce (the shared-memory component on one
    // node: it folds in rank order too), and a vector past coll_sm_allreduce_large_min.
    let mut all = [Digits { value: 0, scale: 0 }];
    world
        .all_reduce(&[digit][..], &mut all[..], Digits::concat)
        .expect("all_reduce non-commutative");
    assert_eq!(all[0].value, 123, "all_reduce combined in rank order");
    let long: Vec<i64> = (0..70_000).map(|i| i * (i64::from(rank) + 1)).collect();
    let mut total = vec![0i64; long.len()];
    world
        .all_reduce(&long[..], &mut total[..], |a, b| a + b)
        .expect("large all_reduce");
    assert!(total.iter().enumerate().all(|(i, &t)| t == 6 * i as i64));
    // Nonblocking collectives (oxmpi-coll's nbc schedules), with a blocking collective
    // while they are outstanding; one completed by test() alone.
    let bar = world.ibarrier().expect("ibarrier");
    let init = if rank == 2 {
        vec![7u32, 8, 9]
    } else {
        vec![0; 3]
    };
    let bc = world.ibroadcast(2, init).expect("ibroadcast");
    let red = world
        .iall_reduce(&[digit][..], Digits::concat)
        .expect("iall_reduce");
    world
        .barrier()
        .expect("barrier among nonblocking collectives");
    assert!(bar.wait().expect("ibarrier wait").is_empty());
    assert_eq!(bc.wait().expect("ibroadcast wait"), [7, 8, 9]);
    assert_eq!(red.wait().expect("iall_reduce wait")[0].value, 123);
    let mut pending = world
        .iall_reduce(&[i64::from(rank)][..], |a, b| a + b)
        .expect("iall_reduce");
    let summed = loop {
        match pending.test() {
            Ok(r) => break r.expect("iall_reduce test"),
            Err(back) => pending = back,
        }
    };
    assert_eq!(summed, [3]);
    // all_to_all: block j of rank i holds (i, j) pairs; small blocks take the shared-memory
    // segment, 400-element ones the point-to-point algorithms.
    for per in [2usize, 400] {
        let send: Vec<Record> = (0..size as usize * per)
            .map(|k| record(rank, (k / per) as u32))
            .collect();
        let mut got = vec![record(-1, 0); send.len()];
        world
            .all_to_all(&send[..], &mut got[..])
            .expect("all_to_all");
        for (k, r) in got.iter().enumerate() {
            assert_eq!(
                *r,
                record((k / per) as i32, rank as u32),
                "all_to_all {per}"
            );
        }
    }
    // scatter of packed structs from rank 1; inclusive and exclusive scans of the
    // non-commutative Digits (rank order: 1, 12, 123).
    let blocks: Vec<Record> = (0..size as u32 * 2).map(|k| record(1, k)).collect();
    let mut mine = [record(-1, 0); 2];
    world
        .scatter(1, if rank == 1 { &blocks[..] } else { &[] }, &mut mine[..])
        .expect("scatter");
    assert_eq!(
        mine,
        [record(1, 2 * rank as u32), record(1, 2 * rank as u32 + 1)]
    );
    let mut pre = [Digits { value: 0, scale: 0 }];
    world
        .scan(&[digit][..], &mut pre[..], Digits::concat)
        .expect("scan");
    assert_eq!(pre[0].value, [1, 12, 123][rank as usize]);
    let mut ex = [Digits { value: 9, scale: 9 }];
    world
        .exclusive_scan(&[digit][..], &mut ex[..], Digits::concat)
        .expect("exclusive_scan");
    assert_eq!(
        ex[0].value,
        [9, 1, 12][rank as usize],
        "rank 0's left as it was"
    );
    let mut five = [0u8];
    world
        .recv(&mut five[..], prev, 0)
        .expect("user message after collectives");
    assert_eq!(five, [5]);

    // 8. New communicators: split by parity with reversed order, dup isolation, gather.
    let half = world
        .split(rank % 2, -rank)
        .expect("split")
        .expect("non-negative color");
    let evens = (size + 1) / 2;
    let (want_size, want_rank) = if rank % 2 == 0 {
        (evens, (evens - 1) - rank / 2)
    } else {
        (size - evens, (size - evens - 1) - rank / 2)
    };
    assert_eq!((half.size(), half.rank()), (want_size, want_rank));
    let mut members = vec![-1i32; half.size() as usize];
    half.all_gather(&[rank][..], &mut members[..])
        .expect("all_gather");
    let mut expected: Vec<i32> = (0..size).filter(|r| r % 2 == rank % 2).collect();
    expected.reverse();
    assert_eq!(members, expected);
    let dup = world.dup().expect("dup");
    dup.send(&[rank][..], next, 3).expect("dup send");
    assert_eq!(world.iprobe(ANY_SOURCE, 3).expect("iprobe"), None);
    let mut from = [-1i32];
    dup.recv(&mut from[..], prev, 3).expect("dup recv");
    assert_eq!(from, [prev]);
    let mut gathered = vec![record(-1, 0); if rank == 2 { 3 } else { 0 }];
    world
        .gather(2, &[record(rank, 7)][..], &mut gathered[..])
        .expect("gather");
    if rank == 2 {
        assert_eq!(gathered, [record(0, 7), record(1, 7), record(2, 7)]);
    }
    drop(dup);
    drop(half);

    // 9. The remaining collectives of the C library, each against values computed here.
    other_collectives(&world);

    // 10. Persistent collectives: planned once, started for three rounds with new data.
    persistent_collectives(&world);

    // 11. Partitioned communication, the two sides partitioned differently.
    partitioned(&world);

    // Nothing left over anywhere.
    let mut token = [0u8];
    world
        .sendrecv(&[1u8][..], next, 70, &mut token[..], prev, 70)
        .expect("final ring");
    assert_eq!(world.iprobe(ANY_SOURCE, ANY_TAG).expect("iprobe"), None);
    println!("rank {rank}: all checks passed");
    universe.finalize().expect("finalize");
}

/// Prefix sums of `counts`: the displacements of blocks laid out back to back.
fn packed_displs(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0, |at, &c| {
            *at += c;
            Some(*at - c)
        })
        .collect()
}

fn digit_of(rank: i32) -> Digits {
    Digits {
        value: rank as u64 + 1,
        scale: 10,
    }
}

/// reduce_scatter_block, the v-variants and the nonblocking collectives (3 ranks).
fn other_collectives(world: &oxmpi::Communicator<'_>) {
    let (rank, size) = (world.rank(), world.size());
    let p = size as usize;
    let me = rank as usize;
    let unset = record(-1, 0);

    // reduce_scatter_block: a sum (block 2 elements) and a non-commutative concatenation.
    let send: Vec<i64> = (0..2 * p as i64)
        .map(|k| i64::from(rank) * 1000 + k)
        .collect();
    let mut mine = [0i64; 2];
    world
        .reduce_scatter_block(&send[..], &mut mine[..], |a, b| a + b)
        .expect("reduce_scatter_block");
    let want: Vec<i64> = (2 * me..2 * me + 2)
        .map(|k| (0..size).map(|r| i64::from(r) * 1000 + k as i64).sum())
        .collect();
    assert_eq!(mine[..], want[..], "reduce_scatter_block sum");
    let mut cat = [Digits { value: 0, scale: 0 }];
    world
        .reduce_scatter_block(&vec![digit_of(rank); p][..], &mut cat[..], Digits::concat)
        .expect("reduce_scatter_block non-commutative");
    assert_eq!(cat[0].value, 123, "reduce_scatter_block in rank order");
    // reduce_scatter with uneven blocks (1, 3, 2 elements), blocking and nonblocking.
    let counts = [1usize, 3, 2];
    let at: usize = counts[..me].iter().sum();
    let send: Vec<i64> = (0..6).map(|k| i64::from(rank) * 1000 + k).collect();
    let want: Vec<i64> = (at..at + counts[me])
        .map(|k| (0..size).map(|r| i64::from(r) * 1000 + k as i64).sum())
        .collect();
    let mut part = vec![0i64; counts[me]];
    world
        .reduce_scatter(&send[..], &mut part[..], &counts, |a, b| a + b)
        .expect("reduce_scatter");
    assert_eq!(part, want, "reduce_scatter");
    let part = world
        .ireduce_scatter(&send[..], &counts, |a, b| a + b)
        .expect("ireduce_scatter")
        .wait()
        .expect("ireduce_scatter wait");
    assert_eq!(part, want, "ireduce_scatter");
    let e = world
        .reduce_scatter(&send[..5], &mut [0i64; 3][..], &counts, |a, b| a + b)
        .expect_err("counts sum to 6, not 5");
    assert_eq!(e.class(), ErrorClass::Count);
    let e = world
        .reduce_scatter_block(&[1i64, 2][..], &mut mine[..], |a, b| a + b)
        .expect_err("2 elements are not 3 blocks of 2");
    assert_eq!(e.class(), ErrorClass::Count);

    // gatherv at rank 1: rank r sends r + 1 records; blocks in reverse order with a gap
    // (element 3) that must keep its value.
    let counts = [1usize, 2, 3];
    let displs = [7usize, 4, 0];
    let send: Vec<Record> = (0..=me as u32).map(|j| record(rank, j)).collect();
    let mut recv = vec![unset; if rank == 1 { 8 } else { 0 }];
    world
        .gatherv(1, &send[..], &mut recv[..], &counts, &displs)
        .expect("gatherv");
    let want = [
        record(2, 0),
        record(2, 1),
        record(2, 2),
        unset,
        record(1, 0),
        record(1, 1),
        unset,
        record(0, 0),
    ];
    if rank == 1 {
        assert_eq!(recv, want, "gatherv");
    }
    let got = world
        .igatherv(
            1,
            &send[..],
            recv.iter().map(|_| unset).collect(),
            &counts,
            &displs,
        )
        .expect("igatherv")
        .wait()
        .expect("igatherv wait");
    assert_eq!(got[..], want[..recv.len()], "igatherv");
    let mut ints = [-1i32; 8];
    world
        .gatherv(0, &vec![rank; me + 1][..], &mut ints[..], &counts, &displs)
        .expect("gatherv contiguous");
    if rank == 0 {
        assert_eq!(ints, [2, 2, 2, -1, 1, 1, -1, 0], "gatherv contiguous");
    } else {
        assert_eq!(ints, [-1; 8], "gatherv leaves non-roots' buffers alone");
    }

    // scatterv from rank 2: rank i gets send[displs[i]..][..counts[i]].
    let counts = [3usize, 1, 2];
    let displs = [5usize, 0, 2];
    let pool: Vec<Record> = (0..8).map(|k| record(2, k)).collect();
    let mut got = vec![unset; counts[me]];
    world
        .scatterv(
            2,
            if rank == 2 { &pool[..] } else { &[] },
            &counts,
            &displs,
            &mut got[..],
        )
        .expect("scatterv");
    let want: Vec<Record> = (displs[me]..displs[me] + counts[me])
        .map(|k| record(2, k as u32))
        .collect();
    assert_eq!(got, want, "scatterv");
    let got = world
        .iscatterv(
            2,
            if rank == 2 { &pool[..] } else { &[] },
            &counts,
            &displs,
            vec![unset; counts[me]],
        )
        .expect("iscatterv")
        .wait()
        .expect("iscatterv wait");
    assert_eq!(got, want, "iscatterv");

    // all_gatherv: packed structs and contiguous integers, blocks out of rank order.
    let counts = [2usize, 1, 3];
    let displs = [4usize, 0, 1];
    let send: Vec<Record> = (0..counts[me] as u32).map(|j| record(rank, j)).collect();
    let mut all = vec![unset; 6];
    world
        .all_gatherv(&send[..], &mut all[..], &counts, &displs)
        .expect("all_gatherv");
    let mut want = vec![unset; 6];
    for r in 0..p {
        for j in 0..counts[r] {
            want[displs[r] + j] = record(r as i32, j as u32);
        }
    }
    assert_eq!(all, want, "all_gatherv");
    let all = world
        .iall_gatherv(&send[..], vec![unset; 6], &counts, &displs)
        .expect("iall_gatherv")
        .wait()
        .expect("iall_gatherv wait");
    assert_eq!(all, want, "iall_gatherv");
    let mut all = vec![0u16; 7];
    let mine: Vec<u16> = vec![rank as u16 + 10; counts[me]];
    world
        .all_gatherv(&mine[..], &mut all[..], &counts, &displs)
        .expect("all_gatherv contiguous");
    assert_eq!(all, [11, 12, 12, 12, 10, 10, 0], "all_gatherv contiguous");
    let e = world
        .all_gatherv(&mine[..], &mut all[..], &counts[..2], &displs[..2])
        .expect_err("two counts for three ranks");
    assert_eq!(e.class(), ErrorClass::Count);

    // all_to_allv: rank r sends r + j + 1 records to rank j (packed back to back); the
    // blocks received land in reverse rank order.
    let scounts: Vec<usize> = (0..p).map(|j| me + j + 1).collect();
    let sdispls = packed_displs(&scounts);
    let send: Vec<Record> = (0..p)
        .flat_map(|j| (0..scounts[j] as u32).map(move |e| record(rank, 10 * j as u32 + e)))
        .collect();
    let rcounts: Vec<usize> = (0..p).map(|j| j + me + 1).collect();
    let mut rdispls = packed_displs(&rcounts.iter().rev().copied().collect::<Vec<_>>());
    rdispls.reverse();
    let mut got = vec![unset; rcounts.iter().sum()];
    world
        .all_to_allv(
            &send[..],
            &scounts,
            &sdispls,
            &mut got[..],
            &rcounts,
            &rdispls,
        )
        .expect("all_to_allv");
    for j in 0..p {
        for e in 0..rcounts[j] {
            assert_eq!(
                got[rdispls[j] + e],
                record(j as i32, 10 * me as u32 + e as u32),
                "all_to_allv block from {j}"
            );
        }
    }
    let again = world
        .iall_to_allv(
            &send[..],
            &scounts,
            &sdispls,
            vec![unset; got.len()],
            &rcounts,
            &rdispls,
        )
        .expect("iall_to_allv")
        .wait()
        .expect("iall_to_allv wait");
    assert_eq!(again, got, "iall_to_allv");

    // all_gather on all three ranks (section 8 runs it on the halves of a split).
    let mut pairs = vec![u64::MAX; 2 * p];
    world
        .all_gather(&[rank as u64, rank as u64 * 7][..], &mut pairs[..])
        .expect("all_gather");
    assert_eq!(pairs, [0, 0, 1, 7, 2, 14], "all_gather");

    // Nonblocking forms, several outstanding at once, completed in reverse order.
    let red = world
        .ireduce(2, &[digit_of(rank), digit_of(2 - rank)][..], Digits::concat)
        .expect("ireduce");
    let gat = world
        .igather(0, &[record(rank, 5), record(rank, 6)][..])
        .expect("igather");
    let blocks: Vec<Record> = (0..2 * p as u32).map(|k| record(2, k)).collect();
    let sca = world
        .iscatter(2, if rank == 2 { &blocks[..] } else { &[] }, vec![unset; 2])
        .expect("iscatter");
    let allg = world
        .iall_gather(&[rank as u32, rank as u32 * 10][..])
        .expect("iall_gather");
    let a2a_send: Vec<Record> = (0..p as u32).map(|j| record(rank, j)).collect();
    let a2a = world.iall_to_all(&a2a_send[..]).expect("iall_to_all");
    let rsb = world
        .ireduce_scatter_block(
            &(0..p as i64)
                .map(|k| i64::from(rank) * 1000 + k)
                .collect::<Vec<_>>()[..],
            |a, b| a + b,
        )
        .expect("ireduce_scatter_block");
    let scan = world
        .iscan(&[digit_of(rank)][..], Digits::concat)
        .expect("iscan");
    let exscan = world
        .iexclusive_scan(&[digit_of(rank)][..], Digits::concat)
        .expect("iexclusive_scan");

    let ex = exscan.wait().expect("iexclusive_scan wait");
    let want: &[u64] = [&[][..], &[1][..], &[12][..]][me];
    assert_eq!(
        ex.iter().map(|d| d.value).collect::<Vec<_>>(),
        want,
        "iexclusive_scan"
    );
    let sc = scan.wait().expect("iscan wait");
    assert_eq!(
        sc.iter().map(|d| d.value).collect::<Vec<_>>(),
        [[1, 12, 123][me]]
    );
    let sum: i64 = (0..size).map(|r| i64::from(r) * 1000 + me as i64).sum();
    assert_eq!(rsb.wait().expect("ireduce_scatter_block wait"), [sum]);
    let want: Vec<Record> = (0..size).map(|j| record(j, me as u32)).collect();
    assert_eq!(a2a.wait().expect("iall_to_all wait"), want, "iall_to_all");
    let want: Vec<u32> = (0..size as u32).flat_map(|r| [r, r * 10]).collect();
    assert_eq!(allg.wait().expect("iall_gather wait"), want, "iall_gather");
    assert_eq!(
        sca.wait().expect("iscatter wait"),
        [record(2, 2 * me as u32), record(2, 2 * me as u32 + 1)],
        "iscatter"
    );
    let g = gat.wait().expect("igather wait");
    if rank == 0 {
        let want: Vec<Record> = (0..size)
            .flat_map(|r| [record(r, 5), record(r, 6)])
            .collect();
        assert_eq!(g, want, "igather");
    } else {
        assert!(g.is_empty(), "igather: only the root gets the result");
    }
    let r = red.wait().expect("ireduce wait");
    if rank == 2 {
        let values: Vec<u64> = r.iter().map(|d| d.value).collect();
        assert_eq!(values, [123, 321], "ireduce in rank order");
    } else {
        assert!(r.is_empty(), "ireduce: only the root gets the result");
    }
}

/// Persistent collectives of the safe API: three rounds each, new data every round.
fn persistent_collectives(world: &oxmpi::Communicator<'_>) {
    let (rank, size) = (world.rank() as i64, world.size() as i64);
    let mut barrier = world.barrier_init();
    let mut sum = world.all_reduce_init(|a: i64, b: i64| a + b);
    let mut bcast = world.broadcast_init::<i64>(2).expect("broadcast_init");
    let mut reduce = world
        .reduce_init(0, |a: i64, b: i64| a.max(b))
        .expect("reduce_init");
    let mut gather = world.gather_init::<i64>(1).expect("gather_init");
    let mut all_gather = world.all_gather_init::<i64>();
    let mut all_to_all = world.all_to_all_init::<i64>();
    let mut scan = world.scan_init(|a: i64, b: i64| a + b);
    assert_eq!(
        world
            .broadcast_init::<i64>(size as i32)
            .err()
            .map(|e| e.class()),
        Some(ErrorClass::Rank)
    );
    assert_eq!(
        sum.wait().err().map(|e| e.class()),
        Some(ErrorClass::Request)
    );
    // Every schedule is planned at its first start; the later rounds plan none.
    let mut planned_after_first = 0;
    for round in 0..3i64 {
        if round == 1 {
            planned_after_first = oxmpi_coll::nbc::sched::planned();
        }
        barrier.start(&[]).expect("barrier start");
        sum.start(&[rank + round, 1]).expect("sum start");
        assert_eq!(
            sum.start(&[0, 0]).err().map(|e| e.class()),
            Some(ErrorClass::Request)
        );
        bcast.start(&[round * 10 + rank, 7]).expect("bcast start");
        reduce.start(&[rank * round]).expect("reduce start");
        gather.start(&[rank + 100 * round]).expect("gather start");
        all_gather.start(&[rank, round]).expect("all_gather start");
        let blocks: Vec<i64> = (0..size).map(|j| rank * 10 + j + round).collect();
        all_to_all.start(&blocks).expect("all_to_all start");
        scan.start(&[rank + round]).expect("scan start");
        assert!(sum.is_active());
        barrier.wait().expect("barrier");
        let s = loop {
            if let Some(v) = sum.test().expect("sum test") {
                break v;
            }
        };
        assert_eq!(s, [size * (size - 1) / 2 + size * round, size]);
        assert!(!sum.is_active());
        assert_eq!(bcast.wait().expect("bcast"), [round * 10 + 2, 7]);
        let r = reduce.wait().expect("reduce");
        if rank == 0 {
            assert_eq!(r, [(size - 1) * round]);
        }
        let g = gather.wait().expect("gather");
        if rank == 1 {
            assert_eq!(g, (0..size).map(|p| p + 100 * round).collect::<Vec<_>>());
        }
        let ag = all_gather.wait().expect("all_gather");
        assert_eq!(ag, (0..size).flat_map(|p| [p, round]).collect::<Vec<_>>());
        let a2a = all_to_all.wait().expect("all_to_all");
        assert_eq!(
            a2a,
            (0..size).map(|p| p * 10 + rank + round).collect::<Vec<_>>()
        );
        let sc = scan.wait().expect("scan");
        assert_eq!(sc, [(0..=rank).map(|p| p + round).sum::<i64>()]);
    }
    assert_eq!(
        oxmpi_coll::nbc::sched::planned(),
        planned_after_first,
        "persistent collectives planned again after their first round"
    );
}

/// Partitioned send and receive of the safe API: a ring where each rank sends 24 records in
/// 4 partitions (readied in reverse) and receives them in 3, over three rounds; bad input.
fn partitioned(world: &oxmpi::Communicator<'_>) {
    let (rank, size) = (world.rank(), world.size());
    let (next, prev) = ((rank + 1) % size, (rank + size - 1) % size);
    let mut send = world
        .psend_init(vec![record(-1, 0); 24], 4, next, 9)
        .expect("psend_init");
    let mut recv = world
        .precv_init(vec![record(-1, 0); 24], 3, prev, 9)
        .expect("precv_init");
    assert_eq!((send.partitions(), recv.partitions()), (4, 3));
    assert_eq!(
        send.ready(0).err().map(|e| e.class()),
        Some(ErrorClass::Request),
        "ready on an inactive request"
    );
    for round in 0..3u32 {
        recv.start().expect("recv start");
        send.start().expect("send start");
        assert_eq!(
            send.start().err().map(|e| e.class()),
            Some(ErrorClass::Request)
        );
        for i in (0..4).rev() {
            for (k, r) in send
                .partition_mut(i)
                .expect("partition_mut")
                .iter_mut()
                .enumerate()
            {
                *r = record(rank, round * 100 + (i * 6 + k) as u32);
            }
            send.ready(i).expect("ready");
        }
        assert_eq!(
            send.ready(2).err().map(|e| e.class()),
            Some(ErrorClass::Arg)
        );
        assert_eq!(
            send.ready(4).err().map(|e| e.class()),
            Some(ErrorClass::Arg)
        );
        let mut seen = [false; 3];
        while seen.iter().any(|s| !s) {
            for (j, seen) in seen.iter_mut().enumerate() {
                if !*seen && recv.arrived(j).expect("arrived") {
                    let got = recv.partition(j).expect("arrived partition");
                    let want: Vec<_> = (0..8)
                        .map(|k| record(prev, round * 100 + (j * 8 + k) as u32))
                        .collect();
                    assert_eq!(got, &want[..], "round {round} partition {j}");
                    *seen = true;
                }
            }
        }
        send.wait().expect("send wait");
        recv.wait().expect("recv wait");
        assert!(!recv.is_active() && !send.is_active());
    }
    assert_eq!(
        world
            .psend_init(vec![0u8; 10], 3, next, 9)
            .err()
            .map(|e| e.class()),
        Some(ErrorClass::Count)
    );
    assert_eq!(
        world
            .precv_init(vec![0u8; 10], 0, prev, 9)
            .err()
            .map(|e| e.class()),
        Some(ErrorClass::Arg)
    );
    assert_eq!(
        world
            .precv_init(vec![0u8; 10], 1, size, 9)
            .err()
            .map(|e| e.class()),
        Some(ErrorClass::Rank)
    );
    let mut lonely = world
        .psend_init(vec![0u8; 4], 2, oxmpi::PROC_NULL, 10)
        .expect("psend_init");
    lonely.start().expect("start");
    assert_eq!(
        lonely.wait().err().map(|e| e.class()),
        Some(ErrorClass::Request),
        "wait with partitions not ready"
    );
}
