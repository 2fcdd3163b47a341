//! Sessions (MPI 4.0 §11.3, the Sessions Model): [`Session`], process sets, [`Group`] and
//! communicators made from groups.
//!
//! A session is a handle on the library that needs no [`crate::Universe`]: it names the
//! process sets (`mpi://WORLD`, `mpi://SELF`, and `mpix://SHARED`, the processes of this
//! node, as Open MPI and the C library name it), turns one into a [`Group`], and makes a
//! communicator from a group ([`Session::comm_from_group`], collective over the group's
//! members only). Several sessions live side by side and next to the World Model
//! ([`crate::init`]); the first of them brings the library up.
//!
//! Dropping (or [`Session::finalize`]) a session leaves the library up, so that a later
//! [`Session::init`] works again, as MPI allows; the library goes down when the
//! [`crate::Universe`] does, or, in a program that used sessions only, when the process
//! exits normally (an `atexit` hook: finalizing synchronizes with every rank, so it is
//! skipped when a session was dropped while its thread panicked).

use std::sync::{Mutex, MutexGuard};

use oxmpi_engine::{CommId, Engine, ErrorClass, ThreadLevel};

use crate::comm::Communicator;
use crate::error::{Error, Result};
use crate::split::OwnedCommunicator;

/// The process sets every session offers (MPI names them `mpi://`; `mpix://SHARED` is the
/// set of processes on this node).
pub const PSETS: [&str; 3] = ["mpi://WORLD", "mpi://SELF", "mpix://SHARED"];

/// Tag of the context agreement of [`Session::comm_from_group`] on world's collective
/// context, plus 20 bits of the string tag's hash (below the nonblocking collectives' tags,
/// above the blocking ones').
const TAG_FROM_GROUP: i32 = 1 << 20;

/// The library once started: the engine and the collective contexts of world and self.
#[derive(Clone, Copy)]
pub(crate) struct Up {
    pub(crate) engine: &'static Engine,
    pub(crate) world_coll: CommId,
    pub(crate) self_coll: CommId,
}

/// Who uses the library (one per process, behind [`LIB`]).
struct Lib {
    /// Set by the first of [`crate::init_thread`] and [`Session::init`].
    up: Option<Up>,
    /// Live sessions.
    sessions: usize,
    /// A [`crate::Universe`] is alive.
    universe: bool,
    /// The library was finalized, or the World Model ended (no new session after that).
    done: bool,
    /// A session was dropped while its thread panicked: the exit hook must not finalize
    /// (the other ranks may be blocked on this one).
    poisoned: bool,
}

static LIB: Mutex<Lib> = Mutex::new(Lib {
    up: None,
    sessions: 0,
    universe: false,
    done: false,
    poisoned: false,
});

fn lib() -> MutexGuard<'static, Lib> {
    LIB.lock().unwrap_or_else(|p| p.into_inner())
}

/// Brings the library up unless a session or the universe did already.
fn start(l: &mut Lib, required: ThreadLevel) -> Result<Up> {
    if l.done {
        return Err(Error::new(
            ErrorClass::Other,
            "MPI is finalized in this process: no new session or universe after that",
        ));
    }
    if let Some(up) = l.up {
        return Ok(up);
    }
    // `Communicator` is `Sync`: safe code may call from several threads at any level, so
    // the engine's lock is atomic from the start (never the one-thread plain lock).
    oxmpi_engine::expect_threads("the Rust API, whose handles are Send + Sync");
    let engine = oxmpi_engine::init(required)?;
    let world_group = engine.comm_group(engine.comm_world())?;
    let world_coll = engine.comm_create(crate::coll::WORLD_COLL_CTX, world_group)?;
    let self_coll = engine.comm_create(crate::coll::SELF_COLL_CTX, vec![engine.rank()])?;
    let up = Up {
        engine,
        world_coll,
        self_coll,
    };
    l.up = Some(up);
    Ok(up)
}

/// Finalizes the library (once).
fn finish(l: &mut Lib) -> Result<()> {
    l.done = true;
    match l.up.take() {
        Some(up) => Ok(up.engine.finalize()?),
        None => Ok(()),
    }
}

/// The World Model starts (for [`crate::init_thread`]).
pub(crate) fn start_world(required: ThreadLevel) -> Result<Up> {
    let mut l = lib();
    let up = start(&mut l, required)?;
    l.universe = true;
    Ok(up)
}

/// The World Model ends (the universe is finalized or dropped): the library goes down now,
/// or with the last session; not at all while `panicking`.
pub(crate) fn end_world(panicking: bool) -> Result<()> {
    let mut l = lib();
    l.universe = false;
    l.poisoned |= panicking;
    if l.sessions > 0 {
        l.done = true; // the last session finalizes
        return Ok(());
    }
    if panicking {
        l.done = true;
        return Ok(());
    }
    finish(&mut l)
}

/// At exit: take the library down if only sessions used it.
extern "C" fn finalize_at_exit() {
    let mut l = lib();
    if l.up.is_some() && !l.universe && !l.done && !l.poisoned {
        let _ = finish(&mut l);
    }
}

