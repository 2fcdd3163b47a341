//! The `tcp` link: a [`TcpLink`] per peer over a non-blocking TCP connection.
//!
//! The byte stream carries records framed as a little-endian `u32` length (header plus
//! payload bytes), the 40-byte [`Hdr`] and the payload. Both directions buffer in user
//! space: [`TxBuf`] keeps what the socket did not take yet (a full buffer makes
//! [`Link::try_send`] return `false`, so the engine retries), [`RxFramer`] reassembles
//! records from reads of any size. Both are sans-IO and tested byte by byte; [`TcpLink`]
//! only moves bytes between them and the socket.
//!
//! Wire-up (listening, the `tcp` section of each rank's endpoint record, connecting and the
//! hello that rejects stray connections) is `super::setup`'s.

use std::cell::Cell;
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};

use crate::btl::{Caps, Link, LinkError, Wake};
use crate::pml::hdr::{Hdr, HDR};
use crate::sys;

/// Bytes of a frame's length word.
const LEN: usize = 4;

/// Largest payload of one tcp record (rendezvous data moves in fragments of at most this).
pub(crate) const TCP_MAX_PAYLOAD: usize = 256 * 1024;

/// Bytes the send buffer may hold before [`Link::try_send`] refuses more.
const TX_LIMIT: usize = 1024 * 1024;

/// Poll the socket on every this many [`Link::ready`] calls (a power of two): an idle
/// socket costs a system call, so it is checked less often than a shared-memory ring.
const PEEK_EVERY: u32 = 8;

/// Encodes one record into `out`.
pub(crate) fn encode(out: &mut Vec<u8>, hdr: &Hdr, payload: &[u8]) {
    let len = (HDR + payload.len()) as u32;
    out.extend_from_slice(&len.to_le_bytes());
    // SAFETY: Hdr is repr(C) plain data without padding (1+1+2+4+4+4+3*8 = 40 bytes).
    let hb = unsafe { std::slice::from_raw_parts((hdr as *const Hdr).cast::<u8>(), HDR) };
    out.extend_from_slice(hb);
    out.extend_from_slice(payload);
}

/// Outbound bytes not yet taken by the socket.
#[derive(Debug, Default)]
pub(crate) struct TxBuf {
    buf: Vec<u8>,
    pos: usize,
}

impl TxBuf {
    /// Bytes waiting.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Appends a record if the buffer holds less than `limit` bytes; `false` otherwise.
    pub fn push(&mut self, hdr: &Hdr, payload: &[u8], limit: usize) -> bool {
        if self.pending() >= limit {
            return false;
        }
        if self.pos > 0 && self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        }
        encode(&mut self.buf, hdr, payload);
        true
    }

    /// The bytes to write next.
    pub fn front(&self) -> &[u8] {
        &self.buf[self.pos..]
    }

    /// `n` bytes of [`TxBuf::front`] were written.
    pub fn consume(&mut self, n: usize) {
        self.pos += n;
        if self.pos == self.buf.len() {
            self.buf.clear();
            self.pos = 0;
        } else if self.pos > 1 << 20 && self.pos * 2 > self.buf.len() {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
    }
}

/// Reassembles records from a byte stream.
#[derive(Debug)]
pub(crate) struct RxFramer {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max_payload: usize,
    /// Bytes of the record handed out by [`RxFramer::next`] and not yet released.
    held: usize,
}

impl RxFramer {
    /// A framer accepting payloads up to `max_payload` bytes.
    pub fn new(max_payload: usize) -> RxFramer {
        RxFramer {
            buf: vec![0; 2 * (LEN + HDR + max_payload)],
            start: 0,
            end: 0,
            max_payload,
            held: 0,
        }
    }

