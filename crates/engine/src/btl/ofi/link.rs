//! The `ofi` links: one [`Net`] per rank (its [`Fabric`], the receive windows of every
//! peer, the pool of send buffers) shared by the per-peer [`OfiLink`]s.
//!
//! The engine's records (40-byte [`Hdr`] and payload) travel as tagged messages. The tag
//! names the sending rank and the record's sequence number on that pair
//! ([`tag`]), so the receiver posts, for each peer, receives for exactly the next
//! `btl_ofi_recv_depth` sequence numbers: records come out per peer and in order whatever
//! order the provider completes them in, with no matching of our own. Sends are copied into
//! a send buffer, which the send's completion frees; completions of every peer arrive on
//! the one completion queue, which every link's `ready`/`poll` reads (the progress of
//! providers with manual progress). A failed completion (`fi_cq_readerr`) is reported, with
//! the provider's message, by the link of the peer it concerns.
//!
//! Keepalive: a provider may report nothing to a rank that only has receives posted to a
//! dead peer (`tcp;ofi_rxm` notices the closed connection only when it sends). So while the
//! engine polls, a peer we have exchanged records with but not heard from (no record, no
//! send completion) for `btl_ofi_keepalive` seconds gets a ping: a record without payload
//! that its link consumes. A dead peer fails the ping (connection reset or refused), which
//! fails the operations waiting for it with `MPI_ERR_PROC_FAILED`; so does a provider that
//! refuses [`REFUSALS_LOST`] pings in a row (`tcp;ofi_rxm` cannot reconnect to a dead
//! peer and says `FI_EAGAIN` for ever). A peer whose host vanishes without a reset is the
//! runtime's to notice (`plm_link_timeout`). A peer the provider never reaches at all
//! fails after `btl_ofi_connect_timeout` (`connect.rs`).

mod flight;
pub(crate) mod mtl;
pub(crate) mod osc;
mod rails;

use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::connect::{describe, Reach};
use super::fabric::{Fabric, Mr};
use super::fi;
use super::mrcache::{self, EntryId, MrCache};
use crate::btl::{Caps, Link, LinkError, BTL};
use crate::mtl::ofi::completion::Cq;
use crate::pml::hdr::{Hdr, F_RMA, HDR, K_CTS, K_FIN, K_NACK, K_RTS};

/// Bits of the sequence number in a tag; the sender's rank sits above them.
const SEQ_BITS: u32 = 32;
/// Largest rank a tag can name (the top four bits stay clear for future use).
pub(crate) const MAX_RANKS: usize = 1 << 28;

/// The bit every record's tag carries: one of the two the matching offload's layout keeps
/// zero (`crate::mtl::ofi::tag`), so records and `pml cm`'s messages on the same
/// endpoint never match each other's receives.
pub(crate) const BTL_TAG: u64 = 1 << 60;

/// The tag of record `seq` sent by `rank`.
pub(crate) fn tag(rank: usize, seq: u32) -> u64 {
    BTL_TAG | ((rank as u64) << SEQ_BITS) | u64::from(seq)
}

/// The kind of the goodbye record a link sends when its process finalizes (never passed
/// to the protocol, whose kinds are small numbers).
const K_BYE: u8 = 0xb0;

/// The kind of a keepalive ping (consumed by the receiving link, like [`K_BYE`]).
const K_PING: u8 = 0xb1;

/// Keepalive pings refused in a row (one per keepalive period) that make a peer lost.
const REFUSALS_LOST: u32 = 3;

/// Completions read per call.
const CQ_BATCH: usize = 16;

/// Largest record sent with `fi_tinject` (from a stack buffer), whatever larger inject
/// size a provider offers.
const INJECT_MAX: usize = 256;

/// What an operation's context says about it: the provider's scratch space first (as the
/// `FI_CONTEXT`/`FI_CONTEXT2` modes require), then whose operation it is.
#[repr(C)]
#[derive(Debug, Default)]
struct Op {
    ctx: fi::fi_context2,
    /// [`RECV`], [`SEND`] or [`PING`].
    kind: u8,
    /// The peer's world rank.
    peer: u32,
    /// Receive window slot or send buffer index.
    idx: u32,
}

/// [`Op::kind`] of a posted receive.
const RECV: u8 = 0;
/// [`Op::kind`] of a send.
const SEND: u8 = 1;
/// [`Op::kind`] of a keepalive ping's send.
const PING: u8 = 2;
/// [`Op::kind`] of a remote read.
const READ: u8 = 3;

/// Bytes the link appends to an RTS with [`F_RMA`]: the registration's key and the
/// address to read at (virtual, or the offset 0 into the registration).
const RMA_TRAILER: usize = 16;

/// A receive buffer (or a send buffer) and its operation context; boxed, so the context
/// and the buffer keep their addresses while the provider holds them.
#[repr(C)]
#[derive(Debug)]
struct Slot {
    /// First: the context pointer is the slot's address.
    op: Op,
    buf: Vec<u8>,
    desc: *mut c_void,
    /// A receive: the received length once completed. A send: in flight.
    done: Option<usize>,
}

/// What we know of one peer.
#[derive(Debug)]
struct Peer {
    addr: fi::FiAddr,
    /// The next sequence number we deliver from it (its slot: `seq % depth`).
    recv_seq: u32,
    /// The next sequence number we send to it.
    send_seq: u32,
    /// Boxed: the provider holds their addresses.
    #[allow(clippy::vec_box)]
    slots: Vec<Box<Slot>>,
    /// Sends not completed yet.
    inflight: usize,
    /// The record at `recv_seq` was handed out and not released.
    held: bool,
    /// A failed operation: whether the peer is gone, and the message.
    err: Option<(bool, String)>,
    /// A send to it completed since [`Net::ready`] last looked.
    sent: bool,
    /// Its link finished closing.
    closed: bool,
    /// Our goodbye was accepted by the provider.
    bye_sent: bool,
    /// The peer's goodbye arrived.
    bye_got: bool,
    /// When a record from it arrived or a send to it completed last.
    heard: Instant,
    /// A record went either way (the provider may have connected): keepalives may go.
    talked: bool,
    /// A keepalive ping to it is in flight.
    ping_out: bool,
    /// Keepalive pings the provider refused in a row.
    refused: u32,
    /// The key and remote address of each buffer it offered for a read, by its request.
    offers: HashMap<u64, (u64, u64)>,
    /// Whether the provider connected to it (`btl_ofi_connect_timeout`).
    reach: Reach,
    /// Its address on each rail both of us opened ([`rails`]).
    rails: Vec<fi::FiAddr>,
}

