//! The host's IPv4 interfaces and how ranks and daemons choose among them: interface
//! specifications (`eth0`, `eth*`, `10.1.2.3`, `10.0.0.0/8`, as in Open MPI's
//! `btl_tcp_if_include`), the usable interfaces of a host ([`select`]), the published form of
//! a list of addresses ([`encode`], [`decode`]) and the order in which a peer's addresses are
//! tried ([`pair_order`]: same subnet first, then routed). Only [`interfaces`] asks the
//! kernel; the rest is pure.

use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::time::Duration;

/// Interfaces nobody publishes unless asked to by name: loopback and the usual virtual
/// bridges of containers and virtual machines (`*` matches any suffix). The default of
/// `btl_tcp_if_exclude`, and what `mpirun` skips when it picks its own addresses.
pub const DEFAULT_IF_EXCLUDE: &str =
    "127.0.0.0/8,docker*,virbr*,br-*,lxcbr*,lxdbr*,cni*,flannel*,cali*,vmnet*,vboxnet*,podman*";

/// The host's usable interfaces: those that are up, except [`DEFAULT_IF_EXCLUDE`] (what
/// `mpirun` offers its daemons and its name server listens on).
pub fn usable() -> Vec<Iface> {
    let exclude: Vec<String> = DEFAULT_IF_EXCLUDE.split(',').map(str::to_string).collect();
    select(&interfaces(), &[], &exclude)
}

/// One IPv4 address of an interface that is up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Iface {
    /// Interface name (`eth0`).
    pub name: String,
    /// The address.
    pub addr: Ipv4Addr,
    /// Prefix length of its subnet (`24` for `255.255.255.0`).
    pub prefix: u8,
    /// A loopback interface.
    pub loopback: bool,
}

impl Iface {
    /// An interface from its parts (for tests and callers that know them).
    pub fn new(name: &str, addr: Ipv4Addr, prefix: u8) -> Iface {
        Iface {
            name: name.to_string(),
            addr,
            prefix,
            loopback: addr.is_loopback(),
        }
    }
}

/// The IPv4 addresses of the interfaces that are up, in the system's order (down interfaces
/// are left out; empty if the kernel cannot list them).
pub fn interfaces() -> Vec<Iface> {
    crate::sys::ipv4_interfaces()
        .into_iter()
        .filter(|r| r.up)
        .map(|r| Iface {
            name: r.name,
            addr: r.addr,
            prefix: u32::from(r.mask).leading_ones() as u8,
            loopback: r.loopback || r.addr.is_loopback(),
        })
        .collect()
}

/// The keepalive schedule that notices a silent peer within about `timeout`: first probe
/// after half of it idle, then probes an eighth apart (whole seconds, at least one) until
/// the timeout is used up. Returns (idle, interval, probes) in seconds.
pub fn keepalive_schedule(timeout: Duration) -> (u32, u32, u32) {
    let t = timeout.as_secs().clamp(1, 86_400) as u32;
    let idle = (t / 2).max(1);
    let intvl = (t / 8).max(1);
    let probes = ((t.saturating_sub(idle)) / intvl).max(1);
    (idle, intvl, probes)
}

/// Makes a TCP connection fail (reads and writes then report `ETIMEDOUT`) when its peer has
/// been silent for about `timeout`: keepalive probes on an idle connection
/// ([`keepalive_schedule`]) and `TCP_USER_TIMEOUT` for data left unacknowledged. The peer's
/// kernel answers both, so a peer process that is merely busy is not affected; a peer host
/// that is gone or cut off is. A zero `timeout` leaves the socket alone.
pub fn set_link_timeout(sock: &impl AsRawFd, timeout: Duration) -> std::io::Result<()> {
    use crate::sys::{set_int_sockopt, KEEPALIVE, KEEPCNT, KEEPIDLE, KEEPINTVL, USER_TIMEOUT};
    if timeout.is_zero() {
        return Ok(());
    }
    let fd = sock.as_raw_fd();
    let (idle, intvl, probes) = keepalive_schedule(timeout);
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    for ((level, name), v) in [
        (KEEPALIVE, 1),
        (KEEPIDLE, idle as i32),
        (KEEPINTVL, intvl as i32),
        (KEEPCNT, probes as i32),
        (USER_TIMEOUT, ms),
    ] {
        set_int_sockopt(fd, level, name, v)?;
    }
    Ok(())
}

