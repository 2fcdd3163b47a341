//! Reductions: reduce, reduce_scatter, scan, exscan (allreduce: `allreduce.rs`).

use super::allreduce::{marker, Exact};
use super::{TAG_EXSCAN, TAG_REDSCAT, TAG_REDUCE, TAG_SCAN};
use crate::base::helpers::{
    chain_segments, check_blocks, check_op, lengths_differ, pooled, scan_chain, scan_rounds,
    unpool, ScanLens, Scratch, SCAN_HDR,
};
use crate::base::params::{self as tune, Coll};
use crate::base::stats::{count, Alg};
use crate::{arg_err, CollComm, Op, Result};
use oxmpi_engine::ErrorClass;

/// After a receive of recursive doubling that chain ranks may meet (`got` bytes in `buf`,
/// from a partner ranking lower when `lower`): a header (a chain rank's, see
/// [`CollComm::scan_chain_check`]) fails the call, and its lengths join `below`; any other
/// message from a lower partner makes `below` [`ScanLens::OTHER`] (a rank of recursive
/// doubling below us: rank `r - 1` runs no chain towards us).
fn scan_header(
    x: &mut Exact,
    below: &mut ScanLens,
    got: Option<(usize, bool)>,
    buf: &[u8],
    lower: bool,
    n: usize,
) {
    let h = match got
        .filter(|&(l, marked)| marked && l == SCAN_HDR)
        .and_then(|(l, _)| ScanLens::parse(&buf[..l]))
    {
        Some(h) => h,
        None => {
            if lower {
                *below = ScanLens::OTHER;
            }
            return;
        }
    };
    if lower {
        *below = below.with(h);
    }
    if x.0.is_none() {
        let theirs = if h.lo != n as u64 { h.lo } else { h.hi };
        x.0 = Some(lengths_differ(
            theirs,
            n,
            format!(
                "scan: a partner of recursive doubling ({n} bytes) runs the chain (ranks of \
                 {} to {} bytes; the ranks' counts differ)",
                h.lo, h.hi
            ),
        ));
    }
}

impl CollComm {
    /// `MPI_Reduce` in place: `buf` holds our contribution; at `root` it receives the result.
    /// On other ranks `buf` is used as scratch (its content afterwards is unspecified).
    pub fn reduce(&self, buf: &mut [u8], root: i32, op: &Op) -> Result<()> {
        self.check_root(root)?;
        check_op(buf.len(), op)?;
        if self.size == 1 {
            return Ok(());
        }
        if tune::algorithm(Coll::Reduce) == 1 {
            count(self.shadow, Alg::ReduceLinear);
            self.reduce_linear(buf, root, op, TAG_REDUCE)
        } else {
            count(self.shadow, Alg::ReduceBinomial);
            self.reduce_binomial(buf, root, op, TAG_REDUCE)
        }
    }

