//! Context ids of new and freed communicators: this process's proposal, the release of a
//! freed communicator's ids (parked while operations are pending on them), the limit and
//! the error when none are free (the allocator is `oxmpi_engine::ctxid`, the agreements
//! `comm::agree_ctx_span` and `intercomm::Exchanged::agree_ctx`).

use crate::consts::MPI_ERR_OTHER;
use crate::ffi::{MpiError, MpiResult};
use crate::state::lock;

/// This process's proposal for a new communicator's context ids (`ctxid::Ids::propose`),
/// parked ids of freed communicators released first if they have become idle.
pub(crate) fn proposal(floor: u32) -> MpiResult<u32> {
    settle_parked()?;
    Ok(lock().ids.propose(floor))
}

/// Releases the parked ids of freed communicators whose pending operations are done
/// (asks the engine without the library lock).
pub(crate) fn settle_parked() -> MpiResult {
    let parked = lock().ids.take_parked();
    if parked.is_empty() {
        return Ok(());
    }
    let eng = crate::backend::engine()?;
    let checked = parked
        .into_iter()
        .map(|(c, s)| ((c, s), eng.contexts_idle(c, s)))
        .collect();
    lock().ids.settle(checked);
    Ok(())
}

/// Returns the `span` context ids from `ctx` of a communicator just freed: at once if the
/// engine finds them idle, else once its pending operations are done.
pub(crate) fn release(ctx: u32, span: u32) -> MpiResult {
    let idle = crate::backend::engine()?.contexts_idle(ctx, span);
    let mut st = lock();
    if idle {
        st.ids.release(ctx, span);
    } else {
        st.ids.park(ctx, span);
    }
    Ok(())
}

/// The context ids `0..limit` communicators may take (`Engine::user_context_limit`: what
/// the transports carry, capped by `mpi_max_context_ids` if set). The same at every
/// process of a job.
pub(crate) fn limit() -> MpiResult<u32> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static LIMIT: AtomicU32 = AtomicU32::new(0);
    let l = LIMIT.load(Ordering::Relaxed);
    if l != 0 {
        return Ok(l);
    }
    let l = crate::backend::engine()?.user_context_limit();
    LIMIT.store(l, Ordering::Relaxed);
    Ok(l)
}

/// The error of an agreement that found no `span` context ids free at every member.
pub(crate) fn exhausted(limit: u32, span: u32) -> MpiError {
    let held = lock().ids.count();
    MpiError::new(
        MPI_ERR_OTHER,
        format!(
            "out of context ids: no {span} consecutive ids below {limit} are free at every \
             member ({held} held here; free communicators no longer needed)"
        ),
    )
}
