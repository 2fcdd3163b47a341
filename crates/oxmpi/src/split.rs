//! New communicators: [`Communicator::dup`] and [`Communicator::split`], and the context ids
//! they take (`oxmpi_engine::ctxid`, reused once freed, as in the C library).

use std::sync::{Mutex, MutexGuard, PoisonError};

use oxmpi_engine::ctxid::{self, Ids};
use oxmpi_engine::{CommId, Engine};

use crate::comm::Communicator;
use crate::error::{Error, ErrorClass, Result};

/// This process's context ids (0–3 are world's, self's and their collective contexts;
/// a communicator takes a pair, its own and its collective context's).
static IDS: Mutex<Ids> = Mutex::new(Ids::new());

fn ids() -> MutexGuard<'static, Ids> {
    IDS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A communicator created by [`Communicator::dup`] or [`Communicator::split`]; it is freed
/// (`MPI_Comm_free`) when dropped. It dereferences to [`Communicator`].
///
/// Copies of the inner [`Communicator`] that outlive it get [`crate::ErrorClass::Comm`]
/// errors.
pub struct OwnedCommunicator<'u> {
    comm: Communicator<'u>,
    /// Its first context id (the pair is returned when it is dropped).
    ctx: u32,
}

impl<'u> std::ops::Deref for OwnedCommunicator<'u> {
    type Target = Communicator<'u>;
    fn deref(&self) -> &Communicator<'u> {
        &self.comm
    }
}

impl std::fmt::Debug for OwnedCommunicator<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.comm.fmt(f)
    }
}

impl Drop for OwnedCommunicator<'_> {
    fn drop(&mut self) {
        let (engine, id, coll) = self.comm.parts();
        let _ = engine.comm_free(id);
        let _ = engine.comm_free(coll);
        release(engine, self.ctx);
    }
}

/// This process's proposal for a new communicator's context ids ([`Ids::propose`]), the
/// parked ids of dropped communicators released first if the engine finds them idle.
fn proposal(engine: &Engine) -> u32 {
    let parked = ids().take_parked();
    if !parked.is_empty() {
        let checked = parked
            .into_iter()
            .map(|(c, n)| ((c, n), engine.contexts_idle(c, n)))
            .collect();
        ids().settle(checked);
    }
    ids().propose(0)
}

/// Whether the members' largest proposal `agreed` leaves no pair below the limit: then the
/// members agree by their masks of free pairs instead ([`free_mask`], [`pick`]). Every
/// member gets the same `agreed` and limit, so all of them take the same way.
fn past_limit(engine: &Engine, agreed: u32) -> bool {
    agreed.saturating_add(2) > engine.user_context_limit()
}

/// This process's pairs free below the limit, one bit each ([`Ids::free_mask`]); the
/// same length at every member.
fn free_mask(engine: &Engine) -> Vec<u64> {
    let limit = engine.user_context_limit().min(ctxid::MASK_LIMIT);
    ids().free_mask(0, limit)
}

/// The lowest pair set in `mask` (the AND of every member's [`free_mask`]), or the error
/// that none is free at every member.
fn pick(engine: &Engine, mask: &[u64]) -> Result<u32> {
    ctxid::pick(mask, 2).ok_or_else(|| {
        Error::new(
            ErrorClass::Other,
            format!(
                "out of context ids: no pair below {} is free at every member ({} held \
                 here; drop communicators no longer needed)",
                engine.user_context_limit(),
                ids().count()
            ),
        )
    })
}

/// Takes the pair from `ctx`, agreed by every member of a new communicator.
fn claim(ctx: u32) -> Result<()> {
    if ids().reserve(ctx, 2) {
        return Ok(());
    }
    Err(Error::new(
        ErrorClass::Comm,
        format!(
            "context ids {ctx} and {} are already taken here: communicators are being \
             created by several threads at once",
            ctx + 1
        ),
    ))
}

/// Words combined element by element over the members of a new communicator, the result
/// at every member (an allreduce, or a gather and broadcast through a leader).
pub(crate) type Combine<'a> =
    &'a mut dyn FnMut(&[u64], &dyn Fn(u64, u64) -> u64) -> Result<Vec<u64>>;

/// Agrees with the members, through `combine`, on a pair of context ids free at every one
/// of them (the maximum of their proposals, or past the limit the lowest pair free at all by
/// the AND of their masks), and takes it here.
pub(crate) fn agree(engine: &Engine, combine: Combine<'_>) -> Result<u32> {
    let max = combine(&[u64::from(proposal(engine))], &u64::max)?[0];
    let mut ctx = u32::try_from(max).unwrap_or(u32::MAX);
    if past_limit(engine, ctx) {
        let and = combine(&free_mask(engine), &|a, b| a & b)?;
        ctx = pick(engine, &and)?;
    }
    claim(ctx)?;
    Ok(ctx)
}

