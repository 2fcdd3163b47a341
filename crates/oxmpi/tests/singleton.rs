//! The safe API in a singleton process (rank 0 of 1): messages to self through the engine.
//!
//! MPI can be initialized once per process, so everything runs in one test function.

use oxmpi::{Equivalence, ErrorClass, ANY_SOURCE, ANY_TAG, PROC_NULL};

#[derive(Equivalence, Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct Sample {
    id: u16,
    value: f64,
    ok: bool,
}

#[derive(Equivalence, Clone, Copy, Debug, PartialEq, Default)]
#[repr(C)]
struct Pair {
    a: i32,
    b: i32,
}

fn sample(i: u16) -> Sample {
    Sample {
        id: i,
        value: f64::from(i) * 0.5,
        ok: i % 2 == 0,
    }
}

#[test]
fn singleton_point_to_point() {
    // A launcher's PMI variables would make this a member of a bigger job.
    for v in ["PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE"] {
        assert!(
            std::env::var_os(v).is_none(),
            "run this test outside a launcher ({v} set)"
        );
    }
    let universe = oxmpi::init().expect("init");
    assert!(oxmpi::is_initialized());
    assert!(!oxmpi::is_finalized());
    let second = oxmpi::init().expect_err("second init must fail");
    assert_eq!(second.class(), ErrorClass::Other);

    let world = universe.world();
    assert_eq!((world.rank(), world.size()), (0, 1));
    let me = universe.self_comm();
    assert_eq!((me.rank(), me.size()), (0, 1));

    contiguous_roundtrip(&world);
    non_contiguous_roundtrip(&world);
    truncation(&world);
    wildcards_and_probes(&world);
    proc_null(&world);
    bad_arguments(&world);
    dropped_and_leaked_requests(&world);
    cancel_and_test(&world);
    owned_requests(&world);
    panic_in_scope(&world);
    separate_communicators(&universe);
    collectives(&world);
    new_communicators(&world);

    universe.finalize().expect("finalize");
    assert!(oxmpi::is_finalized());
    let after = oxmpi::init().expect_err("no init after finalize");
    assert_eq!(after.class(), ErrorClass::Other);
}

fn contiguous_roundtrip(world: &oxmpi::Communicator<'_>) {
    let data: Vec<u64> = (0..1000).map(|i| i * 3 + 1).collect();
    let mut got = vec![0u64; 1000];
    let status = oxmpi::request::scope(|s| {
        let r = world.irecv_scoped(s, &mut got[..], 0, 11).unwrap();
        world.send(&data[..], 0, 11).unwrap();
        r.wait().unwrap()
    });
    assert_eq!(got, data);
    assert_eq!((status.source(), status.tag()), (0, 11));
    assert_eq!(status.count::<u64>(), Some(1000));
    assert_eq!(status.count_bytes(), 8000);

    // A large message (beyond any eager limit) through isend + recv.
    let big: Vec<f32> = (0..300_000).map(|i| i as f32).collect();
    let mut big_got = vec![0f32; 300_000];
    oxmpi::request::scope(|s| {
        let w = world.isend_scoped(s, &big[..], 0, 12).unwrap();
        let st = world.recv(&mut big_got[..], 0, 12).unwrap();
        assert_eq!(st.count::<f32>(), Some(300_000));
        w.wait().unwrap();
    });
    assert_eq!(big_got, big);

    // sendrecv with different element types on both sides.
    let mut pairs = [Pair::default(); 2];
    let st = world
        .sendrecv(&[1i32, 2, 3, 4][..], 0, 13, &mut pairs[..], 0, 13)
        .unwrap();
    assert_eq!(pairs, [Pair { a: 1, b: 2 }, Pair { a: 3, b: 4 }]);
    assert_eq!(st.count::<Pair>(), Some(2));

    // Synchronous send matched by a posted receive.
    let mut one = [0i8; 3];
    oxmpi::request::scope(|s| {
        let r = world.irecv_scoped(s, &mut one[..], 0, 14).unwrap();
        world.ssend(&[-1i8, -2, -3][..], 0, 14).unwrap();
        r.wait().unwrap();
    });
    assert_eq!(one, [-1, -2, -3]);
}

