//! Scale curves (`cargo xtask bench --scale`): what a job costs as it
//! grows, for every implementation in the same run, interleaved. Per rank
//! count: the peak RSS of each rank after `MPI_Init` and after an all-pairs
//! exchange, the slowest rank's `MPI_Init` time (`bench/c/scale.c`), and
//! the launcher's wall time of a hello job (start-up). Rank counts past the
//! core count are oversubscribed.

use crate::config::{Config, Mode};
use crate::report::Meta;
use crate::stats::{summary, Key, Row};
use crate::suite::{machine_state, Prepared, Results, Runner};
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// Rank counts of a `--scale` run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleOpts {
    /// Rank counts of `scale.c` (memory, MPI_Init time).
    pub nps: Vec<u32>,
    /// Rank counts of the start-up (hello) launches.
    pub startup_np: Vec<u32>,
}

/// One `SCALE` line of `scale.c`: (rank, MPI_Init ms, RSS after init KiB,
/// RSS after the all-pairs exchange KiB).
pub type ScaleLine = (u32, f64, f64, f64);

/// Parse `scale.c`'s output (other lines, and launcher tags before
/// `SCALE`, are ignored).
pub fn parse_scale(text: &str) -> Vec<ScaleLine> {
    text.lines()
        .filter_map(|l| {
            let l = &l[l.find("SCALE ")?..];
            let f: std::collections::HashMap<&str, &str> = l
                .split_whitespace()
                .filter_map(|w| w.split_once('='))
                .collect();
            Some((
                f.get("rank")?.parse().ok()?,
                f.get("init_ms")?.parse().ok()?,
                f.get("rss_init_kb")?.parse().ok()?,
                f.get("rss_pairs_kb")?.parse().ok()?,
            ))
        })
        .collect()
}

/// Set up `c` for `--scale` in its mode (`np` overrides the rank counts of
/// both curves).
pub fn configure(c: &mut Config, np: Option<Vec<u32>>, target: &Path, root: &Path) {
    let (nps, startup_np) = match (c.mode, np) {
        (_, Some(v)) => (v.clone(), v),
        (Mode::Smoke, None) => (vec![2, 4], vec![2, 4]),
        _ => (vec![2, 16, 64, 256], vec![2, 16, 64, 256]),
    };
    c.scale_curves = Some(ScaleOpts { nps, startup_np });
    c.mpi4py = None;
    match c.mode {
        Mode::Smoke => {
            (c.reps, c.startup_runs) = (1, 1);
            c.out = target.join("smoke-scale");
            c.budget = None;
        }
        Mode::Quick => {
            (c.reps, c.startup_runs) = (3, 1);
            c.out = root.join("docs").join("benchmarks").join("scale");
            c.budget = Some(Duration::from_secs(20 * 60));
        }
        Mode::Full => {
            (c.reps, c.startup_runs) = (5, 3);
            c.out = root.join("docs").join("benchmarks").join("scale");
            c.budget = Some(Duration::from_secs(45 * 60));
        }
    }
}

/// The rows of one `scale.c` launch: `mpi_init` (the slowest rank's, ms;
/// every rank's in the values), `rss_init` and `rss_pairs` (median over
/// the ranks, [min, max] over the ranks, KiB; every rank's in the values).
pub fn scale_rows(template: &Row, lines: &[ScaleLine]) -> Vec<Row> {
    let mut out = Vec::new();
    type Column = fn(&ScaleLine) -> f64;
    let cols: [(&str, &str, Column); 3] = [
        ("mpi_init", "ms", |l| l.1),
        ("rss_init", "KiB", |l| l.2),
        ("rss_pairs", "KiB", |l| l.3),
    ];
    for (test, unit, get) in cols {
        let v: Vec<f64> = lines.iter().map(get).collect();
        let Some(s) = summary(&v) else { continue };
        let mut r = template.clone();
        r.test = test.into();
        r.unit = unit.into();
        r.median = if test == "mpi_init" { s.max } else { s.median };
        (r.min, r.max) = (s.min, s.max);
        r.values = v;
        out.push(r);
    }
    out
}

impl Runner<'_> {
    /// One `scale.c` launch of `p` at `np` ranks.
    pub fn scale_once(&mut self, rep: u32, p: &Prepared, np: u32) {
        if let Some(r) = self.hung_in(&p.imp.name, "scale", np, 0) {
            self.res.failures.push(format!(
                "rep {rep} {} scale np={np}: skipped (hung in repetition {r})",
                p.imp.name
            ));
            return;
        }
        let (load, busy) = machine_state(Duration::ZERO);
        let Some(o) = self.launch(p, np, &p.scale, &[], (rep, "scale"), None) else {
            return;
        };
        if o.status.is_none() {
            self.hung
                .push((p.imp.name.clone(), "scale".into(), np, 0, rep));
        }
        let lines = parse_scale(&o.stdout);
        if lines.len() != np as usize {
            if o.ok() {
                self.res.failures.push(format!(
                    "rep {rep} {} scale np={np}: {} of {np} ranks reported",
                    p.imp.name,
                    lines.len()
                ));
            }
            return;
        }
        let mut t = self.row(rep, &p.imp.name, "", np, 0, "");
        (t.load1, t.busy_pct) = (load, busy);
        let rows = scale_rows(&t, &lines);
        self.res.rows.extend(rows);
    }
}

