//! Dynamic process management: ports (`MPI_Open_port`/`MPI_Close_port`),
//! `MPI_Comm_accept`/`MPI_Comm_connect` and `MPI_Comm_join` between processes of one job or
//! of different jobs, and the name service (`MPI_Publish_name`, `MPI_Lookup_name`,
//! `MPI_Unpublish_name`); the parents' and children's halves of `MPI_Comm_spawn` ([`crate::spawn`]).
//!
//! A port is a TCP port of the process that opened it (one listener on each address its
//! name offers, and on loopback; never on 0.0.0.0), and its name says where it listens and
//! holds a random token: `oxmpi-port:<job>:<world rank>:<id>:<host>:<addresses>:
//! <tcp port>:<token>` (addresses `a.b.c.d+...`). The connecting group's root connects to it
//! and sends a hello (token, its job and its group's world ranks); the accepting root takes
//! the first hello with the right token and answers with its own group. Both roots then
//! tell their groups, and the two groups (the accepting one first) form one group of
//! named processes (`ProcName`: job + world rank): the engine links the members of
//! different jobs that have not met ([`oxmpi_engine::Engine::connect_group`], the cards
//! swapped by the roots over the socket: [`GroupBoot`]), and the groups agree on context
//! ids as `MPI_Intercomm_create` does, the roots swapping over the socket again. Members of
//! one job are linked already, so a connect within a job only agrees. A port whose process
//! is gone refuses the connection: `MPI_ERR_PORT` at once; one nobody accepts on fails
//! with `MPI_ERR_PORT` after `dpm_connect_timeout`. `MPI_Comm_join` does the same over
//! the user's socket between two single processes.
//!
//! Published names go to the job's name server when it has one (`mpirun --ompi-server`:
//! `oxmpi-server`, protocol `oxmpi_wire::names`), visible to every job that uses it;
//! otherwise they live as files in the job's directory on the node (`OXMPI_JOB_DIR`),
//! visible to the processes of the job on the same node, and a process without a job
//! directory (singleton) keeps them to itself.

use crate::consts::*;
use crate::ffi::{copy_cstr, out, read_cstr, MpiError, MpiResult};
use crate::intercomm::{
    contribution, dec_list, enc_list, exchange_with, fail_group, from_leader, make_inter,
    require_intra, Net, Star,
};
use crate::state::lock;
use oxmpi_engine::ProcName;
use oxmpi_wire::names::{Reply, Request, Uri};
use std::collections::{BTreeMap, HashMap};
use std::ffi::{c_char, c_int};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Tag of the agreements within each group (its collective context); above the ranges of
/// `oxmpi-coll`, `MPI_Comm_create_group` and `MPI_Intercomm_create`.
const CONNECT_TAG: i32 = 1 << 23;
/// Largest port id.
const PORT_ID_MAX: u32 = (1 << 20) - 1;
/// What a hello and its answer start with.
const MAGIC: &[u8] = b"oxmpi-dpm-1";
/// How long an accepting root waits for the hello of a connection it accepted.
const HELLO_WAIT: Duration = Duration::from_secs(10);
/// Largest frame on a connection socket (cards of large groups fit).
const FRAME_MAX: usize = 64 << 20;

/// An open port: its listeners (one per address its name offers, and loopback; all
/// non-blocking, on one TCP port) and token.
struct Port {
    listeners: Arc<Vec<TcpListener>>,
    token: u64,
}

static NEXT_PORT: AtomicU32 = AtomicU32::new(1);
static OPEN_PORTS: Mutex<BTreeMap<u32, Port>> = Mutex::new(BTreeMap::new());
/// Published names when the job has no directory.
static LOCAL_NAMES: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

/// What identifies this job among others on the machine.
pub(crate) fn job_key() -> String {
    for v in ["OXMPI_JOBID", "PMI_JOBID", "SLURM_JOB_ID"] {
        if let Ok(s) = std::env::var(v) {
            if !s.is_empty() {
                let step = std::env::var("SLURM_STEP_ID").unwrap_or_default();
                let raw = if v == "SLURM_JOB_ID" {
                    format!("{s}.{step}")
                } else {
                    s
                };
                return raw.replace(':', "_");
            }
        }
    }
    format!("singleton{}", std::process::id())
}

/// A parsed port name (see the module documentation).
#[derive(Clone, Debug, PartialEq, Eq)]
struct PortName {
    job: String,
    rank: i32,
    id: u32,
    host: String,
    addrs: Vec<Ipv4Addr>,
    port: u16,
    token: u64,
}

impl PortName {
    /// The name's text, with as many addresses as fit `MPI_MAX_PORT_NAME`.
    fn text(&self) -> String {
        let head = format!(
            "oxmpi-port:{}:{}:{}:{}:",
            self.job, self.rank, self.id, self.host
        );
        let tail = format!(":{}:{:016x}", self.port, self.token);
        let mut addrs = String::new();
        for a in &self.addrs {
            let more = if addrs.is_empty() {
                a.to_string()
            } else {
                format!("{addrs}+{a}")
            };
            if head.len() + more.len() + tail.len() >= MPI_MAX_PORT_NAME as usize {
                break;
            }
            addrs = more;
        }
        format!("{head}{addrs}{tail}")
    }

