//! Integration tests of the installed `libmpi.so.12`: the C programs in `tests/c/` built
//! with our `mpicc` and with Debian's `mpicc.mpich` (the MPICH build runs on our library
//! through `LD_LIBRARY_PATH`), run on 1 or 2 ranks; plus checks of the exported symbols,
//! the soname and the compiler wrapper.
//!
//! Needs an installed prefix in `OXMPI_TEST_PREFIX` (set by `cargo xtask test`).
//!
//! Launcher: by default the ranks are started by our `PREFIX/bin/mpirun -n N` (PMI);
//! with `OXMPI_CAPI_TEST_LAUNCHER=kvs` this harness starts them itself over the engine's
//! file key-value bootstrap (`OXMPI_ENGINE_KVS_DIR`/`_RANK`/`_SIZE`), which isolates the
//! library from the launcher when debugging.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{prefix, Scratch};

fn src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(name)
}

/// Which compiler builds a test program.
#[derive(Clone, Copy, Debug)]
enum Build {
    /// Our `PREFIX/bin/mpicc`.
    Ours,
    /// Debian's MPICH wrapper; the binary runs on our library via LD_LIBRARY_PATH.
    Mpich,
}

fn build(b: Build, name: &str, dir: &Path) -> PathBuf {
    let stem = Path::new(name)
        .file_stem()
        .expect("source file name")
        .to_string_lossy()
        .into_owned();
    let exe = dir.join(format!("{stem}-{b:?}"));
    let mut cmd = match b {
        Build::Ours => Command::new(prefix().join("bin/mpicc")),
        Build::Mpich => Command::new("mpicc.mpich"),
    };
    cmd.arg("-Wall").arg(src(name)).arg("-o").arg(&exe);
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("cannot run the {b:?} compiler wrapper for {name}: {e} (Debian's mpicc.mpich comes with `apt-get install libmpich-dev`)")
    });
    assert!(
        out.status.success(),
        "building {name} with {b:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Safety net so a broken build cannot hang the test suite (not a timing assertion).
const JOB_LIMIT: Duration = Duration::from_secs(120);

fn wait_all(mut children: Vec<Child>) -> Vec<Output> {
    let start = Instant::now();
    loop {
        let done = children
            .iter_mut()
            .all(|c| matches!(c.try_wait(), Ok(Some(_))));
        if done || start.elapsed() > JOB_LIMIT {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for c in children.iter_mut() {
        let _ = c.kill();
    }
    children
        .into_iter()
        .map(|c| c.wait_with_output().expect("collect rank output"))
        .collect()
}

/// The combined result of a job: stdout of all ranks in rank order, stderr likewise, and
/// the first non-zero exit code (0 if all succeeded).
struct Job {
    stdout: String,
    stderr: String,
    code: i32,
    codes: Vec<i32>,
}

/// True when the harness starts the ranks itself (see the module docs).
fn kvs_launcher() -> bool {
    std::env::var("OXMPI_CAPI_TEST_LAUNCHER").as_deref() == Ok("kvs")
}

fn launch(n: usize, exe: &Path, b: Build) -> Job {
    let pre = prefix();
    let lib = pre.join("lib");
    let ld = match std::env::var("LD_LIBRARY_PATH") {
        Ok(v) if !v.is_empty() => format!("{}:{v}", lib.display()),
        _ => lib.display().to_string(),
    };
    let outputs = if !kvs_launcher() {
        let mut c = Command::new(pre.join("bin/mpirun"));
        c.arg("-n").arg(n.to_string()).arg(exe);
        if matches!(b, Build::Mpich) {
            c.env("LD_LIBRARY_PATH", &ld);
        }
        let child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start mpirun");
        wait_all(vec![child])
    } else {
        let kvs = Scratch::new("kvs");
        let children = (0..n)
            .map(|r| {
                let mut c = Command::new(exe);
                c.env("OXMPI_ENGINE_KVS_DIR", &kvs.0)
                    .env("OXMPI_ENGINE_RANK", r.to_string())
                    .env("OXMPI_ENGINE_SIZE", n.to_string())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                if matches!(b, Build::Mpich) {
                    c.env("LD_LIBRARY_PATH", &ld);
                }
                c.spawn().expect("start rank")
            })
            .collect();
        wait_all(children)
    };
    Job {
        stdout: outputs
            .iter()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .collect(),
        stderr: outputs
            .iter()
            .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
            .collect(),
        code: outputs
            .iter()
            .map(|o| o.status.code().unwrap_or(-1))
            .find(|&c| c != 0)
            .unwrap_or(0),
        codes: outputs
            .iter()
            .map(|o| o.status.code().unwrap_or(-1))
            .collect(),
    }
}

/// Build `name` with both compilers, run each on `n` ranks on our library, require
/// success, the final line, and identical output.
fn run_both(name: &str, n: usize, last_line: &str) -> String {
    let dir = Scratch::new("build");
    let mut outs = Vec::new();
    for b in [Build::Ours, Build::Mpich] {
        let exe = build(b, name, &dir.0);
        let job = launch(n, &exe, b);
        assert_eq!(
            job.code, 0,
            "{name} ({b:?} build, {n} ranks) failed with {}:\nstdout:\n{}\nstderr:\n{}",
            job.code, job.stdout, job.stderr
        );
        assert!(
            job.stdout.lines().any(|l| l == last_line),
            "{name} ({b:?} build) did not print '{last_line}':\n{}\nstderr:\n{}",
            job.stdout,
            job.stderr
        );
        outs.push(job.stdout);
    }
    assert_eq!(
        outs[0], outs[1],
        "{name}: output differs between our build and the MPICH build"
    );
    outs.remove(0)
}

#[test]
fn p2p_on_two_ranks_both_builds() {
    let out = run_both("p2p.c", 2, "p2p: all checks passed");
    assert!(out.contains("persistent requests: ok"));
    assert!(out.contains("vector datatype: ok"));
}

#[test]
fn windows_and_files_run_no_user_attribute_callbacks() {
    let out = run_both("internal_comm.c", 2, "internal_comm: all checks passed");
    assert!(out.contains("window: 0 copy, 0 delete callbacks"));
    assert!(out.contains("file: 0 copy, 0 delete callbacks"));
    assert!(out.contains("user dup and free: 1 copy, 1 delete callbacks"));
}

#[test]
fn probe_on_two_ranks_both_builds() {
    let out = run_both("probe.c", 2, "probe: all checks passed");
    assert!(out.contains("probe + recv: ok (18 chars)"));
}

#[test]
fn truncation_on_two_ranks_both_builds() {
    let out = run_both("truncate.c", 2, "truncate: all checks passed");
    assert!(out.contains("recv truncated: MPI_ERR_TRUNCATE"));
}

#[test]
fn error_handlers_and_bad_input_both_builds() {
    let one = run_both("errhandler.c", 1, "errhandler: all checks passed");
    let two = run_both("errhandler.c", 2, "errhandler: all checks passed");
    assert_eq!(one, two);
    assert!(one.contains("MPI_ERR_REQUEST"));
}

#[test]
fn mpi_abort_ends_the_job_with_the_code() {
    let dir = Scratch::new("abort");
    for b in [Build::Ours, Build::Mpich] {
        let exe = build(b, "abort.c", &dir.0);
        let job = launch(2, &exe, b);
        assert_ne!(job.code, 0, "abort ({b:?}) exited 0:\n{}", job.stdout);
        assert!(
            job.stdout.contains("rank 1 calling MPI_Abort(7)"),
            "{}",
            job.stdout
        );
        assert!(!job.stdout.contains("MPI_Abort returned"), "{}", job.stdout);
        assert!(
            !job.stdout.contains("receive completed unexpectedly"),
            "{}",
            job.stdout
        );
        assert!(job.stderr.contains("MPI_Abort"), "{}", job.stderr);
        if kvs_launcher() {
            // Without a launcher in between, the aborting rank's own status is seen.
            assert_eq!(job.codes[1], 7, "stderr:\n{}", job.stderr);
        } else {
            // The aborting rank waits for mpirun to end the job, so its code is the job's.
            assert!(
                job.stderr.contains("MPI_Abort called with error code 7"),
                "{}",
                job.stderr
            );
            assert_eq!(job.code, 7, "stderr:\n{}", job.stderr);
        }
    }
}

#[test]
fn errors_are_fatal_by_default() {
    let dir = Scratch::new("fatal");
    for b in [Build::Ours, Build::Mpich] {
        let exe = build(b, "fatal.c", &dir.0);
        // With mpirun the other rank (already in MPI_Finalize) is torn down too; the
        // harness's own launcher cannot do that, so it runs a singleton.
        let job = launch(if kvs_launcher() { 1 } else { 2 }, &exe, b);
        assert_ne!(job.code, 0, "fatal ({b:?}) exited 0");
        assert!(!job.stdout.contains("returned"), "{}", job.stdout);
        assert!(
            job.stderr.contains("MPI_Send") && job.stderr.contains("MPI_ERR_RANK"),
            "the fatal error message must name the call and the class:\n{}",
            job.stderr
        );
    }
}

#[test]
fn constants_and_layout_match_mpich() {
    let dir = Scratch::new("consts");
    let ours = build(Build::Ours, "constants.c", &dir.0);
    let mpich = build(Build::Mpich, "constants.c", &dir.0);
    let a = Command::new(&ours).output().expect("run constants (ours)");
    // The MPICH build runs on MPICH's own library here: it calls no MPI function, it
    // only prints the values compiled in from MPICH's mpi.h.
    let b = Command::new(&mpich)
        .output()
        .expect("run constants (mpich)");
    assert!(a.status.success() && b.status.success());
    let (a, b) = (
        String::from_utf8_lossy(&a.stdout).into_owned(),
        String::from_utf8_lossy(&b.stdout).into_owned(),
    );
    assert!(a.contains("sizeof MPI_Status 20 "), "{a}");
    assert!(a.lines().count() > 250, "{a}");
    for (x, y) in a.lines().zip(b.lines()) {
        assert_eq!(x, y, "constant differs between our mpi.h and MPICH's");
    }
    assert_eq!(a.lines().count(), b.lines().count());
}

fn dynamic_symbols() -> Vec<(String, String)> {
    let lib = prefix().join("lib/libmpi.so.12");
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("run nm (binutils)");
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<_> = l.split_whitespace().collect();
            (f.len() == 3).then(|| (f[1].to_string(), f[2].to_string()))
        })
        .collect()
}

#[test]
fn exports_every_symbol_the_mpi4py_wheel_needs() {
    let syms = dynamic_symbols();
    let has = |kind: &str, name: &str| syms.iter().any(|(k, n)| k == kind && n == name);
    let required = include_str!("../abi/mpi4py-strong-symbols.txt");
    let mut n = 0;
    for name in required.lines().filter(|l| !l.is_empty()) {
        n += 1;
        if name == "MPI_UNWEIGHTED" || name == "MPI_WEIGHTS_EMPTY" {
            assert!(
                has("D", name) || has("R", name),
                "data object {name} missing"
            );
        } else {
            assert!(has("W", name), "weak {name} missing");
            assert!(has("T", &format!("P{name}")), "strong P{name} missing");
        }
    }
    assert_eq!(n, 339);
    // Nothing but the MPI interface (and MPICH's MPIX_ fault-tolerance extensions) is exported.
    for (_, name) in &syms {
        assert!(
            name.starts_with("MPI_")
                || name.starts_with("PMPI_")
                || name.starts_with("MPIX_")
                || name.starts_with("PMPIX_")
                || name == "MPIR_Dup_fn",
            "unexpected export {name}"
        );
    }
    // Not the standard ABI, not Open MPI (mpi4py's library classification).
    assert!(!syms.iter().any(|(_, n)| n == "MPI_Abi_get_version"));
    assert!(!syms.iter().any(|(_, n)| n == "ompi_mpi_comm_self"));
}

#[test]
fn soname_links_and_header_are_installed() {
    let pre = prefix();
    let out = Command::new("readelf")
        .arg("-d")
        .arg(pre.join("lib/libmpi.so.12"))
        .output()
        .expect("run readelf");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Library soname: [libmpi.so.12]"), "{text}");
    for l in ["lib/libmpi.so", "lib/libmpich.so.12"] {
        let t = std::fs::read_link(pre.join(l)).expect("symlink");
        assert_eq!(t, Path::new("libmpi.so.12"));
    }
    assert!(pre.join("include/mpi.h").is_file());
    assert!(pre.join("share/oxmpi/examples/ring.c").is_file());
    let pc = std::fs::read_to_string(pre.join("lib/pkgconfig/mpich.pc")).expect("mpich.pc");
    assert!(pc.contains("-lmpi"));
}

#[test]
fn mpicc_show_and_runpath() {
    let pre = prefix();
    let out = Command::new(pre.join("bin/mpicc"))
        .args(["-show", "x.c"])
        .output()
        .expect("run mpicc -show");
    let show = String::from_utf8_lossy(&out.stdout);
    assert!(
        show.contains(&format!("-I{}", pre.join("include").display())),
        "{show}"
    );
    assert!(
        show.contains(&format!("-L{}", pre.join("lib").display())),
        "{show}"
    );
    assert!(show.trim_end().ends_with("-lmpi"), "{show}");
    let out = Command::new(pre.join("bin/mpicxx"))
        .arg("--showme:compile")
        .output()
        .expect("run mpicxx --showme:compile");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("-I{}", pre.join("include").display())
    );
    // A program built with our mpicc finds the library through its RUNPATH.
    let dir = Scratch::new("ring");
    let exe = build(Build::Ours, "../../examples/ring.c", &dir.0);
    let dynamic = Command::new("readelf")
        .arg("-d")
        .arg(&exe)
        .output()
        .expect("readelf");
    let dynamic = String::from_utf8_lossy(&dynamic.stdout);
    assert!(dynamic.contains("RUNPATH"), "{dynamic}");
    let run = Command::new(&exe)
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .expect("run ring as a singleton");
    assert!(run.status.success());
    assert_eq!(
        String::from_utf8_lossy(&run.stdout),
        "ring: 1 rank, token 0 (expected 0)\n"
    );
}

