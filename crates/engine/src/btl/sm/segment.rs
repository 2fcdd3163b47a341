//! The `sm` segment: its layout, creation and publication, and attaching to the segments
//! of the peers on our node.
//!
//! Every rank creates one `memfd` segment with one slot per sending peer: its ring
//! ([`CTL_BYTES`] + ring bytes), then (if any) its bulk buffer ([`BULK_CTL`] + bulk bytes),
//! then the cooperative-copy control area ([`COOP_CTL`]). The rank publishes
//! `fd,length,ring,bulk` as the `sm` section of its endpoint record (`crate::btl::Endpoint`);
//! a peer on the same node opens the segment through `/proc/<pid>/fd/<fd>` and maps it: it
//! produces into its slot of our segment and consumes its own segment's slot for us.

use std::os::fd::OwnedFd;
use std::sync::Arc;

use super::bulk::{self, BulkMem, BulkRx, BulkTx, BULK_CTL};
use super::coop::{CoopMem, COOP_CTL};
use super::link::SmLink;
use super::params::Settings;
use super::ring::{Consumer, Producer, RingMem, CTL_BYTES, WARM_AHEAD};
use crate::btl::{Job, Links, Record, Setup};
use crate::sys::{self, Mapping};
use crate::Error;

/// The slot layout of a segment with rings of `ring` bytes and bulk buffers of `bulk`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Ring bytes (a multiple of 64).
    pub ring: usize,
    /// Bulk buffer bytes (a multiple of 64; 0: none).
    pub bulk: usize,
}

impl Layout {
    /// Offset of the bulk buffer in a slot.
    pub fn bulk_at(&self) -> usize {
        CTL_BYTES + self.ring
    }
    /// Offset of the cooperative-copy control area in a slot.
    pub fn coop_at(&self) -> usize {
        self.bulk_at()
            + if self.bulk > 0 {
                BULK_CTL + self.bulk
            } else {
                0
            }
    }
    /// Bytes of one slot (a multiple of 64).
    pub fn slot(&self) -> usize {
        self.coop_at() + COOP_CTL
    }
}

/// Most bytes of rings (to one peer and from it count once) for which a rank keeps its rings
/// faulted in ahead of their use ([`warm_rings`]): one peer's rings at the default 320 KiB (a
/// job of 2 ranks on the node). Faulted in, rings count in the rank's resident memory: at 8
/// ranks with 7 peers' 256 KiB rings faulted in whole, peak RSS after `MPI_Init` was 7620 KiB
/// against Open MPI's 13720 (1.8 times less, where the goal is 2).
const PREFAULT_MAX: usize = 320 << 10;

/// Whether a rank with `peers` peers on the node, rings of `ring` bytes, keeps its rings
/// faulted in ahead of their use ([`prefault_rings`], [`Producer::warm_ahead`]): only while
/// the peers are few, since a ring's first pass then allocates it whole for each pair that
/// talks long enough.
fn warm_rings(peers: usize, ring: usize) -> bool {
    peers.saturating_mul(ring.min(PREFAULT_MAX)) <= PREFAULT_MAX
}

/// Faults in the first [`WARM_AHEAD`] bytes of the outbound ring `tx` (mapping of the peer's
/// segment, offset, ring bytes) and the inbound ring `rx` (our segment) of a link; once the
/// records pass half of that, the producer and the consumer each fault in the rest of their
/// ring in one system call ([`Producer::warm_ahead`], [`Consumer::warm_ahead`]), so the
/// first pass of records takes no page fault. A fresh ring otherwise faults once per page in
/// the producer (allocation and first write) and once in the consumer, every 128 small
/// records, and a ping-pong waits for each of those faults (mpi4py's ping-pong measured its
/// first 8192 round trips, 256 KiB of 32-byte records, about 0.17 us per message slower
/// than the ones after them; faulting in 32 KiB at a time as the records went measured the
/// C ping-pong's 1 B row 1.09x slower, since that row runs through the first pass). Faulting
/// in whole rings when the link is made made both 320 KiB rings resident in both ranks of a
/// 2-rank job at once (640 KiB of its 5510 KiB peak RSS after one message each way). Best
/// effort: a kernel without `MADV_POPULATE_WRITE` faults as before. Returns the data bytes
/// of `tx` and `rx` faulted in.
fn prefault_rings(tx: (&Mapping, usize, usize), rx: (&Mapping, usize, usize)) -> (usize, usize) {
    for (m, at, ring) in [tx, rx] {
        let _ = m.populate(at, CTL_BYTES + WARM_AHEAD.min(ring));
    }
    (WARM_AHEAD.min(tx.2), WARM_AHEAD.min(rx.2))
}

