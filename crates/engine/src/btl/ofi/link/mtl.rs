//! Tagged operations on the rank's libfabric endpoint for `pml cm` (the matching
//! offload, `crate::pml::cm`): whole MPI messages sent with `fi_tinject`/`fi_tsend` and
//! received with `fi_trecv` under the tag and ignore bits the sans-IO rules of
//! `crate::mtl::ofi` compute, probes as `FI_PEEK` (with `FI_CLAIM` for mprobe), cancel as
//! `fi_cancel`. Each operation is a token; its completion entry comes back, unread, from
//! [`Mtl::poll`] for the caller to apply those rules to. The completions arrive on the
//! endpoint's one completion queue with the btl's and the one-sided operations'
//! ([`Net::progress`]).
//!
//! The btl's own records carry [`super::BTL_TAG`] in their tags, a bit every offload
//! pattern requires to be clear, so the two never take each other's messages.

use std::ffi::c_void;
use std::sync::{Arc, Mutex};

use super::flight::Flights;
use super::{lock, Net};
use crate::btl::ofi::fi;
use crate::mtl::ofi::completion::Cq;
use crate::mtl::ofi::tag::Layout;

/// [`super::Op::kind`] of an offload operation.
pub(super) const MTL: u8 = 5;

/// The offload's operations of a rank ([`Net`]'s `mtl`).
#[derive(Debug, Default)]
pub(super) struct Ops {
    flights: Flights,
    /// Completions not yet handed out: (token, entry).
    done: Vec<(u64, Cq)>,
    /// Each world rank's address in the address vector (ourselves included).
    pub(super) addrs: Vec<Option<fi::FiAddr>>,
    /// The offload runs on this endpoint (the fabric stays open until [`Mtl::close`]).
    pub(super) open: bool,
    /// Where the envelope sits in the tag.
    layout: Option<Layout>,
    /// Buffers registered for peers' reads ([`Mtl::expose`]), by id.
    exposed: std::collections::HashMap<u64, crate::btl::ofi::fabric::Mr>,
    /// The id of the next of them.
    next_exposed: u64,
}

/// The rank's network for the offload, once the `ofi` transport opened it for `pml cm`
/// (held strongly: the offload may be its only user when other btls link every peer;
/// [`Mtl::close`] closes the fabric).
static NET: Mutex<Option<Arc<Mutex<Net>>>> = Mutex::new(None);

/// Makes `net` the one [`mtl`] hands out (the transport opened it for `pml cm`).
pub(crate) fn publish(net: &Arc<Mutex<Net>>, layout: Layout) {
    let mut n = lock(net);
    n.mtl.open = true;
    n.mtl.layout = Some(layout);
    drop(n);
    *NET.lock().unwrap_or_else(|e| e.into_inner()) = Some(net.clone());
}

/// The offload's handle on the rank's endpoint, if the `ofi` transport opened it for
/// `pml cm` ([`publish`]).
pub(crate) fn mtl() -> Option<Mtl> {
    let net = NET.lock().unwrap_or_else(|e| e.into_inner()).clone()?;
    Some(Mtl { net })
}

/// What a provider offers the offload, for `crate::mtl::ofi::select`.
pub(crate) fn offer(n: &Net) -> crate::mtl::ofi::select::Offer {
    crate::mtl::ofi::select::Offer {
        prov: n.fab.prov.clone(),
        software: crate::btl::ofi::fabric::software(&n.fab.prov),
        tagged: n.fab.tagged,
        directed: false,
        ordered: n.fab.ordered,
        tag_bits: n.fab.tag_bits,
    }
}

/// A handle on the rank's endpoint for the offload ([`mtl`]).
#[derive(Debug, Clone)]
pub(crate) struct Mtl {
    net: Arc<Mutex<Net>>,
}

/// How a send started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Injected (`fi_tinject`): complete, no completion will come.
    Injected,
    /// In flight with this token.
    Pending(u64),
}