#[test]
fn ring_example_on_three_ranks() {
    let dir = Scratch::new("ring3");
    let exe = build(Build::Ours, "../../examples/ring.c", &dir.0);
    let job = launch(3, &exe, Build::Ours);
    assert_eq!(job.code, 0, "{}", job.stderr);
    assert_eq!(job.stdout, "ring: 3 ranks, token 3 (expected 3)\n");
}

#[test]
fn collectives_and_communicators_both_builds() {
    let three = run_both("coll.c", 3, "coll: all checks passed");
    let one = run_both("coll.c", 1, "coll: all checks passed");
    assert_eq!(one, three);
    assert!(three.contains("user op in rank order: ok"));
}

#[test]
fn collectives_accept_mpi_bottom_with_absolute_types_both_builds() {
    for n in [1, 3] {
        let out = run_both("bottom.c", n, "bottom: all checks passed");
        for l in [
            "bcast from MPI_BOTTOM: ok",
            "gather and scatter with MPI_BOTTOM: ok",
            "allreduce in place at MPI_BOTTOM: ok",
            "allgather into MPI_BOTTOM: ok",
            "ibcast and iallgather with MPI_BOTTOM: ok",
            "neighbor_allgather with MPI_BOTTOM: ok",
        ] {
            assert!(out.lines().any(|x| x == l), "{n} ranks: no '{l}' in\n{out}");
        }
    }
}

