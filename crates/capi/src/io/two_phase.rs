//! Two-phase collective file access (the `fcoll` framework's `two_phase` component):
//! `MPI_File_write_all`, `read_all`, `_at_all` and the ordered forms.
//!
//! One aggregator per node (the lowest rank of the file's group there), at most `cb_nodes`
//! of them when the file's info sets that hint (ROMIO's name; spread evenly over the nodes,
//! see [`limit_aggregators`]). The file range
//! every rank touches, `[lo, hi)`, is cut into as many contiguous domains as there are
//! aggregators. Phase one exchanges the pieces: each rank cuts its file segments at the
//! domain borders and sends each piece to the aggregator owning it (for a write with its
//! data, for a read only its place). Phase two: each aggregator merges what it received into
//! contiguous blocks and writes or reads each block with one call; for a read it sends every
//! rank its pieces back. As ROMIO does, both phases run in rounds: round `r` covers the
//! `r`-th `cb_buffer_size` bytes of every domain (the file's hint, default
//! [`CB_BUFFER_SIZE`]), so an aggregator never holds more than that at once. Aggregators
//! report per call on `fcoll_base_verbose` level 10.
//!
//! Aggregation only pays where it merges small pieces of several ranks: as ROMIO does with
//! its `romio_cb_read`/`romio_cb_write` hints at `automatic` (the default), a call of a
//! group of more than one rank whose ranks' file ranges do not interleave, or in which every
//! rank accesses one contiguous range, goes to the file from each rank directly after the
//! first exchange ([`Route`]: one collective step instead of four or five, which is what a
//! call costs when the ranks wait for each other on a busy machine). `enable` always
//! aggregates, `disable` never does.
//!
//! Argument checks: every rank's check result travels with the first exchange (the ranges),
//! so when one rank's arguments are bad no rank touches the file and every rank returns an
//! error (the failing rank its own, the others one naming it), as ROMIO hands an I/O error
//! of a collective write to every rank; nobody waits for the failing rank.
//!
//! The pure parts (domains, cutting, merging, the message encoding) are functions tested
//! here; [`run`] drives them over the file's private communicator (`comm::Internal`).
//! Atomic mode keeps the independent path (each rank's range lock).

use super::access::{direct, read_full};
use super::collective::internal;
use super::file::{os_err, FileObj};
use crate::comm::Internal;
use crate::consts::*;
use crate::ffi::{MpiError, MpiResult};
use oxmpi_base::output::Stream;
use oxmpi_base::select::{select_global, Candidate, SelectError};
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;

/// Verbose output of the `fcoll` framework (`fcoll_base_verbose`).
static FCOLL: Stream = Stream::new("fcoll");

/// Bytes an aggregator handles per round when the file's info has no `cb_buffer_size` hint
/// (ROMIO's default, 16 MiB).
pub(super) const CB_BUFFER_SIZE: u64 = 16 << 20;

/// Whether the `two_phase` component is selected. `fcoll=^two_phase` leaves no
/// component: collective access is then independent (the framework's fallback, not an
/// error); an unknown component name keeps two-phase, after a one-line report.
pub(super) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        let _ = oxmpi_base::params::register_global(&oxmpi_engine::PROVIDER);
        match select_global("fcoll", &[Candidate::available("two_phase")]) {
            Ok(s) => s.components.contains(&"two_phase"),
            Err(SelectError::NoneSelected { .. }) => false,
            Err(e) => {
                oxmpi_base::output::warn(format_args!("{e}"));
                true
            }
        }
    })
}

/// The file domains: `[lo, hi)` cut into `k` contiguous parts of equal size (the last may
/// be shorter or empty). Domain `i` is `[lo + i*d, lo + (i+1)*d)` clipped to `hi`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Domains {
    lo: u64,
    hi: u64,
    d: u64,
    k: usize,
}

impl Domains {
    /// `k` domains over `[lo, hi)` (`k >= 1`).
    pub(super) fn new(lo: u64, hi: u64, k: usize) -> Domains {
        let k = k.max(1);
        let d = (hi.saturating_sub(lo)).div_ceil(k as u64).max(1);
        Domains { lo, hi, d, k }
    }

