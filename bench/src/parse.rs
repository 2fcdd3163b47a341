//! Parsers for everything the harness reads: the output of `bench/c/oxbench.c`
//! and `hello.c`, of the physical probes (`memcpy_bw`, `pingpong`,
//! `vmreadv_bw`), and the kernel's `/proc/loadavg` and `/proc/stat`.
//!
//! All parsers are pure functions of text so that they can be unit tested.

use std::collections::HashMap;

/// A `key=value` line split into its fields (the first word is the line kind).
fn fields(line: &str) -> HashMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|w| w.split_once('='))
        .collect()
}

fn num<T: std::str::FromStr>(f: &HashMap<&str, &str>, key: &str) -> Option<T> {
    f.get(key)?.parse().ok()
}

/// One `RESULT` line of `oxbench`: the summary of one (test, np, size) run.
#[derive(Debug, Clone, PartialEq)]
pub struct BenchResult {
    /// Test name: lat, bw, bibw, allreduce, bcast, alltoall, barrier.
    pub test: String,
    /// Number of ranks.
    pub np: u32,
    /// Message size in bytes.
    pub size: u64,
    /// Iterations timed per sample.
    pub iters: u32,
    /// Median over the samples of this run.
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// `us` (time per operation) or `MB/s`.
    pub unit: String,
    /// Every sample value, in time order.
    pub values: Vec<f64>,
    /// `oxbench probe=1`: the placement probes' cache-line round trips between rank 0 and
    /// the probe peer (ns), before every sample and after the last, in time order; empty
    /// without them.
    pub probes: Vec<f64>,
    /// `oxbench probe=1`: the CPUs rank 0 and the probe peer ran on at the last probe
    /// (`probe_cpus=0,1`), as printed.
    pub probe_cpus: Option<String>,
    /// `oxbench probe=1`: the ranks that probed (`probe_ranks=0,2`; lines from before
    /// `probe_peer=` have none: ranks 0 and 1).
    pub probe_ranks: Option<String>,
}

/// Everything `oxbench` or `hello` printed that the harness understands.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct BenchOutput {
    /// Results in the order printed.
    pub results: Vec<BenchResult>,
    /// `(rank, Cpus_allowed_list)` of each rank.
    pub bindings: Vec<(u32, String)>,
    /// `(program, rank, peak RSS in KiB)` of each rank.
    pub rss: Vec<(String, u32, u64)>,
    /// `OVERLAP` lines of the nonblocking collectives, in the order printed.
    pub overlaps: Vec<Overlap>,
}

/// One `OVERLAP` line of `oxbench`: how much of a nonblocking collective
/// progressed behind computation (as the standard suites report it).
#[derive(Debug, Clone, PartialEq)]
pub struct Overlap {
    /// The nonblocking test (`iallreduce`, ...).
    pub test: String,
    /// Number of ranks.
    pub np: u32,
    /// Message size in bytes.
    pub size: u64,
    /// Post + wait alone, us.
    pub pure: f64,
    /// Post + computation + wait, us.
    pub total: f64,
    /// Overlap in percent (100: the collective ran entirely behind the computation).
    pub pct: f64,
}

/// Parse one `OVERLAP ...` line.
pub fn parse_overlap_line(line: &str) -> Option<Overlap> {
    let line = line.trim();
    if !line.starts_with("OVERLAP ") {
        return None;
    }
    let f = fields(line);
    Some(Overlap {
        test: f.get("test")?.to_string(),
        np: num(&f, "np")?,
        size: num(&f, "size")?,
        pure: num(&f, "pure")?,
        total: num(&f, "total")?,
        pct: num(&f, "overlap")?,
    })
}

/// Parse one `RESULT ...` line; `None` if the line is not a well-formed result.
pub fn parse_result_line(line: &str) -> Option<BenchResult> {
    let line = line.trim();
    if !line.starts_with("RESULT ") {
        return None;
    }
    let f = fields(line);
    let list = |key: &str| match f.get(key) {
        Some(v) if !v.is_empty() => v
            .split(';')
            .map(|x| x.parse::<f64>().ok())
            .collect::<Option<Vec<f64>>>(),
        _ => Some(Vec::new()),
    };
    let values = list("values")?;
    Some(BenchResult {
        test: f.get("test")?.to_string(),
        np: num(&f, "np")?,
        size: num(&f, "size")?,
        iters: num(&f, "iters")?,
        median: num(&f, "median")?,
        min: num(&f, "min")?,
        max: num(&f, "max")?,
        unit: f.get("unit")?.to_string(),
        values,
        probes: list("probe")?,
        probe_cpus: f.get("probe_cpus").map(|v| v.to_string()),
        probe_ranks: f.get("probe_ranks").map(|v| v.to_string()),
    })
}

