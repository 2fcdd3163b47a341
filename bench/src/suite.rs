//! The measurement loop: builds the C sources with every implementation's
//! compiler wrapper, checks that each implementation works, then runs the
//! repetitions with all implementations interleaved, recording machine load
//! and a cache-line placement probe with every measurement.

use crate::config::Config;
use crate::impls::Impl;
use crate::parse;
use crate::runner::{self, Outcome};
use crate::stats::{Key, Row};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// C sources of the suite, embedded so that the harness does not depend on
/// the working directory.
const OXBENCH_C: &str = include_str!("../c/oxbench.c");
const HELLO_C: &str = include_str!("../c/hello.c");
const SCALE_C: &str = include_str!("../c/scale.c");
const MEMCPY_C: &str = include_str!("../c/memcpy_bw.c");
const PINGPONG_C: &str = include_str!("../c/pingpong.c");
const VMREADV_C: &str = include_str!("../c/vmreadv_bw.c");
const PIN_C: &str = include_str!("../c/pin.c");
const PROBE_LIB_C: &str = include_str!("../c/probe_lib.c");
/// The mpi4py ping-pong rows' driver (mpi4py's own ping-pong, with a time budget per size
/// and several rounds per launch).
const MPI4PY_PINGPONG_PY: &str = include_str!("../py/mpi4py_pingpong.py");

/// Busy % below which the machine counts as quiet (anchors.md §7).
pub const QUIET_BUSY_PCT: f64 = 30.0;

/// The mpi4py ping-pong prints a line per size as it ends (unbuffered): a
/// run silent for this long is hung.
const MPI4PY_IDLE: Duration = Duration::from_secs(60);

/// An mpi4py launch: its outcome, the machine's (load, busy %) before it, the placement
/// probe and the start time (Unix seconds).
type Mpi4pyRun = (Outcome, (f64, f64), Option<parse::Pingpong>, u64);

/// Message size (bytes) of the overhead section's latency and mpi4py ring.
pub const OVERHEAD_SIZE: u64 = 8;

/// The collective tests of `oxbench`, in the order they run.
const COLLECTIVES: [&str; 4] = ["allreduce", "bcast", "alltoall", "barrier"];

/// Most `oxbench` launches for one group of measurements (the first plus
/// relaunches after failures).
const MAX_LAUNCHES: usize = 4;

/// The (test, size) measurements `oxbench TESTS … SIZES` makes at `np`
/// ranks, in its order (mirrors the size rules of `oxbench.c`: barrier and
/// ibarrier once with size 0; point-to-point only with 2+ ranks and bw/bibw not at 0 B;
/// collectives not at 0 B: their default datatype is `MPI_CHAR`, one byte).
pub fn expected_measurements(tests: &[&str], sizes: &[u64], np: u32) -> Vec<(String, u64)> {
    let mut v = Vec::new();
    for &t in tests {
        if t == "barrier" || t == "ibarrier" {
            v.push((t.to_string(), 0));
            continue;
        }
        for &s in sizes {
            let ok = match t {
                "lat" => np >= 2,
                "bw" | "bibw" => np >= 2 && s > 0,
                _ => s > 0,
            };
            if ok {
                v.push((t.to_string(), s));
            }
        }
    }
    v
}

/// One `oxbench` launch to make: (tests, sizes).
pub type Job = (Vec<String>, Vec<u64>);

/// What one `oxbench` launch did: the (test, size) pairs it reported, and
/// its failure, if any.
type LaunchResult = (Vec<(String, u64)>, Option<(String, bool)>);

/// Launches (one per test, in order) that make the `expected`
/// measurements except `skip`.
pub fn jobs_without(expected: &[(String, u64)], skip: &[(String, u64)]) -> Vec<Job> {
    let mut jobs: Vec<Job> = Vec::new();
    for e in expected.iter().filter(|e| !skip.contains(e)) {
        match jobs.last_mut() {
            Some((t, s)) if t[0] == e.0 => s.push(e.1),
            _ => jobs.push((vec![e.0.clone()], vec![e.1])),
        }
    }
    jobs
}

/// A launch that should have made `expected` stopped after `reported`: the
/// index of the measurement it was in (the first expected one not
/// reported), and the launches (tests, sizes) that make the measurements
/// after it. `None` if nothing is missing.
pub fn resume_plan(
    expected: &[(String, u64)],
    reported: &[(String, u64)],
    sizes: &[u64],
) -> Option<(usize, Vec<Job>)> {
    let i = expected.iter().position(|e| !reported.contains(e))?;
    let test = &expected[i].0;
    let mut jobs = Vec::new();
    let same: Vec<u64> = expected[i + 1..]
        .iter()
        .filter(|(t, _)| t == test)
        .map(|x| x.1)
        .collect();
    if !same.is_empty() {
        jobs.push((vec![test.clone()], same));
    }
    let mut later: Vec<String> = Vec::new();
    for (t, _) in &expected[i + 1..] {
        if t != test && !later.contains(t) {
            later.push(t.clone());
        }
    }
    if !later.is_empty() {
        jobs.push((later, sizes.to_vec()));
    }
    Some((i, jobs))
}

/// An implementation whose binaries are built and that passed the check.
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The implementation (launch flags possibly adjusted by the check).
    pub imp: Impl,
    /// The benchmark binary.
    pub oxbench: PathBuf,
    /// The start-up binary.
    pub hello: PathBuf,
    /// The per-rank cost binary (`scale.c`: MPI_Init time, peak RSS).
    pub scale: PathBuf,
}

/// The placement recorded for a launch probed `before` and `after` it: the probe with the
/// longer round trip. The hypervisor moves the vCPUs at any time, so a launch probed near
/// only before may have run (partly) far; counting it far keeps the near rows near, which
/// is what the within-placement comparisons need. One probe missing: the other.
fn farther(
    before: Option<parse::Pingpong>,
    after: Option<parse::Pingpong>,
) -> Option<parse::Pingpong> {
    match (before, after) {
        (Some(b), Some(a)) => Some(if a.rtt_median_ns > b.rtt_median_ns {
            a
        } else {
            b
        }),
        (b, a) => b.or(a),
    }
}

/// The (longest, shortest) placement-probe round trip of one measurement (a [`Row`]'s
/// `probe_rtt_ns` and `probe_near_ns`): its probes inside the program (`oxbench probe=1`,
/// before every sample and after the last) if it has them, else the launch's probes
/// `before` and `after` it.
fn probe_range(
    in_program: &[f64],
    before: Option<parse::Pingpong>,
    after: Option<parse::Pingpong>,
) -> (Option<f64>, Option<f64>) {
    let launch: Vec<f64> = [before, after]
        .iter()
        .flatten()
        .map(|p| p.rtt_median_ns)
        .collect();
    let probes = if in_program.is_empty() {
        &launch[..]
    } else {
        in_program
    };
    (
        probes.iter().copied().reduce(f64::max),
        probes.iter().copied().reduce(f64::min),
    )
}

/// Physical probe binaries.
#[derive(Debug, Clone)]
pub struct Probes {
    memcpy: PathBuf,
    pingpong: PathBuf,
    vmreadv: PathBuf,
    /// The wrapper that pins a rank to its placement's CPU (`bench/c/pin.c`).
    pin: PathBuf,
    /// The placement probe of `oxbench probe=1` as a shared library, for the mpi4py
    /// ping-pong driver (`bench/c/probe_lib.c`).
    probe_lib: PathBuf,
}

/// The binding a launch in a placement of the collectives matrix saw: what
/// the placement asks for and what each rank's `Cpus_allowed_list` was.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacedBinding {
    /// Implementation.
    pub imp: String,
    /// Rank count.
    pub np: u32,
    /// The placement.
    pub placement: crate::matrix::Placement,
    /// Rank:CPU it asks for ([`crate::matrix::Placement::describe`]).
    pub expected: String,
    /// Rank:CPUs observed (`BIND` lines), in the same form.
    pub observed: String,
}

impl PlacedBinding {
    /// The ranks ran where the placement puts them (always, unpinned).
    pub fn matches(&self) -> bool {
        self.placement == crate::matrix::Placement::Unpinned || self.expected == self.observed
    }
}

/// The CPUs the two probing ranks of `oxbench probe=1` were on at a measurement's
/// last probe, counted over the measurements of one implementation, rank count and
/// placement.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSeen {
    /// Implementation.
    pub imp: String,
    /// Rank count.
    pub np: u32,
    /// The placement of an oversubscribed launch (`None`: the launcher's binding).
    pub placement: Option<crate::matrix::Placement>,
    /// The ranks that probed (`0,1`; `0,2` in a block placement of 4 ranks).
    pub ranks: String,
    /// Their CPUs (`0,1`).
    pub cpus: String,
    /// Measurements.
    pub count: usize,
}

