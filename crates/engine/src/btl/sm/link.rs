//! The shared-memory link ([`SmLink`]): a pair of rings, optionally with bulk buffers.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::bulk::{BulkRx, BulkTx};
use super::coop::CoopMem;
use super::ring::{Consumer, Producer};
use crate::btl::{Caps, Link, LinkError};
use crate::pml::hdr::{Hdr, F_BULK, F_COLD, F_SYNC, HDR, K_DATA, K_EAGER};
use crate::sys::Mapping;

/// Bytes of the compact header of a standard eager record: [`Hdr`]'s first 16 bytes (kind,
/// flags, context, source, tag). Its `a`, `b` and `c` mean nothing to the receiver of an
/// eager record without [`F_SYNC`], so the link leaves them out (and gives them back as
/// zero): a message of up to 8 bytes is then one 32-byte ring slot, two per cache line.
pub(crate) const SHORT_HDR: usize = 16;
const _: () = assert!(std::mem::offset_of!(Hdr, a) == SHORT_HDR);

/// Smallest payload of a standard eager record that starts on a cache line
/// ([`ALIGN_SLACK`]). A C model of the ping-pong (two pinned threads, the same ring, the
/// same copies) took 0.64 us one way for 1 KiB with the payload 24 bytes into a line and
/// 0.57 us with it on a line, 3 % less at 2 KiB, the same at 512 bytes.
pub(crate) const ALIGN_MIN: usize = 1024;
/// Payloads from here on keep the plain compact layout: in a same-run A/B (5 rounds, load
/// 23-26) aligned records took the C ping-pong from 0.634 to 0.580 us at 1 KiB but made it
/// 1.5 % slower at 4 and 8 KiB and a window of 2 KiB sends 5 % slower (the header's line is
/// one more line per record).
pub(crate) const ALIGN_MAX: usize = 2048;
/// Bytes between the compact header and the payload that a line-aligned standard eager
/// record reserves: records start on 32-byte slots, so the compact header ends 24 bytes
/// into a slot and the next line starts 8 or 40 bytes later. The header's `_r` says which
/// (the payload's offset after the compact header); the payload is then the record's last
/// `len - SHORT_HDR - ALIGN_SLACK` bytes but its final 0 or 32.
pub(crate) const ALIGN_SLACK: usize = 40;

/// Whether a record travels with the compact header: decided from the header's first 16
/// bytes alone, so the receiver reads the same answer from the record.
#[inline(always)]
fn is_short(kind: u8, flags: u8) -> bool {
    kind == K_EAGER && flags & F_SYNC == 0
}

/// Shared-memory link: we produce into our ring in the peer's segment and consume the
/// peer's ring in our own segment; with bulk buffers (`btl_sm_bulk_size` > 0), DATA
/// payloads go through the bulk buffer next to each ring (see [`BulkMem`](super::bulk::BulkMem)).
/// A standard eager record carries the compact header ([`SHORT_HDR`]).
#[derive(Debug)]
pub(crate) struct SmLink {
    pub tx: Producer,
    pub rx: Consumer,
    /// Outbound bulk buffer (in the peer's segment), if the peer has bulk buffers.
    pub bulk_tx: Option<BulkTx>,
    /// Inbound bulk buffer (in our segment), if we have bulk buffers.
    pub bulk_rx: Option<BulkRx>,
    /// The cooperative-copy control areas: its transfers to us (in our segment), ours to
    /// it (in its segment).
    pub coop: Option<(CoopMem, CoopMem)>,
    /// Keeps the peer's segment mapped.
    pub _map: Mapping,
    /// Keeps our own segment mapped (our inbound ring from it lives there).
    pub _own: Option<Arc<Mapping>>,
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

/// A record's payload into the ring: with non-temporal stores when the link was told so
/// ([`Link::stream_next`]), else the plain copy (small payloads inline, without a call into
/// `memcpy`).
///
/// # Safety
/// As for [`crate::mem::copy`].
#[inline(always)]
unsafe fn copy_payload(stream: bool, src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: forwarded caller guarantee.
    unsafe {
        if stream {
            crate::mem::copy_nt(src, dst, n);
        } else {
            crate::mem::copy(src, dst, n);
        }
    }
}

impl Link for SmLink {
    fn name(&self) -> &'static str {
        "sm"
    }

