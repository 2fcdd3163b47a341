//! Nonblocking collectives as **schedules**: rounds of point-to-point transfers on the
//! collective context followed by local steps (reductions, copies), advanced by
//! [`Schedule::progress`] without ever blocking.
//!
//! A round posts all its receives, then all its sends; when every transfer of the round
//! has completed its local steps run, and the next round is posted. Each schedule uses its
//! own tag (`TAG_ICOLL_BASE` plus a per-communicator sequence number that every member
//! advances in the same order, as MPI orders collectives on a communicator), so several
//! nonblocking collectives on one communicator — and blocking ones started meanwhile —
//! never match each other's messages.
//!
//! Buffers are [`Region`]s: the caller's memory (raw, valid until completion by the MPI
//! contract) or byte vectors owned by the schedule (scratch, packed data), which the
//! caller can take back after completion with [`Schedule::take_owned`].

use crate::{arg_err, CollComm, Result};
use oxmpi_engine::{ErrorClass, ReqId};
use std::collections::HashMap;
use std::sync::Mutex;

/// First tag of nonblocking collective schedules (then `+ seq mod 2^16`).
const TAG_ICOLL_BASE: i32 = 1 << 21;

/// Next schedule sequence number per collective context id.
static SEQ: Mutex<Option<HashMap<u32, u32>>> = Mutex::new(None);

/// An owned reduction callback: `f(in, inout)` computes `inout = in ∘ inout`.
pub type ReduceFn = dyn Fn(&[u8], &mut [u8]) + Send;

/// A reduction operation a schedule can own (and run on another thread).
pub struct OwnedOp {
    /// `f(in, inout)`: `inout = in ∘ inout` elementwise (see [`crate::Op`]).
    pub f: Box<ReduceFn>,
    /// Size of one element in bytes.
    pub elem_size: usize,
    /// `∘` is commutative.
    pub commutative: bool,
}

/// Memory a schedule reads and writes.
pub enum Region {
    /// The caller's memory: `len` bytes at the pointer.
    Raw(*mut u8, usize),
    /// Bytes owned by the schedule.
    Owned(Vec<u8>),
}

impl Region {
    fn ptr_len(&mut self) -> (*mut u8, usize) {
        match self {
            Region::Raw(p, n) => (*p, *n),
            Region::Owned(v) => (v.as_mut_ptr(), v.len()),
        }
    }
}

/// A place in a region: (region index, byte offset).
type At = (usize, usize);

enum Step {
    Send {
        at: At,
        len: usize,
        peer: i32,
    },
    Recv {
        at: At,
        len: usize,
        peer: i32,
    },
    /// `dst = src ∘ dst` over `len` bytes.
    Reduce {
        src: At,
        dst: At,
        len: usize,
    },
    /// `dst = src` over `len` bytes.
    Copy {
        src: At,
        dst: At,
        len: usize,
    },
}

#[derive(Default)]
struct Round(Vec<Step>);

/// A nonblocking collective in progress.
pub struct Schedule {
    cc: CollComm,
    tag: i32,
    regions: Vec<Region>,
    rounds: std::collections::VecDeque<Round>,
    current: Option<Round>,
    pending: Vec<(ReqId, i32)>,
    op: Option<OwnedOp>,
    error: Option<oxmpi_engine::Error>,
    started: bool,
}

// SAFETY: the raw regions point to memory the MPI caller keeps valid (and does not access)
// until the operation completes, whichever thread advances it; the operation is `Send`.
unsafe impl Send for Schedule {}

impl Schedule {
    fn new(cc: &CollComm, regions: Vec<Region>, op: Option<OwnedOp>) -> Result<Schedule> {
        let ctx = cc.e.comm_context(cc.shadow)?;
        let seq = {
            let mut g = SEQ.lock().unwrap_or_else(|p| p.into_inner());
            let m = g.get_or_insert_with(HashMap::new);
            let s = m.entry(ctx).or_insert(0);
            let v = *s;
            *s = s.wrapping_add(1);
            v
        };
        Ok(Schedule {
            cc: *cc,
            tag: TAG_ICOLL_BASE + (seq & 0xffff) as i32,
            regions,
            rounds: Default::default(),
            current: None,
            pending: Vec::new(),
            op,
            error: None,
            started: false,
        })
    }