/// Everything measured and noticed in one harness run.
#[derive(Debug, Default)]
pub struct Results {
    /// All measurements.
    pub rows: Vec<Row>,
    /// Implementations that ran, with their settings.
    pub ran: Vec<Impl>,
    /// Implementations skipped, with the reason.
    pub skipped: Vec<(String, String)>,
    /// Failed runs (implementation, what, why).
    pub failures: Vec<String>,
    /// Observed binding per implementation: (impl, rank cpus, one per core?).
    pub bindings: Vec<(String, String, bool)>,
    /// Observed binding per implementation, rank count and placement of the
    /// collectives matrix (the first launch, or the first that did not match).
    pub placed_bindings: Vec<PlacedBinding>,
    /// Where the in-program placement probes ran (`oxbench probe=1` with every
    /// collective of the matrix): one entry per implementation, rank count,
    /// placement, probing ranks and CPUs seen, with the number of measurements.
    pub probe_seen: Vec<ProbeSeen>,
    /// Free-form notes for the report.
    pub notes: Vec<String>,
    /// Rows whose time is not comparable with the other implementations' (an mpi4py
    /// module that implementation mostly skipped), as (implementation, metric,
    /// repetition): never taken as the best peer.
    pub not_comparable: Vec<(String, Key, u32)>,
    /// Per oxmpi variant, its verbose output about transport selection
    /// (deduplicated lines).
    pub transport: Vec<(String, Vec<String>)>,
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Number of CPUs this process may use.
pub fn cores() -> u32 {
    std::thread::available_parallelism()
        .map(|n| n.get() as u32)
        .unwrap_or(1)
}

fn have(prog: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {prog} >/dev/null 2>&1")])
        .status()
        .is_ok_and(|s| s.success())
}

/// The numbers of children of the `comm_spawn` measurement.
const SPAWN_CHILDREN: [u32; 2] = [1, 4];

/// The MPICH that can spawn here, for the `comm_spawn` rows: the PyPI `mpich` wheel in the
/// venv `$OXMPI_MPICH_WHEEL_VENV` (default `target/venv-mpich`), set up (when peers may be
/// installed) by `tests/clients/mpich-wheel-env.sh`, the script that `cargo xtask test`
/// runs; its version from the wheel's `mpichversion`. `None`, with a note, when it is
/// missing.
pub fn mpich_wheel(cfg: &Config, root: &Path, notes: &mut Vec<String>) -> Option<Impl> {
    let venv = std::env::var_os("OXMPI_MPICH_WHEEL_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target").join("venv-mpich"));
    let script = root.join("tests/clients/mpich-wheel-env.sh");
    if cfg.install_peers {
        let mut c = Command::new("bash");
        c.arg(&script).env("OXMPI_MPICH_WHEEL_VENV", &venv);
        match runner::run(&mut c, Duration::from_secs(600)) {
            Ok(o) if o.ok() => {}
            Ok(o) => notes.push(format!(
                "MPICH wheel (for MPI_Comm_spawn): {} failed: {}",
                script.display(),
                o.failure()
            )),
            Err(e) => notes.push(format!("MPICH wheel (for MPI_Comm_spawn): {e}")),
        }
    }
    let o = Command::new(venv.join("bin").join("mpichversion")).output();
    let version = o
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| parse::mpichversion(&String::from_utf8_lossy(&o.stdout)));
    let Some(version) = version else {
        notes.push(format!(
            "no MPICH wheel in {} (MPI_Comm_spawn has no MPICH row; run {})",
            venv.display(),
            script.display()
        ));
        return None;
    };
    Some(Impl::mpich_wheel(&venv, &version))
}

/// Install Open MPI and MPICH with apt-get when their wrappers are missing.
pub fn ensure_peers(cfg: &Config, notes: &mut Vec<String>) {
    if have("mpicc.openmpi") && have("mpicc.mpich") {
        return;
    }
    let pkgs = ["openmpi-bin", "libopenmpi-dev", "mpich", "libmpich-dev"];
    // SAFETY: geteuid(2) has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !cfg.install_peers || !root {
        notes.push(format!(
            "peers missing and not installed (run: apt-get install {})",
            pkgs.join(" ")
        ));
        return;
    }
    eprintln!(
        "bench: installing peers: apt-get install -y {}",
        pkgs.join(" ")
    );
    let install = || {
        Command::new("apt-get")
            .args(["install", "-y", "--no-install-recommends"])
            .args(pkgs)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()
            .is_ok_and(|s| s.success())
    };
    if !install() {
        let _ = Command::new("apt-get").arg("update").status();
        if !install() {
            notes.push("apt-get install of the peers failed".into());
        }
    }
}

fn compile(
    cc: &Path,
    src: &Path,
    out: &Path,
    extra_env: &[(String, String)],
) -> Result<(), String> {
    compile_with(cc, &[], src, out, extra_env)
}

/// [`compile`] with extra compiler flags before the source (`-shared -fPIC`).
fn compile_with(
    cc: &Path,
    flags: &[&str],
    src: &Path,
    out: &Path,
    extra_env: &[(String, String)],
) -> Result<(), String> {
    let mut c = Command::new(cc);
    c.args(flags).args(["-O2", "-o"]).arg(out).arg(src);
    for (k, v) in extra_env {
        c.env(k, v);
    }
    let o = runner::run(&mut c, Duration::from_secs(120)).map_err(|e| e.to_string())?;
    if o.ok() {
        Ok(())
    } else {
        Err(format!(
            "{} {}: {}",
            cc.display(),
            src.display(),
            o.failure()
        ))
    }
}

fn write_sources(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for (name, text) in [
        ("oxbench.c", OXBENCH_C),
        ("hello.c", HELLO_C),
        ("scale.c", SCALE_C),
        ("memcpy_bw.c", MEMCPY_C),
        ("pingpong.c", PINGPONG_C),
        ("vmreadv_bw.c", VMREADV_C),
        ("pin.c", PIN_C),
        ("probe_lib.c", PROBE_LIB_C),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("cannot write {}: {e}", p.display()))?;
    }
    Ok(())
}

/// Build the physical probes with the system C compiler.
pub fn build_probes(cfg: &Config) -> Result<Probes, String> {
    write_sources(&cfg.build_dir)?;
    let cc = PathBuf::from(std::env::var("CC").unwrap_or_else(|_| "cc".into()));
    let d = &cfg.build_dir;
    let p = Probes {
        memcpy: d.join("memcpy_bw"),
        pingpong: d.join("pingpong"),
        vmreadv: d.join("vmreadv_bw"),
        pin: d.join("pin"),
        probe_lib: d.join("libprobe.so"),
    };
    compile(&cc, &d.join("memcpy_bw.c"), &p.memcpy, &[])?;
    compile_with(
        &cc,
        &["-shared", "-fPIC"],
        &d.join("probe_lib.c"),
        &p.probe_lib,
        &[],
    )?;
    compile(&cc, &d.join("pin.c"), &p.pin, &[])?;
    compile(&cc, &d.join("pingpong.c"), &p.pingpong, &[])?;
    compile(&cc, &d.join("vmreadv_bw.c"), &p.vmreadv, &[])?;
    Ok(p)
}

/// Build each implementation's binaries and check that a 2-rank hello runs;
/// returns the usable implementations and the skipped ones with reasons.
pub fn prepare(cfg: &Config, wanted: Vec<Impl>, res: &mut Results) -> Vec<Prepared> {
    let cores = cores();
    let mut ready = Vec::new();
    type Built = Result<(PathBuf, PathBuf, PathBuf), String>;
    let mut built: Vec<(String, Built)> = Vec::new();
    for mut imp in wanted {
        let bins = match built.iter().find(|(k, _)| *k == imp.build) {
            Some((_, b)) => b.clone(),
            None => {
                let b = build_impl(cfg, &imp);
                built.push((imp.build.clone(), b.clone()));
                b
            }
        };
        let (oxbench, hello, scale) = match bins {
            Ok(b) => b,
            Err(e) => {
                res.skipped
                    .push((imp.name.clone(), format!("build failed: {e}")));
                continue;
            }
        };
        let check = Duration::from_secs(60).min(cfg.timeout);
        let try_hello = |imp: &Impl, np: u32| -> Result<Outcome, String> {
            runner::run(&mut imp.command(np, cores, &hello, &[]), check).map_err(|e| e.to_string())
        };
        match try_hello(&imp, 2) {
            Ok(o) if o.ok() => {}
            Ok(o) if !imp.pinned.is_empty() => {
                // A launcher may not know the binding flags yet: retry unpinned.
                let mut unpinned = imp.clone();
                unpinned.pinned.clear();
                match try_hello(&unpinned, 2) {
                    Ok(o2) if o2.ok() => {
                        res.notes.push(format!(
                            "{}: launch with {:?} failed ({}); ran without binding flags",
                            imp.name,
                            imp.pinned,
                            o.failure()
                        ));
                        imp = unpinned;
                    }
                    Ok(o2) => {
                        res.skipped
                            .push((imp.name.clone(), format!("hello -n 2 {}", o2.failure())));
                        continue;
                    }
                    Err(e) => {
                        res.skipped.push((imp.name.clone(), e));
                        continue;
                    }
                }
            }
            Ok(o) => {
                res.skipped
                    .push((imp.name.clone(), format!("hello -n 2 {}", o.failure())));
                continue;
            }
            Err(e) => {
                res.skipped.push((imp.name.clone(), e));
                continue;
            }
        }
        if !imp.oversubscribed.is_empty() && !imp.pt2pt_only {
            if let Ok(o) = try_hello(&imp, 4) {
                if !o.ok() {
                    let mut plain = imp.clone();
                    plain.oversubscribed.clear();
                    if try_hello(&plain, 4).is_ok_and(|o2| o2.ok()) {
                        res.notes.push(format!(
                            "{}: oversubscribed launch with {:?} failed; ran without those flags",
                            imp.name, imp.oversubscribed
                        ));
                        imp = plain;
                    }
                }
            }
        }
        res.ran.push(imp.clone());
        ready.push(Prepared {
            imp,
            oxbench,
            hello,
            scale,
        });
    }
    ready
}

fn build_impl(cfg: &Config, imp: &Impl) -> Result<(PathBuf, PathBuf, PathBuf), String> {
    let d = &cfg.build_dir;
    write_sources(d)?;
    // scale.c only for the scale mode (the default smoke run stays short)
    let scale = cfg.scale_curves.is_some();
    let [ox, he, sc] = ["oxbench", "hello", "scale"].map(|p| {
        let bin = d.join(format!("{p}_{}", imp.build));
        if p == "scale" && !scale {
            return Ok(bin);
        }
        compile(&imp.mpicc, &d.join(format!("{p}.c")), &bin, &imp.env).map(|()| bin)
    });
    Ok((ox?, he?, sc?))
}

