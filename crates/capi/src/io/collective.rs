//! The collectives a file runs on its private communicator (open, close, size changes,
//! ordered access, shared-pointer set-up): the collective framework through
//! `comm::Internal`, never the exported `MPI_*` functions; their errors go to the file's
//! error handler.

use crate::comm::Internal;
use crate::ffi::{MpiError, MpiResult};
use std::ffi::c_int;

/// An error of the library's own collective `what` on the file's communicator, for the
/// file's error handler.
pub(super) fn internal(what: &'static str) -> impl Fn(MpiError) -> MpiError {
    move |e| MpiError::new(e.code, format!("{what} failed: {}", e.detail))
}

/// Barrier on the file's private communicator.
pub(super) fn barrier(comm: c_int) -> MpiResult {
    Internal::of(comm)
        .and_then(|c| c.barrier())
        .map_err(internal("barrier"))
}

/// Broadcast `buf` from `root`.
pub(super) fn bcast(buf: &mut [u8], root: i32, comm: c_int) -> MpiResult {
    Internal::of(comm)
        .and_then(|c| c.bcast(buf, root))
        .map_err(internal("broadcast"))
}

/// Broadcast one `i64` from `root`.
pub(super) fn bcast_i64(v: i64, root: i32, comm: c_int) -> MpiResult<i64> {
    let mut b = v.to_ne_bytes();
    bcast(&mut b, root, comm)?;
    Ok(i64::from_ne_bytes(b))
}

/// Gather one `i64` from every rank (in rank order) on every rank.
pub(super) fn allgather_i64(v: i64, comm: c_int) -> MpiResult<Vec<i64>> {
    Internal::of(comm)
        .and_then(|c| c.allgather_i64(&[v]))
        .map_err(internal("allgather"))
}
