//! Nodes beyond the local one: the head's side of the control channel ([`Remotes`]) and the
//! remote daemon `oxmpid` ([`oxmpid_main`]).
//!
//! The head listens on a TCP port, generates a per-job [`Secret`] and starts one `oxmpid` per
//! remote node through a launch agent ([`crate::launch::RshAgent`]): `<agent> <host> <oxmpid>
//! --head <addr> --node <i> --jobid <id>`. The secret never appears in argv: the head writes
//! it as one hex line on the agent's stdin (ssh and the agent scripts pass stdin through), or
//! `oxmpid` takes it from `OXMPI_CTL_SECRET` when that is set. The daemon connects back,
//! authenticates (mutual HMAC challenge–response, `oxmpi_wire::ctl`), gets its `Launch`, runs
//! its ranks with [`LocalDaemon`] in forwarding and distributed mode, and reports output, exits,
//! aborts and fence contributions. The head gathers fence contributions of every node (its own
//! in-process daemon included) and releases each fence with the union of the pairs.
//! A peer that fails authentication or sends garbage is logged and dropped.

use crate::daemon::LocalDaemon;
use crate::error::{Result, RuntimeError};
use crate::proto::{DaemonEvent, NodeLaunch, RankExit, DRAIN_GRACE, KILL_GRACE};
use crate::session::SessionDir;
use crate::streams::{ERRMGR, PLM};
use crate::sys;
use oxmpi_base::verbose;
use oxmpi_wire::ctl::{
    random_nonce, Config, Connection, Event, ExitStatus, IoStream, Msg, Secret, State,
};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// Environment variable from which `oxmpid` takes the job secret (hex) when it is set;
/// otherwise the secret is the first line of its stdin.
pub const SECRET_ENV: &str = "OXMPI_CTL_SECRET";

/// How long the head waits for remote daemons to say goodbye at the end of a job.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(3);

/// Heartbeats on a control connection: each side sends one every `interval` and counts
/// the other as lost when it has heard nothing (no heartbeat, no message) for `timeout`.
/// A zero `interval` sends none, a zero `timeout` never gives up. Sans-IO: the caller
/// passes the clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Heartbeat {
    /// Between two heartbeats sent (`plm_heartbeat_interval`).
    pub interval: Duration,
    /// Silence that counts as lost (`plm_heartbeat_timeout`).
    pub timeout: Duration,
}

/// What [`Heartbeat::check`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beat {
    /// Nothing to do now.
    Idle,
    /// Send a heartbeat.
    Send,
    /// The other side has been silent for longer than the timeout.
    Lost,
}

impl Heartbeat {
    /// Parses `oxmpid --heartbeat INTERVAL,TIMEOUT` (seconds, fractions allowed).
    pub fn parse(s: &str) -> std::result::Result<Heartbeat, String> {
        let secs = |v: &str| {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map(Duration::from_secs_f64)
                .ok_or_else(|| format!("bad heartbeat '{s}': expected INTERVAL,TIMEOUT in seconds"))
        };
        let (i, t) = s
            .split_once(',')
            .ok_or_else(|| format!("bad heartbeat '{s}': expected INTERVAL,TIMEOUT in seconds"))?;
        Ok(Heartbeat {
            interval: secs(i)?,
            timeout: secs(t)?,
        })
    }

    /// At `now`, for a connection last heard from at `heard` whose last heartbeat went out
    /// at `sent`.
    pub fn check(&self, now: Instant, heard: Instant, sent: Instant) -> Beat {
        if !self.timeout.is_zero() && now.saturating_duration_since(heard) > self.timeout {
            Beat::Lost
        } else if !self.interval.is_zero() && now.saturating_duration_since(sent) >= self.interval {
            Beat::Send
        } else {
            Beat::Idle
        }
    }

    /// When [`Heartbeat::check`] may next ask for something (`None`: never).
    pub fn next(&self, heard: Instant, sent: Instant) -> Option<Instant> {
        let lost =
            (!self.timeout.is_zero()).then(|| heard + self.timeout + Duration::from_millis(1));
        let send = (!self.interval.is_zero()).then(|| sent + self.interval);
        lost.into_iter().chain(send).min()
    }

    /// Why a side counts as lost, for messages.
    fn reason(&self) -> String {
        format!(
            "nothing heard within plm_heartbeat_timeout ({} s)",
            self.timeout.as_secs_f64()
        )
    }
}

/// One authenticated-or-not control connection over a nonblocking TCP stream.
struct Peer {
    stream: TcpStream,
    conn: Connection,
    closed: bool,
    /// Why the connection failed, when a read or write said so (not a clean close).
    error: Option<std::io::Error>,
    /// When it was accepted or made.
    since: Instant,
    /// When bytes last arrived on it (or it was made).
    heard: Instant,
    /// When we last sent it a heartbeat (or it was made).
    beat: Instant,
}

impl Peer {
    fn new(stream: TcpStream, conn: Connection) -> std::io::Result<Peer> {
        stream.set_nonblocking(true)?;
        let _ = stream.set_nodelay(true);
        Ok(Peer {
            stream,
            conn,
            closed: false,
            error: None,
            since: Instant::now(),
            heard: Instant::now(),
            beat: Instant::now(),
        })
    }

    /// Write as much pending output as the socket takes.
    fn flush(&mut self) {
        while !self.closed && !self.conn.pending_output().is_empty() {
            match self.stream.write(self.conn.pending_output()) {
                Ok(0) => self.closed = true,
                Ok(n) => self.conn.advance_output(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.error = Some(e);
                    self.closed = true;
                }
            }
        }
    }

    /// Read what is available into the connection; `false` at end of stream or error.
    fn read(&mut self, buf: &mut [u8]) {
        loop {
            match self.stream.read(buf) {
                Ok(0) => {
                    self.conn.on_eof();
                    self.closed = true;
                    return;
                }
                Ok(n) => {
                    self.heard = Instant::now();
                    self.conn.on_data(&buf[..n]);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.error = Some(e);
                    self.conn.on_eof();
                    self.closed = true;
                    return;
                }
            }
        }
    }

    fn send(&mut self, m: &Msg) {
        if self.closed {
            return;
        }
        if self.conn.send(m).is_ok() {
            self.flush();
        }
    }

    /// Why the connection ended, for messages: the socket's error (a silent peer is named
    /// with the parameter that bounds it), else a plain close.
    fn lost_reason(&self) -> String {
        match &self.error {
            Some(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                format!("no answer within plm_link_timeout: {e}")
            }
            Some(e) => format!("connection lost: {e}"),
            None => "connection closed".into(),
        }
    }

    fn pollfd(&self) -> sys::pollfd {
        let mut events = sys::POLLIN;
        if !self.conn.pending_output().is_empty() {
            events |= sys::POLLOUT;
        }
        sys::pollfd {
            fd: self.stream.as_raw_fd(),
            events,
            revents: 0,
        }
    }
}

/// Sans-IO gathering of PMI fence contributions across daemons: each fence epoch is
/// released once every participating daemon contributed, with the union of their pairs (in
/// contribution order). Daemons that go away stop counting.
#[derive(Debug, Default)]
pub struct FenceGather {
    participants: usize,
    /// Epoch → (contributions, pairs).
    pending: BTreeMap<u64, (usize, Vec<(String, String)>)>,
}

impl FenceGather {
    /// Gathering over `participants` daemons.
    pub fn new(participants: usize) -> Self {
        FenceGather {
            participants,
            pending: BTreeMap::new(),
        }
    }

    /// One daemon's contribution to `epoch`; returns the fences released by it (in epoch
    /// order).
    pub fn contribute(
        &mut self,
        epoch: u64,
        puts: Vec<(String, String)>,
    ) -> Vec<(u64, Vec<(String, String)>)> {
        let e = self.pending.entry(epoch).or_default();
        e.0 += 1;
        e.1.extend(puts);
        self.released()
    }

    /// A daemon left (it will not contribute any more); returns fences released by that.
    pub fn leave(&mut self) -> Vec<(u64, Vec<(String, String)>)> {
        self.participants = self.participants.saturating_sub(1);
        self.released()
    }

    /// Daemons still taking part.
    pub fn participants(&self) -> usize {
        self.participants
    }

    fn released(&mut self) -> Vec<(u64, Vec<(String, String)>)> {
        let mut out = Vec::new();
        while let Some(e) = self.pending.first_entry() {
            if e.get().0 < self.participants {
                break;
            }
            let (epoch, (_, puts)) = e.remove_entry();
            out.push((epoch, puts));
        }
        out
    }
}

/// A remote node as the head sees it.
struct RemoteNode {
    /// Node index in the allocation (the id the daemon announces).
    node: u32,
    host: String,
    launch: NodeLaunch,
    agent_pid: i32,
    peer: Option<Peer>,
    /// The daemon said all its ranks of `mpirun`'s job are done (or it is gone, or it was
    /// started for spawned jobs only).
    done: bool,
    /// Ranks of `mpirun`'s job not yet reported exited.
    running: Vec<usize>,
    /// The daemon authenticated at some point.
    connected: bool,
    /// The daemon is gone (lost, given up or never connected).
    gone: bool,
    /// When its launch agent was started (it has `plm_daemon_timeout` to connect back).
    since: Instant,
    /// Its parts of spawned jobs.
    parts: Vec<JobPart>,
    /// Messages for the daemon once it connected, after its `Launch`.
    queued: Vec<Msg>,
}

