//! The `inter` component: collectives on intercommunicators (MPI-3.1 §5.2.2), on bytes.
//!
//! An intercommunicator is seen as two contexts ([`InterComm`]): its collective context,
//! on which a member addresses the *remote* group's ranks, and an intracommunicator over
//! the *local* group (its leader is local rank 0). Rooted collectives (bcast, gather,
//! scatter, reduce) move data between the root and every member of the other group; the
//! root's local peers take no part (the caller skips them). All-to-all style collectives
//! exchange blocks between every pair of a local and a remote member, indexed by remote
//! rank. Reductions fold one group's contributions in its rank order (also right for
//! non-commutative operations): allreduce and reduce-scatter reduce at each group's leader,
//! swap the results between the leaders and distribute them over the local group.
//! Barrier is gather / leader swap / release.
//!
//! The algorithms are linear (intercommunicator collectives are on no latency-critical
//! path). Data is bytes; the caller packs datatypes. Messages of unknown length (local
//! gathers, leader swaps) travel as a length, then the bytes.

pub mod nbc;

use crate::base::stats::{count, Alg};
use crate::{arg_err, CollComm, Op, Result};
use oxmpi_engine::{CommId, Engine, ErrorClass, ReqId};

/// Tags of intercommunicator collectives (the intercommunicator's own contexts carry no
/// other blocking collective traffic).
mod tag {
    pub const BARRIER: i32 = 1;
    pub const BCAST: i32 = 2;
    pub const GATHER: i32 = 3;
    pub const SCATTER: i32 = 4;
    pub const ALLGATHER: i32 = 5;
    pub const ALLTOALL: i32 = 6;
    pub const REDUCE: i32 = 7;
    pub const ALLREDUCE: i32 = 8;
    pub const REDUCE_SCATTER: i32 = 9;
}

/// Which all-to-all style collective an [`InterComm::exchange`] is (each has its tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// Allgather(v): every remote rank gets our one block.
    Allgather,
    /// Alltoall(v,w): remote rank `r` gets our block `r`.
    Alltoall,
}

/// An intercommunicator ready for collectives.
#[derive(Clone, Copy, Debug)]
pub struct InterComm {
    /// The collective context: `rank` is ours in the local group, `size` the remote
    /// group's; peers are remote ranks.
    remote: CollComm,
    /// The local group (`rank`, `size`; leader 0).
    local: CollComm,
}

impl InterComm {
    /// The intercommunicator whose collective traffic with the remote group travels on the
    /// engine intercommunicator `ic` and within the local group on the engine
    /// intracommunicator `local`; `rank` is ours in the local group of `local_size`,
    /// `remote_size` the other group's size.
    pub fn new(
        e: &'static Engine,
        ic: CommId,
        local: CommId,
        rank: i32,
        local_size: i32,
        remote_size: i32,
    ) -> InterComm {
        InterComm {
            remote: CollComm::on_context_known(e, ic, ic, rank, remote_size),
            local: CollComm::on_context_known(e, local, local, rank, local_size),
        }
    }

    /// The collective context as an `oxmpi-coll` view (rank: ours in the local group;
    /// size: the remote group's), e.g. for schedules.
    pub fn remote(&self) -> &CollComm {
        &self.remote
    }

    /// The local group as an `oxmpi-coll` view.
    pub fn local(&self) -> &CollComm {
        &self.local
    }

    // ---- messaging ----

