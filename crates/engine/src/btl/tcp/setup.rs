//! Wiring up the `tcp` transport ([`TcpSetup`]): every rank that selected `tcp` listens on
//! each of its usable interfaces (and on the loopback address, for peers on its own host)
//! and publishes `addresses,ports,nonce` as the `tcp` section of its endpoint record
//! (`crate::btl::Endpoint`) before the bootstrap fence; after it, the lower rank of each
//! pair without a link connects to the higher one over every pair of interfaces that share
//! a subnet ([`oxmpi_base::net::pair_interfaces`]; a pair that does not answer is skipped
//! with a verbose line), `btl_tcp_links` connections each, or else over the first other
//! address that answers. Each connection starts with a [`Hello`] naming both ranks, the
//! listener's nonce and the connection's index (a connection with a wrong hello is closed);
//! the first one then says how many connections there are, and the peer's link stripes
//! large messages over all of them (`super::stripe`). Also: interface selection and peer
//! addresses.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};

use super::link::TcpLink;
use super::params;
use super::stripe::StripedLink;
use crate::btl::{Job, Link, Links, Setup, BTL};
use crate::{sys, Error};
use oxmpi_base::net;
use oxmpi_base::params::{explicit, int, list};
use std::time::{Duration, Instant};

/// The handshake the connecting (lower) rank sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hello {
    /// The listener's nonce, as published in the key-value store.
    pub nonce: u64,
    /// The connecting rank.
    pub from: i32,
    /// The rank it wants to reach.
    pub to: i32,
    /// The connection's index among those between the two ranks (0 carries the ordered
    /// records and, after its hello, the number of connections as a little-endian `u32`).
    pub link: u32,
}

const HELLO_MAGIC: u32 = u32::from_le_bytes(*b"OXTC");
/// Bytes of an encoded [`Hello`].
pub(crate) const HELLO_LEN: usize = 24;
/// Bytes of the connection count that follows the hello of connection 0.
const COUNT_LEN: usize = 4;
/// Most connections between two ranks.
pub(crate) const MAX_CONNS: usize = 64;

impl Hello {
    /// Wire form: magic, nonce, from, to, link (little-endian).
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
        b[4..12].copy_from_slice(&self.nonce.to_le_bytes());
        b[12..16].copy_from_slice(&self.from.to_le_bytes());
        b[16..20].copy_from_slice(&self.to.to_le_bytes());
        b[20..24].copy_from_slice(&self.link.to_le_bytes());
        b
    }

    /// Parses a hello; `None` if the magic is wrong.
    pub fn decode(b: &[u8; HELLO_LEN]) -> Option<Hello> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        if u32_at(0) != HELLO_MAGIC {
            return None;
        }
        let mut n = [0u8; 8];
        n.copy_from_slice(&b[4..12]);
        Some(Hello {
            nonce: u64::from_le_bytes(n),
            from: u32_at(12) as i32,
            to: u32_at(16) as i32,
            link: u32_at(20),
        })
    }
}

/// A random nonce (from the standard library's randomly seeded hasher).
pub(crate) fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}