impl RemoteNode {
    /// Nothing of any job runs there any more.
    fn finished(&self) -> bool {
        self.done && self.parts.iter().all(|p| p.done)
    }
}

/// A node's part of a spawned job.
struct JobPart {
    /// The head's number of the spawned job.
    job: u32,
    /// Ranks not yet reported exited.
    running: Vec<usize>,
    /// The daemon said this part is done (or the node is gone).
    done: bool,
}

/// What the head learns from remote nodes.
#[derive(Debug)]
pub enum RemoteEvent {
    /// A daemon event of host `host` about job `job` (0: `mpirun`'s own, else a spawned
    /// job's number).
    Daemon {
        /// The node's name.
        host: String,
        /// The job.
        job: u32,
        /// The event.
        event: DaemonEvent,
    },
    /// A rank of job `job` on node `node` (index in [`Remotes`]' nodes) asked to start a
    /// new job; answer with [`Remotes::spawn_done`].
    Spawn {
        /// The node's index in [`Remotes`].
        node: usize,
        /// The asking rank's job.
        job: u32,
        /// The asking rank.
        rank: usize,
        /// PMI-2 framing.
        v2: bool,
        /// What to start.
        request: oxmpi_wire::pmi::SpawnRequest,
    },
    /// A node's daemon failed or went away while its ranks ran.
    DaemonLost {
        /// The node's name.
        host: String,
        /// Why.
        message: String,
    },
}

/// The head's side of the remote daemons of one job.
pub struct Remotes {
    /// Where daemons connect: one listener per address offered to them (all addresses
    /// only when the head is offered by name).
    listeners: Vec<TcpListener>,
    cfg: Config,
    nodes: Vec<RemoteNode>,
    pending: Vec<Peer>,
    /// Fences across the remote daemons and the head's own (if it has ranks).
    fences: FenceGather,
    /// The same for each spawned job that spans daemons.
    job_fences: BTreeMap<u32, FenceGather>,
    events: Vec<RemoteEvent>,
    /// Released fences for the head's own daemons: (job, epoch, pairs).
    released: Vec<Released>,
    /// The job is ending: no fence is released any more (a daemon that leaves because its
    /// ranks were ended would otherwise release the others' fence without the pairs of
    /// the rank that failed, and each of them would fail on its own and report it).
    holding: bool,
    /// Pipes carrying mpirun's stdin for remote ranks: (node index in `nodes`, rank, read
    /// end until end of file).
    stdin: Vec<(usize, usize, Option<OwnedFd>)>,
    /// How long a daemon has to connect back (`plm_daemon_timeout`).
    connect_timeout: Duration,
    /// What starts daemons on more nodes (for spawned jobs): the agent, the head's
    /// address, the job secret (hex) and the job id.
    agent: crate::launch::RshAgent,
    addr: String,
    secret_hex: String,
    jobid: String,
    /// `plm_link_timeout`, applied to every daemon connection.
    link_timeout: Duration,
    /// Heartbeats with each connected daemon.
    heartbeat: Heartbeat,
    /// `plm_handshake_timeout`: a connection not authenticated by then is dropped.
    handshake_timeout: Duration,
    buf: Vec<u8>,
}

/// A fence released across daemons: (job, 0 for `mpirun`'s own; epoch; the pairs).
pub type Released = (u32, u64, Vec<(String, String)>);

/// What daemons connect back to when `plm_head_address` is not set: every address of the
/// head's interfaces that are up, except loopback and virtual bridges
/// ([`oxmpi_base::net::DEFAULT_IF_EXCLUDE`]), as `addr/prefix+...` (each daemon tries the
/// ones on its own subnets first); the host name if there is none.
fn head_addresses() -> String {
    let mine = oxmpi_base::net::usable();
    if mine.is_empty() {
        return oxmpi_base::output::hostname().to_string();
    }
    oxmpi_base::net::encode(&mine)
}

