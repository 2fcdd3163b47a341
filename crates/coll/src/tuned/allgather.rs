//! Allgather(v): recursive doubling, ring.

use super::TAG_ALLGATHER;
use crate::base::helpers::check_blocks;
use crate::base::params::{self as tune, Coll};
use crate::base::stats::{count, Alg};
use crate::{arg_err, CollComm, Result};
use oxmpi_engine::ErrorClass;

impl CollComm {
    /// Ring allgather: block `j` (`counts[j]` bytes at `displs[j]`) initially sits on rank
    /// `(j + shift) mod p`; afterwards every rank has every block.
    pub(crate) fn ring_allgatherv(
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
        if tune::algorithm(Coll::Allgather) != 4 && pow2 {
            count(self.shadow, Alg::AllgatherRecdbl);
            self.allgather_recdbl(buf, block)
        } else {
            count(self.shadow, Alg::AllgatherRing);
            self.allgather_ring(buf, block)
        }
    }

    pub(crate) fn allgather_ring(&self, buf: &mut [u8], block: usize) -> Result<()> {
        let p = self.size as usize;
        let counts = vec![block; p];
        let displs: Vec<usize> = (0..p).map(|i| i * block).collect();
        self.ring_allgatherv(buf, &counts, &displs, 0, TAG_ALLGATHER)
    }

    pub(crate) fn allgather_recdbl(&self, buf: &mut [u8], block: usize) -> Result<()> {
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
        count(self.shadow, Alg::AllgathervRing);
        self.ring_allgatherv(buf, counts, displs, 0, TAG_ALLGATHER)
    }

    pub(crate) fn check_vec_len(&self, counts: &[usize], displs: &[usize]) -> Result<()> {
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
}
