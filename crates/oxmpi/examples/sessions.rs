//! The Sessions Model without `oxmpi::init`: two sessions side by side, communicators made
//! from the process sets and from a subgroup, a bad process set name, and a new session
//! after every session was finalized. The library goes down when the process exits.
//! With the argument `world`, a universe (the World Model) runs next to the sessions.
//!
//! Run: `mpirun -n 3 target/debug/examples/sessions [world]`. Exits non-zero if a check
//! fails; each rank prints `rank R: sessions ok` at the end.

use oxmpi::session::{Session, PSETS};
use oxmpi::{ErrorClass, ThreadLevel};

fn main() {
    if let Err(e) = run() {
        eprintln!("sessions: {e}");
        std::process::exit(1);
    }
}

/// Fails with `what` unless `ok`.
fn check(ok: bool, what: &str) -> Result<(), Box<dyn std::error::Error>> {
    if ok {
        Ok(())
    } else {
        Err(format!("check failed: {what}").into())
    }
}

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let with_world = std::env::args().nth(1).as_deref() == Some("world");
    let universe = if with_world {
        Some(oxmpi::init()?)
    } else {
        None
    };
    let a = Session::init(ThreadLevel::Multiple)?;
    let b = Session::init(ThreadLevel::Single)?;
    check(a.pset_names() == PSETS, "the process sets")?;
    let n = a.pset_size("mpi://WORLD")?;
    check(
        a.pset_size("mpi://SELF")? == 1,
        "mpi://SELF has one process",
    )?;
    check(
        (1..=n).contains(&a.pset_size("mpix://SHARED")?),
        "mpix://SHARED within the world",
    )?;
    let e = a.group_from_pset("mpi://NOWHERE").unwrap_err();
    check(
        e.class() == ErrorClass::Arg,
        "an unknown set is MPI_ERR_ARG",
    )?;

    // A communicator over the world set from each session, used at once.
    let wa = a.group_from_pset("mpi://WORLD")?;
    let me = wa.rank().ok_or("not in mpi://WORLD")?;
    let ca = a.comm_from_group(&wa, "org.oxmpi.example.a")?;
    let cb = b.comm_from_group(&b.group_from_pset("mpi://WORLD")?, "org.oxmpi.example.b")?;
    check(
        (ca.rank(), ca.size()) == (me, n as i32),
        "rank and size of the world communicator",
    )?;
    let mut sum = [0i64];
    ca.all_reduce(&[i64::from(me)][..], &mut sum[..], |x, y| x + y)?;
    let total = i64::from(n as i32) * i64::from(n as i32 - 1) / 2;
    check(sum[0] == total, "allreduce over session a's communicator")?;
    // Messages on one communicator never match receives on the other.
    let peer = (me + 1) % n as i32;
    let from = (me + n as i32 - 1) % n as i32;
    let mut got = [-1i32];
    cb.sendrecv(&[me][..], peer, 5, &mut got[..], from, 5)?;
    check(got[0] == from, "ring over session b's communicator")?;
    check(
        ca.iprobe(oxmpi::ANY_SOURCE, oxmpi::ANY_TAG)?.is_none(),
        "nothing stray on a",
    )?;

    // The subgroup of the even world ranks (only its members call).
    let evens: Vec<i32> = (0..n as i32).step_by(2).collect();
    let g = wa.incl(&evens)?;
    match g.rank() {
        Some(r) => {
            let c = a.comm_from_group(&g, "org.oxmpi.example.evens")?;
            check(
                (c.rank(), c.size()) == (r, evens.len() as i32),
                "rank and size of the even ranks' communicator",
            )?;
            let mut all = vec![0i32; evens.len()];
            c.all_gather(&[me][..], &mut all[..])?;
            check(all == evens, "allgather over the even ranks")?;
        }
        None => {
            let e = a
                .comm_from_group(&g, "org.oxmpi.example.evens")
                .unwrap_err();
            check(
                e.class() == ErrorClass::Group,
                "a non-member gets MPI_ERR_GROUP",
            )?;
        }
    }
    drop((ca, cb));
    a.finalize()?;
    drop(b);

    // Every session is gone: a new one still works.
    let again = Session::init(ThreadLevel::Single)?;
    let c = again.comm_from_group(&again.group_from_pset("mpi://WORLD")?, "again")?;
    c.barrier()?;
    let mut max = [0i32];
    c.all_reduce(&[me][..], &mut max[..], i32::max)?;
    check(max[0] == n as i32 - 1, "allreduce after a re-init")?;
    if let Some(u) = &universe {
        let w = u.world();
        check(w.rank() == me, "the universe's world next to the sessions")?;
        w.barrier()?;
    }
    drop(c);
    drop(again);
    println!("rank {me}: sessions ok");
    if let Some(u) = universe {
        u.finalize()?;
    }
    Ok(())
}
