//! The per-node daemon role (the seed's odls + iof + PMI server host). On the local node the
//! head (`mpirun`) plays it in-process: [`LocalDaemon`] forks and execs the node's ranks,
//! forwards their output line by line, serves PMI on each rank's inherited socket through
//! `oxmpi_wire::pmi::PmiServer`, reaps them, and reports what happened to the head as
//! [`DaemonEvent`]s. Decisions (when the job ends, with which status) belong to the head; a
//! remote `oxmpid` will send the same events over the control channel.

use crate::error::{Result, RuntimeError};
use crate::iof::{LineAssembler, Stream};
use crate::proto::{DaemonEvent, NodeLaunch, NodeProc, RankExit, TAG_JOB};
use crate::streams::{IOF, ODLS, PMI};
use crate::sys::{
    self,
    spawn::{exec_error, spawn, SpawnSpec},
};
use oxmpi_base::verbose;
use oxmpi_wire::pmi::{Action, ConnId, JobInfo, PmiServer};
use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;

/// Identifies one pollable descriptor of a daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonToken {
    /// Output stream `1` (0 = stdout, 1 = stderr) of the proc at index `0`.
    Out(usize, usize),
    /// PMI connection of the proc at this index.
    Pmi(usize),
    /// Exec status pipe of the proc at this index.
    Exec(usize),
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
    /// Exec status pipe until `exec` is known to have worked (EOF) or failed.
    exec_status: Option<OwnedFd>,
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

/// The daemon role for the ranks of one node (see the module documentation).
pub struct LocalDaemon {
    launch: NodeLaunch,
    /// Output for mpirun's stdout/stderr becomes [`DaemonEvent::Output`] (remote daemon).
    forward: bool,
    procs: Vec<Proc>,
    sinks: Vec<Sink>,
    pmi: PmiServer,
    events: VecDeque<DaemonEvent>,
    buf: Vec<u8>,
    out: Vec<u8>,
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

impl LocalDaemon {
    /// A daemon for the ranks of `launch`. With `forward`, output meant for mpirun's own
    /// stdout/stderr is queued as [`DaemonEvent::Output`] instead of written (remote node).
    pub fn new(launch: NodeLaunch, forward: bool) -> Self {
        let info = JobInfo {
            kvsname: launch.jobid.clone(),
            size: launch.size as u32,
            universe_size: launch.universe_size as i64,
            appnums: launch.appnums.clone(),
            process_mapping: launch.process_mapping.clone(),
            debug: false,
            local_ranks: launch
                .distributed
                .then(|| launch.procs.iter().map(|p| p.rank as u32).collect()),
        };
        let mut pmi = PmiServer::new(info);
        pmi.preput(launch.preput.clone());
        LocalDaemon {
            launch,
            forward,
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
            pmi,
            events: VecDeque::new(),
            buf: vec![0u8; 64 * 1024],
            out: Vec::with_capacity(128 * 1024),
        }
    }

    /// The launch this daemon runs.
    pub fn node_launch(&self) -> &NodeLaunch {
        &self.launch
    }

    /// Start every rank. Returns the stdin pipes of the ranks that read stdin, with their
    /// ranks.
    pub fn launch(&mut self) -> Result<Vec<(usize, std::fs::File)>> {
        let mut stdins = Vec::new();
        let nofile = sys::raise_nofile_limit();
        let base_env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
        let launch = std::mem::take(&mut self.launch.procs);
        let r = self.launch_procs(&launch, &base_env, nofile, &mut stdins);
        self.launch.procs = launch;
        r?;
        self.run_pmi_actions();
        Ok(stdins)
    }

