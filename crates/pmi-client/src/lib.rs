//! Lean blocking PMI-1 / PMI-2 client used by the MPI library (no async runtime).
//!
//! [`Pmi::init`] finds the process manager from the environment, following the rules MPICH
//! and Slurm use (the interop rules of the PMI reference notes):
//!
//! 1. `PMI_FD` set: an inherited, connected Unix socket (Hydra, Slurm `--mpi=pmi2`, oxmpi's
//!    `mpirun`); rank and size come from `PMI_RANK`/`PMI_SIZE` (PMI-1) or from `fullinit`
//!    (PMI-2).
//! 2. else `PMI_PORT=host:port`: a TCP connection; with `PMI_ID`, PMI-1 first does the
//!    `initack` handshake, which tells rank and size.
//! 3. else singleton: rank 0 of 1 with a process-local key-value space — unless
//!    `SLURM_STEP_NUM_TASKS` or `SLURM_NTASKS` is greater than 1, which is an error
//!    ([`Error::NoPmiButSlurmTasks`]) instead of silently running N singletons.
//!
//! Wire version: `OXMPI_PMI_VERSION` (or `PMI_VERSION`) `1` or `2`; default PMI-1, the
//! baseline every server speaks (Slurm, Hydra, Flux, oxmpi). Each request is sent with a
//! single write and the reply is awaited before the next request (Slurm reads one request per
//! `read()`); replies are parsed as unordered maps and unknown keys ignored.
//!
//! Values must not contain spaces, newlines or `;`; use [`Pmi::put_bytes`] /
//! [`Pmi::get_bytes`] for binary data (upper-case hex, split across keys when long).
//!
//! ```no_run
//! let mut pmi = oxmpi_pmi::Pmi::init()?;
//! pmi.put(&format!("addr-{}", pmi.rank()), "tcp://10.0.0.1:5000")?;
//! pmi.fence()?;
//! let peer = (pmi.rank() + 1) % pmi.size();
//! let addr = pmi.get(Some(peer), &format!("addr-{peer}"))?;
//! pmi.finalize()?;
//! # Ok::<(), oxmpi_pmi::Error>(())
//! ```
#![warn(missing_docs)]

mod sys;

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;

use oxmpi_wire::pmi::msg::{parse_v2_bool, v1, v2};
use oxmpi_wire::pmi::spawn::{parse_errcodes, v1_text_decode};
use oxmpi_wire::pmi::{CodecError, Decoder, Frame, Framing, Message};
pub use oxmpi_wire::pmi::{SpawnCommand, SpawnRequest};

/// Longest PMI-1 request line we send, including `\n` (MPICH's `PMIU_MAXLINE`).
pub const MAX_LINE: usize = 1024;
/// Longest PMI-2 value we send (Hydra truncates longer values).
pub const MAX_V2_VALUE: usize = 1023;
/// Longest reply line or frame body we accept from a server.
const REPLY_LIMIT: usize = 64 * 1024;

