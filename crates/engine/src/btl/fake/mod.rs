//! An in-process transport for tests: pairs of [`FakeLink`]s joined by a [`Wire`] of record
//! queues that a test can inspect, hold back, cut (the peer's death) or feed with forged
//! bytes, so the protocol runs in one process, deterministically, without threads.
//!
//! Records are stored as their bytes (header, then payload), as a real transport would carry
//! them, so a test can truncate or corrupt one; [`FakeLink::poll`] parses them back with the
//! same checks as the other links.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::btl::{Caps, Link, LinkError};
use crate::pml::hdr::{Hdr, HDR};

/// One direction of a wire.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    /// Records in flight, oldest first (header bytes, then payload).
    pub records: VecDeque<Vec<u8>>,
    /// Every record ever sent this way: kind and payload length.
    pub log: Vec<(u8, usize)>,
    /// The indices in `log` of the records sent after [`Link::stream_next`].
    pub streamed: Vec<usize>,
    /// Held back: the receiver sees nothing until the test lets go.
    pub held: bool,
    /// Most records in flight; a send beyond it is refused (the link is full).
    pub capacity: usize,
}

/// The shared state of a pair of links: `dirs[0]` carries side 0's records to side 1,
/// `dirs[1]` the other way.
#[derive(Debug, Default)]
pub(crate) struct Wire {
    /// The two directions.
    pub dirs: [Queue; 2],
    /// Cut: sends vanish; each side reads what was in flight, then sees the peer closed.
    pub cut: bool,
    /// How often each side looked for records ([`Link::ready`]): how many polls it made.
    pub looks: [u64; 2],
}

/// The test's handle on a wire.
#[derive(Clone, Debug)]
pub(crate) struct WireHandle(Arc<Mutex<Wire>>);

impl WireHandle {
    /// The wire, locked.
    pub fn lock(&self) -> MutexGuard<'_, Wire> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Kinds of the records sent so far from side `from`, with payload lengths.
    pub fn log(&self, from: usize) -> Vec<(u8, usize)> {
        self.lock().dirs[from].log.clone()
    }

    /// The indices (in [`WireHandle::log`]) of the records from side `from` sent after
    /// [`Link::stream_next`].
    pub fn streamed(&self, from: usize) -> Vec<usize> {
        self.lock().dirs[from].streamed.clone()
    }

    /// Holds back (or lets go of) the records from side `from`.
    pub fn hold(&self, from: usize, held: bool) {
        self.lock().dirs[from].held = held;
    }

    /// How often side `side` looked for records so far (its polls of this link).
    pub fn looks(&self, side: usize) -> u64 {
        self.lock().looks[side]
    }

    /// Cuts the wire (the peer process died).
    pub fn cut(&self) {
        self.lock().cut = true;
    }

    /// Cuts the newest record in flight from side `from` down to `len` bytes (a record
    /// shorter than a header is what a corrupt transport would deliver).
    pub fn truncate_last(&self, from: usize, len: usize) {
        if let Some(r) = self.lock().dirs[from].records.back_mut() {
            r.truncate(len);
        }
    }

    /// Puts raw bytes on the wire from side `from`, as if the peer had sent them.
    pub fn inject(&self, from: usize, bytes: Vec<u8>) {
        self.lock().dirs[from].records.push_back(bytes);
    }
}

/// One end of a wire.
#[derive(Debug)]
pub(crate) struct FakeLink {
    wire: WireHandle,
    /// 0 or 1: which direction we send on.
    side: usize,
    max_payload: usize,
    max_data: usize,
    /// The record handed out by the last poll and not yet released.
    current: Option<Vec<u8>>,
    /// [`Link::stream_next`] was called for the next record.
    stream: bool,
}

/// A pair of links (side 0, side 1) and the wire between them: records of at most
/// `max_payload` bytes (`max_data` for DATA fragments), at most `capacity` in flight per
/// direction.
pub(crate) fn pair(
    max_payload: usize,
    max_data: usize,
    capacity: usize,
) -> (FakeLink, FakeLink, WireHandle) {
    let wire = WireHandle(Arc::new(Mutex::new(Wire::default())));
    for d in &mut wire.lock().dirs {
        d.capacity = capacity;
    }
    let end = |side| FakeLink {
        wire: wire.clone(),
        side,
        max_payload,
        max_data,
        current: None,
        stream: false,
    };
    (end(0), end(1), wire)
}

/// The bytes of a record.
pub(crate) fn encode(hdr: &Hdr, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![0u8; HDR];
    // SAFETY: `v` holds HDR bytes; Hdr is plain data (repr(C), no padding); unaligned write.
    unsafe { v.as_mut_ptr().cast::<Hdr>().write_unaligned(*hdr) };
    v.extend_from_slice(payload);
    v
}

impl Link for FakeLink {
    fn name(&self) -> &'static str {
        "fake"
    }

    fn caps(&self) -> Caps {
        Caps::default()
    }

    fn max_payload(&self) -> usize {
        self.max_payload
    }

    fn max_data(&self) -> usize {
        self.max_data
    }

    fn stream_next(&mut self) {
        self.stream = true;
    }

    unsafe fn try_send(&mut self, hdr: &Hdr, payload: *const u8, len: usize) -> bool {
        let stream = std::mem::take(&mut self.stream);
        let mut w = self.wire.lock();
        if w.cut {
            // Gone with the peer.
            return true;
        }
        let q = &mut w.dirs[self.side];
        if q.records.len() >= q.capacity {
            return false;
        }
        let data = if len == 0 {
            &[][..]
        } else {
            // SAFETY: the caller guarantees `len` readable bytes.
            unsafe { std::slice::from_raw_parts(payload, len) }
        };
        q.records.push_back(encode(hdr, data));
        if stream {
            q.streamed.push(q.log.len());
        }
        q.log.push((hdr.kind, len));
        true
    }

    fn poll(&mut self) -> Result<Option<(Hdr, *const u8, usize)>, LinkError> {
        if self.current.is_none() {
            let mut w = self.wire.lock();
            let cut = w.cut;
            let q = &mut w.dirs[1 - self.side];
            if q.held {
                return Ok(None);
            }
            match q.records.pop_front() {
                Some(r) => self.current = Some(r),
                None if cut => return Err(LinkError::Closed { partial: 0 }),
                None => return Ok(None),
            }
        }
        let r = self.current.as_ref().expect("set above");
        if r.len() < HDR {
            let n = r.len();
            self.current = None;
            return Err(LinkError::Short(n));
        }
        // SAFETY: the record holds at least HDR bytes; Hdr is plain data (any bit pattern).
        let hdr = unsafe { r.as_ptr().cast::<Hdr>().read_unaligned() };
        // SAFETY: in bounds of the record, which stays put until `release`.
        Ok(Some((hdr, unsafe { r.as_ptr().add(HDR) }, r.len() - HDR)))
    }

    fn release(&mut self) {
        self.current = None;
    }

    fn ready(&self) -> bool {
        let mut w = self.wire.lock();
        w.looks[self.side] += 1;
        if self.current.is_some() {
            return true;
        }
        let q = &w.dirs[1 - self.side];
        w.cut || (!q.held && !q.records.is_empty())
    }
}
