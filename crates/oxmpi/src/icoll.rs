//! Nonblocking collectives (`MPI_Ibarrier`, `MPI_Ibcast`, `MPI_Iallreduce`, ...): each
//! builds an `oxmpi-coll` schedule (its `nbc` component, the one the C library's
//! `MPI_I*` functions use) and hands it to the background progress of `oxmpi-coll`; a
//! [`CollRequest`] collects the outcome.

use std::marker::PhantomData;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use oxmpi_coll::nbc::progress;
use oxmpi_coll::sched::{OwnedOp, Region, Schedule};

use crate::coll::byte_op;
use crate::comm::Communicator;
use crate::datatype::{pack_slice, unpack_into, Equivalence};
use crate::error::{Error, Result};
use oxmpi_engine::ErrorClass;

/// A started nonblocking collective ([`ibarrier`](Communicator::ibarrier),
/// [`ibroadcast`](Communicator::ibroadcast), [`iall_reduce`](Communicator::iall_reduce),
/// [`igather`](Communicator::igather), [`iall_to_all`](Communicator::iall_to_all), ...):
/// its schedule runs in the background (the `oxmpi-coll` progress thread, and the waiting
/// thread itself in [`wait`](Self::wait)/[`test`](Self::test)), whatever the program does
/// meanwhile. [`wait`](Self::wait) gives the collective's result (empty for a barrier).
/// Dropping the request waits for the collective to end.
#[must_use = "a nonblocking collective must be waited or tested to get its result"]
pub struct CollRequest<'u, T: Equivalence> {
    slot: Option<Arc<Slot>>,
    /// The values the result is unpacked into (as many as the result has).
    out: Vec<T>,
    _universe: PhantomData<&'u crate::Universe>,
}

/// Where a schedule's completion leaves its outcome (the packed result).
#[derive(Default)]
struct Slot {
    done: Mutex<Option<Result<Vec<u8>>>>,
    cv: Condvar,
}

impl Slot {
    fn take(&self) -> Option<Result<Vec<u8>>> {
        self.done.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Until the outcome is there: advance the active schedules on this thread, or sleep
    /// briefly while another thread (the progress thread) completes ours.
    fn wait(&self) -> Result<Vec<u8>> {
        loop {
            if let Some(r) = self.take() {
                return r;
            }
            if progress::progress_pending() {
                std::thread::yield_now();
                continue;
            }
            let g = self.done.lock().unwrap_or_else(|p| p.into_inner());
            if g.is_none() {
                let _ = self.cv.wait_timeout(g, Duration::from_millis(1));
            }
        }
    }
}

/// Where a finished schedule goes back to: a persistent collective keeps it for its next
/// round.
pub(crate) type Keep = Arc<Mutex<Option<Schedule>>>;

/// A nonblocking collective's schedule before it starts, with what a persistent collective
/// keeps of it: where each round's input goes, where the result is, and the values the
/// result is unpacked into.
pub(crate) struct Planned<T> {
    pub(crate) sched: Schedule,
    /// Where a round's packed input goes: (region, byte offset); `None` without input.
    pub(crate) feed: Option<(usize, usize)>,
    /// The region holding the packed result at the end.
    pub(crate) result: usize,
    /// The values the result is unpacked into (as many as the result has).
    pub(crate) out: Vec<T>,
}

impl<T: Equivalence> Planned<T> {
    /// Starts the schedule once (a nonblocking collective).
    fn start<'u>(self) -> CollRequest<'u, T> {
        CollRequest::start(self.sched, self.result, self.out, None)
    }
}

impl<'u, T: Equivalence> CollRequest<'u, T> {
    /// Starts `sched` (its region `result` holds the packed result at the end); the result
    /// is unpacked into `out`. With `keep`, the finished schedule goes there.
    pub(crate) fn start(
        sched: Schedule,
        result: usize,
        out: Vec<T>,
        keep: Option<Keep>,
    ) -> CollRequest<'u, T> {
        let slot = Arc::new(Slot::default());
        let s2 = slot.clone();
        progress::start(
            sched,
            Box::new(move |s, r| {
                let v = r
                    .map(|()| {
                        s.owned_bytes(result)
                            .map(<[u8]>::to_vec)
                            .unwrap_or_default()
                    })
                    .map_err(Error::from);
                if let Some(k) = keep {
                    *k.lock().unwrap_or_else(|p| p.into_inner()) = Some(s);
                }
                *s2.done.lock().unwrap_or_else(|p| p.into_inner()) = Some(v);
                s2.cv.notify_all();
            }),
        );
        CollRequest {
            slot: Some(slot),
            out,
            _universe: PhantomData,
        }
    }

