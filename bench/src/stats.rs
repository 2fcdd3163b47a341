//! Sample records, statistics (median, min–max) and pairwise ratios.
//!
//! A [`Row`] is one measurement of one implementation in one repetition (the
//! median of that run's samples plus the raw samples). Ratios between two
//! implementations are computed **within the same repetition** and only then
//! summarised over repetitions, so that slow drifts of the shared machine
//! (load, vCPU placement, DRAM bandwidth) cancel out.

use std::collections::BTreeMap;

/// One measurement (one CSV line).
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Repetition index (0-based); implementations are interleaved within one.
    pub rep: u32,
    /// Implementation name (`ompi`, `ompi-nocma`, `mpich`, `oxmpi`, `machine`).
    pub imp: String,
    /// Metric: lat, bw, bibw, allreduce, bcast, alltoall, barrier, startup,
    /// rss_hello, rss_oxbench, memcpy, cma, cacheline_rtt, spawn, comm_spawn.
    pub test: String,
    /// Ranks.
    pub np: u32,
    /// Message size in bytes (for `rss_*`: the rank).
    pub size: u64,
    /// Median of the run's samples.
    pub median: f64,
    /// Smallest sample of the run.
    pub min: f64,
    /// Largest sample of the run.
    pub max: f64,
    /// Unit of the values: us, ms, MB/s, GB/s, ns, KiB.
    pub unit: String,
    /// 1-minute load average just before the run.
    pub load1: f64,
    /// CPU busy % over a short window just before the run.
    pub busy_pct: f64,
    /// Cache-line round trip (ns) of the placement probe: the longest of the run's probes
    /// (just before and just after the launch, or, for the point-to-point tests, inside
    /// the benchmark program before every sample and after the last), if any.
    pub probe_rtt_ns: Option<f64>,
    /// The shortest of the same probes (none: only one probe, [`Row::probe_rtt_ns`]).
    /// With the longest it tells whether the run stayed in one placement.
    pub probe_near_ns: Option<f64>,
    /// The physical limit for this metric in the same units, if there is one.
    pub limit: Option<f64>,
    /// Seconds since the Unix epoch when the run started.
    pub unix_time: u64,
    /// Raw sample values in time order.
    pub values: Vec<f64>,
    /// Iterations timed per sample (the smallest count used); 0 where it
    /// does not apply (probes, start-up, memory, mpi4py).
    pub iters: u32,
}

/// Metric identity across implementations and repetitions: (test, np, size).
pub type Key = (String, u32, u64);

impl Row {
    /// The (test, np, size) key of this row.
    pub fn key(&self) -> Key {
        (self.test.clone(), self.np, self.size)
    }

    /// The vCPU placement the run was measured in: "near" or "far" when all its probes
    /// agree, "mixed" when the placement changed during the run, none without a probe.
    pub fn placement(&self) -> Option<&'static str> {
        let far = self.probe_rtt_ns?;
        crate::parse::placement_of(self.probe_near_ns.unwrap_or(far), far).into()
    }

    /// True if larger values are better (bandwidths).
    pub fn higher_is_better(&self) -> bool {
        higher_is_better(&self.unit)
    }

    /// Fraction of the physical limit reached (1.0 = at the limit), if known.
    pub fn fraction_of_limit(&self) -> Option<f64> {
        let l = self.limit?;
        if l <= 0.0 || self.median <= 0.0 {
            return None;
        }
        Some(if self.higher_is_better() {
            self.median / l
        } else {
            l / self.median
        })
    }
}

/// True for throughput units and percentages (a nonblocking collective's
/// overlap).
pub fn higher_is_better(unit: &str) -> bool {
    unit.ends_with("/s") || unit == "%"
}

