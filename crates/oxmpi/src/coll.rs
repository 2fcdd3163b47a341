//! Blocking collective operations (barrier, broadcast, reductions, gather/scatter and their
//! v-variants, all-to-all, scans) on the collective framework
//! `oxmpi-coll`, with the C library's component selection (`oxmpi_coll::base::select`):
//! barrier, broadcast, allreduce and alltoall take the shared-memory component when every
//! rank runs on one node, the point-to-point algorithms otherwise.
//!
//! Every communicator has a second engine communicator over the same ranks, its *collective
//! context*, so collective traffic never matches a user's receive (same convention as the C
//! ABI: context ids 2 and 3 for world and self); `oxmpi-coll` runs its algorithms on it
//! (the table in `oxmpi_coll`'s crate documentation), chosen by message and communicator
//! size and forcible with the `coll_tuned_<coll>_algorithm` parameters. Reductions combine in rank order
//! (`op(lower, higher)`), so `op` need not be commutative. Elements travel in their packed
//! form; contiguous element types are used in place.

use std::borrow::Cow;

use oxmpi_coll::base::select;
use oxmpi_coll::{CollComm, Op};
use oxmpi_engine::ErrorClass;

use crate::comm::Communicator;
use crate::datatype::{pack_slice, unpack_into, Equivalence};
use crate::error::{Error, Result};

/// Context id of `MPI_COMM_WORLD`'s collective context.
pub(crate) const WORLD_COLL_CTX: u32 = 2;
/// Context id of `MPI_COMM_SELF`'s collective context.
pub(crate) const SELF_COLL_CTX: u32 = 3;

/// The raw bytes of a slice of a contiguous element type (every bit pattern is a valid
/// value, no padding), for receiving in place.
fn bytes_mut<T: Equivalence>(buf: &mut [T]) -> &mut [u8] {
    assert!(T::CONTIGUOUS, "bytes_mut on a non-contiguous type");
    // SAFETY: T::CONTIGUOUS guarantees no padding and that any bytes form valid values; the
    // view covers exactly the slice and borrows it mutably.
    unsafe {
        std::slice::from_raw_parts_mut(buf.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(buf))
    }
}

/// The packed bytes of `buf` (borrowed in place when its type is contiguous).
fn wire_bytes<T: Equivalence>(buf: &[T]) -> Cow<'_, [u8]> {
    if T::CONTIGUOUS {
        Cow::Borrowed(crate::datatype::contiguous_bytes(buf))
    } else {
        Cow::Owned(pack_slice(buf))
    }
}

/// Runs `f` on the packed bytes of `buf` (in place when contiguous; otherwise packed first
/// if `fill`, and unpacked back afterwards).
fn with_bytes<T: Equivalence, R>(
    buf: &mut [T],
    fill: bool,
    f: impl FnOnce(&mut [u8]) -> Result<R>,
) -> Result<R> {
    if T::CONTIGUOUS {
        return f(bytes_mut(buf));
    }
    let mut v = if fill {
        pack_slice(buf)
    } else {
        vec![0u8; buf.len() * T::PACKED_SIZE]
    };
    let r = f(&mut v)?;
    unpack_into(&v, buf);
    Ok(r)
}

/// The element operation `op(lower, higher)` as an `oxmpi-coll` byte operation
/// (`inout = in ∘ inout`, `in` from the lower ranks).
pub(crate) fn byte_op<T: Equivalence>(op: &(impl Fn(T, T) -> T + ?Sized), a: &[u8], io: &mut [u8]) {
    let n = T::PACKED_SIZE;
    if n == 0 {
        return;
    }
    for (x, y) in a.chunks_exact(n).zip(io.chunks_exact_mut(n)) {
        op(T::unpack(x), T::unpack(y)).pack(y);
    }
}

/// The byte operation `f` on packed elements of `T`, combined in rank order (not taken
/// as commutative).
fn rank_order_op<T: Equivalence>(f: &dyn Fn(&[u8], &mut [u8])) -> Op<'_> {
    Op {
        f,
        elem_size: T::PACKED_SIZE.max(1),
        commutative: false,
    }
}

