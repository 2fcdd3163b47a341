//! Broadcast: binomial tree, scatter + ring allgather, linear, pipelined chain.

use super::TAG_BCAST;
use crate::base::helpers::split_even;
use crate::base::params::{self as tune, Coll};
use crate::base::stats::{count, Alg};
use crate::{arg_err, CollComm, Result};
use oxmpi_engine::ErrorClass;

impl CollComm {
    /// `MPI_Bcast` of `buf` (the same length on every rank) from `root`.
    pub fn bcast(&self, buf: &mut [u8], root: i32) -> Result<()> {
        self.check_root(root)?;
        if self.size == 1 || buf.is_empty() {
            return Ok(());
        }
        let alg = match tune::algorithm(Coll::Bcast) {
            1 => Alg::BcastLinear,
            3 => Alg::BcastPipeline,
            6 => Alg::BcastBinomial,
            8 | 9 => Alg::BcastScatterAllgather,
            _ if buf.len() <= tune::BCAST_SMALL
                || buf.len() < self.size as usize
                || self.size <= 2 =>
            {
                Alg::BcastBinomial
            }
            _ => Alg::BcastScatterAllgather,
        };
        count(self.shadow, alg);
        match alg {
            Alg::BcastLinear => self.bcast_linear(buf, root),
            Alg::BcastPipeline => self.bcast_pipeline(buf, root, tune::BCAST_SEGMENT),
            Alg::BcastBinomial => self.bcast_binomial(buf, root),
            _ => self.bcast_scatter_allgather(buf, root),
        }
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