/// Errors of the PMI client. Each carries what was being done.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An environment variable has an unusable value.
    #[error("bad environment variable {var}={value:?}: {reason}")]
    BadEnv {
        /// Variable name.
        var: &'static str,
        /// Its value.
        value: String,
        /// Why it is unusable.
        reason: String,
    },
    /// Slurm says there are several tasks, but no PMI server is offered.
    #[error(
        "{var}={value}: this process is one of several Slurm tasks but no PMI server is offered \
         (PMI_FD and PMI_PORT are unset); launch with `srun --mpi=pmi2` or `mpirun`"
    )]
    NoPmiButSlurmTasks {
        /// `SLURM_STEP_NUM_TASKS` or `SLURM_NTASKS`.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// Connecting to `PMI_PORT` failed.
    #[error("cannot connect to the PMI server at {addr}: {source}")]
    Connect {
        /// `host:port`.
        addr: String,
        /// The OS error.
        source: io::Error,
    },
    /// Reading or writing the PMI connection failed.
    #[error("PMI I/O error during {request}: {source}")]
    Io {
        /// The request in progress.
        request: String,
        /// The OS error.
        source: io::Error,
    },
    /// The server closed the connection.
    #[error("the PMI server closed the connection during {request}")]
    Closed {
        /// The request in progress.
        request: String,
    },
    /// The server's bytes could not be decoded, or a request could not be encoded.
    #[error("PMI protocol error during {request}: {source}")]
    Codec {
        /// The request in progress.
        request: String,
        /// Codec error.
        source: CodecError,
    },
    /// The reply is not the one expected for the request.
    #[error("unexpected PMI reply to {request}: {reply}")]
    Unexpected {
        /// The request.
        request: String,
        /// The reply received.
        reply: String,
    },
    /// The server answered with a non-zero `rc`.
    #[error("PMI server failed {request} (rc={rc}): {msg}")]
    Server {
        /// The request.
        request: String,
        /// Return code.
        rc: i32,
        /// `msg` / `errmsg` text.
        msg: String,
    },
    /// `get` found no value.
    #[error("PMI key {key:?} not found")]
    NotFound {
        /// The key.
        key: String,
    },
    /// A key or value cannot be sent (forbidden characters or too long).
    #[error("cannot send PMI {what} {text:?}: {reason}")]
    Invalid {
        /// `"key"` or `"value"`.
        what: &'static str,
        /// The offending text (truncated).
        text: String,
        /// Why.
        reason: &'static str,
    },
    /// A value read by [`Pmi::get_bytes`] is not the expected encoding.
    #[error("PMI value of key {key:?} is not valid chunked hex")]
    BadEncoding {
        /// The key.
        key: String,
    },
    /// The client was already finalized.
    #[error("PMI client used after finalize")]
    Finalized,
}

/// Result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// PMI wire version used on the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// PMI-1 ("simple" PMI 1.1).
    V1,
    /// PMI-2 (2.0).
    V2,
}

/// The transport to the server.
#[derive(Debug)]
pub enum Stream {
    /// A Unix stream socket (`PMI_FD` or a socketpair in tests).
    Unix(UnixStream),
    /// A TCP connection (`PMI_PORT`).
    Tcp(TcpStream),
}

impl Stream {
    fn write_all(&mut self, b: &[u8]) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.write_all(b),
            Stream::Tcp(s) => s.write_all(b),
        }
    }
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(b),
            Stream::Tcp(s) => s.read(b),
        }
    }
}

#[derive(Debug)]
struct Conn {
    stream: Stream,
    dec: Decoder,
    version: Version,
}

impl Conn {
    fn send(&mut self, msg: &Message, framing: Framing) -> Result<()> {
        let what = || describe(msg);
        let bytes = msg.encode(framing).map_err(|source| Error::Codec {
            request: what(),
            source,
        })?;
        if framing == Framing::V1 && bytes.len() > MAX_LINE {
            return Err(Error::Invalid {
                what: "request",
                text: clip(&String::from_utf8_lossy(&bytes)),
                reason: "PMI-1 line longer than 1024 bytes",
            });
        }
        // One request per write: Slurm's server reads each request with a single read().
        self.stream.write_all(&bytes).map_err(|source| Error::Io {
            request: what(),
            source,
        })
    }

    fn recv(&mut self, request: &str) -> Result<Message> {
        let mut buf = [0u8; 4096];
        loop {
            match self.dec.next_frame() {
                Ok(Some(Frame { msg, .. })) => return Ok(msg),
                Ok(None) => {}
                Err(source) => {
                    return Err(Error::Codec {
                        request: request.into(),
                        source,
                    })
                }
            }
            let n = loop {
                match self.stream.read(&mut buf) {
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => break r,
                }
            }
            .map_err(|source| Error::Io {
                request: request.into(),
                source,
            })?;
            if n == 0 {
                return Err(match self.dec.finish() {
                    Err(source) => Error::Codec {
                        request: request.into(),
                        source,
                    },
                    Ok(()) => Error::Closed {
                        request: request.into(),
                    },
                });
            }
            self.dec.feed(&buf[..n]);
        }
    }

    /// Sends `msg` and waits for a reply named `expect` with `rc` 0.
    fn request(&mut self, msg: &Message, framing: Framing, expect: &str) -> Result<Message> {
        self.send(msg, framing)?;
        let what = describe(msg);
        let reply = self.recv(&what)?;
        check_reply(&what, reply, expect)
    }
}