    fn add_region(&mut self, r: Region) -> usize {
        self.regions.push(r);
        self.regions.len() - 1
    }

    fn round(&mut self) -> &mut Vec<Step> {
        self.rounds.push_back(Round::default());
        &mut self.rounds.back_mut().expect("just pushed").0
    }

    fn check(&mut self, at: At, len: usize) -> Result<()> {
        let n = self.regions[at.0].ptr_len().1;
        if at.1.checked_add(len).is_none_or(|e| e > n) {
            return Err(arg_err(
                ErrorClass::Count,
                format!(
                    "schedule step of {len} bytes at {} exceeds a {n}-byte buffer",
                    at.1
                ),
            ));
        }
        Ok(())
    }

    fn validate(&mut self) -> Result<()> {
        let mut checks = Vec::new();
        for r in &self.rounds {
            for s in &r.0 {
                match *s {
                    Step::Send { at, len, .. } | Step::Recv { at, len, .. } => {
                        checks.push((at, len))
                    }
                    Step::Reduce { src, dst, len } | Step::Copy { src, dst, len } => {
                        checks.push((src, len));
                        checks.push((dst, len));
                    }
                }
            }
        }
        for (at, len) in checks {
            self.check(at, len)?;
        }
        Ok(())
    }

    /// The bytes of region `i` if the schedule owns them (after completion).
    pub fn take_owned(&mut self, i: usize) -> Option<Vec<u8>> {
        match self.regions.get_mut(i)? {
            Region::Owned(v) => Some(std::mem::take(v)),
            Region::Raw(..) => None,
        }
    }

    /// Advances the schedule as far as possible without blocking. Returns `None` while it
    /// is still running, then its outcome (once).
    pub fn progress(&mut self) -> Option<Result<()>> {
        if !self.started {
            self.started = true;
            if let Err(e) = self.validate() {
                self.rounds.clear();
                return Some(Err(e));
            }
        }
        loop {
            let e = self.cc.e;
            let mut i = 0;
            while i < self.pending.len() {
                let (r, peer) = self.pending[i];
                match e.test(r) {
                    Some(st) => {
                        self.pending.swap_remove(i);
                        if let Err(err) = self.cc.check(st, "nonblocking step", peer) {
                            self.error.get_or_insert(err);
                        }
                    }
                    None => i += 1,
                }
            }
            if !self.pending.is_empty() {
                if self.error.is_some() {
                    self.cc.abandon(&self.pending);
                    self.pending.clear();
                } else {
                    return None;
                }
            }
            if let Some(err) = self.error.take() {
                self.rounds.clear();
                self.current = None;
                return Some(Err(err));
            }
            if let Some(round) = self.current.take() {
                self.run_local(&round);
            }
            let Some(round) = self.rounds.pop_front() else {
                return Some(Ok(()));
            };
            if let Err(err) = self.post(&round) {
                self.cc.abandon(&self.pending);
                self.pending.clear();
                self.rounds.clear();
                return Some(Err(err));
            }
            self.current = Some(round);
        }
    }

    fn post(&mut self, round: &Round) -> Result<()> {
        for s in &round.0 {
            if let Step::Recv { at, len, peer } = *s {
                let p = self.regions[at.0].ptr_len().0;
                // SAFETY: the step is within its region (validated); regions stay valid
                // until completion (owned, or the MPI caller's contract).
                let r = unsafe { self.cc.irecv_raw(p.wrapping_add(at.1), len, peer, self.tag) }?;
                self.pending.push((r, peer));
            }
        }
        for s in &round.0 {
            if let Step::Send { at, len, peer } = *s {
                let p = self.regions[at.0].ptr_len().0;
                // SAFETY: as above.
                let r = unsafe { self.cc.isend_raw(p.wrapping_add(at.1), len, peer, self.tag) }?;
                self.pending.push((r, peer));
            }
        }
        Ok(())
    }

