//! Several TCP connections to one peer used as one link ([`StripedLink`]): one per paired
//! interface (`oxmpi_base::net::pair_interfaces`) times `btl_tcp_links`.
//!
//! Records whose order matters (everything but rendezvous DATA: matching envelopes, clear-to-
//! send, acknowledgements) always travel on the first connection, so they keep their order.
//! DATA records carry their offset in the receive buffer and are counted, not ordered, by
//! the receiver (`pml::recv::on_data`), so they go to whichever connection takes them next,
//! round robin: a large message is striped over every connection. Receiving polls the
//! connections in turn. A connection the peer closed cleanly counts as closed only once all
//! are (records still in flight on another one are delivered first); any other failure of
//! one fails the peer.

use super::link::TcpLink;
use crate::btl::{Caps, Link, LinkError, Wake, BTL};
use crate::pml::hdr::{Hdr, K_DATA};

/// One peer's link over several TCP connections.
#[derive(Debug)]
pub(crate) struct StripedLink {
    conns: Vec<TcpLink>,
    /// Connections the peer closed cleanly (end of stream, nothing left over).
    closed: Vec<bool>,
    /// The connection whose record [`Link::poll`] returned and [`Link::release`] has not
    /// freed yet (it is returned again by the next poll).
    held: Option<usize>,
    /// The connection polled first next time (fairness).
    next_rx: usize,
    /// The connection offered the next DATA record first.
    next_tx: usize,
    /// DATA records sent on each connection (reported at verbose level 20 by finalize).
    data_sent: Vec<u64>,
    /// Finalize has reported `data_sent`.
    reported: bool,
}

impl StripedLink {
    /// A link over `conns` (at least one; the first carries the ordered records).
    pub fn new(conns: Vec<TcpLink>) -> StripedLink {
        let n = conns.len();
        assert!(n > 0, "a striped link needs a connection");
        StripedLink {
            conns,
            closed: vec![false; n],
            held: None,
            next_rx: 0,
            next_tx: 0,
            data_sent: vec![0; n],
            reported: false,
        }
    }

    /// DATA records sent on each connection so far.
    #[cfg(test)]
    pub fn data_sent(&self) -> &[u64] {
        &self.data_sent
    }
}

