//! Single-producer / single-consumer byte ring for shared memory.
//!
//! Layout (all offsets from the ring's base, which must be 64-byte aligned):
//!
//! ```text
//! 0    head: AtomicU64  (written by the producer only; its own cache line)
//! 64   tail: AtomicU64  (written by the consumer only; its own cache line)
//! 128  data[cap]        (cap a multiple of 64)
//! ```
//!
//! `head` and `tail` count bytes ever written / consumed (they never wrap). A record is an
//! 8-byte frame word (`len: u32`, `flags: u32`) followed by `len` bytes, padded to a multiple
//! of 64 bytes so every record starts on a cache line: a record of up to 56 bytes moves in a
//! single cache line. A record never wraps around the end of the data area; the producer fills
//! the rest of the area with a pad record instead.
//!
//! Ordering: the producer writes the record and then publishes `head` with `Release`; the
//! consumer loads `head` with `Acquire` before reading. The consumer publishes `tail` with
//! `Release` after it has finished reading a record; the producer loads it with `Acquire`
//! before reusing the space. Each side caches the other's index and only reloads it when the
//! ring looks empty (consumer) or full (producer).
//!
//! The model test in `tests/loom_ring.rs` (`RUSTFLAGS="--cfg loom" cargo test -p oxmpi-engine
//! --test loom_ring --release`) checks these orderings with loom, including data races on the
//! payload (each cache line of the data area is tracked as a loom cell).

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

/// Cache-line size assumed for alignment.
pub const LINE: usize = 64;
/// Bytes of the control block before the data area.
pub const CTL_BYTES: usize = 2 * LINE;
/// Bytes of the frame word in front of each record.
pub const FRAME: usize = 8;
const PAD_FLAG: u32 = 1;

/// The control block of a ring: producer and consumer indexes on separate cache lines.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct RingCtl {
    head: AtomicU64,
    _pad0: [u8; LINE - 8],
    tail: AtomicU64,
    _pad1: [u8; LINE - 8],
}

impl RingCtl {
    /// A control block with both indexes at zero (zeroed shared memory is equivalent).
    pub fn new() -> RingCtl {
        RingCtl {
            head: AtomicU64::new(0),
            _pad0: [0; LINE - 8],
            tail: AtomicU64::new(0),
            _pad1: [0; LINE - 8],
        }
    }
}

impl Default for RingCtl {
    fn default() -> Self {
        Self::new()
    }
}

/// Rounds a record length (frame included) up to whole cache lines.
#[inline]
pub fn record_bytes(len: usize) -> usize {
    (FRAME + len).div_ceil(LINE) * LINE
}

/// Largest record payload a ring of `cap` bytes accepts (half the ring, so a record always
/// fits once the consumer catches up, even after a pad).
pub fn max_record(cap: usize) -> usize {
    cap / 2 - FRAME
}

#[cfg(loom)]
type Cells = std::sync::Arc<Vec<loom::cell::UnsafeCell<()>>>;

/// Where a ring lives.
#[derive(Clone, Debug)]
pub struct RingMem {
    ctl: *const RingCtl,
    data: *mut u8,
    cap: usize,
    #[cfg(loom)]
    cells: Cells,
}

// SAFETY: the pointers refer to shared memory whose concurrent use is coordinated by the
// SPSC protocol; a RingMem is handed to exactly one producer or one consumer.
unsafe impl Send for RingMem {}

impl RingMem {
    /// Describes the ring at `base` (control block followed by `cap` data bytes).
    ///
    /// # Safety
    /// `base` must be 64-byte aligned and valid for reads and writes of `CTL_BYTES + cap`
    /// bytes for as long as the ring is used, its control block must be zero-initialised
    /// (or a valid `RingCtl`), `cap` must be a non-zero multiple of 64, and at most one
    /// [`Producer`] and one [`Consumer`] may use it.
    #[cfg(not(loom))]
    pub unsafe fn from_raw(base: *mut u8, cap: usize) -> RingMem {
        debug_assert!(cap % LINE == 0 && cap > 0 && base as usize % LINE == 0);
        RingMem {
            ctl: base.cast::<RingCtl>(),
            // SAFETY: in bounds by the caller's guarantee.
            data: unsafe { base.add(CTL_BYTES) },
            cap,
        }
    }

    /// Loom version: the control block and data are separate allocations.
    ///
    /// # Safety
    /// As for the non-loom `from_raw`; `ctl` and `data` must outlive the ring.
    #[cfg(loom)]
    pub unsafe fn from_parts(ctl: *const RingCtl, data: *mut u8, cap: usize) -> RingMem {
        let cells = (0..cap / LINE)
            .map(|_| loom::cell::UnsafeCell::new(()))
            .collect();
        RingMem {
            ctl,
            data,
            cap,
            cells: std::sync::Arc::new(cells),
        }
    }

