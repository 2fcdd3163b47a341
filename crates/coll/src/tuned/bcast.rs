//! Broadcast: binomial tree, scatter + ring allgather, linear, pipelined chain.

use super::TAG_BCAST;
use crate::base::helpers::{bcast_differs, split_even, TRUNCATED_ABOVE};
use crate::base::params::{self as tune, Coll};
use crate::base::stats::{count, Alg};
use crate::{arg_err, CollComm, Result};
use oxmpi_engine::ErrorClass;

impl CollComm {
    /// `MPI_Bcast` of `buf` from `root` by point to point, where every rank should pass the
    /// root's length: a rank whose length differs (an erroneous call) fails instead of
    /// waiting or returning without the data. The algorithm is chosen from the root's
    /// length and every rank learns it from its first message, whose source depends only on
    /// the algorithm family (`coll_tuned_bcast_algorithm`, the same everywhere): its parent
    /// in the binomial tree (the linear algorithm: the root; the pipelined chain: its
    /// predecessor). The binomial tree and the linear algorithm send the data at once
    /// (nothing more on the correct path): a receiver takes the message's length as the
    /// root's and forwards exactly that. The scatter-allgather and the pipelined chain, and
    /// empty broadcasts, first send an empty marker and a header with the root's length down
    /// that tree (data is never empty, so the marker is told apart), and then every rank
    /// runs the root's algorithm for the root's length, a rank with another length on a
    /// scratch buffer. A rank whose length differs gets `MPI_ERR_TRUNCATE` (the root's data
    /// is longer) or `MPI_ERR_COUNT` (shorter), as on the segment (`select::bcast`); its
    /// buffer holds what arrived when the data came in one message. A receiver of the
    /// binomial tree whose buffer was too short cannot forward the data: it sends its
    /// children a marker whose header says so, and they fail too. The root returns success.
    pub fn bcast(&self, buf: &mut [u8], root: i32) -> Result<()> {
        self.check_root(root)?;
        if self.size == 1 {
            return Ok(());
        }
        let forced = tune::algorithm(Coll::Bcast);
        if self.rank == root {
            let m = buf.len();
            let alg = self.bcast_choice(forced, m);
            if m == 0 || !matches!(alg, Alg::BcastBinomial | Alg::BcastLinear) {
                self.bcast_marker(forced, root, m as u64)?;
                if m == 0 {
                    return Ok(());
                }
            }
            count(self.shadow, alg);
            return self.bcast_run(alg, buf, root);
        }
        let n = buf.len();
        let parent = self.bcast_parent(forced, root);
        // SAFETY: `buf` outlives the wait.
        let q = unsafe { self.irecv_raw(buf.as_mut_ptr(), n, parent, TAG_BCAST) }?;
        let st = self.e.wait(q);
        match st.error {
            None if st.count_bytes > 0 => {
                // The data itself (the binomial tree, the linear algorithm): the root's length.
                let m = st.count_bytes;
                let alg = self.bcast_choice(forced, m);
                count(self.shadow, alg);
                for child in self.bcast_children(forced, root) {
                    self.send(&buf[..m], child, TAG_BCAST)?;
                }
                if m == n {
                    Ok(())
                } else {
                    Err(bcast_differs(m, n))
                }
            }
            None => self.bcast_after_marker(forced, buf, root, parent),
            Some(ErrorClass::Truncate) => {
                // The root's data is longer than our buffer: what did not fit is lost, so
                // our children get a marker that says so instead of the data.
                self.bcast_marker(forced, root, TRUNCATED_ABOVE | n as u64)?;
                Err(arg_err(
                    ErrorClass::Truncate,
                    format!("bcast: the root sends more than this rank's {n} bytes"),
                ))
            }
            Some(_) => self.check(st, "bcast receive", parent).map(|_| ()),
        }
    }

    /// A non-root rank of [`CollComm::bcast`] whose first message was the marker: the
    /// header, forwarded with the marker, then the root's algorithm for the root's length.
    fn bcast_after_marker(
        &self,
        forced: u32,
        buf: &mut [u8],
        root: i32,
        parent: i32,
    ) -> Result<()> {
        let mut h = [0u8; 8];
        let got = self.recv(&mut h, parent, TAG_BCAST)?;
        if got != 8 {
            return Err(arg_err(
                ErrorClass::Intern,
                format!("bcast: a header of {got} bytes from rank {parent}"),
            ));
        }
        let head = u64::from_le_bytes(h);
        self.bcast_marker(forced, root, head)?;
        let n = buf.len();
        if head & TRUNCATED_ABOVE != 0 {
            let room = (head & !TRUNCATED_ABOVE) as usize;
            let class = if n <= room {
                ErrorClass::Truncate
            } else {
                ErrorClass::Other
            };
            return Err(arg_err(
                class,
                format!(
                    "bcast: a rank between the root and this one had room for only {room} \
                     bytes of the root's data, which did not reach this rank"
                ),
            ));
        }
        let m = usize::try_from(head).unwrap_or(usize::MAX);
        if m == 0 {
            return if n == 0 {
                Ok(())
            } else {
                Err(bcast_differs(0, n))
            };
        }
        let alg = self.bcast_choice(forced, m);
        if matches!(alg, Alg::BcastBinomial | Alg::BcastLinear) {
            return Err(arg_err(
                ErrorClass::Intern,
                format!("bcast: a marker for {m} bytes, which travel without one"),
            ));
        }
        count(self.shadow, alg);
        if m == n {
            return self.bcast_run(alg, buf, root);
        }
        // Take part with the root's length (nobody waits for us); ours differs.
        let mut sink = crate::base::helpers::pooled(m);
        let r = self.bcast_run(alg, &mut sink, root);
        crate::base::helpers::unpool(sink);
        r?;
        Err(bcast_differs(m, n))
    }

