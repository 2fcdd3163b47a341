//! Before/after of oxmpi across commits: reads the `samples.csv` of an
//! earlier run and compares its oxmpi rows with another run's.
//!
//! Absolute numbers from different times are not comparable on a shared
//! machine, so next to "now vs before" the table also gives, for each run,
//! oxmpi's within-run ratio against the best Open MPI setting: if oxmpi got
//! faster while the machine did not, both move; if only the machine changed,
//! the peer ratios stay put.

use crate::report::{cell, num, size_label, with_best, CSV_HEADER, CSV_HEADER_V1, CSV_HEADER_V2};
use crate::stats::{aggregate, pairwise, speed_ratio, Key, Row};
use std::fmt::Write as _;

/// A `samples.csv` that cannot be read back.
#[derive(Debug, thiserror::Error)]
pub enum CsvError {
    /// The first line is not the header this harness writes.
    #[error("{file}: not a samples.csv of this harness (unexpected header)")]
    Header {
        /// The file.
        file: String,
    },
    /// A data line has a bad field.
    #[error("{file}:{line}: bad field '{field}' ({what})")]
    Field {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// The offending text.
        field: String,
        /// Which column.
        what: &'static str,
    },
}

fn opt(s: &str) -> Option<&str> {
    (!s.is_empty()).then_some(s)
}

/// Parse a `samples.csv` written by [`crate::report::csv`] back into rows
/// (`file` only names it in errors).
pub fn parse_csv(text: &str, file: &str) -> Result<Vec<Row>, CsvError> {
    let mut lines = text.lines().enumerate();
    let fields = match lines.next() {
        Some((_, h)) if h.trim() == CSV_HEADER => 19,
        Some((_, h)) if h.trim() == CSV_HEADER_V2 => 18,
        Some((_, h)) if h.trim() == CSV_HEADER_V1 => 17,
        _ => {
            return Err(CsvError::Header {
                file: file.to_string(),
            })
        }
    };
    let mut rows = Vec::new();
    for (i, l) in lines {
        if l.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = l.split(',').collect();
        let bad = |field: &str, what: &'static str| CsvError::Field {
            file: file.to_string(),
            line: i + 1,
            field: field.to_string(),
            what,
        };
        if f.len() != fields {
            return Err(bad(
                l,
                match fields {
                    19 => "expected 19 fields",
                    18 => "expected 18 fields",
                    _ => "expected 17 fields",
                },
            ));
        }
        let float = |s: &str, what: &'static str| -> Result<f64, CsvError> {
            match opt(s) {
                None => Ok(f64::NAN),
                Some(v) => v.parse().map_err(|_| bad(v, what)),
            }
        };
        let maybe = |s: &str, what: &'static str| -> Result<Option<f64>, CsvError> {
            opt(s)
                .map(|v| v.parse().map_err(|_| bad(v, what)))
                .transpose()
        };
        let values = match opt(f[16]) {
            None => Vec::new(),
            Some(v) => v
                .split(';')
                .map(|x| x.parse().map_err(|_| bad(x, "values")))
                .collect::<Result<_, _>>()?,
        };
        rows.push(Row {
            rep: f[0].parse().map_err(|_| bad(f[0], "rep"))?,
            imp: f[1].to_string(),
            test: f[2].to_string(),
            np: f[3].parse().map_err(|_| bad(f[3], "np"))?,
            size: f[4].parse().map_err(|_| bad(f[4], "size"))?,
            median: float(f[5], "median")?,
            min: float(f[6], "min")?,
            max: float(f[7], "max")?,
            unit: f[8].to_string(),
            limit: maybe(f[9], "limit")?,
            // f[10] (fraction of limit) and f[14] (placement) are derived
            load1: float(f[11], "load1")?,
            busy_pct: float(f[12], "busy_pct")?,
            probe_rtt_ns: maybe(f[13], "probe_rtt_ns")?,
            probe_near_ns: match f.get(18) {
                Some(v) => maybe(v, "probe_near_ns")?,
                None => None,
            },
            unix_time: f[15].parse().map_err(|_| bad(f[15], "unix_time"))?,
            values,
            iters: match f.get(17) {
                Some(v) => v.parse().map_err(|_| bad(v, "iters"))?,
                None => 0,
            },
        });
    }
    Ok(rows)
}