fn non_contiguous_roundtrip(world: &oxmpi::Communicator<'_>) {
    let data: Vec<Sample> = (0..50).map(sample).collect();
    const { assert!(!<Sample as Equivalence>::CONTIGUOUS) };
    let mut got = vec![sample(999); 50];
    let status = oxmpi::request::scope(|s| {
        let r = world.irecv_scoped(s, &mut got[..], 0, 20).unwrap();
        let w = world.isend_scoped(s, &data[..], 0, 20).unwrap();
        w.wait().unwrap();
        r.wait().unwrap()
    });
    assert_eq!(got, data);
    // Packed size on the wire: 2 + 8 + 1 bytes per element, no padding.
    assert_eq!(status.count_bytes(), 50 * 11);
    assert_eq!(status.count::<Sample>(), Some(50));

    let flags = [true, false, false, true];
    world.send(&flags[..], 0, 21).unwrap();
    let (v, st) = world.recv_vec::<bool>(0, 21).unwrap();
    assert_eq!(v, flags);
    assert_eq!(st.count::<bool>(), Some(4));
}

fn truncation(world: &oxmpi::Communicator<'_>) {
    let mut small = [0u32; 2];
    world.send(&[7u32, 8, 9, 10][..], 0, 30).unwrap();
    let err = world.recv(&mut small[..], 0, 30).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Truncate);
    assert_eq!(small, [7, 8], "the buffer holds what fit");
    let st = err.status().expect("a truncated receive has a status");
    assert_eq!((st.source(), st.tag()), (0, 30));

    // The stream stays usable.
    world.send(&[5u32][..], 0, 31).unwrap();
    let st = world.recv(&mut small[..], 0, 31).unwrap();
    assert_eq!(st.count::<u32>(), Some(1));
    assert_eq!(small[0], 5);

    // Truncation of a packed (non-contiguous) type keeps the whole elements that fit.
    let mut two = [sample(0); 2];
    world
        .send(&[sample(1), sample(2), sample(3)][..], 0, 32)
        .unwrap();
    let err = world.recv(&mut two[..], 0, 32).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Truncate);
    assert_eq!(two, [sample(1), sample(2)]);

    // recv_vec of a message that is not a whole number of elements.
    world.send(&[1u8, 2, 3][..], 0, 33).unwrap();
    let err = world.recv_vec::<u16>(0, 33).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Truncate);
    assert_eq!(
        world.iprobe(0, 33).unwrap(),
        None,
        "the message was drained"
    );
}

fn wildcards_and_probes(world: &oxmpi::Communicator<'_>) {
    assert_eq!(world.iprobe(ANY_SOURCE, ANY_TAG).unwrap(), None);
    world.send(&[1.0f64, 2.0][..], 0, 40).unwrap();
    let st = world
        .iprobe(ANY_SOURCE, ANY_TAG)
        .unwrap()
        .expect("a message");
    assert_eq!((st.source(), st.tag(), st.count::<f64>()), (0, 40, Some(2)));
    let st = world.probe(0, 40).unwrap();
    assert_eq!(st.count_bytes(), 16);

    let (msg, st) = world.mprobe(ANY_SOURCE, 40).unwrap();
    assert_eq!(st.tag(), 40);
    // A matched message is no longer visible to probes.
    assert_eq!(world.iprobe(ANY_SOURCE, ANY_TAG).unwrap(), None);
    let mut buf = [0f64; 2];
    let st = msg.recv_into(&mut buf[..]).unwrap();
    assert_eq!(buf, [1.0, 2.0]);
    assert_eq!(st.source(), 0);

    assert!(world.improbe(ANY_SOURCE, ANY_TAG).unwrap().is_none());
    world.send(&[3i16][..], 0, 41).unwrap();
    let (msg, _) = world.improbe(0, ANY_TAG).unwrap().expect("message");
    drop(msg); // an unreceived message is drained
    assert_eq!(world.iprobe(ANY_SOURCE, ANY_TAG).unwrap(), None);

    // Non-overtaking: two messages with the same envelope arrive in order.
    world.send(&[1u8][..], 0, 42).unwrap();
    world.send(&[2u8][..], 0, 42).unwrap();
    let mut b = [0u8];
    world.recv(&mut b[..], ANY_SOURCE, ANY_TAG).unwrap();
    assert_eq!(b[0], 1);
    world.recv(&mut b[..], 0, 42).unwrap();
    assert_eq!(b[0], 2);
}

