//! The collectives matrix (`cargo xtask bench --collectives`): every blocking
//! and nonblocking collective `oxbench` measures, at several rank counts,
//! with the reductions swept over the datatypes (and the pair types with
//! MINLOC and MAXLOC), in place and out of place. Within each repetition the
//! implementations run in turn on each set of measurements (interleaved), so
//! that ratios can be taken per repetition against the best peer. A rank
//! count past the cores runs once per [`Placement`] of `--placement`, each
//! rank pinned to its CPU by `bench/c/pin.c` alike for every implementation.
//!
//! A row's test names its variant: `allreduce/INT/SUM`, `bcast/CHAR`,
//! `alltoall/CHAR/inplace`, `alltoall/CHAR/block` for a placement, and
//! `iallreduce/CHAR/SUM/overlap` for the overlap (percent) of a nonblocking
//! collective ([`label`], [`with_placement`], [`parse_label`]).

use crate::config::{Config, Mode};
use crate::suite::{Prepared, Runner};
use std::path::Path;
use std::time::{Duration, Instant};

/// The blocking collectives of `oxbench`; each also runs nonblocking (`i` + name).
pub const BLOCKING: [&str; 16] = [
    "allreduce",
    "reduce",
    "bcast",
    "gather",
    "gatherv",
    "scatter",
    "scatterv",
    "allgather",
    "allgatherv",
    "alltoall",
    "alltoallv",
    "alltoallw",
    "reduce_scatter",
    "reduce_scatter_block",
    "scan",
    "barrier",
];

/// The collectives that reduce (whose op and datatype matter).
pub const REDUCTIONS: [&str; 5] = [
    "allreduce",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_block",
    "scan",
];

/// Collectives without an in-place form.
const NO_INPLACE: [&str; 2] = ["bcast", "barrier"];

/// `oxbench`'s datatypes and their extent in bytes (x86-64 LP64).
pub const DTYPES: [(&str, u64); 10] = [
    ("CHAR", 1),
    ("INT", 4),
    ("FLOAT", 4),
    ("DOUBLE", 8),
    ("LONG", 8),
    ("2INT", 8),
    ("FLOAT_INT", 8),
    ("DOUBLE_INT", 16),
    ("LONG_INT", 16),
    ("SHORT_INT", 8),
];

/// `oxbench`'s reduction ops.
const OPS: [&str; 10] = [
    "SUM", "PROD", "MAX", "MIN", "BAND", "BOR", "LAND", "LOR", "MINLOC", "MAXLOC",
];

/// The default datatype sweep of the reductions.
const DEFAULT_DTYPES: &str = "INT,FLOAT,DOUBLE,LONG,2INT,FLOAT_INT,DOUBLE_INT,LONG_INT,SHORT_INT";

/// Sizes of the main set (every collective, `MPI_CHAR`, out of place): 4 B
/// to 1 MiB in powers of 4.
const ALL_SIZES: [u64; 10] = [4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1 << 20];

/// Sizes of the in-place and datatype sets (small, medium, large).
const SWEEP_SIZES: [u64; 3] = [16, 4096, 1 << 20];

/// The blocking collective of a test (`iallreduce` -> `allreduce`).
pub fn blocking(test: &str) -> &str {
    test.strip_prefix('i').unwrap_or(test)
}

/// True for the pair types (value, index) of MINLOC/MAXLOC.
pub fn is_pair(dtype: &str) -> bool {
    dtype.contains("INT") && dtype != "INT"
}

/// Datatype, op and in-place flag of a set of measurements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variant {
    /// `oxbench` datatype name (`CHAR`, `DOUBLE_INT`, ...).
    pub dtype: String,
    /// Reduction op (`SUM`, `MINLOC`, ...).
    pub op: String,
    /// `MPI_IN_PLACE` where the collective allows it.
    pub inplace: bool,
}

impl Variant {
    /// `MPI_CHAR`, `MPI_SUM`, out of place: what the standard suites run.
    pub fn char() -> Variant {
        Variant {
            dtype: "CHAR".into(),
            op: "SUM".into(),
            inplace: false,
        }
    }

    /// The `oxbench` options of this variant.
    pub fn opts(&self) -> Vec<String> {
        vec![
            format!("dtype={}", self.dtype),
            format!("op={}", self.op),
            format!("inplace={}", u8::from(self.inplace)),
        ]
    }

    /// Extent of one item in bytes.
    pub fn item(&self) -> u64 {
        DTYPES
            .iter()
            .find(|d| d.0 == self.dtype)
            .map(|d| d.1)
            .unwrap_or(1)
    }

    /// For failure messages: `dtype=INT op=SUM in place`.
    pub fn describe(&self) -> String {
        format!(
            "dtype={} op={}{}",
            self.dtype,
            self.op,
            if self.inplace { " in place" } else { "" }
        )
    }
}

/// Where the ranks of an oversubscribed launch (more ranks than cores) run:
/// each rank is pinned by the `pin` wrapper (`bench/c/pin.c`) to a CPU chosen
/// from its local rank, the same way for every implementation (their
/// launchers do not bind oversubscribed ranks), or left to the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Placement {
    /// No mask: the scheduler places the ranks and may move them (the
    /// matrices before session 27).
    Unpinned,
    /// Consecutive ranks share a CPU: ranks 0..np/2-1 on CPU 0, the rest on
    /// CPU 1 (in general rank r on CPU r x cores / np).
    Block,
    /// Round robin: rank r on CPU r mod cores.
    Cyclic,
}

/// The placements of `--placement` when it is not given: the two pinned
/// ones, so that every row is measured within one placement (the goal of
/// issue 21 holds within each vCPU placement; unpinned rows mix them and
/// come out bimodal).
pub const DEFAULT_PLACEMENTS: [Placement; 2] = [Placement::Block, Placement::Cyclic];

