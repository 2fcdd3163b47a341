//! Planning and running one job: validation (nothing launched on bad input), then the head:
//! the event loop over the signal pipe and the local daemon's descriptors, the exit-status
//! rules, `--timeout`, signal forwarding and teardown.

use crate::alloc::{allocate, display_allocation, display_map, map_job, Allocation, JobMap};
use crate::cli::{JobSpec, StdinTarget};
use crate::daemon::{DaemonToken, LocalDaemon};
use crate::env::{app_overlay, rank_vars, JobFacts};
use crate::error::{Result, RuntimeError};
use crate::launch::{LaunchAgent, LocalAgent, RshAgent};
use crate::proto::{DaemonEvent, NodeLaunch, NodeProc, RankExit, DRAIN_GRACE, KILL_GRACE};
use crate::remote::{Heartbeat, RemoteEvent, RemoteToken, Remotes, Timeouts};
use crate::session::SessionDir;
use crate::streams::{ERRMGR, PLM, RAS, RMAPS};
use crate::sys;
use crate::topo::{format_cpus, LocalTopology};
use oxmpi_base::params::{self, Registry, Sources};
use oxmpi_base::verbose;
use oxmpi_wire::pmi::SpawnRequest;
use std::io::Read;
use std::os::fd::{AsRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub mod spawn;

/// Exit code of `mpirun` when `--timeout` expires.
pub const TIMEOUT_EXIT_CODE: i32 = 124;
/// Longest sleep of the event loop between checks for exited ranks (milliseconds).
const REAP_INTERVAL_MS: i32 = 1000;

/// One application context, resolved and validated.
#[derive(Debug, Clone)]
pub struct ResolvedApp {
    /// Absolute path of the executable.
    pub program: PathBuf,
    /// argv (argv\[0\] as the user typed it).
    pub argv: Vec<String>,
    /// Working directory, if `--wdir` was given.
    pub wdir: Option<PathBuf>,
    /// Variables set for this context's ranks (later entries win).
    pub overlay: Vec<(String, String)>,
}

/// A validated job: everything checked, nothing launched yet.
#[derive(Debug)]
pub struct JobPlan {
    /// The command line.
    pub spec: JobSpec,
    /// Nodes and slots.
    pub alloc: Allocation,
    /// Rank placement.
    pub map: JobMap,
    /// Local processors.
    pub topo: LocalTopology,
    /// This host's name.
    pub host: String,
    /// Resolved application contexts.
    pub apps: Vec<ResolvedApp>,
    /// Non-fatal warnings to print before launching.
    pub warnings: Vec<String>,
    /// The install prefix the parameter registry used (`OXMPI_PREFIX`, else derived from
    /// mpirun's path); ranks get the same one so that they read the same parameter files.
    pub prefix: Option<PathBuf>,
    /// The agent that starts daemons on the other nodes with ranks (`None`: every rank is
    /// on this node).
    pub agent: Option<RshAgent>,
    /// When every rank is on this node but the allocation has other nodes: the agent that
    /// would start daemons there for spawned jobs (`MPI_Comm_spawn`), or why there is none
    /// (said when a spawn needs it).
    pub spawn_agent: Option<std::result::Result<RshAgent, String>>,
    /// Address remote daemons connect back to (MCA `plm_head_address`; default: the
    /// addresses of this host's usable interfaces).
    pub head_address: Option<String>,
    /// How long remote daemons have to connect back (MCA `plm_daemon_timeout`, seconds).
    pub daemon_timeout: Duration,
    /// How long a control connection may go unanswered (MCA `plm_link_timeout`; zero:
    /// never).
    pub link_timeout: Duration,
    /// Heartbeats on the control connections: interval and how long a side may hear nothing
    /// (MCA `plm_heartbeat_interval`, `plm_heartbeat_timeout`; zero: none).
    pub heartbeat: Heartbeat,
    /// How long the head waits for remote nodes once the job ends (MCA
    /// `plm_teardown_timeout`).
    pub teardown_timeout: Duration,
    /// How long a control connection has to authenticate (MCA `plm_handshake_timeout`).
    pub handshake_timeout: Duration,
    /// Fault tolerance (MCA `mpi_ft_enable`, `--with-ft ulfm`): a rank that dies is
    /// reported and the job goes on (the survivors learn it from their MPI library).
    pub ft: bool,
}

fn parent_env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

fn is_executable(p: &Path) -> bool {
    let ok = sys::access_executable(p);
    use std::os::unix::fs::PermissionsExt;
    ok && std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Find the executable for `program` as the rank would (PATH of the rank's environment;
/// relative paths against the working directory).
pub(crate) fn resolve_program(
    program: &str,
    wdir: &Path,
    path_var: Option<&str>,
) -> Result<PathBuf> {
    let bad = |reason: String| RuntimeError::BadProgram {
        program: program.to_string(),
        reason,
    };
    if program.is_empty() {
        return Err(bad("is empty".into()));
    }
    if program.contains('/') {
        let p = wdir.join(program);
        if !p.exists() {
            return Err(bad("does not exist".into()));
        }
        if !is_executable(&p) {
            return Err(bad("is not an executable file".into()));
        }
        return Ok(p);
    }
    for dir in path_var
        .unwrap_or("/usr/local/bin:/usr/bin:/bin")
        .split(':')
    {
        let d = if dir.is_empty() {
            Path::new(".")
        } else {
            Path::new(dir)
        };
        let p = wdir.join(d).join(program);
        if is_executable(&p) {
            return Ok(p);
        }
    }
    Err(bad("was not found in PATH or is not executable".into()))
}

/// Validate a parsed command line into a plan. Nothing is launched and nothing is created.
pub fn plan(spec: JobSpec) -> Result<JobPlan> {
    plan_with(spec, &[])
}

/// [`plan`], also registering `rank_providers` (parameters the ranks will read) so that a
/// bad value for one of them is an error here, before anything is launched.
pub fn plan_with(spec: JobSpec, rank_providers: &[&'static params::Provider]) -> Result<JobPlan> {
    plan_checked(spec, rank_providers, &[])
}

/// A check of the ranks' parameters that `mpirun` runs once, up front (the MPI library's
/// component lists and interface values): `Err` is a one-line message.
pub type ParamCheck = fn() -> std::result::Result<(), String>;

/// [`plan_with`], also running `checks` once the parameters are registered: a failing
/// check, or an unknown parameter name under `mca_base_param_check=error`, stops the
/// launch with one line.
pub fn plan_checked(
    spec: JobSpec,
    rank_providers: &[&'static params::Provider],
    checks: &[ParamCheck],
) -> Result<JobPlan> {
    // MCA parameters: `--mca` (conflicts are errors), `--tune` files, parameter files.
    // The process-global registry also configures mpirun's own verbose streams.
    let sources = Sources {
        command_line: spec.mca.clone(),
        tune_files: spec.tune.clone(),
        ..Sources::from_process()
    };
    let prefix = sources.prefix.clone();
    let mca_env = if params::init_global(sources.clone())? {
        params::with_global(|r| r.child_env())?
    } else {
        Registry::new(sources)?.child_env()
    };
    // Our own parameters and those the ranks will read: a bad value is an error here, and
    // an unknown OXMPI_MCA_ name gets a warning naming the nearest known ones.
    params::register_global(&crate::PROVIDER)?;
    for p in rank_providers {
        params::register_global(p)?;
    }
    if !rank_providers.is_empty() {
        params::with_global(oxmpi_base::output::check_problems)?
            .map_err(RuntimeError::BadParameter)?;
    }
    for check in checks {
        check().map_err(RuntimeError::BadParameter)?;
    }
    // Declared by the MPI library (the engine's provider); unknown here if it is not
    // registered, which means off.
    let ft = params::with_global(|r| r.get_bool("mpi_ft_enable"))
        .ok()
        .flatten()
        .unwrap_or(false);
    let topo = LocalTopology::detect();
    let host = oxmpi_base::output::hostname().to_string();
    let alloc = allocate(&spec, &host, &topo)?;
    for n in &alloc.nodes {
        verbose!(
            RAS,
            10,
            "ras: node {} slots {}{} cores {}{}",
            n.name,
            n.slots,
            n.max_slots
                .map_or(String::new(), |m| format!(" max_slots {m}")),
            n.cores,
            if n.local { " (local)" } else { "" }
        );
    }
    let map = map_job(&spec, &alloc, &topo)?;
    verbose!(
        RMAPS,
        10,
        "rmaps: {} rank(s) mapped by {:?}; per node {:?}; oversubscribed {:?}",
        map.size(),
        spec.map_by,
        map.per_node,
        map.oversubscribed
    );
    for p in &map.procs {
        verbose!(
            RMAPS,
            20,
            "rmaps: rank {} app {} -> {} local rank {}{}",
            p.rank,
            p.app,
            alloc.nodes[p.node].name,
            p.local_rank,
            p.cpus
                .as_ref()
                .map_or(String::new(), |c| format!(" cpus {}", format_cpus(c)))
        );
    }
    let first_remote = alloc
        .nodes
        .iter()
        .zip(&map.per_node)
        .find(|(n, &k)| k > 0 && !n.local)
        .map(|(n, _)| n.name.clone());
    let link_timeout = crate::params::seconds(&crate::params::LINK_TIMEOUT, true)?;
    let heartbeat = Heartbeat {
        interval: crate::params::seconds(&crate::params::HEARTBEAT_INTERVAL, true)?,
        timeout: crate::params::seconds(&crate::params::HEARTBEAT_TIMEOUT, true)?,
    };
    let teardown_timeout = crate::params::seconds(&crate::params::TEARDOWN_TIMEOUT, false)?;
    let handshake_timeout = crate::params::seconds(&crate::params::HANDSHAKE_TIMEOUT, false)?;
    let make_agent = |far: &str| -> Result<RshAgent> {
        let in_slurm = parent_env("SLURM_JOB_ID")
            .or_else(|| parent_env("SLURM_JOBID"))
            .is_some();
        let text = match crate::params::explicit_value(&crate::params::RSH_AGENT) {
            Some(t) => t,
            None if in_slurm => SLURM_AGENT.to_string(),
            None => "ssh".to_string(),
        };
        let mut daemon = daemon_command(prefix.as_deref());
        daemon.push("--link-timeout".into());
        daemon.push(link_timeout.as_secs_f64().to_string());
        daemon.push("--heartbeat".into());
        daemon.push(format!(
            "{},{}",
            heartbeat.interval.as_secs_f64(),
            heartbeat.timeout.as_secs_f64()
        ));
        let a = RshAgent::new(&text, daemon)?;
        // The agent must exist here (one-line error, nothing launched).
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        resolve_program(a.program(), &cwd, parent_env("PATH").as_deref()).map_err(|_| {
            RuntimeError::BadValue {
                option: "plm_rsh_agent".into(),
                value: text.clone(),
                reason: format!(
                    "launch agent '{}' (needed to reach host '{far}') was not found",
                    a.program()
                ),
            }
        })?;
        verbose!(
            PLM,
            10,
            "plm: launch agent '{}' reaches the other nodes",
            text
        );
        Ok(a)
    };
    let mut spawn_agent = None;
    let agent = if let Some(far) = first_remote {
        let a = make_agent(&far)?;
        a.check(&alloc, &map)?;
        Some(a)
    } else {
        if let Some(far) = alloc.nodes.iter().find(|n| !n.local) {
            spawn_agent = Some(make_agent(&far.name).map_err(|e| e.to_string()));
        }
        LocalAgent.check(&alloc, &map)?;
        verbose!(
            PLM,
            10,
            "plm: launch agent '{}' reaches every node with ranks",
            LocalAgent.name()
        );
        None
    };
    let head_address = crate::params::explicit_value(&crate::params::HEAD_ADDRESS);
    let daemon_timeout = crate::params::seconds(&crate::params::DAEMON_TIMEOUT, false)?;
    let cwd = std::env::current_dir().map_err(|e| RuntimeError::Os {
        what: "reading the current directory".into(),
        source: e,
    })?;
    let mut warnings = Vec::new();
    let mut apps = Vec::new();
    for app in &spec.apps {
        let wdir = match &app.wdir {
            Some(w) => {
                let abs = cwd.join(w);
                if !abs.is_dir() {
                    return Err(RuntimeError::BadWdir(w.clone()));
                }
                Some(abs)
            }
            None => None,
        };
        let (overlay, warns) = app_overlay(&spec, app, &mca_env, &parent_env);
        warnings.extend(warns);
        let path_var = overlay
            .iter()
            .rev()
            .find(|(k, _)| k == "PATH")
            .map(|(_, v)| v.clone())
            .or_else(|| parent_env("PATH"));
        let program = resolve_program(
            &app.argv[0],
            wdir.as_deref().unwrap_or(&cwd),
            path_var.as_deref(),
        )?;
        apps.push(ResolvedApp {
            program,
            argv: app.argv.clone(),
            wdir,
            overlay,
        });
    }
    if let Some(dir) = &spec.output_filename {
        if dir.as_os_str().is_empty() {
            return Err(RuntimeError::BadValue {
                option: "--output-filename".into(),
                value: String::new(),
                reason: "empty directory name".into(),
            });
        }
    }
    if let StdinTarget::Rank(r) = spec.stdin {
        if r >= map.size() {
            return Err(RuntimeError::BadValue {
                option: "--stdin".into(),
                value: r.to_string(),
                reason: format!("the job has only {} rank(s)", map.size()),
            });
        }
    }
    warnings.dedup();
    Ok(JobPlan {
        spec,
        alloc,
        map,
        topo,
        host,
        apps,
        warnings,
        prefix,
        agent,
        spawn_agent,
        head_address,
        daemon_timeout,
        link_timeout,
        heartbeat,
        teardown_timeout,
        handshake_timeout,
        ft,
    })
}

/// The command that runs the node daemon: `<prefix>/bin/oxmpid` when installed there,
/// else this program itself in daemon mode (`mpirun --oxmpid`; never a possibly stale
/// `oxmpid` of a build directory).
fn daemon_command(prefix: Option<&Path>) -> Vec<String> {
    if let Some(c) = prefix.map(|p| p.join("bin").join("oxmpid")) {
        if is_executable(&c) {
            return vec![c.display().to_string()];
        }
    }
    match std::env::current_exe() {
        Ok(e) => vec![e.display().to_string(), DAEMON_FLAG.to_string()],
        Err(_) => vec!["oxmpid".to_string()],
    }
}

/// The launch agent inside a Slurm allocation (unless `plm_rsh_agent` is set): one
/// single-task step per node, `srun ... --nodelist <host> <oxmpid...>`, with `--overlap` (a
/// running step, e.g. a second mpirun in the allocation, must not hold the launch back) and
/// no binding flag (`--cpu-bind=none` warns on clusters without task binding; `oxmpid` widens
/// its own CPU mask instead).
pub const SLURM_AGENT: &str = "srun --nodes=1 --ntasks=1 --overlap --kill-on-bad-exit --nodelist";

/// First argument that makes `mpirun` act as `oxmpid` (used when `oxmpid` is not installed).
pub const DAEMON_FLAG: &str = "--oxmpid";

/// The launch of node `node` of `plan`: its ranks with their environment (`PMI_FD` is added
/// by the daemon).
pub fn node_launch(plan: &JobPlan, facts: &JobFacts<'_>, node: usize) -> NodeLaunch {
    let spec = &plan.spec;
    let map = &plan.map;
    let user_has = |k: &str| std::env::var_os(k).is_some();
    let procs = map
        .procs
        .iter()
        .filter(|p| p.node == node)
        .map(|p| {
            let app = &plan.apps[p.app];
            let user_has_any = |k: &str| user_has(k) || app.overlay.iter().any(|(n, _)| n == k);
            let vars = rank_vars(facts, map, p, None, &user_has_any);
            let env = app.overlay.iter().chain(vars.iter()).cloned().collect();
            NodeProc {
                rank: p.rank,
                program: app.program.clone(),
                argv: app.argv.clone(),
                env,
                cwd: app.wdir.clone(),
                cpus: p.cpus.clone(),
                stdin: match spec.stdin {
                    StdinTarget::All => true,
                    StdinTarget::Rank(r) => r == p.rank,
                    StdinTarget::None => false,
                },
            }
        })
        .collect();
    NodeLaunch {
        jobid: facts.jobid.to_string(),
        host: plan
            .alloc
            .nodes
            .get(node)
            .map_or_else(|| plan.host.clone(), |n| n.name.clone()),
        size: map.size(),
        universe_size: facts.universe_size,
        appnums: map.procs.iter().map(|p| p.app as i32).collect(),
        process_mapping: map.pmi_process_mapping(),
        distributed: plan.agent.is_some(),
        tag_output: spec.tag_output,
        prepend_rank: spec.prepend_rank,
        timestamp_output: spec.timestamp_output,
        output_dir: spec.output_filename.clone(),
        procs,
        preput: Vec::new(),
    }
}

/// Why a job ended (the first reason wins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// A rank exited with a non-zero status.
    Exit {
        /// Rank.
        rank: usize,
        /// Exit status.
        code: i32,
    },
    /// A rank exited (status 0) after PMI init without PMI finalize.
    NoFinalize {
        /// Rank.
        rank: usize,
    },
    /// A rank was killed by a signal.
    Signal {
        /// Rank.
        rank: usize,
        /// Signal number.
        sig: i32,
    },
    /// A rank called PMI abort (MPI_Abort).
    Abort {
        /// Rank (if known).
        rank: Option<usize>,
        /// Requested exit code.
        code: i32,
    },
    /// `--timeout` expired.
    Timeout,
    /// `mpirun` received a signal (forwarded to the job).
    Interrupted(i32),
    /// A rank could not be started.
    LaunchFailed,
    /// The reader of mpirun's stdout or stderr went away (exit status 128+SIGPIPE, as for a
    /// process of a shell pipeline).
    OutputClosed,
}

impl Ending {
    /// The exit status of `mpirun` for this ending.
    pub fn exit_code(&self) -> i32 {
        match *self {
            Ending::Exit { code, .. } => code,
            Ending::NoFinalize { .. } | Ending::LaunchFailed => 1,
            Ending::Signal { sig, .. } | Ending::Interrupted(sig) => 128 + sig,
            Ending::Abort { code, .. } => code,
            Ending::Timeout => TIMEOUT_EXIT_CODE,
            Ending::OutputClosed => 128 + sys::SIGPIPE,
        }
    }
}

/// The failure that a rank's exit represents, if any: a signal, a non-zero status, or a
/// clean exit after PMI init without PMI finalize.
pub fn exit_failure(rank: usize, exit: RankExit, missing_finalize: bool) -> Option<Ending> {
    match exit {
        RankExit::Signal(sig) => Some(Ending::Signal { rank, sig }),
        RankExit::Code(code) if code != 0 => Some(Ending::Exit { rank, code }),
        RankExit::Code(_) if missing_finalize => Some(Ending::NoFinalize { rank }),
        RankExit::Code(_) => None,
    }
}

/// One line naming how rank `rank` (process `pid` on `host`) failed.
fn failure_text(rank: usize, pid: impl std::fmt::Display, host: &str, e: &Ending) -> String {
    match e {
        Ending::Signal { sig, .. } => format!(
            "rank {rank} (pid {pid}) on host {host} exited on signal {sig} ({})",
            sys::signal_name(*sig)
        ),
        Ending::Exit { code, .. } => {
            format!("rank {rank} (pid {pid}) on host {host} exited with status {code}")
        }
        _ => format!(
            "rank {rank} (pid {pid}) on host {host} exited after PMI init without calling finalize"
        ),
    }
}

/// Which daemon a spawn request came from.
#[derive(Clone, Copy)]
enum SpawnFrom {
    /// The head's daemon of `mpirun`'s job.
    Main,
    /// The head's daemon of a spawned job (index in `children`).
    Child(usize),
    /// A remote node's daemon (its index in [`Remotes`]) for a job (0: `mpirun`'s).
    Remote(usize, u32),
}

/// The head's event-loop tokens.
#[derive(Clone, Copy)]
enum Token {
    Signal,
    Daemon(DaemonToken),
    /// A descriptor of spawned job `0`'s daemon.
    Child(usize, DaemonToken),
    Remote(RemoteToken),
}

/// The head of a running job: decides when and how the job ends. On the local node it
/// drives the daemon role in-process ([`LocalDaemon`]); other nodes' daemons are reached
/// through [`Remotes`].
struct Head<'a> {
    plan: &'a JobPlan,
    daemon: LocalDaemon,
    /// Jobs started by `MPI_Comm_spawn`: the in-process daemon of each one's ranks on this
    /// node (none there: a daemon without ranks); job number = index + 1.
    children: Vec<LocalDaemon>,
    /// Processes of each spawned job per allocation node (the slots it holds while it runs).
    child_nodes: Vec<Vec<usize>>,
    /// The allocation, grown by spawns' `add-host` info keys.
    alloc: Allocation,
    /// The job's id, session directory and universe size (for spawned jobs).
    jobid: String,
    job_dir: PathBuf,
    universe_size: usize,
    remotes: Option<Remotes>,
    ending: Option<Ending>,
    teardown_kill_at: Option<Instant>,
    /// Once the job ends: when remote nodes that still have not reported are given up.
    give_up_at: Option<Instant>,
    deadline: Option<Instant>,
    groups_killed_at: Option<Instant>,
    /// With fault tolerance: the first rank that exited with a non-zero status (the job
    /// went on; mpirun exits with that status).
    ft_exit: Option<Ending>,
    /// `--report-uri`: the URI of mpirun's name server (spawned jobs use it too).
    name_server: Option<String>,
}

fn msg(text: &str) {
    let line = format!("mpirun: {text}\n");
    let _ = sys::write_all_fd(2, line.as_bytes());
}

impl<'a> Head<'a> {
    fn new(plan: &'a JobPlan, daemon: LocalDaemon, facts: &JobFacts<'_>) -> Self {
        Head {
            plan,
            daemon,
            children: Vec::new(),
            child_nodes: Vec::new(),
            alloc: plan.alloc.clone(),
            jobid: facts.jobid.to_string(),
            job_dir: facts.job_dir.to_path_buf(),
            universe_size: facts.universe_size,
            remotes: None,
            ending: None,
            teardown_kill_at: None,
            give_up_at: None,
            deadline: plan.spec.timeout.map(|t| Instant::now() + t),
            groups_killed_at: None,
            ft_exit: None,
            name_server: facts.name_server.map(str::to_string),
        }
    }

    fn signal_all(&mut self, sig: sys::c_int) {
        self.daemon.signal_running(sig);
        for c in &self.children {
            c.signal_running(sig);
        }
        if let Some(r) = self.remotes.as_mut() {
            r.signal(sig);
        }
    }

    /// Record the first reason to end the job and start tearing it down with `sig`.
    fn end(&mut self, ending: Ending, sig: sys::c_int) {
        if self.ending.is_some() {
            return;
        }
        verbose!(
            ERRMGR,
            10,
            "errmgr: job ends ({ending:?}, exit status {}); sending signal {sig} to running ranks",
            ending.exit_code()
        );
        self.ending = Some(ending);
        if let Some(r) = self.remotes.as_mut() {
            r.hold_fences();
        }
        self.signal_all(sig);
        self.teardown_kill_at = Some(Instant::now() + KILL_GRACE);
        self.give_up_at = Some(Instant::now() + KILL_GRACE + self.plan.teardown_timeout);
    }

    /// Act on the daemon's events. Exits seen in one batch count as simultaneous: the lowest
    /// failing rank decides the job's status.
    fn handle_events(&mut self) {
        let mut failure: Option<(usize, i32, String, Ending)> = None;
        let mut batch: Vec<(String, DaemonEvent)> = Vec::new();
        let mut spawns = Vec::new();
        loop {
            let mut child_fences = Vec::new();
            for (i, c) in self.children.iter_mut().enumerate() {
                while let Some(ev) = c.poll_event() {
                    let host =
                        format!("{} (spawned job {})", self.plan.host, c.node_launch().jobid);
                    match ev {
                        DaemonEvent::Spawn { rank, v2, request } => {
                            spawns.push((SpawnFrom::Child(i), rank, v2, request));
                        }
                        DaemonEvent::FenceReady { epoch, puts } => {
                            child_fences.push((i as u32 + 1, epoch, puts));
                        }
                        ev => batch.push((host, ev)),
                    }
                }
            }
            if let Some(r) = self.remotes.as_mut() {
                for (job, epoch, puts) in child_fences {
                    r.contribute_job(job, epoch, puts);
                }
            }
            while let Some(ev) = self.daemon.poll_event() {
                match ev {
                    DaemonEvent::Spawn { rank, v2, request } => {
                        spawns.push((SpawnFrom::Main, rank, v2, request));
                    }
                    DaemonEvent::FenceReady { epoch, puts } => {
                        if let Some(r) = self.remotes.as_mut() {
                            r.contribute(epoch, puts);
                        }
                    }
                    DaemonEvent::OtherChildExited { pid, exit } => {
                        if let Some(r) = self.remotes.as_mut() {
                            r.on_child_exit(pid, exit);
                        }
                    }
                    ev => batch.push((self.plan.host.clone(), ev)),
                }
            }
            let Some(r) = self.remotes.as_mut() else {
                break;
            };
            let released = r.take_released();
            for ev in r.take_events() {
                match ev {
                    RemoteEvent::Daemon {
                        host,
                        job: 0,
                        event,
                    } => batch.push((host, event)),
                    RemoteEvent::Daemon { host, job, event } => {
                        let jobid = self
                            .children
                            .get(job as usize - 1)
                            .map_or(String::new(), |c| c.node_launch().jobid.clone());
                        batch.push((format!("{host} (spawned job {jobid})"), event));
                    }
                    RemoteEvent::Spawn {
                        node,
                        job,
                        rank,
                        v2,
                        request,
                    } => spawns.push((SpawnFrom::Remote(node, job), rank, v2, request)),
                    RemoteEvent::DaemonLost { host, message } => {
                        if self.ending.is_none() {
                            msg(&message);
                            let _ = host;
                            self.end(Ending::LaunchFailed, sys::SIGTERM);
                        }
                    }
                }
            }
            if released.is_empty() {
                break;
            }
            for (job, epoch, puts) in released {
                match job.checked_sub(1) {
                    None => self.daemon.fence_complete(epoch, puts),
                    Some(k) => {
                        // (The head's daemon of a spawned job without ranks here has
                        // no fence to complete.)
                        let c = self.children.get_mut(k as usize);
                        if let Some(c) = c.filter(|c| !c.node_launch().procs.is_empty()) {
                            c.fence_complete(epoch, puts);
                        }
                    }
                }
            }
        }
        for (from, rank, v2, request) in spawns {
            self.spawn(from, rank, v2, &request);
        }
        for (host, ev) in batch {
            match ev {
                DaemonEvent::RankExited {
                    rank,
                    pid,
                    exit,
                    missing_finalize,
                } => {
                    let Some(e) = exit_failure(rank, exit, missing_finalize) else {
                        continue;
                    };
                    if self.plan.ft && self.ending.is_none() {
                        // Fault tolerance: report and go on; the survivors decide. A
                        // non-zero exit status is still the job's (the first one).
                        msg(&format!(
                            "{}; the job continues (fault tolerance on)",
                            failure_text(rank, pid, &host, &e)
                        ));
                        if matches!(e, Ending::Exit { .. }) && self.ft_exit.is_none() {
                            self.ft_exit = Some(e);
                        }
                        continue;
                    }
                    if failure.as_ref().is_none_or(|(r, _, _, _)| rank < *r) {
                        failure = Some((rank, pid, host, e));
                    }
                }
                DaemonEvent::Abort {
                    rank,
                    pid,
                    code,
                    message,
                } => {
                    if self.ending.is_none() {
                        let who = match (rank, pid) {
                            (Some(r), Some(p)) => {
                                format!("rank {r} (pid {p}) on host {host}")
                            }
                            (Some(r), None) => format!("rank {r} on host {host}"),
                            _ => "a rank".into(),
                        };
                        let text = if message.is_empty() {
                            String::new()
                        } else {
                            format!(": {message}")
                        };
                        msg(&format!("{who} called abort with exit code {code}{text}"));
                        self.end(Ending::Abort { rank, code }, sys::SIGTERM);
                    }
                }
                DaemonEvent::OutputClosed { fd } => {
                    if self.ending.is_none() {
                        if fd != 2 {
                            msg("the reader of mpirun's standard output went away; the job is aborted");
                        }
                        self.end(Ending::OutputClosed, sys::SIGTERM);
                    }
                }
                DaemonEvent::LaunchFailed { message, .. } => {
                    if self.ending.is_none() {
                        msg(&message);
                        self.end(Ending::LaunchFailed, sys::SIGTERM);
                    }
                }
                DaemonEvent::PmiError { rank, message } => {
                    let who = rank.map_or_else(|| "a rank".to_string(), |r| format!("rank {r}"));
                    msg(&format!("PMI protocol error from {who}: {message}"));
                }
                DaemonEvent::Output { .. }
                | DaemonEvent::Spawn { .. }
                | DaemonEvent::FenceReady { .. }
                | DaemonEvent::OtherChildExited { .. } => {}
            }
        }
        let Some((rank, pid, host, e)) = failure else {
            return;
        };
        if self.ending.is_some() {
            return;
        }
        let text = failure_text(rank, pid, &host, &e);
        match &e {
            Ending::Signal { .. } => msg(&text),
            _ => msg(&format!("{text}; the job is aborted")),
        }
        self.end(e, sys::SIGTERM);
    }

    /// Start the job a rank asked for, and answer it: the job id and one error code per
    /// child, or why nothing was started.
    fn spawn(&mut self, from: SpawnFrom, rank: usize, v2: bool, request: &SpawnRequest) {
        let result = self.start_child(request);
        if let Err(e) = &result {
            verbose!(PLM, 10, "plm: spawn refused: {e}");
        }
        match from {
            SpawnFrom::Main => self.daemon.spawn_done(rank, v2, result),
            SpawnFrom::Child(i) => self.children[i].spawn_done(rank, v2, result),
            SpawnFrom::Remote(node, job) => {
                if let Some(r) = self.remotes.as_mut() {
                    r.spawn_done(node, job, rank, v2, result);
                }
            }
        }
    }

    /// Whether spawned job `k` (index in `children`) still runs somewhere.
    fn child_running(&self, k: usize) -> bool {
        !self.children[k].all_exited()
            || self
                .remotes
                .as_ref()
                .is_some_and(|r| !r.job_done(k as u32 + 1))
    }

    /// The agent that starts daemons on other nodes, or why there is none.
    fn agent_for(&self, host: &str) -> std::result::Result<RshAgent, String> {
        match (&self.plan.agent, &self.plan.spawn_agent) {
            (Some(a), _) => Ok(a.clone()),
            (None, Some(r)) => r.clone(),
            (None, None) => Err(format!("no launch agent reaches host {host}")),
        }
    }

    fn start_child(
        &mut self,
        request: &SpawnRequest,
    ) -> std::result::Result<(String, Vec<i32>), String> {
        if self.ending.is_some() {
            return Err("the job is ending".into());
        }
        let mut used = self.plan.map.per_node.clone();
        used.resize(self.alloc.nodes.len(), 0);
        for k in 0..self.children.len() {
            if self.child_running(k) {
                for (u, c) in used.iter_mut().zip(&self.child_nodes[k]) {
                    *u += c;
                }
            }
        }
        let mut child = spawn::plan_spawn(self.plan, &self.alloc, &used, request)?;
        let job = self.children.len() as u32 + 1;
        let base = self.jobid.strip_suffix(".0").unwrap_or(&self.jobid);
        let jobid = format!("{base}.{job}");
        let remote: Vec<usize> = (0..child.alloc.nodes.len())
            .filter(|&i| child.map.per_node[i] > 0 && !child.alloc.nodes[i].local)
            .collect();
        if let Some(&far) = remote.first() {
            let host = child.alloc.nodes[far].name.clone();
            let agent = self.agent_for(&host).map_err(|e| {
                format!(
                    "cannot spawn '{}' on host {host}: {e}",
                    request.commands[0].program
                )
            })?;
            child.agent = Some(agent);
        }
        let job_dir = self.job_dir.clone();
        let name_server = self.name_server.clone();
        let facts = JobFacts {
            jobid: &jobid,
            job_dir: &job_dir,
            install_prefix: child.prefix.as_deref(),
            universe_size: self.universe_size,
            num_nodes: child.map.per_node.iter().filter(|&&c| c > 0).count(),
            // Children of a restarted job are new processes of this attempt.
            restart_count: None,
            name_server: name_server.as_deref(),
        };
        let parent_jobid = self.jobid.clone();
        let with_parent = |mut launch: NodeLaunch| {
            for p in &mut launch.procs {
                p.env.push(("PMI_SPAWNED".into(), "1".into()));
                p.env
                    .push(("OXMPI_PARENT_JOBID".into(), parent_jobid.clone()));
            }
            launch.preput = request.preput.clone();
            launch
        };
        let local = child.alloc.nodes.iter().position(|n| n.local);
        let launch = with_parent(match local {
            Some(i) => node_launch(&child, &facts, i),
            None => NodeLaunch {
                procs: Vec::new(),
                ..node_launch(&child, &facts, usize::MAX)
            },
        });
        let size = launch.size;
        if !remote.is_empty() {
            self.start_remote_parts(&child, &facts, job, &remote, !launch.procs.is_empty())?;
            for &i in &remote {
                let part = with_parent(node_launch(&child, &facts, i));
                if let Some(r) = self.remotes.as_mut() {
                    r.launch_part(i, job, part);
                }
            }
        }
        self.alloc = child.alloc.clone();
        let mut d = LocalDaemon::new(launch, false);
        verbose!(
            PLM,
            10,
            "plm: starting spawned job {jobid} ({size} process(es); per node {:?})",
            child.map.per_node
        );
        let launched = d.launch();
        // Whatever started is reaped and torn down with the rest of the job.
        self.children.push(d);
        self.child_nodes.push(child.map.per_node.clone());
        launched.map_err(|e| e.to_string())?;
        Ok((jobid, vec![0; size]))
    }

    /// Prepares the remote nodes `remote` of spawned job `job` (`child`): the control
    /// channel if the job had none, a daemon on each node that has none yet, the job's
    /// fences across them (and the head's daemon when `local_ranks`).
    fn start_remote_parts(
        &mut self,
        child: &JobPlan,
        facts: &JobFacts<'_>,
        job: u32,
        remote: &[usize],
        local_ranks: bool,
    ) -> std::result::Result<(), String> {
        let Some(agent) = child.agent.as_ref() else {
            return Err("no launch agent".into());
        };
        if self.remotes.is_none() {
            let r = Remotes::start(
                agent,
                &self.jobid,
                Vec::new(),
                false,
                self.plan.head_address.clone(),
                Timeouts {
                    connect: self.plan.daemon_timeout,
                    link: self.plan.link_timeout,
                    heartbeat: self.plan.heartbeat,
                    handshake: self.plan.handshake_timeout,
                },
            )
            .map_err(|e| e.to_string())?;
            self.remotes = Some(r);
        }
        let Some(r) = self.remotes.as_mut() else {
            return Err("no control channel".into());
        };
        for &i in remote {
            if r.has_node(i) {
                continue;
            }
            // A daemon for spawned jobs only: its part of mpirun's job has no ranks.
            let host = child.alloc.nodes[i].name.clone();
            let empty = NodeLaunch {
                jobid: self.jobid.clone(),
                procs: Vec::new(),
                preput: Vec::new(),
                ..node_launch(child, facts, i)
            };
            r.start_node(i, host.clone(), empty)
                .map_err(|e| format!("cannot start a daemon on host {host}: {e}"))?;
        }
        r.add_job(job, remote.len() + usize::from(local_ranks));
        Ok(())
    }

    fn all_children(&self, f: impl Fn(&LocalDaemon) -> bool) -> bool {
        self.children.iter().all(f)
    }

    fn event_loop(&mut self, sigfd: RawFd) {
        let mut fds: Vec<sys::pollfd> = Vec::new();
        let mut dtoks: Vec<DaemonToken> = Vec::new();
        let mut toks: Vec<Token> = Vec::new();
        loop {
            self.handle_events();
            let now = Instant::now();
            let remotes_done = self.remotes.as_ref().is_none_or(Remotes::all_done);
            if self.daemon.all_exited()
                && self.all_children(LocalDaemon::all_exited)
                && remotes_done
            {
                if self.groups_killed_at.is_none() {
                    // Leave nothing of the job behind: descendants in the ranks' groups too.
                    self.daemon.kill_all_groups();
                    for c in &self.children {
                        c.kill_all_groups();
                    }
                    self.groups_killed_at = Some(now);
                }
                let drain_over = self
                    .groups_killed_at
                    .is_some_and(|t| now.duration_since(t) >= DRAIN_GRACE);
                if (self.daemon.all_drained() && self.all_children(LocalDaemon::all_drained))
                    || drain_over
                {
                    break;
                }
            }
            if self.ending.is_none() && self.deadline.is_some_and(|d| now >= d) {
                let secs = self.plan.spec.timeout.map_or(0.0, |t| t.as_secs_f64());
                msg(&format!(
                    "the user-provided time limit for job execution ({secs} s) has been reached; the job is aborted"
                ));
                self.end(Ending::Timeout, sys::SIGTERM);
            }
            if let Some(r) = self.remotes.as_mut() {
                r.check_connect_timeout(now);
                r.expire_handshakes(now);
                r.heartbeat(now);
                if self.give_up_at.is_some_and(|t| now >= t) {
                    let gone = r.give_up("it did not answer after the job ended");
                    if !gone.is_empty() {
                        msg(&format!(
                            "node(s) {} did not answer within plm_teardown_timeout after the job ended; their launch agents were killed",
                            gone.join(", ")
                        ));
                    }
                    self.give_up_at = None;
                }
            }
            if self.teardown_kill_at.is_some_and(|t| now >= t) {
                verbose!(
                    ERRMGR,
                    10,
                    "errmgr: grace period over; SIGKILL to remaining ranks"
                );
                self.signal_all(sys::SIGKILL);
                self.teardown_kill_at = None;
            }
            fds.clear();
            dtoks.clear();
            toks.clear();
            fds.push(sys::pollfd {
                fd: sigfd,
                events: sys::POLLIN,
                revents: 0,
            });
            toks.push(Token::Signal);
            self.daemon.poll_fds(&mut fds, &mut dtoks);
            toks.extend(dtoks.iter().map(|&t| Token::Daemon(t)));
            for (i, c) in self.children.iter().enumerate() {
                dtoks.clear();
                c.poll_fds(&mut fds, &mut dtoks);
                toks.extend(dtoks.iter().map(|&t| Token::Child(i, t)));
            }
            if let Some(r) = &self.remotes {
                let mut rtoks = Vec::new();
                r.poll_fds(&mut fds, &mut rtoks);
                toks.extend(rtoks.into_iter().map(Token::Remote));
            }
            let wake = [
                self.deadline.filter(|_| self.ending.is_none()),
                self.teardown_kill_at,
                self.give_up_at.filter(|_| self.remotes.is_some()),
                self.groups_killed_at.map(|t| t + DRAIN_GRACE),
                self.remotes.as_ref().and_then(Remotes::connect_deadline),
                self.remotes.as_ref().and_then(Remotes::next_heartbeat),
            ]
            .into_iter()
            .flatten()
            .min();
            // Wake at least once a second: reaping does not depend on SIGCHLD delivery alone.
            let timeout_ms = wake.map_or(REAP_INTERVAL_MS, |w| {
                let d = w.saturating_duration_since(Instant::now());
                i32::try_from(d.as_millis())
                    .unwrap_or(i32::MAX - 1)
                    .saturating_add(1)
                    .min(REAP_INTERVAL_MS)
            });
            match sys::poll(&mut fds, timeout_ms) {
                Err(_) => continue,
                Ok(0) => self.daemon.reap_with(&mut self.children),
                Ok(_) => {}
            }
            for (k, pfd) in fds.iter().enumerate() {
                if pfd.revents == 0 {
                    continue;
                }
                match toks[k] {
                    Token::Signal => self.on_signals(sigfd),
                    Token::Daemon(t) => self.daemon.on_ready(t, pfd.revents),
                    Token::Child(i, t) => self.children[i].on_ready(t, pfd.revents),
                    Token::Remote(t) => {
                        if let Some(r) = self.remotes.as_mut() {
                            r.on_ready(t, pfd.revents);
                        }
                    }
                }
            }
            if let Some(r) = self.remotes.as_mut() {
                r.after_ready();
            }
        }
    }

    fn on_signals(&mut self, sigfd: RawFd) {
        let mut chld = false;
        sys::read_signals(sigfd, |sig| {
            if sig == sys::SIGCHLD {
                chld = true;
            } else if sig == sys::SIGUSR1 || sig == sys::SIGUSR2 {
                verbose!(ERRMGR, 10, "errmgr: forwarding signal {sig} to the ranks");
                self.signal_all(sig);
            } else if self.ending.is_none() {
                msg(&format!(
                    "received signal {sig} ({}); forwarding it to the job and tearing it down",
                    sys::signal_name(sig)
                ));
                self.end(Ending::Interrupted(sig), sig);
            } else {
                // A second signal: stop waiting politely.
                self.signal_all(sys::SIGKILL);
            }
        });
        if chld {
            self.daemon.reap_with(&mut self.children);
        }
    }
}

fn forward_stdin(targets: Vec<(usize, std::fs::File)>) {
    let mut targets: Vec<std::fs::File> = targets.into_iter().map(|(_, f)| f).collect();
    use std::io::Write;
    if targets.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("stdin-forward".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; 64 * 1024];
            while !targets.is_empty() {
                if sys::in_background_of_terminal() {
                    // Reading now would stop mpirun with SIGTTIN; wait for `fg`.
                    std::thread::sleep(Duration::from_millis(200));
                    continue;
                }
                match stdin.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => targets.retain_mut(|t| t.write_all(&buf[..n]).is_ok()),
                }
            }
            // Dropping the pipes gives the ranks end-of-file.
        });
    if spawned.is_err() {
        msg("warning: could not start the stdin forwarding thread; ranks get no stdin");
    }
}

