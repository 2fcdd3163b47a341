//! Shared helpers: the byte reduction [`Op`], argument checks, per-thread scratch buffers
//! and the even split of a vector between ranks.

use super::comm::{arg_err, Result};
use super::params::{self as tune, Coll};
use oxmpi_engine::ErrorClass;

/// A 16-byte aligned scratch block (reductions on it need the element type's alignment).
#[repr(align(16))]
pub(crate) struct Aligned(pub(crate) [u8; 256]);

/// A reduction operation on bytes.
#[derive(Clone, Copy)]
pub struct Op<'a> {
    /// `f(in, inout)`: `inout[i] = in[i] ∘ inout[i]` for every element of the slices (both
    /// have the same length, a multiple of `elem_size`).
    pub f: &'a dyn Fn(&[u8], &mut [u8]),
    /// Size of one element in bytes (at least 1); vectors are split only between elements.
    pub elem_size: usize,
    /// `∘` is commutative (algorithms may then combine in any order).
    pub commutative: bool,
}

/// The error of a rank whose broadcast buffer holds `n` bytes where the root sends `m`
/// (`CollComm::bcast`, `CollComm::ibcast`): `MPI_ERR_TRUNCATE` when the root sends more,
/// else `MPI_ERR_COUNT`.
pub(crate) fn bcast_differs(m: usize, n: usize) -> oxmpi_engine::Error {
    lengths_differ(
        m as u64,
        n,
        format!("bcast: the root sends {m} bytes, this rank's buffer holds {n}"),
    )
}

/// The error of a collective whose data from another rank has `theirs` bytes where this
/// rank has `ours` (erroneous arguments), saying `msg`: `MPI_ERR_TRUNCATE` when theirs is
/// longer (it would not fit), else `MPI_ERR_COUNT`. Every length check of the
/// collectives (broadcasts, reductions, the two-rank cross-memory pair) decides here.
pub(crate) fn lengths_differ(theirs: u64, ours: usize, msg: String) -> oxmpi_engine::Error {
    // A reduce-scatter's length may carry the mark of its block counts ([`counts_mark`]).
    let (t, o) = (theirs & LEN_BYTES, ours as u64 & LEN_BYTES);
    if t == o {
        return arg_err(
            ErrorClass::Count,
            format!(
                "reduce_scatter: another rank splits the vector of {o} bytes into other \
                 blocks (the ranks' counts differ)"
            ),
        );
    }
    let class = if t > o {
        ErrorClass::Truncate
    } else {
        ErrorClass::Count
    };
    arg_err(class, msg)
}

/// The bits of a reduction's length (the word posted on the segment, the length a
/// persistent init compares) that hold bytes; those above hold a reduce-scatter's
/// [`counts_mark`].
pub(crate) const LEN_BYTES: u64 = (1 << COUNTS_MARK_SHIFT) - 1;
const COUNTS_MARK_SHIFT: u32 = 44;

/// The mark of a reduce-scatter's block counts (items or bytes, `counts`), added to the
/// vector's length where the ranks compare it (the segment's length words, the pair's
/// post, a persistent init): 0 when every block is alike (`MPI_Reduce_scatter_block`,
/// nothing changes), else a hash of the counts divided by their greatest common divisor
/// (so items and bytes, and ranks whose datatypes differ in size with the same type
/// signature, give the same mark) in bits 44 to 62. Ranks passing different counts of the
/// same sum (erroneous: each would fold its own block of the vector and succeed) then
/// post different lengths and fail alike, on every path that compares them.
pub fn counts_mark<I: Iterator<Item = usize> + Clone>(counts: I) -> usize {
    fn gcd(mut a: usize, mut b: usize) -> usize {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    }
    let g = counts.clone().fold(0, gcd);
    let mut first = None;
    if g == 0 || counts.clone().all(|k| *first.get_or_insert(k) == k) {
        return 0;
    }
    // FNV-1a over the reduced counts, folded to 19 bits, never 0.
    let h = counts.fold(0xcbf2_9ce4_8422_2325u64, |h, k| {
        (h ^ (k / g) as u64).wrapping_mul(0x0100_0000_01b3)
    });
    let bits = 63 - COUNTS_MARK_SHIFT;
    let m = ((h ^ (h >> bits) ^ (h >> (2 * bits))) & ((1 << bits) - 1)) | 1;
    (m << COUNTS_MARK_SHIFT) as usize
}