#[test]
fn tools_interface_walks_everything_and_a_cvar_write_changes_the_path_both_builds() {
    let out = run_both("mpit.c", 2, "mpit: all checks passed");
    // btl_sm_eager_limit written to 64 before MPI_Init: the 32-byte message goes eagerly,
    // the 100-byte one (eager under the default 4 KiB) by rendezvous.
    assert!(
        out.contains("mpit: eager limit 64, eager sends 1, rendezvous sends 1"),
        "{out}"
    );
    assert!(
        out.contains("mpit: 1 cvars, 1 pvars walked, 1 bound to MPI_COMM_WORLD"),
        "{out}"
    );
}

#[test]
fn tools_interface_events_fire_their_callbacks_both_builds() {
    let out = run_both("mpit_events.c", 2, "mpit_events: all checks passed");
    assert!(
        out.contains("mpit_events: 2 transports (self 1, sm 1), verbose lines seen 1"),
        "{out}"
    );
    assert!(
        out.contains("mpit_events: rendezvous switch events 1"),
        "{out}"
    );
    // The receiver's copy choice: pipelined below btl_sm_coop_min_size, then (the minimum
    // lowered by a cvar write) the cooperative single copy.
    assert!(
        out.contains("mpit_events: copy choices on rank 1: none->pipelined, pipelined->coop"),
        "{out}"
    );
}

