//! Gather(v) and scatter(v): binomial tree, linear.

use super::{TAG_GATHER, TAG_SCATTER};
use crate::base::helpers::check_blocks;
use crate::base::params::{self as tune, Coll};
use crate::base::stats::{count, Alg};
use crate::{arg_err, CollComm, Result};
use oxmpi_engine::ErrorClass;

impl CollComm {
    /// `MPI_Gatherv`: `send` goes to block `rank` (`counts[rank]` bytes at
    /// `displs[rank]`) of `recv` on `root`. `recv`, `counts` and `displs` are only used at
    /// the root. `send.len()` must equal `counts[rank]` as seen by the root.
    pub fn gatherv(
        &self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
        root: i32,
    ) -> Result<()> {
        count(self.shadow, Alg::GathervLinear);
        self.gatherv_linear(Some(send), recv, (counts, displs), root)
    }

    /// [`CollComm::gatherv`], not counted (the linear gather's body). `send` is `None` in
    /// place at the root: its block is already in `recv` (nothing copied).
    pub(crate) fn gatherv_linear(
        &self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        (counts, displs): (&[usize], &[usize]),
        root: i32,
    ) -> Result<()> {
        self.check_root(root)?;
        if self.rank != root {
            return self.send(send.unwrap_or_default(), root, TAG_GATHER);
        }
        self.check_vec_len(counts, displs)?;
        check_blocks(recv.len(), counts, displs)?;
        let r = root as usize;
        if let Some(send) = send {
            if send.len() != counts[r] {
                return Err(arg_err(
                    ErrorClass::Truncate,
                    "root's send size differs from its receive count",
                ));
            }
            recv[displs[r]..displs[r] + counts[r]].copy_from_slice(send);
        }
        let base = recv.as_mut_ptr();
        let mut reqs = Vec::new();
        for i in (0..self.size).filter(|&i| i != root) {
            let iu = i as usize;
            // SAFETY: the block is in bounds (checked); `recv` outlives the waitall.
            match unsafe { self.irecv_raw(base.add(displs[iu]), counts[iu], i, TAG_GATHER) } {
                Ok(q) => reqs.push((q, i)),
                Err(e) => {
                    self.abandon(&reqs);
                    return Err(e);
                }
            }
        }
        self.waitall(&reqs, "gather")
    }

    /// `MPI_Gather`: blocks of `send.len()` bytes, in rank order, into `recv` at the root.
    pub fn gather(&self, send: &[u8], recv: &mut [u8], root: i32) -> Result<()> {
        self.gather_from(Some(send), recv, send.len(), root)
    }

    /// [`CollComm::gather`] of blocks of `b` bytes; `send` is `None` in place at the root
    /// (its block is already in `recv`: the linear algorithm then copies nothing of it).
    pub fn gather_from(
        &self,
        send: Option<&[u8]>,
        recv: &mut [u8],
        b: usize,
        root: i32,
    ) -> Result<()> {
        let p = self.size as usize;
        self.check_root(root)?;
        let binomial = match tune::algorithm(Coll::Gather) {
            1 => false,
            2 => true,
            _ => p > 2 && b <= tune::GATHER_SMALL,
        };
        if binomial && p > 1 {
            if self.rank == root && recv.len() < p * b {
                return Err(arg_err(
                    ErrorClass::Truncate,
                    "gather receive buffer is smaller than size * block",
                ));
            }
            count(self.shadow, Alg::GatherBinomial);
            return match send {
                Some(s) => self.gather_binomial(s, recv, root),
                None => {
                    let me = self.rank as usize;
                    let own = recv[me * b..(me + 1) * b].to_vec();
                    self.gather_binomial(&own, recv, root)
                }
            };
        }
        count(self.shadow, Alg::GatherLinear);
        let counts = vec![b; p];
        let displs: Vec<usize> = (0..p).map(|i| i * b).collect();
        self.gatherv_linear(send, recv, (&counts, &displs), root)
    }

    /// Blocks a binomial-tree node at relative rank `rel` handles: its own and those of its
    /// subtree (relative ranks `rel..rel + n`).
    pub(crate) fn subtree(&self, rel: usize) -> usize {
        let p = self.size as usize;
        let low = if rel == 0 {
            p
        } else {
            1 << rel.trailing_zeros()
        };
        low.min(p - rel)
    }

    /// Binomial gather: every node collects its subtree's blocks (relative rank order) and
    /// forwards them to its parent; the root finally rotates them into rank order.
    pub(crate) fn gather_binomial(&self, send: &[u8], recv: &mut [u8], root: i32) -> Result<()> {
        let p = self.size as usize;
        let b = send.len();
        let rel = self.modp(self.rank - root) as usize;
        if rel == 0 && root == 0 {
            return self.gather_tree(send, &mut recv[..p * b], rel, root);
        }
        let mut tmp = vec![0u8; self.subtree(rel) * b];
        self.gather_tree(send, &mut tmp, rel, root)?;
        if rel == 0 {
            for i in 0..p {
                let abs = (i + root as usize) % p;
                recv[abs * b..(abs + 1) * b].copy_from_slice(&tmp[i * b..(i + 1) * b]);
            }
        }
        Ok(())
    }

