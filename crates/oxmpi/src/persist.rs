//! Persistent collectives (MPI 4.0 `MPI_*_init`): a [`Persistent`] collective is made
//! with its fixed arguments (root, operation) and then started as often as needed, one
//! round at a time, each round with new data. Its schedule (the nonblocking form's, an
//! `oxmpi-coll` `nbc` schedule) is planned once, at the first start (when the length of
//! the data is known), like the C library's `MPI_*_init`: each later start packs the new
//! data into the schedule's input region and restarts it
//! (`oxmpi_coll::nbc::sched::Schedule::restart`); a start with a different length plans
//! anew. A round progresses in the background like any nonblocking collective
//! ([`CollRequest`]). The persistent collective borrows its communicator; dropping it
//! waits for an active round.

use crate::comm::Communicator;
use crate::datatype::{pack_slice, Equivalence};
use crate::error::{Error, ErrorClass, Result};
use crate::icoll::{CollRequest, Keep, Planned};
use std::sync::{Arc, Mutex};

/// How the schedule is planned: the nonblocking form with the fixed arguments and the
/// first round's data.
type Plan<'c, 'u, T> = dyn Fn(&Communicator<'u>, &[T]) -> Result<Planned<T>> + 'c;

/// What stays of the planned schedule between rounds.
struct Kept<T> {
    /// The schedule, back here when a round ends.
    sched: Keep,
    /// Where each round's packed input goes: (region, byte offset).
    feed: Option<(usize, usize)>,
    /// The region of the result and the values it is unpacked into.
    result: usize,
    out: Vec<T>,
    /// Elements of the data the schedule was planned for.
    len: usize,
}

/// A persistent collective on a communicator (`MPI_Barrier_init`, `MPI_Allreduce_init`,
/// ...; made by [`Communicator::all_reduce_init`] and its siblings).
///
/// ```
/// # fn main() -> oxmpi::Result<()> {
/// let universe = oxmpi::init()?;
/// let world = universe.world();
/// let mut sum = world.all_reduce_init(|a: i64, b: i64| a + b);
/// for round in 0..3 {
///     sum.start(&[round, 1])?;
///     // ... other work while the round proceeds ...
///     assert_eq!(sum.wait()?, [round * world.size() as i64, world.size() as i64]);
/// }
/// # Ok(())
/// # }
/// ```
#[must_use = "a persistent collective does nothing until it is started"]
pub struct Persistent<'c, 'u, T: Equivalence> {
    comm: &'c Communicator<'u>,
    plan: Box<Plan<'c, 'u, T>>,
    kept: Option<Kept<T>>,
    round: Option<CollRequest<'u, T>>,
}

impl<'c, 'u, T: Equivalence> Persistent<'c, 'u, T> {
    fn new(
        comm: &'c Communicator<'u>,
        plan: impl Fn(&Communicator<'u>, &[T]) -> Result<Planned<T>> + 'c,
    ) -> Persistent<'c, 'u, T> {
        Persistent {
            comm,
            plan: Box::new(plan),
            kept: None,
            round: None,
        }
    }

    /// Starts a round with `data` (`MPI_Start`): this rank's contribution (its send
    /// buffer; the root's values of a broadcast; empty for a barrier). A round must be
    /// completed before the next starts (else an error of class [`ErrorClass::Request`]).
    /// The first start plans the schedule; later starts with data of the same length
    /// restart it.
    pub fn start(&mut self, data: &[T]) -> Result<()> {
        if self.round.is_some() {
            return Err(Error::new(
                ErrorClass::Request,
                "start of a persistent collective whose round is still active",
            ));
        }
        let kept = match self.kept.take() {
            Some(k) if k.len == data.len() => k,
            _ => {
                let p = (self.plan)(self.comm, data)?;
                let sched: Keep = Arc::new(Mutex::new(None));
                let k = Kept {
                    sched: sched.clone(),
                    feed: p.feed,
                    result: p.result,
                    out: p.out.clone(),
                    len: data.len(),
                };
                self.round = Some(CollRequest::start(p.sched, p.result, p.out, Some(sched)));
                self.kept = Some(k);
                return Ok(());
            }
        };
        let taken = kept.sched.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(mut sched) = taken else {
            return Err(Error::new(
                ErrorClass::Intern,
                "persistent collective: the planned schedule did not come back",
            ));
        };
        let refreshed = refresh(&mut sched, kept.feed, data).and_then(|()| {
            sched.restart()?;
            Ok(())
        });
        if let Err(e) = refreshed {
            *kept.sched.lock().unwrap_or_else(|p| p.into_inner()) = Some(sched);
            self.kept = Some(kept);
            return Err(e);
        }
        self.round = Some(CollRequest::start(
            sched,
            kept.result,
            kept.out.clone(),
            Some(kept.sched.clone()),
        ));
        self.kept = Some(kept);
        Ok(())
    }
    /// Whether a round is active (started and not completed).
    pub fn is_active(&self) -> bool {
        self.round.is_some()
    }

    /// Waits for the active round (`MPI_Wait`) and gives its result (as the nonblocking
    /// form's); the collective stays, inactive. Without an active round: an error of class
    /// [`ErrorClass::Request`].
    pub fn wait(&mut self) -> Result<Vec<T>> {
        match self.round.take() {
            Some(r) => r.wait(),
            None => Err(Error::new(
                ErrorClass::Request,
                "wait on a persistent collective that was not started",
            )),
        }
    }

    /// The round's result if it has completed (`MPI_Test`), `None` while it runs.
    pub fn test(&mut self) -> Result<Option<Vec<T>>> {
        let Some(r) = self.round.take() else {
            return Err(Error::new(
                ErrorClass::Request,
                "test on a persistent collective that was not started",
            ));
        };
        match r.test() {
            Ok(result) => result.map(Some),
            Err(r) => {
                self.round = Some(r);
                Ok(None)
            }
        }
    }
}

impl<'u> Communicator<'u> {
    /// A persistent barrier (`MPI_Barrier_init`); start it with an empty slice.
    pub fn barrier_init(&self) -> Persistent<'_, 'u, u8> {
        Persistent::new(self, |c, _| c.plan_ibarrier())
    }

    /// A persistent broadcast from `root` (`MPI_Bcast_init`): each round starts with the
    /// root's values (other ranks pass as many placeholders) and gives them to every rank.
    pub fn broadcast_init<T: Equivalence>(&self, root: i32) -> Result<Persistent<'_, 'u, T>> {
        self.check_root(root)?;
        Ok(Persistent::new(self, move |c, d| {
            c.plan_ibroadcast(root, d.to_vec())
        }))
    }

    /// A persistent all-reduce with `op` (`MPI_Allreduce_init`; `op` as in
    /// [`iall_reduce`](Self::iall_reduce)).
    pub fn all_reduce_init<T, F>(&self, op: F) -> Persistent<'_, 'u, T>
    where
        T: Equivalence,
        F: Fn(T, T) -> T + Send + Clone + 'static,
    {
        Persistent::new(self, move |c, d| c.plan_iall_reduce(d, op.clone()))
    }

    /// A persistent reduction to `root` with `op` (`MPI_Reduce_init`).
    pub fn reduce_init<T, F>(&self, root: i32, op: F) -> Result<Persistent<'_, 'u, T>>
    where
        T: Equivalence,
        F: Fn(T, T) -> T + Send + Clone + 'static,
    {
        self.check_root(root)?;
        Ok(Persistent::new(self, move |c, d| {
            c.plan_ireduce(root, d, op.clone())
        }))
    }

    /// A persistent gather at `root` (`MPI_Gather_init`).
    pub fn gather_init<T: Equivalence>(&self, root: i32) -> Result<Persistent<'_, 'u, T>> {
        self.check_root(root)?;
        Ok(Persistent::new(self, move |c, d| c.plan_igather(root, d)))
    }

    /// A persistent all-gather (`MPI_Allgather_init`).
    pub fn all_gather_init<T: Equivalence>(&self) -> Persistent<'_, 'u, T> {
        Persistent::new(self, |c, d| c.plan_iall_gather(d))
    }

    /// A persistent all-to-all (`MPI_Alltoall_init`).
    pub fn all_to_all_init<T: Equivalence>(&self) -> Persistent<'_, 'u, T> {
        Persistent::new(self, |c, d| c.plan_iall_to_all(d))
    }

    /// A persistent inclusive scan with `op` (`MPI_Scan_init`).
    pub fn scan_init<T, F>(&self, op: F) -> Persistent<'_, 'u, T>
    where
        T: Equivalence,
        F: Fn(T, T) -> T + Send + Clone + 'static,
    {
        Persistent::new(self, move |c, d| c.plan_iscan(d, op.clone(), false))
    }
}

/// Put a round's `data`, packed, where the planned schedule takes its input.
fn refresh<T: Equivalence>(
    sched: &mut oxmpi_coll::sched::Schedule,
    feed: Option<(usize, usize)>,
    data: &[T],
) -> Result<()> {
    let Some((region, at)) = feed else {
        return Ok(());
    };
    let bytes = pack_slice(data);
    let place = sched
        .owned_bytes_mut(region)
        .and_then(|r| r.get_mut(at..at + bytes.len()));
    match place {
        Some(p) => {
            p.copy_from_slice(&bytes);
            Ok(())
        }
        None => Err(Error::new(
            ErrorClass::Intern,
            format!(
                "persistent collective: no room for {} input bytes in its schedule",
                bytes.len()
            ),
        )),
    }
}