/// An MPI session (`MPI_Session`): a handle on the library without the World Model.
///
/// ```
/// # fn main() -> oxmpi::Result<()> {
/// use oxmpi::session::{Session, PSETS};
///
/// let session = Session::init(oxmpi::ThreadLevel::Single)?;
/// assert_eq!(session.pset_names(), PSETS);
/// let world = session.group_from_pset("mpi://WORLD")?;
/// let comm = session.comm_from_group(&world, "org.example.solver")?;
/// assert_eq!((comm.rank(), comm.size()), (0, 1)); // a singleton here
/// let mut sum = [0u32];
/// comm.all_reduce(&[comm.rank() as u32 + 1][..], &mut sum[..], |a, b| a + b)?;
/// assert_eq!(sum[0], 1);
/// drop(comm);
/// session.finalize()?;
/// // The library stays up: a new session works.
/// let again = Session::init(oxmpi::ThreadLevel::Single)?;
/// assert_eq!(again.pset_size("mpi://SELF")?, 1);
/// # Ok(())
/// # }
/// ```
pub struct Session {
    up: Up,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("rank", &self.up.engine.rank())
            .field("thread_level", &self.thread_level())
            .finish()
    }
}

impl Session {
    /// Starts a session asking for thread support `required` (`MPI_Session_init` with the
    /// `thread_level` info key). The first session (or [`crate::init_thread`]) fixes the
    /// process's level; [`Session::thread_level`] says which one it got.
    ///
    /// Fails with [`ErrorClass::Other`] once the World Model has ended or the library was
    /// finalized.
    pub fn init(required: ThreadLevel) -> Result<Session> {
        let mut l = lib();
        let first = l.up.is_none();
        let up = start(&mut l, required)?;
        l.sessions += 1;
        drop(l);
        if first {
            crate::sys::at_exit(finalize_at_exit);
        }
        Ok(Session { up })
    }

    /// The thread support level of the library (`thread_level` of `MPI_Session_get_info`).
    pub fn thread_level(&self) -> ThreadLevel {
        self.up.engine.thread_level()
    }

    /// The names of the process sets (`MPI_Session_get_num_psets`,
    /// `MPI_Session_get_nth_pset`).
    pub fn pset_names(&self) -> &'static [&'static str] {
        &PSETS
    }

    /// The members of process set `name`, as world ranks.
    fn pset(&self, name: &str) -> Result<Vec<i32>> {
        let e = self.up.engine;
        match name {
            "mpi://WORLD" => Ok((0..e.size()).collect()),
            "mpi://SELF" => Ok(vec![e.rank()]),
            "mpix://SHARED" => Ok((0..e.size()).filter(|&r| e.node_pid(r).is_some()).collect()),
            _ => Err(Error::new(
                ErrorClass::Arg,
                format!(
                    "unknown process set '{name}' (this library has {})",
                    PSETS.join(", ")
                ),
            )),
        }
    }

    /// The number of processes in set `name` (`mpi_size` of `MPI_Session_get_pset_info`);
    /// an unknown name is an [`ErrorClass::Arg`] error.
    pub fn pset_size(&self, name: &str) -> Result<usize> {
        Ok(self.pset(name)?.len())
    }

    /// The group of process set `name` (`MPI_Group_from_session_pset`); an unknown name is
    /// an [`ErrorClass::Arg`] error.
    pub fn group_from_pset(&self, name: &str) -> Result<Group> {
        Ok(Group::new(self.up.engine.rank(), self.pset(name)?))
    }

    /// A new communicator over `group` (`MPI_Comm_create_from_group`). Collective over the
    /// members of `group` only, which must all pass the same `tag`: concurrent creations
    /// over overlapping groups are told apart by it (as MPI asks, a string such as
    /// `"org.example.lib"`). The caller must be a member ([`ErrorClass::Group`] otherwise).
    /// The communicator borrows the session and is freed when dropped.
    pub fn comm_from_group(&self, group: &Group, tag: &str) -> Result<OwnedCommunicator<'_>> {
        let Some(me) = group.rank() else {
            return Err(Error::new(
                ErrorClass::Group,
                "comm_from_group: the calling process is not a member of the group",
            ));
        };
        // The members agree on a context through the group's first member, over world's
        // collective context (a message space no user receive can match).
        let e = self.up.engine;
        let world: Communicator<'_> = Communicator::new(e, self.up.world_coll, self.up.world_coll)?;
        let t = TAG_FROM_GROUP | (string_tag(tag) & 0xf_ffff);
        let leader = group.members[0];
        let others = &group.members[1..];
        // The leader combines the members' words and sends the result back.
        let agreed = crate::split::agree(e, &mut |mine, f| {
            let mut acc = mine.to_vec();
            if me == 0 {
                let mut x = vec![0u64; acc.len()];
                for &w in others {
                    world.recv(&mut x[..], w, t)?;
                    for (a, &b) in acc.iter_mut().zip(&x) {
                        *a = f(*a, b);
                    }
                }
                for &w in others {
                    world.send(&acc[..], w, t)?;
                }
            } else {
                world.send(mine, leader, t)?;
                world.recv(&mut acc[..], leader, t)?;
            }
            Ok(acc)
        })?;
        crate::split::create_over(e, agreed, group.members.clone())
    }

    /// Ends the session (`MPI_Session_finalize`); dropping it does the same. Communicators
    /// made from it are gone before (they borrow it). The library stays up unless the World
    /// Model has already ended and this was the last session.
    pub fn finalize(self) -> Result<()> {
        std::mem::forget(self);
        leave(false)
    }
}

