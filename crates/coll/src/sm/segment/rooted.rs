//! Rooted data movers (bcast, gather, scatter) of blocks larger than a segment buffer, by
//! one cross-memory copy (CMA) per rank: the root posts its pid, its buffer's address and
//! where each rank's block is in it; every other rank copies its block between that buffer
//! and its own (`process_vm_readv` for bcast and scatter, `process_vm_writev` for gather)
//! and marks the collective done; the root returns once every rank is done. One copy and one
//! round trip, where the point-to-point rendezvous copies twice (into the shared bulk buffer
//! and out of it, each at cross-core speed on machines whose cores share no cache) behind a
//! clear-to-send round trip.
//!
//! Whether CMA reaches every pair of ranks (Yama, seccomp) is probed once per segment, when
//! it is made ([`Seg::cma_ready`]): two more rounds on the segment, after which every rank
//! knows the same answer ([`Seg::single_copy_max`]).
//!
//! A gather (and a gatherv block) of [`GATHER_PAIR`] on 2 ranks goes by one cross-memory
//! copy whose direction the root's post decides ([`Seg::gather_pair`]): both ranks post
//! their pid and block; the other rank's side ([`Seg::gather_leaf`]) is the same whatever
//! path the root took, and so is that of every gatherv rank, so that a root whose count
//! disagrees with a rank's block (erroneous) fails instead of leaving one of them waiting
//! for a post that never comes; out of place the other rank writes its block into the root's
//! receive buffer while the root copies its own (each CPU copies one block), in place the
//! root, which has nothing else to copy, reads the front half while the other rank writes
//! the back half, and the other rank waits for the root's read before it returns (its
//! block must stay as it is until read).

use super::cma::{CMA_NO, CMA_YES};
use super::{Bcast, Posted, Seg, LANE_SHIFT, NBUF, V_MAX};
use oxmpi_engine::{cma_copy, Cma};
use std::io;
use std::sync::atomic::Ordering;

/// Words of the root's post before the per-rank entries: pid, buffer address.
const HEAD: usize = 2;

/// Block sizes of a gather on 2 ranks, and of a gatherv block on 2 ranks, that move by
/// [`Seg::gather_pair`] when CMA reaches the peer: above `coll_sm_single_copy_max`'s
/// default (32 KiB; below, the other rank writes its block in both modes, [`Seg::rooted_cma`]:
/// split in place, 16 KiB measured 1.49 against 1.32 us) up to 1 MiB (the point-to-point
/// rendezvous above).
pub const GATHER_PAIR: std::ops::RangeInclusive<usize> = (32 << 10) + 1..=1 << 20;

/// Largest communicator whose post fits a buffer (two words per rank; a scatterv's table
/// with the root's pid and an address per rank takes less).
const _: () = assert!(8 * (HEAD + 2 * super::super::MAX_RANKS as usize) <= super::DATA);

/// Flag of a scatterv table entry ([`Seg::scatterv`]) whose block its rank reads from the
/// root's buffer by CMA (the block's length in the low bits).
pub(super) const FAR: u64 = 1 << 63;