/// The version in `mpichversion`'s output (`MPICH Version:      5.0.2`).
pub fn mpichversion(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("MPICH Version:"))
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty() && !v.contains(char::is_whitespace))
}

/// The times (ms) of the `SPAWN children=N ms=T` lines of `hello spawn N R`, in order
/// (other lines and malformed ones are ignored).
pub fn parse_spawn_lines(text: &str) -> Vec<f64> {
    text.lines()
        .map(strip_prefix_tag)
        .filter_map(|l| l.trim().strip_prefix("SPAWN "))
        .filter_map(|l| fields(l).get("ms")?.parse::<f64>().ok())
        .filter(|ms| ms.is_finite())
        .collect()
}

/// Parse the whole standard output of an `oxbench` or `hello` run. Lines that
/// are not ours (launcher chatter, other ranks' output) are ignored; a line
/// may carry a forwarding prefix such as `[1,0]<stdout>:`.
pub fn parse_bench_output(text: &str) -> BenchOutput {
    let mut out = BenchOutput::default();
    for raw in text.lines() {
        let line = strip_prefix_tag(raw);
        if let Some(r) = parse_result_line(line) {
            out.results.push(r);
        } else if let Some(v) = parse_overlap_line(line) {
            out.overlaps.push(v);
        } else if line.starts_with("BIND ") {
            let f = fields(line);
            if let (Some(r), Some(c)) = (num::<u32>(&f, "rank"), f.get("cpus")) {
                out.bindings.push((r, c.to_string()));
            }
        } else if line.starts_with("RSS ") {
            let f = fields(line);
            if let (Some(p), Some(r), Some(kb)) =
                (f.get("prog"), num::<u32>(&f, "rank"), num(&f, "kb"))
            {
                out.rss.push((p.to_string(), r, kb));
            }
        }
    }
    out.bindings.sort();
    out.rss.sort();
    out
}

/// Remove a launcher's per-line tag (anything up to the first of our line
/// kinds), so `[1,0]<stdout>:RESULT ...` parses like `RESULT ...`.
fn strip_prefix_tag(line: &str) -> &str {
    for kind in ["RESULT ", "OVERLAP ", "BIND ", "RSS ", "SPAWN "] {
        if let Some(i) = line.find(kind) {
            return &line[i..];
        }
    }
    line
}

/// True if every rank is bound to exactly one CPU and no two ranks share one.
pub fn one_rank_per_core(bindings: &[(u32, String)]) -> bool {
    let mut seen = Vec::new();
    for (_, cpus) in bindings {
        match cpus.parse::<u32>() {
            Ok(c) if !seen.contains(&c) => seen.push(c),
            _ => return false,
        }
    }
    !bindings.is_empty()
}

/// `memcpy size=… iters=… median=… GB/s best=… GB/s` → (size, median GB/s, best GB/s).
pub fn parse_memcpy(text: &str) -> Vec<(u64, f64, f64)> {
    text.lines()
        .filter(|l| l.starts_with("memcpy "))
        .filter_map(|l| {
            let f = fields(l);
            Some((num(&f, "size")?, num(&f, "median")?, num(&f, "best")?))
        })
        .collect()
}

/// Output of the cache-line ping-pong probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pingpong {
    /// Median round trip, ns.
    pub rtt_median_ns: f64,
    /// Best round trip, ns.
    pub rtt_best_ns: f64,
    /// Median one-way (RTT / 2), ns.
    pub one_way_ns: f64,
}

