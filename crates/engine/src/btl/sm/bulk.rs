//! Bulk buffers: byte FIFOs next to the rings that carry rendezvous DATA payloads.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes in front of a bulk buffer: its consumer index on its own cache line.
pub(crate) const BULK_CTL: usize = 64;

/// A bulk buffer of a job of at most [`STREAM_RANKS`] ranks holds this many times
/// `btl_sm_bulk_size`: the first `btl_sm_bulk_size` bytes (the *hot* part) carry the
/// fragments while the consumer keeps up; the rest (the *stream area*) only while more than
/// the hot part's worth of fragments waits for it (a window of rendezvous messages one way,
/// [`BulkTx::reserve`]). Its pages are allocated only when a stream first reaches them, so
/// a ping-pong or a job that never streams costs no memory more (the segment's mapping is
/// larger). np=2, 64 KiB messages, the pipelined copy forced (session 48): a 4 MiB buffer
/// moved a window of 64 at 22.2 GB/s median against 10.7-11.9 through 1 MiB.
pub(crate) const STREAM_FACTOR: usize = 4;

/// Most ranks of a job whose bulk buffers get a stream area ([`STREAM_FACTOR`]): each of
/// its ranks could otherwise touch up to `STREAM_FACTOR` times `btl_sm_bulk_size` per peer
/// streamed to.
pub(crate) const STREAM_RANKS: usize = 4;

/// The bytes of a bulk buffer of a job of `ranks` ranks whose hot part is `hot` bytes.
pub(crate) fn bulk_bytes(hot: usize, ranks: usize) -> usize {
    if ranks <= STREAM_RANKS {
        hot.saturating_mul(STREAM_FACTOR)
    } else {
        hot
    }
}

/// Where a bulk buffer lives: a consumer index (`AtomicU64`, bytes consumed since the start,
/// on its own cache line) followed by `cap` data bytes.
///
/// A bulk buffer carries the payload of rendezvous DATA fragments next to a ring, so large
/// copies do not pass through the ring's frame/line-clearing protocol (the ring keeps one
/// header line per fragment) and fragments may be larger than half a ring. The producer
/// writes a fragment at its head (skipping to the start when it would not fit before the
/// end), then publishes the ring record that names it (the ring's `Release` frame store
/// orders the copy before it); the consumer copies it out, then stores the new index with
/// `Release`; the producer loads the index with `Acquire` before reusing the space.
/// Fragments are consumed in ring order, so the space is freed in the order it was used.
/// The producer may skip forward (to the next lap's start) at any time: the skipped bytes
/// are freed with the next fragment's consumption, and a fragment may be written wherever
/// its end lies at most `cap` past the consumer's index.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BulkMem {
    tail: *const AtomicU64,
    pub(super) data: *mut u8,
    pub(super) cap: usize,
}

// SAFETY: the pointers refer to shared memory whose concurrent use is coordinated by the
// SPSC protocol described above; a BulkMem is used by exactly one producer or one consumer.
unsafe impl Send for BulkMem {}

impl BulkMem {
    /// Describes the bulk buffer at `base`.
    ///
    /// # Safety
    /// `base` must be 64-byte aligned, valid for reads and writes of `BULK_CTL + cap` bytes
    /// for as long as the buffer is used and zero-initialised; at most one producer and one
    /// consumer may use it.
    pub(crate) unsafe fn from_raw(base: *mut u8, cap: usize) -> BulkMem {
        debug_assert!(base as usize % 64 == 0 && cap > 0);
        BulkMem {
            tail: base.cast::<AtomicU64>(),
            // SAFETY: in bounds by the caller's guarantee.
            data: unsafe { base.add(BULK_CTL) },
            cap,
        }
    }

    pub(super) fn tail(&self) -> &AtomicU64 {
        // SAFETY: valid and 8-byte aligned for the buffer's lifetime (constructor contract).
        unsafe { &*self.tail }
    }
}

/// The producing side of a bulk buffer.
#[derive(Debug)]
pub(crate) struct BulkTx {
    pub(super) mem: BulkMem,
    /// Bytes of the hot part (at most `mem.cap`; [`STREAM_FACTOR`]).
    pub(super) hot: usize,
    pub(super) head: u64,
    cached_tail: u64,
}

impl BulkTx {
    /// The producer of `mem`, keeping to its first `hot` bytes while the consumer keeps up.
    pub(crate) fn new(mem: BulkMem, hot: usize) -> BulkTx {
        let t = mem.tail().load(Ordering::Acquire);
        BulkTx {
            mem,
            hot: hot.clamp(1, mem.cap),
            head: t,
            cached_tail: t,
        }
    }

    /// Whether a fragment ending at absolute position `end` leaves the consumer's unread
    /// bytes alone (reloads the consumer's index if the cached one says no).
    #[inline]
    fn room(&mut self, end: u64) -> bool {
        let cap = self.mem.cap as u64;
        if end - self.cached_tail > cap {
            self.cached_tail = self.mem.tail().load(Ordering::Acquire);
            if end - self.cached_tail > cap {
                return false;
            }
        }
        true
    }

    /// Where a fragment of `len` bytes would go (absolute position), if there is room. A
    /// fragment that would cross the end of the hot part goes to the next lap's start if
    /// the consumer has read all but at most half the hot part (it keeps up: the buffer's
    /// used pages stay the hot part's), else on into the stream area (a stream: the
    /// consumer lags, and the whole buffer may be in flight), which the producer then
    /// fills to its end before it goes back to the start.
    #[inline]
    pub(super) fn reserve(&mut self, len: usize) -> Option<u64> {
        let (cap, hot, n) = (self.mem.cap as u64, self.hot as u64, len as u64);
        let off = self.head % cap;
        let next_lap = self.head + (cap - off);
        if off < hot && off + n > hot && n <= hot {
            // Once a lap of the hot part: how far behind the consumer is now.
            self.cached_tail = self.mem.tail().load(Ordering::Acquire);
            if self.head - self.cached_tail <= hot / 2 {
                return self.room(next_lap + n).then_some(next_lap);
            }
        }
        let start = if off + n > cap { next_lap } else { self.head };
        self.room(start + n).then_some(start)
    }
}

/// The consuming side of a bulk buffer.
#[derive(Debug)]
pub(crate) struct BulkRx {
    pub(super) mem: BulkMem,
    /// End of the fragment handed out by the last poll, freed by the next release.
    pub(super) pending: Option<u64>,
    /// The highest offset a fragment has reached: bytes past it were never written (their
    /// pages are touched for the first time).
    pub(super) touched: usize,
}

impl BulkRx {
    pub(crate) fn new(mem: BulkMem) -> BulkRx {
        BulkRx {
            mem,
            pending: None,
            touched: 0,
        }
    }
}