    /// `MPI_Reduce` without copying the input: `send` is our contribution (`None` at the
    /// root in place: it is in `recv`); at `root`, `recv` (as long as the contribution)
    /// receives the result (other ranks pass `None`). The binomial tree of
    /// [`CollComm::reduce`], with fewer copies: a leaf sends its input from where it is,
    /// and a rank that has combined nothing yet receives its first child's vector straight
    /// into its accumulator (the result buffer at the root, per-thread scratch elsewhere)
    /// and folds its own in (`acc = ours ∘ child`: the rank order holds, the child covering
    /// the ranks above ours).
    pub fn reduce_into(
        &self,
        send: Option<&[u8]>,
        recv: Option<&mut [u8]>,
        root: i32,
        op: &Op,
    ) -> Result<()> {
        self.check_root(root)?;
        let me_root = self.rank == root;
        let n = match (send, &recv) {
            (Some(s), _) => s.len(),
            (None, Some(r)) if me_root => r.len(),
            _ => {
                return Err(arg_err(
                    ErrorClass::Buffer,
                    "reduce: no contribution (in place is for the root only)",
                ))
            }
        };
        let mut recv = match recv {
            Some(r) if me_root && r.len() != n => {
                return Err(arg_err(
                    ErrorClass::Count,
                    format!("reduce: a {n}-byte contribution into {} bytes", r.len()),
                ))
            }
            Some(r) if me_root => Some(r),
            None if me_root => {
                return Err(arg_err(
                    ErrorClass::Buffer,
                    "reduce: no result buffer at the root",
                ))
            }
            _ => None,
        };
        check_op(n, op)?;
        if self.size == 1 || tune::algorithm(Coll::Reduce) == 1 {
            // One rank, or the linear algorithm forced: on a copy.
            let mut buf = match (send, recv.as_deref()) {
                (Some(s), _) => s.to_vec(),
                (None, r) => r.map(<[u8]>::to_vec).unwrap_or_default(),
            };
            if self.size > 1 {
                count(self.shadow, Alg::ReduceLinear);
                self.reduce_linear(&mut buf, root, op, TAG_REDUCE)?;
            }
            if let Some(r) = recv {
                r.copy_from_slice(&buf);
            }
            return Ok(());
        }
        count(self.shadow, Alg::ReduceBinomial);
        // Non-commutative: the tree is rooted at 0 (adjacent rank ranges join in order);
        // the result then moves to the root.
        let troot = if op.commutative { root } else { 0 };
        if self.rank == troot {
            match recv.as_deref_mut() {
                Some(r) => self.reduce_binomial_into(send, r, troot, op, TAG_REDUCE)?,
                None => {
                    let mut acc = Scratch::new(n);
                    let acc = &mut acc[..n];
                    // The root waits for our message whatever we saw: the marker when
                    // the tree failed (erroneous counts), so that the root fails too.
                    let got = self.reduce_binomial_into(send, acc, troot, op, TAG_REDUCE);
                    self.send_or_marker(acc, got.is_err(), root, TAG_REDUCE)?;
                    return got;
                }
            }
            return Ok(());
        }
        let ours = {
            // Our input: in place at the root it is in `recv` (which gets the result from
            // `troot` only after the tree has taken it).
            let input = send.or(recv.as_deref()).unwrap_or_default();
            let m = if self.is_leaf(troot) { 0 } else { n };
            let mut acc = Scratch::new(m);
            self.reduce_binomial_into(Some(input), &mut acc[..m], troot, op, TAG_REDUCE)
        };
        if let Some(r) = recv {
            // Received exactly, even when our part failed (no message is left behind).
            let mut ex = Exact::default();
            self.xrecv(&mut ex, r, troot, TAG_REDUCE)?;
            ours?;
            return ex.0.map_or(Ok(()), Err);
        }
        ours
    }

    /// Whether this rank has no child in the binomial tree rooted at `troot`.
    fn is_leaf(&self, troot: i32) -> bool {
        let rel = self.modp(self.rank - troot);
        rel & 1 == 1 || rel + 1 >= self.size
    }

    /// This rank's part of the binomial reduction tree rooted at `troot`
    /// ([`CollComm::reduce_into`]): `input` is our contribution (`None`: it is in `acc`
    /// already), `acc` accumulates our partial result (the whole result at `troot`; unused
    /// by a leaf that has its input) and is sent to the parent.
    fn reduce_binomial_into(
        &self,
        input: Option<&[u8]>,
        acc: &mut [u8],
        troot: i32,
        op: &Op,
        tag: i32,
    ) -> Result<()> {
        let p = self.size;
        let rel = self.modp(self.rank - troot);
        let mut ready = input.is_none();
        let mut tmp: Option<Scratch> = None;
        // Exact receives ([`Exact`]): a child's vector whose length differs from ours
        // (erroneous counts) is recorded, the rest of the tree still runs, and our parent
        // gets the marker instead of our partial result, so that the error climbs to the
        // root instead of a short vector folding in as data (or a long one stopping us
        // before we send, our parent then waiting).
        let mut ex = Exact::default();
        let mut mask = 1;
        while mask < p && rel & mask == 0 {
            let src = rel | mask;
            if src < p {
                let child = self.modp(src + troot);
                match input {
                    Some(x) if !ready => {
                        // The child covers the ranks above ours: acc = ours ∘ child.
                        self.xrecv(&mut ex, acc, child, tag)?;
                        if ex.0.is_none() {
                            (op.f)(x, acc);
                        }
                        ready = true;
                    }
                    _ => {
                        let t = tmp.get_or_insert_with(|| Scratch::new(acc.len()));
                        let t = &mut t[..acc.len()];
                        self.xrecv(&mut ex, t, child, tag)?;
                        match (ex.0.is_none(), op.commutative) {
                            (false, _) => {}
                            (true, true) => (op.f)(t, acc),
                            (true, false) => {
                                (op.f)(acc, t);
                                acc.copy_from_slice(t);
                            }
                        }
                    }
                }
            }
            mask <<= 1;
        }
        if rel != 0 {
            let parent = self.modp(rel - (rel & rel.wrapping_neg()) + troot);
            match input {
                Some(x) if !ready => self.xsend(&ex, x, parent, tag)?,
                _ => self.xsend(&ex, acc, parent, tag)?,
            }
        }
        ex.0.map_or(Ok(()), Err)
    }

