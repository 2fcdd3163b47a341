//! Command line and run modes.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// How much to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// End-to-end check of the harness (CI): tiny iteration counts, one
    /// repetition, output under `target/`. Never checks a number.
    Smoke,
    /// Under 3 minutes: 3 repetitions, sizes in powers of 4.
    Quick,
    /// Full suite: 7 repetitions, sizes in powers of 2, waits for a quiet machine.
    Full,
}

impl Mode {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Smoke => "smoke",
            Mode::Quick => "quick",
            Mode::Full => "full",
        }
    }
}

/// Everything a run needs to know.
#[derive(Debug, Clone)]
pub struct Config {
    /// Mode.
    pub mode: Mode,
    /// Repetitions (all implementations interleaved within each).
    pub reps: u32,
    /// Samples per (test, size) inside one run.
    pub samples: u32,
    /// Iteration-count multiplier passed to `oxbench`.
    pub scale: f64,
    /// Point-to-point sizes (bytes).
    pub pt2pt_sizes: Vec<u64>,
    /// Collective sizes at np = 2 (bytes).
    pub coll_sizes: Vec<u64>,
    /// Collective sizes at np = 4 (bytes).
    pub coll4_sizes: Vec<u64>,
    /// Rank counts for the start-up test.
    pub startup_np: Vec<u32>,
    /// Start-up launches per repetition and rank count.
    pub startup_runs: u32,
    /// Longest wait for a quiet machine before each measurement.
    pub quiet_wait: Duration,
    /// Output directory (CSV, report, plots).
    pub out: PathBuf,
    /// Build directory for the C sources.
    pub build_dir: PathBuf,
    /// Restrict to these implementations (names), if given.
    pub only: Option<Vec<String>>,
    /// oxmpi install prefix.
    pub oxmpi_prefix: PathBuf,
    /// Install missing peers with apt-get.
    pub install_peers: bool,
    /// Run `cargo xtask install --prefix <oxmpi_prefix>` first.
    pub install_oxmpi: bool,
    /// Timeout of one launch (hello checks, start-up, mpi4py, verbose run).
    pub timeout: Duration,
    /// `--timeout` was given: it also replaces the per-launch timeouts that
    /// are otherwise computed from the number of measurements of an
    /// `oxbench` launch (see [`oxbench_timeout`]).
    pub timeout_explicit: bool,
    /// Time budget of one measurement (one test at one size) inside
    /// `oxbench`, seconds: slow iterations mean fewer iterations per sample
    /// and fewer samples (at least 3), never an unbounded run. 0 = none.
    pub op_budget: f64,
    /// With a budget: iterations per sample calibrated to fill each
    /// sample's share of `op_budget` (`oxbench`'s `fill=1`) instead of the
    /// default counts times `scale` (the collectives matrix).
    pub fill_budget: bool,
    /// Longest total time spent waiting for a quiet machine over the run.
    pub quiet_wait_total: Duration,
    /// The mpi4py ping-pong rows (`None`: not run).
    pub mpi4py: Option<PingpongOpts>,
    /// Measurement time budget: no new repetition starts if it would likely
    /// end past it (the first repetition always runs).
    pub budget: Option<Duration>,
    /// samples.csv of an earlier run whose oxmpi rows are compared with
    /// this run's (`--compare`).
    pub compare: Option<PathBuf>,
    /// With `--compare`: compare with this run's samples.csv instead of
    /// measuring (`--against`).
    pub compare_with: Option<PathBuf>,
    /// Time the MPICH-built applications under MPICH and oxmpi (`--apps`; on in
    /// full and smoke mode, off with `--no-apps`).
    pub apps: bool,
    /// `--collectives`: run the collectives matrix instead of the default
    /// suite (see [`crate::matrix`]).
    pub matrix: Option<crate::matrix::MatrixOpts>,
    /// `--scale`: run the scale curves instead (see [`crate::scale`]).
    pub scale_curves: Option<crate::scale::ScaleOpts>,
    /// `--mpi4py-suite`: time mpi4py's test suite instead (see
    /// [`crate::suite4py`]).
    pub suite4py: Option<crate::suite4py::SuiteOpts>,
    /// `--overhead`: measure only the cost of the tools interface and of the job profile
    /// (oxmpi alone, with a started MPI_T session, with `--profile`).
    pub overhead: bool,
    /// Loops of the overhead section's mpi4py ring.
    pub ring_loops: u32,
    /// `--mpi4py-pingpong`: measure only the mpi4py ping-pong rows (and the physical
    /// probes) of the default suite.
    pub pingpong_only: bool,
}

