//! The collectives matrix's report (`report.md`, `details.md`): ratios of
//! oxmpi against the best peer per repetition, their geometric means over
//! sizes, alltoallw against alltoallv for the same bytes, and the overlap of
//! the nonblocking collectives next to the peers'.

use crate::matrix::{blocking, parse_label, Label, Variant};
use crate::report::{cell, num, size_label, Meta};
use crate::stats::{aggregate, best_of, geomean, pairwise, summary, Key, Row, Summary};
use crate::suite::Results;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The synthetic implementation that is, per repetition and measurement,
/// the faster of the peers (Open MPI, MPICH).
pub const BEST_PEER: &str = "best-peer";

/// The implementations that ran collectives (not the single-copy variants).
pub fn coll_impls(res: &Results) -> Vec<String> {
    res.ran
        .iter()
        .filter(|i| !i.pt2pt_only)
        .map(|i| i.name.clone())
        .collect()
}

/// The peers whose best is [`BEST_PEER`].
pub const PEERS: [&str; 2] = ["ompi", "mpich"];

/// The subject of the ratios.
const SUBJECT: &str = "oxmpi";

/// Per (variant label, np): the summaries over repetitions of the
/// subject's speed ratio against the best peer, by size.
type BySize = BTreeMap<(String, u32), Vec<(u64, Summary)>>;

/// The matrix's time rows (no overlap rows), plus the best-peer rows.
pub fn time_rows(rows: &[Row]) -> Vec<Row> {
    let mut t: Vec<Row> = rows
        .iter()
        .filter(|r| parse_label(&r.test).is_some_and(|l| !l.overlap))
        .cloned()
        .collect();
    let best = best_of(&t, &PEERS, BEST_PEER);
    t.extend(best);
    t
}

/// Speed ratios `a` vs `b` per repetition, summarised, grouped by (label, np).
pub fn ratios_by_size(rows: &[Row], a: &str, b: &str) -> BySize {
    let mut by: BySize = BTreeMap::new();
    for ((t, np, size), s) in pairwise(rows, a, b) {
        by.entry((t, np)).or_default().push((size, s));
    }
    by
}

/// Geometric mean of the median ratios, the worst (size, median ratio), and
/// how many sizes are below 1.0, of one (label, np).
pub fn figures(v: &[(u64, Summary)]) -> Option<(f64, (u64, f64), usize)> {
    let meds: Vec<f64> = v.iter().map(|x| x.1.median).collect();
    let g = geomean(&meds)?;
    let worst = v
        .iter()
        .map(|(s, x)| (*s, x.median))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    Some((g, worst, meds.iter().filter(|m| **m < 1.0).count()))
}

/// The order of labels in tables: set order as measured (first appearance).
fn labels_in_order(rows: &[Row]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in rows {
        if parse_label(&r.test).is_some_and(|l| !l.overlap) && !v.contains(&r.test) {
            v.push(r.test.clone());
        }
    }
    v
}

fn nps_of(rows: &[Row]) -> Vec<u32> {
    let mut v: Vec<u32> = rows.iter().map(|r| r.np).collect();
    v.sort();
    v.dedup();
    v
}

fn ratio_cell(f: Option<(f64, (u64, f64), usize)>, n: usize) -> String {
    match f {
        Some((g, (ws, w), below)) => format!(
            "{}x [{}x at {}] {below}/{n}",
            num(g),
            num(w),
            size_label(ws)
        ),
        None => "-".into(),
    }
}

/// The alltoallw / alltoallv time ratio of one implementation for the same
/// bytes (same variant, np and size), per repetition, summarised by (np, size).
pub fn w_over_v(
    rows: &[Row],
    imp: &str,
    v: &Variant,
    nonblocking: bool,
) -> BTreeMap<(u32, u64), Summary> {
    let i = if nonblocking { "i" } else { "" };
    let (w, vv) = (
        crate::matrix::label(&format!("{i}alltoallw"), v),
        crate::matrix::label(&format!("{i}alltoallv"), v),
    );
    // (np, size, repetition) -> (alltoallw, alltoallv)
    type Pair = (Option<f64>, Option<f64>);
    let mut pairs: BTreeMap<(u32, u64, u32), Pair> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.imp == imp) {
        let e = pairs.entry((r.np, r.size, r.rep)).or_default();
        if r.test == w {
            e.0 = Some(r.median);
        } else if r.test == vv {
            e.1 = Some(r.median);
        }
    }
    let mut by: BTreeMap<(u32, u64), Vec<f64>> = BTreeMap::new();
    for ((np, size, _), p) in pairs {
        if let (Some(a), Some(b)) = p {
            if b > 0.0 {
                by.entry((np, size)).or_default().push(a / b);
            }
        }
    }
    by.into_iter()
        .filter_map(|(k, v)| Some((k, summary(&v)?)))
        .collect()
}