/// Rank `me`'s place in the binomial tree of a broadcast from `root` on `p` ranks (that of
/// the point-to-point `CollComm::ibcast` and of the segment's `SmKind::BcastMsg`): its
/// ancestors below the root (parent first) and its children, largest subtree first.
pub(crate) fn bcast_tree(me: usize, root: usize, p: usize) -> (Vec<usize>, Vec<usize>) {
    let rel = (me + p - root) % p;
    let abs = |r: usize| (r + root) % p;
    let mut ancestors = Vec::new();
    let mut a = rel;
    while a != 0 {
        a &= a - 1;
        if a != 0 {
            ancestors.push(abs(a));
        }
    }
    // Children: rel + m for every power of two m below rel's lowest set bit (below p at
    // the root), largest first.
    let low = if rel == 0 {
        p.next_power_of_two()
    } else {
        rel & rel.wrapping_neg()
    };
    let mut children = Vec::new();
    let mut m = low >> 1;
    while m > 0 {
        if rel + m < p {
            children.push(abs(rel + m));
        }
        m >>= 1;
    }
    (ancestors, children)
}

/// Marker-header flag of a broadcast that a rank between the root and this one could not
/// forward: its buffer (the header's low bits: its length) was shorter than the root's data
/// (`CollComm::bcast`, `CollComm::ibcast`).
pub(crate) const TRUNCATED_ABOVE: u64 = 1 << 63;

pub(crate) fn check_op(len: usize, op: &Op) -> Result<()> {
    if op.elem_size == 0 || len % op.elem_size != 0 {
        return Err(arg_err(
            ErrorClass::Count,
            format!(
                "{len} bytes is not a whole number of {}-byte elements",
                op.elem_size
            ),
        ));
    }
    Ok(())
}

pub(crate) fn check_blocks(len: usize, counts: &[usize], displs: &[usize]) -> Result<()> {
    for (i, (&c, &d)) in counts.iter().zip(displs).enumerate() {
        if d.checked_add(c).is_none_or(|end| end > len) {
            return Err(arg_err(
                ErrorClass::Count,
                format!("block {i} ({c} bytes at {d}) exceeds the {len}-byte buffer"),
            ));
        }
    }
    Ok(())
}

/// An out-of-place allgather's own block (`own`, `None` in place) must be `len` bytes,
/// the size of its slot in the receive buffer.
pub(crate) fn check_own(own: Option<&[u8]>, len: usize) -> Result<()> {
    if own.is_some_and(|o| o.len() != len) {
        return Err(arg_err(
            ErrorClass::Truncate,
            "allgather: send size differs from the receive block",
        ));
    }
    Ok(())
}

/// Copies an out-of-place allgather's own block (checked by [`check_own`]) into its slot
/// `at` of `buf`; nothing in place.
pub(crate) fn place_own(buf: &mut [u8], at: std::ops::Range<usize>, own: Option<&[u8]>) {
    if let Some(o) = own {
        buf[at].copy_from_slice(o);
    }
}

/// Scratch buffers kept per thread: large reductions would otherwise allocate (and the
/// kernel zero-fill) a fresh mapping on every call.
pub(crate) struct Scratch(Vec<u8>);

thread_local! {
    static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Buffers up to this size are kept for the next call.
const SCRATCH_KEEP: usize = 16 << 20;

impl Scratch {
    /// A buffer of `n` bytes (contents unspecified: callers overwrite before reading).
    pub(crate) fn new(n: usize) -> Scratch {
        let mut v = SCRATCH.with(|c| c.take());
        if v.len() < n {
            v = vec![0u8; n];
        }
        Scratch(v)
    }
}

impl std::ops::Deref for Scratch {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl std::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.0.len() <= SCRATCH_KEEP {
            let v = std::mem::take(&mut self.0);
            // A nested collective (from a user operation) may have left a buffer there;
            // keep the larger one.
            SCRATCH.with(|c| {
                let old = c.take();
                c.set(if old.len() > v.len() { old } else { v });
            });
        }
    }
}