/// When peers are pinged and when they count as failed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Liveness {
    /// How long a peer we talked with may stay silent before it is pinged; `None`: never.
    pub keepalive: Option<Duration>,
    /// How long a ping may stay without completion before its peer failed; `None`: ever.
    pub link_timeout: Option<Duration>,
    /// How long sends to a peer never reached may wait before it failed.
    pub connect: Duration,
}

/// One rank's endpoint and the state of every peer it reaches, shared by the links.
#[derive(Debug)]
pub(crate) struct Net {
    fab: Fabric,
    me: usize,
    max_payload: usize,
    depth: usize,
    peers: Vec<Option<Peer>>,
    /// Boxed: the provider holds their addresses while the vector grows.
    #[allow(clippy::vec_box)]
    sends: Vec<Box<Slot>>,
    free: Vec<usize>,
    max_sends: usize,
    /// An error of the completion queue itself, for every link.
    fatal: Option<String>,
    /// Every link finished closing and the fabric is closed: nothing may touch it.
    closed: bool,
    /// How long a peer we talked with may stay silent before it is pinged; `None`: never.
    keepalive: Option<Duration>,
    /// How long a ping may stay without completion before its peer failed; `None`: ever.
    link_timeout: Option<Duration>,
    /// How long sends to a peer never reached may wait before it failed.
    connect: Duration,
    /// Records sent with `fi_tinject` and with `fi_tsend`, rendezvous read with
    /// `fi_read`, for verbose output at close.
    injected: u64,
    sent: u64,
    reads: u64,
    /// Our buffers offered for a read, by (peer, our request), until its CTS or FIN: their
    /// entries in [`Net::mrs`].
    offered: HashMap<(usize, u64), EntryId>,
    /// The registrations of user memory (offered buffers, and read targets where the
    /// provider wants local buffers registered).
    mrs: MrCache<Mr>,
    /// One-sided operations in flight and exposed window memory ([`osc::Osc`]).
    osc: osc::Ops,
    /// The matching offload's operations in flight ([`mtl::Mtl`]).
    mtl: mtl::Ops,
    /// The context of the one read in flight ([`Net::read`] waits for it).
    read_op: Box<Op>,
    /// The read's completion: `Some(None)` done, `Some(Some(message))` failed.
    read_done: Option<Option<String>>,
    /// Rendezvous reads striped over more endpoints ([`rails`]).
    rails: rails::Rails,
}

// SAFETY: the raw pointers are libfabric objects and buffers owned by this value; every
// access goes through the `Mutex` around it (the domain is opened `FI_THREAD_DOMAIN`).
unsafe impl Send for Net {}

/// The offload flight of an operation context, if it is one ([`mtl::MTL`]).
fn mtl_op(ctx: *mut c_void) -> Option<usize> {
    if ctx.is_null() {
        return None;
    }
    // SAFETY: every context we pass is the address of a live boxed value starting with
    // an `Op`.
    let op = unsafe { &*ctx.cast::<Op>() };
    (op.kind == mtl::MTL).then_some(op.idx as usize)
}

/// Whether a completion error means the peer is gone rather than a fault of ours.
pub(crate) fn peer_gone(err: i32) -> bool {
    [
        libc::ECONNRESET,
        libc::ECONNREFUSED,
        libc::ECONNABORTED,
        libc::EHOSTUNREACH,
        libc::ENETUNREACH,
        libc::ETIMEDOUT,
        libc::EPIPE,
        libc::ENOTCONN,
        libc::EIO,
        libc::ESHUTDOWN,
    ]
    .contains(&err.abs())
}

impl Net {
    /// A network over `fab` for rank `me` of `size`, records of up to `max_payload` bytes,
    /// `depth` receives posted per peer, `max_sends` sends in flight, silent peers pinged
    /// and failed as `liveness` says.
    pub(crate) fn new(
        fab: Fabric,
        me: usize,
        size: usize,
        max_payload: usize,
        depth: usize,
        max_sends: usize,
        liveness: Liveness,
    ) -> Net {
        let max_payload = max_payload.min(fab.max_msg.saturating_sub(HDR)).max(1);
        let keep = mrcache::keep_for(&fab.prov);
        Net {
            fab,
            me,
            max_payload,
            depth,
            peers: (0..size).map(|_| None).collect(),
            sends: Vec::new(),
            free: Vec::new(),
            max_sends,
            fatal: None,
            closed: false,
            keepalive: liveness.keepalive,
            link_timeout: liveness.link_timeout,
            connect: liveness.connect,
            injected: 0,
            sent: 0,
            reads: 0,
            offered: HashMap::new(),
            mrs: MrCache::new(keep),
            osc: osc::Ops::default(),
            mtl: mtl::Ops::default(),
            read_op: Box::new(Op {
                kind: READ,
                ..Op::default()
            }),
            read_done: None,
            rails: rails::Rails::default(),
        }
    }

    /// The provider's name.
    pub(crate) fn provider(&self) -> &str {
        &self.fab.prov
    }

    /// The endpoint's properties that matter on a real network, for verbose output.
    pub(crate) fn describe(&self) -> String {
        format!(
            "{}{}, mr_local {}, inject {} B, {} progress, max payload {} B, {} unused \
             registrations cached, domain {} fabric {}{}",
            if self.fab.tagged {
                "tagged messages"
            } else {
                "plain messages (FI_MSG, directed receives)"
            },
            if self.fab.rma { ", FI_RMA reads" } else { "" },
            self.fab.mr_local,
            self.fab.inject,
            if self.fab.manual_progress {
                "manual"
            } else {
                "auto"
            },
            self.max_payload,
            self.mrs.keep(),
            self.fab.offer.domain,
            self.fab.offer.fabric,
            self.fab.iface.as_ref().map_or(String::new(), |i| format!(
                " (interface {} {}/{}: btl_tcp_if_include/exclude)",
                i.name, i.addr, i.prefix
            ))
        )
    }

