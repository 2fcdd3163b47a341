//! Component selection per call: the `sm` component where it applies (every rank of an
//! intracommunicator on this node, data within its limits, `coll_sm_enable` on, no
//! algorithm forced), the `tuned` point-to-point algorithms otherwise.
//!
//! Every rank takes the same decision at every collective: it depends only on the
//! communicator and on arguments MPI requires to match. Data is bytes; the caller packs
//! non-contiguous datatypes first.

use crate::base::stats::{count, Alg};
use crate::sm;
use crate::tune::Coll;
use crate::{CollComm, Op, Result};

/// Barrier.
#[inline]
pub fn barrier(a: &CollComm) -> Result<()> {
    if let Some(seg) = sm::get(a, Coll::Barrier)? {
        count(a.shadow, Alg::SmBarrier);
        seg.barrier();
        return Ok(());
    }
    a.barrier()
}

/// Broadcast of `buf` from `root` (every rank passes the same length).
#[inline]
pub fn bcast(a: &CollComm, buf: &mut [u8], root: i32) -> Result<()> {
    let n = buf.len();
    if n > 0 && n <= sm::DATA {
        if let Some(seg) = sm::get(a, Coll::Bcast)? {
            count(a.shadow, Alg::SmBcast);
            seg.bcast(buf, root as usize);
            return Ok(());
        }
    }
    a.bcast(buf, root)
}

/// Allreduce into `dst`: our contribution is `src` (`None`: it is in `dst`; otherwise as
/// long as `dst`). `f` computes `inout = in ∘ inout` on whole elements of `elem_size`
/// bytes; every component combines in rank order, so `∘` need only be associative
/// (`commutative` lets the tuned component pick algorithms that reorder).
///
/// At most [`sm::DATA`] bytes go through the `sm` segment; from
/// `coll_sm_allreduce_large_min` up to [`sm::BIG_MAX`] bytes through its large region
/// (when it can be used); everything else through the tuned algorithms (measured faster
/// in between on a loaded 2-core machine: the large region's three synchronisations cost
/// more than they save).
pub fn allreduce<F: Fn(&[u8], &mut [u8])>(
    a: &CollComm,
    src: Option<&[u8]>,
    dst: &mut [u8],
    f: &F,
    elem_size: usize,
    commutative: bool,
) -> Result<()> {
    let bytes = dst.len();
    let small = bytes <= sm::DATA;
    let large =
        (sm::params::allreduce_large_min().max(sm::DATA + 1)..=sm::BIG_MAX).contains(&bytes);
    let seg = if bytes > 0 && (small || large) {
        sm::get(a, Coll::Allreduce)?
    } else {
        None
    };
    if let Some(seg) = &seg {
        if !small && seg.allreduce_big(a, src, dst, elem_size, f)? {
            count(a.shadow, Alg::SmAllreduce);
            return Ok(());
        }
    }
    if let Some(s) = src {
        dst.copy_from_slice(s);
    }
    if let (Some(seg), true) = (&seg, small) {
        count(a.shadow, Alg::SmAllreduce);
        seg.allreduce(dst, f);
        return Ok(());
    }
    let op = Op {
        f,
        elem_size,
        commutative,
    };
    a.allreduce(dst, &op)
}

/// Alltoall: block `j` (`block` bytes) of `send` goes to rank `j`, block `j` of `recv`
/// comes from rank `j`.
#[inline]
pub fn alltoall(a: &CollComm, send: &[u8], recv: &mut [u8], block: usize) -> Result<()> {
    let n = a.size as usize;
    if n > 1 && block > 0 && n * block <= sm::DATA {
        if let Some(seg) = sm::get(a, Coll::Alltoall)? {
            count(a.shadow, Alg::SmAlltoall);
            seg.alltoall(send, recv, block);
            return Ok(());
        }
    }
    a.alltoall(send, recv, block)
}

/// Reduce to `root`: our contribution is `send` (`None` at the root in place: it is in
/// `recv`); at the root, `recv` receives the result (other ranks pass `None`). `f` as
/// for [`allreduce`]. At most [`sm::DATA`] bytes go through the `sm` segment (every rank
/// folded in rank order at the root), the rest through the tuned binomial tree
/// ([`CollComm::reduce_into`]), without copying the input.
pub fn reduce<F: Fn(&[u8], &mut [u8])>(
    a: &CollComm,
    send: Option<&[u8]>,
    recv: Option<&mut [u8]>,
    root: i32,
    f: &F,
    elem_size: usize,
    commutative: bool,
) -> Result<()> {
    let bytes = send.map_or_else(|| recv.as_deref().map_or(0, <[u8]>::len), <[u8]>::len);
    let sm_ok = a.rank != root || recv.as_ref().is_some_and(|r| r.len() == bytes);
    if bytes > 0 && bytes <= sm::DATA && sm_ok && (0..a.size).contains(&root) {
        if let Some(seg) = sm::get(a, Coll::Reduce)? {
            count(a.shadow, Alg::SmReduce);
            seg.reduce(send, recv, root as usize, f);
            return Ok(());
        }
    }
    let op = Op {
        f,
        elem_size,
        commutative,
    };
    a.reduce_into(send, recv, root, &op)
}

/// Inclusive scan (`exclusive`: exclusive scan, rank 0's `recv` left untouched) of our
/// contribution `send` (`None`: it is in `recv`, in place) into `recv`. `f` as for
/// [`allreduce`]. At most [`sm::DATA`] bytes go through the `sm` segment (each rank folds
/// the contributions up to its own in rank order), the rest through recursive doubling ([`CollComm::scan_into`]).
#[allow(clippy::too_many_arguments)]
pub fn scan<F: Fn(&[u8], &mut [u8])>(
    a: &CollComm,
    send: Option<&[u8]>,
    recv: &mut [u8],
    exclusive: bool,
    f: &F,
    elem_size: usize,
    commutative: bool,
) -> Result<()> {
    let n = recv.len();
    if n > 0 && n <= sm::DATA && send.is_none_or(|s| s.len() == n) {
        if let Some(seg) = sm::get(a, Coll::Scan)? {
            count(a.shadow, Alg::SmScan);
            seg.scan(send, recv, exclusive, f);
            return Ok(());
        }
    }
    let op = Op {
        f,
        elem_size,
        commutative,
    };
    a.scan_into(send, recv, exclusive, &op)
}
