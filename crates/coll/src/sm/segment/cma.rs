//! Alltoallv on the segment for blocks that do not fit a segment buffer: the ranks whose
//! blocks do not fit post their buffer's address instead ([`Seg::put_addresses`]), and
//! every block then moves by one cross-memory copy (CMA, `process_vm_readv`/`writev`)
//! straight between the user's buffers, after one synchronisation, without messages.
//!
//! In place, rank `i`'s block for `j` and rank `j`'s block for `i` trade places: each of
//! the two swaps half of the pair's bytes (the lower rank the front half), through a
//! bounce buffer of at most [`CHUNK`] bytes that stays in the cache, so no rank copies its
//! whole buffer aside and no rank waits for a peer to be scheduled while it copies (the
//! point-to-point fallback needs both sides of every transfer running at once, which costs
//! a context switch per fragment when ranks share cores). A rank whose blocks fit the
//! segment (its blocks are posted there) does the whole trade with a rank whose blocks do
//! not: it reads its block from the peer's buffer, then writes its posted block there.
//!
//! Out of place, every rank reads its block from each peer's send buffer (or from the
//! segment, where the peer posted it), rank `r` from `r + 1`, `r + 2`, ... (mod `p`, so
//! that no two ranks read from the same rank at once), whatever the sizes: one round of
//! posts and one cross-memory read per block, where the messages need a handshake per block
//! with a sender that, when ranks share cores, must be scheduled first. On 2 ranks too,
//! where the messages' single copy of a block is the same read behind more handshakes (a
//! request-to-send, matching, the copy's choice, a FIN): an alltoall of 16 KiB-4 MiB blocks
//! measured 1-5% faster this way than by messages (it was limited to 64 KiB sent per rank
//! before, for the messages' cooperative copy, which an exchange does not need: both cores
//! already copy one block each). An allgather of blocks too large for a buffer on more than
//! 2 ranks is such an exchange with one block per rank, read by every other rank
//! ([`Seg::allgatherv_cma`]). On 2 ranks, blocks in [`ALLGATHER_PAIR`] go either way: each
//! rank posts where its block is and where it wants the peer's, and rank 0 chooses per
//! call (timing both ways per size class, [`pair_choice`]) whether each rank writes its
//! own block into the peer's buffer (`process_vm_writev`: each CPU copies only from its
//! own block, and its caches hold 3 of the pair's 6 MiB at 1 MiB instead of 4; faster
//! when the two vCPUs share no cache) or reads the peer's (faster when they share one).
//!
//! Whether CMA works between the ranks (Yama, seccomp) is probed once per segment, at the
//! first such alltoallv, in one more round on the segment; every rank then knows it.

use super::{Seg, DATA, NBUF};
use crate::{arg_err, Result};
use oxmpi_engine::{cma_copy, Cma, ErrorClass};
use std::io;
use std::sync::atomic::Ordering;

/// Bytes per CMA call of a swap (the bounce buffer's size) with up to 2 ranks per online
/// CPU ([`chunk_for`]). 256 KiB rather than 64: a 1 MiB block's half then takes 2 reads and
/// 2 writes instead of 8 each (np=4 in place, 1 MiB blocks: 96 `process_vm_readv` and 96
/// `process_vm_writev` a call at 64 KiB), and a model of [`trade`] on the 2-vCPU test host
/// (4 processes pinned 0,0,1,1 or 0,1,0,1, every rank trading its halves with the 3 others,
/// 200 iterations, the thread's CPU time per half-trade, which the other jobs' load does
/// not add to) took 186-197 us against 205-215 at 64 KiB with the two vCPUs far (4 runs)
/// and 166-171 against 169-192 near (128 and 512 KiB: 169 and 171); 512 KiB measured level
/// with 256 far.
const CHUNK: usize = 256 << 10;

/// [`CHUNK`] with more than 2 ranks per online CPU: the bounce buffers of the ranks that
/// share a CPU then stay in its cache (1 MiB of L2 per vCPU on the test host: 4 ranks of
/// 256 KiB would fill it). np=8 on 2 vCPUs, in-place ialltoallv 1 MiB, 256 KiB measured
/// 0.86-0.87x the 64 KiB time in two runs of `ab.sh` under load.
const CHUNK_CROWDED: usize = 64 << 10;

/// The chunk of [`trade`] on a communicator of `p` ranks: [`CHUNK`], or [`CHUNK_CROWDED`]
/// with more than 2 ranks per online CPU (the CPU count read once per process).
pub(in crate::sm) fn chunk_for(p: usize) -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    let cpus = *CPUS.get_or_init(oxmpi_engine::sys::online_cpus);
    if p > 2 * cpus {
        CHUNK_CROWDED
    } else {
        CHUNK
    }
}

/// Smallest own block, and smallest receive buffer (all blocks received), of an exchange
/// that [`copy_own`] copies with non-temporal stores.
pub(in crate::sm) const OWN_STREAM_MIN: usize = 256 << 10;
pub(in crate::sm) const OWN_STREAM_TOTAL: usize = 8 << 20;

