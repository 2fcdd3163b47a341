//! `oxmpi-bench`: oxmpi vs Open MPI vs MPICH, measured in the same run
//! against the machine's physical limits. Run it as `cargo xtask bench
//! [--quick | --full | --smoke]` (see [`config::USAGE`]).
//!
//! Flow: install the peers if missing, build the C sources in `bench/c` with
//! each implementation's `mpicc`, check each implementation with a 2-rank
//! hello (oxmpi is skipped, with the reason, when its prefix is missing or
//! broken), then for each repetition measure the physical limits and run
//! every implementation in turn (interleaved), recording load and a
//! placement probe with each measurement. Writes `samples.csv`, `report.md`
//! and PNG plots into the output directory.

mod apps;
mod compare;
mod config;
mod impls;
mod matrix;
mod matrix_report;
mod parse;
mod plot;
mod report;
mod runner;
mod scale;
mod stats;
mod suite;
mod suite4py;

use config::{Config, Mode};
use impls::Impl;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Instant;
use suite::{Results, Runner};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

fn sh(cmd: &str, args: &[&str], dir: &Path) -> Option<String> {
    let o = Command::new(cmd)
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).trim().to_string())
}

fn meta(cfg: &Config, root: &Path) -> report::Meta {
    let commit =
        sh("git", &["rev-parse", "--short", "HEAD"], root).unwrap_or_else(|| "unknown".into());
    let dirty = sh(
        "git",
        &["status", "--porcelain", "--untracked-files=no"],
        root,
    )
    .is_some_and(|s| !s.is_empty());
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|x| x.1.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0 / 1024.0)
        .unwrap_or(f64::NAN);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let versions = sh(
        "dpkg-query",
        &[
            "-W",
            "-f",
            "${Package} ${Version}, ",
            "openmpi-bin",
            "mpich",
        ],
        root,
    )
    .map(|s| s.trim_end_matches([',', ' ']).to_string())
    .unwrap_or_else(|| "unknown (dpkg-query failed)".into());
    report::Meta {
        date: sh("date", &["-u", "+%Y-%m-%d %H:%M:%S"], root).unwrap_or_default(),
        commit: format!(
            "{commit}{}",
            if dirty {
                " (work tree had uncommitted changes)"
            } else {
                ""
            }
        ),
        mode: cfg.mode.name().into(),
        reps: cfg.reps,
        samples: cfg.samples,
        scale: cfg.scale,
        op_budget: cfg.op_budget,
        fill_budget: cfg.fill_budget,
        machine: format!(
            "{cpu}, {} CPUs, {mem_gib:.0} GiB RAM, Linux {kernel}",
            suite::cores()
        ),
        versions,
        duration_s: 0.0,
        pingpong: cfg.mpi4py,
        flag: if cfg.pingpong_only {
            " --mpi4py-pingpong".into()
        } else {
            String::new()
        },
    }
}

/// `cargo xtask install --prefix <prefix>` (release build of oxmpi).
fn install_oxmpi(cfg: &Config, root: &Path) -> Result<(), String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    eprintln!(
        "bench: installing oxmpi into {}",
        cfg.oxmpi_prefix.display()
    );
    let st = Command::new(cargo)
        .current_dir(root)
        .args(["run", "--quiet", "-p", "xtask", "--", "install", "--prefix"])
        .arg(&cfg.oxmpi_prefix)
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if st.success() {
        Ok(())
    } else {
        Err(format!("cargo xtask install failed: {st}"))
    }
}

/// When the oxmpi install's library was last written (UTC), for the report.
fn oxmpi_build_time(prefix: &Path, root: &Path) -> Option<String> {
    let lib = prefix.join("lib").join("libmpi.so.12");
    sh(
        "date",
        &["-u", "-r", &lib.to_string_lossy(), "+%Y-%m-%d %H:%M:%S"],
        root,
    )
}