    fn run_local(&mut self, round: &Round) {
        for s in &round.0 {
            match *s {
                Step::Reduce { src, dst, len } => {
                    let sp = self.regions[src.0].ptr_len().0.wrapping_add(src.1);
                    let dp = self.regions[dst.0].ptr_len().0.wrapping_add(dst.1);
                    // SAFETY: validated ranges of distinct regions (builders never reduce a
                    // region into itself), no transfer in flight on them.
                    let (a, b) = unsafe {
                        (
                            std::slice::from_raw_parts(sp.cast_const(), len),
                            std::slice::from_raw_parts_mut(dp, len),
                        )
                    };
                    if let Some(op) = &self.op {
                        (op.f)(a, b);
                    }
                }
                Step::Copy { src, dst, len } => {
                    let sp = self.regions[src.0].ptr_len().0.wrapping_add(src.1);
                    let dp = self.regions[dst.0].ptr_len().0.wrapping_add(dst.1);
                    // SAFETY: validated ranges; `copy` allows overlap.
                    unsafe { std::ptr::copy(sp.cast_const(), dp, len) };
                }
                Step::Send { .. } | Step::Recv { .. } => {}
            }
        }
    }
}

impl CollComm {
    fn abs(&self, rel: usize, root: i32) -> i32 {
        self.modp(rel as i32 + root)
    }

    /// `MPI_Ibarrier`: dissemination rounds.
    pub fn ibarrier(&self) -> Result<Schedule> {
        let mut s = Schedule::new(self, Vec::new(), None)?;
        s.regions.push(Region::Owned(Vec::new()));
        let mut k = 1;
        while k < self.size {
            let (to, from) = (self.modp(self.rank + k), self.modp(self.rank - k));
            let r = s.round();
            r.push(Step::Recv {
                at: (0, 0),
                len: 0,
                peer: from,
            });
            r.push(Step::Send {
                at: (0, 0),
                len: 0,
                peer: to,
            });
            k <<= 1;
        }
        Ok(s)
    }

    /// `MPI_Ibcast` of region 0 (the whole region) from `root`: binomial tree.
    pub fn ibcast(&self, buf: Region, root: i32) -> Result<Schedule> {
        self.check_root(root)?;
        let mut s = Schedule::new(self, vec![buf], None)?;
        let n = s.regions[0].ptr_len().1;
        let p = self.size as usize;
        let rel = self.modp(self.rank - root) as usize;
        let mut mask = 1;
        while mask < p {
            if rel & mask != 0 {
                let parent = self.abs(rel - mask, root);
                s.round().push(Step::Recv {
                    at: (0, 0),
                    len: n,
                    peer: parent,
                });
                break;
            }
            mask <<= 1;
        }
        let mut sends = Vec::new();
        mask >>= 1;
        while mask > 0 {
            if rel + mask < p {
                sends.push(Step::Send {
                    at: (0, 0),
                    len: n,
                    peer: self.abs(rel + mask, root),
                });
            }
            mask >>= 1;
        }
        if !sends.is_empty() {
            s.round().extend(sends);
        }
        Ok(s)
    }

    /// `MPI_Iallreduce` in place on region 0: recursive doubling (non-power-of-two sizes
    /// fold the first ranks pairwise), the order of `op` respected.
    pub fn iallreduce(&self, buf: Region, op: OwnedOp) -> Result<Schedule> {
        let mut s = Schedule::new(self, vec![buf], None)?;
        let n = s.regions[0].ptr_len().1;
        if n % op.elem_size.max(1) != 0 {
            return Err(arg_err(ErrorClass::Count, "vector is not whole elements"));
        }
        let commutative = op.commutative;
        s.op = Some(op);
        let tmp = s.add_region(Region::Owned(vec![0u8; n]));
        let p = self.size;
        let r = self.rank;
        if p == 1 || n == 0 {
            return Ok(s);
        }
        let pof2 = 1 << (31 - (p as u32).leading_zeros());
        let rem = p - pof2;
        let (b, t) = ((0, 0), (tmp, 0));
        let newrank = if r < 2 * rem {
            if r % 2 == 0 {
                s.round().push(Step::Send {
                    at: b,
                    len: n,
                    peer: r + 1,
                });
                -1
            } else {
                let rd = s.round();
                rd.push(Step::Recv {
                    at: t,
                    len: n,
                    peer: r - 1,
                });
                rd.push(Step::Reduce {
                    src: t,
                    dst: b,
                    len: n,
                });
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
                let rd = s.round();
                rd.push(Step::Send {
                    at: b,
                    len: n,
                    peer: dst,
                });
                rd.push(Step::Recv {
                    at: t,
                    len: n,
                    peer: dst,
                });
                if commutative || dst < r {
                    rd.push(Step::Reduce {
                        src: t,
                        dst: b,
                        len: n,
                    });
                } else {
                    rd.push(Step::Reduce {
                        src: b,
                        dst: t,
                        len: n,
                    });
                    rd.push(Step::Copy {
                        src: t,
                        dst: b,
                        len: n,
                    });
                }
                mask <<= 1;
            }
        }
        if r < 2 * rem {
            let step = if r % 2 == 1 {
                Step::Send {
                    at: b,
                    len: n,
                    peer: r - 1,
                }
            } else {
                Step::Recv {
                    at: b,
                    len: n,
                    peer: r + 1,
                }
            };
            s.round().push(step);
        }
        Ok(s)
    }