/// Copy our own block of an alltoall(v) or allgather(v) exchange, `src`, into `dst` (as
/// long) whose receive buffer spans `total` bytes: from [`OWN_STREAM_MIN`] bytes in a
/// buffer of [`OWN_STREAM_TOTAL`] or more with non-temporal stores (on `x86_64`), which
/// write whole lines to memory without first reading them into the cache and leave the
/// caches to the other copies of the exchange.
///
/// The exchange's other blocks are copied by the kernel (`process_vm_readv`), whose stores
/// cannot bypass the caches: 8 ranks on 2 vCPUs, 1 MiB blocks, each rank moves 8 MiB per
/// call through buffers of 8 MiB, far more than the caches hold, so the copies run at the
/// memory's pace. In a two-process model of one rank per vCPU copying 1 MiB blocks
/// through 8-16 MiB buffers, a plain copy took 207-247 us per MiB and a streaming one
/// 137-147. In the library, every other call streaming and the rest plain within one
/// launch (so both in the same placement and load), median spans of 40 calls each: np=8
/// block pinning 11402 against 11033 us and 12004 against 11617 (cyclic 11799 against
/// 11424 and 11805 against 11424; the same alternation with no change: 11830 against
/// 11814). Smaller buffers stay partly in the caches between calls, where streaming costs:
/// np=2, 1 MiB blocks (4 MiB buffers), far placement, 8 interleaved launches of the
/// benchmark, streaming was slower in 7 (253 against 238 us, medians), np=4 2482 against
/// 2322 over 3 (the alternation within a launch had had them faster, 317 against 349 and
/// 2643 against 2810, in an unprobed placement).
pub(in crate::sm) fn copy_own(dst: &mut [u8], src: &[u8], total: usize) {
    assert_eq!(dst.len(), src.len(), "copy_own: lengths");
    if src.len() >= OWN_STREAM_MIN && total >= OWN_STREAM_TOTAL {
        // SAFETY: both hold `len` bytes and do not overlap (`dst` is borrowed mutably).
        unsafe { super::stream::copy_streaming(src.as_ptr(), dst.as_mut_ptr(), src.len()) };
    } else {
        dst.copy_from_slice(src);
    }
}

/// Block sizes of an allgather(v) on 2 ranks (the largest block) that move by one
/// cross-memory copy per block, written into the peer's buffer or read from it
/// ([`Seg::allgatherv_cma`]): those too large for a segment buffer, up to 1 MiB (at 2 MiB
/// the write measured slower than the point-to-point read: 343 against 314-334 us in a
/// two-process model of the exchange).
pub const ALLGATHER_PAIR: std::ops::RangeInclusive<usize> = DATA + 1..=1 << 20;

/// Whether CMA reaches every rank of the segment: not probed yet, yes, no.
pub(super) const CMA_UNKNOWN: u8 = 0;
pub(super) const CMA_YES: u8 = 1;
pub(super) const CMA_NO: u8 = 2;

/// What a rank can do to every other by CMA, as the probes find ([`probe_level`]): nothing,
/// read, read and write. The ranks agree on the lowest ([`Seg::all_min`]).
pub(super) const LEVEL_NONE: u8 = 0;
pub(super) const LEVEL_READ: u8 = 1;
pub(super) const LEVEL_PUSH: u8 = 2;

/// What we can do to process `pid` by CMA: read the byte at `probe`, then also write the
/// byte at `sink` ([`LEVEL_NONE`], [`LEVEL_READ`], [`LEVEL_PUSH`]). Both calls pass the same
/// ptrace check in the kernel, but a seccomp filter may deny `process_vm_writev` alone.
///
/// # Safety
/// `probe` and `sink` are bytes mapped in `pid` for as long as this runs; `sink` is ours to
/// write (a byte that nobody reads).
pub(super) unsafe fn probe_level(pid: i32, probe: u64, sink: u64) -> u8 {
    let mut v = 0u8;
    // SAFETY: one byte into `v` (caller contract for the remote side).
    if unsafe { cma_copy(pid, &mut v, probe, 1, Cma::Read) }.is_err() {
        return LEVEL_NONE;
    }
    // SAFETY: one byte from `v` into the peer's sink (caller contract).
    match unsafe { cma_copy(pid, &mut v, sink, 1, Cma::Write) } {
        Ok(()) => LEVEL_PUSH,
        Err(_) => LEVEL_READ,
    }
}

/// Flag words of a posted alltoallv: blocks in the segment ([`super::put_table`]),
/// addresses ([`Seg::put_addresses`]); 0: invalid arguments.
const TABLE: u64 = 1;
const ADDRESSES: u64 = 2;
/// Words of an address table before the displacements: flag, pid, buffer address, probe
/// address, sink address (the write probe's byte, [`probe_level`]), receive buffer address
/// (0: no receive layout posted, the blocks are read; else the layout follows the send
/// layout: per rank the displacement, then per rank the count, of its block in it).
const HEAD: usize = 6;
/// Word of the address table with the receive buffer's address.
const RECV: usize = 5;

/// Largest communicator whose address table, with a receive layout, fits a buffer.
const _: () = assert!(8 * (HEAD + 4 * 64) <= DATA);

/// Word of a 2-rank allgather's address table after the table and the receive layout:
/// rank 0's choice, [`PAIR_WRITE`] or [`PAIR_READ`] ([`pair_choice`]).
const PAIR_CHOICE: usize = HEAD + 4 * 2;
const PAIR_WRITE: u64 = 1;
const PAIR_READ: u64 = 2;
const _: () = assert!(8 * (PAIR_CHOICE + 1) <= DATA);

/// How a 2-rank allgather(v) of blocks in [`ALLGATHER_PAIR`] moves the blocks: each rank
/// writes its block into the peer's buffer, or reads the peer's block from where the peer
/// has it (the messages' way, Open MPI's). Which is faster depends on where the
/// hypervisor put the two vCPUs (np=2, `ab.sh` with the placement probe, 16-17 launches
/// each, medians of launch medians, us): near (a shared last-level cache), 256 KiB blocks,
/// writing 49.9 against reading 37.8 (Open MPI 38.6); far, 128 KiB 23.7 against 27.7,
/// 1 MiB 214 against 254 (Open MPI 28.1 and 250), in place 256 KiB 36.3 against 44.9.
/// The placement can change between launches and within one, so out of place rank 0
/// times its part of each exchange (the copy of the peer's block: ours is copied alike
/// either way) and picks per size class the way whose smoothed cost is lower, trying the
/// other way every
/// [`EXPLORE`](pair_choice::EXPLORE)th time; it posts the choice, which the other rank
/// follows. In place both ranks always write (the chooser measured slower there).
mod pair_choice {
    use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