/// Binds a listener on `ip` (`0.0.0.0`: all addresses): on `port_min..port_min+range` if `port_min > 0`,
/// else on an ephemeral port.
pub(crate) fn listen(ip: Ipv4Addr, port_min: u16, range: u16) -> io::Result<TcpListener> {
    if port_min == 0 {
        return TcpListener::bind((ip, 0));
    }
    let mut last = io::Error::new(io::ErrorKind::AddrInUse, "empty port range");
    for p in port_min..=port_min.saturating_add(range.max(1) - 1) {
        match TcpListener::bind((ip, p)) {
            Ok(l) => return Ok(l),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Where to connect to reach a peer: `links`, used side by side (each that answers carries
/// `btl_tcp_links` connections), else the first of `fallback` that answers.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Plan {
    /// Addresses to connect to side by side.
    pub links: Vec<SocketAddr>,
    /// Addresses to try one after the other when none of `links` answers.
    pub fallback: Vec<SocketAddr>,
    /// Our address to connect from, for each peer address paired with one of our
    /// interfaces (same subnet): replies then come back over that pair. Other connections
    /// leave the source address to the kernel.
    pub from: Vec<(SocketAddr, Ipv4Addr)>,
}

impl Plan {
    /// Our address to connect to `a` from, if it is paired with one of our interfaces.
    fn source(&self, a: SocketAddr) -> Option<Ipv4Addr> {
        self.from.iter().find(|x| x.0 == a).map(|x| x.1)
    }
}

/// The ports of a peer's `n` published addresses and of its loopback listener, from the
/// published `ports` field: one port for all (it listens on every address), or one per
/// address followed by the loopback one (`p1+p2+plo`). `None` if malformed.
pub(crate) fn parse_ports(ports: &str, n: usize) -> Option<(Vec<u16>, u16)> {
    let all: Vec<u16> = ports
        .split('+')
        .map(|p| p.parse::<u16>().ok().filter(|&p| p != 0))
        .collect::<Option<_>>()?;
    match all.as_slice() {
        [one] => Some((vec![*one; n], *one)),
        [each @ .., lo] if each.len() == n => Some((each.to_vec(), *lo)),
        _ => None,
    }
}

/// How to reach a peer that published `published` (`addr/prefix+...`, see
/// [`oxmpi_base::net::encode`]) listening on `ports` (one per address, see [`parse_ports`],
/// and `lo_port` on its loopback address): on our host, its loopback address (then its
/// published ones); else the pairs of our interfaces `local` and its addresses that share a
/// subnet ([`oxmpi_base::net::pair_interfaces`]) side by side, its other addresses as
/// fallback; else (it published none) its host name's addresses as fallback.
pub(crate) fn peer_plan(
    published: &str,
    ports: &[u16],
    lo_port: u16,
    local: &[net::Iface],
    host: &str,
    same_host: bool,
) -> io::Result<Plan> {
    use std::net::ToSocketAddrs;
    let remote =
        net::decode(published).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let at = |r: usize| SocketAddr::from((remote[r].0, ports.get(r).copied().unwrap_or(lo_port)));
    if same_host {
        // Loopback first; the published addresses in case the peer listens on them only.
        return Ok(Plan {
            links: vec![SocketAddr::from((Ipv4Addr::LOCALHOST, lo_port))],
            fallback: (0..remote.len()).map(at).collect(),
            from: Vec::new(),
        });
    }
    if !remote.is_empty() {
        let (links, fallback) = net::pair_interfaces(local, &remote);
        return Ok(Plan {
            links: links.iter().map(|p| at(p.remote)).collect(),
            fallback: fallback.iter().map(|p| at(p.remote)).collect(),
            from: links
                .iter()
                .chain(&fallback)
                .filter_map(|p| Some((at(p.remote), local[p.local?].addr)))
                .collect(),
        });
    }
    let mut all: Vec<SocketAddr> = (host, lo_port).to_socket_addrs()?.collect();
    all.sort_by_key(|a| (!a.is_ipv4(), a.ip().is_loopback()));
    if all.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "host has no address",
        ));
    }
    Ok(Plan {
        links: Vec::new(),
        fallback: all,
        from: Vec::new(),
    })
}

/// How long wire-up waits for a connection or a hello before giving up.
const SETUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Lets the kernel notice a peer host that went silent within `btl_tcp_link_timeout`
/// (keepalive probes, a bound on unacknowledged data): the link's next read or write then
/// fails with `ETIMEDOUT` and the peer counts as failed.
fn watch_peer(s: &TcpStream) -> io::Result<()> {
    let secs = int(&params::LINK_TIMEOUT).max(0) as u64;
    net::set_link_timeout(s, Duration::from_secs(secs))
}