impl<'u> Communicator<'u> {
    pub(crate) fn check_root(&self, root: i32) -> Result<()> {
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
        Ok(select::barrier(&self.alg())?)
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
        let a = self.alg();
        with_bytes(buf, self.rank() == root, |b| {
            Ok(select::bcast(&a, b, root)?)
        })
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
        if self.rank() == root {
            self.check_len("reduce", send.len(), recv.len())?;
        }
        let mut data = pack_slice(send);
        let f = |x: &[u8], io: &mut [u8]| byte_op(&op, x, io);
        select::reduce_packed(&self.alg(), &mut data, root, &rank_order_op::<T>(&f))?;
        if self.rank() == root {
            unpack_into(&data, recv);
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
        self.check_len("all_reduce", send.len(), recv.len())?;
        let src = wire_bytes(send);
        let f = |x: &[u8], io: &mut [u8]| byte_op(&op, x, io);
        let a = self.alg();
        with_bytes(recv, false, |r| {
            Ok(select::allreduce(
                &a,
                Some(&src),
                r,
                &f,
                T::PACKED_SIZE.max(1),
                false,
            )?)
        })?;
        Ok(())
    }
}

impl<'u> Communicator<'u> {
    /// Collects `send` of every rank, in rank order, into `recv` of rank `root`
    /// (`MPI_Gather`). All ranks send the same number of elements; on the root, `recv` holds
    /// `size * send.len()` elements (it is not used elsewhere).
    pub fn gather<T: Equivalence>(&self, root: i32, send: &[T], recv: &mut [T]) -> Result<()> {
        self.check_root(root)?;
        let a = self.alg();
        let send_b = &*wire_bytes(send);
        if self.rank() != root {
            return Ok(select::gather(
                &a,
                Some(send_b),
                &mut [],
                send_b.len(),
                root,
            )?);
        }
        let n = send.len();
        if n.checked_mul(self.size() as usize) != Some(recv.len()) {
            return Err(Error::new(
                ErrorClass::Count,
                format!(
                    "gather: receive buffer of {} elements for {} ranks of {n}",
                    recv.len(),
                    self.size()
                ),
            ));
        }
        with_bytes(recv, false, |r| {
            Ok(select::gather(&a, Some(send_b), r, send_b.len(), root)?)
        })
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
        let a = self.alg();
        let block = send.len() * T::PACKED_SIZE;
        let me = self.rank() as usize;
        let own = pack_slice(send);
        with_bytes(recv, false, |r| {
            r[me * block..(me + 1) * block].copy_from_slice(&own);
            Ok(select::allgather(&a, r, block, None)?)
        })
    }

    /// Sends block `j` of `send` to rank `j` and receives rank `j`'s block for us into block
    /// `j` of `recv` (`MPI_Alltoall`); both hold `size` blocks of equal length. Small
    /// exchanges among the ranks of one node go through the shared-memory component.
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let universe = oxmpi::init()?;
    /// let world = universe.world();
    /// let n = world.size() as usize;
    /// let send: Vec<i32> = (0..n as i32).map(|j| world.rank() * 100 + j).collect();
    /// let mut recv = vec![0i32; n];
    /// world.all_to_all(&send[..], &mut recv[..])?;
    /// assert_eq!(recv[0], world.rank()); // rank 0 sent us 0 * 100 + our rank
    /// # Ok(())
    /// # }
    /// ```
    pub fn all_to_all<T: Equivalence>(&self, send: &[T], recv: &mut [T]) -> Result<()> {
        let n = self.size() as usize;
        if send.len() != recv.len() || send.len() % n != 0 {
            return Err(Error::new(
                ErrorClass::Count,
                format!(
                    "all_to_all: {} elements to send and room for {} on {n} ranks",
                    send.len(),
                    recv.len()
                ),
            ));
        }
        let a = self.alg();
        let block = send.len() / n * T::PACKED_SIZE;
        let own = wire_bytes(send);
        with_bytes(recv, false, |r| Ok(select::alltoall(&a, &own, r, block)?))
    }

