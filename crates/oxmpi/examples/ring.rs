//! Passes a token around all ranks: rank 0 starts it, every rank adds its rank and forwards it
//! to the next one; then every rank swaps a value with both neighbours at once (nonblocking).
//!
//! Run: `mpirun -n 4 target/debug/examples/ring`. Exits non-zero if a check fails.

use oxmpi::Equivalence;

/// The token travelling around the ring.
#[derive(Equivalence, Clone, Copy, Debug, Default, PartialEq)]
#[repr(C)]
struct Token {
    hops: u32,
    sum: i64,
    last: i32,
}

fn main() {
    if let Err(e) = run() {
        eprintln!("ring: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let universe = oxmpi::init()?;
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;

    // Phase 1: the token goes around once.
    let mut token = [Token::default()];
    if rank == 0 {
        world.send(
            &[Token {
                hops: 0,
                sum: 0,
                last: 0,
            }][..],
            next,
            1,
        )?;
        let status = world.recv(&mut token[..], prev, 1)?;
        let t = token[0];
        let expected: i64 = (0..i64::from(size)).sum();
        println!(
            "rank 0: ring complete: token came back from rank {} after {} hops, sum {} (expected {})",
            status.source(),
            t.hops,
            t.sum,
            expected
        );
        if t.sum != expected || t.hops != size as u32 - 1 || t.last != prev {
            return Err(format!("bad token {t:?}").into());
        }
    } else {
        let status = world.recv(&mut token[..], prev, 1)?;
        let mut t = token[0];
        println!(
            "rank {rank} of {size}: got the token from rank {} (hops {}, sum {})",
            status.source(),
            t.hops,
            t.sum
        );
        t.hops += 1;
        t.sum += i64::from(rank);
        t.last = rank;
        world.send(&[t][..], next, 1)?;
    }
    // Phase 2: everyone exchanges with both neighbours at the same time.
    let mine = [f64::from(rank); 1000];
    let mut from_prev = [0f64; 1000];
    let mut from_next = [0f64; 1000];
    oxmpi::request::scope(|s| -> oxmpi::Result<()> {
        let requests = vec![
            world.irecv_scoped(s, &mut from_prev[..], prev, 2)?,
            world.irecv_scoped(s, &mut from_next[..], next, 3)?,
            world.isend_scoped(s, &mine[..], next, 2)?,
            world.isend_scoped(s, &mine[..], prev, 3)?,
        ];
        oxmpi::request::wait_all(requests)?;
        Ok(())
    })?;
    if from_prev.iter().any(|&v| v != f64::from(prev))
        || from_next.iter().any(|&v| v != f64::from(next))
    {
        return Err(format!("rank {rank}: wrong neighbour data").into());
    }
    println!("rank {rank}: neighbour exchange ok (prev {prev}, next {next})");
    Ok(())
}