    /// Post one send per remote rank (`data(r)` to remote rank `r`) and wait for all.
    fn send_each<'a>(&self, data: impl Fn(usize) -> &'a [u8], t: i32) -> Result<()> {
        let mut reqs = Vec::with_capacity(self.remote.size as usize);
        for r in 0..self.remote.size {
            let d = data(r as usize);
            // SAFETY: `d` borrows the caller's data, which outlives the wait below.
            match unsafe { self.remote.isend_raw(d.as_ptr(), d.len(), r, t) } {
                Ok(q) => reqs.push((q, r)),
                Err(e) => {
                    self.remote.abandon(&reqs);
                    return Err(e);
                }
            }
        }
        self.remote.waitall(&reqs, "send")
    }

    /// Post one receive per remote rank into `bufs[r]`; truncate each to what arrived.
    fn post_recvs(&self, bufs: &mut [Vec<u8>], t: i32) -> Result<Vec<(ReqId, i32)>> {
        let mut reqs = Vec::with_capacity(bufs.len());
        for (r, b) in bufs.iter_mut().enumerate() {
            // SAFETY: `b` is not touched until the request is waited for (`finish_recvs`
            // or `abandon`).
            match unsafe { self.remote.irecv_raw(b.as_mut_ptr(), b.len(), r as i32, t) } {
                Ok(q) => reqs.push((q, r as i32)),
                Err(e) => {
                    self.remote.abandon(&reqs);
                    return Err(e);
                }
            }
        }
        Ok(reqs)
    }

    /// Wait for the receives of [`Self::post_recvs`] (all of them, even after an error);
    /// truncate each buffer to what arrived.
    fn finish_recvs(&self, reqs: Vec<(ReqId, i32)>, bufs: &mut [Vec<u8>]) -> Result<()> {
        let mut res = Ok(());
        for ((q, peer), b) in reqs.into_iter().zip(bufs.iter_mut()) {
            let st = self.remote.e.wait(q);
            match self.remote.check(st, "receive", peer) {
                Ok(n) => b.truncate(n),
                Err(e) => res = res.and(Err(e)),
            }
        }
        res
    }

    /// Send a byte string of any length to `dest` of `c` (its length first).
    fn send_vec(c: &CollComm, data: &[u8], dest: i32, t: i32) -> Result<()> {
        c.send(&(data.len() as u64).to_le_bytes(), dest, t)?;
        c.send(data, dest, t)
    }

    /// Receive a byte string sent by [`Self::send_vec`].
    fn recv_vec(c: &CollComm, src: i32, t: i32) -> Result<Vec<u8>> {
        let mut len = [0u8; 8];
        c.recv(&mut len, src, t)?;
        let mut v = vec![0u8; u64::from_le_bytes(len) as usize];
        let n = c.recv(&mut v, src, t)?;
        v.truncate(n);
        Ok(v)
    }

    /// Swap byte strings with the remote leader (both leaders call).
    fn swap(&self, mine: &[u8], t: i32) -> Result<Vec<u8>> {
        let len = (mine.len() as u64).to_le_bytes();
        let mut theirs = [0u8; 8];
        self.remote.sendrecv(&len, 0, &mut theirs, 0, t)?;
        let mut v = vec![0u8; u64::from_le_bytes(theirs) as usize];
        let n = self.remote.sendrecv(mine, 0, &mut v, 0, t)?;
        v.truncate(n);
        Ok(v)
    }

    /// Gather every local member's byte string at the leader (`None` elsewhere).
    fn gather_local(&self, mine: Vec<u8>, t: i32) -> Result<Option<Vec<Vec<u8>>>> {
        let c = &self.local;
        if c.rank != 0 {
            Self::send_vec(c, &mine, 0, t)?;
            return Ok(None);
        }
        let mut all = vec![mine];
        for r in 1..c.size {
            all.push(Self::recv_vec(c, r, t)?);
        }
        Ok(Some(all))
    }

    /// Broadcast a byte string from the local leader (to every member at once).
    fn bcast_local(&self, data: &mut Vec<u8>, t: i32) -> Result<()> {
        let c = &self.local;
        if c.rank != 0 {
            *data = Self::recv_vec(c, 0, t)?;
            return Ok(());
        }
        let len = (data.len() as u64).to_le_bytes();
        let data: &[u8] = data;
        let sends = (1..c.size).flat_map(|r| [(&len[..], r), (data, r)]);
        c.send_each(sends, t, "send")
    }

    /// Reduce the local group's contributions at the leader and swap the result with the
    /// remote leader: the remote group's reduction at the leader, `None` elsewhere.
    fn reduce_and_swap(&self, mine: Vec<u8>, op: &Op, t: i32) -> Result<Option<Vec<u8>>> {
        let Some(parts) = self.gather_local(mine, t)? else {
            return Ok(None);
        };
        let local = fold(&parts, op)?;
        self.swap(&local, t).map(Some)
    }

    // ---- collectives ----

    /// `MPI_Barrier`.
    pub fn barrier(&self) -> Result<()> {
        count(self.remote.shadow, Alg::InterBarrier);
        let t = tag::BARRIER;
        if self.gather_local(Vec::new(), t)?.is_some() {
            self.swap(&[], t)?;
        }
        self.bcast_local(&mut Vec::new(), t)
    }

    /// `MPI_Bcast` at the root: `data` to every remote rank.
    pub fn bcast_root(&self, data: &[u8]) -> Result<()> {
        count(self.remote.shadow, Alg::InterBcast);
        self.send_each(|_| data, tag::BCAST)
    }

    /// `MPI_Bcast` in the other group: receive into `buf` from remote rank `root`; the
    /// number of bytes received.
    pub fn bcast_recv(&self, buf: &mut [u8], root: i32) -> Result<usize> {
        count(self.remote.shadow, Alg::InterBcast);
        self.remote.recv(buf, root, tag::BCAST)
    }

    /// `MPI_Gather(v)` at the root: `bufs[r]` receives remote rank `r`'s block (truncated
    /// to what arrived).
    pub fn gather_root(&self, bufs: &mut [Vec<u8>]) -> Result<()> {
        count(self.remote.shadow, Alg::InterGather);
        let reqs = self.post_recvs(bufs, tag::GATHER)?;
        self.finish_recvs(reqs, bufs)
    }

    /// `MPI_Gather(v)` in the other group: our block to remote rank `root`.
    pub fn gather_send(&self, data: &[u8], root: i32) -> Result<()> {
        count(self.remote.shadow, Alg::InterGather);
        self.remote.send(data, root, tag::GATHER)
    }

    /// `MPI_Scatter(v)` at the root: `parts[r]` to remote rank `r`.
    pub fn scatter_root(&self, parts: &[Vec<u8>]) -> Result<()> {
        count(self.remote.shadow, Alg::InterScatter);
        self.send_each(|r| &parts[r], tag::SCATTER)
    }

    /// `MPI_Scatter(v)` in the other group: our block from remote rank `root`; bytes
    /// received.
    pub fn scatter_recv(&self, buf: &mut [u8], root: i32) -> Result<usize> {
        count(self.remote.shadow, Alg::InterScatter);
        self.remote.recv(buf, root, tag::SCATTER)
    }

    /// Allgather(v) / alltoall(v,w): `send[r]` goes to remote rank `r` (for allgather,
    /// `send` may be one block for every rank), `recv[r]` comes from it (truncated to what
    /// arrived).
    pub fn exchange(&self, kind: Exchange, send: &[Vec<u8>], recv: &mut [Vec<u8>]) -> Result<()> {
        let (t, alg) = match kind {
            Exchange::Allgather => (tag::ALLGATHER, Alg::InterAllgather),
            Exchange::Alltoall => (tag::ALLTOALL, Alg::InterAlltoall),
        };
        count(self.remote.shadow, alg);
        let block = |r: usize| send.get(r).or(send.last()).map_or(&[][..], |v| &v[..]);
        let reqs = self.post_recvs(recv, t)?;
        let sent = self.send_each(block, t);
        let got = self.finish_recvs(reqs, recv);
        sent.and(got)
    }

    /// `MPI_Reduce` at the root: the reduction (in remote rank order) of the remote
    /// group's contributions of `len` bytes each.
    pub fn reduce_root(&self, len: usize, op: &Op) -> Result<Vec<u8>> {
        count(self.remote.shadow, Alg::InterReduce);
        let mut parts = vec![vec![0u8; len]; self.remote.size as usize];
        let reqs = self.post_recvs(&mut parts, tag::REDUCE)?;
        self.finish_recvs(reqs, &mut parts)?;
        fold(&parts, op)
    }

    /// `MPI_Reduce` in the other group: our contribution to remote rank `root`.
    pub fn reduce_send(&self, data: &[u8], root: i32) -> Result<()> {
        count(self.remote.shadow, Alg::InterReduce);
        self.remote.send(data, root, tag::REDUCE)
    }

    /// `MPI_Allreduce`: the reduction of the remote group's contributions, given ours.
    pub fn allreduce(&self, mine: Vec<u8>, op: &Op) -> Result<Vec<u8>> {
        count(self.remote.shadow, Alg::InterAllreduce);
        let t = tag::ALLREDUCE;
        let mut res = self.reduce_and_swap(mine, op, t)?.unwrap_or_default();
        self.bcast_local(&mut res, t)?;
        Ok(res)
    }

    /// `MPI_Reduce_scatter(_block)`: the reduction of the remote group's vectors, split
    /// over the local group by `counts` (bytes per local rank); our piece.
    pub fn reduce_scatter(&self, mine: Vec<u8>, counts: &[usize], op: &Op) -> Result<Vec<u8>> {
        count(self.remote.shadow, Alg::InterReduceScatter);
        let t = tag::REDUCE_SCATTER;
        let total: usize = counts.iter().sum();
        let me = self.local.rank as usize;
        let Some(theirs) = self.reduce_and_swap(mine, op, t)? else {
            let mut v = vec![0u8; counts[me]];
            let n = self.local.recv(&mut v, 0, t)?;
            v.truncate(n);
            return Ok(v);
        };
        let mut pos = 0;
        let mut own = Vec::new();
        for (r, &k) in counts.iter().enumerate() {
            let end = (pos + k).min(theirs.len());
            let slice = &theirs[pos.min(end)..end];
            pos = end;
            if r == me {
                own = slice.to_vec();
            } else {
                self.local.send(slice, r as i32, t)?;
            }
        }
        if theirs.len() != total {
            return Err(arg_err(
                ErrorClass::Count,
                format!(
                    "reduce-scatter: the remote group reduced {} bytes, the local counts need {total}",
                    theirs.len()
                ),
            ));
        }
        Ok(own)
    }
}