    /// Free space to read into (compacts first; a held record stays unreleased).
    pub fn space(&mut self) -> &mut [u8] {
        // A record handed out and not released stays at `start` (and comes back from the
        // next `next`); its pointer is void from here on, as the compaction below may move it.
        self.held = 0;
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.buf.len() - self.end < LEN + HDR + self.max_payload {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// `n` bytes were read into [`RxFramer::space`].
    pub fn filled(&mut self, n: usize) {
        self.end += n;
    }

    /// Bytes buffered (including a partial record).
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    /// `true` if a whole record is buffered (or the stream is corrupt, which `next` reports).
    pub fn complete(&self) -> bool {
        let avail = self.end - self.start;
        if avail < LEN {
            return false;
        }
        let len = self.frame_len();
        len < HDR || len > HDR + self.max_payload || avail >= LEN + len
    }

    fn frame_len(&self) -> usize {
        let b = &self.buf[self.start..self.start + LEN];
        u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
    }

    /// The next whole record: header, payload pointer and payload length. A record returned
    /// before and not [`RxFramer::release`]d is returned again.
    pub fn next(&mut self) -> Result<Option<(Hdr, *const u8, usize)>, LinkError> {
        let avail = self.end - self.start;
        if avail < LEN {
            return Ok(None);
        }
        let len = self.frame_len();
        if len < HDR {
            return Err(LinkError::Short(len));
        }
        if len > HDR + self.max_payload {
            return Err(LinkError::TooLong {
                len,
                max: HDR + self.max_payload,
            });
        }
        if avail < LEN + len {
            return Ok(None);
        }
        let h = self.start + LEN;
        // SAFETY: HDR bytes at h are in bounds; Hdr is plain data, any bit pattern is valid.
        let hdr = unsafe { self.buf.as_ptr().add(h).cast::<Hdr>().read_unaligned() };
        self.held = LEN + len;
        // SAFETY: h + HDR + (len - HDR) <= end <= buf.len().
        let p = unsafe { self.buf.as_ptr().add(h + HDR) };
        Ok(Some((hdr, p, len - HDR)))
    }

    /// Frees the record returned by the last [`RxFramer::next`].
    pub fn release(&mut self) {
        self.start += self.held;
        self.held = 0;
    }
}

/// A per-peer link over a connected, non-blocking TCP socket.
#[derive(Debug)]
pub(crate) struct TcpLink {
    sock: TcpStream,
    tx: TxBuf,
    rx: RxFramer,
    /// A send failure, reported by the next poll.
    broken: Option<io::Error>,
    /// The peer closed its end.
    eof: bool,
    peeks: Cell<u32>,
}

impl TcpLink {
    /// Wraps a connected socket (made non-blocking, `TCP_NODELAY`).
    pub fn new(sock: TcpStream) -> io::Result<TcpLink> {
        sock.set_nonblocking(true)?;
        sock.set_nodelay(true)?;
        Ok(TcpLink {
            sock,
            tx: TxBuf::default(),
            rx: RxFramer::new(TCP_MAX_PAYLOAD),
            broken: None,
            eof: false,
            peeks: Cell::new(0),
        })
    }

    /// Writes buffered bytes until the socket would block.
    fn flush_tx(&mut self) {
        while self.broken.is_none() && self.tx.pending() > 0 {
            match sys::send_nonblocking(&self.sock, self.tx.front()) {
                Ok(n) => self.tx.consume(n),
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => return,
                    io::ErrorKind::Interrupted => continue,
                    _ => self.broken = Some(e),
                },
            }
        }
    }

    /// One non-blocking read into the framer; `Ok(false)` if nothing was there.
    fn read_some(&mut self) -> Result<bool, LinkError> {
        let space = self.rx.space();
        loop {
            match sys::recv_nonblocking(&self.sock, space) {
                Ok(0) => {
                    self.eof = true;
                    return Ok(false);
                }
                Ok(n) => {
                    self.rx.filled(n);
                    return Ok(true);
                }
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock => return Ok(false),
                    io::ErrorKind::Interrupted => continue,
                    _ => return Err(LinkError::Io(e)),
                },
            }
        }
    }
}