    fn finish(mut self, r: Result<Vec<u8>>) -> Result<Vec<T>> {
        let bytes = r?;
        let mut out = std::mem::take(&mut self.out);
        unpack_into(&bytes, &mut out);
        Ok(out)
    }

    /// Blocks until the collective completes (`MPI_Wait`); its result.
    pub fn wait(mut self) -> Result<Vec<T>> {
        let r = self.slot.take().expect("request already completed").wait();
        self.finish(r)
    }

    /// The result if the collective has completed (`MPI_Test`); the request back otherwise.
    pub fn test(mut self) -> std::result::Result<Result<Vec<T>>, Self> {
        progress::progress_pending();
        let slot = self.slot.take().expect("request already completed");
        match slot.take() {
            Some(r) => Ok(self.finish(r)),
            None => {
                self.slot = Some(slot);
                Err(self)
            }
        }
    }
}

impl<T: Equivalence> Drop for CollRequest<'_, T> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            let _ = slot.wait();
        }
    }
}

impl<'u> Communicator<'u> {
    /// Starts a barrier (`MPI_Ibarrier`); waiting for it returns once every rank has
    /// started it. Its result is empty.
    pub fn ibarrier(&self) -> Result<CollRequest<'u, u8>> {
        Ok(self.plan_ibarrier()?.start())
    }

    /// The schedule of [`ibarrier`](Self::ibarrier).
    pub(crate) fn plan_ibarrier(&self) -> Result<Planned<u8>> {
        Ok(Planned {
            sched: self.alg().ibarrier()?,
            feed: None,
            result: 0,
            out: Vec::new(),
        })
    }

    /// Starts a broadcast of `buf` from `root` (`MPI_Ibcast`); waiting gives `buf` with the
    /// root's values. All ranks pass vectors of the same length.
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let universe = oxmpi::init()?;
    /// let world = universe.world();
    /// let mine = if world.rank() == 0 { vec![3u16, 1, 4] } else { vec![0; 3] };
    /// let request = world.ibroadcast(0, mine)?;
    /// // ... other work while the broadcast proceeds ...
    /// assert_eq!(request.wait()?, [3, 1, 4]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn ibroadcast<T: Equivalence>(&self, root: i32, buf: Vec<T>) -> Result<CollRequest<'u, T>> {
        Ok(self.plan_ibroadcast(root, buf)?.start())
    }

    /// The schedule of [`ibroadcast`](Self::ibroadcast).
    pub(crate) fn plan_ibroadcast<T: Equivalence>(
        &self,
        root: i32,
        buf: Vec<T>,
    ) -> Result<Planned<T>> {
        self.check_root(root)?;
        let bytes = pack_slice(&buf);
        let sched = self.alg().ibcast(Region::Owned(bytes), root)?;
        Ok(Planned {
            sched,
            feed: Some((0, 0)),
            result: 0,
            out: buf,
        })
    }

    /// Starts combining `send` of all ranks element by element with `op`
    /// (`MPI_Iallreduce`); waiting gives the result on every rank. As in
    /// [`all_reduce`](Self::all_reduce), `op` must be associative and values combine in
    /// rank order (`op(lower, higher)`). `op` runs on the thread that advances the
    /// collective (possibly the progress thread).
    pub fn iall_reduce<T, F>(&self, send: &[T], op: F) -> Result<CollRequest<'u, T>>
    where
        T: Equivalence,
        F: Fn(T, T) -> T + Send + 'static,
    {
        Ok(self.plan_iall_reduce(send, op)?.start())
    }

    /// The schedule of [`iall_reduce`](Self::iall_reduce).
    pub(crate) fn plan_iall_reduce<T, F>(&self, send: &[T], op: F) -> Result<Planned<T>>
    where
        T: Equivalence,
        F: Fn(T, T) -> T + Send + 'static,
    {
        let sched = self
            .alg()
            .iallreduce(Region::Owned(pack_slice(send)), owned_op(op))?;
        Ok(Planned {
            sched,
            feed: Some((0, 0)),
            result: 0,
            out: send.to_vec(),
        })
    }

    /// Starts combining `send` of all ranks element by element with `op`, the result on
    /// rank `root` (`MPI_Ireduce`); waiting gives the result on the root and an empty
    /// vector elsewhere. Order and threading of `op` as in
    /// [`iall_reduce`](Self::iall_reduce).
    pub fn ireduce<T, F>(&self, root: i32, send: &[T], op: F) -> Result<CollRequest<'u, T>>
    where
        T: Equivalence,
        F: Fn(T, T) -> T + Send + 'static,
    {
        Ok(self.plan_ireduce(root, send, op)?.start())
    }

    /// The schedule of [`ireduce`](Self::ireduce).
    pub(crate) fn plan_ireduce<T, F>(&self, root: i32, send: &[T], op: F) -> Result<Planned<T>>
    where
        T: Equivalence,
        F: Fn(T, T) -> T + Send + 'static,
    {
        self.check_root(root)?;
        let (out, template) = if self.rank() == root {
            (vec![0u8; send.len() * T::PACKED_SIZE], send.to_vec())
        } else {
            (Vec::new(), Vec::new())
        };
        let sched = self.alg().ireduce(
            Region::Owned(pack_slice(send)),
            Some(Region::Owned(out)),
            root,
            owned_op(op),
        )?;
        Ok(Planned {
            sched,
            feed: Some((0, 0)),
            result: 1,
            out: template,
        })
    }

    /// Starts collecting `send` of every rank, in rank order, at rank `root`
    /// (`MPI_Igather`); waiting gives the `size * send.len()` elements on the root and an
    /// empty vector elsewhere. All ranks send the same number of elements.
    pub fn igather<T: Equivalence>(&self, root: i32, send: &[T]) -> Result<CollRequest<'u, T>> {
        Ok(self.plan_igather(root, send)?.start())
    }

    /// The schedule of [`igather`](Self::igather).
    pub(crate) fn plan_igather<T: Equivalence>(&self, root: i32, send: &[T]) -> Result<Planned<T>> {
        self.check_root(root)?;
        let p = self.size() as usize;
        let recv = if self.rank() == root {
            send.repeat(p)
        } else {
            Vec::new()
        };
        let (counts, displs) = uniform(p, send.len());
        self.plan_igatherv(root, send, recv, &counts, &displs)
    }

    /// Starts sending block `j` of `send` (on rank `root`: `size` blocks of `recv.len()`
    /// elements; not used elsewhere) to rank `j` (`MPI_Iscatter`); waiting gives `recv`
    /// holding our block.
    pub fn iscatter<T: Equivalence>(
        &self,
        root: i32,
        send: &[T],
        recv: Vec<T>,
    ) -> Result<CollRequest<'u, T>> {
        self.check_root(root)?;
        let p = self.size() as usize;
        if self.rank() == root && recv.len().checked_mul(p) != Some(send.len()) {
            return Err(Error::new(
                ErrorClass::Count,
                format!(
                    "iscatter: {} elements to send for {p} ranks of {}",
                    send.len(),
                    recv.len()
                ),
            ));
        }
        let (counts, displs) = uniform(p, recv.len());
        self.iscatterv(root, send, &counts, &displs, recv)
    }

    /// Starts collecting `send` of every rank, in rank order, on every rank
    /// (`MPI_Iallgather`); waiting gives the `size * send.len()` elements. All ranks send
    /// the same number of elements.
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let universe = oxmpi::init()?;
    /// let world = universe.world();
    /// let request = world.iall_gather(&[world.rank()][..])?;
    /// assert_eq!(request.wait()?, (0..world.size()).collect::<Vec<_>>());
    /// # Ok(())
    /// # }
    /// ```
    pub fn iall_gather<T: Equivalence>(&self, send: &[T]) -> Result<CollRequest<'u, T>> {
        Ok(self.plan_iall_gather(send)?.start())
    }

    /// The schedule of [`iall_gather`](Self::iall_gather).
    pub(crate) fn plan_iall_gather<T: Equivalence>(&self, send: &[T]) -> Result<Planned<T>> {
        let p = self.size() as usize;
        let (counts, displs) = uniform(p, send.len());
        self.plan_iall_gatherv(send, send.repeat(p), &counts, &displs)
    }

    /// Starts sending block `j` of `send` (`size` blocks of equal length) to rank `j`
    /// (`MPI_Ialltoall`); waiting gives the blocks received, block `j` from rank `j`.
    pub fn iall_to_all<T: Equivalence>(&self, send: &[T]) -> Result<CollRequest<'u, T>> {
        Ok(self.plan_iall_to_all(send)?.start())
    }

    /// The schedule of [`iall_to_all`](Self::iall_to_all).
    pub(crate) fn plan_iall_to_all<T: Equivalence>(&self, send: &[T]) -> Result<Planned<T>> {
        let p = self.size() as usize;
        let n = self.equal_blocks("iall_to_all", send.len())?;
        let (counts, displs) = uniform(p, n);
        self.plan_iall_to_allv(send, &counts, &displs, send.to_vec(), &counts, &displs)
    }

    /// Starts collecting `send` of every rank at rank `root` (`MPI_Igatherv`): rank `i`'s
    /// elements (`counts[i]` of them) land at `recv[displs[i]..]`. Waiting gives `recv` back
    /// with the blocks in place (elements outside every block as they were). `recv`,
    /// `counts` and `displs` are only used on the root (counts and displacements in
    /// elements, `size` entries each).
    pub fn igatherv<T: Equivalence>(
        &self,
        root: i32,
        send: &[T],
        recv: Vec<T>,
        counts: &[usize],
        displs: &[usize],
    ) -> Result<CollRequest<'u, T>> {
        Ok(self
            .plan_igatherv(root, send, recv, counts, displs)?
            .start())
    }

    /// The schedule of [`igatherv`](Self::igatherv).
    fn plan_igatherv<T: Equivalence>(
        &self,
        root: i32,
        send: &[T],
        recv: Vec<T>,
        counts: &[usize],
        displs: &[usize],
    ) -> Result<Planned<T>> {
        self.check_root(root)?;
        let (c, d, area) = if self.rank() == root {
            let (c, d) = self.byte_blocks::<T>("igatherv", counts, displs, recv.len())?;
            (c, d, pack_slice(&recv))
        } else {
            (Vec::new(), Vec::new(), Vec::new())
        };
        let sched = self.alg().igatherv(
            Region::Owned(pack_slice(send)),
            Region::Owned(area),
            &c,
            &d,
            root,
        )?;
        Ok(Planned {
            sched,
            feed: Some((0, 0)),
            result: 1,
            out: recv,
        })
    }

    /// Starts sending `send[displs[i]..][..counts[i]]` of rank `root` to rank `i`
    /// (`MPI_Iscatterv`; counts and displacements in elements, `size` entries each, used on
    /// the root only). Rank `i`'s `recv` holds `counts[i]` elements; waiting gives it back
    /// with our block.
    pub fn iscatterv<T: Equivalence>(
        &self,
        root: i32,
        send: &[T],
        counts: &[usize],
        displs: &[usize],
        recv: Vec<T>,
    ) -> Result<CollRequest<'u, T>> {
        self.check_root(root)?;
        let (c, d, own) = if self.rank() == root {
            let (c, d) = self.byte_blocks::<T>("iscatterv", counts, displs, send.len())?;
            (c, d, pack_slice(send))
        } else {
            (Vec::new(), Vec::new(), Vec::new())
        };
        let sched = self.alg().iscatterv(
            Region::Owned(own),
            &c,
            &d,
            Region::Owned(vec![0u8; recv.len() * T::PACKED_SIZE]),
            root,
        )?;
        Ok(CollRequest::start(sched, 1, recv, None))
    }

    /// Like [`igatherv`](Self::igatherv), with the result on every rank
    /// (`MPI_Iallgatherv`): rank `i`'s `send` (`counts[i]` elements) lands at
    /// `recv[displs[i]..]` of every rank. Blocks must not overlap.
    pub fn iall_gatherv<T: Equivalence>(
        &self,
        send: &[T],
        recv: Vec<T>,
        counts: &[usize],
        displs: &[usize],
    ) -> Result<CollRequest<'u, T>> {
        Ok(self.plan_iall_gatherv(send, recv, counts, displs)?.start())
    }

    /// The schedule of [`iall_gatherv`](Self::iall_gatherv).
    fn plan_iall_gatherv<T: Equivalence>(
        &self,
        send: &[T],
        recv: Vec<T>,
        counts: &[usize],
        displs: &[usize],
    ) -> Result<Planned<T>> {
        let (c, d) =
            self.allgatherv_blocks::<T>("iall_gatherv", send.len(), counts, displs, recv.len())?;
        let me = self.rank() as usize;
        let mut area = pack_slice(&recv);
        area[d[me]..d[me] + c[me]].copy_from_slice(&pack_slice(send));
        let sched = self.alg().iallgatherv(Region::Owned(area), &c, &d)?;
        Ok(Planned {
            sched,
            feed: Some((0, d[me])),
            result: 0,
            out: recv,
        })
    }

    /// Starts sending `send[sdispls[j]..][..scounts[j]]` to rank `j` and receiving rank
    /// `j`'s block for us (`rcounts[j]` elements) at `recv[rdispls[j]..]`
    /// (`MPI_Ialltoallv`; counts and displacements in elements, `size` entries each).
    /// Waiting gives `recv` back with the blocks in place.
    pub fn iall_to_allv<T: Equivalence>(
        &self,
        send: &[T],
        scounts: &[usize],
        sdispls: &[usize],
        recv: Vec<T>,
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<CollRequest<'u, T>> {
        Ok(self
            .plan_iall_to_allv(send, scounts, sdispls, recv, rcounts, rdispls)?
            .start())
    }

    /// The schedule of [`iall_to_allv`](Self::iall_to_allv).
    fn plan_iall_to_allv<T: Equivalence>(
        &self,
        send: &[T],
        scounts: &[usize],
        sdispls: &[usize],
        recv: Vec<T>,
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<Planned<T>> {
        let (sc, sd) = self.byte_blocks::<T>("iall_to_allv", scounts, sdispls, send.len())?;
        let (rc, rd) = self.byte_blocks::<T>("iall_to_allv", rcounts, rdispls, recv.len())?;
        let sched = self.alg().ialltoallv(
            Region::Owned(pack_slice(send)),
            &sc,
            &sd,
            Region::Owned(pack_slice(&recv)),
            &rc,
            &rd,
        )?;
        Ok(Planned {
            sched,
            feed: Some((0, 0)),
            result: 1,
            out: recv,
        })
    }

    /// Starts combining `send` (`size` blocks of equal length) of all ranks element by
    /// element with `op` and scattering the result: rank `i` gets block `i`
    /// (`MPI_Ireduce_scatter_block`). Order and threading of `op` as in
    /// [`iall_reduce`](Self::iall_reduce).
    pub fn ireduce_scatter_block<T, F>(&self, send: &[T], op: F) -> Result<CollRequest<'u, T>>
    where
        T: Equivalence,
        F: Fn(T, T) -> T + Send + 'static,
    {
        let n = self.equal_blocks("ireduce_scatter_block", send.len())?;
        self.ireduce_scatter(send, &vec![n; self.size() as usize], op)
    }

    /// Starts combining `send` of all ranks element by element with `op` and scattering
    /// the result (`MPI_Ireduce_scatter`): waiting gives, on rank `i`, the `counts[i]`
    /// elements after the blocks of ranks `0..i`. `send` holds the sum of `counts`
    /// elements. Order and threading of `op` as in [`iall_reduce`](Self::iall_reduce).
    pub fn ireduce_scatter<T, F>(
        &self,
        send: &[T],
        counts: &[usize],
        op: F,
    ) -> Result<CollRequest<'u, T>>
    where
        T: Equivalence,
        F: Fn(T, T) -> T + Send + 'static,
    {
        let (bytes, at) = self.scatter_blocks::<T>("ireduce_scatter", send.len(), counts)?;
        let n = counts[self.rank() as usize];
        let sched = self.alg().ireduce_scatter(
            pack_slice(send),
            Region::Owned(vec![0u8; n * T::PACKED_SIZE]),
            &bytes,
            owned_op(op),
        )?;
        Ok(CollRequest::start(
            sched,
            0,
            send[at..at + n].to_vec(),
            None,
        ))
    }

    /// Starts an inclusive prefix reduction (`MPI_Iscan`); waiting gives, on rank `i`,
    /// `op(… op(send_0, send_1) …, send_i)` element by element. Order and threading of
    /// `op` as in [`iall_reduce`](Self::iall_reduce).
    pub fn iscan<T, F>(&self, send: &[T], op: F) -> Result<CollRequest<'u, T>>
    where
        T: Equivalence,
        F: Fn(T, T) -> T + Send + 'static,
    {
        Ok(self.plan_iscan(send, op, false)?.start())
    }

    /// Starts an exclusive prefix reduction (`MPI_Iexscan`); waiting gives, on rank
    /// `i > 0`, the reduction of `send` of ranks `0..i`, and an empty vector on rank 0.
    /// Order and threading of `op` as in [`iall_reduce`](Self::iall_reduce).
    pub fn iexclusive_scan<T, F>(&self, send: &[T], op: F) -> Result<CollRequest<'u, T>>
    where
        T: Equivalence,
        F: Fn(T, T) -> T + Send + 'static,
    {
        Ok(self.plan_iscan(send, op, true)?.start())
    }

    /// The length of each of `size` equal blocks of `len` elements.
    fn equal_blocks(&self, what: &str, len: usize) -> Result<usize> {
        let p = self.size() as usize;
        if len % p != 0 {
            return Err(Error::new(
                ErrorClass::Count,
                format!("{what}: {len} elements are not {p} equal blocks"),
            ));
        }
        Ok(len / p)
    }

    /// The schedule of [`iscan`](Self::iscan) (`exclusive`: of
    /// [`iexclusive_scan`](Self::iexclusive_scan)).
    pub(crate) fn plan_iscan<T, F>(&self, send: &[T], op: F, exclusive: bool) -> Result<Planned<T>>
    where
        T: Equivalence,
        F: Fn(T, T) -> T + Send + 'static,
    {
        let (out, template) = if exclusive && self.rank() == 0 {
            (Vec::new(), Vec::new())
        } else {
            (vec![0u8; send.len() * T::PACKED_SIZE], send.to_vec())
        };
        let sched = self.alg().iscan(
            Region::Owned(out),
            pack_slice(send),
            owned_op(op),
            exclusive,
        )?;
        // The schedule's region 1 is the input (region 0 the result).
        Ok(Planned {
            sched,
            feed: Some((1, 0)),
            result: 0,
            out: template,
        })
    }
}

/// The element operation `op(lower, higher)` as a byte operation a schedule owns,
/// combined in rank order (not taken as commutative).
fn owned_op<T, F>(op: F) -> OwnedOp
where
    T: Equivalence,
    F: Fn(T, T) -> T + Send + 'static,
{
    OwnedOp {
        f: Box::new(move |x: &[u8], io: &mut [u8]| byte_op(&op, x, io)),
        elem_size: T::PACKED_SIZE.max(1),
        commutative: false,
    }
}

/// Counts and displacements of `p` consecutive blocks of `block` elements.
fn uniform(p: usize, block: usize) -> (Vec<usize>, Vec<usize>) {
    (vec![block; p], (0..p).map(|i| i * block).collect())
}
