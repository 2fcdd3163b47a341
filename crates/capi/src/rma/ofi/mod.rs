//! The `ofi` one-sided component: where the engine's `ofi` transport reaches a window peer
//! that gets its operations as messages (`pt2pt`, another node) and its provider writes
//! and reads registered remote memory (`FI_RMA`), puts and gets go straight into that
//! peer's window memory (`fi_writemsg` with delivery completion, `fi_read`), with no work
//! for the target's progress thread. Every rank registers its window memory at creation
//! and the ranks exchange keys and addresses; a rank whose registration fails, a dynamic
//! window (memory attached later) or a shared one, and a provider without `FI_RMA`
//! writes (or `btl_ofi_rma=false`) leave everything to `pt2pt`.
//!
//! Accumulates stay on `pt2pt`: MPI wants accumulates to one location atomic with one
//! another, from every origin, and the same location is also updated by the target's own
//! calls and by its node's peers through the shared segment, which network atomics
//! (`FI_ATOMIC`) are not atomic with (a provider's software atomics, `tcp;ofi_rxm`'s, run
//! in the target's progress, outside its accumulate mutex).
//!
//! Completion: a put is complete at the target once its completion arrives, so flush,
//! unlock, fence, complete and free wait for the component's operations
//! ([`Rdma::flush`]) before the `pt2pt` messages that end the epoch. A get waits for its
//! data.

use crate::comm::Internal;
use crate::consts::*;
use crate::ffi::{MpiError, MpiResult};
use oxmpi_base::output::Stream;
use oxmpi_engine::{OfiOsc, OfiOscError};

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
        let mut mine = [0i64; 3];
        let mut exposed = None;
        if let Some(o) = &osc {
            if size > 0 {
                // SAFETY: the window memory lives until the window is freed, after the
                // final barrier, when `Drop` closes the registration.
                match unsafe { o.expose(base as *mut u8, size) } {
                    Ok((key, rbase)) => {
                        mine = [1, key as i64, rbase as i64];
                        exposed = Some(base as *mut u8);
                    }
                    Err(e) => {
                        oxmpi_base::verbose!(
                            OSC,
                            10,
                            "osc ofi: rank {}: window memory not registered ({e}); its \
                             peers reach it with messages",
                            coll.rank()
                        );
                    }
                }
            }
        }
        let all = coll.allgather_i64(&mine).map_err(|e| {
            MpiError::new(
                e.code,
                format!("MPI_Allgather failed inside a window call: {}", e.detail),
            )
        })?;
        let world: Vec<usize> = world.iter().map(|&w| w as usize).collect();
        let Some(osc) = osc else {
            oxmpi_base::verbose!(
                OSC,
                10,
                "osc ofi: rank {}: no RMA writes over the ofi btl here (not open, or its \
                 provider lacks FI_RMA writes, or btl_ofi_rma=false): window peers reached \
                 with messages",
                coll.rank()
            );
            return Ok(None);
        };
        let targets: Vec<Option<Remote>> = (0..world.len())
            .map(|r| {
                let row = &all[3 * r..3 * r + 3];
                (remote[r] && row[0] == 1 && osc.reaches(world[r])).then_some(Remote {
                    key: row[1] as u64,
                    base: row[2] as u64,
                })
            })
            .collect();
        let reached = targets.iter().flatten().count();
        oxmpi_base::verbose!(
            OSC,
            10,
            "osc ofi: rank {}: {reached} of {} window peers reached with fi_write/fi_read",
            coll.rank(),
            world.len()
        );
        let r = Rdma {
            osc,
            world,
            targets,
            exposed,
        };
        Ok((reached > 0 || r.exposed.is_some()).then_some(r))
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
            Some(t) if self.targets[t].is_none() => Ok(()),
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

impl Drop for Rdma {
    fn drop(&mut self) {
        if let Some(b) = self.exposed.take() {
            self.osc.unexpose(b);
        }
    }
}