/// Returns the pair from `ctx` of a dropped communicator: at once if the engine finds it
/// idle, else once what is pending on it is done ([`proposal`] checks again).
fn release(engine: &Engine, ctx: u32) {
    if engine.contexts_idle(ctx, 2) {
        ids().release(ctx, 2);
    } else {
        ids().park(ctx, 2);
    }
}

/// Creates the communicator `ctx` (and its collective context `ctx + 1`) over `group`
/// (world ranks).
pub(crate) fn create_over<'u>(
    engine: &'static oxmpi_engine::Engine,
    ctx: u32,
    group: Vec<i32>,
) -> Result<OwnedCommunicator<'u>> {
    let made = (|| {
        let id = engine.comm_create(ctx, group.clone())?;
        let coll = match engine.comm_create(ctx + 1, group) {
            Ok(c) => c,
            Err(e) => {
                let _ = engine.comm_free(id);
                return Err(e.into());
            }
        };
        Communicator::new(engine, id, coll).inspect_err(|_| {
            let _ = engine.comm_free(id);
            let _ = engine.comm_free(coll);
        })
    })();
    match made {
        Ok(comm) => Ok(OwnedCommunicator { comm, ctx }),
        Err(e) => {
            release(engine, ctx);
            Err(e)
        }
    }
}

impl<'u> Communicator<'u> {
    /// Agrees with all ranks of `self` on a pair of context ids free at every one of them
    /// (the maximum of their proposals, or past the limit the lowest pair free at all by
    /// the AND of their masks), and takes it here.
    fn agree_on_context(&self) -> Result<u32> {
        let (engine, _, _) = self.parts();
        agree(engine, &mut |mine, f| {
            let mut all = vec![0u64; mine.len()];
            self.all_reduce(mine, &mut all[..], f)?;
            Ok(all)
        })
    }

    /// Creates the communicator (and its collective context) over `group` (world ranks).
    fn create(&self, ctx: u32, group: Vec<i32>) -> Result<OwnedCommunicator<'u>> {
        let (engine, _, _) = self.parts();
        create_over(engine, ctx, group)
    }

    /// A new communicator with the same ranks and a separate message space (`MPI_Comm_dup`).
    /// Collective: every rank of `self` must call it. As in MPI, threads must not create
    /// communicators concurrently (a clash is reported as an [`ErrorClass::Comm`] error).
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let universe = oxmpi::init()?;
    /// let world = universe.world();
    /// let lib = world.dup()?;
    /// assert_eq!((lib.rank(), lib.size()), (world.rank(), world.size()));
    /// // Messages on `lib` never match receives on `world`.
    /// lib.send(&[1u8][..], lib.rank(), 0)?;
    /// assert!(world.iprobe(oxmpi::ANY_SOURCE, oxmpi::ANY_TAG)?.is_none());
    /// let mut b = [0u8];
    /// lib.recv(&mut b[..], lib.rank(), 0)?;
    /// # Ok(())
    /// # }
    /// ```
    pub fn dup(&self) -> Result<OwnedCommunicator<'u>> {
        let ctx = self.agree_on_context()?;
        let (engine, id, _) = self.parts();
        let group = engine.comm_group(id)?;
        self.create(ctx, group)
    }

    /// Splits the communicator by `color` (`MPI_Comm_split`): ranks with the same color form
    /// a new communicator, ordered by `key` and then by their rank here. A negative color
    /// (`MPI_UNDEFINED`) gives `None`. Collective: every rank of `self` must call it.
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let universe = oxmpi::init()?;
    /// let world = universe.world();
    /// let half = world.split(world.rank() % 2, 0)?.expect("a non-negative color");
    /// assert_eq!(half.rank(), world.rank() / 2);
    /// assert!(world.split(-1, 0)?.is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn split(&self, color: i32, key: i32) -> Result<Option<OwnedCommunicator<'u>>> {
        let mut all = vec![[0i32; 3]; self.size() as usize];
        self.all_gather(&[[color, key, self.rank()]][..], &mut all[..])?;
        let ctx = self.agree_on_context()?;
        if color < 0 {
            ids().release(ctx, 2);
            return Ok(None);
        }
        let (engine, id, _) = self.parts();
        let parent_group = engine.comm_group(id)?;
        let mut members: Vec<[i32; 3]> = all.into_iter().filter(|m| m[0] == color).collect();
        members.sort_by_key(|m| (m[1], m[2]));
        let group = members
            .iter()
            .map(|m| {
                usize::try_from(m[2])
                    .ok()
                    .and_then(|r| parent_group.get(r).copied())
                    .ok_or_else(|| {
                        Error::new(
                            ErrorClass::Intern,
                            format!("split: rank {} reported by a peer is not a member", m[2]),
                        )
                    })
            })
            .collect::<Result<Vec<i32>>>()?;
        self.create(ctx, group).map(Some)
    }
}

/// The engine handles of a communicator (for this module).
impl Communicator<'_> {
    pub(crate) fn parts(&self) -> (&'static oxmpi_engine::Engine, CommId, CommId) {
        (self.engine_ref(), self.id(), self.coll_id())
    }
}
