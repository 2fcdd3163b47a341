//! Cost of a disabled `verbose!` message (run: `cargo bench -p oxmpi-base --bench verbose`).
//!
//! Prints nanoseconds per call; it asserts nothing (timing is machine-dependent).

use oxmpi_base::output::Stream;
use oxmpi_base::verbose;
use std::hint::black_box;
use std::time::Instant;

static BTL: Stream = Stream::new("btl");

#[derive(Debug)]
struct Expensive(u64);
impl std::fmt::Display for Expensive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Would be slow if it ran: proves formatting is skipped.
        std::thread::sleep(std::time::Duration::from_millis(1));
        write!(f, "{}", self.0)
    }
}

fn measure(label: &str, iters: u64, mut f: impl FnMut(u64)) {
    // Warm up, then take the best of 5 rounds.
    for i in 0..iters / 10 {
        f(i);
    }
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for i in 0..iters {
            f(black_box(i));
        }
        best = best.min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    println!("{label:<48} {best:>8.2} ns/call");
}

fn main() {
    BTL.set_verbosity(0);
    let n = 20_000_000;
    measure("empty loop (baseline)", n, |i| {
        black_box(i);
    });
    measure("verbose!(BTL, 40, ..) disabled, 2 args", n, |i| {
        verbose!(BTL, black_box(40), "sent {} bytes to {}", i, Expensive(i));
    });
    measure("BTL.enabled(40) (the check alone)", n, |i| {
        black_box(BTL.enabled(black_box(40 + (i as i32 & 1))));
    });
}
