//! Collective algorithms and communicator construction over the point-to-point engine.
//!
//! Everything here moves **contiguous bytes**; datatypes are the caller's business (the C ABI
//! packs non-contiguous data first). Reductions are given as an [`Op`]: a callback
//! `f(in, inout)` computing `inout = in ∘ inout` elementwise (MPI's user-function order), the
//! element size (blocks are only ever split at element boundaries) and whether `∘` commutes.
//! For non-commutative operations every algorithm combines in rank order
//! (`x0 ∘ x1 ∘ … ∘ x(p-1)`).
//!
//! # Hidden collective context
//!
//! Collective traffic of a communicator whose context id is `c` travels on a *shadow* engine
//! communicator with context id `c | COLL_BIT` (bit 31, [`COLL_BIT`]) over the same group, so
//! it can never match user point-to-point messages (not even `MPI_ANY_TAG` receives). The
//! shadow is created lazily on the first collective ([`CollComm::new`]) — every member derives
//! the same id without communication — and removed by [`release`]. Each collective uses its
//! own tag on the shadow (collectives on one communicator are ordered by the MPI standard,
//! and the engine does not overtake between one pair of ranks).
//!
//! # Context ids of new communicators
//!
//! Context ids of user communicators stay below `COLL_BIT`. Every process keeps the next id
//! it has not used yet (starting at 2: world is 0, self is 1). `dup`, `split` and `create`
//! agree on a new id by an allreduce(MAX) of every member's next free id over the parent; all
//! members then set their next free id past the agreed one. Ids are never reused. Disjoint
//! results of one `split` share the id (a process belongs to only one of them).
//! `create_group` (collective over the new group only) runs the same agreement with
//! point-to-point messages among the group members on the parent's shadow, with a tag
//! derived from the caller's tag. Limitation: two threads creating communicators at the
//! same time (on different parents) may pick the same id; comm creation must be serialized
//! per process.
//!
//! # Algorithms
//!
//! | collective | algorithms (automatic choice first) |
//! |---|---|
//! | barrier | dissemination; linear |
//! | bcast | binomial tree (≤ [`tune::BCAST_SMALL`] bytes, or 2 ranks); scatter + ring allgather; linear; pipelined chain ([`tune::BCAST_SEGMENT`]-byte segments) |
//! | reduce | binomial (commutative: rooted tree; non-commutative: tree at rank 0 in rank order, result forwarded to the root); linear in rank order |
//! | allreduce | recursive doubling (small or non-commutative); Rabenseifner (large, commutative, more than 2 ranks); ring reduce-scatter + ring allgather (large, commutative, 2 ranks); reduce + bcast |
//! | gather, scatter | binomial tree (blocks ≤ [`tune::GATHER_SMALL`] bytes, more than 2 ranks); linear |
//! | gatherv, scatterv | linear (the root posts all transfers at once) |
//! | allgather | recursive doubling (power-of-two sizes); ring |
//! | allgatherv | ring |
//! | alltoall | linear, all transfers posted at once (≤ [`tune::ALLTOALL_LINEAR_MAX`] ranks); Bruck (blocks ≤ [`tune::ALLTOALL_SMALL`] bytes); pairwise exchange |
//! | alltoallv | pairwise exchange |
//! | reduce_scatter | ring (commutative); reduce + scatterv (non-commutative) |
//! | scan, exscan | recursive doubling (MPICH's order-preserving scheme) |
//!
//! The choice can be forced per collective with `OXMPI_MCA_coll_tuned_<coll>_algorithm`
//! (see [`tune`]).

#![warn(missing_docs)]

pub mod base;
pub mod nbc;
pub mod op;
pub use nbc::sched;
pub mod sm;
pub mod tune;

pub use tune::PROVIDER;

use oxmpi_engine::{CommId, Engine, Error, ErrorClass, ReqId, SendMode, Status};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use tune::Coll;

/// A 16-byte aligned scratch block (reductions on it need the element type's alignment).
#[repr(align(16))]
struct Aligned([u8; 256]);

/// Bit set in the context id of the hidden collective communicator.
pub const COLL_BIT: u32 = 1 << 31;

const TAG_BARRIER: i32 = 1;
const TAG_BCAST: i32 = 2;
const TAG_REDUCE: i32 = 3;
const TAG_ALLREDUCE: i32 = 4;
const TAG_GATHER: i32 = 5;
const TAG_SCATTER: i32 = 6;
const TAG_ALLGATHER: i32 = 7;
const TAG_ALLTOALL: i32 = 8;
const TAG_REDSCAT: i32 = 9;
const TAG_SCAN: i32 = 10;
const TAG_EXSCAN: i32 = 11;
const TAG_CREATE_GROUP: i32 = 1 << 20;
const TAG_NEIGHBOR: i32 = 1 << 19;

/// A reduction operation on bytes.
#[derive(Clone, Copy)]
pub struct Op<'a> {
    /// `f(in, inout)`: `inout[i] = in[i] ∘ inout[i]` for every element of the slices (both
    /// have the same length, a multiple of `elem_size`).
    pub f: &'a dyn Fn(&[u8], &mut [u8]),
    /// Size of one element in bytes (at least 1); vectors are split only between elements.
    pub elem_size: usize,
    /// `∘` is commutative (algorithms may then combine in any order).
    pub commutative: bool,
}

/// Result type of this crate (errors are the engine's, with an MPI error class).
pub type Result<T> = std::result::Result<T, Error>;

fn arg_err(class: ErrorClass, msg: impl Into<String>) -> Error {
    Error::Arg {
        class,
        msg: msg.into(),
    }
}

/// Shadow communicators, by user communicator.
static SHADOWS: Mutex<Option<HashMap<CommId, CommId>>> = Mutex::new(None);
/// Next context id this process has not used.
static NEXT_CTX: AtomicU32 = AtomicU32::new(2);

/// A communicator ready for collectives: the user communicator and its hidden shadow.
#[derive(Clone, Copy, Debug)]
pub struct CollComm {
    e: &'static Engine,
    /// The user communicator.
    pub comm: CommId,
    shadow: CommId,
    /// Our rank.
    pub rank: i32,
    /// Number of members.
    pub size: i32,
}

/// Removes the shadow of `comm` (call before or after freeing `comm` in the engine).
pub fn release(e: &Engine, comm: CommId) -> Result<()> {
    let shadow = SHADOWS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_mut()
        .and_then(|m| m.remove(&comm));
    match shadow {
        Some(s) => e.comm_free(s),
        None => Ok(()),
    }
}

/// Frees a communicator created by this crate together with its shadow.
pub fn comm_free(e: &Engine, comm: CommId) -> Result<()> {
    release(e, comm)?;
    e.comm_free(comm)
}

impl CollComm {
    /// The collective view of `comm` (creates its shadow on first use).
    pub fn new(e: &'static Engine, comm: CommId) -> Result<CollComm> {
        let rank = e.comm_rank(comm)?;
        let size = e.comm_size(comm)?;
        let mut g = SHADOWS.lock().unwrap_or_else(|p| p.into_inner());
        let map = g.get_or_insert_with(HashMap::new);
        let shadow = match map.get(&comm) {
            Some(&s) => s,
            None => {
                let ctx = e.comm_context(comm)?;
                if ctx & COLL_BIT != 0 {
                    return Err(arg_err(
                        ErrorClass::Comm,
                        format!("context id {ctx:#x} has the collective bit set"),
                    ));
                }
                let s = e.comm_create(ctx | COLL_BIT, e.comm_group(comm)?)?;
                map.insert(comm, s);
                s
            }
        };
        Ok(CollComm {
            e,
            comm,
            shadow,
            rank,
            size,
        })
    }

