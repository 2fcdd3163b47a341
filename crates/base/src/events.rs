//! Events the library raises as they happen, for the MPI tools interface's event types
//! (`MPI_T_event_*`, MPI 4.1 §15.3.8): a peer process failed, a transport was chosen to
//! reach a peer, the first message to a peer went by rendezvous, a rendezvous receive from
//! a peer chose (or switched) between a single copy and the pipelined copy, a message
//! arrived before its receive was posted, a framework's verbose stream printed a line.
//!
//! The crates that see these things (the engine, the output streams) call [`raise`]; the
//! MPI library's tools interface installs the one [`set_sink`] that turns them into event
//! instances for the registered callbacks, and turns each kind on ([`set_wanted`]) only
//! while a tool listens to it. Unwatched, an event costs one relaxed atomic load
//! ([`wanted`]) at the place it happens, and nothing is built.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// The kinds of events, each a flag a tool turns on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// [`Event::ProcFailed`].
    ProcFailed,
    /// [`Event::Transport`].
    Transport,
    /// [`Event::Unexpected`].
    Unexpected,
    /// [`Event::VerboseLine`].
    VerboseLine,
    /// [`Event::Rendezvous`].
    Rendezvous,
    /// [`Event::CopyChoice`].
    CopyChoice,
}

/// Number of [`Kind`]s.
pub const KINDS: usize = 6;

/// Every [`Kind`], in order.
pub const ALL_KINDS: [Kind; KINDS] = [
    Kind::ProcFailed,
    Kind::Transport,
    Kind::Unexpected,
    Kind::VerboseLine,
    Kind::Rendezvous,
    Kind::CopyChoice,
];

/// One occurrence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event<'a> {
    /// World rank `rank` was found dead (its operations now fail with
    /// `MPI_ERR_PROC_FAILED`).
    ProcFailed {
        /// The failed process's world rank.
        rank: i32,
    },
    /// World rank `peer` is reached by the transport `transport` (`self`, `sm`, `tcp`,
    /// `ofi`, or `none`), decided when the job wires up.
    Transport {
        /// The peer's world rank.
        peer: i32,
        /// The transport component's name.
        transport: &'a str,
    },
    /// A message arrived before a matching receive was posted and was queued.
    Unexpected {
        /// The sender's rank in the communicator.
        source: i32,
        /// The message's tag.
        tag: i32,
        /// The communicator's context id.
        context: u32,
        /// The message's length in bytes.
        bytes: u64,
    },
    /// Framework `framework`'s verbose stream printed `text` at `level`.
    VerboseLine {
        /// The framework (`btl`, `pml`, ...).
        framework: &'a str,
        /// The line's verbosity level.
        level: i32,
        /// The message, without the `[host:pid]` prefix.
        text: &'a str,
    },
    /// The protocol of the sends to world rank `peer` switched from eager to rendezvous:
    /// the first message to it above the eager limit (a request to send, the data after
    /// the receiver's clear-to-send) is being sent. Raised once per peer (sends to
    /// ourselves excluded).
    Rendezvous {
        /// The peer's world rank.
        peer: i32,
        /// The message's length in bytes.
        bytes: u64,
        /// The eager limit in force for this peer (its link may cap the configured one).
        eager_limit: u64,
        /// The transport reaching the peer.
        transport: &'a str,
    },
    /// The data of a rendezvous message from world rank `peer` moved by `mechanism`: raised
    /// for the first rendezvous receive from each peer and whenever the mechanism differs
    /// from the one the previous receive from that peer used (a switch, e.g. the sm
    /// chooser moving between the cooperative and the pipelined copy, or a single copy
    /// the kernel refused).
    CopyChoice {
        /// The sender's world rank.
        peer: i32,
        /// The message's length in bytes.
        bytes: u64,
        /// `cma` (the receiver's cross-memory read), `coop` (the cooperative copy),
        /// `rma` (the network's remote read): single copies; `pipelined` (fragments
        /// through the link).
        mechanism: &'a str,
        /// The mechanism of the previous rendezvous receive from the peer (`none` for the
        /// first).
        previous: &'a str,
        /// The transport reaching the peer.
        transport: &'a str,
    },
}

impl Event<'_> {
    /// Its kind.
    pub fn kind(&self) -> Kind {
        match self {
            Event::ProcFailed { .. } => Kind::ProcFailed,
            Event::Transport { .. } => Kind::Transport,
            Event::Unexpected { .. } => Kind::Unexpected,
            Event::VerboseLine { .. } => Kind::VerboseLine,
            Event::Rendezvous { .. } => Kind::Rendezvous,
            Event::CopyChoice { .. } => Kind::CopyChoice,
        }
    }
}

static WANTED: [AtomicBool; KINDS] = [const { AtomicBool::new(false) }; KINDS];
static SINK: OnceLock<fn(&Event<'_>)> = OnceLock::new();

/// Whether a tool listens to events of kind `k` now (one relaxed load): check it before
/// building an event.
#[inline(always)]
pub fn wanted(k: Kind) -> bool {
    WANTED[k as usize].load(Ordering::Relaxed)
}

/// Turns the delivery of kind `k` on or off.
pub fn set_wanted(k: Kind, on: bool) {
    WANTED[k as usize].store(on, Ordering::Relaxed);
}

/// Installs the function that receives every wanted event; the first one stays (returns
/// whether `sink` is the one installed).
pub fn set_sink(sink: fn(&Event<'_>)) -> bool {
    *SINK.get_or_init(|| sink) as usize == sink as usize
}

/// Hands `e` to the sink if its kind is wanted.
pub fn raise(e: &Event<'_>) {
    if wanted(e.kind()) {
        if let Some(sink) = SINK.get() {
            sink(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    static SEEN: AtomicU64 = AtomicU64::new(0);

    fn count(e: &Event<'_>) {
        if let Event::ProcFailed { rank } = e {
            SEEN.fetch_add(*rank as u64, Ordering::Relaxed);
        }
    }

    #[test]
    fn only_wanted_kinds_reach_the_sink() {
        assert!(set_sink(count));
        assert!(set_sink(count));
        raise(&Event::ProcFailed { rank: 5 });
        assert_eq!(SEEN.load(Ordering::Relaxed), 0);
        set_wanted(Kind::ProcFailed, true);
        assert!(wanted(Kind::ProcFailed) && !wanted(Kind::Transport));
        raise(&Event::ProcFailed { rank: 5 });
        raise(&Event::Transport {
            peer: 1,
            transport: "sm",
        });
        assert_eq!(SEEN.load(Ordering::Relaxed), 5);
        set_wanted(Kind::ProcFailed, false);
        raise(&Event::ProcFailed { rank: 5 });
        assert_eq!(SEEN.load(Ordering::Relaxed), 5);
        assert_eq!(
            Event::VerboseLine {
                framework: "btl",
                level: 1,
                text: ""
            }
            .kind(),
            Kind::VerboseLine
        );
        assert!(ALL_KINDS.iter().enumerate().all(|(i, &k)| k as usize == i));
    }
}