/// Parse `pingpong cpus=… rtt_median=… ns … one_way_median=… ns …`.
pub fn parse_pingpong(text: &str) -> Option<Pingpong> {
    let line = text.lines().find(|l| l.starts_with("pingpong "))?;
    let f = fields(line);
    Some(Pingpong {
        rtt_median_ns: num(&f, "rtt_median")?,
        rtt_best_ns: num(&f, "rtt_best")?,
        one_way_ns: num(&f, "one_way_median")?,
    })
}

/// Cache-line RTT below this is the "near" vCPU placement (anchors.md §1).
pub const NEAR_RTT_NS: f64 = 200.0;

/// "near" or "far" for a measured cache-line round trip.
pub fn placement(rtt_ns: f64) -> &'static str {
    if rtt_ns < NEAR_RTT_NS {
        "near"
    } else {
        "far"
    }
}

/// The placement of a run whose probes' round trips ranged from `nearest` to `farthest`
/// (ns): "near" or "far" when they agree, "mixed" when the placement changed during it.
pub fn placement_of(nearest: f64, farthest: f64) -> &'static str {
    match (placement(nearest), placement(farthest)) {
        (a, b) if a == b => a,
        _ => "mixed",
    }
}

/// `process_vm_readv size=… median=… GB/s best=… | memcpy same size median=… GB/s`
/// → (size, CMA median GB/s, memcpy median GB/s).
pub fn parse_vmreadv(text: &str) -> Option<(u64, f64, f64)> {
    let line = text.lines().find(|l| l.starts_with("process_vm_readv "))?;
    let (cma, mem) = line.split_once('|')?;
    let f = fields(cma);
    let g = fields(mem);
    Some((num(&f, "size")?, num(&f, "median")?, num(&g, "median")?))
}

/// The 1-minute load average from `/proc/loadavg`.
pub fn parse_loadavg(text: &str) -> Option<f64> {
    text.split_whitespace().next()?.parse().ok()
}

/// The counters of the aggregate `cpu ` line of `/proc/stat`, in jiffies.
fn cpu_counters(text: &str) -> Option<Vec<u64>> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    line.split_whitespace()
        .skip(1)
        .map(|x| x.parse().ok())
        .collect()
}

/// Aggregate CPU counters from the `cpu ` line of `/proc/stat`: (busy, total) jiffies.
/// Idle time is `idle + iowait`; steal counts as busy (another tenant has the core).
pub fn parse_proc_stat(text: &str) -> Option<(u64, u64)> {
    let v = cpu_counters(text)?;
    if v.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest is included in user)
    let total: u64 = v.iter().take(8).sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    Some((total - idle, total))
}

/// Stolen jiffies (the hypervisor ran another guest while ours wanted the
/// vCPU) and total jiffies from the `cpu ` line of `/proc/stat`.
pub fn parse_proc_steal(text: &str) -> Option<(u64, u64)> {
    let v = cpu_counters(text)?;
    if v.len() < 8 {
        return None;
    }
    Some((v[7], v.iter().take(8).sum()))
}

/// Busy percentage between two `/proc/stat` snapshots.
pub fn busy_percent(before: (u64, u64), after: (u64, u64)) -> Option<f64> {
    let busy = after.0.checked_sub(before.0)?;
    let total = after.1.checked_sub(before.1)?;
    if total == 0 {
        return None;
    }
    Some(100.0 * busy as f64 / total as f64)
}

/// `bench/py/mpi4py_pingpong.py` output → per size, in the order first seen: (size,
/// every round's mean one-way time in seconds, round trips per round). Its lines are
/// `pingpong SIZE MEAN_SECONDS ROUND_TRIPS ROUND`; others are ignored.
pub fn parse_mpi4py_rounds(text: &str) -> Vec<(u64, Vec<f64>, u32)> {
    let mut v: Vec<(u64, Vec<f64>, u32)> = Vec::new();
    for l in text.lines() {
        let mut w = l.split_whitespace();
        if w.next() != Some("pingpong") {
            continue;
        }
        let parsed = (|| -> Option<(u64, f64, u32)> {
            Some((
                w.next()?.parse().ok()?,
                w.next()?.parse().ok()?,
                w.next()?.parse().ok()?,
            ))
        })();
        let Some((size, mean, loops)) = parsed else {
            continue;
        };
        match v.iter_mut().find(|x| x.0 == size) {
            Some(x) => {
                x.1.push(mean);
                x.2 = loops;
            }
            None => v.push((size, vec![mean], loops)),
        }
    }
    v
}

