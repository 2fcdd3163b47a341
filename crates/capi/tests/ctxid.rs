//! Context ids of freed communicators are reused (`src/ctxid.rs`): `tests/c/ctx_reuse.c`
//! creates and frees communicators in loops far past the number of ids, over the engine's
//! matching (np 2 and 4) and under `pml cm` over `tcp;ofi_rxm`, whose tag carries 8176
//! ids; a window of live communicators freed oldest first needs the masks' agreement;
//! holding every id fails with `MPI_ERR_OTHER` and its one-line report, never a hang.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).

use std::ffi::OsStr;
use std::path::Path;
use std::process::Output;

mod common;
use common::{build, mpirun, success, Scratch};
use oxmpi_capi::consts::MPI_ERR_OTHER;
use oxmpi_engine::mtl::ofi::tag::Layout;

/// Runs `exe` with `prog_args` on `n` ranks with the extra mpirun `opts` (and `env`).
fn run(exe: &Path, n: usize, opts: &[&str], env: &[(&str, &OsStr)], prog_args: &[&str]) -> Output {
    let n_s = n.to_string();
    let mut argv: Vec<&OsStr> = ["--timeout", "150"].iter().map(OsStr::new).collect();
    argv.extend(opts.iter().map(OsStr::new));
    argv.extend([OsStr::new("-n"), OsStr::new(&n_s), exe.as_os_str()]);
    argv.extend(prog_args.iter().map(OsStr::new));
    mpirun(&argv, env)
}

/// Runs `exe part [count]` and asserts its "passed" line.
fn passes(exe: &Path, n: usize, opts: &[&str], env: &[(&str, &OsStr)], args: &[&str]) {
    let what = format!("ctx_reuse {args:?} on {n} ranks with {opts:?} {env:?}");
    let out = success(&run(exe, n, opts, env, args), &what);
    let want = format!("ctx_reuse: {} passed", args[0]);
    assert!(out.lines().any(|l| l == want), "{what}: {out}");
}

/// `MPI_Comm_dup`, `MPI_Comm_split`, `MPI_Comm_create` and `MPI_Intercomm_create` with
/// `MPI_Comm_free`, 20000 times each on 2 and 4 ranks, the ids capped at 64 (ids only grew
/// before; an intercommunicator's 4 ids were not returned at free).
#[test]
fn twenty_thousand_communicators_made_and_freed() {
    let dir = Scratch::new("ctxid-loops");
    let exe = build("ctx_reuse.c", &dir.0);
    // Within 64 ids: every loop needs the freed ids back (30 pairs).
    let cap = ["--mca", "mpi_max_context_ids", "64"];
    for n in [2, 4] {
        for part in ["dup", "split", "create", "inter"] {
            passes(&exe, n, &cap, &[], &[part]);
        }
    }
}

/// A communicator that reuses the ids of a freed one starts its own counts afresh at every
/// member: members of a communicator that the other ranks are not in run 1-3 nonblocking
/// collectives (and an `MPIX_Comm_agree`) on it and free it; the dup of the parent made
/// next takes its ids and its nonblocking collective (and agreement) must match at every
/// member. Before, the schedules' tags (and the agreements') were numbered per context
/// id, which the members had counted differently: the dup's `MPI_Iallreduce` hung (also
/// `inter.c` on 4 ranks once intercommunicators' ids were returned).
#[test]
fn a_reused_id_starts_its_counts_afresh() {
    let dir = Scratch::new("ctxid-stale");
    let exe = build("ctx_reuse.c", &dir.0);
    let cap = ["--mca", "mpi_max_context_ids", "64"];
    for n in [3, 4] {
        passes(&exe, n, &cap, &[], &["stale", "50"]);
        passes(&exe, n, &cap, &[], &["stale-inter", "50"]);
    }
}

/// A receive still pending on a freed communicator (`MPI_Comm_free` lets it complete)
/// keeps the communicator's ids out of a new one until it has matched: the new
/// communicator's message goes to the new communicator's receive, the old receive gets
/// the old communicator's message, sent later.
#[test]
fn ids_with_a_pending_receive_are_not_reused() {
    let dir = Scratch::new("ctxid-pending");
    let exe = build("ctx_reuse.c", &dir.0);
    passes(&exe, 3, &[], &[], &["pending"]);
    if common::ofi_provider("tcp") {
        let cm = ["--mca", "pml", "cm", "--mca", "btl", "self,ofi"];
        let env = [("FI_PROVIDER", OsStr::new("tcp;ofi_rxm"))];
        passes(&exe, 3, &cm, &env, &["pending"]);
    }
}

