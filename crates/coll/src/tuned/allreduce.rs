//! The point-to-point allreduce: recursive doubling, Rabenseifner's algorithm, the ring,
//! and the length agreement of a persistent allreduce's init.
//!
//! Every exchange is exact ([`Exact`]): a message whose length differs from its receive
//! (erroneous counts: MPI requires the same count on every rank) is recorded, the rounds go
//! on (the other ranks wait for our messages), and from then on each of our sends carries a
//! one-byte error marker in place of data ([`marker`]), a marked message
//! ([`oxmpi_engine::TAG_MARK`] on its tag), which the receiver in turn sees as an error
//! whatever length it expects (even one byte: the mark, not the length, tells the marker
//! from data). So an error spreads along the same paths as the
//! partial results it would have spoilt: a rank that got success received only data in
//! which no erroneous contribution took part. The error is returned after the last round.
//! A rank of recursive doubling that saw an error also runs the rounds of the large-vector
//! plan that recursive doubling lacks ([`CollComm::allreduce_recdbl`]), so that a rank
//! whose length put it on the other side of [`tune::ALLREDUCE_SMALL`] is matched message for
//! message.

use super::TAG_ALLREDUCE;
use crate::base::helpers::{
    check_op, fold_real_rank, fold_sizes, lengths_differ, rabenseifner_plan, split_even, Aligned,
    RabStep, Scratch,
};
use crate::base::params::{self as tune, Coll};
use crate::base::stats::{count, Alg};
use crate::{arg_err, CollComm, Op, Result};
use oxmpi_engine::{ErrorClass, ReqId, TAG_MARK};

/// What an allreduce's exchanges have seen: `None` while every message had the length of
/// its receive, else the first error (reported once the rounds ran).
#[derive(Default)]
pub(crate) struct Exact(pub(crate) Option<oxmpi_engine::Error>);

/// The bytes an erroneous rank sends in place of `len` bytes of data, as a marked message
/// ([`CollComm::isend_or_marker`]): one byte (never a whole item of an op whose item is
/// larger), or none when `len` is one byte, so that its length differs too (a receive of
/// exactly its length tells it by its mark, under `pml cm` as well).
pub(crate) fn marker(len: usize) -> &'static [u8] {
    static MARK: [u8; 1] = [0];
    &MARK[..usize::from(len != 1)]
}

impl CollComm {
    /// Starts the send of `slen` bytes at `s` to `dest` with `tag`, or (`marked`: we saw
    /// an error) of the error marker in their place, a marked message.
    ///
    /// # Safety
    /// `s` readable for `slen` bytes until the request completes.
    pub(crate) unsafe fn isend_or_marker(
        &self,
        (s, slen, dest): (*const u8, usize, i32),
        marked: bool,
        tag: i32,
    ) -> Result<ReqId> {
        if marked {
            let m = marker(slen);
            // SAFETY: the marker is static.
            unsafe { self.isend_marked_raw(m.as_ptr(), m.len(), dest, tag) }
        } else {
            // SAFETY: caller guarantee.
            unsafe { self.isend_raw(s, slen, dest, tag) }
        }
    }

    /// Sends `s` (`slen` bytes, or the error marker once `x` holds an error) to `dest` and
    /// receives `rlen` bytes from `src` into `r`, messages of `tag` (the allreduce's, or
    /// another collective's exact exchanges: the ring reduce-scatter); a received length
    /// other than `rlen` goes into `x` (only a failure of the transfers themselves is
    /// returned).
    ///
    /// # Safety
    /// `s` readable for `slen` bytes, `r` writable for `rlen` bytes, not overlapping.
    pub(crate) unsafe fn xchg_raw(
        &self,
        x: &mut Exact,
        (s, slen, dest): (*const u8, usize, i32),
        (r, rlen, src): (*mut u8, usize, i32),
        tag: i32,
    ) -> Result<()> {
        // SAFETY: caller guarantee; both requests are waited for.
        let rr = unsafe { self.irecv_raw(r, rlen, src, tag) }?;
        // SAFETY: as above.
        let sr = match unsafe { self.isend_or_marker((s, slen, dest), x.0.is_some(), tag) } {
            Ok(q) => q,
            Err(e) => {
                self.abandon(&[(rr, src)]);
                return Err(e);
            }
        };
        let rst = self.e.wait(rr);
        let sst = self.e.wait(sr);
        self.check(sst, "send", dest)?;
        self.exact_status(x, rst, rlen, src)
    }

