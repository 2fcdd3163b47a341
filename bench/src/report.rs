//! Output: the CSV of raw samples and the markdown report.

use crate::stats::{aggregate, best_of, pairwise, summary, Key, Row, Summary, PLACEMENTS};
use crate::suite::Results;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// CSV header (one line per [`Row`]). `probe_rtt_ns` is the farthest of the run's
/// placement probes, `probe_near_ns` the nearest, `placement` near, far or mixed (see
/// [`Row::placement`]).
pub const CSV_HEADER: &str = "rep,impl,test,np,size,median,min,max,unit,limit,fraction_of_limit,\
load1,busy_pct,probe_rtt_ns,placement,unix_time,values,iters,probe_near_ns";

/// The header of CSVs written before the `probe_near_ns` column was added (still
/// readable by `--compare`).
pub const CSV_HEADER_V2: &str =
    "rep,impl,test,np,size,median,min,max,unit,limit,fraction_of_limit,\
load1,busy_pct,probe_rtt_ns,placement,unix_time,values,iters";

/// The header of CSVs written before the `iters` column was added (still
/// readable by `--compare`).
pub const CSV_HEADER_V1: &str =
    "rep,impl,test,np,size,median,min,max,unit,limit,fraction_of_limit,\
load1,busy_pct,probe_rtt_ns,placement,unix_time,values";

fn f(x: f64) -> String {
    if x.is_nan() {
        String::new()
    } else {
        format!("{x:.4}")
    }
}

fn fo(x: Option<f64>) -> String {
    x.map(f).unwrap_or_default()
}

/// One CSV line for a row (no field contains a comma; samples are `;`-separated).
pub fn csv_line(r: &Row) -> String {
    let values: Vec<String> = r.values.iter().map(|v| f(*v)).collect();
    format!(
        "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
        r.rep,
        r.imp,
        r.test,
        r.np,
        r.size,
        f(r.median),
        f(r.min),
        f(r.max),
        r.unit,
        fo(r.limit),
        fo(r.fraction_of_limit()),
        f(r.load1),
        f(r.busy_pct),
        fo(r.probe_rtt_ns),
        r.placement().unwrap_or(""),
        r.unix_time,
        values.join(";"),
        r.iters,
        fo(r.probe_near_ns)
    )
}

/// The whole CSV file.
pub fn csv(rows: &[Row]) -> String {
    let mut s = String::from(CSV_HEADER);
    s.push('\n');
    for r in rows {
        s.push_str(&csv_line(r));
        s.push('\n');
    }
    s
}