/// What a rank copies in a rooted single-copy collective ([`Seg::rooted_cma`]).
pub enum Side<'a> {
    /// Its block from the root's buffer into this one (bcast, scatter).
    Read(&'a mut [u8]),
    /// This block into the root's buffer (gather).
    Write(&'a [u8]),
    /// At the root of a gather or scatter out of place: its own block, copied from the
    /// first slice into the second once its post is out, while the others copy theirs
    /// (neither slice is a part of the root's buffer that another rank copies).
    Own(&'a [u8], &'a mut [u8]),
}

/// What became of a non-root rank's gather(v) block ([`Seg::gather_leaf`]).
#[derive(Debug)]
pub enum Given {
    /// It is at the root (posted on the segment, or written into the root's buffer).
    Done,
    /// The root receives it point to point: the caller sends it ([`BY_P2P`]).
    Send,
    /// The root has less room for it than its length, this many bytes, or takes no
    /// block of this size on the path it chose: not copied.
    Truncated(usize),
    /// The cross-memory write into the root's buffer failed.
    Failed(io::Error),
}

/// The low half of a gather(v) root's first word: its pid; the high half says what the
/// post is ([`POST_PAIR`], [`POST_TABLE`]; another collective's post has neither).
const PID_BITS: u64 = 0xffff_ffff;
/// A [`Seg::gather_pair`] root's post: its pid, the address and room for the other block,
/// whether it is in place.
const POST_PAIR: u64 = 1 << 32;
/// A [`Seg::gatherv_root`] root's post: its pid, then per rank an address and a count
/// ([`BY_P2P`], or 0 and 0: none).
pub(super) const POST_TABLE: u64 = 2 << 32;
/// A [`Seg::rooted_cma`] root's post: its pid, its buffer's address, per rank an offset
/// and a length.
const POST_ROOTED: u64 = 3 << 32;
/// The first word of a bcast root's post through its ring cell ([`Seg::bcast`]), with the
/// length in the low half.
pub(super) const BCAST_RING: u64 = 4 << 32;
/// The first word of a bcast root's head ([`Seg::bcast_head`]); the length follows.
const BCAST_HEAD: u64 = 5 << 32;
/// The first word of a scatter root's post through its ring cell ([`Seg::scatter`]), with
/// the length of the posted blocks in the low half.
pub(super) const SCATTER_RING: u64 = 6 << 32;
/// The first word of a scatter root's head ([`Seg::scatter_head`]: every block goes point
/// to point); the block length follows.
pub(super) const SCATTER_HEAD: u64 = 7 << 32;
/// The count of a gatherv table entry whose block the root receives point to point.
pub(super) const BY_P2P: u64 = u64::MAX;

impl Seg {
    /// Whether every rank reaches every other by CMA. Collective the first time on a
    /// segment (when no earlier collective found out): every rank posts its pid and the
    /// address of a byte, reads every other rank's byte, then all post whether they could
    /// and take the same verdict; later calls only look at it. Every rank must call this at
    /// the same collective (it depends only on arguments all ranks share).
    pub fn cma_ready(&self) -> bool {
        match self.cma.load(Ordering::Relaxed) {
            CMA_YES => return true,
            CMA_NO => return false,
            _ => {}
        }
        let me = self.rank;
        let k = self.next();
        let probe = std::ptr::from_ref(&self.cma).cast::<u8>() as u64;
        let sink = std::ptr::from_ref(&self.sink).cast::<u8>() as u64;
        let mut post = [0u8; 24];
        post[..8].copy_from_slice(&crate::sm::own_pid().to_ne_bytes());
        post[8..16].copy_from_slice(&probe.to_ne_bytes());
        post[16..].copy_from_slice(&sink.to_ne_bytes());
        self.post(k, &post);
        self.wait_all(k);
        let level = (0..self.size)
            .filter(|&r| r != me)
            .map(|r| {
                // SAFETY: rank `r` stamped `k` (waited above) and we finish `k` only after
                // these copies; 24 posted bytes.
                let w = unsafe { self.peer(r, k, 0, 24) };
                let word =
                    |i: usize| u64::from_ne_bytes(w[8 * i..8 * i + 8].try_into().expect("8 bytes"));
                // SAFETY: rank `r` posted its pid and the addresses of two bytes of its
                // segment state, which live as long as its segment; the second is written
                // only by such probes and read by nobody.
                unsafe { super::cma::probe_level(word(0) as i32, word(1), word(2)) }
            })
            .min()
            .unwrap_or(super::cma::LEVEL_PUSH);
        self.finish(k);
        let (k2, all) = self.all_min(level);
        self.finish(k2);
        self.set_cma_level(all);
        all >= super::cma::LEVEL_READ
    }

    /// Whether an earlier collective found that every rank reaches every other by CMA
    /// ([`Seg::cma_ready`], run when the segment is made): for the nonblocking forms,
    /// which cannot run the probe. The same on every rank at the same collective.
    pub fn cma_known(&self) -> bool {
        self.cma.load(Ordering::Relaxed) == CMA_YES
    }

    /// Whether the same probe ([`Seg::cma_ready`]) found that every rank may also write
    /// into every other's memory (`process_vm_writev`, which a seccomp filter may deny
    /// apart from the read). The same on every rank at the same collective.
    pub fn push_known(&self) -> bool {
        self.cma_known() && self.push.load(Ordering::Relaxed) == CMA_YES
    }

    /// The largest block of a rooted collective (and of a gatherv or scatterv block) that
    /// moves by one cross-memory copy on this segment: `coll_sm_single_copy_max` (`_many`
    /// on more than 2 ranks) when CMA reaches every rank, reading and writing, else 0. The probe runs when the
    /// segment is made whenever that limit is not 0, so this never waits, and every rank
    /// gets the same answer (blocking and nonblocking callers alike).
    pub fn single_copy_max(&self) -> usize {
        // A gather's ranks write into the root's buffer, a nonblocking alltoallv in place
        // trades by writes: only where the kernel allows writes too.
        if self.push_known() {
            super::super::params::single_copy_max_for(self.size)
        } else {
            0
        }
    }

    /// A rooted collective by one cross-memory copy per rank (see the module
    /// documentation); call only for blocks of at most [`Seg::single_copy_max`] bytes. At the root, `root_buf`
    /// is its buffer (the send buffer of a bcast or scatter, the receive buffer of a
    /// gather) and `entry(r)` the offset and length of rank `r`'s block in it; it copies
    /// only its own block ([`Side::Own`]), between its post and its wait. Elsewhere `mine` is the rank's side of the copy. A block longer than
    /// its receiving side is not copied (`Ok(Some(n))`: the block's length); an error when a
    /// copy failed (a buffer outside the process's memory). Every rank marks the collective
    /// done either way, so none is left waiting.
    pub fn rooted_cma(
        &self,
        root: usize,
        root_buf: *const u8,
        entry: impl Fn(usize) -> (usize, usize),
        mine: Side<'_>,
    ) -> io::Result<Option<usize>> {
        let k = self.next();
        let p = self.size;
        if self.rank == root {
            self.reusable(k.saturating_sub(super::NBUF));
            let w = self.data(self.rank, k).cast::<u64>();
            // SAFETY: our own buffer of collective `k`, read by nobody until we stamp it
            // and no longer by anybody for `k - NBUF` (waited above); `8 * (HEAD + 2p)`
            // bytes fit it (checked at compile time for the largest communicator).
            unsafe {
                w.write_unaligned(crate::sm::own_pid() | POST_ROOTED);
                w.add(1).write_unaligned(root_buf as u64);
                for r in 0..p {
                    let (off, len) = entry(r);
                    w.add(HEAD + 2 * r).write_unaligned(off as u64);
                    w.add(HEAD + 2 * r + 1).write_unaligned(len as u64);
                }
            }
            self.put_word(self.stamp(self.rank, k), k);
            // Our own block while the others copy theirs, rather than before our post.
            if let Side::Own(src, dst) = mine {
                dst.copy_from_slice(src);
            }
            // Our buffer is read or written by the others until they are done.
            for r in (0..p).filter(|&r| r != root) {
                self.wait_word(self.seq_word(r), k);
            }
            self.finish(k);
            if self.min_done.load(Ordering::Relaxed) < k {
                self.min_done.store(k, Ordering::Relaxed);
            }
            return Ok(None);
        }
        self.wait_word(self.stamp(root, k), k);
        // SAFETY: the root stamped `k` (waited above) and we finish `k` only after the
        // reads; its post has `HEAD + 2p` words.
        let word = |i: usize| unsafe { self.data(root, k).cast::<u64>().add(i).read_unaligned() };
        let (pid, base) = (word(0) as i32, word(1));
        let (off, len) = (word(HEAD + 2 * self.rank), word(HEAD + 2 * self.rank + 1));
        let len = len as usize;
        // The root's buffer holds `len` bytes at `off` for us, unchanged (and written by
        // nobody else) until we are done with `k`, as the root waits for that.
        let r = match mine {
            // SAFETY: see above; `buf` has room for the `len` bytes (checked).
            Side::Read(buf) if len <= buf.len() => unsafe {
                cma_copy(pid, buf.as_mut_ptr(), base + off, len, Cma::Read).map(|()| None)
            },
            // SAFETY: see above; the block fits its `len` bytes (checked), and a write only
            // reads the local side.
            Side::Write(blk) if blk.len() <= len => unsafe {
                let src = blk.as_ptr().cast_mut();
                cma_copy(pid, src, base + off, blk.len(), Cma::Write).map(|()| None)
            },
            Side::Read(_) => Ok(Some(len)),
            Side::Write(blk) => Ok(Some(blk.len())),
            // Only the root has an own block to copy.
            Side::Own(..) => Ok(Some(len)),
        };
        self.finish(k);
        r
    }

    /// Broadcast of `buf` (more than [`super::DATA`] bytes, at most
    /// [`Seg::single_copy_max`]) from `root` by one cross-memory read per rank
    /// ([`Seg::rooted_cma`]). A rank whose `buf` differs in length from the root's
    /// (erroneous) sees another post or another length in the root's ([`Seg::wait_post`]),
    /// copies nothing and says what the root did ([`Seg::bcast_other`]); it marks the
    /// collective done all the same, so that the root, which waits for that, returns.
    pub fn bcast_cma(&self, buf: &mut [u8], root: usize) -> Bcast {
        let n = buf.len();
        if self.rank == root {
            // The root's side never fails (it copies nothing itself).
            let _ = self.rooted_cma(root, buf.as_ptr(), |_| (0, n), Side::Read(&mut []));
            return Bcast::Done;
        }
        let k = self.next();
        let p = self.wait_post(root, k, false);
        // SAFETY: the root stamped its buffer of `k` (waited above) and we finish `k` only
        // after the reads; a root's post of this kind has `HEAD + 2p` words.
        let word = |i: usize| unsafe { self.post_word(root, k, i) };
        let ours = matches!(p, Posted::Buf)
            && word(0) & !PID_BITS == POST_ROOTED
            && word(HEAD + 2 * self.rank + 1) == n as u64;
        if !ours {
            return self.bcast_other(root, k, p);
        }
        let (pid, at) = (
            (word(0) & PID_BITS) as i32,
            word(1) + word(HEAD + 2 * self.rank),
        );
        // SAFETY: the root's buffer holds our `n` bytes at `at`, unchanged until we are done
        // with `k` (the root waits for that); `buf` has room for them.
        let r = unsafe { cma_copy(pid, buf.as_mut_ptr(), at, n, Cma::Read) };
        self.finish(k);
        match r {
            Ok(()) => Bcast::Done,
            Err(e) => Bcast::Failed(e),
        }
    }

    /// The head of a broadcast of `n` bytes from `root` that takes neither the segment's
    /// buffers nor [`Seg::bcast_cma`] (none, or more than they take: point to point, or
    /// through the large region): the root posts the length and goes on; every other rank
    /// checks it against its own before it goes on too ([`Bcast::Done`]), or says what
    /// the root did instead ([`Seg::bcast_other`]). A rank whose length differs from the
    /// root's (erroneous) then neither waits for data of its own length on another path
    /// nor leaves the root's data unread.
    pub fn bcast_head(&self, n: usize, root: usize) -> Bcast {
        let k = self.next();
        if self.rank == root {
            self.reusable(k.saturating_sub(NBUF));
            let w = self.data(self.rank, k).cast::<u64>();
            // SAFETY: our own buffer of collective `k`, read by nobody until we stamp it
            // and no longer by anybody for `k - NBUF` (waited above); two words.
            unsafe {
                w.write_unaligned(BCAST_HEAD);
                w.add(1).write_unaligned(n as u64);
            }
            self.put_word(self.stamp(self.rank, k), k);
            self.finish(k);
            return Bcast::Done;
        }
        let p = self.wait_post(root, k, false);
        // SAFETY: the root stamped its buffer of `k` (waited above), we have not finished
        // `k`; a head has two words.
        let word = |i: usize| unsafe { self.post_word(root, k, i) };
        let ours = matches!(p, Posted::Buf) && word(0) == BCAST_HEAD && word(1) == n as u64;
        if ours {
            self.finish(k);
            return Bcast::Done;
        }
        self.bcast_other(root, k, p)
    }

    /// What a broadcast reader whose length differs from the root's finds in the root's
    /// post `p` of collective `k` (acquired): the root's length ([`Bcast::Differs`]; 0 for a
    /// post of another collective), or its head ([`Bcast::Join`]). We are then done with
    /// `k`: nothing more of it is read.
    pub(super) fn bcast_other(&self, root: usize, k: u64, p: Posted) -> Bcast {
        let b = match p {
            Posted::Lane(v) => Bcast::Differs((v & ((1 << LANE_SHIFT) - 1)) as usize),
            Posted::Buf => {
                // SAFETY: the root stamped its buffer of `k` (the caller acquired it); we
                // finish `k` only after these reads, of words within its post (a rooted
                // post has `HEAD + 2p` words).
                let word = |i: usize| unsafe { self.post_word(root, k, i) };
                let w0 = word(0);
                match w0 & !PID_BITS {
                    BCAST_RING => Bcast::Differs((w0 & PID_BITS) as usize),
                    BCAST_HEAD => Bcast::Join(word(1) as usize),
                    POST_ROOTED => Bcast::Differs(word(HEAD + 2 * self.rank + 1) as usize),
                    _ => Bcast::Differs(0),
                }
            }
        };
        self.finish(k);
        b
    }

    /// A non-root rank's part of a gather or gatherv on the segment, whatever path the root
    /// takes (its post decides; the root's count for our block and our block's length
    /// agree in a correct program, but an erroneous one must fail, not hang). We post our
    /// block's length first, then the block itself when it has at most [`V_MAX`] bytes (the
    /// root copies it from there, whatever its count; we are done), else our pid and the
    /// block's address, and wait for the root's post: a [`Seg::gather_pair`] root's says
    /// where the block goes and whether the root reads the front half of it (in place); a
    /// gatherv table ([`Seg::gatherv_root`]) gives our entry: an address and room to write
    /// the block into, or [`BY_P2P`] (the caller sends it point to point, the root receives
    /// it), or nothing (its count was at most [`V_MAX`], or the block does not fit its
    /// buffer). A block longer than the room it is given is not copied
    /// ([`Given::Truncated`]; the root finds the same from our post), nor is it when the
    /// root's post is of another collective's kind.
    pub fn gather_leaf(&self, root: usize, blk: &[u8]) -> Given {
        let k = self.next();
        self.reusable(k.saturating_sub(super::NBUF));
        let n = blk.len();
        let base = self.data(self.rank, k);
        // SAFETY: our own buffer of collective `k`, read by nobody until we stamp it and no
        // longer by anybody for `k - NBUF` (waited above); `8 + n <= CAP` bytes, or 3 words.
        unsafe {
            base.cast::<u64>().write_unaligned(n as u64);
            if n <= V_MAX {
                std::ptr::copy_nonoverlapping(blk.as_ptr(), base.add(8), n);
            } else {
                base.add(8)
                    .cast::<u64>()
                    .write_unaligned(crate::sm::own_pid());
                base.add(16)
                    .cast::<u64>()
                    .write_unaligned(blk.as_ptr() as u64);
            }
        }
        self.put_word(self.stamp(self.rank, k), k);
        if n <= V_MAX {
            self.finish(k);
            return Given::Done;
        }
        self.wait_word(self.stamp(root, k), k);
        // SAFETY: (each use) the root stamped `k` (waited above) and we finish `k` only
        // after the reads; its post has the words its kind says.
        let word = |i: usize| unsafe { self.data(root, k).cast::<u64>().add(i).read_unaligned() };
        let head = word(0);
        let pid = (head & PID_BITS) as i32;
        // Write `blk[from..]` at `to + from` of the root's memory, which has room for `n`
        // bytes at `to` for our block alone, unchanged until we are done with `k` (the root
        // waits for that).
        let write = |to: u64, from: usize| {
            let src = blk[from..].as_ptr().cast_mut();
            // SAFETY: see above; a write only reads our side.
            match unsafe { cma_copy(pid, src, to + from as u64, n - from, Cma::Write) } {
                Ok(()) => Given::Done,
                Err(e) => Given::Failed(e),
            }
        };
        let r = match head & !PID_BITS {
            POST_PAIR => {
                let (to, room, root_in_place) = (word(1), word(2) as usize, word(3) != 0);
                // In place the root reads the front of our block, we write the rest.
                let h = if root_in_place { front(n) } else { 0 };
                let r = if n > room {
                    Given::Truncated(n)
                } else {
                    write(to, h)
                };
                if root_in_place {
                    self.finish(k);
                    // The root reads our block: it stays ours until the root is done.
                    self.wait_word(self.seq_word(root), k);
                    return r;
                }
                r
            }
            POST_TABLE => {
                let (at, c) = (word(1 + 2 * self.rank), word(2 + 2 * self.rank));
                match c {
                    BY_P2P => Given::Send,
                    c if at != 0 && n as u64 <= c => write(at, 0),
                    _ => Given::Truncated(n),
                }
            }
            _ => Given::Truncated(n),
        };
        self.finish(k);
        r
    }

    /// The root's part of a gather of blocks of `block` bytes (1 to [`super::DATA`]) on
    /// the segment: every other rank runs [`Seg::gather_leaf`], which posts its length and
    /// (as it has at most [`V_MAX`] bytes in a correct program) its block; we copy each from
    /// there into its place in `recv` (`size * block` bytes), and our own from `own` (at
    /// most `block` bytes; `None`: in place, already there). We post nothing unless a rank's length says it waits for
    /// our post (its block is longer than [`V_MAX`]: erroneous): then a table without room
    /// for any block, which fails it ([`Given::Truncated`]). A shorter block than `block`
    /// is copied all the same (as point to point); false when some block was longer (not
    /// copied).
    pub fn gather_root(&self, own: Option<&[u8]>, recv: &mut [u8], block: usize) -> bool {
        let (me, p, b) = (self.rank, self.size, block);
        let k = self.next();
        if let Some(s) = own {
            recv[me * b..me * b + s.len()].copy_from_slice(s);
        }
        let (mut ok, mut posted) = (true, false);
        for r in (0..p).filter(|&r| r != me) {
            self.wait_word(self.stamp(r, k), k);
            // SAFETY: rank `r` stamped `k` (waited above) and we finish `k` only after the
            // reads; its post starts with the length word.
            let n = unsafe { self.post_word(r, k, 0) } as usize;
            let into = &mut recv[r * b..(r + 1) * b];
            if n == b {
                // SAFETY: as above; `8 + b <= CAP` bytes posted.
                into.copy_from_slice(unsafe { self.peer(r, k, 8, b) });
            } else if n <= V_MAX {
                ok &= self.take_posted(r, k, into).is_none();
            } else {
                ok = false;
                if !posted {
                    self.post_no_room(k);
                    posted = true;
                }
            }
        }
        self.finish(k);
        ok
    }

    /// Post, as a gather(v) root at collective `k`, a table that gives no rank room
    /// ([`POST_TABLE`] with empty entries): a rank that waits for our post
    /// ([`Seg::gather_leaf`]) then copies nothing and fails.
    fn post_no_room(&self, k: u64) {
        self.reusable(k.saturating_sub(NBUF));
        let w = self.data(self.rank, k).cast::<u64>();
        // SAFETY: our own buffer of collective `k`, read by nobody until we stamp it and no
        // longer by anybody for `k - NBUF` (waited above); `8 * (1 + 2p) <= DATA`.
        unsafe {
            w.write_unaligned(crate::sm::own_pid() | POST_TABLE);
            for i in 1..=2 * self.size {
                w.add(i).write_unaligned(0);
            }
        }
        self.put_word(self.stamp(self.rank, k), k);
    }

    /// The root's part of a gather on 2 ranks by one cross-memory copy, for blocks of
    /// [`GATHER_PAIR`] (call only when [`Seg::cma_known`]; the other rank runs
    /// [`Seg::gather_leaf`]). We post our pid, where the other block goes and its room, and
    /// whether we are in place (`own` `None`; else our own block, copied from the first
    /// slice into the second). Out of place the other rank writes its block into our
    /// buffer (`process_vm_writev`) and is done, while we copy our own block and wait for
    /// that; in place (no copy of our own to overlap with the other's write) we read the
    /// front half of the block ([`front`], `process_vm_readv`) while the other rank writes
    /// the back half, each marks the collective done and then waits for the other's mark:
    /// we for the write into our buffer, the other rank for the read of its block. The
    /// other rank's post says what it did: a block of at most [`V_MAX`] bytes is copied
    /// from there (when it fits `theirs`), a longer one than `theirs` is not copied
    /// (`Ok(Some(n))`: its length; the other rank finds the same), nor is our own when it
    /// does not fit; an error when a copy failed. Both ranks mark the collective done
    /// either way.
    pub fn gather_pair(
        &self,
        theirs: &mut [u8],
        own: Option<(&[u8], &mut [u8])>,
    ) -> io::Result<Option<usize>> {
        debug_assert!(self.size == 2, "a gather of 2 ranks");
        let (me, peer) = (self.rank, 1 - self.rank);
        let k = self.next();
        self.reusable(k.saturating_sub(super::NBUF));
        let w = self.data(me, k).cast::<u64>();
        // SAFETY: our own buffer of collective `k`, read by nobody until we stamp it and no
        // longer by anybody for `k - NBUF` (waited above); 4 words fit it.
        unsafe {
            w.write_unaligned(crate::sm::own_pid() | POST_PAIR);
            w.add(1).write_unaligned(theirs.as_ptr() as u64);
            w.add(2).write_unaligned(theirs.len() as u64);
            w.add(3).write_unaligned(u64::from(own.is_none()));
        }
        self.put_word(self.stamp(me, k), k);
        let word = |i: usize| {
            // SAFETY: (each use) the other rank stamped `k` (waited for first) and we
            // finish `k` only after the reads; its post has 3 words, or the length word
            // and as many bytes when that is at most `V_MAX`.
            unsafe { self.data(peer, k).cast::<u64>().add(i).read_unaligned() }
        };
        let r = match own {
            Some((src, dst)) => {
                // Our own block while the other rank writes its own (elsewhere in `recv`).
                let fits = src.len() <= dst.len();
                if fits {
                    dst[..src.len()].copy_from_slice(src);
                }
                // Our buffer is written by the other rank until it is done; it posted
                // before.
                self.wait_word(self.seq_word(peer), k);
                if self.min_done.load(Ordering::Relaxed) < k {
                    self.min_done.store(k, Ordering::Relaxed);
                }
                match self.take_posted(peer, k, theirs) {
                    Some(n) => Ok(Some(n)),
                    None => Ok((!fits).then_some(src.len())),
                }
            }
            None => {
                self.wait_word(self.stamp(peer, k), k);
                let n = word(0) as usize;
                if n <= V_MAX || n > theirs.len() {
                    let r = self.take_posted(peer, k, theirs);
                    self.finish(k);
                    return Ok(r);
                }
                let (pid, from) = (word(1) as i32, word(2));
                // We read the front of the block, the other rank writes the rest.
                let h = front(n);
                // SAFETY: the other rank's block, `n` bytes at `from` in its memory, stays
                // as it is until we are done with `k` (it waits for that); `h <= n` bytes
                // fit `theirs`.
                let r = unsafe { cma_copy(pid, theirs.as_mut_ptr(), from, h, Cma::Read) };
                self.finish(k);
                // Our buffer is written by the other rank until it is done.
                self.wait_word(self.seq_word(peer), k);
                return r.map(|()| None);
            }
        };
        self.finish(k);
        r
    }

    /// What rank `r` posted for a gather of ours at collective `k` (it stamped `k`, which
    /// we finish only after this), `into` the room for its block: a block of at most
    /// [`V_MAX`] bytes is copied from its post into the front of `into` (`None`), or not
    /// when it does not fit (`Some(n)`, its length); a longer block is copied by the rank
    /// itself when it fits (`None`), else `Some(n)`.
    pub(super) fn take_posted(&self, r: usize, k: u64, into: &mut [u8]) -> Option<usize> {
        // SAFETY: rank `r` stamped `k` and we finish `k` only after the reads (caller); its
        // post starts with the length word, followed by the block when it is posted.
        let n = unsafe { self.data(r, k).cast::<u64>().read_unaligned() } as usize;
        if n > into.len() {
            return Some(n);
        }
        if n <= V_MAX {
            // SAFETY: as above; `8 + n <= CAP`.
            into[..n].copy_from_slice(unsafe { self.peer(r, k, 8, n) });
        }
        None
    }
}

/// Bytes of an in-place [`Seg::gather_pair`] block of `n` bytes that the root reads (the
/// front half, in whole pages when there are any): the other rank writes the rest, so that
/// both CPUs copy, as the point-to-point rendezvous's cooperative copy does.
fn front(n: usize) -> usize {
    let h = n / 2;
    if h >= 4096 {
        h & !4095
    } else {
        h
    }
}