    fn launch_procs(
        &mut self,
        procs: &[NodeProc],
        base_env: &[(OsString, OsString)],
        nofile: Option<sys::rlimit>,
        stdins: &mut Vec<(usize, std::fs::File)>,
    ) -> Result<()> {
        for p in procs {
            let (sinks_out, sinks_err) = match &self.launch.output_dir {
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
            let pmi_fd = ("PMI_FD".to_string(), child_fd.to_string());
            let mut env = base_env.to_vec();
            for (k, v) in p.env.iter().chain(std::iter::once(&pmi_fd)) {
                let (k, v) = (OsString::from(k), OsString::from(v));
                match env.iter_mut().find(|(n, _)| *n == k) {
                    Some(slot) => slot.1 = v,
                    None => env.push((k, v)),
                }
            }
            let child = spawn(&SpawnSpec {
                program: &p.program,
                argv: &p.argv,
                env,
                cwd: p.cwd.as_deref(),
                stdin_pipe: p.stdin,
                cpus: p.cpus.as_ref().map(|c| sys::cpu_set(c)),
                keep_fd: Some(child_fd),
                nofile,
            })
            .map_err(|e| RuntimeError::Spawn {
                rank: p.rank,
                program: p.program.display().to_string(),
                host: self.launch.host.clone(),
                source: e,
            })?;
            drop(pmi_child);
            let pid = child.pid;
            verbose!(
                ODLS,
                10,
                "odls: launched rank {} pid {}: {}",
                p.rank,
                pid,
                p.program.display()
            );
            if let Some(s) = child.stdin {
                stdins.push((p.rank, std::fs::File::from(s)));
            }
            let to_fd = |fd: OwnedFd| -> Option<OwnedFd> {
                sys::set_nonblocking(fd.as_raw_fd()).ok()?;
                Some(fd)
            };
            let l = &self.launch;
            let tag = l.tag_output.then_some((TAG_JOB, p.rank));
            let asm = |stream| {
                if l.prepend_rank && !l.tag_output {
                    LineAssembler::with_rank_prefix(p.rank, l.timestamp_output)
                } else {
                    LineAssembler::new(stream, tag, l.timestamp_output)
                }
            };
            let so = to_fd(child.stdout).map(|fd| OutPipe {
                fd,
                asm: asm(Stream::Stdout),
                sink: sinks_out,
            });
            let se = to_fd(child.stderr).map(|fd| OutPipe {
                fd,
                asm: asm(Stream::Stderr),
                sink: sinks_err,
            });
            let exec_status = to_fd(child.exec_status);
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
                exec_status,
                exited: false,
                finalized: false,
                spoke: false,
            });
        }
        Ok(())
    }