/// Run the curves: per repetition, per rank count, every implementation in
/// turn (`scale.c`, then the start-up launches). No rank count starts once
/// the budget is spent (the first always runs). Returns the repetitions
/// started.
pub fn run(runner: &mut Runner, cfg: &Config, s: &ScaleOpts, ready: &[Prepared]) -> u32 {
    let impls: Vec<&Prepared> = ready.iter().filter(|p| !p.imp.pt2pt_only).collect();
    let mut nps: Vec<u32> = s.nps.iter().chain(&s.startup_np).copied().collect();
    nps.sort();
    nps.dedup();
    let start = Instant::now();
    let mut reps = 0;
    'reps: for rep in 0..cfg.reps {
        reps += 1;
        for &np in &nps {
            if cfg.budget.is_some_and(|b| start.elapsed() > b) && (rep, np) != (0, nps[0]) {
                runner.res.notes.push(format!(
                    "time budget of {} s spent: stopped in repetition {rep} before np={np}",
                    cfg.budget.map(|b| b.as_secs()).unwrap_or(0)
                ));
                break 'reps;
            }
            for p in &impls {
                eprintln!(
                    "bench: rep {} / {}: np={np}: {}",
                    rep + 1,
                    cfg.reps,
                    p.imp.name
                );
                if s.nps.contains(&np) {
                    runner.scale_once(rep, p, np);
                }
                if s.startup_np.contains(&np) {
                    runner.startup(rep, p, np);
                }
            }
        }
    }
    reps
}

/// Per implementation, the per-rank memory growth per added peer (KiB)
/// between consecutive rank counts, from the medians over repetitions of
/// `test` (`rss_pairs`): linear growth in np shows as equal steps.
pub fn growth(rows: &[Row], imp: &str, test: &str) -> Vec<(u32, u32, f64)> {
    let a: Vec<(u32, f64)> = crate::stats::aggregate(rows, imp)
        .into_iter()
        .filter(|(k, _)| k.0 == test)
        .map(|(k, s)| (k.1, s.median))
        .collect();
    a.windows(2)
        .map(|w| {
            (
                w[0].0,
                w[1].0,
                (w[1].1 - w[0].1) / f64::from(w[1].0 - w[0].0),
            )
        })
        .collect()
}

/// The rows plus `best-peer` (per repetition and metric, the better of
/// Open MPI and MPICH, of those whose row is comparable: not in
/// [`Results::not_comparable`]), the implementations and the ratio pairs of
/// the scale and mpi4py-suite reports.
pub fn with_best_peer(res: &Results) -> (Vec<Row>, Vec<String>, Vec<(String, String)>) {
    use crate::matrix_report::{coll_impls, BEST_PEER, PEERS};
    let mut rows = res.rows.clone();
    let comparable: Vec<Row> = res
        .rows
        .iter()
        .filter(|r| {
            !res.not_comparable
                .iter()
                .any(|(imp, key, rep)| *imp == r.imp && *key == r.key() && *rep == r.rep)
        })
        .cloned()
        .collect();
    rows.extend(crate::stats::best_of(&comparable, &PEERS, BEST_PEER));
    let imps = coll_impls(res);
    let mut pairs = Vec::new();
    if imps.iter().any(|i| i == "oxmpi") {
        for p in std::iter::once(BEST_PEER).chain(PEERS) {
            if p == BEST_PEER || imps.iter().any(|i| i == p) {
                pairs.push(("oxmpi".to_string(), p.to_string()));
            }
        }
    }
    (rows, imps, pairs)
}

/// `report.md` of a `--scale` run.
pub fn markdown(meta: &Meta, res: &Results, plots: &[String]) -> String {
    let (rows, imps, pairs) = with_best_peer(res);
    let mut o = String::new();
    crate::report::header(
        &mut o,
        "Scale curves: oxmpi vs Open MPI vs MPICH",
        " --scale",
        meta,
        res,
    );
    o.push_str(
        "What: per rank count, each rank's peak RSS after `MPI_Init` (`rss_init`) and after one \
         message to and from every other rank (`rss_pairs`; median over the ranks, [min–max] over \
         repetitions), the slowest rank's `MPI_Init` wall time (`mpi_init`), and the launcher's wall \
         time of a hello job (`startup`: launch, MPI_Init, MPI_Finalize, exit) (`bench/c/scale.c`, \
         `bench/c/hello.c`). Rank counts above the core count are oversubscribed (unbound). Ratios \
         are speed ratios (> 1: oxmpi costs less) per repetition; `best-peer` is, per repetition and \
         metric, the better of Open MPI and MPICH. Goals: memory <= 0.5x the best peer (ratio >= 2), \
         growing no faster than linearly in np; start-up and MPI_Init <= 0.25x (ratio >= 4).\n\n",
    );
    crate::report::implementations(&mut o, res);
    let mut cols = imps.clone();
    cols.push("best-peer".into());
    for (title, tests) in [
        ("Memory per rank", &["rss_init", "rss_pairs"][..]),
        ("MPI_Init and start-up", &["mpi_init", "startup"][..]),
    ] {
        let _ = writeln!(o, "## {title}\n");
        let mut keys: Vec<Key> = rows
            .iter()
            .filter(|r| tests.contains(&r.test.as_str()))
            .map(Row::key)
            .collect();
        keys.sort();
        keys.dedup();
        crate::report::metric_table(&mut o, &rows, &keys, &cols, &pairs, false);
    }
    let _ = writeln!(
        o,
        "## Memory growth per added peer\n\nKiB of peak RSS per rank (`rss_pairs`, medians) per rank added between consecutive rank counts: equal steps mean linear growth in np, growing steps faster than linear.\n"
    );
    let _ = writeln!(o, "| implementation | steps |\n|---|---|");
    for i in &imps {
        let steps: Vec<String> = growth(&rows, i, "rss_pairs")
            .iter()
            .map(|(a, b, k)| format!("{a}->{b}: {} KiB", crate::report::num(*k)))
            .collect();
        let _ = writeln!(o, "| {i} | {} |", steps.join(", "));
    }
    o.push('\n');
    crate::report::closing(&mut o, res, &[], plots);
    o
}

