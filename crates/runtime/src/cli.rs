//! Command-line personality: turns `mpirun`/`mpiexec` argv into a typed [`JobSpec`].
//!
//! The parser is table driven (option name → arity). Open MPI's single-dash long forms
//! (`-np`, `-mca`, `-host`, ...) are accepted; option parsing stops at the program name, and
//! everything after it up to a lone `:` belongs to the program (MPMD: `-n 2 a : -n 2 b`).

use crate::error::{Result, RuntimeError};
use std::path::PathBuf;
use std::time::Duration;

/// How ranks are distributed over the nodes of the allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapBy {
    /// Fill each node's slots before moving to the next node (the default).
    Slot,
    /// Round-robin over nodes.
    Node,
    /// Like `Slot`, one rank per core.
    Core,
}

/// Whether each rank is bound to a processor set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindTo {
    /// Open MPI's default: bind each rank to a core when the job has at most 2 ranks and
    /// no node is oversubscribed (two ranks spinning on one core cost whole timeslices),
    /// otherwise no binding.
    Default,
    /// No binding.
    None,
    /// Bind each rank to one core (round-robin over the node's cores by local rank).
    Core,
}

/// Which ranks receive `mpirun`'s stdin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdinTarget {
    /// Only this rank (default rank 0).
    Rank(usize),
    /// Every rank gets a copy.
    All,
    /// Nobody; every rank reads `/dev/null`.
    None,
}

/// A `-x` directive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvDirective {
    /// `-x VAR`: copy `VAR` from mpirun's environment.
    Forward(String),
    /// `-x VAR=value`.
    Set(String, String),
}

/// One application context (one program of an MPMD command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppSpec {
    /// `-n`: number of ranks; `None` means "as many as slots" (or `-N` per node).
    pub np: Option<usize>,
    /// Program and its arguments.
    pub argv: Vec<String>,
    /// `-x` directives (global ones are copied into every context).
    pub env: Vec<EnvDirective>,
    /// `--wdir`.
    pub wdir: Option<PathBuf>,
}

/// The fully parsed command line of one job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    /// Application contexts, in rank order.
    pub apps: Vec<AppSpec>,
    /// `-N`: ranks per node.
    pub per_node: Option<usize>,
    /// `--host` entries, in order (`name` or `name:slots`).
    pub hosts: Vec<String>,
    /// `--hostfile`.
    pub hostfile: Option<PathBuf>,
    /// `--oversubscribe` (Some(true)) / `--nooversubscribe` (Some(false)).
    pub oversubscribe: Option<bool>,
    /// `--map-by`.
    pub map_by: MapBy,
    /// `--bind-to`.
    pub bind_to: BindTo,
    /// `--report-bindings`.
    pub report_bindings: bool,
    /// `--prefix`.
    pub prefix: Option<PathBuf>,
    /// `--mca k v` pairs, duplicates removed (conflicts are an error).
    pub mca: Vec<(String, String)>,
    /// `--tune` files, in order.
    pub tune: Vec<PathBuf>,
    /// `--tag-output`.
    pub tag_output: bool,
    /// `--display-allocation` (also `--display allocation`).
    pub display_allocation: bool,
    /// `--display-map` (also `--display map`).
    pub display_map: bool,
    /// Hydra's `-l` / `-prepend-rank`: lines start with `[rank] `.
    pub prepend_rank: bool,
    /// `--timestamp-output`.
    pub timestamp_output: bool,
    /// `--output-filename DIR`.
    pub output_filename: Option<PathBuf>,
    /// `--timeout`.
    pub timeout: Option<Duration>,
    /// `--stdin`.
    pub stdin: StdinTarget,
    /// `--profile[=DIR]`: the job profile's directory (also passed to the ranks as
    /// `mpi_profile`).
    pub profile: Option<PathBuf>,
    /// `--restart N`: relaunch a failed job up to N times (`None`: never; the ranks get
    /// `OXMPI_RESTART_COUNT` only with this option).
    pub restart: Option<usize>,
    /// `--report-uri W`: mpirun serves the names of its ranks and of other jobs and
    /// writes the server's URI to `W` (`-` standard output, `+` standard error, else a
    /// file).
    pub report_uri: Option<String>,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Run a job.
    Run(Box<JobSpec>),
    /// `--help`.
    Help,
    /// `--version`.
    Version,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Opt {
    Np,
    PerNode,
    Host,
    Hostfile,
    Oversubscribe,
    NoOversubscribe,
    MapBy,
    BindTo,
    ReportBindings,
    Export,
    Prefix,
    Mca,
    Tune,
    TagOutput,
    TimestampOutput,
    OutputFilename,
    Timeout,
    Wdir,
    Stdin,
    Version,
    Help,
    AllowRoot,
    PrependRank,
    DisplayAllocation,
    DisplayMap,
    Display,
    SetEnv,
    EnvList,
    Profile,
    WithFt,
    EnableRecovery,
    Restart,
    OmpiServer,
    ReportUri,
}