/// A session goes away.
fn leave(panicking: bool) -> Result<()> {
    let mut l = lib();
    l.sessions = l.sessions.saturating_sub(1);
    l.poisoned |= panicking;
    if l.sessions == 0 && l.done && !l.universe && l.up.is_some() && !l.poisoned {
        return finish(&mut l);
    }
    Ok(())
}

impl Drop for Session {
    fn drop(&mut self) {
        let _ = leave(std::thread::panicking());
    }
}

/// The 64-bit FNV-1a hash of a string tag, folded to a non-negative `i32`.
fn string_tag(tag: &str) -> i32 {
    let h = tag.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    (h % (1 << 29)) as i32
}

/// A group of processes (`MPI_Group`): world ranks in group order, and this process's rank
/// in the group if it is a member. Made by [`Session::group_from_pset`]; narrowed with
/// [`Group::incl`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Group {
    members: Vec<i32>,
    rank: Option<i32>,
}

impl Group {
    fn new(me: i32, members: Vec<i32>) -> Group {
        let rank = members.iter().position(|&w| w == me).map(|i| i as i32);
        Group { members, rank }
    }

    /// The number of processes (`MPI_Group_size`).
    pub fn size(&self) -> i32 {
        self.members.len() as i32
    }

    /// This process's rank in the group, `None` if it is not a member (`MPI_Group_rank`,
    /// `MPI_UNDEFINED`).
    pub fn rank(&self) -> Option<i32> {
        self.rank
    }

    /// The members' ranks in the world process set, in group order.
    pub fn world_ranks(&self) -> &[i32] {
        &self.members
    }

    /// The group of the members at `ranks`, in that order (`MPI_Group_incl`); a rank out
    /// of range or given twice is an [`ErrorClass::Rank`] error.
    ///
    /// ```
    /// # fn main() -> oxmpi::Result<()> {
    /// let session = oxmpi::session::Session::init(oxmpi::ThreadLevel::Single)?;
    /// let world = session.group_from_pset("mpi://WORLD")?;
    /// assert_eq!(world.incl(&[0])?.size(), 1);
    /// assert_eq!(world.incl(&[5]).unwrap_err().class(), oxmpi::ErrorClass::Rank);
    /// # Ok(())
    /// # }
    /// ```
    pub fn incl(&self, ranks: &[i32]) -> Result<Group> {
        let mut members = Vec::with_capacity(ranks.len());
        for (i, &r) in ranks.iter().enumerate() {
            let Some(&w) = usize::try_from(r).ok().and_then(|k| self.members.get(k)) else {
                return Err(Error::new(
                    ErrorClass::Rank,
                    format!(
                        "group incl: rank {r} out of range (group of {})",
                        self.size()
                    ),
                ));
            };
            if ranks[..i].contains(&r) {
                return Err(Error::new(
                    ErrorClass::Rank,
                    format!("group incl: rank {r} given twice"),
                ));
            }
            members.push(w);
        }
        let me = self.rank.map(|k| self.members[k as usize]).unwrap_or(-1);
        Ok(Group::new(me, members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_tags_hash_into_the_tag_range() {
        let a = string_tag("org.example.a");
        assert_ne!(a, string_tag("org.example.b"));
        assert_eq!(a, string_tag("org.example.a"));
        assert!((0..1 << 29).contains(&a));
        assert!(TAG_FROM_GROUP | (a & 0xf_ffff) < oxmpi_engine::TAG_UB);
    }

    #[test]
    fn groups_know_our_rank_and_narrow() {
        let g = Group::new(2, vec![0, 1, 2, 3]);
        assert_eq!((g.size(), g.rank()), (4, Some(2)));
        let h = g.incl(&[3, 2]).unwrap();
        assert_eq!((h.world_ranks(), h.rank()), (&[3, 2][..], Some(1)));
        assert_eq!(g.incl(&[0, 1]).unwrap().rank(), None);
        assert_eq!(g.incl(&[4]).unwrap_err().class(), ErrorClass::Rank);
        assert_eq!(g.incl(&[-1]).unwrap_err().class(), ErrorClass::Rank);
        assert_eq!(g.incl(&[1, 1]).unwrap_err().class(), ErrorClass::Rank);
        let outside = Group::new(7, vec![0, 1]);
        assert_eq!(outside.incl(&[1]).unwrap().rank(), None);
    }
}