/// Large byte buffers kept between collectives for any thread (the scratch and packed
/// regions of nonblocking schedules, which are made on one thread and dropped on whichever
/// finishes them, and the copies the C layer makes): a fresh mapping of a megabyte costs
/// hundreds of page faults, far more than the collective's copy of it.
static POOL: std::sync::Mutex<Vec<Vec<u8>>> = std::sync::Mutex::new(Vec::new());
/// Buffers the pool keeps at most.
const POOL_BUFFERS: usize = 4;
/// Buffers from this size on are worth keeping (smaller ones come from the allocator's
/// own free lists, already mapped).
const POOL_MIN: usize = 64 << 10;

/// A buffer of `n` bytes, from the pool when it has one at least that large (contents
/// unspecified up to its former length, zero after: callers overwrite before reading).
pub fn pooled(n: usize) -> Vec<u8> {
    if n >= POOL_MIN {
        let mut g = POOL.lock().unwrap_or_else(|p| p.into_inner());
        // The smallest one that fits.
        let best = (0..g.len())
            .filter(|&i| g[i].capacity() >= n)
            .min_by_key(|&i| g[i].capacity());
        if let Some(i) = best {
            let mut v = g.swap_remove(i);
            drop(g);
            v.resize(n, 0);
            return v;
        }
    }
    vec![0u8; n]
}

/// Give a buffer back to the pool (kept if large enough, at most [`SCRATCH_KEEP`] bytes,
/// and the pool is not full; otherwise replacing the pool's smallest if larger).
pub fn unpool(v: Vec<u8>) {
    let c = v.capacity();
    if !(POOL_MIN..=SCRATCH_KEEP).contains(&c) {
        return;
    }
    let mut g = POOL.lock().unwrap_or_else(|p| p.into_inner());
    if g.len() < POOL_BUFFERS {
        g.push(v);
    } else if let Some(i) = (0..g.len()).min_by_key(|&i| g[i].capacity()) {
        if g[i].capacity() < c {
            g[i] = v;
        }
    }
}

/// A buffer from the pool ([`pooled`]) that goes back to it ([`unpool`]) when dropped,
/// whichever way its owner returns.
#[derive(Debug, Default)]
pub struct Pooled(Vec<u8>);

impl Pooled {
    /// A pooled buffer of `n` bytes (contents unspecified, as [`pooled`]).
    pub fn new(n: usize) -> Self {
        Pooled(pooled(n))
    }

    /// Adopts `v` (from [`pooled`] or not): it goes to the pool when dropped.
    pub fn from_vec(v: Vec<u8>) -> Self {
        Pooled(v)
    }
}

impl std::ops::Deref for Pooled {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl std::ops::DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        &mut self.0
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        unpool(std::mem::take(&mut self.0));
    }
}

/// Splits `len` bytes into `p` consecutive blocks of whole `elem`-byte elements, as even as
/// possible: (counts, displacements).
pub fn split_even(len: usize, elem: usize, p: usize) -> (Vec<usize>, Vec<usize>) {
    let n = len / elem;
    let (q, rem) = (n / p, n % p);
    let counts: Vec<usize> = (0..p).map(|i| (q + usize::from(i < rem)) * elem).collect();
    let mut displs = Vec::with_capacity(p);
    let mut off = 0;
    for &c in &counts {
        displs.push(off);
        off += c;
    }
    (counts, displs)
}

/// The sizes of the fold that the recursive-doubling reductions start with on `p` ranks:
/// `(pof2, rem)`, the largest power of two `pof2 <= p` and the `rem = p - pof2` ranks too
/// many. The first `2 * rem` ranks fold pairwise (even into odd) so that `pof2` remain.
pub(crate) fn fold_sizes(p: i32) -> (i32, i32) {
    let pof2 = 1 << (31 - (p as u32).leading_zeros());
    (pof2, p - pof2)
}

/// The real rank of rank `nd` among the `pof2` ranks left after the fold of
/// [`fold_sizes`]: the odd one of each of the first `rem` pairs, then the ranks above them.
pub(crate) fn fold_real_rank(nd: i32, rem: i32) -> i32 {
    if nd < rem {
        nd * 2 + 1
    } else {
        nd + rem
    }
}

