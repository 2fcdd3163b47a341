//! Sans-IO PMI server core for one job: PMI-1 and PMI-2 on any connection.
//!
//! The owner (the runtime's daemon) creates one [`PmiServer`] per job, tells it about
//! connections ([`PmiServer::on_connect`], [`PmiServer::on_data`], [`PmiServer::on_closed`])
//! and then drains [`PmiServer::poll_action`] after every call, performing each [`Action`]
//! (writing bytes, closing sockets, aborting the job, recording a finalized rank).
//! No I/O, clocks or randomness are used inside: the same inputs give the same outputs.
//!
//! Fences (`barrier_in`, `kvs-fence`) are job-wide. A standalone server (the default) serves
//! every rank of the job and releases a fence when every live rank (not finalized, not lost)
//! has entered it. A server created with [`JobInfo::local_ranks`] serves only some ranks: when
//! all its live local ranks entered, it emits [`Action::FenceReady`] with the pairs put locally
//! since the last fence; the owner exchanges them with the other nodes and calls
//! [`PmiServer::fence_complete`] with the union of every node's pairs.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, VecDeque};

use super::codec::{CodecError, Decoder, Frame, Framing, Message};
use super::msg::{parse_v2_bool, v1, v2};
use super::spawn::{errcodes_text, v1_text, SpawnParseError, SpawnRequest};

/// Identifier of one connection, chosen by the owner of the server (e.g. a socket token).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnId(pub u64);

/// Values advertised in `get_maxes`.
pub const KVSNAME_MAX: usize = 256;
/// Maximum key length advertised in `get_maxes`.
pub const KEYLEN_MAX: usize = 64;
/// Maximum value length advertised in `get_maxes`.
pub const VALLEN_MAX: usize = 1024;
/// The predefined key holding the process mapping.
pub const PROCESS_MAPPING_KEY: &str = "PMI_process_mapping";

/// Description of the job served by a [`PmiServer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobInfo {
    /// KVS name / PMI-2 job id (e.g. `"oxmpi-1234.0"`); no spaces or `;`.
    pub kvsname: String,
    /// Number of ranks in the job.
    pub size: u32,
    /// Universe size answered to `get_universe_size` / `universeSize`.
    pub universe_size: i64,
    /// Application number of each rank (MPMD); an empty vector means 0 for every rank.
    pub appnums: Vec<i32>,
    /// Value of `PMI_process_mapping` (see [`super::process_mapping`]); empty = unknown.
    pub process_mapping: String,
    /// Value of `debug` in the port-mode `initack` reply.
    pub debug: bool,
    /// Ranks served by this server if it is one of several (distributed fences); `None`
    /// means this server serves the whole job.
    pub local_ranks: Option<Vec<u32>>,
}

impl JobInfo {
    /// A job of `size` ranks named `kvsname`, all on node 0, appnum 0, universe = size.
    pub fn new(kvsname: impl Into<String>, size: u32) -> Self {
        JobInfo {
            kvsname: kvsname.into(),
            size,
            universe_size: i64::from(size),
            appnums: Vec::new(),
            process_mapping: super::process_mapping(&vec![0; size as usize]),
            debug: false,
            local_ranks: None,
        }
    }

    /// Application number of `rank`.
    pub fn appnum(&self, rank: u32) -> i32 {
        self.appnums.get(rank as usize).copied().unwrap_or(0)
    }
}

/// Errors attributed to one connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ServerError {
    /// The byte stream could not be decoded (garbage, oversize, truncated).
    #[error("PMI decode error: {0}")]
    Codec(#[from] CodecError),
    /// A well-formed message with an unknown command.
    #[error("unknown PMI command {cmd:?}")]
    UnknownCommand {
        /// The command.
        cmd: String,
    },
    /// A command needing the rank arrived before the connection identified its rank.
    #[error("PMI command {cmd:?} before the connection identified its rank")]
    RankUnknown {
        /// The command.
        cmd: String,
    },
    /// A rank outside `0..size`.
    #[error("rank {rank} out of range for a job of size {size}")]
    RankOutOfRange {
        /// Claimed rank.
        rank: i64,
        /// Job size.
        size: u32,
    },
    /// A rank that is served by another server (distributed mode).
    #[error("rank {rank} is not served by this PMI server")]
    RankNotLocal {
        /// Claimed rank.
        rank: u32,
    },
    /// Two live connections claim the same rank, or a connection changes its rank.
    #[error("rank {rank} is already bound to another connection or state")]
    RankConflict {
        /// Claimed rank.
        rank: u32,
    },
    /// A required argument is missing or malformed.
    #[error("PMI command {cmd:?}: missing or bad argument {key:?}")]
    BadArgument {
        /// The command.
        cmd: String,
        /// The argument.
        key: &'static str,
    },
    /// A rank entered a fence twice before it was released.
    #[error("rank {rank} entered the fence twice")]
    DuplicateFence {
        /// The rank.
        rank: u32,
    },
}

