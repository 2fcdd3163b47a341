//! Sparse exchange (the neighbourhood collectives).

use super::TAG_NEIGHBOR;
use crate::base::stats::{count, Alg};
use crate::{CollComm, Result};
use oxmpi_engine::ReqId;

impl CollComm {
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
        count(self.shadow, Alg::NeighborExchange);
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
}
