//! One process without a launcher: singleton bootstrap, the `self` transport, argument
//! checking. (One test function: the engine is per process.)
#![cfg(not(loom))]

use oxmpi_engine::{
    engine, init, CommId, ErrorClass, MessageId, ReqId, SendMode, Status, ThreadLevel, ANY_SOURCE,
    ANY_TAG, PROC_NULL,
};

#[test]
fn singleton_self_transport_and_errors() {
    for v in ["OXMPI_ENGINE_KVS_DIR", "PMI_FD", "PMI_PORT", "PMI_RANK"] {
        assert!(std::env::var_os(v).is_none(), "{v} set: not a singleton");
    }
    let e = init(ThreadLevel::Serialized).unwrap();
    assert!(init(ThreadLevel::Single).is_err(), "second init must fail");
    assert!(std::ptr::eq(engine().unwrap(), e));
    assert_eq!((e.rank(), e.size()), (0, 1));
    assert_eq!(e.thread_level(), ThreadLevel::Serialized);
    let w = e.comm_world();
    let s = e.comm_self();
    assert_eq!((e.comm_rank(w).unwrap(), e.comm_size(s).unwrap()), (0, 1));

    // Self sends of every size and mode; receive posted after the send (unexpected path)
    // and before it (posted path).
    for (i, len) in [0usize, 5, 4096, 4097, 1 << 20].into_iter().enumerate() {
        for mode in [
            SendMode::Standard,
            SendMode::Sync,
            SendMode::Buffered,
            SendMode::Ready,
        ] {
            let data: Vec<u8> = (0..len).map(|k| (k * 7 + i) as u8).collect();
            let mut buf = vec![0u8; len];
            // SAFETY: buffers outlive the waits.
            let sr = unsafe { e.isend(data.as_ptr(), len, 0, i as i32, w, mode) }.unwrap();
            // SAFETY: the buffers outlive the calls and hold the lengths given.
            let rr = unsafe { e.irecv(buf.as_mut_ptr(), len, ANY_SOURCE, ANY_TAG, w) }.unwrap();
            let st = e.wait(rr);
            assert_eq!(
                (st.source, st.tag, st.count_bytes, st.error),
                (0, i as i32, len, None)
            );
            assert_eq!(e.wait(sr).error, None);
            assert!(buf == data);
            buf.fill(0);
            // SAFETY: the buffers outlive the calls and hold the lengths given.
            let rr = unsafe { e.irecv(buf.as_mut_ptr(), len, 0, i as i32, s) }.unwrap();
            assert_eq!(e.test(rr), None);
            // SAFETY: the buffers outlive the calls and hold the lengths given.
            let sr = unsafe { e.isend(data.as_ptr(), len, 0, i as i32, s, mode) }.unwrap();
            assert_eq!(e.wait(rr).count_bytes, len);
            assert_eq!(e.wait(sr).error, None);
            assert!(buf == data);
        }
    }

    // A synchronous self send stays incomplete until the receive is posted.
    let data = [9u8; 10];
    // SAFETY: buffers outlive the waits.
    let sr = unsafe { e.isend(data.as_ptr(), 10, 0, 1, w, SendMode::Sync) }.unwrap();
    assert_eq!(e.test(sr), None);
    assert_eq!(
        e.iprobe(0, 1, w).unwrap().map(|s| (s.tag, s.count_bytes)),
        Some((1, 10))
    );
    let mut small = [0u8; 4];
    // SAFETY: the buffers outlive the calls and hold the lengths given.
    let rr = unsafe { e.irecv(small.as_mut_ptr(), 4, 0, 1, w) }.unwrap();
    let st = e.wait(rr);
    assert_eq!((st.error, st.count_bytes), (Some(ErrorClass::Truncate), 4));
    assert_eq!(small, [9; 4]);
    assert_eq!(e.wait(sr).error, None);

    // mprobe / imrecv on self.
    // SAFETY: the buffers outlive the calls and hold the lengths given.
    let sr = unsafe { e.isend(data.as_ptr(), 10, 0, 2, w, SendMode::Standard) }.unwrap();
    assert_eq!(e.wait(sr).error, None);
    let (m, st) = e.improbe(ANY_SOURCE, 2, w).unwrap().unwrap();
    assert_eq!(st.count_bytes, 10);
    assert_eq!(e.iprobe(ANY_SOURCE, ANY_TAG, w).unwrap(), None);
    let mut b = [0u8; 10];
    // SAFETY: the buffers outlive the calls and hold the lengths given.
    let rr = unsafe { e.imrecv(b.as_mut_ptr(), 10, m) }.unwrap();
    assert_eq!(e.wait(rr).count_bytes, 10);
    assert_eq!(b, data);
    assert_eq!(
        // SAFETY: the buffers outlive the calls and hold the lengths given.
        unsafe { e.imrecv(b.as_mut_ptr(), 10, m) }
            .unwrap_err()
            .class(),
        ErrorClass::Request
    );

    // PROC_NULL.
    // SAFETY: the buffers outlive the calls and hold the lengths given.
    let r = unsafe { e.isend(data.as_ptr(), 10, PROC_NULL, 0, w, SendMode::Standard) }.unwrap();
    assert_eq!(e.wait(r), Status::PROC_NULL);
    // SAFETY: the buffers outlive the calls and hold the lengths given.
    let r = unsafe { e.irecv(b.as_mut_ptr(), 10, PROC_NULL, 0, w) }.unwrap();
    assert_eq!(e.wait(r), Status::PROC_NULL);
    assert_eq!(e.mprobe(PROC_NULL, 0, w).unwrap().0, MessageId::NO_PROC);

    // Cancel.
    // SAFETY: the buffers outlive the calls and hold the lengths given.
    let r = unsafe { e.irecv(b.as_mut_ptr(), 10, 0, 3, w) }.unwrap();
    e.cancel(r);
    assert!(e.wait(r).cancelled);

    // Bad arguments.
    let class = |r: Result<ReqId, oxmpi_engine::Error>| r.unwrap_err().class();
    // SAFETY: the buffers outlive the calls and hold the lengths given.
    unsafe {
        assert_eq!(
            class(e.isend(data.as_ptr(), 1, 1, 0, w, SendMode::Standard)),
            ErrorClass::Rank
        );
        assert_eq!(
            class(e.isend(data.as_ptr(), 1, 0, -5, w, SendMode::Standard)),
            ErrorClass::Tag
        );
        assert_eq!(
            class(e.isend(data.as_ptr(), 1, 0, 0, CommId(99), SendMode::Standard)),
            ErrorClass::Comm
        );
        assert_eq!(
            class(e.isend(std::ptr::null(), 1, 0, 0, w, SendMode::Standard)),
            ErrorClass::Buffer
        );
        assert_eq!(class(e.irecv(b.as_mut_ptr(), 1, 3, 0, w)), ErrorClass::Rank);
        assert_eq!(class(e.irecv(b.as_mut_ptr(), 1, 0, -7, w)), ErrorClass::Tag);
    }
    assert_eq!(e.iprobe(5, 0, w).unwrap_err().class(), ErrorClass::Rank);
    assert_eq!(e.wait(ReqId(123_456)).error, Some(ErrorClass::Request));

    // Communicator table.
    let c = e.comm_create(7, vec![0]).unwrap();
    assert_eq!(e.comm_context(c).unwrap(), 7);
    assert_eq!(
        e.comm_create(7, vec![0]).unwrap_err().class(),
        ErrorClass::Comm
    );
    assert_eq!(
        e.comm_create(8, vec![]).unwrap_err().class(),
        ErrorClass::Group
    );
    // Messages on different contexts do not match each other.
    // SAFETY: the buffers outlive the calls and hold the lengths given.
    let sr = unsafe { e.isend(data.as_ptr(), 10, 0, 4, c, SendMode::Standard) }.unwrap();
    e.wait(sr);
    assert_eq!(e.iprobe(0, 4, w).unwrap(), None);
    assert!(e.iprobe(0, 4, c).unwrap().is_some());
    // SAFETY: the buffers outlive the calls and hold the lengths given.
    let rr = unsafe { e.irecv(b.as_mut_ptr(), 10, 0, 4, c) }.unwrap();
    assert_eq!(e.wait(rr).error, None);
    e.comm_free(c).unwrap();
    assert_eq!(e.comm_rank(c).unwrap_err().class(), ErrorClass::Comm);
    assert_eq!(e.comm_free(w).unwrap_err().class(), ErrorClass::Comm);

    e.finalize().unwrap();
    // SAFETY: the buffers outlive the calls and hold the lengths given.
    assert!(unsafe { e.isend(data.as_ptr(), 1, 0, 0, w, SendMode::Standard) }.is_err());
}
