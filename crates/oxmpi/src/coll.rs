//! Collective operations (barrier, broadcast, reduce) built on point-to-point messages.
//!
//! Every communicator has a second engine communicator over the same ranks, its *collective
//! context*, so collective traffic never matches a user's receive (same convention as the C
//! ABI: context ids 2 and 3 for world and self). Algorithms: dissemination barrier, binomial
//! broadcast and binomial reduction (combining in rank order), allreduce = reduce + broadcast.

use oxmpi_engine::ErrorClass;

use crate::comm::Communicator;
use crate::datatype::Equivalence;
use crate::error::{Error, Result};

/// Context id of `MPI_COMM_WORLD`'s collective context.
pub(crate) const WORLD_COLL_CTX: u32 = 2;
/// Context id of `MPI_COMM_SELF`'s collective context.
pub(crate) const SELF_COLL_CTX: u32 = 3;

const TAG_BARRIER: i32 = 1;
const TAG_BCAST: i32 = 2;
const TAG_REDUCE: i32 = 3;
const TAG_REDUCE_RESULT: i32 = 4;

impl<'u> Communicator<'u> {
    fn check_root(&self, root: i32) -> Result<()> {
        if (0..self.size()).contains(&root) {
            Ok(())
        } else {
            Err(Error::new(
                ErrorClass::Rank,
                format!(
                    "root {root} is not a rank of the communicator (size {}) on rank {}",
                    self.size(),
                    self.rank()
                ),
            ))
        }
    }

    /// Blocks until every rank of the communicator has called it (`MPI_Barrier`).
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let universe = oxmpi::init()?;
    /// universe.world().barrier()?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn barrier(&self) -> Result<()> {
        let c = self.collective();
        let (rank, size) = (c.rank(), c.size());
        let mut dist = 1;
        while dist < size {
            let to = (rank + dist) % size;
            let from = (rank - dist).rem_euclid(size);
            let mut none = [0u8; 0];
            c.sendrecv(
                &[0u8; 0][..],
                to,
                TAG_BARRIER,
                &mut none[..],
                from,
                TAG_BARRIER,
            )?;
            dist *= 2;
        }
        Ok(())
    }

    /// Copies `buf` of rank `root` into `buf` of every other rank (`MPI_Bcast`). All ranks must
    /// pass buffers of the same length.
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let universe = oxmpi::init()?;
    /// let world = universe.world();
    /// let mut config = [0u32; 3];
    /// if world.rank() == 0 {
    ///     config = [4, 8, 15];
    /// }
    /// world.broadcast(0, &mut config[..])?;
    /// assert_eq!(config, [4, 8, 15]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn broadcast<T: Equivalence>(&self, root: i32, buf: &mut [T]) -> Result<()> {
        self.check_root(root)?;
        let c = self.collective();
        let (rank, size) = (c.rank(), c.size());
        let vrank = (rank - root).rem_euclid(size);
        let mut mask = 1;
        while mask < size {
            if vrank & mask != 0 {
                let parent = (vrank - mask + root).rem_euclid(size);
                c.recv(buf, parent, TAG_BCAST)?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        while mask > 0 {
            if vrank + mask < size {
                let child = (vrank + mask + root).rem_euclid(size);
                c.send(buf, child, TAG_BCAST)?;
            }
            mask >>= 1;
        }
        Ok(())
    }

    /// Combines `send` of all ranks element by element with `op` and stores the result in
    /// `recv` of rank `root` (`MPI_Reduce`); `recv` is only written on the root.
    ///
    /// `op` must be associative; values are combined in rank order (`op(lower, higher)`), so it
    /// need not be commutative. All ranks must pass slices of the same length.
    pub fn reduce<T, F>(&self, root: i32, send: &[T], recv: &mut [T], op: F) -> Result<()>
    where
        T: Equivalence,
        F: Fn(T, T) -> T,
    {
        self.check_root(root)?;
        if self.rank() == root && recv.len() != send.len() {
            return Err(Error::new(
                ErrorClass::Count,
                format!(
                    "reduce: receive buffer of {} elements for {} elements",
                    recv.len(),
                    send.len()
                ),
            ));
        }
        let c = self.collective();
        let (rank, size) = (c.rank(), c.size());
        // Binomial tree rooted at rank 0: each rank combines its subtree, which holds only
        // higher ranks, as op(own, subtree), so the result is in rank order.
        // `acc` is `None` while it still equals `send` (leaves never copy their data).
        let mut acc: Option<Vec<T>> = None;
        let mut incoming: Option<Vec<T>> = None;
        let mut mask = 1;
        while mask < size {
            if rank & mask != 0 {
                c.send(acc.as_deref().unwrap_or(send), rank - mask, TAG_REDUCE)?;
                break;
            }
            let child = rank | mask;
            if child < size {
                let inc = incoming.get_or_insert_with(|| send.to_vec());
                c.recv(&mut inc[..], child, TAG_REDUCE)?;
                let a = acc.get_or_insert_with(|| send.to_vec());
                for (a, b) in a.iter_mut().zip(inc.iter()) {
                    *a = op(*a, *b);
                }
            }
            mask <<= 1;
        }
        let acc = acc.as_deref().unwrap_or(send);
        if root == 0 {
            if rank == 0 {
                recv.copy_from_slice(acc);
            }
        } else if rank == 0 {
            c.send(acc, root, TAG_REDUCE_RESULT)?;
        } else if rank == root {
            c.recv(recv, 0, TAG_REDUCE_RESULT)?;
        }
        Ok(())
    }

    /// Like [`reduce`](Self::reduce), with the result on every rank (`MPI_Allreduce`).
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let universe = oxmpi::init()?;
    /// let world = universe.world();
    /// let mut sum = [0i64; 2];
    /// world.all_reduce(&[1, i64::from(world.rank())][..], &mut sum[..], |a, b| a + b)?;
    /// let n = i64::from(world.size());
    /// assert_eq!(sum, [n, n * (n - 1) / 2]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn all_reduce<T, F>(&self, send: &[T], recv: &mut [T], op: F) -> Result<()>
    where
        T: Equivalence,
        F: Fn(T, T) -> T,
    {
        if recv.len() != send.len() {
            return Err(Error::new(
                ErrorClass::Count,
                format!(
                    "all_reduce: receive buffer of {} elements for {} elements",
                    recv.len(),
                    send.len()
                ),
            ));
        }
        self.reduce(0, send, recv, op)?;
        self.broadcast(0, recv)
    }
}