    /// One exact exchange with either side optional: sends `slen` bytes at `s` to `dest`
    /// (the marker once `x` holds an error; `mark`: marked in any case, a scan's length
    /// header) and receives from `src` into `room` bytes at `r`, where `want` are expected
    /// (a longer message that fits is received whole and recorded in `x` as another
    /// length; a marked one is recorded too). Returns the received length and whether the
    /// message was marked (`None`: nothing received, or the message did not fit).
    ///
    /// # Safety
    /// `s` readable for `slen` bytes, `r` writable for `room` bytes, not overlapping.
    pub(crate) unsafe fn xchg_room(
        &self,
        x: &mut Exact,
        send: Option<(*const u8, usize, i32)>,
        recv: Option<(*mut u8, usize, usize, i32)>,
        tag: i32,
        mark: bool,
    ) -> Result<Option<(usize, bool)>> {
        let rr = match recv {
            // SAFETY: caller guarantee; waited for below (or abandoned).
            Some((r, room, _, src)) => Some((unsafe { self.irecv_raw(r, room, src, tag) }?, src)),
            None => None,
        };
        let sr = match send {
            Some((s, slen, dest)) => {
                // SAFETY: caller guarantee; waited for below.
                let sent = unsafe {
                    if mark {
                        self.isend_marked_raw(s, slen, dest, tag)
                    } else {
                        self.isend_or_marker((s, slen, dest), x.0.is_some(), tag)
                    }
                };
                match sent {
                    Ok(q) => Some((q, dest)),
                    Err(e) => {
                        if let Some(q) = rr {
                            self.abandon(&[q]);
                        }
                        return Err(e);
                    }
                }
            }
            None => None,
        };
        let rst = rr.map(|(q, _)| self.e.wait(q));
        if let Some((q, dest)) = sr {
            let sst = self.e.wait(q);
            self.check(sst, "send", dest)?;
        }
        match (rst, recv) {
            (Some(st), Some((_, _, want, src))) => {
                let got = st
                    .error
                    .is_none()
                    .then_some((st.count_bytes, st.tag & TAG_MARK != 0));
                self.exact_status(x, st, want, src)?;
                Ok(got)
            }
            _ => Ok(None),
        }
    }

    /// [`CollComm::xchg_raw`] on slices.
    pub(crate) fn xchg(
        &self,
        x: &mut Exact,
        (s, dest): (&[u8], i32),
        (r, src): (&mut [u8], i32),
        tag: i32,
    ) -> Result<()> {
        // SAFETY: distinct borrows, both outlive the call.
        unsafe {
            self.xchg_raw(
                x,
                (s.as_ptr(), s.len(), dest),
                (r.as_mut_ptr(), r.len(), src),
                tag,
            )
        }
    }

    /// Sends `s` to `dest` with `tag` (the marker once `x` holds an error).
    pub(crate) fn xsend(&self, x: &Exact, s: &[u8], dest: i32, tag: i32) -> Result<()> {
        self.send_or_marker(s, x.0.is_some(), dest, tag)
    }

    /// Sends `s` to `dest` with `tag`, or (`marked`) the error marker in its place.
    pub(crate) fn send_or_marker(&self, s: &[u8], marked: bool, dest: i32, tag: i32) -> Result<()> {
        // SAFETY: `s` outlives the wait.
        let q = unsafe { self.isend_or_marker((s.as_ptr(), s.len(), dest), marked, tag) }?;
        let st = self.e.wait(q);
        self.check(st, "send", dest).map(|_| ())
    }

    /// Receives `r.len()` bytes of `tag` from `src`; another length goes into `x`.
    pub(crate) fn xrecv(&self, x: &mut Exact, r: &mut [u8], src: i32, tag: i32) -> Result<()> {
        // SAFETY: `r` outlives the wait.
        let q = unsafe { self.irecv_raw(r.as_mut_ptr(), r.len(), src, tag) }?;
        let st = self.e.wait(q);
        self.exact_status(x, st, r.len(), src)
    }

