//! Single-producer / single-consumer byte ring for shared memory.
//!
//! Layout (all offsets from the ring's base, which must be 64-byte aligned):
//!
//! ```text
//! 0    tail: AtomicU64  (written by the consumer only; its own cache line)
//! 64   data[cap]        (cap a multiple of 64)
//! ```
//!
//! A record is an 8-byte frame word followed by `len` bytes, padded to a multiple of
//! [`SLOT`] (32) bytes, so every record starts on a slot (half a cache line). The frame word
//! holds `len`, flags and a `VALID` bit. A record never wraps around the end of the data area;
//! the producer fills the rest of the area with a pad record instead.
//!
//! **Two small messages per cache line.** The consumer does not read a producer index: it
//! polls the frame word at its own position. This works because the first 8 bytes of every
//! slot the consumer may reach are zero: after consuming a record it clears the first word
//! of each of the record's slots (they are in its cache already; large records: below). So the word at the
//! consumer's position is either zero or the frame of the next record, and a record of up to
//! 32 bytes (frame included: the sm link's compact eager header leaves 8 payload bytes) takes
//! half a line: when the producer runs ahead, as in a window of small sends, one cache-line
//! transfer carries two messages. (Slots of 32 bytes rather than whole lines cost nothing
//! when the consumer is caught up: the producer's write of the second half then moves the
//! line once more, as a new line would.)
//!
//! **Large records are not cleared.** Clearing the slots of a record of several lines wrote
//! every one of its lines in the consumer's cache, so the producer's next lap had to fetch
//! each line back from the consumer's core. The consumer clears only the frame word of a
//! record of [`LARGE`] bytes or more; the first words of its other slots keep payload. The
//! producer remembers those slots (`Producer::dirty`, one bit per slot, in its own memory)
//! and, when a record it writes ends on such a slot, stores zero there before it publishes
//! the record, so the word at the consumer's next position is still zero or a frame. That
//! slot lies inside a record the consumer has released (the producer only writes where
//! `tail` lets it), so the consumer no longer reads it.
//!
//! **Lines asked for in advance.** Writing a record into lines the consumer read or cleared
//! on the last lap takes each line back from the consumer's core, one store miss after
//! another. For records of [`PREFETCH_MIN`] bytes or more the producer asks for the lines
//! with `prefetchw` (x86-64): after publishing a record, for the next record's space (as
//! many bytes, within the space known free, not the line the consumer polls), so that the
//! transfers overlap whatever the sender does next (waiting for a reply, say); and right
//! before filling a record below [`LARGE`], whose lines the consumer has written. Hints
//! only: no memory changes, nothing for the protocol to rely on. A record of
//! [`DEMOTE_MIN`] bytes or more that a blocking send writes right after the link consumed
//! one from the peer (a ping-pong's turn, [`Producer::note_inbound`]) has its lines pushed to the shared
//! cache with `cldemote` once published, so that the waiting consumer's copy reads them
//! from there rather than from our core; a hint too.
//!
//! **Streamed records.** A record the link writes with non-temporal stores
//! ([`Producer::stream_next`]: a far reader, whose cache holds the lines from the last lap)
//! goes to memory line by line without any line being taken back first; the producer then
//! asks for none of its lines, nor for the next record's. The link's copy ends with
//! `sfence`, so the frame word's `Release` still orders after the payload.
//!
//! Ordering: the producer writes the payload, then stores the frame word with `Release`; the
//! consumer loads it with `Acquire` before reading the payload. The consumer clears the
//! record's slot words and then publishes `tail` (bytes consumed, never wraps) with
//! `Release`; the producer loads `tail` with `Acquire` (only when its cached copy says the ring
//! is full) before reusing the space. A record and its neighbour in the same line are
//! distinct bytes: the consumer clearing one while the producer writes the other is no race.
//!
//! The model test in `tests/loom_ring.rs` (`RUSTFLAGS="--cfg loom" cargo test -p oxmpi-engine
//! --test loom_ring --release`) checks these orderings with loom, including data races on the
//! payload (each slot of the data area is tracked as a loom cell, so two records sharing a
//! line are told apart).

#[cfg(loom)]
use loom::sync::atomic::{AtomicU64, Ordering};
#[cfg(not(loom))]
use std::sync::atomic::{AtomicU64, Ordering};

/// Cache-line size assumed for alignment.
pub const LINE: usize = 64;
/// Granularity of records: every record starts on a slot, and small ones take one (two per
/// cache line).
pub const SLOT: usize = 32;
/// Bytes of the control block before the data area.
pub const CTL_BYTES: usize = LINE;
/// Bytes of the frame word in front of each record.
pub const FRAME: usize = 8;
const VALID: u64 = 1 << 63;
const PAD: u64 = 1 << 62;
/// Records of at least this many bytes (frame and padding included: four cache lines) are
/// *large*: the consumer clears only their frame word (see the module notes). (Smaller under
/// loom, so that the model's small rings hold large records.)
pub const LARGE: usize = if cfg!(loom) { 96 } else { 4096 };

/// Bytes at the start of a ring's data area that are faulted in when a link is made, for
/// rings kept warm ([`Producer::warm_ahead`], [`Consumer::warm_ahead`]): once a record ends
/// past half of them, the producer and the consumer each fault in the rest of the ring in
/// one system call, so a ring that carries little keeps only its start resident, and one
/// that carries more takes no page fault on its first pass.
pub const WARM_AHEAD: usize = 64 << 10;

/// Faults in the rest of the data area (from `*warm` up to its end), called once a record
/// ended past `*mark`, and stops looking (`*mark` = the end of the area).
#[cold]
#[inline(never)]
fn warm_rest(mem: &RingMem, warm: &mut usize, mark: &mut usize) {
    mem.populate(*warm, mem.cap);
    *warm = mem.cap;
    *mark = mem.cap;
}

/// `(warm, mark)` for a ring whose first `warm` data bytes are faulted in
/// ([`WARM_AHEAD`]).
fn warm_marks(cap: usize, warm: usize) -> (usize, usize) {
    let warm = warm.min(cap);
    (warm, if warm == cap { cap } else { warm / 2 })
}

/// Whether a record of `total` bytes (as [`record_bytes`] gives) is large.
#[inline(always)]
fn is_large(total: usize) -> bool {
    total >= LARGE
}

/// Records of at least this many bytes (four cache lines) get their lines asked for in
/// advance with `prefetchw` (see the module notes).
pub const PREFETCH_MIN: usize = 256;

/// Runs `hint` on the address of each cache line that `[p, p + n)` touches.
#[cfg(all(target_arch = "x86_64", not(loom)))]
#[inline(always)]
fn each_line(p: *const u8, n: usize, hint: impl Fn(usize)) {
    let mut a = p as usize & !(LINE - 1);
    while a < p as usize + n {
        hint(a);
        a += LINE;
    }
}