/// A value with about three significant digits.
pub fn num(x: f64) -> String {
    let a = x.abs();
    if x.is_nan() {
        "-".into()
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// `median [min–max]`, or `median` alone for a single value.
pub fn cell(s: &Summary) -> String {
    if s.n <= 1 || s.min == s.max {
        num(s.median)
    } else {
        format!("{} [{}–{}]", num(s.median), num(s.min), num(s.max))
    }
}

/// A byte count as `0 B`, `64 B`, `4 KiB`, `1 MiB`.
pub fn size_label(b: u64) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else if b >= 1024 && b % 1024 == 0 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// Facts about the run for the report header.
#[derive(Debug, Default, Clone)]
pub struct Meta {
    /// UTC date and time of the start.
    pub date: String,
    /// Git commit (and "+dirty").
    pub commit: String,
    /// Mode name.
    pub mode: String,
    /// Repetitions.
    pub reps: u32,
    /// Samples per run.
    pub samples: u32,
    /// Iteration scale.
    pub scale: f64,
    /// Time budget of one measurement in seconds (0: none).
    pub op_budget: f64,
    /// Iterations per sample calibrated to fill the budget (`fill=1`).
    pub fill_budget: bool,
    /// CPU model, cores, memory, kernel.
    pub machine: String,
    /// Peer package versions.
    pub versions: String,
    /// Wall time of the whole run, seconds.
    pub duration_s: f64,
    /// The command line's flag that chose a part of the suite (` --mpi4py-pingpong`), or
    /// empty.
    pub flag: String,
    /// How the mpi4py ping-pong rows were measured, if they were.
    pub pingpong: Option<crate::config::PingpongOpts>,
}

/// Rows plus the synthetic `ompi-best` (better of Open MPI's settings per
/// repetition and metric).
pub fn with_best(rows: &[Row]) -> Vec<Row> {
    let mut all = rows.to_vec();
    all.extend(best_of(rows, &["ompi", "ompi-nocma"], "ompi-best"));
    all
}

/// The (subject, reference) pairs whose ratios are reported.
pub fn ratio_pairs(ran: &[String]) -> Vec<(String, String)> {
    let has = |n: &str| ran.iter().any(|x| x == n);
    let mut p = Vec::new();
    if has("oxmpi") {
        if has("ompi") {
            p.push(("oxmpi".into(), "ompi-best".into()));
        }
        if has("mpich") {
            p.push(("oxmpi".into(), "mpich".into()));
        }
        // the MPICH that can spawn (its only rows are comm_spawn)
        for w in ran.iter().filter(|n| crate::impls::is_mpich_wheel(n)) {
            p.push(("oxmpi".into(), w.clone()));
        }
    }
    if has("mpich") && has("ompi") {
        p.push(("mpich".into(), "ompi-best".into()));
    }
    if has("ompi-nocma") && has("ompi") {
        p.push(("ompi-nocma".into(), "ompi".into()));
    }
    if has("oxmpi-pipe") && has("oxmpi") {
        p.push(("oxmpi-pipe".into(), "oxmpi".into()));
    }
    // the overhead section: each observability variant against oxmpi as is
    for v in ["oxmpi-mpit", "oxmpi-profile"] {
        if has(v) && has("oxmpi") {
            p.push((v.into(), "oxmpi".into()));
        }
    }
    p
}

/// A table of `keys`: each implementation's median [min–max] over
/// repetitions, optionally its % of the physical limit, and the speed ratios
/// of `pairs` (per repetition, summarised).
pub fn metric_table(
    out: &mut String,
    rows: &[Row],
    keys: &[Key],
    imps: &[String],
    pairs: &[(String, String)],
    limit_col: bool,
) {
    let aggs: Vec<BTreeMap<Key, Summary>> = imps.iter().map(|i| aggregate(rows, i)).collect();
    let ratios: Vec<BTreeMap<Key, Summary>> =
        pairs.iter().map(|(a, b)| pairwise(rows, a, b)).collect();
    let mut head = String::from("| metric |");
    let mut sep = String::from("|---|");
    for i in imps {
        let _ = write!(head, " {i} |");
        sep.push_str("---|");
    }
    if limit_col {
        for i in imps {
            let _ = write!(head, " {i} % of limit |");
            sep.push_str("---|");
        }
    }
    for (a, b) in pairs {
        let _ = write!(head, " {a} vs {b} |");
        sep.push_str("---|");
    }
    let _ = writeln!(out, "{head}\n{sep}");
    for k in keys {
        let unit = rows
            .iter()
            .find(|r| r.key() == *k)
            .map(|r| r.unit.clone())
            .unwrap_or_default();
        let label = match k.0.as_str() {
            t if ["startup", "barrier", "mpi_init", "rss_init", "rss_pairs"].contains(&t)
                || t.starts_with("mpi4py_suite") =>
            {
                format!("{} np={} ({unit})", k.0, k.1)
            }
            t if t.starts_with("app_") => {
                format!("{} np={} ({unit})", t.trim_start_matches("app_"), k.1)
            }
            t if t.starts_with("rss") => format!("{t} rank {} ({unit})", k.2),
            "comm_spawn" => format!("MPI_Comm_spawn of {} + merge ({unit})", k.2),
            t => format!("{t} np={} {} ({unit})", k.1, size_label(k.2)),
        };
        let _ = write!(out, "| {label} |");
        for a in &aggs {
            let _ = write!(
                out,
                " {} |",
                a.get(k).map(cell).unwrap_or_else(|| "-".into())
            );
        }
        if limit_col {
            for i in imps {
                let fr: Vec<f64> = rows
                    .iter()
                    .filter(|r| r.imp == *i && r.key() == *k)
                    .filter_map(Row::fraction_of_limit)
                    .map(|x| 100.0 * x)
                    .collect();
                let _ = write!(
                    out,
                    " {} |",
                    summary(&fr)
                        .map(|s| num(s.median))
                        .unwrap_or_else(|| "-".into())
                );
            }
        }
        for q in &ratios {
            let _ = write!(
                out,
                " {} |",
                q.get(k)
                    .map(|s| format!("{}x", cell(s)))
                    .unwrap_or_else(|| "-".into())
            );
        }
        out.push('\n');
    }
    out.push('\n');
}

/// Point-to-point latency and bandwidth split by the vCPU placement each measurement ran
/// in ([`Row::placement`]: the probes inside the benchmark program before every sample and
/// after the last, or the launch's probes before and after it); a measurement whose probes
/// disagree ("mixed") is in neither column (anchors: compare only within a placement).
fn placement_table(o: &mut String, rows: &[Row], imps: &[String]) {
    placement_section(
        o,
        rows,
        imps,
        &Placed {
            tests: &["lat"],
            title: "Latency by vCPU placement",
            unit: "One-way us",
            higher_better: false,
        },
    );
    placement_section(
        o,
        rows,
        imps,
        &Placed {
            tests: &["bw", "bibw"],
            title: "Bandwidth by vCPU placement",
            unit: "MB/s",
            higher_better: true,
        },
    );
}

/// One table of [`placement_table`]: which measurements, and how they read.
struct Placed<'a> {
    tests: &'a [&'a str],
    title: &'a str,
    unit: &'a str,
    /// Bandwidth (more is better) rather than time.
    higher_better: bool,
}

