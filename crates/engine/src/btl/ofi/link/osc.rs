//! One-sided operations over the rank's libfabric endpoint, for the `ofi` component of the
//! `osc` framework (the C library's `rma/ofi`): window memory registered for remote reads
//! and writes ([`Osc::expose`]), puts as `fi_writemsg` with `FI_DELIVERY_COMPLETE` (their
//! completion means the data is visible at the target), gets as `fi_read`, each counted
//! per target until its completion, which [`Osc::flush`] waits for. The completions come
//! through the endpoint's one completion queue with everything else ([`Net::progress`]),
//! so a target on a manual-progress provider (`tcp;ofi_rxm`) serves our operations while
//! anything polls its engine (its window's progress thread does).
//!
//! Atomics (`FI_ATOMIC`, where the provider has it): [`Osc::atomic`] (`fi_atomicmsg` with
//! `FI_DELIVERY_COMPLETE`, counted like puts) and [`Osc::fetch_atomic`]
//! (`fi_fetch_atomic`, `fi_compare_atomic`, waited for). An atomic may target this rank's
//! own memory: the endpoint's own address goes into the address vector for it
//! ([`Osc::reaches_self`]), so that the process's accumulates to itself are the
//! provider's too (the caller decides which accumulates take this path, see the C
//! library's `rma/ofi`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use super::flight::Flights;
use super::{lock, LinkError, Net};
use crate::btl::ofi::fabric::{AtomicKind, Mr};
use crate::btl::ofi::fi::{self, AtomicOp, AtomicType};

/// [`super::Op::kind`] of a one-sided operation.
pub(super) const OSC: u8 = 4;

/// The one-sided operations of a rank ([`Net`]'s `osc`).
#[derive(Debug, Default)]
pub(super) struct Ops {
    flights: Flights,
    /// Operations in flight per peer.
    pending: HashMap<usize, usize>,
    /// The first failure per peer since it was last reported: (peer gone, message).
    failed: HashMap<usize, (bool, String)>,
    /// Window memory registered for peers, by its base address.
    exposed: HashMap<usize, Mr>,
    /// Our own endpoint's address in the address vector, for atomics on our own memory
    /// (`Err`: inserting it failed, with the message).
    own: Option<Result<fi::FiAddr, String>>,
}

/// Why a one-sided operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OscError {
    /// The target is gone (`MPI_ERR_PROC_FAILED`).
    #[error("{0}")]
    PeerLost(String),
    /// The provider failed the operation, with its message.
    #[error("{0}")]
    Fabric(String),
}

impl From<LinkError> for OscError {
    fn from(e: LinkError) -> OscError {
        match e {
            LinkError::PeerLost(m) => OscError::PeerLost(m),
            e => OscError::Fabric(e.to_string()),
        }
    }
}

/// The rank's network, once the `ofi` transport opened it ([`publish`]).
static NET: Mutex<Weak<Mutex<Net>>> = Mutex::new(Weak::new());

/// Makes `net` the one [`osc`] hands out.
pub(crate) fn publish(net: &Arc<Mutex<Net>>) {
    *NET.lock().unwrap_or_else(|e| e.into_inner()) = Arc::downgrade(net);
}

/// One-sided operations over the rank's ofi endpoint, where the transport is open and its
/// provider reads and writes registered remote memory (`FI_RMA` with `FI_WRITE` and
/// `FI_REMOTE_WRITE`); `None` otherwise (the caller carries them as messages).
pub fn osc() -> Option<Osc> {
    let net = NET.lock().unwrap_or_else(|e| e.into_inner()).upgrade()?;
    let ok = {
        let n = lock(&net);
        !n.closed && n.fab.rma_write
    };
    ok.then_some(Osc { net })
}

/// A handle on the rank's ofi endpoint for one-sided operations ([`osc`]).
#[derive(Debug, Clone)]
pub struct Osc {
    net: Arc<Mutex<Net>>,
}