/// The scale plot: memory, MPI_Init and start-up against np, per
/// implementation (median, min-max over repetitions).
pub fn plot(dir: &Path, res: &Results) -> Result<String, crate::plot::PlotError> {
    let (rows, imps, _) = with_best_peer(res);
    let panels: Vec<crate::plot::RatioPanel> = [
        ("Peak RSS per rank after MPI_Init (KiB)", "rss_init"),
        (
            "Peak RSS per rank after all-pairs exchange (KiB)",
            "rss_pairs",
        ),
        ("Slowest rank's MPI_Init (ms)", "mpi_init"),
        ("Start-up: launcher wall time of hello (ms)", "startup"),
    ]
    .iter()
    .map(|(title, test)| {
        let lines = imps
            .iter()
            .map(|i| {
                let pts = crate::stats::aggregate(&rows, i)
                    .into_iter()
                    .filter(|(k, _)| k.0 == *test)
                    .map(|(k, s)| (f64::from(k.1), s.median, s.min, s.max))
                    .collect();
                (i.clone(), pts)
            })
            .collect();
        (title.to_string(), lines)
    })
    .collect();
    crate::plot::draw_grid(dir, "scale.png", "ranks (np)", "", &panels, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sample_row;

    #[test]
    fn scale_lines_and_rows() {
        let t =
            "noise\n[1,0]<stdout>:SCALE rank=0 init_ms=12.5 rss_init_kb=1000 rss_pairs_kb=1100\n\
                 SCALE rank=1 init_ms=20.0 rss_init_kb=3000 rss_pairs_kb=3300\n\
                 SCALE rank=2 init_ms=x rss_init_kb=1 rss_pairs_kb=1\n";
        let l = parse_scale(t);
        assert_eq!(
            l,
            vec![(0, 12.5, 1000.0, 1100.0), (1, 20.0, 3000.0, 3300.0)]
        );
        let rows = scale_rows(&sample_row(0, "oxmpi", "", 2, 0, f64::NAN, ""), &l);
        let got: Vec<(&str, f64, f64, f64, &str)> = rows
            .iter()
            .map(|r| (r.test.as_str(), r.median, r.min, r.max, r.unit.as_str()))
            .collect();
        assert_eq!(
            got,
            vec![
                ("mpi_init", 20.0, 12.5, 20.0, "ms"),
                ("rss_init", 2000.0, 1000.0, 3000.0, "KiB"),
                ("rss_pairs", 2200.0, 1100.0, 3300.0, "KiB")
            ]
        );
        assert_eq!(rows[2].values, vec![1100.0, 3300.0]);
    }

    #[test]
    fn growth_per_peer() {
        let rows: Vec<Row> = [(2, 1000.0), (16, 1700.0), (64, 4100.0)]
            .iter()
            .map(|(np, kb)| sample_row(0, "x", "rss_pairs", *np, 0, *kb, "KiB"))
            .collect();
        assert_eq!(
            growth(&rows, "x", "rss_pairs"),
            vec![(2, 16, 50.0), (16, 64, 50.0)]
        );
        assert!(growth(&rows, "y", "rss_pairs").is_empty());
    }

    #[test]
    fn command_line() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let c = crate::config::parse_args(&a(&["--scale"]), Path::new("/r")).unwrap();
        let s = c.scale_curves.unwrap();
        assert_eq!(s.nps, vec![2, 16, 64, 256]);
        assert_eq!(c.out, Path::new("/r/docs/benchmarks/scale"));
        let c =
            crate::config::parse_args(&a(&["--scale", "--smoke", "--np", "2,3"]), Path::new("/r"))
                .unwrap();
        assert_eq!(c.scale_curves.unwrap().startup_np, vec![2, 3]);
        assert!(
            crate::config::parse_args(&a(&["--scale", "--collectives"]), Path::new("/r"))
                .unwrap_err()
                .contains("one of")
        );
    }
}