/// The job profile's directory when `--profile` names none.
pub const DEFAULT_PROFILE_DIR: &str = "oxmpi-profile";

/// (spelling without leading dashes, option, number of arguments)
const LONG: &[(&str, Opt, usize)] = &[
    ("n", Opt::Np, 1),
    ("np", Opt::Np, 1),
    ("c", Opt::Np, 1),
    ("npernode", Opt::PerNode, 1),
    ("host", Opt::Host, 1),
    ("hosts", Opt::Host, 1),
    ("hostfile", Opt::Hostfile, 1),
    ("machinefile", Opt::Hostfile, 1),
    ("oversubscribe", Opt::Oversubscribe, 0),
    ("nooversubscribe", Opt::NoOversubscribe, 0),
    ("map-by", Opt::MapBy, 1),
    ("bind-to", Opt::BindTo, 1),
    ("report-bindings", Opt::ReportBindings, 0),
    ("prefix", Opt::Prefix, 1),
    ("mca", Opt::Mca, 2),
    ("omca", Opt::Mca, 2),
    ("tune", Opt::Tune, 1),
    ("tag-output", Opt::TagOutput, 0),
    ("timestamp-output", Opt::TimestampOutput, 0),
    ("output-filename", Opt::OutputFilename, 1),
    ("timeout", Opt::Timeout, 1),
    ("wdir", Opt::Wdir, 1),
    ("wd", Opt::Wdir, 1),
    ("stdin", Opt::Stdin, 1),
    ("version", Opt::Version, 0),
    ("help", Opt::Help, 0),
    ("allow-run-as-root", Opt::AllowRoot, 0),
    ("display-allocation", Opt::DisplayAllocation, 0),
    ("display-map", Opt::DisplayMap, 0),
    ("display", Opt::Display, 1),
    ("profile", Opt::Profile, 0),
    // Fault tolerance (Open MPI 5's spellings) and restart.
    ("with-ft", Opt::WithFt, 1),
    ("enable-recovery", Opt::EnableRecovery, 0),
    ("restart", Opt::Restart, 1),
    ("ompi-server", Opt::OmpiServer, 1),
    ("report-uri", Opt::ReportUri, 1),
    // Hydra (MPICH mpiexec) spellings.
    ("f", Opt::Hostfile, 1),
    ("ppn", Opt::PerNode, 1),
    ("genv", Opt::SetEnv, 2),
    ("env", Opt::SetEnv, 2),
    ("genvlist", Opt::EnvList, 1),
    ("envlist", Opt::EnvList, 1),
    ("prepend-rank", Opt::PrependRank, 0),
    ("l", Opt::PrependRank, 0),
];

/// Single-letter options (`-n 4`, `-N 2`, `-H h`, `-x V`, `-c 4`, `-h`, `-V`).
const SHORT: &[(char, Opt, usize)] = &[
    ('f', Opt::Hostfile, 1),
    ('l', Opt::PrependRank, 0),
    ('n', Opt::Np, 1),
    ('c', Opt::Np, 1),
    ('N', Opt::PerNode, 1),
    ('H', Opt::Host, 1),
    ('x', Opt::Export, 1),
    ('h', Opt::Help, 0),
    ('V', Opt::Version, 0),
];

fn lookup(arg: &str) -> Option<(Opt, usize, Option<String>)> {
    // Returns (option, arity, inline value from `--opt=value`).
    if let Some(body) = arg.strip_prefix("--") {
        let (name, inline) = match body.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (body, None),
        };
        return LONG
            .iter()
            .find(|(s, _, _)| *s == name)
            .map(|&(_, o, a)| (o, a, inline));
    }
    let body = arg.strip_prefix('-')?;
    let mut chars = body.chars();
    if let (Some(c), None) = (chars.next(), chars.next()) {
        return SHORT
            .iter()
            .find(|(s, _, _)| *s == c)
            .map(|&(_, o, a)| (o, a, None));
    }
    // Open MPI single-dash long form (`-np`, `-mca`, `-host`, ...).
    LONG.iter()
        .find(|(s, _, _)| *s == body)
        .map(|&(_, o, a)| (o, a, None))
}

