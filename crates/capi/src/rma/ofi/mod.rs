//! The `ofi` one-sided component: where the engine's `ofi` transport reaches a window peer
//! that gets its operations as messages (`pt2pt`, another node) and its provider writes
//! and reads registered remote memory (`FI_RMA`), puts and gets go straight into that
//! peer's window memory (`fi_writemsg` with delivery completion, `fi_read`), with no work
//! for the target's progress thread. Every rank registers its window memory at creation
//! and the ranks exchange keys and addresses; a rank whose registration fails, a dynamic
//! window (memory attached later) or a shared one, and a provider without `FI_RMA`
//! writes (or `btl_ofi_rma=false`) leave everything to `pt2pt`.
//!
//! Accumulates (the accumulate family, fetch-and-op, compare-and-swap) run as the
//! provider's atomics (`FI_ATOMIC`: `fi_atomic`, `fi_fetch_atomic`, `fi_compare_atomic`)
//! per predefined type, decided once per window at creation, by every rank together
//! ([`atomic::native_types`]): a type is native when every rank's provider runs every
//! operation MPI allows on it (plain, fetching and compare-and-swap), every rank reaches
//! every other over ofi (none through the shared segment) and its own memory too (its
//! own address in the address vector). Then every accumulate of that type to the window,
//! from every rank and to every rank including itself, goes through the provider, since
//! MPI wants accumulates of one type to one location atomic with one another and the
//! provider's atomics (`tcp;ofi_rxm` applies them in the target's progress) are not atomic
//! with the CPU path (the segment's accumulate mutex, the `pt2pt` progress thread). Other
//! types, and windows where this does not hold (a node's ranks reached directly, a
//! provider without atomics, `btl_ofi_atomic=false`), keep the `pt2pt`/direct path for
//! every accumulate (`osc_base_verbose` 10 says which and why). Locks stay on `pt2pt`:
//! an exclusive lock keeps other origins' atomics out (their flush, before the unlock
//! message, waits for them to be applied), so the target's own loads and stores under it
//! do not race with them.
//!
//! Completion: a put is complete at the target once its completion arrives, so flush,
//! unlock, fence, complete and free wait for the component's operations
//! ([`Rdma::flush`]) before the `pt2pt` messages that end the epoch. A get waits for its
//! data.

mod atomic;

use super::pt2pt::proto::AccOp;
use crate::comm::Internal;
use crate::consts::*;
use crate::ffi::{MpiError, MpiResult};
use oxmpi_base::output::Stream;
use oxmpi_engine::{OfiAtomicKind, OfiAtomicOp, OfiAtomicType, OfiOsc, OfiOscError};

/// Verbose output of the `osc` framework (`osc_base_verbose`).
static OSC: Stream = Stream::new("osc");

/// How one target's window memory is reached: its address for our offsets and its key.
#[derive(Clone, Copy, Debug)]
struct Remote {
    base: u64,
    key: u64,
}

/// A window's RMA path.
pub(crate) struct Rdma {
    osc: OfiOsc,
    /// World ranks of the window's ranks.
    world: Vec<usize>,
    /// Per window rank: reached over RMA.
    targets: Vec<Option<Remote>>,
    /// Per window rank, ours included: its memory, for atomics (set where `native` is not
    /// empty).
    atomics: Vec<Option<Remote>>,
    /// The predefined types whose accumulates run as atomics (bits of [`atomic::TYPES`]).
    native: u64,
    /// Our exposed window memory.
    exposed: Option<*mut u8>,
}

// SAFETY: the raw pointer is the address of our window memory, only handed back to the
// engine (which serialises its use) to close the registration.
unsafe impl Send for Rdma {}
// SAFETY: as above; no method reads or writes through it.
unsafe impl Sync for Rdma {}

/// An engine error of a one-sided operation with rank `t` (some rank: `None`), as an MPI
/// error.
fn fail(t: Option<usize>, e: OfiOscError) -> MpiError {
    let who = t.map_or("a rank".to_string(), |t| format!("rank {t}"));
    match e {
        OfiOscError::PeerLost(m) => MpiError::new(
            MPIX_ERR_PROC_FAILED,
            format!("{who} of the window failed: {m}"),
        ),
        OfiOscError::Fabric(m) => MpiError::new(
            MPI_ERR_OTHER,
            format!("one-sided operation with {who} of the window: {m}"),
        ),
    }
}