impl Net {
    /// A new flight for an offload operation: its index, its token and its context.
    fn mtl_flight(&mut self, data: Vec<u8>) -> (usize, u64, *mut c_void) {
        let (idx, ctx) = self.mtl.flights.add(MTL, 0, data);
        let tok = self.mtl.flights.token(idx).expect("just added");
        (idx, tok, ctx)
    }

    /// Records world rank `p`'s address for the offload.
    pub(super) fn set_mtl_addr(&mut self, p: usize, fa: fi::FiAddr) {
        if self.mtl.addrs.len() <= p {
            self.mtl.addrs.resize(p + 1, None);
        }
        self.mtl.addrs[p] = Some(fa);
    }

    /// Inserts world rank `p`'s address `addr` for the offload (a peer the btl reaches
    /// otherwise, or ourselves), unless it is known.
    pub(crate) fn add_mtl_addr(&mut self, p: usize, addr: &[u8]) -> Result<(), String> {
        if self.mtl.addrs.get(p).copied().flatten().is_none() {
            let fa = self.fab.insert(addr)?;
            self.set_mtl_addr(p, fa);
        }
        Ok(())
    }

    /// Drops flight `idx` (its operation completed or was never posted).
    fn mtl_drop(&mut self, idx: usize) {
        if let Some(f) = self.mtl.flights.take(idx) {
            if let Some(m) = f.mr {
                self.fab.deregister(m);
            }
        }
    }

    /// The length a completion entry of the offload reports: a received (or peeked)
    /// rendezvous request's is the message's, which travels as its remote data.
    pub(super) fn mtl_len(&self, e: &fi::fi_cq_tagged_entry) -> usize {
        match self.mtl.layout {
            Some(l) if e.flags & fi::FI_RECV != 0 && e.tag & l.rndv() != 0 => e.data as usize,
            _ => e.len,
        }
    }

    /// The completion of offload operation `idx`: kept for [`Mtl::poll`]; the flight
    /// goes, except a claiming peek's that found a message (its receive reuses the
    /// context).
    pub(super) fn mtl_done(&mut self, idx: usize, cq: Cq) {
        let Some(tok) = self.mtl.flights.token(idx) else {
            return;
        };
        let keep = self
            .mtl
            .flights
            .get(idx)
            .is_some_and(|f| f.op.peer == CLAIMING && matches!(cq, Cq::Ok { .. }));
        if keep {
            if let Some(f) = self.mtl.flights.get_mut(idx) {
                f.op.peer = CLAIMED;
            }
        } else {
            self.mtl_drop(idx);
        }
        self.mtl.done.push((tok, cq));
    }

    /// The local descriptor for `len` bytes at `buf` in flight `idx` (registered on
    /// `FI_MR_LOCAL` providers).
    fn mtl_desc(
        &mut self,
        idx: usize,
        buf: *const u8,
        len: usize,
        access: u64,
    ) -> Result<*mut c_void, String> {
        if !self.fab.mr_local || len == 0 {
            return Ok(std::ptr::null_mut());
        }
        // SAFETY: the caller keeps the buffer valid until the operation completes, when
        // the registration is closed with the flight.
        let m = unsafe { self.fab.register_user(buf, len, access)? };
        let d = m.desc;
        if let Some(f) = self.mtl.flights.get_mut(idx) {
            f.mr = Some(m);
        }
        Ok(d)
    }

    /// Posts flight `idx`'s operation on `len` bytes at `buf` (registered for `access` on
    /// `FI_MR_LOCAL` providers, its descriptor passed to `post`) with [`Net::mtl_post`];
    /// the flight goes if that fails.
    fn mtl_start(
        &mut self,
        idx: usize,
        buf: *const u8,
        len: usize,
        access: u64,
        what: &str,
        mut post: impl FnMut(&Net, *mut c_void) -> isize,
    ) -> Result<(), String> {
        let r = self
            .mtl_desc(idx, buf, len, access)
            .and_then(|d| self.mtl_post(what, |n| post(n, d)));
        if r.is_err() {
            self.mtl_drop(idx);
        }
        r
    }