    /// Size classes: powers of two of the block from 4 KiB, the last one open.
    const CLASSES: usize = 10;
    /// Every this many exchanges of a class, one goes the other way.
    pub(super) const EXPLORE: u32 = 32;
    /// Smoothed cost (ns per KiB, 0: not measured yet) of writing (`[0]`) and reading
    /// (`[1]`) per class.
    static COST: [[AtomicU64; CLASSES]; 2] = [const { [const { AtomicU64::new(0) }; CLASSES] }; 2];
    static TURN: [AtomicU32; CLASSES] = [const { AtomicU32::new(0) }; CLASSES];

    pub(super) fn class(block: usize) -> usize {
        (block.max(1).ilog2() as usize)
            .saturating_sub(12)
            .min(CLASSES - 1)
    }

    /// Whether exchange number `turn` writes, from the costs of writing and reading (0:
    /// not measured): a way not measured yet first (writing first), then the cheaper,
    /// except every [`EXPLORE`]th exchange, which goes the other way.
    pub(super) fn writes(write: u64, read: u64, turn: u32) -> bool {
        if write == 0 || read == 0 {
            return write == 0;
        }
        (write <= read) != (turn % EXPLORE == EXPLORE - 1)
    }

    /// The way of the next exchange of `block`-byte blocks.
    pub(super) fn next(block: usize) -> bool {
        let c = class(block);
        let turn = TURN[c].fetch_add(1, Ordering::Relaxed);
        writes(
            COST[0][c].load(Ordering::Relaxed),
            COST[1][c].load(Ordering::Relaxed),
            turn,
        )
    }

    /// Record what an exchange cost: `ns` for `bytes` bytes, writing or not. The estimate
    /// moves a quarter of the way to each new cost, so that one slow exchange (a time
    /// slice lost) does not flip the choice alone.
    pub(super) fn record(block: usize, write: bool, bytes: usize, ns: u64) {
        let cost = &COST[usize::from(!write)][class(block)];
        let new = (ns.saturating_mul(1024) / bytes.max(1) as u64).max(1);
        let old = cost.load(Ordering::Relaxed);
        let v = if old == 0 { new } else { (3 * old + new) / 4 };
        cost.store(v.max(1), Ordering::Relaxed);
    }
}

/// Trade half of our block `mine` for a peer with the same half of the peer's block for
/// us, as long, at address `theirs` in process `pid` (the front half when we are the lower
/// rank of the pair, else the back half: the peer trades the other), through `bounce`
/// (`chunk` bytes at most, so it stays in the cache: [`chunk_for`]).
///
/// # Safety
/// The peer's block is mapped in `pid` at `theirs` for `mine.len()` bytes, and our half of
/// it is ours alone to read and write until we are done.
pub(in crate::sm) unsafe fn trade(
    pid: i32,
    mine: &mut [u8],
    theirs: u64,
    lower: bool,
    (bounce, chunk): (&mut Vec<u8>, usize),
) -> io::Result<()> {
    let (n, half) = (mine.len(), mine.len() / 2);
    let (lo, hi) = if lower { (0, half) } else { (half, n) };
    let chunk = chunk.max(1);
    bounce.resize(bounce.len().max((hi - lo).min(chunk)), 0);
    let mut at = lo;
    while at < hi {
        let c = (hi - at).min(chunk);
        let remote = theirs + at as u64;
        // SAFETY: `bounce` and our block hold `c` bytes from `at`; the peer's block holds
        // them at `remote`, ours to use (caller contract).
        unsafe {
            cma_copy(pid, bounce.as_mut_ptr(), remote, c, Cma::Read)?;
            cma_copy(pid, mine.as_mut_ptr().add(at), remote, c, Cma::Write)?;
        }
        mine[at..at + c].copy_from_slice(&bounce[..c]);
        at += c;
    }
    Ok(())
}

impl Seg {
    /// Write our address table for alltoallv `k` into our buffer (its blocks did not fit):
    /// our pid, the address of `send` (in place: of the receive buffer, which holds the
    /// blocks), two bytes to probe, then per rank the displacement and length of its block. Flag 0 (nothing else) when the blocks are not all inside `send`.
    /// With `recv` (an out-of-place alltoall(v) whose senders may write our blocks into
    /// place, [`Seg::push_blocks`]) also the address of the receive buffer and per rank
    /// the displacement and count of its block there, when they all lie inside it (else
    /// the address 0: the blocks are read).
    ///
    /// # Safety
    /// Our buffer of `k` is ours to write (every rank is done with `k - NBUF`) and not
    /// stamped yet.
    pub(super) unsafe fn put_addresses(
        &self,
        k: u64,
        (send, scounts, sdispls): (&[u8], &[usize], &[usize]),
        recv: Option<(&[u8], &[usize], &[usize])>,
    ) {
        let p = self.size;
        let ok = scounts.len() == p
            && sdispls.len() == p
            && (0..p).all(|j| {
                sdispls[j]
                    .checked_add(scounts[j])
                    .is_some_and(|e| e <= send.len())
            });
        let w = self.data(self.rank, k).cast::<u64>();
        // SAFETY: caller contract; `8 * (HEAD + 2p) <= DATA` bytes (checked at compile time
        // for the largest communicator).
        unsafe {
            if !ok {
                w.write_unaligned(0);
                return;
            }
            w.write_unaligned(ADDRESSES);
            w.add(1).write_unaligned(crate::sm::own_pid());
            w.add(2).write_unaligned(send.as_ptr() as u64);
            w.add(3)
                .write_unaligned(std::ptr::from_ref(&self.cma).cast::<u8>() as u64);
            w.add(4)
                .write_unaligned(std::ptr::from_ref(&self.sink).cast::<u8>() as u64);
            for j in 0..p {
                w.add(HEAD + j).write_unaligned(sdispls[j] as u64);
                w.add(HEAD + p + j).write_unaligned(scounts[j] as u64);
            }
            let layout = recv.filter(|&(buf, counts, displs)| {
                counts.len() == p
                    && displs.len() == p
                    && (0..p).all(|j| {
                        displs[j]
                            .checked_add(counts[j])
                            .is_some_and(|e| e <= buf.len())
                    })
            });
            match layout {
                Some((buf, counts, displs)) => {
                    w.add(RECV).write_unaligned(buf.as_ptr() as u64);
                    for j in 0..p {
                        w.add(HEAD + 2 * p + j).write_unaligned(displs[j] as u64);
                        w.add(HEAD + 3 * p + j).write_unaligned(counts[j] as u64);
                    }
                }
                None => w.add(RECV).write_unaligned(0),
            }
        }
    }

