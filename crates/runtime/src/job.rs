//! Planning and running one job: validation (nothing launched on bad input), launch of the
//! local ranks by the head acting as the local node's daemon, the event loop (IO forwarding,
//! PMI service, reaping, signals, timeout) and teardown.

use crate::alloc::{allocate, map_job, Allocation, JobMap};
use crate::cli::{JobSpec, StdinTarget};
use crate::env::{app_overlay, rank_vars, JobFacts};
use crate::error::{Result, RuntimeError};
use crate::iof::{LineAssembler, Stream};
use crate::launch::{LaunchAgent, LocalAgent};
use crate::session::SessionDir;
use crate::sys;
use crate::topo::{format_cpus, hostname, LocalTopology};
use oxmpi_base::params::{Registry, Sources};
use oxmpi_wire::pmi::{Action, ConnId, JobInfo, PmiServer};
use std::io::Read;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Exit code of `mpirun` when `--timeout` expires.
pub const TIMEOUT_EXIT_CODE: i32 = 124;
/// Grace period between the polite signal and SIGKILL when tearing a job down.
pub const KILL_GRACE: Duration = Duration::from_millis(500);
/// How long output of already-exited ranks is still drained (pipes held by escaped
/// descendants are abandoned after this).
pub const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// Job number shown in `--tag-output` prefixes (`[1,rank]`), as Open MPI does.
pub const TAG_JOB: u32 = 1;

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
}

fn parent_env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

fn is_executable(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: c is a valid NUL-terminated path.
    let ok = unsafe { libc::access(c.as_ptr(), libc::X_OK) } == 0;
    use std::os::unix::fs::PermissionsExt;
    ok && std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Find the executable for `program` as the rank would (PATH of the rank's environment;
/// relative paths against the working directory).
fn resolve_program(program: &str, wdir: &Path, path_var: Option<&str>) -> Result<PathBuf> {
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
    // MCA parameters: `--mca` (conflicts are errors), `--tune` files, parameter files.
    let registry = Registry::new(Sources {
        command_line: spec.mca.clone(),
        tune_files: spec.tune.clone(),
        ..Sources::from_process()
    })?;
    let mca_env = registry.child_env();
    let topo = LocalTopology::detect();
    let host = hostname();
    let alloc = allocate(&spec, &host, &topo)?;
    let map = map_job(&spec, &alloc, &topo)?;
    LocalAgent.check(&alloc, &map)?;
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
    })
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
        }
    }
}

struct OutPipe {
    fd: OwnedFd,
    asm: LineAssembler,
    sink: usize,
}

struct PmiConn {
    fd: OwnedFd,
    out: Vec<u8>,
    close_after_flush: bool,
}

struct Proc {
    rank: usize,
    pid: i32,
    outs: [Option<OutPipe>; 2],
    pmi: Option<PmiConn>,
    exited: bool,
    finalized: bool,
    /// The rank sent at least one PMI message.
    spoke: bool,
}

struct Sink {
    fd: RawFd,
    _file: Option<std::fs::File>,
    dead: bool,
}

#[derive(Clone, Copy)]
enum Token {
    Signal,
    Out(usize, usize),
    Pmi(usize),
}

/// A running job: the head acting as the local node's daemon.
struct Job<'a> {
    plan: &'a JobPlan,
    procs: Vec<Proc>,
    sinks: Vec<Sink>,
    pmi: PmiServer,
    ending: Option<Ending>,
    teardown_kill_at: Option<Instant>,
    deadline: Option<Instant>,
    groups_killed_at: Option<Instant>,
    buf: Vec<u8>,
    out: Vec<u8>,
}

fn msg(text: &str) {
    let line = format!("mpirun: {text}\n");
    let _ = sys::write_all_fd(2, line.as_bytes());
}