    /// The domain holding byte `off` (`lo <= off < hi`).
    fn of(&self, off: u64) -> usize {
        (((off - self.lo) / self.d) as usize).min(self.k - 1)
    }

    /// The end of domain `i`.
    fn end(&self, i: usize) -> u64 {
        if i + 1 >= self.k {
            self.hi
        } else {
            self.lo + (i as u64 + 1) * self.d
        }
    }

    /// `segs` cut at the domain borders: `(domain, offset, length)` in the order of `segs`.
    pub(super) fn cut(&self, segs: &[(u64, u64)]) -> Vec<(usize, u64, u64)> {
        let mut out = Vec::with_capacity(segs.len());
        for &(mut off, mut len) in segs {
            while len > 0 {
                let i = self.of(off);
                let take = len.min(self.end(i).saturating_sub(off).max(1));
                out.push((i, off, take));
                off += take;
                len -= take;
            }
        }
        out
    }

    /// `segs` cut at the domain borders and at the borders of the rounds (`cbs` bytes of
    /// every domain per round): `(domain, round, offset, length)` in the order of `segs`.
    pub(super) fn cut_rounds(&self, segs: &[(u64, u64)], cbs: u64) -> Vec<Piece> {
        let cbs = cbs.max(1);
        let mut out = Vec::new();
        for (dom, mut off, mut len) in self.cut(segs) {
            let start = self.lo + dom as u64 * self.d;
            while len > 0 {
                let round = (off - start) / cbs;
                let take = len.min(start + (round + 1) * cbs - off);
                out.push(Piece {
                    dom,
                    round,
                    off,
                    len: take,
                });
                off += take;
                len -= take;
            }
        }
        out
    }

    /// The number of rounds of `cbs` bytes that cover the largest domain.
    pub(super) fn rounds(&self, cbs: u64) -> u64 {
        if self.hi <= self.lo {
            return 0;
        }
        self.d.div_ceil(cbs.max(1))
    }
}

/// A piece of one rank's access: within one domain and one round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Piece {
    /// The domain (index of its aggregator).
    pub(super) dom: usize,
    /// The round that carries it.
    pub(super) round: u64,
    /// Its file offset.
    pub(super) off: u64,
    /// Its length in bytes.
    pub(super) len: u64,
}

/// The `cb_buffer_size` hint: bytes per aggregator and round ([`CB_BUFFER_SIZE`] when it
/// is missing or not a positive number, as MPI allows for hints).
pub(super) fn cb_buffer_size(hint: Option<&str>) -> u64 {
    hint.and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|&b| b > 0)
        .unwrap_or(CB_BUFFER_SIZE)
}

/// Pieces `(offset, length)` merged into the contiguous blocks covering them (sorted by
/// offset; touching or overlapping pieces join).
pub(super) fn blocks(pieces: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut sorted: Vec<(u64, u64)> = pieces.iter().copied().filter(|p| p.1 > 0).collect();
    sorted.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (off, len) in sorted {
        match out.last_mut() {
            Some((o, l)) if off <= *o + *l => *l = (*l).max(off + len - *o),
            _ => out.push((off, len)),
        }
    }
    out
}

/// The aggregators among `per_node` (one per node, in rank order) that the `cb_nodes` hint
/// allows: at most that many, spread evenly over the list (the first always in). A hint that
/// is not a positive number is ignored, as MPI allows for hints.
pub(super) fn limit_aggregators(per_node: &[usize], cb_nodes: Option<&str>) -> Vec<usize> {
    let k = cb_nodes
        .and_then(|v| v.trim().parse::<usize>().ok())
        .filter(|&k| k > 0 && k < per_node.len());
    match k {
        Some(k) => (0..k).map(|i| per_node[i * per_node.len() / k]).collect(),
        None => per_node.to_vec(),
    }
}

/// How one collective call reaches the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Route {
    /// Through the aggregators, in two phases.
    Aggregate,
    /// Each rank accesses its own segments itself.
    Direct,
}