/// The variable that gives the ranks the name server's URI (`--ompi-server`).
pub const NAME_SERVER_ENV: &str = "OXMPI_NAME_SERVER";

/// `--ompi-server URI` or `file:PATH` (the file `oxmpi-server --report-uri` wrote): the
/// server's URI, checked.
fn name_server_uri(opt: &str, v: &str) -> Result<String> {
    let bad = |reason: String| RuntimeError::BadValue {
        option: opt.into(),
        value: v.into(),
        reason,
    };
    let text = match v.strip_prefix("file:") {
        Some(path) => std::fs::read_to_string(path).map_err(|e| {
            bad(format!(
                "cannot read the name server's URI from {path}: {e}"
            ))
        })?,
        None => v.to_string(),
    };
    let uri: oxmpi_wire::names::Uri = text.parse().map_err(bad)?;
    Ok(uri.to_string())
}

fn parse_count(opt: &str, v: &str) -> Result<usize> {
    let n: usize = v.parse().map_err(|_| RuntimeError::BadValue {
        option: opt.into(),
        value: v.into(),
        reason: "expected a positive integer".into(),
    })?;
    if n == 0 {
        return Err(RuntimeError::BadValue {
            option: opt.into(),
            value: v.into(),
            reason: "must be at least 1".into(),
        });
    }
    Ok(n)
}

