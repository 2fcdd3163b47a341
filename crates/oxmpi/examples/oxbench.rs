//! oxbench in Rust: the MPI micro-benchmarks of the oxmpi benchmark harness, written with the
//! safe API. Same command line and output as the C `oxbench` of the harness, so the harness can
//! run both and compare.
//!
//! usage: `oxbench TESTS SAMPLES SCALE SIZE...`
//! * TESTS: comma list of `lat`, `bw`, `bibw`, `allreduce`, `bcast`, `alltoall`, `barrier`
//! * SAMPLES: samples per (test, size); each sample times `n` iterations
//! * SCALE: multiplier of the default iteration counts (e.g. 0.2 for quick runs)
//! * SIZE: message sizes in bytes (0 allowed; barrier ignores sizes)
//!
//! Output (printed by rank 0; `BIND`/`RSS` lines for every rank):
//! ```text
//! BIND rank=R cpus=LIST
//! RESULT test=T np=P size=S iters=N samples=K median=X min=X max=X mean=X unit=U values=X;X;...
//! RSS prog=oxbench-rs rank=R kb=K
//! ```
//! Latency-like tests report microseconds per operation (ping-pong: one way, half the round
//! trip); `bw`/`bibw` report MB/s (1e6 bytes per second); for collectives each sample is the
//! slowest rank's time.
//!
//! One difference from C: safe Rust cannot post many receives into one buffer, so in `bw` and
//! `bibw` the receiving side takes the window's messages with blocking receives, one after the
//! other, into one buffer (the sends are posted nonblocking, all at once, as in C).

use std::time::Instant;

use oxmpi::Communicator;

const WINDOW: usize = 64;
const MAX_SAMPLES: usize = 1000;

fn main() {
    if let Err(e) = run() {
        eprintln!("oxbench: {e}");
        std::process::exit(1);
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Rank 0 prints one line per rank, collected with point-to-point messages.
fn print_from_all(world: &Communicator<'_>, mine: &str) -> Res<()> {
    if world.rank() == 0 {
        print!("{mine}");
        for r in 1..world.size() {
            let (line, _) = world.recv_vec::<u8>(r, 98)?;
            print!("{}", String::from_utf8_lossy(&line));
        }
    } else {
        world.send(mine.as_bytes(), 0, 98)?;
    }
    Ok(())
}

fn proc_status(field: &str) -> Option<String> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(field))
        .map(|v| v.trim().to_string())
}

fn report(test: &str, np: i32, size: usize, n: usize, v: &[f64], unit: &str) {
    let mut sorted = v.to_vec();
    sorted.sort_by(f64::total_cmp);
    let s = sorted.len();
    let med = if s % 2 == 1 {
        sorted[s / 2]
    } else {
        0.5 * (sorted[s / 2 - 1] + sorted[s / 2])
    };
    let mean = v.iter().sum::<f64>() / s as f64;
    let values: Vec<String> = v.iter().map(|x| format!("{x:.4}")).collect();
    // One write per line, so launchers never interleave it with other output.
    println!(
        "RESULT test={test} np={np} size={size} iters={n} samples={s} median={med:.4} min={:.4} \
         max={:.4} mean={mean:.4} unit={unit} values={}",
        sorted[0],
        sorted[s - 1],
        values.join(";")
    );
}

fn iters(base: f64, scale: f64, lo: usize) -> usize {
    ((base * scale) as usize).max(lo)
}

/// Start-of-sample synchronisation of ranks 0 and 1 with a zero-byte exchange.
fn sync2(w: &Communicator<'_>) -> Res<()> {
    let mut none = [0u8; 0];
    match w.rank() {
        0 => {
            w.send(&none[..], 1, 97)?;
            w.recv(&mut none[..], 1, 97)?;
        }
        1 => {
            w.recv(&mut none[..], 0, 97)?;
            w.send(&none[..], 0, 97)?;
        }
        _ => {}
    }
    Ok(())
}

