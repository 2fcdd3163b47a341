//! Barrier: dissemination, linear.

use super::TAG_BARRIER;
use crate::base::params::{self as tune, Coll};
use crate::base::stats::{count, Alg};
use crate::{CollComm, Result};

impl CollComm {
    /// `MPI_Barrier`.
    pub fn barrier(&self) -> Result<()> {
        let p = self.size;
        let r = self.rank;
        if p == 1 {
            return Ok(());
        }
        if tune::algorithm(Coll::Barrier) == 1 {
            count(self.shadow, Alg::BarrierLinear);
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
        count(self.shadow, Alg::BarrierDissemination);
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
}
