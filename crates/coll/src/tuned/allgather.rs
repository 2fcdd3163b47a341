//! Allgather(v): recursive doubling, ring.

use super::TAG_ALLGATHER;
use crate::base::helpers::{check_blocks, check_own, place_own};
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
        self.ring_allgatherv_from(buf, (counts, displs), shift, tag, None)
    }

    /// [`Self::ring_allgatherv`] with our block either already in place (`own` `None`) or
    /// still only in `own` (out of place): the first step sends it from there (see
    /// [`Self::allgather_from`]) and it is copied into its slot after that step.
    fn ring_allgatherv_from(
        &self,
        buf: &mut [u8],
        (counts, displs): (&[usize], &[usize]),
        shift: i32,
        tag: i32,
        own: Option<&[u8]>,
    ) -> Result<()> {
        check_blocks(buf.len(), counts, displs)?;
        let p = self.size;
        let myb = self.modp(self.rank - shift);
        let mine = displs[myb as usize]..displs[myb as usize] + counts[myb as usize];
        check_own(own, mine.len())?;
        let right = self.modp(self.rank + 1);
        let left = self.modp(self.rank - 1);
        for s in 0..p - 1 {
            let sb = (myb - s).rem_euclid(p) as usize;
            let rb = (myb - s - 1).rem_euclid(p) as usize;
            let base = buf.as_mut_ptr();
            // SAFETY: blocks are in bounds (checked) and distinct blocks do not overlap
            // (sb != rb since p > 1); `own` (when sent) is `counts[sb]` bytes (checked) and
            // does not overlap `buf` (the caller's borrows).
            unsafe {
                let from = match own {
                    Some(o) if s == 0 => o.as_ptr(),
                    _ => base.add(displs[sb]).cast_const(),
                };
                self.sendrecv_raw(
                    from,
                    counts[sb],
                    right,
                    base.add(displs[rb]),
                    counts[rb],
                    left,
                    tag,
                )?;
            }
            if s == 0 {
                place_own(buf, mine.clone(), own);
            }
        }
        if p == 1 {
            place_own(buf, mine, own);
        }
        Ok(())
    }

    /// `MPI_Allgather` in place: `buf` holds `size` blocks of `block` bytes, our own block
    /// already at `rank * block`.
    pub fn allgather(&self, buf: &mut [u8], block: usize) -> Result<()> {
        self.allgather_from(buf, block, None)
    }

    /// `MPI_Allgather`: `buf` holds `size` blocks of `block` bytes; our own block is
    /// already at `rank * block` (`own` `None`, in place) or only in `own` (out of place).
    ///
    /// Out of place the first exchange sends our block straight from `own`, and it is
    /// copied into its slot only after that exchange: the peer then reads lines nobody
    /// wrote since the last call instead of the ones we just wrote (each such line costs a
    /// cross-core transfer; at np=2 and 64 KiB that was 26 µs against 11 µs in place).
    pub fn allgather_from(&self, buf: &mut [u8], block: usize, own: Option<&[u8]>) -> Result<()> {
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
            self.allgather_recdbl(buf, block, own)
        } else {
            count(self.shadow, Alg::AllgatherRing);
            self.allgather_ring(buf, block, own)
        }
    }

    pub(crate) fn allgather_ring(
        &self,
        buf: &mut [u8],
        block: usize,
        own: Option<&[u8]>,
    ) -> Result<()> {
        let p = self.size as usize;
        let counts = vec![block; p];
        let displs: Vec<usize> = (0..p).map(|i| i * block).collect();
        self.ring_allgatherv_from(buf, (&counts, &displs), 0, TAG_ALLGATHER, own)
    }

    pub(crate) fn allgather_recdbl(
        &self,
        buf: &mut [u8],
        block: usize,
        own: Option<&[u8]>,
    ) -> Result<()> {
        self.recdbl_by(buf, |first, n| first * block..(first + n) * block, own)
    }

    /// Recursive doubling allgather(v) on `p` a power of two, whose blocks lie in rank
    /// order back to back: `span(first, n)` is the bytes of `buf` holding blocks `first ..
    /// first + n` (in step `mask` each rank trades its group of `mask` blocks, one range,
    /// for its partner's). Our own block is in place (`own` `None`) or only in `own` (out
    /// of place, `span(rank, 1)` long; sent from there in the first step).
    fn recdbl_by(
        &self,
        buf: &mut [u8],
        span: impl Fn(usize, usize) -> std::ops::Range<usize>,
        own: Option<&[u8]>,
    ) -> Result<()> {
        let p = self.size;
        let r = self.rank;
        let slot = span(r as usize, 1);
        check_own(own, slot.len())?;
        let mut mask = 1;
        while mask < p {
            let partner = r ^ mask;
            let mine = span((r & !(mask - 1)) as usize, mask as usize);
            let theirs = span((partner & !(mask - 1)) as usize, mask as usize);
            // The first exchange is our block alone (`mask` 1): out of place it leaves
            // from `own`.
            let base = buf.as_mut_ptr();
            // SAFETY: both ranges are groups of `mask` whole blocks inside `buf` (`p` is a
            // power of two; the caller's `span` stays inside `buf`) and disjoint (different
            // halves of an aligned 2*mask group); `own` (when sent) is as long as our
            // block (checked) and does not overlap `buf` (the caller's borrows).
            unsafe {
                let from = match own {
                    Some(o) if mask == 1 => o.as_ptr(),
                    _ => base.add(mine.start).cast_const(),
                };
                self.sendrecv_raw(
                    from,
                    mine.len(),
                    partner,
                    base.add(theirs.start),
                    theirs.len(),
                    partner,
                    TAG_ALLGATHER,
                )?;
            }
            if mask == 1 {
                place_own(buf, slot.clone(), own);
            }
            mask <<= 1;
        }
        if p == 1 {
            place_own(buf, slot, own);
        }
        Ok(())
    }

    /// `MPI_Allgatherv` in place: block `i` is `counts[i]` bytes at `displs[i]` of `buf`;
    /// our own block is already in place. Blocks must not overlap.
    pub fn allgatherv(&self, buf: &mut [u8], counts: &[usize], displs: &[usize]) -> Result<()> {
        self.allgatherv_from(buf, counts, displs, None)
    }

    /// `MPI_Allgatherv` with our block in place (`own` `None`) or only in `own` (out of
    /// place, sent from there: see [`Self::allgather_from`]).
    pub fn allgatherv_from(
        &self,
        buf: &mut [u8],
        counts: &[usize],
        displs: &[usize],
        own: Option<&[u8]>,
    ) -> Result<()> {
        self.check_vec_len(counts, displs)?;
        // Blocks in rank order back to back on a power of two of ranks: recursive doubling
        // (log2 p exchanges, each of a group of blocks in one range), as the allgather.
        let packed = counts
            .iter()
            .zip(displs)
            .zip(displs.iter().skip(1))
            .all(|((&c, &d), &next)| d + c == next);
        if packed && (self.size as usize).is_power_of_two() && tune::algorithm(Coll::Allgather) != 4
        {
            check_blocks(buf.len(), counts, displs)?;
            count(self.shadow, Alg::AllgathervRecdbl);
            let end = |i: usize| displs[i] + counts[i];
            return self.recdbl_by(buf, |first, n| displs[first]..end(first + n - 1), own);
        }
        count(self.shadow, Alg::AllgathervRing);
        self.ring_allgatherv_from(buf, (counts, displs), 0, TAG_ALLGATHER, own)
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