fn check_reply(request: &str, reply: Message, expect: &str) -> Result<Message> {
    if reply.cmd != expect {
        return Err(Error::Unexpected {
            request: request.into(),
            reply: clip(&reply.to_string()),
        });
    }
    let rc = reply.rc();
    if rc != 0 {
        let msg = reply
            .get("errmsg")
            .or_else(|| reply.get("msg"))
            .unwrap_or("")
            .to_string();
        return Err(Error::Server {
            request: request.into(),
            rc,
            msg,
        });
    }
    Ok(reply)
}

fn describe(m: &Message) -> String {
    match m.get("key") {
        Some(k) => format!("`{}` (key {k})", m.cmd),
        None => format!("`{}`", m.cmd),
    }
}

fn clip(s: &str) -> String {
    if s.len() <= 120 {
        s.to_string()
    } else {
        let mut end = 120;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &s[..end])
    }
}

/// Where to find the PMI server, as decided from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// Inherited connected socket.
    Fd(i32),
    /// TCP `host:port`, with the optional `PMI_ID` for `initack`.
    Port {
        /// `host:port`.
        addr: String,
        /// `PMI_ID`.
        id: Option<String>,
    },
    /// No PMI: rank 0 of 1.
    Singleton,
}

/// Settings read from the environment by [`Pmi::init`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Transport.
    pub transport: Transport,
    /// Wire version.
    pub version: Version,
    /// `PMI_RANK` if set.
    pub rank: Option<u32>,
    /// `PMI_SIZE` if set.
    pub size: Option<u32>,
    /// `PMI_JOBID` if set (Slurm requires it in PMI-2 `fullinit`).
    pub jobid: Option<String>,
}

impl Settings {
    /// Decides the settings from an environment lookup function.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<Settings> {
        let num = |var: &'static str| -> Result<Option<u32>> {
            match env(var) {
                None => Ok(None),
                Some(v) => v.trim().parse().map(Some).map_err(|_| Error::BadEnv {
                    var,
                    value: v.clone(),
                    reason: "not a non-negative integer".into(),
                }),
            }
        };
        let version = match env("OXMPI_PMI_VERSION")
            .map(|v| ("OXMPI_PMI_VERSION", v))
            .or_else(|| env("PMI_VERSION").map(|v| ("PMI_VERSION", v)))
        {
            None => Version::V1,
            Some((_, v)) if v.trim() == "1" => Version::V1,
            Some((_, v)) if v.trim() == "2" => Version::V2,
            Some((var, v)) => {
                return Err(Error::BadEnv {
                    var,
                    value: v,
                    reason: "expected 1 or 2".into(),
                })
            }
        };
        let transport = if let Some(fd) = env("PMI_FD") {
            let n: i32 = fd.trim().parse().map_err(|_| Error::BadEnv {
                var: "PMI_FD",
                value: fd.clone(),
                reason: "not a file descriptor number".into(),
            })?;
            if n < 0 {
                return Err(Error::BadEnv {
                    var: "PMI_FD",
                    value: fd,
                    reason: "negative".into(),
                });
            }
            Transport::Fd(n)
        } else if let Some(port) = env("PMI_PORT") {
            if port
                .rsplit_once(':')
                .is_none_or(|(h, p)| h.is_empty() || p.parse::<u16>().is_err())
            {
                return Err(Error::BadEnv {
                    var: "PMI_PORT",
                    value: port,
                    reason: "expected host:port".into(),
                });
            }
            Transport::Port {
                addr: port,
                id: env("PMI_ID"),
            }
        } else {
            for var in ["SLURM_STEP_NUM_TASKS", "SLURM_NTASKS"] {
                if let Some(v) = env(var) {
                    if v.trim().parse::<u64>().is_ok_and(|n| n > 1) {
                        return Err(Error::NoPmiButSlurmTasks { var, value: v });
                    }
                }
            }
            Transport::Singleton
        };
        Ok(Settings {
            transport,
            version,
            rank: num("PMI_RANK")?,
            size: num("PMI_SIZE")?,
            jobid: env("PMI_JOBID"),
        })
    }
}

/// Selector for [`Pmi::get`]: the rank that put the key (PMI-2 `srcid`), or any.
pub type Source = Option<u32>;

/// A PMI client connection (or a singleton). See the crate documentation.
#[derive(Debug)]
pub struct Pmi {
    conn: Option<Conn>,
    rank: u32,
    size: u32,
    appnum: i32,
    kvsname: String,
    local_pending: Vec<(String, String)>,
    local_kvs: HashMap<String, String>,
    finalized: bool,
}