fn placement_section(o: &mut String, rows: &[Row], imps: &[String], p: &Placed) {
    let Placed {
        tests,
        title,
        unit,
        higher_better,
    } = *p;
    let ours = |r: &&Row| tests.contains(&r.test.as_str()) && r.np == 2;
    let keys: Vec<(String, u64)> = {
        let mut v: Vec<(String, u64)> = rows
            .iter()
            .filter(ours)
            .map(|r| (r.test.clone(), r.size))
            .collect();
        v.sort();
        v.dedup();
        v
    };
    if keys.is_empty() {
        return;
    }
    // oxmpi against the best peer (each peer setting's median) within each placement.
    let peers: Vec<&str> = ["ompi", "ompi-nocma", "mpich"]
        .into_iter()
        .filter(|i| imps.iter().any(|x| x == i))
        .collect();
    let vs = imps.iter().any(|x| x == "oxmpi") && !peers.is_empty();
    let mixed = rows
        .iter()
        .filter(ours)
        .filter(|r| r.placement() == Some("mixed"))
        .count();
    let _ = writeln!(
        o,
        "## {title}\n\n{unit}, median over the runs measured near (every placement probe's cache-line RTT < {} ns) or far (every probe's above); (n) = runs. The point-to-point tests are probed inside the benchmark program, before every sample and after the last; other runs just before and just after the launch. {mixed} run(s) whose probes disagree (the hypervisor moved a vCPU during the run) are in neither column.{}\n",
        crate::parse::NEAR_RTT_NS,
        if vs {
            " The last two columns compare oxmpi with the best peer setting within the same placement (speed ratio of oxmpi's median over the best peer's: > 1 means oxmpi is faster), which the summary's per-repetition ratios cannot when the placements of the runs differ; `-` where oxmpi, or one of the peer settings that measured the size, has no run in that placement (the best of a subset of the peers is not the best peer)."
        } else {
            ""
        }
    );
    let mut head = String::from("| test | size |");
    let mut sep = String::from("|---|---|");
    for i in imps {
        let _ = write!(head, " {i} near | {i} far |");
        sep.push_str("---|---|");
    }
    if vs {
        head.push_str(" oxmpi vs best peer near | oxmpi vs best peer far |");
        sep.push_str("---|---|");
    }
    let _ = writeln!(o, "{head}\n{sep}");
    let mine: Vec<Row> = rows.iter().filter(ours).cloned().collect();
    let by = crate::stats::by_placement(&mine);
    for (t, s) in keys {
        let _ = write!(o, "| {t} | {} |", size_label(s));
        let key: Key = (t.clone(), 2, s);
        for i in imps {
            for pl in PLACEMENTS {
                let c = by
                    .get(&(key.clone(), i.clone(), pl))
                    .map(|m| format!("{} ({})", num(m.median), m.n))
                    .unwrap_or_else(|| "-".into());
                let _ = write!(o, " {c} |");
            }
        }
        if vs {
            for pl in PLACEMENTS {
                let c = crate::stats::placed_ratio(&by, &key, "oxmpi", &peers, pl, higher_better)
                    .map(|r| format!("{}x", num(r.ratio)))
                    .unwrap_or_else(|| "-".into());
                let _ = write!(o, " {c} |");
            }
        }
        o.push('\n');
    }
    o.push('\n');
}

fn keys_of(rows: &[Row], pred: impl Fn(&Row) -> bool) -> Vec<Key> {
    let mut k: Vec<Key> = rows.iter().filter(|r| pred(r)).map(Row::key).collect();
    k.sort_by(|a, b| (a.0.as_str(), a.1, a.2).cmp(&(b.0.as_str(), b.1, b.2)));
    k.dedup();
    k
}