    /// Word `i` of rank `r`'s posted alltoallv `k`.
    ///
    /// # Safety
    /// `r` stamped `k` and we have not finished it; `8 * (i + 1) <= DATA`.
    unsafe fn word(&self, r: usize, k: u64, i: usize) -> u64 {
        // SAFETY: caller contract.
        unsafe { self.data(r, k).cast::<u64>().add(i).read_unaligned() }
    }

    /// The flag of rank `r`'s posted alltoallv `k`, a 2-rank pair post
    /// ([`super::put_pair`]: its block in the segment buffer, as a table's) read as
    /// [`TABLE`].
    ///
    /// # Safety
    /// As [`Seg::word`].
    unsafe fn flag(&self, r: usize, k: u64) -> u64 {
        // SAFETY: caller contract.
        match unsafe { self.word(r, k, 0) } {
            w if w & 0xff == super::PAIR => TABLE,
            w => w,
        }
    }

    /// Rank `r`'s block for rank `j` in alltoallv `k`: its length and where it is (an
    /// offset in `r`'s segment buffer for a table, an address in `r` for addresses).
    ///
    /// # Safety
    /// As [`Seg::word`]; `r`'s flag is [`TABLE`] or [`ADDRESSES`].
    unsafe fn block(&self, r: usize, k: u64, j: usize) -> (usize, u64) {
        // SAFETY: caller contract; the entries lie inside the posted table.
        unsafe {
            let w = self.word(r, k, 0);
            if w & 0xff == super::PAIR {
                // Rank `r`'s block for the peer right after the word; its own not posted.
                let (posted, own) = super::pair_lens(w);
                return if j == r { (own, 0) } else { (posted, 8) };
            }
            if w == TABLE {
                let at = self.data(r, k).add(8 + 8 * j).cast::<u32>();
                let (off, len) = (at.read_unaligned(), at.add(1).read_unaligned());
                (len as usize, u64::from(off))
            } else {
                let p = self.size;
                let len = self.word(r, k, HEAD + p + j) as usize;
                (len, self.word(r, k, 2) + self.word(r, k, HEAD + j))
            }
        }
    }

    /// Whether our own post of alltoallv `k` already says that no block moves on the
    /// segment, as every rank will read there ([`Seg::exchange_cma`]): invalid arguments.
    /// We then need nobody's post and go point to point at once, instead of waiting for
    /// every rank's post first (a round that costs a context switch per rank when ranks
    /// share cores).
    ///
    /// # Safety
    /// We wrote our post of `k` and have not finished `k`.
    pub(super) unsafe fn rules_out_cma(&self, k: u64) -> bool {
        // SAFETY: caller contract.
        let flag = unsafe { self.word(self.rank, k, 0) };
        flag != TABLE && flag != ADDRESSES
    }

    /// Finish alltoallv `k` whose posted flags were not all [`TABLE`]: by CMA (see the
    /// module documentation) when every flag is valid and CMA works, else nothing moves (`None`, on every rank alike: they read the same flags).
    /// `Some(ok)` as [`Seg::alltoallv`]. Marks `k` done either way; an error when a CMA
    /// copy failed after the probe (a buffer unmapped during the call).
    pub(super) fn exchange_cma(
        &self,
        k: u64,
        send: Option<&[u8]>,
        (recv, rcounts, rdispls): (&mut [u8], &[usize], &[usize]),
    ) -> Result<Option<bool>> {
        let p = self.size;
        // SAFETY: every rank stamped `k` (waited by the caller), not finished yet.
        let flag = |r: usize| unsafe { self.flag(r, k) };
        if !(0..p).all(|r| matches!(flag(r), TABLE | ADDRESSES)) {
            self.finish(k);
            return Ok(None);
        }
        let mut last = k;
        let mut level = match (
            self.cma.load(Ordering::Relaxed),
            self.push.load(Ordering::Relaxed),
        ) {
            (CMA_YES, CMA_YES) => LEVEL_PUSH,
            (CMA_YES, _) => LEVEL_READ,
            _ => LEVEL_NONE,
        };
        if self.cma.load(Ordering::Relaxed) == CMA_UNKNOWN {
            (last, level) = self.probe_cma(k);
        }
        if level == LEVEL_NONE {
            self.finish(last);
            return Ok(None);
        }
        let moved = match send {
            // Every rank checks every pair alike (a mismatch moves nothing anywhere); our
            // counts are the ones we posted.
            // In place the ranks trade blocks, which writes into the peers' buffers: not
            // where the kernel allows only reads (every rank alike).
            None if level < LEVEL_PUSH => {
                self.finish(last);
                return Ok(None);
            }
            None => {
                // SAFETY: see above.
                let len = |r: usize, j: usize| unsafe { self.block(r, k, j) }.0;
                let sym = (0..p).all(|i| (0..p).all(|j| len(i, j) == len(j, i)));
                if sym {
                    self.swap_all(k, recv, rdispls).map(|()| true)
                } else {
                    Ok(false)
                }
            }
            // Every rank posted its receive layout: each writes its blocks into place
            // (the same choice everywhere: every rank reads the same posts).
            Some(send)
                if level == LEVEL_PUSH
                    && (0..p).all(|r| {
                        // SAFETY: every rank stamped `k` (waited by the caller), not
                        // finished yet; an address table has the word.
                        flag(r) == ADDRESSES && unsafe { self.word(r, k, RECV) } != 0
                    }) =>
            {
                self.pushes.fetch_add(1, Ordering::Relaxed);
                self.push_blocks(k, send, (recv, rcounts, rdispls))
            }
            Some(send) => self.read_all(k, Some(send), (recv, rcounts, rdispls)),
        };
        self.cma_done(last, moved, "alltoallv").map(Some)
    }