/// Our segment between publication and attaching.
pub(crate) struct SmSetup {
    /// Kept open until the wire-up's last fence (peers open it through /proc).
    fd: OwnedFd,
    /// Bytes of the segment.
    len: usize,
    own: Arc<Mapping>,
    layout: Layout,
    /// The hot part of the bulk buffers we produce into (`btl_sm_bulk_size`;
    /// [`bulk::STREAM_FACTOR`]).
    bulk_hot: usize,
    /// `btl_sm_ring_hot`: the part of each ring we produce into that a ping-pong keeps to
    /// ([`Producer::hot_wrap`]).
    ring_hot: usize,
}

/// Opens the `sm` component: creates and maps our segment (one slot per rank), which its
/// section then publishes.
pub(crate) fn open(job: &Job) -> Result<Option<Box<dyn Setup>>, Error> {
    let s = Settings::read();
    let layout = Layout {
        ring: s.ring,
        bulk: bulk::bulk_bytes(s.bulk, job.size()),
    };
    let len = job.size() * layout.slot();
    let fd = sys::memfd("oxmpi-sm", len).map_err(job.sys_err("memfd_create"))?;
    let own = Mapping::map(&fd, len).map_err(job.sys_err("mmap of own segment"))?;
    Ok(Some(Box::new(SmSetup {
        fd,
        len,
        own: Arc::new(own),
        layout,
        bulk_hot: s.bulk,
        ring_hot: s.ring_hot,
    })))
}

impl Setup for SmSetup {
    /// `fd,length,ring,bulk`.
    fn section(&self) -> Option<String> {
        Some(format!(
            "{},{},{},{}",
            sys::raw_fd(&self.fd),
            self.len,
            self.layout.ring,
            self.layout.bulk
        ))
    }

    /// Maps the segment of every peer on our node that published one and links to it.
    fn connect(&mut self, job: &Job, linked: &[bool]) -> Result<Links, Error> {
        let mut out: Links = Vec::new();
        let wanted = |p: usize| !linked[p] && job.same_node(p) && job.uses(p, "sm");
        let peers = (0..linked.len()).filter(|&p| wanted(p)).count();
        let warm = warm_rings(peers, self.layout.ring);
        for p in (0..linked.len()).filter(|&p| wanted(p)) {
            // A rank whose sm did not open published no segment: it links to nobody by sm.
            if let Some(r) = job.section(p, "sm", 4)? {
                out.push((p, Box::new(self.attach(job, p, &r, warm)?)));
            }
        }
        Ok(out)
    }
}