/// The markdown report.
pub fn markdown(meta: &Meta, res: &Results, plots: &[String]) -> String {
    let rows = with_best(&res.rows);
    let ran: Vec<String> = res.ran.iter().map(|i| i.name.clone()).collect();
    let pairs = ratio_pairs(&ran);
    let mut imps = ran.clone();
    if ran.iter().any(|x| x == "ompi-nocma") {
        imps.push("ompi-best".into());
    }
    let mut o = String::new();
    header(&mut o, "oxmpi benchmark report", &meta.flag, meta, res);
    o.push_str(
        "How to read: every cell is the median over repetitions of each run's median, with \
         [min–max over repetitions]. Ratios are *speed* ratios (> 1 means the first is better: faster, \
         or less memory; time and memory metrics are inverted), computed pairwise within the same repetition and then \
         summarised. `ompi-best` is, per repetition and metric, the better of Open MPI's default \
         and its single-copy-off setting. The single-copy variants (`ompi-nocma`, `oxmpi-pipe`) run \
         only point-to-point sizes above 4 KiB, the only ones whose path they change. \"% of limit\" compares with the physical limit measured \
         in the same repetition: latency limit = cache-line one-way + size / memcpy bandwidth; \
         bandwidth limit = memcpy bandwidth (x2 bidirectional); collective limit at np=2 = one \
         one-way transfer of the data (none when oversubscribed); start-up limit = fork+exec of \
         `/bin/true`; memory has none. Latencies are one-way (half the round trip) in us; bandwidth in MB/s \
         (1e6 B/s), window of 64; collectives: slowest rank's time per call.\n\n",
    );

    implementations(&mut o, res);

    let _ = writeln!(o, "## Physical limits (same run)\n");
    let machine = aggregate(&res.rows, "machine");
    let _ = writeln!(
        o,
        "| probe | median [min–max] over repetitions |\n|---|---|"
    );
    for (k, s) in &machine {
        let unit = res
            .rows
            .iter()
            .find(|r| r.key() == *k)
            .map(|r| r.unit.clone())
            .unwrap_or_default();
        let what = match k.0.as_str() {
            "memcpy" => format!("memcpy {} ({unit})", size_label(k.2)),
            "cma" => format!("process_vm_readv {} ({unit})", size_label(k.2)),
            "cacheline_rtt" => format!("cache-line ping-pong RTT, CPUs 0-1 ({unit})"),
            "spawn" => format!("fork+exec+wait /bin/true ({unit})"),
            t => format!("{t} ({unit})"),
        };
        let _ = writeln!(o, "| {what} | {} |", cell(s));
    }
    o.push('\n');

    let headline = |r: &Row| -> bool {
        let s = r.size;
        match r.test.as_str() {
            "lat" => [0, 8, 1024, 65536, 1 << 20, 4 << 20].contains(&s),
            "bw" | "bibw" => [8, 65536, 1 << 20, 4 << 20].contains(&s),
            "allreduce" => [8, 1024, 65536, 1 << 20].contains(&s),
            "bcast" | "alltoall" => [8, 1 << 20].contains(&s) && r.np == 2,
            "barrier" | "startup" | "comm_spawn" => true,
            "mpi4py_lat" => [1, 1024, 1 << 20].contains(&s),
            "rss_hello" | "mpi4py_ring" | "mpi4py_ring_wall" => true,
            _ => false,
        }
    };
    let _ = writeln!(o, "## Summary\n");
    let pt = |r: &Row| r.imp != "machine" && headline(r);
    metric_table(&mut o, &rows, &keys_of(&rows, pt), &imps, &pairs, false);

    for (title, tests) in [
        ("Point-to-point latency (ping-pong, np=2)", &["lat"][..]),
        (
            "mpi4py ping-pong (`mpi4py.bench`'s pingpong, np=2; median over a launch's rounds of mpi4py's mean one-way time)",
            &["mpi4py_lat"][..],
        ),
        (
            "mpi4py ring (`python -m mpi4py.bench ringtest -n 8`, np=2; time per trip around the ring, and the wall time of the whole launch, start-up and the profile's writing included; not run with an MPI_T session, which mpi4py cannot open from outside)",
            &["mpi4py_ring", "mpi4py_ring_wall"][..],
        ),
        ("Bandwidth (np=2, window 64)", &["bw", "bibw"][..]),
        (
            "Collectives",
            &["allreduce", "bcast", "alltoall", "barrier"][..],
        ),
        (
            "Start-up and memory",
            &["startup", "comm_spawn", "rss_hello", "rss_oxbench"][..],
        ),
    ] {
        let keys = keys_of(&rows, |r| {
            r.imp != "machine" && tests.contains(&r.test.as_str())
        });
        if keys.is_empty() {
            // not measured in this mode (e.g. the overhead section): no empty table
            continue;
        }
        let _ = writeln!(o, "## {title}\n");
        if tests == ["mpi4py_lat"] {
            pingpong_method(&mut o, meta.pingpong);
        }
        let limit = tests
            .iter()
            .any(|t| ["lat", "bw", "allreduce", "startup", "mpi4py_lat"].contains(t));
        // a spawn-only peer has a column only where spawns are
        let (imps, pairs) = if tests.contains(&"comm_spawn") {
            (imps.clone(), pairs.clone())
        } else {
            let spawn_only = |n: &String| res.ran.iter().any(|i| i.spawn_only && i.name == *n);
            (
                imps.iter().filter(|n| !spawn_only(n)).cloned().collect(),
                pairs
                    .iter()
                    .filter(|(a, b)| !spawn_only(a) && !spawn_only(b))
                    .cloned()
                    .collect(),
            )
        };
        metric_table(&mut o, &rows, &keys, &imps, &pairs, limit);
    }

    applications_section(&mut o, &rows, &ran);

    // a spawn-only peer has no point-to-point rows
    let measured: Vec<String> = res
        .ran
        .iter()
        .filter(|i| !i.spawn_only)
        .map(|i| i.name.clone())
        .collect();
    placement_table(&mut o, &res.rows, &measured);

    let _ = writeln!(o, "## oxmpi transport path (verbose output)\n");
    if res.transport.is_empty() {
        let _ = writeln!(o, "oxmpi did not run.\n");
    }
    for (name, lines) in &res.transport {
        let _ = writeln!(
            o,
            "`{name}` with `OXMPI_MCA_{{pml,btl}}_base_verbose=100`, a few ping-pongs at every measured size; distinct lines other than the per-message ones (a send's path, a large receive's measurement), which the table below counts:\n\n```"
        );
        for l in lines.iter().filter(|l| !crate::parse::is_per_message(l)) {
            let _ = writeln!(o, "{l}");
        }
        let _ = writeln!(o, "```\n");
        let settings = crate::suite::sm_settings(lines);
        let _ = write!(
            o,
            "Path per size, as the `sm: send N B to rank R: PATH` lines of the same output report it; for large messages, how the receivers copied them (their `sm: sample pipe|coop` measurement lines, counted)"
        );
        match &settings {
            Some(st) => {
                let _ = writeln!(
                    o,
                    " (and as the settings imply: eager limit {} B, fragment {} B, single copy `{}`{}):\n\n| size | path observed | receivers' copies | implied by the settings |\n|---|---|---|---|",
                    st.eager,
                    st.frag,
                    st.single_copy,
                    st.coop_min
                        .map(|m| format!(", cooperative copy from {m} B"))
                        .unwrap_or_default()
                );
            }
            None => {
                let _ = writeln!(
                    o,
                    ":\n\n| size | path observed | receivers' copies |\n|---|---|---|"
                );
            }
        }
        let mut sizes: Vec<u64> = res
            .rows
            .iter()
            .filter(|r| r.imp == *name && r.test == "lat")
            .map(|r| r.size)
            .collect();
        sizes.sort();
        sizes.dedup();
        for s in sizes {
            let seen = crate::parse::observed_paths(lines, s);
            let seen = if seen.is_empty() {
                "(no trace line)".to_string()
            } else {
                seen.join(" / ")
            };
            let copies = match crate::parse::receiver_copies(lines, s) {
                (0, 0) => "-".to_string(),
                (p, c) => format!("pipelined {p}, cooperative {c}"),
            };
            match &settings {
                Some(st) => {
                    let _ = writeln!(
                        o,
                        "| {} | {seen} | {copies} | {} |",
                        size_label(s),
                        st.path(s)
                    );
                }
                None => {
                    let _ = writeln!(o, "| {} | {seen} | {copies} |", size_label(s));
                }
            }
        }
        o.push('\n');
    }

    closing(&mut o, res, &[], plots);
    o
}