/// Percentage of the vCPUs' time the hypervisor took while this process kept
/// every vCPU busy for `window`. An idle guest accrues no steal, so only a
/// probe that wants the CPUs sees it: at 67 % steal every implementation ran
/// 3–5x slower while the idle window read 0 % busy.
fn steal_under_load(window: Duration) -> f64 {
    let read = || {
        std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|t| parse::parse_proc_steal(&t))
    };
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    let a = read();
    let end = Instant::now() + window;
    std::thread::scope(|s| {
        for _ in 0..n {
            s.spawn(|| {
                while Instant::now() < end {
                    std::hint::spin_loop();
                }
            });
        }
    });
    match (a, read()) {
        (Some(a), Some(b)) => parse::busy_percent(a, b).unwrap_or(f64::NAN),
        _ => f64::NAN,
    }
}

/// (1-min load average, busy %), waiting up to `wait` for the machine to
/// become quiet. Busy % is the larger of the CPU time others used over an
/// idle 100 ms and the time stolen from us while we spun on every vCPU for
/// 100 ms: both leave less machine to the measurement.
pub fn machine_state(wait: Duration) -> (f64, f64) {
    let start = Instant::now();
    loop {
        let stat = || {
            std::fs::read_to_string("/proc/stat")
                .ok()
                .and_then(|t| parse::parse_proc_stat(&t))
        };
        let a = stat();
        std::thread::sleep(Duration::from_millis(100));
        let b = stat();
        let busy = match (a, b) {
            (Some(a), Some(b)) => parse::busy_percent(a, b).unwrap_or(f64::NAN),
            _ => f64::NAN,
        };
        let busy = busy.max(steal_under_load(Duration::from_millis(100)));
        let load = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|t| parse::parse_loadavg(&t))
            .unwrap_or(f64::NAN);
        if busy.is_nan() || busy < QUIET_BUSY_PCT || start.elapsed() >= wait {
            return (load, busy);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The physical limit of a metric, in the metric's unit, from the same
/// repetition's probes: one-way latency = cache-line one-way + size / memcpy
/// bandwidth (us); bandwidth = memcpy bandwidth (MB/s), twice that for
/// bidirectional; start-up = fork+exec+wait of `/bin/true` (ms); a
/// collective on 2 ranks = one one-way transfer of its data (a lower bound:
/// each rank must hear from the other at least once). Oversubscribed
/// collectives (np > 2 on 2 cores) have no meaningful limit.
pub fn limit_for(
    test: &str,
    np: u32,
    size: u64,
    one_way_ns: Option<f64>,
    memcpy: &[(u64, f64)],
    spawn_ms: Option<f64>,
) -> Option<f64> {
    // memcpy GB/s measured at the smallest probed size >= size (else the largest)
    let bw = || -> Option<f64> {
        let mut m: Vec<(u64, f64)> = memcpy.to_vec();
        m.sort_by_key(|x| x.0);
        m.iter().find(|(s, _)| *s >= size).or(m.last()).map(|x| x.1)
    };
    match test {
        "lat" => Some(one_way_ns? / 1000.0 + size as f64 / (bw()? * 1e3)),
        "bw" => Some(bw()? * 1000.0),
        "bibw" => Some(2.0 * bw()? * 1000.0),
        "startup" => spawn_ms,
        "allreduce" | "bcast" | "alltoall" | "barrier" if np == 2 => {
            Some(one_way_ns? / 1000.0 + size as f64 / (bw()? * 1e3))
        }
        _ => None,
    }
}

/// Make (once) a venv with the mpi4py binary wheel under the harness's
/// target directory; returns its python.
pub fn setup_mpi4py(cfg: &Config) -> Result<PathBuf, String> {
    let base = cfg
        .build_dir
        .parent()
        .unwrap_or(&cfg.build_dir)
        .join("venv");
    let py = base.join("bin").join("python");
    let works = |py: &Path| {
        Command::new(py)
            .args(["-c", "import mpi4py.bench"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if py.is_file() && works(&py) {
        return Ok(py);
    }
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let mut c = Command::new(&python);
    c.args(["-m", "venv"]).arg(&base);
    let o = runner::run(&mut c, Duration::from_secs(120)).map_err(|e| e.to_string())?;
    if !o.ok() {
        return Err(format!("{python} -m venv: {}", o.failure()));
    }
    let mut c = Command::new(base.join("bin").join("pip"));
    c.args(["install", "--quiet", "--only-binary=:all:", "mpi4py==4.1.2"]);
    let o = runner::run(&mut c, Duration::from_secs(300)).map_err(|e| e.to_string())?;
    if !o.ok() || !works(&py) {
        return Err(format!("pip install mpi4py: {}", o.failure()));
    }
    Ok(py)
}

/// Environment that makes the mpi4py wheel load the same libmpi as this
/// implementation's C binary (found with `ldd`): `MPI4PY_LIBMPI`, and for
/// MPICH-ABI libraries whose file is not called `libmpi.so.12` (Debian's
/// `libmpich.so.12`) a directory with a `libmpi.so.12` link on `LD_LIBRARY_PATH`.
pub(crate) fn mpi4py_env(cfg: &Config, p: &Prepared) -> Result<Vec<(String, String)>, String> {
    let o = Command::new("ldd")
        .arg(&p.oxbench)
        .envs(p.imp.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .map_err(|e| format!("ldd: {e}"))?;
    let text = String::from_utf8_lossy(&o.stdout);
    let lib = parse::ldd_libmpi(&text)
        .ok_or_else(|| format!("ldd {} shows no libmpi", p.oxbench.display()))?;
    let name = Path::new(&lib)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    if name.starts_with("libmpi.so.40") || name.starts_with("libmpi.so.12") {
        return Ok(vec![("MPI4PY_LIBMPI".into(), lib)]);
    }
    let dir = cfg.build_dir.join(format!("mpi4py-{}", p.imp.build));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let link = dir.join("libmpi.so.12");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&lib, &link).map_err(|e| format!("{}: {e}", link.display()))?;
    let mut ld = dir.to_string_lossy().into_owned();
    if let Some((_, v)) = p.imp.env.iter().find(|(k, _)| k == "LD_LIBRARY_PATH") {
        ld = format!("{ld}:{v}");
    }
    Ok(vec![
        ("MPI4PY_LIBMPI".into(), link.to_string_lossy().into_owned()),
        ("LD_LIBRARY_PATH".into(), ld),
    ])
}

/// The order of `n` implementations in repetition `rep`: all of them, beginning with
/// implementation `rep % n`, so that over `n` repetitions each comes first once.
pub(crate) fn rotated(rep: u32, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| (k + rep as usize) % n)
}

/// Runs the repetitions.
pub struct Runner<'a> {
    pub(crate) cfg: &'a Config,
    probes: Probes,
    pub(crate) cores: u32,
    /// Results so far.
    pub res: Results,
    memcpy: Vec<(u64, f64)>,
    spawn_ms: Option<f64>,
    /// Python of the mpi4py venv, if the mpi4py ping-pong is to run.
    pub python: Option<PathBuf>,
    /// Time spent so far waiting for a quiet machine.
    waited: Duration,
    /// Launches that hung (timed out): (implementation, what, np, size,
    /// repetition). Later repetitions skip them instead of waiting again.
    pub(crate) hung: Vec<(String, String, u32, u64, u32)>,
    /// Options given to every `oxbench` launch (`dtype=INT`, `inplace=1`,
    /// ...: the collectives matrix sets them per set of measurements).
    pub launch_opts: Vec<String>,
    /// The placement of every `oxbench` launch with more ranks than cores
    /// (the collectives matrix sets it; `None`: unpinned, as the launcher
    /// leaves them).
    pub placement: Option<crate::matrix::Placement>,
    /// Probe the placement inside `oxbench` for every test, collectives too
    /// (`probe=1`, with the probe peer of [`crate::matrix::probe_peer`]; the
    /// collectives matrix sets it). Otherwise only the point-to-point tests on
    /// dedicated cores probe inside the program.
    pub probe_all: bool,
}

impl<'a> Runner<'a> {
    /// A runner with built probes and prepared results.
    pub fn new(cfg: &'a Config, probes: Probes, res: Results) -> Self {
        Runner {
            cfg,
            probes,
            cores: cores(),
            res,
            memcpy: Vec::new(),
            spawn_ms: None,
            python: None,
            waited: Duration::ZERO,
            hung: Vec::new(),
            launch_opts: Vec::new(),
            placement: None,
            probe_all: false,
        }
    }

    /// The repetition in which `what` (a test, `hello`, `mpi4py`) of this
    /// implementation at `np` ranks and `size` hung, if it did.
    pub(crate) fn hung_in(&self, imp: &str, what: &str, np: u32, size: u64) -> Option<u32> {
        self.hung
            .iter()
            .find(|h| h.0 == imp && h.1 == what && h.2 == np && h.3 == size)
            .map(|h| h.4)
    }

    /// What a hung `oxbench` measurement of `test` is remembered as: the
    /// test with the launch options in effect (a hang with one datatype
    /// does not skip the others).
    fn hung_key(&self, test: &str) -> String {
        std::iter::once(test)
            .chain(self.launch_opts.iter().map(String::as_str))
            .chain(self.placement.map(|p| p.name()))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Load and busy % now, waiting up to `wait` for a quiet machine, but
    /// never more than the run's total allowance for such waits.
    fn settle(&mut self, wait: Duration) -> (f64, f64) {
        let left = self.cfg.quiet_wait_total.saturating_sub(self.waited);
        let t = Instant::now();
        let r = machine_state(wait.min(left));
        if !wait.is_zero() {
            let before = self.waited;
            self.waited += t.elapsed();
            if before < self.cfg.quiet_wait_total && self.waited >= self.cfg.quiet_wait_total {
                self.res.notes.push(format!(
                    "the machine stayed busy: the run's {} s allowance for waiting for a quiet machine was used up, later measurements started without waiting",
                    self.cfg.quiet_wait_total.as_secs()
                ));
            }
        }
        r
    }

    pub(crate) fn row(
        &self,
        rep: u32,
        imp: &str,
        test: &str,
        np: u32,
        size: u64,
        unit: &str,
    ) -> Row {
        Row {
            unix_time: now_unix(),
            ..Row::new(rep, imp, test, np, size, unit)
        }
    }

    /// The cache-line round trip between vCPUs 0 and 1 (the placement probe). Every
    /// launch is probed just before and just after; its rows keep the farther of the two
    /// ([`farther`]).
    fn placement_probe(&self) -> Option<parse::Pingpong> {
        if self.cores < 2 {
            return None;
        }
        let mut c = Command::new(&self.probes.pingpong);
        c.args(["0", "1", "2000"]);
        let o = runner::run(&mut c, Duration::from_secs(30)).ok()?;
        parse::parse_pingpong(&o.stdout)
    }

    /// Physical limits of this repetition (`imp = "machine"` rows).
    pub fn physical(&mut self, rep: u32) {
        let (load, busy) = self.settle(self.cfg.quiet_wait);
        let sizes: &[&str] = &["1048576", "4194304", "67108864"];
        let mut c = Command::new(&self.probes.memcpy);
        c.args(sizes);
        let mut rows = Vec::new();
        match runner::run(&mut c, Duration::from_secs(120)) {
            Ok(o) if o.ok() => {
                self.memcpy.clear();
                for (size, med, best) in parse::parse_memcpy(&o.stdout) {
                    self.memcpy.push((size, med));
                    let mut r = self.row(rep, "machine", "memcpy", 1, size, "GB/s");
                    (r.median, r.min, r.max) = (med, f64::NAN, best);
                    r.values = vec![med];
                    rows.push(r);
                }
            }
            Ok(o) => self
                .res
                .failures
                .push(format!("rep {rep} memcpy_bw: {}", o.failure())),
            Err(e) => self.res.failures.push(format!("rep {rep} memcpy_bw: {e}")),
        }
        let mut c = Command::new(&self.probes.vmreadv);
        c.arg("4194304");
        match runner::run(&mut c, Duration::from_secs(120)) {
            Ok(o) => match parse::parse_vmreadv(&o.stdout) {
                Some((size, cma, _mem)) => {
                    let mut r = self.row(rep, "machine", "cma", 1, size, "GB/s");
                    (r.median, r.min, r.max) = (cma, f64::NAN, f64::NAN);
                    r.values = vec![cma];
                    rows.push(r);
                }
                None => self
                    .res
                    .failures
                    .push(format!("rep {rep} vmreadv_bw: {}", o.failure())),
            },
            Err(e) => self.res.failures.push(format!("rep {rep} vmreadv_bw: {e}")),
        }
        if let Some(p) = self.placement_probe() {
            let mut r = self.row(rep, "machine", "cacheline_rtt", 2, 0, "ns");
            (r.median, r.min, r.max) = (p.rtt_median_ns, p.rtt_best_ns, f64::NAN);
            r.values = vec![p.rtt_median_ns];
            rows.push(r);
        }
        let mut spawn = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            if Command::new("/bin/true")
                .status()
                .is_ok_and(|s| s.success())
            {
                spawn.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        if let Some(s) = crate::stats::summary(&spawn) {
            self.spawn_ms = Some(s.median);
            let mut r = self.row(rep, "machine", "spawn", 1, 0, "ms");
            (r.median, r.min, r.max) = (s.median, s.min, s.max);
            r.values = spawn;
            rows.push(r);
        }
        for r in &mut rows {
            (r.load1, r.busy_pct) = (load, busy);
        }
        self.res.rows.extend(rows);
    }

    /// Launch; a failure is recorded, and the outcome (with any partial
    /// output) is still returned so that results printed before a crash or
    /// timeout are kept. `None` only if the launcher could not be started.
    /// `(rep, what)` names the launch in failures; `idle` is its
    /// longest silence (see [`runner::run_idle`]).
    pub(crate) fn launch(
        &mut self,
        p: &Prepared,
        np: u32,
        prog: &Path,
        args: &[String],
        (rep, what): (u32, &str),
        idle: Option<Duration>,
    ) -> Option<Outcome> {
        let mut c = p.imp.command(np, self.cores, prog, args);
        match runner::run_idle(&mut c, self.cfg.timeout, idle) {
            Ok(o) if o.ok() => Some(o),
            Ok(o) => {
                self.res.failures.push(format!(
                    "rep {rep} {} {what} np={np}: {}",
                    p.imp.name,
                    o.failure()
                ));
                Some(o)
            }
            Err(e) => {
                self.res
                    .failures
                    .push(format!("rep {rep} {} {what} np={np}: {e}", p.imp.name));
                None
            }
        }
    }

    /// Run `oxbench` with `tests` at `np` ranks and record the results. A
    /// launch that fails or times out part-way is recorded as a failure of
    /// the measurement it was in, and the measurements after that one are
    /// run in fresh launches (a hang at one size costs that size only).
    pub fn oxbench(&mut self, rep: u32, p: &Prepared, np: u32, tests: &[&str], sizes: &[u64]) {
        let all = expected_measurements(tests, sizes, np);
        let skip: Vec<(String, u64)> = all
            .iter()
            .filter_map(|(t, s)| {
                let r = self.hung_in(&p.imp.name, &self.hung_key(t), np, *s)?;
                self.res.failures.push(format!(
                    "rep {rep} {} {t} np={np} size={s}: skipped (hung in repetition {r})",
                    p.imp.name
                ));
                Some((t.clone(), *s))
            })
            .collect();
        let mut jobs: std::collections::VecDeque<Job> = if skip.is_empty() {
            [(
                tests.iter().map(|t| t.to_string()).collect(),
                sizes.to_vec(),
            )]
            .into()
        } else {
            jobs_without(&all, &skip).into()
        };
        let mut launches = 0;
        while let Some((t, s)) = jobs.pop_front() {
            launches += 1;
            let t_ref: Vec<&str> = t.iter().map(String::as_str).collect();
            let expected = expected_measurements(&t_ref, &s, np);
            if launches > MAX_LAUNCHES {
                self.res.failures.push(format!(
                    "rep {rep} {} np={np}: {} measurement(s) not run ({}…): too many failed launches",
                    p.imp.name,
                    expected.len(),
                    t.join(",")
                ));
                break;
            }
            let Some((reported, failure)) = self.oxbench_launch(rep, p, np, &t, &s, &expected)
            else {
                break;
            };
            let Some((why, hung)) = failure else {
                continue;
            };
            match resume_plan(&expected, &reported, &s) {
                Some((i, more)) => {
                    let (test, size) = &expected[i];
                    if hung {
                        let what = self.hung_key(test);
                        self.hung.push((p.imp.name.clone(), what, np, *size, rep));
                    }
                    self.res.failures.push(format!(
                        "rep {rep} {} {test} np={np} size={size}: {why}{}",
                        p.imp.name,
                        if more.is_empty() {
                            String::new()
                        } else if reported.is_empty() {
                            "; nothing was measured, the rest of this launch is not retried".into()
                        } else {
                            "; the measurements after it ran in a new launch".into()
                        }
                    ));
                    if !reported.is_empty() {
                        jobs.extend(more);
                    }
                }
                None => self.res.failures.push(format!(
                    "rep {rep} {} {} np={np}: {why} (after all its results)",
                    p.imp.name,
                    t.join(",")
                )),
            }
        }
    }

    /// One `oxbench` launch: records its results and returns the (test,
    /// size) pairs it reported with the failure, if any, and whether it hung
    /// (`None` if the launcher could not be started). Besides its total
    /// timeout, the launch is killed when it prints nothing for longer than
    /// one measurement can take ([`crate::config::measurement_timeout`]).
    fn oxbench_launch(
        &mut self,
        rep: u32,
        p: &Prepared,
        np: u32,
        tests: &[String],
        sizes: &[u64],
        expected: &[(String, u64)],
    ) -> Option<LaunchResult> {
        let latency = tests.first().is_some_and(|t| t == "lat");
        // waits for a quiet machine once per implementation block (full mode)
        let (load, busy) = self.settle(if latency {
            self.cfg.quiet_wait
        } else {
            Duration::ZERO
        });
        let probe = self.placement_probe();
        let mut args = vec![
            tests.join(","),
            self.cfg.samples.to_string(),
            self.cfg.scale.to_string(),
        ];
        if self.cfg.op_budget > 0.0 {
            args.push(format!("budget={}", self.cfg.op_budget));
            if self.cfg.fill_budget {
                args.push("fill=1".into());
            }
        }
        let placement = self.placement.filter(|_| np > self.cores);
        let peer = if self.probe_all {
            crate::matrix::probe_peer(np, self.cores, placement)
        } else {
            (np >= 2
                && np <= self.cores
                && tests
                    .iter()
                    .all(|t| matches!(t.as_str(), "lat" | "bw" | "bibw")))
            .then_some(1)
        };
        if let Some(peer) = peer {
            // the placement probe inside the program, at every sample (rank 0 and its
            // peer on CPUs of their own: a spinning probe on a shared CPU would wait for
            // time slices)
            args.push("probe=1".into());
            if peer != 1 {
                args.push(format!("probe_peer={peer}"));
            }
        }
        args.extend(p.imp.bench_opts.iter().cloned());
        args.extend(self.launch_opts.iter().cloned());
        args.extend(sizes.iter().map(|s| s.to_string()));
        let timeout = if self.cfg.timeout_explicit {
            self.cfg.timeout
        } else {
            crate::config::oxbench_timeout(expected.len(), self.cfg.op_budget, self.cfg.timeout)
        };
        let idle = (!self.cfg.timeout_explicit && self.cfg.op_budget > 0.0)
            .then(|| crate::config::measurement_timeout(self.cfg.op_budget));
        let start = now_unix();
        let pin = placement.and_then(|x| x.cpus(np, self.cores));
        let mut c = match &pin {
            Some(cpus) => {
                // the wrapper pins each rank by its local rank, then runs oxbench
                let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
                let mut a = vec![list.join(","), p.oxbench.to_string_lossy().into_owned()];
                a.extend(args.iter().cloned());
                p.imp.command(np, self.cores, &self.probes.pin, &a)
            }
            None => p.imp.command(np, self.cores, &p.oxbench, &args),
        };
        let o = match runner::run_idle(&mut c, timeout, idle) {
            Ok(o) => o,
            Err(e) => {
                self.res.failures.push(format!(
                    "rep {rep} {} {} np={np}: {e}",
                    p.imp.name,
                    tests.join(",")
                ));
                return None;
            }
        };
        let before = probe;
        let after = self.placement_probe();
        let probe = farther(before, after);
        let failure = (!o.ok()).then(|| match (o.status, idle) {
            (None, Some(i)) if o.idle => (format!("hung (no output for {} s)", i.as_secs()), true),
            (None, _) => (format!("timed out after {} s", timeout.as_secs()), true),
            _ => (o.failure(), false),
        });
        let out = parse::parse_bench_output(&o.stdout);
        if np <= self.cores && !self.res.bindings.iter().any(|b| b.0 == p.imp.name) {
            let desc: Vec<String> = out
                .bindings
                .iter()
                .map(|(r, c)| format!("{r}:{c}"))
                .collect();
            self.res.bindings.push((
                p.imp.name.clone(),
                desc.join(" "),
                parse::one_rank_per_core(&out.bindings),
            ));
        }
        if let Some(x) = placement {
            if !self.placed_binding(p, np, x, &out.bindings) {
                // rows measured elsewhere than their placement says are not kept
                let n = out.results.len();
                let b = self.res.placed_bindings.iter().find(|b| {
                    b.imp == p.imp.name && b.np == np && b.placement == x && !b.matches()
                });
                self.res.failures.push(format!(
                    "rep {rep} {} {} np={np} {}: binding observed {}, expected {}: its {n} result(s) not recorded",
                    p.imp.name,
                    tests.join(","),
                    x.name(),
                    b.map(|b| b.observed.as_str()).unwrap_or("-"),
                    x.describe(np, self.cores),
                ));
                let reported = out.results.into_iter().map(|r| (r.test, r.size)).collect();
                return Some((reported, failure));
            }
        }
        let mut reported = Vec::new();
        // each measurement's probe range, for its overlap row
        let mut ranges = Vec::new();
        for r in out.results {
            reported.push((r.test.clone(), r.size));
            if let (Some(ranks), Some(cpus)) = (&r.probe_ranks, &r.probe_cpus) {
                self.probe_seen(p, np, placement, ranks, cpus);
            }
            let (far, near) = probe_range(&r.probes, before, after);
            if !r.probes.is_empty() {
                ranges.push((r.test.clone(), r.size, far, near));
            }
            let one_way = match r.probes.is_empty() {
                true => probe.map(|x| x.one_way_ns),
                false => far.map(|x| x / 2.0),
            };
            let limit = limit_for(&r.test, r.np, r.size, one_way, &self.memcpy, self.spawn_ms);
            self.res.rows.push(Row {
                rep,
                imp: p.imp.name.clone(),
                test: r.test,
                np: r.np,
                size: r.size,
                median: r.median,
                min: r.min,
                max: r.max,
                unit: r.unit,
                load1: load,
                busy_pct: busy,
                probe_rtt_ns: far,
                probe_near_ns: near,
                limit,
                unix_time: start,
                values: r.values,
                iters: r.iters,
            });
        }
        for v in out.overlaps {
            // overlap of a nonblocking collective: percent, higher is better
            let mut r = self.row(
                rep,
                &p.imp.name,
                &format!("{}/overlap", v.test),
                v.np,
                v.size,
                "%",
            );
            (r.median, r.min, r.max) = (v.pct, v.pct, v.pct);
            (r.load1, r.busy_pct) = (load, busy);
            // the overlap run follows its measurement: that measurement's probes, if any
            (r.probe_rtt_ns, r.probe_near_ns) = ranges
                .iter()
                .find(|x| x.0 == v.test && x.1 == v.size)
                .map(|x| (x.2, x.3))
                .unwrap_or((probe.map(|x| x.rtt_median_ns), None));
            r.unix_time = start;
            r.values = vec![v.pct];
            self.res.rows.push(r);
        }
        if latency {
            self.rss_rows(rep, p, "rss_oxbench", &out.rss, load, busy);
        }
        let failure = failure.or_else(|| {
            (reported.is_empty() && !expected.is_empty())
                .then(|| ("no RESULT lines".to_string(), false))
        });
        Some((reported, failure))
    }

    /// Record the binding `observed` by a launch of `np` ranks in placement
    /// `x` (the first of each implementation, np and placement, or the first
    /// that does not match); returns whether it matches the placement.
    fn placed_binding(
        &mut self,
        p: &Prepared,
        np: u32,
        x: crate::matrix::Placement,
        observed: &[(u32, String)],
    ) -> bool {
        let b = PlacedBinding {
            imp: p.imp.name.clone(),
            np,
            placement: x,
            expected: x.describe(np, self.cores),
            observed: observed
                .iter()
                .map(|(r, c)| format!("{r}:{c}"))
                .collect::<Vec<_>>()
                .join(" "),
        };
        let ok = b.matches();
        let known = self
            .res
            .placed_bindings
            .iter_mut()
            .find(|k| k.imp == b.imp && k.np == np && k.placement == x);
        match known {
            None => self.res.placed_bindings.push(b),
            Some(k) if k.matches() && !ok => *k = b,
            Some(_) => {}
        }
        ok
    }

    /// Count one measurement whose in-program probes ran on `ranks` at `cpus`.
    fn probe_seen(
        &mut self,
        p: &Prepared,
        np: u32,
        placement: Option<crate::matrix::Placement>,
        ranks: &str,
        cpus: &str,
    ) {
        let known = self.res.probe_seen.iter_mut().find(|k| {
            k.imp == p.imp.name
                && k.np == np
                && k.placement == placement
                && k.ranks == ranks
                && k.cpus == cpus
        });
        match known {
            Some(k) => k.count += 1,
            None => self.res.probe_seen.push(ProbeSeen {
                imp: p.imp.name.clone(),
                np,
                placement,
                ranks: ranks.to_string(),
                cpus: cpus.to_string(),
                count: 1,
            }),
        }
    }

    fn rss_rows(
        &mut self,
        rep: u32,
        p: &Prepared,
        test: &str,
        rss: &[(String, u32, u64)],
        load: f64,
        busy: f64,
    ) {
        for (_, rank, kb) in rss {
            let mut r = self.row(rep, &p.imp.name, test, 2, *rank as u64, "KiB");
            (r.median, r.min, r.max) = (*kb as f64, *kb as f64, *kb as f64);
            (r.load1, r.busy_pct) = (load, busy);
            r.values = vec![*kb as f64];
            self.res.rows.push(r);
        }
    }

    /// Job start-up: wall time of `launcher -n np hello`.
    pub fn startup(&mut self, rep: u32, p: &Prepared, np: u32) {
        let (load, busy) = machine_state(Duration::ZERO);
        let mut walls = Vec::new();
        let mut rss = Vec::new();
        if let Some(r) = self.hung_in(&p.imp.name, "hello", np, 0) {
            self.res.failures.push(format!(
                "rep {rep} {} hello np={np}: skipped (hung in repetition {r})",
                p.imp.name
            ));
            return;
        }
        for _ in 0..self.cfg.startup_runs {
            let o = self.launch(p, np, &p.hello, &[], (rep, "hello"), None);
            if o.as_ref().is_some_and(|o| o.status.is_none()) {
                self.hung
                    .push((p.imp.name.clone(), "hello".into(), np, 0, rep));
                break;
            }
            if let Some(o) = o.filter(Outcome::ok) {
                walls.push(o.wall.as_secs_f64() * 1e3);
                if rss.is_empty() {
                    rss = parse::parse_bench_output(&o.stdout).rss;
                }
            }
        }
        if let Some(s) = crate::stats::summary(&walls) {
            let mut r = self.row(rep, &p.imp.name, "startup", np, 0, "ms");
            (r.median, r.min, r.max) = (s.median, s.min, s.max);
            (r.load1, r.busy_pct) = (load, busy);
            r.limit = self.spawn_ms;
            r.values = walls;
            self.res.rows.push(r);
        }
        if np == 2 {
            self.rss_rows(rep, p, "rss_hello", &rss, load, busy);
        }
    }

    /// Dynamic processes: wall time of `MPI_Comm_spawn` of `children` children plus
    /// `MPI_Intercomm_merge`, from a 1-rank job (`hello spawn N R`), as metric
    /// `comm_spawn` (np 1, size = children). The children oversubscribe the cores, so
    /// the job runs with the implementation's oversubscription flags.
    pub fn comm_spawn(&mut self, rep: u32, p: &Prepared, children: u32) {
        if let Some(r) = self.hung_in(&p.imp.name, "comm_spawn", 1, u64::from(children)) {
            self.res.failures.push(format!(
                "rep {rep} {} comm_spawn {children}: skipped (hung in repetition {r})",
                p.imp.name
            ));
            return;
        }
        let (load, busy) = machine_state(Duration::ZERO);
        let mut q = p.clone();
        q.imp.pinned = q.imp.oversubscribed.clone();
        let runs = self.cfg.startup_runs.max(2);
        let args = vec!["spawn".to_string(), children.to_string(), runs.to_string()];
        let o = self.launch(&q, 1, &p.hello, &args, (rep, "comm_spawn"), None);
        if o.as_ref().is_some_and(|o| o.status.is_none()) {
            self.hung.push((
                p.imp.name.clone(),
                "comm_spawn".into(),
                1,
                u64::from(children),
                rep,
            ));
        }
        let Some(o) = o else { return };
        let ms = parse::parse_spawn_lines(&o.stdout);
        if let Some(s) = crate::stats::summary(&ms) {
            let mut r = self.row(rep, &p.imp.name, "comm_spawn", 1, u64::from(children), "ms");
            (r.median, r.min, r.max) = (s.median, s.min, s.max);
            (r.load1, r.busy_pct) = (load, busy);
            r.values = ms;
            self.res.rows.push(r);
        }
    }

    /// One repetition: physical limits, then every implementation in turn.
    pub fn repetition(&mut self, rep: u32, impls: &[Prepared]) {
        self.physical(rep);
        if self.cfg.pingpong_only {
            // The first launch of a repetition follows the physical probes (memcpy of up to
            // 64 MiB, a CMA read of 4 MiB, forks): each repetition begins with another
            // implementation, so that none always comes right after them.
            let runs: Vec<&Prepared> = impls
                .iter()
                .filter(|p| !(p.imp.spawn_only || p.imp.pt2pt_only || p.imp.overhead_only))
                .collect();
            for p in rotated(rep, runs.len()).map(|i| runs[i]) {
                eprintln!(
                    "bench: rep {} / {}: {} mpi4py ping-pong",
                    rep + 1,
                    self.cfg.reps,
                    p.imp.name
                );
                self.mpi4py(rep, p);
            }
            return;
        }
        for p in impls {
            eprintln!("bench: rep {} / {}: {}", rep + 1, self.cfg.reps, p.imp.name);
            if p.imp.spawn_only {
                for children in SPAWN_CHILDREN {
                    self.comm_spawn(rep, p, children);
                }
                continue;
            }
            if p.imp.overhead_only {
                self.oxbench(rep, p, 2, &["lat"], &[OVERHEAD_SIZE]);
                // oxbench options (mpit=1) do not reach mpi4py: its ring would only repeat
                // the base's
                if p.imp.bench_opts.is_empty() {
                    self.mpi4py_ring(rep, p);
                }
                continue;
            }
            let sizes: Vec<u64> = self
                .cfg
                .pt2pt_sizes
                .iter()
                .copied()
                .filter(|s| !p.imp.pt2pt_only || *s > crate::impls::EAGER_MAX)
                .collect();
            self.oxbench(rep, p, 2, &["lat", "bw", "bibw"], &sizes);
            if p.imp.pt2pt_only {
                continue;
            }
            let cs = self.cfg.coll_sizes.clone();
            self.oxbench(rep, p, 2, &COLLECTIVES, &cs);
            let cs4 = self.cfg.coll4_sizes.clone();
            self.oxbench(rep, p, 4, &COLLECTIVES, &cs4);
            for np in self.cfg.startup_np.clone() {
                self.startup(rep, p, np);
            }
            match &p.imp.no_spawn {
                Some(why) if rep == 0 => {
                    eprintln!("bench: {}: no comm_spawn rows: {why}", p.imp.name)
                }
                Some(_) => {}
                None => {
                    for children in SPAWN_CHILDREN {
                        self.comm_spawn(rep, p, children);
                    }
                }
            }
            self.mpi4py(rep, p);
        }
    }

    /// Launches `python ARGS` (`what` says which mpi4py benchmark) at 2 ranks on this
    /// implementation's libmpi: the outcome, with the machine's load and busy %, the
    /// placement probe and the start time. `None` (recorded) when it could not run.
    fn mpi4py_launch(
        &mut self,
        rep: u32,
        p: &Prepared,
        what: &str,
        args: Vec<String>,
    ) -> Option<Mpi4pyRun> {
        let py = self.python.clone()?;
        let what = what.to_string();
        if let Some(r) = self.hung_in(&p.imp.name, &what, 2, 0) {
            self.res.failures.push(format!(
                "rep {rep} {} {what}: skipped (hung in repetition {r})",
                p.imp.name
            ));
            return None;
        }
        let env = match mpi4py_env(self.cfg, p) {
            Ok(e) => e,
            Err(e) => {
                self.res
                    .failures
                    .push(format!("rep {rep} {} {what}: {e}", p.imp.name));
                return None;
            }
        };
        let state = machine_state(Duration::ZERO);
        let probe = self.placement_probe();
        let mut imp = p.imp.clone();
        imp.env.retain(|(k, _)| !env.iter().any(|(k2, _)| k2 == k));
        imp.env.extend(env);
        // each line reaches the pipe as soon as it is printed, so that a timeout keeps
        // what was measured already
        imp.env.push(("PYTHONUNBUFFERED".into(), "1".into()));
        let tmp = Prepared {
            imp,
            oxbench: p.oxbench.clone(),
            hello: p.hello.clone(),
            scale: p.scale.clone(),
        };
        let start = now_unix();
        let o = self.launch(&tmp, 2, &py, &args, (rep, &what), Some(MPI4PY_IDLE))?;
        if o.status.is_none() {
            self.hung.push((p.imp.name.clone(), what, 2, 0, rep));
        }
        let probe = farther(probe, self.placement_probe());
        Some((o, state, probe, start))
    }

    /// `python -m mpi4py.bench ringtest` (8-byte messages) for the overhead section: the
    /// time per trip around the ring (`mpi4py_ring`, µs) and the wall time of the whole
    /// launch, start-up and end (a profile being written) included (`mpi4py_ring_wall`, s).
    pub fn mpi4py_ring(&mut self, rep: u32, p: &Prepared) {
        let args: Vec<String> = [
            "-m",
            "mpi4py.bench",
            "ringtest",
            "-n",
            "8",
            "-s",
            "100",
            "-l",
            &self.cfg.ring_loops.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let Some((o, (load, busy), probe, start)) =
            self.mpi4py_launch(rep, p, "mpi4py.bench ringtest", args)
        else {
            return;
        };
        let Some((loops, secs)) = parse::parse_mpi4py_ringtest(&o.stdout) else {
            self.res.failures.push(format!(
                "rep {rep} {} mpi4py ringtest: no result line ({})",
                p.imp.name,
                o.failure()
            ));
            return;
        };
        let wall = o.wall.as_secs_f64();
        for (test, unit, v) in [
            ("mpi4py_ring", "us", secs / f64::from(loops.max(1)) * 1e6),
            ("mpi4py_ring_wall", "s", wall),
        ] {
            let mut r = self.row(rep, &p.imp.name, test, 2, OVERHEAD_SIZE, unit);
            (r.median, r.min, r.max) = (v, f64::NAN, f64::NAN);
            (r.load1, r.busy_pct) = (load, busy);
            r.probe_rtt_ns = probe.map(|x| x.rtt_median_ns);
            r.unix_time = start;
            r.values = vec![v];
            r.iters = loops;
            self.res.rows.push(r);
        }
    }

    /// mpi4py's ping-pong (`mpi4py.bench`'s, by `bench/py/mpi4py_pingpong.py`) on this
    /// implementation's libmpi: a row per size, the median over the launch's rounds of
    /// mpi4py's mean one-way time (the CSV's values: every round's; iters: the round
    /// trips of one round).
    pub fn mpi4py(&mut self, rep: u32, p: &Prepared) {
        let Some(pp) = self.cfg.mpi4py else { return };
        let script = self.cfg.build_dir.join("mpi4py_pingpong.py");
        if let Err(e) = std::fs::create_dir_all(&self.cfg.build_dir)
            .and_then(|()| std::fs::write(&script, MPI4PY_PINGPONG_PY))
        {
            self.res.failures.push(format!(
                "rep {rep} {} mpi4py: {}: {e}",
                p.imp.name,
                script.display()
            ));
            return;
        }
        let mut args = vec![script.to_string_lossy().into_owned()];
        args.extend(pp.args());
        args.push("--probe-lib".into());
        args.push(self.probes.probe_lib.to_string_lossy().into_owned());
        let Some((o, (load, busy), probe, start)) =
            self.mpi4py_launch(rep, p, "mpi4py.bench pingpong", args)
        else {
            return;
        };
        let rounds = parse::parse_mpi4py_rounds(&o.stdout);
        // the probes before every round and after the last: a launch whose vCPUs moved
        // during it is mixed (its before/after probes alone called some of them near)
        let (far, near) = probe_range(&parse::parse_mpi4py_probes(&o.stdout), probe, None);
        if rounds.is_empty() {
            self.res.failures.push(format!(
                "rep {rep} {} mpi4py: no result lines ({})",
                p.imp.name,
                o.failure()
            ));
        }
        for (size, means_s, loops) in rounds {
            let us: Vec<f64> = means_s.iter().map(|s| s * 1e6).collect();
            let Some(sum) = crate::stats::summary(&us) else {
                continue;
            };
            let mut r = self.row(rep, &p.imp.name, "mpi4py_lat", 2, size, "us");
            (r.median, r.min, r.max) = (sum.median, sum.min, sum.max);
            (r.load1, r.busy_pct) = (load, busy);
            (r.probe_rtt_ns, r.probe_near_ns) = (far, near);
            r.limit = limit_for(
                "lat",
                2,
                size,
                probe.map(|x| x.one_way_ns),
                &self.memcpy,
                None,
            );
            r.unix_time = start;
            r.values = us;
            r.iters = loops;
            self.res.rows.push(r);
        }
    }

    /// Run oxmpi once with verbose output on and keep its distinct lines
    /// (with the `[host:pid]` prefix removed), which say which transport
    /// path each message size took.
    pub fn transport_report(&mut self, p: &Prepared) {
        let mut imp = p.imp.clone();
        for fw in ["pml", "btl"] {
            imp.env
                .push((format!("OXMPI_MCA_{fw}_base_verbose"), "100".into()));
        }
        // one sample of a few ping-pongs at every measured size
        let mut args: Vec<String> = ["lat", "1", "0.01", "budget=0.2"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(self.cfg.pt2pt_sizes.iter().map(|s| s.to_string()));
        let mut c = imp.command(2, self.cores, &p.oxbench, &args);
        let lines = match runner::run(&mut c, self.cfg.timeout) {
            Ok(o) => {
                let mut l = verbose_lines(&format!("{}\n{}", o.stderr, o.stdout), 400);
                if !o.ok() {
                    l.push(format!("(verbose run failed: {})", o.failure()));
                }
                l
            }
            Err(e) => vec![format!("(verbose run failed: {e})")],
        };
        self.res.transport.push((p.imp.name.clone(), lines));
    }
}

/// oxmpi's shared-memory protocol settings, as its `btl` verbose output reports them
/// (`sm eager_limit N fragment F ring R bulk B single_copy M coop_min C`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SmSettings {
    /// Largest eager message.
    pub eager: u64,
    /// Pipelined-copy fragment size.
    pub frag: u64,
    /// `btl_sm_single_copy_mechanism` in effect (`none` when CMA is unavailable).
    pub single_copy: String,
    /// Smallest message for the cooperative copy (absent from older output).
    pub coop_min: Option<u64>,
}

/// The settings line among `lines`, if there is one.
pub fn sm_settings(lines: &[String]) -> Option<SmSettings> {
    lines.iter().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        let after = |k: &str| w.iter().position(|x| *x == k).and_then(|i| w.get(i + 1));
        Some(SmSettings {
            eager: after("eager_limit")?.parse().ok()?,
            frag: after("fragment")?.parse().ok()?,
            single_copy: after("single_copy")?.to_string(),
            coop_min: after("coop_min").and_then(|v| v.parse().ok()),
        })
    })
}

impl SmSettings {
    /// The path a message of `size` bytes takes under these settings.
    pub fn path(&self, size: u64) -> String {
        let pipelined = format!(
            "pipelined copy through the ring ({} fragment(s) of {} B)",
            size.div_ceil(self.frag),
            self.frag
        );
        let coop = self.coop_min.is_some_and(|m| size >= m);
        if size <= self.eager {
            "eager (through the ring)".into()
        } else {
            match self.single_copy.as_str() {
                "cma" => "rendezvous, single copy (process_vm_readv)".into(),
                "coop" if coop => "rendezvous, cooperative single copy (both sides, CMA)".into(),
                // Below 64 KiB the engine tells a stream (messages one way with nothing
                // sent back between them) from a ping-pong (`btl/sm/one_way.rs`).
                "auto" if coop && size < 64 * 1024 => format!(
                    "rendezvous: for a ping-pong, {pipelined} or cooperative single copy; \
                     for a stream, the pipelined copy or the receiver's read alone, judged by \
                     the window; whichever the receiver measures faster"
                ),
                "auto" if coop => format!(
                    "rendezvous, {pipelined} or cooperative single copy, whichever the \
                     receiver measures faster"
                ),
                _ => format!("rendezvous, {pipelined}"),
            }
        }
    }
}

/// Distinct verbose lines (order kept, `[host:pid] ` prefix removed, our own
/// RESULT/BIND/RSS lines dropped), at most `max`.
pub fn verbose_lines(text: &str, max: usize) -> Vec<String> {
    let mut seen: Vec<String> = Vec::new();
    for l in text.lines() {
        let t = l.trim();
        let t = match (t.starts_with('['), t.find("] ")) {
            (true, Some(i)) => &t[i + 2..],
            _ => t,
        };
        if t.is_empty()
            || ["RESULT ", "BIND ", "RSS "]
                .iter()
                .any(|k| t.starts_with(k))
        {
            continue;
        }
        if !seen.iter().any(|s| s == t) {
            seen.push(t.to_string());
            if seen.len() >= max {
                break;
            }
        }
    }
    seen
}

/// A fake implementation in `dir` (created) for tests: its launcher
/// records its arguments in `dir/args`, prints a `RESULT` line for every
/// test and size it is asked for (and an `OVERLAP` line for the nonblocking
/// collectives) and hangs in `lat` at 64 B; the probes do not exist. Run
/// through the pin wrapper (a CPU list before the program), it prints each
/// rank's `BIND` line as the list says, or the list reversed if `dir/swap`
/// exists (a wrapper that pins the wrong ranks). With `probe=1` its `RESULT`
/// lines carry the in-program probes of `dir/probe` (`NS;NS;...`, default
/// `100.0;100.0`), the CPUs of rank 0 and the probe peer (from the CPU list,
/// else `0,1`) and the probing ranks (`probe_peer=`, default 1).
#[cfg(test)]
pub(crate) fn fake_implementation(dir: &Path) -> (Prepared, Probes) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir).unwrap();
    let launcher = dir.join("fake-mpirun");
    let script = r#"#!/bin/sh
printf '%s\n' "$*" >> "$(dirname "$0")/args"
np=$2
d=$(dirname "$0")
while [ "$1" != "--" ]; do shift; done
shift 2
list=0,1
case "$1" in
[0-9]*)
  list=$1
  cpus=$(echo "$1" | tr , ' ')
  [ -e "$(dirname "$0")/swap" ] && cpus=$(for c in $cpus; do echo "$c"; done | tac)
  r=0
  for c in $cpus; do echo "BIND rank=$r cpus=$c"; r=$((r+1)); done
  shift 2;;
esac
tests=$1; shift 3
probe=""
peer=1
for a in "$@"; do
  case "$a" in
  probe_peer=*) peer=${a#probe_peer=};;
  probe=1) probe=1;;
  esac
done
if [ -n "$probe" ]; then
  ns=$(cat "$d/probe" 2>/dev/null || echo "100.0;100.0")
  pc=$(echo "$list" | tr , ' ' | awk -v p="$peer" '{print $1 "," $(p+1)}')
  probe=" probe=$ns probe_cpus=$pc probe_ranks=0,$peer"
fi
emit() {
  echo "RESULT test=$1 np=$np size=$2 iters=1 samples=1 median=1 min=1 max=1 mean=1 unit=us values=1$probe"
  case "$1" in i*) echo "OVERLAP test=$1 np=$np size=$2 pure=1 compute=1 total=1.5 overlap=50.0";; esac
}
for t in $(echo "$tests" | tr , ' '); do
  case "$t" in *barrier) emit "$t" 0; continue;; esac
  for s in "$@"; do
    case "$s" in *=*) continue;; esac
    if [ "$t" = lat ] && [ "$s" = 64 ]; then exec sleep 60; fi
    emit "$t" "$s"
  done