/// `bench/py/mpi4py_pingpong.py` output → its placement probes' round trips (ns), in
/// time order, from its lines `probe NS` (with `--probe-lib`); others are ignored.
pub fn parse_mpi4py_probes(text: &str) -> Vec<f64> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some("probe")).then_some(())?;
            let ns: f64 = w.next()?.parse().ok()?;
            (w.next().is_none() && ns.is_finite()).then_some(ns)
        })
        .collect()
}

/// `python -m mpi4py.bench ringtest` output → (loops, seconds) from its line
/// `time for 1000 loops = 0.0123 seconds (2 processes, 8 bytes)`.
pub fn parse_mpi4py_ringtest(text: &str) -> Option<(u32, f64)> {
    text.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("time for ")?;
        let (loops, rest) = rest.split_once(" loops = ")?;
        let secs = rest.split_whitespace().next()?;
        Some((loops.parse().ok()?, secs.parse().ok()?))
    })
}

/// From `ldd` output, the resolved path of the MPI library (`libmpi*.so*` or
/// `libmpich*.so*`), e.g. `libmpi.so.40 => /usr/lib/…/libmpi.so.40 (0x…)`.
pub fn ldd_libmpi(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let (name, rest) = l.trim().split_once(" => ")?;
        if !(name.starts_with("libmpi.so") || name.starts_with("libmpich.so")) {
            return None;
        }
        let path = rest.split_whitespace().next()?;
        path.starts_with('/').then(|| path.to_string())
    })
}

/// One oxmpi `btl` trace line about a sent message, e.g.
/// `[oxmpi-27811.0,0] sm: send 65536 B to rank 1: rendezvous, pipelined copy`
/// → (size, destination rank, path).
pub fn parse_sm_send(line: &str) -> Option<(u64, u32, String)> {
    let rest = &line[line.find("sm: send ")? + "sm: send ".len()..];
    let (size, rest) = rest.split_once(" B to rank ")?;
    let (dest, path) = rest.split_once(':')?;
    let path = path.trim();
    if path.is_empty() {
        return None;
    }
    Some((
        size.trim().parse().ok()?,
        dest.trim().parse().ok()?,
        path.to_string(),
    ))
}

/// One oxmpi `btl` trace line measuring a large receive (verbose level 90), e.g.
/// `[oxmpi-1.0,1] sm: sample coop 1048576 B 158055 ns at 45987652` → (size, mechanism:
/// `pipe` or `coop`).
pub fn parse_sm_sample(line: &str) -> Option<(u64, String)> {
    let rest = &line[line.find("sm: sample ")? + "sm: sample ".len()..];
    let mut w = rest.split_whitespace();
    let mech = w.next()?;
    let size = w.next()?.parse().ok()?;
    (w.next()? == "B").then(|| (size, mech.to_string()))
}

/// Whether `line` is one of oxmpi's per-message trace lines (a send's path, a receive's
/// measurement, a cooperative receive), which the report counts instead of listing.
pub fn is_per_message(line: &str) -> bool {
    parse_sm_send(line).is_some()
        || parse_sm_sample(line).is_some()
        || (line.contains("sm: received ") && line.contains(": cooperative single copy"))
}

/// How the receivers copied the large messages of `size` bytes, as their measurement
/// lines count them: (pipelined, cooperative).
pub fn receiver_copies(lines: &[String], size: u64) -> (usize, usize) {
    let mut n = (0, 0);
    for (s, m) in lines.iter().filter_map(|l| parse_sm_sample(l)) {
        if s == size {
            match m.as_str() {
                "pipe" => n.0 += 1,
                "coop" => n.1 += 1,
                _ => {}
            }
        }
    }
    n
}

