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

use super::bulk::{BulkMem, BulkRx, BulkTx, BULK_CTL};
use super::coop::{CoopMem, COOP_CTL};
use super::link::SmLink;
use super::params::Settings;
use super::ring::{Consumer, Producer, RingMem, CTL_BYTES};
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

/// Most bytes of rings (to one peer and from it count once) that a rank faults in when it
/// links to its peers on the node: one peer's whole rings at the default 320 KiB (a job of 2
/// ranks on the node). Faulted in, both rings count in the rank's resident memory at once: at
/// 8 ranks with 7 peers' 256 KiB rings faulted in, peak RSS after `MPI_Init` was 7620 KiB
/// against Open MPI's 13720 (1.8 times less, where the goal is 2); at 2 ranks, whole 512 KiB
/// rings would add 512 KiB to 256 KiB faulted in (5224 KiB, Open MPI 10564), 320 KiB ones 128.
const PREFAULT_MAX: usize = 320 << 10;

/// How many bytes at the start of each of its rings a rank with `peers` peers on the node,
/// rings of `ring` bytes, faults in when it links to them ([`prefault_rings`]): up to
/// [`PREFAULT_MAX`] of them, and only while the peers are few (0: none), since it allocates
/// those bytes whole (its first pass would, for each pair that talks long enough). A
/// ping-pong of small messages runs its first 10240 round trips (32-byte records) through
/// the first 320 KiB.
fn prefault_bytes(peers: usize, ring: usize) -> usize {
    let n = ring.min(PREFAULT_MAX);
    if peers.saturating_mul(n) <= PREFAULT_MAX {
        n
    } else {
        0
    }
}

/// Faults in the outbound ring `tx` (mapping of the peer's segment, offset, bytes from the
/// ring's start) and the inbound ring `rx` (our segment) of a link, so that the first pass of records through
/// them takes no page faults: a fresh ring otherwise faults once per page in the producer
/// (allocation and first write) and once in the consumer, every 128 small records, and a
/// ping-pong waits for each of those faults (mpi4py's ping-pong measured its first 8192
/// round trips, 256 KiB of 32-byte records, about 0.17 us per message slower than the
/// ones after them). Best effort: a kernel without `MADV_POPULATE_WRITE` faults as before.
fn prefault_rings(tx: (&Mapping, usize, usize), rx: (&Mapping, usize, usize)) {
    for (m, at, ring) in [tx, rx] {
        let _ = m.populate(at, CTL_BYTES + ring);
    }
}

/// Our segment between publication and attaching.
pub(crate) struct SmSetup {
    /// Kept open until the wire-up's last fence (peers open it through /proc).
    fd: OwnedFd,
    /// Bytes of the segment.
    len: usize,
    own: Arc<Mapping>,
    layout: Layout,
}