/// The last sections of a report: failures and notes, then the files
/// (`samples.csv`, the `extra` (file, what) pairs, the plots shown inline).
pub fn closing(o: &mut String, res: &Results, extra: &[(&str, &str)], plots: &[String]) {
    if !res.failures.is_empty() || !res.notes.is_empty() {
        let _ = writeln!(o, "## Failures and notes\n");
        for n in res.notes.iter().chain(dedup_failures(&res.failures).iter()) {
            let _ = writeln!(o, "* {}", n.replace('\n', " "));
        }
        o.push('\n');
    }
    let _ = writeln!(o, "## Files\n");
    let _ = writeln!(o, "* `samples.csv`: every run (one line per implementation, metric, repetition) with its raw samples, limit, load and placement probe");
    for (f, what) in extra {
        let _ = writeln!(o, "* `{f}`: {what}");
    }
    for p in plots {
        let _ = writeln!(o, "* `{p}`\n\n  ![{p}]({p})");
    }
}

/// A report's title, how to regenerate it (`cargo xtask bench` with
/// `flag` and the mode) and the run's facts ([`run_facts`]).
pub fn header(o: &mut String, title: &str, flag: &str, meta: &Meta, res: &Results) {
    let _ = writeln!(o, "# {title} ({} mode)\n", meta.mode);
    let _ = writeln!(
        o,
        "Generated by `cargo xtask bench{flag}{}`. Do not edit by hand: rerun the command.\n",
        if meta.mode == "quick" {
            String::new()
        } else {
            format!(" --{}", meta.mode)
        }
    );
    run_facts(o, meta, res);
}

/// How the mpi4py ping-pong rows were measured (`bench/py/mpi4py_pingpong.py`).
fn pingpong_method(o: &mut String, pp: Option<crate::config::PingpongOpts>) {
    let budget = pp.map_or(String::new(), |p| {
        format!(
            " ({} ms here) of round trips per size and round, {} rounds",
            p.budget_s * 1e3,
            p.samples
        )
    });
    let _ = writeln!(
        o,
        "Method: mpi4py's own ping-pong (the `pingpong` function of `mpi4py.bench`, which \
         `python -m mpi4py.bench pingpong` runs: `Send`/`Recv` of NumPy buffers allocated afresh \
         for each size, a barrier, warm-ups, then the mean one-way time of the timed round trips) \
         called one size at a time by `bench/py/mpi4py_pingpong.py` with a time budget{budget} \
         per launch, every round over all sizes in mpi4py's ascending order (a size follows the \
         one below it, as in a user's sweep), a tenth of the round trips as warm-ups before each; \
         a cell is the median over repetitions (one launch each, the implementations \
         interleaved, each repetition beginning with the next one after the physical probes) \
         of each launch's median over its rounds. The CSV's `values` are a launch's \
         rounds, `iters` the round trips of one round (calibrated per size and launch). \
         Placement: the vCPU probe of `oxbench probe=1` (`bench/c/probe_lib.c`, loaded by the \
         driver) before every round and after the last, outside the timed calls; a launch whose \
         probes disagree is mixed and in neither the near nor the far comparison.\n"
    );
}

/// The run's facts for a report header: date, commit, machine, peers,
/// repetitions, machine load and placement probes.
pub fn run_facts(o: &mut String, meta: &Meta, res: &Results) {
    let _ = writeln!(o, "* date (UTC): {}", meta.date);
    let _ = writeln!(o, "* commit: {}", meta.commit);
    let _ = writeln!(o, "* machine: {}", meta.machine);
    let _ = writeln!(o, "* peers: {}", meta.versions);
    let _ = writeln!(
        o,
        "* repetitions: {} (implementations interleaved in each), {} samples per run, iteration scale {}{}; run took {:.0} s",
        meta.reps,
        meta.samples,
        meta.scale,
        if meta.op_budget > 0.0 && meta.fill_budget {
            format!(
                ", time budget {} s per measurement, iterations per sample calibrated so that each sample fills its share of it (the scale does not apply; barriers between timed iterations count; when iterations are slow, fewer samples, at least 3: see the CSV's iters and values)",
                meta.op_budget
            )
        } else if meta.op_budget > 0.0 {
            format!(
                ", time budget {} s per measurement (when iterations are slow, fewer iterations per sample and fewer samples, at least 3: see the CSV's iters and values)",
                meta.op_budget
            )
        } else {
            String::new()
        },
        meta.duration_s
    );
    let loads: Vec<f64> = res
        .rows
        .iter()
        .map(|r| r.load1)
        .filter(|x| !x.is_nan())
        .collect();
    let busy: Vec<f64> = res
        .rows
        .iter()
        .map(|r| r.busy_pct)
        .filter(|x| !x.is_nan())
        .collect();
    if let (Some(l), Some(b)) = (summary(&loads), summary(&busy)) {
        let quiet = busy
            .iter()
            .filter(|x| **x < crate::suite::QUIET_BUSY_PCT)
            .count();
        let _ = writeln!(
            o,
            "* machine load before each measurement: load average {} [{}–{}], CPU busy or stolen {} % [{}–{}]; {} of {} measurements started quiet (< {} % busy or stolen)",
            num(l.median), num(l.min), num(l.max), num(b.median), num(b.min), num(b.max), quiet, busy.len(), crate::suite::QUIET_BUSY_PCT
        );
    }
    let lat: Vec<&Row> = res.rows.iter().filter(|r| r.test == "lat").collect();
    let rtts: Vec<f64> = lat.iter().filter_map(|r| r.probe_rtt_ns).collect();
    if let Some(s) = summary(&rtts) {
        let count = |p: &str| lat.iter().filter(|r| r.placement() == Some(p)).count();
        let _ = writeln!(
            o,
            "* vCPU placement of each latency measurement (cache-line RTT of the farthest of its probes: inside the program before every sample and after the last, or before and after the launch): {} ns [{}–{}]; {} near / {} far / {} mixed (the probes disagree: the placement changed during the measurement)",
            num(s.median), num(s.min), num(s.max), count("near"), count("far"), count("mixed")
        );
    }
    o.push('\n');
}

