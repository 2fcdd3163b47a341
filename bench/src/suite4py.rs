//! mpi4py's whole test suite as a benchmark (`cargo xtask bench
//! --mpi4py-suite`): the wall time of every module of the mpi4py 4.1.2
//! sdist's `test/`, one launch per module (as `tests/clients/mpi4py-suite.sh`
//! runs it), on each implementation's libmpi through the same mpi4py wheel,
//! module by module interleaved between the implementations. The spawn
//! modules are excluded (`MPI4PY_TEST_SPAWN=0`; dynamic processes are
//! another issue's, and MPICH's singleton spawn hangs).

use crate::config::{Config, Mode};
use crate::report::Meta;
use crate::runner;
use crate::stats::{Key, Row};
use crate::suite::{Prepared, Results, Runner};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The mpi4py release whose suite runs (the wheel the harness installs).
const MPI4PY_VERSION: &str = "4.1.2";

/// Modules never run (dynamic processes).
const EXCLUDED: [&str; 2] = ["spawn", "dynproc"];

/// What a `--mpi4py-suite` run does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuiteOpts {
    /// Rank counts.
    pub nps: Vec<u32>,
    /// Only these modules (without `test_`); `None`: all.
    pub modules: Option<Vec<String>>,
    /// Timeout of one module's launch.
    pub module_timeout: Duration,
}

/// Set up `c` for `--mpi4py-suite` in its mode.
pub fn configure(
    c: &mut Config,
    np: Option<Vec<u32>>,
    modules: Option<&str>,
    target: &Path,
    root: &Path,
) {
    let smoke = c.mode == Mode::Smoke;
    let modules = modules
        .map(|m| {
            m.split(',')
                .map(|x| x.trim().trim_start_matches("test_").to_string())
                .filter(|x| !x.is_empty())
                .collect()
        })
        .or_else(|| smoke.then(|| vec!["environ".to_string(), "status".to_string()]));
    c.suite4py = Some(SuiteOpts {
        nps: np.unwrap_or_else(|| if smoke { vec![2] } else { vec![2, 5] }),
        modules,
        module_timeout: Duration::from_secs(if smoke { 120 } else { 300 }),
    });
    c.mpi4py = None;
    match c.mode {
        Mode::Smoke => {
            c.reps = 1;
            c.out = target.join("smoke-mpi4py-suite");
            c.budget = None;
        }
        Mode::Quick | Mode::Full => {
            c.reps = if c.mode == Mode::Full { 3 } else { 2 };
            c.out = root.join("docs").join("benchmarks").join("mpi4py-suite");
            let minutes = if c.mode == Mode::Full { 90 } else { 45 };
            c.budget = Some(Duration::from_secs(60 * minutes));
        }
    }
}