    /// Parses a port name; a malformed one is `MPI_ERR_PORT` saying why.
    fn parse(name: &str) -> MpiResult<PortName> {
        let bad =
            |why: &str| MpiError::new(MPI_ERR_PORT, format!("invalid port name {name:?}: {why}"));
        let f: Vec<&str> = name.split(':').collect();
        if f.first() != Some(&"oxmpi-port") {
            return Err(bad("not a port opened by MPI_Open_port of oxmpi"));
        }
        let [_, job, rank, id, host, addrs, port, token] = f[..] else {
            return Err(bad(&format!("{} fields instead of 8", f.len())));
        };
        let id: u32 = id.parse().map_err(|_| bad("bad port id"))?;
        if job.is_empty() || id == 0 || id > PORT_ID_MAX {
            return Err(bad("bad job or port id"));
        }
        Ok(PortName {
            job: job.to_string(),
            rank: rank.parse().map_err(|_| bad("bad rank"))?,
            id,
            host: host.to_string(),
            addrs: addrs
                .split('+')
                .filter(|a| !a.is_empty())
                .map(|a| a.parse().map_err(|_| bad("bad address")))
                .collect::<MpiResult<_>>()?,
            port: port.parse().map_err(|_| bad("bad tcp port"))?,
            token: u64::from_str_radix(token, 16).map_err(|_| bad("bad token"))?,
        })
    }

    /// Where to connect, best first.
    fn targets(&self) -> Vec<SocketAddr> {
        targets(&self.host, &self.addrs, self.port)
    }
}

/// The addresses of a listener on `host` (with `addrs`, at TCP `port`), best first: the
/// loopback address when it is our host, then its addresses.
fn targets(host: &str, addrs: &[Ipv4Addr], port: u16) -> Vec<SocketAddr> {
    let mut v = Vec::new();
    if host == oxmpi_engine::sys::hostname() {
        v.push(SocketAddr::from((Ipv4Addr::LOCALHOST, port)));
    }
    v.extend(addrs.iter().map(|&a| SocketAddr::from((a, port))));
    v
}

mpi_fn! {
    /// `MPI_Open_port`: listens on a TCP port of this process.
    fn PMPI_Open_port / "MPI_Open_port" (info: c_int, port_name: *mut c_char) {
        let _ = info;
        if port_name.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL port_name"));
        }
        let name = open_port()?;
        copy_cstr(port_name, MPI_MAX_PORT_NAME as usize, &name.text())?;
        Ok(())
    }
}

/// Opens a port of this process (see `MPI_Open_port`).
fn open_port() -> MpiResult<PortName> {
    let id = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
    if id > PORT_ID_MAX {
        return Err(MpiError::new(
            MPI_ERR_PORT,
            "no more ports (2^20 per process)",
        ));
    }
    let mut addrs: Vec<Ipv4Addr> = oxmpi_base::net::interfaces()
        .into_iter()
        .map(|i| i.addr)
        .filter(|a| !a.is_loopback())
        .collect();
    let mut seen = std::collections::HashSet::new();
    addrs.retain(|a| seen.insert(*a));
    // The port listens on the addresses its name offers (and loopback, for this host),
    // not on every address of the host.
    let mut bind = addrs.clone();
    bind.push(Ipv4Addr::LOCALHOST);
    let cannot = |e: std::io::Error| {
        MpiError::new(MPI_ERR_PORT, format!("MPI_Open_port: cannot listen: {e}"))
    };
    let (listeners, port) = oxmpi_base::net::listen_on(&bind, 0).map_err(cannot)?;
    for l in &listeners {
        l.set_nonblocking(true).map_err(cannot)?;
    }
    let name = PortName {
        job: job_key(),
        rank: lock().world_rank(),
        id,
        host: oxmpi_engine::sys::hostname(),
        addrs,
        port,
        token: oxmpi_wire::names::random_token()
            .map_err(|e| MpiError::new(MPI_ERR_PORT, format!("MPI_Open_port: {e}")))?,
    };
    let p = Port {
        listeners: Arc::new(listeners),
        token: name.token,
    };
    OPEN_PORTS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id, p);
    Ok(name)
}

/// The listeners and token of port `name` if this process opened it and it is open.
fn own_port(name: &PortName) -> Option<(Arc<Vec<TcpListener>>, u64)> {
    if name.job != job_key() || name.rank != lock().world_rank() {
        return None;
    }
    let ports = OPEN_PORTS.lock().unwrap_or_else(|e| e.into_inner());
    let p = ports.get(&name.id).filter(|p| p.token == name.token)?;
    Some((p.listeners.clone(), p.token))
}

mpi_fn! {
    /// `MPI_Close_port`.
    fn PMPI_Close_port / "MPI_Close_port" (port_name: *const c_char) {
        let text = read_cstr(port_name, "port_name")?;
        let name = PortName::parse(&text)?;
        if own_port(&name).is_none() {
            return Err(MpiError::new(MPI_ERR_PORT, format!("port {text:?} is not open in this process")));
        }
        OPEN_PORTS.lock().unwrap_or_else(|e| e.into_inner()).remove(&name.id);
        Ok(())
    }
}

// ---- the connection between the two roots ----

