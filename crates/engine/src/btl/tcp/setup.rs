//! Wiring up the `tcp` transport ([`TcpSetup`]): every rank that selected `tcp` listens
//! and publishes `address,port,nonce` as the `tcp` section of its endpoint record
//! (`crate::btl::Endpoint`) before the bootstrap fence;
//! after it, the lower rank of each pair without a link connects to the higher one and
//! sends a [`Hello`] naming both ranks and the listener's nonce (a connection with a wrong
//! hello is closed). Also: interface selection and peer addresses.

use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};

use super::link::TcpLink;
use super::params;
use crate::btl::{Job, Links, Setup, BTL};
use crate::{sys, Error};
use oxmpi_base::params::{int, list};

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

/// Binds a listener on all addresses: on `port_min..port_min+range` if `port_min > 0`,
/// else on an ephemeral port.
pub(crate) fn listen(port_min: u16, range: u16) -> io::Result<TcpListener> {
    if port_min == 0 {
        return TcpListener::bind(("0.0.0.0", 0));
    }
    let mut last = io::Error::new(io::ErrorKind::AddrInUse, "empty port range");
    for p in port_min..=port_min.saturating_add(range.max(1) - 1) {
        match TcpListener::bind(("0.0.0.0", p)) {
            Ok(l) => return Ok(l),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Whether interface `(name, ip)` matches `spec`: its name, its address, or a subnet
/// `a.b.c.d/n` that holds its address (as in Open MPI's `btl_tcp_if_include`).
pub(crate) fn iface_matches(spec: &str, name: &str, ip: std::net::Ipv4Addr) -> bool {
    if spec == name || spec == ip.to_string() {
        return true;
    }
    let Some((net, bits)) = spec.split_once('/') else {
        return false;
    };
    let (Ok(net), Ok(bits)) = (net.parse::<std::net::Ipv4Addr>(), bits.parse::<u32>()) else {
        return false;
    };
    if bits > 32 {
        return false;
    }
    let mask = if bits == 0 {
        0
    } else {
        u32::MAX << (32 - bits)
    };
    u32::from(net) & mask == u32::from(ip) & mask
}

/// The address to publish from interfaces `ifaces`: the first one matching `include`, or,
/// with `exclude`, the first one that matches none of it and is not a loopback address;
/// `None` if nothing qualifies (or neither list is set).
pub(crate) fn select_addr(
    ifaces: &[(String, std::net::Ipv4Addr)],
    include: &[String],
    exclude: &[String],
) -> Option<std::net::Ipv4Addr> {
    let any = |specs: &[String], n: &str, ip| specs.iter().any(|s| iface_matches(s, n, ip));
    if !include.is_empty() {
        return ifaces
            .iter()
            .find(|(n, ip)| any(include, n, *ip))
            .map(|(_, ip)| *ip);
    }
    if exclude.is_empty() {
        return None;
    }
    ifaces
        .iter()
        .find(|(n, ip)| !ip.is_loopback() && !any(exclude, n, *ip))
        .map(|(_, ip)| *ip)
}

/// Resolves a peer's published address: an IP literal, or (when empty) its host name, or
/// the loopback address for a peer on our host.
pub(crate) fn peer_addr(
    addr: &str,
    host: &str,
    same_host: bool,
    port: u16,
) -> io::Result<SocketAddr> {
    use std::net::ToSocketAddrs;
    if same_host {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if !addr.is_empty() {
        let ip: std::net::IpAddr = addr
            .parse()
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad address"))?;
        return Ok(SocketAddr::new(ip, port));
    }
    let all: Vec<SocketAddr> = (host, port).to_socket_addrs()?.collect();
    all.iter()
        .find(|a| a.is_ipv4() && !a.ip().is_loopback())
        .or_else(|| all.first())
        .copied()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "host has no address"))
}

/// How long wire-up waits for a connection or a hello before giving up.
const SETUP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Connects to a peer's listener and sends the hello.
pub(crate) fn connect(addr: SocketAddr, hello: Hello) -> io::Result<TcpLink> {
    use std::io::Write;
    let mut s = TcpStream::connect_timeout(&addr, SETUP_TIMEOUT)?;
    s.set_nodelay(true)?;
    s.write_all(&hello.encode())?;
    TcpLink::new(s)
}

/// Accepts one connection from each rank in `expect` (connections whose hello does not
/// carry our nonce, our rank and an expected, not yet connected rank are closed). Fails
/// after [`SETUP_TIMEOUT`] without a new connection.
pub(crate) fn accept_all(
    l: &TcpListener,
    nonce: u64,
    me: i32,
    expect: &[i32],
) -> io::Result<Vec<(i32, TcpLink)>> {
    use std::io::Read;
    let mut out: Vec<(i32, TcpLink)> = Vec::new();
    while out.len() < expect.len() {
        let ready = match sys::wait_readable(l, SETUP_TIMEOUT) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if !ready {
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
        let (mut s, from) = l.accept()?;
        s.set_read_timeout(Some(SETUP_TIMEOUT))?;
        let mut b = [0u8; HELLO_LEN];
        let ok = s
            .read_exact(&mut b)
            .ok()
            .and_then(|()| Hello::decode(&b))
            .filter(|h| {
                h.nonce == nonce
                    && h.to == me
                    && expect.contains(&h.from)
                    && !out.iter().any(|(q, _)| *q == h.from)
            })
            .map(|h| h.from);
        match ok {
            Some(p) => {
                s.set_read_timeout(None)?;
                out.push((p, TcpLink::new(s)?));
            }
            None => {
                oxmpi_base::verbose!(
                    BTL,
                    10,
                    "tcp: rank {me} rejected a connection from {from} (not a rank of this job)"
                );
            }
        }
    }
    Ok(out)
}

/// The tcp transport's listening socket between publishing and wiring up.
pub(crate) struct TcpSetup {
    listener: std::net::TcpListener,
    nonce: u64,
    /// The address to publish (empty: use our host name).
    addr: String,
    /// The port we listen on.
    port: u16,
}

impl TcpSetup {
    /// Listens and chooses the address to publish. If no socket can be opened, returns
    /// `None` (we publish no tcp section: peers then have no tcp link to us).
    fn listen(job: &Job) -> Result<Option<TcpSetup>, Error> {
        let me = job.me;
        let port_min = int(&params::PORT_MIN).clamp(0, 65535) as u16;
        let range = int(&params::PORT_RANGE).clamp(1, 65535) as u16;
        let listener = match listen(port_min, range) {
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
        let include = list(&params::IF_INCLUDE);
        let exclude = list(&params::IF_EXCLUDE);
        let fail = |msg: String| Error::Bootstrap { rank: me, msg };
        if !include.is_empty() && !exclude.is_empty() {
            return Err(fail(format!(
                "btl_tcp_if_include={} and btl_tcp_if_exclude={} are both set; set only one",
                include.join(","),
                exclude.join(",")
            )));
        }
        let addr = if include.is_empty() && exclude.is_empty() {
            String::new()
        } else {
            let ifaces = sys::ipv4_interfaces();
            let names: Vec<String> = ifaces.iter().map(|(n, ip)| format!("{n} {ip}")).collect();
            select_addr(&ifaces, &include, &exclude)
                .ok_or_else(|| {
                    fail(format!(
                        "{}: no such IPv4 interface on host {} (it has: {})",
                        if include.is_empty() {
                            format!(
                                "btl_tcp_if_exclude={} leaves no interface",
                                exclude.join(",")
                            )
                        } else {
                            format!("btl_tcp_if_include={}", include.join(","))
                        },
                        sys::hostname(),
                        names.join(", ")
                    ))
                })?
                .to_string()
        };
        oxmpi_base::verbose!(
            BTL,
            20,
            "tcp: rank {me} listening on port {port} (published address {})",
            if addr.is_empty() {
                "of the host name"
            } else {
                &addr
            }
        );
        Ok(Some(TcpSetup {
            listener,
            nonce: nonce(),
            addr,
            port,
        }))
    }
}

/// Opens the `tcp` component: listens (its section then publishes the address).
pub(crate) fn open(job: &Job) -> Result<Option<Box<dyn Setup>>, Error> {
    Ok(TcpSetup::listen(job)?.map(|s| Box::new(s) as Box<dyn Setup>))
}

impl Setup for TcpSetup {
    /// `address,port,nonce` (`address` empty: use our host name).
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
            let addr =
                peer_addr(r.str(0), h, job.same_node(p as usize), port).map_err(job.sys_err(
                    format!("address of rank {p} (host {h}, published {:?})", r.str(0)),
                ))?;
            targets.push((p, addr, nonce));
        }
        let mut out: Links = Vec::new();
        for (p, addr, nonce) in targets {
            let link = connect(
                addr,
                Hello {
                    nonce,
                    from: me,
                    to: p,
                },
            )
            .map_err(job.sys_err(format!("tcp connect to rank {p} at {addr}")))?;
            oxmpi_base::verbose!(BTL, 20, "tcp: rank {me} connected to rank {p} at {addr}");
            out.push((p as usize, Box::new(link)));
        }
        let accepted = accept_all(&self.listener, self.nonce, me, &expect)
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
    fn interface_selection_by_name_address_subnet_and_exclusion() {
        let ip = |s: &str| s.parse::<std::net::Ipv4Addr>().unwrap();
        let v = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let ifs = vec![
            ("lo".to_string(), ip("127.0.0.1")),
            ("eth0".to_string(), ip("10.1.2.3")),
            ("ib0".to_string(), ip("192.168.7.9")),
        ];
        assert!(iface_matches("10.0.0.0/8", "x", ip("10.200.0.1")));
        assert!(!iface_matches("10.0.0.0/16", "x", ip("10.200.0.1")));
        assert!(iface_matches("0.0.0.0/0", "x", ip("1.2.3.4")));
        assert!(!iface_matches("10.0.0.0/33", "x", ip("10.0.0.1")));
        assert!(!iface_matches("eth", "eth0", ip("10.0.0.1")));
        assert_eq!(
            select_addr(&ifs, &v(&["ib0"]), &[]),
            Some(ip("192.168.7.9"))
        );
        assert_eq!(
            select_addr(&ifs, &v(&["10.1.2.3"]), &[]),
            Some(ip("10.1.2.3"))
        );
        assert_eq!(
            select_addr(&ifs, &v(&["192.168.0.0/16", "eth0"]), &[]),
            Some(ip("10.1.2.3")),
            "the system's order decides, not the list's"
        );
        assert_eq!(select_addr(&ifs, &v(&["wlan0"]), &[]), None);
        // Exclusion skips loopback and the excluded ones.
        assert_eq!(
            select_addr(&ifs, &[], &v(&["eth0"])),
            Some(ip("192.168.7.9"))
        );
        assert_eq!(select_addr(&ifs, &[], &v(&["10.0.0.0/8", "ib0"])), None);
        assert_eq!(select_addr(&ifs, &[], &[]), None);
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
        )
        .unwrap();
        let got = accept_all(&l, 7, 2, &[0]).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, 0);
        // The rejected ones see end of stream.
        use std::io::Read;
        let mut b = [0u8; 1];
        assert_eq!(bad1.read(&mut b).unwrap(), 0);
        drop(good);
    }
}