/// Run a planned job to completion. Returns `mpirun`'s exit status.
pub fn run(plan: &JobPlan) -> Result<i32> {
    for w in &plan.warnings {
        msg(w);
    }
    // Signals first, so that an early Ctrl-C cannot leave the job directory behind.
    let sigfd = sys::install_signal_pipe().map_err(|e| RuntimeError::Os {
        what: "installing signal handlers".into(),
        source: e,
    })?;
    let session = SessionDir::create()?;
    let jobid = format!("oxmpi-{}.0", std::process::id());
    if plan.spec.display_allocation {
        let _ = sys::write_all_fd(1, display_allocation(&plan.alloc).as_bytes());
    }
    if plan.spec.display_map {
        let _ = sys::write_all_fd(1, display_map(&plan.alloc, &plan.map).as_bytes());
    }
    if plan.spec.report_bindings {
        let pid = std::process::id();
        for p in &plan.map.procs {
            let line = match &p.cpus {
                Some(c) => format!(
                    "[{}:{pid}] Rank {} bound to cores {}\n",
                    plan.host,
                    p.rank,
                    format_cpus(c)
                ),
                None => format!(
                    "[{}:{pid}] Rank {} is not bound (or bound to all available processors)\n",
                    plan.host, p.rank
                ),
            };
            let _ = sys::write_all_fd(2, line.as_bytes());
        }
    }
    // `--report-uri`: mpirun is the name server of its ranks and of the jobs given its URI
    // (`--ompi-server`), for as long as it runs.
    let name_server = match &plan.spec.report_uri {
        Some(w) => Some(
            crate::names::NameServer::bind(0)
                .and_then(crate::names::NameServer::serve_in_background)
                .and_then(|uri| crate::names::report_uri(&uri, w).map(|()| uri.to_string()))
                .map_err(|e| RuntimeError::BadParameter(format!("name server: {e}")))?,
        ),
        None => None,
    };
    // `--restart N`: a failed job is relaunched, with the same job id and directory, up to
    // N times; a job ended by a signal to mpirun or by --timeout is not.
    let mut attempt = 0;
    loop {
        let facts = JobFacts {
            jobid: &jobid,
            job_dir: session.path(),
            install_prefix: plan.prefix.as_deref(),
            universe_size: plan.alloc.total_slots().max(plan.map.size()),
            num_nodes: plan.alloc.nodes.len(),
            restart_count: plan.spec.restart.map(|_| attempt),
            name_server: name_server.as_deref(),
        };
        let ending = run_once(plan, &facts, sigfd.as_raw_fd());
        let code = ending.as_ref().map_or(0, Ending::exit_code);
        let max = plan.spec.restart.unwrap_or(0);
        let failed = matches!(
            ending,
            Some(
                Ending::Exit { .. }
                    | Ending::Signal { .. }
                    | Ending::Abort { .. }
                    | Ending::NoFinalize { .. }
            )
        );
        if !failed || attempt >= max {
            drop(session);
            return Ok(code);
        }
        attempt += 1;
        msg(&format!(
            "the job failed (exit status {code}); restarting it ({attempt} of {max}) with OXMPI_RESTART_COUNT={attempt} in the same job directory"
        ));
    }
}

