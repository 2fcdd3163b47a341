//! Byte transfer layer: the per-peer links the protocols run over, and the record header
//! they carry: [`SmLink`] (a pair of shared-memory rings, optionally with bulk buffers for
//! rendezvous fragments) and the TCP link (`crate::tcp::TcpLink`) implement the [`Link`] trait. Messages to oneself never reach a link (the
//! `self` path is handled by the engine directly).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::ring::{Consumer, Producer, RingCorrupt};
use crate::sys::Mapping;

pub(crate) const K_EAGER: u8 = 1;
pub(crate) const K_RTS: u8 = 2;
pub(crate) const K_CTS: u8 = 3;
pub(crate) const K_DATA: u8 = 4;
pub(crate) const K_FIN: u8 = 5;

pub(crate) const F_SYNC: u8 = 1;
pub(crate) const F_CMA: u8 = 2;
/// A DATA record whose payload lies in the link's bulk buffer (see [`SmLink`]); set and
/// cleared by the sm link itself, never seen by the engine.
pub(crate) const F_BULK: u8 = 4;
/// A CTS that opens a cooperative single copy (see `crate::coop`).
pub(crate) const F_COOP: u8 = 8;

/// Header in front of every record (40 bytes; with the sm ring's 8-byte frame word, up to 16
/// payload bytes fit in the first cache line).
///
/// | kind | ctx/src/tag | a | b | c |
/// |---|---|---|---|---|
/// | EAGER | envelope | - | sender request (sync) | - |
/// | RTS | envelope | total bytes | sender request | sender buffer address (CMA) |
/// | CTS | - | bytes wanted | sender request | receiver request |
/// | CTS + [`F_COOP`] | ctx = transfer sequence, tag = chunk bytes | bytes wanted | sender request | receiver buffer address |
/// | DATA | - | offset | - | receiver request |
/// | FIN | - | - | sender request | - |
///
/// On an sm link with a bulk buffer, a DATA record travels as a header-only ring record
/// with [`F_BULK`], `b` = the payload's position in the bulk buffer (bytes since its start,
/// never wrapping) and `ctx` = the payload length; the link turns it back into a plain DATA
/// record before the engine sees it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Hdr {
    pub kind: u8,
    pub flags: u8,
    pub _r: u16,
    pub ctx: u32,
    pub src: i32,
    pub tag: i32,
    pub a: u64,
    pub b: u64,
    pub c: u64,
}

/// Bytes of [`Hdr`].
pub(crate) const HDR: usize = std::mem::size_of::<Hdr>();

/// A bidirectional, ordered, reliable record link to one peer.
pub(crate) trait Link: Send + std::fmt::Debug {
    /// Component name (`sm`, `tcp`).
    fn name(&self) -> &'static str;
    /// Largest payload one record may carry.
    fn max_payload(&self) -> usize;
    /// Largest payload of one DATA record (rendezvous fragment); by default
    /// [`Link::max_payload`].
    fn max_data(&self) -> usize {
        self.max_payload()
    }
    /// Sends one record (header + `len` payload bytes) if there is room; `false` otherwise.
    ///
    /// # Safety
    /// `payload` must be valid for reads of `len` bytes (or `len == 0`).
    unsafe fn try_send(&mut self, hdr: &Hdr, payload: *const u8, len: usize) -> bool;
    /// The next inbound record: header, payload pointer and length. The payload stays valid
    /// until [`Link::release`].
    fn poll(&mut self) -> Result<Option<(Hdr, *const u8, usize)>, LinkError>;
    /// Frees the record returned by the last [`Link::poll`].
    fn release(&mut self);
    /// `true` if [`Link::poll`] may return a record; a cheap check for idle polling (a
    /// `false` here means there is nothing to read now).
    fn ready(&self) -> bool;
    /// `true` while records accepted by [`Link::try_send`] still wait in the link's own
    /// buffers for the peer to take them (only progress moves them on; finalize waits).
    fn sending(&self) -> bool {
        false
    }
}