impl Config {
    /// After repetition `rep` (0-based), which took `last`, with `elapsed`
    /// spent since the measurements started: the note to record if the next
    /// repetition would likely end past the run's budget (then it does not
    /// start).
    pub fn stop_after(&self, rep: u32, elapsed: Duration, last: Duration) -> Option<String> {
        let b = self.budget?;
        (rep + 1 < self.reps && elapsed + last > b).then(|| {
            format!(
                "time budget of {} s: stopped after {} of {} repetitions (the machine was slow: load is in the CSV)",
                b.as_secs(),
                rep + 1,
                self.reps
            )
        })
    }
}

/// Longest silence of an `oxbench` launch (which prints each measurement as
/// it ends) before it counts as hung: a measurement under a budget of
/// `op_budget` seconds overruns it by a few times at most on a loaded
/// machine (warm-up, three slow samples), plus MPI start-up.
pub fn measurement_timeout(op_budget: f64) -> Duration {
    Duration::from_secs_f64(30.0 + 10.0 * op_budget)
}

/// Timeout of one `oxbench` launch doing `measurements` (test, size) pairs
/// under a per-measurement budget of `op_budget` seconds: each measurement
/// may overrun its budget (warm-up, three slow samples) by a factor of a few,
/// plus start-up slack. With no budget, `fallback`.
pub fn oxbench_timeout(measurements: usize, op_budget: f64, fallback: Duration) -> Duration {
    if op_budget <= 0.0 {
        return fallback;
    }
    Duration::from_secs_f64(60.0 + 4.0 * op_budget * measurements as f64)
}

/// `0` followed by `base^k` for `k = 0..`, up to and including `max`.
pub fn sizes(base: u64, max: u64) -> Vec<u64> {
    let mut v = vec![0];
    let mut s = 1;
    while s <= max {
        v.push(s);
        s *= base;
    }
    v
}

/// How the mpi4py ping-pong rows are measured (`bench/py/mpi4py_pingpong.py`: mpi4py's
/// own `mpi4py.bench` ping-pong, one size per call): sizes 1 B to `max_size` in powers
/// of 2, every size's round trips calibrated to fill `budget_s` seconds, `samples` rounds
/// over all sizes per launch, the row the median of the rounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PingpongOpts {
    /// Largest message (bytes).
    pub max_size: u64,
    /// Time budget of one size in one round (seconds).
    pub budget_s: f64,
    /// Rounds per launch.
    pub samples: u32,
}

impl PingpongOpts {
    /// The driver's command-line arguments.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--max-size".into(),
            self.max_size.to_string(),
            "--budget".into(),
            self.budget_s.to_string(),
            "--samples".into(),
            self.samples.to_string(),
        ]
    }
}

/// The ping-pong rows' settings: up to `max_size`, `budget_s` per size and round,
/// `samples` rounds.
fn pp(max_size: u64, budget_s: f64, samples: u32) -> Option<PingpongOpts> {
    Some(PingpongOpts {
        max_size,
        budget_s,
        samples,
    })
}

/// Usage text.
pub const USAGE: &str = "usage: cargo xtask bench [--quick | --full | --smoke] [options]