    pub(crate) fn reduce_linear(&self, buf: &mut [u8], root: i32, op: &Op, tag: i32) -> Result<()> {
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

    pub(crate) fn reduce_binomial(
        &self,
        buf: &mut [u8],
        root: i32,
        op: &Op,
        tag: i32,
    ) -> Result<()> {
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

    /// Ring reduce-scatter in place on the full vector `buf` (commutative ops): afterwards
    /// block `rank` of `buf` holds the reduction of everybody's block `rank`.
    pub(crate) fn ring_reduce_scatter(
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
        // Exact exchanges ([`Exact`]): a block whose length differs from ours (erroneous
        // counts) is recorded and the steps go on with markers, so that the error reaches
        // every rank along the ring (the rank after an erroneous one at step 0, each next
        // one a step later, within the `p - 1` steps) and nobody waits for a message.
        let mut x = Exact::default();
        for s in 0..p - 1 {
            let sb = (r - s - 1).rem_euclid(p) as usize;
            let rb = (r - s - 2).rem_euclid(p) as usize;
            let sblk = &buf[displs[sb]..displs[sb] + counts[sb]];
            self.xchg(&mut x, (sblk, right), (&mut tmp[..counts[rb]], left), tag)?;
            if x.0.is_none() {
                (op.f)(
                    &tmp[..counts[rb]],
                    &mut buf[displs[rb]..displs[rb] + counts[rb]],
                );
            }
        }
        x.0.map_or(Ok(()), Err)
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
            count(self.shadow, Alg::ReduceScatterRing);
            self.ring_reduce_scatter(buf, counts, &displs, op, TAG_REDSCAT)?;
            recv[..counts[me]].copy_from_slice(&buf[displs[me]..displs[me] + counts[me]]);
            Ok(())
        } else {
            count(self.shadow, Alg::ReduceScatterReduceScatterv);
            // Exact, as the ring: the tree to rank 0 (in rank order) records a vector of
            // another length and climbs with the marker, so that rank 0 fails and sends
            // every rank the marker instead of its block (each then fails too); a rank's
            // block of another length than rank 0's count for it fails that rank.
            let got = self.reduce_binomial_into(None, buf, 0, op, TAG_REDSCAT);
            self.scatter_blocks_exact(got, (buf, counts, &displs), &mut recv[..counts[me]])
        }
    }

    /// The scatterv of [`CollComm::reduce_scatter`]'s non-commutative path from rank 0,
    /// whose reduction of the vector (`buf`, block `i` `counts[i]` bytes at `displs[i]`)
    /// ended with `got`: rank 0 sends each other rank its block (the marker when `got`
    /// failed) and copies its own into `recv`; every other rank receives its block into
    /// `recv` exactly (another length fails it, after the receive: no message is left
    /// behind). Returns `got`'s error first.
    fn scatter_blocks_exact(
        &self,
        got: Result<()>,
        (buf, counts, displs): (&[u8], &[usize], &[usize]),
        recv: &mut [u8],
    ) -> Result<()> {
        if self.rank != 0 {
            let mut ex = Exact::default();
            self.xrecv(&mut ex, recv, 0, TAG_REDSCAT)?;
            got?;
            return ex.0.map_or(Ok(()), Err);
        }
        let block = |i: usize| {
            if got.is_ok() {
                &buf[displs[i]..displs[i] + counts[i]]
            } else {
                marker(counts[i])
            }
        };
        // SAFETY: each block (inside `buf`, or the static marker) outlives the waitall.
        let reqs = unsafe { self.isend_blocks(0, TAG_REDSCAT, got.is_err(), block) }?;
        if got.is_ok() {
            recv.copy_from_slice(&buf[displs[0]..displs[0] + counts[0]]);
        }
        let sent = self.waitall(&reqs, "reduce_scatter");
        got.and(sent)
    }

    /// `MPI_Scan` in place: `buf` holds our contribution and receives `x0 ∘ … ∘ x(rank)`.
    pub fn scan(&self, buf: &mut [u8], op: &Op) -> Result<()> {
        check_op(buf.len(), op)?;
        count(self.shadow, Alg::ScanRecdbl);
        let mut partial = pooled(buf.len());
        partial.copy_from_slice(buf);
        self.scan_recdbl(partial, op, TAG_SCAN, |tmp| (op.f)(tmp, buf))
    }

    /// Inclusive (`exclusive`: exclusive) scan of `send` (`None`: it is in `recv`, in
    /// place) into `recv` (rank 0's left untouched by the exclusive scan): the recursive
    /// doubling of [`CollComm::scan`], moving and combining only what is needed (as the
    /// nonblocking `iscan_from`): a partial result goes only to a partner that folds it into
    /// its result (it ranks higher) or that has later rounds, and is extended only while we
    /// have later rounds; the first lower partial lands straight in `recv` when the order
    /// allows (exclusive, or a commutative operation).
    ///
    /// Every exchange is exact ([`Exact`], as the allreduce's): a partial whose length
    /// differs from ours (an erroneous count) is recorded, the rounds go on (the other
    /// ranks wait for our messages) with the error marker in place of our partial, and the
    /// error is returned after the last round. The plan is the same for every length, and
    /// every rank above an erroneous one folds a partial that it or a marker took part in,
    /// so the erroneous rank (unless it is rank 0) and every rank above it fail.
    ///
    /// Another length may take the chain ([`CollComm::scan_chain`], from
    /// [`tune::SCAN_CHAIN_MIN`] on more than 2 ranks): its ranks first run our plan's
    /// messages with length headers ([`CollComm::scan_chain_check`]). Unless the lengths
    /// are known to agree ([`CollComm::scan_into_agreed`]), a receive here then has room
    /// for a header, a header fails the call, and a rank that got one from every lower
    /// partner (every rank below is a chain rank, all of one length) takes the chain's
    /// segments that rank `r - 1` sends it.
    pub fn scan_into(
        &self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        exclusive: bool,
        op: &Op,
    ) -> Result<()> {
        self.scan_into_as(send, recv, exclusive, op, false)
    }

    /// [`CollComm::scan_into`] where every rank is known to pass the same length (the
    /// segment's gate checked it, [`crate::sm::Seg::reduction_gate`]): the chain runs
    /// without its length check, recursive doubling without looking for headers.
    pub fn scan_into_agreed(
        &self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        exclusive: bool,
        op: &Op,
    ) -> Result<()> {
        self.scan_into_as(send, recv, exclusive, op, true)
    }

    fn scan_into_as(
        &self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        exclusive: bool,
        op: &Op,
        agreed: bool,
    ) -> Result<()> {
        check_op(recv.len(), op)?;
        if send.is_some_and(|s| s.len() != recv.len()) {
            return Err(arg_err(ErrorClass::Count, "scan buffers differ in size"));
        }
        if scan_chain(recv.len(), self.size) {
            count(
                self.shadow,
                if exclusive {
                    Alg::ExscanChain
                } else {
                    Alg::ScanChain
                },
            );
            let below = if agreed {
                None
            } else {
                Some(self.scan_chain_check(recv.len())?)
            };
            return self.scan_chain(send, recv, exclusive, op, below);
        }
        count(
            self.shadow,
            if exclusive {
                Alg::ExscanRecdbl
            } else {
                Alg::ScanRecdbl
            },
        );
        let n = recv.len();
        let (r, p) = (self.rank, self.size);
        // Chain ranks may send headers here (see above).
        let mixed = !agreed && p > 2 && tune::algorithm(Coll::Scan) == 0;
        let room = if mixed { n.max(SCAN_HDR) } else { n };
        // In place, our input is copied: the result overwrites it while it may still be sent.
        let copy = send.is_none().then(|| {
            let mut v = pooled(n);
            v.copy_from_slice(recv);
            v
        });
        let inp: &[u8] = send.or(copy.as_deref()).unwrap_or_default();
        let mut partial: Option<Vec<u8>> = None;
        let mut tmp: Option<Vec<u8>> = None;
        let mut have = false;
        let mut x = Exact::default();
        // The lengths below us as the headers told them (mixed only).
        let mut below = ScanLens::NONE;
        for rd in scan_rounds(r, p) {
            let (d, keep, send_it, recv_it) = (rd.peer, rd.keep, rd.send, rd.recv);
            let part: &[u8] = partial.as_deref().unwrap_or(inp);
            let sent = send_it.then_some((part.as_ptr(), part.len(), d));
            if d < r && !have && !keep && (exclusive || op.commutative) && room == n {
                // Straight into the result.
                // SAFETY: `part` (our input or partial) and `recv` are distinct buffers,
                // `recv` writable for `n == room` bytes; both outlive the exchange.
                let got = unsafe {
                    self.xchg_room(
                        &mut x,
                        sent,
                        Some((recv.as_mut_ptr(), n, n, d)),
                        TAG_SCAN,
                        false,
                    )
                }?;
                if mixed {
                    scan_header(&mut x, &mut below, got, recv, d < r, n);
                }
                if !exclusive {
                    (op.f)(inp, recv);
                }
                have = true;
            } else if recv_it {
                let tb = tmp.get_or_insert_with(|| pooled(room));
                // SAFETY: `tb` (scratch of `room` bytes) is distinct from `part`; both
                // outlive the exchange.
                let got = unsafe {
                    self.xchg_room(
                        &mut x,
                        sent,
                        Some((tb.as_mut_ptr(), room, n, d)),
                        TAG_SCAN,
                        false,
                    )
                }?;
                if mixed {
                    scan_header(&mut x, &mut below, got, tb, d < r, n);
                }
                let t = &mut tb[..n];
                if d < r {
                    // `t` covers the ranks just below those our result covers.
                    if exclusive && !have {
                        recv.copy_from_slice(t);
                    } else {
                        if !have {
                            recv.copy_from_slice(inp);
                        }
                        (op.f)(t, recv);
                    }
                    have = true;
                    if keep {
                        let pb = partial.get_or_insert_with(|| {
                            let mut v = pooled(n);
                            v.copy_from_slice(inp);
                            v
                        });
                        (op.f)(t, pb);
                    }
                } else if keep {
                    // `t` covers the ranks just above our partial's: partial ∘ t.
                    match partial.as_mut() {
                        None => {
                            let mut pb = pooled(n);
                            pb.copy_from_slice(t);
                            (op.f)(inp, &mut pb);
                            partial = Some(pb);
                        }
                        Some(pb) if op.commutative => (op.f)(t, pb),
                        Some(pb) => {
                            (op.f)(pb, t);
                            pb.copy_from_slice(t);
                        }
                    }
                }
            } else if send_it {
                self.xsend(&x, part, d, TAG_SCAN)?;
            }
        }
        if !exclusive && !have && send.is_some() {
            recv.copy_from_slice(inp);
        }
        for v in [copy, partial, tmp].into_iter().flatten() {
            unpool(v);
        }
        // Every rank below is a chain rank of one length (each lower partner sent a
        // header): rank `r - 1` sends us its chain; take it, as it planned it.
        if let (true, Some(_), Some(l)) = (mixed && r > 0, &x.0, below.all()) {
            let tag = if exclusive { TAG_EXSCAN } else { TAG_SCAN };
            self.scan_drain(l, op.elem_size, r - 1, tag)?;
        }
        x.0.map_or(Ok(()), Err)
    }

    /// The check a chain rank runs before the chain of an `n`-byte vector when the lengths
    /// are not known to agree: the recursive-doubling plan's messages ([`scan_rounds`],
    /// the same pairs and directions), each a header ([`ScanLens`], [`SCAN_HDR`] bytes) of
    /// the lengths our partial would cover in place of the partial; a message that is not
    /// a header (a rank of recursive doubling, whose vector is shorter than the chain's
    /// bound, sent its partial or the error marker) counts as [`ScanLens::OTHER`]. So a
    /// rank of either plan meets its partners message for message. Returns the lengths of
    /// the ranks below ours: rank `r - 1` runs the chain towards us exactly when they are
    /// all one length (it knows the same ranks' lengths, its own among them).
    fn scan_chain_check(&self, n: usize) -> Result<ScanLens> {
        let r = self.rank;
        let mut part = ScanLens::of(n);
        let mut below = ScanLens::NONE;
        for rd in scan_rounds(r, self.size) {
            let out = part.encode();
            let mut got = [0u8; SCAN_HDR];
            // A header always goes out (a marked message, never the error marker): a fresh
            // record for each exchange.
            let mut x = Exact::default();
            // SAFETY: `out` and `got` are distinct stack buffers of `SCAN_HDR` bytes that
            // outlive the exchange.
            let len = unsafe {
                self.xchg_room(
                    &mut x,
                    rd.send.then_some((out.as_ptr(), SCAN_HDR, rd.peer)),
                    rd.recv
                        .then_some((got.as_mut_ptr(), SCAN_HDR, SCAN_HDR, rd.peer)),
                    TAG_SCAN,
                    true,
                )
            }?;
            if rd.recv {
                // A header is a marked message of its length: a partial of that length
                // (whatever its bytes) or an error marker is not one.
                let t = len
                    .filter(|&(l, marked)| marked && l == SCAN_HDR)
                    .and_then(|(l, _)| ScanLens::parse(&got[..l]))
                    .unwrap_or(ScanLens::OTHER);
                if rd.peer < r {
                    below = below.with(t);
                }
                if rd.keep {
                    part = part.with(t);
                }
            }
        }
        Ok(below)
    }

    /// Receives (and drops) the chain's segments of a `len`-byte vector from `src`: those
    /// a rank that passes another length sends us, as [`CollComm::scan_chain`] cuts them.
    fn scan_drain(&self, len: usize, elem: usize, src: i32, tag: i32) -> Result<()> {
        let segs = chain_segments(len, elem);
        let mut v = pooled(segs.first().map_or(0, |s| s.1));
        let mut res = Ok(());
        for &(_, m) in &segs {
            // Any length goes: the call fails anyway.
            if let Err(e) = self.xrecv(&mut Exact::default(), &mut v[..m], src, tag) {
                res = Err(e);
                break;
            }
        }
        unpool(v);
        res
    }

    /// The pipelined chain of [`CollComm::scan_into`] (same arguments): rank `r` receives
    /// the prefix of ranks `0..r` from `r - 1` in segments ([`chain_segments`], all
    /// receives posted at once), extends each by its own contribution as it arrives and
    /// passes it on to `r + 1` at once (the inclusive result itself; for the exclusive
    /// scan, the received prefix lands in `recv` and `prefix ∘ ours` goes on from scratch).
    /// Each byte moves `p - 1` times and is combined `p - 1` times in all, and neighbours
    /// work on different segments at the same time. Any associative operation: a prefix
    /// is always combined as `lower ∘ ours`, except that a commutative one receives the
    /// prefix straight into `recv` and folds ours in (`ours ∘ prefix`, the same value).
    fn scan_chain(
        &self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        exclusive: bool,
        op: &Op,
        below: Option<ScanLens>,
    ) -> Result<()> {
        let n = recv.len();
        let (r, p) = (self.rank, self.size);
        let tag = if exclusive { TAG_EXSCAN } else { TAG_SCAN };
        // The check found ranks below of another length, or of recursive doubling: rank
        // `r - 1` runs no chain towards us, or one of its own length, which we take and
        // drop; we run none towards `r + 1` (whose check sees the same ranks and ours).
        if let Some(lens) = below.filter(|l| r > 0 && l.all() != Some(n)) {
            if let Some(l) = lens.all() {
                self.scan_drain(l, op.elem_size, r - 1, tag)?;
            }
            let theirs = if lens.lo != n as u64 {
                lens.lo
            } else {
                lens.hi
            };
            return Err(lengths_differ(
                theirs,
                n,
                format!(
                    "scan: rank {r} passes {n} bytes, the ranks below it {} (the ranks' \
                     counts differ)",
                    match lens.all() {
                        Some(l) => format!("{l} bytes"),
                        None if lens == ScanLens::OTHER => "shorter vectors".to_string(),
                        None => format!("{} to {} bytes", lens.lo, lens.hi),
                    }
                ),
            ));
        }
        let segs = chain_segments(n, op.elem_size);
        let next = (r + 1 < p).then_some(r + 1);
        let mut reqs: Vec<(oxmpi_engine::ReqId, i32)> = Vec::new();
        if r == 0 {
            // Our contribution is the prefix: sent from where it is.
            let src = send.map_or(recv.as_ptr(), <[u8]>::as_ptr);
            if let Some(next) = next {
                for &(o, m) in &segs {
                    // SAFETY: segment `o..o + m` of our contribution (`n` bytes), unchanged
                    // until the waitall below (`recv` is written only when it is not the
                    // contribution).
                    match unsafe { self.isend_raw(src.add(o), m, next, tag) } {
                        Ok(q) => reqs.push((q, next)),
                        Err(e) => {
                            self.abandon(&reqs);
                            return Err(e);
                        }
                    }
                }
            }
            if let (false, Some(s)) = (exclusive, send) {
                recv.copy_from_slice(s);
            }
            return self.waitall(&reqs, "scan send");
        }
        let prev = r - 1;
        // In place, the exclusive prefix lands where our contribution is: copied aside
        // first when it is still needed (we pass `prefix ∘ ours` on).
        let copy = (exclusive && send.is_none() && next.is_some()).then(|| {
            let mut v = pooled(n);
            v.copy_from_slice(recv);
            v
        });
        let inp: &[u8] = send.or(copy.as_deref()).unwrap_or_default();
        // The prefix lands in `recv` (exclusive; or inclusive with a commutative op and
        // our contribution elsewhere), else in scratch, folded into `recv` from there.
        let direct = exclusive || (op.commutative && send.is_some());
        // Scratch: the landing place, or (exclusive) what we pass on.
        let mut tmp = (!direct || (exclusive && next.is_some())).then(|| pooled(n));
        let rp = recv.as_mut_ptr();
        let tp = tmp
            .as_mut()
            .map_or(std::ptr::null_mut(), |t| t.as_mut_ptr());
        let land = if direct { rp } else { tp };
        // Receives waited for so far (the first `waited` of `reqs`); sends follow them.
        let mut waited = 0;
        // Exact receives ([`Exact`]): a segment of another length (an erroneous count) is
        // recorded, and every later segment goes on as the error marker, so that the ranks
        // above fail too; the error is returned at the end.
        let mut x = Exact::default();
        let res = 'run: {
            for &(o, m) in &segs {
                // SAFETY: segment `o..o + m` of `recv` or of `tmp` (`n` bytes each), not
                // touched until its receive completes below; both outlive every request.
                match unsafe { self.irecv_raw(land.add(o), m, prev, tag) } {
                    Ok(q) => reqs.push((q, prev)),
                    Err(e) => break 'run Err(e),
                }
            }
            for &(o, m) in &segs {
                let st = self.e.wait(reqs[waited].0);
                waited += 1;
                if let Err(e) = self.exact_status(&mut x, st, m, prev) {
                    break 'run Err(e);
                }
                // SAFETY: segment `o..o + m` of `recv` and of `tmp` (when there is one):
                // its receive has completed, no other request touches it until it is sent
                // on below, and the two buffers are distinct.
                let (out, t) = unsafe {
                    (
                        std::slice::from_raw_parts_mut(rp.add(o), m),
                        (!tp.is_null()).then(|| std::slice::from_raw_parts_mut(tp.add(o), m)),
                    )
                };
                let ours = inp.get(o..o + m).unwrap_or_default();
                let from = match (exclusive, t) {
                    (false, None) => {
                        (op.f)(ours, out); // ours ∘ prefix (commutative)
                        rp
                    }
                    (false, Some(t)) => {
                        if send.is_some() {
                            out.copy_from_slice(ours);
                        }
                        (op.f)(t, out); // prefix ∘ ours
                        rp
                    }
                    (true, Some(t)) => {
                        t.copy_from_slice(ours);
                        (op.f)(out, t); // prefix ∘ ours, passed on
                        tp
                    }
                    (true, None) => continue, // the last rank passes nothing on
                };
                if let Some(next) = next {
                    let from = from.wrapping_add(o).cast_const();
                    // SAFETY: segment `o..o + m` of `recv` or `tmp`, final now and unchanged
                    // until the waitall below (or the static marker, only read).
                    match unsafe { self.isend_or_marker((from, m, next), x.0.is_some(), tag) } {
                        Ok(q) => reqs.push((q, next)),
                        Err(e) => break 'run Err(e),
                    }
                }
            }
            Ok(())
        };
        let res = match res {
            Ok(()) => self.waitall(&reqs[waited..], "scan send"),
            Err(e) => {
                self.abandon(&reqs[waited..]);
                Err(e)
            }
        };
        for v in [copy, tmp].into_iter().flatten() {
            unpool(v);
        }
        res.and(x.0.map_or(Ok(()), Err))
    }