    /// The algorithm of a broadcast of `m` bytes (the root's length).
    fn bcast_choice(&self, forced: u32, m: usize) -> Alg {
        match forced {
            1 => Alg::BcastLinear,
            3 => Alg::BcastPipeline,
            6 => Alg::BcastBinomial,
            8 | 9 => Alg::BcastScatterAllgather,
            _ if m <= tune::BCAST_SMALL || m < self.size as usize || self.size <= 2 => {
                Alg::BcastBinomial
            }
            _ => Alg::BcastScatterAllgather,
        }
    }

    fn bcast_run(&self, alg: Alg, buf: &mut [u8], root: i32) -> Result<()> {
        match alg {
            Alg::BcastLinear => self.bcast_linear(buf, root),
            Alg::BcastPipeline => self.bcast_pipeline(buf, root, tune::BCAST_SEGMENT),
            Alg::BcastBinomial => self.bcast_binomial(buf, root),
            _ => self.bcast_scatter_allgather(buf, root),
        }
    }

    /// Where a non-root rank's first message of [`CollComm::bcast`] comes from: the root
    /// (linear), its predecessor in the chain (pipelined), else its binomial parent.
    fn bcast_parent(&self, forced: u32, root: i32) -> i32 {
        match forced {
            1 => root,
            3 => self.modp(self.rank - 1),
            _ => self.binomial_parent(root),
        }
    }

    /// This (non-root) rank's parent in the binomial tree rooted at `root`: its relative
    /// rank without its lowest set bit.
    fn binomial_parent(&self, root: i32) -> i32 {
        let rel = self.modp(self.rank - root);
        self.modp(rel - (rel & -rel) + root)
    }

    /// The ranks this one sends the first message of [`CollComm::bcast`] to (see
    /// [`CollComm::bcast_parent`]), in the binomial tree's order.
    fn bcast_children(&self, forced: u32, root: i32) -> Vec<i32> {
        let (p, rel) = (self.size, self.modp(self.rank - root));
        match forced {
            1 if rel == 0 => (1..p).map(|r| self.modp(r + root)).collect(),
            1 => Vec::new(),
            3 => (rel + 1 < p)
                .then(|| self.modp(self.rank + 1))
                .into_iter()
                .collect(),
            _ => self.binomial_children(root).collect(),
        }
    }

    /// This rank's children in the binomial tree rooted at `root`, largest subtree first:
    /// the ranks `mask` above it for every power of two `mask` below its lowest set bit
    /// (relative to the root; the root: every power of two below `p`).
    fn binomial_children(&self, root: i32) -> impl Iterator<Item = i32> + '_ {
        let (p, rel) = (self.size, self.modp(self.rank - root));
        let top = if rel == 0 {
            (p as u32).next_power_of_two() as i32
        } else {
            rel & -rel
        };
        std::iter::successors(Some(top >> 1), |&m| Some(m >> 1))
            .take_while(|&m| m > 0)
            .filter(move |&m| rel + m < p)
            .map(move |m| self.modp(rel + m + root))
    }

    /// Sends the empty marker and the 8-byte header `head` to our children in the tree of
    /// first messages ([`CollComm::bcast_children`]).
    fn bcast_marker(&self, forced: u32, root: i32, head: u64) -> Result<()> {
        let h = head.to_le_bytes();
        let children = self.bcast_children(forced, root);
        let sends = children
            .into_iter()
            .flat_map(|child| [(&h[..0], child), (&h[..], child)]);
        self.send_each(sends, TAG_BCAST, "bcast marker")
    }

    /// `MPI_Bcast` of `buf` from `root` where every rank is known to pass the root's
    /// length (a head on the segment said it, `select::bcast`): the algorithm alone.
    pub(crate) fn bcast_agreed(&self, buf: &mut [u8], root: i32) -> Result<()> {
        self.check_root(root)?;
        if self.size == 1 || buf.is_empty() {
            return Ok(());
        }
        let alg = self.bcast_choice(tune::algorithm(Coll::Bcast), buf.len());
        count(self.shadow, alg);
        self.bcast_run(alg, buf, root)
    }

    pub(crate) fn check_root(&self, root: i32) -> Result<()> {
        if root < 0 || root >= self.size {
            return Err(arg_err(
                ErrorClass::Rank,
                format!("root {root} not in 0..{}", self.size),
            ));
        }
        Ok(())
    }

    pub(crate) fn bcast_linear(&self, buf: &mut [u8], root: i32) -> Result<()> {
        if self.rank == root {
            let peers = (0..self.size).filter(|&i| i != root);
            self.send_each(peers.map(|i| (&buf[..], i)), TAG_BCAST, "bcast")
        } else {
            self.recv(buf, root, TAG_BCAST).map(|_| ())
        }
    }

    /// Pipelined broadcast along the chain `root, root + 1, …` (mod size): the message
    /// moves in `seg`-byte segments, each rank forwarding segment `i` while it receives
    /// segment `i + 1`.
    pub(crate) fn bcast_pipeline(&self, buf: &mut [u8], root: i32, seg: usize) -> Result<()> {
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

    pub(crate) fn bcast_binomial(&self, buf: &mut [u8], root: i32) -> Result<()> {
        if self.rank != root {
            self.recv(buf, self.binomial_parent(root), TAG_BCAST)?;
        }
        for child in self.binomial_children(root) {
            self.send(buf, child, TAG_BCAST)?;
        }
        Ok(())
    }

    pub(crate) fn bcast_scatter_allgather(&self, buf: &mut [u8], root: i32) -> Result<()> {
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
}
