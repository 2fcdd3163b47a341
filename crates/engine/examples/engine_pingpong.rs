//! Ping-pong latency/bandwidth through the engine API (run with 2 ranks, e.g.
//! `mpiexec.hydra -n 2 target/release/examples/engine_pingpong`). Prints one-way latency per
//! size on rank 0. Optional arguments: `MAX_BYTES` (default 4 MiB) and `ROUND_TRIPS` per sample
//! for small sizes (default 100), e.g. `engine_pingpong 8 1000` for a short run under
//! `valgrind --tool=callgrind`.

use oxmpi_engine::{init, CommId, SendMode, ThreadLevel};
use std::time::Instant;

fn main() {
    let e = init(ThreadLevel::Single).expect("init");
    assert_eq!(e.size(), 2, "run with 2 ranks");
    let me = e.rank();
    let peer = 1 - me;
    let w = CommId(0);
    let mut args = std::env::args().skip(1);
    let max: usize = args
        .next()
        .map_or(4 << 20, |a| a.parse().expect("MAX_BYTES"));
    let small_per: usize = args.next().map_or(100, |a| a.parse().expect("ROUND_TRIPS"));
    let sbuf = vec![1u8; max];
    let mut rbuf = vec![0u8; max];
    let mut len = 0usize;
    while len <= max {
        // Samples of `per` round trips; the median sample resists descheduling spikes.
        let (samples, per) = if len < 65536 {
            (200, small_per)
        } else {
            (21, 4)
        };
        let mut one_way = Vec::with_capacity(samples);
        for s in 0..samples + 2 {
            let t0 = Instant::now();
            for _ in 0..per {
                // SAFETY: buffers outlive each wait.
                unsafe {
                    if me == 0 {
                        let r = e
                            .isend(sbuf.as_ptr(), len, peer, 0, w, SendMode::Standard)
                            .unwrap();
                        e.wait(r);
                        let r = e.irecv(rbuf.as_mut_ptr(), len, peer, 0, w).unwrap();
                        e.wait(r);
                    } else {
                        let r = e.irecv(rbuf.as_mut_ptr(), len, peer, 0, w).unwrap();
                        e.wait(r);
                        let r = e
                            .isend(sbuf.as_ptr(), len, peer, 0, w, SendMode::Standard)
                            .unwrap();
                        e.wait(r);
                    }
                }
            }
            if s >= 2 {
                one_way.push(t0.elapsed().as_secs_f64() * 1e6 / per as f64 / 2.0);
            }
        }
        one_way.sort_by(f64::total_cmp);
        let med = one_way[one_way.len() / 2];
        if me == 0 {
            println!(
                "{len:>9} B  median {med:>10.3} us  min {:>10.3} us  {:>8.0} MB/s",
                one_way[0],
                if len > 0 { len as f64 / med } else { 0.0 }
            );
        }
        len = if len == 0 { 1 } else { len * 4 };
    }
    e.finalize().expect("finalize");
}