fn proc_null(world: &oxmpi::Communicator<'_>) {
    world.send(&[1u32][..], PROC_NULL, 0).unwrap();
    let mut buf = [9u32; 2];
    let st = world.recv(&mut buf[..], PROC_NULL, 5).unwrap();
    assert_eq!(st.source(), PROC_NULL);
    assert_eq!(st.count_bytes(), 0);
    assert_eq!(buf, [9, 9], "a receive from PROC_NULL writes nothing");
    let st = world.probe(PROC_NULL, ANY_TAG).unwrap();
    assert_eq!(st.source(), PROC_NULL);
}

fn bad_arguments(world: &oxmpi::Communicator<'_>) {
    let class = |r: oxmpi::Result<()>| r.unwrap_err().class();
    assert_eq!(class(world.send(&[1u8][..], 1, 0)), ErrorClass::Rank);
    assert_eq!(class(world.send(&[1u8][..], -7, 0)), ErrorClass::Rank);
    assert_eq!(class(world.send(&[1u8][..], 0, -3)), ErrorClass::Tag);
    assert_eq!(
        class(world.send(&[1u8][..], 0, oxmpi::TAG_UB + 1)),
        ErrorClass::Tag
    );
    let mut b = [0u8];
    assert_eq!(
        world.recv(&mut b[..], 5, 0).unwrap_err().class(),
        ErrorClass::Rank
    );
    assert_eq!(
        world.recv(&mut b[..], 0, -9).unwrap_err().class(),
        ErrorClass::Tag
    );
    assert_eq!(
        world.probe(3, ANY_TAG).unwrap_err().class(),
        ErrorClass::Rank
    );
    // The error message names the operation and the rank.
    let e = world.send(&[1u8][..], 4, 0).unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("Rank: send on rank 0 (peer 4, tag 0): "),
        "{text}"
    );
    assert_eq!(
        text.matches("Rank:").count(),
        1,
        "class printed once: {text}"
    );
    // Nothing was left behind by the failed calls.
    assert_eq!(world.iprobe(ANY_SOURCE, ANY_TAG).unwrap(), None);
}

fn dropped_and_leaked_requests(world: &oxmpi::Communicator<'_>) {
    // A dropped receive request is waited (and its packed data unpacked) by its destructor.
    let mut got = [sample(0); 3];
    let data = [sample(4), sample(5), sample(6)];
    oxmpi::request::scope(|s| {
        let r = world.irecv_scoped(s, &mut got[..], 0, 50).unwrap();
        world.send(&data[..], 0, 50).unwrap();
        drop(r);
    });
    assert_eq!(got, data);

    // A leaked request is waited at the end of the scope, before the buffer is released.
    let mut raw = [0u32; 4];
    oxmpi::request::scope(|s| {
        let r = world.irecv_scoped(s, &mut raw[..], 0, 51).unwrap();
        std::mem::forget(r);
        world.send(&[10u32, 20, 30, 40][..], 0, 51).unwrap();
    });
    assert_eq!(raw, [10, 20, 30, 40]);

    // wait_all over several requests.
    let mut a = [0u8; 2];
    let mut b = [0u8; 2];
    let statuses = oxmpi::request::scope(|s| {
        let ra = world.irecv_scoped(s, &mut a[..], 0, 52).unwrap();
        let rb = world.irecv_scoped(s, &mut b[..], 0, 53).unwrap();
        world.send(&[2u8, 2][..], 0, 53).unwrap();
        world.send(&[1u8, 1][..], 0, 52).unwrap();
        oxmpi::request::wait_all([ra, rb]).unwrap()
    });
    assert_eq!((a, b), ([1, 1], [2, 2]));
    assert_eq!(
        statuses.iter().map(|s| s.tag()).collect::<Vec<_>>(),
        [52, 53]
    );
}