/// Asks for ownership (`prefetchw`) of each cache line that `[p, p + n)` touches. A hint:
/// it never faults and changes no memory; a no-op off x86-64 and under loom. Public for
/// the collectives' segment, which asks for its next ring cell the same way.
#[inline(always)]
pub fn prefetch_lines(p: *const u8, n: usize) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    each_line(p, n, |a| {
        // SAFETY: `prefetchw` is a hint: it does not fault on any address, writes no
        // memory and leaves flags and stack alone (a NOP on CPUs without it).
        unsafe {
            std::arch::asm!(
                "prefetchw [{0}]",
                in(reg) a,
                options(nostack, preserves_flags, readonly)
            )
        };
    });
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = (p, n);
}

/// Records of at least this many bytes that a blocking send writes right after the link
/// consumed a record from the peer (a ping-pong's turn: [`Producer::note_inbound`]), get their lines pushed
/// to the shared cache with `cldemote` once published (see the module notes).
pub const DEMOTE_MIN: usize = 1024;

/// Asks the core to move each cache line that `[p, p + n)` touches to the shared cache
/// (`cldemote`). A hint: it never faults and changes no memory; a no-op off x86-64 and
/// under loom (and a NOP on CPUs without it). Public for the collectives' segment, which
/// demotes a rooted post the same way.
#[inline(always)]
pub fn demote_lines(p: *const u8, n: usize) {
    #[cfg(all(target_arch = "x86_64", not(loom)))]
    each_line(p, n, |a| {
        // SAFETY: `cldemote` is a hint: it does not fault on any address, writes no
        // memory and leaves flags and stack alone (a NOP on CPUs without it).
        unsafe {
            std::arch::asm!(
                "cldemote [{0}]",
                in(reg) a,
                options(nostack, preserves_flags, readonly)
            )
        };
    });
    #[cfg(not(all(target_arch = "x86_64", not(loom))))]
    let _ = (p, n);
}

/// The byte range `[from, end)` of the data area whose lines the producer asks for after
/// publishing a record of `total` bytes, its position now `pos`: as many bytes as that
/// record (the next one is likely alike), but not the line at `pos` (the consumer polls
/// its frame word there: taking it would only move it back and forth), not beyond the
/// `free` bytes known consumed, nor past the end of the area. `None`: nothing to ask for.
#[inline(always)]
fn ahead_range(pos: usize, total: usize, free: usize, cap: usize) -> Option<(usize, usize)> {
    let from = (pos & !(LINE - 1)) + LINE;
    let end = (pos + total.min(free)).min(cap);
    (end > from).then_some((from, end))
}

/// The control block of a ring: the consumer's index on its own cache line.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct RingCtl {
    tail: AtomicU64,
    _pad: [u8; LINE - 8],
}

impl RingCtl {
    /// A control block at zero (zeroed shared memory is equivalent).
    pub fn new() -> RingCtl {
        RingCtl {
            tail: AtomicU64::new(0),
            _pad: [0; LINE - 8],
        }
    }
}

impl Default for RingCtl {
    fn default() -> Self {
        Self::new()
    }
}

/// Rounds a record length (frame not included) plus its frame up to whole slots.
#[inline]
pub fn record_bytes(len: usize) -> usize {
    (FRAME + len).div_ceil(SLOT) * SLOT
}

/// Largest record payload a ring of `cap` bytes accepts (half the ring, so a record always
/// fits once the consumer catches up, even after a pad).
pub fn max_record(cap: usize) -> usize {
    cap / 2 - FRAME
}

/// Where a ring lives.
#[derive(Clone, Debug)]
pub struct RingMem {
    ctl: *const RingCtl,
    data: *mut u8,
    cap: usize,
    /// Loom: the frame words (first word of each slot) as loom atomics, and one loom cell
    /// per slot to detect data races on the payload.
    #[cfg(loom)]
    frames: std::sync::Arc<Vec<AtomicU64>>,
    #[cfg(loom)]
    cells: std::sync::Arc<Vec<loom::cell::UnsafeCell<()>>>,
}

// SAFETY: the pointers refer to shared memory whose concurrent use is coordinated by the
// SPSC protocol; a RingMem is handed to exactly one producer or one consumer.
unsafe impl Send for RingMem {}