/// One exchange of Rabenseifner's allreduce as seen by one of the `pof2` remaining ranks
/// (see [`rabenseifner_plan`]): with the real rank `peer`, send the byte range `send` of
/// the vector and receive the range `recv` (a halving step then reduces what it received
/// into that range of our vector; a doubling step receives it in place).
pub(crate) struct RabStep {
    pub peer: i32,
    pub send: std::ops::Range<usize>,
    pub recv: std::ops::Range<usize>,
}

/// The exchanges of Rabenseifner's allreduce of an `n`-byte vector of `elem`-byte elements
/// for the remaining rank `newrank` of `pof2` (`rem` ranks folded, see [`fold_sizes`]): the
/// recursive-halving steps (each keeps half of the blocks still owned, sends the other
/// half to the partner at distance `mask`, from `pof2 / 2` down), then the
/// recursive-doubling steps that gather the reduced blocks back. The blocking and the
/// nonblocking allreduce follow the same plan.
pub(crate) fn rabenseifner_plan(
    (n, elem): (usize, usize),
    (pof2, rem): (i32, i32),
    newrank: i32,
) -> (Vec<RabStep>, Vec<RabStep>) {
    let real = |nd: i32| fold_real_rank(nd, rem);
    let (counts, displs) = split_even(n, elem, pof2 as usize);
    // Byte range of blocks [lo, hi).
    let span = |lo: usize, hi: usize| displs[lo]..displs[hi - 1] + counts[hi - 1];
    let (mut halving, mut doubling) = (Vec::new(), Vec::new());
    let (mut lo, mut hi) = (0usize, pof2 as usize);
    let mut mask = pof2 >> 1;
    while mask > 0 {
        let mid = lo + (hi - lo) / 2;
        let (keep, give) = if newrank & mask == 0 {
            ((lo, mid), (mid, hi))
        } else {
            ((mid, hi), (lo, mid))
        };
        halving.push(RabStep {
            peer: real(newrank ^ mask),
            send: span(give.0, give.1),
            recv: span(keep.0, keep.1),
        });
        (lo, hi) = keep;
        mask >>= 1;
    }
    let mut mask = 1;
    while mask < pof2 {
        let w = hi - lo;
        let other = if newrank & mask == 0 {
            (hi, hi + w)
        } else {
            (lo - w, lo)
        };
        doubling.push(RabStep {
            peer: real(newrank ^ mask),
            send: span(lo, hi),
            recv: span(other.0, other.1),
        });
        (lo, hi) = (lo.min(other.0), hi.max(other.1));
        mask <<= 1;
    }
    (halving, doubling)
}

/// Whether a scan (or exclusive scan) of `n` bytes on `p` ranks runs the pipelined chain
/// rather than recursive doubling: forced by `coll_tuned_scan_algorithm` (1 recursive
/// doubling, 2 chain), else from [`tune::SCAN_CHAIN_MIN`] bytes on more than 2 ranks. The
/// blocking and the nonblocking scans decide alike (every rank the same: `n` and `p` match).
pub(crate) fn scan_chain(n: usize, p: i32) -> bool {
    match tune::algorithm(Coll::Scan) {
        1 => false,
        2 => true,
        _ => p > 2 && n >= tune::SCAN_CHAIN_MIN,
    }
}

/// The segments (offset, length) in which the chain scan moves an `n`-byte vector of
/// `elem`-byte elements: [`tune::SCAN_SEGMENT`] bytes rounded down to a multiple of
/// `8 * elem` (whole elements, and every segment as aligned as the vector for the
/// vectorised reductions), the last one shorter; none for an empty vector.
pub(crate) fn chain_segments(n: usize, elem: usize) -> Vec<(usize, usize)> {
    let unit = 8 * elem.max(1);
    let seg = (tune::SCAN_SEGMENT / unit).max(1) * unit;
    (0..n).step_by(seg).map(|o| (o, seg.min(n - o))).collect()
}