impl Pmi {
    /// Connects to the PMI server named by the process environment (or becomes a singleton).
    pub fn init() -> Result<Pmi> {
        let settings = Settings::from_env(|k| std::env::var(k).ok())?;
        Self::init_with(&settings)
    }

    /// Connects according to explicit [`Settings`].
    pub fn init_with(settings: &Settings) -> Result<Pmi> {
        match &settings.transport {
            Transport::Singleton => Ok(Self::singleton()),
            Transport::Fd(fd) => {
                let stream = unix_from_fd(*fd)?;
                Self::handshake(Stream::Unix(stream), settings, false)
            }
            Transport::Port { addr, id } => {
                let stream =
                    TcpStream::connect(addr.as_str()).map_err(|source| Error::Connect {
                        addr: addr.clone(),
                        source,
                    })?;
                // Small request/response messages: disable Nagle like MPICH does.
                let _ = stream.set_nodelay(true);
                let mut s = settings.clone();
                if let Some(id) = id {
                    if s.rank.is_none() {
                        s.rank = id.trim().parse().ok();
                    }
                }
                Self::handshake(Stream::Tcp(stream), &s, id.is_some())
            }
        }
    }

    /// Runs the handshake on an already connected stream (used for tests and by
    /// [`Pmi::init_with`]). `initack` is done first (PMI-1 port mode) if requested.
    pub fn connect(stream: Stream, settings: &Settings, initack: bool) -> Result<Pmi> {
        Self::handshake(stream, settings, initack)
    }

    /// A singleton: rank 0 of 1 with a process-local key-value space.
    pub fn singleton() -> Pmi {
        Pmi {
            conn: None,
            rank: 0,
            size: 1,
            appnum: 0,
            kvsname: format!("singleton_{}", std::process::id()),
            local_pending: Vec::new(),
            local_kvs: HashMap::new(),
            finalized: false,
        }
    }

