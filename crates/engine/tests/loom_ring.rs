//! Loom model check of the shared-memory ring (run with
//! `RUSTFLAGS="--cfg loom" cargo test -p oxmpi-engine --test loom_ring --release`).
#![cfg(loom)]

use loom::sync::Arc;
use oxmpi_engine::ring::{Consumer, Producer, RingCtl, RingMem};

const CAP: usize = 256;

/// Streams records of `lens` bytes through a ring of `cap` bytes, one producer thread and
/// one consumer, checking every byte and the order.
fn stream(cap: usize, lens: &'static [usize]) {
    stream_hot(cap, None, lens)
}

/// As [`stream`], with the producer keeping to the first `hot` bytes when it finds the ring
/// empty (`Producer::hot_wrap`; it loads `tail` before each record, as on a ping-pong's
/// turn, so that it starts over early whenever the consumer has caught up).
fn stream_hot(cap: usize, hot: Option<usize>, lens: &'static [usize]) {
    loom::model(move || {
        let ctl = Arc::new(RingCtl::new());
        // u64 storage keeps the data area 8-byte aligned (frames are read as u64).
        let mut data = vec![0u64; cap / 8];
        let data_ptr = data.as_mut_ptr().cast::<u8>();
        // SAFETY: ctl and data outlive both threads (joined below); one producer, one consumer.
        let mem = unsafe { RingMem::from_parts(Arc::as_ptr(&ctl), data_ptr, cap) };
        let mut prod = Producer::new(mem.clone());
        let mut cons = Consumer::new(mem);
        if let Some(h) = hot {
            prod.hot_wrap(h);
        }
        let t = loom::thread::spawn(move || {
            for (k, &len) in lens.iter().enumerate() {
                if hot.is_some() {
                    prod.is_drained();
                }
                loop {
                    // SAFETY: fill writes exactly `len` bytes.
                    let ok = prod.push(len, |dst| unsafe {
                        for i in 0..len {
                            dst.add(i).write((k * 31 + i) as u8);
                        }
                    });
                    if ok {
                        break;
                    }
                    loom::thread::yield_now();
                }
            }
        });
        for (k, &len) in lens.iter().enumerate() {
            loop {
                match cons.peek().expect("ring corrupt") {
                    Some((p, n)) => {
                        assert_eq!(n, len);
                        for i in 0..n {
                            // SAFETY: peek returned n readable bytes.
                            assert_eq!(unsafe { p.add(i).read() }, (k * 31 + i) as u8);
                        }
                        cons.release();
                        break;
                    }
                    None => loom::thread::yield_now(),
                }
            }
        }
        t.join().unwrap();
        drop(data);
    });
}

#[test]
fn spsc_ring_orders_and_wraps() {
    // 32 + 96 + 128 + 64 record bytes > CAP: forces waits for space, a pad at the end, and
    // frames on slots that held other records' payload before.
    stream(CAP, &[10, 60, 100, 30]);
}

/// Small records two to a cache line (32-byte slots): the consumer reads and clears one
/// half of a line while the producer writes the other half; with a 128-byte ring the last
/// record (64 bytes at byte 96) pads the end and waits for space at the start, on slots
/// cleared on the previous lap.
#[test]
fn small_records_share_lines() {
    stream(128, &[8, 20, 24, 40]);
}

/// Large records (96 bytes and more under loom) keep payload words that read as frames in
/// their slots after the first, since the consumer clears only their frame; the next lap's
/// 8-byte records end on two of those slots (32 and 64), which the producer must zero before
/// it publishes each record: otherwise the consumer takes the stale word for a frame.
#[test]
fn large_records_leave_slots_the_producer_scrubs() {
    stream(CAP, &[100, 120, 8, 8]);
}

/// Early pads: with a hot part of 64 bytes, a record that would start past byte 64 of an
/// empty ring starts over at 0 behind a pad over the rest of the area, which the consumer
/// skips like the pad at the end. The large record (128 bytes at 32) leaves payload words
/// that read as frames at 64, 96 and 128; the record after the early pad (64 bytes at 0)
/// ends on 64, which the producer must scrub before publishing it; and when the consumer
/// has not caught up, the producer must not start over (it would overwrite records not
/// yet read).
#[test]
fn early_pads_keep_a_ping_pong_at_the_start() {
    stream_hot(CAP, Some(64), &[8, 100, 40, 8]);
}