    /// Our endpoint's address.
    pub(crate) fn name(&self) -> Result<Vec<u8>, String> {
        self.fab.name()
    }

    /// The addresses of the rails' endpoints ([`rails`]), in order.
    pub(crate) fn rail_names(&self) -> Result<Vec<Vec<u8>>, String> {
        (1..=self.fab.rails())
            .map(|i| self.fab.name_on(i))
            .collect()
    }

    /// A slot with a buffer for one record, registered if the provider needs it.
    fn slot(&mut self, kind: u8, peer: usize, idx: usize) -> Result<Box<Slot>, String> {
        let mut s = Box::new(Slot {
            op: Op {
                kind,
                peer: peer as u32,
                idx: idx as u32,
                ..Op::default()
            },
            buf: vec![0; HDR + self.max_payload],
            desc: std::ptr::null_mut(),
            done: None,
        });
        if self.fab.mr_local {
            // SAFETY: the buffer is heap memory owned by the slot, which lives in `self`
            // (never shrunk) as long as the fabric.
            s.desc = unsafe { self.fab.register(s.buf.as_ptr(), s.buf.len())? };
        }
        Ok(s)
    }

    /// Adds peer `p` at address `addr` (and `rails`, its rails' addresses: those of the
    /// rails we opened too are used) and posts its receive window.
    pub(crate) fn add_peer(
        &mut self,
        p: usize,
        addr: &[u8],
        rails: &[Vec<u8>],
    ) -> Result<(), String> {
        let fa = self.fab.insert(addr)?;
        let mut on_rails = Vec::new();
        for (i, a) in rails.iter().enumerate().take(self.fab.rails()) {
            on_rails.push(self.fab.insert_on(i + 1, a)?);
        }
        self.set_mtl_addr(p, fa);
        let mut slots = Vec::with_capacity(self.depth);
        for i in 0..self.depth {
            slots.push(self.slot(RECV, p, i)?);
        }
        self.peers[p] = Some(Peer {
            addr: fa,
            recv_seq: 0,
            send_seq: 0,
            slots,
            inflight: 0,
            held: false,
            err: None,
            sent: false,
            closed: false,
            bye_sent: false,
            bye_got: false,
            heard: Instant::now(),
            talked: false,
            ping_out: false,
            refused: 0,
            offers: HashMap::new(),
            reach: Reach::new(describe(addr)),
            rails: on_rails,
        });
        for seq in 0..self.depth as u32 {
            self.post(p, seq)?;
        }
        Ok(())
    }

    /// Posts the receive of record `seq` from `p` into its window slot.
    fn post(&mut self, p: usize, seq: u32) -> Result<(), String> {
        let depth = self.depth;
        if self.closed {
            return Ok(());
        }
        for _ in 0..1_000_000 {
            let Some(peer) = self.peers[p].as_mut() else {
                return Ok(());
            };
            let src = peer.addr;
            let s = &mut peer.slots[seq as usize % depth];
            s.done = None;
            let ctx = std::ptr::addr_of_mut!(**s).cast::<c_void>();
            // SAFETY: the slot (buffer and context) is boxed in `self` and outlives the
            // endpoint (closed first on drop). Without tags, receives directed at `p` and
            // posted in sequence order take its records in the order sent.
            let ret = unsafe {
                self.fab.trecv(
                    s.buf.as_mut_ptr(),
                    s.buf.len(),
                    s.desc,
                    src,
                    tag(p, seq),
                    ctx,
                )
            };
            if ret != -fi::FI_EAGAIN {
                if ret < 0 {
                    return Err(format!("fi_trecv: {}", self.fab.error(ret)));
                }
                return Ok(());
            }
            self.progress();
        }
        Err("fi_trecv: the provider stays busy".into())
    }

    /// Reads the completion queue once and applies what it finds.
    fn progress(&mut self) {
        if self.closed {
            return;
        }
        if self.rails_active() {
            self.poll_rails();
        }
        let mut es = [fi::fi_cq_tagged_entry {
            op_context: std::ptr::null_mut(),
            flags: 0,
            len: 0,
            buf: std::ptr::null_mut(),
            data: 0,
            tag: 0,
        }; CQ_BATCH];
        let n = self.fab.read(&mut es);
        if n == -fi::FI_EAVAIL {
            if let Some((e, msg)) = self.fab.read_error() {
                if let Some(idx) = mtl_op(e.op_context) {
                    let cq = Cq::Err {
                        errno: e.err.abs(),
                        tag: e.tag,
                        len: e.len,
                        olen: e.olen,
                    };
                    self.mtl_done(idx, cq);
                    return;
                }
                self.complete(e.op_context, None, Some((peer_gone(e.err), msg)));
            }
            return;
        }
        if n < 0 {
            self.fatal
                .get_or_insert_with(|| format!("fi_cq_read: {}", self.fab.error(n)));
            return;
        }
        for e in &es[..n as usize] {
            if let Some(idx) = mtl_op(e.op_context) {
                let len = self.mtl_len(e);
                self.mtl_done(idx, Cq::Ok { tag: e.tag, len });
                continue;
            }
            self.complete(e.op_context, Some(e.len), None);
        }
    }

