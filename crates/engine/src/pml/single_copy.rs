//! Single copy over cross-memory attach (`sm` peers): the receiver's CMA read of a whole
//! message and the cooperative copy (receiver from the front, sender from the back, see
//! [`coop`]).

use super::request::{Req, ReqState};
use super::stats::CopyMech;
use super::State;
use crate::btl::sm::coop::{self, Mech};
use crate::btl::sm::params::SingleCopy;
use crate::btl::BTL;
use crate::pml::hdr::{Hdr, FIN_READ, F_COOP, K_CTS, K_FIN};
use crate::sys;
use crate::ErrorClass;

impl State {
    /// Counts a rendezvous receive of `n` bytes from world rank `p` whose data moved by
    /// `mech`; raises the copy-choice event for the peer's first one and whenever the
    /// mechanism differs from its previous one (one relaxed load unless a tool listens).
    pub(crate) fn copy_chosen(&mut self, p: usize, mech: CopyMech, n: usize) {
        use oxmpi_base::events::{self, Event, Kind};
        let peer = &mut self.peers[p];
        if mech == CopyMech::Pipelined {
            peer.stats.pipelined_recv += 1;
        } else {
            peer.stats.single_copy_recv += 1;
        }
        let previous = std::mem::replace(&mut peer.last_copy, mech);
        if previous != mech && events::wanted(Kind::CopyChoice) {
            events::raise(&Event::CopyChoice {
                peer: p as i32,
                bytes: n as u64,
                mechanism: mech.name(),
                previous: previous.name(),
                transport: peer.link.as_ref().map_or("none", |l| l.name()),
            });
        }
    }

    /// `btl_sm_single_copy_mechanism=cma`: the receiver reads the whole matched message
    /// alone and sends FIN (`true`); `false` if the kernel refused (the caller asks for the
    /// pipelined copy).
    pub(crate) fn pull(
        &mut self,
        rid: u64,
        peer: i32,
        sreq: u64,
        buf: *mut u8,
        addr: u64,
        n: usize,
    ) -> bool {
        match self.cma_read(peer, buf, addr, n) {
            Ok(()) => {
                self.copy_chosen(peer as usize, CopyMech::Cma, n);
                self.finish(rid);
                self.ctrl(peer, K_FIN, FIN_READ, sreq, 0);
                true
            }
            Err(e) => {
                self.cma_failed(peer, &e);
                false
            }
        }
    }

    /// The network's single copy (an RTS with [`crate::pml::hdr::F_RMA`]): `peer`'s link
    /// reads the `n` bytes of the matched message into `buf`, then we send FIN (`true`).
    /// `false` if the link cannot: the caller asks for the pipelined copy. A peer lost
    /// meanwhile fails the request (`true`).
    pub(crate) fn rma_pull(
        &mut self,
        rid: u64,
        peer: i32,
        sreq: u64,
        buf: *mut u8,
        n: usize,
    ) -> bool {
        let p = peer as usize;
        let Some(link) = self.peers[p].link.as_mut() else {
            return false;
        };
        // SAFETY: buf is the matched receive buffer, n <= its length.
        match unsafe { link.read(buf, n, sreq) } {
            Ok(true) => {
                self.copy_chosen(p, CopyMech::Rma, n);
                self.finish(rid);
                self.ctrl(peer, K_FIN, 0, sreq, 0);
                true
            }
            Ok(false) => false,
            Err(e) if e.is_peer_gone() => {
                oxmpi_base::verbose!(BTL, 10, "remote read from rank {peer} failed: {e}");
                self.fail(rid, ErrorClass::ProcFailed);
                self.declare_dead(p);
                true
            }
            Err(e) => {
                oxmpi_base::verbose!(
                    BTL,
                    10,
                    "remote read of {n} B from rank {peer} failed ({e}); pipelined copy instead"
                );
                false
            }
        }
    }

    /// A CMA read from `peer` failed: no more single copies (we stop offering them too).
    pub(crate) fn cma_failed(&mut self, peer: i32, e: &std::io::Error) {
        self.cma = false;
        oxmpi_base::verbose!(
            BTL,
            10,
            "sm: single copy (CMA) from rank {peer} failed ({e}); using copy-in/copy-out \
             from now on"
        );
    }