/// Connects to `to` within `timeout`, from our address `from` when given (the interface a
/// pairing chose: otherwise the kernel picks the source address by its routes, and the
/// peer's replies may come back over another interface than the pair's), else from the
/// address the kernel picks.
pub fn connect_from(
    from: Option<Ipv4Addr>,
    to: std::net::SocketAddr,
    timeout: Duration,
) -> std::io::Result<std::net::TcpStream> {
    match (from, to) {
        (Some(ip), std::net::SocketAddr::V4(v4)) => crate::sys::connect_from(ip, v4, timeout),
        _ => std::net::TcpStream::connect_timeout(&to, timeout),
    }
}

/// Listens on TCP `port` (0: a free port) of each of `ips`, one listener per address, all
/// on the same port (so that one `addr+addr...:port` names them all), instead of on every
/// address of the host; an empty `ips` listens on all of them (`0.0.0.0`). With `port` 0,
/// a port that is free on the first address but taken on another is given up for a new
/// one (a few times). Returns the listeners and the port.
pub fn listen_on(
    ips: &[Ipv4Addr],
    port: u16,
) -> std::io::Result<(Vec<std::net::TcpListener>, u16)> {
    use std::net::TcpListener;
    let Some((&first, rest)) = ips.split_first() else {
        let l = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))?;
        let p = l.local_addr()?.port();
        return Ok((vec![l], p));
    };
    let mut attempts = 0;
    loop {
        let l = TcpListener::bind((first, port))?;
        let p = l.local_addr()?.port();
        let mut all = vec![l];
        let mut taken = None;
        for &ip in rest {
            match TcpListener::bind((ip, p)) {
                Ok(l) => all.push(l),
                Err(e) => {
                    taken = Some(e);
                    break;
                }
            }
        }
        match taken {
            None => return Ok((all, p)),
            Some(e) if port != 0 || attempts >= 16 || e.kind() != std::io::ErrorKind::AddrInUse => {
                return Err(e)
            }
            Some(_) => attempts += 1,
        }
    }
}

/// The mask of a prefix length (`/0` is all addresses).
fn mask(prefix: u8) -> u32 {
    match prefix {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

/// Whether `a` and `b` are in the same `/prefix` subnet.
pub fn same_subnet(a: Ipv4Addr, b: Ipv4Addr, prefix: u8) -> bool {
    u32::from(a) & mask(prefix) == u32::from(b) & mask(prefix)
}

/// Checks one interface specification: a name (a trailing `*` matches any suffix), an IPv4
/// address, or a subnet `a.b.c.d/n` with `n` at most 32. The error says what is wrong.
pub fn check_spec(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty interface".into());
    }
    if let Some((net, bits)) = spec.split_once('/') {
        net.parse::<Ipv4Addr>()
            .map_err(|_| format!("'{spec}': '{net}' is not an IPv4 address"))?;
        match bits.parse::<u8>() {
            Ok(b) if b <= 32 => return Ok(()),
            _ => return Err(format!("'{spec}': the prefix length must be 0 to 32")),
        }
    }
    if spec.chars().all(|c| c.is_ascii_digit() || c == '.') && spec.parse::<Ipv4Addr>().is_err() {
        return Err(format!("'{spec}' is not an IPv4 address"));
    }
    if spec.contains(|c: char| c.is_whitespace() || c == ',') {
        return Err(format!("'{spec}' is not an interface name"));
    }
    Ok(())
}

/// Checks a list of interface specifications (see [`check_spec`]).
pub fn check_specs(specs: &[String]) -> Result<(), String> {
    specs.iter().try_for_each(|s| check_spec(s))
}

/// Whether interface `i` matches `spec`: its name (`eth*`: any name starting with `eth`),
/// its address, or a subnet `a.b.c.d/n` that holds its address.
pub fn matches(spec: &str, i: &Iface) -> bool {
    if spec == i.name || spec.parse::<Ipv4Addr>() == Ok(i.addr) {
        return true;
    }
    if let Some(stem) = spec.strip_suffix('*') {
        return i.name.starts_with(stem);
    }
    let Some((net, bits)) = spec.split_once('/') else {
        return false;
    };
    match (net.parse::<Ipv4Addr>(), bits.parse::<u8>()) {
        (Ok(net), Ok(bits)) if bits <= 32 => same_subnet(net, i.addr, bits),
        _ => false,
    }
}

/// The interfaces to use from `ifaces`: with `include`, those matching it in the order of
/// `include` (each entry's matches in the system's order, an interface once); otherwise the
/// ones that are not loopback and match nothing in `exclude`, in the system's order.
pub fn select(ifaces: &[Iface], include: &[String], exclude: &[String]) -> Vec<Iface> {
    if !include.is_empty() {
        let mut out: Vec<Iface> = Vec::new();
        for spec in include {
            for i in ifaces.iter().filter(|i| matches(spec, i)) {
                if !out.contains(i) {
                    out.push(i.clone());
                }
            }
        }
        return out;
    }
    ifaces
        .iter()
        .filter(|i| !i.loopback && !exclude.iter().any(|s| matches(s, i)))
        .cloned()
        .collect()
}

/// The published form of a list of interfaces: `addr/prefix` joined by `+`
/// (`10.0.0.1/24+192.168.1.5/16`).
pub fn encode(ifaces: &[Iface]) -> String {
    ifaces
        .iter()
        .map(|i| format!("{}/{}", i.addr, i.prefix))
        .collect::<Vec<_>>()
        .join("+")
}

/// Parses [`encode`]'s form (an address without `/prefix` counts as a `/32`); empty input is
/// an empty list.
pub fn decode(s: &str) -> Result<Vec<(Ipv4Addr, u8)>, String> {
    s.split('+')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (a, bits) = p.split_once('/').unwrap_or((p, "32"));
            match (a.parse::<Ipv4Addr>(), bits.parse::<u8>()) {
                (Ok(a), Ok(b)) if b <= 32 => Ok((a, b)),
                _ => Err(format!("bad address '{p}'")),
            }
        })
        .collect()
}