    /// Applies the completion of the operation whose context is `ctx`: `len` bytes on
    /// success, or `err` (peer gone, message).
    fn complete(&mut self, ctx: *mut c_void, len: Option<usize>, err: Option<(bool, String)>) {
        if ctx.is_null() {
            if let Some((_, m)) = err {
                self.fatal.get_or_insert(m);
            }
            return;
        }
        // SAFETY: every context we pass is the address of a live boxed Slot (Op first).
        let op = unsafe { &*ctx.cast::<Op>() };
        let (kind, p, idx) = (op.kind, op.peer as usize, op.idx as usize);
        if kind == READ {
            if let Some((true, m)) = &err {
                if let Some(q) = self.peers.get_mut(p).and_then(Option::as_mut) {
                    q.err.get_or_insert((true, m.clone()));
                }
            }
            self.read_done = Some(err.map(|e| e.1));
            return;
        }
        if kind == osc::OSC {
            self.osc_done(idx, err);
            return;
        }
        if kind != RECV {
            self.sends[idx].done = None;
            self.free.push(idx);
        }
        let Some(peer) = self.peers.get_mut(p).and_then(Option::as_mut) else {
            return;
        };
        if kind != RECV {
            peer.inflight = peer.inflight.saturating_sub(1);
            peer.sent = true;
            peer.ping_out &= kind != PING;
        } else if err.is_none() {
            peer.slots[idx].done = len;
        }
        if err.is_none() {
            peer.heard = Instant::now();
            peer.talked = true;
            peer.refused = 0;
            peer.reach.heard();
        }
        if let Some(e) = err {
            peer.err.get_or_insert(e);
        }
    }

    /// Whether `p`'s next record (or an error) is there, after reading the queue if not;
    /// also while sends to `p` are in flight (as a tcp link with bytes to write is ready),
    /// so the engine's progress keeps polling and completes the sends waiting for them.
    fn ready(&mut self, p: usize) -> bool {
        let has = |n: &Net| {
            n.fatal.is_some()
                || n.peers[p].as_ref().is_none_or(|q| {
                    q.err.is_some() || q.slots[q.recv_seq as usize % n.depth].done.is_some()
                })
        };
        if has(self) {
            return true;
        }
        // Sends in flight, or completed since the last look (by any link's read of the
        // shared queue): the engine must pass by and complete the requests waiting for them.
        self.progress();
        self.keep_alive(p);
        self.check_reach(p);
        has(self)
            || self.peers[p]
                .as_mut()
                .is_some_and(|q| q.inflight > 0 || std::mem::take(&mut q.sent))
    }

    /// `p`'s next record, in order (again if not released).
    fn poll(&mut self, p: usize) -> Result<Option<(Hdr, *const u8, usize)>, LinkError> {
        self.ready(p);
        let depth = self.depth;
        loop {
            let Some(peer) = self.peers[p].as_mut() else {
                return Ok(None);
            };
            let s = &peer.slots[peer.recv_seq as usize % depth];
            let Some(len) = s.done else {
                break;
            };
            if len < HDR {
                return Err(LinkError::Short(len));
            }
            // SAFETY: the buffer holds len >= HDR received bytes; Hdr is plain data.
            let hdr = unsafe { s.buf.as_ptr().cast::<Hdr>().read_unaligned() };
            peer.held = true;
            if hdr.kind == K_RTS && hdr.flags & F_RMA != 0 {
                // The sender's key and address, ours to keep: the protocol sees a plain RTS.
                if len != HDR + RMA_TRAILER {
                    return Err(LinkError::Short(len));
                }
                let mut t = [0u8; RMA_TRAILER];
                t.copy_from_slice(&s.buf[HDR..HDR + RMA_TRAILER]);
                let key = u64::from_ne_bytes(t[..8].try_into().expect("8 bytes"));
                let raddr = u64::from_ne_bytes(t[8..].try_into().expect("8 bytes"));
                peer.offers.insert(hdr.b, (key, raddr));
                return Ok(Some((hdr, std::ptr::null(), 0)));
            }
            if hdr.kind == K_CTS || hdr.kind == K_FIN || hdr.kind == K_NACK {
                // The receiver took (or declined, or refused) our offer: the registration
                // can go.
                if let Some(e) = self.offered.remove(&(p, hdr.b)) {
                    for mr in self.mrs.release(e) {
                        self.fab.deregister(mr);
                    }
                }
            }
            if hdr.kind == K_BYE || hdr.kind == K_PING {
                // The last record the peer sends, or a keepalive: ours to keep, not the
                // protocol's.
                peer.bye_got |= hdr.kind == K_BYE;
                self.release(p);
                continue;
            }
            // SAFETY: HDR <= len <= buf.len().
            return Ok(Some((hdr, unsafe { s.buf.as_ptr().add(HDR) }, len - HDR)));
        }
        let Some(peer) = self.peers[p].as_mut() else {
            return Ok(None);
        };
        if let Some((gone, msg)) = peer.err.take() {
            return Err(if gone {
                LinkError::PeerLost(msg)
            } else {
                LinkError::Fabric(msg)
            });
        }
        match &self.fatal {
            Some(m) => Err(LinkError::Fabric(m.clone())),
            None => Ok(None),
        }
    }

    /// Frees `p`'s record handed out last and posts the receive that reuses its slot.
    fn release(&mut self, p: usize) {
        let depth = self.depth as u32;
        let Some(peer) = self.peers[p].as_mut() else {
            return;
        };
        if !std::mem::take(&mut peer.held) {
            return;
        }
        let seq = peer.recv_seq;
        peer.recv_seq = seq.wrapping_add(1);
        if let Err(e) = self.post(p, seq.wrapping_add(depth)) {
            if let Some(peer) = self.peers[p].as_mut() {
                peer.err.get_or_insert((false, e));
            }
        }
    }

    /// `p`'s link finished closing; once every link has, closes the fabric (so that, e.g.,
    /// the `shm` provider removes its file before the process exits: the engine lives on).
    fn finish(&mut self, p: usize) {
        if let Some(q) = self.peers[p].as_mut() {
            q.closed = true;
        }
        self.maybe_close();
    }

    /// Closes the fabric once every link has finished closing and the matching offload
    /// (`pml cm`) is done with it.
    fn maybe_close(&mut self) {
        if !self.mtl.open && !self.closed && self.peers.iter().flatten().all(|q| q.closed) {
            let c = self.mrs.stats();
            oxmpi_base::verbose!(
                BTL,
                20,
                "ofi: rank {}: {} records injected (fi_tinject, up to {} B), {} sent with a \
                 completion, {} rendezvous read (fi_read, {} striped over {} rails); user \
                 memory registrations: {} cache hits, {} registered, {} evicted, {} \
                 invalidated",
                self.me,
                self.injected,
                self.fab.inject.min(INJECT_MAX),
                self.sent,
                self.reads,
                self.rails.striped,
                self.fab.rails(),
                c.hits,
                c.misses,
                c.evictions,
                c.invalidations
            );
            self.offered.clear();
            for mr in self.mrs.drain() {
                self.fab.deregister(mr);
            }
            self.osc_close();
            self.fab.close();
            self.closed = true;
        }
    }