/// Geometric mean of the positive finite values; `None` when there are none.
pub fn geomean(values: &[f64]) -> Option<f64> {
    let logs: Vec<f64> = values
        .iter()
        .filter(|x| x.is_finite() && **x > 0.0)
        .map(|x| x.ln())
        .collect();
    (!logs.is_empty()).then(|| (logs.iter().sum::<f64>() / logs.len() as f64).exp())
}

/// Median, min and max of a set of values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Summary {
    /// Median (mean of the two middle values for an even count).
    pub median: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
    /// Number of values.
    pub n: usize,
}

/// Summarise values; `None` when there are none (NaNs are ignored).
pub fn summary(values: &[f64]) -> Option<Summary> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        0.5 * (v[n / 2 - 1] + v[n / 2])
    };
    Some(Summary {
        median,
        min: v[0],
        max: v[n - 1],
        n,
    })
}

/// How many times faster `a` is than `b` (> 1: `a` is faster), for a time
/// (lower is better) or a throughput (higher is better).
pub fn speed_ratio(a: f64, b: f64, higher_better: bool) -> Option<f64> {
    if a <= 0.0 || b <= 0.0 || a.is_nan() || b.is_nan() {
        return None;
    }
    Some(if higher_better { a / b } else { b / a })
}

/// Per metric, the summary over repetitions of one implementation's run medians.
pub fn aggregate(rows: &[Row], imp: &str) -> BTreeMap<Key, Summary> {
    let mut by: BTreeMap<Key, Vec<f64>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.imp == imp) {
        by.entry(r.key()).or_default().push(r.median);
    }
    by.into_iter()
        .filter_map(|(k, v)| Some((k, summary(&v)?)))
        .collect()
}

/// Per metric, the summary over repetitions of `speed_ratio(a, b)`, where each
/// ratio pairs `a` and `b` measured in the same repetition. Repetitions where
/// one side is missing are skipped.
pub fn pairwise(rows: &[Row], a: &str, b: &str) -> BTreeMap<Key, Summary> {
    type Pair<'a> = (Option<&'a Row>, Option<&'a Row>);
    let mut side: BTreeMap<(Key, u32), Pair> = BTreeMap::new();
    for r in rows {
        if r.imp == a {
            side.entry((r.key(), r.rep)).or_default().0 = Some(r);
        } else if r.imp == b {
            side.entry((r.key(), r.rep)).or_default().1 = Some(r);
        }
    }
    let mut ratios: BTreeMap<Key, Vec<f64>> = BTreeMap::new();
    for ((key, _), pair) in side {
        if let (Some(x), Some(y)) = pair {
            if let Some(q) = speed_ratio(x.median, y.median, x.higher_is_better()) {
                ratios.entry(key).or_default().push(q);
            }
        }
    }
    ratios
        .into_iter()
        .filter_map(|(k, v)| Some((k, summary(&v)?)))
        .collect()
}

/// A synthetic implementation `name` that, in each repetition and for each
/// metric, takes the better of `members` (e.g. Open MPI with and without
/// single-copy), so comparisons are against a peer's best setting.
pub fn best_of(rows: &[Row], members: &[&str], name: &str) -> Vec<Row> {
    let mut best: BTreeMap<(Key, u32), Row> = BTreeMap::new();
    for r in rows.iter().filter(|r| members.contains(&r.imp.as_str())) {
        let slot = best.entry((r.key(), r.rep));
        match slot {
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(r.clone());
            }
            std::collections::btree_map::Entry::Occupied(mut o) => {
                let cur = o.get();
                let better = if r.higher_is_better() {
                    r.median > cur.median
                } else {
                    r.median < cur.median
                };
                if better {
                    o.insert(r.clone());
                }
            }
        }
    }
    best.into_values()
        .map(|mut r| {
            r.imp = name.to_string();
            r
        })
        .collect()
}

/// The vCPU placements runs are compared within ([`Row::placement`]); a run whose probes
/// disagree ("mixed") or that has none is in neither.
pub const PLACEMENTS: [&str; 2] = ["near", "far"];

