//! rsmpi on oxmpi: hello and a token ring over all ranks.
//!
//! Run under `mpirun -n N`. Prints `hello from rank R of N (<library version>)` per rank,
//! passes a token around the ring twice (each rank adds its rank), checks the sums, then a
//! barrier; rank 0 prints `ring ok: ...`. Any mismatch aborts the job with exit code 3.

use mpi::traits::*;

fn main() {
    let universe = mpi::initialize().expect("MPI_Init failed (already initialized?)");
    let world = universe.world();
    let rank = world.rank();
    let size = world.size();
    let lib = mpi::environment::library_version().unwrap_or_else(|_| "?".into());
    let (major, minor) = mpi::environment::version();
    println!(
        "hello from rank {rank} of {size} (MPI {major}.{minor}, {})",
        lib.lines().next().unwrap_or("").trim()
    );
    if !lib.starts_with("oxmpi") {
        eprintln!("rank {rank}: not running on oxmpi: library version {lib:?}");
        world.abort(3);
    }

    let next = (rank + 1) % size;
    let prev = (rank + size - 1) % size;
    // Expected token after one full round: 0 + 1 + ... + (size-1).
    let round: i64 = (0..i64::from(size)).sum();
    for lap in 1..=2i64 {
        let expected = lap * round;
        if size == 1 {
            let token = (lap - 1) * round;
            if token + i64::from(rank) != expected {
                world.abort(3);
            }
            continue;
        }
        if rank == 0 {
            let start: i64 = (lap - 1) * round;
            world
                .process_at_rank(next)
                .send_with_tag(&start, 10 + lap as i32);
            let (token, status) = world
                .process_at_rank(prev)
                .receive_with_tag::<i64>(10 + lap as i32);
            if token != expected || status.source_rank() != prev {
                eprintln!(
                    "rank 0: lap {lap}: token {token} from {}, expected {expected} from {prev}",
                    status.source_rank()
                );
                world.abort(3);
            }
        } else {
            let (token, _) = world
                .process_at_rank(prev)
                .receive_with_tag::<i64>(10 + lap as i32);
            world
                .process_at_rank(next)
                .send_with_tag(&(token + i64::from(rank)), 10 + lap as i32);
        }
    }
    // A vector message from every rank to rank 0 through a wildcard receive.
    if rank != 0 {
        let v: Vec<i32> = (0..1000).map(|i| i * rank).collect();
        world.process_at_rank(0).send_with_tag(&v[..], 20);
    } else {
        let mut seen = vec![false; size as usize];
        for _ in 1..size {
            let (v, status) = world.any_process().receive_vec_with_tag::<i32>(20);
            let src = status.source_rank();
            let ok = v.len() == 1000 && v.iter().enumerate().all(|(i, &x)| x == i as i32 * src);
            if !ok || seen[src as usize] {
                eprintln!("rank 0: bad vector from rank {src} (len {})", v.len());
                world.abort(3);
            }
            seen[src as usize] = true;
        }
    }
    world.barrier();
    if rank == 0 {
        println!("ring ok: {size} ranks, 2 laps, token {}", 2 * round);
    }
}