#[test]
fn tools_interface_cvar_writes_after_init_take_effect_both_builds() {
    let out = run_both("mpit_runtime.c", 2, "mpit_runtime: all checks passed");
    // btl_sm_eager_limit and coll_tuned_bcast_algorithm written after MPI_Init change the
    // next send and broadcast; every collective counts its algorithm.
    for l in [
        "mpit_runtime: eager limit 8192 then 256; 1000 bytes eager 1 rndv 0, then eager 0 rndv 1",
        "mpit_runtime: bcast sm 1 linear 0, forced linear: sm 0 linear 1",
        "mpit_runtime: reduce sm 1 binomial 0, ibarrier sm nonblocking 1 dissemination 0",
    ] {
        assert!(out.lines().any(|x| x == l), "no '{l}' in\n{out}");
    }
}

#[test]
fn tools_interface_counts_per_communicator_both_builds() {
    let out = run_both("mpit_comm.c", 2, "mpit_comm: all checks passed");
    assert!(
        out.contains("mpit_comm: a 3 msgs 30 bytes, b 1 msgs 100 bytes"),
        "{out}"
    );
    assert!(out.contains("mpit_comm: barriers on a 1, on b 3"), "{out}");
}

#[test]
fn tools_interface_counts_per_peer_both_builds() {
    let out = run_both("mpit_peer.c", 3, "mpit_peer: all checks passed");
    for l in [
        "mpit_peer: rank 0 on a: bytes sent 1 2 3, received 1 2 3",
        "mpit_peer: counts 3 on a, 1 on b; written 10 20 30, then 10 24 30",
    ] {
        assert!(out.lines().any(|x| x == l), "no '{l}' in\n{out}");
    }
}