    /// The collective view of `comm` whose collective traffic travels on `traffic`, an
    /// engine communicator over the same group that the caller dedicates to collectives
    /// (e.g. the C ABI's per-communicator collective context). No shadow is created.
    pub fn on_context(e: &'static Engine, comm: CommId, traffic: CommId) -> Result<CollComm> {
        let rank = e.comm_rank(traffic)?;
        let size = e.comm_size(traffic)?;
        Ok(CollComm {
            e,
            comm,
            shadow: traffic,
            rank,
            size,
        })
    }

    /// Like [`CollComm::on_context`] with our `rank` in `traffic` and its `size` already
    /// known by the caller (no engine call: the small-message fast path).
    pub fn on_context_known(
        e: &'static Engine,
        comm: CommId,
        traffic: CommId,
        rank: i32,
        size: i32,
    ) -> CollComm {
        CollComm {
            e,
            comm,
            shadow: traffic,
            rank,
            size,
        }
    }

    // ---- point-to-point helpers on the shadow ----

    /// # Safety
    /// `p` valid for `len` bytes until the request completes.
    unsafe fn isend_raw(&self, p: *const u8, len: usize, dest: i32, tag: i32) -> Result<ReqId> {
        // SAFETY: forwarded caller guarantee.
        unsafe {
            self.e
                .isend(p, len, dest, tag, self.shadow, SendMode::Standard)
        }
    }

    /// # Safety
    /// `p` valid for writes of `len` bytes until the request completes.
    unsafe fn irecv_raw(&self, p: *mut u8, len: usize, src: i32, tag: i32) -> Result<ReqId> {
        // SAFETY: forwarded caller guarantee.
        unsafe { self.e.irecv(p, len, src, tag, self.shadow) }
    }

    fn check(&self, st: Status, what: &str, peer: i32) -> Result<usize> {
        match st.error {
            None => Ok(st.count_bytes),
            Some(class) => Err(arg_err(
                class,
                format!(
                    "collective {what} with rank {peer} failed on rank {} (of {})",
                    self.rank, self.size
                ),
            )),
        }
    }

    /// Waits for every request (all of them, even after an error); the first error wins.
    fn waitall(&self, reqs: &[(ReqId, i32)], what: &str) -> Result<()> {
        let mut res = Ok(());
        for &(r, peer) in reqs {
            let st = self.e.wait(r);
            if res.is_ok() {
                res = self.check(st, what, peer).map(|_| ());
            }
        }
        res
    }

    /// Cancels posted receives and waits for all requests (error path).
    fn abandon(&self, reqs: &[(ReqId, i32)]) {
        for &(r, _) in reqs {
            self.e.cancel(r);
        }
        for &(r, _) in reqs {
            self.e.wait(r);
        }
    }

    fn send(&self, buf: &[u8], dest: i32, tag: i32) -> Result<()> {
        // SAFETY: `buf` outlives the wait.
        let r = unsafe { self.isend_raw(buf.as_ptr(), buf.len(), dest, tag) }?;
        let st = self.e.wait(r);
        self.check(st, "send", dest).map(|_| ())
    }

    fn recv(&self, buf: &mut [u8], src: i32, tag: i32) -> Result<usize> {
        // SAFETY: `buf` outlives the wait.
        let r = unsafe { self.irecv_raw(buf.as_mut_ptr(), buf.len(), src, tag) }?;
        let st = self.e.wait(r);
        self.check(st, "receive", src)
    }

    /// # Safety
    /// `s` readable for `slen` bytes, `r` writable for `rlen` bytes, not overlapping.
    #[allow(clippy::too_many_arguments)]
    unsafe fn sendrecv_raw(
        &self,
        s: *const u8,
        slen: usize,
        dest: i32,
        r: *mut u8,
        rlen: usize,
        src: i32,
        tag: i32,
    ) -> Result<usize> {
        // SAFETY: caller guarantee; both requests are waited for below.
        let rr = unsafe { self.irecv_raw(r, rlen, src, tag) }?;
        // SAFETY: as above.
        let sr = match unsafe { self.isend_raw(s, slen, dest, tag) } {
            Ok(x) => x,
            Err(e) => {
                self.abandon(&[(rr, src)]);
                return Err(e);
            }
        };
        let rst = self.e.wait(rr);
        let sst = self.e.wait(sr);
        let n = self.check(rst, "receive", src)?;
        self.check(sst, "send", dest)?;
        Ok(n)
    }

    fn sendrecv(&self, s: &[u8], dest: i32, r: &mut [u8], src: i32, tag: i32) -> Result<usize> {
        // SAFETY: distinct borrows, both outlive the call.
        unsafe { self.sendrecv_raw(s.as_ptr(), s.len(), dest, r.as_mut_ptr(), r.len(), src, tag) }
    }

    fn modp(&self, x: i32) -> i32 {
        x.rem_euclid(self.size)
    }

    // ---- barrier ----

    /// `MPI_Barrier`.
    pub fn barrier(&self) -> Result<()> {
        let p = self.size;
        let r = self.rank;
        if p == 1 {
            return Ok(());
        }
        if tune::algorithm(Coll::Barrier) == 1 {
            let mut b = [0u8; 0];
            if r == 0 {
                for i in 1..p {
                    self.recv(&mut b, i, TAG_BARRIER)?;
                }
                for i in 1..p {
                    self.send(&b, i, TAG_BARRIER)?;
                }
            } else {
                self.send(&b, 0, TAG_BARRIER)?;
                self.recv(&mut b, 0, TAG_BARRIER)?;
            }
            return Ok(());
        }
        let mut k = 1;
        while k < p {
            self.sendrecv(
                &[],
                self.modp(r + k),
                &mut [],
                self.modp(r - k),
                TAG_BARRIER,
            )?;
            k <<= 1;
        }
        Ok(())
    }

    // ---- bcast ----

    /// `MPI_Bcast` of `buf` (the same length on every rank) from `root`.
    pub fn bcast(&self, buf: &mut [u8], root: i32) -> Result<()> {
        self.check_root(root)?;
        if self.size == 1 || buf.is_empty() {
            return Ok(());
        }
        match tune::algorithm(Coll::Bcast) {
            1 => self.bcast_linear(buf, root),
            3 => self.bcast_pipeline(buf, root, tune::BCAST_SEGMENT),
            6 => self.bcast_binomial(buf, root),
            8 | 9 => self.bcast_scatter_allgather(buf, root),
            _ if buf.len() <= tune::BCAST_SMALL
                || buf.len() < self.size as usize
                || self.size <= 2 =>
            {
                self.bcast_binomial(buf, root)
            }
            _ => self.bcast_scatter_allgather(buf, root),
        }
    }

    fn check_root(&self, root: i32) -> Result<()> {
        if root < 0 || root >= self.size {
            return Err(arg_err(
                ErrorClass::Rank,
                format!("root {root} not in 0..{}", self.size),
            ));
        }
        Ok(())
    }

    fn bcast_linear(&self, buf: &mut [u8], root: i32) -> Result<()> {
        if self.rank == root {
            let mut reqs = Vec::new();
            for i in (0..self.size).filter(|&i| i != root) {
                // SAFETY: `buf` outlives the waitall below.
                match unsafe { self.isend_raw(buf.as_ptr(), buf.len(), i, TAG_BCAST) } {
                    Ok(q) => reqs.push((q, i)),
                    Err(e) => {
                        self.abandon(&reqs);
                        return Err(e);
                    }
                }
            }
            self.waitall(&reqs, "bcast")
        } else {
            self.recv(buf, root, TAG_BCAST).map(|_| ())
        }
    }