/// The order in which to try a peer's addresses `remote` from our interfaces `local`: the
/// peer's addresses on a subnet of one of ours first (following our interfaces' order, which
/// is `btl_tcp_if_include`'s when it is set), then the others, which need a route, in the
/// peer's order. Each address once.
pub fn pair_order(local: &[Iface], remote: &[(Ipv4Addr, u8)]) -> Vec<Ipv4Addr> {
    let mut out: Vec<Ipv4Addr> = Vec::new();
    for l in local {
        for (r, rp) in remote {
            if same_subnet(l.addr, *r, l.prefix.min(*rp)) && !out.contains(r) {
                out.push(*r);
            }
        }
    }
    for (r, _) in remote {
        if !out.contains(r) {
            out.push(*r);
        }
    }
    out
}

/// How one of our interfaces reaches one of a peer's addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The address is on the interface's subnet: the traffic leaves through that interface.
    SameSubnet,
    /// The address needs a route (the kernel chooses the way out).
    Routed,
}

/// One candidate connection to a peer: its address `remote` (an index into the peer's
/// published list), over our interface `local` (an index into ours) when they share a subnet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// Our interface, for a [`Reach::SameSubnet`] pair.
    pub local: Option<usize>,
    /// The peer's address.
    pub remote: usize,
    /// How it is reached.
    pub reach: Reach,
}

/// Which of our interfaces `local` talk to which of a peer's addresses `remote`, as Open
/// MPI's usNIC transport pairs them: a min-cost bipartite assignment over the pairs that share
/// a subnet (as many pairs as possible, each interface and each address once; among those, the
/// one preferring earlier interfaces of ours, whose order is `btl_tcp_if_include`'s when it is
/// set, then earlier addresses of the peer). Returns `(links, fallback)`: the assigned pairs,
/// best first, to use side by side (large messages are striped over them), and the peer's
/// other addresses in [`pair_order`] (the rest of its same-subnet ones, then the routed ones),
/// to try one after the other when no assigned pair connects.
pub fn pair_interfaces(local: &[Iface], remote: &[(Ipv4Addr, u8)]) -> (Vec<Pair>, Vec<Pair>) {
    let m = remote.len();
    let cost = |l: usize, r: usize| {
        let (ra, rp) = remote[r];
        same_subnet(local[l].addr, ra, local[l].prefix.min(rp)).then_some((l * (m + 1) + r) as i64)
    };
    let mut links: Vec<Pair> = min_cost_assignment(local.len(), m, cost)
        .into_iter()
        .map(|(l, r)| Pair {
            local: Some(l),
            remote: r,
            reach: Reach::SameSubnet,
        })
        .collect();
    links.sort_by_key(|p| (p.local, p.remote));
    let fallback = pair_order(local, remote)
        .into_iter()
        .filter_map(|ip| remote.iter().position(|(a, _)| *a == ip))
        .filter(|r| !links.iter().any(|p| p.remote == *r))
        .map(|r| {
            let local = (0..local.len()).find(|&l| cost(l, r).is_some());
            Pair {
                local,
                remote: r,
                reach: if local.is_some() {
                    Reach::SameSubnet
                } else {
                    Reach::Routed
                },
            }
        })
        .collect();
    (links, fallback)
}

