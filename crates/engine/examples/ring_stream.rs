//! Streams small records through one shared-memory ring between two threads and prints
//! the time per record of the fastest of several batches, for records of one slot (two per
//! cache line) and of two slots (one per line). It isolates what the ring's line transfers
//! cost from the rest of a message's path:
//! `cargo run --release -p oxmpi-engine --example ring_stream [RECORDS] [BATCHES]`.
//! A batch is one burst of `RECORDS` records (default 64, as in a window of the `bw`
//! benchmark), pushed as fast as the ring takes them while the other thread consumes them;
//! the threads meet between batches. Run it on an otherwise idle machine: the threads must
//! run on two CPUs at once.

use oxmpi_engine::ring::{record_bytes, Consumer, Producer, RingMem, CTL_BYTES, LINE};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The ring of the sm transport (256 KiB) and its control block, 64-byte aligned.
const CAP: usize = 256 << 10;

#[repr(C, align(64))]
struct Line([u8; LINE]);

/// One run: `records` records of `len` bytes per batch, `batches` batches; returns the
/// fastest batch's nanoseconds per record.
fn run(len: usize, records: usize, batches: usize) -> f64 {
    let mut mem: Vec<Line> = (0..(CTL_BYTES + CAP) / LINE)
        .map(|_| Line([0; LINE]))
        .collect();
    let base = mem.as_mut_ptr().cast::<u8>();
    debug_assert_eq!(base as usize % LINE, 0);
    // SAFETY: `mem` is 64-byte aligned, zeroed, CTL_BYTES + CAP bytes long and outlives both
    // threads (joined in the scope); one producer and one consumer use it.
    let ring = unsafe { RingMem::from_raw(base, CAP) };
    let (mut p, mut c) = (Producer::new(ring.clone()), Consumer::new(ring));
    // Batch handshake: the consumer publishes how many batches it finished.
    let done = Arc::new(AtomicU64::new(0));
    let payload = vec![7u8; len];
    let mut best = f64::MAX;
    std::thread::scope(|s| {
        let done_c = Arc::clone(&done);
        s.spawn(move || {
            for b in 0..batches as u64 {
                let mut got = 0;
                while got < records {
                    match c.peek().expect("ring corrupt") {
                        Some((ptr, n)) => {
                            // SAFETY: peek returned n readable bytes; read the last one as a
                            // receiver copies the payload.
                            std::hint::black_box(unsafe { ptr.add(n - 1).read() });
                            c.release();
                            got += 1;
                        }
                        None => std::hint::spin_loop(),
                    }
                }
                done_c.store(b + 1, Ordering::Release);
            }
        });
        for b in 0..batches as u64 {
            let t0 = Instant::now();
            for _ in 0..records {
                // SAFETY: fill writes exactly `len` bytes.
                while !p.push(len, |d| unsafe {
                    std::ptr::copy_nonoverlapping(payload.as_ptr(), d, len)
                }) {
                    std::hint::spin_loop();
                }
            }
            while done.load(Ordering::Acquire) <= b {
                std::hint::spin_loop();
            }
            best = best.min(t0.elapsed().as_nanos() as f64 / records as f64);
        }
    });
    drop(mem);
    best
}

fn main() {
    let mut args = std::env::args().skip(1);
    let records: usize = args.next().map_or(64, |a| a.parse().expect("RECORDS"));
    let batches: usize = args.next().map_or(20000, |a| a.parse().expect("BATCHES"));
    // 24 bytes: the sm link's compact eager header (16) and 8 payload bytes, one 32-byte
    // slot; 48 bytes: the whole 40-byte header and 8 payload bytes, one line.
    for round in 0..3 {
        for len in [24usize, 48] {
            println!(
                "round {round} record {len:>2} B ({} per line): {:.1} ns per record (fastest batch of {records})",
                LINE / record_bytes(len),
                run(len, records, batches)
            );
        }
    }
}