/// Per (metric, implementation, placement of [`PLACEMENTS`]): the summary over the runs
/// measured wholly in that placement. The p2p report's placement tables and the
/// collectives matrix's near and far columns both read this, so that one rule decides.
pub type ByPlacement = BTreeMap<(Key, String, &'static str), Summary>;

/// Group `rows` by metric, implementation and placement ([`ByPlacement`]).
pub fn by_placement(rows: &[Row]) -> ByPlacement {
    let mut by: BTreeMap<(Key, String, &'static str), Vec<f64>> = BTreeMap::new();
    for r in rows {
        if let Some(p) = r.placement().filter(|p| PLACEMENTS.contains(p)) {
            by.entry((r.key(), r.imp.clone(), p))
                .or_default()
                .push(r.median);
        }
    }
    by.into_iter()
        .filter_map(|(k, v)| Some((k, summary(&v)?)))
        .collect()
}

/// `subject` against the best of its peers within one placement.
#[derive(Debug, Clone, PartialEq)]
pub struct PlacedRatio {
    /// Speed ratio of the subject's median over the best peer's (> 1: the subject is
    /// faster).
    pub ratio: f64,
    /// The subject's runs in the placement.
    pub runs: usize,
    /// The best peer (best median in the placement).
    pub peer: String,
    /// That peer's runs in the placement.
    pub peer_runs: usize,
}

/// `subject` vs the best of `peers` on `key` within `placement` ("near" or "far"): the
/// medians over the runs measured in it (not per repetition: within one repetition the
/// subject and a peer may have run in different placements).
///
/// "Best peer" means the best of every peer that measured `key` in some placement: `None`
/// when the subject has no run in `placement`, when no peer measured `key`, or when one of
/// the peers that did has no run in `placement` (the best of a subset, e.g. a slow peer
/// alone, would flatter the subject).
pub fn placed_ratio(
    by: &ByPlacement,
    key: &Key,
    subject: &str,
    peers: &[&str],
    placement: &'static str,
    higher_better: bool,
) -> Option<PlacedRatio> {
    let at = |i: &str, pl: &'static str| by.get(&(key.clone(), i.to_string(), pl));
    let x = at(subject, placement)?;
    let mut present = peers
        .iter()
        .filter(|p| PLACEMENTS.iter().any(|pl| at(p, pl).is_some()))
        .map(|p| at(p, placement).map(|s| (*p, s)))
        .collect::<Option<Vec<_>>>()?;
    let (peer, best) = present.drain(..).reduce(|a, b| {
        let b_better = if higher_better {
            b.1.median > a.1.median
        } else {
            b.1.median < a.1.median
        };
        if b_better {
            b
        } else {
            a
        }
    })?;
    Some(PlacedRatio {
        ratio: speed_ratio(x.median, best.median, higher_better)?,
        runs: x.n,
        peer: peer.to_string(),
        peer_runs: best.n,
    })
}

impl Row {
    /// A row of this identity with nothing measured yet (NaN values, no
    /// samples, time 0).
    pub fn new(rep: u32, imp: &str, test: &str, np: u32, size: u64, unit: &str) -> Row {
        Row {
            rep,
            imp: imp.into(),
            test: test.into(),
            np,
            size,
            median: f64::NAN,
            min: f64::NAN,
            max: f64::NAN,
            unit: unit.into(),
            load1: f64::NAN,
            busy_pct: f64::NAN,
            probe_rtt_ns: None,
            probe_near_ns: None,
            limit: None,
            unix_time: 0,
            values: Vec::new(),
            iters: 0,
        }
    }
}

/// A row with the given identity and one value (load 0), for tests.
#[cfg(test)]
pub fn sample_row(
    rep: u32,
    imp: &str,
    test: &str,
    np: u32,
    size: u64,
    median: f64,
    unit: &str,
) -> Row {
    Row {
        median,
        min: median,
        max: median,
        load1: 0.0,
        busy_pct: 0.0,
        values: vec![median],
        ..Row::new(rep, imp, test, np, size, unit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rep: u32, imp: &str, test: &str, median: f64, unit: &str) -> Row {
        sample_row(rep, imp, test, 2, 8, median, unit)
    }

    #[test]
    fn geometric_mean() {
        let g = geomean(&[0.5, 2.0, 4.0]).unwrap();
        assert!((g - 4f64.cbrt()).abs() < 1e-12, "{g}");
        let one = geomean(&[f64::NAN, 0.0, 9.0]).unwrap();
        assert!((one - 9.0).abs() < 1e-9, "NaN and 0 are left out: {one}");
        assert!(geomean(&[]).is_none());
        assert!(higher_is_better("%") && higher_is_better("MB/s") && !higher_is_better("us"));
    }

    #[test]
    fn summary_odd_even_empty_nan() {
        let s = summary(&[3.0, 1.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.0, 1.0, 3.0, 3));
        assert_eq!(summary(&[4.0, 1.0, 2.0, 3.0]).unwrap().median, 2.5);
        assert!(summary(&[]).is_none());
        assert_eq!(summary(&[f64::NAN, 5.0]).unwrap().n, 1);
    }

    #[test]
    fn speed_ratio_direction() {
        // a takes half the time of b: twice as fast
        assert_eq!(speed_ratio(1.0, 2.0, false), Some(2.0));
        // a moves half the bytes per second of b: half as fast
        assert_eq!(speed_ratio(1.0, 2.0, true), Some(0.5));
        assert_eq!(speed_ratio(0.0, 2.0, true), None);
    }

    #[test]
    fn ratios_pair_within_a_repetition() {
        // rep 0: x=1 y=2 (x 2x faster); rep 1: x=4 y=2 (x 0.5x); rep 2 only x.
        let rows = vec![
            row(0, "x", "lat", 1.0, "us"),
            row(0, "y", "lat", 2.0, "us"),
            row(1, "x", "lat", 4.0, "us"),
            row(1, "y", "lat", 2.0, "us"),
            row(2, "x", "lat", 1.0, "us"),
        ];
        let p = pairwise(&rows, "x", "y");
        let s = p[&("lat".into(), 2, 8)];
        assert_eq!(s.n, 2);
        assert_eq!((s.min, s.max), (0.5, 2.0));
        assert_eq!(s.median, 1.25);
        // aggregate over all of x's repetitions
        let a = aggregate(&rows, "x");
        assert_eq!(a[&("lat".into(), 2, 8)].median, 1.0);
        assert_eq!(a[&("lat".into(), 2, 8)].n, 3);
    }

    #[test]
    fn best_of_picks_per_rep_and_direction() {
        let rows = vec![
            row(0, "a", "lat", 3.0, "us"),
            row(0, "b", "lat", 2.0, "us"),
            row(0, "a", "bw", 10.0, "MB/s"),
            row(0, "b", "bw", 20.0, "MB/s"),
            row(1, "a", "lat", 1.0, "us"),
            row(1, "b", "lat", 2.0, "us"),
            row(1, "c", "lat", 0.1, "us"),
        ];
        let best = best_of(&rows, &["a", "b"], "best");
        let get = |rep, test: &str| {
            best.iter()
                .find(|r| r.rep == rep && r.test == test)
                .map(|r| r.median)
        };
        assert_eq!(get(0, "lat"), Some(2.0));
        assert_eq!(get(0, "bw"), Some(20.0));
        assert_eq!(get(1, "lat"), Some(1.0), "c is not a member");
        assert!(best.iter().all(|r| r.imp == "best"));
    }

    /// Runs are grouped by the placement their probes agree on; mixed or unprobed runs
    /// are in neither, and the ratio is the subject's median over the best peer's
    /// median within one placement.
    #[test]
    fn ratios_within_a_placement() {
        let probed = |rep, imp: &str, median, far: f64, near: f64| Row {
            probe_rtt_ns: Some(far),
            probe_near_ns: Some(near),
            ..row(rep, imp, "alltoall/CHAR", median, "us")
        };
        let rows = vec![
            probed(0, "oxmpi", 1.0, 120.0, 90.0),
            probed(1, "oxmpi", 3.0, 130.0, 95.0),
            probed(2, "oxmpi", 2.0, 430.0, 410.0),
            // mixed: in neither placement
            probed(3, "oxmpi", 100.0, 430.0, 90.0),
            row(4, "oxmpi", "alltoall/CHAR", 100.0, "us"),
            probed(0, "ompi", 4.0, 110.0, 100.0),
            probed(1, "mpich", 3.0, 420.0, 400.0),
            probed(2, "mpich", 8.0, 150.0, 100.0),
            probed(3, "ompi", 1.0, 500.0, 410.0),
        ];
        let by = by_placement(&rows);
        let k: Key = ("alltoall/CHAR".into(), 2, 8);
        assert_eq!(by[&(k.clone(), "oxmpi".to_string(), "near")].n, 2);
        assert_eq!(by[&(k.clone(), "oxmpi".to_string(), "far")].n, 1);
        let near = placed_ratio(&by, &k, "oxmpi", &["ompi", "mpich"], "near", false).unwrap();
        // oxmpi near: median of 1 and 3 = 2; best peer near: ompi 4 (mpich 8)
        assert_eq!(
            near,
            PlacedRatio {
                ratio: 2.0,
                runs: 2,
                peer: "ompi".into(),
                peer_runs: 1
            }
        );
        // far: oxmpi 2, best peer ompi 1 (mpich 3): 0.5x
        let far = placed_ratio(&by, &k, "oxmpi", &["ompi", "mpich"], "far", false).unwrap();
        assert_eq!((far.ratio, far.peer.as_str()), (0.5, "ompi"));
        assert!(placed_ratio(&by, &k, "oxmpi", &["nobody"], "far", false).is_none());
        // A peer that measured the row but has no run in a placement leaves no pair
        // there: without ompi's far run, mpich alone (3) is not "the best peer".
        let no_ompi_far: Vec<Row> = rows.iter().filter(|r| r.rep != 3).cloned().collect();
        let by2 = by_placement(&no_ompi_far);
        assert!(placed_ratio(&by2, &k, "oxmpi", &["ompi", "mpich"], "far", false).is_none());
        assert!(placed_ratio(&by2, &k, "oxmpi", &["ompi", "mpich"], "near", false).is_some());
        // A peer that did not measure the row at all does not count.
        let r = placed_ratio(&by, &k, "oxmpi", &["ompi", "mpich", "nobody"], "far", false);
        assert_eq!(r.map(|r| r.ratio), Some(0.5));
        // throughput: higher is better
        let bw = |imp: &str, m| Row {
            probe_rtt_ns: Some(100.0),
            ..row(0, imp, "bw", m, "MB/s")
        };
        let by = by_placement(&[bw("oxmpi", 10.0), bw("ompi", 20.0), bw("mpich", 5.0)]);
        let k: Key = ("bw".into(), 2, 8);
        let r = placed_ratio(&by, &k, "oxmpi", &["ompi", "mpich"], "near", true).unwrap();
        assert_eq!((r.ratio, r.peer.as_str()), (0.5, "ompi"));
    }

    #[test]
    fn fraction_of_limit() {
        let mut r = row(0, "x", "lat", 2.0, "us");
        r.limit = Some(0.5);
        assert_eq!(r.fraction_of_limit(), Some(0.25));
        let mut b = row(0, "x", "bw", 5000.0, "MB/s");
        b.limit = Some(20000.0);
        assert_eq!(b.fraction_of_limit(), Some(0.25));
        b.limit = None;
        assert_eq!(b.fraction_of_limit(), None);
    }
}