/// A byte stream between the two roots (a TCP connection, or the user's socket for
/// `MPI_Comm_join`).
trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// Sends one length-prefixed frame.
fn send_frame(s: &mut dyn Stream, data: &[u8]) -> std::io::Result<()> {
    let mut v = (data.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(data);
    s.write_all(&v)?;
    s.flush()
}

/// Reads one length-prefixed frame.
fn recv_frame(s: &mut dyn Stream) -> std::io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    s.read_exact(&mut len)?;
    let n = u32::from_le_bytes(len) as usize;
    if n > FRAME_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("a frame of {n} bytes: not an oxmpi process"),
        ));
    }
    let mut v = vec![0u8; n];
    s.read_exact(&mut v)?;
    Ok(v)
}

/// `dpm_exchange_timeout`: how long a root waits for the other job's root once they met.
fn exchange_timeout() -> Duration {
    let _ = oxmpi_base::params::register_global(&oxmpi_engine::PROVIDER);
    let s = oxmpi_base::params::int(&oxmpi_engine::frameworks::EXCHANGE_TIMEOUT).max(1);
    Duration::from_secs(s as u64)
}

/// Whether `e` is a socket timeout (of `SO_RCVTIMEO`/`SO_SNDTIMEO` or [`Borrowed`]'s).
fn timed_out(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
    )
}

/// The error text of a failed exchange with the other job: a timeout names the parameter.
fn exchange_error(e: &std::io::Error) -> String {
    if timed_out(e) {
        format!(
            "no answer within {} s (dpm_exchange_timeout): the other job stopped answering",
            exchange_timeout().as_secs()
        )
    } else {
        e.to_string()
    }
}

/// Puts `dpm_exchange_timeout` on both directions of a connection's socket.
fn limit(s: &TcpStream) -> std::io::Result<()> {
    let t = Some(exchange_timeout());
    s.set_read_timeout(t)?;
    s.set_write_timeout(t)
}

/// One side of a connection: the socket and whether this side sends first in each swap
/// (the accepting side), so no swap waits on a full socket. Reads and writes on it time
/// out after `dpm_exchange_timeout`.
struct Conn {
    sock: Box<dyn Stream>,
    first: bool,
    /// What the socket connects to, for errors.
    what: String,
}

impl Conn {
    /// Sends `mine` and receives the other side's frame (in this side's order).
    fn swap(&mut self, mine: &[u8]) -> MpiResult<Vec<u8>> {
        let r = if self.first {
            send_frame(&mut *self.sock, mine).and_then(|_| recv_frame(&mut *self.sock))
        } else {
            recv_frame(&mut *self.sock).and_then(|t| send_frame(&mut *self.sock, mine).map(|_| t))
        };
        r.map_err(|e| {
            MpiError::new(
                MPI_ERR_PORT,
                format!("connection to {}: {}", self.what, exchange_error(&e)),
            )
        })
    }
}

/// A group's description in a hello: magic, token, job, world ranks.
fn hello(token: u64, job: &str, ranks: &[i32]) -> Vec<u8> {
    let ranks: Vec<u8> = ranks.iter().flat_map(|r| r.to_le_bytes()).collect();
    enc_list(&[
        MAGIC.to_vec(),
        token.to_le_bytes().to_vec(),
        job.as_bytes().to_vec(),
        ranks,
    ])
}

/// Parses a hello: token, job, world ranks; `None` if it is not one.
fn parse_hello(b: &[u8]) -> Option<(u64, String, Vec<i32>)> {
    let l = dec_list(b, &mut 0)?;
    let [magic, token, job, ranks] = &l[..] else {
        return None;
    };
    if magic != MAGIC || ranks.len() % 4 != 0 {
        return None;
    }
    Some((
        u64::from_le_bytes(token.as_slice().try_into().ok()?),
        String::from_utf8(job.clone()).ok()?,
        ranks
            .chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().expect("4 bytes")))
            .collect(),
    ))
}

/// The accepting root: takes connections on the port until one sends a hello with the
/// port's token, answers it with our group; returns the connection and the other group.
fn accept_root(
    listeners: &[TcpListener],
    token: u64,
    ours: &[u8],
) -> MpiResult<(Conn, String, Vec<i32>)> {
    let err = |e: std::io::Error| MpiError::new(MPI_ERR_PORT, format!("MPI_Comm_accept: {e}"));
    loop {
        let (mut s, from) = accept_any(listeners).map_err(err)?;
        let _ = s.set_read_timeout(Some(HELLO_WAIT));
        let Ok(theirs) = recv_frame(&mut s) else {
            continue;
        };
        match parse_hello(&theirs) {
            Some((t, job, ranks)) if t == token => {
                limit(&s).map_err(err)?;
                let _ = s.set_nodelay(true);
                send_frame(&mut s, ours).map_err(err)?;
                let what = format!("job {job} at {from}");
                return Ok((
                    Conn {
                        sock: Box::new(s),
                        first: true,
                        what,
                    },
                    job,
                    ranks,
                ));
            }
            // A stranger or a stale connect: closed, and we keep accepting.
            _ => continue,
        }
    }
}

