//! Wiring up the `tcp` transport ([`TcpSetup`]): every rank that selected `tcp` listens
//! and publishes `address,port,nonce` as the `tcp` section of its endpoint record
//! (`crate::btl::Endpoint`) before the bootstrap fence;
//! after it, the lower rank of each pair without a link connects to the higher one and
//! sends a [`Hello`] naming both ranks and the listener's nonce (a connection with a wrong
//! hello is closed). Also: interface selection and peer addresses.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};

use super::link::TcpLink;
use super::params;
use crate::btl::{Job, Links, Setup, BTL};
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
}

const HELLO_MAGIC: u32 = u32::from_le_bytes(*b"OXTC");
/// Bytes of an encoded [`Hello`].
pub(crate) const HELLO_LEN: usize = 20;

impl Hello {
    /// Wire form: magic, nonce, from, to (little-endian).
    pub fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        b[0..4].copy_from_slice(&HELLO_MAGIC.to_le_bytes());
        b[4..12].copy_from_slice(&self.nonce.to_le_bytes());
        b[12..16].copy_from_slice(&self.from.to_le_bytes());
        b[16..20].copy_from_slice(&self.to.to_le_bytes());
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

/// The addresses to try for a peer, best first: the loopback address (then its published
/// ones) for a peer on our host;
/// else its published addresses (`addr/prefix+...`, see [`oxmpi_base::net::encode`]) in
/// [`oxmpi_base::net::pair_order`] from our interfaces `local`; else (it published none) its
/// host name's addresses.
pub(crate) fn peer_addrs(
    published: &str,
    local: &[net::Iface],
    host: &str,
    same_host: bool,
    port: u16,
) -> io::Result<Vec<SocketAddr>> {
    use std::net::ToSocketAddrs;
    let remote =
        net::decode(published).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    if same_host {
        // Loopback first; the published addresses in case the peer listens on one of them
        // only (an explicit btl_tcp_if_include).
        let mut out = vec![SocketAddr::from(([127, 0, 0, 1], port))];
        out.extend(remote.iter().map(|(ip, _)| SocketAddr::from((*ip, port))));
        return Ok(out);
    }
    if !remote.is_empty() {
        return Ok(net::pair_order(local, &remote)
            .into_iter()
            .map(|ip| SocketAddr::from((ip, port)))
            .collect());
    }
    let mut all: Vec<SocketAddr> = (host, port).to_socket_addrs()?.collect();
    all.sort_by_key(|a| (!a.is_ipv4(), a.ip().is_loopback()));
    if all.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "host has no address",
        ));
    }
    Ok(all)
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

/// Connects to the first of a peer's addresses that answers within `timeout` each and sends
/// the hello; `skipped` hears about each address that failed. The error is the last
/// address's.
pub(crate) fn connect_any(
    addrs: &[SocketAddr],
    hello: Hello,
    timeout: Duration,
    mut skipped: impl FnMut(SocketAddr, &io::Error),
) -> io::Result<(TcpLink, SocketAddr)> {
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for &a in addrs {
        match connect(a, hello, timeout) {
            Ok(l) => return Ok((l, a)),
            Err(e) => {
                skipped(a, &e);
                last = e;
            }
        }
    }
    Err(last)
}

/// Connects to a peer's listener (giving up after `timeout`) and sends the hello.
pub(crate) fn connect(addr: SocketAddr, hello: Hello, timeout: Duration) -> io::Result<TcpLink> {
    use std::io::Write;
    let mut s = TcpStream::connect_timeout(&addr, timeout)?;
    s.set_nodelay(true)?;
    watch_peer(&s)?;
    s.write_all(&hello.encode())?;
    TcpLink::new(s)
}

/// A connection accepted by [`accept_all`] whose hello has not arrived yet.
struct Handshake {
    sock: TcpStream,
    from: SocketAddr,
    got: [u8; HELLO_LEN],
    len: usize,
    until: Instant,
}