/// The bytes of a scan's length header ([`ScanLens`]): 16 of magic, the smallest and the
/// largest length.
pub(crate) const SCAN_HDR: usize = 32;
const SCAN_MAGIC: [u8; 16] = *b"oxmpi scan chain";

/// The lengths of a range of ranks that a chain rank's check before the chain gathers
/// (`CollComm::scan_chain_check`, and the nonblocking chain's header rounds,
/// `CollComm::iscan_from`) over the recursive-doubling plan's messages: the
/// smallest and the largest, or ([`ScanLens::OTHER`]) a rank of that range took recursive
/// doubling (its message was not a header).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct ScanLens {
    pub(crate) lo: u64,
    pub(crate) hi: u64,
}

impl ScanLens {
    /// No rank yet.
    pub(crate) const NONE: Self = Self {
        lo: u64::MAX,
        hi: 0,
    };
    /// A rank of recursive doubling, or a message that was not a header.
    pub(crate) const OTHER: Self = Self {
        lo: 0,
        hi: u64::MAX,
    };

    pub(crate) fn of(n: usize) -> Self {
        Self {
            lo: n as u64,
            hi: n as u64,
        }
    }

    pub(crate) fn with(self, o: Self) -> Self {
        Self {
            lo: self.lo.min(o.lo),
            hi: self.hi.max(o.hi),
        }
    }

    /// The one length every rank of the range passes, if they are chain ranks that agree.
    pub(crate) fn all(self) -> Option<usize> {
        (self.lo == self.hi).then_some(self.lo as usize)
    }

    pub(crate) fn encode(self) -> [u8; SCAN_HDR] {
        let mut b = [0u8; SCAN_HDR];
        b[..16].copy_from_slice(&SCAN_MAGIC);
        b[16..24].copy_from_slice(&self.lo.to_le_bytes());
        b[24..].copy_from_slice(&self.hi.to_le_bytes());
        b
    }

    /// The header in `b` (exactly [`SCAN_HDR`] bytes that start with the magic).
    pub(crate) fn parse(b: &[u8]) -> Option<Self> {
        if b.len() != SCAN_HDR || b[..16] != SCAN_MAGIC {
            return None;
        }
        let w = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Some(Self {
            lo: w(16),
            hi: w(24),
        })
    }
}

/// One round of the recursive-doubling scan plan, seen from one rank.
pub(crate) struct ScanRound {
    /// The partner's rank.
    pub peer: i32,
    /// We extend our partial with what the partner sends (we exchange again later).
    pub keep: bool,
    /// The partner needs our partial: it ranks higher (its result), or it extends its own
    /// partial for later rounds.
    pub send: bool,
    /// We receive the partner's partial: it ranks lower (our result), or we keep it.
    pub recv: bool,
}