    fn write_sink(&mut self, sink: usize, rank: usize) {
        if self.forward && sink < 2 {
            if !self.out.is_empty() {
                self.events.push_back(DaemonEvent::Output {
                    rank,
                    stream: sink,
                    data: std::mem::take(&mut self.out),
                });
            }
            return;
        }
        let s = &mut self.sinks[sink];
        if !s.dead && !self.out.is_empty() {
            if let Err(e) = sys::write_all_fd(s.fd, &self.out) {
                // Discard further output to this sink.
                s.dead = true;
                if e.kind() == std::io::ErrorKind::BrokenPipe && s._file.is_none() {
                    // The reader of mpirun's own stdout/stderr went away
                    // (`mpirun ... | head`): the job ends as a pipeline would.
                    self.events
                        .push_back(DaemonEvent::OutputClosed { fd: s.fd });
                }
            }
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
                verbose!(
                    IOF,
                    20,
                    "iof: rank {} {} closed",
                    self.procs[idx].rank,
                    if stream == 0 { "stdout" } else { "stderr" }
                );
                let rank = self.procs[idx].rank;
                if let Some(mut pipe) = self.procs[idx].outs[stream].take() {
                    pipe.asm.finish(&mut self.out);
                    self.write_sink(pipe.sink, rank);
                }
            }
            Ok(n) => {
                let sink = pipe.sink;
                pipe.asm.push(&self.buf[..n], &mut self.out);
                let rank = self.procs[idx].rank;
                self.write_sink(sink, rank);
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
                    verbose!(
                        PMI,
                        40,
                        "pmi: rank {rank} -> {:?}",
                        String::from_utf8_lossy(&self.buf[..n])
                    );
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
            let e = match sys::send_nosignal(conn.fd.as_raw_fd(), &conn.out) {
                Ok(n) => {
                    conn.out.drain(..n);
                    continue;
                }
                Err(e) => e,
            };
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
        self.procs.binary_search_by_key(&rank, |p| p.rank).ok()
    }

    /// Distributed mode: the head gathered every node's pairs for fence `epoch`.
    pub fn fence_complete(&mut self, epoch: u64, puts: Vec<(String, String)>) {
        if let Err(e) = self.pmi.fence_complete(epoch, puts) {
            verbose!(PMI, 10, "pmi: unexpected fence release {epoch}: {e}");
        }
        self.run_pmi_actions();
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
                    verbose!(PMI, 10, "pmi: rank {rank} finalized");
                    if let Some(i) = self.proc_index(rank as usize) {
                        self.procs[i].finalized = true;
                    }
                }
                Action::Abort {
                    rank,
                    code,
                    message,
                } => {
                    let rank = rank.map(|r| r as usize);
                    let pid = rank
                        .and_then(|r| self.proc_index(r))
                        .map(|i| self.procs[i].pid);
                    self.events.push_back(DaemonEvent::Abort {
                        rank,
                        pid,
                        code,
                        message,
                    });
                }
                Action::Error { rank, error, .. } => {
                    self.events.push_back(DaemonEvent::PmiError {
                        rank: rank.map(|r| r as usize),
                        message: error.to_string(),
                    });
                }
                Action::RankLost { rank } => {
                    verbose!(
                        PMI,
                        10,
                        "pmi: rank {rank} closed its PMI connection without finalize"
                    );
                }
                Action::Spawn {
                    conn, v2, request, ..
                } => {
                    verbose!(PMI, 10, "pmi: rank {} asks to spawn {:?}", conn.0, request);
                    self.events.push_back(DaemonEvent::Spawn {
                        rank: conn.0 as usize,
                        v2,
                        request,
                    });
                }
                Action::FenceReady { epoch, puts } => {
                    verbose!(PMI, 20, "pmi: local ranks entered fence {epoch}");
                    self.events
                        .push_back(DaemonEvent::FenceReady { epoch, puts });
                }
            }
        }
    }

    /// Answers the spawn request of `rank` ([`DaemonEvent::Spawn`]): `Ok((jobid, errcodes))`
    /// or a one-line reason.
    pub fn spawn_done(
        &mut self,
        rank: usize,
        v2: bool,
        result: std::result::Result<(String, Vec<i32>), String>,
    ) {
        self.pmi.spawn_done(ConnId(rank as u64), v2, result);
        self.run_pmi_actions();
    }

    /// Reap every exited rank (call on SIGCHLD); queues [`DaemonEvent::RankExited`].
    pub fn reap(&mut self) {
        self.reap_with(&mut []);
    }

    /// [`LocalDaemon::reap`] for this daemon and `others` (spawned jobs' daemons in the same
    /// process): each exited child goes to the daemon that started it.
    pub fn reap_with(&mut self, others: &mut [LocalDaemon]) {
        while let Some((pid, status)) = sys::try_wait_any() {
            let exit = match status {
                sys::ChildStatus::Signaled(sig) => RankExit::Signal(sig),
                sys::ChildStatus::Exited(code) => RankExit::Code(code),
            };
            if others.iter_mut().any(|d| d.child_exited(pid, exit)) || self.child_exited(pid, exit)
            {
                continue;
            }
            self.events
                .push_back(DaemonEvent::OtherChildExited { pid, exit });
        }
    }

    /// Process `pid` of this daemon ended with `exit`; false when it is not one of its ranks.
    fn child_exited(&mut self, pid: i32, exit: RankExit) -> bool {
        let Some(i) = self.procs.iter().position(|p| p.pid == pid) else {
            return false;
        };
        self.procs[i].exited = true;
        // A failed exec and whatever the rank sent on PMI before dying (e.g. finalize)
        // count first.
        self.read_exec_status(i);
        self.read_pmi(i);
        let p = &self.procs[i];
        verbose!(
            ODLS,
            10,
            "odls: rank {} pid {} ended: {:?}",
            p.rank,
            p.pid,
            exit
        );
        self.events.push_back(DaemonEvent::RankExited {
            rank: p.rank,
            pid: p.pid,
            exit,
            missing_finalize: p.spoke && !p.finalized,
        });
        self.close_pmi(i);
        true
    }

    fn read_exec_status(&mut self, idx: usize) {
        let Some(fd) = self.procs[idx].exec_status.take() else {
            return;
        };
        let mut b = [0u8; 8];
        match sys::read_fd(fd.as_raw_fd(), &mut b) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                self.procs[idx].exec_status = Some(fd);
            }
            Ok(n) => {
                if let Some(e) = exec_error(&b[..n]) {
                    let rank = self.procs[idx].rank;
                    let program = self
                        .launch
                        .procs
                        .iter()
                        .find(|p| p.rank == rank)
                        .map_or(String::new(), |p| p.program.display().to_string());
                    self.events.push_back(DaemonEvent::LaunchFailed {
                        rank,
                        message: format!(
                            "failed to start rank {rank} ('{program}') on host {}: {e}",
                            self.launch.host
                        ),
                    });
                }
            }
            Err(_) => {}
        }
    }

    /// Next event for the head.
    pub fn poll_event(&mut self) -> Option<DaemonEvent> {
        self.events.pop_front()
    }

    /// Send `sig` to the process group of every rank still running.
    pub fn signal_running(&self, sig: sys::c_int) {
        for p in self.procs.iter().filter(|p| !p.exited) {
            sys::kill_group(p.pid, sig);
        }
    }

    /// SIGKILL every rank's process group (descendants included), exited or not.
    pub fn kill_all_groups(&self) {
        for p in &self.procs {
            sys::kill_group(p.pid, sys::SIGKILL);
        }
    }

    /// Every launched rank has been reaped.
    pub fn all_exited(&self) -> bool {
        self.procs.iter().all(|p| p.exited)
    }

    /// Every output stream reached end of file.
    pub fn all_drained(&self) -> bool {
        self.procs
            .iter()
            .all(|p| p.outs.iter().all(Option::is_none))
    }

    /// Add this daemon's descriptors to a poll set.
    pub fn poll_fds(&self, fds: &mut Vec<sys::pollfd>, toks: &mut Vec<DaemonToken>) {
        for (i, p) in self.procs.iter().enumerate() {
            for (s, o) in p.outs.iter().enumerate() {
                if let Some(o) = o {
                    fds.push(sys::pollfd {
                        fd: o.fd.as_raw_fd(),
                        events: sys::POLLIN,
                        revents: 0,
                    });
                    toks.push(DaemonToken::Out(i, s));
                }
            }
            if let Some(fd) = &p.exec_status {
                fds.push(sys::pollfd {
                    fd: fd.as_raw_fd(),
                    events: sys::POLLIN,
                    revents: 0,
                });
                toks.push(DaemonToken::Exec(i));
            }
            if let Some(c) = &p.pmi {
                let mut ev = sys::POLLIN;
                if !c.out.is_empty() {
                    ev |= sys::POLLOUT;
                }
                fds.push(sys::pollfd {
                    fd: c.fd.as_raw_fd(),
                    events: ev,
                    revents: 0,
                });
                toks.push(DaemonToken::Pmi(i));
            }
        }
    }

    /// A descriptor from [`LocalDaemon::poll_fds`] is ready.
    pub fn on_ready(&mut self, tok: DaemonToken, revents: i16) {
        match tok {
            DaemonToken::Out(i, s) => self.read_out(i, s),
            DaemonToken::Exec(i) => self.read_exec_status(i),
            DaemonToken::Pmi(i) => {
                if revents & sys::POLLOUT != 0 {
                    self.flush_pmi(i);
                }
                if revents & (sys::POLLIN | sys::POLLHUP | sys::POLLERR) != 0 {
                    self.read_pmi(i);
                }
            }
        }
    }
}
