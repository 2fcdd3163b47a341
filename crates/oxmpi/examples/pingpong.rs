//! Ping-pong between ranks 0 and 1: latency and bandwidth for message sizes from 0 bytes up to
//! a maximum; one round trip per size is checked byte by byte before the timed loop. Other
//! ranks only wait.
//!
//! Run: `mpirun -n 2 target/release/examples/pingpong [max_bytes] [iterations]`
//! (defaults: 4 MiB, 100 iterations; a tenth of that from 1 MiB on). Exits non-zero on a
//! wrong byte.

use std::time::Instant;

fn main() {
    if let Err(e) = run() {
        eprintln!("pingpong: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let max_bytes: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(4 << 20);
    let iterations: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(100);

    let universe = oxmpi::init()?;
    let world = universe.world();
    let rank = world.rank();
    if world.size() < 2 {
        return Err("pingpong needs at least 2 ranks".into());
    }
    if rank > 1 {
        return Ok(());
    }
    let peer = 1 - rank;
    if rank == 0 {
        println!("# oxmpi pingpong, {} ranks", world.size());
        println!("# {:>10} {:>12} {:>12}", "bytes", "latency_us", "MB/s");
    }

    let mut size = 0usize;
    let mut buf = vec![0u8; max_bytes];
    let mut back = vec![0u8; max_bytes];
    loop {
        let iters = if size >= 1 << 20 {
            iterations.div_ceil(10).max(2)
        } else {
            iterations
        };
        // One checked round trip per size (fresh content, so a stale buffer cannot pass),
        // then the timed loop, which does not touch the data.
        let stamp = (size as u8).wrapping_mul(31).wrapping_add(7);
        let expected = |k: usize| stamp.wrapping_add(k as u8);
        if rank == 0 {
            for (k, b) in buf[..size].iter_mut().enumerate() {
                *b = expected(k);
            }
            world.send(&buf[..size], peer, 0)?;
            let st = world.recv(&mut back[..size], peer, 0)?;
            if st.count_bytes() != size || back[..size] != buf[..size] {
                return Err(format!("size {size}: wrong data came back").into());
            }
        } else {
            let st = world.recv(&mut back[..size], peer, 0)?;
            let bad = back[..size]
                .iter()
                .enumerate()
                .any(|(k, &b)| b != expected(k));
            if st.count_bytes() != size || bad {
                return Err(format!("rank 1: size {size}: wrong data").into());
            }
            world.send(&back[..size], peer, 0)?;
        }

        let start = Instant::now();
        for _ in 0..iters {
            if rank == 0 {
                world.send(&buf[..size], peer, 1)?;
                world.recv(&mut back[..size], peer, 1)?;
            } else {
                world.recv(&mut back[..size], peer, 1)?;
                world.send(&back[..size], peer, 1)?;
            }
        }
        let secs = start.elapsed().as_secs_f64();
        if rank == 0 {
            let one_way = secs / (2.0 * iters as f64);
            println!(
                "  {:>10} {:>12.3} {:>12.1}",
                size,
                one_way * 1e6,
                size as f64 / one_way / 1e6
            );
        }
        if size >= max_bytes {
            break;
        }
        size = if size == 0 {
            1
        } else {
            (size * 2).min(max_bytes)
        };
    }
    if rank == 0 {
        println!("pingpong ok");
    }
    Ok(())
}
