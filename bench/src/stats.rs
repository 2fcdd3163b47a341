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