/// The rounds of rank `r` of `p` in the scan plan that the blocking
/// ([`CollComm::scan_into`](crate::CollComm)) and the nonblocking scans follow: distances 1,
/// 2, 4, ..., a partial sent only to a partner that needs it and extended only while
/// rounds remain.
pub(crate) fn scan_rounds(r: i32, p: i32) -> Vec<ScanRound> {
    // Whether rank `x` has a partner in a round after the one of distance `m`.
    let later = |x: i32, m: i32| {
        let mut m2 = m << 1;
        while m2 < p {
            if x ^ m2 < p {
                return true;
            }
            m2 <<= 1;
        }
        false
    };
    let mut rounds = Vec::new();
    let mut mask = 1;
    while mask < p {
        let d = r ^ mask;
        if d < p {
            let keep = later(r, mask);
            rounds.push(ScanRound {
                peer: d,
                keep,
                send: r < d || later(d, mask),
                recv: d < r || keep,
            });
        }
        mask <<= 1;
    }
    rounds
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reduce-scatter's counts mark: 0 for alike blocks (any count, empty too), the same
    /// for counts in items and in bytes of a larger type, another for another split of
    /// the same sum, always above the bytes' bits; a mark-only difference is a count error.
    #[test]
    fn counts_marks() {
        let mark = |c: &[usize]| counts_mark(c.iter().copied());
        assert_eq!(mark(&[2, 2]), 0);
        assert_eq!(mark(&[0, 0, 0]), 0);
        assert_eq!(mark(&[7]), 0);
        let m = mark(&[1, 3]);
        assert_ne!(m, 0);
        assert_eq!(m as u64 & LEN_BYTES, 0);
        assert_eq!(m, mark(&[8, 24]));
        assert_ne!(m, mark(&[3, 1]));
        assert_ne!(mark(&[0, 4]), mark(&[1, 3]));
        assert_ne!(mark(&[0, 4]), 0);
        let e = lengths_differ((16 | m) as u64, 16, String::new());
        assert_eq!(e.class(), ErrorClass::Count);
    }

    /// Every rank but the root is the child of exactly one rank, the first of its
    /// ancestors (the root when it has none), whose own ancestors follow; every path ends
    /// at the root within log2(p) steps, and the root's children are the largest subtrees
    /// first.
    #[test]
    fn bcast_tree_reaches_every_rank_once_from_its_parent() {
        for p in 1..=70 {
            for root in [0, 1, p / 2, p - 1].into_iter().filter(|&r| r < p) {
                let trees: Vec<_> = (0..p).map(|me| bcast_tree(me, root, p)).collect();
                let mut parent_of = vec![None; p];
                for (me, (_, children)) in trees.iter().enumerate() {
                    for &c in children {
                        assert!(c != root && c < p, "p {p} root {root}: {me} -> {c}");
                        assert_eq!(parent_of[c].replace(me), None, "p {p} root {root}: {c}");
                    }
                }
                for me in (0..p).filter(|&me| me != root) {
                    let (ancestors, _) = &trees[me];
                    let parent = ancestors.first().copied().unwrap_or(root);
                    assert_eq!(parent_of[me], Some(parent), "p {p} root {root}: {me}");
                    assert_eq!(&trees[parent].0[..], &ancestors[ancestors.len().min(1)..]);
                    assert!(ancestors.len() < p.next_power_of_two().trailing_zeros() as usize + 1);
                }
                let (up, kids) = &trees[root];
                assert!(up.is_empty());
                assert_eq!(kids.len(), p.next_power_of_two().trailing_zeros() as usize);
                let rel = |r: usize| (r + p - root) % p;
                assert!(kids.windows(2).all(|w| rel(w[0]) > rel(w[1])));
            }
        }
    }

    #[test]
    fn fold_keeps_a_power_of_two_and_maps_back_to_real_ranks() {
        assert_eq!(fold_sizes(1), (1, 0));
        assert_eq!(fold_sizes(4), (4, 0));
        assert_eq!(fold_sizes(6), (4, 2));
        assert_eq!(fold_sizes(7), (4, 3));
        // p = 6: ranks 1 and 3 keep the folded pairs, then 4 and 5.
        let real: Vec<i32> = (0..4).map(|nd| fold_real_rank(nd, 2)).collect();
        assert_eq!(real, vec![1, 3, 4, 5]);
        // No fold: the identity.
        let real: Vec<i32> = (0..4).map(|nd| fold_real_rank(nd, 0)).collect();
        assert_eq!(real, vec![0, 1, 2, 3]);
    }

    #[test]
    fn split_even_covers_the_vector_at_element_boundaries() {
        let (c, d) = split_even(40, 4, 3);
        assert_eq!(c, vec![16, 12, 12]);
        assert_eq!(d, vec![0, 16, 28]);
        let (c, d) = split_even(4, 4, 3);
        assert_eq!(c, vec![4, 0, 0]);
        assert_eq!(d, vec![0, 4, 4]);
    }

    #[test]
    fn block_checks_reject_out_of_range_blocks() {
        assert!(check_blocks(10, &[5, 5], &[0, 5]).is_ok());
        assert!(check_blocks(10, &[5, 6], &[0, 5]).is_err());
        assert!(check_blocks(10, &[1], &[usize::MAX]).is_err());
    }

    #[test]
    fn op_length_must_be_whole_elements() {
        let f = |_: &[u8], _: &mut [u8]| {};
        let op = Op {
            f: &f,
            elem_size: 4,
            commutative: true,
        };
        assert!(check_op(8, &op).is_ok());
        assert!(check_op(6, &op).is_err());
    }
}