/// The addresses of a peer, for messages (`10.0.0.1:4000, 10.1.0.1:4000`).
fn list_addrs(addrs: &[SocketAddr]) -> String {
    addrs
        .iter()
        .map(SocketAddr::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Opens up to `copies` connections to `addr` from our address `from` (numbered on from
/// `conns.len()`, at most [`MAX_CONNS`] in all); fails only if the first does.
fn open_copies(
    addr: SocketAddr,
    from: Option<Ipv4Addr>,
    copies: usize,
    hello: Hello,
    timeout: Duration,
    conns: &mut Vec<TcpStream>,
) -> io::Result<()> {
    for k in 0..copies {
        if conns.len() >= MAX_CONNS {
            break;
        }
        let link = conns.len() as u32;
        match connect(addr, from, Hello { link, ..hello }, timeout) {
            Ok(s) => conns.push(s),
            Err(e) if k == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(())
}

/// Connects to a peer by `plan`: `copies` connections to each of its `links` addresses that
/// answers within `timeout`, or, if none does, to the first of its `fallback` ones that
/// does; then tells the peer how many there are (after the first connection's hello).
/// `skipped` hears about each address that did not answer. The error is the last address's.
pub(crate) fn connect_plan(
    plan: &Plan,
    copies: usize,
    hello: Hello,
    timeout: Duration,
    mut skipped: impl FnMut(SocketAddr, &io::Error),
) -> io::Result<Vec<TcpStream>> {
    use std::io::Write;
    let mut conns = Vec::new();
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for &a in &plan.links {
        if let Err(e) = open_copies(a, plan.source(a), copies, hello, timeout, &mut conns) {
            skipped(a, &e);
            last = e;
        }
    }
    for &a in &plan.fallback {
        if !conns.is_empty() {
            break;
        }
        if let Err(e) = open_copies(a, plan.source(a), copies, hello, timeout, &mut conns) {
            skipped(a, &e);
            last = e;
        }
    }
    let count = (conns.len() as u32).to_le_bytes();
    conns.first_mut().ok_or(last)?.write_all(&count)?;
    Ok(conns)
}

/// Connects to a peer's listener from our address `from` when given (giving up after
/// `timeout`) and sends the hello.
pub(crate) fn connect(
    addr: SocketAddr,
    from: Option<Ipv4Addr>,
    hello: Hello,
    timeout: Duration,
) -> io::Result<TcpStream> {
    use std::io::Write;
    let mut s = net::connect_from(from, addr, timeout)?;
    s.set_nodelay(true)?;
    watch_peer(&s)?;
    s.write_all(&hello.encode())?;
    Ok(s)
}

/// One peer's link over its connections (in index order): a plain [`TcpLink`] over one, a
/// [`StripedLink`] over several.
pub(crate) fn link_over(conns: Vec<TcpStream>) -> io::Result<Box<dyn Link>> {
    let mut links = conns
        .into_iter()
        .map(TcpLink::new)
        .collect::<io::Result<Vec<_>>>()?;
    Ok(if links.len() == 1 {
        Box::new(links.pop().expect("one link"))
    } else {
        Box::new(StripedLink::new(links))
    })
}

/// A connection accepted by [`accept_all`] whose hello (and, for connection 0, the count
/// after it) has not arrived yet.
struct Handshake {
    sock: TcpStream,
    from: SocketAddr,
    got: [u8; HELLO_LEN + COUNT_LEN],
    len: usize,
    /// Bytes wanted: the hello, then for connection 0 the count too.
    need: usize,
    /// The hello, once it arrived and was accepted.
    hello: Option<Hello>,
    until: Instant,
}

/// The connections of one lower rank, as they come in.
struct Group {
    rank: i32,
    /// How many it opens (connection 0 says so).
    count: Option<usize>,
    conns: Vec<(u32, TcpStream)>,
}

impl Group {
    fn complete(&self) -> bool {
        self.count == Some(self.conns.len())
    }

    /// Whether a connection numbered `link` may join (not there yet, within the count).
    fn wants(&self, link: u32) -> bool {
        (link as usize) < self.count.unwrap_or(MAX_CONNS)
            && !self.conns.iter().any(|(l, _)| *l == link)
    }
}

/// Accepts the connections of each rank in `expect` on any of the listeners `ls`, and
/// returns each rank's connections in index order. Connections are served side by side:
/// each must deliver its hello within `handshake` of being accepted, and one whose hello does
/// not carry our nonce, our rank, an expected rank and a connection index it has not used is
/// closed, so a stranger that connects and holds, or sends a byte at a time, delays nobody.
/// Fails after [`SETUP_TIMEOUT`] without progress.
pub(crate) fn accept_all(
    ls: &[TcpListener],
    nonce: u64,
    me: i32,
    expect: &[i32],
    handshake: Duration,
) -> io::Result<Vec<(i32, Vec<TcpStream>)>> {
    use std::io::Read;
    use std::os::fd::AsFd;
    for l in ls {
        l.set_nonblocking(true)?;
    }
    let mut groups: Vec<Group> = expect
        .iter()
        .map(|&rank| Group {
            rank,
            count: None,
            conns: Vec::new(),
        })
        .collect();
    let mut shakes: Vec<Handshake> = Vec::new();
    let mut give_up = Instant::now() + SETUP_TIMEOUT;
    let reject = |h: &Handshake, why: &str| {
        oxmpi_base::verbose!(
            BTL,
            10,
            "tcp: rank {me} closed a connection from {} ({why})",
            h.from
        );
    };
    let nl = ls.len();
    while !groups.iter().all(Group::complete) {
        let now = Instant::now();
        if now >= give_up {
            let missing: Vec<i32> = groups
                .iter()
                .filter(|g| !g.complete())
                .map(|g| g.rank)
                .collect();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no connection from ranks {missing:?}"),
            ));
        }
        shakes.retain(|h| {
            let alive = now < h.until;
            if !alive {
                reject(h, "no hello in time");
            }
            alive
        });
        let wake = shakes.iter().map(|h| h.until).fold(give_up, Instant::min);
        let mut fds: Vec<_> = ls.iter().map(|l| l.as_fd()).collect();
        fds.extend(shakes.iter().map(|h| h.sock.as_fd()));
        let ready = match sys::poll_readable(&fds, wake.saturating_duration_since(now)) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        drop(fds);
        // Hellos first (the indices of `ready` follow `shakes` before it changes).
        let mut k = shakes.len();
        while k > 0 {
            k -= 1;
            if !ready[nl + k] {
                continue;
            }
            let h = &mut shakes[k];
            let n = match h.sock.read(&mut h.got[h.len..h.need]) {
                Ok(0) => {
                    reject(h, "closed before its hello");
                    shakes.swap_remove(k);
                    continue;
                }
                Ok(n) => n,
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                    ) =>
                {
                    continue
                }
                Err(e) => {
                    reject(h, &e.to_string());
                    shakes.swap_remove(k);
                    continue;
                }
            };
            h.len += n;
            if h.len < h.need {
                continue;
            }
            let mut hello_bytes = [0u8; HELLO_LEN];
            hello_bytes.copy_from_slice(&h.got[..HELLO_LEN]);
            let Some(m) = Hello::decode(&hello_bytes).filter(|m| {
                m.nonce == nonce
                    && m.to == me
                    && groups
                        .iter()
                        .any(|g| g.rank == m.from && !g.complete() && g.wants(m.link))
            }) else {
                reject(h, "not a rank of this job");
                shakes.swap_remove(k);
                continue;
            };
            if m.link == 0 && h.hello.is_none() {
                // Authenticated: the count follows once the peer has tried all its pairs
                // (each unanswered one may take btl_tcp_connect_timeout).
                h.hello = Some(m);
                h.need = HELLO_LEN + COUNT_LEN;
                h.until = Instant::now() + SETUP_TIMEOUT;
                continue;
            }
            let h = shakes.swap_remove(k);
            let g = groups
                .iter_mut()
                .find(|g| g.rank == m.from)
                .expect("checked above");
            if m.link == 0 {
                let mut c = [0u8; COUNT_LEN];
                c.copy_from_slice(&h.got[HELLO_LEN..]);
                let count = u32::from_le_bytes(c) as usize;
                if count == 0
                    || count > MAX_CONNS
                    || g.conns.iter().any(|(l, _)| *l as usize >= count)
                {
                    reject(&h, "impossible connection count");
                    continue;
                }
                g.count = Some(count);
            }
            watch_peer(&h.sock)?;
            g.conns.push((m.link, h.sock));
            give_up = Instant::now() + SETUP_TIMEOUT;
        }
        for (i, l) in ls.iter().enumerate() {
            if !ready[i] {
                continue;
            }
            loop {
                match l.accept() {
                    Ok((sock, from)) => {
                        sock.set_nonblocking(true)?;
                        shakes.push(Handshake {
                            sock,
                            from,
                            got: [0; HELLO_LEN + COUNT_LEN],
                            len: 0,
                            need: HELLO_LEN,
                            hello: None,
                            until: Instant::now() + handshake,
                        });
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Ok(groups
        .into_iter()
        .map(|mut g| {
            g.conns.sort_by_key(|(l, _)| *l);
            (g.rank, g.conns.into_iter().map(|(_, s)| s).collect())
        })
        .collect())
}

/// `btl_tcp_if_include` and `btl_tcp_if_exclude`, checked: each entry a valid interface
/// specification, and not both set explicitly. The error is one line naming the parameter.
pub(crate) fn if_lists() -> Result<(Vec<String>, Vec<String>), String> {
    let include = list(&params::IF_INCLUDE);
    let exclude = list(&params::IF_EXCLUDE);
    net::check_specs(&include).map_err(|e| format!("btl_tcp_if_include: {e}"))?;
    net::check_specs(&exclude).map_err(|e| format!("btl_tcp_if_exclude: {e}"))?;
    if !include.is_empty() && explicit(&params::IF_EXCLUDE).is_some() {
        return Err(format!(
            "btl_tcp_if_include={} and btl_tcp_if_exclude={} are both set; set only one",
            include.join(","),
            exclude.join(",")
        ));
    }
    Ok((include, exclude))
}

/// The tcp transport's listening sockets between publishing and wiring up.
pub(crate) struct TcpSetup {
    /// One per published address then one on the loopback address, or one on all
    /// addresses.
    listeners: Vec<TcpListener>,
    nonce: u64,
    /// The addresses to publish (`addr/prefix+...`; empty: use our host name).
    addr: String,
    /// Their ports (see [`parse_ports`]).
    ports: String,
    /// Our interfaces in use, in order of preference.
    local: Vec<net::Iface>,
}

/// Listens on each of `ips`, the ports of the listeners in order (see [`listen`]).
fn listen_each(ips: &[Ipv4Addr], port_min: u16, range: u16) -> io::Result<Vec<TcpListener>> {
    ips.iter().map(|&ip| listen(ip, port_min, range)).collect()
}

impl TcpSetup {
    /// Listens on each usable interface and on the loopback address (on all addresses if
    /// there is no usable interface, or if one of them cannot be bound), and chooses the
    /// addresses to publish. If no socket can be opened, returns `None` (we publish no tcp
    /// section: peers then have no tcp link to us).
    fn listen(job: &Job) -> Result<Option<TcpSetup>, Error> {
        let me = job.me;
        let fail = |msg: String| Error::Bootstrap { rank: me, msg };
        let (include, exclude) = if_lists().map_err(fail)?;
        let ifaces = net::interfaces();
        let local = net::select(&ifaces, &include, &exclude);
        if local.is_empty() && !include.is_empty() {
            let names: Vec<String> = ifaces
                .iter()
                .map(|i| format!("{} {}", i.name, i.addr))
                .collect();
            return Err(fail(format!(
                "btl_tcp_if_include={}: no such IPv4 interface (up) on host {} (it has: {})",
                include.join(","),
                sys::hostname(),
                names.join(", ")
            )));
        }
        let port_min = int(&params::PORT_MIN).clamp(0, 65535) as u16;
        let range = int(&params::PORT_RANGE).clamp(1, 65535) as u16;
        let mut ips: Vec<Ipv4Addr> = local.iter().map(|i| i.addr).collect();
        ips.push(Ipv4Addr::LOCALHOST);
        let each = if local.is_empty() {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no usable interface",
            ))
        } else {
            listen_each(&ips, port_min, range)
        };
        let listeners = match each {
            Ok(ls) => ls,
            Err(e) => {
                if !local.is_empty() {
                    oxmpi_base::verbose!(
                        BTL,
                        10,
                        "tcp: rank {me} cannot listen on each interface ({e}); listening on all"
                    );
                }
                match listen(Ipv4Addr::UNSPECIFIED, port_min, range) {
                    Ok(l) => vec![l],
                    Err(e) => {
                        oxmpi_base::verbose!(
                            BTL,
                            10,
                            "tcp: rank {me} cannot listen (port_min_v4 {port_min}): {e}; tcp disabled"
                        );
                        return Ok(None);
                    }
                }
            }
        };
        let ports = listeners
            .iter()
            .map(|l| l.local_addr().map(|a| a.port().to_string()))
            .collect::<io::Result<Vec<_>>>()
            .map_err(job.sys_err("tcp listener address"))?
            .join("+");
        let addr = net::encode(&local);
        oxmpi_base::verbose!(
            BTL,
            20,
            "tcp: rank {me} listening on ports {ports} (published addresses {})",
            if addr.is_empty() {
                "none: peers use the host name"
            } else {
                &addr
            }
        );
        Ok(Some(TcpSetup {
            listeners,
            nonce: nonce(),
            addr,
            ports,
            local,
        }))
    }
}

/// Opens the `tcp` component: listens (its section then publishes the address).
pub(crate) fn open(job: &Job) -> Result<Option<Box<dyn Setup>>, Error> {
    Ok(TcpSetup::listen(job)?.map(|s| Box::new(s) as Box<dyn Setup>))
}

impl Setup for TcpSetup {
    /// `addresses,ports,nonce` (`addresses` as [`net::encode`] writes them, empty: use our
    /// host name; `ports` as [`parse_ports`] reads them).
    fn section(&self) -> Option<String> {
        Some(format!("{},{},{}", self.addr, self.ports, self.nonce))
    }

    /// Connects the tcp connections to every peer that has no link yet and listens: to
    /// higher ranks we connect, from lower ranks we accept.
    fn connect(&mut self, job: &Job, linked: &[bool]) -> Result<Links, Error> {
        let me = job.me;
        let mut targets = Vec::new();
        let mut expect = Vec::new();
        for p in 0..job.size() as i32 {
            if linked[p as usize] || !job.uses(p as usize, "tcp") {
                continue;
            }
            // No section: that rank could not listen (no tcp link to it).
            let Some(r) = job.section(p as usize, "tcp", 3)? else {
                continue;
            };
            if p < me {
                expect.push(p);
                continue;
            }
            let published = r.str(0);
            let n = net::decode(published).map_or(0, |l| l.len());
            let (ports, lo_port) = parse_ports(r.str(1), n).ok_or_else(|| r.bad())?;
            let nonce: u64 = r.get(2)?;
            let h = &job.eps[p as usize].host;
            let same = job.same_node(p as usize);
            let plan = peer_plan(published, &ports, lo_port, &self.local, h, same).map_err(
                job.sys_err(format!(
                    "address of rank {p} (host {h}, published {published:?})"
                )),
            )?;
            targets.push((p, plan, nonce));
        }
        let mut out: Links = Vec::new();
        let timeout = Duration::from_secs(int(&params::CONNECT_TIMEOUT).max(1) as u64);
        let copies = int(&params::LINKS).clamp(1, 16) as usize;
        for (p, plan, nonce) in targets {
            let hello = Hello {
                nonce,
                from: me,
                to: p,
                link: 0,
            };
            let all: Vec<SocketAddr> = plan.links.iter().chain(&plan.fallback).copied().collect();
            let conns = connect_plan(&plan, copies, hello, timeout, |addr, e| {
                oxmpi_base::verbose!(
                    BTL,
                    10,
                    "tcp: rank {me} cannot reach rank {p} at {addr} ({e}); skipped"
                );
            })
            .map_err(job.sys_err(format!("tcp connect to rank {p} at {}", list_addrs(&all))))?;
            let at: Vec<SocketAddr> = conns.iter().filter_map(|c| c.peer_addr().ok()).collect();
            oxmpi_base::verbose!(
                BTL,
                20,
                "tcp: rank {me} connected to rank {p} over {} connection(s): {}",
                conns.len(),
                list_addrs(&at)
            );
            let link = link_over(conns).map_err(job.sys_err(format!("tcp link to rank {p}")))?;
            out.push((p as usize, link));
        }
        let handshake = Duration::from_millis(int(&params::HANDSHAKE_TIMEOUT).max(1) as u64);
        let accepted = accept_all(&self.listeners, self.nonce, me, &expect, handshake)
            .map_err(job.sys_err(format!("tcp accept from ranks {expect:?}")))?;
        for (p, conns) in accepted {
            let from: Vec<SocketAddr> = conns.iter().filter_map(|c| c.peer_addr().ok()).collect();
            oxmpi_base::verbose!(
                BTL,
                20,
                "tcp: rank {me} accepted rank {p} over {} connection(s) from {}",
                conns.len(),
                list_addrs(&from)
            );
            let link = link_over(conns).map_err(job.sys_err(format!("tcp link to rank {p}")))?;
            out.push((p as usize, link));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_plans_same_host_paired_and_fallback() {
        let ip = |s: &str| s.parse::<std::net::Ipv4Addr>().unwrap();
        let at = |a: [u8; 4], p: u16| SocketAddr::from((a, p));
        let local = vec![net::Iface::new("eth1", ip("192.168.7.9"), 24)];
        let lo = peer_plan("10.0.0.1/8", &[5], 7, &local, "x", true).unwrap();
        assert_eq!(lo.links, [at([127, 0, 0, 1], 7)]);
        assert_eq!(lo.fallback, [at([10, 0, 0, 1], 5)]);
        let two = peer_plan(
            "10.1.2.3/16+192.168.7.20/24",
            &[5, 6],
            7,
            &local,
            "x",
            false,
        );
        assert_eq!(
            two.unwrap(),
            Plan {
                links: vec![at([192, 168, 7, 20], 6)],
                fallback: vec![at([10, 1, 2, 3], 5)],
                from: vec![(at([192, 168, 7, 20], 6), ip("192.168.7.9"))],
            },
            "the peer's address on our subnet side by side, from our interface there; the \
             routed one as fallback, from where the kernel chooses"
        );
        // Two interfaces each, on two common subnets: two links.
        let local2 = vec![
            net::Iface::new("eth0", ip("10.1.0.9"), 16),
            net::Iface::new("eth1", ip("192.168.7.9"), 24),
        ];
        let both = peer_plan(
            "192.168.7.20/24+10.1.2.3/16",
            &[5, 6],
            7,
            &local2,
            "x",
            false,
        );
        let both = both.unwrap();
        assert_eq!(
            both.links,
            [at([10, 1, 2, 3], 6), at([192, 168, 7, 20], 5)],
            "in our interfaces' order"
        );
        assert_eq!(
            both.from,
            [
                (at([10, 1, 2, 3], 6), ip("10.1.0.9")),
                (at([192, 168, 7, 20], 5), ip("192.168.7.9"))
            ],
            "each from the interface it is paired with"
        );
        assert!(lo.from.is_empty());
        assert!(peer_plan("10.1.2/16", &[5], 7, &local, "x", false).is_err());
        let named = peer_plan("", &[], 7, &local, "localhost", false).unwrap();
        assert!(named.links.is_empty() && !named.fallback.is_empty());
        assert!(named.fallback.iter().all(|a| a.port() == 7));
    }

    #[test]
    fn published_ports_one_for_all_or_one_each_then_loopback() {
        assert_eq!(parse_ports("40", 2), Some((vec![40, 40], 40)));
        assert_eq!(parse_ports("40+41+42", 2), Some((vec![40, 41], 42)));
        assert_eq!(parse_ports("42", 0), Some((vec![], 42)));
        assert_eq!(
            parse_ports("40+41", 2),
            None,
            "the loopback port is missing"
        );
        assert_eq!(parse_ports("port", 0), None);
        assert_eq!(parse_ports("0", 0), None);
        assert_eq!(parse_ports("", 0), None);
    }

    #[test]
    fn listener_binds_the_selected_address() {
        let l = listen(Ipv4Addr::LOCALHOST, 0, 1).unwrap();
        assert_eq!(l.local_addr().unwrap().ip(), Ipv4Addr::LOCALHOST);
        let any = listen(Ipv4Addr::UNSPECIFIED, 0, 1).unwrap();
        assert!(any.local_addr().unwrap().ip().is_unspecified());
    }

    /// One connection to `addr`, as a peer's whole plan.
    fn dial(addr: SocketAddr, h: Hello) -> TcpStream {
        let plan = Plan {
            links: vec![addr],
            fallback: vec![],
            from: vec![],
        };
        let mut c = connect_plan(&plan, 1, h, SETUP_TIMEOUT, |_, _| {}).unwrap();
        c.pop().unwrap()
    }

    fn hello(nonce: u64, from: i32, to: i32) -> Hello {
        Hello {
            nonce,
            from,
            to,
            link: 0,
        }
    }

    /// A plan's addresses that refuse are skipped; those that answer each carry `copies`
    /// connections, accepted as one group on the peer's two listeners; the fallback is used
    /// only when no side-by-side address answers.
    #[test]
    fn connect_plan_skips_refusing_addresses_and_opens_copies() {
        let l1 = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let l2 = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let (a1, a2) = (l1.local_addr().unwrap(), l2.local_addr().unwrap());
        // A port that was free a moment ago: refused at once.
        let dead = TcpListener::bind(("127.0.0.1", 0))
            .unwrap()
            .local_addr()
            .unwrap();
        let plan = Plan {
            links: vec![a1, dead, a2],
            fallback: vec![dead],
            from: vec![],
        };
        let mut seen = Vec::new();
        let t = Duration::from_secs(2);
        let conns = connect_plan(&plan, 2, hello(5, 0, 1), t, |a, _| seen.push(a)).unwrap();
        assert_eq!(seen, [dead]);
        let at: Vec<SocketAddr> = conns.iter().map(|c| c.peer_addr().unwrap()).collect();
        assert_eq!(at, [a1, a1, a2, a2]);
        let ls = [l1, l2];
        let got = accept_all(&ls, 5, 1, &[0], Duration::from_secs(1)).unwrap();
        assert_eq!((got[0].0, got[0].1.len()), (0, 4));
        // In index order: the accepted ends match the connected ones.
        let ends: Vec<SocketAddr> = got[0].1.iter().map(|c| c.peer_addr().unwrap()).collect();
        let mine: Vec<SocketAddr> = conns.iter().map(|c| c.local_addr().unwrap()).collect();
        assert_eq!(ends, mine);
        // Nothing side by side answers: the fallback's first that does.
        let plan = Plan {
            links: vec![dead],
            fallback: vec![dead, a2],
            from: vec![],
        };
        let conns = connect_plan(&plan, 1, hello(5, 0, 1), t, |_, _| {}).unwrap();
        assert_eq!(conns.len(), 1);
        let got = accept_all(&ls, 5, 1, &[0], Duration::from_secs(1)).unwrap();
        assert_eq!(got[0].1.len(), 1);
        // A paired address is reached from our interface of the pair (every copy).
        let plan = Plan {
            links: vec![a1],
            fallback: vec![],
            from: vec![(a1, Ipv4Addr::new(127, 0, 0, 2))],
        };
        let conns = connect_plan(&plan, 2, hello(5, 0, 1), t, |_, _| {}).unwrap();
        let got = accept_all(&ls, 5, 1, &[0], Duration::from_secs(1)).unwrap();
        let src: Vec<SocketAddr> = got[0].1.iter().map(|c| c.peer_addr().unwrap()).collect();
        assert_eq!(src.len(), 2);
        assert!(
            src.iter().all(|a| a.ip() == Ipv4Addr::new(127, 0, 0, 2)),
            "{src:?}"
        );
        drop(conns);
        let none = Plan {
            links: vec![dead],
            fallback: vec![],
            from: vec![],
        };
        assert!(connect_plan(&none, 1, hello(5, 0, 1), t, |_, _| {}).is_err());
    }

    /// Strangers that connect and hold, that send a byte at a time, and 500 idle
    /// connections made before the real peer do not delay it: its link is up at once, and
    /// the strangers are closed after the handshake timeout.
    #[test]
    fn hostile_connections_delay_nobody() {
        use std::io::{Read, Write};
        let hello = |from| hello(7, from, 2);
        let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let addr = l.local_addr().unwrap();
        let holder = TcpStream::connect(addr).unwrap();
        let mut dribbler = TcpStream::connect(addr).unwrap();
        dribbler.write_all(&hello(0).encode()[..3]).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let dribble = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                // One more byte every 100 ms: never a whole hello within the timeout.
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if dribbler.write_all(&[0]).is_err() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        // 500 idle connections, then the real peer, while the rank accepts.
        let good = std::thread::spawn(move || {
            let idle: Vec<TcpStream> = (0..500)
                .map(|_| TcpStream::connect(addr).unwrap())
                .collect();
            let t0 = Instant::now();
            let link = dial(addr, hello(0));
            (link, idle, t0)
        });
        let got = accept_all(
            std::slice::from_ref(&l),
            7,
            2,
            &[0],
            Duration::from_millis(400),
        )
        .unwrap();
        let done = Instant::now();
        assert_eq!(got.len(), 1);
        let (link, idle, t0) = good.join().unwrap();
        let took = done.saturating_duration_since(t0);
        assert!(
            took < Duration::from_secs(1),
            "took {took:?} after 500 idle connections"
        );
        drop(link);
        // The next accept (a rank that comes late) takes its peer at once too; the strangers
        // were closed (at the latest when the first accept returned).
        let second = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(600));
            let t0 = Instant::now();
            (dial(addr, hello(1)), t0)
        });
        let got = accept_all(
            std::slice::from_ref(&l),
            7,
            2,
            &[1],
            Duration::from_millis(400),
        )
        .unwrap();
        let done = Instant::now();
        assert_eq!(got.len(), 1);
        let (link, t0) = second.join().unwrap();
        assert!(done.saturating_duration_since(t0) < Duration::from_secs(1));
        drop(link);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        dribble.join().unwrap();
        let mut b = [0u8; 1];
        let mut h = holder;
        h.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(h.read(&mut b).unwrap_or(0), 0, "the holder was closed");
        drop(idle);
    }

    #[test]
    fn hello_roundtrip_and_bad_magic() {
        let h = Hello {
            link: 4,
            ..hello(0x0123_4567_89ab_cdef, 3, 9)
        };
        assert_eq!(Hello::decode(&h.encode()), Some(h));
        let mut b = h.encode();
        b[0] ^= 1;
        assert_eq!(Hello::decode(&b), None);
    }

    #[test]
    fn accept_rejects_strangers() {
        use std::io::Write;
        let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let addr = l.local_addr().unwrap();
        // Wrong nonce, wrong target, garbage: all closed; then the right one is accepted.
        let mut bad1 = TcpStream::connect(addr).unwrap();
        bad1.write_all(&hello(1, 0, 2).encode()).unwrap();
        let mut bad2 = TcpStream::connect(addr).unwrap();
        bad2.write_all(&hello(7, 0, 3).encode()).unwrap();
        let mut bad3 = TcpStream::connect(addr).unwrap();
        bad3.write_all(&[0u8; HELLO_LEN]).unwrap();
        let good = dial(addr, hello(7, 0, 2));
        let got = accept_all(std::slice::from_ref(&l), 7, 2, &[0], Duration::from_secs(1)).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, 0);
        // The rejected ones see end of stream.
        use std::io::Read;
        let mut b = [0u8; 1];
        assert_eq!(bad1.read(&mut b).unwrap(), 0);
        drop(good);
    }
}