impl Osc {
    /// Whether world rank `rank` is linked over ofi.
    pub fn reaches(&self, rank: usize) -> bool {
        lock(&self.net)
            .peers
            .get(rank)
            .is_some_and(|p| p.as_ref().is_some_and(|q| q.err.is_none()))
    }

    /// Whether atomics can target this rank's own memory (its own address inserted in the
    /// address vector); the reason if not.
    pub fn reaches_self(&self) -> Result<(), String> {
        let mut n = lock(&self.net);
        let me = n.me;
        n.dest(me).map(|_| ()).map_err(|e| e.to_string())
    }

    /// The provider's name.
    pub fn provider(&self) -> String {
        lock(&self.net).fab.prov.clone()
    }

    /// Whether the provider runs atomics at all (`FI_ATOMIC` offered and asked for).
    pub fn atomics(&self) -> bool {
        lock(&self.net).fab.atomic
    }

    /// The most elements of `dt` one atomic of `kind` with `op` takes, if the provider
    /// runs it.
    pub fn atomic_valid(&self, kind: AtomicKind, dt: AtomicType, op: AtomicOp) -> Option<usize> {
        lock(&self.net).fab.atomic_valid(kind, dt, op)
    }

    /// Applies `op` with the elements of `dt` in `data` to the memory world rank `rank`
    /// exposed under `key`, at `raddr`; applied there once [`Osc::flush`] returns (at
    /// once, on a provider that does not order atomics, or to ourselves: then this waits).
    pub fn atomic(
        &self,
        rank: usize,
        data: &[u8],
        dt: AtomicType,
        op: AtomicOp,
        raddr: u64,
        key: u64,
    ) -> Result<(), OscError> {
        let ordered = {
            let mut n = lock(&self.net);
            let max = n.fab.atomic_valid(AtomicKind::Write, dt, op).unwrap_or(1);
            let piece = max * dt.size();
            for (k, chunk) in data.chunks(piece).enumerate() {
                let x = Xfer::Atomic {
                    data: chunk.to_vec(),
                    dt,
                    op,
                };
                n.start(rank, x, raddr + (k * piece) as u64, key)?;
            }
            n.fab.atomic_ordered && rank != n.me
        };
        if ordered {
            Ok(())
        } else {
            self.flush(Some(rank))
        }
    }

