//! The nonblocking intercommunicator collectives: the algorithms of [`super`] as
//! [schedules](crate::sched) to start with [`crate::nbc::progress`].
//!
//! Transfers with the remote group travel on the collective context (lane [`IC`]), the
//! local phases (gather at the leader, release) on the local group's context (lane
//! [`LOCAL`]). The schedule's tag comes from the collective context, which both groups
//! advance in the same order; members of the root's group other than the root run an
//! [`empty`](InterComm::schedule) schedule to keep that order. Buffers are [`Region`]s the
//! caller fills (packed data to send) or unpacks after completion.

use super::InterComm;
use crate::base::stats::Alg;
use crate::sched::{Lane, OwnedOp, Region, Schedule};
use crate::Result;

/// Lane of the transfers with the remote group.
pub const IC: Lane = Lane { link: 0, sub: 0 };
/// Lane of the transfers within the local group.
pub const LOCAL: Lane = Lane { link: 1, sub: 0 };

/// Add to `s` the rounds folding `k` blocks of `len` bytes of region `parts` in rank order
/// into region `acc`.
fn fold_steps(s: &mut Schedule, parts: usize, k: usize, len: usize, acc: usize) {
    if k == 0 {
        return;
    }
    s.next_round();
    s.copy((parts, (k - 1) * len), (acc, 0), len);
    for r in (0..k - 1).rev() {
        s.reduce((parts, r * len), (acc, 0), len);
    }
}

impl InterComm {
    /// A schedule over this intercommunicator with no steps yet (remote transfers on lane
    /// [`IC`], local ones on [`LOCAL`]); with no steps added it completes at once.
    pub fn schedule(&self, regions: Vec<Region>, op: Option<OwnedOp>) -> Result<Schedule> {
        let mut s = Schedule::new(&self.remote, regions, op)?.counted(Alg::InterNbc);
        s.add_link(self.local);
        Ok(s)
    }

    /// `MPI_Ibarrier`: gather at the local leader, leaders swap, release.
    pub fn ibarrier(&self) -> Result<Schedule> {
        let mut s = self.schedule(vec![Region::Owned(Vec::new())], None)?;
        let (me, size) = (self.local.rank, self.local.size);
        if me == 0 {
            for r in 1..size {
                s.recv(LOCAL, (0, 0), 0, r);
            }
            s.next_round();
            s.send(IC, (0, 0), 0, 0);
            s.recv(IC, (0, 0), 0, 0);
            s.next_round();
            for r in 1..size {
                s.send(LOCAL, (0, 0), 0, r);
            }
        } else {
            s.send(LOCAL, (0, 0), 0, 0);
            s.next_round();
            s.recv(LOCAL, (0, 0), 0, 0);
        }
        Ok(s)
    }

    /// `MPI_Ibcast` at the root: the first `len` bytes of `data` to every remote rank.
    pub fn ibcast_root(&self, data: Region, len: usize) -> Result<Schedule> {
        let mut s = self.schedule(vec![data], None)?;
        for r in 0..self.remote.size {
            s.send(IC, (0, 0), len, r);
        }
        Ok(s)
    }

    /// A schedule with one transfer with remote rank `peer`: `len` bytes of `buf` sent
    /// (`send`) or received (the other side of the rooted collectives).
    pub fn ione(&self, buf: Region, len: usize, peer: i32, send: bool) -> Result<Schedule> {
        self.ione_op(buf, len, peer, send, None)
    }

    fn ione_op(
        &self,
        buf: Region,
        len: usize,
        peer: i32,
        send: bool,
        op: Option<OwnedOp>,
    ) -> Result<Schedule> {
        let mut s = self.schedule(vec![buf], op)?;
        if send {
            s.send(IC, (0, 0), len, peer);
        } else {
            s.recv(IC, (0, 0), len, peer);
        }
        Ok(s)
    }

    /// `MPI_Igather(v)` at the root (`gather`) or `MPI_Iscatter(v)` at the root: remote
    /// rank `r`'s block is `counts[r]` bytes at `displs[r]` of `buf`.
    pub fn irooted(
        &self,
        buf: Region,
        counts: &[usize],
        displs: &[usize],
        gather: bool,
    ) -> Result<Schedule> {
        let mut s = self.schedule(vec![buf], None)?;
        for r in 0..self.remote.size as usize {
            if gather {
                s.recv(IC, (0, displs[r]), counts[r], r as i32);
            } else {
                s.send(IC, (0, displs[r]), counts[r], r as i32);
            }
        }
        Ok(s)
    }