    /// A receive's status: a length other than `want` (or a truncation), or a marked
    /// message (an error marker, whatever its length), is recorded in `x`; another failure
    /// is returned.
    pub(crate) fn exact_status(
        &self,
        x: &mut Exact,
        st: oxmpi_engine::Status,
        want: usize,
        src: i32,
    ) -> Result<()> {
        let truncated = st.error == Some(ErrorClass::Truncate);
        if truncated || (st.error.is_none() && st.count_bytes != want) {
            if x.0.is_none() {
                let got = if truncated { want + 1 } else { st.count_bytes };
                x.0 = Some(lengths_differ(
                    got as u64,
                    want,
                    format!(
                        "rank {} received {} bytes from rank {src} where it expects \
                         {want} (the ranks' counts differ)",
                        self.rank,
                        if truncated {
                            format!("more than {want}")
                        } else {
                            got.to_string()
                        }
                    ),
                ));
            }
            return Ok(());
        }
        if st.error.is_none() && st.tag & TAG_MARK != 0 {
            if x.0.is_none() {
                x.0 = Some(arg_err(
                    ErrorClass::Count,
                    format!(
                        "rank {} received an error marker from rank {src} in place of {want} \
                         bytes (another rank's count differs)",
                        self.rank
                    ),
                ));
            }
            return Ok(());
        }
        self.check(st, "receive", src).map(|_| ())
    }

    /// `MPI_Allreduce` in place: `buf` holds our contribution and receives the result.
    pub fn allreduce(&self, buf: &mut [u8], op: &Op) -> Result<()> {
        self.allreduce_from(None, buf, op)
    }

    /// `MPI_Allreduce` of `src` (our contribution, as long as `buf`; `None`: it is in
    /// `buf`, in place) into `buf`. Rabenseifner's algorithm reads the contribution where
    /// it is (its first exchange sends it from there and receives straight into `buf`); the
    /// other algorithms start from a copy of it in `buf`. An empty vector exchanges empty
    /// messages (a rank whose count differs meets it instead of waiting).
    pub fn allreduce_from(&self, src: Option<&[u8]>, buf: &mut [u8], op: &Op) -> Result<()> {
        self.allreduce_from_as(src, buf, op, false)
    }

    /// [`CollComm::allreduce_from`] where every rank is known to pass the same length (the
    /// segment's gate checked it, [`crate::sm::Seg::reduction_gate`]): recursive doubling
    /// then skips the check round of the lengths near its bound
    /// ([`CollComm::allreduce_recdbl`]).
    pub fn allreduce_agreed(&self, src: Option<&[u8]>, buf: &mut [u8], op: &Op) -> Result<()> {
        self.allreduce_from_as(src, buf, op, true)
    }

    fn allreduce_from_as(
        &self,
        src: Option<&[u8]>,
        buf: &mut [u8],
        op: &Op,
        agreed: bool,
    ) -> Result<()> {
        check_op(buf.len(), op)?;
        if src.is_some_and(|s| s.len() != buf.len()) {
            return Err(arg_err(
                ErrorClass::Count,
                "allreduce buffers differ in size",
            ));
        }
        if self.size == 1 {
            if let Some(s) = src {
                buf.copy_from_slice(s);
            }
            return Ok(());
        }
        let nelem = buf.len() / op.elem_size;
        let ring_ok = op.commutative && nelem >= self.size as usize;
        let alg = match tune::algorithm(Coll::Allreduce) {
            2 => Alg::AllreduceReduceBcast,
            3 => Alg::AllreduceRecdbl,
            4 if ring_ok => Alg::AllreduceRing,
            6 if ring_ok => Alg::AllreduceRabenseifner,
            _ if ring_ok && buf.len() > tune::ALLREDUCE_SMALL && self.size > 2 => {
                Alg::AllreduceRabenseifner
            }
            _ if ring_ok && buf.len() > tune::ALLREDUCE_SMALL => Alg::AllreduceRing,
            _ => Alg::AllreduceRecdbl,
        };
        count(self.shadow, alg);
        if alg == Alg::AllreduceRabenseifner {
            return self.allreduce_rabenseifner(src, buf, op);
        }
        if let Some(s) = src {
            buf.copy_from_slice(s);
        }
        match alg {
            Alg::AllreduceReduceBcast => {
                self.reduce_binomial(buf, 0, op, TAG_ALLREDUCE)?;
                self.bcast_binomial(buf, 0)
            }
            Alg::AllreduceRing => self.allreduce_ring(buf, op),
            _ => self.allreduce_recdbl(buf, op, agreed),
        }
    }

