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

/// A started nonblocking collective ([`ibarrier`](Communicator::ibarrier),
/// [`ibroadcast`](Communicator::ibroadcast), [`iall_reduce`](Communicator::iall_reduce)):
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

impl<'u, T: Equivalence> CollRequest<'u, T> {
    /// Starts `sched` (its region 0 holds the packed result at the end); the result is
    /// unpacked into `out`.
    fn start(sched: Schedule, out: Vec<T>) -> CollRequest<'u, T> {
        let slot = Arc::new(Slot::default());
        let s2 = slot.clone();
        progress::start(
            sched,
            Box::new(move |s, r| {
                let v = r
                    .map(|()| s.owned_bytes(0).map(<[u8]>::to_vec).unwrap_or_default())
                    .map_err(Error::from);
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
        Ok(CollRequest::start(self.alg().ibarrier()?, Vec::new()))
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
        self.check_root(root)?;
        let bytes = pack_slice(&buf);
        let sched = self.alg().ibcast(Region::Owned(bytes), root)?;
        Ok(CollRequest::start(sched, buf))
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
        let f = move |x: &[u8], io: &mut [u8]| byte_op(&op, x, io);
        let op = OwnedOp {
            f: Box::new(f),
            elem_size: T::PACKED_SIZE.max(1),
            commutative: false,
        };
        let sched = self.alg().iallreduce(Region::Owned(pack_slice(send)), op)?;
        Ok(CollRequest::start(sched, send.to_vec()))
    }
}