/// Runs `mpirun -n 2 [env LD_PRELOAD=preload] exe` and returns its standard output after
/// checking it succeeded.
fn run_pmpi(exe: &Path, preload: Option<&Path>) -> String {
    run_pmpi_with(exe, preload, &[])
}

/// [`run_pmpi`] with more `mpirun` options.
fn run_pmpi_with(exe: &Path, preload: Option<&Path>, opts: &[&str]) -> String {
    let mut c = Command::new(prefix().join("bin/mpirun"));
    c.args(["-n", "2"]).args(opts);
    if let Some(p) = preload {
        c.arg("env").arg(format!("LD_PRELOAD={}", p.display()));
    }
    let child = c
        .arg(exe)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mpirun");
    let out = wait_all(vec![child]).remove(0);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{} failed:\n{stdout}\n{}",
        exe.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn a_pmpi_tool_sees_every_user_call_and_none_of_the_librarys_own() {
    let dir = Scratch::new("pmpi");
    let tool = dir.0.join("libpmpicount.so");
    let out = Command::new(prefix().join("bin/mpicc"))
        .args(["-shared", "-fPIC", "-Wall", "-o"])
        .arg(&tool)
        .arg(src("pmpi_counter.c"))
        .output()
        .expect("run mpicc");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let app = build(Build::Ours, "pmpi_app.c", &dir.0);
    // The collectives (allreduce of 1 MiB over point-to-point, bcast, barrier) and the
    // sendrecv must not appear as MPI_Send/MPI_Recv/MPI_Isend/... calls.
    let want = "pmpi rank 0: Init=1 Send=3 Recv=0 Isend=0 Irecv=0 Wait=0 Sendrecv=1 Bcast=1 Allreduce=2 Barrier=1 Type_free=6 \
                Type_commit=5 Type_size=4 Type_size_c=1 Type_get_extent=1 Type_get_extent_c=3 Type_get_envelope=4 Type_get_envelope_c=2\n\
                pmpi rank 1: Init=1 Send=0 Recv=3 Isend=0 Irecv=0 Wait=0 Sendrecv=1 Bcast=1 Allreduce=2 Barrier=1 Type_free=6 \
                Type_commit=5 Type_size=4 Type_size_c=1 Type_get_extent=1 Type_get_extent_c=3 Type_get_envelope=4 Type_get_envelope_c=2\n\
                pmpi_app: all checks passed\n";
    assert_eq!(run_pmpi(&app, Some(&tool)), want, "preloaded tool");
    // The same tool linked into the program before -lmpi.
    let linked = dir.0.join("pmpi_app_linked");
    let out = Command::new(prefix().join("bin/mpicc"))
        .arg("-Wall")
        .arg(src("pmpi_app.c"))
        .arg(src("pmpi_counter.c"))
        .arg("-o")
        .arg(&linked)
        .output()
        .expect("run mpicc");
    assert!(out.status.success());
    assert_eq!(run_pmpi(&linked, None), want, "linked tool");
    // Without the tool: the program alone.
    assert_eq!(run_pmpi(&app, None), "pmpi_app: all checks passed\n");

    // With the tool and the job profile: both count the same calls (the tool's own
    // PMPI_Barrier/PMPI_Comm_* at its MPI_Finalize are calls the profile sees too, and
    // MPI_Init precedes the profile, so those are left out).
    let prof = dir.0.join("prof");
    let out = run_pmpi_with(
        &app,
        Some(&tool),
        &[&format!("--profile={}", prof.display())],
    );
    let tool_counts: Vec<(usize, String, u64)> = out
        .lines()
        .filter_map(|l| l.strip_prefix("pmpi rank "))
        .flat_map(|l| {
            let (rank, rest) = l.split_once(':').expect("rank: counts");
            let rank: usize = rank.parse().expect("rank");
            rest.split_whitespace()
                .map(|kv| {
                    let (k, v) = kv.split_once('=').expect("name=count");
                    (rank, format!("MPI_{k}"), v.parse().expect("count"))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    // (MPI_Type_free's shared references are dropped, and the commits of committed types
    // and the size, extent and envelope queries answered, before the entry wrapper only
    // while the profile is off: here each of those calls a rank makes is counted.)
    assert_eq!(tool_counts.len(), 36, "{out}");
    let csv = std::fs::read_to_string(prof.join("functions.csv")).expect("functions.csv");
    let profiled = |rank: usize, name: &str| -> u64 {
        csv.lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>())
            .find(|f| f[0] == rank.to_string() && f[1] == name)
            .map_or(0, |f| f[2].parse().expect("count"))
    };
    for (rank, name, n) in &tool_counts {
        if name != "MPI_Init" && name != "MPI_Barrier" {
            assert_eq!(profiled(*rank, name), *n, "{name} on rank {rank}:\n{csv}");
        }
    }
    for f in [
        "profile.json",
        "matrix.csv",
        "ranks.csv",
        "sizes.csv",
        "index.html",
    ] {
        assert!(prof.join(f).is_file(), "{f} missing");
    }
    let matrix = std::fs::read_to_string(prof.join("matrix.csv")).expect("matrix.csv");
    assert!(matrix.lines().any(|l| l.starts_with("0,1,sm,")), "{matrix}");
}

/// `mpirun --profile` on the 4-rank stencil example (the example job) writes every
/// file of the profile, with the halo traffic between neighbours in the matrix.
#[test]
fn profile_of_the_four_rank_stencil_example() {
    let dir = Scratch::new("stencil-profile");
    let exe = build(Build::Ours, "../../examples/stencil.c", &dir.0);
    let prof = dir.0.join("prof");
    let child = Command::new(prefix().join("bin/mpirun"))
        .args(["-n", "4", &format!("--profile={}", prof.display())])
        .arg(&exe)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mpirun");
    let out = wait_all(vec![child]).remove(0);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for f in [
        "profile.json",
        "matrix.csv",
        "functions.csv",
        "sizes.csv",
        "ranks.csv",
        "collectives.csv",
        "matrix.png",
        "times.png",
        "sizes.png",
        "index.html",
    ] {
        assert!(prof.join(f).is_file(), "{f} missing");
    }
    for r in 0..4 {
        assert!(
            prof.join(format!("rank-{r}.tsv")).is_file(),
            "rank {r} file"
        );
    }
    let matrix = std::fs::read_to_string(prof.join("matrix.csv")).expect("matrix.csv");
    for pair in ["0,1,sm,", "1,0,sm,", "2,3,sm,", "3,2,sm,"] {
        assert!(
            matrix.lines().any(|l| l.starts_with(pair)),
            "{pair}: {matrix}"
        );
    }
    let funcs = std::fs::read_to_string(prof.join("functions.csv")).expect("functions.csv");
    assert!(
        funcs.lines().any(|l| l.starts_with("0,MPI_Waitall,")),
        "{funcs}"
    );
}

#[test]
fn every_mpi_function_is_a_weak_alias_of_its_pmpi_symbol() {
    let syms = dynamic_symbols();
    let weak: Vec<&str> = syms
        .iter()
        .filter(|(k, n)| k == "W" && n.starts_with("MPI_"))
        .map(|(_, n)| &n[4..])
        .collect();
    let strong: Vec<&str> = syms
        .iter()
        .filter(|(k, n)| k == "T" && n.starts_with("PMPI_"))
        .map(|(_, n)| &n[5..])
        .collect();
    assert!(weak.len() > 400, "{} weak MPI_ functions", weak.len());
    assert_eq!(
        weak, strong,
        "MPI_ (weak) and PMPI_ (strong) functions differ"
    );
    assert!(
        !syms.iter().any(|(k, n)| k == "T" && n.starts_with("MPI_")),
        "a strong MPI_ function"
    );
}

/// MPI 4.0 persistent collectives (every `MPI_*_init`), built by both compilers.
#[test]
fn persistent_collectives_both_builds() {
    for n in [1, 3] {
        let out = run_both("persist.c", n, "persist: all checks passed");
        for l in [
            "persist: reduce_init, allreduce_init, scan_init, exscan_init: ok",
            "persist: neighbor_*_init on a periodic ring: ok",
            "persist: neighbor_alltoall(_init) on a line made on the freed ring's handle: ok",
            "persist: bad input error classes: ok",
        ] {
            assert!(
                out.lines().any(|x| x == l),
                "persist.c on {n}: missing '{l}'"
            );
        }
    }
}

/// Persistent collectives planned once at init and started 1000 times each with new data
/// (contiguous, in place, a vector datatype freed after init), built by both compilers.
#[test]
fn persistent_collectives_restarted_1000_times_both_builds() {
    for n in [1, 3] {
        let out = run_both("persist_loop.c", n, "persist_loop: all checks passed");
        assert!(out.contains("persist_loop: 1000 rounds of 8 persistent collectives: ok"));
    }
}

/// What the OSU micro-benchmarks' MPI-4 mode needs (the suite is not packaged here):
/// persistent allreduce in timed loops and session mode (sessions created and finalized
/// without MPI_Init, then the world model), built by both compilers (a binary MPICH built
/// loads: MPI_Allreduce_init, MPI_Session_init).
#[test]
fn osu_style_persistent_and_session_mode_both_builds() {
    let out = run_both("osu_mpi4.c", 3, "osu_mpi4: all checks passed");
    assert!(out.contains("osu_mpi4: session mode, 5 sessions, 6 sizes right: ok"));
    assert!(out.contains("osu_mpi4: world model, 6 sizes right: ok"));
}

/// The smaller MPI 4.0/4.1 additions; our compiler only (MPICH 4.0's `mpi.h` lacks the
/// MPI 4.1 functions).
#[test]
fn mpi4_additions_our_build() {
    let dir = Scratch::new("build");
    let exe = build(Build::Ours, "mpi4_misc.c", &dir.0);
    for n in [1, 2] {
        let job = launch(n, &exe, Build::Ours);
        assert_eq!(
            job.code, 0,
            "mpi4_misc.c on {n}:\n{}\n{}",
            job.stdout, job.stderr
        );
        assert!(
            job.stdout
                .lines()
                .any(|l| l == "mpi4_misc: all checks passed"),
            "mpi4_misc.c on {n}:\n{}",
            job.stdout
        );
    }
}

/// MPI 4.0 partitioned point-to-point, built by both compilers.
#[test]
fn partitioned_communication_both_builds() {
    for n in [1, 2] {
        let out = run_both("part.c", n, "part: all checks passed");
        assert!(out.contains("part: bad input error classes: ok"));
        if n == 2 {
            assert!(out.contains("part: a partition travels before the others are ready: ok"));
        }
    }
}

/// MPI 4.0 sessions, built by both compilers: next to the World Model, and alone (the
/// argument `only`: no `MPI_Init`, the library ends at exit).
#[test]
fn sessions_both_builds() {
    for n in [1, 3] {
        let out = run_both("session.c", n, "session: all checks passed");
        for l in [
            "session: communicators from groups of two sessions: ok",
            "session: re-init after session finalize: ok",
            "session: a session next to the World Model: ok",
        ] {
            assert!(
                out.lines().any(|x| x == l),
                "session.c on {n}: missing '{l}'"
            );
        }
    }
    let dir = Scratch::new("build");
    let exe = build(Build::Ours, "session.c", &dir.0);
    let out = common::mpirun(
        &[
            std::ffi::OsStr::new("-n"),
            std::ffi::OsStr::new("2"),
            exe.as_os_str(),
            std::ffi::OsStr::new("only"),
        ],
        &[],
    );
    let text = common::success(&out, "session.c only (sessions without MPI_Init)");
    assert!(text.contains("session: re-init after session finalize: ok"));
    assert!(!text.contains("World Model"));
}