/// The route of a call from the ranks' `(lo, hi, segments)` (file range and segment count
/// of each rank's access; an empty access has `hi <= lo`) and the `romio_cb_read` or
/// `romio_cb_write` hint: `enable` aggregates, `disable` goes direct, and `automatic` (or
/// no hint, or another value, ignored as MPI allows for hints) goes direct in a group of
/// more than one rank when no two ranks' ranges overlap or every rank's access is one
/// contiguous segment: aggregation would merge nothing there.
pub(super) fn route(ranks: &[(u64, u64, u64)], hint: Option<&str>) -> Route {
    match hint.map(str::trim) {
        Some("enable") => return Route::Aggregate,
        Some("disable") => return Route::Direct,
        _ => {}
    }
    if ranks.len() < 2 {
        return Route::Aggregate;
    }
    let mut ranges: Vec<(u64, u64)> = ranks
        .iter()
        .filter(|r| r.1 > r.0)
        .map(|r| (r.0, r.1))
        .collect();
    ranges.sort_unstable();
    let disjoint = ranges.windows(2).all(|w| w[1].0 >= w[0].1);
    if disjoint || ranks.iter().all(|r| r.2 <= 1) {
        Route::Direct
    } else {
        Route::Aggregate
    }
}

/// Appends a piece header (offset, length) to a message.
fn put_piece(msg: &mut Vec<u8>, off: u64, len: u64) {
    msg.extend_from_slice(&off.to_le_bytes());
    msg.extend_from_slice(&len.to_le_bytes());
}

/// Reads a little-endian `u64` at `*pos` of `msg` and advances past it.
fn take_u64(msg: &[u8], pos: &mut usize) -> MpiResult<u64> {
    let b = msg
        .get(*pos..*pos + 8)
        .ok_or_else(|| MpiError::new(MPI_ERR_INTERN, "two-phase I/O: truncated message"))?;
    *pos += 8;
    Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
}

/// The pieces of a request message: `(offset, length, data start)`; a write request
/// carries each piece's data after its header, a read request none.
pub(super) fn parse_pieces(msg: &[u8], with_data: bool) -> MpiResult<Vec<(u64, u64, usize)>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < msg.len() {
        let off = take_u64(msg, &mut pos)?;
        let len = take_u64(msg, &mut pos)?;
        out.push((off, len, pos));
        if with_data {
            pos = pos
                .checked_add(len as usize)
                .filter(|&e| e <= msg.len())
                .ok_or_else(|| {
                    MpiError::new(MPI_ERR_INTERN, "two-phase I/O: truncated piece data")
                })?;
        }
    }
    Ok(out)
}

/// What one rank contributes to a collective access: its file segments and, for a write,
/// their data (in segment order), and its argument checks' result (`check`: 0, or the error
/// class of the check that failed; such a rank still takes part, with nothing, so that the
/// others do not wait for it).
pub(super) struct Mine<'a> {
    pub(super) segs: &'a [(u64, u64)],
    pub(super) data: &'a [u8],
    pub(super) check: i32,
}

/// What an aggregator did over the rounds of one call (for its verbose line).
#[derive(Default)]
struct Tally {
    bytes: u64,
    blocks: usize,
    ranks: Vec<bool>,
}