    /// End an exchange by CMA whose last collective is `last`: mark it done, wait until
    /// every rank is done with it (our buffers may be read or written by the others until
    /// then), and report a failed copy as `what`'s error.
    fn cma_done(&self, last: u64, moved: io::Result<bool>, what: &str) -> Result<bool> {
        self.finish(last);
        self.reusable(last);
        moved.map_err(|e| {
            arg_err(
                ErrorClass::Other,
                format!("{what}: a cross-memory copy between ranks failed: {e}"),
            )
        })
    }

    /// Allgatherv into `buf` (block `j`: `counts[j]` bytes at `displs[j]`, the same
    /// counts on every rank) by one cross-memory copy per block, for blocks too large
    /// for a segment buffer on more than 2 ranks, when CMA reaches every rank
    /// ([`Seg::single_copy_max`] not 0: the callers decide alike everywhere), and on 2
    /// ranks for the blocks of [`ALLGATHER_PAIR`] when CMA reaches the peer. Our block is
    /// in place in `buf` (`own` `None`) or in `own`. On more than 2 ranks every rank posts
    /// the address of its block, then reads every other rank's block straight into `buf`
    /// and waits until every rank has read its own: one round of posts, where recursive
    /// doubling or the ring wait `log2 p` or `p - 1` times for a partner (a context switch
    /// each when ranks share cores). On 2 ranks each also posts its receive buffer's
    /// layout, and rank 0 its choice ([`pair_choice`]): both read the peer's block, or
    /// both write their block into the peer's buffer ([`Seg::push_all`]), where each CPU
    /// copies only from its own block. The measurements that follow are of writing
    /// against the point-to-point read, on the previous (Intel) test host. Two processes on the 2-vCPU test host (2 MiB of
    /// L2 each, separate 2 MiB buffers as the benchmarks have, a spin barrier between
    /// iterations, medians of 200, `chrt`) took 1 MiB out of place in 111-124 us this way
    /// against 146-148 reading (the point-to-point exchange's single copy, then the copy of
    /// our own block; Open MPI's does the same), in place in 30-33 against 65-70; 32-256
    /// KiB alike. In the library (np=2 bound to cores, `chrt`, load 28-35, medians of 5
    /// interleaved rounds): allgather 1 MiB 114.1 against 137.7 us point to point (Open MPI
    /// 137.8), allgatherv 113.8 against 138.8; 64 and 256 KiB 5.1 and 16.1 against 5.4 and
    /// 16.9; in place 1 MiB 54.8 against 54.7. An error when a copy failed, a rank's block differs in length from our
    /// count for it (that block is not copied) or, on 2 ranks, a rank's layout does not fit
    /// its buffer (nothing is copied).
    pub fn allgatherv_cma(
        &self,
        buf: &mut [u8],
        (counts, displs): (&[usize], &[usize]),
        own: Option<&[u8]>,
    ) -> Result<()> {
        let (p, me) = (self.size, self.rank);
        assert!(
            counts.len() == p && displs.len() == p,
            "allgatherv_cma: one block per rank"
        );
        let mine = displs[me]..displs[me] + counts[me];
        assert!(
            own.is_none_or(|o| o.len() == mine.len()),
            "allgatherv_cma: our block's length"
        );
        let k = self.next();
        self.reusable(k.saturating_sub(NBUF));
        let pair = p == 2;
        let (ours, at) = (vec![mine.len(); p], vec![0; p]);
        // Where our block is, for readers; on 2 ranks also where we want each block, for
        // writers (the layout, when it lies inside `buf`).
        let layout = pair.then_some((&*buf, counts, displs));
        // SAFETY: our own buffer of `k`, free (waited above) and not stamped yet.
        unsafe { self.put_addresses(k, (own.unwrap_or(&buf[mine.clone()]), &ours, &at), layout) };
        if pair && me == 0 {
            // In place writing stays: far, 256 KiB, it took 36.3 us against 44.9 reading,
            // and the chooser, tried there too, was 8-16 % slower than writing always.
            let way = if own.is_none() || pair_choice::next(counts[0].max(counts[1])) {
                PAIR_WRITE
            } else {
                PAIR_READ
            };
            // SAFETY: as above; the word lies within `DATA` (checked at compile time).
            unsafe {
                self.data(me, k)
                    .cast::<u64>()
                    .add(PAIR_CHOICE)
                    .write_unaligned(way)
            };
        }
        self.put_word(self.stamp(me, k), k);
        if let Some(o) = own {
            // The peers write only their blocks of `buf`, which do not overlap ours.
            let total = buf.len();
            copy_own(&mut buf[mine.clone()], o, total);
        }
        self.wait_all(k);
        let moved = if pair {
            // SAFETY: every rank stamped `k` (waited above), not finished yet; rank 0's
            // choice word lies within its post.
            let (posted, layouts, way) = unsafe {
                (
                    (0..p).all(|r| self.word(r, k, 0) == ADDRESSES),
                    (0..p).all(|r| self.word(r, k, RECV) != 0),
                    self.word(0, k, PAIR_CHOICE),
                )
            };
            if !posted || !layouts {
                self.finish(k);
                self.reusable(k);
                return Err(arg_err(
                    ErrorClass::Count,
                    "allgatherv: a rank's blocks do not fit its receive buffer",
                ));
            }
            // Both ranks follow rank 0's choice (every rank reads the same post).
            let write = way == PAIR_WRITE;
            let t = std::time::Instant::now();
            let moved = if write {
                self.push_all(k, own.unwrap_or(&buf[mine.clone()]), counts)
            } else {
                self.pair_reads.fetch_add(1, Ordering::Relaxed);
                self.read_all(k, None, (buf, counts, displs))
            };
            let peer = counts[1 - me];
            if me == 0 && peer > 0 {
                let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
                pair_choice::record(counts[0].max(counts[1]), write, peer, ns);
            }
            moved
        } else {
            self.read_all(k, None, (buf, counts, displs))
        };
        match self.cma_done(k, moved, "allgatherv")? {
            true => Ok(()),
            false => Err(arg_err(
                ErrorClass::Truncate,
                "allgatherv: a rank's block differs in length from its count",
            )),
        }
    }