    fn handshake(stream: Stream, settings: &Settings, initack: bool) -> Result<Pmi> {
        let mut conn = Conn {
            stream,
            // Lenient with replies: Hydra answers values up to 1023 bytes plus framing.
            dec: Decoder::with_limits(REPLY_LIMIT, REPLY_LIMIT),
            version: settings.version,
        };
        let mut env_rank = settings.rank;
        let mut env_size = settings.size;
        if initack && settings.version == Version::V1 {
            let id = match &settings.transport {
                Transport::Port { id: Some(id), .. } => id.clone(),
                _ => env_rank.map(|r| r.to_string()).unwrap_or_default(),
            };
            let req = v1::initack(&id);
            conn.send(&req, Framing::V1)?;
            let what = describe(&req);
            check_reply(&what, conn.recv(&what)?, "initack")?;
            for _ in 0..3 {
                let set = check_reply(&what, conn.recv(&what)?, "set")?;
                let num = |k| set.get(k).and_then(|v| v.trim().parse::<u32>().ok());
                if let Some(s) = num("size") {
                    env_size = Some(s);
                }
                if let Some(r) = num("rank") {
                    env_rank = Some(r);
                }
            }
        }
        let (ver, sub) = match settings.version {
            Version::V1 => (1, 1),
            Version::V2 => (2, 0),
        };
        conn.request(&v1::init(ver, sub), Framing::V1, "response_to_init")?;
        let (rank, size, appnum, kvsname);
        match settings.version {
            Version::V1 => {
                let need = |v: Option<u32>, var: &'static str| {
                    v.ok_or_else(|| Error::BadEnv {
                        var,
                        value: String::new(),
                        reason: "must be set for PMI-1 over PMI_FD".into(),
                    })
                };
                rank = need(env_rank, "PMI_RANK")?;
                size = need(env_size, "PMI_SIZE")?;
                let a = conn.request(&v1::get_appnum(), Framing::V1, "appnum")?;
                appnum = a.get("appnum").and_then(|v| v.parse().ok()).unwrap_or(0);
                let k = conn.request(&v1::get_my_kvsname(), Framing::V1, "my_kvsname")?;
                kvsname = k.get("kvsname").unwrap_or("").to_string();
            }
            Version::V2 => {
                let pmirank = env_rank.unwrap_or(0);
                let req = v2::fullinit(settings.jobid.as_deref(), pmirank, false);
                let r = conn.request(&req, Framing::V2, "fullinit-response")?;
                let num = |k: &str| r.get(k).and_then(|v| v.trim().parse::<i64>().ok());
                let bad = |what: &str| Error::Unexpected {
                    request: "`fullinit`".into(),
                    reply: format!("missing or bad {what} in {}", clip(&r.to_string())),
                };
                rank = num("rank")
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(|| bad("rank"))?;
                size = num("size")
                    .and_then(|v| u32::try_from(v).ok())
                    .filter(|s| *s > rank)
                    .ok_or_else(|| bad("size"))?;
                appnum = num("appnum")
                    .and_then(|v| i32::try_from(v).ok())
                    .unwrap_or(0);
                let j = conn.request(&v2::job_getid(), Framing::V2, "job-getid-response")?;
                kvsname = j.get("jobid").unwrap_or("").to_string();
            }
        }
        Ok(Pmi {
            conn: Some(conn),
            rank,
            size,
            appnum,
            kvsname,
            local_pending: Vec::new(),
            local_kvs: HashMap::new(),
            finalized: false,
        })
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }
    /// Number of processes in the job.
    pub fn size(&self) -> u32 {
        self.size
    }
    /// Application number (MPMD); `-1` under Slurm.
    pub fn appnum(&self) -> i32 {
        self.appnum
    }
    /// KVS name / PMI-2 job id.
    pub fn kvsname(&self) -> &str {
        &self.kvsname
    }
    /// True when running without a PMI server.
    pub fn is_singleton(&self) -> bool {
        self.conn.is_none()
    }
    /// Wire version in use (`None` for a singleton).
    pub fn version(&self) -> Option<Version> {
        self.conn.as_ref().map(|c| c.version)
    }

    fn conn(&mut self) -> Result<Option<&mut Conn>> {
        if self.finalized {
            return Err(Error::Finalized);
        }
        Ok(self.conn.as_mut())
    }

    /// Publishes `key=value`; visible to other ranks after the next [`Pmi::fence`].
    pub fn put(&mut self, key: &str, value: &str) -> Result<()> {
        check_text("key", key, 64)?;
        check_text("value", value, MAX_V2_VALUE)?;
        let kvs = self.kvsname.clone();
        match self.conn()? {
            None => {
                self.local_pending.push((key.into(), value.into()));
                Ok(())
            }
            Some(c) => {
                match c.version {
                    Version::V1 => {
                        c.request(&v1::put(&kvs, key, value), Framing::V1, "put_result")?
                    }
                    Version::V2 => {
                        c.request(&v2::kvs_put(key, value), Framing::V2, "kvs-put-response")?
                    }
                };
                Ok(())
            }
        }
    }

    /// Job-wide fence: commits this rank's puts and waits until every rank entered.
    pub fn fence(&mut self) -> Result<()> {
        match self.conn()? {
            None => {
                let p = std::mem::take(&mut self.local_pending);
                self.local_kvs.extend(p);
                Ok(())
            }
            Some(c) => {
                match c.version {
                    Version::V1 => c.request(&v1::barrier_in(), Framing::V1, "barrier_out")?,
                    Version::V2 => {
                        c.request(&v2::kvs_fence(), Framing::V2, "kvs-fence-response")?
                    }
                };
                Ok(())
            }
        }
    }

    /// Reads `key` (put by rank `src`, or by anyone with `None`). [`Error::NotFound`] when
    /// absent.
    pub fn get(&mut self, src: Source, key: &str) -> Result<String> {
        check_text("key", key, 64)?;
        let kvs = self.kvsname.clone();
        let not_found = || Error::NotFound { key: key.into() };
        match self.conn()? {
            None => self.local_kvs.get(key).cloned().ok_or_else(not_found),
            Some(c) => match c.version {
                Version::V1 => {
                    let req = v1::get(&kvs, key);
                    c.send(&req, Framing::V1)?;
                    let what = describe(&req);
                    let reply = c.recv(&what)?;
                    if reply.cmd == "get_result" && reply.rc() != 0 {
                        return Err(not_found());
                    }
                    let r = check_reply(&what, reply, "get_result")?;
                    r.get("value").map(str::to_string).ok_or_else(not_found)
                }
                Version::V2 => {
                    let srcid = src.map_or(-1, i64::from);
                    let req = v2::kvs_get(Some(&kvs), srcid, key);
                    let r = c.request(&req, Framing::V2, "kvs-get-response")?;
                    if r.get("found").and_then(parse_v2_bool) == Some(true) {
                        Ok(r.get("value").unwrap_or("").to_string())
                    } else {
                        Err(not_found())
                    }
                }
            },
        }
    }

    /// Publishes binary data under `key` as upper-case hex, split across `key`, `key.1`,
    /// `key.2`, ... so that every request respects the line limits. The value of `key` is
    /// `<chunks>:<hex>`.
    pub fn put_bytes(&mut self, key: &str, data: &[u8]) -> Result<()> {
        let hex = to_hex(data);
        let chunk = self.chunk_len(key);
        let pieces: Vec<&str> = if hex.is_empty() {
            vec![""]
        } else {
            hex.as_bytes()
                .chunks(chunk)
                .map(|c| std::str::from_utf8(c).unwrap_or_default())
                .collect()
        };
        let n = pieces.len();
        for (i, p) in pieces.iter().enumerate() {
            if i == 0 {
                self.put(key, &format!("{n}:{p}"))?;
            } else {
                self.put(&format!("{key}.{i}"), p)?;
            }
        }
        Ok(())
    }

    /// Reads data stored by [`Pmi::put_bytes`].
    pub fn get_bytes(&mut self, src: Source, key: &str) -> Result<Vec<u8>> {
        let bad = || Error::BadEncoding { key: key.into() };
        let first = self.get(src, key)?;
        let (n, hex0) = first.split_once(':').ok_or_else(bad)?;
        let n: usize = n.parse().map_err(|_| bad())?;
        if n == 0 {
            return Err(bad());
        }
        let mut hex = hex0.to_string();
        for i in 1..n {
            hex.push_str(&self.get(src, &format!("{key}.{i}"))?);
        }
        from_hex(&hex).ok_or_else(bad)
    }

    fn chunk_len(&self, key: &str) -> usize {
        // Sized for PMI-1 whatever our own version, since readers may speak PMI-1:
        // "cmd=put kvsname=<kvs> key=<key>.<nnnnn> value=<nnnnn>:<hex>\n" <= 1024 bytes.
        let overhead =
            "cmd=put kvsname= key=. value=:\n".len() + self.kvsname.len() + key.len() + 10;
        let n = MAX_LINE.saturating_sub(overhead).min(MAX_V2_VALUE - 10);
        // Keep whole bytes (even number of hex digits), at least 2.
        (n & !1).max(2)
    }

    /// `PMI_process_mapping` (`(vector,(S,N,P),...)`), `None` if the server does not know.
    pub fn process_mapping(&mut self) -> Result<Option<String>> {
        const KEY: &str = "PMI_process_mapping";
        let kvs = self.kvsname.clone();
        match self.conn()? {
            None => Ok(Some("(vector,(0,1,1))".into())),
            Some(c) => match c.version {
                Version::V1 => {
                    let req = v1::get(&kvs, KEY);
                    c.send(&req, Framing::V1)?;
                    let what = describe(&req);
                    let r = c.recv(&what)?;
                    if r.cmd == "get_result" && r.rc() != 0 {
                        return Ok(None);
                    }
                    let r = check_reply(&what, r, "get_result")?;
                    Ok(r.get("value").filter(|v| !v.is_empty()).map(str::to_string))
                }
                Version::V2 => {
                    let r = c.request(
                        &v2::info_getjobattr(KEY),
                        Framing::V2,
                        "info-getjobattr-response",
                    )?;
                    if r.get("found").and_then(parse_v2_bool) == Some(true) {
                        Ok(r.get("value").filter(|v| !v.is_empty()).map(str::to_string))
                    } else {
                        Ok(None)
                    }
                }
            },
        }
    }

    /// The node index of every rank decoded from [`Pmi::process_mapping`], if known.
    pub fn node_of_ranks(&mut self) -> Result<Option<Vec<u32>>> {
        let size = self.size as usize;
        Ok(self.process_mapping()?.and_then(|m| {
            oxmpi_wire::pmi::parse_process_mapping(&m)
                .and_then(|b| oxmpi_wire::pmi::mapping::expand(&b, size))
        }))
    }

    /// Asks the process manager to abort the whole job with exit `code`. No reply is
    /// expected; the caller should exit afterwards. A singleton does nothing.
    pub fn abort(&mut self, code: i32, msg: &str) -> Result<()> {
        let Some(c) = self.conn()? else {
            return Ok(());
        };
        match c.version {
            // Hydra requires `exitcode`; PMI-1 has no portable message field.
            Version::V1 => c.send(&v1::abort(code), Framing::V1),
            Version::V2 => {
                let text: String = msg
                    .chars()
                    .map(|ch| {
                        if ch == ';' || ch.is_control() {
                            ' '
                        } else {
                            ch
                        }
                    })
                    .take(512)
                    .collect();
                c.send(&v2::abort(true, &text), Framing::V2)
            }
        }
    }

    /// Asks the process manager to start a new job (`MPI_Comm_spawn`): PMI-1 `mcmd=spawn`
    /// blocks or the PMI-2 `spawn` command. Returns the error code of every child; a refusal
    /// is [`Error::Server`] with the server's reason. A singleton cannot spawn.
    pub fn spawn(&mut self, req: &SpawnRequest) -> Result<Vec<i32>> {
        let Some(c) = self.conn()? else {
            return Err(Error::Server {
                request: "`spawn`".into(),
                rc: 1,
                msg: "this process was not started by a process manager (singleton)".into(),
            });
        };
        let reply = match c.version {
            Version::V1 => {
                for b in req.to_v1_blocks() {
                    c.send(&b, Framing::V1Multi)?;
                }
                let r = c.recv("`spawn`")?;
                if r.cmd == "spawn_result" && r.rc() != 0 {
                    return Err(Error::Server {
                        request: "`spawn`".into(),
                        rc: r.rc(),
                        msg: v1_text_decode(r.get("msg").unwrap_or("")),
                    });
                }
                check_reply("`spawn`", r, "spawn_result")?
            }
            Version::V2 => c.request(&req.to_v2(), Framing::V2, "spawn-response")?,
        };
        Ok(reply
            .get("errcodes")
            .map(parse_errcodes)
            .unwrap_or_default())
    }

    /// Says goodbye to the server (required by Hydra) and closes the connection.
    /// Calling it twice is harmless.
    pub fn finalize(&mut self) -> Result<()> {
        if self.finalized {
            return Ok(());
        }
        let r = match self.conn.as_mut() {
            None => Ok(()),
            Some(c) => match c.version {
                Version::V1 => c
                    .request(&v1::finalize(), Framing::V1, "finalize_ack")
                    .map(drop),
                Version::V2 => c
                    .request(&v2::finalize(), Framing::V2, "finalize-response")
                    .map(drop),
            },
        };
        self.finalized = true;
        self.conn = None;
        r
    }
}

