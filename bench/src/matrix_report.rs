//! The collectives matrix's report (`report.md`, `details.md`): ratios of
//! oxmpi against the best peer per repetition, their geometric means over
//! sizes, alltoallw against alltoallv for the same bytes, and the overlap of
//! the nonblocking collectives next to the peers'. Each rank count and
//! placement is a column of its own ([`columns`]), with its summary line,
//! details section and the binding its ranks were seen to have. Every
//! measurement is also classified by the vCPU placement its in-program probes
//! saw (near, far, mixed: [`Row::placement`], the p2p report's rule), and each
//! row compared with the best peer within each placement ([`placed_by_size`]).

use crate::matrix::{
    blocking, parse_label, split_placement, with_placement, Label, Placement, Variant,
};
use crate::report::{cell, num, size_label, Meta};
use crate::stats::{
    aggregate, best_of, by_placement, geomean, pairwise, placed_ratio, summary, ByPlacement, Key,
    PlacedRatio, Row, Summary, PLACEMENTS,
};
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

/// Per (label, np) and size: oxmpi against the best peer within the near and
/// the far vCPU placement ([`PLACEMENTS`] order), `None` where that placement
/// has no run of oxmpi or of one of the peers that measured the row.
pub type PlacedBySize = BTreeMap<(String, u32), Vec<(u64, [Option<PlacedRatio>; 2])>>;

/// The within-placement ratios of every (label, np, size) oxmpi or a peer
/// measured ([`placed_ratio`] over [`by_placement`]: the same rule and
/// medians as the p2p report's placement tables).
pub fn placed_by_size(rows: &[Row], by: &ByPlacement, peers: &[&str]) -> PlacedBySize {
    let mut keys: Vec<Key> = rows
        .iter()
        .filter(|r| r.imp == SUBJECT || peers.contains(&r.imp.as_str()))
        .map(Row::key)
        .collect();
    keys.sort();
    keys.dedup();
    let mut out: PlacedBySize = BTreeMap::new();
    for k in keys {
        // `placed_ratio` compares against every peer that measured the row:
        // a placement where one of them has no run says `no pair`.
        let r = PLACEMENTS.map(|pl| placed_ratio(by, &k, SUBJECT, peers, pl, false));
        out.entry((k.0.clone(), k.1)).or_default().push((k.2, r));
    }
    out
}

/// The ratios of one placement (index into [`PLACEMENTS`]) of one row, as
/// [`figures`] takes them, with the subject's and the best peers' runs
/// summed over the sizes.
fn placed_figures(
    v: &[(u64, [Option<PlacedRatio>; 2])],
    i: usize,
) -> (Vec<(u64, Summary)>, usize, usize) {
    let mut f = Vec::new();
    let (mut runs, mut peer_runs) = (0, 0);
    for (size, r) in v {
        if let Some(r) = &r[i] {
            let m = Summary {
                median: r.ratio,
                min: r.ratio,
                max: r.ratio,
                n: 1,
            };
            f.push((*size, m));
            runs += r.runs;
            peer_runs += r.peer_runs;
        }
    }
    (f, runs, peer_runs)
}