fn label(k: &Key, unit: &str) -> String {
    match k.0.as_str() {
        "startup" | "barrier" => format!("{} np={} ({unit})", k.0, k.1),
        t if t.starts_with("rss") => format!("{t} rank {} ({unit})", k.2),
        "comm_spawn" => format!("MPI_Comm_spawn of {} + merge ({unit})", k.2),
        t => format!("{t} np={} {} ({unit})", k.1, size_label(k.2)),
    }
}

/// Markdown section comparing `imp` (normally `oxmpi`) in `before` and
/// `now`, for every metric both runs have.
pub fn table(before: &[Row], now: &[Row], imp: &str, before_name: &str) -> String {
    let (b_all, n_all) = (with_best(before), with_best(now));
    let (b, n) = (aggregate(&b_all, imp), aggregate(&n_all, imp));
    let (bq, nq) = (
        pairwise(&b_all, imp, "ompi-best"),
        pairwise(&n_all, imp, "ompi-best"),
    );
    let mut o = String::new();
    let _ = writeln!(o, "## {imp} now vs an earlier run (`{before_name}`)\n");
    let _ = writeln!(
        o,
        "Medians over repetitions [min–max]; \"now vs before\" is the speed ratio of the two medians \
         (> 1: faster or smaller now). Different runs saw different machine states, so the within-run \
         ratios against `ompi-best` of each run are given too: a real change of {imp} moves both.\n"
    );
    let _ = writeln!(
        o,
        "| metric | before | now | now vs before | {imp} vs ompi-best before | {imp} vs ompi-best now |\n|---|---|---|---|---|---|"
    );
    let mut shown = 0;
    for (k, s_now) in &n {
        let Some(s_before) = b.get(k) else { continue };
        let unit = now
            .iter()
            .find(|r| r.imp == imp && r.key() == *k)
            .map(|r| r.unit.clone())
            .unwrap_or_default();
        let ratio = speed_ratio(
            s_now.median,
            s_before.median,
            crate::stats::higher_is_better(&unit),
        )
        .map(|q| format!("{}x", num(q)))
        .unwrap_or_else(|| "-".into());
        let q = |m: &std::collections::BTreeMap<Key, crate::stats::Summary>| {
            m.get(k)
                .map(|s| format!("{}x", cell(s)))
                .unwrap_or_else(|| "-".into())
        };
        let _ = writeln!(
            o,
            "| {} | {} | {} | {ratio} | {} | {} |",
            label(k, &unit),
            cell(s_before),
            cell(s_now),
            q(&bq),
            q(&nq)
        );
        shown += 1;
    }
    if shown == 0 {
        let _ = writeln!(o, "| (no {imp} metric in both runs) | | | | | |");
    }
    o.push('\n');
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::csv;

    fn row(rep: u32, imp: &str, test: &str, size: u64, median: f64, unit: &str) -> Row {
        Row {
            rep,
            imp: imp.into(),
            test: test.into(),
            np: 2,
            size,
            median,
            min: median * 0.9,
            max: f64::NAN,
            unit: unit.into(),
            load1: 1.5,
            busy_pct: f64::NAN,
            probe_rtt_ns: Some(101.5),
            probe_near_ns: None,
            limit: Some(0.25),
            unix_time: 1_700_000_000,
            values: vec![median, median * 0.9],
            iters: 40,
        }
    }

    #[test]
    fn csv_round_trips() {
        let mut rows = vec![
            row(0, "oxmpi", "lat", 8, 0.375, "us"),
            row(1, "ompi", "bw", 65536, 12000.5, "MB/s"),
        ];
        rows[0].probe_near_ns = Some(99.5);
        rows[1].limit = None;
        rows[1].probe_rtt_ns = None;
        rows[1].values.clear();
        let back = parse_csv(&csv(&rows), "x.csv").unwrap();
        assert_eq!(back.len(), 2);
        for (a, b) in rows.iter().zip(&back) {
            assert_eq!(
                (&a.imp, &a.test, a.np, a.size),
                (&b.imp, &b.test, b.np, b.size)
            );
            assert!((a.median - b.median).abs() < 1e-4 && (a.min - b.min).abs() < 1e-4);
            assert!(b.max.is_nan() && b.busy_pct.is_nan());
            assert_eq!(a.limit.is_some(), b.limit.is_some());
            assert_eq!(
                (a.probe_rtt_ns, a.probe_near_ns),
                (b.probe_rtt_ns, b.probe_near_ns)
            );
            assert_eq!(a.values.len(), b.values.len());
            assert_eq!((a.unix_time, a.iters), (b.unix_time, b.iters));
        }
        // CSVs from before the probe_near_ns column, and from before the iters column
        let older = |header: &str, drop: usize| -> String {
            csv(&rows)
                .lines()
                .enumerate()
                .map(|(i, l)| {
                    if i == 0 {
                        format!("{header}\n")
                    } else {
                        let cut = (0..drop).fold(l, |l, _| &l[..l.rfind(',').unwrap()]);
                        format!("{cut}\n")
                    }
                })
                .collect()
        };
        let back = parse_csv(&older(CSV_HEADER_V2, 1), "v2.csv").unwrap();
        assert_eq!((back[0].iters, back[0].probe_near_ns), (40, None));
        let back = parse_csv(&older(CSV_HEADER_V1, 2), "old.csv").unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0].iters, 0);
        assert_eq!(back[1].size, 65536);
    }

    #[test]
    fn csv_errors_name_file_and_line() {
        assert!(matches!(
            parse_csv("a,b\n", "f.csv"),
            Err(CsvError::Header { .. })
        ));
        let mut text = csv(&[row(0, "oxmpi", "lat", 8, 0.5, "us")]);
        text.push_str("0,oxmpi,lat,2,notasize,1,1,1,us,,,,,,,1,1,5\n");
        let e = parse_csv(&text, "f.csv").unwrap_err().to_string();
        assert!(e.contains("f.csv:3") && e.contains("notasize"), "{e}");
    }

    #[test]
    fn before_after_ratios() {
        let before = vec![
            row(0, "oxmpi", "lat", 8, 0.5, "us"),
            row(0, "ompi", "lat", 8, 0.25, "us"),
            row(0, "oxmpi", "bw", 65536, 10000.0, "MB/s"),
        ];
        let now = vec![
            row(0, "oxmpi", "lat", 8, 0.25, "us"),
            row(0, "ompi", "lat", 8, 0.25, "us"),
            row(0, "oxmpi", "bw", 65536, 5000.0, "MB/s"),
            row(0, "oxmpi", "lat", 16, 0.3, "us"),
        ];
        let t = table(&before, &now, "oxmpi", "old.csv");
        // latency halved: 2x faster; ratio vs Open MPI 0.5x before, 1x now
        let lat = t.lines().find(|l| l.starts_with("| lat np=2 8 B")).unwrap();
        assert!(lat.contains("| 2.00x |"), "{lat}");
        assert!(
            lat.contains("| 0.500x |") && lat.contains("| 1.00x |"),
            "{lat}"
        );
        // bandwidth halved: 0.5x
        let bw = t
            .lines()
            .find(|l| l.starts_with("| bw np=2 64 KiB"))
            .unwrap();
        assert!(bw.contains("| 0.500x |"), "{bw}");
        // only metrics present in both runs
        assert!(!t.contains("16 B"));
        let empty = table(&before, &[], "oxmpi", "old.csv");
        assert!(empty.contains("no oxmpi metric in both runs"));
    }
}