    /// Sends block `j` of `send` (on rank `root`, which holds `size` blocks of `recv.len()`
    /// elements) to rank `j`'s `recv` (`MPI_Scatter`); `send` is not used elsewhere.
    pub fn scatter<T: Equivalence>(&self, root: i32, send: &[T], recv: &mut [T]) -> Result<()> {
        self.check_root(root)?;
        let n = recv.len();
        if self.rank() == root && n.checked_mul(self.size() as usize) != Some(send.len()) {
            return Err(Error::new(
                ErrorClass::Count,
                format!(
                    "scatter: {} elements to send for {} ranks of {n}",
                    send.len(),
                    self.size()
                ),
            ));
        }
        let a = self.alg();
        let own = if self.rank() == root {
            wire_bytes(send)
        } else {
            Cow::Borrowed(&[][..])
        };
        with_bytes(recv, false, |r| {
            let block = r.len();
            Ok(select::scatter(&a, &own, Some(r), block, root)?)
        })
    }

    /// Inclusive prefix reduction (`MPI_Scan`): `recv` of rank `i` gets
    /// `op(… op(send_0, send_1) …, send_i)` element by element (rank order; `op` must be
    /// associative).
    pub fn scan<T, F>(&self, send: &[T], recv: &mut [T], op: F) -> Result<()>
    where
        T: Equivalence,
        F: Fn(T, T) -> T,
    {
        self.check_len("scan", send.len(), recv.len())?;
        let mut data = pack_slice(send);
        let f = |x: &[u8], io: &mut [u8]| byte_op(&op, x, io);
        select::scan_packed(&self.alg(), &mut data, &rank_order_op::<T>(&f))?;
        unpack_into(&data, recv);
        Ok(())
    }

    /// Exclusive prefix reduction (`MPI_Exscan`): `recv` of rank `i > 0` gets the
    /// reduction of `send` of ranks `0..i` (rank order); rank 0's `recv` is left as it is.
    pub fn exclusive_scan<T, F>(&self, send: &[T], recv: &mut [T], op: F) -> Result<()>
    where
        T: Equivalence,
        F: Fn(T, T) -> T,
    {
        self.check_len("exclusive_scan", send.len(), recv.len())?;
        let data = pack_slice(send);
        let f = |x: &[u8], io: &mut [u8]| byte_op(&op, x, io);
        let mut out = vec![0u8; data.len()];
        select::exscan(&self.alg(), &data, &mut out, &rank_order_op::<T>(&f))?;
        if self.rank() > 0 {
            unpack_into(&out, recv);
        }
        Ok(())
    }

    /// Combines `send` of all ranks element by element with `op` and scatters the result
    /// in blocks of `recv.len()` elements: rank `i` gets block `i` (`MPI_Reduce_scatter_block`).
    /// `send` holds `size * recv.len()` elements on every rank. As in
    /// [`reduce`](Self::reduce), `op` must be associative and values combine in rank order.
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let universe = oxmpi::init()?;
    /// let world = universe.world();
    /// let send: Vec<u64> = (0..world.size() as u64).map(|j| j + 1).collect();
    /// let mut mine = [0u64];
    /// world.reduce_scatter_block(&send[..], &mut mine[..], |a, b| a + b)?;
    /// assert_eq!(mine[0], (world.rank() as u64 + 1) * world.size() as u64);
    /// # Ok(())
    /// # }
    /// ```
    pub fn reduce_scatter_block<T, F>(&self, send: &[T], recv: &mut [T], op: F) -> Result<()>
    where
        T: Equivalence,
        F: Fn(T, T) -> T,
    {
        let p = self.size() as usize;
        if recv.len().checked_mul(p) != Some(send.len()) {
            return Err(Error::new(
                ErrorClass::Count,
                format!(
                    "reduce_scatter_block: {} elements to reduce for {p} blocks of {}",
                    send.len(),
                    recv.len()
                ),
            ));
        }
        let counts = vec![recv.len(); p];
        self.reduce_scatter(send, recv, &counts, op)
    }