    fn ctl(&self) -> &RingCtl {
        // SAFETY: valid for the ring's lifetime by the constructor's contract.
        unsafe { &*self.ctl }
    }

    #[cfg(loom)]
    fn track_write(&self, pos: usize, len: usize) {
        for i in pos / LINE..(pos + len).div_ceil(LINE) {
            self.cells[i].with_mut(|_| ());
        }
    }
    #[cfg(loom)]
    fn track_read(&self, pos: usize, len: usize) {
        for i in pos / LINE..(pos + len).div_ceil(LINE) {
            self.cells[i].with(|_| ());
        }
    }
    #[cfg(not(loom))]
    #[inline(always)]
    fn track_write(&self, _pos: usize, _len: usize) {}
    #[cfg(not(loom))]
    #[inline(always)]
    fn track_read(&self, _pos: usize, _len: usize) {}

    /// Data capacity in bytes.
    pub fn cap(&self) -> usize {
        self.cap
    }
}

/// The writing side of a ring.
#[derive(Debug)]
pub struct Producer {
    mem: RingMem,
    head: u64,
    cached_tail: u64,
}

impl Producer {
    /// Producer for `mem` (reads the current head, so a ring can be resumed).
    pub fn new(mem: RingMem) -> Producer {
        let head = mem.ctl().head.load(Ordering::Relaxed);
        let cached_tail = mem.ctl().tail.load(Ordering::Acquire);
        Producer {
            mem,
            head,
            cached_tail,
        }
    }

    /// Largest record payload accepted by [`Producer::push`].
    pub fn max_record(&self) -> usize {
        max_record(self.mem.cap)
    }

    /// Writes one record of `len` bytes: `fill` receives a pointer to `len` writable bytes
    /// (64-byte aligned minus the 8-byte frame, i.e. 8 bytes past a line start) and must
    /// initialise them. Returns `false` (and does not call `fill`) if the ring is full.
    ///
    /// # Panics
    /// If `len > self.max_record()`.
    pub fn push(&mut self, len: usize, fill: impl FnOnce(*mut u8)) -> bool {
        assert!(len <= self.max_record(), "ring record too large");
        let cap = self.mem.cap as u64;
        let total = record_bytes(len) as u64;
        let pos = self.head % cap;
        let to_end = cap - pos;
        let need = if total > to_end {
            to_end + total
        } else {
            total
        };
        if self.head + need - self.cached_tail > cap {
            self.cached_tail = self.mem.ctl().tail.load(Ordering::Acquire);
            if self.head + need - self.cached_tail > cap {
                return false;
            }
        }
        let mut at = pos as usize;
        if total > to_end {
            self.mem.track_write(at, FRAME);
            // SAFETY: `at + FRAME <= cap` (to_end >= 64) and the space is free (checked above).
            unsafe {
                write_frame(
                    self.mem.data.add(at),
                    (to_end as usize - FRAME) as u32,
                    PAD_FLAG,
                )
            };
            self.head += to_end;
            at = 0;
        }
        self.mem.track_write(at, FRAME + len);
        // SAFETY: `[at, at + total)` lies inside the data area and is free.
        unsafe {
            write_frame(self.mem.data.add(at), len as u32, 0);
            fill(self.mem.data.add(at + FRAME));
        }
        self.head += total;
        self.mem.ctl().head.store(self.head, Ordering::Release);
        true
    }

    /// `true` if the consumer has consumed everything written.
    pub fn is_drained(&mut self) -> bool {
        self.cached_tail = self.mem.ctl().tail.load(Ordering::Acquire);
        self.cached_tail == self.head
    }
}

/// The reading side of a ring.
#[derive(Debug)]
pub struct Consumer {
    mem: RingMem,
    tail: u64,
    cached_head: u64,
    current: Option<u64>,
}

impl Consumer {
    /// Consumer for `mem` (resumes at its current tail).
    pub fn new(mem: RingMem) -> Consumer {
        let tail = mem.ctl().tail.load(Ordering::Relaxed);
        Consumer {
            mem,
            tail,
            cached_head: tail,
            current: None,
        }
    }