impl Rdma {
    /// Collective over the window's ranks (`coll`, of world ranks `world`), each passing
    /// its window memory (`mem`: base and size, `None` for a flavor this component does
    /// not serve, the same on every rank) and which ranks it reaches with messages
    /// (`remote`): registers ours, exchanges keys; `None` where no target is reached
    /// over RMA.
    pub(crate) fn create(
        coll: &Internal,
        world: &[i32],
        remote: &[bool],
        mem: Option<(usize, usize)>,
    ) -> MpiResult<Option<Rdma>> {
        let Some((base, size)) = mem else {
            return Ok(None);
        };
        let osc = oxmpi_engine::ofi_osc();
        let me = coll.rank();
        let mut mine = [0i64; 4];
        let mut exposed = None;
        if let Some(o) = &osc {
            if size > 0 {
                // SAFETY: the window memory lives until the window is freed, after the
                // final barrier, when `Drop` closes the registration.
                match unsafe { o.expose(base as *mut u8, size) } {
                    Ok((key, rbase)) => {
                        mine = [1, key as i64, rbase as i64, 0];
                        exposed = Some(base as *mut u8);
                    }
                    Err(e) => {
                        oxmpi_base::verbose!(
                            OSC,
                            10,
                            "osc ofi: rank {me}: window memory not registered ({e}); its \
                             peers reach it with messages",
                        );
                    }
                }
            }
        }
        // The types whose accumulates this rank could run as atomics.
        let (types, why) = match &osc {
            None => (0, "no RMA writes over the ofi btl here".to_string()),
            Some(o) => own_atomics(o, size == 0 || exposed.is_some()),
        };
        mine[3] = types as i64;
        let all = coll.allgather_i64(&mine).map_err(|e| {
            MpiError::new(
                e.code,
                format!("MPI_Allgather failed inside a window call: {}", e.detail),
            )
        })?;
        let world: Vec<usize> = world.iter().map(|&w| w as usize).collect();
        let row = |r: usize| &all[4 * r..4 * r + 4];
        // Native types need every rank to reach every other over ofi: one veto fails it
        // for all.
        let unreached = (0..world.len()).find(|&r| {
            r != me && !(remote[r] && osc.as_ref().is_some_and(|o| o.reaches(world[r])))
        });
        let veto = coll
            .allreduce_max(i64::from(types == 0 || unreached.is_some()))
            .map_err(|e| {
                MpiError::new(
                    e.code,
                    format!("MPI_Allreduce failed inside a window call: {}", e.detail),
                )
            })?;
        let masks: Vec<u64> = (0..world.len()).map(|r| row(r)[3] as u64).collect();
        let native = atomic::agree(&masks, veto != 0);
        let Some(osc) = osc else {
            oxmpi_base::verbose!(
                OSC,
                10,
                "osc ofi: rank {me}: no RMA writes over the ofi btl here (not open, or its \
                 provider lacks FI_RMA writes, or btl_ofi_rma=false): window peers reached \
                 with messages; accumulates as active messages",
            );
            return Ok(None);
        };
        let targets: Vec<Option<Remote>> = (0..world.len())
            .map(|r| {
                let row = row(r);
                (remote[r] && row[0] == 1 && osc.reaches(world[r])).then_some(Remote {
                    key: row[1] as u64,
                    base: row[2] as u64,
                })
            })
            .collect();
        let atomics: Vec<Option<Remote>> = (0..world.len())
            .map(|r| {
                let row = row(r);
                (native != 0 && row[0] == 1).then_some(Remote {
                    key: row[1] as u64,
                    base: row[2] as u64,
                })
            })
            .collect();
        let reached = targets.iter().flatten().count();
        oxmpi_base::verbose!(
            OSC,
            10,
            "osc ofi: rank {me}: {reached} of {} window peers reached with fi_write/fi_read",
            world.len()
        );
        let prov = osc.provider();
        if native != 0 {
            oxmpi_base::verbose!(
                OSC,
                10,
                "osc ofi: rank {me}: accumulates native (FI_ATOMIC on {prov}) for {}; as \
                 active messages for the other types",
                atomic::names(native).join(" ")
            );
        } else {
            let why = if types == 0 {
                why
            } else if let Some(r) = unreached {
                format!("rank {r} of the window is not reached over ofi (same node, or not linked)")
            } else {
                "another rank of the window cannot run them (see its line)".to_string()
            };
            oxmpi_base::verbose!(
                OSC,
                10,
                "osc ofi: rank {me}: accumulates as active messages, not FI_ATOMIC: {why}"
            );
        }
        let r = Rdma {
            osc,
            world,
            targets,
            atomics,
            native,
            exposed,
        };
        Ok((reached > 0 || r.exposed.is_some()).then_some(r))
    }

