//! Alltoall(v): linear, pairwise exchange, Bruck.

use super::TAG_ALLTOALL;
use crate::base::helpers::check_blocks;
use crate::base::params::{self as tune, Coll};
use crate::base::stats::{count, Alg};
use crate::{arg_err, CollComm, Result};
use oxmpi_engine::ErrorClass;

impl CollComm {
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
        let alg = match tune::algorithm(Coll::Alltoall) {
            1 => Alg::AlltoallLinear,
            2 => Alg::AlltoallPairwise,
            3 => Alg::AlltoallBruck,
            _ if p <= tune::ALLTOALL_LINEAR_MAX => Alg::AlltoallLinear,
            _ if block <= tune::ALLTOALL_SMALL => Alg::AlltoallBruck,
            _ => Alg::AlltoallPairwise,
        };
        count(self.shadow, alg);
        match alg {
            Alg::AlltoallLinear => self.alltoall_linear(send, recv, block),
            Alg::AlltoallBruck => self.alltoall_bruck(send, recv, block),
            _ => self.alltoall_pairwise(send, recv, block),
        }
    }

    /// Linear alltoall: every receive and send posted at once, then all waited for (one
    /// round of waiting: best for few ranks, especially when they share cores).
    pub(crate) fn alltoall_linear(&self, send: &[u8], recv: &mut [u8], block: usize) -> Result<()> {
        let p = self.size as usize;
        let counts = vec![block; p];
        let displs: Vec<usize> = (0..p).map(|i| i * block).collect();
        self.alltoallv_linear((send, &counts, &displs), (recv, &counts, &displs))
    }

    pub(crate) fn alltoall_pairwise(
        &self,
        send: &[u8],
        recv: &mut [u8],
        block: usize,
    ) -> Result<()> {
        let p = self.size as usize;
        let counts = vec![block; p];
        let displs: Vec<usize> = (0..p).map(|i| i * block).collect();
        self.alltoallv_pairwise((send, &counts, &displs), (recv, &counts, &displs))
    }

    pub(crate) fn alltoall_bruck(&self, send: &[u8], recv: &mut [u8], block: usize) -> Result<()> {
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
    /// `rcounts[j]` bytes from rank `j` land at `rdispls[j]` of `recv`. Up to
    /// [`tune::ALLTOALL_LINEAR_MAX`] ranks every transfer is posted at once (as the
    /// alltoall does: one round of waiting, where pairwise exchange waits `p - 1` times for
    /// a partner that, when ranks share cores, must be scheduled first), pairwise exchange
    /// above; `coll_tuned_alltoall_algorithm` 1 or 2 forces one of them.
    pub fn alltoallv(
        &self,
        send: &[u8],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [u8],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<()> {
        let linear = match tune::algorithm(Coll::Alltoall) {
            1 => true,
            2 | 3 => false,
            _ => self.size as usize <= tune::ALLTOALL_LINEAR_MAX,
        };
        let (s, r) = ((send, scounts, sdispls), (recv, rcounts, rdispls));
        if linear {
            count(self.shadow, Alg::AlltoallvLinear);
            self.alltoallv_linear(s, r)
        } else {
            count(self.shadow, Alg::AlltoallvPairwise);
            self.alltoallv_pairwise(s, r)
        }
    }

    /// Check an alltoallv's arguments and copy our own block: `(buffer, counts,
    /// displacements)` of each side.
    fn alltoallv_own(
        &self,
        (send, scounts, sdispls): (&[u8], &[usize], &[usize]),
        (recv, rcounts, rdispls): (&mut [u8], &[usize], &[usize]),
    ) -> Result<()> {
        self.check_vec_len(scounts, sdispls)?;
        self.check_vec_len(rcounts, rdispls)?;
        check_blocks(send.len(), scounts, sdispls)?;
        check_blocks(recv.len(), rcounts, rdispls)?;
        let r = self.rank;
        let ru = r as usize;
        // An own block longer than its room (erroneous) is cut; the error comes after the
        // transfers, which the other ranks wait for.
        let n = scounts[ru].min(rcounts[ru]);
        recv[rdispls[ru]..rdispls[ru] + n].copy_from_slice(&send[sdispls[ru]..sdispls[ru] + n]);
        Ok(())
    }

    /// The error of an alltoallv whose own block is longer than its room (reported once
    /// the transfers with the other ranks have run).
    fn alltoallv_own_fits(&self, scounts: &[usize], rcounts: &[usize]) -> Result<()> {
        let (r, ru) = (self.rank, self.rank as usize);
        if scounts[ru] > rcounts[ru] {
            return Err(arg_err(
                ErrorClass::Truncate,
                format!(
                    "alltoallv: rank {r} sends itself {} bytes into {}",
                    scounts[ru], rcounts[ru]
                ),
            ));
        }
        Ok(())
    }

    /// Linear alltoallv (also the linear alltoall's body): every receive and send posted
    /// at once, then all waited for; `(buffer, counts, displacements)` of each side.
    fn alltoallv_linear(
        &self,
        (send, scounts, sdispls): (&[u8], &[usize], &[usize]),
        (recv, rcounts, rdispls): (&mut [u8], &[usize], &[usize]),
    ) -> Result<()> {
        self.alltoallv_own((send, scounts, sdispls), (recv, rcounts, rdispls))?;
        let (p, r) = (self.size as usize, self.rank as usize);
        let base = recv.as_mut_ptr();
        let mut reqs = Vec::with_capacity(2 * p);
        // Every receive first, then every send; on an error the posted ones are cancelled.
        let mut keep = |q: Result<_>, peer: usize| {
            q.map(|q| reqs.push((q, peer as i32)))
                .inspect_err(|_| self.abandon(&reqs))
        };
        for k in 1..p {
            let src = (r + p - k) % p;
            // SAFETY: block `src` is inside `recv` (checked; MPI forbids overlapping
            // receive blocks); `recv` outlives the waitall.
            let q = unsafe {
                self.irecv_raw(
                    base.add(rdispls[src]),
                    rcounts[src],
                    src as i32,
                    TAG_ALLTOALL,
                )
            };
            keep(q, src)?;
        }
        for k in 1..p {
            let dst = (r + k) % p;
            let at = send[sdispls[dst]..].as_ptr();
            // SAFETY: block `dst` is inside `send` (checked), which outlives the waitall.
            let q = unsafe { self.isend_raw(at, scounts[dst], dst as i32, TAG_ALLTOALL) };
            keep(q, dst)?;
        }
        self.waitall(&reqs, "alltoallv")?;
        self.alltoallv_own_fits(scounts, rcounts)
    }

    /// Pairwise alltoallv (also the pairwise alltoall's body): `p - 1` rounds, in round
    /// `k` a send to `rank + k` and a receive from `rank - k`; `(buffer, counts,
    /// displacements)` of each side.
    fn alltoallv_pairwise(
        &self,
        (send, scounts, sdispls): (&[u8], &[usize], &[usize]),
        (recv, rcounts, rdispls): (&mut [u8], &[usize], &[usize]),
    ) -> Result<()> {
        self.alltoallv_own((send, scounts, sdispls), (recv, rcounts, rdispls))?;
        let (p, r) = (self.size, self.rank);
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
        self.alltoallv_own_fits(scounts, rcounts)
    }
}