/// A broken link (corrupt data from the peer).
#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkError {
    /// The shared ring held an impossible frame.
    #[error(transparent)]
    Ring(#[from] RingCorrupt),
    /// A record too short to hold a header.
    #[error("record of {0} bytes is shorter than a header")]
    Short(usize),
    /// A record length beyond what the link allows (corrupt or foreign stream).
    #[error("record of {len} bytes exceeds the link's maximum of {max}")]
    TooLong {
        /// The announced length.
        len: usize,
        /// The largest allowed.
        max: usize,
    },
    /// The peer closed the connection (`partial` bytes of an unfinished record were left).
    #[error("connection closed by the peer ({partial} bytes of an unfinished record)")]
    Closed {
        /// Bytes of a record cut short.
        partial: usize,
    },
    /// A socket error.
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
    /// A bulk-buffer reference outside the buffer (corrupt shared memory).
    #[error(
        "fragment of {len} bytes at bulk position {pos} lies outside the {cap}-byte bulk buffer"
    )]
    Bulk {
        /// The announced position.
        pos: u64,
        /// The announced length.
        len: usize,
        /// The bulk buffer's size.
        cap: usize,
    },
}

/// Bytes in front of a bulk buffer: its consumer index on its own cache line.
pub(crate) const BULK_CTL: usize = 64;

/// Where a bulk buffer lives: a consumer index (`AtomicU64`, bytes consumed since the start,
/// on its own cache line) followed by `cap` data bytes.
///
/// A bulk buffer carries the payload of rendezvous DATA fragments next to a ring, so large
/// copies do not pass through the ring's frame/line-clearing protocol (the ring keeps one
/// header line per fragment) and fragments may be larger than half a ring. The producer
/// writes a fragment at its head (skipping to the start when it would not fit before the
/// end), then publishes the ring record that names it (the ring's `Release` frame store
/// orders the copy before it); the consumer copies it out, then stores the new index with
/// `Release`; the producer loads the index with `Acquire` before reusing the space.
/// Fragments are consumed in ring order, so the space is freed in the order it was used.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BulkMem {
    tail: *const AtomicU64,
    data: *mut u8,
    cap: usize,
}

// SAFETY: the pointers refer to shared memory whose concurrent use is coordinated by the
// SPSC protocol described above; a BulkMem is used by exactly one producer or one consumer.
unsafe impl Send for BulkMem {}

impl BulkMem {
    /// Describes the bulk buffer at `base`.
    ///
    /// # Safety
    /// `base` must be 64-byte aligned, valid for reads and writes of `BULK_CTL + cap` bytes
    /// for as long as the buffer is used and zero-initialised; at most one producer and one
    /// consumer may use it.
    pub(crate) unsafe fn from_raw(base: *mut u8, cap: usize) -> BulkMem {
        debug_assert!(base as usize % 64 == 0 && cap > 0);
        BulkMem {
            tail: base.cast::<AtomicU64>(),
            // SAFETY: in bounds by the caller's guarantee.
            data: unsafe { base.add(BULK_CTL) },
            cap,
        }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: valid and 8-byte aligned for the buffer's lifetime (constructor contract).
        unsafe { &*self.tail }
    }
}

/// The producing side of a bulk buffer.
#[derive(Debug)]
pub(crate) struct BulkTx {
    mem: BulkMem,
    head: u64,
    cached_tail: u64,
}

impl BulkTx {
    pub(crate) fn new(mem: BulkMem) -> BulkTx {
        let t = mem.tail().load(Ordering::Acquire);
        BulkTx {
            mem,
            head: t,
            cached_tail: t,
        }
    }