    /// The tree part of [`CollComm::gather_binomial`]: `tmp` has room for the subtree.
    pub(crate) fn gather_tree(
        &self,
        send: &[u8],
        tmp: &mut [u8],
        rel: usize,
        root: i32,
    ) -> Result<()> {
        let p = self.size as usize;
        let b = send.len();
        let n = self.subtree(rel);
        tmp[..b].copy_from_slice(send);
        let mut mask = 1;
        while mask < p {
            if rel & mask != 0 {
                let parent = self.modp((rel - mask) as i32 + root);
                return self.send(&tmp[..n * b], parent, TAG_GATHER);
            }
            let child = rel + mask;
            if child < p {
                let k = mask.min(p - child);
                let from = self.modp(child as i32 + root);
                self.recv(&mut tmp[mask * b..(mask + k) * b], from, TAG_GATHER)?;
            }
            mask <<= 1;
        }
        Ok(())
    }

    /// `MPI_Scatterv`: block `i` of `send` at the root (`counts[i]` bytes at `displs[i]`)
    /// lands in `recv` of rank `i`. `send`, `counts`, `displs` are only used at the root.
    pub fn scatterv(
        &self,
        send: &[u8],
        counts: &[usize],
        displs: &[usize],
        recv: &mut [u8],
        root: i32,
    ) -> Result<()> {
        count(self.shadow, Alg::ScattervLinear);
        self.scatterv_linear((send, counts, displs), Some(recv), root)
    }

    /// [`CollComm::scatterv`], not counted (the body of the linear scatter and of
    /// reduce + scatterv). `recv` is `None` in place at the root: its block stays where it
    /// is (nothing copied).
    pub(crate) fn scatterv_linear(
        &self,
        (send, counts, displs): (&[u8], &[usize], &[usize]),
        recv: Option<&mut [u8]>,
        root: i32,
    ) -> Result<()> {
        self.check_root(root)?;
        if self.rank != root {
            return self
                .recv(recv.unwrap_or_default(), root, TAG_SCATTER)
                .map(|_| ());
        }
        self.check_vec_len(counts, displs)?;
        check_blocks(send.len(), counts, displs)?;
        let r = root as usize;
        if recv.as_ref().is_some_and(|recv| recv.len() < counts[r]) {
            return Err(arg_err(
                ErrorClass::Truncate,
                "root's receive buffer is smaller than its block",
            ));
        }
        // SAFETY: the blocks are in bounds (checked); `send` outlives the waitall.
        let reqs = unsafe {
            self.isend_blocks(root, TAG_SCATTER, false, |i| {
                &send[displs[i]..displs[i] + counts[i]]
            })
        }?;
        // Our own block once the sends are out: a receiver reads its large block (the
        // rendezvous) while we copy ours, rather than after.
        if let Some(recv) = recv {
            recv[..counts[r]].copy_from_slice(&send[displs[r]..displs[r] + counts[r]]);
        }
        self.waitall(&reqs, "scatter")
    }

    /// `MPI_Scatter`: blocks of `recv.len()` bytes of `send` (root) in rank order.
    pub fn scatter(&self, send: &[u8], recv: &mut [u8], root: i32) -> Result<()> {
        let b = recv.len();
        self.scatter_into(send, Some(recv), b, root)
    }

    /// [`CollComm::scatter`] of blocks of `b` bytes; `recv` is `None` in place at the root
    /// (its block stays in `send`: the linear algorithm then copies nothing of it).
    pub fn scatter_into(
        &self,
        send: &[u8],
        recv: Option<&mut [u8]>,
        b: usize,
        root: i32,
    ) -> Result<()> {
        let p = self.size as usize;
        self.check_root(root)?;
        let binomial = match tune::algorithm(Coll::Scatter) {
            1 => false,
            2 => true,
            _ => p > 2 && b <= tune::GATHER_SMALL,
        };
        if binomial && p > 1 {
            if self.rank == root && send.len() < p * b {
                return Err(arg_err(
                    ErrorClass::Count,
                    "scatter send buffer is smaller than size * block",
                ));
            }
            count(self.shadow, Alg::ScatterBinomial);
            return match recv {
                Some(r) => self.scatter_binomial(send, r, root),
                None => self.scatter_binomial(send, &mut vec![0u8; b], root),
            };
        }
        count(self.shadow, Alg::ScatterLinear);
        let counts = vec![b; p];
        let displs: Vec<usize> = (0..p).map(|i| i * b).collect();
        self.scatterv_linear((send, &counts, &displs), recv, root)
    }

    /// Binomial scatter: the root holds every block (relative rank order); each node
    /// receives its subtree's blocks from its parent and hands its children theirs.
    pub(crate) fn scatter_binomial(&self, send: &[u8], recv: &mut [u8], root: i32) -> Result<()> {
        let p = self.size as usize;
        let b = recv.len();
        let rel = self.modp(self.rank - root) as usize;
        let n = self.subtree(rel);
        let mut own = Vec::new();
        let tmp: &[u8] = if rel == 0 && root == 0 {
            &send[..p * b]
        } else if rel == 0 {
            own.reserve(p * b);
            for i in 0..p {
                let abs = (i + root as usize) % p;
                own.extend_from_slice(&send[abs * b..(abs + 1) * b]);
            }
            &own
        } else {
            own.resize(n * b, 0);
            let mut mask = 1;
            while rel & mask == 0 {
                mask <<= 1;
            }
            let parent = self.modp((rel - mask) as i32 + root);
            self.recv(&mut own, parent, TAG_SCATTER)?;
            &own
        };
        let mut mask = if rel == 0 {
            p.next_power_of_two()
        } else {
            1 << rel.trailing_zeros()
        } >> 1;
        while mask > 0 {
            let child = rel + mask;
            if child < p {
                let k = mask.min(p - child);
                let to = self.modp(child as i32 + root);
                self.send(&tmp[mask * b..(mask + k) * b], to, TAG_SCATTER)?;
            }
            mask >>= 1;
        }
        recv.copy_from_slice(&tmp[..b]);
        Ok(())
    }
}