    /// Applies `op` with the elements of `dt` in `data` (`compare`: compare-and-swap
    /// against those) to the memory world rank `rank` exposed under `key`, at `raddr`,
    /// and waits until the previous elements are in `result` (as many bytes as `data`).
    ///
    /// # Safety
    /// `result` must be valid for writes of `data.len()` bytes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn fetch_atomic(
        &self,
        rank: usize,
        data: &[u8],
        compare: Option<&[u8]>,
        result: *mut u8,
        dt: AtomicType,
        op: AtomicOp,
        raddr: u64,
        key: u64,
    ) -> Result<(), OscError> {
        {
            let mut n = lock(&self.net);
            let kind = if compare.is_some() {
                AtomicKind::Compare
            } else {
                AtomicKind::Fetch
            };
            let max = n.fab.atomic_valid(kind, dt, op).unwrap_or(1);
            let piece = max * dt.size();
            let mut off = 0;
            while off < data.len() {
                let l = piece.min(data.len() - off);
                let x = Xfer::Fetch {
                    data: data[off..off + l].to_vec(),
                    compare: compare.map(|c| c[off..off + l].to_vec()),
                    result: result.wrapping_add(off),
                    dt,
                    op,
                };
                n.start(rank, x, raddr + off as u64, key)?;
                off += l;
            }
        }
        self.flush(Some(rank))
    }

    /// Registers `len` bytes of window memory at `base` for peers to read and write; the
    /// key and the address peers name its first byte with (virtual, or 0 without
    /// `FI_MR_VIRT_ADDR`). Until [`Osc::unexpose`].
    ///
    /// # Safety
    /// The memory must stay valid until [`Osc::unexpose`] (peers write it at any time).
    pub unsafe fn expose(&self, base: *mut u8, len: usize) -> Result<(u64, u64), String> {
        let mut n = lock(&self.net);
        if n.closed {
            return Err("the ofi transport is closed".into());
        }
        // SAFETY: the caller keeps the memory valid until unexpose.
        let mr = unsafe {
            n.fab
                .register_user(base, len, fi::FI_REMOTE_READ | fi::FI_REMOTE_WRITE)?
        };
        let out = (mr.key, if n.fab.mr_virt { base as u64 } else { 0 });
        if let Some(old) = n.osc.exposed.insert(base as usize, mr) {
            n.fab.deregister(old);
        }
        oxmpi_base::verbose!(
            crate::btl::BTL,
            20,
            "ofi: rank {}: {len} B of window memory at {base:p} exposed for fi_write/fi_read \
             (key {:#x})",
            n.me,
            out.0
        );
        Ok(out)
    }

    /// Closes the registration of the window memory at `base` ([`Osc::expose`]).
    pub fn unexpose(&self, base: *mut u8) {
        let mut n = lock(&self.net);
        if let Some(mr) = n.osc.exposed.remove(&(base as usize)) {
            if !n.closed {
                n.fab.deregister(mr);
            }
        }
    }

    /// Starts writing `data` into the memory world rank `rank` exposed under `key`, at
    /// `raddr` (its exposed address plus the offset); it is visible there once
    /// [`Osc::flush`] returns.
    pub fn put(&self, rank: usize, data: &[u8], raddr: u64, key: u64) -> Result<(), OscError> {
        let mut n = lock(&self.net);
        let piece = n.fab.max_msg.max(1);
        for (k, chunk) in data.chunks(piece).enumerate() {
            let at = raddr + (k * piece) as u64;
            n.start(rank, Xfer::Put(chunk.to_vec()), at, key)?;
        }
        Ok(())
    }

    /// Reads `len` bytes of the memory world rank `rank` exposed under `key`, at `raddr`,
    /// into `buf`, and waits until they are there (with every other operation to `rank`).
    ///
    /// # Safety
    /// `buf` must be valid for writes of `len` bytes.
    pub unsafe fn get(
        &self,
        rank: usize,
        buf: *mut u8,
        len: usize,
        raddr: u64,
        key: u64,
    ) -> Result<(), OscError> {
        {
            let mut n = lock(&self.net);
            let piece = n.fab.max_msg.max(1);
            let mut off = 0;
            while off < len {
                let l = piece.min(len - off);
                n.start(
                    rank,
                    Xfer::Get(buf.wrapping_add(off), l),
                    raddr + off as u64,
                    key,
                )?;
                off += l;
            }
        }
        self.flush(Some(rank))
    }

    /// Waits until every operation started to world rank `rank` (every rank: `None`) is
    /// complete at its target; the first failure since the last flush.
    pub fn flush(&self, rank: Option<usize>) -> Result<(), OscError> {
        loop {
            {
                let mut n = lock(&self.net);
                n.progress();
                if let Some(p) = rank {
                    n.keep_alive(p);
                }
                let mine = |p: &usize| rank.is_none_or(|r| r == *p);
                let failed = n.osc.failed.keys().copied().find(|p| mine(p));
                if let Some(p) = failed {
                    let (gone, m) = n.osc.failed.remove(&p).expect("found");
                    return Err(if gone {
                        OscError::PeerLost(m)
                    } else {
                        OscError::Fabric(m)
                    });
                }
                let busy: Vec<usize> = n
                    .osc
                    .pending
                    .iter()
                    .filter(|&(p, c)| *c > 0 && mine(p))
                    .map(|(&p, _)| p)
                    .collect();
                if busy.is_empty() {
                    return Ok(());
                }
                // A target gone with operations in flight: the provider may never complete
                // them (they are lost either way).
                for p in busy {
                    if let Some(Some(q)) = n.peers.get(p) {
                        if let Some((true, m)) = &q.err {
                            return Err(OscError::PeerLost(m.clone()));
                        }
                    }
                }
                if let Some(m) = &n.fatal {
                    return Err(OscError::Fabric(m.clone()));
                }
            }
            std::thread::yield_now();
        }
    }
}