impl RingMem {
    /// Describes the ring at `base` (control block followed by `cap` data bytes).
    ///
    /// # Safety
    /// `base` must be 64-byte aligned and valid for reads and writes of `CTL_BYTES + cap`
    /// bytes for as long as the ring is used, the whole ring must be zero-initialised (or
    /// have been used only as a ring of the same size), `cap` must be a non-zero multiple of
    /// 64, and at most one [`Producer`] and one [`Consumer`] may use it.
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
        let slots = cap / SLOT;
        RingMem {
            ctl,
            data,
            cap,
            frames: std::sync::Arc::new((0..slots).map(|_| AtomicU64::new(0)).collect()),
            cells: std::sync::Arc::new(
                (0..slots)
                    .map(|_| loom::cell::UnsafeCell::new(()))
                    .collect(),
            ),
        }
    }

    fn ctl(&self) -> &RingCtl {
        // SAFETY: valid for the ring's lifetime by the constructor's contract.
        unsafe { &*self.ctl }
    }

    /// The frame word at byte `pos` (a slot start) of the data area.
    #[cfg(not(loom))]
    #[inline(always)]
    fn frame(&self, pos: usize) -> &AtomicU64 {
        // SAFETY: pos is a slot start inside the data area (8-byte aligned, in bounds);
        // AtomicU64 has the layout of u64 and the memory is shared only through this
        // protocol.
        unsafe { &*self.data.add(pos).cast::<AtomicU64>() }
    }
    #[cfg(loom)]
    fn frame(&self, pos: usize) -> &AtomicU64 {
        &self.frames[pos / SLOT]
    }

    /// Clears the first word of every slot in `[pos, pos + len)` except the frame slot.
    #[inline(always)]
    fn clear_slots(&self, pos: usize, len: usize) {
        let mut p = pos + SLOT;
        while p < pos + len {
            #[cfg(not(loom))]
            // SAFETY: p is a slot start inside the consumed record, which the producer does
            // not touch until `tail` moves past it.
            unsafe {
                self.data.add(p).cast::<u64>().write(0)
            };
            #[cfg(loom)]
            self.frames[p / SLOT].store(0, Ordering::Relaxed);
            p += SLOT;
        }
    }

    #[cfg(loom)]
    fn track_write(&self, pos: usize, len: usize) {
        for i in pos / SLOT..(pos + len).div_ceil(SLOT) {
            self.cells[i].with_mut(|_| ());
        }
    }
    #[cfg(loom)]
    fn track_read(&self, pos: usize, len: usize) {
        for i in pos / SLOT..(pos + len).div_ceil(SLOT) {
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

    /// Faults in (writable, contents unchanged) the pages holding data bytes
    /// `from..to`; best effort.
    #[cfg(not(loom))]
    fn populate(&self, from: usize, to: usize) {
        debug_assert!(from <= to && to <= self.cap);
        // SAFETY: the data area is valid for reads and writes (the constructor's contract),
        // so the pages holding `from..to` of it lie in one read-write mapping.
        let _ = unsafe { crate::sys::populate_pages(self.data.add(from), to - from) };
    }
    #[cfg(loom)]
    fn populate(&self, _from: usize, _to: usize) {}
}

/// The writing side of a ring.
#[derive(Debug)]
pub struct Producer {
    mem: RingMem,
    head: u64,
    /// `head % cap`, kept incrementally (no division on the fast path).
    pos: usize,
    cached_tail: u64,
    /// One bit per slot: set if the slot's first word may hold a payload word once the
    /// consumer has passed it (an inner slot of a large record, which the consumer does not
    /// clear). A record that ends on such a slot zeroes it first ([`Producer::scrub`]).
    dirty: Vec<u64>,
    /// Set bits in `dirty` (0: nothing to look up for a small record).
    ndirty: usize,
    /// Data bytes from the start known faulted in ([`Producer::warm_ahead`]; `cap`: all, or
    /// not asked).
    warm: usize,
    /// A record ending past this faults in the rest ([`warm_rest`]; `cap`: never).
    warm_mark: usize,
    /// The inbound ring's consumed bytes when the last record was pushed
    /// ([`Producer::note_inbound`]).
    inbound: u64,
    /// Whether the next record answers the peer ([`Producer::answer_next`]).
    answer: bool,
    /// Whether the next record is a ping-pong's turn (demoted once published).
    turn: bool,
    /// A record that would start past this byte of the data area starts over at 0 when the
    /// ring is empty ([`Producer::hot_wrap`]; `cap`: never).
    hot: usize,
    /// Whether the last record that started past `hot` started over (a ping-pong keeping to
    /// the ring's first bytes), so that the lines at 0 are the ones to ask for ahead.
    hot_lap: bool,
    /// Whether the next record's payload is written with non-temporal stores
    /// ([`Producer::stream_next`]).
    stream: bool,
}

impl Producer {
    /// Producer for a fresh (zeroed) ring. A ring that was used before (its `tail` is not
    /// zero) may hold payload words in the first words of its slots: every slot then
    /// counts as dirty until a record covers it.
    pub fn new(mem: RingMem) -> Producer {
        let cached_tail = mem.ctl().tail.load(Ordering::Acquire);
        let slots = mem.cap / SLOT;
        let mut p = Producer {
            pos: (cached_tail % mem.cap as u64) as usize,
            dirty: vec![0; slots.div_ceil(64)],
            ndirty: 0,
            warm: mem.cap,
            warm_mark: mem.cap,
            mem,
            head: cached_tail,
            cached_tail,
            inbound: 0,
            answer: false,
            turn: false,
            hot: slots * SLOT,
            hot_lap: false,
            stream: false,
        };
        if cached_tail != 0 {
            p.mark(0, p.mem.cap, true);
        }
        p
    }

    /// Marks the slots of `[from, to)` (slot-aligned byte offsets) dirty or clean.
    ///
    /// A stream of large records marks the same slots on every lap (its records start at
    /// the same places), so a word usually does not change: then nothing is counted. (The
    /// library is built for baseline x86-64, without `popcnt`: each `count_ones` is a dozen
    /// instructions; with two per word, [`Producer::note`] took 327 of the sender's 1540
    /// instructions per 4 KiB message of a window, 193 with this.)
    fn mark(&mut self, from: usize, to: usize, dirty: bool) {
        let (mut s, end) = (from / SLOT, to / SLOT);
        while s < end {
            let (w, b) = (s / 64, s % 64);
            let n = (64 - b).min(end - s);
            let mask = if n == 64 { !0 } else { ((1u64 << n) - 1) << b };
            let old = self.dirty[w];
            let new = if dirty { old | mask } else { old & !mask };
            if new != old {
                // Only bits of `mask` changed, all the same way.
                let changed = (new ^ old).count_ones() as usize;
                if dirty {
                    self.ndirty += changed;
                } else {
                    self.ndirty -= changed;
                }
                self.dirty[w] = new;
            }
            s += n;
        }
    }

    /// Zeroes the first word of the slot at byte `pos` if it is dirty: the consumer will
    /// poll it next. Called before the record (or pad) ending there is published, so the
    /// consumer's `Acquire` of that record's frame also sees the zero.
    #[inline]
    fn scrub(&mut self, pos: usize) {
        let (w, b) = (pos / SLOT / 64, pos / SLOT % 64);
        if self.dirty[w] & (1 << b) != 0 {
            self.dirty[w] &= !(1 << b);
            self.ndirty -= 1;
            self.mem.track_write(pos, FRAME);
            self.mem.frame(pos).store(0, Ordering::Relaxed);
        }
    }

    /// The producer's side of the dirty slots for a record of `total` bytes at `at`: its
    /// frame slot will be cleared by the consumer, its other slots too unless it is large;
    /// the slot after it is the consumer's next position.
    #[inline]
    fn note(&mut self, at: usize, total: usize, large: bool) {
        self.mark(at, at + SLOT, false);
        self.mark(at + SLOT, at + total, large);
        let next = at + total;
        self.scrub(if next == self.mem.cap { 0 } else { next });
    }

    /// Faults in the rest of the ring once the producer's records pass half of its first
    /// `warm` data bytes, which the caller faulted in ([`WARM_AHEAD`]): a fresh ring
    /// otherwise takes a page fault in the producer every 128 small records, which a
    /// ping-pong waits for, while faulting in the whole ring when the link is made makes all
    /// of it resident however little the link carries.
    pub fn warm_ahead(&mut self, warm: usize) {
        (self.warm, self.warm_mark) = warm_marks(self.mem.cap, warm);
    }

    /// Keeps a ping-pong to the first `hot` bytes of the data area (`btl_sm_ring_hot`; 0 or
    /// `cap` and more: the whole area). When a record would start past `hot` and the ring is
    /// known empty (everything written consumed), the producer pads the rest of the area as
    /// at its end and writes the record at 0, in lines the consumer read on the previous
    /// round rather than in lines it has not touched for a lap of the whole ring (each a
    /// miss in both caches, in the shared cache too once the ring outgrows it). Empty is
    /// known without asking when the cached `tail` equals `head`; otherwise `tail` is loaded
    /// only on a ping-pong's turn ([`Producer::note_inbound`]: the peer answered, so it has
    /// most likely consumed our last record), once per round of the hot part. A stream
    /// (ring not empty) still uses the whole ring.
    pub fn hot_wrap(&mut self, hot: usize) {
        self.hot = if hot == 0 {
            self.mem.cap
        } else {
            hot.min(self.mem.cap)
        };
    }

    /// Whether the consumer has consumed everything written: from the cached `tail`, or,
    /// on a ping-pong's turn, from `tail` itself.
    #[inline]
    fn known_empty(&mut self) -> bool {
        if self.cached_tail != self.head && self.turn {
            self.cached_tail = self.mem.ctl().tail.load(Ordering::Acquire);
        }
        self.cached_tail == self.head
    }

    /// Largest record payload accepted by [`Producer::push`].
    pub fn max_record(&self) -> usize {
        max_record(self.mem.cap)
    }

    /// Says that the next record is a blocking send's ([`Producer::note_inbound`]).
    #[inline(always)]
    pub fn answer_next(&mut self) {
        self.answer = true;
    }

    /// Says that the next record's payload will be written with non-temporal stores (its
    /// reader's CPU is far): [`Producer::push`] then asks for none of its lines, nor for
    /// the next record's, with `prefetchw`, which would take them into our cache only for
    /// the streamed stores to write them out again.
    #[inline(always)]
    pub fn stream_next(&mut self) {
        self.stream = true;
    }

    /// Whether the next record's payload is to be written with non-temporal stores
    /// ([`Producer::stream_next`]; the flag lasts until the next [`Producer::push`]).
    #[inline(always)]
    pub fn streaming(&self) -> bool {
        self.stream
    }

    /// Tells the producer how many bytes its link has consumed from the peer's ring so far
    /// ([`Consumer::consumed`]), before each push. A blocking send's record
    /// ([`Producer::answer_next`]) that follows a record from the peer is a turn of a
    /// ping-pong (the peer waits for it), whose lines [`Producer::push`] demotes to the
    /// shared cache, where the peer's copy finds them sooner than in our core's cache.
    /// Streams keep their records in our cache: they push record after record without
    /// consuming any, or, both ways at once (bibw), from nonblocking sends (demoting every
    /// record made bw 2-8 KiB about twice as slow, and each record after a consumed one
    /// bibw 1-8 KiB 4-13 % slower).
    #[inline(always)]
    pub fn note_inbound(&mut self, consumed: u64) {
        self.turn = std::mem::take(&mut self.answer) && consumed != self.inbound;
        self.inbound = consumed;
    }

    /// Writes one record of `len` bytes: `fill` receives a pointer to `len` writable bytes
    /// (8 bytes past a slot start, so 8-byte aligned) and must initialise them. Returns `false` (and does
    /// not call `fill`) if the ring is full.
    ///
    /// # Panics
    /// If `len > self.max_record()`.
    #[inline]
    pub fn push(&mut self, len: usize, fill: impl FnOnce(*mut u8)) -> bool {
        assert!(len <= self.max_record(), "ring record too large");
        let stream = std::mem::take(&mut self.stream);
        let cap = self.mem.cap as u64;
        let total = record_bytes(len) as u64;
        let pos = self.pos as u64;
        let to_end = cap - pos;
        // Start over at 0 (a pad over the rest of the area) when the record does not fit
        // before the end, or, on a ping-pong kept to the hot part, when it would start past
        // it (`hot_wrap`; the space check below then passes: the ring is empty and the
        // record fits before `pos`).
        let mut wrap = total > to_end;
        if !wrap && self.pos > self.hot {
            wrap = total <= pos && self.known_empty();
            self.hot_lap = wrap;
        }
        let need = if wrap { to_end + total } else { total };
        if self.head + need - self.cached_tail > cap {
            self.cached_tail = self.mem.ctl().tail.load(Ordering::Acquire);
            if self.head + need - self.cached_tail > cap {
                return false;
            }
        }
        let mut at = pos as usize;
        if wrap {
            // The pad covers the rest of the area; its frame is published before the record's
            // so the consumer meets them in order. The consumer clears the pad's frame and
            // moves to the start of the area: that slot must not be dirty. The consumer
            // reads nothing else under the pad, so the other slots there keep their state
            // (dirty or not) for the next record that covers them.
            if self.ndirty != 0 {
                self.mark(at, at + SLOT, false);
                self.scrub(0);
            }
            self.mem
                .frame(at)
                .store(VALID | PAD | (to_end - FRAME as u64), Ordering::Release);
            self.head += to_end;
            at = 0;
        }
        let large = is_large(total as usize);
        if large || self.ndirty != 0 {
            self.note(at, total as usize, large);
        }
        self.mem.track_write(at, FRAME + len);
        if !large && !stream && total as usize >= PREFETCH_MIN {
            // The consumer cleared the slot words of these lines (they sit modified in its
            // cache): ask for all of them at once rather than one store miss after another.
            // SAFETY: `[at, at + total)` lies inside the data area.
            prefetch_lines(unsafe { self.mem.data.add(at) }, total as usize);
        }
        // SAFETY: `[at + FRAME, at + FRAME + len)` lies inside the data area and is free.
        fill(unsafe { self.mem.data.add(at + FRAME) });
        #[cfg(loom)]
        if large {
            // A payload word that reads as a frame, in the first word of each slot the
            // consumer will not clear: the model sees it if the producer fails to scrub.
            for s in (at + SLOT..at + total as usize).step_by(SLOT) {
                self.mem.frames[s / SLOT].store(VALID | 8, Ordering::Relaxed);
            }
        }
        self.mem
            .frame(at)
            .store(VALID | len as u64, Ordering::Release);
        if self.turn && total as usize >= DEMOTE_MIN {
            self.turn = false;
            // SAFETY: `[at, at + total)` lies inside the data area.
            demote_lines(unsafe { self.mem.data.add(at) }, total as usize);
        }
        self.head += total;
        // Records never wrap, so the new position is at most the end of the area.
        let end = at + total as usize;
        self.pos = end;
        if self.pos == self.mem.cap {
            self.pos = 0;
        }
        if end > self.warm_mark {
            // After publishing the record, so that the system call overlaps the consumer's
            // work.
            warm_rest(&self.mem, &mut self.warm, &mut self.warm_mark);
        }
        if stream {
            // (the next record is likely streamed too: nothing to ask for)
        } else if total as usize >= PREFETCH_MIN
            && self.hot_lap
            && self.pos > self.hot
            && at >= total as usize
        {
            // The next record of a ping-pong kept to the hot part starts over at 0 (if the
            // ring is empty then): ask for those lines, not the ones after this record (the
            // record just written does not overlap them: the consumer reads it now). A hint:
            // `[0, total)` lies inside the data area anyway (`total <= cap / 2`).
            prefetch_lines(self.mem.data, total as usize);
        } else if total as usize >= PREFETCH_MIN {
            // The next record's lines, while the caller goes on (or waits for a reply).
            let free = (self.cached_tail + cap - self.head) as usize;
            if let Some((from, end)) = ahead_range(self.pos, total as usize, free, self.mem.cap) {
                // SAFETY: `[from, end)` lies inside the data area (`ahead_range`).
                prefetch_lines(unsafe { self.mem.data.add(from) }, end - from);
            }
        }
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
    /// `tail % cap`, kept incrementally (no division on the polling path).
    pos: usize,
    current: Option<(usize, usize)>,
    /// As the producer's ([`Consumer::warm_ahead`]).
    warm: usize,
    warm_mark: usize,
}

impl Consumer {
    /// Consumer for a fresh (zeroed) ring.
    pub fn new(mem: RingMem) -> Consumer {
        let tail = mem.ctl().tail.load(Ordering::Relaxed);
        Consumer {
            pos: (tail % mem.cap as u64) as usize,
            warm: mem.cap,
            warm_mark: mem.cap,
            mem,
            tail,
            current: None,
        }
    }

    /// As [`Producer::warm_ahead`], for the consumer's mapping of the ring: once it has
    /// consumed past half of the first `warm` data bytes, it maps the rest (which the
    /// producer has faulted in by then) in one system call instead of one fault per 64 KiB.
    pub fn warm_ahead(&mut self, warm: usize) {
        (self.warm, self.warm_mark) = warm_marks(self.mem.cap, warm);
    }

    /// `true` if [`Consumer::peek`] may return a record (one `Acquire` load of the frame word
    /// at the consumer's position; no record is consumed). Cheap enough for idle polling.
    #[inline]
    pub fn ready(&self) -> bool {
        self.current.is_some() || self.mem.frame(self.pos).load(Ordering::Acquire) & VALID != 0
    }

    /// The next record, as (pointer to its bytes, length), without consuming it. Returns
    /// `None` if the ring is empty. A corrupt frame (length out of bounds) is reported as
    /// `Err`.
    #[inline]
    pub fn peek(&mut self) -> Result<Option<(*const u8, usize)>, RingCorrupt> {
        if let Some((pos, len)) = self.current {
            // SAFETY: as when it was first returned.
            return Ok(Some((unsafe { self.mem.data.add(pos + FRAME) }, len)));
        }
        let cap = self.mem.cap;
        loop {
            let pos = self.pos;
            let f = self.mem.frame(pos).load(Ordering::Acquire);
            if f & VALID == 0 {
                return Ok(None);
            }
            let len = (f & 0xffff_ffff) as usize;
            if pos + FRAME + len > cap {
                return Err(RingCorrupt { pos: self.tail });
            }
            if f & PAD != 0 {
                // The slots under the pad were cleared on the previous lap.
                self.mem.frame(pos).store(0, Ordering::Relaxed);
                self.tail += (FRAME + len) as u64;
                self.advance(pos, FRAME + len);
                continue;
            }
            self.mem.track_read(pos, FRAME + len);
            self.current = Some((pos, len));
            // SAFETY: in bounds (checked) and published (acquired above).
            return Ok(Some((unsafe { self.mem.data.add(pos + FRAME) }, len)));
        }
    }

    /// Bytes consumed from the ring so far (records and pads).
    #[inline(always)]
    pub fn consumed(&self) -> u64 {
        self.tail
    }

    /// Consumes the record returned by the last [`Consumer::peek`] and frees its space.
    #[inline]
    pub fn release(&mut self) {
        if let Some((pos, len)) = self.current.take() {
            let total = record_bytes(len);
            if is_large(total) {
                // Only the frame: the producer scrubs the other slots where needed.
                self.mem.track_write(pos, FRAME);
            } else {
                self.mem.track_write(pos, total);
                self.mem.clear_slots(pos, total);
            }
            self.mem.frame(pos).store(0, Ordering::Relaxed);
            self.tail += total as u64;
            self.advance(pos, total);
            self.mem.ctl().tail.store(self.tail, Ordering::Release);
            if pos + total > self.warm_mark {
                warm_rest(&self.mem, &mut self.warm, &mut self.warm_mark);
            }
        }
    }

    /// Moves the position past `n` bytes at `pos` (records and pads end at most at the end
    /// of the area; reaching it wraps to 0).
    #[inline(always)]
    fn advance(&mut self, pos: usize, n: usize) {
        self.pos = pos + n;
        if self.pos >= self.mem.cap {
            self.pos = 0;
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Room for rings of up to 16 KiB (large records need more than 1 KiB).
    const BUF: usize = 16 << 10;

    #[repr(C, align(64))]
    struct Buf([u8; CTL_BYTES + BUF]);

    fn ring(buf: &mut Buf) -> (Producer, Consumer) {
        ring_of(buf, 1024)
    }

    fn ring_of(buf: &mut Buf, cap: usize) -> (Producer, Consumer) {
        assert!(cap <= BUF);
        // SAFETY: buf is aligned, zeroed and outlives the ring within the test.
        let mem = unsafe { RingMem::from_raw(buf.0.as_mut_ptr(), cap) };
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
        let mut buf = Buf([0; CTL_BYTES + BUF]);
        let (mut p, mut c) = ring(&mut buf);
        assert_eq!(p.max_record(), 504);
        assert!(!c.ready());
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
            assert!(c.ready(), "a pushed record must be visible");
            if round % 3 == 0 {
                assert_eq!(pop(&mut c), sent.pop_front());
            }
        }
        while let Some(m) = sent.pop_front() {
            assert_eq!(pop(&mut c).as_ref(), Some(&m));
        }
        assert_eq!(pop(&mut c), None);
        assert!(!c.ready());
        assert!(p.is_drained());
    }

    /// Two threads, many laps, sizes crossing slot and line boundaries: every record arrives
    /// intact and in order (checks the slot-clearing that makes polling one word safe).
    #[test]
    fn threads_stream_records_intact() {
        let mut buf = Box::new(Buf([0; CTL_BYTES + BUF]));
        // SAFETY: buf outlives both threads (joined in scope).
        let mem = unsafe { RingMem::from_raw(buf.0.as_mut_ptr(), 1024) };
        let (mut p, mut c) = (Producer::new(mem.clone()), Consumer::new(mem));
        let n = 20_000u32;
        let len_of = |i: u32| ((i * 7919) % 300) as usize;
        std::thread::scope(|s| {
            s.spawn(move || {
                for i in 0..n {
                    let msg: Vec<u8> = (0..len_of(i)).map(|k| (k as u32 ^ i) as u8).collect();
                    while !push(&mut p, &msg) {
                        std::thread::yield_now();
                    }
                }
            });
            for i in 0..n {
                let got = loop {
                    match pop(&mut c) {
                        Some(v) => break v,
                        None => std::thread::yield_now(),
                    }
                };
                let want: Vec<u8> = (0..len_of(i)).map(|k| (k as u32 ^ i) as u8).collect();
                assert_eq!(got, want, "record {i}");
            }
        });
        assert_eq!(pop(&mut c), None);
        drop(buf);
    }

    /// Records of up to 24 bytes take one slot: two of them share a cache line, and a
    /// consumed one leaves its slots cleared for the next lap.
    #[test]
    fn small_records_share_a_line() {
        let mut buf = Buf([0; CTL_BYTES + BUF]);
        let (mut p, mut c) = ring(&mut buf);
        assert_eq!(
            (record_bytes(0), record_bytes(24), record_bytes(25)),
            (32, 32, 64)
        );
        assert!(push(&mut p, &[1; 24]));
        assert!(push(&mut p, &[2; 8]));
        let (a, _) = c.peek().unwrap().unwrap();
        c.release();
        let (b, n) = c.peek().unwrap().unwrap();
        assert_eq!((b as usize - a as usize, n), (SLOT, 8));
        assert_eq!(
            a as usize / LINE,
            b as usize / LINE,
            "both records in one line"
        );
        c.release();
        // A lap of records of every size from 0 to 100 bytes over these slots.
        for round in 0..100usize {
            let msg: Vec<u8> = (0..round).map(|i| (i ^ round) as u8).collect();
            assert!(push(&mut p, &msg));
            assert_eq!(pop(&mut c), Some(msg));
            assert!(!c.ready(), "nothing but zeros behind a consumed record");
        }
    }

    /// A record whose payload words all read as frames (`VALID`, or `VALID | PAD`, with an
    /// in-bounds length), `seq` in its first word.
    fn frame_like(len: usize, seq: u64) -> Vec<u8> {
        let mut v = Vec::with_capacity(len + 8);
        v.extend_from_slice(&seq.to_le_bytes());
        let mut k = 0u64;
        while v.len() < len {
            let w = if k % 3 == 2 {
                VALID | PAD | 56
            } else {
                VALID | ((k % 5) * 8)
            };
            v.extend_from_slice(&w.to_le_bytes());
            k += 1;
        }
        v.truncate(len);
        v
    }

    /// Phases of records of one length, then another, so that later records start on slots
    /// that held earlier laps' payload, and that payload reads as valid frames: the consumer
    /// must never take a stale word for a record, neither when it catches up (nothing ready
    /// behind the last record) nor in a stream with a second thread.
    #[test]
    fn stale_payload_is_never_a_frame() {
        // A 1 KiB ring with small records, and a 16 KiB one with large records among them.
        stale_payload_check(
            1024,
            &[200usize, 90, 24, 8, 130, 0, 504, 40, 250, 64, 17, 300],
        );
        stale_payload_check(
            BUF,
            &[
                5000,
                90,
                24,
                8,
                LARGE - FRAME,
                0,
                BUF / 2 - FRAME,
                40,
                6000,
                64,
                17,
                4100,
            ],
        );
    }

    fn stale_payload_check(cap: usize, lens: &[usize]) {
        assert!(cap < 2048 || lens.iter().any(|&n| is_large(record_bytes(n))));
        let mut buf = Buf([0; CTL_BYTES + BUF]);
        let (mut p, mut c) = ring_of(&mut buf, cap);
        let mut seq = 0u64;
        for phase in 0..60usize {
            let len = lens[phase % lens.len()];
            let mut sent = std::collections::VecDeque::new();
            // Fill the ring (every slot written, several laps over the phases), then drain
            // it, checking that nothing is ready behind the last record.
            for _ in 0..(1 + phase % 4) {
                loop {
                    let m = frame_like(len, seq);
                    if !push(&mut p, &m) {
                        break;
                    }
                    seq += 1;
                    sent.push_back(m);
                }
                while let Some(m) = sent.pop_front() {
                    assert_eq!(pop(&mut c).as_ref(), Some(&m), "phase {phase}");
                }
                assert!(!c.ready(), "stale word taken for a record (phase {phase})");
                assert_eq!(pop(&mut c), None, "phase {phase}");
            }
            // The consumer one record behind the producer.
            for _ in 0..37 {
                let m = frame_like(len, seq);
                seq += 1;
                assert!(push(&mut p, &m));
                assert_eq!(pop(&mut c), Some(m), "phase {phase}");
                assert!(!c.ready(), "stale word taken for a record (phase {phase})");
            }
        }

        let mut buf = Box::new(Buf([0; CTL_BYTES + BUF]));
        // SAFETY: buf outlives both threads (joined in scope).
        let mem = unsafe { RingMem::from_raw(buf.0.as_mut_ptr(), cap) };
        let (mut p, mut c) = (Producer::new(mem.clone()), Consumer::new(mem));
        let n = 30_000u64;
        let len_of = |i: u64| lens[(i / 500) as usize % lens.len()].max(8);
        std::thread::scope(|s| {
            s.spawn(move || {
                for i in 0..n {
                    let m = frame_like(len_of(i), i);
                    while !push(&mut p, &m) {
                        std::hint::spin_loop();
                    }
                }
            });
            for i in 0..n {
                let got = loop {
                    if let Some(v) = pop(&mut c) {
                        break v;
                    }
                    std::hint::spin_loop();
                };
                assert_eq!(got, frame_like(len_of(i), i), "record {i}");
            }
        });
        assert_eq!(pop(&mut c), None);
        drop(buf);
    }

    /// The first word of slot `s` of the data area.
    fn head_word(buf: &Buf, s: usize) -> u64 {
        let at = CTL_BYTES + s * SLOT;
        u64::from_le_bytes(buf.0[at..at + 8].try_into().unwrap())
    }

    /// The consumer writes only the frame word of a large record, never its other slots
    /// (they stay in the producer's cache for its next lap); a later record that ends on
    /// one of those slots finds it zeroed by the producer, so the consumer stops there. A
    /// new producer on a used ring treats every slot as dirty.
    #[test]
    fn large_records_are_not_cleared_and_scrubbed_by_the_producer() {
        let mut buf = Buf([0; CTL_BYTES + BUF]);
        let len = LARGE - FRAME;
        assert!(is_large(record_bytes(len)) && !is_large(record_bytes(len - SLOT)));
        let (mut p, mut c) = ring_of(&mut buf, BUF);
        let big = frame_like(len, 1);
        assert!(push(&mut p, &big));
        assert_eq!(pop(&mut c), Some(big.clone()));
        assert!(!c.ready());
        // Slot 0 (the frame) cleared; slots 1.. still hold the payload's words, which read
        // as frames.
        assert_eq!(head_word(&buf, 0), 0);
        for s in 1..LARGE / SLOT {
            let w = u64::from_le_bytes(big[s * SLOT - 8..s * SLOT].try_into().unwrap());
            assert_eq!(
                head_word(&buf, s),
                w,
                "slot {s} was written by the consumer"
            );
            assert!(w & VALID != 0);
        }
        // Wrap twice with 8-byte records (one slot each): they end on every slot of the
        // large record's area in turn.
        for i in 0..(BUF / SLOT) as u64 * 2 {
            let m = frame_like(8, i);
            assert!(push(&mut p, &m));
            assert_eq!(pop(&mut c), Some(m), "record {i}");
            assert!(!c.ready(), "stale word taken for a record after record {i}");
        }
        // A producer and a consumer made anew on this used ring (tail not zero) whose slots
        // all hold frame-like words but the consumer's position: large records, then small
        // ones, never a stale frame.
        drop((p, c));
        for s in 0..BUF / SLOT {
            buf.0[CTL_BYTES + s * SLOT..CTL_BYTES + s * SLOT + 8]
                .copy_from_slice(&(VALID | 8).to_le_bytes());
        }
        let (mut p, mut c) = ring_of(&mut buf, BUF);
        c.mem.frame(c.pos).store(0, Ordering::Relaxed);
        for i in 0..200u64 {
            let n = if i % 7 < 3 {
                len + 40
            } else {
                8 + (i as usize % 3) * 24
            };
            let m = frame_like(n, i);
            assert!(push(&mut p, &m));
            assert_eq!(pop(&mut c), Some(m), "record {i}");
            assert!(!c.ready(), "stale word taken for a record after record {i}");
        }
    }

    /// A link's record is a ping-pong's turn (its lines demoted) only when a blocking send
    /// writes it and the link consumed a record from the peer since its last push: not the
    /// first record, not the records of a stream, not a nonblocking send's, and once per
    /// consumption; records below `DEMOTE_MIN` are never
    /// demoted. Demoted or not, the records arrive intact and in order.
    #[test]
    fn demotes_only_a_turn_after_an_inbound_record() {
        let (mut bo, mut bi) = (Buf([0; CTL_BYTES + BUF]), Buf([0; CTL_BYTES + BUF]));
        // Our outbound ring (we produce, the peer consumes) and our inbound one.
        let (mut p, mut peer_c) = ring_of(&mut bo, 8192);
        let (mut peer_p, mut c) = ring_of(&mut bi, 8192);
        let big = vec![0xa5u8; DEMOTE_MIN];
        let small = vec![0x5au8; DEMOTE_MIN - FRAME - SLOT];
        // Sends `data` as the link does: note the inbound ring, then push; returns whether
        // the record was a demoted turn.
        let send = |p: &mut Producer, c: &Consumer, data: &[u8]| {
            p.answer_next();
            p.note_inbound(c.consumed());
            let turn = p.turn && record_bytes(data.len()) >= DEMOTE_MIN;
            assert!(push(p, data));
            turn
        };
        // A stream: nothing consumed in between.
        assert!(!send(&mut p, &c, &big), "first record demoted");
        assert!(!send(&mut p, &c, &big), "a stream's record demoted");
        assert_eq!(pop(&mut peer_c).as_deref(), Some(&big[..]));
        assert_eq!(pop(&mut peer_c).as_deref(), Some(&big[..]));
        // Ping-pong turns: one record in, one out.
        for i in 0..6 {
            assert!(push(&mut peer_p, &[i; 8]));
            assert_eq!(pop(&mut c), Some(vec![i; 8]));
            assert!(send(&mut p, &c, &big), "turn {i} not demoted");
            assert_eq!(pop(&mut peer_c).as_deref(), Some(&big[..]));
            // The next record without anything consumed is a stream's again.
            if i % 2 == 1 {
                assert!(
                    !send(&mut p, &c, &big),
                    "second record after turn {i} demoted"
                );
                assert_eq!(pop(&mut peer_c).as_deref(), Some(&big[..]));
            }
        }
        // A nonblocking send's record after one consumed is no turn (bibw's windows).
        assert!(push(&mut peer_p, &[8; 8]));
        assert_eq!(pop(&mut c), Some(vec![8; 8]));
        p.note_inbound(c.consumed());
        assert!(!p.turn, "a nonblocking send's record demoted");
        assert!(push(&mut p, &big));
        assert_eq!(pop(&mut peer_c).as_deref(), Some(&big[..]));
        // A small record on its turn is not demoted.
        assert!(push(&mut peer_p, &[9; 8]));
        assert_eq!(pop(&mut c), Some(vec![9; 8]));
        assert!(!send(&mut p, &c, &small));
        assert_eq!(pop(&mut peer_c).as_deref(), Some(&small[..]));
    }

    /// The range the producer prefetches after a record: never the line the consumer
    /// polls (the one holding `pos`), never past the space known free nor the area's end.
    #[test]
    fn prefetch_ahead_stays_in_free_space() {
        let cap = 4096;
        // Room enough: the next record's size, from the line after the polled one.
        assert_eq!(ahead_range(0, 512, cap, cap), Some((64, 512)));
        assert_eq!(ahead_range(32, 512, cap, cap), Some((64, 544)));
        assert_eq!(ahead_range(96, 256, cap, cap), Some((128, 352)));
        // Bounded by the free space and by the end of the area.
        assert_eq!(ahead_range(0, 512, 300, cap), Some((64, 300)));
        assert_eq!(ahead_range(3840, 512, cap, cap), Some((3904, 4096)));
        // Nothing past the polled line: a full ring, the last line of the area.
        assert_eq!(ahead_range(0, 512, 0, cap), None);
        assert_eq!(ahead_range(64, 512, 32, cap), None);
        assert_eq!(ahead_range(4032, 512, cap, cap), None);
        for pos in (0..cap).step_by(SLOT) {
            for total in [256, 288, 1024, 8224] {
                for free in [0, 32, 64, 100, 1000, cap] {
                    if let Some((from, end)) = ahead_range(pos, total, free, cap) {
                        assert!(
                            from / LINE > pos / LINE,
                            "polled line: {pos} {total} {free}"
                        );
                        assert!(end <= cap && end <= pos + free && end <= pos + total);
                    }
                }
            }
        }
    }

    /// Where the next record starts (byte offset in the data area), and its payload.
    fn pop_at(c: &mut Consumer) -> Option<(usize, Vec<u8>)> {
        let (p, _) = c.peek().unwrap()?;
        let at = p as usize - c.mem.data as usize - FRAME;
        Some((at, pop(c).unwrap()))
    }

    /// Sends `data` as on a ping-pong's turn: a blocking send right after the link consumed
    /// a record from the peer (`inbound` must differ from the last call's).
    fn push_turn(p: &mut Producer, inbound: u64, data: &[u8]) -> bool {
        p.answer_next();
        p.note_inbound(inbound);
        push(p, data)
    }

    /// A ping-pong keeps to the hot part: once a record ends past `hot` and the consumer
    /// has taken everything, the next one starts over at 0 behind an early pad, which the
    /// consumer skips like the pad at the end (its frame cleared, `tail` past it). A stream
    /// (ring not empty) goes on past `hot` and fills the whole ring; a ping-pong after it
    /// comes back to the start.
    #[test]
    fn hot_wrap_keeps_a_ping_pong_at_the_start_and_streams_use_the_whole_ring() {
        let mut buf = Buf([0; CTL_BYTES + BUF]);
        let (mut p, mut c) = ring_of(&mut buf, BUF);
        let hot = 4096;
        p.hot_wrap(hot);
        let msg = |i: u64| frame_like(1000, i);
        let mut starts = std::collections::BTreeSet::new();
        let mut pads = 0;
        for i in 0..100u64 {
            let before = c.consumed();
            assert!(push_turn(&mut p, i + 1, &msg(i)));
            let (at, got) = pop_at(&mut c).unwrap();
            assert_eq!(got, msg(i), "record {i}");
            assert!(at <= hot, "record {i} at {at}, past the hot part");
            if at == 0 && i > 0 {
                // The early pad: from the end of the last record to the end of the area.
                pads += 1;
                assert!(c.consumed() - before >= (BUF - hot) as u64, "record {i}");
                assert!(!c.ready());
            }
            starts.insert(at);
            assert!(p.is_drained(), "record {i}");
        }
        assert!(pads >= 15, "{pads} early pads");
        assert!(*starts.last().unwrap() <= hot);
        // The pads' frames were cleared by the consumer: no word in the area past the hot
        // part reads as a frame (nothing was ever written past hot + one record).
        for s in (hot + 1024) / SLOT..BUF / SLOT {
            assert_eq!(head_word(&buf, s), 0, "slot {s}");
        }
        // A stream: its first record starts over (the ring is empty), the others go on past
        // `hot` (the ring is not empty) up to the early pad, which stops them until the
        // consumer passes it; then to the end of the area, filling the ring.
        let mut sent = std::collections::VecDeque::new();
        let mut k = 1000u64;
        let mut passed = false;
        loop {
            let m = msg(k);
            if push_turn(&mut p, 10_000 + k, &m) {
                k += 1;
                sent.push_back(m);
                continue;
            }
            if passed {
                break;
            }
            assert!(sent.len() >= hot / 1024, "{} records", sent.len());
            let (at, got) = pop_at(&mut c).unwrap();
            assert_eq!((at, Some(got)), (0, sent.pop_front()));
            passed = true;
        }
        assert!(
            (sent.len() + 1) * record_bytes(1000) > BUF - 2 * record_bytes(1000),
            "{} records: the stream did not fill the ring",
            sent.len()
        );
        let mut deepest = 0;
        while let Some(m) = sent.pop_front() {
            let (at, got) = pop_at(&mut c).unwrap();
            assert_eq!(got, m);
            deepest = deepest.max(at);
        }
        assert!(
            deepest > BUF - 2 * record_bytes(1000),
            "stream kept below {deepest}"
        );
        assert!(!c.ready());
        // The ping-pong again: back to the hot part within a lap.
        for i in 0..40u64 {
            assert!(push_turn(&mut p, 20_000 + i, &msg(i)));
            let (at, got) = pop_at(&mut c).unwrap();
            assert_eq!(got, msg(i));
            if i >= 20 {
                assert!(at <= hot, "record {i} at {at}");
            }
            assert!(!c.ready());
        }
        // Without a turn nor a known-empty ring (cached tail behind), no early wrap: a
        // blocking send with nothing consumed from the peer does not ask for `tail`.
        let mut fresh = Buf([0; CTL_BYTES + BUF]);
        let (mut p, mut c) = ring_of(&mut fresh, BUF);
        p.hot_wrap(hot);
        for i in 0..15u64 {
            assert!(push(&mut p, &msg(i)));
            let (at, got) = pop_at(&mut c).unwrap();
            assert_eq!(got, msg(i));
            assert_eq!(at, i as usize * record_bytes(1000), "record {i}");
        }
        // hot_wrap(0) and hot_wrap(cap): the whole ring.
        for h in [0, BUF] {
            let (mut p, mut c) = ring_of(&mut buf, BUF);
            p.hot_wrap(h);
            let mut deepest = 0;
            for i in 0..40u64 {
                assert!(push_turn(&mut p, i + 1, &msg(i)));
                deepest = deepest.max(pop_at(&mut c).unwrap().0);
            }
            assert!(deepest > BUF - 2 * record_bytes(1000), "hot {h}: {deepest}");
        }
    }

    /// An early pad at every slot of the area (the hot part's end moved slot by slot), with
    /// large records among small ones so that slots under the pads and where records end
    /// hold payload words that read as frames: the pads keep the dirty slots under them
    /// dirty (the consumer does not clear them) and the consumer never takes a stale word
    /// for a record, in ping-pongs and in short streams between them.
    #[test]
    fn early_pads_at_every_position_keep_the_slots_right() {
        let cap = BUF;
        let mut buf = Buf([0; CTL_BYTES + BUF]);
        let (mut p, mut c) = ring_of(&mut buf, cap);
        let lens = [LARGE - FRAME, 8, 100, LARGE + 300, 24, 600, 0, 2000, 40];
        let mut seq = 0u64;
        let mut early = 0;
        for hot in (SLOT..cap).step_by(SLOT) {
            p.hot_wrap(hot);
            for r in 0..3 {
                let len = lens[(hot / SLOT + r) % lens.len()];
                let burst = if (hot / SLOT) % 5 == 0 { 3 } else { 1 };
                let mut sent = std::collections::VecDeque::new();
                for _ in 0..burst {
                    let m = frame_like(len, seq);
                    let (pos, total) = (p.pos, record_bytes(len));
                    // An early pad stops a burst at its start until the consumer passes it.
                    while !push_turn(&mut p, seq + 1, &m) {
                        assert!(!sent.is_empty(), "full while empty (hot {hot})");
                        assert_eq!(pop(&mut c), sent.pop_front(), "hot {hot}");
                    }
                    if pos != 0 && pos + total <= cap && p.pos == total {
                        early += 1;
                    }
                    seq += 1;
                    sent.push_back(m);
                }
                for m in sent {
                    assert_eq!(pop(&mut c), Some(m), "hot {hot}");
                }
                assert!(!c.ready(), "stale word taken for a record (hot {hot})");
            }
        }
        assert!(early > 200, "{early} early pads");
    }

    /// The property: any sequence of pushes (on a turn or not), pops, hot parts and
    /// `is_drained` checks delivers exactly the records pushed, in order, with nothing
    /// ready behind the last, whatever pads (early or at the end) the producer writes.
    mod prop {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            Push(usize, bool),
            Pop,
            Hot(usize),
            Drained,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                4 => (0usize..5000, any::<bool>()).prop_map(|(n, t)| Op::Push(n, t)),
                4 => Just(Op::Pop),
                1 => (0usize..9000).prop_map(|h| Op::Hot(h / SLOT * SLOT)),
                1 => Just(Op::Drained),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(256))]
            #[test]
            fn ring_matches_a_queue(ops in proptest::collection::vec(op(), 1..300)) {
                let cap = 8192;
                let mut buf = Buf([0; CTL_BYTES + BUF]);
                let (mut p, mut c) = ring_of(&mut buf, cap);
                let mut model = std::collections::VecDeque::new();
                let mut seq = 0u64;
                for op in ops {
                    match op {
                        Op::Push(n, turn) => {
                            let n = n.min(p.max_record());
                            let m = frame_like(n, seq);
                            let ok = if turn {
                                push_turn(&mut p, seq + 1, &m)
                            } else {
                                push(&mut p, &m)
                            };
                            seq += 1;
                            if ok {
                                model.push_back(m);
                            } else {
                                prop_assert!(!model.is_empty(), "full while empty");
                            }
                        }
                        Op::Pop => {
                            prop_assert_eq!(pop(&mut c), model.pop_front());
                            if model.is_empty() {
                                prop_assert!(!c.ready());
                            }
                        }
                        Op::Hot(h) => p.hot_wrap(h),
                        Op::Drained => prop_assert_eq!(p.is_drained(), model.is_empty()),
                    }
                    // The count of dirty slots is the bitmap's.
                    let set: u32 = p.dirty.iter().map(|w| w.count_ones()).sum();
                    prop_assert_eq!(p.ndirty, set as usize);
                }
                while let Some(m) = model.pop_front() {
                    prop_assert_eq!(pop(&mut c), Some(m));
                }
                prop_assert!(!c.ready());
            }
        }
    }

    #[test]
    fn corrupt_frame_is_reported() {
        let mut buf = Buf([0; CTL_BYTES + BUF]);
        let (mut p, mut c) = ring(&mut buf);
        assert!(push(&mut p, &[1, 2, 3]));
        // Overwrite the frame with an impossible length.
        buf.0[CTL_BYTES..CTL_BYTES + 8].copy_from_slice(&(VALID | 5000).to_le_bytes());
        assert!(c.peek().is_err());
    }
}