    /// Posts with `post` until the provider takes it (progressing meanwhile); `what` names
    /// the call in the error.
    fn mtl_post(&mut self, what: &str, mut post: impl FnMut(&Net) -> isize) -> Result<(), String> {
        for _ in 0..1_000_000 {
            let ret = post(self);
            if ret == 0 {
                return Ok(());
            }
            if ret != -fi::FI_EAGAIN {
                return Err(format!("{what}: {}", self.fab.error(ret)));
            }
            self.progress();
        }
        Err(format!("{what}: the provider stays busy"))
    }
}

/// [`super::Op::peer`] of a claiming peek in flight (mprobe).
const CLAIMING: u32 = u32::MAX;
/// [`super::Op::peer`] of a claiming peek that found its message: its receive reuses the context.
const CLAIMED: u32 = u32::MAX - 1;

impl Mtl {
    /// The provider's name.
    pub(crate) fn provider(&self) -> String {
        lock(&self.net).fab.prov.clone()
    }

    /// The tag layout the job agreed on.
    pub(crate) fn layout(&self) -> Option<Layout> {
        lock(&self.net).mtl.layout
    }

    /// The provider's name and whether its progress is manual, for verbose output.
    pub(crate) fn describe(&self) -> String {
        let n = lock(&self.net);
        format!(
            "provider {}, inject {} B, max message {} B, {} progress{}",
            n.fab.prov,
            n.fab.inject,
            n.fab.max_msg,
            if n.fab.manual_progress {
                "manual"
            } else {
                "auto"
            },
            if n.fab.mr_local {
                ", user buffers registered per operation (FI_MR_LOCAL)"
            } else {
                ""
            }
        )
    }

    /// The address of world rank `rank`.
    fn addr(n: &Net, rank: usize) -> Result<fi::FiAddr, String> {
        n.mtl
            .addrs
            .get(rank)
            .copied()
            .flatten()
            .ok_or_else(|| format!("world rank {rank} has no ofi address"))
    }

    /// Sends `len` bytes at `buf` to world rank `dest` with `tag`: injected when `inject`
    /// and the provider takes it whole without a completion, else `fi_tsend` (from `own`,
    /// a copy the operation keeps, if given, else from `buf`).
    ///
    /// # Safety
    /// Without `own`, `buf` must stay valid until the token's completion.
    pub(crate) unsafe fn send(
        &self,
        dest: usize,
        tag: u64,
        buf: *const u8,
        len: usize,
        inject: bool,
        own: Option<Vec<u8>>,
    ) -> Result<Sent, String> {
        let mut n = lock(&self.net);
        let to = Self::addr(&n, dest)?;
        if inject && len <= n.fab.inject {
            // SAFETY: buf is readable for len bytes during the call (caller).
            n.mtl_post("fi_tinject", |n| unsafe {
                n.fab.tinject(buf, len, to, tag)
            })?;
            return Ok(Sent::Injected);
        }
        let (data, buf) = match own {
            Some(v) => {
                let p = v.as_ptr();
                (v, p)
            }
            None => (Vec::new(), buf),
        };
        let (idx, tok, ctx) = n.mtl_flight(data);
        let desc = match n.mtl_desc(idx, buf, len, fi::FI_SEND) {
            Ok(d) => d,
            Err(e) => {
                n.mtl_drop(idx);
                return Err(e);
            }
        };
        // SAFETY: buf (the flight's copy, or the caller's buffer it keeps valid) and the
        // boxed context live until the completion.
        let r = n.mtl_post("fi_tsend", |n| unsafe {
            n.fab.tsend(buf, len, desc, to, tag, ctx)
        });
        if let Err(e) = r {
            n.mtl_drop(idx);
            return Err(e);
        }
        Ok(Sent::Pending(tok))
    }