fn wanted(cfg: &Config, root: &Path, res: &mut Results) -> Vec<Impl> {
    let prefix = &cfg.oxmpi_prefix;
    let mut v = Vec::new();
    let ox_ok = prefix.join("bin/mpirun").is_file() && prefix.join("bin/mpicc").is_file();
    if ox_ok && cfg.overhead {
        // the overhead section: oxmpi against itself, no peers
        let mut base = Impl::oxmpi(prefix);
        base.overhead_only = true;
        v.push(base);
        if cfg.suite4py.is_none() {
            // its session is opened by the benchmark program, which mpi4py's suite is not
            v.push(Impl::oxmpi_mpit(prefix));
        }
        v.push(Impl::oxmpi_profile(prefix, &cfg.build_dir.join("profile")));
    } else if ox_ok {
        v.push(Impl::oxmpi(prefix));
        v.push(Impl::oxmpi_pipe(prefix));
    } else {
        res.skipped.push((
            "oxmpi".into(),
            format!(
                "no oxmpi install at {} (bin/mpirun and bin/mpicc needed; run `cargo xtask install`)",
                prefix.display()
            ),
        ));
    }
    if !cfg.overhead {
        v.push(Impl::openmpi());
        v.push(Impl::openmpi_nocma());
        v.push(Impl::mpich());
        let wheel_wanted = cfg.only.as_ref().is_none_or(|o| {
            o.iter()
                .any(|n| n == "mpich-wheel" || impls::is_mpich_wheel(n))
        });
        if cfg.matrix.is_none()
            && cfg.scale_curves.is_none()
            && cfg.suite4py.is_none()
            && !cfg.pingpong_only
            && wheel_wanted
        {
            v.extend(suite::mpich_wheel(cfg, root, &mut res.notes));
        }
    }

    if cfg.matrix.is_some()
        || cfg.scale_curves.is_some()
        || cfg.suite4py.is_some()
        || cfg.pingpong_only
    {
        // the single-copy variants change only point-to-point paths (and run no mpi4py)
        v.retain(|i| !i.pt2pt_only);
    }
    if let Some(only) = &cfg.only {
        res.skipped.retain(|(n, _)| only.contains(n));
        v.retain(|i| only.contains(&i.name) || i.spawn_only);
    }
    v
}