    /// Combines `send` of all ranks element by element with `op` and scatters the result:
    /// rank `i` gets the `counts[i]` elements after the blocks of ranks `0..i`
    /// (`MPI_Reduce_scatter`). `send` holds the sum of `counts` elements on every rank,
    /// `recv` holds `counts[rank]`. As in [`reduce`](Self::reduce), `op` must be
    /// associative and values combine in rank order.
    pub fn reduce_scatter<T, F>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        op: F,
    ) -> Result<()>
    where
        T: Equivalence,
        F: Fn(T, T) -> T,
    {
        let (bytes, _) = self.scatter_blocks::<T>("reduce_scatter", send.len(), counts)?;
        self.check_len("reduce_scatter", counts[self.rank() as usize], recv.len())?;
        let mut data = pack_slice(send);
        let f = |x: &[u8], io: &mut [u8]| byte_op(&op, x, io);
        let a = self.alg();
        with_bytes(recv, false, |r| {
            Ok(select::reduce_scatter(
                &a,
                &mut data,
                &bytes,
                r,
                &rank_order_op::<T>(&f),
            )?)
        })
    }

    /// `counts` (elements, `size` entries, summing to `len`) as bytes; also the element
    /// offset of our block.
    pub(crate) fn scatter_blocks<T: Equivalence>(
        &self,
        what: &str,
        len: usize,
        counts: &[usize],
    ) -> Result<(Vec<usize>, usize)> {
        let displs: Vec<usize> = counts
            .iter()
            .scan(0usize, |at, &c| {
                let d = *at;
                *at = at.saturating_add(c);
                Some(d)
            })
            .collect();
        let total = counts.iter().try_fold(0usize, |s, &c| s.checked_add(c));
        if total != Some(len) {
            return Err(Error::new(
                ErrorClass::Count,
                format!("{what}: counts {counts:?} do not sum to the {len} elements sent"),
            ));
        }
        let (c, _) = self.byte_blocks::<T>(what, counts, &displs, len)?;
        Ok((c, displs[self.rank() as usize]))
    }

    /// Collects `send` of every rank into `recv` of rank `root`: rank `i`'s elements land at
    /// `recv[displs[i]..displs[i] + counts[i]]` (`MPI_Gatherv`; counts and displacements in
    /// elements, `size` entries each). Rank `i` sends `counts[i]` elements. `recv`, `counts`
    /// and `displs` are only used on the root; elements of `recv` outside every block are
    /// left as they are.
    pub fn gatherv<T: Equivalence>(
        &self,
        root: i32,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        self.check_root(root)?;
        let a = self.alg();
        let send_b = &*wire_bytes(send);
        if self.rank() != root {
            return Ok(a.gatherv(send_b, &mut [], &[], &[], root)?);
        }
        let (c, d) = self.byte_blocks::<T>("gatherv", counts, displs, recv.len())?;
        with_bytes(recv, true, |r| Ok(a.gatherv(send_b, r, &c, &d, root)?))
    }

    /// Sends `send[displs[i]..displs[i] + counts[i]]` of rank `root` to rank `i`'s `recv`
    /// (`MPI_Scatterv`; counts and displacements in elements, `size` entries each). `send`,
    /// `counts` and `displs` are only used on the root; rank `i`'s `recv` holds
    /// `counts[i]` elements.
    pub fn scatterv<T: Equivalence>(
        &self,
        root: i32,
        send: &[T],
        counts: &[usize],
        displs: &[usize],
        recv: &mut [T],
    ) -> Result<()> {
        self.check_root(root)?;
        let a = self.alg();
        if self.rank() != root {
            return with_bytes(recv, false, |r| Ok(a.scatterv(&[], &[], &[], r, root)?));
        }
        let (c, d) = self.byte_blocks::<T>("scatterv", counts, displs, send.len())?;
        let own = wire_bytes(send);
        with_bytes(recv, false, |r| Ok(a.scatterv(&own, &c, &d, r, root)?))
    }