impl Placement {
    /// The name on the command line and in row names.
    pub fn name(self) -> &'static str {
        match self {
            Placement::Unpinned => "unpinned",
            Placement::Block => "block",
            Placement::Cyclic => "cyclic",
        }
    }

    /// The placement named `s`.
    pub fn from_name(s: &str) -> Option<Placement> {
        [Placement::Unpinned, Placement::Block, Placement::Cyclic]
            .into_iter()
            .find(|p| p.name() == s)
    }

    /// The CPU of each local rank 0..np on `cores` CPUs (0..cores), or `None`
    /// when the ranks are not pinned.
    pub fn cpus(self, np: u32, cores: u32) -> Option<Vec<u32>> {
        let cores = cores.max(1);
        match self {
            Placement::Unpinned => None,
            Placement::Block => Some(
                (0..np)
                    .map(|r| (u64::from(r) * u64::from(cores) / u64::from(np)) as u32)
                    .collect(),
            ),
            Placement::Cyclic => Some((0..np).map(|r| r % cores).collect()),
        }
    }

    /// For the report: `0-1:0 2-3:1` (ranks : CPU), or `unpinned`.
    pub fn describe(self, np: u32, cores: u32) -> String {
        match self.cpus(np, cores) {
            None => "unpinned".into(),
            Some(c) => c
                .iter()
                .enumerate()
                .map(|(r, c)| format!("{r}:{c}"))
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// The placements of `--placement` (comma list of unpinned, block, cyclic).
pub fn parse_placements(s: &str) -> Result<Vec<Placement>, String> {
    let mut v = Vec::new();
    for x in list(s) {
        let p = Placement::from_name(x).ok_or_else(|| {
            format!("--placement: unknown placement '{x}' (one of unpinned, block, cyclic)")
        })?;
        if !v.contains(&p) {
            v.push(p);
        }
    }
    if v.is_empty() {
        return Err("--placement: empty list".into());
    }
    Ok(v)
}

/// The placements a launch of `np` ranks on `cores` cores runs in: `None`
/// (the launcher's own binding, one rank per core) when the ranks fit the
/// cores, else each of `placements`.
pub fn placements_for(np: u32, cores: u32, placements: &[Placement]) -> Vec<Option<Placement>> {
    if np <= cores {
        vec![None]
    } else {
        placements.iter().copied().map(Some).collect()
    }
}

/// The rank that runs the in-program placement probe with rank 0
/// (`oxbench probe=1 probe_peer=R`) in a launch of `np` ranks on `cores` CPUs
/// in `placement` (`None`: the launcher's one rank per core): rank 1 on
/// dedicated cores, else the first rank the placement pins to another CPU
/// than rank 0's (block on 2 CPUs: rank np/2; cyclic: rank 1); `None` when
/// there is no such rank or the ranks are not pinned (a spinning probe
/// sharing a CPU waits for time slices, and measures no vCPU distance).
pub fn probe_peer(np: u32, cores: u32, placement: Option<Placement>) -> Option<u32> {
    if np < 2 {
        return None;
    }
    if np <= cores {
        return Some(1);
    }
    let cpus = placement?.cpus(np, cores)?;
    cpus.iter().position(|c| *c != cpus[0]).map(|r| r as u32)
}

/// `label` measured in placement `p` (`alltoall/CHAR` -> `alltoall/CHAR/block`).
pub fn with_placement(label: &str, p: Option<Placement>) -> String {
    match p {
        Some(p) => format!("{label}/{}", p.name()),
        None => label.to_string(),
    }
}

/// A time row's test name without its placement, and the placement
/// (`alltoall/CHAR/block` -> (`alltoall/CHAR`, block)).
pub fn split_placement(test: &str) -> (&str, Option<Placement>) {
    match test.rsplit_once('/') {
        Some((base, p)) => match Placement::from_name(p) {
            Some(p) => (base, Some(p)),
            None => (test, None),
        },
        None => (test, None),
    }
}

/// The row test name of `test` measured with `v` (see the module doc).
pub fn label(test: &str, v: &Variant) -> String {
    let mut s = format!("{test}/{}", v.dtype);
    if REDUCTIONS.contains(&blocking(test)) {
        s.push('/');
        s.push_str(&v.op);
    }
    if v.inplace {
        s.push_str("/inplace");
    }
    s
}

/// A row test name of the matrix, taken apart (`alltoall/CHAR/inplace/block`,
/// `iallreduce/INT/SUM/cyclic/overlap`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Label {
    /// The `oxbench` test (`iallreduce`, `bcast`, ...).
    pub test: String,
    /// Its datatype, op and in-place flag (op `SUM` where it does not apply).
    pub variant: Variant,
    /// The overlap (percent) of a nonblocking collective, not its time.
    pub overlap: bool,
    /// The placement of an oversubscribed launch (`None`: the launcher's
    /// binding, or a matrix from before placements).
    pub placement: Option<Placement>,
}

/// Take a matrix row's test name apart; `None` for other rows.
pub fn parse_label(s: &str) -> Option<Label> {
    let mut it = s.split('/');
    let test = it.next()?.to_string();
    let dtype = it.next()?.to_string();
    if !DTYPES.iter().any(|d| d.0 == dtype) {
        return None;
    }
    let mut v = Variant {
        dtype,
        ..Variant::char()
    };
    let mut overlap = false;
    let mut placement = None;
    for part in it {
        match part {
            "inplace" => v.inplace = true,
            "overlap" => overlap = true,
            op if OPS.contains(&op) => v.op = op.to_string(),
            p => placement = Some(Placement::from_name(p)?),
        }
    }
    Some(Label {
        test,
        variant: v,
        overlap,
        placement,
    })
}

/// One set of measurements: these tests at these sizes with one variant.
#[derive(Debug, Clone, PartialEq)]
pub struct Set {
    /// What the set is for (report and progress lines).
    pub name: String,
    /// Datatype, op, in place.
    pub variant: Variant,
    /// `oxbench` tests, blocking and nonblocking.
    pub tests: Vec<String>,
    /// Sizes in bytes (whole items of the datatype).
    pub sizes: Vec<u64>,
}

/// The matrix a run measures: every set at every rank count, at each
/// placement of the rank counts past the cores.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixOpts {
    /// Rank counts.
    pub nps: Vec<u32>,
    /// Sets of measurements, in the order they run.
    pub sets: Vec<Set>,
    /// Placements of the oversubscribed rank counts ([`placements_for`]).
    pub placements: Vec<Placement>,
}