    /// `MPI_Exscan`: `send` is our contribution; `recv` receives `x0 ∘ … ∘ x(rank-1)` on
    /// ranks > 0 (rank 0's `recv` is left untouched).
    pub fn exscan(&self, send: &[u8], recv: &mut [u8], op: &Op) -> Result<()> {
        check_op(send.len(), op)?;
        if recv.len() != send.len() {
            return Err(arg_err(ErrorClass::Count, "exscan buffers differ in size"));
        }
        count(self.shadow, Alg::ExscanRecdbl);
        let mut have = false;
        let mut partial = pooled(send.len());
        partial.copy_from_slice(send);
        self.scan_recdbl(partial, op, TAG_EXSCAN, |tmp| {
            if have {
                (op.f)(tmp, recv);
            } else {
                recv.copy_from_slice(tmp);
                have = true;
            }
        })
    }

    /// The recursive-doubling exchange of [`CollComm::scan`] and [`CollComm::exscan`]:
    /// `partial` starts as our contribution and is exchanged with the partner at each
    /// distance `mask`, growing into the reduction of the whole block of ranks covered so
    /// far (kept in rank order for non-commutative ops). `from_lower` gets each partial
    /// received from a lower rank, in increasing distance, before it joins `partial`.
    fn scan_recdbl(
        &self,
        mut partial: Vec<u8>,
        op: &Op,
        tag: i32,
        mut from_lower: impl FnMut(&[u8]),
    ) -> Result<()> {
        let mut tmp = pooled(partial.len());
        let mut mask = 1;
        while mask < self.size {
            let partner = self.rank ^ mask;
            if partner < self.size {
                self.sendrecv(&partial, partner, &mut tmp, partner, tag)?;
                if self.rank > partner {
                    from_lower(&tmp);
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
        unpool(tmp);
        unpool(partial);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scan's length header: read back only whole and with its magic; ranks of one
    /// length agree, another length or a rank of recursive doubling spoils the range for
    /// good, and a message of another length (a partial, a marker) is no header.
    #[test]
    fn scan_length_headers() {
        let h = ScanLens::of(70000).with(ScanLens::of(70000));
        assert_eq!(h.all(), Some(70000));
        assert_eq!(ScanLens::parse(&h.encode()), Some(h));
        assert_eq!(ScanLens::NONE.with(h), h);
        assert_eq!(ScanLens::NONE.all(), None);
        let two = h.with(ScanLens::of(70004));
        assert_eq!(two.all(), None);
        assert_eq!(ScanLens::parse(&two.encode()), Some(two));
        assert_eq!(h.with(ScanLens::OTHER), ScanLens::OTHER);
        assert_eq!(ScanLens::OTHER.with(h).all(), None);
        let b = h.encode();
        assert_eq!(ScanLens::parse(&b[..SCAN_HDR - 1]), None);
        let mut c = b;
        c[3] ^= 1;
        assert_eq!(ScanLens::parse(&c), None);
        assert_eq!(ScanLens::parse(&[0u8; SCAN_HDR]), None);
    }
}