    /// The next record, as (pointer to its bytes, length), without consuming it. Returns
    /// `None` if the ring is empty. A corrupt frame (length out of bounds) is reported as
    /// `Err`.
    pub fn peek(&mut self) -> Result<Option<(*const u8, usize)>, RingCorrupt> {
        let cap = self.mem.cap as u64;
        loop {
            if self.tail == self.cached_head {
                self.cached_head = self.mem.ctl().head.load(Ordering::Acquire);
                if self.tail == self.cached_head {
                    return Ok(None);
                }
            }
            let pos = (self.tail % cap) as usize;
            self.mem.track_read(pos, FRAME);
            // SAFETY: pos + FRAME <= cap; the frame was published by the producer (head >
            // tail, acquired above).
            let (len, flags) = unsafe { read_frame(self.mem.data.add(pos)) };
            let len = len as usize;
            if pos + FRAME + len > self.mem.cap
                || self.tail + record_bytes(len) as u64 > self.cached_head && flags != PAD_FLAG
            {
                return Err(RingCorrupt { pos: self.tail });
            }
            if flags == PAD_FLAG {
                self.tail += (FRAME + len) as u64;
                continue;
            }
            self.mem.track_read(pos + FRAME, len);
            self.current = Some(record_bytes(len) as u64);
            // SAFETY: in bounds (checked) and published.
            return Ok(Some((unsafe { self.mem.data.add(pos + FRAME) }, len)));
        }
    }

    /// Consumes the record returned by the last [`Consumer::peek`] and frees its space.
    pub fn release(&mut self) {
        if let Some(n) = self.current.take() {
            self.tail += n;
            self.mem.ctl().tail.store(self.tail, Ordering::Release);
        }
    }
}

/// A frame in the ring had an impossible length (memory corruption by a peer).
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("shared-memory ring corrupt at byte {pos}")]
pub struct RingCorrupt {
    /// Ring position (bytes since start) of the bad frame.
    pub pos: u64,
}

/// # Safety
/// `p` must be valid for an 8-byte write.
unsafe fn write_frame(p: *mut u8, len: u32, flags: u32) {
    let w = (len as u64) | ((flags as u64) << 32);
    // SAFETY: the caller guarantees 8 writable bytes; records start 64-byte aligned.
    unsafe { p.cast::<u64>().write(w) };
}

/// # Safety
/// `p` must be valid for an 8-byte read.
unsafe fn read_frame(p: *const u8) -> (u32, u32) {
    // SAFETY: the caller guarantees 8 readable bytes, 8-byte aligned.
    let w = unsafe { p.cast::<u64>().read() };
    (w as u32, (w >> 32) as u32)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[repr(C, align(64))]
    struct Buf([u8; CTL_BYTES + 1024]);

    fn ring(buf: &mut Buf) -> (Producer, Consumer) {
        // SAFETY: buf is aligned, zeroed and outlives the ring within the test.
        let mem = unsafe { RingMem::from_raw(buf.0.as_mut_ptr(), 1024) };
        (Producer::new(mem.clone()), Consumer::new(mem))
    }

    fn pop(c: &mut Consumer) -> Option<Vec<u8>> {
        let (p, n) = c.peek().unwrap()?;
        // SAFETY: peek returned a valid record.
        let v = unsafe { std::slice::from_raw_parts(p, n) }.to_vec();
        c.release();
        Some(v)
    }

    fn push(p: &mut Producer, data: &[u8]) -> bool {
        // SAFETY: fill writes exactly data.len() bytes.
        p.push(data.len(), |dst| unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len())
        })
    }

    #[test]
    fn fifo_wraps_pads_and_reports_full() {
        let mut buf = Buf([0; CTL_BYTES + 1024]);
        let (mut p, mut c) = ring(&mut buf);
        assert_eq!(p.max_record(), 504);
        assert_eq!(pop(&mut c), None);
        let mut sent = std::collections::VecDeque::new();
        let mut n = 0u8;
        for round in 0..200usize {
            let len = (round * 37) % 300;
            let msg: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_add(n)).collect();
            n = n.wrapping_add(1);
            while !push(&mut p, &msg) {
                assert!(!sent.is_empty(), "full while empty");
                assert_eq!(pop(&mut c), sent.pop_front());
            }
            sent.push_back(msg);
            if round % 3 == 0 {
                assert_eq!(pop(&mut c), sent.pop_front());
            }
        }
        while let Some(m) = sent.pop_front() {
            assert_eq!(pop(&mut c).as_ref(), Some(&m));
        }
        assert_eq!(pop(&mut c), None);
        assert!(p.is_drained());
    }

    #[test]
    fn corrupt_frame_is_reported() {
        let mut buf = Buf([0; CTL_BYTES + 1024]);
        let (mut p, mut c) = ring(&mut buf);
        assert!(push(&mut p, &[1, 2, 3]));
        // Overwrite the frame with an impossible length.
        buf.0[CTL_BYTES..CTL_BYTES + 4].copy_from_slice(&5000u32.to_le_bytes());
        assert!(c.peek().is_err());
    }
}