    /// `MPI_Ireduce`: region 0 holds our contribution and is used as scratch; at the root
    /// the result is copied into region 1 (`out`, ignored elsewhere). Binomial tree (rooted
    /// at 0 for non-commutative ops, the result then forwarded to the root).
    pub fn ireduce(
        &self,
        data: Vec<u8>,
        out: Option<Region>,
        root: i32,
        op: OwnedOp,
    ) -> Result<Schedule> {
        self.check_root(root)?;
        let n = data.len();
        if n % op.elem_size.max(1) != 0 {
            return Err(arg_err(ErrorClass::Count, "vector is not whole elements"));
        }
        let commutative = op.commutative;
        let mut regions = vec![Region::Owned(data)];
        regions.push(out.unwrap_or(Region::Owned(Vec::new())));
        let mut s = Schedule::new(self, regions, Some(op))?;
        let tmp = s.add_region(Region::Owned(vec![0u8; n]));
        let p = self.size;
        let (b, t) = ((0, 0), (tmp, 0));
        let troot = if commutative { root } else { 0 };
        let rel = self.modp(self.rank - troot);
        let mut mask = 1;
        while mask < p {
            if rel & mask == 0 {
                let src = rel | mask;
                if src < p {
                    let rd = s.round();
                    rd.push(Step::Recv {
                        at: t,
                        len: n,
                        peer: self.modp(src + troot),
                    });
                    if commutative {
                        rd.push(Step::Reduce {
                            src: t,
                            dst: b,
                            len: n,
                        });
                    } else {
                        rd.push(Step::Reduce {
                            src: b,
                            dst: t,
                            len: n,
                        });
                        rd.push(Step::Copy {
                            src: t,
                            dst: b,
                            len: n,
                        });
                    }
                }
            } else {
                s.round().push(Step::Send {
                    at: b,
                    len: n,
                    peer: self.modp(rel - mask + troot),
                });
                break;
            }
            mask <<= 1;
        }
        if troot != root {
            if self.rank == troot {
                s.round().push(Step::Send {
                    at: b,
                    len: n,
                    peer: root,
                });
            } else if self.rank == root {
                s.round().push(Step::Recv {
                    at: b,
                    len: n,
                    peer: troot,
                });
            }
        }
        if self.rank == root {
            s.round().push(Step::Copy {
                src: b,
                dst: (1, 0),
                len: n,
            });
        }
        Ok(s)
    }

    /// `MPI_Iallgatherv` in place on region 0 (block `i`: `counts[i]` bytes at
    /// `displs[i]`, ours already in place): ring, `size - 1` rounds.
    pub fn iallgatherv(&self, buf: Region, counts: &[usize], displs: &[usize]) -> Result<Schedule> {
        self.check_vec_len(counts, displs)?;
        let mut s = Schedule::new(self, vec![buf], None)?;
        let p = self.size;
        let right = self.modp(self.rank + 1);
        let left = self.modp(self.rank - 1);
        for k in 0..p - 1 {
            let sb = (self.rank - k).rem_euclid(p) as usize;
            let rb = (self.rank - k - 1).rem_euclid(p) as usize;
            let rd = s.round();
            rd.push(Step::Recv {
                at: (0, displs[rb]),
                len: counts[rb],
                peer: left,
            });
            rd.push(Step::Send {
                at: (0, displs[sb]),
                len: counts[sb],
                peer: right,
            });
        }
        Ok(s)
    }