/// The next connection on any of a port's (non-blocking) listeners, as a blocking socket.
fn accept_any(listeners: &[TcpListener]) -> std::io::Result<(TcpStream, SocketAddr)> {
    use std::os::fd::AsFd;
    loop {
        for l in listeners {
            match l.accept() {
                Ok((s, from)) => {
                    s.set_nonblocking(false)?;
                    return Ok((s, from));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        let fds: Vec<_> = listeners.iter().map(|l| l.as_fd()).collect();
        crate::sys::wait_any_readable(&fds)?;
    }
}

/// The connecting root: connects to the port (refused: the port is gone), sends our
/// hello and waits `dpm_connect_timeout` for the answer.
fn connect_root(port: &PortName, text: &str, ours: &[u8]) -> MpiResult<(Conn, String, Vec<i32>)> {
    let _ = oxmpi_base::params::register_global(&oxmpi_engine::PROVIDER);
    let wait = oxmpi_base::params::int(&oxmpi_engine::frameworks::CONNECT_TIMEOUT).max(1) as u64;
    let fail = |why: String| {
        MpiError::new(
            MPI_ERR_PORT,
            format!("cannot connect to port {text:?}: {why}"),
        )
    };
    let mut last = String::from("it has no address");
    let mut sock = None;
    for a in port.targets() {
        match TcpStream::connect_timeout(&a, Duration::from_secs(wait.min(5))) {
            Ok(s) => {
                sock = Some((s, a));
                break;
            }
            Err(e) => last = format!("{a}: {e}"),
        }
    }
    let Some((mut s, at)) = sock else {
        return Err(fail(format!(
            "nobody listens there any more (the job that opened it has ended or closed it; {last})"
        )));
    };
    let _ = s.set_nodelay(true);
    let io = |e: std::io::Error| fail(format!("{at}: {e}"));
    send_frame(&mut s, ours).map_err(io)?;
    s.set_read_timeout(Some(Duration::from_secs(wait)))
        .map_err(io)?;
    let answer = match recv_frame(&mut s) {
        Ok(a) => a,
        Err(e) if timed_out(&e) => {
            return Err(fail(format!(
                "no MPI_Comm_accept on it within {wait} s (dpm_connect_timeout)"
            )))
        }
        Err(e) => return Err(io(e)),
    };
    limit(&s).map_err(io)?;
    let (_, job, ranks) =
        parse_hello(&answer).ok_or_else(|| fail(format!("{at} is not an oxmpi port")))?;
    let what = format!("job {job} at {at}");
    Ok((
        Conn {
            sock: Box::new(s),
            first: false,
            what,
        },
        job,
        ranks,
    ))
}

// ---- the group of both sides ----

/// The bootstrap of a group spanning two jobs (see [`oxmpi_engine::Engine::connect_group`]):
/// a fence gathers each side's puts at its root, the roots swap them over the connection,
/// and each root broadcasts both sides' to its group.
struct GroupBoot<'a> {
    net: &'a Net,
    star: Star,
    /// The connection (at the root).
    conn: Option<&'a mut Conn>,
    /// Our member index and the group's size.
    me: i32,
    size: i32,
    /// The member index of the first member of each side (the other side's, ours).
    base: [i32; 2],
    puts: Vec<Vec<u8>>,
    kv: HashMap<(i32, String), String>,
    /// The MPI error that ended a fence (returned instead of the engine's).
    failed: Option<MpiError>,
}

impl GroupBoot<'_> {
    fn fence_mpi(&mut self) -> MpiResult {
        let (net, star) = (self.net, self.star);
        let mine = enc_list(&std::mem::take(&mut self.puts));
        let mut blob = Vec::new();
        if let Some(all) = star.gather(net, mine, CONNECT_TAG)? {
            let ours = enc_list(&all);
            let conn = self.conn.as_mut().expect("the root has the connection");
            let theirs = match conn.swap(&ours) {
                Ok(t) => t,
                Err(e) => return fail_group(net, star, e, CONNECT_TAG),
            };
            blob.push(0);
            blob.extend(enc_list(&[theirs, ours]));
        }
        star.bcast(net, &mut blob, CONNECT_TAG)?;
        let body = from_leader(net, &blob)?;
        let bad = || MpiError::new(MPI_ERR_INTERN, "malformed cards from the other group");
        let sides = dec_list(body, &mut 0).ok_or_else(bad)?;
        for (side, list) in sides.iter().enumerate() {
            for (r, puts) in dec_list(list, &mut 0).ok_or_else(bad)?.iter().enumerate() {
                let kv = dec_list(puts, &mut 0).ok_or_else(bad)?;
                for pair in kv.chunks(2) {
                    let [k, v] = pair else { return Err(bad()) };
                    let member = self.base[side] + r as i32;
                    let text = |b: &Vec<u8>| String::from_utf8_lossy(b).into_owned();
                    self.kv.insert((member, text(k)), text(v));
                }
            }
        }
        Ok(())
    }

    fn eng_err(&self, msg: String) -> oxmpi_engine::Error {
        oxmpi_engine::Error::Bootstrap { rank: self.me, msg }
    }
}

impl oxmpi_engine::Bootstrap for GroupBoot<'_> {
    fn rank(&self) -> i32 {
        self.me
    }
    fn size(&self) -> i32 {
        self.size
    }
    fn put(&mut self, key: &str, value: &str) -> Result<(), oxmpi_engine::Error> {
        self.puts.push(key.as_bytes().to_vec());
        self.puts.push(value.as_bytes().to_vec());
        Ok(())
    }
    fn fence(&mut self) -> Result<(), oxmpi_engine::Error> {
        self.fence_mpi().map_err(|e| {
            let msg = e.detail.clone();
            self.failed = Some(e);
            self.eng_err(msg)
        })
    }
    fn get(&mut self, rank: i32, key: &str) -> Result<String, oxmpi_engine::Error> {
        self.kv
            .get(&(rank, key.to_string()))
            .cloned()
            .ok_or_else(|| self.eng_err(format!("member {rank} published no {key}")))
    }
    fn abort(&mut self, _code: i32, _msg: &str) {}
    fn finalize(&mut self) -> Result<(), oxmpi_engine::Error> {
        Ok(())
    }
}

