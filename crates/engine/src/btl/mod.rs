//! Byte transfer layer: the transport components and the per-peer [`Link`]s the protocol
//! (`crate::pml`) runs over. Each component lives in its own folder: `sm` (shared-memory
//! rings, bulk buffers, cooperative single copy) and `tcp` (sockets). Messages to oneself
//! never reach a link (the `self` path is handled by the protocol directly).

#[cfg(not(loom))]
use crate::btl::sm::ring::RingCorrupt;
#[cfg(not(loom))]
use crate::pml::hdr::Hdr;

pub(crate) mod sm;
#[cfg(not(loom))]
pub(crate) mod tcp;

/// A bidirectional, ordered, reliable record link to one peer.
#[cfg(not(loom))]
pub(crate) trait Link: Send + std::fmt::Debug {
    /// Component name (`sm`, `tcp`).
    fn name(&self) -> &'static str;
    /// Largest payload one record may carry.
    fn max_payload(&self) -> usize;
    /// Largest payload of one DATA record (rendezvous fragment); by default
    /// [`Link::max_payload`].
    fn max_data(&self) -> usize {
        self.max_payload()
    }
    /// Sends one record (header + `len` payload bytes) if there is room; `false` otherwise.
    ///
    /// # Safety
    /// `payload` must be valid for reads of `len` bytes (or `len == 0`).
    unsafe fn try_send(&mut self, hdr: &Hdr, payload: *const u8, len: usize) -> bool;
    /// The next inbound record: header, payload pointer and length. The payload stays valid
    /// until [`Link::release`].
    fn poll(&mut self) -> Result<Option<(Hdr, *const u8, usize)>, LinkError>;
    /// Frees the record returned by the last [`Link::poll`].
    fn release(&mut self);
    /// `true` if [`Link::poll`] may return a record; a cheap check for idle polling (a
    /// `false` here means there is nothing to read now).
    fn ready(&self) -> bool;
    /// `true` while records accepted by [`Link::try_send`] still wait in the link's own
    /// buffers for the peer to take them (only progress moves them on; finalize waits).
    fn sending(&self) -> bool {
        false
    }
}

/// A broken link (corrupt data from the peer).
#[cfg(not(loom))]
#[derive(Debug, thiserror::Error)]
pub(crate) enum LinkError {
    /// The shared ring held an impossible frame.
    #[error(transparent)]
    Ring(#[from] RingCorrupt),
    /// A record too short to hold a header.
    #[error("record of {0} bytes is shorter than a header")]
    Short(usize),
    /// A record length beyond what the link allows (corrupt or foreign stream).
    #[error("record of {len} bytes exceeds the link's maximum of {max}")]
    TooLong {
        /// The announced length.
        len: usize,
        /// The largest allowed.
        max: usize,
    },
    /// The peer closed the connection (`partial` bytes of an unfinished record were left).
    #[error("connection closed by the peer ({partial} bytes of an unfinished record)")]
    Closed {
        /// Bytes of a record cut short.
        partial: usize,
    },
    /// A socket error.
    #[error("socket error: {0}")]
    Io(#[from] std::io::Error),
    /// A bulk-buffer reference outside the buffer (corrupt shared memory).
    #[error(
        "fragment of {len} bytes at bulk position {pos} lies outside the {cap}-byte bulk buffer"
    )]
    Bulk {
        /// The announced position.
        pos: u64,
        /// The announced length.
        len: usize,
        /// The bulk buffer's size.
        cap: usize,
    },
}