    /// Recursive doubling (after the fold of [`CollComm::allreduce_fold_in`]); where
    /// another length could take the large-vector plan (the default choice, a commutative
    /// `op`), the partners go in that plan's order (distance `pof2 / 2` first). A rank that
    /// saw an erroneous length by the end of its rounds runs, when another length could
    /// have taken the large-vector plan (the default choice, a commutative `op`), the
    /// rounds that plan has beyond ours, sending markers: the ring's second exchange on two
    /// ranks, Rabenseifner's doubling (an exchange with each partner again) on more.
    ///
    /// A vector of more than half [`tune::ALLREDUCE_SMALL`] (less an item) may meet one of
    /// twice its length on the large-vector plan, whose first exchange then has exactly our
    /// length (the ring's half on two ranks, the first halving on more): unless the lengths
    /// are `agreed` (the segment's gate checked them), every rank of such a vector runs
    /// those rounds too with empty messages (empty receives), so that a rank of the other
    /// plan, which sends its block there, fails and makes us fail (one extra round of
    /// empty messages on that range when there is no segment).
    pub(crate) fn allreduce_recdbl(&self, buf: &mut [u8], op: &Op, agreed: bool) -> Result<()> {
        let p = self.size;
        let r = self.rank;
        // Small vectors use a stack buffer (no allocation on the latency path).
        let mut small = Aligned([0u8; 256]);
        let mut heap = (buf.len() > small.0.len()).then(|| Scratch::new(buf.len()));
        let tmp: &mut [u8] = match heap.as_mut() {
            Some(h) => &mut h[..buf.len()],
            None => &mut small.0[..buf.len()],
        };
        let mut x = Exact::default();
        let (pof2, rem) = fold_sizes(p);
        let newrank = self.allreduce_fold_in(&mut x, buf, tmp, op, rem)?;
        if newrank >= 0 {
            // Another length may take the large-vector plan: our partners then come in
            // its order (the distances of its halving, `pof2 / 2` down to 1, then those of
            // its doubling, below), so that ranks of both plans meet whatever ranks pass
            // which length. In rank order instead, two ranks of each plan on 4 ranks could
            // each wait for a partner that first waits for another (a cycle: a hang).
            let large_plan = op.commutative && tune::algorithm(Coll::Allreduce) == 0;
            let mut mask = if large_plan { pof2 >> 1 } else { 1 };
            while mask > 0 && mask < pof2 {
                let dst = fold_real_rank(newrank ^ mask, rem);
                self.xchg(&mut x, (buf, dst), (tmp, dst), TAG_ALLREDUCE)?;
                if op.commutative || dst < r {
                    (op.f)(tmp, buf);
                } else {
                    (op.f)(buf, tmp);
                    buf.copy_from_slice(tmp);
                }
                mask = if large_plan { mask >> 1 } else { mask << 1 };
            }
            let near = !agreed && buf.len() + op.elem_size > tune::ALLREDUCE_SMALL / 2;
            if (x.0.is_some() || near) && large_plan {
                let mut mask = 1;
                while mask < pof2 {
                    let dst = fold_real_rank(newrank ^ mask, rem);
                    // No error yet: an empty receive (the other ranks of our length send
                    // nothing here), else room for what the other plan sends.
                    let room = if x.0.is_some() { tmp.len() } else { 0 };
                    self.xchg(&mut x, (&[], dst), (&mut tmp[..room], dst), TAG_ALLREDUCE)?;
                    mask <<= 1;
                }
            }
        }
        self.allreduce_fold_out(&mut x, buf, rem)?;
        x.0.map_or(Ok(()), Err)
    }