/// Both groups after their roots met: each root tells its group who the other group is
/// (or the error that ended the meeting), the engine links the members of different jobs,
/// the groups agree on context ids over the roots' connection and make the
/// intercommunicator. `met` is, at the root, the connection and the other group (job and
/// world ranks); `first` says whether our group comes first in the joint group.
fn join_groups(
    comm: c_int,
    star: Star,
    met: Option<MpiResult<(Conn, String, Vec<i32>)>>,
    first: bool,
    newcomm: *mut c_int,
) -> MpiResult {
    let net = Net::new(comm)?;
    let (mine, size) = {
        let st = lock();
        let c = st.comm(comm)?;
        (c.group.clone(), st.comm(MPI_COMM_WORLD)?.group.len() as i32)
    };
    let mut conn = None;
    let mut blob = Vec::new();
    if let Some(met) = met {
        match met {
            Err(e) => return fail_group(&net, star, e, CONNECT_TAG),
            Ok((c, job, ranks)) => {
                blob.push(0);
                blob.extend(hello(0, &job, &ranks));
                conn = Some(c);
            }
        }
    }
    star.bcast(&net, &mut blob, CONNECT_TAG)?;
    let body = from_leader(&net, &blob)?;
    let (_, job, theirs) = parse_hello(body)
        .ok_or_else(|| MpiError::new(MPI_ERR_INTERN, "malformed group from the root").on(comm))?;
    let own = job_key();
    if let Some(w) = mine.iter().find(|&&w| w >= size) {
        return Err(MpiError::new(
            MPI_ERR_UNSUPPORTED_OPERATION,
            format!("the communicator holds process {w} of another job (connecting from such a communicator is not supported)"),
        )
        .on(comm));
    }
    let name = |job: &str, rank: i32| ProcName {
        job: job.to_string(),
        rank,
    };
    let ours: Vec<ProcName> = mine.iter().map(|&r| name(&own, r)).collect();
    let other: Vec<ProcName> = theirs.iter().map(|&r| name(&job, r)).collect();
    if let Some(p) = ours.iter().find(|p| other.contains(p)) {
        return Err(MpiError::new(
            MPI_ERR_COMM,
            format!("the two groups overlap ({p} is in both)"),
        )
        .on(comm));
    }
    let (n0, members): (i32, Vec<ProcName>) = if first {
        (
            ours.len() as i32,
            ours.iter().chain(&other).cloned().collect(),
        )
    } else {
        (
            other.len() as i32,
            other.iter().chain(&ours).cloned().collect(),
        )
    };
    let (base_other, base_ours) = if first { (n0, 0) } else { (0, n0) };
    let mut boot = GroupBoot {
        net: &net,
        star,
        conn: conn.as_mut(),
        me: base_ours + star.rank,
        size: members.len() as i32,
        base: [base_other, base_ours],
        puts: Vec::new(),
        kv: HashMap::new(),
        failed: None,
    };
    let linked = net.eng.connect_group(&mut boot, &own, &members);
    let idx = match linked {
        Ok(i) => i,
        Err(e) => {
            return Err(boot
                .failed
                .take()
                .unwrap_or_else(|| crate::backend::err(e))
                .on(comm))
        }
    };
    drop(boot);
    let (a, b) = idx.split_at(n0 as usize);
    let (local, remote) = if first {
        (a.to_vec(), b.to_vec())
    } else {
        (b.to_vec(), a.to_vec())
    };
    let mut round = |w: &[i32]| {
        let swap = conn.as_mut().map(|c| Ok(move |l: &[u8]| c.swap(l)));
        exchange_with(&net, star, swap, contribution(w)?, CONNECT_TAG)
    };
    let x = round(&[])?;
    let ctx = x.agree_ctx(4, Some(&mut round))?;
    let h = make_inter(comm, ctx, local, remote)?;
    out(newcomm, h, "newcomm")
}

/// `comm`'s collective view with `root` as leader.
fn setup(comm: c_int, root: c_int) -> MpiResult<Star> {
    require_intra(comm, "the communicator of MPI_Comm_accept/MPI_Comm_connect")?;
    let st = lock();
    st.check_active()?;
    let c = st.comm(comm)?;
    let size = c.group.len() as i32;
    if !(0..size).contains(&root) {
        return Err(MpiError::new(
            MPI_ERR_ROOT,
            format!("invalid root {root} (communicator size {size})"),
        )
        .on(comm));
    }
    Ok(Star {
        ctx: c.coll,
        rank: c.rank,
        size,
        leader: root,
    })
}