fn run(cfg: &Config, root: &Path) -> Result<(), String> {
    let mut meta = meta(cfg, root);
    let mut res = Results::default();
    if !cfg.overhead {
        suite::ensure_peers(cfg, &mut res.notes);
    }
    let mut installed = false;
    if cfg.install_oxmpi {
        match install_oxmpi(cfg, root) {
            Ok(()) => installed = true,
            Err(e) => res.notes.push(format!("oxmpi install: {e}")),
        }
    }
    if let Some(t) = oxmpi_build_time(&cfg.oxmpi_prefix, root) {
        res.notes.push(if installed {
            format!("oxmpi: installed by this run (release build of the work tree) at {t} UTC")
        } else {
            format!(
                "oxmpi: the library in the install prefix was built at {t} UTC (it may be older than the commit above; use --install-oxmpi)"
            )
        });
    }
    // the reported duration covers the measurements, not the installs above
    let t0 = Instant::now();
    let probes = suite::build_probes(cfg)?;
    let want = wanted(cfg, root, &mut res);
    let ready = suite::prepare(cfg, want, &mut res);
    for (n, why) in &res.skipped {
        eprintln!("bench: skipping {n}: {why}");
    }
    if ready.is_empty() {
        return Err("no MPI implementation works; nothing to measure".into());
    }
    let apps = if cfg.apps {
        apps::prepare(cfg, root, &mut res.notes)
    } else {
        Vec::new()
    };
    let mut runner = Runner::new(cfg, probes, res);
    if cfg.mpi4py.is_some() {
        match suite::setup_mpi4py(cfg) {
            Ok(py) => {
                // mpi4py.bench's buffers are NumPy arrays when it can import numpy (a
                // user's usual set-up), else bytearrays: the same for every run
                if let Err(e) = suite4py::ensure_numpy(&py) {
                    runner.res.notes.push(format!(
                        "mpi4py ping-pong with bytearray buffers (no numpy: {e})"
                    ));
                }
                runner.python = Some(py);
            }
            Err(e) => runner
                .res
                .notes
                .push(format!("mpi4py ping-pong skipped: {e}")),
        }
    }
    if let Some(m) = &cfg.matrix {
        meta.reps = matrix::run(&mut runner, cfg, m, &ready);
        meta.duration_s = t0.elapsed().as_secs_f64();
        // the overlap rows, too: a nonblocking collective that ran has one
        return write_mode(cfg, root, &meta, runner.res, &["allreduce/", "iallreduce/"]);
    }
    if let Some(s) = &cfg.scale_curves {
        meta.reps = scale::run(&mut runner, cfg, s, &ready);
        meta.duration_s = t0.elapsed().as_secs_f64();
        return write_mode(cfg, root, &meta, runner.res, &["rss_pairs", "startup"]);
    }
    if let Some(s) = &cfg.suite4py {
        let py = suite::setup_mpi4py(cfg).map_err(|e| format!("mpi4py suite: {e}"))?;
        suite4py::ensure_numpy(&py).map_err(|e| format!("mpi4py suite: {e}"))?;
        let tests = suite4py::sdist_tests(cfg, &py).map_err(|e| format!("mpi4py suite: {e}"))?;
        let suite = suite4py::Suite {
            python: py,
            tests,
            // an explicit --timeout replaces the per-module timeout too
            timeout: if cfg.timeout_explicit {
                cfg.timeout
            } else {
                s.module_timeout
            },
        };
        meta.reps = suite4py::run(&mut runner, cfg, s, &ready, &suite)?;
        meta.duration_s = t0.elapsed().as_secs_f64();
        return write_mode(cfg, root, &meta, runner.res, &["mpi4py_suite"]);
    }
    let measure = Instant::now();
    let mut done = 0;
    for rep in 0..cfg.reps {
        let t = Instant::now();
        runner.repetition(rep, &ready);
        runner.applications(rep, &ready, &apps);
        done += 1;
        if let Some(note) = cfg.stop_after(rep, measure.elapsed(), t.elapsed()) {
            runner.res.notes.push(note);
            break;
        }
    }
    meta.reps = done;
    for ox in ready.iter().filter(|p| {
        p.imp.build == "oxmpi" && (!cfg.overhead || p.imp.name == "oxmpi") && !cfg.pingpong_only
    }) {
        runner.transport_report(ox);
    }
    let res = runner.res;
    meta.duration_s = t0.elapsed().as_secs_f64();

    std::fs::create_dir_all(&cfg.out)
        .map_err(|e| format!("cannot create {}: {e}", cfg.out.display()))?;
    let names: Vec<String> = res.ran.iter().map(|i| i.name.clone()).collect();
    let plots = match plot::draw_all(&cfg.out, &res.rows, &names) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("bench: plots skipped: {e}");
            Vec::new()
        }
    };
    let csv_path = save(cfg, root, "samples.csv", report::csv(&res.rows))?;
    let mut md = report::markdown(&meta, &res, &plots);
    if let Some(old) = &cfg.compare {
        let section = compare_section(old, &res.rows)?;
        // before the list of files, which ends the report
        match md.find("## Files\n") {
            Some(i) => md.insert_str(i, &section),
            None => md.push_str(&section),
        }
    }
    let md_path = save(cfg, root, "report.md", md)?;
    finish(&res, &meta, &csv_path, &md_path, plots.len());
    if cfg.mode == Mode::Smoke {
        smoke_check(&res, &csv_path, &md_path, cfg.pingpong_only)?;
        if !apps.is_empty() {
            smoke_check_apps(&res, &md_path)?;
        }
        eprintln!("bench: smoke check passed");
    }
    Ok(())
}

