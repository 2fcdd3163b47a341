//! `MPI_Status` of the MPICH ABI and its byte count, below the request and datatype
//! modules that fill and read it.

use crate::consts::{MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_SUCCESS};
use std::ffi::c_int;

/// `MPI_Status` of the MPICH ABI (20 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MpiStatus {
    /// Low 32 bits of the byte count.
    pub count_lo: c_int,
    /// High bits of the byte count shifted left by one; bit 0 = cancelled.
    pub count_hi_and_cancelled: c_int,
    /// `MPI_SOURCE`.
    pub source: c_int,
    /// `MPI_TAG`.
    pub tag: c_int,
    /// `MPI_ERROR`.
    pub error: c_int,
}

/// Write the status fields (MPICH layout: count_lo, count_hi_and_cancelled, SOURCE, TAG,
/// ERROR). The count is kept in bytes; bit 0 of the second word is "cancelled".
pub(crate) fn status_set_bytes(s: &mut MpiStatus, bytes: usize, cancelled: bool) {
    s.count_lo = bytes as u32 as c_int;
    s.count_hi_and_cancelled = (((bytes as u64 >> 32) << 1) as c_int) | cancelled as c_int;
}

/// The byte count stored in a status.
pub(crate) fn status_bytes(s: &MpiStatus) -> usize {
    (s.count_lo as u32 as u64 | (((s.count_hi_and_cancelled as u32 as u64) >> 1) << 32)) as usize
}

/// The status of an empty/null request (`MPI_ANY_SOURCE`, `MPI_ANY_TAG`, count 0).
pub(crate) fn empty_status() -> MpiStatus {
    MpiStatus {
        count_lo: 0,
        count_hi_and_cancelled: 0,
        source: MPI_ANY_SOURCE,
        tag: MPI_ANY_TAG,
        error: MPI_SUCCESS,
    }
}