    /// What every rank can do by CMA to every rank that posted addresses in alltoallv `k`
    /// ([`LEVEL_NONE`], [`LEVEL_READ`], [`LEVEL_PUSH`]): each probes each ([`probe_level`]),
    /// then all post their answer as the next collective (returned, with the lowest
    /// answer). The verdict is kept when it is none, or when every rank posted addresses
    /// (then every pair was probed).
    fn probe_cma(&self, k: u64) -> (u64, u8) {
        let me = self.rank;
        // SAFETY: every rank stamped `k`.
        let addr = |r: usize| unsafe { self.word(r, k, 0) } == ADDRESSES;
        let level = (0..self.size)
            .filter(|&r| r != me && addr(r))
            .map(|r| {
                // SAFETY: rank `r` posted its pid and the addresses of two bytes of its
                // segment state, alive until it is done with `k` (after us); the second is
                // written only by such probes and read by nobody.
                unsafe {
                    probe_level(
                        self.word(r, k, 1) as i32,
                        self.word(r, k, 3),
                        self.word(r, k, 4),
                    )
                }
            })
            .min()
            .unwrap_or(LEVEL_PUSH);
        let (k2, all) = self.all_min(level);
        if all == LEVEL_NONE || (0..self.size).all(addr) {
            self.set_cma_level(all);
        }
        (k2, all)
    }

    /// How many out-of-place alltoall(v)s on this segment wrote their blocks into the
    /// receivers' buffers ([`Seg::push_blocks`]) rather than read them (for tests and
    /// diagnostics).
    pub fn pushes(&self) -> u64 {
        self.pushes.load(Ordering::Relaxed)
    }

    /// How many allgather(v)s on 2 ranks by cross-memory copies read the peer's block
    /// rather than wrote ours into its buffer (rank 0's choice, see [`pair_choice`]; for
    /// tests and diagnostics).
    pub fn pair_reads(&self) -> u64 {
        self.pair_reads.load(Ordering::Relaxed)
    }

    /// Keep the verdict of a probe that every rank took part in: `level` of
    /// [`LEVEL_NONE`], [`LEVEL_READ`], [`LEVEL_PUSH`].
    pub(super) fn set_cma_level(&self, level: u8) {
        let state = |yes: bool| if yes { CMA_YES } else { CMA_NO };
        self.push
            .store(state(level >= LEVEL_PUSH), Ordering::Relaxed);
        self.cma
            .store(state(level >= LEVEL_READ), Ordering::Relaxed);
    }

    /// The lowest of every rank's `v`: each posts its byte as the next collective,
    /// returned unfinished with the lowest (the caller finishes it).
    pub(super) fn all_min(&self, v: u8) -> (u64, u8) {
        let k = self.next();
        self.post(k, &[v]);
        self.wait_all(k);
        // SAFETY: every rank stamped `k` (waited above); one byte each.
        let low = (0..self.size)
            .map(|r| unsafe { self.peer(r, k, 0, 1) }[0])
            .min()
            .unwrap_or(v);
        (k, low)
    }

    /// In place: trade our block for every rank with its block for us (lengths checked
    /// symmetric by the caller), see the module documentation.
    fn swap_all(&self, k: u64, buf: &mut [u8], displs: &[usize]) -> io::Result<()> {
        let (p, me) = (self.size, self.rank);
        let mut bounce = Vec::new();
        for j in (0..p).filter(|&j| j != me) {
            // SAFETY: every rank stamped `k` (waited by the caller), not finished yet.
            let (n, theirs) = unsafe { self.block(j, k, me) };
            if n == 0 {
                continue;
            }
            let mine = &mut buf[displs[j]..displs[j] + n];
            // SAFETY: every rank stamped `k` (waited by the caller), not finished yet.
            let (f_me, f_j) = unsafe { (self.flag(me, k), self.flag(j, k)) };
            // SAFETY: every rank stamped `k` (waited by the caller), not finished yet.
            let pid = unsafe { self.word(j, k, 1) } as i32;
            match (f_me, f_j) {
                (TABLE, TABLE) => {
                    // SAFETY: rank `j`'s posted block for us, `n` bytes at its offset.
                    mine.copy_from_slice(unsafe { self.peer(j, k, theirs as usize, n) });
                }
                // SAFETY: rank `j` posted its block for us at `theirs` (`n` bytes), whose
                // half nobody else touches (the peer trades the other half) until it is
                // done with `k`, after us.
                (ADDRESSES, ADDRESSES) => unsafe {
                    trade(pid, mine, theirs, me < j, (&mut bounce, chunk_for(p)))?
                },
                (TABLE, _) => {
                    // Ours are posted: fetch theirs into place, then put ours in its place.
                    // SAFETY: the whole of rank `j`'s block for us is ours to read and then
                    // write (it posted its address); ours for `j` is in our segment buffer.
                    unsafe {
                        cma_copy(pid, mine.as_mut_ptr(), theirs, n, Cma::Read)?;
                        let (_, off) = self.block(me, k, j);
                        cma_copy(
                            pid,
                            self.data(me, k).add(off as usize),
                            theirs,
                            n,
                            Cma::Write,
                        )?;
                    }
                }
                _ => {} // Rank `j`'s blocks are posted: it trades this pair.
            }
        }
        Ok(())
    }