/// The transport paths oxmpi's verbose output shows for messages of `size`
/// bytes (distinct, in order of appearance, any direction).
pub fn observed_paths(lines: &[String], size: u64) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for (s, _, p) in lines.iter().filter_map(|l| parse_sm_send(l)) {
        if s == size && !v.contains(&p) {
            v.push(p);
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpichversion_line() {
        let out = "MPICH Version:      5.0.2\nMPICH Release date: unreleased\n";
        assert_eq!(mpichversion(out).as_deref(), Some("5.0.2"));
        assert_eq!(mpichversion("MPICH Version:\n"), None);
    }

    #[test]
    fn spawn_lines() {
        let out = "SPAWN children=4 ms=12.5\n[1,0]<stdout>:SPAWN children=4 ms=9.25\n\
                   SPAWN children=4 ms=x\nRSS prog=hello rank=0 kb=1\n";
        assert_eq!(parse_spawn_lines(out), [12.5, 9.25]);
    }

    const OUT: &str = "\
BIND rank=1 cpus=1
BIND rank=0 cpus=0
RESULT test=lat np=2 size=8 iters=400 samples=3 median=0.2336 min=0.2241 max=0.2842 mean=0.24 unit=us values=0.2842;0.2336;0.2241
[1,0]<stdout>:RESULT test=bw np=2 size=1048576 iters=2 samples=1 median=6662.5 min=6662.5 max=6662.5 mean=6662.5 unit=MB/s values=6662.5
RESULT test=lat np=2 size=garbage iters=1 samples=1 median=1 min=1 max=1 mean=1 unit=us values=1
some launcher warning
RSS prog=oxbench rank=1 kb=281720
RSS prog=oxbench rank=0 kb=281936
";

    /// `oxbench probe=1`: the placement probes of a result, in time order; a malformed
    /// probe list makes the line malformed, no list means no probes.
    #[test]
    fn result_lines_carry_their_placement_probes() {
        let l = "RESULT test=lat np=2 size=0 iters=200 samples=2 median=0.35 min=0.34 max=0.44 \
                 mean=0.37 unit=us values=0.34;0.44 probe=433.3;96.5;120.0 probe_cpus=0,1";
        let r = parse_result_line(l).unwrap();
        assert_eq!(r.probes, [433.3, 96.5, 120.0]);
        assert_eq!(r.values, [0.34, 0.44]);
        assert!(parse_result_line(&l.replace("96.5", "x")).is_none());
        let plain = parse_result_line(OUT.lines().nth(2).unwrap()).unwrap();
        assert!(plain.probes.is_empty());
        assert_eq!((plain.probe_cpus, plain.probe_ranks), (None, None));
        assert_eq!(
            (r.probe_cpus.as_deref(), r.probe_ranks),
            (Some("0,1"), None)
        );
        // a collective probed by rank 0 and rank 2 (oversubscribed block placement)
        let c = parse_result_line(
            "RESULT test=alltoall np=4 size=64 iters=9 samples=2 median=9 min=8 max=10 mean=9 \
             unit=us values=8;10 probe=421.0;430.5;425.1 probe_cpus=0,1 probe_ranks=0,2",
        )
        .unwrap();
        assert_eq!(c.probes, [421.0, 430.5, 425.1]);
        assert_eq!(
            (c.probe_cpus.as_deref(), c.probe_ranks.as_deref()),
            (Some("0,1"), Some("0,2"))
        );
        assert_eq!(placement_of(96.5, 433.3), "mixed");
        assert_eq!(placement_of(96.5, 120.0), "near");
        assert_eq!(placement_of(410.0, 433.3), "far");
    }

    #[test]
    fn receiver_samples_are_counted_and_per_message_lines_told_apart() {
        let l: Vec<String> = [
            "[oxmpi-1.0,1] sm: sample pipe 131072 B 26850 ns at 40730564 (since 40703714)",
            "[oxmpi-1.0,0] sm: sample coop 131072 B 68889 ns at 41261747",
            "[oxmpi-1.0,0] sm: sample coop 131072 B 51205 ns at 41561347",
            "[oxmpi-1.0,0] sm: sample coop 262144 B 51205 ns at 41561347",
            "[oxmpi-1.0,0] sm: sample coop x B 1 ns at 2",
            "[oxmpi-1.0,1] sm: received 131072 B from rank 0: cooperative single copy, 2 of 4 \
             chunks copied by the sender",
            "[oxmpi-1.0,1] sm: messages of 131072 B from rank 0: now pipelined copy (measured: \
             pipelined 6.7 GB/s, cooperative 2.5 GB/s)",
            "[oxmpi-1.0,0] sm: send 8 B to rank 1: eager",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(parse_sm_sample(&l[0]), Some((131072, "pipe".to_string())));
        assert_eq!(parse_sm_sample(&l[4]), None);
        assert_eq!(receiver_copies(&l, 131072), (1, 2));
        assert_eq!(receiver_copies(&l, 262144), (0, 1));
        assert_eq!(receiver_copies(&l, 8), (0, 0));
        let listed: Vec<bool> = l.iter().map(|x| is_per_message(x)).collect();
        assert_eq!(listed, [true, true, true, true, false, true, false, true]);
    }

    #[test]
    fn overlap_lines() {
        let t = "RESULT test=iallreduce np=2 size=8 iters=5 samples=3 median=1 min=1 max=1 mean=1 unit=us values=1;1;1\n\
                 [1,0]<stdout>:OVERLAP test=iallreduce np=2 size=8 pure=2.5000 compute=2.5000 total=3.0000 overlap=80.0\n\
                 OVERLAP test=ibcast np=2 size=x pure=1 compute=1 total=1 overlap=1\n";
        let o = parse_bench_output(t);
        assert_eq!(o.results.len(), 1);
        assert_eq!(
            o.overlaps,
            vec![Overlap {
                test: "iallreduce".into(),
                np: 2,
                size: 8,
                pure: 2.5,
                total: 3.0,
                pct: 80.0
            }],
            "the malformed line is dropped"
        );
    }

    #[test]
    fn bench_output_is_parsed_and_junk_ignored() {
        let o = parse_bench_output(OUT);
        assert_eq!(
            o.results.len(),
            2,
            "the malformed size line must be dropped"
        );
        let r = &o.results[0];
        assert_eq!((r.test.as_str(), r.np, r.size, r.iters), ("lat", 2, 8, 400));
        assert_eq!(r.median, 0.2336);
        assert_eq!(r.values, vec![0.2842, 0.2336, 0.2241]);
        assert_eq!(o.results[1].unit, "MB/s");
        assert_eq!(o.results[1].size, 1 << 20);
        assert_eq!(o.bindings, vec![(0, "0".into()), (1, "1".into())]);
        assert_eq!(o.rss[0], ("oxbench".into(), 0, 281936));
        assert!(one_rank_per_core(&o.bindings));
    }

    #[test]
    fn bad_values_list_rejects_the_line() {
        let l = "RESULT test=lat np=2 size=8 iters=1 samples=2 median=1 min=1 max=1 mean=1 unit=us values=1;x";
        assert!(parse_result_line(l).is_none());
        assert!(parse_result_line("RESULTS test=lat").is_none());
    }

    #[test]
    fn binding_check() {
        assert!(!one_rank_per_core(&[(0, "0-1".into()), (1, "0-1".into())]));
        assert!(!one_rank_per_core(&[(0, "1".into()), (1, "1".into())]));
        assert!(!one_rank_per_core(&[]));
        assert!(one_rank_per_core(&[(0, "1".into()), (1, "0".into())]));
    }

    #[test]
    fn probes() {
        let m = parse_memcpy(
            "memcpy size=1048576 iters=256 median=31.91 GB/s best=33.18 GB/s\n\
             memcpy size=67108864 iters=4 median=5.30 GB/s best=5.70 GB/s\n",
        );
        assert_eq!(m, vec![(1048576, 31.91, 33.18), (67108864, 5.30, 5.70)]);
        let p = parse_pingpong(
            "pingpong cpus=0,1 samples=41 x N=2000 rtt_median=91.9 ns rtt_p10=88.9 ns \
             rtt_best=88.0 ns one_way_median=45.9 ns one_way_best=44.0 ns\n",
        )
        .unwrap();
        assert_eq!(p.rtt_median_ns, 91.9);
        assert_eq!(p.rtt_best_ns, 88.0);
        assert_eq!(p.one_way_ns, 45.9);
        assert_eq!(placement(p.rtt_median_ns), "near");
        assert_eq!(placement(410.0), "far");
        let v = parse_vmreadv(
            "process_vm_readv size=1048576 iters=512 median=8.52 GB/s best=9.05 GB/s | \
             memcpy same size median=32.86 GB/s\n",
        )
        .unwrap();
        assert_eq!(v, (1048576, 8.52, 32.86));
        assert!(parse_vmreadv("WARN: data mismatch\n").is_none());
    }

    #[test]
    fn mpi4py_and_ldd() {
        let t = "# buffers numpy\npingpong 1 6.1e-07 40000 0\npingpong 4194304 2.4e-04 100 0\n\
                 pingpong 1 6.3e-07 40000 1\npingpong x 1 1 1\npingpong 2 1e-6\n\
                 pingpong 4194304 2.5e-04 100 1\n";
        assert_eq!(
            parse_mpi4py_rounds(t),
            vec![
                (1, vec![6.1e-07, 6.3e-07], 40000),
                (4194304, vec![2.4e-04, 2.5e-04], 100)
            ]
        );
        let t = "# buffers numpy\nprobe 98.4\npingpong 1 6.1e-07 40000 0\nprobe 411.0\n\
                 probe x\nprobe 5 6\npingpong 1 6.3e-07 40000 1\nprobe 97.5\n";
        assert_eq!(parse_mpi4py_probes(t), vec![98.4, 411.0, 97.5]);
        assert_eq!(parse_mpi4py_rounds(t).len(), 1);
        assert_eq!(
            parse_mpi4py_ringtest(
                "x\ntime for 1000 loops = 0.0123 seconds (2 processes, 8 bytes)\n"
            ),
            Some((1000, 0.0123))
        );
        assert_eq!(parse_mpi4py_ringtest("time for x loops = 1 seconds"), None);
        let ldd = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                   \tlibmpich.so.12 => /usr/lib/x86_64-linux-gnu/libmpich.so.12 (0x00007f)\n\
                   \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n";
        assert_eq!(
            ldd_libmpi(ldd).as_deref(),
            Some("/usr/lib/x86_64-linux-gnu/libmpich.so.12")
        );
        assert_eq!(ldd_libmpi("\tlibmpi.so.12 => not found\n"), None);
    }

    #[test]
    fn load_and_busy() {
        assert_eq!(parse_loadavg("0.04 0.12 0.07 1/95 6493\n"), Some(0.04));
        let a = parse_proc_stat("cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(a, (150, 1000));
        let b = parse_proc_stat("cpu  200 0 100 850 50 0 0 0 0 0\n").unwrap();
        assert_eq!(busy_percent(a, b), Some(100.0 * 150.0 / 200.0));
        assert_eq!(busy_percent(a, a), None);
        assert!(parse_proc_stat("intr 1 2 3\n").is_none());
        // steal: 8th counter; a kernel line without it gives no steal figure
        let a = parse_proc_steal("cpu  100 0 50 800 50 0 0 10 0 0\n").unwrap();
        assert_eq!(a, (10, 1010));
        let b = parse_proc_steal("cpu  150 0 60 800 50 0 0 70 0 0\n").unwrap();
        assert_eq!(busy_percent(a, b), Some(100.0 * 60.0 / 120.0));
        assert!(parse_proc_steal("cpu  100 0 50 800\n").is_none());
    }

    #[test]
    fn sm_send_trace_lines() {
        let l = "[oxmpi-27811.0,0] sm: send 65536 B to rank 1: rendezvous, pipelined copy";
        assert_eq!(
            parse_sm_send(l),
            Some((65536, 1, "rendezvous, pipelined copy".to_string()))
        );
        assert_eq!(
            parse_sm_send("sm: send 0 B to rank 0: eager"),
            Some((0, 0, "eager".to_string()))
        );
        assert_eq!(parse_sm_send("sm: send x B to rank 0: eager"), None);
        assert_eq!(parse_sm_send("sm: send 8 B to rank 1:"), None);
        assert_eq!(parse_sm_send("btl: rank 0/2: sm eager_limit 4096"), None);
        let lines: Vec<String> = [
            "sm: send 8 B to rank 1: eager",
            "sm: send 8 B to rank 0: eager",
            "sm: send 4194304 B to rank 1: rendezvous, single copy (cma)",
            "sm: send 4194304 B to rank 0: rendezvous, pipelined copy",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(observed_paths(&lines, 8), vec!["eager".to_string()]);
        assert_eq!(observed_paths(&lines, 4194304).len(), 2);
        assert!(observed_paths(&lines, 16).is_empty());
    }
}