done
"#;
    std::fs::write(&launcher, script).unwrap();
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o755)).unwrap();
    let imp = Impl {
        name: "fake".into(),
        build: "fake".into(),
        mpicc: "true".into(),
        launcher,
        np_flag: "-n".into(),
        pinned: vec![],
        oversubscribed: vec![],
        extra: vec!["--".into()],
        env: vec![],
        pt2pt_only: false,
        overhead_only: false,
        bench_opts: vec![],
        spawn_only: false,
        no_spawn: None,
        settings: String::new(),
    };
    let missing = dir.join("no-such-probe");
    let probes = Probes {
        memcpy: missing.clone(),
        pingpong: missing.clone(),
        vmreadv: missing.clone(),
        pin: missing.clone(),
        probe_lib: missing,
    };
    let p = Prepared {
        imp,
        oxbench: dir.join("oxbench"),
        hello: dir.join("hello"),
        scale: dir.join("scale"),
    };
    (p, probes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_implementation_comes_first_after_the_probes_once_in_n_repetitions() {
        let order = |rep| rotated(rep, 3).collect::<Vec<_>>();
        assert_eq!(order(0), [0, 1, 2]);
        assert_eq!(order(1), [1, 2, 0]);
        assert_eq!(order(2), [2, 0, 1]);
        assert_eq!(order(3), [0, 1, 2]);
        assert_eq!(rotated(7, 1).collect::<Vec<_>>(), [0]);
        assert_eq!(rotated(4, 0).count(), 0);
    }

    #[test]
    fn a_launch_counts_as_far_when_either_probe_is() {
        let pp = |rtt: f64| parse::Pingpong {
            rtt_median_ns: rtt,
            rtt_best_ns: rtt,
            one_way_ns: rtt / 2.0,
        };
        let got = |b: Option<f64>, a: Option<f64>| {
            farther(b.map(pp), a.map(pp)).map(|p| parse::placement(p.rtt_median_ns))
        };
        assert_eq!(got(Some(110.0), Some(520.0)), Some("far"));
        assert_eq!(got(Some(520.0), Some(110.0)), Some("far"));
        assert_eq!(got(Some(110.0), Some(120.0)), Some("near"));
        assert_eq!(got(None, Some(520.0)), Some("far"));
        assert_eq!(got(Some(110.0), None), Some("near"));
        assert_eq!(got(None, None), None);
    }

    /// A measurement's placement comes from its own probes inside the program when it has
    /// them, else from the launch's; probes that disagree make it "mixed".
    #[test]
    fn a_measurement_is_placed_by_its_own_probes() {
        let pp = |rtt: f64| parse::Pingpong {
            rtt_median_ns: rtt,
            rtt_best_ns: rtt,
            one_way_ns: rtt / 2.0,
        };
        let place = |inside: &[f64], b: Option<f64>, a: Option<f64>| {
            let (far, near) = probe_range(inside, b.map(pp), a.map(pp));
            let mut r = Row::new(0, "x", "lat", 2, 0, "us");
            (r.probe_rtt_ns, r.probe_near_ns) = (far, near);
            (far, near, r.placement())
        };
        // near inside although the launch's after-probe was far (Open MPI's run in the
        // session-15 report): the 0-2 B rows are near
        assert_eq!(
            place(&[96.0, 110.0, 101.0], Some(110.0), Some(530.0)),
            (Some(110.0), Some(96.0), Some("near"))
        );
        assert_eq!(
            place(&[96.0, 480.0], Some(110.0), Some(120.0)).2,
            Some("mixed")
        );
        assert_eq!(place(&[430.0, 520.0], None, None).2, Some("far"));
        assert_eq!(place(&[], Some(110.0), Some(530.0)).2, Some("mixed"));
        assert_eq!(place(&[], Some(510.0), None).2, Some("far"));
        assert_eq!(place(&[], None, None), (None, None, None));
    }

    #[test]
    fn limits() {
        let memcpy = [(67108864, 5.0), (1048576, 30.0), (4194304, 25.0)];
        // 1 KiB: 50 ns line + 1024 B at 30 GB/s = 0.05 + 0.034133 us
        let l = limit_for("lat", 2, 1024, Some(50.0), &memcpy, None).unwrap();
        assert!((l - (0.05 + 1024.0 / 30e3)).abs() < 1e-9);
        assert_eq!(
            limit_for("bw", 2, 4194304, None, &memcpy, None),
            Some(25000.0)
        );
        assert_eq!(
            limit_for("bibw", 2, 2 << 20, None, &memcpy, None),
            Some(50000.0)
        );
        // bigger than any probe: the largest probe (DRAM-bound)
        assert_eq!(
            limit_for("bw", 2, 1 << 30, None, &memcpy, None),
            Some(5000.0)
        );
        assert_eq!(
            limit_for("lat", 2, 8, None, &memcpy, None),
            None,
            "needs the probe"
        );
        assert_eq!(
            limit_for("startup", 2, 0, None, &memcpy, Some(0.8)),
            Some(0.8)
        );
        assert_eq!(
            limit_for("allreduce", 4, 8, Some(50.0), &memcpy, Some(1.0)),
            None,
            "oversubscribed"
        );
        assert_eq!(
            limit_for("barrier", 2, 0, Some(50.0), &memcpy, None),
            Some(0.05)
        );
    }

    #[test]
    fn sm_settings_and_paths() {
        let l = vec![
            "btl: something else".to_string(),
            "btl: rank 0/2: sm eager_limit 4096 fragment 32768 ring 262144 single_copy none"
                .to_string(),
        ];
        let mut st = sm_settings(&l).unwrap();
        assert_eq!(
            (st.eager, st.frag, st.single_copy.as_str()),
            (4096, 32768, "none")
        );
        assert_eq!(st.coop_min, None);
        assert!(st.path(4096).starts_with("eager"));
        assert!(st.path(65536).contains("2 fragment(s)"));
        st.single_copy = "cma".into();
        assert!(st.path(65536).contains("single copy"));
        assert!(sm_settings(&l[..1]).is_none());

        let l = vec![
            "rank 0/2: btl self,sm; sm eager_limit 4096 fragment 131072 ring 262144 bulk \
             1048576 single_copy auto coop_min 131072"
                .to_string(),
        ];
        let mut st = sm_settings(&l).unwrap();
        assert_eq!(st.coop_min, Some(131072));
        assert!(st.path(65536).contains("pipelined") && !st.path(65536).contains("cooperative"));
        assert!(st.path(131072).contains("or cooperative"));
        assert!(!st.path(131072).contains("stream"));
        st.coop_min = Some(16384);
        assert!(st.path(16384).contains("for a stream") && st.path(16384).contains("read alone"));
        assert!(!st.path(65536).contains("stream"));
        st.coop_min = Some(131072);
        st.single_copy = "coop".into();
        assert!(st.path(131072).contains("cooperative") && !st.path(131072).contains("pipelined"));
        assert!(st.path(65536).contains("pipelined"));
    }

    #[test]
    fn verbose_lines_dedup_and_strip() {
        let t = "[h:1] pml: selected shm\n[h:2] pml: selected shm\nRESULT test=lat\n\
                 [h:1] shm: size 65536 via rendezvous\n\nplain line\n";
        assert_eq!(
            verbose_lines(t, 10),
            vec![
                "pml: selected shm".to_string(),
                "shm: size 65536 via rendezvous".to_string(),
                "plain line".to_string()
            ]
        );
        assert_eq!(verbose_lines(t, 1).len(), 1);
    }

    fn pairs(v: &[(&str, u64)]) -> Vec<(String, u64)> {
        v.iter().map(|(t, s)| (t.to_string(), *s)).collect()
    }

    #[test]
    fn expected_measurements_follow_oxbench_rules() {
        assert_eq!(
            expected_measurements(&["lat", "bw"], &[0, 8], 2),
            pairs(&[("lat", 0), ("lat", 8), ("bw", 8)])
        );
        assert_eq!(
            expected_measurements(&COLLECTIVES, &[0, 2, 8], 4),
            pairs(&[
                ("allreduce", 2),
                ("allreduce", 8),
                ("bcast", 2),
                ("bcast", 8),
                ("alltoall", 2),
                ("alltoall", 8),
                ("barrier", 0)
            ])
        );
        assert!(expected_measurements(&["lat", "bibw"], &[8], 1).is_empty());
    }

    #[test]
    fn jobs_without_known_hangs() {
        let exp = expected_measurements(&["lat", "bw"], &[8, 64], 2);
        assert_eq!(
            jobs_without(&exp, &pairs(&[("lat", 64)])),
            vec![
                (vec!["lat".to_string()], vec![8]),
                (vec!["bw".to_string()], vec![8, 64])
            ]
        );
        assert!(jobs_without(&exp, &exp).is_empty());
    }

    #[test]
    fn resume_after_a_hang_skips_only_the_culprit() {
        let sizes = [8, 64, 1024];
        let exp = expected_measurements(&["lat", "bw", "bibw"], &sizes, 2);
        // hung in lat 64: the rest of lat, then bw and bibw at every size
        let (i, jobs) = resume_plan(&exp, &pairs(&[("lat", 8)]), &sizes).unwrap();
        assert_eq!(exp[i], ("lat".to_string(), 64));
        assert_eq!(
            jobs,
            vec![
                (vec!["lat".to_string()], vec![1024]),
                (vec!["bw".to_string(), "bibw".to_string()], sizes.to_vec())
            ]
        );
        // hung in the last size of a test: no same-test job
        let done = pairs(&[
            ("lat", 8),
            ("lat", 64),
            ("lat", 1024),
            ("bw", 8),
            ("bw", 64),
        ]);
        let (i, jobs) = resume_plan(&exp, &done, &sizes).unwrap();
        assert_eq!(exp[i], ("bw".to_string(), 1024));
        assert_eq!(jobs, vec![(vec!["bibw".to_string()], sizes.to_vec())]);
        // hung in the very last measurement: nothing to resume
        let all_but_last = &exp[..exp.len() - 1];
        let (i, jobs) = resume_plan(&exp, all_but_last, &sizes).unwrap();
        assert_eq!(i, exp.len() - 1);
        assert!(jobs.is_empty());
        // everything reported (failed in MPI_Finalize): nothing missing
        assert!(resume_plan(&exp, &exp, &sizes).is_none());
    }

    /// A fake launcher that prints a RESULT line per measurement it is asked
    /// for and hangs in `lat` at 64 B: the hang is recorded as that
    /// measurement's failure, and every other measurement still runs.
    #[test]
    fn a_hung_measurement_costs_only_itself() {
        let dir = std::env::temp_dir().join(format!("oxmpi-bench-hang-{}", std::process::id()));
        let mut cfg = crate::config::parse_args(
            &[
                "--smoke".to_string(),
                "--timeout".to_string(),
                "3".to_string(),
            ],
            &dir,
        )
        .unwrap();
        cfg.samples = 1;
        let (p, probes) = fake_implementation(&dir);
        let mut r = Runner::new(&cfg, probes, Results::default());
        r.oxbench(0, &p, 2, &["lat", "bw"], &[8, 64, 1024]);
        // the next repetition skips the hung measurement instead of waiting
        r.oxbench(1, &p, 2, &["lat", "bw"], &[8, 64, 1024]);
        let _ = std::fs::remove_dir_all(&dir);
        let rep1: Vec<(String, u64)> = r
            .res
            .rows
            .iter()
            .filter(|x| x.rep == 1)
            .map(|x| (x.test.clone(), x.size))
            .collect();
        assert_eq!(
            rep1,
            pairs(&[
                ("lat", 8),
                ("lat", 1024),
                ("bw", 8),
                ("bw", 64),
                ("bw", 1024)
            ])
        );
        assert_eq!(
            r.res.failures.pop().as_deref(),
            Some("rep 1 fake lat np=2 size=64: skipped (hung in repetition 0)")
        );
        r.res.rows.retain(|x| x.rep == 0);
        let got: Vec<(String, u64)> = r
            .res
            .rows
            .iter()
            .map(|x| (x.test.clone(), x.size))
            .collect();
        assert_eq!(
            got,
            pairs(&[
                ("lat", 8),
                ("lat", 1024),
                ("bw", 8),
                ("bw", 64),
                ("bw", 1024)
            ])
        );
        assert_eq!(r.res.failures.len(), 1, "{:?}", r.res.failures);
        let f = &r.res.failures[0];
        assert!(
            f.contains("fake lat np=2 size=64: timed out") && f.contains("new launch"),
            "{f}"
        );
    }
}