    /// Allgatherv `k` on ranks that posted their receive layouts: write our block `mine`
    /// into every other rank's buffer where it wants it, rank `me + 1` first; false if a
    /// rank's count for our block differs from its length (not written there), or a rank's
    /// own count (the length of the block it writes into our buffer) differs from ours for
    /// it, `counts`.
    fn push_all(&self, k: u64, mine: &[u8], counts: &[usize]) -> io::Result<bool> {
        let (p, me) = (self.size, self.rank);
        let mut ok = true;
        for j in (1..p).map(|i| (me + i) % p) {
            // SAFETY: every rank stamped `k` with its block and its receive layout
            // (checked by the caller), not finished yet.
            let (n, at, (theirs, _)) = unsafe {
                (
                    self.word(j, k, HEAD + 3 * p + me) as usize,
                    self.word(j, k, RECV) + self.word(j, k, HEAD + 2 * p + me),
                    self.block(j, k, j),
                )
            };
            ok &= theirs == counts[j];
            if n != mine.len() {
                ok = false;
                continue;
            }
            if n == 0 {
                continue;
            }
            // SAFETY: rank `j`'s receive buffer holds `n` bytes at `at` for our block (its
            // posted layout, checked inside its buffer), written by us alone and left
            // alone by `j` until every rank is done with `k`, after us; `mine` holds `n`
            // bytes, only read (the write copies from the local side).
            unsafe {
                cma_copy(
                    self.word(j, k, 1) as i32,
                    mine.as_ptr().cast_mut(),
                    at,
                    n,
                    Cma::Write,
                )?
            };
        }
        Ok(ok)
    }

    /// Out of place, every rank having posted its receive layout ([`Seg::put_addresses`]):
    /// write our block for every other rank into its receive buffer where it wants it
    /// (`process_vm_writev`, rank `me + 1` first, so that at each step every rank writes
    /// into a different rank) and copy our own into `recv`; false, as for
    /// [`Seg::read_all`], if some block for us differs in length from our count for it or
    /// lies outside `recv` (its sender, which reads our posted count, does not write it).
    ///
    /// Each CPU then copies from the send buffer of the rank it runs, where pulling has it
    /// copy from the others' (np=8 on 2 vCPUs, 1 MiB blocks, a prototype: 6823 against 7853
    /// us, Open MPI 6332, 3 rounds). This implementation measured level with the read
    /// (alltoall 1 MiB, np=8 block-pinned, 3 rounds, load 23-33: 6586 against 6710 in the
    /// same build, base 6583, Open MPI 5421) when first written; it is on by default now
    /// for receive blocks of at least `coll_sm_alltoall_push_min` (32 KiB; 0 turns it
    /// off).
    ///
    /// A writer writes only after the receiver stamped `k` with its layout (the caller
    /// waited for every stamp), and the receiver leaves the collective only once every
    /// rank is done with `k` ([`Seg::cma_done`]): after every write into its buffer.
    fn push_blocks(
        &self,
        k: u64,
        send: &[u8],
        (recv, rcounts, rdispls): (&mut [u8], &[usize], &[usize]),
    ) -> io::Result<bool> {
        let (p, me) = (self.size, self.rank);
        // Our posted layout equals `rcounts`/`rdispls` (a posted layout lies inside
        // `recv`): check what the others send us against it, as the read does.
        let mut ok = true;
        for (j, &want) in rcounts.iter().enumerate() {
            // SAFETY: every rank stamped `k` (waited by the caller), not finished yet.
            let (n, _) = unsafe { self.block(j, k, me) };
            ok &= n == want;
        }
        // Our own block, from the address we posted inside `send`.
        // SAFETY: as above.
        let (n, at) = unsafe { self.block(me, k, me) };
        if n == rcounts[me] {
            let d = at as usize - send.as_ptr() as usize;
            let total = recv.len();
            copy_own(
                &mut recv[rdispls[me]..rdispls[me] + n],
                &send[d..d + n],
                total,
            );
        }
        for j in (1..p).map(|i| (me + i) % p) {
            // SAFETY: as above; rank `j` posted a receive layout (checked by the caller).
            let (n, at, want, to, pid) = unsafe {
                let (n, at) = self.block(me, k, j);
                let want = self.word(j, k, HEAD + 3 * p + me) as usize;
                let to = self.word(j, k, RECV) + self.word(j, k, HEAD + 2 * p + me);
                (n, at, want, to, self.word(j, k, 1) as i32)
            };
            if n != want || n == 0 {
                continue;
            }
            // Our block lies inside `send` at `at` (our posted table).
            let d = at as usize - send.as_ptr() as usize;
            let src = &send[d..d + n];
            // SAFETY: rank `j`'s receive buffer holds `n` bytes at `to` for our block (its
            // posted layout, checked inside its buffer), written by us alone, and `j`
            // leaves the collective only after every rank is done with `k`, after this
            // write; `src` holds `n` bytes, only read (the write copies from the local
            // side).
            unsafe { cma_copy(pid, src.as_ptr().cast_mut(), to, n, Cma::Write)? };
        }
        Ok(ok)
    }