/// One transfer: a put of its own bytes, a get into the caller's buffer, an atomic with
/// its own operands, a fetching one (its operands, then the compare operands, in the
/// flight) into the caller's buffer.
enum Xfer {
    Put(Vec<u8>),
    Get(*mut u8, usize),
    Atomic {
        data: Vec<u8>,
        dt: AtomicType,
        op: AtomicOp,
    },
    Fetch {
        data: Vec<u8>,
        compare: Option<Vec<u8>>,
        result: *mut u8,
        dt: AtomicType,
        op: AtomicOp,
    },
}

impl Xfer {
    /// The name of the libfabric call, for messages.
    fn call(&self) -> &'static str {
        match self {
            Xfer::Put(_) => "fi_writemsg to",
            Xfer::Get(..) => "fi_read from",
            Xfer::Atomic { .. } => "fi_atomicmsg to",
            Xfer::Fetch {
                compare: Some(_), ..
            } => "fi_compare_atomic with",
            Xfer::Fetch { .. } => "fi_fetch_atomic with",
        }
    }
}

impl Net {
    /// The address of world rank `p` for one-sided operations: its link's, or for
    /// ourselves our own endpoint's (inserted into the address vector the first time).
    fn dest(&mut self, p: usize) -> Result<fi::FiAddr, OscError> {
        if p == self.me {
            if self.osc.own.is_none() {
                let own = self.fab.name().and_then(|a| self.fab.insert(&a));
                self.osc.own = Some(own);
            }
            return match self.osc.own.as_ref().expect("set above") {
                Ok(a) => Ok(*a),
                Err(e) => Err(OscError::Fabric(format!(
                    "our own address in the address vector: {e}"
                ))),
            };
        }
        self.peers
            .get(p)
            .and_then(|q| q.as_ref())
            .map(|q| q.addr)
            .ok_or_else(|| OscError::PeerLost(format!("rank {p} is not linked over ofi")))
    }