impl MatrixOpts {
    /// Measurements (test, size) of one repetition of one implementation on
    /// `cores` cores.
    pub fn measurements(&self, cores: u32) -> usize {
        let per_np: usize = self
            .sets
            .iter()
            .map(|s| {
                let t: Vec<&str> = s.tests.iter().map(String::as_str).collect();
                crate::suite::expected_measurements(&t, &s.sizes, 2).len()
            })
            .sum();
        per_np * self.launches_per_set(cores)
    }

    /// Launches of each set per repetition and implementation: one per rank
    /// count and placement.
    pub fn launches_per_set(&self, cores: u32) -> usize {
        self.nps
            .iter()
            .map(|&np| placements_for(np, cores, &self.placements).len())
            .sum()
    }
}

/// The matrix options as given on the command line (unparsed lists).
#[derive(Debug, Clone, Default)]
pub struct MatrixArgs {
    /// `--np`.
    pub np: Option<String>,
    /// `--dtypes`.
    pub dtypes: Option<String>,
    /// `--colls`.
    pub colls: Option<String>,
    /// `--sizes`.
    pub sizes: Option<String>,
    /// `--placement`.
    pub placement: Option<String>,
}

impl MatrixArgs {
    /// True if no matrix option was given.
    pub fn is_empty(&self) -> bool {
        self.np.is_none()
            && self.dtypes.is_none()
            && self.colls.is_none()
            && self.sizes.is_none()
            && self.placement.is_none()
    }
}

fn list(s: &str) -> impl Iterator<Item = &str> {
    s.split(',').map(str::trim).filter(|x| !x.is_empty())
}

/// A comma list of positive integers (`what` names the option in errors).
pub fn numbers<T: std::str::FromStr + PartialOrd + Default>(
    what: &str,
    s: &str,
) -> Result<Vec<T>, String> {
    let v = list(s)
        .map(|x| {
            x.parse::<T>()
                .ok()
                .filter(|n| *n > T::default())
                .ok_or_else(|| format!("{what}: '{x}' is not a positive integer"))
        })
        .collect::<Result<Vec<T>, String>>()?;
    if v.is_empty() {
        return Err(format!("{what}: empty list"));
    }
    Ok(v)
}

/// The reductions' datatype variants of `--dtypes` (`TYPE` or `TYPE:OP`; a
/// pair type alone means MINLOC and MAXLOC; `none`: no sweep).
pub fn parse_dtypes(s: &str) -> Result<Vec<Variant>, String> {
    if s.trim() == "none" {
        return Ok(Vec::new());
    }
    let mut v = Vec::new();
    for d in list(s) {
        let (ty, op) = match d.split_once(':') {
            Some((t, o)) => (t.to_ascii_uppercase(), Some(o.to_ascii_uppercase())),
            None => (d.to_ascii_uppercase(), None),
        };
        if !DTYPES.iter().any(|x| x.0 == ty) {
            let names: Vec<&str> = DTYPES.iter().map(|x| x.0).collect();
            return Err(format!(
                "--dtypes: unknown datatype '{ty}' (one of {})",
                names.join(" ")
            ));
        }
        let ops: Vec<String> = match op {
            Some(o) if OPS.contains(&o.as_str()) => vec![o],
            Some(o) => {
                return Err(format!(
                    "--dtypes: unknown op '{o}' (one of {})",
                    OPS.join(" ")
                ))
            }
            None if is_pair(&ty) => vec!["MINLOC".into(), "MAXLOC".into()],
            None => vec!["SUM".into()],
        };
        for op in ops {
            let pair_op = op == "MINLOC" || op == "MAXLOC";
            if pair_op != is_pair(&ty) {
                return Err(format!(
                    "--dtypes: {ty}:{op}: MINLOC and MAXLOC need a pair type, and a pair type needs them"
                ));
            }
            v.push(Variant {
                dtype: ty.clone(),
                op,
                inplace: false,
            });
        }
    }
    Ok(v)
}

/// Every test (blocking and nonblocking) of these blocking collectives.
fn both_forms(colls: &[&str]) -> Vec<String> {
    colls
        .iter()
        .map(|c| c.to_string())
        .chain(colls.iter().map(|c| format!("i{c}")))
        .collect()
}

/// The sets of a run: every collective with `MPI_CHAR` out of place at
/// `ALL_SIZES`; the ones with an in-place form in place; the reductions
/// with each datatype variant. `colls` keeps only those tests, `sizes`
/// replaces every set's sizes (whole items of the datatype only).
pub fn plan(dtypes: &[Variant], colls: Option<&[String]>, sizes: Option<&[u64]>) -> Vec<Set> {
    let inplace: Vec<&str> = BLOCKING
        .iter()
        .copied()
        .filter(|c| !NO_INPLACE.contains(c))
        .collect();
    let mut sets = vec![
        Set {
            name: "every collective, MPI_CHAR".into(),
            variant: Variant::char(),
            tests: both_forms(&BLOCKING),
            sizes: ALL_SIZES.to_vec(),
        },
        Set {
            name: "in place, MPI_CHAR".into(),
            variant: Variant {
                inplace: true,
                ..Variant::char()
            },
            tests: both_forms(&inplace),
            sizes: SWEEP_SIZES.to_vec(),
        },
    ];
    for v in dtypes {
        sets.push(Set {
            name: format!("reductions, MPI_{} {}", v.dtype, v.op),
            variant: v.clone(),
            tests: both_forms(&REDUCTIONS),
            sizes: SWEEP_SIZES.to_vec(),
        });
    }
    for s in &mut sets {
        if let Some(c) = colls {
            s.tests.retain(|t| c.contains(t));
        }
        if let Some(z) = sizes {
            s.sizes = z.to_vec();
        }
        let item = s.variant.item();
        s.sizes.retain(|z| *z >= item && z % item == 0);
    }
    sets.retain(|s| !s.tests.is_empty() && !s.sizes.is_empty());
    sets
}