/// The "Implementations" section: settings, launch flags and the binding
/// each rank saw, and the skipped implementations with the reason.
pub fn implementations(o: &mut String, res: &Results) {
    let _ = writeln!(o, "## Implementations\n");
    let _ = writeln!(
        o,
        "| name | settings | launch (np=2) | binding observed (rank:cpus) |\n|---|---|---|---|"
    );
    for i in &res.ran {
        let b = res
            .bindings
            .iter()
            .find(|b| b.0 == i.name)
            .map(|b| {
                format!(
                    "{}{}",
                    b.1,
                    if b.2 {
                        " (one per core)"
                    } else {
                        " (NOT one per core)"
                    }
                )
            })
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            o,
            "| {} | {} | `{} {}` | {} |",
            i.name,
            i.settings,
            i.launcher
                .file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default(),
            i.launch_args(2, 2).join(" "),
            b
        );
    }
    for (n, why) in &res.skipped {
        let _ = writeln!(
            o,
            "| {n} | **skipped**: {} | - | - |",
            why.replace('|', "/")
        );
    }
    o.push('\n');
}

/// Debian's MPICH-built applications under MPICH and under oxmpi (`apps.rs`): wall time
/// of a whole launch, and oxmpi's speed relative to MPICH's per repetition.
fn applications_section(o: &mut String, rows: &[Row], ran: &[String]) {
    let keys = keys_of(rows, |r| r.test.starts_with("app_"));
    if keys.is_empty() {
        return;
    }
    let _ = writeln!(o, "## Applications (MPICH-built, np=2)\n");
    let _ = writeln!(
        o,
        "The same binaries, built by Debian against MPICH (ScaLAPACK testers of \
         `scalapack-mpi-test` with 2-rank process grids, a parallel HDF5 Fortran program \
         built with `h5pfc.mpich`), launched by MPICH's `mpiexec.hydra` on MPICH and by \
         oxmpi's `mpirun` on oxmpi's libraries (`LD_LIBRARY_PATH`); wall time of the whole \
         launch in seconds, median (min-max) over repetitions, the two back to back per \
         program in alternating order. `oxmpi vs mpich` > 1: oxmpi is faster.\n"
    );
    let imps: Vec<String> = crate::apps::IMPLS
        .iter()
        .filter(|i| ran.iter().any(|r| r == *i))
        .map(|i| i.to_string())
        .collect();
    let pairs = if imps.len() == 2 {
        vec![("oxmpi".to_string(), "mpich".to_string())]
    } else {
        vec![]
    };
    metric_table(o, rows, &keys, &imps, &pairs, false);
}