/// One launch of the job (`run` repeats it for `--restart`): how it ended (`None`: every
/// rank exited normally).
fn run_once(plan: &JobPlan, facts: &JobFacts, sigfd: RawFd) -> Option<Ending> {
    let local = plan.alloc.nodes.iter().position(|n| n.local);
    let local_launch = match local {
        Some(i) => node_launch(plan, facts, i),
        None => NodeLaunch {
            procs: Vec::new(),
            ..node_launch(plan, facts, usize::MAX)
        },
    };
    let local_has_ranks = !local_launch.procs.is_empty();
    let mut job = Head::new(plan, LocalDaemon::new(local_launch, false), facts);
    let mut launched = true;
    if let Some(agent) = &plan.agent {
        let launches = plan
            .alloc
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| !n.local && plan.map.per_node[*i] > 0)
            .map(|(i, n)| (i, n.name.clone(), node_launch(plan, facts, i)))
            .collect();
        match Remotes::start(
            agent,
            facts.jobid,
            launches,
            local_has_ranks,
            plan.head_address.clone(),
            Timeouts {
                connect: plan.daemon_timeout,
                link: plan.link_timeout,
                heartbeat: plan.heartbeat,
                handshake: plan.handshake_timeout,
            },
        ) {
            Ok(r) => job.remotes = Some(r),
            Err(e) => {
                msg(&e.to_string());
                job.end(Ending::LaunchFailed, sys::SIGTERM);
                launched = false;
            }
        }
    }
    if launched {
        let mut remote_stdins = Vec::new();
        if let Some(r) = job.remotes.as_mut() {
            match r.stdin_targets() {
                Ok(v) => remote_stdins = v,
                Err(e) => msg(&format!("warning: {e}; remote ranks get no stdin")),
            }
        }
        match job.daemon.launch() {
            Ok(mut stdins) => {
                stdins.extend(remote_stdins);
                forward_stdin(stdins)
            }
            Err(e) => {
                msg(&e.to_string());
                job.end(Ending::LaunchFailed, sys::SIGTERM);
            }
        }
    }
    job.event_loop(sigfd);
    if let Some(r) = job.remotes.as_mut() {
        r.shutdown();
    }
    job.ending.take().or(job.ft_exit.take())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_of_endings() {
        assert_eq!(Ending::Exit { rank: 1, code: 3 }.exit_code(), 3);
        assert_eq!(Ending::Signal { rank: 0, sig: 9 }.exit_code(), 137);
        assert_eq!(
            Ending::Abort {
                rank: None,
                code: 7
            }
            .exit_code(),
            7
        );
        assert_eq!(Ending::Timeout.exit_code(), TIMEOUT_EXIT_CODE);
        assert_eq!(Ending::Interrupted(2).exit_code(), 130);
    }

    #[test]
    fn which_exits_are_failures() {
        assert_eq!(exit_failure(2, RankExit::Code(0), false), None);
        assert_eq!(
            exit_failure(2, RankExit::Code(0), true),
            Some(Ending::NoFinalize { rank: 2 })
        );
        assert_eq!(
            exit_failure(1, RankExit::Code(4), true),
            Some(Ending::Exit { rank: 1, code: 4 })
        );
        assert_eq!(
            exit_failure(0, RankExit::Signal(9), false),
            Some(Ending::Signal { rank: 0, sig: 9 })
        );
    }

    #[test]
    fn program_resolution() {
        let root = Path::new("/");
        assert!(resolve_program("sh", root, Some("/bin:/usr/bin")).is_ok());
        assert!(matches!(
            resolve_program("definitely-not-a-program-oxmpi", root, Some("/bin")),
            Err(RuntimeError::BadProgram { .. })
        ));
        let f = std::env::temp_dir().join(format!("oxmpi-noexec-{}", std::process::id()));
        std::fs::write(&f, b"#!/bin/sh\n").unwrap();
        let r = resolve_program(f.to_str().unwrap(), root, None);
        std::fs::remove_file(&f).unwrap();
        assert!(matches!(r, Err(RuntimeError::BadProgram { .. })));
        assert!(resolve_program("/nonexistent/x", root, None).is_err());
    }
}