/// `MPI_Comm_accept` (`accept`) or `MPI_Comm_connect`: the root takes one connection on
/// its open port, or connects to the port; then both groups join.
fn rendezvous(
    port_name: *const c_char,
    root: c_int,
    comm: c_int,
    newcomm: *mut c_int,
    accept: bool,
) -> MpiResult {
    if newcomm.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL newcomm").on(comm));
    }
    let star = setup(comm, root)?;
    // The port matters at the root only.
    let met = (star.rank == root).then(|| meet(&read_cstr(port_name, "port_name")?, comm, accept));
    join_groups(comm, star, met, accept, newcomm)
}

/// The root's side of a rendezvous: accepts one connection on its open port `text`, or
/// connects to it; returns the connection and the other group.
fn meet(text: &str, comm: c_int, accept: bool) -> MpiResult<(Conn, String, Vec<i32>)> {
    let text = text.to_string();
    let port = PortName::parse(&text)?;
    let ranks = lock().comm(comm)?.group.clone();
    let job = job_key();
    if accept {
        let (listener, token) = own_port(&port).ok_or_else(|| {
            let me = lock().world_rank();
            MpiError::new(
                MPI_ERR_PORT,
                format!("port {text:?} is not open in this process (world rank {me} of job {job})"),
            )
        })?;
        accept_root(&listener, token, &hello(0, &job, &ranks))
    } else {
        if own_port(&port).is_some() {
            return Err(MpiError::new(
                    MPI_ERR_PORT,
                    format!("cannot connect to port {text:?}: it is this process's own port (accept and connect would wait for each other)"),
                ));
        }
        connect_root(&port, &text, &hello(port.token, &job, &ranks))
    }
}

/// The parents' side of `MPI_Comm_spawn[_multiple]` over `comm`: the root opens a port,
/// `start(port name)` has the launcher start the children (who connect to the port in
/// their `MPI_Init`, [`connect_parent`]), the root accepts them, and both groups make the
/// intercommunicator `intercomm`. An error of `start` reaches every parent.
pub(crate) fn spawn_accept(
    comm: c_int,
    root: c_int,
    intercomm: *mut c_int,
    start: impl FnOnce(&str) -> MpiResult,
) -> MpiResult {
    if intercomm.is_null() {
        return Err(MpiError::new(MPI_ERR_ARG, "NULL intercomm").on(comm));
    }
    let star = setup(comm, root)?;
    let met = (star.rank == root).then(|| {
        let port = open_port()?;
        let text = port.text();
        let r = start(&text).and_then(|()| meet(&text, comm, true));
        OPEN_PORTS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&port.id);
        r
    });
    join_groups(comm, star, met, true, intercomm)
}

/// The children's side: all of `MPI_COMM_WORLD` connects to the parents' port `text` and
/// makes the intercommunicator returned by `MPI_Comm_get_parent`.
pub(crate) fn connect_parent(text: &str) -> MpiResult<c_int> {
    let star = setup(MPI_COMM_WORLD, 0)?;
    let met = (star.rank == 0).then(|| meet(text, MPI_COMM_WORLD, false));
    let mut parent = MPI_COMM_NULL;
    join_groups(MPI_COMM_WORLD, star, met, false, &mut parent)?;
    Ok(parent)
}

mpi_fn! {
    /// `MPI_Comm_accept`: collective over `comm`; the root takes one connection on its
    /// open port.
    fn PMPI_Comm_accept / "MPI_Comm_accept" (port_name: *const c_char, info: c_int, root: c_int, comm: c_int, newcomm: *mut c_int) {
        let _ = info;
        rendezvous(port_name, root, comm, newcomm, true)
    }
}

mpi_fn! {
    /// `MPI_Comm_connect`: collective over `comm`; the root connects to the port.
    fn PMPI_Comm_connect / "MPI_Comm_connect" (port_name: *const c_char, info: c_int, root: c_int, comm: c_int, newcomm: *mut c_int) {
        let _ = info;
        rendezvous(port_name, root, comm, newcomm, false)
    }
}

mpi_fn! {
    /// `MPI_Comm_join`: both ends of a connected socket, processes of the same job or of
    /// two jobs.
    fn PMPI_Comm_join / "MPI_Comm_join" (fd: c_int, intercomm: *mut c_int) {
        if intercomm.is_null() {
            return Err(MpiError::new(MPI_ERR_ARG, "NULL intercomm"));
        }
        let (me, star) = {
            let st = lock();
            st.check_active()?;
            (st.world_rank(), Star { ctx: st.comm(MPI_COMM_SELF)?.coll, rank: 0, size: 1, leader: 0 })
        };
        let job = job_key();
        // SAFETY: the caller's descriptor, borrowed: ManuallyDrop keeps it open.
        let file = std::mem::ManuallyDrop::new(unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(fd) });
        let sock = Borrowed(file, exchange_timeout());
        let mut conn = Conn { sock: Box::new(sock), first: true, what: format!("socket {fd}") };
        let theirs = {
            let mine = hello(0, &job, &[me]);
            // Both send first: a hello is far smaller than a socket's buffer.
            send_frame(&mut *conn.sock, &mine).and_then(|_| recv_frame(&mut *conn.sock))
                .map_err(|e| MpiError::new(MPI_ERR_OTHER, format!("MPI_Comm_join: socket {fd}: {}", exchange_error(&e))))?
        };
        let (_, tjob, tranks) = parse_hello(&theirs).ok_or_else(|| MpiError::new(MPI_ERR_OTHER, format!("MPI_Comm_join: the peer on socket {fd} is not an oxmpi process")))?;
        let them = (tjob.clone(), tranks.first().copied().unwrap_or(-1));
        if them == (job.clone(), me) {
            return Err(MpiError::new(MPI_ERR_OTHER, "MPI_Comm_join: both ends of the socket are this process"));
        }
        // The lower (job, rank) comes first and sends first in each swap.
        conn.first = (job, me) < them;
        let first = conn.first;
        join_groups(MPI_COMM_SELF, star, Some(Ok((conn, tjob, tranks))), first, intercomm)
    }
}