    /// Posts a receive of up to `len` bytes into `buf` of a message whose tag equals `tag`
    /// outside `ignore`; with `peek` only looks (`FI_PEEK`, `claim`: and keeps the message
    /// for [`Mtl::claimed_recv`]); with a non-null `spill` (no peek, a provider without
    /// `FI_MR_LOCAL`), one more byte there ([`crate::btl::ofi::fabric::Fabric::trecv_spill`]). Its token.
    ///
    /// # Safety
    /// `buf` must stay valid for writes of `len` bytes, and `spill` (if not null) of one,
    /// until the token's completion.
    pub(crate) unsafe fn recv(
        &self,
        tag: u64,
        ignore: u64,
        buf: *mut u8,
        len: usize,
        peek: Option<bool>,
        spill: *mut u8,
    ) -> Result<u64, String> {
        let mut n = lock(&self.net);
        let (idx, tok, ctx) = n.mtl_flight(Vec::new());
        let flags = match peek {
            None => 0,
            Some(false) => fi::FI_PEEK,
            Some(true) => {
                if let Some(f) = n.mtl.flights.get_mut(idx) {
                    f.op.peer = CLAIMING;
                }
                fi::FI_PEEK | fi::FI_CLAIM
            }
        };
        let desc = match n.mtl_desc(idx, buf, len, fi::FI_RECV) {
            Ok(d) => d,
            Err(e) => {
                n.mtl_drop(idx);
                return Err(e);
            }
        };
        let what = if peek.is_some() {
            "fi_trecvmsg(FI_PEEK)"
        } else {
            "fi_trecv"
        };
        let r = if spill.is_null() || peek.is_some() || n.fab.mr_local {
            // SAFETY: buf (the caller keeps it valid) and the boxed context live until the
            // completion.
            n.mtl_post(what, |n| unsafe {
                n.fab.trecv_match(buf, len, desc, tag, ignore, ctx, flags)
            })
        } else {
            // SAFETY: as above, and the caller keeps spill valid.
            n.mtl_post(what, |n| unsafe {
                n.fab.trecv_spill(buf, len, desc, spill, tag, ignore, ctx)
            })
        };
        if let Err(e) = r {
            n.mtl_drop(idx);
            return Err(e);
        }
        Ok(tok)
    }

    /// Receives the message a claiming peek (token `claim`) found into `len` bytes at
    /// `buf` (`FI_CLAIM`); its token (the peek's).
    ///
    /// # Safety
    /// As for [`Mtl::recv`].
    pub(crate) unsafe fn claimed_recv(
        &self,
        claim: u64,
        buf: *mut u8,
        len: usize,
    ) -> Result<u64, String> {
        let mut n = lock(&self.net);
        let idx = n.mtl.flights.by_token(claim);
        let ctx = match idx.and_then(|i| n.mtl.flights.get_mut(i)) {
            Some(f) if f.op.peer == CLAIMED => {
                f.op.peer = 0;
                std::ptr::addr_of_mut!(f.op).cast::<c_void>()
            }
            _ => return Err(format!("no claimed message {claim}")),
        };
        let desc = n.mtl_desc(idx.expect("claimed above"), buf, len, fi::FI_RECV)?;
        // SAFETY: as for `recv`: the boxed context is the peek's, as FI_CLAIM requires.
        n.mtl_post("fi_trecvmsg(FI_CLAIM)", |n| unsafe {
            n.fab.trecv_match(buf, len, desc, 0, 0, ctx, fi::FI_CLAIM)
        })?;
        Ok(claim)
    }

    /// Sends the `desc` bytes (copied into the operation) to world rank `dest` with `tag`
    /// and `data` as remote completion data (`fi_tsenddata`); its token.
    pub(crate) fn send_data(
        &self,
        dest: usize,
        tag: u64,
        desc: &[u8],
        data: u64,
    ) -> Result<u64, String> {
        let mut n = lock(&self.net);
        let to = Self::addr(&n, dest)?;
        let copy = desc.to_vec();
        let (buf, len) = (copy.as_ptr(), copy.len());
        let (idx, tok, ctx) = n.mtl_flight(copy);
        // SAFETY: the flight's copy and the boxed context live until the completion.
        n.mtl_start(idx, buf, len, fi::FI_SEND, "fi_tsenddata", |n, d| unsafe {
            n.fab.tsenddata(buf, len, d, data, to, tag, ctx)
        })?;
        Ok(tok)
    }