const TAG_GATHER: i32 = 5;

impl<'u> Communicator<'u> {
    /// Collects `send` of every rank, in rank order, into `recv` of rank `root`
    /// (`MPI_Gather`). All ranks send the same number of elements; on the root, `recv` holds
    /// `size * send.len()` elements (it is not used elsewhere).
    pub fn gather<T: Equivalence>(&self, root: i32, send: &[T], recv: &mut [T]) -> Result<()> {
        self.check_root(root)?;
        let c = self.collective();
        let n = send.len();
        if c.rank() != root {
            return c.send(send, root, TAG_GATHER);
        }
        let want = n.checked_mul(c.size() as usize);
        if want != Some(recv.len()) {
            return Err(Error::new(
                ErrorClass::Count,
                format!(
                    "gather: receive buffer of {} elements for {} ranks of {n}",
                    recv.len(),
                    c.size()
                ),
            ));
        }
        for r in 0..c.size() {
            let at = r as usize * n;
            let chunk = &mut recv[at..at + n];
            if r == root {
                chunk.copy_from_slice(send);
            } else {
                c.recv(chunk, r, TAG_GATHER)?;
            }
        }
        Ok(())
    }

    /// Like [`gather`](Self::gather), with the result on every rank (`MPI_Allgather`).
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let universe = oxmpi::init()?;
    /// let world = universe.world();
    /// let mut ranks = vec![-1i32; world.size() as usize];
    /// world.all_gather(&[world.rank()][..], &mut ranks[..])?;
    /// assert_eq!(ranks, (0..world.size()).collect::<Vec<_>>());
    /// # Ok(())
    /// # }
    /// ```
    pub fn all_gather<T: Equivalence>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        if send.len().checked_mul(self.size() as usize) != Some(recv.len()) {
            return Err(Error::new(
                ErrorClass::Count,
                format!(
                    "all_gather: receive buffer of {} elements for {} ranks of {}",
                    recv.len(),
                    self.size(),
                    send.len()
                ),
            ));
        }
        self.gather(0, send, recv)?;
        self.broadcast(0, recv)
    }
}