/// A near or far cell of the per-collective table: `g x [w x at S] k/n, o/p
/// runs` (oxmpi's and the best peers' runs in that placement over the sizes),
/// with the sizes that have no pair there, or `no pair` for none.
fn placed_cell(v: &[(u64, [Option<PlacedRatio>; 2])], i: usize) -> String {
    let (f, runs, peer_runs) = placed_figures(v, i);
    let missing = v.len() - f.len();
    match figures(&f) {
        None => "no pair".into(),
        Some(x) => format!(
            "{}, {runs}/{peer_runs} runs{}",
            ratio_cell(Some(x), f.len()),
            if missing > 0 {
                format!(", {missing} size(s) no pair")
            } else {
                String::new()
            }
        ),
    }
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
    let _ = write!(
        o,
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
         of `n` sizes below 1.0.\n\n\
         vCPU placement: the hypervisor places the machine's two vCPUs near (a cache-line round \
         trip below {near} ns) or far (above; every implementation about 2x slower) and may change \
         it between launches or during one. `oxbench probe=1` bounces a cache line between rank 0 \
         and a rank on the other CPU (rank 1; in a block placement the first rank of CPU 1, see \
         \"Placement probe\") before every sample and after the last, outside the timed calls; a \
         measurement is near or far when all its probes agree and mixed otherwise, the rule of the \
         point-to-point report. Per-repetition ratios pair runs that may have been in different \
         placements; the near and far tables therefore compare, within one placement, oxmpi's median \
         over its runs there with the best peer's median over its runs there (`o/p runs`: oxmpi's \
         and the best peer's runs summed over the sizes). Mixed measurements are in neither; a row \
         with no run of oxmpi, or of one of the peers that measured it, in a placement says \
         `no pair` (the best peer is the best of all of them, never of a subset).\n\n",
        near = crate::parse::NEAR_RTT_NS,
    );
    crate::report::implementations(&mut o, res);
    placed_bindings(&mut o, res);
    probe_seen(&mut o, res);

    let _ = writeln!(o, "## Summary\n");
    let all = ratios_by_size(&rows, SUBJECT, BEST_PEER);
    let by = by_placement(&rows);
    let placed = placed_by_size(&rows, &by, &peers);
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
        placed_summary(&mut o, &rows, &placed, &cols);
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
                "The {} slowest (of {} below 1.0), oxmpi vs best peer per repetition (all placements): {}.\n",
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

    if subject {
        placed_table(&mut o, &labels, &cols, &placed);
    }

    let _ = writeln!(
        o,
        "## oxmpi vs best peer per collective\n\nPer repetition, whatever the placement of each run (see the near and far table above).\n"
    );
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
    (
        o,
        details(&rows, &res.rows, &imps, &labels, &placed, subject),
    )
}

/// The summary's lines per placement: per column, oxmpi against the best peer
/// within the near and within the far placement over every (collective, size)
/// with a pair there, the rows below 1.0, the rows without a pair, and the
/// mixed measurements (in neither).
fn placed_summary(o: &mut String, rows: &[Row], placed: &PlacedBySize, cols: &[Column]) {
    let _ = writeln!(
        o,
        "Within one vCPU placement (rows = collective x size; `k of n`: rows below 1.0 of the rows with a pair of oxmpi and peer runs in that placement):\n\n| np | placement | near: geometric mean | near: rows below 1.0 | far: geometric mean | far: rows below 1.0 | rows without a near pair | rows without a far pair | mixed measurements |\n|---|---|---|---|---|---|---|---|---|"
    );
    for &c in cols {
        let mine: Vec<&(u64, [Option<PlacedRatio>; 2])> = placed
            .iter()
            .filter(|((l, np), _)| (*np, split_placement(l).1) == c)
            .flat_map(|(_, v)| v.iter())
            .collect();
        let _ = write!(o, "| {} | {} |", c.0, c.1.map(|p| p.name()).unwrap_or("-"));
        let mut none = [0; 2];
        for (i, without) in none.iter_mut().enumerate() {
            let r: Vec<f64> = mine
                .iter()
                .filter_map(|x| x.1[i].as_ref().map(|r| r.ratio))
                .collect();
            *without = mine.len() - r.len();
            let below = r.iter().filter(|x| **x < 1.0).count();
            let _ = write!(
                o,
                " {} | {below} of {} |",
                geomean(&r)
                    .map(|g| format!("{}x", num(g)))
                    .unwrap_or("-".into()),
                r.len()
            );
        }
        let mixed = rows
            .iter()
            .filter(|r| r.imp != BEST_PEER && (r.np, split_placement(&r.test).1) == c)
            .filter(|r| r.placement() == Some("mixed"))
            .count();
        let _ = writeln!(o, " {} | {} | {mixed} |", none[0], none[1]);
    }
    o.push('\n');
}