    /// A registration of user memory covering `len` bytes at `buf` (its whole pages, to
    /// be read by peers and read into), from the cache or new; give it back with
    /// [`Net::release_user`].
    fn register_user(&mut self, buf: usize, len: usize) -> Result<EntryId, String> {
        let (start, end) = mrcache::pages(buf, len);
        let fab = &mut self.fab;
        self.mrs
            .acquire(start, end - start, mrcache::USER_ACCESS, |s, l, a| {
                // SAFETY: the pages hold a buffer valid for the transfer that asks; a
                // provider reaches registered memory only for transfers of buffers inside
                // it, valid while they run. Kept beyond them only where the provider
                // does not pin pages (a registration names addresses, read as mapped
                // then) or the user promised not to remap (btl_ofi_mr_cache_pinned).
                unsafe { fab.register_user(s as *const u8, l, a) }
            })
    }

    /// Ends one transfer's use of a registration of [`Net::register_user`]; closes what
    /// the cache lets go.
    fn release_user(&mut self, e: EntryId) {
        for mr in self.mrs.release(e) {
            self.fab.deregister(mr);
        }
    }

    /// Sends an RTS that offers its buffer (`hdr.a` bytes at `hdr.c`) for a read: takes a
    /// registration (until the receiver's CTS or FIN) and appends the key and address;
    /// without the offer if the registration fails.
    fn send_rts(&mut self, p: usize, hdr: &Hdr) -> bool {
        let id = (p, hdr.b);
        if !self.offered.contains_key(&id) {
            // The sender's buffer stays valid until its request completes, which takes the
            // receiver's CTS or FIN (when the registration is released) or its failure
            // (then it stays in use until the fabric closes).
            match self.register_user(hdr.c as usize, hdr.a as usize) {
                Ok(e) => {
                    self.offered.insert(id, e);
                }
                Err(e) => {
                    oxmpi_base::verbose!(
                        BTL,
                        10,
                        "ofi: rank {}: {} B for rank {p} not offered for a read ({e})",
                        self.me,
                        hdr.a
                    );
                    let plain = Hdr {
                        flags: hdr.flags & !F_RMA,
                        ..*hdr
                    };
                    return self.try_send(p, &plain, &[]);
                }
            }
        }
        let Some((mr, start)) = self.mrs.get(self.offered[&id]) else {
            return true;
        };
        let key = mr.key;
        // Without FI_MR_VIRT_ADDR, remote addresses are offsets into the registration.
        let raddr = if self.fab.mr_virt {
            hdr.c
        } else {
            hdr.c - start as u64
        };
        let mut t = [0u8; RMA_TRAILER];
        t[..8].copy_from_slice(&key.to_ne_bytes());
        t[8..].copy_from_slice(&raddr.to_ne_bytes());
        self.try_send(p, hdr, &t)
    }

    /// Reads the first `n` bytes of what `p` offered with its request `sreq` into `buf`
    /// (in pieces of the provider's largest message), progressing until they are there.
    ///
    /// # Safety
    /// `buf` must be valid for writes of `n` bytes.
    unsafe fn read(
        &mut self,
        p: usize,
        buf: *mut u8,
        n: usize,
        sreq: u64,
    ) -> Result<bool, LinkError> {
        if !self.fab.rma || self.closed {
            return Ok(false);
        }
        let Some(peer) = self.peers[p].as_mut() else {
            return Ok(false);
        };
        let Some((key, raddr)) = peer.offers.remove(&sreq) else {
            return Ok(false);
        };
        let src = peer.addr;
        // buf stays valid (the caller's promise) until we release it below.
        let local = if self.fab.mr_local {
            Some(
                self.register_user(buf as usize, n)
                    .map_err(LinkError::Fabric)?,
            )
        } else {
            None
        };
        let desc = local
            .and_then(|e| self.mrs.get(e))
            .map_or(std::ptr::null_mut(), |(m, _)| m.desc);
        // SAFETY: buf has n writable bytes (the caller's promise).
        let res = unsafe { self.read_striped(p, buf, n, desc, src, raddr, key) };
        if let Some(e) = local {
            self.release_user(e);
        }
        if res.is_ok() {
            self.reads += 1;
        }
        res.map(|()| true)
    }

    /// [`Net::read`]'s transfer: one `fi_read` at a time, each waited for.
    #[allow(clippy::too_many_arguments)]
    fn read_pieces(
        &mut self,
        p: usize,
        buf: *mut u8,
        n: usize,
        desc: *mut c_void,
        src: fi::FiAddr,
        raddr: u64,
        key: u64,
    ) -> Result<(), LinkError> {
        let piece = self.fab.max_msg.max(1);
        let mut off = 0;
        while off < n {
            let len = piece.min(n - off);
            self.read_done = None;
            self.read_op.peer = p as u32;
            let ctx = std::ptr::addr_of_mut!(*self.read_op).cast::<c_void>();
            // SAFETY: buf + off has len writable bytes (the caller's promise); the context
            // is boxed in self; we wait for the completion below.
            unsafe {
                self.post_read(
                    p,
                    0,
                    buf.wrapping_add(off),
                    len,
                    desc,
                    src,
                    raddr + off as u64,
                    key,
                    ctx,
                )
            }?;
            loop {
                match self.read_done.take() {
                    Some(None) => break,
                    Some(Some(m)) => {
                        return Err(match self.peers[p].as_mut().and_then(|q| q.err.take()) {
                            Some((true, m)) => LinkError::PeerLost(m),
                            _ => LinkError::Fabric(format!("fi_read from rank {p}: {m}")),
                        })
                    }
                    None => self.wait_step(p)?,
                }
            }
            off += len;
        }
        Ok(())
    }

