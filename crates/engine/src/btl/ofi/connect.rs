//! The `ofi` link's connect timeout (sans-IO: the caller passes the clock): a peer the
//! provider never reaches fails in bounded time with one line naming it, instead of
//! leaving the sends to it pending for ever.
//!
//! Connection-oriented providers (`tcp;ofi_rxm`, `verbs;ofi_rxm`) connect on the first
//! send and refuse sends (`FI_EAGAIN`) until the peer's side answers; a peer whose
//! published address leads nowhere (the `tcp` provider publishes its first interface,
//! which may be on a network that reaches nothing), or whose process never progresses,
//! is never answered. A peer counts as reached once anything came back from it: a record
//! it sent, a send to it completed, or an inject it took (`fi_tinject` takes nothing
//! before the connection is up). From the first send to a peer not reached yet (refused,
//! or accepted and not completed), it has `btl_ofi_connect_timeout` seconds.

use std::time::{Duration, Instant};

/// One peer's connection state.
#[derive(Debug, Clone)]
pub(crate) struct Reach {
    /// The peer's address as text, for the error line.
    addr: String,
    /// Something came back from it.
    reached: bool,
    /// The first send to it that waits, while not reached.
    since: Option<Instant>,
}

impl Reach {
    /// A peer at `addr` (its address as text), not reached yet.
    pub(crate) fn new(addr: String) -> Reach {
        Reach {
            addr,
            reached: false,
            since: None,
        }
    }

    /// Something came back from the peer: it is reached for good.
    pub(crate) fn heard(&mut self) {
        self.reached = true;
        self.since = None;
    }

    /// A send to the peer waits (refused, or not completed) at `now`.
    pub(crate) fn waiting(&mut self, now: Instant) {
        if !self.reached && self.since.is_none() {
            self.since = Some(now);
        }
    }

    /// The error line if peer `p` (of provider `prov`) has waited `limit` or longer at
    /// `now` without being reached.
    pub(crate) fn expired(
        &self,
        now: Instant,
        limit: Duration,
        p: usize,
        prov: &str,
    ) -> Option<String> {
        let since = self.since.filter(|_| !self.reached)?;
        if now.duration_since(since) < limit {
            return None;
        }
        let hint = if prov.split(';').any(|x| x == "tcp") {
            "; the tcp provider publishes its first interface's address: choose one that \
             reaches the peer with FI_TCP_IFACE"
        } else {
            ""
        };
        Some(format!(
            "rank {p} at {} unreachable over {prov}: not connected within {} s \
             (btl_ofi_connect_timeout){hint}",
            self.addr,
            limit.as_secs()
        ))
    }
}

/// An endpoint address as text: `a.b.c.d:port` or `[v6]:port` for the socket addresses
/// the `tcp`/`udp` providers use, else hex.
pub(crate) fn describe(addr: &[u8]) -> String {
    let family = addr.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let port = addr.get(2..4).map(|b| u16::from_be_bytes([b[0], b[1]]));
    match (family, port, addr.len()) {
        (Some(f), Some(port), 16) if f == libc::AF_INET as u16 => {
            let ip = std::net::Ipv4Addr::new(addr[4], addr[5], addr[6], addr[7]);
            format!("{ip}:{port}")
        }
        (Some(f), Some(port), 28) if f == libc::AF_INET6 as u16 => {
            let mut o = [0u8; 16];
            o.copy_from_slice(&addr[8..24]);
            format!("[{}]:{port}", std::net::Ipv6Addr::from(o))
        }
        _ => addr.iter().map(|x| format!("{x:02x}")).collect(),
    }
}

/// A sockaddr_in for `ip:port`, as libfabric's `FI_SOCKADDR_IN` (for tests).
#[cfg(test)]
pub(crate) fn sockaddr_in(ip: [u8; 4], port: u16) -> Vec<u8> {
    let mut a = vec![0u8; 16];
    a[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
    a[2..4].copy_from_slice(&port.to_be_bytes());
    a[4..8].copy_from_slice(&ip);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_read_as_text() {
        assert_eq!(describe(&sockaddr_in([10, 1, 2, 3], 4567)), "10.1.2.3:4567");
        let mut v6 = vec![0u8; 28];
        v6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[2..4].copy_from_slice(&80u16.to_be_bytes());
        v6[23] = 1;
        assert_eq!(describe(&v6), "[::1]:80");
        assert_eq!(describe(&[0xab, 0x01]), "ab01");
    }

    #[test]
    fn a_peer_not_reached_in_time_fails_once_and_a_reached_one_never() {
        let t0 = Instant::now();
        let limit = Duration::from_secs(5);
        let mut r = Reach::new("10.1.2.3:4567".into());
        assert_eq!(
            r.expired(t0 + limit * 10, limit, 1, "tcp;ofi_rxm"),
            None,
            "idle"
        );
        r.waiting(t0);
        r.waiting(t0 + Duration::from_secs(3));
        assert_eq!(
            r.expired(t0 + Duration::from_secs(4), limit, 1, "tcp;ofi_rxm"),
            None
        );
        let line = r.expired(t0 + limit, limit, 1, "tcp;ofi_rxm").unwrap();
        assert_eq!(
            line,
            "rank 1 at 10.1.2.3:4567 unreachable over tcp;ofi_rxm: not connected within 5 s \
             (btl_ofi_connect_timeout); the tcp provider publishes its first interface's \
             address: choose one that reaches the peer with FI_TCP_IFACE"
        );
        assert!(!line.contains('\n'));
        let verbs = r.expired(t0 + limit, limit, 2, "verbs;ofi_rxm").unwrap();
        assert!(verbs.ends_with("(btl_ofi_connect_timeout)"), "{verbs}");
        // Heard from: never expires, even if later sends wait.
        r.heard();
        r.waiting(t0 + limit);
        assert_eq!(r.expired(t0 + limit * 100, limit, 1, "tcp;ofi_rxm"), None);
    }
}