/// The per-collective table within each placement: per column a near and a
/// far cell ([`placed_cell`]).
fn placed_table(o: &mut String, labels: &[String], cols: &[Column], placed: &PlacedBySize) {
    let _ = writeln!(
        o,
        "## oxmpi vs best peer per collective, within each vCPU placement\n\nCell: `g x [w x at S] k/n, o/p runs` as above, over the sizes with a pair of oxmpi and peer runs in that placement (the ratio of medians over those runs).\n"
    );
    let _ = write!(o, "| collective |");
    for &c in cols {
        for pl in PLACEMENTS {
            let _ = write!(o, " {} {pl} |", column_name(c));
        }
    }
    let _ = writeln!(o, "\n|---|{}", "---|".repeat(cols.len() * PLACEMENTS.len()));
    for l in labels {
        let _ = write!(o, "| `{l}` |");
        for &c in cols {
            for i in 0..PLACEMENTS.len() {
                let cell = match placed.get(&key(l, c)) {
                    Some(v) => placed_cell(v, i),
                    None => "-".into(),
                };
                let _ = write!(o, " {cell} |");
            }
        }
        o.push('\n');
    }
    o.push('\n');
}

/// The "Placement probe" section: per rank count and placement, the ranks
/// that ran the in-program probe, where ranks 0 and 1 are pinned, and the
/// CPUs the probing ranks were seen on (measurements per implementation).
fn probe_seen(o: &mut String, res: &Results) {
    if res.probe_seen.is_empty() {
        return;
    }
    let _ = writeln!(
        o,
        "## Placement probe\n\nThe ranks that bounced the cache line (rank 0 and a rank on the other CPU: a spinning probe on a shared CPU would wait for time slices and measure no vCPU distance), the CPUs ranks 0 and 1 are pinned to, and the CPUs the probing ranks reported at each measurement's last probe (measurements per implementation).\n\n| np | placement | probing ranks | ranks 0 and 1 on CPUs | probing ranks seen on CPUs |\n|---|---|---|---|---|"
    );
    let mut v: Vec<&crate::suite::ProbeSeen> = res.probe_seen.iter().collect();
    v.sort_by_key(|b| (b.np, b.placement, b.ranks.clone()));
    let mut groups: Vec<(u32, Option<Placement>, String)> = v
        .iter()
        .map(|b| (b.np, b.placement, b.ranks.clone()))
        .collect();
    groups.dedup();
    for (np, pl, ranks) in groups {
        let seen: Vec<String> = v
            .iter()
            .filter(|b| b.np == np && b.placement == pl && b.ranks == ranks)
            .map(|b| format!("{} {} ({})", b.imp, b.cpus, b.count))
            .collect();
        let first_two = pl
            .and_then(|p| p.cpus(np, crate::suite::cores()))
            .map(|c| format!("{},{}", c[0], c[1]))
            .unwrap_or("one rank per core (launcher)".into());
        let _ = writeln!(
            o,
            "| {np} | {} | {ranks} | {first_two} | {} |",
            pl.map(|p| p.name()).unwrap_or("-"),
            seen.join(", ")
        );
    }
    o.push('\n');
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
fn details(
    rows: &[Row],
    raw: &[Row],
    imps: &[String],
    labels: &[String],
    placed: &PlacedBySize,
    subject: bool,
) -> String {
    let aggs: Vec<BTreeMap<Key, Summary>> = imps.iter().map(|i| aggregate(rows, i)).collect();
    let ratio = pairwise(rows, SUBJECT, BEST_PEER);
    let ov = overlaps(raw);
    let mut o = String::from(
        "# Collectives matrix: every measurement\n\nGenerated with report.md. Time per call in us (slowest rank), median [min–max] over repetitions; ratio: oxmpi's speed ratio against the best peer, per repetition, then median [min–max]; near, far: the ratio of oxmpi's median over the best peer's within that vCPU placement (runs of oxmpi/of that peer), `no pair` without runs there of oxmpi and of every peer that measured the row; overlap: percent (nonblocking only).\n\n",
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
            o.push_str(" oxmpi vs best peer | near | far |");
        }
        for i in imps {
            let _ = write!(o, " {i} overlap % |");
        }
        let ncols = 2 + imps.len() * 2 + 3 * usize::from(subject);
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
                    let at = placed
                        .get(&(full.clone(), np))
                        .and_then(|v| v.iter().find(|x| x.0 == s));
                    for i in 0..PLACEMENTS.len() {
                        let c = match at.and_then(|x| x.1[i].as_ref()) {
                            Some(r) => {
                                format!("{}x ({}/{} {})", num(r.ratio), r.runs, r.peer_runs, r.peer)
                            }
                            None => "no pair".into(),
                        };
                        let _ = write!(o, " {c} |");
                    }
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

    /// Rows probed near, far and mixed: each placement compares oxmpi with the
    /// best peer over the runs measured in it, mixed runs are in neither, a
    /// placement without a pair says so, the summary counts rows below 1.0 per
    /// placement, and the probe section tells where the probing ranks ran.
    #[test]
    fn near_and_far_columns_compare_within_one_placement() {
        // (far, near) probe round trips in ns
        const NEAR: (f64, f64) = (120.0, 95.0);
        const FAR: (f64, f64) = (450.0, 410.0);
        const MIXED: (f64, f64) = (450.0, 95.0);
        let probed = |rep, imp: &str, test: &str, np, size, t, pr: (f64, f64)| Row {
            probe_rtt_ns: Some(pr.0),
            probe_near_ns: Some(pr.1),
            ..sample_row(rep, imp, test, np, size, t, "us")
        };
        let mut v = Vec::new();
        // allreduce np=2 at 16 B, 4 repetitions: oxmpi near 1 us (reps 0, 1), far 2 us
        // (rep 2), mixed 50 us (rep 3); ompi near 2 us (0), far 1.6 us (1, 2); mpich
        // near 1.6 us (2), far 5 us (0), mixed (1, 3). Per repetition oxmpi meets a
        // peer in the other placement (rep 0: near 1 vs far 5, rep 1 near vs far 1.6).
        for (rep, ox, om, mp) in [
            (0, NEAR, NEAR, FAR),
            (1, NEAR, FAR, MIXED),
            (2, FAR, FAR, NEAR),
            (3, MIXED, MIXED, MIXED),
        ] {
            let t = |p: (f64, f64), near, far| match p {
                NEAR => near,
                FAR => far,
                _ => 50.0,
            };
            let a = "allreduce/CHAR/SUM";
            v.push(probed(rep, "oxmpi", a, 2, 16, t(ox, 1.0, 2.0), ox));
            v.push(probed(rep, "ompi", a, 2, 16, t(om, 2.0, 1.6), om));
            v.push(probed(rep, "mpich", a, 2, 16, t(mp, 1.6, 5.0), mp));
            // alltoall np=4 block at 64 B: oxmpi only ever near, the peers only far
            let b = "alltoall/CHAR/block";
            v.push(probed(rep, "oxmpi", b, 4, 64, 3.0, NEAR));
            v.push(probed(rep, "ompi", b, 4, 64, 6.0, FAR));
            v.push(probed(rep, "mpich", b, 4, 64, 6.0, FAR));
            // bcast np=2 at 16 B: Open MPI only ever far, so near has no
            // best peer (MPICH alone is not "the best peer")
            let c = "bcast/CHAR";
            v.push(probed(rep, "oxmpi", c, 2, 16, t(ox, 1.0, 2.0), ox));
            v.push(probed(rep, "ompi", c, 2, 16, 1.6, FAR));
            v.push(probed(rep, "mpich", c, 2, 16, t(mp, 3.0, 5.0), mp));
        }
        let seen =
            |imp: &str, np, placement, ranks: &str, cpus: &str, count| crate::suite::ProbeSeen {
                imp: imp.into(),
                np,
                placement,
                ranks: ranks.into(),
                cpus: cpus.into(),
                count,
            };
        let res = Results {
            rows: v,
            ran: vec![
                crate::impls::Impl::oxmpi(std::path::Path::new("/x")),
                crate::impls::Impl::openmpi(),
                crate::impls::Impl::mpich(),
            ],
            probe_seen: vec![
                seen("oxmpi", 4, Some(Placement::Block), "0,2", "0,1", 4),
                seen("oxmpi", 2, None, "0,1", "0,1", 3),
                seen("oxmpi", 2, None, "0,1", "1,0", 1),
            ],
            ..Results::default()
        };
        let rows = time_rows(&res.rows);
        let by = by_placement(&rows);
        let placed = placed_by_size(&rows, &by, &PEERS);
        let a = &placed[&("allreduce/CHAR/SUM".to_string(), 2)];
        let near = a[0].1[0].as_ref().unwrap();
        let far = a[0].1[1].as_ref().unwrap();
        // near: oxmpi 1 (2 runs) vs best peer mpich 1.6 (1 run; ompi 2): 1.6x
        assert_eq!(
            (near.ratio, near.runs, near.peer.as_str(), near.peer_runs),
            (1.6, 2, "mpich", 1)
        );
        // far: oxmpi 2 (1 run) vs best peer ompi 1.6 (2 runs; mpich 5): 0.8x
        assert_eq!(
            (far.ratio, far.runs, far.peer.as_str(), far.peer_runs),
            (0.8, 1, "ompi", 2)
        );
        let c = &placed[&("bcast/CHAR".to_string(), 2)];
        assert!(c[0].1[0].is_none(), "near: Open MPI has no near run");
        let far = c[0].1[1].as_ref().unwrap();
        assert_eq!((far.ratio, far.peer.as_str()), (0.8, "ompi"));
        let (md, det) = markdown(&Meta::default(), &res, &[]);
        assert!(
            md.contains("| collective | np=2 near | np=2 far | np=4 block near | np=4 block far |"),
            "{md}"
        );
        assert!(
            md.contains(
                "| `allreduce/CHAR/SUM` | 1.60x [1.60x at 16 B] 0/1, 2/1 runs | 0.800x [0.800x at 16 B] 1/1, 1/2 runs | - | - |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| `alltoall/CHAR` | - | - | no pair | no pair |"),
            "{md}"
        );
        // summary per placement: np=2 allreduce near and far, bcast far only
        // (no near pair); below 1.0 far only; 7 mixed runs (allreduce: oxmpi
        // 1, ompi 1, mpich 2; bcast: oxmpi 1, mpich 2)
        assert!(
            md.contains("| 2 | - | 1.60x | 0 of 1 | 0.800x | 2 of 2 | 1 | 0 | 7 |"),
            "{md}"
        );
        assert!(
            md.contains("| 4 | block | - | 0 of 0 | - | 0 of 0 | 1 | 1 | 0 |"),
            "{md}"
        );
        // where the probing ranks ran
        assert!(
            md.contains(
                "| 2 | - | 0,1 | one rank per core (launcher) | oxmpi 0,1 (3), oxmpi 1,0 (1) |"
            ),
            "{md}"
        );
        assert!(
            md.contains("| 4 | block | 0,2 | 0,0 | oxmpi 0,1 (4) |"),
            "{md}"
        );
        assert!(
            det.contains("| `allreduce/CHAR/SUM` | 16 B | 1.50 [1.00–50.0] | 1.80 [1.60–50.0] | 27.5 [1.60–50.0] | "),
            "{det}"
        );
        assert!(
            det.contains("| 1.60x (2/1 mpich) | 0.800x (1/2 ompi) |"),
            "{det}"
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
                "| `allreduce/CHAR/SUM` | 16 B | 1.00 | 2.00 | 0.500 | 0.500x | no pair | no pair | - | - | - |"
            ),
            "{det}"
        );
        assert!(det.contains("| `iallreduce/CHAR/SUM` | 16 B | 1.00 | 2.00 | 0.500 | 0.500x | no pair | no pair | 10.0 | 20.0 | 5.00 |"), "{det}");
        let c = curves(&time_rows(&res.rows), false);
        assert_eq!(c.len(), 16);
        assert_eq!(c[0].0, "allreduce");
        assert_eq!(c[0].1[0].0, "np=2");
        assert_eq!(c[0].1[0].1.len(), 2);
    }
}