impl SmSetup {
    /// Maps peer `p`'s segment (published as `r`, its `sm` section) and builds the link: we
    /// produce into slot `me` of its segment and consume slot `p` of ours; with `warm`, the
    /// rings are kept faulted in ahead of their use ([`prefault_rings`]).
    fn attach(&self, job: &Job, p: usize, r: &Record, warm: bool) -> Result<SmLink, Error> {
        let me = job.me;
        let n = job.size();
        let pfd: i32 = r.get(0)?;
        let plen: usize = r.get(1)?;
        let theirs = Layout {
            ring: r.get(2)?,
            bulk: r.get(3)?,
        };
        let ours = self.layout;
        let pstride = theirs.slot();
        if plen != n * pstride || theirs.ring % 64 != 0 || theirs.ring == 0 || theirs.bulk % 64 != 0
        {
            return Err(r.bad());
        }
        let ppid = job.eps[p].pid;
        let file = sys::open_peer_fd(ppid, pfd)
            .map_err(job.sys_err(format!("open of rank {p}'s segment (pid {ppid})")))?;
        let map = Mapping::map(&file, plen)
            .map_err(job.sys_err(format!("mmap of rank {p}'s segment")))?;
        let tx_base = map.ptr().wrapping_add(me as usize * pstride);
        let rx_base = self.own.ptr().wrapping_add(p * ours.slot());
        let warmed = warm.then(|| {
            prefault_rings(
                (&map, me as usize * pstride, theirs.ring),
                (&self.own, p * ours.slot(), ours.ring),
            )
        });
        // SAFETY: ring `me` of the peer's segment lies within the mapping, is 64-byte aligned
        // (page-aligned base, stride multiple of 64) and zero-initialised by ftruncate; we
        // are its only producer.
        let tx = unsafe { RingMem::from_raw(tx_base, theirs.ring) };
        // SAFETY: ring `p` of our own segment, same reasoning; we are its only consumer.
        let rx = unsafe { RingMem::from_raw(rx_base, ours.ring) };
        let bulk_tx = (theirs.bulk > 0).then(|| {
            // SAFETY: the bulk buffers follow the rings inside the same slots (same
            // reasoning: in bounds, 64-byte aligned, zeroed, one producer and one consumer).
            let mem = unsafe { BulkMem::from_raw(tx_base.add(theirs.bulk_at()), theirs.bulk) };
            BulkTx::new(mem, self.bulk_hot.min(theirs.bulk))
        });
        let bulk_rx = (ours.bulk > 0).then(|| {
            // SAFETY: as above, in our own segment.
            BulkRx::new(unsafe { BulkMem::from_raw(rx_base.add(ours.bulk_at()), ours.bulk) })
        });
        // SAFETY: the control areas end the same slots (in bounds, 64-byte aligned, zeroed;
        // one sender and one receiver each).
        let coop_tx = unsafe { CoopMem::from_raw(tx_base.add(theirs.coop_at())) };
        // SAFETY: as above, in our own segment.
        let coop_rx = unsafe { CoopMem::from_raw(rx_base.add(ours.coop_at())) };
        let (mut tx, mut rx) = (Producer::new(tx), Consumer::new(rx));
        tx.hot_wrap(self.ring_hot);
        if let Some((t, r)) = warmed {
            tx.warm_ahead(t);
            rx.warm_ahead(r);
        }
        Ok(SmLink {
            tx,
            rx,
            bulk_tx,
            bulk_rx,
            coop: Some((coop_rx, coop_tx)),
            _map: map,
            _own: Some(self.own.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The default ring size.
    const RING: usize = 320 << 10;

    /// Pages of `m` from byte `off`, `len` bytes, that are resident (`mincore`: for a memory
    /// file, allocated by any of its mappings).
    fn resident(m: &Mapping, off: usize, len: usize) -> usize {
        // SAFETY: `off..off + len` lies inside the mapping (the tests' ranges).
        let pages = unsafe { sys::resident_pages(m.ptr().add(off), len) };
        let pages = pages.unwrap_or_else(|e| panic!("mincore: {e}"));
        pages.into_iter().filter(|&r| r).count()
    }

    /// A fresh memory file holding one ring of [`RING`] bytes, mapped twice (as a peer's
    /// segment, which we produce into, and our own, which the peer consumes from), with the
    /// producer and consumer set up as `attach` does (`warm`: the rings kept faulted in ahead
    /// of their use).
    fn link(warm: bool) -> (Mapping, Mapping, Producer, Consumer) {
        let len = CTL_BYTES + RING;
        let fd = sys::memfd("oxmpi-prefault-test", len).unwrap();
        let (theirs, own) = (
            Mapping::map(&fd, len).unwrap(),
            Mapping::map(&fd, len).unwrap(),
        );
        // SAFETY: the ring spans the whole zeroed file, page-aligned in each mapping; this
        // test is its only producer and its only consumer.
        let (mut tx, mut rx) = unsafe {
            (
                Producer::new(RingMem::from_raw(theirs.ptr(), RING)),
                Consumer::new(RingMem::from_raw(own.ptr(), RING)),
            )
        };
        if warm {
            let (t, r) = prefault_rings((&theirs, 0, RING), (&own, 0, RING));
            tx.warm_ahead(t);
            rx.warm_ahead(r);
        }
        (theirs, own, tx, rx)
    }

    /// Whether the page holding `p` is mapped in this process's page tables
    /// (`/proc/self/pagemap`'s present bit): a store to it takes no page fault.
    fn mapped(p: *const u8) -> bool {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::open("/proc/self/pagemap").unwrap();
        let mut e = [0u8; 8];
        f.read_exact_at(&mut e, (p as usize / sys::page_size() * 8) as u64)
            .unwrap();
        u64::from_ne_bytes(e) >> 63 != 0
    }

    /// Runs `bytes` of 8-byte records (32 bytes each), one at a time as in a ping-pong,
    /// through `tx` and `rx` (records numbered from `first`; `theirs` and `own` are the data
    /// areas as the producer and the consumer map them). Returns the pages that the producer
    /// wrote a record into, and that the consumer read one from, that were not mapped
    /// before (page faults; `getrusage` would count `MADV_POPULATE_WRITE`'s pages as faults
    /// too). Checks every record's bytes.
    fn faults_of(
        tx: &mut Producer,
        rx: &mut Consumer,
        (theirs, own): (*const u8, *const u8),
        first: u64,
        bytes: usize,
    ) -> (u64, u64) {
        let page = sys::page_size();
        let (mut ptx, mut prx) = (0, 0);
        for i in first..first + (bytes / 32) as u64 {
            let at = (i as usize * 32) % RING;
            let new_page = (theirs as usize + at) % page == 0;
            if new_page && !mapped(theirs.wrapping_add(at)) {
                ptx += 1;
            }
            assert!(tx.push(8, |p| {
                // SAFETY: push hands us 8 writable bytes, 8-byte aligned.
                unsafe { p.cast::<u64>().write(i) }
            }));
            if new_page && !mapped(own.wrapping_add(at)) {
                prx += 1;
            }
            let (p, n) = rx.peek().unwrap().expect("the record just pushed");
            assert_eq!(n, 8);
            // SAFETY: peek returned 8 readable bytes, 8-byte aligned (after the frame word).
            assert_eq!(unsafe { p.cast::<u64>().read() }, i, "record {i}");
            rx.release();
        }
        (ptx, prx)
    }

    /// With its rings kept warm, a link's first pass through them writes no record into a
    /// page the producer has not mapped and takes no page fault in the consumer, while the
    /// producer of cold rings writes into an unmapped page once per page (so the check does
    /// see them).
    #[test]
    fn warm_rings_take_no_page_faults() {
        let pages = (RING / sys::page_size()) as u64;
        let data = |t: &Mapping, o: &Mapping| {
            (
                t.ptr().wrapping_add(CTL_BYTES).cast_const(),
                o.ptr().wrapping_add(CTL_BYTES).cast_const(),
            )
        };
        let (t, o, mut tx, mut rx) = link(false);
        let (cold, _) = faults_of(&mut tx, &mut rx, data(&t, &o), 0, 2 * RING);
        assert!(
            cold >= pages - 1,
            "fresh rings: {cold} unmapped pages written of {pages}"
        );
        let (t, o, mut tx, mut rx) = link(true);
        let (ptx, prx) = faults_of(&mut tx, &mut rx, data(&t, &o), 0, 2 * RING);
        assert_eq!(
            (ptx, prx),
            (0, 0),
            "warm rings: unmapped pages written, read"
        );
    }

    /// A warm ring that carried less than half of [`WARM_AHEAD`] keeps only its control
    /// block and first [`WARM_AHEAD`] bytes resident; once records pass that, all of it is.
    #[test]
    fn warm_rings_stay_resident_only_when_used() {
        let page = sys::page_size();
        let all = (CTL_BYTES + RING).div_ceil(page);
        let start = (CTL_BYTES + WARM_AHEAD).div_ceil(page);
        let (t, own, mut tx, mut rx) = link(true);
        let data = (
            t.ptr().wrapping_add(CTL_BYTES).cast_const(),
            own.ptr().wrapping_add(CTL_BYTES).cast_const(),
        );
        assert_eq!(resident(&own, 0, CTL_BYTES + RING), start, "after linking");
        let used = WARM_AHEAD / 2;
        faults_of(&mut tx, &mut rx, data, 0, used);
        assert_eq!(
            resident(&own, 0, CTL_BYTES + RING),
            start,
            "after {used} bytes"
        );
        faults_of(&mut tx, &mut rx, data, (used / 32) as u64, 32);
        assert_eq!(
            resident(&own, 0, CTL_BYTES + RING),
            all,
            "after {used} + 32 bytes"
        );
    }

    /// Rings are kept warm for a few peers' worth of rings only (the default ring's 320 KiB:
    /// one peer).
    #[test]
    fn warms_only_few_rings() {
        assert!(warm_rings(1, 320 << 10));
        assert!(warm_rings(1, 512 << 10));
        assert!(warm_rings(1, 128 << 10));
        assert!(warm_rings(2, 128 << 10));
        assert!(!warm_rings(2, 256 << 10));
        assert!(!warm_rings(2, 512 << 10));
        assert!(!warm_rings(255, 512 << 10));
    }
}