    /// Pipelined broadcast along the chain `root, root + 1, …` (mod size): the message
    /// moves in `seg`-byte segments, each rank forwarding segment `i` while it receives
    /// segment `i + 1`.
    fn bcast_pipeline(&self, buf: &mut [u8], root: i32, seg: usize) -> Result<()> {
        let rel = self.modp(self.rank - root);
        let prev = self.modp(self.rank - 1);
        let next = (rel + 1 < self.size).then(|| self.modp(self.rank + 1));
        let seg = seg.max(1);
        let base = buf.as_mut_ptr();
        let len = buf.len();
        let mut sends = Vec::new();
        let mut res = Ok(());
        for off in (0..len).step_by(seg) {
            let n = seg.min(len - off);
            if rel != 0 {
                // SAFETY: segment `off..off + n` of `buf`; no send of it is pending yet.
                let r = unsafe { self.irecv_raw(base.add(off), n, prev, TAG_BCAST) }
                    .and_then(|q| self.check(self.e.wait(q), "bcast receive", prev));
                if let Err(e) = r {
                    res = Err(e);
                    break;
                }
            }
            if let Some(next) = next {
                // SAFETY: the segment stays untouched until the waitall below.
                match unsafe { self.isend_raw(base.add(off), n, next, TAG_BCAST) } {
                    Ok(q) => sends.push((q, next)),
                    Err(e) => {
                        res = Err(e);
                        break;
                    }
                }
            }
        }
        let done = self.waitall(&sends, "bcast send");
        res.and(done)
    }