/// The user's socket of `MPI_Comm_join`, borrowed (never closed here, its options left
/// alone): each read and write first waits up to the time limit for the socket to be
/// ready, else fails with `TimedOut`.
struct Borrowed(std::mem::ManuallyDrop<std::fs::File>, Duration);

impl Borrowed {
    /// Waits until the socket is ready for `events` (`TimedOut` after the limit).
    fn ready(&self, events: libc::c_short) -> std::io::Result<()> {
        use std::os::fd::AsFd;
        if crate::sys::wait_ready(self.0.as_fd(), events, self.1)? {
            Ok(())
        } else {
            Err(std::io::ErrorKind::TimedOut.into())
        }
    }
}

impl Read for Borrowed {
    fn read(&mut self, b: &mut [u8]) -> std::io::Result<usize> {
        self.ready(libc::POLLIN)?;
        self.0.read(b)
    }
}

impl Write for Borrowed {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.ready(libc::POLLOUT)?;
        self.0.write(b)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// ---- name service ----

/// The name server of the job (`mpirun --ompi-server`), if it has one.
fn name_server() -> MpiResult<Option<Uri>> {
    match std::env::var("OXMPI_NAME_SERVER") {
        Ok(s) if !s.is_empty() => s
            .parse()
            .map(Some)
            .map_err(|e: String| MpiError::new(MPI_ERR_OTHER, e)),
        _ => Ok(None),
    }
}

/// Sends `req` to the name server `uri` (after the hello with its token) and returns its
/// reply.
fn ask(uri: &Uri, req: Request) -> MpiResult<Reply> {
    use std::io::BufRead;
    let fail = |why: String| MpiError::new(MPI_ERR_OTHER, format!("name server {uri}: {why}"));
    let mut last = String::from("it has no address");
    for a in targets(&uri.host, &uri.addrs, uri.port) {
        let mut s = match TcpStream::connect_timeout(&a, Duration::from_secs(5)) {
            Ok(s) => s,
            Err(e) => {
                last = format!("{a}: {e}");
                continue;
            }
        };
        let io = |e: std::io::Error| fail(format!("{a}: {e}"));
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(io)?;
        let hello = Request::Hello { token: uri.token }.encode();
        s.write_all(format!("{hello}{}", req.encode()).as_bytes())
            .map_err(io)?;
        let mut lines = std::io::BufReader::new(s).lines();
        let mut reply = || -> MpiResult<Reply> {
            let l = lines
                .next()
                .unwrap_or_else(|| Err(std::io::ErrorKind::UnexpectedEof.into()))
                .map_err(io)?;
            Reply::decode(&l).map_err(fail)
        };
        if reply()? != Reply::Ok {
            return Err(fail("it refused our token".into()));
        }
        return reply();
    }
    Err(fail(format!(
        "unreachable ({last}); is oxmpi-server running?"
    )))
}

fn names_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("OXMPI_JOB_DIR").map(|d| std::path::PathBuf::from(d).join("names"))
}

/// File name of a service: its bytes in hex (any string is a valid service name).
fn service_file(service: &str) -> String {
    service.bytes().map(|b| format!("{b:02x}")).collect()
}

mpi_fn! {
    /// `MPI_Publish_name`: at the job's name server (`mpirun --ompi-server`), else in the
    /// job's directory on the node.
    fn PMPI_Publish_name / "MPI_Publish_name" (service_name: *const c_char, info: c_int, port_name: *const c_char) {
        let _ = info;
        let service = read_cstr(service_name, "service_name")?;
        let port = read_cstr(port_name, "port_name")?;
        let taken = || MpiError::new(MPI_ERR_NAME, format!("service {service:?} is already published"));
        if let Some(uri) = name_server()? {
            return match ask(&uri, Request::Publish { service: service.clone(), port })? {
                Reply::Ok => Ok(()),
                Reply::Taken => Err(taken()),
                r => Err(MpiError::new(MPI_ERR_OTHER, format!("name server {uri}: {r:?}"))),
            };
        }
        let Some(dir) = names_dir() else {
            let mut m = LOCAL_NAMES.lock().unwrap_or_else(|e| e.into_inner());
            if m.contains_key(&service) {
                return Err(taken());
            }
            m.insert(service, port);
            return Ok(());
        };
        let io = |e: std::io::Error| MpiError::new(MPI_ERR_INTERN, format!("publishing {service:?} in {}: {e}", dir.display()));
        std::fs::create_dir_all(&dir).map_err(io)?;
        // Written under a temporary name, then linked into place (fails if it exists).
        let path = dir.join(service_file(&service));
        let tmp = dir.join(format!(".{}.{}", std::process::id(), NEXT_PORT.load(Ordering::Relaxed)));
        std::fs::write(&tmp, port.as_bytes()).map_err(io)?;
        let r = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match r {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(taken()),
            Err(e) => Err(io(e)),
        }
    }
}