    /// Posts a read of `len` bytes into `buf` from `p`'s memory (at `src` in endpoint
    /// `rail`'s vector: 0 the main one), waiting while the provider is busy.
    ///
    /// # Safety
    /// `buf` (with `desc`) and `ctx` must stay valid until the read's completion.
    #[allow(clippy::too_many_arguments)]
    unsafe fn post_read(
        &mut self,
        p: usize,
        rail: usize,
        buf: *mut u8,
        len: usize,
        desc: *mut c_void,
        src: fi::FiAddr,
        raddr: u64,
        key: u64,
        ctx: *mut c_void,
    ) -> Result<(), LinkError> {
        loop {
            // SAFETY: the caller's promise.
            let ret = unsafe {
                self.fab
                    .rma_read_on(rail, buf, len, desc, src, raddr, key, ctx)
            };
            if ret == 0 {
                return Ok(());
            }
            if ret != -fi::FI_EAGAIN {
                let on = if rail > 0 {
                    format!(" (rail {rail})")
                } else {
                    String::new()
                };
                return Err(LinkError::Fabric(format!(
                    "fi_read from rank {p}{on}: {}",
                    self.fab.error(ret)
                )));
            }
            self.wait_step(p)?;
        }
    }

    /// One step of waiting for a read from `p`: progress, keepalive, and the peer's
    /// failure as an error.
    fn wait_step(&mut self, p: usize) -> Result<(), LinkError> {
        self.progress();
        self.keep_alive(p);
        match self.peers[p].as_mut() {
            Some(q) if q.err.as_ref().is_some_and(|e| e.0) => {
                Err(LinkError::PeerLost(q.err.take().expect("checked").1))
            }
            None => Err(LinkError::PeerLost(format!("rank {p} is gone"))),
            _ => match &self.fatal {
                Some(m) => Err(LinkError::Fabric(m.clone())),
                None => Ok(()),
            },
        }
    }

    /// Sends a record of at most [`INJECT_MAX`] bytes with `fi_tinject`: `Some(true)` if
    /// the provider took it (or the peer failed: the next poll reports it), `None` if it
    /// is busy.
    fn inject(&mut self, p: usize, hdr: &Hdr, payload: &[u8]) -> Option<bool> {
        let mut buf = [0u8; INJECT_MAX];
        // SAFETY: Hdr is repr(C) plain data of HDR bytes.
        let hb = unsafe { std::slice::from_raw_parts((hdr as *const Hdr).cast::<u8>(), HDR) };
        let len = HDR + payload.len();
        buf[..HDR].copy_from_slice(hb);
        buf[HDR..len].copy_from_slice(payload);
        let peer = self.peers[p].as_mut()?;
        // SAFETY: buf holds len bytes during the call; inject keeps no reference.
        let ret = unsafe {
            self.fab
                .tinject(buf.as_ptr(), len, peer.addr, tag(self.me, peer.send_seq))
        };
        if ret == -fi::FI_EAGAIN {
            return None;
        }
        if ret < 0 {
            let msg = format!("fi_tinject to rank {p}: {}", self.fab.error(ret));
            peer.err.get_or_insert((peer_gone(ret as i32), msg));
            return Some(true);
        }
        peer.send_seq = peer.send_seq.wrapping_add(1);
        peer.talked = true;
        peer.reach.heard();
        self.injected += 1;
        Some(true)
    }

    /// Pings `p` if it is due: keepalives are on, we talked with `p` and have not heard
    /// from it for the keepalive time, no ping is in flight, and neither side said goodbye.
    fn keep_alive(&mut self, p: usize) {
        let Some(every) = self.keepalive else {
            return;
        };
        if let (Some(limit), Some(q)) = (self.link_timeout, self.peers[p].as_mut()) {
            if q.ping_out && q.err.is_none() && q.heard.elapsed() >= limit {
                q.err = Some((
                    true,
                    format!(
                        "rank {p} unreachable: a keepalive ping stayed unanswered for {} s \
                         (btl_ofi_link_timeout)",
                        limit.as_secs()
                    ),
                ));
                return;
            }
        }
        let due = self.peers[p].as_ref().is_some_and(|q| {
            q.talked
                && !q.ping_out
                && !q.bye_sent
                && !q.bye_got
                && q.err.is_none()
                && q.heard.elapsed() >= every
        });
        if !due {
            return;
        }
        let ping = Hdr {
            kind: K_PING,
            ..Hdr::default()
        };
        let sent = self.send_op(p, &ping, &[], PING);
        let Some(q) = self.peers[p].as_mut() else {
            return;
        };
        q.heard = Instant::now();
        if sent {
            q.ping_out = true;
            q.refused = 0;
            oxmpi_base::verbose!(BTL, 30, "ofi: rank {}: keepalive ping to rank {p}", self.me);
            return;
        }
        // The provider takes no send to a peer it talked with: its connection broke and
        // reconnecting fails (tcp;ofi_rxm returns FI_EAGAIN for ever once the peer's
        // listener is gone).
        q.refused += 1;
        if q.refused >= REFUSALS_LOST {
            q.err.get_or_insert((
                true,
                format!(
                    "rank {p} unreachable: the provider refused {REFUSALS_LOST} keepalive pings \
                     {} s apart (its connection is lost)",
                    every.as_secs()
                ),
            ));
        }
    }

    /// Fails `p` (one line naming it) if sends to it have waited `btl_ofi_connect_timeout`
    /// without the provider ever reaching it.
    fn check_reach(&mut self, p: usize) {
        let Some(q) = self.peers[p].as_mut() else {
            return;
        };
        if q.err.is_none() {
            if let Some(line) = q
                .reach
                .expired(Instant::now(), self.connect, p, &self.fab.prov)
            {
                q.err = Some((false, line));
            }
        }
    }

    /// Sends one record to `p` if a send buffer is free and the provider takes it.
    fn try_send(&mut self, p: usize, hdr: &Hdr, payload: &[u8]) -> bool {
        self.send_op(p, hdr, payload, SEND)
    }

