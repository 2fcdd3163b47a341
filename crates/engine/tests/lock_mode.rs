//! The engine's lock at `MPI_THREAD_SINGLE` in one process (a singleton): plain (no atomic
//! read-modify-write) while one thread uses the engine, atomic for good once
//! [`expect_threads`] announced another thread, which then sends and receives next to this
//! one. (One test function: the engine is per process.)
#![cfg(not(loom))]

use oxmpi_engine::{engine, expect_threads, init, SendMode, ThreadLevel};

/// `n` self messages of 100 bytes on `comm` (tags `tag0..`), each received and checked.
fn self_messages(comm: oxmpi_engine::CommId, tag0: i32, n: i32) {
    let e = engine().unwrap();
    for i in 0..n {
        let data: Vec<u8> = (0..100).map(|k| (k * 3 + i + tag0) as u8).collect();
        let mut buf = [0u8; 100];
        // SAFETY: the buffers outlive the waits and hold the lengths given.
        let rr = unsafe { e.irecv(buf.as_mut_ptr(), 100, 0, tag0 + i, comm) }.unwrap();
        // SAFETY: as above.
        let sr =
            unsafe { e.isend(data.as_ptr(), 100, 0, tag0 + i, comm, SendMode::Standard) }.unwrap();
        assert_eq!(e.wait(sr).error, None);
        let st = e.wait(rr);
        assert_eq!((st.tag, st.count_bytes, st.error), (tag0 + i, 100, None));
        assert!(buf[..] == data[..]);
    }
}

#[test]
fn lock_is_plain_until_another_thread_is_announced() {
    for v in ["OXMPI_ENGINE_KVS_DIR", "PMI_FD", "PMI_PORT", "PMI_RANK"] {
        assert!(std::env::var_os(v).is_none(), "{v} set: not a singleton");
    }
    let e = init(ThreadLevel::Single).unwrap();
    assert!(
        !e.lock_shared(),
        "one thread at MPI_THREAD_SINGLE: the plain lock"
    );
    let (w, s) = (e.comm_world(), e.comm_self());
    self_messages(w, 0, 100);
    assert!(!e.lock_shared());
    expect_threads("the test's second thread");
    assert!(e.lock_shared(), "announced another thread: the atomic lock");
    let other = std::thread::spawn(move || self_messages(s, 1, 20_000));
    self_messages(w, 0, 20_000);
    other.join().unwrap();
    // For good.
    expect_threads("again");
    assert!(e.lock_shared());
    e.finalize().unwrap();
}