/// Opens the `sm` component: creates and maps our segment (one slot per rank), which its
/// section then publishes.
pub(crate) fn open(job: &Job) -> Result<Option<Box<dyn Setup>>, Error> {
    let s = Settings::read();
    let layout = Layout {
        ring: s.ring,
        bulk: s.bulk,
    };
    let len = job.size() * layout.slot();
    let fd = sys::memfd("oxmpi-sm", len).map_err(job.sys_err("memfd_create"))?;
    let own = Mapping::map(&fd, len).map_err(job.sys_err("mmap of own segment"))?;
    Ok(Some(Box::new(SmSetup {
        fd,
        len,
        own: Arc::new(own),
        layout,
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
        let prefault = prefault_bytes(peers, self.layout.ring);
        for p in (0..linked.len()).filter(|&p| wanted(p)) {
            // A rank whose sm did not open published no segment: it links to nobody by sm.
            if let Some(r) = job.section(p, "sm", 4)? {
                out.push((p, Box::new(self.attach(job, p, &r, prefault)?)));
            }
        }
        Ok(out)
    }
}

impl SmSetup {
    /// Maps peer `p`'s segment (published as `r`, its `sm` section) and builds the link: we
    /// produce into slot `me` of its segment and consume slot `p` of ours; the first
    /// `prefault` bytes of both rings are faulted in first ([`prefault_rings`]).
    fn attach(&self, job: &Job, p: usize, r: &Record, prefault: usize) -> Result<SmLink, Error> {
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
        if prefault > 0 {
            prefault_rings(
                (&map, me as usize * pstride, prefault.min(theirs.ring)),
                (&self.own, p * ours.slot(), prefault.min(ours.ring)),
            );
        }
        // SAFETY: ring `me` of the peer's segment lies within the mapping, is 64-byte aligned
        // (page-aligned base, stride multiple of 64) and zero-initialised by ftruncate; we
        // are its only producer.
        let tx = unsafe { RingMem::from_raw(tx_base, theirs.ring) };
        // SAFETY: ring `p` of our own segment, same reasoning; we are its only consumer.
        let rx = unsafe { RingMem::from_raw(rx_base, ours.ring) };
        let bulk_tx = (theirs.bulk > 0).then(|| {
            // SAFETY: the bulk buffers follow the rings inside the same slots (same
            // reasoning: in bounds, 64-byte aligned, zeroed, one producer and one consumer).
            BulkTx::new(unsafe { BulkMem::from_raw(tx_base.add(theirs.bulk_at()), theirs.bulk) })
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
        Ok(SmLink {
            tx: Producer::new(tx),
            rx: Consumer::new(rx),
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

    const RING: usize = 64 << 10;

    /// Runs `bytes` of 8-byte records (32 bytes each), one at a time as in a ping-pong,
    /// through the ring at the start of a fresh memory file, produced through one mapping of
    /// it and consumed through another (as a peer's segment and our own), with the first
    /// `prefault` bytes of the rings faulted in first: the page faults the calling thread
    /// took meanwhile. Checks every record's bytes.
    fn faults_of(prefault: usize, bytes: usize) -> u64 {
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
        if prefault > 0 {
            prefault_rings((&theirs, 0, prefault), (&own, 0, prefault));
        }
        // (populating counts its own faults: the count starts after it)
        let before = sys::thread_minor_faults();
        for i in 0..(bytes / 32) as u64 {
            assert!(tx.push(8, |p| {
                // SAFETY: push hands us 8 writable bytes, 8-byte aligned.
                unsafe { p.cast::<u64>().write(i) }
            }));
            let (p, n) = rx.peek().unwrap().expect("the record just pushed");
            assert_eq!(n, 8);
            // SAFETY: peek returned 8 readable bytes, 8-byte aligned (after the frame word).
            assert_eq!(unsafe { p.cast::<u64>().read() }, i, "record {i}");
            rx.release();
        }
        sys::thread_minor_faults() - before
    }

    /// With its rings faulted in when linked, a link's first pass through them takes no
    /// page fault, while the same traffic through fresh rings faults at least once per page
    /// (so the count does see them).
    #[test]
    fn prefaulted_rings_take_no_page_faults() {
        let pages = (RING / sys::page_size()) as u64;
        let cold = faults_of(0, 2 * RING);
        assert!(
            cold >= pages,
            "fresh rings: {cold} faults for {pages} pages"
        );
        assert_eq!(faults_of(RING, 2 * RING), 0, "prefaulted rings faulted");
    }

    /// A ring faulted in only at its start takes no fault while the records stay in that
    /// part, and faults in the rest on the first pass.
    #[test]
    fn partly_prefaulted_rings_fault_only_past_the_prefix() {
        let half = (RING / 2 / sys::page_size()) as u64;
        assert_eq!(
            faults_of(RING / 2, RING / 2),
            0,
            "prefaulted prefix faulted"
        );
        let rest = faults_of(RING / 2, 2 * RING);
        assert!(
            rest >= half,
            "half-prefaulted rings: {rest} faults for {half} cold pages"
        );
    }

    /// Prefaulting covers at most PREFAULT_MAX bytes of each ring (the default ring's 320 KiB:
    /// the first 10240 round trips of a small-message ping-pong) and stops at a few peers'
    /// worth of rings.
    #[test]
    fn prefaults_only_few_rings() {
        assert_eq!(prefault_bytes(1, 320 << 10), 320 << 10);
        assert_eq!(prefault_bytes(1, 512 << 10), PREFAULT_MAX);
        assert_eq!(prefault_bytes(1, 128 << 10), 128 << 10);
        assert_eq!(prefault_bytes(2, 128 << 10), 128 << 10);
        assert_eq!(prefault_bytes(2, 256 << 10), 0);
        assert_eq!(prefault_bytes(2, 512 << 10), 0);
        assert_eq!(prefault_bytes(255, 512 << 10), 0);
        assert_eq!(prefault_bytes(1, PREFAULT_MAX + 64), PREFAULT_MAX);
    }
}