    /// Where a fragment of `len` bytes would go (absolute position), if there is room.
    #[inline]
    fn reserve(&mut self, len: usize) -> Option<u64> {
        let cap = self.mem.cap as u64;
        let off = self.head % cap;
        let start = if off + len as u64 > cap {
            self.head + (cap - off)
        } else {
            self.head
        };
        let end = start + len as u64;
        if end - self.cached_tail > cap {
            self.cached_tail = self.mem.tail().load(Ordering::Acquire);
            if end - self.cached_tail > cap {
                return None;
            }
        }
        Some(start)
    }
}

/// The consuming side of a bulk buffer.
#[derive(Debug)]
pub(crate) struct BulkRx {
    mem: BulkMem,
    /// End of the fragment handed out by the last poll, freed by the next release.
    pending: Option<u64>,
}

impl BulkRx {
    pub(crate) fn new(mem: BulkMem) -> BulkRx {
        BulkRx { mem, pending: None }
    }
}

/// Shared-memory link: we produce into our ring in the peer's segment and consume the
/// peer's ring in our own segment; with bulk buffers (`btl_sm_bulk_size` > 0), DATA
/// payloads go through the bulk buffer next to each ring (see [`BulkMem`]).
#[derive(Debug)]
pub(crate) struct SmLink {
    pub tx: Producer,
    pub rx: Consumer,
    /// Outbound bulk buffer (in the peer's segment), if the peer has bulk buffers.
    pub bulk_tx: Option<BulkTx>,
    /// Inbound bulk buffer (in our segment), if we have bulk buffers.
    pub bulk_rx: Option<BulkRx>,
    /// Keeps the peer's segment mapped.
    pub _map: Mapping,
}

impl SmLink {
    /// Sends a DATA record whose payload goes into the bulk buffer; `false` if the bulk
    /// buffer or the ring has no room (nothing is written then).
    ///
    /// # Safety
    /// `payload` must be valid for reads of `len` bytes.
    #[inline]
    unsafe fn try_send_bulk(&mut self, hdr: &Hdr, payload: *const u8, len: usize) -> bool {
        let Some(btx) = self.bulk_tx.as_mut() else {
            return false;
        };
        let Some(start) = btx.reserve(len) else {
            return false;
        };
        let mem = btx.mem;
        let mut h = *hdr;
        h.flags |= F_BULK;
        h.b = start;
        h.ctx = len as u32;
        let pushed = self.tx.push(HDR, |d| {
            // SAFETY: `[start % cap, + len)` lies inside the bulk buffer and is free (reserve
            // checked it against the consumer's index); the ring gives HDR writable bytes,
            // 8-byte aligned; the caller guarantees the payload. The ring publishes the
            // record (Release) after this closure, so the copy is visible before it.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    payload,
                    mem.data.add((start % mem.cap as u64) as usize),
                    len,
                );
                d.cast::<Hdr>().write(h);
            }
        });
        if pushed {
            btx.head = start + len as u64;
        }
        pushed
    }
}