/// The head's listeners for its daemons (non-blocking) and their port: one on each address
/// of `head` (as [`head_addresses`] writes them, or `plm_head_address`), so that nothing
/// listens on the host's other interfaces; on all addresses when `head` is a host name, or
/// when an address of it is not this host's (a `plm_head_address` that a NAT forwards here),
/// said at verbose level 10.
fn listen_for_daemons(head: &str) -> std::io::Result<(Vec<TcpListener>, u16)> {
    let ips: Vec<std::net::Ipv4Addr> = oxmpi_base::net::decode(head)
        .map(|l| l.into_iter().map(|(ip, _)| ip).collect())
        .unwrap_or_default();
    let (listeners, port) = match oxmpi_base::net::listen_on(&ips, 0) {
        Err(e) if !ips.is_empty() && e.kind() == std::io::ErrorKind::AddrNotAvailable => {
            verbose!(
                PLM,
                10,
                "plm: cannot listen on the head's address {head} ({e}); listening on all addresses"
            );
            oxmpi_base::net::listen_on(&[], 0)?
        }
        r => r?,
    };
    for l in &listeners {
        l.set_nonblocking(true)?;
    }
    verbose!(
        PLM,
        20,
        "plm: listening for daemons on {}",
        listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok((listeners, port))
}

/// The addresses a daemon tries to reach the head at `head` (`--head`): `HOST:PORT`, or
/// `addr/prefix+addr/prefix...:PORT` tried in [`oxmpi_base::net::pair_order`] from our
/// interfaces `local`.
pub fn head_candidates(
    head: &str,
    local: &[oxmpi_base::net::Iface],
) -> std::result::Result<Vec<std::net::SocketAddr>, String> {
    use std::net::ToSocketAddrs;
    let (hosts, port) = head
        .rsplit_once(':')
        .ok_or_else(|| format!("--head {head}: expected HOST:PORT"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("--head {head}: bad port '{port}'"))?;
    if let Ok(list) = oxmpi_base::net::decode(hosts) {
        if !list.is_empty() {
            return Ok(oxmpi_base::net::pair_order(local, &list)
                .into_iter()
                .map(|ip| std::net::SocketAddr::from((ip, port)))
                .collect());
        }
    }
    let all: Vec<std::net::SocketAddr> = (hosts, port)
        .to_socket_addrs()
        .map_err(|e| format!("{HEAD_HINT}: cannot resolve the head's address {hosts}: {e}"))?
        .collect();
    Ok(all)
}

/// Said with every failure to reach the head: the parameter that fixes it.
const HEAD_HINT: &str = "set plm_head_address (--mca plm_head_address ADDR) to an address of mpirun's host that this node can reach";

/// How long a daemon waits for one of the head's addresses to accept its connection.
const HEAD_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The head's limits on its daemons' connections.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// `plm_daemon_timeout`: every daemon must have connected back by then.
    pub connect: Duration,
    /// `plm_link_timeout`: how long a connection may go unanswered (zero: never).
    pub link: Duration,
    /// `plm_heartbeat_interval` and `plm_heartbeat_timeout`.
    pub heartbeat: Heartbeat,
    /// `plm_handshake_timeout`: how long a new connection has to authenticate.
    pub handshake: Duration,
}

/// A token of a descriptor of [`Remotes`] in the head's poll set.
#[derive(Debug, Clone, Copy)]
pub enum RemoteToken {
    /// The listening socket.
    Listener,
    /// A connection not yet assigned to a node.
    Pending(usize),
    /// A node's daemon connection.
    Node(usize),
    /// A stdin pipe of a remote rank.
    Stdin(usize),
}

impl Remotes {
    /// Listen, then start a daemon on each remote node through `agent` (the per-node
    /// launches are given by `launches`: (node index, host name, launch)). `local_has_ranks`
    /// says whether the head's own daemon takes part in fences.
    pub fn start(
        agent: &crate::launch::RshAgent,
        jobid: &str,
        launches: Vec<(usize, String, NodeLaunch)>,
        local_has_ranks: bool,
        head_addr: Option<String>,
        timeouts: Timeouts,
    ) -> Result<Remotes> {
        let os = |what: &str| {
            let what = what.to_string();
            move |e: std::io::Error| RuntimeError::Os { what, source: e }
        };
        let head = head_addr.unwrap_or_else(head_addresses);
        let (listeners, port) = listen_for_daemons(&head).map_err(os("listening for daemons"))?;
        let addr = format!("{head}:{port}");
        let secret = Secret::generate().map_err(|e| RuntimeError::Os {
            what: format!("generating the job secret: {e}"),
            source: std::io::Error::other(e.to_string()),
        })?;
        let secret_hex = secret.to_hex();
        let cfg = Config::new(secret, jobid);
        let participants = launches.len() + usize::from(local_has_ranks);
        let mut me = Remotes {
            listeners,
            cfg,
            nodes: Vec::new(),
            pending: Vec::new(),
            fences: FenceGather::new(participants),
            job_fences: BTreeMap::new(),
            events: Vec::new(),
            released: Vec::new(),
            holding: false,
            stdin: Vec::new(),
            connect_timeout: timeouts.connect,
            agent: agent.clone(),
            addr,
            secret_hex,
            jobid: jobid.to_string(),
            link_timeout: timeouts.link,
            heartbeat: timeouts.heartbeat,
            handshake_timeout: timeouts.handshake,
            buf: vec![0u8; 64 * 1024],
        };
        for (node, host, launch) in launches {
            me.start_node(node, host, launch)?;
        }
        Ok(me)
    }

    /// Start the daemon of allocation node `node` (`host`) through the agent, to run
    /// `launch` (its part of `mpirun`'s job; without ranks for a node that only runs
    /// spawned jobs).
    pub fn start_node(&mut self, node: usize, host: String, launch: NodeLaunch) -> Result<()> {
        let pid = self
            .agent
            .start(&host, node, &self.addr, &self.jobid, &self.secret_hex)?;
        verbose!(
            PLM,
            10,
            "plm: started daemon for node {node} ({host}) through '{}' (pid {pid}); head at {}",
            self.agent.program(),
            self.addr
        );
        self.nodes.push(RemoteNode {
            node: node as u32,
            host,
            running: launch.procs.iter().map(|p| p.rank).collect(),
            done: launch.procs.is_empty(),
            launch,
            agent_pid: pid,
            peer: None,
            connected: false,
            gone: false,
            since: Instant::now(),
            parts: Vec::new(),
            queued: Vec::new(),
        });
        Ok(())
    }

    /// Whether allocation node `node` has a daemon that is not gone.
    pub fn has_node(&self, node: usize) -> bool {
        self.nodes
            .iter()
            .any(|n| n.node as usize == node && !n.gone)
    }

    /// Spawned job `job` runs on `participants` daemons (the head's own included when it
    /// has ranks there): its fences are gathered across them.
    pub fn add_job(&mut self, job: u32, participants: usize) {
        self.job_fences.insert(job, FenceGather::new(participants));
    }

    /// Start `launch`, allocation node `node`'s part of spawned job `job`, on that node's
    /// daemon (now, or once it connected).
    pub fn launch_part(&mut self, node: usize, job: u32, launch: NodeLaunch) {
        let Some(n) = self
            .nodes
            .iter_mut()
            .find(|n| n.node as usize == node && !n.gone)
        else {
            return;
        };
        n.parts.push(JobPart {
            job,
            running: launch.procs.iter().map(|p| p.rank).collect(),
            done: false,
        });
        let m = Msg::ForJob {
            job,
            msg: Box::new(Msg::Launch(launch.to_ctl())),
        };
        match n.peer.as_mut() {
            Some(p) => p.send(&m),
            None => n.queued.push(m),
        }
    }

    /// Whether every remote part of spawned job `job` is done.
    pub fn job_done(&self, job: u32) -> bool {
        self.nodes
            .iter()
            .flat_map(|n| &n.parts)
            .all(|p| p.job != job || p.done)
    }

    /// Answers the spawn request of `rank` of job `job` on node `node` (see
    /// [`RemoteEvent::Spawn`]).
    pub fn spawn_done(
        &mut self,
        node: usize,
        job: u32,
        rank: usize,
        v2: bool,
        result: std::result::Result<(String, Vec<i32>), String>,
    ) {
        if let Some(p) = self.nodes.get_mut(node).and_then(|n| n.peer.as_mut()) {
            p.send(&Msg::SpawnDone {
                job,
                rank: rank as u32,
                v2,
                result,
            });
        }
    }

    /// Pipes whose bytes are forwarded to the remote ranks that read stdin (as `Io`
    /// messages), with those ranks; the head writes mpirun's stdin into them.
    pub fn stdin_targets(&mut self) -> Result<Vec<(usize, std::fs::File)>> {
        let mut out = Vec::new();
        for (i, n) in self.nodes.iter().enumerate() {
            for p in n.launch.procs.iter().filter(|p| p.stdin) {
                let (r, w) = sys::pipe().map_err(|e| RuntimeError::Os {
                    what: format!("creating the stdin pipe of rank {}", p.rank),
                    source: e,
                })?;
                let _ = sys::set_nonblocking(r.as_raw_fd());
                self.stdin.push((i, p.rank, Some(r)));
                out.push((p.rank, std::fs::File::from(w)));
            }
        }
        Ok(out)
    }

    fn forward_stdin(&mut self, k: usize) {
        let (i, rank, Some(fd)) = &self.stdin[k] else {
            return;
        };
        let (i, rank) = (*i, *rank as u32);
        let (data, eof) = match sys::read_fd(fd.as_raw_fd(), &mut self.buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Ok(0) | Err(_) => (Vec::new(), true),
            Ok(n) => (self.buf[..n].to_vec(), false),
        };
        if eof {
            self.stdin[k].2 = None;
        }
        trace_stdin(rank, data.len(), eof);
        if let Some(p) = self.nodes[i].peer.as_mut() {
            p.send(&Msg::Io {
                rank,
                stream: IoStream::Stdin,
                data,
                eof,
            });
        }
    }

    /// Add the descriptors to poll.
    pub fn poll_fds(&self, fds: &mut Vec<sys::pollfd>, toks: &mut Vec<RemoteToken>) {
        for l in &self.listeners {
            fds.push(sys::pollfd {
                fd: l.as_raw_fd(),
                events: sys::POLLIN,
                revents: 0,
            });
            toks.push(RemoteToken::Listener);
        }
        for (i, p) in self.pending.iter().enumerate() {
            fds.push(p.pollfd());
            toks.push(RemoteToken::Pending(i));
        }
        for (i, n) in self.nodes.iter().enumerate() {
            if let Some(p) = &n.peer {
                fds.push(p.pollfd());
                toks.push(RemoteToken::Node(i));
            }
        }
        for (k, (i, _, fd)) in self.stdin.iter().enumerate() {
            // Forward only to connected daemons, and not faster than they take it.
            let ready = self.nodes[*i]
                .peer
                .as_ref()
                .is_some_and(|p| p.conn.pending_output().len() < (1 << 20));
            if let (Some(fd), true) = (fd, ready) {
                fds.push(sys::pollfd {
                    fd: fd.as_raw_fd(),
                    events: sys::POLLIN,
                    revents: 0,
                });
                toks.push(RemoteToken::Stdin(k));
            }
        }
    }

    /// A descriptor from [`Remotes::poll_fds`] is ready. Call [`Remotes::after_ready`] once
    /// all ready descriptors were handled.
    pub fn on_ready(&mut self, tok: RemoteToken, revents: i16) {
        match tok {
            RemoteToken::Listener => self.accept(),
            RemoteToken::Pending(i) => {
                let p = &mut self.pending[i];
                if revents & sys::POLLOUT != 0 {
                    p.flush();
                }
                p.read(&mut self.buf);
                p.flush();
            }
            RemoteToken::Node(i) => {
                if let Some(p) = self.nodes[i].peer.as_mut() {
                    if revents & sys::POLLOUT != 0 {
                        p.flush();
                    }
                    if revents & (sys::POLLIN | sys::POLLHUP | sys::POLLERR) != 0 {
                        p.read(&mut self.buf);
                    }
                }
                self.node_events(i);
            }
            RemoteToken::Stdin(k) => self.forward_stdin(k),
        }
    }

    /// Process handshakes of new connections (assigning authenticated ones to their node).
    pub fn after_ready(&mut self) {
        let mut i = 0;
        while i < self.pending.len() {
            let mut assign = None;
            let mut drop = None;
            while let Some(ev) = self.pending[i].conn.poll_event() {
                match ev {
                    Event::Authenticated { peer_node } => assign = peer_node,
                    Event::Dropped { reason } => drop = Some(reason.to_string()),
                    Event::PeerClosed { phase, state } => {
                        drop = Some(format!("closed during handshake ({phase:?}, {state:?})"))
                    }
                    Event::Message(_) => {}
                }
            }
            self.pending[i].flush();
            let peer_addr = self.pending[i]
                .stream
                .peer_addr()
                .map_or_else(|_| "?".to_string(), |a| a.to_string());
            if let Some(why) = drop {
                msg(&format!(
                    "dropped a control connection from {peer_addr}: {why}"
                ));
                self.pending.swap_remove(i);
                continue;
            }
            if let Some(node) = assign {
                let p = self.pending.swap_remove(i);
                match self
                    .nodes
                    .iter()
                    .position(|n| n.node == node && !n.connected && !n.gone)
                {
                    Some(k) => {
                        verbose!(
                            PLM,
                            10,
                            "plm: daemon of node {node} ({}) connected from {peer_addr}",
                            self.nodes[k].host
                        );
                        let n = &mut self.nodes[k];
                        let launch = n.launch.to_ctl();
                        n.peer = Some(p);
                        n.connected = true;
                        if let Some(p) = n.peer.as_mut() {
                            p.send(&Msg::Launch(launch));
                            for m in n.queued.drain(..) {
                                p.send(&m);
                            }
                        }
                        self.node_events(k);
                    }
                    None => msg(&format!(
                        "dropped a control connection from {peer_addr}: unexpected node {node}"
                    )),
                }
                continue;
            }
            if self.pending[i].closed {
                self.pending.swap_remove(i);
                continue;
            }
            i += 1;
        }
    }

    /// Accepts what waits on every listener (they do not block).
    fn accept(&mut self) {
        for i in 0..self.listeners.len() {
            loop {
                match self.listeners[i].accept() {
                    Ok((s, _)) => {
                        let _ = oxmpi_base::net::set_link_timeout(&s, self.link_timeout);
                        let Ok(nonce) = random_nonce() else { continue };
                        let mut conn = Connection::server(self.cfg.clone(), nonce);
                        conn.on_connected();
                        if let Ok(p) = Peer::new(s, conn) {
                            self.pending.push(p);
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        }
    }

    fn node_events(&mut self, i: usize) {
        let Some(p) = self.nodes[i].peer.as_mut() else {
            return;
        };
        let mut lost = None;
        let mut msgs = Vec::new();
        while let Some(ev) = p.conn.poll_event() {
            match ev {
                Event::Message(m) => msgs.push(m),
                Event::Dropped { reason } => lost = Some(format!("protocol error: {reason}")),
                Event::PeerClosed { .. } => lost = Some(p.lost_reason()),
                Event::Authenticated { .. } => {}
            }
        }
        if p.closed && lost.is_none() {
            lost = Some(p.lost_reason());
        }
        for m in msgs {
            self.on_msg(i, 0, m);
        }
        if let Some(why) = lost {
            self.nodes[i].peer = None;
            self.node_gone(i, &why);
        }
    }

    fn node_gone(&mut self, i: usize, why: &str) {
        let n = &mut self.nodes[i];
        if n.gone {
            return;
        }
        n.gone = true;
        let mut left = Vec::new();
        for p in n.parts.iter_mut().filter(|p| !p.done) {
            p.done = true;
            left.push(p.job);
            if !p.running.is_empty() {
                self.events.push(RemoteEvent::DaemonLost {
                    host: n.host.clone(),
                    message: format!(
                        "the daemon on host {} went away ({why}) while rank(s) {:?} of spawned job {} ran",
                        n.host, p.running, p.job
                    ),
                });
                p.running.clear();
            }
        }
        for job in left {
            self.leave_job(job);
        }
        let n = &mut self.nodes[i];
        if n.done {
            return;
        }
        n.done = true;
        if !n.running.is_empty() {
            let message = if n.connected {
                format!(
                    "the daemon on host {} went away ({why}) while rank(s) {:?} ran",
                    n.host, n.running
                )
            } else {
                format!(
                    "the daemon on host {} was not started or never connected back ({why})",
                    n.host
                )
            };
            self.events.push(RemoteEvent::DaemonLost {
                host: n.host.clone(),
                message,
            });
            n.running.clear();
        }
        // A lost node no longer takes part in fences.
        let released = self.fences.leave();
        self.release(released);
    }

    /// Spawned job `job` no longer waits for one of its daemons in fences.
    fn leave_job(&mut self, job: u32) {
        if let Some(g) = self.job_fences.get_mut(&job) {
            let released = g.leave();
            self.release_job(job, released);
        }
    }

    fn on_msg(&mut self, i: usize, job: u32, m: Msg) {
        let host = self.nodes[i].host.clone();
        let ev = |event| RemoteEvent::Daemon {
            host: host.clone(),
            job,
            event,
        };
        match m {
            Msg::ForJob { job: 0, .. } => msg(&format!(
                "ignored a message for job 0 wrapped by the daemon on {host}"
            )),
            Msg::ForJob { job, msg } if job != 0 => self.on_msg(i, job, *msg),
            Msg::Spawn {
                job,
                rank,
                v2,
                request,
            } => self.events.push(RemoteEvent::Spawn {
                node: i,
                job,
                rank: rank as usize,
                v2,
                request,
            }),
            Msg::RankExited {
                rank,
                pid,
                status,
                missing_finalize,
            } => {
                let n = &mut self.nodes[i];
                if job == 0 {
                    n.running.retain(|&r| r != rank as usize);
                } else if let Some(p) = n.parts.iter_mut().find(|p| p.job == job) {
                    p.running.retain(|&r| r != rank as usize);
                }
                let exit = match status {
                    ExitStatus::Code(c) => RankExit::Code(c),
                    ExitStatus::Signal(s) => RankExit::Signal(s),
                };
                self.events.push(ev(DaemonEvent::RankExited {
                    rank: rank as usize,
                    pid: pid as i32,
                    exit,
                    missing_finalize,
                }));
            }
            Msg::Io {
                stream: stream @ (IoStream::Stdout | IoStream::Stderr),
                data,
                ..
            } => {
                let fd = if stream == IoStream::Stdout { 1 } else { 2 };
                if let Err(e) = sys::write_all_fd(fd, &data) {
                    if e.kind() == std::io::ErrorKind::BrokenPipe {
                        self.events
                            .push(ev(DaemonEvent::OutputClosed { fd: fd as RawFd }));
                    }
                }
            }
            Msg::PmiAbort {
                rank,
                code,
                message,
            } => {
                self.events.push(ev(DaemonEvent::Abort {
                    rank: Some(rank as usize),
                    pid: None,
                    code,
                    message,
                }));
            }
            Msg::FenceContribution { epoch, puts } if job == 0 => self.contribute(epoch, puts),
            Msg::FenceContribution { epoch, puts } => self.contribute_job(job, epoch, puts),
            Msg::Error { message } => {
                self.events.push(RemoteEvent::DaemonLost {
                    host: host.clone(),
                    message,
                });
            }
            Msg::Shutdown if job != 0 => {
                verbose!(
                    ERRMGR,
                    10,
                    "errmgr: daemon on {host} is done with spawned job {job}"
                );
                let part = self.nodes[i]
                    .parts
                    .iter_mut()
                    .find(|p| p.job == job && !p.done);
                if let Some(p) = part {
                    p.done = true;
                    self.leave_job(job);
                }
            }
            Msg::Shutdown => {
                verbose!(ERRMGR, 10, "errmgr: daemon on {host} is done");
                if !std::mem::replace(&mut self.nodes[i].done, true) {
                    // Its ranks are gone (under fault tolerance, while others run on):
                    // the fences of the survivors no longer wait for it.
                    let released = self.fences.leave();
                    self.release(released);
                }
            }
            Msg::DaemonReady { .. } | Msg::RankStarted { .. } | Msg::Heartbeat => {}
            other => msg(&format!(
                "ignored an unexpected control message from the daemon on {host}: {other:?}"
            )),
        }
    }

    /// A fence contribution of the head's own daemon or of a remote one; released fences
    /// are sent to the remote daemons and kept for [`Remotes::take_released`].
    pub fn contribute(&mut self, epoch: u64, puts: Vec<(String, String)>) {
        let released = self.fences.contribute(epoch, puts);
        self.release(released);
    }

    /// The job is ending: from now on no fence is released, so ranks still waiting in one
    /// stay there until they are ended.
    pub fn hold_fences(&mut self) {
        self.holding = true;
    }

    fn release(&mut self, released: Vec<(u64, Vec<(String, String)>)>) {
        if self.holding {
            return;
        }
        for (epoch, puts) in released {
            verbose!(
                crate::streams::PMI,
                20,
                "pmi: fence {epoch} complete across {} daemon(s), {} pair(s)",
                self.fences.participants(),
                puts.len()
            );
            for n in self.nodes.iter_mut().filter(|n| !n.launch.procs.is_empty()) {
                if let Some(p) = n.peer.as_mut() {
                    p.send(&Msg::FenceRelease {
                        epoch,
                        puts: puts.clone(),
                    });
                }
            }
            self.released.push((0, epoch, puts));
        }
    }

    /// A fence contribution to spawned job `job` (of the head's own daemon or a remote
    /// one), as [`Remotes::contribute`].
    pub fn contribute_job(&mut self, job: u32, epoch: u64, puts: Vec<(String, String)>) {
        if let Some(g) = self.job_fences.get_mut(&job) {
            let released = g.contribute(epoch, puts);
            self.release_job(job, released);
        }
    }

    fn release_job(&mut self, job: u32, released: Vec<(u64, Vec<(String, String)>)>) {
        if self.holding {
            return;
        }
        for (epoch, puts) in released {
            verbose!(
                crate::streams::PMI,
                20,
                "pmi: fence {epoch} of spawned job {job} complete, {} pair(s)",
                puts.len()
            );
            for n in &mut self.nodes {
                if !n.parts.iter().any(|p| p.job == job && !p.done) {
                    continue;
                }
                if let Some(p) = n.peer.as_mut() {
                    p.send(&Msg::ForJob {
                        job,
                        msg: Box::new(Msg::FenceRelease {
                            epoch,
                            puts: puts.clone(),
                        }),
                    });
                }
            }
            self.released.push((job, epoch, puts));
        }
    }

    /// Fences released since the last call, for the head's own daemons: (job, epoch,
    /// pairs), job 0 being `mpirun`'s own.
    pub fn take_released(&mut self) -> Vec<Released> {
        std::mem::take(&mut self.released)
    }

    /// Events since the last call.
    pub fn take_events(&mut self) -> Vec<RemoteEvent> {
        std::mem::take(&mut self.events)
    }

    /// Send `sig` to every remote rank still running.
    pub fn signal(&mut self, sig: i32) {
        for n in &mut self.nodes {
            if let Some(p) = n.peer.as_mut() {
                p.send(&Msg::Signal { signal: sig });
            }
        }
    }

    /// When [`Remotes::check_connect_timeout`] must run next (`None`: all connected).
    pub fn connect_deadline(&self) -> Option<Instant> {
        self.nodes
            .iter()
            .filter(|n| !n.connected && !n.gone)
            .map(|n| n.since + self.connect_timeout)
            .min()
    }

    /// Gives up every node that has not finished (the job is ending and it does not
    /// answer): its launch agent is killed and the node counts as done. Returns the names
    /// of the nodes given up.
    pub fn give_up(&mut self, why: &str) -> Vec<String> {
        let mut out = Vec::new();
        for i in 0..self.nodes.len() {
            if self.nodes[i].gone || self.nodes[i].finished() {
                continue;
            }
            verbose!(
                ERRMGR,
                10,
                "errmgr: giving up node {} ({why})",
                self.nodes[i].host
            );
            if self.nodes[i].agent_pid > 0 {
                sys::kill_group(self.nodes[i].agent_pid, sys::SIGKILL);
            }
            self.nodes[i].peer = None;
            // Its ranks' fate is unknown; the job already has its ending.
            self.nodes[i].running.clear();
            for p in &mut self.nodes[i].parts {
                p.running.clear();
            }
            out.push(self.nodes[i].host.clone());
            self.node_gone(i, why);
        }
        out
    }

    /// Sends the heartbeats that are due to connected daemons, and ends the nodes whose
    /// daemon has been silent for longer than `plm_heartbeat_timeout` (a stopped or hung
    /// daemon, a node cut off): its launch agent is killed and the job hears the node's
    /// name.
    pub fn heartbeat(&mut self, now: Instant) {
        let hb = self.heartbeat;
        for i in 0..self.nodes.len() {
            let n = &mut self.nodes[i];
            if n.gone || n.finished() || !n.connected {
                continue;
            }
            let Some(p) = n.peer.as_mut() else { continue };
            match hb.check(now, p.heard, p.beat) {
                Beat::Idle => {}
                Beat::Send => {
                    p.send(&Msg::Heartbeat);
                    p.beat = now;
                }
                Beat::Lost => {
                    if n.agent_pid > 0 {
                        sys::kill_group(n.agent_pid, sys::SIGKILL);
                    }
                    n.peer = None;
                    self.node_gone(i, &hb.reason());
                }
            }
        }
    }

    /// When [`Remotes::heartbeat`] must run next (`None`: no connected daemon).
    pub fn next_heartbeat(&self) -> Option<Instant> {
        self.nodes
            .iter()
            .filter(|n| n.connected && !n.gone && !n.finished())
            .filter_map(|n| n.peer.as_ref())
            .filter_map(|p| self.heartbeat.next(p.heard, p.beat))
            .min()
    }

    /// Drops connections that have not authenticated within `plm_handshake_timeout`.
    pub fn expire_handshakes(&mut self, now: Instant) {
        let limit = self.handshake_timeout;
        self.pending.retain(|p| {
            let keep = now.saturating_duration_since(p.since) < limit;
            if !keep {
                let from = p
                    .stream
                    .peer_addr()
                    .map_or_else(|_| "?".to_string(), |a| a.to_string());
                msg(&format!(
                    "dropped a control connection from {from}: no authentication within plm_handshake_timeout"
                ));
            }
            keep
        });
    }

    /// Give up daemons that did not connect back in time (their agent is killed).
    pub fn check_connect_timeout(&mut self, now: Instant) {
        for i in 0..self.nodes.len() {
            let n = &self.nodes[i];
            if n.connected || n.gone || now < n.since + self.connect_timeout {
                continue;
            }
            if n.agent_pid > 0 {
                sys::kill_group(n.agent_pid, sys::SIGKILL);
            }
            self.node_gone(i, "it did not connect back in time; see plm_daemon_timeout");
        }
    }

    /// Whether every remote daemon finished (its ranks exited, output drained) or is gone.
    pub fn all_done(&self) -> bool {
        self.nodes.iter().all(|n| n.gone || n.finished())
    }

    /// A child of the head ended: if it is a launch agent whose daemon is not done, the node
    /// is lost.
    pub fn on_child_exit(&mut self, pid: i32, exit: RankExit) {
        let Some(i) = self.nodes.iter().position(|n| n.agent_pid == pid) else {
            return;
        };
        self.nodes[i].agent_pid = 0;
        let live = |n: &RemoteNode| !n.gone && !n.finished();
        if live(&self.nodes[i]) {
            // Give its connection the chance to deliver what it sent before.
            if let Some(p) = self.nodes[i].peer.as_mut() {
                p.read(&mut self.buf);
                self.node_events(i);
            }
            if live(&self.nodes[i]) {
                let why = match exit {
                    RankExit::Code(c) => format!("launch agent exited with status {c}"),
                    RankExit::Signal(s) => format!("launch agent killed by signal {s}"),
                };
                self.nodes[i].peer = None;
                self.node_gone(i, &why);
            }
        }
    }

    /// End of job: tell every daemon to exit, wait (bounded) for them and their agents.
    pub fn shutdown(&mut self) {
        for n in &mut self.nodes {
            if let Some(p) = n.peer.as_mut() {
                p.send(&Msg::Shutdown);
            }
        }
        let until = Instant::now() + SHUTDOWN_GRACE;
        loop {
            for n in &mut self.nodes {
                if let Some(p) = n.peer.as_mut() {
                    p.flush();
                    p.read(&mut self.buf);
                    while p.conn.poll_event().is_some() {}
                    if p.closed || p.conn.state() == State::Closed {
                        n.peer = None;
                    }
                }
                if n.agent_pid > 0 && sys::try_reap(n.agent_pid) {
                    n.agent_pid = 0;
                }
            }
            if self
                .nodes
                .iter()
                .all(|n| n.peer.is_none() && n.agent_pid == 0)
                || Instant::now() >= until
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        for n in &mut self.nodes {
            n.peer = None;
            if n.agent_pid > 0 {
                verbose!(PLM, 10, "plm: killing launch agent pid {}", n.agent_pid);
                sys::kill_group(n.agent_pid, sys::SIGKILL);
                let _ = sys::wait(n.agent_pid);
                n.agent_pid = 0;
            }
        }
    }
}

/// The `iof` trace of stdin bytes forwarded to `rank` (on the head and on the daemon).
fn trace_stdin(rank: u32, len: usize, eof: bool) {
    verbose!(
        crate::streams::IOF,
        20,
        "iof: stdin for rank {rank}: {len} byte(s){}",
        if eof { ", end of file" } else { "" }
    );
}

fn msg(text: &str) {
    let line = format!("mpirun: {text}\n");
    let _ = sys::write_all_fd(2, line.as_bytes());
}

/// Arguments of `oxmpid` (see [`oxmpid_main`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonArgs {
    /// `host:port` of the head.
    pub head: String,
    /// How long the connection to the head may go unanswered (`--link-timeout`, seconds;
    /// zero or absent: never).
    pub link_timeout: Duration,
    /// Heartbeats with the head (`--heartbeat INTERVAL,TIMEOUT`; absent: none).
    pub heartbeat: Heartbeat,
    /// Node index announced to the head.
    pub node: u32,
    /// Job id (must match the head's).
    pub jobid: String,
}

/// Usage line of `oxmpid`.
pub const OXMPID_USAGE: &str = "usage: oxmpid --head HOST:PORT --node N --jobid ID [--link-timeout SECS] [--heartbeat INTERVAL,TIMEOUT] (job secret as one hex line on stdin, or in OXMPI_CTL_SECRET)";

/// Parse `oxmpid`'s arguments.
pub fn parse_daemon_args(args: &[String]) -> std::result::Result<DaemonArgs, String> {
    let (mut head, mut node, mut jobid) = (None, None, None);
    let mut link_timeout = Duration::ZERO;
    let mut heartbeat = Heartbeat::default();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("option {a} needs a value"))
        };
        match a.as_str() {
            "--head" => head = Some(val()?),
            "--node" => {
                let v = val()?;
                node = Some(
                    v.parse::<u32>()
                        .map_err(|_| format!("bad node index '{v}'"))?,
                );
            }
            "--jobid" => jobid = Some(val()?),
            "--link-timeout" => {
                let v = val()?;
                link_timeout = v
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(Duration::from_secs_f64)
                    .ok_or_else(|| format!("bad link timeout '{v}'"))?;
            }
            "--heartbeat" => heartbeat = Heartbeat::parse(&val()?)?,
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    match (head, node, jobid) {
        (Some(head), Some(node), Some(jobid)) => Ok(DaemonArgs {
            head,
            node,
            jobid,
            link_timeout,
            heartbeat,
        }),
        _ => Err("--head, --node and --jobid are required".into()),
    }
}

/// Read the job secret: `OXMPI_CTL_SECRET`, else the first line of stdin (read byte by byte
/// so that nothing after it is consumed).
fn read_secret() -> std::result::Result<Secret, String> {
    if let Ok(hex) = std::env::var(SECRET_ENV) {
        // Ranks must not inherit it.
        std::env::remove_var(SECRET_ENV);
        return Secret::from_hex(hex.trim()).map_err(|e| format!("bad {SECRET_ENV}: {e}"));
    }
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    loop {
        match sys::read_fd(0, &mut b) {
            Ok(1) if b[0] != b'\n' && line.len() < 1024 => line.push(b[0]),
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading the job secret from stdin: {e}")),
        }
    }
    let text = String::from_utf8_lossy(&line);
    Secret::from_hex(text.trim()).map_err(|e| format!("bad job secret on stdin: {e}"))
}

fn dlog(text: &str) {
    let line = format!(
        "oxmpid[{}:{}]: {text}\n",
        oxmpi_base::output::hostname(),
        std::process::id()
    );
    let _ = sys::write_all_fd(2, line.as_bytes());
}

/// Connect and authenticate; returns the peer once the head accepted us.
fn connect(args: &DaemonArgs, secret: Secret) -> std::result::Result<Peer, String> {
    let local = oxmpi_base::net::interfaces();
    let mut failures = Vec::new();
    let mut stream = None;
    for a in head_candidates(&args.head, &local)? {
        match TcpStream::connect_timeout(&a, HEAD_CONNECT_TIMEOUT) {
            Ok(s) => {
                let _ = oxmpi_base::net::set_link_timeout(&s, args.link_timeout);
                stream = Some(s);
                break;
            }
            Err(e) => failures.push(format!("{a}: {e}")),
        }
    }
    let stream = stream.ok_or_else(|| {
        format!(
            "cannot connect to the head ({}); {HEAD_HINT}",
            failures.join("; ")
        )
    })?;
    let nonce = random_nonce().map_err(|e| e.to_string())?;
    let mut conn = Connection::client(Config::new(secret, args.jobid.clone()), args.node, nonce);
    conn.on_connected();
    let mut peer = Peer::new(stream, conn).map_err(|e| e.to_string())?;
    let mut buf = vec![0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        peer.flush();
        while let Some(ev) = peer.conn.poll_event() {
            match ev {
                Event::Authenticated { .. } => return Ok(peer),
                Event::Dropped { reason } => {
                    return Err(format!("authentication with the head at {} failed, connection dropped: {reason}", args.head))
                }
                Event::PeerClosed { .. } => {
                    return Err(format!(
                        "the head at {} closed the connection during authentication (wrong secret or job?)",
                        args.head
                    ))
                }
                Event::Message(_) => {}
            }
        }
        if peer.closed {
            return Err(format!("lost the connection to the head at {}", args.head));
        }
        if Instant::now() >= deadline {
            return Err(format!("authentication with {} timed out", args.head));
        }
        let mut fds = [peer.pollfd()];
        let _ = sys::poll(&mut fds, 1000);
        if fds[0].revents != 0 {
            peer.read(&mut buf);
        }
    }
}

/// The `oxmpid` program: a node daemon started by a launch agent (see the module
/// documentation). Returns its exit status.
pub fn oxmpid_main(args: Vec<String>) -> i32 {
    sys::ensure_std_fds();
    // The launch agent's binding (srun's, without a warning-printing --cpu-bind=none) is
    // not our ranks': each gets mpirun's binding or the whole node.
    sys::unbind_self();
    let args = match parse_daemon_args(&args) {
        Ok(a) => a,
        Err(e) => {
            dlog(&format!("{e}\n{OXMPID_USAGE}"));
            return 2;
        }
    };
    let secret = match read_secret() {
        Ok(s) => s,
        Err(e) => {
            dlog(&e);
            return 1;
        }
    };
    let peer = match connect(&args, secret) {
        Ok(p) => p,
        Err(e) => {
            dlog(&e);
            return 1;
        }
    };
    match run_daemon(peer, &args) {
        Ok(code) => code,
        Err(e) => {
            dlog(&e.to_string());
            1
        }
    }
}

fn run_daemon(mut peer: Peer, args: &DaemonArgs) -> Result<i32> {
    let sigfd = sys::install_signal_pipe().map_err(|e| RuntimeError::Os {
        what: "installing signal handlers".into(),
        source: e,
    })?;
    peer.send(&Msg::DaemonReady {
        node: args.node,
        host: oxmpi_base::output::hostname().to_string(),
        pid: std::process::id(),
        cpus: crate::topo::LocalTopology::detect().num_cores() as u32,
    });
    let mut buf = vec![0u8; 64 * 1024];
    // Wait for the launch.
    let spec = loop {
        let mut got = None;
        while let Some(ev) = peer.conn.poll_event() {
            match ev {
                Event::Message(Msg::Launch(l)) => {
                    // Later messages (stdin, fences) stay queued for the main loop.
                    got = Some(l);
                    break;
                }
                Event::Message(Msg::Shutdown) => return Ok(0),
                Event::Message(_) | Event::Authenticated { .. } => {}
                Event::Dropped { .. } | Event::PeerClosed { .. } => {
                    dlog("the head went away before the launch");
                    return Ok(1);
                }
            }
        }
        if let Some(l) = got {
            break l;
        }
        if peer.closed {
            dlog("the head went away before the launch");
            return Ok(1);
        }
        let mut fds = [peer.pollfd()];
        let _ = sys::poll(&mut fds, 1000);
        if fds[0].revents != 0 {
            peer.read(&mut buf);
        }
        peer.flush();
    };
    let session = SessionDir::create()?;
    let mut launch = NodeLaunch::from_ctl(spec);
    apply_verbosity(&launch);
    let dir = session.path().display().to_string();
    for p in &mut launch.procs {
        // This node's own session directory (shared-memory files of its ranks).
        p.env.push(("OXMPI_JOB_DIR".into(), dir.clone()));
    }
    let mut daemon = LocalDaemon::new(launch, true);
    let mut code = 0;
    // Ranks reading stdin: (rank, pipe, bytes not yet written, end of file received).
    let mut stdins: Vec<StdinSink> = Vec::new();
    match daemon.launch() {
        Ok(v) => {
            for (rank, f) in v {
                let _ = sys::set_nonblocking(f.as_raw_fd());
                stdins.push((rank, Some(f), Vec::new(), false));
            }
        }
        Err(e) => {
            peer.send(&Msg::Error {
                message: e.to_string(),
            });
            daemon.signal_running(sys::SIGKILL);
        }
    }
    // This node's parts of spawned jobs (`Msg::ForJob` launches): their daemons, and
    // (job number, when their groups were killed, said done) in the same order.
    let mut parts: Vec<LocalDaemon> = Vec::new();
    let mut part_state: Vec<PartState> = Vec::new();
    let mut kill_at: Option<Instant> = None;
    let mut groups_killed_at: Option<Instant> = None;
    let mut said_done = false;
    let mut fds: Vec<sys::pollfd> = Vec::new();
    let mut dtoks = Vec::new();
    let mut toks: Vec<DaemonPoll> = Vec::new();
    loop {
        while let Some(ev) = daemon.poll_event() {
            if let Some(m) = event_msg(ev, 0) {
                peer.send(&m);
            }
        }
        for (d, st) in parts.iter_mut().zip(&part_state) {
            while let Some(ev) = d.poll_event() {
                if let Some(m) = event_msg(ev, st.job) {
                    peer.send(&m);
                }
            }
        }
        let now = Instant::now();
        if daemon.all_exited() {
            if groups_killed_at.is_none() {
                daemon.kill_all_groups();
                groups_killed_at = Some(now);
            }
            let drain_over = groups_killed_at.is_some_and(|t| now.duration_since(t) >= DRAIN_GRACE);
            if !said_done && (daemon.all_drained() || drain_over) {
                peer.send(&Msg::Shutdown);
                said_done = true;
            }
        }
        for (d, st) in parts.iter().zip(part_state.iter_mut()) {
            if st.done_sent || !d.all_exited() {
                continue;
            }
            let killed = *st.groups_killed_at.get_or_insert_with(|| {
                d.kill_all_groups();
                now
            });
            if d.all_drained() || now.duration_since(killed) >= DRAIN_GRACE {
                peer.send(&Msg::ForJob {
                    job: st.job,
                    msg: Box::new(Msg::Shutdown),
                });
                st.done_sent = true;
            }
        }
        if kill_at.is_some_and(|t| now >= t) {
            daemon.signal_running(sys::SIGKILL);
            for d in &parts {
                d.signal_running(sys::SIGKILL);
            }
            kill_at = None;
        }
        // Control messages.
        let mut head_gone = peer.closed.then(|| peer.lost_reason());
        while let Some(ev) = peer.conn.poll_event() {
            match ev {
                Event::Message(Msg::FenceRelease { epoch, puts }) => {
                    daemon.fence_complete(epoch, puts)
                }
                Event::Message(Msg::Io {
                    rank,
                    stream: IoStream::Stdin,
                    data,
                    eof,
                }) => {
                    trace_stdin(rank, data.len(), eof);
                    if let Some(s) = stdins.iter_mut().find(|s| s.0 == rank as usize) {
                        s.2.extend_from_slice(&data);
                        s.3 |= eof;
                        flush_stdin(s);
                    }
                }
                Event::Message(Msg::Signal { signal }) => {
                    verbose!(ERRMGR, 10, "errmgr: head asks for signal {signal}");
                    daemon.signal_running(signal);
                    for d in &parts {
                        d.signal_running(signal);
                    }
                    if signal != sys::SIGUSR1 && signal != sys::SIGUSR2 && kill_at.is_none() {
                        kill_at = Some(Instant::now() + KILL_GRACE);
                    }
                }
                Event::Message(Msg::Abort { code: c, reason }) => {
                    verbose!(ERRMGR, 10, "errmgr: head aborts the job ({c}): {reason}");
                    daemon.signal_running(sys::SIGTERM);
                    for d in &parts {
                        d.signal_running(sys::SIGTERM);
                    }
                    kill_at = Some(Instant::now() + KILL_GRACE);
                }
                Event::Message(Msg::Shutdown) => {
                    daemon.kill_all_groups();
                    for d in &parts {
                        d.kill_all_groups();
                    }
                    if !daemon.all_exited() || !parts.iter().all(LocalDaemon::all_exited) {
                        code = 1;
                    }
                    peer.flush();
                    return Ok(code);
                }
                Event::Message(Msg::SpawnDone {
                    job,
                    rank,
                    v2,
                    result,
                }) => {
                    let d = if job == 0 {
                        Some(&mut daemon)
                    } else {
                        part_state
                            .iter()
                            .position(|s| s.job == job)
                            .map(|k| &mut parts[k])
                    };
                    if let Some(d) = d {
                        d.spawn_done(rank as usize, v2, result);
                    }
                }
                Event::Message(Msg::ForJob { job, msg }) => match *msg {
                    Msg::Launch(l) => {
                        let mut launch = NodeLaunch::from_ctl(l);
                        apply_verbosity(&launch);
                        for p in &mut launch.procs {
                            p.env.push(("OXMPI_JOB_DIR".into(), dir.clone()));
                        }
                        verbose!(
                            PLM,
                            10,
                            "plm: starting {} process(es) of spawned job {}",
                            launch.procs.len(),
                            launch.jobid
                        );
                        let mut d = LocalDaemon::new(launch, true);
                        if let Err(e) = d.launch() {
                            peer.send(&Msg::ForJob {
                                job,
                                msg: Box::new(Msg::Error {
                                    message: e.to_string(),
                                }),
                            });
                            d.signal_running(sys::SIGKILL);
                        }
                        parts.push(d);
                        part_state.push(PartState {
                            job,
                            groups_killed_at: None,
                            done_sent: false,
                        });
                    }
                    Msg::FenceRelease { epoch, puts } => {
                        if let Some(k) = part_state.iter().position(|s| s.job == job) {
                            parts[k].fence_complete(epoch, puts);
                        }
                    }
                    other => dlog(&format!(
                        "ignored an unexpected message of spawned job {job} from the head: {other:?}"
                    )),
                },
                Event::Message(_) | Event::Authenticated { .. } => {}
                Event::Dropped { .. } | Event::PeerClosed { .. } => {
                    head_gone = Some(peer.lost_reason())
                }
            }
        }
        match args.heartbeat.check(now, peer.heard, peer.beat) {
            Beat::Idle => {}
            Beat::Send => {
                peer.send(&Msg::Heartbeat);
                peer.beat = now;
            }
            Beat::Lost => head_gone = head_gone.or_else(|| Some(args.heartbeat.reason())),
        }
        if let Some(why) = head_gone {
            // The head died or cannot be reached: leave nothing behind.
            dlog(&format!(
                "lost the connection to the head ({why}); killing this node's ranks"
            ));
            daemon.kill_all_groups();
            for d in &parts {
                d.kill_all_groups();
            }
            drop(session);
            return Ok(1);
        }
        fds.clear();
        toks.clear();
        fds.push(sys::pollfd {
            fd: sigfd.as_raw_fd(),
            events: sys::POLLIN,
            revents: 0,
        });
        toks.push(DaemonPoll::Signal);
        fds.push(peer.pollfd());
        toks.push(DaemonPoll::Head);
        dtoks.clear();
        daemon.poll_fds(&mut fds, &mut dtoks);
        toks.extend(dtoks.iter().map(|&t| DaemonPoll::Main(t)));
        for (k, d) in parts.iter().enumerate() {
            dtoks.clear();
            d.poll_fds(&mut fds, &mut dtoks);
            toks.extend(dtoks.iter().map(|&t| DaemonPoll::Part(k, t)));
        }
        for (k, s) in stdins.iter().enumerate() {
            if let (Some(f), false) = (&s.1, s.2.is_empty()) {
                fds.push(sys::pollfd {
                    fd: f.as_raw_fd(),
                    events: sys::POLLOUT,
                    revents: 0,
                });
                toks.push(DaemonPoll::Stdin(k));
            }
        }
        let parts_killed = part_state
            .iter()
            .filter(|s| !s.done_sent)
            .filter_map(|s| s.groups_killed_at)
            .min();
        let wake = [
            kill_at,
            groups_killed_at.map(|t| t + DRAIN_GRACE),
            parts_killed.map(|t| t + DRAIN_GRACE),
            args.heartbeat.next(peer.heard, peer.beat),
        ]
        .into_iter()
        .flatten()
        .min();
        let timeout_ms = wake.map_or(1000, |w| {
            let d = w.saturating_duration_since(Instant::now());
            (d.as_millis().min(1000) as i32).saturating_add(1)
        });
        match sys::poll(&mut fds, timeout_ms) {
            Err(_) => continue,
            Ok(0) => daemon.reap_with(&mut parts),
            Ok(_) => {}
        }
        for (k, pfd) in fds.iter().enumerate() {
            if pfd.revents == 0 {
                continue;
            }
            match toks[k] {
                DaemonPoll::Signal => {
                    let mut chld = false;
                    sys::read_signals(sigfd.as_raw_fd(), |sig| {
                        if sig == sys::SIGCHLD {
                            chld = true;
                        } else if sig == sys::SIGUSR1 || sig == sys::SIGUSR2 {
                            daemon.signal_running(sig);
                            for d in &parts {
                                d.signal_running(sig);
                            }
                        } else {
                            // SIGHUP from a dying ssh, SIGTERM from srun, ...
                            dlog(&format!(
                                "received signal {sig} ({}); killing this node's ranks",
                                sys::signal_name(sig)
                            ));
                            daemon.kill_all_groups();
                            for d in &parts {
                                d.kill_all_groups();
                            }
                            code = 128 + sig;
                            kill_at = None;
                        }
                    });
                    if chld {
                        daemon.reap_with(&mut parts);
                    }
                }
                DaemonPoll::Head => {
                    if pfd.revents & sys::POLLOUT != 0 {
                        peer.flush();
                    }
                    if pfd.revents & (sys::POLLIN | sys::POLLHUP | sys::POLLERR) != 0 {
                        peer.read(&mut buf);
                    }
                }
                DaemonPoll::Stdin(s) => flush_stdin(&mut stdins[s]),
                DaemonPoll::Main(t) => daemon.on_ready(t, pfd.revents),
                DaemonPoll::Part(i, t) => parts[i].on_ready(t, pfd.revents),
            }
        }
    }
}

/// What a descriptor in `oxmpid`'s poll set belongs to.
#[derive(Clone, Copy)]
enum DaemonPoll {
    Signal,
    Head,
    Main(crate::daemon::DaemonToken),
    /// A descriptor of the daemon of spawned-job part `0`.
    Part(usize, crate::daemon::DaemonToken),
    Stdin(usize),
}

/// `oxmpid`'s record of its part of a spawned job.
struct PartState {
    /// The head's number of the spawned job.
    job: u32,
    /// When the part's ranks had all exited and their groups were killed.
    groups_killed_at: Option<Instant>,
    /// `ForJob(Shutdown)` was sent: this part is done.
    done_sent: bool,
}

/// The control message for the head that event `ev` of the daemon of job `job` (0:
/// `mpirun`'s own) becomes, if any (wrapped in [`Msg::ForJob`] for spawned jobs).
fn event_msg(ev: DaemonEvent, job: u32) -> Option<Msg> {
    let m = match ev {
        DaemonEvent::RankExited {
            rank,
            pid,
            exit,
            missing_finalize,
        } => Msg::RankExited {
            rank: rank as u32,
            pid: pid as u32,
            status: match exit {
                RankExit::Code(c) => ExitStatus::Code(c),
                RankExit::Signal(s) => ExitStatus::Signal(s),
            },
            missing_finalize,
        },
        DaemonEvent::Abort {
            rank,
            code,
            message,
            ..
        } => Msg::PmiAbort {
            rank: rank.map_or(u32::MAX, |r| r as u32),
            code,
            message,
        },
        DaemonEvent::LaunchFailed { message, .. } => Msg::Error { message },
        DaemonEvent::Output { rank, stream, data } => Msg::Io {
            rank: rank as u32,
            stream: if stream == 0 {
                IoStream::Stdout
            } else {
                IoStream::Stderr
            },
            data,
            eof: false,
        },
        DaemonEvent::FenceReady { epoch, puts } => Msg::FenceContribution { epoch, puts },
        DaemonEvent::PmiError { rank, message } => {
            let who = rank.map_or_else(|| "a rank".to_string(), |r| format!("rank {r}"));
            dlog(&format!("PMI protocol error from {who}: {message}"));
            return None;
        }
        DaemonEvent::Spawn { rank, v2, request } => {
            // The head plans and starts the new job, and answers with `SpawnDone`.
            return Some(Msg::Spawn {
                job,
                rank: rank as u32,
                v2,
                request,
            });
        }
        DaemonEvent::OutputClosed { .. } | DaemonEvent::OtherChildExited { .. } => return None,
    };
    Some(if job == 0 {
        m
    } else {
        Msg::ForJob {
            job,
            msg: Box::new(m),
        }
    })
}

/// `--mca <framework>_base_verbose N` given to mpirun reaches the ranks as `OXMPI_MCA_*`
/// variables; the daemon takes its own verbosity from them too.
fn apply_verbosity(launch: &NodeLaunch) {
    use crate::streams::{IOF, ODLS, PLM, PMI};
    let Some(p) = launch.procs.first() else {
        return;
    };
    for stream in [&ERRMGR, &IOF, &ODLS, &PLM, &PMI] {
        let key = format!("OXMPI_MCA_{}_base_verbose", stream.framework());
        if let Some(v) = p
            .env
            .iter()
            .rev()
            .find(|(k, _)| *k == key)
            .and_then(|(_, v)| v.trim().parse::<i32>().ok())
        {
            stream.set_verbosity(v);
        }
    }
}

/// A remote rank's stdin: (rank, pipe, bytes not yet written, end of file received).
type StdinSink = (usize, Option<std::fs::File>, Vec<u8>, bool);

/// Write what a rank's stdin pipe takes; close it after end of file (or when the rank
/// stopped reading).
fn flush_stdin(s: &mut StdinSink) {
    let Some(f) = s.1.as_mut() else {
        s.2.clear();
        return;
    };
    while !s.2.is_empty() {
        match f.write(&s.2) {
            Ok(n) => {
                s.2.drain(..n);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => {
                s.1 = None;
                s.2.clear();
                return;
            }
        }
    }
    if s.3 {
        s.1 = None;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn daemons_try_the_heads_address_on_their_subnet_first() {
        let ip = |s: &str| s.parse::<std::net::Ipv4Addr>().unwrap();
        let local = [oxmpi_base::net::Iface::new("eth0", ip("10.231.0.12"), 24)];
        let got = super::head_candidates("192.0.2.2/24+10.231.0.1/24:4000", &local).unwrap();
        assert_eq!(
            got,
            [
                std::net::SocketAddr::from(([10, 231, 0, 1], 4000)),
                std::net::SocketAddr::from(([192, 0, 2, 2], 4000))
            ]
        );
        let named = super::head_candidates("localhost:4000", &local).unwrap();
        assert!(!named.is_empty());
        assert!(super::head_candidates("10.0.0.1", &local).is_err());
        let e = super::head_candidates("no-such-host.invalid:1", &local).unwrap_err();
        assert!(e.contains("plm_head_address"), "{e}");
    }

    use super::*;

    /// A daemon whose head speaks another control-protocol version (a mixed installation)
    /// fails with one line naming both versions, not a bare "closed the connection".
    #[test]
    fn a_head_of_another_protocol_version_gives_one_line() {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let newer = oxmpi_wire::ctl::PROTOCOL_VERSION + 1;
        let head = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut hello = [0u8; 16];
            s.read_exact(&mut hello).unwrap();
            // what a head drops a hello of another version with: a challenge carrying
            // only its own version
            let mut f = 67u32.to_be_bytes().to_vec();
            f.push(2);
            f.extend_from_slice(&newer.to_be_bytes());
            f.extend_from_slice(&[0; 64]);
            s.write_all(&f).unwrap();
            // the rest of the hello, until the daemon gives up and closes
            let _ = s.read_to_end(&mut Vec::new());
        });
        let args = DaemonArgs {
            head: format!("127.0.0.1:{port}"),
            link_timeout: Duration::ZERO,
            heartbeat: Heartbeat::default(),
            node: 1,
            jobid: "job-v".into(),
        };
        let e = match connect(&args, Secret::from_bytes(&[9; 32]).unwrap()) {
            Ok(_) => panic!("a head of version {newer} was accepted"),
            Err(e) => e,
        };
        head.join().unwrap();
        assert!(!e.contains('\n'), "{e}");
        let want = format!(
            "this side speaks version {}, the peer {newer}",
            oxmpi_wire::ctl::PROTOCOL_VERSION
        );
        assert!(e.contains(&want) && e.contains("same oxmpi version"), "{e}");
    }

    fn kv(k: &str, v: &str) -> (String, String) {
        (k.to_string(), v.to_string())
    }

    #[test]
    fn fences_release_when_every_daemon_contributed() {
        let mut g = FenceGather::new(3);
        assert!(g.contribute(0, vec![kv("a", "1")]).is_empty());
        assert!(g.contribute(0, vec![]).is_empty());
        let r = g.contribute(0, vec![kv("c", "3")]);
        assert_eq!(r, vec![(0, vec![kv("a", "1"), kv("c", "3")])]);
        // A daemon ahead on the next epoch waits for the others.
        assert!(g.contribute(1, vec![kv("x", "9")]).is_empty());
        assert!(g.contribute(1, vec![]).is_empty());
        // The third daemon goes away: the fence completes without it.
        assert_eq!(g.leave(), vec![(1, vec![kv("x", "9")])]);
        assert_eq!(g.participants(), 2);
        assert!(g.contribute(2, vec![]).is_empty());
        assert_eq!(g.contribute(2, vec![]).len(), 1);
    }

    /// The heartbeat rule: send every interval, lost after the timeout of silence (any
    /// bytes heard count), neither when zero; the next wake-up is the earlier of the two.
    #[test]
    fn heartbeats_are_sent_on_time_and_silence_is_lost() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let hb = Heartbeat {
            interval: s(2),
            timeout: s(10),
        };
        assert_eq!(hb.check(t0 + s(1), t0, t0), Beat::Idle);
        assert_eq!(hb.check(t0 + s(2), t0, t0), Beat::Send);
        assert_eq!(hb.check(t0 + s(3), t0, t0 + s(2)), Beat::Idle);
        assert_eq!(hb.check(t0 + s(10), t0, t0 + s(10)), Beat::Idle);
        assert_eq!(hb.check(t0 + s(11), t0, t0 + s(10)), Beat::Lost);
        assert_eq!(hb.check(t0 + s(11), t0 + s(5), t0 + s(10)), Beat::Idle);
        assert_eq!(hb.next(t0, t0 + s(4)), Some(t0 + s(6)));
        assert_eq!(
            hb.next(t0, t0 + s(9)),
            Some(t0 + s(10) + Duration::from_millis(1))
        );
        let off = Heartbeat::default();
        assert_eq!(off.check(t0 + s(1000), t0, t0), Beat::Idle);
        assert_eq!(off.next(t0, t0), None);
        assert!(hb.reason().contains("plm_heartbeat_timeout (10 s)"));
    }

    #[test]
    fn daemon_arguments() {
        let args =
            |v: &[&str]| parse_daemon_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(
            args(&["--head", "h:1", "--node", "2", "--jobid", "j"]).unwrap(),
            DaemonArgs {
                head: "h:1".into(),
                node: 2,
                jobid: "j".into(),
                link_timeout: Duration::ZERO,
                heartbeat: Heartbeat::default(),
            }
        );
        // The required arguments after `extra`.
        let with_ids = |extra: &[&str]| {
            let mut v = extra.to_vec();
            v.extend(["--head", "h:1", "--node", "2", "--jobid", "j"]);
            args(&v)
        };
        assert_eq!(
            with_ids(&["--heartbeat", "0.5,3"]).unwrap().heartbeat,
            Heartbeat {
                interval: Duration::from_millis(500),
                timeout: Duration::from_secs(3)
            }
        );
        for bad in ["1", "x,2", "1,-2", ""] {
            assert!(with_ids(&["--heartbeat", bad]).is_err(), "{bad}");
        }
        let a = args(&[
            "--link-timeout",
            "2.5",
            "--head",
            "h:1",
            "--node",
            "2",
            "--jobid",
            "j",
        ]);
        assert_eq!(a.unwrap().link_timeout, Duration::from_millis(2500));
        assert!(args(&[
            "--link-timeout",
            "-1",
            "--head",
            "h:1",
            "--node",
            "2",
            "--jobid",
            "j"
        ])
        .is_err());
        assert!(args(&["--head", "h:1", "--node", "x", "--jobid", "j"]).is_err());
        assert!(args(&["--head", "h:1", "--jobid", "j"]).is_err());
        assert!(args(&["--head"]).is_err());
        assert!(args(&["--secret", "s"]).is_err());
    }
}
