//! One-sided operations over the rank's libfabric endpoint, for the `ofi` component of the
//! `osc` framework (the C library's `rma/ofi`): window memory registered for remote reads
//! and writes ([`Osc::expose`]), puts as `fi_writemsg` with `FI_DELIVERY_COMPLETE` (their
//! completion means the data is visible at the target), gets as `fi_read`, each counted
//! per target until its completion, which [`Osc::flush`] waits for. The completions come
//! through the endpoint's one completion queue with everything else ([`Net::progress`]),
//! so a target on a manual-progress provider (`tcp;ofi_rxm`) serves our operations while
//! anything polls its engine (its window's progress thread does).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use super::flight::Flights;
use super::{lock, LinkError, Net};
use crate::btl::ofi::fabric::Mr;
use crate::btl::ofi::fi;

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

/// One transfer: a put of its own bytes, or a get into the caller's buffer.
enum Xfer {
    Put(Vec<u8>),
    Get(*mut u8, usize),
}

impl Net {
    /// Starts one transfer with `p`'s memory at `raddr` under `key`, retrying while the
    /// provider is busy (progressing meanwhile).
    fn start(&mut self, p: usize, x: Xfer, raddr: u64, key: u64) -> Result<(), OscError> {
        let Some(dest) = self.peers.get(p).and_then(|q| q.as_ref()).map(|q| q.addr) else {
            return Err(OscError::PeerLost(format!(
                "rank {p} is not linked over ofi"
            )));
        };
        let (put, data, buf, len) = match x {
            Xfer::Put(d) => {
                let (b, l) = (d.as_ptr().cast_mut(), d.len());
                (true, d, b, l)
            }
            Xfer::Get(b, l) => (false, Vec::new(), b, l),
        };
        // The put's bytes keep their address in the flight.
        let (idx, ctx) = self.osc.flights.add(OSC, p as u32, data);
        let mut mr = None;
        if self.fab.mr_local {
            let access = if put { fi::FI_WRITE } else { fi::FI_READ };
            // SAFETY: the put's bytes live in the flight, the get's buffer with the caller
            // (who waits for the completion); deregistered at the completion.
            match unsafe { self.fab.register_user(buf, len, access) } {
                Ok(m) => mr = Some(m),
                Err(e) => {
                    self.osc.flights.take(idx);
                    return Err(OscError::Fabric(e));
                }
            }
        }
        let desc = mr.as_ref().map_or(std::ptr::null_mut(), |m| m.desc);
        if let Some(f) = self.osc.flights.get_mut(idx) {
            f.mr = mr;
        }
        loop {
            // SAFETY: the buffer (see above) and the boxed context outlive the operation:
            // the flight is kept until its completion, the endpoint closed before it goes.
            let ret = unsafe {
                if put {
                    self.fab.rma_write(buf, len, desc, dest, raddr, key, ctx)
                } else {
                    self.fab.rma_read(buf, len, desc, dest, raddr, key, ctx)
                }
            };
            if ret == 0 {
                break;
            }
            let failed = if ret != -fi::FI_EAGAIN {
                Err(OscError::Fabric(format!(
                    "{} rank {p}: {}",
                    if put {
                        "fi_writemsg to"
                    } else {
                        "fi_read from"
                    },
                    self.fab.error(ret)
                )))
            } else {
                self.wait_step(p).map_err(OscError::from)
            };
            if let Err(e) = failed {
                if let Some(m) = self.osc.flights.take(idx).and_then(|f| f.mr) {
                    self.fab.deregister(m);
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
        if let Some(m) = f.mr {
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
