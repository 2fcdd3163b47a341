//! The collective context of a communicator ([`CollComm`]): its hidden shadow
//! communicator, and the construction of new communicators (context id agreement).

use super::helpers::Op;
use oxmpi_engine::{CommId, Engine, Error, ErrorClass};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

/// Bit set in the context id of the hidden collective communicator.
pub const COLL_BIT: u32 = 1 << 31;

/// Tag of the context agreement of `create_group` (plus the caller's tag).
pub(crate) const TAG_CREATE_GROUP: i32 = 1 << 20;

/// Result type of this crate (errors are the engine's, with an MPI error class).
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn arg_err(class: ErrorClass, msg: impl Into<String>) -> Error {
    Error::Arg {
        class,
        msg: msg.into(),
    }
}

/// Shadow communicators, by user communicator.
static SHADOWS: Mutex<Option<HashMap<CommId, CommId>>> = Mutex::new(None);
/// Next context id this process has not used.
static NEXT_CTX: AtomicU32 = AtomicU32::new(2);

/// A communicator ready for collectives: the user communicator and its hidden shadow.
#[derive(Clone, Copy, Debug)]
pub struct CollComm {
    /// The engine.
    pub(crate) e: &'static Engine,
    /// The user communicator.
    pub comm: CommId,
    /// The engine communicator the collective traffic travels on.
    pub(crate) shadow: CommId,
    /// Our rank.
    pub rank: i32,
    /// Number of members.
    pub size: i32,
}

/// Removes the shadow of `comm` (call before or after freeing `comm` in the engine).
pub fn release(e: &Engine, comm: CommId) -> Result<()> {
    let shadow = SHADOWS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_mut()
        .and_then(|m| m.remove(&comm));
    match shadow {
        Some(s) => e.comm_free(s),
        None => Ok(()),
    }
}

/// Frees a communicator created by this crate together with its shadow.
pub fn comm_free(e: &Engine, comm: CommId) -> Result<()> {
    release(e, comm)?;
    e.comm_free(comm)
}

impl CollComm {
    /// The engine communicator the collective traffic travels on (tests look there for
    /// messages that no collective took).
    pub fn traffic(&self) -> CommId {
        self.shadow
    }

    /// The collective view of `comm` (creates its shadow on first use).
    pub fn new(e: &'static Engine, comm: CommId) -> Result<CollComm> {
        let rank = e.comm_rank(comm)?;
        let size = e.comm_size(comm)?;
        let mut g = SHADOWS.lock().unwrap_or_else(|p| p.into_inner());
        let map = g.get_or_insert_with(HashMap::new);
        let shadow = match map.get(&comm) {
            Some(&s) => s,
            None => {
                let ctx = e.comm_context(comm)?;
                if ctx & COLL_BIT != 0 {
                    return Err(arg_err(
                        ErrorClass::Comm,
                        format!("context id {ctx:#x} has the collective bit set"),
                    ));
                }
                let s = e.comm_create(ctx | COLL_BIT, e.comm_group(comm)?)?;
                map.insert(comm, s);
                s
            }
        };
        Ok(CollComm {
            e,
            comm,
            shadow,
            rank,
            size,
        })
    }

    /// The collective view of `comm` whose collective traffic travels on `traffic`, an
    /// engine communicator over the same group that the caller dedicates to collectives
    /// (e.g. the C ABI's per-communicator collective context). No shadow is created.
    pub fn on_context(e: &'static Engine, comm: CommId, traffic: CommId) -> Result<CollComm> {
        let rank = e.comm_rank(traffic)?;
        let size = e.comm_size(traffic)?;
        Ok(CollComm {
            e,
            comm,
            shadow: traffic,
            rank,
            size,
        })
    }

    /// Like [`CollComm::on_context`] with our `rank` in `traffic` and its `size` already
    /// known by the caller (no engine call: the small-message fast path).
    pub fn on_context_known(
        e: &'static Engine,
        comm: CommId,
        traffic: CommId,
        rank: i32,
        size: i32,
    ) -> CollComm {
        CollComm {
            e,
            comm,
            shadow: traffic,
            rank,
            size,
        }
    }
}

impl CollComm {
    // ---- communicator construction ----

    pub(crate) fn agree_context(&self) -> Result<u32> {
        let mine = NEXT_CTX.load(Ordering::SeqCst);
        let mut b = mine.to_le_bytes();
        let max = |a: &[u8], io: &mut [u8]| {
            let x = u32::from_le_bytes(a.try_into().expect("4 bytes"));
            let y = u32::from_le_bytes((&*io).try_into().expect("4 bytes"));
            io.copy_from_slice(&x.max(y).to_le_bytes());
        };
        self.allreduce_recdbl(
            &mut b,
            &Op {
                f: &max,
                elem_size: 4,
                commutative: true,
            },
            true,
        )?;
        let ctx = u32::from_le_bytes(b);
        claim_context(ctx)
    }