/// Write `text` to `name` in the output directory, with this machine's
/// work-tree path replaced (never in a committed report).
fn save(cfg: &Config, root: &Path, name: &str, text: String) -> Result<PathBuf, String> {
    let root_s = root.to_string_lossy().into_owned();
    let path = cfg.out.join(name);
    std::fs::write(&path, text.replace(&root_s, "<repo>"))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// The closing lines of a run on stderr.
fn finish(res: &Results, meta: &report::Meta, csv: &Path, md: &Path, plots: usize) {
    eprintln!(
        "bench: {} rows from {} implementation(s) in {:.0} s; wrote {}, {} and {plots} plot(s)",
        res.rows.len(),
        res.ran.len(),
        meta.duration_s,
        csv.display(),
        md.display(),
    );
    for f in &res.failures {
        eprintln!("bench: failure: {f}");
    }
}

/// The outputs of `--collectives`, `--scale` and `--mpi4py-suite`:
/// samples.csv, report.md (and details.md) and the plots; in smoke mode, a
/// check that rows of the mode (tests starting with one of `smoke_tests`)
/// were recorded.
fn write_mode(
    cfg: &Config,
    root: &Path,
    meta: &report::Meta,
    res: Results,
    smoke_tests: &[&str],
) -> Result<(), String> {
    std::fs::create_dir_all(&cfg.out)
        .map_err(|e| format!("cannot create {}: {e}", cfg.out.display()))?;
    let mut plots = Vec::new();
    let mut keep = |p: Result<String, plot::PlotError>| match p {
        Ok(f) => plots.push(f),
        Err(e) => eprintln!("bench: plot skipped: {e}"),
    };
    if cfg.matrix.is_some() {
        let times = matrix_report::time_rows(&res.rows);
        for (file, nb) in [
            ("collectives-blocking.png", false),
            ("collectives-nonblocking.png", true),
        ] {
            keep(plot::draw_grid(
                &cfg.out,
                file,
                "message size (bytes); barrier: np",
                "oxmpi vs best peer (x)",
                &matrix_report::curves(&times, nb),
                true,
            ));
        }
    } else if cfg.scale_curves.is_some() {
        keep(scale::plot(&cfg.out, &res));
    }
    let csv_path = save(cfg, root, "samples.csv", report::csv(&res.rows))?;
    let md = if cfg.matrix.is_some() {
        let (md, details) = matrix_report::markdown(meta, &res, &plots);
        save(cfg, root, "details.md", details)?;
        md
    } else if cfg.scale_curves.is_some() {
        scale::markdown(meta, &res, &plots)
    } else {
        suite4py::markdown(meta, &res, &plots)
    };
    let md_path = save(cfg, root, "report.md", md)?;
    finish(&res, meta, &csv_path, &md_path, plots.len());
    if cfg.mode == Mode::Smoke {
        let n = res
            .rows
            .iter()
            .filter(|r| smoke_tests.iter().any(|t| r.test.starts_with(t)))
            .count();
        if n == 0 {
            return Err(format!(
                "smoke: no {} row was recorded ({:?})",
                smoke_tests.join("/"),
                res.failures
            ));
        }
        let text = std::fs::read_to_string(&md_path).map_err(|e| e.to_string())?;
        if !text.contains("## Implementations") {
            return Err("smoke: report.md lacks its Implementations section".into());
        }
        eprintln!("bench: smoke check passed ({n} rows)");
    }
    Ok(())
}

/// The before/after section for `--compare OLD`.
fn compare_section(old: &Path, now: &[stats::Row]) -> Result<String, String> {
    let text = std::fs::read_to_string(old)
        .map_err(|e| format!("--compare: cannot read {}: {e}", old.display()))?;
    let name = old
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_default();
    let before =
        compare::parse_csv(&text, &old.display().to_string()).map_err(|e| e.to_string())?;
    Ok(compare::table(&before, now, "oxmpi", &name))
}

/// Smoke mode: the harness worked end to end (something ran, was parsed and
/// written). Never checks a measured value.
fn smoke_check(res: &Results, csv: &Path, md: &Path, pingpong_only: bool) -> Result<(), String> {
    let measured = res.rows.iter().filter(|r| r.imp != "machine").count();
    if measured == 0 {
        return Err(format!(
            "smoke: no MPI measurement was recorded ({:?})",
            res.failures
        ));
    }
    if !res
        .rows
        .iter()
        .any(|r| r.imp == "machine" && r.test == "memcpy")
    {
        return Err("smoke: the physical probes recorded nothing".into());
    }
    let text = std::fs::read_to_string(csv).map_err(|e| e.to_string())?;
    if text.lines().count() != res.rows.len() + 1 {
        return Err("smoke: samples.csv does not hold every row".into());
    }
    let m = std::fs::read_to_string(md).map_err(|e| e.to_string())?;
    if !m.contains("## Summary") {
        return Err("smoke: report.md lacks its summary".into());
    }
    if pingpong_only {
        // `--mpi4py-pingpong`: every implementation that ran has its rows
        return match res.ran.iter().find(|i| {
            !res.rows
                .iter()
                .any(|r| r.imp == i.name && r.test == "mpi4py_lat")
        }) {
            Some(i) => Err(format!(
                "smoke: {} ran no mpi4py ping-pong ({:?})",
                i.name, res.failures
            )),
            None => Ok(()),
        };
    }
    // oxmpi's transport path per size comes from its verbose output: when
    // oxmpi ran, at least one size must have a path its trace lines name
    if res.ran.iter().any(|i| i.name == "oxmpi") {
        let traced = res
            .transport
            .iter()
            .any(|(_, lines)| lines.iter().any(|l| parse::parse_sm_send(l).is_some()));
        if !traced {
            return Err(
                "smoke: oxmpi ran but its verbose output named no transport path (sm: send lines)"
                    .into(),
            );
        }
    }
    Ok(())
}

/// Smoke mode with applications: each of MPICH and oxmpi that ran recorded at least one
/// application, and the report has their section.
fn smoke_check_apps(res: &Results, md: &Path) -> Result<(), String> {
    for imp in apps::IMPLS {
        if !res.ran.iter().any(|i| i.name == imp) {
            continue;
        }
        if !res
            .rows
            .iter()
            .any(|r| r.imp == imp && r.test.starts_with("app_"))
        {
            return Err(format!(
                "smoke: no application ran under {imp} ({:?})",
                res.failures
            ));
        }
    }
    let m = std::fs::read_to_string(md).map_err(|e| e.to_string())?;
    if res.rows.iter().any(|r| r.test.starts_with("app_")) && !m.contains("## Applications") {
        return Err("smoke: report.md lacks the applications section".into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let root = workspace_root();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let cfg = match config::parse_args(&args, &root) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return if args.iter().any(|a| a == "-h" || a == "--help") {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            };
        }
    };
    if let (Some(old), Some(new)) = (&cfg.compare, &cfg.compare_with) {
        // offline: compare two earlier runs, measure nothing
        let now = std::fs::read_to_string(new)
            .map_err(|e| format!("--against: cannot read {}: {e}", new.display()))
            .and_then(|t| {
                compare::parse_csv(&t, &new.display().to_string()).map_err(|e| e.to_string())
            })
            .and_then(|rows| compare_section(old, &rows));
        return match now {
            Ok(md) => {
                print!("{md}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("bench: error: {e}");
                ExitCode::FAILURE
            }
        };
    }
    match run(&cfg, &root) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: error: {e}");
            ExitCode::FAILURE
        }
    }
}
