//! The link to the MPI engine (`oxmpi-engine`): type aliases and error mapping.

use crate::consts::*;
use crate::ffi::{MpiError, MpiResult};
use oxmpi_engine as eng;
use std::ffi::c_int;

pub(crate) use eng::{
    CommId as EComm, ErrorClass, MessageId as EMsg, ReqId as EReq, SendMode, Status as EStatus,
};

/// The engine, or `MPI_ERR_OTHER` if MPI is not initialized.
pub(crate) fn engine() -> MpiResult<&'static eng::Engine> {
    eng::engine().ok_or_else(|| {
        MpiError::new(
            MPI_ERR_OTHER,
            "MPI is not initialized (call MPI_Init first)",
        )
    })
}

/// MPICH error class of an engine error class.
pub(crate) fn class_code(c: ErrorClass) -> c_int {
    match c {
        ErrorClass::Buffer => MPI_ERR_BUFFER,
        ErrorClass::Count => MPI_ERR_COUNT,
        ErrorClass::Tag => MPI_ERR_TAG,
        ErrorClass::Comm => MPI_ERR_COMM,
        ErrorClass::Rank => MPI_ERR_RANK,
        ErrorClass::Group => MPI_ERR_GROUP,
        ErrorClass::Request => MPI_ERR_REQUEST,
        ErrorClass::Truncate => MPI_ERR_TRUNCATE,
        ErrorClass::Other => MPI_ERR_OTHER,
        ErrorClass::Intern => MPI_ERR_INTERN,
        ErrorClass::NoMem => MPI_ERR_NO_MEM,
        ErrorClass::Unsupported => MPI_ERR_UNSUPPORTED_OPERATION,
        // MPI-3.1 has no "process failed" class: MPICH's extension class, with its value.
        ErrorClass::ProcFailed => MPIX_ERR_PROC_FAILED,
        ErrorClass::Revoked => MPIX_ERR_REVOKED,
        ErrorClass::ProcFailedPending => MPIX_ERR_PROC_FAILED_PENDING,
        ErrorClass::Arg => MPI_ERR_ARG,
    }
}

/// Convert an engine error.
pub(crate) fn err(e: eng::Error) -> MpiError {
    MpiError::new(class_code(e.class()), e.to_string())
}

/// Map the MPI thread level (MPICH values 0-3) to the engine's.
pub(crate) fn thread_level(l: c_int) -> eng::ThreadLevel {
    match l {
        MPI_THREAD_SINGLE => eng::ThreadLevel::Single,
        MPI_THREAD_FUNNELED => eng::ThreadLevel::Funneled,
        MPI_THREAD_SERIALIZED => eng::ThreadLevel::Serialized,
        _ => eng::ThreadLevel::Multiple,
    }
}

/// Map the engine's thread level to MPICH's value.
pub(crate) fn thread_level_code(l: eng::ThreadLevel) -> c_int {
    match l {
        eng::ThreadLevel::Single => MPI_THREAD_SINGLE,
        eng::ThreadLevel::Funneled => MPI_THREAD_FUNNELED,
        eng::ThreadLevel::Serialized => MPI_THREAD_SERIALIZED,
        eng::ThreadLevel::Multiple => MPI_THREAD_MULTIPLE,
    }
}

/// Initialize the engine.
pub(crate) fn init(required: c_int) -> MpiResult<&'static eng::Engine> {
    eng::init(thread_level(required)).map_err(err)
}

/// Byte messaging on one engine context, errors attributed to the MPI communicator
/// `comm`: the link that the blocking collectives (`coll::Coll`, `intercomm::Net`) send
/// and receive their packed bytes through.
#[derive(Clone, Copy)]
pub(crate) struct Wire {
    /// The engine.
    pub eng: &'static eng::Engine,
    /// The engine context the messages travel on.
    pub ctx: EComm,
    /// The communicator handle errors are attributed to.
    pub comm: c_int,
}

impl Wire {
    /// Start a standard-mode send of `data`; the caller keeps `data` alive until it waits.
    pub(crate) fn isend(self, data: &[u8], dest: i32, tag: i32) -> MpiResult<EReq> {
        // SAFETY: every caller waits for the request before `data` is dropped.
        unsafe {
            self.eng.isend(
                data.as_ptr(),
                data.len(),
                dest,
                tag,
                self.ctx,
                SendMode::Standard,
            )
        }
        .map_err(|x| err(x).on(self.comm))
    }

    /// Start receiving into `buf`; the caller keeps `buf` alive until it waits.
    pub(crate) fn irecv(self, buf: &mut [u8], src: i32, tag: i32) -> MpiResult<EReq> {
        // SAFETY: every caller waits for the request before `buf` is dropped or read.
        unsafe {
            self.eng
                .irecv(buf.as_mut_ptr(), buf.len(), src, tag, self.ctx)
        }
        .map_err(|x| err(x).on(self.comm))
    }
}

/// Largest tag.
pub(crate) const TAG_UB: c_int = eng::TAG_UB;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_agree_with_mpich() {
        assert_eq!(eng::ANY_SOURCE, MPI_ANY_SOURCE);
        assert_eq!(eng::ANY_TAG, MPI_ANY_TAG);
        assert_eq!(eng::PROC_NULL, MPI_PROC_NULL);
        assert_eq!(class_code(ErrorClass::Truncate), 14);
        assert_eq!(
            thread_level_code(thread_level(MPI_THREAD_FUNNELED)),
            MPI_THREAD_FUNNELED
        );
    }
}