/// Set up `c` for `--collectives` in its mode: the matrix, the output
/// directory, repetitions and budgets.
pub fn configure(c: &mut Config, a: &MatrixArgs, target: &Path, root: &Path) -> Result<(), String> {
    let smoke = c.mode == Mode::Smoke;
    let nps: Vec<u32> = match &a.np {
        Some(s) => numbers("--np", s)?,
        None if smoke => vec![2],
        None => vec![2, 4, 8],
    };
    let dtypes = parse_dtypes(a.dtypes.as_deref().unwrap_or(if smoke {
        "INT,DOUBLE_INT:MAXLOC"
    } else {
        DEFAULT_DTYPES
    }))?;
    let colls: Option<Vec<String>> = match &a.colls {
        Some(s) => {
            let v: Vec<String> = list(s).map(str::to_string).collect();
            if let Some(bad) = v.iter().find(|t| !BLOCKING.contains(&blocking(t))) {
                return Err(format!(
                    "--colls: unknown collective '{bad}' (one of {}, each also with an i in front)",
                    BLOCKING.join(" ")
                ));
            }
            Some(v)
        }
        None => None,
    };
    let sizes: Option<Vec<u64>> = match &a.sizes {
        Some(s) => Some(numbers("--sizes", s)?),
        None if smoke => Some(vec![16]),
        None => None,
    };
    let sets = plan(&dtypes, colls.as_deref(), sizes.as_deref());
    if sets.is_empty() {
        return Err(
            "--collectives: nothing to measure (check --colls, --dtypes and --sizes)".into(),
        );
    }
    let placements = match &a.placement {
        Some(s) => parse_placements(s)?,
        None => DEFAULT_PLACEMENTS.to_vec(),
    };
    c.matrix = Some(MatrixOpts {
        nps,
        sets,
        placements,
    });
    c.mpi4py = None;
    // Each sample fills its share of the measurement's budget (a fixed count of
    // sub-microsecond calls would be at the mercy of noise and leave the budget unused).
    c.fill_budget = true;
    match c.mode {
        Mode::Smoke => {
            (c.reps, c.samples, c.scale, c.op_budget) = (1, 3, 0.02, 0.02);
            c.out = target.join("smoke-collectives");
            c.budget = None;
        }
        Mode::Quick => {
            (c.reps, c.samples, c.scale, c.op_budget) = (3, 5, 0.1, 0.1);
            c.out = root.join("docs").join("benchmarks").join("collectives");
            // np=4 and 8 run in each placement (two by default): about 115 min
            c.budget = Some(Duration::from_secs(120 * 60));
        }
        Mode::Full => {
            (c.reps, c.samples, c.scale, c.op_budget) = (5, 7, 0.3, 0.2);
            c.out = root.join("docs").join("benchmarks").join("collectives");
            c.budget = Some(Duration::from_secs(330 * 60));
        }
    }
    Ok(())
}

/// Rename the rows a set just produced in placement `p` (`allreduce` ->
/// `allreduce/INT/SUM`, `iallreduce/overlap` -> `iallreduce/INT/SUM/block/overlap`).
pub fn relabel(rows: &mut [crate::stats::Row], v: &Variant, p: Option<Placement>) {
    for r in rows {
        r.test = match r.test.strip_suffix("/overlap") {
            Some(t) => format!("{}/overlap", with_placement(&label(t, v), p)),
            None => with_placement(&label(&r.test, v), p),
        };
    }
}

/// Run the matrix: per repetition, per rank count, placement (rank counts past
/// the cores, [`placements_for`]) and set, every implementation in turn. No set starts once the run's budget is spent (the
/// first set always runs), and no repetition starts that would likely end
/// past it. Returns the repetitions started.
pub fn run(runner: &mut Runner, cfg: &Config, m: &MatrixOpts, ready: &[Prepared]) -> u32 {
    let impls: Vec<&Prepared> = ready.iter().filter(|p| !p.imp.pt2pt_only).collect();
    let cores = runner.cores;
    let per = m.measurements(cores);
    let launches = m.sets.len() * m.launches_per_set(cores) * impls.len() * cfg.reps as usize;
    eprintln!(
        "bench: collectives matrix: {} set(s) x np {:?} (past {cores} ranks in placements {}): {per} measurements per implementation and repetition, {} implementation(s), {} repetition(s), about {:.1} min{}",
        m.sets.len(),
        m.nps,
        m.placements.iter().map(|p| p.name()).collect::<Vec<_>>().join(","),
        impls.len(),
        cfg.reps,
        estimate_s(per * impls.len() * cfg.reps as usize, cfg.op_budget, launches) / 60.0,
        cfg.budget
            .map(|b| format!(" (budget {} min)", b.as_secs() / 60))
            .unwrap_or_default()
    );
    let start = Instant::now();
    let spent = |b: Option<Duration>| b.is_some_and(|b| start.elapsed() > b);
    let mut reps = 0;
    let mut first = true;
    // every launch probes the vCPU placement inside oxbench, before every sample
    runner.probe_all = true;
    'reps: for rep in 0..cfg.reps {
        let t = Instant::now();
        reps += 1;
        for &np in &m.nps {
            for placement in placements_for(np, cores, &m.placements) {
                let at = placement
                    .map(|p| format!(" {}", p.name()))
                    .unwrap_or_default();
                for set in &m.sets {
                    if spent(cfg.budget) && !first {
                        runner.res.notes.push(format!(
                            "time budget of {} s spent: stopped in repetition {rep} before np={np}{at} '{}' (later sets and repetitions not measured)",
                            cfg.budget.map(|b| b.as_secs()).unwrap_or(0),
                            set.name
                        ));
                        break 'reps;
                    }
                    first = false;
                    let tests: Vec<&str> = set.tests.iter().map(String::as_str).collect();
                    for p in &impls {
                        eprintln!(
                            "bench: rep {} / {}: np={np}{at} {}: {}",
                            rep + 1,
                            cfg.reps,
                            set.name,
                            p.imp.name
                        );
                        runner.launch_opts = set.variant.opts();
                        runner.launch_opts.push(clock_opt(np, cores).into());
                        runner.placement = placement;
                        let (n0, f0) = (runner.res.rows.len(), runner.res.failures.len());
                        runner.oxbench(rep, p, np, &tests, &set.sizes);
                        relabel(&mut runner.res.rows[n0..], &set.variant, placement);
                        for f in &mut runner.res.failures[f0..] {
                            f.push_str(&format!(" [{}{at}]", set.variant.describe()));
                        }
                    }
                }
            }
        }
        if let Some(note) = cfg.stop_after(rep, start.elapsed(), t.elapsed()) {
            runner.res.notes.push(note);
            break;
        }
    }
    runner.launch_opts.clear();
    runner.placement = None;
    runner.probe_all = false;
    reps
}