/// What it is and can do is what each of its connections is and can do.
impl Link for StripedLink {
    fn name(&self) -> &'static str {
        self.conns[0].name()
    }

    fn caps(&self) -> Caps {
        self.conns[0].caps()
    }

    fn max_payload(&self) -> usize {
        self.conns[0].max_payload()
    }

    unsafe fn try_send(&mut self, hdr: &Hdr, payload: *const u8, len: usize) -> bool {
        let n = self.conns.len();
        if hdr.kind != K_DATA || n == 1 {
            // SAFETY: forwarded from our caller.
            return unsafe { self.conns[0].try_send(hdr, payload, len) };
        }
        for k in 0..n {
            let i = (self.next_tx + k) % n;
            // SAFETY: forwarded from our caller.
            if unsafe { self.conns[i].try_send(hdr, payload, len) } {
                self.next_tx = (i + 1) % n;
                self.data_sent[i] += 1;
                return true;
            }
        }
        false
    }

    fn poll(&mut self) -> Result<Option<(Hdr, *const u8, usize)>, LinkError> {
        if let Some(i) = self.held {
            return self.conns[i].poll();
        }
        let n = self.conns.len();
        let mut failed = None;
        let mut partial = 0;
        for k in 0..n {
            let i = (self.next_rx + k) % n;
            if self.closed[i] {
                // Still flush what we owe the peer on it (nothing arrives any more).
                continue;
            }
            match self.conns[i].poll() {
                Ok(Some(r)) => {
                    self.held = Some(i);
                    self.next_rx = (i + 1) % n;
                    return Ok(Some(r));
                }
                Ok(None) => {}
                Err(LinkError::Closed { partial: 0 }) => self.closed[i] = true,
                Err(LinkError::Closed { partial: p }) => partial += p,
                Err(e) => failed = failed.or(Some(e)),
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        if partial > 0 || self.closed.iter().all(|&c| c) {
            return Err(LinkError::Closed { partial });
        }
        Ok(None)
    }

    fn release(&mut self) {
        if let Some(i) = self.held.take() {
            self.conns[i].release();
        }
    }

    fn ready(&self) -> bool {
        self.held.is_some()
            || self
                .conns
                .iter()
                .zip(&self.closed)
                .any(|(c, &closed)| !closed && c.ready())
    }

    fn sending(&self) -> bool {
        self.conns.iter().any(Link::sending)
    }

    fn wait_fds(&self, queued: bool, fds: &mut Vec<(std::os::fd::RawFd, bool)>) -> Wake {
        if self.held.is_some() {
            return Wake::Now;
        }
        let mut w = Wake::Fds;
        for (c, &closed) in self.conns.iter().zip(&self.closed) {
            if !closed && c.wait_fds(queued, fds) == Wake::Now {
                w = Wake::Now;
            }
        }
        w
    }

    /// Reports how the DATA records were spread (verbose level 20), once.
    fn closing(&mut self) -> bool {
        if !self.reported {
            self.reported = true;
            oxmpi_base::verbose!(
                BTL,
                20,
                "tcp: striped link over {} connections sent DATA records {:?}",
                self.conns.len(),
                self.data_sent
            );
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btl::tcp::link::TCP_MAX_PAYLOAD;
    use crate::pml::hdr::K_EAGER;
    use std::net::{TcpListener, TcpStream};

    /// `n` connected pairs of tcp links over loopback.
    fn pairs(n: usize) -> (Vec<TcpLink>, Vec<TcpLink>) {
        let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let addr = l.local_addr().unwrap();
        (0..n)
            .map(|_| {
                let a = TcpStream::connect(addr).unwrap();
                let (b, _) = l.accept().unwrap();
                (TcpLink::new(a).unwrap(), TcpLink::new(b).unwrap())
            })
            .unzip()
    }

    /// DATA records spread over every connection, ordered records stay on the first and
    /// keep their order, and every record arrives intact, whatever connection it took.
    #[test]
    fn data_is_striped_and_ordered_records_keep_their_order() {
        let (a, b) = pairs(3);
        let mut tx = StripedLink::new(a);
        let mut rx = StripedLink::new(b);
        let frag = vec![9u8; TCP_MAX_PAYLOAD];
        let mut pending: Vec<Hdr> = Vec::new();
        for i in 0..30u64 {
            pending.push(Hdr {
                kind: K_EAGER,
                tag: i as i32,
                ..Hdr::default()
            });
            pending.push(Hdr {
                kind: K_DATA,
                a: i * frag.len() as u64,
                ..Hdr::default()
            });
        }
        pending.reverse();
        let (mut tags, mut offsets) = (Vec::new(), Vec::new());
        while tags.len() < 30 || offsets.len() < 30 {
            if let Some(h) = pending.last() {
                let len = if h.kind == K_DATA { frag.len() } else { 0 };
                // SAFETY: frag holds len bytes.
                if unsafe { tx.try_send(h, frag.as_ptr(), len) } {
                    pending.pop();
                }
            }
            tx.poll().unwrap();
            if let Some((h, p, n)) = rx.poll().unwrap() {
                // The same record again until released.
                let (h2, p2, n2) = rx.poll().unwrap().unwrap();
                assert_eq!((h2.kind, h2.a, p2, n2), (h.kind, h.a, p, n));
                if h.kind == K_DATA {
                    assert_eq!(n, frag.len());
                    // SAFETY: held record.
                    assert!(unsafe { std::slice::from_raw_parts(p, n) } == &frag[..]);
                    offsets.push(h.a);
                } else {
                    tags.push(h.tag);
                }
                rx.release();
            }
        }
        assert_eq!(tags, (0..30).collect::<Vec<i32>>(), "envelopes in order");
        offsets.sort_unstable();
        let want: Vec<u64> = (0..30).map(|i| i * frag.len() as u64).collect();
        assert_eq!(offsets, want, "every fragment once");
        assert!(
            tx.data_sent().iter().all(|&k| k >= 5),
            "striped: {:?}",
            tx.data_sent()
        );
        assert_eq!(tx.data_sent().iter().sum::<u64>(), 30);
    }

    /// The peer closing one connection first is not the end: records still on another one
    /// are delivered, and the link reports the peer closed once every connection is.
    #[test]
    fn closed_only_when_every_connection_is() {
        let (mut a, b) = pairs(2);
        let mut rx = StripedLink::new(b);
        let h = Hdr {
            kind: K_EAGER,
            tag: 5,
            ..Hdr::default()
        };
        // SAFETY: no payload.
        assert!(unsafe { a[0].try_send(&h, std::ptr::null(), 0) });
        let second = a.pop().unwrap();
        drop(second);
        let got = loop {
            if let Some((h, _, _)) = rx.poll().unwrap() {
                break h.tag;
            }
        };
        assert_eq!(got, 5);
        rx.release();
        drop(a);
        let err = loop {
            match rx.poll() {
                Ok(None) => std::thread::yield_now(),
                Ok(Some(_)) => panic!("nothing more was sent"),
                Err(e) => break e,
            }
        };
        assert!(matches!(err, LinkError::Closed { partial: 0 }), "{err:?}");
    }
}