Runs oxmpi, Open MPI and MPICH interleaved on the same benchmark sources
(bench/c) and writes samples.csv, report.md and PNG plots.

  --quick              3 repetitions (fewer if a 150 s budget would be exceeded),
                       < 3 minutes (default); output docs/benchmarks
  --full               7 repetitions (fewer if a 20-minute budget would be
                       exceeded), powers of 2, waits (boundedly) for a quiet
                       machine; about 15-25 minutes on 2 cores
  --smoke              harness self-check, < 1 minute; output target/oxmpi-bench/smoke
  --reps N             override the number of repetitions (and lift the
                       mode's time budget)
  --budget SECS        measurement time budget of the run (0: none)
  --compare FILE       also compare oxmpi with the oxmpi rows of an earlier
                       run's samples.csv (before/after across commits): a
                       section of report.md
  --against FILE       with --compare: measure nothing, print the comparison
                       of FILE (now) with the --compare file (before)
  --out DIR            output directory
  --impls a,b,...      only these (ompi, ompi-nocma, mpich, oxmpi; mpich-wheel: the PyPI
                       MPICH wheel that measures MPI_Comm_spawn, whose name says its version)
  --oxmpi-prefix DIR   oxmpi install prefix (default target/oxmpi)
  --install-oxmpi      first run `cargo xtask install --prefix` into that prefix
  --no-install         do not apt-get install missing peers
  --timeout SECS       timeout of every launch (default: 120 s, and for the
                       benchmark launches 60 s + 4 x the per-measurement
                       budget x the measurements of the launch; with
                       --mpi4py-suite the timeout of each module, 300 s)
  --no-mpi4py          skip the mpi4py ping-pong (otherwise a venv with the
                       mpi4py wheel is made under target/oxmpi-bench/venv)
  --mpi4py-pingpong    measure only the mpi4py ping-pong rows (and the physical
                       probes), the mode's repetitions interleaved as usual;
                       output target/oxmpi-bench/mpi4py-pingpong unless --out
  --apps, --no-apps    time (or not) Debian's MPICH-built applications (ScaLAPACK
                       testers, a parallel HDF5 Fortran program) under MPICH
                       and under oxmpi, np=2 (default: on in --full and --smoke)

Collectives matrix (its own mode; output docs/benchmarks/collectives):
  --collectives        every blocking and nonblocking collective of oxbench,
                       4 B - 1 MiB, CHAR out of place and in place, the
                       reductions with every datatype of --dtypes, at every
                       --np, all implementations interleaved; 3 repetitions,
                       120-minute budget (about 115 minutes on 2 cores: np=4
                       and 8 run in both placements of --placement);
                       with --smoke a seconds-long self-check, with --full 5
                       repetitions and a larger per-measurement budget
  --np LIST            rank counts of the matrix (default 2,4,8; past 2 the
                       2-core machine is oversubscribed)
  --dtypes LIST        datatypes of the reductions' sweep (default INT,FLOAT,
                       DOUBLE,LONG,2INT,FLOAT_INT,DOUBLE_INT,LONG_INT,SHORT_INT;
                       TYPE:OP for one op, a pair type alone means MINLOC and
                       MAXLOC; `none` for no sweep)
  --colls LIST         only these collectives (oxbench names: allreduce,
                       ialltoallw, ...)
  --sizes LIST         message sizes in bytes of every matrix set
  --placement LIST     where the ranks of a rank count past the cores run, each
                       a row of its own: block (ranks 0..np/2-1 on CPU 0, the
                       rest on CPU 1), cyclic (rank r on CPU r mod 2), unpinned
                       (left to the scheduler); pinned by bench/c/pin.c from the
                       local rank, alike for every implementation (default
                       block,cyclic)

Scale curves (its own mode; output docs/benchmarks/scale):
  --scale              per-rank peak RSS after MPI_Init and after an all-pairs
                       exchange, the slowest rank's MPI_Init time, and start-up
                       (launcher wall time of hello) at np 2, 16, 64 and 256
                       (--np LIST to change; past 2 oversubscribed); 3
                       repetitions, 20-minute budget