    /// The element type of accumulates on predefined type `basic` where they run as
    /// atomics on this window; `None`: they take the `pt2pt`/direct path.
    pub(crate) fn native(&self, basic: i32) -> Option<(OfiAtomicType, atomic::Class)> {
        let i = atomic::type_index(basic)?;
        (self.native & (1 << i) != 0).then(|| (atomic::TYPES[i].2, atomic::TYPES[i].3))
    }

    /// The accumulate family on `ranges` (checked) of target `t` (any rank, ours too) as
    /// atomics, for a type [`Rdma::native`] accepts: `Some(old bytes)` when `fetch`.
    pub(crate) fn accumulate(
        &self,
        t: usize,
        op: AccOp,
        ranges: &[(isize, usize)],
        data: &[u8],
        fetch: bool,
    ) -> MpiResult<Option<Vec<u8>>> {
        let (ty, class) = self.native(op.basic).ok_or_else(|| {
            MpiError::new(MPI_ERR_INTERN, "accumulate type not native on this window")
        })?;
        let fop = atomic::fi_op(op.op)
            .filter(|_| atomic::ops(class).contains(&op.op))
            .ok_or_else(|| {
                MpiError::new(
                    MPI_ERR_OP,
                    format!(
                        "operation {:#x} is not defined for datatype {:#x}",
                        op.op, op.basic
                    ),
                )
            })?;
        let r = self.atomic_target(t)?;
        if !fetch {
            if fop == OfiAtomicOp::Read {
                return Ok(None);
            }
            let mut at = 0;
            for &(off, len) in ranges {
                let raddr = r.base.wrapping_add(off as u64);
                self.osc
                    .atomic(self.world[t], &data[at..at + len], ty, fop, raddr, r.key)
                    .map_err(|e| fail(Some(t), e))?;
                at += len;
            }
            return Ok(None);
        }
        let total: usize = ranges.iter().map(|x| x.1).sum();
        let mut old = vec![0u8; total];
        // MPI_NO_OP has no operands: read with zeros (the provider ignores them).
        let zeros;
        let data = if fop == OfiAtomicOp::Read {
            zeros = vec![0u8; total];
            &zeros[..]
        } else {
            data
        };
        let mut at = 0;
        for &(off, len) in ranges {
            let raddr = r.base.wrapping_add(off as u64);
            // SAFETY: `old` holds `at + len` bytes; the call waits until they are written.
            unsafe {
                self.osc.fetch_atomic(
                    self.world[t],
                    &data[at..at + len],
                    None,
                    old.as_mut_ptr().add(at),
                    ty,
                    fop,
                    raddr,
                    r.key,
                )
            }
            .map_err(|e| fail(Some(t), e))?;
            at += len;
        }
        Ok(Some(old))
    }

    /// `MPI_Compare_and_swap` of one element of `basic` at byte `off` (checked) of target
    /// `t` as an atomic, for a type [`Rdma::native`] accepts: the old bytes.
    pub(crate) fn cas(
        &self,
        t: usize,
        basic: i32,
        off: isize,
        cmp: &[u8],
        new: &[u8],
    ) -> MpiResult<Vec<u8>> {
        let (ty, class) = self.native(basic).ok_or_else(|| {
            MpiError::new(
                MPI_ERR_INTERN,
                "compare-and-swap type not native on this window",
            )
        })?;
        if !atomic::swaps(class) {
            mpi_bail!(
                MPI_ERR_TYPE,
                "MPI_Compare_and_swap needs an integer or byte datatype, not {basic:#x}"
            );
        }
        let r = self.atomic_target(t)?;
        let mut old = vec![0u8; new.len()];
        // SAFETY: `old` holds one element; the call waits until it is written.
        unsafe {
            self.osc.fetch_atomic(
                self.world[t],
                new,
                Some(cmp),
                old.as_mut_ptr(),
                ty,
                OfiAtomicOp::Cswap,
                r.base.wrapping_add(off as u64),
                r.key,
            )
        }
        .map_err(|e| fail(Some(t), e))?;
        Ok(old)
    }