    /// `MPI_Iallgather(v)` / `MPI_Ialltoall(v,w)`: to remote rank `r` go `scounts[r]`
    /// bytes at `sdispls[r]` of `send`; from it come `rcounts[r]` bytes to `rdispls[r]` of
    /// `recv` (regions 0 and 1).
    pub fn iexchange(
        &self,
        send: (Region, &[usize], &[usize]),
        recv: (Region, &[usize], &[usize]),
    ) -> Result<Schedule> {
        let (sreg, sc, sd) = send;
        let (rreg, rc, rd) = recv;
        let mut s = self.schedule(vec![sreg, rreg], None)?;
        let n = self.remote.size as usize;
        for r in 0..n {
            s.recv(IC, (1, rd[r]), rc[r], r as i32);
        }
        for r in 0..n {
            s.send(IC, (0, sd[r]), sc[r], r as i32);
        }
        Ok(s)
    }

    /// `MPI_Ireduce` at the root: the remote contributions (`len` bytes each) folded in
    /// rank order into `out` (region 0).
    pub fn ireduce_root(&self, out: Region, len: usize, op: OwnedOp) -> Result<Schedule> {
        let k = self.remote.size as usize;
        let regions = vec![out, Region::Owned(vec![0u8; k * len])];
        let mut s = self.schedule(regions, Some(op))?;
        for r in 0..k {
            s.recv(IC, (1, r * len), len, r as i32);
        }
        fold_steps(&mut s, 1, k, len, 0);
        Ok(s)
    }

    /// `MPI_Ireduce` in the other group: `len` bytes of `data` to remote rank `root`.
    pub fn ireduce_send(
        &self,
        data: Region,
        len: usize,
        root: i32,
        op: OwnedOp,
    ) -> Result<Schedule> {
        self.ione_op(data, len, root, true, Some(op))
    }

    /// `MPI_Iallreduce` (`counts` = `None`) and `MPI_Ireduce_scatter(_block)` (`counts`:
    /// bytes per local rank): the local contributions (`mine`, `len` bytes each) folded at
    /// the leader, leaders swap, the remote group's result goes to every local member
    /// (whole, or its block) into `out` (region 0).
    pub fn ireduce_swap(
        &self,
        out: Region,
        mine: Vec<u8>,
        counts: Option<&[usize]>,
        op: OwnedOp,
    ) -> Result<Schedule> {
        let len = mine.len();
        let (me, k) = (self.local.rank as usize, self.local.size as usize);
        let ours = counts.map_or(len, |c| c[me]);
        // Regions: 0 our result, 1 our contribution, 2 all local parts (leader), 3 the
        // local reduction (leader), 4 the remote group's reduction (leader).
        let leads = me == 0;
        let regions = vec![
            out,
            Region::Owned(mine),
            Region::Owned(vec![0u8; if leads { k * len } else { 0 }]),
            Region::Owned(vec![0u8; if leads { len } else { 0 }]),
            Region::Owned(vec![0u8; if leads { len } else { 0 }]),
        ];
        let mut s = self.schedule(regions, Some(op))?;
        if !leads {
            s.send(LOCAL, (1, 0), len, 0);
            s.next_round();
            s.recv(LOCAL, (0, 0), ours, 0);
            return Ok(s);
        }
        for r in 1..k {
            s.recv(LOCAL, (2, r * len), len, r as i32);
        }
        s.copy((1, 0), (2, 0), len);
        fold_steps(&mut s, 2, k, len, 3);
        s.next_round();
        s.send(IC, (3, 0), len, 0);
        s.recv(IC, (4, 0), len, 0);
        s.next_round();
        let mut off = 0;
        for r in 0..k {
            let c = counts.map_or(len, |c| c[r]);
            let at = if counts.is_some() { off } else { 0 };
            if r == me {
                s.copy((4, at), (0, 0), c);
            } else {
                s.send(LOCAL, (4, at), c, r as i32);
            }
            off += c;
        }
        Ok(s)
    }
}
