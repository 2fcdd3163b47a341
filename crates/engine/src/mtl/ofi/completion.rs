//! A tagged receive's completion as MPI sees it (sans-IO): status (source, tag, count),
//! truncation, cancellation, and whether an acknowledgement is owed.
//!
//! The provider matches and reports; we only read its completion entry. A message longer
//! than the buffer completes with `FI_ETRUNC` in an error entry: `len` bytes were placed,
//! `olen` more were dropped (the provider drains them), and the receive ends with
//! `MPI_ERR_TRUNCATE` and a count of `len`. `fi_cancel` of a receive that had not matched
//! ends it with `FI_ECANCELED`. A synchronous send is acknowledged once matched, truncated
//! or not; a cancelled receive matched nothing and owes nothing.

use super::tag::{Decoded, Envelope, Layout};
use crate::ErrorClass;

/// `FI_ETRUNC`: the message was longer than the receive buffer.
pub const FI_ETRUNC: i32 = 265;
/// `FI_ECANCELED` (`ECANCELED`): `fi_cancel` took the operation back.
pub const FI_ECANCELED: i32 = libc::ECANCELED;

/// A completion entry of a tagged receive (`fi_cq_tagged_entry`, or `fi_cq_err_entry`
/// when it failed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cq {
    /// Completed: the message's tag and its length.
    Ok {
        /// The sender's tag bits.
        tag: u64,
        /// Bytes received.
        len: usize,
    },
    /// Failed (`fi_cq_readerr`).
    Err {
        /// The positive `FI_E*` / errno value.
        errno: i32,
        /// The message's tag (valid for `FI_ETRUNC`).
        tag: u64,
        /// Bytes placed in the buffer.
        len: usize,
        /// Bytes that did not fit.
        olen: usize,
    },
}

impl Cq {
    /// The completion of a receive for a buffer of `posted` bytes (posted with a larger
    /// bounce buffer): a successful one with more bytes than that is the truncation it
    /// is, `posted` bytes placed; a truncation the provider reported (a message longer
    /// than the bounce buffer too) placed at most `posted` bytes in the user's buffer.
    pub fn capped(self, posted: usize) -> Cq {
        match self {
            Cq::Ok { tag, len } if len > posted => Cq::Err {
                errno: FI_ETRUNC,
                tag,
                len: posted,
                olen: len - posted,
            },
            Cq::Err {
                errno: FI_ETRUNC,
                tag,
                len,
                olen,
            } if len > posted => Cq::Err {
                errno: FI_ETRUNC,
                tag,
                len: posted,
                olen: olen + (len - posted),
            },
            cq => cq,
        }
    }
}

/// How a receive ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecvEnd {
    /// The whole message arrived.
    Done {
        /// Its envelope and protocol bits.
        got: Decoded,
        /// Bytes received.
        count: usize,
    },
    /// The message was longer than the buffer: `count` bytes of `len` arrived.
    Truncated {
        /// Its envelope and protocol bits.
        got: Decoded,
        /// Bytes received (the buffer's size).
        count: usize,
        /// The message's length.
        len: usize,
    },
    /// Cancelled before it matched.
    Cancelled,
    /// The provider failed the receive (`errno`, positive).
    Failed {
        /// The positive `FI_E*` / errno value.
        errno: i32,
    },
}

/// The MPI status of a receive that ended: source, tag, count, error class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvStatus {
    /// The sender's rank in the communicator (`None` when nothing matched).
    pub source: Option<u32>,
    /// The message's tag (`None` when nothing matched).
    pub tag: Option<i32>,
    /// Bytes received.
    pub count: usize,
    /// `MPI_ERR_TRUNCATE`, `MPI_ERR_OTHER`, ...; `None`: success.
    pub error: Option<ErrorClass>,
    /// Cancelled (`MPI_Test_cancelled`).
    pub cancelled: bool,
}

impl RecvEnd {
    /// Reads a receive's completion entry with `layout`.
    pub fn read(layout: &Layout, cq: Cq) -> RecvEnd {
        match cq {
            Cq::Ok { tag, len } => RecvEnd::Done {
                got: layout.decode(tag),
                count: len,
            },
            Cq::Err {
                errno: FI_ETRUNC,
                tag,
                len,
                olen,
            } => RecvEnd::Truncated {
                got: layout.decode(tag),
                count: len,
                len: len + olen,
            },
            Cq::Err {
                errno: FI_ECANCELED,
                ..
            } => RecvEnd::Cancelled,
            Cq::Err { errno, .. } => RecvEnd::Failed { errno },
        }
    }

    /// The MPI status; `gone` classifies a provider error as a dead peer
    /// (`MPI_ERR_PROC_FAILED`) rather than a fault (`MPI_ERR_OTHER`).
    pub fn status(&self, gone: impl Fn(i32) -> bool) -> RecvStatus {
        let matched = |got: &Decoded, count, error| RecvStatus {
            source: Some(got.env.src),
            tag: Some(got.env.tag),
            count,
            error,
            cancelled: false,
        };
        match self {
            RecvEnd::Done { got, count } => matched(got, *count, None),
            RecvEnd::Truncated { got, count, .. } => {
                matched(got, *count, Some(ErrorClass::Truncate))
            }
            RecvEnd::Cancelled => RecvStatus {
                source: None,
                tag: None,
                count: 0,
                error: None,
                cancelled: true,
            },
            RecvEnd::Failed { errno } => RecvStatus {
                source: None,
                tag: None,
                count: 0,
                error: Some(if gone(*errno) {
                    ErrorClass::ProcFailed
                } else {
                    ErrorClass::Other
                }),
                cancelled: false,
            },
        }
    }

    /// The acknowledgement owed for a matched synchronous send: the envelope the
    /// receiver answers with ([`Layout::ack_send`] with its own rank), and to whom (the
    /// sender's rank).
    pub fn ack_owed(&self) -> Option<(Envelope, u32)> {
        match self {
            RecvEnd::Done { got, .. } | RecvEnd::Truncated { got, .. } if got.sync => {
                Some((got.env, got.env.src))
            }
            _ => None,
        }
    }
}
