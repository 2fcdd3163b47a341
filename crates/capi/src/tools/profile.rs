//! The job profile's per-rank half (`mpi_profile=DIR`, set by `mpirun --profile`): from
//! `MPI_Init` on, MPI calls are timed (`calls`) and waits measured; at `MPI_Finalize` each
//! rank writes `DIR/rank-<rank>.tsv` with what the tools interface's counters saw (traffic
//! per peer and transport, message sizes, protocol choices, collective algorithms) and its
//! calls. `oxmpi-profile` merges the files into JSON, CSV, plots and a page.
//!
//! The file has one record per line, tab-separated, the kind first:
//! `rank R`, `size N`, `host H`, `wall_ns T` (MPI_Init to MPI_Finalize), `wait_ns T`,
//! `eager_limit B`, `peer R TRANSPORT MSGS_SENT BYTES_SENT MSGS_RECV BYTES_RECV EAGER RNDV
//! SINGLE_COPY_RECV PIPELINED_RECV`, `sizes C0,C1,...` (messages sent per log2 size bucket),
//! `func NAME COUNT TOTAL_NS H0,H1,...` (log2 nanosecond buckets), `coll NAME RUNS`.

use crate::calls;
use oxmpi_base::params;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Instant;

static ACTIVE: Mutex<Option<(PathBuf, Instant)>> = Mutex::new(None);

/// At the end of `MPI_Init`: starts profiling if `mpi_profile` names a directory
/// (`multiple`: the thread level is `MPI_THREAD_MULTIPLE`).
pub(crate) fn start(multiple: bool) {
    let dir = match params::value(&oxmpi_engine::PROFILE) {
        params::Value::String(s) if !s.is_empty() => PathBuf::from(s),
        _ => return,
    };
    *ACTIVE.lock().unwrap_or_else(|p| p.into_inner()) = Some((dir, Instant::now()));
    oxmpi_engine::set_wait_timing(true);
    calls::set_on(Some(multiple));
}

/// At `MPI_Finalize` (before the engine stops): writes this rank's file; a failure is a
/// one-line warning (the job itself succeeded).
pub(crate) fn finish() {
    let Some((dir, t0)) = ACTIVE.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        return;
    };
    calls::set_on(None);
    let Some(eng) = oxmpi_engine::engine() else {
        return;
    };
    let text = render(eng, t0.elapsed().as_nanos() as u64);
    let path = dir.join(format!("rank-{}.tsv", eng.rank()));
    let written = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text));
    if let Err(e) = written {
        oxmpi_base::output::warn(format_args!(
            "cannot write the profile {}: {e}",
            path.display()
        ));
    }
}

/// This rank's profile file.
fn render(eng: &oxmpi_engine::Engine, wall_ns: u64) -> String {
    let stats = eng.stats();
    let mut s = String::new();
    let _ = writeln!(s, "rank\t{}", eng.rank());
    let _ = writeln!(s, "size\t{}", eng.size());
    let _ = writeln!(s, "host\t{}", oxmpi_base::output::hostname());
    let _ = writeln!(s, "wall_ns\t{wall_ns}");
    let _ = writeln!(s, "wait_ns\t{}", stats.wait_ns);
    let _ = writeln!(s, "eager_limit\t{}", stats.eager_limit);
    let join = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    for (r, (t, p)) in stats.peers.iter().enumerate() {
        let _ = writeln!(
            s,
            "peer\t{r}\t{t}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            p.msgs_sent,
            p.bytes_sent,
            p.msgs_recv,
            p.bytes_recv,
            p.eager_sent,
            p.rndv_sent,
            p.single_copy_recv,
            p.pipelined_recv
        );
    }
    let _ = writeln!(s, "sizes\t{}", join(&stats.by_transport(None).sent_sizes));
    for (name, c) in calls::snapshot() {
        let _ = writeln!(
            s,
            "func\t{name}\t{}\t{}\t{}",
            c.count,
            c.total_ns,
            join(&c.hist)
        );
    }
    for (name, runs) in oxmpi_coll::base::stats::all_runs() {
        let _ = writeln!(s, "coll\t{name}\t{runs}");
    }
    s
}