    fn atomic_target(&self, t: usize) -> MpiResult<Remote> {
        self.atomics[t].ok_or_else(|| {
            MpiError::new(
                MPI_ERR_INTERN,
                format!("rank {t} of the window has no memory registered for atomics"),
            )
        })
    }

    /// Whether target `t` is reached over RMA.
    pub(crate) fn reaches(&self, t: usize) -> bool {
        self.targets[t].is_some()
    }

    /// `MPI_Put` of the packed `data` into `ranges` (checked) of target `t`.
    pub(crate) fn put(&self, t: usize, ranges: &[(isize, usize)], data: &[u8]) -> MpiResult {
        let r = self.remote(t)?;
        let mut at = 0;
        for &(off, len) in ranges {
            self.osc
                .put(
                    self.world[t],
                    &data[at..at + len],
                    r.base.wrapping_add(off as u64),
                    r.key,
                )
                .map_err(|e| fail(Some(t), e))?;
            at += len;
        }
        Ok(())
    }

    /// `MPI_Get` of `ranges` (checked) of target `t`: their packed bytes.
    pub(crate) fn get(&self, t: usize, ranges: &[(isize, usize)]) -> MpiResult<Vec<u8>> {
        let r = self.remote(t)?;
        let mut out = vec![0u8; ranges.iter().map(|x| x.1).sum()];
        let mut at = 0;
        for &(off, len) in ranges {
            // SAFETY: `out` holds `at + len` bytes; `get` waits until they are written.
            unsafe {
                self.osc.get(
                    self.world[t],
                    out.as_mut_ptr().add(at),
                    len,
                    r.base.wrapping_add(off as u64),
                    r.key,
                )
            }
            .map_err(|e| fail(Some(t), e))?;
            at += len;
        }
        Ok(out)
    }

    /// Waits until our puts to target `t` (every target: `None`) are complete there.
    pub(crate) fn flush(&self, t: Option<usize>) -> MpiResult {
        match t {
            Some(t) if self.targets[t].is_none() && self.atomics[t].is_none() => Ok(()),
            Some(t) => self
                .osc
                .flush(Some(self.world[t]))
                .map_err(|e| fail(Some(t), e)),
            None => self.osc.flush(None).map_err(|e| fail(None, e)),
        }
    }

    fn remote(&self, t: usize) -> MpiResult<Remote> {
        self.targets[t].ok_or_else(|| {
            MpiError::new(
                MPI_ERR_INTERN,
                format!("rank {t} of the window is not reached over RMA"),
            )
        })
    }
}

/// The types whose accumulates this rank's provider can run as atomics (a mask of
/// [`atomic::TYPES`]) and, when none, why: the provider lacks `FI_ATOMIC` (or
/// `btl_ofi_atomic=false`), our window memory is not registered (`registered` false), or
/// our own address does not go into the address vector.
fn own_atomics(o: &OfiOsc, registered: bool) -> (u64, String) {
    if !o.atomics() {
        let why = format!(
            "provider {} offers no FI_ATOMIC here (or btl_ofi_atomic=false; shm's and \
             ofi_rxd's are not used: libfabric 1.17's fail under concurrent atomics)",
            o.provider()
        );
        return (0, why);
    }
    if !registered {
        return (0, "our window memory is not registered".into());
    }
    if let Err(e) = o.reaches_self() {
        return (0, format!("atomics on our own memory: {e}"));
    }
    let valid =
        |k: OfiAtomicKind, t: OfiAtomicType, op: OfiAtomicOp| o.atomic_valid(k, t, op).is_some();
    let m = atomic::native_types(&valid);
    let why = format!(
        "provider {} runs no predefined type's operations all as atomics",
        o.provider()
    );
    (m, why)
}

impl Drop for Rdma {
    fn drop(&mut self) {
        if let Some(b) = self.exposed.take() {
            self.osc.unexpose(b);
        }
    }
}