/// Accepts one connection from each rank in `expect`. Connections are served side by side:
/// each must deliver its hello within `handshake` of being accepted, and one whose hello does
/// not carry our nonce, our rank and an expected, not yet connected rank is closed, so a
/// stranger that connects and holds, or sends a byte at a time, delays nobody. Fails after
/// [`SETUP_TIMEOUT`] without a new link.
pub(crate) fn accept_all(
    l: &TcpListener,
    nonce: u64,
    me: i32,
    expect: &[i32],
    handshake: Duration,
) -> io::Result<Vec<(i32, TcpLink)>> {
    use std::io::Read;
    use std::os::fd::AsFd;
    l.set_nonblocking(true)?;
    let mut out: Vec<(i32, TcpLink)> = Vec::new();
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
    while out.len() < expect.len() {
        let now = Instant::now();
        if now >= give_up {
            let missing: Vec<i32> = expect
                .iter()
                .copied()
                .filter(|p| !out.iter().any(|(q, _)| q == p))
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
        let mut fds = vec![l.as_fd()];
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
            if !ready[k + 1] {
                continue;
            }
            let h = &mut shakes[k];
            let n = match h.sock.read(&mut h.got[h.len..]) {
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
            if h.len < HELLO_LEN {
                continue;
            }
            let h = shakes.swap_remove(k);
            let peer = Hello::decode(&h.got)
                .filter(|m| {
                    m.nonce == nonce
                        && m.to == me
                        && expect.contains(&m.from)
                        && !out.iter().any(|(q, _)| *q == m.from)
                })
                .map(|m| m.from);
            match peer {
                Some(p) => {
                    watch_peer(&h.sock)?;
                    out.push((p, TcpLink::new(h.sock)?));
                    give_up = Instant::now() + SETUP_TIMEOUT;
                }
                None => reject(&h, "not a rank of this job"),
            }
        }
        if ready[0] {
            loop {
                match l.accept() {
                    Ok((sock, from)) => {
                        sock.set_nonblocking(true)?;
                        shakes.push(Handshake {
                            sock,
                            from,
                            got: [0; HELLO_LEN],
                            len: 0,
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
    Ok(out)
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

/// The tcp transport's listening socket between publishing and wiring up.
pub(crate) struct TcpSetup {
    listener: std::net::TcpListener,
    nonce: u64,
    /// The addresses to publish (`addr/prefix+...`; empty: use our host name).
    addr: String,
    /// Our interfaces in use, in order of preference.
    local: Vec<net::Iface>,
    /// The port we listen on.
    port: u16,
}

impl TcpSetup {
    /// Listens and chooses the address to publish. If no socket can be opened, returns
    /// `None` (we publish no tcp section: peers then have no tcp link to us).
    fn listen(job: &Job) -> Result<Option<TcpSetup>, Error> {
        let me = job.me;
        let fail = |msg: String| Error::Bootstrap { rank: me, msg };
        let (include, exclude) = if_lists().map_err(fail)?;
        let ifaces = net::interfaces();
        let local = net::select(&ifaces, &include, &exclude);
        // An explicit btl_tcp_if_include that selects one address: listen there alone (peers
        // on this host try the loopback address first, then that one).
        let bind_ip = match local.as_slice() {
            [one] if !include.is_empty() => one.addr,
            _ => Ipv4Addr::UNSPECIFIED,
        };
        let port_min = int(&params::PORT_MIN).clamp(0, 65535) as u16;
        let range = int(&params::PORT_RANGE).clamp(1, 65535) as u16;
        let listener = match listen(bind_ip, port_min, range) {
            Ok(l) => l,
            Err(e) => {
                oxmpi_base::verbose!(
                    BTL,
                    10,
                    "tcp: rank {me} cannot listen (port_min_v4 {port_min}): {e}; tcp disabled"
                );
                return Ok(None);
            }
        };
        let port = listener
            .local_addr()
            .map_err(job.sys_err("tcp listener address"))?
            .port();
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
        let addr = net::encode(&local);
        oxmpi_base::verbose!(
            BTL,
            20,
            "tcp: rank {me} listening on port {port} (published addresses {})",
            if addr.is_empty() {
                "none: peers use the host name"
            } else {
                &addr
            }
        );
        Ok(Some(TcpSetup {
            listener,
            nonce: nonce(),
            addr,
            local,
            port,
        }))
    }
}

/// Opens the `tcp` component: listens (its section then publishes the address).
pub(crate) fn open(job: &Job) -> Result<Option<Box<dyn Setup>>, Error> {
    Ok(TcpSetup::listen(job)?.map(|s| Box::new(s) as Box<dyn Setup>))
}

impl Setup for TcpSetup {
    /// `addresses,port,nonce` (`addresses` as [`net::encode`] writes them; empty: use our
    /// host name).
    fn section(&self) -> Option<String> {
        Some(format!("{},{},{}", self.addr, self.port, self.nonce))
    }

    /// Connects a tcp link to every peer that has no link yet and listens: to higher ranks
    /// we connect, from lower ranks we accept.
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
            let port: u16 = r.get(1)?;
            let nonce: u64 = r.get(2)?;
            let h = &job.eps[p as usize].host;
            let addrs = peer_addrs(r.str(0), &self.local, h, job.same_node(p as usize), port)
                .map_err(job.sys_err(format!(
                    "address of rank {p} (host {h}, published {:?})",
                    r.str(0)
                )))?;
            targets.push((p, addrs, nonce));
        }
        let mut out: Links = Vec::new();
        let timeout = Duration::from_secs(int(&params::CONNECT_TIMEOUT).max(1) as u64);
        for (p, addrs, nonce) in targets {
            let hello = Hello {
                nonce,
                from: me,
                to: p,
            };
            let (link, addr) = connect_any(&addrs, hello, timeout, |addr, e| {
                oxmpi_base::verbose!(
                    BTL,
                    10,
                    "tcp: rank {me} cannot reach rank {p} at {addr} ({e}); trying its next address"
                );
            })
            .map_err(job.sys_err(format!("tcp connect to rank {p} at {}", list_addrs(&addrs))))?;
            oxmpi_base::verbose!(BTL, 20, "tcp: rank {me} connected to rank {p} at {addr}");
            out.push((p as usize, Box::new(link)));
        }
        let handshake = Duration::from_millis(int(&params::HANDSHAKE_TIMEOUT).max(1) as u64);
        let accepted = accept_all(&self.listener, self.nonce, me, &expect, handshake)
            .map_err(job.sys_err(format!("tcp accept from ranks {expect:?}")))?;
        for (p, link) in accepted {
            oxmpi_base::verbose!(BTL, 20, "tcp: rank {me} accepted rank {p}");
            out.push((p as usize, Box::new(link)));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_addresses_same_host_published_and_fallback() {
        let ip = |s: &str| s.parse::<std::net::Ipv4Addr>().unwrap();
        let local = vec![net::Iface::new("eth1", ip("192.168.7.9"), 24)];
        let lo = peer_addrs("10.0.0.1/8", &local, "x", true, 7).unwrap();
        assert_eq!(
            lo,
            [
                SocketAddr::from(([127, 0, 0, 1], 7)),
                SocketAddr::from(([10, 0, 0, 1], 7))
            ]
        );
        let two = peer_addrs("10.1.2.3/16+192.168.7.20/24", &local, "x", false, 7).unwrap();
        assert_eq!(
            two,
            [
                SocketAddr::from(([192, 168, 7, 20], 7)),
                SocketAddr::from(([10, 1, 2, 3], 7))
            ],
            "the peer's address on our subnet first"
        );
        assert!(peer_addrs("10.1.2/16", &local, "x", false, 7).is_err());
        let named = peer_addrs("", &local, "localhost", false, 7).unwrap();
        assert!(named.iter().all(|a| a.port() == 7) && !named.is_empty());
    }

    #[test]
    fn listener_binds_the_selected_address() {
        let l = listen(Ipv4Addr::LOCALHOST, 0, 1).unwrap();
        assert_eq!(l.local_addr().unwrap().ip(), Ipv4Addr::LOCALHOST);
        let any = listen(Ipv4Addr::UNSPECIFIED, 0, 1).unwrap();
        assert!(any.local_addr().unwrap().ip().is_unspecified());
    }

    #[test]
    fn connect_any_skips_an_address_that_refuses() {
        let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let good = l.local_addr().unwrap();
        // A port that was free a moment ago: refused at once.
        let dead = TcpListener::bind(("127.0.0.1", 0))
            .unwrap()
            .local_addr()
            .unwrap();
        let h = Hello {
            nonce: 5,
            from: 0,
            to: 1,
        };
        let mut seen = Vec::new();
        let (_link, at) = connect_any(&[dead, good], h, Duration::from_secs(2), |a, _| {
            seen.push(a)
        })
        .unwrap();
        assert_eq!((at, seen), (good, vec![dead]));
        let got = accept_all(&l, 5, 1, &[0], Duration::from_secs(1)).unwrap();
        assert_eq!(got[0].0, 0);
        assert!(connect_any(&[dead], h, Duration::from_secs(2), |_, _| {}).is_err());
    }

    /// Strangers that connect and hold, that send a byte at a time, and 500 idle
    /// connections made before the real peer do not delay it: its link is up at once, and
    /// the strangers are closed after the handshake timeout.
    #[test]
    fn hostile_connections_delay_nobody() {
        use std::io::{Read, Write};
        let hello = |from| Hello {
            nonce: 7,
            from,
            to: 2,
        };
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
            let link = connect(addr, hello(0), SETUP_TIMEOUT).unwrap();
            (link, idle, t0)
        });
        let got = accept_all(&l, 7, 2, &[0], Duration::from_millis(400)).unwrap();
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
            (connect(addr, hello(1), SETUP_TIMEOUT).unwrap(), t0)
        });
        let got = accept_all(&l, 7, 2, &[1], Duration::from_millis(400)).unwrap();
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
            nonce: 0x0123_4567_89ab_cdef,
            from: 3,
            to: 9,
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
        bad1.write_all(
            &Hello {
                nonce: 1,
                from: 0,
                to: 2,
            }
            .encode(),
        )
        .unwrap();
        let mut bad2 = TcpStream::connect(addr).unwrap();
        bad2.write_all(
            &Hello {
                nonce: 7,
                from: 0,
                to: 3,
            }
            .encode(),
        )
        .unwrap();
        let mut bad3 = TcpStream::connect(addr).unwrap();
        bad3.write_all(&[0u8; HELLO_LEN]).unwrap();
        let good = connect(
            addr,
            Hello {
                nonce: 7,
                from: 0,
                to: 2,
            },
            SETUP_TIMEOUT,
        )
        .unwrap();
        let got = accept_all(&l, 7, 2, &[0], Duration::from_secs(1)).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, 0);
        // The rejected ones see end of stream.
        use std::io::Read;
        let mut b = [0u8; 1];
        assert_eq!(bad1.read(&mut b).unwrap(), 0);
        drop(good);
    }
}