    /// Whether peers can read registered memory of ours (`FI_RMA`).
    pub(crate) fn reads(&self) -> bool {
        lock(&self.net).fab.rma
    }

    /// The provider's inject size.
    pub(crate) fn inject(&self) -> usize {
        lock(&self.net).fab.inject
    }

    /// Registers `len` bytes at `buf` for peers to read: its id (for [`Mtl::unexpose`]),
    /// the key and the address a peer reads it at.
    ///
    /// # Safety
    /// `buf` must stay valid for reads of `len` bytes until [`Mtl::unexpose`].
    pub(crate) unsafe fn expose(
        &self,
        buf: *const u8,
        len: usize,
    ) -> Result<(u64, u64, u64), String> {
        let mut n = lock(&self.net);
        // SAFETY: the caller keeps the buffer valid until the registration is closed.
        let m = unsafe { n.fab.register_user(buf, len, fi::FI_REMOTE_READ)? };
        let addr = if n.fab.mr_virt { buf as u64 } else { 0 };
        let key = m.key;
        let id = n.mtl.next_exposed;
        n.mtl.next_exposed += 1;
        n.mtl.exposed.insert(id, m);
        Ok((id, key, addr))
    }

    /// Closes the registration [`Mtl::expose`] returned `id` for.
    pub(crate) fn unexpose(&self, id: u64) {
        let mut n = lock(&self.net);
        if let Some(m) = n.mtl.exposed.remove(&id) {
            if !n.closed {
                n.fab.deregister(m);
            }
        }
    }

    /// Reads `len` bytes of world rank `src`'s memory registered under `key` at `addr`
    /// into `buf` (`fi_read`); its token.
    ///
    /// # Safety
    /// `buf` must stay valid for writes of `len` bytes until the token's completion.
    pub(crate) unsafe fn read(
        &self,
        src: usize,
        buf: *mut u8,
        len: usize,
        addr: u64,
        key: u64,
    ) -> Result<u64, String> {
        let mut n = lock(&self.net);
        let from = Self::addr(&n, src)?;
        let (idx, tok, ctx) = n.mtl_flight(Vec::new());
        // SAFETY: buf (the caller keeps it valid) and the boxed context live until the
        // completion.
        n.mtl_start(idx, buf, len, fi::FI_READ, "fi_read", |n, d| unsafe {
            n.fab.rma_read(buf, len, d, from, addr, key, ctx)
        })?;
        Ok(tok)
    }

    /// Asks the provider to cancel operation `tok` (`fi_cancel`): if it had not matched, it
    /// completes with `FI_ECANCELED`.
    pub(crate) fn cancel(&self, tok: u64) {
        let n = lock(&self.net);
        if let Some(f) = n
            .mtl
            .flights
            .by_token(tok)
            .and_then(|i| n.mtl.flights.get(i))
        {
            let ctx = std::ptr::addr_of!(f.op).cast_mut().cast::<c_void>();
            let _ = n.fab.cancel(ctx);
        }
    }

    /// Reads the completion queue and hands out the offload's completions since the last
    /// call (into `out`); also fails the whole endpoint's error, if any.
    pub(crate) fn poll(&self, out: &mut Vec<(u64, Cq)>) -> Result<(), String> {
        let mut n = lock(&self.net);
        if n.closed {
            return Err("the ofi transport is closed".into());
        }
        n.progress();
        out.append(&mut n.mtl.done);
        match &n.fatal {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// The offload is done with the endpoint (finalize): the fabric closes once the btl's
    /// links have closed too.
    pub(crate) fn close(&self) {
        let mut n = lock(&self.net);
        n.mtl.open = false;
        if !n.closed {
            n.maybe_close();
        }
        if n.closed {
            // The endpoint is closed: nothing refers to the contexts, the registrations
            // went with the domain.
            n.mtl.flights.clear();
        }
    }
}
