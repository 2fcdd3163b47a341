//! New communicators: [`Communicator::dup`] and [`Communicator::split`].

use std::sync::atomic::{AtomicU32, Ordering};

use oxmpi_engine::CommId;

use crate::comm::Communicator;
use crate::error::{Error, ErrorClass, Result};

/// Lowest context id handed out here (0–3 are world, self and their collective contexts).
const FIRST_CTX: u32 = 16;

/// Next context id this process may use (grows by 2: a communicator and its collective
/// context).
static NEXT_CTX: AtomicU32 = AtomicU32::new(FIRST_CTX);

/// A communicator created by [`Communicator::dup`] or [`Communicator::split`]; it is freed
/// (`MPI_Comm_free`) when dropped. It dereferences to [`Communicator`].
///
/// Copies of the inner [`Communicator`] that outlive it get [`crate::ErrorClass::Comm`]
/// errors.
pub struct OwnedCommunicator<'u> {
    comm: Communicator<'u>,
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
    }
}

/// The next context id this process may use (what it offers to an agreement).
pub(crate) fn next_context() -> u32 {
    NEXT_CTX.load(Ordering::SeqCst)
}

/// Reserves context ids `ctx` and `ctx + 1`, agreed by every member of a new communicator.
pub(crate) fn claim_context(ctx: u32) {
    NEXT_CTX.fetch_max(ctx + 2, Ordering::SeqCst);
}

/// Creates the communicator `ctx` (and its collective context `ctx + 1`) over `group`
/// (world ranks).
pub(crate) fn create_over<'u>(
    engine: &'static oxmpi_engine::Engine,
    ctx: u32,
    group: Vec<i32>,
) -> Result<OwnedCommunicator<'u>> {
    let id = engine.comm_create(ctx, group.clone())?;
    let coll = match engine.comm_create(ctx + 1, group) {
        Ok(c) => c,
        Err(e) => {
            let _ = engine.comm_free(id);
            return Err(e.into());
        }
    };
    let comm = match Communicator::new(engine, id, coll) {
        Ok(c) => c,
        Err(e) => {
            let _ = engine.comm_free(id);
            let _ = engine.comm_free(coll);
            return Err(e);
        }
    };
    Ok(OwnedCommunicator { comm })
}

impl<'u> Communicator<'u> {
    /// Agrees with all ranks of `self` on a context id unused by every one of them (the
    /// maximum of their next free ids), and reserves it and the next one locally.
    fn agree_on_context(&self) -> Result<u32> {
        let mine = next_context();
        let mut agreed = [0u32];
        self.all_reduce(&[mine][..], &mut agreed[..], u32::max)?;
        claim_context(agreed[0]);
        Ok(agreed[0])
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