    /// Receives a matched rendezvous message of `n` bytes by the cooperative single copy
    /// (see [`coop`]): opens a transfer in `peer`'s control area, sends it a cooperative
    /// clear-to-send, copies chunks from the front of the sender's buffer at `addr` while the
    /// sender copies from the back, then waits for the sender's chunks. A message of one
    /// chunk is read alone, with no clear-to-send (the FIN says so, as [`State::pull`]'s). Returns `true` when
    /// request `rid` is settled (complete, FIN sent; or failed because the peer died), `false`
    /// if our CMA read failed: the caller then asks for the pipelined copy of the whole
    /// message (the sender has stopped claiming chunks by then, and what it still writes is
    /// the same data). The copy is measured from `chose_at`, the clock read where `auto`
    /// chose it (the clock is read here when `None`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn coop_recv(
        &mut self,
        peer: i32,
        sreq: u64,
        addr: u64,
        buf: *mut u8,
        n: usize,
        rid: u64,
        chose_at: Option<u64>,
    ) -> bool {
        let p = peer as usize;
        let Some(cm) = self.peers[p].coop_rx else {
            return false;
        };
        let t0 = chose_at.unwrap_or_else(|| self.now_ns());
        let csize = coop::chunk_size(n, self.coop_chunk);
        let chunks = n.div_ceil(csize);
        if chunks == 1 {
            // One chunk (16 KiB at the defaults): we would claim it before the sender saw
            // a clear-to-send, so we read it alone and answer FIN at once. That spares the
            // record, the sender's round of progress for it, and the control lines' trip
            // to the sender (its claim reads them) and back (our next `open`).
            if let Err(e) = self.cma_read(peer, buf, addr, n) {
                self.cma_failed(peer, &e);
                return false;
            }
            self.finish(rid);
            self.ctrl(peer, K_FIN, FIN_READ, sreq, 0);
            oxmpi_base::verbose!(
                BTL,
                60,
                "sm: received {n} B from rank {peer}: single copy by the receiver alone \
                 (one chunk)"
            );
            self.coop_ended(p, n, t0);
            return true;
        }
        let seq = coop::next_seq(self.peers[p].coop_seq);
        self.peers[p].coop_seq = seq;
        cm.open(seq, chunks);
        self.ctrl_hdr(
            peer,
            Hdr {
                kind: K_CTS,
                flags: F_COOP,
                ctx: seq,
                tag: csize as i32,
                a: n as u64,
                b: sreq,
                c: buf as u64,
                ..Hdr::default()
            },
        );
        let mut mine = 0;
        while let Some((k, m)) = cm.claim_front(seq) {
            mine += m;
            let off = k * csize;
            let len = (m * csize).min(n - off);
            if let Err(e) = self.cma_read(peer, buf.wrapping_add(off), addr + off as u64, len) {
                cm.close(seq);
                self.cma_failed(peer, &e);
                return false;
            }
        }
        // The sender finishes every chunk it claimed before it does anything else.
        let theirs = chunks - mine;
        let mut spins = 0u32;
        let failed = loop {
            if let Some((done, failed)) = cm.sender_report(seq) {
                if done >= theirs {
                    break None;
                }
                if failed {
                    // Its failed run is its lowest, right after ours.
                    break Some(theirs - done);
                }
            }
            spins = spins.wrapping_add(1);
            if spins % 128 == 0 {
                std::thread::yield_now();
            }
            if spins % 4096 == 0 && self.peer_exited(p) {
                self.fail(rid, ErrorClass::ProcFailed);
                self.declare_dead(p);
                return true;
            }
            std::hint::spin_loop();
        };
        if let Some(k) = failed {
            let off = mine * csize;
            let len = (k * csize).min(n - off);
            if let Err(e) = self.cma_read(peer, buf.wrapping_add(off), addr + off as u64, len) {
                self.cma_failed(peer, &e);
                return false;
            }
        }
        self.finish(rid);
        self.ctrl(peer, K_FIN, 0, sreq, 0);
        oxmpi_base::verbose!(
            BTL,
            60,
            "sm: received {n} B from rank {peer}: cooperative single copy, {theirs} of \
             {chunks} chunks copied by the sender"
        );
        self.coop_ended(p, n, t0);
        true
    }

    /// A cooperative receive of `n` bytes from world rank `p`, begun at `t0`, ended now:
    /// its measurement goes to the chooser that chose it.
    fn coop_ended(&mut self, p: usize, n: usize, t0: u64) {
        let now = self.now_ns();
        let sends = self.sending_rndv();
        if self.one_way_chosen(n) {
            self.peers[p].ended_one_way(Mech::Coop, n, Some(t0), now, sends);
        } else {
            self.peers[p].measured(p, Mech::Coop, n, (t0, now), sends);
        }
    }

    /// A matched rendezvous receive of `n` bytes that the chooser moved, while we send no
    /// rendezvous message to its sender, was chosen by the peer's
    /// [`OneWay`](crate::btl::sm::one_way::OneWay) (`auto`, sizes measured by the period
    /// and open to the cooperative copy): its end goes there.
    pub(crate) fn one_way_chosen(&self, n: usize) -> bool {
        self.single_copy == SingleCopy::Auto
            && n >= self.coop_min
            && crate::btl::sm::one_way::by_period(n)
    }

    /// The sender's part of a cooperative single copy (a CTS with [`F_COOP`] from `peer`):
    /// claims chunks from the back of the transfer and writes them into the receiver's
    /// buffer, until none is left. The send completes on the receiver's FIN.
    pub(crate) fn coop_send(&mut self, peer: i32, hdr: Hdr) {
        let (seq, csize, sreq, raddr) = (hdr.ctx, hdr.tag as usize, hdr.b, hdr.c);
        let p = peer as usize;
        let Some(cm) = self.peers[p].coop_tx else {
            return;
        };
        let Some(Req {
            state: ReqState::Send { ptr, len, .. },
            ..
        }) = self.reqs.get(sreq)
        else {
            return;
        };
        let (ptr, n) = (*ptr, (hdr.a as usize).min(*len));
        if !self.cma_push || csize == 0 {
            // The receiver copies everything.
            return;
        }
        let pid = self.peers[p].pid;
        while let Some((k, m)) = cm.claim_back(seq) {
            let off = k.saturating_mul(csize);
            if off >= n {
                // Not a chunk of this message (corrupt request): nothing to copy.
                cm.report_done(m);
                continue;
            }
            let len = m.saturating_mul(csize).min(n - off);
            // SAFETY: `[off, off + len)` lies inside the send buffer, valid until the send
            // completes (on the receiver's FIN, which comes after this chunk is reported).
            // The kernel only reads `local` for a write.
            let r = unsafe {
                sys::cma_copy(
                    pid,
                    ptr.add(off).cast_mut(),
                    raddr + off as u64,
                    len,
                    sys::Cma::Write,
                )
            };
            match r {
                Ok(()) => cm.report_done(m),
                Err(e) => {
                    cm.report_failed();
                    // Refused by the kernel: no more writes (a vanished peer is not that).
                    let refused = matches!(
                        e.raw_os_error(),
                        Some(libc::EPERM | libc::EACCES | libc::ENOSYS)
                    );
                    self.cma_push &= !refused;
                    oxmpi_base::verbose!(
                        BTL,
                        10,
                        "sm: single-copy write (CMA) to rank {peer} failed ({e}); {}",
                        if refused {
                            "the receivers copy alone from now on"
                        } else {
                            "the receiver copies the rest"
                        }
                    );
                    return;
                }
            }
        }
    }

    /// Reads `n` bytes at `addr` of `peer`'s memory into `buf` (CMA).
    pub(crate) fn cma_read(
        &self,
        peer: i32,
        buf: *mut u8,
        addr: u64,
        n: usize,
    ) -> std::io::Result<()> {
        // SAFETY: buf has n writable bytes (the receive buffer or a part of it).
        unsafe { sys::cma_copy(self.peers[peer as usize].pid, buf, addr, n, sys::Cma::Read) }
    }
}