impl Link for SmLink {
    fn name(&self) -> &'static str {
        "sm"
    }

    fn max_payload(&self) -> usize {
        self.tx.max_record() - HDR
    }

    fn max_data(&self) -> usize {
        match &self.bulk_tx {
            // At least two fragments in flight.
            Some(btx) => (btx.mem.cap / 2).min(u32::MAX as usize),
            None => self.max_payload(),
        }
    }

    #[inline]
    unsafe fn try_send(&mut self, hdr: &Hdr, payload: *const u8, len: usize) -> bool {
        if hdr.kind == K_DATA && len > 0 && self.bulk_tx.is_some() {
            // SAFETY: forwarded caller guarantee.
            return unsafe { self.try_send_bulk(hdr, payload, len) };
        }
        self.tx.push(HDR + len, |d| {
            // SAFETY: the ring gives HDR + len writable bytes, 8-byte aligned; the caller
            // guarantees the payload.
            unsafe {
                d.cast::<Hdr>().write(*hdr);
                if len > 0 {
                    std::ptr::copy_nonoverlapping(payload, d.add(HDR), len);
                }
            }
        })
    }

    #[inline]
    fn poll(&mut self) -> Result<Option<(Hdr, *const u8, usize)>, LinkError> {
        let Some((p, len)) = self.rx.peek()? else {
            return Ok(None);
        };
        if len < HDR {
            return Err(LinkError::Short(len));
        }
        // SAFETY: the record holds at least HDR bytes, 8-byte aligned; the payload follows.
        let mut hdr = unsafe { p.cast::<Hdr>().read() };
        if hdr.flags & F_BULK != 0 {
            let (pos, n) = (hdr.b, hdr.ctx as usize);
            let Some(brx) = self.bulk_rx.as_mut() else {
                return Err(LinkError::Bulk {
                    pos,
                    len: n,
                    cap: 0,
                });
            };
            let cap = brx.mem.cap;
            let off = (pos % cap as u64) as usize;
            if hdr.kind != K_DATA || off + n > cap {
                return Err(LinkError::Bulk { pos, len: n, cap });
            }
            brx.pending = Some(pos + n as u64);
            hdr.flags &= !F_BULK;
            hdr.b = 0;
            hdr.ctx = 0;
            // SAFETY: in bounds (checked); published by the ring record acquired in peek.
            return Ok(Some((hdr, unsafe { brx.mem.data.add(off) }, n)));
        }
        // SAFETY: in bounds of the record.
        Ok(Some((hdr, unsafe { p.add(HDR) }, len - HDR)))
    }

    #[inline]
    fn release(&mut self) {
        self.rx.release();
        if let Some(brx) = self.bulk_rx.as_mut() {
            if let Some(end) = brx.pending.take() {
                brx.mem.tail().store(end, Ordering::Release);
            }
        }
    }

    #[inline]
    fn ready(&self) -> bool {
        self.rx.ready()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::{RingMem, CTL_BYTES};
    use crate::sys;

    const RING: usize = 4096;

    /// Two linked SmLinks (a -> b through slot 0, b -> a through slot 1) in one memfd
    /// segment, with bulk buffers of `bulk` bytes (0: none).
    fn pair(bulk: usize) -> (SmLink, SmLink) {
        let slot = CTL_BYTES + RING + if bulk > 0 { BULK_CTL + bulk } else { 0 };
        let fd = sys::memfd("oxmpi-btl-test", 2 * slot).unwrap();
        let link = |tx_slot: usize, rx_slot: usize| {
            let map = Mapping::map(&fd, 2 * slot).unwrap();
            let (txb, rxb) = (
                map.ptr().wrapping_add(tx_slot * slot),
                map.ptr().wrapping_add(rx_slot * slot),
            );
            // SAFETY: both slots lie in the zeroed mapping, 64-byte aligned; each ring and
            // bulk buffer gets one producer (the link whose tx it is) and one consumer.
            unsafe {
                SmLink {
                    tx: Producer::new(RingMem::from_raw(txb, RING)),
                    rx: Consumer::new(RingMem::from_raw(rxb, RING)),
                    bulk_tx: (bulk > 0)
                        .then(|| BulkTx::new(BulkMem::from_raw(txb.add(CTL_BYTES + RING), bulk))),
                    bulk_rx: (bulk > 0)
                        .then(|| BulkRx::new(BulkMem::from_raw(rxb.add(CTL_BYTES + RING), bulk))),
                    _map: map,
                }
            }
        };
        (link(0, 1), link(1, 0))
    }

    fn data(off: u64, rreq: u64) -> Hdr {
        Hdr {
            kind: K_DATA,
            a: off,
            c: rreq,
            ..Hdr::default()
        }
    }

    fn send(l: &mut SmLink, h: &Hdr, p: &[u8]) -> bool {
        // SAFETY: p holds p.len() readable bytes.
        unsafe { l.try_send(h, p.as_ptr(), p.len()) }
    }

    fn recv(l: &mut SmLink) -> Option<(Hdr, Vec<u8>)> {
        let (h, p, n) = l.poll().unwrap()?;
        // SAFETY: poll returned n readable bytes valid until release.
        let v = unsafe { std::slice::from_raw_parts(p, n) }.to_vec();
        l.release();
        Some((h, v))
    }

    /// DATA payloads go through the bulk buffer (skipping its end, waiting for space) and
    /// arrive intact, in order with other records, as plain DATA records.
    #[test]
    fn bulk_fragments_arrive_intact_and_in_order() {
        let (mut a, mut b) = pair(1024);
        assert_eq!(a.max_data(), 512);
        let mut sent = std::collections::VecDeque::new();
        for i in 0..300u64 {
            let len = 1 + (i as usize * 97) % 512;
            let payload: Vec<u8> = (0..len).map(|k| (k as u64 ^ i) as u8).collect();
            let h = if i % 5 == 0 {
                Hdr {
                    kind: K_EAGER,
                    tag: i as i32,
                    ..Hdr::default()
                }
            } else {
                data(i, 7)
            };
            while !send(&mut a, &h, &payload) {
                let (gh, gp) = recv(&mut b).expect("full while nothing is queued");
                let (wh, wp): (Hdr, Vec<u8>) = sent.pop_front().unwrap();
                assert_eq!(
                    (gh.kind, gh.a, gh.c, gh.tag, gh.flags),
                    (wh.kind, wh.a, wh.c, wh.tag, 0)
                );
                assert_eq!((gh.b, gh.ctx), (0, 0), "bulk fields are cleared");
                assert_eq!(gp, wp);
            }
            sent.push_back((h, payload));
        }
        while let Some((wh, wp)) = sent.pop_front() {
            let (gh, gp) = recv(&mut b).expect("record missing");
            assert_eq!((gh.kind, gh.a), (wh.kind, wh.a));
            assert_eq!(gp, wp);
        }
        assert!(recv(&mut b).is_none());
        assert!(a.tx.is_drained());
    }

    /// The bulk buffer limits what is in flight: with 1024 bytes, two 512-byte fragments
    /// fill it; a third waits until the consumer released one.
    #[test]
    fn bulk_full_waits_for_release() {
        let (mut a, mut b) = pair(1024);
        let p = vec![9u8; 512];
        assert!(send(&mut a, &data(0, 1), &p));
        assert!(send(&mut a, &data(512, 1), &p));
        assert!(!send(&mut a, &data(1024, 1), &p), "bulk buffer is full");
        // Polled but not released: still occupied.
        assert!(b.poll().unwrap().is_some());
        assert!(!send(&mut a, &data(1024, 1), &p));
        b.release();
        assert!(send(&mut a, &data(1024, 1), &p));
    }

    /// Without bulk buffers, DATA records carry their payload in the ring.
    #[test]
    fn no_bulk_buffer_uses_the_ring() {
        let (mut a, mut b) = pair(0);
        assert_eq!(a.max_data(), a.max_payload());
        let p: Vec<u8> = (0..1000).map(|k| k as u8).collect();
        assert!(send(&mut a, &data(5, 2), &p));
        let (h, got) = recv(&mut b).unwrap();
        assert_eq!((h.kind, h.a, h.c, h.flags), (K_DATA, 5, 2, 0));
        assert_eq!(got, p);
    }

    /// A bulk reference outside the buffer (corrupt shared memory) is an error, not a read
    /// out of bounds.
    #[test]
    fn corrupt_bulk_reference_is_reported() {
        let (mut a, mut b) = pair(1024);
        let h = Hdr {
            kind: K_DATA,
            flags: F_BULK,
            b: 1000,
            ctx: 100,
            ..Hdr::default()
        };
        // Bypass try_send: forge the ring record itself.
        // SAFETY: the ring gives HDR writable bytes.
        assert!(a.tx.push(HDR, |d| unsafe { d.cast::<Hdr>().write(h) }));
        assert!(matches!(
            b.poll(),
            Err(LinkError::Bulk {
                pos: 1000,
                len: 100,
                cap: 1024
            })
        ));
    }
}