/// Collapse failures that repeat in every repetition: messages equal up to
/// their `rep N ` prefix and numbers (pids) are listed once, with their reps.
pub fn dedup_failures(failures: &[String]) -> Vec<String> {
    let mut groups: Vec<(String, String, Vec<String>)> = Vec::new();
    for f in failures {
        let (rep, rest) = match f.strip_prefix("rep ").and_then(|r| r.split_once(' ')) {
            Some((n, rest)) if n.chars().all(|c| c.is_ascii_digit()) => (n.to_string(), rest),
            _ => (String::new(), f.as_str()),
        };
        let key: String = rest
            .chars()
            .map(|c| if c.is_ascii_digit() { '#' } else { c })
            .collect();
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(g) => g.2.push(rep),
            None => groups.push((key, rest.to_string(), vec![rep])),
        }
    }
    groups
        .into_iter()
        .map(|(_, text, reps)| {
            let reps: Vec<String> = reps.into_iter().filter(|r| !r.is_empty()).collect();
            if reps.is_empty() {
                text
            } else {
                format!("{text} (repetition {})", reps.join(", "))
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rep: u32, imp: &str, test: &str, size: u64, median: f64, unit: &str) -> Row {
        Row {
            rep,
            imp: imp.into(),
            test: test.into(),
            np: 2,
            size,
            median,
            min: median,
            max: median,
            unit: unit.into(),
            load1: 0.5,
            busy_pct: 10.0,
            probe_rtt_ns: Some(100.0),
            probe_near_ns: None,
            limit: Some(median / 2.0),
            unix_time: 7,
            values: vec![median, f64::NAN],
            iters: 0,
        }
    }

    #[test]
    fn csv_fields_line_up_with_header() {
        let r = row(1, "ompi", "lat", 8, 0.25, "us");
        let line = csv_line(&r);
        let cols: Vec<&str> = line.split(',').collect();
        let head: Vec<&str> = CSV_HEADER.split(',').collect();
        assert_eq!(cols.len(), head.len());
        let get = |h: &str| cols[head.iter().position(|x| *x == h).unwrap()];
        assert_eq!(get("impl"), "ompi");
        assert_eq!(get("median"), "0.2500");
        assert_eq!(get("fraction_of_limit"), "0.5000");
        assert_eq!(get("placement"), "near");
        assert_eq!(get("values"), "0.2500;", "NaN samples are empty");
        assert_eq!(get("iters"), "0");
        assert!(csv(&[r]).starts_with(CSV_HEADER));
    }

    #[test]
    fn applications_table_compares_oxmpi_with_mpich() {
        let rows = vec![
            row(0, "mpich", "app_xdlu", 0, 2.0, "s"),
            row(0, "oxmpi", "app_xdlu", 0, 1.0, "s"),
            row(1, "mpich", "app_xdlu", 0, 2.0, "s"),
            row(1, "oxmpi", "app_xdlu", 0, 4.0, "s"),
            row(0, "oxmpi", "lat", 8, 1.0, "us"),
        ];
        let ran: Vec<String> = ["ompi", "mpich", "oxmpi"].map(String::from).to_vec();
        let mut o = String::new();
        applications_section(&mut o, &rows, &ran);
        assert!(o.starts_with("## Applications"), "{o}");
        let line = o
            .lines()
            .find(|l| l.starts_with("| xdlu np=2 (s) |"))
            .expect(&o);
        // per-repetition ratios 2 and 0.5: median 1.25
        assert!(line.contains("| 1.25 [0.500–2.00]x |"), "{line}");
        assert!(o.contains("| mpich | oxmpi | oxmpi vs mpich |"), "{o}");
        assert!(!o.contains("lat np=2"), "{o}");
        let mut none = String::new();
        applications_section(&mut none, &rows[4..], &ran);
        assert!(none.is_empty(), "no section without application rows");
    }

    #[test]
    fn labels_and_numbers() {
        assert_eq!(size_label(0), "0 B");
        assert_eq!(size_label(1000), "1000 B");
        assert_eq!(size_label(65536), "64 KiB");
        assert_eq!(size_label(4 << 20), "4 MiB");
        assert_eq!(num(1234.5), "1234");
        assert_eq!(num(0.23456), "0.235");
        let s = summary(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(cell(&s), "2.00 [1.00–3.00]");
    }

    #[test]
    fn failures_are_grouped_across_repetitions() {
        let f = vec![
            "rep 0 oxmpi coll np=2: [vm:100] MPI_Barrier unsupported".to_string(),
            "rep 1 oxmpi coll np=2: [vm:207] MPI_Barrier unsupported".to_string(),
            "rep 1 mpich lat np=2: timed out".to_string(),
            "memcpy failed".to_string(),
        ];
        assert_eq!(
            dedup_failures(&f),
            vec![
                "oxmpi coll np=2: [vm:100] MPI_Barrier unsupported (repetition 0, 1)".to_string(),
                "mpich lat np=2: timed out (repetition 1)".to_string(),
                "memcpy failed".to_string(),
            ]
        );
    }

    #[test]
    fn pairs_depend_on_who_ran() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let p = ratio_pairs(&names(&["ompi", "ompi-nocma", "mpich"]));
        assert!(p.contains(&("mpich".into(), "ompi-best".into())));
        assert!(!p.iter().any(|x| x.0 == "oxmpi"));
        let p = ratio_pairs(&names(&["oxmpi", "mpich-5.0.2-wheel"]));
        assert_eq!(p, [("oxmpi".into(), "mpich-5.0.2-wheel".into())]);
        let p = ratio_pairs(&names(&["ompi", "mpich", "oxmpi"]));
        assert_eq!(p[0], ("oxmpi".into(), "ompi-best".into()));
        assert_eq!(p[1], ("oxmpi".into(), "mpich".into()));
        let p = ratio_pairs(&names(&["oxmpi", "oxmpi-mpit", "oxmpi-profile"]));
        assert_eq!(
            p,
            [
                ("oxmpi-mpit".into(), "oxmpi".into()),
                ("oxmpi-profile".into(), "oxmpi".into())
            ]
        );
    }

    #[test]
    fn overhead_report_shows_the_mpi4py_ring_and_no_empty_sections() {
        let prefix = std::path::Path::new("/x");
        let res = Results {
            rows: vec![
                row(0, "oxmpi", "lat", 8, 0.100, "us"),
                row(0, "oxmpi-profile", "lat", 8, 0.102, "us"),
                row(0, "oxmpi", "mpi4py_ring", 8, 1.00, "us"),
                row(0, "oxmpi-profile", "mpi4py_ring", 8, 1.02, "us"),
                row(0, "oxmpi", "mpi4py_ring_wall", 8, 0.50, "s"),
                row(0, "oxmpi-profile", "mpi4py_ring_wall", 8, 0.55, "s"),
            ],
            ran: vec![
                crate::impls::Impl::oxmpi(prefix),
                crate::impls::Impl::oxmpi_profile(prefix, prefix),
            ],
            ..Results::default()
        };
        let md = markdown(&Meta::default(), &res, &[]);
        assert!(md.contains("## mpi4py ring ("), "{md}");
        // oxmpi-profile's speed against oxmpi: 1.00 / 1.02
        let ring = md
            .lines()
            .find(|l| l.starts_with("| mpi4py_ring np=2 8 B (us) |"))
            .expect(&md);
        assert!(ring.ends_with("| 0.980x |"), "{ring}");
        assert!(md.contains("| mpi4py_ring_wall np=2 8 B (s) |"), "{md}");
        for empty in ["## mpi4py ping-pong", "## Bandwidth", "## Collectives"] {
            assert!(!md.contains(empty), "{empty}: {md}");
        }
    }

    /// The mpi4py ping-pong section says how its rows were measured (the budget and the
    /// rounds of the run), above its table.
    #[test]
    fn mpi4py_pingpong_section_states_its_method() {
        let res = Results {
            rows: vec![
                row(0, "oxmpi", "mpi4py_lat", 32768, 3.0, "us"),
                row(0, "mpich", "mpi4py_lat", 32768, 4.5, "us"),
            ],
            ran: vec![
                crate::impls::Impl::oxmpi(std::path::Path::new("/x")),
                crate::impls::Impl::mpich(),
            ],
            ..Results::default()
        };
        let meta = Meta {
            pingpong: Some(crate::config::PingpongOpts {
                max_size: 1 << 20,
                budget_s: 0.05,
                samples: 5,
            }),
            flag: " --mpi4py-pingpong".into(),
            mode: "full".into(),
            ..Meta::default()
        };
        let md = markdown(&meta, &res, &[]);
        assert!(
            md.contains("`cargo xtask bench --mpi4py-pingpong --full`"),
            "{md}"
        );
        let sec = &md[md.find("## mpi4py ping-pong").expect(&md)..];
        let method = sec.lines().find(|l| l.starts_with("Method:")).expect(sec);
        assert!(
            method.contains("(50 ms here) of round trips per size and round, 5 rounds"),
            "{method}"
        );
        let table = sec.find("| mpi4py_lat np=2 32 KiB (us) |").expect(sec);
        assert!(sec.find("Method:").unwrap() < table);
        assert!(
            sec[table..].lines().next().unwrap().contains("1.50x"),
            "{sec}"
        );
    }

    #[test]
    fn placement_tables_compare_oxmpi_within_each_placement() {
        let far = |r: Row| Row {
            probe_rtt_ns: Some(400.0),
            probe_near_ns: None,
            ..r
        };
        let res = Results {
            rows: vec![
                row(0, "oxmpi", "bw", 1 << 20, 24000.0, "MB/s"),
                row(0, "ompi", "bw", 1 << 20, 9000.0, "MB/s"),
                row(0, "ompi-nocma", "bw", 1 << 20, 12000.0, "MB/s"),
                far(row(1, "oxmpi", "bw", 1 << 20, 13000.0, "MB/s")),
                far(row(1, "ompi", "bw", 1 << 20, 10000.0, "MB/s")),
                far(row(1, "ompi-nocma", "bw", 1 << 20, 5000.0, "MB/s")),
                row(0, "oxmpi", "lat", 8, 0.13, "us"),
                row(0, "ompi", "lat", 8, 0.26, "us"),
                row(0, "ompi-nocma", "lat", 8, 0.20, "us"),
                row(0, "mpich", "lat", 8, 0.12, "us"),
                // probed near and far during the run: in neither column
                Row {
                    probe_near_ns: Some(90.0),
                    ..far(row(2, "oxmpi", "bw", 1 << 20, 1000.0, "MB/s"))
                },
                Row {
                    probe_near_ns: Some(90.0),
                    ..far(row(2, "ompi", "lat", 8, 0.01, "us"))
                },
            ],
            ran: vec![
                crate::impls::Impl::oxmpi(std::path::Path::new("/x")),
                crate::impls::Impl::openmpi(),
                crate::impls::Impl::openmpi_nocma(),
                crate::impls::Impl::mpich(),
            ],
            ..Results::default()
        };
        let md = markdown(&Meta::default(), &res, &[]);
        // Near: 24000 / max(9000, 12000); far: 13000 / max(10000, 5000); no mpich runs.
        assert!(
            md.contains(
                "| bw | 1 MiB | 24000 (1) | 13000 (1) | 9000 (1) | 10000 (1) | 12000 (1) | 5000 (1) | - | - | 2.00x | 1.30x |"
            ),
            "{md}"
        );
        // Latency: the fastest peer's time (MPICH's) over oxmpi's; no far runs.
        assert!(
            md.contains(
                "| lat | 8 B | 0.130 (1) | - | 0.260 (1) | - | 0.200 (1) | - | 0.120 (1) | - | 0.923x | - |"
            ),
            "{md}"
        );
        assert!(md.contains("1 run(s) whose probes disagree"), "{md}");
    }

    #[test]
    fn report_contains_ratio_and_skip_reason() {
        let res = Results {
            rows: vec![
                row(0, "ompi", "lat", 8, 0.2, "us"),
                row(0, "mpich", "lat", 8, 0.4, "us"),
                row(1, "ompi", "lat", 8, 0.3, "us"),
                row(1, "mpich", "lat", 8, 0.3, "us"),
                row(0, "ompi", "bw", 1 << 20, 9000.0, "MB/s"),
                Row {
                    probe_rtt_ns: Some(400.0),
                    probe_near_ns: None,
                    ..row(1, "ompi", "bw", 1 << 20, 7000.0, "MB/s")
                },
            ],
            ran: vec![crate::impls::Impl::openmpi(), crate::impls::Impl::mpich()],
            skipped: vec![("oxmpi".into(), "no prefix".into())],
            ..Results::default()
        };
        let md = markdown(&Meta::default(), &res, &["latency.png".into()]);
        // per-rep speed ratios mpich vs ompi-best: 0.5 and 1.0 -> median 0.75
        assert!(md.contains("0.750 [0.500–1.00]x"), "{md}");
        assert!(md.contains("**skipped**: no prefix"));
        assert!(md.contains("![latency.png](latency.png)"));
        // all test rows have a near probe (100 ns): ompi near median of 0.2, 0.3
        assert!(md.contains("| lat | 8 B | 0.250 (2) | - |"), "{md}");
        // bandwidth by placement: one near run, one far run (400 ns probe)
        assert!(md.contains("## Bandwidth by vCPU placement"), "{md}");
        assert!(
            md.contains("| bw | 1 MiB | 9000 (1) | 7000 (1) | - | - |"),
            "{md}"
        );
    }
}