    /// `MPI_Ialltoallv` from region 0 into region 1 (byte counts/displacements per peer):
    /// every transfer posted in one round (our own block copied locally).
    #[allow(clippy::too_many_arguments)]
    pub fn ialltoallv(
        &self,
        send: Region,
        scounts: &[usize],
        sdispls: &[usize],
        recv: Region,
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<Schedule> {
        self.check_vec_len(scounts, sdispls)?;
        self.check_vec_len(rcounts, rdispls)?;
        let me = self.rank as usize;
        if scounts[me] != rcounts[me] {
            return Err(arg_err(
                ErrorClass::Truncate,
                format!(
                    "alltoall: rank {me} sends itself {} bytes into {}",
                    scounts[me], rcounts[me]
                ),
            ));
        }
        let mut s = Schedule::new(self, vec![send, recv], None)?;
        let p = self.size as usize;
        let rd = s.round();
        for k in 1..p {
            let src = (me + p - k) % p;
            rd.push(Step::Recv {
                at: (1, rdispls[src]),
                len: rcounts[src],
                peer: src as i32,
            });
        }
        for k in 1..p {
            let dst = (me + k) % p;
            rd.push(Step::Send {
                at: (0, sdispls[dst]),
                len: scounts[dst],
                peer: dst as i32,
            });
        }
        rd.push(Step::Copy {
            src: (0, sdispls[me]),
            dst: (1, rdispls[me]),
            len: scounts[me],
        });
        Ok(s)
    }

    /// `MPI_Igatherv`: region 0 (our block) goes to block `rank` of region 1 at the root
    /// (`counts`/`displs` in bytes, used at the root only). One round.
    pub fn igatherv(
        &self,
        send: Region,
        recv: Region,
        counts: &[usize],
        displs: &[usize],
        root: i32,
    ) -> Result<Schedule> {
        self.check_root(root)?;
        let mut s = Schedule::new(self, vec![send, recv], None)?;
        let n = s.regions[0].ptr_len().1;
        if self.rank != root {
            s.round().push(Step::Send {
                at: (0, 0),
                len: n,
                peer: root,
            });
            return Ok(s);
        }
        self.check_vec_len(counts, displs)?;
        let me = root as usize;
        if n != counts[me] {
            return Err(arg_err(
                ErrorClass::Truncate,
                "root's send size differs from its receive count",
            ));
        }
        let rd = s.round();
        for i in (0..self.size as usize).filter(|&i| i != me) {
            rd.push(Step::Recv {
                at: (1, displs[i]),
                len: counts[i],
                peer: i as i32,
            });
        }
        rd.push(Step::Copy {
            src: (0, 0),
            dst: (1, displs[me]),
            len: n,
        });
        Ok(s)
    }

    /// `MPI_Iscatterv`: block `i` of region 0 at the root (`counts`/`displs` in bytes) lands
    /// in region 1 of rank `i`. One round.
    pub fn iscatterv(
        &self,
        send: Region,
        counts: &[usize],
        displs: &[usize],
        recv: Region,
        root: i32,
    ) -> Result<Schedule> {
        self.check_root(root)?;
        let mut s = Schedule::new(self, vec![send, recv], None)?;
        let n = s.regions[1].ptr_len().1;
        if self.rank != root {
            s.round().push(Step::Recv {
                at: (1, 0),
                len: n,
                peer: root,
            });
            return Ok(s);
        }
        self.check_vec_len(counts, displs)?;
        let me = root as usize;
        let rd = s.round();
        for i in (0..self.size as usize).filter(|&i| i != me) {
            rd.push(Step::Send {
                at: (0, displs[i]),
                len: counts[i],
                peer: i as i32,
            });
        }
        rd.push(Step::Copy {
            src: (0, displs[me]),
            dst: (1, 0),
            len: counts[me].min(n),
        });
        Ok(s)
    }
}