fn cancel_and_test(world: &oxmpi::Communicator<'_>) {
    let mut buf = [0i64; 1];
    let st = oxmpi::request::scope(|s| {
        let r = world.irecv_scoped(s, &mut buf[..], 0, 60).unwrap();
        let r = r.test().expect_err("nothing was sent yet");
        r.cancel();
        r.wait().unwrap()
    });
    assert!(st.cancelled());
    assert_eq!(buf, [0]);

    // test() completes a request once its message is there.
    let mut buf = [0i64; 1];
    oxmpi::request::scope(|s| {
        let mut r = world.irecv_scoped(s, &mut buf[..], 0, 61).unwrap();
        world.send(&[77i64][..], 0, 61).unwrap();
        loop {
            match r.test() {
                Ok(done) => {
                    assert_eq!(done.unwrap().tag(), 61);
                    break;
                }
                Err(again) => r = again,
            }
        }
    });
    assert_eq!(buf, [77]);
}

fn separate_communicators(universe: &oxmpi::Universe) {
    // World and self have separate message spaces.
    let world = universe.world();
    let me = universe.self_comm();
    me.send(&[1u8][..], 0, 70).unwrap();
    assert_eq!(world.iprobe(ANY_SOURCE, ANY_TAG).unwrap(), None);
    let mut b = [0u8];
    me.recv(&mut b[..], 0, 70).unwrap();
    assert_eq!(b, [1]);
}

fn owned_requests(world: &oxmpi::Communicator<'_>) {
    // Packed type through owned requests; the receive vector comes back with the data.
    let data: Vec<Sample> = (10..20).map(sample).collect();
    let r = world.irecv(vec![sample(0); 12], 0, 80).unwrap();
    let s = world.isend(data.clone(), 0, 80).unwrap();
    let (sent, st) = s.wait();
    st.unwrap();
    assert_eq!(sent, data, "the send buffer comes back unchanged");
    let (got, st) = r.wait();
    let st = st.unwrap();
    assert_eq!(st.count::<Sample>(), Some(10));
    assert_eq!(&got[..10], &data[..]);
    assert_eq!(
        got[10],
        sample(0),
        "elements past the message are untouched"
    );

    // Requests can move to another thread.
    let r = world.irecv(vec![0u16; 3], 0, 81).unwrap();
    let (got, st) = std::thread::scope(|t| {
        let handle = t.spawn(move || r.wait());
        world.send(&[7u16, 8, 9][..], 0, 81).unwrap();
        handle.join().unwrap()
    });
    assert_eq!((got, st.unwrap().tag()), (vec![7, 8, 9], 81));

    // test() hands the request back until it completes; cancel works.
    let r = world.irecv(vec![0u8; 1], 0, 82).unwrap();
    let r = r.test().expect_err("nothing sent yet");
    r.cancel();
    let (_, st) = r.wait();
    assert!(st.unwrap().cancelled());

    // Truncation keeps the buffer.
    world.send(&[1u32, 2, 3][..], 0, 83).unwrap();
    let (got, st) = world.irecv(vec![0u32; 2], 0, 83).unwrap().wait();
    assert_eq!(st.unwrap_err().class(), ErrorClass::Truncate);
    assert_eq!(got, [1, 2]);

    // Bad arguments fail at once.
    let e = world.isend(vec![1u8], 9, 0).err().expect("bad rank");
    assert_eq!(e.class(), ErrorClass::Rank);

    // A dropped receive is waited before its vector is freed.
    let r = world.irecv(vec![0u64; 2], 0, 84).unwrap();
    world.send(&[1u64, 2][..], 0, 84).unwrap();
    drop(r);
    assert_eq!(world.iprobe(ANY_SOURCE, ANY_TAG).unwrap(), None);
}