/// `oxbench`'s clock for `np` ranks on `cores` cores. On dedicated cores
/// each rank times its own calls (`clock=rank`, as the standard suites, the
/// slowest rank's time). Oversubscribed, a rank's own time misses what a
/// collective leaves to the barrier after it (a root that sends eagerly
/// returns at once; receivers scheduled later find the data there: Open MPI's
/// scatterv at np=4 on 2 cores showed 0.15 us on every rank while each
/// scatterv + barrier cycle took 8 us longer than a barrier alone), so each
/// iteration is timed from the first rank's entry to the last rank's return
/// (`clock=span`).
pub fn clock_opt(np: u32, cores: u32) -> &'static str {
    if np > cores {
        "clock=span"
    } else {
        "clock=rank"
    }
}

/// Rough wall time in seconds of `measurements` measurements under a
/// per-measurement budget of `op_budget` s in `launches` launches: each
/// measurement takes its budget plus about a fifth and 0.05 s (warm-up, at
/// least 3 samples, the overlap run of the nonblocking ones: the smoke
/// matrix took 0.125 s per measurement at a 0.02 s budget on the busy
/// 2-core VM), each launch about a second (start-up at up to 8
/// oversubscribed ranks, placement probe).
pub fn estimate_s(measurements: usize, op_budget: f64, launches: usize) -> f64 {
    measurements as f64 * (op_budget * 1.2 + 0.05) + launches as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip() {
        let v = Variant {
            dtype: "DOUBLE_INT".into(),
            op: "MAXLOC".into(),
            inplace: true,
        };
        assert_eq!(
            label("iallreduce", &v),
            "iallreduce/DOUBLE_INT/MAXLOC/inplace"
        );
        assert_eq!(label("bcast", &Variant::char()), "bcast/CHAR");
        let l = parse_label("iallreduce/DOUBLE_INT/MAXLOC/inplace/overlap").unwrap();
        assert_eq!(
            (l.test.as_str(), &l.variant, l.overlap),
            ("iallreduce", &v, true)
        );
        let l = parse_label("alltoallw/CHAR").unwrap();
        assert_eq!(l.variant, Variant::char());
        assert!(!l.overlap);
        assert!(parse_label("allreduce").is_none(), "default-suite rows");
        assert!(parse_label("lat/8").is_none());
        assert!(parse_label("allreduce/CHAR/BOGUS").is_none());
        let mut rows = vec![crate::stats::sample_row(
            0,
            "x",
            "iscan/overlap",
            2,
            8,
            50.0,
            "%",
        )];
        relabel(&mut rows, &Variant::char(), None);
        assert_eq!(rows[0].test, "iscan/CHAR/SUM/overlap");
        // in a placement: the placement goes before /overlap
        let mut rows = vec![crate::stats::sample_row(
            0,
            "x",
            "iscan/overlap",
            4,
            8,
            50.0,
            "%",
        )];
        relabel(&mut rows, &Variant::char(), Some(Placement::Cyclic));
        assert_eq!(rows[0].test, "iscan/CHAR/SUM/cyclic/overlap");
        let l = parse_label(&rows[0].test).unwrap();
        assert_eq!(
            (l.test.as_str(), l.overlap, l.placement),
            ("iscan", true, Some(Placement::Cyclic))
        );
        let l = parse_label("alltoall/CHAR/inplace/block").unwrap();
        assert_eq!(
            (l.variant.inplace, l.placement),
            (true, Some(Placement::Block))
        );
        assert_eq!(parse_label("alltoall/CHAR").unwrap().placement, None);
        assert_eq!(
            split_placement("alltoall/CHAR/inplace/block"),
            ("alltoall/CHAR/inplace", Some(Placement::Block))
        );
        assert_eq!(
            split_placement("allreduce/INT/SUM"),
            ("allreduce/INT/SUM", None)
        );
    }

    #[test]
    fn dtype_lists() {
        let v = parse_dtypes("int,2INT,DOUBLE_INT:maxloc,FLOAT:MAX").unwrap();
        let names: Vec<String> = v.iter().map(|x| format!("{}:{}", x.dtype, x.op)).collect();
        assert_eq!(
            names,
            [
                "INT:SUM",
                "2INT:MINLOC",
                "2INT:MAXLOC",
                "DOUBLE_INT:MAXLOC",
                "FLOAT:MAX"
            ]
        );
        assert!(parse_dtypes("none").unwrap().is_empty());
        assert!(parse_dtypes("QUAD")
            .unwrap_err()
            .contains("unknown datatype"));
        assert!(parse_dtypes("INT:MINLOC")
            .unwrap_err()
            .contains("pair type"));
        assert!(parse_dtypes("2INT:SUM").unwrap_err().contains("pair type"));
        assert!(parse_dtypes("INT:XOR").unwrap_err().contains("unknown op"));
        assert_eq!(parse_dtypes(DEFAULT_DTYPES).unwrap().len(), 4 + 5 * 2);
    }

    #[test]
    fn the_default_plan_covers_the_goals() {
        let d = parse_dtypes(DEFAULT_DTYPES).unwrap();
        let sets = plan(&d, None, None);
        assert_eq!(sets.len(), 2 + 14);
        // every collective, blocking and nonblocking, 4 B .. 1 MiB
        assert_eq!(sets[0].tests.len(), 32);
        assert!(sets[0].tests.iter().any(|t| t == "ialltoallw"));
        assert_eq!(
            (sets[0].sizes[0], *sets[0].sizes.last().unwrap()),
            (4, 1 << 20)
        );
        // in place: not bcast or barrier
        assert!(sets[1].variant.inplace);
        assert_eq!(sets[1].tests.len(), 28);
        assert!(!sets[1].tests.iter().any(|t| t.ends_with("bcast")));
        // pair types with both MINLOC and MAXLOC, reductions only
        assert!(sets
            .iter()
            .any(|s| s.variant.dtype == "LONG_INT" && s.variant.op == "MAXLOC"));
        assert!(sets[2..].iter().all(|s| s.tests.len() == 10));
        // sizes are whole items: 16-byte pairs start at 16 B
        let m = MatrixOpts {
            nps: vec![2, 4, 8],
            sets,
            placements: DEFAULT_PLACEMENTS.to_vec(),
        };
        // 30 x 10 + 2 barriers, 28 x 3, 14 x 10 x 3, at np=2 once, at np=4
        // and 8 (past the 2 cores) in both placements
        assert_eq!(m.measurements(2), (302 + 84 + 420) * 5);
        assert_eq!(m.launches_per_set(2), 5);
        // on 8 cores no rank count is oversubscribed: no placements
        assert_eq!(m.measurements(8), (302 + 84 + 420) * 3);
    }

    #[test]
    fn restricted_plans() {
        let d = parse_dtypes("DOUBLE_INT").unwrap();
        let colls = ["allreduce".to_string(), "ibcast".to_string()];
        let sets = plan(&d, Some(&colls[..]), Some(&[4, 8, 32][..]));
        let got: Vec<(String, Vec<String>, Vec<u64>)> = sets
            .iter()
            .map(|s| (label("x", &s.variant), s.tests.clone(), s.sizes.clone()))
            .collect();
        let t = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            got,
            vec![
                (
                    "x/CHAR".to_string(),
                    t(&["allreduce", "ibcast"]),
                    vec![4, 8, 32]
                ),
                (
                    "x/CHAR/inplace".to_string(),
                    t(&["allreduce"]),
                    vec![4, 8, 32]
                ),
                ("x/DOUBLE_INT".to_string(), t(&["allreduce"]), vec![32]),
                ("x/DOUBLE_INT".to_string(), t(&["allreduce"]), vec![32]),
            ]
        );
        assert!(plan(&d, Some(&["ibcast".to_string()][..]), Some(&[8][..]))
            .iter()
            .all(|s| !s.variant.inplace && s.variant.dtype == "CHAR"));
    }

    /// The CPU of each local rank in each placement, and which rank counts
    /// run in placements.
    #[test]
    fn placement_masks() {
        assert_eq!(Placement::Block.cpus(4, 2), Some(vec![0, 0, 1, 1]));
        assert_eq!(Placement::Cyclic.cpus(4, 2), Some(vec![0, 1, 0, 1]));
        assert_eq!(
            Placement::Block.cpus(8, 2),
            Some(vec![0, 0, 0, 0, 1, 1, 1, 1])
        );
        assert_eq!(
            Placement::Cyclic.cpus(8, 2),
            Some(vec![0, 1, 0, 1, 0, 1, 0, 1])
        );
        // odd counts: block keeps the first ceil(np/2) ranks together
        assert_eq!(Placement::Block.cpus(3, 2), Some(vec![0, 0, 1]));
        assert_eq!(Placement::Cyclic.cpus(3, 2), Some(vec![0, 1, 0]));
        assert_eq!(
            Placement::Block.cpus(8, 4),
            Some(vec![0, 0, 1, 1, 2, 2, 3, 3])
        );
        assert_eq!(Placement::Unpinned.cpus(4, 2), None);
        assert_eq!(Placement::Block.describe(4, 2), "0:0 1:0 2:1 3:1");
        assert_eq!(Placement::Cyclic.describe(4, 2), "0:0 1:1 2:0 3:1");
        assert_eq!(Placement::Unpinned.describe(4, 2), "unpinned");
        assert_eq!(
            parse_placements("cyclic, block,cyclic").unwrap(),
            [Placement::Cyclic, Placement::Block]
        );
        assert!(parse_placements("spread")
            .unwrap_err()
            .contains("unknown placement"));
        assert!(parse_placements(",").is_err());
        let all = [Placement::Unpinned, Placement::Block];
        assert_eq!(placements_for(2, 2, &all), [None]);
        assert_eq!(
            placements_for(4, 2, &all),
            [Some(Placement::Unpinned), Some(Placement::Block)]
        );
        assert_eq!(
            with_placement("alltoall/CHAR", Some(Placement::Cyclic)),
            "alltoall/CHAR/cyclic"
        );
    }

    /// The rank that probes with rank 0 runs on another CPU: rank 1 on
    /// dedicated cores and in cyclic, the first rank of CPU 1 in block; none
    /// unpinned or alone.
    #[test]
    fn the_probe_peer_is_on_another_cpu() {
        assert_eq!(probe_peer(2, 2, None), Some(1));
        assert_eq!(probe_peer(1, 2, None), None);
        assert_eq!(probe_peer(4, 2, Some(Placement::Block)), Some(2));
        assert_eq!(probe_peer(8, 2, Some(Placement::Block)), Some(4));
        assert_eq!(probe_peer(3, 2, Some(Placement::Block)), Some(2));
        assert_eq!(probe_peer(8, 2, Some(Placement::Cyclic)), Some(1));
        assert_eq!(probe_peer(4, 2, Some(Placement::Unpinned)), None);
        assert_eq!(probe_peer(4, 2, None), None);
        assert_eq!(probe_peer(4, 1, Some(Placement::Block)), None);
    }

    /// Oversubscribed launches go through the pin wrapper with their
    /// placement's CPU list, rows carry the placement, and the binding each
    /// rank saw is checked: a wrapper that pins the wrong ranks (the fake's
    /// `swap`) makes a failure and leaves no rows.
    #[test]
    fn placements_pin_each_launch_and_check_the_binding() {
        let dir = std::env::temp_dir().join(format!("oxmpi-bench-place-{}", std::process::id()));
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cfg = crate::config::parse_args(
            &a(&[
                "--collectives",
                "--smoke",
                "--np",
                "2,4",
                "--colls",
                "allreduce",
                "--sizes",
                "16",
                "--dtypes",
                "none",
                "--placement",
                "block,cyclic",
                // the fake never hangs here; a busy machine may slow its shell
                "--timeout",
                "60",
            ]),
            &dir,
        )
        .unwrap();
        let m = cfg.matrix.clone().unwrap();
        assert_eq!(m.placements, [Placement::Block, Placement::Cyclic]);
        let (p, probes) = crate::suite::fake_implementation(&dir);
        let mut r = Runner::new(&cfg, probes, crate::suite::Results::default());
        r.cores = 2;
        run(&mut r, &cfg, &m, std::slice::from_ref(&p));
        let args = std::fs::read_to_string(dir.join("args")).unwrap_or_default();
        let mut got: Vec<String> = r
            .res
            .rows
            .iter()
            .map(|x| format!("{} np={}", x.test, x.np))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                "allreduce/CHAR/SUM np=2",
                "allreduce/CHAR/SUM/block np=4",
                "allreduce/CHAR/SUM/cyclic np=4",
                "allreduce/CHAR/SUM/inplace np=2",
                "allreduce/CHAR/SUM/inplace/block np=4",
                "allreduce/CHAR/SUM/inplace/cyclic np=4",
            ]
        );
        assert!(r.res.failures.is_empty(), "{:?}", r.res.failures);
        let lines: Vec<&str> = args.lines().collect();
        assert_eq!(lines.len(), 6, "{args}");
        // np=2 runs the program itself; np=4 the wrapper with the CPU list
        assert!(lines[0].contains("-n 2 -- ") && lines[0].contains("/oxbench allreduce"));
        assert!(lines[2].contains("-n 4 -- ") && lines[2].contains("/no-such-probe 0,0,1,1 "));
        assert!(lines[4].contains("/no-such-probe 0,1,0,1 "), "{args}");
        // every launch probes inside oxbench: rank 0 with rank 1, in block with rank 2
        // (rank 1 shares CPU 0 there)
        assert!(lines.iter().all(|l| l.contains(" probe=1 ")), "{args}");
        assert!(!lines[0].contains("probe_peer") && !lines[4].contains("probe_peer"));
        assert!(lines[2].contains(" probe_peer=2 "), "{args}");
        // the fake's probes (100 ns) classify every row near, the overlaps too
        assert!(
            r.res.rows.iter().all(|x| x.placement() == Some("near")),
            "{:?}",
            r.res.rows
        );
        let seen: Vec<String> = r
            .res
            .probe_seen
            .iter()
            .map(|b| {
                format!(
                    "{} {} {} {} {}",
                    b.np,
                    b.placement.map(|p| p.name()).unwrap_or("-"),
                    b.ranks,
                    b.cpus,
                    b.count
                )
            })
            .collect();
        assert_eq!(
            seen,
            ["2 - 0,1 0,1 2", "4 block 0,2 0,1 2", "4 cyclic 0,1 0,1 2"]
        );
        let b: Vec<(String, bool)> = r
            .res
            .placed_bindings
            .iter()
            .map(|b| {
                (
                    format!("{} {} {}", b.np, b.placement.name(), b.observed),
                    b.matches(),
                )
            })
            .collect();
        assert_eq!(
            b,
            [
                ("4 block 0:0 1:0 2:1 3:1".to_string(), true),
                ("4 cyclic 0:0 1:1 2:0 3:1".to_string(), true)
            ]
        );
        // probes that disagree within a measurement: mixed, in neither placement
        std::fs::write(dir.join("probe"), "95.0;430.0").unwrap();
        let (p, probes) = crate::suite::fake_implementation(&dir);
        let mut r = Runner::new(&cfg, probes, crate::suite::Results::default());
        r.cores = 2;
        run(&mut r, &cfg, &m, std::slice::from_ref(&p));
        assert!(!r.res.rows.is_empty());
        assert!(
            r.res.rows.iter().all(|x| x.placement() == Some("mixed")),
            "{:?}",
            r.res.rows
        );
        assert!(!r.probe_all, "the runner probes only p2p tests again");
        // the wrapper pins the wrong ranks: failures, no rows, the binding shown
        std::fs::write(dir.join("swap"), "").unwrap();
        let (p, probes) = crate::suite::fake_implementation(&dir);
        let mut r = Runner::new(&cfg, probes, crate::suite::Results::default());
        r.cores = 2;
        run(&mut r, &cfg, &m, &[p]);
        let _ = std::fs::remove_dir_all(&dir);
        assert!(r.res.rows.iter().all(|x| x.np == 2), "{:?}", r.res.rows);
        assert_eq!(r.res.failures.len(), 4, "{:?}", r.res.failures);
        assert!(
            r.res.failures[0].contains(
                "binding observed 0:1 1:1 2:0 3:0, expected 0:0 1:0 2:1 3:1: its 1 result(s) not recorded"
            ),
            "{:?}",
            r.res.failures
        );
        assert!(r.res.placed_bindings.iter().all(|b| !b.matches()));
    }

    /// Per-rank times on dedicated cores, spans over the ranks once they
    /// outnumber the cores.
    #[test]
    fn oversubscribed_runs_time_the_span_over_ranks() {
        assert_eq!(clock_opt(2, 2), "clock=rank");
        assert_eq!(clock_opt(4, 8), "clock=rank");
        assert_eq!(clock_opt(3, 2), "clock=span");
        assert_eq!(clock_opt(8, 2), "clock=span");
    }

    /// The whole loop on a fake launcher: every set runs with its options,
    /// rows are named by variant, overlaps recorded, barrier once.
    #[test]
    fn sets_run_with_their_options_and_rows_name_their_variant() {
        let dir = std::env::temp_dir().join(format!("oxmpi-bench-matrix-{}", std::process::id()));
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let cfg = crate::config::parse_args(
            &a(&[
                "--collectives",
                "--smoke",
                "--colls",
                "allreduce,iallreduce,barrier",
                "--sizes",
                "16",
                "--dtypes",
                "DOUBLE_INT:MAXLOC",
                "--timeout",
                "5",
            ]),
            &dir,
        )
        .unwrap();
        let (p, probes) = crate::suite::fake_implementation(&dir);
        let mut r = Runner::new(&cfg, probes, crate::suite::Results::default());
        let m = cfg.matrix.clone().unwrap();
        let reps = run(&mut r, &cfg, &m, &[p]);
        let args = std::fs::read_to_string(dir.join("args")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(reps, 1);
        let mut got: Vec<String> = r
            .res
            .rows
            .iter()
            .map(|x| format!("{} {}", x.test, x.size))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                "allreduce/CHAR/SUM 16",
                "allreduce/CHAR/SUM/inplace 16",
                "allreduce/DOUBLE_INT/MAXLOC 16",
                "barrier/CHAR 0",
                "iallreduce/CHAR/SUM 16",
                "iallreduce/CHAR/SUM/inplace 16",
                "iallreduce/CHAR/SUM/inplace/overlap 16",
                "iallreduce/CHAR/SUM/overlap 16",
                "iallreduce/DOUBLE_INT/MAXLOC 16",
                "iallreduce/DOUBLE_INT/MAXLOC/overlap 16",
            ]
        );
        assert!(r.res.failures.is_empty(), "{:?}", r.res.failures);
        let lines: Vec<&str> = args.lines().collect();
        assert_eq!(lines.len(), 3, "one launch per set: {args}");
        // every launch fills its budget by calibration
        assert!(
            lines
                .iter()
                .all(|l| l.contains("budget=0.02") && l.contains("fill=1")),
            "{args}"
        );
        assert!(
            lines[0].contains("allreduce,barrier,iallreduce")
                && lines[0].contains("dtype=CHAR op=SUM inplace=0")
        );
        assert!(lines[1].contains("inplace=1") && !lines[1].contains("barrier"));
        let clock = clock_opt(2, crate::suite::cores());
        assert!(lines.iter().all(|l| l.contains(clock)), "{args}");
        assert!(
            lines[2].contains("dtype=DOUBLE_INT op=MAXLOC inplace=0"),
            "{args}"
        );
        let ov = r
            .res
            .rows
            .iter()
            .find(|x| x.test.ends_with("/overlap"))
            .unwrap();
        assert_eq!((ov.median, ov.unit.as_str()), (50.0, "%"));
    }

    #[test]
    fn command_line() {
        let root = Path::new("/r");
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let c = crate::config::parse_args(&a(&["--collectives"]), root).unwrap();
        let m = c.matrix.as_ref().unwrap();
        assert_eq!(m.nps, vec![2, 4, 8]);
        assert_eq!(c.out, Path::new("/r/docs/benchmarks/collectives"));
        assert!(c.mpi4py.is_none() && c.budget.is_some());
        assert!(c.fill_budget, "the matrix calibrates its iterations");
        assert!(
            !crate::config::parse_args(&a(&[]), root)
                .unwrap()
                .fill_budget
        );
        // the default matrix fits its budget by the estimate
        let est = estimate_s(
            m.measurements(2) * 3 * c.reps as usize,
            c.op_budget,
            m.sets.len() * m.launches_per_set(2) * 3 * c.reps as usize,
        );
        assert!(est < c.budget.unwrap().as_secs_f64(), "{est}");
        assert_eq!(m.placements, DEFAULT_PLACEMENTS);
        let s = crate::config::parse_args(
            &a(&[
                "--collectives",
                "--smoke",
                "--np",
                "2,4",
                "--colls",
                "ialltoallw,alltoallv",
            ]),
            root,
        )
        .unwrap();
        let m = s.matrix.unwrap();
        assert_eq!(m.nps, vec![2, 4]);
        assert!(s.out.starts_with("/r/target"));
        assert_eq!(m.sets[0].sizes, vec![16]);
        assert!(crate::config::parse_args(&a(&["--np", "2"]), root)
            .unwrap_err()
            .contains("one of"));
        assert!(crate::config::parse_args(&a(&["--collectives", "--np", "0"]), root).is_err());
        assert!(
            crate::config::parse_args(&a(&["--collectives", "--colls", "allfoo"]), root)
                .unwrap_err()
                .contains("unknown collective")
        );
        assert!(crate::config::parse_args(
            &a(&["--collectives", "--sizes", "1", "--dtypes", "DOUBLE"]),
            root
        )
        .is_ok());
        assert!(crate::config::parse_args(
            &a(&[
                "--collectives",
                "--colls",
                "allreduce",
                "--sizes",
                "2",
                "--dtypes",
                "none"
            ]),
            root
        )
        .is_ok());
    }
}