    fn bcast_binomial(&self, buf: &mut [u8], root: i32) -> Result<()> {
        let p = self.size;
        let rel = self.modp(self.rank - root);
        let mut mask = 1;
        while mask < p {
            if rel & mask != 0 {
                self.recv(buf, self.modp(rel - mask + root), TAG_BCAST)?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if rel + mask < p {
                self.send(buf, self.modp(rel + mask + root), TAG_BCAST)?;
            }
            mask >>= 1;
        }
        Ok(())
    }

    fn bcast_scatter_allgather(&self, buf: &mut [u8], root: i32) -> Result<()> {
        let p = self.size as usize;
        let (counts, displs) = split_even(buf.len(), 1, p);
        let rel = self.modp(self.rank - root) as usize;
        // Block j belongs to rank (j + root) mod p.
        if rel == 0 {
            let mut reqs = Vec::new();
            for j in 1..p {
                let dest = self.modp(j as i32 + root);
                // SAFETY: `buf` outlives the waitall; the block is in bounds.
                let q = unsafe {
                    self.isend_raw(buf.as_ptr().add(displs[j]), counts[j], dest, TAG_BCAST)
                };
                match q {
                    Ok(q) => reqs.push((q, dest)),
                    Err(e) => {
                        self.abandon(&reqs);
                        return Err(e);
                    }
                }
            }
            self.waitall(&reqs, "bcast scatter")?;
        } else {
            let b = &mut buf[displs[rel]..displs[rel] + counts[rel]];
            self.recv(b, root, TAG_BCAST)?;
        }
        self.ring_allgatherv(buf, &counts, &displs, root, TAG_BCAST)
    }

    // ---- allgather ----

    /// Ring allgather: block `j` (`counts[j]` bytes at `displs[j]`) initially sits on rank
    /// `(j + shift) mod p`; afterwards every rank has every block.
    fn ring_allgatherv(
        &self,
        buf: &mut [u8],
        counts: &[usize],
        displs: &[usize],
        shift: i32,
        tag: i32,
    ) -> Result<()> {
        let p = self.size;
        if p == 1 {
            return Ok(());
        }
        check_blocks(buf.len(), counts, displs)?;
        let myb = self.modp(self.rank - shift);
        let right = self.modp(self.rank + 1);
        let left = self.modp(self.rank - 1);
        let base = buf.as_mut_ptr();
        for s in 0..p - 1 {
            let sb = (myb - s).rem_euclid(p) as usize;
            let rb = (myb - s - 1).rem_euclid(p) as usize;
            // SAFETY: blocks are in bounds (checked) and distinct blocks do not overlap
            // (sb != rb since p > 1); `buf` is borrowed for the whole call.
            unsafe {
                self.sendrecv_raw(
                    base.add(displs[sb]),
                    counts[sb],
                    right,
                    base.add(displs[rb]),
                    counts[rb],
                    left,
                    tag,
                )?;
            }
        }
        Ok(())
    }

    /// `MPI_Allgather` in place: `buf` holds `size` blocks of `block` bytes, our own block
    /// already at `rank * block`.
    pub fn allgather(&self, buf: &mut [u8], block: usize) -> Result<()> {
        let p = self.size as usize;
        if buf.len() != block * p {
            return Err(arg_err(
                ErrorClass::Count,
                "allgather buffer is not size * block bytes",
            ));
        }
        let pow2 = p.is_power_of_two();
        match tune::algorithm(Coll::Allgather) {
            4 => self.allgather_ring(buf, block),
            3 if pow2 => self.allgather_recdbl(buf, block),
            _ if pow2 => self.allgather_recdbl(buf, block),
            _ => self.allgather_ring(buf, block),
        }
    }

    fn allgather_ring(&self, buf: &mut [u8], block: usize) -> Result<()> {
        let p = self.size as usize;
        let counts = vec![block; p];
        let displs: Vec<usize> = (0..p).map(|i| i * block).collect();
        self.ring_allgatherv(buf, &counts, &displs, 0, TAG_ALLGATHER)
    }

    fn allgather_recdbl(&self, buf: &mut [u8], block: usize) -> Result<()> {
        let p = self.size;
        let r = self.rank;
        let base = buf.as_mut_ptr();
        let mut mask = 1;
        while mask < p {
            let partner = r ^ mask;
            let mine = (r & !(mask - 1)) as usize * block;
            let theirs = (partner & !(mask - 1)) as usize * block;
            let n = mask as usize * block;
            // SAFETY: both ranges are `mask` whole blocks inside `buf` (p is a power of
            // two) and disjoint (different halves of an aligned 2*mask group).
            unsafe {
                self.sendrecv_raw(
                    base.add(mine),
                    n,
                    partner,
                    base.add(theirs),
                    n,
                    partner,
                    TAG_ALLGATHER,
                )?;
            }
            mask <<= 1;
        }
        Ok(())
    }

    /// `MPI_Allgatherv` in place: block `i` is `counts[i]` bytes at `displs[i]` of `buf`;
    /// our own block is already in place. Blocks must not overlap.
    pub fn allgatherv(&self, buf: &mut [u8], counts: &[usize], displs: &[usize]) -> Result<()> {
        self.check_vec_len(counts, displs)?;
        self.ring_allgatherv(buf, counts, displs, 0, TAG_ALLGATHER)
    }

    fn check_vec_len(&self, counts: &[usize], displs: &[usize]) -> Result<()> {
        if counts.len() != self.size as usize || displs.len() != self.size as usize {
            return Err(arg_err(
                ErrorClass::Count,
                format!(
                    "counts/displacements must have {} entries, got {}/{}",
                    self.size,
                    counts.len(),
                    displs.len()
                ),
            ));
        }
        Ok(())
    }

    // ---- gather / scatter ----

    /// `MPI_Gatherv`: `send` goes to block `rank` (`counts[rank]` bytes at
    /// `displs[rank]`) of `recv` on `root`. `recv`, `counts` and `displs` are only used at
    /// the root. `send.len()` must equal `counts[rank]` as seen by the root.
    pub fn gatherv(
        &self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
        root: i32,
    ) -> Result<()> {
        self.check_root(root)?;
        if self.rank != root {
            return self.send(send, root, TAG_GATHER);
        }
        self.check_vec_len(counts, displs)?;
        check_blocks(recv.len(), counts, displs)?;
        let r = root as usize;
        if send.len() != counts[r] {
            return Err(arg_err(
                ErrorClass::Truncate,
                "root's send size differs from its receive count",
            ));
        }
        recv[displs[r]..displs[r] + counts[r]].copy_from_slice(send);
        let base = recv.as_mut_ptr();
        let mut reqs = Vec::new();
        for i in (0..self.size).filter(|&i| i != root) {
            let iu = i as usize;
            // SAFETY: the block is in bounds (checked); `recv` outlives the waitall.
            match unsafe { self.irecv_raw(base.add(displs[iu]), counts[iu], i, TAG_GATHER) } {
                Ok(q) => reqs.push((q, i)),
                Err(e) => {
                    self.abandon(&reqs);
                    return Err(e);
                }
            }
        }
        self.waitall(&reqs, "gather")
    }

    /// `MPI_Gather`: blocks of `send.len()` bytes, in rank order, into `recv` at the root.
    pub fn gather(&self, send: &[u8], recv: &mut [u8], root: i32) -> Result<()> {
        let p = self.size as usize;
        let b = send.len();
        self.check_root(root)?;
        let binomial = match tune::algorithm(Coll::Gather) {
            1 => false,
            2 => true,
            _ => p > 2 && b <= tune::GATHER_SMALL,
        };
        if binomial && p > 1 {
            if self.rank == root && recv.len() < p * b {
                return Err(arg_err(
                    ErrorClass::Truncate,
                    "gather receive buffer is smaller than size * block",
                ));
            }
            return self.gather_binomial(send, recv, root);
        }
        let counts = vec![b; p];
        let displs: Vec<usize> = (0..p).map(|i| i * b).collect();
        self.gatherv(send, recv, &counts, &displs, root)
    }

    /// Blocks a binomial-tree node at relative rank `rel` handles: its own and those of its
    /// subtree (relative ranks `rel..rel + n`).
    fn subtree(&self, rel: usize) -> usize {
        let p = self.size as usize;
        let low = if rel == 0 {
            p
        } else {
            1 << rel.trailing_zeros()
        };
        low.min(p - rel)
    }

    /// Binomial gather: every node collects its subtree's blocks (relative rank order) and
    /// forwards them to its parent; the root finally rotates them into rank order.
    fn gather_binomial(&self, send: &[u8], recv: &mut [u8], root: i32) -> Result<()> {
        let p = self.size as usize;
        let b = send.len();
        let rel = self.modp(self.rank - root) as usize;
        if rel == 0 && root == 0 {
            return self.gather_tree(send, &mut recv[..p * b], rel, root);
        }
        let mut tmp = vec![0u8; self.subtree(rel) * b];
        self.gather_tree(send, &mut tmp, rel, root)?;
        if rel == 0 {
            for i in 0..p {
                let abs = (i + root as usize) % p;
                recv[abs * b..(abs + 1) * b].copy_from_slice(&tmp[i * b..(i + 1) * b]);
            }
        }
        Ok(())
    }

    /// The tree part of [`CollComm::gather_binomial`]: `tmp` has room for the subtree.
    fn gather_tree(&self, send: &[u8], tmp: &mut [u8], rel: usize, root: i32) -> Result<()> {
        let p = self.size as usize;
        let b = send.len();
        let n = self.subtree(rel);
        tmp[..b].copy_from_slice(send);
        let mut mask = 1;
        while mask < p {
            if rel & mask != 0 {
                let parent = self.modp((rel - mask) as i32 + root);
                return self.send(&tmp[..n * b], parent, TAG_GATHER);
            }
            let child = rel + mask;
            if child < p {
                let k = mask.min(p - child);
                let from = self.modp(child as i32 + root);
                self.recv(&mut tmp[mask * b..(mask + k) * b], from, TAG_GATHER)?;
            }
            mask <<= 1;
        }
        Ok(())
    }

    /// `MPI_Scatterv`: block `i` of `send` at the root (`counts[i]` bytes at `displs[i]`)
    /// lands in `recv` of rank `i`. `send`, `counts`, `displs` are only used at the root.
    pub fn scatterv(
        &self,
        send: &[u8],
        counts: &[usize],
        displs: &[usize],
        recv: &mut [u8],
        root: i32,
    ) -> Result<()> {
        self.check_root(root)?;
        if self.rank != root {
            return self.recv(recv, root, TAG_SCATTER).map(|_| ());
        }
        self.check_vec_len(counts, displs)?;
        check_blocks_ro(send.len(), counts, displs)?;
        let r = root as usize;
        if recv.len() < counts[r] {
            return Err(arg_err(
                ErrorClass::Truncate,
                "root's receive buffer is smaller than its block",
            ));
        }
        recv[..counts[r]].copy_from_slice(&send[displs[r]..displs[r] + counts[r]]);
        let mut reqs = Vec::new();
        for i in (0..self.size).filter(|&i| i != root) {
            let iu = i as usize;
            // SAFETY: the block is in bounds (checked); `send` outlives the waitall.
            match unsafe {
                self.isend_raw(send.as_ptr().add(displs[iu]), counts[iu], i, TAG_SCATTER)
            } {
                Ok(q) => reqs.push((q, i)),
                Err(e) => {
                    self.abandon(&reqs);
                    return Err(e);
                }
            }
        }
        self.waitall(&reqs, "scatter")
    }

    /// `MPI_Scatter`: blocks of `recv.len()` bytes of `send` (root) in rank order.
    pub fn scatter(&self, send: &[u8], recv: &mut [u8], root: i32) -> Result<()> {
        let p = self.size as usize;
        let b = recv.len();
        self.check_root(root)?;
        let binomial = match tune::algorithm(Coll::Scatter) {
            1 => false,
            2 => true,
            _ => p > 2 && b <= tune::GATHER_SMALL,
        };
        if binomial && p > 1 {
            if self.rank == root && send.len() < p * b {
                return Err(arg_err(
                    ErrorClass::Count,
                    "scatter send buffer is smaller than size * block",
                ));
            }
            return self.scatter_binomial(send, recv, root);
        }
        let counts = vec![b; p];
        let displs: Vec<usize> = (0..p).map(|i| i * b).collect();
        self.scatterv(send, &counts, &displs, recv, root)
    }

    /// Binomial scatter: the root holds every block (relative rank order); each node
    /// receives its subtree's blocks from its parent and hands its children theirs.
    fn scatter_binomial(&self, send: &[u8], recv: &mut [u8], root: i32) -> Result<()> {
        let p = self.size as usize;
        let b = recv.len();
        let rel = self.modp(self.rank - root) as usize;
        let n = self.subtree(rel);
        let mut own = Vec::new();
        let tmp: &[u8] = if rel == 0 && root == 0 {
            &send[..p * b]
        } else if rel == 0 {
            own.reserve(p * b);
            for i in 0..p {
                let abs = (i + root as usize) % p;
                own.extend_from_slice(&send[abs * b..(abs + 1) * b]);
            }
            &own
        } else {
            own.resize(n * b, 0);
            let mut mask = 1;
            while rel & mask == 0 {
                mask <<= 1;
            }
            let parent = self.modp((rel - mask) as i32 + root);
            self.recv(&mut own, parent, TAG_SCATTER)?;
            &own
        };
        let mut mask = if rel == 0 {
            p.next_power_of_two()
        } else {
            1 << rel.trailing_zeros()
        } >> 1;
        while mask > 0 {
            let child = rel + mask;
            if child < p {
                let k = mask.min(p - child);
                let to = self.modp(child as i32 + root);
                self.send(&tmp[mask * b..(mask + k) * b], to, TAG_SCATTER)?;
            }
            mask >>= 1;
        }
        recv.copy_from_slice(&tmp[..b]);
        Ok(())
    }

    // ---- alltoall ----

    /// `MPI_Alltoall`: block `i` (`block` bytes) of `send` goes to rank `i`, block `j` of
    /// `recv` comes from rank `j`.
    pub fn alltoall(&self, send: &[u8], recv: &mut [u8], block: usize) -> Result<()> {
        let p = self.size as usize;
        if send.len() != p * block || recv.len() != p * block {
            return Err(arg_err(
                ErrorClass::Count,
                "alltoall buffers are not size * block bytes",
            ));
        }
        match tune::algorithm(Coll::Alltoall) {
            1 => self.alltoall_linear(send, recv, block),
            2 => self.alltoall_pairwise(send, recv, block),
            3 => self.alltoall_bruck(send, recv, block),
            _ if p <= tune::ALLTOALL_LINEAR_MAX => self.alltoall_linear(send, recv, block),
            _ if block <= tune::ALLTOALL_SMALL => self.alltoall_bruck(send, recv, block),
            _ => self.alltoall_pairwise(send, recv, block),
        }
    }

    /// Linear alltoall: every receive and send posted at once, then all waited for (one
    /// round of waiting: best for few ranks, especially when they share cores).
    fn alltoall_linear(&self, send: &[u8], recv: &mut [u8], block: usize) -> Result<()> {
        let p = self.size as usize;
        let r = self.rank as usize;
        recv[r * block..(r + 1) * block].copy_from_slice(&send[r * block..(r + 1) * block]);
        let base = recv.as_mut_ptr();
        let mut reqs = Vec::with_capacity(2 * p);
        for k in 1..p {
            let src = (r + p - k) % p;
            // SAFETY: block `src` is inside `recv` (length checked by the caller), distinct
            // per request; `recv` outlives the waitall.
            match unsafe { self.irecv_raw(base.add(src * block), block, src as i32, TAG_ALLTOALL) }
            {
                Ok(q) => reqs.push((q, src as i32)),
                Err(e) => {
                    self.abandon(&reqs);
                    return Err(e);
                }
            }
        }
        for k in 1..p {
            let dst = (r + k) % p;
            // SAFETY: block `dst` is inside `send`, which outlives the waitall.
            match unsafe {
                self.isend_raw(
                    send.as_ptr().add(dst * block),
                    block,
                    dst as i32,
                    TAG_ALLTOALL,
                )
            } {
                Ok(q) => reqs.push((q, dst as i32)),
                Err(e) => {
                    self.abandon(&reqs);
                    return Err(e);
                }
            }
        }
        self.waitall(&reqs, "alltoall")
    }

    fn alltoall_pairwise(&self, send: &[u8], recv: &mut [u8], block: usize) -> Result<()> {
        let p = self.size as usize;
        let counts = vec![block; p];
        let displs: Vec<usize> = (0..p).map(|i| i * block).collect();
        self.alltoallv(send, &counts, &displs, recv, &counts, &displs)
    }

    fn alltoall_bruck(&self, send: &[u8], recv: &mut [u8], block: usize) -> Result<()> {
        let p = self.size as usize;
        let r = self.rank as usize;
        // tmp[i] = the block for rank (r + i) mod p.
        let mut tmp = vec![0u8; p * block];
        for i in 0..p {
            let src = ((r + i) % p) * block;
            tmp[i * block..(i + 1) * block].copy_from_slice(&send[src..src + block]);
        }
        let mut sbuf = Vec::with_capacity(p * block);
        let mut rbuf = vec![0u8; p * block];
        let mut k = 1;
        while k < p {
            sbuf.clear();
            let idx: Vec<usize> = (0..p).filter(|i| i & k != 0).collect();
            for &i in &idx {
                sbuf.extend_from_slice(&tmp[i * block..(i + 1) * block]);
            }
            let n = sbuf.len();
            self.sendrecv(
                &sbuf,
                self.modp((r + k) as i32),
                &mut rbuf[..n],
                self.modp(r as i32 - k as i32),
                TAG_ALLTOALL,
            )?;
            for (j, &i) in idx.iter().enumerate() {
                tmp[i * block..(i + 1) * block].copy_from_slice(&rbuf[j * block..(j + 1) * block]);
            }
            k <<= 1;
        }
        // tmp[i] now holds the block from rank (r - i) mod p.
        for i in 0..p {
            let from = (r + p - i) % p;
            recv[from * block..(from + 1) * block]
                .copy_from_slice(&tmp[i * block..(i + 1) * block]);
        }
        Ok(())
    }

    /// `MPI_Alltoallv` (bytes): `scounts[i]` bytes at `sdispls[i]` of `send` go to rank `i`;
    /// `rcounts[j]` bytes from rank `j` land at `rdispls[j]` of `recv`. Pairwise exchange.
    pub fn alltoallv(
        &self,
        send: &[u8],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [u8],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<()> {
        self.check_vec_len(scounts, sdispls)?;
        self.check_vec_len(rcounts, rdispls)?;
        check_blocks_ro(send.len(), scounts, sdispls)?;
        check_blocks(recv.len(), rcounts, rdispls)?;
        let p = self.size;
        let r = self.rank;
        let ru = r as usize;
        if scounts[ru] > rcounts[ru] {
            return Err(arg_err(
                ErrorClass::Truncate,
                format!(
                    "alltoallv: rank {r} sends itself {} bytes into {}",
                    scounts[ru], rcounts[ru]
                ),
            ));
        }
        recv[rdispls[ru]..rdispls[ru] + scounts[ru]]
            .copy_from_slice(&send[sdispls[ru]..sdispls[ru] + scounts[ru]]);
        let base = recv.as_mut_ptr();
        for k in 1..p {
            let dst = self.modp(r + k) as usize;
            let src = self.modp(r - k) as usize;
            // SAFETY: blocks are in bounds (checked); `send` and `recv` are distinct borrows.
            unsafe {
                self.sendrecv_raw(
                    send.as_ptr().add(sdispls[dst]),
                    scounts[dst],
                    dst as i32,
                    base.add(rdispls[src]),
                    rcounts[src],
                    src as i32,
                    TAG_ALLTOALL,
                )?;
            }
        }
        Ok(())
    }

    // ---- reductions ----

    /// `MPI_Reduce` in place: `buf` holds our contribution; at `root` it receives the result.
    /// On other ranks `buf` is used as scratch (its content afterwards is unspecified).
    pub fn reduce(&self, buf: &mut [u8], root: i32, op: &Op) -> Result<()> {
        self.check_root(root)?;
        check_op(buf.len(), op)?;
        if self.size == 1 {
            return Ok(());
        }
        match tune::algorithm(Coll::Reduce) {
            1 => self.reduce_linear(buf, root, op, TAG_REDUCE),
            _ => self.reduce_binomial(buf, root, op, TAG_REDUCE),
        }
    }

    fn reduce_linear(&self, buf: &mut [u8], root: i32, op: &Op, tag: i32) -> Result<()> {
        if self.rank != root {
            return self.send(buf, root, tag);
        }
        let n = buf.len();
        let mut acc = vec![0u8; n];
        let mut tmp = vec![0u8; n];
        if root == 0 {
            acc.copy_from_slice(buf);
        } else {
            self.recv(&mut acc, 0, tag)?;
        }
        for i in 1..self.size {
            if i == root {
                tmp.copy_from_slice(buf);
            } else {
                self.recv(&mut tmp, i, tag)?;
            }
            (op.f)(&acc, &mut tmp); // tmp = acc ∘ x_i
            std::mem::swap(&mut acc, &mut tmp);
        }
        buf.copy_from_slice(&acc);
        Ok(())
    }

    fn reduce_binomial(&self, buf: &mut [u8], root: i32, op: &Op, tag: i32) -> Result<()> {
        let p = self.size;
        // Non-commutative: the tree is rooted at 0 so that every combination joins
        // adjacent rank ranges in order; the result then moves to the root.
        let troot = if op.commutative { root } else { 0 };
        let rel = self.modp(self.rank - troot);
        let mut tmp = vec![0u8; buf.len()];
        let mut mask = 1;
        while mask < p {
            if rel & mask == 0 {
                let src = rel | mask;
                if src < p {
                    self.recv(&mut tmp, self.modp(src + troot), tag)?;
                    if op.commutative {
                        (op.f)(&tmp, buf);
                    } else {
                        // buf holds ranks [rel, src), tmp holds [src, ...): buf ∘ tmp.
                        (op.f)(buf, &mut tmp);
                        buf.copy_from_slice(&tmp);
                    }
                }
            } else {
                self.send(buf, self.modp(rel - mask + troot), tag)?;
                break;
            }
            mask <<= 1;
        }
        if troot != root {
            if self.rank == troot {
                self.send(buf, root, tag)?;
            } else if self.rank == root {
                self.recv(buf, troot, tag)?;
            }
        }
        Ok(())
    }

    /// `MPI_Allreduce` in place: `buf` holds our contribution and receives the result.
    pub fn allreduce(&self, buf: &mut [u8], op: &Op) -> Result<()> {
        check_op(buf.len(), op)?;
        if self.size == 1 || buf.is_empty() {
            return Ok(());
        }
        let nelem = buf.len() / op.elem_size;
        let ring_ok = op.commutative && nelem >= self.size as usize;
        match tune::algorithm(Coll::Allreduce) {
            2 => {
                self.reduce_binomial(buf, 0, op, TAG_ALLREDUCE)?;
                self.bcast_binomial(buf, 0)
            }
            3 => self.allreduce_recdbl(buf, op),
            4 if ring_ok => self.allreduce_ring(buf, op),
            6 if ring_ok => self.allreduce_rabenseifner(buf, op),
            _ if ring_ok && buf.len() > tune::ALLREDUCE_SMALL && self.size > 2 => {
                self.allreduce_rabenseifner(buf, op)
            }
            _ if ring_ok && buf.len() > tune::ALLREDUCE_SMALL => self.allreduce_ring(buf, op),
            _ => self.allreduce_recdbl(buf, op),
        }
    }

    fn allreduce_recdbl(&self, buf: &mut [u8], op: &Op) -> Result<()> {
        let p = self.size;
        let r = self.rank;
        // Small vectors use a stack buffer (no allocation on the latency path).
        let mut small = Aligned([0u8; 256]);
        let mut heap = (buf.len() > small.0.len()).then(|| Scratch::new(buf.len()));
        let tmp: &mut [u8] = match heap.as_mut() {
            Some(h) => &mut h[..buf.len()],
            None => &mut small.0[..buf.len()],
        };
        let pof2 = 1 << (31 - (p as u32).leading_zeros());
        let rem = p - pof2;
        // Fold the first 2*rem ranks pairwise (even into odd) so that pof2 ranks remain.
        let newrank = if r < 2 * rem {
            if r % 2 == 0 {
                self.send(buf, r + 1, TAG_ALLREDUCE)?;
                -1
            } else {
                self.recv(tmp, r - 1, TAG_ALLREDUCE)?;
                (op.f)(tmp, buf); // lower rank first
                r / 2
            }
        } else {
            r - rem
        };
        if newrank >= 0 {
            let mut mask = 1;
            while mask < pof2 {
                let nd = newrank ^ mask;
                let dst = if nd < rem { nd * 2 + 1 } else { nd + rem };
                self.sendrecv(buf, dst, tmp, dst, TAG_ALLREDUCE)?;
                if op.commutative || dst < r {
                    (op.f)(tmp, buf);
                } else {
                    (op.f)(buf, tmp);
                    buf.copy_from_slice(tmp);
                }
                mask <<= 1;
            }
        }
        if r < 2 * rem {
            if r % 2 == 1 {
                self.send(buf, r - 1, TAG_ALLREDUCE)?;
            } else {
                self.recv(buf, r + 1, TAG_ALLREDUCE)?;
            }
        }
        Ok(())
    }

    /// Rabenseifner's allreduce (commutative ops): the first `2 * rem` ranks fold pairwise
    /// so that a power of two `pof2` remain; those run a recursive-halving reduce-scatter
    /// (each step exchanges half of the range still owned with the partner at distance
    /// `mask`, keeping and reducing the other half) and then a recursive-doubling allgather
    /// of the reduced blocks; the folded ranks finally get the result from their partner.
    /// Each block of the result is reduced on exactly one rank, so every rank ends with the
    /// same bytes.
    fn allreduce_rabenseifner(&self, buf: &mut [u8], op: &Op) -> Result<()> {
        let p = self.size;
        let r = self.rank;
        let pof2 = 1 << (31 - (p as u32).leading_zeros());
        let rem = p - pof2;
        let mut tmp = Scratch::new(buf.len());
        let tmp = &mut tmp[..buf.len()];
        let newrank = if r < 2 * rem {
            if r % 2 == 0 {
                self.send(buf, r + 1, TAG_ALLREDUCE)?;
                -1
            } else {
                self.recv(tmp, r - 1, TAG_ALLREDUCE)?;
                (op.f)(tmp, buf);
                r / 2
            }
        } else {
            r - rem
        };
        if newrank >= 0 {
            let real = |nd: i32| if nd < rem { nd * 2 + 1 } else { nd + rem };
            let (counts, displs) = split_even(buf.len(), op.elem_size, pof2 as usize);
            // Byte range of blocks [lo, hi).
            let span = |lo: usize, hi: usize| displs[lo]..displs[hi - 1] + counts[hi - 1];
            let (mut lo, mut hi) = (0usize, pof2 as usize);
            let mut mask = pof2 >> 1;
            while mask > 0 {
                let dst = real(newrank ^ mask);
                let mid = lo + (hi - lo) / 2;
                let (keep, give) = if newrank & mask == 0 {
                    ((lo, mid), (mid, hi))
                } else {
                    ((mid, hi), (lo, mid))
                };
                let (k, g) = (span(keep.0, keep.1), span(give.0, give.1));
                self.sendrecv(&buf[g], dst, &mut tmp[k.clone()], dst, TAG_ALLREDUCE)?;
                (op.f)(&tmp[k.clone()], &mut buf[k]);
                (lo, hi) = keep;
                mask >>= 1;
            }
            let mut mask = 1;
            while mask < pof2 {
                let dst = real(newrank ^ mask);
                let w = hi - lo;
                let other = if newrank & mask == 0 {
                    (hi, hi + w)
                } else {
                    (lo - w, lo)
                };
                let (mine, theirs) = (span(lo, hi), span(other.0, other.1));
                let base = buf.as_mut_ptr();
                // SAFETY: `mine` and `theirs` are disjoint ranges of `buf` (sibling blocks);
                // both requests complete before `sendrecv_raw` returns.
                unsafe {
                    self.sendrecv_raw(
                        base.add(mine.start),
                        mine.len(),
                        dst,
                        base.add(theirs.start),
                        theirs.len(),
                        dst,
                        TAG_ALLREDUCE,
                    )?;
                }
                (lo, hi) = (lo.min(other.0), hi.max(other.1));
                mask <<= 1;
            }
        }
        if r < 2 * rem {
            if r % 2 == 1 {
                self.send(buf, r - 1, TAG_ALLREDUCE)?;
            } else {
                self.recv(buf, r + 1, TAG_ALLREDUCE)?;
            }
        }
        Ok(())
    }

    fn allreduce_ring(&self, buf: &mut [u8], op: &Op) -> Result<()> {
        let (counts, displs) = split_even(buf.len(), op.elem_size, self.size as usize);
        self.ring_reduce_scatter(buf, &counts, &displs, op, TAG_ALLREDUCE)?;
        self.ring_allgatherv(buf, &counts, &displs, 0, TAG_ALLREDUCE)
    }

    /// Ring reduce-scatter in place on the full vector `buf` (commutative ops): afterwards
    /// block `rank` of `buf` holds the reduction of everybody's block `rank`.
    fn ring_reduce_scatter(
        &self,
        buf: &mut [u8],
        counts: &[usize],
        displs: &[usize],
        op: &Op,
        tag: i32,
    ) -> Result<()> {
        let p = self.size;
        if p == 1 {
            return Ok(());
        }
        check_blocks(buf.len(), counts, displs)?;
        let r = self.rank;
        let right = self.modp(r + 1);
        let left = self.modp(r - 1);
        let mut tmp = Scratch::new(counts.iter().copied().max().unwrap_or(0));
        for s in 0..p - 1 {
            let sb = (r - s - 1).rem_euclid(p) as usize;
            let rb = (r - s - 2).rem_euclid(p) as usize;
            let sblk = &buf[displs[sb]..displs[sb] + counts[sb]];
            self.sendrecv(sblk, right, &mut tmp[..counts[rb]], left, tag)?;
            (op.f)(
                &tmp[..counts[rb]],
                &mut buf[displs[rb]..displs[rb] + counts[rb]],
            );
        }
        Ok(())
    }

    /// `MPI_Reduce_scatter`: `buf` holds our full contribution (the sum of `counts` bytes;
    /// used as scratch); block `rank` of the reduction (`counts[rank]` bytes) lands in
    /// `recv`. Counts are multiples of the element size.
    pub fn reduce_scatter(
        &self,
        buf: &mut [u8],
        counts: &[usize],
        recv: &mut [u8],
        op: &Op,
    ) -> Result<()> {
        let p = self.size as usize;
        if counts.len() != p {
            return Err(arg_err(
                ErrorClass::Count,
                format!("reduce_scatter needs {p} counts"),
            ));
        }
        let mut displs = Vec::with_capacity(p);
        let mut total = 0;
        for &c in counts {
            if c % op.elem_size.max(1) != 0 {
                return Err(arg_err(
                    ErrorClass::Count,
                    "reduce_scatter count not a multiple of the element size",
                ));
            }
            displs.push(total);
            total += c;
        }
        if buf.len() != total {
            return Err(arg_err(
                ErrorClass::Count,
                format!(
                    "reduce_scatter vector is {} bytes, counts sum to {total}",
                    buf.len()
                ),
            ));
        }
        check_op(total, op)?;
        let me = self.rank as usize;
        if recv.len() < counts[me] {
            return Err(arg_err(
                ErrorClass::Truncate,
                "reduce_scatter receive buffer too small",
            ));
        }
        let ring = match tune::algorithm(Coll::ReduceScatter) {
            1 => false,
            _ => op.commutative,
        };
        if ring {
            self.ring_reduce_scatter(buf, counts, &displs, op, TAG_REDSCAT)?;
            recv[..counts[me]].copy_from_slice(&buf[displs[me]..displs[me] + counts[me]]);
            Ok(())
        } else {
            self.reduce_binomial(buf, 0, op, TAG_REDSCAT)?;
            self.scatterv(buf, counts, &displs, &mut recv[..counts[me]], 0)
        }
    }

    /// `MPI_Scan` in place: `buf` holds our contribution and receives `x0 ∘ … ∘ x(rank)`.
    pub fn scan(&self, buf: &mut [u8], op: &Op) -> Result<()> {
        check_op(buf.len(), op)?;
        let mut partial = buf.to_vec();
        let mut tmp = vec![0u8; buf.len()];
        let mut mask = 1;
        while mask < self.size {
            let partner = self.rank ^ mask;
            if partner < self.size {
                self.sendrecv(&partial, partner, &mut tmp, partner, TAG_SCAN)?;
                if self.rank > partner {
                    (op.f)(&tmp, &mut partial);
                    (op.f)(&tmp, buf);
                } else if op.commutative {
                    (op.f)(&tmp, &mut partial);
                } else {
                    (op.f)(&partial, &mut tmp);
                    std::mem::swap(&mut partial, &mut tmp);
                }
            }
            mask <<= 1;
        }
        Ok(())
    }

    /// `MPI_Exscan`: `send` is our contribution; `recv` receives `x0 ∘ … ∘ x(rank-1)` on
    /// ranks > 0 (rank 0's `recv` is left untouched).
    pub fn exscan(&self, send: &[u8], recv: &mut [u8], op: &Op) -> Result<()> {
        check_op(send.len(), op)?;
        if recv.len() != send.len() {
            return Err(arg_err(ErrorClass::Count, "exscan buffers differ in size"));
        }
        let mut partial = send.to_vec();
        let mut tmp = vec![0u8; send.len()];
        let mut have = false;
        let mut mask = 1;
        while mask < self.size {
            let partner = self.rank ^ mask;
            if partner < self.size {
                self.sendrecv(&partial, partner, &mut tmp, partner, TAG_EXSCAN)?;
                if self.rank > partner {
                    if have {
                        (op.f)(&tmp, recv);
                    } else {
                        recv.copy_from_slice(&tmp);
                        have = true;
                    }
                    (op.f)(&tmp, &mut partial);
                } else if op.commutative {
                    (op.f)(&tmp, &mut partial);
                } else {
                    (op.f)(&partial, &mut tmp);
                    std::mem::swap(&mut partial, &mut tmp);
                }
            }
            mask <<= 1;
        }
        Ok(())
    }

    // ---- sparse exchange (neighbourhood collectives) ----

    /// Sparse exchange on the collective context (neighbourhood collectives): posts every
    /// receive `(source, tag, buffer)`, then every send `(destination, tag, data)`, and waits
    /// for all. Tags are in `0..2^16` and are offset into a range no other collective uses;
    /// peers may be `PROC_NULL` (skipped). Messages between one pair with one tag match in
    /// posting order. Returns the bytes received per receive.
    pub fn exchange(
        &self,
        sends: &[(i32, i32, &[u8])],
        recvs: &mut [(i32, i32, &mut [u8])],
    ) -> Result<Vec<usize>> {
        // Receives and sends are posted sorted by (peer, tag) (stable: equal pairs keep
        // their order), so that a pair's messages are posted on both sides in the same
        // order whatever the neighbour lists look like.
        let mut rorder: Vec<usize> = (0..recvs.len()).collect();
        rorder.sort_by_key(|&i| (recvs[i].0, recvs[i].1));
        let mut sorder: Vec<usize> = (0..sends.len()).collect();
        sorder.sort_by_key(|&i| (sends[i].0, sends[i].1));
        // (request, peer, index of the receive or usize::MAX for a send)
        let mut reqs: Vec<(ReqId, i32)> = Vec::with_capacity(sends.len() + recvs.len());
        let mut which = Vec::with_capacity(sends.len() + recvs.len());
        for &i in &rorder {
            let (peer, tag, ref mut buf) = recvs[i];
            let t = TAG_NEIGHBOR | (tag & 0xffff);
            // SAFETY: `recvs` is borrowed until every request is waited for below.
            match unsafe { self.irecv_raw(buf.as_mut_ptr(), buf.len(), peer, t) } {
                Ok(q) => {
                    reqs.push((q, peer));
                    which.push(i);
                }
                Err(e) => {
                    self.abandon(&reqs);
                    return Err(e);
                }
            }
        }
        for &i in &sorder {
            let (peer, tag, buf) = sends[i];
            let t = TAG_NEIGHBOR | (tag & 0xffff);
            // SAFETY: `sends` is borrowed until every request is waited for below.
            match unsafe { self.isend_raw(buf.as_ptr(), buf.len(), peer, t) } {
                Ok(q) => {
                    reqs.push((q, peer));
                    which.push(usize::MAX);
                }
                Err(e) => {
                    self.abandon(&reqs);
                    return Err(e);
                }
            }
        }
        let mut got = vec![0; recvs.len()];
        let mut res = Ok(());
        for (k, &(r, peer)) in reqs.iter().enumerate() {
            let st = self.e.wait(r);
            match self.check(st, "neighbour exchange", peer) {
                Ok(n) if which[k] != usize::MAX => got[which[k]] = n,
                Ok(_) => {}
                Err(e) => {
                    if res.is_ok() {
                        res = Err(e);
                    }
                }
            }
        }
        res.map(|_| got)
    }

    // ---- communicator construction ----

    fn agree_context(&self) -> Result<u32> {
        let mine = NEXT_CTX.load(Ordering::SeqCst);
        let mut b = mine.to_le_bytes();
        let max = |a: &[u8], io: &mut [u8]| {
            let x = u32::from_le_bytes(a.try_into().expect("4 bytes"));
            let y = u32::from_le_bytes((&*io).try_into().expect("4 bytes"));
            io.copy_from_slice(&x.max(y).to_le_bytes());
        };
        self.allreduce_recdbl(
            &mut b,
            &Op {
                f: &max,
                elem_size: 4,
                commutative: true,
            },
        )?;
        let ctx = u32::from_le_bytes(b);
        claim_context(ctx)
    }

    /// `MPI_Comm_dup`: a new communicator over the same group (collective).
    pub fn dup(&self) -> Result<CommId> {
        let ctx = self.agree_context()?;
        self.e.comm_create(ctx, self.e.comm_group(self.comm)?)
    }

    /// `MPI_Comm_split` (collective): members with the same `color` (≥ 0) form a new
    /// communicator, ranked by `(key, old rank)`; `color == None` (`MPI_UNDEFINED`) yields
    /// `None`.
    pub fn split(&self, color: Option<i32>, key: i32) -> Result<Option<CommId>> {
        let p = self.size as usize;
        let mut all = vec![0u8; 8 * p];
        let me = self.rank as usize;
        let c = color.unwrap_or(-1);
        all[8 * me..8 * me + 4].copy_from_slice(&c.to_le_bytes());
        all[8 * me + 4..8 * me + 8].copy_from_slice(&key.to_le_bytes());
        self.allgather(&mut all, 8)?;
        let ctx = self.agree_context()?;
        let Some(color) = color else { return Ok(None) };
        let group = self.e.comm_group(self.comm)?;
        let mut members: Vec<(i32, usize)> = (0..p)
            .filter_map(|i| {
                let ci = i32::from_le_bytes(all[8 * i..8 * i + 4].try_into().expect("4"));
                let ki = i32::from_le_bytes(all[8 * i + 4..8 * i + 8].try_into().expect("4"));
                (ci == color).then_some((ki, i))
            })
            .collect();
        members.sort_unstable();
        let g = members.iter().map(|&(_, i)| group[i]).collect();
        self.e.comm_create(ctx, g).map(Some)
    }

    /// `MPI_Comm_create` (collective over this communicator): a communicator over `group`
    /// (world ranks, a subset of our members) for its members, `None` for the others.
    pub fn create(&self, group: &[i32]) -> Result<Option<CommId>> {
        let parent = self.e.comm_group(self.comm)?;
        if let Some(w) = group.iter().find(|w| !parent.contains(w)) {
            return Err(arg_err(
                ErrorClass::Group,
                format!("world rank {w} of the group is not in the communicator"),
            ));
        }
        let ctx = self.agree_context()?;
        if group.contains(&self.e.rank()) {
            self.e.comm_create(ctx, group.to_vec()).map(Some)
        } else {
            Ok(None)
        }
    }

    /// `MPI_Comm_create_group` (collective over the members of `group` only, which must
    /// include us): agreement runs among the members with tag `tag` on our shadow.
    pub fn create_group(&self, group: &[i32], tag: i32) -> Result<CommId> {
        let parent = self.e.comm_group(self.comm)?;
        let mut ranks = Vec::with_capacity(group.len());
        for w in group {
            match parent.iter().position(|x| x == w) {
                Some(i) => ranks.push(i as i32),
                None => {
                    return Err(arg_err(
                        ErrorClass::Group,
                        format!("world rank {w} of the group is not in the communicator"),
                    ))
                }
            }
        }
        let Some(me) = ranks.iter().position(|&r| r == self.rank) else {
            return Err(arg_err(
                ErrorClass::Group,
                "MPI_Comm_create_group: the caller is not in the group",
            ));
        };
        let t = TAG_CREATE_GROUP | (tag & 0xf_ffff);
        let mut b = NEXT_CTX.load(Ordering::SeqCst).to_le_bytes();
        // Linear: members send to the first member, which answers with the maximum.
        if me == 0 {
            let mut max = u32::from_le_bytes(b);
            let mut x = [0u8; 4];
            for &r in &ranks[1..] {
                self.recv(&mut x, r, t)?;
                max = max.max(u32::from_le_bytes(x));
            }
            b = max.to_le_bytes();
            for &r in &ranks[1..] {
                self.send(&b, r, t)?;
            }
        } else {
            self.send(&b, ranks[0], t)?;
            self.recv(&mut b, ranks[0], t)?;
        }
        let ctx = claim_context(u32::from_le_bytes(b))?;
        self.e.comm_create(ctx, group.to_vec())
    }
}

/// Marks `ctx` (agreed by all members) as used by this process.
fn claim_context(ctx: u32) -> Result<u32> {
    if ctx >= COLL_BIT {
        return Err(arg_err(ErrorClass::Intern, "context ids exhausted"));
    }
    NEXT_CTX.fetch_max(ctx + 1, Ordering::SeqCst);
    Ok(ctx)
}

fn check_op(len: usize, op: &Op) -> Result<()> {
    if op.elem_size == 0 || len % op.elem_size != 0 {
        return Err(arg_err(
            ErrorClass::Count,
            format!(
                "{len} bytes is not a whole number of {}-byte elements",
                op.elem_size
            ),
        ));
    }
    Ok(())
}

fn check_blocks(len: usize, counts: &[usize], displs: &[usize]) -> Result<()> {
    check_blocks_ro(len, counts, displs)
}

fn check_blocks_ro(len: usize, counts: &[usize], displs: &[usize]) -> Result<()> {
    for (i, (&c, &d)) in counts.iter().zip(displs).enumerate() {
        if d.checked_add(c).is_none_or(|end| end > len) {
            return Err(arg_err(
                ErrorClass::Count,
                format!("block {i} ({c} bytes at {d}) exceeds the {len}-byte buffer"),
            ));
        }
    }
    Ok(())
}

/// Scratch buffers kept per thread: large reductions would otherwise allocate (and the
/// kernel zero-fill) a fresh mapping on every call.
struct Scratch(Vec<u8>);

thread_local! {
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Buffers up to this size are kept for the next call.
const SCRATCH_KEEP: usize = 16 << 20;

impl Scratch {
    /// A buffer of `n` bytes (contents unspecified: callers overwrite before reading).
    fn new(n: usize) -> Scratch {
        let mut v = SCRATCH.with(|c| c.take());
        if v.len() < n {
            v = vec![0u8; n];
        }
        Scratch(v)
    }
}

impl std::ops::Deref for Scratch {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.0.len() <= SCRATCH_KEEP {
            let v = std::mem::take(&mut self.0);
            // A nested collective (from a user operation) may have left a buffer there;
            // keep the larger one.
            SCRATCH.with(|c| {
                let old = c.take();
                c.set(if old.len() > v.len() { old } else { v });
            });
        }
    }
}

/// Splits `len` bytes into `p` consecutive blocks of whole `elem`-byte elements, as even as
/// possible: (counts, displacements).
pub fn split_even(len: usize, elem: usize, p: usize) -> (Vec<usize>, Vec<usize>) {
    let n = len / elem;
    let (q, rem) = (n / p, n % p);
    let counts: Vec<usize> = (0..p).map(|i| (q + usize::from(i < rem)) * elem).collect();
    let mut displs = Vec::with_capacity(p);
    let mut off = 0;
    for &c in &counts {
        displs.push(off);
        off += c;
    }
    (counts, displs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_even_covers_the_vector_at_element_boundaries() {
        let (c, d) = split_even(40, 4, 3);
        assert_eq!(c, vec![16, 12, 12]);
        assert_eq!(d, vec![0, 16, 28]);
        let (c, d) = split_even(4, 4, 3);
        assert_eq!(c, vec![4, 0, 0]);
        assert_eq!(d, vec![0, 4, 4]);
    }

    #[test]
    fn block_checks_reject_out_of_range_blocks() {
        assert!(check_blocks(10, &[5, 5], &[0, 5]).is_ok());
        assert!(check_blocks(10, &[5, 6], &[0, 5]).is_err());
        assert!(check_blocks(10, &[1], &[usize::MAX]).is_err());
    }

    #[test]
    fn op_length_must_be_whole_elements() {
        let f = |_: &[u8], _: &mut [u8]| {};
        let op = Op {
            f: &f,
            elem_size: 4,
            commutative: true,
        };
        assert!(check_op(8, &op).is_ok());
        assert!(check_op(6, &op).is_err());
    }
}