fn collectives(world: &oxmpi::Communicator<'_>) {
    world.barrier().unwrap();
    let mut v = [sample(3), sample(4)];
    world.broadcast(0, &mut v[..]).unwrap();
    assert_eq!(v, [sample(3), sample(4)]);
    let mut out = [0u32; 2];
    world
        .all_reduce(&[3u32, 4][..], &mut out[..], u32::max)
        .unwrap();
    assert_eq!(out, [3, 4]);
    world
        .reduce(0, &[5u32, 6][..], &mut out[..], |a, b| a + b)
        .unwrap();
    assert_eq!(out, [5, 6]);
    // Bad input: a root outside the communicator, mismatched lengths.
    assert_eq!(
        world.broadcast(1, &mut out[..]).unwrap_err().class(),
        ErrorClass::Rank
    );
    assert_eq!(
        world
            .reduce(-1, &[1u32][..], &mut out[..1], |a, b| a + b)
            .unwrap_err()
            .class(),
        ErrorClass::Rank
    );
    assert_eq!(
        world
            .all_reduce(&[1u32][..], &mut out[..], |a, b| a + b)
            .unwrap_err()
            .class(),
        ErrorClass::Count
    );
    // Collective traffic never matches a user's wildcard receive.
    assert_eq!(world.iprobe(ANY_SOURCE, ANY_TAG).unwrap(), None);
}

fn new_communicators(world: &oxmpi::Communicator<'_>) {
    let mut all = [0u16; 2];
    world.all_gather(&[7u16, 8][..], &mut all[..]).unwrap();
    assert_eq!(all, [7, 8]);
    let empty: [u8; 0] = [];
    let mut none: [u8; 0] = [];
    world.gather(0, &empty[..], &mut none[..]).unwrap();
    assert_eq!(
        world
            .gather(0, &[1u8][..], &mut all.map(|_| 0u8)[..])
            .unwrap_err()
            .class(),
        ErrorClass::Count
    );

    let dup = world.dup().unwrap();
    assert_eq!((dup.rank(), dup.size()), (0, 1));
    assert_ne!(dup.id(), world.id());
    dup.send(&[3u32][..], 0, 1).unwrap();
    assert_eq!(world.iprobe(ANY_SOURCE, ANY_TAG).unwrap(), None);
    let dup2 = dup.dup().unwrap();
    assert_ne!(dup2.id(), dup.id());
    assert_eq!(dup2.iprobe(ANY_SOURCE, ANY_TAG).unwrap(), None);
    let mut b = [0u32];
    dup.recv(&mut b[..], 0, 1).unwrap();
    assert_eq!(b, [3]);
    dup2.barrier().unwrap();

    let split = world.split(5, 0).unwrap().expect("color 5");
    assert_eq!((split.rank(), split.size()), (0, 1));
    assert!(world.split(-1, 0).unwrap().is_none());

    // A copy of a freed communicator fails cleanly.
    let copy: oxmpi::Communicator<'_> = *dup;
    drop(dup);
    assert_eq!(
        copy.send(&[1u8][..], 0, 0).unwrap_err().class(),
        ErrorClass::Comm
    );
}

fn panic_in_scope(world: &oxmpi::Communicator<'_>) {
    // A panic inside a scope with pending receives (one held, one leaked) unwinds instead of
    // hanging: the receives are cancelled, then waited, before the buffers are released.
    let mut held = [0u8; 4];
    let mut leaked = [0u8; 4];
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        oxmpi::request::scope(|s| {
            let _r = world.irecv_scoped(s, &mut held[..], 0, 90).unwrap();
            let l = world.irecv_scoped(s, &mut leaked[..], 0, 91).unwrap();
            std::mem::forget(l);
            panic!("deliberate panic in a scope");
        })
    }));
    assert!(caught.is_err());
    // Both receives were cancelled: messages sent now stay unmatched.
    world.send(&[1u8, 2, 3, 4][..], 0, 90).unwrap();
    world.send(&[5u8, 6, 7, 8][..], 0, 91).unwrap();
    assert_eq!((held, leaked), ([0; 4], [0; 4]));
    let mut b = [0u8; 4];
    assert_eq!(world.recv(&mut b[..], 0, 90).unwrap().tag(), 90);
    assert_eq!(b, [1, 2, 3, 4]);
    assert_eq!(world.recv(&mut b[..], 0, 91).unwrap().tag(), 91);
    assert_eq!(world.iprobe(ANY_SOURCE, ANY_TAG).unwrap(), None);
}