    /// Like [`gatherv`](Self::gatherv), with the result on every rank (`MPI_Allgatherv`):
    /// rank `i`'s `send` (`counts[i]` elements) lands at `recv[displs[i]..]` of every rank.
    /// Blocks must not overlap; elements of `recv` outside every block are left as they are.
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let universe = oxmpi::init()?;
    /// let world = universe.world();
    /// // Rank i contributes i + 1 copies of i.
    /// let counts: Vec<usize> = (1..=world.size() as usize).collect();
    /// let displs: Vec<usize> = counts.iter().scan(0, |s, c| { *s += c; Some(*s - c) }).collect();
    /// let mine = vec![world.rank(); world.rank() as usize + 1];
    /// let mut all = vec![-1i32; counts.iter().sum()];
    /// world.all_gatherv(&mine[..], &mut all[..], &counts, &displs)?;
    /// assert_eq!(all[0], 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn all_gatherv<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<()> {
        let (c, d) =
            self.allgatherv_blocks::<T>("all_gatherv", send.len(), counts, displs, recv.len())?;
        let me = self.rank() as usize;
        let a = self.alg();
        let own = wire_bytes(send);
        with_bytes(recv, true, |r| {
            r[d[me]..d[me] + c[me]].copy_from_slice(&own);
            Ok(a.allgatherv(r, &c, &d)?)
        })
    }

    /// Sends `send[sdispls[j]..sdispls[j] + scounts[j]]` to rank `j`, and receives rank
    /// `j`'s block for us (`rcounts[j]` elements) at `recv[rdispls[j]..]`
    /// (`MPI_Alltoallv`; counts and displacements in elements, `size` entries each).
    /// Elements of `recv` outside every block are left as they are.
    pub fn all_to_allv<T: Equivalence>(
        &self,
        send: &[T],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<()> {
        let (sc, sd) = self.byte_blocks::<T>("all_to_allv", scounts, sdispls, send.len())?;
        let (rc, rd) = self.byte_blocks::<T>("all_to_allv", rcounts, rdispls, recv.len())?;
        let a = self.alg();
        let own = wire_bytes(send);
        with_bytes(recv, true, |r| {
            Ok(select::alltoallv(&a, &own, (&sc, &sd), r, (&rc, &rd))?)
        })
    }

    /// [`byte_blocks`](Self::byte_blocks) of an allgatherv, also checking that we send
    /// our count (`send` elements).
    pub(crate) fn allgatherv_blocks<T: Equivalence>(
        &self,
        what: &str,
        send: usize,
        counts: &[usize],
        displs: &[usize],
        len: usize,
    ) -> Result<(Vec<usize>, Vec<usize>)> {
        let blocks = self.byte_blocks::<T>(what, counts, displs, len)?;
        let me = self.rank() as usize;
        if send != counts[me] {
            return Err(Error::new(
                ErrorClass::Count,
                format!(
                    "{what}: rank {me} sends {send} elements, its count is {}",
                    counts[me]
                ),
            ));
        }
        Ok(blocks)
    }

    /// Counts and displacements in elements of `T` as bytes, checked: `size` entries each,
    /// every block inside a buffer of `len` elements.
    pub(crate) fn byte_blocks<T: Equivalence>(
        &self,
        what: &str,
        counts: &[usize],
        displs: &[usize],
        len: usize,
    ) -> Result<(Vec<usize>, Vec<usize>)> {
        let p = self.size() as usize;
        if counts.len() != p || displs.len() != p {
            return Err(Error::new(
                ErrorClass::Count,
                format!(
                    "{what}: {} counts and {} displacements for {p} ranks",
                    counts.len(),
                    displs.len()
                ),
            ));
        }
        for (i, (&c, &d)) in counts.iter().zip(displs).enumerate() {
            if d.checked_add(c).is_none_or(|end| end > len) {
                return Err(Error::new(
                    ErrorClass::Count,
                    format!("{what}: block {i} ({c} elements at {d}) exceeds the buffer of {len}"),
                ));
            }
        }
        // In bounds of a slice of `len` elements, so no product overflows.
        let bytes = |v: &[usize]| v.iter().map(|&x| x * T::PACKED_SIZE).collect();
        Ok((bytes(counts), bytes(displs)))
    }

    fn check_len(&self, what: &str, send: usize, recv: usize) -> Result<()> {
        if send == recv {
            return Ok(());
        }
        Err(Error::new(
            ErrorClass::Count,
            format!("{what}: receive buffer of {recv} elements for {send} elements"),
        ))
    }

    /// The `oxmpi-coll` view of this communicator (traffic on its collective context).
    pub(crate) fn alg(&self) -> CollComm {
        CollComm::on_context_known(
            self.engine_ref(),
            self.id(),
            self.coll_id(),
            self.rank(),
            self.size(),
        )
    }
}