/// Runs one collective access on `f`. A write returns the number of bytes written; a read
/// fills `out` (the rank's segments in order) and returns how many bytes were read before
/// the first one past the end of the file.
pub(super) fn run(f: &FileObj, write: bool, mine: Mine<'_>, out: &mut [u8]) -> MpiResult<usize> {
    let c = Internal::of(f.comm).map_err(internal("two-phase I/O"))?;
    let (me, n) = (c.rank(), c.size());
    let lo = mine.segs.iter().map(|s| s.0).min().unwrap_or(u64::MAX);
    let hi = mine.segs.iter().map(|s| s.0 + s.1).max().unwrap_or(0);
    const W: usize = 5; // i64 per rank in the first exchange
    let all = c
        .allgather_i64(&[
            node_key()?,
            lo as i64,
            hi as i64,
            i64::from(mine.check),
            mine.segs.len() as i64,
        ])
        .map_err(internal("two-phase I/O"))?;
    if let Some(r) = all.chunks_exact(W).position(|x| x[3] != 0) {
        return Err(MpiError::new(
            all[W * r + 3] as i32,
            format!(
                "{}: rank {r} of the file's group failed the argument checks of this collective access; no rank accessed the file",
                f.path.display()
            ),
        ));
    }
    let hint = |name: &str| {
        f.state()
            .info
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let ranks: Vec<(u64, u64, u64)> = all
        .chunks_exact(W)
        .map(|x| (x[1] as u64, x[2] as u64, x[4] as u64))
        .collect();
    let cb = hint(if write {
        "romio_cb_write"
    } else {
        "romio_cb_read"
    });
    if route(&ranks, cb.as_deref()) == Route::Direct {
        oxmpi_base::verbose!(
            FCOLL,
            20,
            "fcoll two_phase: {} {}: each rank accesses its own range (no aggregation)",
            if write { "write" } else { "read" },
            f.path.display()
        );
        let done = direct(f, write, mine.segs, mine.data, out);
        if !write {
            return done;
        }
        // A collective write returns once every rank's data is in the file, as with
        // aggregation (a rank may look at the file's size right after it): one more
        // exchange, which also gives every rank the same outcome.
        let code = done.as_ref().map_or_else(|e| i64::from(e.code), |_| 0);
        let codes = c
            .allgather_i64(&[code])
            .map_err(internal("two-phase I/O"))?;
        if let (Ok(_), Some(r)) = (&done, codes.iter().position(|&x| x != 0)) {
            return Err(MpiError::new(
                codes[r] as i32,
                format!(
                    "{}: rank {r} of the file's group failed its part of this collective write",
                    f.path.display()
                ),
            ));
        }
        return done;
    }
    // Aggregators: the first rank of each node, in rank order.
    let keys: Vec<i64> = all.chunks_exact(W).map(|x| x[0]).collect();
    let per_node: Vec<usize> = (0..n).filter(|&r| !keys[..r].contains(&keys[r])).collect();
    let aggs = limit_aggregators(&per_node, hint("cb_nodes").as_deref());
    let cbs = cb_buffer_size(hint("cb_buffer_size").as_deref());
    let lo = all.chunks_exact(W).map(|x| x[1] as u64).min().unwrap_or(0);
    let hi = all.chunks_exact(W).map(|x| x[2] as u64).max().unwrap_or(0);
    if hi <= lo {
        return Ok(0); // nobody accesses anything
    }
    let dom = Domains::new(lo, hi, aggs.len());
    let pieces = dom.cut_rounds(mine.segs, cbs);
    // Where each piece's data starts in `mine.data` / `out`.
    let at: Vec<usize> = pieces
        .iter()
        .scan(0usize, |pos, p| {
            let here = *pos;
            *pos += p.len as usize;
            Some(here)
        })
        .collect();
    let total: usize = pieces.iter().map(|p| p.len as usize).sum();
    let rounds = dom.rounds(cbs);
    let is_agg = aggs.contains(&me);
    let mut result: MpiResult<()> = Ok(());
    let mut tally = Tally {
        ranks: vec![false; n],
        ..Tally::default()
    };
    // Bytes each piece got back (reads).
    let mut got_back = vec![0usize; pieces.len()];
    for round in 0..rounds {
        // Phase one: this round's pieces to their aggregators.
        let mut req: Vec<Vec<u8>> = vec![Vec::new(); n];
        for (k, p) in pieces.iter().enumerate().filter(|(_, p)| p.round == round) {
            let m = &mut req[aggs[p.dom]];
            put_piece(m, p.off, p.len);
            if write {
                m.extend_from_slice(&mine.data[at[k]..at[k] + p.len as usize]);
            }
        }
        let got = c.exchange(&req).map_err(internal("two-phase I/O"))?;
        // Phase two at the aggregators (one that failed in an earlier round only answers).
        let mut replies: Vec<Vec<u8>> = vec![Vec::new(); n];
        if is_agg {
            result = result.and_then(|()| aggregate(f, write, &got, &mut replies, &mut tally));
        }
        if write {
            continue;
        }
        if let Err(e) = &result {
            for r in replies.iter_mut() {
                r.clear();
                r.extend_from_slice(&i64::from(e.code).to_le_bytes());
            }
        }
        let back = c.exchange(&replies).map_err(internal("two-phase I/O"))?;
        if result.is_err() {
            continue;
        }
        let mut cursor = vec![0usize; n];
        for &a in &aggs {
            if !back[a].is_empty() {
                let code = take_u64(&back[a], &mut cursor[a])? as i64;
                if code != 0 {
                    result = Err(MpiError::new(
                        code as i32,
                        format!(
                            "{}: the aggregator rank {a} failed to read",
                            f.path.display()
                        ),
                    ));
                }
            }
        }
        if result.is_err() {
            continue;
        }
        // Our pieces of this round, in order, from each aggregator's reply.
        for (k, p) in pieces.iter().enumerate().filter(|(_, p)| p.round == round) {
            let (msg, pos) = (&back[aggs[p.dom]], &mut cursor[aggs[p.dom]]);
            let len = take_u64(msg, pos)? as usize;
            let data = msg
                .get(*pos..*pos + len)
                .filter(|_| len <= p.len as usize)
                .ok_or_else(|| MpiError::new(MPI_ERR_INTERN, "two-phase I/O: truncated reply"))?;
            *pos += len;
            out[at[k]..at[k] + len].copy_from_slice(data);
            got_back[k] = len;
        }
    }
    if is_agg {
        oxmpi_base::verbose!(
            FCOLL,
            10,
            "fcoll two_phase: {} {}: aggregator {} of {}: {} bytes of {} rank(s) in {} contiguous block(s){}",
            if write { "write" } else { "read" },
            f.path.display(),
            f.rank,
            aggs.len(),
            tally.bytes,
            tally.ranks.iter().filter(|&&x| x).count(),
            tally.blocks,
            if rounds > 1 {
                format!(", {rounds} rounds of at most {cbs} bytes (cb_buffer_size)")
            } else {
                String::new()
            }
        );
    }
    if write {
        let failed = c
            .allgather_i64(&[i64::from(result.is_err())])
            .map_err(internal("two-phase I/O"))?;
        result?;
        if let Some(a) = failed.iter().position(|&x| x != 0) {
            return Err(MpiError::new(
                MPI_ERR_IO,
                format!(
                    "{}: the aggregator rank {a} failed to write",
                    f.path.display()
                ),
            ));
        }
        return Ok(total);
    }
    result?;
    Ok(read_count(&pieces, &got_back))
}

/// The bytes a read got before the first one past the end of the file: the pieces in
/// order, up to and including the first that came back short.
fn read_count(pieces: &[Piece], got: &[usize]) -> usize {
    let mut done = 0;
    for (p, &k) in pieces.iter().zip(got) {
        done += k;
        if k < p.len as usize {
            break;
        }
    }
    done
}

/// The aggregator's part of one round: merge the received pieces into blocks and write
/// them, or read the blocks and put each rank's pieces into its reply (status first, then
/// per piece the byte count and the bytes); adds what it did to `tally`.
fn aggregate(
    f: &FileObj,
    write: bool,
    got: &[Vec<u8>],
    replies: &mut [Vec<u8>],
    tally: &mut Tally,
) -> MpiResult<()> {
    let parsed: Vec<Vec<(u64, u64, usize)>> = got
        .iter()
        .map(|m| parse_pieces(m, write))
        .collect::<MpiResult<_>>()?;
    let all: Vec<(u64, u64)> = parsed.iter().flatten().map(|p| (p.0, p.1)).collect();
    let blks = blocks(&all);
    tally.bytes += blks.iter().map(|b| b.1).sum::<u64>();
    tally.blocks += blks.len();
    for (seen, p) in tally.ranks.iter_mut().zip(&parsed) {
        *seen |= !p.is_empty();
    }
    let mut bufs: Vec<Vec<u8>> = blks.iter().map(|b| vec![0u8; b.1 as usize]).collect();
    let place = |off: u64| -> (usize, usize) {
        let b = blks.partition_point(|x| x.0 <= off) - 1;
        (b, (off - blks[b].0) as usize)
    };
    if write {
        // Pieces in rank order: where pieces overlap, the higher rank's data stays.
        for (m, ps) in got.iter().zip(&parsed) {
            for &(off, len, at) in ps {
                let (b, o) = place(off);
                bufs[b][o..o + len as usize].copy_from_slice(&m[at..at + len as usize]);
            }
        }
        for (&(off, _), buf) in blks.iter().zip(&bufs) {
            f.file
                .write_all_at(buf, off)
                .map_err(|e| os_err(e, f.path.display()))?;
        }
    } else {
        let mut lens = Vec::with_capacity(blks.len());
        for (&(off, _), buf) in blks.iter().zip(bufs.iter_mut()) {
            lens.push(read_full(f, buf, off)?);
        }
        for (r, ps) in replies.iter_mut().zip(&parsed) {
            if ps.is_empty() {
                continue;
            }
            r.extend_from_slice(&0i64.to_le_bytes());
            for &(off, len, _) in ps {
                let (b, o) = place(off);
                let k = lens[b].saturating_sub(o).min(len as usize);
                r.extend_from_slice(&(k as u64).to_le_bytes());
                r.extend_from_slice(&bufs[b][o..o + k]);
            }
        }
    }
    Ok(())
}

/// This process's node, as the lowest world rank on it (`Engine::node_pid`); found once
/// per process (the node's lowest rank never changes, and `node_pid` of the process itself
/// is a `getpid` call, once per collective access before).
fn node_key() -> MpiResult<i64> {
    static KEY: OnceLock<i64> = OnceLock::new();
    if let Some(&k) = KEY.get() {
        return Ok(k);
    }
    let e = crate::backend::engine()?;
    let k = i64::from(
        (0..e.size())
            .find(|&r| e.node_pid(r).is_some())
            .unwrap_or(e.rank()),
    );
    Ok(*KEY.get_or_init(|| k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_whose_ranks_do_not_interleave_go_direct() {
        // Two ranks, one contiguous range each (disjoint, overlapping or identical).
        assert_eq!(route(&[(0, 10, 1), (10, 20, 1)], None), Route::Direct);
        assert_eq!(route(&[(0, 10, 1), (0, 10, 1)], None), Route::Direct);
        // Strided but not interleaved (rank 1's range starts where rank 0's ends).
        assert_eq!(route(&[(0, 100, 9), (100, 200, 9)], None), Route::Direct);
        // Interleaved strided accesses aggregate; so does a single rank.
        assert_eq!(route(&[(0, 100, 9), (4, 104, 9)], None), Route::Aggregate);
        assert_eq!(route(&[(0, 100, 9)], None), Route::Aggregate);
        // A rank with nothing to access does not interleave with anyone.
        assert_eq!(
            route(&[(u64::MAX, 0, 0), (0, 100, 9), (100, 120, 2)], None),
            Route::Direct
        );
        // The ROMIO hints.
        assert_eq!(
            route(&[(0, 10, 1), (10, 20, 1)], Some("enable")),
            Route::Aggregate
        );
        assert_eq!(
            route(&[(0, 100, 9), (4, 104, 9)], Some("disable")),
            Route::Direct
        );
        assert_eq!(
            route(&[(0, 10, 1), (10, 20, 1)], Some("automatic")),
            Route::Direct
        );
    }

    #[test]
    fn domains_cover_the_range_and_cut_at_their_borders() {
        let d = Domains::new(100, 200, 3); // 34, 34, 32
        assert_eq!(
            d.cut(&[(100, 100)]),
            vec![(0, 100, 34), (1, 134, 34), (2, 168, 32)]
        );
        assert_eq!(
            d.cut(&[(130, 10), (190, 10)]),
            vec![(0, 130, 4), (1, 134, 6), (2, 190, 10)]
        );
        assert_eq!(
            Domains::new(0, 10, 1).cut(&[(0, 4), (6, 4)]),
            vec![(0, 0, 4), (0, 6, 4)]
        );
        // More aggregators than bytes: the last ones get nothing.
        assert_eq!(
            Domains::new(0, 2, 4).cut(&[(0, 2)]),
            vec![(0, 0, 1), (1, 1, 1)]
        );
    }

    #[test]
    fn rounds_cut_every_domain_into_cb_buffer_size_parts() {
        let d = Domains::new(100, 200, 2); // [100, 150), [150, 200)
        assert_eq!(d.rounds(20), 3);
        let p = |dom, round, off, len| Piece {
            dom,
            round,
            off,
            len,
        };
        assert_eq!(
            d.cut_rounds(&[(110, 60)], 20),
            vec![
                p(0, 0, 110, 10),
                p(0, 1, 120, 20),
                p(0, 2, 140, 10),
                p(1, 0, 150, 20)
            ]
        );
        // Rounds restart at each domain's start; segments keep their order.
        assert_eq!(
            d.cut_rounds(&[(190, 10), (100, 5)], 20),
            vec![p(1, 2, 190, 10), p(0, 0, 100, 5)]
        );
        // One round when the buffer holds a whole domain; none for an empty range.
        assert_eq!(d.rounds(CB_BUFFER_SIZE), 1);
        assert_eq!(Domains::new(5, 5, 1).rounds(1), 0);
        assert_eq!(cb_buffer_size(Some("4096")), 4096);
        for ignored in [None, Some("0"), Some("-1"), Some("big")] {
            assert_eq!(cb_buffer_size(ignored), CB_BUFFER_SIZE, "{ignored:?}");
        }
    }

    #[test]
    fn a_short_piece_ends_the_count_of_a_read() {
        let p = |len| Piece {
            dom: 0,
            round: 0,
            off: 0,
            len,
        };
        let pieces = [p(4), p(4), p(4)];
        assert_eq!(read_count(&pieces, &[4, 4, 4]), 12);
        assert_eq!(read_count(&pieces, &[4, 2, 4]), 6);
        assert_eq!(read_count(&pieces, &[0, 0, 0]), 0);
    }

    #[test]
    fn cb_nodes_limits_and_spreads_the_aggregators() {
        let per_node = [0, 4, 8, 12];
        assert_eq!(limit_aggregators(&per_node, None), per_node);
        assert_eq!(limit_aggregators(&per_node, Some("2")), [0, 8]);
        assert_eq!(limit_aggregators(&per_node, Some("3")), [0, 4, 8]);
        assert_eq!(limit_aggregators(&per_node, Some("1")), [0]);
        for ignored in ["4", "9", "0", "-1", "many", ""] {
            assert_eq!(
                limit_aggregators(&per_node, Some(ignored)),
                per_node,
                "{ignored}"
            );
        }
    }

    #[test]
    fn interleaved_pieces_merge_into_one_block() {
        // Four ranks writing every fourth 8-byte piece of [0, 128).
        let pieces: Vec<(u64, u64)> = (0..16).map(|i| ((i * 8) as u64, 8)).rev().collect();
        assert_eq!(blocks(&pieces), vec![(0, 128)]);
        assert_eq!(
            blocks(&[(10, 5), (0, 4), (12, 10), (30, 0)]),
            vec![(0, 4), (10, 12)]
        );
    }

    #[test]
    fn messages_round_trip() {
        let mut m = Vec::new();
        put_piece(&mut m, 7, 3);
        m.extend_from_slice(b"abc");
        put_piece(&mut m, 20, 0);
        assert_eq!(
            parse_pieces(&m, true).unwrap(),
            vec![(7, 3, 16), (20, 0, 35)]
        );
        let mut r = Vec::new();
        put_piece(&mut r, 1, 2);
        assert_eq!(parse_pieces(&r, false).unwrap(), vec![(1, 2, 16)]);
        assert!(parse_pieces(&m[..20], true).is_err());
        assert!(parse_pieces(&m[..5], false).is_err());
    }
}