mpi4py test suite (its own mode; output docs/benchmarks/mpi4py-suite):
  --mpi4py-suite       wall time of every module of mpi4py 4.1.2's test suite
                       (its sdist; spawn and dynproc excluded) on each
                       implementation's libmpi, module by module interleaved,
                       at np 2 and 5 (--np LIST); 2 repetitions, 45-minute
                       budget (a venv with mpi4py and numpy under target/)
  --modules LIST       only these modules (names without test_, e.g. p2p_buf);
                       with $OXMPI_BENCH_LOCK set to a file, each module's launch
                       holds an exclusive flock on it (as `flock FILE cmd` does)
  --overhead           measure only the observability overhead: the 8-byte
                       latency and the mpi4py ring (per trip and wall time) of
                       oxmpi as is (oxmpi), with a started MPI_T session on the
                       send/receive counters (oxmpi-mpit) and with
                       `mpirun --profile` (oxmpi-profile); no peers; output
                       target/oxmpi-bench/overhead unless --out is given.
                       With --mpi4py-suite: the suite's wall time on oxmpi
                       as is against `mpirun --profile`, module by module
                       interleaved (output target/oxmpi-bench/
                       overhead-mpi4py-suite unless --out is given)
";

/// Parse the command line (`args` excludes the program name).
pub fn parse_args(args: &[String], root: &Path) -> Result<Config, String> {
    let mut mode = Mode::Quick;
    let mut reps = None;
    let mut out = None;
    let mut only = None;
    let mut prefix = root.join("target").join("oxmpi");
    let mut install = true;
    let mut no_mpi4py = false;
    let mut install_oxmpi = false;
    let mut timeout = None;
    let mut budget: Option<u64> = None;
    let mut compare = None;
    let mut against = None;
    let mut apps = None;
    let mut matrix = false;
    let mut scale = false;
    let mut suite4py = false;
    let mut modules = None;
    let mut mopts = crate::matrix::MatrixArgs::default();
    let mut overhead = false;
    let mut pingpong_only = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |name: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--quick" => mode = Mode::Quick,
            "--full" => mode = Mode::Full,
            "--smoke" => mode = Mode::Smoke,
            "--reps" => {
                let v = val("--reps")?;
                reps = Some(
                    v.parse::<u32>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| format!("--reps: '{v}' is not a positive integer"))?,
                )
            }
            "--out" => out = Some(PathBuf::from(val("--out")?)),
            "--impls" => {
                only = Some(
                    val("--impls")?
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(str::to_string)
                        .collect(),
                )
            }
            "--oxmpi-prefix" => prefix = PathBuf::from(val("--oxmpi-prefix")?),
            "--no-install" => install = false,
            "--no-mpi4py" => no_mpi4py = true,
            "--install-oxmpi" => install_oxmpi = true,
            "--timeout" => {
                let v = val("--timeout")?;
                timeout = Some(
                    v.parse()
                        .map_err(|_| format!("--timeout: '{v}' is not a number of seconds"))?,
                )
            }
            "--budget" => {
                let v = val("--budget")?;
                budget = Some(
                    v.parse()
                        .map_err(|_| format!("--budget: '{v}' is not a number of seconds"))?,
                )
            }
            "--compare" => compare = Some(PathBuf::from(val("--compare")?)),
            "--against" => against = Some(PathBuf::from(val("--against")?)),
            "--apps" => apps = Some(true),
            "--no-apps" => apps = Some(false),
            "--collectives" => matrix = true,
            "--np" => mopts.np = Some(val("--np")?),
            "--dtypes" => mopts.dtypes = Some(val("--dtypes")?),
            "--colls" => mopts.colls = Some(val("--colls")?),
            "--sizes" => mopts.sizes = Some(val("--sizes")?),
            "--placement" => mopts.placement = Some(val("--placement")?),
            "--scale" => scale = true,
            "--mpi4py-suite" => suite4py = true,
            "--modules" => modules = Some(val("--modules")?),
            "--overhead" => overhead = true,
            "--mpi4py-pingpong" => pingpong_only = true,
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument '{other}'\n{USAGE}")),
        }
    }
    let target = root.join("target").join("oxmpi-bench");
    let mut c = match mode {
        Mode::Smoke => Config {
            mode,
            reps: 1,
            samples: 3,
            scale: 0.02,
            pt2pt_sizes: vec![0, 8, 65536],
            coll_sizes: vec![8],
            coll4_sizes: vec![8],
            startup_np: vec![2, 16],
            startup_runs: 1,
            quiet_wait: Duration::ZERO,
            out: target.join("smoke"),
            build_dir: target.join("build"),
            only: None,
            oxmpi_prefix: PathBuf::new(),
            install_peers: true,
            install_oxmpi: false,
            timeout: Duration::ZERO,
            timeout_explicit: false,
            op_budget: 0.2,
            fill_budget: false,
            quiet_wait_total: Duration::ZERO,
            mpi4py: pp(65536, 0.002, 2),
            budget: None,
            compare: None,
            compare_with: None,
            apps: mode != Mode::Quick,
            matrix: None,
            scale_curves: None,
            suite4py: None,
            overhead: false,
            ring_loops: 200,
            pingpong_only: false,
        },
        Mode::Quick => Config {
            mode,
            reps: 3,
            samples: 5,
            scale: 0.1,
            pt2pt_sizes: sizes(4, 4 << 20),
            coll_sizes: vec![8, 1024, 65536, 1 << 20],
            coll4_sizes: vec![8, 65536],
            startup_np: vec![2, 16],
            startup_runs: 1,
            quiet_wait: Duration::ZERO,
            out: root.join("docs").join("benchmarks"),
            build_dir: target.join("build"),
            only: None,
            oxmpi_prefix: PathBuf::new(),
            install_peers: true,
            install_oxmpi: false,
            timeout: Duration::ZERO,
            timeout_explicit: false,
            op_budget: 0.5,
            fill_budget: false,
            quiet_wait_total: Duration::ZERO,
            mpi4py: pp(4 << 20, 0.02, 3),
            budget: Some(Duration::from_secs(150)),
            compare: None,
            compare_with: None,
            apps: mode != Mode::Quick,
            matrix: None,
            scale_curves: None,
            suite4py: None,
            overhead: false,
            ring_loops: 5000,
            pingpong_only: false,
        },
        Mode::Full => Config {
            mode,
            reps: 7,
            samples: 11,
            scale: 1.0,
            pt2pt_sizes: sizes(2, 4 << 20),
            coll_sizes: sizes(4, 1 << 20).into_iter().filter(|s| *s >= 4).collect(),
            coll4_sizes: vec![8, 1024, 65536, 1 << 20],
            startup_np: vec![2, 16],
            startup_runs: 3,
            quiet_wait: Duration::from_secs(20),
            out: root.join("docs").join("benchmarks"),
            build_dir: target.join("build"),
            only: None,
            oxmpi_prefix: PathBuf::new(),
            install_peers: true,
            install_oxmpi: false,
            timeout: Duration::ZERO,
            timeout_explicit: false,
            op_budget: 0.6,
            fill_budget: false,
            quiet_wait_total: Duration::from_secs(180),
            mpi4py: pp(4 << 20, 0.05, 5),
            budget: Some(Duration::from_secs(20 * 60)),
            compare: None,
            compare_with: None,
            apps: mode != Mode::Quick,
            matrix: None,
            scale_curves: None,
            suite4py: None,
            overhead: false,
            ring_loops: 50000,
            pingpong_only: false,
        },
    };
    if [matrix, scale, suite4py].iter().filter(|x| **x).count() > 1 {
        return Err(format!(
            "give at most one of --collectives, --scale and --mpi4py-suite\n{USAGE}"
        ));
    }
    let only_np = mopts.dtypes.is_none()
        && mopts.colls.is_none()
        && mopts.sizes.is_none()
        && mopts.placement.is_none();
    let np = match &mopts.np {
        Some(v) => Some(crate::matrix::numbers::<u32>("--np", v)?),
        None => None,
    };
    if matrix {
        crate::matrix::configure(&mut c, &mopts, &target, root)?;
    } else if (scale || suite4py) && only_np {
        if scale {
            crate::scale::configure(&mut c, np, &target, root);
        } else {
            crate::suite4py::configure(&mut c, np, modules.as_deref(), &target, root);
        }
    } else if !mopts.is_empty() {
        return Err(format!(
            "--dtypes, --colls, --sizes and --placement need --collectives; --np needs one of --collectives, --scale and --mpi4py-suite\n{USAGE}"
        ));
    }
    if modules.is_some() && !suite4py {
        return Err(format!("--modules needs --mpi4py-suite\n{USAGE}"));
    }
    if let Some(r) = reps {
        // an explicit repetition count is honoured even past the time budget
        c.reps = r;
        c.budget = None;
    }
    if let Some(b) = budget {
        c.budget = (b > 0).then(|| Duration::from_secs(b));
    }
    if against.is_some() && compare.is_none() {
        return Err(format!("--against needs --compare\n{USAGE}"));
    }
    c.compare = compare;
    c.compare_with = against;
    if let Some(a) = apps {
        c.apps = a;
    }
    if matrix || scale || suite4py || overhead {
        // the applications belong to the default suite only
        c.apps = false;
    }
    let out_given = out.is_some();
    if let Some(o) = out {
        c.out = o;
    }
    c.only = only;
    // absolute, so that LD_LIBRARY_PATH and ldd output do not depend on the cwd
    c.oxmpi_prefix = if prefix.is_relative() {
        std::env::current_dir()
            .map(|d| d.join(&prefix))
            .unwrap_or(prefix)
    } else {
        prefix
    };
    c.install_peers = install;
    c.install_oxmpi = install_oxmpi;
    if no_mpi4py {
        c.mpi4py = None;
    }
    if pingpong_only {
        if matrix || scale || suite4py || overhead || no_mpi4py {
            return Err(format!(
                "--mpi4py-pingpong goes with none of --collectives, --scale, --mpi4py-suite, --overhead and --no-mpi4py\n{USAGE}"
            ));
        }
        c.pingpong_only = true;
        c.apps = false;
        if !out_given {
            // not over the committed report
            c.out = target.join("mpi4py-pingpong");
        }
    }
    c.overhead = overhead;
    if overhead && !out_given && c.mode != Mode::Smoke {
        // not over the committed comparison report (nor the committed suite's)
        c.out = target.join(if suite4py {
            "overhead-mpi4py-suite"
        } else {
            "overhead"
        });
    }
    c.timeout_explicit = timeout.is_some();
    c.timeout = Duration::from_secs(timeout.unwrap_or(120));
    Ok(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn size_lists() {
        assert_eq!(sizes(4, 64), vec![0, 1, 4, 16, 64]);
        let p2 = sizes(2, 4 << 20);
        assert_eq!(p2.len(), 24);
        assert_eq!(*p2.last().unwrap(), 4 << 20);
    }

    #[test]
    fn modes_and_overrides() {
        let root = Path::new("/r");
        let q = parse_args(&[], root).unwrap();
        assert_eq!(q.mode, Mode::Quick);
        assert_eq!(q.out, Path::new("/r/docs/benchmarks"));
        assert_eq!(q.oxmpi_prefix, Path::new("/r/target/oxmpi"));
        assert!(q.budget.is_some_and(|b| b < Duration::from_secs(180)));
        let s = parse_args(
            &args(&["--smoke", "--impls", "ompi,mpich", "--reps", "2"]),
            root,
        )
        .unwrap();
        assert_eq!(s.mode, Mode::Smoke);
        assert_eq!(s.reps, 2);
        let r = parse_args(&args(&["--reps", "3"]), root).unwrap();
        assert!(r.budget.is_none(), "explicit --reps lifts the budget");
        assert_eq!(s.only, Some(vec!["ompi".to_string(), "mpich".to_string()]));
        assert!(s.out.starts_with("/r/target"));
        let f = parse_args(&args(&["--full", "--no-install", "--out", "x"]), root).unwrap();
        assert_eq!((f.mode, f.install_peers), (Mode::Full, false));
        let pf = f.mpi4py.unwrap();
        assert_eq!(pf.max_size, 4 << 20);
        assert_eq!(
            pf.args()[..4],
            ["--max-size", "4194304", "--budget", "0.05"]
        );
        assert!(pf.samples >= 5, "the median of several rounds per launch");
        let n = parse_args(&args(&["--no-mpi4py", "--install-oxmpi"]), root).unwrap();
        assert!(n.mpi4py.is_none());
        assert!(n.install_oxmpi && !q.install_oxmpi);
        let r = parse_args(&args(&["--oxmpi-prefix", "rel/p"]), root).unwrap();
        assert!(r.oxmpi_prefix.is_absolute() && r.oxmpi_prefix.ends_with("rel/p"));
        assert_eq!(f.out, Path::new("x"));
        assert!(f.coll_sizes.iter().all(|s| *s >= 4));
        assert_eq!(f.timeout, Duration::from_secs(120));
        assert!(!f.timeout_explicit && f.op_budget > 0.0);
        assert!(f.budget.is_some_and(|b| b <= Duration::from_secs(25 * 60)));
        let t = parse_args(&args(&["--timeout", "5"]), root).unwrap();
        assert_eq!(t.timeout, Duration::from_secs(5));
        assert!(t.timeout_explicit);
        let b = parse_args(&args(&["--full", "--budget", "0"]), root).unwrap();
        assert!(b.budget.is_none());
        let b = parse_args(&args(&["--budget", "60", "--compare", "old.csv"]), root).unwrap();
        assert_eq!(b.budget, Some(Duration::from_secs(60)));
        assert_eq!(b.compare.as_deref(), Some(Path::new("old.csv")));
        assert!(b.compare_with.is_none());
        assert!(
            f.apps && s.apps && !q.apps,
            "applications in full and smoke mode"
        );
        let a = parse_args(&args(&["--apps"]), root).unwrap();
        let n = parse_args(&args(&["--full", "--no-apps"]), root).unwrap();
        assert!(a.apps && !n.apps);
        let o = parse_args(&args(&["--smoke", "--overhead"]), root).unwrap();
        assert!(o.overhead && !b.overhead && o.ring_loops < f.ring_loops);
        let o = parse_args(&args(&["--full", "--overhead"]), root).unwrap();
        assert_eq!(o.out, Path::new("/r/target/oxmpi-bench/overhead"));
        let o = parse_args(&args(&["--full", "--overhead", "--mpi4py-suite"]), root).unwrap();
        assert!(o.overhead && o.suite4py.is_some());
        assert_eq!(
            o.out,
            Path::new("/r/target/oxmpi-bench/overhead-mpi4py-suite")
        );
        let o = parse_args(&args(&["--overhead", "--out", "x"]), root).unwrap();
        assert_eq!(o.out, Path::new("x"));
        let p = parse_args(&args(&["--full", "--mpi4py-pingpong"]), root).unwrap();
        assert!(p.pingpong_only && !p.apps && !f.pingpong_only);
        assert_eq!(p.out, Path::new("/r/target/oxmpi-bench/mpi4py-pingpong"));
        assert!(p.mpi4py.is_some());
        for other in ["--no-mpi4py", "--overhead", "--scale", "--mpi4py-suite"] {
            assert!(parse_args(&args(&["--mpi4py-pingpong", other]), root).is_err());
        }
    }

    #[test]
    fn launch_timeouts_grow_with_the_work() {
        let fb = Duration::from_secs(7);
        assert_eq!(oxbench_timeout(10, 0.0, fb), fb);
        let a = oxbench_timeout(10, 0.5, fb);
        let b = oxbench_timeout(70, 0.5, fb);
        assert_eq!(a, Duration::from_secs(80));
        assert!(b > a && b < Duration::from_secs(300), "{b:?}");
        let m = measurement_timeout(0.5);
        assert_eq!(m, Duration::from_secs(35));
        assert!(m < a, "one measurement's silence is shorter than a launch");
    }

    #[test]
    fn bad_arguments() {
        let root = Path::new("/r");
        assert!(parse_args(&args(&["--reps", "0"]), root).is_err());
        assert!(parse_args(&args(&["--reps"]), root).is_err());
        assert!(parse_args(&args(&["--budget", "x"]), root).is_err());
        assert!(parse_args(&args(&["--against", "new.csv"]), root)
            .unwrap_err()
            .contains("needs --compare"));
        assert!(parse_args(&args(&["--frobnicate"]), root)
            .unwrap_err()
            .contains("unknown argument"));
    }
}