/// `parts[0] ∘ parts[1] ∘ …` (rank order) of packed contributions of equal length.
fn fold(parts: &[Vec<u8>], op: &Op) -> Result<Vec<u8>> {
    let Some(last) = parts.last() else {
        return Ok(Vec::new());
    };
    if parts.iter().any(|p| p.len() != last.len()) {
        return Err(arg_err(
            ErrorClass::Truncate,
            "intercommunicator reduction: contributions of different lengths",
        ));
    }
    let mut acc = last.clone();
    for p in parts[..parts.len() - 1].iter().rev() {
        (op.f)(p, &mut acc); // acc = p ∘ acc
    }
    Ok(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fold_combines_in_rank_order() {
        // x ∘ y = x: associative, not commutative; the rank-order fold keeps parts[0].
        let f = |a: &[u8], b: &mut [u8]| b.copy_from_slice(a);
        let op = Op {
            f: &f,
            elem_size: 1,
            commutative: false,
        };
        assert_eq!(
            fold(&[vec![1, 4], vec![2, 5], vec![3, 6]], &op).unwrap(),
            [1, 4]
        );
        assert_eq!(fold(&[], &op).unwrap(), Vec::<u8>::new());
        assert!(fold(&[vec![1, 2], vec![3]], &op).is_err());
        let sum = |a: &[u8], b: &mut [u8]| b.iter_mut().zip(a).for_each(|(y, x)| *y += x);
        let op = Op {
            f: &sum,
            elem_size: 1,
            commutative: true,
        };
        assert_eq!(fold(&[vec![1], vec![2], vec![3]], &op).unwrap(), [6]);
    }
}