    /// [`Net::try_send`] as an operation of `kind` ([`SEND`] or [`PING`]).
    fn send_op(&mut self, p: usize, hdr: &Hdr, payload: &[u8], kind: u8) -> bool {
        if self.closed {
            return true;
        }
        match self.peers[p].as_ref() {
            None => return true,
            // The peer is gone: the next poll reports it; the record is dropped.
            Some(q) if q.err.is_some() => return true,
            Some(_) => {}
        }
        let len = HDR + payload.len();
        // A small record without a completion to wait for (not a ping, whose completion
        // proves the peer alive, nor a goodbye, after which we close the endpoint).
        if kind == SEND && hdr.kind != K_BYE && len <= self.fab.inject.min(INJECT_MAX) {
            // Busy (`None`): the regular path below waits for the provider.
            if let Some(done) = self.inject(p, hdr, payload) {
                return done;
            }
        }
        if self.free.is_empty() {
            self.progress();
        }
        let idx = match self.free.pop() {
            Some(i) => i,
            None if self.sends.len() < self.max_sends => match self.slot(SEND, 0, self.sends.len())
            {
                Ok(s) => {
                    self.sends.push(s);
                    self.sends.len() - 1
                }
                Err(e) => {
                    self.fatal.get_or_insert(e);
                    return true;
                }
            },
            None => return false,
        };
        let Some(peer) = self.peers[p].as_mut() else {
            return true;
        };
        let s = &mut self.sends[idx];
        // SAFETY: Hdr is repr(C) plain data of HDR bytes.
        let hb = unsafe { std::slice::from_raw_parts((hdr as *const Hdr).cast::<u8>(), HDR) };
        s.buf[..HDR].copy_from_slice(hb);
        s.buf[HDR..HDR + payload.len()].copy_from_slice(payload);
        s.op.peer = p as u32;
        s.op.kind = kind;
        let ctx = std::ptr::addr_of_mut!(**s).cast::<c_void>();
        let (addr, t) = (peer.addr, tag(self.me, peer.send_seq));
        // SAFETY: the send buffer is boxed in `self` and stays untouched until the
        // completion frees it; the endpoint is closed before the buffers are freed.
        let ret = unsafe {
            self.fab
                .tsend(s.buf.as_ptr(), HDR + payload.len(), s.desc, addr, t, ctx)
        };
        peer.reach.waiting(Instant::now());
        if ret == -fi::FI_EAGAIN {
            self.free.push(idx);
            self.progress();
            return false;
        }
        if ret < 0 {
            self.free.push(idx);
            let msg = format!("fi_tsend to rank {p}: {}", self.fab.error(ret));
            peer.err.get_or_insert((peer_gone(ret as i32), msg));
            return true;
        }
        s.done = Some(0);
        self.sent += 1;
        peer.send_seq = peer.send_seq.wrapping_add(1);
        peer.inflight += 1;
        peer.talked = true;
        true
    }
}

/// A link to one peer through the rank's shared [`Net`].
#[derive(Debug)]
pub(crate) struct OfiLink {
    net: Arc<Mutex<Net>>,
    peer: usize,
    max_payload: usize,
}

impl OfiLink {
    /// The link to `peer` (added to `net` before).
    pub(crate) fn new(net: &Arc<Mutex<Net>>, peer: usize) -> OfiLink {
        let max_payload = lock(net).max_payload;
        OfiLink {
            net: net.clone(),
            peer,
            max_payload,
        }
    }

    fn net(&self) -> MutexGuard<'_, Net> {
        lock(&self.net)
    }
}

/// Locks a [`Net`] (a panic in another thread does not make its state unusable: every
/// method leaves it consistent).
pub(crate) fn lock(net: &Mutex<Net>) -> MutexGuard<'_, Net> {
    net.lock().unwrap_or_else(|e| e.into_inner())
}