    /// Starts one transfer with `p`'s memory at `raddr` under `key`, retrying while the
    /// provider is busy (progressing meanwhile).
    fn start(&mut self, p: usize, mut x: Xfer, raddr: u64, key: u64) -> Result<(), OscError> {
        let dest = self.dest(p)?;
        let call = x.call();
        // The operation's own bytes (a put's, an atomic's operands and compare operands)
        // move into the flight, where they keep their address.
        let (own, local, local_len, local_access) = match &mut x {
            Xfer::Put(d) => (std::mem::take(d), None, 0, fi::FI_WRITE),
            Xfer::Get(b, l) => (Vec::new(), Some(*b), *l, fi::FI_READ),
            Xfer::Atomic { data, .. } => (std::mem::take(data), None, 0, fi::FI_WRITE),
            Xfer::Fetch {
                data,
                compare,
                result,
                ..
            } => {
                let n = data.len();
                let mut v = std::mem::take(data);
                v.extend(compare.iter().flatten());
                (v, Some(*result), n, fi::FI_READ)
            }
        };
        let (idx, ctx) = self.osc.flights.add(OSC, p as u32, own);
        let (own_ptr, own_len) = match self.osc.flights.get(idx) {
            Some(f) => (f.data.as_ptr(), f.data.len()),
            None => (std::ptr::null(), 0),
        };
        let mut descs = [std::ptr::null_mut(); 3];
        if self.fab.mr_local {
            // SAFETY: the flight's bytes live in the flight, the caller's buffer with the
            // caller (who waits for the completion); deregistered at the completion.
            let regs = unsafe {
                let a = if own_len > 0 {
                    Some(self.fab.register_user(own_ptr, own_len, fi::FI_WRITE))
                } else {
                    None
                };
                let b = local.map(|b| self.fab.register_user(b, local_len, local_access));
                (a.transpose(), b.transpose())
            };
            let f = self.osc.flights.get_mut(idx).expect("just added");
            match regs {
                (Ok(a), Ok(b)) => {
                    descs[0] = a.as_ref().map_or(std::ptr::null_mut(), |m| m.desc);
                    descs[1] = descs[0];
                    descs[2] = b.as_ref().map_or(std::ptr::null_mut(), |m| m.desc);
                    f.mr = a;
                    f.more.extend(b);
                }
                (a, b) => {
                    let e = [a.as_ref().err(), b.as_ref().err()]
                        .into_iter()
                        .flatten()
                        .next()
                        .cloned()
                        .unwrap_or_default();
                    let mrs: Vec<Mr> = [a.ok().flatten(), b.ok().flatten()]
                        .into_iter()
                        .flatten()
                        .collect();
                    self.osc.flights.take(idx);
                    for m in mrs {
                        self.fab.deregister(m);
                    }
                    return Err(OscError::Fabric(e));
                }
            }
        }
        loop {
            // SAFETY: the buffers (see above) and the boxed context outlive the operation:
            // the flight is kept until its completion, the endpoint closed before it goes.
            let ret = unsafe {
                match &x {
                    Xfer::Put(_) => self
                        .fab
                        .rma_write(own_ptr, own_len, descs[0], dest, raddr, key, ctx),
                    Xfer::Get(b, l) => self.fab.rma_read(*b, *l, descs[2], dest, raddr, key, ctx),
                    Xfer::Atomic { dt, op, .. } => self.fab.atomic_write(
                        own_ptr,
                        own_len / dt.size(),
                        descs[0],
                        dest,
                        raddr,
                        key,
                        *dt,
                        *op,
                        ctx,
                    ),
                    Xfer::Fetch {
                        compare,
                        result,
                        dt,
                        op,
                        ..
                    } => self.fab.atomic_fetch(
                        own_ptr,
                        compare.as_ref().map(|_| own_ptr.wrapping_add(local_len)),
                        *result,
                        local_len / dt.size(),
                        descs,
                        dest,
                        raddr,
                        key,
                        *dt,
                        *op,
                        ctx,
                    ),
                }
            };
            if ret == 0 {
                break;
            }
            let failed = if ret != -fi::FI_EAGAIN {
                Err(OscError::Fabric(format!(
                    "{call} rank {p}: {}",
                    self.fab.error(ret)
                )))
            } else if p == self.me {
                // Our own memory: nothing to lose, only the queue to read.
                self.progress();
                Ok(())
            } else {
                self.wait_step(p).map_err(OscError::from)
            };
            if let Err(e) = failed {
                if let Some(f) = self.osc.flights.take(idx) {
                    for m in f.mr.into_iter().chain(f.more) {
                        self.fab.deregister(m);
                    }
                }
                return Err(e);
            }
        }
        *self.osc.pending.entry(p).or_default() += 1;
        Ok(())
    }

    /// Applies the completion of the one-sided operation `idx`: `err` (peer gone,
    /// message) if it failed.
    pub(super) fn osc_done(&mut self, idx: usize, err: Option<(bool, String)>) {
        let Some(f) = self.osc.flights.take(idx) else {
            return;
        };
        for m in f.mr.into_iter().chain(f.more) {
            self.fab.deregister(m);
        }
        let p = f.op.peer as usize;
        if let Some(c) = self.osc.pending.get_mut(&p) {
            *c = c.saturating_sub(1);
        }
        match err {
            Some(e) => {
                if e.0 {
                    if let Some(Some(q)) = self.peers.get_mut(p) {
                        q.err.get_or_insert(e.clone());
                    }
                }
                self.osc.failed.entry(p).or_insert(e);
            }
            None => {
                if let Some(Some(q)) = self.peers.get_mut(p) {
                    q.heard = std::time::Instant::now();
                }
            }
        }
    }

    /// Closes the registrations of exposed window memory and of operations still in
    /// flight (the fabric closes next; the flights' contexts stay until the net goes).
    pub(super) fn osc_close(&mut self) {
        let mut mrs: Vec<Mr> = self.osc.exposed.drain().map(|(_, m)| m).collect();
        mrs.extend(self.osc.flights.take_mrs());
        for m in mrs {
            self.fab.deregister(m);
        }
    }
}