    /// Rabenseifner's allreduce (commutative ops): the first `2 * rem` ranks fold pairwise
    /// so that a power of two `pof2` remain; those run a recursive-halving reduce-scatter
    /// (each step exchanges half of the range still owned with the partner at distance
    /// `mask`, keeping and reducing the other half) and then a recursive-doubling allgather
    /// of the reduced blocks; the folded ranks finally get the result from their partner.
    /// Each block of the result is reduced on exactly one rank, so every rank ends with the
    /// same bytes. Our contribution is `src`, or in `buf` when `None`: read where it is
    /// until the first exchange, which receives the partner's data straight into `buf`.
    pub(crate) fn allreduce_rabenseifner(
        &self,
        src: Option<&[u8]>,
        buf: &mut [u8],
        op: &Op,
    ) -> Result<()> {
        let (pof2, rem) = fold_sizes(self.size);
        let mut tmp = Scratch::new(buf.len());
        let tmp = &mut tmp[..buf.len()];
        let mut x = Exact::default();
        // Our contribution while `buf` does not hold it yet.
        let mut src = src;
        let r = self.rank;
        let newrank = match src {
            Some(s) if r < 2 * rem => {
                src = None;
                if r % 2 == 0 {
                    self.xsend(&x, s, r + 1, TAG_ALLREDUCE)?;
                    -1
                } else {
                    self.xrecv(&mut x, buf, r - 1, TAG_ALLREDUCE)?;
                    (op.f)(s, buf); // commutative
                    r / 2
                }
            }
            _ => self.allreduce_fold_in(&mut x, buf, tmp, op, rem)?,
        };
        if newrank >= 0 {
            let (halving, doubling) =
                rabenseifner_plan((buf.len(), op.elem_size), (pof2, rem), newrank);
            for RabStep {
                peer,
                send: g,
                recv: k,
            } in halving
            {
                match src.take() {
                    Some(s) => {
                        self.xchg(
                            &mut x,
                            (&s[g], peer),
                            (&mut buf[k.clone()], peer),
                            TAG_ALLREDUCE,
                        )?;
                        (op.f)(&s[k.clone()], &mut buf[k]); // commutative
                    }
                    None => {
                        self.xchg(
                            &mut x,
                            (&buf[g], peer),
                            (&mut tmp[k.clone()], peer),
                            TAG_ALLREDUCE,
                        )?;
                        (op.f)(&tmp[k.clone()], &mut buf[k]);
                    }
                }
            }
            for RabStep {
                peer,
                send: mine,
                recv: theirs,
            } in doubling
            {
                let base = buf.as_mut_ptr();
                // SAFETY: `mine` and `theirs` are disjoint ranges of `buf` (sibling blocks);
                // both requests complete before `xchg_raw` returns.
                unsafe {
                    self.xchg_raw(
                        &mut x,
                        (base.add(mine.start), mine.len(), peer),
                        (base.add(theirs.start), theirs.len(), peer),
                        TAG_ALLREDUCE,
                    )?;
                }
            }
        }
        self.allreduce_fold_out(&mut x, buf, rem)?;
        x.0.map_or(Ok(()), Err)
    }

    /// The fold that [`CollComm::allreduce_recdbl`] and
    /// [`CollComm::allreduce_rabenseifner`] start with (`rem` from [`fold_sizes`]): of the
    /// first `2 * rem` ranks, each even one sends `buf` to the odd one above it, which
    /// reduces it into its own `buf` (lower rank first, received into `tmp`, as long as
    /// `buf`). Returns this rank's number among the ranks that remain, `-1` if it was
    /// folded away.
    fn allreduce_fold_in(
        &self,
        x: &mut Exact,
        buf: &mut [u8],
        tmp: &mut [u8],
        op: &Op,
        rem: i32,
    ) -> Result<i32> {
        let r = self.rank;
        Ok(if r < 2 * rem {
            if r % 2 == 0 {
                self.xsend(x, buf, r + 1, TAG_ALLREDUCE)?;
                -1
            } else {
                self.xrecv(x, tmp, r - 1, TAG_ALLREDUCE)?;
                (op.f)(tmp, buf); // lower rank first
                r / 2
            }
        } else {
            r - rem
        })
    }