fn open_rank_files(dir: &Path, rank: usize) -> Result<[std::fs::File; 2]> {
    let d = dir.join(TAG_JOB.to_string()).join(format!("rank.{rank}"));
    std::fs::create_dir_all(&d).map_err(|e| RuntimeError::Os {
        what: format!("creating output directory {}", d.display()),
        source: e,
    })?;
    let open = |name: &str| {
        let p = d.join(name);
        std::fs::File::create(&p).map_err(|e| RuntimeError::Os {
            what: format!("creating output file {}", p.display()),
            source: e,
        })
    };
    Ok([open("stdout")?, open("stderr")?])
}

fn cpu_set(cpus: &[usize]) -> libc::cpu_set_t {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set; CPU_SET stays in bounds for
    // cpu numbers below CPU_SETSIZE (others are skipped).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            if c < libc::CPU_SETSIZE as usize {
                libc::CPU_SET(c, &mut set);
            }
        }
        set
    }
}

impl<'a> Job<'a> {
    fn new(plan: &'a JobPlan, jobid: &str) -> Self {
        let map = &plan.map;
        let node_of: Vec<u32> = map.procs.iter().map(|p| p.node as u32).collect();
        let info = JobInfo {
            kvsname: jobid.to_string(),
            size: map.size() as u32,
            universe_size: plan.alloc.total_slots().max(map.size()) as i64,
            appnums: map.procs.iter().map(|p| p.app as i32).collect(),
            process_mapping: oxmpi_wire::pmi::process_mapping(&node_of),
            debug: false,
            local_ranks: None,
        };
        Job {
            plan,
            procs: Vec::new(),
            sinks: vec![
                Sink {
                    fd: 1,
                    _file: None,
                    dead: false,
                },
                Sink {
                    fd: 2,
                    _file: None,
                    dead: false,
                },
            ],
            pmi: PmiServer::new(info),
            ending: None,
            teardown_kill_at: None,
            deadline: plan.spec.timeout.map(|t| Instant::now() + t),
            groups_killed_at: None,
            buf: vec![0u8; 64 * 1024],
            out: Vec::with_capacity(128 * 1024),
        }
    }

    fn host(&self) -> &str {
        &self.plan.host
    }