    /// Out of place: our block from every rank into `recv` (`send`: our own blocks, `None`
    /// when ours is already in place); false if some block's length differs from its
    /// count or lies outside `recv` (not copied).
    ///
    /// Rank `me` reads its own block, then from `me + 1`, `me + 2`, ... (mod `p`), as a
    /// pairwise exchange pairs them, so that at each step every rank reads from a
    /// different rank. In rank order every rank read rank 0's buffer first, then rank 1's,
    /// ...: np=4 (2 cores, under load), alltoall of 64 KiB blocks took 33.1 us against
    /// 28.8 us rotated, of 1 MiB 1113 against 895 us (medians of 7 interleaved runs; a
    /// later run under heavier load: 30.5 against 26.6 us, and 1 MiB alike).
    ///
    /// Two variants measured no faster at np=8 on 2 cores (1 MiB blocks, ranks under the
    /// default scheduler, interleaved rounds beside other builds): reading each rank's
    /// block as soon as its post is there, without waiting for every post first (as the
    /// nonblocking form reads): alltoall 5325 against 4673 us and 6891 against 7100 over
    /// 8 and 10 rounds, alltoallv 5620 against 5390, the ranks' CPU time 5% and their
    /// context switches 20-28% higher; and reading through a bounce buffer of 64 or
    /// 256 KiB that stays in the cache, then copying into `recv`: 8.8-9.6 ms against
    /// 6.0-6.5 (4 rounds), the kernel's copies no cheaper and the copy out 4 times the
    /// ranks' user time.
    fn read_all(
        &self,
        k: u64,
        send: Option<&[u8]>,
        (recv, rcounts, rdispls): (&mut [u8], &[usize], &[usize]),
    ) -> io::Result<bool> {
        let (p, me) = (self.size, self.rank);
        if rcounts.len() != p || rdispls.len() != p {
            return Ok(false);
        }
        let (mut ok, total) = (true, recv.len());
        for j in (0..p).map(|i| (me + i) % p) {
            // SAFETY: every rank stamped `k` (waited by the caller), not finished yet.
            let (n, at) = unsafe { self.block(j, k, me) };
            if n != rcounts[j] || rdispls[j] + n > recv.len() {
                ok = false;
                continue;
            }
            let dst = &mut recv[rdispls[j]..rdispls[j] + n];
            // SAFETY: every rank stamped `k` (waited by the caller), not finished yet.
            match unsafe { self.flag(j, k) } {
                // Our own block is never posted in a table: we copied it after posting.
                TABLE if j == me => {}
                // SAFETY: rank `j`'s posted block for us, `n` bytes at its offset.
                TABLE => dst.copy_from_slice(unsafe { self.peer(j, k, at as usize, n) }),
                _ if j == me => {
                    // Our own block, at the address we posted inside `send` (or in place).
                    if let Some(send) = send {
                        let d = at as usize - send.as_ptr() as usize;
                        copy_own(dst, &send[d..d + n], total);
                    }
                }
                // SAFETY: rank `j`'s send buffer holds `n` bytes at `at`, unchanged until
                // it is done with `k`, after us; `dst` holds `n` bytes.
                _ => unsafe {
                    cma_copy(
                        self.word(j, k, 1) as i32,
                        dst.as_mut_ptr(),
                        at,
                        n,
                        Cma::Read,
                    )?
                },
            }
        }
        Ok(ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`trade`] swaps exactly our half (the front one as the lower rank, else the back one)
    /// with the peer's, in chunks of any size, the last one short, and leaves the other half
    /// alone on both sides. The peer is our own process (CMA to our own pid).
    #[test]
    fn trade_swaps_our_half_in_chunks() {
        let pid = std::process::id() as i32;
        for (n, chunk) in [
            (10_000, 4096),
            (4096, 4096),
            (8193, 1024),
            (1, 4096),
            (9, 2),
        ] {
            for lower in [true, false] {
                let a: Vec<u8> = (0..n).map(|i| (i * 7 + 1) as u8).collect();
                let b: Vec<u8> = (0..n).map(|i| (i * 13 + 5) as u8).collect();
                let (mut mine, mut theirs, mut bounce) = (a.clone(), b.clone(), Vec::new());
                let at = theirs.as_mut_ptr() as u64;
                // SAFETY: `theirs` holds `n` bytes at `at`, not otherwise used during the call.
                unsafe { trade(pid, &mut mine, at, lower, (&mut bounce, chunk)) }
                    .expect("CMA to our own process");
                let theirs = std::hint::black_box(theirs);
                let (lo, hi) = if lower { (0, n / 2) } else { (n / 2, n) };
                for i in 0..n {
                    let ours = (lo..hi).contains(&i);
                    assert_eq!(
                        mine[i],
                        if ours { b[i] } else { a[i] },
                        "n {n} chunk {chunk} byte {i}"
                    );
                    assert_eq!(
                        theirs[i],
                        if ours { a[i] } else { b[i] },
                        "n {n} chunk {chunk} byte {i}"
                    );
                }
                assert!(bounce.len() <= chunk.max(1));
            }
        }
    }

    /// The chunk is [`CHUNK`] up to 2 ranks per online CPU and [`CHUNK_CROWDED`] above.
    #[test]
    fn chunk_for_depends_on_ranks_per_cpu() {
        let cpus = oxmpi_engine::sys::online_cpus();
        assert_eq!(chunk_for(2 * cpus), CHUNK);
        assert_eq!(chunk_for(2 * cpus + 1), CHUNK_CROWDED);
    }

    /// Our own block arrives whole and alone, below and from [`OWN_STREAM_MIN`] (plain and
    /// streaming), whatever the alignment of either side and the buffer's size.
    #[test]
    fn copy_own_copies_exactly() {
        let src: Vec<u8> = (0..OWN_STREAM_MIN + 4096)
            .map(|i| (i * 13 + 5) as u8)
            .collect();
        for n in [
            0,
            1,
            4095,
            OWN_STREAM_MIN - 1,
            OWN_STREAM_MIN,
            OWN_STREAM_MIN + 65,
        ] {
            for (so, d_off, total) in [
                (0, 0, OWN_STREAM_TOTAL),
                (3, 0, OWN_STREAM_TOTAL),
                (0, 7, OWN_STREAM_TOTAL),
                (64, 63, OWN_STREAM_TOTAL),
                (64, 63, 0),
            ] {
                let mut dst = vec![0xAAu8; n + 128];
                copy_own(&mut dst[d_off..d_off + n], &src[so..so + n], total);
                let at = format!("n {n} so {so} do {d_off}");
                assert_eq!(&dst[d_off..d_off + n], &src[so..so + n], "{at}");
                assert!(dst[..d_off].iter().all(|&b| b == 0xAA), "before, {at}");
                assert!(dst[d_off + n..].iter().all(|&b| b == 0xAA), "after, {at}");
            }
        }
    }
}