    /// Undoes [`CollComm::allreduce_fold_in`]: each odd rank of the first `2 * rem` sends
    /// the result in `buf` (or the marker) to the even rank below it.
    fn allreduce_fold_out(&self, x: &mut Exact, buf: &mut [u8], rem: i32) -> Result<()> {
        let r = self.rank;
        if r < 2 * rem {
            if r % 2 == 1 {
                self.xsend(x, buf, r - 1, TAG_ALLREDUCE)?;
            } else {
                self.xrecv(x, buf, r + 1, TAG_ALLREDUCE)?;
            }
        }
        Ok(())
    }

    /// The ring (commutative ops): a reduce-scatter of `p` even blocks (after `p - 1`
    /// steps block `rank` holds the reduction of everybody's block `rank`), then an
    /// allgather of the blocks, each step receiving from the left and sending to the right.
    pub(crate) fn allreduce_ring(&self, buf: &mut [u8], op: &Op) -> Result<()> {
        let p = self.size;
        let (counts, displs) = split_even(buf.len(), op.elem_size, p as usize);
        let r = self.rank;
        let right = self.modp(r + 1);
        let left = self.modp(r - 1);
        let blk = |b: i32| {
            let b = b.rem_euclid(p) as usize;
            displs[b]..displs[b] + counts[b]
        };
        let mut x = Exact::default();
        let mut tmp = Scratch::new(counts.iter().copied().max().unwrap_or(0));
        for s in 0..p - 1 {
            let (sb, rb) = (blk(r - s - 1), blk(r - s - 2));
            self.xchg(
                &mut x,
                (&buf[sb], right),
                (&mut tmp[..rb.len()], left),
                TAG_ALLREDUCE,
            )?;
            (op.f)(&tmp[..rb.len()], &mut buf[rb]);
        }
        for s in 0..p - 1 {
            let (sb, rb) = (blk(r - s), blk(r - s - 1));
            let base = buf.as_mut_ptr();
            // SAFETY: blocks `sb` and `rb` are distinct (p > 1) ranges of `buf`; both
            // requests complete before `xchg_raw` returns.
            unsafe {
                self.xchg_raw(
                    &mut x,
                    (base.add(sb.start), sb.len(), right),
                    (base.add(rb.start), rb.len(), left),
                    TAG_ALLREDUCE,
                )?;
            }
        }
        x.0.map_or(Ok(()), Err)
    }

    /// Whether every rank passes `bytes` (the init of a persistent allreduce, whose
    /// planned rounds would not match those of another length): every rank learns the
    /// largest and the smallest length (one recursive-doubling allreduce of two words) and
    /// fails alike when they differ, with `MPI_ERR_TRUNCATE` when some rank's vector is
    /// longer than ours, else `MPI_ERR_COUNT` ([`lengths_differ`]).
    pub fn same_length(&self, bytes: usize) -> Result<()> {
        if self.size == 1 {
            return Ok(());
        }
        let ours = bytes as u64;
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&ours.to_le_bytes());
        b[8..].copy_from_slice(&(!ours).to_le_bytes());
        let word = |w: &[u8]| u64::from_le_bytes(w.try_into().expect("8-byte words"));
        let max = |a: &[u8], io: &mut [u8]| {
            for (x, y) in a.chunks_exact(8).zip(io.chunks_exact_mut(8)) {
                let m = word(x).max(word(y));
                y.copy_from_slice(&m.to_le_bytes());
            }
        };
        self.allreduce_recdbl(
            &mut b,
            &Op {
                f: &max,
                elem_size: 8,
                commutative: true,
            },
            true,
        )?;
        let (hi, lo) = (word(&b[..8]), !word(&b[8..]));
        let theirs = if hi != ours { hi } else { lo };
        if theirs == ours {
            return Ok(());
        }
        Err(lengths_differ(
            theirs,
            bytes,
            format!(
                "persistent allreduce: this rank passes {bytes} bytes, another {theirs} \
                 (lengths from {lo} to {hi})"
            ),
        ))
    }
}