/// Errors of owner-side calls.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FenceError {
    /// `fence_complete` for an epoch that is not waiting.
    #[error("no fence epoch {got} is waiting for completion (current epoch {current})")]
    NotWaiting {
        /// Epoch passed by the caller.
        got: u64,
        /// Current epoch.
        current: u64,
    },
}

/// What the owner of the server must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Write `bytes` to connection `conn` (in order with other sends to it).
    Send {
        /// Connection.
        conn: ConnId,
        /// Bytes to write.
        bytes: Vec<u8>,
    },
    /// A rank asked to abort the job with `code`.
    Abort {
        /// Rank that asked (if known).
        rank: Option<u32>,
        /// Exit code for the job.
        code: i32,
        /// Text given by the rank (may be empty).
        message: String,
    },
    /// A rank called finalize (its connection will close next).
    Finalized {
        /// The rank.
        rank: u32,
    },
    /// Close connection `conn` after writing what was queued for it.
    Close {
        /// Connection.
        conn: ConnId,
    },
    /// A protocol error on `conn`. When raised while processing input it is followed by
    /// `Close` for the same connection; when reported by [`PmiServer::on_closed`] (peer
    /// closed mid-message) the connection is already gone.
    Error {
        /// Connection.
        conn: ConnId,
        /// Rank bound to the connection, if any.
        rank: Option<u32>,
        /// What went wrong.
        error: ServerError,
    },
    /// A rank's connection went away without `finalize` (the rank no longer counts in
    /// fences; the owner decides whether that ends the job).
    RankLost {
        /// The rank.
        rank: u32,
    },
    /// A rank asked to start a new job (`MPI_Comm_spawn`): start it, then answer with
    /// [`PmiServer::spawn_done`].
    Spawn {
        /// Connection to answer on.
        conn: ConnId,
        /// The rank that asked.
        rank: Option<u32>,
        /// The request was PMI-2 (reply `spawn-response`), else PMI-1 (`spawn_result`).
        v2: bool,
        /// What to start.
        request: SpawnRequest,
    },
    /// Distributed mode only: every live local rank entered fence `epoch`; exchange `puts`
    /// with the other nodes and call [`PmiServer::fence_complete`].
    FenceReady {
        /// Fence epoch (starts at 0, increments per fence).
        epoch: u64,
        /// Pairs put by local ranks since the previous fence, in put order.
        puts: Vec<(String, String)>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RankState {
    Active,
    Finalized,
    Lost,
}

#[derive(Debug)]
struct Conn {
    dec: Decoder,
    rank: Option<u32>,
    dead: bool,
}

/// The PMI server core for one job. See the module documentation.
#[derive(Debug)]
pub struct PmiServer {
    job: JobInfo,
    local: Vec<bool>,
    distributed: bool,
    conns: HashMap<ConnId, Conn>,
    rank_conn: Vec<Option<ConnId>>,
    state: Vec<RankState>,
    arrived: Vec<bool>,
    waiters: Vec<(ConnId, Framing)>,
    fence_requested: bool,
    /// A rank asked to abort the job: no fence is released any more (the owner ends the
    /// job), so the other ranks wait there to be ended instead of going on without the
    /// aborting rank's pairs and failing on their own, each with its own report.
    aborted: bool,
    epoch: u64,
    kvs: HashMap<String, String>,
    pending: Vec<(String, String)>,
    node_attrs: HashMap<String, String>,
    node_waiters: Vec<(ConnId, String)>,
    names: HashMap<String, String>,
    /// PMI-1 spawn blocks received so far, per connection.
    spawning: HashMap<ConnId, SpawnRequest>,
    actions: VecDeque<Action>,
}

impl PmiServer {
    /// A server for `job`.
    pub fn new(job: JobInfo) -> Self {
        let n = job.size as usize;
        let (local, distributed) = match &job.local_ranks {
            None => (vec![true; n], false),
            Some(list) => {
                let mut l = vec![false; n];
                for &r in list {
                    if let Some(s) = l.get_mut(r as usize) {
                        *s = true;
                    }
                }
                (l, true)
            }
        };
        PmiServer {
            job,
            local,
            distributed,
            conns: HashMap::new(),
            rank_conn: vec![None; n],
            state: vec![RankState::Active; n],
            arrived: vec![false; n],
            waiters: Vec::new(),
            fence_requested: false,
            aborted: false,
            epoch: 0,
            kvs: HashMap::new(),
            pending: Vec::new(),
            node_attrs: HashMap::new(),
            node_waiters: Vec::new(),
            names: HashMap::new(),
            spawning: HashMap::new(),
            actions: VecDeque::new(),
        }
    }

    /// The job description.
    pub fn job(&self) -> &JobInfo {
        &self.job
    }

    /// The rank bound to `conn`, if known.
    pub fn rank_of(&self, conn: ConnId) -> Option<u32> {
        self.conns.get(&conn).and_then(|c| c.rank)
    }

    /// Number of ranks that called finalize.
    pub fn finalized_count(&self) -> usize {
        self.state
            .iter()
            .filter(|s| **s == RankState::Finalized)
            .count()
    }

    /// Current fence epoch (number of completed fences).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Next action to perform, if any.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// A new connection. `rank_hint` is the rank when the owner knows it (an inherited
    /// `PMI_FD` socketpair); `None` for port-mode connections, which identify themselves with
    /// `initack` (PMI-1) or `fullinit` (PMI-2).
    pub fn on_connect(&mut self, conn: ConnId, rank_hint: Option<u32>) {
        self.conns.insert(
            conn,
            Conn {
                dec: Decoder::new(),
                rank: None,
                dead: false,
            },
        );
        if let Some(r) = rank_hint {
            if let Err(e) = self.bind(conn, i64::from(r)) {
                self.fail(conn, e);
            }
        }
    }

    /// Bytes received on `conn`.
    pub fn on_data(&mut self, conn: ConnId, data: &[u8]) {
        match self.conns.get_mut(&conn) {
            Some(c) if !c.dead => c.dec.feed(data),
            _ => return,
        }
        loop {
            let Some(c) = self.conns.get_mut(&conn) else {
                return;
            };
            if c.dead {
                return;
            }
            match c.dec.next_frame() {
                Ok(Some(frame)) => {
                    if let Err(e) = self.handle(conn, frame) {
                        self.fail(conn, e);
                        return;
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    self.fail(conn, e.into());
                    return;
                }
            }
        }
    }

    /// A whole spawn request arrived on `conn`: the owner starts it; a malformed one is
    /// answered at once (an error reply, not a dead connection).
    fn ask_spawn(
        &mut self,
        conn: ConnId,
        v2: bool,
        request: Result<SpawnRequest, SpawnParseError>,
    ) {
        match request {
            Ok(request) => {
                let rank = self.rank_of(conn);
                self.actions.push_back(Action::Spawn {
                    conn,
                    rank,
                    v2,
                    request,
                });
            }
            Err(e) => self.spawn_done(conn, v2, Err(e.to_string())),
        }
    }

    /// Pairs readable by every rank from the start (a spawned job's `preput`).
    pub fn preput(&mut self, pairs: impl IntoIterator<Item = (String, String)>) {
        self.kvs.extend(pairs);
    }

    /// Answers the [`Action::Spawn`] on `conn`: `Ok((jobid, errcodes))` when the children
    /// started, `Err(text)` (one line) when they could not.
    pub fn spawn_done(
        &mut self,
        conn: ConnId,
        v2: bool,
        result: Result<(String, Vec<i32>), String>,
    ) {
        let m = match (&result, v2) {
            (Ok((jobid, codes)), true) => v2::reply::ok("spawn-response")
                .with("jobid", jobid)
                .with("errcodes", errcodes_text(codes)),
            (Ok((_, codes)), false) => {
                v1::reply::spawn_result(0, None).with("errcodes", errcodes_text(codes))
            }
            (Err(e), true) => v2::reply::error("spawn-response", 1, e),
            (Err(e), false) => Message::new("spawn_result")
                .with("rc", 1)
                .with("msg", v1_text(e)),
        };
        let f = if v2 { Framing::V2 } else { Framing::V1 };
        self.send(conn, &m, f);
    }

    /// The peer closed `conn` (or the owner dropped it). Reports truncation and a lost rank.
    pub fn on_closed(&mut self, conn: ConnId) {
        let Some(c) = self.conns.remove(&conn) else {
            return;
        };
        if c.dead {
            return;
        }
        if let Err(e) = c.dec.finish() {
            self.actions.push_back(Action::Error {
                conn,
                rank: c.rank,
                error: e.into(),
            });
        }
        self.drop_conn(conn, c.rank);
    }

    /// Distributed mode: completes fence `epoch` with the union `puts` of every node's pairs
    /// (including this server's own), releasing the local waiters.
    pub fn fence_complete(
        &mut self,
        epoch: u64,
        puts: Vec<(String, String)>,
    ) -> Result<(), FenceError> {
        if !self.fence_requested || epoch != self.epoch {
            return Err(FenceError::NotWaiting {
                got: epoch,
                current: self.epoch,
            });
        }
        self.fence_requested = false;
        self.release_fence(puts);
        Ok(())
    }

    // ---- internals ---------------------------------------------------------------------

    fn fail(&mut self, conn: ConnId, error: ServerError) {
        let rank = self.conns.get(&conn).and_then(|c| c.rank);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.dead = true;
        }
        self.actions.push_back(Action::Error { conn, rank, error });
        self.actions.push_back(Action::Close { conn });
        self.drop_conn(conn, rank);
    }

    fn drop_conn(&mut self, conn: ConnId, rank: Option<u32>) {
        self.waiters.retain(|(c, _)| *c != conn);
        self.node_waiters.retain(|(c, _)| *c != conn);
        if let Some(r) = rank {
            let r = r as usize;
            if self.rank_conn[r] == Some(conn) {
                self.rank_conn[r] = None;
                if self.state[r] == RankState::Active {
                    self.state[r] = RankState::Lost;
                    self.arrived[r] = false;
                    self.actions.push_back(Action::RankLost { rank: r as u32 });
                    self.check_fence();
                }
            }
        }
    }

    fn bind(&mut self, conn: ConnId, rank: i64) -> Result<u32, ServerError> {
        let size = self.job.size;
        let r = u32::try_from(rank)
            .ok()
            .filter(|r| *r < size)
            .ok_or(ServerError::RankOutOfRange { rank, size })?;
        if !self.local[r as usize] {
            return Err(ServerError::RankNotLocal { rank: r });
        }
        let c = self.conns.get(&conn).map(|c| c.rank);
        match c {
            Some(Some(existing)) if existing == r => return Ok(r),
            Some(Some(_)) => return Err(ServerError::RankConflict { rank: r }),
            _ => {}
        }
        if self.rank_conn[r as usize].is_some() || self.state[r as usize] != RankState::Active {
            return Err(ServerError::RankConflict { rank: r });
        }
        self.rank_conn[r as usize] = Some(conn);
        if let Some(c) = self.conns.get_mut(&conn) {
            c.rank = Some(r);
        }
        Ok(r)
    }

    fn rank(&self, conn: ConnId, cmd: &str) -> Result<u32, ServerError> {
        self.conns
            .get(&conn)
            .and_then(|c| c.rank)
            .ok_or_else(|| ServerError::RankUnknown { cmd: cmd.into() })
    }

    fn send(&mut self, conn: ConnId, msg: &Message, framing: Framing) {
        let framing = if framing == Framing::V1Multi {
            Framing::V1
        } else {
            framing
        };
        match msg.encode(framing) {
            Ok(bytes) => self.actions.push_back(Action::Send { conn, bytes }),
            Err(e) => {
                // Only reachable for values a peer managed to store that cannot be
                // re-encoded in the other framing (e.g. a PMI-2 value with spaces read
                // through PMI-1); report it as an error on that connection.
                self.fail(conn, e.into());
            }
        }
    }

    /// Handles one message. (Input after `finalize` never gets here: the connection is
    /// marked dead by `finalize` and [`PmiServer::on_data`] ignores dead connections.)
    fn handle(&mut self, conn: ConnId, frame: Frame) -> Result<(), ServerError> {
        let Frame { framing, msg } = frame;
        match framing {
            Framing::V1 | Framing::V1Multi => self.handle_v1(conn, framing, msg),
            Framing::V2 => self.handle_v2(conn, msg),
        }
    }

    fn arg<'a>(msg: &'a Message, key: &'static str) -> Result<&'a str, ServerError> {
        msg.get(key).ok_or_else(|| ServerError::BadArgument {
            cmd: msg.cmd.clone(),
            key,
        })
    }

    fn int_arg(msg: &Message, key: &'static str) -> Result<i64, ServerError> {
        Self::arg(msg, key)?
            .trim()
            .parse()
            .map_err(|_| ServerError::BadArgument {
                cmd: msg.cmd.clone(),
                key,
            })
    }

    fn handle_v1(
        &mut self,
        conn: ConnId,
        framing: Framing,
        msg: Message,
    ) -> Result<(), ServerError> {
        use v1::reply;
        let f = Framing::V1;
        match (framing, msg.cmd.as_str()) {
            (Framing::V1Multi, "spawn") => {
                let block = match SpawnRequest::parse_v1_block(&msg) {
                    Ok(b) => b,
                    Err(e) => {
                        self.spawning.remove(&conn);
                        self.ask_spawn(conn, false, Err(e));
                        return Ok(());
                    }
                };
                let req = self.spawning.entry(conn).or_default();
                req.commands.push(block.command);
                req.preput = block.preput;
                if block.sofar >= block.total {
                    let request = self.spawning.remove(&conn).unwrap_or_default();
                    self.ask_spawn(conn, false, Ok(request));
                }
            }
            (Framing::V1Multi, _) => {
                return Err(ServerError::UnknownCommand { cmd: msg.cmd });
            }
            (_, "initack") => {
                let id = Self::int_arg(&msg, "pmiid")?;
                let r = self.bind(conn, id)?;
                let mut bytes = Vec::new();
                for m in reply::initack(self.job.size, r, self.job.debug) {
                    bytes.extend(m.encode_v1()?);
                }
                self.actions.push_back(Action::Send { conn, bytes });
            }
            (_, "init") => {
                let v = Self::int_arg(&msg, "pmi_version")?;
                let m = match v {
                    1 => reply::response_to_init(0, 1, 1),
                    2 => reply::response_to_init(0, 2, 0),
                    _ => reply::response_to_init(-1, 2, 0),
                };
                self.send(conn, &m, f);
            }
            (_, "get_maxes") => {
                self.send(conn, &reply::maxes(KVSNAME_MAX, KEYLEN_MAX, VALLEN_MAX), f);
            }
            (_, "get_appnum") => {
                let r = self.rank(conn, &msg.cmd)?;
                let a = self.job.appnum(r);
                self.send(conn, &reply::appnum(a), f);
            }
            (_, "get_universe_size") => {
                self.send(conn, &reply::universe_size(self.job.universe_size), f);
            }
            (_, "get_my_kvsname") => {
                let m = reply::my_kvsname(&self.job.kvsname);
                self.send(conn, &m, f);
            }
            (_, "put") => {
                self.rank(conn, &msg.cmd)?;
                let key = Self::arg(&msg, "key")?;
                let value = Self::arg(&msg, "value")?;
                self.pending.push((key.to_string(), value.to_string()));
                self.send(conn, &reply::put_result(0, None), f);
            }
            (_, "barrier_in") => {
                let r = self.rank(conn, &msg.cmd)?;
                self.fence_arrive(conn, r, f)?;
            }
            (_, "get") => {
                let key = Self::arg(&msg, "key")?;
                let m = match self.lookup(key) {
                    // A PMI-2 client may have stored spaces, which PMI-1 cannot carry.
                    Some(v) if v.contains([' ', '\n']) => Message::new("get_result")
                        .with("rc", 1)
                        .with("msg", "value_not_representable_in_PMI-1"),
                    v => reply::get_result(key, v),
                };
                self.send(conn, &m, f);
            }
            (_, "finalize") => {
                let r = self.rank(conn, &msg.cmd)?;
                self.send(conn, &reply::finalize_ack(), f);
                self.finalize(conn, r);
            }
            (_, "abort") => {
                let code = msg
                    .get("exitcode")
                    .and_then(|c| c.trim().parse().ok())
                    .unwrap_or(1);
                let rank = self.conns.get(&conn).and_then(|c| c.rank);
                let message = msg.get("msg").unwrap_or("").to_string();
                self.aborted = true;
                self.actions.push_back(Action::Abort {
                    rank,
                    code,
                    message,
                });
            }
            (_, "publish_name") => {
                let s = Self::arg(&msg, "service")?.to_string();
                let p = Self::arg(&msg, "port")?.to_string();
                let m = match self.names.entry(s) {
                    Entry::Occupied(_) => {
                        reply::publish_result(1, Some("service already published"))
                    }
                    Entry::Vacant(e) => {
                        e.insert(p);
                        reply::publish_result(0, None)
                    }
                };
                self.send(conn, &m, f);
            }
            (_, "unpublish_name") => {
                let s = Self::arg(&msg, "service")?;
                let m = if self.names.remove(s).is_some() {
                    reply::unpublish_result(0, None)
                } else {
                    reply::unpublish_result(1, Some("service not published"))
                };
                self.send(conn, &m, f);
            }
            (_, "lookup_name") => {
                let s = Self::arg(&msg, "service")?;
                let m = reply::lookup_result(self.names.get(s).map(String::as_str));
                self.send(conn, &m, f);
            }
            _ => return Err(ServerError::UnknownCommand { cmd: msg.cmd }),
        }
        Ok(())
    }

    fn handle_v2(&mut self, conn: ConnId, msg: Message) -> Result<(), ServerError> {
        use v2::reply;
        let f = Framing::V2;
        match msg.cmd.as_str() {
            "fullinit" => {
                let known = self.conns.get(&conn).and_then(|c| c.rank);
                let r = match (known, msg.get("pmirank")) {
                    (Some(k), None) => k,
                    (_, Some(_)) => {
                        let claimed = Self::int_arg(&msg, "pmirank")?;
                        self.bind(conn, claimed)?
                    }
                    (None, None) => {
                        return Err(ServerError::BadArgument {
                            cmd: msg.cmd,
                            key: "pmirank",
                        })
                    }
                };
                let m = reply::fullinit(r, self.job.size, self.job.appnum(r));
                self.send(conn, &m, f);
            }
            "job-getid" => {
                let m = reply::job_getid(&self.job.kvsname);
                self.send(conn, &m, f);
            }
            "kvs-put" => {
                self.rank(conn, &msg.cmd)?;
                let key = Self::arg(&msg, "key")?;
                let value = Self::arg(&msg, "value")?;
                self.pending.push((key.to_string(), value.to_string()));
                self.send(conn, &reply::ok("kvs-put-response"), f);
            }
            "kvs-fence" => {
                let r = self.rank(conn, &msg.cmd)?;
                self.fence_arrive(conn, r, f)?;
            }
            "kvs-get" => {
                let key = Self::arg(&msg, "key")?;
                let m = reply::found("kvs-get-response", self.lookup(key));
                self.send(conn, &m, f);
            }
            "info-getjobattr" => {
                let key = Self::arg(&msg, "key")?;
                let universe = self.job.universe_size.to_string();
                let v = match key {
                    PROCESS_MAPPING_KEY if !self.job.process_mapping.is_empty() => {
                        Some(self.job.process_mapping.as_str())
                    }
                    "universeSize" => Some(universe.as_str()),
                    _ => None,
                };
                let m = reply::found("info-getjobattr-response", v);
                self.send(conn, &m, f);
            }
            "info-putnodeattr" => {
                let key = Self::arg(&msg, "key")?.to_string();
                let value = Self::arg(&msg, "value")?.to_string();
                self.send(conn, &reply::ok("info-putnodeattr-response"), f);
                let waiting: Vec<ConnId> = self
                    .node_waiters
                    .iter()
                    .filter(|(_, k)| *k == key)
                    .map(|(c, _)| *c)
                    .collect();
                self.node_waiters.retain(|(_, k)| *k != key);
                let m = reply::found("info-getnodeattr-response", Some(&value));
                for c in waiting {
                    self.send(c, &m, f);
                }
                self.node_attrs.insert(key, value);
            }
            "info-getnodeattr" => {
                let key = Self::arg(&msg, "key")?;
                let wait = msg.get("wait").and_then(parse_v2_bool).unwrap_or(false);
                match self.node_attrs.get(key) {
                    Some(v) => {
                        let m = reply::found("info-getnodeattr-response", Some(v));
                        self.send(conn, &m, f);
                    }
                    None if wait => self.node_waiters.push((conn, key.to_string())),
                    None => {
                        let m = reply::found("info-getnodeattr-response", None);
                        self.send(conn, &m, f);
                    }
                }
            }
            "finalize" => {
                let r = self.rank(conn, &msg.cmd)?;
                self.send(conn, &reply::ok("finalize-response"), f);
                self.finalize(conn, r);
            }
            "abort" => {
                let rank = self.conns.get(&conn).and_then(|c| c.rank);
                let message = msg.get("msg").unwrap_or("").to_string();
                self.aborted = true;
                self.actions.push_back(Action::Abort {
                    rank,
                    code: 1,
                    message,
                });
            }
            "name-publish" => {
                let n = Self::arg(&msg, "name")?.to_string();
                let p = Self::arg(&msg, "port")?.to_string();
                let m = match self.names.entry(n) {
                    Entry::Occupied(_) => {
                        reply::error("name-publish-response", 1, "name already published")
                    }
                    Entry::Vacant(e) => {
                        e.insert(p);
                        reply::ok("name-publish-response")
                    }
                };
                self.send(conn, &m, f);
            }
            "name-unpublish" => {
                let n = Self::arg(&msg, "name")?;
                let m = if self.names.remove(n).is_some() {
                    reply::ok("name-unpublish-response")
                } else {
                    reply::error("name-unpublish-response", 1, "name not published")
                };
                self.send(conn, &m, f);
            }
            "name-lookup" => {
                let n = Self::arg(&msg, "name")?;
                let m = reply::name_lookup(self.names.get(n).map(String::as_str));
                self.send(conn, &m, f);
            }
            "spawn" => self.ask_spawn(conn, true, SpawnRequest::parse_v2(&msg)),
            "job-connect" | "job-disconnect" | "ring" => {
                let name = format!("{}-response", msg.cmd);
                let m = reply::error(&name, 1, &format!("{} not supported", msg.cmd));
                self.send(conn, &m, f);
            }
            _ => return Err(ServerError::UnknownCommand { cmd: msg.cmd }),
        }
        Ok(())
    }

    fn lookup(&self, key: &str) -> Option<&str> {
        if key == PROCESS_MAPPING_KEY && !self.job.process_mapping.is_empty() {
            return Some(&self.job.process_mapping);
        }
        self.kvs.get(key).map(String::as_str)
    }

    fn finalize(&mut self, conn: ConnId, rank: u32) {
        self.state[rank as usize] = RankState::Finalized;
        self.arrived[rank as usize] = false;
        self.waiters.retain(|(c, _)| *c != conn);
        self.node_waiters.retain(|(c, _)| *c != conn);
        self.rank_conn[rank as usize] = None;
        if let Some(c) = self.conns.get_mut(&conn) {
            c.dead = true;
        }
        self.actions.push_back(Action::Finalized { rank });
        self.actions.push_back(Action::Close { conn });
        self.check_fence();
    }

    fn fence_arrive(
        &mut self,
        conn: ConnId,
        rank: u32,
        framing: Framing,
    ) -> Result<(), ServerError> {
        if self.arrived[rank as usize] {
            return Err(ServerError::DuplicateFence { rank });
        }
        self.arrived[rank as usize] = true;
        self.waiters.push((conn, framing));
        self.check_fence();
        Ok(())
    }

    fn check_fence(&mut self) {
        if self.waiters.is_empty() || self.fence_requested || self.aborted {
            return;
        }
        let all_in = (0..self.state.len())
            .all(|r| !self.local[r] || self.state[r] != RankState::Active || self.arrived[r]);
        if !all_in {
            return;
        }
        if self.distributed {
            self.fence_requested = true;
            let puts = std::mem::take(&mut self.pending);
            self.actions.push_back(Action::FenceReady {
                epoch: self.epoch,
                puts,
            });
        } else {
            let puts = std::mem::take(&mut self.pending);
            self.release_fence(puts);
        }
    }

    fn release_fence(&mut self, puts: Vec<(String, String)>) {
        self.kvs.extend(puts);
        self.epoch += 1;
        self.arrived.iter_mut().for_each(|a| *a = false);
        for (conn, framing) in std::mem::take(&mut self.waiters) {
            let m = match framing {
                Framing::V2 => v2::reply::ok("kvs-fence-response"),
                _ => v1::reply::barrier_out(),
            };
            self.send(conn, &m, framing);
        }
    }
}