impl Link for TcpLink {
    fn name(&self) -> &'static str {
        "tcp"
    }

    fn caps(&self) -> Caps {
        Caps::NETWORK
    }

    fn max_payload(&self) -> usize {
        TCP_MAX_PAYLOAD
    }

    unsafe fn try_send(&mut self, hdr: &Hdr, payload: *const u8, len: usize) -> bool {
        if self.broken.is_some() {
            // The peer is gone; the next poll reports it. Drop the record.
            return true;
        }
        self.flush_tx();
        let data = if len == 0 {
            &[][..]
        } else {
            // SAFETY: the caller guarantees len readable bytes.
            unsafe { std::slice::from_raw_parts(payload, len) }
        };
        if !self.tx.push(hdr, data, TX_LIMIT) {
            return false;
        }
        self.flush_tx();
        true
    }

    fn poll(&mut self) -> Result<Option<(Hdr, *const u8, usize)>, LinkError> {
        // A record not released since the last poll is returned again (as on the sm link):
        // the blocking receive's direct path leaves records it does not want for the
        // general path.
        self.flush_tx();
        if !self.rx.complete() && !self.eof {
            self.read_some()?;
        }
        if let Some(r) = self.rx.next()? {
            return Ok(Some(r));
        }
        if let Some(e) = self.broken.take() {
            return Err(LinkError::Io(e));
        }
        if self.eof {
            return Err(LinkError::Closed {
                partial: self.rx.buffered(),
            });
        }
        Ok(None)
    }

    fn release(&mut self) {
        self.rx.release();
    }

    fn sending(&self) -> bool {
        self.tx.pending() > 0 && self.broken.is_none()
    }

    fn ready(&self) -> bool {
        if self.tx.pending() > 0 || self.rx.complete() || self.eof || self.broken.is_some() {
            return true;
        }
        let k = self.peeks.get().wrapping_add(1);
        self.peeks.set(k);
        if k % PEEK_EVERY != 0 {
            return false;
        }
        // Data, end of stream or an error other than "nothing there".
        sys::socket_readable(&self.sock)
    }

    fn wait_fds(&self, queued: bool, fds: &mut Vec<(RawFd, bool)>) -> Wake {
        if self.rx.complete() || self.eof || self.broken.is_some() {
            return Wake::Now;
        }
        // Whoever wakes on this socket looks at it on its next `ready`, not 8 calls later.
        self.peeks.set(PEEK_EVERY - 1);
        fds.push((self.sock.as_raw_fd(), queued || self.tx.pending() > 0));
        Wake::Fds
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn rec(kind: u8, tag: i32, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        let h = Hdr {
            kind,
            tag,
            a: payload.len() as u64,
            ..Hdr::default()
        };
        encode(&mut v, &h, payload);
        v
    }

    /// Feeds `bytes` in chunks of the given sizes and collects the records.
    fn feed(f: &mut RxFramer, bytes: &[u8], cut: usize) -> Vec<(u8, i32, Vec<u8>)> {
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < bytes.len() {
            let chunk = if pos == 0 {
                cut.max(1)
            } else {
                bytes.len() - pos
            };
            let chunk = chunk.min(bytes.len() - pos);
            let sp = f.space();
            let k = chunk.min(sp.len());
            sp[..k].copy_from_slice(&bytes[pos..pos + k]);
            f.filled(k);
            pos += k;
            while let Some((h, p, n)) = f.next().unwrap() {
                // SAFETY: valid until the next call of release/space.
                let d = unsafe { std::slice::from_raw_parts(p, n) }.to_vec();
                out.push((h.kind, h.tag, d));
                f.release();
            }
        }
        f.release();
        out
    }

    #[test]
    fn reassembles_at_every_split_point() {
        let mut stream = rec(1, 10, b"");
        stream.extend(rec(4, 11, &[7u8; 100]));
        stream.extend(rec(2, 12, b"x"));
        for cut in 0..=stream.len() {
            let mut f = RxFramer::new(200);
            let got = feed(&mut f, &stream, cut);
            assert_eq!(
                got,
                vec![
                    (1, 10, vec![]),
                    (4, 11, vec![7u8; 100]),
                    (2, 12, b"x".to_vec())
                ],
                "split at {cut}"
            );
            assert_eq!(f.buffered(), 0);
        }
    }

    #[test]
    fn one_byte_at_a_time_and_buffer_reuse() {
        let mut f = RxFramer::new(64);
        let mut n = 0;
        for i in 0..500u32 {
            let payload: Vec<u8> = (0..(i % 65) as u8).collect();
            let r = rec(4, i as i32, &payload);
            for (j, b) in r.iter().enumerate() {
                f.space()[0] = *b;
                f.filled(1);
                let got = f.next().unwrap();
                if j + 1 < r.len() {
                    assert!(got.is_none() && !f.complete());
                } else {
                    let (h, p, len) = got.expect("record complete");
                    assert_eq!((h.tag, len), (i as i32, payload.len()));
                    // SAFETY: held record.
                    assert_eq!(unsafe { std::slice::from_raw_parts(p, len) }, &payload[..]);
                    n += 1;
                    // Not released: the same record comes back.
                    let (h2, _, len2) = f.next().unwrap().expect("held record again");
                    assert_eq!((h2.tag, len2), (i as i32, payload.len()));
                }
            }
            f.release();
        }
        assert_eq!(n, 500);
    }

    #[test]
    fn oversized_and_short_lengths_are_errors() {
        let mut f = RxFramer::new(16);
        let r = rec(4, 0, &[0u8; 17]);
        f.space()[..r.len()].copy_from_slice(&r);
        f.filled(r.len());
        assert!(f.complete());
        assert!(matches!(f.next(), Err(LinkError::TooLong { len: 57, .. })));

        let mut f = RxFramer::new(16);
        f.space()[..4].copy_from_slice(&3u32.to_le_bytes());
        f.filled(4);
        assert!(matches!(f.next(), Err(LinkError::Short(3))));
    }

    #[test]
    fn tx_buffer_limits_and_partial_writes() {
        let mut t = TxBuf::default();
        let h = Hdr::default();
        assert!(t.push(&h, &[1; 10], 100));
        assert_eq!(t.pending(), LEN + HDR + 10);
        assert!(t.push(&h, &[2; 10], 100));
        assert!(!t.push(&h, &[3; 10], 100), "over the limit");
        // Drain byte by byte through a framer: the records come out intact.
        let mut f = RxFramer::new(16);
        let mut got = Vec::new();
        while t.pending() > 0 {
            let b = t.front()[0];
            t.consume(1);
            f.space()[0] = b;
            f.filled(1);
            if let Some((_, p, n)) = f.next().unwrap() {
                // SAFETY: held record.
                got.push(unsafe { std::slice::from_raw_parts(p, n) }.to_vec());
                f.release();
            }
        }
        assert_eq!(got, vec![vec![1; 10], vec![2; 10]]);
        assert!(t.push(&h, &[3; 10], 100));
    }

    /// A real socket pair: records both ways, then the peer closes mid-record.
    #[test]
    fn link_over_loopback_and_peer_closed_mid_record() {
        let l = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let mut la = TcpLink::new(a).unwrap();
        let mut raw_b = b.try_clone().unwrap();
        let mut lb = TcpLink::new(b).unwrap();
        let big = vec![5u8; TCP_MAX_PAYLOAD];
        let h = Hdr {
            kind: 4,
            ..Hdr::default()
        };
        // Send until the buffers fill, receiving on the other side meanwhile.
        let (mut sent, mut recvd) = (0, 0);
        while recvd < 40 {
            // SAFETY: big is valid.
            if sent < 40 && unsafe { la.try_send(&h, big.as_ptr(), big.len()) } {
                sent += 1;
            }
            la.poll().unwrap();
            if let Some((hh, p, n)) = lb.poll().unwrap() {
                assert_eq!((hh.kind, n), (4, big.len()));
                // SAFETY: held record.
                assert!(unsafe { std::slice::from_raw_parts(p, n) } == &big[..]);
                lb.release();
                recvd += 1;
            }
        }
        // Half a record, then close: the reader reports the peer closed.
        use std::io::Write;
        let r = rec(1, 0, &[1; 30]);
        raw_b.write_all(&r[..20]).unwrap();
        drop(raw_b);
        drop(lb);
        let err = loop {
            match la.poll() {
                Ok(None) => std::thread::yield_now(),
                Ok(Some(_)) => panic!("no whole record was sent"),
                Err(e) => break e,
            }
        };
        assert!(matches!(err, LinkError::Closed { partial: 20 }), "{err:?}");
    }
}