    fn caps(&self) -> Caps {
        Caps {
            single_copy: true,
            buffered: false,
            coop: self.coop,
            rma_read: false,
        }
    }

    fn max_payload(&self) -> usize {
        self.tx.max_record() - HDR
    }

    fn max_data(&self) -> usize {
        match &self.bulk_tx {
            // At least two fragments in flight in the hot part.
            Some(btx) => (btx.hot / 2).min(u32::MAX as usize),
            None => self.max_payload(),
        }
    }

    #[inline(always)]
    fn answer_next(&mut self) {
        self.tx.answer_next();
    }

    #[inline(always)]
    fn stream_next(&mut self) {
        self.tx.stream_next();
    }

    #[inline]
    unsafe fn try_send(&mut self, hdr: &Hdr, payload: *const u8, len: usize) -> bool {
        self.tx.note_inbound(self.rx.consumed());
        if hdr.kind == K_DATA && len > 0 && self.bulk_tx.is_some() {
            // SAFETY: forwarded caller guarantee.
            return unsafe { self.try_send_bulk(hdr, payload, len) };
        }
        if is_short(hdr.kind, hdr.flags) {
            if (ALIGN_MIN..ALIGN_MAX).contains(&len)
                && SHORT_HDR + ALIGN_SLACK + len <= self.tx.max_record()
            {
                return self.tx.push(SHORT_HDR + ALIGN_SLACK + len, |d| {
                    // The payload starts on the first line after the compact header.
                    let at = d as usize + SHORT_HDR;
                    let pad = at.next_multiple_of(crate::btl::sm::ring::LINE) - at;
                    debug_assert!((1..=ALIGN_SLACK).contains(&pad));
                    let mut h = *hdr;
                    h._r = pad as u16;
                    // SAFETY: the ring gives SHORT_HDR + ALIGN_SLACK + len writable bytes,
                    // 8-byte aligned, and pad <= ALIGN_SLACK (the ring's records start on
                    // slots); `Hdr` is `repr(C)` with kind, flags, _r, ctx, src and tag in
                    // its first SHORT_HDR bytes; the caller guarantees the payload.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            (&h as *const Hdr).cast::<u8>(),
                            d,
                            SHORT_HDR,
                        );
                        crate::mem::copy(payload, d.add(SHORT_HDR + pad), len);
                    }
                });
            }
            let stream = self.tx.streaming();
            return self.tx.push(SHORT_HDR + len, |d| {
                // SAFETY: the ring gives SHORT_HDR + len writable bytes, 8-byte aligned;
                // `Hdr` is `repr(C)` with kind, flags, _r, ctx, src and tag in its first
                // SHORT_HDR bytes; the caller guarantees the payload.
                unsafe {
                    std::ptr::copy_nonoverlapping((hdr as *const Hdr).cast::<u8>(), d, SHORT_HDR);
                    copy_payload(stream, payload, d.add(SHORT_HDR), len);
                }
            });
        }
        let stream = self.tx.streaming();
        self.tx.push(HDR + len, |d| {
            // SAFETY: the ring gives HDR + len writable bytes, 8-byte aligned; the caller
            // guarantees the payload.
            unsafe {
                d.cast::<Hdr>().write(*hdr);
                copy_payload(stream, payload, d.add(HDR), len);
            }
        })
    }

    #[inline]
    fn poll(&mut self) -> Result<Option<(Hdr, *const u8, usize)>, LinkError> {
        let Some((p, len)) = self.rx.peek()? else {
            return Ok(None);
        };
        if len < SHORT_HDR {
            return Err(LinkError::Short(len));
        }
        // SAFETY: the record holds at least SHORT_HDR bytes, 8-byte aligned.
        let (kind, flags) = unsafe { (p.read(), p.add(1).read()) };
        if is_short(kind, flags) {
            let mut hdr = Hdr::default();
            // SAFETY: as above; `Hdr` is `repr(C)` with its first SHORT_HDR bytes plain
            // integers (any bytes are a valid value); the payload follows.
            unsafe {
                std::ptr::copy_nonoverlapping(p, (&mut hdr as *mut Hdr).cast::<u8>(), SHORT_HDR);
            }
            let pad = hdr._r as usize;
            if pad == 0 {
                // SAFETY: the payload follows the compact header inside the record.
                return Ok(Some((hdr, unsafe { p.add(SHORT_HDR) }, len - SHORT_HDR)));
            }
            // A line-aligned record (see ALIGN_SLACK).
            if pad > ALIGN_SLACK || len < SHORT_HDR + ALIGN_SLACK {
                return Err(LinkError::Pad { pad, len });
            }
            hdr._r = 0;
            // SAFETY: SHORT_HDR + pad + (len - SHORT_HDR - ALIGN_SLACK) <= len: in the record.
            return Ok(Some((
                hdr,
                unsafe { p.add(SHORT_HDR + pad) },
                len - SHORT_HDR - ALIGN_SLACK,
            )));
        }
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
            if off + n > brx.touched {
                // Bytes never written before: their pages are touched for the first time
                // (a ping-pong of 16 KiB messages measured its first 64 pipelined transfers
                // at 9-14 us against 2.9 us for the next ones; a stream's first pass
                // through the stream area likewise).
                brx.touched = off + n;
                hdr.flags |= F_COLD;
            }
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

    #[inline]
    fn as_sm(&mut self) -> Option<&mut SmLink> {
        Some(self)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::btl::sm::bulk::{BulkMem, BULK_CTL};
    use crate::btl::sm::ring::{RingMem, CTL_BYTES};
    use crate::pml::hdr::K_EAGER;
    use crate::sys;

    const RING: usize = 4096;

    /// Two linked SmLinks (a -> b through slot 0, b -> a through slot 1) in one memfd
    /// segment, with bulk buffers of `bulk` bytes (0: none).
    pub(crate) fn pair(bulk: usize) -> (SmLink, SmLink) {
        pair_hot(bulk, bulk)
    }

    /// As [`pair`], the producers keeping to the first `hot` bytes of each bulk buffer while
    /// the consumer keeps up ([`BulkTx::reserve`]).
    pub(crate) fn pair_hot(bulk: usize, hot: usize) -> (SmLink, SmLink) {
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
                    bulk_tx: (bulk > 0).then(|| {
                        BulkTx::new(BulkMem::from_raw(txb.add(CTL_BYTES + RING), bulk), hot)
                    }),
                    bulk_rx: (bulk > 0)
                        .then(|| BulkRx::new(BulkMem::from_raw(rxb.add(CTL_BYTES + RING), bulk))),
                    coop: None,
                    _map: map,
                    _own: None,
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
                    (gh.kind, gh.a, gh.c, gh.tag, gh.flags & !F_COLD),
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

    /// Records whose payload is written with non-temporal stores (`Link::stream_next`; the
    /// whole lines streamed, the partial ones at either end plain) arrive intact and in
    /// order at a consumer on another thread, which polls the frame word while they are
    /// written: the streamed stores are ordered before the frame's `Release`.
    #[test]
    fn streamed_records_arrive_intact_across_threads() {
        let (mut a, mut b) = pair(0);
        let n = 20_000u32;
        let len_of = |i: u32| 64 + ((i * 7919) % 1900) as usize;
        let msg = |i: u32| -> Vec<u8> { (0..len_of(i)).map(|k| (k as u32 ^ i) as u8).collect() };
        let h = Hdr {
            kind: K_EAGER,
            ..Hdr::default()
        };
        let stop = std::sync::atomic::AtomicBool::new(false);
        let mut bad = None;
        std::thread::scope(|s| {
            let stop = &stop;
            s.spawn(move || {
                for i in 0..n {
                    let m = msg(i);
                    loop {
                        a.stream_next();
                        if send(&mut a, &h, &m) {
                            break;
                        }
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        std::thread::yield_now();
                    }
                }
            });
            for i in 0..n {
                let (_, got) = loop {
                    match recv(&mut b) {
                        Some(r) => break r,
                        None => std::hint::spin_loop(),
                    }
                };
                if got != msg(i) {
                    bad = Some((i, got.len(), msg(i).len()));
                    stop.store(true, Ordering::Relaxed);
                    break;
                }
            }
        });
        assert_eq!(bad, None, "(record, bytes, bytes sent) that arrived wrong");
        assert!(recv(&mut b).is_none());
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

    /// Fragments in the bulk buffer's first pass, whose pages the two processes touch for
    /// the first time, come marked [`F_COLD`] (their transfers feed no chooser); from the
    /// second pass on they do not.
    #[test]
    fn bulk_first_pass_is_marked_cold() {
        let (mut a, mut b) = pair(1024);
        let p = vec![3u8; 400];
        let mut cold = Vec::new();
        for i in 0..8u64 {
            assert!(send(&mut a, &data(i, 1), &p));
            let (h, got) = recv(&mut b).expect("record");
            assert_eq!(got, p);
            cold.push(h.flags & F_COLD != 0);
        }
        // 400-byte fragments at 0, 400, then (no room for a third before the end) from
        // 1024 on: the first two are in the first pass.
        assert_eq!(cold, [true, true, false, false, false, false, false, false]);
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

    /// A standard eager record travels with the compact header: kind, flags and envelope
    /// arrive as sent, `a`/`b`/`c` as zero, and a message of up to 8 bytes takes one 32-byte
    /// slot (two per cache line). Synchronous eager records, requests-to-send and control
    /// records keep the whole header.
    #[test]
    fn standard_eager_records_take_the_compact_header() {
        let (mut a, mut b) = pair(0);
        let eager = |tag: i32, flags: u8, sreq: u64| Hdr {
            kind: K_EAGER,
            flags,
            ctx: 0x0102_0304,
            src: -7,
            tag,
            b: sreq,
            ..Hdr::default()
        };
        let rts = Hdr {
            kind: crate::pml::hdr::K_RTS,
            ctx: 9,
            src: 1,
            tag: 2,
            a: 1 << 20,
            b: 77,
            c: 0xdead_beef,
            ..Hdr::default()
        };
        let cases: Vec<(Hdr, Vec<u8>)> = vec![
            (eager(1, 0, 5), vec![]),
            (eager(2, 0, 0), vec![1, 2, 3, 4, 5, 6, 7, 8]),
            (eager(3, F_SYNC, 42), vec![9; 8]),
            (rts, vec![]),
            (eager(i32::MAX, 0, 0), (0..100).collect()),
            (eager(4, 0, 0), vec![5; 3]),
        ];
        for (h, p) in &cases {
            assert!(send(&mut a, h, p));
        }
        let mut at = Vec::new();
        for (h, p) in &cases {
            let (gh, gp, n) = b.poll().unwrap().expect("record missing");
            at.push(gp as usize);
            // SAFETY: poll returned n readable bytes valid until release.
            let got = unsafe { std::slice::from_raw_parts(gp, n) }.to_vec();
            b.release();
            let short = h.kind == K_EAGER && h.flags & F_SYNC == 0;
            let (wa, wb, wc) = if short { (0, 0, 0) } else { (h.a, h.b, h.c) };
            assert_eq!(
                (gh.kind, gh.flags, gh.ctx, gh.src, gh.tag, gh.a, gh.b, gh.c),
                (h.kind, h.flags, h.ctx, h.src, h.tag, wa, wb, wc)
            );
            assert_eq!(&got, p);
        }
        // Payload to payload: 32 bytes after an empty or 8-byte standard eager record, a
        // whole-header record rounded up to 64 (frame 8 + 40 + 8).
        assert_eq!(at[1] - at[0], 32);
        assert_eq!(at[2] - at[1], 32 - SHORT_HDR + HDR);
        assert!(b.poll().unwrap().is_none());
    }

    /// Standard eager payloads from ALIGN_MIN (below ALIGN_MAX, above this test ring's
    /// largest record) start on a cache line, whichever half of a line their record starts
    /// in (a 32-byte record in front moves it); they arrive intact with the envelope, and
    /// the records after them too. Payloads too large for the slack keep the plain compact
    /// layout.
    #[test]
    fn large_standard_eager_payloads_start_on_a_line() {
        let (mut a, mut b) = pair(0);
        let max = a.tx.max_record();
        assert!(max < ALIGN_MAX);
        let lens = [
            ALIGN_MIN - 1,
            ALIGN_MIN,
            ALIGN_MIN + 1,
            ALIGN_MIN + 33,
            1500,
        ];
        let lens = lens
            .into_iter()
            .chain(max - SHORT_HDR - ALIGN_SLACK..=max - SHORT_HDR);
        for (i, len) in lens.enumerate() {
            for shift in [false, true] {
                let h = Hdr {
                    kind: K_EAGER,
                    ctx: 3,
                    src: 1,
                    tag: i as i32,
                    ..Hdr::default()
                };
                if shift {
                    assert!(send(&mut a, &h, &[7; 8]));
                }
                let payload: Vec<u8> = (0..len).map(|k| (k * 31 + i) as u8).collect();
                assert!(send(&mut a, &h, &payload));
                assert!(send(&mut a, &h, &[0xee; 3]), "a record after it");
                if shift {
                    assert_eq!(recv(&mut b).unwrap().1, vec![7; 8]);
                }
                let (gh, gp, n) = b.poll().unwrap().expect("record missing");
                let aligned = len >= ALIGN_MIN && len + SHORT_HDR + ALIGN_SLACK <= max;
                assert_eq!(gp as usize % 64 == 0, aligned, "len {len} shift {shift}");
                // SAFETY: poll returned n readable bytes valid until release.
                let got = unsafe { std::slice::from_raw_parts(gp, n) }.to_vec();
                b.release();
                assert_eq!((gh.tag, gh.ctx, gh.src, gh._r), (i as i32, 3, 1, 0));
                assert!(got == payload, "len {len} shift {shift}: payload differs");
                assert_eq!(recv(&mut b).unwrap().1, vec![0xee; 3]);
                assert!(b.poll().unwrap().is_none());
            }
        }
    }

    /// An aligned record whose payload offset lies beyond its slack is an error.
    #[test]
    fn aligned_record_with_a_bad_offset_is_reported() {
        let (mut a, mut b) = pair(0);
        let h = Hdr {
            kind: K_EAGER,
            _r: ALIGN_SLACK as u16 + 8,
            ..Hdr::default()
        };
        let pushed = a.tx.push(SHORT_HDR + 64, |d| {
            // SAFETY: the ring gives SHORT_HDR + 64 writable bytes, 8-byte aligned.
            unsafe { std::ptr::copy_nonoverlapping((&h as *const Hdr).cast::<u8>(), d, SHORT_HDR) }
        });
        assert!(pushed);
        assert!(matches!(b.poll(), Err(LinkError::Pad { pad: 48, len: 80 })));
    }

    /// A record too short for even the compact header is an error.
    #[test]
    fn record_shorter_than_a_header_is_reported() {
        let (mut a, mut b) = pair(0);
        let pushed = a.tx.push(8, |d| {
            // SAFETY: the ring gives 8 writable bytes, 8-byte aligned.
            unsafe { d.cast::<u64>().write(u64::from(K_EAGER)) }
        });
        assert!(pushed);
        assert!(matches!(b.poll(), Err(LinkError::Short(8))));
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

    /// Offset in the bulk buffer of the fragment `l` sent last (`len` bytes).
    fn last_offset(l: &SmLink, len: usize) -> usize {
        let btx = l.bulk_tx.as_ref().expect("bulk buffer");
        ((btx.head - len as u64) % btx.mem.cap as u64) as usize
    }

    /// With a stream area (4096 bytes, hot part 1024), fragments stay in the hot part as
    /// long as the consumer keeps up (a ping-pong: the pages of the stream area are never
    /// touched), and their largest size is half the hot part.
    #[test]
    fn bulk_keeps_to_the_hot_part_while_the_consumer_keeps_up() {
        let (mut a, mut b) = pair_hot(4096, 1024);
        assert_eq!(a.max_data(), 512);
        for i in 0..200u64 {
            let len = 1 + (i as usize * 97) % 512;
            let p: Vec<u8> = (0..len).map(|k| (k as u64 ^ i) as u8).collect();
            assert!(send(&mut a, &data(i, 1), &p), "room for fragment {i}");
            let off = last_offset(&a, len);
            assert!(off + len <= 1024, "fragment {i} at {off}..{}", off + len);
            let (h, got) = recv(&mut b).expect("record");
            assert_eq!((h.a, got), (i, p));
        }
    }

    /// A consumer that lags lets the producer on into the stream area, up to the whole
    /// buffer in flight; once it caught up, the producer goes back to the hot part. The
    /// stream area's first pass is marked [`F_COLD`], its later passes are not.
    #[test]
    fn a_lagging_consumer_lets_the_producer_into_the_stream_area() {
        let (mut a, mut b) = pair_hot(4096, 1024);
        let p = |i: u64| -> Vec<u8> { (0..300).map(|k| ((k as u64 * 7) ^ i) as u8).collect() };
        // Nothing read: 13 fragments of 300 bytes, 3900 of the 4096 bytes, all but the
        // first three past the hot part, all touching their pages for the first time.
        let mut offs = Vec::new();
        while send(&mut a, &data(offs.len() as u64, 1), &p(offs.len() as u64)) {
            offs.push(last_offset(&a, 300));
        }
        assert_eq!(offs, (0..13).map(|k| k * 300).collect::<Vec<_>>());
        for k in 0..13 {
            let (h, got) = recv(&mut b).expect("record");
            assert_eq!((h.a, got, h.flags & F_COLD != 0), (k, p(k), true));
        }
        // Caught up: the next fragments go back to the hot part.
        for k in 0..10 {
            assert!(send(&mut a, &data(k, 2), &p(k)));
            assert!(last_offset(&a, 300) + 300 <= 1024, "fragment {k}");
            let (h, got) = recv(&mut b).expect("record");
            assert_eq!((h.a, got, h.flags & F_COLD), (k, p(k), 0));
        }
        // A stream: the consumer reads one fragment for every four the producer offers.
        let mut queued = std::collections::VecDeque::new();
        let (mut i, mut most, mut deep) = (0u64, 0usize, 0u32);
        for _ in 0..300 {
            for _ in 0..4 {
                if !send(&mut a, &data(i, 3), &p(i)) {
                    break;
                }
                deep += u32::from(last_offset(&a, 300) + 300 > 1024);
                queued.push_back(i);
                i += 1;
            }
            most = most.max(queued.len() * 300);
            let (h, got) = recv(&mut b).expect("record");
            let want = queued.pop_front().unwrap();
            assert_eq!((h.a, got, h.flags & F_COLD), (want, p(want), 0));
        }
        assert!(most >= 3600, "at most {most} bytes in flight");
        assert!(deep > 100, "{deep} fragments in the stream area");
    }

    /// Fragments of every size (up to half the hot part) sent and consumed in random
    /// bursts, so that the producer goes in and out of the stream area at every offset,
    /// arrive intact and in order: no fragment is written over one not yet consumed.
    #[test]
    fn bulk_with_a_stream_area_never_overwrites_unread_fragments() {
        let (mut a, mut b) = pair_hot(4096, 1024);
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut sent = std::collections::VecDeque::new();
        let (mut i, mut received, mut deep) = (0u64, 0u64, 0u32);
        while received < 20_000 {
            for _ in 0..next() % 16 {
                let len = 1 + (next() % 512) as usize;
                let payload: Vec<u8> = (0..len).map(|k| ((k as u64 * 13) ^ i) as u8).collect();
                if !send(&mut a, &data(i, 3), &payload) {
                    break;
                }
                deep += u32::from(last_offset(&a, len) + len > 1024);
                sent.push_back((i, payload));
                i += 1;
            }
            for _ in 0..next() % 16 {
                let Some((h, got)) = recv(&mut b) else {
                    break;
                };
                let (wi, wp) = sent.pop_front().expect("a record nobody sent");
                assert_eq!(h.a, wi, "order");
                assert!(got == wp, "fragment {wi} overwritten");
                received += 1;
            }
        }
        assert!(deep > 1_000, "the stream area was used {deep} times");
    }
}