    /// Start every rank. Returns the stdin pipes of the ranks that read mpirun's stdin.
    fn launch(&mut self, facts: &JobFacts<'_>) -> Result<Vec<std::process::ChildStdin>> {
        let plan = self.plan;
        let spec = &plan.spec;
        let user_has = |k: &str| std::env::var_os(k).is_some();
        let mut stdins = Vec::new();
        let parent_pid = std::process::id() as i32;
        for p in &plan.map.procs {
            let app = &plan.apps[p.app];
            let (sinks_out, sinks_err) = match &spec.output_filename {
                Some(dir) => {
                    let [o, e] = open_rank_files(dir, p.rank)?;
                    let i = self.sinks.len();
                    for f in [o, e] {
                        self.sinks.push(Sink {
                            fd: f.as_raw_fd(),
                            _file: Some(f),
                            dead: false,
                        });
                    }
                    (i, i + 1)
                }
                None => (0, 1),
            };
            let (pmi_parent, pmi_child) = sys::socketpair().map_err(|e| RuntimeError::Os {
                what: format!("creating the PMI socket of rank {}", p.rank),
                source: e,
            })?;
            let child_fd = pmi_child.as_raw_fd();
            let user_has_any = |k: &str| user_has(k) || app.overlay.iter().any(|(n, _)| n == k);
            let vars = rank_vars(facts, &plan.map, p, Some(child_fd), &user_has_any);
            let mut cmd = std::process::Command::new(&app.program);
            cmd.arg0(&app.argv[0]).args(&app.argv[1..]);
            for (k, v) in app.overlay.iter().chain(vars.iter()) {
                cmd.env(k, v);
            }
            if let Some(w) = &app.wdir {
                cmd.current_dir(w);
            }
            let wants_stdin = match spec.stdin {
                StdinTarget::All => true,
                StdinTarget::Rank(r) => r == p.rank,
                StdinTarget::None => false,
            };
            cmd.stdin(if wants_stdin {
                Stdio::piped()
            } else {
                Stdio::null()
            });
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
            cmd.process_group(0);
            let set = p.cpus.as_ref().map(|c| cpu_set(c));
            // SAFETY: the closure runs in the forked child before exec and only calls
            // async-signal-safe functions (prctl, getppid, sched_setaffinity, fcntl) on data
            // prepared before the fork.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    if libc::getppid() != parent_pid {
                        // mpirun died between fork and prctl.
                        libc::_exit(1);
                    }
                    if let Some(set) = &set {
                        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set)
                            != 0
                        {
                            return Err(std::io::Error::last_os_error());
                        }
                    }
                    if libc::fcntl(child_fd, libc::F_SETFD, 0) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let mut child = cmd.spawn().map_err(|e| RuntimeError::Spawn {
                rank: p.rank,
                program: app.program.display().to_string(),
                host: plan.host.clone(),
                source: e,
            })?;
            drop(pmi_child);
            let pid = child.id() as i32;
            if let Some(s) = child.stdin.take() {
                stdins.push(s);
            }
            let to_fd = |o: Option<OwnedFd>| -> Option<OwnedFd> {
                let fd = o?;
                sys::set_nonblocking(fd.as_raw_fd()).ok()?;
                Some(fd)
            };
            let tag = spec.tag_output.then_some((TAG_JOB, p.rank));
            let so = to_fd(child.stdout.take().map(OwnedFd::from)).map(|fd| OutPipe {
                fd,
                asm: LineAssembler::new(Stream::Stdout, tag, spec.timestamp_output),
                sink: sinks_out,
            });
            let se = to_fd(child.stderr.take().map(OwnedFd::from)).map(|fd| OutPipe {
                fd,
                asm: LineAssembler::new(Stream::Stderr, tag, spec.timestamp_output),
                sink: sinks_err,
            });
            let _ = sys::set_nonblocking(pmi_parent.as_raw_fd());
            self.pmi
                .on_connect(ConnId(p.rank as u64), Some(p.rank as u32));
            self.procs.push(Proc {
                rank: p.rank,
                pid,
                outs: [so, se],
                pmi: Some(PmiConn {
                    fd: pmi_parent,
                    out: Vec::new(),
                    close_after_flush: false,
                }),
                exited: false,
                finalized: false,
                spoke: false,
            });
            // The Child handle is dropped without waiting: reaping is done by `reap`.
            drop(child);
        }
        self.run_pmi_actions();
        Ok(stdins)
    }

    fn end(&mut self, ending: Ending, sig: libc::c_int) {
        if self.ending.is_some() {
            return;
        }
        self.ending = Some(ending);
        for p in self.procs.iter().filter(|p| !p.exited) {
            sys::kill_group(p.pid, sig);
        }
        self.teardown_kill_at = Some(Instant::now() + KILL_GRACE);
    }

    fn write_sink(&mut self, sink: usize) {
        let s = &mut self.sinks[sink];
        if !s.dead && !self.out.is_empty() && sys::write_all_fd(s.fd, &self.out).is_err() {
            // The reader went away (e.g. `mpirun ... | head`): discard further output.
            s.dead = true;
        }
        self.out.clear();
    }

    /// Read one chunk from an output pipe (closing it at end of file).
    fn read_out(&mut self, idx: usize, stream: usize) {
        let Some(pipe) = self.procs[idx].outs[stream].as_mut() else {
            return;
        };
        match sys::read_fd(pipe.fd.as_raw_fd(), &mut self.buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Ok(0) | Err(_) => {
                if let Some(mut pipe) = self.procs[idx].outs[stream].take() {
                    pipe.asm.finish(&mut self.out);
                    self.write_sink(pipe.sink);
                }
            }
            Ok(n) => {
                let sink = pipe.sink;
                pipe.asm.push(&self.buf[..n], &mut self.out);
                self.write_sink(sink);
            }
        }
    }

    fn read_pmi(&mut self, idx: usize) {
        loop {
            let Some(conn) = self.procs[idx].pmi.as_mut() else {
                return;
            };
            match sys::read_fd(conn.fd.as_raw_fd(), &mut self.buf) {
                Ok(0) => {
                    self.close_pmi(idx);
                    return;
                }
                Ok(n) => {
                    self.procs[idx].spoke = true;
                    let rank = self.procs[idx].rank;
                    self.pmi.on_data(ConnId(rank as u64), &self.buf[..n]);
                    self.run_pmi_actions();
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    self.close_pmi(idx);
                    return;
                }
            }
        }
    }

    fn close_pmi(&mut self, idx: usize) {
        if self.procs[idx].pmi.take().is_some() {
            let rank = self.procs[idx].rank;
            self.pmi.on_closed(ConnId(rank as u64));
            self.run_pmi_actions();
        }
    }

    fn flush_pmi(&mut self, idx: usize) {
        let Some(conn) = self.procs[idx].pmi.as_mut() else {
            return;
        };
        while !conn.out.is_empty() {
            // SAFETY: conn.out is valid for reads of its length; MSG_NOSIGNAL avoids SIGPIPE.
            let n = unsafe {
                libc::send(
                    conn.fd.as_raw_fd(),
                    conn.out.as_ptr().cast(),
                    conn.out.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n >= 0 {
                conn.out.drain(..n as usize);
                continue;
            }
            let e = std::io::Error::last_os_error();
            match e.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock => return,
                _ => {
                    self.close_pmi(idx);
                    return;
                }
            }
        }
        if conn.close_after_flush {
            self.close_pmi(idx);
        }
    }

    fn proc_index(&self, rank: usize) -> Option<usize> {
        // Procs are launched in rank order.
        self.procs
            .get(rank)
            .filter(|p| p.rank == rank)
            .map(|_| rank)
    }

    fn run_pmi_actions(&mut self) {
        while let Some(a) = self.pmi.poll_action() {
            match a {
                Action::Send { conn, bytes } => {
                    if let Some(i) = self.proc_index(conn.0 as usize) {
                        if let Some(c) = self.procs[i].pmi.as_mut() {
                            c.out.extend_from_slice(&bytes);
                        }
                        self.flush_pmi(i);
                    }
                }
                Action::Close { conn } => {
                    if let Some(i) = self.proc_index(conn.0 as usize) {
                        if let Some(c) = self.procs[i].pmi.as_mut() {
                            c.close_after_flush = true;
                        }
                        self.flush_pmi(i);
                    }
                }
                Action::Finalized { rank } => {
                    if let Some(i) = self.proc_index(rank as usize) {
                        self.procs[i].finalized = true;
                    }
                }
                Action::Abort {
                    rank,
                    code,
                    message,
                } => {
                    if self.ending.is_none() {
                        let who = match rank.and_then(|r| self.proc_index(r as usize)) {
                            Some(i) => format!(
                                "rank {} (pid {}) on host {}",
                                self.procs[i].rank,
                                self.procs[i].pid,
                                self.host()
                            ),
                            None => "a rank".into(),
                        };
                        let text = if message.is_empty() {
                            String::new()
                        } else {
                            format!(": {message}")
                        };
                        msg(&format!("{who} called abort with exit code {code}{text}"));
                        self.end(
                            Ending::Abort {
                                rank: rank.map(|r| r as usize),
                                code,
                            },
                            libc::SIGTERM,
                        );
                    }
                }
                Action::Error { rank, error, .. } => {
                    let who = rank.map_or_else(|| "a rank".to_string(), |r| format!("rank {r}"));
                    msg(&format!("PMI protocol error from {who}: {error}"));
                }
                Action::RankLost { .. } | Action::FenceReady { .. } => {}
            }
        }
    }

    fn reap(&mut self) {
        let mut failures: Vec<(usize, Ending)> = Vec::new();
        loop {
            let mut status = 0;
            // SAFETY: waitpid with a valid status pointer; WNOHANG never blocks.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                break;
            }
            let Some(i) = self.procs.iter().position(|p| p.pid == pid) else {
                continue;
            };
            self.procs[i].exited = true;
            // Whatever the rank sent on PMI before dying (e.g. finalize) counts first.
            self.read_pmi(i);
            let rank = self.procs[i].rank;
            if libc::WIFSIGNALED(status) {
                failures.push((
                    i,
                    Ending::Signal {
                        rank,
                        sig: libc::WTERMSIG(status),
                    },
                ));
            } else {
                let code = libc::WEXITSTATUS(status);
                if code != 0 {
                    failures.push((i, Ending::Exit { rank, code }));
                } else if self.procs[i].spoke && !self.procs[i].finalized {
                    failures.push((i, Ending::NoFinalize { rank }));
                }
            }
            self.close_pmi(i);
        }
        if self.ending.is_some() {
            return;
        }
        if let Some((i, e)) = failures
            .into_iter()
            .min_by_key(|(i, _)| self.procs[*i].rank)
        {
            let (rank, pid) = (self.procs[i].rank, self.procs[i].pid);
            let host = self.host().to_string();
            match &e {
                Ending::Signal { sig, .. } => msg(&format!(
                    "rank {rank} (pid {pid}) on host {host} exited on signal {sig} ({})",
                    sys::signal_name(*sig)
                )),
                Ending::Exit { code, .. } => msg(&format!(
                    "rank {rank} (pid {pid}) on host {host} exited with status {code}; the job is aborted"
                )),
                Ending::NoFinalize { .. } => msg(&format!(
                    "rank {rank} (pid {pid}) on host {host} exited after PMI init without calling finalize; the job is aborted"
                )),
                _ => {}
            }
            self.end(e, libc::SIGTERM);
        }
    }

    fn all_exited(&self) -> bool {
        self.procs.iter().all(|p| p.exited)
    }

    fn all_drained(&self) -> bool {
        self.procs
            .iter()
            .all(|p| p.outs.iter().all(Option::is_none))
    }

    fn event_loop(&mut self, sigfd: RawFd) {
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let mut toks: Vec<Token> = Vec::new();
        loop {
            let now = Instant::now();
            if self.all_exited() {
                if self.groups_killed_at.is_none() {
                    // Leave nothing of the job behind: descendants in the ranks' groups too.
                    for p in &self.procs {
                        sys::kill_group(p.pid, libc::SIGKILL);
                    }
                    self.groups_killed_at = Some(now);
                }
                let drain_over = self
                    .groups_killed_at
                    .is_some_and(|t| now.duration_since(t) >= DRAIN_GRACE);
                if self.all_drained() || drain_over {
                    break;
                }
            }
            if self.ending.is_none() && self.deadline.is_some_and(|d| now >= d) {
                let secs = self.plan.spec.timeout.map_or(0.0, |t| t.as_secs_f64());
                msg(&format!(
                    "the user-provided time limit for job execution ({secs} s) has been reached; the job is aborted"
                ));
                self.end(Ending::Timeout, libc::SIGTERM);
            }
            if self.teardown_kill_at.is_some_and(|t| now >= t) {
                for p in self.procs.iter().filter(|p| !p.exited) {
                    sys::kill_group(p.pid, libc::SIGKILL);
                }
                self.teardown_kill_at = None;
            }
            fds.clear();
            toks.clear();
            fds.push(libc::pollfd {
                fd: sigfd,
                events: libc::POLLIN,
                revents: 0,
            });
            toks.push(Token::Signal);
            for (i, p) in self.procs.iter().enumerate() {
                for (s, o) in p.outs.iter().enumerate() {
                    if let Some(o) = o {
                        fds.push(libc::pollfd {
                            fd: o.fd.as_raw_fd(),
                            events: libc::POLLIN,
                            revents: 0,
                        });
                        toks.push(Token::Out(i, s));
                    }
                }
                if let Some(c) = &p.pmi {
                    let mut ev = libc::POLLIN;
                    if !c.out.is_empty() {
                        ev |= libc::POLLOUT;
                    }
                    fds.push(libc::pollfd {
                        fd: c.fd.as_raw_fd(),
                        events: ev,
                        revents: 0,
                    });
                    toks.push(Token::Pmi(i));
                }
            }
            let mut wake: Option<Instant> = None;
            for t in [
                self.deadline.filter(|_| self.ending.is_none()),
                self.teardown_kill_at,
                self.groups_killed_at.map(|t| t + DRAIN_GRACE),
            ]
            .into_iter()
            .flatten()
            {
                wake = Some(wake.map_or(t, |w| w.min(t)));
            }
            let timeout_ms = wake.map_or(-1, |w| {
                let d = w.saturating_duration_since(Instant::now());
                (d.as_millis() as i32).saturating_add(1)
            });
            if sys::poll(&mut fds, timeout_ms).is_err() {
                continue;
            }
            for (k, pfd) in fds.iter().enumerate() {
                if pfd.revents == 0 {
                    continue;
                }
                match toks[k] {
                    Token::Signal => self.on_signals(sigfd),
                    Token::Out(i, s) => self.read_out(i, s),
                    Token::Pmi(i) => {
                        if pfd.revents & libc::POLLOUT != 0 {
                            self.flush_pmi(i);
                        }
                        if pfd.revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                            self.read_pmi(i);
                        }
                    }
                }
            }
        }
    }

    fn on_signals(&mut self, sigfd: RawFd) {
        let mut b = [0u8; 64];
        let mut chld = false;
        while let Ok(n) = sys::read_fd(sigfd, &mut b) {
            if n == 0 {
                break;
            }
            for &s in &b[..n] {
                let sig = i32::from(s);
                if sig == libc::SIGCHLD {
                    chld = true;
                } else if self.ending.is_none() {
                    msg(&format!(
                        "received signal {sig} ({}); forwarding it to the job and tearing it down",
                        sys::signal_name(sig)
                    ));
                    self.end(Ending::Interrupted(sig), sig);
                } else {
                    // A second signal: stop waiting politely.
                    for p in self.procs.iter().filter(|p| !p.exited) {
                        sys::kill_group(p.pid, libc::SIGKILL);
                    }
                }
            }
        }
        if chld {
            self.reap();
        }
    }
}