/// The two markdown files: the report and its per-size details.
pub fn markdown(meta: &Meta, res: &Results, plots: &[String]) -> (String, String) {
    let rows = time_rows(&res.rows);
    let imps = coll_impls(res);
    let has = |n: &str| imps.iter().any(|x| x == n);
    let peers: Vec<&str> = PEERS.iter().copied().filter(|p| has(p)).collect();
    let subject = has(SUBJECT) && !peers.is_empty();
    let labels = labels_in_order(&rows);
    let nps = nps_of(&rows);
    let mut o = String::new();
    crate::report::header(
        &mut o,
        "Collectives matrix: oxmpi vs Open MPI vs MPICH",
        " --collectives",
        meta,
        res,
    );
    o.push_str("Per-size numbers: [details.md](details.md); every run: `samples.csv`.\n\n");
    o.push_str(
        "How it is measured: `bench/c/oxbench.c`, as the standard suites (OSU) do: a barrier between \
         timed iterations, separate send and receive buffers, each sample the slowest rank's time per \
         call; nonblocking collectives post, then wait, and an `OVERLAP` run adds as much computation \
         between post and wait as the collective took (overlap % = 100 x (1 - (total - compute) / pure)). \
         A test is named `collective/DATATYPE[/OP][/inplace]`; sizes are the bytes of one block (per \
         rank, per peer). Runs with more ranks than the machine has cores (np=4 and 8 on 2 cores) \
         are **oversubscribed** (no binding): they show how each library copes with that, not its \
         speed on dedicated cores; there each iteration is timed from the first rank's entry to the \
         last rank's return (`clock=span`, one host clock), since a rank's own time misses what a \
         collective leaves to the barrier after it (an eager root returns at once, receivers \
         scheduled later find the data there).\n\n\
         How to read: a ratio is oxmpi's *speed* ratio (> 1: oxmpi is faster) against the best peer \
         (`best-peer`: per repetition and measurement, the faster of Open MPI and MPICH), taken within \
         each repetition and then summarised (median over repetitions). A cell `g x [w x at S] k/n` is \
         the geometric mean `g` over the sizes of those medians, the worst `w` (at size `S`), and `k` \
         of `n` sizes below 1.0.\n\n",
    );
    crate::report::implementations(&mut o, res);

    let _ = writeln!(o, "## Summary\n");
    let all = ratios_by_size(&rows, SUBJECT, BEST_PEER);
    if !subject {
        let _ = writeln!(
            o,
            "oxmpi or both peers did not run: no ratios (see Implementations and the notes).\n"
        );
    } else {
        let per: Vec<(String, String)> = peers
            .iter()
            .map(|p| (p.to_string(), format!("oxmpi vs {p}")))
            .chain([(BEST_PEER.to_string(), "oxmpi vs best peer".to_string())])
            .collect();
        let _ = write!(o, "| np | measurements |");
        for (_, h) in &per {
            let _ = write!(o, " {h}: geometric mean | below 1.0 |");
        }
        let _ = writeln!(o, "\n|---|---|{}", "---|---|".repeat(per.len()));
        for &np in &nps {
            let mut n = 0;
            let _ = write!(
                o,
                "| {np}{} |",
                if np > crate::suite::cores() {
                    " (oversubscribed)"
                } else {
                    ""
                }
            );
            let mut cells = String::new();
            for (p, _) in &per {
                let by = ratios_by_size(&rows, SUBJECT, p);
                let meds: Vec<f64> = by
                    .iter()
                    .filter(|((_, n2), _)| *n2 == np)
                    .flat_map(|(_, v)| v.iter().map(|x| x.1.median))
                    .collect();
                n = n.max(meds.len());
                let below = meds.iter().filter(|m| **m < 1.0).count();
                let _ = write!(
                    cells,
                    " {} | {below} |",
                    geomean(&meds)
                        .map(|g| format!("{}x", num(g)))
                        .unwrap_or("-".into())
                );
            }
            let _ = writeln!(o, " {n} |{cells}");
        }
        o.push('\n');
        // the worst measurements against the best peer
        let mut worst: Vec<(f64, &String, u32, u64)> = all
            .iter()
            .flat_map(|((l, np), v)| v.iter().map(move |(s, x)| (x.median, l, *np, *s)))
            .filter(|x| x.0 < 1.0)
            .collect();
        worst.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !worst.is_empty() {
            let _ = writeln!(
                o,
                "The {} slowest (of {} below 1.0), oxmpi vs best peer: {}.\n",
                worst.len().min(15),
                worst.len(),
                worst
                    .iter()
                    .take(15)
                    .map(|(r, l, np, s)| format!("`{l}` np={np} {} {}x", size_label(*s), num(*r)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
    }

    let _ = writeln!(o, "## oxmpi vs best peer per collective\n");
    let _ = write!(o, "| collective |");
    for np in &nps {
        let _ = write!(o, " np={np} |");
    }
    let _ = writeln!(o, "\n|---|{}", "---|".repeat(nps.len()));
    for l in &labels {
        let _ = write!(o, "| `{l}` |");
        for &np in &nps {
            let v = all.get(&(l.clone(), np));
            let n = v.map_or(0, Vec::len);
            let _ = write!(o, " {} |", ratio_cell(v.and_then(|v| figures(v)), n));
        }
        o.push('\n');
    }
    o.push('\n');

    let _ = writeln!(
        o,
        "## Alltoallw vs alltoallv for the same bytes\n\nTime of alltoallw over the time of alltoallv with the same counts, datatype and displacements (per repetition, then median [min–max]); the goal is at most 1.2.\n"
    );
    let variants: Vec<(Variant, bool)> = labels
        .iter()
        .filter_map(|l| parse_label(l))
        .filter(|l| blocking(&l.test) == "alltoallw")
        .map(|l| (l.variant, l.test.starts_with('i')))
        .collect();
    let _ = write!(o, "| form | np | size |");
    for i in &imps {
        let _ = write!(o, " {i} |");
    }
    let _ = writeln!(o, "\n|---|---|---|{}", "---|".repeat(imps.len()));
    for (v, nb) in &variants {
        let per: Vec<BTreeMap<(u32, u64), Summary>> =
            imps.iter().map(|i| w_over_v(&rows, i, v, *nb)).collect();
        let mut keys: Vec<(u32, u64)> = per.iter().flat_map(|m| m.keys().copied()).collect();
        keys.sort();
        keys.dedup();
        for (np, size) in keys {
            let _ = write!(
                o,
                "| `{}` | {np} | {} |",
                crate::matrix::label(if *nb { "ialltoallw" } else { "alltoallw" }, v),
                size_label(size)
            );
            for m in &per {
                let _ = write!(
                    o,
                    " {} |",
                    m.get(&(np, size)).map(cell).unwrap_or("-".into())
                );
            }
            o.push('\n');
        }
    }
    o.push('\n');

    let _ = writeln!(
        o,
        "## Nonblocking collectives: overlap\n\nPercent of the collective that progressed behind computation (100: all of it), median over the sizes of each size's median over repetitions [min–max over sizes]; per size in details.md.\n"
    );
    let ov = overlaps(&res.rows);
    let _ = write!(o, "| collective | np |");
    for i in &imps {
        let _ = write!(o, " {i} |");
    }
    let _ = writeln!(o, "\n|---|---|{}", "---|".repeat(imps.len()));
    let mut okeys: Vec<(String, u32)> = ov.keys().map(|(l, np, _, _)| (l.clone(), *np)).collect();
    okeys.dedup();
    okeys.sort_by_key(|k| (k.1, labels.iter().position(|l| *l == k.0)));
    okeys.dedup();
    for (l, np) in okeys {
        let _ = write!(o, "| `{l}` | {np} |");
        for i in &imps {
            let meds: Vec<f64> = ov
                .iter()
                .filter(|((l2, n2, i2, _), _)| *l2 == l && *n2 == np && i2 == i)
                .map(|(_, s)| s.median)
                .collect();
            let _ = write!(
                o,
                " {} |",
                summary(&meds).map(|s| cell(&s)).unwrap_or("-".into())
            );
        }
        o.push('\n');
    }
    o.push('\n');

    crate::report::closing(
        &mut o,
        res,
        &[(
            "details.md",
            "every measurement's medians, ratio and overlap",
        )],
        plots,
    );
    (o, details(&rows, &res.rows, &imps, &labels, subject))
}

/// Overlap medians over repetitions, by (time label, np, implementation, size).
fn overlaps(rows: &[Row]) -> BTreeMap<(String, u32, String, u64), Summary> {
    let mut by: BTreeMap<(String, u32, String, u64), Vec<f64>> = BTreeMap::new();
    for r in rows {
        if let Some(Label { overlap: true, .. }) = parse_label(&r.test) {
            let l = r.test.trim_end_matches("/overlap").to_string();
            by.entry((l, r.np, r.imp.clone(), r.size))
                .or_default()
                .push(r.median);
        }
    }
    by.into_iter()
        .filter_map(|(k, v)| Some((k, summary(&v)?)))
        .collect()
}

/// `details.md`: per np, every (collective, size) with each
/// implementation's median time [min–max over repetitions], the ratio
/// against the best peer and, for the nonblocking ones, the overlaps.
fn details(rows: &[Row], raw: &[Row], imps: &[String], labels: &[String], subject: bool) -> String {
    let aggs: Vec<BTreeMap<Key, Summary>> = imps.iter().map(|i| aggregate(rows, i)).collect();
    let ratio = pairwise(rows, SUBJECT, BEST_PEER);
    let ov = overlaps(raw);
    let mut o = String::from(
        "# Collectives matrix: every measurement\n\nGenerated with report.md. Time per call in us (slowest rank), median [min–max] over repetitions; ratio: oxmpi's speed ratio against the best peer, per repetition, then median [min–max]; overlap: percent (nonblocking only).\n\n",
    );
    for np in nps_of(rows) {
        let _ = writeln!(o, "## np={np}\n");
        let _ = write!(o, "| collective | size |");
        for i in imps {
            let _ = write!(o, " {i} |");
        }
        if subject {
            o.push_str(" oxmpi vs best peer |");
        }
        for i in imps {
            let _ = write!(o, " {i} overlap % |");
        }
        let cols = 2 + imps.len() * 2 + usize::from(subject);
        let _ = writeln!(o, "\n|{}", "---|".repeat(cols));
        for l in labels {
            let mut sizes: Vec<u64> = rows
                .iter()
                .filter(|r| r.test == *l && r.np == np)
                .map(|r| r.size)
                .collect();
            sizes.sort();
            sizes.dedup();
            for s in sizes {
                let k: Key = (l.clone(), np, s);
                let _ = write!(o, "| `{l}` | {} |", size_label(s));
                for a in &aggs {
                    let _ = write!(o, " {} |", a.get(&k).map(cell).unwrap_or("-".into()));
                }
                if subject {
                    let _ = write!(
                        o,
                        " {} |",
                        ratio
                            .get(&k)
                            .map(|x| format!("{}x", cell(x)))
                            .unwrap_or("-".into())
                    );
                }
                for i in imps {
                    let c = ov
                        .get(&(l.clone(), np, i.clone(), s))
                        .map(|x| num(x.median))
                        .unwrap_or("-".into());
                    let _ = write!(o, " {c} |");
                }
                o.push('\n');
            }
        }
        o.push('\n');
    }
    o
}

/// The ratio curves for the plots: per blocking-or-nonblocking collective
/// with `MPI_CHAR` out of place, per np, the points (size, median, min, max)
/// of oxmpi's speed ratio against the best peer (barrier at x = np).
pub fn curves(rows: &[Row], nonblocking: bool) -> Vec<crate::plot::RatioPanel> {
    let by = ratios_by_size(rows, SUBJECT, BEST_PEER);
    let mut out = Vec::new();
    for c in crate::matrix::BLOCKING {
        let t = if nonblocking {
            format!("i{c}")
        } else {
            c.to_string()
        };
        let l = crate::matrix::label(&t, &Variant::char());
        let mut lines = Vec::new();
        for ((_, np), v) in by.iter().filter(|((l2, _), _)| *l2 == l) {
            let pts = v
                .iter()
                .map(|(s, x)| {
                    let xs = if *s == 0 { f64::from(*np) } else { *s as f64 };
                    (xs, x.median, x.min, x.max)
                })
                .collect();
            lines.push((format!("np={np}"), pts));
        }
        out.push((t, lines));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::sample_row;

    fn rows() -> Vec<Row> {
        let mut v = Vec::new();
        for rep in 0..2 {
            for (imp, k) in [("oxmpi", 1.0), ("ompi", 2.0), ("mpich", 0.5)] {
                // oxmpi: 1 us; ompi 2 us; mpich 0.5 us at 16 B, 4 us at 1 MiB
                for (size, mpich) in [(16, 0.5), (1 << 20, 4.0)] {
                    let t = if imp == "mpich" { mpich } else { k };
                    v.push(sample_row(rep, imp, "allreduce/CHAR/SUM", 2, size, t, "us"));
                    v.push(sample_row(rep, imp, "alltoallv/CHAR", 2, size, t, "us"));
                    v.push(sample_row(
                        rep,
                        imp,
                        "alltoallw/CHAR",
                        2,
                        size,
                        t * 1.5,
                        "us",
                    ));
                }
                v.push(sample_row(
                    rep,
                    imp,
                    "iallreduce/CHAR/SUM/overlap",
                    2,
                    16,
                    10.0 * k,
                    "%",
                ));
                v.push(sample_row(rep, imp, "iallreduce/CHAR/SUM", 2, 16, k, "us"));
            }
        }
        v
    }

    #[test]
    fn ratios_against_the_best_peer() {
        let r = time_rows(&rows());
        let by = ratios_by_size(&r, "oxmpi", BEST_PEER);
        let v = &by[&("allreduce/CHAR/SUM".to_string(), 2)];
        // 16 B: best peer mpich 0.5 -> 0.5x; 1 MiB: best peer ompi 2 -> 2x
        assert_eq!(
            v.iter().map(|x| x.1.median).collect::<Vec<_>>(),
            vec![0.5, 2.0]
        );
        let (g, worst, below) = figures(v).unwrap();
        assert!((g - 1.0).abs() < 1e-12);
        assert_eq!((worst, below), ((16, 0.5), 1));
        assert!(
            !r.iter().any(|x| x.test.ends_with("/overlap")),
            "overlaps are no times"
        );
        let w = w_over_v(&r, "oxmpi", &Variant::char(), false);
        assert_eq!(w[&(2, 16)].median, 1.5);
        assert_eq!(w[&(2, 16)].n, 2);
    }

    #[test]
    fn report_sections() {
        let res = Results {
            rows: rows(),
            ran: vec![
                crate::impls::Impl::oxmpi(std::path::Path::new("/x")),
                crate::impls::Impl::openmpi(),
                crate::impls::Impl::mpich(),
            ],
            ..Results::default()
        };
        let (md, det) = markdown(&Meta::default(), &res, &["collectives-matrix.png".into()]);
        assert!(md.contains("## Summary"), "{md}");
        assert!(
            md.contains("| `allreduce/CHAR/SUM` | 1.00x [0.500x at 16 B] 1/2 |"),
            "{md}"
        );
        assert!(
            md.contains("| `alltoallw/CHAR` | 2 | 16 B | 1.50 | 1.50 | 1.50 |"),
            "{md}"
        );
        // overlap next to the peers': oxmpi 10, ompi 20, mpich 5
        assert!(
            md.contains("| `iallreduce/CHAR/SUM` | 2 | 10.0 | 20.0 | 5.00 |"),
            "{md}"
        );
        assert!(md.contains("![collectives-matrix.png]"));
        assert!(
            det.contains(
                "| `allreduce/CHAR/SUM` | 16 B | 1.00 | 2.00 | 0.500 | 0.500x | - | - | - |"
            ),
            "{det}"
        );
        assert!(det.contains("| `iallreduce/CHAR/SUM` | 16 B | 1.00 | 2.00 | 0.500 | 0.500x | 10.0 | 20.0 | 5.00 |"), "{det}");
        let c = curves(&time_rows(&res.rows), false);
        assert_eq!(c.len(), 16);
        assert_eq!(c[0].0, "allreduce");
        assert_eq!(c[0].1[0].0, "np=2");
        assert_eq!(c[0].1[0].1.len(), 2);
    }
}