fn pingpong(w: &Communicator<'_>, buf: &mut [u8]) -> Res<()> {
    match w.rank() {
        0 => {
            w.send(buf, 1, 1)?;
            w.recv(buf, 1, 1)?;
        }
        1 => {
            w.recv(buf, 0, 1)?;
            w.send(buf, 0, 1)?;
        }
        _ => {}
    }
    Ok(())
}

fn lat(w: &Communicator<'_>, buf: &mut [u8], samples: usize, scale: f64) -> Res<()> {
    let sz = buf.len();
    let base = if sz <= 8192 {
        2000.0
    } else if sz <= 1 << 20 {
        100.0
    } else {
        20.0
    };
    let n = iters(base, scale, 5);
    for _ in 0..n / 4 + 2 {
        pingpong(w, buf)?; // warm-up
    }
    let mut v = Vec::with_capacity(samples);
    for _ in 0..samples {
        sync2(w)?;
        let t0 = Instant::now();
        for _ in 0..n {
            pingpong(w, buf)?;
        }
        v.push(t0.elapsed().as_secs_f64() / n as f64 / 2.0 * 1e6);
    }
    if w.rank() == 0 {
        report("lat", w.size(), sz, n, &v, "us");
    }
    Ok(())
}

/// One window: rank 0 sends WINDOW messages (bidir: both ranks do, and both receive), then
/// rank 1 acknowledges with a small message.
fn window(w: &Communicator<'_>, sbuf: &[u8], rbuf: &mut [u8], bidir: bool) -> Res<()> {
    let rank = w.rank();
    if rank > 1 {
        return Ok(());
    }
    let peer = 1 - rank;
    oxmpi::request::scope(|s| -> Res<()> {
        let mut sends = Vec::new();
        if rank == 0 || bidir {
            for _ in 0..WINDOW {
                sends.push(w.isend_scoped(s, sbuf, peer, 2)?);
            }
        }
        if rank == 1 || bidir {
            for _ in 0..WINDOW {
                w.recv(rbuf, peer, 2)?;
            }
        }
        oxmpi::request::wait_all(sends)?;
        Ok(())
    })?;
    let mut ack = [0u8];
    if rank == 0 {
        w.recv(&mut ack[..], 1, 3)?;
    } else {
        w.send(&ack[..], 0, 3)?;
    }
    Ok(())
}

fn bw(
    w: &Communicator<'_>,
    sbuf: &[u8],
    rbuf: &mut [u8],
    samples: usize,
    scale: f64,
    bidir: bool,
) -> Res<()> {
    let sz = sbuf.len();
    let base = if sz <= 8192 {
        100.0
    } else if sz <= 1 << 20 {
        10.0
    } else {
        3.0
    };
    let n = iters(base, scale, 2);
    window(w, sbuf, rbuf, bidir)?; // warm-up
    let mut v = Vec::with_capacity(samples);
    for _ in 0..samples {
        sync2(w)?;
        let t0 = Instant::now();
        for _ in 0..n {
            window(w, sbuf, rbuf, bidir)?;
        }
        let dt = t0.elapsed().as_secs_f64();
        let factor = if bidir { 2.0 } else { 1.0 };
        v.push(sz as f64 * WINDOW as f64 * n as f64 * factor / dt / 1e6);
    }
    if w.rank() == 0 {
        report(
            if bidir { "bibw" } else { "bw" },
            w.size(),
            sz,
            n,
            &v,
            "MB/s",
        );
    }
    Ok(())
}

/// Pairwise exchange: block `r` of `send` goes to rank `r`, block `r` of `recv` comes from it.
fn alltoall(w: &Communicator<'_>, send: &[u8], recv: &mut [u8], sz: usize) -> Res<()> {
    let (rank, np) = (w.rank(), w.size());
    oxmpi::request::scope(|s| -> Res<()> {
        let mut reqs = Vec::new();
        for (r, block) in recv.chunks_mut(sz).take(np as usize).enumerate() {
            reqs.push(w.irecv_scoped(s, block, r as i32, 4)?);
        }
        for k in 0..np {
            let r = (rank + k) % np;
            let at = r as usize * sz;
            reqs.push(w.isend_scoped(s, &send[at..at + sz], r, 4)?);
        }
        oxmpi::request::wait_all(reqs)?;
        Ok(())
    })
}

