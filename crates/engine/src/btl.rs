//! Byte transfer layer: the per-peer links the protocols run over, and the record header
//! they carry. Today one link type exists, [`SmLink`] (a pair of shared-memory rings); a TCP
//! link (`crate::tcp::TcpLink`) implements the same [`Link`] trait. Messages to oneself never reach a link (the
//! `self` path is handled by the engine directly).

use crate::ring::{Consumer, Producer, RingCorrupt};
use crate::sys::Mapping;

pub(crate) const K_EAGER: u8 = 1;
pub(crate) const K_RTS: u8 = 2;
pub(crate) const K_CTS: u8 = 3;
pub(crate) const K_DATA: u8 = 4;
pub(crate) const K_FIN: u8 = 5;

pub(crate) const F_SYNC: u8 = 1;
pub(crate) const F_CMA: u8 = 2;

/// Header in front of every record (40 bytes; with the sm ring's 8-byte frame word, up to 16
/// payload bytes fit in the first cache line).
///
/// | kind | ctx/src/tag | a | b | c |
/// |---|---|---|---|---|
/// | EAGER | envelope | - | sender request (sync) | - |
/// | RTS | envelope | total bytes | sender request | sender buffer address (CMA) |
/// | CTS | - | bytes wanted | sender request | receiver request |
/// | DATA | - | offset | - | receiver request |
/// | FIN | - | - | sender request | - |
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Hdr {
    pub kind: u8,
    pub flags: u8,
    pub _r: u16,
    pub ctx: u32,
    pub src: i32,
    pub tag: i32,
    pub a: u64,
    pub b: u64,
    pub c: u64,
}

/// Bytes of [`Hdr`].
pub(crate) const HDR: usize = std::mem::size_of::<Hdr>();

/// A bidirectional, ordered, reliable record link to one peer.
pub(crate) trait Link: Send + std::fmt::Debug {
    /// Component name (`sm`, `tcp`).
    fn name(&self) -> &'static str;
    /// Largest payload one record may carry.
    fn max_payload(&self) -> usize;
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
}

/// Shared-memory link: we produce into our ring in the peer's segment and consume the
/// peer's ring in our own segment.
#[derive(Debug)]
pub(crate) struct SmLink {
    pub tx: Producer,
    pub rx: Consumer,
    /// Keeps the peer's segment mapped.
    pub _map: Mapping,
}

impl Link for SmLink {
    fn name(&self) -> &'static str {
        "sm"
    }

    fn max_payload(&self) -> usize {
        self.tx.max_record() - HDR
    }

    #[inline]
    unsafe fn try_send(&mut self, hdr: &Hdr, payload: *const u8, len: usize) -> bool {
        self.tx.push(HDR + len, |d| {
            // SAFETY: the ring gives HDR + len writable bytes, 8-byte aligned; the caller
            // guarantees the payload.
            unsafe {
                d.cast::<Hdr>().write(*hdr);
                if len > 0 {
                    std::ptr::copy_nonoverlapping(payload, d.add(HDR), len);
                }
            }
        })
    }

    #[inline]
    fn poll(&mut self) -> Result<Option<(Hdr, *const u8, usize)>, LinkError> {
        let Some((p, len)) = self.rx.peek()? else {
            return Ok(None);
        };
        if len < HDR {
            return Err(LinkError::Short(len));
        }
        // SAFETY: the record holds at least HDR bytes, 8-byte aligned; the payload follows.
        let hdr = unsafe { p.cast::<Hdr>().read() };
        // SAFETY: in bounds of the record.
        Ok(Some((hdr, unsafe { p.add(HDR) }, len - HDR)))
    }

    #[inline]
    fn release(&mut self) {
        self.rx.release();
    }

    #[inline]
    fn ready(&self) -> bool {
        self.rx.ready()
    }
}