/// Eight communicators alive, the oldest freed for each new one (by dup, idup and
/// create_group in turn): the ids above every member's run out at the cap, and the
/// agreement on masks of free pairs reuses the freed ones below (3000 communicators
/// within 64 ids); the same with four intercommunicators alive (by
/// `MPI_Intercomm_create` and `MPI_Comm_dup` in turn, 1000 within 64 ids), whose
/// agreement exchanges the masks over the peer communicator or the intercommunicator.
#[test]
fn communicators_freed_oldest_first_reuse_ids_by_masks() {
    let dir = Scratch::new("ctxid-window");
    let exe = build("ctx_reuse.c", &dir.0);
    let cap = ["--mca", "mpi_max_context_ids", "64"];
    for n in [2, 3] {
        passes(&exe, n, &cap, &[], &["window", "3000"]);
        // 4 intercommunicators alive (16 ids, 15 groups of 4 below 64).
        passes(&exe, n, &cap, &[], &["inter-window", "1000"]);
    }
}

/// ULFM's shrink past the limit: eight shrunk communicators alive, freed oldest first, 200
/// made within 24 ids (ten pairs); the fault-tolerant agreement exchanges no masks, so the
/// survivors search for pairs free at all (before, the 11th shrink failed with
/// `MPI_ERR_OTHER`: out of context ids).
#[test]
fn shrink_reuses_freed_ids_past_the_limit() {
    let dir = Scratch::new("ctxid-shrink");
    let exe = build("ctx_reuse.c", &dir.0);
    let opts = ["--with-ft", "ulfm", "--mca", "mpi_max_context_ids", "24"];
    for n in [2, 3] {
        passes(&exe, n, &opts, &[], &["shrink-window", "200"]);
    }
}

/// All ids held: `MPI_Comm_dup` fails with `MPI_ERR_OTHER` (returned under
/// `MPI_ERRORS_RETURN` after exactly the pairs below the cap; under
/// `MPI_ERRORS_ARE_FATAL` the job ends with the one-line report), and once they are freed
/// a dup works again.
#[test]
fn holding_every_id_fails_with_one_line() {
    let dir = Scratch::new("ctxid-hold");
    let exe = build("ctx_reuse.c", &dir.0);
    let cap = ["--mca", "mpi_max_context_ids", "64"];
    let out = success(&run(&exe, 2, &cap, &[], &["hold"]), "ctx_reuse hold");
    // Ids 4..64: 30 pairs.
    let want = format!("ctx_reuse: hold held 30, error class {MPI_ERR_OTHER}:");
    assert!(out.lines().any(|l| l.starts_with(&want)), "{out}");
    let out = run(&exe, 2, &cap, &[], &["hold", "fatal"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    let line = "MPI_Comm_dup: MPI_ERR_OTHER: other error (see the message printed with it): \
                out of context ids: no 2 consecutive ids below 64 are free at every member \
                (60 held here; free communicators no longer needed)";
    assert!(err.lines().any(|l| l.ends_with(line)), "{err}");
}

/// Under `pml cm` over `tcp;ofi_rxm` the tag's context field carries 8176 ids (4086
/// pairs after world's and self's; 4080 ids, 2038 pairs with the collectives' mark): a
/// dup loop of 5000 (and an intercommunicator loop of 5000) passes it (before, the 4087th failed its first send with
/// `MPI_ERR_UNSUPPORTED_OPERATION`), and holding them all fails the next dup with
/// `MPI_ERR_OTHER`.
#[test]
fn pml_cm_reuses_the_ids_its_tag_carries() {
    if !common::ofi_provider("tcp") {
        return;
    }
    let dir = Scratch::new("ctxid-cm");
    let exe = build("ctx_reuse.c", &dir.0);
    let cm = ["--mca", "pml", "cm", "--mca", "btl", "self,ofi"];
    let env = [("FI_PROVIDER", OsStr::new("tcp;ofi_rxm"))];
    passes(&exe, 2, &cm, &env, &["dup", "5000"]);
    // 4 ids an intercommunicator: 20000 ids made.
    passes(&exe, 2, &cm, &env, &["inter", "5000"]);
    let out = success(
        &run(&exe, 2, &cm, &env, &["hold"]),
        "ctx_reuse hold under pml cm",
    );
    // The layout of 64 matched bits with the default 16-bit source field; ids 0..4 are
    // world's and self's.
    let layout = Layout::fit(64, 2, 16).expect("a layout of 64 bits");
    let pairs = (layout.max_contexts() - 4) / 2;
    let want = format!("ctx_reuse: hold held {pairs}, error class {MPI_ERR_OTHER}:");
    assert!(out.lines().any(|l| l.starts_with(&want)), "{out}");
}