impl Link for OfiLink {
    fn name(&self) -> &'static str {
        "ofi"
    }

    fn caps(&self) -> Caps {
        Caps {
            rma_read: self.net().fab.rma,
            ..Caps::NETWORK
        }
    }

    fn max_payload(&self) -> usize {
        self.max_payload
    }

    unsafe fn try_send(&mut self, hdr: &Hdr, payload: *const u8, len: usize) -> bool {
        let data = if len == 0 {
            &[][..]
        } else {
            // SAFETY: the caller guarantees len readable bytes.
            unsafe { std::slice::from_raw_parts(payload, len) }
        };
        if len > self.max_payload {
            return false;
        }
        if hdr.kind == K_RTS && hdr.flags & F_RMA != 0 {
            return self.net().send_rts(self.peer, hdr);
        }
        self.net().try_send(self.peer, hdr, data)
    }

    fn poll(&mut self) -> Result<Option<(Hdr, *const u8, usize)>, LinkError> {
        self.net().poll(self.peer)
    }

    fn release(&mut self) {
        self.net().release(self.peer);
    }

    fn ready(&self) -> bool {
        self.net().ready(self.peer)
    }

    /// Sends our goodbye (after everything else, in sequence), then progresses until the
    /// peer's goodbye has arrived and our sends have completed: a provider may need both
    /// sides' progress to deliver (`ofi_rxd` acknowledges, `tcp;ofi_rxm` connects), and
    /// after finalize nobody progresses. A failed peer has nothing more to wait for.
    fn closing(&mut self) -> bool {
        let p = self.peer;
        let mut n = self.net();
        if n.closed {
            return true;
        }
        let sent = match n.peers[p].as_ref() {
            None => return true,
            Some(q) if q.err.is_some() || n.fatal.is_some() => {
                // Nothing more to say to it; the fabric still closes with the others.
                n.finish(p);
                return true;
            }
            Some(q) => q.bye_sent,
        };
        if !sent {
            let bye = Hdr {
                kind: K_BYE,
                ..Hdr::default()
            };
            let ok = n.try_send(p, &bye, &[]);
            if let Some(q) = n.peers[p].as_mut() {
                q.bye_sent = ok;
            }
        }
        // Takes the goodbye when it is next (the protocol consumed everything before it).
        let _ = n.poll(p);
        let done = n.peers[p]
            .as_ref()
            .is_none_or(|q| q.err.is_some() || (q.bye_sent && q.bye_got && q.inflight == 0));
        if done {
            n.finish(p);
        }
        done
    }

    fn abandon(&mut self) {
        let p = self.peer;
        let mut n = self.net();
        if !n.closed {
            n.finish(p);
        }
    }

    unsafe fn read(&mut self, buf: *mut u8, n: usize, sreq: u64) -> Result<bool, LinkError> {
        // SAFETY: the caller's promise for buf.
        unsafe { self.net().read(self.peer, buf, n, sreq) }
    }

    /// Drops the cached registrations of the freed memory (every link of the rank shares
    /// one cache: the first call does it).
    fn memory_freed(&mut self, addr: usize, len: usize) {
        let mut n = self.net();
        if n.closed {
            return;
        }
        for mr in n.mrs.invalidate(addr, len) {
            n.fab.deregister(mr);
        }
    }

    fn sending(&self) -> bool {
        let mut n = self.net();
        n.progress();
        n.peers[self.peer]
            .as_ref()
            .is_some_and(|q| q.inflight > 0 && q.err.is_none())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_name_the_sender_and_the_sequence() {
        assert_eq!(tag(0, 0), BTL_TAG);
        assert_eq!(tag(3, 7), BTL_TAG | (3 << 32) | 7);
        assert_eq!(tag(MAX_RANKS - 1, u32::MAX) >> 61, 0, "top bits clear");
        assert_ne!(tag(1, 0), tag(0, 1));
    }

    /// Records and the matching offload's messages share the endpoint: no receive pattern
    /// of the offload (wildcards included) takes a record, and no record's exact tag is
    /// an offload message's.
    #[test]
    fn records_and_offloaded_messages_never_match_each_other() {
        use crate::mtl::ofi::tag::{Envelope, Layout};
        let l = Layout::fit(64, 1 << 16, 16).unwrap();
        let recs = [tag(0, 0), tag(5, 77), tag(MAX_RANKS - 1, u32::MAX)];
        for ctx in [0, 1, 1 << 31, u32::MAX - 1] {
            let any = l.recv(ctx, None, None).unwrap();
            let one = l.recv(ctx, Some(5), Some(77)).unwrap();
            for r in recs {
                assert!(!any.matches(r) && !one.matches(r), "{r:#x} ctx {ctx:#x}");
            }
            let env = Envelope {
                ctx,
                src: 5,
                tag: 77,
            };
            for sync in [false, true] {
                for mark in [0, crate::TAG_MARK] {
                    let e = Envelope {
                        tag: env.tag | mark,
                        ..env
                    };
                    let t = l.send(&e, sync).unwrap();
                    assert!(!recs.contains(&t) && t & BTL_TAG == 0);
                }
            }
            assert_eq!(l.ack_send(&env, 3).unwrap() & BTL_TAG, 0);
        }
    }

    /// A peer whose address answers nothing the provider understands (a TCP listener that
    /// never accepts: the kernel completes the handshake, nobody answers `ofi_rxm`'s
    /// connection request, as with a stopped peer or an address on the wrong network):
    /// the sends to it wait, and after `btl_ofi_connect_timeout` the link fails with one
    /// line naming the rank and the address, in bounded time. Skipped, loudly, without
    /// libfabric's tcp provider.
    #[test]
    fn an_unreachable_peer_fails_after_the_connect_timeout() {
        let lib = match fi::Lib::load() {
            Ok(l) => l,
            Err(e) => {
                eprintln!("SKIPPED: no libfabric ({e}); scripts/deps.sh installs libfabric1");
                return;
            }
        };
        let no_rma = crate::btl::ofi::fabric::Want {
            rma: false,
            atomic: false,
        };
        let fab = match Fabric::open(lib, &["tcp".to_string()], &[], 2, false, true, no_rma) {
            Ok(f) => f,
            Err(e) => {
                eprintln!("SKIPPED: no tcp provider ({e}); scripts/deps.sh installs libfabric1");
                return;
            }
        };
        let limit = Duration::from_secs(1);
        let net = Net::new(
            fab,
            0,
            2,
            4096,
            2,
            4,
            Liveness {
                keepalive: None,
                link_timeout: None,
                connect: limit,
            },
        );
        let ours = net.name().unwrap();
        if ours.len() != 16 {
            eprintln!(
                "SKIPPED: the tcp provider's address is not IPv4 ({} bytes)",
                ours.len()
            );
            return;
        }
        let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let net = Arc::new(Mutex::new(net));
        lock(&net)
            .add_peer(
                1,
                &super::super::connect::sockaddr_in([127, 0, 0, 1], port),
                &[],
            )
            .unwrap();
        let mut link = OfiLink::new(&net, 1);
        let hdr = Hdr::default();
        let payload = [7u8; 1000];
        let t0 = Instant::now();
        let err = loop {
            assert!(t0.elapsed() < Duration::from_secs(20), "no failure in 20 s");
            // SAFETY: payload holds 1000 readable bytes.
            let _ = unsafe { link.try_send(&hdr, payload.as_ptr(), payload.len()) };
            if !link.ready() {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            }
            match link.poll() {
                Err(e) => break e,
                Ok(r) => assert!(r.is_none(), "nothing can arrive"),
            }
        };
        let waited = t0.elapsed();
        assert!(
            waited >= limit && waited < limit * 10,
            "failed after {waited:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&format!("rank 1 at 127.0.0.1:{port} unreachable over tcp"))
                && text.contains("not connected within 1 s (btl_ofi_connect_timeout)")
                && !text.contains('\n'),
            "{text}"
        );
        assert!(
            !err.is_peer_gone(),
            "a fabric error: printed, not only verbose"
        );
        drop(link);
        drop(silent);
    }

    #[test]
    fn connection_errors_mean_the_peer_is_gone() {
        assert!(peer_gone(libc::ECONNRESET));
        assert!(peer_gone(-libc::ECONNREFUSED));
        assert!(!peer_gone(libc::EINVAL));
        assert!(!peer_gone(265), "truncation is ours");
    }
}
