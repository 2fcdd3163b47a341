//! Bulk buffers: byte FIFOs next to the rings that carry rendezvous DATA payloads.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes in front of a bulk buffer: its consumer index on its own cache line.
pub(crate) const BULK_CTL: usize = 64;

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
    pub(super) head: u64,
    cached_tail: u64,
}

impl BulkTx {
    pub(crate) fn new(mem: BulkMem) -> BulkTx {
        let t = mem.tail().load(Ordering::Acquire);
        BulkTx {
            mem,
            head: t,
            cached_tail: t,
        }
    }

    /// Where a fragment of `len` bytes would go (absolute position), if there is room.
    #[inline]
    pub(super) fn reserve(&mut self, len: usize) -> Option<u64> {
        let cap = self.mem.cap as u64;
        let off = self.head % cap;
        let start = if off + len as u64 > cap {
            self.head + (cap - off)
        } else {
            self.head
        };
        let end = start + len as u64;
        if end - self.cached_tail > cap {
            self.cached_tail = self.mem.tail().load(Ordering::Acquire);
            if end - self.cached_tail > cap {
                return None;
            }
        }
        Some(start)
    }
}

/// The consuming side of a bulk buffer.
#[derive(Debug)]
pub(crate) struct BulkRx {
    pub(super) mem: BulkMem,
    /// End of the fragment handed out by the last poll, freed by the next release.
    pub(super) pending: Option<u64>,
}

impl BulkRx {
    pub(crate) fn new(mem: BulkMem) -> BulkRx {
        BulkRx { mem, pending: None }
    }
}
