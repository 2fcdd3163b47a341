//! Errors of the safe API: every failure carries its MPI error class.

use crate::status::Status;
pub use oxmpi_engine::ErrorClass;

/// Result type of the safe API.
pub type Result<T> = std::result::Result<T, Error>;

/// An MPI error: its [`ErrorClass`], what happened, and for a failed receive the [`Status`]
/// it completed with (for [`ErrorClass::Truncate`] the buffer holds what fit).
///
/// The safe API behaves like `MPI_ERRORS_RETURN`: errors are returned, never fatal, and it
/// never panics on bad input (an invalid rank, tag or count is an `Err`).
#[derive(Debug, thiserror::Error)]
#[error("{class:?}: {message}")]
pub struct Error {
    class: ErrorClass,
    message: String,
    status: Option<Status>,
    #[source]
    source: Option<oxmpi_engine::Error>,
}

impl Error {
    /// A new error of class `class` with a message.
    pub fn new(class: ErrorClass, message: impl Into<String>) -> Error {
        Error {
            class,
            message: message.into(),
            status: None,
            source: None,
        }
    }

    pub(crate) fn with_message(mut self, message: String) -> Error {
        self.message = message;
        self
    }

    pub(crate) fn with_status(mut self, status: Status) -> Error {
        self.status = Some(status);
        self
    }

    /// The MPI error class.
    pub fn class(&self) -> ErrorClass {
        self.class
    }

    /// What happened, with context (ranks, tags, sizes).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The status of the failed operation, when it completed (e.g. a truncated receive).
    pub fn status(&self) -> Option<&Status> {
        self.status.as_ref()
    }
}

impl From<oxmpi_engine::Error> for Error {
    fn from(e: oxmpi_engine::Error) -> Error {
        Error {
            class: e.class(),
            message: e.to_string(),
            status: None,
            source: Some(e),
        }
    }
}