/// Slowest rank's time, gathered on rank 0.
fn max_over_ranks(w: &Communicator<'_>, t: f64) -> Res<f64> {
    let mut m = [0f64];
    w.reduce(0, &[t][..], &mut m[..], f64::max)?;
    Ok(m[0])
}

#[allow(clippy::too_many_arguments)]
fn coll(
    w: &Communicator<'_>,
    test: &str,
    sbuf: &mut [u8],
    rbuf: &mut [u8],
    sz: usize,
    samples: usize,
    scale: f64,
) -> Res<()> {
    let big = sz > 65536;
    let mut n = iters(if big { 20.0 } else { 500.0 }, scale, 3);
    if w.size() > 2 {
        n = iters(if big { 5.0 } else { 20.0 }, scale, 2); // oversubscribed: keep it short
    }
    let floats = sz / 4;
    let fsend = vec![1.0f32; floats];
    let mut frecv = vec![0f32; floats];
    let mut v = Vec::with_capacity(samples);
    for s in 0..=samples {
        // s == 0 is the warm-up
        w.barrier()?;
        let t0 = Instant::now();
        for _ in 0..n {
            match test {
                "allreduce" => w.all_reduce(&fsend[..], &mut frecv[..], |a, b| a + b)?,
                "bcast" => w.broadcast(0, &mut sbuf[..sz])?,
                "alltoall" => alltoall(w, sbuf, rbuf, sz)?,
                _ => w.barrier()?,
            }
        }
        let t = max_over_ranks(w, t0.elapsed().as_secs_f64() / n as f64 * 1e6)?;
        if s > 0 {
            v.push(t);
        }
    }
    if w.rank() == 0 {
        report(test, w.size(), sz, n, &v, "us");
    }
    Ok(())
}

fn run() -> Res<()> {
    let args: Vec<String> = std::env::args().collect();
    let universe = oxmpi::init()?;
    let w = universe.world();
    let (rank, np) = (w.rank(), w.size());
    if args.len() < 4 {
        return Err("usage: oxbench TESTS SAMPLES SCALE SIZE...".into());
    }
    let samples = args[2].parse::<usize>()?.clamp(1, MAX_SAMPLES);
    let scale: f64 = args[3].parse()?;
    let sizes = args[4..]
        .iter()
        .map(|a| a.parse::<usize>())
        .collect::<Result<Vec<_>, _>>()?;
    let maxsz = sizes.iter().copied().max().unwrap_or(1).max(1);
    // alltoall needs np blocks on both sides
    let mut sbuf = vec![(rank + 1) as u8; maxsz * np as usize];
    let mut rbuf = vec![0u8; maxsz * np as usize];
    let cpus = proc_status("Cpus_allowed_list:").unwrap_or_else(|| "?".into());
    print_from_all(&w, &format!("BIND rank={rank} cpus={cpus}\n"))?;

    for test in args[1].split(',') {
        if test == "barrier" {
            coll(&w, test, &mut sbuf, &mut rbuf, 0, samples, scale)?;
            continue;
        }
        for &sz in &sizes {
            match test {
                "lat" | "bw" | "bibw" => {
                    if np < 2 {
                        continue;
                    }
                    if test == "lat" {
                        lat(&w, &mut sbuf[..sz], samples, scale)?;
                    } else if sz > 0 {
                        bw(
                            &w,
                            &sbuf[..sz],
                            &mut rbuf[..sz],
                            samples,
                            scale,
                            test == "bibw",
                        )?;
                    }
                }
                "allreduce" => {
                    if sz >= 4 {
                        coll(&w, test, &mut sbuf, &mut rbuf, sz, samples, scale)?;
                    }
                }
                _ => {
                    if sz > 0 {
                        coll(&w, test, &mut sbuf, &mut rbuf, sz, samples, scale)?;
                    }
                }
            }
        }
    }
    let kb = proc_status("VmHWM:")
        .and_then(|v| v.trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    print_from_all(&w, &format!("RSS prog=oxbench-rs rank={rank} kb={kb}\n"))?;
    Ok(())
}