fn check_text(what: &'static str, t: &str, max: usize) -> Result<()> {
    let reason = if what == "key" && t.is_empty() {
        Some("empty")
    } else if t.len() > max {
        Some("too long")
    } else if t
        .bytes()
        .any(|b| matches!(b, b' ' | b'\n' | b';' | b'=' | 0) && !(what == "value" && b == b'='))
    {
        Some("contains a space, newline, ';', '=' or NUL")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::Invalid {
            what,
            text: clip(t),
            reason,
        }),
        None => Ok(()),
    }
}

/// Upper-case hex encoding (MPICH's convention for PMI values).
pub fn to_hex(data: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789ABCDEF";
    let mut s = String::with_capacity(data.len() * 2);
    for b in data {
        s.push(D[usize::from(b >> 4)] as char);
        s.push(D[usize::from(b & 15)] as char);
    }
    s
}

/// Decodes hex (either case); `None` if malformed.
pub fn from_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    s.as_bytes()
        .chunks(2)
        .map(|p| {
            let h = (p[0] as char).to_digit(16)?;
            let l = (p[1] as char).to_digit(16)?;
            Some((h * 16 + l) as u8)
        })
        .collect()
}

fn unix_from_fd(fd: i32) -> Result<UnixStream> {
    sys::adopt_inherited_socket(fd).map_err(|e| Error::BadEnv {
        var: "PMI_FD",
        value: fd.to_string(),
        reason: match e {
            sys::InheritedFdError::NotOpen(e) => format!("not an open file descriptor ({e})"),
            sys::InheritedFdError::NotASocket => "not a socket".into(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn settings_selection() {
        let s = Settings::from_env(env(&[
            ("PMI_FD", "6"),
            ("PMI_RANK", "1"),
            ("PMI_SIZE", "2"),
        ]))
        .unwrap();
        assert_eq!(s.transport, Transport::Fd(6));
        assert_eq!((s.rank, s.size, s.version), (Some(1), Some(2), Version::V1));
        let s = Settings::from_env(env(&[
            ("PMI_PORT", "vm:41149"),
            ("PMI_ID", "3"),
            ("OXMPI_PMI_VERSION", "2"),
            ("PMI_VERSION", "1"),
        ]))
        .unwrap();
        assert_eq!(
            s.transport,
            Transport::Port {
                addr: "vm:41149".into(),
                id: Some("3".into())
            }
        );
        assert_eq!(s.version, Version::V2);
        let s = Settings::from_env(env(&[("SLURM_NTASKS", "1")])).unwrap();
        assert_eq!(s.transport, Transport::Singleton);
    }

    #[test]
    fn settings_errors() {
        assert!(matches!(
            Settings::from_env(env(&[("SLURM_NTASKS", "4")])),
            Err(Error::NoPmiButSlurmTasks {
                var: "SLURM_NTASKS",
                ..
            })
        ));
        assert!(matches!(
            Settings::from_env(env(&[("SLURM_STEP_NUM_TASKS", "2"), ("SLURM_NTASKS", "1")])),
            Err(Error::NoPmiButSlurmTasks {
                var: "SLURM_STEP_NUM_TASKS",
                ..
            })
        ));
        assert!(matches!(
            Settings::from_env(env(&[("PMI_FD", "x")])),
            Err(Error::BadEnv { var: "PMI_FD", .. })
        ));
        assert!(matches!(
            Settings::from_env(env(&[("PMI_PORT", "nohostport")])),
            Err(Error::BadEnv {
                var: "PMI_PORT",
                ..
            })
        ));
        assert!(matches!(
            Settings::from_env(env(&[("PMI_FD", "3"), ("PMI_VERSION", "3")])),
            Err(Error::BadEnv {
                var: "PMI_VERSION",
                ..
            })
        ));
        let e = Settings::from_env(env(&[("SLURM_NTASKS", "4")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("srun --mpi=pmi2"), "{e}");
    }

    #[test]
    fn singleton_kvs() {
        let mut p = Pmi::singleton();
        assert_eq!((p.rank(), p.size()), (0, 1));
        p.put("a", "1").unwrap();
        assert!(matches!(p.get(None, "a"), Err(Error::NotFound { .. })));
        p.fence().unwrap();
        assert_eq!(p.get(None, "a").unwrap(), "1");
        p.put_bytes("blob", &[0, 1, 254, 255]).unwrap();
        p.fence().unwrap();
        assert_eq!(p.get(None, "blob").unwrap(), "1:0001FEFF");
        assert_eq!(p.get_bytes(None, "blob").unwrap(), vec![0, 1, 254, 255]);
        assert_eq!(p.node_of_ranks().unwrap(), Some(vec![0]));
        p.finalize().unwrap();
        assert!(matches!(p.put("b", "2"), Err(Error::Finalized)));
    }

    #[test]
    fn invalid_keys_and_values() {
        let mut p = Pmi::singleton();
        for (k, v) in [
            ("a b", "1"),
            ("", "1"),
            ("k", "x y"),
            ("k", "a;b"),
            ("k=", "1"),
        ] {
            assert!(
                matches!(p.put(k, v), Err(Error::Invalid { .. })),
                "{k:?} {v:?}"
            );
        }
        assert!(p.put("k", "a=b").is_ok());
        assert!(matches!(
            p.put("k", &"A".repeat(2000)),
            Err(Error::Invalid { .. })
        ));
    }

    #[test]
    fn hex() {
        assert_eq!(to_hex(b"/dev"), "2F646576");
        assert_eq!(from_hex("2f646576").unwrap(), b"/dev");
        assert!(from_hex("2F6").is_none());
        assert!(from_hex("ZZ").is_none());
    }
}