mpi_fn! {
    /// `MPI_Lookup_name`.
    fn PMPI_Lookup_name / "MPI_Lookup_name" (service_name: *const c_char, info: c_int, port_name: *mut c_char) {
        let _ = info;
        let service = read_cstr(service_name, "service_name")?;
        let found = match (name_server()?, names_dir()) {
            (Some(uri), _) => match ask(&uri, Request::Lookup { service: service.clone() })? {
                Reply::Found(p) => Some(p),
                _ => None,
            },
            (None, None) => LOCAL_NAMES.lock().unwrap_or_else(|e| e.into_inner()).get(&service).cloned(),
            (None, Some(dir)) => std::fs::read_to_string(dir.join(service_file(&service))).ok(),
        };
        let port = found.ok_or_else(|| MpiError::new(MPI_ERR_NAME, format!("service {service:?} is not published")))?;
        copy_cstr(port_name, MPI_MAX_PORT_NAME as usize, &port)?;
        Ok(())
    }
}

mpi_fn! {
    /// `MPI_Unpublish_name`.
    fn PMPI_Unpublish_name / "MPI_Unpublish_name" (service_name: *const c_char, info: c_int, port_name: *const c_char) {
        let _ = info;
        let service = read_cstr(service_name, "service_name")?;
        let port = read_cstr(port_name, "port_name")?;
        let missing = || MpiError::new(MPI_ERR_SERVICE, format!("service {service:?} is not published with port {port:?}"));
        if let Some(uri) = name_server()? {
            return match ask(&uri, Request::Unpublish { service: service.clone(), port: port.clone() })? {
                Reply::Ok => Ok(()),
                _ => Err(missing()),
            };
        }
        match names_dir() {
            None => {
                let mut m = LOCAL_NAMES.lock().unwrap_or_else(|e| e.into_inner());
                if m.get(&service) != Some(&port) {
                    return Err(missing());
                }
                m.remove(&service);
            }
            Some(dir) => {
                let path = dir.join(service_file(&service));
                if std::fs::read_to_string(&path).ok().as_deref() != Some(port.as_str()) {
                    return Err(missing());
                }
                std::fs::remove_file(&path).map_err(|_| missing())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A port name round-trips, fits MPI_MAX_PORT_NAME whatever the addresses, and a
    /// malformed one is MPI_ERR_PORT saying why.
    #[test]
    fn port_names_round_trip_and_are_checked() {
        let p = PortName {
            job: "oxmpi-42.0".into(),
            rank: 3,
            id: 7,
            host: "n1".into(),
            addrs: vec![Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(192, 168, 1, 2)],
            port: 4321,
            token: 0xdead_beef,
        };
        let t = p.text();
        assert_eq!(
            t,
            "oxmpi-port:oxmpi-42.0:3:7:n1:10.0.0.1+192.168.1.2:4321:00000000deadbeef"
        );
        assert_eq!(PortName::parse(&t).unwrap(), p);
        let many = PortName {
            addrs: vec![Ipv4Addr::new(172, 16, 100, 200); 40],
            ..p.clone()
        };
        let t = many.text();
        assert!(t.len() < MPI_MAX_PORT_NAME as usize, "{}", t.len());
        assert!(PortName::parse(&t).unwrap().addrs.len() > 5);
        for (bad, why) in [
            ("tcp://x", "not a port opened by MPI_Open_port of oxmpi"),
            ("oxmpi-port:j:0:1", "4 fields instead of 8"),
            ("oxmpi-port:j:0:0:h::1:ff", "bad job or port id"),
            ("oxmpi-port:j:x:1:h::1:ff", "bad rank"),
            ("oxmpi-port:j:0:1:h:1.2.3:1:ff", "bad address"),
            ("oxmpi-port:j:0:1:h::70000:ff", "bad tcp port"),
            ("oxmpi-port:j:0:1:h::1:zz", "bad token"),
        ] {
            let e = PortName::parse(bad).unwrap_err();
            assert_eq!(e.code, MPI_ERR_PORT);
            assert_eq!(e.detail, format!("invalid port name {bad:?}: {why}"));
        }
    }

    /// A hello round-trips; anything else is not one.
    #[test]
    fn hellos_round_trip() {
        let h = hello(99, "job", &[0, 5, 2]);
        assert_eq!(parse_hello(&h), Some((99, "job".into(), vec![0, 5, 2])));
        assert_eq!(parse_hello(b"GET / HTTP/1.0"), None);
        let mut bad = enc_list(&[b"other".to_vec(), vec![0; 8], vec![], vec![]]);
        assert_eq!(parse_hello(&bad), None);
        bad.truncate(5);
        assert_eq!(parse_hello(&bad), None);
    }

    #[test]
    fn service_files_are_hex() {
        assert_eq!(service_file("a/b"), "612f62");
        assert_eq!(service_file(""), "");
    }
}