    /// `MPI_Comm_dup`: a new communicator over the same group (collective).
    pub fn dup(&self) -> Result<CommId> {
        let ctx = self.agree_context()?;
        self.e.comm_create(ctx, self.e.comm_group(self.comm)?)
    }

    /// `MPI_Comm_split` (collective): members with the same `color` (≥ 0) form a new
    /// communicator, ranked by `(key, old rank)`; `color == None` (`MPI_UNDEFINED`) yields
    /// `None`.
    pub fn split(&self, color: Option<i32>, key: i32) -> Result<Option<CommId>> {
        let p = self.size as usize;
        let mut all = vec![0u8; 8 * p];
        let me = self.rank as usize;
        let c = color.unwrap_or(-1);
        all[8 * me..8 * me + 4].copy_from_slice(&c.to_le_bytes());
        all[8 * me + 4..8 * me + 8].copy_from_slice(&key.to_le_bytes());
        self.allgather(&mut all, 8)?;
        let ctx = self.agree_context()?;
        let Some(color) = color else { return Ok(None) };
        let group = self.e.comm_group(self.comm)?;
        let mut members: Vec<(i32, usize)> = (0..p)
            .filter_map(|i| {
                let ci = i32::from_le_bytes(all[8 * i..8 * i + 4].try_into().expect("4"));
                let ki = i32::from_le_bytes(all[8 * i + 4..8 * i + 8].try_into().expect("4"));
                (ci == color).then_some((ki, i))
            })
            .collect();
        members.sort_unstable();
        let g = members.iter().map(|&(_, i)| group[i]).collect();
        self.e.comm_create(ctx, g).map(Some)
    }

    /// `MPI_Comm_create` (collective over this communicator): a communicator over `group`
    /// (world ranks, a subset of our members) for its members, `None` for the others.
    pub fn create(&self, group: &[i32]) -> Result<Option<CommId>> {
        let parent = self.e.comm_group(self.comm)?;
        if let Some(w) = group.iter().find(|w| !parent.contains(w)) {
            return Err(arg_err(
                ErrorClass::Group,
                format!("world rank {w} of the group is not in the communicator"),
            ));
        }
        let ctx = self.agree_context()?;
        if group.contains(&self.e.rank()) {
            self.e.comm_create(ctx, group.to_vec()).map(Some)
        } else {
            Ok(None)
        }
    }

    /// `MPI_Comm_create_group` (collective over the members of `group` only, which must
    /// include us): agreement runs among the members with tag `tag` on our shadow.
    pub fn create_group(&self, group: &[i32], tag: i32) -> Result<CommId> {
        let parent = self.e.comm_group(self.comm)?;
        let mut ranks = Vec::with_capacity(group.len());
        for w in group {
            match parent.iter().position(|x| x == w) {
                Some(i) => ranks.push(i as i32),
                None => {
                    return Err(arg_err(
                        ErrorClass::Group,
                        format!("world rank {w} of the group is not in the communicator"),
                    ))
                }
            }
        }
        let Some(me) = ranks.iter().position(|&r| r == self.rank) else {
            return Err(arg_err(
                ErrorClass::Group,
                "MPI_Comm_create_group: the caller is not in the group",
            ));
        };
        let t = TAG_CREATE_GROUP | (tag & 0xf_ffff);
        let mut b = NEXT_CTX.load(Ordering::SeqCst).to_le_bytes();
        // Linear: members send to the first member, which answers with the maximum.
        if me == 0 {
            let mut max = u32::from_le_bytes(b);
            let mut x = [0u8; 4];
            for &r in &ranks[1..] {
                self.recv(&mut x, r, t)?;
                max = max.max(u32::from_le_bytes(x));
            }
            b = max.to_le_bytes();
            for &r in &ranks[1..] {
                self.send(&b, r, t)?;
            }
        } else {
            self.send(&b, ranks[0], t)?;
            self.recv(&mut b, ranks[0], t)?;
        }
        let ctx = claim_context(u32::from_le_bytes(b))?;
        self.e.comm_create(ctx, group.to_vec())
    }
}

/// Marks `ctx` (agreed by all members) as used by this process.
fn claim_context(ctx: u32) -> Result<u32> {
    if ctx >= COLL_BIT {
        return Err(arg_err(ErrorClass::Intern, "context ids exhausted"));
    }
    NEXT_CTX.fetch_max(ctx + 1, Ordering::SeqCst);
    Ok(ctx)
}