/// A maximum-cardinality matching of minimum total cost between `n` left and `m` right
/// nodes, where `cost(l, r)` is `None` for a pair that cannot be matched: successive
/// cheapest augmenting paths (Bellman-Ford over the residual graph, which has negative
/// edges back along matched pairs). Returns the matched `(l, r)` pairs. Meant for the few
/// interfaces of a host (O(k·(n+m)·n·m)).
fn min_cost_assignment(
    n: usize,
    m: usize,
    cost: impl Fn(usize, usize) -> Option<i64>,
) -> Vec<(usize, usize)> {
    let mut match_l: Vec<Option<usize>> = vec![None; n];
    let mut match_r: Vec<Option<usize>> = vec![None; m];
    loop {
        // Distances to left nodes (free ones start at 0) and right nodes, with predecessors.
        let mut dl: Vec<Option<i64>> = match_l.iter().map(|x| x.is_none().then_some(0)).collect();
        let mut dr: Vec<Option<i64>> = vec![None; m];
        let mut from: Vec<usize> = vec![0; m];
        for _ in 0..=n + m {
            let mut changed = false;
            for l in 0..n {
                let Some(d) = dl[l] else { continue };
                for r in 0..m {
                    if match_l[l] == Some(r) {
                        continue;
                    }
                    if let Some(c) = cost(l, r) {
                        if dr[r].is_none_or(|x| d + c < x) {
                            dr[r] = Some(d + c);
                            from[r] = l;
                            changed = true;
                        }
                    }
                }
            }
            for r in 0..m {
                let (Some(d), Some(l)) = (dr[r], match_r[r]) else {
                    continue;
                };
                let back = d - cost(l, r).unwrap_or(0);
                if dl[l].is_none_or(|x| back < x) {
                    dl[l] = Some(back);
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        // The cheapest free right node reached ends the next augmenting path.
        let end = (0..m)
            .filter(|&r| match_r[r].is_none())
            .filter_map(|r| dr[r].map(|d| (d, r)))
            .min();
        let Some((_, mut r)) = end else { break };
        loop {
            let l = from[r];
            let prev = match_l[l];
            match_l[l] = Some(r);
            match_r[r] = Some(l);
            match prev {
                Some(p) => r = p,
                None => break,
            }
        }
    }
    match_l
        .iter()
        .enumerate()
        .filter_map(|(l, r)| r.map(|r| (l, r)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Ipv4Addr {
        s.parse().unwrap()
    }

    fn v(l: &[&str]) -> Vec<String> {
        l.iter().map(|s| s.to_string()).collect()
    }

    fn host() -> Vec<Iface> {
        vec![
            Iface::new("lo", ip("127.0.0.1"), 8),
            Iface::new("eth0", ip("10.1.2.3"), 16),
            Iface::new("docker0", ip("172.17.0.1"), 16),
            Iface::new("ib0", ip("192.168.7.9"), 24),
            Iface::new("virbr0", ip("192.168.122.1"), 24),
        ]
    }

    fn names(l: &[Iface]) -> Vec<&str> {
        l.iter().map(|i| i.name.as_str()).collect()
    }

    #[test]
    fn keepalive_schedule_fits_the_timeout() {
        assert_eq!(keepalive_schedule(Duration::from_secs(20)), (10, 2, 5));
        assert_eq!(keepalive_schedule(Duration::from_secs(2)), (1, 1, 1));
        assert_eq!(keepalive_schedule(Duration::from_millis(300)), (1, 1, 1));
        let (i, v, n) = keepalive_schedule(Duration::from_secs(60));
        assert!(i + v * n <= 60 && i + v * (n + 1) > 60, "{i} {v} {n}");
    }

    #[test]
    fn listeners_on_each_address_share_one_port() {
        let ips = [ip("127.0.0.1"), ip("127.0.0.2")];
        let (ls, port) = listen_on(&ips, 0).unwrap();
        let bound: Vec<_> = ls.iter().map(|l| l.local_addr().unwrap()).collect();
        assert_eq!(
            bound,
            vec![
                std::net::SocketAddr::from((ips[0], port)),
                std::net::SocketAddr::from((ips[1], port))
            ]
        );
        // Nothing listens on another address of the host at that port.
        assert!(std::net::TcpStream::connect((ip("127.0.0.3"), port)).is_err());
        // The same fixed port again is taken: an error, not another port.
        assert!(listen_on(&ips[1..], port).is_err());
        let (all, _) = listen_on(&[], 0).unwrap();
        assert!(all[0].local_addr().unwrap().ip().is_unspecified());
    }

    #[test]
    fn link_timeout_sets_the_socket_options() {
        let l = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let s = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        set_link_timeout(&s, Duration::from_secs(4)).unwrap();
        set_link_timeout(&s, Duration::ZERO).unwrap();
    }

    #[test]
    fn specs_match_names_wildcards_addresses_and_subnets() {
        let i = Iface::new("eth0", ip("10.200.0.1"), 24);
        assert!(matches("eth0", &i));
        assert!(matches("eth*", &i));
        assert!(!matches("eth", &i));
        assert!(matches("10.200.0.1", &i));
        assert!(matches("10.0.0.0/8", &i));
        assert!(!matches("10.0.0.0/16", &i));
        assert!(matches("0.0.0.0/0", &i));
        assert!(!matches("10.0.0.0/33", &i));
    }

    #[test]
    fn bad_specs_are_reported() {
        assert!(check_spec("eth0").is_ok());
        assert!(check_spec("10.0.0.0/8").is_ok());
        assert!(check_spec("10.0.0.1").is_ok());
        assert!(check_spec("docker*").is_ok());
        let e = check_spec("10.0.0.0/33").unwrap_err();
        assert!(e.contains("0 to 32"), "{e}");
        assert!(check_spec("10.0.0/8").is_err());
        assert!(check_spec("10.0.0.256").is_err());
        assert!(check_spec("").is_err());
        assert!(check_specs(&v(&["eth0", "1.2.3.4/40"])).is_err());
    }

    #[test]
    fn default_selection_skips_loopback_and_virtual_bridges() {
        let excl = v(&DEFAULT_IF_EXCLUDE.split(',').collect::<Vec<_>>());
        assert_eq!(names(&select(&host(), &[], &excl)), ["eth0", "ib0"]);
        // An explicit exclusion replaces the default one (loopback stays out).
        assert_eq!(
            names(&select(&host(), &[], &v(&["eth0"]))),
            ["docker0", "ib0", "virbr0"]
        );
    }

    #[test]
    fn include_order_is_kept_and_may_name_loopback() {
        assert_eq!(
            names(&select(&host(), &v(&["192.168.0.0/16", "eth0"]), &[])),
            ["ib0", "virbr0", "eth0"]
        );
        assert_eq!(names(&select(&host(), &v(&["lo"]), &[])), ["lo"]);
        assert!(select(&host(), &v(&["wlan0"]), &[]).is_empty());
    }

    #[test]
    fn published_form_roundtrips() {
        let l = vec![
            Iface::new("eth0", ip("10.1.2.3"), 16),
            Iface::new("ib0", ip("192.168.7.9"), 24),
        ];
        let s = encode(&l);
        assert_eq!(s, "10.1.2.3/16+192.168.7.9/24");
        assert_eq!(
            decode(&s).unwrap(),
            vec![(ip("10.1.2.3"), 16), (ip("192.168.7.9"), 24)]
        );
        assert_eq!(decode("").unwrap(), vec![]);
        assert_eq!(decode("1.2.3.4").unwrap(), vec![(ip("1.2.3.4"), 32)]);
        assert!(decode("1.2.3/8").is_err());
    }

    fn pairs(l: &[(Option<usize>, usize, Reach)]) -> Vec<Pair> {
        l.iter()
            .map(|&(local, remote, reach)| Pair {
                local,
                remote,
                reach,
            })
            .collect()
    }

    #[test]
    fn pairing_uses_every_common_subnet_in_include_order() {
        use Reach::{Routed, SameSubnet};
        // Our include order puts ib0 first; the peer lists its addresses the other way.
        let local = vec![
            Iface::new("ib0", ip("192.168.7.9"), 24),
            Iface::new("eth0", ip("10.1.2.3"), 16),
        ];
        let remote = vec![
            (ip("10.1.9.9"), 16),
            (ip("192.168.7.20"), 24),
            (ip("172.30.0.5"), 16),
        ];
        let (links, fallback) = pair_interfaces(&local, &remote);
        assert_eq!(
            links,
            pairs(&[(Some(0), 1, SameSubnet), (Some(1), 0, SameSubnet)])
        );
        assert_eq!(fallback, pairs(&[(None, 2, Routed)]));
    }

    #[test]
    fn pairing_maximises_the_pairs_before_preferring_order() {
        use Reach::SameSubnet;
        // eth0 (a /8) reaches both of the peer's addresses, eth1 only the first: taking the
        // first for eth0 (its cheapest) would leave eth1 without a pair.
        let local = vec![
            Iface::new("eth0", ip("10.0.0.1"), 8),
            Iface::new("eth1", ip("10.1.0.1"), 16),
        ];
        let remote = vec![(ip("10.1.0.2"), 16), (ip("10.2.0.2"), 16)];
        let (links, fallback) = pair_interfaces(&local, &remote);
        assert_eq!(
            links,
            pairs(&[(Some(0), 1, SameSubnet), (Some(1), 0, SameSubnet)])
        );
        assert!(fallback.is_empty());
        // Three of ours, three of the peer's, a chain of overlaps: all three paired.
        let local = vec![
            Iface::new("a", ip("10.0.0.1"), 8),
            Iface::new("b", ip("10.1.0.1"), 16),
            Iface::new("c", ip("10.1.2.1"), 24),
        ];
        let remote = vec![
            (ip("10.1.2.9"), 24),
            (ip("10.1.3.9"), 24),
            (ip("10.7.0.9"), 16),
        ];
        let (links, _) = pair_interfaces(&local, &remote);
        let got: Vec<(Option<usize>, usize)> = links.iter().map(|p| (p.local, p.remote)).collect();
        assert_eq!(got, [(Some(0), 2), (Some(1), 1), (Some(2), 0)]);
    }

    #[test]
    fn pairing_without_a_common_subnet_falls_back_to_routes() {
        use Reach::{Routed, SameSubnet};
        let local = vec![Iface::new("eth0", ip("10.1.2.3"), 24)];
        let (links, fallback) =
            pair_interfaces(&local, &[(ip("8.8.8.8"), 24), (ip("1.1.1.1"), 24)]);
        assert!(links.is_empty());
        assert_eq!(fallback, pairs(&[(None, 0, Routed), (None, 1, Routed)]));
        // One interface of ours, two addresses of the peer on its subnet: one pair, the other
        // address a fallback over the same interface.
        let (links, fallback) =
            pair_interfaces(&local, &[(ip("10.1.2.7"), 24), (ip("10.1.2.8"), 24)]);
        assert_eq!(links, pairs(&[(Some(0), 0, SameSubnet)]));
        assert_eq!(fallback, pairs(&[(Some(0), 1, SameSubnet)]));
        assert_eq!(pair_interfaces(&[], &[]), (vec![], vec![]));
    }

    #[test]
    fn same_subnet_pairs_come_first_in_local_order() {
        let local = vec![
            Iface::new("ib0", ip("192.168.7.9"), 24),
            Iface::new("eth0", ip("10.1.2.3"), 16),
        ];
        let remote = vec![
            (ip("172.30.0.5"), 16),
            (ip("10.1.9.9"), 16),
            (ip("192.168.7.20"), 24),
        ];
        assert_eq!(
            pair_order(&local, &remote),
            [ip("192.168.7.20"), ip("10.1.9.9"), ip("172.30.0.5")]
        );
        // Nothing shares a subnet: the peer's order (all routed).
        assert_eq!(
            pair_order(&local, &[(ip("8.8.8.8"), 24), (ip("1.1.1.1"), 24)]),
            [ip("8.8.8.8"), ip("1.1.1.1")]
        );
    }

    #[test]
    fn connect_from_binds_the_source_address() {
        use std::net::{SocketAddr, TcpListener};
        let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let to = l.local_addr().unwrap();
        let t = Duration::from_secs(5);
        // Any 127/8 address is ours on Linux: the peer sees the one we bound.
        let c = connect_from(Some(ip("127.0.0.2")), to, t).unwrap();
        let (a, from) = l.accept().unwrap();
        assert_eq!(from.ip(), ip("127.0.0.2"));
        assert_eq!(c.local_addr().unwrap(), from);
        drop((a, c));
        let c = connect_from(None, to, t).unwrap();
        assert_eq!(l.accept().unwrap().1.ip(), ip("127.0.0.1"));
        drop(c);
        // A port nobody listens on is refused; an address that is not ours cannot be bound.
        let dead: SocketAddr = TcpListener::bind(("127.0.0.1", 0))
            .unwrap()
            .local_addr()
            .unwrap();
        let e = connect_from(Some(ip("127.0.0.3")), dead, t).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
        assert!(connect_from(Some(ip("192.0.2.77")), to, t).is_err());
    }
}
