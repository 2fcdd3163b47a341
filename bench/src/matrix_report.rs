//! The collectives matrix's report (`report.md`, `details.md`): ratios of
//! oxmpi against the best peer per repetition, their geometric means over
//! sizes, alltoallw against alltoallv for the same bytes, and the overlap of
//! the nonblocking collectives next to the peers'. Each rank count and
//! placement is a column of its own ([`columns`]), with its summary line,
//! details section and the binding its ranks were seen to have.

use crate::matrix::{
    blocking, parse_label, split_placement, with_placement, Label, Placement, Variant,
};
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

/// The order of labels in tables: set order as measured (first appearance),
/// without the placement (a table has a column per placement).
fn labels_in_order(rows: &[Row]) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for r in rows {
        let base = split_placement(&r.test).0;
        if parse_label(&r.test).is_some_and(|l| !l.overlap) && !v.iter().any(|x| x == base) {
            v.push(base.to_string());
        }
    }
    v
}

/// A column of the tables: a rank count, and the placement of its ranks
/// when they outnumber the cores (`None`: the launcher's binding).
pub type Column = (u32, Option<Placement>);

/// The columns of `rows`, by rank count, then placement.
pub fn columns(rows: &[Row]) -> Vec<Column> {
    let mut v: Vec<Column> = rows
        .iter()
        .map(|r| (r.np, split_placement(&r.test).1))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// `np=4 block`, `np=2`.
pub fn column_name(c: Column) -> String {
    match c.1 {
        Some(p) => format!("np={} {}", c.0, p.name()),
        None => format!("np={}", c.0),
    }
}

/// The row key of `label` in column `c`.
fn key(label: &str, c: Column) -> (String, u32) {
    (with_placement(label, c.1), c.0)
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
/// bytes (same variant, np, placement and size), per repetition, summarised
/// by (column, size).
pub fn w_over_v(
    rows: &[Row],
    imp: &str,
    v: &Variant,
    nonblocking: bool,
) -> BTreeMap<(Column, u64), Summary> {
    let i = if nonblocking { "i" } else { "" };
    let (w, vv) = (
        crate::matrix::label(&format!("{i}alltoallw"), v),
        crate::matrix::label(&format!("{i}alltoallv"), v),
    );
    // (column, size, repetition) -> (alltoallw, alltoallv)
    type Pair = (Option<f64>, Option<f64>);
    let mut pairs: BTreeMap<(Column, u64, u32), Pair> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.imp == imp) {
        let (base, p) = split_placement(&r.test);
        let e = pairs.entry(((r.np, p), r.size, r.rep)).or_default();
        if base == w {
            e.0 = Some(r.median);
        } else if base == vv {
            e.1 = Some(r.median);
        }
    }
    let mut by: BTreeMap<(Column, u64), Vec<f64>> = BTreeMap::new();
    for ((c, size, _), p) in pairs {
        if let (Some(a), Some(b)) = p {
            if b > 0.0 {
                by.entry((c, size)).or_default().push(a / b);
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
    let cols = columns(&rows);
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
         A test is named `collective/DATATYPE[/OP][/inplace][/PLACEMENT]`; sizes are the bytes of one block (per \
         rank, per peer). Runs with more ranks than the machine has cores (np=4 and 8 on 2 cores) \
         are **oversubscribed**: they show how each library copes with that, not its \
         speed on dedicated cores. Each runs in every placement of `--placement`, a column (and a \
         row name suffix) of its own, the same way for every implementation (the launchers do not \
         bind; `bench/c/pin.c` pins each rank from its local rank): `block`, ranks 0..np/2-1 on \
         CPU 0 and the rest on CPU 1; `cyclic`, rank r on CPU r mod 2; `unpinned`, left to the \
         scheduler, which may move them during a run (such rows mix placements). The binding each \
         rank saw is in \"Binding observed per placement\". There each iteration is timed from the first rank's entry to the \
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
    placed_bindings(&mut o, res);

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
        let _ = write!(o, "| np | placement | measurements |");
        for (_, h) in &per {
            let _ = write!(o, " {h}: geometric mean | below 1.0 |");
        }
        let _ = writeln!(o, "\n|---|---|---|{}", "---|---|".repeat(per.len()));
        for &c in &cols {
            let mut n = 0;
            let _ = write!(
                o,
                "| {}{} | {} |",
                c.0,
                if c.0 > crate::suite::cores() {
                    " (oversubscribed)"
                } else {
                    ""
                },
                c.1.map(|p| p.name()).unwrap_or("-")
            );
            let mut cells = String::new();
            for (p, _) in &per {
                let by = ratios_by_size(&rows, SUBJECT, p);
                let meds: Vec<f64> = by
                    .iter()
                    .filter(|((l, n2), _)| (*n2, split_placement(l).1) == c)
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
    for &c in &cols {
        let _ = write!(o, " {} |", column_name(c));
    }
    let _ = writeln!(o, "\n|---|{}", "---|".repeat(cols.len()));
    for l in &labels {
        let _ = write!(o, "| `{l}` |");
        for &c in &cols {
            let v = all.get(&key(l, c));
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
        let per: Vec<BTreeMap<(Column, u64), Summary>> =
            imps.iter().map(|i| w_over_v(&rows, i, v, *nb)).collect();
        let mut keys: Vec<(Column, u64)> = per.iter().flat_map(|m| m.keys().copied()).collect();
        keys.sort();
        keys.dedup();
        for (c, size) in keys {
            let _ = write!(
                o,
                "| `{}` | {} | {} |",
                crate::matrix::label(if *nb { "ialltoallw" } else { "alltoallw" }, v),
                column_name(c).trim_start_matches("np="),
                size_label(size)
            );
            for m in &per {
                let _ = write!(
                    o,
                    " {} |",
                    m.get(&(c, size)).map(cell).unwrap_or("-".into())
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
    // (column, position of the label, label)
    let mut okeys: Vec<(Column, Option<usize>, String)> = ov
        .keys()
        .map(|(l, np, _, _)| {
            let (base, p) = split_placement(l);
            (
                (*np, p),
                labels.iter().position(|x| x == base),
                base.to_string(),
            )
        })
        .collect();
    okeys.sort();
    okeys.dedup();
    for (c, _, l) in okeys {
        let full = with_placement(&l, c.1);
        let _ = write!(
            o,
            "| `{l}` | {} |",
            column_name(c).trim_start_matches("np=")
        );
        for i in &imps {
            let meds: Vec<f64> = ov
                .iter()
                .filter(|((l2, n2, i2, _), _)| *l2 == full && *n2 == c.0 && i2 == i)
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

/// The "Binding observed per placement" section: per implementation, rank
/// count and placement of the oversubscribed runs, the CPU each rank was to
/// run on and the CPUs its `Cpus_allowed_list` showed (`BIND` lines of the
/// first launch, or of the first launch that did not match: that launch's
/// results were dropped, see the failures).
fn placed_bindings(o: &mut String, res: &Results) {
    if res.placed_bindings.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "## Binding observed per placement\n\nRuns with more ranks than cores: the CPU each rank is pinned to (rank:CPU) and the CPUs it was allowed (rank:cpus, `Cpus_allowed_list` printed by each rank of `oxbench`).\n\n| name | np | placement | expected (rank:cpu) | binding observed (rank:cpus) | |\n|---|---|---|---|---|---|"
    );
    let mut v: Vec<&crate::suite::PlacedBinding> = res.placed_bindings.iter().collect();
    v.sort_by_key(|b| (b.np, b.placement));
    for b in v {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            b.imp,
            b.np,
            b.placement.name(),
            b.expected,
            if b.observed.is_empty() {
                "-"
            } else {
                &b.observed
            },
            if b.matches() {
                "as placed"
            } else {
                "**NOT as placed**"
            }
        );
    }
    o.push('\n');
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

/// `details.md`: per np (and placement), every (collective, size) with each
/// implementation's median time [min–max over repetitions], the ratio
/// against the best peer and, for the nonblocking ones, the overlaps.
fn details(rows: &[Row], raw: &[Row], imps: &[String], labels: &[String], subject: bool) -> String {
    let aggs: Vec<BTreeMap<Key, Summary>> = imps.iter().map(|i| aggregate(rows, i)).collect();
    let ratio = pairwise(rows, SUBJECT, BEST_PEER);
    let ov = overlaps(raw);
    let mut o = String::from(
        "# Collectives matrix: every measurement\n\nGenerated with report.md. Time per call in us (slowest rank), median [min–max] over repetitions; ratio: oxmpi's speed ratio against the best peer, per repetition, then median [min–max]; overlap: percent (nonblocking only).\n\n",
    );
    for c in columns(rows) {
        let (np, _) = c;
        match c.1 {
            Some(p) => {
                let _ = writeln!(
                    o,
                    "## np={np}, {} (rank:cpu {})\n",
                    p.name(),
                    p.describe(np, crate::suite::cores())
                );
            }
            None => {
                let _ = writeln!(o, "## np={np}\n");
            }
        }
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
        let ncols = 2 + imps.len() * 2 + usize::from(subject);
        let _ = writeln!(o, "\n|{}", "---|".repeat(ncols));
        for l in labels {
            let full = with_placement(l, c.1);
            let mut sizes: Vec<u64> = rows
                .iter()
                .filter(|r| r.test == full && r.np == np)
                .map(|r| r.size)
                .collect();
            sizes.sort();
            sizes.dedup();
            for s in sizes {
                let k: Key = (full.clone(), np, s);
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
                        .get(&(full.clone(), np, i.clone(), s))
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
/// with `MPI_CHAR` out of place, per np and placement, the points (size,
/// median, min, max) of oxmpi's speed ratio against the best peer (barrier at
/// x = np).
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
        for ((l2, np), v) in by.iter() {
            let (base, p) = split_placement(l2);
            if base != l {
                continue;
            }
            let pts = v
                .iter()
                .map(|(s, x)| {
                    let xs = if *s == 0 { f64::from(*np) } else { *s as f64 };
                    (xs, x.median, x.min, x.max)
                })
                .collect();
            lines.push((column_name((*np, p)), pts));
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
        assert_eq!(w[&((2, None), 16)].median, 1.5);
        assert_eq!(w[&((2, None), 16)].n, 2);
    }

    /// Oversubscribed rows measured in placements: a column per np and
    /// placement in the tables, a summary line per placement, a details
    /// section per placement, and the binding each placement saw.
    #[test]
    fn each_placement_has_its_column_summary_and_binding() {
        let mut v = Vec::new();
        for rep in 0..2 {
            for imp in ["oxmpi", "ompi", "mpich"] {
                // np=2: oxmpi 1 us, peers 2 us; np=4 block: oxmpi 4 us, peers
                // 2 us; np=4 cyclic: oxmpi 1 us, peers 2 us
                for (test, np, ox) in [
                    ("alltoall/CHAR", 2, 1.0),
                    ("alltoall/CHAR/block", 4, 4.0),
                    ("alltoall/CHAR/cyclic", 4, 1.0),
                ] {
                    let t = if imp == "oxmpi" { ox } else { 2.0 };
                    v.push(sample_row(rep, imp, test, np, 64, t, "us"));
                }
            }
        }
        let binding = |p: Placement, observed: &str| crate::suite::PlacedBinding {
            imp: "ompi".into(),
            np: 4,
            placement: p,
            expected: p.describe(4, 2),
            observed: observed.into(),
        };
        let res = Results {
            rows: v,
            ran: vec![
                crate::impls::Impl::oxmpi(std::path::Path::new("/x")),
                crate::impls::Impl::openmpi(),
                crate::impls::Impl::mpich(),
            ],
            placed_bindings: vec![
                binding(Placement::Cyclic, "0:0 1:1 2:0 3:1"),
                binding(Placement::Block, "0:1 1:1 2:0 3:0"),
            ],
            ..Results::default()
        };
        assert_eq!(
            columns(&res.rows),
            [
                (2, None),
                (4, Some(Placement::Block)),
                (4, Some(Placement::Cyclic))
            ]
        );
        let (md, det) = markdown(&Meta::default(), &res, &[]);
        assert!(
            md.contains("| collective | np=2 | np=4 block | np=4 cyclic |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| `alltoall/CHAR` | 2.00x [2.00x at 64 B] 0/1 | 0.500x [0.500x at 64 B] 1/1 | 2.00x [2.00x at 64 B] 0/1 |"
            ),
            "{md}"
        );
        // every table's separator has as many columns as its header
        let lines: Vec<&str> = md.lines().chain(det.lines()).collect();
        for w in lines.windows(2) {
            if w[1].starts_with("|---") {
                assert_eq!(
                    w[0].matches('|').count(),
                    w[1].matches('|').count(),
                    "{w:?}"
                );
            }
        }
        // the summary counts per placement (the best peer's columns last)
        assert!(
            md.contains("| block | 1 | 0.500x | 1 | 0.500x | 1 | 0.500x | 1 |"),
            "{md}"
        );
        assert!(
            md.contains("| cyclic | 1 | 2.00x | 0 | 2.00x | 0 | 2.00x | 0 |"),
            "{md}"
        );
        assert!(md.contains("| 2 | - | 1 | 2.00x | 0 |"), "{md}");
        assert!(
            md.contains("`alltoall/CHAR/block` np=4 64 B 0.500x"),
            "{md}"
        );
        // the binding observed, block before cyclic, a mismatch flagged
        let b = md.find("## Binding observed per placement").unwrap();
        let block = md[b..]
            .find("| ompi | 4 | block | 0:0 1:0 2:1 3:1 | 0:1 1:1 2:0 3:0 | **NOT as placed** |")
            .unwrap();
        let cyclic = md[b..]
            .find("| ompi | 4 | cyclic | 0:0 1:1 2:0 3:1 | 0:0 1:1 2:0 3:1 | as placed |")
            .unwrap();
        assert!(block < cyclic, "{md}");
        // details: a section per np and placement, rows named without it
        let (d2, d4b, d4c) = (
            det.find("## np=2\n").unwrap(),
            det.find("## np=4, block (rank:cpu ").unwrap(),
            det.find("## np=4, cyclic (rank:cpu ").unwrap(),
        );
        assert!(d2 < d4b && d4b < d4c, "{det}");
        assert!(
            det[d4b..d4c].contains("| `alltoall/CHAR` | 64 B | 4.00 | 2.00 | 2.00 | 0.500x |"),
            "{det}"
        );
        let c = curves(&time_rows(&res.rows), false);
        let a2a = &c.iter().find(|x| x.0 == "alltoall").unwrap().1;
        let names: Vec<&str> = a2a.iter().map(|l| l.0.as_str()).collect();
        assert_eq!(names, ["np=2", "np=4 block", "np=4 cyclic"]);
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