fn forward_stdin(mut targets: Vec<std::process::ChildStdin>) {
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

/// `<prefix>` of this installation, from the running executable (`<prefix>/bin/mpirun`).
pub fn install_prefix() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let bin = exe.parent()?;
    if bin.file_name()? != "bin" {
        return None;
    }
    bin.parent().map(Path::to_path_buf)
}

/// Run a planned job to completion. Returns `mpirun`'s exit status.
pub fn run(plan: &JobPlan) -> Result<i32> {
    for w in &plan.warnings {
        msg(w);
    }
    let session = SessionDir::create()?;
    let sigfd = sys::install_signal_pipe().map_err(|e| RuntimeError::Os {
        what: "installing signal handlers".into(),
        source: e,
    })?;
    let jobid = format!("oxmpi-{}.0", std::process::id());
    let prefix = install_prefix();
    let facts = JobFacts {
        jobid: &jobid,
        job_dir: session.path(),
        install_prefix: prefix.as_deref(),
        universe_size: plan.alloc.total_slots().max(plan.map.size()),
        num_nodes: plan.alloc.nodes.len(),
    };
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
    let mut job = Job::new(plan, &jobid);
    match job.launch(&facts) {
        Ok(stdins) => forward_stdin(stdins),
        Err(e) => {
            msg(&e.to_string());
            job.end(Ending::LaunchFailed, libc::SIGTERM);
        }
    }
    job.event_loop(sigfd.as_raw_fd());
    // Reap anything still around (defensive; the loop exits only when all exited).
    let code = job.ending.as_ref().map_or(0, Ending::exit_code);
    drop(job);
    drop(session);
    Ok(code)
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