fn parse_timeout(opt: &str, v: &str) -> Result<Duration> {
    let bad = |reason: &str| RuntimeError::BadValue {
        option: opt.into(),
        value: v.into(),
        reason: reason.into(),
    };
    let secs: f64 = v.parse().map_err(|_| bad("expected a number of seconds"))?;
    if !secs.is_finite() || secs <= 0.0 || secs > 1.0e9 {
        return Err(bad("must be a positive number of seconds"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// Parse an `-x` argument.
pub fn parse_export(opt: &str, v: &str) -> Result<EnvDirective> {
    let (name, value) = match v.split_once('=') {
        Some((n, val)) => (n, Some(val)),
        None => (v, None),
    };
    let valid = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !valid {
        return Err(RuntimeError::BadValue {
            option: opt.into(),
            value: v.into(),
            reason: "expected VAR or VAR=value with a valid variable name".into(),
        });
    }
    Ok(match value {
        Some(val) => EnvDirective::Set(name.into(), val.into()),
        None => EnvDirective::Forward(name.into()),
    })
}

/// Add an MCA pair, ignoring exact duplicates and rejecting conflicting ones.
pub fn add_mca(mca: &mut Vec<(String, String)>, key: &str, value: &str) -> Result<()> {
    if key.is_empty() || key.contains(char::is_whitespace) || key.contains('=') {
        return Err(RuntimeError::BadValue {
            option: "--mca".into(),
            value: key.into(),
            reason: "not a valid MCA parameter name".into(),
        });
    }
    if let Some((_, old)) = mca.iter().find(|(k, _)| k == key) {
        if old != value {
            return Err(RuntimeError::ConflictingMca {
                key: key.into(),
                first: old.clone(),
                second: value.into(),
            });
        }
        return Ok(());
    }
    mca.push((key.into(), value.into()));
    Ok(())
}

/// Parse the arguments that follow the program name (`argv[1..]`).
pub fn parse<I, S>(args: I) -> Result<Command>
where
    I: IntoIterator<Item = S>,
    S: Into<String>,
{
    let args: Vec<String> = args.into_iter().map(Into::into).collect();
    let mut spec = JobSpec {
        apps: Vec::new(),
        per_node: None,
        hosts: Vec::new(),
        hostfile: None,
        oversubscribe: None,
        map_by: MapBy::Slot,
        bind_to: BindTo::Default,
        report_bindings: false,
        prefix: None,
        mca: Vec::new(),
        tune: Vec::new(),
        tag_output: false,
        prepend_rank: false,
        display_allocation: false,
        display_map: false,
        timestamp_output: false,
        output_filename: None,
        timeout: None,
        stdin: StdinTarget::Rank(0),
        profile: None,
        restart: None,
        report_uri: None,
    };
    let mut global_env: Vec<EnvDirective> = Vec::new();
    let mut cur = AppSpec {
        np: None,
        argv: Vec::new(),
        env: Vec::new(),
        wdir: None,
    };
    let mut i = 0;
    let mut help = false;
    let mut version = false;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        if !cur.argv.is_empty() {
            // Inside a program's arguments: only a lone ':' ends them.
            if arg == ":" {
                spec.apps.push(std::mem::replace(
                    &mut cur,
                    AppSpec {
                        np: None,
                        argv: Vec::new(),
                        env: Vec::new(),
                        wdir: None,
                    },
                ));
            } else {
                cur.argv.push(arg.clone());
            }
            continue;
        }
        if arg == ":" {
            return Err(RuntimeError::NoProgram(format!(
                " before ':' (application context {})",
                spec.apps.len() + 1
            )));
        }
        if arg == "--" {
            if i >= args.len() {
                return Err(RuntimeError::NoProgram(String::new()));
            }
            cur.argv.push(args[i].clone());
            i += 1;
            continue;
        }
        if !arg.starts_with('-') || arg == "-" {
            cur.argv.push(arg.clone());
            continue;
        }
        let (opt, arity, inline) =
            lookup(arg).ok_or_else(|| RuntimeError::UnknownOption(arg.clone()))?;
        let mut vals: Vec<String> = Vec::new();
        if let Some(v) = inline {
            if arity != 1 && opt != Opt::Profile {
                return Err(RuntimeError::BadValue {
                    option: arg.clone(),
                    value: v,
                    reason: "this option does not take '=value'".into(),
                });
            }
            vals.push(v);
        } else {
            for _ in 0..arity {
                let v = args
                    .get(i)
                    .ok_or_else(|| RuntimeError::MissingArgument(arg.clone()))?;
                vals.push(v.clone());
                i += 1;
            }
        }
        let name = arg.as_str();
        match opt {
            Opt::Np => cur.np = Some(parse_count(name, &vals[0])?),
            Opt::PerNode => spec.per_node = Some(parse_count(name, &vals[0])?),
            Opt::Host => {
                for h in vals[0].split(',') {
                    if h.is_empty() {
                        return Err(RuntimeError::BadValue {
                            option: name.into(),
                            value: vals[0].clone(),
                            reason: "empty host name".into(),
                        });
                    }
                    spec.hosts.push(h.to_string());
                }
            }
            Opt::Hostfile => spec.hostfile = Some(PathBuf::from(&vals[0])),
            Opt::Oversubscribe => spec.oversubscribe = Some(true),
            Opt::NoOversubscribe => spec.oversubscribe = Some(false),
            Opt::MapBy => {
                let mut parts = vals[0].split(':');
                let policy = parts.next().unwrap_or("");
                spec.map_by = match policy.to_ascii_lowercase().as_str() {
                    "slot" | "" => MapBy::Slot,
                    "node" => MapBy::Node,
                    "core" => MapBy::Core,
                    _ => {
                        return Err(RuntimeError::BadValue {
                            option: name.into(),
                            value: vals[0].clone(),
                            reason: "supported policies are slot, node and core".into(),
                        })
                    }
                };
                for m in parts {
                    match m.to_ascii_uppercase().as_str() {
                        "OVERSUBSCRIBE" => spec.oversubscribe = Some(true),
                        "NOOVERSUBSCRIBE" => spec.oversubscribe = Some(false),
                        _ => {
                            return Err(RuntimeError::BadValue {
                                option: name.into(),
                                value: vals[0].clone(),
                                reason: format!("unsupported modifier '{m}'"),
                            })
                        }
                    }
                }
            }
            Opt::BindTo => {
                spec.bind_to = match vals[0].to_ascii_lowercase().as_str() {
                    "none" => BindTo::None,
                    "core" => BindTo::Core,
                    _ => {
                        return Err(RuntimeError::BadValue {
                            option: name.into(),
                            value: vals[0].clone(),
                            reason: "supported values are none and core".into(),
                        })
                    }
                }
            }
            Opt::ReportBindings => spec.report_bindings = true,
            Opt::Export => {
                let d = parse_export(name, &vals[0])?;
                if spec.apps.is_empty() {
                    global_env.push(d.clone());
                }
                cur.env.push(d);
            }
            Opt::SetEnv | Opt::EnvList => {
                let ds = if opt == Opt::SetEnv {
                    vec![parse_export(name, &format!("{}={}", vals[0], vals[1]))?]
                } else {
                    vals[0]
                        .split(',')
                        .filter(|v| !v.is_empty())
                        .map(|v| parse_export(name, v))
                        .collect::<Result<Vec<_>>>()?
                };
                for d in ds {
                    if spec.apps.is_empty() {
                        global_env.push(d.clone());
                    }
                    cur.env.push(d);
                }
            }
            Opt::PrependRank => spec.prepend_rank = true,
            Opt::DisplayAllocation => spec.display_allocation = true,
            Opt::DisplayMap => spec.display_map = true,
            Opt::Display => {
                for item in vals[0].split(',') {
                    match item {
                        "allocation" | "alloc" => spec.display_allocation = true,
                        "map" => spec.display_map = true,
                        "bind" | "bindings" => spec.report_bindings = true,
                        _ => {
                            return Err(RuntimeError::BadValue {
                                option: name.into(),
                                value: vals[0].clone(),
                                reason: "supported items are allocation, map and bind".into(),
                            })
                        }
                    }
                }
            }
            Opt::Prefix => spec.prefix = Some(PathBuf::from(&vals[0])),
            Opt::Mca => add_mca(&mut spec.mca, &vals[0], &vals[1])?,
            Opt::OmpiServer => {
                let uri = name_server_uri(name, &vals[0])?;
                let d = EnvDirective::Set(NAME_SERVER_ENV.into(), uri);
                if spec.apps.is_empty() {
                    global_env.push(d.clone());
                }
                cur.env.push(d);
            }
            Opt::ReportUri => {
                if vals[0].is_empty() {
                    return Err(RuntimeError::BadValue {
                        option: name.into(),
                        value: vals[0].clone(),
                        reason: "expected - (standard output), + (standard error) or a file".into(),
                    });
                }
                spec.report_uri = Some(vals[0].clone());
            }
            Opt::Profile => {
                let dir = vals.first().map_or(DEFAULT_PROFILE_DIR, String::as_str);
                if dir.is_empty() {
                    return Err(RuntimeError::BadValue {
                        option: name.into(),
                        value: dir.into(),
                        reason: "expected a directory".into(),
                    });
                }
                add_mca(&mut spec.mca, "mpi_profile", dir)?;
                spec.profile = Some(PathBuf::from(dir));
            }
            Opt::WithFt => match vals[0].to_ascii_lowercase().as_str() {
                "ulfm" | "mpi" => add_mca(&mut spec.mca, "mpi_ft_enable", "true")?,
                "none" | "no" => {}
                _ => {
                    return Err(RuntimeError::BadValue {
                        option: name.into(),
                        value: vals[0].clone(),
                        reason: "supported fault-tolerance models are ulfm and none".into(),
                    })
                }
            },
            Opt::EnableRecovery => add_mca(&mut spec.mca, "mpi_ft_enable", "true")?,
            Opt::Restart => {
                spec.restart =
                    Some(
                        vals[0]
                            .parse::<usize>()
                            .map_err(|_| RuntimeError::BadValue {
                                option: name.into(),
                                value: vals[0].clone(),
                                reason: "expected the number of restarts (0 or more)".into(),
                            })?,
                    )
            }
            Opt::Tune => spec.tune.push(PathBuf::from(&vals[0])),
            Opt::TagOutput => spec.tag_output = true,
            Opt::TimestampOutput => spec.timestamp_output = true,
            Opt::OutputFilename => spec.output_filename = Some(PathBuf::from(&vals[0])),
            Opt::Timeout => spec.timeout = Some(parse_timeout(name, &vals[0])?),
            Opt::Wdir => cur.wdir = Some(PathBuf::from(&vals[0])),
            Opt::Stdin => {
                spec.stdin = match vals[0].as_str() {
                    "all" => StdinTarget::All,
                    "none" => StdinTarget::None,
                    v => StdinTarget::Rank(v.parse().map_err(|_| RuntimeError::BadValue {
                        option: name.into(),
                        value: v.into(),
                        reason: "expected a rank number, 'all' or 'none'".into(),
                    })?),
                }
            }
            Opt::Version => version = true,
            Opt::Help => help = true,
            Opt::AllowRoot => {}
        }
    }
    if spec.timeout.is_none() {
        // Open MPI 4.x also reads the limit from the environment.
        if let Some(v) = std::env::var_os("MPIEXEC_TIMEOUT") {
            let v = v.to_string_lossy();
            if !v.trim().is_empty() {
                spec.timeout = Some(parse_timeout("MPIEXEC_TIMEOUT", v.trim())?);
            }
        }
    }
    if help {
        return Ok(Command::Help);
    }
    if version {
        return Ok(Command::Version);
    }
    if cur.argv.is_empty() {
        let ctx = if spec.apps.is_empty() {
            String::new()
        } else {
            format!(" after ':' (application context {})", spec.apps.len() + 1)
        };
        return Err(RuntimeError::NoProgram(ctx));
    }
    spec.apps.push(cur);
    let uses_server = |env: &[EnvDirective]| {
        env.iter()
            .any(|d| matches!(d, EnvDirective::Set(k, _) if k == NAME_SERVER_ENV))
    };
    if let Some(w) = &spec.report_uri {
        if uses_server(&global_env) || spec.apps.iter().any(|a| uses_server(&a.env)) {
            return Err(RuntimeError::BadValue {
                option: "--report-uri".into(),
                value: w.clone(),
                reason: "mpirun is the name server itself then: drop --ompi-server".into(),
            });
        }
    }
    // Global `-x` (given before the first program) applies to every later context too.
    for app in spec.apps.iter_mut().skip(1) {
        let mut env = global_env.clone();
        env.append(&mut app.env);
        app.env = env;
    }
    if spec.apps.len() > 1 && spec.apps.iter().any(|a| a.np.is_none()) && spec.per_node.is_none() {
        return Err(RuntimeError::BadValue {
            option: "-n".into(),
            value: String::new(),
            reason: "every application context of an MPMD job needs -n".into(),
        });
    }
    Ok(Command::Run(Box::new(spec)))
}

/// The `--help` text.
pub const HELP: &str = "\
Usage: mpirun [OPTIONS] PROGRAM [ARGS...] [: [OPTIONS] PROGRAM [ARGS...]]...

Launch an MPI job (oxmpi). mpiexec is the same program.

  -n, -np, -c N            number of ranks (default: one per slot)
  -N N                     ranks per node
  -H, --host H1,H2:4       hosts (name[:slots]; repeated names add slots)
  --hostfile, --machinefile F
                           hostfile: 'host [slots=N] [max_slots=M]', '#' comments
  --oversubscribe          allow more ranks than slots (default)
  --nooversubscribe        refuse to run more ranks than slots
  --map-by slot|node|core  rank placement policy (default slot)
  --bind-to none|core      processor binding (default: core for 1-2 ranks, else none)
  --report-bindings        print each rank's binding
  --display-allocation     print the nodes and slots of the allocation
  --display-map            print where each rank runs
  --display LIST           any of allocation,map,bind
  -x VAR | -x VAR=value    export an environment variable to the ranks
  --prefix DIR             prepend DIR/bin and DIR/lib to PATH and LD_LIBRARY_PATH
  --mca KEY VALUE          set MCA parameter KEY (delivered as OXMPI_MCA_KEY)
  --profile[=DIR]          write a job profile to DIR (default oxmpi-profile): per-rank
                           files, then JSON, CSV, plots and index.html by oxmpi-profile
  --tune FILE              read -x / --mca options from FILE
  --tag-output             prefix output lines with [jobid,rank]<stream>:
  --timestamp-output       prefix output lines with a timestamp
  --output-filename DIR    write rank output to DIR/1/rank.R/{stdout,stderr}
  --ompi-server URI|file:F the name server (oxmpi-server --report-uri) of
                           MPI_Publish_name/MPI_Lookup_name across jobs
  --report-uri -|+|F       be that name server (for this job and the jobs given the
                           URI), writing its URI to stdout (-), stderr (+) or file F
  --timeout S              abort the job after S seconds (exit code 124);
                           MPIEXEC_TIMEOUT=S in the environment does the same
  --with-ft ulfm           keep the job running when a rank dies (ULFM: the survivors
                           get MPIX_ERR_PROC_FAILED); also --enable-recovery and
                           --mca mpi_ft_enable true
  --restart N              relaunch a failed job up to N times, with OXMPI_RESTART_COUNT
                           and the same job directory (OXMPI_JOB_DIR)
  --wdir DIR               working directory of the ranks
  --stdin R|all|none       which rank reads mpirun's stdin (default 0)
  -V, --version            print the version
  -h, --help               print this help

Open MPI's single-dash long forms (-np, -mca, -host, ...) are accepted, and so are
Hydra's: -f FILE, -ppn N, -genv VAR VALUE, -env VAR VALUE, -genvlist A,B, -l
(-prepend-rank: lines start with [rank]).
";

/// The job spec of an `mpirun` command line that must parse (for the tests of the modules
/// that take a spec).
#[cfg(test)]
pub(crate) fn test_spec(args: &[&str]) -> JobSpec {
    match parse(args.iter().copied()).unwrap() {
        Command::Run(s) => *s,
        _ => unreachable!("{args:?} is not a job"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(args: &[&str]) -> JobSpec {
        match parse(args.iter().copied()).unwrap() {
            Command::Run(s) => *s,
            other => panic!("expected a job, got {other:?}"),
        }
    }

    #[test]
    fn single_dash_long_forms_and_program_args() {
        let s = run(&[
            "-np", "3", "-mca", "btl", "self", "-host", "a,b:2", "./prog", "-np", "--x", "-v",
        ]);
        assert_eq!(s.apps.len(), 1);
        assert_eq!(s.apps[0].np, Some(3));
        assert_eq!(s.apps[0].argv, ["./prog", "-np", "--x", "-v"]);
        assert_eq!(s.mca, [("btl".to_string(), "self".to_string())]);
        assert_eq!(s.hosts, ["a", "b:2"]);
    }

    #[test]
    fn mpmd_contexts_inherit_global_exports() {
        let s = run(&[
            "-x", "A=1", "-n", "2", "a", "x", ":", "-n", "1", "-x", "B", "b",
        ]);
        assert_eq!(s.apps.len(), 2);
        assert_eq!(s.apps[0].argv, ["a", "x"]);
        assert_eq!(s.apps[1].argv, ["b"]);
        assert_eq!(s.apps[1].np, Some(1));
        assert_eq!(
            s.apps[1].env,
            [
                EnvDirective::Set("A".into(), "1".into()),
                EnvDirective::Forward("B".into())
            ]
        );
    }

    #[test]
    fn long_options_with_equals_and_flags() {
        let s = run(&[
            "--np=4",
            "--map-by",
            "node:NOOVERSUBSCRIBE",
            "--bind-to=core",
            "--tag-output",
            "--timeout",
            "2.5",
            "--stdin",
            "all",
            "prog",
        ]);
        assert_eq!(s.apps[0].np, Some(4));
        assert_eq!(s.map_by, MapBy::Node);
        assert_eq!(s.oversubscribe, Some(false));
        assert_eq!(s.bind_to, BindTo::Core);
        assert!(s.tag_output);
        assert_eq!(s.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(s.stdin, StdinTarget::All);
    }

    #[test]
    fn bad_inputs_are_typed_errors() {
        let e = |a: &[&str]| parse(a.iter().copied()).unwrap_err();
        assert!(matches!(e(&["--bogus", "p"]), RuntimeError::UnknownOption(o) if o == "--bogus"));
        assert!(matches!(
            e(&["-n", "0", "p"]),
            RuntimeError::BadValue { .. }
        ));
        assert!(matches!(
            e(&["-n", "x", "p"]),
            RuntimeError::BadValue { .. }
        ));
        assert!(matches!(e(&["-n"]), RuntimeError::MissingArgument(_)));
        assert!(matches!(e(&["-n", "2"]), RuntimeError::NoProgram(_)));
        assert!(matches!(
            e(&["-n", "2", "a", ":"]),
            RuntimeError::NoProgram(_)
        ));
        assert!(matches!(
            e(&["--timeout", "-1", "p"]),
            RuntimeError::BadValue { .. }
        ));
        assert!(matches!(
            e(&["--timeout", "abc", "p"]),
            RuntimeError::BadValue { .. }
        ));
        assert!(matches!(
            e(&["--map-by", "socket", "p"]),
            RuntimeError::BadValue { .. }
        ));
        assert!(matches!(
            e(&["-x", "1A", "p"]),
            RuntimeError::BadValue { .. }
        ));
        assert!(matches!(
            e(&["--mca", "a", "1", "--mca", "a", "2", "p"]),
            RuntimeError::ConflictingMca { .. }
        ));
        assert!(matches!(
            e(&["-n", "1", "a", ":", "b"]),
            RuntimeError::BadValue { .. }
        ));
    }

    #[test]
    fn hydra_spellings() {
        let s = run(&[
            "-f",
            "hosts",
            "-ppn",
            "2",
            "-genv",
            "A",
            "1",
            "-genvlist",
            "B,C",
            "-l",
            "p",
        ]);
        assert_eq!(s.hostfile, Some(PathBuf::from("hosts")));
        assert_eq!(s.per_node, Some(2));
        assert!(s.prepend_rank);
        assert_eq!(
            s.apps[0].env,
            [
                EnvDirective::Set("A".into(), "1".into()),
                EnvDirective::Forward("B".into()),
                EnvDirective::Forward("C".into())
            ]
        );
    }

    #[test]
    fn exact_duplicate_mca_is_accepted_once() {
        let s = run(&["--mca", "a", "1", "-mca", "a", "1", "p"]);
        assert_eq!(s.mca.len(), 1);
    }

    #[test]
    fn help_and_version() {
        assert_eq!(parse(["--help"]).unwrap(), Command::Help);
        assert_eq!(parse(["-V"]).unwrap(), Command::Version);
    }

    #[test]
    fn profile_with_and_without_a_directory() {
        let s = run(&["--profile", "-n", "2", "p"]);
        assert_eq!(s.profile, Some(PathBuf::from(DEFAULT_PROFILE_DIR)));
        assert!(s
            .mca
            .contains(&("mpi_profile".into(), DEFAULT_PROFILE_DIR.into())));
        let s = run(&["--profile=out/prof", "p"]);
        assert_eq!(s.profile, Some(PathBuf::from("out/prof")));
        assert_eq!(s.apps[0].argv, ["p"]);
        assert!(parse(["--profile=", "p"]).is_err());
    }

    #[test]
    fn fault_tolerance_and_restart() {
        for args in [
            &["--with-ft", "ulfm", "p"][..],
            &["--enable-recovery", "p"],
            &["--with-ft=ulfm", "p"],
        ] {
            let s = run(args);
            assert_eq!(s.mca, vec![("mpi_ft_enable".into(), "true".into())]);
        }
        assert!(run(&["--with-ft", "none", "p"]).mca.is_empty());
        assert!(parse(["--with-ft", "cr", "p"]).is_err());
        assert_eq!(run(&["--restart", "2", "p"]).restart, Some(2));
        assert_eq!(run(&["p"]).restart, None);
        assert!(parse(["--restart", "-1", "p"]).is_err());
        assert!(parse(["--restart", "x", "p"]).is_err());
        assert!(parse(["--tag-output=x", "p"]).is_err());
    }

    /// `--ompi-server` gives every rank the name server's URI, given or read from the file
    /// `oxmpi-server --report-uri` wrote; a bad URI or an unreadable file stops here.
    #[test]
    fn ompi_server_uri_or_file() {
        let uri = "oxmpi-server:h:10.0.0.1:4000:00000000000000ff";
        let set = EnvDirective::Set(NAME_SERVER_ENV.into(), uri.into());
        let s = run(&["--ompi-server", uri, "-n", "2", "a", ":", "-n", "1", "b"]);
        assert!(
            s.apps.iter().all(|a| a.env == [set.clone()]),
            "{:?}",
            s.apps
        );
        let f = std::env::temp_dir().join(format!("oxmpi-cli-uri-{}", std::process::id()));
        std::fs::write(&f, format!("{uri}\n")).unwrap();
        let s = run(&["--ompi-server", &format!("file:{}", f.display()), "a"]);
        std::fs::remove_file(&f).unwrap();
        assert_eq!(s.apps[0].env, [set]);
        let e = parse(["--ompi-server", "tcp://x", "a"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid name server URI"), "{e}");
        let e = parse(["--ompi-server", "file:/nonexistent/uri", "a"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot read the name server's URI from /nonexistent/uri"),
            "{e}"
        );
    }

    /// `--report-uri W`: mpirun serves the names itself (not together with
    /// `--ompi-server`); an empty destination is refused.
    #[test]
    fn report_uri_makes_mpirun_the_name_server() {
        assert_eq!(
            run(&["--report-uri", "-", "a"]).report_uri.as_deref(),
            Some("-")
        );
        assert_eq!(
            run(&["--report-uri=f", "a"]).report_uri.as_deref(),
            Some("f")
        );
        assert_eq!(run(&["a"]).report_uri, None);
        assert!(parse(["--report-uri=", "a"]).is_err());
        let uri = "oxmpi-server:h:10.0.0.1:4000:00000000000000ff";
        let e = parse(["--report-uri", "+", "--ompi-server", uri, "a"])
            .unwrap_err()
            .to_string();
        assert!(e.contains("drop --ompi-server"), "{e}");
    }
}