/// The suite's `test/` directory: mpi4py's sdist, downloaded with pip once
/// and unpacked under the harness's target directory.
pub fn sdist_tests(cfg: &Config, python: &Path) -> Result<PathBuf, String> {
    let dir = cfg
        .build_dir
        .parent()
        .unwrap_or(&cfg.build_dir)
        .join("mpi4py-sdist");
    let tests = dir.join(format!("mpi4py-{MPI4PY_VERSION}")).join("test");
    if tests.join("main.py").is_file() {
        return Ok(tests);
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let tgz = dir.join(format!("mpi4py-{MPI4PY_VERSION}.tar.gz"));
    if !tgz.is_file() {
        let mut c = Command::new(python);
        c.args([
            "-m",
            "pip",
            "download",
            "-q",
            // Only mpi4py itself as source: `:all:` would also build its
            // build dependencies (Cython) from source to prepare the
            // metadata, which takes minutes on a loaded machine.
            "--no-binary",
            "mpi4py",
            "--no-deps",
        ])
        .arg(format!("mpi4py=={MPI4PY_VERSION}"))
        .arg("-d")
        .arg(&dir);
        let o = runner::run(&mut c, Duration::from_secs(300)).map_err(|e| e.to_string())?;
        if !o.ok() {
            return Err(format!("pip download of the mpi4py sdist: {}", o.failure()));
        }
    }
    let mut c = Command::new("tar");
    c.arg("-xzf").arg(&tgz).arg("-C").arg(&dir);
    let o = runner::run(&mut c, Duration::from_secs(120)).map_err(|e| e.to_string())?;
    if !o.ok() || !tests.join("main.py").is_file() {
        return Err(format!("cannot unpack {}: {}", tgz.display(), o.failure()));
    }
    Ok(tests)
}

/// numpy in the mpi4py venv (the suite skips its numpy tests without it,
/// which would make the implementations' runs differ from a user's).
pub fn ensure_numpy(python: &Path) -> Result<(), String> {
    let has = |py: &Path| {
        Command::new(py)
            .args(["-c", "import numpy"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if has(python) {
        return Ok(());
    }
    let mut c = Command::new(python);
    c.args(["-m", "pip", "install", "-q", "--only-binary=:all:", "numpy"]);
    let o = runner::run(&mut c, Duration::from_secs(300)).map_err(|e| e.to_string())?;
    if o.ok() && has(python) {
        Ok(())
    } else {
        Err(format!("pip install numpy: {}", o.failure()))
    }
}

/// The modules of the suite in `tests` (names without `test_`), sorted,
/// without the excluded ones, restricted to `only` if given.
pub fn modules(tests: &Path, only: Option<&[String]>) -> Result<Vec<String>, String> {
    let mut v: Vec<String> = std::fs::read_dir(tests)
        .map_err(|e| format!("{}: {e}", tests.display()))?
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            Some(n.strip_prefix("test_")?.strip_suffix(".py")?.to_string())
        })
        .filter(|m| !EXCLUDED.contains(&m.as_str()))
        .collect();
    v.sort();
    if let Some(only) = only {
        if let Some(bad) = only.iter().find(|m| !v.contains(m)) {
            return Err(format!("--modules: no module test_{bad}.py in the suite"));
        }
        v.retain(|m| only.contains(m));
    }
    Ok(v)
}

/// The test count of unittest's `Ran N tests` line, if there is one.
pub fn tests_ran(text: &str) -> Option<u32> {
    text.lines().find_map(|l| {
        let l = l.trim();
        let rest = &l[l.find("Ran ")? + 4..];
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// The count of skipped tests in unittest's closing line (`OK (skipped=36)`,
/// `FAILED (failures=1, skipped=3)`), if it names one.
pub fn tests_skipped(text: &str) -> Option<u32> {
    text.lines().find_map(|l| {
        let l = l.trim();
        if !(l.contains("OK (") || l.contains("FAILED (")) {
            return None;
        }
        let rest = &l[l.find("skipped=")? + "skipped=".len()..];
        let n: String = rest.chars().take_while(char::is_ascii_digit).collect();
        n.parse().ok()
    })
}

/// The suite as one run launches it: the venv's python, the sdist's
/// `test/`, and the timeout of one module.
#[derive(Debug, Clone)]
pub struct Suite {
    /// The venv's python (mpi4py and numpy).
    pub python: PathBuf,
    /// The sdist's `test/` directory.
    pub tests: PathBuf,
    /// Timeout of one module's launch.
    pub timeout: Duration,
}

impl Runner<'_> {
    /// One module of the suite on `p` at `np` ranks: a row
    /// `mpi4py_suite/MODULE` with the launch's wall time (s). Returns the
    /// wall time (the timeout for a module that hung; NaN when it could not
    /// start) and the count of tests that ran and were not skipped.
    pub fn suite_module(
        &mut self,
        rep: u32,
        p: &Prepared,
        np: u32,
        suite: &Suite,
        module: &str,
    ) -> (f64, u32) {
        let mut imp = p.imp.clone();
        match crate::suite::mpi4py_env(self.cfg, p) {
            Ok(env) => {
                imp.env.retain(|(k, _)| !env.iter().any(|(k2, _)| k2 == k));
                imp.env.extend(env);
            }
            Err(e) => {
                self.res
                    .failures
                    .push(format!("rep {rep} {} mpi4py suite: {e}", p.imp.name));
                return (f64::NAN, 0);
            }
        }
        imp.env.push(("MPI4PY_TEST_SPAWN".into(), "0".into()));
        let args: Vec<String> = vec![
            suite.tests.join("main.py").to_string_lossy().into_owned(),
            "-q".into(),
            "-i".into(),
            format!("^test_{module}\\.py$"),
        ];
        // On a machine shared with other benchmarks: hold their lock file during the
        // launch, so no two timed runs overlap (released when `_lock` drops).
        let _lock = bench_lock();
        let (load, busy) = crate::suite::machine_state(Duration::ZERO);
        let mut c = imp.command(np, self.cores, &suite.python, &args);
        let what = format!("mpi4py test_{module}");
        let (wall, ok, out) = match runner::run(&mut c, suite.timeout) {
            Ok(o) => (o.wall.as_secs_f64(), o.ok(), Some(o)),
            Err(e) => {
                self.res
                    .failures
                    .push(format!("rep {rep} {} {what} np={np}: {e}", p.imp.name));
                return (f64::NAN, 0);
            }
        };
        if let Some(o) = &out {
            if !ok {
                self.res.failures.push(format!(
                    "rep {rep} {} {what} np={np}: {}",
                    p.imp.name,
                    o.failure()
                ));
            }
        }
        let text = out
            .as_ref()
            .map(|o| format!("{}\n{}", o.stderr, o.stdout))
            .unwrap_or_default();
        let ran = tests_ran(&text).unwrap_or(0);
        // A module whose tests an implementation mostly skips (Open MPI 4.1 fails
        // `MPI_Win_create` on `MPI_COMM_SELF` with no memory, so mpi4py skips all of
        // test_rma and test_rma_nb; it has no partitioned communication either) costs it
        // little more than the launch: say so, its time is not comparable.
        let skipped = tests_skipped(&text).unwrap_or(0);
        let incomparable = ran > 0 && 2 * skipped >= ran;
        if incomparable {
            let note = format!(
                "{} {what} np={np}: {skipped} of {ran} tests skipped (its time is not comparable)",
                p.imp.name
            );
            if !self.res.notes.contains(&note) {
                self.res.notes.push(note);
            }
        }
        let mut r = self.row(
            rep,
            &p.imp.name,
            &format!("mpi4py_suite/{module}"),
            np,
            0,
            "s",
        );
        (r.median, r.min, r.max) = (wall, wall, wall);
        (r.load1, r.busy_pct) = (load, busy);
        r.values = vec![wall];
        r.iters = ran;
        if incomparable {
            self.res
                .not_comparable
                .push((r.imp.clone(), r.key(), r.rep));
        }
        self.res.rows.push(r);
        (wall, ran.saturating_sub(skipped))
    }

    /// After every implementation ran `module` (`executed`: each one's tests
    /// that ran and were not skipped), mark the peers that executed fewer of
    /// them than oxmpi (see [`fewer_tests`]) as not comparable, with a note.
    fn compare_test_counts(&mut self, rep: u32, np: u32, module: &str, executed: &[(String, u32)]) {
        let Some(&(_, ours)) = executed.iter().find(|(i, _)| i == "oxmpi") else {
            return;
        };
        for (imp, n) in executed {
            if imp == "oxmpi" || !fewer_tests(*n, ours) {
                continue;
            }
            let key = (format!("mpi4py_suite/{module}"), np, 0);
            let pair = (imp.clone(), key, rep);
            // Already not comparable (it skipped at least half): noted then.
            if self.res.not_comparable.contains(&pair) {
                continue;
            }
            self.res.not_comparable.push(pair);
            let note = format!(
                "{imp} mpi4py test_{module} np={np}: executed {n} tests against oxmpi's {ours} (the rest skipped; its time is not comparable)"
            );
            if !self.res.notes.contains(&note) {
                self.res.notes.push(note);
            }
        }
    }
}

/// True when a peer that executed `theirs` of a module's tests (ran and not
/// skipped) did markedly less work than oxmpi with `ours`: fewer than 90 %
/// of them (mpi4py 4.1.2 skips 26 of test_io's 55 tests on MPICH 4.0, so its
/// time there is that of another workload). A difference of a few tests
/// (a feature one library lacks) keeps the times comparable.
pub fn fewer_tests(theirs: u32, ours: u32) -> bool {
    u64::from(theirs) * 10 < u64::from(ours) * 9
}

/// The lock file named by `$OXMPI_BENCH_LOCK`, if set, opened and locked exclusively
/// (`flock`, the lock `flock(1)` takes: benchmarks wrapped in `flock FILE` wait for it).
/// `None` when the variable is unset or the file cannot be opened or locked.
fn bench_lock() -> Option<std::fs::File> {
    let path = std::env::var_os("OXMPI_BENCH_LOCK")?;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .inspect_err(|e| eprintln!("bench: lock file {}: {e}", Path::new(&path).display()))
        .ok()?;
    runner::flock_exclusive(&f)
        .inspect_err(|e| eprintln!("bench: lock {}: {e}", Path::new(&path).display()))
        .ok()?;
    Some(f)
}

/// Run the suite: per repetition and rank count, module by module, every
/// implementation in turn; then a `mpi4py_suite` row per implementation
/// with the sum over the modules (only when every module was timed). No
/// module starts once the budget is spent (the first always runs). Returns
/// the repetitions started.
pub fn run(
    runner: &mut Runner,
    cfg: &Config,
    s: &SuiteOpts,
    ready: &[Prepared],
    suite: &Suite,
) -> Result<u32, String> {
    let impls: Vec<&Prepared> = ready.iter().filter(|p| !p.imp.pt2pt_only).collect();
    let mods = modules(&suite.tests, s.modules.as_deref())?;
    eprintln!(
        "bench: mpi4py suite: {} module(s) x np {:?} x {} implementation(s) x {} repetition(s)",
        mods.len(),
        s.nps,
        impls.len(),
        cfg.reps
    );
    let start = Instant::now();
    let mut reps = 0;
    'reps: for rep in 0..cfg.reps {
        reps += 1;
        for &np in &s.nps {
            let mut total = vec![0.0; impls.len()];
            for (k, m) in mods.iter().enumerate() {
                let mut executed = Vec::new();
                if cfg.budget.is_some_and(|b| start.elapsed() > b)
                    && (rep, np, k) != (0, s.nps[0], 0)
                {
                    runner.res.notes.push(format!(
                        "time budget of {} s spent: stopped in repetition {rep} before np={np} test_{m} (no total for that repetition)",
                        cfg.budget.map(|b| b.as_secs()).unwrap_or(0)
                    ));
                    break 'reps;
                }
                for (i, p) in impls.iter().enumerate() {
                    eprintln!(
                        "bench: rep {} / {}: np={np} test_{m}: {}",
                        rep + 1,
                        cfg.reps,
                        p.imp.name
                    );
                    let (wall, n) = runner.suite_module(rep, p, np, suite, m);
                    total[i] += wall;
                    if !wall.is_nan() {
                        executed.push((p.imp.name.clone(), n));
                    }
                }
                runner.compare_test_counts(rep, np, m, &executed);
            }
            for (i, p) in impls.iter().enumerate() {
                if total[i].is_nan() {
                    continue;
                }
                let mut r = runner.row(rep, &p.imp.name, "mpi4py_suite", np, 0, "s");
                (r.median, r.min, r.max) = (total[i], total[i], total[i]);
                r.values = vec![total[i]];
                r.iters = mods.len() as u32;
                runner.res.rows.push(r);
            }
        }
    }
    Ok(reps)
}

/// `report.md` of a `--mpi4py-suite` run.
pub fn markdown(meta: &Meta, res: &Results, plots: &[String]) -> String {
    let (rows, imps, mut pairs) = crate::scale::with_best_peer(res);
    // `--overhead`: oxmpi with the job profile against itself, no peers
    let overhead = imps.iter().any(|i| i == "oxmpi-profile");
    let mut o = String::new();
    crate::report::header(
        &mut o,
        "mpi4py test suite: wall time",
        " --mpi4py-suite",
        meta,
        res,
    );
    let _ = writeln!(
        o,
        "What: the wall time of mpi4py {MPI4PY_VERSION}'s own test suite (the sdist's `test/`, \
         `main.py -q -i '^test_MODULE\\.py$'`, one launch per module, `MPI4PY_TEST_SPAWN=0`, \
         test_spawn and test_dynproc excluded) with the unmodified mpi4py wheel (and numpy) loading \
         each implementation's libmpi (`MPI4PY_LIBMPI`), module by module interleaved between the \
         implementations; `mpi4py_suite` is the sum over the modules of one repetition. Rank counts \
         above the core count are oversubscribed. Ratios are speed ratios (> 1: oxmpi is faster) per \
         repetition; the goal is oxmpi <= 0.5x MPICH's time (ratio >= 2). A module that fails or times \
         out still counts its wall time (see Failures); the CSV's `iters` is the module's test count \
         (`Ran N tests`). A peer's module time is not comparable, and never the best peer, when it \
         skipped at least half of the module's tests or executed (ran and did not skip) fewer than \
         90 % of the tests oxmpi executed: that is another workload (see Notes).\n"
    );
    let mut cols = imps.clone();
    if overhead {
        pairs = vec![("oxmpi-profile".into(), "oxmpi".into())];
        let _ = writeln!(
            o,
            "Overhead run (`--overhead`): oxmpi as is against `mpirun --profile` (each module's \
             profile written at its end, inside its wall time); `oxmpi-profile vs oxmpi` is \
             oxmpi's time over the profiled time per repetition, so the goal (profile overhead \
             <= 3%) is a ratio >= 0.971.\n"
        );
    } else {
        cols.push("best-peer".into());
    }
    crate::report::implementations(&mut o, res);
    let _ = writeln!(o, "## Whole suite\n");
    let keys: Vec<Key> = crate::stats::aggregate(&rows, "best-peer")
        .into_keys()
        .chain(
            imps.iter()
                .flat_map(|i| crate::stats::aggregate(&rows, i).into_keys()),
        )
        .filter(|k| k.0 == "mpi4py_suite")
        .collect::<std::collections::BTreeSet<Key>>()
        .into_iter()
        .collect();
    crate::report::metric_table(&mut o, &rows, &keys, &cols, &pairs, false);
    let _ = writeln!(o, "## Per module\n");
    let mut mkeys: Vec<Key> = rows
        .iter()
        .filter(|r| r.test.starts_with("mpi4py_suite/"))
        .map(Row::key)
        .collect();
    mkeys.sort_by(|a, b| (a.1, &a.0).cmp(&(b.1, &b.0)));
    mkeys.dedup();
    crate::report::metric_table(&mut o, &rows, &mkeys, &cols, &pairs, false);
    crate::report::closing(&mut o, res, &[], plots);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unittest_counts() {
        assert_eq!(
            tests_ran("....\n----\nRan 52 tests in 1.2s\n\nOK\n"),
            Some(52)
        );
        assert_eq!(tests_ran("[0] Ran 1 test in 0.1s"), Some(1));
        assert_eq!(tests_ran("nothing"), None);
        assert_eq!(
            tests_skipped("Ran 36 tests in 0.033s\n\nOK (skipped=36)\n"),
            Some(36)
        );
        assert_eq!(
            tests_skipped("Ran 9 tests\nFAILED (failures=1, skipped=3)"),
            Some(3)
        );
        assert_eq!(tests_skipped("[0] OK (skipped=2)"), Some(2));
        assert_eq!(tests_skipped("Ran 9 tests\n\nOK\n"), None);
        assert_eq!(tests_skipped("skipped=4 in a test's own output"), None);
    }

    #[test]
    fn module_lists() {
        let d = std::env::temp_dir().join(format!("oxmpi-bench-suite-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        for f in [
            "test_b.py",
            "test_a.py",
            "test_spawn.py",
            "main.py",
            "test_c.txt",
        ] {
            std::fs::write(d.join(f), "").unwrap();
        }
        let all = modules(&d, None);
        let one = modules(&d, Some(&["b".to_string()]));
        let bad = modules(&d, Some(&["zz".to_string()]));
        let _ = std::fs::remove_dir_all(&d);
        assert_eq!(all.unwrap(), vec!["a", "b"]);
        assert_eq!(one.unwrap(), vec!["b"]);
        assert!(bad.unwrap_err().contains("test_zz.py"));
    }

    #[test]
    fn overhead_report_compares_the_profile_with_oxmpi() {
        let prefix = Path::new("/x");
        let row = |rep: u32, imp: &str, secs: f64| Row {
            rep,
            imp: imp.into(),
            test: "mpi4py_suite".into(),
            np: 2,
            median: secs,
            min: secs,
            max: secs,
            unit: "s".into(),
            size: 0,
            load1: 0.0,
            busy_pct: 0.0,
            probe_rtt_ns: None,
            probe_near_ns: None,
            limit: None,
            unix_time: 0,
            values: vec![secs],
            iters: 1,
        };
        let res = Results {
            rows: vec![row(0, "oxmpi", 10.0), row(0, "oxmpi-profile", 10.2)],
            ran: vec![
                crate::impls::Impl::oxmpi(prefix),
                crate::impls::Impl::oxmpi_profile(prefix, prefix),
            ],
            ..Results::default()
        };
        let md = markdown(&Meta::default(), &res, &[]);
        let line = md
            .lines()
            .find(|l| l.starts_with("| mpi4py_suite np=2 (s) |"))
            .expect(&md);
        assert_eq!(line, "| mpi4py_suite np=2 (s) | 10.0 | 10.2 | 0.980x |");
        assert!(!md.contains("best-peer"), "{md}");
    }

    /// A peer that skipped most of a module's tests (Open MPI 4.1's test_rma) ran faster
    /// than anyone but is not comparable: the best peer is the other one, MPICH, and a
    /// module that every peer skipped has no best peer.
    #[test]
    fn a_peer_whose_time_is_not_comparable_is_never_the_best_peer() {
        let row = |rep, imp: &str, test: &str, secs| {
            crate::stats::sample_row(rep, imp, test, 2, 0, secs, "s")
        };
        let mut rows = Vec::new();
        for rep in 0..2 {
            rows.extend([
                row(rep, "oxmpi", "mpi4py_suite/rma", 2.24),
                row(rep, "ompi", "mpi4py_suite/rma", 0.604),
                row(rep, "mpich", "mpi4py_suite/rma", 2.46),
                row(rep, "oxmpi", "mpi4py_suite/cffi", 0.2),
                row(rep, "ompi", "mpi4py_suite/cffi", 0.3),
                row(rep, "mpich", "mpi4py_suite/cffi", 0.1),
            ]);
        }
        let key = |m: &str| (format!("mpi4py_suite/{m}"), 2, 0);
        let mut not_comparable = Vec::new();
        for rep in 0..2 {
            not_comparable.push(("ompi".to_string(), key("rma"), rep));
            not_comparable.push(("ompi".to_string(), key("cffi"), rep));
            not_comparable.push(("mpich".to_string(), key("cffi"), rep));
        }
        let res = Results {
            rows,
            ran: vec![
                crate::impls::Impl::oxmpi(Path::new("/x")),
                crate::impls::Impl::openmpi(),
                crate::impls::Impl::mpich(),
            ],
            not_comparable,
            ..Results::default()
        };
        let (rows, _, _) = crate::scale::with_best_peer(&res);
        let best = |m: &str| -> Vec<f64> {
            rows.iter()
                .filter(|r| r.imp == "best-peer" && r.key() == key(m))
                .map(|r| r.median)
                .collect()
        };
        assert_eq!(best("rma"), vec![2.46, 2.46]);
        assert_eq!(best("cffi"), Vec::<f64>::new());
        let md = markdown(&Meta::default(), &res, &[]);
        let line = md
            .lines()
            .find(|l| l.starts_with("| mpi4py_suite/rma np=2 (s) |"))
            .expect(&md);
        assert!(line.contains("| 2.46 | 1.10x |"), "{line}");
    }

    /// MPICH 4.0 skips 26 of test_io's 55 tests: its time is not comparable; a
    /// few tests fewer (or more) keep a peer comparable.
    #[test]
    fn a_peer_that_executed_markedly_fewer_tests_is_not_comparable() {
        assert!(fewer_tests(29, 55));
        assert!(fewer_tests(0, 1));
        assert!(!fewer_tests(54, 55));
        assert!(!fewer_tests(90, 100));
        assert!(fewer_tests(89, 100));
        assert!(!fewer_tests(60, 55));
        assert!(!fewer_tests(0, 0));
    }

    #[test]
    fn command_line() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let r = Path::new("/r");
        let c = crate::config::parse_args(&a(&["--mpi4py-suite"]), r).unwrap();
        let s = c.suite4py.unwrap();
        assert_eq!((s.nps, s.modules), (vec![2, 5], None));
        assert_eq!(c.out, Path::new("/r/docs/benchmarks/mpi4py-suite"));
        let c = crate::config::parse_args(
            &a(&[
                "--mpi4py-suite",
                "--modules",
                "test_p2p_buf,op",
                "--np",
                "3",
            ]),
            r,
        )
        .unwrap();
        let s = c.suite4py.unwrap();
        assert_eq!(
            s.modules,
            Some(vec!["p2p_buf".to_string(), "op".to_string()])
        );
        assert_eq!(s.nps, vec![3]);
        assert!(crate::config::parse_args(&a(&["--modules", "op"]), r)
            .unwrap_err()
            .contains("--modules needs"));
    }
}
